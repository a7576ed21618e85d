/* Cohort runtime: per-thread group heaps.
 *
 * Each thread has a heap with, per group, a current chunk it bump-allocates
 * from and the other chunks it owns. Freed blocks go into per-chunk bins
 * (segregated by size, linked through their first word), so space freed
 * inside a chunk is reused by the same group and a long-lived object cannot
 * pin an otherwise empty chunk. A line that reads or writes such a block
 * (the program's memory, not the heap's) says "[block]" in its comment:
 * cohort bench counts the cache misses of those lines apart from the
 * runtime's own metadata's (cohort/formats/cgfile.py). Only the owning thread touches a chunk's
 * bins and counts; another thread's free sets the block's freed bit
 * atomically and pushes the block onto the owning heap's delayed list (in
 * batches), which the owner drains. Heaps are
 * never freed (an exited thread's heap waits for reuse), so that push can
 * never land in freed memory. Chunks of exited
 * threads become orphans, handled under a lock until a heap adopts them: the
 * first thread with a heap that frees into one, or that needs a chunk. A
 * thread that starts another leaves its heap idle, and a thread that frees
 * a batch's worth into it before it allocates again makes its chunks
 * orphans too ("A thread that starts another").
 *
 * The common allocation touches the group's line of the thread's heap, the
 * chunk header's first line, one line of bins and the block itself; the
 * common free the chunk's table entry, the header's first line, two words
 * of start bits, one line of bins and the block (not the heap line: the
 * chunk counts its frees and reports them in batches). Rarer work hangs off
 * one threshold test each way. */
#define _GNU_SOURCE
#include "memory.h"

#include <string.h>
#include <sys/auxv.h>

/* The thread's heap, and the fast paths' view of it: the same, except in
 * the checked mode, where my_heap stays NULL so that every allocation and
 * free leaves its fast path for the slow one, which hands it to check.c. */
#define own_heap (ch_thread.own_heap)
#define my_heap (ch_thread.my_heap)
size_t ch_max_size = 4096;   /* memory.h */
/* The heap this thread left idle when it started another thread, and the
 * life word it left it with ("A thread that starts another", below). */
static CH_TLS struct ch_heap *idle_heap;
static CH_TLS uint64_t idle_life;
enum { HEAP_ACTIVE, HEAP_IDLE, HEAP_GONE };   /* the low two bits of a heap's life */
/* The life word of the same epoch in another state. */
static inline uint64_t life_in(uint64_t life, unsigned state) { return (life & ~(uint64_t)3) | state; }
static _Atomic uint64_t heap_epochs;          /* one per heap taken by a thread */
atomic_ulong ch_heaps_handed_on;
atomic_ulong ch_remote_batches;

/* Groups whose blocks of a whole number of cache lines start on a line
 * (bit g: group g; docs/runtime.md, "Line-sized blocks"). */
uint64_t ch_line_groups;
uint8_t ch_line_offset[CH_MAX_GROUPS];
static inline bool on_lines(unsigned group, size_t n) { return !(n & 63) && ((ch_line_groups >> group) & 1); }
/* Where a line-sized block of the group is to start, within a line: 0, or
 * the plan's at=K (docs/runtime.md, "A big build walked out of allocation
 * order"). An explicitly aligned request (align 64 or more) ignores it. */
static inline uintptr_t line_phase(unsigned group) { return ch_line_offset[group]; }
void ch_heap_place_lines(unsigned g, unsigned offset) {
  if (g >= CH_MAX_GROUPS) return;
  ch_line_groups |= (uint64_t)1 << g;
  ch_line_offset[g] = (uint8_t)(offset & 48);
}
static pthread_key_t heap_key;
static bool heap_key_ok;
static ch_lock_t heaps_lock;                     /* heap lists and orphans */
static struct ch_heap *all_heaps, *free_heaps;
static struct ch_chunk *orphans[CH_MAX_GROUPS];  /* linked through next/prev */
/* An orphan's owner word holds this mark instead of a heap, so that the free
 * path's one comparison with the thread's heap (NULL or real) rejects it. */
static _Alignas(64) char orphan_mark[64];
#define ORPHANED(group) ((uintptr_t)orphan_mark | (group))
/* The heap an owner word names, NULL for an orphan. */
static inline struct ch_heap *owner_of(uintptr_t owner) {
  struct ch_heap *h = ch_owner_heap(owner);
  return h == (struct ch_heap *)orphan_mark ? NULL : h;
}

/* Free keys: a counter from a random start, each value mixed by a
 * bijection, so no two chunk epochs share a key; never 0, which a block
 * handed out from a bin holds. */
static _Atomic uint64_t key_counter;
static uint64_t new_key(void) {
  uint64_t k = atomic_fetch_add_explicit(&key_counter, 0x9e3779b97f4a7c15ull, memory_order_relaxed);
  k ^= k >> 30; k *= 0xbf58476d1ce4e5b9ull; k ^= k >> 27; k *= 0x94d049bb133111ebull; k ^= k >> 31;
  return k | 1;
}

/* A chunk not current whose bins hold at least this much is worth allocating
 * from (or less, for a chunk used only in part: offer_min). */
#define AVAIL_MIN (ch_chunk_size / 16)
/* An avail chunk with at least this much free is merged (if due) before the
 * general path leaves it for fresh pages; while the group's merges find
 * room, down to MERGE_MIN >> MERGE_SHIFT_MAX, which is AVAIL_MIN, the least
 * an avail chunk holds (docs/runtime.md, "Merging before fresh pages"). */
#define MERGE_MIN (ch_chunk_size / 4)
#define MERGE_SHIFT_MAX 2
/* How far a chunk's live bytes may move before it reports them to the
 * shared statistics: the error of a group's live and peak figures is at most
 * this per chunk in use. */
#define STATS_BATCH 4096

/* ----------------------------------------------------------- statistics */

/* A chunk holds back its live-byte change and its free count until the
 * change reaches STATS_BATCH either way (low and high, see set_low) or the
 * chunk empties: then the change goes to the shared statistics and the
 * count to its owner's heap (gh; NULL: orphaned, the count goes to the
 * shared statistics too). The statistics file adds what chunks hold back. */
static void chunk_report(struct ch_group_heap *gh, struct ch_chunk *c) {
  long d = (long)c->live_bytes - (long)c->told;
  c->told = c->live_bytes;
  c->high = c->told + STATS_BATCH;
  if (d) ch_count_live(c->group, d);
  if (!c->frees) return;
  if (gh) gh->frees += c->frees;
  else atomic_fetch_add_explicit(&ch_gstats[c->group].frees, c->frees, memory_order_relaxed);
  c->frees = 0;
}

static void drain_list(struct ch_heap *h, void *b);

/* An entry of a delayed list is a block, or a batch of blocks (struct
 * ch_batch) whose address has bit 0 set: blocks are 16-aligned. */
static inline bool is_batch(const void *e) { return (uintptr_t)e & 1; }
static inline struct ch_batch *batch_of(void *e) { return (struct ch_batch *)((uintptr_t)e - 1); }
static inline void *batch_entry(struct ch_batch *b) { return (void *)((uintptr_t)b + 1); }
static inline void **delayed_link(void *e) { return (void **)((uintptr_t)e & ~(uintptr_t)1); }

/* Frees that reached the heaps of exited threads after they left: finish
 * them (no thread owns those heaps, so this thread may drain them). */
void ch_heaps_drain_exited(void) {
  ch_lock(&heaps_lock);
  void *late = NULL;
  for (struct ch_heap *h = free_heaps; h; h = h->free_next) {
    void *b = atomic_exchange(&h->delayed, NULL);
    while (b) { void *n = *delayed_link(b); *delayed_link(b) = late; late = b; b = n; }
  }
  ch_unlock(&heaps_lock);
  drain_list(NULL, late);
}

struct held { uint64_t *frees; long *live; };
static void add_held(const struct ch_chunk *c, void *arg) {
  struct held *t = arg;
  unsigned g = c->group;
  if (g >= CH_MAX_GROUPS) return;   /* a spare being made a chunk again */
  t->frees[g] += c->frees;
  t->live[g] += (long)c->live_bytes - (long)c->told;
}

void ch_heaps_sum(uint64_t allocs[CH_MAX_GROUPS], uint64_t frees[CH_MAX_GROUPS], long live[CH_MAX_GROUPS]) {
  ch_lock(&heaps_lock);
  for (struct ch_heap *h = all_heaps; h; h = h->all_next)
    for (unsigned g = 0; g < CH_MAX_GROUPS; g++) {
      allocs[g] += h->g[g].allocs;
      frees[g] += h->g[g].frees;
    }
  ch_unlock(&heaps_lock);
  struct held t = {frees, live};
  ch_chunks_each(add_held, &t);
}

/* ------------------------------------------------------------- bitmaps */

/* The start bits end a line before the header begins and the freed bits
 * end where the start bits begin, so a block's bits are found from its
 * chunk's header and its address: granule g of the chunk is covered by
 * word g/64 of each. */
static inline size_t granule(const void *p) { return ((uintptr_t)p & ch_chunk_mask) / CH_GRANULE; }
static inline uintptr_t chunk_bits(const struct ch_chunk *c) { return (uintptr_t)ch_chunk_starts(c); }
static inline uint64_t *bitwords_at(uintptr_t bits, size_t g) { return (uint64_t *)bits + (g >> 6); }
/* The start bits' word of p in c, and its freed bits' word: from the header
 * the caller holds (or the copy of its bias in the chunk table's entry,
 * which free reads), not one worked out again from p and its colour. */
static inline uint64_t *starts_word_biased(uintptr_t starts_bias, const void *p) {
  return (uint64_t *)starts_bias + ((uintptr_t)p >> CH_STARTS_WORD_SHIFT);
}
static inline uint64_t *starts_word(const struct ch_chunk *c, const void *p) {
  return starts_word_biased(c->starts_bias, p);
}
static inline uint64_t *freed_word(const struct ch_chunk *c, const void *p) {
  return (uint64_t *)((char *)starts_word(c, p) - ch_chunk_starts_bytes);
}
static inline uint64_t gbit(size_t g) { return (uint64_t)1 << (g & 63); }
/* The 64 bits of hi:lo from bit n on (n < 64): one shrd. */
static inline uint64_t shift_right_pair(uint64_t lo, uint64_t hi, unsigned n) {
  __asm__("shrdq %%cl, %1, %0" : "+r"(lo) : "r"(hi), "c"(n) : "cc");
  return lo;
}
static inline uint64_t load_word(const uint64_t *w) { return __atomic_load_n(w, __ATOMIC_RELAXED); }
static inline void store_word(uint64_t *w, uint64_t v) { __atomic_store_n(w, v, __ATOMIC_RELAXED); }

static inline void set_start(const struct ch_chunk *c, const void *p) {   /* owner only */
  uint64_t *w = starts_word(c, p);
  store_word(w, load_word(w) | gbit(granule(p)));
}
static inline void clear_start(const struct ch_chunk *c, const void *p) {   /* owner only */
  uint64_t *w = starts_word(c, p);
  store_word(w, load_word(w) & ~gbit(granule(p)));
}
/* The start bit at the bump pointer is always set (unless the chunk is
 * full), so that every handed-out block but the last of a full chunk has a
 * later start bit: the free path finds its size without the bump pointer. */
static inline void mark_bump(const struct ch_chunk *c, const char *bump) {
  if ((uintptr_t)bump & ch_chunk_mask) set_start(c, bump);
}
/* Freed bits mark only blocks on their way back from another thread: a
 * remote free sets the bit atomically (finding it set is a double free) and
 * the owner clears it, atomically too, when the block reaches a bin. The
 * owner's own frees and allocations do not touch them: blocks in bins carry
 * their chunk's key in their second word instead (see ch_group_free). */
static inline bool freed_set_remote(const struct ch_chunk *c, const void *p) {   /* returns the old bit */
  return __atomic_fetch_or(freed_word(c, p), gbit(granule(p)), __ATOMIC_RELAXED) & gbit(granule(p));
}
static inline bool freed_bit(const struct ch_chunk *c, const void *p) {
  return load_word(freed_word(c, p)) & gbit(granule(p));
}
static inline void freed_clear(const struct ch_chunk *c, const void *p) {   /* owner, off the fast paths */
  __atomic_fetch_and(freed_word(c, p), ~gbit(granule(p)), __ATOMIC_RELAXED);
}
static inline char *load_bump(const struct ch_chunk *c) {
  return __atomic_load_n(&c->bump, __ATOMIC_ACQUIRE);
}

/* Size of the block at granule g0: up to the next block start, or to gend,
 * the bump pointer's granule. A thread other than the owner must load the
 * bump pointer before the start bits. */
static CH_NOINLINE size_t block_size_scan(uintptr_t bitmap, size_t g0, size_t gend) {
  for (size_t g = ((g0 >> 6) + 1) << 6; g < gend; g += 64) {
    uint64_t bits = load_word(bitwords_at(bitmap, g));
    if (bits) {
      size_t j = g + (size_t)__builtin_ctzll(bits);
      return ((j < gend ? j : gend) - g0) * CH_GRANULE;
    }
  }
  return (gend - g0) * CH_GRANULE;
}
static inline size_t block_size_at(uintptr_t bits, size_t g0, uint64_t starts, size_t gend) {
  uint64_t later = (starts >> (g0 & 63)) >> 1;
  if (CH_LIKELY(later)) {
    size_t j = g0 + 1 + (size_t)__builtin_ctzll(later);
    return ((j < gend ? j : gend) - g0) * CH_GRANULE;
  }
  return block_size_scan(bits, g0, gend);
}
/* The owner's view: its own start bits all lie below the bump pointer, so
 * a later start bit in the same word ends the block without a bound test. */
static inline size_t owner_block_size(const struct ch_chunk *c, size_t g0, uint64_t starts) {
  uint64_t later = (starts >> (g0 & 63)) >> 1;
  if (CH_LIKELY(later)) return (1 + (size_t)__builtin_ctzll(later)) * CH_GRANULE;
  return block_size_scan(chunk_bits(c), g0, granule(c->bump - 1) + 1);
}
static size_t block_size(const struct ch_chunk *c, const void *p) {
  char *bump = load_bump(c);
  size_t gend = granule(bump - 1) + 1, g = granule(p);
  return block_size_at(chunk_bits(c), g, load_word(starts_word(c, p)), gend);
}

/* --------------------------------------------------------------- bins */

/* Exact bins for 16..256 bytes, a granule apart (most grouped objects),
 * then one mixed bin per size class above (ch_block_size), four per power
 * of two. Requests come in those sizes; blocks split off or merged come in
 * any whole number of granules, and go to the bin of the largest class they
 * can serve, so that any block of a mixed bin b serves b's class. Two
 * exceptions: 272..304 bytes go to the first mixed bin (the bin below is an
 * exact one), and the last bin is open-ended. binmask says which mixed
 * bins may hold anything, so finding a fit is a bit scan. It has no bits
 * for the exact bins, whose heads are read instead (next_bin): the free
 * path pushes on an exact bin and the allocation path pops one without a
 * write to the mask (three instructions a free, measured below in
 * docs/runtime.md), and only the slow paths pay the reads. */
#define EXACT_MAX CH_EXACT_MAX
#define NEXACT (EXACT_MAX / CH_GRANULE)
#define EXACT_BITS (((uint64_t)1 << NEXACT) - 1)
/* The bin of a request's size: its class's. */
static inline unsigned bin_of_computed(size_t n) {
  if (n <= EXACT_MAX) return (unsigned)(n / CH_GRANULE - 1);
  size_t m = n - 1;
  unsigned l = 63u - (unsigned)__builtin_clzll(m);
  unsigned b = NEXACT + 4 * (l - 8) + (unsigned)((m >> (l - 2)) & 3);
  return b < CH_NBINS ? b : CH_NBINS - 1;
}
/* The bin a free block of size n goes to: the largest class it can serve. */
static inline unsigned bin_for_block_computed(size_t n) {
  unsigned b = bin_of_computed(n);
  return n <= EXACT_MAX || b == NEXACT || b == CH_NBINS - 1 || ch_block_size(n) == n ? b : b - 1;
}
/* Both, looked up for the block sizes of up to 4 KiB (whole granules), the
 * mixed bins' sizes that most requests above 256 bytes have: computed, the
 * two cost a free of such a block about 25 instructions (clz, shifts, and
 * the class's size again), a third of what the free took beyond the
 * program's own work in `prodcons larson`. Filled at start-up. */
#define BIN_TABLE_MAX 4096
#define BIN_TABLE_GRANULES (BIN_TABLE_MAX / CH_GRANULE)
static uint8_t bin_of_table[BIN_TABLE_GRANULES + 1], bin_for_table[BIN_TABLE_GRANULES + 1];
/* Per block size above 256 bytes up to CH_RECENT_SIZE_MAX, in granules: its
 * recent list when it is a class's size exactly, else NO_RECENT (a block
 * split or merged to another size serves its class only through a bin). */
#define NO_RECENT 0xFF
static uint8_t recent_of_table[CH_RECENT_SIZE_MAX / CH_GRANULE + 1];
static uint16_t recent_size_table[CH_RECENT_LISTS];   /* the size of each list's blocks */
static void fill_bin_tables(void) {
  for (size_t g = 1; g <= BIN_TABLE_GRANULES; g++) {
    bin_of_table[g] = (uint8_t)bin_of_computed(g * CH_GRANULE);
    bin_for_table[g] = (uint8_t)bin_for_block_computed(g * CH_GRANULE);
  }
  for (size_t g = 1; g <= CH_RECENT_SIZE_MAX / CH_GRANULE; g++) {
    size_t n = g * CH_GRANULE;
    unsigned b = g <= NEXACT ? (unsigned)g - 1 : ch_block_size(n) == n ? bin_of_computed(n) : NO_RECENT;
    recent_of_table[g] = (uint8_t)b;
    if (b != NO_RECENT) recent_size_table[b] = (uint16_t)n;
  }
}
/* n is a whole number of granules (a block's size, or a request's class). */
static inline unsigned bin_of(size_t n) {
  if (n <= EXACT_MAX) return (unsigned)(n / CH_GRANULE - 1);
  return n <= BIN_TABLE_MAX ? bin_of_table[n / CH_GRANULE] : bin_of_computed(n);
}
static inline unsigned bin_for_block(size_t n) {
  if (n <= EXACT_MAX) return (unsigned)(n / CH_GRANULE - 1);
  return n <= BIN_TABLE_MAX ? bin_for_table[n / CH_GRANULE] : bin_for_block_computed(n);
}

/* A free block holds the next block of its bin in its first word, the free
 * key in its second and, in a mixed bin, its own size in the third. Every
 * block has at least 16 bytes (CH_MIN_BLOCK). */
static inline void bin_push(struct ch_chunk *c, void *p, size_t size) {
  unsigned b = bin_for_block(size);
  if (b >= NEXACT) ((size_t *)p)[2] = size;
  ((uint64_t *)p)[1] = c->key;   /* [block] its free key */
  *(void **)p = c->bins[b];   /* [block] its link */
  c->bins[b] = p;
  if (b >= NEXACT) c->binmask |= (uint64_t)1 << b;
}
static inline void *bin_pop(struct ch_chunk *c, unsigned b) {
  void *p = c->bins[b], *next = *(void **)p;   /* [block] the popped block's link */
  c->bins[b] = next;
  if (!next && b >= NEXACT) c->binmask &= ~((uint64_t)1 << b);
  return p;
}
/* The first bin from b to last (last below CH_NBINS; b may be last + 1)
 * that holds anything, or last + 1: the exact ones' heads read one by one, stopping at the first
 * that holds a block, then the mixed ones' bits of binmask (off the fast
 * paths). */
static unsigned next_bin(const struct ch_chunk *c, unsigned b, unsigned last) {
  for (; b < NEXACT && b <= last; b++)
    if (c->bins[b]) return b;
  if (b > last) return last + 1;
  uint64_t m = c->binmask >> b << b;
  if (last < CH_NBINS - 1) m &= ((uint64_t)2 << last) - 1;
  return m ? (unsigned)__builtin_ctzll(m) : last + 1;
}
static inline bool any_bin_in(const struct ch_chunk *c, unsigned first, unsigned last) {
  return next_bin(c, first, last) <= last;
}
static inline bool any_bin(const struct ch_chunk *c) { return c->binmask || any_bin_in(c, 0, NEXACT - 1); }
static inline size_t bin_block_size(unsigned b, const void *p) {
  return b < NEXACT ? (b + 1) * CH_GRANULE : ((const size_t *)p)[2];
}
/* Does the block at p carry its chunk's key: in a bin, unless the program
 * copied freed memory there? */
static inline bool holds_key(const struct ch_chunk *c, const void *p) {
  return ((const uint64_t *)p)[1] == c->key;   /* [block] the free key's word */
}
/* Bytes below the bump pointer that are not live: exactly what the bins hold. */
static inline size_t free_bytes(const struct ch_chunk *c) {
  return (size_t)(c->bump - c->data) - c->live_bytes;
}

/* --------------------------------------------------------- recent frees */

/* A heap's frees of blocks up to EXACT_MAX bytes, and of a class's size
 * above it up to CH_RECENT_SIZE_MAX, go first to its recent list of their
 * group and size, whatever chunk holds them, and the fast path's
 * allocations of that size take from there first: the block freed
 * last comes back first, wherever it lies, as glibc's thread cache hands it
 * back. Objects freed together and made together again (a record and the
 * cells that point to it) so keep lying together. A chunk's own bins do
 * that only for its own blocks, and the fast path reads only the current
 * chunk's: a block freed into another chunk waited there until that chunk
 * was allocated from again, and the objects made meanwhile went to older
 * holes of the current chunk, apart (wards' cases, three blocks each, with
 * 1 MiB chunks: 1.21 x glibc's time under the rest pool, against 0.94 x
 * with these lists; docs/runtime.md, "Recent frees").
 *
 * A listed block is free to its chunk's accounting, as a binned one is (its
 * chunk may empty, start over or retire: the chunk's blocks leave the lists
 * first, recent_drop), but it is in no bin: a merge, which would miss it,
 * gets the lists back in the bins first (recent_flush), since a merge
 * changes the chunk's key. In its second word, where a binned block keeps
 * the chunk's key, it keeps the chunk's address: the allocation that takes
 * it back counts it live there without working the chunk out from the
 * address, and a second free of it is caught as one of a binned block is
 * (a live block holds neither, unless the program planted them). A list
 * holds at most RECENT_MAX blocks, its length in the head's low bits
 * (blocks are 16-aligned), each block's link holding the head as it was
 * before: a free beyond that goes to its chunk's bin.
 *
 * The classes' lists (320 bytes to 1 KiB, where larson's requests mostly
 * fall) hold only blocks of the class's size exactly, freed as they were
 * made: a block split or merged to another size goes to a mixed bin, whose
 * blocks may serve any class below theirs. Without them, a class's freed
 * blocks were reused only from the current chunk's own bin, and every other
 * request of those sizes took the general path (allocbench sizes 257..319:
 * 209 instructions a pair, against jemalloc's 101; docs/runtime.md,
 * "Recent frees of the classes"). */
#define RECENT_MAX ((uintptr_t)CH_GRANULE - 1)
_Static_assert(CH_RECENT_LISTS == NEXACT + 8, "eight classes, 320 bytes to 1 KiB, above the exact bins");
_Static_assert(CH_RECENT_SIZE_MAX / CH_GRANULE <= BIN_TABLE_GRANULES, "the classes' lists come from the bin tables");
/* The recent list of a block of size bytes (a whole number of granules,
 * at least one), or NO_RECENT. */
static inline unsigned recent_of(size_t size) {
  if (size <= EXACT_MAX) return (unsigned)(size / CH_GRANULE - 1);
  return size <= CH_RECENT_SIZE_MAX ? recent_of_table[size / CH_GRANULE] : NO_RECENT;
}
static inline size_t recent_size(unsigned b) { return recent_size_table[b]; }
static inline void *recent_block(uintptr_t head) { return (void *)(head & ~RECENT_MAX); }
/* Does the block at p carry the listed mark, its chunk's address? */
static inline bool listed_mark(const struct ch_chunk *c, const void *p) {
  return ((const uint64_t *)p)[1] == (uint64_t)(uintptr_t)c;   /* [block] the mark's word */
}

/* Is p (a block of size bytes) in h's recent list of group g? */
static CH_NOINLINE bool in_recent(const struct ch_heap *h, unsigned g, size_t size, const void *p) {
  unsigned list = size ? recent_of(size) : NO_RECENT;
  if (!h || list == NO_RECENT) return false;
  for (void *b = recent_block(h->g[g].recent[list]); b; b = recent_block(*(uintptr_t *)b))
    if (b == p) return true;   /* [block] each listed block's link */
  return false;
}

/* gh's recent lists go to their chunks' bins (their frees are counted). */
static void recent_flush(struct ch_group_heap *gh) {
  for (unsigned b = 0; b < CH_RECENT_LISTS; b++) {
    uintptr_t head = gh->recent[b];
    gh->recent[b] = 0;
    for (void *p = recent_block(head), *next; p; p = next) {
      next = recent_block(*(uintptr_t *)p);   /* [block] its link */
      /* [block] the listed mark: its chunk (bin_push writes the key over it) */
      bin_push((struct ch_chunk *)(uintptr_t)((uint64_t *)p)[1], p, recent_size(b));
    }
  }
}

/* c's blocks leave gh's recent lists: c empties, to start over or retire. */
static CH_NOINLINE void recent_drop(struct ch_group_heap *gh, const struct ch_chunk *c) {
  for (unsigned b = 0; b < CH_RECENT_LISTS; b++) {
    uintptr_t head = gh->recent[b], *link = &gh->recent[b];
    void *keep[RECENT_MAX];
    unsigned n = 0;
    for (void *p = recent_block(head); p; p = recent_block(*(uintptr_t *)p)) {   /* [block] its link */
      if (!listed_mark(c, p)) keep[n++] = p;
      /* The mark, unlike the key, outlives the chunk's starting over: left
       * in memory the bump pointer hands out again, it would make a later
       * free of that block look like a second one. */
      else ((uint64_t *)p)[1] = 0;   /* [block] the listed mark */
    }
    /* Relink the rest, oldest last, each link with the length after it. */
    *link = 0;
    for (unsigned i = n; i-- > 0;) {
      *(uintptr_t *)keep[i] = *link;   /* [block] its link */
      *link = (uintptr_t)keep[i] | (n - i);
    }
  }
}

void ch_heap_flush_recent(void) {
  struct ch_heap *h = own_heap;
  if (!h) return;
  for (unsigned g = 0; g < CH_MAX_GROUPS; g++) recent_flush(&h->g[g]);
}

/* ------------------------------------------------------- chunk lists */

/* A chunk that is neither current nor spill waits on one of two lists to be
 * allocated from again: avail when its bins hold at least offer_min, room
 * when they do not but it has at least AVAIL_MIN of untouched room at the
 * bump pointer (it was current, and was left for holes elsewhere at a page
 * boundary). Any other chunk is nearly full, or has just failed a request
 * from the avail list with no room left: its next free that leaves offer_min
 * binned puts it back on avail (set_low), or it empties. Without the room
 * list, a chunk left at a page boundary waited there with most of itself
 * unused, and each new chunk in turn did the same: a thread replacing random
 * blocks held 280 to 521 chunks for 6.3 MB live (docs/runtime.md). */
enum { CH_WAITS_NOT, CH_WAITS_AVAIL, CH_WAITS_ROOM };
static inline bool has_room(const struct ch_chunk *c) { return (size_t)(c->end - c->bump) >= AVAIL_MIN; }
/* How much of a chunk must be binned for it to be offered (the avail list):
 * AVAIL_MIN, or an eighth of what it has handed out where that is less, so
 * that a chunk used only in part does not keep a third of itself in holes
 * that nothing reuses while its thread bumps fresh pages elsewhere. A
 * lineage of threads each leaving chunks a few hundred KiB into their 1 MiB
 * held 12 to 14 of them for 1.9 MB live, 21-28.5% of their resident pages
 * free (`prodcons relay 2 60000 256` under `all`, docs/runtime.md). */
#define OFFER_PART 8
#define OFFER_FLOOR 4096
static inline size_t offer_min(const struct ch_chunk *c) {
  size_t part = (size_t)(c->bump - c->data) / OFFER_PART;
  return part >= AVAIL_MIN ? AVAIL_MIN : part > OFFER_FLOOR ? part : OFFER_FLOOR;
}

/* The chunk's state calls for after_free once live_bytes falls below this:
 * when empty for the current or spill chunk (it starts over) once its bump
 * pointer has moved RESET_MIN since it last did, and for chunks already
 * offered or too little used to offer; else once the bins hold offer_min. A
 * group that frees its only live block and allocates another, over and
 * over, takes it back from its bin: starting over would cost the free a
 * reset every time (allocbench alt: 18 ns a pair against glibc's 11). */
#define RESET_MIN 4096
static inline size_t state_low(const struct ch_group_heap *gh, const struct ch_chunk *c) {
  size_t used = (size_t)(c->bump - c->data);
  if (c == gh->current || c == gh->spill) return used >= RESET_MIN;
  size_t offer = offer_min(c);
  return c->waits == CH_WAITS_AVAIL || used < offer ? 1 : used - offer + 1;
}
/* The free path's one threshold: the state's, or the statistics' (a fall of
 * STATS_BATCH since the last report), whichever comes first. */
static inline void set_low(const struct ch_group_heap *gh, struct ch_chunk *c) {
  size_t s = state_low(gh, c), t = c->told >= STATS_BATCH ? c->told - STATS_BATCH + 1 : 0;
  c->low = (uint32_t)(s > t ? s : t);
}

static void list_add(struct ch_group_heap *gh, struct ch_chunk *c) {
  c->prev = NULL;
  c->next = gh->chunks;
  if (gh->chunks) gh->chunks->prev = c;
  gh->chunks = c;
}
static void list_del(struct ch_chunk **head, struct ch_chunk *c) {
  if (c->prev) c->prev->next = c->next; else *head = c->next;
  if (c->next) c->next->prev = c->prev;
  c->next = c->prev = NULL;
}
static void wait_add(struct ch_group_heap *gh, struct ch_chunk *c, unsigned which) {
  struct ch_chunk **head = which == CH_WAITS_AVAIL ? &gh->avail : &gh->room;
  c->waits = which;
  set_low(gh, c);
  c->wait_prev = NULL;
  c->wait_next = *head;
  if (*head) (*head)->wait_prev = c;
  *head = c;
}
static void wait_del(struct ch_group_heap *gh, struct ch_chunk *c) {
  if (c->waits == CH_WAITS_NOT) return;
  struct ch_chunk **head = c->waits == CH_WAITS_AVAIL ? &gh->avail : &gh->room;
  if (c->wait_prev) c->wait_prev->wait_next = c->wait_next; else *head = c->wait_next;
  if (c->wait_next) c->wait_next->wait_prev = c->wait_prev;
  c->wait_next = c->wait_prev = NULL;
  c->waits = CH_WAITS_NOT;
  set_low(gh, c);
}

/* ----------------------------------------------------------- accounting */

/* The high-water mark moves a page at a time, so this runs once per page of
 * fresh memory, not once per allocation. */
static CH_NOINLINE void advance_hwm(struct ch_chunk *c, char *to) {
  size_t ps = ch_page_size();
  char *base = (char *)ch_chunk_base(c);
  char *nh = base + (((size_t)(to - base) + ps - 1) & ~(ps - 1));
  if (nh > c->end) nh = c->end;
  if (nh <= c->hwm) return;
  size_t before = ch_chunk_resident(c);
  c->hwm = nh;
  size_t after = ch_chunk_resident(c);
  if (after != before) ch_count_resident(c->group, (long)(after - before));
}

/* An allocation took live_bytes above c->high: report, and move both thresholds. */
static CH_NOINLINE void report_rise(struct ch_group_heap *gh, struct ch_chunk *c) {
  chunk_report(gh, c);
  set_low(gh, c);
}
/* Returns p, which is never NULL: the fast path can then end in a tail call
 * here, and its callers keep no register across it. */
static CH_NOINLINE __attribute__((returns_nonnull)) void *report_rise_then(struct ch_group_heap *gh,
                                                                          struct ch_chunk *c, void *p) {
  report_rise(gh, c);
  return p;
}
static inline void note_alloc(struct ch_group_heap *gh, struct ch_chunk *c, size_t bytes) {
  gh->allocs++;
  uint32_t live = c->live_bytes += (uint32_t)bytes;
  if (CH_UNLIKELY(live > c->high)) report_rise(gh, c);
}

/* The chunk holds no live block and leaves the heap: what it held back goes
 * to the statistics first. */
static void retire(struct ch_group_heap *gh, struct ch_chunk *c) {
  chunk_report(gh, c);
  ch_chunk_retire(c);
}

/* Everything in the chunk is free again: start over from its beginning. */
static void chunk_reset(struct ch_chunk *c) {
  ch_chunk_clear_starts(c, c->data, c->bump);   /* the bump pointer's mark included */
  for (uint64_t m = c->binmask | EXACT_BITS; m; m &= m - 1) c->bins[__builtin_ctzll(m)] = NULL;
  c->binmask = 0;
  c->live_bytes = 0;    /* reported already (after_free) */
  c->key = new_key();   /* keys left in the old blocks are stale now */
  c->coalesced_at = c->freed;
  if (c->bump > c->top) c->top = c->bump;
  mark_bump(c, c->data);
  __atomic_store_n(&c->bump, c->data, __ATOMIC_RELEASE);
}

/* After frees, or when c stops being current or spill: retire an empty
 * chunk, reset an empty current one, or put c on the list it now belongs
 * to. Sets the chunk's next threshold. */
static CH_NOINLINE void after_free(struct ch_group_heap *gh, struct ch_chunk *c) {
  bool active = c == gh->current || c == gh->spill;
  if (c->live_bytes == 0) {
    recent_drop(gh, c);   /* before its key changes, or it leaves the heap */
    if (active) {
      chunk_report(gh, c);
      chunk_reset(c);
      set_low(gh, c);
      return;
    }
    wait_del(gh, c);
    list_del(&gh->chunks, c);
    retire(gh, c);
    return;
  }
  if (active || c->waits == CH_WAITS_AVAIL) { set_low(gh, c); return; }
  if (free_bytes(c) >= offer_min(c)) {
    wait_del(gh, c);   /* off the room list: its bins come first now */
    wait_add(gh, c, CH_WAITS_AVAIL);
  } else if (c->waits == CH_WAITS_NOT && has_room(c)) {
    wait_add(gh, c, CH_WAITS_ROOM);
  } else {
    set_low(gh, c);
  }
}

/* ------------------------------------------------------------- coalescing */

/* Freed blocks are not merged as they are freed: the bins take them as they
 * are, which keeps the free path short and a group's same-sized objects
 * reusing each other's places. But where sizes mix, a chunk's free bytes end
 * up as fragments none of which fits a larger request, and the chunk is left
 * for a new one while most of it is free (a thread replacing random blocks of
 * 16 B to 1 KiB held 430 chunks for 0.9 MB live). So, as glibc's
 * malloc_consolidate does for its fast bins, a chunk whose free bytes could
 * hold a request that no block fits merges its free neighbours first, and a
 * free run that reaches the bump pointer becomes bump space again. */

/* The first start bit after granule g, or gend (the bump pointer's granule). */
static inline size_t next_start(uintptr_t bits, size_t g, size_t gend) {
  return g + block_size_at(bits, g, load_word(bitwords_at(bits, g)), gend) / CH_GRANULE;
}

/* Worth a coalescing: the free bytes could hold the request, and enough has
 * been freed since the last that a merge may find room. Each costs a scan of
 * the start bits in use and a visit to every free block, so this keeps its
 * cost within a small share of the frees'. */
static inline bool coalesce_due(const struct ch_chunk *c, size_t n) {
  size_t f = free_bytes(c), since = (uint32_t)(c->freed - c->coalesced_at);
  return f >= n && since >= AVAIL_MIN && since >= f / 2;
}

/* Merge every run of adjacent blocks in c's bins into one block, and lower
 * the bump pointer over a run that ends at it; the owner only. The bins are
 * rebuilt under a new key, so that keys left inside merged blocks and above
 * the lowered bump pointer are stale, as the free path requires. Blocks on
 * their way back from other threads are not in a bin and count as live. */
static void chunk_coalesce(struct ch_heap *h, struct ch_chunk *c) {
  if (!h->scratch && !(h->scratch = ch_os_reserve(ch_chunk_starts_bytes))) return;
  uint64_t *mark = h->scratch;
  for (uint64_t m = c->binmask | EXACT_BITS; m; m &= m - 1) {
    unsigned b = (unsigned)__builtin_ctzll(m);
    for (void *p = c->bins[b]; p; p = *(void **)p) mark[granule(p) >> 6] |= gbit(granule(p));   /* [block] each binned block's link */
    c->bins[b] = NULL;
  }
  c->binmask = 0;
  c->key = new_key();
  uintptr_t base = ch_chunk_base(c), bits = chunk_bits(c);
  size_t gend = (size_t)(c->bump - (char *)base) / CH_GRANULE;
  for (size_t w = granule(c->data) >> 6; w <= (gend - 1) >> 6; w++) {
    uint64_t f;
    while ((f = mark[w])) {
      size_t g = (w << 6) + (size_t)__builtin_ctzll(f), e = next_start(bits, g, gend);
      mark[w] &= ~gbit(g);
      while (e < gend && (mark[e >> 6] & gbit(e))) {
        mark[e >> 6] &= ~gbit(e);
        uint64_t *sw = bitwords_at(bits, e);
        store_word(sw, load_word(sw) & ~gbit(e));
        e = next_start(bits, e, gend);
      }
      char *p = (char *)base + g * CH_GRANULE;
      if (e < gend) { bin_push(c, p, (e - g) * CH_GRANULE); continue; }
      if ((uintptr_t)c->bump & ch_chunk_mask) clear_start(c, c->bump);   /* the old mark */
      if (c->bump > c->top) c->top = c->bump;
      /* p's start bit is the new bump pointer's mark. */
      __atomic_store_n(&c->bump, p, __ATOMIC_RELEASE);
      gend = g;
    }
  }
  c->coalesced_at = c->freed;
}

/* ------------------------------------------------------------- allocate */

/* A block of size bytes at p serves a request of n: the tail beyond n,
 * if worth keeping (32 bytes or more), becomes a free block of its own.
 * Returns the size the block keeps. */
static inline size_t split_tail(struct ch_chunk *c, char *p, size_t size, size_t n) {
  if (size - n < 32) return size;
  set_start(c, p + n);
  bin_push(c, p + n, size - n);
  return n;
}

/* Pop a block of at least n bytes from a non-empty bin in first..last,
 * splitting off a tail worth keeping. */
static void *bins_take(struct ch_chunk *c, size_t n, unsigned first, unsigned last, size_t *bsize) {
  for (unsigned b = next_bin(c, first, last); b <= last; b = next_bin(c, b + 1, last)) {
    size_t size = bin_block_size(b, c->bins[b]);
    if (size < n) continue;   /* only the first mixed bin and the last can hold these */
    void *p = bin_pop(c, b);
    *bsize = split_tail(c, p, size, n);
    return p;
  }
  return NULL;
}

/* n bytes at the bump pointer, aligned, phase bytes past a multiple of
 * align (a line-sized block placed into its line; 0 otherwise); the gap
 * this leaves becomes a free block of its own (so at least CH_MIN_BLOCK).
 * Only below the high-water mark unless fresh. */
static void *bump_take(struct ch_chunk *c, size_t n, size_t align, uintptr_t phase, bool fresh) {
  char *b = c->bump, *limit = fresh ? c->end : c->hwm;
  char *a = (char *)((((uintptr_t)b - phase + align - 1) & ~(uintptr_t)(align - 1)) + phase);
  if (a != b && (size_t)(a - b) < CH_MIN_BLOCK) a += align;
  if (a > limit || (size_t)(limit - a) < n) return NULL;
  if (a != b) {
    set_start(c, b);
    bin_push(c, b, (size_t)(a - b));
  }
  set_start(c, a);
  mark_bump(c, a + n);
  __atomic_store_n(&c->bump, a + n, __ATOMIC_RELEASE);
  if (CH_UNLIKELY(a + n > c->hwm)) advance_hwm(c, a + n);
  return a;
}

/* Any request the chunk can serve: its own class's bin first (and, above
 * 256 bytes, the next three classes': reusing space keeps a group's chunks
 * full), then the bump pointer, then a block of the next three classes,
 * split. The bump pointer enters pages never touched before only if
 * fresh_ok is set; a block of a larger class is split only if split_any is:
 * the general path asks for that only before it would take fresh pages.
 * Splitting any block that fits whenever the nearby bins were empty turned
 * the few large free blocks into small ones as fast as the large requests
 * freed them, and the large requests then took fresh memory at their own
 * rate: one thread replacing random blocks of 16 B to 1 KiB (prodcons relay
 * 1 120000 2048) kept 40-46% of its chunks free (docs/runtime.md). */
static void *chunk_alloc(struct ch_group_heap *gh, struct ch_chunk *c, unsigned group, size_t n,
                         size_t align, bool zero, size_t req, bool fresh_ok, bool split_any) {
  size_t bsize = n;
  unsigned b = bin_of(n);
  bool any_bins = align <= CH_MIN_ALIGN && any_bin(c);
  char *old_hwm = c->hwm;
  void *p = any_bins ? bins_take(c, n, b, n <= EXACT_MAX ? b : b + 3, &bsize) : NULL;
  bool fresh = false;
  /* A line-sized block of a group that places them on lines starts on a
   * line where it is bumped; from the bins it takes what the bins hold. */
  if (!p) {
    bool line = align < 64 && on_lines(group, n);
    fresh = (p = bump_take(c, n, line ? 64 : align, line ? line_phase(group) : 0, fresh_ok)) != NULL;
  }
  /* Above 256 bytes the first look covered the next three classes already. */
  if (!p && any_bins && (split_any || n <= EXACT_MAX))
    p = bins_take(c, n, b, split_any ? CH_NBINS - 1 : b + 3, &bsize);
  if (!p) return NULL;
  note_alloc(gh, c, bsize);
  if (zero) {
    /* Fresh memory above the old high-water mark is still zero. */
    size_t z = req;
    if (fresh) z = (char *)p >= old_hwm ? 0 : (size_t)(old_hwm - (char *)p) < req ? (size_t)(old_hwm - (char *)p) : req;
    if (z) memset(p, 0, z);
  }
  if (!fresh) ((uint64_t *)p)[1] = 0;   /* [block] no free key in a live block */
  return p;
}

static struct ch_heap *heap_create(void);

/* A request c could not serve: coalesce c, if that is due, and try again. */
static void *coalesce_alloc(struct ch_heap *h, struct ch_chunk *c, unsigned group, size_t n, size_t align,
                            bool zero, size_t req) {
  if (!coalesce_due(c, n)) return NULL;
  /* The group's recent frees go to their bins first: the merge takes c's
   * new key, which its listed blocks would lack, and can use them (left
   * out, they took allocbench sizes 8..999's merges from 27 to 33 M
   * instructions). */
  recent_flush(&h->g[group]);
  chunk_coalesce(h, c);
  void *p = chunk_alloc(&h->g[group], c, group, n, align, zero, req, false, true);
  /* A merge that found room halves the free bytes that make an avail chunk
   * worth merging; one that did not doubles them again. */
  uint8_t *shift = &h->merge_shift[group];
  if (p) { if (*shift < MERGE_SHIFT_MAX) ++*shift; }
  else if (*shift) --*shift;
  return p;
}

/* h takes the orphan c of group g; heaps_lock is held. Its lists are
 * only h's own to touch from now on. */
static void orphan_adopt(struct ch_heap *h, struct ch_chunk *c, unsigned g) {
  list_del(&orphans[g], c);
  atomic_store(&c->owner, (uintptr_t)h | g);
  list_add(&h->g[g], c);
}

/* Whether there was anything to drain. */
static bool drain_delayed(struct ch_heap *h) {
  if (!atomic_load_explicit(&h->delayed, memory_order_relaxed)) return false;
  drain_list(h, atomic_exchange_explicit(&h->delayed, NULL, memory_order_acquire));
  return true;
}

/* c becomes the group's current chunk. */
static void make_current(struct ch_group_heap *gh, struct ch_chunk *c) {
  struct ch_chunk *old = gh->current;
  if (c == gh->spill) gh->spill = NULL;
  gh->current = c;
  set_low(gh, c);
  if (old) after_free(gh, old);
}

/* A new chunk for the group, owned by h. */
static struct ch_chunk *chunk_take(struct ch_heap *h, unsigned group) {
  struct ch_chunk *c = ch_chunk_new(group);
  if (!c) return NULL;
  mark_bump(c, c->data);
  c->key = new_key();
  atomic_store(&c->owner, (uintptr_t)h | group);
  list_add(&h->g[group], c);
  return c;
}

/* Where fresh pages come from once the current chunk has none: a chunk set
 * aside with room, or a new one. */
static struct ch_chunk *chunk_with_room(struct ch_heap *h, unsigned group) {
  struct ch_group_heap *gh = &h->g[group];
  struct ch_chunk *c = gh->room;
  if (!c) return chunk_take(h, group);
  wait_del(gh, c);
  return c;
}

/* A request the current chunk, with no untouched pages left, has plenty of
 * free bytes for (at least chunk/16) but no block that fits: its free space
 * is fragments smaller than the request, as it becomes where sizes mix. The
 * request goes to the group's spill chunk (or, before the spill chunk is
 * replaced, to room that coalescing makes in either), so that the current chunk,
 * whose holes still serve smaller requests, is not given up for one request.
 * (Given up, it was soon taken back from the avail list, and the new chunk,
 * nearly empty, retired: chunk churn.) Larger requests gather in the spill
 * chunk, where their frees leave holes of their own size. */
static void *alloc_spill(struct ch_heap *h, struct ch_group_heap *gh, struct ch_chunk *cur, unsigned group,
                         size_t n, size_t align, bool zero, size_t req) {
  void *p;
  struct ch_chunk *sp = gh->spill;
  if (sp && (p = chunk_alloc(gh, sp, group, n, align, zero, req, true, true))) return p;
  /* Before a new spill chunk, the merges that may make room. */
  if ((p = coalesce_alloc(h, cur, group, n, align, zero, req))) return p;
  if (sp && (p = coalesce_alloc(h, sp, group, n, align, zero, req))) return p;
  if (!(sp = chunk_with_room(h, group))) return NULL;
  struct ch_chunk *old = gh->spill;
  gh->spill = sp;
  set_low(gh, sp);
  if (old) after_free(gh, old);
  return chunk_alloc(gh, sp, group, n, align, zero, req, true, true);
}

/* The general path's first look, for two kinds of request that the fast
 * path leaves often in a group whose sizes mix, and that need none of the
 * rest: without it, each paid every step of that path (xform with its result
 * tree's nodes, 64 bytes, and their child vectors in one group: 30% of the
 * group's allocations, and 27% more instructions for the whole program).
 *
 * bump_take's block below the high-water mark, counted; or NULL. For a
 * line-sized block of a group that places them on lines, with the bump
 * pointer off a line, the first: aligned to 64, the gap (16, 32 or 48
 * bytes) goes to its exact bin, where the group's small requests take it. */
static void *bump_counted(struct ch_group_heap *gh, struct ch_chunk *c, size_t n, size_t align, uintptr_t phase) {
  void *p = bump_take(c, n, align, phase, false);
  if (p) note_alloc(gh, c, n);
  return p;
}
/* A request of an exact bin's size that the current chunk cur can serve
 * only by splitting nothing: cur is full, its free bytes holes of other
 * sizes. The general path sends it to the spill chunk (alloc_spill) and
 * leaves cur current, for its holes; so, where that path would come to the
 * spill chunk with nothing tried on the way (cur has no block of the size
 * or larger and no fresh pages, and no other chunk waits with free blocks),
 * the spill chunk's exact bin or its bump pointer below its own mark; else
 * NULL. line: the block is to start on a line, for which the general path
 * looks at no bin of cur. */
static void *spill_take(struct ch_group_heap *gh, struct ch_chunk *cur, size_t n, bool line, uintptr_t phase) {
  struct ch_chunk *c = gh->spill;
  if (!c || gh->avail || (size_t)(cur->end - cur->bump) >= n || free_bytes(cur) < AVAIL_MIN) return NULL;
  if (!line && any_bin_in(cur, (unsigned)(n / CH_GRANULE - 1), CH_NBINS - 1)) return NULL;
  unsigned b = (unsigned)(n / CH_GRANULE - 1);
  if (!c->bins[b]) return bump_counted(gh, c, n, line ? 64 : CH_MIN_ALIGN, phase);
  void *p = bin_pop(c, b);
  ((uint64_t *)p)[1] = 0;   /* [block] no free key in a live block */
  note_alloc(gh, c, n);
  return p;
}

/* Everything the fast path does not do: the thread's first allocation,
 * alignment, zeroing, mixed bins, and a current chunk that cannot serve
 * without touching fresh pages. Holes come before fresh pages, so a group's
 * resident memory grows only when nothing freed fits: the current chunk
 * (after collecting remote frees), then a chunk with binned space and a
 * block of the request's class or the next three's, then a larger block
 * split, the current chunk's or one of those chunks', then the current
 * chunk's fresh pages; then the spill chunk, if the current one is
 * full of fragments, else the spill chunk made current (the current one is
 * nearly full: a new current chunk beside the spill chunk held a third
 * chunk's pages for ring 1 120000 256); then a chunk of the room list, and
 * finally a new chunk. (The spill chunk, when it is replaced, comes from the
 * room list too.) Never an exited thread's orphan: every orphan holds live
 * blocks (an empty one is retired), which other threads may be reading, and
 * this thread's objects would share their lines (docs/runtime.md, "Threads
 * and fork"). The first free into an orphan adopts it. */
static CH_NOINLINE void *alloc_general_slow(struct ch_heap *h, unsigned group, size_t n, size_t align,
                                            bool zero, size_t req, bool near_tried) {
  if (!h && !(h = heap_create())) return NULL;
  struct ch_group_heap *gh = &h->g[group];
  struct ch_chunk *cur = gh->current, *c;
  void *p;
  if (cur && !zero && n <= EXACT_MAX) {   /* the first look (above) */
    bool line = on_lines(group, n);
    uintptr_t phase = line && align < 64 ? line_phase(group) : 0;
    if (line && align <= 64 && (((uintptr_t)cur->bump - phase) & 63) && (p = bump_counted(gh, cur, n, 64, phase)))
      return p;
    if ((align <= CH_MIN_ALIGN || (line && align == 64)) && (p = spill_take(gh, cur, n, line, phase))) return p;
  }
  /* near_take looked at all of this already, unless a mixed bin is among the next three */
  if (cur && !(near_tried && n + 3 * CH_GRANULE <= EXACT_MAX) &&
      (p = chunk_alloc(gh, cur, group, n, align, zero, req, false, false)))
    return p;
  if (drain_delayed(h)) {   /* the frees may have made room, or reset the current chunk */
    cur = gh->current;
    if (cur && (p = chunk_alloc(gh, cur, group, n, align, zero, req, false, false))) return p;
  }
  /* A chunk with a free block of the request's class or the next three's. */
  if (align <= CH_MIN_ALIGN) {
    unsigned b = bin_of(n);
    for (c = gh->avail; c; c = c->wait_next) {
      if (!any_bin_in(c, b, b + 3 < CH_NBINS ? b + 3 : CH_NBINS - 1)) continue;
      if ((p = chunk_alloc(gh, c, group, n, align, zero, req, false, false))) {
        wait_del(gh, c);
        make_current(gh, c);
        return p;
      }
    }
  }
  /* Then, before fresh pages, a larger free block split: the current
   * chunk's, then those of chunks with binned space; a chunk MERGE_MIN
   * free in which no block fits first merges its free neighbours,
   * if that is due (coalesce_due). Each that still fails leaves the list
   * (for the room list, if it has room). Without the merge, requests near
   * 1 KiB found no block among the small holes of every chunk and took
   * fresh pages at their own rate. Merging fuller chunks too cost a
   * program of nearly full chunks (objects) 4.6% more instructions for
   * nothing (docs/runtime.md, "Merging before fresh pages"). */
  if (cur && (p = chunk_alloc(gh, cur, group, n, align, zero, req, false, true))) return p;
  while ((c = gh->avail)) {
    wait_del(gh, c);
    if ((p = chunk_alloc(gh, c, group, n, align, zero, req, false, true)) ||
        (free_bytes(c) >= MERGE_MIN >> h->merge_shift[group] &&
         (p = coalesce_alloc(h, c, group, n, align, zero, req)))) {
      make_current(gh, c);
      return p;
    }
    if (has_room(c)) wait_add(gh, c, CH_WAITS_ROOM);
  }
  if (cur && (p = chunk_alloc(gh, cur, group, n, align, zero, req, true, true))) return p;
  if (cur && free_bytes(cur) >= AVAIL_MIN) return alloc_spill(h, gh, cur, group, n, align, zero, req);
  if ((c = gh->spill) && (p = chunk_alloc(gh, c, group, n, align, zero, req, true, true))) {
    make_current(gh, c);
    return p;
  }
  if (gh->room) {   /* before any chunk new to this thread */
    c = chunk_with_room(h, group);
    if ((p = chunk_alloc(gh, c, group, n, align, zero, req, true, true))) { make_current(gh, c); return p; }
    after_free(gh, c);
  }
  if (!(c = chunk_take(h, group))) return NULL;   /* the room list was tried above */
  make_current(gh, c);
  return chunk_alloc(gh, c, group, n, align, zero, req, true, true);
}

/* What chunk_alloc(cur, fresh_ok false, split_any false) does for a plain
 * request of an exact bin's size, without the rest of the general path: the
 * exact bin, the bump pointer below the high-water mark, then a block of
 * the next three exact bins, split when the tail is worth keeping; or NULL.
 * The fast path fails this way wherever a full chunk's holes serve requests
 * of other sizes: xsltproc under `all`, whose 1 KiB buffers share the chunk,
 * sent 29% of its allocations down the whole general path, about 310
 * instructions each (docs/runtime.md, "Holes of a nearby size"). Nothing
 * the general path would do first is skipped: its first look (spill_take)
 * gives a block only when no bin of the size or larger holds one. It does
 * bump_take's and bins_take's work inline, for exact sizes only: calling
 * them instead cost that run 18 M and 20 M more instructions (885.1 M with
 * both, against 847.3 M). */
static void *near_take(struct ch_group_heap *gh, struct ch_chunk *c, size_t n) {
  unsigned b = (unsigned)(n / CH_GRANULE - 1);
  void *p = c->bins[b];
  size_t size = n;
  if (p) {
    bin_pop(c, b);
  } else if ((size_t)(c->hwm - c->bump) >= n) {
    p = c->bump;
    set_start(c, p);
    mark_bump(c, (char *)p + n);
    __atomic_store_n(&c->bump, (char *)p + n, __ATOMIC_RELEASE);
    note_alloc(gh, c, n);
    return p;   /* bumped memory holds no key */
  } else {
    unsigned last = b + 3 < NEXACT ? b + 3 : NEXACT - 1;
    for (unsigned k = b + 1; !p && k <= last; k++)
      if (c->bins[k]) { p = bin_pop(c, k); size = (k + 1) * CH_GRANULE; }
    if (!p) return NULL;
    size = split_tail(c, p, size, n);
  }
  note_alloc(gh, c, size);
  ((uint64_t *)p)[1] = 0;   /* [block] no free key in a live block */
  return p;
}
/* What chunk_alloc(cur, ...) does first for a plain request above 256
 * bytes (a class size) when the current chunk's own bin for the class holds
 * a block: that block, its tail split off when worth keeping; or NULL. Every
 * such request took the whole general path, about 400 instructions, where
 * a class's freed blocks mostly serve its next requests: one thread
 * replacing random blocks of 8 to 400 bytes in a window of 5,000 (the shape
 * of the larson benchmark) cost 347 instructions a malloc+free pair under
 * `all` against 118 for blocks of 8 to 256 (jemalloc 103). */
static void *class_take(struct ch_group_heap *gh, struct ch_chunk *c, size_t n) {
  unsigned b = bin_of(n);
  void *p = c->bins[b];
  if (!p) return NULL;
  size_t size = ((const size_t *)p)[2];   /* [block] a mixed bin's block's size */
  if (size < n) return NULL;   /* only the first mixed bin and the last hold smaller ones */
  bin_pop(c, b);
  note_alloc(gh, c, split_tail(c, p, size, n));
  ((uint64_t *)p)[1] = 0;   /* [block] no free key in a live block */
  return p;
}
/* The general path: near_take for a plain request of an exact bin's size
 * (not one placed on a line), class_take for one above, then everything
 * else. */
static CH_NOINLINE void *alloc_general(struct ch_heap *h, unsigned group, size_t n, size_t align,
                                       bool zero, size_t req) {
  struct ch_chunk *cur;
  if (h && (cur = h->g[group].current) && align <= CH_MIN_ALIGN && !zero) {
    if (n > EXACT_MAX) {
      void *p = class_take(&h->g[group], cur, n);
      if (p) return p;
    } else if (!on_lines(group, n)) {
      void *p = near_take(&h->g[group], cur, n);
      if (p) return p;
      return alloc_general_slow(h, group, n, align, zero, req, true);
    }
  }
  return alloc_general_slow(h, group, n, align, zero, req, false);
}

/* When the group allocator cannot serve (the OS refuses memory), the next
 * allocator does. */
static CH_NOINLINE void *alloc_general_or_next(struct ch_heap *h, unsigned group, size_t n, size_t size) {
  void *p = alloc_general(h, group, n, CH_MIN_ALIGN, false, size);
  return p ? p : ch_next.malloc(size);
}

/* The fast path found no heap: the thread's first allocation, or the
 * checked mode (raw: check.c's own request, redzones included). */
static CH_NOINLINE void *alloc_no_heap(unsigned group, size_t n, size_t size, bool or_next, bool raw) {
  void *p;
  if (ch_checked && !raw) p = ch_checked_alloc(group, size, CH_MIN_ALIGN, false);
  else p = alloc_general(own_heap, group, n, CH_MIN_ALIGN, false, size);
  return p || !or_next ? p : ch_next.malloc(size);
}

/* The fast path: a block of n bytes from gh's current chunk, an exact bin's
 * or else the bump pointer's when no nearby bin could serve; or NULL: the
 * general path. lines: the group may place line-sized blocks on lines (the
 * general path does that). Calls only in tail position, so it needs no
 * frame. */
static inline __attribute__((always_inline)) void *fast_take(struct ch_group_heap *gh, unsigned group, size_t n,
                                                             bool lines) {
  char *p;
  struct ch_chunk *c;
  /* The block of this size the heap freed last, wherever it lies; its
   * chunk counts it live again. */
  uintptr_t *recent = &gh->recent[(n - 1) / CH_GRANULE];
  if (CH_LIKELY(n <= EXACT_MAX) && (p = recent_block(*recent))) {
    *recent = *(uintptr_t *)p;   /* [block] its link: the list as it was before it */
    c = (struct ch_chunk *)(uintptr_t)((uint64_t *)p)[1];   /* [block] the listed mark: its chunk */
    ((uint64_t *)p)[1] = 0;      /* [block] no mark in a live block */
    goto done;
  }
  c = gh->current;
  if (CH_UNLIKELY(!c)) return NULL;
  if (CH_LIKELY(n <= EXACT_MAX)) {
    void **bin = &c->bins[(n - 1) / CH_GRANULE];
    if ((p = *bin)) {
      void *next = *(void **)p;   /* [block] the popped block's link */
      *bin = next;
      /* The next pop of this bin reads next's first word; the program will
       * write it. Fetching it now takes that miss off the next allocation's
       * path (calc's ref input: 1.047 -> 1.012 x jemalloc's time). Never
       * address 0, the link of a bin's last block: a prefetch there walks
       * the page tables for a page that is not mapped, about 20 ns, so a
       * program that frees each block before its next request of that size
       * paid it on every allocation (allocbench deep: 2.2 x glibc's time,
       * 1.02 x without it). p instead: the line is in the cache already. */
      __builtin_prefetch(next ? next : p, 1);
      ((uint64_t *)p)[1] = 0;   /* [block] no free key in a live block; bumped memory holds none */
      goto done;
    }
  } else {
    /* Above 256 bytes: the block of the class the heap freed last, as
     * above; else the head of the class's own mixed bin when it is a
     * block of exactly the class's size, which is what the general path
     * would take first and not split; any other block in a nearby mixed
     * bin is the general path's: reuse before bumping. */
    unsigned b = bin_of(n);
    if (b < CH_RECENT_LISTS && (p = recent_block(gh->recent[b]))) {
      gh->recent[b] = *(uintptr_t *)p;   /* [block] its link */
      c = (struct ch_chunk *)(uintptr_t)((uint64_t *)p)[1];   /* [block] the listed mark: its chunk */
      ((uint64_t *)p)[1] = 0;      /* [block] no mark in a live block */
      goto done;
    }
    if ((p = c->bins[b]) && ((const size_t *)p)[2] == n) {   /* [block] a mixed bin's block's size */
      /* bin_pop, which also tests whether b is a mixed bin: 1.4 instructions a pair */
      void *next = *(void **)p;   /* [block] the popped block's link */
      c->bins[b] = next;
      if (!next) c->binmask &= ~((uint64_t)1 << b);
      ((uint64_t *)p)[1] = 0;   /* [block] no free key in a live block */
      goto done;
    }
    if (c->binmask & ((uint64_t)0xF << b)) return NULL;
  }
  p = c->bump;
  if (CH_UNLIKELY((size_t)(c->hwm - p) < n)) return NULL;
  /* A block of whole lines at a line boundary spans no extra line. */
  if (lines && CH_UNLIKELY(on_lines(group, n) && (((uintptr_t)p - line_phase(group)) & 63))) return NULL;
  mark_bump(c, p + n);   /* p's own bit is the old mark */
  __atomic_store_n(&c->bump, p + n, __ATOMIC_RELEASE);
done:
  gh->allocs++;
  uint32_t live = c->live_bytes += (uint32_t)n;
  if (CH_UNLIKELY(live > c->high)) return report_rise_then(gh, c, p);
  return p;
}

/* What the fast path left of a plain request of n bytes (size asked): no
 * heap yet (or the checked mode), a line-sized block, the general path.
 * or_next: fall back to the next allocator instead of returning NULL. */
static inline __attribute__((always_inline)) void *group_malloc_rest(struct ch_heap *h, unsigned group, size_t n,
                                                                    size_t size, bool or_next, bool raw) {
  if (CH_UNLIKELY(!h)) return alloc_no_heap(group, n, size, or_next, raw);
  if (or_next) return alloc_general_or_next(h, group, n, size);
  return alloc_general(h, group, n, CH_MIN_ALIGN, false, size);
}
/* A plain request: the fast path, else the rest. */
static inline __attribute__((always_inline)) void *group_malloc_in(struct ch_heap *h, unsigned group,
                                                                  size_t size, bool or_next, bool raw) {
  size_t n = ch_block_size(size);
  if (CH_UNLIKELY(!h)) return alloc_no_heap(group, n, size, or_next, raw);
  void *p = fast_take(&h->g[group], group, n, true);
  if (CH_LIKELY(p != NULL)) return p;
  return group_malloc_rest(h, group, n, size, or_next, raw);
}
static inline __attribute__((always_inline)) void *group_malloc(unsigned group, size_t size, bool or_next,
                                                               bool raw) {
  return group_malloc_in(my_heap, group, size, or_next, raw);
}
void *ch_group_malloc(unsigned group, size_t size) { return group_malloc(group, size, false, false); }

/* A group's line of the thread's own heap, or NULL where the thread has
 * none (the checked mode's my_heap stays NULL): what the fast lane serves
 * once identify.c arms it. */
struct ch_group_heap *ch_heap_line(unsigned group) { return my_heap ? &my_heap->g[group] : NULL; }
/* The lane's fast path failed: straight to the general path (the controls'
 * groups place nothing on lines). gh is a line of the thread's own heap. */
CH_NOINLINE void *ch_group_lane_general(struct ch_group_heap *gh, size_t size) {
  struct ch_heap *h = my_heap;
  return alloc_general_or_next(h, (unsigned)(gh - h->g), ch_block_size(size), size);
}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattributes"   /* always_inline across files: see memory.h */
void *ch_group_malloc_lane(struct ch_group_heap *gh, size_t size) {
  /* The controls pack: no line placement to look at. */
  void *p = ch_group_take_lane(gh, size);
  if (CH_LIKELY(p != NULL)) return p;
  return ch_group_lane_general(gh, size);
}
void *ch_group_take_lane(struct ch_group_heap *gh, size_t size) {
  return fast_take(gh, 0, ch_block_size(size), false);
}
/* ch_group_malloc_or_next in two halves, for the patched sites' entries
 * (ch_direct_malloc, ch_direct_new), so that they end in tail calls and save
 * no register: the fast path alone (NULL: it found nothing), and the rest. */
void *ch_group_take(unsigned group, size_t size) {
  struct ch_heap *h = my_heap;
  if (CH_UNLIKELY(!h)) return NULL;
  struct ch_group_heap *gh = &h->g[group];
  /* One register for the line: GCC would otherwise work its address out
   * again from group at each use (3 instructions a grouped allocation). */
  __asm__("" : "+r"(gh));
  return fast_take(gh, group, ch_block_size(size), true);
}
#pragma GCC diagnostic pop
void *ch_group_malloc_or_next(unsigned group, size_t size) { return group_malloc(group, size, true, false); }
CH_NOINLINE void *ch_group_rest_or_next(unsigned group, size_t size) {
  return group_malloc_rest(my_heap, group, ch_block_size(size), size, true, false);
}

void *ch_group_alloc_raw(unsigned group, size_t size, size_t align, bool zero) {
  if (align <= CH_MIN_ALIGN && !zero) return group_malloc(group, size, false, true);
  /* A line-sized block of a group that places them on lines: chunk_alloc
   * bumps it onto a line, as it does malloc's, and the bins serve it. */
  return alloc_general(own_heap, group, ch_block_size(size), align < CH_MIN_ALIGN ? CH_MIN_ALIGN : align, zero, size);
}

void *ch_group_alloc(unsigned group, size_t size, size_t align, bool zero) {
  if (CH_UNLIKELY(ch_checked)) return ch_checked_alloc(group, size, align, zero);
  return ch_group_alloc_raw(group, size, align, zero);
}

/* ----------------------------------------------------------------- free */

CH_TLS const char *ch_free_api;
_Noreturn void ch_invalid_pointer(const char *what, const void *p) {
  const char *api = ch_free_api;
  if (api && !strncmp(what, "free()", 6)) ch_fatal("%s()%s %p (in a Cohort pool)", api, what + 6, p);
  ch_fatal("%s %p (in a Cohort group chunk)", what, p);
}

/* After frees took live_bytes below c->low: report, then whatever the
 * chunk's state calls for. */
static CH_NOINLINE void free_check(struct ch_group_heap *gh, struct ch_chunk *c) {
  chunk_report(gh, c);
  if (c->live_bytes < state_low(gh, c)) after_free(gh, c);
  else set_low(gh, c);
}
static CH_NOINLINE void free_check_in(struct ch_heap *h, struct ch_chunk *c) { free_check(&h->g[c->group], c); }

/* The owner's free of size bytes, its block binned: the chunk's counts, and
 * whatever its new state calls for. */
static inline __attribute__((always_inline)) void note_free(struct ch_heap *h, struct ch_chunk *c, uint32_t size) {
  uint32_t live = c->live_bytes -= size;
  c->freed += size;
  c->frees++;
  if (CH_UNLIKELY(live < c->low)) free_check_in(h, c);
}

/* The owner's free of a block whose size is known. */
static CH_NOINLINE void release_block(struct ch_heap *h, struct ch_chunk *c, void *p, size_t size) {
  bin_push(c, p, size);
  note_free(h, c, (uint32_t)size);
}

/* Push an entry onto the owner's delayed list: a block, or a batch (a
 * tagged pointer, below); either is linked through its first word. */
static void push_remote(struct ch_heap *owner, void *entry) {
  void *old = atomic_load_explicit(&owner->delayed, memory_order_relaxed);
  do *delayed_link(entry) = old;
  while (!atomic_compare_exchange_weak_explicit(&owner->delayed, &old, entry, memory_order_release,
                                                memory_order_relaxed));
}
static void free_remote(struct ch_heap *owner, void *p) { push_remote(owner, p); }

/* A thread with a heap batches its frees into another heap's chunks and
 * hands them over with one compare-and-swap: a consumer freeing a
 * producer's blocks otherwise pays one on the producer's list for each. At
 * most CH_REMOTE_BATCH blocks wait, all for one heap; the batch goes when it is
 * full, when a block for another heap comes, and when the thread exits
 * (heap_thread_exit, or batch_thread_exit for a thread without a heap, a
 * consumer that only frees, which sets that hook at its first batch). A
 * block in a batch is on its way back like any other: its freed bit is set,
 * so freeing it again is a double free.
 * The batch is an array of pointers (struct ch_batch), not a list through
 * the blocks: the owner fetches its blocks ahead of their turn instead of
 * waiting for each link, another core's last write, to arrive (`prodcons
 * ring 8 60000`, 9 interleaved runs, medians x glibc: `all` 0.657 -> 0.466,
 * random:4 1.064 -> 0.744; docs/runtime.md, "Batches as arrays"). */
static CH_TLS struct remote_batch {
  struct ch_heap *owner;
  struct ch_batch *b;       /* being filled, for owner */
  struct ch_batch *spare;   /* without a heap: batches to fill */
  bool hooked;              /* without a heap: batch_thread_exit is set */
  bool exiting;             /* past an exit hook: frees go one at a time */
} rbatch;

/* A batch comes from its sender's heap and goes back there once drained,
 * to the list other threads push onto; the heap's thread takes that list
 * whole when its own runs out, so no pop races another. Threads without a
 * heap share one such list. Batches are never freed, as heaps are not. */
static _Atomic(struct ch_batch *) heapless_batches;
static pthread_key_t batch_key;
static bool batch_key_ok;
static struct ch_batch *batch_take(struct ch_batch **spare, _Atomic(struct ch_batch *) *back) {
  struct ch_batch *b = *spare;
  if (!b) b = atomic_exchange_explicit(back, NULL, memory_order_acquire);
  if (!b) {
    enum { SLAB = 64 };
    char *m = ch_meta_alloc(SLAB * sizeof *b + 64);
    if (!m) return NULL;
    struct ch_batch *s = (struct ch_batch *)(((uintptr_t)m + 63) & ~(uintptr_t)63);
    for (unsigned i = 0; i < SLAB; i++) {
      s[i].home = back;
      s[i].link = i + 1 < SLAB ? &s[i + 1] : NULL;
    }
    atomic_fetch_add_explicit(&ch_remote_batches, SLAB, memory_order_relaxed);
    b = s;
  }
  *spare = b->link;
  b->n = 0;
  return b;
}
static void batch_put(struct ch_batch *b) {
  _Atomic(struct ch_batch *) *home = b->home;
  struct ch_batch *old = atomic_load_explicit(home, memory_order_relaxed);
  do b->link = old;
  while (!atomic_compare_exchange_weak_explicit(home, &old, b, memory_order_release, memory_order_relaxed));
}
/* A batch for this thread to fill, or NULL (frees go one at a time). */
static struct ch_batch *batch_get(void) {
  struct ch_heap *h = own_heap;
  if (h) return batch_take(&h->batches, &h->batches_back);
  if (!rbatch.hooked) {
    if (!batch_key_ok) return NULL;
    ch_in_runtime++;     /* pthread_setspecific may calloc its second-level table */
    rbatch.hooked = pthread_setspecific(batch_key, &rbatch) == 0;
    ch_in_runtime--;
    if (!rbatch.hooked) return NULL;
  }
  return batch_take(&rbatch.spare, &heapless_batches);
}

/* Also from the statistics writers, never from a signal handler: it may
 * have interrupted this thread's batch. */
void ch_heap_flush_remote(void) {
  struct remote_batch *r = &rbatch;
  struct ch_batch *b = r->b;
  if (!b) return;
  r->b = NULL;
  push_remote(r->owner, batch_entry(b));
}
static void free_remote_batched(struct ch_heap *owner, void *p) {
  struct remote_batch *r = &rbatch;
  if (r->owner != owner || !r->b) {
    ch_heap_flush_remote();
    r->owner = owner;
    if (!(r->b = batch_get())) { free_remote(owner, p); return; }
  }
  struct ch_batch *b = r->b;
  b->block[b->n] = p;
  if (++b->n == CH_REMOTE_BATCH) ch_heap_flush_remote();
}

/* Free in a chunk whose owner thread has exited (the freed bit is set). A
 * thread with a heap adopts the chunk first, so that its later frees there
 * are its own, without the lock: a thread that inherits a finished thread's
 * work frees most of its blocks (8 such lineages spent a third of their time
 * on this lock). Without a heap, the free is finished under the lock. */
static void free_orphaned(struct ch_heap *h, struct ch_chunk *c, void *p) {
  unsigned g = c->group;
  bool adopted = false;
  ch_lock(&heaps_lock);
  struct ch_heap *owner = owner_of(atomic_load(&c->owner));
  if (!owner && h) {
    orphan_adopt(h, c, g);
    owner = h;
    adopted = true;
  }
  if (owner) {
    ch_unlock(&heaps_lock);
    if (owner != h) { free_remote(owner, p); return; }   /* adopted meanwhile by another */
    /* On the list its free space calls for, so that it is found before a new
     * chunk: a lineage's successor adopting its predecessor's chunk took a
     * chunk of its own meanwhile (`prodcons relay 1 120000 256`, nine
     * interleaved runs: fragmentation 26.3% -> 20.4%, throughput alike). */
    if (adopted) after_free(&h->g[g], c);
    freed_clear(c, p);   /* before the release, which may retire the chunk */
    release_block(h, c, p, block_size(c, p));
    return;
  }
  size_t size = block_size(c, p);
  freed_clear(c, p);        /* it is in a bin now: the key says so */
  bin_push(c, p, size);
  /* Counted and reported at once: told moves with live_bytes. */
  c->live_bytes -= (uint32_t)size;
  c->told -= (uint32_t)size;
  c->freed += (uint32_t)size;
  atomic_fetch_add(&ch_gstats[g].frees, 1);
  ch_count_live(g, -(long)size);
  if (c->live_bytes == 0) {
    list_del(&orphans[g], c);
    ch_unlock(&heaps_lock);
    retire(NULL, c);
    return;
  }
  ch_unlock(&heaps_lock);
}

/* Could p be a block handed out from c: aligned, in the used range? (The
 * start bit is checked by the caller.) */
static inline bool in_used_range(const struct ch_chunk *c, const void *p) {
  return c->magic == CH_CHUNK_MAGIC && !((uintptr_t)p & (CH_MIN_ALIGN - 1)) &&
         (const char *)p >= c->data && (const char *)p < load_bump(c);
}
static inline bool block_start(const struct ch_chunk *c, const void *p) {
  if (!in_used_range(c, p)) return false;
  return load_word(starts_word(c, p)) & gbit(granule(p));
}

/* Is the block at p (a block start) free: on its way back from another
 * thread (its freed bit), or in a bin (the key in its second word)? Only a
 * program that copies freed memory into a live block could plant the key
 * there; the owner, who may read its bins, makes sure. */
static CH_NOINLINE bool in_bin(const struct ch_chunk *c, const void *p, size_t size) {
  for (void *b = c->bins[bin_for_block(size)]; b; b = *(void **)b)   /* [block] each binned block's link */
    if (b == p) return true;
  return false;
}
static bool block_free(const struct ch_chunk *c, const void *p, bool owner) {
  if (freed_bit(c, p)) return true;
  if (!holds_key(c, p) && !listed_mark(c, p)) return false;
  if (!owner) return true;
  size_t size = block_size(c, p);
  return in_bin(c, p, size) || in_recent(own_heap, c->group, size, p);
}

/* A free by a thread that does not own the chunk (or has no heap): mark the
 * block free atomically, then hand it to the owner or finish it as an orphan.
 * The key alone says a block is in a bin here: another thread's bins cannot
 * be read safely. */
static struct ch_heap *heap_resume(void);
static void heap_take_over(struct ch_heap *h, uint64_t life);
static inline __attribute__((always_inline)) void owner_free(struct ch_chunk *c, void *p, struct ch_heap *h,
                                                             uintptr_t starts_bias, uintptr_t group, bool recent);
static CH_NOINLINE void free_foreign(struct ch_chunk *c, void *p, bool raw) {
  /* A pool's blocks have no redzones (pool.c), and go back to the pool at
   * once: a batch could still hold one when the pool is destroyed. */
  bool pool = c->group == CH_POOL_GROUP;
  if (ch_checked && !raw && !pool) { ch_checked_free(p); return; }   /* every free, in the checked mode */
  /* A heap left idle by a thread that started another: that thread's own
   * free takes it back. Other threads count their frees into it, and the
   * one that makes them a batch's worth takes it over: the thread that left
   * it is likely done (a lineage's predecessor). One free, as of the
   * argument block a new thread frees, is no such sign. */
  struct ch_heap *was = owner_of(atomic_load_explicit(&c->owner, memory_order_acquire));
  uint64_t life = was ? atomic_load_explicit(&was->life, memory_order_relaxed) : 0;
  if (CH_UNLIKELY((life & 3) == HEAP_IDLE)) {
    if (was == idle_heap && heap_resume()) { owner_free(c, p, was, c->starts_bias, c->group, !raw); return; }
    if (atomic_fetch_add_explicit(&was->idle_frees, 1, memory_order_relaxed) + 1 >= CH_REMOTE_BATCH)
      heap_take_over(was, life);
  }
  if (CH_UNLIKELY(!block_start(c, p))) ch_invalid_pointer("free(): invalid pointer", p);
  if (CH_UNLIKELY(holds_key(c, p) || listed_mark(c, p) || freed_set_remote(c, p)))
    ch_invalid_pointer("free(): double free detected", p);
  /* The key sends the owner's own free of it, a double free, off its fast
   * path, to free_rest, which finds the freed bit. */
  ((uint64_t *)p)[1] = c->key;   /* [block] its free key */
  struct ch_heap *owner = owner_of(atomic_load_explicit(&c->owner, memory_order_acquire));
  if (!owner) free_orphaned(own_heap, c, p);
  else if (!pool && !rbatch.exiting) free_remote_batched(owner, p);
  else free_remote(owner, p);
}

/* A block freed already is one still in a bin or on its way back, and one
 * above the bump pointer where it went down (the chunk started over or
 * coalescing gave its free top back), since every block there had been
 * freed. Freeing it again is named a double free; every other pointer the
 * checks refuse is an invalid one. */
static bool freed_above_bump(const struct ch_chunk *c, const void *p) {
  return c->magic == CH_CHUNK_MAGIC && !((uintptr_t)p & (CH_MIN_ALIGN - 1)) && (const char *)p >= load_bump(c) &&
         (const char *)p < c->top;
}
/* Without stopping: is p the start of a block handed out and not freed? */
enum ch_block_state ch_group_block_state(const void *p) {
  struct ch_chunk *c = ch_chunk_of(p);
  if (!block_start(c, p)) return freed_above_bump(c, p) ? CH_BLOCK_FREE : CH_BLOCK_NONE;
  bool owned = own_heap && owner_of(atomic_load(&c->owner)) == own_heap;
  return block_free(c, p, owned) ? CH_BLOCK_FREE : CH_BLOCK_LIVE;
}
static CH_NOINLINE void free_invalid(const void *p) {
  ch_invalid_pointer(ch_group_block_state(p) == CH_BLOCK_FREE ? "free(): double free detected"
                                                              : "free(): invalid pointer", p);
}
/* A function of its own, so that the compiler keeps the two tests of the
 * free path apart: two tests and branches, where one merged branch took
 * seven instructions. */
static CH_NOINLINE void free_misaligned(const void *p) { ch_invalid_pointer("free(): invalid pointer", p); }

/* The owner's free of a block the fast path did not finish: its size needs
 * a scan of the start bits, it goes to a mixed bin, or it carries the key
 * (a double free, unless the program planted it). from: the 64 start bits
 * from p's granule on, which owner_free read: a later one among them ends
 * the block (up to 1,008 bytes), with no scan; the word alone left blocks
 * that end in the next word, a quarter of those above 256 bytes, to
 * block_size_scan. */
static CH_NOINLINE void free_rest(struct ch_heap *h, struct ch_chunk *c, void *p, uint64_t from) {
  if ((char *)p >= c->bump) free_invalid(p);   /* the bump pointer's mark */
  uint64_t later = from >> 1;
  size_t size = later ? (1 + (size_t)__builtin_ctzll(later)) * CH_GRANULE
                      : owner_block_size(c, granule(p), load_word(starts_word(c, p)));
  if ((holds_key(c, p) || listed_mark(c, p)) &&
      (freed_bit(c, p) || in_bin(c, p, size) || in_recent(h, c->group, size, p)))
    ch_invalid_pointer("free(): double free detected", p);
  release_block(h, c, p, size);
}

/* The owner's free of a block of an exact bin's size (b), no double free:
 * to its recent list (recent: the caller's allocations read it), unless it
 * is full, else to the chunk's bin; always true. Its answer is never
 * read, but the void version of it (free_exact, as it was before the
 * classes had lists) gave free a frame under LTO: allocbench churn 127.5
 * against 125.5 instructions a pair. */
static inline __attribute__((always_inline)) bool free_listed(struct ch_heap *h, struct ch_chunk *c, void *p,
                                                              size_t b, size_t size, uint64_t key, uintptr_t group,
                                                              bool recent) {
  uint64_t *blk = p;
  if (recent) {
    struct ch_group_heap *gh = &h->g[group];
    uintptr_t head = gh->recent[b];
    if (CH_LIKELY((head & RECENT_MAX) != RECENT_MAX)) {
      blk[0] = head;   /* [block] its link: the list before it, and its length */
      blk[1] = (uint64_t)(uintptr_t)c;   /* [block] the listed mark */
      gh->recent[b] = (uintptr_t)p | ((head & RECENT_MAX) + 1);
      note_free(h, c, (uint32_t)size);
      return true;
    }
  }
  blk[0] = (uint64_t)(uintptr_t)c->bins[b];   /* [block] its link */
  blk[1] = key;   /* [block] its free key */
  c->bins[b] = p;
  note_free(h, c, (uint32_t)size);
  return true;
}

/* The owner's free of a block with no later start within the exact bins'
 * reach: a class's block up to CH_RECENT_SIZE_MAX of the class's size goes
 * to its recent list as free_listed's do; everything else (a full list, a
 * block of another size, one larger than 1 KiB, the bump pointer's mark)
 * and any block that carries the key or the listed mark, to free_rest. Calls only in tail position, so that it needs no frame (the
 * list's push written out again: through free_listed, whose answer it had
 * to test, it took one). */
static CH_NOINLINE void free_above(struct ch_heap *h, struct ch_chunk *c, void *p, uint64_t from, uintptr_t group,
                                   bool recent) {
  uint64_t later = from >> 1;
  if (!recent) { free_rest(h, c, p, from); return; }
  size_t size = (1 + (size_t)__builtin_ctzll(later | (uint64_t)1 << 63)) * CH_GRANULE;
  /* No later start among the 63 granules from reaches (1,008 bytes): a
   * block of exactly 64 granules, the 1 KiB class's, ends where the next
   * word's bit for p's place is set (the word owner_free read); else it
   * is larger, or p is the bump pointer's mark, for free_rest to tell. */
  if (!later && !((load_word(starts_word_biased(c->starts_bias, p) + 1) >> ((uintptr_t)p / CH_GRANULE % 64)) & 1)) {
    free_rest(h, c, p, from);
    return;
  }
  size_t b = recent_of_table[size / CH_GRANULE];
  uint64_t *blk = p, word = blk[1];   /* [block] a free block's key or listed mark */
  if (b == NO_RECENT || word == c->key || word == (uint64_t)(uintptr_t)c) {
    free_rest(h, c, p, from);
    return;
  }
  struct ch_group_heap *gh = &h->g[group];
  uintptr_t head = gh->recent[b];
  if ((head & RECENT_MAX) == RECENT_MAX) {
    free_rest(h, c, p, from);
    return;
  }
  blk[0] = head;   /* [block] its link: the list before it, and its length */
  blk[1] = (uint64_t)(uintptr_t)c;   /* [block] the listed mark */
  gh->recent[b] = (uintptr_t)p | ((head & RECENT_MAX) + 1);
  note_free(h, c, (uint32_t)size);
}
/* Stops the program on misuse, as glibc does. Only a pointer at the start of
 * a block handed out passes: start bits exist only for blocks below the bump
 * pointer and for the bump pointer's own mark, which has no later start bit
 * in its word and so goes to free_rest, whose range check tells it apart.
 * That one test also keeps out pointers into the header or above the bump
 * pointer. A free block carries the chunk's key in its second word: one in
 * a bin (the free writes it anyway) and one on its way back from another
 * thread (which also has its freed bit set; free_rest looks). A bumped block
 * needs no clearing: the key changes whenever the bump pointer starts over,
 * so older keys above it are stale. Every call but the one that stops the
 * program is a tail call, so the common path needs no frame. */
static inline __attribute__((always_inline)) void group_free(struct ch_chunk *c, void *p, struct ch_heap *h,
                                                             bool raw, uintptr_t starts_bias) {
  uintptr_t owner = atomic_load_explicit(&c->owner, memory_order_acquire);
  /* Heaps are 64-aligned: the owner word XOR h is the group exactly when h
   * owns the chunk, which tests and extracts it at once (2 instructions a
   * free fewer than a mask for each). */
  uintptr_t group = owner ^ (uintptr_t)h;
  if (CH_UNLIKELY(group > CH_OWNER_GROUP)) { free_foreign(c, p, raw); return; }   /* h may be NULL */
  /* The checked mode's own frees (raw) keep out of the recent lists, which
   * its allocations, made apart from the fast path, never read. */
  owner_free(c, p, h, starts_bias, group, !raw);
}
/* The owner's free (h owns c, of group `group`); recent: as free_listed's. */
static inline __attribute__((always_inline)) void owner_free(struct ch_chunk *c, void *p, struct ch_heap *h,
                                                             uintptr_t starts_bias, uintptr_t group, bool recent) {
  const uint64_t *w = starts_word_biased(starts_bias, p);
  uint64_t starts = load_word(w);
  /* The start bits from p's granule on, 64 of them across two words (the
   * pad makes the last word's successor readable), so a block that ends in
   * the next word, a quarter of them, takes no other branch. shrd takes
   * its count modulo 64, and chunks are aligned far beyond 1 KiB, so p's
   * own bits 4-9 are g & 63. */
  uint64_t from = shift_right_pair(starts, load_word(w + 1), (unsigned)((uintptr_t)p / CH_GRANULE));
  /* Each does not return; tail calls keep this path frameless. */
  if (CH_UNLIKELY(!(from & 1))) { free_invalid(p); return; }
  if (CH_UNLIKELY((uintptr_t)p & (CH_MIN_ALIGN - 1))) { free_misaligned(p); return; }
  /* Exact bin b, or NEXACT: no later start within NEXACT granules (a larger
   * block, or the bump pointer's mark). */
  size_t b = (size_t)__builtin_ctzll((from >> 1) | (uint64_t)1 << NEXACT);
  uint64_t key = c->key;   /* read once: the block's stores below could alias it */
  uint64_t word = ((const uint64_t *)p)[1];   /* [block] a free block's key or listed mark */
  if (CH_UNLIKELY(b >= NEXACT)) {
    free_above(h, c, p, from, group, recent);
    return;
  }
  if (CH_UNLIKELY(word == key)) {
    free_rest(h, c, p, from);
    return;
  }
  /* A block that carries the listed mark is in a recent list already (a
   * double free), unless the program planted it: free_rest tells. Apart
   * from the test above: merged into it, the two tests took a register
   * more and five instructions more. */
  if (CH_UNLIKELY(word == (uint64_t)(uintptr_t)c)) {
    free_rest(h, c, p, from);
    return;
  }
  free_listed(h, c, p, b, (b + 1) * CH_GRANULE, key, group, recent);
}
uint32_t ch_group_chunk_live(const void *p) { return ch_chunk_of(p)->live_bytes; }
void ch_group_free(void *p) {
  struct ch_chunk *c = ch_chunk_of(p);
  group_free(c, p, my_heap, false, c->starts_bias);
}
void ch_group_free_in(struct ch_chunk *c, void *p, uintptr_t starts_bias) {
  group_free(c, p, my_heap, false, starts_bias);
}
void ch_group_free_raw(void *p) {
  struct ch_chunk *c = ch_chunk_of(p);
  group_free(c, p, own_heap, true, c->starts_bias);
}

/* A free of a pointer in the region but in no live chunk: its chunk was
 * retired, which it is only once every block in it has been freed, or it was
 * never carved (or is a checked-mode guard). */
CH_NOINLINE void ch_dead_chunk_free(const void *p) { ch_invalid_pointer("free(): double free or invalid pointer", p); }

/* Finish frees other threads started (freed bits are set): each block goes
 * to whoever owns its chunk now. h is the draining heap, or NULL. */
static void drain_block(struct ch_heap *h, void *b) {
  struct ch_chunk *c = ch_chunk_of(b);
  uintptr_t ow = atomic_load_explicit(&c->owner, memory_order_acquire);
  struct ch_heap *owner = owner_of(ow);
  if (owner && owner == h) {
    size_t size = block_size(c, b);
    freed_clear(c, b);   /* before the release, which may retire the chunk */
    release_block(h, c, b, size);
  }
  else if (!owner) free_orphaned(h, c, b);
  else free_remote(owner, b);
}
/* A batch's blocks are known before any is touched: each is fetched a few
 * ahead of its turn, where a list's next block is known only once the
 * previous one, another core's last write, has arrived. Newest first, as a
 * list of the same frees would be. */
#define DRAIN_AHEAD 6
static void drain_batch(struct ch_heap *h, struct ch_batch *b) {
  unsigned n = b->n;
  for (unsigned i = 0; i < n && i < DRAIN_AHEAD; i++) __builtin_prefetch(b->block[n - 1 - i], 1);
  for (unsigned i = n; i-- > 0;) {
    if (i >= DRAIN_AHEAD) __builtin_prefetch(b->block[i - DRAIN_AHEAD], 1);
    drain_block(h, b->block[i]);
  }
  batch_put(b);
}
static void drain_list(struct ch_heap *h, void *e) {
  while (e) {
    void *next = *delayed_link(e);
    if (is_batch(e)) drain_batch(h, batch_of(e));
    else drain_block(h, e);
    e = next;
  }
}

/* ------------------------------------------------- usable size, realloc */

static void check_live(const void *p, const char *what) {
  if (CH_UNLIKELY(ch_group_block_state(p) != CH_BLOCK_LIVE)) ch_invalid_pointer(what, p);
}

size_t ch_group_usable(const void *p) {
  struct ch_chunk *c = ch_chunk_of(p);
  if (CH_UNLIKELY(ch_checked) && c->group != CH_POOL_GROUP) return ch_checked_usable(p);
  check_live(p, "malloc_usable_size(): invalid pointer");
  return block_size(c, p);
}

void *ch_group_realloc(void *p, size_t size) {
  struct ch_chunk *c = ch_chunk_of(p);
  if (CH_UNLIKELY(ch_checked) && c->group != CH_POOL_GROUP) return ch_checked_realloc(p, size);
  check_live(p, "realloc(): invalid pointer");
  size_t old = block_size(c, p);
  size_t n = ch_block_size(size);
  struct ch_heap *h = own_heap;
  bool owned = h && owner_of(atomic_load(&c->owner)) == h;
  struct ch_group_heap *gh = owned ? &h->g[c->group] : NULL;
  if (n <= old) {
    /* Shrink in place; the owner hands a worthwhile tail back to the bins. */
    if (owned && old - n >= 32) {
      char *tail = (char *)p + n;
      set_start(c, tail);
      bin_push(c, tail, old - n);
      c->live_bytes -= (uint32_t)(old - n);
      c->freed += (uint32_t)(old - n);
      free_check(gh, c);
    }
    return p;
  }
  /* Grow in place when the block is the last one bumped. */
  if (owned && (char *)p + old == c->bump && (size_t)(c->end - (char *)p) >= n && n <= ch_max_size) {
    clear_start(c, (char *)p + old);   /* the old bump mark, inside the block now */
    mark_bump(c, (char *)p + n);
    __atomic_store_n(&c->bump, (char *)p + n, __ATOMIC_RELEASE);
    if ((char *)p + n > c->hwm) advance_hwm(c, (char *)p + n);
    c->live_bytes += (uint32_t)(n - old);
    if (c->live_bytes > c->high) report_rise(gh, c);
    else if (c->waits != CH_WAITS_AVAIL) set_low(gh, c);
    return p;
  }
  void *q = NULL;
  /* A pool's block that plain realloc moves leaves the pool: another
   * thread may be using the pool (pool.c). */
  if (size <= ch_max_size && c->group != CH_POOL_GROUP) q = ch_group_alloc(c->group, size, CH_MIN_ALIGN, false);
  if (!q) q = ch_next.malloc(size);
  if (!q) return NULL;
  memcpy(q, p, old < size ? old : size);
  ch_group_free(p);
  return q;
}

/* ------------------------------------------------------- heap records */

/* A heap from `parked` (an exited thread's, or a destroyed pool's), else a
 * new one, listed for the statistics, which sum every heap's counts. */
static struct ch_heap *heap_take(struct ch_heap **parked) {
  ch_lock(&heaps_lock);
  struct ch_heap *h = *parked;
  if (h) *parked = h->free_next;
  ch_unlock(&heaps_lock);
  if (!h) {
    char *m = ch_meta_alloc(sizeof *h + 48);   /* 16-aligned: room to align to 64 */
    if (!m) return NULL;
    h = (struct ch_heap *)(((uintptr_t)m + 63) & ~(uintptr_t)63);
    ch_lock(&heaps_lock);
    h->all_next = all_heaps;
    all_heaps = h;
    ch_unlock(&heaps_lock);
  }
  uint64_t epoch = atomic_fetch_add_explicit(&heap_epochs, 1, memory_order_relaxed) + 1;
  atomic_store_explicit(&h->life, epoch << 2 | HEAP_ACTIVE, memory_order_relaxed);
  return h;
}

/* h waits on `parked` for reuse (heaps are never freed). */
static void heap_park(struct ch_heap **parked, struct ch_heap *h) {
  ch_lock(&heaps_lock);
  h->free_next = *parked;
  *parked = h;
  ch_unlock(&heaps_lock);
}

/* --------------------------------------------------------------- pools */

/* A pool's heap is a thread heap's machinery without the thread: its owner
 * (pool.c's caller, one thread at a time) allocates and frees as a thread
 * does in its own chunks, other threads' frees reach it through the delayed
 * list, and destroying it retires every chunk whatever it still holds. */
atomic_ulong ch_pools_made, ch_pools_destroyed;
static struct ch_heap *free_pools;   /* destroyed pools' heaps, under heaps_lock */

struct ch_heap *ch_pool_heap_new(void) {
  struct ch_heap *h = heap_take(&free_pools);
  if (h) atomic_fetch_add_explicit(&ch_pools_made, 1, memory_order_relaxed);
  return h;
}

void ch_pool_heap_destroy(struct ch_heap *h) {
  /* Blocks other threads freed and the pool has not taken back: their freed
   * bits would tell the chunks' next owners that blocks are on their way. */
  for (void *e = atomic_exchange(&h->delayed, NULL), *next; e; e = next) {
    next = *delayed_link(e);
    if (!is_batch(e)) { freed_clear(ch_chunk_of(e), e); continue; }
    struct ch_batch *b = batch_of(e);
    for (unsigned i = 0; i < b->n; i++) freed_clear(ch_chunk_of(b->block[i]), b->block[i]);
    batch_put(b);
  }
  struct ch_group_heap *gh = &h->g[CH_POOL_GROUP];
  struct ch_chunk *c;
  /* The lists' blocks go with the chunks, their marks cleared first
   * (recent_drop says why), before another pool may take a chunk. */
  for (unsigned b = 0; b < CH_RECENT_LISTS; b++) {
    for (void *p = recent_block(gh->recent[b]); p; p = recent_block(*(uintptr_t *)p))   /* [block] its link */
      ((uint64_t *)p)[1] = 0;   /* [block] the listed mark */
    gh->recent[b] = 0;
  }
  while ((c = gh->chunks)) {
    list_del(&gh->chunks, c);
    c->waits = CH_WAITS_NOT;
    c->live_bytes = 0;     /* the statistics drop what it held */
    chunk_report(gh, c);
    ch_chunk_retire_later(c);
  }
  gh->current = gh->spill = gh->avail = gh->room = NULL;
  atomic_fetch_add_explicit(&ch_pools_destroyed, 1, memory_order_relaxed);
  heap_park(&free_pools, h);
}

/* The pool group places nothing on lines (no plan names it). */
void *ch_pool_heap_alloc(struct ch_heap *h, size_t size) { return group_malloc_in(h, CH_POOL_GROUP, size, false, true); }

void *ch_pool_heap_alloc_general(struct ch_heap *h, size_t size, size_t align, bool zero) {
  return alloc_general(h, CH_POOL_GROUP, ch_block_size(size), align < CH_MIN_ALIGN ? CH_MIN_ALIGN : align,
                       zero, size);
}

void ch_pool_heap_free(struct ch_heap *h, struct ch_chunk *c, void *p) {
  owner_free(c, p, h, c->starts_bias, CH_POOL_GROUP, true);
}

size_t ch_pool_block_size(const struct ch_chunk *c, const void *p) { return block_size(c, p); }

/* ---------------------------------------------------------- heap life */

static void heap_abandon(struct ch_heap *h) {
  for (unsigned g = 0; g < CH_MAX_GROUPS; g++) {
    struct ch_group_heap *gh = &h->g[g];
    struct ch_chunk *c;
    recent_flush(gh);   /* while the chunks are still h's */
    while ((c = gh->chunks)) {
      list_del(&gh->chunks, c);
      c->waits = CH_WAITS_NOT;
      chunk_report(gh, c);   /* an orphan holds nothing back */
      if (c->live_bytes == 0) { ch_chunk_retire(c); continue; }
      ch_lock(&heaps_lock);
      atomic_store(&c->owner, ORPHANED(g));
      c->prev = NULL;
      c->next = orphans[g];
      if (orphans[g]) orphans[g]->prev = c;
      orphans[g] = c;
      ch_unlock(&heaps_lock);
    }
    gh->current = gh->spill = NULL;
    gh->avail = gh->room = NULL;
  }
  /* Our chunks are orphans now: late frees into them take the orphan path. */
  drain_list(NULL, atomic_exchange(&h->delayed, NULL));
  heap_park(&free_heaps, h);
}

/* ---------------------------------------- a thread that starts another */

/* A thread that starts another may be done with its heap: a lineage of
 * threads, each starting its successor and exiting, hands its work on, and
 * the successor frees what its predecessor made. Until the predecessor
 * exits, those frees go to a heap that will never collect them, and
 * everything the successor makes takes fresh memory; with more threads than
 * cores the predecessor may wait a whole time slice for a core to exit on
 * (`prodcons relay 8 15000 2048`: 41-43% fragmentation, against 17-18% for
 * a copy whose successor joins its predecessor first; docs/runtime.md). So
 * a thread that has started another leaves its heap idle: its fast paths
 * lose it, and its next allocation or free of its own takes it back (one
 * compare-and-swap of the heap's life word), unless a thread freeing into
 * it took it over first, with the same compare-and-swap, and made its
 * chunks orphans as the thread's exit would have. The epoch in the life
 * word tells a heap taken back from one reused by another thread since. */
void ch_heap_thread_started(void) {
  struct ch_heap *h = own_heap;
  if (!h) return;
  idle_heap = h;
  idle_life = life_in(atomic_load_explicit(&h->life, memory_order_relaxed), HEAP_IDLE);
  own_heap = my_heap = NULL;
  ch_control_gh = NULL;
  atomic_store_explicit(&h->idle_frees, 0, memory_order_relaxed);
  /* Release: a thread that takes the heap over sees all our writes to it. */
  atomic_store_explicit(&h->life, idle_life, memory_order_release);
}

/* This thread's idle heap back, or NULL if another thread took it over. */
static struct ch_heap *heap_resume(void) {
  struct ch_heap *h = idle_heap;
  if (!h) return NULL;
  idle_heap = NULL;
  uint64_t life = idle_life;
  if (!atomic_compare_exchange_strong_explicit(&h->life, &life, life_in(idle_life, HEAP_ACTIVE),
                                               memory_order_acquire, memory_order_relaxed))
    return NULL;
  own_heap = h;
  if (!ch_checked) my_heap = h;
  return h;
}

/* A free into the chunks of h, whose life word read `life` (idle): take h
 * over and abandon it as its thread's exit would, so that the chunk is an
 * orphan that the freeing thread adopts. Whether taken or not, the caller
 * reads the chunk's owner again. */
static void heap_take_over(struct ch_heap *h, uint64_t life) {
  if (!atomic_compare_exchange_strong_explicit(&h->life, &life, life_in(life, HEAP_GONE),
                                               memory_order_acquire, memory_order_relaxed))
    return;
  atomic_fetch_add_explicit(&ch_heaps_handed_on, 1, memory_order_relaxed);
  ch_in_runtime++;
  if (rbatch.owner == h) ch_heap_flush_remote();   /* drained by the abandon */
  heap_abandon(h);
  ch_in_runtime--;
}

/* A thread's exit hooks send its batch: nothing would after them. Frees
 * the thread makes later (other keys' destructors) go one at a time, so
 * that none waits in a batch no hook is left to send. */
static void remote_batch_close(void) {
  rbatch.exiting = true;
  ch_heap_flush_remote();
}
static void batch_thread_exit(void *arg) {
  (void)arg;
  ch_in_runtime++;
  remote_batch_close();
  while (rbatch.spare) {   /* the spare batches go back to the shared list */
    struct ch_batch *b = rbatch.spare;
    rbatch.spare = b->link;
    batch_put(b);
  }
  ch_in_runtime--;
}

static void heap_thread_exit(void *arg) {
  struct ch_heap *h = arg;
  ch_in_runtime++;
  remote_batch_close();
  /* Left idle: ours to abandon only if no thread took it over. */
  if (h == idle_heap && !heap_resume()) { ch_in_runtime--; return; }
  if (h == own_heap) { own_heap = my_heap = NULL; ch_control_gh = NULL; }
  heap_abandon(h);
  ch_in_runtime--;
}

static struct ch_heap *heap_create(void) {
  if (!heap_key_ok) return NULL;
  struct ch_heap *h = heap_resume();
  if (h) return h;
  h = heap_take(&free_heaps);
  if (!h) return NULL;
  h->thread = pthread_self();
  own_heap = h;
  if (!ch_checked) my_heap = h;
  ch_in_runtime++;     /* pthread_setspecific may calloc its second-level table */
  pthread_setspecific(heap_key, h);
  ch_in_runtime--;
  return h;
}

void ch_heaps_init(void) {
  fill_bin_tables();
  /* The kernel's random bytes for this process (the C library takes the
   * first eight for its own guards), mixed with an address ASLR placed. */
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
  uint64_t k = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&heap_key;
  if (r) { uint64_t x; memcpy(&x, r + 8, sizeof x); k ^= x; }
  atomic_store(&key_counter, k);
  heap_key_ok = pthread_key_create(&heap_key, heap_thread_exit) == 0;
  batch_key_ok = pthread_key_create(&batch_key, batch_thread_exit) == 0;
}

void ch_heaps_atfork_prepare(void) { ch_lock(&heaps_lock); }
void ch_heaps_atfork_parent(void) { ch_unlock(&heaps_lock); }

/* In the child only this thread exists. The other threads' heaps may have
 * been mid-update when the fork happened, so they are left alone: frees into
 * their chunks take the remote path and are held, never corrupt anything. */
void ch_heaps_atfork_child(void) { ch_lock_init(&heaps_lock); }
