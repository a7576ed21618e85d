/* Many call chains through one wrapper, allocated from several threads at
 * once, for DPA's compound table (runtime/policy/dpa/chain_trie.c; tests/integration/test_dpa.py).
 * 256 functions each call wrap() from a call site of their own and store
 * the object in a slot, so each makes a chain of two frames: wrap's call
 * of malloc, then the function's call of wrap. Every chain shares its first
 * frame, so that node's block of children grows from 4 slots to 512 while
 * the other threads read it. Each thread walks the functions in an order
 * of its own, writes every object, reads it back and frees it.
 * Usage: manychains THREADS ROUNDS; prints a checksum independent of the
 * interleaving. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NFUNCS 256
#define SIZE_OF(k) (16 + 8 * ((k) % 8))

static __attribute__((noipa)) void *wrap(size_t n) {
  void *p = malloc(n);
  if (!p) { fputs("manychains: out of memory\n", stderr); exit(1); }
  return p;
}

#define FUNC(k)                                                              \
  static __attribute__((noipa)) void make_##k(unsigned char **slot) {       \
    unsigned char *p = wrap(SIZE_OF(k));                                     \
    memset(p, (k) + 1, SIZE_OF(k));                                          \
    *slot = p;                                                               \
  }
#define EIGHT(d) FUNC(d##0) FUNC(d##1) FUNC(d##2) FUNC(d##3) FUNC(d##4) FUNC(d##5) FUNC(d##6) FUNC(d##7)
#define SIXTY4(d) EIGHT(d##0) EIGHT(d##1) EIGHT(d##2) EIGHT(d##3) EIGHT(d##4) EIGHT(d##5) EIGHT(d##6) EIGHT(d##7)
/* Octal digits: make_0000 .. make_0377 are the 256 functions. */
SIXTY4(00) SIXTY4(01) SIXTY4(02) SIXTY4(03)

#define REF(k) make_##k,
#define REF8(d) REF(d##0) REF(d##1) REF(d##2) REF(d##3) REF(d##4) REF(d##5) REF(d##6) REF(d##7)
#define REF64(d) REF8(d##0) REF8(d##1) REF8(d##2) REF8(d##3) REF8(d##4) REF8(d##5) REF8(d##6) REF8(d##7)
static void (*const funcs[NFUNCS])(unsigned char **) = {REF64(00) REF64(01) REF64(02) REF64(03)};

struct job { unsigned seed; long rounds; unsigned long sum; };

static void *worker(void *arg) {
  struct job *j = arg;
  static __thread unsigned char *objs[NFUNCS];
  unsigned long sum = 0;
  for (long r = 0; r < j->rounds; r++) {
    /* A stride coprime with 256 visits every function once a round. */
    unsigned step = 2 * ((j->seed + (unsigned)r) % 64) + 1, at = j->seed * 37u + (unsigned)r;
    for (unsigned i = 0; i < NFUNCS; i++) {
      unsigned k = (at + i * step) % NFUNCS;
      funcs[k](&objs[k]);
    }
    for (unsigned k = 0; k < NFUNCS; k++) {
      for (unsigned b = 0; b < SIZE_OF(k); b++) sum += objs[k][b] * (b + 1);
      free(objs[k]);
    }
  }
  j->sum = sum;
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  long rounds = argc > 2 ? atol(argv[2]) : 200;
  if (threads < 1 || threads > 64 || rounds < 1) { fputs("usage: manychains THREADS ROUNDS\n", stderr); return 2; }
  pthread_t t[64];
  struct job jobs[64];
  for (int i = 0; i < threads; i++) {
    jobs[i] = (struct job){.seed = (unsigned)i, .rounds = rounds};
    if (pthread_create(&t[i], NULL, worker, &jobs[i])) { perror("pthread_create"); return 1; }
  }
  unsigned long total = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    total += jobs[i].sum;
  }
  printf("manychains %d threads %ld rounds checksum %lu\n", threads, rounds, total);
  return 0;
}
