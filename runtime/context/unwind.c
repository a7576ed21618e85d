/* Cohort runtime: stack walks for identification.
 *
 * A walk starts from the registers captured at its own call and follows the
 * .eh_frame rules (cfi.c) frame by frame; where code keeps frame pointers its
 * rules say so (CFA = %rbp + 16) and the walk follows the chain. Per return
 * address, the rule, the module class and the plan site are packed into one
 * 64-bit word in a lock-free cache, so a frame costs one hash probe and one
 * load of the return address after the first time. */
#define _GNU_SOURCE
#include "context.h"   /* and plan.h, the layer below: the walk reads the plan's
                          sites, decision paths and unknown verdicts */

#include <string.h>

__asm__(
  ".text\n"
  ".globl cohort_capture_regs\n"
  ".hidden cohort_capture_regs\n"
  ".type cohort_capture_regs,@function\n"
  "cohort_capture_regs:\n"
  "  .cfi_startproc\n"
  "  movq (%rsp), %rax\n"        /* pc: our return address */
  "  movq %rax, 0(%rdi)\n"
  "  leaq 8(%rsp), %rax\n"       /* sp: the caller's %rsp after we return */
  "  movq %rax, 8(%rdi)\n"
  "  movq %rbp, 16(%rdi)\n"
  "  ret\n"
  "  .cfi_endproc\n"
  ".size cohort_capture_regs, .-cohort_capture_regs\n");

/* ------------------------------------------------------- packed rules */

/* K_RSP is 0 so that one mask test (F_SLOW) tells an ordinary frame, which
 * the walk steps through inline, from everything else. */
enum kind { K_RSP, K_RBP, K_COMPLEX, K_OUTERMOST, K_STOP, K_FP_GUESS };
#define F_KIND(v)   ((unsigned)((v) & 7))
#define F_RBP_LOAD  ((uint64_t)1 << 3)   /* the caller's %rbp is saved at CFA + rbp_off */
#define F_RBP_LOST  ((uint64_t)1 << 4)   /* the caller's %rbp cannot be recovered */
#define F_SYSTEM    ((uint64_t)1 << 5)
#define F_COLD      ((uint64_t)1 << 6)
#define F_KNOWN     ((uint64_t)1 << 7)   /* a listed entry site that needs a walk */
#define F_DECIDES   (F_COLD | F_KNOWN)   /* both: the entry site decides the group */
#define F_SITE(v)   ((int)(((v) >> 8) & 0x1ff) - 1)  /* CH_MAX_SITES + 1 values */
#define F_STOP      ((uint64_t)1 << 17)  /* a walk reaching this site ends: it decides */
/* An entry site that decides: its verdict (a group or CH_QUICK_NEXT) + 4 in
 * bits 18..25, so the quick test reads nothing but the cached rule. */
#define F_QUICK(v)  ((int)(((v) >> 18) & 0xff) - 4)
#define F_CFAOFF(v) ((int32_t)((int64_t)((v) << 14) >> 40))   /* bits 26..49 */
#define F_RBPOFF(v) ((int32_t)((int64_t)(v) >> 50))           /* bits 50..63 */
#define F_SLOW      (7 | F_RBP_LOST | ((uint64_t)0x1ff << 8) | F_STOP)

/* An ordinary frame's CFA offset is positive, a multiple of 8 and below
 * 4 MiB, so CH_MAX_FRAMES of them stay within MAX_SPAN of the start and the
 * inline step needs no bounds test. */
#define MAX_SPAN ((uintptr_t)1 << 30)   /* no stack is deeper than this */
#define RBP_LOST ((uintptr_t)1)          /* odd: no CFA computed from it passes */
#define RSP_OFF_LIMIT ((int32_t)1 << 22)
_Static_assert((uintptr_t)CH_MAX_FRAMES * RSP_OFF_LIMIT <= MAX_SPAN, "the inline step needs no span test");

static uint64_t pack(enum kind k, unsigned rbp, bool sys, int site, enum ch_entry_verdict e,
                     int32_t cfa_off, int32_t rbp_off) {
  _Static_assert(CH_MAX_SITES < 0x1ff, "site numbers must fit their bits");
  _Static_assert(CH_MAX_GROUPS + 4 <= 0xff, "quick verdicts must fit their bits");
  bool stop = site >= 0 && ch_plan->sites[site].stop;
  return (uint64_t)k | (rbp == 1 ? F_RBP_LOAD : rbp == 2 ? F_RBP_LOST : 0) | (sys ? F_SYSTEM : 0) |
         (stop ? F_STOP : 0) |
         (e == CH_ENTRY_COLD ? F_COLD : e == CH_ENTRY_WALK ? F_KNOWN : e == CH_ENTRY_GROUP || e == CH_ENTRY_NEXT ? F_DECIDES : 0) |
         (uint64_t)(site + 1) << 8 |
         (e == CH_ENTRY_GROUP || e == CH_ENTRY_NEXT ? (uint64_t)(ch_plan->sites[site].quick + 4) << 18 : 0) |
         ((uint64_t)(uint32_t)cfa_off & 0xffffff) << 26 | (uint64_t)(uint32_t)rbp_off << 50;
}

/* ------------------------------------------------------------ the cache */

/* Open addressing, keys written once per slot and generation. A key is the
 * pc tagged with the module generation in its top 16 bits (user pcs have 47),
 * so a rule cached before a dlclose simply stops matching, and a slot whose
 * tag is old may be taken by any pc. A reader checks the key again after
 * reading the value: the slot cannot have been retaken in between unnoticed. */
#define CACHE_BITS 15
#define CACHE_SIZE (1u << CACHE_BITS)
#define PROBES 8
#define LOCKED 1
#define PC_BITS 47
struct slot { _Atomic uintptr_t key; _Atomic uint64_t val; };
static struct slot *cache;
atomic_ulong ch_unwind_slow;

static inline uintptr_t tag_now(void) { return (uintptr_t)(ch_modules_generation() & 0xffff) << 48; }

static inline size_t slot_of(uintptr_t pc) {
  return (size_t)((pc * 0x9e3779b97f4a7c15ull) >> (64 - CACHE_BITS));
}

static inline bool slot_read(struct slot *s, uintptr_t key, uint64_t *v) {
  if (atomic_load_explicit(&s->key, memory_order_acquire) != key) return false;
  uint64_t x = atomic_load_explicit(&s->val, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&s->key, memory_order_relaxed) != key) return false;
  *v = x;
  return true;
}

static CH_NOINLINE bool cache_probe(uintptr_t pc, uintptr_t key, uint64_t *v) {
  size_t h = slot_of(pc);
  for (unsigned i = 1; i < PROBES; i++) {
    struct slot *s = &cache[(h + i) & (CACHE_SIZE - 1)];
    if (slot_read(s, key, v)) return true;
    if (atomic_load_explicit(&s->key, memory_order_relaxed) == 0) return false;
  }
  return false;
}

/* The first slot inline, the rest out of line. */
static inline bool cache_get(uintptr_t pc, uintptr_t tag, uint64_t *v) {
  uintptr_t key = pc | tag;
  struct slot *s = &cache[slot_of(pc)];
  if (CH_LIKELY(slot_read(s, key, v))) return true;
  if (atomic_load_explicit(&s->key, memory_order_relaxed) == 0) return false;
  return cache_probe(pc, key, v);
}

static void cache_put(uintptr_t pc, uintptr_t tag, uint64_t v) {
  size_t h = slot_of(pc);
  uintptr_t key = pc | tag;
  for (unsigned i = 0; i < PROBES; i++) {
    struct slot *s = &cache[(h + i) & (CACHE_SIZE - 1)];
    uintptr_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
    if (k == key) return;                                  /* another thread was first */
    bool stale = k > LOCKED && (k >> 48) != (tag >> 48);
    if (k != 0 && !stale) continue;
    if (!atomic_compare_exchange_strong(&s->key, &k, LOCKED)) continue;
    atomic_store_explicit(&s->val, v, memory_order_relaxed);
    atomic_store_explicit(&s->key, key, memory_order_release);
    return;
  }
}

/* ---------------------------------------------------- computing a rule */

static bool fits(int64_t v, unsigned bits) {
  return v >= -((int64_t)1 << (bits - 1)) && v < ((int64_t)1 << (bits - 1));
}

static int (*site_entry)(uintptr_t pc, int *entry);
void ch_unwind_set_sites(int (*site_at)(uintptr_t pc, int *entry)) { site_entry = site_at; }

static uint64_t compute(uintptr_t pc, bool *busy) {
  atomic_fetch_add_explicit(&ch_unwind_slow, 1, memory_order_relaxed);
  const struct ch_module *m = ch_module_find(pc, busy);
  if (!m) return pack(K_STOP, 0, true, -1, CH_ENTRY_UNKNOWN, 0, 0);
  int verdict = CH_ENTRY_UNKNOWN;
  int site = m->system || !site_entry ? -1 : site_entry(pc, &verdict);
  enum ch_entry_verdict entry = (enum ch_entry_verdict)verdict;
  struct ch_cfi_rule r;
  /* pc is a return address: the call is the instruction before it. */
  if (!ch_cfi_find(m, pc - 1, &r)) {
    /* No rule: if the code keeps frame pointers the chain still works. */
    enum kind k = (!r.complex && !m->system) ? K_FP_GUESS : K_STOP;
    return pack(k, 0, m->system, site, entry, 0, 0);
  }
  if (r.outermost) return pack(K_OUTERMOST, 0, m->system, site, entry, 0, 0);
  unsigned rbp = r.rbp_kind == CH_RBP_AT_CFA ? 1 : r.rbp_kind == CH_RBP_UNKNOWN ? 2 : 0;
  bool odd_rsp = r.cfa_kind == CH_CFA_RSP && (r.cfa_off < 8 || r.cfa_off >= RSP_OFF_LIMIT || (r.cfa_off & 7));
  if (r.complex || r.ra_off != -8 || !fits(r.cfa_off, 24) || !fits(r.rbp_off, 14) || odd_rsp)
    return pack(K_COMPLEX, rbp, m->system, site, entry, 0, 0);
  return pack(r.cfa_kind == CH_CFA_RSP ? K_RSP : K_RBP, rbp, m->system, site, entry, r.cfa_off, r.rbp_off);
}

/* The packed rule for pc, computed and cached on a miss; *unsure set, and
 * nothing cached, when pc's module could not be looked up because another
 * thread was refreshing the modules: the rule then stops the walk, this
 * time only. (Cached, it stopped every later walk through pc, as if pc lay
 * in no module: a DPA chain of no application frame took all of a
 * wrapper's allocations, in one run of two in tests/programs/manychains.) */
static inline uint64_t rule_get(uintptr_t pc, uintptr_t tag, bool *unsure) {
  uint64_t v;
  if (CH_LIKELY(cache_get(pc, tag, &v))) return v;
  bool busy = false;
  v = compute(pc, &busy);
  if (busy) *unsure = true;
  else cache_put(pc, tag, v);
  return v;
}
static inline uint64_t rule_for(uintptr_t pc, uintptr_t tag) {
  bool unsure;
  return rule_get(pc, tag, &unsure);
}

/* The slow interpreter for frames whose rule does not pack. */
static bool step_complex(struct ch_regs *r, uintptr_t *cfa, uintptr_t *rbp) {
  const struct ch_module *m = ch_module_for(r->pc);
  struct ch_cfi_rule rule;
  if (!m || !ch_cfi_find(m, r->pc - 1, &rule) || rule.outermost) return false;
  if (rule.cfa_kind == CH_CFA_EXPR) {
    if (!ch_cfi_eval_expr(rule.cfa_expr, rule.cfa_expr_len, r, cfa)) return false;
  } else {
    *cfa = (rule.cfa_kind == CH_CFA_RSP ? r->sp : r->rbp) + (intptr_t)rule.cfa_off;
  }
  if (*cfa <= r->sp) return false;
  *rbp = rule.rbp_kind == CH_RBP_AT_CFA ? *(const uintptr_t *)(*cfa + (intptr_t)rule.rbp_off)
       : rule.rbp_kind == CH_RBP_UNKNOWN ? RBP_LOST : r->rbp;
  if (rule.ra_off != -8) return false;
  return true;
}

/* ------------------------------------------------------------ stepping */

/* What the innermost application frame's packed rule v says alone: a group,
 * CH_QUICK_COLD, CH_QUICK_UNNAMED or CH_QUICK_WALK. (A stop site there is left to the walk,
 * which counts it on the "stop" path.) */
static inline int entry_verdict(uint64_t v) {
  if ((v & F_DECIDES) == F_DECIDES) return F_QUICK(v);
  if (v & F_COLD) return CH_QUICK_COLD;
  if (ch_plan->unknown_entry == CH_ENTRY_COLD && !(v & F_KNOWN)) return CH_QUICK_UNNAMED;
  return CH_QUICK_WALK;
}

/* The quick test on its own, for the common case where the caller of the
 * entry point is an application frame whose rule is cached: no walk state,
 * no locks, no allocation. */
static int quick_past_system(const uintptr_t *fp, uint64_t v, uintptr_t tag);
int ch_walk_quick(const uintptr_t *fp) {
  uint64_t v;
  uintptr_t tag;
  if (CH_UNLIKELY(!cache) || !cache_get(fp[1], tag = tag_now(), &v)) return CH_QUICK_UNSEEN;
  if (CH_UNLIKELY(v & F_SYSTEM)) return quick_past_system(fp, v, tag);
  return entry_verdict(v);
}

/* Any frame but an ordinary one (F_SLOW): 1 stepped, 0 the stack ends
 * here, -1 cannot go on. The registers go in and come out as copies, so
 * that the walk can keep its own in registers. *slot is where the caller's
 * %rbp was read from the stack, 0 if it was not, SLOT_OPAQUE if the step
 * read memory the suffix memo cannot check (a DWARF expression). */
#define SLOT_OPAQUE ((uintptr_t)1)
static CH_NOINLINE int step_other(struct ch_regs r, uint64_t v, uintptr_t sp0, struct ch_regs *out,
                                  uintptr_t *slot) {
  uintptr_t cfa, rbp = r.rbp;
  *slot = 0;
  switch (F_KIND(v)) {
  case K_RSP:
    cfa = r.sp + (intptr_t)F_CFAOFF(v);
    break;
  case K_RBP:
    cfa = r.rbp + (intptr_t)F_CFAOFF(v);   /* a lost %rbp is odd: caught below */
    break;
  case K_FP_GUESS:
    if (r.rbp <= r.sp || r.rbp - sp0 > MAX_SPAN || (r.rbp & 7)) return -1;
    cfa = r.rbp + 16;
    rbp = *(const uintptr_t *)r.rbp;
    *slot = r.rbp;
    break;
  case K_COMPLEX:
    if (!step_complex(&r, &cfa, &rbp)) return -1;
    *slot = SLOT_OPAQUE;
    break;
  case K_OUTERMOST: return 0;
  default: return -1;
  }
  if (cfa <= r.sp || cfa - sp0 > MAX_SPAN || (cfa & 7)) return -1;
  if (F_KIND(v) == K_RSP || F_KIND(v) == K_RBP) {
    if (v & F_RBP_LOAD) {
      *slot = cfa + (intptr_t)F_RBPOFF(v);
      rbp = *(const uintptr_t *)*slot;
    } else if (v & F_RBP_LOST) {
      rbp = RBP_LOST;
    }
  }
  out->pc = *(const uintptr_t *)(cfa - 8);
  out->sp = cfa;
  out->rbp = rbp;
  return 1;
}

/* One frame, caller's registers in r. An ordinary frame (no F_SLOW bit,
 * CFA = %rsp + offset) is stepped inline. false: the walk ends, with
 * *truncated saying whether early. */
static inline bool step(struct ch_regs *r, uint64_t v, uintptr_t sp0, bool *truncated, uintptr_t *slot) {
  if (CH_LIKELY(!(v & F_SLOW))) {
    uintptr_t cfa = r->sp + (intptr_t)F_CFAOFF(v);
    *slot = 0;
    if (v & F_RBP_LOAD) {
      *slot = cfa + (intptr_t)F_RBPOFF(v);
      r->rbp = *(const uintptr_t *)*slot;
    }
    r->pc = *(const uintptr_t *)(cfa - 8);
    r->sp = cfa;
  } else {
    struct ch_regs o;
    int st = step_other(*r, v, sp0, &o, slot);
    if (st <= 0) { *truncated = st < 0; return false; }
    *r = o;
  }
  /* One test for both: a zero return address ends the chain; one outside
   * user space cannot be looked up. */
  if (CH_UNLIKELY(r->pc - 1 >= ((uintptr_t)1 << PC_BITS) - 1)) { *truncated = r->pc != 0; return false; }
  return true;
}

/* ------------------------------------------------- past system frames */

/* From the entry point's caller (r, its rule *v) past a system module's
 * frames (libstdc++ making a std::string's buffer for the program) to the
 * first application frame, whose rule *v then holds and which decides as
 * the entry would: the one way both the quick test and ch_walk_entry pass
 * them. cached: only rules already in the cache and at most
 * QUICK_SYSTEM_FRAMES frames of the kinds stepped from the stack alone, so
 * that no rule is worked out and no lock taken (the quick test; anything
 * else is the slow path's); else every
 * rule, up to CH_MAX_FRAMES. *depth: the frames passed. false: the walk
 * cannot get there. */
#define QUICK_SYSTEM_FRAMES 4
static inline __attribute__((always_inline)) bool past_system(struct ch_regs *r, uint64_t *v, uintptr_t tag,
                                                              bool cached, unsigned *depth) {
  uintptr_t sp0 = r->sp, slot;
  bool truncated = false;
  for (*depth = 0; *v & F_SYSTEM; ++*depth) {
    if (*depth == (cached ? QUICK_SYSTEM_FRAMES : CH_MAX_FRAMES - 1)) return false;
    /* A DWARF expression's step may look its module up, which can refresh
     * the module table: the quick test leaves that to the walk, which runs
     * it under the runtime's guard. */
    if (cached && (*v & F_SLOW) && F_KIND(*v) == K_COMPLEX) return false;
    if (!step(r, *v, sp0, &truncated, &slot)) return false;
    if (!cached) *v = rule_for(r->pc, tag);
    else if (!cache_get(r->pc, tag, v)) return false;
  }
  return true;
}

/* The caller is a system module's frame: the first application frame past
 * it decides as the walk past system frames would (ch_walk_entry), without
 * the walk's setting up and the calls to it (cppcheck in front of jemalloc
 * under a plan: 525 k such requests, about 280 instructions each before).
 * A cold verdict comes back as CH_QUICK_PAST_COLD, a `walk` verdict as
 * CH_QUICK_PAST_WALK: the call at the return address is the system
 * module's, not the site's, so nothing is patched there. */
static CH_NOINLINE int quick_past_system(const uintptr_t *fp, uint64_t v, uintptr_t tag) {
  struct ch_regs r = {.rbp = fp[0], .pc = fp[1], .sp = (uintptr_t)(fp + 2)};
  unsigned depth;
  if (!past_system(&r, &v, tag, true, &depth)) return CH_QUICK_UNSEEN;
  int e = entry_verdict(v);
  if (e == CH_QUICK_COLD || e == CH_QUICK_UNNAMED) return CH_QUICK_PAST_COLD;
  return e == CH_QUICK_WALK ? CH_QUICK_PAST_WALK : e;
}

/* ------------------------------------------------------ the suffix memo */

/* Consecutive allocations in a thread mostly share the outer part of their
 * stacks. Each thread remembers its last walk from the innermost application
 * frame out: per frame the registers on entry, where its step read the
 * caller's %rbp, and its plan site. When a new walk reaches a frame whose
 * registers equal a remembered frame's, every frame further out is the same
 * as before provided each return address, and each %rbp read from the stack,
 * still holds the remembered value: the step from a frame is a function of
 * its registers and of those stack words alone. Those words are checked with
 * independent loads, far cheaper than rule lookups that wait on each other,
 * and the remembered sites and ending are taken over. */
#define MEMO_FRAMES 64
/* One remembered frame: registers on entry, where its step reloaded the
 * caller's %rbp (0: it did not), its plan site, whether the step computed
 * something from %rbp (a CFA, a frame link), and (memo_index) whether the
 * walk from this frame out reads %rbp's value on entry before reloading it
 * from the stack. In code without frame pointers %rbp holds anything (a loop
 * counter) and is rarely live: then it need not match. */
struct memo_frame { uintptr_t sp, pc, rbp, slot; int16_t site; uint8_t use, live; };
struct memo {
  uintptr_t tag;                     /* module generation the rules came from */
  unsigned n;                        /* frames; 0: nothing remembered */
  unsigned stop_group;               /* the walk ended at a stop site (group + 1), or 0 */
  uintptr_t end_slot;                /* where the last frame read a zero return address, or 0 */
  uint64_t reload;                   /* bit k: the %rbp frame k's step reloaded is live */
  uint64_t sited;                    /* bit k: frame k has a plan site */
  struct memo_frame f[MEMO_FRAMES];
};
_Static_assert(MEMO_FRAMES <= 64, "one bit per remembered frame");
static CH_TLS struct memo memo;
/* The walk in progress records its frames here rather than on the stack,
 * which may be small in the program's threads. Walks do not nest (a signal
 * handler's allocation takes the reentrant path). */
static CH_TLS struct memo_frame memo_scratch[MEMO_FRAMES + 1];

/* Liveness and the masks for frames below upto, going inwards from frame
 * upto (whose own are known) or from the end. The walk passes which of
 * them have sites, and whether any used %rbp: if none did and it is not
 * live beyond, no %rbp is live (code without frame pointers). */
static void memo_index(struct memo *m, unsigned upto, uint64_t sited, bool any_use) {
  bool live = upto < m->n ? m->f[upto].live : false;   /* of the frame after k */
  uint64_t low = upto ? (~(uint64_t)0 >> (64 - upto)) : 0;
  m->reload &= ~low;
  m->sited = (m->sited & ~low) | (sited & low);
  if (!any_use && !live) return;   /* every f[k].live is 0 already */
  for (unsigned k = upto; k-- > 0;) {
    struct memo_frame *f = &m->f[k];
    if (f->slot && live) m->reload |= (uint64_t)1 << k;
    live = f->use || (!f->slot && live);
    f->live = live;
  }
}

/* The new walk stands at remembered frame j with %rbp = rbp: is the rest of
 * the walk the remembered one? It is a function of the stack words the steps
 * out of frames j, j+1, ... read: each later frame's return address, and
 * the live reloaded %rbp values. They are checked inside out and the first
 * difference ends the check, so every word read lies between the current
 * frame and the end of a walk that matches so far: on this thread's live
 * stack, even if the thread has since moved to another stack at the same
 * place. On a mismatch *retry is the first frame a later join could start at. */
static bool memo_join(struct ch_walk *w, unsigned j, uintptr_t rbp, unsigned *retry) {
  const struct memo *m = &memo;
  unsigned n = m->n;
  if (m->f[j].live && m->f[j].rbp != rbp) { *retry = j + 1; return false; }
  const struct memo_frame *f = &m->f[j];
  if (((m->reload >> j) & 1) && *(const uintptr_t *)f->slot != f[1].rbp) { *retry = j + 1; return false; }
  for (unsigned k = j + 1; k < n; k++) {
    f = &m->f[k];
    if (*(const uintptr_t *)(f->sp - 8) != f->pc) { *retry = k + 1; return false; }
    if (((m->reload >> k) & 1) && *(const uintptr_t *)f->slot != f[1].rbp) { *retry = k + 1; return false; }
  }
  if (m->end_slot && *(const uintptr_t *)m->end_slot != 0) { *retry = n; return false; }
  if (m->stop_group) { w->stop_group = m->stop_group; return true; }
  for (uint64_t s = m->sited >> j << j; s; s &= s - 1) {
    int site = m->f[__builtin_ctzll(s)].site;
    w->active[site >> 6] |= (uint64_t)1 << (site & 63);
  }
  return true;
}

/* The new walk's frames pre[0..i) replace the remembered ones before j. */
static void memo_splice(const struct memo_frame *pre, unsigned i, unsigned j, uint64_t sited, bool any_use) {
  struct memo *m = &memo;
  unsigned rest = m->n - j;
  if (i + rest > MEMO_FRAMES) { m->n = 0; return; }
  if (i == 0 && j == 0) return;
  if (i != j) {
    memmove(&m->f[i], &m->f[j], rest * sizeof *m->f);
    m->reload = m->reload >> j << i;
    m->sited = m->sited >> j << i;
  }
  memcpy(m->f, pre, i * sizeof *pre);
  m->n = i + rest;
  memo_index(m, i, sited, any_use);
}

/* A walk that ended by itself: remember it, unless it was cut short or
 * passed a frame whose step cannot be checked. */
static void memo_keep(const struct memo_frame *pre, unsigned i, uint64_t sited, bool any_use,
                      uintptr_t tag, unsigned stop_group, uintptr_t end_slot) {
  struct memo *m = &memo;
  m->n = 0;
  if (i > MEMO_FRAMES) return;
  for (unsigned k = 0; k < i; k++)
    if (pre[k].slot == SLOT_OPAQUE) return;
  memcpy(m->f, pre, i * sizeof *pre);
  m->tag = tag;
  m->stop_group = stop_group;
  m->end_slot = end_slot;
  m->n = i;
  m->reload = m->sited = 0;
  memo_index(m, i, sited, any_use);
}

/* --------------------------------------------------------------- walk */

/* The registers of the entry point's frame fp (NULL: the caller's). */
static inline __attribute__((always_inline)) bool walk_start(struct ch_regs *r, const uintptr_t *fp) {
  if (CH_UNLIKELY(!cache)) return false;
  if (fp) {
    /* The entry point's frame: saved %rbp, then the return address. */
    r->rbp = fp[0];
    r->pc = fp[1];
    r->sp = (uintptr_t)(fp + 2);
  } else {
    struct ch_regs here;   /* a copy, so that r itself can live in registers */
    cohort_capture_regs(&here);
    *r = here;
  }
  return r->pc - 1 < ((uintptr_t)1 << PC_BITS) - 1;
}

int ch_walk_entry(const uintptr_t *fp, bool *at_caller) {
  struct ch_regs r;
  if (!walk_start(&r, fp)) return CH_QUICK_UNSEEN;
  uintptr_t tag = tag_now();
  uint64_t v = rule_for(r.pc, tag);
  unsigned depth;
  if (!past_system(&r, &v, tag, false, &depth)) return CH_QUICK_UNSEEN;
  *at_caller = depth == 0;
  return entry_verdict(v);
}

/* Frames one at a time, for the online policies' call chains (dpa.c). */
bool ch_frames_start(struct ch_frames *it, const uintptr_t *fp) {
  it->done = !walk_start(&it->r, fp);
  it->tag = tag_now();
  it->sp0 = it->r.sp;
  it->fixed = true;
  it->unsure = false;
  return !it->done;
}
bool ch_frames_next(struct ch_frames *it, uintptr_t *pc, bool *system) {
  if (it->done) return false;
  uint64_t v = rule_get(it->r.pc, it->tag, &it->unsure);
  uintptr_t slot;
  bool truncated = false;
  *pc = it->r.pc;
  *system = (v & F_SYSTEM) != 0;
  it->fixed &= !(v & F_SLOW);   /* CFA = %rsp + a constant: the caller's slot is at a fixed distance */
  if (!step(&it->r, v, it->sp0, &truncated, &slot)) it->done = true;
  return true;
}

bool ch_walk_sites(const uintptr_t *fp, void (*fn)(void *arg, uintptr_t slot, int site), void *arg) {
  struct ch_regs r;
  if (!walk_start(&r, fp)) return false;
  uintptr_t tag = tag_now(), sp0 = r.sp, slot;
  bool truncated = false;
  for (unsigned depth = 0; depth < CH_MAX_FRAMES; depth++) {
    uint64_t v = rule_for(r.pc, tag);
    int site = F_SITE(v);
    if (site >= 0 && !(v & F_SYSTEM)) fn(arg, r.sp - 8, site);
    if (!step(&r, v, sp0, &truncated, &slot)) return !truncated;
  }
  return false;
}

void ch_walk_stack(struct ch_walk *w, const uintptr_t *fp) {
  for (unsigned k = 0; k < CH_MAX_SITES / 64; k++) w->active[k] = 0;
  w->truncated = w->rejected = w->joined = w->next = false;
  w->entry_group = w->stop_group = 0;
  w->path_verdict = CH_QUICK_WALK;
  w->frames = 0;
  struct ch_regs r;
  if (!walk_start(&r, fp)) { w->truncated = true; return; }
  uintptr_t tag = tag_now(), sp0 = r.sp, slot;
  unsigned depth = 0;
  bool truncated = false;
  uint64_t v;
  /* System frames up to the innermost application frame, whose rule is the
   * quick test: it may decide alone. */
  for (;;) {
    v = rule_for(r.pc, tag);
    if (!(v & F_SYSTEM)) break;
    if (!step(&r, v, sp0, &truncated, &slot)) { w->truncated = truncated; return; }
    if (++depth == CH_MAX_FRAMES) { w->truncated = true; return; }
  }
  const unsigned entry_depth = depth;   /* frames are counted past the entry */
  int e = entry_verdict(v);
  if (e >= 0) { w->entry_group = (unsigned)e + 1; return; }
  if (e == CH_QUICK_COLD || e == CH_QUICK_UNNAMED || e == CH_QUICK_NEXT) { w->rejected = true; w->next = e == CH_QUICK_NEXT; return; }

  /* The decision paths (plan version 5): from the entry outwards, while the
   * sites met so far are a path of the plan's trie, one frame at a time;
   * the first node with a verdict ends the walk. A frame that leaves the
   * trie (an application frame with no site, or a site the trie has no
   * branch for) is where the full walk takes over, unchanged, unless the
   * plan says unknown-path cold. System frames
   * and sites met before (recursion) are passed over, as in a context. */
  const struct ch_plan *pl = ch_plan;
  if (pl->nnodes > 1) {
    unsigned node = 0;
    for (;;) {
      if (!(v & F_SYSTEM)) {
        int site = F_SITE(v);
        if (site < 0) goto left;
        if (!(w->active[site >> 6] >> (site & 63) & 1)) {
          unsigned child = ch_plan_child(pl, node, site);
          if (!child) {
            /* A stop site ends the walk here whether or not a path goes on
             * (the planner writes no path where the stop decides alike). */
            if (v & F_STOP) { w->stop_group = pl->sites[site].stop; w->frames = depth - entry_depth; return; }
            goto left;
          }
          node = child;
          w->active[site >> 6] |= (uint64_t)1 << (site & 63);
          if (pl->node_verdict[node] != CH_QUICK_WALK) { w->path_verdict = pl->node_verdict[node]; w->frames = depth - entry_depth; return; }
          if (v & F_STOP) { w->stop_group = pl->sites[site].stop; w->frames = depth - entry_depth; return; }
        }
      }
      if (!step(&r, v, sp0, &truncated, &slot)) { w->truncated = truncated; w->frames = depth - entry_depth; return; }
      if (++depth == CH_MAX_FRAMES) { w->truncated = true; w->frames = depth - entry_depth; return; }
      v = rule_for(r.pc, tag);
    }
  left:
    /* Left the paths past their entry: under unknown-path cold the walk
     * ends here. (An entry no path begins at gets the full walk.) */
    if (node && pl->unknown_path == CH_ENTRY_COLD) { w->path_verdict = CH_QUICK_COLD; w->frames = depth - entry_depth; return; }
  }

  /* The rest of the stack, recorded for the memo and joining it where the
   * registers meet a remembered frame. System frames have no site; a frame
   * with a site is a slow one, so an ordinary frame costs one test beyond
   * its step and its record. */
  struct memo_frame *pre = memo_scratch;
  unsigned i = 0;
  uint64_t sited = 0;   /* bit i: frame i has a site */
  bool any_use = false;
  const struct memo_frame *mj = memo.f, *mend = memo.f + (memo.tag == tag ? memo.n : 0);
  for (;;) {
    if (mj < mend) {
      while (mj < mend && mj->sp < r.sp) mj++;
      if (mj < mend && mj->sp == r.sp && mj->pc == r.pc) {
        unsigned j = (unsigned)(mj - memo.f), retry;
        if (memo_join(w, j, r.rbp, &retry)) {
          w->joined = true;
          w->frames = depth - entry_depth;
          memo_splice(pre, i, j, sited, any_use);
          return;
        }
        mj = memo.f + retry;   /* no join can start before retry */
      }
    }
    struct memo_frame *rec = &pre[i < MEMO_FRAMES ? i : MEMO_FRAMES];
    rec->sp = r.sp;
    rec->pc = r.pc;
    rec->rbp = r.rbp;
    int site = F_SITE(v);
    rec->site = (int16_t)site;
    rec->use = (v & F_SLOW) && (F_KIND(v) == K_RBP || F_KIND(v) == K_FP_GUESS || F_KIND(v) == K_COMPLEX);
    rec->live = 0;
    any_use |= rec->use;
    if (CH_UNLIKELY(site >= 0)) {
      if (i < 64) sited |= (uint64_t)1 << i;
      if (v & F_STOP) {
        w->stop_group = ch_plan->sites[site].stop;
        w->frames = depth - entry_depth;
        rec->slot = 0;
        memo_keep(pre, i + 1, sited, any_use, tag, w->stop_group, 0);
        return;
      }
      w->active[site >> 6] |= (uint64_t)1 << (site & 63);
    }
    i++;
    if (!step(&r, v, sp0, &truncated, &slot)) {
      rec->slot = slot;
      w->truncated = truncated;
      w->frames = depth - entry_depth;
      if (truncated) memo.n = 0;
      else memo_keep(pre, i, sited, any_use, tag, 0, r.pc == 0 && F_KIND(v) != K_OUTERMOST ? r.sp - 8 : 0);
      return;
    }
    rec->slot = slot;
    if (++depth == CH_MAX_FRAMES) { w->truncated = true; w->frames = depth - entry_depth; memo.n = 0; return; }
    v = rule_for(r.pc, tag);
  }
}

void ch_unwind_init(void) {
  cache = ch_os_reserve(sizeof(struct slot) * CACHE_SIZE);
}
