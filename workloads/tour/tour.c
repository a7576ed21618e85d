/* tour: a big build, then walks (Olden tsp's shape). One phase allocates a
 * balanced tree of N cities, each a small node with a random point in its
 * subtree's rectangle, depth first by one recursive function; nothing is
 * freed until the end. Then the cities are linked into a tour: each
 * subtree's tour is built from its children's, the two joined next to the
 * city of each nearest the parent, which walks the lists in tour order (not
 * allocation order). The whole tour is then walked PASSES times, its length
 * summed, and the tree freed.
 *
 * Where the nodes lie within their cache lines decides the walks' time
 * (docs/runtime.md, "A big build walked out of allocation order"): with a
 * fourth argument, `lines`, the program prints instead, for each offset
 * within a line that its 64-byte blocks could start at, what a simulated
 * D1 (32 KiB, 8-way, LRU) misses on PASSES walks when the nodes lie one
 * per block in allocation order: every line a step reads (the coordinates
 * and the `next` pointer), and how many of those are the line of `next`,
 * the load the following step waits for.
 * Usage: tour N PASSES SEED [lines]. Prints a checksum. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

struct city {                          /* 56 bytes */
  double x, y;
  struct city *left, *right;
  struct city *next, *prev;            /* the tour: a circular doubly linked list */
  long size;                           /* cities in this subtree */
};

static unsigned long rng;
static double uniform(void) {
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

/* n cities in the rectangle [x0, x1) x [y0, y1), split across its longer
 * side, the root first (preorder, as the program allocates them). */
NOINLINE static struct city *build(long n, double x0, double x1, double y0, double y1) {
  if (n <= 0) return NULL;
  struct city *c = malloc(sizeof *c);
  if (!c) { perror("tour: malloc"); exit(1); }
  c->x = x0 + (x1 - x0) * uniform();
  c->y = y0 + (y1 - y0) * uniform();
  c->size = n;
  c->next = c->prev = c;
  long left = (n - 1) / 2;
  if (x1 - x0 >= y1 - y0) {
    double mid = (x0 + x1) / 2;
    c->left = build(left, x0, mid, y0, y1);
    c->right = build(n - 1 - left, mid, x1, y0, y1);
  } else {
    double mid = (y0 + y1) / 2;
    c->left = build(left, x0, x1, y0, mid);
    c->right = build(n - 1 - left, x0, x1, mid, y1);
  }
  return c;
}

static double dist(const struct city *a, const struct city *b) {
  double dx = a->x - b->x, dy = a->y - b->y;
  return sqrt(dx * dx + dy * dy);
}

/* The city of a tour nearest to p: a walk round the whole tour. */
static struct city *nearest(struct city *t, const struct city *p) {
  struct city *best = t;
  double d = dist(t, p);
  for (struct city *c = t->next; c != t; c = c->next) {
    double e = dist(c, p);
    if (e < d) { d = e; best = c; }
  }
  return best;
}

/* Splice the tour b into the tour a, after a's city at: at -> b's ring from
 * from round to from's predecessor -> at's old successor. */
static void splice(struct city *at, struct city *from) {
  struct city *after = at->next, *last = from->prev;
  at->next = from; from->prev = at;
  last->next = after; after->prev = last;
}

/* The tour of c's subtree, returned as one of its cities. Subtrees of up
 * to `walk` cities are joined by walking both children's tours for the
 * cities nearest c; larger ones join at the children's roots, so that the
 * walks stay a bounded multiple of N. */
NOINLINE static struct city *link_tour(struct city *c, long walk) {
  if (!c) return NULL;
  struct city *l = link_tour(c->left, walk), *r = link_tour(c->right, walk);
  if (l) {
    struct city *at = c->size <= walk ? nearest(l, c) : l;
    splice(at, c);
  }
  if (r) {
    struct city *from = c->size <= walk ? nearest(r, c) : r;
    splice(c, from);
  }
  return c;
}

static void destroy(struct city *c) {
  if (!c) return;
  destroy(c->left);
  destroy(c->right);
  free(c);
}

/* `lines`: the simulation. Each node's place in allocation order (preorder,
 * as build allocates) is kept in its size field, which the tour no longer
 * needs. */
static long placed;
static void number(struct city *c) {
  if (!c) return;
  c->size = placed++;
  number(c->left);
  number(c->right);
}
#define SETS 64
#define WAYS 8
static unsigned long tags[SETS][WAYS];   /* line + 1, most recent first */
static int misses(unsigned long line) {
  unsigned long *t = tags[line % SETS];
  int w = 0;
  while (w < WAYS - 1 && t[w] != line + 1) w++;
  int missed = t[w] != line + 1;
  memmove(t + 1, t, (size_t)w * sizeof *t);
  t[0] = line + 1;
  return missed;
}
static void simulate(struct city *t, long passes) {   /* t: the root, where the tour starts */
  const unsigned long coords = offsetof(struct city, x), link = offsetof(struct city, next);
  number(t);
  for (unsigned long off = 0; off < 64; off += 16) {
    memset(tags, 0, sizeof tags);
    long data = 0, chase = 0, steps = 0;
    for (long p = 0; p < passes; p++) {
      struct city *c = t;
      do {
        unsigned long a = (unsigned long)c->next->size * 64 + off;
        chase += misses((a + link) / 64);   /* first: what the next step waits for */
        data += misses((a + coords) / 64) | misses((a + coords + 15) / 64);
        steps++;
        c = c->next;
      } while (c != t);
    }
    printf("offset %2lu: per step %.3f lines missed, %.3f of them the line of next, which the next step "
           "waits for\n", off, (double)(data + chase) / steps, (double)chase / steps);
  }
}

int main(int argc, char **argv) {
  if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "lines"))) {
    fprintf(stderr, "usage: tour N PASSES SEED [lines]\n");
    return 2;
  }
  long n = atol(argv[1]), passes = atol(argv[2]);
  rng = strtoul(argv[3], NULL, 10) * 2654435761ul + 88172645463325252ul;
  if (n < 1 || passes < 1) {
    fprintf(stderr, "tour: N and PASSES must be at least 1\n");
    return 2;
  }
  struct city *root = build(n, 0, 1, 0, 1);
  struct city *t = link_tour(root, 64);
  if (argc == 5) {
    simulate(t, passes);   /* the tour starts at the root */
    return 0;
  }
  double length = 0;
  long visited = 0;
  for (long p = 0; p < passes; p++) {
    struct city *c = t;
    do {
      length += dist(c, c->next);
      visited++;
      c = c->next;
    } while (c != t);
  }
  /* The tour's order, and so its length, does not depend on addresses. */
  printf("cities %ld visited %ld length %.6f checksum %lld\n", n, visited, length, llround(length * 1e6));
  destroy(root);
  return 0;
}
