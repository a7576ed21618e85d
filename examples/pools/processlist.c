/* processlist: Figure 1 of Automatic Pool Allocation (Lattner & Adve, PLDI
 * 2005) on Cohort's pool API, written for Cohort.
 *
 * A list L is cloned into two lists A and B by a predicate on each node's
 * datum, then each list is processed and freed. With malloc (the figure's
 * (a)), A's and B's nodes are allocated in turn and interleave in memory,
 * so a walk of either touches lines half full of the other's nodes. With a
 * pool per list ((b)), each list's nodes lie one after another in its own
 * pool, and pooldestroy releases each list at once.
 *
 *   processlist malloc  N ROUNDS   (a): malloc, free loops
 *   processlist pools   N ROUNDS   (b): poolalloc, poolfree loops, pooldestroy
 *   processlist destroy N ROUNDS   (b) as the paper's later passes leave it:
 *                                  no free loops, pooldestroy alone
 *   processlist addresses N        (b) once, printing each node of A and B:
 *                                  list, address, Cohort group
 *
 * The first three print the same sums. Built twice: `processlist`, linked
 * with -lcohort as a program using pools is, and `processlist-plain`,
 * linked with nothing, so that the malloc runs of scripts/bench-pools.py
 * measure the C library (or a preloaded allocator) alone; the weak
 * references let the one source serve both. */
#include <cohort.h>
#include <cohort/pool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma weak poolcreate
#pragma weak poolalloc
#pragma weak poolfree
#pragma weak pooldestroy
#pragma weak cohort_group_of

typedef struct list { struct list *Next; int *Data; } list;

enum { MALLOC, POOLS, DESTROY, ADDRESSES };
static int mode;
static long passes = 8;   /* walks of each list per round */

/* About half of the data, in no pattern a prefetcher follows. */
static int some_predicate(const int *d) { return (((unsigned)*d * 2654435761u) >> 16) & 1; }

static list *createnode(pooldesc *PD, int *Data) {
  list *New = mode == MALLOC ? malloc(sizeof(list)) : poolalloc(PD, sizeof(list));
  if (!New) { perror("processlist"); exit(1); }
  New->Data = Data;
  return New;
}

/* The figure's recursion, as a loop: a list of millions would overflow the
 * stack. The nodes are made in the same order. */
static void splitclone(pooldesc *PD1, pooldesc *PD2, list *L, list **R1, list **R2) {
  for (; L; L = L->Next) {
    if (some_predicate(L->Data)) {
      *R1 = createnode(PD1, L->Data);
      R1 = &(*R1)->Next;
    } else {
      *R2 = createnode(PD2, L->Data);
      R2 = &(*R2)->Next;
    }
  }
  *R1 = *R2 = 0;
}

static long processPortion(const list *L) {
  long sum = 0;
  for (long k = 0; k < passes; k++)
    for (const list *p = L; p; p = p->Next) sum += *p->Data ^ k;
  return sum;
}

static void processlist(list *L, long *sa, long *sb) {
  list *A, *B, *tmp;
  pooldesc PD1, PD2;
  if (mode != MALLOC) { poolcreate(&PD1); poolcreate(&PD2); }
  splitclone(&PD1, &PD2, L, &A, &B);
  *sa += processPortion(A);   /* process the first list */
  *sb += processPortion(B);   /* process the second list */
  if (mode == ADDRESSES) {
    for (list *p = A; p; p = p->Next) printf("A %p %d\n", (void *)p, cohort_group_of(p));
    for (list *p = B; p; p = p->Next) printf("B %p %d\n", (void *)p, cohort_group_of(p));
  }
  if (mode == MALLOC) {
    while (A) { tmp = A->Next; free(A); A = tmp; }
    while (B) { tmp = B->Next; free(B); B = tmp; }
    return;
  }
  if (mode == POOLS) {
    while (A) { tmp = A->Next; poolfree(&PD1, A); A = tmp; }
    while (B) { tmp = B->Next; poolfree(&PD2, B); B = tmp; }
  }
  pooldestroy(&PD1);
  pooldestroy(&PD2);
}

int main(int argc, char **argv) {
  static const char *modes[] = {"malloc", "pools", "destroy", "addresses"};
  mode = -1;
  for (int m = 0; argc > 1 && m < 4; m++) if (!strcmp(argv[1], modes[m])) mode = m;
  long n = argc > 2 ? atol(argv[2]) : 0, rounds = argc > 3 ? atol(argv[3]) : 1;
  if (mode < 0 || n <= 0 || rounds <= 0) {
    fprintf(stderr, "usage: processlist malloc|pools|destroy N ROUNDS, or processlist addresses N\n");
    return 2;
  }
  if (mode != MALLOC && !poolcreate) {
    fprintf(stderr, "processlist: %s needs the pool API: link with -lcohort, or preload libcohort.so\n", argv[1]);
    return 2;
  }
  if (mode == ADDRESSES) rounds = 1, passes = 1;
  /* L and its data, made once; its nodes are not in any pool. */
  int *data = malloc((size_t)n * sizeof *data);
  list *L = NULL, **at = &L;
  if (!data) { perror("processlist"); return 1; }
  for (long i = 0; i < n; i++) {
    data[i] = (int)i;
    list *node = malloc(sizeof *node);
    if (!node) { perror("processlist"); return 1; }
    node->Data = &data[i];
    *at = node;
    at = &node->Next;
  }
  *at = NULL;
  long sa = 0, sb = 0;
  for (long r = 0; r < rounds; r++) processlist(L, &sa, &sb);
  if (mode != ADDRESSES) printf("processlist: %ld nodes, %ld rounds: A %ld, B %ld\n", n, rounds, sa, sb);
  return 0;
}
