/* Cohort runtime: allocation call sites sent straight to their group.
 *
 * A plan site whose own entry verdict decides the group (group=G, not a stop
 * site) needs nothing but its return address to be identified, yet every
 * allocation through it still pays for the quick test: the cached rule of
 * the return address and the path counts, about half of a grouped malloc's
 * instructions. Such a call, where it is a direct `call rel32` that reaches
 * Cohort's malloc or operator new (itself, or through a PLT entry whose GOT
 * slot holds it), is rewritten to reach a stub of its group instead: the
 * stub puts G in the second argument register and jumps to
 * ch_direct_malloc or ch_direct_new (alloc.c, new.c), the group allocator's
 * fast path with nothing left to decide. The return address stays the
 * original one and the callee sees the stack a plain call would have given
 * it; only %rsi and the flags change, which a call to an external function
 * may change anyway.
 *
 * A `walk` entry site whose allocations the activations of patched
 * selector sites decide (the shared wrapper under a selector, an
 * interpreter's xmalloc) gets a stub that passes the stack pointer instead,
 * to ch_direct_act_malloc or ch_direct_act_new: the activations decide at
 * once, without the quick test's probe; what they cannot decide takes the
 * ordinary path.
 *
 * Under a plan with a rest group, a cold entry site's call gets the rest
 * group's stub, into ch_direct_rest_malloc or ch_direct_rest_new, which keep
 * the rest group's size limit. Under a plan without one, it gets a stub into
 * ch_direct_cold_malloc or ch_direct_cold_new, which count it and go on to
 * the next allocator: the quick test cost such a request about 100
 * instructions more than the next allocator's own malloc+free pair (99 for
 * jemalloc's: allocbench churn, its site cold).
 *
 * Sites are patched lazily, by the first allocation that reaches one by a
 * walk (or by the activations, or by the quick test's cold verdict): by then the PLT slot is bound even under lazy binding, and the slot
 * names the function the call really reaches. Anything that fails a check
 * stays unpatched and keeps the quick test, counted in the statistics. The
 * code is written as patch.c writes it (one atomic store per call while
 * other threads may run it). */
#define _GNU_SOURCE
#include "select.h"

#include "decode.h"
#include <dlfcn.h>
#include <string.h>
#include <sys/mman.h>

bool ch_direct_enabled;
size_t ch_direct_max;
size_t ch_direct_small;
void ch_direct_set_max(size_t max) {
  ch_direct_small = max < CH_EXACT_MAX ? max : CH_EXACT_MAX;
  ch_direct_max = max;
}
struct ch_direct_stats ch_direct_stats;

/* ------------------------------------------------------------- the stub */

/* One stub per kind and group: the group as an immediate (its offset in the
 * instruction found by decoding the template), then a jump through one
 * target slot per kind, so that the stubs of many groups share a data line.
 * A `walk` site's stub passes the stack pointer instead: the slot of the
 * call's return address, which tells the activations that are live. */
__asm__(
  ".text\n"
  ".p2align 4\n"
  ".globl cohort_direct_template\n"
  ".hidden cohort_direct_template\n"
  "cohort_direct_template:\n"
  "  movl $0x7fffffff, %esi\n"
  "  jmp *0(%rip)\n"                      /* the displacement is filled in */
  ".globl cohort_direct_end\n"
  ".hidden cohort_direct_end\n"
  "cohort_direct_end:\n"
  ".globl cohort_direct_act_template\n"
  ".hidden cohort_direct_act_template\n"
  "cohort_direct_act_template:\n"
  "  movq %rsp, %rsi\n"
  "  jmp *0(%rip)\n"
  ".globl cohort_direct_act_end\n"
  ".hidden cohort_direct_act_end\n"
  "cohort_direct_act_end:\n"
  /* A cold site's: counts the request in the thread's struct ch_thread
   * (the displacement becomes its field's offset from %fs:0) and goes
   * straight on to the next allocator's own entry point. */
  ".globl cohort_direct_cold_template\n"
  ".hidden cohort_direct_cold_template\n"
  "cohort_direct_cold_template:\n"
  "  addq $1, %fs:0x7fffffff\n"
  "  jmp *0(%rip)\n"
  ".globl cohort_direct_cold_end\n"
  ".hidden cohort_direct_cold_end\n"
  "cohort_direct_cold_end:\n");
extern const char cohort_direct_template[], cohort_direct_end[];
extern const char cohort_direct_act_template[], cohort_direct_act_end[];
extern const char cohort_direct_cold_template[], cohort_direct_cold_end[];
#define STUB_SIZE 16
/* Per entry point (malloc, operator new): a group stub, an MO site's pool
 * stub, a `walk` site's stub, a cold site's stub into the rest group, an MO
 * site's stub into the next allocator, a cold site's into the next allocator. Each kind K_X_NEW is K_X_MALLOC + 1;
 * the kinds below GROUP_KINDS have one stub per group. */
enum kind { K_MALLOC, K_NEW, K_SITE_MALLOC, K_SITE_NEW, K_ACT_MALLOC, K_ACT_NEW, K_REST_MALLOC, K_REST_NEW,
            K_NEXT_MALLOC, K_NEXT_NEW, K_COLD_MALLOC, K_COLD_NEW, K_KINDS };
#define GROUP_KINDS K_ACT_MALLOC
#define NSTUBS (GROUP_KINDS * CH_MAX_GROUPS + K_KINDS - GROUP_KINDS)
static size_t stub_offset(int k, unsigned group) {
  return (k < GROUP_KINDS ? (unsigned)k * CH_MAX_GROUPS + group
                          : GROUP_KINDS * CH_MAX_GROUPS + (unsigned)(k - GROUP_KINDS)) * STUB_SIZE;
}

/* One region per module with a patched site, near its code: a stub for
 * every kind and group, the kinds' target slots, then the stubs' .eh_frame. */
#define MAX_REGIONS 64
static struct { const struct ch_module *m; uint8_t *stubs; } regions[MAX_REGIONS];
static unsigned nregions;

static struct ch_direct_entries entries;
static int rest_group = -1;   /* the plan's, if it has one */
enum { S_UNTRIED, S_BUSY, S_PATCHED, S_LEFT };
static _Atomic uint8_t state[CH_MAX_SITES];
/* The templates' layout: where the group goes, where each jump's slot is. */
static struct ch_stub_template group_t, act_t, cold_t;

/* Copies template t (layout l) to `at` in region r, its jump through target slot k. */
static void put_stub(uint8_t *r, size_t at, const char *t, const struct ch_stub_template *l, size_t slots, int k) {
  ch_patch_put_stub(r, at, t, l, slots + 8 * (size_t)k);
}

/* m's region, or NULL: none made yet. */
static uint8_t *region_of(const struct ch_module *m) {
  for (unsigned i = 0; i < nregions; i++)
    if (regions[i].m == m) return regions[i].stubs;
  return NULL;
}

/* Where an MO site decided for the next allocator's malloc goes: the next
 * allocator's malloc itself, not counted, once it is known. Counting those
 * requests (ch_direct_next_malloc) cost calc 150 under mo 3% of its
 * instructions: a monitor that sent every request of an interpreter's one
 * allocation site to glibc. */
static uintptr_t next_malloc_target(void) {
  bool known = atomic_load_explicit(&ch_next_state, memory_order_acquire) == 2 && ch_next.malloc;
  return known ? (uintptr_t)ch_next.malloc : (uintptr_t)entries.next_malloc;
}

/* Where a cold site's stub goes, once it has counted the request: the next
 * allocator's malloc, and its own operator new where it has one (jemalloc,
 * tcmalloc); else ch_direct_cold_new, which calls its malloc and takes
 * operator new's path on failure. ch_direct_cold_malloc until the next
 * allocator is known. cppcheck in front of jemalloc, 2.5 M requests at
 * its cold sites: 15 instructions each when the stub entered
 * ch_direct_cold_new, which counted them itself, against 1 now. */
static uintptr_t cold_target(int k) {
  bool known = atomic_load_explicit(&ch_next_state, memory_order_acquire) == 2 && ch_next.malloc;
  if (k == K_COLD_MALLOC) return known ? (uintptr_t)ch_next.malloc : (uintptr_t)entries.cold_malloc;
  return known && ch_next.new_ ? (uintptr_t)ch_next.new_ : (uintptr_t)entries.cold_new;
}

static uint8_t *region_for(const struct ch_module *m) {
  uint8_t *found = region_of(m);
  if (found || nregions == MAX_REGIONS) return found;
  size_t page = ch_page_size(), code = NSTUBS * STUB_SIZE, slots = code, eh = slots + 8 * K_KINDS;
  size_t size = (eh + 128 + page - 1) & ~(page - 1);
  uint8_t *r = ch_patch_map_near(m->lo, m->hi, size);
  if (!r) return NULL;
  uintptr_t targets[K_KINDS] = {(uintptr_t)entries.direct_malloc, (uintptr_t)entries.direct_new,
                                (uintptr_t)entries.site_malloc, (uintptr_t)entries.site_new,
                                (uintptr_t)entries.act_malloc, (uintptr_t)entries.act_new,
                                (uintptr_t)entries.rest_malloc, (uintptr_t)entries.rest_new,
                                next_malloc_target(), (uintptr_t)entries.next_new,
                                cold_target(K_COLD_MALLOC), cold_target(K_COLD_NEW)};
  memcpy(r + slots, targets, sizeof targets);
  memset(r, 0xcc, code);   /* int3 between stubs */
  for (int k = K_MALLOC; k < GROUP_KINDS; k++)
    for (unsigned g = 0; g < CH_MAX_GROUPS; g++) {
      size_t at = stub_offset(k, g);
      put_stub(r, at, cohort_direct_template, &group_t, slots, k);
      uint32_t imm = g;
      memcpy(r + at + group_t.imm_at, &imm, 4);
    }
  for (int k = K_ACT_MALLOC; k <= K_ACT_NEW; k++)
    put_stub(r, stub_offset(k, 0), cohort_direct_act_template, &act_t, slots, k);
  for (int k = K_REST_MALLOC; k <= K_REST_NEW && rest_group >= 0; k++) {
    size_t at = stub_offset(k, 0);
    put_stub(r, at, cohort_direct_template, &group_t, slots, k);
    uint32_t imm = (uint32_t)rest_group;
    memcpy(r + at + group_t.imm_at, &imm, 4);
  }
  /* The next allocator's stubs pass no group: the group template's
   * immediate stays, in a register the call may change anyway. */
  for (int k = K_NEXT_MALLOC; k <= K_NEXT_NEW; k++)
    put_stub(r, stub_offset(k, 0), cohort_direct_template, &group_t, slots, k);
  int32_t counter = (int32_t)ch_tls_offset(&ch_thread.cold_stubbed);   /* static TLS: within 2 GiB of %fs */
  for (int k = K_COLD_MALLOC; k <= K_COLD_NEW; k++) {
    put_stub(r, stub_offset(k, 0), cohort_direct_cold_template, &cold_t, slots, k);
    memcpy(r + stub_offset(k, 0) + cold_t.disp_at, &counter, 4);
  }
  ch_patch_stub_unwind(r + eh, (uintptr_t)r, code);
  if (!ch_patch_seal(r, size)) {
    munmap(r, size);
    return NULL;
  }
  ch_patch_register_unwind(r + eh);
  regions[nregions].m = m;
  regions[nregions++].stubs = r;
  return r;
}

/* ------------------------------------------------------------ checking */

static int kind_of_entry(uintptr_t f) {
  if (f == entries.malloc) return K_MALLOC;
  if (f == entries.new_ || f == entries.new_array) return K_NEW;
  return -1;
}

/* What the loader binds a name to: the first definition in the global
 * scope, looked up once (0: none, or not ours). Before lazy binding has
 * filled a PLT slot, the slot's relocation names the function instead. */
static uintptr_t bound_malloc, bound_new, bound_new_array;

static void look_up_bindings(void) {
  bound_malloc = (uintptr_t)dlsym(RTLD_DEFAULT, "malloc");
  bound_new = (uintptr_t)dlsym(RTLD_DEFAULT, "_Znwm");
  bound_new_array = (uintptr_t)dlsym(RTLD_DEFAULT, "_Znam");
}

static int kind_of_name(const char *name) {
  if (!name) return -1;
  uintptr_t f = !strcmp(name, "malloc") ? bound_malloc
              : !strcmp(name, "_Znwm") ? bound_new : !strcmp(name, "_Znam") ? bound_new_array : 0;
  return f ? kind_of_entry(f) : -1;
}

/* Which of our entry points a call to target reaches: target itself, or a
 * PLT entry of the caller's module (`[endbr64] jmp *slot(%rip)`) whose
 * slot holds it now. -1: neither. */
static int kind_of_target(const struct ch_module *m, uintptr_t target) {
  int k = kind_of_entry(target);
  if (k >= 0 || target < m->lo || target >= m->hi) return k;
  ZydisDecodedInstruction ins;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  uintptr_t pc = target;
  for (int i = 0; i < 2; i++) {
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ch_decoder, (const void *)pc, m->hi - pc, &ins, ops))) return -1;
    if (ins.mnemonic != ZYDIS_MNEMONIC_ENDBR64) break;
    pc += ins.length;
  }
  if (ins.mnemonic != ZYDIS_MNEMONIC_JMP || ins.operand_count_visible != 1 ||
      ops[0].type != ZYDIS_OPERAND_TYPE_MEMORY || ops[0].mem.base != ZYDIS_REGISTER_RIP ||
      ops[0].mem.index != ZYDIS_REGISTER_NONE || ops[0].size != 64)
    return -1;
  ZyanU64 slot;
  if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&ins, &ops[0], pc, &slot)) || (slot & 7) ||
      !ch_module_maps(m, (uintptr_t)slot, 8))
    return -1;
  uintptr_t now = __atomic_load_n((const uintptr_t *)(uintptr_t)slot, __ATOMIC_RELAXED);
  k = kind_of_entry(now);
  /* A slot still pointing into its own module is not bound yet (lazy
   * binding): its relocation says what it will reach. */
  if (k < 0 && now >= m->lo && now < m->hi) k = kind_of_name(ch_module_slot_symbol(m, (uintptr_t)slot));
  return k;
}

/* Whether the call at ret can be patched, and which entry point it reaches
 * (*kp: K_MALLOC or K_NEW, to which the caller adds the kind of site). Looks
 * modules up (which may refresh them and patch new ones under the patch
 * lock), so it runs before that lock is taken. */
static bool stub_kind(uintptr_t ret, const struct ch_module **mp, int *kp, bool *live) {
  const struct ch_module *m = ch_module_for(ret);
  uintptr_t target;
  if (!m || m->system || m->writable_code || ch_patch_check_call(m, ret, &target) >= 0) return false;
  int k = kind_of_target(m, target);
  if (k < 0) return false;
  *live = !ch_patch_one_thread();
  if (*live && !ch_patch_live_ok(ret - 4)) return false;
  *mp = m;
  *kp = k;
  return true;
}

static bool patch_site(uintptr_t ret, unsigned group, const struct ch_module *m, int k, bool live) {
  uint8_t *r = region_for(m);
  if (!r) return false;
  uintptr_t stub = (uintptr_t)r + stub_offset(k, group);
  intptr_t disp = (intptr_t)(stub - ret);
  if (disp != (int32_t)disp) return false;
  return ch_patch_write_disp(ret - 4, (int32_t)disp, live);
}

/* Patch the call at ret to its stub of the kind that base (K_MALLOC,
 * K_SITE_MALLOC, K_ACT_MALLOC, K_REST_MALLOC or K_NEXT_MALLOC) starts: 1
 * patched, 0 not patchable, -1 another thread is writing code. */
static int patch_call(uintptr_t ret, unsigned group, int base) {
  /* Registering the stubs' unwind table may allocate (libgcc): that goes
   * to the next allocator, as the runtime's own allocations do. */
  ch_in_runtime++;
  const struct ch_module *m = NULL;
  int k = -1, done = 0;
  bool live = true;
  if (stub_kind(ret, &m, &k, &live)) {
    if (!ch_patch_trylock()) done = -1;
    else {
      done = patch_site(ret, group, m, base + k, live);
      ch_patch_unlock();
    }
  }
  if (done >= 0) atomic_fetch_add(done ? &ch_direct_stats.patched : &ch_direct_stats.left, 1);
  ch_in_runtime--;
  return done;
}

/* A `walk` entry that is also a patched selector site (a program's own
 * malloc wrapper): its call reaches the selector's stub, so it is sent to
 * that stub's variant of the kind its own target is (patch.c), which
 * records the activation as the stub does and then enters the activations'
 * entry. 1 patched, 0 not, -1 another thread is writing code. */
static int patch_entry_selector(unsigned s, uintptr_t ret) {
  ch_in_runtime++;
  int done = 0;
  uintptr_t target = 0, v = 0;
  const struct ch_module *m = ch_module_for(ret);
  if (m && !m->system && !m->writable_code && ch_patch_entry_stub(s, 0, &target)) {
    int k = kind_of_target(m, target);
    if (k >= 0) v = ch_patch_entry_stub(s, k == K_NEW, &target);
  }
  bool live = !ch_patch_one_thread();
  intptr_t disp = (intptr_t)(v - ret);
  if (v && disp == (int32_t)disp && (!live || ch_patch_live_ok(ret - 4))) {
    if (!ch_patch_trylock()) done = -1;
    else {
      done = ch_patch_write_disp(ret - 4, (int32_t)disp, live);
      ch_patch_unlock();
    }
  }
  if (done >= 0) atomic_fetch_add(done ? &ch_direct_stats.patched : &ch_direct_stats.left, 1);
  ch_in_runtime--;
  return done;
}

/* Patch the site at ret (plan site s), once. */
static void offer(int s, uintptr_t ret, unsigned group, int base) {
  uint8_t expect = S_UNTRIED;
  /* A plain load first: a site left as it was is offered by every allocation
   * through it, and the exchange would bounce its line between threads. */
  if (atomic_load_explicit(&state[s], memory_order_relaxed) != S_UNTRIED ||
      !atomic_compare_exchange_strong(&state[s], &expect, S_BUSY))
    return;
  /* busy: a later allocation offers again */
  int done = base == K_ACT_MALLOC && ch_patch_on[s] ? patch_entry_selector((unsigned)s, ret)
                                                    : patch_call(ret, group, base);
  atomic_store(&state[s], done < 0 ? S_UNTRIED : done ? S_PATCHED : S_LEFT);
}

int ch_direct_patch_site(uintptr_t ret, int pool) {
  return pool >= 0 ? patch_call(ret, (unsigned)pool, K_SITE_MALLOC) : patch_call(ret, 0, K_NEXT_MALLOC);
}

/* The call at ret reaches one of its module's pool stubs (patch_call made
 * it so, and nothing else writes there): it now reaches the next
 * allocator's stub of the same entry point. Found from the displacement
 * the first patch wrote; the live-patching checks it passed then hold. */
int ch_direct_repatch_next(uintptr_t ret) {
  if (!ch_direct_enabled) return 0;
  ch_in_runtime++;
  const struct ch_module *m = ch_module_for(ret);
  int done = 0;
  if (m && ch_patch_trylock()) {
    uint8_t *r = region_of(m);
    int32_t disp;
    memcpy(&disp, (const void *)(ret - 4), 4);
    uintptr_t at = ret + (intptr_t)disp - (uintptr_t)r;
    if (r && at >= stub_offset(K_SITE_MALLOC, 0) && at < stub_offset(K_SITE_NEW + 1, 0)) {
      int k = at < stub_offset(K_SITE_NEW, 0) ? K_NEXT_MALLOC : K_NEXT_NEW;
      intptr_t d = (intptr_t)((uintptr_t)r + stub_offset(k, 0) - ret);
      done = d == (int32_t)d && ch_patch_write_disp(ret - 4, (int32_t)d, !ch_patch_one_thread());
    }
    ch_patch_unlock();
  } else if (m) {
    done = -1;
  }
  ch_in_runtime--;
  return done;
}

/* The plan's entry site at ret with this verdict, not a stop site, or -1. */
static int entry_site(uintptr_t ret, enum ch_entry_verdict verdict) {
  int s = ch_plan_site_at(ret);
  if (s < 0 || ch_plan->sites[s].entry != verdict || ch_plan->sites[s].stop) return -1;
  return s;
}

void ch_direct_offer(uintptr_t ret, unsigned group) {
  int s = entry_site(ret, CH_ENTRY_GROUP);
  /* Exactly the sites whose quick test answers alone, with this group. */
  if (s >= 0 && group < CH_MAX_GROUPS && ch_plan->sites[s].quick == (int)group) offer(s, ret, group, K_MALLOC);
}

void ch_direct_offer_walk(uintptr_t ret) {
  int s = entry_site(ret, CH_ENTRY_WALK);   /* whose allocations the activations decide */
  if (s >= 0) offer(s, ret, 0, K_ACT_MALLOC);
}

/* Cold sites this thread has offered and that stay as they are (not a
 * patchable call): a request through one would otherwise look the site up
 * in the plan every time (cppcheck in front of jemalloc: 14 such sites, 18
 * M instructions in 1.2 G). The test is select.h's. */
CH_TLS uintptr_t ch_direct_cold_left[CH_COLD_LEFT_MEMO];

void ch_direct_offer_cold_slow(uintptr_t ret) {
  uintptr_t *memo = ch_direct_cold_memo(ret);
  int s = entry_site(ret, CH_ENTRY_COLD);
  if (s < 0) return;
  offer(s, ret, rest_group < 0 ? 0 : (unsigned)rest_group, rest_group < 0 ? K_COLD_MALLOC : K_REST_MALLOC);
  if (atomic_load_explicit(&state[s], memory_order_relaxed) == S_LEFT) *memo = ret;
}

/* Once other threads may run a call, its displacement is written by one
 * atomic store of the aligned 8-byte word that holds it; a call whose
 * displacement crosses such a word (ch_patch_live_ok) can only be patched
 * while the process has one thread. A multi-threaded program that first
 * reached such a `group=G`, cold or `walk` entry site from a thread paid
 * the quick test on every allocation there, about 110 instructions more
 * than the stub (workloads/mt: one site of three, 8% of its time). So when
 * the program starts its first thread (threads.c), while it still has one,
 * every such site not patched yet is patched, whether or not it is ever
 * reached. Not at start-up: a program that never starts a thread needs
 * none of it, and decoding their functions cost povray's plan of 256 sites
 * 18 M instructions. The other sites still wait for their first
 * allocation. threads.c calls this once. */
void ch_direct_before_threads(void) {
  const struct ch_plan *pl = ch_plan;
  if (!ch_direct_enabled || ch_opt.mode != CH_MODE_PLAN || !pl || atomic_load(&ch_plan_disabled) ||
      !ch_patch_one_thread())
    return;
  /* Each offer takes only the sites of its own verdict, as an allocation's would. */
  /* Selectors patched and every stop site with them: activations decide (identify.c). */
  bool acts = atomic_load(&ch_patch_gen) != 0 && __atomic_load_n(&ch_patch_stops_whole, __ATOMIC_RELAXED);
  for (unsigned s = 0; s < pl->nsites && s < CH_MAX_SITES; s++) {
    const struct ch_plan_site *st = &pl->sites[s];
    if (!st->addr || ch_patch_live_ok(st->addr - 4)) continue;
    ch_direct_offer(st->addr, (unsigned)st->quick);
    ch_direct_offer_cold(st->addr);
    if (acts) ch_direct_offer_walk(st->addr);
  }
}

void ch_direct_init(const struct ch_direct_entries *e) {
  /* It patches with patch.c's means: only where patch.c is at work, or
   * for MO, whose sites need no plan. */
  if (!ch_patch_enabled() && !(ch_opt.mode == CH_MODE_MO && ch_opt.patch && ch_patch_code_init())) return;
  if (!ch_decode_ready() || !ch_patch_read_template(cohort_direct_template, cohort_direct_end, &group_t) || !group_t.imm_at ||
      group_t.size > STUB_SIZE ||
      !ch_patch_read_template(cohort_direct_act_template, cohort_direct_act_end, &act_t) || act_t.size > STUB_SIZE ||
      !ch_patch_read_template(cohort_direct_cold_template, cohort_direct_cold_end, &cold_t) || !cold_t.disp_at ||
      cold_t.size > STUB_SIZE)
    return;
  entries = *e;
  ch_direct_set_max(ch_max_size);
  if (ch_plan && ch_plan->rest >= 0 && ch_plan->rest < CH_MAX_GROUPS) rest_group = ch_plan->rest;
  ch_direct_enabled = true;
  look_up_bindings();
}
