/* Cohort runtime: stack walks for identification.
 *
 * A walk starts from the registers captured at its own call and follows the
 * .eh_frame rules (cfi.c) frame by frame; where code keeps frame pointers its
 * rules say so (CFA = %rbp + 16) and the walk follows the chain. Per return
 * address, the rule, the module class and the plan site are packed into one
 * 64-bit word in a lock-free cache, so a frame costs one hash probe and one
 * load of the return address after the first time. */
#define _GNU_SOURCE
#include "internal.h"

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

enum kind { K_NONE, K_RSP, K_RBP, K_COMPLEX, K_OUTERMOST, K_STOP, K_FP_GUESS };
#define F_KIND(v)   ((unsigned)((v) & 7))
#define F_RBP(v)    ((unsigned)(((v) >> 3) & 3))
#define F_SYSTEM    ((uint64_t)1 << 5)
#define F_COLD      ((uint64_t)1 << 6)
#define F_KNOWN     ((uint64_t)1 << 7)   /* a listed entry site that needs a walk */
#define F_DECIDES   (F_COLD | F_KNOWN)   /* both: the entry site decides the group */
#define F_SITE(v)   ((int)(((v) >> 8) & 0x1ff) - 1)  /* CH_MAX_SITES + 1 values */
#define F_STOP      ((uint64_t)1 << 17)  /* a walk reaching this site ends: it decides */
#define F_GEN(v)    ((unsigned)(((v) >> 18) & 0xff))
#define F_CFAOFF(v) ((int32_t)((int64_t)((v) << 14) >> 40))   /* bits 26..49 */
#define F_RBPOFF(v) ((int32_t)((int64_t)(v) >> 50))           /* bits 50..63 */

static uint64_t pack(enum kind k, unsigned rbp, bool sys, int site, enum ch_entry_verdict e,
                     unsigned gen, int32_t cfa_off, int32_t rbp_off) {
  _Static_assert(CH_MAX_SITES < 0x1ff, "site numbers must fit their bits");
  bool stop = site >= 0 && ch_plan->sites[site].stop;
  return (uint64_t)k | (uint64_t)rbp << 3 | (sys ? F_SYSTEM : 0) | (stop ? F_STOP : 0) |
         (e == CH_ENTRY_COLD ? F_COLD : e == CH_ENTRY_WALK ? F_KNOWN : e == CH_ENTRY_GROUP ? F_DECIDES : 0) |
         (uint64_t)(site + 1) << 8 | (uint64_t)(gen & 0xff) << 18 |
         ((uint64_t)(uint32_t)cfa_off & 0xffffff) << 26 | (uint64_t)(uint32_t)rbp_off << 50;
}

/* ------------------------------------------------------------ the cache */

#define CACHE_BITS 15
#define CACHE_SIZE (1u << CACHE_BITS)
#define PROBES 8
#define LOCKED 1
struct slot { _Atomic uintptr_t key; _Atomic uint64_t val; };
static struct slot *cache;
atomic_ulong ch_unwind_slow;

static inline size_t slot_of(uintptr_t pc) {
  return (size_t)((pc * 0x9e3779b97f4a7c15ull) >> (64 - CACHE_BITS));
}

static inline bool cache_get(uintptr_t pc, unsigned gen, uint64_t *v) {
  size_t h = slot_of(pc);
  for (unsigned i = 0; i < PROBES; i++) {
    struct slot *s = &cache[(h + i) & (CACHE_SIZE - 1)];
    uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
    if (k == pc) {
      uint64_t x = atomic_load_explicit(&s->val, memory_order_relaxed);
      atomic_thread_fence(memory_order_acquire);
      if (atomic_load_explicit(&s->key, memory_order_relaxed) != pc || F_GEN(x) != (gen & 0xff))
        return false;
      *v = x;
      return true;
    }
    if (k == 0) return false;
  }
  return false;
}

static void cache_put(uintptr_t pc, unsigned gen, uint64_t v) {
  size_t h = slot_of(pc);
  for (unsigned i = 0; i < PROBES; i++) {
    struct slot *s = &cache[(h + i) & (CACHE_SIZE - 1)];
    uintptr_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
    bool stale = k > LOCKED && (k == pc || F_GEN(atomic_load(&s->val)) != (gen & 0xff));
    if (k != 0 && !stale) continue;
    if (!atomic_compare_exchange_strong(&s->key, &k, LOCKED)) continue;
    atomic_store_explicit(&s->val, v, memory_order_relaxed);
    atomic_store_explicit(&s->key, pc, memory_order_release);
    return;
  }
}

/* ---------------------------------------------------- computing a rule */

static bool fits(int64_t v, unsigned bits) {
  return v >= -((int64_t)1 << (bits - 1)) && v < ((int64_t)1 << (bits - 1));
}

static uint64_t compute(uintptr_t pc, unsigned gen) {
  atomic_fetch_add_explicit(&ch_unwind_slow, 1, memory_order_relaxed);
  const struct ch_module *m = ch_module_for(pc);
  if (!m) return pack(K_STOP, 0, true, -1, CH_ENTRY_UNKNOWN, gen, 0, 0);
  int site = m->system ? -1 : ch_plan_site_at(pc);
  enum ch_entry_verdict entry = site >= 0 ? ch_plan->sites[site].entry : CH_ENTRY_UNKNOWN;
  struct ch_cfi_rule r;
  /* pc is a return address: the call is the instruction before it. */
  if (!ch_cfi_find(m, pc - 1, &r)) {
    /* No rule: if the code keeps frame pointers the chain still works. */
    enum kind k = (!r.complex && !m->system) ? K_FP_GUESS : K_STOP;
    return pack(k, 0, m->system, site, entry, gen, 0, 0);
  }
  if (r.outermost) return pack(K_OUTERMOST, 0, m->system, site, entry, gen, 0, 0);
  unsigned rbp = r.rbp_kind == CH_RBP_AT_CFA ? 1 : r.rbp_kind == CH_RBP_UNKNOWN ? 2 : 0;
  if (r.complex || r.ra_off != -8 || !fits(r.cfa_off, 24) || !fits(r.rbp_off, 14))
    return pack(K_COMPLEX, rbp, m->system, site, entry, gen, 0, 0);
  return pack(r.cfa_kind == CH_CFA_RSP ? K_RSP : K_RBP, rbp, m->system, site, entry, gen,
              r.cfa_off, r.rbp_off);
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
  *rbp = rule.rbp_kind == CH_RBP_AT_CFA ? *(const uintptr_t *)(*cfa + (intptr_t)rule.rbp_off) : r->rbp;
  if (rule.ra_off != -8) return false;
  return true;
}

/* --------------------------------------------------------------- walk */

#define MAX_SPAN ((uintptr_t)1 << 30)   /* no stack is deeper than this */

/* The quick test on its own, for the common case where the caller of the
 * entry point is an application frame whose rule is cached: no walk state,
 * no locks, no allocation. */
/* What the innermost application frame's packed rule v says alone: a group,
 * CH_QUICK_COLD or CH_QUICK_WALK. (A stop site there is left to the walk,
 * which counts it on the "stop" path.) */
static inline int entry_verdict(uint64_t v) {
  if ((v & F_DECIDES) == F_DECIDES) return (int)ch_plan->sites[F_SITE(v)].group;
  if ((v & F_COLD) || (ch_plan->unknown_entry == CH_ENTRY_COLD && !(v & F_KNOWN))) return CH_QUICK_COLD;
  return CH_QUICK_WALK;
}

int ch_walk_quick(const uintptr_t *fp) {
  uint64_t v;
  if (CH_UNLIKELY(!fp || !cache) || !cache_get(fp[1], ch_modules_generation(), &v) || (v & F_SYSTEM))
    return CH_QUICK_WALK;
  return entry_verdict(v);
}

void ch_walk_stack(struct ch_walk *w, const uintptr_t *fp) {
  for (unsigned k = 0; k < CH_MAX_SITES / 64; k++) w->active[k] = 0;
  w->app_frames = 0;
  w->truncated = w->rejected = false;
  w->entry_group = w->stop_group = 0;
  if (CH_UNLIKELY(!cache)) { w->truncated = true; return; }
  struct ch_regs r;
  if (fp) {
    /* The entry point's frame: saved %rbp, then the return address. */
    r.rbp = fp[0];
    r.pc = fp[1];
    r.sp = (uintptr_t)(fp + 2);
  } else {
    cohort_capture_regs(&r);
  }
  unsigned gen = ch_modules_generation();
  uintptr_t sp0 = r.sp;
  bool rbp_known = true;
  for (unsigned depth = 0; depth < CH_MAX_FRAMES; depth++) {
    uint64_t v;
    if (!cache_get(r.pc, gen, &v)) {
      v = compute(r.pc, gen);
      cache_put(r.pc, gen, v);
    }
    if (!(v & F_SYSTEM)) {
      if (w->app_frames++ == 0) {
        /* The quick test: the innermost application frame decides alone. */
        int e = entry_verdict(v);
        if (e >= 0) { w->entry_group = (unsigned)e + 1; return; }
        if (e == CH_QUICK_COLD) { w->rejected = true; return; }
      }
      int site = F_SITE(v);
      if (v & F_STOP) { w->stop_group = ch_plan->sites[site].stop; return; }
      if (site >= 0) w->active[site >> 6] |= (uint64_t)1 << (site & 63);
    }
    uintptr_t cfa, rbp = r.rbp;
    switch (F_KIND(v)) {
    case K_OUTERMOST: return;
    case K_RSP: cfa = r.sp + (intptr_t)F_CFAOFF(v); break;
    case K_RBP:
      if (!rbp_known) { w->truncated = true; return; }
      cfa = r.rbp + (intptr_t)F_CFAOFF(v);
      break;
    case K_FP_GUESS:
      if (!rbp_known || r.rbp <= r.sp || r.rbp - sp0 > MAX_SPAN || (r.rbp & 7)) { w->truncated = true; return; }
      cfa = r.rbp + 16;
      rbp = *(const uintptr_t *)r.rbp;
      goto have_cfa;
    case K_COMPLEX:
      if (!step_complex(&r, &cfa, &rbp)) { w->truncated = true; return; }
      goto have_cfa;
    default: w->truncated = true; return;
    }
    if (cfa <= r.sp || cfa - sp0 > MAX_SPAN || (cfa & 7)) { w->truncated = true; return; }
    switch (F_RBP(v)) {
    case 1: rbp = *(const uintptr_t *)(cfa + (intptr_t)F_RBPOFF(v)); break;
    case 2: rbp_known = false; break;
    default: break;
    }
  have_cfa:
    if (cfa <= r.sp || cfa - sp0 > MAX_SPAN) { w->truncated = true; return; }
    uintptr_t ra = *(const uintptr_t *)(cfa - 8);
    if (ra == 0) return;   /* end of the chain */
    r.pc = ra;
    r.sp = cfa;
    r.rbp = rbp;
  }
  w->truncated = true;
}

void ch_unwind_init(void) {
  cache = ch_os_reserve(sizeof(struct slot) * CACHE_SIZE);
}
