/* Cohort runtime: anchors, which carry a plan's call sites across a rebuild
 * of their module (docs/plan-format.md, "Anchors"). A site's offset moves
 * with any change to the code before it; what it calls, the calls around
 * it and the function that holds it mostly do not. An anchor records those;
 * finding it again in another build accepts a call only when it is the one
 * call of its kind and target that fits, so a site that cannot be told
 * apart is dropped, never bound to a stranger.
 *
 * Everything is read from the module's file, mapped read-only (by the tool
 * cohort-anchor, and by the runtime when it meets another build of a
 * planned module), so both give the same answer: the sections that hold
 * code, the function symbols, the GOT slots' relocations. Calls are found
 * by decoding the code from each code section's start (Zydis, decode.h).
 * Nothing here calls malloc. */
#define _GNU_SOURCE
#include "bind.h"
#include "decode.h"

#include <elf.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ the scan */

struct call {
  uint64_t ret;      /* file address of the return address: a site's offset */
  uint32_t id;       /* hash of kind and target: what the windows compare */
  uint8_t kind;      /* CALL_DIRECT, CALL_SLOT, CALL_INDIRECT */
  const char *to;    /* the target's name, or "-" */
  const char *callee;   /* a direct call of the module's own function: its symbol, or NULL */
};
enum { CALL_DIRECT = CH_ANCHOR_DIRECT, CALL_SLOT = CH_ANCHOR_SLOT, CALL_INDIRECT = CH_ANCHOR_INDIRECT };
struct func { uint64_t lo, hi; const char *name; };
struct slot { uint64_t at; const char *name; };
struct code { uint64_t addr, size, off; bool stubs; };

#define MAX_CODE 64
struct ch_calls {
  const char *file;
  size_t len;
  struct code code[MAX_CODE];
  unsigned ncode;
  struct func *fn;
  size_t nfn, fn_bytes;
  struct slot *slot;
  size_t nslot, slot_bytes;
  struct call *call;
  size_t ncall, call_bytes;
  uint8_t build_id[CH_BUILD_ID_MAX];
  unsigned build_id_len;
  bool named;   /* the file has its static symbols: every function has its name */
};

static uint32_t fnv(uint32_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}
static uint32_t identity(uint8_t kind, const char *to) {
  char k = (char)kind;
  return fnv(fnv(2166136261u, &k, 1), to, strlen(to));
}

/* Is [off, off + n) inside the file? */
static bool in_file(const struct ch_calls *c, uint64_t off, uint64_t n) { return off <= c->len && n <= c->len - off; }
/* A NUL-terminated string at off within [lo, hi) of the file, or NULL. */
static const char *str_at(const struct ch_calls *c, uint64_t lo, uint64_t hi, uint64_t off) {
  if (lo + off >= hi || hi > c->len) return NULL;
  const char *s = c->file + lo + off;
  return memchr(s, 0, hi - lo - off) ? s : NULL;
}

/* An in-place heap sort by the first 64-bit key (no qsort: it may allocate). */
#define SORT_BY_FIRST(name, type)                                                                       \
  static void name(type *a, size_t n) {                                                                 \
    for (size_t k = n; k-- > 0;) {                                                                      \
      for (size_t i = k, n2 = n; 2 * i + 1 < n2;) {                                                     \
        size_t j = 2 * i + 1;                                                                           \
        if (j + 1 < n2 && a[j + 1].at_key > a[j].at_key) j++;                                           \
        if (a[i].at_key >= a[j].at_key) break;                                                          \
        type t = a[i]; a[i] = a[j]; a[j] = t; i = j;                                                    \
      }                                                                                                 \
    }                                                                                                   \
    for (size_t end = n; end-- > 1;) {                                                                  \
      type t = a[0]; a[0] = a[end]; a[end] = t;                                                         \
      for (size_t i = 0; 2 * i + 1 < end;) {                                                            \
        size_t j = 2 * i + 1;                                                                           \
        if (j + 1 < end && a[j + 1].at_key > a[j].at_key) j++;                                          \
        if (a[i].at_key >= a[j].at_key) break;                                                          \
        t = a[i]; a[i] = a[j]; a[j] = t; i = j;                                                         \
      }                                                                                                 \
    }                                                                                                   \
  }
#define at_key lo
SORT_BY_FIRST(sort_funcs, struct func)
#undef at_key
#define at_key at
SORT_BY_FIRST(sort_slots, struct slot)
#undef at_key

/* Room for n records of size bytes, demand-paged; NULL when too large. */
static void *reserve(size_t n, size_t size, size_t *bytes) {
  if (n > (SIZE_MAX >> 1) / size) return NULL;
  *bytes = n ? n * size : 1;
  return ch_os_reserve(*bytes);
}

/* The function whose [lo, hi) holds a, or NULL (fn sorted by lo). */
static const struct func *func_at(const struct ch_calls *c, uint64_t a) {
  size_t lo = 0, hi = c->nfn;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->fn[mid].lo <= a) lo = mid + 1; else hi = mid;
  }
  /* Symbols may nest or overlap (aliases): the nearest start below a that holds it. */
  for (size_t i = lo; i-- > 0 && lo - i <= 8;)
    if (c->fn[i].lo <= a && a < c->fn[i].hi) return &c->fn[i];
  return NULL;
}
static const char *slot_name(const struct ch_calls *c, uint64_t at) {
  size_t lo = 0, hi = c->nslot;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->slot[mid].at < at) lo = mid + 1; else hi = mid;
  }
  return lo < c->nslot && c->slot[lo].at == at ? c->slot[lo].name : NULL;
}
static const struct code *code_at(const struct ch_calls *c, uint64_t a) {
  for (unsigned i = 0; i < c->ncode; i++)
    if (a >= c->code[i].addr && a - c->code[i].addr < c->code[i].size) return &c->code[i];
  return NULL;
}

/* A PLT entry's target: the slot its `jmp *slot(%rip)` reads, past an
 * endbr64 or a push, within its first three instructions. */
static const char *stub_target(const struct ch_calls *c, const struct code *s, uint64_t at) {
  for (int k = 0; k < 3; k++) {
    uint64_t off = s->off + (at - s->addr);
    size_t left = (size_t)(s->addr + s->size - at);
    ZydisDecodedInstruction ins;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, c->file + off, left, &ins, ops))) return NULL;
    if (ins.mnemonic == ZYDIS_MNEMONIC_JMP) {
      if (ops[0].type != ZYDIS_OPERAND_TYPE_MEMORY || ops[0].mem.base != ZYDIS_REGISTER_RIP) return NULL;
      return slot_name(c, at + ins.length + (uint64_t)ops[0].mem.disp.value);
    }
    at += ins.length;
  }
  return NULL;
}

/* What a call reaches, named as the anchor names it: an import by its
 * name, which every build has (a PLT entry's, or a GOT slot's); a function
 * of the module itself as `-`, since a stripped build has no name for it
 * and the same program's builds should compare alike stripped or not. */
static const char *target_name(const struct ch_calls *c, uint8_t kind, uint64_t target) {
  const char *name = NULL;
  if (kind == CALL_SLOT) name = slot_name(c, target);
  else if (kind == CALL_DIRECT) {
    const struct code *s = code_at(c, target);
    if (s && s->stubs) name = stub_target(c, s, target);
  }
  return name && *name ? name : kind == CALL_INDIRECT ? "*" : "-";
}

static bool add_call(struct ch_calls *c, uint64_t ret, uint8_t kind, uint64_t target) {
  if ((c->ncall + 1) * sizeof *c->call > c->call_bytes) return false;
  struct call *k = &c->call[c->ncall++];
  k->ret = ret;
  k->kind = kind;
  k->to = target_name(c, kind, target);
  k->id = identity(kind, k->to);
  const struct func *f = kind == CALL_DIRECT && k->to[0] == '-' ? func_at(c, target) : NULL;
  k->callee = f && f->lo == target ? f->name : NULL;
  return true;
}

/* Every call in one section of code, decoded from its start. A byte Zydis
 * refuses (data in the code, padding) is stepped over. */
static bool scan_code(struct ch_calls *c, const struct code *s) {
  const char *base = c->file + s->off;
  for (uint64_t at = 0; at < s->size;) {
    ZydisDecodedInstruction ins;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&ch_decoder_lengths, NULL, base + at, s->size - at, &ins))) {
      at++;
      continue;
    }
    if (ins.mnemonic == ZYDIS_MNEMONIC_CALL) {
      ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
      uint64_t ret = s->addr + at + ins.length;
      if (ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, base + at, s->size - at, &ins, ops))) {
        bool ok;
        if (ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative)
          ok = add_call(c, ret, CALL_DIRECT, ret + (uint64_t)ops[0].imm.value.s);
        else if (ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[0].mem.base == ZYDIS_REGISTER_RIP &&
                 ops[0].mem.index == ZYDIS_REGISTER_NONE)
          ok = add_call(c, ret, CALL_SLOT, ret + (uint64_t)ops[0].mem.disp.value);
        else
          ok = add_call(c, ret, CALL_INDIRECT, 0);
        if (!ok) return false;
      }
    }
    at += ins.length;
  }
  return true;
}

static void read_build_id(struct ch_calls *c, const Elf64_Shdr *sh) {
  uint64_t off = sh->sh_offset, end = off + sh->sh_size;
  while (off + sizeof(Elf64_Nhdr) <= end && in_file(c, off, sizeof(Elf64_Nhdr))) {
    const Elf64_Nhdr *n = (const Elf64_Nhdr *)(c->file + off);
    uint64_t name = off + sizeof *n, desc = name + ((n->n_namesz + 3) & ~3u);
    uint64_t next = desc + ((n->n_descsz + 3) & ~3u);
    if (next > end || !in_file(c, off, next - off)) return;
    if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(c->file + name, "GNU", 4) &&
        n->n_descsz <= CH_BUILD_ID_MAX) {
      memcpy(c->build_id, c->file + desc, n->n_descsz);
      c->build_id_len = n->n_descsz;
      return;
    }
    off = next;
  }
}

void ch_calls_free(struct ch_calls *c) {
  if (!c) return;
  if (c->call) ch_os_release(c->call, c->call_bytes);
  if (c->slot) ch_os_release(c->slot, c->slot_bytes);
  if (c->fn) ch_os_release(c->fn, c->fn_bytes);
  if (c->file) ch_os_release((void *)c->file, c->len);
  ch_os_release(c, sizeof *c);
}

static struct ch_calls *refuse(struct ch_calls *c, char *why, size_t whylen, const char *what) {
  if (whylen) snprintf(why, whylen, "%s", what);
  ch_calls_free(c);
  return NULL;
}

struct ch_calls *ch_calls_scan(const char *path, char *why, size_t whylen) {
  if (!ch_decode_init()) return refuse(NULL, why, whylen, "cannot set up the decoder");
  struct ch_calls *c = ch_os_reserve(sizeof *c);
  if (!c) return refuse(NULL, why, whylen, "out of memory");
  memset(c, 0, sizeof *c);
  const char *data;
  int e = ch_map_file(path, &data, &c->len);
  if (e) {   /* its name, not strerror's text: that may allocate, to load a catalogue */
    char what[64];
    snprintf(what, sizeof what, "cannot read it (%s)", strerrorname_np(e) ? strerrorname_np(e) : "error");
    return refuse(c, why, whylen, what);
  }
  c->file = data;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)data;
  if (c->len < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_machine != EM_X86_64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      !in_file(c, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)) || eh->e_shstrndx >= eh->e_shnum)
    return refuse(c, why, whylen, "not an x86-64 ELF file with section headers");
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(data + eh->e_shoff);
  const Elf64_Shdr *names = &sh[eh->e_shstrndx];
  int symtab = -1, dynsym = -1;
  size_t nsym = 0, nrel = 0;
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    const char *name = str_at(c, names->sh_offset, names->sh_offset + names->sh_size, sh[i].sh_name);
    if (sh[i].sh_type == SHT_SYMTAB) symtab = (int)i;
    if (sh[i].sh_type == SHT_DYNSYM) dynsym = (int)i;
    if (sh[i].sh_type == SHT_NOTE) read_build_id(c, &sh[i]);
    if (sh[i].sh_type == SHT_PROGBITS && (sh[i].sh_flags & SHF_EXECINSTR) && sh[i].sh_size &&
        in_file(c, sh[i].sh_offset, sh[i].sh_size)) {
      if (c->ncode == MAX_CODE) return refuse(c, why, whylen, "too many sections of code");
      struct code *k = &c->code[c->ncode++];
      *k = (struct code){sh[i].sh_addr, sh[i].sh_size, sh[i].sh_offset, name && !strncmp(name, ".plt", 4)};
    }
  }
  /* Function symbols: the static table where the file has one, else the
   * dynamic one (a stripped file keeps only its exports). */
  int fs = symtab >= 0 ? symtab : dynsym;
  if (fs >= 0 && in_file(c, sh[fs].sh_offset, sh[fs].sh_size)) nsym = sh[fs].sh_size / sizeof(Elf64_Sym);
  /* The relocations the slots are named from: those against the dynamic
   * symbols, within the file, as the loop below reads them. */
  for (unsigned i = 0; i < eh->e_shnum && dynsym >= 0; i++)
    if (sh[i].sh_type == SHT_RELA && sh[i].sh_link == (unsigned)dynsym && in_file(c, sh[i].sh_offset, sh[i].sh_size))
      nrel += sh[i].sh_size / sizeof(Elf64_Rela);
  if (!(c->fn = reserve(nsym, sizeof *c->fn, &c->fn_bytes)) || !(c->slot = reserve(nrel, sizeof *c->slot, &c->slot_bytes)))
    return refuse(c, why, whylen, "out of memory");
  if (nsym && sh[fs].sh_link < eh->e_shnum) {
    const Elf64_Shdr *st = &sh[sh[fs].sh_link];
    const Elf64_Sym *sym = (const Elf64_Sym *)(data + sh[fs].sh_offset);
    for (size_t i = 0; i < nsym; i++) {
      unsigned type = ELF64_ST_TYPE(sym[i].st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || !sym[i].st_size || sym[i].st_shndx == SHN_UNDEF) continue;
      const char *name = str_at(c, st->sh_offset, st->sh_offset + st->sh_size, sym[i].st_name);
      if (name && *name) c->fn[c->nfn++] = (struct func){sym[i].st_value, sym[i].st_value + sym[i].st_size, name};
    }
  }
  c->named = symtab >= 0 && c->nfn > 0;
  sort_funcs(c->fn, c->nfn);
  /* GOT slots named by the relocations against the dynamic symbols. */
  for (unsigned i = 0; i < eh->e_shnum && dynsym >= 0; i++) {
    if (sh[i].sh_type != SHT_RELA || sh[i].sh_link != (unsigned)dynsym || !in_file(c, sh[i].sh_offset, sh[i].sh_size))
      continue;
    const Elf64_Shdr *ds = &sh[dynsym], *dstr = sh[dynsym].sh_link < eh->e_shnum ? &sh[sh[dynsym].sh_link] : NULL;
    if (!dstr || !in_file(c, ds->sh_offset, ds->sh_size)) continue;
    const Elf64_Rela *r = (const Elf64_Rela *)(data + sh[i].sh_offset);
    const Elf64_Sym *dsym = (const Elf64_Sym *)(data + ds->sh_offset);
    size_t ndsym = ds->sh_size / sizeof *dsym;
    for (size_t j = 0; j < sh[i].sh_size / sizeof *r; j++) {
      unsigned type = (unsigned)ELF64_R_TYPE(r[j].r_info);
      size_t s = ELF64_R_SYM(r[j].r_info);
      if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT && type != R_X86_64_64) || !s || s >= ndsym)
        continue;
      const char *name = str_at(c, dstr->sh_offset, dstr->sh_offset + dstr->sh_size, dsym[s].st_name);
      if (name && *name && c->nslot < nrel) c->slot[c->nslot++] = (struct slot){r[j].r_offset, name};
    }
  }
  sort_slots(c->slot, c->nslot);
  /* The sections of code in address order, so that calls come out sorted. */
  for (unsigned i = 1; i < c->ncode; i++)
    for (unsigned j = i; j > 0 && c->code[j - 1].addr > c->code[j].addr; j--) {
      struct code t = c->code[j]; c->code[j] = c->code[j - 1]; c->code[j - 1] = t;
    }
  uint64_t bytes = 0;
  for (unsigned i = 0; i < c->ncode; i++) bytes += c->code[i].size;
  /* At most one call every two bytes (`call *%rax`): demand-paged. */
  if (!(c->call = reserve(bytes / 2 + 1, sizeof *c->call, &c->call_bytes)))
    return refuse(c, why, whylen, "out of memory");
  for (unsigned i = 0; i < c->ncode; i++)
    if (!c->code[i].stubs && !scan_code(c, &c->code[i])) return refuse(c, why, whylen, "too many calls");
  return c;
}

const uint8_t *ch_calls_build_id(const struct ch_calls *c, unsigned *len) {
  *len = c->build_id_len;
  return c->build_id;
}

/* --------------------------------------------------------- the anchors */

/* How many of the calls an anchor records around its own must agree,
 * nearest first and some on each side, for a call found by them alone:
 * with its own kind and target, three more calls in a row is a place in
 * the code, where one or two are often any wrapper's. */
#define MIN_AGREE 3
#define WINDOW CH_ANCHOR_WINDOW
#define NAME_KEPT CH_ANCHOR_NAME

static const struct call *call_by_ret(const struct ch_calls *c, uint64_t ret) {
  size_t lo = 0, hi = c->ncall;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->call[mid].ret < ret) lo = mid + 1; else hi = mid;
  }
  return lo < c->ncall && c->call[lo].ret == ret ? &c->call[lo] : NULL;
}

/* A name as an anchor writes it: itself, or `~` and its hash (a name too
 * long for a plan's line, or with a character its grammar uses or one
 * that is not printable ASCII). */
static void put_name(char *out, size_t n, const char *name) {
  size_t len = strlen(name);
  bool plain = len <= NAME_KEPT && !strpbrk(name, "#=,~");
  for (size_t i = 0; plain && i < len; i++) plain = name[i] > ' ' && name[i] < 0x7f;
  if (plain) snprintf(out, n, "%s", name);
  else snprintf(out, n, "~%08x", fnv(2166136261u, name, len));
}
static bool same_name(const char *written, const char *name) {
  char mine[NAME_KEPT + 2];
  put_name(mine, sizeof mine, name);
  return !strcmp(written, mine);
}

/* The calls in f, [*from, *to): those whose return address lies in
 * (f->lo, f->hi], since the call instruction itself lies in [lo, hi). */
static void calls_in(const struct ch_calls *c, const struct func *f, size_t *from, size_t *to) {
  size_t lo = 0, hi = c->ncall;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->call[mid].ret <= f->lo) lo = mid + 1; else hi = mid;
  }
  *from = lo;
  while (lo < c->ncall && c->call[lo].ret <= f->hi) lo++;
  *to = lo;
}

/* The identity of the call `j` places from call i on a side (0 before, 1
 * after), or 0 past the code's ends: what an anchor's windows hold. */
static uint32_t neighbour(const struct ch_calls *c, size_t i, int side, size_t j) {
  if (side ? i + j >= c->ncall : i < j) return 0;
  return c->call[side ? i + j : i - j].id;
}

bool ch_anchor_describe(const struct ch_calls *c, uint64_t offset, char *out, size_t n, const char **why) {
  const struct call *k = call_by_ret(c, offset);
  if (!k) { *why = "no call returns there"; return false; }
  const struct func *f = func_at(c, k->ret - 1);
  char to[NAME_KEPT + 2], in[NAME_KEPT + 2];
  put_name(to, sizeof to, k->to);
  put_name(in, sizeof in, f ? f->name : "-");
  size_t nth = 0, count = 0, first, end;
  if (f) {   /* its place among f's calls of its identity */
    calls_in(c, f, &first, &end);
    for (size_t j = first; j < end; j++)
      if (c->call[j].id == k->id) {
        if (&c->call[j] == k) nth = count;
        count++;
      }
  }
  char callee[NAME_KEPT + 2] = "";
  if (k->callee) put_name(callee, sizeof callee, k->callee);
  int w = snprintf(out, n, "call=%c:%s in=%s%s%s nth=%zu/%zu", k->kind, to, in, *callee ? " tofn=" : "", callee,
                   nth, count);
  size_t i = (size_t)(k - c->call);
  for (int side = 0; side < 2 && w > 0 && (size_t)w < n; side++) {
    w += snprintf(out + w, n - (size_t)w, side ? " after=" : " before=");
    for (size_t j = 1; j <= WINDOW && (size_t)w < n; j++)
      w += snprintf(out + w, n - (size_t)w, "%s%08x", j > 1 ? "," : "", neighbour(c, i, side, j));
  }
  if (w < 0 || (size_t)w >= n) { *why = "anchor too long"; return false; }
  return true;
}

/* How many of the calls around call i agree with the anchor's, counted
 * outwards on each side until the first that does not; 0 unless some agree
 * on both sides (the calls of start-up code that every program has, before
 * a function's, agree across programs). */
static unsigned agreement(const struct ch_calls *c, size_t i, const struct ch_anchor *a) {
  unsigned n[2] = {0, 0};
  for (int side = 0; side < 2; side++)
    for (size_t j = 1; j <= WINDOW && neighbour(c, i, side, j) == a->side[side][j - 1]; j++) n[side]++;
  return n[0] && n[1] ? n[0] + n[1] : 0;
}

/* The one call among calls [from, to) of the anchor's identity that agrees
 * best with its windows, if no other agrees as well and at least `least`
 * calls agree. */
static const struct call *best_fit(const struct ch_calls *c, const struct ch_anchor *a, uint32_t id, size_t from,
                                   size_t to, unsigned least, const char **why) {
  const struct call *best = NULL;
  unsigned top = 0;
  bool tie = false;
  for (size_t i = from; i < to; i++) {
    const struct call *k = &c->call[i];
    if (k->id != id) continue;
    unsigned n = agreement(c, i, a);
    if (best && n == top) tie = true;
    if (!best || n > top) { best = k; top = n; tie = false; }
  }
  if (!best) { *why = "no call of that kind to that target"; return NULL; }
  if (top < least) { *why = "the calls around it changed"; return NULL; }
  if (tie) { *why = "several calls fit alike"; return NULL; }
  return best;
}

uint64_t ch_anchor_find(const struct ch_calls *c, const struct ch_anchor *anchor, const char **how,
                        const char **why) {
  const struct ch_anchor a = *anchor;
  /* The identity of the anchored call, as scan_code hashes it: a name kept
   * as its hash cannot be hashed again, so such calls are compared by name. */
  uint32_t id = 0;
  bool hashed = a.to[0] == '~', found = !hashed;
  for (size_t i = 0; i < c->ncall && !found; i++)
    if (c->call[i].kind == (uint8_t)a.kind && same_name(a.to, c->call[i].to)) { id = c->call[i].id; found = true; }
  if (!found) { *why = "no call of that kind to that target"; return 0; }
  if (!hashed) id = identity((uint8_t)a.kind, a.to);
  /* A call of a function of the module's own, or an indirect one, names
   * no target: its place among such calls alone is weak evidence, unless
   * the anchor and this build name the function it calls alike. */
  bool vague = !strcmp(a.to, "-") || !strcmp(a.to, "*");
  /* By the function's symbol, where both builds have it, once: its calls of
   * that identity, the same number of them, and this one's place (for a
   * vague call, with the same callee's name or a neighbour that agrees on
   * each side); else the one that fits the calls around best within it, or
   * none: a call elsewhere is another function's. */
  if (strcmp(a.in, "-")) {
    const struct func *f = NULL;
    unsigned named = 0;
    for (size_t i = 0; i < c->nfn; i++)
      if (same_name(a.in, c->fn[i].name) && (!f || f->lo != c->fn[i].lo)) { f = &c->fn[i]; named++; }
    /* A file with every function's name and none of this one's: gone. */
    if (!named && c->named) { *why = "its function is not in this build"; return 0; }
    if (named == 1) {
      size_t nth = SIZE_MAX, count = 0, from, to;
      calls_in(c, f, &from, &to);
      for (size_t i = from; i < to; i++)
        if (c->call[i].id == id) {
          if (count == a.nth) nth = i;
          count++;
        }
      /* A vague call's own target: its name, where both builds have one,
       * says whether it is the same call (another name: it is not). */
      const char *callee = nth != SIZE_MAX ? c->call[nth].callee : NULL;
      bool named_alike = a.callee[0] && callee, same_callee = named_alike && same_name(a.callee, callee);
      if (count == a.count && nth != SIZE_MAX &&
          (!vague || same_callee || (!named_alike && agreement(c, nth, &a)))) {
        *how = "symbol";
        return c->call[nth].ret;
      }
      const struct call *k = best_fit(c, &a, id, from, to, MIN_AGREE, why);
      if (k) *how = "symbol and calls";
      return k ? k->ret : 0;
    }
  }
  const struct call *k = best_fit(c, &a, id, 0, c->ncall, MIN_AGREE, why);
  if (!k) return 0;
  *how = "calls";
  return k->ret;
}
