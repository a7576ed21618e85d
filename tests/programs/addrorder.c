/* A program whose output depends on where its objects lie, as a graph
 * layout that breaks ties by address does: it makes objects of three kinds
 * (red straight from malloc, blue through its own wrapper, green by calloc),
 * frees and replaces some, retires whole chunks' worth, grows some with
 * realloc (some past what a pool takes), then prints a hash of the order of
 * every live object's address. The same input must print the same line on
 * every run under every mode of the runtime, as it does under glibc.
 *   addrorder [N]      N objects of each kind at the start (default 40000) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))
#define KEEP __asm__ volatile("" ::: "memory")

NOINLINE void *xalloc(size_t n) { void *p = malloc(n); KEEP; return p; }
NOINLINE void *make_red(unsigned i) { void *p = malloc(24 + (i % 5) * 8); KEEP; return p; }
NOINLINE void *make_blue(unsigned i) { void *p = xalloc(40 + (i % 7) * 16); KEEP; return p; }
NOINLINE void *make_green(unsigned i) { void *p = calloc(1, 96 + (i % 3) * 32); KEEP; return p; }

struct obj { void *p; unsigned id; };
static struct obj *objs;
static size_t nobjs, cap;
static unsigned next_id;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static unsigned rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned)(rng >> 11); }

static void add(void *p) {
  if (!p) { fprintf(stderr, "addrorder: out of memory\n"); exit(1); }
  if (nobjs == cap) {
    cap = cap ? 2 * cap : 1024;
    objs = realloc(objs, cap * sizeof *objs);
    if (!objs) { fprintf(stderr, "addrorder: out of memory\n"); exit(1); }
  }
  memset(p, 0x5a, 8);
  objs[nobjs++] = (struct obj){p, next_id++};
}

static void *make(unsigned kind, unsigned i) {
  return kind == 0 ? make_red(i) : kind == 1 ? make_blue(i) : make_green(i);
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const struct obj *)a)->p, y = (uintptr_t)((const struct obj *)b)->p;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 40000;
  /* 1. The three kinds, interleaved in an order that varies. */
  for (unsigned i = 0; i < 3 * n; i++) add(make(rnd() % 3, i));
  /* 2. Free about half, then make as many again: freed blocks are reused. */
  size_t kept = 0;
  for (size_t i = 0; i < nobjs; i++) {
    if (rnd() % 2) free(objs[i].p); else objs[kept++] = objs[i];
  }
  size_t freed = nobjs - kept;
  nobjs = kept;
  for (size_t i = 0; i < freed; i++) add(make(rnd() % 3, (unsigned)i));
  /* 3. A burst of green, freed whole (its chunks retire), then red and blue
   *    take their place. */
  size_t burst = nobjs;
  for (unsigned i = 0; i < 2 * n; i++) add(make_green(i));
  for (size_t i = burst; i < nobjs; i++) free(objs[i].p);
  nobjs = burst;
  for (unsigned i = 0; i < 2 * n; i++) add(make(rnd() % 2, i));
  /* 4. Some grow, a few past what a pool takes. */
  for (size_t i = 0; i < nobjs; i += 7) {
    size_t to = rnd() % 50 ? 200 + rnd() % 200 : 5000 + rnd() % 5000;
    void *q = realloc(objs[i].p, to);
    if (!q) { fprintf(stderr, "addrorder: out of memory\n"); return 1; }
    objs[i].p = q;
  }
  /* The order of the live objects' addresses, as ids. */
  qsort(objs, nobjs, sizeof *objs, by_address);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < nobjs; i++) { h ^= objs[i].id; h *= 0x100000001b3ull; }
  printf("%zu objects, order %016llx\n", nobjs, (unsigned long long)h);
  for (size_t i = 0; i < nobjs; i++) free(objs[i].p);
  free(objs);
  return 0;
}
