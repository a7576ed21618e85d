/* Identification test program for the walk's suffix memo: objects made
 * through two paths whose inner frames are identical (same stack addresses,
 * same return addresses) and which differ only further out, in the return
 * address of one frame (path_a or path_b, same frame size, called from the
 * same frame of main). The paths interleave unevenly. Every object is logged
 * as "kind index group address" to argv[1]. Built both ways: -O2 without
 * frame pointers and -O0 with them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone, noipa))
#define N 3000

static volatile uintptr_t sink;

NOINLINE void *inner(size_t n) {
  void *p = malloc(n);
  sink += (uintptr_t)p;
  return p;
}

NOINLINE void *middle(size_t n) {
  void *p = inner(n);
  sink ^= (uintptr_t)p;
  return p;
}

NOINLINE void *path_a(size_t n) {
  void *p = middle(n);
  sink += 1;
  return p;
}

NOINLINE void *path_b(size_t n) {
  void *p = middle(n);
  sink += 2;
  return p;
}

int main(int argc, char **argv) {
  int (*group_of)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  FILE *log = fopen(argc > 1 ? argv[1] : "/dev/null", "w");
  if (!log) { perror("log"); return 1; }
  static void *objs[N];
  static char kind[N];
  unsigned long sum = 0;
  for (int i = 0; i < N; i++) {
    /* a, b, b, a, b, a, a, b, b, b, ... an uneven, repeatable interleaving */
    int a = ((unsigned)i * 2654435761u >> 7) % 3 == 0;
    objs[i] = a ? path_a(32) : path_b(32);
    kind[i] = a ? 'a' : 'b';
    ((char *)objs[i])[0] = (char)i;
  }
  for (int i = 0; i < N; i++) {
    sum += (unsigned char)((char *)objs[i])[0];
    fprintf(log, "%c %d %d %p\n", kind[i], i, group_of ? group_of(objs[i]) : -1, objs[i]);
    free(objs[i]);
  }
  fclose(log);
  printf("checksum %lu\n", sum);
  return 0;
}
