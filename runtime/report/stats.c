/* Cohort runtime: the statistics file (docs/stats-format.md), from the
 * counters the layers below keep (counters.c, counts.c, pools.c, patch.c). Formatting uses no stdio and no malloc, so the
 * file can be written at exit, on request, or from a signal handler. */
#define _GNU_SOURCE
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* ------------------------------------------------------------ formatting */

struct out { char buf[16384]; size_t n; int fd; };

static void put(struct out *o, const char *s) {
  size_t len = strlen(s);
  if (o->n + len > sizeof o->buf) { ch_write_all(o->fd, o->buf, o->n); o->n = 0; }
  if (len > sizeof o->buf) { ch_write_all(o->fd, s, len); return; }
  memcpy(o->buf + o->n, s, len);
  o->n += len;
}

/* v in decimal, at the end of t (no stdio: this runs in signal handlers). */
static const char *decimal(unsigned long v, char t[24]) {
  int i = 23;
  t[i] = 0;
  do { t[--i] = (char)('0' + v % 10); v /= 10; } while (v);
  return t + i;
}

static void put_u(struct out *o, unsigned long v) {
  char t[24];
  put(o, decimal(v, t));
}

static void put_str(struct out *o, const char *s) {   /* JSON string */
  char t[2] = {0, 0};
  put(o, "\"");
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') { put(o, "\\"); t[0] = *s; put(o, t); }
    else if ((unsigned char)*s < 0x20) put(o, "?");
    else { t[0] = *s; put(o, t); }
  }
  put(o, "\"");
}

static void field_u(struct out *o, const char *name, unsigned long v, bool comma) {
  put_str(o, name);
  put(o, ": ");
  put_u(o, v);
  if (comma) put(o, ", ");
}

/* percent with two decimals of num/den */
static void field_pct(struct out *o, const char *name, unsigned long num, unsigned long den) {
  put_str(o, name);
  put(o, ": ");
  unsigned long hund = den ? (unsigned long)((unsigned __int128)num * 10000 / den) : 0;
  put_u(o, hund / 100);
  put(o, ".");
  if (hund % 100 < 10) put(o, "0");
  put_u(o, hund % 100);
}

static void field_i(struct out *o, const char *name, long v, bool comma) {
  put_str(o, name);
  put(o, v < 0 ? ": -" : ": ");
  put_u(o, v < 0 ? (unsigned long)-v : (unsigned long)v);
  if (comma) put(o, ", ");
}

/* A code address as ch_module_place gave it: the module's path, and the
 * offset in its file. */
static void put_place(struct out *o, int module, uintptr_t offset, bool comma) {
  put(o, "\"module\": ");
  put_str(o, module >= 0 && (unsigned)module < ch_modules_count() ? ch_modules_at((unsigned)module)->path : "?");
  put(o, ", ");
  field_u(o, "offset", offset, comma);
}

/* The injected prefetches (docs/stats-format.md): each load of the file and
 * what became of it. */
static void put_prefetch(struct out *o) {
  put(o, "  \"prefetch\": {\"file\": ");
  put_str(o, ch_prefetch_file);
  put(o, ", ");
  field_u(o, "loads", ch_prefetch_nloads, true);
  field_u(o, "injected", ch_prefetch_injected, true);
  put(o, "\"each\": [");
  for (unsigned i = 0; i < ch_prefetch_nloads; i++) {
    const struct ch_prefetch_load *l = &ch_prefetch_loads[i];
    put(o, i ? ",\n    {\"module\": " : "\n    {\"module\": ");
    put_str(o, ch_prefetch_module_path(l->module));
    put(o, ", ");
    field_u(o, "offset", l->offset, true);
    field_i(o, "distance", l->distance, true);
    put(o, "\"result\": ");
    put_str(o, l->reason == CH_PREFETCH_INJECTED ? "injected"
               : l->reason >= 0 && l->reason < CH_PREFETCH_REASONS ? ch_prefetch_reason_names[l->reason] : "pending");
    put(o, "}");
  }
  put(o, "]},\n");
}

/* DPA's section (docs/stats-format.md): its call chains and what became of them. */
#define DPA_CHAINS_LISTED 512
static void put_dpa(struct out *o) {
  static const char *const verdict_names[CH_WRAP_VERDICTS] = {
    "no", "yes", "unfollowed", "undecoded", "too_large", "no_code", "recursive"};
  const struct ch_dpa_counts *k = &ch_dpa_counts;
  unsigned n = atomic_load(&ch_dpa_nogs), lengths[CH_DPA_CHAIN_MAX + 1] = {0};
  for (unsigned i = 0; i < n; i++) lengths[ch_dpa_ogs[i].length <= CH_DPA_CHAIN_MAX ? ch_dpa_ogs[i].length : 0]++;
  put(o, "  \"dpa\": {");
  field_u(o, "min_objects", ch_opt.dpa_min_objects, true);
  field_u(o, "max_size", ch_max_size, true);
  field_u(o, "object_groups", n, true);
  field_u(o, "pools", ch_online_pools(), true);
  field_u(o, "groups_refused", atomic_load(&k->groups_refused), true);
  field_u(o, "table_full", atomic_load(&k->table_full), true);
  field_u(o, "pools_refused", atomic_load(&k->pools_refused), true);
  field_u(o, "unripe", atomic_load(&k->unripe), true);
  field_u(o, "hints_patched", atomic_load(&k->hints_patched), true);
  field_u(o, "hints_left", atomic_load(&k->hints_left), true);
  field_u(o, "hints_trusted", atomic_load(&k->hints_trusted), true);
  field_u(o, "hints_distrusted", atomic_load(&k->hints_distrusted), true);
  field_u(o, "prefix_memos", atomic_load(&k->prefix_memos), true);
  field_u(o, "prefix_hints", atomic_load(&k->prefix_hints), true);
  field_u(o, "pools_demoted", atomic_load(&k->pools_demoted), true);
  field_i(o, "churn_pool", ch_dpa_churn_pool(), true);
  field_u(o, "samples", atomic_load(&k->samples), true);
  field_u(o, "edges", atomic_load(&ch_ssg_counts.edges), true);
  put(o, "\"merges\": {");
  field_u(o, "type1", atomic_load(&ch_ssg_counts.merges[0]), true);
  field_u(o, "type2", atomic_load(&ch_ssg_counts.merges[1]), false);
  put(o, "}, \"wrapper_verdicts\": {");
  for (unsigned v = 0; v < CH_WRAP_VERDICTS; v++) field_u(o, verdict_names[v], atomic_load(&k->verdicts[v]), v + 1 < CH_WRAP_VERDICTS);
  put(o, "}, \"chain_lengths\": {");
  for (unsigned l = 1; l <= CH_DPA_CHAIN_MAX; l++) {
    char t[24];
    field_u(o, decimal(l, t), lengths[l], l < CH_DPA_CHAIN_MAX);
  }
  put(o, "},\n    \"chains\": [");
  for (unsigned i = 0; i < n && i < DPA_CHAINS_LISTED; i++) {
    const struct ch_dpa_og *g = &ch_dpa_ogs[i];
    put(o, i ? ",\n      {" : "\n      {");
    field_u(o, "id", i, true);
    field_i(o, "pool", atomic_load(&ch_dpa_live[i].pool), true);
    field_u(o, "objects_counted", atomic_load(&g->objects), true);
    field_u(o, "size", g->size, true);
    put(o, atomic_load(&g->mixed) ? "\"mixed\": true, " : "\"mixed\": false, ");
    static const char *const hint_names[] = {"\"hint\": \"untried\", ", "\"hint\": \"untried\", ",
                                             "\"hint\": \"patched\", ", "\"hint\": \"left\", ",
                                             "\"hint\": \"none\", "};
    uint8_t h = atomic_load(&ch_dpa_live[i].hint);
    put(o, hint_names[h <= CH_HINT_NONE ? h : CH_HINT_NONE]);
    put(o, "\"frames\": [");
    for (unsigned f = 0; f < g->length && f < CH_DPA_CHAIN_MAX; f++) {
      put(o, f ? ", {" : "{");
      put_place(o, g->frame_module[f], g->frame_offset[f], false);
      put(o, "}");
    }
    put(o, "]}");
  }
  put(o, n ? "\n    ]\n  },\n" : "]\n  },\n");
}

/* MO's section (docs/stats-format.md): its call-site monitors and what became of them. */
static void put_mo(struct out *o) {
  const struct ch_mo_counts *k = &ch_mo_counts;
  put(o, "  \"mo\": {");
  field_u(o, "hot_requests", ch_opt.mo_hot, true);
  field_u(o, "max_size", ch_max_size, true);
  field_u(o, "sites", k->sites, true);
  field_u(o, "sites_pooled", k->sites_pooled, true);
  field_u(o, "sites_mixed", k->sites_mixed, true);
  field_u(o, "sites_shared", k->sites_shared, true);
  field_u(o, "sites_patched", atomic_load(&k->sites_patched), true);
  field_u(o, "sites_demoted", k->sites_demoted, true);
  field_u(o, "pools", ch_online_pools(), true);
  field_u(o, "pools_refused", k->pools_refused, true);
  field_u(o, "table_full", k->table_full, true);
  put(o, "\n    \"sites_listed\": [");
  struct ch_mo_site site;
  unsigned i = 0;
  for (; ch_mo_site(i, &site); i++) {
    put(o, i ? ",\n      {" : "\n      {");
    put_place(o, site.module, site.offset, true);
    field_u(o, "requests_counted", site.requests, true);
    field_u(o, "size", site.size, true);
    field_i(o, "pool", site.pool, true);
    put(o, site.decided ? "\"decided\": true}" : "\"decided\": false}");
  }
  put(o, i ? "\n    ]\n  },\n" : "]\n  },\n");
}

static const char *mode_name(void) {
  switch (ch_opt.mode) {
  case CH_MODE_OFF: return "off";
  case CH_MODE_PLAN: return "plan";
  case CH_MODE_ALL: return "all";
  case CH_MODE_RANDOM: return "random";
  case CH_MODE_DPA: return "dpa";
  case CH_MODE_MO: return "mo";
  }
  return "?";
}

/* Replace "%p" in the path by the process id, so several processes of one
 * program family each keep their own file. */
static void expand_path(const char *path, char *dst, size_t cap) {
  size_t n = 0;
  for (const char *s = path; *s && n + 24 < cap; s++) {
    if (s[0] == '%' && s[1] == 'p') {
      char t[24];
      for (const char *q = decimal((unsigned long)getpid(), t); *q; q++) dst[n++] = *q;
      s++;
    } else {
      dst[n++] = *s;
    }
  }
  dst[n] = 0;
}

#define STATS_HEAD "{\n  \"format\": \"cohort-stats\""

/* The rule every Cohort writer follows (cohort/files.py): replace only a
 * file of the same kind that Cohort wrote, unless forced. True if path may
 * be written: it does not exist, or holds Cohort statistics, or
 * COHORT_STATS_FORCE=1 and it is a regular file. */
static bool may_replace(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT;
  if (S_ISLNK(st.st_mode) && stat(path, &st) != 0) return false;
  if (!S_ISREG(st.st_mode)) return false;
  const char *force = getenv("COHORT_STATS_FORCE");
  if (force && !strcmp(force, "1")) return true;
  char head[sizeof STATS_HEAD - 1];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, head, sizeof head);
  close(fd);
  return n == (ssize_t)sizeof head && !memcmp(head, STATS_HEAD, sizeof head);
}

int ch_stats_write(const char *path) {
  if (!path) return -1;
  char final[1024], tmp[1100];
  expand_path(path, final, sizeof final);
  static struct out out_buf;   /* too big for a signal stack */
  static ch_lock_t out_lock;
  struct out *o = &out_buf;
  ch_lock(&out_lock);
  if (!may_replace(final)) {
    static bool said;
    if (!said) ch_warn("COHORT_STATS: %s exists and is not statistics Cohort wrote; not replacing it "
                       "(remove it, name another file, or set COHORT_STATS_FORCE=1)", final);
    said = true;
    ch_unlock(&out_lock);
    return -2;
  }
  /* beside the destination, under a name no one else uses: NAME.cohort-PID.tmp */
  size_t fl = strlen(final);
  memcpy(tmp, final, fl);
  char t[24];
  const char *pid = decimal((unsigned long)getpid(), t);
  size_t pl = strlen(pid);
  memcpy(tmp + fl, ".cohort-", 8);
  memcpy(tmp + fl + 8, pid, pl);
  memcpy(tmp + fl + 8 + pl, ".tmp", 5);
  o->n = 0;
  o->fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (o->fd < 0) { ch_unlock(&out_lock); return -1; }

  put(o, STATS_HEAD ", \"version\": 1, ");
  field_u(o, "pid", (unsigned long)getpid(), true);
  put(o, "\"mode\": "); put_str(o, mode_name()); put(o, ", ");
  put(o, "\"plan\": ");
  if (ch_opt.plan_path) put_str(o, ch_opt.plan_path); else put(o, "null");
  put(o, ", \"plan_active\": ");
  put(o, ch_plan && !atomic_load(&ch_plan_disabled) ? "true" : "false");
  put(o, ",\n  ");
  field_u(o, "chunk_size", ch_chunk_size, true);
  field_u(o, "max_size", ch_max_size, true);
  field_u(o, "slabs", atomic_load(&ch_slabs), true);
  field_u(o, "chunks_carved", atomic_load(&ch_chunks_carved), true);
  field_u(o, "spares_reused", atomic_load(&ch_spares_reused), true);
  field_u(o, "chunks_purged", atomic_load(&ch_chunks_purged), true);
  field_u(o, "heaps_handed_on", atomic_load(&ch_heaps_handed_on), true);
  field_u(o, "remote_batches", atomic_load(&ch_remote_batches), true);
  field_u(o, "unwind_cache_misses", atomic_load(&ch_unwind_slow), true);
  field_u(o, "walks_joined", atomic_load(&ch_walks_joined), false);
  put(o, ",\n  \"identification\": {");
  for (unsigned i = 0; i < CH_PATH_COUNT; i++)
    field_u(o, ch_path_names[i], atomic_load(&ch_path_count[i]), i + 1 < CH_PATH_COUNT);
  put(o, "},\n  \"frames_walked\": {");
  for (unsigned i = 0; i < CH_FRAME_BUCKETS; i++)
    field_u(o, ch_frame_bucket_names[i], atomic_load(&ch_frame_count[i]), i + 1 < CH_FRAME_BUCKETS);
  put(o, "},\n  \"patch\": {");
  put(o, "\"enabled\": ");
  put(o, ch_opt.patch ? "true, " : "false, ");
  field_u(o, "sites_patched", atomic_load(&ch_patch_stats.patched), true);
  field_u(o, "sites_unpatched", atomic_load(&ch_patch_stats.unpatched), true);
  field_u(o, "modules_patched", atomic_load(&ch_patch_stats.modules), true);
  field_u(o, "seeds", atomic_load(&ch_patch_stats.reseeds), true);
  field_u(o, "seed_overflows", atomic_load(&ch_patch_stats.overflows), true);
  field_u(o, "direct_sites", atomic_load(&ch_direct_stats.patched), true);
  field_u(o, "direct_left", atomic_load(&ch_direct_stats.left), true);
  put(o, "\"unpatched\": {");
  for (unsigned i = 0; i < CH_PATCH_REASONS; i++)
    field_u(o, ch_patch_reason_names[i], atomic_load(&ch_patch_unpatched_by[i]), i + 1 < CH_PATCH_REASONS);
  put(o, "}");
  put(o, "},\n");
  if (ch_prefetch_file) put_prefetch(o);
  if (ch_opt.mode == CH_MODE_DPA && ch_dpa_ogs) put_dpa(o);
  if (ch_opt.mode == CH_MODE_MO) put_mo(o);
  put(o, "  \"groups\": [");
  unsigned ng = ch_ngroups();
  ch_heaps_drain_exited();
  /* Static, as out_buf is, and as safe: the writer holds out_lock. */
  static uint64_t held_allocs[CH_MAX_GROUPS], held_frees[CH_MAX_GROUPS];
  static long held_live[CH_MAX_GROUPS];
  memset(held_allocs, 0, sizeof held_allocs);
  memset(held_frees, 0, sizeof held_frees);
  memset(held_live, 0, sizeof held_live);
  ch_heaps_sum(held_allocs, held_frees, held_live);
  for (unsigned g = 0; g < ng; g++) {
    struct ch_group_stats *s = &ch_gstats[g];
    uint64_t allocs = atomic_load(&s->allocs) + held_allocs[g], frees = atomic_load(&s->frees) + held_frees[g];
    long live = atomic_load(&s->live_bytes) + held_live[g];
    unsigned long peak = atomic_load(&s->peak_live);
    long res = atomic_load(&s->resident);
    unsigned long res_peak = atomic_load(&s->resident_at_peak);
    if (live > 0 && (unsigned long)live > peak) { peak = (unsigned long)live; res_peak = res > 0 ? (unsigned long)res : 0; }
    unsigned long frag = res_peak > peak ? res_peak - peak : 0;
    put(o, g ? ",\n    {" : "\n    {");
    field_u(o, "id", g, true);
    put(o, "\"name\": "); put_str(o, ch_group_name(g)); put(o, ", ");
    field_u(o, "allocations", allocs, true);
    field_u(o, "frees", frees, true);
    field_u(o, "live_bytes", live > 0 ? (unsigned long)live : 0, true);
    field_u(o, "peak_live_bytes", peak, true);
    field_u(o, "chunks", atomic_load(&s->chunks), true);
    field_u(o, "peak_chunks", atomic_load(&s->peak_chunks), true);
    field_u(o, "resident_bytes", res > 0 ? (unsigned long)res : 0, true);
    field_u(o, "resident_at_peak_bytes", res_peak, true);
    field_u(o, "fragmentation_at_peak_bytes", frag, true);
    field_pct(o, "fragmentation_at_peak_percent", frag, res_peak);
    put(o, "}");
  }
  put(o, ng ? "\n  ]" : "]");
  unsigned long made = atomic_load(&ch_pools_made);
  if (made) {   /* the pool API's (pool.c): every pool's chunks are of its group */
    struct ch_group_stats *s = &ch_gstats[CH_POOL_GROUP];
    long live = atomic_load(&s->live_bytes) + held_live[CH_POOL_GROUP];
    unsigned long peak = atomic_load(&s->peak_live), destroyed = atomic_load(&ch_pools_destroyed);
    long res = atomic_load(&s->resident);
    if (live > 0 && (unsigned long)live > peak) peak = (unsigned long)live;
    put(o, ",\n  \"pools\": {");
    field_u(o, "made", made, true);
    field_u(o, "destroyed", destroyed, true);
    field_u(o, "live", made > destroyed ? made - destroyed : 0, true);
    field_u(o, "allocations", atomic_load(&s->allocs) + held_allocs[CH_POOL_GROUP], true);
    field_u(o, "frees", atomic_load(&s->frees) + held_frees[CH_POOL_GROUP], true);
    field_u(o, "live_bytes", live > 0 ? (unsigned long)live : 0, true);
    field_u(o, "peak_live_bytes", peak, true);
    field_u(o, "chunks", atomic_load(&s->chunks), true);
    field_u(o, "peak_chunks", atomic_load(&s->peak_chunks), true);
    field_u(o, "resident_bytes", res > 0 ? (unsigned long)res : 0, false);
    put(o, "}");
  }
  put(o, "\n}\n");
  ch_write_all(o->fd, o->buf, o->n);
  close(o->fd);
  ch_unlock(&out_lock);
  return rename(tmp, final) == 0 ? 0 : -1;
}
