/* The compacting collector. It marks what the roots reach through reference
 * fields (general graphs: marks, not the tree walk of the thesis), chooses
 * each live object's new index in the requested order, copies the objects
 * into a new space and rewrites every reference through a forwarding table
 * (a side array, so even a 16-bit field can be forwarded). Objects joined by
 * local references form clusters that the placement keeps in one sub-pool;
 * such a cluster lay in one sub-pool before, so it always fits in one. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* One collected pool's working state, all in one temporary mapping. */
struct work {
    struct olh_pool_impl *p;
    uint32_t limit;      /* the pool's limit when the collection began */
    uint32_t new_epoch;
    uint64_t *mark;      /* one bit per old index */
    uint32_t *order;     /* the old indices in placement order */
    uint32_t norder;
    uint32_t *fwd;       /* old index -> new index */
    uint32_t *uf;        /* clusters (local references): union-find parents */
    uint32_t *csize, *next, *head, *tail;
    uint32_t new_limit, new_used;
    char *temp;
    uint64_t temp_bytes;
    struct olh_space ns;
};

struct collection {
    struct work *w;
    size_t n;
    uint64_t *stack;     /* (pool << 32 | index), a stack or a queue */
    uint64_t stack_cap, stack_bytes;
    uint64_t *deferred;  /* OLH_ORDER_BLOCKS: children that start blocks of their own */
    uint64_t *roots;     /* each root's target, read before any is rewritten */
    enum olh_order order;
    uint32_t block;
};

static uint64_t page_up(uint64_t n)
{
    return (n + 4095) & ~4095ull;
}

static int find_pool(const struct collection *c, uint32_t id)
{
    for (size_t k = 0; k < c->n; k++)
        if (c->w[k].p->pub.id == id)
            return (int)k;
    return -1;
}

/* ---- clusters --------------------------------------------------------- */

static uint32_t uf_find(uint32_t *uf, uint32_t x)
{
    while (uf[x] != x) {
        uf[x] = uf[uf[x]];
        x = uf[x];
    }
    return x;
}

static void uf_union(struct work *w, uint32_t a, uint32_t b)
{
    a = uf_find(w->uf, a);
    b = uf_find(w->uf, b);
    if (a == b)
        return;
    if (w->csize[a] < w->csize[b]) {
        uint32_t t = a;
        a = b;
        b = t;
    }
    w->uf[b] = a;
    w->csize[a] += w->csize[b];
}

/* ---- references ------------------------------------------------------- */

static inline bool marked(const struct work *w, uint32_t i)
{
    return bit_get(w->mark, i);
}

static _Noreturn void bad_target(const struct work *from, uint32_t x, unsigned f,
                                 const struct work *to, uint32_t t)
{
    olh_die("olh_collect(): object %u of pool '%s' refers through field '%s' to object %u of pool "
            "'%s', which %s",
            x, from->p->type_name, from->p->info[f].name, t, to->p->type_name,
            t >= to->limit ? "was never allocated" : "is freed");
}

/* The object that field `f` of object `x` in pool `k` names: (pool, index)
 * packed, or ~0 when null or in a pool not being collected. While marking
 * (`marking`), checks that it is live and unions local references'
 * clusters; when copying, all that is known already. */
static uint64_t target(struct collection *c, size_t k, uint32_t x, unsigned f, bool marking)
{
    struct work *w = &c->w[k];
    olh_pool *pool = &w->p->pub;
    const void *at = olh_at(pool, x, f);
    uint32_t t;
    size_t tk = k;
    switch (w->p->info[f].kind) {
    case OLH_REF16: {
        uint16_t r;
        memcpy(&r, at, 2);
        if (!r)
            return ~0ull;
        if (marking && r > pool->mask + 1)
            olh_die("olh_collect(): object %u of pool '%s' holds a corrupt local reference %u in "
                    "field '%s' (its sub-pools hold %u objects)",
                    x, w->p->type_name, r, w->p->info[f].name, pool->mask + 1);
        t = olh_ref16_index(pool, x, r);
        break;
    }
    case OLH_REF32:
        memcpy(&t, at, 4);
        if (!t)
            return ~0ull;
        break;
    case OLH_REF64: {
        uint64_t g;
        memcpy(&g, at, 8);
        if (!g)
            return ~0ull;
        int j = find_pool(c, (uint32_t)(g >> 32) & ((1u << OLH_ID_BITS) - 1));
        if (j < 0)
            return ~0ull;
        tk = (size_t)j;
        t = (uint32_t)g;
        uint32_t epoch = (uint32_t)(g >> (32 + OLH_ID_BITS));
        if (marking && epoch != (c->w[tk].p->pub.epoch & ((1u << OLH_EPOCH_BITS) - 1)))
            olh_die("olh_collect(): object %u of pool '%s' holds in field '%s' a stale global "
                    "reference to pool '%s' (made before its last collection)",
                    x, w->p->type_name, w->p->info[f].name, c->w[tk].p->type_name);
        break;
    }
    default:
        return ~0ull;
    }
    if (!marking)
        return (uint64_t)tk << 32 | t;
    struct work *tw = &c->w[tk];
    if (t >= tw->limit || !bit_get(tw->p->space.live, t))
        bad_target(w, x, f, tw, t);
    if (w->p->info[f].kind == OLH_REF16)
        uf_union(w, x, t);
    return (uint64_t)tk << 32 | t;
}

static void visit(struct collection *c, size_t k, uint32_t x)
{
    struct work *w = &c->w[k];
    w->order[w->norder++] = x;
}

/* ---- traversals ------------------------------------------------------- */

static void push(struct collection *c, uint64_t *top, uint64_t e)
{
    if (*top == c->stack_cap)
        olh_die("olh_collect(): the mark stack overflowed");
    c->stack[(*top)++] = e;
}

/* Fetches the reference fields of object (pool, index) `e` ahead of its visit. */
static inline void prefetch_refs(const struct collection *c, uint64_t e)
{
    const struct olh_pool_impl *p = c->w[e >> 32].p;
    if (p->nrefs)
        __builtin_prefetch(olh_at(&p->pub, (uint32_t)e, p->refs[0]));
}

static void depth_first(struct collection *c, uint64_t top)
{
    while (top) {
        uint64_t e = c->stack[--top];
        size_t k = e >> 32;
        uint32_t x = (uint32_t)e;
        struct work *w = &c->w[k];
        if (marked(w, x))
            continue;
        bit_set(w->mark, x);
        visit(c, k, x);
        for (uint32_t r = w->p->nrefs; r-- > 0;) {
            uint64_t t = target(c, k, x, w->p->refs[r], true);
            if (t != ~0ull && !marked(&c->w[t >> 32], (uint32_t)t)) {
                prefetch_refs(c, t);
                push(c, &top, t);
            }
        }
    }
}

static void breadth_first(struct collection *c, uint64_t tail)
{
    uint64_t head = 0, nroots = tail;
    tail = 0;
    for (uint64_t i = 0; i < nroots; i++) {  /* the roots: marked as they are queued */
        uint64_t e = c->stack[i];
        struct work *w = &c->w[e >> 32];
        if (!marked(w, (uint32_t)e)) {
            bit_set(w->mark, (uint32_t)e);
            c->stack[tail++] = e;
        }
    }
    while (head < tail) {
        uint64_t e = c->stack[head++];
        size_t k = e >> 32;
        uint32_t x = (uint32_t)e;
        struct work *w = &c->w[k];
        visit(c, k, x);
        for (uint32_t r = 0; r < w->p->nrefs; r++) {
            uint64_t t = target(c, k, x, w->p->refs[r], true);
            if (t == ~0ull)
                continue;
            struct work *tw = &c->w[t >> 32];
            if (!marked(tw, (uint32_t)t)) {
                bit_set(tw->mark, (uint32_t)t);
                prefetch_refs(c, t);
                push(c, &tail, t);
            }
        }
    }
}

/* Breadth-first blocks of c->block objects of one pool, the blocks taken
 * depth first: each block a small subtree, so that a walk from the root
 * touches a few lines per block instead of one per level. */
static void blocks(struct collection *c, uint64_t top)
{
    uint64_t queue[1024];
    uint32_t cap = c->block < 1024 ? c->block : 1024;
    while (top) {
        uint64_t e = c->stack[--top];
        size_t k = e >> 32;
        struct work *w = &c->w[k];
        if (marked(w, (uint32_t)e))
            continue;
        bit_set(w->mark, (uint32_t)e);
        uint32_t qh = 0, qt = 0, inblock = 1;
        uint64_t ndeferred = 0;
        queue[qt++] = e;
        while (qh < qt) {
            uint32_t x = (uint32_t)queue[qh++];
            visit(c, k, x);
            for (uint32_t r = 0; r < w->p->nrefs; r++) {
                uint64_t t = target(c, k, x, w->p->refs[r], true);
                if (t == ~0ull || marked(&c->w[t >> 32], (uint32_t)t))
                    continue;
                if ((t >> 32) == k && inblock < cap) {
                    bit_set(w->mark, (uint32_t)t);
                    queue[qt++] = t;
                    inblock++;
                } else {
                    c->deferred[ndeferred++] = t;
                }
            }
        }
        while (ndeferred)  /* reversed: the first deferred child is taken first */
            push(c, &top, c->deferred[--ndeferred]);
    }
}

/* ---- placement -------------------------------------------------------- */

/* When starting a fresh sub-pool for each cluster that does not fit would
 * take more sub-pools than the pool may have, every object stays in its old
 * sub-pool, the sub-pool's objects packed in visiting order: that packing
 * existed, so it fits, and a cluster never spans sub-pools. */
static void place_in_old_subpools(struct work *w)
{
    olh_pool *pool = &w->p->pub;
    uint32_t subs = ((w->limit - 1) >> pool->shift) + 1;
    uint32_t *next_slot = w->csize;  /* cluster sizes are no longer needed: reused, one per sub-pool */
    for (uint32_t s = 0; s < subs; s++)
        next_slot[s] = s == 0;  /* index 0 is null */
    uint32_t top = 0;
    for (uint32_t i = 0; i < w->norder; i++) {
        uint32_t x = w->order[i], s = x >> pool->shift;
        w->fwd[x] = s << pool->shift | next_slot[s]++;
        if (w->fwd[x] + 1 > top)
            top = w->fwd[x] + 1;
    }
    w->new_limit = top > 1 ? top : 1;
    w->new_used = ((w->new_limit - 1) >> pool->shift) + 1;
}

/* New indices in the order visited, from 1 (0 is null); a cluster of
 * local references is placed whole, in a fresh sub-pool if the present one
 * has no room for it. */
static void place(struct work *w)
{
    olh_pool *pool = &w->p->pub;
    uint32_t cap = pool->mask + 1;
    uint64_t next_index = 1;
    if (!w->p->has_local) {
        for (uint32_t i = 0; i < w->norder; i++)
            w->fwd[w->order[i]] = (uint32_t)next_index++;
    } else {
        for (uint32_t i = 0; i < w->norder; i++) {
            uint32_t x = w->order[i], r = uf_find(w->uf, x);
            if (!w->head[r])
                w->head[r] = x;
            else
                w->next[w->tail[r]] = x;
            w->tail[r] = x;
        }
        for (uint32_t i = 0; i < w->norder; i++) {
            uint32_t r = uf_find(w->uf, w->order[i]);
            if (!w->head[r])
                continue;  /* placed */
            uint32_t size = w->csize[r];
            uint64_t room = cap - (next_index & pool->mask);
            if (size > room)
                next_index = (next_index | pool->mask) + 1;
            for (uint32_t m = w->head[r];; m = w->next[m]) {
                w->fwd[m] = (uint32_t)next_index++;
                if (m == w->tail[r])
                    break;
            }
            w->head[r] = 0;
        }
    }
    w->new_limit = (uint32_t)next_index;
    w->new_used = (uint32_t)((next_index - 1) >> pool->shift) + 1;
    if (w->new_used > w->p->max_subpools)
        place_in_old_subpools(w);
}

/* ---- copying ---------------------------------------------------------- */

static inline void copy_bytes(void *to, const void *from, uint32_t n)
{
    switch (n) {
    case 1: *(uint8_t *)to = *(const uint8_t *)from; break;
    case 2: memcpy(to, from, 2); break;
    case 4: memcpy(to, from, 4); break;
    case 8: memcpy(to, from, 8); break;
    default: memcpy(to, from, n);
    }
}

/* Copies object x of pool k to its new index in the new space, with its
 * references rewritten. `shadow` is the pool's head pointed at the new space. */
static void move_object(struct collection *c, size_t k, uint32_t x, const olh_pool *shadow)
{
    struct work *w = &c->w[k];
    struct olh_pool_impl *p = w->p;
    const olh_pool *pool = &p->pub;
    uint32_t nx = w->fwd[x];
    for (uint32_t g = 0; g < p->ngroups; g++) {
        uint32_t stride = p->group_stride[g];
        copy_bytes(w->ns.column[g] + (uint64_t)nx * stride, p->space.column[g] + (uint64_t)x * stride,
                   stride);
    }
    for (uint32_t r = 0; r < p->nrefs; r++) {
        unsigned f = p->refs[r];
        uint64_t t = target(c, k, x, f, false);
        if (t == ~0ull)
            continue;
        struct work *tw = &c->w[t >> 32];
        uint32_t nt = tw->fwd[(uint32_t)t];
        void *at = olh_at(shadow, nx, f);
        if (p->info[f].kind == OLH_REF16) {
            uint16_t v = (uint16_t)((nt & pool->mask) + 1);
            memcpy(at, &v, 2);
        } else if (p->info[f].kind == OLH_REF32) {
            memcpy(at, &nt, 4);
        } else {
            uint64_t g = (uint64_t)nt | (uint64_t)tw->p->pub.id << 32 |
                         (uint64_t)(tw->new_epoch & ((1u << OLH_EPOCH_BITS) - 1))
                             << (32 + OLH_ID_BITS);
            memcpy(at, &g, 8);
        }
    }
}

/* The new space's bookkeeping: bits, counts, and sub-pools with room. */
static void settle(struct work *w)
{
    struct olh_pool_impl *p = w->p;
    struct olh_space *s = &w->ns;
    uint32_t cap = p->pub.mask + 1;
    bit_set(s->live, 0);
    s->sub_live[0] = 1;
    for (uint32_t i = 0; i < w->norder; i++) {
        uint32_t n = w->fwd[w->order[i]];
        bit_set(s->live, n);
        s->sub_live[n >> p->pub.shift]++;
    }
    p->npartial = 0;
    uint32_t last = w->new_used - 1;
    for (uint32_t sub = 0; sub < last; sub++)
        if (s->sub_live[sub] < cap) {
            s->listed[sub] = 1;
            s->partial[p->npartial++] = sub;
        }
    p->used = w->new_used;
    p->cur = last;
    p->cursor = last * (cap >> 6);
    p->live_count = w->norder;
    p->pub.limit = w->new_limit;
}

/* ---- the collection --------------------------------------------------- */

static void release_work(struct collection *c)
{
    for (size_t k = 0; k < c->n; k++) {
        olh_os_release(c->w[k].temp, c->w[k].temp_bytes);
        if (c->w[k].ns.live)
            olh_space_free(c->w[k].p, &c->w[k].ns, false);
    }
    olh_os_release(c->stack, c->stack_bytes);
    free(c->roots);
    free(c->w);
}

static int prepare(struct collection *c, size_t k, olh_pool *pool)
{
    struct work *w = &c->w[k];
    memset(w, 0, sizeof *w);
    w->p = impl(pool);
    w->limit = pool->limit;
    w->new_epoch = pool->epoch + 1;
    uint64_t n = w->limit;
    uint64_t bits = page_up((n + 63) / 64 * 8), arr = page_up(n * 4);
    uint64_t arrays = w->p->has_local ? 7 : 2;
    w->temp_bytes = bits + arrays * arr;
    w->temp = olh_os_reserve(w->temp_bytes, true);
    if (!w->temp)
        return olh_fail(OLH_ENOMEM, "no memory to collect pool '%s'", w->p->type_name);
    char *at = w->temp;
    w->mark = (uint64_t *)at, at += bits;
    w->order = (uint32_t *)at, at += arr;
    w->fwd = (uint32_t *)at, at += arr;
    if (w->p->has_local) {
        w->uf = (uint32_t *)at, at += arr;
        w->csize = (uint32_t *)at, at += arr;
        w->next = (uint32_t *)at, at += arr;
        w->head = (uint32_t *)at, at += arr;
        w->tail = (uint32_t *)at, at += arr;
        for (uint32_t i = 0; i < n; i++) {
            w->uf[i] = i;
            w->csize[i] = 1;
        }
    }
    bit_set(w->mark, 0);  /* null: never visited */
    return OLH_OK;
}

/* The root's target as (pool, index), ~0 for null or a global reference to
 * a pool not collected, ~1 for a root naming a pool not collected. */
static uint64_t root_target(struct collection *c, const struct olh_root *r, size_t ri)
{
    uint32_t t;
    int k;
    if (r->pool) {
        k = find_pool(c, r->pool->id);
        if (k < 0)
            return ~1ull;
        memcpy(&t, r->slot, 4);
        if (!t)
            return ~0ull;
    } else {
        uint64_t g;
        memcpy(&g, r->slot, 8);
        if (!g)
            return ~0ull;
        k = find_pool(c, (uint32_t)(g >> 32) & ((1u << OLH_ID_BITS) - 1));
        if (k < 0)
            return ~0ull;
        t = (uint32_t)g;
        if ((uint32_t)(g >> (32 + OLH_ID_BITS)) !=
            (c->w[k].p->pub.epoch & ((1u << OLH_EPOCH_BITS) - 1)))
            olh_die("olh_collect(): root %zu is a stale global reference to pool '%s' (made "
                    "before its last collection)",
                    ri, c->w[k].p->type_name);
    }
    struct work *w = &c->w[k];
    if (t >= w->limit || !bit_get(w->p->space.live, t))
        olh_die("olh_collect(): root %zu refers to object %u of pool '%s', which %s", ri, t,
                w->p->type_name, t >= w->limit ? "was never allocated" : "is freed");
    return (uint64_t)k << 32 | t;
}

int olh_collect(olh_pool *const *pools, size_t npools, const struct olh_root *roots,
                size_t nroots, const struct olh_collect_options *options,
                struct olh_collect_stats *stats)
{
    struct olh_collect_options o = {0};
    if (options)
        o = *options;
    if (npools == 0 || !pools)
        return olh_fail(OLH_EINVAL, "olh_collect(): no pools");
    if (nroots && !roots)
        return olh_fail(OLH_EINVAL, "olh_collect(): no roots array");
    if ((unsigned)o.order > OLH_ORDER_BLOCKS)
        return olh_fail(OLH_EINVAL, "olh_collect(): unknown order %d", (int)o.order);
    for (size_t k = 0; k < npools; k++) {
        if (!pools[k])
            return olh_fail(OLH_EINVAL, "olh_collect(): pool %zu is NULL", k);
        for (size_t j = 0; j < k; j++)
            if (pools[j] == pools[k])
                return olh_fail(OLH_EINVAL, "olh_collect(): pool '%s' is given twice",
                                olh_pool_name(pools[k]));
    }
    struct work *wk = calloc(npools, sizeof *wk);
    uint64_t *root_targets = calloc(nroots + 1, sizeof *root_targets);
    struct collection c = {.w = wk, .n = npools, .roots = root_targets, .order = o.order};
    if (!wk || !root_targets) {
        free(wk);
        free(root_targets);
        return olh_fail(OLH_ENOMEM, "olh_collect(): out of memory");
    }
    uint64_t edges = nroots + 64;
    uint32_t widest = 1;
    for (size_t k = 0; k < npools; k++) {
        int r = prepare(&c, k, pools[k]);
        if (r) {
            release_work(&c);
            return r;
        }
        struct olh_pool_impl *p = wk[k].p;
        edges += (uint64_t)wk[k].limit * (p->nrefs ? p->nrefs : 1);
        for (uint32_t g = 0; g < p->ngroups; g++)
            if (p->group_stride[g] > widest)
                widest = p->group_stride[g];
    }
    /* By default a block is the largest whole subtree (2^k - 1 objects) whose
     * widest group fits a 64-byte line, at least three. */
    uint32_t fit = 64 / widest, whole = 3;
    while (whole * 2 + 1 <= fit)
        whole = whole * 2 + 1;
    c.block = o.block ? o.block : whole;
    if (c.block > 1024)
        c.block = 1024;
    /* The stack holds at most one entry per edge and root; with blocks, the
     * deferred children of one block follow it. */
    uint32_t maxrefs = 1;
    for (size_t k = 0; k < npools; k++)
        if (wk[k].p->nrefs > maxrefs)
            maxrefs = wk[k].p->nrefs;
    c.stack_cap = edges;
    uint64_t deferred = (uint64_t)c.block * maxrefs;
    c.stack_bytes = page_up((edges + deferred) * 8);
    c.stack = olh_os_reserve(c.stack_bytes, true);
    if (!c.stack) {
        release_work(&c);
        return olh_fail(OLH_ENOMEM, "olh_collect(): no memory for the mark stack");
    }
    c.deferred = c.stack + edges;

    /* Roots, then the walk. */
    uint64_t nr = 0;
    for (size_t i = 0; i < nroots; i++) {
        uint64_t t = root_target(&c, &roots[i], i);
        if (t == ~1ull) {
            release_work(&c);
            return olh_fail(OLH_EINVAL, "olh_collect(): root %zu names pool '%s', which is not "
                            "being collected", i, olh_pool_name(roots[i].pool));
        }
        c.roots[i] = t;
        if (t != ~0ull)
            c.stack[nr++] = t;
    }
    if (o.order == OLH_ORDER_BREADTH || o.order == OLH_ORDER_MEMORY) {
        breadth_first(&c, nr);
    } else {
        for (uint64_t i = 0; i < nr / 2; i++) {  /* the first root is taken first */
            uint64_t t = c.stack[i];
            c.stack[i] = c.stack[nr - 1 - i];
            c.stack[nr - 1 - i] = t;
        }
        if (o.order == OLH_ORDER_DEPTH)
            depth_first(&c, nr);
        else
            blocks(&c, nr);
    }
    if (o.order == OLH_ORDER_MEMORY)  /* keep the present order */
        for (size_t k = 0; k < npools; k++) {
            struct work *w = &wk[k];
            w->norder = 0;
            for (uint32_t i = 1; i < w->limit; i++)
                if (marked(w, i))
                    w->order[w->norder++] = i;
        }

    /* New spaces for every pool before anything changes. */
    for (size_t k = 0; k < npools; k++) {
        struct work *w = &wk[k];
        place(w);
        int r = olh_space_make(w->p, &w->ns);
        if (r == OLH_OK)
            r = olh_space_commit(w->p, &w->ns, w->new_used);
        if (r) {
            release_work(&c);
            return r;
        }
    }

    /* Copy and rewrite, in placement order: the writes are sequential. */
    for (size_t k = 0; k < npools; k++) {
        struct work *w = &wk[k];
        olh_pool shadow = w->p->pub;
        olh_space_aim(w->p, &w->ns, &shadow);
        for (uint32_t i = 0; i < w->norder; i++) {
            if (i + 16 < w->norder)  /* the old copies are read in a new, scattered order */
                for (uint32_t g = 0; g < w->p->ngroups; g++)
                    __builtin_prefetch(w->p->space.column[g] +
                                       (uint64_t)w->order[i + 16] * w->p->group_stride[g]);
            move_object(&c, k, w->order[i], &shadow);
        }
    }
    for (size_t i = 0; i < nroots; i++) {
        uint64_t t = c.roots[i];
        if (t == ~0ull)
            continue;
        struct work *w = &wk[t >> 32];
        uint32_t nt = w->fwd[(uint32_t)t];
        if (roots[i].pool) {
            memcpy(roots[i].slot, &nt, 4);
        } else {
            uint64_t g = (uint64_t)nt | (uint64_t)w->p->pub.id << 32 |
                         (uint64_t)(w->new_epoch & ((1u << OLH_EPOCH_BITS) - 1))
                             << (32 + OLH_ID_BITS);
            memcpy(roots[i].slot, &g, 8);
        }
    }

    /* Swap the spaces. */
    struct olh_collect_stats st = {0};
    for (size_t k = 0; k < npools; k++) {
        struct work *w = &wk[k];
        struct olh_pool_impl *p = w->p;
        st.freed += p->live_count - w->norder;
        settle(w);
        p->collections++;
        olh_space_free(p, &p->space, p->pub.debug);
        p->space = w->ns;
        memset(&w->ns, 0, sizeof w->ns);
        olh_space_aim(p, &p->space, &p->pub);
        p->pub.epoch = w->new_epoch;
        st.live += w->norder;
        st.subpools += p->used;
    }
    release_work(&c);
    if (stats)
        *stats = st;
    return OLH_OK;
}
