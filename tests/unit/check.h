/* A minimal check harness for the runtime's unit tests. Each test program
 * runs under LD_PRELOAD=libcohort.so (tests/unit/test_unit.py starts it) and
 * queries the runtime through its public interface with dlsym. */
#ifndef COHORT_CHECK_H
#define COHORT_CHECK_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures;
#define CHECK(cond) do { if (!(cond)) { \
  fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); check_failures++; } } while (0)

static int (*group_of)(const void *);
static int (*write_stats)(const char *);

/* Is the runtime there, and does the test expect small objects grouped? */
static int check_init(void) {
  group_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  write_stats = (int (*)(const char *))dlsym(RTLD_DEFAULT, "cohort_write_stats");
  if (!group_of) { fprintf(stderr, "not running under libcohort.so\n"); exit(3); }
  const char *m = getenv("COHORT_MODE");
  return m && (m[0] == 'a' || m[0] == 'r');
}

static int check_done(const char *name) {
  if (check_failures) { fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures); return 1; }
  printf("%s: ok\n", name);
  return 0;
}
#endif

/* The number after "key": in a statistics file written by the runtime. */
#include <string.h>
static long stat_value(const char *path, const char *key) {
  static char buf[65536];
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char pat[128];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  char *p = strstr(buf, pat);
  return p ? atol(p + strlen(pat)) : -1;
}
