/* splitlists: Automatic Pool Allocation's Figure 1 pattern. One function
 * makes the nodes of two lists in interleaved order, all through one
 * allocating function (one malloc call site; the two lists differ only in
 * which of two calls of new_node made them, one frame out); each list is
 * then processed on its own, many times. The building makes the two lists
 * affine, so HALO's grouping keeps them together, interleaved; no pointer
 * links them, so the DS graph sees two data structures.
 * Usage: splitlists N PASSES; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#include "../prefetch.h"

#define NOINLINE __attribute__((noinline))

struct node { struct node *next; long val; long pad[4]; };

NOINLINE static struct node *new_node(long v) {
  struct node *n = malloc(sizeof *n);
  if (!n) exit(1);
  n->val = v; n->next = NULL;
  for (int i = 0; i < 4; i++) n->pad[i] = v + i;
  return n;
}

NOINLINE static void make_lists(long n, struct node **a, struct node **b) {
  struct node **ta = a, **tb = b;
  for (long i = 0; i < n; i++) {
    *ta = new_node(i); ta = &(*ta)->next;
    *tb = new_node(-i); tb = &(*tb)->next;
  }
}

NOINLINE static long process(struct node *l, int passes) {
  long s = 0;
  for (int p = 0; p < passes; p++)
    for (struct node *x = l; x; x = x->next) {
      PREFETCH_AHEAD(x);
      s += x->val * (p + 1);
    }
  return s;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  int passes = argc > 2 ? atoi(argv[2]) : 10;
  struct node *a = NULL, *b = NULL;
  make_lists(n, &a, &b);
  long s = process(a, passes) + 3 * process(b, passes);
  while (a) { struct node *x = a->next; free(a); a = x; }
  while (b) { struct node *x = b->next; free(b); b = x; }
  printf("splitlists %ld %d checksum %ld\n", n, passes, s);
  return 0;
}
