/* Trace: the abstracted heap reference trace of the hds comparator (HALO,
 * CGO 2020, section 5, after Chilimbi and Shaham, PLDI 2006), recorded with
 * --cohort-trace=FILE.
 *
 * One reference per macro access to a tracked object (affinity.c merges
 * consecutive accesses to one object already), naming the object by a
 * dense index; each object is described once, by its context and size.
 *
 * Bounded by bursty sampling, so that a long run keeps a sample spread over
 * all of it rather than its first phase: the macro accesses are cut into
 * bursts of BURST, and one burst in `period` is kept. Up to the budget
 * (--trace-budget references) every burst is kept (period 1). When the
 * buffer is full, every other kept burst is dropped and the period doubles,
 * so memory never exceeds the budget (4 bytes per reference, 20 per object
 * described, at most one object per reference) and the sample stays even.
 *
 * The file (docs/profile-format.md, "The heap reference trace"), all
 * numbers little-endian:
 *   char magic[8] "CHTRACE1"; u32 burst; u32 period; u64 macro accesses
 *   seen; u32 objects; u32 references; objects x {u32 context, u32 size};
 *   references x u32 object index. */
#include "profiler.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_options.h"
#include "pub_tool_vki.h"

#define BURST 4096

const HChar *ch_clo_trace = NULL;
Long ch_clo_trace_budget = 1000000;

static UInt *refs;           /* cap of them: kept bursts, back to back */
static UInt n_refs, cap;
static ULong *burst_no;      /* the burst number of each kept burst */
static ULong seen, period = 1;

/* Objects described, by index: what the file says, and who they were (id and
 * seq) so that a compaction can renumber them in their Obj records. */
typedef struct { UInt ctx, size, id; ULong seq; } TObj;
static TObj *objs;
static UInt n_objs, objs_cap;

Bool ch_tracing(void) { return ch_clo_trace != NULL; }

void ch_trace_init(void) {
  if (!ch_clo_trace) return;
  ULong want = (ULong)ch_clo_trace_budget;
  if (want < 2 * BURST) want = 2 * BURST;
  cap = (UInt)((want + BURST - 1) / BURST * BURST);
  refs = VG_(malloc)("cohort.trace", (SizeT)cap * sizeof(UInt));
  burst_no = VG_(malloc)("cohort.trace", (SizeT)(cap / BURST) * sizeof(ULong));
}

static UInt describe(UInt id, Obj *u) {
  if (n_objs == objs_cap) {
    objs_cap = objs_cap ? 2 * objs_cap : 1 << 12;
    if (objs_cap > cap) objs_cap = cap;   /* never more objects than references */
    objs = VG_(realloc)("cohort.trace", objs, (SizeT)objs_cap * sizeof(TObj));
  }
  TObj *t = &objs[n_objs];
  t->ctx = u->ctx;
  t->size = u->size;   /* CH_SIZE_BIG, 0xffffffff, for 4 GiB or more, as before */
  t->id = id;
  t->seq = u->seq;
  ch_obj_set_trace_ix(u, ++n_objs);
  return n_objs - 1;
}

/* Drop every other kept burst, double the period, and renumber the objects
 * the remaining references name, in order of first reference. */
static void compact(void) {
  period *= 2;
  UInt bursts = n_refs / BURST, kept = 0;
  for (UInt k = 0; k < bursts; k++) {
    if (burst_no[k] % period) continue;
    if (kept != k) VG_(memmove)(&refs[(SizeT)kept * BURST], &refs[(SizeT)k * BURST], BURST * sizeof(UInt));
    burst_no[kept++] = burst_no[k];
  }
  n_refs = kept * BURST;

  UInt *renum = VG_(calloc)("cohort.trace", n_objs ? n_objs : 1, sizeof(UInt)); /* old -> new + 1 */
  TObj *fresh = VG_(malloc)("cohort.trace", (SizeT)(objs_cap ? objs_cap : 1) * sizeof(TObj));
  UInt n_fresh = 0;
  for (UInt i = 0; i < n_refs; i++) {
    UInt old = refs[i];
    if (!renum[old]) {
      fresh[n_fresh] = objs[old];
      renum[old] = ++n_fresh;
    }
    refs[i] = renum[old] - 1;
  }
  for (UInt j = 0; j < n_objs; j++) {   /* the Obj records of objects still alive */
    Obj *o = ch_obj(objs[j].id);
    if (o->seq == objs[j].seq) ch_obj_set_trace_ix(o, renum[j]);
  }
  VG_(free)(renum);
  VG_(free)(objs);
  objs = fresh;
  n_objs = n_fresh;
}

void ch_trace_ref(UInt id, Obj *u) {
  ULong b = seen++ / BURST;
  if (b % period) return;
  if (n_refs == cap) {     /* only ever at a burst's first reference */
    compact();
    if (b % period) return;
  }
  UInt ix = ch_obj_trace_ix(u);
  if (!ix || ix > n_objs || objs[ix - 1].seq != u->seq) ix = describe(id, u) + 1;
  if (n_refs % BURST == 0) burst_no[n_refs / BURST] = b;
  refs[n_refs++] = ix - 1;
}

/* Write everything or report why not; the raw profile says which. */
static Bool put(Int fd, const void *p, SizeT n) {
  const UChar *c = p;
  while (n) {
    Int w = VG_(write)(fd, c, n > (1 << 20) ? (1 << 20) : n);
    if (w <= 0) return False;
    c += w;
    n -= (SizeT)w;
  }
  return True;
}

static Bool write_trace(const HChar *path) {
  SysRes r = VG_(open)(path, VKI_O_CREAT | VKI_O_TRUNC | VKI_O_WRONLY, VKI_S_IRUSR | VKI_S_IWUSR);
  if (sr_isError(r)) return False;
  Int fd = (Int)sr_Res(r);
  UChar head[32];
  UInt burst = BURST, per = period > 0xffffffffULL ? 0xffffffffu : (UInt)period;
  VG_(memcpy)(head, "CHTRACE1", 8);
  VG_(memcpy)(head + 8, &burst, 4);
  VG_(memcpy)(head + 12, &per, 4);
  VG_(memcpy)(head + 16, &seen, 8);
  VG_(memcpy)(head + 24, &n_objs, 4);
  VG_(memcpy)(head + 28, &n_refs, 4);
  Bool ok = put(fd, head, sizeof head);
  UInt pair[2 * 1024];
  for (UInt j = 0; ok && j < n_objs; j += 1024) {
    UInt n = n_objs - j < 1024 ? n_objs - j : 1024;
    for (UInt k = 0; k < n; k++) { pair[2 * k] = objs[j + k].ctx; pair[2 * k + 1] = objs[j + k].size; }
    ok = put(fd, pair, (SizeT)n * 8);
  }
  if (ok) ok = put(fd, refs, (SizeT)n_refs * sizeof(UInt));
  VG_(close)(fd);
  return ok;
}

void ch_trace_write(VgFile *f) {
  if (!ch_clo_trace) return;
  const HChar *path = VG_(expand_file_name)("--cohort-trace", ch_clo_trace);
  Bool ok = write_trace(path);
  if (!ok) {
    VG_(umsg)("cohort: could not write the heap trace to %s (disk full or not writable); "
              "the profile is written without it\n", path);
    VG_(unlink)(path);
  }
  VG_(fprintf)(f, "trace %s references %u objects %u macro %llu burst %u period %llu budget %u\n",
               ok ? "written" : "unwritten", n_refs, n_objs, seen, BURST, period, cap);
}
