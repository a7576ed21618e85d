/* cohort-plan-check PLAN: is PLAN a plan the runtime accepts? It runs the
 * runtime's own parser (runtime/plan/plan.c) with the runtime's settings from
 * the environment (COHORT_CHUNK_SIZE bounds max-size), so the CLI refuses
 * exactly what the runtime would. Exit 0 and a summary line on standard
 * output if it does; 1 and the runtime's reason ("plan PATH line N: WHY") if
 * it does not; 2 for a usage mistake. */
#include "plan.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2 || !strcmp(argv[1], "--help")) {
    fprintf(stderr, "usage: cohort-plan-check PLAN\n");
    return 2;
  }
  ch_options_load();
  char why[600];
  struct ch_plan *pl;
  if (ch_plan_read(argv[1], &pl, why, sizeof why)) {
    printf("%s\n", why);
    return 1;
  }
  printf("ok: version %u, %u modules, %u sites, %u groups, %u selectors, %u path nodes, max-size %zu\n",
         pl->version, pl->nmodules, pl->nsites, pl->ngroups, pl->nconj, pl->nnodes - 1, pl->max_size);
  return 0;
}
