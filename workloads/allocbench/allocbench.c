/* allocbench: the runtime's own costs, in ns per operation.
 *   allocbench churn N        malloc+free pairs over a window of 1024 live
 *                             objects of 16..256 bytes
 *   allocbench bump N         N mallocs of 32 bytes, then N frees
 *   allocbench deep N DEPTH   N malloc+free pairs made DEPTH calls deep
 *   allocbench alt N DEPTH    the same, but alternating between two call
 *                             chains whose frames differ in size, so no two
 *                             consecutive allocations share a stack below
 *                             the outermost loop
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

NOINLINE double run_deep(long n, int depth) {
  double t0 = now();
  descend(depth, n);
  return (now() - t0) / n;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: allocbench churn|bump|deep|alt N [DEPTH]\n"); return 2; }
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
  } else {
    fprintf(stderr, "allocbench: unknown test %s\n", argv[1]);
    return 2;
  }
  printf("%s %.2f ns/op\n", argv[1], ns);
  return 0;
}
