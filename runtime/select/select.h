/* Cohort runtime: the selection layer, what every policy decides with: the
 * activations of patched selector sites (activation.c), allocation call
 * sites patched to reach their group directly (direct.c), the counts of
 * how each allocation was decided (counts.c) and the pools the online
 * policies make (pools.c).
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_SELECT_H
#define COHORT_SELECT_H

#include "code.h"

/* ---------------------------------------------------------- activation.c */
intptr_t ch_act_tls_offset(void);               /* of this thread's struct ch_act from %fs:0 */
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
 * remembered cold entry's (its allocation there: entry.h). */
static inline bool ch_cold_entry(uintptr_t ret, size_t size) {
  return size <= ch_max_size && *ch_direct_cold_memo(ret) == ret;
}
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
struct ch_direct_stats { atomic_ulong patched, left; };
extern struct ch_direct_stats ch_direct_stats;

/* -------------------------------------------------------------- counts.c */
/* How each allocation was decided, counted per thread by path and by the
 * frames its walk stepped, and flushed in batches to these totals. */
extern const char *const ch_path_names[CH_PATH_COUNT];
extern atomic_ulong ch_path_count[CH_PATH_COUNT];
extern const char *const ch_frame_bucket_names[CH_FRAME_BUCKETS];
extern atomic_ulong ch_frame_count[CH_FRAME_BUCKETS];
extern atomic_ulong ch_walks_joined;    /* walks finished from the suffix memo */
/* The path of the allocations counted by the budget alone (ch_count_direct,
 * the frameless lane): set by identify.c for the mode it runs. */
extern enum ch_path ch_budget_path;
void ch_counts_init(void);
bool ch_counts_registered(void);   /* this thread's counts will be flushed at its exit */
/* Flush this thread's counts and start a new batch; also looks for modules
 * loaded since, whose sites may need patching. */
void ch_count_flush_due(void);
void ch_count_flush_thread(void);
/* Each returns false when the counts are due (ch_count_flush_due), which
 * the caller does out of line, so that its own path needs no frame. */
static inline bool ch_count_path(enum ch_path p) {
  ch_thread.path_count[p]++;
  return --ch_thread.count_budget >= 0;
}
/* Through a direct site (direct.c): decided with no frame looked at, and
 * counted by the budget alone, on ch_budget_path. */
static inline bool ch_count_direct(void) { return --ch_thread.count_budget >= 0; }
/* Decided from a live stop record, no frame looked at. */
static inline bool ch_count_patched(void) { return --ch_thread.patched_budget >= 0; }
/* A request of a patched MO site (direct.c), counted on its path. */
static inline bool ch_count_site(bool pooled) { return ch_count_path(pooled ? CH_PATH_MO : CH_PATH_MO_NEXT); }
static inline void ch_count(enum ch_path p) {
  if (CH_UNLIKELY(!ch_count_path(p))) ch_count_flush_due();
}
/* An allocation decided without stepping past its entry frame. */
static inline void ch_count_unwalked(enum ch_path p) {
  ch_count(p);
  ch_thread.frame_count[0]++;
}
static inline void ch_count_frames(unsigned n) {
  ch_thread.frame_count[n < 4 ? n : n < 8 ? 4 : n < 16 ? 5 : 6]++;
}

/* --------------------------------------------------------------- pools.c */
/* The pools an online policy (dpa.c, mo.c) makes as it runs, under its
 * lock: the next one, named POLICY-N, for objects of size bytes (0: mixed);
 * -1 once every Cohort group is taken. */
int ch_online_pool_new(const char *policy, uint32_t size);
unsigned ch_online_pools(void);
const char *ch_online_pool_name(unsigned g);
extern uint32_t ch_online_pool_size[CH_MAX_GROUPS];

#endif
