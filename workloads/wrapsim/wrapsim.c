/* wrapsim: a recursive simulation of a tree of depots (four children each,
 * DEPTH levels below the root) whose every allocation goes through the
 * program's own allocation layer: xmalloc, and one list-cell helper (push)
 * that every list shares. So the innermost frames of every allocation are
 * the same few call sites, the call site that tells one list from another
 * is three or four frames out, and the recursion over the tree puts about
 * DEPTH more frames below that. Each depot has three lists of parcels: a
 * queue (walked every step to find the heaviest parcel), a sorted-out list
 * (walked every few steps) and a journal (written, rarely read). Each step
 * the recursion visits every depot, children first: parcels arrive on the
 * queue, the heaviest are moved to the sorted-out list (popped and pushed
 * again: a free and a malloc), the sorted-out list is trimmed, and a few
 * parcels travel to the parent's queue. Millions of small mallocs and frees.
 * Usage: wrapsim DEPTH STEPS SEED. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

struct cell { struct cell *next; long weight, origin, age; };   /* 32 bytes */
struct list { struct cell *head; long n; };
struct depot {
  struct depot *kid[4], *up;
  struct list queue, sorted, journal;
  long level, handled;
};

static unsigned long rng;
static long next_rand(long n) {
  rng = rng * 6364136223846793005ul + 1442695040888963407ul;
  return (long)((rng >> 33) % (unsigned long)n);
}
static long now;

/* The program's allocation layer. */
NOINLINE static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) { fputs("wrapsim: out of memory\n", stderr); exit(1); }
  return p;
}
NOINLINE static struct cell *cell_new(long weight, long origin) {
  struct cell *c = xmalloc(sizeof *c);
  c->weight = weight; c->origin = origin; c->age = now;
  return c;
}
NOINLINE static void push(struct list *l, long weight, long origin) {
  struct cell *c = cell_new(weight, origin);
  c->next = l->head;
  l->head = c;
  l->n++;
}
/* Unlink the cell after prev (or the head), free it, return its weight. */
NOINLINE static long take(struct list *l, struct cell *prev) {
  struct cell *c = prev ? prev->next : l->head;
  if (prev) prev->next = c->next; else l->head = c->next;
  l->n--;
  long w = c->weight;
  free(c);
  return w;
}

NOINLINE static struct depot *build(struct depot *up, int depth, long level) {
  struct depot *d = xmalloc(sizeof *d);
  d->up = up; d->level = level; d->handled = 0;
  d->queue.head = d->sorted.head = d->journal.head = NULL;
  d->queue.n = d->sorted.n = d->journal.n = 0;
  for (int k = 0; k < 4; k++) d->kid[k] = depth > 0 ? build(d, depth - 1, level + 1) : NULL;
  return d;
}

NOINLINE static void arrive(struct depot *d) {
  long n = 1 + next_rand(3);
  for (long i = 0; i < n; i++) push(&d->queue, 1 + next_rand(1000), d->level);
}

/* Walk the queue for its heaviest parcel and move it to the sorted list. */
NOINLINE static void sort_out(struct depot *d) {
  for (int round = 0; round < 2 && d->queue.head; round++) {
    struct cell *best_prev = NULL, *prev = NULL;
    long best = -1;
    for (struct cell *c = d->queue.head; c; prev = c, c = c->next)
      if (c->weight > best) { best = c->weight; best_prev = prev; }
    long w = take(&d->queue, best_prev);
    push(&d->sorted, w, d->level);
  }
}

NOINLINE static void note(struct depot *d, long what) {
  push(&d->journal, what, now);
  if (d->journal.n > 64) {   /* drop the oldest half */
    struct cell *c = d->journal.head;
    for (int i = 1; i < 32; i++) c = c->next;
    while (c->next) take(&d->journal, c);
  }
}

/* Every few steps: ship the lightest sorted parcels to the parent (or out). */
NOINLINE static long ship(struct depot *d) {
  long shipped = 0, sum = 0;
  for (struct cell *c = d->sorted.head; c; c = c->next) sum += c->weight;
  while (d->sorted.n > 6) {
    long w = take(&d->sorted, NULL);
    if (d->up && next_rand(4) == 0) push(&d->up->queue, w / 2 + 1, d->level);
    shipped += w;
  }
  return shipped + sum % 7;
}

NOINLINE static long step(struct depot *d) {
  long check = 0;
  for (int k = 0; k < 4; k++)
    if (d->kid[k]) check += step(d->kid[k]);
  arrive(d);
  sort_out(d);
  if (now % 3 == 0) check += ship(d);
  if (next_rand(8) == 0) note(d, check);
  /* keep the queue from growing without bound */
  while (d->queue.n > 24) check += take(&d->queue, NULL);
  d->handled++;
  return check;
}

int main(int argc, char **argv) {
  int depth = argc > 1 ? atoi(argv[1]) : 6;
  long steps = argc > 2 ? atol(argv[2]) : 100;
  rng = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
  struct depot *root = build(NULL, depth, 0);
  unsigned long check = 0;
  for (now = 0; now < steps; now++) check = check * 31 + (unsigned long)step(root);
  printf("wrapsim %d %ld checksum %lu\n", depth, steps, check);
  return 0;
}
