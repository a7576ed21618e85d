/* treesim: a recursive simulation of a tree of workshops (binary, DEPTH
 * levels below the root). Every workshop has three linked lists of job
 * cells: an inbox, a bench of jobs being worked on and a shelf of finished
 * jobs waiting to be collected. Each time step the recursion visits every
 * workshop, children first: new jobs arrive; a triage builds a short-lived
 * list of cells ranking the inbox by remaining work (made and freed every
 * step: millions of small mallocs and frees over the run); the best jobs
 * move from the inbox to the bench; work is done; finished jobs go to the
 * shelf, and the shelf is collected: a job either moves up to the parent's
 * inbox for more work or is done and freed.
 * Usage: treesim DEPTH STEPS SEED. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

struct job { long id, work, born, hops; };
struct cell { struct cell *next; struct job *job; };
struct rank { struct rank *next; struct cell *cell; long key; };
struct shop {
  struct shop *kid[2], *up;
  struct cell *inbox, *bench, *shelf;
  long waiting, busy, capacity, rate, level;
  long finished, latency;
};

static unsigned long rng;
static long next_rand(long n) {
  rng = rng * 6364136223846793005ul + 1442695040888963407ul;
  return (long)((rng >> 33) % (unsigned long)n);
}

static long next_id, now;

NOINLINE static struct job *new_job(long work) {
  struct job *j = malloc(sizeof *j);
  if (!j) exit(1);
  j->id = next_id++; j->work = work; j->born = now; j->hops = 0;
  return j;
}
NOINLINE static struct cell *new_cell(struct job *job, struct cell *next) {
  struct cell *c = malloc(sizeof *c);
  if (!c) exit(1);
  c->job = job; c->next = next;
  return c;
}
NOINLINE static struct rank *new_rank(struct cell *cell, long key) {
  struct rank *r = malloc(sizeof *r);
  if (!r) exit(1);
  r->cell = cell; r->key = key; r->next = NULL;
  return r;
}
NOINLINE static struct shop *new_shop(int level, struct shop *up) {
  struct shop *s = calloc(1, sizeof *s);
  if (!s) exit(1);
  s->up = up; s->level = level;
  s->capacity = 16 + 4 * level; s->rate = 1 + level / 2;
  if (level > 0) { s->kid[0] = new_shop(level - 1, s); s->kid[1] = new_shop(level - 1, s); }
  return s;
}

/* Rank the inbox by remaining work (a sorted list of at most `keep`
 * entries), move the best jobs to the bench, free the ranking. */
static void triage(struct shop *s) {
  long room = s->capacity - s->busy;
  if (room <= 0 || !s->inbox) return;
  struct rank *best = NULL;
  long kept = 0;
  for (struct cell *c = s->inbox; c; c = c->next) {
    long key = c->job->work * 8 + c->job->hops;
    struct rank **p = &best;
    while (*p && (*p)->key <= key) p = &(*p)->next;
    if (kept == room && !*p) continue;
    struct rank *r = new_rank(c, key);
    r->next = *p; *p = r;
    if (++kept > room) {            /* drop the worst */
      struct rank **q = &best;
      while ((*q)->next) q = &(*q)->next;
      free(*q); *q = NULL; kept--;
    }
  }
  while (best) {
    struct rank *r = best;
    best = r->next;
    for (struct cell **p = &s->inbox; *p; p = &(*p)->next)
      if (*p == r->cell) { *p = r->cell->next; break; }
    r->cell->next = s->bench; s->bench = r->cell;
    s->waiting--; s->busy++;
    free(r);
  }
}

static unsigned long step(struct shop *s) {
  unsigned long sum = 0;
  if (s->kid[0]) { sum += step(s->kid[0]); sum += step(s->kid[1]); }
  if (next_rand(3) == 0) {
    long n = 1 + next_rand(2);
    for (long i = 0; i < n; i++) { s->inbox = new_cell(new_job(1 + next_rand(40)), s->inbox); s->waiting++; }
  }
  triage(s);
  for (struct cell **p = &s->bench; *p;) {
    struct cell *c = *p;
    c->job->work -= s->rate;
    if (c->job->work > 0) { p = &c->next; continue; }
    *p = c->next; s->busy--;
    c->next = s->shelf; s->shelf = c;
  }
  while (s->shelf) {
    struct cell *c = s->shelf;
    s->shelf = c->next;
    struct job *j = c->job;
    if (s->up && next_rand(8) < 3) {
      j->hops++;
      j->work = 1 + next_rand(20) + j->hops;
      c->next = s->up->inbox; s->up->inbox = c; s->up->waiting++;
    } else {
      s->finished++;
      s->latency += now - j->born;
      sum += (unsigned long)(j->id % 97 + j->hops * 5 + (now - j->born));
      free(j);
      free(c);
    }
  }
  for (struct cell *c = s->inbox; c; c = c->next) sum += (unsigned long)c->job->work;
  return sum;
}

static void totals(const struct shop *s, long *finished, long *latency, long *open) {
  *finished += s->finished; *latency += s->latency;
  *open += s->waiting + s->busy;
  if (s->kid[0]) { totals(s->kid[0], finished, latency, open); totals(s->kid[1], finished, latency, open); }
}

static void release(struct shop *s) {
  if (s->kid[0]) { release(s->kid[0]); release(s->kid[1]); }
  struct cell *lists[2] = {s->inbox, s->bench};
  for (int i = 0; i < 2; i++)
    for (struct cell *c = lists[i], *n; c; c = n) { n = c->next; free(c->job); free(c); }
  free(s);
}

int main(int argc, char **argv) {
  int depth = argc > 1 ? atoi(argv[1]) : 8;
  long steps = argc > 2 ? atol(argv[2]) : 200;
  rng = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
  if (depth < 0 || depth > 20) { fputs("treesim: DEPTH must be 0..20\n", stderr); return 2; }
  struct shop *root = new_shop(depth, NULL);
  unsigned long check = 0;
  for (now = 0; now < steps; now++) check = check * 31 + step(root);
  long finished = 0, latency = 0, open = 0;
  totals(root, &finished, &latency, &open);
  release(root);
  printf("treesim %d %ld jobs %ld finished %ld open %ld latency %ld checksum %lu\n",
         depth, steps, next_id, finished, open, latency, check);
  return 0;
}
