/* Cohort runtime: the statistics (stats.c): what the memory and decision
 * layers counted, written out as JSON.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_REPORT_H
#define COHORT_REPORT_H

#include "identify.h"

/* --------------------------------------------------------------- stats.c */
int ch_stats_write(const char *path);  /* 0; -1 cannot write; -2 refused (not ours) */

#endif
