/* Cohort runtime: the checked mode (COHORT_CHECK=1).
 *
 * Group chunks keep no header beside a block, so an overflow from one
 * block lands in its neighbour's data, where nothing notices. In the
 * checked mode every grouped block is asked of the group allocator 17 bytes
 * larger (more if aligned) and laid out as
 *
 *   [pad][size and pad: 8][canary: 8][the program's bytes ...][tail: 1..16]
 *
 * The pad, empty unless the request was aligned beyond 16 bytes, puts the
 * program's bytes on their alignment; the word after it records its length,
 * so the block's start is found from the program's pointer. The canary
 * mixes the header's address and that word with a secret of this process,
 * its last byte with the top bit set; the tail bytes are all one value taken from the canary, with its top bit
 * set, so that no ASCII byte and no zero matches. Both are checked whenever
 * the block is freed, reallocated or asked its size: a write just before
 * the block (an underflow, which lands on the canary's last byte) and a
 * write just past its end (an overflow, which lands on the tail) stop the
 * program, as glibc stops it when the same writes damage its chunk headers.
 * Double, invalid, interior and misaligned frees are told apart before any
 * redzone is read. Chunks are carved with an inaccessible chunk between
 * them (chunk.c), so a write a chunk's length past a block faults. Blocks
 * are never grown or shrunk in place: realloc moves them.
 *
 * heap.c sends every allocation and free here from its slow path (its fast
 * paths see no heap in this mode), so the mode costs nothing when it is off. */
#define _GNU_SOURCE
#include "memory.h"

#include <string.h>
#include <sys/auxv.h>

bool ch_checked;
static uint64_t secret;

#define HEAD 16                  /* the size word, the canary */
#define PAD_SHIFT 48             /* the pad's place in the size word */
#define SIZE_MASK (((uint64_t)1 << PAD_SHIFT) - 1)

void ch_check_init(void) {
  ch_checked = ch_opt.check;
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
  uint64_t k = 0xc2b2ae3d27d4eb4full ^ (uint64_t)(uintptr_t)&secret;
  if (r) { uint64_t x; memcpy(&x, r + 8, sizeof x); k ^= x * 0x9e3779b97f4a7c15ull; }
  secret = k;
}

static inline uint64_t canary(const char *h, uint64_t word) {
  uint64_t k = (uint64_t)(uintptr_t)h ^ secret ^ (word * 0xff51afd7ed558ccdull);
  k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ull; k ^= k >> 29;
  /* Its last byte, the one an underflow of one byte hits, has its top bit
   * set like the tail's: no ASCII byte or zero written there can match (a
   * random last byte let 1 write in 256 through: 2 of 400 runs of the
   * misuse suite's underflow-1). */
  return k | (uint64_t)1 << 63;
}
static inline unsigned char tail_byte(uint64_t c) { return (unsigned char)(c >> 56) | 0x80; }
/* The tail: from the end of the program's bytes to the end of the block asked for. */
static inline size_t tail_len(size_t size, size_t pad) {
  return ch_block_size(pad + HEAD + size + 1) - (pad + HEAD + size);
}

/* The header at h, the program's bytes after it. */
static void *arm(char *h, size_t size, size_t pad) {
  uint64_t word = size | (uint64_t)pad << PAD_SHIFT, c = canary(h, word);
  ((uint64_t *)h)[0] = word;
  ((uint64_t *)h)[1] = c;
  memset(h + HEAD + size, tail_byte(c), tail_len(size, pad));
  return h + HEAD;
}

CH_NOINLINE void *ch_checked_alloc(unsigned group, size_t size, size_t align, bool zero) {
  if (size > ch_max_size || align > 4096) return NULL;
  size_t pad = align > CH_MIN_ALIGN ? (align < HEAD ? HEAD : align) - HEAD : 0;
  char *base = ch_group_alloc_raw(group, pad + HEAD + size + 1, align, zero);
  return base ? arm(base + pad, size, pad) : NULL;
}

/* glibc's form: "free(): invalid pointer". */
static _Noreturn void stop(const char *call, const char *mistake, const void *p) {
  char what[128];
  size_t k = strlen(call), m = strlen(mistake);
  if (k + 2 + m >= sizeof what) m = sizeof what - k - 3;
  memcpy(what, call, k);
  memcpy(what + k, ": ", 2);
  memcpy(what + k + 2, mistake, m);
  what[k + 2 + m] = 0;
  ch_invalid_pointer(what, p);
}

/* The header of the block the program's pointer p belongs to, after every
 * check; stops the program, naming the mistake, at the first that fails. */
static char *verify(const void *p, const char *call) {
  char *h = (char *)p - HEAD;
  if (((uintptr_t)p & (CH_MIN_ALIGN - 1)) || ch_chunk_of(h) != ch_chunk_of(p)) stop(call, "invalid pointer", p);
  /* The pad is read before the block is known to be one: from a wrong
   * pointer it is the program's data, and the block start it gives is
   * checked like any other. */
  uint64_t word = ((const uint64_t *)h)[0];
  char *base = h - (word >> PAD_SHIFT);
  if (base > h || ch_chunk_of(base) != ch_chunk_of(p)) base = h;
  enum ch_block_state st = ch_group_block_state(base);
  if (st == CH_BLOCK_FREE) stop(call, strcmp(call, "free()") ? "invalid pointer" : "double free detected", p);
  if (st == CH_BLOCK_NONE) stop(call, "invalid pointer", p);
  uint64_t c = ((const uint64_t *)h)[1];
  if (c != canary(h, word) || (size_t)(h - base) != word >> PAD_SHIFT)
    stop(call, "buffer underflow detected (the redzone before the block is damaged)", p);
  size_t size = word & SIZE_MASK, n = tail_len(size, word >> PAD_SHIFT);
  const unsigned char *t = (const unsigned char *)p + size;
  unsigned char want = tail_byte(c);
  for (size_t i = 0; i < n; i++)
    if (t[i] != want) stop(call, "buffer overflow detected (the redzone after the block is damaged)", p);
  return h;
}

/* Free the block of a verified header; its canary must not vouch for it again. */
static void release(char *h) {
  uint64_t word = ((uint64_t *)h)[0];
  ((uint64_t *)h)[1] = 0;
  ch_group_free_raw(h - (word >> PAD_SHIFT));
}

CH_NOINLINE void ch_checked_free(void *p) { release(verify(p, "free()")); }

CH_NOINLINE size_t ch_checked_usable(const void *p) {
  return ((const uint64_t *)verify(p, "malloc_usable_size()"))[0] & SIZE_MASK;
}

CH_NOINLINE void *ch_checked_realloc(void *p, size_t size) {
  char *h = verify(p, "realloc()");
  size_t old = ((const uint64_t *)h)[0] & SIZE_MASK;
  void *q = ch_checked_alloc(ch_chunk_of(h)->group, size, CH_MIN_ALIGN, false);
  if (!q) q = ch_next.malloc(size);
  if (!q) return NULL;
  memcpy(q, p, old < size ? old : size);
  release(h);
  return q;
}
