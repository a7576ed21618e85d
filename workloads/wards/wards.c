/* wards: a recursive hospital simulation over a 3-ary tree of wards (LEVELS
 * levels below the head ward). Every ward owns three doubly linked rosters
 * (first and last cell, appended at the tail): triage, beds and recovery.
 * A case is three blocks made together at admission: a roster cell (plain
 * malloc), a case record and a small history record (both through the
 * program's own wrapper, xmalloc). Each step visits the wards recursively,
 * each ward before its sub-wards, and walks all three of its rosters:
 *   recovery: a case that has stayed long enough is discharged (its cell,
 *     record and history freed); a few relapse and go back to triage;
 *   beds: treatment lowers the severity; a recovered case moves to the
 *     recovery roster; a case too severe for the ward may be referred to
 *     the parent ward's triage (its history record is replaced by one for
 *     the new ward: a free and a malloc);
 *   triage: cases wait; the severe or long-waiting take free beds; a case
 *     waiting too long is referred up, or at the head ward sent home;
 * then new cases are admitted (mostly at the leaf wards), and the ward's
 * rosters are walked once more for a census. Every fourth admission and
 * every third referral makes an audit record (xmalloc too, the case
 * record's size) kept in a growable array and read only at the end: cold
 * blocks made between the hot ones. The population settles after about 40
 * steps at some 75 open cases a ward.
 * Usage: wards LEVELS STEPS SEED. Frees everything; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

struct history { long ward, since; int moves, worst; };                     /* 24 bytes */
struct record {                                                             /* 48 bytes */
  long id, admitted;
  int severity, need, waited, stay;
  struct history *hist;
  long charge;
};
struct cell { struct cell *prev, *next; struct record *rec; };             /* 24 bytes */
struct roster { struct cell *first, *last; long count; };
struct ward {
  struct ward *sub[3], *parent;
  struct roster triage, beds, recovery;
  long id, discharged, referred, relapsed, sent_home;
  int level, capacity, treat, bar;
};
struct audit { long step, ward, record; int severity, what; char note[16]; };   /* 48 bytes */

_Static_assert(sizeof(struct record) == 48 && sizeof(struct audit) == 48, "one size class");
_Static_assert(sizeof(struct cell) == 24 && sizeof(struct history) == 24, "one size class");

static unsigned long seed_state;
static long roll(long n) {
  seed_state = seed_state * 3935559000370003845ul + 2691343689449507681ul;
  return (long)((seed_state >> 32) % (unsigned long)n);
}

static long now, next_case, live, peak, admissions, referrals;
static unsigned long tally;                 /* the checksum */
static struct audit **audits;
static long naudits, audit_room;

/* The program's own allocation wrapper. */
NOINLINE static void *xmalloc(size_t size) {
  void *p = malloc(size);
  if (!p) { fprintf(stderr, "wards: out of memory (%zu bytes)\n", size); exit(1); }
  return p;
}

NOINLINE static struct history *new_history(long ward, int moves, int worst) {
  struct history *h = xmalloc(sizeof *h);
  h->ward = ward; h->since = now; h->moves = moves; h->worst = worst;
  return h;
}
NOINLINE static struct record *new_record(int severity) {
  struct record *r = xmalloc(sizeof *r);
  r->id = next_case++; r->admitted = now;
  r->severity = severity; r->need = 0; r->waited = 0; r->stay = 0;
  r->charge = 0; r->hist = NULL;
  return r;
}
NOINLINE static struct cell *new_cell(struct record *rec) {
  struct cell *c = malloc(sizeof *c);
  if (!c) { fputs("wards: out of memory\n", stderr); exit(1); }
  c->prev = c->next = NULL; c->rec = rec;
  return c;
}
NOINLINE static void audit(const struct ward *w, const struct record *r, int what) {
  struct audit *a = xmalloc(sizeof *a);
  a->step = now; a->ward = w->id; a->record = r->id; a->severity = r->severity; a->what = what;
  snprintf(a->note, sizeof a->note, "%s w%ld", what ? "refer" : "admit", w->id % 1000);
  if (naudits == audit_room) {
    audit_room = audit_room ? audit_room * 2 : 1024;
    audits = realloc(audits, (size_t)audit_room * sizeof *audits);
    if (!audits) { fputs("wards: out of memory\n", stderr); exit(1); }
  }
  audits[naudits++] = a;
}

static void append(struct roster *l, struct cell *c) {
  c->next = NULL; c->prev = l->last;
  if (l->last) l->last->next = c; else l->first = c;
  l->last = c; l->count++;
}
static void detach(struct roster *l, struct cell *c) {
  if (c->prev) c->prev->next = c->next; else l->first = c->next;
  if (c->next) c->next->prev = c->prev; else l->last = c->prev;
  l->count--;
}

static void discharge(struct ward *w, struct cell *c, long reason) {
  struct record *r = c->rec;
  tally += (unsigned long)(r->id % 1009 + (now - r->admitted) * 3 + r->hist->moves * 7 +
                           r->hist->worst + r->charge % 101 + reason);
  w->discharged++; live--;
  free(r->hist);
  free(r);
  free(c);
}

/* Send a case from ward w up to its parent's triage: a new history record. */
NOINLINE static void refer(struct ward *w, struct roster *from, struct cell *c) {
  struct record *r = c->rec;
  detach(from, c);
  struct history *old = r->hist;
  r->hist = new_history(w->parent->id, old->moves + 1, old->worst);
  free(old);
  r->waited = 0;
  append(&w->parent->triage, c);
  w->referred++;
  if (++referrals % 3 == 0) audit(w, r, 1);
}

NOINLINE static struct ward *open_ward(struct ward *parent, int level, long id) {
  struct ward *w = calloc(1, sizeof *w);
  if (!w) { fputs("wards: out of memory\n", stderr); exit(1); }
  w->parent = parent; w->level = level; w->id = id;
  w->capacity = 60 + 20 * level; w->treat = 1 + level / 2; w->bar = 24 + 8 * level;
  if (level > 0)
    for (int k = 0; k < 3; k++) w->sub[k] = open_ward(w, level - 1, id * 3 + k + 1);
  return w;
}

static void walk_recovery(struct ward *w) {
  for (struct cell *c = w->recovery.first, *n; c; c = n) {
    n = c->next;
    struct record *r = c->rec;
    r->stay++;
    r->charge += 2 + w->level;
    if (r->stay >= r->need) {
      detach(&w->recovery, c);
      discharge(w, c, 0);
    } else if (roll(48) == 0) {
      detach(&w->recovery, c);
      r->severity = 4 + (int)roll(20);
      r->waited = 0;
      append(&w->triage, c);
      w->relapsed++;
    }
  }
}

static void walk_beds(struct ward *w) {
  for (struct cell *c = w->beds.first, *n; c; c = n) {
    n = c->next;
    struct record *r = c->rec;
    r->severity -= w->treat;
    r->charge += 5 + w->level * 2;
    if (r->severity <= 0) {
      detach(&w->beds, c);
      r->stay = 0;
      r->need = 3 + (int)(r->id % 7) + r->hist->moves;
      append(&w->recovery, c);
    } else if (r->severity > w->bar && w->parent && roll(3) == 0) {
      refer(w, &w->beds, c);
    } else if (r->severity > r->hist->worst) {
      r->hist->worst = r->severity;
    }
  }
}

static void walk_triage(struct ward *w) {
  for (struct cell *c = w->triage.first, *n; c; c = n) {
    n = c->next;
    struct record *r = c->rec;
    r->waited++;
    if (roll(6) == 0) r->severity++;
    if (w->beds.count < w->capacity && (r->severity >= 10 || r->waited >= 3)) {
      detach(&w->triage, c);
      append(&w->beds, c);
    } else if (r->waited > 8) {
      if (w->parent) refer(w, &w->triage, c);
      else { detach(&w->triage, c); w->sent_home++; discharge(w, c, 1); }
    }
  }
}

static void admit(struct ward *w) {
  long n = w->level == 0 ? 3 + roll(6) : roll(3);
  for (long i = 0; i < n; i++) {
    int severity = 1 + (int)roll(10);
    if (roll(5) == 0) severity += (int)roll(30);
    struct record *r = new_record(severity);
    r->hist = new_history(w->id, 0, severity);
    append(&w->triage, new_cell(r));
    live++;
    if (++admissions % 4 == 0) audit(w, r, 0);
  }
  if (live > peak) peak = live;
}

static unsigned long census(const struct ward *w) {
  unsigned long s = 0;
  const struct roster *rosters[3] = {&w->triage, &w->beds, &w->recovery};
  for (int i = 0; i < 3; i++)
    for (const struct cell *c = rosters[i]->first; c; c = c->next)
      s += (unsigned long)(c->rec->severity * (i + 1) + c->rec->hist->moves);
  return s;
}

static void visit(struct ward *w) {
  walk_recovery(w);
  walk_beds(w);
  walk_triage(w);
  admit(w);
  tally = tally * 7 + census(w) + (unsigned long)w->beds.count;
  for (int k = 0; k < 3; k++)
    if (w->sub[k]) visit(w->sub[k]);
}

static void close_ward(struct ward *w, long *totals) {
  for (int k = 0; k < 3; k++)
    if (w->sub[k]) close_ward(w->sub[k], totals);
  totals[0] += w->discharged; totals[1] += w->referred;
  totals[2] += w->relapsed; totals[3] += w->sent_home;
  struct roster *rosters[3] = {&w->triage, &w->beds, &w->recovery};
  for (int i = 0; i < 3; i++)
    for (struct cell *c = rosters[i]->first, *n; c; c = n) {
      n = c->next;
      totals[4]++;
      free(c->rec->hist); free(c->rec); free(c);
    }
  free(w);
}

int main(int argc, char **argv) {
  int levels = argc > 1 ? atoi(argv[1]) : 6;
  long steps = argc > 2 ? atol(argv[2]) : 100;
  seed_state = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
  if (levels < 0 || levels > 14 || steps < 0) { fputs("usage: wards LEVELS(0..14) STEPS SEED\n", stderr); return 2; }
  struct ward *head = open_ward(NULL, levels, 0);
  for (now = 0; now < steps; now++) visit(head);

  unsigned long cold = 0;
  for (long i = 0; i < naudits; i++) {
    const struct audit *a = audits[i];
    cold = cold * 131 + (unsigned long)(a->step + a->ward * 3 + a->record + a->severity + a->what) +
           strlen(a->note);
    free(audits[i]);
  }
  free(audits);
  long totals[5] = {0};
  close_ward(head, totals);
  printf("wards %d %ld admitted %ld discharged %ld referred %ld relapsed %ld sent-home %ld open %ld "
         "peak %ld audits %ld checksum %lu\n",
         levels, steps, next_case, totals[0], totals[1], totals[2], totals[3], totals[4], peak, naudits,
         tally ^ cold);
  return 0;
}
