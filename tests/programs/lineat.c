/* lineat: where in their cache lines a program's blocks start. make_node
 * allocates 56-byte nodes (64-byte blocks), make_record 120-byte records
 * (128-byte blocks) and make_note 24-byte notes, interleaved; then half of
 * the nodes and records are freed and made again. Prints, per kind, how
 * many blocks start at each offset 0, 16, 32, 48 within a line (a plan's
 * at=K; docs/runtime.md, "A big build walked out of allocation order"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3000
#define NOINLINE __attribute__((noinline, noclone))

/* Each writes its block's first byte, so that its malloc is a call of its
 * own (not a tail call): a plan can name make_node's. */
NOINLINE static void *made(char *p) { if (p) *p = 0; return p; }
NOINLINE static void *make_node(void) { return made(malloc(56)); }
NOINLINE static void *make_record(void) { return made(malloc(120)); }
NOINLINE static void *make_note(void) { return made(malloc(24)); }

static void *node[N], *record[N], *note[N];

static void count(const char *kind, void **p) {
  unsigned at[4] = {0};
  for (int i = 0; i < N; i++) at[((uintptr_t)p[i] & 63) / 16]++;
  printf("%s %u %u %u %u\n", kind, at[0], at[1], at[2], at[3]);
}

int main(void) {
  for (int i = 0; i < N; i++) {
    node[i] = make_node();
    if (i % 3 == 0) record[i / 3] = make_record();
    note[i] = make_note();
    if (!node[i] || !note[i]) return 1;
    memset(node[i], 1, 56);
  }
  for (int i = N / 3; i < N; i++) record[i] = make_record();
  for (int i = 0; i < N; i += 2) {
    free(node[i]);
    free(record[i]);
  }
  for (int i = 0; i < N; i += 2) {
    node[i] = make_node();
    record[i] = make_record();
  }
  count("node", node);
  count("record", record);
  count("note", note);
  return 0;
}
