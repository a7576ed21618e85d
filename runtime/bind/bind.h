/* Cohort runtime: the binding layer: a plan's call sites bound to the
 * modules the process loads, as they load (plan_bind.c), and the plan site
 * at an address; a site found again by its anchor in another build of its
 * module (anchor.c, also built into the tool cohort-anchor).
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_BIND_H
#define COHORT_BIND_H

#include "memory.h"
#include "context.h"

extern atomic_bool ch_plan_disabled;    /* set when a late module contradicts the plan */
/* Called, once, when a module loaded late disables the plan. */
void ch_plan_set_disable_hook(void (*f)(void));
void ch_plan_bind_module(struct ch_module *m);  /* resolve this module's sites */
int ch_plan_site_at(uintptr_t addr);     /* site index or -1 */
int ch_plan_site_entry(uintptr_t addr, int *entry);   /* the same, and its verdict (an ch_entry_verdict) */
bool ch_plan_check_binary(void);         /* after modules load: build ids agree */

/* anchor.c: the calls of a module's file, scanned once (NULL: why). */
struct ch_calls;
struct ch_calls *ch_calls_scan(const char *path, char *why, size_t whylen);
void ch_calls_free(struct ch_calls *c);
const uint8_t *ch_calls_build_id(const struct ch_calls *c, unsigned *len);
/* The anchor of the call returning at `offset`, as a plan's words (false: why). */
bool ch_anchor_describe(const struct ch_calls *c, uint64_t offset, char *out, size_t n, const char **why);
/* The return offset of the one call that fits the anchor, and how it was
 * found ("symbol", "symbol and calls", "calls"); 0 and why when none does
 * alone. */
uint64_t ch_anchor_find(const struct ch_calls *c, const struct ch_anchor *anchor, const char **how,
                        const char **why);

#endif
