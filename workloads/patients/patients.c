/* patients: the shape of Olden's health. A 4-ary tree of villages; each has
 * a hospital with lists of patients (waiting, in assessment, inside). Every
 * step, each village may admit a new patient; patients move between lists,
 * are sent up to the parent village's hospital, or leave (freed). Every step
 * walks all the lists. Usage: patients LEVELS STEPS SEED. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

struct patient { long id, time, visits; };
struct entry { struct entry *next, *prev; struct patient *p; };
struct list { struct entry *head; long len; };
struct village {
  struct village *child[4], *parent;
  struct list waiting, assess, inside;
  long seed, staff, treated;
};

static unsigned long rng;
static long next_rand(long n) { rng = rng * 6364136223846793005ul + 1442695040888963407ul; return (long)((rng >> 33) % (unsigned long)n); }

NOINLINE static struct patient *new_patient(long id) {
  struct patient *p = malloc(sizeof *p);
  if (!p) exit(1);
  p->id = id; p->time = 0; p->visits = 1;
  return p;
}
NOINLINE static struct entry *new_entry(struct patient *p) {
  struct entry *e = malloc(sizeof *e);
  if (!e) exit(1);
  e->p = p; e->next = e->prev = NULL;
  return e;
}
static void push(struct list *l, struct entry *e) {
  e->prev = NULL; e->next = l->head;
  if (l->head) l->head->prev = e;
  l->head = e; l->len++;
}
static void unlink_entry(struct list *l, struct entry *e) {
  if (e->prev) e->prev->next = e->next; else l->head = e->next;
  if (e->next) e->next->prev = e->prev;
  l->len--;
}
NOINLINE static struct village *new_village(int level, struct village *parent, long seed) {
  struct village *v = calloc(1, sizeof *v);
  if (!v) exit(1);
  v->parent = parent; v->seed = seed; v->staff = 1 << level;
  if (level > 0)
    for (int i = 0; i < 4; i++) v->child[i] = new_village(level - 1, v, seed * 4 + i);
  return v;
}

static long step(struct village *v, long *ids) {
  long work = 0;
  for (int i = 0; i < 4; i++) if (v->child[i]) work += step(v->child[i], ids);
  /* inside: treated patients leave */
  for (struct entry *e = v->inside.head, *n; e; e = n) {
    n = e->next;
    work += e->p->time;
    if (++e->p->time > 10) { unlink_entry(&v->inside, e); v->treated++; free(e->p); free(e); }
  }
  /* assessment: admit, or send up to the parent's hospital */
  for (struct entry *e = v->assess.head, *n; e; e = n) {
    n = e->next;
    if (++e->p->time < 3) continue;
    unlink_entry(&v->assess, e);
    e->p->time = 0;
    if (v->parent && next_rand(10) < 2) { e->p->visits++; push(&v->parent->waiting, e); }
    else push(&v->inside, e);
  }
  /* waiting: staff take patients into assessment */
  long free_staff = v->staff;
  for (struct entry *e = v->waiting.head, *n; e && free_staff > 0; e = n, free_staff--) {
    n = e->next;
    unlink_entry(&v->waiting, e);
    push(&v->assess, e);
  }
  for (struct entry *e = v->waiting.head; e; e = e->next) work += ++e->p->time;
  if (next_rand(3) == 0) push(&v->waiting, new_entry(new_patient((*ids)++)));
  return work;
}

static long count(const struct village *v) {
  long c = v->treated + v->waiting.len + v->assess.len + v->inside.len;
  for (int i = 0; i < 4; i++) if (v->child[i]) c += count(v->child[i]);
  return c;
}

int main(int argc, char **argv) {
  int levels = argc > 1 ? atoi(argv[1]) : 5;
  long steps = argc > 2 ? atol(argv[2]) : 500;
  rng = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
  struct village *top = new_village(levels, NULL, 1);
  long ids = 0, work = 0;
  for (long s = 0; s < steps; s++) work += step(top, &ids);
  printf("patients %d %ld admitted %ld accounted %ld checksum %ld\n", levels, steps, ids, count(top), work);
  return 0;
}
