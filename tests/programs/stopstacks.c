/* Stop sites' records against stacks that are not the thread's own, and a
 * request of 0 bytes that nothing live decides. Two kinds (red, blue) are
 * made through one list-cell helper and the program's own wrapper; a plan
 * makes each kind's call of the helper a stop site.
 *   stopstacks zero        malloc(0) through the wrapper, outside any stop
 *                          call: with no rest group, the next allocator's
 *   stopstacks getattr     the thread's first allocation is made inside its
 *                          own call of pthread_getattr_np
 *   stopstacks indirect    green is made through a pointer to the helper
 *                          (an indirect call: a stop site no stub can
 *                          reach), alone and inside red's call; prints
 *                          how many of each kind went to another group
 *   stopstacks below|above inside red's call, before its cell is made, a
 *                          coroutine on a stack below (or above) the
 *                          thread's makes blue: prints how many of each
 *                          kind's objects went to a group other than its
 *                          own, as the runtime says
 * Run in a thread of its own, whose stack bounds the runtime knows. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define NOINLINE __attribute__((noinline, noclone))
#define KEEP __asm__ volatile("" ::: "memory")

int cohort_group_of(const void *p) __attribute__((weak));
static int group_of(const void *p) { return cohort_group_of ? cohort_group_of(p) : -1; }

NOINLINE void *xalloc(size_t n) { void *p = malloc(n); KEEP; return p; }
static ucontext_t main_uc, co_uc;
static int switch_in_cell;   /* the next cell made switches to the coroutine first */
static int green_in_cell;    /* the next cell made makes green first, inside that call */
static void *nested_green;
NOINLINE void *make_green(void);
NOINLINE void *new_cell(size_t n) {
  if (green_in_cell) {
    green_in_cell = 0;
    nested_green = make_green();   /* red's stop live, green's (unpatched) the innermost */
  }
  if (switch_in_cell) {
    switch_in_cell = 0;
    swapcontext(&main_uc, &co_uc);
  }
  void *p = xalloc(n);
  KEEP;
  return p;
}
NOINLINE void *make_blue(void) { void *p = new_cell(48); KEEP; return p; }
NOINLINE void *make_red(void) { void *p = new_cell(48); KEEP; return p; }
static void *(*volatile cell_fn)(size_t) = new_cell;
NOINLINE void *make_green(void) { void *p = cell_fn(48); KEEP; return p; }


static int blue_group;
static const char *where;
enum { ROUNDS = 1000, STACK = 1 << 16 };

static void coroutine(void) {
  for (;;) {
    void *p = make_blue();
    blue_group = group_of(p);
    free(p);
    swapcontext(&co_uc, &main_uc);
  }
}

/* Mapped before the thread started, so above its stack: mappings grow down. */
static char *early;

/* A mapping below the thread's stack, a few MiB away, or the early one above. */
static char *other_stack(int above) {
  if (above) return early;
  pthread_attr_t at;
  void *addr;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &at) || pthread_attr_getstack(&at, &addr, &size)) return NULL;
  pthread_attr_destroy(&at);
  uintptr_t lo = (uintptr_t)addr;
  (void)size;
  for (uintptr_t d = 4 << 20; d < ((uintptr_t)1 << 34); d += 1 << 20) {
    uintptr_t at_ = lo - d - STACK;
    void *p = mmap((void *)at_, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                   -1, 0);
    if (p != MAP_FAILED) return p;
  }
  return NULL;
}

static void *run(void *arg) {
  (void)arg;
  if (!strcmp(where, "getattr")) {   /* the thread's first allocation, inside pthread_getattr_np */
    pthread_attr_t at;
    if (pthread_getattr_np(pthread_self(), &at) == 0) pthread_attr_destroy(&at);
    free(make_red());
    puts("getattr: ok");
    return NULL;
  }
  if (!strcmp(where, "indirect")) {
    void *r0 = make_red(), *b0 = make_blue(), *g0 = make_green();
    int red = group_of(r0), blue = group_of(b0), green = group_of(g0);
    free(r0); free(b0); free(g0);
    int wrong_red = 0, wrong_blue = 0, wrong_green = 0;
    for (int i = 0; i < ROUNDS; i++) {
      void *r = make_red(), *b = make_blue(), *g = make_green();
      green_in_cell = 1;
      void *r2 = make_red(), *g2 = nested_green;
      wrong_red += group_of(r2) != red;
      wrong_red += group_of(r) != red;
      wrong_blue += group_of(b) != blue;
      wrong_green += (group_of(g) != green) + (group_of(g2) != green);
      free(r); free(b); free(g); free(g2); free(r2);
    }
    printf("indirect: red %d blue %d green %d wrong %d %d %d\n", red, blue, green, wrong_red, wrong_blue, wrong_green);
    return NULL;
  }
  if (!strcmp(where, "zero")) {
    for (int i = 0; i < ROUNDS; i++) free(make_red());   /* a live record, then none */
    for (int i = 0; i < ROUNDS; i++) {
      void *p = xalloc(0);
      if (!p || group_of(p) >= 0) { printf("zero: %p in group %d\n", p, p ? group_of(p) : -9); return NULL; }
      free(p);
    }
    puts("zero: ok");
    return NULL;
  }
  /* What each kind gets on the thread's own stack. */
  void *r = make_red(), *b = make_blue();
  int red = group_of(r), blue = group_of(b);
  free(r);
  free(b);
  char *st = other_stack(!strcmp(where, "above"));
  if (!st) { puts("no stack"); return NULL; }
  getcontext(&co_uc);
  co_uc.uc_stack.ss_sp = st;
  co_uc.uc_stack.ss_size = STACK;
  makecontext(&co_uc, coroutine, 0);
  int wrong_red = 0, wrong_blue = 0;
  for (int i = 0; i < ROUNDS; i++) {
    switch_in_cell = 1;
    void *p = make_red();   /* inside red's call: blue on the other stack, then red's cell */
    wrong_blue += blue_group != blue;
    wrong_red += group_of(p) != red;
    free(p);
  }
  printf("%s: red %d blue %d wrong red %d wrong blue %d\n", where, red, blue, wrong_red, wrong_blue);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: stopstacks zero|getattr|indirect|below|above\n"); return 2; }
  where = argv[1];
  early = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (early == MAP_FAILED) early = NULL;
  pthread_t t;
  if (pthread_create(&t, NULL, run, NULL)) return 1;
  pthread_join(t, NULL);
  return 0;
}
