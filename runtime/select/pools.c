/* Cohort runtime: the pools the online policies make as they run (DPA's
 * dpa-N, MO's mo-N), in order, each named and sized in one registry, which
 * the policies, the entry points and the statistics read. */
#define _GNU_SOURCE
#include "select.h"

#include <stdio.h>

static _Atomic unsigned online_pools;
static char online_names[CH_MAX_GROUPS][16];
uint32_t ch_online_pool_size[CH_MAX_GROUPS];

int ch_online_pool_new(const char *policy, uint32_t size) {
  unsigned g = atomic_load_explicit(&online_pools, memory_order_relaxed);
  if (g >= CH_PLAN_GROUPS) return -1;
  ch_online_pool_size[g] = size;
  snprintf(online_names[g], sizeof online_names[g], "%s-%u", policy, g);   /* no allocation, as log.c's */
  atomic_store_explicit(&online_pools, g + 1, memory_order_release);
  return (int)g;
}
unsigned ch_online_pools(void) { return atomic_load_explicit(&online_pools, memory_order_acquire); }
const char *ch_online_pool_name(unsigned g) { return g < CH_MAX_GROUPS ? online_names[g] : "?"; }
