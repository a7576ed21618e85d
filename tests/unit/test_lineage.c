/* Threads that start other threads, whose heaps the runtime leaves idle
 * until they allocate again or another thread takes them over (heap.c, "A
 * thread that starts another"). Every block carries a pattern checked before
 * it is freed, whoever frees it.
 *
 *   test_lineage lineage  : 4 lineages of 12 generations; each generation
 *                           frees its predecessor's blocks, makes its own,
 *                           starts its successor and exits (detached)
 *   test_lineage takeover : main makes blocks, starts a thread that frees
 *                           half of them while main waits, then main
 *                           allocates and frees the rest itself
 *   test_lineage resume   : main starts a thread, then frees and makes its
 *                           own blocks while the thread runs
 *   test_lineage argument : 64 threads in turn each free the one block main
 *                           made for it, main allocating between starts */
#include "check.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>

#define LINEAGES 4
#define GENERATIONS 12
#define SLOTS 3000

struct blk { uint32_t size, tag; unsigned char data[]; };

static struct blk *make(uint64_t *x, uint32_t tag) {
  *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
  uint32_t size = (uint32_t)(*x % 300);
  struct blk *b = malloc(sizeof *b + size);
  if (!b) { perror("malloc"); exit(2); }
  b->size = size;
  b->tag = tag;
  for (uint32_t i = 0; i < size; i++) b->data[i] = (unsigned char)(tag + i);
  return b;
}

static void drop(struct blk *b) {
  for (uint32_t i = 0; i < b->size; i++)
    if (b->data[i] != (unsigned char)(b->tag + i)) { CHECK(!"a block's pattern changed"); break; }
  free(b);
}

/* ---------------------------------------------------------------- lineage */

struct lineage {
  struct blk *slot[SLOTS];
  uint64_t rng;
  int generation;
  sem_t done;
};

static void *generation(void *arg) {
  struct lineage *l = arg;
  for (int i = 0; i < SLOTS; i++) {
    if (l->slot[i]) drop(l->slot[i]);
    l->slot[i] = make(&l->rng, (uint32_t)(l->generation * SLOTS + i));
  }
  if (++l->generation < GENERATIONS) {
    pthread_t next;
    CHECK(pthread_create(&next, NULL, generation, l) == 0);
    pthread_detach(next);
  } else {
    for (int i = 0; i < SLOTS; i++) drop(l->slot[i]);
    sem_post(&l->done);
  }
  return NULL;
}

static void lineage(void) {
  static struct lineage ls[LINEAGES];
  pthread_t first[LINEAGES];
  for (int k = 0; k < LINEAGES; k++) {
    ls[k].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1);
    sem_init(&ls[k].done, 0, 0);
    CHECK(pthread_create(&first[k], NULL, generation, &ls[k]) == 0);
    pthread_detach(first[k]);
  }
  for (int k = 0; k < LINEAGES; k++) sem_wait(&ls[k].done);
}

/* --------------------------------------------------------------- takeover */

static struct blk *mains[SLOTS];

static void *free_first_half(void *arg) {
  for (int i = 0; i < SLOTS / 2; i++) { drop(mains[i]); mains[i] = NULL; }
  return NULL;
}

static void takeover(void) {
  uint64_t x = 12345;
  for (int i = 0; i < SLOTS; i++) mains[i] = make(&x, (uint32_t)i);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, free_first_half, NULL) == 0);
  pthread_join(t, NULL);
  /* Our chunks may be another heap's or orphans now: allocate, then free
   * what is left, blocks made before and after the start alike. */
  for (int i = 0; i < SLOTS / 2; i++) mains[i] = make(&x, (uint32_t)(SLOTS + i));
  for (int i = 0; i < SLOTS; i++) drop(mains[i]);
}

/* ----------------------------------------------------------------- resume */

static void *make_and_free(void *arg) {
  uint64_t x = 777;
  for (int r = 0; r < 20; r++) {
    struct blk *b[100];
    for (int i = 0; i < 100; i++) b[i] = make(&x, (uint32_t)i);
    for (int i = 0; i < 100; i++) drop(b[i]);
  }
  return NULL;
}

static void resume(void) {
  uint64_t x = 99;
  for (int i = 0; i < SLOTS; i++) mains[i] = make(&x, (uint32_t)i);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, make_and_free, NULL) == 0);
  for (int i = 0; i < SLOTS; i += 2) { drop(mains[i]); mains[i] = make(&x, (uint32_t)(SLOTS + i)); }
  pthread_join(t, NULL);
  for (int i = 0; i < SLOTS; i++) drop(mains[i]);
}

/* --------------------------------------------------------------- argument */

static void *free_argument(void *arg) {
  drop(arg);
  return NULL;
}

static void argument(void) {
  uint64_t x = 4242;
  for (int i = 0; i < 64; i++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_argument, make(&x, (uint32_t)i)) == 0);
    pthread_join(t, NULL);
  }
}

int main(int argc, char **argv) {
  check_init();
  const char *what = argc > 1 ? argv[1] : "";
  if (!strcmp(what, "lineage")) lineage();
  else if (!strcmp(what, "takeover")) takeover();
  else if (!strcmp(what, "resume")) resume();
  else if (!strcmp(what, "argument")) argument();
  else { fprintf(stderr, "usage: test_lineage lineage|takeover|resume|argument [STATS]\n"); return 2; }
  if (argc > 2) CHECK(write_stats(argv[2]) == 0);
  return check_done("test_lineage");
}
