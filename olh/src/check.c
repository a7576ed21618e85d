/* The debug checks that the inline accessors call when a program is built
 * with -DOLH_DEBUG: each names the pool and the object, then aborts. */
#include "internal.h"

void olh__check_index(const olh_pool *pool, uint32_t index, unsigned field)
{
    const char *name = olh_pool_name(pool);
    if (field >= pool->nfields)
        olh_die("pool '%s' has %u fields, not a field %u", name, pool->nfields, field);
    if (index == 0)
        olh_die("null reference used in pool '%s' (field '%s')", name,
                olh_field_name(pool, field));
    if (index >= pool->limit)
        olh_die("object %u of pool '%s' was never allocated", index, name);
    if (!bit_get(cimpl(pool)->space.live, index))
        olh_die("object %u of pool '%s' is freed (used through field '%s')", index, name,
                olh_field_name(pool, field));
}

void olh__check_local(const olh_pool *pool, uint32_t holder, uint32_t target)
{
    if (!olh_local_ok(pool, holder, target))
        olh_die("16-bit range exhausted: object %u of pool '%s' is in sub-pool %u, its local "
                "reference's target %u in sub-pool %u (allocate it with olh_alloc_near, or use a "
                "32-bit reference)",
                holder, olh_pool_name(pool), holder >> pool->shift, target,
                target >> pool->shift);
    if (target)
        olh__check_index(pool, target, 0);
}

void olh__check_global(uint64_t ref)
{
    if (!ref)
        olh_die("null global reference used");
    uint32_t id = (uint32_t)(ref >> 32) & ((1u << OLH_ID_BITS) - 1);
    olh_pool *pool = olh_registry_get(id);
    if (!pool)
        olh_die("global reference %#llx names pool %u, which does not exist", (unsigned long long)ref,
                id);
    uint32_t epoch = (uint32_t)(ref >> (32 + OLH_ID_BITS));
    if (epoch != (pool->epoch & ((1u << OLH_EPOCH_BITS) - 1)))
        olh_die("global reference %#llx to pool '%s' is stale: it was made before the pool's last "
                "collection and was not given to it as a root",
                (unsigned long long)ref, olh_pool_name(pool));
    olh__check_index(pool, (uint32_t)ref, 0);
}

void olh__check_column(const olh_pool *pool, unsigned field, size_t size)
{
    if (field >= pool->nfields)
        olh_die("pool '%s' has %u fields, not a field %u", olh_pool_name(pool), pool->nfields, field);
    const struct olh_pool_impl *p = cimpl(pool);
    if (pool->field[field].stride != size || p->offset_in_group[field] != 0)
        olh_die("OLH_COLUMN: field '%s' of pool '%s' is %s at a stride of %llu bytes, not an array "
                "of %zu-byte elements",
                p->info[field].name, p->type_name,
                p->offset_in_group[field] ? "inside its group" : "stored",
                (unsigned long long)pool->field[field].stride, size);
}
