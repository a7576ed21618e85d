/* Cohort runtime: the plan layer: a plan file read into the plan's data
 * (plan.c, also built into cohort-plan-check with the system layer alone).
 * The context layer's walk reads that data; binding its sites to the
 * modules the process loads is the binding layer's (bind/bind.h).
 * Layers and what each may use: runtime/README.md. */
#ifndef COHORT_PLAN_H
#define COHORT_PLAN_H

#include "system.h"

/* The most call sites a plan names (a conjunction's mask, the walk's set of
 * sites found, a cached rule's site number). */
#define CH_MAX_SITES 256
/* What the quick test answers from an entry site, and what a decision
 * path's node holds: a group, or one of these (context.h has the rest). */
#define CH_QUICK_COLD (-1)    /* the innermost application site is cold */
#define CH_QUICK_WALK (-2)    /* undecided: walk */
#define CH_QUICK_NEXT (-3)    /* the innermost application site sends it to the next allocator */

/* ---------------------------------------------------------------- plan.c */
/* What the innermost application site alone says (the quick test). GROUP:
 * every allocation entering there belongs to the site's group, no walk. */
enum ch_entry_verdict { CH_ENTRY_UNKNOWN, CH_ENTRY_WALK, CH_ENTRY_COLD, CH_ENTRY_GROUP, CH_ENTRY_NEXT };
struct ch_plan_module { char path[512]; uint8_t build_id[CH_BUILD_ID_MAX]; unsigned build_id_len; bool resolved; };
/* The grammar both plans and prefetch files use: a hexadecimal digit's
 * value (-1: none), and a build id of n hex digits (false: malformed). */
int ch_hex_digit(char c);
bool ch_parse_build_id(const char *hex, size_t n, uint8_t *out, unsigned *len);
/* A `module N BUILDID PATH` line after its keyword, [s, end), as the plan
 * and the prefetch file write it; false: why (plan.c). */
bool ch_parse_module_line(const char *s, const char *end, unsigned expect, unsigned limit, uint8_t *build_id,
                          unsigned *build_id_len, char *path, size_t path_size, char *why, size_t whylen);
/* Version 9: what finds a site again in another build of its module
 * (bind/anchor.c; docs/plan-format.md, "Anchors"): the call's kind and
 * target, the function that holds it and its place among that function's
 * calls of the same target, and the calls around it, as hashes of their
 * kinds and targets, nearest first (0: the code's end). */
#define CH_ANCHOR_WINDOW 8
#define CH_ANCHOR_NAME 160    /* a longer name is written as `~` and its hash */
enum { CH_ANCHOR_DIRECT = 'd', CH_ANCHOR_SLOT = 'g', CH_ANCHOR_INDIRECT = 'i' };
struct ch_anchor {
  char kind;
  char to[CH_ANCHOR_NAME + 2], in[CH_ANCHOR_NAME + 2];   /* "-": unnamed */
  char callee[CH_ANCHOR_NAME + 2];   /* optional tofn=: the module's own function a `-` call calls; "": none */
  size_t nth, count;
  uint32_t side[2][CH_ANCHOR_WINDOW];   /* before, after */
};
/* An anchor's words (`call=K:NAME in=NAME [tofn=NAME] nth=I/N before=H,... after=H,...`). */
bool ch_anchor_parse(const char *text, struct ch_anchor *a);
struct ch_plan_site { unsigned module; uintptr_t offset; uintptr_t addr; /* 0 until resolved */
                      const struct ch_anchor *anchor;   /* version 9; NULL: none */
                      enum ch_entry_verdict entry; unsigned group; /* CH_ENTRY_GROUP */
                      int quick;       /* what the quick test returns when the entry decides alone:
                                          the group, or CH_QUICK_NEXT */
                      unsigned stop;   /* group + 1: a walk reaching this site ends in it; 0: no */ };
struct ch_plan_conj { unsigned group; uint64_t mask[CH_MAX_SITES / 64]; };
struct ch_plan {
  unsigned version;
  size_t max_size;
  unsigned nmodules, nsites, ngroups, nconj;
  struct ch_plan_module *modules;
  struct ch_plan_site *sites;
  char (*group_names)[64];
  struct ch_plan_conj *conj;
  enum ch_entry_verdict unknown_entry;
  /* Version 6: a walk that leaves the decision paths (a stack never
   * profiled past its entry) goes on to the full walk (CH_ENTRY_WALK) or
   * ends there with no group (CH_ENTRY_COLD), so unknown stacks cost no
   * more frames than the paths need. */
  enum ch_entry_verdict unknown_path;
  int rest;   /* version 4: the group of every small allocation no verdict or selector claims; -1: none */
  size_t rest_max;   /* the largest request the rest group takes */
  bool rest_one;     /* version 7: the rest group stays one pool (else split by size class) */
  /* Version 8: per group, how many bytes into a line its blocks of whole
   * lines start (0, 16, 32 or 48), or -1: the default, at a line's start for
   * a group and packed for the rest group (docs/runtime.md, "A big build
   * walked out of allocation order"). */
  int8_t group_at[CH_MAX_GROUPS];
  /* Version 5: the decision paths, a trie over the sites a walk meets from
   * the entry outwards. Node 0 is the root; a node's verdict is a group,
   * CH_QUICK_COLD, CH_QUICK_NEXT, or CH_QUICK_WALK (go one frame further). */
  unsigned nnodes;
  int *node_verdict;
  uint32_t *trie_key;     /* open addressing: (parent << 9 | site) + 1, 0 empty */
  uint16_t *trie_child;
  uint8_t *has_child;     /* per node: some path goes on from it */
};
#define CH_MAX_NODES 4096
#define CH_MAX_PATH 32
/* The child of trie node `node` through plan site `site`, or 0: none. */
static inline unsigned ch_plan_child(const struct ch_plan *pl, unsigned node, int site) {
  uint32_t key = ((uint32_t)node << 9 | (uint32_t)site) + 1;
  for (uint32_t h = (key * 0x9e3779b1u) >> 19;; h = (h + 1) & (2 * CH_MAX_NODES - 1)) {
    uint32_t k = pl->trie_key[h];
    if (k == key) return pl->trie_child[h];
    if (!k) return 0;
  }
}
extern struct ch_plan *ch_plan;          /* NULL: nothing to identify */
int ch_plan_load(const char *path);      /* 0 ok; otherwise warned and NULL */
/* Parse a plan without warning: 0 and the plan, or -1 and why ("plan PATH
 * line N: WHY"). Uses only the system layer (tools/plan_check.c). */
int ch_plan_read(const char *path, struct ch_plan **out, char *why, size_t whylen);

#endif
