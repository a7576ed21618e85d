// A C++ program using std::map and std::string, whose output must be the same
// under any allocator and any Cohort mode.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  std::map<std::string, std::vector<int>> index;
  unsigned long x = 12345;
  for (int i = 0; i < n; i++) {
    x = x * 6364136223846793005ul + 1442695040888963407ul;
    std::string key = "k" + std::to_string((x >> 33) % 50000);
    index[key].push_back(i);
    if (i % 7 == 0) index.erase("k" + std::to_string((x >> 40) % 50000));
  }
  unsigned long h = 0;
  for (auto &kv : index) {
    for (char c : kv.first) h = h * 131 + (unsigned char)c;
    for (int v : kv.second) h = h * 31 + (unsigned)v;
  }
  std::printf("%zu keys, hash %lu\n", index.size(), h);
  return 0;
}
