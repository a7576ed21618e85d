/* Misuse inside a group chunk must stop the program with a clear message
 * (as glibc does), never corrupt the chunk. argv[1] picks the mistake. */
#include "check.h"

#include <malloc.h>
#include <string.h>

int main(int argc, char **argv) {
  check_init();
  const char *what = argc > 1 ? argv[1] : "";
  char *p = malloc(64);
  char *keep = malloc(64);   /* keeps the chunk alive */
  if (!strcmp(what, "double-free")) { free(p); free(p); }
  else if (!strcmp(what, "interior")) free(p + 8);
  else if (!strcmp(what, "misaligned")) free(p + 3);
  else if (!strcmp(what, "unallocated")) free(keep + 4096);
  else if (!strcmp(what, "realloc-freed")) { free(p); p = realloc(p, 100); }
  else if (!strcmp(what, "usable-freed")) { free(p); printf("%zu\n", malloc_usable_size(p)); }
  printf("survived %s\n", what);
  free(keep);
  return 0;
}
