/* Cohort runtime: which group, if any, an allocation belongs to.
 *
 * In plan mode: walk the stack (unwind.c), note which plan sites are on it,
 * and take the first selector conjunction whose sites are all present
 * (docs/plan-format.md). Where the selector sites are patched (patch.c),
 * the bits their activations set decide instead, with no walk. The quick test in the walk rejects an allocation
 * whose innermost application frame the plan marks cold, without a full walk.
 * What nothing claims goes to the plan's rest group if it has one (format 4),
 * split by size class, else to the next allocator.
 * Two further modes serve tests and evaluation: "all" groups every small
 * allocation in one pool, "random" sends each to one of N pools at random
 * (HALO's random-placement control). */
#define _GNU_SOURCE
#include "identify.h"

#include <stdio.h>
#include <string.h>

_Atomic bool ch_identify_active;
_Atomic uint64_t ch_random_threads;   /* ch_random_group */
static unsigned ngroups;
/* Plan mode: the group of what no verdict or selector claims (-1: the next
 * allocator's), and whether that is all the plan says (no walk can matter). */
static int rest = -1;
size_t ch_rest_max;
static bool rest_only;
/* The frameless path (ch_identify_control): up to what size it serves (the
 * group it serves is ch_control_group). */
static size_t control_max;
#define CH_REST (-2)   /* decide_plan: what nothing claims (the rest group, if it fits) */

/* The rest group by size class (identify.h). Each class takes a group id
 * after the plan's own while ids are left, the first class the rest
 * group's own when that is the plan's last (as the planner writes it), so
 * that the classes up to 256 bytes are consecutive groups: the lane needs
 * no table (ch_lane). Objects that no group claims are of many kinds
 * allocated in turn; a class keeps each size apart, so a walk over one kind
 * does not step over the others (docs/planner.md, "The rest pool"). */
int8_t ch_rest_groups[CH_REST_CLASSES];
static unsigned rest_first;   /* the first class's group */
static bool rest_split;       /* the rest group is split: more than one class's group */
static char class_names[CH_MAX_GROUPS][40];
/* The largest request of class c (below 71). */
static size_t class_top(unsigned c) { return c < 16 ? 16 * (size_t)(c + 1) : (size_t)1 << (c - 7); }
static bool rest_one_small;   /* one pool up to 256 bytes, classes above (split_rest) */
static void split_rest(void) {
  memset(ch_rest_groups, rest, sizeof ch_rest_groups);
  if (rest < 0) return;
  size_t top = ch_rest_max < ch_max_size ? ch_rest_max : ch_max_size;
  /* The plan chose the shape from the profile's model of both
   * (docs/planner.md, "The rest pool's shape"); COHORT_REST overrides. One
   * pool is for small objects, kept in allocation order; a larger request
   * spans lines of its own whatever its neighbours, and one pool of varied
   * large sizes fragments under churn, so above 256 bytes the classes stay:
   * one pool splits from class 16 on, and keeps the rest group's own id. */
  bool one = ch_opt.rest_one >= 0 ? ch_opt.rest_one : ch_plan->rest_one;
  unsigned from = one ? 16 : 1;   /* the first class with a group of its own */
  if (top <= class_top(from - 1)) return;   /* one class */
  unsigned plan_groups = ngroups;
  rest_first = one || (unsigned)rest + 1 == ngroups ? (unsigned)rest : ngroups++;
  size_t served[CH_MAX_GROUPS] = {0};   /* the largest request each class's group takes */
  unsigned g = rest_first;
  served[g] = class_top(from - 1);
  ch_rest_groups[0] = ch_rest_groups[CH_REST_CLASSES - 1] = (int8_t)g;
  for (unsigned c = from; c < CH_REST_CLASSES - 1 && class_top(c - 1) < top; c++) {
    if (ngroups < CH_PLAN_GROUPS) g = ngroups++;   /* else the last class takes the larger sizes too */
    ch_rest_groups[c] = (int8_t)g;
    served[g] = class_top(c) < top ? class_top(c) : top;
  }
  if (ngroups == plan_groups) return;   /* no id left: one rest pool */
  rest_split = true;
  rest_one_small = one;
  const char *name = ch_plan->group_names[rest];
  /* consecutive: rest_first is the plan's last or after it; one pool keeps its name */
  for (unsigned k = one ? plan_groups : rest_first; k < ngroups; k++)
    snprintf(class_names[k], sizeof class_names[k], "%.24s/%zu", name, served[k]);
}
/* May the lane pick a class's group as the first class's + the class, for
 * every request up to max (at most 256)? Every class that holds one. */
static bool classes_consecutive(size_t max) {
  for (unsigned c = 0; c < 16 && (c == 0 || class_top(c - 1) < max); c++)
    if (ch_rest_groups[c] != (int)(rest_first + c)) return false;
  return true;
}
static bool is_class(unsigned g) { return class_names[g][0] != 0; }

/* What the patched sites' activations decided (not CH_ACT_WALK), counted. */
static inline int bits_verdict(size_t size, int g) {
  ch_count_unwalked(CH_PATH_PATCHED);
  return g == CH_ACT_REST ? ch_rest_for(size) : g;
}

unsigned ch_ngroups(void) {
  return ch_opt.mode == CH_MODE_DPA || ch_opt.mode == CH_MODE_MO ? ch_online_pools() : ngroups;
}

const char *ch_group_name(unsigned g) {
  static const char *const random_names[] = {"random-0", "random-1", "random-2", "random-3"};
  switch (ch_opt.mode) {
  case CH_MODE_ALL: return "all";
  case CH_MODE_RANDOM: return g < 4 ? random_names[g] : "random";
  case CH_MODE_PLAN: return !ch_plan ? "?" : g < CH_MAX_GROUPS && is_class(g) ? class_names[g] : ch_plan->group_names[g];
  case CH_MODE_DPA:
  case CH_MODE_MO: return ch_online_pool_name(g);
  default: return "?";
  }
}

static bool plan_has_verdicts(const struct ch_plan *pl) {
  for (unsigned s = 0; s < pl->nsites; s++)
    if (pl->sites[s].entry == CH_ENTRY_GROUP || pl->sites[s].entry == CH_ENTRY_NEXT || pl->sites[s].stop) return true;
  return false;
}

void ch_identify_init(void) {
  ch_counts_init();
  if (ch_opt.max_size) ch_max_size = ch_opt.max_size;
  switch (ch_opt.mode) {
  case CH_MODE_ALL:
    ngroups = 1;
    ch_budget_path = CH_PATH_ALL;
    break;
  case CH_MODE_RANDOM:
    ngroups = ch_opt.random_pools;
    ch_budget_path = CH_PATH_RANDOM;
    break;
  case CH_MODE_DPA:
    /* DPA's own size threshold, unless COHORT_MAX_SIZE says otherwise. */
    if (!ch_opt.max_size) ch_max_size = ch_opt.dpa_max_size;
    ch_dpa_init();
    if (ch_opt.mode != CH_MODE_DPA) return;
    break;
  case CH_MODE_MO:
    ch_mo_init();
    if (ch_opt.mode != CH_MODE_MO) return;
    break;
  case CH_MODE_PLAN:
    if (!ch_plan) return;
    if (!ch_opt.max_size) ch_max_size = ch_plan->max_size;
    ngroups = ch_plan->ngroups;
    rest = ch_plan->rest;
    ch_rest_max = ch_plan->rest_max;
    split_rest();
    bool nothing_to_decide = !ch_plan->nconj && ch_plan->nnodes <= 1 && !plan_has_verdicts(ch_plan);
    rest_only = rest >= 0 && nothing_to_decide;
    if (rest_only) ch_budget_path = CH_PATH_COLD;   /* as if the quick test had said cold */
    if (nothing_to_decide && rest < 0) {
      ch_info("plan has no selectors: nothing to group");
      return;
    }
    break;
  default:
    return;
  }
  if (ch_region.size) {
    ch_identify_active = true;
    ch_identify_controls = ch_opt.mode == CH_MODE_ALL || ch_opt.mode == CH_MODE_RANDOM || rest_only;
    control_max = rest_only && ch_rest_max < ch_max_size ? ch_rest_max : ch_max_size;
    ch_control_group = rest_only ? (unsigned)rest : 0;
    size_t lane_max = control_max;
    if (rest_only && rest_one_small) {   /* the lane serves the one pool, the ordinary path the classes above */
      if (lane_max > 256) lane_max = 256;
    } else if (rest_only && rest_split) {   /* the lane picks the class up to 256 bytes, the ordinary path above */
      ch_control_by_size = true;
      ch_control_group = rest_first;
      if (lane_max > 256) lane_max = 256;
      if (!classes_consecutive(lane_max)) lane_max = 0;
    }
    /* The lane packs; a rest pool that places its line-sized blocks into
     * their lines (the plan's at=K) keeps it only for requests whose blocks
     * are smaller than a line: larger ones take the ordinary path, which
     * places them (cohort/plan/planner.py prices it: LANE_NS). */
    if (rest_only && ch_plan->group_at[rest] >= 0 && lane_max > 64 - CH_GRANULE) lane_max = 64 - CH_GRANULE;
    if (ch_identify_controls) ch_control_limit = lane_max;
    if (ch_opt.mode == CH_MODE_RANDOM) ch_control_spread = ngroups;
    ch_site_lane = ch_opt.mode == CH_MODE_MO;
    ch_chain_lane = ch_opt.mode == CH_MODE_DPA;
  }
}

/* Whether the patched sites' activations may decide at all: a stop site
 * left unpatched (an indirect call) could be inner to any record, and then
 * the activations answer "walk" to every allocation (activation.c), so an
 * allocation does not ask them first (gawk's plan, one of whose two stop
 * sites is `call *0x18(%rax)`: two tests of the activations and a probe of
 * the entry's rule before every walk). */
static inline bool acts_may_decide(void) {
  return atomic_load_explicit(&ch_patch_gen, memory_order_relaxed) &&
         __atomic_load_n(&ch_patch_stops_whole, __ATOMIC_RELAXED);
}

static int decide_plan(const uintptr_t *fp) {
  /* The entry's verdict first, past system frames: an allocation made in a
   * system library for a cold entry (a std::string's buffer, made in
   * libstdc++) is decided there, as the quick test decides one made at the
   * entry itself, without the walk's setting up (cppcheck in front of
   * jemalloc: 284 k such requests, about 250 instructions each). A walk
   * would end at the same frame with the same verdict. */
  bool at_caller = false;
  int e = ch_walk_entry(fp, &at_caller);
  if (e == CH_QUICK_COLD || e == CH_QUICK_UNNAMED || e == CH_QUICK_NEXT) {
    ch_count_unwalked(CH_PATH_COLD);
    return e == CH_QUICK_NEXT ? -1 : CH_REST;
  }
  if (e >= 0) {
    if (at_caller && ch_direct_enabled) ch_direct_offer(fp[1], (unsigned)e);
    ch_count_unwalked(CH_PATH_ENTRY);
    return e;
  }
  if (e == CH_QUICK_WALK && acts_may_decide()) {
    int g = ch_act_decide(fp);   /* the patched sites' activations */
    if (g != CH_ACT_WALK) { ch_count_unwalked(CH_PATH_PATCHED); return g == CH_ACT_REST ? CH_REST : g; }
  }
  struct ch_walk w;
  ch_walk_stack(&w, fp);
  if (CH_UNLIKELY(w.entry_group) && ch_direct_enabled) ch_direct_offer(fp[1], w.entry_group - 1);
  ch_thread.walks_joined += w.joined;
  ch_count_frames(w.frames);
  if (w.path_verdict != CH_QUICK_WALK) {
    ch_count(CH_PATH_PATH);
    return w.path_verdict >= 0 ? w.path_verdict : w.path_verdict == CH_QUICK_COLD ? CH_REST : -1;
  }
  if (w.rejected) { ch_count(CH_PATH_COLD); return w.next ? -1 : CH_REST; }
  if (w.entry_group) { ch_count(CH_PATH_ENTRY); return (int)w.entry_group - 1; }
  if (w.stop_group) { ch_count(CH_PATH_STOP); return (int)w.stop_group - 1; }
  const struct ch_plan *pl = ch_plan;
  for (unsigned i = 0; i < pl->nconj; i++) {
    const struct ch_plan_conj *cj = &pl->conj[i];
    bool all = true;
    for (unsigned k = 0; k < CH_MAX_SITES / 64 && all; k++)
      all = (w.active[k] & cj->mask[k]) == cj->mask[k];
    if (all) { ch_count(CH_PATH_WALK_GROUP); return (int)cj->group; }
  }
  ch_count(w.truncated ? CH_PATH_TRUNCATED : CH_PATH_WALK_NONE);
  return CH_REST;
}

/* HALO's control: each allocation to a group drawn at random. */
static inline int random_group(void) {
  ch_count(CH_PATH_RANDOM);
  return (int)ch_random_group();
}

_Atomic bool ch_identify_controls;
size_t ch_control_limit;
unsigned ch_control_group, ch_control_spread;
bool ch_control_by_size;
/* The lane may be armed for a thread once its counts will be flushed at its
 * exit (ch_counts_registered); the entry points arm it. It ignores ch_in_runtime: that
 * guards stack walks, and the lane walks nothing; the heap code it enters
 * never allocates while it is half-way through a change. */
int ch_identify_control(size_t size) {
  if (CH_UNLIKELY(size > control_max || ch_in_runtime || ch_thread.count_budget <= 0)) return -1;
  ch_thread.count_budget--;   /* counted on ch_budget_path when the counts are flushed */
  return ch_opt.mode == CH_MODE_RANDOM         ? (int)ch_random_group()
         : ch_control_by_size || rest_one_small ? ch_rest_group(size)
                                                : (int)ch_control_group;
}
bool ch_identify_lane_ready(void) { return ch_counts_registered() && ch_control_limit; }
void ch_identify_arm_lane(void) {
  struct ch_group_heap *line = ch_heap_line(ch_control_spread ? 0 : ch_control_group);
  uintptr_t mark = ch_control_spread ? 1 : ch_control_by_size ? 2 : 0;
  ch_control_gh = line ? (struct ch_group_heap *)((uintptr_t)line | mark) : NULL;
}
static void controls_off(void) {
  atomic_store(&ch_identify_controls, false);
  ch_control_limit = 0;
}
void ch_identify_off(void) {
  atomic_store(&ch_identify_active, false);
  controls_off();
  ch_direct_set_max(0);   /* direct sites' stubs send everything to malloc */
}

static CH_NOINLINE int identify_slow(size_t size, const uintptr_t *fp) {
  if (size > ch_max_size) { ch_count(CH_PATH_LARGE); return -1; }
  if (ch_in_runtime) { ch_count(CH_PATH_REENTRANT); return -1; }
  switch (ch_opt.mode) {
  case CH_MODE_ALL:
    ch_count(CH_PATH_ALL);
    return 0;
  case CH_MODE_RANDOM:
    return random_group();
  case CH_MODE_PLAN: {
    if (atomic_load_explicit(&ch_plan_disabled, memory_order_relaxed)) { ch_count(CH_PATH_OFF); return -1; }
    ch_in_runtime++;   /* a walk may look up modules, which may allocate */
    int g = decide_plan(fp);
    ch_in_runtime--;
    return g == CH_REST ? ch_rest_for(size) : g;
  }
  default:
    ch_count(CH_PATH_OFF);
    return -1;
  }
}

bool ch_site_lane, ch_chain_lane;

int ch_identify_site(size_t size, uintptr_t ret) {
  if (CH_LIKELY(size <= ch_max_size) && CH_LIKELY(!ch_in_runtime)) {
    int g = ch_mo_identify(size, ret);
    ch_count(g >= 0 ? CH_PATH_MO : CH_PATH_MO_NEXT);
    return g;
  }
  ch_count(size > ch_max_size ? CH_PATH_LARGE : CH_PATH_REENTRANT);
  return -1;
}

int ch_identify_act_direct(size_t size, uintptr_t slot) {
  if (CH_UNLIKELY(ch_in_runtime)) return CH_ACT_WALK;
  int g = ch_act_decide_armed(slot);
  return CH_UNLIKELY(g == CH_ACT_WALK) ? g : bits_verdict(size, g);
}

/* A plan's quick test did not decide alone (q): a cold or next entry (at
 * the caller, or past system frames), the patched sites' activations, or
 * the walk. */
static CH_NOINLINE int identify_plan(size_t size, const uintptr_t *fp, int q) {
  if (q == CH_QUICK_COLD || q == CH_QUICK_UNNAMED) {
    ch_count_unwalked(CH_PATH_COLD);
    if (ch_in_runtime) return -1;
    if (q == CH_QUICK_COLD && ch_direct_enabled) ch_direct_offer_cold(fp[1]);
    else *ch_direct_cold_memo(fp[1]) = fp[1];   /* never patched: decided at the door from now on */
    return ch_rest_for(size);
  }
  if (q == CH_QUICK_PAST_COLD && !ch_in_runtime) {   /* as the walk past system frames decides it */
    ch_count_unwalked(CH_PATH_COLD);
    return ch_rest_for(size);
  }
  if (q == CH_QUICK_NEXT) { ch_count_unwalked(CH_PATH_COLD); return -1; }
  if ((q == CH_QUICK_WALK || q == CH_QUICK_PAST_WALK) && acts_may_decide() && !ch_in_runtime) {
    int g = ch_act_decide(fp);
    if (g != CH_ACT_WALK) {
      if (q == CH_QUICK_WALK && ch_direct_enabled) ch_direct_offer_walk(fp[1]);
      return bits_verdict(size, g);
    }
  }
  return identify_slow(size, fp);
}

/* The common cases first, inline in the entry points: a plan whose quick
 * test decides from the cached rule of the caller's return address (it
 * allocates nothing, so it needs no reentrancy guard; a plan disabled late
 * has cleared ch_identify_active), and the all and random controls. */
int ch_identify(size_t size, const uintptr_t *fp) {
  if (CH_LIKELY(size <= ch_max_size)) {
    if (CH_LIKELY(ch_opt.mode == CH_MODE_PLAN)) {
      if (CH_UNLIKELY(rest_only)) {
        if (ch_in_runtime) return identify_slow(size, fp);
        ch_count_unwalked(CH_PATH_COLD);
        return ch_rest_for(size);
      }
      int q = ch_walk_quick(fp);
      if (CH_LIKELY(q >= 0)) { ch_count_unwalked(CH_PATH_ENTRY); return q; }
      return identify_plan(size, fp, q);
    }
    if (!ch_in_runtime) {
      if (ch_opt.mode == CH_MODE_MO) return ch_identify_site(size, fp[1]);
      if (ch_opt.mode == CH_MODE_DPA) {
        enum ch_path how = CH_PATH_DPA;
        int g = ch_dpa_identify(size, fp, &how);
        ch_count(ch_dpa_path(g, how));
        return g;
      }
      if (ch_opt.mode == CH_MODE_ALL) { ch_count(CH_PATH_ALL); return 0; }
      if (ch_opt.mode == CH_MODE_RANDOM) return random_group();
    }
  }
  return identify_slow(size, fp);
}
