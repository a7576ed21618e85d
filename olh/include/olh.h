/* Object-Local Heaps: typed pools with object splitting, compressed
 * references and a compacting collector. See olh/README.md.
 *
 * A pool holds objects of one type. An object is named by its index in the
 * pool; index 0 is never allocated, so a zero reference is null. A pool is a
 * single-threaded object: one thread at a time may use it (different pools in
 * different threads need no locking). */
#ifndef OLH_H
#define OLH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- results ---------------------------------------------------------- */

enum olh_status {
    OLH_OK = 0,
    OLH_EINVAL = -1,  /* a type descriptor or option that makes no sense */
    OLH_ENOMEM = -2,  /* the system refused memory or address space */
    OLH_ERANGE = -3,  /* a pool is full (its index range is exhausted) */
};

/* A short name for a status; olh_error() says what went wrong, for the
 * calling thread's last failed call. */
const char *olh_strerror(int status);
const char *olh_error(void);

/* ---- types ------------------------------------------------------------ */

/* What a field holds. The collector traces the three reference kinds. */
enum olh_kind {
    OLH_DATA = 0,  /* bytes the library never interprets */
    OLH_REF16,     /* local: an object in the same sub-pool (2 bytes) */
    OLH_REF32,     /* an object in the same pool (4 bytes) */
    OLH_REF64,     /* global: an object in any pool (8 bytes) */
};

struct olh_type;

/* One field. A field whose `nested` is set is that type's fields, flattened
 * in place (its own `size` and `kind` are then ignored; they take its
 * `group`). `group` matters only to OLH_GROUPED pools. */
struct olh_field_desc {
    const char *name;
    uint32_t size;
    enum olh_kind kind;
    const struct olh_type *nested;
    uint32_t group;
};

struct olh_type {
    const char *name;
    size_t nfields;
    const struct olh_field_desc *fields;
};

enum olh_layout {
    OLH_SPLIT = 0,  /* each field its own array */
    OLH_UNSPLIT,    /* whole objects side by side, as a C array of structs */
    OLH_GROUPED,    /* the fields of one `group` side by side, each group its own array */
};

struct olh_pool_options {
    enum olh_layout layout;
    uint32_t subpool_objects;  /* a power of two, 64..2^20; 0: 4096 (at most 32768 with REF16 fields) */
    uint64_t max_objects;      /* address space reserved for; 0: 2^26, at most 2^31 */
    int debug;                 /* keep collected spaces to name stale addresses; see olh_pool_create */
};

/* Most fields a flattened type may have. */
#define OLH_MAX_FIELDS 64

/* ---- pools ------------------------------------------------------------ */

/* The part of a pool that the inline accessors read: constant while the
 * pool lives, except `at` (a collection moves the objects) and `limit`
 * (allocation raises it). Read-only for programs. Each group of fields (one
 * field when split, all of them unsplit) is one array over the whole pool,
 * in address space reserved for it; sub-pools are its units of growth, of
 * local references and of placement. */
struct olh_field_layout {
    char *at;         /* the field of object 0 */
    uint64_t stride;  /* bytes from one object's field to the next's */
};

typedef struct olh_pool {
    uint32_t shift;            /* log2 of the objects per sub-pool */
    uint32_t mask;             /* objects per sub-pool - 1 */
    uint32_t limit;            /* every allocated index is below it */
    uint32_t id;               /* in global references */
    uint32_t epoch;            /* counts collections, in global references */
    uint32_t nfields;
    int debug;
    struct olh_field_layout field[OLH_MAX_FIELDS];
} olh_pool;

/* Creates a pool of `type`'s objects (options may be NULL: split, 4096 per
 * sub-pool). Returns OLH_OK, or OLH_EINVAL for a descriptor that makes no
 * sense (no fields, a zero size, a reference of the wrong size, nesting
 * deeper than 16, more than OLH_MAX_FIELDS fields), OLH_ENOMEM, or
 * OLH_ERANGE when 2^20 - 1 pools exist. A debug pool keeps the spaces its
 * collections leave, inaccessible, so that a stale raw address is named when
 * used. Compiling with -DOLH_DEBUG makes every pool the program creates a
 * debug pool and turns on the accessors' checks; OLH_DEBUG=1 in the
 * environment makes every pool a debug pool. */
int olh_pool_create(olh_pool **out, const struct olh_type *type,
                    const struct olh_pool_options *options);
void olh_pool_destroy(olh_pool *pool);

/* The field numbered `i` after flattening is named olh_field_name(pool, i);
 * olh_field_index finds a field by name (-1: none). */
int olh_field_index(const olh_pool *pool, const char *name);
const char *olh_field_name(const olh_pool *pool, unsigned field);
enum olh_kind olh_field_kind(const olh_pool *pool, unsigned field);
uint32_t olh_field_size(const olh_pool *pool, unsigned field);

/* A new object, every field zero (so every reference in it null). Returns
 * its index, or 0 when the pool is full (olh_error says why). */
uint32_t olh_alloc(olh_pool *pool);
/* As olh_alloc, in the sub-pool of `near` when it has room: a local (REF16)
 * reference between the two is then possible. */
uint32_t olh_alloc_near(olh_pool *pool, uint32_t near);
/* `count` new objects at consecutive indices after every object allocated so
 * far (a growing array); returns the first index, 0 when full. */
uint32_t olh_grow(olh_pool *pool, uint32_t count);
/* Frees an object; freeing index 0, a freed object or one never allocated
 * aborts with a message. */
void olh_free(olh_pool *pool, uint32_t index);
int olh_live(const olh_pool *pool, uint32_t index);

struct olh_pool_stats {
    uint64_t live;       /* objects */
    uint64_t slots;      /* in the sub-pools in use */
    uint64_t subpools;   /* in use */
    uint64_t bytes;      /* committed for objects */
    uint64_t collections;
};
void olh_pool_stats(const olh_pool *pool, struct olh_pool_stats *stats);

/* ---- access ----------------------------------------------------------- */

/* Debug checks, out of line. They abort with a message. */
void olh__check_index(const olh_pool *pool, uint32_t index, unsigned field);
void olh__check_local(const olh_pool *pool, uint32_t holder, uint32_t target);
void olh__check_global(uint64_t ref);

#ifdef OLH_DEBUG
#define OLH__CHECK(pool, index, field) olh__check_index((pool), (index), (field))
#else
#define OLH__CHECK(pool, index, field) ((void)0)
#endif

/* The address of field `field` of object `index`: one multiply-add; with
 * the pool's layout in registers (a loop), one load reads the field. Raw
 * addresses are invalidated by a collection of the pool. */
static inline void *olh_at(const olh_pool *pool, uint32_t index, unsigned field)
{
    OLH__CHECK(pool, index, field);
    return pool->field[field].at + (uint64_t)index * pool->field[field].stride;
}

/* Typed access: OLH_GET(pool, i, f, int64_t) = *(int64_t *)olh_at(...). */
#define OLH_GET(pool, index, field, T) (*(T *)olh_at((pool), (index), (field)))

/* A field over the whole pool as a C array, column[index], where T's size is
 * the field's stride: the field's own type in a split pool, or a C struct
 * mirroring the field's group in a grouped or unsplit pool (the group's
 * fields in order, each naturally aligned) named by its first field. With a
 * constant stride the compiler scales the index in the load itself, so a
 * walk through references costs what pointer chasing does. Invalidated by a
 * collection, as raw addresses are; debug builds check the size. */
#define OLH_COLUMN(pool, field, T) ((T *)olh__column((pool), (field), sizeof(T)))

void olh__check_column(const olh_pool *pool, unsigned field, size_t size);

static inline void *olh__column(const olh_pool *pool, unsigned field, size_t size)
{
#ifdef OLH_DEBUG
    olh__check_column(pool, field, size);
#endif
    (void)size;
    return pool->field[field].at;
}

/* ---- references ------------------------------------------------------- */

/* A local reference is the target's slot in the holder's sub-pool plus one
 * (0: null). A pool reference is the target's index (0: null). A global
 * reference packs the index (bits 0-31), the pool's id (32-51) and the
 * pool's collection epoch (52-63); 0 is null. */
typedef uint16_t olh_ref16;
typedef uint32_t olh_ref32;
typedef uint64_t olh_gref;

#define OLH_ID_BITS 20
#define OLH_EPOCH_BITS 12

/* Whether `target` can be named from `holder` by a local reference. */
static inline int olh_local_ok(const olh_pool *pool, uint32_t holder, uint32_t target)
{
    return target == 0 || (holder >> pool->shift) == (target >> pool->shift);
}

/* Local reference to `target` stored in `holder`. Debug builds abort when the
 * two are in different sub-pools (the 16-bit range is exhausted). */
static inline olh_ref16 olh_ref16_make(const olh_pool *pool, uint32_t holder, uint32_t target)
{
#ifdef OLH_DEBUG
    olh__check_local(pool, holder, target);
#endif
    return target ? (olh_ref16)((target & pool->mask) + 1) : 0;
}

/* The index a local reference stored in `holder` names (0 if null). */
static inline uint32_t olh_ref16_index(const olh_pool *pool, uint32_t holder, olh_ref16 ref)
{
    return ref ? ((holder & ~pool->mask) | (uint32_t)(ref - 1)) : 0;
}

/* Pool struct for a global reference's id (NULL: no such pool). */
olh_pool *olh_pool_of(olh_gref ref);

static inline olh_gref olh_gref_make(const olh_pool *pool, uint32_t index)
{
    if (!index)
        return 0;
    OLH__CHECK(pool, index, 0);
    return (uint64_t)index | (uint64_t)pool->id << 32 |
           (uint64_t)(pool->epoch & ((1u << OLH_EPOCH_BITS) - 1)) << (32 + OLH_ID_BITS);
}

static inline uint32_t olh_gref_index(olh_gref ref)
{
    return (uint32_t)ref;
}

/* The pool and index a global reference names; debug builds check that the
 * pool exists, has not been collected since, and holds the object. */
static inline olh_pool *olh_gref_pool(olh_gref ref)
{
#ifdef OLH_DEBUG
    olh__check_global(ref);
#endif
    return olh_pool_of(ref);
}

/* ---- iteration -------------------------------------------------------- */

/* Live objects in memory order. Usage:
 *   struct olh_iter it = olh_iter_begin(pool);
 *   for (uint32_t i; (i = olh_iter_next(&it)) != 0;) ...
 * The pool must not gain or lose objects during the walk. */
struct olh_iter {
    const uint64_t *live;  /* the pool's liveness bits, one per index */
    uint64_t word;         /* bits of the current word still to visit */
    uint32_t at;           /* index of the current word's bit 0 */
    uint32_t end;
};

struct olh_iter olh_iter_begin(const olh_pool *pool);

static inline uint32_t olh_iter_next(struct olh_iter *it)
{
    while (!it->word) {
        it->at += 64;
        if (it->at >= it->end)
            return 0;
        it->word = it->live[it->at >> 6];
    }
    uint32_t i = it->at + (uint32_t)__builtin_ctzll(it->word);
    it->word &= it->word - 1;
    return i;
}

/* Calls fn(ctx, index) for every live object, in memory order. */
void olh_map(olh_pool *pool, void (*fn)(void *ctx, uint32_t index), void *ctx);

/* Calls fn(ctx, first, count) for each run of consecutive live objects
 * (after a collection without local references, one): within a run each
 * field is an array, olh_at(pool, first, f) with olh_stride(pool, f). */
void olh_map_runs(olh_pool *pool, void (*fn)(void *ctx, uint32_t first, uint32_t count),
                  void *ctx);

static inline uint32_t olh_stride(const olh_pool *pool, unsigned field)
{
    return (uint32_t)pool->field[field].stride;
}

/* ---- collection ------------------------------------------------------- */

/* Where the collector puts the live objects, in the order of: */
enum olh_order {
    OLH_ORDER_MEMORY = 0,  /* their present order, holes closed (clusters of local references pulled together) */
    OLH_ORDER_DEPTH,       /* a depth-first walk from the roots, fields in order */
    OLH_ORDER_BREADTH,     /* a breadth-first walk from the roots */
    OLH_ORDER_BLOCKS,      /* breadth-first blocks of `block` objects, the blocks depth first */
};

/* A root: a reference held outside the collected pools, which the collector
 * rewrites. `pool` set: `slot` is an olh_ref32 into it; NULL: `slot` is an
 * olh_gref. */
struct olh_root {
    void *slot;
    olh_pool *pool;
};

struct olh_collect_options {
    enum olh_order order;
    uint32_t block;  /* OLH_ORDER_BLOCKS: objects per block; 0: what fits a 64-byte line */
};

struct olh_collect_stats {
    uint64_t live;      /* objects kept */
    uint64_t freed;     /* objects unreachable, freed */
    uint64_t subpools;  /* in use after */
};

/* Collects `npools` pools together: marks every object reachable from the
 * roots through reference fields, frees the rest, moves the live objects
 * into new memory in the chosen order, and rewrites every reference to them
 * held by the collected pools and the roots. Objects joined by local (REF16)
 * references stay in one sub-pool. References into the collected pools held
 * anywhere else (other pools, raw pointers, references not given as roots)
 * are invalidated; debug pools detect their use. Returns OLH_OK, or, with
 * nothing changed, OLH_EINVAL (no pools, a pool given twice, a root into a
 * pool not collected, an unknown order) or OLH_ENOMEM. A reference to a
 * freed object aborts. */
int olh_collect(olh_pool *const *pools, size_t npools, const struct olh_root *roots,
                size_t nroots, const struct olh_collect_options *options,
                struct olh_collect_stats *stats);

#ifdef __cplusplus
}
#endif

#ifdef OLH_DEBUG
/* Pools created by a program compiled with -DOLH_DEBUG check everything. */
static inline int olh__create_debug(olh_pool **out, const struct olh_type *type,
                                    const struct olh_pool_options *options)
{
    struct olh_pool_options o = {0};
    if (options)
        o = *options;
    o.debug = 1;
    return olh_pool_create(out, type, &o);
}
#define olh_pool_create olh__create_debug
#endif

#endif
