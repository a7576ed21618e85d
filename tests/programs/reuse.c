/* Freed memory is reused before fresh memory is taken (test_reuse.py).
 *
 *   reuse replace SLOTS ROUNDS
 *     SLOTS blocks of random sizes, 70% of 16-64 bytes, 25% to 256, 5% to
 *     1 KiB; then SLOTS x ROUNDS times a random slot's block is freed and
 *     replaced by one of a new random size.
 *   reuse phases N
 *     N blocks of 1000 bytes, nine in ten freed, then 30 N blocks of 32
 *     bytes, which fit in the holes only if larger free blocks are split;
 *     three times over.
 *   reuse merge N
 *     32 N blocks of 48 bytes, all but every 32nd freed, then N blocks of
 *     1000 bytes, which fit in the holes only if adjacent free blocks are
 *     merged.
 *   reuse fifo SLOTS ROUNDS
 *     a queue of SLOTS blocks of random sizes (as replace's): SLOTS x ROUNDS
 *     times the oldest is freed and a new one joins, as a server's requests
 *     come and go.
 *
 * Prints a checksum of the blocks' contents, which does not depend on where
 * they live, and the process's peak resident size (VmHWM) in KiB. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 88172645463325252ull;
static uint64_t next_rand(void) {
  state ^= state << 13; state ^= state >> 7; state ^= state << 17;
  return state;
}
static size_t pick_size(void) {
  uint64_t r = next_rand();
  unsigned k = (unsigned)(r % 100);
  if (k < 70) return 16 + (size_t)((r >> 8) % 49);
  if (k < 95) return 64 + (size_t)((r >> 8) % 193);
  return 256 + (size_t)((r >> 8) % 769);
}
static uint64_t sum;
static void *fill(size_t n, unsigned char v) {
  unsigned char *p = malloc(n);
  if (!p) { perror("reuse: malloc"); exit(1); }
  memset(p, v, n);
  return p;
}
static void drop(unsigned char *p, size_t n) {
  sum = sum * 31 + p[0] + p[n - 1] + n;
  free(p);
}

/* replace (a random slot each time) and fifo (the oldest). */
static void churn(size_t slots, unsigned long rounds, int oldest_first) {
  unsigned char **slot = calloc(slots, sizeof *slot);
  size_t *size = calloc(slots, sizeof *size);
  if (!slot || !size) { perror("reuse: calloc"); exit(1); }
  for (size_t i = 0; i < slots; i++) slot[i] = fill(size[i] = pick_size(), (unsigned char)i);
  for (unsigned long k = 0; k < slots * rounds; k++) {
    size_t i = oldest_first ? (size_t)(k % slots) : (size_t)(next_rand() % slots);
    drop(slot[i], size[i]);
    slot[i] = fill(size[i] = pick_size(), (unsigned char)k);
  }
  for (size_t i = 0; i < slots; i++) drop(slot[i], size[i]);
  free(slot);
  free(size);
}

static void phases(size_t n) {
  unsigned char **large = calloc(n, sizeof *large), **small = calloc(30 * n, sizeof *small);
  if (!large || !small) { perror("reuse: calloc"); exit(1); }
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < n; i++) large[i] = fill(1000, (unsigned char)i);
    for (size_t i = 0; i < n; i++) if (i % 10) drop(large[i], 1000);
    for (size_t i = 0; i < 30 * n; i++) small[i] = fill(32, (unsigned char)i);
    for (size_t i = 0; i < 30 * n; i++) drop(small[i], 32);
    for (size_t i = 0; i < n; i += 10) drop(large[i], 1000);
  }
  free(large);
  free(small);
}

static void merge(size_t n) {
  unsigned char **small = calloc(32 * n, sizeof *small), **large = calloc(n, sizeof *large);
  if (!large || !small) { perror("reuse: calloc"); exit(1); }
  for (size_t i = 0; i < 32 * n; i++) small[i] = fill(48, (unsigned char)i);
  for (size_t i = 0; i < 32 * n; i++) if (i % 32) drop(small[i], 48);
  for (size_t i = 0; i < n; i++) large[i] = fill(1000, (unsigned char)i);
  for (size_t i = 0; i < n; i++) drop(large[i], 1000);
  for (size_t i = 0; i < 32 * n; i += 32) drop(small[i], 48);
  free(large);
  free(small);
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "replace")) churn(strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10), 0);
  else if (argc == 3 && !strcmp(argv[1], "phases")) phases(strtoul(argv[2], NULL, 10));
  else if (argc == 3 && !strcmp(argv[1], "merge")) merge(strtoul(argv[2], NULL, 10));
  else if (argc == 4 && !strcmp(argv[1], "fifo")) churn(strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10), 1);
  else { fprintf(stderr, "usage: reuse replace SLOTS ROUNDS | reuse phases N | reuse merge N | reuse fifo SLOTS ROUNDS\n"); return 2; }
  printf("checksum %llu\n", (unsigned long long)sum);
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) fprintf(stderr, "peak resident %lu KiB\n", strtoul(line + 6, NULL, 10));
  if (f) fclose(f);
  return 0;
}
