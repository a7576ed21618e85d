/* Pointers: APA's data-structure graph, measured (issue 14). Every 8-byte
 * store whose address and value both lie in the span of tracked objects
 * comes here (instrument.c guards the call inline); when the address is in
 * a tracked object and the value points into another (or the same), the
 * edge (the source's context, the field's offset) -> the target's context
 * gains one. The raw dump lists each edge with its count; cohort/measure/profile.py
 * builds the profile's ds_graph from them. */
#include "profiler.h"

ULong ch_pointer_stores;   /* stores that linked two tracked objects */

/* Open addressing over (src << 32 | dst, offset): a key word of 0 is empty
 * (contexts are numbered from 0, so the pair word is stored + 1). */
typedef struct { ULong pair; UInt offset; ULong count; } PtrEdge;
static PtrEdge *table;
static UWord cap, used;

static void put(ULong pair, UInt offset, ULong count);

static void grow(void) {
  PtrEdge *old = table;
  UWord ocap = cap;
  cap = cap ? 2 * cap : 1 << 10;
  table = VG_(calloc)("cohort.pointers", cap, sizeof *table);
  used = 0;
  for (UWord i = 0; i < ocap; i++)
    if (old[i].pair) put(old[i].pair, old[i].offset, old[i].count);
  if (old) VG_(free)(old);
}

static void put(ULong pair, UInt offset, ULong count) {
  if (2 * (used + 1) > cap) grow();
  UWord i = ch_hash64(pair * 4099 + offset) & (cap - 1);
  while (table[i].pair && (table[i].pair != pair || table[i].offset != offset)) i = (i + 1) & (cap - 1);
  if (!table[i].pair) { table[i].pair = pair; table[i].offset = offset; used++; }
  table[i].count += count;
}

VG_REGPARM(2) void ch_store_pointer(Addr a, Addr value) {
  UInt src = ch_shadow_get(a);
  if (!src) return;
  UInt dst = ch_shadow_get(value);
  if (!dst) return;
  Obj *s = ch_obj(src), *d = ch_obj(dst);
  if (!ch_obj_live(s) || !ch_obj_live(d)) return;
  ch_pointer_stores++;
  put(((ULong)s->ctx << 32 | d->ctx) + 1, (UInt)(a - s->start), 1);
}

void ch_pointers_write(VgFile *f) {
  VG_(fprintf)(f, "pointers stores %llu edges %lu\n", ch_pointer_stores, used);
  for (UWord i = 0; i < cap; i++)
    if (table[i].pair) {
      ULong p = table[i].pair - 1;
      VG_(fprintf)(f, "pointer %u %u %u %llu\n", (UInt)(p >> 32), table[i].offset, (UInt)p,
                   table[i].count);
    }
}
