"""Grouping: HALO's greedy weighted-density clustering (CGO 2020, section 4.2,
Figures 6 to 8), on the affinity graph of a profile.

The graph is given as `accesses` {node: count} and `edges` {(x, y): weight}
with x <= y; (x, x) is a loop. Everything here is deterministic: ties go to
the lower node id."""

from dataclasses import dataclass, field

DEFAULTS = {
    "min_weight": None,        # absolute; None = 1/1000 of the heaviest edge
    "max_members": 16,         # largest group
    "tolerance": 0.05,         # HALO's merge tolerance T
    "group_threshold": 0.005,  # a group's internal weight / all accesses
}


@dataclass
class Group:
    members: list
    weight: int                 # sum of the weights of edges inside the group
    score: float                # s(G[members])
    kept: bool = True
    history: list = field(default_factory=list)  # (node, merge benefit) as grown
    apart: list = field(default_factory=list)    # nodes of the groups split from it by size class


def internal(edges, nodes):
    """(weight sum, loop count) of the subgraph induced by `nodes`."""
    nodes = set(nodes)
    weight = loops = 0
    for (x, y), w in edges.items():
        if x in nodes and y in nodes:
            weight += w
            if x == y and w > 0:
                loops += 1
    return weight, loops


def score(edges, nodes):
    """Figure 7: s(G) = sum of weights / (|L| + |V|(|V|-1)/2), where L are the
    loops with positive weight; 0 for a graph with nothing to divide by."""
    weight, loops = internal(edges, nodes)
    n = len(set(nodes))
    denominator = loops + n * (n - 1) / 2
    return weight / denominator if denominator else 0.0


def merge_benefit(edges, group, candidate, tolerance):
    """Figure 8: m(A, B) = S(A u B) - (1 - T) max(S(A), S(B))."""
    a, b = list(group), [candidate]
    return score(edges, a + b) - (1 - tolerance) * max(score(edges, a), score(edges, b))


def _adjacency(edges, nodes):
    """{node: {neighbour: weight}} over `nodes`, from the edges of positive
    weight between two of them (a loop appears once, under its node)."""
    adj = {n: {} for n in nodes}
    for (x, y), w in edges.items():
        if w > 0 and x in adj and y in adj:
            adj[x][y] = adj[x].get(y, 0) + w
            if x != y:
                adj[y][x] = adj[y].get(x, 0) + w
    return adj


def _density(weight, loops, n):
    denominator = loops + n * (n - 1) / 2
    return weight / denominator if denominator else 0.0


def group(accesses, edges, total_accesses, min_weight=None, max_members=16, tolerance=0.05,
          group_threshold=0.005):
    """Figure 6. Returns every group formed, in order of formation; the ones
    under the threshold have kept=False (reports show them).

    Scores are kept incrementally (the group's weight and loops, and each
    candidate's weight to the group), so growing a group costs O(members)
    per candidate rather than a pass over all edges; merge_benefit() is the
    reference it must agree with."""
    if min_weight is None:
        min_weight = max(edges.values(), default=0) / 1000
    edges = {e: w for e, w in edges.items() if w >= min_weight and w > 0}
    adj = _adjacency(edges, accesses)
    loop = {n: adj[n].get(n, 0) for n in adj}
    avail = set(accesses)
    groups = []
    while avail:
        candidates = [(w, e) for e, w in edges.items() if e[0] in avail and e[1] in avail]
        if not candidates:
            break
        _, (u, v) = max(candidates, key=lambda c: (c[0], -c[1][0], -c[1][1]))
        seed = min((u, v), key=lambda n: (-accesses[n], n))
        members = [seed]
        avail.discard(seed)
        weight, loops = loop[seed], 1 if loop[seed] > 0 else 0
        history = [(seed, None)]
        while len(members) < max_members:
            n = len(members)
            current = _density(weight, loops, n)
            best, best_score, best_add = None, 0.0, None
            for stranger in sorted(avail):
                link = sum(adj[stranger].get(m, 0) for m in members)
                lw = loop[stranger]
                merged = _density(weight + link + lw, loops + (lw > 0), n + 1)
                benefit = merged - (1 - tolerance) * max(current, _density(lw, lw > 0, 1))
                if benefit > best_score:
                    best, best_score, best_add = stranger, benefit, (link + lw, lw > 0)
            if best is None:
                break
            members.append(best)
            avail.discard(best)
            weight += best_add[0]
            loops += best_add[1]
            history.append((best, best_score))
        groups.append(Group(members=members, weight=weight, score=_density(weight, loops, len(members)),
                            kept=weight >= total_accesses * group_threshold, history=history))
    return groups


def consolidate(groups, accesses, edges, total_accesses, max_members=16, group_threshold=0.005,
                nbytes=None):
    """A second stage after Figure 6. HALO's density score keeps a node
    whose loop outweighs its edges out of a group, so a cluster whose
    members are each used with all the others (a scene graph's node kinds,
    a parser's tree and its child arrays) comes out as several groups, each
    used more with the others than within itself: each would then be
    dropped as not paying, and the cluster would go back among everything
    else. Here a kept group whose weight to the rest of the graph is at
    least its internal weight is merged with the group, or node, it shares
    the most weight with, the worst such group first, while the merged
    group has at most `max_members` nodes; until no kept group is like that
    or has a partner left. A merge also puts each side's objects among the
    other's: with `nbytes` (bytes allocated, per node) it is made only if the
    weight between them outweighs that dilution, each side's internal weight
    times the share of the pool's bytes the other side takes (a log written
    once per node of a tree, merged with the tree, spreads the tree that its
    walks read over a third more lines). Returns (groups, merges): the
    groups in order of formation (a merged group takes the place of its
    first part), and per merge (node, partner's node, whether the partner
    was a kept group, the weight between them, the unit's internal and
    outside weight before, and "merged" for a kept group's merge or
    "joined" for a unit that joined a kept group, _absorb)."""
    adj = _adjacency(edges, accesses)
    grouped = {n for g in groups for n in g.members}
    units = list(groups) + [Group(members=[n], weight=adj.get(n, {}).get(n, 0), score=0.0, kept=False,
                                  history=[(n, None)])
                            for n in sorted(accesses) if n not in grouped]

    def split(u):   # (inside, outside) weight of a unit
        nodes = set(u.members)
        inside = outside = 0
        for x in nodes:
            for y, w in adj.get(x, {}).items():
                if y in nodes:
                    inside += w if x == y else w / 2
                else:
                    outside += w
        return inside, outside

    def dilution(u, v, u_inside):
        """What merging u with v costs: each side's internal weight times
        the share of the merged pool's bytes the other side holds."""
        bu = sum(nbytes.get(n, 0) for n in u.members)
        bv = sum(nbytes.get(n, 0) for n in v.members)
        if bu + bv == 0:
            return 0.0
        return u_inside * bv / (bu + bv) + split(v)[0] * bu / (bu + bv)

    # The singletons by identity, held so that no group made below can
    # take the address (the id) of one that a merge let go.
    singletons = units[len(groups):]
    free = {id(u) for u in singletons}
    merges, stuck = [], set()
    while True:
        bad = []
        for i, u in enumerate(units):
            if u.kept and i not in stuck:
                inside, outside = split(u)
                if inside <= outside:
                    bad.append((outside - inside, -i, i, inside, outside))
        if not bad:
            break
        _, _, i, inside, outside = max(bad)
        u = units[i]
        links = _links(units, i, adj)
        fits = [(w, -j, j) for j, w in links.items() if len(u.members) + len(units[j].members) <= max_members
                and (nbytes is None or w >= dilution(u, units[j], inside))]
        if not fits:
            stuck.add(i)
            continue
        j = max(fits)[2]
        v = units[j]
        merged = _merged(u, v, edges, total_accesses, group_threshold)
        merges.append((u.members[0], v.members[0], v.kept, links[j], inside, outside, "merged"))
        first, last = min(i, j), max(i, j)
        units[first] = merged
        del units[last]
        stuck = {k if k < last else k - 1 for k in stuck if k not in (i, j)}
    absorbed = _absorb(units, edges, adj, split, dilution, max_members, total_accesses, group_threshold, nbytes)
    return [u for u in units if id(u) not in free], merges + absorbed


def _owners(units):
    """Each node's unit, by index."""
    return {n: j for j, v in enumerate(units) for n in v.members}


def _links(units, i, adj, owner=None):
    """The affinity weight between unit i and each other unit it touches,
    by index (owner: _owners(units), if made already)."""
    owner = _owners(units) if owner is None else owner
    links = {}
    for x in units[i].members:
        for y, w in adj.get(x, {}).items():
            j = owner.get(y)
            if j is not None and j != i:
                links[j] = links.get(j, 0) + w
    return links


def _merged(u, v, edges, total_accesses, group_threshold):
    """Units u and v as one group, u first: kept if its weight reaches the
    threshold, its history saying that v merged into it."""
    members = u.members + v.members
    weight, loops = internal(edges, members)
    return Group(members=members, weight=weight, score=_density(weight, loops, len(members)),
                 kept=weight >= total_accesses * group_threshold,
                 history=u.history + [(v.members[0], "merged")] + v.history[1:])


def _absorb(units, edges, adj, split, dilution, max_members, total_accesses, group_threshold, nbytes):
    """The other side of consolidation: a unit that is not a kept group (a
    node the density score left out, or a group under the threshold) whose
    objects are used with one kept group's at least as much as with each
    other joins that group, under the same size limit and dilution test; the
    strongest link first, until none is left. Density keeps out a node
    whose loop is light against a large group's, however much of its use is
    with that group (xform's element nodes of the result tree, made by copy
    and by the text rule, each used with the text nodes that value-of and
    count make 5 to 12 times as much as with themselves, went to the rest
    pool). A group that took a unit is marked merged, as one consolidated
    above, so that the planner prices its wider selectors as stack walks.
    Changes `units` in place; returns the merges as consolidate's."""
    absorbed = []
    while True:
        owner = _owners(units)
        best = None
        for j, v in enumerate(units):
            if v.kept:
                continue
            links = {i: w for i, w in _links(units, j, adj, owner).items() if units[i].kept}
            if not links:
                continue
            link, _, i = max((w, -i, i) for i, w in links.items())
            inside, outside = split(v)
            u = units[i]
            if (link < inside or len(u.members) + len(v.members) > max_members
                    or (nbytes is not None and link < dilution(u, v, split(u)[0]))):
                continue
            if best is None or link > best[0]:
                best = (link, j, i, inside, outside)
        if best is None:
            return absorbed
        link, j, i, inside, outside = best
        u, v = units[i], units[j]
        units[i] = _merged(u, v, edges, total_accesses, group_threshold)
        del units[j]
        absorbed.append((v.members[0], u.members[0], True, link, inside, outside, "joined"))


def from_profile(profile):
    """(accesses, edges, total accesses, members) of a profile's filtered
    graph: over its context families if it has them (cohort/policies/families.py),
    else over its contexts; members maps each node to its contexts, the
    hottest first."""
    contexts = profile["contexts"]
    graph = graph_of(profile)
    if profile.get("families") is not None:
        members = {f["id"]: sorted(f["contexts"], key=lambda c: (-contexts[c]["accesses"], c))
                   for f in profile["families"]}
    else:
        members = {c["id"]: [c["id"]] for c in contexts}
    nodes = graph["nodes"]
    accesses = {n: sum(contexts[c]["accesses"] for c in members[n]) for n in nodes}
    edges = {}
    for x, y, w in graph["edges"]:
        key = (min(x, y), max(x, y))
        edges[key] = edges.get(key, 0) + w
    return accesses, edges, profile["totals"]["accesses"], members


def graph_of(profile):
    """The graph the planner groups: over context families where the profile
    has them, else over contexts."""
    return profile["family_graph"] if profile.get("families") is not None else profile["graph"]


def dropped_affinity(profile):
    """{node: its affinity with the nodes the coverage filter dropped} of the
    graph from_profile reads (families.dropped_affinity); empty for a
    profile made before it was recorded."""
    return {n: w for n, w in graph_of(profile).get("dropped_affinity", ())}


def node_bytes(profile, members):
    """{node: bytes its contexts allocated}, for consolidate()."""
    contexts = profile["contexts"]
    return {n: sum(contexts[c].get("bytes", 0) for c in cs) for n, cs in members.items()}
