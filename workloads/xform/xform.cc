// xform: a tree-transforming processor of an XML-like document, in the
// shape of an XSLT engine. A document is generated as text (element names
// from a small vocabulary, attributes, text) and parsed into a tree by a
// recursive-descent parser; a stylesheet of recursive templates is generated
// too, one template per element name, whose bodies copy elements, apply the
// templates to children, select children by name, test attributes and make
// text from attribute values. Each pass interprets the stylesheet over the
// document (a recursive evaluator: apply-templates -> body -> instruction ->
// body ...), building a result tree of nodes, child vectors and strings, then
// serialises the result and drops it.
//
// Two inputs differ in what a plan trained on one has to carry to the
// other: the document (size, depth, vocabulary mix: DOCSEED) and the
// stylesheet (STYLESEED) change the evaluator's recursion and the order in
// which instructions call each other, so the call chains of the result
// tree's allocations differ, while what those objects are does not.
//
// Usage: xform ELEMENTS PASSES STYLESEED DOCSEED. Prints a checksum of the
// serialised results, which does not depend on where objects live.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

uint64_t rng_state;
uint64_t next_rand() {
  uint64_t x = rng_state;
  x ^= x << 13; x ^= x >> 7; x ^= x << 17;
  return rng_state = x;
}
unsigned pick(unsigned n) { return (unsigned)(next_rand() % n); }

const char *const NAMES[] = {"book", "chapter", "section", "para", "list", "item", "table",
                             "row", "cell", "note", "ref", "title", "code", "quote"};
const unsigned NNAMES = sizeof NAMES / sizeof NAMES[0];
const char *const ATTRS[] = {"id", "class", "lang", "href", "n"};
const unsigned NATTRS = sizeof ATTRS / sizeof ATTRS[0];

// ------------------------------------------------------------ the document

struct Attr {
  unsigned name;
  std::string value;
};

struct Node {
  unsigned name;             // index into NAMES; NNAMES for a text node
  std::vector<Attr> attrs;
  std::vector<Node *> kids;
  std::string text;          // a text node's content
  const std::string *attr(unsigned a) const {
    for (const Attr &x : attrs)
      if (x.name == a) return &x.value;
    return nullptr;
  }
};

// The generator writes the document as text; each name has its own mix of
// likely children, so documents of one seed family look alike.
void gen_element(std::string &out, unsigned depth, unsigned &budget) {
  unsigned name = depth == 0 ? 0 : pick(NNAMES);
  out += '<';
  out += NAMES[name];
  for (unsigned a = 0, n = pick(3); a < n; a++) {
    out += ' ';
    out += ATTRS[pick(NATTRS)];
    out += "=\"v";
    out += std::to_string(pick(1000));
    out += '"';
  }
  out += '>';
  unsigned kids = depth >= 7 || budget == 0 ? 0 : 1 + pick(depth < 2 ? 8 : 4);
  for (unsigned k = 0; k < kids && budget; k++) {
    if (pick(4) == 0) {
      out += "text";
      out += std::to_string(pick(100000));
    } else {
      budget--;
      gen_element(out, depth + 1, budget);
    }
  }
  out += "</";
  out += NAMES[name];
  out += '>';
}

struct Parser {
  const char *p;
  // The index of the word of `words` at p that one of `ends` follows; p
  // moves past it. Element and attribute names alike.
  unsigned word_at(const char *const *words, unsigned n, const char *ends) {
    for (unsigned i = 0; i < n; i++) {
      size_t len = strlen(words[i]);
      if (!strncmp(p, words[i], len) && p[len] && strchr(ends, p[len])) { p += len; return i; }
    }
    fprintf(stderr, "xform: bad document\n");
    exit(2);
  }
  Node *text() {
    Node *t = new Node;
    t->name = NNAMES;
    while (*p && *p != '<') t->text += *p++;
    return t;
  }
  Node *element() {
    p++;   // '<'
    Node *e = new Node;
    e->name = word_at(NAMES, NNAMES, "> ");
    while (*p == ' ') {
      p++;
      Attr a;
      a.name = word_at(ATTRS, NATTRS, "=");
      p += 2;   // ="
      while (*p != '"') a.value += *p++;
      p++;
      e->attrs.push_back(std::move(a));
    }
    p++;   // '>'
    while (!(p[0] == '<' && p[1] == '/')) e->kids.push_back(*p == '<' ? element() : text());
    while (*p++ != '>') {}
    return e;
  }
};

void free_tree(Node *n) {
  for (Node *k : n->kids) free_tree(k);
  delete n;
}

// ------------------------------------------------------------ stylesheet

enum Op { COPY, APPLY, SELECT, IF_ATTR, VALUE_OF, LITERAL, COUNT };
struct Instr {
  Op op;
  unsigned arg;               // an element name (SELECT) or attribute (IF_ATTR, VALUE_OF)
  std::vector<Instr> body;    // COPY, SELECT, IF_ATTR
};
struct Template {
  std::vector<Instr> body;
};

// A template applies the templates to its context's children exactly once
// (in its body or a copy's), so a pass does work in proportion to the
// document; a select's and a test's bodies work on their context alone.
void gen_body(std::vector<Instr> &body, unsigned depth, bool &apply_left, bool in_select) {
  unsigned n = 1 + pick(depth ? 3 : 4);
  for (unsigned i = 0; i < n; i++) {
    Instr in;
    static const Op leaf[] = {APPLY, VALUE_OF, LITERAL, COUNT};
    static const Op all[] = {APPLY, VALUE_OF, LITERAL, COUNT, COPY, SELECT, IF_ATTR};
    in.op = depth >= 2 ? leaf[pick(4)] : all[pick(7)];
    if (in.op == APPLY && (!apply_left || in_select)) in.op = COUNT;
    if (in.op == APPLY) apply_left = false;
    in.arg = in.op == SELECT ? pick(NNAMES) : pick(NATTRS);
    if (in.op == COPY || in.op == SELECT || in.op == IF_ATTR)
      gen_body(in.body, depth + 1, apply_left, in_select || in.op != COPY);
    body.push_back(std::move(in));
  }
  if (!depth && apply_left) body.push_back(Instr{APPLY, 0, {}});   // every template walks on
}

// ------------------------------------------------------------ evaluation

struct Out {
  const char *name;           // null for text
  std::vector<Out *> kids;
  std::string text;
};

struct Engine {
  std::vector<Template> templates;
  unsigned steps = 0;

  void body(const std::vector<Instr> &b, const Node *ctx, Out *out);
  void apply(const Node *ctx, Out *out) {
    for (const Node *k : ctx->kids) {
      if (k->name == NNAMES) {   // the built-in rule for text: copy it
        Out *t = new Out{nullptr, {}, k->text};
        out->kids.push_back(t);
      } else {
        body(templates[k->name].body, k, out);
      }
    }
  }
  void copy(const Instr &in, const Node *ctx, Out *out) {
    Out *e = new Out{NAMES[ctx->name], {}, {}};
    out->kids.push_back(e);
    body(in.body, ctx, e);
  }
  void select(const Instr &in, const Node *ctx, Out *out) {
    for (const Node *k : ctx->kids)
      if (k->name == in.arg) body(in.body, k, out);
  }
  void value_of(const Instr &in, const Node *ctx, Out *out) {
    const std::string *v = ctx->attr(in.arg);
    std::string s = std::string(ATTRS[in.arg]) + ":" + (v ? *v : std::string("none"));
    out->kids.push_back(new Out{nullptr, {}, std::move(s)});
  }
  void literal(const Instr &in, const Node *ctx, Out *out) {
    out->kids.push_back(new Out{nullptr, {}, std::string(NAMES[ctx->name]) + "#" + std::to_string(in.arg)});
  }
  void count(const Node *ctx, Out *out) {
    out->kids.push_back(new Out{nullptr, {}, std::to_string(ctx->kids.size())});
  }
};

void Engine::body(const std::vector<Instr> &b, const Node *ctx, Out *out) {
  steps++;
  for (const Instr &in : b) {
    switch (in.op) {
    case COPY: copy(in, ctx, out); break;
    case APPLY: apply(ctx, out); break;
    case SELECT: select(in, ctx, out); break;
    case IF_ATTR: if (ctx->attr(in.arg)) body(in.body, ctx, out); break;
    case VALUE_OF: value_of(in, ctx, out); break;
    case LITERAL: literal(in, ctx, out); break;
    case COUNT: count(ctx, out); break;
    }
  }
}

uint64_t hash_out(const Out *o, uint64_t h) {
  if (o->name) {
    for (const char *c = o->name; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    for (const Out *k : o->kids) h = hash_out(k, h);
    return (h ^ '/') * 0x100000001b3ull;
  }
  for (unsigned char c : o->text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void free_out(Out *o) {
  for (Out *k : o->kids) free_out(k);
  delete o;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: xform ELEMENTS PASSES STYLESEED DOCSEED\n");
    return 2;
  }
  unsigned elements = (unsigned)atoi(argv[1]), passes = (unsigned)atoi(argv[2]);
  rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)atoll(argv[4]) * 0x2545f4914f6cdd1dull;
  if (!rng_state) rng_state = 1;
  std::string text;
  unsigned budget = elements;
  // A document is a book of chapters until the budget is spent.
  text += "<book>";
  while (budget) {
    budget--;
    gen_element(text, 1, budget);
  }
  text += "</book>";
  Parser ps{text.c_str()};
  Node *doc = ps.element();
  std::string().swap(text);

  Engine eng;
  rng_state = 0xda942042e4dd58b5ull ^ (uint64_t)atoll(argv[3]) * 0x9e3779b97f4a7c15ull;
  if (!rng_state) rng_state = 1;
  eng.templates.resize(NNAMES);
  for (Template &t : eng.templates) {
    bool apply_left = true;
    gen_body(t.body, 0, apply_left, false);
  }

  uint64_t sum = 0;
  size_t nodes = 0;
  for (unsigned pass = 0; pass < passes; pass++) {
    Out *root = new Out{"result", {}, {}};
    eng.body(eng.templates[doc->name].body, doc, root);
    sum = sum * 31 + hash_out(root, 0xcbf29ce484222325ull);
    nodes += root->kids.size();
    free_out(root);
  }
  free_tree(doc);
  printf("xform %u %u checksum %llu (%zu top-level results, %u template steps)\n", elements, passes,
         (unsigned long long)sum, nodes, eng.steps);
  return 0;
}
