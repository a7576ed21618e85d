"""Plans replayed on the profile of another run (cohort/plan/transfer.py):
the transfer score, the groups that do not pay there dropped, and the runs
refused as another program's, on synthetic profiles with no build."""

import pytest

from cohort.plan import transfer
from cohort.plan.cost import as_read
from cohort.plan.planner import make_plan
from synthetic_profiles import FREE_WALKS, shape_profile


def prof(contexts, edges, argv):
    p = shape_profile(contexts, edges, 4000)
    p["target"] = {"argv": argv, "executable": "/x/prog"}
    return p


# Two groups told apart past a shared entry (site 1): callers 10 and 11.
TRAIN = [(0, [1, 10, 30], 500, 1000), (1, [1, 11, 31], 500, 1000), (2, [5], 300, 0)]


TRAIN_EDGES = [(0, 0, 500), (1, 1, 500)]


def test_replay_on_a_run_with_a_stack_never_profiled():
    """The validation run has the training contexts and one new stack through
    the entry (via 12): the score counts only what training showed; without a
    validation run the new stack's walk would end where it leaves the paths
    (unknown-path cold), but this run shows that such walks find a group (the
    entry's own term), so auto keeps the full walk, and says why."""
    train = prof(TRAIN, TRAIN_EDGES, ["/x/prog", "small"])
    alone = make_plan(train, identify="walk", **FREE_WALKS)
    assert alone.unknown_path == "cold" and alone.paths and not alone.transfers
    val = prof(TRAIN[:2] + [TRAIN[2], (3, [1, 12, 30], 300, 500)],
               [(0, 0, 400), (1, 1, 400), (0, 3, 200)], ["/x/prog", "big"])
    plan = make_plan(train, identify="walk", validations=[val], **FREE_WALKS)
    assert plan.unknown_path == "walk" and len(plan.groups) == 2
    assert any(n.startswith("unknown-path walk: on the validation runs") for n in plan.notes)
    (t,) = plan.transfers
    assert (t.allocations, t.known, t.predicted, t.grouped, t.left) == (1600, 1300, 1300, 1300, 300)
    assert t.run == "/x/prog big" and abs(t.score - 1300 / 1600) < 1e-9
    assert all(g.pays for g in t.groups)
    # the same plan with unknown-path cold sends the new stack to no group
    cold = transfer.evaluate(dict(as_read(plan, train), unknown_path="cold"), train, val,
                             {"walk_ns": 0, "frame_ns": 0, "patched_ns": 0, "miss_ns": 3.5}, "walk")
    assert cold.grouped == 1000 and cold.left == 300


def test_a_group_that_does_not_pay_on_a_validation_run_is_dropped():
    """On the other run group 1's objects are used with an ungrouped
    context's far more than with each other: it goes, with a note naming the
    run; group 0 stays."""
    train = prof(TRAIN, TRAIN_EDGES, ["/x/prog", "small"])
    val = prof(TRAIN, [(0, 0, 400), (1, 1, 100), (1, 2, 900)], ["/x/prog", "other"])
    plan = make_plan(train, identify="walk", validations=[val], **FREE_WALKS)
    assert [g.conjunctions for g in plan.groups] == [[(10,)]]
    assert any("does not transfer to the run `/x/prog other`" in n and "(900 affinitive accesses)" in n
               for n in plan.notes)
    assert make_plan(train, identify="walk", **FREE_WALKS).groups[1].conjunctions == [(1,)]


def test_a_group_whose_stubs_run_far_more_on_a_validation_run_is_dropped():
    """Group 0's selector site (10) is called a hundred times in training,
    but a million times on the other run, where its stub would cost 3 ms
    for 400 affinitive accesses: group 0 does not transfer and goes, with
    the calls named; group 1, whose sites run as often as in training,
    stays. Priced at the runs' own scale (scale=1)."""
    def counted(p, calls):
        for site in p["sites"]:
            site["calls"] = calls.get(site["id"], 100)
        return p
    train = counted(prof(TRAIN, TRAIN_EDGES, ["/x/prog", "small"]), {})
    val = counted(prof(TRAIN, [(0, 0, 400), (1, 1, 400)], ["/x/prog", "other"]), {10: 1_000_000})
    costs = dict(FREE_WALKS["costs"], patched_ns=0, stop_stub_ns=3.0)   # a stop's stub priced as a selector's
    assert len(make_plan(train, costs=costs).groups) == 2
    plan = make_plan(train, costs=costs, validations=[val], scale=1)
    assert [g.conjunctions for g in plan.groups] == [[(11,)]]
    note = next(n for n in plan.notes if "does not transfer to the run `/x/prog other`" in n)
    assert "its patched call sites' stubs run on 1000000 calls, about 3.00 ms" in note


def test_scores_name_families_across_runs():
    """Contexts are matched between runs by module and offset, not by id:
    the validation profile lists them in another order, with other ids."""
    train = prof(TRAIN, TRAIN_EDGES, ["/x/prog", "a"])
    val = prof([(0, [5], 300, 0), (1, [1, 11, 31], 500, 1000), (2, [1, 10, 30], 500, 1000)],
               [(2, 2, 500), (1, 1, 500)], ["/x/prog", "b"])
    plan = make_plan(train, identify="walk", validations=[val], **FREE_WALKS)
    (t,) = plan.transfers
    assert t.predicted == t.known == 1300 and t.grouped == 1000
    assert [g.inside for g in t.groups] == [500, 500]


def test_other_program_or_build_is_refused():
    from cohort.errors import CohortError
    a = prof(TRAIN, TRAIN_EDGES, ["/x/prog"])
    b = prof(TRAIN, TRAIN_EDGES, ["/y/other"])
    b["target"]["executable"] = "/y/other"
    b["modules"][0]["path"] = "/y/other"
    with pytest.raises(CohortError, match="is of another program \\(other\\) than"):
        transfer.same_program(a, b)
    c = prof(TRAIN, TRAIN_EDGES, ["/x/prog"])
    c["modules"][0]["build_id"] = "cd"
    with pytest.raises(CohortError, match="another build of prog"):
        transfer.same_program(a, c)
