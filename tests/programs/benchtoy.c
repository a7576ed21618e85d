/* A tiny program for the bench harness's tests. It builds and walks a list
 * and prints a checksum; asked to, it misbehaves only when run under Cohort
 * (libcohort.so in LD_PRELOAD): "mismatch" prints other output, "crash"
 * dies of SIGSEGV after printing, "slow" takes 50 ms longer (so that the
 * allocator alone is always the fastest). "timed" prints its own run time
 * first, as many programs do, so that no two runs print the same. */
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node { struct node *next; long v; };

__attribute__((noinline)) static struct node *make(long v, struct node *next) {
  struct node *n = malloc(sizeof *n);
  n->v = v; n->next = next;
  return n;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ok";
  const char *pre = getenv("LD_PRELOAD");
  int cohort = pre && strstr(pre, "libcohort");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  struct node *l = NULL;
  for (long i = 0; i < 20000; i++) l = make(i, l);
  long s = 0;
  for (int p = 0; p < 5; p++)
    for (struct node *x = l; x; x = x->next) s += x->v;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (!strcmp(mode, "timed"))
    printf("took %ld ns\n", (long)((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec)));
  printf("checksum %ld\n", cohort && !strcmp(mode, "mismatch") ? s + 1 : s);
  fflush(stdout);
  if (cohort && !strcmp(mode, "crash")) raise(SIGSEGV);
  if (cohort && !strcmp(mode, "slow")) nanosleep(&(struct timespec){0, 50000000}, NULL);
  return 0;
}
