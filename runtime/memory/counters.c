/* Cohort runtime: the memory layer's process-wide counters. The heaps and
 * chunks add to them as blocks and chunks come and go; stats.c, a layer
 * above, only reads them for the statistics file. Per-thread counts stay in
 * the heaps and reach these in batches (heap.c). */
#include "memory.h"

struct ch_group_stats ch_gstats[CH_MAX_GROUPS];
atomic_ulong ch_spares_reused, ch_chunks_purged, ch_chunks_carved, ch_slabs;

void ch_count_live(unsigned g, long delta) {
  struct ch_group_stats *s = &ch_gstats[g];
  long live = atomic_fetch_add_explicit(&s->live_bytes, delta, memory_order_relaxed) + delta;
  if (delta > 0 && live > 0 && (unsigned long)live > atomic_load_explicit(&s->peak_live, memory_order_relaxed)) {
    atomic_store_explicit(&s->peak_live, (unsigned long)live, memory_order_relaxed);
    long r = atomic_load_explicit(&s->resident, memory_order_relaxed);
    atomic_store_explicit(&s->resident_at_peak, r > 0 ? (unsigned long)r : 0, memory_order_relaxed);
  }
}

void ch_count_resident(unsigned g, long delta) {
  atomic_fetch_add_explicit(&ch_gstats[g].resident, delta, memory_order_relaxed);
}
