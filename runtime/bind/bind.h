/* Cohort runtime: the binding layer: a plan's call sites bound to the
 * modules the process loads, as they load (plan_bind.c), and the plan site
 * at an address.
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

#endif
