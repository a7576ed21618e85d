/* Misuse suite: one heap mistake per run, for comparing what each allocator
 * catches (scripts/misuse-report.py, tests/integration/test_misuse_suite.py).
 *
 *   misuse_suite MISTAKE SIZE
 *
 * Three neighbours of SIZE bytes are allocated (before, p, after) and filled;
 * the mistake is made on p; then every block is freed and the heap used a
 * little more, so that an allocator that checks lazily gets its chance. A
 * run that reaches the end prints "survived" and exits 0: the mistake went
 * unnoticed. Sizes of 16k+8 bytes fill glibc's chunks exactly, so that a
 * one-byte overflow reaches its metadata. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char not_heap[64];

/* Keeps the compiler from reasoning about the mistakes. */
static void *volatile sink;
static void *launder(void *p) { sink = p; return sink; }

static void churn(size_t size) {
  void *q[64];
  for (int i = 0; i < 64; i++) memset(q[i] = malloc(size), 0x11, size);
  for (int i = 0; i < 64; i++) free(q[i]);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: misuse_suite MISTAKE SIZE\n");
    return 2;
  }
  const char *m = argv[1];
  size_t size = strtoul(argv[2], NULL, 10);
  if (size < 16 || size > (1u << 20)) { fprintf(stderr, "misuse_suite: SIZE from 16 to 1M\n"); return 2; }
  char *before = malloc(size), *p = launder(malloc(size)), *after = malloc(size);
  memset(before, 'b', size);
  memset(p, 'p', size);
  memset(after, 'a', size);
  static char junk[64 + (1u << 20)];
  memset(junk, 'J', sizeof junk);
  int freed_p = 0;

  if (!strcmp(m, "double-free")) { free(p); free(p); freed_p = 1; }
  else if (!strcmp(m, "double-free-later")) { free(p); free(after); free(p); after = NULL; freed_p = 1; }
  else if (!strcmp(m, "invalid-free")) free(launder(not_heap + 16));
  else if (!strcmp(m, "interior-free")) free(launder(p + 16));
  else if (!strcmp(m, "unaligned-free")) free(launder(p + 1));
  else if (!strcmp(m, "underflow-1")) ((char *)launder(p))[-1] = 'U';
  else if (!strcmp(m, "overflow-1")) ((char *)launder(p))[size] = 'O';
  else if (!strcmp(m, "overflow-32")) memcpy(launder(p), junk, size + 32);
  else if (!strcmp(m, "overrun-1m")) ((char *)launder(p))[size + (1u << 20)] = 'W';
  else if (!strcmp(m, "overflow-1m")) memcpy(launder(p), junk, size + (1u << 20));
  else if (strcmp(m, "none")) { fprintf(stderr, "misuse_suite: unknown mistake %s\n", m); return 2; }

  if (!freed_p) free(p);
  free(before);
  free(after);
  churn(size);
  churn(size + 64);
  printf("survived %s %zu\n", m, size);
  return 0;
}
