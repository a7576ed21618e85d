// render: a ray tracer with a scene graph and threads, in the shape of a
// stock renderer (POV-Ray's kind). A scene is generated as text in a small
// scene language (materials, lights, spheres, boxes, triangle meshes,
// nested groups) and parsed by a recursive-descent parser into a scene
// graph: virtual node classes, each with its name (a heap string), a cold
// declaration record kept for error messages, child vectors and shared
// materials; meshes become their triangles, gathered under a bounding
// hierarchy built after each mesh is read. Parsing interleaves those hot
// nodes with token strings, names, records and the name tables.
//
// Worker threads then render rows taken from a shared counter: each ray
// walks the graph (bounding boxes, then the primitives inside), collects
// its intersections in a vector it frees at once, shades with shadow rays
// to every light, and reflects up to three times.
//
// The inputs differ in what a plan trained on one has to carry to another:
// the scene (SCENESEED: how deep groups nest, the mix of spheres, boxes and
// meshes, mesh sizes) changes the parser's recursion and so the call chains
// of the graph's allocations; the size of the picture and the number of
// threads change how much is rendered.
//
// Usage: render WIDTH HEIGHT THREADS SCENESEED OBJECTS. Prints a checksum of
// the picture, which depends neither on where objects live nor on threads.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ULL + 1) {}
  uint64_t next() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
  double uniform() { return (double)(next() >> 11) / 9007199254740992.0; }
  double range(double a, double b) { return a + (b - a) * uniform(); }
  unsigned below(unsigned n) { return (unsigned)(next() % n); }
};

struct Vec {
  double x = 0, y = 0, z = 0;
  Vec() = default;
  Vec(double a, double b, double c) : x(a), y(b), z(c) {}
  Vec operator+(const Vec &o) const { return {x + o.x, y + o.y, z + o.z}; }
  Vec operator-(const Vec &o) const { return {x - o.x, y - o.y, z - o.z}; }
  Vec operator*(double k) const { return {x * k, y * k, z * k}; }
  Vec mul(const Vec &o) const { return {x * o.x, y * o.y, z * o.z}; }
  double dot(const Vec &o) const { return x * o.x + y * o.y + z * o.z; }
  Vec cross(const Vec &o) const { return {y * o.z - z * o.y, z * o.x - x * o.z, x * o.y - y * o.x}; }
  Vec unit() const { double l = std::sqrt(dot(*this)); return l > 0 ? *this * (1 / l) : *this; }
  double axis(int a) const { return a == 0 ? x : a == 1 ? y : z; }
};

struct Ray { Vec o, d, inv; };
Ray make_ray(const Vec &o, const Vec &d) {
  return {o, d, {1 / (d.x != 0 ? d.x : 1e-300), 1 / (d.y != 0 ? d.y : 1e-300), 1 / (d.z != 0 ? d.z : 1e-300)}};
}

struct Box3 {
  Vec lo{1e300, 1e300, 1e300}, hi{-1e300, -1e300, -1e300};
  void add(const Vec &p) {
    lo = {std::min(lo.x, p.x), std::min(lo.y, p.y), std::min(lo.z, p.z)};
    hi = {std::max(hi.x, p.x), std::max(hi.y, p.y), std::max(hi.z, p.z)};
  }
  void add(const Box3 &b) { add(b.lo); add(b.hi); }
  // slab test: the entry distance, or a negative number for a miss
  double enter(const Ray &r, double tmax) const {
    double t0 = 1e-9, t1 = tmax;
    for (int a = 0; a < 3; a++) {
      double inv = r.inv.axis(a), o = r.o.axis(a);
      double ta = (lo.axis(a) - o) * inv, tb = (hi.axis(a) - o) * inv;
      if (ta > tb) std::swap(ta, tb);
      t0 = std::max(t0, ta);
      t1 = std::min(t1, tb);
      if (t0 > t1) return -1;
    }
    return t0;
  }
};

// ------------------------------------------------------------ the scene graph

struct Material {
  std::string name;
  Vec color;
  double reflect, shine;
};

// Where a node was declared, kept for messages: read only when the scene
// is reported, never while rendering.
struct Decl {
  std::string source;   // the declaration's first tokens
  int line;
};

struct Node;
struct Hit {
  double t;
  const Node *node;
  Vec normal;
};

struct Node {
  std::string name;
  Decl *decl = nullptr;
  const Material *mat = nullptr;
  Box3 bounds;
  virtual ~Node() { delete decl; }
  // every intersection of r within (0, tmax), appended to hits
  virtual void intersect(const Ray &r, double tmax, std::vector<Hit> &hits) const = 0;
  virtual size_t count() const { return 1; }
};

struct Sphere : Node {
  Vec c;
  double rad;
  void intersect(const Ray &r, double tmax, std::vector<Hit> &hits) const override {
    Vec oc = r.o - c;
    double b = oc.dot(r.d), disc = b * b - (oc.dot(oc) - rad * rad);
    if (disc < 0) return;
    double s = std::sqrt(disc);
    for (double t : {-b - s, -b + s})
      if (t > 1e-6 && t < tmax) hits.push_back({t, this, ((r.o + r.d * t) - c) * (1 / rad)});
  }
};

struct Cube : Node {
  void intersect(const Ray &r, double tmax, std::vector<Hit> &hits) const override {
    double t = bounds.enter(r, tmax);
    if (t <= 1e-6) return;
    Vec p = r.o + r.d * t, n;
    double best = 1e300;
    for (int a = 0; a < 3; a++)
      for (int side = 0; side < 2; side++) {
        double d = std::fabs(p.axis(a) - (side ? bounds.hi : bounds.lo).axis(a));
        if (d < best) {
          best = d;
          n = Vec(a == 0, a == 1, a == 2) * (side ? 1.0 : -1.0);
        }
      }
    hits.push_back({t, this, n});
  }
};

// Shading data a triangle needs only once it is hit.
struct TriShade {
  Vec n0, n1, n2;   // vertex normals
};

struct Triangle : Node {
  Vec a, e1, e2;
  TriShade *shade = nullptr;
  ~Triangle() override { delete shade; }
  void intersect(const Ray &r, double tmax, std::vector<Hit> &hits) const override {
    Vec p = r.d.cross(e2);
    double det = e1.dot(p);
    if (std::fabs(det) < 1e-12) return;
    double inv = 1 / det;
    Vec s = r.o - a;
    double u = s.dot(p) * inv;
    if (u < 0 || u > 1) return;
    Vec q = s.cross(e1);
    double v = r.d.dot(q) * inv;
    if (v < 0 || u + v > 1) return;
    double t = e2.dot(q) * inv;
    if (t > 1e-6 && t < tmax)
      hits.push_back({t, this, (shade->n0 * (1 - u - v) + shade->n1 * u + shade->n2 * v).unit()});
  }
};

struct Group : Node {
  std::vector<Node *> kids;
  ~Group() override {
    for (Node *k : kids) delete k;
  }
  void close() {
    bounds = Box3();
    for (Node *k : kids) bounds.add(k->bounds);
  }
  void intersect(const Ray &r, double tmax, std::vector<Hit> &hits) const override {
    if (bounds.enter(r, tmax) < 0) return;
    for (const Node *k : kids) k->intersect(r, tmax, hits);
  }
  size_t count() const override {
    size_t n = 1;
    for (const Node *k : kids) n += k->count();
    return n;
  }
};

struct Light { Vec pos, color; };

struct Scene {
  std::map<std::string, std::unique_ptr<Material>> materials;
  std::unordered_map<std::string, Node *> named;   // every node by name
  std::vector<Light> lights;
  Group *root = nullptr;
  ~Scene() { delete root; }
};

// ------------------------------------------------------------ the scene text

struct Writer {
  std::string out;
  int indent = 0;
  void line(const std::string &s) { out.append(indent * 2, ' '); out += s; out += '\n'; }
};

std::string num(double v) {
  char b[32];
  snprintf(b, sizeof b, "%.3f", v);
  return b;
}
std::string vec_text(const Vec &v) { return num(v.x) + " " + num(v.y) + " " + num(v.z); }

struct Style {   // what a scene seed chooses
  unsigned max_depth, fanout, mesh_share, box_share, mesh_min, mesh_max, nmaterials;
};

void gen_group(Writer &w, Rng &rng, const Style &st, unsigned depth, unsigned &left, unsigned &serial,
               const Vec &centre, double extent) {
  w.line("group group_node_" + std::to_string(serial++) + " {");
  w.indent++;
  unsigned kids = 2 + rng.below(st.fanout);
  for (unsigned k = 0; k < kids && left; k++) {
    Vec c = centre + Vec(rng.range(-extent, extent), rng.range(-extent, extent) * 0.5, rng.range(-extent, extent));
    unsigned roll = rng.below(100);
    if (depth < st.max_depth && roll < 30) {
      gen_group(w, rng, st, depth + 1, left, serial, c, extent * 0.45);
      continue;
    }
    std::string mat = "material_" + std::to_string(rng.below(st.nmaterials));
    left--;
    double size = extent * rng.range(0.08, 0.2);
    if (roll < 30 + st.mesh_share) {
      unsigned n = st.mesh_min + rng.below(st.mesh_max - st.mesh_min + 1);
      w.line("mesh mesh_object_" + std::to_string(serial++) + " { at " + vec_text(c) + " size " + num(size * 2) +
             " tris " + std::to_string(n) + " seed " + std::to_string(rng.below(1u << 30)) + " material " + mat + " }");
    } else if (roll < 30 + st.mesh_share + st.box_share) {
      Vec h(size, size * rng.range(0.5, 1.5), size);
      w.line("box box_object_" + std::to_string(serial++) + " { min " + vec_text(c - h) + " max " + vec_text(c + h) +
             " material " + mat + " }");
    } else {
      w.line("sphere sphere_object_" + std::to_string(serial++) + " { center " + vec_text(c) + " radius " +
             num(size) + " material " + mat + " }");
    }
  }
  w.indent--;
  w.line("}");
}

std::string gen_scene(uint64_t seed, unsigned objects) {
  Rng rng(seed);
  Style st{3 + rng.below(3), 3 + rng.below(5), 10 + rng.below(25), 10 + rng.below(20), 4 + rng.below(8), 0, 0};
  st.mesh_max = st.mesh_min + 8 + rng.below(40);
  st.nmaterials = 4 + rng.below(12);
  Writer w;
  w.line("# generated scene, seed " + std::to_string(seed));
  for (unsigned m = 0; m < st.nmaterials; m++)
    w.line("material material_" + std::to_string(m) + " { color " +
           vec_text(Vec(rng.range(0.2, 1), rng.range(0.2, 1), rng.range(0.2, 1))) + " reflect " +
           num(rng.below(3) ? 0.0 : rng.range(0.1, 0.6)) + " shine " + num(rng.range(2, 60)) + " }");
  unsigned nlights = 2 + rng.below(2);
  for (unsigned l = 0; l < nlights; l++)
    w.line("light { at " + vec_text(Vec(rng.range(-20, 20), rng.range(15, 30), rng.range(-25, -5))) + " color " +
           vec_text(Vec(0.6, 0.6, 0.6)) + " }");
  unsigned left = objects, serial = 0;
  w.line("group world {");
  w.indent++;
  while (left) gen_group(w, rng, st, 1, left, serial, Vec(0, 0, 10), 9);
  w.indent--;
  w.line("}");
  return w.out;
}

// ------------------------------------------------------------ the parser

struct ParseError { std::string what; };

class Parser {
 public:
  Parser(const std::string &text, Scene &scene) : text_(text), scene_(scene) {}

  void parse_file() {
    for (std::string t = next(); !t.empty(); t = next()) {
      if (t == "#") { skip_line(); continue; }
      if (t == "material") parse_material();
      else if (t == "light") parse_light();
      else if (t == "group") {
        if (scene_.root) throw ParseError{"second world group"};
        scene_.root = parse_group(t);
      } else throw ParseError{"unexpected '" + t + "'"};
    }
    if (!scene_.root) throw ParseError{"no world group"};
  }

 private:
  const std::string &text_;
  Scene &scene_;
  size_t pos_ = 0;
  int line_ = 1;
  unsigned bounds_ = 0;   // bounding groups made so far, for their names

  std::string next() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) {
      if (text_[pos_] == '\n') line_++;
      pos_++;
    }
    size_t start = pos_;
    if (pos_ < text_.size() && (text_[pos_] == '{' || text_[pos_] == '}' || text_[pos_] == '#')) return text_.substr(pos_++, 1);
    while (pos_ < text_.size() && text_[pos_] != ' ' && text_[pos_] != '\n') pos_++;
    return text_.substr(start, pos_ - start);
  }
  void skip_line() {
    while (pos_ < text_.size() && text_[pos_] != '\n') pos_++;
  }
  void expect(const char *what) {
    std::string t = next();
    if (t != what) throw ParseError{"line " + std::to_string(line_) + ": expected '" + what + "', got '" + t + "'"};
  }
  // key value pairs up to '}': a point or colour key (center, at, min, max,
  // color) takes three values, any other key one
  std::map<std::string, std::vector<std::string>> fields() {
    std::map<std::string, std::vector<std::string>> f;
    expect("{");
    for (std::string k = next(); k != "}"; k = next()) {
      if (k.empty()) throw ParseError{"unexpected end of scene"};
      std::vector<std::string> &v = f[k];
      unsigned n = k == "center" || k == "at" || k == "min" || k == "max" || k == "color" ? 3 : 1;
      for (unsigned i = 0; i < n; i++) v.push_back(next());
    }
    return f;
  }
  static double field(const std::map<std::string, std::vector<std::string>> &f, const char *k, unsigned i = 0) {
    auto it = f.find(k);
    if (it == f.end() || it->second.size() <= i) throw ParseError{std::string("missing ") + k};
    return strtod(it->second[i].c_str(), nullptr);
  }
  static Vec field_vec(const std::map<std::string, std::vector<std::string>> &f, const char *k) {
    return {field(f, k, 0), field(f, k, 1), field(f, k, 2)};
  }
  const Material *material(const std::map<std::string, std::vector<std::string>> &f) {
    auto it = f.find("material");
    if (it == f.end() || it->second.empty()) throw ParseError{"missing material"};
    auto m = scene_.materials.find(it->second[0]);
    if (m == scene_.materials.end()) throw ParseError{"unknown material " + it->second[0]};
    return m->second.get();
  }
  template <class T> T *declare(const std::string &kind, const std::string &name) {
    T *n = new T;
    n->name = name;
    n->decl = new Decl{kind + " " + name + " at line " + std::to_string(line_), line_};
    scene_.named[name] = n;
    return n;
  }

  void parse_material() {
    std::string name = next();
    auto f = fields();
    auto m = std::make_unique<Material>();
    m->name = name;
    m->color = field_vec(f, "color");
    m->reflect = field(f, "reflect");
    m->shine = field(f, "shine");
    scene_.materials[name] = std::move(m);
  }
  void parse_light() {
    auto f = fields();
    scene_.lights.push_back({field_vec(f, "at"), field_vec(f, "color")});
  }

  Group *parse_group(const std::string &kind) {
    Group *g = declare<Group>(kind, next());
    expect("{");
    for (std::string t = next(); t != "}"; t = next()) {
      if (t.empty()) throw ParseError{"unexpected end of scene in group " + g->name};
      g->kids.push_back(parse_object(t));
    }
    g->close();
    return g;
  }

  Node *parse_object(const std::string &kind) {
    if (kind == "group") return parse_group(kind);
    std::string name = next();
    if (kind == "sphere") {
      auto f = fields();
      Sphere *s = declare<Sphere>(kind, name);
      s->c = field_vec(f, "center");
      s->rad = field(f, "radius");
      s->mat = material(f);
      s->bounds.add(s->c - Vec(s->rad, s->rad, s->rad));
      s->bounds.add(s->c + Vec(s->rad, s->rad, s->rad));
      return s;
    }
    if (kind == "box") {
      auto f = fields();
      Cube *b = declare<Cube>(kind, name);
      b->bounds.add(field_vec(f, "min"));
      b->bounds.add(field_vec(f, "max"));
      b->mat = material(f);
      return b;
    }
    if (kind == "mesh") {
      auto f = fields();
      return parse_mesh(name, f);
    }
    throw ParseError{"line " + std::to_string(line_) + ": unknown object '" + kind + "'"};
  }

  // A mesh: a bumpy patch of triangles about a point, gathered under a
  // bounding hierarchy of groups of at most four.
  Node *parse_mesh(const std::string &name, const std::map<std::string, std::vector<std::string>> &f) {
    Vec at = field_vec(f, "at");
    double size = field(f, "size");
    unsigned n = (unsigned)field(f, "tris");
    Rng rng((uint64_t)field(f, "seed"));
    const Material *mat = material(f);
    unsigned side = 1;
    while (2 * side * side < n) side++;
    std::vector<Vec> grid((side + 1) * (side + 1));
    for (unsigned i = 0; i <= side; i++)
      for (unsigned j = 0; j <= side; j++)
        grid[i * (side + 1) + j] = at + Vec((i / (double)side - 0.5) * size, rng.range(-0.15, 0.15) * size,
                                            (j / (double)side - 0.5) * size);
    std::vector<Node *> tris;
    for (unsigned k = 0; k < n; k++) {
      unsigned cell = k / 2 % (side * side), i = cell / side, j = cell % side;
      Vec p00 = grid[i * (side + 1) + j], p10 = grid[(i + 1) * (side + 1) + j];
      Vec p01 = grid[i * (side + 1) + j + 1], p11 = grid[(i + 1) * (side + 1) + j + 1];
      Vec a = k % 2 ? p10 : p00, b = k % 2 ? p11 : p10, c = p01;
      Triangle *t = declare<Triangle>("triangle", name + "/" + std::to_string(k));
      t->a = a;
      t->e1 = b - a;
      t->e2 = c - a;
      t->mat = mat;
      Vec nrm = t->e1.cross(t->e2).unit();
      if (nrm.y < 0) nrm = nrm * -1;
      t->shade = new TriShade{nrm, (nrm + Vec(0.05, 0, 0)).unit(), (nrm + Vec(0, 0, 0.05)).unit()};
      t->bounds.add(a);
      t->bounds.add(b);
      t->bounds.add(c);
      tris.push_back(t);
    }
    return hierarchy(name, tris, 0);
  }

  Node *hierarchy(const std::string &name, std::vector<Node *> &nodes, unsigned level) {
    if (nodes.size() == 1) return nodes[0];
    Group *g = declare<Group>("bounds", name + ".bounds" + std::to_string(level) + "." + std::to_string(bounds_++));
    if (nodes.size() <= 4) {
      g->kids = nodes;
    } else {
      Box3 all;
      for (Node *k : nodes) all.add(k->bounds);
      Vec ext = all.hi - all.lo;
      int axis = ext.x > ext.z ? 0 : 2;
      std::sort(nodes.begin(), nodes.end(), [axis](const Node *p, const Node *q) {
        return p->bounds.lo.axis(axis) + p->bounds.hi.axis(axis) < q->bounds.lo.axis(axis) + q->bounds.hi.axis(axis);
      });
      size_t half = nodes.size() / 2;
      std::vector<Node *> lo(nodes.begin(), nodes.begin() + half), hi(nodes.begin() + half, nodes.end());
      g->kids.push_back(hierarchy(name, lo, level + 1));
      g->kids.push_back(hierarchy(name, hi, level + 1));
    }
    g->close();
    return g;
  }
};

// ------------------------------------------------------------ rendering

struct Tracer {
  const Scene &scene;

  bool nearest(const Ray &r, double tmax, Hit &out) const {
    std::vector<Hit> hits;   // every crossing along the ray, as a renderer's intersection stack
    scene.root->intersect(r, tmax, hits);
    if (hits.empty()) return false;
    out = *std::min_element(hits.begin(), hits.end(), [](const Hit &a, const Hit &b) { return a.t < b.t; });
    return true;
  }

  Vec trace(const Ray &r, int depth) const {
    Hit h;
    if (!nearest(r, 1e300, h)) return Vec(0.1, 0.12, 0.2) * (0.5 + 0.5 * r.d.y);
    Vec p = r.o + r.d * h.t, n = h.normal;
    if (n.dot(r.d) > 0) n = n * -1;
    const Material &m = *h.node->mat;
    Vec colour = m.color * 0.08;
    for (const Light &l : scene.lights) {
      Vec to = l.pos - p;
      double dist = std::sqrt(to.dot(to));
      Vec dir = to * (1 / dist);
      double lam = n.dot(dir);
      if (lam <= 0) continue;
      Hit blocker;
      if (nearest(make_ray(p + n * 1e-6, dir), dist, blocker)) continue;
      Vec half = (dir - r.d).unit();
      double spec = std::pow(std::max(0.0, n.dot(half)), m.shine);
      colour = colour + m.color.mul(l.color) * lam + l.color * (spec * 0.3);
    }
    if (m.reflect > 0 && depth < 3) {
      Vec d = r.d - n * (2 * r.d.dot(n));
      colour = colour * (1 - m.reflect) + trace(make_ray(p + n * 1e-6, d.unit()), depth + 1) * m.reflect;
    }
    return colour;
  }
};

uint8_t channel(double v) {
  v = v < 0 ? 0 : v > 1 ? 1 : v;
  return (uint8_t)std::lround(std::pow(v, 1 / 2.2) * 255);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: render WIDTH HEIGHT THREADS SCENESEED OBJECTS\n");
    return 2;
  }
  int width = atoi(argv[1]), height = atoi(argv[2]), threads = atoi(argv[3]);
  uint64_t seed = strtoull(argv[4], nullptr, 10);
  unsigned objects = (unsigned)atoi(argv[5]);
  if (width < 1 || height < 1 || threads < 1 || threads > 64 || objects < 1) {
    fprintf(stderr, "render: bad arguments\n");
    return 2;
  }
  std::string text = gen_scene(seed, objects);
  Scene scene;
  try {
    Parser(text, scene).parse_file();
  } catch (const ParseError &e) {
    fprintf(stderr, "render: scene: %s\n", e.what.c_str());
    return 1;
  }

  std::vector<uint8_t> image((size_t)width * height * 3);
  std::atomic<int> next_row{0};
  Tracer tracer{scene};
  Vec eye(0, 4, -14);
  auto work = [&]() {
    for (int y; (y = next_row.fetch_add(1)) < height;) {
      for (int x = 0; x < width; x++) {
        Vec d((x + 0.5) / width * 2 - 1, (1 - (y + 0.5) / height * 2) * height / width, 1.6);
        Vec c = tracer.trace(make_ray(eye, (d - Vec(0, 0.15, 0)).unit()), 0);
        uint8_t *px = &image[((size_t)y * width + x) * 3];
        px[0] = channel(c.x);
        px[1] = channel(c.y);
        px[2] = channel(c.z);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; t++) pool.emplace_back(work);
  work();
  for (std::thread &t : pool) t.join();

  uint64_t sum = 1469598103934665603ULL;
  for (uint8_t b : image) sum = (sum ^ b) * 1099511628211ULL;
  size_t decls = 0;
  for (const auto &kv : scene.named) decls += kv.second->decl->source.size() > 0;
  printf("render %dx%d threads %d scene %llu: %zu nodes (%zu named), %zu lights, checksum %016llx\n", width, height,
         threads, (unsigned long long)seed, scene.root->count(), decls, scene.lights.size(),
         (unsigned long long)sum);
  return 0;
}
