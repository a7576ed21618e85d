/* A tiny program for the harness's stdin and output-file tests
 * (tests/integration/test_harness_io.py). It reads its standard input to the end, keeps
 * one malloc'd node per line (so a profile's allocation count follows the
 * input), walks them, and prints the line and byte counts and an FNV-1a
 * digest of everything it read. Usage: stdinout OUT [MODE]: with OUT other
 * than "-" it writes the same line to the file OUT as well. MODE (default
 * "ok") makes it misbehave only when run under Cohort (libcohort.so in
 * LD_PRELOAD), in the file alone, its stdout unchanged: "vary" adds a line to
 * the file, "nofile" writes no file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct line { struct line *next; uint64_t hash; long len; };

__attribute__((noinline)) static struct line *keep(struct line *next, uint64_t hash, long len) {
  struct line *l = malloc(sizeof *l);
  if (!l) exit(3);
  l->next = next; l->hash = hash; l->len = len;
  return l;
}

int main(int argc, char **argv) {
  const char *out = argc > 1 ? argv[1] : "-";
  const char *mode = argc > 2 ? argv[2] : "ok";
  const char *pre = getenv("LD_PRELOAD");
  int cohort = pre && strstr(pre, "libcohort");
  uint64_t all = 1469598103934665603ull, h = all;
  long bytes = 0, len = 0;
  struct line *lines = NULL;
  int c;
  while ((c = getchar()) != EOF) {
    all = (all ^ (unsigned char)c) * 1099511628211ull;
    h = (h ^ (unsigned char)c) * 1099511628211ull;
    bytes++, len++;
    if (c == '\n') { lines = keep(lines, h, len); h = 1469598103934665603ull; len = 0; }
  }
  long n = 0, in_lines = 0;
  for (struct line *l = lines; l; l = l->next) { n++; in_lines += l->len; }
  char text[160];
  snprintf(text, sizeof text, "lines %ld (%ld bytes) bytes %ld fnv %016llx\n", n, in_lines, bytes,
           (unsigned long long)all);
  fputs(text, stdout);
  if (strcmp(out, "-") && !(cohort && !strcmp(mode, "nofile"))) {
    FILE *f = fopen(out, "w");
    if (!f) { perror(out); return 2; }
    fputs(text, f);
    if (cohort && !strcmp(mode, "vary")) fputs("under cohort\n", f);
    if (fclose(f)) { perror(out); return 2; }
  }
  while (lines) { struct line *next = lines->next; free(lines); lines = next; }
  return 0;
}
