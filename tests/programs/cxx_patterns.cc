// C++ objects made with new, walked in step: the profiler must track new and
// delete (all of them go through operator new, not malloc, in the tool).
#include <cstdio>
#include <memory>
#include <vector>

struct Shape {
  virtual ~Shape() = default;
  virtual long area() const = 0;
  Shape *next = nullptr;
};
struct Square : Shape {
  long side;
  explicit Square(long s) : side(s) {}
  long area() const override { return side * side; }
};
struct Circle : Shape {
  long r;
  explicit Circle(long r) : r(r) {}
  long area() const override { return 3 * r * r; }
};

__attribute__((noinline)) Shape *make_square(long i) { return new Square(i); }
__attribute__((noinline)) Shape *make_circle(long i) { return new Circle(i); }

int main() {
  Shape *sq = nullptr, *ci = nullptr, **st = &sq, **ct = &ci;
  for (long i = 0; i < 2000; i++) {
    *st = make_square(i); st = &(*st)->next;
    *ct = make_circle(i); ct = &(*ct)->next;
  }
  long sum = 0;
  for (int p = 0; p < 10; p++)
    for (Shape *a = sq, *b = ci; a && b; a = a->next, b = b->next) sum += a->area() + b->area();
  while (sq) { Shape *n = sq->next; delete sq; sq = n; }
  while (ci) { Shape *n = ci->next; delete ci; ci = n; }
  std::printf("%ld\n", sum);
  return 0;
}
