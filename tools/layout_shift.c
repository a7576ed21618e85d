/* libcohort-shift.so: moves a run's heap layout, for `cohort bench
 * --layout-runs`. Preloaded before the allocator under test (so that it is
 * initialised after it), it asks that allocator for COHORT_SHIFT_HEAP bytes
 * at start-up and keeps them, so every later block of the program sits at
 * another offset within its page. Cache misses of a program can depend on
 * those offsets alone (sqlite3: 5.82 M to 6.39 M D1 misses over four
 * shifts, glibc unchanged; docs/results-format.md, "Layout noise"): the
 * runs this library makes show how far a baseline's own misses move, the
 * band inside which a ratio against it is no difference. */
#include <stdlib.h>

static void *volatile held;   /* kept for the whole run; volatile: not optimised away */

__attribute__((constructor)) static void shift_heap(void) {
  const char *s = getenv("COHORT_SHIFT_HEAP");
  if (!s) return;
  char *end;
  unsigned long n = strtoul(s, &end, 10);
  if (*end || n == 0 || n > (1ul << 20)) return;   /* unparsable or absurd: no shift */
  held = malloc(n);
}
