/* Misuse inside a group chunk must stop the program with a clear message
 * (as glibc does), never corrupt the chunk. argv[1] picks the mistake. */
#include "check.h"

#include <malloc.h>
#include <stdint.h>
#include <pthread.h>
#include <string.h>

static void *free_in_thread(void *p) { free(p); return NULL; }
/* The same from a thread with a heap of its own (it has allocated), whose
 * frees into other threads' chunks wait in a batch: the second finds the
 * block still there. */
static void *free_twice_with_heap(void *p) {
  void *mine = malloc(32);
  free(p);
  free(p);
  free(mine);
  return NULL;
}
static void free_elsewhere(void *p) {
  pthread_t t;
  pthread_create(&t, NULL, free_in_thread, p);
  pthread_join(t, NULL);
}

int main(int argc, char **argv) {
  check_init();
  const char *what = argc > 1 ? argv[1] : "";
  char *p = malloc(64);
  char *keep = malloc(64);   /* keeps the chunk alive */
  if (!strcmp(what, "double-free")) { free(p); free(p); }
  else if (!strcmp(what, "interior")) free(p + 8);
  else if (!strcmp(what, "misaligned")) free(p + 3);
  else if (!strcmp(what, "unallocated")) free(keep + 4096);
  else if (!strcmp(what, "realloc-freed")) { free(p); p = realloc(p, 100); }
  else if (!strcmp(what, "usable-freed")) { free(p); printf("%zu\n", malloc_usable_size(p)); }
  /* the block just below the bump pointer, and one big enough for a mixed bin */
  else if (!strcmp(what, "double-free-last")) { free(keep); free(keep); }
  else if (!strcmp(what, "double-free-large")) { char *q = malloc(1000); free(q); free(q); }
  /* a class's block (320 bytes) freed again while it waits second in the
   * class's recent list */
  else if (!strcmp(what, "double-free-class-later")) {
    char *a = malloc(300), *b = malloc(300);
    free(a);
    free(b);
    free(a);
  }
  /* the pointer where the next block would start: its start bit marks the
   * bump pointer, not a block */
  else if (!strcmp(what, "free-at-bump")) free(keep + 64);
  /* freed here and then by another thread, or the other way round */
  else if (!strcmp(what, "double-free-remote")) { free(p); free_elsewhere(p); }
  else if (!strcmp(what, "double-free-after-remote")) { free_elsewhere(p); free(p); }
  else if (!strcmp(what, "double-free-batched")) {
    pthread_t t;
    pthread_create(&t, NULL, free_twice_with_heap, p);
    pthread_join(t, NULL);
  }
  /* freed again after its chunk emptied and started over */
  else if (!strcmp(what, "double-free-emptied")) { free(p); free(keep); free(p); }
  /* freed again after its chunk emptied and was retired: a chunk holds
   * about 250 of these blocks, so b[400] is in the second (the first holds
   * p and keep), which neither is current nor keeps a live block */
  else if (!strcmp(what, "double-free-retired")) {
    enum { N = 2048 };
    static char *b[N];
    for (int i = 0; i < N; i++) b[i] = malloc(4000);
    for (int i = 0; i < N / 2; i++) free(b[i]);
    free(b[400]);
  }
  /* a write far past a block, into the reserved part of the region no chunk
   * uses yet: it faults, as it would past the end of glibc's heap */
  else if (!strcmp(what, "overrun-reserved")) {
    volatile char *far = (char *)(((uintptr_t)p | ((1u << 20) - 1)) + 1) + (8u << 20);
    *far = 1;
  }
  /* not misuse: a live block that holds a copy of a freed block's first
   * words (read after free, but common) frees like any other */
  /* not misuse: the chunk empties and starts over, a new block is bumped
   * where a freed one left its key, the program leaves that word alone and
   * another thread frees the block */
  else if (!strcmp(what, "stale-key")) {
    /* enough blocks that the empty chunk starts over (it does only once
     * its bump pointer has moved 4 KiB; before, freed blocks are reused) */
    char *fill[128];
    for (int i = 0; i < 128; i++) fill[i] = malloc(64);
    for (int i = 0; i < 128; i++) free(fill[i]);
    uint64_t old_key;
    free(p);
    memcpy(&old_key, p + 8, sizeof old_key);
    free(keep);
    malloc_trim(0);   /* the thread's recent frees back to the chunk, which empties */
    char *q = malloc(64);
    uint64_t word;
    memcpy(&word, q + 8, sizeof word);
    if (q == p && word == old_key) printf("stale key in place\n");
    q[0] = 1;
    free_elsewhere(q);
    keep = malloc(64);
  }
  else if (!strcmp(what, "copied-free-words")) {
    char *q = malloc(64);
    free(p);
    memcpy(q, p, 16);
    free(q);
  }
  /* the same for a class's block, whose copied words are a recent list's
   * link and mark */
  else if (!strcmp(what, "copied-class-words")) {
    char *q = malloc(300), *r = malloc(300);
    free(r);
    memcpy(q, r, 16);
    free(q);
    q = malloc(300);
    r = malloc(300);
    free(q);
    free(r);
  }
  printf("survived %s\n", what);
  free(keep);
  return 0;
}
