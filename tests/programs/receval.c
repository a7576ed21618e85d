/* A recursive evaluator's allocation, whose group its caller's call tells
 * (tests/integration/test_dpa.py). eval() makes its node through make() and xalloc(),
 * after its two recursive calls have returned, and returns it: the chain
 * runs through eval's call of make() to the call of eval that asked. The
 * first recursive call's node is kept in its parent; the second's is freed
 * at once, with its subtree. So the chain's last frame tells whether the
 * node lives or churns, and the hint that call set has been taken by the
 * allocations below it by the time the node is made: only the prefix up to
 * eval's call of make() can be named, and the group is one of several
 * beyond it. With a third argument, "indirect", eval_indirect runs instead:
 * the same, but it calls itself through a pointer, as an interpreter's
 * dispatch table does, and the wrapper analysis sees no call of its own
 * entry, so that its chains run on as described. eval, which calls itself
 * directly, is a wrapper that calls itself: its chains stop at it (one
 * group). Usage: receval ROUNDS DEPTH [indirect]; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

struct node { struct node *kid; long v; };

static __attribute__((noipa)) void *xalloc(size_t n) {
  void *p = malloc(n);
  if (!p) abort();
  return p;
}

static __attribute__((noipa)) struct node *make(long v, struct node *kid) {
  struct node *n = xalloc(sizeof *n);
  n->v = v;
  n->kid = kid;
  return n;
}

static long drop(struct node *n) {
  long s = 0;
  while (n) {
    struct node *kid = n->kid;
    s += n->v;
    free(n);
    n = kid;
  }
  return s;
}

static long dropped;

/* noipa, and no sibling call: each call of eval keeps its own frame and
 * return address, as an interpreter's evaluator does. */
static __attribute__((noipa, optimize("no-optimize-sibling-calls"))) struct node *eval(int depth) {
  struct node *kept = NULL;
  if (depth > 0) {
    kept = eval(depth - 1);            /* lives in this node */
    dropped += drop(eval(depth - 1));  /* churns */
  }
  struct node *n = make(depth, kept);
  __asm__ volatile("" ::: "memory");
  return n;
}

static struct node *eval_indirect(int depth);
static struct node *(*volatile recurse)(int) = eval_indirect;   /* a pointer the compiler cannot see through */
static __attribute__((noipa, optimize("no-optimize-sibling-calls"))) struct node *eval_indirect(int depth) {
  struct node *kept = NULL;
  if (depth > 0) {
    kept = recurse(depth - 1);
    dropped += drop(recurse(depth - 1));
  }
  struct node *n = make(depth, kept);
  __asm__ volatile("" ::: "memory");
  return n;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 2000, sum = 0;
  int depth = argc > 2 ? atoi(argv[2]) : 8;
  struct node *(*top)(int) = argc > 3 && argv[3][0] == 'i' ? eval_indirect : eval;
  for (long r = 0; r < rounds; r++) sum += drop(top(depth));
  printf("%ld %ld\n", sum, dropped);
  return 0;
}
