// The thesis's section 6 benchmarks on this machine: Object-Local Heaps
// against malloc/realloc, a linked list, a C array, std::vector and
// std::map. One measurement per run, named on the command line; it prints
// "PHASE NS" lines (nanoseconds of the timed phase). scripts/bench-olh.py
// interleaves the runs and reports medians.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "olh.h"

static uint64_t now_ns()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd()
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static volatile uint64_t sink;

static olh_pool *pool_of(const olh_type *t, olh_layout layout)
{
    olh_pool *p;
    olh_pool_options o = {};
    o.layout = layout;
    if (olh_pool_create(&p, t, &o) != OLH_OK) {
        fprintf(stderr, "olhbench: %s\n", olh_error());
        exit(1);
    }
    return p;
}

static void report(const char *phase, uint64_t t0)
{
    printf("%s %llu\n", phase, (unsigned long long)(now_ns() - t0));
}

// ---- 6.2: allocation and growing arrays ---------------------------------

static const olh_field_desc byte_fields[] = {{"c", 1, OLH_DATA, nullptr, 0}};
static const olh_type byte_type = {"char", 1, byte_fields};

static int alloc_bench(const std::string &v, uint32_t n)
{
    if (v == "malloc") {
        std::vector<char *> ptrs(n);
        uint64_t t0 = now_ns();
        for (uint32_t i = 0; i < n; i++)
            ptrs[i] = (char *)malloc(1);
        report("alloc", t0);
        sink = (uintptr_t)ptrs[n / 2];
    } else if (v == "olh") {
        std::vector<uint32_t> refs(n);
        olh_pool *p = pool_of(&byte_type, OLH_SPLIT);
        uint64_t t0 = now_ns();
        for (uint32_t i = 0; i < n; i++)
            refs[i] = olh_alloc(p);
        report("alloc", t0);
        sink = refs[n / 2];
    } else {
        return 2;
    }
    return 0;
}

static int grow_bench(const std::string &v, uint32_t n)
{
    if (v == "realloc") {
        char *a = nullptr, *b = nullptr;
        uint64_t t0 = now_ns();
        for (uint32_t i = 1; i <= n; i++) {
            a = (char *)realloc(a, i);
            b = (char *)realloc(b, i);
            a[i - 1] = (char)i;
            b[i - 1] = (char)i;
        }
        report("grow", t0);
        sink = (uint64_t)a[n / 2] + (uint64_t)b[n / 3];
    } else if (v == "olh") {
        olh_pool *pa = pool_of(&byte_type, OLH_SPLIT), *pb = pool_of(&byte_type, OLH_SPLIT);
        uint64_t t0 = now_ns();
        for (uint32_t i = 1; i <= n; i++) {
            uint32_t x = olh_grow(pa, 1), y = olh_grow(pb, 1);
            OLH_GET(pa, x, 0, char) = (char)i;
            OLH_GET(pb, y, 0, char) = (char)i;
        }
        report("grow", t0);
        sink = (uint64_t)OLH_GET(pa, n / 2, 0, char);
    } else {
        return 2;
    }
    return 0;
}

// ---- 6.3 and 6.4: lists of two-field elements -------------------------

struct cell {
    int64_t value;
    cell *next;
};
struct pair {
    int64_t value;
    int64_t other;
};
enum { C_VALUE, C_NEXT };
static const olh_field_desc cell_fields[] = {{"value", 8, OLH_DATA, nullptr, 0},
                                             {"next", 4, OLH_REF32, nullptr, 0}};
static const olh_type cell_type = {"cell", 2, cell_fields};

static void unrelated(std::vector<void *> &keep, double p)
{
    if (p > 0 && (double)(rnd() >> 11) / (double)(1ull << 53) < p)
        keep.push_back(malloc(16));
}

static void sum_run(void *ctx, uint32_t first, uint32_t count)
{
    auto *l = (std::pair<olh_pool *, int64_t> *)ctx;
    const int64_t *v = (const int64_t *)olh_at(l->first, first, C_VALUE);
    int64_t s = 0;
    for (uint32_t i = 0; i < count; i++)
        s += v[i];
    l->second += s;
}

static int64_t walk_olh(olh_pool *p, uint32_t head)
{
    const int64_t *value = OLH_COLUMN(p, C_VALUE, int64_t);
    const uint32_t *next = OLH_COLUMN(p, C_NEXT, uint32_t);
    int64_t s = 0;
    for (uint32_t x = head; x; x = next[x])
        s += value[x];
    return s;
}

static int64_t walk_list(const cell *c)
{
    int64_t s = 0;
    for (; c; c = c->next)
        s += c->value;
    return s;
}

// Builds an n-element list (with unrelated allocations at probability
// `noise` in between), deletes `del` of the elements at random, then times
// `reps` walks. `collect` (olh): one collection first, timed on its own.
static int list_bench(const std::string &v, uint32_t n, double noise, double del, int reps)
{
    std::vector<void *> keep;
    uint64_t t0;
    int64_t s = 0;
    auto doomed = [&]() { return del > 0 && (double)(rnd() >> 11) / (double)(1ull << 53) < del; };
    if (v == "list") {
        cell *head = nullptr, **tail = &head;
        for (uint32_t i = 0; i < n; i++) {
            cell *c = (cell *)malloc(sizeof *c);
            c->value = i;
            c->next = nullptr;
            *tail = c;
            tail = &c->next;
            unrelated(keep, noise);
        }
        for (cell **at = &head; *at;) {
            if (doomed()) {
                cell *d = *at;
                *at = d->next;
                free(d);
            } else {
                at = &(*at)->next;
            }
        }
        t0 = now_ns();
        for (int r = 0; r < reps; r++)
            s += walk_list(head);
        report("iterate", t0);
    } else if (v == "array" || v == "vector") {
        std::vector<pair> vec;
        pair *arr = nullptr;
        if (v == "vector") {
            for (uint32_t i = 0; i < n; i++) {
                vec.push_back(pair{i, 0});
                unrelated(keep, noise);
            }
            vec.erase(std::remove_if(vec.begin(), vec.end(), [&](const pair &) { return doomed(); }),
                      vec.end());
        } else {
            arr = (pair *)malloc(sizeof(pair) * n);
            uint32_t m = 0;
            for (uint32_t i = 0; i < n; i++) {
                if (!doomed())
                    arr[m++] = pair{i, 0};
                unrelated(keep, noise);
            }
            n = m;
        }
        const pair *data = v == "vector" ? vec.data() : arr;
        size_t len = v == "vector" ? vec.size() : n;
        t0 = now_ns();
        for (int r = 0; r < reps; r++)
            for (size_t i = 0; i < len; i++)
                s += data[i].value;
        report("iterate", t0);
    } else if (v == "olh" || v == "olh-map" || v == "olh-collected" || v == "olh-collected-map") {
        olh_pool *p = pool_of(&cell_type, OLH_SPLIT);
        uint32_t head = 0, tail = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t x = olh_alloc(p);
            OLH_GET(p, x, C_VALUE, int64_t) = i;
            if (tail)
                OLH_GET(p, tail, C_NEXT, uint32_t) = x;
            else
                head = x;
            tail = x;
            unrelated(keep, noise);
        }
        for (uint32_t prev = 0, x = head; x;) {
            uint32_t next = OLH_GET(p, x, C_NEXT, uint32_t);
            if (doomed()) {
                if (prev)
                    OLH_GET(p, prev, C_NEXT, uint32_t) = next;
                else
                    head = next;
                olh_free(p, x);
            } else {
                prev = x;
            }
            x = next;
        }
        if (v == "olh-collected" || v == "olh-collected-map") {
            olh_root root = {&head, p};
            olh_collect_options o = {OLH_ORDER_DEPTH, 0};
            t0 = now_ns();
            olh_collect(&p, 1, &root, 1, &o, nullptr);
            report("collect", t0);
        }
        t0 = now_ns();
        if (v == "olh" || v == "olh-collected") {
            for (int r = 0; r < reps; r++)
                s += walk_olh(p, head);
        } else {
            for (int r = 0; r < reps; r++) {
                std::pair<olh_pool *, int64_t> ctx(p, 0);
                olh_map_runs(p, sum_run, &ctx);
                s += ctx.second;
            }
        }
        report("iterate", t0);
    } else {
        return 2;
    }
    sink = (uint64_t)s;
    return 0;
}

// ---- 6.6: a binary search tree ------------------------------------------

enum { T_KEY, T_LEFT, T_RIGHT, T_VALUE };
// The hot fields (key, children) side by side in one group, the value apart.
static const olh_field_desc tnode_fields[] = {{"key", 8, OLH_DATA, nullptr, 0},
                                              {"left", 4, OLH_REF32, nullptr, 0},
                                              {"right", 4, OLH_REF32, nullptr, 0},
                                              {"value", 8, OLH_DATA, nullptr, 1}};
static const olh_type tnode_type = {"tnode", 4, tnode_fields};

// How a tree's nodes are reached through the pool's columns, per layout.
struct split_node {  // each field its own array
    uint64_t *key, *value;
    uint32_t *left, *right;
    explicit split_node(olh_pool *p)
        : key(OLH_COLUMN(p, T_KEY, uint64_t)), value(OLH_COLUMN(p, T_VALUE, uint64_t)),
          left(OLH_COLUMN(p, T_LEFT, uint32_t)), right(OLH_COLUMN(p, T_RIGHT, uint32_t)) {}
    uint64_t &k(uint32_t x) { return key[x]; }
    uint32_t &child(uint32_t x, bool l) { return l ? left[x] : right[x]; }
    uint64_t &val(uint32_t x) { return value[x]; }
};
struct whole_node {  // unsplit: the C struct of all four
    struct s {
        uint64_t key;
        uint32_t left, right;
        uint64_t value;
    } *n;
    explicit whole_node(olh_pool *p) : n(OLH_COLUMN(p, T_KEY, s)) {}
    uint64_t &k(uint32_t x) { return n[x].key; }
    uint32_t &child(uint32_t x, bool l) { return l ? n[x].left : n[x].right; }
    uint64_t &val(uint32_t x) { return n[x].value; }
};
struct hot_node {  // grouped: key and children together, the value apart
    struct s {
        uint64_t key;
        uint32_t left, right;
    } *n;
    uint64_t *value;
    explicit hot_node(olh_pool *p)
        : n(OLH_COLUMN(p, T_KEY, s)), value(OLH_COLUMN(p, T_VALUE, uint64_t)) {}
    uint64_t &k(uint32_t x) { return n[x].key; }
    uint32_t &child(uint32_t x, bool l) { return l ? n[x].left : n[x].right; }
    uint64_t &val(uint32_t x) { return value[x]; }
};

// Inserts every key (an unbalanced tree: random keys keep it shallow), then
// finds every probe. A pool moves only in a collection, so the columns are
// taken once before the inserts and again after the collection.
template <class Node>
static uint64_t olh_tree(olh_pool *p, const std::vector<uint64_t> &keys,
                         const std::vector<uint64_t> &probe, bool collect, olh_order order)
{
    uint32_t root = 0;
    uint64_t t0 = now_ns();
    Node t(p);
    for (uint32_t i = 0; i < keys.size(); i++) {
        uint64_t k = keys[i];
        uint32_t *at = &root;
        while (*at) {
            uint64_t here = t.k(*at);
            if (k == here)
                break;
            at = &t.child(*at, k < here);
        }
        if (!*at) {
            uint32_t x = olh_alloc(p);
            t.k(x) = k;
            *at = x;
        }
        t.val(*at) = i;
    }
    report("insert", t0);
    if (collect) {
        olh_root r = {&root, p};
        olh_collect_options o = {order, 0};
        t0 = now_ns();
        olh_collect(&p, 1, &r, 1, &o, nullptr);
        report("collect", t0);
    }
    uint64_t s = 0;
    t0 = now_ns();
    Node u(p);
    for (uint64_t k : probe) {
        uint32_t x = root;
        for (;;) {
            uint64_t here = u.k(x);
            if (k == here)
                break;
            x = u.child(x, k < here);
        }
        s += u.val(x);
    }
    report("lookup", t0);
    return s;
}

static int tree_bench(const std::string &v, uint32_t n)
{
    std::vector<uint64_t> keys(n);
    for (uint32_t i = 0; i < n; i++)
        keys[i] = rnd();
    std::vector<uint64_t> probe(keys);
    for (uint32_t i = n - 1; i > 0; i--)
        std::swap(probe[i], probe[rnd() % (i + 1)]);
    uint64_t s = 0, t0;
    if (v == "map") {
        std::map<uint64_t, uint64_t> m;
        t0 = now_ns();
        for (uint32_t i = 0; i < n; i++)
            m[keys[i]] = i;
        report("insert", t0);
        t0 = now_ns();
        for (uint32_t i = 0; i < n; i++)
            s += m.find(probe[i])->second;
        report("lookup", t0);
    } else {
        olh_layout layout;
        olh_order order = OLH_ORDER_MEMORY;
        bool collect = false;
        if (v == "olh-split")
            layout = OLH_SPLIT;
        else if (v == "olh-unsplit")
            layout = OLH_UNSPLIT;
        else if (v == "olh-grouped")
            layout = OLH_GROUPED;
        else if (v == "olh-grouped-depth")
            layout = OLH_GROUPED, order = OLH_ORDER_DEPTH, collect = true;
        else if (v == "olh-grouped-blocks")
            layout = OLH_GROUPED, order = OLH_ORDER_BLOCKS, collect = true;
        else
            return 2;
        olh_pool *p = pool_of(&tnode_type, layout);
        if (layout == OLH_SPLIT)
            s = olh_tree<split_node>(p, keys, probe, collect, order);
        else if (layout == OLH_UNSPLIT)
            s = olh_tree<whole_node>(p, keys, probe, collect, order);
        else
            s = olh_tree<hot_node>(p, keys, probe, collect, order);
    }
    sink = s;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: olhbench alloc malloc|olh N\n"
                "       olhbench grow realloc|olh N\n"
                "       olhbench list list|array|vector|olh|olh-map|olh-collected|olh-collected-map "
                "N NOISE DELETE REPS\n"
                "       olhbench tree map|olh-split|olh-unsplit|olh-grouped|olh-grouped-depth|"
                "olh-grouped-blocks N\n");
        return 2;
    }
    std::string bench = argv[1], v = argv[2];
    auto arg = [&](int i, double d) { return argc > i ? atof(argv[i]) : d; };
    int r = 2;
    if (bench == "alloc")
        r = alloc_bench(v, (uint32_t)arg(3, 4e6));
    else if (bench == "grow")
        r = grow_bench(v, (uint32_t)arg(3, 1e6));
    else if (bench == "list")
        r = list_bench(v, (uint32_t)arg(3, 1e6), arg(4, 0), arg(5, 0), (int)arg(6, 10));
    else if (bench == "tree")
        r = tree_bench(v, (uint32_t)arg(3, 1e6));
    if (r == 2)
        fprintf(stderr, "olhbench: unknown benchmark or variant: %s %s\n", argv[1], argv[2]);
    return r;
}
