/* Cohort runtime: how each allocation was decided, counted by path
 * (enum ch_path) and by the frames its walk stepped past the entry. Each
 * thread counts in its own block and flushes to the shared counters every
 * COUNT_BATCH allocations (and when it exits or statistics are written),
 * so an allocation pays neither for a contended atomic nor, often, for the
 * cache lines of the shared counters. Every policy counts here; stats.c
 * reports the totals. */
#define _GNU_SOURCE
#include "select.h"

const char *const ch_path_names[CH_PATH_COUNT] = {
  "off", "large", "reentrant", "cold", "entry", "walk_none", "walk_group", "stop", "path", "truncated",
  "patched", "all", "random", "direct", "dpa", "dpa_hinted", "dpa_prefix", "dpa_below", "mo", "mo_next",
};
const char *const ch_frame_bucket_names[CH_FRAME_BUCKETS] = {"0", "1", "2", "3", "4-7", "8-15", "16+"};
atomic_ulong ch_path_count[CH_PATH_COUNT];   /* the per-thread counts, flushed */
atomic_ulong ch_frame_count[CH_FRAME_BUCKETS];
atomic_ulong ch_walks_joined;

#define tcount (ch_thread.path_count)
#define tframes (ch_thread.frame_count)
#define tbudget (ch_thread.count_budget)
/* tbudget: allocations a thread may count before its counts are flushed; 0
 * in a new thread, whose first count registers it. tbudget_base: its value
 * after the last flush. */
static CH_TLS int32_t tbudget_base;
/* The path of allocations counted by the budget alone (identify.c sets
 * it): direct sites under a plan, every small allocation on the frameless
 * path (ch_identify_control): the all and random controls, and a plan with
 * nothing but its rest pool. */
enum ch_path ch_budget_path = CH_PATH_DIRECT;
/* Allocations a live stop record decided count down a budget of their own
 * (ch_count_patched: one instruction and its branch), from tpatched_base.
 * Its flush also looks for modules loaded since (flush_due), about 400
 * instructions: at 16384 a batch, under 0.03 an allocation. */
#define PATCHED_BATCH 16384
static CH_TLS int32_t tpatched_base;

static void flush_counts(void) {
  /* What the budget lost beyond the other counts. Under a plan they stepped
   * past no frame either. */
  uint32_t others = 0;
  for (unsigned i = 0; i < CH_PATH_COUNT; i++) others += tcount[i];
  uint32_t quiet = (uint32_t)(tbudget_base - tbudget) - others + ch_control_count;
  ch_control_count = 0;
  tcount[ch_budget_path] += quiet;
  if (ch_budget_path == CH_PATH_DIRECT || ch_budget_path == CH_PATH_COLD) tframes[0] += quiet;
  /* Those a cold site's stub sent on, counted by the stub itself (direct.c). */
  uint32_t stubbed = (uint32_t)ch_thread.cold_stubbed;
  ch_thread.cold_stubbed = 0;
  tcount[CH_PATH_COLD] += stubbed;
  tframes[0] += stubbed;
  /* Those a live stop record decided, on their own budget. */
  uint32_t patched = (uint32_t)(tpatched_base - ch_thread.patched_budget);
  tcount[CH_PATH_PATCHED] += patched;
  tframes[0] += patched;
  ch_thread.patched_budget = tpatched_base = PATCHED_BATCH;
  tbudget_base = tbudget;
  for (unsigned i = 0; i < CH_PATH_COUNT; i++) {
    if (tcount[i]) atomic_fetch_add_explicit(&ch_path_count[i], tcount[i], memory_order_relaxed);
    tcount[i] = 0;
  }
  for (unsigned i = 0; i < CH_FRAME_BUCKETS; i++) {
    if (tframes[i]) atomic_fetch_add_explicit(&ch_frame_count[i], tframes[i], memory_order_relaxed);
    tframes[i] = 0;
  }
  if (ch_thread.walks_joined) atomic_fetch_add_explicit(&ch_walks_joined, ch_thread.walks_joined, memory_order_relaxed);
  ch_thread.walks_joined = 0;
}

/* A thread's counts are flushed when it exits, through a key destructor
 * registered at its first count. */
static pthread_key_t exit_key;
static bool exit_key_ok;
static CH_TLS bool tregistered;
static void flush_at_exit(void *arg) { (void)arg; flush_counts(); }
static CH_NOINLINE void register_thread(void) {
  tregistered = true;
  if (!exit_key_ok) return;
  ch_in_runtime++;   /* pthread_setspecific may allocate */
  pthread_setspecific(exit_key, (void *)1);
  ch_in_runtime--;
}
bool ch_counts_registered(void) { return tregistered; }
void ch_counts_init(void) { exit_key_ok = pthread_key_create(&exit_key, flush_at_exit) == 0; }

#define COUNT_BATCH 4096
CH_NOINLINE void ch_count_flush_due(void) {
  if (!tregistered) register_thread();
  flush_counts();
  tbudget = tbudget_base = COUNT_BATCH - 1;
  /* With selector sites patched, look for modules loaded since, whose sites
   * get patched too: a walk notices a new module by itself, decisions from
   * bits would not. */
  if (atomic_load_explicit(&ch_patch_gen, memory_order_relaxed) && !ch_in_runtime) {
    ch_in_runtime++;
    ch_modules_refresh();
    ch_in_runtime--;
  }
}
void ch_count_flush_thread(void) { flush_counts(); }
