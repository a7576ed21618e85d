/* Counts: counters keyed by a nonzero 64-bit word, in one open-addressing
 * table doubled when half full. Affinity's edges and the layouts'
 * neighbours are such tables; their keys pack two context ids. A slot holds
 * its key and counts together: apart, the keys and the counts in two
 * arrays, an add of a large table (a C++ program's edges) missed the
 * host's cache twice. */
#include "profiler.h"

static UWord probe(const CountTable *t, ULong key);

static void grow(CountTable *t) {
  ULong *old = t->slots;
  UWord ocap = t->cap, width = ch_count_width(t);
  t->cap = t->cap ? 2 * t->cap : 1 << 12;
  t->slots = VG_(calloc)(t->cc, t->cap * width, sizeof(ULong));
  t->used = 0;
  for (UWord i = 0; i < ocap; i++) {
    const ULong *s = &old[i * width];
    if (!s[0]) continue;
    ULong *d = ch_count_slot(t, probe(t, s[0]));
    for (UWord w = 0; w < width; w++) d[w] = s[w];
    t->used++;
  }
  if (old) VG_(free)(old);
}

/* The slot that holds key, or the empty one where it would go. */
static inline UWord probe(const CountTable *t, ULong key) {
  UWord i = ch_hash64(key) & (t->cap - 1);
  while (ch_count_slot(t, i)[0] && ch_count_slot(t, i)[0] != key) i = (i + 1) & (t->cap - 1);
  return i;
}

static inline ULong *slot_for(CountTable *t, ULong key) {
  if (2 * (t->used + 1) > t->cap) grow(t);
  ULong *s = ch_count_slot(t, probe(t, key));
  if (!s[0]) { s[0] = key; t->used++; }
  return s;
}

void ch_count_add(CountTable *t, ULong key, ULong n) { slot_for(t, key)[1] += n; }

void ch_count_add2(CountTable *t, ULong key, ULong n, ULong second) {
  ULong *s = slot_for(t, key);
  s[1] += n;
  s[2] += second;
}
