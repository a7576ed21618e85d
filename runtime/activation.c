/* Cohort runtime: the activations of patched selector sites, per thread.
 *
 * A patched site's stub (patch.c) records its call on this thread's stack of
 * activations before jumping to the original target: the stack slot of the
 * return address, the return address, and the selector bits and innermost
 * stop group of every activation so far. Nothing runs when the call returns,
 * so an entry stays until something shows that its frame is gone:
 *   - a later call or allocation at or above its slot (the slot was popped:
 *     a return, an exception, a longjmp), or
 *   - its slot no longer holding its return address (another call reused it).
 * Entries are properly nested (each was pushed while the one below it was
 * verified live), so the dead ones are always on top: popping from the top
 * until one is live costs O(1) per allocation, amortised.
 * An entry that would change neither the bits nor the stop group is not
 * pushed at all, so recursion through a site costs no entries.
 * The stubs record only while %rsp lies within this thread's own stack
 * (lo..hi): on another stack (sigaltstack, coroutines) they record nothing,
 * and allocations there walk. Every address an entry holds was the stack
 * pointer of a call on this thread's stack, so reading it cannot fault.
 * A thread is "seeded" at its first allocation, after every change of the
 * patched set, and after its stack of entries overflowed: one ordinary walk
 * records the activations already on its stack. */
#define _GNU_SOURCE
#include "internal.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

static CH_TLS struct ch_act act;

/* The stub template in patch.c hard-codes this layout. */
_Static_assert(offsetof(struct ch_act, top) == 0 && offsetof(struct ch_act, lo) == 8 &&
               offsetof(struct ch_act, hi) == 16 && offsetof(struct ch_act, e) == 56,
               "patch.c's stub template uses these offsets");
_Static_assert(sizeof(struct ch_act_entry) == 32 && offsetof(struct ch_act_entry, ret) == 8 &&
               offsetof(struct ch_act_entry, mask) == 16 && offsetof(struct ch_act_entry, stop) == 24,
               "patch.c's stub template uses these offsets");

intptr_t ch_act_tls_offset(void) {
  uintptr_t tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));
  return (intptr_t)((uintptr_t)&act - tp);
}

/* The entries of a live stack: pop those below slot r (deeper than the
 * allocation: returned), then those whose slot was reused. */
static inline int act_read(struct ch_act *a, uintptr_t r) {
  struct ch_act_entry *e = a->top;
  while (e->sp < r) e--;                  /* e[0].sp is the largest address: it stops here */
  while (e != a->e && *(const uintptr_t *)e->sp != e->ret) e--;
  if (e != a->top) a->top = e;
  int32_t d = e->decision;
  if (CH_UNLIKELY(!d)) {
    d = ch_patch_verdict(e->mask, e->stop) + 4;
    e->decision = d;
  }
  return d - 4;
}

/* The seed walk gives the sites innermost first. */
struct seed { uintptr_t slot[CH_MAX_FRAMES]; int site[CH_MAX_FRAMES]; unsigned n; };
static void seed_frame(void *arg, uintptr_t slot, int site) {
  struct seed *s = arg;
  if (!ch_patch_on[site] || s->n == CH_MAX_FRAMES) return;
  s->slot[s->n] = slot;
  s->site[s->n] = site;
  s->n++;
}

static bool stack_bounds(struct ch_act *a) {
  pthread_attr_t at;
  void *addr;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &at) != 0) return false;
  bool ok = pthread_attr_getstack(&at, &addr, &size) == 0 && size;
  pthread_attr_destroy(&at);
  if (!ok) return false;
  a->stack_lo = (uintptr_t)addr;
  a->stack_hi = (uintptr_t)addr + size;
  return true;
}

/* Not armed for this allocation: a new thread, a new patched set, an
 * overflow, or a stack that is not the thread's own. */
static CH_NOINLINE int act_slow(const uintptr_t *fp) {
  struct ch_act *a = &act;
  uintptr_t r = (uintptr_t)(fp + 1);
  unsigned gen = atomic_load_explicit(&ch_patch_gen, memory_order_acquire);
  if (a->bounds == 0) {
    ch_in_runtime++;   /* pthread_getattr_np may allocate */
    a->bounds = stack_bounds(a) ? 1 : -1;
    ch_in_runtime--;
  }
  if (a->bounds < 0 || r < a->stack_lo || r >= a->stack_hi) return CH_ACT_WALK;
  if (a->gen == gen && a->seed_fail && r <= a->seed_fail) return CH_ACT_WALK;

  /* Seed: disarm, walk, and record what is on the stack, outermost first. */
  a->hi = 0;
  atomic_signal_fence(memory_order_seq_cst);
  struct seed s;
  s.n = 0;
  ch_in_runtime++;   /* the walk may look up modules, which may allocate */
  ch_walk_sites(fp, seed_frame, &s);
  ch_in_runtime--;
  atomic_fetch_add_explicit(&ch_patch_stats.reseeds, 1, memory_order_relaxed);
  struct ch_act_entry *e = a->e;
  e->sp = UINTPTR_MAX;
  e->ret = 0;
  e->mask = 0;
  e->stop = 0;
  e->decision = 0;
  for (unsigned i = s.n; i-- > 0;) {
    int site = s.site[i];
    uint64_t mask = e->mask | ch_patch_bit[site];
    uint32_t stop = ch_patch_stop[site] ? ch_patch_stop[site] : e->stop;
    if (mask == e->mask && stop == e->stop) continue;
    if (e == &a->e[CH_ACT_CAP]) {
      a->top = a->e;
      a->gen = gen;
      a->seed_fail = r;
      atomic_fetch_add_explicit(&ch_patch_stats.overflows, 1, memory_order_relaxed);
      return CH_ACT_WALK;
    }
    e++;
    e->sp = s.slot[i];
    e->ret = *(const uintptr_t *)s.slot[i];
    e->mask = mask;
    e->stop = stop;
    e->decision = 0;
  }
  a->top = e;
  a->gen = gen;
  a->seed_fail = 0;
  a->lo = a->stack_lo;
  atomic_signal_fence(memory_order_seq_cst);
  a->hi = a->stack_hi;   /* armed: the stubs record from now on */
  return act_read(a, r);
}

/* Is the thread armed for an allocation whose return address is at slot:
 * seeded under the current patched set, and on its own stack? */
static inline bool armed(const struct ch_act *a, uintptr_t slot) {
  return a->gen == atomic_load_explicit(&ch_patch_gen, memory_order_relaxed) && slot < a->hi && slot >= a->lo;
}

int ch_act_decide_armed(uintptr_t slot) {
  return CH_LIKELY(armed(&act, slot)) ? act_read(&act, slot) : CH_ACT_WALK;
}

int ch_act_decide(const uintptr_t *fp) {
  uintptr_t r = (uintptr_t)(fp + 1);
  return CH_LIKELY(armed(&act, r)) ? act_read(&act, r) : act_slow(fp);
}
