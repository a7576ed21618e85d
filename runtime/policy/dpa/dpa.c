/* Cohort runtime: DPA, profile-free pooling (Wang, Wu & Yew, CGO 2010;
 * docs/policies.md).
 *
 * An allocation's object group is its adaptive partial call chain (APCC):
 * the return addresses from the allocator's caller outwards, one frame more
 * for as long as the frame is a wrapper (wrapper.c) or lies in a system
 * library, at most CH_DPA_CHAIN_MAX application frames. A group gets a pool (a
 * Cohort group) once it has allocated ch_opt.dpa_min_objects objects of at most
 * max_size bytes; until then, and for larger objects, the next allocator
 * serves. Groups whose objects point at each other, or are pointed at from
 * the same field of one group, and have one size, share a pool (ssg.c).
 *
 * The compound table (DPA's section 4, chain_trie.c) maps every prefix of
 * a chain met so far to "extend" (the prefix ends in a wrapper) or to its
 * object group. An allocation whose caller is not a wrapper is decided with
 * one probe, of the caller's return address; a chain through wrappers costs
 * one stack load and one probe per further frame (short_chain), and the
 * unwinder runs only for prefixes not seen before. Entries are written
 * once, under the lock, and read without it. Once a group is decided, the
 * outermost call of its chain is patched to name it (hint.c), and an
 * allocation that finds the hint checks the chain's return addresses on the
 * stack instead of probing. */
#define _GNU_SOURCE
#include "dpa.h"

#include <string.h>

#define FRAMES_MAX 32           /* frames in all, system ones included */
#define END_PC 1                /* a chain's end inside wrappers, as a child of its last frame */
#define SITES_SIZE 8192         /* call sites by return address: wrapper verdicts, callers' counts */

/* A trie node's value: its kind in the low two bits. Above them, an object
 * group's index, or for an extended prefix the place of the next return
 * address (its offset from the entry point's frame, never 0; 0: not at a
 * fixed place, and the chain is walked). */
enum { V_EMPTY, V_EXTEND, V_NONE, V_OG };
#define KIND(v) ((v) & 3)
#define OG_VAL(i) ((uint32_t)(i) << 8 | V_OG)
#define OG_OF(v) ((v) >> 8)

struct ch_dpa_og *ch_dpa_ogs;
struct ch_dpa_live *ch_dpa_live;
_Atomic unsigned ch_dpa_nogs;
static ch_lock_t lock;
struct ch_dpa_counts ch_dpa_counts;
/* What DPA knows of a call site, under the lock: how many allocations it
 * made as the allocator's caller (caller_ripe), and the wrapper verdict on
 * its function (is_wrapper). */
struct site { uintptr_t ret; uint32_t allocs; uint8_t verdict; /* CH_WRAP_* + 1; 0: not analysed */ };
static struct site *sites;
/* A chain as its hint is checked: its return addresses and where each lies
 * relative to the entry point's frame (the first one at fp[1]), all fixed
 * places, and the group's pool once decided; one line per group. */
#define HINT_FRAMES 5
struct hint_chain {
  uintptr_t pc[HINT_FRAMES];
  int32_t off[HINT_FRAMES - 1];   /* of pc[1..n) */
  int32_t pool;
  uint8_t n;                      /* 0: no fixed places, never hinted */
  uint8_t trust;                  /* TRUST_* */
  uint8_t held;                   /* checks in a row that held, while TRUST_CHECKING */
} __attribute__((aligned(64)));
/* Trusted hints. Checking a hint against the stack costs more than the
 * rest of an allocation: the frame it starts from, the chain's return
 * addresses (calc 150 under dpa: 998 M instructions in dpa.c for 13 M
 * allocations). What an allocation needs is its pool, not its chain, so a
 * group's hint is checked by the pool its allocation goes to: the hint's
 * group's when the stack holds its chain, otherwise the pool of whichever
 * group the stack does hold. A hint whose allocations went to its pool
 * TRUST_AFTER times in a row is trusted: malloc and operator new take that
 * pool with no frame and no check (ch_dpa_trusted), and check once in
 * CHECK_GAP of the thread's trusted allocations; a check that finds another
 * pool, or none, sends the hint back to being checked every time. So a call
 * that ends the chains of several groups of one pool (an interpreter's
 * constructor called from many places, whose temporaries all go to the
 * churn pool) names that pool at the cost of one load, and the price of
 * trust is an object placed in the wrong pool now and then until the next
 * check: a place, never a wrong answer. A prefix hint is trusted alike, its
 * pool learnt (the pool of the last allocation made while it was set), its
 * state in its first way's line. */
enum { TRUST_CHECKING, TRUST_YES };
#define TRUST_AFTER 64
#define CHECK_GAP CH_DPA_CHECK_GAP
#define check_in (ch_thread.dpa_check_in)
static struct hint_chain *hint_chains;
/* The lane's view of each hint (a group's, then CH_DPA_MAX_OGS prefix
 * hints'): its pool + 1 while it is trusted, else 0. One word, so that a
 * trusted allocation reads neither the hint's line nor its pool apart;
 * written whenever the trust or the pool changes, and again at each check
 * that holds, which mends a word that a race left stale. */
static _Atomic uint32_t *trust_words;
/* Prefix hints. A call that ends the chains of several groups names the
 * first of them decided; where it does, the call one frame in may name the
 * chain's prefix up to it (prefix_offer): an interpreter's evaluator calls
 * one constructor wrapper from many places, and the wrapper makes objects at
 * several, so that neither call alone tells the group, but the inner one
 * tells the prefix, or one of a few (PREFIX_WAYS: the frames inside the call
 * may differ). The allocator checks them on the stack and takes the trie's
 * steps from the node of the one it finds. prefix_nodes holds each one's
 * node as last found: a block that grows is copied, and a node found in an
 * old copy is looked up again from the root (prefix_refresh). */
#define PREFIX_WAYS 4
struct prefix_hint { struct hint_chain way[PREFIX_WAYS]; };   /* n == 0: a way not taken; off[n - 1]: the next
                                                                 * return address's place */
static struct prefix_hint *prefix_hints;
static const struct ch_trie_node *_Atomic (*prefix_nodes)[PREFIX_WAYS];
static unsigned nprefix;   /* under the lock */
/* Prefix memos. A prefix hint whose pool depends on the frame beyond it is
 * never trusted: a recursive evaluator's allocation, say, where the call
 * that tells is the evaluator's caller's, whose hint the allocations below
 * it took long before (calc: 3.9 M of 13.1 M allocations, each on the
 * framed path: the prefix checked on the stack, then the trie's step). The
 * memo of a prefix hint (its first way) keeps the groups that the step from
 * it found in one frame, each as one word, the next return address in the
 * low 48 bits and the group + 1 above them, PREFIX_MEMO of them in a
 * table probed linearly from the address's hash. (Direct-mapped, two of
 * calc's evaluator's twelve callers took turns in one word, and 0.5 M of
 * the 4.3 M allocations through the prefix missed.) The lane checks the
 * prefix on the stack, reads the next return address and finds the group
 * with no frame and no trie. The memo is exact, as the trie is: its
 * entries never change. */
#define PREFIX_MEMO 16
#define MEMO_PC ((1ull << 48) - 1)
static _Atomic uint64_t (*prefix_memo)[PREFIX_MEMO];
static inline unsigned memo_hash(uintptr_t pc) { return (unsigned)((pc * 0x9e3779b97f4a7c15ull) >> 60); }
_Static_assert(PREFIX_MEMO == 16, "memo_hash gives 4 bits");
/* Prefix hint i's memo word for return address pc, or 0. Words are only
 * ever added, each once, so an empty one ends the search. */
static inline uint64_t memo_find(unsigned i, uintptr_t pc) {
  for (unsigned k = 0, h = memo_hash(pc); k < PREFIX_MEMO; k++) {
    uint64_t e = atomic_load_explicit(&prefix_memo[i][(h + k) % PREFIX_MEMO], memory_order_relaxed);
    if (!e || (e & MEMO_PC) == pc) return e;
  }
  return 0;
}

/* The storage shape graph's view of the object groups (ssg.c). */
static unsigned ogs_made(void) { return atomic_load_explicit(&ch_dpa_nogs, memory_order_acquire); }
static int og_pool(unsigned og) { return atomic_load_explicit(&ch_dpa_live[og].pool, memory_order_relaxed); }

void ch_dpa_init(void) {
  ch_lock_init(&lock);
  ch_dpa_ogs = ch_os_reserve(sizeof(struct ch_dpa_og) * CH_DPA_MAX_OGS);
  ch_dpa_live = ch_os_reserve(sizeof(struct ch_dpa_live) * CH_DPA_MAX_OGS);
  sites = ch_os_reserve(sizeof *sites * SITES_SIZE);
  hint_chains = ch_os_reserve(sizeof *hint_chains * CH_DPA_MAX_OGS);
  prefix_hints = ch_os_reserve(sizeof *prefix_hints * CH_DPA_PREFIX_HINTS);
  prefix_nodes = ch_os_reserve(sizeof *prefix_nodes * CH_DPA_PREFIX_HINTS);
  prefix_memo = ch_os_reserve(sizeof *prefix_memo * CH_DPA_PREFIX_HINTS);
  trust_words = ch_os_reserve(sizeof *trust_words * (CH_DPA_MAX_OGS + CH_DPA_PREFIX_HINTS));
  if (!trust_words || !ch_trie_init() || !ch_dpa_ogs || !ch_dpa_live || !sites || !hint_chains || !prefix_hints || !prefix_nodes ||
      !prefix_memo) {
    ch_warn("COHORT_POLICY=dpa: no memory for its tables; grouping is off");
    ch_opt.mode = CH_MODE_OFF;
    return;
  }
  ch_hint_init();
  ch_ssg_init(&(struct ch_ssg_owner){ogs_made, og_pool, ch_dpa_set_pool, ch_dpa_pool_demoted});
}


/* ------------------------------------------------------------ wrappers */

/* Under the lock: the record of the call site returning to ret, made if
 * new; NULL when the table is full. */
static struct site *site_of(uintptr_t ret) {
  size_t h = (size_t)((ret * 0x9e3779b97f4a7c15ull) >> 51) & (SITES_SIZE - 1);
  for (unsigned i = 0; i < SITES_SIZE; i++, h = (h + 1) & (SITES_SIZE - 1)) {
    if (!sites[h].ret) sites[h].ret = ret;
    if (sites[h].ret == ret) return &sites[h];
  }
  return NULL;
}

/* Is the function around the call returning to pc a wrapper? Cached per
 * return address; under the lock. */
static bool is_wrapper(uintptr_t pc) {
  struct site *s = site_of(pc);
  if (s && s->verdict) return s->verdict - 1 == CH_WRAP_YES;
  const struct ch_module *m = ch_module_for(pc);
  uintptr_t start, end;
  int v;
  if (!m || !ch_cfi_function(m, pc - 1, &start, &end) || !ch_module_maps(m, start, end - start))
    v = CH_WRAP_NO_CODE;
  else {
    struct ch_cfi_rule at;
    v = ch_wrapper_analyse(start, end, pc, ch_cfi_find(m, pc - 1, &at) ? &at : NULL);
  }
  atomic_fetch_add_explicit(&ch_dpa_counts.verdicts[v], 1, memory_order_relaxed);
  static const char *const said[CH_WRAP_VERDICTS] = {
    "not a wrapper", "a wrapper", "not followed", "not decoded", "too large", "no code found",
    "a wrapper that calls itself: the chain stops there"};
  ch_info("dpa: call site %s+%#lx: %s", m ? m->path : "?", (unsigned long)(m ? pc - m->bias : pc), said[v]);
  if (s) s->verdict = (uint8_t)(v + 1);
  return v == CH_WRAP_YES;
}

/* --------------------------------------------------------------- groups */

/* A new object group for the chain pcs[0..n), whose return addresses lie at
 * offs[0..n) from the entry point's frame (0: not at a fixed place; NULL:
 * none known), under the lock; V_NONE when the table of groups is full. */
static uint32_t og_new(const uintptr_t *pcs, const bool *sys, const int32_t *offs, unsigned n, size_t size) {
  unsigned i = atomic_load_explicit(&ch_dpa_nogs, memory_order_relaxed);
  if (i == CH_DPA_MAX_OGS) { atomic_fetch_add(&ch_dpa_counts.groups_refused, 1); return V_NONE; }
  struct ch_dpa_og *o = &ch_dpa_ogs[i];
  o->size = (uint32_t)size;
  atomic_store_explicit(&ch_dpa_live[i].pool, CH_DPA_COUNTING, memory_order_relaxed);
  unsigned napp = 0;
  for (unsigned k = 0; k < n; k++) {
    if (sys[k]) continue;
    o->frame_module[napp] = (int16_t)ch_module_place(pcs[k], &o->frame_offset[napp]);
    napp++;
  }
  o->length = (uint8_t)napp;
  struct hint_chain *c = &hint_chains[i];
  bool fixed = ch_hint_enabled && offs && n <= HINT_FRAMES;
  for (unsigned k = 1; k < n && fixed; k++) fixed = offs[k] > 0;
  if (fixed) {
    for (unsigned k = 0; k < n; k++) c->pc[k] = pcs[k];
    for (unsigned k = 1; k < n; k++) c->off[k - 1] = offs[k];
    c->n = (uint8_t)n;
  }
  atomic_store_explicit(&ch_dpa_live[i].hint, fixed ? CH_HINT_UNTRIED : CH_HINT_NONE, memory_order_relaxed);
  atomic_store_explicit(&ch_dpa_nogs, i + 1, memory_order_release);
  return OG_VAL(i);
}

/* Under the lock: the value of the prefix pcs[0..depth) one frame further,
 * at return address pc (pcs[depth], or END_PC where the chain ends at
 * depth), recorded in the trie if new; *at: its node (NULL: the trie could
 * not take it). The shorter prefix is found again from the root, since a
 * block may have moved while the lock was not held. more: the stack goes
 * on; napp: application frames up to pc. */
static uint32_t decide(const uintptr_t *pcs, const bool *sys, const int32_t *offs, unsigned depth, uintptr_t pc,
                       unsigned napp, bool more, size_t size, const struct ch_trie_node **at) {
  struct ch_trie_node *parent = ch_trie_find(pcs, depth);
  const struct ch_trie_node *c = parent ? ch_trie_child(parent, pc) : NULL;
  if (c) { *at = c; return atomic_load_explicit(&c->val, memory_order_relaxed); }
  bool end = pc == END_PC;
  bool extend = !end && more && depth + 1 < FRAMES_MAX &&
                (sys[depth] || (napp < CH_DPA_CHAIN_MAX && is_wrapper(pcs[depth])));
  int32_t next_off = extend ? offs[depth + 1] : 0;
  uint32_t v = !extend ? og_new(pcs, sys, offs, end ? depth : depth + 1, size)
             : (uint32_t)next_off << 8 | V_EXTEND;
  *at = parent ? ch_trie_add(parent, pc, v) : NULL;
  if (!*at) atomic_fetch_add(&ch_dpa_counts.table_full, 1);
  return *at ? atomic_load_explicit(&(*at)->val, memory_order_relaxed) : v;
}

/* The prefix pcs[0..depth), whose node is *at, one frame further at pc:
 * its node's value if the trie has it, else decided under the lock. */
static uint32_t step(const struct ch_trie_node **at, const uintptr_t *pcs, const bool *sys, const int32_t *offs,
                     unsigned depth, uintptr_t pc, unsigned napp, bool more, size_t size) {
  const struct ch_trie_node *c = *at ? ch_trie_child(*at, pc) : NULL;
  if (c) { *at = c; return atomic_load_explicit(&c->val, memory_order_relaxed); }
  ch_lock(&lock);
  uint32_t v = decide(pcs, sys, offs, depth, pc, napp, more, size, at);
  ch_unlock(&lock);
  return v;
}

/* The chain's object group, walking as far as the trie says: OG_VAL(i),
 * or V_NONE. */
static CH_NOINLINE uint32_t chain_group(const uintptr_t *fp, size_t size) {
  struct ch_frames it;
  uintptr_t pcs[FRAMES_MAX];
  bool sys[FRAMES_MAX];
  int32_t offs[FRAMES_MAX + 1] = {8};   /* where each return address lies: the first at fp[1] */
  unsigned n = 0, napp = 0;
  const struct ch_trie_node *at = &ch_trie_root;
  uint32_t v = V_NONE;
  if (!ch_frames_start(&it, fp)) return V_NONE;
  while (n < FRAMES_MAX && ch_frames_next(&it, &pcs[n], &sys[n])) {
    if (CH_UNLIKELY(it.unsure)) return V_NONE;   /* next time: nothing is recorded */
    /* A call site met again is recursion: the chain so far is the group,
     * whatever the depth, and the prefix with the repeated frame gets it
     * too, so that the short path finds it next time. */
    bool again = false;
    for (unsigned k = 0; k < n && !again; k++) again = pcs[k] == pcs[n];
    if (again) {
      const struct ch_trie_node *end = at;
      uint32_t g = step(&end, pcs, sys, offs, n, END_PC, napp, false, size);
      ch_lock(&lock);
      struct ch_trie_node *parent = ch_trie_find(pcs, n);
      if (parent && KIND(g) == V_OG && !ch_trie_add(parent, pcs[n], g))
        atomic_fetch_add(&ch_dpa_counts.table_full, 1);
      ch_unlock(&lock);
      return g;
    }
    napp += !sys[n];
    n++;
    /* The next return address sits just below the CFA the step reached. */
    intptr_t next = (intptr_t)(it.r.sp - 8 - (uintptr_t)fp);
    offs[n] = it.done || !it.fixed || next <= 0 || next >= (1 << 23) ? 0 : (int32_t)next;
    v = step(&at, pcs, sys, offs, n - 1, pcs[n - 1], napp, !it.done, size);
    if (KIND(v) != V_EXTEND) return v;
  }
  /* The stack ended (or was cut short) inside wrappers: the chain so far
   * is all of it. */
  return n ? step(&at, pcs, sys, offs, n, END_PC, napp, false, size) : V_NONE;
}

/* Hint c's word for the lane, and the word from its trust and pool now. */
static inline _Atomic uint32_t *word_of(const struct hint_chain *c) {
  return c >= hint_chains && c < hint_chains + CH_DPA_MAX_OGS
             ? &trust_words[c - hint_chains]
             : &trust_words[CH_DPA_MAX_OGS + ((const struct prefix_hint *)c - prefix_hints)];
}
static void publish(const struct hint_chain *c) {
  int pool = __atomic_load_n(&c->pool, __ATOMIC_RELAXED);
  bool yes = __atomic_load_n(&c->trust, __ATOMIC_RELAXED) == TRUST_YES;
  atomic_store_explicit(word_of(c), yes && pool >= 0 ? (uint32_t)pool + 1 : 0, memory_order_relaxed);
}

/* A group's pool from now on, and its hint's (a merge, a demotion). */
void ch_dpa_set_pool(unsigned og, int pool) {
  atomic_store_explicit(&ch_dpa_live[og].pool, pool, memory_order_release);
  __atomic_store_n(&hint_chains[og].pool, pool >= 0 ? pool : -1, __ATOMIC_RELAXED);
  publish(&hint_chains[og]);
}

/* ------------------------------------------------------------------ churn */

/* A pool whose live objects never span more lines than the pool's own
 * state has nothing worth placing: a live set that small stays in the
 * cache under any allocator, as an interpreter's temporaries do, each freed
 * soon after it is made, while the pool's state (the lines each of its
 * allocations and frees touch besides the block: CH_POOL_STATE_LINES,
 * heap.c) adds to what the cache must hold, once per such pool (calc under
 * dpa: 64 pools, most of them with one to a dozen objects live).
 * Sampled allocations (sample_due) look at the live bytes of the chunk they
 * came from: a pool whose last CHURN_RUN samples in a row found no more
 * than that (or one object, if larger) sends its groups, for good, to the
 * churn pool: one pool of mixed sizes that every such group shares, so that
 * their state is paid once and a block freed by one is reused by the next
 * allocation of any, as a general allocator's free lists do (the next
 * allocator when no Cohort group is left for it). A pool is watched for its
 * first CHURN_WATCH samples only, so that one whose live set merely dips now
 * and then is left alone. The chunk is the sampling thread's own, so a pool
 * whose objects are spread thinly over many threads may be taken for churn. */
#define CHURN_RUN 8
#define CHURN_WATCH 64
static _Atomic uint32_t churn_seen[CH_MAX_GROUPS];   /* samples << 16 | the run of small ones */
static _Atomic bool demoted[CH_MAX_GROUPS];
static _Atomic int churn_pool = CH_DPA_CHURN;   /* made at the first demotion */

bool ch_dpa_pool_demoted(unsigned pool) {
  return pool < CH_MAX_GROUPS && atomic_load_explicit(&demoted[pool], memory_order_relaxed);
}

int ch_dpa_churn_pool(void) {
  int p = atomic_load_explicit(&churn_pool, memory_order_relaxed);
  return p >= 0 ? p : -1;
}

/* Under the lock: the pool that groups of churn go to, made if new. */
static int churn_pool_locked(void) {
  int p = atomic_load_explicit(&churn_pool, memory_order_relaxed);
  if (p == CH_DPA_CHURN) {
    p = ch_online_pool_new("dpa-churn", 0);   /* mixed sizes: never merged */
    if (p < 0) return CH_DPA_CHURN;
    atomic_store_explicit(&churn_pool, p, memory_order_relaxed);
  }
  return p;
}

static CH_NOINLINE void demote(unsigned pool) {
  ch_lock(&lock);
  if (!atomic_exchange(&demoted[pool], true)) {
    atomic_fetch_add_explicit(&ch_dpa_counts.pools_demoted, 1, memory_order_relaxed);
    int to = churn_pool_locked();
    unsigned n = atomic_load_explicit(&ch_dpa_nogs, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
      if (atomic_load_explicit(&ch_dpa_live[i].pool, memory_order_relaxed) == (int)pool) ch_dpa_set_pool(i, to);
  }
  ch_unlock(&lock);
}

/* A sampled allocation of size bytes at p, from pool's chunk. Threads may
 * race on the counts: a sample lost or counted twice changes nothing that
 * matters. */
static void churn_watch(unsigned pool, const void *p, size_t size) {
  uint32_t seen = atomic_load_explicit(&churn_seen[pool], memory_order_relaxed);
  uint32_t samples = seen >> 16, run = seen & 0xffff;
  if (samples >= CHURN_WATCH || (int)pool == atomic_load_explicit(&churn_pool, memory_order_relaxed)) return;
  size_t n = ch_block_size(size);
  size_t small = CH_POOL_STATE_LINES * 64;
  run = ch_group_chunk_live(p) <= (n > small ? n : small) ? run + 1 : 0;
  atomic_store_explicit(&churn_seen[pool], (samples + 1) << 16 | run, memory_order_relaxed);
  if (run == CHURN_RUN) demote(pool);
}

/* Has the allocator's caller (its return address) made dpa_min_objects
 * allocations yet? Chains are built (unwinding, the wrapper analysis of each
 * frame's function) only from then on: no group of the caller's can reach
 * its threshold sooner, and a program that allocates little from a site,
 * as most do from most sites, pays nothing for it. A group counts its
 * objects from the allocation that made its caller ripe. */
static CH_NOINLINE bool caller_ripe(uintptr_t ret) {
  bool r = true;   /* a full table: build the chain, as without counting */
  ch_lock(&lock);
  struct site *s = site_of(ret);
  if (s) {
    if (s->allocs < ch_opt.dpa_min_objects) s->allocs++;
    r = s->allocs >= ch_opt.dpa_min_objects;
  }
  ch_unlock(&lock);
  if (!r) atomic_fetch_add_explicit(&ch_dpa_counts.unripe, 1, memory_order_relaxed);
  return r;
}

/* The group reached the threshold: its pool, shared with a group it is
 * affine to (ssg.c) or new; none when every Cohort group is taken. */
static CH_NOINLINE int promote(unsigned og) {
  struct ch_dpa_og *o = &ch_dpa_ogs[og];
  ch_lock(&lock);
  int p = atomic_load_explicit(&ch_dpa_live[og].pool, memory_order_relaxed);
  if (p == CH_DPA_COUNTING) {
    bool mixed = atomic_load_explicit(&o->mixed, memory_order_relaxed);
    p = mixed ? -1 : ch_ssg_pool_for(og, o->size);
    if (p < 0) p = ch_online_pool_new("dpa", mixed ? 0 : o->size);   /* 0: mixed sizes, never merged */
    if (p < 0) {
      p = CH_DPA_NO_POOL;
      atomic_fetch_add(&ch_dpa_counts.pools_refused, 1);
    } else if (ch_dpa_pool_demoted((unsigned)p)) {
      p = churn_pool_locked();   /* affine to a pool of churn: churn too */
    }
    atomic_store_explicit(&ch_dpa_live[og].pool, p, memory_order_release);
  }
  ch_unlock(&lock);
  return p;
}

/* One more object of a group still counting towards its pool. */
static CH_NOINLINE int og_count(unsigned og, size_t size) {
  struct ch_dpa_og *o = &ch_dpa_ogs[og];
  if (o->size != size && !atomic_load_explicit(&o->mixed, memory_order_relaxed))
    atomic_store_explicit(&o->mixed, true, memory_order_relaxed);
  unsigned n = atomic_fetch_add_explicit(&o->objects, 1, memory_order_relaxed) + 1;
  if (n < ch_opt.dpa_min_objects) return -1;
  int p = promote(og);
  return p >= 0 ? p : -1;
}

/* --------------------------------------------------------------- sampling */

/* Every sample_gap-th allocation of a thread is sampled for the shape graph;
 * the gap doubles every SAMPLE_STEP samples up to SAMPLE_GAP_MAX, so the
 * graph is learnt early and costs next to nothing later. */
#define SAMPLE_GAP_MIN 16
#define SAMPLE_GAP_MAX 65536
#define SAMPLE_STEP 512
static _Atomic int32_t sample_gap = SAMPLE_GAP_MIN;
#define sample_in (ch_thread.dpa_sample_in)
static CH_TLS int sampled_group;
static CH_TLS unsigned sampled_og;

static CH_NOINLINE int sample_due(unsigned og, int g) {
  int32_t gap = atomic_load_explicit(&sample_gap, memory_order_relaxed);
  sample_in = gap;
  unsigned long n = atomic_fetch_add_explicit(&ch_dpa_counts.samples, 1, memory_order_relaxed) + 1;
  if (n % SAMPLE_STEP == 0 && gap < SAMPLE_GAP_MAX) atomic_store_explicit(&sample_gap, gap * 2, memory_order_relaxed);
  sampled_group = g;
  sampled_og = og;
  return CH_IDENTIFY_SAMPLE;
}

int ch_dpa_unsample(void) { return sampled_group; }

void *ch_dpa_malloc_sampled(size_t size) {
  int g = sampled_group;
  void *p = g >= 0 ? ch_group_malloc_or_next((unsigned)g, size) : ch_next.malloc(size);
  if (p && !ch_in_runtime) {
    if (g >= 0 && ch_owns(p)) churn_watch((unsigned)g, p, size);
    ch_in_runtime++;
    ch_ssg_note(p, sampled_og, size);
    ch_in_runtime--;
  }
  return p;
}

/* ---------------------------------------------------------- identification */

/* The short path (DPA's Short PCC table): the entry's prefix was extended,
 * and each extended prefix whose frames all have fixed sizes says where the
 * next return address sits relative to the entry point's frame. Reading it
 * there and probing the longer prefix, frame after frame, finds the group
 * with no unwinding. Each read is safe: the prefix matched so far fixes the
 * frames it spans, and the next word lies just beyond them. */
static inline uint32_t descend(uint32_t kids, uintptr_t pc, const uintptr_t *fp) {
  for (;;) {   /* a trie: no cycle */
    if (CH_UNLIKELY(!kids)) return V_EMPTY;
    const struct ch_trie_node *n = ch_trie_in(kids, pc);
    if (CH_UNLIKELY(!n)) return V_EMPTY;
    uint32_t v = atomic_load_explicit(&n->val, memory_order_relaxed);
    if (KIND(v) != V_EXTEND || CH_UNLIKELY(!(v >> 8))) return v;
    pc = *(const uintptr_t *)((const char *)fp + (v >> 8));
    kids = atomic_load_explicit(&n->kids, memory_order_acquire);
  }
}

static inline uint32_t short_chain(const uintptr_t *fp) {
  return descend(atomic_load_explicit(&ch_trie_root.kids, memory_order_acquire), fp[1], fp);
}

static inline uintptr_t stack_at(const uintptr_t *fp, int32_t off) {
  return *(const uintptr_t *)((const char *)fp + off);
}
/* Does the stack hold chain c? Each read is safe as the short chain's are. */
static inline bool chain_here(const struct hint_chain *c, const uintptr_t *fp) {
  _Static_assert(HINT_FRAMES == 5, "chain_here checks up to five frames");
  unsigned n = c->n;   /* unrolled, inner frames first: each read is safe once those match */
  if (fp[1] != c->pc[0]) return false;
  if (n > 1 && stack_at(fp, c->off[0]) != c->pc[1]) return false;
  if (n > 2 && stack_at(fp, c->off[1]) != c->pc[2]) return false;
  if (n > 3 && stack_at(fp, c->off[2]) != c->pc[3]) return false;
  if (n > 4 && stack_at(fp, c->off[3]) != c->pc[4]) return false;
  return true;
}

/* Prefix hint i's way w's node, looked up again from the root (its block
 * may have been copied since it was found). */
static CH_NOINLINE void prefix_refresh(unsigned i, unsigned w) {
  ch_lock(&lock);
  const struct hint_chain *c = &prefix_hints[i].way[w];
  const struct ch_trie_node *n = ch_trie_find(c->pc, c->n);
  if (n) atomic_store_explicit(&prefix_nodes[i][w], n, memory_order_release);
  ch_unlock(&lock);
}

/* The chain's value from prefix hint i's way w, whose prefix the stack holds:
 * V_EMPTY if the trie has not (in the copy at hand) the rest. */
static inline uint32_t prefix_rest(unsigned i, unsigned w, const uintptr_t *fp) {
  const struct ch_trie_node *n = atomic_load_explicit(&prefix_nodes[i][w], memory_order_acquire);
  uint32_t v = atomic_load_explicit(&n->val, memory_order_relaxed);   /* extended, at a fixed place */
  v = descend(atomic_load_explicit(&n->kids, memory_order_acquire),
              *(const uintptr_t *)((const char *)fp + (v >> 8)), fp);
  if (CH_UNLIKELY(KIND(v) == V_EMPTY) && !ch_in_runtime) prefix_refresh(i, w);
  return v;
}

/* The ways after the first, out of line: most calls end one prefix. A way
 * not taken (n == 0) ends the search: ways are taken in order. */
static CH_NOINLINE uint32_t prefix_more(unsigned i, const uintptr_t *fp) {
  for (unsigned w = 1; w < PREFIX_WAYS; w++) {
    const struct hint_chain *c = &prefix_hints[i].way[w];
    if (!__atomic_load_n(&c->n, __ATOMIC_ACQUIRE)) break;
    if (chain_here(c, fp)) return prefix_rest(i, w, fp);
  }
  return V_EMPTY;
}

/* The chain's value from prefix hint i: V_EMPTY when the stack holds none
 * of its prefixes, or the trie has not the rest. Its first way is taken
 * before its call is patched. */
static inline uint32_t prefix_chain(unsigned i, const uintptr_t *fp) {
  if (CH_LIKELY(chain_here(&prefix_hints[i].way[0], fp))) return prefix_rest(i, 0, fp);
  return __atomic_load_n(&prefix_hints[i].way[1].n, __ATOMIC_RELAXED) ? prefix_more(i, fp) : V_EMPTY;
}

/* Group og's outermost call could not name it: name the prefix of its chain
 * one frame shorter at that prefix's outermost call, if the prefix spans two
 * frames or more and lies at fixed places. A call is patched once: the
 * prefixes it ends later join its hint while it has ways left. */
static void prefix_offer(const struct hint_chain *c) {
  unsigned k = c->n - 1u;
  if (c->n < 3) return;
  uintptr_t ret = c->pc[k - 1];
  ch_lock(&lock);
  unsigned i = 0, w = 0;
  while (i < nprefix && prefix_hints[i].way[0].pc[prefix_hints[i].way[0].n - 1] != ret) i++;
  bool fresh = i == nprefix;
  if (!fresh) {   /* this prefix already, or the first way not taken */
    for (; w < PREFIX_WAYS && prefix_hints[i].way[w].n; w++) {
      const struct hint_chain *p = &prefix_hints[i].way[w];
      bool same = p->n == k;
      for (unsigned j = 0; j < k && same; j++) same = p->pc[j] == c->pc[j];
      if (same) w = PREFIX_WAYS;
    }
  }
  const struct ch_trie_node *node = w < PREFIX_WAYS && i < CH_DPA_PREFIX_HINTS ? ch_trie_find(c->pc, k) : NULL;
  uint32_t v = node ? atomic_load_explicit(&node->val, memory_order_relaxed) : 0;
  if (node && KIND(v) == V_EXTEND && (v >> 8)) {
    struct hint_chain *p = &prefix_hints[i].way[w];
    for (unsigned j = 0; j < k; j++) p->pc[j] = c->pc[j];
    for (unsigned j = 1; j < k; j++) p->off[j - 1] = c->off[j - 1];
    p->off[k - 1] = (int32_t)(v >> 8);   /* k < HINT_FRAMES */
    atomic_store_explicit(&prefix_nodes[i][w], node, memory_order_relaxed);
    __atomic_store_n(&p->n, (uint8_t)k, __ATOMIC_RELEASE);   /* readers take the way from here */
    if (fresh) nprefix++;
  } else {
    fresh = false;
  }
  ch_unlock(&lock);
  if (fresh && ch_hint_patch(ret, CH_DPA_MAX_OGS + i) == CH_HINT_PATCHED)
    atomic_fetch_add_explicit(&ch_dpa_counts.prefix_hints, 1, memory_order_relaxed);
}

/* A decided group whose hint is not patched yet: patch its chain's
 * outermost call to name it; once (again later only if another thread was
 * writing code). A call that ends the chains of several groups names the
 * first of them decided, and the others keep the probes: the hint names
 * one group, and a check that fails costs the probes as well. */
static CH_NOINLINE void hint_offer(unsigned og) {
  struct ch_dpa_live *o = &ch_dpa_live[og];
  uint8_t expect = CH_HINT_UNTRIED;
  if (!atomic_compare_exchange_strong(&o->hint, &expect, CH_HINT_BUSY)) return;
  struct hint_chain *c = &hint_chains[og];
  ch_lock(&lock);   /* a demotion sets it under the lock too */
  int pool = atomic_load_explicit(&o->pool, memory_order_relaxed);
  __atomic_store_n(&c->pool, pool >= 0 ? pool : -1, __ATOMIC_RELAXED);
  ch_unlock(&lock);
  ch_in_runtime++;   /* registering the stubs' unwind table may allocate */
  int r = ch_hint_patch(c->pc[c->n - 1], og);
  /* Offering the prefix of a group that its call does name too cost calc
   * 150 3% more instructions (5.182 G against 5.014 G): the group is found
   * by the group's hint, and the prefix's stub runs for nothing. */
  if (r == CH_HINT_LEFT) prefix_offer(c);
  ch_in_runtime--;
  if (r != CH_HINT_RETRY)
    atomic_fetch_add_explicit(r == CH_HINT_PATCHED ? &ch_dpa_counts.hints_patched : &ch_dpa_counts.hints_left, 1,
                              memory_order_relaxed);
  atomic_store_explicit(&o->hint, r == CH_HINT_RETRY ? CH_HINT_UNTRIED : r, memory_order_release);
}

/* A chain the short path did not find: walked, if its caller is ripe. */
static CH_NOINLINE uint32_t walk(size_t size, const uintptr_t *fp) {
  if (ch_in_runtime) return V_NONE;
  ch_in_runtime++;   /* the walk may look up modules, which may allocate */
  uint32_t v = caller_ripe(fp[1]) ? chain_group(fp, size) : V_NONE;
  ch_in_runtime--;
  return v;
}

/* A check of hint c, a group's (its pool fixed) or a prefix's (learnt: the
 * pool its last allocation went to): an allocation made while it was set
 * went to pool g. Threads may race on the count and on a prefix's pool,
 * which only delays or hastens trust. */
static CH_NOINLINE void hint_checked(struct hint_chain *c, int g, bool learn) {
  bool periodic = check_in < 0;   /* the lane's check, due */
  if (periodic) check_in = CHECK_GAP;
  uint8_t t = __atomic_load_n(&c->trust, __ATOMIC_RELAXED);
  if (g < 0 || g != __atomic_load_n(&c->pool, __ATOMIC_RELAXED)) {
    if (learn) __atomic_store_n(&c->pool, g, __ATOMIC_RELAXED);
    __atomic_store_n(&c->held, 0, __ATOMIC_RELAXED);
    if (t == TRUST_YES && __atomic_exchange_n(&c->trust, TRUST_CHECKING, __ATOMIC_RELAXED) == TRUST_YES)
      atomic_fetch_add_explicit(&ch_dpa_counts.hints_distrusted, 1, memory_order_relaxed);
    /* An untrusted hint's word is 0, unless a thread that trusted it wrote
     * its word after another ended the trust: the lane then takes the word,
     * and its next check, due within CHECK_GAP, mends it. */
    if (t == TRUST_YES || periodic) publish(c);
    return;
  }
  uint8_t held = __atomic_load_n(&c->held, __ATOMIC_RELAXED);
  if (t != TRUST_CHECKING) { publish(c); return; }
  if (held + 1 < TRUST_AFTER) { __atomic_store_n(&c->held, held + 1, __ATOMIC_RELAXED); return; }
  uint8_t expect = TRUST_CHECKING;
  if (__atomic_compare_exchange_n(&c->trust, &expect, TRUST_YES, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    __atomic_store_n(&c->held, 0, __ATOMIC_RELAXED);
    atomic_fetch_add_explicit(&ch_dpa_counts.hints_trusted, 1, memory_order_relaxed);
    publish(c);
  }
}
static inline void hint_check(struct hint_chain *c, int g, bool learn) {
  if (CH_UNLIKELY(g != __atomic_load_n(&c->pool, __ATOMIC_RELAXED)) || CH_UNLIKELY(check_in < 0)) {
    if (check_in >= 0 && __atomic_load_n(&c->trust, __ATOMIC_RELAXED) == TRUST_CHECKING) {
      /* An untrusted hint that did not hold, inline (a prefix's pool learnt
       * anew): hint_checked's first case. A prefix whose allocations go to
       * two pools in turn comes here at every turn. */
      if (learn) __atomic_store_n(&c->pool, g, __ATOMIC_RELAXED);
      __atomic_store_n(&c->held, 0, __ATOMIC_RELAXED);
      return;
    }
    hint_checked(c, g, learn);
  } else if (__atomic_load_n(&c->trust, __ATOMIC_RELAXED) == TRUST_CHECKING) {   /* held once more, inline: most checks are of this kind */
    uint8_t held = __atomic_load_n(&c->held, __ATOMIC_RELAXED);
    if (CH_UNLIKELY(held + 1 >= TRUST_AFTER)) hint_checked(c, g, learn);
    else __atomic_store_n(&c->held, held + 1, __ATOMIC_RELAXED);
  }
}

/* Group og was found from prefix hint i: memoised if its chain is the
 * prefix's first way and one frame more, at fixed places. */
static inline void memo_offer(unsigned i, unsigned og) {
  const struct hint_chain *c = &hint_chains[og], *p = &prefix_hints[i].way[0];
  unsigned k = __atomic_load_n(&p->n, __ATOMIC_ACQUIRE);
  if (c->n != k + 1 || c->off[k - 1] != p->off[k - 1]) return;
  for (unsigned j = 0; j < k; j++)
    if (c->pc[j] != p->pc[j]) return;
  uintptr_t pc = c->pc[k];
  if (pc > MEMO_PC) return;   /* a word holds 48 bits of address */
  uint64_t e = pc | (uint64_t)(og + 1) << 48;
  for (unsigned j = 0, h = memo_hash(pc); j < PREFIX_MEMO; j++) {
    _Atomic uint64_t *s = &prefix_memo[i][(h + j) % PREFIX_MEMO];
    uint64_t was = 0;
    if (atomic_compare_exchange_strong_explicit(s, &was, e, memory_order_relaxed, memory_order_relaxed)) {
      atomic_fetch_add_explicit(&ch_dpa_counts.prefix_memos, 1, memory_order_relaxed);
      return;
    }
    if ((was & MEMO_PC) == pc) return;   /* there already (one chain, one group) */
  }
}

/* The lane's prefix hint i, not trusted (and a group's hint, if set, not
 * trusted either): the pool of the group its memo names for the stack's
 * next return address; -1: the framed path decides. */
static inline __attribute__((always_inline)) int memo_lane(unsigned i, const uintptr_t *fp) {
  const struct hint_chain *p = &prefix_hints[i].way[0];
  if (!chain_here(p, fp)) return -1;
  uint64_t e = memo_find(i, stack_at(fp, p->off[p->n - 1]));
  if (!e) return -1;
  const struct ch_dpa_live *o = &ch_dpa_live[(e >> 48) - 1];
  int g = atomic_load_explicit(&o->pool, memory_order_acquire);
  if (g < 0 || atomic_load_explicit(&o->hint, memory_order_relaxed) == CH_HINT_UNTRIED) return -1;
  return g;
}

/* malloc's and operator new's lanes for a hinted request (a hint of the
 * thread's is set), which keep no frame. ch_dpa_trusted: the pool of its
 * group's hint if trusted, else of its prefix's. ch_dpa_memo, when neither
 * is: the pool of the group that the prefix hint's memo finds on the stack
 * at fp (where the entry point's frame would be: CH_LANE_FRAME), the hints
 * checked as the framed path checks them. The hints are taken, *how is the
 * path; -1: the next lane or the framed path decides, the hints left to it
 * (none holds, no pool, a request DPA does not pool, a check or a sample
 * due). */
int ch_dpa_memo(size_t size, const uintptr_t *fp, enum ch_path *how) {
  uint32_t h = ch_dpa_hint, ph = ch_dpa_prefix_hint;
  if (!ph || size > ch_max_size || ch_in_runtime || sample_in <= 0) return -1;
  int g = memo_lane(ph - 1, fp);
  if (g < 0) return -1;
  *how = CH_PATH_DPA_PREFIX;
  sample_in--;
  ch_dpa_hint = 0;
  ch_dpa_prefix_hint = 0;
  if (h) hint_check(&hint_chains[h - 1], g, false);
  hint_check(&prefix_hints[ph - 1].way[0], g, true);
  return g;
}
int ch_dpa_trusted(size_t size, enum ch_path *how) {
  uint32_t h = ch_dpa_hint, ph = ch_dpa_prefix_hint;
  uint32_t w = h ? atomic_load_explicit(&trust_words[h - 1], memory_order_relaxed) : 0;
  *how = CH_PATH_DPA_HINTED;
  if (!w) {
    if (!ph) return -1;
    *how = CH_PATH_DPA_PREFIX;
    w = atomic_load_explicit(&trust_words[CH_DPA_MAX_OGS + ph - 1], memory_order_relaxed);
    if (!w) return -1;
  }
  if (size > ch_max_size || ch_in_runtime) return -1;
  int pool = (int)w - 1;
  if (pool < 0) __builtin_unreachable();   /* a word is a pool + 1, or 0 */
  if (CH_LIKELY(--check_in >= 0) && CH_LIKELY(sample_in > 0)) {
    sample_in--;
    ch_dpa_hint = 0;
    ch_dpa_prefix_hint = 0;
    return pool;
  }
  return -1;
}

/* A group whose hint is patched was found without it MISSED_OFFER times:
 * the hint was gone by the time the allocation came (the hinted call
 * allocated before, or its callee called it again and returned, as a
 * recursive builder does). The call one frame in may tell the chain's
 * prefix at the time it is needed: offer it. */
#define MISSED_OFFER 64
static CH_NOINLINE void hint_missed(unsigned og) {
  struct ch_dpa_live *o = &ch_dpa_live[og];
  if (atomic_fetch_add_explicit(&o->missed, 1, memory_order_relaxed) + 1 != MISSED_OFFER) return;
  ch_in_runtime++;   /* registering the stubs' unwind table may allocate */
  prefix_offer(&hint_chains[og]);
  ch_in_runtime--;
}

static inline __attribute__((always_inline)) int identify(size_t size, const uintptr_t *fp, enum ch_path *how) {
  uint32_t h = ch_dpa_hint, ph = ch_dpa_prefix_hint, v = V_EMPTY;
  struct hint_chain *gc = NULL;   /* the hints set, checked by the pool the allocation goes to */
  struct hint_chain *pc = ph ? &prefix_hints[ph - 1].way[0] : NULL;
  unsigned og;
  int g;
  if (h) {
    ch_dpa_hint = 0;
    gc = &hint_chains[h - 1];
    if (CH_LIKELY(chain_here(gc, fp))) {
      ch_dpa_prefix_hint = 0;
      *how = CH_PATH_DPA_HINTED;
      og = h - 1;
      g = gc->pool;
      goto found;
    }
  }
  if (ph) {
    ch_dpa_prefix_hint = 0;
    v = prefix_chain(ph - 1, fp);
    if (KIND(v) == V_OG) {
      *how = CH_PATH_DPA_PREFIX;
      memo_offer(ph - 1, OG_OF(v));
    }
  }
  if (KIND(v) == V_EMPTY) v = short_chain(fp);
  if (CH_UNLIKELY(KIND(v) != V_OG) && KIND(v = walk(size, fp)) != V_OG) {
    if (gc) hint_checked(gc, -1, false);
    if (pc) hint_checked(pc, -1, true);
    return -1;
  }
  og = OG_OF(v);
  struct ch_dpa_live *o = &ch_dpa_live[og];
  g = atomic_load_explicit(&o->pool, memory_order_acquire);
  if (CH_UNLIKELY(g < 0)) g = g == CH_DPA_COUNTING ? og_count(og, size) : -1;
  uint8_t hint = atomic_load_explicit(&o->hint, memory_order_relaxed);
  if (CH_UNLIKELY(hint == CH_HINT_UNTRIED) && atomic_load_explicit(&o->pool, memory_order_acquire) != CH_DPA_COUNTING)
    hint_offer(og);
  else if (CH_UNLIKELY(hint == CH_HINT_PATCHED) && *how == CH_PATH_DPA &&
           atomic_load_explicit(&o->missed, memory_order_relaxed) < MISSED_OFFER)
    hint_missed(og);   /* counted up to the offer, and no further */
found:
  if (CH_UNLIKELY(gc != NULL)) hint_check(gc, g, false);
  if (CH_UNLIKELY(pc != NULL)) hint_check(pc, g, true);
  if (CH_UNLIKELY(--sample_in < 0)) return sample_due(og, g);
  return g;
}

int ch_dpa_identify(size_t size, const uintptr_t *fp, enum ch_path *how) { return identify(size, fp, how); }

/* DPA's allocation by malloc (the chain lane): only the checks DPA needs,
 * the counts, and the pool or the next allocator. The rare cases out of
 * line; path CH_PATH_COUNT: counted already, the counts are due. */
static CH_NOINLINE void *dpa_malloc_slow(size_t size, int g, enum ch_path path) {
  if (path == CH_PATH_COUNT || !ch_count_path(path)) ch_count_flush_due();
  if (g >= 0) return ch_group_malloc_or_next((unsigned)g, size);
  return g == CH_IDENTIFY_SAMPLE ? ch_dpa_malloc_sampled(size) : ch_next.malloc(size);
}
__attribute__((flatten)) void *ch_dpa_malloc(size_t size, const uintptr_t *fp) {
  if (CH_UNLIKELY(size > ch_max_size || ch_in_runtime))
    return dpa_malloc_slow(size, -1, size > ch_max_size ? CH_PATH_LARGE : CH_PATH_REENTRANT);
  enum ch_path how = CH_PATH_DPA;
  int g = identify(size, fp, &how);
  if (CH_UNLIKELY(g == CH_IDENTIFY_SAMPLE)) return dpa_malloc_slow(size, g, ch_dpa_path(g, how));
  enum ch_path path = g >= 0 ? how : CH_PATH_DPA_BELOW;
  if (CH_UNLIKELY(!ch_count_path(path))) return dpa_malloc_slow(size, g, CH_PATH_COUNT);
  return g >= 0 ? ch_group_malloc_or_next((unsigned)g, size) : ch_next.malloc(size);
}

/* After a fork the child has one thread: a lock held by another is free. */
void ch_dpa_atfork_child(void) { ch_lock_init(&lock); ch_ssg_atfork_child(); }
