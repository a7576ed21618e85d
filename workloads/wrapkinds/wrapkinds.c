/* wrapkinds: HALO's Figure 2 shape behind one allocation wrapper of the
 * program's own. A market feed makes three kinds of records, all 48 bytes
 * (one size class for glibc and jemalloc alike): trades, quotes and
 * remarks. Every record comes from xalloc, the one function that calls
 * malloc, reached from three type-specific constructors; so the innermost
 * call site is the same for all three kinds and only the constructor one
 * frame out tells them apart. The feed is one loop whose next kind comes
 * from a pseudo-random generator (about 3/8 trades, 5/16 quotes, 5/16
 * remarks, in no fixed order), so a general allocator interleaves the
 * kinds in memory. Trades and quotes go on ONE linked list, mixed, in the
 * order they were made, and the list is replayed PASSES times; each replay
 * reads both kinds (a quote sets its symbol's price, a trade is valued at
 * it and updated). Remarks are set aside in a growable pointer array (its
 * own block is far larger than a record) and read only once, at the end.
 * Usage: wrapkinds N PASSES. Frees everything; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

enum { TRADE = 1, QUOTE = 2 };
#define SYMBOLS 64

/* What the replayed list links: the first field of a trade and a quote. */
struct entry { struct entry *next; int kind, symbol; };

struct trade {                          /* 48 bytes */
  struct entry e;
  long shares;
  long value;                           /* written by every replay */
  long seq;
  int side, venue;
};
struct quote {                          /* 48 bytes */
  struct entry e;
  long bid, ask;
  long size;
  long stamp;
};
struct remark {                         /* 48 bytes */
  long seq;
  int source, severity;
  char text[32];
};

_Static_assert(sizeof(struct trade) == 48 && sizeof(struct quote) == 48 && sizeof(struct remark) == 48,
               "the three kinds share one size class");

static unsigned long state;
static unsigned long draw(void) {
  state = state * 2862933555777941757ul + 3037000493ul;
  return state >> 29;
}

/* The program's own allocation layer: the only call to malloc. */
NOINLINE static void *xalloc(size_t size) {
  void *p = malloc(size);
  if (p == NULL) {
    fprintf(stderr, "wrapkinds: out of memory (%zu bytes)\n", size);
    exit(1);
  }
  return p;
}

NOINLINE static struct trade *make_trade(long seq, unsigned long r) {
  struct trade *t = xalloc(sizeof *t);
  t->e.next = NULL; t->e.kind = TRADE; t->e.symbol = (int)(r % SYMBOLS);
  t->shares = 1 + (long)((r >> 6) % 500);
  t->value = 0; t->seq = seq;
  t->side = (int)((r >> 15) & 1); t->venue = (int)((r >> 16) % 5);
  return t;
}
NOINLINE static struct quote *make_quote(long seq, unsigned long r) {
  struct quote *q = xalloc(sizeof *q);
  q->e.next = NULL; q->e.kind = QUOTE; q->e.symbol = (int)(r % SYMBOLS);
  q->bid = 1000 + (long)((r >> 6) % 900);
  q->ask = q->bid + 1 + (long)((r >> 16) % 7);
  q->size = 100 * (1 + (long)((r >> 19) % 9));
  q->stamp = seq;
  return q;
}
NOINLINE static struct remark *make_remark(long seq, unsigned long r) {
  struct remark *m = xalloc(sizeof *m);
  m->seq = seq; m->source = (int)(r % 11); m->severity = (int)((r >> 8) % 4);
  snprintf(m->text, sizeof m->text, "halt check %ld/%d", seq % 100000, m->source);
  return m;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  int passes = argc > 2 ? atoi(argv[2]) : 5;
  if (n < 0 || passes < 0) { fputs("usage: wrapkinds N PASSES\n", stderr); return 2; }
  state = 12345;

  struct entry *head = NULL, **tail = &head;
  struct remark **remarks = NULL;
  long nremarks = 0, cap = 0, ntrades = 0, nquotes = 0;
  for (long i = 0; i < n; i++) {
    unsigned long r = draw();
    unsigned kind = (unsigned)(r >> 20) & 15;
    if (kind < 6) {
      struct trade *t = make_trade(i, r);
      *tail = &t->e; tail = &t->e.next; ntrades++;
    } else if (kind < 11) {
      struct quote *q = make_quote(i, r);
      *tail = &q->e; tail = &q->e.next; nquotes++;
    } else {
      if (nremarks == cap) {
        cap = cap ? cap * 2 : 4096;
        remarks = realloc(remarks, (size_t)cap * sizeof *remarks);
        if (remarks == NULL) { fputs("wrapkinds: out of memory\n", stderr); return 1; }
      }
      remarks[nremarks++] = make_remark(i, r);
    }
  }

  long price[SYMBOLS];
  unsigned long sum = 0;
  for (int p = 0; p < passes; p++) {
    for (int s = 0; s < SYMBOLS; s++) price[s] = 1000 + s;
    long book = 0;
    for (struct entry *e = head; e; e = e->next) {
      if (e->kind == QUOTE) {
        const struct quote *q = (const struct quote *)e;
        price[e->symbol] = (q->bid + q->ask + (p & 1)) / 2;
        book += q->size;
      } else {
        struct trade *t = (struct trade *)e;
        long v = t->shares * price[e->symbol];
        t->value += t->side ? v : -v;
        book -= t->shares;
        sum += (unsigned long)(v ^ (t->venue + p));
      }
    }
    sum = sum * 1000003u + (unsigned long)book;
  }
  for (struct entry *e = head; e; e = e->next)
    if (e->kind == TRADE) sum += (unsigned long)((struct trade *)e)->value;

  unsigned long cold = 0;
  for (long i = 0; i < nremarks; i++) {
    const struct remark *m = remarks[i];
    cold = cold * 31 + (unsigned long)(m->seq + m->severity) + (unsigned char)m->text[11];
    free(remarks[i]);
  }
  free(remarks);
  while (head) { struct entry *x = head->next; free(head); head = x; }
  printf("wrapkinds %ld %d trades %ld quotes %ld remarks %ld checksum %lu\n",
         n, passes, ntrades, nquotes, nremarks, sum ^ cold);
  return 0;
}
