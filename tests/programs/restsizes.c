/* The rest pool by size class (tests/integration/test_rest_classes.py): one loop makes,
 * in turn, one object of each size given after the thread count
 * (argv[3...]), 2000 rounds, through one call site (make), so that a plan
 * can leave them all to its rest pool, and a second (make_hot) makes a
 * 32-byte object per round that a plan may group. argv[2] is the number of
 * threads that each run the loop (1: the main thread alone; at most
 * RUN_THREADS_MAX). Every object is logged as "sSIZE index group address"
 * (hot objects as "hot") to argv[1]; stdout gets a checksum that must not
 * depend on where objects live. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_threads.h"

#define NOINLINE __attribute__((noinline, noclone, noipa))
#define N 2000
#define MAX_SIZES 16

NOINLINE void *make(size_t n, int i) {
  unsigned char *p = malloc(n);
  if (!p) abort();
  if (n) memset(p, i & 0x7f, n);
  return p;
}
NOINLINE void *make_hot(int i) {
  unsigned char *p = malloc(32);
  if (!p) abort();
  memset(p, i & 0x3f, 32);
  return p;
}

static size_t sizes[MAX_SIZES];
static int nsizes;
static int (*group_of)(const void *);
static FILE *log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void *run_one(void *arg) {
  void *(*objs)[MAX_SIZES] = calloc(N, sizeof *objs);
  void **hot = calloc(N, sizeof *hot);
  if (!objs || !hot) abort();
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < nsizes; k++) objs[i][k] = make(sizes[k], i);
    hot[i] = make_hot(i);
  }
  unsigned long sum = 0;
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < nsizes; k++) sum += sizes[k] ? ((unsigned char *)objs[i][k])[sizes[k] - 1] : 1;
    sum += ((unsigned char *)hot[i])[31];
  }
  pthread_mutex_lock(&log_lock);
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < nsizes; k++)
      fprintf(log_file, "s%zu %d %d %p\n", sizes[k], i, group_of ? group_of(objs[i][k]) : -1, objs[i][k]);
    fprintf(log_file, "hot %d %d %p\n", i, group_of ? group_of(hot[i]) : -1, hot[i]);
  }
  pthread_mutex_unlock(&log_lock);
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < nsizes; k++) free(objs[i][k]);
    free(hot[i]);
  }
  free(objs);
  free(hot);
  *(unsigned long *)arg = sum;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: restsizes LOG THREADS SIZE...\n");
    return 2;
  }
  group_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  log_file = fopen(argv[1], "w");
  if (!log_file) { perror("log"); return 1; }
  int threads = atoi(argv[2]);
  for (int a = 3; a < argc && nsizes < MAX_SIZES; a++) sizes[nsizes++] = strtoul(argv[a], NULL, 10);
  printf("%lu\n", run_threads(run_one, threads <= 1 ? 0 : threads));
  return fclose(log_file) != 0;
}
