/* Cohort runtime: declarations shared by the runtime's own files.
 *
 * Layers, bottom up; the table in runtime/README.md is the one that says
 * which file belongs where and what each may use (every file sees this
 * whole header, so no compiler holds a file to its layer):
 *   system        os.c, log.c, options.c
 *   next          next.c (the next allocator, the bootstrap arena)
 *   memory        chunk.c, heap.c, check.c, counters.c
 *   context       modules.c, cfi.c, unwind.c
 *   decision      plan.c, plan_bind.c, patch.c, direct.c, activation.c, wrapper.c,
 *                 chain_trie.c, dpa.c, hint.c, ssg.c, mo.c, prefetch.c, identify.c
 *   reporting     stats.c
 *   entry points  alloc.c, new.c, pool.c, threads.c, init.c
 * The banners below group declarations by concern; a few stand under a
 * file that uses them rather than the one that defines them (struct
 * ch_thread, defined in init.c; ch_patch_stats, in patch.c;
 * ch_plan_bind_module, in plan_bind.c), until this
 * header is split by layer.
 */
#ifndef COHORT_INTERNAL_H
#define COHORT_INTERNAL_H

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
bool ch_os_stack_of(uintptr_t at, bool main_thread, uintptr_t *lo, uintptr_t *hi);   /* a thread's stack */
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
};
extern struct ch_options ch_opt;
void ch_options_load(void);

/* ---------------------------------------------------------------- next.c */
struct ch_next {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*memalign)(size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*malloc_usable_size)(void *);
  int (*malloc_trim)(size_t);   /* NULL where it has none (jemalloc) */
  void *(*new_)(size_t);   /* its own operator new (jemalloc's, tcmalloc's), NULL if it has none */
  void (*delete_sized)(void *, size_t);   /* its own sized operator delete, NULL if it has none */
};
/* malloc and free are always callable: before resolution they point at
 * functions that resolve first, so the pass-through paths need no test. */
extern struct ch_next ch_next;
extern atomic_int ch_next_state;     /* 0 unresolved, 1 resolving, 2 ready */
void ch_next_resolve(void);
bool ch_bootstrap_owns(const void *p);
void *ch_bootstrap_alloc(size_t size, size_t align);
size_t ch_bootstrap_size(const void *p);

/* --------------------------------------------------------------- chunk.c */
#define CH_NBINS 64
struct ch_heap;

/* A chunk is chunk_size bytes aligned to its size: at a per-chunk colour
 * offset the bitmaps (freed bits, then start bits, one bit per 16-byte
 * granule of the whole chunk each), a line of zeros (CH_STARTS_PAD), then
 * this header, then the objects. Colouring keeps the headers and bitmaps of
 * many chunks, all at the same offsets of 1 MiB-aligned chunks otherwise,
 * out of a few cache sets (docs/runtime.md, "The group allocator's own
 * cost"). */
struct ch_chunk {
  /* Line 0: read or written by every allocation and free. */
  _Atomic uintptr_t owner;            /* owning heap | group; the group alone when orphaned */
  char *bump;                         /* next unallocated byte */
  char *hwm;                          /* page boundary above every byte ever handed out:
                                         below it pages may be resident and dirty, above
                                         it they are zero */
  uintptr_t starts_bias;              /* p's word of start bits is this + (p >> 10) * 8
                                         (heap.c): no mask, no colour on the free path */
  uint64_t key;                       /* in the second word of every block in a bin, never
                                         in a live one; new whenever the chunk starts over,
                                         so keys left in memory above the bump pointer are
                                         stale (heap.c) */
  uint64_t frees;                     /* the owner's frees here not yet counted in its heap */
  uint32_t live_bytes;                /* owner's view (remote frees count once drained);
                                         every byte below bump is live or in a bin; 0: empty */
  uint32_t low;                       /* a free that leaves live_bytes below low must look at
                                         the chunk: it is empty, or now worth allocating
                                         from, or its statistics are due (heap.c) */
  uint32_t high;                      /* an allocation that takes live_bytes above high
                                         reports it to the statistics */
  uint32_t freed;                     /* bytes the owner has freed into the chunk, modulo
                                         2^32: the clock that says when coalescing is due */
  /* Line 1: the rest. */
  char *data;                         /* first usable byte */
  char *end;                          /* end of the chunk */
  uint64_t magic;
  uint32_t group;
  uint32_t waits;                     /* which of the owner's lists of chunks to allocate
                                         from it is on: CH_WAITS_* (heap.c) */
  struct ch_chunk *next, *prev;       /* owner's chunk list for this group */
  struct ch_chunk *wait_next, *wait_prev;
  /* Line 2. */
  char *top;                          /* the bump pointer's highest since it last went down:
                                         blocks between the two were all freed (heap.c) */
  uint32_t coalesced_at;              /* `freed` at the last coalescing */
  uint32_t told;                      /* live_bytes as last added to the group's statistics */
  uint64_t spare_since;               /* a spare: when it became one (chunk.c) */
  uint64_t binmask;                   /* bit b: mixed bin bins[b] holds blocks (no bits
                                         for the exact bins: heap.c) */
  /* Lines 3-10 (from a line boundary). */
  _Alignas(64) void *bins[CH_NBINS];  /* free blocks, singly linked through their first word */
} __attribute__((aligned(64)));

#define CH_CHUNK_MAGIC 0x43484f52544b4e43ull
/* Up to this many header offsets (colours), one cache line apart: 64 KiB
 * of them, an L2 way's worth of sets on many cores (a chunk smaller than
 * 1 MiB uses a sixteenth of itself). */
#define CH_COLOURS_MAX 1024
#define CH_OWNER_GROUP ((uintptr_t)CH_MAX_GROUPS - 1)   /* heaps are 64-aligned */
extern size_t ch_chunk_size;            /* bytes, power of two */
extern uintptr_t ch_chunk_mask;
extern size_t ch_chunk_bitmap_bytes;    /* the bitmaps and the pad: the header's offset from its colour */
extern size_t ch_chunk_starts_bytes;    /* one bitmap's size */
extern size_t ch_pool_max;              /* the largest block any chunk holds; 0: no region */
/* Between the start bits and the header, a line that stays zero: the word
 * after the last word of start bits reads as "no block starts here", so the
 * free path may read any start-bit word's successor. */
#define CH_STARTS_PAD 64
/* One word of start bits covers 64 granules: 1 KiB of chunk, from a
 * multiple of 1 KiB. */
#define CH_STARTS_WORD_SHIFT 10
_Static_assert(((size_t)1 << CH_STARTS_WORD_SHIFT) == 64 * CH_GRANULE, "a word of start bits is 64 granules");
static inline uint64_t *ch_chunk_starts(const struct ch_chunk *c) {
  return (uint64_t *)((char *)c - CH_STARTS_PAD - ch_chunk_starts_bytes);
}
extern unsigned ch_chunk_colour_shift;  /* log2(chunk_size) */
extern uintptr_t ch_chunk_colour_mask;  /* colours - 1 */
extern uintptr_t ch_chunk_colour_step;  /* odd, about 0.618 x the pages colours span */

static inline uintptr_t ch_chunk_base(const void *p) { return (uintptr_t)p & ~ch_chunk_mask; }
/* The offset, in bytes, of the chunk at b's bitmaps: its colour, in cache
 * lines. The low six bits are the chunk's index modulo 64, so that 64
 * chunks' headers take 64 different D1 sets; above them whole pages, the
 * index times an odd step modulo the pages the colours span, so that the
 * first lines of many chunks, where a small group keeps all its objects,
 * spread over an L2's sets instead of sharing 4 KiB of them
 * (docs/runtime.md, "Colours that spread over the L2"). */
/* The colours repeat every this many chunks (the low six bits, and at most
 * 1024 / 64 pages above them): the region is aligned to it (chunk.c). */
#define CH_COLOUR_PERIOD 64
_Static_assert(CH_COLOURS_MAX / 64 <= CH_COLOUR_PERIOD, "the pages' colours repeat within the period");
static inline uintptr_t ch_chunk_colour(uintptr_t b) {
  uintptr_t i = b >> ch_chunk_colour_shift;
  return ((i & 63) | (((i * ch_chunk_colour_step) << 6) & ch_chunk_colour_mask)) << 6;
}
/* The header of the chunk p lies in: the bitmaps, from the chunk's colour
 * on, end at the header. */
static inline struct ch_chunk *ch_chunk_of(const void *p) {
  uintptr_t b = ch_chunk_base(p);
  return (struct ch_chunk *)(b + ch_chunk_colour(b) + ch_chunk_bitmap_bytes);
}
static inline struct ch_heap *ch_owner_heap(uintptr_t owner) {
  return (struct ch_heap *)(owner & ~CH_OWNER_GROUP);
}
/* Every chunk lies in one reservation, the region, made at start-up, so
 * "is p ours" is a range test, and its live chunk's header one load from a
 * table with an entry per chunk of the region. size is 0 until the region
 * exists, which makes the range test also the "no region yet" test. An
 * entry holds the chunk's start-bits bias beside the chunk: free reads the
 * start bits from the entry, not from the header the entry names, one
 * dependent load less on its path (calc's ref input: 1.071 -> 1.058 x
 * jemalloc's time, docs/runtime.md). */
struct ch_region_entry {
  struct ch_chunk *chunk;    /* NULL: no live chunk there */
  uintptr_t starts_bias;     /* the chunk's (its starts_bias), while chunk is set */
};
struct ch_region {
  uintptr_t base, size;
  struct ch_region_entry *table;
  unsigned shift;            /* log2(chunk_size) */
};
extern struct ch_region ch_region;
static inline bool ch_in_region(const void *p) { return (uintptr_t)p - ch_region.base < ch_region.size; }
/* The live chunk at offset off (below ch_region.size) of the region, or NULL. */
static inline const struct ch_region_entry *ch_region_entry_at(uintptr_t off) {
  return &ch_region.table[off >> ch_region.shift];
}
static inline struct ch_chunk *ch_region_chunk_at(uintptr_t off) {
  return __atomic_load_n(&ch_region_entry_at(off)->chunk, __ATOMIC_RELAXED);
}
/* The live chunk p lies in, or NULL. */
static inline struct ch_chunk *ch_chunk_lookup(const void *p) {
  uintptr_t off = (uintptr_t)p - ch_region.base;
  if (off >= ch_region.size) return NULL;
  return ch_region_chunk_at(off);
}
static inline bool ch_owns(const void *p) { return ch_chunk_lookup(p) != NULL; }
void ch_chunks_init(void);
struct ch_chunk *ch_chunk_new(uint32_t group);   /* NULL when the OS says no */
void ch_chunk_retire(struct ch_chunk *c);         /* chunk is empty: spare or purge */
/* A destroyed pool's chunk (live blocks or not): a spare even beyond
 * COHORT_SPARES, purged only once it has waited CH_SPARE_DELAY_MS unused. */
void ch_chunk_retire_later(struct ch_chunk *c);
#define CH_SPARE_DELAY_MS 1000
void ch_chunk_clear_starts(struct ch_chunk *c, const char *from, const char *to);
size_t ch_chunk_resident(const struct ch_chunk *c);
/* Calls fn on every live chunk, under the chunk lock, so that none is purged
 * meanwhile (its fields may still change). */
void ch_chunks_each(void (*fn)(const struct ch_chunk *c, void *arg), void *arg);
void ch_chunks_atfork_prepare(void);
void ch_chunks_atfork_parent(void);
void ch_chunks_atfork_child(void);

/* ---------------------------------------------------------------- heap.c */
/* A thread's state for one group. The first line is touched by every
 * allocation in the group; the recent lists' two lines by the allocations
 * and frees of blocks up to CH_EXACT_MAX bytes. */
struct ch_group_heap {
  struct ch_chunk *current;
  uint64_t allocs, frees;      /* this thread's (and its chunks', reported), summed by stats.c */
  struct ch_chunk *chunks;     /* every chunk this heap owns for the group */
  struct ch_chunk *avail;      /* chunks whose bins may satisfy requests */
  struct ch_chunk *room;       /* chunks set aside with untouched room (heap.c) */
  struct ch_chunk *spill;      /* requests the current chunk has room but no fit for (heap.c) */
  uint64_t pool_word;          /* a pool's line (pool.c): its descriptor word, 0 once destroyed */
  /* Per exact bin, the blocks this heap freed last, whatever chunk holds
   * them: the head's address | how many the list holds (heap.c, "Recent
   * frees"). */
  uintptr_t recent[CH_EXACT_MAX / CH_GRANULE];
} __attribute__((aligned(64)));
/* Frees into another thread's chunks, handed over together (heap.c). */
#define CH_REMOTE_BATCH 32
struct ch_batch {
  void *link;              /* first word: a delayed list's link, or a free batch's */
  _Atomic(struct ch_batch *) *home;   /* the list it goes back to once drained (heap.c) */
  unsigned n;
  void *block[CH_REMOTE_BATCH];
} __attribute__((aligned(64)));
struct ch_heap {
  struct ch_group_heap g[CH_MAX_GROUPS];   /* first: the heap's address is 64-aligned */
  struct ch_heap *all_next;           /* every heap ever made (never freed) */
  struct ch_heap *free_next;          /* heaps of exited threads, ready for reuse */
  pthread_t thread;
  _Atomic(void *) delayed;            /* blocks other threads freed into our chunks */
  struct ch_batch *batches;           /* ours to fill, for the heap's thread alone */
  _Atomic(struct ch_batch *) batches_back;   /* ours, drained by other heaps */
  _Atomic uint64_t life;              /* the heap's owner and its state: epoch << 2 | HEAP_*
                                         (heap.c, "A thread that starts another") */
  atomic_uint idle_frees;             /* other threads' frees into it while idle */
  uint64_t *scratch;                  /* one bit per granule of a chunk, all clear between uses */
  uint8_t merge_shift[CH_MAX_GROUPS]; /* per group: how far its merges have lowered the
                                         free bytes that make a chunk worth merging (heap.c) */
} __attribute__((aligned(64)));
/* A pool's heap (pool.c) is one of these too: it belongs to no thread, uses
 * g[CH_POOL_GROUP] alone, is never freed, and serves the next pool once
 * its pool is destroyed. */
void *ch_group_alloc(unsigned group, size_t size, size_t align, bool zero);
void *ch_group_malloc(unsigned group, size_t size);   /* align 16, not zeroed */
/* The fast lane: the control group's line of this thread's heap once armed,
 * else NULL; under the random control, group 0's line + 1 (lines are
 * 64-aligned), the mark that says "draw a group" at the cost of one test of
 * a value the lane has loaded anyway. The entry points arm it (when
 * ch_identify_lane_ready); the heap's teardown disarms. */
/* ch_control_gh: in the thread block (struct ch_thread). */
extern uint64_t ch_line_groups;   /* set once at start-up (init.c) */
struct ch_group_heap *ch_heap_line(unsigned group);   /* the thread's heap's line of a group, or NULL */
/* Hand this thread's batch of frees into other threads' chunks to their
 * owners now (when it is full, at the thread's exit, and ch_flush_thread). */
void ch_heap_flush_remote(void);
/* Give this thread's recent frees back to their chunks' bins (heap.c, "Recent
 * frees"), so that the statistics see them freed. */
void ch_heap_flush_recent(void);
/* The calling thread is about to start another (threads.c): its heap
 * waits, idle, for the thread's next allocation or free, or for a thread
 * freeing a batch's worth into it to take it over (heap.c). */
void ch_heap_thread_started(void);
extern atomic_ulong ch_heaps_handed_on;   /* idle heaps a freeing thread took over */
extern atomic_ulong ch_remote_batches;    /* struct ch_batch made (heap.c) */
/* or_next. The entry points' whole fast lane, defined in heap.c and inlined
 * into malloc and operator new at link time: without always_inline, operator
 * new called it (an inlining limit). GCC warns that an always_inline
 * function outside its callers' file might not be inlinable; with LTO it is. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattributes"
__attribute__((always_inline)) void *ch_group_malloc_lane(struct ch_group_heap *gh, size_t size);
/* Its two halves, for operator new, which must test what the second
 * returns: the fast path alone (NULL: it found nothing), and the rest. */
__attribute__((always_inline)) void *ch_group_take_lane(struct ch_group_heap *gh, size_t size);
/* The same two halves for a group, its line placement included (the
 * patched sites' entries). */
__attribute__((always_inline)) void *ch_group_take(unsigned group, size_t size);
#pragma GCC diagnostic pop
void *ch_group_rest_or_next(unsigned group, size_t size);   /* never NULL but where both fail */
void *ch_group_lane_general(struct ch_group_heap *gh, size_t size);
void *ch_group_malloc_or_next(unsigned group, size_t size);   /* never NULL but where both fail */
void ch_group_free(void *p);                       /* p is ours (ch_owns) */
void ch_group_free_in(struct ch_chunk *c, void *p, uintptr_t starts_bias);   /* c: ch_chunk_lookup(p), and its entry's bias */
/* p in the region, in no live chunk: stops the program; not _Noreturn, so
 * that free reaches it by a tail call and needs no frame */
void ch_dead_chunk_free(const void *p);
size_t ch_group_usable(const void *p);             /* p is ours */
uint32_t ch_group_chunk_live(const void *p);       /* live bytes of p's chunk, as its owner sees them */
/* The lines a group's common allocation and free touch besides the block:
 * its line of the thread's heap, the chunk header's first line, a line of
 * bins, a word of start bits (heap.c). */
#define CH_POOL_STATE_LINES 4
void *ch_group_realloc(void *p, size_t size);      /* p is ours, size > 0 */
void ch_heaps_atfork_prepare(void);
void ch_heaps_atfork_parent(void);
void ch_heaps_atfork_child(void);
void ch_heaps_init(void);
void ch_heaps_drain_exited(void);
/* Per group, what the heaps and chunks hold back from ch_gstats: counts, and
 * the live bytes their chunks have not reported yet. */
void ch_heaps_sum(uint64_t allocs[CH_MAX_GROUPS], uint64_t frees[CH_MAX_GROUPS], long live[CH_MAX_GROUPS]);
_Noreturn void ch_invalid_pointer(const char *what, const void *p);
/* Set by pool.c around its frees: ch_invalid_pointer names that call
 * instead of free(). */
extern CH_TLS const char *ch_free_api;
/* Pools (pool.c) on the group allocator: a heap each, chunks of
 * CH_POOL_GROUP. */
extern atomic_ulong ch_pools_made, ch_pools_destroyed;
struct ch_heap *ch_pool_heap_new(void);              /* NULL: no memory for it */
void ch_pool_heap_destroy(struct ch_heap *h);        /* every block goes, live or not */
void *ch_pool_heap_alloc(struct ch_heap *h, size_t size);   /* size <= ch_pool_max; NULL: no memory */
void *ch_pool_heap_alloc_general(struct ch_heap *h, size_t size, size_t align, bool zero);
void ch_pool_heap_free(struct ch_heap *h, struct ch_chunk *c, void *p);   /* c: p's chunk, owned by h */
size_t ch_pool_block_size(const struct ch_chunk *c, const void *p);     /* p: a live block of c */
/* The group allocator without the checked mode's redzones, for check.c. */
void *ch_group_alloc_raw(unsigned group, size_t size, size_t align, bool zero);
void ch_group_free_raw(void *p);
enum ch_block_state { CH_BLOCK_NONE, CH_BLOCK_LIVE, CH_BLOCK_FREE };
enum ch_block_state ch_group_block_state(const void *p);   /* p is in a chunk (ch_owns) */

/* --------------------------------------------------------------- check.c */
/* COHORT_CHECK=1: every grouped block gets a redzone before it (its size and
 * a canary) and after it, checked when it is freed or reallocated. */
extern bool ch_checked;
void ch_check_init(void);
void *ch_checked_alloc(unsigned group, size_t size, size_t align, bool zero);   /* NULL: not grouped */
void ch_checked_free(void *p);
size_t ch_checked_usable(const void *p);
void *ch_checked_realloc(void *p, size_t size);

/* ------------------------------------------------------------ counters.c */
struct ch_group_stats {                /* process-wide; per-thread counts live in heaps */
  atomic_ulong allocs, frees;           /* made under the orphan lock only */
  atomic_long live_bytes;               /* batched: each thread may hold back a little */
  atomic_ulong peak_live, chunks, peak_chunks;
  atomic_long resident;
  atomic_ulong resident_at_peak;
};
extern struct ch_group_stats ch_gstats[CH_MAX_GROUPS];
extern atomic_ulong ch_spares_reused, ch_chunks_purged, ch_chunks_carved, ch_slabs;
void ch_count_live(unsigned g, long delta);         /* live bytes, process-wide */
void ch_count_resident(unsigned g, long delta);

/* ------------------------------------------------------------- modules.c */
#define CH_BUILD_ID_MAX 32   /* bytes of a GNU build id kept (SHA-1 is 20) */
struct ch_module {
  uintptr_t bias;               /* load bias: run-time address minus file address */
  uintptr_t lo, hi;             /* executable range */
  const uint8_t *eh_frame_hdr;  /* NULL if none */
  const char *path;
  uint8_t build_id[CH_BUILD_ID_MAX];
  unsigned build_id_len;
  bool system;                  /* not part of any context (docs/context.md) */
  bool writable_code;           /* an executable segment is also writable: never patched */
  bool is_main;
  int plan_module;              /* index in the plan, -1 if none */
  unsigned nload;
  struct { uintptr_t lo, hi; } load[8];   /* readable loaded segments */
  const void *dynamic;          /* its PT_DYNAMIC as loaded, or NULL */
};
/* Does [a, a + len) lie within one readable loaded segment of m? */
bool ch_module_maps(const struct ch_module *m, uintptr_t a, size_t len);
/* The symbol whose address the loader puts in m's GOT slot at `slot` (a
 * JUMP_SLOT or GLOB_DAT relocation's), or NULL: what a PLT entry reaches
 * before lazy binding has filled its slot. */
const char *ch_module_slot_symbol(const struct ch_module *m, uintptr_t slot);
void ch_modules_refresh(void);                        /* at start-up, and to notice modules loaded since */
/* What the layer above does with modules as they become known, set once at
 * start-up (init.c) so that this layer names no function above it: `found`
 * for each module as it is added (a plan binds its sites; under the
 * loader's lock), `added` for the new ones [from, to) once the loader's
 * lock is released (their selector sites are patched). */
struct ch_module_hooks {
  void (*found)(struct ch_module *m);
  void (*added)(unsigned from, unsigned to);
};
void ch_modules_set_hooks(const struct ch_module_hooks *h);
const struct ch_module *ch_module_for(uintptr_t pc);  /* refreshes on a miss */
/* The same, and *busy set when pc was in no module known and another thread
 * was refreshing them: NULL then says nothing about pc, and must not be
 * remembered. */
const struct ch_module *ch_module_find(uintptr_t pc, bool *busy);
/* Where pc lies, for the statistics: its module's ch_modules_at index (the
 * result; -1 if none holds it) and its address in that module's file
 * (*offset; pc itself if none). Looks the module up as ch_module_for does. */
int ch_module_place(uintptr_t pc, uintptr_t *offset);
const char *ch_base_name(const char *path);   /* the part after the last '/' */
/* Is m the module a file (a plan, a prefetch file) names? With a build id,
 * the module with that id; without one, the module of that path or file
 * name. */
bool ch_module_is(const struct ch_module *m, const uint8_t *build_id, unsigned build_id_len, const char *path);
unsigned ch_modules_generation(void);
bool ch_module_is_system_name(const char *path);
unsigned ch_modules_count(void);
struct ch_module *ch_modules_at(unsigned i);
void ch_modules_atfork_prepare(void);
void ch_modules_atfork_parent(void);
void ch_modules_atfork_child(void);

/* ----------------------------------------------------------------- cfi.c */
enum ch_cfa_kind { CH_CFA_RSP, CH_CFA_RBP, CH_CFA_EXPR };
enum ch_rbp_kind { CH_RBP_SAME, CH_RBP_AT_CFA, CH_RBP_UNKNOWN };
struct ch_cfi_rule {
  bool found;                   /* an FDE covers the pc */
  bool outermost;               /* return address undefined: the stack ends here */
  bool complex;                 /* needs the slow interpreter every time */
  enum ch_cfa_kind cfa_kind;
  int32_t cfa_off;
  enum ch_rbp_kind rbp_kind;
  int32_t rbp_off;
  int32_t ra_off;               /* return address at CFA + ra_off */
  const uint8_t *cfa_expr;      /* CH_CFA_EXPR */
  size_t cfa_expr_len;
};
struct ch_regs { uintptr_t pc, sp, rbp; };
bool ch_cfi_find(const struct ch_module *m, uintptr_t pc, struct ch_cfi_rule *out);
/* The function (FDE range) that contains pc: false if no FDE covers it. */
bool ch_cfi_function(const struct ch_module *m, uintptr_t pc, uintptr_t *start, uintptr_t *end);
/* Also where the last row of its unwind table at or below pc begins: an
 * instruction boundary at or above *start. */
bool ch_cfi_function_row(const struct ch_module *m, uintptr_t pc, uintptr_t *start, uintptr_t *end,
                         uintptr_t *row);
bool ch_cfi_each_function(const struct ch_module *m, bool (*f)(uintptr_t, uintptr_t, void *), void *ctx);
int ch_cfi_landing_pads(const struct ch_module *m, uintptr_t pc, uintptr_t *pads, int max);
bool ch_cfi_eval_expr(const uint8_t *e, size_t len, const struct ch_regs *r, uintptr_t *out);

/* -------------------------------------------------------------- unwind.c */
#define CH_MAX_FRAMES 256
#define CH_MAX_SITES 256
struct ch_walk {
  uint64_t active[CH_MAX_SITES / 64];   /* plan sites found on the stack */
  bool truncated;                       /* stopped before the outermost frame */
  bool rejected;                        /* quick test: innermost site is cold (or next) */
  bool next;                            /* quick test: innermost site says next allocator */
  bool joined;                          /* the outer frames came from the thread's last walk */
  unsigned entry_group;                 /* quick test: group + 1 its site decides, or 0 */
  unsigned stop_group;                  /* group + 1 of the stop site that ended the walk, or 0 */
  int path_verdict;                     /* a decision path's verdict (a group, CH_QUICK_COLD or
                                           CH_QUICK_NEXT), or CH_QUICK_WALK: none decided */
  unsigned frames;                      /* frames walked past the entry */
};
void cohort_capture_regs(struct ch_regs *r);  /* asm: the caller's state at return */
/* Walk from the frame of the runtime entry point whose frame address is fp
 * (NULL: from the caller of ch_walk_stack itself). */
void ch_walk_stack(struct ch_walk *w, const uintptr_t *fp);
/* The quick test alone, from the entry point's frame: a group, or: */
#define CH_QUICK_COLD (-1)    /* the innermost application site is cold */
#define CH_QUICK_WALK (-2)    /* undecided: walk */
#define CH_QUICK_NEXT (-3)    /* the innermost application site sends it to the next allocator */
#define CH_QUICK_UNSEEN (-4)  /* ch_walk_quick only: the caller is not a cached application frame */
#define CH_QUICK_UNNAMED (-5) /* a site the plan does not name, cold by its unknown-entry verdict: as
                                 CH_QUICK_COLD, but no direct stub is offered (it would look the
                                 site up in the plan on every request, and find nothing) */
int ch_walk_quick(const uintptr_t *fp);
/* The quick test past system frames: what the innermost application frame
 * says (as ch_walk_quick), CH_QUICK_UNSEEN if the walk cannot reach it;
 * *at_caller: that frame is the entry point's caller (no system frame
 * between them). */
int ch_walk_entry(const uintptr_t *fp, bool *at_caller);
/* Every frame from the entry point's frame out, innermost first: fn gets
 * each application frame that has a plan site, with the stack address its
 * return address was read from. false: the walk was cut short. */
bool ch_walk_sites(const uintptr_t *fp, void (*fn)(void *arg, uintptr_t slot, int site), void *arg);
/* The return addresses of the frames from the entry point's frame outwards,
 * innermost first, one at a time: ch_frames_next gives the next one and
 * whether it lies in a system module; false when the walk has ended. */
struct ch_frames {
  struct ch_regs r;
  uintptr_t tag, sp0;
  bool fixed;       /* every frame stepped so far had CFA = %rsp + a constant */
  bool done;
  bool unsure;      /* a frame's module could not be looked up (another thread was
                       refreshing them): the walk ended there, and says nothing */
};
bool ch_frames_start(struct ch_frames *it, const uintptr_t *fp);
bool ch_frames_next(struct ch_frames *it, uintptr_t *pc, bool *system);
void ch_unwind_init(void);
/* The plan's site at a return address and its entry verdict (-1 and
 * CH_ENTRY_UNKNOWN where none), for the rules the walk caches: set once at
 * start-up (init.c), so that this layer names no function of the plan's. */
void ch_unwind_set_sites(int (*site_at)(uintptr_t pc, int *entry));
extern atomic_ulong ch_unwind_slow;     /* pc-cache misses */
extern atomic_ulong ch_walks_joined;    /* walks finished from the suffix memo */

/* ---------------------------------------------------------------- plan.c */
/* What the innermost application site alone says (the quick test). GROUP:
 * every allocation entering there belongs to the site's group, no walk. */
enum ch_entry_verdict { CH_ENTRY_UNKNOWN, CH_ENTRY_WALK, CH_ENTRY_COLD, CH_ENTRY_GROUP, CH_ENTRY_NEXT };
struct ch_plan_module { char path[512]; uint8_t build_id[CH_BUILD_ID_MAX]; unsigned build_id_len; bool resolved; };
/* The grammar both plans and prefetch files use: a hexadecimal digit's
 * value (-1: none), and a build id of n hex digits (false: malformed). */
int ch_hex_digit(char c);
bool ch_parse_build_id(const char *hex, size_t n, uint8_t *out, unsigned *len);
/* A `module N BUILDID PATH` line after its keyword, [s, end), as the plan
 * and the prefetch file write it; false: why (plan.c). */
bool ch_parse_module_line(const char *s, const char *end, unsigned expect, unsigned limit, uint8_t *build_id,
                          unsigned *build_id_len, char *path, size_t path_size, char *why, size_t whylen);
struct ch_plan_site { unsigned module; uintptr_t offset; uintptr_t addr; /* 0 until resolved */
                      enum ch_entry_verdict entry; unsigned group; /* CH_ENTRY_GROUP */
                      int quick;       /* what the quick test returns when the entry decides alone:
                                          the group, or CH_QUICK_NEXT */
                      unsigned stop;   /* group + 1: a walk reaching this site ends in it; 0: no */ };
struct ch_plan_conj { unsigned group; uint64_t mask[CH_MAX_SITES / 64]; };
struct ch_plan {
  unsigned version;
  size_t max_size;
  unsigned nmodules, nsites, ngroups, nconj;
  struct ch_plan_module *modules;
  struct ch_plan_site *sites;
  char (*group_names)[64];
  struct ch_plan_conj *conj;
  enum ch_entry_verdict unknown_entry;
  /* Version 6: a walk that leaves the decision paths (a stack never
   * profiled past its entry) goes on to the full walk (CH_ENTRY_WALK) or
   * ends there with no group (CH_ENTRY_COLD), so unknown stacks cost no
   * more frames than the paths need. */
  enum ch_entry_verdict unknown_path;
  int rest;   /* version 4: the group of every small allocation no verdict or selector claims; -1: none */
  size_t rest_max;   /* the largest request the rest group takes */
  bool rest_one;     /* version 7: the rest group stays one pool (else split by size class) */
  /* Version 5: the decision paths, a trie over the sites a walk meets from
   * the entry outwards. Node 0 is the root; a node's verdict is a group,
   * CH_QUICK_COLD, CH_QUICK_NEXT, or CH_QUICK_WALK (go one frame further). */
  unsigned nnodes;
  int *node_verdict;
  uint32_t *trie_key;     /* open addressing: (parent << 9 | site) + 1, 0 empty */
  uint16_t *trie_child;
  uint8_t *has_child;     /* per node: some path goes on from it */
};
#define CH_MAX_NODES 4096
#define CH_MAX_PATH 32
/* The child of trie node `node` through plan site `site`, or 0: none. */
static inline unsigned ch_plan_child(const struct ch_plan *pl, unsigned node, int site) {
  uint32_t key = ((uint32_t)node << 9 | (uint32_t)site) + 1;
  for (uint32_t h = (key * 0x9e3779b1u) >> 19;; h = (h + 1) & (2 * CH_MAX_NODES - 1)) {
    uint32_t k = pl->trie_key[h];
    if (k == key) return pl->trie_child[h];
    if (!k) return 0;
  }
}
extern struct ch_plan *ch_plan;          /* NULL: nothing to identify */
extern atomic_bool ch_plan_disabled;    /* set when a late module contradicts the plan */
int ch_plan_load(const char *path);      /* 0 ok; otherwise warned and NULL */
/* Parse a plan without warning: 0 and the plan, or -1 and why ("plan PATH
 * line N: WHY"). Uses only the system layer (tools/plan_check.c). */
int ch_plan_read(const char *path, struct ch_plan **out, char *why, size_t whylen);
void ch_plan_bind_module(struct ch_module *m);  /* resolve this module's sites */
int ch_plan_site_at(uintptr_t addr);     /* site index or -1 */
int ch_plan_site_entry(uintptr_t addr, int *entry);   /* the same, and its verdict (an ch_entry_verdict) */
bool ch_plan_check_binary(void);         /* after modules load: build ids agree */

/* ------------------------------------------------------------ identify.c */
enum ch_path {
  CH_PATH_OFF,           /* no grouping configured: straight to the next allocator */
  CH_PATH_LARGE,         /* above the maximum grouped size */
  CH_PATH_REENTRANT,     /* allocation made by the runtime itself, or during start-up */
  CH_PATH_COLD,          /* quick test: innermost application site is cold */
  CH_PATH_ENTRY,         /* quick test: innermost application site decides the group */
  CH_PATH_WALK_NONE,     /* full walk, no selector matched */
  CH_PATH_WALK_GROUP,    /* full walk, a selector matched */
  CH_PATH_STOP,          /* walk ended early at a stop site, which decides */
  CH_PATH_PATH,          /* walk ended where the plan's decision paths agree on a verdict */
  CH_PATH_TRUNCATED,     /* walk stopped early (no unwind info); decided on what was seen */
  CH_PATH_PATCHED,       /* decided from the activations of patched selector sites, no walk */
  CH_PATH_ALL,           /* test mode: every small allocation grouped */
  CH_PATH_RANDOM,        /* control mode: a random pool */
  CH_PATH_DIRECT,        /* a patched call site that reaches its group directly (direct.c) */
  CH_PATH_DPA,           /* DPA: the call chain's pool */
  CH_PATH_DPA_HINTED,    /* DPA: the chain's pool, named by its patched outermost call (hint.c) */
  CH_PATH_DPA_PREFIX,    /* DPA: the chain's pool, its prefix named by a patched call, the rest probed */
  CH_PATH_DPA_BELOW,     /* DPA: the chain's group has no pool (yet): the next allocator */
  CH_PATH_MO,            /* MO: the call site's size-consistent pool */
  CH_PATH_MO_NEXT,       /* MO: the site has no pool (yet), or the request is not its size */
  CH_PATH_COUNT
};
extern const char *const ch_path_names[CH_PATH_COUNT];
extern atomic_ulong ch_path_count[CH_PATH_COUNT];   /* the threads' counts, flushed (identify.c) */

/* Per thread, the calls through patched stop sites: a stop site's stub
 * (patch.c) writes the slot of its call's return address and its site into
 * last, and only when the last record lies above it and is still live with
 * another stop group does it keep that record in rec first. Which stop
 * decides an allocation is then the last record, if live, else the
 * innermost live one kept. The layout is shared with the stop stub. */
#define CH_STOP_CAP 62
struct ch_stops {
  uintptr_t last;                 /* the slot of the last call through a stop site, or 0 */
  const struct ch_stop_site *site;   /* its site's entry in ch_stop_sites */
  uintptr_t lo, hi;               /* the thread's stack once known, else 0, 0: the stub keeps nothing */
  uint32_t n;                     /* records kept in rec */
  uint8_t lost;                   /* a record was lost (rec full, a stub interrupted): seed again */
  uint8_t busy;                   /* a stub's slow path or the seed is writing rec */
  uint16_t pad;
  uintptr_t pad2;                 /* rec stays at 48, where the stop template finds it */
  struct ch_stop_rec { uintptr_t slot; const struct ch_stop_site *site; } rec[CH_STOP_CAP];
};
/* The thread's hot state, in one TLS block. In a shared library each
 * variable of its own costs an entry point a load of its offset from the
 * GOT (initial-exec); the fields of one block share that load, so that a
 * lane that tests the hints, counts its path and takes the thread's heap
 * pays it once. Each field belongs to the file named, which alone writes it
 * (the stubs of hint.c write the hints at their offsets). */
struct ch_thread {
  int in_runtime;                   /* init.c: >0 while the runtime itself is allocating */
  uint32_t dpa_hint;                /* hint.c: a DPA group's index + 1, set by its stub; 0: none */
  uint32_t dpa_prefix_hint;         /* hint.c: a prefix hint's index + 1 (dpa.c); 0: none */
  int32_t dpa_check_in;             /* dpa.c: trusted allocations until a hint is checked again */
  int32_t dpa_sample_in;            /* dpa.c: allocations until the next shape-graph sample */
  int mo_sample_in;                 /* mo.c: pooled sites' requests until the next sample */
  int32_t count_budget;             /* identify.c: allocations until the path counts are flushed */
  int32_t patched_budget;           /* identify.c: the same, for those a live stop record decides */
  uint32_t control_count;           /* identify.c: the lane's allocations, counted at the flush */
  uint64_t cold_stubbed;            /* direct.c's cold stubs: requests sent on, counted at the flush */
  struct ch_group_heap *control_gh; /* heap.c: the lane's armed heap line (ch_lane) */
  struct ch_heap *my_heap;          /* heap.c: the fast paths' heap (NULL in the checked mode) */
  struct ch_heap *own_heap;         /* heap.c: the thread's heap */
  uint64_t random_state;            /* identify.c: the random control's draws */
  uint32_t path_count[CH_PATH_COUNT];   /* identify.c: allocations by path, not yet flushed */
  struct ch_stops stops;            /* activation.c, and the stop sites' stubs (patch.c) */
};
extern CH_TLS struct ch_thread ch_thread;
#define ch_in_runtime (ch_thread.in_runtime)
#define ch_dpa_hint (ch_thread.dpa_hint)
#define ch_dpa_prefix_hint (ch_thread.dpa_prefix_hint)
#define ch_mo_sample_in (ch_thread.mo_sample_in)
#define ch_control_count (ch_thread.control_count)
#define ch_control_gh (ch_thread.control_gh)
#define ch_random_state (ch_thread.random_state)
#define CH_FRAME_BUCKETS 7
extern const char *const ch_frame_bucket_names[CH_FRAME_BUCKETS];
extern atomic_ulong ch_frame_count[CH_FRAME_BUCKETS];
extern _Atomic bool ch_identify_active;  /* fast flag: anything to decide at all */
extern size_t ch_max_size;
int ch_identify(size_t size, const uintptr_t *entry_fp);    /* group index or -1 */
/* ch_identify under DPA, when the allocation is sampled for the shape graph:
 * malloc allocates through ch_dpa_malloc_sampled, other entry points take
 * the decided group from ch_dpa_unsample. */
#define CH_IDENTIFY_SAMPLE (-100)
void ch_identify_init(void);
void ch_identify_flush_thread(void);
bool ch_identify_count_direct(void);
bool ch_identify_count_patched(void);   /* decided from a live stop record, no frame looked at */
/* A request of a patched MO site (direct.c), counted on its path; false:
 * the counts are due (ch_identify_flush_due). */
bool ch_identify_count_site(bool pooled);
bool ch_identify_count_path(enum ch_path p);   /* false: the counts are due (ch_identify_flush_due) */
/* The all and random controls, and a plan with nothing but its rest pool
 * (it needs no frame either), for the entry points' frameless path: a
 * group, or -1: take the ordinary path (too large, the runtime's own, or
 * the counts are due). */
extern _Atomic bool ch_identify_controls;
int ch_identify_control(size_t size);
/* The frameless path's fast lane, for malloc and operator new: a thread
 * whose heap is armed (ch_control_gh, heap.c) sends every request of 1 to
 * ch_control_limit bytes to ch_control_group (the random control: to a group
 * it draws; a plan of the rest group alone split by size: to the request's
 * class) with no other test, and counts it in ch_control_count. The limit
 * is 0 while the lane is closed: under a plan with groups to decide, or once
 * a plan is disabled. */
extern size_t ch_control_limit;
extern unsigned ch_control_group;
/* The random control's number of groups, 0 under every other mode. */
extern unsigned ch_control_spread;
/* A plan of the rest group alone, split by size class: the lane picks. */
extern bool ch_control_by_size;
/* The random control's draw: one of ch_control_spread groups, from
 * ch_random_state (the thread block). */
/* Threads that have drawn: a thread's first state is the seed plus its
 * place in that order times an odd constant (never 0: bit 0 is set). Not an
 * address, so that COHORT_SEED gives the same draws run after run, with
 * address randomisation or another build of the library. No call: the
 * entry points inline this and save no register. */
extern _Atomic uint64_t ch_random_threads;
static inline unsigned ch_random_group(void) {
  uint64_t x = ch_random_state;
  if (CH_UNLIKELY(!x))
    x = (ch_opt.seed + atomic_fetch_add_explicit(&ch_random_threads, 1, memory_order_relaxed) *
                       0x9e3779b97f4a7c15ull) | 1;
  x ^= x << 13; x ^= x >> 7; x ^= x << 17;   /* xorshift64 */
  ch_random_state = x;
  return (unsigned)(((x >> 32) * ch_control_spread) >> 32);
}
void ch_identify_controls_off(void);
bool ch_identify_lane_ready(void);   /* may this thread's lane be armed? */
/* A plan's rest group by size class (docs/planner.md, "The rest pool"):
 * the group of a request of n bytes the rest group takes is
 * ch_rest_groups[ch_rest_class(n)]: one class per 16 bytes up to 256
 * (classes 0 to 15, each then holding blocks of one size), one per power of
 * two above (16: up to 512, and so on); requests of 0 bytes are class 71,
 * the first class's group. The classes below 256 bytes come from n - 1 as
 * ch_block_size's do, so that the compiler shares the work. -1 where the
 * plan has no rest group. Several classes share a group only when the plan
 * leaves too few group ids (identify.c). */
#define CH_REST_CLASSES 72
extern int8_t ch_rest_groups[CH_REST_CLASSES];
static inline size_t ch_rest_class(size_t n) {
  size_t m = n - 1;
  return m < 256 ? m >> 4 : 71u - (unsigned)__builtin_clzll(m);
}
static inline int ch_rest_group(size_t n) { return ch_rest_groups[ch_rest_class(n)]; }
/* The largest request the plan's rest group takes (identify.c). */
extern size_t ch_rest_max;
/* The rest group of a request of n bytes, or -1: the next allocator's. */
static inline int ch_rest_for(size_t n) { return n <= ch_rest_max ? ch_rest_group(n) : -1; }
/* For the entry points: the heap line the lane serves a request of n bytes
 * from (counted), or NULL: the ordinary path. A line marked with bit 0 is
 * group 0's under the random control, which draws the group; with bit 1,
 * the first size class's under a plan of the rest group alone, split by
 * size: the classes up to 256 bytes are consecutive groups (identify.c), so
 * the class's line is (n - 1) / 16 lines on, from the n - 1 that
 * ch_block_size works out too. */
static inline struct ch_group_heap *ch_lane(size_t n) {
  uintptr_t v = (uintptr_t)ch_control_gh;
  if (CH_LIKELY(v != 0) && n - 1 < ch_control_limit) {
    ch_control_count++;
    if (v & 3)
      v += v & 2 ? (((n - 1) & ~(size_t)(CH_GRANULE - 1)) * (sizeof(struct ch_group_heap) / CH_GRANULE)) - 2
                 : ch_random_group() * sizeof(struct ch_group_heap) - 1;
    return (struct ch_group_heap *)v;
  }
  return NULL;
}
/* After an allocation on the ordinary control path: arm the lane if it may
 * be, with the control's line of the thread's heap, marked as ch_lane reads
 * it (identify.c). */
void ch_identify_arm_lane(void);
static inline void ch_lane_arm(void) {
  if (ch_identify_lane_ready()) ch_identify_arm_lane();
}
void ch_identify_flush_due(void);
/* MO decides from the allocator's return address alone: malloc and operator
 * new take the site lane, which needs no frame and no walk. */
extern bool ch_site_lane;
/* DPA decides from the chain above malloc's frame (dpa.c): malloc takes the
 * chain lane, a framed call to ch_dpa_malloc with nothing else to test. */
extern bool ch_chain_lane;
void *ch_dpa_malloc(size_t size, const uintptr_t *fp);
int ch_identify_site(size_t size, uintptr_t ret);   /* group index or -1 */
/* The site lane's allocation, for malloc and operator new: the site's pool,
 * else the next allocator. */
static inline void *ch_site_malloc(size_t size, uintptr_t ret) {
  int g = ch_identify_site(size, ret);
  return g >= 0 ? ch_group_malloc_or_next((unsigned)g, size) : ch_next.malloc(size);
}
unsigned ch_ngroups(void);
const char *ch_group_name(unsigned g);
/* The pools an online policy (dpa.c, mo.c) makes as it runs, under its
 * lock: the next one, named POLICY-N, for objects of size bytes (0: mixed);
 * -1 once every Cohort group is taken. */
int ch_online_pool_new(const char *policy, uint32_t size);
unsigned ch_online_pools(void);
extern uint32_t ch_online_pool_size[CH_MAX_GROUPS];

/* --------------------------------------------------------------- patch.c */
/* Selector sites whose call instruction now goes through a stub that records
 * the activation (docs/runtime.md, "Patched selector sites"). Per plan site:
 * its selector bit (0: none), its stop group + 1 (0: none), whether it is
 * patched. ch_patch_gen is 0 while nothing is patched, and changes whenever
 * the set of patched sites does. */
extern uint64_t ch_patch_bit[CH_MAX_SITES];
extern uint32_t ch_patch_stop[CH_MAX_SITES];
extern uint8_t ch_patch_on[CH_MAX_SITES];
extern bool ch_patch_stops_whole;                /* every stop site that could be on a stack is patched */
extern int ch_patch_empty_verdict;               /* ch_patch_verdict with nothing live: a group, CH_ACT_REST or CH_ACT_WALK */
extern bool ch_stops_own;                        /* stop sites keep their own records (ch_stop_sites mapped) */
extern atomic_uint ch_patch_gen;
#define CH_ACT_WALK (-3)   /* ch_patch_verdict, ch_act_decide: the bits cannot decide, walk */
#define CH_ACT_REST (-2)   /* nothing claims it: the rest group, if it fits */
/* The verdict of a stack whose patched activations set the bits `mask` and
 * whose innermost stop site says stop (group + 1, or 0). */
int ch_patch_verdict(uint64_t mask, uint32_t stop);
void ch_patch_init(void);                     /* after the plan is bound */
/* Before ch_patch_init: the entries a `walk` entry's selector stub variants
 * reach (ch_direct_act_malloc, ch_direct_act_new). */
void ch_patch_set_act_entries(uintptr_t act_malloc, uintptr_t act_new);
/* A patched selector site that is also a `walk` entry: its variant stub for
 * malloc (is_new 0) or operator new, and in *target the call's own target;
 * 0 if it has none. */
uintptr_t ch_patch_entry_stub(unsigned site, int is_new, uintptr_t *target);
void ch_patch_modules(unsigned from, unsigned to);   /* modules [from, to) loaded later */
/* For direct.c, which patches allocation call sites with the same means.
 * ch_patch_check_call: -1 and the target if a direct call rel32 ends at ret,
 * else a reason. ch_patch_write_disp: live, the code may be running (see
 * ch_patch_live_ok). Code is written only under the patch lock. */
bool ch_patch_code_init(void);   /* the decoder the others use; false: none */
int ch_patch_check_call(const struct ch_module *m, uintptr_t ret, uintptr_t *target);
/* A stub template: one instruction (its 32-bit immediate's and
 * displacement's offsets, 0 when it has none), then `jmp *disp32(%rip)`
 * that ends it. */
struct ch_stub_template { size_t imm_at, disp_at, jmp_disp_at, size; };
bool ch_patch_read_template(const char *t, const char *end, struct ch_stub_template *out);
/* Copies template t (layout l) to offset `at` of region r, its jump through
 * the 8-byte target slot at offset slot_at of r. */
void ch_patch_put_stub(uint8_t *r, size_t at, const char *t, const struct ch_stub_template *l, size_t slot_at);
void *ch_patch_map_near(uintptr_t lo, uintptr_t hi, size_t size);   /* read-write, within +-2 GiB */
void ch_patch_stub_unwind(uint8_t *p, uintptr_t code, size_t len);  /* .eh_frame for frameless stubs */
void ch_patch_register_unwind(uint8_t *eh);                        /* once the stubs are final */
bool ch_patch_live_ok(uintptr_t at);
bool ch_patch_write_disp(uintptr_t at, int32_t disp, bool live);
/* The only writes into code (patch.c): len bytes at `at` while the process
 * has one thread; and a stub region made read-execute once written. */
bool ch_patch_write_code(uintptr_t at, const void *bytes, size_t len);
bool ch_patch_seal(void *region, size_t size);
bool ch_patch_one_thread(void);
bool ch_patch_trylock(void);
bool ch_patch_enabled(void);   /* ch_patch_init found a plan to patch for, and a decoder */
void ch_patch_unlock(void);

/* ------------------------------------------------------------ prefetch.c */
/* MO's stride prefetches, injected at start-up from COHORT_PREFETCH
 * (docs/prefetch-format.md). Each load's result: injected, still pending
 * (only while start-up runs), or why it was left alone. */
#define CH_PREFETCH_MAX 256
enum { CH_PREFETCH_INJECTED = -2, CH_PREFETCH_PENDING = -1,
       CH_PREFETCH_NOT_LOADED, CH_PREFETCH_OTHER_BUILD, CH_PREFETCH_OUTSIDE, CH_PREFETCH_NO_FUNCTION,
       CH_PREFETCH_UNDECODED, CH_PREFETCH_NOT_A_LOAD, CH_PREFETCH_DISTANCE, CH_PREFETCH_UNMOVABLE,
       CH_PREFETCH_BRANCH_TARGET, CH_PREFETCH_INDIRECT_JUMP, CH_PREFETCH_LANDING_PADS, CH_PREFETCH_UNWIND_RULE,
       CH_PREFETCH_OVERLAP, CH_PREFETCH_THREADS, CH_PREFETCH_NOT_WRITABLE, CH_PREFETCH_NO_STUB_SPACE,
       CH_PREFETCH_REASONS };
extern const char *const ch_prefetch_reason_names[CH_PREFETCH_REASONS];
struct ch_prefetch_load { unsigned module; uintptr_t offset; int32_t distance; int reason; };
extern struct ch_prefetch_load ch_prefetch_loads[CH_PREFETCH_MAX];
extern unsigned ch_prefetch_nloads, ch_prefetch_injected;
extern const char *ch_prefetch_file;   /* NULL unless a file was read */
const char *ch_prefetch_module_path(unsigned module);
void ch_prefetch_init(const char *path);

/* -------------------------------------------------------------- direct.c */
/* Allocation call sites whose own entry verdict decides the group, patched
 * to reach the group allocator directly (docs/runtime.md, "Direct sites").
 * The entry points the patched calls may have reached, and the two that the
 * stubs go to instead (group in the second argument). */
struct ch_direct_entries {
  uintptr_t malloc, new_, new_array;              /* the runtime's own code */
  void *(*direct_malloc)(size_t size, unsigned group);
  void *(*direct_new)(size_t size, unsigned group);
  /* For a `walk` entry site decided from patched sites' activations: the
   * slot holding the call's return address in the second argument. */
  void *(*act_malloc)(size_t size, uintptr_t slot);
  void *(*act_new)(size_t size, uintptr_t slot);
  /* For a cold entry site under a plan with a rest group. */
  void *(*rest_malloc)(size_t size, unsigned group);
  void *(*rest_new)(size_t size, unsigned group);
  /* For an MO site decided for good: its size-consistent pool, or the next
   * allocator. */
  void *(*site_malloc)(size_t size, unsigned group);
  void *(*site_new)(size_t size, unsigned group);
  void *(*next_malloc)(size_t size);
  void *(*next_new)(size_t size);
  /* For a cold entry site under a plan without a rest group: the next
   * allocator, counted as the quick test's cold verdict would be. */
  void *(*cold_malloc)(size_t size);
  void *(*cold_new)(size_t size);
};
void ch_direct_init(const struct ch_direct_entries *e);   /* after ch_patch_init */
extern bool ch_direct_enabled;
/* The largest request a direct site's stub serves: ch_max_size, or 0 once the
 * plan is disabled, so the one size test also sends everything to malloc. */
extern size_t ch_direct_max;
/* The smaller of ch_direct_max and CH_EXACT_MAX: a request of 1 to this many
 * bytes is within the limit and an exact bin's, in one test. */
extern size_t ch_direct_small;
void ch_direct_set_max(size_t max);   /* both */
/* An allocation whose entry frame's caller (return address ret) is a plan
 * site that decided group alone: patch that call, once per site. */
void ch_direct_offer(uintptr_t ret, unsigned group);
/* An allocation whose entry site said `walk` and whose patched activations
 * decided: patch that call to skip the quick test, once per site. */
void ch_direct_offer_walk(uintptr_t ret);
/* An allocation whose entry site the plan marks cold: patch that call to
 * reach the rest group (or the next allocator) directly, once per site.
 * Cold entries that stay as they are (offered and left: a call of a
 * library function that allocates, such as std::string's _M_create, not
 * of malloc or new; a site the plan does not name, under unknown-entry
 * cold; any cold site when nothing is patched) are remembered per thread,
 * direct-mapped by return address. malloc and operator new test it before
 * the framed path (ch_cold_entry): a request there is decided at the door,
 * as a cold stub would (cppcheck in front of jemalloc: 14 sites left, 280
 * thousand of its 3.2 M allocations, about 124 instructions each through
 * the quick test). */
#define CH_COLD_LEFT_MEMO 64
extern CH_TLS uintptr_t ch_direct_cold_left[CH_COLD_LEFT_MEMO];
static inline uintptr_t *ch_direct_cold_memo(uintptr_t ret) {
  return &ch_direct_cold_left[(ret ^ (ret >> 7)) & (CH_COLD_LEFT_MEMO - 1)];
}
void ch_direct_offer_cold_slow(uintptr_t ret);
static inline void ch_direct_offer_cold(uintptr_t ret) {
  if (CH_LIKELY(*ch_direct_cold_memo(ret) == ret)) return;
  ch_direct_offer_cold_slow(ret);
}
/* Whether a request of size bytes from the call that returns to ret is a
 * remembered cold entry's, and its allocation there (alloc.c): the rest
 * group of its size, else the next allocator, counted as a cold stub's. */
static inline bool ch_cold_entry(uintptr_t ret, size_t size) {
  return size <= ch_max_size && *ch_direct_cold_memo(ret) == ret;
}
void *ch_cold_entry_malloc(size_t size);
/* The program starts its first thread (called once, while it has one):
 * patch the entry sites whose calls no live patch can reach. */
void ch_direct_before_threads(void);
/* MO's call site at ret, decided for good: patch the call to reach its
 * pool's stub (pool >= 0) or the next allocator's (-1). 1: patched, 0: it
 * cannot be, -1: another thread is writing code (offer again later). */
int ch_direct_patch_site(uintptr_t ret, int pool);
/* The same call, patched to its pool's stub, now to the next allocator's:
 * 1 patched, 0 it is not a pool stub's call, -1 another thread is writing code. */
int ch_direct_repatch_next(uintptr_t ret);
/* What a direct site's allocation decided from activations goes to: a
 * group, or -1 (the next allocator), or CH_ACT_WALK (the ordinary path). */
int ch_identify_act_direct(size_t size, uintptr_t slot);
struct ch_direct_stats { atomic_ulong patched, left; };
extern struct ch_direct_stats ch_direct_stats;
struct ch_patch_stats { atomic_ulong patched, unpatched, modules, reseeds, overflows; };
extern struct ch_patch_stats ch_patch_stats;
#define CH_PATCH_REASONS 9
extern const char *const ch_patch_reason_names[CH_PATCH_REASONS];
extern atomic_ulong ch_patch_unpatched_by[CH_PATCH_REASONS];

/* ---------------------------------------------------------- activation.c */
/* Per thread, the activations of patched sites on the stack, outermost
 * first; the stubs push them, allocations read them. The layout is shared
 * with the stub template in patch.c. */
#define CH_ACT_CAP 126
struct ch_act_entry {
  uintptr_t sp;       /* the stack slot holding the call's return address */
  uintptr_t ret;      /* that return address: the entry is live while the slot holds it */
  uint64_t mask;      /* selector bits of this and every outer activation */
  uint32_t stop;      /* innermost stop group + 1 at or outside this one, or 0 */
  int32_t decision;   /* ch_patch_verdict of (mask, stop) + 4, or 0: not yet known */
};
struct ch_act {
  struct ch_act_entry *top;       /* the innermost entry; e[0] is a sentinel */
  uintptr_t lo, hi;               /* the stubs record only for lo <= %rsp < hi; hi 0: disarmed */
  uintptr_t stack_lo, stack_hi;   /* the thread's stack, once known */
  uintptr_t seed_fail;            /* a seed walk at this slot overflowed: deeper ones walk */
  unsigned gen;                   /* ch_patch_gen the entries were seeded under */
  int bounds;                     /* 0 unknown, 1 known, -1 cannot be known */
  struct ch_act_entry e[CH_ACT_CAP + 1];
};
intptr_t ch_act_tls_offset(void);               /* of this thread's struct ch_act from %fs:0 */
intptr_t ch_tls_offset(const void *p);           /* of this thread's static TLS object p from %fs:0 */
/* Per stop site, what its records are checked against: the return address
 * of its call (1: none, while some stop site could not be patched), and
 * its stop group. The table lies in the low 2 GiB (patch.c), so that a
 * stub writes an entry's address as a 32-bit immediate; NULL: no stop
 * site's stub can be made. */
struct ch_stop_site { uintptr_t ret; uint32_t group, pad; };
extern struct ch_stop_site *ch_stop_sites;
intptr_t ch_stops_tls_offset(void);             /* of this thread's struct ch_stops from %fs:0 */
/* The group of an allocation whose entry point's frame is fp and whose
 * innermost application frame said "walk": a group, CH_ACT_REST or
 * CH_ACT_WALK. */
int ch_act_decide(const uintptr_t *fp);
/* The same for an allocation whose return address is at slot, only where the
 * thread is armed already (no seed walk): else CH_ACT_WALK. */
int ch_act_decide_armed(uintptr_t slot);
/* The fast path of the same: the group of the last call through a stop
 * site, if it is live; else, when nothing is live at all (no kept stop
 * record, no activation) on an armed thread, what an empty stack decides
 * (a group or CH_ACT_REST); else CH_ACT_WALK (ch_act_decide_armed decides). */
int ch_act_fast(uintptr_t slot);

/* --------------------------------------------------------------- stats.c */
int ch_stats_write(const char *path);  /* 0; -1 cannot write; -2 refused (not ours) */

/* ---------------------------------------------------------------- init.c */
extern atomic_int ch_init_state;   /* 0 none, 1 running, 2 done */
void ch_ensure_init(void);
/* What this thread holds back (path counts, a batch of frees into other
 * threads' chunks) goes out now: before a statistics write that is not in a
 * signal handler. */
void ch_flush_thread(void);


/* ---------------------------------------------------------- wrapper.c */
/* Verdicts on a call site's function: is it an allocation wrapper?
 * CH_WRAP_RECURSIVE: it would be, but it calls its own entry, and its
 * chains stop at it as at a function that is none. */
enum { CH_WRAP_NO, CH_WRAP_YES, CH_WRAP_UNFOLLOWED, CH_WRAP_UNDECODED, CH_WRAP_TOO_LARGE, CH_WRAP_NO_CODE,
       CH_WRAP_RECURSIVE, CH_WRAP_VERDICTS };
/* The function [start, end) and the return address ret of a call in it
 * that returned a new object (at_call: the unwind rule at the call, or
 * NULL): a CH_WRAP_* verdict. Not thread-safe (dpa.c
 * holds its lock). */
int ch_wrapper_analyse(uintptr_t start, uintptr_t end, uintptr_t ret, const struct ch_cfi_rule *at_call);

/* ------------------------------------------------------- chain_trie.c */
/* DPA's compound table: call-chain prefixes as a trie. A node is one return
 * address (pc; 0: an empty slot) below its parent's prefix, with dpa.c's
 * value for the prefix and its children: a line-aligned block of 2^lg
 * slots at byte offset kids & ~63 of the arena, where kids & 63 is 64 - lg,
 * the shift that hashes into it (kids 0: none). Lookups take no lock;
 * ch_trie_add and ch_trie_find only under dpa.c's. */
struct ch_trie_node { _Atomic uintptr_t pc; _Atomic uint32_t val; _Atomic uint32_t kids; };
extern struct ch_trie_node *ch_trie_arena;
extern struct ch_trie_node ch_trie_root;   /* the empty prefix: its children are the allocator's callers */
bool ch_trie_init(void);
static inline size_t ch_trie_hash(uintptr_t pc, unsigned shift) {
  return (size_t)((pc * 0x9e3779b97f4a7c15ull) >> shift);
}
const struct ch_trie_node *ch_trie_probe(uint32_t kids, uintptr_t pc);
/* The child for return address pc among the block kids, or NULL. Blocks
 * are at most half full: the first slot nearly always answers. */
static inline const struct ch_trie_node *ch_trie_in(uint32_t kids, uintptr_t pc) {
  const struct ch_trie_node *s = (const struct ch_trie_node *)((const char *)ch_trie_arena + (kids & ~63u)) +
                                 ch_trie_hash(pc, kids & 63);
  if (CH_LIKELY(atomic_load_explicit(&s->pc, memory_order_acquire) == pc)) return s;
  return ch_trie_probe(kids, pc);
}
static inline const struct ch_trie_node *ch_trie_child(const struct ch_trie_node *n, uintptr_t pc) {
  uint32_t kids = atomic_load_explicit(&n->kids, memory_order_acquire);
  return kids ? ch_trie_in(kids, pc) : NULL;
}
/* The node of the prefix pcs[0..n), or NULL. */
struct ch_trie_node *ch_trie_find(const uintptr_t *pcs, unsigned n);
/* parent's child for pc, added with val if new (an existing child keeps its
 * own value); NULL when the arena is spent. */
struct ch_trie_node *ch_trie_add(struct ch_trie_node *parent, uintptr_t pc, uint32_t val);

/* -------------------------------------------------------------- dpa.c */
#define CH_DPA_MAX_OGS 4096
#define CH_DPA_PREFIX_HINTS 1024   /* hints that name a chain's prefix (dpa.c): ids from CH_DPA_MAX_OGS on */
#define CH_DPA_CHECK_GAP 64       /* a trusted hint is checked again once in this many allocations (dpa.c) */
#define CH_DPA_CHAIN_MAX 8      /* application frames in a chain (dpa.c); a group keeps each */
#define CH_DPA_COUNTING (-1)   /* a group's pool while it counts towards the threshold */
#define CH_DPA_NO_POOL (-2)    /* none: every Cohort group was taken */
#define CH_DPA_CHURN (-3)      /* its pool held churn, and no Cohort group was left for the churn pool */
/* An object group: one adaptive partial call chain. */
struct ch_dpa_og {
  _Atomic unsigned objects;                 /* counted until the pool exists */
  uint32_t size;                            /* the first object's size */
  _Atomic bool mixed;                       /* sizes differ (seen while counting) */
  uint8_t length;                           /* application frames in the chain */
  int16_t frame_module[CH_DPA_CHAIN_MAX];   /* ch_modules_at index, -1: unknown */
  uintptr_t frame_offset[CH_DPA_CHAIN_MAX]; /* return address in the module's file */
};
/* What every allocation of a group reads, apart from the rest, eight to a
 * line: its pool, and whether its hint is patched. */
struct ch_dpa_live {
  _Atomic int32_t pool;   /* a Cohort group, or CH_DPA_COUNTING / NO_POOL / CHURN */
  _Atomic uint8_t hint;   /* CH_HINT_*: its outermost call, patched to name it */
  _Atomic uint16_t missed;   /* allocations found by probing while the hint was patched */
};
struct ch_dpa_counts {
  atomic_ulong verdicts[CH_WRAP_VERDICTS];  /* call sites analysed, by verdict */
  atomic_ulong groups_refused, pools_refused, table_full;
  atomic_ulong samples, edges, merges[2];   /* merges: type I, type II */
  atomic_ulong unripe;   /* allocations before their caller had made min_objects */
  atomic_ulong hints_patched, hints_left;
  atomic_ulong hints_trusted, hints_distrusted;   /* hints taken unchecked; trusted once, then a check failed */
  atomic_ulong prefix_hints;   /* calls patched to name a chain's prefix */
  atomic_ulong prefix_memos;   /* groups written to a prefix hint's memo */
  atomic_ulong pools_demoted;   /* found to hold churn: their groups went to the churn pool */
};
extern struct ch_dpa_counts ch_dpa_counts;
extern struct ch_dpa_og *ch_dpa_ogs;
extern struct ch_dpa_live *ch_dpa_live;
extern _Atomic unsigned ch_dpa_nogs;
void ch_dpa_init(void);
/* A pool, -1 (the next allocator) or CH_IDENTIFY_SAMPLE; *how: the path
 * that found a pool (CH_PATH_DPA, or _HINTED, _PREFIX: named by a patched
 * call, hint.c). */
int ch_dpa_identify(size_t size, const uintptr_t *fp, enum ch_path *how);
void *ch_dpa_malloc_sampled(size_t size);
/* The thread's hint is set: the pool of a trusted hint, taken with no
 * check; -1: ch_dpa_memo or the framed path decides. */
int ch_dpa_trusted(size_t size, enum ch_path *how);
/* No hint of the thread's is trusted: the pool of the group that its prefix
 * hint's memo finds on the stack at fp (CH_LANE_FRAME), the hints checked;
 * -1: the framed path decides. */
int ch_dpa_memo(size_t size, const uintptr_t *fp, enum ch_path *how);
int ch_dpa_unsample(void);
/* The path counted for DPA's verdict g on an allocation, found by how: a
 * sample counts as the group it was drawn from. */
static inline enum ch_path ch_dpa_path(int g, enum ch_path how) {
  if (g == CH_IDENTIFY_SAMPLE) g = ch_dpa_unsample();
  return g < 0 ? CH_PATH_DPA_BELOW : how;
}
void ch_dpa_atfork_child(void);
void ch_dpa_set_pool(unsigned og, int pool);   /* also its hint's */
bool ch_dpa_pool_demoted(unsigned pool);
int ch_dpa_churn_pool(void);   /* the pool that groups of churn share; -1: none yet */

/* -------------------------------------------------------------- hint.c */
/* A DPA group's hint: CH_HINT_UNTRIED until its chain is decided (or for
 * good, if no hint can be patched for it: CH_HINT_NONE). */
enum { CH_HINT_UNTRIED, CH_HINT_BUSY, CH_HINT_PATCHED, CH_HINT_LEFT, CH_HINT_NONE, CH_HINT_RETRY };
/* ch_dpa_hint, ch_dpa_prefix_hint: in the thread block. */
extern bool ch_hint_enabled;
void ch_hint_init(void);   /* when patching is allowed (COHORT_PATCH) and a decoder exists */
/* Patch the call returning to ret to set hint og (a group's index, or
 * CH_DPA_MAX_OGS + a prefix hint's): CH_HINT_PATCHED,
 * CH_HINT_LEFT (it cannot be), CH_HINT_RETRY (code is being written: later). */
int ch_hint_patch(uintptr_t ret, unsigned og);

/* --------------------------------------------------------------- mo.c */
#define CH_MO_SITES_LISTED 512
struct ch_mo_counts {   /* written under mo.c's lock, but sites_patched */
  unsigned long sites, sites_pooled, sites_mixed, sites_shared, pools_refused, table_full;
  atomic_ulong sites_patched;   /* decided sites whose call now skips the monitors (direct.c) */
  unsigned long sites_demoted;  /* pooled sites whose requests turned out mostly of other sizes */
};
struct ch_mo_site { int module; uintptr_t offset; uint32_t requests, size; int pool; bool decided; };
extern struct ch_mo_counts ch_mo_counts;
void ch_mo_init(void);
int ch_mo_identify(size_t size, uintptr_t ret);   /* a pool, or -1: the next allocator */
bool ch_mo_site(unsigned i, struct ch_mo_site *out);
/* A sampled request of the pooled site at ret, patched to its pool's stub:
 * of the pool's size (hit) or not. One request in CH_MO_SAMPLE_GAP of the
 * pooled sites' is sampled, whichever site makes it, so that each site is
 * sampled as often as it allocates: ch_mo_sample_in counts down to it. */
#define CH_MO_SAMPLE_GAP 64
void ch_mo_sample(uintptr_t ret, bool hit);
void ch_mo_atfork_child(void);

/* -------------------------------------------------------------- ssg.c */
void ch_ssg_note(void *p, unsigned og, size_t size);
int ch_ssg_pool_for(unsigned og, size_t size);
void ch_ssg_atfork_child(void);

#endif
