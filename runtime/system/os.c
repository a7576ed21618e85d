/* Cohort runtime: everything that talks to the kernel directly.
 * Nothing here may call malloc: this code runs inside malloc. */
#define _GNU_SOURCE
#include "system.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t ch_os_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

size_t ch_page_size(void) {
  static size_t ps;
  if (!ps) ps = (size_t)sysconf(_SC_PAGESIZE);
  return ps;
}

/* ---------------------------------------------------------------- locks */

void ch_lock_init(ch_lock_t *l) { atomic_store(&l->v, 0); }

bool ch_trylock(ch_lock_t *l) {
  return !atomic_load_explicit(&l->v, memory_order_relaxed) &&
         !atomic_exchange_explicit(&l->v, 1, memory_order_acquire);
}

void ch_lock(ch_lock_t *l) {
  for (unsigned spins = 0;; spins++) {
    if (ch_trylock(l)) return;
    if (spins > 64) sched_yield();
    else __builtin_ia32_pause();
  }
}

void ch_unlock(ch_lock_t *l) { atomic_store_explicit(&l->v, 0, memory_order_release); }

/* ------------------------------------------------------- address space */

void *ch_os_reserve(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Reserve size bytes aligned to align (a power of two), without access, by
 * over-reserving. Parts are given access as they are used (ch_os_commit), so
 * a wild write into reserved memory faults instead of landing silently. The
 * ends the alignment leaves over stay reserved, without access: trimmed,
 * they would be holes of a size that changes with where the kernel put the
 * mapping, which the program's or the next allocator's later mappings fill
 * on some runs and not others, so that their objects' order against ours
 * would change from run to run (docs/runtime.md, "The same layout every
 * run"). Address space only: no page is ever touched. */
void *ch_os_reserve_aligned(size_t size, size_t align) {
  size_t span = size + align;
  void *m = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return NULL;
  return (void *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
}

void ch_os_release(void *p, size_t size) { munmap(p, size); }

void ch_os_purge(void *p, size_t size) { madvise(p, size, MADV_DONTNEED); }

bool ch_os_commit(void *p, size_t size) { return mprotect(p, size, PROT_READ | PROT_WRITE) == 0; }

/* Give the pages back and take access away, in one call. */
void ch_os_decommit(void *p, size_t size) {
  if (mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
    madvise(p, size, MADV_DONTNEED);   /* out of mappings: at least the pages go */
}

/* ------------------------------------------------------------ metadata */

static ch_lock_t meta_lock;
static char *meta_cur, *meta_end;

void *ch_meta_alloc(size_t size) {
  size = (size + 15) & ~(size_t)15;
  ch_lock(&meta_lock);
  if ((size_t)(meta_end - meta_cur) < size) {
    size_t block = size > (1u << 20) ? size : (1u << 20);
    char *p = ch_os_reserve(block);
    if (!p) { ch_unlock(&meta_lock); return NULL; }
    meta_cur = p;
    meta_end = p + block;
  }
  void *r = meta_cur;
  meta_cur += size;
  ch_unlock(&meta_lock);
  return r;
}

/* ----------------------------------------------------------------- files */

/* Read a whole file into fresh mapped memory (the caller keeps it). */
int ch_read_file(const char *path, char **data, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st;
  if (fstat(fd, &st) != 0) { int e = errno; close(fd); return e; }
  if (!S_ISREG(st.st_mode)) { close(fd); return EINVAL; }
  size_t cap = (size_t)st.st_size + 1;
  char *buf = ch_os_reserve(cap);
  if (!buf) { close(fd); return ENOMEM; }
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = 0;
  *data = buf;
  *len = n;
  return 0;
}

int ch_map_file(const char *path, const char **data, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st;
  if (fstat(fd, &st) != 0) { int e = errno; close(fd); return e; }
  if (!S_ISREG(st.st_mode) || st.st_size <= 0) { close(fd); return EINVAL; }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) return e;
  *data = p;
  *len = (size_t)st.st_size;
  return 0;
}

/* A thread's stack, from /proc/self/maps, read through a buffer on the
 * stack (no allocation, no lock: the C library's pthread_getattr_np takes
 * the thread's lock, which the program holds when its own call of it makes
 * the thread's first allocation): the mapping that holds `at`, an address
 * on it. The main thread's grows down as far as RLIMIT_STACK allows, but
 * not into the mapping below (under Valgrind it is not the one marked
 * [stack], which is Valgrind's own). */
bool ch_os_stack_of(uintptr_t at, bool main_thread, uintptr_t *lo, uintptr_t *hi) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  uintptr_t below = 0;   /* the end of the mapping before the current line's */
  bool found = false;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
    buf[have] = 0;
    char *line = buf, *nl;
    while ((nl = strchr(line, '\n'))) {
      *nl = 0;
      char *end;
      uintptr_t a = (uintptr_t)strtoull(line, &end, 16), b = *end == '-' ? (uintptr_t)strtoull(end + 1, &end, 16) : 0;
      if (a <= at && at < b) {
        struct rlimit rl;
        *lo = a;
        *hi = b;
        if (main_thread)
          *lo = getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < b - below
                ? b - rl.rlim_cur : below;
        found = true;
        break;
      }
      below = b;
      line = nl + 1;
    }
    if (found) break;
    have = (size_t)(buf + have - line);   /* the partial line goes to the front */
    memmove(buf, line, have);
    if (have == sizeof buf - 1) break;    /* a line longer than the buffer: give up */
  }
  close(fd);
  return found && *lo < *hi;
}

void ch_write_all(int fd, const char *buf, size_t len) {
  while (len) {
    ssize_t w = write(fd, buf, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    buf += w;
    len -= (size_t)w;
  }
}
