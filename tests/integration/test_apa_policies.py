"""Automatic Pool Allocation's heuristics as planner policies (cohort/apa.py,
planner.make_plan(policy=...)), halo+ds, and `cohort explain --ds-graph`."""

import json

import pytest

from conftest import COHORT, PROGRAMS, cohort_env, run
from cohort.policies import APA_POLICIES, DS_POLICIES
from cohort.plan.planner import make_plan, render, report
from ds_profiles import pools_as_contexts, shapes_profile


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


def test_optimize_plans_with_the_policy_given(tmp_path):
    r = run([COHORT, "optimize", "--policy", "apa-maximal", "-o", tmp_path / "opt", "--", DSGRAPH, "500"])
    assert r.returncode == 0, r.stderr.decode()
    assert "--policy apa-maximal from profile.json" in (tmp_path / "opt" / "plan").read_text()
    assert "made by APA's heuristic apa-maximal" in r.stdout.decode()
