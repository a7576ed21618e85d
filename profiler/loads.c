/* Loads: the simulated cache, and MO's delinquent-load profile (Zhao, Rabbah
 * & Wong 2005, section 3), for `cohort loads` (--cohort-loads=yes).
 *
 * Every data access of the client goes through a simulated cache, in the
 * geometry Cohort measures with (D1 32 KiB 8-way, LL 1 MiB 16-way, 64-byte
 * lines, LRU, as cachegrind's). ch_access (affinity.c) charges each miss of
 * an access to a tracked object to the object's context: what the planner
 * can at most save by placing it (docs/planner.md). With --cohort-loads=yes
 * each static load also counts how often it misses.
 * Each static load also runs MO's stride analysis on the addresses it
 * reads: over a window of t of its executions, the longest run of equal
 * strides. A window is *strided* when that run covers more than t/2 of the
 * references and the stride is at least a quarter line, MO's two tests.
 *
 * MO records the base register of the load. An instruction with no index
 * register reads base + a constant, so its address strides exactly as the
 * base does; cohort/measure/loads.py decodes the instruction and keeps only those
 * (and drops rsp- and rbp-based ones), so here the address stands for it.
 *
 * The state of a load lives in a LoadSite made when its instruction is
 * first translated, and the generated code passes its address: no lookup
 * per execution. The core serialises client threads, so one cache serves
 * them all, as in cachegrind. */
#include "profiler.h"

Bool ch_clo_loads = False;
Long ch_clo_stride_window = 64;

#define TOP_STRIDES 4

/* ==== the simulated cache ================================================= */

static SimCache real;            /* the run's own layout */
static ULong total_accesses, total_loads, total_d1_misses, total_ll_misses;
UInt ch_cache_last;

static inline UInt cache_touch(Addr a, SizeT size) {
  UInt r = ch_sim_touch(&real, a, size);
  total_accesses++;
  if (r) total_d1_misses++;
  if (r == 2) total_ll_misses++;
  ch_cache_last = r;
  return r;
}

VG_REGPARM(2) UWord ch_touch(Addr a, SizeT size) {
  cache_touch(a, size);
  return ch_sample_gate(a);
}

/* ==== static loads ======================================================== */

struct LoadSite {
  Addr pc;
  ULong execs, d1_misses, ll_misses;
  ULong windows, strided;        /* windows completed; those with a stride */
  Addr last;                     /* the previous address read */
  Long stride;                   /* the current run's stride ... */
  UInt run;                      /* ... and how many strides it has */
  Long best_stride;              /* the window's longest run so far */
  UInt best_run;
  UInt seen;                     /* executions in the current window */
  Long top[TOP_STRIDES];         /* the strides of strided windows, */
  ULong top_n[TOP_STRIDES];      /* with how many windows had each */
};

static LoadSite **site_tab;      /* pc -> LoadSite, open addressing */
static UWord site_cap, site_used;

static void tab_insert(LoadSite *ls) {
  UWord i = ch_hash64(ls->pc) & (site_cap - 1);
  while (site_tab[i]) i = (i + 1) & (site_cap - 1);
  site_tab[i] = ls;
}

LoadSite *ch_load_site(Addr pc) {
  if (2 * (site_used + 1) > site_cap) {
    LoadSite **old = site_tab;
    UWord ocap = site_cap;
    site_cap = site_cap ? 2 * site_cap : 4096;
    site_tab = VG_(calloc)("cohort.loads", site_cap, sizeof *site_tab);
    for (UWord i = 0; i < ocap; i++)
      if (old[i]) tab_insert(old[i]);
    if (old) VG_(free)(old);
  }
  UWord i = ch_hash64(pc) & (site_cap - 1);
  for (; site_tab[i]; i = (i + 1) & (site_cap - 1))
    if (site_tab[i]->pc == pc) return site_tab[i];
  LoadSite *ls = VG_(calloc)("cohort.loadsite", 1, sizeof *ls);
  ls->pc = pc;
  site_tab[i] = ls;
  site_used++;
  return ls;
}

/* The end of a window: MO's test, and the stride counted if it passes. */
static void window_end(LoadSite *ls) {
  Long s = ls->best_stride, mag = s < 0 ? -s : s;
  ls->windows++;
  if (2 * (ls->best_run + 1) > (ULong)ch_clo_stride_window && mag >= (1 << CH_LINE_BITS) / 4) {
    ls->strided++;
    UInt k = 0, least = 0;
    while (k < TOP_STRIDES && !(ls->top_n[k] && ls->top[k] == s)) {
      if (ls->top_n[k] < ls->top_n[least]) least = k;
      k++;
    }
    if (k == TOP_STRIDES) {          /* not kept: take the least counted slot */
      k = least;
      ls->top[k] = s;
    }
    ls->top_n[k]++;
  }
  ls->seen = 0;
  ls->run = ls->best_run = 0;
  ls->stride = ls->best_stride = 0;
}

VG_REGPARM(3) UWord ch_load(LoadSite *ls, Addr a, SizeT size) {
  UInt r = cache_touch(a, size);
  total_loads++;
  ls->execs++;
  if (r) ls->d1_misses++;
  if (r == 2) ls->ll_misses++;
  if (ls->seen) {
    Long d = (Long)(a - ls->last);
    if (ls->run && d == ls->stride) ls->run++;
    else { ls->stride = d; ls->run = 1; }
    if (ls->run > ls->best_run) { ls->best_run = ls->run; ls->best_stride = ls->stride; }
  }
  ls->last = a;
  if (++ls->seen == (UInt)ch_clo_stride_window) window_end(ls);
  return ch_sample_gate(a);
}

/* ==== output ============================================================== */

/* The whole run's simulated misses, every data access's (the headroom: the
 * tracked objects' share of them, cohort/plan/headroom.py), and those on heap
 * memory that no tracked object holds (affinity.c counts them: larger
 * objects, the allocator's own, freed blocks). Written whatever the
 * options: the cache is simulated anyway. */
ULong ch_heap_other_d1, ch_heap_other_ll;
void ch_cache_write(VgFile *f) {
  VG_(fprintf)(f, "cache accesses %llu d1 %llu ll %llu heap-other-d1 %llu heap-other-ll %llu\n", total_accesses,
               total_d1_misses, total_ll_misses, ch_heap_other_d1, ch_heap_other_ll);
}

void ch_loads_write(VgFile *f) {
  if (!ch_clo_loads) return;
  VG_(fprintf)(f, "loads window %lld line %d d1 %d %d ll %d %d accesses %llu loads %llu "
               "d1-misses %llu ll-misses %llu\n", ch_clo_stride_window, 1 << CH_LINE_BITS,
               CH_D1_SETS * CH_D1_WAYS << CH_LINE_BITS, CH_D1_WAYS, CH_LL_SETS * CH_LL_WAYS << CH_LINE_BITS,
               CH_LL_WAYS,
               total_accesses, total_loads, total_d1_misses, total_ll_misses);
  DiEpoch ep = VG_(current_DiEpoch)();
  for (UWord i = 0; i < site_cap; i++) {
    LoadSite *ls = site_tab[i];
    if (!ls || !ls->execs) continue;
    UInt module;
    Addr offset;
    if (!ch_code_place(ls->pc, &module, &offset)) continue;   /* JIT code: nothing to advise */
    const HChar *fn = NULL, *file = NULL, *dir = NULL;
    UInt line = 0;
    HChar fb[256], lb[256];
    if (!VG_(get_fnname)(ep, ls->pc, &fn)) fn = NULL;
    if (!VG_(get_filename_linenum)(ep, ls->pc, &file, &dir, &line)) { file = NULL; line = 0; }
    VG_(fprintf)(f, "load %u 0x%lx %llu %llu %llu %llu %llu", module, (unsigned long)offset,
                 ls->execs, ls->d1_misses, ls->ll_misses, ls->windows, ls->strided);
    for (UInt k = 0; k < TOP_STRIDES; k++)
      if (ls->top_n[k]) VG_(fprintf)(f, " %lld:%llu", ls->top[k], ls->top_n[k]);
    VG_(fprintf)(f, "\t%s\t%s\t%u\n", ch_clean_name(fn, fb, sizeof fb), ch_clean_name(file, lb, sizeof lb), line);
  }
}
