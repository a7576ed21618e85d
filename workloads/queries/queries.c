/* queries: a store whose input decides which of its structures is hot.
 *
 * N accounts go into a chained hash index, each with its name string; N
 * orders go into an ordered binary tree; a log record is made with each and
 * kept in an array that only the final tally reads. All four are made in
 * one loop, interleaved, so that without pools each structure's objects lie
 * among the others'. Then QUERIES queries run: MIX percent of them look up
 * a batch of 16 accounts by key (each through its bucket's chain, comparing
 * keys, then reading its name), the rest sum a range of 16 orders in key
 * order from a random key: about as many objects touched either way.
 *
 * A profile of an input with MIX 95 sees the accounts hot and the orders
 * nearly cold; one with MIX 5 the opposite; an input in between uses both.
 * The shape of a program whose inputs exercise different parts of it (an
 * interpreter's programs, a server's request mixes): a plan from one input
 * groups what that input uses, and profiles of several inputs merged
 * (`cohort merge`) see both (issue 80).
 *
 * Usage: queries N QUERIES MIX SEED. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
#define RANGE 16   /* orders a range query sums */
#define BATCH 16   /* accounts a lookup query reads */

struct account { unsigned long key, balance; struct account *next; char *name; char pad[16]; };
struct order { unsigned long key, amount; struct order *left, *right; char pad[16]; };
struct log { unsigned long seq, what; char text[32]; };

static unsigned long rng;
static unsigned long next_rand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) { fputs("queries: out of memory\n", stderr); exit(1); }
  return p;
}

NOINLINE static char *new_name(unsigned long key) {
  char buf[24];
  int len = snprintf(buf, sizeof buf, "acct-%lu", key);
  char *s = xmalloc((size_t)len + 1);
  memcpy(s, buf, (size_t)len + 1);
  return s;
}

NOINLINE static struct account *new_account(unsigned long key) {
  struct account *a = xmalloc(sizeof *a);
  a->key = key;
  a->balance = key % 1000;
  a->next = NULL;
  a->name = new_name(key);
  return a;
}

NOINLINE static struct order *new_order(unsigned long key) {
  struct order *o = xmalloc(sizeof *o);
  o->key = key;
  o->amount = key % 977;
  o->left = o->right = NULL;
  return o;
}

NOINLINE static struct log *new_log(unsigned long seq, unsigned long what) {
  struct log *l = xmalloc(sizeof *l);
  l->seq = seq;
  l->what = what;
  snprintf(l->text, sizeof l->text, "made %lu", what);
  return l;
}

static struct order *tree_insert(struct order *root, struct order *o) {
  struct order **p = &root;
  while (*p) p = o->key < (*p)->key ? &(*p)->left : &(*p)->right;
  *p = o;
  return root;
}

/* The sum of the amounts of up to RANGE orders from the first key >= from,
 * in key order (an iterative in-order walk with an explicit stack). */
static unsigned long range_sum(struct order *root, unsigned long from) {
  struct order *stack[128];
  int top = 0, left = RANGE;
  unsigned long sum = 0;
  struct order *x = root;
  while (x || top) {
    while (x) {
      if (x->key >= from) {
        if (top < 128) stack[top++] = x;
        x = x->left;
      } else {
        x = x->right;
      }
    }
    if (!top) break;
    x = stack[--top];
    sum += x->amount;
    if (--left == 0) break;
    x = x->right;
  }
  return sum;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fputs("usage: queries N QUERIES MIX SEED\n", stderr);
    return 2;
  }
  long n = atol(argv[1]), queries = atol(argv[2]), mix = atol(argv[3]);
  rng = 88172645463325252ul ^ ((unsigned long)atol(argv[4]) * 0x9e3779b97f4a7c15ul);
  if (n < 1 || queries < 0 || mix < 0 || mix > 100) {
    fputs("queries: N at least 1, QUERIES not negative, MIX 0 to 100\n", stderr);
    return 2;
  }
  unsigned long buckets = (unsigned long)n / 2 + 1;
  struct account **index = calloc(buckets, sizeof *index);
  struct log **logs = xmalloc(2 * (size_t)n * sizeof *logs);
  unsigned long *keys = xmalloc((size_t)n * sizeof *keys);
  struct order *tree = NULL;
  for (long i = 0; i < n; i++) {
    unsigned long k = next_rand() % (8 * (unsigned long)n);
    struct account *a = new_account(k);
    a->next = index[k % buckets];
    index[k % buckets] = a;
    keys[i] = k;
    logs[2 * i] = new_log((unsigned long)(2 * i), k);
    tree = tree_insert(tree, new_order(next_rand() % (8 * (unsigned long)n)));
    logs[2 * i + 1] = new_log((unsigned long)(2 * i + 1), k + 1);
  }
  unsigned long sum = 0, found = 0;
  for (long q = 0; q < queries; q++) {
    if ((long)(next_rand() % 100) < mix) {
      for (int b = 0; b < BATCH; b++) {
        unsigned long k = keys[next_rand() % (unsigned long)n];
        for (struct account *a = index[k % buckets]; a; a = a->next)
          if (a->key == k) {
            sum += a->balance + (unsigned char)a->name[5];
            found++;
            break;
          }
      }
    } else {
      sum += range_sum(tree, next_rand() % (8 * (unsigned long)n));
    }
  }
  unsigned long tally = 0;
  for (long i = 0; i < 2 * n; i++) tally += logs[i]->what + (unsigned char)logs[i]->text[0];
  printf("queries %ld %ld mix %ld found %lu checksum %lu %lu\n", n, queries, mix, found, sum, tally);
  return 0;
}
