// Every block of 16 bytes or more is 16-aligned, whatever the sizes before
// it (the x86-64 ABI's max_align_t): allocations of mixed sizes, some of
// 8 mod 16 bytes, through malloc, calloc, realloc, memalign and operator
// new, with 16-byte-aligned records made and copied between them (GCC
// copies their __int128 members with movdqa/movaps, which fault on an
// address 8 mod 16). Prints the number of misaligned blocks, then a
// checksum that does not depend on where blocks live.
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct Wide { __int128 a, b; };                      // 32 bytes, alignment 16
struct Mixed { long double x; long tag; };             // 32 bytes, alignment 16

static unsigned misaligned;
static void check(const void *p, size_t size) {
  if (size >= 16 && ((uintptr_t)p & 15)) misaligned++;
}

__attribute__((noinline)) static void copy_wide(Wide *d, const Wide *s) { *d = *s; }
__attribute__((noinline)) static void copy_mixed(Mixed *d, const Mixed *s) { *d = *s; }

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 20000;
  uint64_t rng = 88172645463325252ull, sum = 0;
  enum { KEEP = 512 };
  void *keep[KEEP] = {0};
  Wide *wides[KEEP] = {0};
  for (unsigned i = 0; i < rounds; i++) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    unsigned k = (unsigned)(rng % KEEP);
    size_t size = 8 + 8 * (size_t)((rng >> 16) % 40);      // 8..320, half of them 8 mod 16
    free(keep[k]);
    switch ((rng >> 32) % 4) {
      case 0: keep[k] = malloc(size); break;
      case 1: keep[k] = calloc(1, size); break;
      case 2: keep[k] = realloc(malloc(8), size); break;
      default: keep[k] = memalign(8, size); break;
    }
    if (!keep[k]) return 1;
    check(keep[k], size);
    memset(keep[k], (int)(i & 0xff), size);
    // A wide record after each mixed-size block, copied from the last one.
    Wide *w = new Wide;
    check(w, sizeof *w);
    w->a = (__int128)i << 64 | size;
    w->b = ~w->a;
    if (wides[k]) { Wide t; copy_wide(&t, wides[k]); sum += (uint64_t)t.a ^ (uint64_t)(t.b >> 64); delete wides[k]; }
    wides[k] = w;
    Mixed *m = new Mixed[2];
    check(m, 2 * sizeof *m);
    m[0].x = (long double)i; m[0].tag = (long)size;
    copy_mixed(&m[1], &m[0]);
    sum += (uint64_t)m[1].tag + (uint64_t)m[1].x;
    delete[] m;
  }
  for (unsigned k = 0; k < KEEP; k++) { free(keep[k]); delete wides[k]; }
  printf("misaligned %u\nchecksum %llu\n", misaligned, (unsigned long long)sum);
  return misaligned != 0;
}
