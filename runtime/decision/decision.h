/* Cohort runtime: the decision layer: which group an allocation goes to. The plan
 * (plan.c, plan_bind.c); the patched call sites (patch.c, activation.c,
 * direct.c); DPA's parts (wrapper.c, chain_trie.c, hint.c, ssg.c); the
 * counts of how each allocation was decided (counts.c) and the online
 * policies' pools (pools.c); the policies (dpa.c, mo.c with prefetch.c);
 * the dispatcher, with HALO's plan decision (identify.c). In that order,
 * each file uses only those before it (runtime/README.md). */
#ifndef COHORT_DECISION_H
#define COHORT_DECISION_H

#include "memory.h"
#include "context.h"

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
  /* Version 8: per group, how many bytes into a line its blocks of whole
   * lines start (0, 16, 32 or 48), or -1: the default, at a line's start for
   * a group and packed for the rest group (docs/runtime.md, "A big build
   * walked out of allocation order"). */
  int8_t group_at[CH_MAX_GROUPS];
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
int ch_plan_load(const char *path);      /* 0 ok; otherwise warned and NULL */
/* Parse a plan without warning: 0 and the plan, or -1 and why ("plan PATH
 * line N: WHY"). Uses only the system layer (tools/plan_check.c). */
int ch_plan_read(const char *path, struct ch_plan **out, char *why, size_t whylen);

/* ----------------------------------------------------------- plan_bind.c */
extern atomic_bool ch_plan_disabled;    /* set when a late module contradicts the plan */
/* Called, once, when a module loaded late disables the plan. */
void ch_plan_set_disable_hook(void (*f)(void));
void ch_plan_bind_module(struct ch_module *m);  /* resolve this module's sites */
int ch_plan_site_at(uintptr_t addr);     /* site index or -1 */
int ch_plan_site_entry(uintptr_t addr, int *entry);   /* the same, and its verdict (an ch_entry_verdict) */
bool ch_plan_check_binary(void);         /* after modules load: build ids agree */

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
  ch_thread.path_count[p]++;
  if (CH_UNLIKELY(--ch_thread.count_budget < 0)) ch_count_flush_due();
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

/* ------------------------------------------------------------ identify.c */
extern _Atomic bool ch_identify_active;  /* fast flag: anything to decide at all */
int ch_identify(size_t size, const uintptr_t *entry_fp);    /* group index or -1 */
/* ch_identify under DPA, when the allocation is sampled for the shape graph:
 * malloc allocates through ch_dpa_malloc_sampled, other entry points take
 * the decided group from ch_dpa_unsample. */
#define CH_IDENTIFY_SAMPLE (-100)
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
void ch_identify_controls_off(void);
/* Identification off for good: a plan disabled late (ch_plan_set_disable_hook). */
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

/* What a direct site's allocation decided from activations goes to: a
 * group, or -1 (the next allocator), or CH_ACT_WALK (the ordinary path;
 * direct.c's act paths ask). */
int ch_identify_act_direct(size_t size, uintptr_t slot);

/* --------------------------------------------------------------- patch.c */
struct ch_patch_stats { atomic_ulong patched, unpatched, modules, reseeds, overflows; };
extern struct ch_patch_stats ch_patch_stats;
#define CH_PATCH_REASONS 9
extern const char *const ch_patch_reason_names[CH_PATCH_REASONS];
extern atomic_ulong ch_patch_unpatched_by[CH_PATCH_REASONS];
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
/* Before ch_patch_init, what the stubs write to and reach, from the layers
 * that own them (init.c hands them over): the TLS offsets of the thread's
 * activations and stop records (activation.c), and the entries a `walk`
 * entry's selector stub variants reach (ch_direct_act_malloc,
 * ch_direct_act_new). */
struct ch_patch_targets { intptr_t act_tls, stops_tls; uintptr_t act_malloc, act_new; };
void ch_patch_set_targets(const struct ch_patch_targets *t);
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
  atomic_ulong samples;   /* objects sampled for the shape graph (its edges and merges: ch_ssg_counts) */
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
/* What the graph needs of DPA's object groups, handed over by dpa.c: how
 * many there are, each one's pool (or a CH_DPA_* state below 0), moving
 * one to another pool, and whether a pool was demoted (holds churn). */
struct ch_ssg_owner {
  unsigned (*groups)(void);
  int (*pool_of)(unsigned og);
  void (*set_pool)(unsigned og, int pool);
  bool (*demoted)(unsigned pool);
};
void ch_ssg_init(const struct ch_ssg_owner *o);   /* before the first ch_ssg_note */
struct ch_ssg_counts { atomic_ulong edges, merges[2]; };   /* merges: type I, type II */
extern struct ch_ssg_counts ch_ssg_counts;
void ch_ssg_note(void *p, unsigned og, size_t size);
int ch_ssg_pool_for(unsigned og, size_t size);
void ch_ssg_atfork_child(void);

#endif
