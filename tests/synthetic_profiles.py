"""Synthetic profiles for the planner's tests, shared by the fast tier's
rules (tests/fast/test_planner_rules.py) and the integration tests that
read the plans back through the runtime's parser: hand-made contexts and
graphs, and the cost settings that isolate one rule."""


FREE_WALKS = {"rest": "none", "costs": {"walk_ns": 0, "frame_ns": 0, "patched_ns": 0, "passthrough_ns": 0,
                                        "stop_ns": 0, "empty_ns": 0}}   # verdict logic alone


def shape_profile(contexts, edges, total_accesses, nsites=100):
    """A profile of hand-made contexts: (id, sites innermost first, allocations,
    accesses); edges (x, y, weight) over the hot ones."""
    site = lambda i: {"id": i, "module": 0, "offset": 0x100 + i, "call": "direct",  # noqa: E731
                      "function": None, "file": None, "line": None}
    nodes = sorted({x for x, y, _ in edges} | {y for x, y, _ in edges})
    return {"parameters": {"max_size": 4096}, "totals": {"accesses": total_accesses},
            "modules": [{"id": 0, "path": "/x/prog", "build_id": "ab", "system": False}],
            "sites": [site(i) for i in range(nsites)],
            "contexts": [{"id": i, "sites": s, "allocations": a, "accesses": acc, "truncated": False,
                          "bytes": 32 * a, "min_size": 32, "max_size": 32, "frees": 0,
                          "lifetime": {"mean": None, "max": None, "live_at_exit": a}}
                         for i, s, a, acc in contexts],
            "graph": {"nodes": nodes, "edges": [list(e) for e in edges], "coverage": 1.0}}


# A recursive builder: malloc at site 1 in build(), recursive calls at 2 (left)
# and 3 (right), build() called from main at 4; main also allocates at 5, as
# many objects of the nodes' size, which a pool of the nodes' own keeps apart
# from them (without them, the rest pool's size class holds the nodes alone,
# and a group would gain nothing for what it costs the other allocations).
# The hot contexts hold the same sites in two orders (left then right, right
# then left); the ones entered through one side only, and the outermost call,
# stay cold.
BUILDER = [(0, [1, 4], 1, 10), (1, [1, 2, 4], 100, 500), (2, [1, 3, 4], 100, 500),
           (3, [1, 2, 3, 4], 50000, 400000), (4, [1, 3, 2, 4], 50000, 400000), (5, [5], 100000, 0)]


BUILDER_EDGES = [(3, 3, 300000), (4, 4, 300000), (3, 4, 600000)]


# The modest churn shape's arithmetic (its 2 M patched decisions cost 20 ms
# against the 28 ms its pool can save) at a patched decision of 10 ns, as it
# was priced when these tests were written: they test the planner's logic,
# not the runtime's calibration (cohort.plan.planner.COST_DEFAULTS). A decision
# or a call through a stop site is priced as through any selector site.
MODEST_COSTS = {"patched_ns": 10.0, "stop_ns": 10.0, "stop_stub_ns": 3.0, "empty_ns": 10.0}


def churn_profile(affinity, accesses=3_000_000):
    """A list cell made a million times behind a shared entry (site 1) and
    told apart from its twin by the next frame: every allocation walks, the
    group's to that frame (a stop site), its twin's to the end (11 frames)."""
    deep = [20, 30, 40, 50, 60, 70, 80]
    return shape_profile([(0, [1, 10] + deep, 1_000_000, accesses), (1, [1, 11] + deep, 1_000_000, 0)],
                         [(0, 0, affinity)], accesses)
