/* Object-Local Heaps: behaviour tests. Built twice, as test_olh and (with
 * -DOLH_DEBUG) test_olh_debug; tests/unit/test_olh.py runs both. With no
 * argument every test runs and "test_olh: ok" ends the output; with the
 * name of a misuse it commits it (the library should abort and say so). */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "olh.h"

#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ---- types used throughout ---------------------------------------------- */

enum { N_ID, N_NEXT, N_LEFT, N_OTHER, N_PAD };
static const struct olh_field_desc node_fields[] = {
    {"id", 8, OLH_DATA, NULL},
    {"next", 4, OLH_REF32, NULL},
    {"left", 2, OLH_REF16, NULL},
    {"other", 8, OLH_REF64, NULL},
    {"pad", 3, OLH_DATA, NULL},
};
static const struct olh_type node_type = {"node", 5, node_fields};
/* The same type, its fields in two groups for OLH_GROUPED. */
static const struct olh_field_desc grouped_fields[] = {
    {"id", 8, OLH_DATA, NULL, 0},
    {"next", 4, OLH_REF32, NULL, 0},
    {"left", 2, OLH_REF16, NULL, 1},
    {"other", 8, OLH_REF64, NULL, 1},
    {"pad", 3, OLH_DATA, NULL, 0},
};
static const struct olh_type grouped_type = {"node", 5, grouped_fields};

static olh_pool *make(const struct olh_type *t, enum olh_layout layout, uint32_t sub)
{
    olh_pool *p;
    if (layout == OLH_GROUPED && t == &node_type)
        t = &grouped_type;
    struct olh_pool_options o = {.layout = layout, .subpool_objects = sub};
    int r = olh_pool_create(&p, t, &o);
    if (r != OLH_OK) {
        fprintf(stderr, "create: %s: %s\n", olh_strerror(r), olh_error());
        exit(1);
    }
    return p;
}

#define ID(p, i) OLH_GET(p, i, N_ID, uint64_t)

/* ---- allocation ------------------------------------------------------- */

static void test_alloc_free_reuse(enum olh_layout layout)
{
    olh_pool *p = make(&node_type, layout, 64);
    enum { N = 1000 };
    uint32_t ix[N];
    for (int i = 0; i < N; i++) {
        ix[i] = olh_alloc(p);
        CHECK(ix[i] != 0 && olh_live(p, ix[i]));
        CHECK(ID(p, ix[i]) == 0 && OLH_GET(p, ix[i], N_NEXT, uint32_t) == 0);
        for (int j = 0; j < 3; j++)
            ((char *)olh_at(p, ix[i], N_PAD))[j] = (char)i;
        ID(p, ix[i]) = (uint64_t)i + 1;
    }
    for (int i = 0; i < N; i++) {  /* distinct, data kept */
        CHECK(ID(p, ix[i]) == (uint64_t)i + 1);
        CHECK(((char *)olh_at(p, ix[i], N_PAD))[2] == (char)i);
    }
    struct olh_pool_stats st;
    olh_pool_stats(p, &st);
    CHECK(st.live == N && st.subpools == (N + 1 + 63) / 64);
    /* Freed slots come back, zeroed. */
    for (int i = 0; i < N; i += 3)
        olh_free(p, ix[i]);
    for (int i = 0; i < N; i += 3)
        CHECK(!olh_live(p, ix[i]));
    int reused = 0;
    for (int i = 0; i < N; i += 3) {
        uint32_t j = olh_alloc(p);
        CHECK(ID(p, j) == 0 && ((char *)olh_at(p, j, N_PAD))[1] == 0);
        ID(p, j) = 7;
        for (int k = 0; k < N; k += 3)
            if (ix[k] == j)
                reused++;
    }
    /* all of them, but for the never-used slots left in the last sub-pool */
    CHECK(reused >= (N + 2) / 3 - ((N + 1 + 63) / 64 * 64 - 1 - N));
    olh_pool_stats(p, &st);
    CHECK(st.live == N && st.subpools == (N + 1 + 63) / 64);
    olh_pool_destroy(p);
}

static void test_alloc_near(void)
{
    olh_pool *p = make(&node_type, OLH_SPLIT, 64);
    uint32_t first = olh_alloc(p);
    for (int i = 0; i < 200; i++)
        olh_alloc(p);  /* sub-pool 0 full, and more */
    olh_free(p, 5);
    uint32_t n = olh_alloc_near(p, first);
    CHECK(n == 5);
    CHECK(olh_local_ok(p, first, n));
    uint32_t far = olh_alloc_near(p, first);  /* no room left near first */
    CHECK(!olh_local_ok(p, first, far));
    olh_pool_destroy(p);
}

static void test_grow(void)
{
    static const struct olh_field_desc f[] = {{"v", 8, OLH_DATA, NULL}};
    static const struct olh_type t = {"array", 1, f};
    olh_pool *p = make(&t, OLH_SPLIT, 64);
    uint32_t a = olh_alloc(p);
    uint32_t first = olh_grow(p, 1000);
    CHECK(first == a + 1);
    /* One field: the whole pool is one array, across sub-pools. */
    uint64_t *v = olh_at(p, first, 0);
    for (uint32_t i = 0; i < 1000; i++) {
        CHECK(olh_live(p, first + i));
        v[i] = i;
    }
    for (uint32_t i = 0; i < 1000; i++)
        CHECK(OLH_GET(p, first + i, 0, uint64_t) == i);
    olh_free(p, first + 10);
    CHECK(olh_grow(p, 1) == first + 1000);  /* after everything, not in the hole */
    CHECK(olh_alloc(p) == first + 10);  /* the hole is refilled by allocation */
    olh_pool_destroy(p);
}

/* ---- layouts ---------------------------------------------------------- */

/* The same program on a split and an unsplit pool computes the same. */
static uint64_t layout_program(enum olh_layout layout)
{
    rng = 12345;
    olh_pool *p = make(&node_type, layout, 128);
    enum { N = 5000 };
    static uint32_t ix[N];
    for (int i = 0; i < N; i++) {
        ix[i] = olh_alloc(p);
        ID(p, ix[i]) = rnd();
        OLH_GET(p, ix[i], N_NEXT, uint32_t) = i ? ix[rnd() % i] : 0;
        if (rnd() % 4 == 0 && i) {  /* replace an earlier one: its slot is reused */
            int j = (int)(rnd() % i);
            olh_free(p, ix[j]);
            ix[j] = olh_alloc(p);
            ID(p, ix[j]) = (uint64_t)i;
        }
    }
    uint64_t sum = 0;
    struct olh_iter it = olh_iter_begin(p);
    for (uint32_t i; (i = olh_iter_next(&it)) != 0;)
        sum = sum * 31 + ID(p, i) + i * 7 + OLH_GET(p, i, N_NEXT, uint32_t);
    olh_pool_destroy(p);
    return sum;
}

static void test_layouts(void)
{
    CHECK(layout_program(OLH_SPLIT) == layout_program(OLH_UNSPLIT));
    CHECK(layout_program(OLH_SPLIT) == layout_program(OLH_GROUPED));
    olh_pool *g = make(&node_type, OLH_GROUPED, 64);
    CHECK(olh_stride(g, N_ID) == 16 && olh_stride(g, N_NEXT) == 16 && olh_stride(g, N_PAD) == 16);
    CHECK(olh_stride(g, N_LEFT) == 16 && olh_stride(g, N_OTHER) == 16);
    uint32_t x = olh_alloc(g);
    CHECK((char *)olh_at(g, x, N_NEXT) - (char *)olh_at(g, x, N_ID) == 8);
    CHECK((char *)olh_at(g, x, N_PAD) - (char *)olh_at(g, x, N_ID) == 12);
    CHECK((char *)olh_at(g, x, N_OTHER) - (char *)olh_at(g, x, N_LEFT) == 8);
    /* Each group is one array across sub-pools. */
    for (int i = 0; i < 300; i++)
        olh_alloc(g);
    CHECK((char *)olh_at(g, x + 200, N_LEFT) - (char *)olh_at(g, x, N_LEFT) == 16 * 200);
    olh_pool_destroy(g);
    olh_pool *s = make(&node_type, OLH_SPLIT, 64), *u = make(&node_type, OLH_UNSPLIT, 64);
    CHECK(olh_stride(s, N_ID) == 8 && olh_stride(s, N_PAD) == 3);
    CHECK(olh_stride(u, N_ID) == olh_stride(u, N_PAD) && olh_stride(u, N_ID) % 8 == 0);
    uint32_t a = olh_alloc(s), b = olh_alloc(s);
    CHECK((char *)olh_at(s, b, N_ID) - (char *)olh_at(s, a, N_ID) == 8);
    a = olh_alloc(u), b = olh_alloc(u);
    CHECK((char *)olh_at(u, b, N_ID) - (char *)olh_at(u, a, N_ID) == olh_stride(u, 0));
    CHECK((uintptr_t)olh_at(u, a, N_OTHER) % 8 == 0);
    olh_pool_destroy(s);
    olh_pool_destroy(u);
}

static void test_nested(void)
{
    static const struct olh_field_desc point[] = {{"x", 4, OLH_DATA, NULL}, {"y", 4, OLH_DATA, NULL}};
    static const struct olh_type point_t = {"point", 2, point};
    static const struct olh_field_desc seg[] = {
        {"from", 0, OLH_DATA, &point_t}, {"to", 0, OLH_DATA, &point_t}, {"next", 4, OLH_REF32, NULL}};
    static const struct olh_type seg_t = {"segment", 3, seg};
    olh_pool *p = make(&seg_t, OLH_SPLIT, 0);
    CHECK(p->nfields == 5);
    CHECK(olh_field_index(p, "to.y") == 3 && olh_field_index(p, "next") == 4);
    CHECK(strcmp(olh_field_name(p, 0), "from.x") == 0);
    CHECK(olh_field_kind(p, 4) == OLH_REF32 && olh_field_size(p, 1) == 4);
    CHECK(olh_field_index(p, "nope") == -1);
    olh_pool_destroy(p);
}

/* ---- references ------------------------------------------------------- */

static void test_references(void)
{
    olh_pool *p = make(&node_type, OLH_SPLIT, 256), *q = make(&node_type, OLH_UNSPLIT, 0);
    uint32_t idx[600];
    for (int i = 0; i < 600; i++)
        idx[i] = olh_alloc(p);
    /* local: round trip within a sub-pool, every slot */
    for (int i = 0; i < 255; i++)
        for (int j = 0; j < 255; j += 17) {
            CHECK(olh_local_ok(p, idx[i], idx[j]));
            olh_ref16 r = olh_ref16_make(p, idx[i], idx[j]);
            CHECK(r != 0 && olh_ref16_index(p, idx[i], r) == idx[j]);
        }
    CHECK(olh_ref16_make(p, idx[3], 0) == 0 && olh_ref16_index(p, idx[3], 0) == 0);
    CHECK(!olh_local_ok(p, idx[0], idx[599]));
    CHECK(olh_local_ok(p, idx[0], 0));
    /* global: round trip, pool lookup */
    uint32_t k = olh_alloc(q);
    olh_gref g = olh_gref_make(q, k), h = olh_gref_make(p, idx[599]);
    CHECK(g && h && g != h);
    CHECK(olh_gref_pool(g) == q && olh_gref_index(g) == k);
    CHECK(olh_gref_pool(h) == p && olh_gref_index(h) == idx[599]);
    CHECK(olh_gref_make(p, 0) == 0);
    CHECK(olh_pool_of(0) == NULL);
    olh_pool_destroy(q);
    CHECK(olh_pool_of(g) == NULL);
    olh_pool_destroy(p);
}

/* ---- iteration -------------------------------------------------------- */

struct seen {
    uint32_t *list;
    uint32_t n;
};

static void note_index(void *ctx, uint32_t i)
{
    struct seen *s = ctx;
    s->list[s->n++] = i;
}

static olh_pool *runs_pool;
static void note_run(void *ctx, uint32_t first, uint32_t count)
{
    struct seen *s = ctx;
    CHECK(count > 0);
    CHECK(first == 1 || !olh_live(runs_pool, first - 1));  /* maximal runs */
    CHECK(!olh_live(runs_pool, first + count));
    /* a field of a run is an array */
    uint64_t *ids = olh_at(runs_pool, first, N_ID);
    for (uint32_t k = 0; k < count; k++) {
        CHECK(ids[k * olh_stride(runs_pool, N_ID) / 8] == first + k);
        s->list[s->n++] = first + k;
    }
}

static void test_iteration(enum olh_layout layout)
{
    olh_pool *p = make(&node_type, layout, 64);
    enum { N = 20000 };
    static char live[N + 2];
    static uint32_t a[N + 2], b[N + 2], c[N + 2];
    for (int i = 0; i < N; i++) {
        uint32_t x = olh_alloc(p);
        CHECK(x == (uint32_t)i + 1);
        ID(p, x) = x;
        live[x] = 1;
    }
    for (int i = 0; i < N / 2; i++) {
        uint32_t x = 1 + rnd() % N;
        if (live[x])
            olh_free(p, x), live[x] = 0;
    }
    for (uint32_t x = 1; x <= 640; x++)  /* ten whole sub-pools */
        if (live[x])
            olh_free(p, x), live[x] = 0;
    uint32_t expect = 0;
    for (uint32_t x = 1; x <= N; x++)
        expect += live[x];
    struct seen s1 = {a, 0}, s2 = {b, 0}, s3 = {c, 0};
    struct olh_iter it = olh_iter_begin(p);
    for (uint32_t x; (x = olh_iter_next(&it)) != 0;)
        a[s1.n++] = x;
    olh_map(p, note_index, &s2);
    runs_pool = p;
    olh_map_runs(p, note_run, &s3);
    CHECK(s1.n == expect && s2.n == expect && s3.n == expect);
    for (uint32_t i = 0; i < expect; i++) {
        CHECK(live[a[i]] && ID(p, a[i]) == a[i]);
        CHECK(i == 0 || a[i] > a[i - 1]);
        CHECK(b[i] == a[i] && c[i] == a[i]);
    }
    /* An empty pool yields nothing. */
    olh_pool *e = make(&node_type, layout, 0);
    it = olh_iter_begin(e);
    CHECK(olh_iter_next(&it) == 0);
    olh_pool_destroy(e);
    olh_pool_destroy(p);
}

/* ---- collection ------------------------------------------------------- */

/* A random graph over two pools, with every kind of reference, some objects
 * freed before linking, some unreachable; a shadow copy of its edges by id
 * checks that the collection preserved exactly the reachable part. */
struct shadow {
    uint64_t next, left, other;  /* target ids; 0: none */
    char reachable;
};

enum { GA = 6000, GB = 3000 };
static struct shadow sh[GA + GB + 1];

static void check_graph(olh_pool *A, olh_pool *B, uint32_t root_a, olh_gref root_b,
                        uint64_t root_a_id, uint64_t root_b_id)
{
    static uint32_t where[GA + GB + 1];
    static olh_pool *pool_of_id[GA + GB + 1];
    memset(where, 0, sizeof where);
    uint64_t count = 0;
    olh_pool *both[2] = {A, B};
    for (int k = 0; k < 2; k++) {
        struct olh_iter it = olh_iter_begin(both[k]);
        for (uint32_t x; (x = olh_iter_next(&it)) != 0;) {
            uint64_t id = ID(both[k], x);
            CHECK(id >= 1 && id <= GA + GB && sh[id].reachable && !where[id]);
            where[id] = x;
            pool_of_id[id] = both[k];
            count++;
        }
    }
    uint64_t reachable = 0;
    for (int id = 1; id <= GA + GB; id++)
        reachable += sh[id].reachable;
    CHECK(count == reachable);
    for (uint64_t id = 1; id <= GA + GB; id++) {
        if (!sh[id].reachable)
            continue;
        olh_pool *p = pool_of_id[id];
        uint32_t x = where[id];
        uint32_t n = OLH_GET(p, x, N_NEXT, uint32_t);
        CHECK(sh[id].next ? (n && ID(p, n) == sh[id].next) : n == 0);
        olh_ref16 l = OLH_GET(p, x, N_LEFT, uint16_t);
        uint32_t li = olh_ref16_index(p, x, l);
        CHECK(sh[id].left ? (li && olh_live(p, li) && ID(p, li) == sh[id].left) : l == 0);
        olh_gref g = OLH_GET(p, x, N_OTHER, uint64_t);
        if (sh[id].other) {
            olh_pool *q = olh_gref_pool(g);
            CHECK(q && ID(q, olh_gref_index(g)) == sh[id].other);
        } else {
            CHECK(g == 0);
        }
    }
    CHECK(ID(A, root_a) == root_a_id);
    CHECK(ID(olh_gref_pool(root_b), olh_gref_index(root_b)) == root_b_id);
}

static void mark_reachable(uint64_t id)
{
    static uint64_t stack[3 * (GA + GB) + 8];
    uint64_t top = 0;
    stack[top++] = id;
    while (top) {
        uint64_t x = stack[--top];
        if (!x || sh[x].reachable)
            continue;
        sh[x].reachable = 1;
        stack[top++] = sh[x].next;
        stack[top++] = sh[x].left;
        stack[top++] = sh[x].other;
    }
}

static void test_random_graphs(enum olh_order order, enum olh_layout layout, uint32_t sub,
                               int rounds)
{
    for (int round = 0; round < rounds; round++) {
        olh_pool *A = make(&node_type, layout, sub), *B = make(&node_type, OLH_UNSPLIT, 64);
        static uint32_t ia[GA + 1], ib[GB + 1];
        memset(sh, 0, sizeof sh);
        /* Allocate, freeing some at random as we go (holes). */
        for (int i = 1; i <= GA; i++) {
            ia[i] = olh_alloc(A);
            ID(A, ia[i]) = (uint64_t)i;
            if (rnd() % 5 == 0) {
                uint32_t x = olh_alloc(A);
                olh_free(A, x);
            }
        }
        for (int i = 1; i <= GB; i++) {
            ib[i] = olh_alloc(B);
            ID(B, ib[i]) = (uint64_t)(GA + i);
        }
        /* Edges: next within the pool, left within the sub-pool, other to
         * either pool. Density varies by round: lists, trees, DAGs, cycles. */
        int density = 1 + round % 4;
        for (int i = 1; i <= GA + GB; i++) {
            int in_a = i <= GA;
            olh_pool *p = in_a ? A : B;
            uint32_t x = in_a ? ia[i] : ib[i - GA];
            if (rnd() % 4 < (unsigned)density) {
                int j = in_a ? 1 + (int)(rnd() % GA) : GA + 1 + (int)(rnd() % GB);
                if (round % 4 == 0)  /* a list: the next one */
                    j = (i % (in_a ? GA : GB)) + (in_a ? 1 : GA + 1);
                OLH_GET(p, x, N_NEXT, uint32_t) = in_a ? ia[j] : ib[j - GA];
                sh[i].next = (uint64_t)j;
            }
            if (rnd() % 4 < (unsigned)density) {
                /* a neighbour in the same sub-pool */
                uint32_t base = x & ~p->mask, cand = base | (uint32_t)(rnd() % (p->mask + 1));
                if (olh_live(p, cand)) {
                    OLH_GET(p, x, N_LEFT, uint16_t) = olh_ref16_make(p, x, cand);
                    sh[i].left = ID(p, cand);
                }
            }
            if (rnd() % 8 < (unsigned)density) {
                int j = 1 + (int)(rnd() % (GA + GB));
                olh_gref g = j <= GA ? olh_gref_make(A, ia[j]) : olh_gref_make(B, ib[j - GA]);
                OLH_GET(p, x, N_OTHER, uint64_t) = g;
                sh[i].other = (uint64_t)j;
            }
        }
        uint32_t root_a = ia[1 + rnd() % GA];
        uint64_t root_a_id = ID(A, root_a);
        olh_gref root_b = olh_gref_make(B, ib[1 + rnd() % GB]);
        uint64_t root_b_id = ID(B, olh_gref_index(root_b));
        olh_gref null_root = 0;
        mark_reachable(root_a_id);
        mark_reachable(root_b_id);
        uint64_t reachable = 0;
        for (int id = 1; id <= GA + GB; id++)
            reachable += sh[id].reachable;

        olh_pool *pools[2] = {A, B};
        struct olh_root roots[4] = {
            {&root_a, A}, {&root_b, NULL}, {&null_root, NULL}, {&root_a, A} /* twice */};
        struct olh_collect_options o = {.order = order};
        struct olh_collect_stats st;
        int r = olh_collect(pools, 2, roots, 4, &o, &st);
        CHECK(r == OLH_OK);
        CHECK(st.live == reachable && st.freed == (uint64_t)GA + GB - reachable);
        check_graph(A, B, root_a, root_b, root_a_id, root_b_id);
        /* The compacted pools are dense: only cluster placement leaves holes. */
        struct olh_pool_stats ps;
        olh_pool_stats(A, &ps);
        CHECK(ps.collections == 1);
        /* Allocation goes on after a collection, and a second collection
         * keeps everything. */
        uint32_t extra = olh_alloc(A);
        ID(A, extra) = 0;
        olh_free(A, extra);
        r = olh_collect(pools, 2, roots, 2, &o, &st);
        CHECK(r == OLH_OK && st.live == reachable && st.freed == 0);
        check_graph(A, B, root_a, root_b, root_a_id, root_b_id);
        olh_pool_destroy(A);
        olh_pool_destroy(B);
    }
}

static void count_runs(void *ctx, uint32_t first, uint32_t count)
{
    uint32_t *c = ctx;
    c[0]++;
    c[1] += count;
    (void)first;
}

/* A list collected depth first becomes an array in list order. */
static void test_list_order(void)
{
    static const struct olh_field_desc f[] = {{"v", 8, OLH_DATA, NULL}, {"next", 4, OLH_REF32, NULL}};
    static const struct olh_type t = {"cell", 2, f};
    olh_pool *p = make(&t, OLH_SPLIT, 0);
    olh_pool *noise = make(&t, OLH_SPLIT, 0);
    enum { N = 50000 };
    uint32_t head = 0;
    /* Built backwards with frees in between: scattered. */
    for (int i = N; i >= 1; i--) {
        uint32_t x = olh_alloc(p);
        OLH_GET(p, x, 0, uint64_t) = (uint64_t)i;
        OLH_GET(p, x, 1, uint32_t) = head;
        head = x;
        if (i % 3 == 0)
            olh_free(p, olh_alloc(p));
    }
    struct olh_root root = {&head, p};
    struct olh_collect_options o = {.order = OLH_ORDER_DEPTH};
    CHECK(olh_collect(&p, 1, &root, 1, &o, NULL) == OLH_OK);
    uint32_t x = head;
    for (uint32_t i = 1; i <= N; i++) {
        CHECK(x == i && OLH_GET(p, x, 0, uint64_t) == i);
        x = OLH_GET(p, x, 1, uint32_t);
    }
    CHECK(x == 0);
    /* Compacted: one run over every sub-pool. */
    uint32_t runs[2] = {0, 0};
    olh_map_runs(p, count_runs, runs);
    CHECK(runs[0] == 1 && runs[1] == N);
    /* The memory order keeps the relative order: the list stays reversed. */
    o.order = OLH_ORDER_MEMORY;
    CHECK(olh_collect(&p, 1, &root, 1, &o, NULL) == OLH_OK);
    CHECK(head == 1);
    /* Without roots everything goes. */
    struct olh_collect_stats st;
    CHECK(olh_collect(&p, 1, NULL, 0, &o, &st) == OLH_OK && st.live == 0 && st.freed == N);
    struct olh_iter it = olh_iter_begin(p);
    CHECK(olh_iter_next(&it) == 0);
    /* A root into a pool not collected is refused, nothing changed. */
    uint32_t y = olh_alloc(noise);
    struct olh_root wrong = {&y, noise};
    CHECK(olh_collect(&p, 1, &wrong, 1, &o, NULL) == OLH_EINVAL);
    CHECK(strstr(olh_error(), "not being collected"));
    olh_pool_destroy(noise);
    olh_pool_destroy(p);
}

/* A complete binary tree: breadth first puts a node's children at 2i, 2i+1;
 * blocks keep each small subtree together. */
static void test_tree_orders(void)
{
    static const struct olh_field_desc f[] = {
        {"key", 8, OLH_DATA, NULL}, {"l", 4, OLH_REF32, NULL}, {"r", 4, OLH_REF32, NULL}};
    static const struct olh_type t = {"tnode", 3, f};
    for (int order = OLH_ORDER_DEPTH; order <= OLH_ORDER_BLOCKS; order++) {
        olh_pool *p = make(&t, OLH_UNSPLIT, 0);
        enum { LEVELS = 12, N = (1 << LEVELS) - 1 };
        static uint32_t at[N + 1];
        for (uint32_t k = N; k >= 1; k--) {  /* allocated in reverse, with holes */
            at[k] = olh_alloc(p);
            olh_free(p, olh_alloc(p));
            olh_alloc(p);
        }
        for (uint32_t k = 1; k <= N; k++) {
            OLH_GET(p, at[k], 0, uint64_t) = k;
            if (2 * k <= N) {
                OLH_GET(p, at[k], 1, uint32_t) = at[2 * k];
                OLH_GET(p, at[k], 2, uint32_t) = at[2 * k + 1];
            }
        }
        uint32_t root = at[1];
        struct olh_root r = {&root, p};
        struct olh_collect_options o = {.order = (enum olh_order)order, .block = 7};
        CHECK(olh_collect(&p, 1, &r, 1, &o, NULL) == OLH_OK);
        CHECK(root == 1);
        for (uint32_t x = 1; x <= N; x++) {
            uint64_t k = OLH_GET(p, x, 0, uint64_t);
            uint32_t l = OLH_GET(p, x, 1, uint32_t), rr = OLH_GET(p, x, 2, uint32_t);
            if (order == OLH_ORDER_BREADTH)
                CHECK(k == x);
            if (order == OLH_ORDER_DEPTH && l)
                CHECK(l == x + 1);
            if (order == OLH_ORDER_BLOCKS && k < 8)  /* the first block: the top three levels */
                CHECK(x == k);
            if (l) {
                CHECK(OLH_GET(p, l, 0, uint64_t) == 2 * k);
                CHECK(OLH_GET(p, rr, 0, uint64_t) == 2 * k + 1);
            }
        }
        olh_pool_destroy(p);
    }
}

/* Clusters of local references bigger than what is left of a sub-pool
 * start a new one, and stay whole. */
static void test_local_clusters(void)
{
    olh_pool *p = make(&node_type, OLH_SPLIT, 64);
    /* Rings of 40 objects linked by local references, each ring in its own
     * sub-pool; roots to each. */
    enum { RINGS = 20, LEN = 40 };
    uint32_t roots_ix[RINGS];
    struct olh_root roots[RINGS];
    for (int r = 0; r < RINGS; r++) {
        uint32_t first = olh_grow(p, 64 - (p->limit & 63) ? 64 - (p->limit & 63) : 64);
        (void)first;
        uint32_t base = p->limit - 64;  /* a sub-pool of our own */
        if ((base & 63) != 0)
            base = (p->limit & ~63u) - 64;
        uint32_t ring[LEN];
        int n = 0;
        for (uint32_t x = base; x < base + 64 && n < LEN; x++)
            if (olh_live(p, x) && x != 0)
                ring[n++] = x;
        for (uint32_t x = base; x < base + 64; x++)  /* free the rest of the sub-pool */
            if (olh_live(p, x) && x != 0) {
                int in = 0;
                for (int k = 0; k < n; k++)
                    in |= ring[k] == x;
                if (!in)
                    olh_free(p, x);
            }
        for (int k = 0; k < n; k++) {
            ID(p, ring[k]) = (uint64_t)(r * 100 + k);
            OLH_GET(p, ring[k], N_LEFT, uint16_t) = olh_ref16_make(p, ring[k], ring[(k + 1) % n]);
        }
        roots_ix[r] = ring[0];
        roots[r] = (struct olh_root){&roots_ix[r], p};
    }
    struct olh_collect_options o = {.order = OLH_ORDER_BREADTH};
    struct olh_collect_stats st;
    CHECK(olh_collect(&p, 1, roots, RINGS, &o, &st) == OLH_OK);
    CHECK(st.subpools == RINGS);  /* 40 + 40 > 64: one ring per sub-pool */
    for (int r = 0; r < RINGS; r++) {
        uint32_t x = roots_ix[r];
        for (int k = 0; k < LEN; k++) {
            CHECK(ID(p, x) == (uint64_t)(r * 100 + k % LEN));
            x = olh_ref16_index(p, x, OLH_GET(p, x, N_LEFT, uint16_t));
        }
        CHECK(x == roots_ix[r]);
    }
    olh_pool_destroy(p);
}

/* A full pool whose clusters would need a third sub-pool if each started a
 * fresh one (sub-pool 0 has one slot less: index 0) keeps them in their own
 * sub-pools instead; and a full pool stays full. */
static uint32_t local_ring(olh_pool *p, int n)
{
    uint32_t first = 0, prev = 0;
    for (int i = 0; i < n; i++) {
        uint32_t x = olh_alloc(p);
        OLH_GET(p, x, N_ID, uint64_t) = (uint64_t)(n * 1000 + i);
        if (prev)
            OLH_GET(p, prev, N_LEFT, olh_ref16) = olh_ref16_make(p, prev, x);
        else
            first = x;
        prev = x;
    }
    OLH_GET(p, prev, N_LEFT, olh_ref16) = olh_ref16_make(p, prev, first);
    return first;
}

static void test_clusters_in_a_full_pool(void)
{
    for (int order = OLH_ORDER_MEMORY; order <= OLH_ORDER_BLOCKS; order++) {
        struct olh_pool_options o = {.subpool_objects = 64, .max_objects = 128};
        olh_pool *p;
        CHECK(olh_pool_create(&p, &node_type, &o) == OLH_OK);
        uint32_t r[2];
        r[1] = local_ring(p, 63);
        r[0] = local_ring(p, 64);
        struct olh_root roots[2] = {{&r[0], p}, {&r[1], p}};
        struct olh_collect_options co = {.order = (enum olh_order)order};
        struct olh_collect_stats st;
        CHECK(olh_collect(&p, 1, roots, 2, &co, &st) == OLH_OK);
        CHECK(st.live == 127 && st.subpools == 2 && p->limit <= 128);
        for (int k = 0; k < 2; k++) {
            int n = k ? 63 : 64;
            uint32_t x = r[k];
            for (int i = 0; i < n; i++) {
                CHECK(OLH_GET(p, x, N_ID, uint64_t) == (uint64_t)(n * 1000 + i));
                x = olh_ref16_index(p, x, OLH_GET(p, x, N_LEFT, olh_ref16));
            }
            CHECK(x == r[k]);
        }
        CHECK(olh_alloc(p) == 0 && strstr(olh_error(), "is full"));
        olh_pool_destroy(p);
    }
}

/* ---- bad descriptors -------------------------------------------------- */

static void expect_einval(const struct olh_type *t, const struct olh_pool_options *o,
                          const char *words)
{
    olh_pool *p = (olh_pool *)1;
    int r = olh_pool_create(&p, t, o);
    if (r != OLH_EINVAL || p != NULL || !strstr(olh_error(), words)) {
        fprintf(stderr, "expected EINVAL with '%s', got %d '%s'\n", words, r, olh_error());
        exit(1);
    }
}

static void test_bad_descriptors(void)
{
    static const struct olh_type empty = {"empty", 0, NULL};
    expect_einval(&empty, NULL, "has no fields");
    expect_einval(NULL, NULL, "no type");
    static const struct olh_field_desc wrong32[] = {{"next", 8, OLH_REF32, NULL}};
    static const struct olh_type w32 = {"bad", 1, wrong32};
    expect_einval(&w32, NULL, "must be 4 bytes, not 8");
    static const struct olh_field_desc wrong16[] = {{"v", 4, OLH_DATA, NULL}, {"l", 4, OLH_REF16, NULL}};
    static const struct olh_type w16 = {"bad16", 2, wrong16};
    expect_einval(&w16, NULL, "must be 2 bytes, not 4");
    static const struct olh_field_desc zero[] = {{"z", 0, OLH_DATA, NULL}};
    static const struct olh_type z = {"zero", 1, zero};
    expect_einval(&z, NULL, "has size 0");
    static const struct olh_field_desc odd[] = {{"k", 4, (enum olh_kind)9, NULL}};
    static const struct olh_type oddt = {"odd", 1, odd};
    expect_einval(&oddt, NULL, "unknown kind");
    /* A type inside itself. */
    static struct olh_field_desc loop[1];
    static struct olh_type loopt = {"loop", 1, loop};
    loop[0] = (struct olh_field_desc){"self", 0, OLH_DATA, &loopt};
    expect_einval(&loopt, NULL, "nests deeper");
    static struct olh_field_desc many[OLH_MAX_FIELDS + 1];
    for (int i = 0; i <= OLH_MAX_FIELDS; i++)
        many[i] = (struct olh_field_desc){NULL, 1, OLH_DATA, NULL};
    static const struct olh_type manyt = {"many", OLH_MAX_FIELDS + 1, many};
    expect_einval(&manyt, NULL, "more than 64 fields");
    struct olh_pool_options o = {.subpool_objects = 1000};
    expect_einval(&node_type, &o, "not a power of two");
    o.subpool_objects = 65536;
    expect_einval(&node_type, &o, "local references allows at most 32768");
    o.subpool_objects = 0;
    o.max_objects = 1ull << 40;
    expect_einval(&node_type, &o, "at most 2^31");
    o.max_objects = 0;
    o.layout = (enum olh_layout)7;
    expect_einval(&node_type, &o, "unknown layout");
    CHECK(strcmp(olh_strerror(OLH_EINVAL), "invalid argument") == 0);
}

/* A pool that fills up says so. */
static void test_full(void)
{
    struct olh_pool_options o = {.subpool_objects = 64, .max_objects = 128};
    olh_pool *p;
    CHECK(olh_pool_create(&p, &node_type, &o) == OLH_OK);
    int n = 0;
    while (olh_alloc(p))
        n++;
    CHECK(n == 127);
    CHECK(strstr(olh_error(), "is full"));
    CHECK(olh_grow(p, 1) == 0);
    olh_pool_destroy(p);
}

/* ---- threads ---------------------------------------------------------- */

static void *thread_main(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 7919 + 1;
    for (int round = 0; round < 20; round++) {
        olh_pool *p;
        static const struct olh_field_desc f[] = {{"v", 8, OLH_DATA, NULL}, {"next", 4, OLH_REF32, NULL}};
        static const struct olh_type t = {"tcell", 2, f};
        if (olh_pool_create(&p, &t, NULL) != OLH_OK)
            return (void *)1;
        uint32_t head = 0;
        for (int i = 0; i < 5000; i++) {
            uint32_t x = olh_alloc(p);
            seed = seed * 6364136223846793005ull + 1;
            OLH_GET(p, x, 0, uint64_t) = (uint64_t)i;
            OLH_GET(p, x, 1, uint32_t) = head;
            head = x;
            if (seed >> 60 == 0)
                olh_free(p, olh_alloc(p));
        }
        olh_gref g = olh_gref_make(p, head);
        struct olh_root r = {&g, NULL};
        if (olh_collect(&p, 1, &r, 1, NULL, NULL) != OLH_OK)
            return (void *)2;
        olh_pool *q = olh_gref_pool(g);
        if (q != p)
            return (void *)3;
        uint32_t x = olh_gref_index(g);
        for (int i = 4999; i >= 0; i--) {
            if (OLH_GET(p, x, 0, uint64_t) != (uint64_t)i)
                return (void *)4;
            x = OLH_GET(p, x, 1, uint32_t);
        }
        olh_pool_destroy(p);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[8];
    for (uintptr_t i = 0; i < 8; i++)
        CHECK(pthread_create(&t[i], NULL, thread_main, (void *)i) == 0);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
}

/* ---- misuse: each should abort with a message ------------------------- */

static int misuse(const char *what)
{
    olh_pool *p = make(&node_type, OLH_SPLIT, 64);
    uint32_t a = olh_alloc(p), b = olh_alloc(p);
    if (!strcmp(what, "double-free")) {
        olh_free(p, a);
        olh_free(p, a);
    } else if (!strcmp(what, "free-unallocated")) {
        olh_free(p, 999);
    } else if (!strcmp(what, "free-null")) {
        olh_free(p, 0);
    } else if (!strcmp(what, "use-freed")) {  /* debug builds */
        olh_free(p, b);
        printf("%llu\n", (unsigned long long)ID(p, b));
    } else if (!strcmp(what, "use-null")) {  /* debug builds */
        printf("%llu\n", (unsigned long long)ID(p, 0));
    } else if (!strcmp(what, "local-range")) {  /* debug builds */
        uint32_t far = 0;
        for (int i = 0; i < 100; i++)
            far = olh_alloc(p);
        OLH_GET(p, a, N_LEFT, uint16_t) = olh_ref16_make(p, a, far);
    } else if (!strcmp(what, "collect-freed")) {
        OLH_GET(p, a, N_NEXT, uint32_t) = b;
        olh_free(p, b);
        struct olh_root r = {&a, p};
        olh_collect(&p, 1, &r, 1, NULL, NULL);
    } else if (!strcmp(what, "collect-freed-root")) {
        olh_free(p, a);
        struct olh_root r = {&a, p};
        olh_collect(&p, 1, &r, 1, NULL, NULL);
    } else if (!strcmp(what, "stale-address")) {  /* debug pools */
        uint64_t *raw = olh_at(p, a, N_ID);
        struct olh_root r = {&a, p};
        olh_collect(&p, 1, &r, 1, NULL, NULL);
        printf("%llu\n", (unsigned long long)*raw);
    } else if (!strcmp(what, "stale-global")) {  /* debug builds */
        olh_gref g = olh_gref_make(p, a);
        struct olh_root r = {&a, p};
        olh_collect(&p, 1, &r, 1, NULL, NULL);
        olh_pool *q = olh_gref_pool(g);
        printf("%p\n", (void *)q);
    } else {
        fprintf(stderr, "unknown misuse %s\n", what);
        return 2;
    }
    printf("misuse %s: not caught\n", what);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return misuse(argv[1]);
    test_alloc_free_reuse(OLH_SPLIT);
    test_alloc_free_reuse(OLH_UNSPLIT);
    test_alloc_free_reuse(OLH_GROUPED);
    test_alloc_near();
    test_grow();
    test_layouts();
    test_nested();
    test_references();
    test_iteration(OLH_SPLIT);
    test_iteration(OLH_UNSPLIT);
    test_iteration(OLH_GROUPED);
    for (int order = OLH_ORDER_MEMORY; order <= OLH_ORDER_BLOCKS; order++) {
        test_random_graphs((enum olh_order)order, OLH_SPLIT, 64, 4);
        test_random_graphs((enum olh_order)order, OLH_UNSPLIT, 256, 4);
        test_random_graphs((enum olh_order)order, OLH_GROUPED, 128, 2);
    }
    test_list_order();
    test_tree_orders();
    test_local_clusters();
    test_clusters_in_a_full_pool();
    test_bad_descriptors();
    test_full();
    test_threads();
    printf("test_olh: ok\n");
    return 0;
}
