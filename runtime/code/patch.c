/* Cohort runtime: patched selector call sites.
 *
 * A selector site (a plan site in a select line, or a stop site) is the
 * return address of a call. Where that call is a direct `call rel32`, found
 * by decoding the function from its start (Zydis), its displacement is
 * rewritten to reach a stub of its own, within +-2 GiB. The stub records the
 * activation on the thread's stack of activations (activation.c) and jumps
 * to the original target: the callee runs with exactly the stack and
 * registers it would have had, its return address is the original one, so
 * exceptions, backtrace(), gdb and Valgrind see nothing new, and stack
 * arguments need no copying. The stub saves the three registers it uses in
 * the red zone (below the return address, where the callee's frame is not
 * yet; signal frames skip the red zone) and restores them, so no register
 * changes: callers compiled with interprocedural register allocation may
 * keep values in any register the callee does not touch. It does change
 * the status flags, which the psABI does not preserve across calls.
 * Code pages go writable only while they are written: before main, when the
 * process has one thread, as read-write then back to read-execute; later
 * (a module loaded by dlopen) as read-write-execute, with one aligned 4-byte
 * store per call, and only for calls whose displacement is 4-byte aligned.
 * Anything that fails a check is left unpatched, counted by reason, with
 * one warning per module; those sites keep the walk. */
#define _GNU_SOURCE
#include "code.h"

#include "decode.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

uint64_t ch_patch_bit[CH_MAX_SITES];
uint32_t ch_patch_stop[CH_MAX_SITES];
uint8_t ch_patch_on[CH_MAX_SITES];
struct ch_stop_site *ch_stop_sites;
bool ch_patch_stops_whole;
int ch_patch_empty_verdict = CH_ACT_WALK;
bool ch_stops_own;
atomic_uint ch_patch_gen;
struct ch_patch_stats ch_patch_stats;
atomic_ulong ch_patch_unpatched_by[CH_PATCH_REASONS];

/* Why a site was left unpatched. Only the reasons that say the plan does
 * not fit this process, or that the process refused, are warned about; an
 * indirect call, or a site beyond the 64 selector bits, is ordinary and only
 * counted. */
enum reason { R_INDIRECT, R_NO_FUNCTION, R_NO_BIT, R_UNALIGNED, R_WRITABLE_CODE, R_NOT_CALL,
              R_OUTSIDE, R_NOT_WRITABLE, R_NO_STUB_SPACE };
#define R_FIRST_WARNED R_NOT_CALL
_Static_assert(R_NO_STUB_SPACE + 1 == CH_PATCH_REASONS, "one name per reason");
const char *const ch_patch_reason_names[CH_PATCH_REASONS] = {
  "indirect_call", "no_function", "no_selector_bit", "unaligned_late", "writable_code",
  "not_a_call", "outside_code", "not_writable", "no_stub_space",
};
static const char *const reason_text[CH_PATCH_REASONS] = {
  "an indirect call", "no unwind entry for its function", "more than 64 selector sites",
  "loaded late, and its displacement crosses an 8-byte word", "the code segment is writable",
  "no call instruction ends at the site: is the plan for this build?",
  "outside the module's code: is the plan for this build?",
  "the code cannot be made writable", "no memory for stubs within reach",
};

/* ------------------------------------------------------------- the stub */

/* Offsets into struct ch_act and its entries: checked in activation.c. */
#define STR_(x) #x
#define STR(x) STR_(x)
__asm__(
  ".text\n"
  ".p2align 4\n"
  ".globl cohort_stub_template\n"
  ".hidden cohort_stub_template\n"
  "cohort_stub_template:\n"
  "  movq %rax, -8(%rsp)\n"
  "  movq %rcx, -16(%rsp)\n"
  "  movq %rdx, -24(%rsp)\n"
  "  movq %fs:0, %rax\n"
  "  addq .Lc_tls(%rip), %rax\n"          /* rax: this thread's struct ch_act */
  "  cmpq %rsp, 8(%rax)\n"                /* lo > %rsp: not this thread's stack */
  "  ja .Lskip\n"
  "  cmpq %rsp, 16(%rax)\n"               /* hi <= %rsp (hi 0: disarmed) */
  "  jbe .Lskip\n"
  "  movq (%rax), %rcx\n"                 /* rcx: the top entry */
  ".Lpop:\n"                              /* entries at or below our slot have returned */
  "  cmpq %rsp, (%rcx)\n"
  "  ja .Lverify\n"
  "  subq $32, %rcx\n"
  "  jmp .Lpop\n"
  ".Lverify:\n"                           /* and those whose slot was reused */
  "  leaq 56(%rax), %rdx\n"
  "  cmpq %rdx, %rcx\n"
  "  je .Lpush\n"
  "  movq (%rcx), %rdx\n"
  "  movq (%rdx), %rdx\n"
  "  cmpq 8(%rcx), %rdx\n"
  "  je .Lpush\n"
  "  subq $32, %rcx\n"
  "  jmp .Lverify\n"
  ".Lpush:\n"
  "  movq %rcx, (%rax)\n"
  "  movq 16(%rcx), %rdx\n"               /* nothing new (recursion): no entry */
  "  orq .Lc_bit(%rip), %rdx\n"
  "  cmpq 16(%rcx), %rdx\n"
  "  jne .Lnew\n"
  "  movl .Lc_stop(%rip), %edx\n"
  "  testl %edx, %edx\n"
  "  jz .Lskip\n"
  "  cmpl 24(%rcx), %edx\n"
  "  je .Lskip\n"
  ".Lnew:\n"
  "  leaq " STR(56 + 32 * CH_ACT_CAP) "(%rax), %rdx\n"
  "  cmpq %rdx, %rcx\n"
  "  jae .Lfull\n"
  "  movq 16(%rcx), %rdx\n"
  "  orq .Lc_bit(%rip), %rdx\n"
  "  movq %rdx, 48(%rcx)\n"               /* mask */
  "  movl 24(%rcx), %edx\n"
  "  cmpl $0, .Lc_stop(%rip)\n"
  "  cmovnel .Lc_stop(%rip), %edx\n"
  "  movq %rdx, 56(%rcx)\n"               /* stop, and decision 0 */
  "  movq .Lc_ret(%rip), %rdx\n"
  "  movq %rdx, 40(%rcx)\n"               /* ret */
  "  movq %rsp, 32(%rcx)\n"               /* sp last: the entry is whole before it can match */
  "  addq $32, %rcx\n"
  "  movq %rcx, (%rax)\n"
  ".Lskip:\n"
  "  movq -8(%rsp), %rax\n"
  "  movq -16(%rsp), %rcx\n"
  "  movq -24(%rsp), %rdx\n"
  "  cmpb $0, .Lc_act(%rip)\n"           /* an entry's variant: the slot for the activations */
  "  je .Lgo\n"
  "  movq %rsp, %rsi\n"
  ".Lgo:\n"
  "  jmp *.Lc_target(%rip)\n"
  ".Lfull:\n"                             /* disarm: the next allocation seeds again */
  "  movq $0, 16(%rax)\n"
  "  jmp .Lskip\n"
  "  .p2align 3\n"
  ".globl cohort_stub_consts\n"
  ".hidden cohort_stub_consts\n"
  "cohort_stub_consts:\n"
  ".Lc_target: .quad 0\n"
  ".Lc_ret: .quad 0\n"
  ".Lc_bit: .quad 0\n"
  ".Lc_stop: .quad 0\n"
  ".Lc_tls: .quad 0\n"
  ".Lc_act: .quad 0\n"
  ".globl cohort_stub_end\n"
  ".hidden cohort_stub_end\n"
  "cohort_stub_end:\n");
extern const char cohort_stub_template[], cohort_stub_consts[], cohort_stub_end[];

/* A stop site's stub. Its fast path, four instructions and the jump, is
 * for a call at or above the last record's slot (the call that left it has
 * returned): it writes the site, then the slot (a signal handler that allocates in between sees
 * a slot that, if live, holds this site's return address). The %fs:
 * operands name fields of struct ch_stops; the stub's maker adds the
 * struct's offset from the thread pointer to their displacements. The slow
 * path (the last record lies above the call: recursion, a nested stop, or
 * a call that returned from higher up) keeps the last record in rec when
 * it is live on this thread's stack and of another stop group. Offsets:
 * checked in activation.c. */
__asm__(
  ".text\n"
  ".p2align 4\n"
  ".globl cohort_stop_template\n"
  ".hidden cohort_stop_template\n"
  "cohort_stop_template:\n"
  "  cmpq %rsp, %fs:0\n"                  /* last above this call? */
  "  ja .Ls_slow\n"
  "  movq $0, %fs:8\n"                    /* site: the immediate is the stub's */
  "  movq %rsp, %fs:0\n"                  /* last */
  "  jmp *.Ls_target(%rip)\n"
  ".globl cohort_stop_slow\n"
  ".hidden cohort_stop_slow\n"
  "cohort_stop_slow:\n"
  ".Ls_slow:\n"
  "  movq %rax, -8(%rsp)\n"
  "  movq %rcx, -16(%rsp)\n"
  "  movq %rdx, -24(%rsp)\n"
  "  movq %fs:0, %rax\n"
  "  addq .Ls_tls(%rip), %rax\n"           /* rax: this thread's struct ch_stops */
  "  cmpq %rsp, 16(%rax)\n"                /* lo > %rsp: another stack: keep nothing */
  "  ja .Ls_done\n"
  "  cmpq %rsp, 24(%rax)\n"                /* hi <= %rsp (0 before the stack is known) */
  "  jbe .Ls_done\n"
  "  cmpb $0, 37(%rax)\n"                  /* interrupted another writer (a signal handler's call) */
  "  jne .Ls_lost\n"
  "  movb $1, 37(%rax)\n"
  "  movq (%rax), %rcx\n"                  /* rcx: the last record's slot, above %rsp */
  "  cmpq 24(%rax), %rcx\n"                /* beyond this stack: not ours, replace it */
  "  jae .Ls_store\n"
  "  movq 8(%rax), %rdx\n"                 /* rdx: its site's struct ch_stop_site */
  "  movq (%rcx), %rcx\n"
  "  cmpq (%rdx), %rcx\n"                  /* its slot no longer holds the return address: returned */
  "  jne .Ls_store\n"
  "  movl 8(%rdx), %edx\n"
  "  cmpl .Ls_group(%rip), %edx\n"         /* live, of our stop group: it decides as we would */
  "  je .Ls_unbusy\n"
  ".Ls_pop:\n"                             /* kept records at or below this call have returned */
  "  movl 32(%rax), %edx\n"
  "  testl %edx, %edx\n"
  "  jz .Ls_keep\n"
  "  shlq $4, %rdx\n"
  "  cmpq %rsp, 32(%rax,%rdx)\n"           /* rec[n - 1].slot */
  "  ja .Ls_keep\n"
  "  decl 32(%rax)\n"
  "  jmp .Ls_pop\n"
  ".Ls_keep:\n"                            /* live, of another group: keep it */
  "  movl 32(%rax), %edx\n"
  "  cmpl $" STR(CH_STOP_CAP) ", %edx\n"
  "  jae .Ls_full\n"
  "  shlq $4, %rdx\n"
  "  addq %rax, %rdx\n"
  "  movq (%rax), %rcx\n"
  "  movq %rcx, 48(%rdx)\n"                /* rec[n].slot */
  "  movq 8(%rax), %rcx\n"
  "  movq %rcx, 56(%rdx)\n"                /* rec[n].site */
  "  incl 32(%rax)\n"                      /* n last: the record is whole before it counts */
  ".Ls_store:\n"
  "  movq .Ls_site(%rip), %rdx\n"
  "  movq %rdx, 8(%rax)\n"
  "  movq %rsp, (%rax)\n"
  ".Ls_unbusy:\n"
  "  movb $0, 37(%rax)\n"
  ".Ls_done:\n"
  "  movq -8(%rsp), %rax\n"
  "  movq -16(%rsp), %rcx\n"
  "  movq -24(%rsp), %rdx\n"
  "  jmp *.Ls_target(%rip)\n"
  ".Ls_full:\n"                            /* the next allocation seeds again */
  "  movb $1, 36(%rax)\n"
  "  jmp .Ls_store\n"
  ".Ls_lost:\n"                            /* the interrupted writer's records cannot be trusted */
  "  movb $1, 36(%rax)\n"
  "  jmp .Ls_done\n"
  "  .p2align 3\n"
  ".globl cohort_stop_consts\n"
  ".hidden cohort_stop_consts\n"
  "cohort_stop_consts:\n"
  ".Ls_target: .quad 0\n"
  ".Ls_site: .quad 0\n"
  ".Ls_tls: .quad 0\n"
  ".Ls_group: .long 0\n"
  ".Ls_pad: .long 0\n"
  ".globl cohort_stop_end\n"
  ".hidden cohort_stop_end\n"
  "cohort_stop_end:\n");
extern const char cohort_stop_template[], cohort_stop_slow[], cohort_stop_consts[], cohort_stop_end[];
struct stop_consts { uintptr_t target; const struct ch_stop_site *site; intptr_t tls; uint32_t group, pad; };
struct stub_consts { uintptr_t target, ret; uint64_t bit; uint64_t stop; intptr_t tls; uint64_t act; };
#define STUB_SIZE 320   /* the template is 288 bytes */

/* ------------------------------------------------------------ the table */

/* What the bits can decide, rebuilt whenever the patched set changes and
 * published whole (never changed in place). */
struct pconj { uint64_t need; int group; bool incomplete, never; };
struct ptable { unsigned nconj; bool stops_incomplete; struct pconj c[]; };
static _Atomic(struct ptable *) table;
static bool wants[CH_MAX_SITES];   /* a selector or stop site */
/* A site whose entry verdict decides (group=G, next, cold) is on the stack
 * only as the entry: its call goes straight into the allocator or a system
 * library, else the callee would be the entry. The quick test decides those
 * allocations before any activation is read, so such a site is not patched
 * (its stub would cost every allocation through it), and a select line that
 * needs it cannot match from the bits. The one case this misses is a system
 * function that calls back into the program, which then allocates (qsort's
 * comparator): the walk would see the site there, the bits do not. */
static inline bool entry_only(const struct ch_plan_site *st) {
  return !st->stop && (st->entry == CH_ENTRY_GROUP || st->entry == CH_ENTRY_NEXT || st->entry == CH_ENTRY_COLD);
}

/* The bits the thread's activations asked about lately, and their
 * verdicts, one slot per hash of the bits. A selector site at an
 * allocation's entry (a program's own malloc wrapper) pushes a new
 * activation for every allocation, whose decision is never known yet:
 * Debian's perl paid a pass over 14 conjunctions, 80 instructions, for
 * nearly every allocation. With one slot, allocations that alternate
 * between two contexts (allocbench alt: two chains, each with its selector)
 * missed every time; MEMO_SLOTS slots keep a few contexts apart. seq is odd
 * while the memo is written: a signal handler that interrupted the write
 * neither reads nor writes it, and a read that a handler's write
 * interrupted (seq moved) is not used. */
#define MEMO_BITS 3
#define MEMO_SLOTS (1u << MEMO_BITS)
static CH_TLS struct verdict_memo {
  unsigned seq;
  struct { const struct ptable *t; uint64_t mask; int verdict; } slot[MEMO_SLOTS];
} memo;
static inline unsigned memo_slot(uint64_t mask) {
  return (unsigned)((mask * 0x9E3779B97F4A7C15ull) >> (64 - MEMO_BITS));   /* the product's top bits */
}

static int conj_verdict(const struct ptable *t, uint64_t mask) {
  for (unsigned i = 0; i < t->nconj; i++) {
    const struct pconj *c = &t->c[i];
    if (!c->never && (mask & c->need) == c->need) return c->incomplete ? CH_ACT_WALK : c->group;
  }
  return CH_ACT_REST;
}

int ch_patch_verdict(uint64_t mask, uint32_t stop) {
  const struct ptable *t = atomic_load_explicit(&table, memory_order_acquire);
  if (!t || t->stops_incomplete) return CH_ACT_WALK;
  if (stop) return (int)stop - 1;
  struct verdict_memo *m = &memo;
  unsigned seq = m->seq, i = memo_slot(mask);
  atomic_signal_fence(memory_order_seq_cst);
  if (seq & 1) return conj_verdict(t, mask);
  bool hit = m->slot[i].t == t && m->slot[i].mask == mask;
  int v = m->slot[i].verdict;
  atomic_signal_fence(memory_order_seq_cst);
  if (hit && m->seq == seq) return v;
  v = conj_verdict(t, mask);
  m->seq = seq + 1;
  atomic_signal_fence(memory_order_seq_cst);
  m->slot[i].t = t;
  m->slot[i].mask = mask;
  m->slot[i].verdict = v;
  atomic_signal_fence(memory_order_seq_cst);
  m->seq = seq + 2;
  return v;
}

static bool in_conj(const struct ch_plan_conj *cj, unsigned s) { return cj->mask[s >> 6] >> (s & 63) & 1; }

/* A site whose module is not loaded cannot be on any stack: a selector
 * needing it cannot match. One loaded but not patched leaves the bits unable
 * to decide wherever it matters. */
/* An unpatched stop site could be inner to any record: withdraw the patched
 * ones' return addresses (1 is none), so that no record is live to
 * ch_act_fast, which checks nothing else, and no empty stack decides. */
static void withdraw_stops(void) {
  __atomic_store_n(&ch_patch_empty_verdict, CH_ACT_WALK, __ATOMIC_RELAXED);
  __atomic_store_n(&ch_patch_stops_whole, false, __ATOMIC_RELAXED);
  for (unsigned s = 0; s < ch_plan->nsites; s++)
    if (ch_patch_stop[s] && ch_stop_sites) __atomic_store_n(&ch_stop_sites[s].ret, 1, __ATOMIC_RELAXED);
}

static void publish_table(void) {
  const struct ch_plan *pl = ch_plan;
  /* Until the new table is out, an empty stack decides nothing. */
  __atomic_store_n(&ch_patch_empty_verdict, CH_ACT_WALK, __ATOMIC_RELAXED);
  struct ptable *t = ch_meta_alloc(sizeof *t + pl->nconj * sizeof(struct pconj));
  if (!t) { withdraw_stops(); return; }   /* the old table stays: no record may decide past it */
  t->nconj = pl->nconj;
  for (unsigned s = 0; s < pl->nsites; s++)
    if (ch_patch_stop[s] && pl->sites[s].addr && !ch_patch_on[s]) t->stops_incomplete = true;
  if (t->stops_incomplete) withdraw_stops();
  for (unsigned i = 0; i < pl->nconj; i++) {
    struct pconj *c = &t->c[i];
    c->group = (int)pl->conj[i].group;
    for (unsigned s = 0; s < pl->nsites; s++) {
      if (!in_conj(&pl->conj[i], s)) continue;
      if (ch_patch_on[s]) c->need |= ch_patch_bit[s];
      else if (!pl->sites[s].addr || entry_only(&pl->sites[s])) c->never = true;
      else c->incomplete = true;
    }
  }
  atomic_store_explicit(&table, t, memory_order_release);
  if (!t->stops_incomplete) {
    __atomic_store_n(&ch_patch_stops_whole, true, __ATOMIC_RELAXED);
    __atomic_store_n(&ch_patch_empty_verdict, conj_verdict(t, 0), __ATOMIC_RELAXED);
  }
}

/* ------------------------------------------------------------- checking */

static void (*register_frame)(void *);

/* The decoders ready (decode.c), and libgcc's __register_frame, for every
 * user of patched code (selector stubs, direct sites, DPA's hints, MO's
 * prefetches); false: no decoder. */
bool ch_patch_code_init(void) {
  static int state;   /* 0: not yet, 1: ready, -1: failed; set at start-up */
  if (!state) {
    state = ch_decode_ready() ? 1 : -1;
    register_frame = (void (*)(void *))dlsym(RTLD_DEFAULT, "__register_frame");
  }
  return state > 0;
}

/* A stub template is one mov, then `jmp *disp32(%rip)`, which ends it. */
bool ch_patch_read_template(const char *t, const char *end, struct ch_stub_template *out) {
  ZydisDecodedInstruction ins;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  size_t len = (size_t)(end - t);
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, t, len, &ins, ops))) return false;
  out->imm_at = ins.raw.imm[0].size == 32 ? ins.raw.imm[0].offset : 0;
  out->disp_at = ins.raw.disp.size == 32 ? ins.raw.disp.offset : 0;
  size_t first = ins.length;
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, t + first, len - first, &ins, ops)) ||
      ins.mnemonic != ZYDIS_MNEMONIC_JMP || ins.raw.disp.size != 32 || first + ins.length != len)
    return false;
  out->jmp_disp_at = first + ins.raw.disp.offset;
  out->size = len;
  return true;
}

void ch_patch_put_stub(uint8_t *r, size_t at, const char *t, const struct ch_stub_template *l, size_t slot_at) {
  memcpy(r + at, t, l->size);
  /* The displacement is relative to the end of the jump, which ends the stub. */
  int32_t disp = (int32_t)(slot_at - (at + l->size));
  memcpy(r + at + l->jmp_disp_at, &disp, 4);
}

/* Instruction boundaries already found in a function, so that the walk to
 * the next of its calls starts from the last one below it instead of from
 * the function's start: a large function with many allocation sites was
 * decoded from its start for each (cppcheck's plan: 42 M of Zydis's
 * instructions at start-up for 227 sites, 3.5% of its training run). A
 * boundary found by decoding from the start is one whatever the walk began
 * at, so the calls found are the same. Direct-mapped by function start;
 * marks at least MARK_GAP bytes apart, in increasing order. */
#define MEMO_FUNCS 64
#define MEMO_MARKS 32
#define MARK_GAP 256
static struct { uintptr_t start; unsigned n; uintptr_t mark[MEMO_MARKS]; } fn_bounds[MEMO_FUNCS];
static ch_lock_t fn_bounds_lock;

/* The last known boundary of the function at start below `below` (start itself if none). */
static uintptr_t fn_bounds_from(uintptr_t start, uintptr_t below) {
  uintptr_t from = start;
  if (!ch_trylock(&fn_bounds_lock)) return from;   /* never wait inside an allocation: decode it all */
  unsigned k = (unsigned)((start >> 4) % MEMO_FUNCS);
  if (fn_bounds[k].start == start)
    for (unsigned i = 0; i < fn_bounds[k].n && fn_bounds[k].mark[i] < below; i++) from = fn_bounds[k].mark[i];
  ch_unlock(&fn_bounds_lock);
  return from;
}

/* Keep boundaries from a walk of the function at start, beyond its last. */
static void fn_bounds_keep(uintptr_t start, const uintptr_t *marks, unsigned n) {
  if (!n || !ch_trylock(&fn_bounds_lock)) return;
  unsigned k = (unsigned)((start >> 4) % MEMO_FUNCS);
  if (fn_bounds[k].start != start) { fn_bounds[k].start = start; fn_bounds[k].n = 0; }
  for (unsigned i = 0; i < n && fn_bounds[k].n < MEMO_MARKS; i++) {
    uintptr_t last = fn_bounds[k].n ? fn_bounds[k].mark[fn_bounds[k].n - 1] : start;
    if (marks[i] >= last + MARK_GAP) fn_bounds[k].mark[fn_bounds[k].n++] = marks[i];
  }
  ch_unlock(&fn_bounds_lock);
}

/* The call whose return address is ret, if it is a direct call rel32 at an
 * instruction boundary of its function: its target. */
int ch_patch_check_call(const struct ch_module *m, uintptr_t ret, uintptr_t *target) {
  uintptr_t call = ret - 5, start, end;
  if (call < m->lo || ret > m->hi) return R_OUTSIDE;
  uintptr_t row;
  if (!ch_cfi_function_row(m, ret - 1, &start, &end, &row) || start < m->lo || end > m->hi || ret > end)
    return R_NO_FUNCTION;
  ZydisDecodedInstruction ins;
  /* From the nearest boundary below the call: one found before, or where a
   * row of the unwind table begins (below ret - 1, so not inside the call:
   * nothing begins inside an instruction). */
  uintptr_t pc = fn_bounds_from(start, ret), marks[MEMO_MARKS], last;
  if (row > pc) pc = row;
  last = pc;
  unsigned n = 0;
  for (;;) {   /* to the instruction that ends at the return address */
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&ch_decoder_lengths, NULL, (const void *)pc, end - pc, &ins)))
      return R_NOT_CALL;
    if (pc + ins.length >= ret) break;
    pc += ins.length;
    if (pc >= last + MARK_GAP && n < MEMO_MARKS) last = marks[n++] = pc;
  }
  fn_bounds_keep(start, marks, n);
  if (pc + ins.length != ret || ins.mnemonic != ZYDIS_MNEMONIC_CALL) return R_NOT_CALL;
  if (ins.length != 5 || ins.opcode != 0xe8 || !(ins.attributes & ZYDIS_ATTRIB_IS_RELATIVE)) return R_INDIRECT;
  int32_t disp;
  memcpy(&disp, (const void *)(call + 1), 4);
  *target = ret + (intptr_t)disp;
  if (!ch_module_for(*target)) return R_OUTSIDE;
  return -1;
}

/* ------------------------------------------------------------ the stubs */

static bool within_2g(uintptr_t a, uintptr_t b) {
  intptr_t d = (intptr_t)(a - b);
  return d > -((intptr_t)1 << 31) + (1 << 20) && d < ((intptr_t)1 << 31) - (1 << 20);
}

/* Memory for stubs within reach of every byte of [lo, hi). Below the
 * module at every distance before any above it: above the executable is
 * where glibc's brk heap grows, and stubs there, a megabyte past its end,
 * would stop that heap where brk happened to start closer (glibc then
 * takes memory elsewhere, and the next allocator's objects move: the
 * layout of a run would depend on the kernel's randomisation). */
void *ch_patch_map_near(uintptr_t lo, uintptr_t hi, size_t size) {
  const uintptr_t step = 1u << 20, page = ch_page_size();
  for (int above = 0; above < 2; above++) {
    for (uintptr_t d = step; d < ((uintptr_t)1 << 30); d += step) {
      if (!above && lo < d + size + (1u << 16)) break;   /* below address 64 KiB */
      uintptr_t a = (above ? hi + d : lo - d - size) & ~(page - 1);
      if (a < (1u << 16) || !within_2g(a, lo) || !within_2g(a + size, hi)) continue;
      void *p = mmap((void *)a, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED) continue;
      if ((uintptr_t)p == a) return p;
      munmap(p, size);   /* a kernel that took the address as a hint only */
    }
  }
  return NULL;
}

/* .eh_frame for the stubs: one CIE whose initial rule (CFA = %rsp + 8, return
 * address at CFA - 8) holds at every instruction of a stub, and one FDE
 * covering them all. */
void ch_patch_stub_unwind(uint8_t *p, uintptr_t code, size_t len) {
  static const uint8_t cie[] = {
    20, 0, 0, 0,  0, 0, 0, 0,          /* length, CIE id */
    1, 'z', 'R', 0,                     /* version, augmentation */
    1, 0x78, 16,                        /* code align 1, data align -8, return address: r16 */
    1, 0x00,                            /* augmentation data: FDE pointers absolute, 8 bytes */
    0x0c, 7, 8,                         /* DW_CFA_def_cfa %rsp, 8 */
    0x90, 1,                            /* DW_CFA_offset r16, CFA - 8 */
    0, 0,                               /* padding */
  };
  memcpy(p, cie, sizeof cie);
  uint8_t *f = p + sizeof cie;
  uint32_t flen = 4 + 8 + 8 + 1 + 3, cie_ptr = (uint32_t)(f + 4 - p);
  memcpy(f, &flen, 4);
  memcpy(f + 4, &cie_ptr, 4);
  uint64_t b = code, r = len;
  memcpy(f + 8, &b, 8);
  memcpy(f + 16, &r, 8);
  memset(f + 24, 0, 4);                 /* augmentation length 0, padding */
  memset(f + 28, 0, 4);                 /* terminator */
}

void ch_patch_register_unwind(uint8_t *eh) { if (register_frame) register_frame(eh); }

/* Held while code is written (pages change protection meanwhile). */
static ch_lock_t patch_lock;
bool ch_patch_trylock(void) { return ch_trylock(&patch_lock); }
void ch_patch_unlock(void) { ch_unlock(&patch_lock); }

/* ------------------------------------------------------------- patching */

bool ch_patch_one_thread(void) {
  char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p) return false;
  for (int field = 2; field < 20 && p; field++) p = strchr(p + 1, ' ');   /* to field 20 */
  return p && p[1] == '1' && p[2] == ' ';
}

/* A live patch changes a displacement with one atomic store that covers it,
 * so a thread running the call meanwhile fetches the old or the new one,
 * never a mix: the four bytes must lie within one aligned 8-byte word. */
bool ch_patch_live_ok(uintptr_t at) { return (at & 7) <= 4; }

/* Every write into code goes through here (direct.c, hint.c and
 * prefetch.c as well). Live, the pages stay executable and the four bytes
 * of a call's displacement change by one atomic store of the aligned
 * 8-byte word that holds them; otherwise (one thread) the pages lose their
 * execute permission while written, with signals held, so that no handler
 * (a profiler's SIGPROF) runs them meanwhile. Valgrind (cohort bench
 * measures under cachegrind) keeps translations of code it has run: it is
 * told to translate the bytes again. */
static bool write_code(uintptr_t at, const void *bytes, size_t len, bool live) {
  uintptr_t page = ch_page_size(), first = at & ~(page - 1), last = (at + len - 1) & ~(page - 1);
  size_t span = last + page - first;
  sigset_t all, old;
  if (!live) {
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
  }
  bool ok = mprotect((void *)first, span, PROT_READ | PROT_WRITE | (live ? PROT_EXEC : 0)) == 0;
  if (ok) {
    if (live) {   /* len 4, within one aligned word: ch_patch_live_ok */
      uint64_t *w = (uint64_t *)(at & ~(uintptr_t)7), v = __atomic_load_n(w, __ATOMIC_RELAXED);
      memcpy((char *)&v + (at & 7), bytes, len);
      __atomic_store_n(w, v, __ATOMIC_RELEASE);
    } else {
      memcpy((void *)at, bytes, len);
    }
    VALGRIND_DISCARD_TRANSLATIONS(at, len);
    ok = mprotect((void *)first, span, PROT_READ | PROT_EXEC) == 0;
  }
  if (!live) pthread_sigmask(SIG_SETMASK, &old, NULL);
  return ok;
}

bool ch_patch_write_disp(uintptr_t at, int32_t disp, bool live) {
  if (live && !ch_patch_live_ok(at)) return false;
  return write_code(at, &disp, 4, live);
}

bool ch_patch_write_code(uintptr_t at, const void *bytes, size_t len) { return write_code(at, bytes, len, false); }

/* Stubs are written while their region is read-write and nothing reaches
 * them; then it becomes read-execute, for good. */
bool ch_patch_seal(void *region, size_t size) { return mprotect(region, size, PROT_READ | PROT_EXEC) == 0; }

struct todo { unsigned site; uintptr_t ret, target; };

static bool stop_stub(uint8_t *stub, unsigned s, uintptr_t target, intptr_t tls);
/* The stop template decodes as its maker expects (once). */
static bool stop_template_ok(void) {
  static int ok = -1;
  static uint8_t scratch[STUB_SIZE];
  if (ok < 0)
    ok = ch_stop_sites && (size_t)(cohort_stop_end - cohort_stop_template) <= STUB_SIZE &&
         (size_t)(cohort_stop_end - cohort_stop_consts) == sizeof(struct stop_consts) && stop_stub(scratch, 0, 0, 0);
  return ok;
}

/* A stop site's stub at stub: the template, its constants, and in its fast
 * path the struct's offset added to each %fs: displacement and the site
 * put in the one immediate (Zydis finds them). */
static bool stop_stub(uint8_t *stub, unsigned s, uintptr_t target, intptr_t tls) {
  size_t size = (size_t)(cohort_stop_end - cohort_stop_template), fast = (size_t)(cohort_stop_slow - cohort_stop_template);
  memcpy(stub, cohort_stop_template, size);
  struct stop_consts c = {target, &ch_stop_sites[s], tls, ch_patch_stop[s] - 1, 0};
  memcpy(stub + (cohort_stop_consts - cohort_stop_template), &c, sizeof c);
  ZydisDecodedInstruction ins;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  for (size_t at = 0; at < fast; at += ins.length) {
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, stub + at, size - at, &ins, ops))) return false;
    for (unsigned k = 0; k < ins.operand_count_visible; k++) {
      if (ops[k].type != ZYDIS_OPERAND_TYPE_MEMORY || ops[k].mem.segment != ZYDIS_REGISTER_FS) continue;
      int32_t d;
      if (ins.raw.disp.size != 32) return false;
      memcpy(&d, stub + at + ins.raw.disp.offset, 4);
      int64_t to = (int64_t)d + tls;
      if (to < INT32_MIN || to > INT32_MAX) return false;   /* static TLS lies within 2 GiB of %fs */
      d = (int32_t)to;
      memcpy(stub + at + ins.raw.disp.offset, &d, 4);
    }
    if (ins.mnemonic == ZYDIS_MNEMONIC_MOV && ins.raw.imm[0].size == 32) {   /* below 2 GiB: see ch_patch_init */
      uint32_t to = (uint32_t)(uintptr_t)&ch_stop_sites[s];
      memcpy(stub + at + ins.raw.imm[0].offset, &to, 4);
    }
  }
  return true;
}

/* A selector site that is also a `walk` entry (a program's own malloc
 * wrapper: its one call of malloc is a selector too) gets two more stubs:
 * variants that record the activation as its stub does, then enter
 * ch_direct_act_malloc or ch_direct_act_new with the slot of the return
 * address, so the activations decide at once. direct.c sends the call to
 * the variant of its kind once an allocation shows which it reaches (under
 * lazy binding only then does the PLT slot say): the allocation skips the
 * quick test, the probe of the activations and the offer that a wrapper's
 * every allocation paid (docs/runtime.md, "Direct sites"). */
static uintptr_t act_entry[2];                   /* ch_direct_act_malloc, ch_direct_act_new */
static uintptr_t entry_stub[CH_MAX_SITES][2];    /* the variants, or 0 */
static uintptr_t entry_target[CH_MAX_SITES];     /* the call's own target */

static intptr_t act_tls, stops_tls;               /* activation.c's thread state, from %fs:0 */
void ch_patch_set_targets(const struct ch_patch_targets *t) {
  act_entry[0] = t->act_malloc;
  act_entry[1] = t->act_new;
  act_tls = t->act_tls;
  stops_tls = t->stops_tls;
}
static bool wants_variants(const struct ch_plan_site *st) {
  return act_entry[0] && act_entry[1] && st->entry == CH_ENTRY_WALK && !st->stop;
}
uintptr_t ch_patch_entry_stub(unsigned site, int is_new, uintptr_t *target) {
  if (site >= CH_MAX_SITES || !ch_patch_on[site]) return 0;
  *target = entry_target[site];
  return entry_stub[site][is_new ? 1 : 0];
}

static void unpatched(unsigned *by, int reason) {
  by[reason]++;
  atomic_fetch_add(&ch_patch_stats.unpatched, 1);
  atomic_fetch_add(&ch_patch_unpatched_by[reason], 1);
}

/* Patch the selector sites of one module; live: its code may be running. */
static unsigned patch_one(struct ch_module *m, bool live) {
  const struct ch_plan *pl = ch_plan;
  static struct todo todo[CH_MAX_SITES];
  unsigned n = 0, wanted = 0, by[CH_PATCH_REASONS] = {0};
  bool stops_fail = false;   /* a stop site of this module stays unpatched: no record may decide */
  for (unsigned s = 0; s < pl->nsites; s++) {
    if (!wants[s] || ch_patch_on[s] || (int)pl->sites[s].module != m->plan_module || !pl->sites[s].addr) continue;
    wanted++;
    uintptr_t ret = pl->sites[s].addr, target = 0;
    int r = m->writable_code ? R_WRITABLE_CODE : !ch_patch_bit[s] && !ch_patch_stop[s] ? R_NO_BIT
          : ch_patch_check_call(m, ret, &target);
    if (r < 0 && live && !ch_patch_live_ok(ret - 4)) r = R_UNALIGNED;
    if (r >= 0) { unpatched(by, r); stops_fail |= ch_patch_stop[s] != 0; continue; }
    todo[n++] = (struct todo){s, ret, target};
  }
  if (!wanted) return 0;
  unsigned done = 0, nstubs = n;
  for (unsigned i = 0; i < n; i++)
    if (wants_variants(&pl->sites[todo[i].site])) nstubs += 2;
  if (n) {
    size_t tsize = (size_t)(cohort_stub_end - cohort_stub_template);
    size_t page = ch_page_size(), code = nstubs * STUB_SIZE;
    size_t size = (code + 128 + page - 1) & ~(page - 1);
    bool fits = tsize <= STUB_SIZE && (size_t)(cohort_stop_end - cohort_stop_template) <= STUB_SIZE;
    uint8_t *region = fits ? ch_patch_map_near(m->lo, m->hi, size) : NULL;
    if (!region) {
      for (unsigned i = 0; i < n; i++) unpatched(by, R_NO_STUB_SPACE);
      n = 0;
    } else {
      intptr_t tls = act_tls;
      unsigned extra = n;   /* the variants follow the stubs */
      for (unsigned i = 0; i < n; i++) {
        unsigned s = todo[i].site;
        uint8_t *stub = region + i * STUB_SIZE;
        entry_stub[s][0] = entry_stub[s][1] = 0;
        entry_target[s] = todo[i].target;
        if (ch_patch_stop[s] && ch_stops_own) {   /* never an entry's variant (wants_variants) */
          bool whole = !stops_fail && (!atomic_load(&table) || ch_patch_stops_whole);   /* see withdraw_stops */
          ch_stop_sites[s] = (struct ch_stop_site){whole ? todo[i].ret : 1, ch_patch_stop[s] - 1, 0};
          stop_stub(stub, s, todo[i].target, stops_tls);   /* it decoded at start-up */
          continue;
        }
        memcpy(stub, cohort_stub_template, tsize);
        struct stub_consts c = {todo[i].target, todo[i].ret, ch_patch_bit[s], ch_patch_stop[s], tls, 0};
        memcpy(stub + (cohort_stub_consts - cohort_stub_template), &c, sizeof c);
        if (!wants_variants(&pl->sites[s])) continue;
        for (int k = 0; k < 2; k++, extra++) {
          uint8_t *v = region + extra * STUB_SIZE;
          memcpy(v, cohort_stub_template, tsize);
          struct stub_consts cv = {act_entry[k], todo[i].ret, ch_patch_bit[s], ch_patch_stop[s], tls, 1};
          memcpy(v + (cohort_stub_consts - cohort_stub_template), &cv, sizeof cv);
          entry_stub[s][k] = (uintptr_t)v;
        }
      }
      uint8_t *eh = region + code;
      ch_patch_stub_unwind(eh, (uintptr_t)region, code);
      if (!ch_patch_seal(region, size)) {
        for (unsigned i = 0; i < n; i++) unpatched(by, R_NO_STUB_SPACE);
        for (unsigned i = 0; i < n; i++) entry_stub[todo[i].site][0] = entry_stub[todo[i].site][1] = 0;
        munmap(region, size);
        n = 0;
      } else if (register_frame) {
        register_frame(eh);
      }
    }
    for (unsigned i = 0; i < n; i++) {   /* map_near put every stub within reach */
      uintptr_t stub = (uintptr_t)region + i * STUB_SIZE;
      /* The activation is recorded before the call runs: mark it first. */
      ch_patch_on[todo[i].site] = 1;
      if (!ch_patch_write_disp(todo[i].ret - 4, (int32_t)(intptr_t)(stub - todo[i].ret), live)) {
        ch_patch_on[todo[i].site] = 0;
        for (unsigned k = i; k < n; k++) unpatched(by, R_NOT_WRITABLE);
        break;
      }
      done++;
    }
  }
  atomic_fetch_add(&ch_patch_stats.patched, done);
  if (done) atomic_fetch_add(&ch_patch_stats.modules, 1);
  int worst = -1;
  for (int r = R_FIRST_WARNED; r < CH_PATCH_REASONS; r++) if (by[r] && (worst < 0 || by[r] > by[worst])) worst = r;
  if (worst >= 0) {
    ch_warn("%s: %u of %u selector call sites left unpatched (they keep the stack walk); %u: %s",
            m->path, wanted - done, wanted, by[worst], reason_text[worst]);
  }
  return done;
}

static bool enabled;
bool ch_patch_enabled(void) { return enabled; }

/* Patch modules [from, to) and publish what the bits can decide. Threads
 * seed again whenever something changed: sites were patched, or (once
 * patching is on) a module's unpatched sites now keep selectors undecided. */
static void patch_range(unsigned from, unsigned to, bool live) {
  ch_lock(&patch_lock);
  unsigned done = 0;
  for (unsigned i = from; i < to; i++) {
    struct ch_module *m = ch_modules_at(i);
    if (m->plan_module >= 0) done += patch_one(m, live);
  }
  publish_table();
  if (done || atomic_load(&ch_patch_gen)) atomic_fetch_add_explicit(&ch_patch_gen, 1, memory_order_release);
  ch_unlock(&patch_lock);
}

void ch_patch_init(void) {
  const struct ch_plan *pl = ch_plan;
  if (!ch_opt.patch || !pl || atomic_load(&ch_plan_disabled)) return;
  if (!ch_patch_code_init()) return;
  /* Selector bits in the order the select lines use the sites. */
  unsigned nbits = 0;
  for (unsigned i = 0; i < pl->nconj; i++)
    for (unsigned s = 0; s < pl->nsites; s++)
      if (in_conj(&pl->conj[i], s) && !wants[s] && !entry_only(&pl->sites[s])) {
        wants[s] = true;
        if (nbits < 64) ch_patch_bit[s] = (uint64_t)1 << nbits++;
      }
  for (unsigned s = 0; s < pl->nsites; s++)
    if (pl->sites[s].stop) { wants[s] = true; ch_patch_stop[s] = pl->sites[s].stop; }
  /* The stop sites' table, in the low 2 GiB: a stub names its entry in a
   * 32-bit immediate. */
  void *low = mmap(NULL, CH_MAX_SITES * sizeof(struct ch_stop_site), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
  if (low != MAP_FAILED && (uintptr_t)low + CH_MAX_SITES * sizeof(struct ch_stop_site) <= ((uintptr_t)1 << 31))
    ch_stop_sites = low;
  else if (low != MAP_FAILED)
    munmap(low, CH_MAX_SITES * sizeof(struct ch_stop_site));
  /* Without it, stop sites get the selector sites' stub, whose activations
   * carry the innermost stop group (activation.c reads both). */
  ch_stops_own = stop_template_ok();
  enabled = true;
  patch_range(0, ch_modules_count(), !ch_patch_one_thread());
}

/* A module loaded later (dlopen) is written as at start-up while the
 * process still has one thread: only that thread could run the calls, and
 * it is here. A call whose displacement crosses an 8-byte word is patched
 * too, where live it would stay unpatched (dot's layout plugins: 10 of its
 * plan's 27 selector sites, and about 150 thousand walks a run). */
void ch_patch_modules(unsigned from, unsigned to) {
  if (enabled && !atomic_load(&ch_plan_disabled)) patch_range(from, to, !ch_patch_one_thread());
}
