/* A hint that holds, then stops holding (tests/integration/test_dpa.py). main's call of
 * make_a() ends group A's chain, and main allocates the B objects itself.
 * main's call is indirect, so no hint can name B's group. In the first phase every call of make_a allocates, so A's hint (on that
 * call) is checked and comes to be trusted. In the second, make_a allocates
 * on odd rounds only: on even rounds the hint its call set is still there
 * when main allocates a B object, and a check of it finds B's pool, not A's,
 * which ends the trust. Every object stays live to the end.
 * Usage: trusthint COUNT; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

struct a { struct a *next; long v; };
struct b { struct b *next; long v[5]; };
static void *(*volatile alloc_b)(size_t) = malloc;   /* an indirect call: never patched */

static __attribute__((noipa)) void *xalloc(size_t n) {
  void *p = malloc(n);
  if (!p) abort();
  return p;
}

static __attribute__((noipa)) struct a *make_a(long i, int lazy) {
  if (lazy && (i & 1) == 0) return NULL;
  struct a *o = xalloc(sizeof *o);
  o->v = i;
  return o;
}

int main(int argc, char **argv) {
  long count = argc > 1 ? atol(argv[1]) : 100000, sum = 0;
  struct a *la = NULL;
  struct b *lb = NULL;
  for (int phase = 0; phase < 2; phase++) {
    for (long i = 0; i < count; i++) {
      struct a *o = make_a(i, phase);
      if (o) { o->next = la; la = o; }
      struct b *b = alloc_b(sizeof *b);
      if (!b) abort();
      b->v[0] = i * 3 + phase;
      b->next = lb;
      lb = b;
    }
  }
  for (struct a *o = la, *next; o; o = next) { next = o->next; sum += o->v; free(o); }
  for (struct b *o = lb, *next; o; o = next) { next = o->next; sum += o->v[0]; free(o); }
  printf("%ld\n", sum);
  return 0;
}
