/* calc: a small interpreter. It reads a program from standard input, parses
 * it into many small AST nodes and runs it the naive way: every integer is a
 * boxed, reference-counted value, every evaluation makes and frees
 * temporaries, a string keeps its characters in a buffer of their own, lists
 * are linked cells, dicts are hash tables of entry nodes, every call gets an
 * argument vector and a heap frame, other variables are linked bindings.
 * Everything comes through two levels of wrappers (one *_alloc function per
 * kind of object -> xmalloc -> malloc), as in many real interpreters.
 * `calc --generate FUNCS SEED` prints a program to run with
 * `calc ROUNDS < program`: functions in three levels (leaves that do
 * arithmetic, build strings from numbers, cache results in global dicts or
 * use a dict as a record; middle ones that build and drop lists and dicts
 * and count strings in global dicts; top ones that walk global lists), a
 * main loop of arg(0) rounds. Running it makes and frees every kind below
 * but nodes and symbols (made while parsing), interleaved, millions of times.
 *
 * The language:
 *   program := stmt*            # comments run to the end of the line
 *   stmt    := def NAME(NAME, ...) { stmt* }
 *            | if expr { ... } [else { ... } | else if ...]
 *            | while expr { ... } | repeat expr { ... } | for NAME in expr { ... }
 *            | return [expr]; | print expr, ...; | TARGET = expr; | expr;
 *   expr    := || && == != < <= > >= + - * / % unary - ! x[i] f(...) [a, b] (e)
 *              NUMBER "STRING" NAME
 *   builtins: arg(i) len(x) push(l, v) shift(l) range(n) abs(x) min(a, b) max(a, b)
 *             str(x) int(s) substr(s, i, n) join(l, sep)
 *             dict() get(d, k) put(d, k, v) has(d, k) del(d, k) keys(d)
 * Values are integers, strings, lists and dicts. Integers wrap; x / 0 and
 * x % 0 are 0. Strings ("..." with \n \t \" \\) are immutable. Lists and
 * dicts are shared by reference. + joins two lists, or two strings or a
 * string and an integer (written in decimal); == and != compare by content;
 * < <= > >= compare two integers or two strings. x[i] is a list's element, a
 * string's one-character string or a dict's value (an error if the key is
 * absent, where get gives 0); TARGET is NAME or x[i] of a list or dict. A dict
 * maps integers and strings (1 and "1" are different keys) to values and
 * keeps its keys in insertion order; `for k in d` goes through them (the
 * dict may not gain or lose keys meanwhile), a for over a list through its
 * elements (the list may not change meanwhile). len takes a string, list or dict; str(x) writes
 * an integer, int(s) reads one (0 if none); substr clamps to the string; join
 * writes a list's integers and strings with sep between; put returns the
 * dict's size, del 1 if the key was there, keys a fresh list. True is a
 * non-zero integer or a non-empty string, list or dict. A function's
 * parameters live in its call's argument vector; assignment in a function
 * sets a parameter, else a global of that name if there is one, else a local.
 * Cycles (a list inside itself) are not collected.
 *
 * The kinds of objects (allocation function: what, size on LP64):
 *   node_alloc     AST node, 72 bytes       symbol_alloc   name, 17 + length
 *   num_alloc      boxed integer, 16        str_alloc      string, 32
 *   chars_alloc    a string's characters, length + 1
 *   list_alloc     list, 40                 cell_alloc     list cell, 16
 *   dict_alloc     dict, 56                 entry_alloc    dict entry, 48
 *   buckets_alloc  a dict's buckets, 8 x (4, 8, 16, ...), doubled as it grows
 *   args_alloc     argument vector, 8 + 8 x arguments
 *   frame_alloc    call frame, 24           binding_alloc  variable, 24
 * Usage: calc [ARGS...] < program. Prints what the program prints, then a
 * checksum of it; everything is freed before exit. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static long line = 1;

NOINLINE static void die(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fflush(stdout);
  fprintf(stderr, "calc: line %ld: ", line);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(status);
}

/* ---- allocation: two levels of wrappers ---------------------------------- */

NOINLINE static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) { fputs("calc: out of memory\n", stderr); exit(1); }
  return p;
}
NOINLINE static void xfree(void *p) { free(p); }

enum { N_NUM, N_STR, N_VAR, N_LIST, N_INDEX, N_CALL, N_BIN, N_NEG, N_NOT, N_AND, N_OR,
       N_ASSIGN, N_EXPR, N_IF, N_WHILE, N_REPEAT, N_FOR, N_RETURN, N_PRINT, N_BLOCK, N_DEF };
enum { B_NONE, B_ARG, B_LEN, B_PUSH, B_SHIFT, B_RANGE, B_ABS, B_MIN, B_MAX, B_STR, B_INT,
       B_SUBSTR, B_JOIN, B_DICT, B_GET, B_PUT, B_HAS, B_DEL, B_KEYS };
enum { V_INT, V_STR, V_LIST, V_DICT };
static const char *const kind_names[] = {"an integer", "a string", "a list", "a dict"};

struct symbol { struct symbol *next; struct node *func; char name[]; };
/* op: a call's builtin, a def's parameter count, or for a NAME (N_VAR, N_FOR)
 * inside a def, 1 + the index of the parameter of that name (0: none) */
struct node { int kind, op, line; long num; struct symbol *sym; struct value *val; struct node *a, *b, *c, *next; };
struct value { int kind, refs; };                         /* the head of every value */
struct num { struct value h; long n; };
struct str { struct value h; long len; unsigned long hash; char *chars; };   /* hash 0: not yet */
struct list { struct value h; int iterating; long n; struct cell *head, *tail; };
struct dict { struct value h; int iterating; long count, cap; struct entry **buckets, *first, *last; };
struct cell { struct cell *next; struct value *v; };
struct entry { struct entry *chain, *prev, *next; struct value *key, *v; unsigned long hash; };
struct binding { struct binding *next; struct symbol *sym; struct value *v; };
struct args { long n; struct value *v[]; };
struct frame { struct binding *vars; struct args *args; long depth; };

#define NUM(x) ((struct num *)(x))
#define STR(x) ((struct str *)(x))
#define LIST(x) ((struct list *)(x))
#define DICT(x) ((struct dict *)(x))

NOINLINE static struct node *node_alloc(int kind) {
  struct node *n = xmalloc(sizeof *n);
  memset(n, 0, sizeof *n);
  n->kind = kind;
  n->line = (int)line;
  return n;
}
NOINLINE static struct symbol *symbol_alloc(const char *name, size_t len) {
  struct symbol *s = xmalloc(sizeof *s + len + 1);
  memcpy(s->name, name, len);
  s->name[len] = 0;
  s->func = NULL; s->next = NULL;
  return s;
}
NOINLINE static struct num *num_alloc(long n) {
  struct num *v = xmalloc(sizeof *v);
  v->h.kind = V_INT; v->h.refs = 1; v->n = n;
  return v;
}
NOINLINE static struct str *str_alloc(long len) {
  struct str *s = xmalloc(sizeof *s);
  s->h.kind = V_STR; s->h.refs = 1; s->len = len; s->hash = 0; s->chars = NULL;
  return s;
}
NOINLINE static char *chars_alloc(long len) {
  char *c = xmalloc((size_t)len + 1);
  c[len] = 0;
  return c;
}
NOINLINE static struct list *list_alloc(void) {
  struct list *l = xmalloc(sizeof *l);
  l->h.kind = V_LIST; l->h.refs = 1; l->iterating = 0; l->n = 0;
  l->head = l->tail = NULL;
  return l;
}
NOINLINE static struct cell *cell_alloc(struct value *v) {
  struct cell *c = xmalloc(sizeof *c);
  c->next = NULL; c->v = v;
  return c;
}
NOINLINE static struct dict *dict_alloc(void) {
  struct dict *d = xmalloc(sizeof *d);
  d->h.kind = V_DICT; d->h.refs = 1; d->iterating = 0; d->count = d->cap = 0;
  d->buckets = NULL; d->first = d->last = NULL;
  return d;
}
NOINLINE static struct entry **buckets_alloc(long cap) {
  struct entry **b = xmalloc((size_t)cap * sizeof *b);
  memset(b, 0, (size_t)cap * sizeof *b);
  return b;
}
NOINLINE static struct entry *entry_alloc(struct value *key, struct value *v, unsigned long hash) {
  struct entry *e = xmalloc(sizeof *e);
  e->chain = e->prev = e->next = NULL;
  e->key = key; e->v = v; e->hash = hash;
  return e;
}
NOINLINE static struct args *args_alloc(long n) {
  struct args *a = xmalloc(sizeof *a + (size_t)n * sizeof a->v[0]);
  a->n = n;
  return a;
}
NOINLINE static struct frame *frame_alloc(long depth, struct args *args) {
  struct frame *f = xmalloc(sizeof *f);
  f->vars = NULL; f->args = args; f->depth = depth;
  return f;
}
NOINLINE static struct binding *binding_alloc(struct symbol *sym, struct value *v) {
  struct binding *b = xmalloc(sizeof *b);
  b->sym = sym; b->v = v; b->next = NULL;
  return b;
}

/* ---- values --------------------------------------------------------------- */

static struct value *new_int(long n) { return &num_alloc(n)->h; }
static struct str *new_str(long len) {                     /* characters to fill in */
  struct str *s = str_alloc(len);
  s->chars = chars_alloc(len);
  return s;
}
static struct value *str_of(const char *p, long len) {
  struct str *s = new_str(len);
  memcpy(s->chars, p, (size_t)len);
  return &s->h;
}
static struct value *incref(struct value *v) { v->refs++; return v; }
static void free_value(struct value *v);
static void decref(struct value *v) { if (--v->refs == 0) free_value(v); }

static void free_value(struct value *v) {
  switch (v->kind) {
  case V_STR: xfree(STR(v)->chars); break;
  case V_LIST:
    for (struct cell *c = LIST(v)->head, *next; c; c = next) { next = c->next; decref(c->v); xfree(c); }
    break;
  case V_DICT:
    for (struct entry *e = DICT(v)->first, *next; e; e = next) {
      next = e->next; decref(e->key); decref(e->v); xfree(e);
    }
    xfree(DICT(v)->buckets);
    break;
  }
  xfree(v);
}

static long as_int(struct value *v, const char *what) {
  if (v->kind != V_INT) die(1, "%s needs an integer, not %s", what, kind_names[v->kind]);
  return NUM(v)->n;
}
static struct str *as_str(struct value *v, const char *what) {
  if (v->kind != V_STR) die(1, "%s needs a string, not %s", what, kind_names[v->kind]);
  return STR(v);
}
static struct list *as_list(struct value *v, const char *what) {
  if (v->kind != V_LIST) die(1, "%s needs a list, not %s", what, kind_names[v->kind]);
  return LIST(v);
}
static struct dict *as_dict(struct value *v, const char *what) {
  if (v->kind != V_DICT) die(1, "%s needs a dict, not %s", what, kind_names[v->kind]);
  return DICT(v);
}

static int format_int(char *buf, long n) {               /* buf: 24 bytes; no NUL */
  char tmp[24];
  int k = 0, len = 0;
  unsigned long u = n < 0 ? 0 - (unsigned long)n : (unsigned long)n;
  do { tmp[k++] = (char)('0' + u % 10); u /= 10; } while (u);
  if (n < 0) buf[len++] = '-';
  while (k) buf[len++] = tmp[--k];
  return len;
}
/* the text of an integer (written into buf) or of a string */
static long text(struct value *v, char *buf, const char **p, const char *what) {
  if (v->kind == V_STR) { *p = STR(v)->chars; return STR(v)->len; }
  if (v->kind != V_INT) die(1, "%s needs integers and strings, not %s", what, kind_names[v->kind]);
  *p = buf;
  return format_int(buf, NUM(v)->n);
}
static struct value *concat(struct value *a, struct value *b) {
  char ba[24], bb[24];
  const char *pa, *pb;
  long la = text(a, ba, &pa, "+"), lb = text(b, bb, &pb, "+");
  struct str *s = new_str(la + lb);
  memcpy(s->chars, pa, (size_t)la);
  memcpy(s->chars + la, pb, (size_t)lb);
  return &s->h;
}
static int str_compare(struct str *a, struct str *b) {
  int c = memcmp(a->chars, b->chars, (size_t)(a->len < b->len ? a->len : b->len));
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

static void append(struct list *l, struct value *v) {      /* takes v's reference */
  if (l->iterating) die(1, "list changed inside a for over it");
  struct cell *c = cell_alloc(v);
  if (l->tail) l->tail->next = c; else l->head = c;
  l->tail = c;
  l->n++;
}
static struct cell *nth(struct list *l, long i) {
  if (i < 0 || i >= l->n) die(1, "index %ld out of range (length %ld)", i, l->n);
  struct cell *c = l->head;
  while (i-- > 0) c = c->next;
  return c;
}

/* dicts: chained buckets (a power of two of them, grown at 3/4 full) and
 * the entries in insertion order */
static unsigned long hash_key(struct value *k) {
  if (k->kind == V_INT) {
    unsigned long h = (unsigned long)NUM(k)->n * 0x9E3779B97F4A7C15ul;
    return h ^ (h >> 29);
  }
  if (k->kind != V_STR) die(1, "a dict key must be an integer or a string, not %s", kind_names[k->kind]);
  struct str *s = STR(k);
  if (!s->hash) {
    unsigned long h = 14695981039346656037ul;
    for (long i = 0; i < s->len; i++) h = (h ^ (unsigned char)s->chars[i]) * 1099511628211ul;
    s->hash = h ? h : 1;
  }
  return s->hash;
}
static int same_key(struct value *a, struct value *b) {
  if (a->kind != b->kind) return 0;
  if (a->kind == V_INT) return NUM(a)->n == NUM(b)->n;
  return STR(a)->len == STR(b)->len && memcmp(STR(a)->chars, STR(b)->chars, (size_t)STR(a)->len) == 0;
}
static struct entry *dict_find(struct dict *d, struct value *k) {
  unsigned long h = hash_key(k);
  if (!d->cap) return NULL;
  for (struct entry *e = d->buckets[h & (unsigned long)(d->cap - 1)]; e; e = e->chain)
    if (e->hash == h && same_key(e->key, k)) return e;
  return NULL;
}
static void dict_grow(struct dict *d) {
  long cap = d->cap ? d->cap * 2 : 4;
  struct entry **b = buckets_alloc(cap);
  for (struct entry *e = d->first; e; e = e->next) {
    struct entry **slot = &b[e->hash & (unsigned long)(cap - 1)];
    e->chain = *slot; *slot = e;
  }
  xfree(d->buckets);
  d->buckets = b;
  d->cap = cap;
}
static void dict_put(struct dict *d, struct value *k, struct value *v) {   /* takes v's reference */
  struct entry *e = dict_find(d, k);
  if (e) { struct value *old = e->v; e->v = v; decref(old); return; }
  if (d->iterating) die(1, "dict changed inside a for over it");
  if (d->count >= d->cap - d->cap / 4) dict_grow(d);
  unsigned long h = hash_key(k);
  e = entry_alloc(incref(k), v, h);
  struct entry **slot = &d->buckets[h & (unsigned long)(d->cap - 1)];
  e->chain = *slot; *slot = e;
  e->prev = d->last;
  if (d->last) d->last->next = e; else d->first = e;
  d->last = e;
  d->count++;
}
static int dict_del(struct dict *d, struct value *k) {
  unsigned long h = hash_key(k);
  if (!d->cap) return 0;
  for (struct entry **p = &d->buckets[h & (unsigned long)(d->cap - 1)], *e; (e = *p); p = &e->chain) {
    if (e->hash != h || !same_key(e->key, k)) continue;
    if (d->iterating) die(1, "dict changed inside a for over it");
    *p = e->chain;
    if (e->prev) e->prev->next = e->next; else d->first = e->next;
    if (e->next) e->next->prev = e->prev; else d->last = e->prev;
    d->count--;
    decref(e->key); decref(e->v); xfree(e);
    return 1;
  }
  return 0;
}

static int truthy(struct value *v) {                      /* non-zero, or not empty */
  switch (v->kind) {
  case V_INT: return NUM(v)->n != 0;
  case V_STR: return STR(v)->len != 0;
  case V_LIST: return LIST(v)->n != 0;
  default: return DICT(v)->count != 0;
  }
}
static int equal(struct value *a, struct value *b) {
  if (a->kind != b->kind) return 0;
  switch (a->kind) {
  case V_INT: case V_STR: return same_key(a, b);
  case V_LIST:
    if (LIST(a)->n != LIST(b)->n) return 0;
    for (struct cell *x = LIST(a)->head, *y = LIST(b)->head; x; x = x->next, y = y->next)
      if (!equal(x->v, y->v)) return 0;
    return 1;
  default:
    if (DICT(a)->count != DICT(b)->count) return 0;
    for (struct entry *e = DICT(a)->first; e; e = e->next) {
      struct entry *f = dict_find(DICT(b), e->key);
      if (!f || !equal(e->v, f->v)) return 0;
    }
    return 1;
  }
}

/* ---- lexer ------------------------------------------------------------------ */

enum { T_EOF = 256, T_NUM, T_STR, T_NAME, T_DEF, T_IF, T_ELSE, T_WHILE, T_REPEAT, T_FOR, T_IN, T_RETURN,
       T_PRINT, T_EQ, T_NE, T_LE, T_GE, T_AND, T_OR };
static const char *keywords[] = {"def", "if", "else", "while", "repeat", "for", "in", "return", "print"};

#define SYMBOLS 1024
static struct symbol *symbols[SYMBOLS];
static char *src;
static long pos;
static int tok;
static long tok_num;
static struct symbol *tok_sym;
static struct value *tok_str;       /* a string literal's value, until the parser takes it */

static struct symbol *intern(const char *name, size_t len) {
  unsigned long h = 14695981039346656037ul;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)name[i]) * 1099511628211ul;
  struct symbol **b = &symbols[h % SYMBOLS];
  for (struct symbol *s = *b; s; s = s->next)
    if (strlen(s->name) == len && memcmp(s->name, name, len) == 0) return s;
  struct symbol *s = symbol_alloc(name, len);
  s->next = *b; *b = s;
  return s;
}

static void string_literal(void) {                       /* at the opening quote */
  long len = 0;
  for (long p = ++pos; src[p] != '"'; p++, len++) {
    if (src[p] == '\\' && src[p + 1] && src[p + 1] != '\n') p++;
    else if (!src[p] || src[p] == '\n') die(2, "unterminated string");
  }
  struct str *s = new_str(len);
  for (long k = 0; k < len; k++) {
    char c = src[pos++];
    if (c == '\\') { c = src[pos++]; c = c == 'n' ? '\n' : c == 't' ? '\t' : c; }
    s->chars[k] = c;
  }
  pos++;
  tok = T_STR; tok_str = &s->h;
}

static void next(void) {
  for (;;) {
    while (isspace((unsigned char)src[pos])) { if (src[pos] == '\n') line++; pos++; }
    if (src[pos] != '#') break;
    while (src[pos] && src[pos] != '\n') pos++;
  }
  char c = src[pos];
  if (!c) { tok = T_EOF; return; }
  if (isdigit((unsigned char)c)) {
    unsigned long n = 0;
    while (isdigit((unsigned char)src[pos])) n = n * 10 + (unsigned long)(src[pos++] - '0');
    tok = T_NUM; tok_num = (long)n;
    return;
  }
  if (c == '"') { string_literal(); return; }
  if (isalpha((unsigned char)c) || c == '_') {
    long start = pos;
    while (isalnum((unsigned char)src[pos]) || src[pos] == '_') pos++;
    size_t len = (size_t)(pos - start);
    for (int k = 0; k < (int)(sizeof keywords / sizeof *keywords); k++)
      if (strlen(keywords[k]) == len && memcmp(keywords[k], src + start, len) == 0) { tok = T_DEF + k; return; }
    tok = T_NAME; tok_sym = intern(src + start, len);
    return;
  }
  static const struct { char text[3]; int tok; } twos[] = {
    {"==", T_EQ}, {"!=", T_NE}, {"<=", T_LE}, {">=", T_GE}, {"&&", T_AND}, {"||", T_OR}};
  for (int k = 0; k < 6; k++)
    if (c == twos[k].text[0] && src[pos + 1] == twos[k].text[1]) { pos += 2; tok = twos[k].tok; return; }
  if (!strchr("(){}[],;=<>+-*/%!", c)) die(2, "unexpected character '%c'", c);
  pos++;
  tok = c;
}

static void expect(int t, const char *what) {
  if (tok != t) die(2, "expected %s", what);
  next();
}

/* ---- parser ------------------------------------------------------------------- */

static struct node *expr(void);
static struct node *statement(void);

static const char *const builtin_names[] = {"", "arg", "len", "push", "shift", "range", "abs", "min", "max",
  "str", "int", "substr", "join", "dict", "get", "put", "has", "del", "keys"};
static const int builtin_arity[] = {0, 1, 1, 2, 1, 1, 1, 2, 2, 1, 1, 3, 2, 0, 2, 3, 2, 2, 1};

static int builtin(const struct symbol *s) {
  for (int k = 1; k < (int)(sizeof builtin_names / sizeof *builtin_names); k++)
    if (strcmp(s->name, builtin_names[k]) == 0) return k;
  return B_NONE;
}

static struct node *params;          /* the parameters of the def being parsed */
static int param_of(const struct symbol *s) {
  int k = 1;
  for (struct node *p = params; p; p = p->next, k++)
    if (p->sym == s) return k;
  return 0;
}

static struct node *expr_list(int close, long *count) {   /* after the opening bracket */
  struct node *first = NULL, **tail = &first;
  *count = 0;
  if (tok != close) {
    for (;;) {
      *tail = expr(); tail = &(*tail)->next; (*count)++;
      if (tok != ',') break;
      next();
    }
  }
  expect(close, close == ')' ? "')'" : "']'");
  return first;
}

static struct node *primary(void) {
  struct node *n;
  long count;
  if (tok == T_NUM) {
    n = node_alloc(N_NUM); n->num = tok_num; next();
  } else if (tok == T_STR) {
    n = node_alloc(N_STR); n->val = tok_str; tok_str = NULL; next();
  } else if (tok == T_NAME) {
    struct symbol *s = tok_sym;
    next();
    if (tok == '(') {
      next();
      n = node_alloc(N_CALL); n->sym = s; n->op = builtin(s);
      n->a = expr_list(')', &count);
      n->num = count;
    } else {
      n = node_alloc(N_VAR); n->sym = s; n->op = param_of(s);
    }
  } else if (tok == '[') {
    next();
    n = node_alloc(N_LIST);
    n->a = expr_list(']', &count);
  } else if (tok == '(') {
    next();
    n = expr();
    expect(')', "')'");
  } else {
    die(2, "expected an expression");
  }
  while (tok == '[') {
    next();
    struct node *ix = node_alloc(N_INDEX);
    ix->a = n; ix->b = expr();
    expect(']', "']'");
    n = ix;
  }
  return n;
}

static struct node *unary(void) {
  if (tok == '-' || tok == '!') {
    struct node *n = node_alloc(tok == '-' ? N_NEG : N_NOT);
    next();
    n->a = unary();
    return n;
  }
  return primary();
}

static struct node *binary(int kind, int op, struct node *a, struct node *b) {
  struct node *n = node_alloc(kind);
  n->op = op; n->a = a; n->b = b;
  return n;
}

static struct node *product(void) {
  struct node *n = unary();
  while (tok == '*' || tok == '/' || tok == '%') { int op = tok; next(); n = binary(N_BIN, op, n, unary()); }
  return n;
}
static struct node *sum(void) {
  struct node *n = product();
  while (tok == '+' || tok == '-') { int op = tok; next(); n = binary(N_BIN, op, n, product()); }
  return n;
}
static struct node *comparison(void) {
  struct node *n = sum();
  if (tok == T_EQ || tok == T_NE || tok == '<' || tok == '>' || tok == T_LE || tok == T_GE) {
    int op = tok; next(); n = binary(N_BIN, op, n, sum());
  }
  return n;
}
static struct node *conjunction(void) {
  struct node *n = comparison();
  while (tok == T_AND) { next(); n = binary(N_AND, 0, n, comparison()); }
  return n;
}
static struct node *expr(void) {
  struct node *n = conjunction();
  while (tok == T_OR) { next(); n = binary(N_OR, 0, n, conjunction()); }
  return n;
}

static struct node *block(void) {
  expect('{', "'{'");
  struct node *b = node_alloc(N_BLOCK), **tail = &b->a;
  while (tok != '}') {
    if (tok == T_EOF) die(2, "missing '}'");
    *tail = statement(); tail = &(*tail)->next;
  }
  next();
  return b;
}

static struct node *statement(void) {
  struct node *n;
  switch (tok) {
  case T_DEF: {
    next();
    if (tok != T_NAME) die(2, "expected a function name");
    n = node_alloc(N_DEF); n->sym = tok_sym;
    if (builtin(n->sym)) die(2, "%s is a builtin", n->sym->name);
    if (n->sym->func) die(2, "%s defined twice", n->sym->name);
    next();
    expect('(', "'('");
    struct node *outer = params, **tail = &n->a;
    long count = 0;
    params = NULL;
    while (tok == T_NAME) {
      params = n->a;
      if (param_of(tok_sym)) die(2, "parameter %s named twice", tok_sym->name);
      *tail = node_alloc(N_VAR); (*tail)->sym = tok_sym; tail = &(*tail)->next; count++;
      next();
      if (tok != ',') break;
      next();
    }
    expect(')', "')'");
    n->op = (int)count;
    params = n->a;
    n->b = block();
    params = outer;
    n->sym->func = n;
    return n;
  }
  case T_IF:
    next();
    n = node_alloc(N_IF); n->a = expr(); n->b = block();
    if (tok == T_ELSE) { next(); n->c = tok == T_IF ? statement() : block(); }
    return n;
  case T_WHILE: case T_REPEAT:
    n = node_alloc(tok == T_WHILE ? N_WHILE : N_REPEAT);
    next();
    n->a = expr(); n->b = block();
    return n;
  case T_FOR:
    next();
    if (tok != T_NAME) die(2, "expected a name after for");
    n = node_alloc(N_FOR); n->sym = tok_sym; n->op = param_of(tok_sym);
    next();
    expect(T_IN, "in");
    n->a = expr(); n->b = block();
    return n;
  case T_RETURN:
    next();
    n = node_alloc(N_RETURN);
    if (tok != ';') n->a = expr();
    expect(';', "';'");
    return n;
  case T_PRINT: {
    next();
    n = node_alloc(N_PRINT);
    struct node **tail = &n->a;
    for (;;) { *tail = expr(); tail = &(*tail)->next; if (tok != ',') break; next(); }
    expect(';', "';'");
    return n;
  }
  default: {
    struct node *e = expr();
    if (tok == '=') {
      if (e->kind != N_VAR && e->kind != N_INDEX) die(2, "cannot assign to that");
      next();
      n = node_alloc(N_ASSIGN); n->a = e; n->b = expr();
    } else {
      n = node_alloc(N_EXPR); n->a = e;
    }
    expect(';', "';'");
    return n;
  }
  }
}

static void release(struct node *n) {
  while (n) {
    struct node *next = n->next;
    release(n->a); release(n->b); release(n->c);
    if (n->val) decref(n->val);
    xfree(n);
    n = next;
  }
}

/* ---- evaluation ------------------------------------------------------------------ */

static struct frame *globals, *current;
static struct value *retval;
static int nargs;
static char **prog_args;
static unsigned long steps, calls, check;

static struct binding *find(struct frame *f, struct symbol *s) {
  for (struct binding *b = f->vars; b; b = b->next)
    if (b->sym == s) return b;
  return NULL;
}
static struct binding *lookup(struct symbol *s) {
  struct binding *b = find(current, s);
  return b || current == globals ? b : find(globals, s);
}
static void assign(struct node *target, struct value *v) {  /* a NAME; takes v's reference */
  struct value **slot;
  if (target->op) {
    slot = &current->args->v[target->op - 1];
  } else {
    struct binding *b = lookup(target->sym);
    if (!b) { b = binding_alloc(target->sym, v); b->next = current->vars; current->vars = b; return; }
    slot = &b->v;
  }
  struct value *old = *slot;
  *slot = v;
  decref(old);
}

static struct value *eval(struct node *n);
static int exec(struct node *n);

static long arith(int op, long a, long b) {
  unsigned long x = (unsigned long)a, y = (unsigned long)b;
  switch (op) {
  case '+': return (long)(x + y);
  case '-': return (long)(x - y);
  case '*': return (long)(x * y);
  case '/': return b == 0 ? 0 : b == -1 ? (long)(0 - x) : a / b;
  case '%': return b == 0 || b == -1 ? 0 : a % b;
  case '<': return a < b;
  case '>': return a > b;
  case T_LE: return a <= b;
  case T_GE: return a >= b;
  }
  die(1, "bad operator");
  return 0;
}

static struct value *binop(int op, struct value *a, struct value *b) {
  if (op == T_EQ || op == T_NE) return new_int(equal(a, b) == (op == T_EQ));
  if (op == '+' && (a->kind == V_STR || b->kind == V_STR)) return concat(a, b);
  if (op == '+' && a->kind == V_LIST && b->kind == V_LIST) {
    struct list *l = list_alloc();
    for (struct cell *c = LIST(a)->head; c; c = c->next) append(l, incref(c->v));
    for (struct cell *c = LIST(b)->head; c; c = c->next) append(l, incref(c->v));
    return &l->h;
  }
  if (a->kind == V_STR && b->kind == V_STR && (op == '<' || op == '>' || op == T_LE || op == T_GE))
    return new_int(arith(op, str_compare(STR(a), STR(b)), 0));
  return new_int(arith(op, as_int(a, "arithmetic"), as_int(b, "arithmetic")));
}

static struct value *index_value(struct value *a, struct value *i) {
  switch (a->kind) {
  case V_LIST: return incref(nth(LIST(a), as_int(i, "an index"))->v);
  case V_STR: {
    long k = as_int(i, "an index");
    if (k < 0 || k >= STR(a)->len) die(1, "index %ld out of range (length %ld)", k, STR(a)->len);
    return str_of(STR(a)->chars + k, 1);
  }
  case V_DICT: {
    struct entry *e = dict_find(DICT(a), i);
    if (!e) {
      if (i->kind == V_INT) die(1, "key %ld not in the dict", NUM(i)->n);
      die(1, "key \"%s\" not in the dict", STR(i)->chars);
    }
    return incref(e->v);
  }
  }
  die(1, "indexing needs a list, a string or a dict, not %s", kind_names[a->kind]);
  return NULL;
}

static struct value *call_builtin(struct node *n) {
  struct value *v[3] = {NULL, NULL, NULL}, *r;
  const char *name = n->sym->name;
  if (n->num != builtin_arity[n->op]) die(1, "%s takes %d argument(s)", name, builtin_arity[n->op]);
  int k = 0;
  for (struct node *a = n->a; a; a = a->next) v[k++] = eval(a);
  switch (n->op) {
  case B_ARG: { long i = as_int(v[0], "arg"); r = new_int(i >= 0 && i < nargs ? atol(prog_args[i]) : 0); break; }
  case B_LEN:
    switch (v[0]->kind) {
    case V_STR: r = new_int(STR(v[0])->len); break;
    case V_LIST: r = new_int(LIST(v[0])->n); break;
    case V_DICT: r = new_int(DICT(v[0])->count); break;
    default: die(1, "len needs a string, a list or a dict, not %s", kind_names[v[0]->kind]); r = NULL;
    }
    break;
  case B_PUSH: append(as_list(v[0], "push"), incref(v[1])); r = new_int(LIST(v[0])->n); break;
  case B_SHIFT: {
    struct list *l = as_list(v[0], "shift");
    if (!l->head) die(1, "shift from an empty list");
    if (l->iterating) die(1, "list changed inside a for over it");
    struct cell *c = l->head;
    l->head = c->next;
    if (!l->head) l->tail = NULL;
    l->n--;
    r = c->v;
    xfree(c);
    break;
  }
  case B_RANGE: {
    long m = as_int(v[0], "range");
    struct list *l = list_alloc();
    for (long i = 0; i < m; i++) append(l, new_int(i));
    r = &l->h;
    break;
  }
  case B_ABS: { long x = as_int(v[0], "abs"); r = new_int(x < 0 ? (long)(0 - (unsigned long)x) : x); break; }
  case B_MIN: case B_MAX: {
    long x = as_int(v[0], name), y = as_int(v[1], name);
    r = new_int((n->op == B_MIN) == (x < y) ? x : y);
    break;
  }
  case B_STR: {
    char buf[24];
    const char *p;
    long len = text(v[0], buf, &p, "str");
    r = v[0]->kind == V_STR ? incref(v[0]) : str_of(p, len);
    break;
  }
  case B_INT: {
    if (v[0]->kind == V_INT) { r = incref(v[0]); break; }
    const char *p = as_str(v[0], "int")->chars;
    int negative = *p == '-';
    unsigned long x = 0;
    for (p += negative; isdigit((unsigned char)*p); p++) x = x * 10 + (unsigned long)(*p - '0');
    r = new_int((long)(negative ? 0 - x : x));
    break;
  }
  case B_SUBSTR: {
    struct str *s = as_str(v[0], "substr");
    long i = as_int(v[1], "substr"), m = as_int(v[2], "substr");
    i = i < 0 ? 0 : i > s->len ? s->len : i;
    m = m < 0 ? 0 : m > s->len - i ? s->len - i : m;
    r = str_of(s->chars + i, m);
    break;
  }
  case B_JOIN: {
    struct list *l = as_list(v[0], "join");
    struct str *sep = as_str(v[1], "join");
    char buf[24];
    const char *p;
    long len = l->n > 0 ? (l->n - 1) * sep->len : 0, at = 0;
    for (struct cell *c = l->head; c; c = c->next) len += text(c->v, buf, &p, "join");
    struct str *s = new_str(len);
    for (struct cell *c = l->head; c; c = c->next) {
      long m = text(c->v, buf, &p, "join");
      memcpy(s->chars + at, p, (size_t)m); at += m;
      if (c->next) { memcpy(s->chars + at, sep->chars, (size_t)sep->len); at += sep->len; }
    }
    r = &s->h;
    break;
  }
  case B_DICT: r = &dict_alloc()->h; break;
  case B_GET: { struct entry *e = dict_find(as_dict(v[0], "get"), v[1]); r = e ? incref(e->v) : new_int(0); break; }
  case B_PUT: dict_put(as_dict(v[0], "put"), v[1], incref(v[2])); r = new_int(DICT(v[0])->count); break;
  case B_HAS: r = new_int(dict_find(as_dict(v[0], "has"), v[1]) != NULL); break;
  case B_DEL: r = new_int(dict_del(as_dict(v[0], "del"), v[1])); break;
  case B_KEYS: {
    struct list *l = list_alloc();
    for (struct entry *e = as_dict(v[0], "keys")->first; e; e = e->next) append(l, incref(e->key));
    r = &l->h;
    break;
  }
  default: die(1, "bad builtin"); r = NULL;
  }
  for (k = 0; k < 3; k++) if (v[k]) decref(v[k]);
  return r;
}

static struct value *call(struct node *n) {
  if (n->op) return call_builtin(n);
  struct node *f = n->sym->func;
  if (!f) die(1, "no function %s", n->sym->name);
  if (n->num != f->op) die(1, "%s takes %d argument(s)", n->sym->name, f->op);
  if (current->depth > 2000) die(1, "calls nested too deeply");
  calls++;
  struct args *av = args_alloc(f->op);
  long k = 0;
  for (struct node *a = n->a; a; a = a->next) av->v[k++] = eval(a);
  struct frame *fr = frame_alloc(current->depth + 1, av), *saved = current;
  current = fr;
  struct value *r = NULL;
  if (exec(f->b)) { r = retval; retval = NULL; }
  current = saved;
  for (struct binding *b = fr->vars, *next; b; b = next) { next = b->next; decref(b->v); xfree(b); }
  for (k = 0; k < av->n; k++) decref(av->v[k]);
  xfree(av);
  xfree(fr);
  return r ? r : new_int(0);
}

static struct value *eval(struct node *n) {
  struct value *a, *b, *r;
  switch (n->kind) {
  case N_NUM: return new_int(n->num);
  case N_STR: return incref(n->val);
  case N_VAR: {
    if (n->op) return incref(current->args->v[n->op - 1]);
    struct binding *bd = lookup(n->sym);
    if (!bd) die(1, "%s is not set", n->sym->name);
    return incref(bd->v);
  }
  case N_LIST: {
    struct list *l = list_alloc();
    for (struct node *e = n->a; e; e = e->next) append(l, eval(e));
    return &l->h;
  }
  case N_INDEX:
    a = eval(n->a); b = eval(n->b);
    r = index_value(a, b);
    decref(a); decref(b);
    return r;
  case N_CALL: return call(n);
  case N_BIN:
    a = eval(n->a); b = eval(n->b);
    r = binop(n->op, a, b);
    decref(a); decref(b);
    return r;
  case N_NEG: a = eval(n->a); r = new_int((long)(0 - (unsigned long)as_int(a, "-"))); decref(a); return r;
  case N_NOT: a = eval(n->a); r = new_int(!truthy(a)); decref(a); return r;
  case N_AND: case N_OR: {
    a = eval(n->a);
    int t = truthy(a);
    decref(a);
    if (t == (n->kind == N_OR)) return new_int(t);
    b = eval(n->b);
    t = truthy(b);
    decref(b);
    return new_int(t);
  }
  }
  die(1, "not an expression");
  return NULL;
}

static void print_value(struct value *v, int depth) {    /* strings quoted inside lists and dicts */
  switch (v->kind) {
  case V_INT:
    printf("%ld", NUM(v)->n);
    check = check * 1000003 + (unsigned long)NUM(v)->n;
    return;
  case V_STR: {
    struct str *s = STR(v);
    if (depth) putchar('"');
    fwrite(s->chars, 1, (size_t)s->len, stdout);
    if (depth) putchar('"');
    for (long k = 0; k < s->len; k++) check = check * 257 + (unsigned char)s->chars[k];
    check = check * 1000003 + (unsigned long)s->len + 3;
    return;
  }
  case V_LIST:
    check = check * 31 + (unsigned long)LIST(v)->n + 7;
    if (depth > 8) { fputs("[...]", stdout); return; }
    putchar('[');
    for (struct cell *c = LIST(v)->head; c; c = c->next) {
      print_value(c->v, depth + 1);
      if (c->next) fputs(", ", stdout);
    }
    putchar(']');
    return;
  default:
    check = check * 37 + (unsigned long)DICT(v)->count + 11;
    if (depth > 8) { fputs("{...}", stdout); return; }
    putchar('{');
    for (struct entry *e = DICT(v)->first; e; e = e->next) {
      print_value(e->key, depth + 1);
      fputs(": ", stdout);
      print_value(e->v, depth + 1);
      if (e->next) fputs(", ", stdout);
    }
    putchar('}');
  }
}

static int exec(struct node *n) {
  struct value *v;
  steps++;
  line = n->line;
  switch (n->kind) {
  case N_BLOCK:
    for (struct node *s = n->a; s; s = s->next)
      if (exec(s)) return 1;
    return 0;
  case N_DEF: return 0;
  case N_EXPR: decref(eval(n->a)); return 0;
  case N_ASSIGN:
    if (n->a->kind == N_VAR) { assign(n->a, eval(n->b)); return 0; }
    {
      struct value *c = eval(n->a->a), *i = eval(n->a->b);
      v = eval(n->b);
      if (c->kind == V_DICT) {
        dict_put(DICT(c), i, v);
      } else {
        struct list *l = as_list(c, "assigning to x[i]");
        if (l->iterating) die(1, "list changed inside a for over it");
        struct cell *cell = nth(l, as_int(i, "an index"));
        struct value *old = cell->v;
        cell->v = v;
        decref(old);
      }
      decref(i); decref(c);
    }
    return 0;
  case N_IF: {
    v = eval(n->a);
    int t = truthy(v);
    decref(v);
    if (t) return exec(n->b);
    return n->c ? exec(n->c) : 0;
  }
  case N_WHILE:
    for (;;) {
      v = eval(n->a);
      int t = truthy(v);
      decref(v);
      if (!t) return 0;
      if (exec(n->b)) return 1;
    }
  case N_REPEAT: {
    v = eval(n->a);
    long times = as_int(v, "repeat");
    decref(v);
    for (long k = 0; k < times; k++)
      if (exec(n->b)) return 1;
    return 0;
  }
  case N_FOR: {
    int done = 0;
    v = eval(n->a);
    if (v->kind == V_DICT) {
      struct dict *d = DICT(v);
      d->iterating++;
      for (struct entry *e = d->first; e && !done; e = e->next) {
        assign(n, incref(e->key));
        done = exec(n->b);
      }
      d->iterating--;
    } else {
      struct list *l = as_list(v, "for");
      l->iterating++;
      for (struct cell *c = l->head; c && !done; c = c->next) {
        assign(n, incref(c->v));
        done = exec(n->b);
      }
      l->iterating--;
    }
    decref(v);
    return done;
  }
  case N_RETURN:
    retval = n->a ? eval(n->a) : new_int(0);
    return 1;
  case N_PRINT:
    for (struct node *e = n->a; e; e = e->next) {
      v = eval(e);
      print_value(v, 0);
      decref(v);
      putchar(e->next ? ' ' : '\n');
    }
    return 0;
  }
  die(1, "not a statement");
  return 0;
}

/* ---- the program generator ----------------------------------------------------------- */

static unsigned long grng;
static long gr(long n) {
  grng = grng * 6364136223846793005ul + 1442695040888963407ul;
  return (long)((grng >> 33) % (unsigned long)n);
}

/* Random numbers are drawn one statement at a time, never two in one call's
 * arguments, so the program does not depend on the compiler's order. */
static void gen_expr(int depth, const char *const *vars, int nvars) {
  if (depth == 0 || gr(4) == 0) {
    if (gr(3)) printf("%s", vars[gr(nvars)]); else printf("%ld", 1 + gr(100));
    return;
  }
  switch (gr(5)) {
  case 0: case 1: printf("("); gen_expr(depth - 1, vars, nvars); printf(" + "); gen_expr(depth - 1, vars, nvars); printf(")"); break;
  case 2: printf("("); gen_expr(depth - 1, vars, nvars); printf(" - "); gen_expr(depth - 1, vars, nvars); printf(")"); break;
  case 3: printf("("); gen_expr(depth - 1, vars, nvars); printf(" * %ld)", 2 + gr(30)); break;
  default: printf("("); gen_expr(depth - 1, vars, nvars); printf(" %% %ld)", 3 + gr(997)); break;
  }
}

/* The f functions are leaves of four shapes: arithmetic (a, b), a string
 * builder (a, b, c), a cache in a global dict (a, b) and a record (a, b): a
 * dict used as an object with named fields. */
enum { F_ARITH, F_STRING, F_MEMO, F_RECORD };
#define MAX_FUNCS 4096
static char fshape[MAX_FUNCS / 2];

static void gen_fcall(long k, const char *x, const char *y, const char *third) {
  if (fshape[k] == F_STRING) printf("f%ld(%s, %s, %s)", k, x, y, third);
  else printf("f%ld(%s, %s)", k, x, y);
}

static long pick_f(long nf, int shape, int or_shape) {   /* an f of either shape if there is one */
  long k = gr(nf);
  for (long m = 0; m < nf; m++, k = (k + 1) % nf)
    if (fshape[k] == shape || fshape[k] == or_shape) return k;
  return k;
}

static const char *sep(void) {
  static const char *const seps[] = {":", "-", ".", "/", "+", "_", ",", "|"};
  return seps[gr(8)];
}
static char letter(char first) { return (char)(first + gr(26)); }

static void gen_f(long k, long nmemo) {
  static const char *const fvars[] = {"a", "b", "x", "y"};
  long r1, r2, r3;
  const char *s1;
  switch (fshape[k]) {
  case F_ARITH:
    printf("def f%ld(a, b) {\n  x = ", k);
    gen_expr(3, fvars, 2);
    printf(";\n  y = ");
    gen_expr(3, fvars, 3);
    r1 = 2 + gr(5);
    printf(" %% 10007;\n  if (x + y) %% %ld == ", r1);
    printf("%ld { return ", gr(2));
    gen_expr(2, fvars, 4);
    printf(" %% 100003; }\n  return ");
    gen_expr(3, fvars, 4);
    printf(" %% 100003;\n}\n");
    break;
  case F_STRING:
    r1 = 50 + gr(2000);
    r2 = 3 + gr(60);
    s1 = sep();
    printf("def f%ld(a, b, c) {\n  w = join([str(a %% %ld), b %% %ld, c], \"%s\")", k, r1, r2, s1);
    s1 = sep();
    printf(" + \"%s\" + b %% %ld;\n  x = ", s1, 2 + gr(9));
    gen_expr(3, fvars, 2);
    r1 = 4 + gr(6);
    r2 = gr(3);
    r3 = 2 + gr(5);
    printf(";\n  if len(w) > %ld { w = substr(w, %ld, %ld) + \"%c\" + len(w); }\n  y = ", r1, r2, r3, letter('a'));
    gen_expr(2, fvars, 3);
    r1 = 1 + gr(9);
    printf(" %% 10007;\n  if w[0] == \"%ld\" { y = y + %ld; }\n", r1, 1 + gr(50));
    r1 = 2 + gr(20);
    printf("  return (x + y + len(w) * %ld + int(substr(w, 0, %ld))) %% 100003;\n}\n", r1, 1 + gr(3));
    break;
  case F_RECORD:
    printf("def f%ld(a, b) {\n  o = dict();\n  o[\"x\"] = a %% %ld;\n  o[\"y\"] = ", k, 10 + gr(500));
    gen_expr(2, fvars, 2);
    r1 = letter('a');
    printf(";\n  o[\"name\"] = \"%c\" + b %% %ld;\n", (char)r1, 2 + gr(300));
    printf("  o[\"n\"] = o[\"x\"] + o[\"y\"] %% %ld + len(o[\"name\"]);\n", 50 + gr(1000));
    r1 = 2 + gr(3);
    printf("  if o[\"n\"] %% %ld == %ld { o[\"pair\"] = [o[\"x\"], o[\"name\"]]; }\n", r1, gr(2));
    printf("  return (o[\"n\"] * %ld + len(o)) %% 100003;\n}\n", 2 + gr(30));
    break;
  default: {                      /* F_MEMO: its own int keys, or string keys */
    long m = gr(nmemo), span = 200 + gr(600);
    printf("def f%ld(a, b) {\n", k);
    if (gr(2)) {
      printf("  key = %ld + (a * %ld + b) %% %ld;\n", k * 1000, 3 + gr(40), span);
    } else {
      r1 = letter('A');
      s1 = sep();
      printf("  key = \"%c\" + (a %% %ld) + \"%s\" + (b %% %ld);\n", (char)r1, span / 4, s1, 2 + gr(4));
    }
    printf("  if has(m%ld, key) { return (m%ld[key] + a %% %ld) %% 100003; }\n  x = ", m, m, 2 + gr(9));
    gen_expr(3, fvars, 2);
    printf(";\n  y = ");
    gen_expr(3, fvars, 3);
    printf(" %% 10007;\n  if len(m%ld) >= %ld { m%ld = dict(); }\n", m, span / 3 + gr(span / 2), m);
    printf("  m%ld[key] = (x + y) %% 100003;\n  return (x + y) %% 100003;\n}\n", m);
  }
  }
}

static int generate(long funcs, unsigned long seed) {
  if (funcs < 1 || funcs > MAX_FUNCS) { fprintf(stderr, "calc: FUNCS must be 1 to %d\n", MAX_FUNCS); return 2; }
  grng = seed * 2654435761ul + 1;
  long nf = funcs / 2 > 1 ? funcs / 2 : 1, ng = funcs / 4 > 1 ? funcs / 4 : 1, nh = funcs / 4 > 1 ? funcs / 4 : 1;
  long nlists = 3 + funcs / 8, nmemo = 1 + funcs / 16, ncount = 1 + funcs / 24;
  long r1, r2, r3;
  const char *s1;
  char arg[32];
  static const char *const gvars[] = {"a", "b", "s", "v"};
  printf("# calc program: calc --generate %ld %lu\n", funcs, seed);
  for (long k = 0; k < nf; k++) fshape[k] = (char)(k < 4 ? k : gr(4));
  for (long k = 0; k < nf; k++) gen_f(k, nmemo);
  for (long k = 0; k < ng; k++) {
    printf("def g%ld(a, b, p) {\n  t = [", k);
    gen_fcall(pick_f(nf, F_ARITH, F_MEMO), "a", "b", "p");
    printf(", ");
    gen_expr(2, gvars, 2);
    printf(", ");
    snprintf(arg, sizeof arg, "a %% %ld", 5 + gr(50));
    gen_fcall(pick_f(nf, F_STRING, F_STRING), "b", arg, "a");
    for (long m = gr(3); m > 0; m--) { printf(", "); gen_expr(2, gvars, 2); }
    printf("];\n  s = 0;\n  d = dict();\n  for v in t { s = (s + ");
    gen_fcall(pick_f(nf, F_RECORD, F_RECORD), "v", "s", "\"v\"");
    printf(" %% 97 + ");
    gen_expr(2, gvars, 4);
    r1 = 3 + gr(12);
    printf(") %% 100003; d[v %% %ld] = p + \"%s\" + v; }\n", r1, sep());
    s1 = sep();
    printf("  w = join(t, \"%s\");\n  key = p + len(w) %% %ld;\n", s1, 3 + gr(8));
    printf("  c%ld[key] = get(c%ld, key) + 1;\n", k % ncount, k % ncount);
    printf("  for k in %s { s = (s + k + len(d[k])) %% 100003; }\n", gr(2) ? "d" : "keys(d)");
    r1 = 1 + gr(4);
    printf("  repeat %ld { s = (s * %ld + a) %% 10007; }\n", r1, 3 + gr(20));
    printf("  if len(t) > 3 { s = s + t[3] %% 11; }\n");
    printf("  return s;\n}\n");
  }
  for (long k = 0; k < nh; k++) {
    long list = gr(nlists), d = 3 + gr(9);
    s1 = sep();
    printf("def h%ld(a, b) {\n  s = 0;\n  tag = \"h%ld%s\" + a %% %ld;\n", k, k, s1, 5 + gr(40));
    printf("  for v in gl%ld { if v %% %ld == a %% %ld { s = s + v + g%ld(v, b, tag) %% 50; } else { s = s + 1; } }\n",
           list, d, d, gr(ng));
    printf("  r = rows[(a + %ld) %% len(rows)];\n  s = s + r[abs(b) %% len(r)] + len(r);\n", gr(10));
    r1 = 8 + gr(16);
    printf("  if a %% %ld == %ld { shift(gl%ld); push(gl%ld, abs(s) %% 1000); }\n", r1, gr(8), list, list);
    printf("  if a %% %ld == 0 { push(r, s %% 100); shift(r); }\n", 4 + gr(8));
    printf("  seen[tag] = get(seen, tag) + abs(s) %% 10;\n");
    r1 = 20 + gr(30);
    r2 = gr(20);
    r3 = 20 + gr(60);
    printf("  if a %% %ld == %ld { for key in keys(seen) { if seen[key] > %ld { del(seen, key); } } }\n", r1, r2, r3);
    printf("  return s %% 100003;\n}\n");
  }
  for (long l = 0; l < nlists; l++) {
    r1 = 60 + gr(120);
    r2 = 7 + gr(90);
    r3 = gr(1000);
    printf("gl%ld = [];\ni = 0;\nwhile i < %ld { push(gl%ld, (i * %ld + %ld) %% 1000); i = i + 1; }\n",
           l, r1, l, r2, r3);
  }
  r1 = 8 + gr(16);
  r2 = 10 + gr(30);
  r3 = gr(100);
  printf("rows = [];\nrepeat %ld {\n  row = range(%ld);\n  push(rows, row + [len(rows), %ld]);\n}\n", r1, r2, r3);
  printf("seen = dict();\n");
  for (long m = 0; m < nmemo; m++) printf("m%ld = dict();\n", m);
  for (long c = 0; c < ncount; c++) printf("c%ld = dict();\n", c);
  printf("n = arg(0);\nacc = 0;\ni = 0;\nwhile i < n {\n  acc = (acc * 31");
  for (long k = 0; k < nh; k++) printf(" + h%ld(i + %ld, acc)", k, gr(100));
  for (long k = 0; k < 2; k++) printf(" + g%ld(abs(acc) %% 1000, i, \"main\")", gr(ng));
  printf(") %% 1000003;\n  if i %% 100 == 0 { print i, acc, len(seen); }\n");
  for (long c = 0; c < ncount; c++) {
    r1 = 20 + gr(40);
    printf("  if i %% %ld == %ld { c%ld = dict(); }\n", r1, gr(20), c);
  }
  printf("  i = i + 1;\n}\n");
  printf("print acc, len(rows), rows[0];\n");
  for (long l = 0; l < nlists; l++) printf("print len(gl%ld), gl%ld[0];\n", l, l);
  for (long c = 0; c < ncount; c++)
    printf("z = 0;\nfor kk in c%ld { z = (z * 7 + len(kk) + c%ld[kk]) %% 1000003; }\nprint len(c%ld), z;\n", c, c, c);
  for (long m = 0; m < nmemo; m++) printf("print len(m%ld);\n", m);
  printf("print len(seen), substr(join(keys(seen), \" \"), 0, 60);\n");
  return 0;
}

/* ---- main -------------------------------------------------------------------------------- */

static char *read_all(FILE *f) {
  size_t cap = 1 << 16, len = 0;
  char *buf = xmalloc(cap);
  for (size_t got; (got = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
    len += got;
    if (cap - len < 2) { cap *= 2; buf = realloc(buf, cap); if (!buf) exit(1); }
  }
  buf[len] = 0;
  if (strlen(buf) != len) { line = 0; die(2, "the program contains a NUL byte"); }
  return buf;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--generate") == 0) {
    if (argc != 4) { fputs("usage: calc --generate FUNCS SEED\n", stderr); return 2; }
    return generate(atol(argv[2]), strtoul(argv[3], NULL, 10));
  }
  nargs = argc - 1;
  prog_args = argv + 1;
  src = read_all(stdin);
  next();
  struct node *program = node_alloc(N_BLOCK), **tail = &program->a;
  while (tok != T_EOF) { *tail = statement(); tail = &(*tail)->next; }
  globals = current = frame_alloc(0, NULL);
  exec(program);
  if (retval) { decref(retval); retval = NULL; }
  for (struct binding *b = globals->vars, *next; b; b = next) { next = b->next; decref(b->v); xfree(b); }
  xfree(globals);
  release(program);
  for (int k = 0; k < SYMBOLS; k++)
    for (struct symbol *s = symbols[k], *next; s; s = next) { next = s->next; xfree(s); }
  xfree(src);
  printf("calc statements %lu calls %lu checksum %lu\n", steps, calls, check);
  return 0;
}
