/* prodcons: server-like allocation stress, in three shapes that hand blocks
 * from the thread that made them to another thread that frees them.
 *
 *   prodcons ring  THREADS BATCHES [DEPTH]
 *     Every thread makes batches of 64 blocks of mixed sizes (a request's
 *     buffers, records, strings), fills them, and hands each batch to the
 *     next thread round the ring, which checks and frees every block: nearly
 *     every free is of another thread's block. One thread hands to itself.
 *   prodcons split THREADS BATCHES [DEPTH]
 *     THREADS producers that only allocate, each feeding its own consumer
 *     that only frees (2 x THREADS threads).
 *   prodcons relay THREADS BATCHES [DEPTH]
 *     THREADS lineages of threads, each holding DEPTH x 32 slots of live
 *     blocks: a thread replaces random slots' blocks (free, then malloc) and,
 *     after its share, starts a successor that inherits the slots and exits,
 *     16 generations in all: the successor frees the blocks of a thread that
 *     has gone (Larson and Krishnan's server shape).
 *   prodcons larson THREADS BATCHES [DEPTH]
 *     relay as the larson benchmark runs it: the main thread fills every
 *     lineage's slots before the threads start and then only waits, so
 *     each lineage's first frees are of blocks an idle thread made, and
 *     sizes are uniform from 16 to 1,000 bytes (three in four above 256).
 *
 * Each thread (or lineage) makes BATCHES x 64 blocks; at most DEPTH (default
 * 256) batches wait in a queue, which keeps the live set bounded. Prints a
 * checksum that does not depend on where blocks live or on the threads'
 * interleaving; on standard error the throughput (mallocs and frees per
 * second), the peak live bytes, the peak resident size the run added, and the
 * fragmentation at peak (1 - live/resident), from its own count of live bytes
 * and /proc/self/statm sampled every 10 ms. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define MAXT 64

struct batch {
  unsigned n;
  uint64_t *blk[BATCH];
  uint32_t size[BATCH];
};

struct queue {
  pthread_mutex_t lock;
  pthread_cond_t nonfull;
  struct batch **ring;
  unsigned head, count;
};

struct worker {
  _Alignas(64) atomic_ulong allocated, freed;   /* bytes, written by this thread only */
  pthread_t tid;
  unsigned id;
  uint64_t rng, sum;
  /* relay: the lineage's slots, its generation, and whether it is done */
  uint64_t **slot;
  uint32_t *slot_size;
  unsigned generation;
  atomic_int finished;
};

#define GENERATIONS 16

static unsigned nthreads, nworkers, depth, nslots;
static unsigned long nbatches;
static struct queue queues[MAXT];
static struct worker workers[2 * MAXT];

static uint64_t next_rand(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13; x ^= x >> 7; x ^= x << 17;
  return *s = x;
}

static bool uniform_sizes;   /* larson: 16 to 1,000 bytes, uniform (the checks need two words) */

/* Mostly small, as a server's are: 16-64 bytes 70%, to 256 25%, to 1 KiB 5%. */
static uint32_t pick_size(uint64_t *s) {
  uint64_t r = next_rand(s);
  if (uniform_sizes) return 16 + (uint32_t)((r >> 8) % 985);
  unsigned k = (unsigned)(r % 100);
  if (k < 70) return 16 + (uint32_t)((r >> 8) % 49);
  if (k < 95) return 64 + (uint32_t)((r >> 8) % 193);
  return 256 + (uint32_t)((r >> 8) % 769);
}

static uint64_t tag(unsigned thread, unsigned long seq, unsigned i) {
  uint64_t x = ((uint64_t)thread << 48) ^ ((uint64_t)seq << 8) ^ i;
  x *= 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

/* Only the worker's own thread writes its counts; the sampler reads them. */
static void count(atomic_ulong *c, unsigned long bytes) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + bytes, memory_order_relaxed);
}

static uint64_t *make_block(struct worker *w, uint64_t t, uint32_t *size) {
  uint32_t sz = pick_size(&w->rng);
  uint64_t *p = malloc(sz);
  if (!p) { perror("prodcons: malloc"); exit(1); }
  p[0] = t;                           /* the block's first and last words */
  p[sz / 8 - 1] = t ^ sz;
  *size = sz;
  return p;
}

static void free_block(struct worker *w, uint64_t *p, uint32_t sz) {
  if ((p[sz / 8 - 1] ^ sz) != p[0]) { fprintf(stderr, "prodcons: block corrupted\n"); exit(3); }
  w->sum += p[0] ^ sz;
  free(p);
}

static struct batch *make_batch(struct worker *w, unsigned long seq) {
  struct batch *b = malloc(sizeof *b);
  if (!b) { perror("prodcons: malloc"); exit(1); }
  b->n = BATCH;
  unsigned long bytes = sizeof *b;
  for (unsigned i = 0; i < BATCH; i++) {
    b->blk[i] = make_block(w, tag(w->id, seq, i), &b->size[i]);
    bytes += b->size[i];
  }
  count(&w->allocated, bytes);
  return b;
}

static void consume(struct worker *w, struct batch *b) {
  unsigned long bytes = sizeof *b;
  for (unsigned i = 0; i < b->n; i++) {
    free_block(w, b->blk[i], b->size[i]);
    bytes += b->size[i];
  }
  free(b);
  count(&w->freed, bytes);
}

static struct batch *try_pop(struct queue *q) {
  struct batch *b = NULL;
  pthread_mutex_lock(&q->lock);
  if (q->count) {
    b = q->ring[q->head];
    q->head = (q->head + 1) % depth;
    q->count--;
    pthread_cond_signal(&q->nonfull);
  }
  pthread_mutex_unlock(&q->lock);
  return b;
}

static bool try_push(struct queue *q, struct batch *b, bool wait) {
  bool ok = false;
  pthread_mutex_lock(&q->lock);
  if (q->count == depth && wait) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += 1000000;
    if (t.tv_nsec >= 1000000000) { t.tv_sec++; t.tv_nsec -= 1000000000; }
    pthread_cond_timedwait(&q->nonfull, &q->lock, &t);
  }
  if (q->count < depth) {
    q->ring[(q->head + q->count) % depth] = b;
    q->count++;
    ok = true;
  }
  pthread_mutex_unlock(&q->lock);
  return ok;
}

static unsigned waiting(struct queue *q) {
  pthread_mutex_lock(&q->lock);
  unsigned n = q->count;
  pthread_mutex_unlock(&q->lock);
  return n;
}

/* Hand b to q, waiting while it is full. */
static void push(struct queue *q, struct batch *b) {
  while (!try_push(q, b, true)) {}
}

/* Free batches arriving in `in` until nbatches have, `got` of them already. */
static void consume_rest(struct worker *w, struct queue *in, unsigned long got) {
  while (got < nbatches) {
    struct batch *b = try_pop(in);
    if (b) { consume(w, b); got++; }
    else usleep(50);
  }
}

/* ring: make a batch, hand it on, and free what arrived while more than half
 * the thread's queue is waiting: every queue stays about half full, which is
 * the live set. */
static void *ring(void *arg) {
  struct worker *w = arg;
  struct queue *in = &queues[w->id], *out = &queues[(w->id + 1) % nthreads];
  unsigned long made = 0, got = 0;
  while (made < nbatches) {
    struct batch *b = make_batch(w, made++), *mine;
    /* A full queue: do our own consuming while the next thread catches up. */
    while (!try_push(out, b, false)) {
      if ((mine = try_pop(in))) { consume(w, mine); got++; }
      else if (try_push(out, b, true)) break;
    }
    while (waiting(in) > depth / 2 && (mine = try_pop(in))) { consume(w, mine); got++; }
  }
  consume_rest(w, in, got);
  return NULL;
}

/* split: producers only allocate, consumers only free. */
static void *producer(void *arg) {
  struct worker *w = arg;
  for (unsigned long made = 0; made < nbatches; made++) push(&queues[w->id], make_batch(w, made));
  return NULL;
}
static void *consumer(void *arg) {
  struct worker *w = arg;
  consume_rest(w, &queues[w->id - nthreads], 0);
  return NULL;
}

/* Free slot i's block, if it holds one. */
static void release_slot(struct worker *w, unsigned i) {
  if (!w->slot[i]) return;
  free_block(w, w->slot[i], w->slot_size[i]);
  count(&w->freed, w->slot_size[i]);
  w->slot[i] = NULL;
}

/* relay: one generation of a lineage replaces its share of random slots'
 * blocks, then starts its successor (the last frees what is left). */
static void *relay(void *arg) {
  struct worker *w = arg;
  unsigned long share = nbatches * BATCH / GENERATIONS, base = (unsigned long)w->generation * share;
  for (unsigned long k = 0; k < share; k++) {
    unsigned i = (unsigned)(next_rand(&w->rng) % nslots);
    release_slot(w, i);
    w->slot[i] = make_block(w, tag(w->id, base + k, 0), &w->slot_size[i]);
    count(&w->allocated, w->slot_size[i]);
  }
  if (++w->generation < GENERATIONS) {
    pthread_t next;
    if (pthread_create(&next, NULL, relay, w)) { perror("prodcons: pthread_create"); exit(1); }
    pthread_detach(next);
    return NULL;
  }
  for (unsigned i = 0; i < nslots; i++) release_slot(w, i);
  atomic_store(&w->finished, 1);
  return NULL;
}

static long resident_bytes(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  long size, rss;
  if (sscanf(buf, "%ld %ld", &size, &rss) != 2) return 0;
  return rss * sysconf(_SC_PAGESIZE);
}

static long live_bytes(void) {
  long live = 0;
  for (unsigned i = 0; i < nworkers; i++)
    live += (long)atomic_load_explicit(&workers[i].allocated, memory_order_relaxed) -
            (long)atomic_load_explicit(&workers[i].freed, memory_order_relaxed);
  return live;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void usage(void) {
  fprintf(stderr, "usage: prodcons ring|split|relay|larson THREADS BATCHES [DEPTH]\n");
  exit(2);
}

int main(int argc, char **argv) {
  if (argc < 4) usage();
  const char *mode = argv[1];
  nthreads = (unsigned)atoi(argv[2]);
  nbatches = strtoul(argv[3], NULL, 10);
  depth = argc > 4 ? (unsigned)atoi(argv[4]) : 256;
  if (nthreads < 1 || nthreads > MAXT || depth < 1 || nbatches < 1) usage();
  bool is_larson = !strcmp(mode, "larson");
  bool is_relay = is_larson || !strcmp(mode, "relay"), is_split = !strcmp(mode, "split");
  if (!is_relay && !is_split && strcmp(mode, "ring")) usage();
  uniform_sizes = is_larson;
  nworkers = is_split ? 2 * nthreads : nthreads;
  nslots = depth * BATCH / 2;
  for (unsigned i = 0; i < nworkers; i++) {
    workers[i].id = i;
    workers[i].rng = 0x2545f4914f6cdd1dull * (i + 1);
  }
  for (unsigned i = 0; i < nthreads; i++) {
    pthread_mutex_init(&queues[i].lock, NULL);
    pthread_cond_init(&queues[i].nonfull, NULL);
    queues[i].ring = calloc(depth, sizeof *queues[i].ring);
    if (is_relay) {
      workers[i].slot = calloc(nslots, sizeof *workers[i].slot);
      workers[i].slot_size = calloc(nslots, sizeof *workers[i].slot_size);
    }
  }
  long base = resident_bytes(), peak_rss = 0, peak_live = 0;
  /* larson: the main thread makes every slot's first block (counted as the
   * lineage's, whose thread does not run yet). */
  for (unsigned i = 0; is_larson && i < nthreads; i++)
    for (unsigned k = 0; k < nslots; k++) {
      workers[i].slot[k] = make_block(&workers[i], tag(i, ~0ul, k), &workers[i].slot_size[k]);
      count(&workers[i].allocated, workers[i].slot_size[k]);
    }
  double t0 = now();
  for (unsigned i = 0; i < nworkers; i++) {
    void *(*fn)(void *) = is_relay ? relay : !is_split ? ring : i < nthreads ? producer : consumer;
    if (pthread_create(&workers[i].tid, NULL, fn, &workers[i])) { perror("prodcons: pthread_create"); return 1; }
    if (is_relay) pthread_detach(workers[i].tid);
  }
  /* Sample until every worker (or lineage) is done. */
  for (unsigned done = 0; done < nworkers;) {
    long rss = resident_bytes() - base, live = live_bytes();
    if (rss > peak_rss) peak_rss = rss;
    if (live > peak_live) peak_live = live;
    bool over = is_relay ? atomic_load(&workers[done].finished) != 0
                         : pthread_tryjoin_np(workers[done].tid, NULL) == 0;
    if (over) { done++; continue; }
    usleep(10000);
  }
  double secs = now() - t0;
  uint64_t sum = 0;
  for (unsigned i = 0; i < nworkers; i++) sum += workers[i].sum;
  double ops = 2.0 * nthreads * nbatches * (BATCH + !is_relay);
  printf("checksum %llu\n", (unsigned long long)sum);
  fprintf(stderr, "prodcons: %s, %u threads, %.2f M ops/s, peak live %.1f MiB, peak resident added %.1f MiB, "
                  "fragmentation %.1f%%\n",
          mode, nthreads, ops / secs / 1e6, peak_live / 1048576.0, peak_rss / 1048576.0,
          peak_rss > 0 && peak_rss > peak_live ? 100.0 * (1.0 - (double)peak_live / peak_rss) : 0.0);
  return 0;
}
