/* Cohort runtime: start-up, fork and exit.
 *
 * The constructor reads the settings and the plan; allocations made before it
 * (by the loader or earlier constructors) pass straight to the next allocator,
 * so they are never grouped. */
#define _GNU_SOURCE
#include "entry.h"
#include "decode.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* alloc.c and new.c: the entry points a direct site may reach, and where
 * its stub goes instead (direct.c). */
void *ch_malloc_entry(size_t size);
void *ch_new_entry(size_t size);
void *ch_new_array_entry(size_t size);
void *ch_direct_malloc(size_t size, unsigned group);
void *ch_direct_new(size_t size, unsigned group);
void *ch_direct_act_malloc(size_t size, uintptr_t slot);
void *ch_direct_act_new(size_t size, uintptr_t slot);
void *ch_direct_rest_malloc(size_t size, unsigned group);
void *ch_direct_rest_new(size_t size, unsigned group);
void *ch_direct_site_malloc(size_t size, unsigned group);
void *ch_direct_site_new(size_t size, unsigned group);
void *ch_direct_next_malloc(size_t size);
void *ch_direct_next_new(size_t size);
void *ch_direct_cold_malloc(size_t size);
void *ch_direct_cold_new(size_t size);

atomic_int ch_init_state;
CH_TLS struct ch_thread ch_thread = {
  .dpa_check_in = CH_DPA_CHECK_GAP,
  .mo_sample_in = CH_MO_SAMPLE_GAP,
};

static void atfork_prepare(void) {
  ch_modules_atfork_prepare();
  ch_heaps_atfork_prepare();
  ch_chunks_atfork_prepare();
}
static void atfork_parent(void) {
  ch_chunks_atfork_parent();
  ch_heaps_atfork_parent();
  ch_modules_atfork_parent();
}
static void atfork_child(void) {
  ch_chunks_atfork_child();
  ch_heaps_atfork_child();
  ch_modules_atfork_child();
  if (ch_opt.mode == CH_MODE_DPA) ch_dpa_atfork_child();
  if (ch_opt.mode == CH_MODE_MO) ch_mo_atfork_child();
}

static void on_stats_signal(int sig) {
  (void)sig;
  ch_stats_write(ch_opt.stats_path);
}

static void install_stats_signal(void) {
  const char *v = getenv("COHORT_STATS_SIGNAL");
  if (!v || !*v) return;
  int sig = !strcmp(v, "USR1") || !strcmp(v, "SIGUSR1") ? SIGUSR1
          : !strcmp(v, "USR2") || !strcmp(v, "SIGUSR2") ? SIGUSR2 : atoi(v);
  if (sig <= 0 || sig >= NSIG || !ch_opt.stats_path) {
    ch_warn("COHORT_STATS_SIGNAL=%s needs COHORT_STATS and a signal (USR1, USR2 or a number)", v);
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stats_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

void ch_ensure_init(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&ch_init_state, &expected, 1)) return;
  ch_in_runtime++;
  ch_next_resolve();
  ch_options_load();
  ch_decode_init();   /* before any thread: every reader of code shares it */
  /* The context layer's calls up, as hooks: binding and patching modules,
   * the plan's sites in the walk's rules. */
  ch_modules_set_hooks(&(struct ch_module_hooks){ch_plan_bind_module, ch_patch_modules});
  ch_unwind_set_sites(ch_plan_site_entry);
  ch_plan_set_disable_hook(ch_identify_off);
  if (ch_opt.mode != CH_MODE_OFF) {
    ch_check_init();
    /* The heaps' tables first: the region, once published, lets another
     * thread allocate from a pool (pool.c) while this one is still here. */
    ch_heaps_init();
    ch_chunks_init();
    ch_unwind_init();
    if (ch_opt.mode == CH_MODE_PLAN && ch_opt.plan_path && ch_plan_load(ch_opt.plan_path) == 0) {
      ch_modules_refresh();
      if (!ch_plan_check_binary()) atomic_store(&ch_plan_disabled, true);
    }
    ch_identify_init();
    /* Under a plan, every group but the rest pool places line-sized blocks
     * on lines, where in the line the plan says (at=K; a line's start by
     * default); the rest pool, and its classes, only when the plan says
     * where. The controls pack. */
    if (ch_identify_active && ch_opt.mode == CH_MODE_PLAN && ch_plan) {
      for (unsigned g = 0; g < ch_plan->ngroups && g < CH_MAX_GROUPS; g++)
        if ((int)g != ch_plan->rest) ch_heap_place_lines(g, ch_plan->group_at[g] > 0 ? (unsigned)ch_plan->group_at[g] : 0);
      int rest = ch_plan->rest;
      if (rest >= 0 && rest < CH_MAX_GROUPS && ch_plan->group_at[rest] >= 0)
        for (unsigned c = 0; c < CH_REST_CLASSES; c++)
          if (ch_rest_groups[c] >= 0) ch_heap_place_lines((unsigned)ch_rest_groups[c], (unsigned)ch_plan->group_at[rest]);
    }
    if (ch_identify_active) {
      ch_patch_set_targets(&(struct ch_patch_targets){ch_act_tls_offset(), ch_stops_tls_offset(),
                                                      (uintptr_t)ch_direct_act_malloc, (uintptr_t)ch_direct_act_new});
      ch_patch_init();
      ch_direct_init(&(struct ch_direct_entries){
        (uintptr_t)ch_malloc_entry, (uintptr_t)ch_new_entry, (uintptr_t)ch_new_array_entry,
        ch_direct_malloc, ch_direct_new, ch_direct_act_malloc, ch_direct_act_new,
        ch_direct_rest_malloc, ch_direct_rest_new, ch_direct_site_malloc, ch_direct_site_new,
        ch_direct_next_malloc, ch_direct_next_new, ch_direct_cold_malloc, ch_direct_cold_new});
    }
    if (ch_opt.mode == CH_MODE_PLAN && (!ch_plan || atomic_load(&ch_plan_disabled))) ch_identify_off();
  }
  /* Whatever the mode: prefetching changes code, not placement. */
  if (ch_opt.prefetch_path) ch_prefetch_init(ch_opt.prefetch_path);
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  install_stats_signal();
  ch_info("%s, mode %d, %u group(s), max grouped size %zu", "cohort-runtime " COHORT_VERSION,
          (int)ch_opt.mode, ch_ngroups(), ch_max_size);
  ch_in_runtime--;
  atomic_store(&ch_init_state, 2);
}

__attribute__((constructor(101))) static void cohort_init(void) { ch_ensure_init(); }

void ch_flush_thread(void) {
  ch_count_flush_thread();
  ch_heap_flush_recent();
  ch_heap_flush_remote();
}

__attribute__((destructor)) static void cohort_fini(void) {
  if (ch_opt.stats_path) {
    ch_flush_thread();
    if (ch_stats_write(ch_opt.stats_path) == -1)   /* -2: refused, and said so */
      ch_warn("cannot write statistics to %s", ch_opt.stats_path);
  }
}
