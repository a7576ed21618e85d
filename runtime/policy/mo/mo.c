/* Cohort runtime: MO, per-call-site monitors and size-consistent pools
 * (Zhao, Rabbah & Wong 2005, section 2; docs/policies.md).
 *
 * Each call site of the allocator (the return address into its immediate
 * caller, no chain) has a memory request monitor that records the sizes it
 * asks for. When the site turns hot (ch_opt.mo_hot requests, as DynamoRIO's
 * trace threshold makes a region hot), its monitor is inspected once: if
 * the size did not change over the later half of those requests, the
 * context is valid and the site gets a pool for that one size; otherwise
 * the site stays with the next allocator for good. A pooled site's requests
 * of another size go to the next allocator too. Pools are Cohort groups: a
 * pool that receives one size bump-allocates it, reuses freed objects LIFO
 * from its chunks' bins and gives back chunks whose objects are all free
 * (heap.c). When every group is taken, a new site shares the pool of a site
 * with its size, which keeps every pool size-consistent.
 *
 * The monitor table is read without the lock; a monitor is inserted, and
 * its site decided, under it. */
#define _GNU_SOURCE
#include "mo.h"


#define TABLE_BITS 14
#define TABLE_SIZE (1u << TABLE_BITS)
#define TABLE_PROBES 16

/* A monitor's decision: its kind in the low two bits; for a pool, the pool
 * in bits 2..9 and the size in the upper half. */
enum { D_COUNTING, D_POOL, D_NEXT };
#define D_KIND(d) ((unsigned)(d) & 3)
#define D_POOL_OF(d) ((int)(((d) >> 2) & 0xff))
#define D_SIZE_OF(d) ((size_t)((d) >> 32))
#define D_POOLED(g, size) ((uint64_t)(size) << 32 | (uint64_t)(g) << 2 | D_POOL)

struct monitor {
  _Atomic uintptr_t ret;        /* the call site's return address; 0: empty */
  _Atomic uint64_t decision;
  _Atomic uint32_t requests;    /* counted until the site is decided */
  _Atomic uint32_t last_size;   /* the last request's size */
  _Atomic uint32_t run;         /* requests in a row of last_size */
  _Atomic uint8_t patch;        /* P_*: the site's call, once decided */
  _Atomic uint32_t hits, misses; /* a pooled site's sampled requests, of its pool's size or not */
  int16_t module;               /* ch_modules_at index, -1: unknown (for the statistics) */
  uintptr_t offset;             /* the return address in the module's file */
};

/* A decided site's call instruction, patched to reach its pool's stub or
 * the next allocator's directly (direct.c), no longer pays for this table:
 * a site with mixed sizes (an interpreter's xmalloc) then costs its
 * requests nothing on the way in. */
enum { P_UNTRIED, P_BUSY, P_DONE };

static struct monitor *table;
static ch_lock_t lock;
struct ch_mo_counts ch_mo_counts;

/* Sites the table had no room for, so that their requests skip the lock
 * (direct-mapped; a site pushed out of it is refused again, and counted
 * again, under the lock). */
#define REFUSED_SIZE 256
static _Atomic uintptr_t refused[REFUSED_SIZE];
static inline _Atomic uintptr_t *refused_slot(uintptr_t ret) { return &refused[(ret ^ ret >> 8) & (REFUSED_SIZE - 1)]; }
/* Monitors in insertion order, for the statistics (set under the lock). */
static struct monitor *by_order[CH_MO_SITES_LISTED];

void ch_mo_init(void) {
  ch_lock_init(&lock);
  table = ch_os_reserve(sizeof(struct monitor) * TABLE_SIZE);
  if (!table) {
    ch_warn("COHORT_POLICY=mo: no memory for its monitors; grouping is off");
    ch_opt.mode = CH_MODE_OFF;
  }
}

static inline size_t slot_of(uintptr_t ret) {
  return (size_t)((ret * 0x9e3779b97f4a7c15ull) >> (64 - TABLE_BITS));
}

/* The site's monitor, or NULL: none yet. */
static inline struct monitor *monitor_of(uintptr_t ret) {
  size_t h = slot_of(ret);
  for (unsigned i = 0; i < TABLE_PROBES; i++) {
    struct monitor *e = &table[(h + i) & (TABLE_SIZE - 1)];
    uintptr_t r = atomic_load_explicit(&e->ret, memory_order_acquire);
    if (CH_LIKELY(r == ret)) return e;
    if (!r) break;
  }
  return NULL;
}
/* The site's monitor, inserted if new; NULL when the table is full. */
static CH_NOINLINE struct monitor *monitor_insert(uintptr_t ret) {
  struct monitor *m = NULL;
  ch_lock(&lock);
  size_t h = slot_of(ret);
  for (unsigned i = 0; i < TABLE_PROBES && !m; i++) {
    struct monitor *e = &table[(h + i) & (TABLE_SIZE - 1)];
    uintptr_t r = atomic_load_explicit(&e->ret, memory_order_relaxed);
    if (r == ret) m = e;
    else if (!r) {
      ch_in_runtime++;   /* looking the module up may allocate */
      e->module = (int16_t)ch_module_place(ret, &e->offset);
      ch_in_runtime--;
      if (ch_mo_counts.sites < CH_MO_SITES_LISTED) by_order[ch_mo_counts.sites] = e;
      ch_mo_counts.sites++;
      atomic_store_explicit(&e->ret, ret, memory_order_release);
      m = e;
    }
  }
  if (!m) {
    ch_mo_counts.table_full++;
    atomic_store_explicit(refused_slot(ret), ret, memory_order_relaxed);
  }
  ch_unlock(&lock);
  return m;
}

/* Under the lock: the pool for a valid site of this size. */
static uint64_t pool_for(size_t size) {
  int p = ch_online_pool_new("mo", (uint32_t)size);
  if (p >= 0) return D_POOLED(p, size);
  for (unsigned g = 0, n = ch_online_pools(); g < n; g++)
    if (ch_online_pool_size[g] == size) { ch_mo_counts.sites_shared++; return D_POOLED(g, size); }
  ch_mo_counts.pools_refused++;
  return D_NEXT;
}

/* The site turned hot: inspect its monitor once. Valid when the size held
 * over the later half of its requests (at least the last two, unless the
 * site is hot at its first request). */
static CH_NOINLINE void decide(struct monitor *m) {
  ch_lock(&lock);
  if (D_KIND(atomic_load_explicit(&m->decision, memory_order_relaxed)) == D_COUNTING) {
    uint32_t run = atomic_load_explicit(&m->run, memory_order_relaxed);
    uint32_t size = atomic_load_explicit(&m->last_size, memory_order_relaxed);
    unsigned hot = ch_opt.mo_hot;
    uint32_t need = hot < 2 ? 1 : hot < 4 ? 2 : hot / 2;
    uint64_t d;
    if (run >= need) {
      d = pool_for(size);
      if (D_KIND(d) == D_POOL) ch_mo_counts.sites_pooled++;
    } else {
      d = D_NEXT;
      ch_mo_counts.sites_mixed++;
    }
    atomic_store_explicit(&m->decision, d, memory_order_release);
  }
  ch_unlock(&lock);
}

/* A pooled site keeps its pool while most of its requests are of the
 * pool's size. Its monitor decided once, when the site turned hot: an
 * interpreter's xmalloc can make its first requests, while it parses, all
 * of one size, and later every size, so that the pool takes a trickle and
 * each of the rest pays for the test that sends it on. The patched site's
 * requests are sampled (alloc.c) while it keeps its pool: once DEMOTE_MIN
 * sampled requests have missed the pool's size and misses outnumber hits,
 * the context is no longer valid, by the same test as when it turned hot,
 * and the site goes to the next allocator for good, as a site found mixed
 * then does (its call is patched again, to the next allocator's stub). Its
 * pooled objects stay where they are until freed. */
#define DEMOTE_MIN 16
static CH_NOINLINE void sample(struct monitor *m, uintptr_t ret, bool hit) {
  ch_mo_sample_in = CH_MO_SAMPLE_GAP;
  if (hit) { atomic_fetch_add_explicit(&m->hits, 1, memory_order_relaxed); return; }
  uint32_t misses = atomic_fetch_add_explicit(&m->misses, 1, memory_order_relaxed) + 1;
  if (misses < DEMOTE_MIN || misses <= atomic_load_explicit(&m->hits, memory_order_relaxed)) return;
  ch_lock(&lock);
  if (D_KIND(atomic_load_explicit(&m->decision, memory_order_relaxed)) == D_POOL) {
    atomic_store_explicit(&m->decision, D_NEXT, memory_order_release);
    ch_mo_counts.sites_demoted++;
  }
  ch_unlock(&lock);
  /* Demoted, and still reaching its pool's stub: the call was not patched
   * again yet (another thread was writing code), or a thread that sampled
   * it at the same time did. The stub's test sends it on meanwhile. */
  ch_direct_repatch_next(ret);
}
void ch_mo_sample(uintptr_t ret, bool hit) {
  struct monitor *m = monitor_of(ret);
  if (m) sample(m, ret, hit);
  else ch_mo_sample_in = CH_MO_SAMPLE_GAP;
}

/* One more request of a site not yet hot. Races between threads may lose a
 * count or break a run: the monitor is a heuristic, and decide() reads it
 * once, under the lock. */
static CH_NOINLINE int monitor_count(struct monitor *m, size_t size) {
  uint32_t s = (uint32_t)size;
  if (atomic_load_explicit(&m->last_size, memory_order_relaxed) == s)
    atomic_store_explicit(&m->run, atomic_load_explicit(&m->run, memory_order_relaxed) + 1, memory_order_relaxed);
  else {
    atomic_store_explicit(&m->last_size, s, memory_order_relaxed);
    atomic_store_explicit(&m->run, 1, memory_order_relaxed);
  }
  if (atomic_fetch_add_explicit(&m->requests, 1, memory_order_relaxed) + 1 >= ch_opt.mo_hot) decide(m);
  return -1;   /* this request, like every one before the decision, goes to the next allocator */
}

/* Once per decided site: patch its call where it can be (pool, or -1 for
 * the next allocator). */
static CH_NOINLINE void offer_patch(struct monitor *m, uintptr_t ret, int pool) {
  uint8_t expect = P_UNTRIED;
  if (!atomic_compare_exchange_strong(&m->patch, &expect, P_BUSY)) return;
  int done = ch_direct_enabled ? ch_direct_patch_site(ret, pool) : 0;
  if (done > 0) atomic_fetch_add_explicit(&ch_mo_counts.sites_patched, 1, memory_order_relaxed);
  atomic_store(&m->patch, done < 0 ? P_UNTRIED : P_DONE);   /* busy: a later request offers again */
}

int ch_mo_identify(size_t size, uintptr_t ret) {
  struct monitor *m = monitor_of(ret);
  if (CH_UNLIKELY(!m)) {
    if (atomic_load_explicit(refused_slot(ret), memory_order_relaxed) == ret || !(m = monitor_insert(ret))) return -1;
  }
  uint64_t d = atomic_load_explicit(&m->decision, memory_order_acquire);
  if (CH_UNLIKELY(atomic_load_explicit(&m->patch, memory_order_relaxed) == P_UNTRIED) && D_KIND(d) != D_COUNTING)
    offer_patch(m, ret, D_KIND(d) == D_POOL ? D_POOL_OF(d) : -1);
  if (CH_LIKELY(D_KIND(d) == D_POOL)) {
    bool hit = D_SIZE_OF(d) == size;
    if (CH_UNLIKELY(--ch_mo_sample_in < 0)) sample(m, ret, hit);
    return hit ? D_POOL_OF(d) : -1;
  }
  if (D_KIND(d) == D_NEXT) return -1;
  return monitor_count(m, size);
}

/* The statistics' view of the i-th monitor inserted (i < CH_MO_SITES_LISTED). */
bool ch_mo_site(unsigned i, struct ch_mo_site *out) {
  if (i >= CH_MO_SITES_LISTED || i >= ch_mo_counts.sites || !by_order[i]) return false;
  const struct monitor *m = by_order[i];
  uint64_t d = atomic_load(&m->decision);
  out->module = m->module;
  out->offset = m->offset;
  out->requests = atomic_load(&m->requests);
  out->size = D_KIND(d) == D_POOL ? (uint32_t)D_SIZE_OF(d) : atomic_load(&m->last_size);
  out->pool = D_KIND(d) == D_POOL ? D_POOL_OF(d) : -1;
  out->decided = D_KIND(d) != D_COUNTING;
  return true;
}

/* After a fork the child has one thread: a lock held by another is free. */
void ch_mo_atfork_child(void) { ch_lock_init(&lock); }
