/* tokens: HALO's motivating pattern (Savage & Jones, CGO 2020, Figure 2).
 * Objects of three types come from type-specific constructors in one
 * interleaved loop; afterwards only two of the types are traversed, again and
 * again. The three types have the same size, so a general-purpose allocator
 * (glibc, or jemalloc's size classes) interleaves all three in memory and
 * every cache line the traversal fetches is one third cold data.
 * Usage: tokens N PASSES. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../prefetch.h"

#define NOINLINE __attribute__((noinline, noclone))

struct token { struct token *next; long kind, pos, len, spare[2]; };        /* 48 bytes */
struct attr { struct attr *next; long key, val, weight, pad[2]; };          /* 48 bytes */
struct note { struct note *next; char text[40]; };                          /* 48 bytes */

NOINLINE struct token *new_token(long i) {
  struct token *t = malloc(sizeof *t);
  t->next = NULL; t->kind = i % 7; t->pos = i; t->len = (i * 31) % 13;
  t->spare[0] = t->spare[1] = 0;
  return t;
}
NOINLINE struct attr *new_attr(long i) {
  struct attr *a = malloc(sizeof *a);
  a->next = NULL; a->key = i; a->val = (i * 17) % 101; a->weight = i & 3;
  a->pad[0] = a->pad[1] = 0;
  return a;
}
NOINLINE struct note *new_note(long i) {
  struct note *n = malloc(sizeof *n);
  n->next = NULL;
  snprintf(n->text, sizeof n->text, "note %ld", i);
  return n;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  int passes = argc > 2 ? atoi(argv[2]) : 5;
  struct token *th = NULL, **tt = &th;
  struct attr *ah = NULL, **at = &ah;
  struct note *nh = NULL, **nt = &nh;
  for (long i = 0; i < n; i++) {
    *tt = new_token(i); tt = &(*tt)->next;
    *at = new_attr(i); at = &(*at)->next;
    *nt = new_note(i); nt = &(*nt)->next;
  }
  unsigned long sum = 0;
  for (int p = 0; p < passes; p++) {
    struct token *t = th;
    struct attr *a = ah;
    for (; t && a; t = t->next, a = a->next) {
      PREFETCH_AHEAD(t);
      PREFETCH_AHEAD(a);
      sum += (unsigned long)(t->kind * a->val + t->len + a->weight + p);
    }
  }
  for (struct note *x = nh; x; x = x->next) sum += (unsigned char)x->text[5];
  while (th) { struct token *x = th->next; free(th); th = x; }
  while (ah) { struct attr *x = ah->next; free(ah); ah = x; }
  while (nh) { struct note *x = nh->next; free(nh); nh = x; }
  printf("tokens %ld passes %d checksum %lu\n", n, passes, sum);
  return 0;
}
