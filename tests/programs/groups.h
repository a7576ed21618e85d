/* The constructors of tests/programs/groups.c (in groups_ctors.c, linked into
 * the program or into a shared library). */
#ifndef GROUPS_H
#define GROUPS_H
#define NOINLINE __attribute__((noinline, noclone))
void *make_a(int i);
void *make_b(int i);
void *make_c(int i);
void *via_wrap_1(int i);
void *via_wrap_2(int i);
unsigned long checksum_a(const void *p);
unsigned long checksum_b(const void *p);
unsigned long checksum_c(const void *p);
#endif
