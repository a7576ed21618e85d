/* Affinity: HALO's affinity queue and graph (CGO 2020, section 4.1).
 *
 * Each thread has a queue of its most recent macro accesses to tracked
 * objects. A new macro access to object u (context x) walks the queue back
 * from the newest entry; entry v (context y) is affinitive while the sizes of
 * the entries from v up to u, v included and u excluded, sum to less than A.
 * That is Figure 5: with 4-byte accesses and A = 32, the newest access is
 * affinitive to the seven before it. For each affinitive v, edge {x, y} gains
 * 1 (past the sample base, the weight of its window: sample.c), subject to
 * the paper's four constraints:
 *   - deduplication: consecutive accesses to one object are one macro access
 *     (its queue entry grows by their sizes) and do not walk the queue again;
 *   - no self-affinity: u != v;
 *   - no double counting: each v at most once per walk;
 *   - co-allocatability: no allocation from x or y lies chronologically
 *     between the allocations of u and v.
 * Entries beyond A bytes can never become affinitive again, so the walk
 * also trims the queue: it never holds more than A + 1 entries.
 *
 * An affinitive pair saves a miss only if the bytes it touches would share
 * a line once the two objects lie side by side, the older first, as a pool
 * filled in allocation order places them: d bytes apart there (the older's
 * bytes after its touched range, the newer's before its own), they share
 * one of 64 bytes with chance (64 - d) / 64 over where the line boundary
 * falls. Each edge also sums that chance in 64ths, its `near` weight: two
 * 24-byte objects touched at their first words, 40 of 64; a token of 88
 * bytes touched at its head and the 136-byte record it points to, touched
 * at its head too, 0 (docs/planner.md, "Near affinity"). */
#include "profiler.h"

ULong ch_tracked_accesses;

/* ==== edges =============================================================== */

/* {x, y} with x <= y, packed as x << 32 | y, + 1 so that 0 marks empty;
 * its count, and beside it the near weight, in 64ths. */
static CountTable edges = {.cc = "cohort.edges", .wide = True};

static inline void edge_add(UInt x, UInt y, UInt near64, ULong weight) {
  ULong key = x <= y ? ((ULong)x << 32 | y) : ((ULong)y << 32 | x);
  ch_count_add2(&edges, key + 1, weight, near64 * weight);
}

/* ==== per-thread queues =================================================== */

typedef struct {
  UInt id;     /* object id */
  UInt size;   /* bytes in this macro access (saturates at A) */
  ULong seq;   /* the object's allocation seq: a recycled id does not match */
  UInt lo, hi; /* the bytes of the object it touched: [lo, hi) from its start */
} Entry;

typedef struct {
  Entry *q;    /* ring of cap entries */
  UInt head;   /* index of the newest entry */
  UInt len;    /* entries in use */
  ULong walks;
} Queue;

static Queue **queues;  /* by thread id, VG_N_THREADS of them */
static Queue *cur;
static UInt qcap, qmask;
static UInt stamp;

static Queue *queue_for(ThreadId tid) {
  if (!queues[tid]) {
    Queue *q = VG_(calloc)("cohort.queue", 1, sizeof *q);
    q->q = VG_(calloc)("cohort.queue", qcap, sizeof(Entry));
    queues[tid] = q;
  }
  return queues[tid];
}

void ch_set_thread(ThreadId tid) { cur = queue_for(tid); }

void ch_affinity_init(void) {
  qcap = 2;
  while (qcap < (UInt)ch_clo_affinity + 2) qcap *= 2;
  qmask = qcap - 1;
  queues = VG_(calloc)("cohort.queues", VG_N_THREADS, sizeof *queues);
}

/* u and v (u != v) could sit side by side in one pool filled in allocation
 * order only if nothing from either context was allocated between them. */
static inline Bool coallocatable(const Obj *u, const Obj *v) {
  const Obj *older = u->seq < v->seq ? u : v, *newer = u->seq < v->seq ? v : u;
  return ch_prev_same(newer) <= older->seq && ch_next_same(older) >= newer->seq;
}

/* How near, in 64ths, the touched bytes of u ([ulo, uhi)) and of v's entry
 * e would lie in one line with the two side by side, the older first. */
static inline UInt near64(const Obj *u, UInt ulo, UInt uhi, const Obj *v, const Entry *e) {
  ULong d = u->seq < v->seq ? (u->size - uhi) + e->lo : (v->size - e->hi) + ulo;
  return d < 64 ? (UInt)(64 - d) : 0;
}

/* weight: how many accesses this one stands for (sample.c); 0 while the
 * queues warm up before a window, which trims the queue and counts nothing. */
static void walk(Queue *q, CtxStats *cx, Obj *u, UInt ulo, UInt uhi, ULong weight) {
  UInt x = u->ctx;
  UInt sum = 0, k;
  if (++stamp == 0) stamp = 1;
  u->stamp = stamp;  /* u itself never counts */
  for (k = 0; k < q->len; k++) {  /* from the newest entry back */
    Entry *e = &q->q[(q->head - k) & qmask];
    sum += e->size;
    if (sum >= (UInt)ch_clo_affinity) break;
    Obj *v = ch_obj(e->id);
    if (v->seq != e->seq || v->stamp == stamp) continue;
    v->stamp = stamp;
    if (weight && coallocatable(u, v)) edge_add(x, v->ctx, near64(u, ulo, uhi, v, e), weight);
  }
  q->len = k;  /* entry k and older are out of reach for good */
  q->walks += weight;
  cx->macro += weight;
}

void ch_affinity_forget(void) {
  for (UInt t = 0; t < VG_N_THREADS; t++)
    if (queues[t]) queues[t]->len = 0;
}

/* An access to the span of tracked objects that sample.c lets through,
 * just after loads.c's cache saw it (ch_cache_last). */
VG_REGPARM(2) void ch_access(Addr a, SizeT size) {
  Bool chase = (size & CH_ACCESS_CHASE) != 0;
  size &= ~CH_ACCESS_CHASE;
  ULong weight = ch_sample_weight;   /* 0 while the analyses warm before a window */
  UInt id = ch_shadow_get(a);
  if (!id) {   /* heap memory no tracked object holds (loads.c reports it) */
    if (ch_cache_last) {
      ch_heap_other_d1 += weight;
      if (ch_cache_last == 2) ch_heap_other_ll += weight;
    }
    return;
  }
  ch_tracked_accesses += weight;
  Obj *u = ch_obj(id);
  CtxStats *cs = ch_ctx_stats(u->ctx);
  cs->accesses += weight;
  if (ch_cache_last) {
    cs->d1_misses += weight;
    if (ch_cache_last == 2) cs->ll_misses += weight;
  }
  if (ch_clo_layouts) ch_layouts_touch(u, cs, a, size, weight);
  if (ch_clo_lines) ch_lines_touch(u, cs, id, a, size, chase, weight);
  Queue *q = cur;
  Entry *h = &q->q[q->head];
  /* The touched bytes, within the object (an access may run past its end). */
  UInt lo = (UInt)(a - u->start), hi = lo + (UInt)size;
  if (hi > u->size) hi = (UInt)u->size;
  if (q->len && h->id == id && h->seq == u->seq) {  /* same macro access */
    UInt s = h->size + (UInt)size;
    h->size = s < (UInt)ch_clo_affinity ? s : (UInt)ch_clo_affinity;
    if (lo < h->lo) h->lo = lo;
    if (hi > h->hi) h->hi = hi;
    return;
  }
  if (ch_clo_trace) ch_trace_ref(id, u);
  walk(q, cs, u, lo, hi, weight);
  q->head = (q->head + 1) & qmask;
  if (q->len < qcap) q->len++;
  h = &q->q[q->head];
  h->id = id;
  h->seq = u->seq;
  h->size = size < (SizeT)ch_clo_affinity ? (UInt)size : (UInt)ch_clo_affinity;
  h->lo = lo;
  h->hi = hi;
}

/* ==== output ============================================================== */

void ch_affinity_write(VgFile *f) {
  ULong walks = 0;
  UInt threads = 0;
  for (UInt t = 0; t < VG_N_THREADS; t++)
    if (queues[t]) { walks += queues[t]->walks; threads++; }
  VG_(fprintf)(f, "accesses all %llu tracked %llu macro %llu threads %u\n", ch_total_accesses,
               ch_tracked_accesses, walks, threads);
  for (UWord i = 0; i < edges.cap; i++) {
    const ULong *s = ch_count_slot(&edges, i);
    if (s[0]) VG_(fprintf)(f, "edge %u %u %llu %llu\n", (UInt)((s[0] - 1) >> 32), (UInt)(s[0] - 1), s[1], s[2]);
  }
}
