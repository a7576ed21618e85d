/* Cohort runtime: binding a plan's call sites to the modules of this
 * process as they load, and finding the plan site at an address. A module
 * the plan names in another build disables the plan, with one warning. */
#define _GNU_SOURCE
#include "bind.h"

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

static void mismatch(const struct ch_plan_module *pm, const struct ch_module *m) {
  char want[70], have[70];
  hex(pm->build_id, pm->build_id_len, want);
  hex(m->build_id, m->build_id_len, have);
  ch_warn("plan %s was made for another build of %s (build-id %s, running %s); "
          "running without grouping", ch_opt.plan_path, ch_base_name(m->path), want,
          m->build_id_len ? have : "none");
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

/* Called for every module as it becomes known. */
void ch_plan_bind_module(struct ch_module *m) {
  struct ch_plan *pl = ch_plan;
  if (!pl || m->system) return;
  for (unsigned i = 0; i < pl->nmodules; i++) {
    struct ch_plan_module *pm = &pl->modules[i];
    if (pm->resolved) continue;
    if (ch_module_is(m, pm->build_id, pm->build_id_len, pm->path)) {
      pm->resolved = true;
      m->plan_module = (int)i;
      for (unsigned s = 0; s < pl->nsites; s++)
        if (pl->sites[s].module == i) {
          pl->sites[s].addr = m->bias + pl->sites[s].offset;
          index_site(pl->sites[s].addr, s);
        }
      return;
    }
    /* Same program or library, different build: the plan does not describe it. */
    if (!strcmp(ch_base_name(pm->path), ch_base_name(m->path)) && !atomic_load(&ch_plan_disabled)) {
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
