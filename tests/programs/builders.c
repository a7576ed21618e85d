/* Shape test program: recursive builders (the planner's hardest contexts).
 * A binary tree is built depth-first by a function that calls itself for the
 * left and the right subtree, and a quad-tree by one with four recursive
 * calls, so their hot contexts hold the same call sites in different orders.
 * Every 64th tree node also gets a note from another call site that nothing
 * reads again (a cold context entering elsewhere). The trees are summed many
 * times, and the binary tree's subtrees are swapped in place between sums.
 * Objects are logged "kind index group address" to argv[1] after the walks;
 * stdout gets a checksum that does not depend on where objects live.
 * argv[2]: depth of the binary tree (default 12). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

struct node { struct node *left, *right; long value; };
struct quad { struct quad *part[4]; long value; };

static void *notes[1 << 16];
static int nnotes;
static long next_key = 1;

NOINLINE static void *make_note(long key) {
  long *n = malloc(40);
  n[0] = key;
  return n;
}

NOINLINE static struct node *build(int depth) {
  struct node *n = malloc(sizeof *n);
  n->value = next_key++ * 2654435761u % 1000003;
  if (n->value % 64 == 0 && nnotes < (int)(sizeof notes / sizeof *notes)) notes[nnotes++] = make_note(n->value);
  if (depth > 0) {
    n->left = build(depth - 1);
    n->right = build(depth - 1);
  } else {
    n->left = n->right = NULL;
  }
  return n;
}

NOINLINE static struct quad *build_quad(int depth) {
  struct quad *q = malloc(sizeof *q);
  q->value = next_key++ % 977;
  if (depth > 0) {
    q->part[0] = build_quad(depth - 1);
    q->part[1] = build_quad(depth - 1);
    q->part[2] = build_quad(depth - 1);
    q->part[3] = build_quad(depth - 1);
  } else {
    q->part[0] = q->part[1] = q->part[2] = q->part[3] = NULL;
  }
  return q;
}

static long sum(const struct node *n, int depth) {
  return n ? n->value * (depth + 1) + sum(n->left, depth + 1) + sum(n->right, depth + 1) : 0;
}

static long sum_quad(const struct quad *q) {
  if (!q) return 0;
  long s = q->value;
  for (int i = 0; i < 4; i++) s += sum_quad(q->part[i]) * (i + 1);
  return s;
}

/* Order each node's children by their values: subtrees move, nodes stay. */
static void swap_subtrees(struct node *n) {
  if (!n || !n->left) return;
  if (n->left->value > n->right->value) {
    struct node *t = n->left;
    n->left = n->right;
    n->right = t;
  }
  swap_subtrees(n->left);
  swap_subtrees(n->right);
}

static int (*group_of)(const void *);
static FILE *log_file;
static int logged;

static void log_tree(const struct node *n) {
  if (!n) return;
  fprintf(log_file, "node %d %d %p\n", logged++, group_of ? group_of(n) : -1, (const void *)n);
  log_tree(n->left);
  log_tree(n->right);
}

static void log_quad(const struct quad *q) {
  if (!q) return;
  fprintf(log_file, "quad %d %d %p\n", logged++, group_of ? group_of(q) : -1, (const void *)q);
  for (int i = 0; i < 4; i++) log_quad(q->part[i]);
}

int main(int argc, char **argv) {
  log_file = fopen(argc > 1 ? argv[1] : "/dev/null", "w");
  if (!log_file) { perror("log"); return 1; }
  int depth = argc > 2 ? atoi(argv[2]) : 12;
  group_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  struct node *tree = build(depth);
  struct quad *quad = build_quad(depth / 2);
  long check = 0;
  for (int round = 0; round < 30; round++) {
    check = check * 31 + sum(tree, 0) + sum_quad(quad);
    if (round % 10 == 9) swap_subtrees(tree);
  }
  printf("builders depth %d checksum %ld notes %d\n", depth, check, nnotes);
  log_tree(tree);
  log_quad(quad);
  for (int i = 0; i < nnotes; i++)
    fprintf(log_file, "note %d %d %p\n", i, group_of ? group_of(notes[i]) : -1, notes[i]);
  fclose(log_file);
  return 0;
}
