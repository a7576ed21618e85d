"""Automatic Pool Allocation's heuristics and halo+ds as planner policies
(cohort/policies/apa.py, planner.make_plan(policy=...)) on a synthetic
profile with a DS graph: the pools each heuristic makes, the DS nodes, and
a profile without a DS graph refused. No build."""

import pytest

from cohort.errors import CohortError
from cohort.plan.planner import make_plan, report
from cohort.policies import DS_POLICIES, apa
from ds_profiles import (CELL, CELL2, DATA_L, DATA_R, LOG, PAYLOAD, ROOT, TABLE, TREE_L, TREE_R, Z,
                         pools_as_contexts, shapes_profile)


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


def test_ds_graph_labels_tell_apart_nodes_that_enter_at_one_site():
    """Two lists whose cells one function makes, called from two places,
    are two DS nodes: their labels go out to the callers that differ."""
    from cohort.present.explain import distinct_labels
    p = shapes_profile()
    labels = distinct_labels(p, {"a": TREE_L, "b": ROOT, "c": CELL})
    assert labels == {"a": "shapes+0x1060 < shapes+0x1070", "b": "shapes+0x1060 < shapes+0x1160",
                      "c": "shapes+0x1020"}
