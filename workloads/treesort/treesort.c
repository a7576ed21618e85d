/* treesort: a perfect binary tree whose leaves, read left to right, are a
 * sequence of values, sorted in place by a bitonic network run on the tree.
 * Every internal node keeps the least and greatest value below it, so a
 * compare-exchange of two subtrees either does nothing, exchanges the two
 * subtrees whole (two pointers), or goes down to their children; two leaves
 * swap values. After a few merges the tree's nodes lie in no order in
 * memory. Each round builds a tree of random values depth-first (with a
 * witness record of every value made alongside, on a separate list read
 * only to check the result), sorts it ascending, then descending, disturbs
 * some leaves and sorts it again, and frees it.
 * Usage: treesort DEPTH ROUNDS SEED. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

struct node { struct node *left, *right; long lo, hi; };     /* a leaf: lo == hi == its value */
struct witness { struct witness *next; long value, position; };

static unsigned long rng;
static unsigned long next_rand(void) {
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
  return rng;
}

static struct witness *witnesses;
static long exchanges, swaps;

NOINLINE static void witness(long value, long position) {
  struct witness *w = malloc(sizeof *w);
  if (!w) exit(1);
  w->value = value; w->position = position;
  w->next = witnesses;
  witnesses = w;
}

static void fix(struct node *n) {
  n->lo = n->left->lo < n->right->lo ? n->left->lo : n->right->lo;
  n->hi = n->left->hi > n->right->hi ? n->left->hi : n->right->hi;
}

NOINLINE static struct node *build(int depth, long *position) {
  struct node *n = malloc(sizeof *n);
  if (!n) exit(1);
  if (depth == 0) {
    n->left = n->right = NULL;
    n->lo = n->hi = (long)(next_rand() % 1000000);
    witness(n->lo, (*position)++);
    return n;
  }
  n->left = build(depth - 1, position);
  n->right = build(depth - 1, position);
  fix(n);
  return n;
}

/* Element by element, the smaller (up) or larger (!up) of each pair goes to *pa. */
static void compare_exchange(struct node **pa, struct node **pb, int up) {
  struct node *a = *pa, *b = *pb;
  if (up ? a->hi <= b->lo : a->lo >= b->hi) return;
  if (!a->left) {                       /* two leaves out of order */
    long t = a->lo; a->lo = a->hi = b->lo; b->lo = b->hi = t;
    swaps++;
    return;
  }
  if (up ? a->lo >= b->hi : a->hi <= b->lo) {   /* every pair out of order */
    *pa = b; *pb = a;
    exchanges++;
    return;
  }
  compare_exchange(&a->left, &b->left, up);
  compare_exchange(&a->right, &b->right, up);
  fix(a);
  fix(b);
}

static void merge(struct node *t, int up) {
  if (!t->left) return;
  compare_exchange(&t->left, &t->right, up);
  merge(t->left, up);
  merge(t->right, up);
  fix(t);
}

static void sort(struct node *t, int up) {
  if (!t->left) return;
  sort(t->left, 1);
  sort(t->right, 0);
  merge(t, up);
}

/* In-order leaves: a position-weighted sum; counts order violations. */
static void visit(const struct node *t, int up, long *position, long *prev, unsigned long *sum, long *bad) {
  if (t->left) {
    visit(t->left, up, position, prev, sum, bad);
    visit(t->right, up, position, prev, sum, bad);
    return;
  }
  if (*position > 0 && (up ? t->lo < *prev : t->lo > *prev)) (*bad)++;
  *sum += (unsigned long)t->lo * (unsigned long)(*position % 1000 + 1);
  *prev = t->lo;
  (*position)++;
}

static unsigned long check_sorted(const struct node *t, int up) {
  long position = 0, prev = 0, bad = 0;
  unsigned long sum = 0;
  visit(t, up, &position, &prev, &sum, &bad);
  if (bad) { fprintf(stderr, "treesort: %ld values out of order\n", bad); exit(1); }
  return sum;
}

/* Replace the value of a random leaf (a walk from the root). */
static void disturb(struct node *t, int depth) {
  struct node *path[64];
  int n = 0;
  unsigned long bits = next_rand();
  for (int d = 0; d < depth; d++) {
    path[n++] = t;
    t = (bits >> d) & 1 ? t->right : t->left;
  }
  t->lo = t->hi = (long)(next_rand() % 1000000);
  while (n > 0) fix(path[--n]);
}

static void release(struct node *t) {
  if (t->left) { release(t->left); release(t->right); }
  free(t);
}

static long leaf_sum(const struct node *t) {
  return t->left ? leaf_sum(t->left) + leaf_sum(t->right) : t->lo;
}

int main(int argc, char **argv) {
  int depth = argc > 1 ? atoi(argv[1]) : 14;
  int rounds = argc > 2 ? atoi(argv[2]) : 2;
  rng = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
  if (rng == 0) rng = 88172645463325252ul;
  if (depth < 1 || depth > 40) { fputs("treesort: DEPTH must be 1..40\n", stderr); return 2; }
  unsigned long check = 0;
  for (int r = 0; r < rounds; r++) {
    long position = 0;
    struct node *root = build(depth, &position);
    sort(root, 1);
    check = check * 31 + check_sorted(root, 1);
    long total = 0;
    for (struct witness *w = witnesses; w; w = w->next) total += w->value;
    if (total != leaf_sum(root)) { fputs("treesort: values lost\n", stderr); return 1; }
    sort(root, 0);
    check = check * 31 + check_sorted(root, 0);
    for (long i = 0; i < (1L << depth) / 8; i++) disturb(root, depth);
    sort(root, 1);
    check = check * 31 + check_sorted(root, 1);
    while (witnesses) {
      struct witness *next = witnesses->next;
      check += (unsigned long)(witnesses->position ^ witnesses->value) % 13;
      free(witnesses);
      witnesses = next;
    }
    release(root);
  }
  printf("treesort %d %d exchanges %ld swaps %ld checksum %lu\n", depth, rounds, exchanges, swaps, check);
  return 0;
}
