"""Automatic Pool Allocation's heuristics as planner policies (cohort/apa.py,
planner.make_plan(policy=...)), halo+ds, and `cohort explain --ds-graph`."""

import json

import pytest

from conftest import COHORT, PROGRAMS, cohort_env, run
from cohort.policies import APA_POLICIES, DS_POLICIES, apa, families
from cohort.errors import CohortError
from cohort.plan.planner import make_plan, render, report
from cohort.measure.profile import hot_nodes

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


def test_families_differ_but_recursion_is_one_allocation_site():
    """The tail-called builder leaves one family per side last entered; APA
    sees one allocation site, and the data records of both sides as one."""
    p = shapes_profile()
    family = {c: f["id"] for f in p["families"] for c in f["contexts"]}
    assert family[TREE_L] != family[TREE_R]
    assert apa.recursive_sites(p) == {7, 8}
    _, members = apa.units(p)
    site = apa.allocation_sites(p, members)
    assert site[family[TREE_L]] == site[family[TREE_R]] == site[family[ROOT]]
    assert site[family[DATA_L]] == site[family[DATA_R]]
    assert site[family[CELL]] != site[family[CELL2]]


def test_ds_nodes_unify_the_targets_of_a_field_and_find_collections():
    from cohort.policies.halo import from_profile
    p = shapes_profile()
    g = apa.build(p, from_profile(p)[0])
    node = {c: n for n, cs in g.contexts.items() for c in cs}
    # cells from two makers: one list, one node (the field at +0 points to both)
    assert node[CELL] == node[CELL2]
    assert node[TREE_L] == node[TREE_R] == node[ROOT] and node[DATA_L] == node[DATA_R]
    assert len(set(node.values())) == 7   # table, cells, payloads, tree, data, log, z
    assert g.array_like == {node[TABLE]}
    assert g.collections() == [[node[TREE_L]], [node[CELL]], [node[TABLE]]]   # most accessed first
    # the table is a collection but no traversal reaches it; what hangs off
    # the lists and the tree is reachable
    assert g.traversable() == {node[c] for c in (CELL, PAYLOAD, TREE_L, DATA_L, LOG)}
    assert node[LOG] not in g.hot and node[Z] in g.hot
    assert g.offsets[(node[TABLE], node[CELL])] == [8 * k for k in range(32)]


@pytest.mark.parametrize("policy, expected", [
    # AllPools + OnePoolPerNode: each hot node alone (the cold log records get none)
    ("apa-all", [[TREE_L, TREE_R, ROOT], [CELL, CELL2], [Z], [PAYLOAD], [DATA_L, DATA_R], [TABLE]]),
    # TraversablePools + OnePoolPerCollection: a list with its payloads, a
    # tree with its data; not the table (no traversal reaches it), not z
    ("apa-collections", [[TREE_L, TREE_R, ROOT, DATA_L, DATA_R], [CELL, CELL2, PAYLOAD]]),
    # MaximalDS: each connected structure, the table with its lists
    ("apa-maximal", [[TREE_L, TREE_R, ROOT, DATA_L, DATA_R], [TABLE, CELL, CELL2, PAYLOAD], [Z]]),
])
def test_each_heuristic_makes_the_papers_pools(policy, expected):
    assert pools_as_contexts(shapes_profile(), policy) == [sorted(e) for e in expected]


def agrees_with_runtime(plan, profile, tmp_path):
    from cohort.formats.planfile import decide
    from cohort.plans import read_plan
    (tmp_path / "plan").write_text(render(plan, profile))
    read = read_plan(tmp_path / "plan")
    index = {s: i for i, s in enumerate(plan.sites)}
    for c in profile["contexts"]:
        assert decide(read, [index.get(s) for s in c["sites"]], size=32) == plan.predicted[c["id"]], c["id"]


@pytest.mark.parametrize("policy", APA_POLICIES)
def test_plans_of_the_heuristics_keep_every_pool_and_place_it(policy, tmp_path):
    """Every pool a heuristic makes is a plan group (none is dropped for
    affinity or cost), its contexts go to it at run time, and the plan says
    which policy made it."""
    p = shapes_profile()
    plan = make_plan(p, policy=policy)
    pools = pools_as_contexts(p, policy)
    assert [sorted(g.members) for g in plan.groups] == pools
    for i, pool in enumerate(pools):
        assert all(plan.predicted[c] == i for c in pool)
    agrees_with_runtime(plan, p, tmp_path)
    assert f"# made by cohort plan --policy {policy} from" in render(plan, p)
    assert f"made by APA's heuristic {policy} on the DS graph" in report(plan, p)
    assert "one DS node" in report(plan, p)


def test_halo_plus_ds_adds_traversals_to_the_affinity():
    """halo+ds: each unit's visits (macro accesses) are shared among the
    units pointing to it by their stores; edges to cold units are left out."""
    p = shapes_profile()
    unit_of, _ = apa.units(p)
    from cohort.policies.halo import from_profile
    accesses = from_profile(p)[0]
    w = apa.traversal_weights(p, unit_of, accesses)
    u = unit_of.__getitem__
    # payloads: 10000 visits, all through cells
    assert w[tuple(sorted((u(CELL), u(PAYLOAD))))] == 10000
    # cells (25000 visits) are pointed to by the table (320 stores), by
    # cells (3000) and by the second maker's cells (1500) out of 4820
    assert w[(u(CELL), u(CELL))] == round(25000 * 3000 / 4820)
    assert w[tuple(sorted((u(TABLE), u(CELL))))] == round(25000 * 320 / 4820)
    assert not any(u(LOG) in k for k in w)
    plan = make_plan(p, policy="halo+ds")
    assert "extra affinity (halo+ds)" in report(plan, p)
    assert plan.groups and plan.policy == "halo+ds"


def test_no_collection_plans_no_group_and_says_why():
    p = shapes_profile()
    p["ds_graph"] = {"pointer_stores": 0, "edges": [], "array_like": []}
    plan = make_plan(p, policy="apa-collections")
    assert plan.groups == [] and "no hot object is reachable from a collection" in plan.why_none
    # no field unifies the two makers' cells now; recursion still makes the
    # tree and its data one allocation site each
    assert len(make_plan(p, policy="apa-all").groups) == 7


@pytest.mark.parametrize("policy", DS_POLICIES)
def test_a_profile_without_ds_graph_is_refused(policy):
    with pytest.raises(CohortError, match="profile the program again"):
        make_plan(shapes_profile(ds=False), policy=policy)


# ---- on a real program ------------------------------------------------------

DSGRAPH = PROGRAMS / "dsgraph"


@pytest.fixture(scope="module")
def dsprofile(tmp_path_factory):
    d = tmp_path_factory.mktemp("apa")
    r = run([COHORT, "profile", "-o", d / "p.json", "--", DSGRAPH, "3000"])
    assert r.returncode == 0, r.stderr.decode()
    return d, d / "p.json"


@pytest.mark.parametrize("policy", ("apa-collections", "halo+ds"))
def test_policy_plan_runs_the_program_with_its_groups(dsprofile, policy, tmp_path):
    d, prof = dsprofile
    plan = tmp_path / "plan"
    r = run([COHORT, "plan", "--policy", policy, "-o", plan, prof])
    assert r.returncode == 0, r.stderr.decode()
    expected = run([DSGRAPH, "3000"]).stdout
    stats = tmp_path / "stats.json"
    r = run([DSGRAPH, "3000"], env=cohort_env(plan=plan, stats=stats))
    assert r.returncode == 0 and r.stdout == expected and b"cohort" not in r.stderr
    groups = json.loads(stats.read_text())["groups"]
    # the tree, the list cells: each group got its objects (the rest pool, one
    # pool or split by class as the plan says, is none of them)
    rest = [g for g in groups if g["name"] == "rest" or g["name"].startswith("rest/")]
    assert rest and sum(1 for g in groups if g["allocations"] >= 2999 and g not in rest) == 2


def test_explain_draws_the_ds_graph_coloured_by_group(dsprofile, tmp_path):
    d, prof = dsprofile
    svg = tmp_path / "ds.svg"
    r = run([COHORT, "explain", "--policy", "apa-maximal", "--graph", "-", "--ds-graph", svg, prof])
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "with --policy apa-maximal" in out and "DS graph: " in out and "collections" in out
    text = svg.read_text()
    assert "DS graph of dsgraph" in text and "double ring: a collection" in text
    assert "new_tree" in text and "new_cell" in text and "+16: " in text   # the payload field
    assert "group 0: g0-new_tree" in text and "group 1: g1-new_cell" in text
    # a plan and a policy together are refused
    (tmp_path / "plan").write_text("")
    r = run([COHORT, "explain", "--policy", "apa-all", prof, tmp_path / "plan"])
    assert r.returncode != 0 and "give a plan or --policy" in r.stderr.decode()


@pytest.mark.parametrize("policy", DS_POLICIES + ("--ds-graph",))
def test_an_older_profile_is_refused_in_one_line_and_nothing_is_lost(dsprofile, policy, tmp_path):
    d, prof = dsprofile
    p = json.loads(prof.read_text())
    del p["ds_graph"]
    p["version"] = 2
    old = tmp_path / "old.json"
    old.write_text(json.dumps(p))
    (tmp_path / "out").write_text("mine")
    if policy == "--ds-graph":
        argv = ["explain", "--force", "--graph", "-", "--ds-graph", tmp_path / "out", old]
    else:
        argv = ["plan", "--force", "--policy", policy, "-o", tmp_path / "out", old]
    r = run([COHORT, *argv])
    err = r.stderr.decode()
    assert r.returncode != 0 and "Traceback" not in err, err
    what = policy if policy == "--ds-graph" else f"--policy {policy}"
    assert err.count("\n") == 1 and f"{what} needs the profile's DS graph" in err, err
    assert "format version 2" in err and "profile the program again" in err
    assert (tmp_path / "out").read_text() == "mine"


def test_ds_graph_labels_tell_apart_nodes_that_enter_at_one_site():
    """Two lists whose cells one function makes, called from two places,
    are two DS nodes: their labels go out to the callers that differ."""
    from cohort.present.explain import distinct_labels
    p = shapes_profile()
    labels = distinct_labels(p, {"a": TREE_L, "b": ROOT, "c": CELL})
    assert labels == {"a": "shapes+0x1060 < shapes+0x1070", "b": "shapes+0x1060 < shapes+0x1160",
                      "c": "shapes+0x1020"}


def test_optimize_plans_with_the_policy_given(tmp_path):
    r = run([COHORT, "optimize", "--policy", "apa-maximal", "-o", tmp_path / "opt", "--", DSGRAPH, "500"])
    assert r.returncode == 0, r.stderr.decode()
    assert "--policy apa-maximal from profile.json" in (tmp_path / "opt" / "plan").read_text()
    assert "made by APA's heuristic apa-maximal" in r.stdout.decode()
