/* cohort-measure: runs a command and reports what it cost, for `cohort bench`.
 *
 * Why not wait4() from Python: Linux counts the memory of the process that
 * forked a child into the child's peak RSS (exec keeps the old image's high
 * water mark), so every program Python starts reports at least Python's own
 * footprint. Forked from this small process instead, the command's ru_maxrss
 * is its own.
 *
 * Usage: cohort-measure FD PROG ARGS...
 * PROG gets LD_PRELOAD=$COHORT_MEASURE_PRELOAD (if set; this program runs
 * without the preload, so that a preloaded allocator neither runs in it nor
 * writes statistics when it exits). Writes "WAITSTATUS MAXRSS_KB UTIME_S STIME_S\n" to file descriptor FD when
 * PROG ends, and exits 0; if PROG cannot be started, says why on stderr and
 * exits 127. Standard input, output and error are PROG's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: cohort-measure FD PROG ARGS...\n");
    return 2;
  }
  char *end;
  long fd = strtol(argv[1], &end, 10);
  if (*end || fd < 0) {
    fprintf(stderr, "cohort-measure: bad descriptor %s\n", argv[1]);
    return 2;
  }
  int gate[2];   /* closed on a successful exec; carries errno otherwise */
  if (pipe2(gate, O_CLOEXEC) != 0) return 127;
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "cohort-measure: fork: %s\n", strerror(errno));
    return 127;
  }
  if (pid == 0) {
    close(gate[0]);
    close((int)fd);
    const char *preload = getenv("COHORT_MEASURE_PRELOAD");
    if (preload) {
      setenv("LD_PRELOAD", preload, 1);
      unsetenv("COHORT_MEASURE_PRELOAD");
    }
    execvp(argv[2], argv + 2);
    int e = errno;
    if (write(gate[1], &e, sizeof e) < 0) _exit(127);
    _exit(127);
  }
  close(gate[1]);
  int e;
  if (read(gate[0], &e, sizeof e) == (ssize_t)sizeof e) {
    waitpid(pid, NULL, 0);
    fprintf(stderr, "cohort-measure: cannot run %s: %s\n", argv[2], strerror(e));
    return 127;
  }
  close(gate[0]);
  /* The command may be stopped and continued by a terminal; it is ours to
   * wait for, and the signals that would end it are its own business. */
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  int status;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0)
    if (errno != EINTR) return 127;
  dprintf((int)fd, "%d %ld %ld.%06ld %ld.%06ld\n", status, ru.ru_maxrss, (long)ru.ru_utime.tv_sec,
          (long)ru.ru_utime.tv_usec, (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec);
  return 0;
}
