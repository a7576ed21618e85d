/* More hot allocation sites than Cohort has groups, for MO (tests/integration/test_mo.py).
 * Sites 0..69 each allocate 32-byte objects; sites 70..79 allocate 48, 64,
 * ... bytes, one size each. Under MO the first 64 valid sites get pools of
 * their own; later 32-byte sites share a 32-byte pool, and later sites of a
 * size no pool has get none. Every object is written, read back and freed.
 * Usage: manysites PER-SITE; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSITES 80
#define SIZE_OF(k) ((k) < 70 ? 32 : 32 + 16 * ((k) - 69))

/* One function per site, each storing into the object so the call is no
 * tail call and its return address lies in that function. */
#define SITE(k)                                                               \
  static __attribute__((noipa)) char *site_##k(size_t n) {                    \
    char *p = malloc(n);                                                      \
    if (p) memset(p, (k) + 1, n);   /* not 0: malloc+memset(0) is calloc */  \
    return p;                                                                 \
  }
#define TEN(d) SITE(d##0) SITE(d##1) SITE(d##2) SITE(d##3) SITE(d##4) \
               SITE(d##5) SITE(d##6) SITE(d##7) SITE(d##8) SITE(d##9)
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7) SITE(8) SITE(9)
TEN(1) TEN(2) TEN(3) TEN(4) TEN(5) TEN(6) TEN(7)

#define REF(k) site_##k,
#define REFS(d) REF(d##0) REF(d##1) REF(d##2) REF(d##3) REF(d##4) \
                REF(d##5) REF(d##6) REF(d##7) REF(d##8) REF(d##9)
static char *(*const sites[NSITES])(size_t) = {
  REF(0) REF(1) REF(2) REF(3) REF(4) REF(5) REF(6) REF(7) REF(8) REF(9)
  REFS(1) REFS(2) REFS(3) REFS(4) REFS(5) REFS(6) REFS(7)
};

int main(int argc, char **argv) {
  long per = argc > 1 ? atol(argv[1]) : 100;
  char **objs = malloc(sizeof(char *) * (size_t)(per * NSITES));
  if (!objs) return 1;
  for (long i = 0; i < per; i++)
    for (int k = 0; k < NSITES; k++) {
      objs[i * NSITES + k] = sites[k](SIZE_OF(k));
      if (!objs[i * NSITES + k]) return 1;
    }
  unsigned long sum = 0;
  for (long i = 0; i < per * NSITES; i++) {
    int k = (int)(i % NSITES);
    for (int b = 0; b < SIZE_OF(k); b++) sum = sum * 31 + (unsigned char)objs[i][b];
    free(objs[i]);
  }
  free(objs);
  printf("manysites %ld checksum %lu\n", per, sum);
  return 0;
}
