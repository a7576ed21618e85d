/* What went wrong: the calling thread's last error for calls that return a
 * status, and one-line aborts for misuse that would otherwise corrupt. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static _Thread_local char last_error[256];

int olh_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

_Noreturn void olh_die(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n] = '\n';
    fputs("olh: ", stderr);
    fwrite(line, 1, (size_t)n + 1, stderr);
    fflush(stderr);
    abort();
}

const char *olh_strerror(int status)
{
    switch (status) {
    case OLH_OK: return "success";
    case OLH_EINVAL: return "invalid argument";
    case OLH_ENOMEM: return "out of memory";
    case OLH_ERANGE: return "pool full";
    default: return "unknown status";
    }
}

const char *olh_error(void)
{
    return last_error;
}
