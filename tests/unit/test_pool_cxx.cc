// The pool API from C++, reached by preloading libcohort.so rather than by
// linking it: the functions are weak references, found at run time. A pool
// serves a std::list through an allocator, and pooldestroy releases the
// nodes the list still holds after the list has forgotten them.
#include <cohort/pool.h>

#include <cstdio>
#include <cstdint>
#include <list>
#include <new>

#pragma weak poolcreate
#pragma weak poolalloc
#pragma weak poolfree
#pragma weak pooldestroy
extern "C" int cohort_group_of(const void *) __attribute__((weak));

template <class T> struct pool_allocator {
  using value_type = T;
  pooldesc *pd;
  explicit pool_allocator(pooldesc *p) : pd(p) {}
  template <class U> pool_allocator(const pool_allocator<U> &o) : pd(o.pd) {}
  T *allocate(std::size_t n) {
    void *p = poolalloc(pd, n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T *>(p);
  }
  void deallocate(T *p, std::size_t) { poolfree(pd, p); }
  template <class U> bool operator==(const pool_allocator<U> &o) const { return pd == o.pd; }
  template <class U> bool operator!=(const pool_allocator<U> &o) const { return pd != o.pd; }
};

int main() {
  if (!poolcreate || !cohort_group_of) { std::fprintf(stderr, "not running under libcohort.so\n"); return 3; }
  pooldesc a, b;
  poolcreate(&a);
  poolcreate(&b);
  int bad = 0;
  {
    std::list<long, pool_allocator<long>> la{pool_allocator<long>(&a)}, lb{pool_allocator<long>(&b)};
    for (long i = 0; i < 100000; i++) (i % 3 ? la : lb).push_back(i);
    long sa = 0, sb = 0;
    for (long v : la) sa += v;
    for (long v : lb) sb += v;
    if (sa + sb != 99999L * 100000 / 2) bad++;
    for (const long &v : la) if (cohort_group_of(&v) != 63) { bad++; break; }
    la.remove_if([](long v) { return v % 2; });   // frees through poolfree
    if (la.size() != 33333) bad++;
  }   // the lists' destructors poolfree what is left
  pooldestroy(&a);
  poolcreate(&a);   // the descriptor is a pool again
  auto *raw = new (poolalloc(&a, sizeof(std::list<int>))) std::list<int>();   // the list object in the pool too
  raw->push_back(1);   // its nodes from operator new
  raw->~list();
  poolfree(&a, raw);
  pooldestroy(&a);
  pooldestroy(&b);
  if (bad) { std::fprintf(stderr, "test_pool_cxx: %d check(s) failed\n", bad); return 1; }
  std::printf("test_pool_cxx: ok\n");
  return 0;
}
