/* Cohort runtime: every C++ operator new and delete, written in C under their
 * mangled names. libcohort must define them itself: Debian's jemalloc and
 * tcmalloc define them too, so with either preloaded behind us C++
 * allocations would otherwise never reach Cohort. C++ semantics are kept:
 * the new_handler loop, std::bad_alloc, and null from the nothrow forms.
 * Compiled with -fexceptions so the exception can pass through our frames. */
#define _GNU_SOURCE
#include "entry.h"

#include <dlfcn.h>

void *ch_malloc_impl(size_t size, const uintptr_t *fp);
void *ch_malloc_grouping(size_t size, const uintptr_t *fp);
void *ch_aligned_impl(size_t align, size_t size, const uintptr_t *fp);
#define ENTRY_FRAME CH_ENTRY_FRAME   /* see alloc.c */
void ch_free_impl(void *p);
void ch_free_sized(void *p, size_t n);

typedef void (*new_handler_t)(void);

/* libstdc++ is looked up only when an allocation has failed. */
static new_handler_t current_handler(void) {
  new_handler_t (*get)(void) = (new_handler_t (*)(void))dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
  return get ? get() : NULL;
}

static _Noreturn void throw_bad_alloc(void) {
  void (*thr)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv");
  if (thr) thr();
  ch_fatal("operator new: out of memory and no C++ runtime to throw std::bad_alloc");
}

static void *new_loop(size_t size, size_t align, bool nothrow, const uintptr_t *fp) {
  for (;;) {
    void *p = align ? ch_aligned_impl(align, size, fp) : ch_malloc_impl(size, fp);
    if (CH_LIKELY(p != NULL)) return p;
    new_handler_t h = current_handler();
    if (!h) {
      if (nothrow) return NULL;
      throw_bad_alloc();
    }
    h();
  }
}

static size_t fix_align(size_t a) { return a < CH_MIN_ALIGN ? CH_MIN_ALIGN : a; }

/* The plain forms try once on the straight path (as malloc does), and enter
 * the new_handler loop only if that fails. */
static inline void *new_once(size_t n, const uintptr_t *fp) {
  return ch_identify_active ? ch_malloc_grouping(n, fp) : ch_next.malloc(n);
}

/* With the frame the stack walk starts from; a tail call from operator new,
 * so the return address above that frame is the caller's. */
static CH_NOINLINE void *new_framed(size_t n) {
  void *p = CH_KEEP_FRAME(new_once(n, ENTRY_FRAME()));
  return CH_LIKELY(p != NULL) ? p : CH_KEEP_FRAME(new_loop(n, 0, false, ENTRY_FRAME()));
}
/* The all and random controls need no frame (see malloc). */
static inline void *new_control(size_t n) {
  int g = ch_identify_control(n);
  if (g < 0) return NULL;
  ch_lane_arm();
  return ch_group_malloc_or_next((unsigned)g, n);
}

/* Pass-through (no plan, or one disabled): as malloc does, without the
 * frame (34 instructions a request); a failure takes the framed path to
 * the new_handler. */
static CH_NOINLINE void *new_passed(size_t n) {
  void *p = ch_next.malloc(n);
  return CH_LIKELY(p != NULL) ? p : new_framed(n);
}
/* The all and random controls; what they do not take, or cannot serve,
 * takes the framed path. */
static CH_NOINLINE void *new_controlled(size_t n) {
  void *p = new_control(n);
  return CH_LIKELY(p != NULL) ? p : new_framed(n);
}
/* A remembered cold entry's request (see malloc_rest) that its size class's
 * rest group takes, or the next allocator's malloc where it has no
 * operator new of its own (glibc); a failure takes the framed path, which
 * tries again and then calls the new_handler. */
static CH_NOINLINE void *new_cold_rest(size_t n, int g) {
  void *p = ch_cold_entry_place(n, g);
  return CH_LIKELY(p != NULL) ? p : new_framed(n);
}
/* Everything but the fast lane (see malloc). A remembered cold entry with
 * no rest group for it goes to the next allocator's own operator new, as a
 * cold stub sends it, by a tail call: the door then costs the memo's probe
 * and the count, and no frame (cppcheck in front of jemalloc under a plan:
 * 4.3 M such requests, 45 instructions each before). */
static CH_NOINLINE void *new_rest(size_t n) {
  if (CH_UNLIKELY(!ch_identify_active)) return new_passed(n);
  if (ch_identify_controls) return new_controlled(n);
  if (CH_LIKELY(ch_cold_entry((uintptr_t)__builtin_return_address(0), n))) {
    int g = ch_cold_entry_count(n);
    void *(*own)(size_t) = ch_next.new_;
    if (g < 0 && own) return own(n);
    return new_cold_rest(n, g);
  }
  return new_framed(n);
}

/* The lane's fast path found nothing: its general path, and if that fails
 * too, the ordinary path and the new_handler. */
static CH_NOINLINE void *new_lane_rest(struct ch_group_heap *gh, size_t n) {
  void *p = ch_group_lane_general(gh, n);
  return CH_LIKELY(p != NULL) ? p : new_rest(n);
}
/* DPA, the thread's hint set: a trusted hint's pool, else a prefix
 * memo's (see malloc). */
static CH_NOINLINE __attribute__((flatten)) void *new_hinted(size_t n) {
  enum ch_path how;
  int g = ch_dpa_trusted(n, &how);
  if (g < 0) g = ch_dpa_memo(n, CH_LANE_FRAME(), &how);
  if (CH_LIKELY(g >= 0)) {
    if (CH_UNLIKELY(!ch_count_path(how))) ch_count_flush_due();
    void *p = ch_group_malloc_or_next((unsigned)g, n);
    if (CH_LIKELY(p != NULL)) return p;
  }
  return new_rest(n);   /* the framed path; after a failure, the new_handler */
}
/* MO: the call site is the return address. */
static CH_NOINLINE void *new_site(size_t n, uintptr_t ret) {
  void *p = ch_site_malloc(n, ret);
  return CH_LIKELY(p != NULL) ? p : new_rest(n);   /* the ordinary path tries again, then the new_handler */
}
/* operator new / new[]; never inlined: ch_direct_new's tail call must stay a
 * jump. The fast lane first, as in malloc, and nothing but tail calls
 * after it, so that it saves no register. */
static inline void *new_lane(size_t n, uintptr_t ret) {
  struct ch_group_heap *gh = ch_lane(n);
  if (CH_LIKELY(gh != NULL)) {
    void *p = ch_group_take_lane(gh, n);
    if (CH_LIKELY(p != NULL)) return p;
    return new_lane_rest(gh, n);
  }
  if (ch_chain_lane && (ch_dpa_hint | ch_dpa_prefix_hint)) return new_hinted(n);   /* DPA before MO, as in malloc */
  if (ch_site_lane) return new_site(n, ret);
  return new_rest(n);
}
CH_EXPORT CH_NOINLINE __attribute__((flatten)) void *_Znwm(size_t n) {
  return new_lane(n, (uintptr_t)__builtin_return_address(0));
}
CH_EXPORT CH_NOINLINE __attribute__((flatten)) void *_Znam(size_t n) {
  return new_lane(n, (uintptr_t)__builtin_return_address(0));
}
/* Their own code, whatever another module may define under their names. */
extern __typeof__(_Znwm) ch_new_entry __attribute__((alias("_Znwm"), visibility("hidden")));
extern __typeof__(_Znam) ch_new_array_entry __attribute__((alias("_Znam"), visibility("hidden")));

/* A call of operator new or new[] patched to reach its group directly
 * (direct.c; see ch_direct_malloc). A failure goes to operator new itself,
 * for the new_handler loop and std::bad_alloc. */
static CH_NOINLINE void *direct_new_slow(size_t n, unsigned group) {
  ch_count_flush_due();
  void *p = ch_group_malloc_or_next(group, n);
  return p ? p : ch_new_entry(n);
}
/* The fast path found nothing: the rest of the group allocator, then
 * operator new itself. */
static CH_NOINLINE void *direct_new_rest(size_t n, unsigned group) {
  void *p = ch_group_rest_or_next(group, n);
  return p ? p : ch_new_entry(n);
}
/* Nothing but tail calls after the fast path, so that it saves no register. */
CH_HIDDEN __attribute__((flatten)) void *ch_direct_new(size_t n, unsigned group) {
  if (CH_LIKELY(n <= ch_direct_max)) {
    if (CH_UNLIKELY(!ch_count_direct())) return direct_new_slow(n, group);
    void *p = ch_group_take(group, n);
    if (CH_LIKELY(p != NULL)) return p;
    return direct_new_rest(n, group);
  }
  return ch_new_entry(n);
}

/* The same for a cold site and the plan's rest group (ch_direct_rest_malloc). */
CH_HIDDEN __attribute__((flatten)) void *ch_direct_rest_new(size_t n, unsigned group) {
  (void)group;
  int g = ch_rest_for(n);   /* -1 past the rest group's limit, or where the plan has none */
  return CH_LIKELY(g >= 0) ? ch_direct_new(n, (unsigned)g) : ch_new_entry(n);
}

/* The same for a `walk` site decided from activations (ch_direct_act_malloc). */
static CH_NOINLINE __attribute__((flatten)) void *act_new_decide(size_t n, uintptr_t slot) {
  if (CH_LIKELY(n <= ch_direct_max)) {
    int g = ch_identify_act_direct(n, slot);
    void *p = g >= 0 ? ch_group_malloc_or_next((unsigned)g, n) : g == -1 ? ch_next.malloc(n) : NULL;
    if (CH_LIKELY(p != NULL)) return p;
  }
  return ch_new_entry(n);
}
/* Nothing live: the rest group of its size, else the next allocator, else
 * operator new itself (which throws). */
static CH_NOINLINE void *act_new_rest(size_t n) {
  if (CH_UNLIKELY(!ch_count_patched())) ch_count_flush_due();
  int rest = ch_rest_for(n);   /* -1: no rest group (a new of 0 bytes too) */
  void *p = rest >= 0 ? ch_group_malloc_or_next((unsigned)rest, n) : ch_next.malloc(n);
  return p ? p : ch_new_entry(n);
}
/* Its common cases first, as ch_direct_act_malloc's. */
static inline __attribute__((always_inline)) void *act_group_new(size_t n, unsigned g) {
  if (CH_UNLIKELY(!ch_count_patched())) return direct_new_slow(n, g);
  void *p = ch_group_take(g, n);
  if (CH_LIKELY(p != NULL)) return p;
  return direct_new_rest(n, g);
}
CH_HIDDEN __attribute__((flatten)) void *ch_direct_act_new(size_t n, uintptr_t slot) {
  int g = ch_act_fast(slot);
  if (CH_LIKELY(g >= 0)) {
    if (CH_LIKELY(n - 1 < ch_direct_small)) {   /* both limits in one test */
      if (n - 1 >= CH_EXACT_MAX) __builtin_unreachable();
      return act_group_new(n, (unsigned)g);
    }
    if (CH_LIKELY(n <= ch_direct_max)) return act_group_new(n, (unsigned)g);
  }
  if (g == CH_ACT_REST && CH_LIKELY(n <= ch_direct_max)) return act_new_rest(n);
  return act_new_decide(n, slot);
}

/* The same for an MO call site decided for good (ch_direct_site_malloc,
 * ch_direct_next_malloc). */
void *ch_direct_site_malloc_from(size_t size, unsigned group, uintptr_t ret);
void *ch_direct_next_malloc(size_t size);
CH_HIDDEN __attribute__((flatten)) void *ch_direct_site_new(size_t n, unsigned group) {
  void *p = ch_direct_site_malloc_from(n, group, (uintptr_t)__builtin_return_address(0));
  return CH_LIKELY(p != NULL) ? p : ch_new_entry(n);
}
CH_HIDDEN __attribute__((flatten)) void *ch_direct_next_new(size_t n) {
  void *p = ch_direct_next_malloc(n);
  return CH_LIKELY(p != NULL) ? p : ch_new_entry(n);
}
/* A cold entry site's (ch_direct_cold_malloc); a failure takes operator
 * new's own path, which calls the new-handler or throws. */
void *ch_direct_cold_malloc(size_t size);
CH_HIDDEN __attribute__((flatten)) void *ch_direct_cold_new(size_t n) {
  void *p = ch_direct_cold_malloc(n);
  return CH_LIKELY(p != NULL) ? p : ch_new_entry(n);
}

CH_EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return CH_KEEP_FRAME(new_loop(n, 0, true, ENTRY_FRAME())); }
CH_EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return CH_KEEP_FRAME(new_loop(n, 0, true, ENTRY_FRAME())); }
CH_EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return CH_KEEP_FRAME(new_loop(n, fix_align(a), false, ENTRY_FRAME())); }
CH_EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return CH_KEEP_FRAME(new_loop(n, fix_align(a), false, ENTRY_FRAME())); }
CH_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) {
  (void)nt; return CH_KEEP_FRAME(new_loop(n, fix_align(a), true, ENTRY_FRAME()));
}
CH_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) {
  (void)nt; return CH_KEEP_FRAME(new_loop(n, fix_align(a), true, ENTRY_FRAME()));
}

/* operator delete / delete[]: every form frees as free does; the sized ones
 * hand the size on where the block is the next allocator's. The plain
 * forms are free itself (alloc.c). */
CH_EXPORT void _ZdlPvm(void *p, size_t n) { ch_free_sized(p, n); }
CH_EXPORT void _ZdaPvm(void *p, size_t n) { ch_free_sized(p, n); }   /* the next allocator's delete[] is its delete */
CH_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; ch_free_impl(p); }
CH_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; ch_free_impl(p); }
CH_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; ch_free_impl(p); }
CH_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; ch_free_impl(p); }
CH_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; ch_free_impl(p); }
CH_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; ch_free_impl(p); }
CH_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) {
  (void)a; (void)nt; ch_free_impl(p);
}
CH_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) {
  (void)a; (void)nt; ch_free_impl(p);
}
