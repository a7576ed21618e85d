/* mt: several threads each build and walk their own pair of lists (one
 * hot, one cold), and all of them read a shared table built by the main
 * thread. Checks correctness and overhead under threads.
 * Usage: mt THREADS N PASSES. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

struct hot { struct hot *next; long v; long w; };
struct cold { struct cold *next; char text[40]; };
struct shared { long v; long pad[3]; };

static struct shared **table;
static long table_n;
static int passes;

NOINLINE static struct hot *new_hot(long i) {
  struct hot *h = malloc(sizeof *h);
  if (!h) exit(1);
  h->v = i; h->w = i & 7; h->next = NULL;
  return h;
}
NOINLINE static struct cold *new_cold(long i) {
  struct cold *c = malloc(sizeof *c);
  if (!c) exit(1);
  snprintf(c->text, sizeof c->text, "cold %ld", i);
  c->next = NULL;
  return c;
}
NOINLINE static struct shared *new_shared(long i) {
  struct shared *s = malloc(sizeof *s);
  if (!s) exit(1);
  s->v = i * 3;
  return s;
}

struct job { long n, seed, sum; };

static void *worker(void *arg) {
  struct job *j = arg;
  struct hot *hh = NULL, **ht = &hh;
  struct cold *ch = NULL, **ct = &ch;
  for (long i = 0; i < j->n; i++) {
    *ht = new_hot(i + j->seed); ht = &(*ht)->next;
    *ct = new_cold(i); ct = &(*ct)->next;
  }
  long s = 0;
  for (int p = 0; p < passes; p++)
    for (struct hot *h = hh; h; h = h->next) s += h->v * h->w + table[(h->v + p) % table_n]->v;
  for (struct cold *c = ch; c; c = c->next) s += c->text[5];
  while (hh) { struct hot *x = hh->next; free(hh); hh = x; }
  while (ch) { struct cold *x = ch->next; free(ch); ch = x; }
  j->sum = s;
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  long n = argc > 2 ? atol(argv[2]) : 100000;
  passes = argc > 3 ? atoi(argv[3]) : 10;
  if (threads < 1 || threads > 64) return 2;
  table_n = 4096;
  table = malloc(sizeof *table * (size_t)table_n);
  for (long i = 0; i < table_n; i++) table[i] = new_shared(i);
  pthread_t t[64];
  struct job jobs[64];
  for (int i = 0; i < threads; i++) {
    jobs[i] = (struct job){n, i * 1000003L, 0};
    pthread_create(&t[i], NULL, worker, &jobs[i]);
  }
  long sum = 0;
  for (int i = 0; i < threads; i++) { pthread_join(t[i], NULL); sum += jobs[i].sum; }
  for (long i = 0; i < table_n; i++) free(table[i]);
  free(table);
  printf("mt %d %ld %d checksum %ld\n", threads, n, passes, sum);
  return 0;
}
