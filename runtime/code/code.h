/* Cohort runtime: the code layer, everything that reads or writes the
 * program's text: patched selector call sites, their stubs and the one way
 * code is written (patch.c), and whether a call site's function is an
 * allocation wrapper (wrapper.c). The thread state the stubs write (the
 * activations, the stop sites' records) is laid out here, for the stubs.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_CODE_H
#define COHORT_CODE_H

#include "bind.h"

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

/* The thread state the stubs write (activation.c reads it). */
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
/* Per stop site, what its records are checked against: the return address
 * of its call (1: none, while some stop site could not be patched), and
 * its stop group. The table lies in the low 2 GiB (patch.c), so that a
 * stub writes an entry's address as a 32-bit immediate; NULL: no stop
 * site's stub can be made. */
struct ch_stop_site { uintptr_t ret; uint32_t group, pad; };
extern struct ch_stop_site *ch_stop_sites;

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

#endif
