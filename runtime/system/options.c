/* Cohort runtime: settings, read once from the environment (docs/runtime.md). */
#define _GNU_SOURCE
#include "system.h"

#include <stdlib.h>
#include <string.h>

struct ch_options ch_opt = {
  .mode = CH_MODE_PLAN,
  .random_pools = 4,
  .seed = 0x9e3779b97f4a7c15ull,
  .chunk_size = 1u << 20,
  .max_size = 0,
  .max_spares = 8,
  .patch = true,
  .dpa_min_objects = 100,
  .dpa_max_size = 128,
  .mo_hot = 50,
  .rest_one = -1,
  .rebase_min = 90,
};

/* "123", "64K", "1M": returns false on anything else. */
static bool parse_size(const char *s, size_t *out) {
  if (!s || !*s) return false;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return false;
  if (*end == 'K' || *end == 'k') { v <<= 10; end++; }
  else if (*end == 'M' || *end == 'm') { v <<= 20; end++; }
  if (*end) return false;
  *out = (size_t)v;
  return true;
}

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

void ch_options_load(void) {
  const char *v;
  size_t sz;
  ch_opt.plan_path = env("COHORT_PLAN");
  ch_opt.stats_path = env("COHORT_STATS");
  ch_opt.prefetch_path = env("COHORT_PREFETCH");
  ch_opt.verbose = env("COHORT_VERBOSE") && strcmp(env("COHORT_VERBOSE"), "0") != 0;
  ch_opt.mode = ch_opt.plan_path ? CH_MODE_PLAN : CH_MODE_OFF;

  if ((v = env("COHORT_MODE"))) {
    if (!strcmp(v, "off")) ch_opt.mode = CH_MODE_OFF;
    else if (!strcmp(v, "plan")) ch_opt.mode = CH_MODE_PLAN;
    else if (!strcmp(v, "all")) ch_opt.mode = CH_MODE_ALL;
    else if (!strncmp(v, "random", 6)) {
      ch_opt.mode = CH_MODE_RANDOM;
      if (v[6] == ':') {
        unsigned long n = strtoul(v + 7, NULL, 10);
        if (n >= 1 && n <= CH_PLAN_GROUPS) ch_opt.random_pools = (unsigned)n;
        else ch_warn("COHORT_MODE=%s: pool count must be 1..%d; using 4", v, CH_PLAN_GROUPS);
      }
    } else {
      ch_warn("COHORT_MODE=%s is not off, plan, all or random[:N]; grouping is off", v);
      ch_opt.mode = CH_MODE_OFF;
    }
  }
  if ((v = env("COHORT_POLICY"))) {
    /* The policy that decides where objects go: halo (a plan), or one of
     * the online policies, which need none. */
    if (!strcmp(v, "halo")) {
      if (ch_opt.mode != CH_MODE_PLAN || !ch_opt.plan_path) {
        ch_warn("COHORT_POLICY=halo needs a plan (COHORT_PLAN); grouping is off");
        ch_opt.mode = CH_MODE_OFF;
      }
    } else if (!strcmp(v, "dpa") || !strcmp(v, "mo")) {
      if (env("COHORT_MODE") || ch_opt.plan_path)
        ch_warn("COHORT_POLICY=%s: COHORT_MODE and COHORT_PLAN are ignored", v);
      ch_opt.mode = v[0] == 'd' ? CH_MODE_DPA : CH_MODE_MO;
    } else {
      ch_warn("COHORT_POLICY=%s is not halo, dpa or mo; grouping is off", v);
      ch_opt.mode = CH_MODE_OFF;
    }
  }
  if ((v = env("COHORT_DPA_MIN_OBJECTS"))) {
    if (parse_size(v, &sz) && sz >= 1 && sz <= 1000000) ch_opt.dpa_min_objects = (unsigned)sz;
    else ch_warn("COHORT_DPA_MIN_OBJECTS=%s must be a count from 1 to 1000000; using 100", v);
  }
  if ((v = env("COHORT_DPA_MAX_SIZE"))) {
    if (parse_size(v, &sz) && sz >= 8 && sz <= 4096) ch_opt.dpa_max_size = sz;
    else ch_warn("COHORT_DPA_MAX_SIZE=%s must be from 8 to 4096 bytes; using 128", v);
  }
  if ((v = env("COHORT_MO_HOT"))) {
    if (parse_size(v, &sz) && sz >= 1 && sz <= 1000000) ch_opt.mo_hot = (unsigned)sz;
    else ch_warn("COHORT_MO_HOT=%s must be a count from 1 to 1000000; using 50", v);
  }
  if ((v = env("COHORT_PATCH"))) {
    if (!strcmp(v, "0") || !strcmp(v, "1")) ch_opt.patch = v[0] == '1';
    else ch_warn("COHORT_PATCH=%s must be 0 or 1; patching stays on", v);
  }
  if ((v = env("COHORT_CHECK"))) {
    if (!strcmp(v, "0") || !strcmp(v, "1")) ch_opt.check = v[0] == '1';
    else ch_warn("COHORT_CHECK=%s must be 0 or 1; checking stays off", v);
  }
  if ((v = env("COHORT_REST"))) {
    if (!strcmp(v, "one") || !strcmp(v, "size")) ch_opt.rest_one = v[0] == 'o';
    else ch_warn("COHORT_REST=%s must be size or one; the rest group stays as the plan says", v);
  }
  if ((v = env("COHORT_REBASE_MIN"))) {
    if (parse_size(v, &sz) && sz <= 100) ch_opt.rebase_min = (unsigned)sz;
    else ch_warn("COHORT_REBASE_MIN=%s must be a percent from 0 to 100; using 90", v);
  }
  if ((v = env("COHORT_SEED"))) ch_opt.seed = strtoull(v, NULL, 0) | 1;

  if ((v = env("COHORT_CHUNK_SIZE"))) {
    if (parse_size(v, &sz) && sz >= (256u << 10) && sz <= (64u << 20) && !(sz & (sz - 1)))
      ch_opt.chunk_size = sz;
    else
      ch_warn("COHORT_CHUNK_SIZE=%s must be a power of two from 256K to 64M; using 1M", v);
  }
  if ((v = env("COHORT_MAX_SIZE"))) {
    if (parse_size(v, &sz) && sz >= 8 && sz <= ch_opt.chunk_size / 8)
      ch_opt.max_size = sz;
    else
      ch_warn("COHORT_MAX_SIZE=%s must be from 8 to an eighth of the chunk size; ignored", v);
  }
  if ((v = env("COHORT_SPARES"))) {
    if (parse_size(v, &sz) && sz <= 4096) ch_opt.max_spares = (unsigned)sz;
    else ch_warn("COHORT_SPARES=%s must be a count from 0 to 4096; using 8", v);
  }
}
