// objects: C++ with new, virtual classes, std::list and std::map, and deep
// call chains through templates and a factory. Shapes are made through the
// factory interleaved with index records and log strings; the hot loop walks
// the scene list through virtual calls and looks records up in the map.
// Usage: objects N PASSES LOOKUPS.
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct Shape {
  virtual ~Shape() = default;
  virtual long area() const = 0;
  virtual long perimeter() const = 0;
};
struct Circle final : Shape {
  long r;
  explicit Circle(long r) : r(r) {}
  long area() const override { return 3 * r * r; }
  long perimeter() const override { return 6 * r; }
};
struct Rect final : Shape {
  long w, h;
  Rect(long w, long h) : w(w), h(h) {}
  long area() const override { return w * h; }
  long perimeter() const override { return 2 * (w + h); }
};
struct Poly final : Shape {
  std::vector<long> xs;
  explicit Poly(long n) : xs(static_cast<size_t>(3 + n % 5), n) {}
  long area() const override { long s = 0; for (long x : xs) s += x; return s; }
  long perimeter() const override { return static_cast<long>(xs.size()); }
};

template <class T> struct Maker {
  template <class... A> __attribute__((noinline)) static Shape *make(A... a) { return new T(a...); }
};

struct Factory {
  __attribute__((noinline)) static Shape *create(int kind, long i) {
    switch (kind) {
    case 0: return build<Circle>(i % 17 + 1);
    case 1: return build<Rect>(i % 13 + 1, i % 7 + 1);
    default: return build<Poly>(i);
    }
  }
  template <class T, class... A> __attribute__((noinline)) static Shape *build(A... a) {
    return Maker<T>::make(a...);
  }
};

struct Record {
  long id;
  std::string name;
};

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  int passes = argc > 2 ? atoi(argv[2]) : 10;
  long lookups = argc > 3 ? atol(argv[3]) : 1000000;
  std::list<Shape *> scene;
  std::map<long, Record> index;
  std::vector<std::string> log;
  for (long i = 0; i < n; i++) {
    scene.push_back(Factory::create(static_cast<int>(i % 3), i));
    index.emplace(i * 7919 % (4 * n), Record{i, "record-" + std::to_string(i) + "-with-a-longer-name"});
    if (i % 3 == 0) log.push_back("made shape " + std::to_string(i) + " of a kind that needs words");
  }
  long sum = 0;
  for (int p = 0; p < passes; p++)
    for (const Shape *s : scene) sum += s->area() + p * s->perimeter();
  unsigned long rng = 7;
  for (long q = 0; q < lookups; q++) {
    rng = rng * 6364136223846793005ul + 1442695040888963407ul;
    auto it = index.find(static_cast<long>((rng >> 33) % static_cast<unsigned long>(4 * n)));
    if (it != index.end()) sum += it->second.id + static_cast<long>(it->second.name.size());
  }
  for (const auto &l : log) sum += static_cast<long>(l.size());
  for (Shape *s : scene) delete s;
  std::printf("objects %ld %d %ld checksum %ld\n", n, passes, lookups, sum);
  return 0;
}
