/* Type descriptors: flattened (a nested type's fields take its place),
 * checked, and turned into the pool's layout of fields. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *kind_name(enum olh_kind k)
{
    switch (k) {
    case OLH_REF16: return "local (16-bit) reference";
    case OLH_REF32: return "pool (32-bit) reference";
    case OLH_REF64: return "global (64-bit) reference";
    default: return "data field";
    }
}

static uint32_t kind_size(enum olh_kind k)
{
    return k == OLH_REF16 ? 2 : k == OLH_REF32 ? 4 : k == OLH_REF64 ? 8 : 0;
}

static const char *or_unnamed(const char *s)
{
    return s ? s : "?";
}

static int flatten(struct olh_pool_impl *p, const struct olh_type *t, const char *prefix,
                   int depth, uint32_t *groups, const uint32_t *group)
{
    if (depth > OLH_MAX_NESTING)
        return olh_fail(OLH_EINVAL, "type '%s' nests deeper than %d (a type inside itself?)",
                        or_unnamed(t->name), OLH_MAX_NESTING);
    if (t->nfields == 0 || !t->fields)
        return olh_fail(OLH_EINVAL, "type '%s' has no fields", or_unnamed(t->name));
    for (size_t i = 0; i < t->nfields; i++) {
        const struct olh_field_desc *f = &t->fields[i];
        char name[256];
        if (f->name)
            snprintf(name, sizeof name, "%s%s", prefix, f->name);
        else
            snprintf(name, sizeof name, "%s%zu", prefix, i);
        if (f->nested) {
            char inner[260];
            snprintf(inner, sizeof inner, "%s.", name);
            int r = flatten(p, f->nested, inner, depth + 1, groups, group ? group : &f->group);
            if (r)
                return r;
            continue;
        }
        if ((unsigned)f->kind > OLH_REF64)
            return olh_fail(OLH_EINVAL, "field '%s' of type '%s' has an unknown kind %d", name,
                            or_unnamed(t->name), (int)f->kind);
        if (f->size == 0)
            return olh_fail(OLH_EINVAL, "field '%s' of type '%s' has size 0", name,
                            or_unnamed(t->name));
        if (f->kind != OLH_DATA && f->size != kind_size(f->kind))
            return olh_fail(OLH_EINVAL, "field '%s' of type '%s' is a %s and must be %u bytes, not %u",
                            name, or_unnamed(t->name), kind_name(f->kind), kind_size(f->kind),
                            f->size);
        if (f->size > (1u << 24))
            return olh_fail(OLH_EINVAL, "field '%s' of type '%s' is larger than 16 MiB", name,
                            or_unnamed(t->name));
        if (p->pub.nfields == OLH_MAX_FIELDS)
            return olh_fail(OLH_EINVAL, "type '%s' has more than %d fields once flattened",
                            or_unnamed(t->name), OLH_MAX_FIELDS);
        struct olh_field_info *fi = &p->info[p->pub.nfields++];
        fi->name = strdup(name);
        if (!fi->name)
            return olh_fail(OLH_ENOMEM, "out of memory");
        fi->size = f->size;
        fi->kind = f->kind;
        groups[p->pub.nfields - 1] = group ? *group : f->group;
    }
    return OLH_OK;
}

/* A field's alignment in its group: the largest power of two that divides
 * its size, at most 8, as C aligns integers, floats and pointers. */
static uint32_t field_align(uint32_t size)
{
    uint32_t a = size & -size;
    return a > 8 ? 8 : a;
}

int olh_type_layout(struct olh_pool_impl *p, const struct olh_type *type,
                    const struct olh_pool_options *o)
{
    if (!type)
        return olh_fail(OLH_EINVAL, "no type");
    if ((unsigned)o->layout > OLH_GROUPED)
        return olh_fail(OLH_EINVAL, "unknown layout %d", (int)o->layout);
    p->type_name = strdup(or_unnamed(type->name));
    if (!p->type_name)
        return olh_fail(OLH_ENOMEM, "out of memory");
    uint32_t groups[OLH_MAX_FIELDS];
    int r = flatten(p, type, "", 0, groups, NULL);
    if (r)
        return r;
    uint32_t n = p->pub.nfields;
    for (uint32_t i = 0; i < n; i++)
        if (p->info[i].kind != OLH_DATA) {
            p->refs[p->nrefs++] = (uint8_t)i;
            if (p->info[i].kind == OLH_REF16)
                p->has_local = true;
        }

    uint32_t c = o->subpool_objects ? o->subpool_objects : OLH_DEFAULT_SUBPOOL;
    if (c < 64 || c > OLH_MAX_SUBPOOL || (c & (c - 1)))
        return olh_fail(OLH_EINVAL, "%u objects per sub-pool: not a power of two from 64 to %u", c,
                        OLH_MAX_SUBPOOL);
    if (p->has_local && c > OLH_MAX_LOCAL_SUBPOOL)
        return olh_fail(OLH_EINVAL,
                        "%u objects per sub-pool: a type with local references allows at most %u",
                        c, OLH_MAX_LOCAL_SUBPOOL);
    uint64_t max = o->max_objects ? o->max_objects : OLH_DEFAULT_MAX_OBJECTS;
    if (max > OLH_MAX_OBJECTS)
        return olh_fail(OLH_EINVAL, "at most 2^31 objects in a pool, not %llu",
                        (unsigned long long)max);
    if (max < c)
        max = c;
    p->pub.shift = (uint32_t)__builtin_ctz(c);
    p->pub.mask = c - 1;

    /* Each group is a struct of its fields (in field order, each aligned
     * by field_align), stored as one array over the pool: split is a group
     * per field, unsplit one group. */
    uint32_t gid[OLH_MAX_FIELDS], member[OLH_MAX_FIELDS];
    uint32_t ng = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t key = o->layout == OLH_SPLIT ? i : o->layout == OLH_UNSPLIT ? 0 : groups[i];
        uint32_t g = 0;
        while (g < ng && gid[g] != key)
            g++;
        if (g == ng)
            gid[ng++] = key;
        member[i] = g;
    }
    uint64_t object = 0;
    for (uint32_t g = 0; g < ng; g++) {
        uint32_t at = 0, align = 1;
        for (uint32_t i = 0; i < n; i++) {
            if (member[i] != g)
                continue;
            uint32_t a = field_align(p->info[i].size);
            at = (at + a - 1) / a * a;
            p->offset_in_group[i] = at;
            p->group_of[i] = (uint8_t)g;
            at += p->info[i].size;
            if (a > align)
                align = a;
        }
        p->group_stride[g] = (at + align - 1) / align * align;
        object += p->group_stride[g];
    }
    p->ngroups = ng;
    p->object_bytes = (uint32_t)object;
    p->max_subpools = (uint32_t)((max + c - 1) / c);
    p->max_objects = (uint64_t)p->max_subpools * c;
    return OLH_OK;
}

void olh_type_free(struct olh_pool_impl *p)
{
    for (uint32_t i = 0; i < p->pub.nfields; i++)
        free(p->info[i].name);
    free(p->type_name);
}
