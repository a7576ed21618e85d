/* A heap whose data-structure graph is known, for the profiler's DS edges
 * (tests/integration/test_profiler.py): a binary tree of nodes (left at offset 0, right
 * at 8) each pointing to a payload (offset 16); a table of 32 list heads
 * (an array of pointers: array-like), and list cells linked at offset 0.
 * Usage: dsgraph N; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

struct payload { long value; long spare; };
struct tree { struct tree *left, *right; struct payload *data; long key; };
struct cell { struct cell *next; long value; };

NOINLINE static struct payload *new_payload(long v) {
  struct payload *p = malloc(sizeof *p);
  p->value = v;
  return p;
}
NOINLINE static struct tree *new_tree(long key) {
  struct tree *t = malloc(sizeof *t);
  t->left = t->right = NULL;
  t->key = key;
  t->data = new_payload(key * 3);
  return t;
}
NOINLINE static struct tree *insert(struct tree *t, long key) {
  if (!t) return new_tree(key);
  if (key < t->key) t->left = insert(t->left, key);
  else t->right = insert(t->right, key);
  return t;
}
NOINLINE static struct cell **new_table(void) { return calloc(32, sizeof(struct cell *)); }
NOINLINE static struct cell *new_cell(long v, struct cell *next) {
  struct cell *c = malloc(sizeof *c);
  c->value = v;
  c->next = next;
  return c;
}
static long sum(const struct tree *t) { return t ? t->data->value + sum(t->left) + sum(t->right) : 0; }

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000;
  struct tree *root = NULL;
  for (long i = 0; i < n; i++) root = insert(root, (i * 7919) % n);
  struct cell **table = new_table();
  for (long i = 0; i < n; i++) table[i % 32] = new_cell(i, table[i % 32]);
  long s = sum(root);
  for (int k = 0; k < 32; k++)
    for (struct cell *c = table[k]; c; c = c->next) s += c->value;
  printf("dsgraph %ld checksum %ld\n", n, s);
  return 0;
}
