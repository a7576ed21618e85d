/* Cohort runtime: the thread's hot state, one TLS block that every layer's per-thread
 * fields live in (init.c defines it): one load of its offset for a
 * lane that tests the hints, counts its path and takes the heap. Its
 * fields' types come with it: the identification paths it counts and
 * the stop records the stubs write.
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_THREAD_H
#define COHORT_THREAD_H

#include "system.h"

enum ch_path {
  CH_PATH_OFF,           /* no grouping configured: straight to the next allocator */
  CH_PATH_LARGE,         /* above the maximum grouped size */
  CH_PATH_REENTRANT,     /* allocation made by the runtime itself, or during start-up */
  CH_PATH_COLD,          /* quick test: innermost application site is cold */
  CH_PATH_ENTRY,         /* quick test: innermost application site decides the group */
  CH_PATH_WALK_NONE,     /* full walk, no selector matched */
  CH_PATH_WALK_GROUP,    /* full walk, a selector matched */
  CH_PATH_STOP,          /* walk ended early at a stop site, which decides */
  CH_PATH_PATH,          /* walk ended where the plan's decision paths agree on a verdict */
  CH_PATH_TRUNCATED,     /* walk stopped early (no unwind info); decided on what was seen */
  CH_PATH_PATCHED,       /* decided from the activations of patched selector sites, no walk */
  CH_PATH_ALL,           /* test mode: every small allocation grouped */
  CH_PATH_RANDOM,        /* control mode: a random pool */
  CH_PATH_DIRECT,        /* a patched call site that reaches its group directly (direct.c) */
  CH_PATH_DPA,           /* DPA: the call chain's pool */
  CH_PATH_DPA_HINTED,    /* DPA: the chain's pool, named by its patched outermost call (hint.c) */
  CH_PATH_DPA_PREFIX,    /* DPA: the chain's pool, its prefix named by a patched call, the rest probed */
  CH_PATH_DPA_BELOW,     /* DPA: the chain's group has no pool (yet): the next allocator */
  CH_PATH_MO,            /* MO: the call site's size-consistent pool */
  CH_PATH_MO_NEXT,       /* MO: the site has no pool (yet), or the request is not its size */
  CH_PATH_COUNT
};
/* Walks by the frames they stepped past the entry: 0, 1, 2, 3, 4-7, 8-15,
 * 16 or more (counts.c). */
#define CH_FRAME_BUCKETS 7

/* Per thread, the calls through patched stop sites: a stop site's stub
 * (patch.c) writes the slot of its call's return address and its site into
 * last, and only when the last record lies above it and is still live with
 * another stop group does it keep that record in rec first. Which stop
 * decides an allocation is then the last record, if live, else the
 * innermost live one kept. The layout is shared with the stop stub. */
#define CH_STOP_CAP 62
struct ch_stops {
  uintptr_t last;                 /* the slot of the last call through a stop site, or 0 */
  const struct ch_stop_site *site;   /* its site's entry in ch_stop_sites */
  uintptr_t lo, hi;               /* the thread's stack once known, else 0, 0: the stub keeps nothing */
  uint32_t n;                     /* records kept in rec */
  uint8_t lost;                   /* a record was lost (rec full, a stub interrupted): seed again */
  uint8_t busy;                   /* a stub's slow path or the seed is writing rec */
  uint16_t pad;
  uintptr_t pad2;                 /* rec stays at 48, where the stop template finds it */
  struct ch_stop_rec { uintptr_t slot; const struct ch_stop_site *site; } rec[CH_STOP_CAP];
};
/* The thread's hot state, in one TLS block. In a shared library each
 * variable of its own costs an entry point a load of its offset from the
 * GOT (initial-exec); the fields of one block share that load, so that a
 * lane that tests the hints, counts its path and takes the thread's heap
 * pays it once. Each field belongs to the file named, which alone writes it
 * (the stubs of hint.c write the hints at their offsets). */
struct ch_thread {
  int in_runtime;                   /* init.c: >0 while the runtime itself is allocating */
  uint32_t dpa_hint;                /* hint.c: a DPA group's index + 1, set by its stub; 0: none */
  uint32_t dpa_prefix_hint;         /* hint.c: a prefix hint's index + 1 (dpa.c); 0: none */
  int32_t dpa_check_in;             /* dpa.c: trusted allocations until a hint is checked again */
  int32_t dpa_sample_in;            /* dpa.c: allocations until the next shape-graph sample */
  int mo_sample_in;                 /* mo.c: pooled sites' requests until the next sample */
  int32_t count_budget;             /* counts.c: allocations until the path counts are flushed */
  int32_t patched_budget;           /* counts.c: the same, for those a live stop record decides */
  uint32_t control_count;           /* identify.c: the lane's allocations, counted at the flush */
  uint64_t cold_stubbed;            /* direct.c's cold stubs: requests sent on, counted at the flush */
  struct ch_group_heap *control_gh; /* heap.c: the lane's armed heap line (ch_lane) */
  struct ch_heap *my_heap;          /* heap.c: the fast paths' heap (NULL in the checked mode) */
  struct ch_heap *own_heap;         /* heap.c: the thread's heap */
  uint64_t random_state;            /* identify.c: the random control's draws */
  uint32_t path_count[CH_PATH_COUNT];   /* counts.c: allocations by path, not yet flushed */
  uint32_t frame_count[CH_FRAME_BUCKETS];   /* counts.c: walks by frames stepped, not yet flushed */
  uint32_t walks_joined;            /* counts.c: walks finished from the suffix memo, not yet flushed */
  struct ch_stops stops;            /* activation.c, and the stop sites' stubs (patch.c) */
};
extern CH_TLS struct ch_thread ch_thread;
#define ch_in_runtime (ch_thread.in_runtime)
#define ch_dpa_hint (ch_thread.dpa_hint)
#define ch_dpa_prefix_hint (ch_thread.dpa_prefix_hint)
#define ch_mo_sample_in (ch_thread.mo_sample_in)
#define ch_control_count (ch_thread.control_count)
#define ch_control_gh (ch_thread.control_gh)
#define ch_random_state (ch_thread.random_state)

#endif
