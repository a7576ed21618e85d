/* Cohort runtime: the system layer: what every file may use. The macros, limits and the
 * block size every layer shares; os.c (memory, files, locks, stacks),
 * log.c, options.c. libc system calls only, never malloc.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_SYSTEM_H
#define COHORT_SYSTEM_H


#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#define CH_EXPORT __attribute__((visibility("default")))
#define CH_HIDDEN __attribute__((visibility("hidden")))
#define CH_LIKELY(x) __builtin_expect(!!(x), 1)
#define CH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CH_NOINLINE __attribute__((noinline))
#define CH_TLS __thread __attribute__((tls_model("initial-exec")))
/* The frame address of the calling entry point, for the stack walk. A call
 * that is handed it goes through CH_KEEP_FRAME, so the compiler cannot turn
 * it into a sibling call that pops the frame first. */
#define CH_ENTRY_FRAME() ((const uintptr_t *)__builtin_frame_address(0))
/* Where the entry point's frame would be, for a lane that the entry point
 * reached by a tail call and that keeps no frame: two words below its CFA,
 * the return address at [1]. Only the return address and the stack above
 * it may be read through it; [0] is not a saved %rbp. */
#define CH_LANE_FRAME() ((const uintptr_t *)__builtin_dwarf_cfa() - 2)
#define CH_KEEP_FRAME(call) __extension__({ __typeof__(call) r_ = (call); \
                                             __asm__ volatile("" ::: "memory"); r_; })

#define CH_BUILD_ID_MAX 32   /* bytes of a GNU build id kept (SHA-1 is 20): modules and plans */
#define CH_MAX_GROUPS 64
/* The last group belongs to the explicit pool API (pool.c): every pool's
 * chunks are that group's, each pool a heap of its own. Plans, the controls
 * and the online policies name the groups below it. */
#define CH_POOL_GROUP (CH_MAX_GROUPS - 1)
#define CH_PLAN_GROUPS CH_POOL_GROUP
/* Blocks are whole 16-byte granules, so every block is 16-aligned, as the
 * x86-64 ABI asks of malloc (max_align_t) and glibc and jemalloc give: with
 * 8-byte granules a 32-byte block could start at 8 mod 16, and a program
 * copying a struct of __int128 members (movaps) crashed (tests/programs/
 * aligned.cc). */
#define CH_MIN_ALIGN 16
#define CH_GRANULE 16
/* The smallest block of a group chunk: a free block holds its bin link and
 * its chunk's free key (heap.c). */
#define CH_MIN_BLOCK 16
/* Blocks up to CH_EXACT_MAX bytes are whole granules; above it a request is
 * rounded up to one of four size classes per power of two (320, 384, 448,
 * 512, 640, ...), as jemalloc's are. A freed block then fits exactly the next
 * request of its class: with every multiple of 16 a size of its own, random
 * sizes of 256 B to 1 KiB left holes that fitted no later request, and a
 * thread replacing random blocks held 30 MB for 7 MB live (glibc: 10 MB;
 * docs/runtime.md, "Size classes"). */
#define CH_EXACT_MAX 256
_Static_assert(CH_MIN_BLOCK <= CH_GRANULE, "a granule holds the smallest block");
static inline size_t ch_block_size(size_t request) {
  /* Up to CH_EXACT_MAX: request - 1 rounded down, plus a granule, which
   * needs no floor (a compare and a conditional move fewer on every fast
   * path); request 0 wraps round and takes the floor below. */
  size_t m = request - 1;
  if (m < CH_EXACT_MAX) return (m & ~(size_t)(CH_GRANULE - 1)) + CH_GRANULE;
  /* Above: m with the bits below a quarter of its power of two set, plus
   * one, which is the rounding below written for any request far from
   * SIZE_MAX (a quarter is at least 64, so it rounds to a granule too): 9
   * instructions, where the rounding below took 17 (a pair of allocbench
   * sizes 257..319 under all). */
  if (m < (size_t)1 << 48) return (m | (((size_t)1 << (61u - (unsigned)__builtin_clzll(m))) - 1)) + 1;
  size_t n = (request + CH_GRANULE - 1) & ~(size_t)(CH_GRANULE - 1);
  if (n <= CH_EXACT_MAX) return CH_MIN_BLOCK;   /* request 0, or one so large it wrapped round */
  size_t quarter = (size_t)1 << (61u - (unsigned)__builtin_clzll(n - 1));
  size_t c = (n + quarter - 1) & ~(quarter - 1);
  return c < n ? n : c;   /* within a quarter of SIZE_MAX: the callers' size checks refuse it */
}

/* ------------------------------------------------------------------ os.c */
void *ch_os_reserve(size_t size);                 /* demand-paged, NULL on failure */
void *ch_os_reserve_aligned(size_t size, size_t align);   /* without access; the ends the alignment
                                                            leaves stay reserved for good */
bool ch_os_commit(void *p, size_t size);          /* read-write access; false: refused */
void ch_os_decommit(void *p, size_t size);        /* pages back, access removed */
void ch_os_release(void *p, size_t size);         /* munmap */
void ch_os_purge(void *p, size_t size);           /* MADV_DONTNEED: give pages back */
void *ch_meta_alloc(size_t size);                 /* zeroed, never freed, 16-aligned */
int ch_read_file(const char *path, char **data, size_t *len); /* 0 or errno */
int ch_map_file(const char *path, const char **data, size_t *len); /* read-only, shared with the page cache: 0 or errno */
bool ch_os_stack_of(uintptr_t at, bool main_thread, uintptr_t *lo, uintptr_t *hi);   /* a thread's stack */
/* The thread pointer (%fs:0), and where a static TLS object of this thread
 * lies from it: the same offset in every thread (initial-exec), which the
 * stubs that write per-thread state use. */
static inline uintptr_t ch_thread_pointer(void) {
  uintptr_t tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));
  return tp;
}
static inline intptr_t ch_tls_offset(const void *p) { return (intptr_t)((uintptr_t)p - ch_thread_pointer()); }
void ch_write_all(int fd, const char *buf, size_t len);
size_t ch_page_size(void);
uint64_t ch_os_now_ms(void);                      /* monotonic, coarse */

/* A lock that never allocates and is safe to hold across fork handlers. */
typedef struct { atomic_int v; } ch_lock_t;
void ch_lock(ch_lock_t *l);
bool ch_trylock(ch_lock_t *l);   /* true: taken */
void ch_unlock(ch_lock_t *l);
void ch_lock_init(ch_lock_t *l);

/* ----------------------------------------------------------------- log.c */
void ch_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ch_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void ch_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------- options.c */
enum ch_mode { CH_MODE_OFF, CH_MODE_PLAN, CH_MODE_ALL, CH_MODE_RANDOM, CH_MODE_DPA, CH_MODE_MO };
struct ch_options {
  enum ch_mode mode;
  unsigned random_pools;      /* CH_MODE_RANDOM: number of pools */
  uint64_t seed;
  size_t chunk_size;          /* power of two */
  size_t max_size;            /* largest grouped request (0: from the plan) */
  unsigned max_spares;        /* empty chunks kept ready, process-wide */
  const char *plan_path;
  const char *stats_path;
  const char *prefetch_path;  /* COHORT_PREFETCH: loads to prefetch for (prefetch.c) */
  bool verbose;
  bool patch;                 /* COHORT_PATCH: rewrite selector call sites (default on) */
  bool check;                 /* COHORT_CHECK: redzones around grouped blocks (check.c) */
  unsigned dpa_min_objects;   /* COHORT_DPA_MIN_OBJECTS: a DPA group's objects before its pool */
  size_t dpa_max_size;        /* COHORT_DPA_MAX_SIZE: DPA's largest pooled object */
  unsigned mo_hot;            /* COHORT_MO_HOT: a call site's requests before MO inspects it */
  int rest_one;               /* COHORT_REST: 1 one, 0 size; -1 unset: as the plan says */
  unsigned rebase_min;        /* COHORT_REBASE_MIN: percent of a plan's selectors another build must keep */
};
extern struct ch_options ch_opt;
void ch_options_load(void);

#endif
