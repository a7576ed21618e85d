/* Cohort runtime: the small public interface of libcohort.so.
 *
 * Programs never need it: libcohort works as an LD_PRELOAD on unmodified
 * binaries. Tests and tools may look these up with dlsym(RTLD_DEFAULT, ...). */
#ifndef COHORT_H
#define COHORT_H

#ifdef __cplusplus
extern "C" {
#endif

/* The group whose chunk holds p, or -1 if p was not group-allocated. The
 * objects of the pool API (cohort/pool.h) are all in group 63. */
int cohort_group_of(const void *p);

/* Write the statistics file now (docs/stats-format.md); NULL means the path
 * in COHORT_STATS. Returns 0 on success, -1 if the file cannot be written,
 * -2 if the path holds a file that is not Cohort statistics (left alone). */
int cohort_write_stats(const char *path);

/* "cohort-runtime X.Y.Z". */
const char *cohort_version(void);

#ifdef __cplusplus
}
#endif
#endif
