/* The rest pool's two shapes, each the better one for one access pattern
 * (tests/integration/test_rest_classes.py; profiler/layouts.c models both).
 *   restshapes walk   a list of 32-byte nodes, each allocated beside a
 *                     208-byte payload that is written once and never read
 *                     again, walked 20 times: by size class the nodes pack
 *                     two to a line; in one pool each has a line or more.
 *   restshapes pairs  16-byte entries, each allocated beside the 48-byte key
 *                     it points to, visited 20 times in a shuffled order: in
 *                     one pool an entry and its key share one line; by size
 *                     class they take two or three.
 *   restshapes large  1000-byte records, each allocated beside a 32-byte
 *                     node, read 20 times: the split model places the
 *                     records in their own class (a power of two), the
 *                     single pool leaves them where they are.
 * stdout: a checksum that does not depend on where objects live. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone, noipa))
#define N 4000
#define PASSES 20

struct node { struct node *next; char *payload; long value; long pad; };
struct entry { char *key; long value; };

NOINLINE void *make(size_t n) {
  void *p = malloc(n);
  if (!p) abort();
  memset(p, 1, n);
  return p;
}

static uint64_t rnd(uint64_t *x) {
  *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
  return *x;
}

int main(int argc, char **argv) {
  long sum = 0;
  if (argc == 2 && !strcmp(argv[1], "walk")) {
    struct node *head = NULL;
    for (long i = 0; i < N; i++) {
      struct node *n = make(sizeof *n);
      n->payload = make(208);
      n->value = i;
      n->next = head;
      head = n;
    }
    for (int p = 0; p < PASSES; p++)
      for (struct node *n = head; n; n = n->next) sum += n->value;
  } else if (argc == 2 && !strcmp(argv[1], "pairs")) {
    static struct entry *table[N];
    for (long i = 0; i < N; i++) {
      table[i] = make(sizeof *table[i]);
      table[i]->key = make(48);
      table[i]->key[0] = (char)i;
      table[i]->value = i;
    }
    uint64_t x = 88172645463325252ull;
    for (long i = N - 1; i > 0; i--) {
      long j = (long)(rnd(&x) % (uint64_t)(i + 1));
      struct entry *t = table[i]; table[i] = table[j]; table[j] = t;
    }
    for (int p = 0; p < PASSES; p++)
      for (long i = 0; i < N; i++) sum += table[i]->value + table[i]->key[0];
  } else if (argc == 2 && !strcmp(argv[1], "large")) {
    static char *records[N];
    static struct node *nodes[N];
    for (long i = 0; i < N; i++) {
      records[i] = make(1000);
      nodes[i] = make(sizeof *nodes[i]);
      records[i][0] = (char)i;
    }
    for (int p = 0; p < PASSES; p++)
      for (long i = 0; i < N; i++) sum += records[i][0] + nodes[i]->value;
  } else {
    fprintf(stderr, "usage: restshapes walk|pairs|large\n");
    return 2;
  }
  printf("%ld\n", sum);
  return 0;
}
