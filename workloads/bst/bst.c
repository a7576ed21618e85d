/* bst: random-key binary search tree, built in random order and searched
 * with random keys. Layout cannot make random lookups local, so this is the
 * case where Cohort must simply not slow the program down.
 * Usage: bst N LOOKUPS. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

struct node { struct node *left, *right; unsigned long key, value; };

static unsigned long rng = 88172645463325252ul;
static unsigned long next_rand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

NOINLINE static struct node *new_node(unsigned long key) {
  struct node *n = malloc(sizeof *n);
  if (!n) exit(1);
  n->left = n->right = NULL; n->key = key; n->value = key * 31;
  return n;
}

static struct node *insert(struct node *root, unsigned long key) {
  struct node **p = &root;
  while (*p) p = key < (*p)->key ? &(*p)->left : &(*p)->right;
  *p = new_node(key);
  return root;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000, lookups = argc > 2 ? atol(argv[2]) : 1000000;
  struct node *root = NULL;
  for (long i = 0; i < n; i++) root = insert(root, next_rand() % (unsigned long)(4 * n));
  unsigned long sum = 0, hits = 0;
  for (long q = 0; q < lookups; q++) {
    unsigned long key = next_rand() % (unsigned long)(4 * n);
    for (struct node *x = root; x; x = key < x->key ? x->left : x->right)
      if (x->key == key) { sum += x->value; hits++; break; }
  }
  printf("bst %ld %ld hits %lu checksum %lu\n", n, lookups, hits, sum);
  return 0;
}
