/* Cohort runtime: the next allocator (next.c): the allocator behind Cohort, found by
 * dlsym, and the bootstrap arena that serves until it is.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_NEXT_H
#define COHORT_NEXT_H

#include "system.h"

/* ---------------------------------------------------------------- next.c */
struct ch_next {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*memalign)(size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*malloc_usable_size)(void *);
  int (*malloc_trim)(size_t);   /* NULL where it has none (jemalloc) */
  void *(*new_)(size_t);   /* its own operator new (jemalloc's, tcmalloc's), NULL if it has none */
  void (*delete_sized)(void *, size_t);   /* its own sized operator delete, NULL if it has none */
};
/* malloc and free are always callable: before resolution they point at
 * functions that resolve first, so the pass-through paths need no test. */
extern struct ch_next ch_next;
extern atomic_int ch_next_state;     /* 0 unresolved, 1 resolving, 2 ready */
void ch_next_resolve(void);
bool ch_bootstrap_owns(const void *p);
void *ch_bootstrap_alloc(size_t size, size_t align);
size_t ch_bootstrap_size(const void *p);

#endif
