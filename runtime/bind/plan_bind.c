/* Cohort runtime: binding a plan's call sites to the modules of this
 * process as they load, and finding the plan site at an address. A module
 * the plan names in another build takes the sites its anchors find again
 * (anchor.c), with one warning; one where too few are found disables the
 * plan, with one warning. */
#define _GNU_SOURCE
#include "bind.h"

#include <stdio.h>
#include <string.h>

/* ch_plan_check_binary has run (at start-up): a mismatch found later is
 * reported where it is found. */
static bool binary_checked;

atomic_bool ch_plan_disabled;

static void hex(const uint8_t *b, unsigned n, char *out) {
  static const char d[] = "0123456789abcdef";
  for (unsigned i = 0; i < n; i++) { out[2 * i] = d[b[i] >> 4]; out[2 * i + 1] = d[b[i] & 15]; }
  out[2 * n] = 0;
}

/* Why the last other build met could not take the plan (rebase_module),
 * and which plan module that was. */
static char rebase_why[200];
static const struct ch_plan_module *rebase_tried;

/* What the line said of another build of plan module pm met in m begins with. */
static void other_build(const struct ch_plan_module *pm, const struct ch_module *m, char *out, size_t n) {
  char want[70], have[70];
  hex(pm->build_id, pm->build_id_len, want);
  hex(m->build_id, m->build_id_len, have);
  snprintf(out, n, "plan %s was made for another build of %s (build-id %s, running %s)", ch_opt.plan_path,
           ch_base_name(m->path), want, m->build_id_len ? have : "none");
}
static void mismatch(const struct ch_plan_module *pm, const struct ch_module *m) {
  char said[1024];   /* as long as a warning can be (log.c) */
  other_build(pm, m, said, sizeof said);
  ch_warn("%s, and its anchors do not carry it (%s); running without grouping", said,
          rebase_tried == pm ? rebase_why : "not tried: another module had disabled the plan");
}
static void rebased(const struct ch_plan_module *pm, const struct ch_module *m) {
  char said[1024];   /* as long as a warning can be (log.c) */
  other_build(pm, m, said, sizeof said);
  ch_warn("%s: rebased by its anchors, %s", said, rebase_why);
}

/* Bound sites by address: open addressing, filled as modules bind and
 * never emptied, so readers need no lock (a key is published after its
 * value). Four slots per site keep probes short. */
#define SITE_SLOTS (4 * CH_MAX_SITES)
static _Atomic uintptr_t site_key[SITE_SLOTS];
static int16_t site_val[SITE_SLOTS];
static size_t site_slot(uintptr_t addr) { return (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 54) % SITE_SLOTS; }

static void index_site(uintptr_t addr, unsigned s) {
  for (size_t h = site_slot(addr), n = 0; n < SITE_SLOTS; h = (h + 1) % SITE_SLOTS, n++) {
    uintptr_t k = atomic_load_explicit(&site_key[h], memory_order_relaxed);
    if (k == addr) return;   /* two sites at one address: the first is found, as before */
    if (k) continue;
    site_val[h] = (int16_t)s;
    atomic_store_explicit(&site_key[h], addr, memory_order_release);
    return;
  }
}

/* What switches identification off when a late module disables the plan:
 * the layers that decide own that (ch_plan_set_disable_hook; init.c). */
static void (*on_disable)(void);
void ch_plan_set_disable_hook(void (*f)(void)) { on_disable = f; }

/* Plan module i's sites in m, another build of it, found by their anchors
 * (anchor.c): at[s] their new offsets (0: not found, or found at the call
 * another site was). True when enough of the plan's selectors that name a
 * site of the module (select lines, group=G verdicts) keep every site to
 * decide as planned, or for a plan with none, enough of the module's sites
 * are found; else why not, in why. The module's file is read from
 * disk once, as cohort-anchor reads it, so the two find the same sites. */
static bool rebase_module(struct ch_plan *pl, unsigned i, const struct ch_module *m, uintptr_t *at,
                          char *why, size_t whylen) {
  unsigned anchored = 0, mine = 0, found = 0;
  for (unsigned s = 0; s < pl->nsites; s++)
    if (pl->sites[s].module == i) { mine++; anchored += pl->sites[s].anchor != NULL; }
  if (!anchored) { snprintf(why, whylen, "the plan has no anchors to find its sites by"); return false; }
  struct ch_calls *c = ch_calls_scan(m->is_main ? "/proc/self/exe" : m->path, why, whylen);
  if (!c) return false;
  unsigned n;
  const uint8_t *id = ch_calls_build_id(c, &n);
  if (n != m->build_id_len || memcmp(id, m->build_id, n)) {
    snprintf(why, whylen, "its file is not the build running");
    ch_calls_free(c);
    return false;
  }
  uint64_t lost[CH_MAX_SITES / 64] = {0}, here[CH_MAX_SITES / 64] = {0};
  for (unsigned s = 0; s < pl->nsites; s++) {
    if (pl->sites[s].module != i) continue;
    here[s >> 6] |= (uint64_t)1 << (s & 63);
    const char *how, *no;
    at[s] = pl->sites[s].anchor ? (uintptr_t)ch_anchor_find(c, pl->sites[s].anchor, &how, &no) : 0;
  }
  ch_calls_free(c);
  /* Two sites found at one call: which one it is, neither anchor knows. */
  for (unsigned s = 0; s < pl->nsites; s++)
    for (unsigned t = s + 1; pl->sites[s].module == i && at[s] && t < pl->nsites; t++)
      if (pl->sites[t].module == i && at[t] == at[s]) at[s] = at[t] = 0;
  for (unsigned s = 0; s < pl->nsites; s++) {
    if (pl->sites[s].module != i) continue;
    if (at[s]) found++;
    else lost[s >> 6] |= (uint64_t)1 << (s & 63);
  }
  /* The selectors that name a site of this module: kept when none is lost. */
  unsigned kept = 0, of = 0;
  for (unsigned k = 0; k < pl->nconj; k++) {
    bool mine_too = false, whole = true;
    for (unsigned w = 0; w < CH_MAX_SITES / 64; w++) {
      mine_too |= (pl->conj[k].mask[w] & here[w]) != 0;
      whole &= !(pl->conj[k].mask[w] & lost[w]);
    }
    of += mine_too;
    kept += mine_too && whole;
  }
  for (unsigned s = 0; s < pl->nsites; s++)
    if (pl->sites[s].module == i && pl->sites[s].entry == CH_ENTRY_GROUP) { of++; kept += !(lost[s >> 6] >> (s & 63) & 1); }
  snprintf(why, whylen, "%u of %u call sites found, %u of %u selectors kept", found, mine, kept, of);
  /* A plan with no selector (its rest pool and verdicts alone) by its sites. */
  if (!of) { kept = found; of = mine; }
  return (uint64_t)kept * 100 >= (uint64_t)ch_opt.rebase_min * of;
}

/* Bind plan module i to m: each site found at its offset, or at its new
 * one (at, from rebase_module; 0 there: a site dropped, never indexed, so
 * its selectors and paths never hold). */
static void bind_sites(struct ch_plan *pl, unsigned i, struct ch_module *m, const uintptr_t *at) {
  pl->modules[i].resolved = true;
  m->plan_module = (int)i;
  for (unsigned s = 0; s < pl->nsites; s++)
    if (pl->sites[s].module == i) {
      if (at) {
        if (!at[s]) continue;
        pl->sites[s].offset = at[s];
      }
      pl->sites[s].addr = m->bias + pl->sites[s].offset;
      index_site(pl->sites[s].addr, s);
    }
}

/* Called for every module as it becomes known. */
void ch_plan_bind_module(struct ch_module *m) {
  struct ch_plan *pl = ch_plan;
  if (!pl || m->system) return;
  for (unsigned i = 0; i < pl->nmodules; i++) {
    struct ch_plan_module *pm = &pl->modules[i];
    if (pm->resolved) continue;
    if (ch_module_is(m, pm->build_id, pm->build_id_len, pm->path)) {
      bind_sites(pl, i, m, NULL);
      return;
    }
    /* Same program or library, different build: the plan describes it only
     * where its anchors find the same calls again. */
    if (!strcmp(ch_base_name(pm->path), ch_base_name(m->path)) && !atomic_load(&ch_plan_disabled)) {
      static uintptr_t at[CH_MAX_SITES];   /* under the loader's lock */
      rebase_tried = pm;
      if (rebase_module(pl, i, m, at, rebase_why, sizeof rebase_why)) {
        bind_sites(pl, i, m, at);
        rebased(pm, m);
        return;
      }
      if (binary_checked) mismatch(pm, m);   /* until then, check_binary reports it */
      atomic_store(&ch_plan_disabled, true);
      if (on_disable) on_disable();   /* from now on: pass-through */
      return;
    }
  }
}

bool ch_plan_check_binary(void) {
  binary_checked = true;
  struct ch_plan *pl = ch_plan;
  if (!pl) return false;
  if (atomic_load(&ch_plan_disabled)) {
    unsigned n = ch_modules_count();
    for (unsigned i = 0; i < n; i++) {
      struct ch_module *m = ch_modules_at(i);
      for (unsigned j = 0; j < pl->nmodules; j++)
        if (!pl->modules[j].resolved && !m->system &&
            !strcmp(ch_base_name(pl->modules[j].path), ch_base_name(m->path))) {
          mismatch(&pl->modules[j], m);
          return false;
        }
    }
    return false;
  }
  bool any = false;
  for (unsigned j = 0; j < pl->nmodules; j++) any |= pl->modules[j].resolved;
  if (!any) {
    /* A plan for another program of the family (an exec'd child, say): quiet. */
    ch_info("plan %s names no module of this process; running without grouping", ch_opt.plan_path);
    return false;
  }
  return true;
}

int ch_plan_site_entry(uintptr_t addr, int *entry) {
  int s = ch_plan_site_at(addr);
  *entry = s >= 0 ? (int)ch_plan->sites[s].entry : CH_ENTRY_UNKNOWN;
  return s;
}

int ch_plan_site_at(uintptr_t addr) {
  if (!ch_plan || !addr) return -1;
  for (size_t h = site_slot(addr), n = 0; n < SITE_SLOTS; h = (h + 1) % SITE_SLOTS, n++) {
    uintptr_t k = atomic_load_explicit(&site_key[h], memory_order_acquire);
    if (k == addr) return site_val[h];
    if (!k) return -1;
  }
  return -1;
}
