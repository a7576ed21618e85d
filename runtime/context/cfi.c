/* Cohort runtime: call frame information from .eh_frame.
 *
 * For a pc, find its FDE through the module's .eh_frame_hdr search table and
 * run the CIE and FDE programs up to the pc, tracking only what a stack walk
 * on x86-64 needs: the CFA rule, where the return address is, and where the
 * caller's %rbp is. unwind.c caches the result per pc, so this runs once per
 * distinct return address. */
#define _GNU_SOURCE
#include "context.h"

#include <string.h>

enum {
  PE_absptr = 0x00, PE_uleb128 = 0x01, PE_udata2 = 0x02, PE_udata4 = 0x03, PE_udata8 = 0x04,
  PE_sleb128 = 0x09, PE_sdata2 = 0x0a, PE_sdata4 = 0x0b, PE_sdata8 = 0x0c,
  PE_pcrel = 0x10, PE_datarel = 0x30, PE_indirect = 0x80, PE_omit = 0xff,
};
enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

/* ------------------------------------------------------------- decoding */

static uint64_t uleb(const uint8_t **pp) {
  const uint8_t *p = *pp;
  uint64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = *p++;
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  *pp = p;
  return v;
}

static int64_t sleb(const uint8_t **pp) {
  const uint8_t *p = *pp;
  int64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = *p++;
    if (shift < 64) v |= (int64_t)(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  if (shift < 64 && (b & 0x40)) v |= -((int64_t)1 << shift);
  *pp = p;
  return v;
}

/* Decode a pointer in the given DW_EH_PE encoding; false if unsupported. */
static bool read_enc(const uint8_t **pp, uint8_t enc, uintptr_t datarel, uintptr_t *out) {
  const uint8_t *p = *pp;
  uintptr_t base = (uintptr_t)p, v;
  if (enc == PE_omit) { *out = 0; return true; }
  switch (enc & 0x0f) {
  case PE_absptr: case PE_udata8: case PE_sdata8: { uint64_t x; memcpy(&x, p, 8); v = x; p += 8; break; }
  case PE_uleb128: v = (uintptr_t)uleb(&p); break;
  case PE_sleb128: v = (uintptr_t)sleb(&p); break;
  case PE_udata2: { uint16_t x; memcpy(&x, p, 2); v = x; p += 2; break; }
  case PE_sdata2: { int16_t x; memcpy(&x, p, 2); v = (uintptr_t)(intptr_t)x; p += 2; break; }
  case PE_udata4: { uint32_t x; memcpy(&x, p, 4); v = x; p += 4; break; }
  case PE_sdata4: { int32_t x; memcpy(&x, p, 4); v = (uintptr_t)(intptr_t)x; p += 4; break; }
  default: return false;
  }
  switch (enc & 0x70) {
  case 0: break;
  case PE_pcrel: v += base; break;
  case PE_datarel: v += datarel; break;
  default: return false;
  }
  if (enc & PE_indirect) v = *(const uintptr_t *)v;
  *pp = p;
  *out = v;
  return true;
}

/* ------------------------------------------------------------ CIE / FDE */

struct cie {
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra_reg;
  uint8_t fde_enc, lsda_enc;   /* lsda_enc: PE_omit without an 'L' */
  bool has_z, signal;
  const uint8_t *insns, *end;
};

static const uint8_t *entry_start(const uint8_t *p, const uint8_t **end) {
  uint32_t len32;
  memcpy(&len32, p, 4);
  p += 4;
  uint64_t len = len32;
  if (len32 == 0xffffffff) { memcpy(&len, p, 8); p += 8; }
  *end = p + len;
  return p;
}

static bool parse_cie(const uint8_t *c, struct cie *out) {
  const uint8_t *end, *p = entry_start(c, &end);
  p += 4;   /* CIE id */
  uint8_t version = *p++;
  const char *aug = (const char *)p;
  p += strlen(aug) + 1;
  memset(out, 0, sizeof *out);
  out->fde_enc = PE_absptr;
  out->lsda_enc = PE_omit;
  if (aug[0] == 'e' && aug[1] == 'h') p += sizeof(uintptr_t);
  out->code_align = uleb(&p);
  out->data_align = sleb(&p);
  out->ra_reg = version == 1 ? *p++ : uleb(&p);
  if (aug[0] == 'z') {
    out->has_z = true;
    uint64_t alen = uleb(&p);
    const uint8_t *adata = p;
    for (const char *a = aug + 1; *a; a++) {
      uintptr_t dummy;
      switch (*a) {
      case 'L': out->lsda_enc = *adata++; break;
      case 'R': out->fde_enc = *adata++; break;
      case 'P': { uint8_t e = *adata++; if (!read_enc(&adata, e & 0x7f, 0, &dummy)) return false; break; }
      case 'S': out->signal = true; break;
      case 'B': case 'G': break;
      default: return false;
      }
    }
    p += alen;
  }
  out->insns = p;
  out->end = end;
  return true;
}

/* Binary search the .eh_frame_hdr table for the FDE covering pc. */
static const uint8_t *find_fde_lsda(const struct ch_module *m, uintptr_t pc, struct cie *cie,
                                    uintptr_t *pc_begin, uintptr_t *pc_end, const uint8_t **insns,
                                    const uint8_t **end, uintptr_t *lsda) {
  const uint8_t *hdr = m->eh_frame_hdr;
  if (!hdr || hdr[0] != 1) return NULL;
  uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  const uint8_t *p = hdr + 4;
  uintptr_t eh_frame, count;
  if (!read_enc(&p, ptr_enc, (uintptr_t)hdr, &eh_frame)) return NULL;
  if (!read_enc(&p, count_enc, (uintptr_t)hdr, &count)) return NULL;
  if (table_enc != (PE_datarel | PE_sdata4) || count == 0) return NULL;
  const int32_t *table = (const int32_t *)p;
  size_t lo = 0, hi = count;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if ((uintptr_t)hdr + table[2 * mid] <= pc) lo = mid; else hi = mid;
  }
  if ((uintptr_t)hdr + table[2 * lo] > pc) return NULL;
  const uint8_t *fde = (const uint8_t *)((uintptr_t)hdr + table[2 * lo + 1]);
  const uint8_t *fend, *q = entry_start(fde, &fend);
  uint32_t cie_off;
  memcpy(&cie_off, q, 4);
  if (cie_off == 0) return NULL;
  const uint8_t *cie_ptr = q - cie_off;
  q += 4;
  if (!parse_cie(cie_ptr, cie)) return NULL;
  uintptr_t begin, range;
  if (!read_enc(&q, cie->fde_enc, 0, &begin)) return NULL;
  if (!read_enc(&q, cie->fde_enc & 0x0f, 0, &range)) return NULL;
  if (pc < begin || pc >= begin + range) return NULL;
  if (lsda) *lsda = 0;
  if (cie->has_z) {
    uint64_t alen = uleb(&q);
    const uint8_t *adata = q;
    if (lsda && cie->lsda_enc != PE_omit && !read_enc(&adata, cie->lsda_enc, 0, lsda)) return NULL;
    q += alen;
  }
  *pc_begin = begin;
  *pc_end = begin + range;
  *insns = q;
  *end = fend;
  return fde;
}

static const uint8_t *find_fde(const struct ch_module *m, uintptr_t pc, struct cie *cie,
                               uintptr_t *pc_begin, uintptr_t *pc_end, const uint8_t **insns,
                               const uint8_t **end) {
  return find_fde_lsda(m, pc, cie, pc_begin, pc_end, insns, end, NULL);
}

/* ------------------------------------------------------- CFA programs */

enum rule { R_SAME, R_UNDEF, R_OFFSET, R_OTHER };
struct state {
  int cfa_reg;
  int64_t cfa_off;
  const uint8_t *cfa_expr;
  size_t cfa_expr_len;
  enum rule rbp, ra;
  int64_t rbp_off, ra_off;
};

static void set_reg(struct state *s, uint64_t reg, enum rule r, int64_t off) {
  if (reg == REG_RBP) { s->rbp = r; s->rbp_off = off; }
  else if (reg == REG_RA) { s->ra = r; s->ra_off = off; }
}

/* Run instructions in [p, end) while loc <= pc. init is the state after the
 * CIE program (for DW_CFA_restore); NULL while running the CIE itself. row
 * (if not NULL): where the last row at or below pc begins, an instruction
 * boundary (the assembler places each row's label between instructions). */
#define ADVANCE(to)                       \
  do {                                    \
    uintptr_t next_ = (to);               \
    if (next_ > pc) goto done;            \
    loc = next_;                          \
  } while (0)
static bool run(const uint8_t *p, const uint8_t *end, const struct cie *cie, uintptr_t loc,
                uintptr_t pc, struct state *s, const struct state *init, uintptr_t *row) {
  struct state stack[8];
  unsigned depth = 0;
  while (p < end) {
    uint8_t op = *p++;
    uint64_t reg, off;
    switch (op >> 6) {
    case 1: ADVANCE(loc + (op & 0x3f) * cie->code_align); continue;
    case 2: set_reg(s, op & 0x3f, R_OFFSET, (int64_t)uleb(&p) * cie->data_align); continue;
    case 3:
      reg = op & 0x3f;
      if (init) {
        if (reg == REG_RBP) { s->rbp = init->rbp; s->rbp_off = init->rbp_off; }
        if (reg == REG_RA) { s->ra = init->ra; s->ra_off = init->ra_off; }
      }
      continue;
    }
    switch (op) {
    case 0x00: break;
    case 0x01: { uintptr_t a; if (!read_enc(&p, cie->fde_enc, 0, &a)) return false; ADVANCE(a); break; }
    case 0x02: ADVANCE(loc + *p++ * cie->code_align); break;
    case 0x03: { uint16_t d; memcpy(&d, p, 2); p += 2; ADVANCE(loc + d * cie->code_align); break; }
    case 0x04: { uint32_t d; memcpy(&d, p, 4); p += 4; ADVANCE(loc + d * cie->code_align); break; }
    case 0x05: reg = uleb(&p); off = uleb(&p); set_reg(s, reg, R_OFFSET, (int64_t)off * cie->data_align); break;
    case 0x06:
      reg = uleb(&p);
      if (init && reg == REG_RBP) { s->rbp = init->rbp; s->rbp_off = init->rbp_off; }
      if (init && reg == REG_RA) { s->ra = init->ra; s->ra_off = init->ra_off; }
      break;
    case 0x07: set_reg(s, uleb(&p), R_UNDEF, 0); break;
    case 0x08: set_reg(s, uleb(&p), R_SAME, 0); break;
    case 0x09: reg = uleb(&p); uleb(&p); set_reg(s, reg, R_OTHER, 0); break;
    case 0x0a: if (depth == 8) return false; stack[depth++] = *s; break;
    case 0x0b: if (!depth) return false; *s = stack[--depth]; break;   /* the CFA rule too */
    case 0x0c: s->cfa_reg = (int)uleb(&p); s->cfa_off = (int64_t)uleb(&p); s->cfa_expr = NULL; break;
    case 0x0d: s->cfa_reg = (int)uleb(&p); s->cfa_expr = NULL; break;
    case 0x0e: s->cfa_off = (int64_t)uleb(&p); break;
    case 0x0f: off = uleb(&p); s->cfa_expr = p; s->cfa_expr_len = off; s->cfa_reg = -1; p += off; break;
    case 0x10: reg = uleb(&p); off = uleb(&p); p += off; set_reg(s, reg, R_OTHER, 0); break;
    case 0x11: reg = uleb(&p); set_reg(s, reg, R_OFFSET, sleb(&p) * cie->data_align); break;
    case 0x12: s->cfa_reg = (int)uleb(&p); s->cfa_off = sleb(&p) * cie->data_align; s->cfa_expr = NULL; break;
    case 0x13: s->cfa_off = sleb(&p) * cie->data_align; break;
    case 0x14: reg = uleb(&p); uleb(&p); set_reg(s, reg, R_OTHER, 0); break;
    case 0x15: reg = uleb(&p); sleb(&p); set_reg(s, reg, R_OTHER, 0); break;
    case 0x16: reg = uleb(&p); off = uleb(&p); p += off; set_reg(s, reg, R_OTHER, 0); break;
    case 0x2e: uleb(&p); break;
    case 0x2f: reg = uleb(&p); off = uleb(&p); set_reg(s, reg, R_OFFSET, -(int64_t)off * cie->data_align); break;
    default: return false;
    }
  }
done:
  if (row) *row = loc;
  return true;
}
#undef ADVANCE

bool ch_cfi_function(const struct ch_module *m, uintptr_t pc, uintptr_t *start, uintptr_t *end) {
  struct cie cie;
  const uint8_t *insns, *fend;
  return find_fde(m, pc, &cie, start, end, &insns, &fend) != NULL;
}

/* The same, and where the last row of its unwind table at or below pc
 * begins (*row, at least *start): an instruction boundary nearer pc than
 * the function's start, from which a decoder may begin (patch.c). */
bool ch_cfi_function_row(const struct ch_module *m, uintptr_t pc, uintptr_t *start, uintptr_t *end,
                         uintptr_t *row) {
  struct cie cie;
  const uint8_t *insns, *fend;
  if (!find_fde(m, pc, &cie, start, end, &insns, &fend)) return false;
  struct state s = { .cfa_reg = REG_RSP, .cfa_off = 8, .rbp = R_SAME, .ra = R_SAME };
  *row = *start;
  if (!run(insns, fend, &cie, *start, pc, &s, NULL, row) || *row < *start || *row > pc) *row = *start;
  return true;
}

/* Every function of m that has an FDE, in address order: f(start, end, ctx)
 * for each, until it returns false. false if m has no search table this
 * can read (then nothing is known of its functions). */
bool ch_cfi_each_function(const struct ch_module *m, bool (*f)(uintptr_t, uintptr_t, void *), void *ctx) {
  const uint8_t *hdr = m->eh_frame_hdr;
  if (!hdr || hdr[0] != 1) return false;
  uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  const uint8_t *p = hdr + 4;
  uintptr_t eh_frame, count;
  if (!read_enc(&p, ptr_enc, (uintptr_t)hdr, &eh_frame) || !read_enc(&p, count_enc, (uintptr_t)hdr, &count) ||
      table_enc != (PE_datarel | PE_sdata4))
    return false;
  const int32_t *table = (const int32_t *)p;
  for (uintptr_t i = 0; i < count; i++) {
    uintptr_t pc = (uintptr_t)hdr + table[2 * i], start, end;
    if (ch_cfi_function(m, pc, &start, &end) && !f(start, end, ctx)) break;
  }
  return true;
}

/* The landing pads of pc's function: where the unwinder enters it when an
 * exception passes through one of its calls (its LSDA's call-site table, in
 * the GCC format of the Itanium C++ ABI). Up to max of them in pads; the
 * count, or -1 if pc has no FDE, or an LSDA this cannot read (then any
 * address of the function may be one). */
int ch_cfi_landing_pads(const struct ch_module *m, uintptr_t pc, uintptr_t *pads, int max) {
  struct cie cie;
  uintptr_t begin, fend_pc, lsda;
  const uint8_t *insns, *end;
  if (!find_fde_lsda(m, pc, &cie, &begin, &fend_pc, &insns, &end, &lsda)) return -1;
  if (!lsda) return 0;
  if (!ch_module_maps(m, lsda, 4)) return -1;
  const uint8_t *p = (const uint8_t *)lsda;
  uintptr_t lpstart = begin;
  uint8_t enc = *p++;
  if (enc != PE_omit && !read_enc(&p, enc, 0, &lpstart)) return -1;
  if (*p++ != PE_omit) (void)uleb(&p);   /* type table: not needed */
  uint8_t cs_enc = *p++;
  uint64_t cs_len = uleb(&p);
  const uint8_t *cs_end = p + cs_len;
  if (cs_len > (1u << 20) || !ch_module_maps(m, (uintptr_t)p, cs_len)) return -1;
  int n = 0;
  while (p < cs_end) {
    uintptr_t start, len, pad;
    if (!read_enc(&p, cs_enc, 0, &start) || !read_enc(&p, cs_enc, 0, &len) || !read_enc(&p, cs_enc, 0, &pad))
      return -1;
    (void)uleb(&p);   /* action */
    (void)start; (void)len;
    if (!pad) continue;
    if (n == max) return -1;
    pads[n++] = lpstart + pad;
  }
  return n;
}

bool ch_cfi_find(const struct ch_module *m, uintptr_t pc, struct ch_cfi_rule *out) {
  memset(out, 0, sizeof *out);
  struct cie cie;
  uintptr_t begin, range_end;
  const uint8_t *insns, *end;
  if (!find_fde(m, pc, &cie, &begin, &range_end, &insns, &end)) return false;
  out->found = true;
  if (cie.signal || cie.ra_reg != REG_RA) { out->complex = true; out->found = false; return false; }
  struct state s = { .cfa_reg = REG_RSP, .cfa_off = 8, .rbp = R_SAME, .ra = R_SAME };
  if (!run(cie.insns, cie.end, &cie, 0, UINTPTR_MAX, &s, NULL, NULL)) { out->found = false; return false; }
  struct state init = s;
  if (!run(insns, end, &cie, begin, pc, &s, &init, NULL)) { out->found = false; return false; }

  if (s.ra == R_UNDEF) { out->outermost = true; return true; }
  if (s.ra != R_OFFSET) { out->found = false; return false; }
  out->ra_off = (int32_t)s.ra_off;
  if (s.cfa_expr) {
    out->cfa_kind = CH_CFA_EXPR;
    out->cfa_expr = s.cfa_expr;
    out->cfa_expr_len = s.cfa_expr_len;
    out->complex = true;
  } else if (s.cfa_reg == REG_RSP || s.cfa_reg == REG_RBP) {
    out->cfa_kind = s.cfa_reg == REG_RSP ? CH_CFA_RSP : CH_CFA_RBP;
    out->cfa_off = (int32_t)s.cfa_off;
  } else {
    out->found = false;   /* CFA in another register (DRAP prologue): not followed */
    return false;
  }
  if (s.rbp == R_OFFSET) { out->rbp_kind = CH_RBP_AT_CFA; out->rbp_off = (int32_t)s.rbp_off; }
  else if (s.rbp == R_OTHER) out->rbp_kind = CH_RBP_UNKNOWN;
  else out->rbp_kind = CH_RBP_SAME;
  return true;
}

/* ------------------------------------------------------- expressions */

/* Evaluate a DWARF expression that computes a CFA from %rsp, %rbp and the pc
 * (the PLT and stack-realignment cases); derefs only read the stack. */
bool ch_cfi_eval_expr(const uint8_t *e, size_t len, const struct ch_regs *r, uintptr_t *out) {
  uintptr_t st[16];
  int sp = 0;
  const uint8_t *p = e, *end = e + len;
#define PUSH(x) do { if (sp == 16) return false; st[sp++] = (x); } while (0)
#define NEED(n) do { if (sp < (n)) return false; } while (0)
  while (p < end) {
    uint8_t op = *p++;
    if (op >= 0x30 && op <= 0x4f) { PUSH(op - 0x30); continue; }           /* lit */
    if (op >= 0x70 && op <= 0x8f) {                                          /* breg */
      int64_t off = sleb(&p);
      unsigned reg = op - 0x70;
      uintptr_t v;
      if (reg == REG_RSP) v = r->sp;
      else if (reg == REG_RBP) v = r->rbp;
      else if (reg == REG_RA) v = r->pc;
      else return false;
      PUSH(v + (uintptr_t)off);
      continue;
    }
    switch (op) {
    case 0x06: {   /* deref: only within a plausible stack window */
      NEED(1);
      uintptr_t a = st[sp - 1];
      if (a < r->sp || a - r->sp > (64u << 20) || (a & 7)) return false;
      st[sp - 1] = *(const uintptr_t *)a;
      break;
    }
    case 0x08: PUSH(*p++); break;
    case 0x09: PUSH((uintptr_t)(intptr_t)(int8_t)*p++); break;
    case 0x0a: { uint16_t v; memcpy(&v, p, 2); p += 2; PUSH(v); break; }
    case 0x0b: { int16_t v; memcpy(&v, p, 2); p += 2; PUSH((uintptr_t)(intptr_t)v); break; }
    case 0x0c: { uint32_t v; memcpy(&v, p, 4); p += 4; PUSH(v); break; }
    case 0x0d: { int32_t v; memcpy(&v, p, 4); p += 4; PUSH((uintptr_t)(intptr_t)v); break; }
    case 0x0e: { uint64_t v; memcpy(&v, p, 8); p += 8; PUSH(v); break; }
    case 0x10: PUSH((uintptr_t)uleb(&p)); break;
    case 0x11: PUSH((uintptr_t)sleb(&p)); break;
    case 0x12: { NEED(1); uintptr_t t = st[sp - 1]; PUSH(t); break; }
    case 0x13: NEED(1); sp--; break;
    case 0x16: { NEED(2); uintptr_t t = st[sp - 1]; st[sp - 1] = st[sp - 2]; st[sp - 2] = t; break; }
    case 0x1a: NEED(2); sp--; st[sp - 1] &= st[sp]; break;
    case 0x1c: NEED(2); sp--; st[sp - 1] -= st[sp]; break;
    case 0x1e: NEED(2); sp--; st[sp - 1] *= st[sp]; break;
    case 0x21: NEED(2); sp--; st[sp - 1] |= st[sp]; break;
    case 0x22: NEED(2); sp--; st[sp - 1] += st[sp]; break;
    case 0x23: NEED(1); st[sp - 1] += (uintptr_t)uleb(&p); break;
    case 0x24: NEED(2); sp--; st[sp - 1] <<= st[sp]; break;
    case 0x25: NEED(2); sp--; st[sp - 1] >>= st[sp]; break;
    case 0x2a: NEED(2); sp--; st[sp - 1] = (intptr_t)st[sp - 1] >= (intptr_t)st[sp]; break;
    case 0x2b: NEED(2); sp--; st[sp - 1] = (intptr_t)st[sp - 1] > (intptr_t)st[sp]; break;
    case 0x2c: NEED(2); sp--; st[sp - 1] = (intptr_t)st[sp - 1] <= (intptr_t)st[sp]; break;
    case 0x2d: NEED(2); sp--; st[sp - 1] = (intptr_t)st[sp - 1] < (intptr_t)st[sp]; break;
    default: return false;
    }
  }
#undef PUSH
#undef NEED
  if (sp < 1) return false;
  *out = st[sp - 1];
  return true;
}
