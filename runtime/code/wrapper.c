/* Cohort runtime: is a function an allocation wrapper (DPA's adaptive
 * partial call chain, docs/policies.md)?
 *
 * The question is asked of one call site, named by its return address: after
 * that call returns a new object in %rax, does its function only hand the
 * pointer back to its own caller (in %rax, or stored through a pointer it was
 * given), never storing it anywhere else or passing it to another call? Then
 * the function's own identity says nothing about which data structure the
 * object joins, and the chain must look one frame further out.
 *
 * The function's machine code (its range from .eh_frame) is decoded with
 * Zydis and a forward data-flow analysis runs over it from its entry: which
 * registers and stack slots may hold the new pointer (or a pointer into it),
 * and which surely still hold one of the function's incoming pointer
 * arguments. Stores into the new object itself are allowed: a constructor
 * that fills in its object and returns it (node_alloc in an interpreter) is
 * the common wrapper of C programs, and DPA's strict reading would stop the
 * chain inside it. A call reached only through a jump table is analysed from
 * the call itself, with the stack pointer its unwind rule gives. Anything
 * the analysis cannot follow (an indirect jump while the pointer is live, an
 * unknown stack pointer, code it cannot decode, a function too large) makes
 * the answer "not a wrapper": a shorter chain is never wrong, only less
 * precise. A wrapper that calls its own entry gets a verdict of its own,
 * which ends the chain too (calls_itself). Nothing here allocates. */
#define _GNU_SOURCE
#include "code.h"

#include <string.h>
#include "decode.h"

#define MAX_INSNS 2048          /* larger functions are not wrappers */
#define MAX_BYTES (32u << 10)
#define NSLOTS 8                /* stack slots tracked per state */

enum { R_AX, R_CX, R_DX, R_BX, R_SP, R_BP, R_SI, R_DI };
#define BIT(r) ((uint16_t)(1u << (r)))
#define ARG_REGS (BIT(R_DI) | BIT(R_SI) | BIT(R_DX) | BIT(R_CX) | BIT(8) | BIT(9))
#define CALLER_SAVED (BIT(R_AX) | BIT(R_CX) | BIT(R_DX) | BIT(R_SI) | BIT(R_DI) | BIT(8) | BIT(9) | BIT(10) | BIT(11))

/* What may hold the new pointer (nw) and what surely holds an incoming
 * argument (arg), per register and per stack slot; stack offsets are from
 * the stack pointer at the function's entry. */
struct slot { int32_t off; uint8_t nw, arg; };
struct state {
  bool reached, after;          /* after: the call has returned on this path */
  bool sp_known, fp_known;      /* %rsp, and %rbp as a frame pointer, at known offsets */
  int32_t sp, fp;
  uint16_t nw, arg;
  uint8_t nslot;
  struct slot slot[NSLOTS];
};

struct insn {
  ZydisDecodedInstruction d;
  ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
};

/* The analysis runs under the DPA lock (dpa.c), so its large buffers can be static. */
static struct insn insns[MAX_INSNS];
static struct state states[MAX_INSNS];
static uint32_t offsets[MAX_INSNS];   /* of each instruction from the function's start */
static uint32_t work[MAX_INSNS];
static bool queued[MAX_INSNS];

struct verdict { bool escapes, unknown, returns_new, passes_back; };

/* Flags and the instruction pointer: read and written by the way, never a value. */
static bool bookkeeping(ZydisRegister r) {
  ZydisRegisterClass c = ZydisRegisterGetClass(r);
  return c == ZYDIS_REGCLASS_FLAGS || c == ZYDIS_REGCLASS_IP;
}

static int gpr(ZydisRegister r) {
  if (r == ZYDIS_REGISTER_NONE) return -1;
  ZydisRegister w = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
  if (w >= ZYDIS_REGISTER_RAX && w <= ZYDIS_REGISTER_R15) return (int)(w - ZYDIS_REGISTER_RAX);
  return -1;
}

static struct slot *slot_find(struct state *s, int32_t off) {
  for (unsigned i = 0; i < s->nslot; i++)
    if (s->slot[i].off == off) return &s->slot[i];
  return NULL;
}
/* Record what a store put in a stack slot; false: no room to track it. */
static bool slot_set(struct state *s, int32_t off, bool nw, bool arg) {
  struct slot *sl = slot_find(s, off);
  if (!sl) {
    if (!nw && !arg) return true;
    if (s->nslot == NSLOTS) return false;
    sl = &s->slot[s->nslot++];
    sl->off = off;
  }
  sl->nw = nw;
  sl->arg = arg;
  return true;
}

/* Join b into a at a program point: the new pointer where either path may
 * have it, an argument only where both surely do. true: a changed. */
static bool join(struct state *a, const struct state *b) {
  if (!a->reached) { *a = *b; return true; }
  struct state o = *a;
  a->after |= b->after;
  a->nw |= b->nw;
  a->arg &= b->arg;
  a->sp_known = a->sp_known && b->sp_known && a->sp == b->sp;
  a->fp_known = a->fp_known && b->fp_known && a->fp == b->fp;
  for (unsigned i = 0; i < a->nslot; i++) {
    const struct slot *sb = slot_find((struct state *)b, a->slot[i].off);
    a->slot[i].arg = sb ? a->slot[i].arg & sb->arg : 0;
    if (sb) a->slot[i].nw |= sb->nw;
  }
  for (unsigned i = 0; i < b->nslot; i++)
    if (b->slot[i].nw && !slot_find(a, b->slot[i].off) && a->nslot < NSLOTS)
      a->slot[a->nslot++] = (struct slot){b->slot[i].off, 1, 0};
  return memcmp(&o, a, sizeof o) != 0;
}

static bool holds_new(const struct state *s) {
  if (s->nw) return true;
  for (unsigned i = 0; i < s->nslot; i++)
    if (s->slot[i].nw) return true;
  return false;
}

/* Where a memory operand points. */
enum where { W_STACK, W_NEW, W_ARG, W_OTHER, W_STACK_UNKNOWN };
static enum where where_of(const struct state *s, const ZydisDecodedOperand *o, int32_t *off) {
  int b = gpr(o->mem.base), x = gpr(o->mem.index);
  int32_t d = (int32_t)o->mem.disp.value;
  if (b == R_SP || (b == R_BP && s->fp_known)) {
    bool known = x < 0 && (b == R_SP ? s->sp_known : true);
    if (!known) return W_STACK_UNKNOWN;
    *off = (b == R_SP ? s->sp : s->fp) + d;
    return W_STACK;
  }
  if (b >= 0 && (s->nw >> b & 1)) return W_NEW;
  if (x >= 0 && (s->nw >> x & 1)) return W_NEW;
  if (b >= 0 && (s->arg >> b & 1) && x < 0) return W_ARG;
  return W_OTHER;
}

/* One instruction's effect on s; ret is the return address of the call
 * being asked about. false: the path ends here. */
static bool transfer(struct state *s, const struct insn *in, uintptr_t pc, uintptr_t ret, struct verdict *v) {
  const ZydisDecodedInstruction *d = &in->d;
  const ZydisDecodedOperand *op = in->op;
  unsigned n = d->operand_count;

  if (d->meta.category == ZYDIS_CATEGORY_CALL) {
    if (s->after && (s->nw & ARG_REGS)) v->escapes = true;   /* passed to another function */
    s->nw &= (uint16_t)~CALLER_SAVED;
    s->arg &= (uint16_t)~CALLER_SAVED;
    if (pc + d->length == ret) { s->nw |= BIT(R_AX); s->after = true; }
    return true;
  }
  if (d->meta.category == ZYDIS_CATEGORY_RET) {
    if (s->after && (s->nw & BIT(R_AX))) v->returns_new = true;
    return false;
  }

  /* Values read: registers read as values, and stack slots loaded. */
  bool src_nw = false, src_arg = true, any_src = false, agen = d->mnemonic == ZYDIS_MNEMONIC_LEA;
  bool zeroing = (d->mnemonic == ZYDIS_MNEMONIC_XOR || d->mnemonic == ZYDIS_MNEMONIC_SUB) && n >= 2 &&
                 op[0].type == ZYDIS_OPERAND_TYPE_REGISTER && op[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
                 op[0].reg.value == op[1].reg.value;
  for (unsigned i = 0; i < n && !zeroing; i++) {
    const ZydisDecodedOperand *o = &op[i];
    if (!(o->actions & ZYDIS_OPERAND_ACTION_MASK_READ) && !(agen && o->type == ZYDIS_OPERAND_TYPE_MEMORY)) continue;
    if (o->type == ZYDIS_OPERAND_TYPE_REGISTER) {
      int r = gpr(o->reg.value);
      if (r == R_SP || bookkeeping(o->reg.value)) continue;
      if (r < 0) { src_arg = false; any_src = true; continue; }
      any_src = true;
      src_nw |= s->nw >> r & 1;
      src_arg &= s->arg >> r & 1;
    } else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
      if (agen) {   /* lea: the address is the value */
        int b = gpr(o->mem.base), x = gpr(o->mem.index);
        any_src = true;
        src_nw |= (b >= 0 && (s->nw >> b & 1)) || (x >= 0 && (s->nw >> x & 1));
        src_arg = false;
        continue;
      }
      int32_t off;
      any_src = true;
      if (where_of(s, o, &off) == W_STACK) {
        struct slot *sl = slot_find(s, off);
        src_nw |= sl && sl->nw;
        src_arg &= sl && sl->arg;
      } else {
        src_arg = false;   /* a field's value, not the pointer itself */
      }
    } else if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
      any_src = true;
      src_arg = false;
    }
  }
  if (!any_src) src_arg = false;

  /* Branches, after their reads (an indirect jump through a register). */
  if (d->meta.category == ZYDIS_CATEGORY_UNCOND_BR || d->meta.category == ZYDIS_CATEGORY_COND_BR) return true;

  switch (d->mnemonic) {
  case ZYDIS_MNEMONIC_PUSH:
    if (!s->sp_known) { if (s->after && src_nw) v->unknown = true; return true; }
    s->sp -= 8;
    if (!slot_set(s, s->sp, src_nw, src_arg) && s->after && src_nw) v->unknown = true;
    return true;
  case ZYDIS_MNEMONIC_POP: {
    int r = gpr(op[0].reg.value);
    if (!s->sp_known || r < 0) { if (r >= 0) { s->nw &= (uint16_t)~BIT(r); s->arg &= (uint16_t)~BIT(r); } return true; }
    struct slot *sl = slot_find(s, s->sp);
    s->nw = (uint16_t)((s->nw & ~BIT(r)) | (sl && sl->nw ? BIT(r) : 0));
    s->arg = (uint16_t)((s->arg & ~BIT(r)) | (sl && sl->arg ? BIT(r) : 0));
    if (r == R_BP) s->fp_known = false;
    s->sp += 8;
    return true;
  }
  case ZYDIS_MNEMONIC_LEAVE:
    s->sp_known = s->fp_known;
    s->sp = s->fp + 8;
    s->fp_known = false;
    s->nw &= (uint16_t)~BIT(R_BP);
    return true;
  default:
    break;
  }

  for (unsigned i = 0; i < n; i++) {
    const ZydisDecodedOperand *o = &op[i];
    if (!(o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) continue;
    if (o->type == ZYDIS_OPERAND_TYPE_REGISTER) {
      int r = gpr(o->reg.value);
      if (r < 0) {
        /* A vector or other register taking the pointer: not followed. */
        if (s->after && src_nw && !bookkeeping(o->reg.value)) v->unknown = true;
        continue;
      }
      if (r == R_SP) {
        /* add/sub of a constant moves the stack pointer by it; mov or lea
         * from a frame pointer puts it back; anything else loses it. */
        if ((d->mnemonic == ZYDIS_MNEMONIC_ADD || d->mnemonic == ZYDIS_MNEMONIC_SUB) && n >= 2 &&
            op[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
          s->sp += (int32_t)(d->mnemonic == ZYDIS_MNEMONIC_ADD ? op[1].imm.value.s : -op[1].imm.value.s);
        else if (d->mnemonic == ZYDIS_MNEMONIC_MOV && op[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
                 gpr(op[1].reg.value) == R_BP && s->fp_known)
          s->sp = s->fp, s->sp_known = true;
        else if (d->mnemonic == ZYDIS_MNEMONIC_LEA && gpr(op[1].mem.base) == R_BP && s->fp_known &&
                 gpr(op[1].mem.index) < 0)
          s->sp = s->fp + (int32_t)op[1].mem.disp.value, s->sp_known = true;
        else if (o->visibility == ZYDIS_OPERAND_VISIBILITY_EXPLICIT)
          s->sp_known = false;
        continue;
      }
      if (r == R_BP) {
        bool frame = d->mnemonic == ZYDIS_MNEMONIC_MOV && op[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
                     gpr(op[1].reg.value) == R_SP && s->sp_known;
        s->fp_known = frame;
        if (frame) s->fp = s->sp;
      }
      bool partial = o->size < 32;   /* an 8- or 16-bit write keeps the rest */
      bool cond = (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) == ZYDIS_OPERAND_ACTION_CONDWRITE;
      bool nw = src_nw, arg = src_arg && !partial && !cond && d->mnemonic == ZYDIS_MNEMONIC_MOV;
      if (partial || cond) nw |= s->nw >> r & 1;
      s->nw = (uint16_t)((s->nw & ~BIT(r)) | (nw ? BIT(r) : 0));
      s->arg = (uint16_t)((s->arg & ~BIT(r)) | (arg ? BIT(r) : 0));
    } else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
      int32_t off = 0;
      switch (where_of(s, o, &off)) {
      case W_STACK:
        if (!slot_set(s, off, src_nw, src_arg && d->mnemonic == ZYDIS_MNEMONIC_MOV) && s->after && src_nw)
          v->unknown = true;
        break;
      case W_STACK_UNKNOWN:
        if (s->after && src_nw) v->unknown = true;
        break;
      case W_NEW:
        break;   /* filling in the new object (a pointer to itself included) */
      case W_ARG:
        if (s->after && src_nw) v->passes_back = true;   /* *out = p */
        break;
      case W_OTHER:
        if (s->after && src_nw) v->escapes = true;       /* linked into something else */
        break;
      }
    }
  }
  return true;
}

/* Where control goes after in (at pc, index i): up to two successors as
 * instruction indices; a branch that leaves the function is followed no
 * further (a jump to a cold part, or a tail call, checked by the caller). */
static unsigned index_of(uintptr_t start, const uint32_t *offs, unsigned count, uintptr_t a) {
  if (a < start) return UINT32_MAX;
  uint32_t o = (uint32_t)(a - start);
  unsigned lo = 0, hi = count;
  while (lo < hi) {
    unsigned mid = (lo + hi) / 2;
    if (offs[mid] < o) lo = mid + 1; else hi = mid;
  }
  return lo < count && offs[lo] == o ? lo : UINT32_MAX;
}

static void push_work(unsigned *nwork, unsigned i, const struct state *s) {
  if (!join(&states[i], s)) return;
  if (!queued[i]) { queued[i] = true; work[(*nwork)++] = i; }
}

static bool branch_target(const struct insn *in, uintptr_t pc, uintptr_t *t) {
  if (in->d.operand_count < 1 || in->op[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE) return false;
  return ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in->d, &in->op[0], pc, (ZyanU64 *)t));
}

/* Run the work list to its end (or to a verdict). */
static void run(uintptr_t start, unsigned count, uintptr_t ret, unsigned *nwork, struct verdict *v, bool *met) {
  unsigned steps = 0;
  while (*nwork && !v->escapes && !v->unknown) {
    unsigned i = work[--*nwork];
    queued[i] = false;
    if (++steps > 16 * MAX_INSNS) { v->unknown = true; break; }
    struct state s = states[i];
    const struct insn *in = &insns[i];
    uintptr_t pc = start + offsets[i], t;
    if (!transfer(&s, in, pc, ret, v)) continue;
    *met |= s.after;
    /* Once nothing holds the pointer any more, what follows cannot touch it:
     * the path needs no following (an interpreter's dispatch through a jump
     * table, say). */
    if (s.after && !holds_new(&s)) continue;
    unsigned cat = in->d.meta.category;
    bool fall = cat != ZYDIS_CATEGORY_UNCOND_BR && in->d.mnemonic != ZYDIS_MNEMONIC_UD2 &&
                in->d.mnemonic != ZYDIS_MNEMONIC_HLT && in->d.mnemonic != ZYDIS_MNEMONIC_INT3;
    if (cat == ZYDIS_CATEGORY_UNCOND_BR || cat == ZYDIS_CATEGORY_COND_BR) {
      unsigned j;
      if (!branch_target(in, pc, &t)) {
        if (s.after) v->unknown = true;   /* a jump table with the pointer live: not followed */
      } else if ((j = index_of(start, offsets, count, t)) != UINT32_MAX) {
        push_work(nwork, j, &s);
      } else if (cat == ZYDIS_CATEGORY_UNCOND_BR && s.after && (s.nw & ARG_REGS)) {
        v->escapes = true;   /* a tail call that takes the pointer along */
      }
    }
    if (fall && i + 1 < count) push_work(nwork, i + 1, &s);
  }
}

/* Does the function (decoded, count instructions from start) call its own
 * entry? A wrapper that does (an evaluator that returns the value it makes,
 * a recursive insert that returns a new node) is called mostly by itself:
 * the frames beyond it are its recursion's call sites, which tell an
 * operand from another or a left child from a right one, not one data
 * structure from another. Its chains stop at it, so that each of its
 * allocation calls is one group whatever the depth, and that call's hint
 * names it (calc under dpa: 4.40 G -> 3.95 G instructions, docs/policies.md). */
static bool calls_itself(uintptr_t start, unsigned count) {
  for (unsigned i = 0; i < count; i++) {
    uintptr_t t;
    if (insns[i].d.mnemonic == ZYDIS_MNEMONIC_CALL && branch_target(&insns[i], start + offsets[i], &t) && t == start)
      return true;
  }
  return false;
}

int ch_wrapper_analyse(uintptr_t start, uintptr_t end, uintptr_t ret, const struct ch_cfi_rule *at_call) {
  if (!ch_decode_ready()) return CH_WRAP_UNDECODED;
  if (end <= start || end - start > MAX_BYTES || ret <= start || ret > end) return CH_WRAP_TOO_LARGE;
  /* The calls asked about come in runs from one function (an interpreter's
   * eval): its decoded code is kept for the next question. */
  static uintptr_t decoded_start, decoded_end;
  static unsigned decoded_count;
  unsigned count = 0;
  if (start == decoded_start && end == decoded_end) {
    count = decoded_count;
  } else {
    decoded_start = decoded_end = 0;
    for (uintptr_t pc = start; pc < end; count++) {
      if (count == MAX_INSNS) return CH_WRAP_TOO_LARGE;
      if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, (const void *)pc, end - pc, &insns[count].d, insns[count].op)))
        return CH_WRAP_UNDECODED;
      offsets[count] = (uint32_t)(pc - start);
      pc += insns[count].d.length;
    }
    decoded_start = start;
    decoded_end = end;
    decoded_count = count;
  }
  unsigned r = index_of(start, offsets, count, ret);
  if (r == UINT32_MAX && ret != end) return CH_WRAP_UNDECODED;

  memset(states, 0, sizeof states[0] * count);
  memset(queued, 0, sizeof queued[0] * count);
  struct state entry = {.reached = true, .sp_known = true, .sp = 0, .arg = ARG_REGS};
  struct verdict v = {0};
  bool met = false;
  unsigned nwork = 0;
  push_work(&nwork, 0, &entry);
  run(start, count, ret, &nwork, &v, &met);
  if (!met && !v.escapes && !v.unknown && r != UINT32_MAX) {
    /* The call is reached only through a jump table (a switch): start from
     * the call itself, the stack pointer from the unwind rule there, and no
     * argument known. */
    struct state at = {.reached = true, .after = true, .nw = BIT(R_AX)};
    if (at_call && at_call->found && !at_call->complex && at_call->cfa_kind != CH_CFA_EXPR) {
      bool rsp = at_call->cfa_kind == CH_CFA_RSP;
      at.sp_known = rsp;
      at.fp_known = !rsp;
      at.sp = at.fp = 8 - at_call->cfa_off;   /* the entry's %rsp is CFA - 8 */
    }
    push_work(&nwork, r, &at);
    run(start, count, ret, &nwork, &v, &met);
  }
  if (v.unknown) return CH_WRAP_UNFOLLOWED;
  if (!met) return CH_WRAP_UNFOLLOWED;
  if (v.escapes || !(v.returns_new || v.passes_back)) return CH_WRAP_NO;
  return calls_itself(start, count) ? CH_WRAP_RECURSIVE : CH_WRAP_YES;
}
