/* allocbench: the runtime's own costs, in ns per operation.
 *   allocbench churn N        malloc+free pairs over a window of 1024 live
 *                             objects of 16..256 bytes
 *   allocbench sizes N LO HI malloc+free pairs over a window of 5,000 live
 *                             objects of LO..HI-1 bytes (larson's shape in
 *                             one thread: above 256 bytes, the group
 *                             allocator's mixed bins)
 *   allocbench bump N         N mallocs of 32 bytes, then N frees
 *   allocbench deep N DEPTH   N malloc+free pairs made DEPTH calls deep
 *   allocbench alt N DEPTH    the same, but alternating between two call
 *                             chains whose frames differ in size, so no two
 *                             consecutive allocations share a stack below
 *                             the outermost loop
 *   allocbench groups N G [W] churn over a window of W (default 1024) objects
 *                             of 16..256 bytes, three sizes per function,
 *                             the allocations made in turn by
 *                             G (1..64) functions group_alloc_00 .. _77 (two
 *                             octal digits), each its own call site of
 *                             malloc: a plan that names those sites spreads
 *                             the churn over G groups
 *   allocbench wrapper N      N malloc+free pairs of 48 bytes through the
 *                             program's own wrapper (xalloc) and a list-cell
 *                             helper (new_cell) that two kinds share
 *                             (make_red, make_blue, in turn): the kind is
 *                             told two frames past the entry, as HALO's
 *                             wrapper case
 *   allocbench calls N        N calls of a function that allocates
 *                             nothing, through one call site (run_calls's
 *                             call of tally): what a patched selector or
 *                             stop site adds to a call
 *   allocbench stream N G     as groups, but every request's size (16, 96
 *                             or 176 bytes) is drawn independently of the
 *                             function that makes it: the request stream
 *                             is the same whatever G, so that only the
 *                             spread over groups changes with G (groups's
 *                             sizes grow with G, and glibc's misses too)
 * Built -O2 without frame pointers, like stock binaries, so identification
 * must unwind through .eh_frame. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone))

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static volatile uintptr_t sink;

NOINLINE void *leaf_alloc(size_t n) {
  void *p = malloc(n);
  sink += (uintptr_t)p;
  return p;
}

NOINLINE long descend(int depth, long n) {
  if (depth > 1) {
    long r = descend(depth - 1, n);
    sink += (uintptr_t)r;   /* not a tail call: every level keeps its frame */
    return r + 1;
  }
  for (long i = 0; i < n; i++) free(leaf_alloc(48));
  return 0;
}

/* Two chains with different frame sizes: every frame of one lies at other
 * stack addresses than the matching frame of the other. */
NOINLINE long chain_a(int depth) {
  volatile long pad[2];
  pad[0] = depth;
  if (depth > 1) {
    long r = chain_a(depth - 1);
    sink += (uintptr_t)r;
    return r + pad[0];
  }
  free(leaf_alloc(48));
  return pad[0];
}

NOINLINE long chain_b(int depth) {
  volatile long pad[7];
  pad[0] = depth;
  if (depth > 1) {
    long r = chain_b(depth - 1);
    sink += (uintptr_t)r;
    return r + pad[0];
  }
  free(leaf_alloc(48));
  return pad[0];
}

NOINLINE double run_alt(long n, int depth) {
  double t0 = now();
  for (long i = 0; i < n; i++) sink += (uintptr_t)((i & 1) ? chain_a(depth) : chain_b(depth));
  return (now() - t0) / n;
}

/* Sixty-four allocating functions, each with its own call of malloc;
 * group_alloc[i] is group_alloc_ followed by i in two octal digits. */
#define GA(k) NOINLINE void *group_alloc_##k(size_t n) { void *p = malloc(n); sink += (uintptr_t)p; return p; }
#define GA8(k) GA(k##0) GA(k##1) GA(k##2) GA(k##3) GA(k##4) GA(k##5) GA(k##6) GA(k##7)
GA8(0) GA8(1) GA8(2) GA8(3) GA8(4) GA8(5) GA8(6) GA8(7)
#define GP(k) group_alloc_##k
#define GP8(k) GP(k##0), GP(k##1), GP(k##2), GP(k##3), GP(k##4), GP(k##5), GP(k##6), GP(k##7)
static void *(*const group_alloc[64])(size_t) = {GP8(0), GP8(1), GP8(2), GP8(3), GP8(4), GP8(5), GP8(6), GP8(7)};

NOINLINE double run_groups(long n, int groups, unsigned window, int same_stream) {
  void *win[1024] = {0};
  uint64_t x = 88172645463325252ull;
  unsigned k = 0;
  double t0 = now();
  for (long i = 0; i < n; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    unsigned s = (unsigned)(x & (window - 1));
    free(win[s]);
    /* three sizes per group, as an allocation context's objects come in few */
    size_t size = same_stream ? 16 + 80 * ((x >> 20) % 3) : 16 + 8 * ((k * 5 + (x >> 20) % 3) % 31);
    win[s] = group_alloc[k](size);
    *(char *)win[s] = (char)i;
    if (++k == (unsigned)groups) k = 0;
  }
  double ns = (now() - t0) / n;
  for (unsigned i = 0; i < window; i++) free(win[i]);
  return ns;
}

/* The wrapper case: every call keeps its frame (no tail calls), so the
 * kind is on the stack two frames out from malloc's caller. */
NOINLINE void *xalloc(size_t n) {
  void *p = malloc(n);
  if (!p) abort();
  sink += (uintptr_t)p;
  return p;
}

NOINLINE void *new_cell(size_t n) {
  void *p = xalloc(n);
  sink += 1;
  return p;
}

NOINLINE void *make_red(void) {
  void *p = new_cell(48);
  sink += 2;
  return p;
}

NOINLINE void *make_blue(void) {
  void *p = new_cell(48);
  sink += 3;
  return p;
}

NOINLINE double run_wrapper(long n) {
  double t0 = now();
  for (long i = 0; i < n; i++) free((i & 1) ? make_red() : make_blue());
  return (now() - t0) / n;
}

NOINLINE long tally(long i) {
  sink += (uintptr_t)i;
  return i & 1;
}

NOINLINE double run_calls(long n) {
  double t0 = now();
  long k = 0;
  for (long i = 0; i < n; i++) k += tally(i);
  sink += (uintptr_t)k;
  return (now() - t0) / n;
}

NOINLINE double run_deep(long n, int depth) {
  double t0 = now();
  descend(depth, n);
  return (now() - t0) / n;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: allocbench churn|sizes|bump|deep|alt|wrapper|calls|groups|stream N [DEPTH|GROUPS [WINDOW]|LO HI]\n"); return 2; }
  long n = atol(argv[2]);
  double ns = 0;
  if (!strcmp(argv[1], "churn")) {
    void *win[1024] = {0};
    uint64_t x = 88172645463325252ull;
    double t0 = now();
    for (long i = 0; i < n; i++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      unsigned s = (unsigned)(x & 1023);
      free(win[s]);
      win[s] = malloc(16 + (x >> 20) % 241);
      *(char *)win[s] = (char)i;
    }
    ns = (now() - t0) / n;
    for (int i = 0; i < 1024; i++) free(win[i]);
  } else if (!strcmp(argv[1], "sizes")) {
    long lo = argc > 3 ? atol(argv[3]) : 8, hi = argc > 4 ? atol(argv[4]) : 1000;
    if (lo < 1 || hi <= lo) { fprintf(stderr, "allocbench: sizes needs 1 <= LO < HI\n"); return 2; }
    enum { WINDOW = 5000 };
    static void *win[WINDOW];
    uint64_t x = 4141;
    double t0 = now();
    for (long i = 0; i < n; i++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      unsigned s = (unsigned)(x % WINDOW);
      free(win[s]);
      win[s] = malloc((size_t)(lo + (long)((x >> 20) % (uint64_t)(hi - lo))));
      *(char *)win[s] = (char)i;
    }
    ns = (now() - t0) / n;
    for (int i = 0; i < WINDOW; i++) free(win[i]);
  } else if (!strcmp(argv[1], "bump")) {
    void **v = malloc(sizeof *v * (size_t)n);
    double t0 = now();
    for (long i = 0; i < n; i++) { v[i] = malloc(32); *(char *)v[i] = 1; }
    ns = (now() - t0) / n;
    for (long i = 0; i < n; i++) free(v[i]);
    free(v);
  } else if (!strcmp(argv[1], "deep")) {
    ns = run_deep(n, argc > 3 ? atoi(argv[3]) : 15);
  } else if (!strcmp(argv[1], "alt")) {
    ns = run_alt(n, argc > 3 ? atoi(argv[3]) : 15);
  } else if (!strcmp(argv[1], "wrapper")) {
    ns = run_wrapper(n);
  } else if (!strcmp(argv[1], "calls")) {
    ns = run_calls(n);
  } else if (!strcmp(argv[1], "groups") || !strcmp(argv[1], "stream")) {
    int g = argc > 3 ? atoi(argv[3]) : 1;
    unsigned w = argc > 4 ? (unsigned)atoi(argv[4]) : 1024;
    if (g < 1 || g > 64) { fprintf(stderr, "allocbench: %s takes 1..64 groups\n", argv[1]); return 2; }
    if (w < 1 || w > 1024 || (w & (w - 1))) { fprintf(stderr, "allocbench: the window is a power of two up to 1024\n"); return 2; }
    ns = run_groups(n, g, w, !strcmp(argv[1], "stream"));
  } else {
    fprintf(stderr, "allocbench: unknown test %s\n", argv[1]);
    return 2;
  }
  printf("%s %.2f ns/op\n", argv[1], ns);
  return 0;
}
