/* Sampling: which accesses to the heap ch_access (affinity.c) sees.
 *
 * What an access to a tracked object costs (the shadow lookup, which misses
 * the host's cache on a large heap, its context's counts, the affinity
 * queue and its walk, the layouts' and the lines' models) was most of the
 * tool's time, and more the longer the run (README.md, "Sampling"). Their
 * counts are sums over the run, and a long run repeats itself. The clock is
 * ch_total_accesses, every access in the span of tracked objects, which
 * loads.c's cache counts inline (ch_sample_gate): the first `--sample-base`
 * (B) of them all go to ch_access, and from then on stage s (s = 1, 2, ...)
 * covers the next B * 2^s of them, of which ch_access sees one window of
 * WINDOW accesses in every WINDOW * 2^s, each counted 2^s times; between
 * windows an access costs one compare and one add. Every stage analyses B
 * accesses, so what the analyses cost grows with the logarithm of the run's
 * length, and every count they make stays an estimate of the whole run's (a
 * window stands for its period). A run of up to B accesses to the span is
 * analysed whole, as it was before sampling.
 *
 * Before each window, WARM accesses go through the analyses without being
 * counted: the models' caches and the affinity queues would otherwise start
 * the window holding what they held a period earlier, and miss, or pair,
 * where the run did not.
 *
 * What every access still counts, whatever the stage: the run's own cache
 * (loads.c), whose misses the headroom sets the tracked objects' against;
 * and every access to the span, the clock. */
#include "profiler.h"

ULong ch_total_accesses;

Long ch_clo_sample_base = (Long)1 << 22;
Bool ch_sample_skip = False;
ULong ch_sample_weight = 1;
ULong ch_sample_next = ~0ULL;
ULong ch_sample_windows;

/* A window, and the warming before it, in tracked accesses. The window
 * holds what a D1 holds many times over (512 lines); the warming refills
 * the models' D1s (32 KiB each) and the queues (A bytes). */
#define WINDOW ((ULong)1 << 16)
#define WARM ((ULong)1 << 13)
#define MAX_STAGE 40

static ULong base;   /* B, a whole number of windows; 0: no sampling */

void ch_sample_init(void) {
  if (ch_clo_sample_base <= 0) return;   /* every access, as ch_sample_next says */
  base = ((ULong)ch_clo_sample_base + WINDOW - 1) / WINDOW * WINDOW;
  ch_sample_next = base + 1;   /* the count of the first access past stage 0 */
}

/* The state for the t-th access to the span (t counted from 1, t > B):
 * its stage, where it lies in its period, and when that changes. */
void ch_sample_advance(void) {
  ULong t = ch_total_accesses - 1;   /* from 0 */
  UInt s = 1;
  while (s < MAX_STAGE && t >= base * ((2ULL << s) - 1)) s++;
  ULong stage_start = base * ((1ULL << s) - 1), period = WINDOW << s;
  ULong off = (t - stage_start) % period, period_start = t - off;
  Bool was_skipping = ch_sample_skip;
  if (off < period - WINDOW - WARM) {
    ch_sample_skip = True;
    ch_sample_next = period_start + period - WINDOW - WARM + 1;
  } else if (off < period - WINDOW) {
    ch_sample_skip = False;
    ch_sample_weight = 0;
    ch_sample_next = period_start + period - WINDOW + 1;
    if (was_skipping) ch_affinity_forget();   /* the queues' entries are a period old */
  } else {
    ch_sample_skip = False;
    ch_sample_weight = 1ULL << s;
    ch_sample_next = period_start + period + 1;
    ch_sample_windows++;
  }
}

/* The accesses counted: all of stage 0, then each window whole but the
 * one the run may have ended in (ch_sample_next is one past its end). */
static ULong analysed(void) {
  ULong t = ch_total_accesses;
  if (!base || t <= base) return t;
  if (ch_sample_skip || !ch_sample_weight) return base + ch_sample_windows * WINDOW;
  return base + (ch_sample_windows - 1) * WINDOW + (t - (ch_sample_next - 1 - WINDOW));
}

void ch_sample_write(VgFile *f) {
  VG_(fprintf)(f, "sample base %llu window %llu warm %llu windows %llu analysed %llu\n", base, WINDOW, WARM,
               ch_sample_windows, analysed());
}
