/* listfrag: the Object-Local Heaps experiment. A linked list is built while
 * unrelated small allocations (kept alive) interleave with probability P%;
 * then only the list is iterated, many times. Usage: listfrag N P PASSES. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

struct item { struct item *next; long key; long data[2]; };

NOINLINE static struct item *new_item(long k) {
  struct item *it = malloc(sizeof *it);
  if (!it) exit(1);
  it->key = k; it->data[0] = k * 2; it->data[1] = k ^ 5; it->next = NULL;
  return it;
}
NOINLINE static void *new_junk(size_t n, long tag) {
  char *j = malloc(n);
  if (!j) exit(1);
  j[0] = (char)tag;
  return j;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  int p = argc > 2 ? atoi(argv[2]) : 50;
  int passes = argc > 3 ? atoi(argv[3]) : 10;
  void **junk = malloc(sizeof(void *) * (size_t)n);
  long nj = 0;
  unsigned long rng = 42;
  struct item *head = NULL, **tail = &head;
  for (long i = 0; i < n; i++) {
    *tail = new_item(i); tail = &(*tail)->next;
    rng = rng * 6364136223846793005ul + 1;
    if ((long)((rng >> 33) % 100) < p) junk[nj++] = new_junk(16 + (rng >> 40) % 48, i);
  }
  long s = 0;
  for (int q = 0; q < passes; q++)
    for (struct item *it = head; it; it = it->next) s += it->key + it->data[q & 1];
  for (long i = 0; i < nj; i++) { s += ((char *)junk[i])[0]; free(junk[i]); }
  while (head) { struct item *x = head->next; free(head); head = x; }
  free(junk);
  printf("listfrag %ld %d %d checksum %ld\n", n, p, passes, s);
  return 0;
}
