/* Many threads allocating, and freeing each other's objects through a shared
 * queue (cross-thread frees), with realloc in the mix. Every object carries a
 * pattern checked before it is freed; at the end no byte is live. */
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <stdatomic.h>

#define THREADS 8
#define ROUNDS 60000
#define QCAP 4096

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static void *queue[QCAP];
static size_t qlen;
static atomic_int bad;

struct obj { uint32_t size, tag; unsigned char data[]; };

static struct obj *make(uint32_t size, uint32_t tag) {
  struct obj *o = malloc(sizeof *o + size);
  o->size = size;
  o->tag = tag;
  for (uint32_t i = 0; i < size; i++) o->data[i] = (unsigned char)(tag + i);
  return o;
}
static void check_obj(const struct obj *o) {
  for (uint32_t i = 0; i < o->size; i++)
    if (o->data[i] != (unsigned char)(o->tag + i)) { bad++; return; }
}

static void *worker(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  uint64_t x = 88172645463325252ull ^ id;
  struct obj *mine[64] = {0};
  for (int r = 0; r < ROUNDS; r++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    uint32_t size = (uint32_t)(x % 200);
    int slot = (int)((x >> 20) % 64);
    if (mine[slot]) {
      check_obj(mine[slot]);
      if ((x >> 30) % 4 == 0) {          /* grow or shrink it, keeping the prefix */
        uint32_t keep = mine[slot]->size;
        uint32_t ns = (uint32_t)((x >> 40) % 300);
        struct obj *o = realloc(mine[slot], sizeof *o + ns);
        if (ns < keep) keep = ns;
        for (uint32_t i = 0; i < keep; i++)
          if (o->data[i] != (unsigned char)(o->tag + i)) { bad++; break; }
        o->size = keep;
        mine[slot] = o;
        continue;
      }
      /* hand it to another thread through the queue */
      pthread_mutex_lock(&qlock);
      if (qlen < QCAP) { queue[qlen++] = mine[slot]; mine[slot] = NULL; }
      pthread_mutex_unlock(&qlock);
      if (mine[slot]) { free(mine[slot]); mine[slot] = NULL; }
    }
    mine[slot] = make(size, (uint32_t)(x >> 8));
    /* free something another thread made */
    void *other = NULL;
    pthread_mutex_lock(&qlock);
    if (qlen) other = queue[--qlen];
    pthread_mutex_unlock(&qlock);
    if (other) { check_obj(other); free(other); }
  }
  for (int i = 0; i < 64; i++) if (mine[i]) { check_obj(mine[i]); free(mine[i]); }
  return NULL;
}

/* A producer and a consumer in step: the producer makes HANDOFF blocks, the
 * consumer frees them all, HANDOFF_ROUNDS times. The consumer's frees reach
 * the producer in batches, which come back to the consumer once drained. */
#define HANDOFF 20000
#define HANDOFF_ROUNDS 40
static pthread_barrier_t step;
static uint64_t *handed[HANDOFF];
static void *producer(void *arg) {
  (void)arg;
  for (int r = 0; r < HANDOFF_ROUNDS; r++) {
    for (int i = 0; i < HANDOFF; i++) {
      handed[i] = malloc(16 + 16 * (size_t)(i % 5));
      handed[i][0] = (uint64_t)i * 31 + (uint64_t)r;
    }
    pthread_barrier_wait(&step);   /* the consumer's turn */
    pthread_barrier_wait(&step);   /* all freed */
  }
  return NULL;
}
static void *consumer(void *arg) {
  (void)arg;
  for (int r = 0; r < HANDOFF_ROUNDS; r++) {
    pthread_barrier_wait(&step);
    for (int i = 0; i < HANDOFF; i++) {
      if (handed[i][0] != (uint64_t)i * 31 + (uint64_t)r) bad++;
      free(handed[i]);
    }
    pthread_barrier_wait(&step);
  }
  return NULL;
}

/* A thread that only frees (it allocates nothing, so it has no heap of its
 * own) the blocks of a thread still running: its frees reach their owner in
 * batches too, and its exit sends the last one. LEFT is not a multiple of
 * 32, and the blocks of a last batch add up to more than the live bytes
 * main allows at the end: a batch left unsent would keep them live for good
 * (the owner, at its exit, drains what was sent). The owner is not the
 * thread that started the freeing one, whose heap would be left idle and
 * taken over ("A thread that starts another", runtime/memory/heap.c). */
#define LEFT 3000
static uint64_t *left[LEFT];
static pthread_t freer;
static pthread_barrier_t made;
static void *only_frees(void *arg) {
  (void)arg;
  pthread_barrier_wait(&made);
  for (int i = 0; i < LEFT; i++) {
    if (left[i][0] != (uint64_t)i) bad++;
    free(left[i]);
  }
  return NULL;
}
static void *makes_and_waits(void *arg) {
  (void)arg;
  for (int i = 0; i < LEFT; i++) {
    left[i] = malloc(256);
    left[i][0] = (uint64_t)i;
  }
  pthread_barrier_wait(&made);
  pthread_join(freer, NULL);
  return NULL;
}
static void handed_to_a_thread_that_only_frees(void) {
  pthread_t maker;
  pthread_barrier_init(&made, NULL, 2);
  pthread_create(&freer, NULL, only_frees, NULL);
  pthread_create(&maker, NULL, makes_and_waits, NULL);
  pthread_join(maker, NULL);
}

int main(int argc, char **argv) {
  int grouped = check_init();
  pthread_t t[THREADS];
  for (int round = 0; round < 3; round++) {   /* later rounds reuse exited threads' heaps */
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(i + round * 100));
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  }
  while (qlen) { check_obj(queue[qlen - 1]); free(queue[--qlen]); }
  long workers_batches = 0;
  if (grouped && argc > 1) {
    write_stats(argv[1]);
    workers_batches = stat_value(argv[1], "remote_batches");
  }
  pthread_barrier_init(&step, NULL, 2);
  pthread_create(&t[0], NULL, producer, NULL);
  pthread_create(&t[1], NULL, consumer, NULL);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  handed_to_a_thread_that_only_frees();
  CHECK(bad == 0);
  if (grouped && argc > 1) {
    write_stats(argv[1]);
    /* Nothing of ours is live; glibc keeps a few objects per cached thread
     * stack (the DTV), so allow those and nothing more. */
    long live = stat_value(argv[1], "live_bytes");
    CHECK(live >= 0 && live <= 4096);
    CHECK(stat_value(argv[1], "allocations") > THREADS * ROUNDS);
    /* Batches are drained and used again, not made anew. The workers free
     * into each other's chunks, and those frees wait until the owner next
     * drains, when its current chunk runs out: about a chunk's worth of
     * its blocks (1 MiB / 112 bytes) a drain, 32 to a batch, per owner,
     * and twice that is allowed, since the holes of the current chunk and
     * the spill chunk serve requests before the drain. Without reuse it
     * would be one batch per 32 of up to 1.4 M handed frees, about 45,000.
     * How many wait depends on how the threads are scheduled: 1,088 to
     * 2,624 in 120 runs on a quiet machine (2026-11-28), where a bound of
     * one chunk's worth (2,336) failed 5 of 160. The handoff alone sent
     * HANDOFF * HANDOFF_ROUNDS / 32 = 25,000 batches; a round's frees all
     * wait (HANDOFF / 32 batches) until the producer next drains, so some
     * rounds' worth may exist at once. */
    long batches = stat_value(argv[1], "remote_batches");
    CHECK(workers_batches > 0 && workers_batches <= THREADS * 2 * ((1 << 20) / 112 / 32));
    CHECK(batches >= workers_batches && batches - workers_batches <= 4 * HANDOFF / 32);
  }
  return check_done("test_threads");
}
