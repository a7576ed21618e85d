/* Cohort pools: one pool per data structure, released all at once.
 *
 * The interface of Automatic Pool Allocation's runtime (Lattner & Adve,
 * PLDI 2005, Figure 3), on Cohort's group allocator. A program (or a
 * compiler pass) gives each logical data structure a pool: its objects then
 * share the pool's chunks and no others, so a walk of one list touches only
 * that list's lines and pages, and pooldestroy gives all of them back at
 * once, however many are still live.
 *
 *   pooldesc pd;                  // the program's memory: a global, a local
 *   poolinit(&pd, sizeof(node));  // or poolcreate(&pd)
 *   node *n = poolalloc(&pd, sizeof *n);
 *   ...
 *   pooldestroy(&pd);             // every object of the pool is gone
 *
 * Link with -lcohort, or run under libcohort.so preloaded (declare the
 * functions weak to run without it too). docs/pools.md has the details.
 *
 * Sizes. Any size up to a chunk's room (about 1 MiB by default; the chunk
 * size is COHORT_CHUNK_SIZE) in any mix; a pool whose objects are all of
 * one size (up to 256 bytes) allocates and frees in constant time, and its
 * objects carry no header. A larger request gets NULL and ENOMEM.
 *
 * NULL. A NULL descriptor is no pool, as in the paper: poolalloc, poolfree
 * and the others are malloc, free, realloc, calloc and posix_memalign, and
 * pooldestroy does nothing.
 *
 * Threads. A pool has no lock: the program uses each pool from one thread
 * at a time, as it would a data structure (different pools may be used by
 * different threads at once). free() of a pool's object is safe from any
 * thread at any time before pooldestroy.
 *
 * free(). An object of a pool may also be freed with free(), from any
 * thread; pooldestroy stays correct after that. realloc() of one moves it
 * out of the pool (to malloc's memory) when it must move. poolfree of an
 * object that is not the pool's stops the program.
 *
 * Misuse stops the program with a message, as the C library's checks do: a
 * double poolfree or free, poolfree into the wrong pool, a pointer that is
 * no object's, a descriptor never initialised, and any use of a destroyed
 * pool (a copy of its descriptor included) but poolinit again. */
#ifndef COHORT_POOL_H
#define COHORT_POOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The descriptor. Its fields are the runtime's own: never read or write them. */
typedef struct pooldesc {
  void *cohort_heap;
  unsigned long long cohort_word;
  size_t cohort_elemsize;
} pooldesc;

/* Make pd a new, empty pool, whatever pd held before. elemsize is the size
 * most of its objects will have (0: no single size); it is a hint only.
 * Returns 0, or -1 if Cohort cannot make pools in this process (its region
 * could not be reserved): then, after one warning, pd works as a NULL pool,
 * and pooldestroy releases nothing. */
int poolinit(pooldesc *pd, size_t elemsize);
/* poolinit(pd, 0). */
int poolcreate(pooldesc *pd);
/* Release every object of the pool at once. pd is then destroyed: using it
 * stops the program, until poolinit makes it a pool again. */
void pooldestroy(pooldesc *pd);

/* Allocate size bytes (16-aligned) in the pool; NULL and ENOMEM if there is
 * no memory or the size is too large. size 0 gives a unique object. */
void *poolalloc(pooldesc *pd, size_t size);
/* Free an object of the pool; NULL does nothing. */
void poolfree(pooldesc *pd, void *p);
/* As realloc, within the pool: p NULL is poolalloc, size 0 is poolfree
 * (and gives NULL); an object that must move moves within the pool. */
void *poolrealloc(pooldesc *pd, void *p, size_t size);
/* n objects of size bytes, zeroed; NULL and ENOMEM on overflow. */
void *poolcalloc(pooldesc *pd, size_t n, size_t size);
/* size bytes aligned to align (a power of two, up to 4096; else NULL and
 * EINVAL). */
void *poolmemalign(pooldesc *pd, size_t align, size_t size);

/* Bytes usable in the pool's object p (at least what was asked). */
size_t poolobjsize(pooldesc *pd, const void *p);

#ifdef __cplusplus
}
#endif
#endif
