/* graph: an undirected graph grown one vertex at a time; each new vertex is
 * joined to a few earlier ones (mostly near it in number, some anywhere).
 * Every vertex has an adjacency list of small cells, and every edge is also
 * an entry of a chained hash table keyed by its vertex pair, which the build
 * consults to refuse duplicates. Vertices, edge entries and both adjacency
 * cells of each edge are made interleaved. Then rounds of queries: BFS from
 * a few sources, edge-existence lookups through the hash table (half of them
 * for edges known to exist), and for every vertex the sum of its
 * neighbours' degrees.
 * Usage: graph VERTICES DEGREE ROUNDS SEED. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

struct adj;
struct vertex { struct adj *adj; long id, degree, dist, seen; };
struct edge { struct edge *next; long u, v, weight; };
struct adj { struct adj *next; struct vertex *to; struct edge *edge; };

static unsigned long rng;
static unsigned long next_rand(unsigned long n) {
  rng = rng * 6364136223846793005ul + 1442695040888963407ul;
  return (rng >> 33) % n;
}
static unsigned long mix(unsigned long x) {
  x ^= x >> 31; x *= 0x7fb5d329728ea185ul; x ^= x >> 27; x *= 0x81dadef4bc2dd44dul;
  return x ^ (x >> 33);
}

static struct vertex **vertices;
static struct edge **table;
static unsigned long mask;
static long nedges;

static unsigned long slot(long u, long v) {
  if (u > v) { long t = u; u = v; v = t; }
  return mix((unsigned long)u * 0x100000001b3ul + (unsigned long)v) & mask;
}

static struct edge *find_edge(long u, long v) {
  if (u > v) { long t = u; u = v; v = t; }
  for (struct edge *e = table[slot(u, v)]; e; e = e->next)
    if (e->u == u && e->v == v) return e;
  return NULL;
}

NOINLINE static struct vertex *new_vertex(long id) {
  struct vertex *x = malloc(sizeof *x);
  if (!x) exit(1);
  x->adj = NULL; x->id = id; x->degree = 0; x->dist = 0; x->seen = -1;
  return x;
}
NOINLINE static struct edge *new_edge(long u, long v, long weight) {
  struct edge *e = malloc(sizeof *e);
  if (!e) exit(1);
  if (u > v) { long t = u; u = v; v = t; }
  e->u = u; e->v = v; e->weight = weight;
  unsigned long s = slot(u, v);
  e->next = table[s]; table[s] = e;
  nedges++;
  return e;
}
NOINLINE static void new_adj(struct vertex *from, struct vertex *to, struct edge *e) {
  struct adj *a = malloc(sizeof *a);
  if (!a) exit(1);
  a->to = to; a->edge = e;
  a->next = from->adj; from->adj = a;
  from->degree++;
}

static void connect(long u, long v) {
  if (u == v || find_edge(u, v)) return;
  struct edge *e = new_edge(u, v, 1 + (long)next_rand(100));
  new_adj(vertices[u], vertices[v], e);
  new_adj(vertices[v], vertices[u], e);
}

/* Breadth-first from src: sum of distances, count reached, eccentricity. */
static unsigned long bfs(long src, long epoch, struct vertex **queue) {
  long head = 0, tail = 0, reached = 0, far = 0;
  unsigned long sum = 0;
  vertices[src]->seen = epoch; vertices[src]->dist = 0;
  queue[tail++] = vertices[src];
  while (head < tail) {
    struct vertex *x = queue[head++];
    reached++;
    sum += (unsigned long)x->dist;
    if (x->dist > far) far = x->dist;
    for (struct adj *a = x->adj; a; a = a->next)
      if (a->to->seen != epoch) {
        a->to->seen = epoch;
        a->to->dist = x->dist + 1;
        queue[tail++] = a->to;
      }
  }
  return sum * 7 + (unsigned long)reached * 3 + (unsigned long)far;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000;
  long degree = argc > 2 ? atol(argv[2]) : 4;
  int rounds = argc > 3 ? atoi(argv[3]) : 2;
  rng = argc > 4 ? strtoul(argv[4], NULL, 10) : 1;
  if (n < 2 || degree < 1) { fputs("graph: need VERTICES >= 2 and DEGREE >= 1\n", stderr); return 2; }
  vertices = malloc(sizeof *vertices * (size_t)n);
  unsigned long buckets = 1;
  while (buckets < (unsigned long)(n * degree)) buckets <<= 1;
  table = calloc(buckets, sizeof *table);
  struct vertex **queue = malloc(sizeof *queue * (size_t)n);
  if (!vertices || !table || !queue) return 1;
  mask = buckets - 1;

  for (long i = 0; i < n; i++) {
    vertices[i] = new_vertex(i);
    if (i == 0) continue;
    long k = 1 + (long)next_rand((unsigned long)(2 * degree));
    for (long j = 0; j < k; j++) {
      long other;
      if (next_rand(10) < 7) {
        long back = 1 + (long)next_rand(64);
        other = i > back ? i - back : 0;
      } else {
        other = (long)next_rand((unsigned long)i);
      }
      connect(i, other);
    }
  }

  unsigned long check = 0;
  long epoch = 0;
  for (int r = 0; r < rounds; r++) {
    for (int s = 0; s < 4; s++) check = check * 31 + bfs((long)next_rand((unsigned long)n), epoch++, queue);
    long found = 0, weights = 0;
    for (long q = 0; q < n; q++) {
      long u = (long)next_rand((unsigned long)n), v;
      if (q & 1) {
        v = (long)next_rand((unsigned long)n);
      } else {
        struct adj *a = vertices[u]->adj;
        for (long hops = (long)next_rand(4); hops > 0 && a && a->next; hops--) a = a->next;
        v = a ? a->to->id : u;
      }
      struct edge *e = find_edge(u, v);
      if (e) { found++; weights += e->weight; e->weight = e->weight % 100 + 1; }
    }
    check = check * 31 + (unsigned long)found * 1000003 + (unsigned long)weights;
    unsigned long degrees = 0;
    for (long i = 0; i < n; i++)
      for (struct adj *a = vertices[i]->adj; a; a = a->next) degrees += (unsigned long)(a->to->degree * (a->edge->weight & 3));
    check = check * 31 + degrees;
  }

  for (long i = 0; i < n; i++) {
    for (struct adj *a = vertices[i]->adj, *next; a; a = next) { next = a->next; free(a); }
    free(vertices[i]);
  }
  for (unsigned long b = 0; b < buckets; b++)
    for (struct edge *e = table[b], *next; e; e = next) { next = e->next; free(e); }
  free(table); free(queue); free(vertices);
  printf("graph %ld %ld %d edges %ld checksum %lu\n", n, degree, rounds, nedges, check);
  return 0;
}
