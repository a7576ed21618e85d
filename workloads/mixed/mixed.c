/* mixed: a store of sample buffers. Each segment is a small node on its
 * channel's list, pointing at a buffer of 2-4 KiB of samples; a binary
 * search tree of small index nodes finds segments by tag. Nodes and buffers
 * are made together, one after the other, so in a general-purpose
 * allocator every small node sits between two large buffers. Each round
 * walks every channel's list twice (once reading only the nodes' summaries,
 * once reading a window of every buffer), answers random tag lookups through
 * the tree (updating a sample and its summary), and replaces a few buffers
 * with new ones of another size.
 * Usage: mixed SEGMENTS ROUNDS SEED. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))
#define CHANNELS 64
#define WINDOW 16

struct segment {
  struct segment *next;
  int *samples;
  long count, tag, sum, lo, hi;
};
struct index { struct index *left, *right; long tag; struct segment *seg; };

static unsigned long rng;
static unsigned long next_rand(unsigned long n) {
  rng = rng * 6364136223846793005ul + 1442695040888963407ul;
  return (rng >> 33) % n;
}

static struct segment *heads[CHANNELS], **tails[CHANNELS];
static struct index *root;

static void summarise(struct segment *s) {
  long sum = 0, lo = s->samples[0], hi = s->samples[0];
  for (long i = 0; i < s->count; i++) {
    sum += s->samples[i];
    if (s->samples[i] < lo) lo = s->samples[i];
    if (s->samples[i] > hi) hi = s->samples[i];
  }
  s->sum = sum; s->lo = lo; s->hi = hi;
}

NOINLINE static int *new_buffer(long count, long phase) {
  int *b = malloc(sizeof *b * (size_t)count);
  if (!b) exit(1);
  long v = phase;
  for (long i = 0; i < count; i++) { v = (v * 1103515245 + 12345) & 0x7fffffff; b[i] = (int)(v % 20001) - 10000; }
  return b;
}
static long buffer_length(void) { return 512 + 16 * (long)next_rand(32); }   /* 2048-4032 bytes */

NOINLINE static struct segment *new_segment(long tag) {
  struct segment *s = malloc(sizeof *s);
  if (!s) exit(1);
  s->next = NULL; s->tag = tag;
  s->count = buffer_length();
  s->samples = new_buffer(s->count, tag);
  summarise(s);
  return s;
}

NOINLINE static struct index *new_index(long tag, struct segment *seg) {
  struct index *x = malloc(sizeof *x);
  if (!x) exit(1);
  x->left = x->right = NULL; x->tag = tag; x->seg = seg;
  return x;
}
static void insert(struct index *x) {
  struct index **p = &root;
  while (*p) p = x->tag < (*p)->tag ? &(*p)->left : &(*p)->right;
  *p = x;
}
static struct segment *lookup(long tag) {
  for (struct index *x = root; x; x = tag < x->tag ? x->left : x->right)
    if (x->tag == tag) return x->seg;
  return NULL;
}
static void release_index(struct index *x) {
  if (!x) return;
  release_index(x->left); release_index(x->right);
  free(x);
}

static long tag_of(long i) { return (long)(((unsigned long)i * 2654435761ul) % 1000000007ul); }

int main(int argc, char **argv) {
  long segments = argc > 1 ? atol(argv[1]) : 2000;
  long rounds = argc > 2 ? atol(argv[2]) : 20;
  rng = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
  if (segments < 1) { fputs("mixed: SEGMENTS must be positive\n", stderr); return 2; }
  for (int c = 0; c < CHANNELS; c++) tails[c] = &heads[c];
  for (long i = 0; i < segments; i++) {
    struct segment *s = new_segment(tag_of(i));
    int c = (int)next_rand(CHANNELS);
    *tails[c] = s; tails[c] = &s->next;
    insert(new_index(s->tag, s));
  }
  unsigned long check = 0;
  for (long r = 0; r < rounds; r++) {
    long total = 0, spread = 0;
    for (int c = 0; c < CHANNELS; c++)
      for (const struct segment *s = heads[c]; s; s = s->next) { total += s->sum; spread += s->hi - s->lo; }
    check = check * 31 + (unsigned long)total + (unsigned long)spread * 3;
    long window = 0;
    for (int c = 0; c < CHANNELS; c++)
      for (const struct segment *s = heads[c]; s; s = s->next) {
        long at = (r * 37 + s->tag) % (s->count - WINDOW);
        for (int k = 0; k < WINDOW; k++) window += s->samples[at + k] * (k + 1);
      }
    check = check * 31 + (unsigned long)window;
    for (long q = 0; q < segments / 4; q++) {
      struct segment *s = lookup(tag_of((long)next_rand((unsigned long)segments)));
      if (!s) { fputs("mixed: lost a segment\n", stderr); return 1; }
      long at = (long)next_rand((unsigned long)s->count);
      int v = (int)next_rand(20001) - 10000;
      s->sum += v - s->samples[at];
      s->samples[at] = v;
      if (v < s->lo) s->lo = v;
      if (v > s->hi) s->hi = v;
    }
    for (long k = 0; k < segments / 100 + 1; k++) {
      struct segment *s = lookup(tag_of((long)next_rand((unsigned long)segments)));
      free(s->samples);
      s->count = buffer_length();
      s->samples = new_buffer(s->count, s->tag + r);
      summarise(s);
    }
  }
  long kept = 0;
  for (int c = 0; c < CHANNELS; c++)
    for (struct segment *s = heads[c], *next; s; s = next) {
      next = s->next;
      check += (unsigned long)(s->sum % 1000);
      kept++;
      free(s->samples);
      free(s);
    }
  release_index(root);
  printf("mixed %ld %ld segments %ld checksum %lu\n", segments, rounds, kept, check);
  return 0;
}
