/* Cohort runtime: reading a plan (docs/plan-format.md). Any fault gives one
 * warning naming the file and line, and the process runs without grouping.
 * The CLI checks plans with this same parser (tools/plan_check.c), so the
 * two cannot disagree on what a valid plan is; it uses only the system
 * layer for that reason. Binding the sites to modules: bind/plan_bind.c. */
#define _GNU_SOURCE
#include "plan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_VERSION 9   /* reads 1 to 9; 2 adds the group=G verdict, 3 stop=G, 4 rest G, 5 path,
                            6 unknown-path, 7 rest's option one, 8 group's option at=K, 9 anchor */
#define MAX_PLAN_MODULES 256
#define MAX_CONJ 4096

struct ch_plan *ch_plan;

/* ---------------------------------------------------------------- lexing */

struct lexer { const char *path; unsigned line; char *p; };

static bool next_token(char **s, char **tok) {
  while (**s == ' ' || **s == '\t') (*s)++;
  if (!**s) return false;
  *tok = *s;
  while (**s && **s != ' ' && **s != '\t') (*s)++;
  if (**s) *(*s)++ = 0;
  return true;
}

int ch_hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ch_parse_build_id(const char *hex, size_t n, uint8_t *out, unsigned *len) {
  if (!n || n % 2 || n / 2 > CH_BUILD_ID_MAX) return false;
  for (size_t i = 0; i < n / 2; i++) {
    int h = ch_hex_digit(hex[2 * i]), l = ch_hex_digit(hex[2 * i + 1]);
    if (h < 0 || l < 0) return false;
    out[i] = (uint8_t)(h << 4 | l);
  }
  *len = (unsigned)(n / 2);
  return true;
}

/* ----------------------------------------------------------- anchors */

/* The value of `key` (as "in=") among the words of text, into out[n]. */
static bool anchor_word(const char *text, const char *key, char *out, size_t n) {
  size_t kl = strlen(key);
  for (const char *p = text; (p = strstr(p, key)); p++) {
    if (p != text && p[-1] != ' ' && p[-1] != '\t') continue;
    p += kl;
    size_t len = strcspn(p, " \t");
    if (!len || len >= n) return false;
    memcpy(out, p, len);
    out[len] = 0;
    return true;
  }
  return false;
}
static bool anchor_ids(const char *text, uint32_t *ids) {
  for (int j = 0; j < CH_ANCHOR_WINDOW; j++) {
    uint32_t v = 0;
    for (int d = 0; d < 8; d++) {
      int x = ch_hex_digit(*text++);
      if (x < 0) return false;
      v = v << 4 | (uint32_t)x;
    }
    ids[j] = v;
    if (*text != (j + 1 < CH_ANCHOR_WINDOW ? ',' : 0)) return false;
    text++;
  }
  return true;
}
static const char *anchor_count(const char *s, size_t *v) {
  const char *p = s;
  for (*v = 0; *p >= '0' && *p <= '9' && p - s < 9; p++) *v = *v * 10 + (size_t)(*p - '0');
  return p == s ? NULL : p;
}

bool ch_anchor_parse(const char *text, struct ch_anchor *a) {
  char word[CH_ANCHOR_NAME + 8], ids[CH_ANCHOR_WINDOW * 9 + 2];
  if (!anchor_word(text, "call=", word, sizeof word) || strlen(word) < 3 || word[1] != ':' ||
      (word[0] != CH_ANCHOR_DIRECT && word[0] != CH_ANCHOR_SLOT && word[0] != CH_ANCHOR_INDIRECT))
    return false;
  if (strlen(word + 2) > CH_ANCHOR_NAME) return false;
  a->kind = word[0];
  memcpy(a->to, word + 2, strlen(word + 2) + 1);
  if (!anchor_word(text, "tofn=", a->callee, CH_ANCHOR_NAME + 1)) a->callee[0] = 0;
  if (!anchor_word(text, "in=", a->in, CH_ANCHOR_NAME + 1) || !anchor_word(text, "nth=", word, sizeof word)) return false;
  const char *p = anchor_count(word, &a->nth);
  if (!p || *p != '/' || !(p = anchor_count(p + 1, &a->count)) || *p || (a->count && a->nth >= a->count))
    return false;
  return anchor_word(text, "before=", ids, sizeof ids) && anchor_ids(ids, a->side[0]) &&
         anchor_word(text, "after=", ids, sizeof ids) && anchor_ids(ids, a->side[1]);
}

/* The words of a `module N BUILDID PATH` line after its keyword, [s, end)
 * (the plan's and the prefetch file's): index N must be `expect` (modules
 * are numbered 0, 1, ... in order, fewer than `limit`), BUILDID hex or `-`
 * (none), PATH the rest of the line, blanks around it dropped. false: why,
 * without the line number. */
bool ch_parse_module_line(const char *s, const char *end, unsigned expect, unsigned limit, uint8_t *build_id,
                          unsigned *build_id_len, char *path, size_t path_size, char *why, size_t whylen) {
  const char *w[2];
  size_t n[2];
  for (int k = 0; k < 2; k++) {
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    w[k] = s;
    while (s < end && *s != ' ' && *s != '\t') s++;
    n[k] = (size_t)(s - w[k]);
  }
  unsigned long long index = 0;
  bool digits = n[0] && n[0] <= 9;
  for (size_t i = 0; digits && i < n[0]; i++) {
    digits = w[0][i] >= '0' && w[0][i] <= '9';
    index = index * 10 + (unsigned)(w[0][i] - '0');
  }
  if (!digits || index >= limit) {
    snprintf(why, whylen, "module needs an index below %u", limit);
    return false;
  }
  if (index != expect) {
    snprintf(why, whylen, "module %llu out of order (expected %u)", index, expect);
    return false;
  }
  if (!n[1]) {
    snprintf(why, whylen, "module needs a build id (hex, or '-')");
    return false;
  }
  *build_id_len = 0;
  if (!(n[1] == 1 && *w[1] == '-') && !ch_parse_build_id(w[1], n[1], build_id, build_id_len)) {
    snprintf(why, whylen, "bad build id '%.*s'", (int)(n[1] > 80 ? 80 : n[1]), w[1]);
    return false;
  }
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
  if (s == end) {
    snprintf(why, whylen, "module needs a path");
    return false;
  }
  if ((size_t)(end - s) >= path_size) {
    snprintf(why, whylen, "module path too long (at most %zu bytes)", path_size - 1);
    return false;
  }
  memcpy(path, s, (size_t)(end - s));
  path[end - s] = 0;
  return true;
}

/* Digits only (hex with an optional 0x once), no sign, no spaces: the
 * grammar the CLI reads too (cohort/formats/planfile.py). */
static bool parse_uint(const char *t, int base, unsigned long long max, unsigned long long *out) {
  if (!t || !*t) return false;
  if (base == 16 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t += 2;
  if (!*t) return false;
  for (const char *c = t; *c; c++)
    if (base == 16 ? ch_hex_digit(*c) < 0 : (*c < '0' || *c > '9')) return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(t, &end, base);
  if (*end || errno || v > max) return false;
  *out = v;
  return true;
}

/* -------------------------------------------------------------- parsing */

/* Writes why the plan was refused, "plan PATH line N: WHY", into why. */
static int fail(char *why, size_t whylen, const char *path, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(char *why, size_t whylen, const char *path, unsigned line, const char *fmt, ...) {
  int n = snprintf(why, whylen, "plan %s line %u: ", path, line);
  if (n < 0 || (size_t)n >= whylen) return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why + n, whylen - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}
#define FAIL(...) return fail(why, whylen, path, line, __VA_ARGS__)

/* The trie node for `site` under `parent`, made if absent: its index, or 0
 * when the trie is full. */
static unsigned trie_add(struct ch_plan *pl, unsigned parent, unsigned site) {
  unsigned child = ch_plan_child(pl, parent, (int)site);
  if (child) return child;
  if (pl->nnodes == CH_MAX_NODES) return 0;
  uint32_t key = ((uint32_t)parent << 9 | site) + 1;
  uint32_t h = (key * 0x9e3779b1u) >> 19;
  while (pl->trie_key[h]) h = (h + 1) & (2 * CH_MAX_NODES - 1);
  child = pl->nnodes++;
  pl->has_child[parent] = 1;
  pl->trie_key[h] = key;
  pl->trie_child[h] = (uint16_t)child;
  pl->node_verdict[child] = CH_QUICK_WALK;
  return child;
}

static int parse(char *text, size_t len, const char *path, struct ch_plan *pl, char *why, size_t whylen) {
  unsigned line = 0;
  bool have_header = false, have_end = false;
  char *p = text, *limit = text + len;
  while (p < limit) {
    char *eol = memchr(p, '\n', (size_t)(limit - p));
    if (!eol) eol = limit;
    *eol = 0;
    char *s = p;
    p = eol + 1;
    line++;
    if (strlen(s) != (size_t)(eol - s)) FAIL("contains a NUL byte: not a text plan");
    char *hash = strchr(s, '#');
    if (hash) *hash = 0;
    size_t sl = strlen(s);
    while (sl && (s[sl - 1] == ' ' || s[sl - 1] == '\t' || s[sl - 1] == '\r')) s[--sl] = 0;
    char *kw;
    if (!next_token(&s, &kw)) continue;
    if (have_end) FAIL("text after 'end'");
    if (!have_header) {
      char *v;
      unsigned long long ver;
      if (strcmp(kw, "cohort-plan")) FAIL("not a Cohort plan (first line must be 'cohort-plan %d')", PLAN_VERSION);
      if (!next_token(&s, &v) || !parse_uint(v, 10, 1000, &ver)) FAIL("bad version");
      if (ver < 1 || ver > PLAN_VERSION) FAIL("plan format version %llu; this runtime reads versions 1 to %d", ver, PLAN_VERSION);
      pl->version = (unsigned)ver;
      have_header = true;
      continue;
    }
    char *a, *b, *c;
    unsigned long long x, y, z;
    if (!strcmp(kw, "max-size")) {
      if (!next_token(&s, &a) || !parse_uint(a, 10, ch_opt.chunk_size / 8, &x) || x < 8 || *s)
        FAIL("max-size needs a byte count from 8 to %zu", ch_opt.chunk_size / 8);
      pl->max_size = (size_t)x;
    } else if (!strcmp(kw, "module")) {
      struct ch_plan_module *m = &pl->modules[pl->nmodules];
      char bad[160];
      if (!ch_parse_module_line(s, s + strlen(s), pl->nmodules, MAX_PLAN_MODULES, m->build_id, &m->build_id_len,
                                m->path, sizeof m->path, bad, sizeof bad))
        FAIL("%s", bad);
      pl->nmodules++;
    } else if (!strcmp(kw, "site")) {
      if (!next_token(&s, &a) || !parse_uint(a, 10, CH_MAX_SITES - 1, &x)) FAIL("site needs an index below %d", CH_MAX_SITES);
      if (x != pl->nsites) FAIL("site %llu out of order (expected %u)", x, pl->nsites);
      if (!next_token(&s, &b) || !parse_uint(b, 10, ~0ull, &y) || y >= pl->nmodules) FAIL("site names an undeclared module");
      if (!next_token(&s, &c) || !parse_uint(c, 16, UINTPTR_MAX, &z)) FAIL("site needs a hex offset");
      struct ch_plan_site *st = &pl->sites[pl->nsites];
      st->module = (unsigned)y;
      st->offset = (uintptr_t)z;
      st->entry = CH_ENTRY_UNKNOWN;
      char *v;
      bool have_verdict = false;
      while (next_token(&s, &v)) {
        if (!strncmp(v, "stop=", 5) && pl->version >= 3) {
          if (st->stop || !parse_uint(v + 5, 10, CH_PLAN_GROUPS - 1, &x)) FAIL("bad '%s': one stop=G per site", v);
          st->stop = (unsigned)x + 1;
          continue;
        }
        if (have_verdict) FAIL("extra text after site");
        have_verdict = true;
        if (!strcmp(v, "cold")) st->entry = CH_ENTRY_COLD;
        else if (!strcmp(v, "walk")) st->entry = CH_ENTRY_WALK;
        else if (!strncmp(v, "group=", 6) && pl->version >= 2 &&
                 parse_uint(v + 6, 10, CH_PLAN_GROUPS - 1, &x)) {
          st->entry = CH_ENTRY_GROUP;
          st->group = (unsigned)x;
          st->quick = (int)x;
        } else if (!strcmp(v, "next") && pl->version >= 4) {
          st->entry = CH_ENTRY_NEXT;   /* decides alone, like group=G: packed as such */
          st->quick = CH_QUICK_NEXT;
        } else FAIL("site verdict must be 'cold', 'walk', 'group=G' (version 2), 'stop=G' (version 3) or 'next' (version 4), not '%s'", v);
      }
      pl->nsites++;
    } else if (!strcmp(kw, "anchor") && pl->version >= 9) {
      if (!next_token(&s, &a) || !parse_uint(a, 10, ~0ull, &x) || x >= pl->nsites) FAIL("anchor names an undeclared site");
      if (pl->sites[x].anchor) FAIL("site %llu anchored twice", x);
      struct ch_anchor *an = ch_meta_alloc(sizeof *an);
      if (!an) FAIL("out of memory");
      if (!ch_anchor_parse(s, an))
        FAIL("anchor needs call=K:NAME in=NAME nth=I/N before=8 hashes after=8 hashes (docs/plan-format.md)");
      pl->sites[x].anchor = an;
    } else if (!strcmp(kw, "group")) {
      if (!next_token(&s, &a) || !parse_uint(a, 10, CH_PLAN_GROUPS - 1, &x)) FAIL("group needs an index below %d", CH_PLAN_GROUPS);
      if (x != pl->ngroups) FAIL("group %llu out of order (expected %u)", x, pl->ngroups);
      if (!next_token(&s, &b)) FAIL("group needs a name");
      strncpy(pl->group_names[pl->ngroups], b, 63);
      /* Version 8: where in a line the group's blocks of whole lines start. */
      if (pl->version >= 8 && next_token(&s, &b)) {
        if (strncmp(b, "at=", 3) || !parse_uint(b + 3, 10, 48, &y) || y % 16)
          FAIL("group takes one option, at=0, 16, 32 or 48");
        pl->group_at[pl->ngroups] = (int8_t)y;
      }
      if (*s) FAIL(pl->version >= 8 ? "group takes a one-word name and at most the option at=K"
                                    : "group name must be one word");
      pl->ngroups++;
    } else if (!strcmp(kw, "select")) {
      if (pl->nconj == MAX_CONJ) FAIL("more than %d select lines", MAX_CONJ);
      if (!next_token(&s, &a) || !parse_uint(a, 10, ~0ull, &x) || x >= pl->ngroups) FAIL("select names an undeclared group");
      struct ch_plan_conj *cj = &pl->conj[pl->nconj];
      cj->group = (unsigned)x;
      unsigned n = 0;
      while (next_token(&s, &b)) {
        if (!parse_uint(b, 10, ~0ull, &y) || y >= pl->nsites) FAIL("select names an undeclared site '%s'", b);
        cj->mask[y >> 6] |= (uint64_t)1 << (y & 63);
        n++;
      }
      if (!n) FAIL("select needs at least one site");
      pl->nconj++;
    } else if (!strcmp(kw, "rest") && pl->version >= 4) {
      if (pl->rest >= 0) FAIL("one rest line per plan");
      if (!next_token(&s, &a) || !parse_uint(a, 10, ~0ull, &x) || x >= pl->ngroups)
        FAIL("rest names an undeclared group");
      pl->rest = (int)x;
      bool max_seen = false;
      while (next_token(&s, &b)) {
        if (!strncmp(b, "max=", 4) && !max_seen && parse_uint(b + 4, 10, ch_opt.chunk_size / 8, &y) && y >= 8) {
          pl->rest_max = (size_t)y;
          max_seen = true;
        } else if (!strcmp(b, "one") && !pl->rest_one && pl->version >= 7) {
          pl->rest_one = true;
        } else {
          FAIL(pl->version >= 7 ? "rest takes the options max=BYTES (8 to %zu) and one, each once"
                                : "rest takes one option, max=BYTES (8 to %zu)", ch_opt.chunk_size / 8);
        }
      }
    } else if (!strcmp(kw, "path") && pl->version >= 5) {
      /* path S1 S2 ... VERDICT: a walk entering at S1 that meets S2, ...
       * next (repeated sites skipped) ends there with VERDICT. */
      char *toks[CH_MAX_PATH + 2];
      unsigned n = 0;
      while (n < CH_MAX_PATH + 2 && next_token(&s, &toks[n])) n++;
      if (*s || n > CH_MAX_PATH + 1) FAIL("a path holds at most %d sites", CH_MAX_PATH);
      if (n < 3) FAIL("a path needs at least two sites and a verdict");
      const char *v = toks[n - 1];
      int verdict;
      if (!strcmp(v, "cold")) verdict = CH_QUICK_COLD;
      else if (!strcmp(v, "next")) verdict = CH_QUICK_NEXT;
      else if (!strncmp(v, "group=", 6) && parse_uint(v + 6, 10, ~0ull, &x) && x < pl->ngroups) verdict = (int)x;
      else FAIL("a path ends in 'group=G' (a declared group), 'cold' or 'next', not '%s'", v);
      unsigned node = 0;
      uint64_t seen[CH_MAX_SITES / 64] = {0};
      for (unsigned i = 0; i + 1 < n; i++) {
        if (!parse_uint(toks[i], 10, ~0ull, &y) || y >= pl->nsites) FAIL("path names an undeclared site '%s'", toks[i]);
        if (seen[y >> 6] >> (y & 63) & 1) FAIL("site %llu comes twice in one path (walks skip repeated sites)", y);
        seen[y >> 6] |= (uint64_t)1 << (y & 63);
        if (i == 0 && pl->sites[y].entry != CH_ENTRY_WALK && pl->sites[y].entry != CH_ENTRY_UNKNOWN)
          FAIL("path enters at site %llu, whose own verdict already decides", y);
        if (node && pl->node_verdict[node] != CH_QUICK_WALK) FAIL("path goes on past a decided path");
        node = trie_add(pl, node, (unsigned)y);
        if (!node) FAIL("more than %d path nodes", CH_MAX_NODES - 1);
      }
      if (pl->node_verdict[node] != CH_QUICK_WALK) FAIL("path decided twice");
      if (pl->has_child[node]) FAIL("path decides where a longer path goes on");
      pl->node_verdict[node] = verdict;
    } else if (!strcmp(kw, "unknown-entry")) {
      if (!next_token(&s, &a) || *s) FAIL("unknown-entry needs 'walk' or 'cold'");
      if (!strcmp(a, "walk")) pl->unknown_entry = CH_ENTRY_WALK;
      else if (!strcmp(a, "cold")) pl->unknown_entry = CH_ENTRY_COLD;
      else FAIL("unknown-entry needs 'walk' or 'cold'");
    } else if (!strcmp(kw, "unknown-path") && pl->version >= 6) {
      if (!next_token(&s, &a) || *s) FAIL("unknown-path needs 'walk' or 'cold'");
      if (!strcmp(a, "walk")) pl->unknown_path = CH_ENTRY_WALK;
      else if (!strcmp(a, "cold")) pl->unknown_path = CH_ENTRY_COLD;
      else FAIL("unknown-path needs 'walk' or 'cold'");
    } else if (!strcmp(kw, "end")) {
      if (*s) FAIL("extra text after end");
      have_end = true;
    } else {
      FAIL("unknown directive '%s'", kw);
    }
  }
  if (!have_header) FAIL("empty file: not a Cohort plan");
  if (!have_end) FAIL("truncated: no 'end' line");
  for (unsigned i = 0; i < pl->nsites; i++)
  {
    if (pl->sites[i].entry == CH_ENTRY_GROUP && pl->sites[i].group >= pl->ngroups)
      FAIL("site %u's verdict names group %u, which is not declared", i, pl->sites[i].group);
    if (pl->sites[i].stop > pl->ngroups)
      FAIL("site %u's stop names group %u, which is not declared", i, pl->sites[i].stop - 1);
  }
  return 0;
}
#undef FAIL

int ch_plan_read(const char *path, struct ch_plan **out, char *why, size_t whylen) {
  char *text;
  size_t len;
  int err = ch_read_file(path, &text, &len);
  if (err) {
    snprintf(why, whylen, "cannot read plan %s: %s", path, strerror(err));
    return -1;
  }
  struct ch_plan *pl = ch_meta_alloc(sizeof *pl);
  if (pl) {
    pl->modules = ch_meta_alloc(sizeof *pl->modules * MAX_PLAN_MODULES);
    pl->sites = ch_meta_alloc(sizeof *pl->sites * CH_MAX_SITES);
    pl->group_names = ch_meta_alloc(sizeof *pl->group_names * CH_MAX_GROUPS);
    pl->conj = ch_meta_alloc(sizeof *pl->conj * MAX_CONJ);
    pl->node_verdict = ch_meta_alloc(sizeof *pl->node_verdict * CH_MAX_NODES);
    pl->trie_key = ch_meta_alloc(sizeof *pl->trie_key * 2 * CH_MAX_NODES);
    pl->trie_child = ch_meta_alloc(sizeof *pl->trie_child * 2 * CH_MAX_NODES);
    pl->has_child = ch_meta_alloc(CH_MAX_NODES);
  }
  if (!pl || !pl->modules || !pl->sites || !pl->group_names || !pl->conj || !pl->node_verdict ||
      !pl->trie_key || !pl->trie_child || !pl->has_child) {
    ch_os_release(text, len + 1);
    snprintf(why, whylen, "plan %s: out of memory", path);
    return -1;
  }
  pl->max_size = 4096;
  pl->unknown_entry = CH_ENTRY_WALK;
  pl->unknown_path = CH_ENTRY_WALK;
  pl->rest = -1;
  pl->rest_max = ~(size_t)0;
  memset(pl->group_at, -1, sizeof pl->group_at);
  pl->nnodes = 1;   /* the root */
  pl->node_verdict[0] = CH_QUICK_WALK;
  int rc = parse(text, len, path, pl, why, whylen);
  ch_os_release(text, len + 1);
  if (rc) return -1;
  *out = pl;
  return 0;
}

int ch_plan_load(const char *path) {
  char why[600];
  struct ch_plan *pl;
  if (ch_plan_read(path, &pl, why, sizeof why)) {
    ch_warn("%s; running without grouping", why);
    return -1;
  }
  ch_plan = pl;
  return 0;
}
