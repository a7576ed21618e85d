/* Cohort runtime: the region of address space group chunks are carved
 * from, and the table that finds a pointer's live chunk in O(1).
 *
 * A chunk is chunk_size bytes, aligned to its size, owned by one group. At
 * the chunk's colour (ch_chunk_of: a whole number of cache lines from its
 * start) come two bitmaps with one bit per 16-byte granule of the chunk:
 * "that block is on its way back from another thread" (touched only by
 * frees from other threads), then "a block starts here" (read by every
 * free: one cache line covers 8 KiB of objects); a line of zeros; then the
 * header, then the objects, which carry no header of their own. The region
 * is reserved without access and each chunk is given access when it is
 * carved, so wild writes into the rest of the region fault (and in the
 * checked mode every other chunk stays so, as a guard). An empty chunk
 * becomes the newest spare (dirty; up to COHORT_SPARES process-wide), and
 * the oldest spare beyond that number is purged (pages given back, access
 * taken away) and kept for reuse; either way its table entry is cleared. A
 * destroyed pool's chunks all become spares, and those beyond COHORT_SPARES
 * are purged once they have waited CH_SPARE_DELAY_MS, oldest first, by
 * whichever thread next takes or retires a chunk: purging
 * at once cost pooldestroy 40 times what it cost to keep them (a million
 * objects: 2.3 ms against 45 us), and a program that destroys a pool often
 * makes the next one soon (docs/pools.md). */
#define _GNU_SOURCE
#include "memory.h"

#include <string.h>

size_t ch_chunk_size;
uintptr_t ch_chunk_mask;
size_t ch_chunk_bitmap_bytes;
size_t ch_chunk_starts_bytes;
size_t ch_pool_max;
unsigned ch_chunk_colour_shift;
uintptr_t ch_chunk_colour_mask;
uintptr_t ch_chunk_colour_step;
struct ch_region ch_region;

static ch_lock_t chunk_lock;
static char *region_cur, *region_end;   /* the region's uncarved rest */
static struct ch_chunk *spares, *oldest_spare;   /* empty, dirty: reused first, newest
                                                    first; linked through next/prev */
static unsigned nspares;
/* Purged chunks are listed outside themselves: writing a link into a purged
 * chunk would bring one of its pages back. */
static struct ch_chunk **cleans;
static size_t ncleans, cleans_cap;

/* The largest region tried: far more than any machine's memory, and only
 * address space (Valgrind grants about 32 GiB, `ulimit -v` may grant less:
 * the size halves until the reservation succeeds). */
#define REGION_MAX ((uintptr_t)1 << 40)
#define REGION_MIN ((uintptr_t)64 << 20)

void ch_chunks_init(void) {
  ch_chunk_size = ch_opt.chunk_size;
  ch_chunk_mask = ch_chunk_size - 1;
  ch_chunk_starts_bytes = ch_chunk_size / CH_GRANULE / 8;
  ch_chunk_bitmap_bytes = 2 * ch_chunk_starts_bytes + CH_STARTS_PAD;
  ch_chunk_colour_shift = (unsigned)__builtin_ctzll(ch_chunk_size);
  size_t colours = ch_chunk_size / 1024 < CH_COLOURS_MAX ? ch_chunk_size / 1024 : CH_COLOURS_MAX;
  ch_chunk_colour_mask = colours - 1;
  ch_chunk_colour_step = (colours / 64 * 618 / 1000) | 1;
  uintptr_t min = REGION_MIN > 4 * ch_chunk_size ? REGION_MIN : 4 * ch_chunk_size;
  char *base = NULL;
  uintptr_t size = REGION_MAX;
  /* Aligned to a whole period of the colours, so that a chunk's colour,
   * which its address gives, depends only on where it lies in the region:
   * the same run after run wherever the kernel puts the region. */
  for (; !base && size >= min; size /= 2) base = ch_os_reserve_aligned(size, CH_COLOUR_PERIOD * ch_chunk_size);
  if (!base) { ch_warn("cannot reserve address space for group chunks; grouping is off"); return; }
  size *= 2;   /* undo the loop's last halving */
  /* Untouched pages of the table cost nothing. */
  unsigned shift = (unsigned)__builtin_ctzll(ch_chunk_size);
  struct ch_region_entry *table = ch_os_reserve((size >> shift) * sizeof *table);
  if (!table) {
    ch_os_release(base, size);
    ch_warn("cannot reserve the chunk table; grouping is off");
    return;
  }
  region_cur = base;
  region_end = base + size;
  ch_region.table = table;
  ch_region.shift = shift;
  ch_region.base = (uintptr_t)base;
  /* The largest block a pool holds: the room of the chunk whose header is
   * at the last colour. */
  ch_pool_max = (ch_chunk_size - ch_chunk_bitmap_bytes - ch_chunk_colour_mask * 64 - sizeof(struct ch_chunk)) &
                ~(size_t)(CH_GRANULE - 1);
  __atomic_store_n(&ch_region.size, size, __ATOMIC_RELEASE);
  atomic_fetch_add(&ch_slabs, 1);
}

/* Enter the chunk in the table (or take it out). */
static void set_table(struct ch_chunk *c, bool on) {
  uintptr_t i = (ch_chunk_base(c) - ch_region.base) >> ch_region.shift;
  if (on) ch_region.table[i].starts_bias = c->starts_bias;   /* before the chunk is published */
  __atomic_store_n(&ch_region.table[i].chunk, on ? c : NULL, __ATOMIC_RELEASE);
}

/* Pages of this chunk that have been touched: the start bits that cover the
 * used range, and the pages from the header's to the high-water mark. (The
 * freed bits, set only by frees from other threads, are left out.) */
size_t ch_chunk_resident(const struct ch_chunk *c) {
  size_t ps = ch_page_size();
  uintptr_t bits0 = (uintptr_t)ch_chunk_starts(c), hdr = (uintptr_t)c & ~(ps - 1);
  uintptr_t bits1 = bits0 + ((uintptr_t)c->hwm & ch_chunk_mask) / CH_GRANULE / 8;
  size_t bits = ((bits1 + ps - 1) & ~(ps - 1)) - (bits0 & ~(ps - 1));
  if (bits1 > hdr) bits = hdr - (bits0 & ~(ps - 1));   /* the header's page is counted below */
  size_t rest = (((uintptr_t)c->hwm - hdr) + ps - 1) & ~(ps - 1);
  return bits + rest;
}

static char *carve_locked(void) {
  if ((size_t)(region_end - region_cur) < ch_chunk_size) return NULL;   /* the region is full */
  char *c = region_cur;
  if (!ch_os_commit(c, ch_chunk_size)) return NULL;   /* out of mappings: the next allocator serves */
  region_cur += ch_chunk_size;
  /* Checked mode: an inaccessible chunk after each, so an overrun of a
   * chunk's length faults instead of landing in the next (check.c). */
  if (ch_checked && region_cur != region_end) region_cur += ch_chunk_size;
  atomic_fetch_add(&ch_chunks_carved, 1);
  return c;
}

static void purge_waited(void);

struct ch_chunk *ch_chunk_new(uint32_t group) {
  if (!ch_region.size) return NULL;
  ch_lock(&chunk_lock);
  struct ch_chunk *c;
  char *hwm = NULL;
  if ((c = spares)) {
    spares = c->next;
    if (spares) spares->prev = NULL; else oldest_spare = NULL;
    nspares--;
    hwm = c->hwm;                 /* pages stay resident, contents are stale */
    atomic_fetch_add(&ch_spares_reused, 1);
  } else if (ncleans) {
    c = cleans[ncleans - 1];
    if (ch_os_commit((void *)ch_chunk_base(c), ch_chunk_size)) ncleans--;
    else c = NULL;
  } else {
    char *base = carve_locked();
    c = base ? ch_chunk_of(base) : NULL;
  }
  ch_unlock(&chunk_lock);
  if (!c) return NULL;
  purge_waited();

  memset(c, 0, sizeof *c);
  c->magic = CH_CHUNK_MAGIC;
  c->group = group;
  c->data = (char *)(c + 1);
  c->bump = c->data;
  c->end = (char *)ch_chunk_base(c) + ch_chunk_size;
  c->hwm = hwm ? hwm : c->data;
  c->starts_bias = (uintptr_t)ch_chunk_starts(c) - (ch_chunk_base(c) >> CH_STARTS_WORD_SHIFT) * sizeof(uint64_t);
  set_table(c, true);
  atomic_fetch_add(&ch_gstats[group].chunks, 1);
  unsigned long n = atomic_load(&ch_gstats[group].chunks);
  if (n > atomic_load(&ch_gstats[group].peak_chunks)) atomic_store(&ch_gstats[group].peak_chunks, n);
  ch_count_resident(group, (long)ch_chunk_resident(c));
  return c;
}

/* Clear the start bits of every granule from `from` to `to`, both included
 * (to may be the chunk's end). The freed bits of an empty chunk are clear
 * already: a block on its way back from another thread counts as live. */
void ch_chunk_clear_starts(struct ch_chunk *c, const char *from, const char *to) {
  uintptr_t base = ch_chunk_base(c);
  size_t nwords = ch_chunk_size / CH_GRANULE / 64;
  size_t w0 = ((uintptr_t)from - base) / CH_GRANULE / 64, w1 = ((uintptr_t)to - base) / CH_GRANULE / 64;
  if (w1 >= nwords) w1 = nwords - 1;
  uint64_t *starts = ch_chunk_starts(c);
  for (size_t w = w0; w <= w1; w++) __atomic_store_n(&starts[w], 0, __ATOMIC_RELAXED);
}

/* Add c to the spares, newest first; chunk_lock is held. */
static void spare_add(struct ch_chunk *c) {
  c->spare_since = ch_os_now_ms();
  c->prev = NULL;
  c->next = spares;
  if (spares) spares->prev = c; else oldest_spare = c;
  spares = c;
  nspares++;
}

static void purge(struct ch_chunk *c);

/* The spares beyond COHORT_SPARES that have waited long enough go. */
static void purge_waited(void) {
  if (__atomic_load_n(&nspares, __ATOMIC_RELAXED) <= ch_opt.max_spares) return;
  uint64_t now = ch_os_now_ms();
  for (;;) {
    ch_lock(&chunk_lock);
    struct ch_chunk *c = oldest_spare;
    if (nspares <= ch_opt.max_spares || !c || now - c->spare_since < CH_SPARE_DELAY_MS) {
      ch_unlock(&chunk_lock);
      return;
    }
    oldest_spare = c->prev;
    if (oldest_spare) oldest_spare->next = NULL; else spares = NULL;
    nspares--;
    ch_unlock(&chunk_lock);
    purge(c);
  }
}

/* Off the books as a live chunk: its statistics and table entry, and the
 * start bits (the bump pointer's mark may be at the high-water mark). */
static void unlist(struct ch_chunk *c) {
  unsigned g = c->group;
  ch_count_resident(g, -(long)ch_chunk_resident(c));
  atomic_fetch_sub(&ch_gstats[g].chunks, 1);
  set_table(c, false);
  ch_chunk_clear_starts(c, c->data, c->hwm);
  c->magic = 0;
}

void ch_chunk_retire_later(struct ch_chunk *c) {
  unlist(c);
  ch_lock(&chunk_lock);
  spare_add(c);
  ch_unlock(&chunk_lock);
  purge_waited();
}

/* The chunk holds no live object. Keep it as the newest spare; when that
 * makes more than COHORT_SPARES, the oldest spare's pages go back. Purging
 * only ever the oldest spare (here, or once it has waited) keeps the
 * purged chunks in the order they were retired, after every spare: chunks
 * are reused newest first however the purges fell in time, so the layout
 * does not depend on the clock (docs/runtime.md, "The same layout every
 * run"). */
void ch_chunk_retire(struct ch_chunk *c) {
  unlist(c);
  ch_lock(&chunk_lock);
  spare_add(c);
  struct ch_chunk *old = NULL;
  if (nspares > ch_opt.max_spares) {
    old = oldest_spare;
    oldest_spare = old->prev;
    if (oldest_spare) oldest_spare->next = NULL; else spares = NULL;
    nspares--;
  }
  ch_unlock(&chunk_lock);
  if (old) purge(old);
  purge_waited();
}

/* Give c's pages back and keep it for reuse. */
static void purge(struct ch_chunk *c) {
  ch_os_decommit((void *)ch_chunk_base(c), ch_chunk_size);
  atomic_fetch_add(&ch_chunks_purged, 1);
  ch_lock(&chunk_lock);
  if (ncleans == cleans_cap) {
    size_t cap = cleans_cap ? cleans_cap * 2 : 256;
    struct ch_chunk **n = ch_meta_alloc(cap * sizeof *n);   /* the old array is abandoned */
    if (!n) { ch_unlock(&chunk_lock); return; }             /* the chunk stays reserved, unused */
    for (size_t i = 0; i < ncleans; i++) n[i] = cleans[i];
    cleans = n;
    cleans_cap = cap;
  }
  cleans[ncleans++] = c;
  ch_unlock(&chunk_lock);
}

/* The lock keeps ch_chunk_retire from purging a chunk fn is reading: it
 * clears the chunk's table entry before it takes the lock, and purges only
 * after. */
void ch_chunks_each(void (*fn)(const struct ch_chunk *c, void *arg), void *arg) {
  if (!ch_region.size) return;
  ch_lock(&chunk_lock);
  uintptr_t carved = ((uintptr_t)region_cur - ch_region.base) >> ch_region.shift;
  for (uintptr_t i = 0; i < carved; i++) {
    struct ch_chunk *c = __atomic_load_n(&ch_region.table[i].chunk, __ATOMIC_ACQUIRE);
    if (c) fn(c, arg);
  }
  ch_unlock(&chunk_lock);
}

void ch_chunks_atfork_prepare(void) { ch_lock(&chunk_lock); }
void ch_chunks_atfork_parent(void) { ch_unlock(&chunk_lock); }
void ch_chunks_atfork_child(void) { ch_lock_init(&chunk_lock); }
