/* Cohort runtime: the memory layer: the region and its chunks (chunk.c), the heaps and
 * their bins (heap.c), the checked mode's redzones (check.c), the counts
 * the statistics report (counters.c).
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_MEMORY_H
#define COHORT_MEMORY_H

#include "next.h"
#include "thread.h"

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
  _Atomic uintptr_t owner;            /* owning heap | group; orphan_mark | group when orphaned
                                         (heap.c): never a value whose bits above the group's
                                         are 0, which the free's owner test relies on */
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
/* The largest request the groups take (the plan's max-size, or the
 * option's): set by the decision layer at start-up; larger blocks are the
 * next allocator's, and no block grows past it in place. */
extern size_t ch_max_size;
/* Blocks of an exact bin's size (up to CH_EXACT_MAX) and of a class's size
 * above it, up to CH_RECENT_SIZE_MAX, have recent lists: one per exact bin,
 * then one per class (320, 384, 448, 512, 640, 768, 896 and 1,024 bytes),
 * indexed as their bins are (heap.c, "Recent frees"). 1 KiB is as far as
 * the free path sees a block's end in the two words of start bits it reads
 * (the first 63 granules' starts, then the 64th's bit of the second word). */
#define CH_RECENT_SIZE_MAX 1024
#define CH_RECENT_LISTS (CH_EXACT_MAX / CH_GRANULE + 8)
/* A thread's state for one group. The first line is touched by every
 * allocation in the group; the recent lists' three lines by the allocations
 * and frees of blocks up to CH_RECENT_SIZE_MAX bytes. */
struct ch_group_heap {
  struct ch_chunk *current;
  uint64_t allocs, frees;      /* this thread's (and its chunks', reported), summed by stats.c */
  struct ch_chunk *chunks;     /* every chunk this heap owns for the group */
  struct ch_chunk *avail;      /* chunks whose bins may satisfy requests */
  struct ch_chunk *room;       /* chunks set aside with untouched room (heap.c) */
  struct ch_chunk *spill;      /* requests the current chunk has room but no fit for (heap.c) */
  uint64_t pool_word;          /* a pool's line (pool.c): its descriptor word, 0 once destroyed */
  /* Per exact bin and per class up to CH_RECENT_SIZE_MAX, the blocks this
   * heap freed last, whatever chunk holds them: the head's address | how
   * many the list holds (heap.c, "Recent frees"). */
  uintptr_t recent[CH_RECENT_LISTS];
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
extern uint64_t ch_line_groups;   /* set once at start-up (init.c), by ch_heap_place_lines */
/* Per group, how many bytes into a line its line-sized blocks start. */
extern uint8_t ch_line_offset[CH_MAX_GROUPS];
/* Group g places its blocks of whole lines `offset` bytes (0, 16, 32 or 48)
 * into a line wherever it bumps them; at start-up, before any allocation. */
void ch_heap_place_lines(unsigned g, unsigned offset);
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

#endif
