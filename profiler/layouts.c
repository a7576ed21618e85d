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
 * rest pool takes no more): they keep their own addresses.
 *
 * Each model also counts, per pair of contexts, how often an object of the
 * first was placed beside a live object of the second: the one that ends
 * where it begins and, in a freed block reused, the one that begins where
 * it ends. A group's pool holds its own objects only; the share of its
 * objects' neighbours that are strangers in the model of what it replaces
 * is what the pool changes (docs/planner.md, "Strangers, measured"). */
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

/* Who lies where in a model: the context + 1 of the live object on each
 * granule (0: free), in pages of 4096 granules under two levels of 4096;
 * a model's granules lie below 2^36 (16 classes of 2^32). */
#define OCC_BITS 12
typedef UInt *OccPage;

typedef struct {
  SimCache cache;
  Addr bump[NCLASSES];    /* CH_LAYOUT_ONE uses bump[0] for every class */
  Stack bins[NCLASSES];   /* freed blocks of each size, last freed on top */
  ULong d1_misses, ll_misses;
  OccPage *occ[1 << OCC_BITS];
  CountTable neighbours;  /* (ctx << 32 | neighbour's ctx) + 1 -> placements beside it */
} Model;

static Model models[CH_LAYOUTS] = {{.neighbours.cc = "cohort.layouts"}, {.neighbours.cc = "cohort.layouts"}};

/* The occupancy slot of a model address's granule (allocated on demand
 * when `make`, else NULL where nothing was ever placed). */
static UInt *occ_slot(Model *m, Addr a, Bool make) {
  ULong g = (a - MODEL_BASE) / GRANULE;
  UInt i = (UInt)(g >> (2 * OCC_BITS)) & ((1 << OCC_BITS) - 1), j = (UInt)(g >> OCC_BITS) & ((1 << OCC_BITS) - 1);
  if (!m->occ[i]) {
    if (!make) return NULL;
    m->occ[i] = VG_(calloc)("cohort.layouts", 1 << OCC_BITS, sizeof(OccPage));
  }
  if (!m->occ[i][j]) {
    if (!make) return NULL;
    m->occ[i][j] = VG_(calloc)("cohort.layouts", 1 << OCC_BITS, sizeof(UInt));
  }
  return &m->occ[i][j][g & ((1 << OCC_BITS) - 1)];
}

static void occupy(Model *m, Addr p, UInt granules, UInt who) {
  for (UInt i = 0; i < granules; i++) *occ_slot(m, p + (Addr)i * GRANULE, True) = who;
}

static void note_beside(Model *m, UInt ctx, Addr a) {
  UInt *s = occ_slot(m, a, False);
  if (s && *s) ch_count_add(&m->neighbours, ((ULong)ctx << 32 | (*s - 1)) + 1, 1);
}
static ULong placed, placed_accesses;

static inline UInt class_of(SizeT size) { return (UInt)((size - 1) / GRANULE); }

static Addr place(Model *m, UInt layout, UInt k, UInt ctx) {
  Stack *s = &m->bins[k];
  Addr p;
  if (s->n) {
    p = s->a[--s->n];
    note_beside(m, ctx, p + (Addr)(k + 1) * GRANULE);   /* a reused block has a neighbour after it too */
  } else {
    UInt b = layout == CH_LAYOUT_ONE ? 0 : k;
    if (!m->bump[b]) {
      Addr colour = (Addr)b * (4096 + (1 << CH_LINE_BITS));
      m->bump[b] = MODEL_BASE + (Addr)b * CLASS_SPAN + colour;
    }
    p = m->bump[b];
    m->bump[b] += (Addr)(k + 1) * GRANULE;
  }
  note_beside(m, ctx, p - GRANULE);
  occupy(m, p, k + 1, ctx + 1);
  return p;
}

void ch_layouts_alloc(Obj *o) {
  if (o->size == 0 || o->size > CLASS_MAX) {
    o->model[0] = o->model[1] = 0;
    return;
  }
  UInt k = class_of(o->size);
  for (UInt l = 0; l < CH_LAYOUTS; l++) o->model[l] = place(&models[l], l, k, o->ctx);
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
    occupy(&models[l], o->model[l], k + 1, 0);
    s->a[s->n++] = o->model[l];
    o->model[l] = 0;
  }
}

/* A placed object's misses also count towards its context, per layout: a
 * group's members are then weighed in each shape, apart from the rest of the
 * run (docs/planner.md, "A group's shape"). */
void ch_layouts_touch(const Obj *o, Addr a, SizeT size) {
  Addr at[CH_LAYOUTS] = {a, a};
  ULong *own = NULL;
  if (o->model[0]) {
    Addr d = a - o->start;
    for (UInt l = 0; l < CH_LAYOUTS; l++) at[l] = o->model[l] + d;
    placed_accesses++;
    own = ch_ctx_stats(o->ctx)->layout_d1;
  }
  for (UInt l = 0; l < CH_LAYOUTS; l++) {
    UInt r = ch_sim_touch(&models[l].cache, at[l], size);
    if (r) {
      models[l].d1_misses++;
      if (own) own[l]++;
    }
    if (r == 2) models[l].ll_misses++;
  }
}

void ch_layouts_write(VgFile *f) {
  VG_(fprintf)(f, "layouts max %d one-d1 %llu one-ll %llu classes-d1 %llu classes-ll %llu objects %llu "
               "accesses %llu\n", CLASS_MAX, models[CH_LAYOUT_ONE].d1_misses, models[CH_LAYOUT_ONE].ll_misses,
               models[CH_LAYOUT_CLASSES].d1_misses, models[CH_LAYOUT_CLASSES].ll_misses, placed,
               placed_accesses);
  static const HChar *const names[CH_LAYOUTS] = {"one", "classes"};
  for (UInt l = 0; l < CH_LAYOUTS; l++) {
    const CountTable *t = &models[l].neighbours;
    for (UWord i = 0; i < t->cap; i++)
      if (t->keys[i]) {
        ULong k = t->keys[i] - 1;
        VG_(fprintf)(f, "beside %s %u %u %llu\n", names[l], (UInt)(k >> 32), (UInt)k, t->counts[i]);
      }
  }
}
