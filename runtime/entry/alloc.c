/* Cohort runtime: the interposed C allocation API.
 *
 * Each entry point asks identify.c for a group only when something could be
 * grouped; a grouped request that the group allocator cannot serve, and every
 * other request, goes to the next allocator unchanged. Pointers are routed on
 * free by the O(1) chunk table: ours to heap.c, the bootstrap arena's dropped,
 * everything else to the next allocator. */
#define _GNU_SOURCE
#include "entry.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static inline bool ready(void) {
  return CH_LIKELY(atomic_load_explicit(&ch_next_state, memory_order_acquire) == 2);
}

/* Before the next allocator is known (dlsym is allocating), serve from the
 * bootstrap arena. */
static CH_NOINLINE bool resolve_or_boot(void) {
  ch_next_resolve();
  return ready();
}

static inline bool is_pow2(size_t a) { return a && !(a & (a - 1)); }

/* ------------------------------------------------------------ internal */

/* Every exported entry point passes its own frame address (taking it makes
 * the compiler keep a frame in that function), so the stack walk starts at
 * the program's frame instead of unwinding the runtime's own. */
#define ENTRY_FRAME CH_ENTRY_FRAME

/* Group request, or NULL for "not grouped". */
static inline void *try_group(size_t size, size_t align, bool zero, const uintptr_t *fp) {
  if (!ch_identify_active) return NULL;
  int g = ch_identify(size, fp);
  if (CH_UNLIKELY(g == CH_IDENTIFY_SAMPLE)) g = ch_dpa_unsample();   /* only malloc samples */
  if (g < 0) return NULL;
  return ch_group_alloc((unsigned)g, size, align, zero);
}

CH_HIDDEN void *ch_malloc_impl(size_t size, const uintptr_t *fp) {
  if (CH_UNLIKELY(!ready()) && !resolve_or_boot()) return ch_bootstrap_alloc(size, 16);
  void *p = try_group(size, CH_MIN_ALIGN, false, fp);
  if (p) return p;
  return ch_next.malloc(size);
}

/* malloc and operator new once identification is active (which implies the
 * next allocator is resolved): the straight path. The common cases of
 * identification and of the group allocator are inline, the rest out of
 * line, so this path needs no frame of its own. */
CH_HIDDEN __attribute__((flatten)) void *ch_malloc_grouping(size_t size, const uintptr_t *fp) {
  int g = ch_identify(size, fp);
  if (CH_LIKELY(g >= 0)) return ch_group_malloc_or_next((unsigned)g, size);
  if (CH_UNLIKELY(g == CH_IDENTIFY_SAMPLE)) return ch_dpa_malloc_sampled(size);
  return ch_next.malloc(size);
}

/* align is a power of two. */
CH_HIDDEN void *ch_aligned_impl(size_t align, size_t size, const uintptr_t *fp) {
  if (CH_UNLIKELY(!ready()) && !resolve_or_boot()) return ch_bootstrap_alloc(size, align);
  if (align <= 4096) {
    void *p = try_group(size, align, false, fp);
    if (p) return p;
  }
  if (align <= 16 && align <= size) return ch_next.malloc(size);
  void *p = NULL;
  int rc = ch_next.posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size);
  if (rc) { errno = rc; return NULL; }
  return p;
}

/* free, and through ch_free_impl every operator delete. A pointer that is
 * not ours (NULL and the bootstrap arena's included) goes to the next
 * allocator's free, which next.c has made safe for those. */
/* The range test first, so that a pointer of the next allocator's goes on
 * in five instructions (MO's and DPA's pass-through, and every program's
 * objects from before the preload). Flattened: the owner's free is inlined
 * here, so that an ordinary free is one function and no jump. */
static inline __attribute__((always_inline)) void free_ours(void *p, uintptr_t off) {
  const struct ch_region_entry *e = ch_region_entry_at(off);
  struct ch_chunk *c = __atomic_load_n(&e->chunk, __ATOMIC_RELAXED);
  if (CH_UNLIKELY(c == NULL)) { ch_dead_chunk_free(p); return; }   /* a dead chunk's: misuse */
  ch_group_free_in(c, p, e->starts_bias);
}
CH_EXPORT __attribute__((flatten)) void free(void *p) {
  uintptr_t off = (uintptr_t)p - ch_region.base;
  if (off >= ch_region.size) { ch_next.free(p); return; }
  free_ours(p, off);
}

/* C++'s sized delete: a block that is not ours goes to the next
 * allocator's own sized delete where it has one (next.c), which need not
 * look its size up (cppcheck in front of jemalloc: about 5 instructions
 * of its 3.2 M frees). */
CH_HIDDEN __attribute__((flatten)) void ch_free_sized(void *p, size_t n) {
  uintptr_t off = (uintptr_t)p - ch_region.base;
  if (off >= ch_region.size) {
    void (*sized)(void *, size_t) = ch_next.delete_sized;
    if (sized) sized(p, n);
    else ch_next.free(p);
    return;
  }
  free_ours(p, off);
}

/* --------------------------------------------------------------- C API */

/* Under a plan, with the frame the stack walk starts from; a tail call from
 * malloc, so the return address above that frame is malloc's caller's. */
static CH_NOINLINE void *malloc_framed(size_t size) {
  return CH_KEEP_FRAME(ch_malloc_grouping(size, ENTRY_FRAME()));
}

/* DPA's chain lane, with the frame its identification starts from. */
static CH_NOINLINE void *dpa_framed(size_t size) {
  return CH_KEEP_FRAME(ch_dpa_malloc(size, ENTRY_FRAME()));
}

/* A group's allocation whose path count made the counts due: flushed first. */
static CH_NOINLINE void *group_malloc_flush(size_t size, unsigned group) {
  ch_count_flush_due();
  return ch_group_malloc_or_next(group, size);
}

/* DPA's lanes for a hinted request, each reached by a tail call, so that
 * the stack is the one malloc was called with. A trusted hint's pool needs
 * no frame and no stack: the pool's line of the thread's heap, and the
 * controls' allocation, a tail call too, so that the lane saves no
 * register. Else a prefix hint's memo reads the stack (dpa_memo), and
 * anything else goes on to the framed path. */
static void *lane_malloc(struct ch_group_heap *gh, size_t size);
/* Both lanes' end: pool g, found by how, counted and allocated. */
static inline __attribute__((always_inline)) void *dpa_lane_malloc(size_t size, int g, enum ch_path how) {
  struct ch_heap *h = ch_thread.my_heap;
  if (CH_UNLIKELY(!ch_count_path(how)) || CH_UNLIKELY(!h)) return group_malloc_flush(size, (unsigned)g);
  return lane_malloc(&h->g[g], size);
}
static CH_NOINLINE __attribute__((flatten)) void *dpa_memo(size_t size) {
  enum ch_path how;
  int g = ch_dpa_memo(size, CH_LANE_FRAME(), &how);
  if (CH_UNLIKELY(g < 0)) return dpa_framed(size);
  return dpa_lane_malloc(size, g, how);
}
static CH_NOINLINE __attribute__((flatten)) void *dpa_hinted(size_t size) {
  enum ch_path how;
  int g = ch_dpa_trusted(size, &how);
  if (CH_UNLIKELY(g < 0)) return dpa_memo(size);
  return dpa_lane_malloc(size, g, how);
}

/* Everything but the fast lane: pass-through (or not yet resolved) first,
 * since a child process that a planned program starts runs all of its
 * allocations this way; the all and random controls need no frame either
 * (controls are never on without identification); under a plan, a tail
 * call to malloc_framed. */
static CH_NOINLINE void *malloc_rest(size_t size) {
  if (!ch_identify_active) return ch_next.malloc(size);
  if (ch_identify_controls) {
    int g = ch_identify_control(size);
    if (CH_LIKELY(g >= 0)) {
      ch_lane_arm();
      return ch_group_malloc_or_next((unsigned)g, size);
    }
  }
  /* A cold entry this thread has met that stays as it is: decided here,
   * without the frame and the quick test (a tail call from malloc, so the
   * return address is malloc's caller's). */
  if (CH_LIKELY(ch_cold_entry((uintptr_t)__builtin_return_address(0), size))) return ch_cold_entry_malloc(size);
  return malloc_framed(size);
}

/* DPA's lanes' group allocation, flattened: one function, no call inside
 * (7 instructions a malloc+free pair in allocbench churn under all, against
 * a call). malloc's own lane inlines the same allocation, as operator new's
 * does (new.c). */
static CH_NOINLINE __attribute__((flatten)) void *lane_malloc(struct ch_group_heap *gh, size_t size) {
  return ch_group_malloc_lane(gh, size);
}

/* MO's site lane, out of line: its call of the monitor would otherwise make
 * malloc save a register on every path, the fast lane's included (3
 * instructions an allocation). */
static CH_NOINLINE void *site_malloc(size_t size, uintptr_t ret) { return ch_site_malloc(size, ret); }

/* Never inlined: ch_direct_malloc's tail call must stay a jump. The lane's
 * group allocation is inline (its fast path returns, everything else is a
 * tail call); every other way out is a tail call, so that malloc saves no
 * register: the lanes that take none (DPA's, MO's) do not pay for the group
 * allocation's. */
CH_EXPORT CH_NOINLINE void *malloc(size_t size) {
  struct ch_group_heap *gh = ch_lane(size);
  if (CH_LIKELY(gh != NULL)) return ch_group_malloc_lane(gh, size);
  /* DPA before MO: MO's decided sites reach their pool or the next
   * allocator from their own stubs, and DPA's every allocation comes here. */
  if (ch_chain_lane) return ch_dpa_hint | ch_dpa_prefix_hint ? dpa_hinted(size) : dpa_framed(size);
  if (ch_site_lane) return site_malloc(size, (uintptr_t)__builtin_return_address(0));   /* MO: no frame needed */
  return malloc_rest(size);
}

/* free's own code, whatever another module may define under its name; the
 * operators delete jump here. (free itself holds the code: one jump less.) */
extern __typeof__(free) ch_free_impl __attribute__((alias("free"), visibility("hidden")));

/* The plain operators delete and delete[] are free itself, not a jump to it:
 * a C++ program frees through them, and every block the runtime does not own
 * pays the range test and nothing more (cppcheck in front of jemalloc under
 * a plan: 94.7 M deletes, one instruction each). Their other forms are in
 * new.c. */
extern __typeof__(free) _ZdlPv __attribute__((alias("free"), visibility("default")));
extern __typeof__(free) _ZdaPv __attribute__((alias("free"), visibility("default")));

/* malloc's own code, whatever another module may define under its name. */
extern __typeof__(malloc) ch_malloc_entry __attribute__((alias("malloc"), visibility("hidden")));

/* A call site patched to reach its group directly (direct.c): the group
 * allocator's fast path, and nothing to decide. The stub jumped here, so the
 * stack is that of a plain call to malloc, and anything unusual (a large
 * request, a plan disabled since) is malloc's own business: a tail call. */
CH_HIDDEN __attribute__((flatten)) void *ch_direct_malloc(size_t size, unsigned group) {
  if (CH_LIKELY(size <= ch_direct_max)) {
    if (CH_UNLIKELY(!ch_count_direct())) return group_malloc_flush(size, group);
    void *p = ch_group_take(group, size);   /* then nothing but tail calls: no register saved */
    if (CH_LIKELY(p != NULL)) return p;
    return ch_group_rest_or_next(group, size);
  }
  return ch_malloc_entry(size);
}

/* A remembered cold entry's request (ch_cold_entry), counted with the
 * stubs' requests: the rest group of its size, or -1 for the next
 * allocator. */
CH_HIDDEN int ch_cold_entry_count(size_t size) {
  ch_thread.cold_stubbed++;
  return ch_rest_for(size);
}

/* Where a cold stub sends such a request: the rest group g of its size, or
 * the next allocator (g < 0). */
CH_HIDDEN void *ch_cold_entry_place(size_t size, int g) {
  return g >= 0 ? ch_group_malloc_or_next((unsigned)g, size) : ch_next.malloc(size);
}

CH_HIDDEN void *ch_cold_entry_malloc(size_t size) { return ch_cold_entry_place(size, ch_cold_entry_count(size)); }

/* A cold entry site patched to reach the plan's rest group directly
 * (direct.c): requests up to the rest group's limit go there, to their size
 * class's group; the rest take the ordinary path, which sends them to the
 * next allocator. */
CH_HIDDEN __attribute__((flatten)) void *ch_direct_rest_malloc(size_t size, unsigned group) {
  (void)group;
  int g = ch_rest_for(size);   /* -1 past the rest group's limit, or where the plan has none */
  return CH_LIKELY(g >= 0) ? ch_direct_malloc(size, (unsigned)g) : ch_malloc_entry(size);
}

/* An MO call site decided for good, patched (direct.c): a request of the
 * pool's one size goes to the pool, any other to the next allocator, as
 * the monitor's decision sends them, without its lookup. Each path is a
 * tail call, so the one a site's request takes saves no registers for the
 * other. */
static CH_NOINLINE void *direct_next_flush(size_t size) {
  ch_count_flush_due();
  return ch_next.malloc(size);
}
CH_HIDDEN void *ch_direct_next_malloc(size_t size) {
  if (CH_UNLIKELY(!ch_count_site(false))) return direct_next_flush(size);
  return ch_next.malloc(size);
}

/* A cold entry site patched to reach the next allocator directly, under a
 * plan with no rest group (direct.c): every request there is the next
 * allocator's, whatever its size, as the quick test's cold verdict says.
 * Its stub has counted it; this is where the stub goes while the next
 * allocator's own entry points are not known, and operator new's where
 * the next allocator has none of its own. */
CH_HIDDEN void *ch_direct_cold_malloc(size_t size) { return ch_next.malloc(size); }
static CH_NOINLINE __attribute__((flatten)) void *direct_site_pooled(size_t size, unsigned group) {
  if (CH_UNLIKELY(!ch_count_site(true))) ch_count_flush_due();
  return ch_group_malloc_or_next(group, size);
}
/* A sampled request (mo.c counts it towards the site's demotion). */
static CH_NOINLINE void *direct_site_sampled(size_t size, unsigned group, uintptr_t ret) {
  bool hit = size == ch_online_pool_size[group];
  ch_mo_sample(ret, hit);
  return hit ? direct_site_pooled(size, group) : ch_direct_next_malloc(size);
}
/* ret: the site's return address (the stub jumped here, or operator new's
 * stub's target passes its own). */
static inline __attribute__((always_inline)) void *site_malloc_from(size_t size, unsigned group, uintptr_t ret) {
  if (CH_UNLIKELY(--ch_mo_sample_in < 0)) return direct_site_sampled(size, group, ret);
  if (size == ch_online_pool_size[group]) return direct_site_pooled(size, group);
  return ch_direct_next_malloc(size);
}
CH_HIDDEN void *ch_direct_site_malloc_from(size_t size, unsigned group, uintptr_t ret) {
  return site_malloc_from(size, group, ret);
}
CH_HIDDEN void *ch_direct_site_malloc(size_t size, unsigned group) {
  return site_malloc_from(size, group, (uintptr_t)__builtin_return_address(0));
}

/* A `walk` entry site patched to skip the quick test (direct.c): the
 * activations of patched selector sites decide, the slot of the call's
 * return address tells them which are live. Whatever they cannot decide
 * (a thread not yet armed, a seed due) takes the ordinary path. */
static CH_NOINLINE __attribute__((flatten)) void *act_malloc_decide(size_t size, uintptr_t slot) {
  if (CH_LIKELY(size <= ch_direct_max)) {
    int g = ch_identify_act_direct(size, slot);
    if (CH_LIKELY(g >= 0)) return ch_group_malloc_or_next((unsigned)g, size);
    if (g == -1) return ch_next.malloc(size);
  }
  return ch_malloc_entry(size);
}
/* Nothing live decided it (ch_act_fast): the rest group of its size, if
 * the plan has one and the size fits, else the next allocator. */
static CH_NOINLINE void *act_malloc_rest(size_t size) {
  if (CH_UNLIKELY(!ch_count_patched())) ch_count_flush_due();
  int rest = ch_rest_for(size);   /* -1: no rest group (a malloc(0) too) */
  if (rest < 0) return ch_next.malloc(size);
  unsigned g = (unsigned)rest;
  void *p = ch_group_take(g, size);
  if (CH_LIKELY(p != NULL)) return p;
  return ch_group_rest_or_next(g, size);
}
/* The common cases first: a live stop record decides, and the group's fast
 * path serves; or nothing is live, and the rest group does. Every other
 * way out is a tail call. */
static inline __attribute__((always_inline)) void *act_group_malloc(size_t size, unsigned g) {
  if (CH_UNLIKELY(!ch_count_patched())) return group_malloc_flush(size, g);
  void *p = ch_group_take(g, size);
  if (CH_LIKELY(p != NULL)) return p;
  return ch_group_rest_or_next(g, size);
}
CH_HIDDEN __attribute__((flatten)) void *ch_direct_act_malloc(size_t size, uintptr_t slot) {
  int g = ch_act_fast(slot);
  if (CH_LIKELY(g >= 0)) {
    /* A request of an exact bin's size under the limit passes one test
     * where it took two (ch_direct_small); the path that follows knows it. */
    if (CH_LIKELY(size - 1 < ch_direct_small)) {
      if (size - 1 >= CH_EXACT_MAX) __builtin_unreachable();
      return act_group_malloc(size, (unsigned)g);
    }
    if (CH_LIKELY(size <= ch_direct_max)) return act_group_malloc(size, (unsigned)g);
  }
  if (g == CH_ACT_REST && CH_LIKELY(size <= ch_direct_max)) return act_malloc_rest(size);
  return act_malloc_decide(size, slot);
}

CH_EXPORT void *calloc(size_t n, size_t m) {
  size_t total;
  if (__builtin_mul_overflow(n, m, &total)) { errno = ENOMEM; return NULL; }
  if (CH_UNLIKELY(!ready()) && !resolve_or_boot()) return ch_bootstrap_alloc(total, 16);
  void *p = try_group(total, CH_MIN_ALIGN, true, ENTRY_FRAME());
  if (p) return p;
  if (ch_next.calloc) return ch_next.calloc(n, m);
  p = ch_next.malloc(total);
  if (p) memset(p, 0, total);
  return p;
}

/* MO's pools hold one size each: a pooled object being resized moves out
 * to the next allocator, and its block goes back to the pool. */
static CH_NOINLINE void *realloc_out(void *p, size_t size) {
  void *q = ch_next.malloc(size);
  if (!q) return NULL;
  size_t old = ch_group_usable(p);
  memcpy(q, p, old < size ? old : size);
  ch_group_free(p);
  return q;
}

static void *realloc_impl(void *p, size_t size, const uintptr_t *fp) {
  if (!p) return ch_malloc_impl(size, fp);
  if (ch_owns(p)) {
    if (size == 0) { ch_group_free(p); return NULL; }   /* as glibc does */
    if (CH_UNLIKELY(ch_site_lane)) return realloc_out(p, size);
    return ch_group_realloc(p, size);
  }
  if (CH_UNLIKELY(ch_in_region(p))) ch_invalid_pointer("realloc(): invalid pointer", p);
  if (CH_UNLIKELY(ch_bootstrap_owns(p))) {
    void *q = ch_malloc_impl(size, fp);
    if (q) {
      size_t old = ch_bootstrap_size(p);
      memcpy(q, p, old < size ? old : size);
    }
    return q;
  }
  if (CH_UNLIKELY(!ready()) && !resolve_or_boot()) return NULL;
  return ch_next.realloc(p, size);
}

CH_EXPORT void *realloc(void *p, size_t size) { return CH_KEEP_FRAME(realloc_impl(p, size, ENTRY_FRAME())); }

CH_EXPORT void *reallocarray(void *p, size_t n, size_t m) {
  size_t total;
  if (__builtin_mul_overflow(n, m, &total)) { errno = ENOMEM; return NULL; }
  return CH_KEEP_FRAME(realloc_impl(p, total, ENTRY_FRAME()));
}

CH_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (!is_pow2(align) || align % sizeof(void *)) return EINVAL;
  int saved = errno;
  void *p = CH_KEEP_FRAME(ch_aligned_impl(align, size, ENTRY_FRAME()));
  if (!p) { int e = errno; errno = saved; return e ? e : ENOMEM; }
  *out = p;
  return 0;
}

/* glibc's memalign rounds a non-power-of-two alignment up; so do we. */
static void *memalign_impl(size_t align, size_t size, const uintptr_t *fp) {
  if (align < CH_MIN_ALIGN) align = CH_MIN_ALIGN;
  if (!is_pow2(align)) {
    if (align > ((size_t)1 << 62)) { errno = EINVAL; return NULL; }
    align = (size_t)1 << (64 - __builtin_clzll(align));
  }
  return ch_aligned_impl(align, size, fp);
}

CH_EXPORT void *memalign(size_t align, size_t size) {
  return CH_KEEP_FRAME(memalign_impl(align, size, ENTRY_FRAME()));
}

CH_EXPORT void *aligned_alloc(size_t align, size_t size) {
  return CH_KEEP_FRAME(memalign_impl(align, size, ENTRY_FRAME()));
}

CH_EXPORT void *valloc(size_t size) {
  return CH_KEEP_FRAME(ch_aligned_impl(ch_page_size(), size, ENTRY_FRAME()));
}

CH_EXPORT void *pvalloc(size_t size) {
  size_t ps = ch_page_size(), rounded;
  if (__builtin_add_overflow(size, ps - 1, &rounded)) { errno = ENOMEM; return NULL; }
  rounded &= ~(ps - 1);
  return CH_KEEP_FRAME(ch_aligned_impl(ps, rounded ? rounded : ps, ENTRY_FRAME()));
}

CH_EXPORT size_t malloc_usable_size(void *p) {
  if (!p) return 0;
  if (ch_owns(p)) return ch_group_usable(p);
  if (CH_UNLIKELY(ch_in_region(p))) ch_invalid_pointer("malloc_usable_size(): invalid pointer", p);
  if (ch_bootstrap_owns(p)) return ch_bootstrap_size(p);
  if (CH_UNLIKELY(!ready()) && !resolve_or_boot()) return 0;
  return ch_next.malloc_usable_size ? ch_next.malloc_usable_size(p) : 0;
}

/* glibc's call to give free memory back: this thread's recent frees go to
 * their chunks' bins first (heap.c, "Recent frees"), where a chunk they
 * leave empty starts over or retires; then the next allocator's own. */
CH_EXPORT int malloc_trim(size_t pad) {
  if (CH_UNLIKELY(!ready()) && !resolve_or_boot()) return 0;
  ch_heap_flush_recent();
  return ch_next.malloc_trim ? ch_next.malloc_trim(pad) : 0;
}

/* ----------------------------------------------------------- public API */

CH_EXPORT int cohort_group_of(const void *p) {
  return p && ch_owns(p) ? (int)ch_chunk_of(p)->group : -1;
}

CH_EXPORT int cohort_write_stats(const char *path) {
  ch_flush_thread();
  return ch_stats_write(path ? path : ch_opt.stats_path);
}

CH_EXPORT const char *cohort_version(void) { return "cohort-runtime " COHORT_VERSION; }
