/* Loads argv[1] with dlopen after start-up and makes objects through its
 * make_in_lib0..3; prints each object's group ("lib G") and then one made
 * directly ("main G"). With a second argument `threaded`, a thread that
 * waits until the end is running meanwhile; with `thread-after`, that
 * thread starts after the dlopen, before the first object. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int done_pipe[2];
static void *wait_for_end(void *arg) {
  char c;
  (void)arg;
  while (read(done_pipe[0], &c, 1) < 0) {}
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: dlpatch LIB\n"); return 2; }
  int (*group_of)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  pthread_t waiter;
  int threaded = argc > 2 && !strcmp(argv[2], "threaded"), after = argc > 2 && !strcmp(argv[2], "thread-after");
  if ((threaded || after) && pipe(done_pipe) != 0) return 1;
  if (threaded && pthread_create(&waiter, NULL, wait_for_end, NULL) != 0) return 1;
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  if (after && pthread_create(&waiter, NULL, wait_for_end, NULL) != 0) return 1;
  for (int k = 0; k < 4; k++) {
    char name[32];
    snprintf(name, sizeof name, "make_in_lib%d", k);
    void *(*make)(void) = (void *(*)(void))dlsym(h, name);
    for (int i = 0; i < 10000; i++) {
      void *p = make();
      if (i % 1000 == 0) printf("lib %d\n", group_of ? group_of(p) : -1);
    }
  }
  void *q = malloc(24);
  printf("main %d\n", group_of ? group_of(q) : -1);
  if (threaded || after) {
    close(done_pipe[1]);
    pthread_join(waiter, NULL);
  }
  return 0;
}
