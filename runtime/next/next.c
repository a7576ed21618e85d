/* Cohort runtime: the next allocator in the search order (glibc, or jemalloc
 * or tcmalloc preloaded behind us) and the bootstrap arena that serves the
 * allocations dlsym itself makes while we look that allocator up. */
#define _GNU_SOURCE
#include "next.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <string.h>

atomic_int ch_next_state;
static CH_TLS int resolving_here;
static void *first_malloc(size_t size);
static void first_free(void *p);
struct ch_next ch_next = {.malloc = first_malloc, .free = first_free};

/* ------------------------------------------------------- bootstrap arena */

/* Bump-only and never reused: it serves a handful of start-up requests.
 * Each block has a 16-byte header holding its size, so usable size and
 * realloc work on it. */
#define BOOT_SIZE (256u << 10)
static _Alignas(4096) char boot_arena[BOOT_SIZE];
static atomic_size_t boot_used;

bool ch_bootstrap_owns(const void *p) {
  return (const char *)p >= boot_arena && (const char *)p < boot_arena + BOOT_SIZE;
}

void *ch_bootstrap_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  if (size > BOOT_SIZE || align > 4096) return NULL;
  size_t old = atomic_load(&boot_used), start, next;
  do {
    start = (old + 16 + align - 1) & ~(align - 1);
    next = start + ((size + 15) & ~(size_t)15);
    if (next > BOOT_SIZE) { errno = ENOMEM; return NULL; }
  } while (!atomic_compare_exchange_weak(&boot_used, &old, next));
  ((size_t *)(boot_arena + start))[-1] = size;
  return boot_arena + start;   /* static storage: already zero */
}

size_t ch_bootstrap_size(const void *p) { return ((const size_t *)p)[-1]; }

/* ------------------------------------------------------------ resolution */

static bool is_ready(void) { return atomic_load_explicit(&ch_next_state, memory_order_acquire) == 2; }

static void *first_malloc(size_t size) {
  ch_next_resolve();
  return is_ready() ? ch_next.malloc(size) : ch_bootstrap_alloc(size, 16);
}

static void first_free(void *p) {
  if (ch_bootstrap_owns(p)) return;
  ch_next_resolve();
  if (is_ready()) ch_next.free(p);   /* else dlsym is freeing its own: leaked */
}

/* Once the arena has served a request, free must keep recognising its
 * blocks; if it never has, free goes straight to the next allocator. */
static void (*real_free)(void *);
static void free_past_boot(void *p) {
  if (!ch_bootstrap_owns(p)) real_free(p);
}

static void *same_module(void *fn, const void *base) {
  Dl_info di;
  if (!fn) return NULL;
  if (!dladdr(fn, &di) || di.dli_fbase != base) return NULL;
  return fn;
}

/* Look the next allocator up. Functions the allocator behind malloc does not
 * define are left NULL (alloc.c builds them from posix_memalign) rather than
 * taken from a different library, whose pointers the next free would not know. */
void ch_next_resolve(void) {
  if (atomic_load_explicit(&ch_next_state, memory_order_acquire) == 2) return;
  if (resolving_here) return;   /* dlsym allocating: the caller uses the arena */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&ch_next_state, &expected, 1)) {
    while (atomic_load_explicit(&ch_next_state, memory_order_acquire) != 2) sched_yield();
    return;
  }
  resolving_here = 1;
  struct ch_next n;
  memset(&n, 0, sizeof n);
  n.malloc = dlsym(RTLD_NEXT, "malloc");
  n.free = dlsym(RTLD_NEXT, "free");
  if (!n.malloc || !n.free) ch_fatal("cannot find the next allocator's malloc and free");
  Dl_info di;
  const void *base = dladdr((void *)n.malloc, &di) ? di.dli_fbase : NULL;
  n.calloc = same_module(dlsym(RTLD_NEXT, "calloc"), base);
  n.realloc = same_module(dlsym(RTLD_NEXT, "realloc"), base);
  n.memalign = same_module(dlsym(RTLD_NEXT, "memalign"), base);
  n.posix_memalign = same_module(dlsym(RTLD_NEXT, "posix_memalign"), base);
  n.aligned_alloc = same_module(dlsym(RTLD_NEXT, "aligned_alloc"), base);
  n.valloc = same_module(dlsym(RTLD_NEXT, "valloc"), base);
  n.pvalloc = same_module(dlsym(RTLD_NEXT, "pvalloc"), base);
  n.malloc_usable_size = same_module(dlsym(RTLD_NEXT, "malloc_usable_size"), base);
  n.malloc_trim = same_module(dlsym(RTLD_NEXT, "malloc_trim"), base);
  /* Only the allocator's own: libstdc++'s operator new calls malloc, ours. */
  n.new_ = same_module(dlsym(RTLD_NEXT, "_Znwm"), base);
  /* Its sized delete knows the block's size class without looking it up
   * (jemalloc's: 5 instructions a free); not for the arena's blocks. */
  n.delete_sized = same_module(dlsym(RTLD_NEXT, "_ZdlPvm"), base);
  if (!n.realloc || !n.posix_memalign)
    ch_fatal("the next allocator lacks realloc or posix_memalign");
  real_free = n.free;
  if (atomic_load(&boot_used)) {
    n.free = free_past_boot;
    n.delete_sized = NULL;
  }
  ch_next = n;
  resolving_here = 0;
  atomic_store_explicit(&ch_next_state, 2, memory_order_release);
}
