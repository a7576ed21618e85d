/* A file with nothing to do with any workload's allocations: the rebuilds
 * that carry a plan to another build link it in (scripts/bench-rebase.py,
 * tests/integration/test_rebase.py; docs/plan-format.md, "Anchors"). */
#include <stdio.h>
#include <stdlib.h>

int unrelated_report(int x) {
  char *p = malloc((size_t)x + 1);
  if (!p) return 0;
  p[0] = (char)x;
  int r = p[0] * 3;
  free(p);
  printf("%d\n", r);
  return r;
}
