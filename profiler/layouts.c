/* Layouts: the two shapes a plan's rest pool can take, simulated side by side.
 *
 * The rest pool holds the objects no group claims. The runtime either splits
 * it by size class, one pool per 16 bytes (a walk over one kind of object
 * then steps over no other kind allocated between them), or keeps it one
 * pool in allocation order (objects allocated together stay together,
 * whatever their sizes: a hash entry beside its key). Which one misses less
 * is a property of the program: our workloads' rest objects missed up to a
 * third less by class, treesim's a little less in one pool, and a test's
 * entries visited with their keys 42% less in one pool. So every tracked object of
 * up to CLASS_MAX bytes is placed twice more, once in a model of each
 * layout, and every access to a tracked object goes through a simulated
 * cache per layout (the geometry of loads.c's): a placed object's at its
 * place in that layout, a larger one's at its own address. Stack and global
 * accesses are left out: modelled too, they made the profiler 52% slower
 * instead of 17%, and changed the verdict on none of seven programs. The planner keeps the
 * layout with fewer D1 misses (docs/planner.md, "The rest pool's shape").
 *
 * Each model allocates as the runtime's pools do: requests rounded up to
 * 16-byte granules, a freed block reused last in, first out by the next
 * request of its size, else the bump pointer's next bytes: one pointer for
 * the single pool, one per class for the split, each class starting a page
 * and a line further into its own region, as the runtime colours its
 * chunks. Objects above CLASS_MAX go to the next allocator in both (the
 * rest pool takes no more): they keep their own addresses. */
#include "profiler.h"

#define GRANULE 16
#define CLASS_MAX 256                    /* the runtime's exact classes */
#define NCLASSES (CLASS_MAX / GRANULE)
/* Far above the client's mappings and below 2^47: each class's region is
 * 2^36 bytes, more than any run allocates. */
#define MODEL_BASE ((Addr)0x600000000000ULL)
#define CLASS_SPAN ((Addr)1 << 36)

typedef struct {
  Addr *a;
  UInt n, cap;
} Stack;

typedef struct {
  SimCache cache;
  Addr bump[NCLASSES];    /* CH_LAYOUT_ONE uses bump[0] for every class */
  Stack bins[NCLASSES];   /* freed blocks of each size, last freed on top */
  ULong d1_misses, ll_misses;
} Model;

static Model models[CH_LAYOUTS];
static ULong placed, placed_accesses;

static inline UInt class_of(SizeT size) { return (UInt)((size - 1) / GRANULE); }

static Addr place(Model *m, UInt layout, UInt k) {
  Stack *s = &m->bins[k];
  if (s->n) return s->a[--s->n];
  UInt b = layout == CH_LAYOUT_ONE ? 0 : k;
  if (!m->bump[b]) {
    Addr colour = (Addr)b * (4096 + (1 << CH_LINE_BITS));
    m->bump[b] = MODEL_BASE + (Addr)b * CLASS_SPAN + colour;
  }
  Addr p = m->bump[b];
  m->bump[b] += (Addr)(k + 1) * GRANULE;
  return p;
}

void ch_layouts_alloc(Obj *o) {
  if (o->size == 0 || o->size > CLASS_MAX) {
    o->model[0] = o->model[1] = 0;
    return;
  }
  UInt k = class_of(o->size);
  for (UInt l = 0; l < CH_LAYOUTS; l++) o->model[l] = place(&models[l], l, k);
  placed++;
}

void ch_layouts_free(Obj *o) {
  if (!o->model[0]) return;
  UInt k = class_of(o->size);
  for (UInt l = 0; l < CH_LAYOUTS; l++) {
    Stack *s = &models[l].bins[k];
    if (s->n == s->cap) {
      s->cap = s->cap ? 2 * s->cap : 256;
      s->a = VG_(realloc)("cohort.layouts", s->a, s->cap * sizeof *s->a);
    }
    s->a[s->n++] = o->model[l];
    o->model[l] = 0;
  }
}

void ch_layouts_touch(const Obj *o, Addr a, SizeT size) {
  Addr at[CH_LAYOUTS] = {a, a};
  if (o->model[0]) {
    Addr d = a - o->start;
    for (UInt l = 0; l < CH_LAYOUTS; l++) at[l] = o->model[l] + d;
    placed_accesses++;
  }
  for (UInt l = 0; l < CH_LAYOUTS; l++) {
    UInt r = ch_sim_touch(&models[l].cache, at[l], size);
    if (r) models[l].d1_misses++;
    if (r == 2) models[l].ll_misses++;
  }
}

void ch_layouts_write(VgFile *f) {
  VG_(fprintf)(f, "layouts max %d one-d1 %llu one-ll %llu classes-d1 %llu classes-ll %llu objects %llu "
               "accesses %llu\n", CLASS_MAX, models[CH_LAYOUT_ONE].d1_misses, models[CH_LAYOUT_ONE].ll_misses,
               models[CH_LAYOUT_CLASSES].d1_misses, models[CH_LAYOUT_CLASSES].ll_misses, placed,
               placed_accesses);
}
