/* Cohort runtime: what the entry points (alloc.c, new.c, pool.c, threads.c,
 * init.c) use: every layer, and start-up.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_ENTRY_H
#define COHORT_ENTRY_H

#include "report.h"

/* --------------------------------------------------------------- alloc.c */
/* A remembered cold entry's request (ch_cold_entry): the rest group of its
 * size, else the next allocator, counted as a cold stub's. operator new
 * counts its own (ch_cold_entry_count) and places it (ch_cold_entry_place). */
void *ch_cold_entry_malloc(size_t size);
int ch_cold_entry_count(size_t size);
void *ch_cold_entry_place(size_t size, int g);

/* ---------------------------------------------------------------- init.c */
extern atomic_int ch_init_state;   /* 0 none, 1 running, 2 done */
void ch_ensure_init(void);
/* What this thread holds back (path counts, a batch of frees into other
 * threads' chunks) goes out now: before a statistics write that is not in a
 * signal handler. */
void ch_flush_thread(void);

#endif
