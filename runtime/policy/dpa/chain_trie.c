/* Cohort runtime: DPA's compound table (Wang, Wu & Yew, CGO 2010, section
 * 4) as a trie of call-chain prefixes.
 *
 * A node is one return address of a chain, below the prefix its parent
 * ends; its value (opaque here, dpa.c's) says whether to go one frame
 * further and where, or which object group the prefix is. A node's children
 * are one open-addressed block, a power of two of 16-byte slots at most
 * half full, so that an identification step is a multiply, a shift and,
 * nearly always, one probe of a line it shares with its siblings. The earlier flat hash of every
 * prefix scattered a chain's prefixes over a 512 KiB table, a line each:
 * calc under dpa missed in D1 on 1.4 M of its probes and drove its own
 * interpreter's misses up by 2 M (docs/policies.md).
 *
 * Readers take no lock. Writers hold dpa.c's: a slot's value and children
 * are written before its return address is published, and a block that
 * fills beyond half is copied whole into one twice its size
 * before the parent's index to it changes. The old block is left as it was
 * for readers still in it; they find the entries it held, and miss only
 * the one being added, which their slow path adds again under the lock.
 * Blocks come from one reserved arena and are never freed: the copies cost
 * at most as much again as the live blocks. */
#define _GNU_SOURCE
#include "dpa.h"

#include <string.h>

#define ARENA_SLOTS (1u << 22)   /* 64 MiB reserved, touched as used; byte offsets fit kids */
#define FIRST_LG 2               /* a new block: 4 slots, one line */

struct ch_trie_node *ch_trie_arena;
struct ch_trie_node ch_trie_root;
static uint32_t arena_used = 1;   /* slot 0 is never a block: kids 0 means none */

bool ch_trie_init(void) {
  ch_trie_arena = ch_os_reserve(sizeof *ch_trie_arena * ARENA_SLOTS);
  return ch_trie_arena != NULL;
}

/* A zeroed block of 2^lg slots, line-aligned; 0 when the arena is spent. */
static uint32_t block_new(unsigned lg) {
  uint32_t n = 1u << lg;
  uint32_t at = (arena_used + 3) & ~3u;   /* FIRST_LG: a line at least */
  if (at > ARENA_SLOTS - n) return 0;
  arena_used = at + n;
  return at;   /* fresh arena memory reads as zero */
}

static inline uint32_t kids_of(uint32_t at, unsigned lg) { return at * (uint32_t)sizeof *ch_trie_arena | (64 - lg); }
static inline struct ch_trie_node *block_of(uint32_t kids) {
  return (struct ch_trie_node *)((char *)ch_trie_arena + (kids & ~63u));
}

/* Past the first slot: the probe goes on to the next ones. */
const struct ch_trie_node *ch_trie_probe(uint32_t kids, uintptr_t pc) {
  const struct ch_trie_node *b = block_of(kids);
  size_t mask = ((size_t)1 << (64 - (kids & 63))) - 1;
  for (size_t h = ch_trie_hash(pc, kids & 63);; h = (h + 1) & mask) {   /* a block is never full */
    uintptr_t k = atomic_load_explicit(&b[h].pc, memory_order_acquire);
    if (k == pc) return &b[h];
    if (!k) return NULL;
  }
}

/* Into block b of 2^lg slots, which has room: the slot for pc. */
static struct ch_trie_node *slot_for(struct ch_trie_node *b, unsigned lg, uintptr_t pc) {
  size_t mask = ((size_t)1 << lg) - 1;
  for (size_t h = ch_trie_hash(pc, 64 - lg);; h = (h + 1) & mask) {
    uintptr_t k = atomic_load_explicit(&b[h].pc, memory_order_relaxed);
    if (!k || k == pc) return &b[h];
  }
}

struct ch_trie_node *ch_trie_add(struct ch_trie_node *parent, uintptr_t pc, uint32_t val) {
  uint32_t kids = atomic_load_explicit(&parent->kids, memory_order_relaxed);
  unsigned lg = 64 - (kids & 63), used = 0;
  struct ch_trie_node *b = kids ? block_of(kids) : NULL, *s = NULL;
  if (b) {
    s = slot_for(b, lg, pc);
    if (atomic_load_explicit(&s->pc, memory_order_relaxed) == pc) return s;
    for (size_t i = 0; i < ((size_t)1 << lg); i++) used += atomic_load_explicit(&b[i].pc, memory_order_relaxed) != 0;
  }
  uint32_t grown = 0;   /* the parent's new kids, once the child is in */
  if (!b || (used + 1) * 2 > (1u << lg)) {
    /* A block of its own for the first child; twice the size once half is
     * taken, the entries copied before it is published. */
    unsigned nlg = b ? lg + 1 : FIRST_LG;
    if (nlg > 22) return NULL;   /* beyond the arena */
    uint32_t at = block_new(nlg);
    if (!at) return NULL;
    struct ch_trie_node *nb = &ch_trie_arena[at];
    for (size_t i = 0; b && i < ((size_t)1 << lg); i++) {
      uintptr_t k = atomic_load_explicit(&b[i].pc, memory_order_relaxed);
      if (!k) continue;
      struct ch_trie_node *d = slot_for(nb, nlg, k);
      atomic_store_explicit(&d->val, atomic_load_explicit(&b[i].val, memory_order_relaxed), memory_order_relaxed);
      atomic_store_explicit(&d->kids, atomic_load_explicit(&b[i].kids, memory_order_relaxed), memory_order_relaxed);
      atomic_store_explicit(&d->pc, k, memory_order_relaxed);
    }
    grown = kids_of(at, nlg);
    s = slot_for(nb, nlg, pc);
  }
  atomic_store_explicit(&s->val, val, memory_order_relaxed);
  atomic_store_explicit(&s->pc, pc, memory_order_release);
  if (grown) atomic_store_explicit(&parent->kids, grown, memory_order_release);
  return s;
}

struct ch_trie_node *ch_trie_find(const uintptr_t *pcs, unsigned n) {
  const struct ch_trie_node *at = &ch_trie_root;
  for (unsigned k = 0; k < n && at; k++) at = ch_trie_child(at, pcs[k]);
  return (struct ch_trie_node *)at;
}
