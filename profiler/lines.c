/* Lines: where within its cache line a line-sized block should start.
 *
 * A pool places a block whose size is a whole number of lines (64, 128, 192
 * or 256 bytes once rounded to 16) either where the bump pointer is (the
 * rest pool packs) or at the start of a line (a group's blocks), and may
 * place it 16, 32 or 48 bytes into one instead (the plan's at=K). Cachegrind
 * counts as many misses at every offset on a walk like tour's; what the
 * offset changes is which load waits for them (docs/runtime.md, "A big
 * build walked out of allocation order"). A program that chases a pointer
 * (p = p->next) cannot start the next step until that pointer has arrived:
 * a miss on its line is paid in full, where a miss on the line of the data
 * beside it overlaps with the chase. Which fields share a line depends on
 * the offset.
 *
 * So every access to a tracked object of such a size, at most 256 bytes, is
 * replayed in one D1 per offset (the packed place, then a line's start, 16,
 * 32 and 48 bytes in), each object at its place in layouts.c's model of one
 * pool in allocation order, moved down to its line's start and then K bytes
 * on. instrument.c marks a *chase*: a 64-bit load whose result replaces the
 * register that held its base (mov 0x20(%r12),%r12). A chase *waits* when
 * its line is not in the D1, or came in during the same visit to the object
 * (consecutive accesses to it: the coordinates read just before, from the
 * same line, are still on their way). Per context and offset: the D1 misses
 * and the chases that waited; the planner adds them (cohort/planner.py,
 * line_offsets). Only these objects' accesses reach these caches: the
 * offsets are compared with each other, not with the run. */
#include "profiler.h"

#define LINE_MAX_BLOCK 256
/* Offsets modelled: CH_LINE_PACKED (where the one-pool model put it), then
 * 0, 16, 32, 48 bytes into a line. */
#define PACKED 0

typedef struct {
  Addr tag[CH_D1_SETS][CH_D1_WAYS];   /* line + 1, most recent first */
  ULong fill[CH_D1_SETS][CH_D1_WAYS]; /* the visit that brought each line in */
} LineCache;

static LineCache caches[CH_LINE_MODELS];
static ULong visit;            /* visits to line-sized objects so far, from 1 */
static UInt visit_id;          /* the object of the current visit */
static ULong visit_seq;
static ULong modelled;         /* accesses replayed */

/* Touch a line; returns whether it missed, and in *fresh whether it came
 * in during the current visit (a miss now counts as fresh too). */
static inline Bool line_touch(LineCache *c, Addr line, Bool *fresh) {
  UInt s = (UInt)(line & (CH_D1_SETS - 1)), i = 0;
  Addr tag = line + 1;
  Addr *t = c->tag[s];
  ULong *f = c->fill[s];
  while (i < CH_D1_WAYS && t[i] != tag) i++;
  Bool hit = i < CH_D1_WAYS;
  ULong when = hit ? f[i] : visit;
  if (!hit) i = CH_D1_WAYS - 1;
  for (; i > 0; i--) { t[i] = t[i - 1]; f[i] = f[i - 1]; }
  t[0] = tag;
  f[0] = when;
  *fresh = when == visit;
  return !hit;
}

static inline Bool line_sized(const Obj *o) {
  SizeT n = (o->size + 15) & ~(SizeT)15;
  return n && n <= LINE_MAX_BLOCK && !(n & 63);
}

void ch_lines_touch(const Obj *o, UInt id, Addr a, SizeT size, Bool chase) {
  if (!o->model[CH_LAYOUT_ONE] || !line_sized(o)) return;
  if (id != visit_id || o->seq != visit_seq) {   /* a new visit */
    visit++;
    visit_id = id;
    visit_seq = o->seq;
  }
  modelled++;
  Addr d = a - o->start, packed = o->model[CH_LAYOUT_ONE];
  CtxStats *cs = ch_ctx_stats(o->ctx);
  if (chase) cs->chases++;
  for (UInt k = 0; k < CH_LINE_MODELS; k++) {
    Addr at = (k == PACKED ? packed : (packed & ~(Addr)63) + (Addr)(k - 1) * 16) + d;
    Addr first = at >> CH_LINE_BITS, last = (at + (size ? size - 1 : 0)) >> CH_LINE_BITS;
    Bool fresh, fresh2 = False;
    Bool missed = line_touch(&caches[k], first, &fresh);
    if (last != first && line_touch(&caches[k], last, &fresh2)) missed = True;
    if (missed) cs->line_misses[k]++;
    if (chase && (fresh || fresh2)) cs->chase_waits[k]++;
  }
}

void ch_lines_write(VgFile *f) {
  VG_(fprintf)(f, "lines offsets packed 0 16 32 48 max %d accesses %llu\n", LINE_MAX_BLOCK, modelled);
  for (UInt c = 0; c < ch_n_contexts(); c++) {
    const CtxStats *cs = ch_ctx_stats(c);
    ULong any = cs->chases;
    for (UInt k = 0; k < CH_LINE_MODELS; k++) any |= cs->line_misses[k];
    if (!any) continue;
    VG_(fprintf)(f, "line %u %llu", c, cs->chases);
    for (UInt k = 0; k < CH_LINE_MODELS; k++) VG_(fprintf)(f, " %llu", cs->line_misses[k]);
    for (UInt k = 0; k < CH_LINE_MODELS; k++) VG_(fprintf)(f, " %llu", cs->chase_waits[k]);
    VG_(fprintf)(f, "\n");
  }
}
