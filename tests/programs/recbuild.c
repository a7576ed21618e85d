/* A recursive builder whose recursion the wrapper analysis cannot see
 * (tests/integration/test_dpa.py). step() first recurses into its node's children,
 * through a pointer as an interpreter's dispatch would, then makes an entry
 * with new_entry() and links it into its node, which its caller gave it:
 * so step is a wrapper (it hands the entry back through an argument), and
 * the chain runs on to step's caller. The hint that caller's call set has
 * been taken by the children's entries by the time the entry is made: the
 * group is found by probing until the call one frame in (step's call of
 * new_entry) is named as the chain's prefix. Usage: recbuild ROUNDS DEPTH;
 * prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

struct entry { struct entry *next; long id; };
struct node { struct node *kid[2]; struct entry *waiting; long held; };

static __attribute__((noipa)) struct entry *new_entry(long id) {
  struct entry *e = malloc(sizeof *e);
  if (!e) abort();
  e->id = id;
  e->next = NULL;
  return e;
}

static struct node *tree(int depth) {
  struct node *n = calloc(1, sizeof *n);
  if (!n) abort();
  if (depth > 0) { n->kid[0] = tree(depth - 1); n->kid[1] = tree(depth - 1); }
  return n;
}

/* Keeps its node's newest four entries; frees the rest. */
static long trim(struct node *n) {
  long s = 0;
  if (n->held <= 4) return 0;
  struct entry *e = n->waiting;
  for (int i = 1; i < 4; i++) e = e->next;
  struct entry *old = e->next;
  e->next = NULL;
  n->held = 4;
  while (old) { struct entry *next = old->next; s += old->id; free(old); old = next; }
  return s;
}

static long step(struct node *n, long id);
static long (*volatile again)(struct node *, long) = step;

static __attribute__((noipa, optimize("no-optimize-sibling-calls"))) long step(struct node *n, long id) {
  long work = 0;
  for (int k = 0; k < 2; k++)
    if (n->kid[k]) work += again(n->kid[k], id * 2 + k);
  struct entry *e = new_entry(id);
  e->next = n->waiting;
  n->waiting = e;
  n->held++;
  __asm__ volatile("" ::: "memory");
  return work + id;
}

static long sweep(struct node *n) {
  long s = trim(n);
  for (int k = 0; k < 2; k++) if (n->kid[k]) s += sweep(n->kid[k]);
  return s;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 100, sum = 0;
  int depth = argc > 2 ? atoi(argv[2]) : 8;
  struct node *root = tree(depth);
  for (long r = 0; r < rounds; r++) {
    sum += again(root, 1);
    sum += sweep(root);
  }
  printf("%ld\n", sum);
  return 0;
}
