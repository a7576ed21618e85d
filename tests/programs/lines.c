/* Line placement test program: one loop makes, in turn, a 128-byte node
 * (make_node), a 24-byte leaf (make_leaf) and a 128-byte record through a
 * third call site (make_record), so that in any pool holding two of them the
 * bump pointer leaves line boundaries behind. Every object is logged as
 * "kind index group address" to argv[1]; stdout gets a checksum that must not
 * depend on where objects live. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone, noipa))
#define N 2000

NOINLINE void *make_node(int i) { char *p = malloc(128); memset(p, i & 0x7f, 128); return p; }
NOINLINE void *make_leaf(int i) { char *p = malloc(24); memset(p, i & 0x3f, 24); return p; }
NOINLINE void *make_record(int i) { char *p = malloc(128); memset(p, i & 0x1f, 128); return p; }

static void *node[N], *leaf[N], *record[N];

int main(int argc, char **argv) {
  int (*group_of)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  FILE *log = fopen(argc > 1 ? argv[1] : "/dev/null", "w");
  if (!log) { perror("log"); return 1; }
  for (int i = 0; i < N; i++) {
    node[i] = make_node(i);
    leaf[i] = make_leaf(i);
    record[i] = make_record(i);
  }
  unsigned long sum = 0;
  for (int i = 0; i < N; i++)
    sum += ((unsigned char *)node[i])[127] * 3u + ((unsigned char *)leaf[i])[23] + ((unsigned char *)record[i])[64];
  for (int i = 0; i < N; i++) {
    fprintf(log, "node %d %d %p\n", i, group_of ? group_of(node[i]) : -1, node[i]);
    fprintf(log, "leaf %d %d %p\n", i, group_of ? group_of(leaf[i]) : -1, leaf[i]);
    fprintf(log, "record %d %d %p\n", i, group_of ? group_of(record[i]) : -1, record[i]);
  }
  for (int i = 0; i < N; i++) { free(node[i]); free(leaf[i]); free(record[i]); }
  printf("%lu\n", sum);
  return fclose(log) != 0;
}
