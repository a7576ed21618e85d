/* Cohort runtime: the MO policy (mo.c): per-call-site monitors and
 * size-consistent pools, with its stride prefetches (prefetch.c). It calls
 * no other policy.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_MO_H
#define COHORT_MO_H

#include "select.h"

/* --------------------------------------------------------------- mo.c */
#define CH_MO_SITES_LISTED 512
struct ch_mo_counts {   /* written under mo.c's lock, but sites_patched */
  unsigned long sites, sites_pooled, sites_mixed, sites_shared, pools_refused, table_full;
  atomic_ulong sites_patched;   /* decided sites whose call now skips the monitors (direct.c) */
  unsigned long sites_demoted;  /* pooled sites whose requests turned out mostly of other sizes */
};
struct ch_mo_site { int module; uintptr_t offset; uint32_t requests, size; int pool; bool decided; };
extern struct ch_mo_counts ch_mo_counts;
void ch_mo_init(void);
int ch_mo_identify(size_t size, uintptr_t ret);   /* a pool, or -1: the next allocator */
bool ch_mo_site(unsigned i, struct ch_mo_site *out);
/* A sampled request of the pooled site at ret, patched to its pool's stub:
 * of the pool's size (hit) or not. One request in CH_MO_SAMPLE_GAP of the
 * pooled sites' is sampled, whichever site makes it, so that each site is
 * sampled as often as it allocates: ch_mo_sample_in counts down to it. */
#define CH_MO_SAMPLE_GAP 64
void ch_mo_sample(uintptr_t ret, bool hit);
void ch_mo_atfork_child(void);

/* ------------------------------------------------------------ prefetch.c */
/* MO's stride prefetches, injected at start-up from COHORT_PREFETCH
 * (docs/prefetch-format.md). Each load's result: injected, still pending
 * (only while start-up runs), or why it was left alone. */
#define CH_PREFETCH_MAX 256
enum { CH_PREFETCH_INJECTED = -2, CH_PREFETCH_PENDING = -1,
       CH_PREFETCH_NOT_LOADED, CH_PREFETCH_OTHER_BUILD, CH_PREFETCH_OUTSIDE, CH_PREFETCH_NO_FUNCTION,
       CH_PREFETCH_UNDECODED, CH_PREFETCH_NOT_A_LOAD, CH_PREFETCH_DISTANCE, CH_PREFETCH_UNMOVABLE,
       CH_PREFETCH_BRANCH_TARGET, CH_PREFETCH_INDIRECT_JUMP, CH_PREFETCH_LANDING_PADS, CH_PREFETCH_UNWIND_RULE,
       CH_PREFETCH_OVERLAP, CH_PREFETCH_THREADS, CH_PREFETCH_NOT_WRITABLE, CH_PREFETCH_NO_STUB_SPACE,
       CH_PREFETCH_REASONS };
extern const char *const ch_prefetch_reason_names[CH_PREFETCH_REASONS];
struct ch_prefetch_load { unsigned module; uintptr_t offset; int32_t distance; int reason; };
extern struct ch_prefetch_load ch_prefetch_loads[CH_PREFETCH_MAX];
extern unsigned ch_prefetch_nloads, ch_prefetch_injected;
extern const char *ch_prefetch_file;   /* NULL unless a file was read */
const char *ch_prefetch_module_path(unsigned module);
void ch_prefetch_init(const char *path);

#endif
