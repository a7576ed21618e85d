/* Object-Local Heaps, private: the whole pool, and what the files share. */
#ifndef OLH_INTERNAL_H
#define OLH_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "olh.h"

#define OLH_DEFAULT_SUBPOOL 4096u
#define OLH_MAX_SUBPOOL (1u << 20)
#define OLH_MAX_LOCAL_SUBPOOL 32768u  /* a local reference is slot + 1 in 16 bits */
#define OLH_DEFAULT_MAX_OBJECTS (1ull << 26)
#define OLH_MAX_OBJECTS (1ull << 31)
#define OLH_MAX_NESTING 16

struct olh_field_info {
    char *name;  /* "outer.inner" for a nested type's field */
    uint32_t size;
    enum olh_kind kind;
};

/* The whole pool: the public head, then what only the library touches. */
struct olh_pool_impl {
    olh_pool pub;
    char *type_name;
    struct olh_field_info info[OLH_MAX_FIELDS];
    uint32_t object_bytes;      /* bytes of an object in a sub-pool: its groups' strides */
    uint32_t ngroups;           /* fields stored side by side: each group an array of structs */
    uint32_t group_stride[OLH_MAX_FIELDS];
    uint8_t group_of[OLH_MAX_FIELDS];     /* of each field */
    uint32_t offset_in_group[OLH_MAX_FIELDS];
    uint8_t refs[OLH_MAX_FIELDS];  /* the reference fields, in field order */
    uint32_t nrefs;
    bool has_local;             /* a REF16 field: collections keep its clusters together */
    uint64_t max_objects;
    uint32_t max_subpools;

    struct olh_space {          /* what a collection replaces */
        char *column[OLH_MAX_FIELDS];  /* each group's array, reserved for every sub-pool */
        uint32_t committed;     /* sub-pools made accessible */
        uint64_t *live;         /* one bit per index */
        uint32_t *sub_live;     /* live objects per sub-pool (slot 0 of sub-pool 0 counts) */
        uint32_t *partial;      /* stack of sub-pools with free slots, other than cur */
        uint8_t *listed;        /* whether a sub-pool is on that stack */
        uint64_t side_bytes;    /* of the reservation holding live..listed */
    } space;
    uint32_t used;              /* sub-pools ever handed out in this space */
    uint32_t cur;               /* the sub-pool allocations fill */
    uint32_t cursor;            /* first word of cur's bits that may have a free bit */
    uint32_t npartial;
    uint64_t live_count;        /* objects, not counting index 0 */
    uint64_t collections;
};

static inline struct olh_pool_impl *impl(olh_pool *p)
{
    return (struct olh_pool_impl *)p;
}

static inline const struct olh_pool_impl *cimpl(const olh_pool *p)
{
    return (const struct olh_pool_impl *)p;
}

static inline bool bit_get(const uint64_t *bits, uint64_t i)
{
    return bits[i >> 6] >> (i & 63) & 1;
}

static inline void bit_set(uint64_t *bits, uint64_t i)
{
    bits[i >> 6] |= 1ull << (i & 63);
}

static inline void bit_clear(uint64_t *bits, uint64_t i)
{
    bits[i >> 6] &= ~(1ull << (i & 63));
}

/* os.c: address space */
void *olh_os_reserve(uint64_t bytes, bool accessible);
int olh_os_commit(void *at, uint64_t bytes);
void olh_os_release(void *at, uint64_t bytes);
void olh_os_retire(void *at, uint64_t bytes, const char *what, uint64_t collection);

/* errors.c: the calling thread's last error, and aborts */
int olh_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void olh_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* type.c: a descriptor, flattened and checked, into the pool's fields */
int olh_type_layout(struct olh_pool_impl *p, const struct olh_type *type,
                    const struct olh_pool_options *o);
void olh_type_free(struct olh_pool_impl *p);

/* pool.c: a space (data, bits, counts) for `p`'s geometry */
int olh_space_make(struct olh_pool_impl *p, struct olh_space *s);
void olh_space_free(struct olh_pool_impl *p, struct olh_space *s, bool retire);
int olh_space_commit(struct olh_pool_impl *p, struct olh_space *s, uint32_t subpools);
void olh_space_aim(const struct olh_pool_impl *p, const struct olh_space *s, olh_pool *head);
const char *olh_pool_name(const olh_pool *p);
olh_pool *olh_registry_get(uint32_t id);

#endif
