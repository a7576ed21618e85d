/* One allocation call site whose size drifts, for MO (tests/integration/test_mo.py):
 * xmalloc makes its first 200 requests all of 48 bytes (a parser's nodes),
 * enough for MO's monitor to find the site valid when it turns hot, then
 * N requests of eight sizes in turn, one in eight of them 48 bytes (an
 * interpreter's values). A window of 64 objects is kept live; every one is
 * freed in the end. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

static __attribute__((noipa)) long *xmalloc(size_t n) {
  long *p = malloc(n);
  if (!p) exit(1);
  p[0] = (long)n;
  return p;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000, sum = 0;
  long *win[64] = {0};
  for (long i = 0; i < 200 + n; i++) {
    size_t size = i < 200 ? 48 : (size_t)(48 + 16 * (i % 8));
    unsigned s = (unsigned)(i * 37 % 64);
    if (win[s]) { sum += win[s][0]; free(win[s]); }
    win[s] = xmalloc(size);
  }
  for (int s = 0; s < 64; s++)
    if (win[s]) { sum += win[s][0]; free(win[s]); }
  printf("%ld\n", sum);
  return 0;
}
