/* Contexts: from the stack at an allocation to a reduced context id, by the
 * definition in docs/context.md (the runtime's, so plans match).
 *
 * A return address is resolved once to a *site* (module + offset, symbols,
 * kind of call); an ip cache keeps that per address. A context is the
 * sequence of non-system sites, innermost first, each at its first
 * occurrence only; contexts are interned in a hash table. */
#include "profiler.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_clientstate.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_vki.h"
#include "pub_tool_stacktrace.h"
#include "../runtime/context/system_modules.h"

/* ==== growable arrays ===================================================== */

#define GROW(arr, n, cap, what)                                              \
  do {                                                                       \
    if ((n) == (cap)) {                                                      \
      (cap) = (cap) ? 2 * (cap) : 64;                                        \
      (arr) = VG_(realloc)(what, (arr), (cap) * sizeof *(arr));              \
    }                                                                        \
  } while (0)

/* ==== modules ============================================================= */

typedef struct {
  HChar *path;
  Bool system;
  PtrdiffT bias;
  Addr text_lo, text_hi;
} Module;
static Module *modules;
static UInt n_modules, modules_cap;

static Bool system_name(const HChar *path) {
  static const HChar *const prefixes[] = {COHORT_SYSTEM_MODULE_PREFIXES};
  const HChar *base = VG_(strrchr)(path, '/');
  base = base ? base + 1 : path;
  for (UInt i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
    if (VG_(strncmp)(base, prefixes[i], VG_(strlen)(prefixes[i])) == 0) return True;
  return False;
}

/* A new non-system module's path, a line appended to --cohort-modules:
 * `cohort profile` reads its functions (.eh_frame) while the program still
 * runs, on the core the tool leaves idle, where it read them after the run
 * (dot: 20 libraries and plugins, about 3 s). */
static void announce(const HChar *path) {
  static Int fd = -2;   /* -2: not opened yet; -1: none */
  if (fd == -2) {
    fd = -1;
    if (ch_clo_modules) {
      SysRes r = VG_(open)(ch_clo_modules, VKI_O_CREAT | VKI_O_APPEND | VKI_O_WRONLY, VKI_S_IRUSR | VKI_S_IWUSR);
      if (!sr_isError(r)) fd = (Int)sr_Res(r);
    }
  }
  if (fd < 0) return;
  VG_(write)(fd, path, (Int)VG_(strlen)(path));
  VG_(write)(fd, "\n", 1);
}

static UInt module_of(const DebugInfo *di) {
  const HChar *path = VG_(DebugInfo_get_filename)(di);
  for (UInt i = 0; i < n_modules; i++)
    if (VG_(strcmp)(modules[i].path, path) == 0) {
      modules[i].bias = VG_(DebugInfo_get_text_bias)(di);  /* may be reloaded elsewhere */
      return i;
    }
  GROW(modules, n_modules, modules_cap, "cohort.modules");
  Module *m = &modules[n_modules];
  m->path = VG_(strdup)("cohort.modpath", path);
  /* The main executable is never a system module, whatever its name.
   * Valgrind names mapped files by their resolved path, as --cohort-main. */
  m->system = system_name(path) && !(ch_clo_main && VG_(strcmp)(ch_clo_main, path) == 0) &&
              VG_(strcmp)(VG_(args_the_exename), path) != 0;
  if (!m->system) announce(m->path);
  m->bias = VG_(DebugInfo_get_text_bias)(di);
  m->text_lo = VG_(DebugInfo_get_text_avma)(di);
  m->text_hi = m->text_lo + VG_(DebugInfo_get_text_size)(di);
  return n_modules++;
}

/* ==== calls: their kinds and counts ====================================== */

/* Return address -> the kind of the call before it, noted when the call was
 * translated (instrument.c), and how often it ran: a counter the generated
 * code increments inline at each call's push, so that the planner can price
 * a selector site's patched stub, which runs on every call through the site,
 * not only on those that allocate. Counters live in blocks that never move,
 * since translations hold their addresses. Open addressing; 0 is the empty
 * key. */
static Addr *call_keys;
static UChar *call_kinds;
static ULong **call_counts;
static UWord call_cap, call_used;
static ULong *count_block;
static UWord count_block_left;

static UWord call_probe(Addr ra) {
  UWord i = ch_hash64(ra) & (call_cap - 1);
  while (call_keys[i] && call_keys[i] != ra) i = (i + 1) & (call_cap - 1);
  return i;
}

/* ra's entry, made (a call not noted yet: CH_CALL_OTHER) if need be. */
static UWord call_entry(Addr ra) {
  if (2 * (call_used + 1) > call_cap) {
    Addr *ok = call_keys;
    UChar *okind = call_kinds;
    ULong **ocount = call_counts;
    UWord ocap = call_cap;
    call_cap = call_cap ? 2 * call_cap : 4096;
    call_keys = VG_(calloc)("cohort.calls", call_cap, sizeof(Addr));
    call_kinds = VG_(calloc)("cohort.calls", call_cap, 1);
    call_counts = VG_(calloc)("cohort.calls", call_cap, sizeof(ULong *));
    for (UWord i = 0; i < ocap; i++)
      if (ok[i]) {
        UWord j = call_probe(ok[i]);
        call_keys[j] = ok[i];
        call_kinds[j] = okind[i];
        call_counts[j] = ocount[i];
      }
    if (ok) { VG_(free)(ok); VG_(free)(okind); VG_(free)(ocount); }
  }
  UWord i = call_probe(ra);
  if (!call_keys[i]) {
    call_keys[i] = ra;
    call_kinds[i] = CH_CALL_OTHER;
    call_used++;
  }
  return i;
}

/* The entry first: call_entry may move call_kinds, and in
 * `call_kinds[call_entry(ra)] = ...` the compiler loaded the old array before
 * the call, so the kind went into freed memory, which the tool's allocator
 * had given a context's site list: a site id with 1 << 24 added (dot, twice). */
void ch_note_call(Addr ra, Bool direct) {
  UWord i = call_entry(ra);
  call_kinds[i] = direct ? CH_CALL_DIRECT : CH_CALL_INDIRECT;
}

ULong *ch_call_counter(Addr ra) {
  UWord i = call_entry(ra);
  if (!call_counts[i]) {
    if (!count_block_left) {
      count_block = VG_(calloc)("cohort.calls", 4096, sizeof(ULong));
      count_block_left = 4096;
    }
    call_counts[i] = count_block++;
    count_block_left--;
  }
  return call_counts[i];
}

/* Never seen as a call: a signal frame, a hand-pushed address, or code run
 * before the tool could see it. */
static UChar kind_get(Addr ra) {
  if (!call_cap) return CH_CALL_OTHER;
  UWord i = call_probe(ra);
  return call_keys[i] ? call_kinds[i] : CH_CALL_OTHER;
}

static ULong calls_at(Addr ra) {
  if (!call_cap) return 0;
  UWord i = call_probe(ra);
  return call_keys[i] && call_counts[i] ? *call_counts[i] : 0;
}

/* ==== sites =============================================================== */

typedef struct {
  UInt module;
  Addr offset;  /* return address - module bias */
  Addr ra;      /* the return address it was first seen at, for its call count */
  UChar kind;
  HChar *fn, *file;
  UInt line;
  HChar *inl;   /* with inlining: "fn (file:line)" per level, innermost first, tab-separated; or "" */
} Site;
static Site *sites;
static UInt n_sites, sites_cap;
/* Per site, the stack walk that met it last (ch_context_of): apart from the
 * sites' records, which a walk need not read. */
static UInt *site_seen;
static UInt site_seen_cap;

#define NO_SITE 0xffffffffu   /* not inside any module: the walk stops */

/* (module, offset) -> site, so a module reloaded at another address keeps
 * its sites. Values are site index + 1. */
static UInt *site_tab;
static UWord site_tab_cap;

static UWord site_hash(UInt module, Addr offset) { return ch_hash64(((ULong)module << 48) ^ offset); }

static void site_tab_insert(UInt s) {
  UWord i = site_hash(sites[s].module, sites[s].offset) & (site_tab_cap - 1);
  while (site_tab[i]) i = (i + 1) & (site_tab_cap - 1);
  site_tab[i] = s + 1;
}

static HChar *copy_or_empty(const HChar *s) { return VG_(strdup)("cohort.sym", s ? s : ""); }

/* The inlined calls at a call instruction, from the DWARF inline information
 * (needs --read-inline-info=yes): which function, inlined into which, the
 * allocation call sits in. Two selectors in one function and line of -O2
 * code are told apart by these. */
static HChar *inline_chain(DiEpoch ep, Addr a) {
  InlIPCursor *c = VG_(new_IIPC)(ep, a);
  HChar buf[1024];
  Int n = 0, levels = 0;
  do {
    const HChar *d = VG_(describe_IP)(ep, a, c);
    const HChar *colon = VG_(strstr)(d, ": ");
    if (colon) d = colon + 2;    /* drop the "0x...: " address */
    for (; *d && n < (Int)sizeof buf - 2; d++) buf[n++] = ch_name_char(*d);
    buf[n++] = '\t';
    levels++;
  } while (VG_(next_IIPC)(c) && n < (Int)sizeof buf - 64);
  VG_(delete_IIPC)(c);
  buf[n ? n - 1 : 0] = 0;
  return VG_(strdup)("cohort.sym", levels > 1 ? buf : "");
}

static UInt site_for(UInt module, Addr offset, Addr ra) {
  if (2 * (n_sites + 1) > site_tab_cap) {
    if (site_tab) VG_(free)(site_tab);
    site_tab_cap = site_tab_cap ? 2 * site_tab_cap : 4096;
    site_tab = VG_(calloc)("cohort.sitetab", site_tab_cap, sizeof(UInt));
    for (UInt s = 0; s < n_sites; s++) site_tab_insert(s);
  }
  UWord i = site_hash(module, offset) & (site_tab_cap - 1);
  for (; site_tab[i]; i = (i + 1) & (site_tab_cap - 1)) {
    Site *s = &sites[site_tab[i] - 1];
    if (s->module == module && s->offset == offset) return site_tab[i] - 1;
  }
  GROW(sites, n_sites, sites_cap, "cohort.sites");
  Site *s = &sites[n_sites];
  s->module = module;
  s->offset = offset;
  s->ra = ra;
  GROW(site_seen, n_sites, site_seen_cap, "cohort.sites");
  site_seen[n_sites] = 0;
  s->kind = kind_get(ra);
  /* Name the call instruction (ra - 1), so line numbers are the caller's. */
  DiEpoch ep = VG_(current_DiEpoch)();
  const HChar *fn = NULL, *file = NULL, *dir = NULL;
  UInt line = 0;
  if (!VG_(get_fnname)(ep, ra - 1, &fn)) fn = NULL;
  s->fn = copy_or_empty(fn);
  if (!VG_(get_filename_linenum)(ep, ra - 1, &file, &dir, &line)) { file = NULL; line = 0; }
  s->file = copy_or_empty(file);
  s->line = line;
  s->inl = inline_chain(ep, ra - 1);
  site_tab[i] = n_sites + 1;
  return n_sites++;
}

/* ==== the ip cache ======================================================== */

/* return address -> site, a slot holding both (one line of the host's cache
 * a lookup, where two arrays took two) */
typedef struct {
  Addr ra;      /* 0: empty */
  UInt site;
  Bool system;  /* the site's module is a system one */
} IpSlot;
static IpSlot *ip_tab;
static UWord ip_cap = 1 << 14, ip_used;

static void ip_reset(UWord cap) {
  if (ip_tab) VG_(free)(ip_tab);
  ip_cap = cap;
  ip_used = 0;
  ip_tab = VG_(calloc)("cohort.iptab", ip_cap, sizeof *ip_tab);
}

static UInt resolve(Addr ra) {
  DebugInfo *di = VG_(find_DebugInfo)(VG_(current_DiEpoch)(), ra);
  if (!di) return NO_SITE;
  UInt m = module_of(di);
  return site_for(m, ra - modules[m].bias, ra);
}

Bool ch_code_place(Addr pc, UInt *module, Addr *offset) {
  DebugInfo *di = VG_(find_DebugInfo)(VG_(current_DiEpoch)(), pc);
  if (!di) return False;
  *module = module_of(di);
  *offset = pc - modules[*module].bias;
  return True;
}

/* ra's slot: its site, or NO_SITE, and whether it is a system module's
 * (valid until the next call). */
static const IpSlot *site_of(Addr ra) {
  UWord i = ch_hash64(ra) & (ip_cap - 1);
  for (; ip_tab[i].ra; i = (i + 1) & (ip_cap - 1))
    if (ip_tab[i].ra == ra) return &ip_tab[i];
  UInt s = resolve(ra);
  if (2 * (ip_used + 1) > ip_cap) {  /* grow by starting afresh, bigger */
    ip_reset(2 * ip_cap);
    i = ch_hash64(ra) & (ip_cap - 1);
  }
  ip_tab[i].ra = ra;
  ip_tab[i].site = s;
  ip_tab[i].system = s != NO_SITE && modules[sites[s].module].system;
  ip_used++;
  return &ip_tab[i];
}

void ch_contexts_forget_range(Addr a, SizeT len) {
  for (UInt m = 0; m < n_modules; m++)
    if (a < modules[m].text_hi && a + len > modules[m].text_lo) {
      ip_reset(ip_cap);
      return;
    }
}

/* ==== contexts ============================================================ */

typedef struct {
  UInt *sites;
  UInt n;
  Bool truncated;
  UWord hash;
} Ctx;
static Ctx *ctxs;
CtxStats *ch_stats;   /* by context id (profiler.h's ch_ctx_stats) */
static UInt n_ctxs, ctxs_cap, stats_cap;
static UInt *ctx_tab;  /* context index + 1 */
static UWord ctx_tab_cap;

static UWord ctx_hash(const UInt *s, UInt n, Bool truncated) {
  ULong h = 0x9e3779b97f4a7c15ULL ^ n ^ ((ULong)truncated << 40);
  for (UInt i = 0; i < n; i++) h = ch_hash64(h ^ s[i]);
  return h;
}

static void ctx_tab_insert(UInt c) {
  UWord i = ctxs[c].hash & (ctx_tab_cap - 1);
  while (ctx_tab[i]) i = (i + 1) & (ctx_tab_cap - 1);
  ctx_tab[i] = c + 1;
}

static UInt intern(const UInt *s, UInt n, Bool truncated) {
  if (2 * (n_ctxs + 1) > ctx_tab_cap) {
    if (ctx_tab) VG_(free)(ctx_tab);
    ctx_tab_cap = ctx_tab_cap ? 2 * ctx_tab_cap : 1024;
    ctx_tab = VG_(calloc)("cohort.ctxtab", ctx_tab_cap, sizeof(UInt));
    for (UInt c = 0; c < n_ctxs; c++) ctx_tab_insert(c);
  }
  UWord h = ctx_hash(s, n, truncated);
  UWord i = h & (ctx_tab_cap - 1);
  for (; ctx_tab[i]; i = (i + 1) & (ctx_tab_cap - 1)) {
    Ctx *c = &ctxs[ctx_tab[i] - 1];
    if (c->hash == h && c->n == n && c->truncated == truncated &&
        VG_(memcmp)(c->sites, s, n * sizeof(UInt)) == 0)
      return ctx_tab[i] - 1;
  }
  GROW(ctxs, n_ctxs, ctxs_cap, "cohort.ctxs");
  if (n_ctxs == stats_cap) {
    UInt old = stats_cap;
    stats_cap = ctxs_cap;
    ch_stats = VG_(realloc)("cohort.ctxstats", ch_stats, stats_cap * sizeof *ch_stats);
    VG_(memset)(ch_stats + old, 0, (stats_cap - old) * sizeof *ch_stats);
  }
  Ctx *c = &ctxs[n_ctxs];
  c->sites = VG_(malloc)("cohort.ctxsites", (n ? n : 1) * sizeof(UInt));
  VG_(memcpy)(c->sites, s, n * sizeof(UInt));
  c->n = n;
  c->truncated = truncated;
  c->hash = h;
  ctx_tab[i] = n_ctxs + 1;
  return n_ctxs++;
}

static UInt walks;   /* stack walks so far: each marks the sites it meets */

UInt ch_context_of(ThreadId tid, UInt *inner) {
  Addr ips[CH_MAX_FRAMES + 1];
  UInt s[CH_MAX_FRAMES];
  UInt n = VG_(get_StackTrace)(tid, ips, CH_MAX_FRAMES + 1, NULL, NULL, 0);
  if (++walks == 0) {   /* the marks start over */
    for (UInt i = 0; i < n_sites; i++) site_seen[i] = 0;
    walks = 1;
  }
  Bool truncated = n > CH_MAX_FRAMES;
  if (truncated) n = CH_MAX_FRAMES;
  UInt k = 0;
  *inner = 0;
  for (UInt f = 0; f < n; f++) {
    /* Valgrind names outer frames by return address - 1 (the call). */
    Addr ra = f ? ips[f] + 1 : ips[f];
    if (ips[f] == 0) break;  /* the outermost frame */
    const IpSlot *slot = site_of(ra);
    UInt site = slot->site;
    if (site == NO_SITE) {
      /* Valgrind's unwinder goes on past the outermost frame (_start,
       * clone), where the runtime stops, and yields addresses in no code at
       * all. Only code outside every module (JIT code) truncates. */
      NSegment const *seg = VG_(am_find_nsegment)(ra);
      truncated = seg && seg->hasX;
      break;
    }
    if (slot->system) {
      /* frame 0 is the allocator itself (the tool's preload); a system
       * frame after it and before the entry is code the runtime must walk
       * past to find the entry (planner.py prices it) */
      if (f && !k) (*inner)++;
      continue;
    }
    /* recursion: keep the innermost (a deep interpreter's walk met each of
     * its 14 sites dozens of times, each compared with those before) */
    if (site_seen[site] == walks) continue;
    site_seen[site] = walks;
    s[k++] = site;
  }
  return intern(s, k, truncated);
}

UInt ch_n_contexts(void) { return n_ctxs; }

void ch_contexts_init(void) { ip_reset(ip_cap); }

/* ==== output ============================================================== */

static const HChar *kind_name(UChar k) {
  return k == CH_CALL_DIRECT ? "direct" : k == CH_CALL_INDIRECT ? "indirect" : "other";
}

/* A name as the dump carries it: cleaned (ch_clean_name), at most
 * DUMP_NAME_MAX characters, "..." ending a longer one (a C++ name of
 * thousands says nothing more to a reader). buf: DUMP_NAME_MAX + 4 bytes. */
#define DUMP_NAME_MAX 1024
static const HChar *dump_name(const HChar *s, HChar *buf) {
  Int n = (Int)VG_(strlen)(ch_clean_name(s, buf, DUMP_NAME_MAX + 1));
  if (s[n]) VG_(strcpy)(buf + n, "...");
  return buf;
}

void ch_contexts_write(VgFile *f) {
  static HChar fb[DUMP_NAME_MAX + 4], lb[DUMP_NAME_MAX + 4];
  for (UInt m = 0; m < n_modules; m++)
    VG_(fprintf)(f, "module %u %d 0x%lx %s\n", m, modules[m].system ? 1 : 0,
                 (unsigned long)modules[m].bias, modules[m].path);
  for (UInt i = 0; i < n_sites; i++)
    VG_(fprintf)(f, "site %u %u 0x%lx %s %llu\t%s\t%s\t%u\n", i, sites[i].module,
                 (unsigned long)sites[i].offset, kind_name(sites[i].kind), calls_at(sites[i].ra),
                 dump_name(sites[i].fn, fb), dump_name(sites[i].file, lb), sites[i].line);
  for (UInt i = 0; i < n_sites; i++)
    if (sites[i].inl[0]) VG_(fprintf)(f, "inline %u\t%s\n", i, sites[i].inl);   /* its own tabs part its levels */
  for (UInt c = 0; c < n_ctxs; c++) {
    CtxStats *st = &ch_stats[c];
    VG_(fprintf)(f, "context %u %d %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
                 "%llu %llu :",
                 c, ctxs[c].truncated ? 1 : 0, st->allocs, st->bytes, st->min_size, st->max_size,
                 st->frees, st->life_sum, st->life_max, st->accesses, st->macro, st->d1_misses,
                 st->ll_misses, st->layout_d1[CH_LAYOUT_ONE], st->layout_d1[CH_LAYOUT_CLASSES],
                 st->through, st->through_frames, st->beside[CH_LAYOUT_ONE], st->beside[CH_LAYOUT_CLASSES]);
    for (UInt i = 0; i < ctxs[c].n; i++) VG_(fprintf)(f, " %u", ctxs[c].sites[i]);
    VG_(fprintf)(f, "\n");
  }
}
