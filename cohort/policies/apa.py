"""Automatic Pool Allocation's DS graph, as the profiler measured it, and
the paper's pool heuristics on it (Lattner & Adve, PLDI 2005, section 5).

The profile's `ds_graph` counts pointer stores between allocation contexts
(docs/profile-format.md). Here they become APA's DS graph:

- A *unit* is what the planner groups: a context family (recursion folded
  away, cohort/policies/families.py), else a context.
- A *DS node* is a set of units that APA's analysis would not tell apart.
  Data Structure Analysis has a node per allocation site and calling
  context, with the call graph's cycles merged: units whose chains differ
  only in recursive call sites (a tree builder's left and right calls) are
  one. It is unification-based: the objects one field may point to are one
  node. So the targets of each (node, offset) field are unified, until no
  field has two target nodes. A list whose nodes two functions allocate is
  one node, as it is one data structure.
- Every node holds heap objects (APA's **H** flag); a node is *hot* if one
  of its units is a node of HALO's filtered graph (the profile's coverage).
- A node is array-like (**A**) if one of its contexts is, or if its
  objects point to one target node at `ARRAY_OFFSETS` distinct
  offsets or more. A *collection* is an **A** node or a node of a
  non-trivial strongly connected component (a cycle, a self-edge
  included): the shapes a traversal can walk.

The heuristics give pools as lists of nodes; planner.py makes them plans."""

from dataclasses import dataclass, field

from cohort.errors import CohortError


# A context whose objects hold pointers to one target context at this many
# distinct offsets or more is array-like (APA's A flag): an array of
# pointers, or an array of structs that point there. The profile records
# such contexts (measure/profile.py).
ARRAY_OFFSETS = 8


def require(profile, what):
    """The one-line refusal for a profile without a DS graph; `what` needs it."""
    if profile.get("ds_graph") is None:
        raise CohortError(f"{what} needs the profile's DS graph (pointer stores between objects), "
                          f"which profiles of format version {profile.get('version')} do not have: "
                          f"profile the program again with this Cohort (cohort profile or cohort optimize)")


def recursive_sites(profile):
    """Call sites that lie inside a recursion: in some context, a site
    between two activations of one function (the call that led from the
    outer one towards the inner). A recursive builder's chains then reduce
    to one allocation site, as Data Structure Analysis, which merges the
    call graph's cycles, sees them. Functions come from the sites'
    `function_start` (version 2 and later); a site without one is never
    taken for recursive."""
    fn = {s["id"]: (s["module"], s["function_start"]) for s in profile["sites"]
          if s.get("function_start") is not None}
    out = set()
    for c in profile["contexts"]:
        chain = c["sites"]
        innermost = {}
        for k, site in enumerate(chain):
            f = fn.get(site)
            if f is None:
                continue
            if f in innermost:
                out.update(chain[innermost[f] + 1:k + 1])
            else:
                innermost[f] = k
    return out


def allocation_sites(profile, members):
    """{unit: the lowest unit of its allocation site}: units (families or
    contexts) whose chains differ only in recursive call sites are one
    allocation site to APA."""
    recursive = recursive_sites(profile)
    first, out = {}, {}
    for u in sorted(members):
        key = tuple(s for s in profile["contexts"][members[u][0]]["sites"] if s not in recursive)
        out[u] = first.setdefault(key, u)
    return out


def units(profile):
    """({context: unit}, {unit: [contexts]}): families if the profile has them."""
    if profile.get("families") is not None:
        members = {f["id"]: list(f["contexts"]) for f in profile["families"]}
    else:
        members = {c["id"]: [c["id"]] for c in profile["contexts"]}
    return {c: u for u, cs in members.items() for c in cs}, members


class UnionFind:
    def __init__(self, items):
        self.parent = {x: x for x in items}

    def find(self, x):
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a, b):
        """Joins two sets under the lower root; True if they were apart."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        lo, hi = min(ra, rb), max(ra, rb)
        self.parent[hi] = lo
        return True


@dataclass
class DSGraph:
    node_of: dict                 # unit -> DS node (its lowest unit)
    units: dict                   # DS node -> [units]
    contexts: dict                # DS node -> [contexts]
    edges: dict                   # (node, node) -> pointer stores, directed
    offsets: dict                 # (node, node) -> sorted field offsets of its pointers
    array_like: set
    hot: set                      # nodes holding a unit of HALO's filtered graph
    accesses: dict                # node -> accesses to its objects
    unified: list = field(default_factory=list)   # DS nodes of more than one unit

    def successors(self):
        out = {n: set() for n in self.units}
        for a, b in self.edges:
            out[a].add(b)
        return out

    def sccs(self):
        """Strongly connected components (Tarjan's algorithm, iterative), in
        ascending order of their lowest node."""
        succ = {n: sorted(s) for n, s in self.successors().items()}
        index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
        for root in sorted(succ):
            if root in index:
                continue
            work = [(root, 0)]
            index[root] = low[root] = counter[0]
            counter[0] += 1
            stack.append(root)
            on.add(root)
            while work:
                v, i = work[-1]
                if i < len(succ[v]):
                    work[-1] = (v, i + 1)
                    w = succ[v][i]
                    if w not in index:
                        index[w] = low[w] = counter[0]
                        counter[0] += 1
                        stack.append(w)
                        on.add(w)
                        work.append((w, 0))
                    elif w in on:
                        low[v] = min(low[v], index[w])
                    continue
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    comps.append(sorted(comp))
        return sorted(comps)

    def collections(self):
        """APA's collections: each non-trivial SCC (a cycle, or one node
        pointing to itself) and each array-like node outside one, as
        sorted node lists, the most accessed first."""
        out, cyclic = [], set()
        for comp in self.sccs():
            if len(comp) > 1 or (comp[0], comp[0]) in self.edges:
                out.append(comp)
                cyclic.update(comp)
        out += [[n] for n in sorted(self.array_like - cyclic)]
        return sorted(out, key=lambda c: (-sum(self.accesses[n] for n in c), c))

    def traversable(self):
        """Nodes reachable from a collection by at least one pointer: the
        objects a traversal over a collection may visit. A node of a cycle
        reaches itself; an array-like node outside one does not."""
        succ = self.successors()
        seen = set()
        todo = [m for comp in self.collections() for n in comp for m in succ[n]]
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(succ[n])
        return seen


def build(profile, graph_nodes):
    """The DS graph of a profile. graph_nodes: the units HALO's filter kept."""
    unit_of, members = units(profile)
    ds = profile["ds_graph"]
    uf = UnionFind(members)
    for u, site in allocation_sites(profile, members).items():
        uf.union(u, site)
    # Unify the targets of each field, until every (node, offset) has one.
    raw = [(unit_of[s], off, unit_of[d], n) for s, off, d, n in ds["edges"]]
    changed = True
    while changed:
        changed, target = False, {}
        for s, off, d, _ in raw:
            key = (uf.find(s), off)
            if key in target:
                changed |= uf.union(target[key], d)
                target[key] = uf.find(target[key])
            else:
                target[key] = uf.find(d)
    node_of = {u: uf.find(u) for u in members}
    node_units = {}
    for u in sorted(members):
        node_units.setdefault(node_of[u], []).append(u)
    contexts = {n: sorted(c for u in us for c in members[u]) for n, us in node_units.items()}
    edges, offsets = {}, {}
    for s, off, d, n in raw:
        a, b = node_of[s], node_of[d]
        edges[(a, b)] = edges.get((a, b), 0) + n
        offsets.setdefault((a, b), set()).add(off)
    array_like = {n for (n, _), offs in offsets.items() if len(offs) >= ARRAY_OFFSETS}
    array_like |= {node_of[unit_of[c]] for c in ds.get("array_like", ())}
    hot = {node_of[u] for u in graph_nodes if u in node_of}
    accesses = {n: sum(profile["contexts"][c]["accesses"] for c in cs) for n, cs in contexts.items()}
    return DSGraph(node_of=node_of, units=node_units, contexts=contexts, edges=edges,
                   offsets={e: sorted(o) for e, o in offsets.items()},
                   array_like=array_like, hot=hot, accesses=accesses,
                   unified=sorted(n for n, us in node_units.items() if len(us) > 1))


# ---- APA's heuristics (section 5): which nodes get pools, which share one --

def by_accesses(g, pools):
    return sorted(pools, key=lambda p: (-sum(g.accesses[n] for n in p), p))


def all_pools(g):
    """AllPools + OnePoolPerNode: every hot node a pool of its own."""
    return by_accesses(g, [[n] for n in sorted(g.hot)])


def collection_pools(g):
    """TraversablePools + OnePoolPerCollection: only hot nodes a traversal
    over a collection can visit get pools. A collection's pool holds its
    own traversable nodes and the nodes hanging off it, reachable from it
    without passing through another collection; a node that hangs off two
    goes with the more accessed one (collections() is in that order)."""
    reach = g.traversable()
    colls = g.collections()
    in_coll = {n for c in colls for n in c}
    succ = g.successors()
    owner = {}
    for i, comp in enumerate(colls):
        for n in comp:
            if n in reach:
                owner.setdefault(n, i)
    for i, comp in enumerate(colls):
        todo = [m for n in comp for m in succ[n] if m not in in_coll]
        while todo:
            n = todo.pop()
            if n in owner:
                continue
            owner[n] = i
            todo.extend(m for m in succ[n] if m not in in_coll)
    pools = {}
    for n, i in owner.items():
        if n in g.hot:
            pools.setdefault(i, []).append(n)
    return by_accesses(g, [sorted(p) for p in pools.values()])


def maximal_pools(g):
    """AllPools + MaximalDS: one pool per maximal connected subgraph of hot
    nodes (pointers taken in either direction)."""
    uf = UnionFind(g.hot)
    for a, b in g.edges:
        if a in g.hot and b in g.hot:
            uf.union(a, b)
    pools = {}
    for n in sorted(g.hot):
        pools.setdefault(uf.find(n), []).append(n)
    return by_accesses(g, list(pools.values()))


HEURISTICS = {"apa-all": all_pools, "apa-collections": collection_pools, "apa-maximal": maximal_pools}


def pools(g, policy):
    """The pools an APA policy makes: lists of DS nodes."""
    return HEURISTICS[policy](g)


# ---- ours: the DS graph as extra affinity ---------------------------------

def traversal_weights(profile, unit_of, graph_nodes):
    """halo+ds: each pointer edge between two units of HALO's graph as
    affinity. A visit to an object (a macro access: a run of accesses to
    it) is taken to follow a pointer to it, so a unit's visits are shared
    among the units pointing to it in proportion to their stores:
    {(x, y) with x <= y: estimated traversals}, loops included."""
    keep = set(graph_nodes)
    stores, into = {}, {}
    for s, _, d, n in profile["ds_graph"]["edges"]:
        x, y = unit_of[s], unit_of[d]
        stores[(x, y)] = stores.get((x, y), 0) + n
        into[y] = into.get(y, 0) + n
    visits = {}
    for c in profile["contexts"]:
        u = unit_of[c["id"]]
        visits[u] = visits.get(u, 0) + c["macro_accesses"]
    out = {}
    for (x, y), n in stores.items():
        if x in keep and y in keep and into[y]:
            key = (min(x, y), max(x, y))
            out[key] = out.get(key, 0) + round(visits.get(y, 0) * n / into[y])
    return {k: w for k, w in out.items() if w > 0}
