/* Cohort runtime: the dispatcher (identify.c): which group an allocation
 * goes to, under the mode the run is in: HALO's plan, the rest pool's size
 * classes, the all and random controls and their lane, or one of the
 * online policies below it.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_IDENTIFY_H
#define COHORT_IDENTIFY_H

#include "dpa.h"
#include "mo.h"

/* ------------------------------------------------------------ identify.c */
extern _Atomic bool ch_identify_active;  /* fast flag: anything to decide at all */
int ch_identify(size_t size, const uintptr_t *entry_fp);    /* group index or -1 */
void ch_identify_init(void);
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
/* Identification off for good, every allocation to the next allocator: a
 * plan missing or disabled at start-up, or disabled late by a module
 * (ch_plan_set_disable_hook). */
void ch_identify_off(void);
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
/* MO decides from the allocator's return address alone: malloc and operator
 * new take the site lane, which needs no frame and no walk. */
extern bool ch_site_lane;
/* DPA decides from the chain above malloc's frame (dpa.c): malloc takes the
 * chain lane, a framed call to ch_dpa_malloc with nothing else to test. */
extern bool ch_chain_lane;
int ch_identify_site(size_t size, uintptr_t ret);   /* group index or -1 */
/* The site lane's allocation, for malloc and operator new: the site's pool,
 * else the next allocator. */
static inline void *ch_site_malloc(size_t size, uintptr_t ret) {
  int g = ch_identify_site(size, ret);
  return g >= 0 ? ch_group_malloc_or_next((unsigned)g, size) : ch_next.malloc(size);
}
unsigned ch_ngroups(void);
const char *ch_group_name(unsigned g);

/* What a direct site's allocation decided from activations goes to: a
 * group, or -1 (the next allocator), or CH_ACT_WALK (the ordinary path;
 * direct.c's act paths ask). */
int ch_identify_act_direct(size_t size, uintptr_t slot);

#endif
