/* poolbench: what a pool's object costs beside malloc's.
 *
 *   poolbench churn  pool|malloc SIZE N   N rounds of: 100 objects of SIZE
 *                                          bytes allocated, each written,
 *                                          then all freed in turn; prints
 *                                          ns per object (allocation + free)
 *   poolbench release pool|malloc SIZE N  N objects allocated, then all
 *                                          released: one pooldestroy, or N
 *                                          frees; prints the release's ns
 *
 * Not linked with libcohort: the pool functions are weak references, so the
 * malloc runs measure the C library (or a preloaded allocator) alone, and
 * the pool runs need libcohort.so preloaded. scripts/bench-pools.py runs it. */
#define _GNU_SOURCE
#include <cohort/pool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#pragma weak poolinit
#pragma weak poolalloc
#pragma weak poolfree
#pragma weak pooldestroy

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

#define BATCH 100

int main(int argc, char **argv) {
  if (argc != 5 || (strcmp(argv[1], "churn") && strcmp(argv[1], "release")) ||
      (strcmp(argv[2], "pool") && strcmp(argv[2], "malloc"))) {
    fprintf(stderr, "usage: poolbench churn|release pool|malloc SIZE N\n");
    return 2;
  }
  int pool = !strcmp(argv[2], "pool");
  size_t size = (size_t)atol(argv[3]);
  long n = atol(argv[4]);
  if (pool && !poolinit) { fprintf(stderr, "poolbench: pool runs need libcohort.so preloaded\n"); return 3; }
  if (size < sizeof(void *) || n <= 0) { fprintf(stderr, "poolbench: SIZE >= 8 and N > 0\n"); return 2; }
  pooldesc pd;
  if (pool) poolinit(&pd, size);
  unsigned long sink = 0;
  double ns;
  if (!strcmp(argv[1], "churn")) {
    void *obj[BATCH];
    double t0 = now();
    for (long r = 0; r < n; r++) {
      for (int i = 0; i < BATCH; i++) {
        obj[i] = pool ? poolalloc(&pd, size) : malloc(size);
        *(long *)obj[i] = r;
      }
      for (int i = 0; i < BATCH; i++) {
        sink += *(long *)obj[i];
        if (pool) poolfree(&pd, obj[i]); else free(obj[i]);
      }
    }
    ns = (now() - t0) / ((double)n * BATCH);
  } else {
    void **obj = malloc((size_t)n * sizeof *obj);
    if (!obj) { perror("poolbench"); return 1; }
    for (long i = 0; i < n; i++) {
      obj[i] = pool ? poolalloc(&pd, size) : malloc(size);
      memset(obj[i], (int)i, size);
    }
    double t0 = now();
    if (pool) pooldestroy(&pd);
    else for (long i = 0; i < n; i++) free(obj[i]);
    ns = now() - t0;
    sink = (unsigned long)(uintptr_t)obj[n - 1];
    free(obj);
  }
  if (pool && !strcmp(argv[1], "churn")) pooldestroy(&pd);
  printf("%s %s %zu %ld: %.2f ns (%lu)\n", argv[1], argv[2], size, n, ns, sink & 1);
  return 0;
}
