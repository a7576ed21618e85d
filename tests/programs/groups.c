/* Identification test program. Objects of three types come from type-specific
 * constructors in one interleaved loop (HALO's Figure 2), and two more kinds
 * come through one shared wrapper, told apart only by the wrapper's callers.
 * Every object is logged as "kind index group address" to argv[1]; stdout
 * gets a checksum that must not depend on where objects live.
 * argv[2] (optional) runs the builder in that many threads. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "run_threads.h"

#define N 2000

static int (*group_of)(const void *);
static FILE *log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

struct batch { void *a[N], *b[N], *c[N], *w1[N], *w2[N]; };

static void note(const char *kind, int i, const void *p) {
  fprintf(log_file, "%s %d %d %p\n", kind, i, group_of ? group_of(p) : -1, p);
}

NOINLINE static void build(struct batch *bt) {
  for (int i = 0; i < N; i++) {
    bt->a[i] = make_a(i);
    bt->b[i] = make_b(i);
    bt->c[i] = make_c(i);
    bt->w1[i] = via_wrap_1(i);
    bt->w2[i] = via_wrap_2(i);
  }
}

static unsigned long walk(struct batch *bt) {
  unsigned long sum = 0;
  for (int r = 0; r < 10; r++)
    for (int i = 0; i < N; i++) sum += checksum_a(bt->a[i]) * 3 + checksum_b(bt->b[i]);
  for (int i = 0; i < N; i++) sum += checksum_c(bt->c[i]) + ((unsigned char *)bt->w1[i])[5] + ((unsigned char *)bt->w2[i])[7];
  return sum;
}

static void *run_one(void *arg) {
  struct batch *bt = calloc(1, sizeof *bt);
  build(bt);
  unsigned long sum = walk(bt);
  pthread_mutex_lock(&log_lock);
  for (int i = 0; i < N; i++) {
    note("a", i, bt->a[i]); note("b", i, bt->b[i]); note("c", i, bt->c[i]);
    note("w1", i, bt->w1[i]); note("w2", i, bt->w2[i]);
  }
  pthread_mutex_unlock(&log_lock);
  for (int i = 0; i < N; i++) { free(bt->a[i]); free(bt->b[i]); free(bt->c[i]); free(bt->w1[i]); free(bt->w2[i]); }
  free(bt);
  *(unsigned long *)arg = sum;
  return NULL;
}

int main(int argc, char **argv) {
  group_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  log_file = fopen(argc > 1 ? argv[1] : "/dev/null", "w");
  if (!log_file) { perror("log"); return 1; }
  unsigned long total = run_threads(run_one, argc > 2 ? atoi(argv[2]) : 0);
  fclose(log_file);
  printf("checksum %lu\n", total);
  return 0;
}
