/* Cohort runtime: DPA's storage shape graph, learnt online (docs/policies.md).
 *
 * Nodes are DPA's object groups; an edge (group A, field offset, pool P)
 * says that an object of A was seen holding, at that offset, a pointer into
 * one of P's chunks (the chunk table answers this in O(1)). Edges come from a
 * sampled scan of recently allocated objects: each sampled object waits in
 * a small per-thread ring and is read when it leaves it, some allocations
 * later, once the program has filled it in. It is read through
 * process_vm_readv, so an object freed (and its memory returned) meanwhile
 * costs an error code, not a fault.
 *
 * Types are unknown in a binary; as DPA does, one object size stands for
 * one type. Two pools of the same size are merged (new objects of both go to
 * the older one) when
 *   type I:  an object of one points into the other (a list or tree built
 *            from two call sites, or a recursive builder's two branches);
 *   type II: one group points into both from the same field.
 * A group still counting towards its pool joins, on reaching it, a pool of
 * its size that its objects point into (type I). */
#define _GNU_SOURCE
#include "dpa.h"

#include <string.h>
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#define EDGE_BITS 13
#define EDGE_SLOTS (1u << EDGE_BITS)
#define SCAN_MAX 128            /* bytes of an object scanned (DPA pools objects up to 128) */
#define RING 4

/* An edge packed as og << 32 | offset << 8 | pool, + 1 so that 0 is empty. */
static uint64_t edges[EDGE_SLOTS];
static unsigned nedges;
static ch_lock_t lock;
static bool readv_broken;
static unsigned alias[CH_MAX_GROUPS];   /* merged pools: the survivor, or itself + 1 (0: unset) */
struct ch_ssg_counts ch_ssg_counts;
/* DPA's tables, as dpa.c hands them over: the graph reads and re-points
 * the object groups through these, and names nothing of dpa.c's. */
static struct ch_ssg_owner owner;
void ch_ssg_init(const struct ch_ssg_owner *o) { owner = *o; }

struct pending { void *p; unsigned og; uint32_t size; };
static CH_TLS struct pending ring[RING];
static CH_TLS unsigned ring_at;

static unsigned resolve(unsigned pool) {
  while (alias[pool] && alias[pool] - 1 != pool) pool = alias[pool] - 1;
  return pool;
}

static inline uint64_t pack(unsigned og, unsigned off, unsigned pool) {
  return ((uint64_t)og << 32 | (uint64_t)off << 8 | pool) + 1;
}
static inline unsigned edge_og(uint64_t e) { return (unsigned)((e - 1) >> 32); }
static inline unsigned edge_off(uint64_t e) { return (unsigned)(((e - 1) >> 8) & 0xffffff); }
static inline unsigned edge_pool(uint64_t e) { return (unsigned)((e - 1) & 0xff); }

/* false: already known (or no room). */
static bool edge_add(uint64_t e) {
  size_t h = (size_t)((e * 0x9e3779b97f4a7c15ull) >> (64 - EDGE_BITS));
  for (unsigned i = 0; i < EDGE_SLOTS; i++, h = (h + 1) & (EDGE_SLOTS - 1)) {
    if (edges[h] == e) return false;
    if (!edges[h]) {
      if (nedges >= EDGE_SLOTS / 2) return false;
      edges[h] = e;
      nedges++;
      atomic_fetch_add_explicit(&ch_ssg_counts.edges, 1, memory_order_relaxed);
      return true;
    }
  }
  return false;
}

/* Pool q's new objects go to p from now on. */
static void merge(unsigned p, unsigned q, int kind) {
  p = resolve(p);
  q = resolve(q);
  if (p == q || owner.demoted(p) || owner.demoted(q)) return;
  if (q < p) { unsigned t = p; p = q; q = t; }   /* the older pool stays */
  alias[q] = p + 1;
  for (unsigned i = 0, n = owner.groups(); i < n; i++) {
    int g = owner.pool_of(i);
    if (g >= 0 && resolve((unsigned)g) == p && (unsigned)g != p) owner.set_pool(i, (int)p);
  }
  atomic_fetch_add_explicit(&ch_ssg_counts.merges[kind], 1, memory_order_relaxed);
}

static bool same_size(unsigned p, unsigned q) {
  return ch_online_pool_size[p] && ch_online_pool_size[p] == ch_online_pool_size[q];
}

/* A new edge (og, off, pool): the merges it calls for. Under the lock. */
static void edge_new(unsigned og, unsigned off, unsigned pool) {
  pool = resolve(pool);
  int a = owner.pool_of(og);
  if (a >= 0 && resolve((unsigned)a) != pool && same_size(resolve((unsigned)a), pool)) {
    merge((unsigned)a, pool, 0);   /* type I: linked to each other */
    return;
  }
  /* Type II: the same field of og points into another pool of this size. */
  for (unsigned h = 0; h < EDGE_SLOTS; h++) {
    uint64_t e = edges[h];
    if (!e || edge_og(e) != og || edge_off(e) != off) continue;
    unsigned q = resolve(edge_pool(e));
    if (q != pool && same_size(q, pool)) { merge(q, pool, 1); return; }
  }
}

/* Read an object that may have been freed since: false if its memory is gone. */
static bool read_object(const void *p, void *buf, size_t n) {
  if (readv_broken) return false;
  struct iovec local = {buf, n}, remote = {(void *)p, n};
  ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (got == (ssize_t)n) return true;
  if (got < 0 && errno != EFAULT) readv_broken = true;   /* not allowed here (seccomp, ptrace rules) */
  return false;
}

static void scan(const struct pending *s) {
  uint64_t words[SCAN_MAX / 8];
  size_t n = s->size < SCAN_MAX ? s->size & ~(size_t)7 : SCAN_MAX;
  if (!n || !read_object(s->p, words, n)) return;
  unsigned npools = ch_online_pools();
  for (size_t i = 0; i < n / 8; i++) {
    const void *w = (const void *)words[i];
    struct ch_chunk *c = ch_chunk_lookup(w);   /* NULL outside the region too */
    if (!c) continue;
    unsigned g = c->group;
    if (g >= npools) continue;
    ch_lock(&lock);
    if (edge_add(pack(s->og, (unsigned)(i * 8), g))) edge_new(s->og, (unsigned)(i * 8), g);
    ch_unlock(&lock);
  }
}

void ch_ssg_note(void *p, unsigned og, size_t size) {
  struct pending *s = &ring[ring_at];
  ring_at = (ring_at + 1) % RING;
  if (s->p) scan(s);
  s->p = p;
  s->og = og;
  s->size = (uint32_t)size;
}

/* Object group og (of objects of size bytes) reached its threshold: a pool
 * of its size its objects were seen pointing into, or -1. Under the DPA lock. */
int ch_ssg_pool_for(unsigned og, size_t size) {
  int found = -1;
  ch_lock(&lock);
  for (unsigned h = 0; h < EDGE_SLOTS && found < 0; h++) {
    uint64_t e = edges[h];
    if (!e || edge_og(e) != og) continue;
    unsigned q = resolve(edge_pool(e));
    if (ch_online_pool_size[q] == size) found = (int)q;
  }
  ch_unlock(&lock);
  if (found >= 0) atomic_fetch_add_explicit(&ch_ssg_counts.merges[0], 1, memory_order_relaxed);
  return found;
}

void ch_ssg_atfork_child(void) { ch_lock_init(&lock); }
