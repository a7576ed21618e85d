/* The pool API (runtime/include/cohort/pool.h), linked with -lcohort as a
 * program using it would be. With no argument, every promise of the header
 * is checked; with one, the program makes that mistake, which must stop it
 * (tests/unit/test_pools.py reads the message). An optional statistics path
 * after no mistake ("stats PATH") is written at the end. */
#define _GNU_SOURCE
#include <cohort.h>
#include <cohort/pool.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;
#define CHECK(cond) do { if (!(cond)) { \
  fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

enum { POOL_GROUP = 63 };   /* runtime/system/system.h CH_POOL_GROUP */
#define CHUNK(p) ((uintptr_t)(p) >> 20)   /* the default 1 MiB chunks */

struct node { struct node *next; long value; };

/* Objects of one size from a fresh pool lie one after another. */
static void uniform_contiguous(void) {
  pooldesc pd;
  CHECK(poolinit(&pd, sizeof(struct node)) == 0);
  enum { N = 1000 };
  static struct node *n[N];
  for (int i = 0; i < N; i++) {
    n[i] = poolalloc(&pd, sizeof(struct node));
    CHECK(n[i] && ((uintptr_t)n[i] & 15) == 0);
    CHECK(cohort_group_of(n[i]) == POOL_GROUP);
    if (i) CHECK((char *)n[i] - (char *)n[i - 1] == sizeof(struct node));
  }
  /* A freed object is the next one handed out. */
  poolfree(&pd, n[500]);
  CHECK(poolalloc(&pd, sizeof(struct node)) == n[500]);
  pooldestroy(&pd);
}

/* Two pools filled in turn: each stays contiguous, in chunks of its own. */
static void two_pools_apart(void) {
  pooldesc a, b;
  poolcreate(&a);
  poolcreate(&b);
  enum { N = 20000 };
  static struct node *na[N], *nb[N];
  for (int i = 0; i < N; i++) {
    na[i] = poolalloc(&a, sizeof(struct node));
    nb[i] = poolalloc(&b, sizeof(struct node));
    na[i]->value = i;
    nb[i]->value = -i;
  }
  int gaps_a = 0, gaps_b = 0;
  for (int i = 1; i < N; i++) {
    gaps_a += (char *)na[i] - (char *)na[i - 1] != sizeof(struct node);
    gaps_b += (char *)nb[i] - (char *)nb[i - 1] != sizeof(struct node);
    CHECK(CHUNK(na[i]) != CHUNK(nb[0]) && CHUNK(nb[i]) != CHUNK(na[0]));
  }
  CHECK(gaps_a == 0 && gaps_b == 0);   /* 320 KB each: one chunk each */
  for (int i = 0; i < N; i++) CHECK(na[i]->value == i && nb[i]->value == -i);
  pooldestroy(&a);
  pooldestroy(&b);
}

/* Sizes mixed in one pool, and the calls beside poolalloc. */
static void mixed_and_variants(void) {
  pooldesc pd;
  poolinit(&pd, 0);
  char *s[64];
  for (int i = 0; i < 64; i++) {
    size_t n = 1 + (size_t)i * 37;
    s[i] = poolalloc(&pd, n);
    CHECK(s[i] && poolobjsize(&pd, s[i]) >= n);
    memset(s[i], i, n);
  }
  for (int i = 0; i < 64; i += 2) poolfree(&pd, s[i]);
  for (int i = 1; i < 64; i += 2) {
    size_t n = 1 + (size_t)i * 37;
    for (size_t k = 0; k < n; k++) if (s[i][k] != (char)i) { CHECK(!"kept"); break; }
  }
  /* calloc zeroes, even memory freed dirty. */
  unsigned char *z = poolcalloc(&pd, 100, 7);
  CHECK(z);
  for (int k = 0; z && k < 700; k++) if (z[k]) { CHECK(!"zero"); break; }
  errno = 0;
  CHECK(poolcalloc(&pd, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
  /* memalign */
  for (size_t a = 16; a <= 4096; a *= 2) {
    void *p = poolmemalign(&pd, a, 24);
    CHECK(p && ((uintptr_t)p & (a - 1)) == 0 && cohort_group_of(p) == POOL_GROUP);
  }
  errno = 0;
  CHECK(poolmemalign(&pd, 24, 8) == NULL && errno == EINVAL);
  errno = 0;
  CHECK(poolmemalign(&pd, 8192, 8) == NULL && errno == EINVAL);
  /* realloc within the pool: grows by moving, keeps the bytes */
  char *r = poolrealloc(&pd, NULL, 10);
  memcpy(r, "abcdefghi", 10);
  CHECK(poolrealloc(&pd, r, 8) == r);              /* the block holds it */
  char *r2 = poolrealloc(&pd, r, 5000);
  CHECK(r2 && !strcmp(r2, "abcdefghi") && cohort_group_of(r2) == POOL_GROUP);
  CHECK(poolrealloc(&pd, r2, 0) == NULL);
  /* too large for a chunk: refused, nothing else disturbed */
  errno = 0;
  CHECK(poolalloc(&pd, (size_t)8 << 20) == NULL && errno == ENOMEM);
  /* with 1 MiB chunks the largest object is the 896 KiB size class: the
   * next class, 1 MiB, cannot fit beside the bitmaps, header and colour */
  void *big = poolalloc(&pd, (size_t)896 << 10);
  CHECK(big && cohort_group_of(big) == POOL_GROUP);
  errno = 0;
  CHECK(poolalloc(&pd, ((size_t)896 << 10) + 1) == NULL && errno == ENOMEM);
  void *zero = poolalloc(&pd, 0);
  CHECK(zero && zero != poolalloc(&pd, 0));
  pooldestroy(&pd);
}

/* free() of a pool's objects, and realloc() moving one out. */
static void plain_free(void) {
  pooldesc pd;
  poolcreate(&pd);
  struct node *n[100];
  for (int i = 0; i < 100; i++) n[i] = poolalloc(&pd, sizeof(struct node));
  for (int i = 0; i < 100; i += 3) free(n[i]);
  CHECK(malloc_usable_size(n[1]) >= sizeof(struct node));
  n[1]->value = 77;
  struct node *m = realloc(n[1], 4000);   /* moves: out of the pool */
  CHECK(m && m->value == 77 && cohort_group_of(m) != POOL_GROUP);
  free(m);
  for (int i = 0; i < 100; i++) (void)poolalloc(&pd, sizeof(struct node));   /* takes the frees back */
  pooldestroy(&pd);
}

/* Other threads free a pool's objects while its thread goes on using it. */
struct hand { struct node **objs; int n; };
static void *free_them(void *arg) {
  struct hand *h = arg;
  for (int i = 0; i < h->n; i++) free(h->objs[i]);
  return NULL;
}
static void cross_thread(void) {
  pooldesc pd;
  poolcreate(&pd);
  enum { N = 40000 };
  static struct node *objs[N];
  for (int i = 0; i < N; i++) objs[i] = poolalloc(&pd, sizeof(struct node));
  struct hand h1 = {objs, N / 2}, h2 = {objs + N / 2, N / 4};
  pthread_t t1, t2;
  pthread_create(&t1, NULL, free_them, &h1);
  pthread_create(&t2, NULL, free_them, &h2);
  for (int i = 0; i < N; i++) ((struct node *)poolalloc(&pd, sizeof(struct node)))->value = i;   /* meanwhile */
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  for (int i = 3 * N / 4; i < N; i += 2) poolfree(&pd, objs[i]);
  pooldestroy(&pd);   /* blocks freed and not yet taken back go too */
  /* Its chunks serve again, with no trace of the frees on their way. */
  poolcreate(&pd);
  for (int i = 0; i < N; i++) ((struct node *)poolalloc(&pd, sizeof(struct node)))->value = i;
  pooldestroy(&pd);
}

/* Two threads, each with pools of its own, at once. */
static void *own_pools(void *arg) {
  long seed = (long)(intptr_t)arg;
  for (int round = 0; round < 20; round++) {
    pooldesc a, b;
    poolcreate(&a);
    poolinit(&b, 48);
    struct node *la = NULL, *lb = NULL;
    for (int i = 0; i < 5000; i++) {
      struct node *x = poolalloc(&a, sizeof *x);
      x->next = la; x->value = i + seed; la = x;
      struct node *y = poolalloc(&b, 48);
      y->next = lb; y->value = -i; lb = y;
    }
    long sa = 0, sb = 0;
    for (struct node *x = la; x; x = x->next) sa += x->value - seed;
    for (struct node *y = lb; y; y = y->next) sb += y->value;
    if (sa != 4999L * 5000 / 2 || sb != -sa) return (void *)1;
    pooldestroy(&a);
    pooldestroy(&b);
  }
  return NULL;
}
static void threads_own_pools(void) {
  pthread_t t[2];
  void *r[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, own_pools, (void *)(intptr_t)(i * 1000));
  for (int i = 0; i < 2; i++) { pthread_join(t[i], &r[i]); CHECK(r[i] == NULL); }
}

/* Many objects over many chunks: destroyed at once, memory accounted. */
static void big_destroy(const char *stats) {
  pooldesc pd;
  poolinit(&pd, 48);
  for (int i = 0; i < 200000; i++) CHECK(poolalloc(&pd, 48) != NULL);   /* ~10 MB */
  pooldestroy(&pd);
  /* the descriptor is a pool again after poolinit */
  poolinit(&pd, 48);
  void *p = poolalloc(&pd, 48);
  CHECK(p && cohort_group_of(p) == POOL_GROUP);
  pooldestroy(&pd);
  if (stats) CHECK(cohort_write_stats(stats) == 0);
}

/* A NULL pool is malloc's. */
static void null_pool(void) {
  void *p = poolalloc(NULL, 40);
  CHECK(p && cohort_group_of(p) != POOL_GROUP);
  p = poolrealloc(NULL, p, 80);
  CHECK(p);
  poolfree(NULL, p);
  p = poolcalloc(NULL, 4, 4);
  CHECK(p && !((char *)p)[15]);
  poolfree(NULL, p);
  p = poolmemalign(NULL, 256, 8);
  CHECK(p && !((uintptr_t)p & 255));
  poolfree(NULL, p);
  pooldestroy(NULL);
}

static int mistake(const char *m) {
  pooldesc a, b, copy;
  poolcreate(&a);
  poolcreate(&b);
  void *p = poolalloc(&a, 32), *q = poolalloc(&a, 32);
  (void)q;
  if (!strcmp(m, "double-poolfree")) { poolfree(&a, p); poolfree(&a, p); }
  else if (!strcmp(m, "poolfree-after-free")) { free(p); poolfree(&a, p); }
  else if (!strcmp(m, "free-after-poolfree")) { poolfree(&a, p); free(p); }
  else if (!strcmp(m, "wrong-pool")) poolfree(&b, p);
  else if (!strcmp(m, "malloc-pointer")) poolfree(&a, malloc(32));
  else if (!strcmp(m, "interior")) poolfree(&a, (char *)p + 16);
  else if (!strcmp(m, "alloc-after-destroy")) { pooldestroy(&a); poolalloc(&a, 8); }
  else if (!strcmp(m, "destroy-twice")) { pooldestroy(&a); pooldestroy(&a); }
  else if (!strcmp(m, "copy-after-destroy")) { copy = a; pooldestroy(&a); poolalloc(&copy, 8); }
  else if (!strcmp(m, "reused-copy")) { copy = a; pooldestroy(&a); poolcreate(&b); poolfree(&copy, p); }
  else if (!strcmp(m, "free-after-destroy")) { pooldestroy(&a); free(p); }
  else if (!strcmp(m, "uninitialised")) { pooldesc u; memset(&u, 0x5a, sizeof u); poolalloc(&u, 8); }
  else if (!strcmp(m, "realloc-freed")) { poolfree(&a, p); poolrealloc(&a, p, 100); }
  else { fprintf(stderr, "unknown mistake %s\n", m); return 2; }
  printf("not stopped\n");
  return 0;
}

/* A destroyed pool's chunks wait as spares, and go once they have waited
 * (runtime/memory/chunk.c): statistics before and after the wait. */
static int decay(const char *before, const char *after) {
  pooldesc pd;
  poolcreate(&pd);
  for (int i = 0; i < 20 * 16384; i++) poolalloc(&pd, 64);   /* 20 MiB */
  pooldestroy(&pd);
  cohort_write_stats(before);
  struct timespec t = {1, 300000000};
  nanosleep(&t, NULL);
  poolcreate(&pd);
  poolalloc(&pd, 64);   /* takes a spare, and purges those that waited */
  pooldestroy(&pd);
  cohort_write_stats(after);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "decay")) return decay(argv[2], argv[3]);
  if (argc > 1 && strcmp(argv[1], "stats")) return mistake(argv[1]);
  uniform_contiguous();
  two_pools_apart();
  mixed_and_variants();
  plain_free();
  cross_thread();
  threads_own_pools();
  null_pool();
  big_destroy(argc > 2 ? argv[2] : NULL);
  if (failures) { fprintf(stderr, "test_pool: %d check(s) failed\n", failures); return 1; }
  printf("test_pool: ok\n");
  return 0;
}
