/* MO's prefetch advice followed by hand (`cohort explain --prefetch`,
 * docs/loads-format.md). Built with -DCOHORT_PREFETCH=P, PREFETCH_AHEAD(p)
 * prefetches P bytes past p; by default it is nothing, and the workload is
 * the one every other measurement uses. scripts/prefetch-experiment.py
 * builds both and measures them. */
#ifndef WORKLOADS_PREFETCH_H
#define WORKLOADS_PREFETCH_H
#ifdef COHORT_PREFETCH
#define PREFETCH_AHEAD(p) __builtin_prefetch((const char *)(p) + (COHORT_PREFETCH))
#else
#define PREFETCH_AHEAD(p) ((void)0)
#endif
#endif
