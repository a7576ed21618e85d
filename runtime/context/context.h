/* Cohort runtime: the context layer: the loaded modules (modules.c), their unwind tables
 * (cfi.c), the cached stack walk (unwind.c). The decoders are decode.h.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_CONTEXT_H
#define COHORT_CONTEXT_H

#include "thread.h"
#include "plan.h"

/* ------------------------------------------------------------- modules.c */
struct ch_module {
  uintptr_t bias;               /* load bias: run-time address minus file address */
  uintptr_t lo, hi;             /* executable range */
  const uint8_t *eh_frame_hdr;  /* NULL if none */
  const char *path;
  uint8_t build_id[CH_BUILD_ID_MAX];
  unsigned build_id_len;
  bool system;                  /* not part of any context (docs/context.md) */
  bool writable_code;           /* an executable segment is also writable: never patched */
  bool is_main;
  int plan_module;              /* index in the plan, -1 if none */
  unsigned nload;
  struct { uintptr_t lo, hi; } load[8];   /* readable loaded segments */
  const void *dynamic;          /* its PT_DYNAMIC as loaded, or NULL */
};
/* Does [a, a + len) lie within one readable loaded segment of m? */
bool ch_module_maps(const struct ch_module *m, uintptr_t a, size_t len);
/* The symbol whose address the loader puts in m's GOT slot at `slot` (a
 * JUMP_SLOT or GLOB_DAT relocation's), or NULL: what a PLT entry reaches
 * before lazy binding has filled its slot. */
const char *ch_module_slot_symbol(const struct ch_module *m, uintptr_t slot);
void ch_modules_refresh(void);                        /* at start-up, and to notice modules loaded since */
/* What the layer above does with modules as they become known, set once at
 * start-up (init.c) so that this layer names no function above it: `found`
 * for each module as it is added (a plan binds its sites; under the
 * loader's lock), `added` for the new ones [from, to) once the loader's
 * lock is released (their selector sites are patched). */
struct ch_module_hooks {
  void (*found)(struct ch_module *m);
  void (*added)(unsigned from, unsigned to);
};
void ch_modules_set_hooks(const struct ch_module_hooks *h);
const struct ch_module *ch_module_for(uintptr_t pc);  /* refreshes on a miss */
/* The same, and *busy set when pc was in no module known and another thread
 * was refreshing them: NULL then says nothing about pc, and must not be
 * remembered. */
const struct ch_module *ch_module_find(uintptr_t pc, bool *busy);
/* Where pc lies, for the statistics: its module's ch_modules_at index (the
 * result; -1 if none holds it) and its address in that module's file
 * (*offset; pc itself if none). Looks the module up as ch_module_for does. */
int ch_module_place(uintptr_t pc, uintptr_t *offset);
const char *ch_base_name(const char *path);   /* the part after the last '/' */
/* Is m the module a file (a plan, a prefetch file) names? With a build id,
 * the module with that id; without one, the module of that path or file
 * name. */
bool ch_module_is(const struct ch_module *m, const uint8_t *build_id, unsigned build_id_len, const char *path);
unsigned ch_modules_generation(void);
bool ch_module_is_system_name(const char *path);
unsigned ch_modules_count(void);
struct ch_module *ch_modules_at(unsigned i);
void ch_modules_atfork_prepare(void);
void ch_modules_atfork_parent(void);
void ch_modules_atfork_child(void);

/* ----------------------------------------------------------------- cfi.c */
enum ch_cfa_kind { CH_CFA_RSP, CH_CFA_RBP, CH_CFA_EXPR };
enum ch_rbp_kind { CH_RBP_SAME, CH_RBP_AT_CFA, CH_RBP_UNKNOWN };
struct ch_cfi_rule {
  bool found;                   /* an FDE covers the pc */
  bool outermost;               /* return address undefined: the stack ends here */
  bool complex;                 /* needs the slow interpreter every time */
  enum ch_cfa_kind cfa_kind;
  int32_t cfa_off;
  enum ch_rbp_kind rbp_kind;
  int32_t rbp_off;
  int32_t ra_off;               /* return address at CFA + ra_off */
  const uint8_t *cfa_expr;      /* CH_CFA_EXPR */
  size_t cfa_expr_len;
};
struct ch_regs { uintptr_t pc, sp, rbp; };
bool ch_cfi_find(const struct ch_module *m, uintptr_t pc, struct ch_cfi_rule *out);
/* The function (FDE range) that contains pc: false if no FDE covers it. */
bool ch_cfi_function(const struct ch_module *m, uintptr_t pc, uintptr_t *start, uintptr_t *end);
/* Also where the last row of its unwind table at or below pc begins: an
 * instruction boundary at or above *start. */
bool ch_cfi_function_row(const struct ch_module *m, uintptr_t pc, uintptr_t *start, uintptr_t *end,
                         uintptr_t *row);
bool ch_cfi_each_function(const struct ch_module *m, bool (*f)(uintptr_t, uintptr_t, void *), void *ctx);
int ch_cfi_landing_pads(const struct ch_module *m, uintptr_t pc, uintptr_t *pads, int max);
bool ch_cfi_eval_expr(const uint8_t *e, size_t len, const struct ch_regs *r, uintptr_t *out);

/* -------------------------------------------------------------- unwind.c */
#define CH_MAX_FRAMES 256
struct ch_walk {
  uint64_t active[CH_MAX_SITES / 64];   /* plan sites found on the stack */
  bool truncated;                       /* stopped before the outermost frame */
  bool rejected;                        /* quick test: innermost site is cold (or next) */
  bool next;                            /* quick test: innermost site says next allocator */
  bool joined;                          /* the outer frames came from the thread's last walk */
  unsigned entry_group;                 /* quick test: group + 1 its site decides, or 0 */
  unsigned stop_group;                  /* group + 1 of the stop site that ended the walk, or 0 */
  int path_verdict;                     /* a decision path's verdict (a group, CH_QUICK_COLD or
                                           CH_QUICK_NEXT), or CH_QUICK_WALK: none decided */
  unsigned frames;                      /* frames walked past the entry */
};
void cohort_capture_regs(struct ch_regs *r);  /* asm: the caller's state at return */
/* Walk from the frame of the runtime entry point whose frame address is fp
 * (NULL: from the caller of ch_walk_stack itself). */
void ch_walk_stack(struct ch_walk *w, const uintptr_t *fp);
/* The quick test alone, from the entry point's frame: a group, or
 * CH_QUICK_COLD, CH_QUICK_WALK, CH_QUICK_NEXT (plan.h), or: */
#define CH_QUICK_UNSEEN (-4)  /* ch_walk_quick only: the caller is not a cached application frame */
#define CH_QUICK_UNNAMED (-5) /* a site the plan does not name, cold by its unknown-entry verdict: as
                                 CH_QUICK_COLD, but no direct stub is offered (it would look the
                                 site up in the plan on every request, and find nothing) */
#define CH_QUICK_PAST_COLD (-6) /* ch_walk_quick only: cold, as the first application frame past
                                   system frames says: nothing is offered or remembered at the
                                   return address, which is the system module's */
#define CH_QUICK_PAST_WALK (-7) /* ch_walk_quick only: the same for a `walk` verdict */
int ch_walk_quick(const uintptr_t *fp);
/* The quick test past system frames: what the innermost application frame
 * says (as ch_walk_quick), CH_QUICK_UNSEEN if the walk cannot reach it;
 * *at_caller: that frame is the entry point's caller (no system frame
 * between them). */
int ch_walk_entry(const uintptr_t *fp, bool *at_caller);
/* Every frame from the entry point's frame out, innermost first: fn gets
 * each application frame that has a plan site, with the stack address its
 * return address was read from. false: the walk was cut short. */
bool ch_walk_sites(const uintptr_t *fp, void (*fn)(void *arg, uintptr_t slot, int site), void *arg);
/* The return addresses of the frames from the entry point's frame outwards,
 * innermost first, one at a time: ch_frames_next gives the next one and
 * whether it lies in a system module; false when the walk has ended. */
struct ch_frames {
  struct ch_regs r;
  uintptr_t tag, sp0;
  bool fixed;       /* every frame stepped so far had CFA = %rsp + a constant */
  bool done;
  bool unsure;      /* a frame's module could not be looked up (another thread was
                       refreshing them): the walk ended there, and says nothing */
};
bool ch_frames_start(struct ch_frames *it, const uintptr_t *fp);
bool ch_frames_next(struct ch_frames *it, uintptr_t *pc, bool *system);
void ch_unwind_init(void);
/* The plan's site at a return address and its entry verdict (-1 and
 * CH_ENTRY_UNKNOWN where none), for the rules the walk caches: set once at
 * start-up (init.c), so that this layer names no function of the plan's. */
void ch_unwind_set_sites(int (*site_at)(uintptr_t pc, int *entry));
extern atomic_ulong ch_unwind_slow;     /* pc-cache misses */

#endif
