/* Objects: the tool's replacement allocator, one record per live object, and
 * the shadow map that turns an accessed address into an object id in O(1).
 *
 * Every block comes from Valgrind's client arena (VG_(cli_malloc)); the
 * record remembers its context and when it was allocated. Objects up to
 * --max-size bytes are "tracked": their granules are entered in the shadow
 * map so the access handler can find them. Larger (and empty) blocks are only
 * looked up at free/realloc time, through a hash table. */
#include "profiler.h"
#include "pub_tool_replacemalloc.h"

/* ==== object records ====================================================== */

Obj **ch_obj_pages;
static UInt n_pages, pages_cap;
static UInt next_fresh = 1;  /* id 0 means "no object" */

/* Freed ids are reused only after QUARANTINE later frees, so an id still
 * sitting in an affinity queue or as a context's latest object is very
 * unlikely to name a new object; the seq stored beside it catches the rest. */
#define QUARANTINE 8192
static UInt quarantine[QUARANTINE];
static UInt q_head, q_count;
static UInt *free_ids;
static UInt n_free, free_cap;

ULong ch_seq;
ULong ch_shadow_conflicts;
static ULong live_objects, peak_objects, live_bytes, peak_bytes, unknown_frees;

static UInt new_id(void) {
  if (n_free) return free_ids[--n_free];
  UInt id = next_fresh++;
  if ((id >> 16) >= n_pages) {
    if (n_pages == pages_cap) {
      pages_cap = pages_cap ? 2 * pages_cap : 64;
      ch_obj_pages = VG_(realloc)("cohort.objpages", ch_obj_pages, pages_cap * sizeof(Obj *));
    }
    /* 64-aligned, so that each record is one line (profiler.h) */
    Obj *page = VG_(calloc)("cohort.objs", (1 << 16) + 1, sizeof(Obj));
    ch_obj_pages[n_pages++] = (Obj *)(((Addr)page + 63) & ~(Addr)63);
  }
  return id;
}

static void retire_id(UInt id) {
  if (q_count == QUARANTINE) {
    UInt old = quarantine[q_head];
    if (n_free == free_cap) {
      free_cap = free_cap ? 2 * free_cap : 4096;
      free_ids = VG_(realloc)("cohort.freeids", free_ids, free_cap * sizeof(UInt));
    }
    free_ids[n_free++] = old;
    quarantine[q_head] = id;
    q_head = (q_head + 1) % QUARANTINE;
  } else {
    quarantine[(q_head + q_count++) % QUARANTINE] = id;
  }
}

/* ==== shadow map ========================================================== */

UInt **ch_shadow_l1[1 << 15];
Addr ch_heap_lo = ~(Addr)0, ch_heap_span = 0;
static Addr heap_hi;

static UInt *shadow_leaf(Addr a) {
  UInt ***l1 = &ch_shadow_l1[a >> 32];
  if (!*l1) *l1 = VG_(calloc)("cohort.shadow2", 1 << 16, sizeof(UInt *));
  UInt **l2 = &(*l1)[(a >> 16) & 0xffff];
  if (!*l2) *l2 = VG_(calloc)("cohort.shadow3", 1 << 12, sizeof(UInt));
  return *l2;
}

static void shadow_fill(Addr start, SizeT size, UInt id) {
  for (Addr g = start & ~(Addr)15; g < start + size; g += 16) {
    UInt *slot = &shadow_leaf(g)[(g >> 4) & 0xfff];
    if (id && *slot) ch_shadow_conflicts++;
    *slot = id;
  }
}

static Bool tracked(SizeT size) { return size > 0 && size <= (SizeT)ch_clo_max_size; }

/* ==== untracked blocks ===================================================== */

typedef struct Big {
  struct Big *next;
  UWord key;  /* block address */
  UInt id;
  SizeT size; /* its record holds at most CH_SIZE_BIG */
} Big;
static VgHashTable *bigs;

/* ==== allocation and free ================================================== */

static void *track_new(ThreadId tid, void *p, SizeT size) {
  if (!p) return NULL;
  UInt inner;
  UInt ctx = ch_context_of(tid, &inner);
  CtxStats *c = ch_ctx_stats(ctx);
  if (inner) {
    c->through++;
    c->through_frames += inner;
  }
  UInt id = new_id();
  Obj *o = ch_obj(id);
  ULong seq = ++ch_seq;
  o->start = (Addr)p;
  o->size = size < CH_SIZE_BIG ? (UInt)size : CH_SIZE_BIG;
  o->seq = seq;
  o->ctx = ctx;
  o->stamp = 0;
  o->trace_live = CH_OBJ_LIVE;
  o->to_next = CH_FAR;
  o->model[0] = o->model[1] = 0;
  o->since_prev = seq - c->last_seq < CH_FAR ? (UInt)(seq - c->last_seq) : CH_FAR;
  if (c->last_obj && ch_obj(c->last_obj)->seq == c->last_seq) {
    Obj *last = ch_obj(c->last_obj);
    last->to_next = seq - last->seq < CH_FAR ? (UInt)(seq - last->seq) : CH_FAR;
  }
  c->last_seq = seq;
  c->last_obj = id;
  if (c->allocs == 0 || size < c->min_size) c->min_size = size;
  if (size > c->max_size) c->max_size = size;
  c->allocs++;
  c->bytes += size;
  live_bytes += size;
  if (live_bytes > peak_bytes) peak_bytes = live_bytes;
  if (++live_objects > peak_objects) peak_objects = live_objects;

  if (tracked(size)) {
    shadow_fill((Addr)p, size, id);
    if (ch_clo_layouts) ch_layouts_alloc(o);
    if (ch_clo_lines) ch_lines_alloc(o);
    Addr lo = (Addr)p, hi = (Addr)p + size;
    if (lo < ch_heap_lo) ch_heap_lo = lo;
    if (hi > heap_hi) heap_hi = hi;
    ch_heap_span = heap_hi - ch_heap_lo;
  } else {
    Big *b = VG_(malloc)("cohort.big", sizeof *b);
    b->key = (UWord)p;
    b->id = id;
    b->size = size;
    VG_(HT_add_node)(bigs, b);
  }
  return p;
}

/* The id of the live block starting at p, or 0 if p is not one. */
static UInt find_block(void *p) {
  UInt id = ch_shadow_get((Addr)p);
  if (id && ch_obj(id)->start == (Addr)p && ch_obj_live(ch_obj(id))) return id;
  Big *b = VG_(HT_lookup)(bigs, (UWord)p);
  return b ? b->id : 0;
}

SizeT ch_obj_size(const Obj *o) {
  if (o->size < CH_SIZE_BIG) return o->size;
  Big *b = VG_(HT_lookup)(bigs, (UWord)o->start);   /* only an untracked block is this large */
  return b ? b->size : CH_SIZE_BIG;
}

static void track_free(UInt id) {
  Obj *o = ch_obj(id);
  SizeT size = ch_obj_size(o);
  CtxStats *c = ch_ctx_stats(o->ctx);
  ULong life = ch_seq - o->seq;
  c->frees++;
  c->life_sum += life;
  if (life > c->life_max) c->life_max = life;
  live_bytes -= size;
  live_objects--;
  o->trace_live &= ~CH_OBJ_LIVE;
  if (tracked(size)) {
    shadow_fill(o->start, size, 0);
    if (ch_clo_layouts) ch_layouts_free(o);
    if (ch_clo_lines) ch_lines_free(o);
  } else {
    Big *b = VG_(HT_remove)(bigs, (UWord)o->start);
    if (b) VG_(free)(b);
  }
  retire_id(id);
}

static void *do_alloc(ThreadId tid, SizeT size, SizeT align) {
  if ((Long)size < 0) return NULL;
  if (align < VG_(clo_alignment)) align = VG_(clo_alignment);
  return track_new(tid, VG_(cli_malloc)(align, size), size);
}

static void do_free(ThreadId tid, void *p) {
  if (!p) return;
  UInt id = find_block(p);
  if (!id) {  /* not ours (e.g. freed twice): leave it alone, as glibc would crash */
    unknown_frees++;
    return;
  }
  track_free(id);
  VG_(cli_free)(p);
}

static void *ch_malloc(ThreadId tid, SizeT n) { return do_alloc(tid, n, 0); }
static void *ch_new(ThreadId tid, SizeT n) { return do_alloc(tid, n, 0); }
static void *ch_new_aligned(ThreadId tid, SizeT n, SizeT al) { return do_alloc(tid, n, al); }
static void *ch_memalign(ThreadId tid, SizeT al, SizeT n) { return do_alloc(tid, n, al); }

static void *ch_calloc(ThreadId tid, SizeT m, SizeT n) {
  SizeT total;
  if (__builtin_mul_overflow(m, n, &total)) return NULL;
  void *p = do_alloc(tid, total, 0);
  if (p) VG_(memset)(p, 0, total);
  return p;
}

static void ch_free(ThreadId tid, void *p) { do_free(tid, p); }
static void ch_free_aligned(ThreadId tid, void *p, SizeT al) { do_free(tid, p); }

/* realloc is an allocation in its own context followed by a free, as for the
 * runtime, which may move a grouped object into another group. */
static void *ch_realloc(ThreadId tid, void *p, SizeT n) {
  if (!p) return do_alloc(tid, n, 0);
  UInt id = find_block(p);
  if (!id) { unknown_frees++; return NULL; }
  void *q = do_alloc(tid, n, 0);
  if (!q) return NULL;
  SizeT old = ch_obj_size(ch_obj(id));
  VG_(memcpy)(q, p, old < n ? old : n);
  track_free(id);
  VG_(cli_free)(p);
  return q;
}

static SizeT ch_usable_size(ThreadId tid, void *p) {
  UInt id = find_block(p);
  return id ? ch_obj_size(ch_obj(id)) : 0;
}

void ch_objects_init(void) {
  bigs = VG_(HT_construct)("cohort.bigs");
  VG_(needs_malloc_replacement)(ch_malloc, ch_new, ch_new_aligned, ch_new, ch_new_aligned,
                                ch_memalign, ch_calloc, ch_free, ch_free, ch_free_aligned,
                                ch_free, ch_free_aligned, ch_realloc, ch_usable_size, 0);
}

void ch_objects_write(VgFile *f) {
  VG_(fprintf)(f, "objects allocations %llu peak-live %llu peak-bytes %llu live-at-exit %llu "
               "unknown-frees %llu shadow-conflicts %llu\n",
               ch_seq, peak_objects, peak_bytes, live_objects, unknown_frees,
               ch_shadow_conflicts);
}
