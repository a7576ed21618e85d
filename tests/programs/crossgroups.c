/* Groups that neither call of their chain tells alone (tests/integration/test_dpa.py):
 * build() calls the constructor make() at three places, and make() calls
 * the allocator's wrapper xalloc() at two, one per kind, so each of the six
 * groups is a (make's call, build's call) pair. Each call of build's ends
 * two groups' chains and each of make's is in three, so DPA's hint at a
 * chain's outermost call names one group of two, and the call one frame in
 * names the chain's prefix. Every object stays live to the end.
 * Usage: crossgroups COUNT; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

struct obj { struct obj *next; long a; int kind; };

static __attribute__((noipa)) void *xalloc(size_t n) {
  void *p = malloc(n);
  if (!p) abort();
  return p;
}

static __attribute__((noipa)) struct obj *make(int kind, long v) {
  struct obj *o;
  if (kind == 0) {
    o = xalloc(sizeof *o);
    o->a = v;
  } else {
    o = xalloc(sizeof *o + 16);
    o->a = -v;
  }
  o->kind = kind;
  return o;
}

static struct obj *push(struct obj *list, struct obj *o) {
  o->next = list;
  return o;
}

static __attribute__((noipa)) void build(long count, struct obj **lists) {
  for (long i = 0; i < count; i++) {
    lists[0] = push(lists[0], make((int)(i & 1), i));
    lists[1] = push(lists[1], make((int)(i & 1), i * 2));
    lists[2] = push(lists[2], make((int)(i & 1), i * 3));
  }
}

int main(int argc, char **argv) {
  long count = argc > 1 ? atol(argv[1]) : 100000, sum = 0;
  struct obj *lists[3] = {NULL, NULL, NULL};
  build(count, lists);
  for (int l = 0; l < 3; l++) {
    for (struct obj *o = lists[l], *next; o; o = next) {
      next = o->next;
      sum += o->a * (l + 1) + o->kind;
      free(o);
    }
  }
  printf("%ld\n", sum);
  return 0;
}
