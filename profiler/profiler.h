/* Cohort's profiler: a Valgrind tool that builds HALO's affinity graph.
 * Shared declarations for the tool's files; see README.md for who does what.
 *
 * Valgrind tools have no libc: everything here uses the VG_() API only. The
 * core serialises client threads, so none of this state needs locks. */
#ifndef COHORT_PROFILER_H
#define COHORT_PROFILER_H

#include "pub_tool_basics.h"
#include "pub_tool_debuginfo.h"
#include "pub_tool_hashtable.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_tooliface.h"

#define CH_TOOL_VERSION "11"   /* 3: contexts carry their accesses' cache misses; 4: the layouts line;
                                5: sites carry their calls; 6: contexts carry their misses in each layout,
                                and the layouts who lay beside whom; 7: contexts carry their allocations
                                entered through a system module, and its frames; 8: the lines models;
                                9: the layouts line has D1 misses only; 10: the sample line, and the
                                analyses' counts past --sample-base are estimates from windows;
                                11: the sample clock is every access to the span of tracked objects,
                                and past the base the contexts' accesses and misses, the tracked
                                accesses and the heap's other misses are estimates too; contexts
                                carry their neighbours in each layout, summed */
#define CH_MAX_FRAMES 256 /* a deeper stack is truncated, as in the runtime */

/* ---- options (main.c) ---------------------------------------------------- */
extern const HChar *ch_clo_out;      /* raw profile path (--cohort-out) */
extern Long ch_clo_affinity;         /* affinity distance A in bytes */
extern Long ch_clo_max_size;         /* largest object whose accesses count */
/* The analyses that can be switched off, to measure what each costs
 * (README.md): layouts.c's, lines.c's (only with layouts.c's, whose one
 * pool is its packed place) and pointers.c's. Off, one costs nothing and
 * writes nothing, and the profile lacks what it gives (an older profile's
 * shape: the planner then decides without it). */
extern Bool ch_clo_layouts, ch_clo_lines, ch_clo_pointers;
extern const HChar *ch_clo_main;     /* resolved path of the main executable */
extern const HChar *ch_clo_modules;  /* --cohort-modules: non-system modules' paths, a line each */

/* ---- contexts (contexts.c) ----------------------------------------------- */
enum { CH_CALL_UNKNOWN = 0, CH_CALL_DIRECT, CH_CALL_INDIRECT, CH_CALL_OTHER };

typedef struct {
  ULong allocs, bytes, min_size, max_size, frees;
  ULong life_sum, life_max;   /* lifetimes of freed objects, in allocations */
  ULong accesses, macro;      /* machine-level and macro accesses */
  ULong d1_misses, ll_misses; /* accesses that missed the simulated D1, and LL too */
  ULong layout_d1[2];         /* D1 misses at its objects' places in each rest-pool layout (layouts.c) */
  ULong beside[2];            /* live neighbours its objects were placed beside there (layouts.c) */
  ULong chases;               /* loads of a pointer that replaced its own base register (lines.c) */
  ULong line_misses[5];       /* per line offset modelled (lines.c): D1 misses, */
  ULong chase_waits[5];       /* and chases that waited for their line */
  ULong through, through_frames; /* allocations that entered through a system module (libstdc++'s
                                    std::string, libc's strdup), and the system frames above their entry */
  ULong last_seq;             /* latest allocation from this context */
  UInt last_obj;              /* its object id (may be stale: check seq) */
} CtxStats;

/* The current allocation's context; *inner: the system-module frames
 * between the allocator and the context's entry site (0: called from the
 * program's own code). */
UInt ch_context_of(ThreadId tid, UInt *inner);
extern CtxStats *ch_stats;   /* by context id; moves as contexts are added */
static inline CtxStats *ch_ctx_stats(UInt ctx) { return &ch_stats[ctx]; }
UInt ch_n_contexts(void);
void ch_note_call(Addr ret_addr, Bool direct); /* from instrumentation */
ULong *ch_call_counter(Addr ret_addr);          /* its calls, counted by the generated code */
void ch_contexts_forget_range(Addr a, SizeT len); /* code unmapped */
void ch_contexts_write(VgFile *f);
void ch_contexts_init(void);
/* Module and offset (address - module bias) of a code address; False in no module. */
Bool ch_code_place(Addr pc, UInt *module, Addr *offset);
/* A symbol's or file's name as the raw dump may carry it: control
 * characters (its separators among them) become spaces. One of Xalan's C++
 * names (a XalanVector<...> of 14,560 characters, written whole) reached
 * the dump with a 0x02 at its 2,424th character on one input and intact on
 * another, which the profile's loader refuses as corrupt. */
static inline HChar ch_name_char(HChar c) { return (UChar)c < 0x20 || c == 0x7f ? ' ' : c; }
/* s (NULL: "") in buf of n bytes, so cleaned, cut to n - 1 characters. */
static inline HChar *ch_clean_name(const HChar *s, HChar *buf, Int n) {
  Int i = 0;
  for (; s && s[i] && i < n - 1; i++) buf[i] = ch_name_char(s[i]);
  buf[i] = 0;
  return buf;
}

/* ---- objects (objects.c) ------------------------------------------------- */
/* One line of 64 bytes, aligned: every access to a tracked object reads its
 * record, and the affinity walk the records of the objects before it, so a
 * record that spans two lines costs the host a second cache miss on most of
 * them (the layouts' models spent a third of their time on it). Hence the
 * 32-bit fields: what is counted from the allocation's seq is kept as a
 * distance from it, and a model's place as a granule within its region. */
typedef struct {
  Addr start;
  ULong seq;        /* allocation sequence number, from 1 */
  UInt size;        /* bytes; CH_SIZE_BIG: 4 GiB or more (ch_obj_size has it) */
  UInt ctx;
  UInt stamp;       /* last queue traversal that counted this object */
  UInt trace_live;  /* CH_OBJ_LIVE | its index + 1 in the heap trace (trace.c), 0 if none */
  UInt since_prev;  /* seq less that of the previous allocation from ctx (seq itself if none),
                       CH_FAR at most: ch_prev_same */
  UInt to_next;     /* the next allocation from ctx's seq less seq; CH_FAR: none yet (ch_next_same) */
  UInt model[2];    /* where each modelled rest-pool layout put it (layouts.c): its granule + 1, 0: not there */
  UInt at[4];       /* where each model of lines.c put it, blocks of whole lines 0, 16, 32, 48
                       bytes into a line: its granule + 1, 0: not there */
} Obj;
_Static_assert(sizeof(Obj) == 64, "an object's record is one line");
#define CH_SIZE_BIG 0xffffffffu
#define CH_FAR 0xffffffffu
#define CH_OBJ_LIVE 0x80000000u

extern Obj **ch_obj_pages;           /* id -> Obj, 64K objects per page, 64-aligned */
static inline Obj *ch_obj(UInt id) { return &ch_obj_pages[id >> 16][id & 0xffff]; }
static inline Bool ch_obj_live(const Obj *o) { return (o->trace_live & CH_OBJ_LIVE) != 0; }
static inline UInt ch_obj_trace_ix(const Obj *o) { return o->trace_live & ~CH_OBJ_LIVE; }
static inline void ch_obj_set_trace_ix(Obj *o, UInt ix) { o->trace_live = (o->trace_live & CH_OBJ_LIVE) | ix; }
/* The seq of the previous allocation from o's context (0: none), and of
 * the next (~0: none yet). Exact within 2^32 - 1 allocations of o's; from
 * farther, the previous reads as none and the next as none yet. */
static inline ULong ch_prev_same(const Obj *o) { return o->since_prev == CH_FAR ? 0 : o->seq - o->since_prev; }
static inline ULong ch_next_same(const Obj *o) { return o->to_next == CH_FAR ? ~0ULL : o->seq + o->to_next; }
SizeT ch_obj_size(const Obj *o);     /* its size in bytes, whatever it is */
/* Where the models put objects (layouts.c, lines.c): far above the client's
 * mappings and below 2^47, each in its own region. A place in a record is
 * its granule in the region + 1 (0: not there); a place past what 32 bits
 * hold (64 GiB of blocks bumped in one region) is not taken. */
#define CH_MODEL_BASE ((Addr)0x600000000000ULL)   /* layouts.c; class k's region at k << 36 */
#define CH_LINES_BASE ((Addr)0x500000000000ULL)   /* lines.c's four models */
static inline UInt ch_place_code(Addr region, Addr a) {
  ULong g = (a - region) / 16 + 1;
  return g < CH_FAR ? (UInt)g : 0;
}
static inline Addr ch_place_addr(Addr region, UInt code) { return code ? region + (Addr)(code - 1) * 16 : 0; }

/* Shadow map: one object id per 16-byte granule of tracked objects. The
 * client arena aligns every block to 16 and keeps headers between blocks, so
 * no granule is shared by two objects. Three levels cover 47 bits. */
extern UInt **ch_shadow_l1[1 << 15];
static inline UInt ch_shadow_get(Addr a) {
  if (a >> 47) return 0;
  UInt **l2 = ch_shadow_l1[a >> 32];
  if (!l2) return 0;
  UInt *l3 = l2[(a >> 16) & 0xffff];
  return l3 ? l3[(a >> 4) & 0xfff] : 0;
}
extern Addr ch_heap_lo, ch_heap_span; /* tracked objects lie in [lo, lo+span) */
extern ULong ch_seq;                  /* allocations so far */
extern ULong ch_shadow_conflicts;
void ch_objects_init(void);
void ch_objects_write(VgFile *f);

/* ---- affinity (affinity.c) ----------------------------------------------- */
/* size | CH_ACCESS_CHASE: the access is a chase (lines.c). */
#define CH_ACCESS_CHASE ((SizeT)1 << 20)
VG_REGPARM(2) void ch_access(Addr a, SizeT size);
void ch_set_thread(ThreadId tid);
void ch_affinity_init(void);
void ch_affinity_write(VgFile *f);
extern ULong ch_tracked_accesses; /* accesses to tracked objects (estimated past the sample base) */
void ch_affinity_forget(void);    /* every thread's queue emptied (sample.c) */

/* ---- sampling (sample.c) ------------------------------------------------- */
extern Long ch_clo_sample_base;   /* --sample-base: accesses to the span analysed whole; 0: all */
extern ULong ch_total_accesses;   /* every access in the span of tracked objects: the clock */
extern Bool ch_sample_skip;       /* ch_access skips this access */
extern ULong ch_sample_weight;    /* else it counts this many times (0: it warms the analyses) */
extern ULong ch_sample_next;      /* ch_total_accesses at which that changes */
extern ULong ch_sample_windows;
void ch_sample_init(void);
void ch_sample_advance(void);
void ch_sample_write(VgFile *f);
/* An access at a, after the run's cache saw it (loads.c): outside the span
 * of tracked objects 0; else it moves the clock, and says whether
 * ch_access is to see it (the generated code calls ch_access only then). */
static inline UWord ch_sample_gate(Addr a) {
  if (a - ch_heap_lo >= ch_heap_span) return 0;
  if (++ch_total_accesses >= ch_sample_next) ch_sample_advance();
  return !ch_sample_skip;
}

/* ---- pointers (pointers.c): APA's DS graph, measured -------------------- */
VG_REGPARM(2) void ch_store_pointer(Addr a, Addr value);
void ch_pointers_write(VgFile *f);

/* ---- trace (trace.c): the heap reference trace, with --cohort-trace ---- */
extern const HChar *ch_clo_trace;
extern Long ch_clo_trace_budget;
void ch_trace_init(void);
void ch_trace_ref(UInt id, Obj *u);    /* a new macro access to object id */
void ch_trace_write(VgFile *f);        /* the file, and its line in the raw profile */

/* ---- layouts (layouts.c): the rest pool in one pool and by size class -- */
enum { CH_LAYOUT_ONE, CH_LAYOUT_CLASSES, CH_LAYOUTS };
void ch_layouts_alloc(Obj *o);          /* a new tracked object: its place in each */
void ch_layouts_free(Obj *o);
void ch_layouts_touch(const Obj *o, CtxStats *cs, Addr a, SizeT size, ULong weight);   /* an access to a tracked object */
void ch_layouts_write(VgFile *f);

/* ---- lines (lines.c): where in its line a line-sized block starts ------- */
#define CH_LINE_MODELS 5   /* packed, then 0, 16, 32, 48 bytes into a line */
/* An access to tracked object o (its id); chase: a load of a pointer that
 * replaces the register holding its base (instrument.c). */
void ch_lines_touch(const Obj *o, CtxStats *cs, UInt id, Addr a, SizeT size, Bool chase, ULong weight);
void ch_lines_alloc(Obj *o);   /* a new tracked object: its place in each model */
void ch_lines_free(Obj *o);
void ch_lines_write(VgFile *f);

/* ---- loads (loads.c): the simulated cache, which sees every data access;
 * MO's delinquent loads, with --cohort-loads=yes ---------------------------- */
#define CH_LINE_BITS 6
#define CH_D1_SETS 64      /* 32 KiB / 64 B / 8 ways */
#define CH_D1_WAYS 8
#define CH_LL_SETS 1024    /* 1 MiB / 64 B / 16 ways */
#define CH_LL_WAYS 16
/* A cache of that geometry: line number + 1 per way, most recently used
 * first; 0 is an empty way. */
typedef struct {
  Addr d1[CH_D1_SETS][CH_D1_WAYS];
  Addr ll[CH_LL_SETS][CH_LL_WAYS];
} SimCache;
/* Look tag up in one set, and make it the most recently used. */
static inline Bool ch_set_touch(Addr *set, UInt ways, Addr tag) {
  UInt i = 0;
  while (i < ways && set[i] != tag) i++;
  Bool hit = i < ways;
  if (!hit) i = ways - 1;          /* evict the least recently used */
  for (; i > 0; i--) set[i] = set[i - 1];
  set[0] = tag;
  return hit;
}

/* 0: a D1 hit; 1: a D1 miss served by LL; 2: an LL miss too. */
static inline UInt ch_line_touch(SimCache *c, Addr line) {
  Addr tag = line + 1;
  if (ch_set_touch(c->d1[line & (CH_D1_SETS - 1)], CH_D1_WAYS, tag)) return 0;
  return ch_set_touch(c->ll[line & (CH_LL_SETS - 1)], CH_LL_WAYS, tag) ? 1 : 2;
}

/* A D1 of that geometry alone, for the models whose LL misses nothing reads
 * (layouts.c): True where the access missed. */
typedef struct {
  Addr d1[CH_D1_SETS][CH_D1_WAYS];
} D1Cache;
static inline Bool ch_d1_touch(D1Cache *c, Addr a, SizeT size) {
  Addr first = a >> CH_LINE_BITS, last = (a + (size ? size - 1 : 0)) >> CH_LINE_BITS;
  Bool missed = !ch_set_touch(c->d1[first & (CH_D1_SETS - 1)], CH_D1_WAYS, first + 1);
  if (last != first && !ch_set_touch(c->d1[last & (CH_D1_SETS - 1)], CH_D1_WAYS, last + 1)) missed = True;
  return missed;
}
static inline UInt ch_sim_touch(SimCache *c, Addr a, SizeT size) {
  Addr first = a >> CH_LINE_BITS, last = (a + (size ? size - 1 : 0)) >> CH_LINE_BITS;
  UInt r = ch_line_touch(c, first);
  if (last != first) {
    UInt r2 = ch_line_touch(c, last);
    if (r2 > r) r = r2;
  }
  return r;
}

typedef struct LoadSite LoadSite;
extern Bool ch_clo_loads;
extern Long ch_clo_stride_window;
extern UInt ch_cache_last;   /* the latest access: 0 a D1 hit, 1 a D1 miss, 2 an LL miss too */
LoadSite *ch_load_site(Addr pc);             /* made once per static load */
/* Each returns ch_sample_gate's word: whether ch_access is to see the access. */
VG_REGPARM(3) UWord ch_load(LoadSite *ls, Addr a, SizeT size);
VG_REGPARM(2) UWord ch_touch(Addr a, SizeT size);   /* any other data access */
void ch_loads_write(VgFile *f);
/* The whole run's simulated misses, and those on heap memory among the
 * tracked objects that none of them holds (affinity.c counts these). */
extern ULong ch_heap_other_d1, ch_heap_other_ll;
void ch_cache_write(VgFile *f);

/* ---- instrumentation (instrument.c) -------------------------------------- */
IRSB *ch_instrument(VgCallbackClosure *closure, IRSB *sb_in, const VexGuestLayout *layout,
                    const VexGuestExtents *vge, const VexArchInfo *archinfo_host,
                    IRType gWordTy, IRType hWordTy);

/* ---- small helpers ------------------------------------------------------- */
static inline UWord ch_hash64(ULong x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
  return (UWord)(x ^ (x >> 33));
}

/* ---- a stack of addresses: a model pool's freed blocks of one size, the
 * last freed on top (layouts.c, lines.c) ------------------------------------ */
typedef struct {
  Addr *a;
  UInt n, cap;
} AddrStack;
static inline void ch_stack_push(AddrStack *s, Addr a, const HChar *cc) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 256;
    s->a = VG_(realloc)(cc, s->a, s->cap * sizeof *s->a);
  }
  s->a[s->n++] = a;
}

/* ---- counts (counts.c): counters keyed by a nonzero word ----------------- */
/* A slot is its key and its count side by side, so that an add touches one
 * line of the host's cache: two words, or four where a second count rides
 * along (`wide`: affinity's near weight beside its edge's count). */
typedef struct {
  ULong *slots;           /* slot i: slots[i * width], key first; key 0: empty */
  UWord cap, used;
  Bool wide;              /* four words a slot: key, count, second count, unused */
  const HChar *cc;        /* the allocation cost centre's name */
} CountTable;
void ch_count_add(CountTable *t, ULong key, ULong n);
void ch_count_add2(CountTable *t, ULong key, ULong n, ULong second);   /* wide tables */
static inline UWord ch_count_width(const CountTable *t) { return t->wide ? 4 : 2; }   /* words a slot */
static inline ULong *ch_count_slot(const CountTable *t, UWord i) { return &t->slots[i * ch_count_width(t)]; }

#endif
