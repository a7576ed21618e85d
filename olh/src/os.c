/* Address space: reservations, commits, and (for debug pools) the spaces a
 * collection left behind, kept inaccessible so that a stale raw address
 * faults and is named. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

void *olh_os_reserve(uint64_t bytes, bool accessible)
{
    void *p = mmap(NULL, bytes, accessible ? PROT_READ | PROT_WRITE : PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int olh_os_commit(void *at, uint64_t bytes)
{
    return mprotect(at, bytes, PROT_READ | PROT_WRITE) == 0 ? OLH_OK : OLH_ENOMEM;
}

void olh_os_release(void *at, uint64_t bytes)
{
    if (at)
        munmap(at, bytes);
}

/* Retired spaces of debug pools: a fixed ring; the oldest is released when
 * it is full. Read by the fault handler, so entries are written before
 * they are published. */
#define RETIRED 256
static struct retired {
    char *start;
    uint64_t bytes;
    char what[48];
    uint64_t collection;
} retired[RETIRED];
static unsigned nretired;
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction previous_segv;
static bool handler_installed;

static void on_fault(int sig, siginfo_t *info, void *uctx)
{
    char *addr = info->si_addr;
    for (unsigned i = 0; i < RETIRED; i++) {
        struct retired *r = &retired[i];
        if (r->start && addr >= r->start && addr < r->start + r->bytes) {
            char line[200];
            int n = snprintf(line, sizeof line,
                             "olh: access at %p through a raw address into pool '%s' from before "
                             "its collection %llu (a collection invalidates raw addresses)\n",
                             (void *)addr, r->what, (unsigned long long)r->collection);
            if (n > 0)
                (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
            signal(SIGABRT, SIG_DFL);
            raise(SIGABRT);
            _exit(134);
        }
    }
    /* Not ours: the previous disposition, then the fault again. */
    sigaction(SIGSEGV, &previous_segv, NULL);
    (void)sig;
    (void)uctx;
}

void olh_os_retire(void *at, uint64_t bytes, const char *what, uint64_t collection)
{
    if (mmap(at, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
             0) == MAP_FAILED) {
        munmap(at, bytes);
        return;
    }
    pthread_mutex_lock(&retired_lock);
    if (!handler_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, &previous_segv) == 0)
            handler_installed = true;
    }
    struct retired *r = &retired[nretired++ % RETIRED];
    char *old = r->start;
    uint64_t old_bytes = r->bytes;
    r->start = NULL;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (old)
        munmap(old, old_bytes);
    r->bytes = bytes;
    r->collection = collection;
    snprintf(r->what, sizeof r->what, "%s", what);
    __atomic_store_n(&r->start, (char *)at, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&retired_lock);
}
