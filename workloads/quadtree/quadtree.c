/* quadtree: a region quad-tree of a generated grey-level image. The image
 * (2^LOG2SIZE pixels square, eight grey levels) is painted with discs,
 * rectangles and specks from the seed; the tree is built top-down, splitting
 * every square that is not of one level, and every leaf also gets a region
 * record on a separate list (read once, for statistics). Then rounds of
 * neighbour queries: each round walks every leaf and finds its neighbours on
 * all four sides through the parent links (up to the common ancestor,
 * mirrored down, then every leaf along the shared side), measuring the
 * boundary between different levels; then answers random point queries the
 * same way. Several images, each with its own tree.
 * Usage: quadtree LOG2SIZE IMAGES ROUNDS QUERIES SEED. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

/* Children: 0 NW, 1 NE, 2 SW, 3 SE (bit 0: east half, bit 1: south half). */
struct quad {
  struct quad *kid[4], *parent;
  int x, y, size, level, which;
};
struct region { struct region *next; int x, y, size, level; };
enum { NORTH, EAST, SOUTH, WEST };

static unsigned long rng;
static unsigned long next_rand(unsigned long n) {
  rng = rng * 6364136223846793005ul + 1442695040888963407ul;
  return (rng >> 33) % n;
}

static int side;
static unsigned char *image;
static struct region *regions;
static long nregions, nnodes;

static void paint(void) {
  memset(image, (int)next_rand(8), (size_t)side * side);
  int shapes = side / 12;
  for (int s = 0; s < shapes; s++) {
    int cx = (int)next_rand(side), cy = (int)next_rand(side);
    int r = 2 + (int)next_rand(side / 10 + 1);
    unsigned char level = (unsigned char)next_rand(8);
    int disc = (int)next_rand(2);
    for (int y = cy - r < 0 ? 0 : cy - r; y < side && y <= cy + r; y++)
      for (int x = cx - r < 0 ? 0 : cx - r; x < side && x <= cx + r; x++)
        if (!disc || (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r) image[(long)y * side + x] = level;
  }
  for (int s = 0; s < side * 2; s++) image[next_rand((unsigned long)side * side)] = (unsigned char)next_rand(8);
}

static int uniform(int x, int y, int size) {
  unsigned char v = image[(long)y * side + x];
  for (int j = y; j < y + size; j++) {
    const unsigned char *row = image + (long)j * side;
    for (int i = x; i < x + size; i++)
      if (row[i] != v) return 0;
  }
  return 1;
}

NOINLINE static void new_region(const struct quad *q) {
  struct region *r = malloc(sizeof *r);
  if (!r) exit(1);
  r->x = q->x; r->y = q->y; r->size = q->size; r->level = q->level;
  r->next = regions;
  regions = r;
  nregions++;
}

NOINLINE static struct quad *build(struct quad *parent, int which, int x, int y, int size) {
  struct quad *q = malloc(sizeof *q);
  if (!q) exit(1);
  nnodes++;
  q->parent = parent; q->which = which;
  q->x = x; q->y = y; q->size = size;
  if (size == 1 || uniform(x, y, size)) {
    q->level = image[(long)y * side + x];
    q->kid[0] = q->kid[1] = q->kid[2] = q->kid[3] = NULL;
    new_region(q);
    return q;
  }
  int h = size / 2;
  q->level = -1;
  for (int i = 0; i < 4; i++) q->kid[i] = build(q, i, x + (i & 1) * h, y + (i >> 1) * h, h);
  return q;
}

static void release(struct quad *q) {
  if (q->kid[0])
    for (int i = 0; i < 4; i++) release(q->kid[i]);
  free(q);
}

/* The bit of a child's index that moving in direction d changes, and whether
 * the move stays inside the parent. */
static int axis(int d) { return d == NORTH || d == SOUTH ? 2 : 1; }
static int stays_inside(int which, int d) {
  int set = (which & axis(d)) != 0;
  return d == NORTH || d == WEST ? set : !set;
}

/* The smallest node at least as large as q adjacent to it in direction d. */
static const struct quad *neighbour(const struct quad *q, int d) {
  if (!q->parent) return NULL;
  if (stays_inside(q->which, d)) return q->parent->kid[q->which ^ axis(d)];
  const struct quad *m = neighbour(q->parent, d);
  if (!m || !m->kid[0]) return m;
  return m->kid[q->which ^ axis(d)];
}

/* Every leaf of m along its side facing back against direction d: adds the
 * shared boundary length where the level differs from `level`, counts the
 * leaves. */
static void along(const struct quad *m, int d, int level, int qsize, long *boundary, long *count) {
  if (!m->kid[0]) {
    int shared = m->size < qsize ? m->size : qsize;
    if (m->level != level) *boundary += shared * (1 + (m->level > level ? m->level - level : level - m->level));
    (*count)++;
    return;
  }
  int b = axis(d);
  int facing = d == NORTH || d == WEST ? b : 0;   /* children whose bit b equals this */
  for (int i = 0; i < 4; i++)
    if ((i & b) == facing) along(m->kid[i], d, level, qsize, boundary, count);
}

static void leaf_neighbours(const struct quad *q, long *boundary, long *count) {
  for (int d = 0; d < 4; d++) {
    const struct quad *m = neighbour(q, d);
    if (m) along(m, d, q->level, q->size, boundary, count);
  }
}

static void every_leaf(const struct quad *q, long *boundary, long *count) {
  if (!q->kid[0]) { leaf_neighbours(q, boundary, count); return; }
  for (int i = 0; i < 4; i++) every_leaf(q->kid[i], boundary, count);
}

static const struct quad *locate(const struct quad *q, int x, int y) {
  while (q->kid[0]) {
    int h = q->size / 2;
    q = q->kid[(x >= q->x + h) | (y >= q->y + h) << 1];
  }
  return q;
}

int main(int argc, char **argv) {
  int log2size = argc > 1 ? atoi(argv[1]) : 9;
  int images = argc > 2 ? atoi(argv[2]) : 1;
  int rounds = argc > 3 ? atoi(argv[3]) : 2;
  long queries = argc > 4 ? atol(argv[4]) : 10000;
  rng = argc > 5 ? strtoul(argv[5], NULL, 10) : 1;
  if (log2size < 4 || log2size > 14) { fputs("quadtree: LOG2SIZE must be 4..14\n", stderr); return 2; }
  side = 1 << log2size;
  image = malloc((size_t)side * side);
  if (!image) return 1;
  unsigned long check = 0;
  for (int im = 0; im < images; im++) {
    paint();
    struct quad *root = build(NULL, 0, 0, 0, side);
    for (int r = 0; r < rounds; r++) {
      long boundary = 0, count = 0;
      every_leaf(root, &boundary, &count);
      check = check * 31 + (unsigned long)boundary * 7 + (unsigned long)count;
      for (long i = 0; i < queries; i++) {
        const struct quad *q = locate(root, (int)next_rand(side), (int)next_rand(side));
        boundary = count = 0;
        leaf_neighbours(q, &boundary, &count);
        check += (unsigned long)(boundary * 3 + count + q->level);
      }
    }
    long area = 0, levels[8] = {0};
    while (regions) {
      struct region *next = regions->next;
      area += (long)regions->size * regions->size;
      levels[regions->level] += regions->size;
      free(regions);
      regions = next;
    }
    for (int i = 0; i < 8; i++) check = check * 31 + (unsigned long)levels[i];
    if (area != (long)side * side) { fputs("quadtree: regions do not tile the image\n", stderr); return 1; }
    release(root);
  }
  free(image);
  printf("quadtree %d %d %d %ld nodes %ld leaves %ld checksum %lu\n",
         log2size, images, rounds, queries, nnodes, nregions, check);
  return 0;
}
