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
    adj = {n: {} for n in accesses}
    for (x, y), w in edges.items():
        if x in adj and y in adj:
            adj[x][y] = adj[x].get(y, 0) + w
            if x != y:
                adj[y][x] = adj[y].get(x, 0) + w
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


def from_profile(profile):
    """(accesses, edges, total accesses, members) of a profile's filtered
    graph: over its context families if it has them (cohort/families.py),
    else over its contexts; members maps each node to its contexts, the
    hottest first."""
    contexts = profile["contexts"]
    if profile.get("families") is not None:
        graph = profile["family_graph"]
        members = {f["id"]: sorted(f["contexts"], key=lambda c: (-contexts[c]["accesses"], c))
                   for f in profile["families"]}
    else:
        graph = profile["graph"]
        members = {c["id"]: [c["id"]] for c in contexts}
    nodes = graph["nodes"]
    accesses = {n: sum(contexts[c]["accesses"] for c in members[n]) for n in nodes}
    edges = {}
    for x, y, w in graph["edges"]:
        key = (min(x, y), max(x, y))
        edges[key] = edges.get(key, 0) + w
    return accesses, edges, profile["totals"]["accesses"], members
