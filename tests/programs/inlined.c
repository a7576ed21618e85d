/* Two lists built by one inlined helper called twice on one source line of
 * main, at -O2: without inline information and offsets the two allocation
 * sites read the same, "main (inlined.c:N)". Each list is then walked on its
 * own, so a plan gives each its own group; a record of their size, made
 * beside each pair and never read again, is what those groups take their
 * nodes away from. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

/* Of one size, so that size classes alone do not keep them apart. */
struct a { struct a *next; long v; char pad[40]; };
struct b { struct b *next; long v; char pad[40]; };
struct c { struct c *next; long v; char pad[40]; };

static inline void *new_node(size_t n) {
  void *p = malloc(n);
  if (!p) abort();
  return p;
}
#define NEW(T) ((T *)new_node(sizeof(T)))

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000, s = 0;
  struct a *la = NULL;
  struct b *lb = NULL;
  struct c *lc = NULL;
  for (long i = 0; i < n; i++) {
    struct a *x = NEW(struct a); struct b *y = NEW(struct b);
    x->v = i; x->next = la; la = x;
    y->v = 2 * i; y->next = lb; lb = y;
    struct c *z = malloc(sizeof *z);
    if (!z) abort();
    z->v = i; z->next = lc; lc = z;
  }
  for (int r = 0; r < 20; r++)
    for (struct a *x = la; x; x = x->next) s += x->v;
  for (int r = 0; r < 20; r++)
    for (struct b *y = lb; y; y = y->next) s += y->v;
  printf("checksum %ld\n", s);
  return 0;
}
