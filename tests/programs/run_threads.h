/* For the test programs that run one job in several threads at once
 * (groups.c, restsizes.c). */
#ifndef RUN_THREADS_H
#define RUN_THREADS_H
#include <pthread.h>

#define RUN_THREADS_MAX 16

/* Run job in `threads` threads at once (at most RUN_THREADS_MAX), or in
 * the calling thread alone when threads <= 0; each writes its result to the
 * unsigned long it is given. The sum of the results. */
static inline unsigned long run_threads(void *(*job)(void *), int threads) {
  unsigned long total = 0;
  if (threads <= 0) {
    job(&total);
    return total;
  }
  if (threads > RUN_THREADS_MAX) threads = RUN_THREADS_MAX;
  pthread_t t[RUN_THREADS_MAX];
  unsigned long sums[RUN_THREADS_MAX];
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, job, &sums[i]);
  for (int i = 0; i < threads; i++) { pthread_join(t[i], NULL); total += sums[i]; }
  return total;
}
#endif
