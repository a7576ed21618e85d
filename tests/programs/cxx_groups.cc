// The C++ face of the identification test: objects made with `new` by
// type-specific factory functions, through virtual classes and std::list.
#include <cstdio>
#include <dlfcn.h>
#include <list>
#include <memory>

#define NOINLINE __attribute__((noinline, noclone))

struct Node { virtual ~Node() = default; virtual long value() const = 0; };
struct Leaf : Node { long v; explicit Leaf(long x) : v(x) {} long value() const override { return v; } };
struct Pair : Node { long a, b; Pair(long x, long y) : a(x), b(y) {} long value() const override { return a * b; } };
struct Cold : Node { long c[3]; explicit Cold(long x) : c{x, x, x} {} long value() const override { return c[1]; } };

NOINLINE Node *make_leaf(long i) { return new Leaf(i); }
NOINLINE Node *make_pair(long i) { return new Pair(i, i + 1); }
NOINLINE Node *make_cold(long i) { return new Cold(i); }

int main(int argc, char **argv) {
  auto group_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  FILE *log = std::fopen(argc > 1 ? argv[1] : "/dev/null", "w");
  std::list<Node *> hot, cold;
  for (long i = 0; i < 3000; i++) {
    hot.push_back(make_leaf(i));
    hot.push_back(make_pair(i));
    cold.push_back(make_cold(i));
  }
  long sum = 0;
  for (int r = 0; r < 5; r++) for (Node *n : hot) sum += n->value();
  for (Node *n : cold) sum += n->value();
  int idx = 0;
  for (Node *n : hot) std::fprintf(log, "%s %d %d %p\n", dynamic_cast<Leaf *>(n) ? "leaf" : "pair", idx++ / 2,
                                   group_of ? group_of(n) : -1, (void *)n);
  idx = 0;
  for (Node *n : cold) std::fprintf(log, "cold %d %d %p\n", idx++, group_of ? group_of(n) : -1, (void *)n);
  for (Node *n : hot) delete n;
  for (Node *n : cold) delete n;
  std::fclose(log);
  std::printf("checksum %ld\n", sum);
  return 0;
}
