/* wordfreq: Object-Local Heaps on a small real job. Reads text on standard
 * input, counts each word in a binary search tree and keeps where it
 * occurred in a list of postings. Then it forgets the postings of words seen
 * once and collects both pools: the collector frees the postings nothing
 * reaches any more and lays the tree out depth first, so the walk that
 * prints it runs through memory in order.
 *
 *   build/olh/wordfreq < some.txt
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "olh.h"

/* A word: the hot fields (its text and the two children, walked by every
 * search) side by side, the rest apart. */
enum { W_TEXT, W_LEFT, W_RIGHT, W_COUNT, W_POSTINGS };
static const struct olh_field_desc word_fields[] = {
    {"text", 16, OLH_DATA, NULL, 0},
    {"left", 4, OLH_REF32, NULL, 0},
    {"right", 4, OLH_REF32, NULL, 0},
    {"count", 4, OLH_DATA, NULL, 1},
    {"postings", 8, OLH_REF64, NULL, 1},  /* into the postings pool */
};
static const struct olh_type word_type = {"word", 5, word_fields};

/* A posting: where a word occurred, and the word's previous posting. */
enum { P_AT, P_NEXT };
static const struct olh_field_desc posting_fields[] = {
    {"at", 4, OLH_DATA, NULL, 0},
    {"next", 4, OLH_REF32, NULL, 0},
};
static const struct olh_type posting_type = {"posting", 2, posting_fields};

static olh_pool *words, *postings;

static uint32_t find_or_add(uint32_t *root, const char *text)
{
    uint32_t *at = root;
    while (*at) {
        int c = strncmp(text, (const char *)olh_at(words, *at, W_TEXT), 16);
        if (c == 0)
            return *at;
        at = &OLH_GET(words, *at, c < 0 ? W_LEFT : W_RIGHT, uint32_t);
    }
    uint32_t w = olh_alloc(words);  /* pools do not move while allocating: `at` stays valid */
    memcpy(olh_at(words, w, W_TEXT), text, strnlen(text, 16));  /* a new object is zeroed */
    *at = w;
    return w;
}

static void add_posting(uint32_t w, uint32_t position)
{
    olh_gref head = OLH_GET(words, w, W_POSTINGS, olh_gref);
    uint32_t p = olh_alloc(postings);
    OLH_GET(postings, p, P_AT, uint32_t) = position;
    OLH_GET(postings, p, P_NEXT, uint32_t) = olh_gref_index(head);
    OLH_GET(words, w, W_POSTINGS, olh_gref) = olh_gref_make(postings, p);
    OLH_GET(words, w, W_COUNT, uint32_t)++;
}

struct top {
    uint32_t word[5];
};

static void consider(void *ctx, uint32_t w)
{
    struct top *t = ctx;
    uint32_t c = OLH_GET(words, w, W_COUNT, uint32_t);
    for (int i = 0; i < 5; i++)
        if (!t->word[i] || c > OLH_GET(words, t->word[i], W_COUNT, uint32_t)) {
            memmove(&t->word[i + 1], &t->word[i], (4 - (size_t)i) * sizeof t->word[0]);
            t->word[i] = w;
            break;
        }
}

static unsigned depth_first_order(uint32_t w, uint32_t *previous)
{
    if (!w)
        return 0;
    unsigned out_of_order = w != *previous + 1;
    *previous = w;
    out_of_order += depth_first_order(OLH_GET(words, w, W_LEFT, uint32_t), previous);
    return out_of_order + depth_first_order(OLH_GET(words, w, W_RIGHT, uint32_t), previous);
}

int main(void)
{
    if (olh_pool_create(&words, &word_type, &(struct olh_pool_options){.layout = OLH_GROUPED}) ||
        olh_pool_create(&postings, &posting_type, NULL)) {
        fprintf(stderr, "wordfreq: %s\n", olh_error());
        return 1;
    }
    uint32_t root = 0, position = 0;
    char text[17];
    int n = 0, c;
    do {
        c = getchar();
        if (c != EOF && isalpha(c)) {
            if (n < 16)
                text[n++] = (char)tolower(c);
            continue;
        }
        if (n) {
            text[n] = 0;
            add_posting(find_or_add(&root, text), position++);
            n = 0;
        }
    } while (c != EOF);

    /* Forget the postings of the words seen once: garbage until collected. */
    struct olh_iter it = olh_iter_begin(words);
    for (uint32_t w; (w = olh_iter_next(&it)) != 0;)
        if (OLH_GET(words, w, W_COUNT, uint32_t) == 1)
            OLH_GET(words, w, W_POSTINGS, olh_gref) = 0;
    olh_pool *both[2] = {words, postings};
    struct olh_root roots[1] = {{&root, words}};
    struct olh_collect_options o = {.order = OLH_ORDER_DEPTH};
    struct olh_collect_stats st;
    if (olh_collect(both, 2, roots, 1, &o, &st)) {
        fprintf(stderr, "wordfreq: %s\n", olh_error());
        return 1;
    }
    struct olh_pool_stats ws, ps;
    olh_pool_stats(words, &ws);
    olh_pool_stats(postings, &ps);
    uint32_t previous = 0;
    printf("%u words, %llu distinct, %llu postings kept, %llu freed by the collection\n", position,
           (unsigned long long)ws.live, (unsigned long long)ps.live,
           (unsigned long long)st.freed);
    printf("tree nodes out of depth-first order after collecting: %u\n",
           depth_first_order(root, &previous));
    struct top top = {{0}};
    olh_map(words, consider, &top);
    for (int i = 0; i < 5 && top.word[i]; i++) {
        uint32_t w = top.word[i];
        olh_gref g = OLH_GET(words, w, W_POSTINGS, olh_gref);
        printf("%-16.16s %5u", (const char *)olh_at(words, w, W_TEXT),
               OLH_GET(words, w, W_COUNT, uint32_t));
        if (g)  /* words seen once have no postings left */
            printf("  last at %u", OLH_GET(olh_gref_pool(g), olh_gref_index(g), P_AT, uint32_t));
        putchar('\n');
    }
    olh_pool_destroy(words);
    olh_pool_destroy(postings);
    return 0;
}
