// A list walk in a function with a landing pad (a guard's destructor runs
// when the call after the walk throws), for injected prefetches
// (tests/integration/test_prefetch.py): the load of the walk may move only if the
// function's exception table is read, and exceptions must pass through it
// as before. Prints the sum, the exceptions caught and the destructors run.
//
//   prefetch_unwind NODES ROUNDS
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

struct Node { Node *next; long val; char pad[48]; };
struct Guard { long *runs; ~Guard() { ++*runs; } };

__attribute__((noinline)) void maybe_throw(long sum, long round) {
  if (round % 3 == 0) throw std::runtime_error(std::to_string(sum));
}

__attribute__((noinline)) long walk(const Node *n, long round, long *dtors) {
  Guard g{dtors};
  long s = 0;
  for (; n; n = n->next) s += n->val;
  maybe_throw(s, round);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 3) { std::fprintf(stderr, "usage: prefetch_unwind NODES ROUNDS\n"); return 2; }
  long n = std::atol(argv[1]), rounds = std::atol(argv[2]);
  Node *head = nullptr;
  for (long i = 0; i < n; i++) head = new Node{head, i, {}};
  long total = 0, caught = 0, dtors = 0;
  for (long r = 0; r < rounds; r++) {
    try {
      total += walk(head, r, &dtors);
    } catch (const std::runtime_error &e) {
      caught++;
      total += std::atol(e.what());
    }
  }
  std::printf("total %ld caught %ld destructors %ld\n", total, caught, dtors);
  return 0;
}
