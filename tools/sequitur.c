/* cohort-sequitur: SEQUITUR (Nevill-Manning and Witten, 1997) for the hds
 * comparator: compresses a heap reference trace into the one grammar that
 * generates it. Python reads the grammar (cohort/policies/sequitur.py) and finds the
 * hot data streams in it (cohort/policies/hds.py); the per-reference work is
 * here because a trace holds a million references.
 *
 * Two properties hold after every symbol appended:
 *   - digram uniqueness: no pair of adjacent symbols appears twice in the
 *     grammar without overlapping;
 *   - rule utility: every rule but the start rule is used at least twice.
 * Each rule is a circular doubly linked list closed by its guard node; a
 * hash table maps each digram to the node where it starts.
 *
 * Usage: cohort-sequitur < symbols > grammar
 *   in:  little-endian u32 terminals, each below 2^31;
 *   out: "CHGRAM1\0", u32 rules, then per rule (the start rule first, the
 *        others in depth-first order of first use) u32 length and its
 *        symbols: a terminal, or 2^31 + the index of a rule in this list.
 * Exits 0, or 2 with one line on stderr (a bad symbol, out of memory). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RULE_BIT 0x80000000u

typedef struct Node {
  struct Node *prev, *next;
  uint32_t sym;     /* a terminal, or RULE_BIT | rule index (a guard: its own rule) */
  bool guard;
} Node;

typedef struct {
  Node guard;
  uint32_t uses;    /* nonterminal nodes that name it */
} Rule;

static void die(const char *why) {
  fprintf(stderr, "cohort-sequitur: %s\n", why);
  exit(2);
}

static void *grow(void *p, size_t n) {
  p = realloc(p, n);
  if (!p) die("out of memory");
  return p;
}

/* ---- rules and nodes ------------------------------------------------------ */

static Rule **rules;
static uint32_t n_rules, rules_cap;

static Rule *rule_of(uint32_t sym) { return rules[sym & ~RULE_BIT]; }
static bool is_rule(uint32_t sym) { return sym & RULE_BIT; }

static Rule *new_rule(void) {
  if (n_rules == rules_cap) {
    rules_cap = rules_cap ? 2 * rules_cap : 1024;
    rules = grow(rules, rules_cap * sizeof *rules);
  }
  Rule *r = grow(NULL, sizeof *r);
  r->guard.prev = r->guard.next = &r->guard;
  r->guard.sym = RULE_BIT | n_rules;
  r->guard.guard = true;
  r->uses = 0;
  rules[n_rules++] = r;
  return r;
}

/* Nodes come from slabs and go back to a free list. */
static Node *free_nodes;

static Node *alloc_node(void) {
  if (!free_nodes) {
    enum { SLAB = 4096 };
    Node *slab = grow(NULL, SLAB * sizeof(Node));
    for (int i = 0; i < SLAB; i++) { slab[i].next = free_nodes; free_nodes = &slab[i]; }
  }
  Node *n = free_nodes;
  free_nodes = n->next;
  return n;
}

static void free_node(Node *n) { n->next = free_nodes; free_nodes = n; }

/* ---- the digram index: linear probing, deletion by backward shift ---------- */

typedef struct { uint64_t key; Node *node; } Slot;
static Slot *table;
static size_t table_cap, table_used;   /* cap is a power of two */

static uint64_t key_of(const Node *n) { return (uint64_t)n->sym << 32 | n->next->sym; }

static size_t home(uint64_t k) {
  k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL; k ^= k >> 33;
  return (size_t)k & (table_cap - 1);
}

static Slot *slot_of(uint64_t k) {
  size_t i = home(k);
  while (table[i].node && table[i].key != k) i = (i + 1) & (table_cap - 1);
  return &table[i];
}

static void table_put(uint64_t k, Node *n);

static void table_grow(void) {
  Slot *old = table;
  size_t old_cap = table_cap;
  table_cap = table_cap ? 2 * table_cap : 1 << 16;
  table = calloc(table_cap, sizeof *table);
  if (!table) die("out of memory");
  table_used = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].node) table_put(old[i].key, old[i].node);
  free(old);
}

static Node *table_get(uint64_t k) { return slot_of(k)->node; }

static void table_put(uint64_t k, Node *n) {
  if (2 * (table_used + 1) > table_cap) table_grow();
  Slot *s = slot_of(k);
  if (!s->node) table_used++;
  s->key = k;
  s->node = n;
}

static void table_erase(uint64_t k) {
  size_t i = (size_t)(slot_of(k) - table);
  if (!table[i].node) return;
  table[i].node = NULL;
  table_used--;
  /* Shift back later entries of the run that probed past the hole. */
  for (size_t j = (i + 1) & (table_cap - 1); table[j].node; j = (j + 1) & (table_cap - 1)) {
    size_t h = home(table[j].key);
    bool reachable = i <= j ? (h <= i || h > j) : (h <= i && h > j);
    if (reachable) {
      table[i] = table[j];
      table[j].node = NULL;
      i = j;
    }
  }
}

/* ---- list surgery ----------------------------------------------------------- */

/* Drop the digram starting at n from the index, if it is the one indexed. */
static void forget(Node *n) {
  if (n->guard || n->next->guard) return;
  uint64_t k = key_of(n);
  if (table_get(k) == n) table_erase(k);
}

static bool triple(const Node *n) {   /* n and its neighbours: three equal symbols */
  return n->prev && n->next && !n->guard && !n->prev->guard && !n->next->guard &&
         n->sym == n->prev->sym && n->sym == n->next->sym;
}

/* Link left to right, forgetting the digram left used to start. A run of
 * three equal symbols holds two overlapping digrams, of which only the first
 * was indexed: index the one that survives. */
static void join(Node *left, Node *right) {
  if (left->next) {
    forget(left);
    if (triple(right)) table_put(key_of(right), right);
    if (triple(left)) table_put(key_of(left->prev), left->prev);
  }
  left->next = right;
  right->prev = left;
}

static void insert_after(Node *left, Node *n) {
  join(n, left->next);
  join(left, n);
}

static Node *symbol(uint32_t sym) {
  Node *n = alloc_node();
  n->prev = n->next = NULL;
  n->sym = sym;
  n->guard = false;
  if (is_rule(sym)) rule_of(sym)->uses++;
  return n;
}

/* Unlink a symbol node, forgetting its digram and its rule's use. */
static void delete(Node *n) {
  join(n->prev, n->next);
  forget(n);
  if (is_rule(n->sym)) rule_of(n->sym)->uses--;
  free_node(n);
}

static bool check(Node *n);

/* Replace the digram starting at n with a nonterminal for r. */
static void substitute(Node *n, Rule *r) {
  Node *prev = n->prev;
  delete(prev->next);
  delete(prev->next);
  insert_after(prev, symbol(r->guard.sym));
  if (!check(prev)) check(prev->next);
}

/* Replace a nonterminal used once by its rule's symbols; the rule dies. */
static void expand(Node *n) {
  Rule *r = rule_of(n->sym);
  Node *left = n->prev, *right = n->next;
  Node *first = r->guard.next, *last = r->guard.prev;
  forget(left);
  forget(n);
  r->uses--;
  left->next = first; first->prev = left;
  last->next = right; right->prev = last;
  r->guard.next = r->guard.prev = &r->guard;
  free_node(n);
  if (!last->guard && !right->guard) table_put(key_of(last), last);
  if (!left->guard && !table_get(key_of(left))) table_put(key_of(left), left);
}

static void match(Node *fresh, Node *old) {
  Rule *r;
  if (old->prev->guard && old->next->next->guard) {   /* the digram is a whole rule: reuse it */
    r = rule_of(old->prev->sym);
    substitute(fresh, r);
  } else {
    r = new_rule();
    insert_after(r->guard.prev, symbol(fresh->sym));
    insert_after(r->guard.prev, symbol(fresh->next->sym));
    substitute(old, r);
    substitute(fresh, r);
    table_put(key_of(r->guard.next), r->guard.next);
  }
  Node *first = r->guard.next;
  if (is_rule(first->sym) && rule_of(first->sym)->uses == 1) expand(first);
}

/* Enforce digram uniqueness for the digram starting at n; true if the
 * grammar changed. */
static bool check(Node *n) {
  if (n->guard || n->next->guard) return false;
  uint64_t k = key_of(n);
  Node *found = table_get(k);
  if (!found) {
    table_put(k, n);
    return false;
  }
  if (found->next == n || n->next == found) return false;   /* overlapping: aaa */
  match(n, found);
  return true;
}

static void append(Rule *start, uint32_t sym) {
  insert_after(start->guard.prev, symbol(sym));
  Node *last = start->guard.prev;
  if (!last->prev->guard) check(last->prev);
}

/* ---- output -------------------------------------------------------------------- */

static void put32(uint32_t v) {
  if (fwrite(&v, 4, 1, stdout) != 1) die("cannot write the grammar");
}

int main(void) {
  table_grow();
  Rule *start = new_rule();
  uint32_t buf[4096];
  size_t got;
  while ((got = fread(buf, 4, 4096, stdin)) > 0)
    for (size_t i = 0; i < got; i++) {
      if (buf[i] & RULE_BIT) die("a symbol of 2^31 or more");
      append(start, buf[i]);
    }
  if (ferror(stdin)) die("cannot read the symbols");

  /* Number the rules in use: the start rule, then depth first, each rule
   * at its first use, as cohort/policies/sequitur.py's Grammar.rules() lists them. */
  uint32_t *number = grow(NULL, (size_t)n_rules * sizeof *number);
  for (uint32_t i = 0; i < n_rules; i++) number[i] = UINT32_MAX;
  uint32_t *order = grow(NULL, (size_t)n_rules * sizeof *order), n_order = 0;
  uint32_t *stack = grow(NULL, (size_t)n_rules * sizeof *stack * 2 + 8), depth = 0;
  size_t stack_cap = (size_t)n_rules * 2 + 2;
  stack[depth++] = 0;
  while (depth) {
    uint32_t r = stack[--depth];
    if (number[r] != UINT32_MAX) continue;
    number[r] = n_order;
    order[n_order++] = r;
    /* push the body's rules in reverse, so the first is visited first */
    uint32_t mark = depth;
    for (Node *n = rules[r]->guard.next; !n->guard; n = n->next)
      if (is_rule(n->sym) && number[n->sym & ~RULE_BIT] == UINT32_MAX) {
        if (depth == stack_cap) {
          stack_cap *= 2;
          stack = grow(stack, stack_cap * sizeof *stack);
        }
        stack[depth++] = n->sym & ~RULE_BIT;
      }
    for (uint32_t a = mark, b = depth ? depth - 1 : 0; a < b; a++, b--) {
      uint32_t t = stack[a]; stack[a] = stack[b]; stack[b] = t;
    }
  }
  fwrite("CHGRAM1", 8, 1, stdout);
  put32(n_order);
  for (uint32_t k = 0; k < n_order; k++) {
    Rule *r = rules[order[k]];
    uint32_t len = 0;
    for (Node *n = r->guard.next; !n->guard; n = n->next) len++;
    put32(len);
    for (Node *n = r->guard.next; !n->guard; n = n->next)
      put32(is_rule(n->sym) ? RULE_BIT | number[n->sym & ~RULE_BIT] : n->sym);
  }
  if (fflush(stdout) != 0) die("cannot write the grammar");
  return 0;
}
