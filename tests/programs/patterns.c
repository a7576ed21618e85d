/* Heap access patterns with known affinity graphs, for the profiler's tests.
 * `patterns MODE [N]`; each constructor below is one allocation context.
 *
 *   alternate  a and b nodes allocated interleaved, the two lists walked in step
 *   separate   all a nodes, then all b nodes (so no a,b pair is co-allocatable),
 *              walked in step
 *   self       one a object and one b object, read alternately many times
 *   wrapper    a and b through one malloc wrapper, allocated interleaved, walked
 *   recursive  chains built by a recursive function, then walked
 *   cold       alternate, plus a c list that gets under 1% of the accesses
 *   threads    two threads at once: one alternates a/b, the other c/d
 *   wide       alternate, with nodes of 256 bytes touched at their heads only
 *   globals    alternate, then a global array of 1 MiB walked far more often
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

struct node {
  struct node *next;
  long val;
  long pad[2];
};

static volatile long sink;
static long table[1 << 17];   /* 1 MiB: globals, not heap */

NOINLINE static struct node *fill(struct node *n, long i) {
  if (!n) abort();
  n->next = NULL;
  n->val = i;
  n->pad[0] = n->pad[1] = 0;
  return n;
}
NOINLINE struct node *new_a(long i) { return fill(malloc(sizeof(struct node)), i); }
NOINLINE struct node *new_b(long i) { return fill(malloc(sizeof(struct node)), i); }
NOINLINE struct node *new_c(long i) { return fill(malloc(sizeof(struct node)), i); }
NOINLINE struct node *new_d(long i) { return fill(malloc(sizeof(struct node)), i); }
/* Nodes of 256 bytes whose first 32 alone are ever touched. */
NOINLINE struct node *new_wide_a(long i) { return fill(malloc(256), i); }
NOINLINE struct node *new_wide_b(long i) { return fill(malloc(256), i); }

NOINLINE void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) abort();
  return p;
}
NOINLINE struct node *wrapped_a(long i) { return fill(xmalloc(sizeof(struct node)), i); }
NOINLINE struct node *wrapped_b(long i) { return fill(xmalloc(sizeof(struct node)), i); }

NOINLINE struct node *build_rec(int depth) {
  struct node *n = fill(malloc(sizeof(struct node)), depth);
  if (depth > 0) n->next = build_rec(depth - 1);
  return n;
}

typedef struct node *(*ctor)(long);

/* One call in ten allocates: the call of maybe_new in sparse runs ten
 * times as often as it leads to an allocation. */
NOINLINE static struct node *maybe_new(long i) { return i % 10 ? NULL : new_a(i); }
NOINLINE static struct node *sparse(long n) {
  struct node *head = NULL;
  for (long i = 0; i < 10 * n; i++) {
    struct node *x = maybe_new(i);
    if (x) { x->next = head; head = x; }
  }
  return head;
}

/* Two lists built interleaved (x0 y0 x1 y1 ...) or one after the other. */
NOINLINE static void build2(ctor fx, ctor fy, long n, int interleaved, struct node **xs, struct node **ys) {
  struct node **xt = xs, **yt = ys;
  if (interleaved) {
    for (long i = 0; i < n; i++) {
      *xt = fx(i); xt = &(*xt)->next;
      *yt = fy(i); yt = &(*yt)->next;
    }
  } else {
    for (long i = 0; i < n; i++) { *xt = fx(i); xt = &(*xt)->next; }
    for (long i = 0; i < n; i++) { *yt = fy(i); yt = &(*yt)->next; }
  }
}

NOINLINE static long walk2(struct node *x, struct node *y, int passes) {
  long s = 0;
  for (int p = 0; p < passes; p++)
    for (struct node *a = x, *b = y; a && b; a = a->next, b = b->next) s += a->val + b->val;
  return s;
}

NOINLINE static long walk1(struct node *x) {
  long s = 0;
  for (; x; x = x->next) s += x->val;
  return s;
}

static void free_list(struct node *x) {
  while (x) { struct node *n = x->next; free(x); x = n; }
}

struct job { ctor fx, fy; long n; long sum; };

static pthread_barrier_t barrier;

static void *thread_main(void *arg) {
  struct job *j = arg;
  struct node *xs = NULL, *ys = NULL;
  pthread_barrier_wait(&barrier);
  build2(j->fx, j->fy, j->n, 1, &xs, &ys);
  j->sum = walk2(xs, ys, 20);
  free_list(xs);
  free_list(ys);
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "alternate";
  long n = argc > 2 ? atol(argv[2]) : 2000;
  struct node *xs = NULL, *ys = NULL, *cs = NULL;
  long sum = 0;
  if (!strcmp(mode, "alternate") || !strcmp(mode, "cold")) {
    build2(new_a, new_b, n, 1, &xs, &ys);
    sum = walk2(xs, ys, 10);
    if (!strcmp(mode, "cold")) {
      struct node **ct = &cs;
      for (long i = 0; i < n / 20; i++) { *ct = new_c(i); ct = &(*ct)->next; }
      sum += walk1(cs);
    }
  } else if (!strcmp(mode, "globals")) {
    build2(new_a, new_b, n, 1, &xs, &ys);
    sum = walk2(xs, ys, 2);
    for (int p = 0; p < 40; p++)
      for (long i = 0; i < (1 << 17); i += 8) sum += table[i] += i;
  } else if (!strcmp(mode, "wide")) {
    build2(new_wide_a, new_wide_b, n, 1, &xs, &ys);
    sum = walk2(xs, ys, 10);
  } else if (!strcmp(mode, "sparse")) {
    xs = sparse(n);
    sum = walk1(xs) + walk1(xs);
  } else if (!strcmp(mode, "separate")) {
    build2(new_a, new_b, n, 0, &xs, &ys);
    sum = walk2(xs, ys, 10);
  } else if (!strcmp(mode, "self")) {
    volatile struct node *a = new_a(1), *b = new_b(2);
    for (long i = 0; i < n * 10; i++) sum += a->val + b->val;
    free((void *)a);
    free((void *)b);
  } else if (!strcmp(mode, "wrapper")) {
    build2(wrapped_a, wrapped_b, n, 1, &xs, &ys);
    sum = walk2(xs, ys, 10);
  } else if (!strcmp(mode, "recursive")) {
    for (long r = 0; r < n / 50; r++) {
      struct node *c = build_rec(49);
      sum += walk1(c) + walk1(c);
      free_list(c);
    }
  } else if (!strcmp(mode, "threads")) {
    struct job j1 = {new_a, new_b, n, 0}, j2 = {new_c, new_d, n, 0};
    pthread_t t1, t2;
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_create(&t1, NULL, thread_main, &j1);
    pthread_create(&t2, NULL, thread_main, &j2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    sum = j1.sum + j2.sum;
  } else {
    fprintf(stderr, "patterns: unknown mode %s\n", mode);
    return 2;
  }
  sink = sum;
  free_list(xs);
  free_list(ys);
  free_list(cs);
  printf("%s %ld %ld\n", mode, n, sum);
  return 0;
}
