/* cohort-latency: what one dependent load costs when its line lives in a
 * buffer of a given size, for the planner's price of a miss at the scale a
 * plan runs at (cohort/plan/scale.py, docs/planner.md "A miss at the run's
 * scale").
 *
 * Each buffer is one pointer per 64-byte line, linked in a random cycle, so
 * that neither the hardware's stride prefetchers nor the next-line one can
 * guess the next address: every load waits for the one before it. The
 * buffer is walked once to warm it, then timed; the median of ROUNDS
 * rounds is printed, in ns per load.
 *
 * Usage: cohort-latency [-r ROUNDS] SIZE_KIB...
 * Prints one line "SIZE_KIB NS" per size. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LINE 64

static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {   /* xorshift64*: any fixed sequence will do */
  state ^= state >> 12; state ^= state << 25; state ^= state >> 27;
  return state * 0x2545f4914f6cdd1dull;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The lines of the buffer in one random cycle (Sattolo's shuffle). */
static void **link_cycle(char *buf, size_t lines) {
  size_t *order = malloc(lines * sizeof *order);
  if (!order) return NULL;
  for (size_t i = 0; i < lines; i++) order[i] = i;
  for (size_t i = lines - 1; i > 0; i--) {
    size_t j = next_random() % i;
    size_t t = order[i]; order[i] = order[j]; order[j] = t;
  }
  for (size_t i = 0; i < lines; i++)
    *(void **)(buf + order[i] * LINE) = buf + order[(i + 1) % lines] * LINE;
  void **start = (void **)(buf + order[0] * LINE);
  free(order);
  return start;
}

static double ns_per_load(size_t kib, int rounds) {
  size_t bytes = kib * 1024, lines = bytes / LINE;
  char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED || lines < 2) return -1;
  void **p = link_cycle(buf, lines);
  if (!p) return -1;
  /* At least 2 M loads a round, so that small buffers are timed long enough. */
  size_t loads = lines < (2u << 20) ? (2u << 20) : lines;
  for (size_t i = 0; i < lines; i++) p = *p;
  double *t = malloc(rounds * sizeof *t);
  for (int r = 0; r < rounds; r++) {
    double t0 = now_ns();
    for (size_t i = 0; i < loads; i++) p = *p;
    t[r] = (now_ns() - t0) / loads;
  }
  __asm__ volatile("" : : "r"(p));   /* keep the chase */
  qsort(t, rounds, sizeof *t, by_value);
  double median = t[rounds / 2];
  free(t);
  munmap(buf, bytes);
  return median;
}

int main(int argc, char **argv) {
  int first = 1, rounds = 7;
  if (argc > 2 && strcmp(argv[1], "-r") == 0) {
    rounds = atoi(argv[2]);
    first = 3;
  }
  if (argc <= first || rounds < 1) {
    fprintf(stderr, "usage: cohort-latency [-r ROUNDS] SIZE_KIB...\n");
    return 2;
  }
  for (int i = first; i < argc; i++) {
    long kib = atol(argv[i]);
    double ns = kib > 0 ? ns_per_load((size_t)kib, rounds) : -1;
    if (ns < 0) {
      fprintf(stderr, "cohort-latency: cannot measure %s KiB\n", argv[i]);
      return 1;
    }
    printf("%ld %.2f\n", kib, ns);
  }
  return 0;
}
