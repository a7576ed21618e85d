/* Type-specific constructors and a shared allocation wrapper. Each fills its
 * object so the program's checksum covers the data. */
#include <stdlib.h>
#include <string.h>

#include "groups.h"

struct a { struct a *next; long v; long w[2]; };        /* 32 bytes */
struct b { struct b *next; long v; long w[4]; };        /* 48 bytes */
struct c { long v; long w; char tag[8]; };               /* 24 bytes */

NOINLINE void *make_a(int i) {
  struct a *p = malloc(sizeof *p);
  p->next = NULL; p->v = i; p->w[0] = i * 3; p->w[1] = i ^ 5;
  return p;
}
NOINLINE void *make_b(int i) {
  struct b *p = malloc(sizeof *p);
  p->next = NULL; p->v = i * 7;
  for (int k = 0; k < 4; k++) p->w[k] = i + k;
  return p;
}
NOINLINE void *make_c(int i) {
  struct c *p = malloc(sizeof *p);
  p->v = i; p->w = -i; memcpy(p->tag, "cccccc", 7);
  return p;
}
NOINLINE static void *wrap(size_t n, int fill) {
  void *p = malloc(n);
  if (!p) abort();
  memset(p, fill, n);
  return p;
}
NOINLINE void *via_wrap_1(int i) {
  unsigned char *p = wrap(40, 1);
  p[0] = (unsigned char)i;
  return p;
}
NOINLINE void *via_wrap_2(int i) {
  unsigned char *p = wrap(40, 2);
  p[0] = (unsigned char)(i + 1);
  return p;
}
unsigned long checksum_a(const void *p) { const struct a *a = p; return (unsigned long)(a->v + a->w[0] + a->w[1]); }
unsigned long checksum_b(const void *p) { const struct b *b = p; return (unsigned long)(b->v + b->w[3]); }
unsigned long checksum_c(const void *p) { const struct c *c = p; return (unsigned long)(c->v + c->w + c->tag[2]); }
