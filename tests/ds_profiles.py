"""A synthetic profile with a DS graph, shared by the fast tier's APA
heuristics (tests/fast/test_apa_heuristics.py) and the plans of
tests/integration/test_apa_policies.py read back through the runtime's
parser: a program of known shapes (an array of list heads, lists with
payloads, a recursive tree), its contexts, affinity and pointer stores."""

from cohort.measure.profile import hot_nodes
from cohort.policies import apa, families


# A program with known shapes. Functions (their start offsets) and the call
# sites in them; main is 99.
#   table: an array of 32 list heads          new_table (10), site 1; main 20
#   cells: a list, made by two functions      new_cell (11) site 2 via insert (12) site 3; main 21
#                                              new_cell2 (17) site 12; main 24
#   payloads hanging off the cells            new_payload (13) site 4 via insert site 5; main 21
#   tree: a recursive builder whose malloc    new_node (18) site 6, tail-called from build (14),
#         is tail-called (so families differ)  recursive calls at 7 (left) and 8 (right); main 22
#   data hanging off the tree nodes           new_data (15) site 9 via build site 10
#   log: cold records hanging off the tree    new_log (19) site 13 via build site 14
#   z: hot objects that hold no pointers      new_z (16) site 11; main 23
FUNCTION = {1: 10, 2: 11, 3: 12, 4: 13, 5: 12, 6: 18, 7: 14, 8: 14, 9: 15, 10: 14, 11: 16, 12: 17,
            13: 19, 14: 14, 20: 99, 21: 99, 22: 99, 23: 99, 24: 99}


CONTEXTS = [   # id, sites innermost first, allocations, accesses
    (0, [1, 20], 1, 1000),                  # table
    (1, [2, 3, 21], 5000, 50000),           # cells
    (2, [4, 5, 21], 5000, 20000),           # payloads
    (3, [6, 7, 8, 22], 4000, 40000),        # tree, last entered left then right
    (4, [6, 8, 7, 22], 4000, 40000),        # tree, right then left
    (5, [6, 22], 1, 100),                   # tree root
    (6, [9, 10, 7, 22], 4000, 5000),        # data
    (7, [9, 10, 8, 22], 4000, 5000),        # data
    (8, [11, 23], 3000, 30000),             # z
    (9, [12, 24], 2000, 10000),             # cells from the second function
    (10, [13, 14, 7, 22], 500, 0),          # log: never read
]


TABLE, CELL, PAYLOAD, TREE_L, TREE_R, ROOT, DATA_L, DATA_R, Z, CELL2, LOG = range(11)


POINTERS = (
    [[TABLE, 8 * k, CELL, 10] for k in range(32)]                           # array-like
    + [[CELL, 0, CELL, 3000], [CELL, 0, CELL2, 1500], [CELL2, 0, CELL, 1500],   # one list, two makers
       [CELL, 8, PAYLOAD, 5000]]
    + [[t, off, d, 1000] for t in (TREE_L, TREE_R, ROOT) for off, d in ((0, TREE_L), (8, TREE_R))]
    + [[TREE_L, 16, DATA_L, 4000], [TREE_R, 16, DATA_R, 4000], [TREE_L, 24, LOG, 500]])


AFFINITY = [(CELL, CELL, 20000), (CELL, PAYLOAD, 15000), (TREE_L, TREE_R, 30000), (TREE_L, TREE_L, 9000),
            (TREE_R, TREE_R, 9000), (TREE_L, DATA_L, 4000), (TREE_R, DATA_R, 4000), (Z, Z, 25000),
            (CELL, CELL2, 8000), (TABLE, CELL, 900), (DATA_L, DATA_R, 100)]


def shapes_profile(ds=True):
    sites = [{"id": i, "module": 0, "offset": 0x1000 + 16 * i, "call": "direct", "function": None,
              "file": None, "line": None, "function_start": FUNCTION.get(i)} for i in range(25)]
    contexts = [{"id": i, "sites": s, "truncated": False, "allocations": a, "bytes": 32 * a, "min_size": 32,
                 "max_size": 32, "same_size": True, "frees": 0,
                 "lifetime": {"mean": None, "max": None, "live_at_exit": a},
                 "accesses": acc, "macro_accesses": acc // 2} for i, s, a, acc in CONTEXTS]
    function_of = {s["id"]: s["function_start"] for s in sites}
    fams = families.families(contexts, function_of, {s["id"]: 0 for s in sites})
    kept, covered = hot_nodes(contexts, 1.0)
    keep = set(kept)
    profile = {
        "format": "cohort-profile", "version": 3 if ds else 2,
        "parameters": {"max_size": 4096, "affinity_distance": 128, "coverage": 1.0},
        "target": {"argv": ["/x/shapes"]},
        "totals": {"accesses": sum(c["accesses"] for c in contexts), "allocations": 0},
        "modules": [{"id": 0, "path": "/x/shapes", "build_id": "ab", "system": False}],
        "sites": sites, "contexts": contexts, "families": fams,
        "graph": {"nodes": kept, "edges": [list(e) for e in AFFINITY if e[0] in keep and e[1] in keep],
                  "coverage": covered},
        "family_graph": families.family_graph(fams, contexts, AFFINITY, 1.0, hot_nodes),
    }
    if ds:
        profile["ds_graph"] = {"pointer_stores": sum(e[3] for e in POINTERS), "edges": POINTERS,
                               "array_like": [TABLE]}
    return profile


def pools_as_contexts(profile, policy):
    """The policy's pools, each as the sorted contexts it holds."""
    from cohort.policies.halo import from_profile
    g = apa.build(profile, from_profile(profile)[0])
    return [sorted(c for n in pool for c in g.contexts[n]) for pool in apa.pools(g, policy)]
