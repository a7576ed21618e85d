// Patched selector sites where control does not simply return: C++
// exceptions thrown through them, longjmp out of them, recursion through
// them (deep enough to overflow the activation stack when two stop sites
// alternate), and threads. Every object is logged as "label group", where
// the label says which selector call sites were on the stack when it was
// made; tests/integration/test_patch.py knows each label's group under its plan and
// checks both the walked and the patched runtime against it.
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdexcept>

#define NOINLINE __attribute__((noinline, noipa))

static int (*group_of)(const void *);
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static volatile unsigned long sink;

static void note(const char *label, void *p) {
  pthread_mutex_lock(&log_lock);
  fprintf(out, "%s %d\n", label, group_of ? group_of(p) : -1);
  pthread_mutex_unlock(&log_lock);
  sink += (unsigned long)p;
}

// The allocation itself: its malloc call is the entry, a "walk" site.
extern "C" NOINLINE void *leaf(size_t n) {
  void *p = malloc(n);
  sink += (unsigned long)p;
  return p;
}

enum how { RETURN, THROW, JUMP };
static thread_local jmp_buf *jump_to;

// work() allocates, then returns, throws or longjmps out.
extern "C" NOINLINE void *work(const char *label, int how) {
  void *p = leaf(24);
  note(label, p);
  if (how == THROW) throw std::runtime_error(label);
  if (how == JUMP) longjmp(*jump_to, 1);
  return p;
}

// The selector sites: enter_a's and enter_b's calls of work and of each other.
extern "C" NOINLINE void *enter_b(const char *label, int how);
extern "C" NOINLINE void *enter_a(const char *label, int how, bool nest) {
  void *p = nest ? enter_b(label, how) : work(label, how);
  sink += (unsigned long)p;
  return p;
}
extern "C" NOINLINE void *enter_b(const char *label, int how) {
  void *p = work(label, how);
  sink += (unsigned long)p;
  return p;
}

// Recursion through one selector site (rec_a -> rec_a), then work.
extern "C" NOINLINE void *rec_a(int n) {
  void *p = n ? rec_a(n - 1) : work("rec", RETURN);
  sink += (unsigned long)p;
  return p;
}

// Two stop sites calling each other: each call changes the innermost stop.
extern "C" NOINLINE void *pong(int n);
extern "C" NOINLINE void *ping(int n) {
  void *p = n ? pong(n - 1) : work("ping-last", RETURN);
  sink += (unsigned long)p;
  return p;
}
extern "C" NOINLINE void *pong(int n) {
  void *p = n ? ping(n - 1) : work("pong-last", RETURN);
  sink += (unsigned long)p;
  return p;
}

// A catch one frame down from main, and an allocation right after it at
// the catcher's own depth.
static NOINLINE void catcher(int round) {
  try {
    enter_a(round & 1 ? "ab-thrown" : "a-thrown", THROW, round & 1);
  } catch (const std::exception &) {
    note("after-catch", leaf(24));
  }
  note("after-catch-deeper", work("plain", RETURN));
}

static NOINLINE void jumper(bool nest) {
  jmp_buf here;
  jump_to = &here;
  if (!setjmp(here)) enter_a(nest ? "ab-jumped" : "a-jumped", JUMP, nest);
  note("after-jump", leaf(24));
  work("plain", RETURN);
}

static void rounds(int n) {
  for (int i = 0; i < n; i++) {
    enter_a("a", RETURN, false);
    enter_b("b", RETURN);
    enter_a("ab", RETURN, true);
    work("plain", RETURN);
    catcher(i);
    jumper(i & 1);
    rec_a(40 + i % 7);
    ping(2 + 2 * (i % 3));        // ends in ping: pong's call of ping is the innermost stop
    ping(1 + 2 * (i % 3));        // ends in pong
    ping(300 + (i % 2));          // 300 alternating stops: beyond the activation stack
  }
}

static void *thread_main(void *arg) {
  rounds((int)(long)arg);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: patchsites LOG [ROUNDS] [THREADS]\n"); return 2; }
  group_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  out = fopen(argv[1], "w");
  if (!out) { perror(argv[1]); return 1; }
  int n = argc > 2 ? atoi(argv[2]) : 20, threads = argc > 3 ? atoi(argv[3]) : 3;
  rounds(n);
  pthread_t t[16];
  if (threads > 16) threads = 16;
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, thread_main, (void *)(long)n);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  fclose(out);
  printf("done\n");
  return 0;
}
