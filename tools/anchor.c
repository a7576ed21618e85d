/* cohort-anchor: the anchors of a module's call sites, and where they lie
 * in another build (runtime/bind/anchor.c, the code the runtime itself
 * runs when it meets another build of a planned module).
 *
 *   cohort-anchor describe FILE OFFSET...   one line per offset (hex):
 *       OFFSET WORDS   the anchor's words, as a plan's anchor line holds them
 *       OFFSET - WHY   no call returns there
 *   cohort-anchor find FILE                 standard input: lines `I WORDS`;
 *       I OFFSET HOW<TAB>WORDS   the call that fits, how it was found, and
 *                                its own anchor in FILE (as describe gives it)
 *       I - WHY                  none fits alone
 *
 * The first line of output is `build-id HEX` (or `build-id -`). Exit 0; 1
 * when FILE cannot be read as an x86-64 ELF file (the reason on standard
 * error); 2 for a usage mistake. */
#define _GNU_SOURCE
#include "bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
  fprintf(stderr, "usage: cohort-anchor describe FILE OFFSET...\n       cohort-anchor find FILE < ANCHORS\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "describe") && strcmp(argv[1], "find"))) return usage();
  bool find = !strcmp(argv[1], "find");
  if (find && argc != 3) return usage();
  char why[256];
  struct ch_calls *c = ch_calls_scan(argv[2], why, sizeof why);
  if (!c) {
    fprintf(stderr, "cohort-anchor: %s: %s\n", argv[2], why);
    return 1;
  }
  unsigned n;
  const uint8_t *id = ch_calls_build_id(c, &n);
  printf("build-id ");
  for (unsigned i = 0; i < n; i++) printf("%02x", id[i]);
  printf("%s\n", n ? "" : "-");
  if (!find) {
    for (int i = 3; i < argc; i++) {
      char *end;
      unsigned long long off = strtoull(argv[i], &end, 16);
      char out[1024];
      const char *no;
      if (*end || end == argv[i]) printf("%s - not a hex offset\n", argv[i]);
      else if (ch_anchor_describe(c, off, out, sizeof out, &no)) printf("%#llx %s\n", off, out);
      else printf("%#llx - %s\n", off, no);
    }
  } else {
    char *line = NULL;   /* a line of any length: this tool is no part of the runtime */
    size_t cap = 0;
    while (getline(&line, &cap, stdin) >= 0) {
      line[strcspn(line, "\n")] = 0;
      char *end;
      unsigned long site = strtoul(line, &end, 10);
      struct ch_anchor a;
      const char *how, *no = "malformed anchor";
      uint64_t at = end != line && ch_anchor_parse(end, &a) ? ch_anchor_find(c, &a, &how, &no) : 0;
      char out[1024];
      if (at && ch_anchor_describe(c, at, out, sizeof out, &no))
        printf("%lu %#llx %s\t%s\n", site, (unsigned long long)at, how, out);
      else printf("%lu - %s\n", site, no);
    }
    free(line);
  }
  ch_calls_free(c);
  return 0;
}
