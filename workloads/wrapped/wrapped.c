/* wrapped: every allocation goes through a two-level malloc wrapper
 * (safe_malloc -> xalloc -> malloc), as in many C programs and in DPA's
 * motivating cases. Three data structures are built interleaved: a chained
 * hash table (looked up again and again), a list of log records (appended,
 * rarely read) and a binary tree of names (built, walked once). Only the
 * wrappers' callers tell the structures apart.
 * Usage: wrapped N LOOKUPS; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

NOINLINE static void *xalloc(size_t n) {
  void *p = malloc(n);
  if (!p) { fputs("wrapped: out of memory\n", stderr); exit(1); }
  return p;
}
NOINLINE void *safe_malloc(size_t n) { return xalloc(n); }

struct entry { struct entry *next; unsigned long key, value; };
struct record { struct record *next; char text[40]; };
struct tnode { struct tnode *left, *right; unsigned long key; char name[24]; };

#define BUCKETS (1u << 18)
static struct entry *table[BUCKETS];

static unsigned long mix(unsigned long x) { x ^= x >> 31; x *= 0x7fb5d329728ea185ul; return x ^ (x >> 27); }

NOINLINE static void insert_entry(unsigned long key) {
  struct entry *e = safe_malloc(sizeof *e);
  e->key = key; e->value = key * 3 + 1;
  unsigned b = (unsigned)(mix(key) & (BUCKETS - 1));
  e->next = table[b]; table[b] = e;
}
NOINLINE static struct record *new_record(unsigned long i, struct record *prev) {
  struct record *r = safe_malloc(sizeof *r);
  snprintf(r->text, sizeof r->text, "event %lu", i);
  r->next = prev;
  return r;
}
NOINLINE static struct tnode *tree_insert(struct tnode *t, unsigned long key) {
  if (!t) {
    t = safe_malloc(sizeof *t);
    t->left = t->right = NULL; t->key = key;
    snprintf(t->name, sizeof t->name, "n%lu", key % 100000);
    return t;
  }
  if (key < t->key) t->left = tree_insert(t->left, key); else t->right = tree_insert(t->right, key);
  return t;
}
static unsigned long tree_sum(const struct tnode *t) {
  return t ? t->key + (unsigned char)t->name[1] + tree_sum(t->left) + tree_sum(t->right) : 0;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000, lookups = argc > 2 ? atol(argv[2]) : 1000000;
  struct record *log = NULL;
  struct tnode *tree = NULL;
  for (long i = 0; i < n; i++) {
    insert_entry((unsigned long)i * 7);
    log = new_record((unsigned long)i, log);
    if (i % 4 == 0) tree = tree_insert(tree, mix((unsigned long)i));
  }
  unsigned long sum = 0, rng = 12345;
  for (long q = 0; q < lookups; q++) {
    rng = rng * 6364136223846793005ul + 1442695040888963407ul;
    unsigned long key = ((rng >> 33) % (unsigned long)n) * 7;
    for (struct entry *e = table[mix(key) & (BUCKETS - 1)]; e; e = e->next)
      if (e->key == key) { sum += e->value; break; }
  }
  sum += tree_sum(tree);
  for (struct record *r = log; r; r = r->next) sum += (unsigned char)r->text[6];
  printf("wrapped %ld %ld checksum %lu\n", n, lookups, sum);
  return 0;
}
