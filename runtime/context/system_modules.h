/* The modules whose frames are not part of any allocation context.
 * Shared by the runtime (modules.c) and the profiler (profiler/contexts.c):
 * both must name the same contexts (docs/context.md). A module is a system
 * module when the last component of its path starts with one of these. */
#ifndef COHORT_SYSTEM_MODULES_H
#define COHORT_SYSTEM_MODULES_H

#define COHORT_SYSTEM_MODULE_PREFIXES                                               \
  "libc.so", "libc-", "ld-linux", "ld64.so", "libm.so", "libm-", "libpthread.so",   \
  "libdl.so", "librt.so", "libstdc++.so", "libgcc_s.so", "libcohort.so",             \
  "libjemalloc.so", "libtcmalloc", "vgpreload_", "linux-vdso.so", "linux-gate.so"

#endif
