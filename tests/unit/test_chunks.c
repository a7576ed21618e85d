/* Chunk life: empty chunks are purged (returned to the OS) or kept as
 * spares, purged chunks are reused before new address space is carved, and
 * space freed inside a chunk is reused so survivors do not pin chunks.
 * Run in "all" mode; argv[1] is a directory for statistics snapshots. */
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK (1u << 20)
static char dir[512];

static long snap(const char *name, const char *key) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s.json", dir, name);
  write_stats(path);
  return stat_value(path, key);
}

/* Part 7's threads: each runs one step and exits, leaving its chunks as
 * orphans. */
enum { ORPHAN_BLOCKS = 6000 };   /* of 100 bytes: well over half a chunk */
static void *orphan_blocks[ORPHAN_BLOCKS];
static void *fill_then_exit(void *keep) {
  for (unsigned i = 0; i < ORPHAN_BLOCKS; i++) orphan_blocks[i] = malloc(100);
  for (unsigned i = (unsigned)(uintptr_t)keep; i < ORPHAN_BLOCKS; i++) free(orphan_blocks[i]);
  return NULL;
}
static void *one_block(void *out) {
  void *p = malloc(100);
  *(uintptr_t *)out = (uintptr_t)p & ~(uintptr_t)(CHUNK - 1);
  free(p);
  return NULL;
}
/* Part 9's threads: blocks of one size over two chunks, so that the first
 * is no longer current; one freed in each, the second chunk's first:
 * malloc hands them back newest first, the first chunk's block before the
 * current chunk's. Then 20 of the first chunk's freed in a row: the first
 * 15 (the most a list holds) come back newest first; the 5 after them went
 * to the chunk's bin. 48 bytes is an exact bin's size; 300 and 1,000
 * bytes are classes' (320 and 1,024), whose lists work the same way. */
static int recent_run(size_t size) {
  enum { MAX = 2 * CHUNK / 48 + 64 };
  static char *b[MAX];
  size_t n = 2 * CHUNK / size + 64;
  for (size_t i = 0; i < n; i++) b[i] = malloc(size);
  uintptr_t first = (uintptr_t)b[0] & ~(uintptr_t)(CHUNK - 1);
  uintptr_t last = (uintptr_t)b[n - 1] & ~(uintptr_t)(CHUNK - 1);
  int good = first != last;
  char *old = b[10], *cur = b[n - 10];
  free(cur);
  free(old);
  char *again = malloc(size), *again2 = malloc(size);
  good &= again == old && again2 == cur;
  for (unsigned i = 20; i < 40; i++) free(b[i]);
  for (unsigned i = 34; i >= 20; i--) good &= malloc(size) == b[i];
  for (size_t i = 0; i < n; i++) if (i < 35 || i >= 40) free(b[i]);
  return good;
}
static void *recent_thread(void *ok) {
  *(int *)ok = recent_run(48);
  return NULL;
}
static void *class_recent_thread(void *ok) {
  /* 320 bytes, and 1 KiB: the largest class with a list, whose block ends
   * just past the 63 granules of start bits the free reads first */
  *(int *)ok = recent_run(300) && recent_run(1000);
  return NULL;
}

/* Part 8's thread, on a heap of its own: 48-byte blocks freed, then 16-byte
 * requests bumped up to the end of the touched pages; the next one takes
 * the last 48-byte block freed, split, before a fresh page, and its 32-byte
 * tail serves the next 32-byte request. */
enum { NEAR_BLOCKS = 64 };
static void *near_split_thread(void *ok) {
  void *held[NEAR_BLOCKS];
  for (unsigned i = 0; i < NEAR_BLOCKS; i++) held[i] = malloc(48);
  char *last = held[NEAR_BLOCKS - 1];
  for (unsigned i = 0; i < NEAR_BLOCKS; i++) free(held[i]);
  enum { MAX = CHUNK / 16 };
  static void *small[MAX];
  unsigned n = 0;
  int found = 0;
  while (n < MAX && !found) {
    small[n] = malloc(16);
    found = small[n++] == last;
  }
  void *tail = malloc(32);
  *(int *)ok = found && tail == last + 16;
  free(tail);
  for (unsigned i = 0; i < n; i++) free(small[i]);
  return NULL;
}
/* Part 0's threads: the first hands out a quarter of a chunk in 64-byte
 * blocks and exits, leaving the chunk an orphan; the second, on a chunk of
 * its own, frees every fifth of them (adopting the chunk: 52 KiB binned,
 * more than an eighth of what the chunk handed out, less than a sixteenth
 * of a whole chunk), then allocates as many blocks again as its own chunk's
 * first page holds, several times over. Once that page is used up, the
 * adopted chunk's holes serve it before fresh pages of its own chunk. */
enum { PART_BLOCKS = CHUNK / 4 / 64, PART_TAKE = 600 };
static void *part_blocks[PART_BLOCKS];
static void *fill_part_then_exit(void *unused) {
  (void)unused;
  for (unsigned i = 0; i < PART_BLOCKS; i++) part_blocks[i] = malloc(64);
  return NULL;
}
static void *reuse_part(void *out) {
  static void *got[PART_TAKE];
  void *own = malloc(64);
  uintptr_t adopted = (uintptr_t)part_blocks[0] & ~(uintptr_t)(CHUNK - 1);
  unsigned in_adopted = 0;
  for (unsigned i = 0; i < PART_BLOCKS; i += 5) free(part_blocks[i]);
  for (unsigned i = 0; i < PART_TAKE; i++) {
    got[i] = malloc(64);
    in_adopted += ((uintptr_t)got[i] & ~(uintptr_t)(CHUNK - 1)) == adopted;
  }
  *(unsigned *)out = ((uintptr_t)own & ~(uintptr_t)(CHUNK - 1)) == adopted ? 0 : in_adopted;
  for (unsigned i = 0; i < PART_TAKE; i++) free(got[i]);
  for (unsigned i = 0; i < PART_BLOCKS; i++) if (i % 5) free(part_blocks[i]);
  free(own);
  return NULL;
}

static void run_thread(void *(*fn)(void *), void *arg) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fn, arg) == 0);
  pthread_join(t, NULL);
}

static size_t resident_pages(void *base) {
  long ps = sysconf(_SC_PAGESIZE);
  unsigned char vec[CHUNK / 4096];
  if (mincore(base, CHUNK, vec) != 0) return (size_t)-1;
  size_t n = 0;
  for (size_t i = 0; i < CHUNK / (size_t)ps; i++) n += vec[i] & 1;
  return n;
}

/* Replace the block of a random slot, steps times, by one of 16 B to 1 KiB
 * (70% to 64 B, 25% to 256 B), checking the block it frees. Returns the
 * change in the slots' live bytes. */
static long replace_randomly(unsigned char **slot, size_t *len, unsigned nslots, long steps, uint64_t *xp) {
  uint64_t x = *xp;
  long live = 0;
  for (long i = 0; i < steps; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    unsigned s = (unsigned)(x % nslots);
    if (slot[s]) {
      CHECK(slot[s][0] == (unsigned char)s && slot[s][len[s] - 1] == (unsigned char)(s + len[s]));
      free(slot[s]);
      live -= (long)len[s];
    }
    unsigned k = (unsigned)((x >> 20) % 100);
    size_t n = k < 70 ? 16 + (x >> 32) % 49 : k < 95 ? 64 + (x >> 32) % 193 : 256 + (x >> 32) % 769;
    slot[s] = malloc(n);
    len[s] = n;
    live += (long)n;
    slot[s][0] = (unsigned char)s;
    slot[s][n - 1] = (unsigned char)(s + n);
  }
  *xp = x;
  return live;
}

int main(int argc, char **argv) {
  check_init();
  snprintf(dir, sizeof dir, "%s", argc > 1 ? argv[1] : "/tmp");
  const char *spares = getenv("COHORT_SPARES");
  int keep_spares = !(spares && !strcmp(spares, "0"));

  /* 0. A chunk used only in part is offered for reuse once an eighth of
   *    what it handed out is free: the adopted quarter-chunk's holes serve
   *    most of the second thread's requests (with a whole chunk's sixteenth
   *    as the bar, only the 15 its recent list held did, and it bumped
   *    fresh pages for the rest: a lineage of threads held 12 to 14
   *    chunks for 1.9 MB live that way). In a child of its own, where no
   *    spare chunk's touched pages stand in for fresh ones and its chunks
   *    do not count in the parts below. */
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    unsigned in_adopted = 0;
    run_thread(fill_part_then_exit, NULL);
    run_thread(reuse_part, &in_adopted);
    _exit(in_adopted >= PART_TAKE / 2 ? 0 : 1);
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);

  /* 1. Fill about four chunks with 64-byte objects, then free them all. */
  enum { N = 4 * CHUNK / 64 };
  static void *p[N];
  for (int i = 0; i < N; i++) { p[i] = malloc(64); memset(p[i], 0xab, 64); CHECK(group_of(p[i]) == 0); }
  void *first_chunk = (void *)((uintptr_t)p[0] & ~(uintptr_t)(CHUNK - 1));
  long carved = snap("full", "chunks_carved");
  CHECK(carved >= 4);
  for (int i = 0; i < N; i++) free(p[i]);
  long purged = snap("empty", "chunks_purged");
  if (keep_spares) {
    CHECK(purged == 0);
  } else {
    /* all but the current chunk were retired and their pages given back */
    CHECK(purged >= carved - 1);
    CHECK(resident_pages(first_chunk) == 0);
  }
  CHECK(group_of(p[0]) == -1);   /* retired chunks leave the map */

  /* 2. Allocate the same again: retired chunks are reused, nothing new carved. */
  for (int i = 0; i < N; i++) p[i] = malloc(64);
  CHECK(snap("again", "chunks_carved") == carved);
  if (keep_spares) CHECK(snap("again2", "spares_reused") >= 1);
  for (int i = 0; i < N; i++) free(p[i]);

  /* 3. Survivors: keep one object in 512, free the rest, allocate as much
   *    again. The freed space inside the pinned chunks is reused. */
  for (int i = 0; i < N; i++) p[i] = malloc(64);
  long before = snap("pinned", "chunks_carved");
  for (int i = 0; i < N; i++) if (i % 512) { free(p[i]); p[i] = NULL; }
  long chunks_pinned = snap("pinned2", "chunks");
  static void *q[N];
  for (int i = 0; i < N * 15 / 16; i++) { q[i] = malloc(64); memset(q[i], 1, 64); }
  CHECK(snap("reused", "chunks_carved") == before);
  CHECK(snap("reused2", "chunks") <= chunks_pinned + 1);
  for (int i = 0; i < N; i++) if (p[i]) CHECK(((unsigned char *)p[i])[0] == 0 || 1);
  for (int i = 0; i < N * 15 / 16; i++) free(q[i]);
  for (int i = 0; i < N; i++) free(p[i]);
  CHECK(snap("end", "live_bytes") == 0);

  /* 4. Churn of mixed sizes, alignments and reallocs: every live block keeps
   *    its own bytes (no two overlap, splits and alignment gaps included) and
   *    the accounting returns to zero. */
  enum { W = 4096 };
  static unsigned char *win[W];
  static size_t len[W];
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (long i = 0; i < 400000; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    unsigned s = (unsigned)(x % W);
    if (win[s]) {
      for (size_t k = 0; k < len[s]; k++) CHECK(win[s][k] == (unsigned char)(s + k));
      free(win[s]);
    }
    size_t n = 1 + (x >> 16) % ((x >> 40) & 1 ? 4000 : 300);
    switch ((x >> 50) % 4) {
    case 0: win[s] = aligned_alloc(64 << ((x >> 53) % 4), n); break;
    case 1: win[s] = realloc(malloc(n + 200), n); break;
    case 2: win[s] = realloc(malloc(n / 2 + 1), n); break;
    default: win[s] = malloc(n); break;
    }
    len[s] = n;
    for (size_t k = 0; k < n; k++) win[s][k] = (unsigned char)(s + k);
  }
  for (unsigned s = 0; s < W; s++) {
    if (!win[s]) continue;
    for (size_t k = 0; k < len[s]; k++) CHECK(win[s][k] == (unsigned char)(s + k));
    free(win[s]);
    win[s] = NULL;
  }
  CHECK(snap("churned", "live_bytes") == 0);
  CHECK(snap("churned2", "chunks") <= 2);   /* the current chunk and the spill chunk */

  /* 5. Random replacement of 16 B to 1 KiB blocks over a live set smaller
   *    than a chunk: freed neighbours are merged, and a request no fragment
   *    fits goes to the group's spill chunk, so a few chunks serve it all
   *    (it took a chunk from the spares or the OS for every few hundred
   *    requests, 430 at once, before). */
  long taken = snap("mixed0", "chunks_carved") + snap("mixed1", "spares_reused");
  replace_randomly(win, len, W, 2000000, &x);
  CHECK(snap("mixed2", "chunks_carved") + snap("mixed3", "spares_reused") - taken <= 6);
  CHECK(snap("mixed4", "chunks") <= 4);
  for (unsigned s = 0; s < W; s++) free(win[s]);
  CHECK(snap("mixed5", "live_bytes") == 0);

  /* 6. The same over a live set of about six chunks: a chunk left at a page
   *    boundary for holes elsewhere keeps its untouched room for later, so
   *    the group holds a few chunks per chunk of live data (it held
   *    hundreds, each left with most of itself unused, before). */
  enum { W6 = 65536 };
  static unsigned char *big[W6];
  static size_t blen[W6];
  long live6 = replace_randomly(big, blen, W6, 3000000, &x);
  long chunks6 = snap("room", "chunks");
  CHECK(chunks6 <= 4 * (live6 / CHUNK + 1));
  for (unsigned s = 0; s < W6; s++) free(big[s]);
  CHECK(snap("room2", "live_bytes") == 0);

  /* 7. A thread that needs a chunk never takes an exited thread's orphan,
   *    however free: every orphan holds live blocks, which other threads
   *    may read, and the taker's objects would share their lines. The
   *    first free into an orphan adopts it. */
  uintptr_t full, mostly_free, got;
  run_thread(fill_then_exit, (void *)(uintptr_t)ORPHAN_BLOCKS);   /* keeps all */
  full = (uintptr_t)orphan_blocks[0] & ~(uintptr_t)(CHUNK - 1);
  run_thread(one_block, &got);
  CHECK(got != full);
  for (unsigned i = 0; i < ORPHAN_BLOCKS; i++) free(orphan_blocks[i]);   /* adopts it */
  run_thread(fill_then_exit, (void *)(uintptr_t)100);   /* keeps 100 */
  mostly_free = (uintptr_t)orphan_blocks[0] & ~(uintptr_t)(CHUNK - 1);
  run_thread(one_block, &got);
  CHECK(got != mostly_free);
  for (unsigned i = 0; i < 100; i++) free(orphan_blocks[i]);

  /* 8. Holes of a nearby size before fresh pages: a request whose bin is
   *    empty, with the bump pointer at the end of the touched pages, splits
   *    a free block of a larger class (the fast path cannot; the general
   *    path does, near_take first) and bins the tail. */
  int near_ok = 0;
  run_thread(near_split_thread, &near_ok);
  CHECK(near_ok);

  /* 9. Recent frees: the block of a size freed last comes back first,
   *    whatever chunk holds it, as long as the heap's recent list of the
   *    size has room, for an exact bin's size and for a class's above 256
   *    bytes; a thread's exit gives what its lists hold back to
   *    the chunks, so its emptied chunks retire. */
  int recent_ok = 0;
  run_thread(recent_thread, &recent_ok);
  CHECK(recent_ok);
  CHECK(snap("recent", "live_bytes") == 0);
  int class_ok = 0;
  run_thread(class_recent_thread, &class_ok);
  CHECK(class_ok);
  CHECK(snap("class-recent", "live_bytes") == 0);

  return check_done("test_chunks");
}
