/* Instrumentation: every load and store of the client goes through loads.c's
 * cache, unguarded, which also says whether the access is to be analysed:
 * if so, ch_access runs (an 8-byte store that may link two tracked objects
 * also ch_store_pointer), which charges a miss of the cache to the object's
 * context; every call instruction tells contexts.c what kind of call it is
 * and counts its runs there. With --cohort-loads=yes an instruction's first
 * load also goes through its stride analysis.
 *
 * Most accesses touch the stack or globals, never the heap, and past the
 * sample base most heap accesses lie between the windows the analyses see
 * (sample.c): the cache's helper tests both (ch_sample_gate) and returns
 * its answer, which guards the call to ch_access. So an access costs one
 * helper call, as in cachegrind, unless it is analysed. */
#include "profiler.h"
#include "pub_tool_machine.h"

static IRExpr *load_word(IRSB *sb, const void *where) {
  IRTemp t = newIRTemp(sb->tyenv, Ity_I64);
  addStmtToIRSB(sb, IRStmt_WrTmp(t, IRExpr_Load(Iend_LE, Ity_I64, mkIRExpr_HWord((HWord)where))));
  return IRExpr_RdTmp(t);
}

static IRExpr *bin(IRSB *sb, IROp op, IRType ty, IRExpr *a, IRExpr *b) {
  IRTemp t = newIRTemp(sb->tyenv, ty);
  addStmtToIRSB(sb, IRStmt_WrTmp(t, IRExpr_Binop(op, a, b)));
  return IRExpr_RdTmp(t);
}

/* loads.c's view of the access: ch_load for the first load of an
 * instruction (ls, only with --cohort-loads), ch_touch for any other.
 * Returns whether ch_access is to see it, as a 1-bit expression. */
static IRExpr *add_cache(IRSB *sb, IRExpr *addr, Int size, IRExpr *guard, LoadSite *ls) {
  IRTemp seen = newIRTemp(sb->tyenv, Ity_I64);
  IRDirty *d = ls ? unsafeIRDirty_1_N(seen, 3, "ch_load", VG_(fnptr_to_fnentry)(&ch_load),
                                      mkIRExprVec_3(mkIRExpr_HWord((HWord)ls), addr,
                                                    mkIRExpr_HWord((HWord)size)))
                  : unsafeIRDirty_1_N(seen, 2, "ch_touch", VG_(fnptr_to_fnentry)(&ch_touch),
                                      mkIRExprVec_2(addr, mkIRExpr_HWord((HWord)size)));
  if (guard) d->guard = guard;
  addStmtToIRSB(sb, IRStmt_Dirty(d));
  IRExpr *go = bin(sb, Iop_CmpNE64, Ity_I1, IRExpr_RdTmp(seen), IRExpr_Const(IRConst_U64(0)));
  /* a guarded call that did not run leaves 0x555...5 in its result */
  return guard ? bin(sb, Iop_And1, Ity_I1, go, guard) : go;
}

/* loads.c's view of the access (ls: see add_cache), then ch_access(addr,
 * size) if that says so; ch_access reads whether the cache missed. size
 * may carry CH_ACCESS_CHASE. */
static void add_access(IRSB *sb, IRExpr *addr, Int size, IRExpr *guard, LoadSite *ls) {
  IRExpr *go = add_cache(sb, addr, size & ~(Int)CH_ACCESS_CHASE, guard, ls);
  IRDirty *d = unsafeIRDirty_0_N(2, "ch_access", VG_(fnptr_to_fnentry)(&ch_access),
                                 mkIRExprVec_2(addr, mkIRExpr_HWord((HWord)size)));
  d->guard = go;
  addStmtToIRSB(sb, IRStmt_Dirty(d));
}

/* An 8-byte store: if both its address and the value stored lie in the
 * span of tracked objects, pointers.c looks whether it links two. */
static void add_pointer_store(IRSB *sb, IRExpr *addr, IRExpr *data, IRExpr *guard) {
  IRExpr *lo = load_word(sb, &ch_heap_lo);
  IRExpr *span = load_word(sb, &ch_heap_span);
  IRExpr *in = bin(sb, Iop_CmpLT64U, Ity_I1, bin(sb, Iop_Sub64, Ity_I64, addr, lo), span);
  IRExpr *to = bin(sb, Iop_CmpLT64U, Ity_I1, bin(sb, Iop_Sub64, Ity_I64, data, lo), span);
  IRExpr *g = bin(sb, Iop_And1, Ity_I1, in, to);
  if (guard) g = bin(sb, Iop_And1, Ity_I1, g, guard);
  IRDirty *d = unsafeIRDirty_0_N(2, "ch_store_pointer", VG_(fnptr_to_fnentry)(&ch_store_pointer),
                                 mkIRExprVec_2(addr, data));
  d->guard = g;
  addStmtToIRSB(sb, IRStmt_Dirty(d));
}

/* One more call before `ra`: an inline increment of its counter (contexts.c),
 * a load, an add and a store, no helper call. Threads run one at a time
 * under Valgrind, so the increment needs no atomicity. */
static void add_call_count(IRSB *sb, Addr ra) {
  ULong *counter = ch_call_counter(ra);
  IRExpr *n = bin(sb, Iop_Add64, Ity_I64, load_word(sb, counter), IRExpr_Const(IRConst_U64(1)));
  addStmtToIRSB(sb, IRStmt_Store(Iend_LE, mkIRExpr_HWord((HWord)counter), n));
}

/* The site of the instruction's first load; NULL for a later one, or
 * without --cohort-loads. */
static LoadSite *first_load(Addr insn, Bool *loaded) {
  LoadSite *ls = *loaded || !ch_clo_loads ? NULL : ch_load_site(insn);
  *loaded = True;
  return ls;
}

/* A chase: the 64-bit load in statement i (t = LDle(addr)) whose value
 * the same instruction puts into the guest register that held its base,
 * directly (addr = t0 = GET(r)) or plus a constant (addr = t0 + c), as
 * `mov 0x20(%r12),%r12` is: the pointer a walk follows (lines.c).
 * base_of[t]: the guest register an address temporary's base came from. */
static Bool is_chase(IRSB *in, Int i, const Int *base_of) {
  IRStmt *st = in->stmts[i];
  IRExpr *ld = st->Ist.WrTmp.data;
  if (ld->Iex.Load.ty != Ity_I64 || ld->Iex.Load.addr->tag != Iex_RdTmp) return False;
  Int r = base_of[ld->Iex.Load.addr->Iex.RdTmp.tmp];
  if (r < 0) return False;
  IRTemp t = st->Ist.WrTmp.tmp;
  for (Int j = i + 1; j < in->stmts_used && in->stmts[j]->tag != Ist_IMark; j++) {
    IRStmt *s = in->stmts[j];
    if (s->tag == Ist_Put && s->Ist.Put.offset == r && s->Ist.Put.data->tag == Iex_RdTmp &&
        s->Ist.Put.data->Iex.RdTmp.tmp == t)
      return True;
  }
  return False;
}

static Int loadg_size(IRLoadGOp cvt) {
  switch (cvt) {
  case ILGop_IdentV128: return 16;
  case ILGop_Ident64: return 8;
  case ILGop_Ident32: return 4;
  case ILGop_16Uto32: case ILGop_16Sto32: return 2;
  case ILGop_8Uto32: case ILGop_8Sto32: return 1;
  default: return 8;
  }
}

IRSB *ch_instrument(VgCallbackClosure *closure, IRSB *in, const VexGuestLayout *layout,
                    const VexGuestExtents *vge, const VexArchInfo *archinfo_host,
                    IRType gWordTy, IRType hWordTy) {
  IRSB *out = deepCopyIRSBExceptStmts(in);
  IRTypeEnv *env = in->tyenv;
  Addr insn = 0, after = 0;  /* the current instruction, and the address after it */
  Addr pending_ra = 0;       /* a call whose return address was pushed */
  Bool loaded = False;       /* the instruction's first load is instrumented */
  Int i = 0;
  /* Per temporary: the guest register it holds (GET, or the value of a
   * PUT), and for an address the register of its base (itself, or a base
   * plus a constant); -1: none. For is_chase. */
  Int *reg = VG_(malloc)("cohort.instrument", 2 * (SizeT)(env->types_used + 1) * sizeof(Int));
  Int *base_of = reg + env->types_used + 1;
  for (Int t = 0; t <= env->types_used; t++) reg[t] = base_of[t] = -1;

  while (i < in->stmts_used && in->stmts[i]->tag != Ist_IMark) addStmtToIRSB(out, in->stmts[i++]);

  for (; i < in->stmts_used; i++) {
    IRStmt *st = in->stmts[i];
    if (!st || st->tag == Ist_NoOp) continue;
    switch (st->tag) {
    case Ist_IMark:
      /* A call the translator followed into its callee (a chased direct call). */
      if (pending_ra && st->Ist.IMark.addr != pending_ra) ch_note_call(pending_ra, True);
      pending_ra = 0;
      insn = st->Ist.IMark.addr;
      after = insn + st->Ist.IMark.len;
      loaded = False;
      break;
    case Ist_WrTmp: {
      IRExpr *e = st->Ist.WrTmp.data;
      IRTemp t = st->Ist.WrTmp.tmp;
      if (e->tag == Iex_Get && e->Iex.Get.ty == Ity_I64) {
        reg[t] = base_of[t] = e->Iex.Get.offset;
      } else if (e->tag == Iex_Binop && e->Iex.Binop.op == Iop_Add64 && e->Iex.Binop.arg1->tag == Iex_RdTmp &&
                 e->Iex.Binop.arg2->tag == Iex_Const) {
        base_of[t] = reg[e->Iex.Binop.arg1->Iex.RdTmp.tmp];
      } else if (e->tag == Iex_Load) {
        Int size = sizeofIRType(e->Iex.Load.ty);
        if (is_chase(in, i, base_of)) size |= (Int)CH_ACCESS_CHASE;
        add_access(out, e->Iex.Load.addr, size, NULL, first_load(insn, &loaded));
      }
      break;
    }
    case Ist_Put:
      /* The register now holds that temporary's value (a later GET of it
       * may be folded into the temporary by the optimiser). */
      if (st->Ist.Put.data->tag == Iex_RdTmp) reg[st->Ist.Put.data->Iex.RdTmp.tmp] = st->Ist.Put.offset;
      break;
    case Ist_Store: {
      IRExpr *data = st->Ist.Store.data;
      /* A call pushes the address after itself. */
      if (data->tag == Iex_Const && data->Iex.Const.con->tag == Ico_U64 &&
          data->Iex.Const.con->Ico.U64 == after) {
        pending_ra = after;
        add_call_count(out, after);
      }
      add_access(out, st->Ist.Store.addr, sizeofIRType(typeOfIRExpr(env, data)), NULL, NULL);
      if (ch_clo_pointers && typeOfIRExpr(env, data) == Ity_I64 && !pending_ra)
        add_pointer_store(out, st->Ist.Store.addr, data, NULL);
      break;
    }
    case Ist_StoreG: {
      IRStoreG *sg = st->Ist.StoreG.details;
      add_access(out, sg->addr, sizeofIRType(typeOfIRExpr(env, sg->data)), sg->guard, NULL);
      if (ch_clo_pointers && typeOfIRExpr(env, sg->data) == Ity_I64)
        add_pointer_store(out, sg->addr, sg->data, sg->guard);
      break;
    }
    case Ist_LoadG: {
      IRLoadG *lg = st->Ist.LoadG.details;
      add_access(out, lg->addr, loadg_size(lg->cvt), lg->guard, first_load(insn, &loaded));
      break;
    }
    case Ist_Dirty: {
      IRDirty *d = st->Ist.Dirty.details;
      if (d->mFx != Ifx_None && d->mAddr) add_access(out, d->mAddr, d->mSize, NULL, NULL);
      break;
    }
    case Ist_CAS: {
      IRCAS *cas = st->Ist.CAS.details;
      Int size = sizeofIRType(typeOfIRExpr(env, cas->dataLo)) * (cas->dataHi ? 2 : 1);
      add_access(out, cas->addr, size, NULL, NULL);
      break;
    }
    case Ist_LLSC: {
      IRType ty = st->Ist.LLSC.storedata ? typeOfIRExpr(env, st->Ist.LLSC.storedata)
                                         : typeOfIRTemp(env, st->Ist.LLSC.result);
      add_access(out, st->Ist.LLSC.addr, sizeofIRType(ty), NULL, NULL);
      break;
    }
    default:
      break;
    }
    addStmtToIRSB(out, st);
  }
  if (pending_ra && in->jumpkind == Ijk_Call) ch_note_call(pending_ra, in->next->tag == Iex_Const);
  else if (pending_ra) ch_note_call(pending_ra, True);
  VG_(free)(reg);
  return out;
}
