/* Counts: counters keyed by a nonzero 64-bit word, in one open-addressing
 * table doubled when half full. Affinity's edges and the layouts'
 * neighbours are such tables; their keys pack two context ids. */
#include "profiler.h"

static void grow(CountTable *t) {
  ULong *ok = t->keys, *on = t->counts;
  UWord ocap = t->cap;
  t->cap = t->cap ? 2 * t->cap : 1 << 12;
  t->keys = VG_(calloc)(t->cc, t->cap, sizeof(ULong));
  t->counts = VG_(calloc)(t->cc, t->cap, sizeof(ULong));
  t->used = 0;
  for (UWord i = 0; i < ocap; i++)
    if (ok[i]) ch_count_add(t, ok[i], on[i]);
  if (ok) { VG_(free)(ok); VG_(free)(on); }
}

/* The slot that holds key, or the empty one where it would go. */
static inline UWord probe(const CountTable *t, ULong key) {
  UWord i = ch_hash64(key) & (t->cap - 1);
  while (t->keys[i] && t->keys[i] != key) i = (i + 1) & (t->cap - 1);
  return i;
}

void ch_count_add(CountTable *t, ULong key, ULong n) {
  if (2 * (t->used + 1) > t->cap) grow(t);
  UWord i = probe(t, key);
  if (!t->keys[i]) { t->keys[i] = key; t->used++; }
  t->counts[i] += n;
}

ULong ch_count_get(const CountTable *t, ULong key) {
  if (!t->cap) return 0;
  UWord i = probe(t, key);
  return t->keys[i] ? t->counts[i] : 0;
}
