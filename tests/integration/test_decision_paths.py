"""Decision paths (plan versions 5 and 6): the runtime's walk and
planfile.decide() follow the same procedure. Random plans with every kind of
verdict, stop sites, selectors, paths and both unknown-path verdicts, run against objects whose call sites the test
knows exactly (tests/programs/callpaths.c): every object's group must be the
one decide() predicts."""

import json
import random

import pytest

from conftest import PROGRAMS, cohort_env, rest_class_name, run
from cohort import plans
from cohort.formats import planfile
from cohort.plan.handplan import call_sites, read_log, write_plan

STEPS = "abcd"


def site_table(binary):
    """{(caller, callee): return offset} for every call the paths make."""
    fn = {c: f"step_{c}" for c in STEPS}
    table = {("main", "start"): call_sites(binary, "main", "start")[0]}
    for x in STEPS:
        table[("start", x)] = call_sites(binary, "start", fn[x])[0]
        table[(x, "malloc")] = call_sites(binary, fn[x], "malloc")[0]
        for y in STEPS:
            table[(x, y)] = call_sites(binary, fn[x], fn[y])[0]
    return table


def chain(path):
    """The call sites on the stack of the object path makes, innermost first."""
    calls = [("start", path[0])] + list(zip(path, path[1:])) + [(path[-1], "malloc")]
    return list(reversed(calls)) + [("main", "start")]


def reduced(sites):
    """A context: each site at its innermost occurrence only."""
    return list(dict.fromkeys(sites))


def random_plan(rng, path_strings):
    keys = sorted({k for p in path_strings for k in chain(p)})
    chosen = rng.sample(keys, rng.randint(6, min(20, len(keys))))
    ngroups = rng.randint(1, 3)
    rest = ngroups if rng.random() < 0.5 else None
    names = [f"g{i}" for i in range(ngroups)] + (["rest"] if rest is not None else [])
    sites = []
    for k in chosen:
        verdict = None
        if k[1] == "malloc":
            verdict = rng.choice([None, "walk", "walk", "walk", "cold", "next", f"group={rng.randrange(ngroups)}"])
        if rng.random() < 0.15:
            verdict = ((verdict + " ") if verdict else "") + f"stop={rng.randrange(ngroups)}"
        sites.append((k, verdict))
    index = {k: i for i, (k, _) in enumerate(sites)}
    selects = []
    for _ in range(rng.randint(0, 5)):
        conj = rng.sample(range(len(sites)), rng.randint(1, min(3, len(sites))))
        selects.append((rng.randrange(ngroups), conj))
    paths = {}
    entry_ok = lambda s: (sites[s][1] or "walk").split()[0] in ("walk",) or sites[s][1].startswith("stop=")
    for p in rng.sample(path_strings, min(len(path_strings), 30)):
        ctx = [index.get(k) for k in reduced(chain(p))]
        known = []
        for s in ctx:
            if s is None:
                break
            known.append(s)
        if len(known) < 2 or not entry_ok(known[0]):
            continue
        cut = tuple(known[:rng.randint(2, min(len(known), 6))])
        clash = any(cut[:len(q)] == q or q[:len(cut)] == cut for q in paths)
        if not clash:
            paths[cut] = rng.choice(["cold", "next"] + [f"group={g}" for g in range(ngroups)] * 2)
    return dict(sites=sites, names=names, selects=selects, rest=rest, paths=list(paths.items()),
                unknown_entry=rng.choice(["walk", "cold"]), unknown_path=rng.choice(["walk", "cold"]))


@pytest.mark.parametrize("patch", ["0", "1"], ids=["walk", "patched"])
@pytest.mark.parametrize("build", ["callpaths_O2", "callpaths_O0"])
def test_runtime_and_decide_agree_on_random_plans(tmp_path, build, patch):
    """Walking (COHORT_PATCH=0) takes the decision paths; with every selector
    and stop site patched (all are direct calls here), the bits decide as a
    walk to the end would."""
    binary = PROGRAMS / build
    table = site_table(binary)
    rng = random.Random(5)
    strings = sorted({"".join(rng.choice(STEPS) for _ in range(rng.randint(1, 7))) for _ in range(400)})
    (tmp_path / "paths").write_text("\n".join(strings) + "\n")
    decided_by_paths = decided_by_bits = left_cold = 0
    for trial in range(25):
        spec = random_plan(rng, strings)
        plan_path = write_plan(tmp_path / f"plan{trial}", [binary],
                               [(0, table[k], v) for k, v in spec["sites"]], spec["names"],
                               spec["selects"], version=6, rest=spec["rest"], paths=spec["paths"],
                               unknown_entry=spec["unknown_entry"], unknown_path=spec["unknown_path"])
        plan = plans.read_plan(plan_path)
        stats = tmp_path / f"stats{trial}.json"
        r = run([binary, tmp_path / "paths", tmp_path / "log"],
                env=cohort_env(plan=plan_path, stats=stats, patch=patch))
        assert r.returncode == 0 and r.stderr == b"", (trial, r.stderr)
        index = {k: i for i, (k, _) in enumerate(spec["sites"])}
        got = {k: v[0][1] for k, v in read_log(tmp_path / "log").items()}
        st = json.loads(stats.read_text())
        names = {g["id"]: g["name"] for g in st["groups"]}
        for p in strings:
            sites = [index.get(k) for k in chain(p)]
            want = planfile.decide(plan, sites, size=32, patched=patch == "1")
            left_cold += plan["unknown_path"] == "cold" and planfile.leaves_paths(plan, sites)
            if want is not None and want == plan["rest"]:   # the rest pool's class of 32 bytes
                assert names.get(got[p]) == rest_class_name(32), (trial, p, plan_path.read_text())
            else:
                assert got[p] == (-1 if want is None else want), (trial, p, plan_path.read_text())
        decided_by_paths += st["identification"]["path"]
        decided_by_bits += st["identification"]["patched"]
        if patch == "1" and (spec["selects"] or any(v and "stop=" in v for _, v in spec["sites"])):
            assert st["patch"]["sites_patched"] > 0 and st["patch"]["sites_unpatched"] == 0, st["patch"]
    assert left_cold > 50   # stacks that leave the paths under unknown-path cold were tried
    if patch == "0":
        assert decided_by_paths > 200   # the paths were taken, not just parsed
    else:
        assert decided_by_paths == 0 and decided_by_bits > 1000


def test_a_path_ends_the_walk_early(tmp_path):
    """A path entering at step_b's malloc call through step_a decides after
    two frames; the same entry reached from elsewhere walks to the end. (The
    path here contradicts the selectors, which a planner never writes: with
    the selector sites patched, the selectors would decide.)"""
    binary = PROGRAMS / "callpaths_O2"
    t = site_table(binary)
    sites = [(0, t[("b", "malloc")], "walk"), (0, t[("a", "b")], None), (0, t[("main", "start")], None)]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["deep", "ab"], [(0, [2])], version=5,
                      paths=[([0, 1], "group=1")])
    (tmp_path / "paths").write_text("ab\ncab\ncb\nb\n" * 50)
    stats = tmp_path / "stats.json"
    r = run([binary, tmp_path / "paths", tmp_path / "log"], env=cohort_env(plan=plan, stats=stats, patch=0))
    assert r.returncode == 0 and r.stderr == b""
    groups = {k: {g for _, g, _ in v} for k, v in read_log(tmp_path / "log").items()}
    assert groups == {"ab": {1}, "cab": {1}, "cb": {0}, "b": {0}}
    st = json.loads(stats.read_text())
    assert st["identification"]["path"] == 100 and st["identification"]["walk_group"] == 100
    frames = st["frames_walked"]
    assert frames["1"] >= 100   # the 100 decided by the path, one frame past the entry; the others walk further


def test_the_wrapper_benchmark_decides_its_kinds_from_patched_sites(tmp_path):
    """scripts/bench-runtime.py's wrapper case measures what it says: under
    its grouped plan every allocation of allocbench wrapper is decided from
    the bits of the patched selector and stop sites two frames past the
    entry (none walks), half of them into each kind's group; under its rest
    plan none is identified at all."""
    import importlib.util
    import json
    import sys
    from conftest import ROOT, cohort_env, run
    spec = importlib.util.spec_from_file_location("bench_runtime", ROOT / "scripts" / "bench-runtime.py")
    saved = sys.argv
    sys.argv = ["bench-runtime.py", "1", "wrapper"]
    try:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv = saved
    mod.OUT = tmp_path
    plans = mod.wrapper_plans()
    stats = tmp_path / "stats.json"
    n = 40000   # more than a thread's batch of counts: its flushes count each decision once
    r = run([mod.BIN, "wrapper", n], env=cohort_env(plan=plans["grouped"], stats=stats))
    assert r.returncode == 0, r.stderr
    st = json.loads(stats.read_text())
    ident = st["identification"]
    assert n <= ident["patched"] <= n + 10 and ident.get("walk_group", 0) == 0
    assert sum(ident.values()) <= n + 100, ident   # start-up's few, and nothing counted twice
    assert [(g["name"], g["allocations"]) for g in st["groups"][:2]] == [("red", n // 2), ("blue", n // 2)]
    # Only red's call a stop site: blue's allocations find nothing live (the
    # last stop record's slot holds blue's return address now) and go to the
    # rest pool's class, decided from the patched entry all the same.
    from cohort.plan.handplan import call_sites, write_plan
    entry = call_sites(mod.BIN, "xalloc", "malloc")[0]
    red = call_sites(mod.BIN, "make_red", "new_cell")[0]
    half = write_plan(tmp_path / "half.plan", [mod.BIN], [(0, entry, "walk"), (0, red, "stop=0")], ["red", "rest"],
                      [(0, [1])], version=4, rest=1)
    r = run([mod.BIN, "wrapper", n], env=cohort_env(plan=half, stats=stats))
    assert r.returncode == 0, r.stderr
    st = json.loads(stats.read_text())
    by_name = {g["name"]: g["allocations"] for g in st["groups"]}
    assert by_name["red"] == n // 2 and by_name["rest/48"] == n // 2, by_name
    assert n <= st["identification"]["patched"] <= n + 10
    # Under Valgrind too (cohort bench measures there): the main thread's
    # stack is the client's, not the mapping marked [stack], which is
    # Valgrind's own; the bits decide as natively.
    r = run(["valgrind", "--tool=none", "-q", mod.BIN, "wrapper", 2000],
            env=cohort_env(plan=plans["grouped"], stats=stats))
    assert r.returncode == 0, r.stderr
    ident = json.loads(stats.read_text())["identification"]
    assert 2000 <= ident["patched"] <= 2010 and ident.get("stop", 0) == 0, ident
    r = run([mod.BIN, "wrapper", 2000], env=cohort_env(plan=plans["rest"], stats=stats))
    assert r.returncode == 0, r.stderr
    assert json.loads(stats.read_text())["identification"].get("patched", 0) == 0
