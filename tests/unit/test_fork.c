/* fork() in a multi-threaded program: while other threads allocate and free,
 * the child must find the allocator usable, including for objects the parent
 * made before the fork. */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

static void *churn(void *arg) {
  (void)arg;
  void *keep[32] = {0};
  unsigned i = 0;
  while (!stop) {
    unsigned s = i++ % 32;
    free(keep[s]);
    keep[s] = malloc(16 + s * 24);
    memset(keep[s], (int)s, 16 + s * 24);
  }
  for (int k = 0; k < 32; k++) free(keep[k]);
  return NULL;
}

static int child_work(void **parent_objs, int n) {
  for (int i = 0; i < n; i++) {
    if (((unsigned char *)parent_objs[i])[0] != (unsigned char)i) return 10;
    free(parent_objs[i]);
  }
  void *mine[5000];
  for (int r = 0; r < 3; r++) {
    for (int i = 0; i < 5000; i++) { mine[i] = malloc(8 + i % 300); memset(mine[i], 7, 8 + i % 300); }
    for (int i = 0; i < 5000; i++) free(mine[i]);
  }
  char *s = strdup("child ok");
  int ok = s && !strcmp(s, "child ok");
  free(s);
  return ok ? 0 : 11;
}

int main(void) {
  check_init();
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, churn, NULL);
  for (int round = 0; round < 20; round++) {
    void *objs[100];
    for (int i = 0; i < 100; i++) { objs[i] = malloc(32 + i); memset(objs[i], i, 32 + i); }
    pid_t pid = fork();
    if (pid == 0) _exit(child_work(objs, 100));
    CHECK(pid > 0);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 100; i++) free(objs[i]);
  }
  stop = 1;
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  return check_done("test_fork");
}
