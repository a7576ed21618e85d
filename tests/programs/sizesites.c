/* Allocation call sites with known size behaviour, for MO's monitors
 * (tests/integration/test_mo.py). Each site is its own function, so the test can name
 * it from the symbol table:
 *   node_site   one size, hot: a list of N nodes
 *   text_site   a new size each time, hot: N strings
 *   cold_site   one size, a handful of requests
 *   late_site   one size for N requests, then N/10 of another size
 * With a second argument, every late_site object of the first size is then
 * grown by realloc, and the program prints how many of them are still in a
 * Cohort pool (cohort_group_of, when the runtime is preloaded). All objects are freed in the end, so every pool
 * empties. Prints a checksum. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node { struct node *next; long key; long pad[4]; };

/* Each stores into the new object, so the call is not a tail call: the
 * call site is in the function, whatever its callers. */
static __attribute__((noipa)) struct node *node_site(void) {
  struct node *x = malloc(sizeof *x);
  if (x) x->next = NULL;
  return x;
}
static __attribute__((noipa)) char *text_site(size_t n) {
  char *t = malloc(n);
  if (t) t[0] = 0;
  return t;
}
static __attribute__((noipa)) long *cold_site(void) {
  long *p = malloc(24);
  if (p) p[0] = 0;
  return p;
}
static __attribute__((noipa)) long *late_site(size_t n) {
  long *p = malloc(n);
  if (p) p[0] = 0;
  return p;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000, sum = 0;
  struct node *head = NULL;
  char **texts = malloc((size_t)n * sizeof *texts);
  long **late = malloc((size_t)(n + n / 10) * sizeof *late);
  long *cold[5];
  if (!texts || !late) return 1;
  for (long i = 0; i < n; i++) {
    struct node *x = node_site();
    if (!x) return 1;
    x->key = i;
    x->next = head;
    head = x;
    texts[i] = text_site((size_t)(i % 200) + 1);
    if (!texts[i]) return 1;
    memset(texts[i], 'a' + (int)(i % 26), (size_t)(i % 200));
    texts[i][i % 200] = 0;
    late[i] = late_site(40);
    if (!late[i]) return 1;
    late[i][0] = i;
  }
  for (long i = 0; i < n / 10; i++) {
    late[n + i] = late_site(72);
    if (!late[n + i]) return 1;
    late[n + i][0] = -i;
  }
  for (int i = 0; i < 5; i++) {
    cold[i] = cold_site();
    if (!cold[i]) return 1;
    cold[i][0] = i;
  }
  if (argc > 2) {
    int (*group_of)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
    long pooled = 0;
    for (long i = 0; i < n; i++) {
      long *p = realloc(late[i], 80);
      if (!p) return 1;
      p[9] = p[0];
      late[i] = p;
      pooled += group_of && group_of(p) >= 0;
    }
    printf("pooled after realloc: %ld\n", pooled);
  }
  for (struct node *x = head; x; x = x->next) sum += x->key;
  for (long i = 0; i < n; i++) sum += (long)strlen(texts[i]) + late[i][0];
  for (long i = 0; i < n / 10; i++) sum += late[n + i][0];
  for (int i = 0; i < 5; i++) sum += cold[i][0];
  while (head) {
    struct node *x = head->next;
    free(head);
    head = x;
  }
  for (long i = 0; i < n; i++) free(texts[i]);
  for (long i = 0; i < n + n / 10; i++) free(late[i]);
  for (int i = 0; i < 5; i++) free(cold[i]);
  free(texts);
  free(late);
  printf("%ld\n", sum);
  return 0;
}
