"""Program shapes the planner must not lose: recursive builders, whose
contexts hold the same call sites in many orders, folded into families
(cohort/policies/families.py), end to end on a stripped-like -O2 PIE."""

import json
import shutil
import subprocess

import pytest

from conftest import COHORT, PROGRAMS, cohort_env, run
from cohort.policies.families import function_starts, site_functions
from cohort.plan.handplan import call_sites, read_log

BUILDERS = PROGRAMS / "builders"


def test_function_of_a_call_site_in_a_stripped_binary(tmp_path):
    stripped = tmp_path / "builders"
    shutil.copy(BUILDERS, stripped)
    subprocess.run(["strip", "-s", stripped], check=True)
    assert function_starts(stripped) == function_starts(BUILDERS) != []
    assert function_starts(tmp_path / "nope") == [] and function_starts(__file__) == []
    # the recursive calls in build() lie in the same function as its malloc call
    calls = call_sites(BUILDERS, "build", "build") + call_sites(BUILDERS, "build", "malloc")
    calls += call_sites(BUILDERS, "main", "build")
    mods = [{"id": 0, "path": str(stripped), "system": False}]
    sites = [{"id": i, "module": 0, "offset": a} for i, a in enumerate(calls)]
    fn = site_functions(mods, sites)
    assert fn[0] == fn[1] == fn[2] is not None and fn[3] not in (None, fn[0])


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    d = tmp_path_factory.mktemp("builders")
    r = run([COHORT, "optimize", "-o", d / "out", "--", BUILDERS, "/dev/null", "10"])
    assert r.returncode == 0, r.stderr.decode()
    return d / "out", r.stdout.decode()


def test_recursive_builders_get_one_group_each(planned, tmp_path):
    out, report = planned
    profile = json.loads((out / "profile.json").read_text())
    assert profile["version"] == 3
    entry = {}
    for c in profile["contexts"]:
        fn = profile["sites"][c["sites"][0]]["function"] if c["sites"] else None
        entry.setdefault(fn, []).append(c)
    # the quad-tree's four recursive calls leave dozens of contexts, one family
    assert len(entry["build_quad"]) > 20
    assert len({c["family"] for c in entry["build_quad"]}) == 1
    assert len({c["family"] for c in entry["build"]}) == 1
    assert "dropped" not in report, report
    base = run([BUILDERS, "/dev/null", "12"])
    stats = tmp_path / "stats.json"
    r = run([BUILDERS, tmp_path / "log", "12"], env=cohort_env(plan=out / "plan", stats=stats))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert r.stdout == base.stdout
    objs = read_log(tmp_path / "log")
    names = {g["id"]: g["name"] for g in json.loads(stats.read_text())["groups"]}
    groups = {kind: {g for _, g, _ in objs[kind]} for kind in ("node", "quad", "note")}
    assert all(len(g) == 1 for g in groups.values()), groups     # each structure in one pool
    node, quad, note = (next(iter(groups[k])) for k in ("node", "quad", "note"))
    assert len({node, quad, note}) == 3 and -1 not in (node, quad, note)
    plan = (out / "plan").read_text()
    one = "\nrest 2 max=256 one\n" in plan     # the rest pool's shape, as the profile's model priced it
    assert "\ngroup 2 rest " in plan and (one or "\nrest 2 max=256\n" in plan)
    # the cold notes (40 bytes): the rest pool, and their size class if it is split
    assert names[note] == ("rest" if one else "rest/48")
