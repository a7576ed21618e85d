/* Cohort runtime: per-thread group heaps.
 *
 * Each thread has a heap with, per group, a current chunk it bump-allocates
 * from and the other chunks it owns. Freed blocks go into per-chunk bins
 * (segregated by size, linked through their first word), so space freed
 * inside a chunk is reused by the same group and a long-lived object cannot
 * pin an otherwise empty chunk. Only the owning thread touches a chunk's
 * bins and counts; another thread's free sets the block's freed bit
 * atomically and pushes the block onto the owning heap's delayed list, which
 * the owner drains. Heaps are never freed (an exited thread's heap waits for
 * reuse), so that push can never land in freed memory. Chunks of exited
 * threads become orphans, handled under a lock until a heap adopts them. */
#define _GNU_SOURCE
#include "internal.h"

#include <string.h>

static CH_TLS struct ch_heap *my_heap;
static pthread_key_t heap_key;
static bool heap_key_ok;
static ch_lock_t heaps_lock;                     /* heap lists and orphans */
static struct ch_heap *all_heaps, *free_heaps;
static struct ch_chunk *orphans[CH_MAX_GROUPS];  /* linked through next/prev */

/* A chunk not current whose bins hold at least this much is worth allocating from. */
#define AVAIL_MIN (ch_chunk_size / 16)
/* Live-byte changes a thread holds back before touching the shared counter. */
#define STATS_BATCH 16384

/* ----------------------------------------------------------- statistics */

/* h is the heap doing the work, or NULL under the orphan lock. */
static inline void note_live(struct ch_heap *h, unsigned g, long delta) {
  if (!h) { ch_stats_live(g, delta); return; }
  long p = h->st[g].pending_live += delta;
  if (p >= STATS_BATCH || p <= -STATS_BATCH) {
    h->st[g].pending_live = 0;
    ch_stats_live(g, p);
  }
}
static inline void note_alloc(struct ch_heap *h, unsigned g, size_t bytes) {
  h->st[g].allocs++;
  note_live(h, g, (long)bytes);
}
static inline void note_free(struct ch_heap *h, unsigned g, size_t bytes) {
  if (h) h->st[g].frees++;
  else atomic_fetch_add(&ch_gstats[g].frees, 1);
  note_live(h, g, -(long)bytes);
}

static void drain_list(struct ch_heap *h, void *b);

/* Frees that reached the heaps of exited threads after they left: finish
 * them (no thread owns those heaps, so this thread may drain them). */
void ch_heaps_drain_exited(void) {
  ch_lock(&heaps_lock);
  void *late = NULL;
  for (struct ch_heap *h = free_heaps; h; h = h->free_next) {
    void *b = atomic_exchange(&h->delayed, NULL);
    while (b) { void *n = *(void **)b; *(void **)b = late; late = b; b = n; }
  }
  ch_unlock(&heaps_lock);
  drain_list(NULL, late);
}

void ch_heaps_sum(unsigned g, uint64_t *allocs, uint64_t *frees, long *pending_live) {
  ch_lock(&heaps_lock);
  for (struct ch_heap *h = all_heaps; h; h = h->all_next) {
    *allocs += h->st[g].allocs;
    *frees += h->st[g].frees;
    *pending_live += h->st[g].pending_live;
  }
  ch_unlock(&heaps_lock);
}

/* ------------------------------------------------------------- bitmaps */

static inline size_t granule(const struct ch_chunk *c, const void *p) {
  return (size_t)((const char *)p - (const char *)c) / CH_GRANULE;
}
static inline bool start_bit(const struct ch_chunk *c, size_t g) {
  return (__atomic_load_n(&c->starts[g >> 6], __ATOMIC_RELAXED) >> (g & 63)) & 1;
}
static inline void set_start(struct ch_chunk *c, size_t g) {   /* owner only */
  uint64_t w = __atomic_load_n(&c->starts[g >> 6], __ATOMIC_RELAXED);
  __atomic_store_n(&c->starts[g >> 6], w | ((uint64_t)1 << (g & 63)), __ATOMIC_RELAXED);
}
/* Freed bits. Another thread's free sets its bit atomically; the owner uses
 * plain loads and stores, which are cheaper but may lose a concurrent remote
 * update of another bit in the same word. Draining the delayed list sets each
 * remotely freed block's bit again, so only a double free racing with its own
 * drain can slip past detection. */
static inline bool freed_set_remote(struct ch_chunk *c, size_t g) {   /* returns the old bit */
  uint64_t bit = (uint64_t)1 << (g & 63);
  return atomic_fetch_or_explicit(&c->freed[g >> 6], bit, memory_order_relaxed) & bit;
}
static inline bool freed_set(struct ch_chunk *c, size_t g) {          /* owner; the old bit */
  uint64_t bit = (uint64_t)1 << (g & 63);
  uint64_t w = atomic_load_explicit(&c->freed[g >> 6], memory_order_relaxed);
  atomic_store_explicit(&c->freed[g >> 6], w | bit, memory_order_relaxed);
  return w & bit;
}
static inline void freed_clear(struct ch_chunk *c, size_t g) {        /* owner */
  uint64_t w = atomic_load_explicit(&c->freed[g >> 6], memory_order_relaxed);
  atomic_store_explicit(&c->freed[g >> 6], w & ~((uint64_t)1 << (g & 63)), memory_order_relaxed);
}
static inline char *load_bump(const struct ch_chunk *c) {
  return __atomic_load_n(&c->bump, __ATOMIC_ACQUIRE);
}

/* Size of the block at p: up to the next block start or the bump pointer. */
static size_t block_size(const struct ch_chunk *c, const char *p) {
  const char *bump = load_bump(c);
  size_t g0 = granule(c, p), g = g0 + 1, gend = granule(c, bump);
  while (g < gend) {
    uint64_t bits = __atomic_load_n(&c->starts[g >> 6], __ATOMIC_RELAXED) >> (g & 63);
    if (bits) {
      size_t j = g + (size_t)__builtin_ctzll(bits);
      if (j >= gend) break;
      return (j - g0) * CH_GRANULE;
    }
    g = ((g >> 6) + 1) << 6;
  }
  return (size_t)(bump - p);
}

/* --------------------------------------------------------------- bins */

/* Exact bins for 8..128 bytes, then four bins per power of two. A block in
 * bin b has a size in (lower(b), upper(b)]; the last bin is open-ended. */
static inline unsigned bin_of(size_t n) {
  if (n <= 128) return (unsigned)(n / 8 - 1);
  size_t m = n - 1;
  unsigned l = 63u - (unsigned)__builtin_clzll(m);
  unsigned b = 16 + 4 * (l - 7) + (unsigned)((m >> (l - 2)) & 3);
  return b < CH_NBINS ? b : CH_NBINS - 1;
}

/* A free block holds the next block of its bin in its first word and, above
 * 128 bytes (where bins hold mixed sizes), its own size in the second. */
static inline void bin_push(struct ch_chunk *c, void *p, size_t size) {
  unsigned b = bin_of(size);
  if (b >= 16) ((size_t *)p)[1] = size;
  *(void **)p = c->bins[b];
  c->bins[b] = p;
  c->bin_bytes += size;
}

/* ------------------------------------------------------- chunk lists */

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
static void avail_add(struct ch_group_heap *gh, struct ch_chunk *c) {
  c->in_avail = 1;
  c->avail_prev = NULL;
  c->avail_next = gh->avail;
  if (gh->avail) gh->avail->avail_prev = c;
  gh->avail = c;
}
static void avail_del(struct ch_group_heap *gh, struct ch_chunk *c) {
  if (!c->in_avail) return;
  if (c->avail_prev) c->avail_prev->avail_next = c->avail_next; else gh->avail = c->avail_next;
  if (c->avail_next) c->avail_next->avail_prev = c->avail_prev;
  c->avail_next = c->avail_prev = NULL;
  c->in_avail = 0;
}

/* ----------------------------------------------------------- accounting */

static void advance_hwm(struct ch_chunk *c, char *to) {
  if (to <= c->hwm) return;
  size_t before = ch_chunk_resident(c);
  c->hwm = to;
  size_t after = ch_chunk_resident(c);
  if (after != before) ch_stats_resident(c->group, (long)(after - before));
}

/* Everything in the chunk is free again: start over from its beginning. */
static void chunk_reset(struct ch_chunk *c) {
  size_t g0 = granule(c, c->data), g1 = granule(c, c->bump);
  for (size_t w = g0 >> 6; w <= (g1 >> 6) && w < ch_chunk_size / CH_GRANULE / 64; w++) {
    __atomic_store_n(&c->starts[w], 0, __ATOMIC_RELAXED);
    atomic_store_explicit(&c->freed[w], 0, memory_order_relaxed);
  }
  memset(c->bins, 0, sizeof c->bins);
  c->bin_bytes = 0;
  c->live_bytes = 0;
  __atomic_store_n(&c->bump, c->data, __ATOMIC_RELEASE);
}

/* After frees: retire an empty chunk, reset an empty current one, or offer
 * a chunk with enough binned space for allocation. */
static void after_free(struct ch_group_heap *gh, struct ch_chunk *c) {
  if (c->live_count == 0) {
    if (c == gh->current) { chunk_reset(c); return; }
    avail_del(gh, c);
    list_del(&gh->chunks, c);
    ch_chunk_retire(c);
    return;
  }
  if (c != gh->current && !c->in_avail && c->bin_bytes >= AVAIL_MIN) avail_add(gh, c);
}

/* ------------------------------------------------------------- allocate */

/* Pop a block of at least n bytes from bins first..last, splitting off a
 * tail worth keeping. */
static void *bins_take(struct ch_chunk *c, size_t n, unsigned first, unsigned last, size_t *bsize) {
  for (unsigned b = first; b <= last && b < CH_NBINS; b++) {
    void *p = c->bins[b];
    if (!p) continue;
    size_t size = b < 16 ? (b + 1) * CH_GRANULE : ((size_t *)p)[1];
    if (size < n) continue;   /* only the bin of n itself and the last bin can hold these */
    c->bins[b] = *(void **)p;
    c->bin_bytes -= size;
    if (size - n >= 32) {
      char *tail = (char *)p + n;
      set_start(c, granule(c, tail));
      freed_set(c, granule(c, tail));
      bin_push(c, tail, size - n);
      size = n;
    }
    *bsize = size;
    return p;
  }
  return NULL;
}

static void *chunk_alloc(struct ch_heap *h, struct ch_chunk *c, size_t n, size_t align, bool zero,
                         size_t req) {
  bool reused = true;
  void *p = NULL;
  size_t bsize = n;
  unsigned b = bin_of(n);
  if (align <= CH_MIN_ALIGN && c->bin_bytes) {
    if (n <= 128) {
      if ((p = c->bins[b])) { c->bins[b] = *(void **)p; c->bin_bytes -= n; }
    } else {
      p = bins_take(c, n, b, b + 3, &bsize);
    }
  }
  if (!p) {
    uintptr_t a = ((uintptr_t)c->bump + align - 1) & ~(uintptr_t)(align - 1);
    if (a + n <= (uintptr_t)c->end) {
      reused = false;
      p = (void *)a;
      set_start(c, granule(c, p));
      __atomic_store_n(&c->bump, (char *)a + n, __ATOMIC_RELEASE);
      char *old_hwm = c->hwm;
      advance_hwm(c, (char *)a + n);
      if (zero) {
        if ((char *)p < old_hwm) memset(p, 0, (size_t)(old_hwm - (char *)p) < req ? (size_t)(old_hwm - (char *)p) : req);
        zero = false;
      }
    } else if (align <= CH_MIN_ALIGN && c->bin_bytes) {
      p = bins_take(c, n, b, CH_NBINS - 1, &bsize);   /* bump exhausted: any fit */
    }
    if (!p) return NULL;
  }
  if (reused) freed_clear(c, granule(c, p));
  c->live_count++;
  c->live_bytes += bsize;
  note_alloc(h, c->group, bsize);
  if (zero) memset(p, 0, req);
  return p;
}

static struct ch_heap *heap_create(void);

static inline struct ch_heap *heap_get(void) {
  struct ch_heap *h = my_heap;
  return CH_LIKELY(h) ? h : heap_create();
}

static struct ch_chunk *adopt_orphan(struct ch_heap *h, unsigned group) {
  if (!orphans[group]) return NULL;
  ch_lock(&heaps_lock);
  struct ch_chunk *c = orphans[group];
  if (c) {
    list_del(&orphans[group], c);
    atomic_store(&c->owner, h);
  }
  ch_unlock(&heaps_lock);
  return c;
}

static void drain_delayed(struct ch_heap *h) {
  if (atomic_load_explicit(&h->delayed, memory_order_relaxed))
    drain_list(h, atomic_exchange_explicit(&h->delayed, NULL, memory_order_acquire));
}

/* The current chunk could not serve the request: collect remote frees, then
 * try a chunk with binned space, an orphan, and finally a new chunk. */
static CH_NOINLINE void *alloc_slow(struct ch_heap *h, unsigned group, size_t n, size_t align,
                                    bool zero, size_t req) {
  struct ch_group_heap *gh = &h->g[group];
  drain_delayed(h);
  struct ch_chunk *c = gh->current;
  if (c) {
    void *p = chunk_alloc(h, c, n, align, zero, req);
    if (p) return p;
  }
  /* Try chunks with binned space; each that fails leaves the list. */
  while ((c = gh->avail)) {
    avail_del(gh, c);
    void *p = chunk_alloc(h, c, n, align, zero, req);
    if (p) {
      struct ch_chunk *old = gh->current;
      gh->current = c;
      if (old) after_free(gh, old);
      return p;
    }
  }
  c = adopt_orphan(h, group);
  if (c) {
    list_add(gh, c);
    void *p = chunk_alloc(h, c, n, align, zero, req);
    if (p) {
      struct ch_chunk *old = gh->current;
      gh->current = c;
      if (old) after_free(gh, old);
      return p;
    }
    after_free(gh, c);
  }
  c = ch_chunk_new(group);
  if (!c) return NULL;
  atomic_store(&c->owner, h);
  list_add(gh, c);
  struct ch_chunk *old = gh->current;
  gh->current = c;
  if (old) after_free(gh, old);
  return chunk_alloc(h, c, n, align, zero, req);
}

void *ch_group_alloc(unsigned group, size_t size, size_t align, bool zero) {
  struct ch_heap *h = heap_get();
  if (CH_UNLIKELY(!h)) return NULL;
  size_t n = size ? (size + CH_GRANULE - 1) & ~(size_t)(CH_GRANULE - 1) : CH_GRANULE;
  if (align < CH_MIN_ALIGN) align = CH_MIN_ALIGN;
  struct ch_chunk *c = h->g[group].current;
  if (CH_LIKELY(c)) {
    void *p = chunk_alloc(h, c, n, align, zero, size);
    if (CH_LIKELY(p)) return p;
  }
  return alloc_slow(h, group, n, align, zero, size);
}

/* ----------------------------------------------------------------- free */

_Noreturn void ch_invalid_pointer(const char *what, const void *p) {
  ch_fatal("%s %p (in a Cohort group chunk)", what, p);
}

static void free_owned(struct ch_heap *h, struct ch_chunk *c, void *p) {
  size_t size = block_size(c, p);
  bin_push(c, p, size);
  c->live_count--;
  c->live_bytes -= size;
  note_free(h, c->group, size);
  after_free(&h->g[c->group], c);
}

static void free_remote(struct ch_heap *owner, void *p) {
  void *old = atomic_load_explicit(&owner->delayed, memory_order_relaxed);
  do *(void **)p = old;
  while (!atomic_compare_exchange_weak_explicit(&owner->delayed, &old, p, memory_order_release,
                                                memory_order_relaxed));
}

/* Free in a chunk whose owner thread has exited. */
static void free_orphaned(struct ch_chunk *c, void *p) {
  ch_lock(&heaps_lock);
  struct ch_heap *owner = atomic_load(&c->owner);
  if (owner != NULL) {   /* adopted meanwhile: the free is remote now */
    ch_unlock(&heaps_lock);
    free_remote(owner, p);
    return;
  }
  size_t size = block_size(c, p);
  bin_push(c, p, size);
  c->live_count--;
  c->live_bytes -= size;
  note_free(NULL, c->group, size);
  if (c->live_count == 0) {
    list_del(&orphans[c->group], c);
    ch_unlock(&heaps_lock);
    ch_chunk_retire(c);
    return;
  }
  ch_unlock(&heaps_lock);
}

/* Could p be a block handed out from c: aligned, in the used range, at a
 * block start? */
static inline bool block_start(const struct ch_chunk *c, const void *p) {
  return c->magic == CH_CHUNK_MAGIC && !((uintptr_t)p & (CH_MIN_ALIGN - 1)) &&
         (const char *)p >= c->data && (const char *)p < load_bump(c) && start_bit(c, granule(c, p));
}

/* Checks that p is the start of a live block, marks it free. Stops the
 * program on misuse, as glibc does. */
static void check_and_unmark(struct ch_chunk *c, void *p, bool owner) {
  if (CH_UNLIKELY(!block_start(c, p))) ch_invalid_pointer("free(): invalid pointer", p);
  size_t g = granule(c, p);
  if (CH_UNLIKELY(owner ? freed_set(c, g) : freed_set_remote(c, g)))
    ch_invalid_pointer("free(): double free detected", p);
}

void ch_group_free(void *p) {
  struct ch_chunk *c = ch_chunk_of(p);
  struct ch_heap *owner = atomic_load_explicit(&c->owner, memory_order_acquire);
  struct ch_heap *h = my_heap;
  check_and_unmark(c, p, owner == h && h);
  if (CH_LIKELY(owner == h && h)) free_owned(h, c, p);
  else if (!owner) free_orphaned(c, p);
  else free_remote(owner, p);
}

/* Finish frees other threads started (freed bits are already set): each
 * block goes to whoever owns its chunk now. h is the draining heap, or NULL. */
static void drain_list(struct ch_heap *h, void *b) {
  while (b) {
    void *next = *(void **)b;
    struct ch_chunk *c = ch_chunk_of(b);
    struct ch_heap *owner = atomic_load_explicit(&c->owner, memory_order_acquire);
    if (owner && owner == h) {
      freed_set(c, granule(c, b));   /* restore a bit an owner store may have lost */
      free_owned(h, c, b);
    }
    else if (!owner) free_orphaned(c, b);
    else free_remote(owner, b);
    b = next;
  }
}

/* ------------------------------------------------- usable size, realloc */

static void check_live(struct ch_chunk *c, const void *p, const char *what) {
  if (CH_UNLIKELY(!block_start(c, p))) ch_invalid_pointer(what, p);
  size_t g = granule(c, p);
  if (CH_UNLIKELY(atomic_load_explicit(&c->freed[g >> 6], memory_order_relaxed) & ((uint64_t)1 << (g & 63))))
    ch_invalid_pointer(what, p);
}

size_t ch_group_usable(const void *p) {
  struct ch_chunk *c = ch_chunk_of(p);
  check_live(c, p, "malloc_usable_size(): invalid pointer");
  return block_size(c, p);
}

void *ch_group_realloc(void *p, size_t size) {
  struct ch_chunk *c = ch_chunk_of(p);
  check_live(c, p, "realloc(): invalid pointer");
  size_t old = block_size(c, p);
  size_t n = (size + CH_GRANULE - 1) & ~(size_t)(CH_GRANULE - 1);
  struct ch_heap *h = my_heap;
  bool owned = h && atomic_load(&c->owner) == h;
  if (n <= old) {
    /* Shrink in place; the owner hands a worthwhile tail back to the bins. */
    if (owned && old - n >= 32) {
      char *tail = (char *)p + n;
      set_start(c, granule(c, tail));
      freed_set(c, granule(c, tail));
      bin_push(c, tail, old - n);
      c->live_bytes -= old - n;
      note_live(h, c->group, -(long)(old - n));
    }
    return p;
  }
  /* Grow in place when the block is the last one bumped. */
  if (owned && (char *)p + old == c->bump && (char *)p + n <= c->end && n <= ch_max_size) {
    __atomic_store_n(&c->bump, (char *)p + n, __ATOMIC_RELEASE);
    advance_hwm(c, (char *)p + n);
    c->live_bytes += n - old;
    note_live(h, c->group, (long)(n - old));
    return p;
  }
  void *q = NULL;
  if (size <= ch_max_size) q = ch_group_alloc(c->group, size, CH_MIN_ALIGN, false);
  if (!q) q = ch_next.malloc(size);
  if (!q) return NULL;
  memcpy(q, p, old < size ? old : size);
  ch_group_free(p);
  return q;
}

/* ---------------------------------------------------------- heap life */

static void heap_abandon(struct ch_heap *h) {
  for (unsigned g = 0; g < CH_MAX_GROUPS; g++) {
    if (h->st[g].pending_live) ch_stats_live(g, h->st[g].pending_live);
    h->st[g].pending_live = 0;
  }
  for (unsigned g = 0; g < CH_MAX_GROUPS; g++) {
    struct ch_group_heap *gh = &h->g[g];
    struct ch_chunk *c;
    while ((c = gh->chunks)) {
      list_del(&gh->chunks, c);
      c->in_avail = 0;
      if (c->live_count == 0) { ch_chunk_retire(c); continue; }
      ch_lock(&heaps_lock);
      atomic_store(&c->owner, NULL);
      c->prev = NULL;
      c->next = orphans[g];
      if (orphans[g]) orphans[g]->prev = c;
      orphans[g] = c;
      ch_unlock(&heaps_lock);
    }
    gh->current = NULL;
    gh->avail = NULL;
  }
  /* Our chunks are orphans now: late frees into them take the orphan path. */
  drain_list(NULL, atomic_exchange(&h->delayed, NULL));
  ch_lock(&heaps_lock);
  h->free_next = free_heaps;
  free_heaps = h;
  ch_unlock(&heaps_lock);
}

static void heap_thread_exit(void *arg) {
  struct ch_heap *h = arg;
  ch_in_runtime++;
  if (h == my_heap) my_heap = NULL;
  heap_abandon(h);
  ch_in_runtime--;
}

static struct ch_heap *heap_create(void) {
  if (!heap_key_ok) return NULL;
  ch_lock(&heaps_lock);
  struct ch_heap *h = free_heaps;
  if (h) free_heaps = h->free_next;
  ch_unlock(&heaps_lock);
  if (!h) {
    h = ch_meta_alloc(sizeof *h);
    if (!h) return NULL;
    ch_lock(&heaps_lock);
    h->all_next = all_heaps;
    all_heaps = h;
    ch_unlock(&heaps_lock);
  }
  h->thread = pthread_self();
  my_heap = h;
  ch_in_runtime++;     /* pthread_setspecific may calloc its second-level table */
  pthread_setspecific(heap_key, h);
  ch_in_runtime--;
  return h;
}

void ch_heaps_init(void) {
  heap_key_ok = pthread_key_create(&heap_key, heap_thread_exit) == 0;
}

void ch_heaps_atfork_prepare(void) { ch_lock(&heaps_lock); }
void ch_heaps_atfork_parent(void) { ch_unlock(&heaps_lock); }

/* In the child only this thread exists. The other threads' heaps may have
 * been mid-update when the fork happened, so they are left alone: frees into
 * their chunks take the remote path and are held, never corrupt anything. */
void ch_heaps_atfork_child(void) { ch_lock_init(&heaps_lock); }
