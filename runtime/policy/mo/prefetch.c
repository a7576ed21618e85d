/* Cohort runtime: MO's stride prefetching, injected (Zhao, Rabbah & Wong
 * 2005, section 3; docs/prefetch-format.md).
 *
 * COHORT_PREFETCH names a file of loads, each a module, the load's address
 * in it and a distance p, that `cohort prefetch` writes from the profiler's
 * advice (docs/loads-format.md). At start-up, while the process still has
 * one thread, each load gets `prefetcht0 disp+p(base)` executed just before
 * it: the whole instructions from the load on that cover five bytes move to
 * a stub within +-2 GiB, after the prefetch and before a jump back, and in
 * their place goes a jump to the stub. A prefetch neither faults nor changes
 * a register or a flag, so the program computes what it did.
 *
 * Moving code is safe only where nothing else jumps into the bytes that
 * move, so a load is left alone unless every check passes:
 *  - it is an instruction of its function (decoded from the function's start
 *    with Zydis) that reads memory through a base register other than rsp,
 *    rbp or rip, with no index;
 *  - each instruction that moves is neither a branch, a call, a return nor a
 *    system instruction, writes neither rsp nor rbp (the stub's unwind rule
 *    is the load's), and reaches any rip-relative operand from the stub;
 *  - no direct branch or call of any function of the module, and no landing
 *    pad of its exception tables, lands inside the moved bytes (past their
 *    first), and the load's own function has no jump through a register or
 *    an indexed table, whose targets cannot be known;
 *  - the load's unwind rule is one a stub can repeat (CFA from rsp or rbp).
 * Each load left alone is counted by reason; a file that does not fit this
 * process gets one warning. Modules loaded later (dlopen) are not patched:
 * by then other threads may be running the code. */
#define _GNU_SOURCE
#include "mo.h"

#include "decode.h"
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <valgrind/valgrind.h>

#define PF_MODULES 16
#define PF_PATH 512
#define PF_FUNCTION_MAX (4u << 20)   /* a larger "function" is not decoded */
#define JMP_LEN 5
#define MOVED_MAX (JMP_LEN + 15)     /* bytes that move: under five, then one more instruction */
#define STUB_SLOT 64                 /* prefetch <= 10, moved <= 4 + 15, jump 5 */
#define PADS_MAX 4096

const char *const ch_prefetch_reason_names[CH_PREFETCH_REASONS] = {
  "module_not_loaded", "other_build", "outside_code", "no_function", "undecoded", "not_a_load",
  "distance", "unmovable", "branch_target", "indirect_jump", "landing_pads", "unwind_rule",
  "overlap", "threads", "not_writable", "no_stub_space",
};

struct pf_module {
  char path[PF_PATH];
  uint8_t build_id[CH_BUILD_ID_MAX];
  unsigned build_id_len;
  const struct ch_module *m;   /* bound at start-up, NULL if not loaded */
};
static struct pf_module mods[PF_MODULES];
static unsigned nmods;
struct ch_prefetch_load ch_prefetch_loads[CH_PREFETCH_MAX];
unsigned ch_prefetch_nloads;
unsigned ch_prefetch_injected;
const char *ch_prefetch_file;   /* set once the file was read */

/* ------------------------------------------------------------- the file */

/* The next space-separated word of [*p, end) on this line: its length (0 at
 * the line's end or a comment). */
static size_t word(const char **p, const char *end, const char **w) {
  const char *s = *p;
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  *w = s;
  if (s == end || *s == '#') { *p = s; return 0; }
  const char *e = s;
  while (e < end && *e != ' ' && *e != '\t') e++;
  *p = e;
  return (size_t)(e - s);
}

static bool number(const char *w, size_t n, bool hex, long long lo, long long hi, long long *out) {
  if (!n || n > 20) return false;
  bool neg = false;
  if (!hex && (*w == '-' || *w == '+')) { neg = *w == '-'; w++; n--; }
  if (hex) {
    if (n < 3 || w[0] != '0' || (w[1] != 'x' && w[1] != 'X')) return false;
    w += 2; n -= 2;
  }
  if (!n) return false;
  unsigned long long v = 0;
  for (size_t i = 0; i < n; i++) {
    int d = hex ? ch_hex_digit(w[i]) : (w[i] >= '0' && w[i] <= '9' ? w[i] - '0' : -1);
    if (d < 0 || v > (1ull << 56)) return false;
    v = v * (hex ? 16 : 10) + (unsigned)d;
  }
  long long s = neg ? -(long long)v : (long long)v;
  if (s < lo || s > hi) return false;
  *out = s;
  return true;
}

/* Parse text into mods and ch_prefetch_loads; on failure, why (a line). */
static bool parse(const char *text, size_t len, char *why, size_t whylen) {
#define FAIL(...) do { snprintf(why, whylen, __VA_ARGS__); return false; } while (0)
  const char *p = text, *end = text + len;
  unsigned line = 0;
  bool header = false, ended = false;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    line++;
    if (memchr(p, 0, (size_t)(eol - p))) FAIL("line %u: a NUL byte", line);
    const char *q = p, *w;
    size_t n = word(&q, eol, &w);
    p = eol + 1;
    if (!n) continue;
    if (ended) FAIL("line %u: text after 'end'", line);
    if (!header) {
      const char *v;
      size_t vn = word(&q, eol, &v);
      if (n != 15 || memcmp(w, "cohort-prefetch", 15)) FAIL("line %u: not a Cohort prefetch file (no 'cohort-prefetch 1' header)", line);
      if (vn != 1 || *v != '1') FAIL("line %u: prefetch file version %.*s is not 1", line, (int)(vn > 20 ? 20 : vn), v);
      header = true;
    } else if (n == 6 && !memcmp(w, "module", 6)) {
      struct pf_module *m = &mods[nmods < PF_MODULES ? nmods : 0];
      char bad[160];
      if (!ch_parse_module_line(q, eol, nmods, PF_MODULES, m->build_id, &m->build_id_len, m->path, PF_PATH, bad,
                                sizeof bad))
        FAIL("line %u: %s", line, bad);
      nmods++;
    } else if (n == 4 && !memcmp(w, "load", 4)) {
      const char *a, *b, *c, *x;
      size_t an = word(&q, eol, &a), bn = word(&q, eol, &b), cn = word(&q, eol, &c);
      long long mod, off, dist;
      if (!number(a, an, false, 0, (long long)nmods - 1, &mod)) FAIL("line %u: a load names a module not declared before it", line);
      if (!number(b, bn, true, 0, 1ll << 47, &off)) FAIL("line %u: a load's address is 0x and hexadecimal digits", line);
      if (!number(c, cn, false, -(1 << 20), 1 << 20, &dist) || !dist)
        FAIL("line %u: a load's distance is a non-zero number of bytes within +-1M", line);
      if (word(&q, eol, &x)) FAIL("line %u: unexpected '%.*s' after the distance", line, (int)(q - x > 20 ? 20 : q - x), x);
      if (ch_prefetch_nloads == CH_PREFETCH_MAX) FAIL("line %u: more than %d loads", line, CH_PREFETCH_MAX);
      struct ch_prefetch_load *l = &ch_prefetch_loads[ch_prefetch_nloads++];
      l->module = (unsigned)mod;
      l->offset = (uintptr_t)off;
      l->distance = (int32_t)dist;
      l->reason = CH_PREFETCH_PENDING;
    } else if (n == 3 && !memcmp(w, "end", 3)) {
      ended = true;
    } else {
      FAIL("line %u: unknown line '%.*s'", line, (int)(n > 20 ? 20 : n), w);
    }
  }
  if (!header) FAIL("empty: not a Cohort prefetch file");
  if (!ended) FAIL("no 'end' line: the file is cut short");
  return true;
#undef FAIL
}

/* ----------------------------------------------------------- the modules */

static void bind_modules(void) {
  ch_modules_refresh();
  for (unsigned i = 0; i < nmods; i++) {
    struct pf_module *pm = &mods[i];
    const struct ch_module *other = NULL;
    for (unsigned k = 0; k < ch_modules_count() && !pm->m; k++) {
      const struct ch_module *m = ch_modules_at(k);
      if (ch_module_is(m, pm->build_id, pm->build_id_len, pm->path))
        pm->m = m;
      else if (!strcmp(ch_base_name(pm->path), ch_base_name(m->path)))
        other = m;
    }
    if (!pm->m && other)
      ch_warn("COHORT_PREFETCH=%s was made for another build of %s; its loads are left alone", ch_prefetch_file,
              ch_base_name(pm->path));
    for (unsigned j = 0; j < ch_prefetch_nloads; j++)
      if (ch_prefetch_loads[j].module == i && !pm->m)
        ch_prefetch_loads[j].reason = other ? CH_PREFETCH_OTHER_BUILD : CH_PREFETCH_NOT_LOADED;
  }
}

/* -------------------------------------------------------------- checking */


/* A candidate: the load at addr, the bytes [addr, addr + len) that move. */
struct cand {
  struct ch_prefetch_load *l;
  uintptr_t addr, len, fstart, fend;
  ZydisRegister base;
  int64_t disp;
};

static bool writes_frame(const ZydisDecodedOperand *ops, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER && (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
        (ops[i].reg.value == ZYDIS_REGISTER_RSP || ops[i].reg.value == ZYDIS_REGISTER_RBP ||
         ops[i].reg.value == ZYDIS_REGISTER_ESP || ops[i].reg.value == ZYDIS_REGISTER_EBP ||
         ops[i].reg.value == ZYDIS_REGISTER_SP || ops[i].reg.value == ZYDIS_REGISTER_BP))
      return true;
  return false;
}

static bool moves(const ZydisDecodedInstruction *ins, const ZydisDecodedOperand *ops) {
  switch (ins->meta.category) {
  case ZYDIS_CATEGORY_CALL: case ZYDIS_CATEGORY_COND_BR: case ZYDIS_CATEGORY_UNCOND_BR: case ZYDIS_CATEGORY_RET:
  case ZYDIS_CATEGORY_SYSCALL: case ZYDIS_CATEGORY_SYSTEM: case ZYDIS_CATEGORY_INTERRUPT:
    return false;
  default: break;
  }
  if ((ins->attributes & ZYDIS_ATTRIB_IS_RELATIVE) && !(ins->raw.disp.size == 32 && ins->raw.imm[0].is_relative == 0))
    return false;   /* relative, and not through a rip-relative disp32 alone */
  return !writes_frame(ops, ins->operand_count);
}

/* The load at l's address, and the bytes that would move: a reason, or
 * CH_PREFETCH_PENDING if it may go on. */
static int examine(const struct ch_module *m, struct cand *c) {
  uintptr_t addr = c->addr, start, end;
  if (addr < m->lo || addr >= m->hi) return CH_PREFETCH_OUTSIDE;
  if (m->writable_code) return CH_PREFETCH_NOT_WRITABLE;
  if (!ch_cfi_function(m, addr, &start, &end) || start < m->lo || end > m->hi) return CH_PREFETCH_NO_FUNCTION;
  if (end - start > PF_FUNCTION_MAX || !ch_module_maps(m, start, end - start)) return CH_PREFETCH_UNDECODED;
  c->fstart = start;
  c->fend = end;
  ZydisDecodedInstruction ins;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  uintptr_t pc = start;
  while (pc < addr) {
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&ch_decoder, NULL, (const void *)pc, end - pc, &ins)))
      return CH_PREFETCH_UNDECODED;
    pc += ins.length;
  }
  if (pc != addr) return CH_PREFETCH_NOT_A_LOAD;   /* inside an instruction */
  /* The load: a memory operand read through a base register alone. */
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, (const void *)pc, end - pc, &ins, ops))) return CH_PREFETCH_UNDECODED;
  const ZydisDecodedOperand *mem = NULL;
  for (unsigned i = 0; i < ins.operand_count_visible; i++)
    if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[i].mem.type == ZYDIS_MEMOP_TYPE_MEM &&
        (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_READ))
      mem = &ops[i];
  if (!mem || mem->mem.index != ZYDIS_REGISTER_NONE || mem->mem.base == ZYDIS_REGISTER_NONE ||
      ZydisRegisterGetClass(mem->mem.base) != ZYDIS_REGCLASS_GPR64 || mem->mem.base == ZYDIS_REGISTER_RSP ||
      mem->mem.base == ZYDIS_REGISTER_RBP || (mem->mem.segment != ZYDIS_REGISTER_DS && mem->mem.segment != ZYDIS_REGISTER_NONE))
    return CH_PREFETCH_NOT_A_LOAD;
  c->base = mem->mem.base;
  c->disp = mem->mem.disp.has_displacement ? mem->mem.disp.value : 0;
  int64_t at = c->disp + c->l->distance;
  if (at < INT32_MIN || at > INT32_MAX) return CH_PREFETCH_DISTANCE;
  /* What moves: whole instructions covering a jump's five bytes. */
  uintptr_t len = 0;
  for (;;) {
    if (!moves(&ins, ops)) return CH_PREFETCH_UNMOVABLE;
    len += ins.length;
    if (len >= JMP_LEN) break;
    if (addr + len >= end) return CH_PREFETCH_UNMOVABLE;   /* the function ends first */
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, (const void *)(addr + len), end - addr - len, &ins, ops)))
      return CH_PREFETCH_UNDECODED;
  }
  c->len = len;
  /* The stub repeats the load's unwind rule; nothing that moves changes it. */
  struct ch_cfi_rule r;
  if (!ch_cfi_find(m, addr, &r) || r.outermost || r.complex || r.cfa_kind == CH_CFA_EXPR ||
      r.rbp_kind == CH_RBP_UNKNOWN || r.ra_off > -8 || r.ra_off < -8 * 127 ||
      (r.rbp_kind == CH_RBP_AT_CFA && (r.rbp_off > -8 || r.rbp_off < -8 * 127)))
    return CH_PREFETCH_UNWIND_RULE;   /* put_fde writes one-byte factored offsets */
  return CH_PREFETCH_PENDING;
}

/* The first candidate at or after x: the module scan looks up every branch
 * target, so candidates are sorted by address and found by bisection. */
static unsigned first_from(const struct cand *cs, unsigned n, uintptr_t x) {
  unsigned lo = 0, hi = n;
  while (lo < hi) {
    unsigned mid = (lo + hi) / 2;
    if (cs[mid].addr < x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/* Does any candidate of [cs, cs + n) have x strictly inside its moved bytes?
 * Then it may not move. Only one starting less than MOVED_MAX before x can. */
static void lands(struct cand *cs, unsigned n, uintptr_t x, int reason) {
  for (unsigned i = first_from(cs, n, x > MOVED_MAX ? x - MOVED_MAX : 0); i < n && cs[i].addr < x; i++)
    if (cs[i].l->reason == CH_PREFETCH_PENDING && x < cs[i].addr + cs[i].len) cs[i].l->reason = reason;
}

struct scan { const struct ch_module *m; struct cand *cs; unsigned n; uintptr_t pads[PADS_MAX]; };

/* The candidates inside [start, end) may not move, for reason. */
static void refuse_in(struct scan *s, uintptr_t start, uintptr_t end, int reason) {
  for (unsigned i = first_from(s->cs, s->n, start); i < s->n && s->cs[i].addr < end; i++)
    if (s->cs[i].l->reason == CH_PREFETCH_PENDING) s->cs[i].l->reason = reason;
}

/* One function of the module: its direct branches' and calls' targets and
 * its landing pads against every candidate; a jump it makes through a
 * register or a table rules out the candidates inside it. */
static bool scan_function(uintptr_t start, uintptr_t end, void *ctx) {
  struct scan *s = ctx;
  unsigned first = first_from(s->cs, s->n, start);
  bool holds = first < s->n && s->cs[first].addr < end;
  if (end - start > PF_FUNCTION_MAX || !ch_module_maps(s->m, start, end - start)) {
    refuse_in(s, start, end, CH_PREFETCH_UNDECODED);
    return true;
  }
  int pads = ch_cfi_landing_pads(s->m, start, s->pads, PADS_MAX);
  if (pads < 0) refuse_in(s, start, end, CH_PREFETCH_LANDING_PADS);
  for (int k = 0; k < pads; k++) lands(s->cs, s->n, s->pads[k], CH_PREFETCH_BRANCH_TARGET);
  ZydisDecodedInstruction ins;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  for (uintptr_t pc = start; pc < end; pc += ins.length) {
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&ch_decoder, NULL, (const void *)pc, end - pc, &ins))) {
      /* Data among the code, or an instruction Zydis does not know: the
       * rest of the function is unknown, so none of its own loads moves.
       * (Compiled code branches into another function only at its start,
       * or between a function's hot and cold parts, which decode.) */
      refuse_in(s, start, end, CH_PREFETCH_UNDECODED);
      return true;
    }
    if (ins.raw.imm[0].is_relative && (ins.meta.category == ZYDIS_CATEGORY_COND_BR ||
                                       ins.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
                                       ins.meta.category == ZYDIS_CATEGORY_CALL)) {
      uintptr_t target = pc + ins.length + (uintptr_t)(intptr_t)ins.raw.imm[0].value.s;
      lands(s->cs, s->n, target, CH_PREFETCH_BRANCH_TARGET);
    } else if (holds && ins.meta.category == ZYDIS_CATEGORY_UNCOND_BR && !ins.raw.imm[0].is_relative) {
      /* jmp *reg or jmp *table(,idx,8): targets unknown. A jump through a
       * rip-relative slot alone is a tail call through the GOT. */
      if (ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, (const void *)pc, end - pc, &ins, ops)) &&
          ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[0].mem.base == ZYDIS_REGISTER_RIP &&
          ops[0].mem.index == ZYDIS_REGISTER_NONE)
        continue;
      refuse_in(s, start, end, CH_PREFETCH_INDIRECT_JUMP);
    }
  }
  return true;
}

/* ------------------------------------------------------------ the stubs */

/* .eh_frame: a CIE, then one FDE per stub with the load's rule (CFA from
 * rsp or rbp, the return address and the caller's rbp where the load's
 * function keeps them), then a terminator. Returns the bytes written. */
static size_t put_cie(uint8_t *p) {
  static const uint8_t cie[] = {
    16, 0, 0, 0,  0, 0, 0, 0,     /* length, CIE id */
    1, 'z', 'R', 0,               /* version, augmentation */
    1, 0x78, 16,                  /* code align 1, data align -8, return address r16 */
    1, 0x00,                      /* FDE pointers absolute, 8 bytes */
    0, 0, 0,                      /* DW_CFA_nop padding to 20 bytes */
  };
  memcpy(p, cie, sizeof cie);
  return sizeof cie;
}

static size_t put_fde(uint8_t *p, size_t cie_at, size_t at, uintptr_t code, size_t len, const struct ch_cfi_rule *r) {
  uint8_t prog[16];
  size_t n = 0;
  prog[n++] = 0x0c;                                   /* DW_CFA_def_cfa reg, off */
  prog[n++] = r->cfa_kind == CH_CFA_RBP ? 6 : 7;
  uint32_t off = (uint32_t)r->cfa_off;
  do { uint8_t b = off & 0x7f; off >>= 7; prog[n++] = (uint8_t)(b | (off ? 0x80 : 0)); } while (off);
  prog[n++] = 0x80 | 16;                              /* DW_CFA_offset r16 */
  prog[n++] = (uint8_t)(-r->ra_off / 8);
  if (r->rbp_kind == CH_RBP_AT_CFA) { prog[n++] = 0x80 | 6; prog[n++] = (uint8_t)(-r->rbp_off / 8); }
  while ((4 + 8 + 8 + 1 + n) % 8 != 4) prog[n++] = 0;  /* DW_CFA_nop to keep entries 8-aligned */
  uint32_t flen = (uint32_t)(4 + 8 + 8 + 1 + n), cie_ptr = (uint32_t)(at + 4 - cie_at);
  memcpy(p, &flen, 4);
  memcpy(p + 4, &cie_ptr, 4);
  uint64_t b = code, rl = len;
  memcpy(p + 8, &b, 8);
  memcpy(p + 16, &rl, 8);
  p[24] = 0;                                          /* augmentation length */
  memcpy(p + 25, prog, n);
  return 4 + flen;
}

static bool encode(ZydisEncoderRequest *req, uint8_t *out, size_t *len, uintptr_t at) {
  ZyanUSize n = *len;
  if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstructionAbsolute(req, out, &n, at))) return false;
  *len = n;
  return true;
}

static bool encode_jmp(uint8_t *out, uintptr_t at, uintptr_t target) {
  ZydisEncoderRequest req;
  memset(&req, 0, sizeof req);
  req.machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
  req.mnemonic = ZYDIS_MNEMONIC_JMP;
  req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
  req.branch_width = ZYDIS_BRANCH_WIDTH_32;
  req.operand_count = 1;
  req.operands[0].type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
  req.operands[0].imm.u = target;
  size_t n = JMP_LEN;
  return encode(&req, out, &n, at) && n == JMP_LEN;
}

/* The stub for c at r + at (its run address code): the prefetch, the moved
 * instructions (rip-relative displacements rebased), the jump back. Its
 * length, or 0 if an operand is out of reach from there. */
static size_t build_stub(uint8_t *out, uintptr_t code, const struct cand *c) {
  ZydisEncoderRequest req;
  memset(&req, 0, sizeof req);
  req.machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
  req.mnemonic = ZYDIS_MNEMONIC_PREFETCHT0;
  req.operand_count = 1;
  req.operands[0].type = ZYDIS_OPERAND_TYPE_MEMORY;
  req.operands[0].mem.base = c->base;
  req.operands[0].mem.displacement = c->disp + c->l->distance;
  req.operands[0].mem.size = 1;
  size_t n = 16;
  if (!encode(&req, out, &n, code)) return 0;
  size_t at = n;
  ZydisDecodedInstruction ins;
  for (uintptr_t pc = c->addr; pc < c->addr + c->len; pc += ins.length) {
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&ch_decoder, NULL, (const void *)pc, c->addr + c->len - pc, &ins)))
      return 0;
    memcpy(out + at, (const void *)pc, ins.length);
    if (ins.attributes & ZYDIS_ATTRIB_IS_RELATIVE) {   /* a rip-relative operand (moves() allowed no other) */
      int32_t d;
      memcpy(&d, (const void *)(pc + ins.raw.disp.offset), 4);
      int64_t nd = (int64_t)(pc + ins.length) + d - (int64_t)(code + at + ins.length);
      if (nd < INT32_MIN || nd > INT32_MAX) return 0;
      d = (int32_t)nd;
      memcpy(out + at + ins.raw.disp.offset, &d, 4);
    }
    at += ins.length;
  }
  if (!encode_jmp(out + at, code + at, c->addr + c->len)) return 0;
  return at + JMP_LEN;
}

/* Write the jump over c's moved bytes (int3 after it), the process having
 * one thread. */
static bool write_jump(const struct cand *c, uintptr_t stub) {
  uint8_t code[32];
  if (!encode_jmp(code, c->addr, stub)) return false;
  memset(code + JMP_LEN, 0xcc, c->len - JMP_LEN);
  return ch_patch_write_code(c->addr, code, c->len);
}

/* Every candidate of module m that passed the checks: stubs in one region
 * near it, then the jumps. */
static void inject(const struct ch_module *m, struct cand *cs, unsigned n) {
  unsigned k = 0;
  for (unsigned i = 0; i < n; i++) k += cs[i].l->reason == CH_PREFETCH_PENDING;
  if (!k) return;
  size_t page = ch_page_size(), code = (size_t)k * STUB_SLOT, eh = code;
  size_t size = (eh + 24 + (size_t)k * 48 + 8 + page - 1) & ~(page - 1);
  uint8_t *r = ch_patch_map_near(m->lo, m->hi, size);
  if (!r) {
    for (unsigned i = 0; i < n; i++)
      if (cs[i].l->reason == CH_PREFETCH_PENDING) cs[i].l->reason = CH_PREFETCH_NO_STUB_SPACE;
    return;
  }
  memset(r, 0xcc, code);
  size_t e = eh + put_cie(r + eh), slot = 0;
  uintptr_t stub_at[CH_PREFETCH_MAX];
  for (unsigned i = 0; i < n; i++) {
    struct cand *c = &cs[i];
    if (c->l->reason != CH_PREFETCH_PENDING) continue;
    uintptr_t at = (uintptr_t)r + slot;
    size_t len = build_stub(r + slot, at, c);
    struct ch_cfi_rule rule;
    if (!len || !ch_cfi_find(m, c->addr, &rule)) { c->l->reason = CH_PREFETCH_UNMOVABLE; continue; }
    e += put_fde(r + e, eh, e, at, len, &rule);
    stub_at[i] = at;
    slot += STUB_SLOT;
  }
  memset(r + e, 0, 4);   /* terminator */
  if (!slot || !ch_patch_seal(r, size)) {
    munmap(r, size);
    for (unsigned i = 0; i < n; i++)
      if (cs[i].l->reason == CH_PREFETCH_PENDING) cs[i].l->reason = CH_PREFETCH_NO_STUB_SPACE;
    return;
  }
  ch_patch_register_unwind(r + eh);
  for (unsigned i = 0; i < n; i++) {
    struct cand *c = &cs[i];
    if (c->l->reason != CH_PREFETCH_PENDING) continue;
    if (!write_jump(c, stub_at[i])) { c->l->reason = CH_PREFETCH_NOT_WRITABLE; continue; }
    c->l->reason = CH_PREFETCH_INJECTED;
    ch_prefetch_injected++;
  }
}

const char *ch_prefetch_module_path(unsigned module) { return module < nmods ? mods[module].path : "?"; }

/* ------------------------------------------------------------- start-up */

/* By address, in place (qsort may allocate). */
static void sort_by_address(struct cand *cs, unsigned n) {
  for (unsigned i = 1; i < n; i++) {
    struct cand c = cs[i];
    unsigned j = i;
    for (; j > 0 && cs[j - 1].addr > c.addr; j--) cs[j] = cs[j - 1];
    cs[j] = c;
  }
}

static struct cand cands[CH_PREFETCH_MAX];

void ch_prefetch_init(const char *path) {
  char *text;
  size_t len;
  int err = ch_read_file(path, &text, &len);
  if (err) {
    ch_warn("COHORT_PREFETCH=%s: %s; no prefetches injected", path, strerror(err));
    return;
  }
  char why[200];
  bool ok = parse(text, len, why, sizeof why);
  ch_os_release(text, len + 1);
  if (!ok) {
    nmods = ch_prefetch_nloads = 0;
    ch_warn("COHORT_PREFETCH=%s: %s; no prefetches injected", path, why);
    return;
  }
  ch_prefetch_file = path;
  if (!ch_opt.patch || !ch_prefetch_nloads) return;   /* COHORT_PATCH=0: code stays as it is */
  if (!ch_patch_code_init()) {
    ch_warn("COHORT_PREFETCH=%s: no instruction decoder; no prefetches injected", path);
    return;
  }
  if (!ch_patch_one_thread()) {
    ch_warn("COHORT_PREFETCH=%s: the process already runs threads at start-up; no prefetches injected", path);
    for (unsigned j = 0; j < ch_prefetch_nloads; j++) ch_prefetch_loads[j].reason = CH_PREFETCH_THREADS;
    return;
  }
  bind_modules();
  for (unsigned i = 0; i < nmods; i++) {
    const struct ch_module *m = mods[i].m;
    if (!m) continue;
    unsigned n = 0;
    for (unsigned j = 0; j < ch_prefetch_nloads; j++) {
      struct ch_prefetch_load *l = &ch_prefetch_loads[j];
      if (l->module != i || l->reason != CH_PREFETCH_PENDING) continue;
      struct cand *c = &cands[n];
      memset(c, 0, sizeof *c);
      c->l = l;
      c->addr = m->bias + l->offset;
      l->reason = examine(m, c);
      if (l->reason == CH_PREFETCH_PENDING) n++;
    }
    sort_by_address(cands, n);
    for (unsigned j = 1; j < n; j++)   /* two loads whose moved bytes overlap: the first moves */
      if (cands[j].addr < cands[j - 1].addr + cands[j - 1].len) cands[j].l->reason = CH_PREFETCH_OVERLAP;
    struct scan *s = ch_meta_alloc(sizeof *s);   /* once per module named, at start-up */
    if (!s) continue;
    s->m = m;
    s->cs = cands;
    s->n = n;
    if (!ch_cfi_each_function(m, scan_function, s))
      for (unsigned j = 0; j < n; j++) cands[j].l->reason = CH_PREFETCH_NO_FUNCTION;
    inject(m, cands, n);
  }
  bool warned = false;
  for (unsigned j = 0; j < ch_prefetch_nloads; j++) {
    int r = ch_prefetch_loads[j].reason;
    if (!warned && (r == CH_PREFETCH_OUTSIDE || r == CH_PREFETCH_NOT_A_LOAD)) {
      ch_warn("COHORT_PREFETCH=%s: no load of the form advised at %s+%#lx: is the file for this build?", path,
              ch_base_name(mods[ch_prefetch_loads[j].module].path), (unsigned long)ch_prefetch_loads[j].offset);
      warned = true;
    }
  }
  ch_info("prefetch: %u of %u loads injected", ch_prefetch_injected, ch_prefetch_nloads);
}
