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
 * So every tracked object of up to 256 bytes is placed again in four models
 * of one pool in allocation order, one per offset K, each allocating as the
 * runtime's pool does with at=K: 16-byte granules, a freed block reused last
 * in, first out by the next request of its size, else the bump pointer's
 * next bytes, where a block of whole lines starts K bytes into a line and
 * the gap before it becomes a free block of its own (the small requests of
 * its size take it). The packed place is layouts.c's model of one pool.
 * Every access to a placed object is then replayed in one D1 per place (32
 * KiB, 8-way, LRU), at the object's place there: the gaps a place leaves
 * move the other objects too, and their misses count. instrument.c
 * marks a *chase*: a 64-bit load whose result replaces the register that
 * held its base (mov 0x20(%r12),%r12). A chase *waits* when its line is not
 * in the D1, or came in during the same visit to the object (consecutive
 * accesses to it: the coordinates read just before, from the same line, are
 * still on their way). Per context and place: the D1 misses and the chases
 * that waited; the planner adds them (cohort/plan/planner.py, line_choice).
 * Only these objects' accesses reach these caches (as in layouts.c's): the
 * places are compared with each other, not with the run. */
#include "profiler.h"

#define LINE_MAX_BLOCK 256
#define GRANULE 16
#define BINS (LINE_MAX_BLOCK / GRANULE + 1)   /* by granules, 1 to 16 */
/* Places modelled: PACKED (where layouts.c's one pool put it), then 0, 16,
 * 32, 48 bytes into a line (the models below, 0 to 3). */
#define PACKED 0
#define OFFSETS 4
/* Far above the client's mappings and below 2^47, apart from layouts.c's. */
#define LINES_BASE CH_LINES_BASE

typedef struct {
  Addr bump;
  AddrStack bins[BINS];   /* freed blocks of each size, last freed on top */
} Placer;
static Placer placers[OFFSETS];

static inline UInt granules(SizeT size) { return size ? (UInt)((size + GRANULE - 1) / GRANULE) : 1; }

/* A request of g granules in the model of offset k: a freed block of its
 * size, else bumped, a block of whole lines k * 16 bytes into a line. */
static Addr place(UInt k, UInt g) {
  Placer *m = &placers[k];
  if (m->bins[g].n) return m->bins[g].a[--m->bins[g].n];
  if (!m->bump) m->bump = LINES_BASE;
  Addr a = m->bump;
  if (!(g & 3)) {   /* whole lines */
    Addr phase = (Addr)k * GRANULE;
    a = ((a - phase + 63) & ~(Addr)63) + phase;
    if (a != m->bump) ch_stack_push(&m->bins[(a - m->bump) / GRANULE], m->bump, "cohort.lines");
  }
  m->bump = a + (Addr)g * GRANULE;
  return a;
}

/* Until the first block of whole lines, the four offsets' models place
 * every block as layouts.c's one pool does (the packed place: the same
 * blocks, tracked ones of 1 to 256 bytes, by the same rule), a whole number
 * of pages from it, so their caches hold the same sets' lines, each tag
 * moved by one constant: the packed place's D1 alone is simulated, and its
 * counts are the others' too. The first such block copies its cache to the
 * offsets' models, its lines moved, and from then on each is simulated. A
 * run with no such object (treesim's 16-, 32- and 104-byte objects)
 * replays its accesses in one D1 instead of five. */
_Static_assert((CH_MODEL_BASE - LINES_BASE) % ((Addr)CH_D1_SETS << CH_LINE_BITS) == 0,
               "the packed place and the offsets' models map to the same sets");
static Bool apart;
static void part_models(void);

void ch_lines_alloc(Obj *o) {
  for (UInt k = 0; k < OFFSETS; k++) o->at[k] = 0;
  if (o->size > LINE_MAX_BLOCK) return;
  UInt g = granules(o->size);
  if (!(g & 3) && !apart) part_models();
  for (UInt k = 0; k < OFFSETS; k++) o->at[k] = ch_place_code(LINES_BASE, place(k, g));
  /* A place past 32 bits in one model: in none (the models stay alike). */
  for (UInt k = 0; k < OFFSETS; k++)
    if (!o->at[k]) o->at[0] = 0;
}

void ch_lines_free(Obj *o) {
  if (!o->at[0]) return;
  UInt g = granules(o->size);
  for (UInt k = 0; k < OFFSETS; k++) {
    ch_stack_push(&placers[k].bins[g], ch_place_addr(LINES_BASE, o->at[k]), "cohort.lines");
    o->at[k] = 0;
  }
}

typedef struct {
  Addr tag[CH_D1_SETS][CH_D1_WAYS];   /* line + 1, most recent first */
  ULong fill[CH_D1_SETS][CH_D1_WAYS]; /* the visit that brought each line in */
  Addr last;                          /* the line touched last (+ 1), most recent in its set, */
  ULong last_fill;                    /* and its fill: touched again, it hits and nothing moves */
} LineCache;

static LineCache caches[CH_LINE_MODELS];

static void part_models(void) {
  const Addr moved = (CH_MODEL_BASE - LINES_BASE) >> CH_LINE_BITS;
  LineCache *one = &caches[1];
  *one = caches[PACKED];
  for (UInt s = 0; s < CH_D1_SETS; s++)
    for (UInt w = 0; w < CH_D1_WAYS; w++)
      if (one->tag[s][w]) one->tag[s][w] -= moved;
  if (one->last) one->last -= moved;
  for (UInt k = 2; k < CH_LINE_MODELS; k++) caches[k] = *one;
  apart = True;
}
static ULong visit;            /* visits to placed objects so far, from 1 */
static UInt visit_id;          /* the object of the current visit */
static ULong visit_seq;
static ULong modelled;         /* accesses replayed */

/* Touch a line; returns whether it missed, and in *fresh whether it came
 * in during the current visit (a miss now counts as fresh too). */
static inline Bool line_touch(LineCache *c, Addr line, Bool *fresh) {
  UInt s = (UInt)(line & (CH_D1_SETS - 1)), i = 0;
  Addr tag = line + 1;
  if (tag == c->last) {   /* most accesses of a visit stay in one line */
    *fresh = c->last_fill == visit;
    return False;
  }
  Addr *t = c->tag[s];
  ULong *f = c->fill[s];
  while (i < CH_D1_WAYS && t[i] != tag) i++;
  Bool hit = i < CH_D1_WAYS;
  ULong when = hit ? f[i] : visit;
  if (!hit) i = CH_D1_WAYS - 1;
  for (; i > 0; i--) { t[i] = t[i - 1]; f[i] = f[i - 1]; }
  t[0] = tag;
  f[0] = when;
  c->last = tag;
  c->last_fill = when;
  *fresh = when == visit;
  return !hit;
}

void ch_lines_touch(const Obj *o, CtxStats *cs, UInt id, Addr a, SizeT size, Bool chase, ULong weight) {
  if (!o->model[CH_LAYOUT_ONE] || !o->at[0]) return;
  if (id != visit_id || o->seq != visit_seq) {   /* a new visit */
    visit++;
    visit_id = id;
    visit_seq = o->seq;
  }
  modelled += weight;
  Addr d = a - o->start;
  if (chase) cs->chases += weight;
  UInt models = apart ? CH_LINE_MODELS : 1;   /* or packed alone, standing for the offsets' */
  for (UInt k = 0; k < models; k++) {
    Addr at = (k == PACKED ? ch_place_addr(CH_MODEL_BASE, o->model[CH_LAYOUT_ONE])
                           : ch_place_addr(LINES_BASE, o->at[k - 1])) + d;
    Addr first = at >> CH_LINE_BITS, last = (at + (size ? size - 1 : 0)) >> CH_LINE_BITS;
    Bool fresh, fresh2 = False;
    Bool missed = line_touch(&caches[k], first, &fresh);
    if (last != first && line_touch(&caches[k], last, &fresh2)) missed = True;
    if (missed) cs->line_misses[k] += weight;
    if (chase && (fresh || fresh2)) cs->chase_waits[k] += weight;
  }
  for (UInt k = models; k < CH_LINE_MODELS; k++) {   /* the offsets' models, alike so far */
    cs->line_misses[k] = cs->line_misses[PACKED];
    cs->chase_waits[k] = cs->chase_waits[PACKED];
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
