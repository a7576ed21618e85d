/* The module tests/programs/dlpatch.c loads with dlopen: its selector site
 * (make_in_libK's calls of inner) is patched when the runtime finds it. */
#include <stdint.h>
#include <stdlib.h>

static volatile uintptr_t sink;

__attribute__((noinline, noipa)) void *inner(size_t n) {
  void *p = malloc(n);
  sink += (uintptr_t)p;
  return p;
}

/* Four callers whose calls of inner sit 0 to 3 bytes further into their
 * functions: whatever the alignment of the code, one call's displacement
 * is 4-byte aligned and can be patched in a running module. */
#define MAKE(K, NOPS)                                              \
  __attribute__((noinline, noipa)) void *make_in_lib##K(void) {  \
    __asm__ volatile(NOPS);                                        \
    void *p = inner(24);                                           \
    sink += (uintptr_t)p;                                          \
    return p;                                                      \
  }
MAKE(0, "")
MAKE(1, "nop")
MAKE(2, "nop; nop")
MAKE(3, "nop; nop; nop")
