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
 * records the activations already on its stack.
 * Stop sites keep apart from that stack (struct ch_stops): a live stop
 * decides alone, so a thread needs only its innermost live call through one,
 * which is the last such call whenever that is live. Their stubs write the
 * last call's slot and site, and keep the record it replaces only when that
 * one is live above them with another stop group (docs/runtime.md, "Stop
 * sites"). */
#define _GNU_SOURCE
#include "select.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

static CH_TLS struct ch_act act;
#define stops (ch_thread.stops)

/* The stub template in patch.c hard-codes this layout. */
_Static_assert(offsetof(struct ch_act, top) == 0 && offsetof(struct ch_act, lo) == 8 &&
               offsetof(struct ch_act, hi) == 16 && offsetof(struct ch_act, e) == 56,
               "patch.c's stub template uses these offsets");
_Static_assert(sizeof(struct ch_act_entry) == 32 && offsetof(struct ch_act_entry, ret) == 8 &&
               offsetof(struct ch_act_entry, mask) == 16 && offsetof(struct ch_act_entry, stop) == 24,
               "patch.c's stub template uses these offsets");

/* The stop template in patch.c hard-codes this layout. */
_Static_assert(offsetof(struct ch_stops, last) == 0 && offsetof(struct ch_stops, site) == 8 &&
               offsetof(struct ch_stops, lo) == 16 && offsetof(struct ch_stops, hi) == 24 &&
               offsetof(struct ch_stops, n) == 32 && offsetof(struct ch_stops, lost) == 36 &&
               offsetof(struct ch_stops, busy) == 37 &&
               offsetof(struct ch_stops, rec) == 48 && sizeof(struct ch_stop_rec) == 16 &&
               offsetof(struct ch_stop_rec, site) == 8 && sizeof(struct ch_stop_site) == 16 &&
               offsetof(struct ch_stop_site, group) == 8,
               "patch.c's stop template uses these offsets");

intptr_t ch_act_tls_offset(void) { return ch_tls_offset(&act); }
intptr_t ch_stops_tls_offset(void) { return ch_tls_offset(&stops); }

/* Is a stop site's call, whose return address is at slot x, live for an
 * allocation whose own is at r (x == r: the site is the allocation's entry)?
 * site: its entry, as a stub or the seed wrote it. The callers are armed,
 * so r lies on the thread's stack, and x between r and its top: reading it
 * cannot fault. */
static inline bool stop_live(const struct ch_stops *t, uintptr_t x, const struct ch_stop_site *site, uintptr_t r) {
  return x >= r && x < t->hi && *(const uintptr_t *)x == site->ret;
}

/* The stop group + 1 of the innermost live call through a stop site, 0 for
 * none, or -1: a record was lost, seed again. The last record first: it is
 * the innermost when live, since any later call through a stop site would
 * have replaced it; else the innermost kept record still live, popping the
 * others (their calls have returned). */
static inline int stop_read(struct ch_stops *t, uintptr_t r) {
  if (stop_live(t, t->last, t->site, r)) return (int)t->site->group + 1;
  /* Lost: rec was full, or a stub's call on a stack above this one (a
   * coroutine's) replaced the last record without looking at it. */
  if (CH_UNLIKELY(t->lost) || CH_UNLIKELY(t->last >= t->hi)) return -1;
  unsigned n = t->n;
  while (n && !stop_live(t, t->rec[n - 1].slot, t->rec[n - 1].site, r)) n--;
  if (n != t->n) t->n = n;
  return n ? (int)t->rec[n - 1].site->group + 1 : 0;
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
    d = ch_patch_verdict(e->mask, e->stop) + 4;   /* stop: only where stop sites have no records */
    e->decision = d;
  }
  return d - 4;
}

/* The innermost live stop decides; else the selector bits. (A thread is
 * armed only while every stop site that could be on its stack is patched:
 * act_slow.) */
static inline int decide(struct ch_act *a, uintptr_t r) {
  int stop = stop_read(&stops, r);
  if (CH_LIKELY(stop > 0)) return stop - 1;
  if (CH_UNLIKELY(stop < 0)) {
    a->gen = 0;   /* disarmed: the ordinary path seeds again */
    return CH_ACT_WALK;
  }
  return act_read(a, r);
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

/* The thread's stack bounds (os.c reads them from /proc/self/maps, since
 * pthread_getattr_np would deadlock when the program's own call of it
 * makes the thread's first allocation), found by an address on it: for the
 * main thread the C library's __libc_stack_end, as pthread_getattr_np
 * finds it; for another, its thread pointer (the C library puts the
 * thread's descriptor at the top of its stack, its own or one the program
 * gave it). */
extern void *__libc_stack_end;
static bool stack_bounds(struct ch_act *a) {
  bool main_thread = (pid_t)syscall(SYS_gettid) == getpid();
  uintptr_t on = main_thread ? (uintptr_t)__libc_stack_end : ch_thread_pointer();
  return ch_os_stack_of(on, main_thread, &a->stack_lo, &a->stack_hi);
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
  if (!ch_patch_stops_whole) return CH_ACT_WALK;   /* an unpatched stop could be inner to any record */
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
  struct ch_stops *t = &stops;
  if (t->lost) atomic_fetch_add_explicit(&ch_patch_stats.overflows, 1, memory_order_relaxed);
  t->busy = 1;   /* a signal handler's stop call meanwhile keeps nothing and marks the records lost */
  atomic_signal_fence(memory_order_seq_cst);
  t->last = 0;
  t->n = 0;
  t->lost = 0;
  t->lo = a->stack_lo;
  t->hi = a->stack_hi;
  for (unsigned i = s.n; i-- > 0;) {
    int site = s.site[i];
    if (ch_patch_stop[site] && ch_stops_own) {   /* kept where the innermost stop group changes */
      if (t->n && t->rec[t->n - 1].site->group == ch_stop_sites[site].group) continue;
      if (t->n == CH_STOP_CAP) goto overflow;
      t->rec[t->n].slot = s.slot[i];
      t->rec[t->n].site = &ch_stop_sites[site];
      t->n++;
      continue;
    }
    uint64_t mask = e->mask | ch_patch_bit[site];
    uint32_t stop = ch_patch_stop[site] ? ch_patch_stop[site] : e->stop;
    if (mask == e->mask && stop == e->stop) continue;
    if (e == &a->e[CH_ACT_CAP]) {
    overflow:
      t->n = 0;
      atomic_signal_fence(memory_order_seq_cst);
      t->busy = 0;
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
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = 0;
  a->top = e;
  a->gen = gen;
  a->seed_fail = 0;
  a->lo = a->stack_lo;
  atomic_signal_fence(memory_order_seq_cst);
  a->hi = a->stack_hi;   /* armed: the stubs record from now on */
  return decide(a, r);
}

/* Is the thread armed for an allocation whose return address is at slot:
 * seeded under the current patched set, and on its own stack? */
static inline bool armed(const struct ch_act *a, uintptr_t slot) {
  return a->gen == atomic_load_explicit(&ch_patch_gen, memory_order_relaxed) && slot < a->hi && slot >= a->lo;
}

int ch_act_decide_armed(uintptr_t slot) {
  return CH_LIKELY(armed(&act, slot)) ? decide(&act, slot) : CH_ACT_WALK;
}

/* No generation to check for a stop record: a thread's stack bounds (0, 0 until its first
 * seed) never change, nor does a patched site's return address, unless a
 * module loaded later leaves a stop site unpatched: then every stop site's
 * is withdrawn (patch.c), and no record is live again. A disabled plan
 * closes the entries that call this (ch_direct_max 0). Nothing here
 * reenters the runtime, so ch_in_runtime does not matter: the allocation
 * that follows is the group allocator's, which the runtime's own work
 * (walks, module lookups) never holds. */
int ch_act_fast(uintptr_t slot) {
  const struct ch_stops *t = &stops;
  uintptr_t x = t->last;
  /* slot >= lo: an allocation on another stack below this one (a
   * coroutine's, a signal stack) is not inside this stack's calls. */
  if (CH_LIKELY(x >= slot) && CH_LIKELY(x < t->hi) && CH_LIKELY(slot >= t->lo)) {
    const struct ch_stop_site *e = t->site;
    if (CH_LIKELY(*(const uintptr_t *)x == e->ret)) {
      uint32_t g = e->group;
      if (g >= CH_MAX_GROUPS) __builtin_unreachable();   /* a plan's group: the caller tests no sign */
      return (int)g;
    }
  }
  /* Nothing live: no kept record, no activation, and no last record left
   * by a call on a stack above this one, which may have replaced a live one
   * (dead records and entries not yet popped, and such a record, leave it
   * to the slow path, which pops them or seeds again). */
  if (!t->n && x < t->hi && act.top == act.e && armed(&act, slot))
    return __atomic_load_n(&ch_patch_empty_verdict, __ATOMIC_RELAXED);
  return CH_ACT_WALK;
}

int ch_act_decide(const uintptr_t *fp) {
  uintptr_t r = (uintptr_t)(fp + 1);
  return CH_LIKELY(armed(&act, r)) ? decide(&act, r) : act_slow(fp);
}
