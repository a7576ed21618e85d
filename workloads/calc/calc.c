/* calc: a small interpreter. It reads a program from standard input, parses
 * it into many small AST nodes and runs it the naive way: every integer is a
 * boxed, reference-counted value, every evaluation makes and frees
 * temporaries, lists are linked cells, variables are linked bindings in
 * heap frames. Everything comes through two levels of wrappers
 * (node_alloc, value_alloc, cell_alloc, ... -> xmalloc -> malloc), as in
 * many real interpreters. `calc --generate FUNCS SEED` prints a program
 * (functions in three levels, global lists, a main loop of arg(0) rounds)
 * to run with `calc ROUNDS < program`.
 *
 * The language:
 *   program := stmt*            # comments run to the end of the line
 *   stmt    := def NAME(NAME, ...) { stmt* }
 *            | if expr { ... } [else { ... } | else if ...]
 *            | while expr { ... } | repeat expr { ... } | for NAME in expr { ... }
 *            | return [expr]; | print expr, ...; | TARGET = expr; | expr;
 *   expr    := || && == != < <= > >= + - * / % unary - ! x[i] f(...) [a, b] (e) NUMBER NAME
 *   builtins: arg(i) len(l) push(l, v) shift(l) range(n) abs(x) min(a, b) max(a, b)
 * Integers wrap; x / 0 and x % 0 are 0. Lists are shared by reference.
 * Assignment in a function sets a local unless a global of that name exists.
 * Usage: calc [ARGS...] < program. Prints what the program prints, then a
 * checksum of it. */
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

enum { N_NUM, N_VAR, N_LIST, N_INDEX, N_CALL, N_BIN, N_NEG, N_NOT, N_AND, N_OR,
       N_ASSIGN, N_EXPR, N_IF, N_WHILE, N_REPEAT, N_FOR, N_RETURN, N_PRINT, N_BLOCK, N_DEF };
enum { B_NONE, B_ARG, B_LEN, B_PUSH, B_SHIFT, B_RANGE, B_ABS, B_MIN, B_MAX };
enum { V_INT, V_LIST };

struct symbol { struct symbol *next; struct node *func; char name[]; };
struct node { int kind, op, line; long num; struct symbol *sym; struct node *a, *b, *c, *next; };
struct cell { struct cell *next; struct value *v; };
struct value { int kind, refs, iterating; long n; struct cell *head, *tail; };
struct binding { struct binding *next; struct symbol *sym; struct value *v; };
struct frame { struct binding *vars; long depth; };

NOINLINE static struct node *node_alloc(int kind) {
  struct node *n = xmalloc(sizeof *n);
  memset(n, 0, sizeof *n);
  n->kind = kind;
  n->line = (int)line;
  return n;
}
NOINLINE static struct value *value_alloc(int kind) {
  struct value *v = xmalloc(sizeof *v);
  v->kind = kind; v->refs = 1; v->iterating = 0; v->n = 0;
  v->head = v->tail = NULL;
  return v;
}
NOINLINE static struct cell *cell_alloc(struct value *v) {
  struct cell *c = xmalloc(sizeof *c);
  c->next = NULL; c->v = v;
  return c;
}
NOINLINE static struct binding *binding_alloc(struct symbol *sym, struct value *v) {
  struct binding *b = xmalloc(sizeof *b);
  b->sym = sym; b->v = v; b->next = NULL;
  return b;
}
NOINLINE static struct frame *frame_alloc(long depth) {
  struct frame *f = xmalloc(sizeof *f);
  f->vars = NULL; f->depth = depth;
  return f;
}
NOINLINE static struct symbol *symbol_alloc(const char *name, size_t len) {
  struct symbol *s = xmalloc(sizeof *s + len + 1);
  memcpy(s->name, name, len);
  s->name[len] = 0;
  s->func = NULL; s->next = NULL;
  return s;
}

/* ---- values --------------------------------------------------------------- */

static struct value *new_int(long n) { struct value *v = value_alloc(V_INT); v->n = n; return v; }
static struct value *incref(struct value *v) { v->refs++; return v; }
static void decref(struct value *v) {
  if (--v->refs > 0) return;
  for (struct cell *c = v->head, *next; c; c = next) { next = c->next; decref(c->v); xfree(c); }
  xfree(v);
}
static long as_int(struct value *v, const char *what) {
  if (v->kind != V_INT) die(1, "%s needs an integer, not a list", what);
  return v->n;
}
static struct value *as_list(struct value *v, const char *what) {
  if (v->kind != V_LIST) die(1, "%s needs a list, not an integer", what);
  return v;
}
static void append(struct value *l, struct value *v) {       /* takes v's reference */
  if (l->iterating) die(1, "list changed inside a for over it");
  struct cell *c = cell_alloc(v);
  if (l->tail) l->tail->next = c; else l->head = c;
  l->tail = c;
  l->n++;
}
static struct cell *nth(struct value *l, long i) {
  if (i < 0 || i >= l->n) die(1, "index %ld out of range (length %ld)", i, l->n);
  struct cell *c = l->head;
  while (i-- > 0) c = c->next;
  return c;
}
static int truthy(struct value *v) { return v->n != 0; }   /* non-zero, or not empty */
static int equal(struct value *a, struct value *b) {
  if (a->kind != b->kind) return 0;
  if (a->kind == V_INT) return a->n == b->n;
  if (a->n != b->n) return 0;
  for (struct cell *x = a->head, *y = b->head; x; x = x->next, y = y->next)
    if (!equal(x->v, y->v)) return 0;
  return 1;
}

/* ---- lexer ------------------------------------------------------------------ */

enum { T_EOF = 256, T_NUM, T_NAME, T_DEF, T_IF, T_ELSE, T_WHILE, T_REPEAT, T_FOR, T_IN, T_RETURN,
       T_PRINT, T_EQ, T_NE, T_LE, T_GE, T_AND, T_OR };
static const char *keywords[] = {"def", "if", "else", "while", "repeat", "for", "in", "return", "print"};

#define SYMBOLS 1024
static struct symbol *symbols[SYMBOLS];
static char *src;
static long pos;
static int tok;
static long tok_num;
static struct symbol *tok_sym;

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

static int builtin(const struct symbol *s) {
  static const char *names[] = {"", "arg", "len", "push", "shift", "range", "abs", "min", "max"};
  for (int k = 1; k < (int)(sizeof names / sizeof *names); k++)
    if (strcmp(s->name, names[k]) == 0) return k;
  return B_NONE;
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
  } else if (tok == T_NAME) {
    struct symbol *s = tok_sym;
    next();
    if (tok == '(') {
      next();
      n = node_alloc(N_CALL); n->sym = s; n->op = builtin(s);
      n->a = expr_list(')', &count);
      n->num = count;
    } else {
      n = node_alloc(N_VAR); n->sym = s;
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
    struct node **tail = &n->a;
    long count = 0;
    while (tok == T_NAME) {
      *tail = node_alloc(N_VAR); (*tail)->sym = tok_sym; tail = &(*tail)->next; count++;
      next();
      if (tok != ',') break;
      next();
    }
    expect(')', "')'");
    n->op = (int)count;
    n->b = block();
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
    n = node_alloc(N_FOR); n->sym = tok_sym;
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
    xfree(n);
    n = next;
  }
}

/* ---- evaluation ------------------------------------------------------------------ */

static struct frame *globals, *current;
static struct value *retval;
static int nargs;
static char **args;
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
static void assign(struct symbol *s, struct value *v) {     /* takes v's reference */
  struct binding *b = lookup(s);
  if (!b) { b = binding_alloc(s, v); b->next = current->vars; current->vars = b; return; }
  struct value *old = b->v;
  b->v = v;
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
  if (op == '+' && a->kind == V_LIST && b->kind == V_LIST) {
    struct value *l = value_alloc(V_LIST);
    for (struct cell *c = a->head; c; c = c->next) append(l, incref(c->v));
    for (struct cell *c = b->head; c; c = c->next) append(l, incref(c->v));
    return l;
  }
  return new_int(arith(op, as_int(a, "arithmetic"), as_int(b, "arithmetic")));
}

static struct value *call_builtin(struct node *n) {
  struct value *v[2] = {NULL, NULL}, *r;
  static const int want[] = {0, 1, 1, 2, 1, 1, 1, 2, 2};
  if (n->num != want[n->op]) die(1, "%s takes %d argument(s)", n->sym->name, want[n->op]);
  int k = 0;
  for (struct node *a = n->a; a; a = a->next) v[k++] = eval(a);
  switch (n->op) {
  case B_ARG: { long i = as_int(v[0], "arg"); r = new_int(i >= 0 && i < nargs ? atol(args[i]) : 0); break; }
  case B_LEN: r = new_int(as_list(v[0], "len")->n); break;
  case B_PUSH: append(as_list(v[0], "push"), incref(v[1])); r = new_int(v[0]->n); break;
  case B_SHIFT: {
    struct value *l = as_list(v[0], "shift");
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
    r = value_alloc(V_LIST);
    for (long i = 0; i < m; i++) append(r, new_int(i));
    break;
  }
  case B_ABS: { long x = as_int(v[0], "abs"); r = new_int(x < 0 ? (long)(0 - (unsigned long)x) : x); break; }
  case B_MIN: case B_MAX: {
    long x = as_int(v[0], n->sym->name), y = as_int(v[1], n->sym->name);
    r = new_int((n->op == B_MIN) == (x < y) ? x : y);
    break;
  }
  default: die(1, "bad builtin"); r = NULL;
  }
  for (k = 0; k < 2; k++) if (v[k]) decref(v[k]);
  return r;
}

static struct value *call(struct node *n) {
  if (n->op) return call_builtin(n);
  struct node *f = n->sym->func;
  if (!f) die(1, "no function %s", n->sym->name);
  if (n->num != f->op) die(1, "%s takes %d argument(s)", n->sym->name, f->op);
  if (current->depth > 2000) die(1, "calls nested too deeply");
  calls++;
  struct frame *fr = frame_alloc(current->depth + 1);
  struct binding **tail = &fr->vars;
  for (struct node *a = n->a, *p = f->a; a; a = a->next, p = p->next) {
    *tail = binding_alloc(p->sym, eval(a));
    tail = &(*tail)->next;
  }
  struct frame *saved = current;
  current = fr;
  struct value *r = NULL;
  if (exec(f->b)) { r = retval; retval = NULL; }
  current = saved;
  for (struct binding *b = fr->vars, *next; b; b = next) { next = b->next; decref(b->v); xfree(b); }
  xfree(fr);
  return r ? r : new_int(0);
}

static struct value *eval(struct node *n) {
  struct value *a, *b, *r;
  switch (n->kind) {
  case N_NUM: return new_int(n->num);
  case N_VAR: {
    struct binding *bd = lookup(n->sym);
    if (!bd) die(1, "%s is not set", n->sym->name);
    return incref(bd->v);
  }
  case N_LIST:
    r = value_alloc(V_LIST);
    for (struct node *e = n->a; e; e = e->next) append(r, eval(e));
    return r;
  case N_INDEX:
    a = eval(n->a); b = eval(n->b);
    r = incref(nth(as_list(a, "indexing"), as_int(b, "an index"))->v);
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

static void print_value(struct value *v, int depth) {
  if (v->kind == V_INT) {
    printf("%ld", v->n);
    check = check * 1000003 + (unsigned long)v->n;
    return;
  }
  check = check * 31 + (unsigned long)v->n + 7;
  if (depth > 8) { fputs("[...]", stdout); return; }
  putchar('[');
  for (struct cell *c = v->head; c; c = c->next) {
    print_value(c->v, depth + 1);
    if (c->next) fputs(", ", stdout);
  }
  putchar(']');
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
    if (n->a->kind == N_VAR) { assign(n->a->sym, eval(n->b)); return 0; }
    {
      struct value *l = eval(n->a->a), *i = eval(n->a->b);
      v = eval(n->b);
      as_list(l, "indexing");
      if (l->iterating) die(1, "list changed inside a for over it");
      struct cell *c = nth(l, as_int(i, "an index"));
      struct value *old = c->v;
      c->v = v;
      decref(old); decref(i); decref(l);
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
    struct value *l = as_list(eval(n->a), "for");
    int done = 0;
    l->iterating++;
    for (struct cell *c = l->head; c && !done; c = c->next) {
      assign(n->sym, incref(c->v));
      done = exec(n->b);
    }
    l->iterating--;
    decref(l);
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

static int generate(long funcs, unsigned long seed) {
  grng = seed * 2654435761ul + 1;
  long nf = funcs / 2 > 1 ? funcs / 2 : 1, ng = funcs / 4 > 1 ? funcs / 4 : 1, nh = funcs / 4 > 1 ? funcs / 4 : 1;
  long nlists = 3 + funcs / 8;
  static const char *const fvars[] = {"a", "b", "x", "y"};
  static const char *const gvars[] = {"a", "b", "s", "v"};
  printf("# calc program: calc --generate %ld %lu\n", funcs, seed);
  for (long k = 0; k < nf; k++) {
    printf("def f%ld(a, b) {\n  x = ", k);
    gen_expr(3, fvars, 2);
    printf(";\n  y = ");
    gen_expr(3, fvars, 3);
    printf(" %% 10007;\n");
    printf("  if (x + y) %% %ld == %ld { return ", 2 + gr(5), gr(2));
    gen_expr(2, fvars, 4);
    printf(" %% 100003; }\n  return ");
    gen_expr(3, fvars, 4);
    printf(" %% 100003;\n}\n");
  }
  for (long k = 0; k < ng; k++) {
    printf("def g%ld(a, b) {\n  t = [f%ld(a, b), ", k, gr(nf));
    gen_expr(2, gvars, 2);
    printf(", f%ld(b, a %% %ld)", gr(nf), 5 + gr(50));
    for (long m = gr(3); m > 0; m--) { printf(", "); gen_expr(2, gvars, 2); }
    printf("];\n  s = 0;\n  for v in t { s = (s + f%ld(v, s) %% 97 + ", gr(nf));
    gen_expr(2, gvars, 4);
    printf(") %% 100003; }\n");
    printf("  repeat %ld { s = (s * %ld + a) %% 10007; }\n", 1 + gr(4), 3 + gr(20));
    printf("  if len(t) > 3 { s = s + t[3] %% 11; }\n");
    printf("  return s;\n}\n");
  }
  for (long k = 0; k < nh; k++) {
    long list = gr(nlists), d = 3 + gr(9);
    printf("def h%ld(a, b) {\n  s = 0;\n", k);
    printf("  for v in gl%ld { if v %% %ld == a %% %ld { s = s + v + g%ld(v, b) %% 50; } else { s = s + 1; } }\n",
           list, d, d, gr(ng));
    printf("  r = rows[(a + %ld) %% len(rows)];\n  s = s + r[abs(b) %% len(r)] + len(r);\n", gr(10));
    printf("  if a %% %ld == %ld { shift(gl%ld); push(gl%ld, abs(s) %% 1000); }\n", 8 + gr(16), gr(8), list, list);
    printf("  if a %% %ld == 0 { push(r, s %% 100); shift(r); }\n", 4 + gr(8));
    printf("  return s %% 100003;\n}\n");
  }
  for (long l = 0; l < nlists; l++)
    printf("gl%ld = [];\ni = 0;\nwhile i < %ld { push(gl%ld, (i * %ld + %ld) %% 1000); i = i + 1; }\n",
           l, 60 + gr(120), l, 7 + gr(90), gr(1000));
  printf("rows = [];\nrepeat %ld {\n  row = range(%ld);\n  push(rows, row + [len(rows), %ld]);\n}\n", 8 + gr(16), 10 + gr(30), gr(100));
  printf("n = arg(0);\nacc = 0;\ni = 0;\nwhile i < n {\n  acc = (acc * 31");
  for (long k = 0; k < nh; k++) printf(" + h%ld(i + %ld, acc)", k, gr(100));
  for (long k = 0; k < 2; k++) printf(" + g%ld(abs(acc) %% 1000, i)", gr(ng));
  printf(") %% 1000003;\n  if i %% 100 == 0 { print i, acc; }\n  i = i + 1;\n}\n");
  printf("print acc, len(rows), rows[0];\n");
  for (long l = 0; l < nlists; l++) printf("print len(gl%ld), gl%ld[0];\n", l, l);
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
  args = argv + 1;
  src = read_all(stdin);
  next();
  struct node *program = node_alloc(N_BLOCK), **tail = &program->a;
  while (tok != T_EOF) { *tail = statement(); tail = &(*tail)->next; }
  globals = current = frame_alloc(0);
  exec(program);
  if (retval) { decref(retval); retval = NULL; }
  for (struct binding *b = globals->vars, *next; b; b = next) { next = b->next; decref(b->v); xfree(b); }
  xfree(globals);
  release(program);
  xfree(src);
  printf("calc statements %lu calls %lu checksum %lu\n", steps, calls, check);
  return 0;
}
