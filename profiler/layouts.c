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
 * D1 per layout (the geometry of loads.c's): a placed object's at its
 * place in that layout, a larger one's at its own address. No LL behind
 * it: the planner compares the layouts' D1 misses alone, and the two LLs
 * (128 KiB of tags each, in the host's cache beside the run's) took 5 to
 * 11% of the tool's time (profiler/README.md). Stack and global
 * accesses are left out: modelled too, they made the profiler 52% slower
 * instead of 17%, and changed the verdict on none of seven programs. The planner keeps the
 * layout with fewer D1 misses (docs/planner.md, "The rest pool's shape").
 *
 * Each model allocates as the runtime's pools do: requests rounded up to
 * 16-byte granules, a freed block reused last in, first out by the next
 * request of its size, else the bump pointer's next bytes: one pointer for
 * the single pool, one per class for the split, each class starting a page
 * and a line further into its own region, as the runtime colours its
 * chunks. Objects above CLASS_MAX go to the next allocator in the single
 * pool (the rest pool takes no more there): they keep their own addresses.
 * The split model places every tracked object, one class per power of two
 * above CLASS_MAX, as the split rest pool and the allocators of size
 * classes do (jemalloc keeps perl's 4080-byte arenas in its 4096-byte
 * class): what a large object lies beside there is measured too.
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
#define EXACT (CLASS_MAX / GRANULE)      /* classes 0..15: one per granule */
#define NCLASSES (EXACT + 16)            /* then one per power of two, 512 B to 16 MiB */
/* Far above the client's mappings and below 2^47: each class's region is
 * 2^36 bytes, more than any run allocates. */
#define MODEL_BASE CH_MODEL_BASE
#define CLASS_SPAN ((Addr)1 << 36)
/* The region of a layout's class k: the one pool's is class 0's. */
static inline Addr region_of(UInt layout, UInt k) {
  return MODEL_BASE + (layout == CH_LAYOUT_ONE ? 0 : (Addr)k * CLASS_SPAN);
}

/* Who lies where in a model: the context + 1 of the live object on each
 * granule (0: free), in pages of 4096 granules under two levels, 4096 and
 * 2^13 wide: a model's granules lie below 2^37 (32 classes of 2^32). */
#define OCC_BITS 12
#define OCC_TOP_BITS 13
typedef UInt *OccPage;

typedef struct {
  D1Cache cache;
  Addr bump[NCLASSES];    /* CH_LAYOUT_ONE uses bump[0] for every class */
  AddrStack bins[NCLASSES];   /* freed blocks of each size, last freed on top */
  ULong d1_misses;
  OccPage *occ[1 << OCC_TOP_BITS];
  CountTable neighbours;  /* (ctx << 32 | neighbour's ctx) + 1 -> placements beside it */
} Model;

static Model models[CH_LAYOUTS] = {{.neighbours.cc = "cohort.layouts"}, {.neighbours.cc = "cohort.layouts"}};

/* The occupancy slot of a model address's granule (allocated on demand
 * when `make`, else NULL where nothing was ever placed). */
static UInt *occ_slot(Model *m, Addr a, Bool make) {
  ULong g = (a - MODEL_BASE) / GRANULE;
  UInt i = (UInt)(g >> (2 * OCC_BITS)) & ((1 << OCC_TOP_BITS) - 1), j = (UInt)(g >> OCC_BITS) & ((1 << OCC_BITS) - 1);
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

/* A neighbour is looked up at the granule before a block or the one after
 * it, so only a block's first and last granules need say who lies there: a
 * block is reused only by a request of its own class, whole, so no other
 * block ever begins or ends inside it. */
static void occupy(Model *m, Addr p, UInt granules, UInt who) {
  *occ_slot(m, p, True) = who;
  *occ_slot(m, p + (Addr)(granules - 1) * GRANULE, True) = who;
}

/* The pair, and the context's sum over its pairs: `cohort profile` reads
 * the sum for every context, and the pairs only among those a group could
 * hold, where a large program has a million pairs (cppcheck). */
static void note_beside(Model *m, UInt ctx, Addr a) {
  UInt *s = occ_slot(m, a, False);
  if (!s || !*s) return;
  ch_count_add(&m->neighbours, ((ULong)ctx << 32 | (*s - 1)) + 1, 1);
  ch_ctx_stats(ctx)->beside[m - models]++;
}
static ULong placed, placed_accesses;

/* A request's class, and its class's block in granules. */
static inline UInt class_of(SizeT size) {
  if (size <= CLASS_MAX) return (UInt)((size - 1) / GRANULE);
  UInt bits = 64 - (UInt)__builtin_clzll((ULong)size - 1);   /* 257..512: 9 */
  return EXACT + bits - 9;
}
static inline UInt granules_of(UInt k) { return k < EXACT ? k + 1 : (UInt)(512 / GRANULE) << (k - EXACT); }

static Addr place(Model *m, UInt layout, UInt k, UInt ctx) {
  AddrStack *s = &m->bins[k];
  Addr p;
  if (s->n) {
    p = s->a[--s->n];
    note_beside(m, ctx, p + (Addr)granules_of(k) * GRANULE);   /* a reused block has a neighbour after it too */
  } else {
    UInt b = layout == CH_LAYOUT_ONE ? 0 : k;
    if (!m->bump[b]) {
      Addr colour = (Addr)b * (4096 + (1 << CH_LINE_BITS));
      m->bump[b] = MODEL_BASE + (Addr)b * CLASS_SPAN + colour;
    }
    p = m->bump[b];
    m->bump[b] += (Addr)granules_of(k) * GRANULE;
  }
  note_beside(m, ctx, p - GRANULE);
  occupy(m, p, granules_of(k), ctx + 1);
  return p;
}

void ch_layouts_alloc(Obj *o) {
  o->model[0] = o->model[1] = 0;
  if (o->size == 0 || class_of(o->size) >= NCLASSES) return;
  UInt k = class_of(o->size);
  Addr p = place(&models[CH_LAYOUT_CLASSES], CH_LAYOUT_CLASSES, k, o->ctx);
  o->model[CH_LAYOUT_CLASSES] = ch_place_code(region_of(CH_LAYOUT_CLASSES, k), p);
  if (o->size > CLASS_MAX) return;
  p = place(&models[CH_LAYOUT_ONE], CH_LAYOUT_ONE, k, o->ctx);
  o->model[CH_LAYOUT_ONE] = ch_place_code(region_of(CH_LAYOUT_ONE, k), p);
  placed++;
}

void ch_layouts_free(Obj *o) {
  UInt k = o->size ? class_of(o->size) : 0;
  for (UInt l = 0; l < CH_LAYOUTS; l++) {
    Addr p = ch_place_addr(region_of(l, k), o->model[l]);
    if (!p) continue;
    occupy(&models[l], p, granules_of(k), 0);
    ch_stack_push(&models[l].bins[k], p, "cohort.layouts");
    o->model[l] = 0;
  }
}

/* An object's misses also count towards its context, per layout, at its
 * place there or, where a model does not place it, at its own address: a
 * group's members are then weighed in each shape, apart from the rest of
 * the run (docs/planner.md, "A group's shape"). */
void ch_layouts_touch(const Obj *o, CtxStats *cs, Addr a, SizeT size, ULong weight) {
  Addr at[CH_LAYOUTS] = {a, a};
  Addr d = a - o->start;
  UInt k = o->model[CH_LAYOUT_CLASSES] ? class_of(o->size) : 0;   /* every placed object is placed there */
  for (UInt l = 0; l < CH_LAYOUTS; l++)
    if (o->model[l]) at[l] = ch_place_addr(region_of(l, k), o->model[l]) + d;
  if (o->model[CH_LAYOUT_ONE]) placed_accesses += weight;
  ULong *own = cs->layout_d1;
  for (UInt l = 0; l < CH_LAYOUTS; l++) {
    if (ch_d1_touch(&models[l].cache, at[l], size)) {
      models[l].d1_misses += weight;
      own[l] += weight;
    }
  }
}

static Int by_key(const void *a, const void *b) {
  ULong x = *(const ULong *)a, y = *(const ULong *)b;
  return x < y ? -1 : x > y;
}

/* The pairs, one line per layout and context: "beside LAYOUT C N K N K ...",
 * so that `cohort profile` skips a context a group could not hold at the
 * first word (cppcheck: a million pairs, 133,000 such lines). */
void ch_layouts_write(VgFile *f) {
  VG_(fprintf)(f, "layouts max %d one-d1 %llu classes-d1 %llu objects %llu accesses %llu\n", CLASS_MAX,
               models[CH_LAYOUT_ONE].d1_misses, models[CH_LAYOUT_CLASSES].d1_misses, placed, placed_accesses);
  static const HChar *const names[CH_LAYOUTS] = {"one", "classes"};
  for (UInt l = 0; l < CH_LAYOUTS; l++) {
    const CountTable *t = &models[l].neighbours;
    if (!t->used) continue;
    ULong *pairs = VG_(malloc)("cohort.layouts", t->used * 2 * sizeof(ULong));   /* key, count */
    UWord n = 0;
    for (UWord i = 0; i < t->cap; i++) {
      const ULong *s = ch_count_slot(t, i);
      if (s[0]) { pairs[2 * n] = s[0] - 1; pairs[2 * n + 1] = s[1]; n++; }
    }
    VG_(ssort)(pairs, n, 2 * sizeof(ULong), by_key);
    for (UWord i = 0; i < n; i++) {
      UInt c = (UInt)(pairs[2 * i] >> 32);
      if (i == 0 || c != (UInt)(pairs[2 * i - 2] >> 32)) VG_(fprintf)(f, "%sbeside %s %u", i ? "\n" : "", names[l], c);
      VG_(fprintf)(f, " %u %llu", (UInt)pairs[2 * i], pairs[2 * i + 1]);
    }
    VG_(fprintf)(f, "\n");
    VG_(free)(pairs);
  }
}
