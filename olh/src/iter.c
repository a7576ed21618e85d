/* Walking a pool's live objects in memory order: one at a time, or in runs
 * of consecutive live objects, over which each field is a plain array. */
#include "internal.h"

struct olh_iter olh_iter_begin(const olh_pool *pool)
{
    const struct olh_pool_impl *p = cimpl(pool);
    struct olh_iter it = {
        .live = p->space.live,
        .word = p->space.live[0] & ~1ull,  /* index 0 is null */
        .at = 0,
        .end = (pool->limit + 63) & ~63u,
    };
    return it;
}

void olh_map(olh_pool *pool, void (*fn)(void *ctx, uint32_t index), void *ctx)
{
    struct olh_iter it = olh_iter_begin(pool);
    for (uint32_t i; (i = olh_iter_next(&it)) != 0;)
        fn(ctx, i);
}

void olh_map_runs(olh_pool *pool, void (*fn)(void *ctx, uint32_t first, uint32_t count),
                  void *ctx)
{
    const uint64_t *live = cimpl(pool)->space.live;
    uint32_t words = (pool->limit + 63) >> 6;
    uint32_t run_first = 0, run_count = 0;
    for (uint32_t w = 0; w < words; w++) {  /* columns are contiguous: runs cross sub-pools */
        uint64_t bits = live[w];
        if (w == 0)
            bits &= ~1ull;
        uint32_t at = 0;
        while (at < 64) {
            uint64_t rest = bits >> at;
            if (!rest)
                break;
            uint32_t start = at + (uint32_t)__builtin_ctzll(rest);
            uint64_t from = bits >> start;
            uint32_t len = ~from ? (uint32_t)__builtin_ctzll(~from) : 64 - start;
            uint32_t first = w * 64 + start;
            if (run_count && run_first + run_count == first) {
                run_count += len;
            } else {
                if (run_count)
                    fn(ctx, run_first, run_count);
                run_first = first;
                run_count = len;
            }
            at = start + len;
        }
    }
    if (run_count)
        fn(ctx, run_first, run_count);
}
