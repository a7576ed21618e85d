/* Identification test program for decision paths: every object is made at
 * the end of a chain of calls spelled by a path string, so that a test knows
 * each object's call sites exactly. "abca" means start() calls step_a, which
 * calls step_b, then step_c, then step_a again (a recursive re-entry), which
 * calls malloc. Each step function has its own call site for each next step
 * and one for malloc. Reads one path per line from argv[1], makes one 32-byte
 * object per line, and logs "path index group address" to argv[2]. Built -O2
 * without frame pointers and -O0 with them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone, noipa))

static volatile uintptr_t sink;

void *step_a(const char *p);
void *step_b(const char *p);
void *step_c(const char *p);
void *step_d(const char *p);

/* The sum after each call keeps it from becoming a tail call: the caller's
 * frame stays on the stack. */
#define STEP(X)                                             \
  NOINLINE void *step_##X(const char *p) {                  \
    void *r;                                                \
    switch (*p) {                                           \
    case 'a': r = step_a(p + 1); break;                     \
    case 'b': r = step_b(p + 1); break;                     \
    case 'c': r = step_c(p + 1); break;                     \
    case 'd': r = step_d(p + 1); break;                     \
    default: r = malloc(32); break;                         \
    }                                                       \
    sink += (uintptr_t)r;                                   \
    return r;                                               \
  }
STEP(a)
STEP(b)
STEP(c)
STEP(d)

NOINLINE void *start(const char *p) {
  void *r;
  switch (*p) {
  case 'a': r = step_a(p + 1); break;
  case 'b': r = step_b(p + 1); break;
  case 'c': r = step_c(p + 1); break;
  default: r = step_d(p + 1); break;
  }
  sink += (uintptr_t)r;
  return r;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: callpaths PATHS LOG\n"); return 2; }
  int (*group_of)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  FILE *in = fopen(argv[1], "r"), *log = fopen(argv[2], "w");
  if (!in || !log) { perror("callpaths"); return 1; }
  char line[256];
  for (int i = 0; fgets(line, sizeof line, in); i++) {
    line[strcspn(line, "\n")] = 0;
    if (!line[0]) continue;
    void *o = start(line);
    fprintf(log, "%s %d %d %p\n", line, i, group_of ? group_of(o) : -1, o);
  }
  fclose(in);
  fclose(log);
  return 0;
}
