// C++ operators new and delete in every form, through libcohort: alignment,
// nothrow, std::bad_alloc, and the new_handler loop.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <new>
#include <string>

static int failures;
#define CHECK(c) do { if (!(c)) { std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

static int handler_calls;
static void handler() {
  handler_calls++;
  std::set_new_handler(nullptr);   // next failure throws
}

struct alignas(64) Wide { char c[64]; };
struct alignas(4096) Page { char c[100]; };

int main() {
  auto group_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "cohort_group_of");
  if (!group_of) { std::fprintf(stderr, "not running under libcohort.so\n"); return 3; }
  const char *mode = std::getenv("COHORT_MODE");
  bool grouped = mode && mode[0] == 'a';

  int *i = new int(7);
  CHECK(*i == 7);
  if (grouped) CHECK(group_of(i) >= 0);
  delete i;
  int *arr = new int[100]();
  CHECK(arr[99] == 0);
  delete[] arr;
  void *raw = ::operator new(24);
  ::operator delete(raw, 24);   // sized delete
  // Sized deletes of every class, the next allocator's blocks handed on
  // with their size (its own sized delete) and ours freed as free does.
  for (std::size_t n = 1; n <= 5000; n += n / 3 + 1) {
    char *b = static_cast<char *>(::operator new(n));
    b[n - 1] = 1;
    ::operator delete(b, n);
    char *a = new char[n];
    ::operator delete[](a, n);
  }
  void *nt = ::operator new(24, std::nothrow);
  CHECK(nt != nullptr);
  ::operator delete(nt, std::nothrow);
  void *nta = ::operator new[](24, std::nothrow);
  ::operator delete[](nta, std::nothrow);

  Wide *w = new Wide;
  CHECK(reinterpret_cast<std::uintptr_t>(w) % 64 == 0);
  if (grouped) CHECK(group_of(w) >= 0);
  delete w;
  Page *pg = new Page[3];
  CHECK(reinterpret_cast<std::uintptr_t>(pg) % 4096 == 0);
  delete[] pg;
  void *al = ::operator new(100, std::align_val_t(256), std::nothrow);
  CHECK(al && reinterpret_cast<std::uintptr_t>(al) % 256 == 0);
  ::operator delete(al, std::align_val_t(256));

  // Impossible sizes: nothrow gives null, the throwing forms throw bad_alloc.
  volatile std::size_t huge = SIZE_MAX / 2;
  CHECK(::operator new(huge, std::nothrow) == nullptr);
  bool threw = false;
  try { void *p = ::operator new(huge); ::operator delete(p); } catch (const std::bad_alloc &) { threw = true; }
  CHECK(threw);
  threw = false;
  try { void *p = ::operator new[](huge, std::align_val_t(64)); ::operator delete[](p); } catch (const std::bad_alloc &) { threw = true; }
  CHECK(threw);

  // The new_handler runs before bad_alloc is thrown.
  std::set_new_handler(handler);
  threw = false;
  try { void *p = ::operator new(huge); ::operator delete(p); } catch (const std::bad_alloc &) { threw = true; }
  CHECK(threw && handler_calls == 1);

  std::map<std::string, int> m;
  for (int k = 0; k < 20000; k++) m[std::to_string(k * 7919 % 20011)] += k;
  long sum = 0;
  for (auto &kv : m) sum += kv.second + (long)kv.first.size();
  CHECK(sum > 0);

  if (failures) { std::fprintf(stderr, "test_new: %d check(s) failed\n", failures); return 1; }
  std::printf("test_new: ok\n");
  return 0;
}
