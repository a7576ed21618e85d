/* Cohort runtime: the DPA policy (dpa.c): call chains, object groups and
 * thresholds, with its compound table (chain_trie.c), its patched hints
 * (hint.c) and its storage shape graph (ssg.c). It calls no other policy.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_DPA_H
#define COHORT_DPA_H

#include "select.h"

/* ch_identify under DPA, when the allocation is sampled for the shape graph:
 * malloc allocates through ch_dpa_malloc_sampled, other entry points take
 * the decided group from ch_dpa_unsample. */
#define CH_IDENTIFY_SAMPLE (-100)

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
void *ch_dpa_malloc(size_t size, const uintptr_t *fp);

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
