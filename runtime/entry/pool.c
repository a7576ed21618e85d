/* Cohort runtime: the explicit pool API (include/cohort/pool.h).
 *
 * A pool is a heap of heap.c with no thread: the chunks it owns are all
 * of CH_POOL_GROUP, no other pool or thread allocates in them, and
 * destroying it retires them whatever they hold. The descriptor lives in
 * the program's memory and names the heap and the pool's generation: the
 * heap keeps the generation of the pool it serves, and forgets it when the
 * pool is destroyed, so that a destroyed descriptor, or a copy of it, is
 * told apart from a live one. Heaps are never freed, so reading one through
 * a stale descriptor is safe. */
#define _GNU_SOURCE
#include "entry.h"
#include "cohort/pool.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* The descriptor word: a mark, then the pool's generation. A destroyed
 * descriptor keeps its generation under another mark; an unusable one (no
 * region) has a mark of its own and no heap, so a live mark always comes
 * with a heap. */
#define LIVE_MARK 0x436f506cull      /* "CoPl" */
#define DEAD_MARK 0x436f4478ull      /* "CoDx" */
#define MALLOC_MARK 0x436f4d61ull    /* "CoMa": no region, the pool is malloc's */
#define WORD(mark, gen) ((unsigned long long)(mark) << 32 | (gen))

static _Atomic uint32_t generations;
static size_t pool_limit;            /* the largest request a pool chunk holds */

/* The largest request whose block (ch_block_size) fits in ch_pool_max. */
static size_t largest_request(size_t max) {
  size_t lo = 0, hi = max;   /* ch_block_size(lo) <= max, or lo 0 */
  while (lo < hi) {
    size_t mid = lo + (hi - lo + 1) / 2;
    if (ch_block_size(mid) <= max) lo = mid; else hi = mid - 1;
  }
  return lo;
}

/* Pools work in every mode, off included: the region and the heaps' keys
 * are made on the first poolinit if the mode did not make them. */
static bool pools_ready(void) {
  if (CH_LIKELY(pool_limit)) return true;
  ch_ensure_init();
  static ch_lock_t lock;
  static bool tried;
  ch_lock(&lock);
  if (!tried) {
    tried = true;
    ch_in_runtime++;
    if (ch_opt.mode == CH_MODE_OFF && !ch_region.size) {
      ch_heaps_init();   /* before the region is published (init.c) */
      ch_chunks_init();
    }
    if (ch_pool_max) __atomic_store_n(&pool_limit, largest_request(ch_pool_max), __ATOMIC_RELEASE);
    else ch_warn("pools are not available (no region for group chunks): poolalloc is malloc, "
                 "and pooldestroy releases nothing");
    ch_in_runtime--;
  }
  ch_unlock(&lock);
  return pool_limit != 0;
}

/* ------------------------------------------------------ the descriptor */

static _Noreturn CH_NOINLINE void bad_descriptor(const pooldesc *pd, const char *api) {
  if ((pd->cohort_word >> 32) == DEAD_MARK || (pd->cohort_word >> 32) == LIVE_MARK)
    ch_fatal("%s: pool %p was destroyed", api, (const void *)pd);
  ch_fatal("%s: %p is not a pool (poolinit or poolcreate makes one)", api, (const void *)pd);
}

/* The heap of pd's pool; NULL: an unusable pool, which is malloc's. Stops
 * the program on a descriptor that is no live pool. */
static CH_NOINLINE struct ch_heap *heap_slow(const pooldesc *pd, const char *api) {
  if (pd->cohort_word == WORD(MALLOC_MARK, 0) && !pd->cohort_heap) return NULL;
  bad_descriptor(pd, api);
}
static inline struct ch_heap *heap_of(const pooldesc *pd, const char *api) {
  unsigned long long w = pd->cohort_word;
  struct ch_heap *h = pd->cohort_heap;
  /* The mark first: h is read only through a descriptor that had one. */
  if (CH_LIKELY((w >> 32) == LIVE_MARK && h->g[CH_POOL_GROUP].pool_word == w)) return h;
  return heap_slow(pd, api);
}

CH_EXPORT int poolinit(pooldesc *pd, size_t elemsize) {
  if (!pd) return 0;
  struct ch_heap *h = pools_ready() ? ch_pool_heap_new() : NULL;
  pd->cohort_elemsize = elemsize;
  if (!h) {
    pd->cohort_heap = NULL;
    pd->cohort_word = WORD(MALLOC_MARK, 0);
    if (pool_limit) ch_warn("no memory for a pool's heap: this pool is malloc's");
    return -1;
  }
  uint32_t gen;
  do gen = atomic_fetch_add_explicit(&generations, 1, memory_order_relaxed) + 1;
  while (!gen);
  h->g[CH_POOL_GROUP].pool_word = WORD(LIVE_MARK, gen);   /* on the line every call reads */
  pd->cohort_heap = h;
  pd->cohort_word = h->g[CH_POOL_GROUP].pool_word;
  return 0;
}

CH_EXPORT int poolcreate(pooldesc *pd) { return poolinit(pd, 0); }

CH_EXPORT void pooldestroy(pooldesc *pd) {
  if (!pd) return;
  struct ch_heap *h = heap_of(pd, "pooldestroy()");
  unsigned long long gen = pd->cohort_word & 0xffffffffull;
  pd->cohort_word = WORD(DEAD_MARK, gen);
  if (!h) return;
  h->g[CH_POOL_GROUP].pool_word = 0;   /* before the heap can serve another pool */
  ch_pool_heap_destroy(h);
}

/* ------------------------------------------------------------ objects */

CH_EXPORT void *poolalloc(pooldesc *pd, size_t size) {
  if (!pd) return malloc(size);
  struct ch_heap *h = heap_of(pd, "poolalloc()");
  if (CH_UNLIKELY(!h)) return malloc(size);
  void *p = CH_LIKELY(size <= pool_limit) ? ch_pool_heap_alloc(h, size) : NULL;
  if (CH_UNLIKELY(!p)) errno = ENOMEM;
  return p;
}

/* p is not an object pd's pool may free: say whose it is. */
static _Noreturn CH_NOINLINE void not_ours(const pooldesc *pd, const struct ch_chunk *c, const void *p,
                                           const char *api) {
  if (!c && ch_in_region(p)) ch_fatal("%s: double free or invalid pointer %p (in a Cohort pool)", api, p);
  if (c && c->group == CH_POOL_GROUP)
    ch_fatal("%s: %p is an object of another pool, not of pool %p", api, p, (const void *)pd);
  ch_fatal("%s: %p is not an object of pool %p (it is not in any pool)", api, p, (const void *)pd);
}

/* p's chunk, which h owns; stops the program if it is not. */
static inline struct ch_chunk *own_chunk(const pooldesc *pd, struct ch_heap *h, const void *p, const char *api) {
  struct ch_chunk *c = ch_chunk_lookup(p);
  if (CH_UNLIKELY(!c || ch_owner_heap(atomic_load_explicit(&c->owner, memory_order_relaxed)) != h))
    not_ours(pd, c, p, api);
  return c;
}

CH_EXPORT void poolfree(pooldesc *pd, void *p) {
  if (!pd) { free(p); return; }
  struct ch_heap *h = heap_of(pd, "poolfree()");
  if (CH_UNLIKELY(!h)) { free(p); return; }
  if (!p) return;
  struct ch_chunk *c = own_chunk(pd, h, p, "poolfree()");
  ch_free_api = "poolfree";   /* the free path's complaints name poolfree */
  ch_pool_heap_free(h, c, p);
  ch_free_api = NULL;
}

/* The size of pool h's live object p; stops the program if p is none. */
static size_t live_size(const pooldesc *pd, struct ch_heap *h, const void *p, const char *api) {
  struct ch_chunk *c = own_chunk(pd, h, p, api);
  enum ch_block_state st = ch_group_block_state(p);
  if (st != CH_BLOCK_LIVE)
    ch_fatal("%s: %s %p (in a Cohort pool)", api, st == CH_BLOCK_FREE ? "freed object" : "invalid pointer", p);
  return ch_pool_block_size(c, p);
}

CH_EXPORT size_t poolobjsize(pooldesc *pd, const void *p) {
  if (!pd) return malloc_usable_size((void *)p);
  struct ch_heap *h = heap_of(pd, "poolobjsize()");
  if (!h) return malloc_usable_size((void *)p);
  return p ? live_size(pd, h, p, "poolobjsize()") : 0;
}

CH_EXPORT void *poolrealloc(pooldesc *pd, void *p, size_t size) {
  if (!pd) return realloc(p, size);
  struct ch_heap *h = heap_of(pd, "poolrealloc()");
  if (!h) return realloc(p, size);
  if (!p) return poolalloc(pd, size);
  size_t old = live_size(pd, h, p, "poolrealloc()");
  if (size == 0) { poolfree(pd, p); return NULL; }
  if (size <= old) return p;   /* the block holds it: no pool keeps a tail worth splitting */
  void *q = poolalloc(pd, size);
  if (!q) return NULL;         /* p is left as it was, as realloc leaves it */
  memcpy(q, p, old);
  poolfree(pd, p);
  return q;
}

CH_EXPORT void *poolcalloc(pooldesc *pd, size_t n, size_t size) {
  if (!pd) return calloc(n, size);
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) { errno = ENOMEM; return NULL; }
  struct ch_heap *h = heap_of(pd, "poolcalloc()");
  if (!h) return calloc(n, size);
  void *p = total <= pool_limit ? ch_pool_heap_alloc_general(h, total, CH_MIN_ALIGN, true) : NULL;
  if (!p) errno = ENOMEM;
  return p;
}

static void *next_memalign(size_t align, size_t size) {
  void *q = NULL;
  int rc = posix_memalign(&q, align < sizeof(void *) ? sizeof(void *) : align, size);
  if (rc) errno = rc;
  return rc ? NULL : q;
}

CH_EXPORT void *poolmemalign(pooldesc *pd, size_t align, size_t size) {
  if (!align || (align & (align - 1)) || align > 4096) { errno = EINVAL; return NULL; }
  if (!pd) return next_memalign(align, size);
  struct ch_heap *h = heap_of(pd, "poolmemalign()");
  if (!h) return next_memalign(align, size);
  /* The gap before an aligned block comes out of the chunk too. */
  void *p = size <= pool_limit && align <= pool_limit - size
                ? ch_pool_heap_alloc_general(h, size, align, false) : NULL;
  if (!p) errno = ENOMEM;
  return p;
}
