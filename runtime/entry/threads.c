/* Cohort runtime: thread starts. A thread that starts another leaves its
 * heap idle until it allocates or frees again, so that the thread it started
 * can take the heap over if it frees into it first (heap.c, "A thread that
 * starts another"). The first start is also the last moment the process may
 * have one thread, when direct.c patches the calls a live patch cannot
 * reach. pthread_create itself is the C library's, looked up behind us; its
 * arguments and result pass through untouched. */
#define _GNU_SOURCE
#include "entry.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static _Atomic(create_fn) real_create;
static atomic_bool first_started;   /* what runs before the program's first thread has run */

CH_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
  create_fn create = atomic_load_explicit(&real_create, memory_order_acquire);
  if (!create) {
    create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!create) return EAGAIN;   /* no C library behind us: nothing could start it */
    atomic_store_explicit(&real_create, create, memory_order_release);
  }
  /* Idle from before the start: the new thread may run, and free into our
   * heap, before pthread_create returns here. What pthread_create allocates
   * for the new thread (its TLS) comes from the next allocator, as the
   * runtime's own requests do, so that it does not take the heap back. */
  if (atomic_load_explicit(&ch_init_state, memory_order_acquire) != 2 || ch_opt.mode == CH_MODE_OFF)
    return create(thread, attr, start, arg);
  /* The last moment the process may have one thread: code that no live
   * patch can reach is patched now. Modules loaded since the runtime last
   * looked (dlopen: dot's layout plugins, just before pango starts its
   * threads) get their selector sites patched whole (patch.c); then the
   * direct sites (direct.c). */
  if (!atomic_exchange(&first_started, true)) {
    if (ch_patch_enabled()) {
      ch_in_runtime++;   /* the look may allocate: the next allocator's */
      ch_modules_refresh();
      ch_in_runtime--;
    }
    ch_direct_before_threads();
  }
  ch_heap_thread_started();
  ch_in_runtime++;
  int r = create(thread, attr, start, arg);
  ch_in_runtime--;
  return r;
}
