/* Loads for injected prefetches (runtime/policy/mo/prefetch.c, tests/integration/test_prefetch.py):
 * list walks written in assembly, so that the bytes around each load are
 * known. walk_load may move; branchy_load has a branch landing inside the
 * bytes that would move, table_load a jump through a register in its
 * function, call_load a call among those bytes. Each walk sums the list;
 * the program prints the sums, which injection must leave as they are, and
 * on stderr whether walk_load is patched and the unwinder knows the code it
 * now jumps to.
 *
 *   prefetchable NODES ROUNDS */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node { struct node *next; long val; char pad[48]; };

long walk_sum(struct node *n);
long branchy_sum(struct node *n);
long table_sum(struct node *n);
long call_sum(struct node *n);
extern const char walk_load[];

__asm__(
  ".text\n"
  ".globl walk_sum, walk_load, branchy_sum, branchy_load, table_sum, table_load, call_sum, call_load\n"
  ".p2align 4\n"
  "walk_sum:\n"
  "  .cfi_startproc\n"
  "  xorl %eax, %eax\n"
  "  testq %rdi, %rdi\n"
  "  je 2f\n"
  "walk_load:\n"
  "  addq 8(%rdi), %rax\n"        /* 4 bytes, then 3: both move */
  "  movq (%rdi), %rdi\n"
  "  testq %rdi, %rdi\n"
  "  jne walk_load\n"
  "2: ret\n"
  "  .cfi_endproc\n"
  ".p2align 4\n"
  "branchy_sum:\n"
  "  .cfi_startproc\n"
  "  xorl %eax, %eax\n"
  "  testq %rdi, %rdi\n"
  "  je 2f\n"
  "  jmp 3f\n"                    /* lands inside the bytes that would move */
  "branchy_load:\n"
  "  addq 8(%rdi), %rax\n"
  "3: movq (%rdi), %rdi\n"
  "  testq %rdi, %rdi\n"
  "  jne branchy_load\n"
  "2: ret\n"
  "  .cfi_endproc\n"
  ".p2align 4\n"
  "table_sum:\n"
  "  .cfi_startproc\n"
  "  leaq 1f(%rip), %rcx\n"
  "  jmp *%rcx\n"                 /* targets unknown to a reader of the code */
  "1: xorl %eax, %eax\n"
  "  testq %rdi, %rdi\n"
  "  je 2f\n"
  "table_load:\n"
  "  addq 8(%rdi), %rax\n"
  "  movq (%rdi), %rdi\n"
  "  testq %rdi, %rdi\n"
  "  jne table_load\n"
  "2: ret\n"
  "  .cfi_endproc\n"
  ".p2align 4\n"
  "call_sum:\n"
  "  .cfi_startproc\n"
  "  pushq %rbx\n"
  "  .cfi_def_cfa_offset 16\n"
  "  .cfi_offset %rbx, -16\n"
  "  xorl %ebx, %ebx\n"
  "  testq %rdi, %rdi\n"
  "  je 2f\n"
  "call_load:\n"
  "  movq (%rdi), %rdi\n"         /* 3 bytes, then a call: cannot move */
  "  call call_noop\n"
  "  addq $1, %rbx\n"
  "  testq %rdi, %rdi\n"
  "  jne call_load\n"
  "2: movq %rbx, %rax\n"
  "  popq %rbx\n"
  "  .cfi_def_cfa_offset 8\n"
  "  ret\n"
  "  .cfi_endproc\n"
  ".p2align 4\n"
  "call_noop:\n"
  "  .cfi_startproc\n"
  "  ret\n"
  "  .cfi_endproc\n");

/* libgcc's lookup of the unwind entry covering pc. */
struct dwarf_eh_bases { void *tbase, *dbase, *func; };
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: prefetchable NODES ROUNDS\n"); return 2; }
  long n = atol(argv[1]), rounds = atol(argv[2]);
  struct node *head = NULL;
  for (long i = 0; i < n; i++) {
    struct node *x = malloc(sizeof *x);
    x->next = head;
    x->val = i;
    head = x;
  }
  long s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  for (long r = 0; r < rounds; r++) {
    s1 += walk_sum(head);
    s2 += branchy_sum(head);
    s3 += table_sum(head);
    s4 += call_sum(head);
  }
  printf("sums %ld %ld %ld %ld\n", s1, s2, s3, s4);
  /* A patched load starts with a jump (e9 rel32) to its stub. */
  const unsigned char *at = (const unsigned char *)walk_load;
  if (at[0] == 0xe9) {
    int32_t d;
    memcpy(&d, at + 1, 4);
    struct dwarf_eh_bases b;
    const char *stub = (const char *)at + 5 + d;
    fprintf(stderr, "walk_load patched; stub unwind entry %s\n",
            _Unwind_Find_FDE((void *)(stub + 1), &b) ? "found" : "missing");
  } else {
    fprintf(stderr, "walk_load not patched\n");
  }
  return 0;
}
