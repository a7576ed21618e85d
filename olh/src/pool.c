/* Pools: creation, the registry of pool ids that global references name,
 * spaces (sub-pools, liveness bits, per-sub-pool counts), allocation and
 * free. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PAGE 4096ull
#define COMMIT_MIN (64ull << 10)
#define COMMIT_STEP_MAX (64ull << 20)
#define MAX_IDS (1u << OLH_ID_BITS)

static uint64_t page_up(uint64_t n)
{
    return (n + PAGE - 1) & ~(PAGE - 1);
}

/* ---- registry --------------------------------------------------------- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static olh_pool **registry;   /* by id; id 0 is never used (null references) */
static uint32_t *free_ids;
static uint32_t nfree_ids, next_id = 1, creations;

static int registry_add(olh_pool *p)
{
    pthread_mutex_lock(&registry_lock);
    if (!registry) {
        olh_pool **table = olh_os_reserve((uint64_t)MAX_IDS * sizeof *registry, true);
        uint32_t *ids = olh_os_reserve((uint64_t)MAX_IDS * sizeof *free_ids, true);
        if (!table || !ids) {  /* both or neither */
            olh_os_release(table, (uint64_t)MAX_IDS * sizeof *registry);
            olh_os_release(ids, (uint64_t)MAX_IDS * sizeof *free_ids);
            pthread_mutex_unlock(&registry_lock);
            return olh_fail(OLH_ENOMEM, "no address space for the pool registry");
        }
        free_ids = ids;
        __atomic_store_n(&registry, table, __ATOMIC_RELEASE);
    }
    uint32_t id;
    if (nfree_ids)
        id = free_ids[--nfree_ids];
    else if (next_id < MAX_IDS)
        id = next_id++;
    else {
        pthread_mutex_unlock(&registry_lock);
        return olh_fail(OLH_ERANGE, "%u pools exist already", MAX_IDS - 1);
    }
    p->id = id;
    /* A recycled id starts at another epoch: old global references to the
     * pool that had it then fail the debug check. */
    p->epoch = (++creations * 977u) & ((1u << OLH_EPOCH_BITS) - 1);
    __atomic_store_n(&registry[id], p, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&registry_lock);
    return OLH_OK;
}

static void registry_remove(olh_pool *p)
{
    pthread_mutex_lock(&registry_lock);
    __atomic_store_n(&registry[p->id], NULL, __ATOMIC_RELEASE);
    free_ids[nfree_ids++] = p->id;
    pthread_mutex_unlock(&registry_lock);
}

olh_pool *olh_registry_get(uint32_t id)
{
    olh_pool **table = __atomic_load_n(&registry, __ATOMIC_ACQUIRE);
    if (!table || id == 0 || id >= MAX_IDS)
        return NULL;
    return __atomic_load_n(&table[id], __ATOMIC_ACQUIRE);
}

olh_pool *olh_pool_of(olh_gref ref)
{
    return olh_registry_get((uint32_t)(ref >> 32) & (MAX_IDS - 1));
}

/* ---- spaces ----------------------------------------------------------- */

static uint64_t column_bytes(const struct olh_pool_impl *p, uint32_t g, uint64_t subpools)
{
    return page_up(subpools * (p->pub.mask + 1) * p->group_stride[g]);
}

int olh_space_make(struct olh_pool_impl *p, struct olh_space *s)
{
    memset(s, 0, sizeof *s);
    uint64_t subs = p->max_subpools;
    for (uint32_t g = 0; g < p->ngroups; g++) {
        s->column[g] = olh_os_reserve(column_bytes(p, g, subs), false);
        if (!s->column[g]) {
            olh_space_free(p, s, false);
            return olh_fail(OLH_ENOMEM, "cannot reserve %llu MiB of address space for pool '%s'",
                            (unsigned long long)(column_bytes(p, g, subs) >> 20), p->type_name);
        }
    }
    uint64_t live = page_up(p->max_objects / 8);
    uint64_t counts = page_up(subs * sizeof *s->sub_live);
    uint64_t partial = page_up(subs * sizeof *s->partial);
    uint64_t listed = page_up(subs);
    s->side_bytes = live + counts + partial + listed;
    char *side = olh_os_reserve(s->side_bytes, true);
    if (!side) {
        olh_space_free(p, s, false);
        return olh_fail(OLH_ENOMEM, "cannot reserve the bitmaps of pool '%s'", p->type_name);
    }
    s->live = (uint64_t *)side;
    s->sub_live = (uint32_t *)(side + live);
    s->partial = (uint32_t *)(side + live + counts);
    s->listed = (uint8_t *)(side + live + counts + partial);
    return OLH_OK;
}

void olh_space_free(struct olh_pool_impl *p, struct olh_space *s, bool retire)
{
    for (uint32_t g = 0; g < p->ngroups; g++) {
        uint64_t bytes = column_bytes(p, g, p->max_subpools);
        if (s->column[g] && retire)
            olh_os_retire(s->column[g], bytes, p->type_name, p->collections);
        else
            olh_os_release(s->column[g], bytes);
        s->column[g] = NULL;
    }
    olh_os_release(s->live, s->side_bytes);
    s->live = NULL;
}

/* Points the pool's fields (or a copy of its head) at a space's columns. */
void olh_space_aim(const struct olh_pool_impl *p, const struct olh_space *s, olh_pool *head)
{
    for (uint32_t f = 0; f < p->pub.nfields; f++) {
        uint32_t g = p->group_of[f];
        head->field[f].at = s->column[g] + p->offset_in_group[f];
        head->field[f].stride = p->group_stride[g];
    }
}

/* Makes the first `subpools` sub-pools of every column accessible, ahead of
 * need (doubling, at least 64 KiB and at most 64 MiB more for the widest
 * column) so that commits stay rare. */
int olh_space_commit(struct olh_pool_impl *p, struct olh_space *s, uint32_t subpools)
{
    if (subpools <= s->committed)
        return OLH_OK;
    if (subpools > p->max_subpools)
        return olh_fail(OLH_ERANGE, "pool '%s' is full (%llu objects)", p->type_name,
                        (unsigned long long)p->max_objects - 1);
    uint64_t sub_bytes = 0;  /* of the widest column's sub-pool */
    for (uint32_t g = 0; g < p->ngroups; g++)
        if ((uint64_t)p->group_stride[g] * (p->pub.mask + 1) > sub_bytes)
            sub_bytes = (uint64_t)p->group_stride[g] * (p->pub.mask + 1);
    uint64_t want = (uint64_t)s->committed * 2;
    uint64_t least = (COMMIT_MIN + sub_bytes - 1) / sub_bytes;
    uint64_t most = subpools + (COMMIT_STEP_MAX + sub_bytes - 1) / sub_bytes;
    if (want < least)
        want = least;
    if (want > most)
        want = most;
    if (want < subpools)
        want = subpools;
    if (want > p->max_subpools)
        want = p->max_subpools;
    for (uint32_t g = 0; g < p->ngroups; g++) {
        uint64_t from = column_bytes(p, g, s->committed), to = column_bytes(p, g, want);
        if (to > from && olh_os_commit(s->column[g] + from, to - from))
            return olh_fail(OLH_ENOMEM, "the system refused %llu KiB for pool '%s'",
                            (unsigned long long)((to - from) >> 10), p->type_name);
    }
    s->committed = (uint32_t)want;
    return OLH_OK;
}

/* ---- pools ------------------------------------------------------------ */

static bool debug_from_environment(void)
{
    const char *e = getenv("OLH_DEBUG");
    return e && *e && strcmp(e, "0") != 0;
}

int olh_pool_create(olh_pool **out, const struct olh_type *type,
                    const struct olh_pool_options *options)
{
    if (!out)
        return olh_fail(OLH_EINVAL, "no place for the pool");
    *out = NULL;
    struct olh_pool_options o = {0};
    if (options)
        o = *options;
    struct olh_pool_impl *p = calloc(1, sizeof *p);
    if (!p)
        return olh_fail(OLH_ENOMEM, "out of memory");
    int r = olh_type_layout(p, type, &o);
    if (r == OLH_OK)
        r = olh_space_make(p, &p->space);
    if (r == OLH_OK)
        r = olh_space_commit(p, &p->space, 1);
    if (r == OLH_OK)
        r = registry_add(&p->pub);
    if (r != OLH_OK) {
        if (p->space.live)
            olh_space_free(p, &p->space, false);
        olh_type_free(p);
        free(p);
        return r;
    }
    p->pub.debug = o.debug || debug_from_environment();
    olh_space_aim(p, &p->space, &p->pub);
    /* Index 0 is null: never allocated, always marked. */
    bit_set(p->space.live, 0);
    p->space.sub_live[0] = 1;
    p->used = 1;
    p->pub.limit = 1;
    *out = &p->pub;
    return OLH_OK;
}

void olh_pool_destroy(olh_pool *pool)
{
    if (!pool)
        return;
    struct olh_pool_impl *p = impl(pool);
    registry_remove(pool);
    olh_space_free(p, &p->space, false);
    olh_type_free(p);
    free(p);
}

const char *olh_pool_name(const olh_pool *pool)
{
    return cimpl(pool)->type_name;
}

int olh_field_index(const olh_pool *pool, const char *name)
{
    for (uint32_t i = 0; i < pool->nfields; i++)
        if (strcmp(cimpl(pool)->info[i].name, name) == 0)
            return (int)i;
    return -1;
}

const char *olh_field_name(const olh_pool *pool, unsigned field)
{
    return field < pool->nfields ? cimpl(pool)->info[field].name : NULL;
}

enum olh_kind olh_field_kind(const olh_pool *pool, unsigned field)
{
    return field < pool->nfields ? cimpl(pool)->info[field].kind : OLH_DATA;
}

uint32_t olh_field_size(const olh_pool *pool, unsigned field)
{
    return field < pool->nfields ? cimpl(pool)->info[field].size : 0;
}

/* ---- allocation ------------------------------------------------------- */

static inline uint32_t words_per_subpool(const olh_pool *pool)
{
    return (pool->mask + 1) >> 6;
}

/* Takes the first free slot of sub-pool `sub` at or after word `from`; 0 if
 * there is none. */
static inline uint32_t take_in(struct olh_pool_impl *p, uint32_t sub, uint32_t from)
{
    struct olh_space *s = &p->space;
    uint32_t end = (sub + 1) * words_per_subpool(&p->pub);
    for (uint32_t w = from; w < end; w++) {
        uint64_t free = ~s->live[w];
        if (free) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(free);
            s->live[w] |= free & -free;
            s->sub_live[sub]++;
            p->live_count++;
            if (i >= p->pub.limit)
                p->pub.limit = i + 1;
            if (sub == p->cur)
                p->cursor = w;
            return i;
        }
    }
    return 0;
}

static uint32_t alloc_slow(struct olh_pool_impl *p)
{
    struct olh_space *s = &p->space;
    uint32_t cap = p->pub.mask + 1;
    while (p->npartial) {
        uint32_t sub = s->partial[--p->npartial];
        s->listed[sub] = 0;
        if (s->sub_live[sub] < cap) {
            p->cur = sub;
            p->cursor = sub * words_per_subpool(&p->pub);
            return take_in(p, sub, p->cursor);
        }
    }
    if (p->used >= p->max_subpools) {
        olh_fail(OLH_ERANGE, "pool '%s' is full (%llu objects)", p->type_name,
                 (unsigned long long)p->max_objects - 1);
        return 0;
    }
    if (olh_space_commit(p, s, p->used + 1))
        return 0;
    p->cur = p->used++;
    p->cursor = p->cur * words_per_subpool(&p->pub);
    return take_in(p, p->cur, p->cursor);
}

uint32_t olh_alloc(olh_pool *pool)
{
    struct olh_pool_impl *p = impl(pool);
    if (p->space.sub_live[p->cur] <= pool->mask) {
        uint32_t i = take_in(p, p->cur, p->cursor);
        if (i)
            return i;
    }
    return alloc_slow(p);
}

uint32_t olh_alloc_near(olh_pool *pool, uint32_t near)
{
    struct olh_pool_impl *p = impl(pool);
    if (near && near < pool->limit) {
        uint32_t sub = near >> pool->shift;
        if (p->space.sub_live[sub] <= pool->mask) {
            uint32_t from = sub == p->cur ? p->cursor : sub * words_per_subpool(pool);
            uint32_t i = take_in(p, sub, from);
            if (i)
                return i;
        }
    }
    return olh_alloc(pool);
}

uint32_t olh_grow(olh_pool *pool, uint32_t count)
{
    struct olh_pool_impl *p = impl(pool);
    struct olh_space *s = &p->space;
    uint64_t first = pool->limit, end = first + count;
    if (count == 0 || end > p->max_objects) {
        olh_fail(count ? OLH_ERANGE : OLH_EINVAL, count ? "pool '%s' is full" : "grow by 0 in pool '%s'",
                 p->type_name);
        return 0;
    }
    uint32_t last_sub = (uint32_t)((end - 1) >> pool->shift);
    if (last_sub >= p->used) {
        if (olh_space_commit(p, s, last_sub + 1))
            return 0;
        p->used = last_sub + 1;
    }
    for (uint64_t i = first; i < end;) {
        uint32_t sub = (uint32_t)(i >> pool->shift);
        uint64_t sub_end = (uint64_t)(sub + 1) << pool->shift;
        uint64_t stop = end < sub_end ? end : sub_end;
        s->sub_live[sub] += (uint32_t)(stop - i);
        for (; i < stop && (i & 63); i++)
            bit_set(s->live, i);
        for (; i + 64 <= stop; i += 64)
            s->live[i >> 6] = ~0ull;
        for (; i < stop; i++)
            bit_set(s->live, i);
        if (s->sub_live[sub] <= pool->mask && sub != p->cur && !s->listed[sub]) {
            s->listed[sub] = 1;
            s->partial[p->npartial++] = sub;
        }
    }
    p->live_count += count;
    pool->limit = (uint32_t)end;
    return (uint32_t)first;
}

static void clear_object(olh_pool *pool, uint32_t index)
{
    struct olh_pool_impl *p = impl(pool);
    for (uint32_t g = 0; g < p->ngroups; g++)
        memset(p->space.column[g] + (uint64_t)index * p->group_stride[g], 0, p->group_stride[g]);
}

void olh_free(olh_pool *pool, uint32_t index)
{
    struct olh_pool_impl *p = impl(pool);
    struct olh_space *s = &p->space;
    if (index == 0)
        olh_die("olh_free(): null reference (index 0) in pool '%s'", p->type_name);
    if (index >= pool->limit)
        olh_die("olh_free(): object %u of pool '%s' was never allocated", index, p->type_name);
    if (!bit_get(s->live, index))
        olh_die("olh_free(): double free of object %u in pool '%s'", index, p->type_name);
    clear_object(pool, index);
    bit_clear(s->live, index);
    uint32_t sub = index >> pool->shift;
    s->sub_live[sub]--;
    p->live_count--;
    if (sub == p->cur) {
        if ((index >> 6) < p->cursor)
            p->cursor = index >> 6;
    } else if (!s->listed[sub]) {
        s->listed[sub] = 1;
        s->partial[p->npartial++] = sub;
    }
}

int olh_live(const olh_pool *pool, uint32_t index)
{
    return index && index < pool->limit && bit_get(cimpl(pool)->space.live, index);
}

void olh_pool_stats(const olh_pool *pool, struct olh_pool_stats *st)
{
    const struct olh_pool_impl *p = cimpl(pool);
    st->live = p->live_count;
    st->subpools = p->used;
    st->slots = (uint64_t)p->used * (pool->mask + 1);
    st->bytes = (uint64_t)p->space.committed * (pool->mask + 1) * p->object_bytes;
    st->collections = p->collections;
}
