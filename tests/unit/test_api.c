/* Every entry point of the C allocation API: alignment, sizes, zeroing,
 * realloc semantics, overflow, usable size, and (in "all" mode) that small
 * objects really land in group chunks. */
#include "check.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static int grouped;

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 7);
}
static int same(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) if (p[i] != (unsigned char)(seed + i * 7)) return 0;
  return 1;
}

static void test_malloc(void) {
  for (size_t n = 0; n <= 5000; n += (n < 64 ? 1 : 37)) {
    unsigned char *p = malloc(n);
    CHECK(p != NULL);
    CHECK(((uintptr_t)p & 7) == 0);
    CHECK(malloc_usable_size(p) >= n);
    if (grouped) CHECK((group_of(p) >= 0) == (n <= 4096));
    fill(p, n, (unsigned)n);
    CHECK(same(p, n, (unsigned)n));
    free(p);
  }
  free(NULL);
  CHECK(malloc_usable_size(NULL) == 0);
  void *z = malloc(0);
  CHECK(z != NULL);
  free(z);
}

static void test_calloc(void) {
  /* dirty memory first, so a reused block must be cleared */
  for (int round = 0; round < 2; round++) {
    void *ps[200];
    for (int i = 0; i < 200; i++) { ps[i] = malloc(48 + i % 5 * 8); memset(ps[i], 0xff, 48 + i % 5 * 8); }
    for (int i = 0; i < 200; i++) free(ps[i]);
    for (int i = 0; i < 200; i++) {
      size_t n = 48 + i % 5 * 8;
      unsigned char *c = calloc(1, n);
      CHECK(c != NULL);
      int zero = 1;
      for (size_t k = 0; k < n; k++) zero &= c[k] == 0;
      CHECK(zero);
      ps[i] = c;
    }
    for (int i = 0; i < 200; i++) free(ps[i]);
  }
  errno = 0;
  CHECK(calloc(SIZE_MAX, 2) == NULL);
  CHECK(errno == ENOMEM);
  errno = 0;
  CHECK(calloc((SIZE_MAX >> 1) + 2, 2) == NULL && errno == ENOMEM);
  void *z = calloc(0, 10);
  CHECK(z != NULL);
  free(z);
}

/* Bumps a block and grows it; *arg: whether realloc moved it. */
static void *grow_last(void *arg) {
  unsigned char *last = malloc(64);
  fill(last, 64, 3);
  unsigned char *grown = realloc(last, 256);
  CHECK(grown != NULL && same(grown, 64, 3));
  *(int *)arg = grown != last;
  free(grown);
  return NULL;
}

static void test_realloc(void) {
  unsigned char *p = realloc(NULL, 24);
  CHECK(p != NULL);
  fill(p, 24, 1);
  /* growth through every size, data preserved */
  size_t have = 24;
  for (size_t n = 32; n <= 6000; n = n * 3 / 2) {
    p = realloc(p, n);
    CHECK(p != NULL);
    CHECK(same(p, 24, 1));
    CHECK(malloc_usable_size(p) >= n);
    have = n;
  }
  (void)have;
  /* shrink keeps the prefix */
  p = realloc(p, 16);
  CHECK(p != NULL && same(p, 16, 1));
  free(p);

  /* in place: shrinking a grouped block keeps its address (but the checked
   * mode moves every block, to put its redzones round the new size) */
  const char *ck = getenv("COHORT_CHECK");
  int in_place = grouped && !(ck && !strcmp(ck, "1"));
  unsigned char *q = malloc(512);
  fill(q, 512, 9);
  unsigned char *q2 = realloc(q, 100);
  if (in_place) CHECK(q2 == q);
  CHECK(same(q2, 100, 9));
  /* growing the most recent block of a chunk stays in place too: in a new
   * thread, whose chunks are new, the block is bumped (in this one, bins
   * full of this test's freed blocks may serve it) */
  if (grouped) {
    pthread_t t;
    int moved = 0;
    CHECK(pthread_create(&t, NULL, grow_last, &moved) == 0);
    pthread_join(t, NULL);
    if (in_place) CHECK(!moved);
  }
  free(q2);

  /* realloc(p, 0) of a grouped block frees it and returns NULL, as glibc
   * does; a block of the next allocator's gets that allocator's answer
   * (mimalloc's is a new minimal block) */
  void *r = malloc(40);
  void *r0 = realloc(r, 0);
  if (grouped) CHECK(r0 == NULL);
  free(r0);

  /* reallocarray overflow */
  void *a = malloc(8);
  errno = 0;
  CHECK(reallocarray(a, SIZE_MAX, 16) == NULL && errno == ENOMEM);
  void *b = reallocarray(a, 10, 8);
  CHECK(b != NULL);
  free(b);

  /* a failed realloc leaves the block alone */
  unsigned char *keep = malloc(64);
  fill(keep, 64, 5);
  errno = 0;
  CHECK(realloc(keep, SIZE_MAX - 4096) == NULL);
  CHECK(same(keep, 64, 5));
  free(keep);
}

static void test_aligned(void) {
  for (size_t a = 8; a <= 8192; a *= 2) {
    for (size_t n = 1; n <= 3000; n = n * 5 + 3) {
      void *p = memalign(a, n);
      CHECK(p && ((uintptr_t)p % a) == 0);
      CHECK(malloc_usable_size(p) >= n);
      memset(p, 1, n);
      free(p);
      p = aligned_alloc(a, n);
      CHECK(p && ((uintptr_t)p % a) == 0);
      free(p);
      void *q = NULL;
      CHECK(posix_memalign(&q, a, n) == 0);
      CHECK(q && ((uintptr_t)q % a) == 0);
      if (grouped && a <= 4096 && n <= 4096) CHECK(group_of(q) >= 0);
      free(q);
    }
  }
  void *q = (void *)1;
  CHECK(posix_memalign(&q, 24, 10) == EINVAL);
  CHECK(posix_memalign(&q, 4, 10) == EINVAL);
  CHECK(q == (void *)1);
  long ps = sysconf(_SC_PAGESIZE);
  void *v = valloc(100);
  CHECK(v && (uintptr_t)v % (uintptr_t)ps == 0);
  free(v);
  void *pv = pvalloc(100);
  CHECK(pv && (uintptr_t)pv % (uintptr_t)ps == 0);
  CHECK(malloc_usable_size(pv) >= (size_t)ps);
  free(pv);
  /* memalign rounds a non-power-of-two alignment up, like glibc */
  void *odd = memalign(24, 10);
  CHECK(odd && (uintptr_t)odd % 32 == 0);
  free(odd);
}

int main(void) {
  grouped = check_init();
  test_malloc();
  test_calloc();
  test_realloc();
  test_aligned();
  return check_done("test_api");
}
