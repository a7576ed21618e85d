/* bintree: a binary tree built depth-first by one recursive function that
 * calls malloc itself, so the nodes of one tree come from as many call
 * stacks as the recursion has orders. While it builds, the program logs
 * about every fourth node: a small record made by a logging function and
 * kept on a list that is read once, at the end of the round. The tree is
 * then walked many times (a sum, and an update of every value), and freed
 * with its log. Several rounds, each a new tree.
 * Usage: bintree DEPTH WALKS ROUNDS SEED. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

struct node { struct node *left, *right; long value, depth; };          /* 32 bytes */
struct record { struct record *next; long serial; char text[32]; };     /* 48 bytes */

static unsigned long rng;
static unsigned long next_rand(void) {
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
  return rng;
}

static struct record *log_head;
static long log_count;

NOINLINE static void log_event(int depth, long value) {
  struct record *r = malloc(sizeof *r);
  if (!r) exit(1);
  r->serial = log_count++;
  snprintf(r->text, sizeof r->text, "node d=%d v=%ld", depth, value);
  r->next = log_head;
  log_head = r;
}

NOINLINE static struct node *build(int d) {
  struct node *n = malloc(sizeof *n);
  if (!n) exit(1);
  n->value = (long)(next_rand() % 1000);
  n->depth = d;
  if (next_rand() % 4 == 0) log_event(d, n->value);
  n->left = d > 0 ? build(d - 1) : NULL;
  n->right = d > 0 ? build(d - 1) : NULL;
  return n;
}

static long sum(const struct node *n) {
  long s = 0;
  for (; n; n = n->right) s += n->value + sum(n->left);
  return s;
}

static void update(struct node *n, long k) {
  for (; n; n = n->right) {
    n->value = (n->value * 5 + k + n->depth) % 1009;
    update(n->left, k);
  }
}

static void release(struct node *n) {
  while (n) {
    struct node *r = n->right;
    release(n->left);
    free(n);
    n = r;
  }
}

int main(int argc, char **argv) {
  int depth = argc > 1 ? atoi(argv[1]) : 16;
  int walks = argc > 2 ? atoi(argv[2]) : 10;
  int rounds = argc > 3 ? atoi(argv[3]) : 2;
  rng = argc > 4 ? strtoul(argv[4], NULL, 10) : 1;
  if (rng == 0) rng = 88172645463325252ul;
  unsigned long check = 0;
  for (int r = 0; r < rounds; r++) {
    struct node *root = build(depth);
    for (int w = 0; w < walks; w++) {
      check = check * 31 + (unsigned long)sum(root);
      update(root, w + r);
    }
    check = check * 31 + (unsigned long)sum(root);
    long chars = 0;
    while (log_head) {
      struct record *next = log_head->next;
      chars += (long)strlen(log_head->text) + log_head->serial % 7;
      free(log_head);
      log_head = next;
    }
    check = check * 31 + (unsigned long)chars;
    release(root);
  }
  printf("bintree %d %d %d logged %ld checksum %lu\n", depth, walks, rounds, log_count, check);
  return 0;
}
