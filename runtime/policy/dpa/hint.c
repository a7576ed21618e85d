/* Cohort runtime: DPA's call-site hints (Wang, Wu & Yew, CGO 2010, section
 * 4, the second optimisation: the outermost call site of a chain "provides
 * its associated object group ID directly"; and, where that call ends several
 * groups' chains, the call one frame in names the chain's prefix: dpa.c).
 *
 * dpa.c identifies a chain through wrappers with one table probe per frame.
 * Once a chain's group is decided (its pool, or none), the outermost call of
 * the chain, where it is a direct `call rel32`, is rewritten to reach a stub
 * of the group's own: the stub stores the group's index + 1 in the thread's
 * hint and jumps to the call's original target. The callee runs with the
 * stack and registers a plain call gives it; only memory at the hint
 * changes, not even the flags. The allocator reads the hint and clears it,
 * and dpa.c checks it against the stack (the chain's return addresses at
 * their fixed places), so a hint that the callee did not follow to the
 * allocator, or that a signal handler's allocation found first, costs the
 * ordinary probes: a stack that holds the chain's return addresses at those
 * places is that chain, whatever set the hint. A hint whose allocations
 * keep going to its pool comes to be trusted, and is then checked once in
 * 64 allocations only (dpa.c): a hint found wrong in between places an
 * object in the wrong pool, never more.
 *
 * Stubs come in blocks of one page, one stub per group index, written whole
 * when the block is made and executable from then on; each stub jumps
 * through its own target slot, on the next page, which stays writable, so
 * that a stub is put to use by storing its target and then patching the
 * call (patch.c's means, one atomic store while other threads may run it).
 * A block is made near the module whose calls it serves. */
#define _GNU_SOURCE
#include "dpa.h"

#include <string.h>
#include <sys/mman.h>

bool ch_hint_enabled;

__asm__(
  ".text\n"
  ".p2align 4\n"
  ".globl cohort_hint_template\n"
  ".hidden cohort_hint_template\n"
  "cohort_hint_template:\n"
  "  movl $0x7fffffff, %fs:0x7ffffff0\n"   /* the hint: the group + 1, at its TLS offset */
  "  jmp *0(%rip)\n"                       /* through the stub's target slot */
  ".globl cohort_hint_end\n"
  ".hidden cohort_hint_end\n"
  "cohort_hint_end:\n");
extern const char cohort_hint_template[], cohort_hint_end[];

#define STUB_SIZE 32
#define MAX_MODULES 64
static struct ch_stub_template tmpl;
static int32_t tls_disp, prefix_tls_disp;   /* of ch_dpa_hint, ch_dpa_prefix_hint */
static size_t page, per_block, nblocks;
static struct { const struct ch_module *m; uint8_t **blocks; } mods[MAX_MODULES];
static unsigned nmods;

void ch_hint_init(void) {
  if (!ch_opt.patch || !ch_patch_code_init()) return;
  if (!ch_patch_read_template(cohort_hint_template, cohort_hint_end, &tmpl) || !tmpl.imm_at || !tmpl.disp_at ||
      tmpl.size > STUB_SIZE)
    return;
  uintptr_t tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));
  intptr_t off = (intptr_t)((uintptr_t)&ch_dpa_hint - tp), poff = (intptr_t)((uintptr_t)&ch_dpa_prefix_hint - tp);
  if (off != (int32_t)off || poff != (int32_t)poff) return;
  tls_disp = (int32_t)off;
  prefix_tls_disp = (int32_t)poff;
  page = ch_page_size();
  per_block = page / STUB_SIZE;
  nblocks = (CH_DPA_MAX_OGS + CH_DPA_PREFIX_HINTS + per_block - 1) / per_block;
  ch_hint_enabled = true;
}

/* Under the patch lock: the block of stubs that holds group og's, for calls
 * in module m, made if new. */
static uint8_t *block_for(const struct ch_module *m, unsigned og) {
  unsigned i = 0;
  while (i < nmods && mods[i].m != m) i++;
  if (i == nmods) {
    if (nmods == MAX_MODULES) return NULL;
    uint8_t **b = ch_meta_alloc(nblocks * sizeof *b);
    if (!b) return NULL;
    memset(b, 0, nblocks * sizeof *b);
    mods[i].m = m;
    mods[i].blocks = b;
    nmods++;
  }
  size_t k = og / per_block;
  if (mods[i].blocks[k]) return mods[i].blocks[k];
  /* Code on the first page, the target slots and the stubs' .eh_frame on
   * the second. */
  uint8_t *r = ch_patch_map_near(m->lo, m->hi, 2 * page);
  if (!r) return NULL;
  memset(r, 0xcc, page);   /* int3 between stubs */
  for (size_t s = 0; s < per_block; s++) {
    uint8_t *stub = r + s * STUB_SIZE;
    ch_patch_put_stub(r, s * STUB_SIZE, cohort_hint_template, &tmpl, page + 8 * s);
    /* A group's stub sets ch_dpa_hint; a prefix's, ch_dpa_prefix_hint, so
     * that a prefix named on the way in leaves a group named further out. */
    uint32_t id = (uint32_t)(k * per_block + s);
    uint32_t value = (id < CH_DPA_MAX_OGS ? id : id - CH_DPA_MAX_OGS) + 1;
    memcpy(stub + tmpl.imm_at, &value, 4);
    memcpy(stub + tmpl.disp_at, id < CH_DPA_MAX_OGS ? &tls_disp : &prefix_tls_disp, 4);
  }
  uint8_t *eh = r + page + 8 * per_block;
  ch_patch_stub_unwind(eh, (uintptr_t)r, page);
  if (!ch_patch_seal(r, page)) {
    munmap(r, 2 * page);
    return NULL;
  }
  ch_patch_register_unwind(eh);
  return mods[i].blocks[k] = r;
}

int ch_hint_patch(uintptr_t ret, unsigned og) {
  if (!ch_hint_enabled || og >= CH_DPA_MAX_OGS + CH_DPA_PREFIX_HINTS) return CH_HINT_LEFT;
  /* Looking modules up may refresh them: before the patch lock. */
  const struct ch_module *m = ch_module_for(ret);
  uintptr_t target;
  if (!m || m->system || m->writable_code || ch_patch_check_call(m, ret, &target) >= 0) return CH_HINT_LEFT;
  bool live = !ch_patch_one_thread();
  if (live && !ch_patch_live_ok(ret - 4)) return CH_HINT_LEFT;
  if (!ch_patch_trylock()) return CH_HINT_RETRY;   /* another thread is writing code */
  uint8_t *r = block_for(m, og);
  bool ok = false;
  if (r) {
    size_t s = og % per_block;
    __atomic_store_n((uintptr_t *)(r + page) + s, target, __ATOMIC_RELEASE);
    intptr_t disp = (intptr_t)((uintptr_t)r + s * STUB_SIZE - ret);
    ok = disp == (int32_t)disp && ch_patch_write_disp(ret - 4, (int32_t)disp, live);
  }
  ch_patch_unlock();
  return ok ? CH_HINT_PATCHED : CH_HINT_LEFT;
}
