/* Two groups of one object size for DPA's churn test (tests/integration/test_dpa.py):
 * temp() makes a 32-byte object, uses it and frees it, so no more than one
 * of its objects is ever live; build() makes list nodes that stay live to
 * the end. The two alternate, four temporaries to a node.
 * Usage: churnpools NODES; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

struct node { struct node *next; long v[3]; };

static __attribute__((noipa)) long temp(long i) {
  long *t = malloc(4 * sizeof *t);
  if (!t) abort();
  t[0] = i;
  t[1] = i * 3;
  t[2] = t[0] ^ t[1];
  t[3] = t[2] + 1;
  long r = t[3];
  free(t);
  return r;
}

static __attribute__((noipa)) struct node *build(long count, long *sum) {
  struct node *head = NULL;
  for (long i = 0; i < count; i++) {
    for (int k = 0; k < 4; k++) *sum += temp(i * 4 + k);
    struct node *n = malloc(sizeof *n);
    if (!n) abort();
    n->next = head;
    n->v[0] = i;
    n->v[1] = i * 7;
    n->v[2] = i ^ 5;
    head = n;
  }
  return head;
}

int main(int argc, char **argv) {
  long count = argc > 1 ? atol(argv[1]) : 100000, sum = 0;
  struct node *head = build(count, &sum);
  for (struct node *n = head; n; n = n->next) sum += n->v[0] + n->v[1] - n->v[2];
  while (head) {
    struct node *next = head->next;
    free(head);
    head = next;
  }
  printf("%ld\n", sum);
  return 0;
}
