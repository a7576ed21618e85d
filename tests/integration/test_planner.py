"""The planner end to end: `cohort plan` / `explain` / `optimize` / `run` on
built programs, and the rules whose plans are read back through the
runtime's own parser (tools/cohort-plan-check). The rules alone, on
hand-made graphs and synthetic profiles, are in tests/fast/test_planner_rules.py."""

import json
from pathlib import Path

import pytest

from conftest import COHORT, DATA, PROGRAMS, ROOT, cohort_env, run
from cohort.formats.planfile import PLAN_VERSION
from cohort.plan.handplan import read_log
from synthetic_profiles import BUILDER, BUILDER_EDGES, FREE_WALKS, MODEST_COSTS, churn_profile, shape_profile

# ---- the commands ---------------------------------------------------------

GROUPS = PROGRAMS / "groups_O2"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """profile + plan of the identification test program (HALO's Figure 2
    shape, plus wrapped objects), made by `cohort optimize`. Its own log
    output (stdio buffers) takes most accesses, so the node filter keeps 99%
    rather than 90%, or the b objects would fall under it."""
    d = tmp_path_factory.mktemp("opt")
    r = run([COHORT, "optimize", "--coverage", "0.99", "-o", d / "out", "--", GROUPS, d / "train.log"])
    assert r.returncode == 0, r.stderr.decode()
    return d / "out", r


def test_optimize_writes_every_product(pipeline):
    out, r = pipeline
    for name in ("profile.json", "plan", "explain.txt", "graph.svg"):
        assert (out / name).stat().st_size > 0, name
    assert b"groups from" in r.stdout
    text = (out / "plan").read_text()
    assert text.startswith(f"cohort-plan {PLAN_VERSION}\n") and text.endswith("end\n")
    svg = (out / "graph.svg").read_text()
    assert svg.startswith("<svg") and svg.count('class="node"') >= 2


def test_optimize_replaces_its_own_products_but_no_other_file(tmp_path):
    out = tmp_path / "out"
    r = run([COHORT, "optimize", "-o", out, "--", GROUPS, tmp_path / "x.log"])
    assert r.returncode == 0, r.stderr
    r = run([COHORT, "optimize", "-o", out, "--", GROUPS, tmp_path / "x.log"])
    assert r.returncode == 0, r.stderr          # its own products may be replaced
    (out / "explain.txt").write_text("my notes\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    r = run([COHORT, "optimize", "-o", out, "--", GROUPS, tmp_path / "x.log"])
    assert r.returncode == 2 and r.stderr.decode().startswith(
        f"cohort: {out / 'explain.txt'} exists and is not an explanation that cohort wrote"), r.stderr
    assert b"--force" in r.stderr and {p.name: p.read_bytes() for p in out.iterdir()} == before
    r = run([COHORT, "optimize", "--force", "-o", out, "--", GROUPS, tmp_path / "x.log"])
    assert r.returncode == 0 and (out / "explain.txt").read_text().startswith("headroom: objects of up to ")
    # the groups end with the plan's predicted removal, against the run's misses
    assert "  predicted: no group" in (out / "explain.txt").read_text()
    # optimize's own output (after the program's) opens with the same line
    assert r.stdout.decode().splitlines()[1].startswith("headroom: objects of up to "), r.stdout


def test_planned_run_groups_the_walked_objects_in_allocation_order(pipeline, tmp_path):
    out, _ = pipeline
    base = run([GROUPS, tmp_path / "base.log"], env=cohort_env())
    stats = tmp_path / "stats.json"
    r = run([COHORT, "run", "--plan", out / "plan", "--stats", stats, "--", GROUPS, tmp_path / "log"])
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert r.stdout == base.stdout
    objs = read_log(tmp_path / "log")
    ga = {g for _, g, _ in objs["a"]}
    gb = {g for _, g, _ in objs["b"]}
    assert len(ga) == 1 and ga == gb and ga != {-1}
    seq = []
    for (_, _, pa), (_, _, pb) in zip(objs["a"], objs["b"]):
        seq += [(pa, 32), (pb, 48)]
    adjacent = sum(1 for (p, n), (q, _) in zip(seq, seq[1:]) if q == p + n)
    assert adjacent >= len(seq) - 3
    st = json.loads(stats.read_text())
    assert st["plan_active"] and st["identification"]["truncated"] == 0
    # nothing but the a and b objects is in their group
    assert st["groups"][ga.pop()]["allocations"] == len(objs["a"]) + len(objs["b"])


def lines_of(path):
    return Path(path).read_text().splitlines()


def bare_plan(out, tmp_path):
    """The pipeline's plan without its comments: as one written by hand."""
    path = tmp_path / "uncommented.plan"
    path.write_text("\n".join(ln.split("#")[0].rstrip() for ln in lines_of(out / "plan")) + "\n")
    return path


def test_explain_names_contexts_groups_and_selectors(pipeline, tmp_path):
    out, _ = pipeline
    r = run([COHORT, "explain", out / "profile.json", out / "plan", "--graph", tmp_path / "g.svg"])
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "Hottest contexts" in text and "Groups (plan" in text and "select:" in text
    assert "make_a" in text or "groups_O2+0x" in text
    # why each group is worth having, and the rest pool, named as such
    assert "worth: saves at most" in text and "identification:" in text
    # the identification each group pays, as the planner priced it
    r = run([COHORT, "plan", out / "profile.json", "-o", tmp_path / "again.plan"])
    assert r.returncode == 0, r.stderr
    said = [ln.split("identification: ")[1].split(";")[0] for ln in r.stdout.decode().splitlines()
            if "worth:" in ln]
    r = run([COHORT, "explain", out / "profile.json", tmp_path / "again.plan"])
    shown = [ln.split("identification: ")[1].split(";")[0] for ln in r.stdout.decode().splitlines()
             if "worth:" in ln]
    assert said and shown[:len(said)] == said, (said, shown)
    # which rule kept or dropped each group, with its figures: the same
    # verdicts cohort plan printed, read back from the plan file
    verdicts = text.split("The planner's verdicts:\n", 1)[1].split("\n\n")[0].splitlines()
    groups = [ln.split()[2] for ln in lines_of(out / "plan") if ln.startswith("group ") and " rest" not in ln]
    assert groups and all(any(v.startswith(f"  group {i} ") and " kept: " in v and " ms " in v for v in verdicts)
                          for i in range(len(groups))), verdicts
    assert any(" rest kept, " in v for v in verdicts), verdicts
    assert "The planner's verdicts:" not in run([COHORT, "explain", out / "profile.json", bare_plan(out, tmp_path)]
                                                ).stdout.decode()
    assert "rest (every small allocation no other group claims, one pool " in text
    # the rest pool described as the plan shapes it: whole, or split by size class
    lines = [ln for ln in (out / "plan").read_text().splitlines()]
    assert any(ln.startswith("rest ") for ln in lines)
    for shape, what in (("one", "one pool in allocation order"), ("size", "one pool per size class")):
        variant = tmp_path / f"{shape}.plan"
        variant.write_text("\n".join((ln.replace(" one", "") + (" one" if shape == "one" else ""))
                                     if ln.startswith("rest ") else ln for ln in lines) + "\n")
        r = run([COHORT, "explain", out / "profile.json", variant])
        assert r.returncode == 0, r.stderr
        assert f"rest (every small allocation no other group claims, {what})" in r.stdout.decode()
    # a plan with no rest pool: its groups pay for the runtime they load
    bare = tmp_path / "bare.plan"
    bare.write_text("\n".join(ln for ln in lines if not ln.startswith("rest ")) + "\n")
    r = run([COHORT, "explain", out / "profile.json", bare])
    assert r.returncode == 0, r.stderr
    assert "other allocations on to the next allocator, about" in r.stdout.decode()
    assert (tmp_path / "g.svg").read_text().startswith("<svg")
    # never over a file it did not draw
    mine = tmp_path / "mine.svg"
    mine.write_text("my drawing")
    r = run([COHORT, "explain", out / "profile.json", "--graph", mine])
    assert r.returncode != 0 and b"is not an affinity graph that cohort wrote" in r.stderr
    assert mine.read_text() == "my drawing"
    r = run([COHORT, "explain", out / "profile.json", "--graph", tmp_path / "g.svg"])
    assert r.returncode == 0  # its own drawing may be redrawn


def test_plan_command_and_its_bad_input(pipeline, tmp_path):
    out, _ = pipeline
    r = run([COHORT, "plan", out / "profile.json", "-o", tmp_path / "plan", "--tolerance", "0.1",
             "--max-members", "4", "--group-threshold", "0.001", "--unknown-entry", "cold"])
    assert r.returncode == 0, r.stderr
    assert "unknown-entry cold" in (tmp_path / "plan").read_text()
    r = run([COHORT, "plan", out / "profile.json", "-o", tmp_path / "plan"])
    assert r.returncode == 0, r.stderr    # a plan cohort wrote may be replaced
    r = run([COHORT, "plan", out / "profile.json", "-o", out / "profile.json"])
    assert r.returncode != 0 and b"is a profile that cohort wrote, not a plan" in r.stderr
    r = run([COHORT, "plan", tmp_path / "absent.json", "-o", tmp_path / "p2"])
    assert r.returncode != 0 and b"no such profile" in r.stderr and not (tmp_path / "p2").exists()
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "cohort-profile", "version": 1, "sites": 3}')
    r = run([COHORT, "plan", bad, "-o", tmp_path / "p3"])
    assert r.returncode != 0 and b"corrupt profile" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run([COHORT, "plan", out / "profile.json", "--bogus"])
    assert r.returncode == 2 and b"unrecognized arguments" in r.stderr
    r = run([COHORT, "plan", out / "profile.json", "-o", tmp_path / "p4", "--rest-max", "4096"])
    assert r.returncode == 0, r.stderr
    assert [ln.split()[2] for ln in (tmp_path / "p4").read_text().splitlines() if ln.startswith("rest ")] == \
        ["max=4096"]
    for v in ("8", "1000000"):
        r = run([COHORT, "plan", out / "profile.json", "-o", tmp_path / "p5", "--rest-max", v])
        assert r.returncode != 0 and b"--rest-max must be 16 to 131072 bytes" in r.stderr
        assert len(r.stderr.splitlines()) == 1 and not (tmp_path / "p5").exists()


def test_run_refuses_a_plan_for_another_program(pipeline, tmp_path):
    out, _ = pipeline
    r = run([COHORT, "run", "--plan", out / "plan", "--", "/bin/true"])
    assert r.returncode != 0 and b"not true" in r.stderr
    r = run([COHORT, "explain", DATA / "tiny-profile.json", out / "plan", "--graph", "-"])
    assert r.returncode != 0 and b"another program" in r.stderr


def d1_misses(argv, env=None):
    import re
    r = run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--D1=32768,8,64", "--LL=1048576,16,64",
             "--cachegrind-out-file=/dev/null", *argv], env=env)
    assert r.returncode == 0, r.stderr.decode()[-500:]
    return int(re.search(rb"D1  misses:\s+([\d,]+)", r.stderr).group(1).replace(b",", b"")), r.stdout


def test_pipeline_on_the_example_cuts_d1_misses(tmp_path):
    """HALO's Figure 2 example: profile on a train input, plan, and the ref-like
    input misses D1 less under Cohort than under glibc, with the same output."""
    tokens = ROOT / "build" / "workloads" / "tokens"
    r = run([COHORT, "optimize", "-o", tmp_path / "opt", "--", tokens, "5000", "2"])
    assert r.returncode == 0, r.stderr.decode()
    plan = (tmp_path / "opt" / "plan").read_text()
    assert "new_token" in plan and "new_attr" in plan
    argv = [tokens, "60000", "4"]
    base, out_base = d1_misses(argv, env=cohort_env(mode="off"))
    opt, out_opt = d1_misses(argv, env=cohort_env(plan=tmp_path / "opt" / "plan"))
    assert out_opt == out_base
    assert opt < 0.8 * base, (opt, base)


def test_stop_sites_end_walks_past_a_shared_wrapper(tmp_path):
    """Contexts entering through one wrapper site (1) and told apart by their
    callers (10, 11): the callers become stop sites of their groups, an
    ungrouped context through 10 joins group 0 within the purity, and the
    plan file, evaluated as the runtime would, decides as the planner
    predicted."""
    from cohort.formats.planfile import decide
    from cohort.plans import read_plan
    from cohort.plan.planner import make_plan, render
    site = lambda i: {"id": i, "module": 0, "offset": 0x100 + i, "call": "direct",  # noqa: E731
                      "function": None, "file": None, "line": None}
    ctx = lambda i, sites, allocs, acc: {"id": i, "sites": sites, "allocations": allocs,  # noqa: E731
                                         "accesses": acc, "truncated": False}
    profile = {"parameters": {"max_size": 4096}, "totals": {"accesses": 2000},
               "modules": [{"id": 0, "path": "/x/prog", "build_id": "ab", "system": False}],
               "sites": [site(i) for i in range(40)],
               "contexts": [ctx(0, [1, 10, 30], 500, 1000), ctx(1, [1, 11, 30], 500, 1000),
                            ctx(2, [1, 12, 30], 100, 0), ctx(3, [1, 10, 31], 5, 0)],
               "graph": {"nodes": [0, 1], "edges": [[0, 0, 500], [1, 1, 500]], "coverage": 1.0}}
    plan = make_plan(profile, **FREE_WALKS)
    assert [g.conjunctions for g in plan.groups] == [[(10, 30)], [(11,)]]   # 30 excludes context 3
    assert plan.verdicts[1] == "walk" and plan.stops == {10: 0, 11: 1}
    assert plan.predicted == {0: 0, 1: 1, 2: None, 3: 0}
    assert any("stop sites also group 5 allocations" in n for n in plan.notes)
    (tmp_path / "plan").write_text(render(plan, profile))
    text = (tmp_path / "plan").read_text()
    assert text.startswith(f"cohort-plan {PLAN_VERSION}\n") and " stop=0 " in text and " stop=1 " in text
    read = read_plan(tmp_path / "plan")
    index = {s: i for i, s in enumerate(plan.sites)}
    for c in profile["contexts"]:
        assert decide(read, [index.get(s) for s in c["sites"]]) == plan.predicted[c["id"]]
    assert make_plan(profile, entry_purity=1.0, **FREE_WALKS).stops == {11: 1}   # 10 is no longer pure


# ---- program shapes --------------------------------------------------------


def agrees_with_runtime(plan, profile, tmp_path):
    """The written plan, evaluated as the runtime does, decides every
    profiled context as the planner predicted."""
    from cohort.formats.planfile import decide
    from cohort.plans import read_plan
    from cohort.plan.planner import render
    (tmp_path / "plan").write_text(render(plan, profile))
    read = read_plan(tmp_path / "plan")
    index = {s: i for i, s in enumerate(plan.sites)}
    for c in profile["contexts"]:
        got = decide(read, [index.get(s) for s in c["sites"]], size=c.get("max_size"))
        assert got == plan.predicted[c["id"]], c["id"]
    return read


def test_recursive_builder_gets_its_group(tmp_path):
    from cohort.plan.planner import make_plan, report
    profile = shape_profile(BUILDER, BUILDER_EDGES, 1_000_000)
    plan = make_plan(profile)
    assert len(plan.groups) == 1 and sorted(plan.groups[0].members) == [3, 4]
    assert plan.groups[0].conjunctions == [(2, 3)]
    # 100000 of the 100201 allocations entering at site 1 are the group's:
    # the entry site decides alone, with no walk
    assert plan.verdicts[1] == "group=0"
    assert plan.worth[0].walked_allocations == 0 and plan.worth[0].pays
    assert plan.rest == 1 and plan.predicted == {0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 1}
    agrees_with_runtime(plan, profile, tmp_path)
    assert "dropped" not in report(plan, profile)
    # exact verdicts only: the entry walks, the selector decides
    exact = make_plan(profile, entry_purity=1.0, **FREE_WALKS)
    assert exact.verdicts[1] == "walk"
    assert exact.unknown_entry == "walk"      # its term (2, 3) lies deeper than any entry
    assert exact.predicted == {0: None, 1: None, 2: None, 3: 0, 4: 0, 5: None}
    agrees_with_runtime(exact, profile, tmp_path)


def test_single_hot_structure_is_a_group_of_one(tmp_path):
    """One hot context with a strong loop (a tree walked many times): a group
    of one, decided at its entry site, everything else in the rest pool."""
    from cohort.plan.planner import make_plan, render
    profile = shape_profile([(0, [1, 4], 100000, 900000), (1, [5, 4], 3000, 1000), (2, [6], 50, 0)],
                            [(0, 0, 800000)], 1_000_000)
    plan = make_plan(profile)
    assert [g.members for g in plan.groups] == [[0]]
    assert plan.groups[0].conjunctions == [(1,)] and plan.verdicts[1] == "group=0"
    assert plan.verdicts[5] == "cold" and plan.verdicts[6] == "cold"
    assert plan.predicted == {0: 0, 1: 1, 2: 1}
    # its only selector term is an entry site: an unseen entry cannot match
    # it, so unknown entries are not walked
    assert plan.unknown_entry == "cold"
    assert make_plan(profile, unknown_entry="walk").unknown_entry == "walk"
    text = render(plan, profile)
    assert "\ngroup 1 rest" in text and "\nrest 1 max=256\n" in text
    agrees_with_runtime(plan, profile, tmp_path)
    assert make_plan(profile, rest="none").predicted == {0: 0, 1: None, 2: None}


def test_group_whose_walks_cost_more_than_it_saves_is_dropped(tmp_path):
    from cohort.plan.planner import make_plan, report
    from cohort.plan.cost import worth_text
    profile = churn_profile(affinity=100_000)
    plan = make_plan(profile, identify="walk")
    assert plan.groups == [] and plan.rest == 0
    assert plan.predicted == {0: 0, 1: 0}           # both in the rest pool, no walk
    note = next(n for n in plan.notes if "costs more than its placement can save" in n)
    assert "2000000 stack walks of 2.0 frames" in note and "100000 affinitive accesses inside" in note
    agrees_with_runtime(plan, profile, tmp_path)
    assert "rest" in report(plan, profile)
    # the same shape with heavy affinity (about 40 affinitive accesses per
    # walk) pays for its walks and is kept
    rich = make_plan(churn_profile(affinity=80_000_000, accesses=90_000_000), identify="walk")
    assert len(rich.groups) == 1 and rich.worth[0].pays
    assert rich.worth[0].walked_allocations == 2_000_000
    assert "2000000 stack walks of 2.0 frames" in worth_text(rich.worth[0])
    # walks priced at nothing: HALO's plan, every group kept
    assert len(make_plan(profile, costs={"walk_ns": 0, "frame_ns": 0}, identify="walk").groups) == 1
    # with the selector sites patched, the same allocations cost patched_ns
    # each, not a walk: still more than 100000 accesses can save here, but
    # the rich shape is kept for far fewer affinitive accesses
    patched = make_plan(profile)
    assert patched.groups == []
    assert any("2000000 allocations decided from patched call sites" in n for n in patched.notes)
    # (the twin shares the cells' size class in the rest pool, half of it:
    # a pool of their own takes the cells from that half, test_strangers)
    modest = make_plan(churn_profile(affinity=16_000_000, accesses=18_000_000), costs=MODEST_COSTS)
    assert len(modest.groups) == 1 and modest.worth[0].identify == "patched"
    assert len(make_plan(churn_profile(affinity=16_000_000, accesses=18_000_000), identify="walk",
                         costs=MODEST_COSTS).groups) == 0


def test_selector_stubs_are_priced_per_call(tmp_path):
    """A patched selector or stop site runs its stub on every call through
    it, not only on those that allocate (docs/runtime.md, "Patched selector
    sites"). The modest churn shape pays for its 2 M patched decisions (20
    ms) with 16 M affinitive accesses, half of which its pool can turn into
    hits (28 ms: its twin is half its size class); when its stop site (10) is a
    call the program makes ten million times, the stubs cost 30 ms more
    and the group is dropped, with the calls named; when the site is called
    only for the allocations it leads to, the stubs cost 3 ms and the group
    stays. A profile that does not count calls prices no stub. Priced at the
    profiled run's own scale (scale=1), where a miss costs L2's price."""
    from cohort.plan.cost import COST_DEFAULTS, worth_text
    from cohort.plan.planner import make_plan

    def with_calls(calls):
        p = churn_profile(affinity=16_000_000, accesses=18_000_000)
        for site in p["sites"]:
            site["calls"] = calls if site["id"] == 10 else 1_000_000
        return p

    hot = make_plan(with_calls(10_000_000), costs=MODEST_COSTS, scale=1)
    assert hot.groups == [] and hot.rest == 0
    note = next(n for n in hot.notes if "costs more than its placement can save" in n)
    assert "its patched call sites' stubs run on 10000000 calls, about 30.0 ms" in note
    agrees_with_runtime(hot, with_calls(10_000_000), tmp_path)

    cool = make_plan(with_calls(1_000_000), costs=MODEST_COSTS, scale=1)
    assert len(cool.groups) == 1 and cool.worth[0].pays
    assert cool.worth[0].stub_calls == 1_000_000
    assert cool.worth[0].stub_ns == 1_000_000 * COST_DEFAULTS["stub_ns"]
    assert "its patched call sites' stubs run on 1000000 calls" in worth_text(cool.worth[0])
    # the entry site (1) walks and is no selector: its calls cost no stub
    assert 1 not in cool.stops and cool.verdicts[1] == "walk"
    # A stop site keeps its own records (docs/runtime.md, "Stop sites"): its
    # decisions and calls are priced at stop_ns and stop_stub_ns, and the
    # hot site's ten million calls cost 3 ms, not 30: the group stays.
    assert 10 in hot.stops or 10 in cool.stops
    stops = make_plan(with_calls(10_000_000), costs={"patched_ns": 10.0}, scale=1)
    assert len(stops.groups) == 1 and stops.worth[0].pays
    assert stops.worth[0].stub_ns == 10_000_000 * COST_DEFAULTS["stop_stub_ns"]
    # the cells' million decisions at the stop's price, the twin's (no
    # selector or stop site on its stack) at an empty stack's: the entry's
    # walks are the groups' to pay
    assert stops.worth[0].walk_ns == pytest.approx(1_000_000 * (COST_DEFAULTS["stop_ns"] + COST_DEFAULTS["empty_ns"]))

    # walked (COHORT_PATCH=0): no stub runs
    walked = make_plan(with_calls(10_000_000), identify="walk", costs={"walk_ns": 0, "frame_ns": 0})
    assert len(walked.groups) == 1 and walked.worth[0].stub_ns == 0
    # without counts in the profile (raw version 4), as before
    uncounted = make_plan(churn_profile(affinity=16_000_000, accesses=18_000_000), costs=MODEST_COSTS)
    assert len(uncounted.groups) == 1 and uncounted.worth[0].stub_calls == 0


def test_strangers(tmp_path):
    """A pool of its own takes a group's objects away from what they would
    lie among in the rest pool: their size classes when it is split, the
    whole pool when it stays one. A hot list alone in its class (its cold
    neighbour made by another context is of another size) gains nothing
    from a pool of its own: the class already keeps its nodes together, so
    its group goes, with that said. With a cold context of its own size
    making as many objects, half of its class is others', and the saving
    is half the affinity; in one rest pool the cold objects of any size
    count. Planned against the next allocator (--rest none), as HALO does,
    the whole affinity counts. Priced at the profiled run's own scale
    (scale=1), where a miss costs L2's price."""
    from cohort.plan.cost import COST_DEFAULTS, worth_text
    from cohort.plan.planner import make_plan

    def listed(cold_size, one=False):
        p = shape_profile([(0, [1, 9], 10_000, 500_000), (1, [2, 9], 10_000, 1_000)], [(0, 0, 400_000)],
                          501_000)
        p["contexts"][1].update(min_size=cold_size, max_size=cold_size, bytes=10_000 * cold_size)
        if one:   # the profile's model: one pool misses no more than the classes
            p["rest_layouts"] = {"max_size": 256, "objects": 20_000, "accesses": 501_000,
                                 "one": {"d1_misses": 100, "ll_misses": 0},
                                 "classes": {"d1_misses": 100, "ll_misses": 0}}
        return p

    alone = make_plan(listed(100))
    assert alone.groups == [] and alone.rest == 0 and not alone.rest_one
    note = next(n for n in alone.notes if "costs more than its placement can save" in n)
    assert ("in the rest pool's size classes, 0% of the allocations its objects would lie among are "
            "another context's") in note, note
    agrees_with_runtime(alone, listed(100), tmp_path)

    shared = make_plan(listed(32), scale=1)
    assert len(shared.groups) == 1 and shared.worth[0].strangers == 0.5
    assert shared.worth[0].saving_ns == 400_000 * 0.5 * COST_DEFAULTS["miss_ns"]
    assert "50% of the allocations its objects would lie among are another context's" in worth_text(shared.worth[0])

    one = make_plan(listed(100, one=True))
    assert one.rest_one and len(one.groups) == 1 and one.worth[0].strangers == 0.5
    assert "in the rest pool, 50% of the allocations" in worth_text(one.worth[0])

    halo = make_plan(listed(100), rest="none", scale=1)
    assert len(halo.groups) == 1 and halo.worth[0].strangers == 1.0
    assert halo.worth[0].saving_ns == 400_000 * COST_DEFAULTS["miss_ns"]
    assert "would lie among" not in worth_text(halo.worth[0])


def test_measured_strangers_against_size_classes(tmp_path):
    """Against size classes, a group's strangers are the share of its
    objects' neighbours in the profile's model of the classes that are no
    member's (profile raw version 6): a hot list made in one burst shares
    its class with as many cold objects of its size, made elsewhere, yet
    lies only beside its own nodes there, so its pool gains nothing and its
    group goes; made in turn with them, half its neighbours are strangers
    and the group pays, priced by that half. In allocation order (one rest
    pool, or glibc's heap) the count stays."""
    from cohort.plan.cost import COST_DEFAULTS, worth_text
    from cohort.plan.planner import make_plan

    def listed(own_beside):
        p = shape_profile([(0, [1, 9], 10_000, 500_000), (1, [2, 9], 10_000, 1_000)], [(0, 0, 400_000)],
                          501_000)
        p["rest_layouts"] = {"max_size": 256, "objects": 20_000, "accesses": 501_000,
                             "one": {"d1_misses": 1000, "ll_misses": 0},
                             "classes": {"d1_misses": 100, "ll_misses": 0},
                             "beside": {"one": [[0, 0, own_beside], [0, 1, 20_000 - own_beside]],
                                        "classes": [[0, 0, own_beside], [0, 1, 20_000 - own_beside]]}}
        for c in p["contexts"]:
            c["beside"] = {"one": 20_000, "classes": 20_000}
            c["layout_d1_misses"] = {"one": 500, "classes": 50}
        return p

    burst = make_plan(listed(20_000), allocator="jemalloc", scale=1)
    assert burst.groups == [] and burst.rest is None
    note = next(n for n in burst.notes if "costs more than its placement can save" in n)
    assert "in the profile's model of size classes, 0% of its objects lay beside another context's" in note, note

    mixed = make_plan(listed(10_000), allocator="jemalloc", scale=1)
    assert len(mixed.groups) == 1 and mixed.worth[0].strangers == 0.5 and mixed.worth[0].beside == "classes"
    assert mixed.worth[0].saving_ns == 400_000 * 0.5 * COST_DEFAULTS["miss_ns"]
    assert "50% of its objects lay beside another context's" in worth_text(mixed.worth[0])
    agrees_with_runtime(mixed, listed(10_000), tmp_path)

    # In front of glibc, the rest pool kept one (the model says one pool
    # misses no more): counted, half the pool's allocations are the cold
    # context's, though the list lay only beside its own nodes
    burst_one = listed(20_000)
    burst_one["rest_layouts"]["one"]["d1_misses"] = 100
    counted = make_plan(burst_one, scale=1)
    assert counted.rest_one and len(counted.groups) == 1
    assert counted.worth[0].beside is None and counted.worth[0].strangers == 0.5


def test_savings_of_objects_that_stay_in_the_cache_are_bounded_by_their_misses(tmp_path):
    """The rich churn shape above pays for its patched decisions on its
    affinity alone. If the profiler's cache saw its objects miss no more
    than once per line allocated (a churn that reuses a few hot blocks, as
    bc's numbers do: lines are the objects' bytes and one more each, for
    one that straddles), every access already hits: the saving is those
    misses, and the group is dropped, with the misses named. If they missed
    more (evicted and fetched again), the misses still bound the saving,
    fewer than the affinity here, and grow with the input: the group pays at
    memory's price. A profile without misses (raw version 2) is planned as
    before."""
    from cohort.plan.planner import make_plan
    from cohort.plan.cost import worth_text

    def with_misses(d1):
        p = churn_profile(affinity=16_000_000, accesses=18_000_000)
        for c in p["contexts"]:
            c["d1_misses"], c["ll_misses"] = (d1, d1 // 2) if c["id"] == 0 else (0, 0)
        return p

    lines = 1_000_000 * 32 // 64 + 1_000_000     # the most context 0's objects can occupy
    cached = make_plan(with_misses(lines), costs=MODEST_COSTS)
    assert cached.groups == [] and cached.rest == 0
    note = next(n for n in cached.notes if "costs more than its placement can save" in n)
    assert (f"but its objects stayed in the cache: their accesses missed the simulated D1 {lines} "
            f"times, in {lines} lines at most") in note
    agrees_with_runtime(cached, with_misses(lines), tmp_path)

    evicted = make_plan(with_misses(lines + 1), costs=MODEST_COSTS, scale=1)
    assert len(evicted.groups) == 1 and evicted.worth[0].pays
    # half the cells' size class is their twin's (test_strangers); their lines
    # are touched too far apart to stay in any cache: a miss costs memory's price
    assert evicted.worth[0].at.level == "memory"
    assert evicted.worth[0].saving_ns == ((lines + 1) * 0.5 * evicted.worth[0].at.miss_ns)
    assert "stayed in the cache" not in worth_text(evicted.worth[0])
    assert f"but its objects missed the simulated D1 only {lines + 1} times" in worth_text(evicted.worth[0])

    # without misses in the profile
    before = make_plan(churn_profile(affinity=16_000_000, accesses=18_000_000), costs=MODEST_COSTS)
    assert len(before.groups) == 1 and before.worth[0].misses is None


def test_savings_of_a_few_objects_touched_all_the_time_are_bounded_by_their_misses(tmp_path):
    """A parser's state: three objects read on every byte, behind the entry
    a million values share. They are evicted now and then (more misses than
    lines), but their few lines are touched every few accesses, fewer than
    the simulated D1 holds lines, so least-recently-used replacement keeps
    them: the saving is their misses, and the group, whose selectors would
    make every value a patched decision, is dropped, with the reason named.
    The same objects touched rarely among many other accesses, and so
    missing a third of the time, keep that saving (jq's parser:
    docs/planner.md, *Objects touched all the time*)."""
    from cohort.plan.planner import make_plan

    def parser(others, misses=1_000):
        p = shape_profile([(0, [1, 10], 3, 18_000_000), (1, [1, 11], 1_000_000, others)],
                          [(0, 0, 16_000_000)], 18_000_000 + others)
        for c in p["contexts"]:
            c["d1_misses"], c["ll_misses"] = (misses, misses // 10) if c["id"] == 0 else (0, 0)
        return p

    hot = make_plan(parser(9_000_000), costs=MODEST_COSTS)
    assert hot.groups == [] and hot.rest == 0
    note = next(n for n in hot.notes if "costs more than its placement can save" in n)
    lines = -(-3 * 32 // 64) + 3
    gap = (18_000_000 + 9_000_000) * lines / 18_000_000
    assert (f"but its objects stayed in the cache: each of their {lines} lines at most was touched every "
            f"{gap:.0f} accesses on average, fewer than the simulated D1's 512 lines, and their accesses "
            f"missed it 1000 times") in note, note
    agrees_with_runtime(hot, parser(9_000_000), tmp_path)

    among_many = make_plan(parser(2_000_000_000, misses=6_000_000), costs=MODEST_COSTS)
    assert len(among_many.groups) == 1 and among_many.worth[0].pays


@pytest.mark.parametrize("nodes", ["empty", "cold"])
def test_profile_without_hot_contexts_plans_no_group_and_says_why(tmp_path, nodes):
    from cohort.plan.planner import make_plan, report
    edges = [] if nodes == "empty" else [(0, 0, 1)]          # one loop, far under the threshold
    profile = shape_profile([(0, [1], 10, 3), (1, [2], 10, 0)], edges, 1_000_000)
    plan = make_plan(profile)
    assert plan.groups == [] and plan.rest == 0
    why = ("no groups: too few accesses to small heap objects" if nodes == "empty" else
           "no groups: everything is cold: the best of the 1 candidate groups carries 0.00% of heap "
           "accesses as internal affinity, under --group-threshold 0.005; if the training run is much "
           "shorter than real runs, lower it (e.g. --group-threshold 0.0005)")
    assert plan.why_none.startswith(why), plan.why_none
    assert report(plan, profile).splitlines()[1] == "  " + plan.why_none   # right under the count
    agrees_with_runtime(plan, profile, tmp_path)


def test_group_more_affine_outside_than_inside_merges_with_its_partners_or_is_dropped(tmp_path):
    """A list whose nodes are walked with the shapes they point to (made by
    other contexts): HALO's density keeps the list alone (its loop is dense),
    but a pool of its own would take each node away from its shape. So the
    list's group is merged with its partners, the shapes' group, and the
    merged group keeps each node beside its shape and apart from the rest.
    Where no merge fits (--max-members 1) it is dropped: the shared rest
    allocator keeps the nodes beside their shapes. A group of objects used
    with each other more than with anything else stays either way."""
    from cohort.plan.planner import make_plan
    ctxs = [(0, [1, 9], 10000, 120000), (1, [2, 3, 9], 3333, 90000), (2, [4, 5, 9], 3333, 70000),
            (3, [6, 9], 10000, 1500000)]
    edges = [(0, 0, 100000), (0, 1, 66000), (0, 2, 46000), (1, 2, 30000), (1, 1, 3000), (2, 2, 3000),
             (3, 3, 37000), (0, 3, 12000), (1, 3, 5000), (2, 3, 3000)]
    profile = shape_profile(ctxs, edges, 2_000_000)
    # against the next allocator, as HALO plans: every context here is of
    # one size, so the rest pool's classes would leave these groups nothing
    # to take their objects from (test_strangers); what the runtime costs the
    # allocations it hands on is test_a_plan_without_a_rest_pool_pays_for_the_runtime's
    free = {"passthrough_ns": 0}
    plan = make_plan(profile, rest="none", costs=free)
    assert sorted(sorted(g.members) for g in plan.groups) == [[0, 1, 2], [3]]
    merged = next(i for i, g in enumerate(plan.groups) if 0 in g.members)
    assert plan.worth[merged].inside == 248000 and plan.worth[merged].outside == 20000
    assert any("context 1 merged with the group around context 0" in n for n in plan.notes), plan.notes
    assert plan.predicted == {0: merged, 1: merged, 2: merged, 3: 1 - merged}
    agrees_with_runtime(plan, profile, tmp_path)

    plan = make_plan(profile, max_members=1, rest="none", costs=free)
    assert [g.members for g in plan.groups] == [[3]]
    assert plan.worth[0].inside == 37000 and plan.worth[0].outside == 20000
    dropped = [n for n in plan.notes if "used with objects outside it" in n]
    assert len(dropped) == 1 and "context 0 dropped" in dropped[0]
    assert plan.predicted == {0: None, 1: None, 2: None, 3: 0}
    (tmp_path / "singletons").mkdir()
    agrees_with_runtime(plan, profile, tmp_path / "singletons")


def test_large_objects_are_kept_out_of_the_groups_of_small_ones(tmp_path):
    """A list of small nodes, each with a large buffer that the walks read
    after the node: HALO's affinity would put the buffers in the nodes'
    group (the buffers are what the nodes are used with), which spreads the
    nodes a buffer apart. The affinity between objects over 256 bytes and
    smaller ones is set aside, with a note: the nodes and their index form
    the group, and the buffers, on their own, stay with the next allocator.
    Large objects used with each other may still form a group."""
    from cohort.plan.planner import make_plan
    ctxs = [(0, [1, 9], 2000, 900000), (1, [2, 9], 2000, 1000000), (2, [3, 9], 2000, 3000000)]
    edges = [(0, 0, 40000), (0, 1, 120000), (0, 2, 150000), (1, 1, 45000), (2, 2, 1000)]
    profile = shape_profile(ctxs, edges, 5_000_000)
    profile["contexts"][2].update(min_size=2048, max_size=4032, bytes=2000 * 3000)
    plan = make_plan(profile, rest="none")   # HALO's alternative: nodes and index share no class with others
    assert [sorted(g.members) for g in plan.groups] == [[0, 1]]
    assert plan.worth[0].outside == 0
    assert plan.predicted[2] is None
    note = [n for n in plan.notes if "kept out of the groups of smaller objects" in n]
    assert len(note) == 1 and note[0].startswith("context 2 (objects of 3000 bytes on average)"), plan.notes
    assert "150000 affinitive accesses" in note[0]
    agrees_with_runtime(plan, profile, tmp_path)

    # two kinds of large objects used with each other still group
    edges = [(0, 0, 40000), (0, 1, 120000), (1, 1, 45000), (2, 3, 200000), (2, 2, 50000), (0, 2, 9000)]
    profile = shape_profile(ctxs + [(3, [4, 9], 2000, 1000000)], edges, 6_000_000)
    for c in (2, 3):
        profile["contexts"][c].update(min_size=1024, max_size=1024, bytes=2000 * 1024)
    plan = make_plan(profile, rest="none")
    assert sorted(sorted(g.members) for g in plan.groups) == [[0, 1], [2, 3]]


def test_large_objects_stay_with_the_next_allocator_and_short_lived_ones_do_not(tmp_path):
    """Objects over the rest pool's limit (256 bytes unless --rest-max says
    more, at most the plan's max-size) stay with the next allocator; an
    interpreter's temporaries, which die at once, go to the rest pool with
    the long-lived small ones (a pooled pair costs less than glibc's, and a
    `next` verdict would cost every allocation the quick test)."""
    from cohort.plan.planner import make_plan
    profile = shape_profile([(0, [1, 9], 100000, 2000000), (1, [2, 9], 900000, 900000),
                             (2, [3, 9], 500, 40000), (3, [4, 9], 800, 10000), (4, [5, 9], 300, 9000)],
                            [(0, 0, 1500000)], 3_000_000)
    temp, big, huge = profile["contexts"][1], profile["contexts"][3], profile["contexts"][4]
    temp.update(frees=900000, lifetime={"mean": 3.0, "max": 40, "live_at_exit": 0})
    big.update(min_size=2048, max_size=4000, bytes=800 * 3000)
    huge.update(min_size=6000, max_size=6000, bytes=300 * 6000)
    plan = make_plan(profile)
    assert all(plan.verdicts[s] == "cold" for s in (2, 3, 4, 5))
    assert "next" not in plan.verdicts.values()
    assert plan.predicted == {0: 0, 1: 1, 2: 1, 3: None, 4: None}
    text = agrees_with_runtime(plan, profile, tmp_path)
    assert text["rest_max"] == 256
    # --rest-max 4096: the 2-4 KiB buffers too, never past the plan's max-size
    plan = make_plan(profile, rest_max=4096)
    assert plan.predicted == {0: 0, 1: 1, 2: 1, 3: 1, 4: None}
    assert agrees_with_runtime(plan, profile, tmp_path)["rest_max"] == 4096
    assert make_plan(profile, rest_max=100_000).rest_max == plan.max_size == 4096


def test_run_leaves_the_runtime_out_under_a_plan_that_places_nothing(tmp_path):
    """A plan with no group would only pass every call through, at the cost
    of an interposed jump: `cohort run` runs the program without libcohort
    and says so."""
    from cohort.plan.planner import make_plan, render
    from cohort.measure.runner import environment
    profile = shape_profile([(0, [1, 9], 900000, 900000)], [], 1_000_000)
    profile["contexts"][0].update(min_size=8192, max_size=8192)   # over the plan's max-size, 4096
    (tmp_path / "plan").write_text(render(make_plan(profile), profile))
    env = environment(plan=tmp_path / "plan", base={"PATH": "/usr/bin"})
    assert "LD_PRELOAD" not in env and "COHORT_PLAN" not in env
    env = environment(plan=tmp_path / "plan", allocator="jemalloc", base={})
    assert "libcohort" not in env["LD_PRELOAD"] and "jemalloc" in env["LD_PRELOAD"]
    r = run([COHORT, "run", "--plan", tmp_path / "plan", "--", "/bin/true"])
    assert r.returncode == 0 and b"places no object" in r.stderr


def test_decision_paths_end_walks_where_the_contexts_agree(tmp_path):
    """Three contexts through one wrapper entry (site 1), told apart two and
    three frames out: the walk of each ends at the first frame after which
    its profiled company agrees. Site 20 is no stop site (an ungrouped
    context passes it too), so the paths go one frame further there; where a
    stop site decides the same, no path is written."""
    from cohort.plan.planner import make_plan
    profile = shape_profile([(0, [1, 10, 20, 30], 500, 1000), (1, [1, 10, 21, 30], 500, 1000),
                             (2, [1, 11, 22, 30], 100, 0), (3, [1, 10, 20, 31], 300, 0)],
                            [(0, 0, 500), (1, 1, 500)], 2000)
    plan = make_plan(profile, **FREE_WALKS)
    assert [g.conjunctions for g in plan.groups] == [[(20, 30)], [(21,)]]
    assert plan.verdicts[1] == "walk" and plan.stops == {21: 1}
    assert plan.paths == {(1, 10, 20, 30): "group=0", (1, 10, 20, 31): "cold", (1, 11): "cold"}
    assert plan.frames == {0: 4, 1: 3, 2: 2, 3: 4}
    assert plan.predicted == {0: 0, 1: 1, 2: None, 3: None}
    read = agrees_with_runtime(plan, profile, tmp_path)
    assert len(read["paths"]) == 3
    # a context never profiled that leaves the paths ends there, with no
    # group (unknown-path cold, the default with no validation run to show
    # that such walks find groups), unless a stop site is where it leaves;
    # under unknown-path walk it is walked in full
    from cohort.formats.planfile import decide
    assert plan.unknown_path == "cold" and read["unknown_path"] == "cold"
    index = {s: i for i, s in enumerate(plan.sites)}
    assert decide(read, [index[1], index[10], index[21], None, index[30]]) == 1
    assert decide(read, [index[1], None, index[20], index[30]]) is None
    assert decide(dict(read, unknown_path="walk"), [index[1], None, index[20], index[30]]) == 0
    assert make_plan(profile, unknown_path="walk", **FREE_WALKS).unknown_path == "walk"


