"""`cohort merge` (cohort/measure/merge.py): profiles of several runs of one
build as one, contexts matched by their sites, counts weighted and summed;
and its refusals, each one line with nothing written. No build."""

import json

import pytest

from cohort.formats.profilefile import check_profile, load_profile
from cohort.measure.merge import merge
from profile_mutants import TINY, cli


def run_of(argv, contexts, edges, sites=(1, 2, 5, 7, 9)):
    """A version 1 profile of the tiny profile's program: contexts (sites as
    offsets in the program, allocations, accesses) and edges between them;
    the sites listed in the order given, so that two runs number them
    differently."""
    base = json.loads(TINY.read_text())
    base["target"]["argv"] = argv
    base["parameters"]["coverage"] = 1.0   # every context a node of the graph
    base["sites"] = [{"id": i, "module": 1, "offset": off, "call": "direct", "function": None, "file": None,
                      "line": None} for i, off in enumerate(sites)]
    index = {off: i for i, off in enumerate(sites)}
    base["contexts"] = [{"id": i, "sites": [index[o] for o in offs], "truncated": False, "allocations": n,
                         "bytes": 32 * n, "min_size": 32, "max_size": 32, "same_size": True, "frees": 0,
                         "lifetime": {"mean": None, "max": None, "live_at_exit": n}, "accesses": acc,
                         "macro_accesses": acc}
                        for i, (offs, n, acc) in enumerate(contexts)]
    base["graph"] = {"nodes": sorted({x for x, _, _ in edges} | {y for _, y, _ in edges}),
                     "edges": [list(e) for e in edges], "coverage": 1.0, "dropped_contexts": 0}
    base["totals"] = {**base["totals"], "allocations": sum(n for _, n, _ in contexts),
                      "accesses": sum(a for _, _, a in contexts), "macro_accesses": sum(a for _, _, a in contexts)}
    check_profile(base)
    return base


def test_a_profile_merged_with_itself_at_half_weights_is_itself():
    p = load_profile(TINY)
    m = merge([p, p], [str(TINY), str(TINY)], [0.5, 0.5])
    check_profile(m)
    assert [r["weight"] for r in m.pop("merged")] == [0.5, 0.5]
    m.pop("tool"), p.pop("tool")
    assert m == p


def test_contexts_are_matched_by_their_sites_and_weighted():
    # Two runs that number the same sites differently, and share one context
    a = run_of(["prog", "small"], [([1, 5], 100, 1000), ([2, 5], 10, 500)], [(0, 0, 400), (0, 1, 50)])
    b = run_of(["prog", "large"], [([7, 9], 30, 90), ([1, 5], 300, 3000)], [(1, 1, 2000), (0, 1, 20)],
               sites=(9, 7, 5, 2, 1))
    m = merge([a, b], ["a.json", "b.json"], [1.0, 2.0])
    check_profile(m)
    offsets = {s["id"]: s["offset"] for s in m["sites"]}
    by_sites = {tuple(offsets[s] for s in c["sites"]): c for c in m["contexts"]}
    assert set(by_sites) == {(1, 5), (2, 5), (7, 9)}
    assert by_sites[(1, 5)]["allocations"] == 100 + 2 * 300 and by_sites[(1, 5)]["accesses"] == 1000 + 2 * 3000
    assert by_sites[(7, 9)]["allocations"] == 2 * 30 and by_sites[(2, 5)]["allocations"] == 10
    ids = {k: c["id"] for k, c in by_sites.items()}
    edges = {(x, y): w for x, y, w in m["graph"]["edges"]}
    shared = ids[(1, 5)]
    assert edges[(shared, shared)] == 400 + 2 * 2000   # the same context's loop in both runs
    assert edges[tuple(sorted((shared, ids[(2, 5)])))] == 50
    assert edges[tuple(sorted((shared, ids[(7, 9)])))] == 2 * 20
    assert m["totals"]["allocations"] == 110 + 2 * 330
    assert [r["argv"] for r in m["merged"]] == [["prog", "small"], ["prog", "large"]]


def test_merge_writes_a_profile_that_plans(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(run_of(["prog", "1"], [([1, 5], 100, 1000), ([2, 5], 10, 500)], [(0, 0, 400)])))
    b.write_text(json.dumps(run_of(["prog", "2"], [([1, 5], 300, 3000)], [(0, 0, 900)])))
    status, _, err = cli("merge", a, b, "-o", tmp_path / "m.json", "--weights", "1,3")
    assert status == 0, err
    merged = load_profile(tmp_path / "m.json")
    assert merged["contexts"][0]["allocations"] == 100 + 3 * 300
    status, out, err = cli("explain", tmp_path / "m.json", "--graph", tmp_path / "g.svg")
    assert status == 0 and "2 runs merged: prog 1; prog 2 (weight 3)" in out, err


@pytest.mark.parametrize("change,args,message", [
    (None, ["a"], "needs at least two profiles"),
    (lambda d: d["target"].update(executable="/x/other", argv=["other"]), ["a", "b"], "of another program"),
    # two builds, neither on disk to relate the runs' sites in (tests/integration/test_rebase.py relates them)
    (lambda d: d["modules"][1].update(build_id="ff" * 20), ["a", "b"], "none of them is on disk"),
    (lambda d: d["parameters"].update(max_size=256), ["a", "b"], "another max size"),
    (None, ["a", "b", "--weights", "1"], "--weights needs 2 numbers above 0"),
    (None, ["a", "b", "--weights", "1,-2"], "--weights needs 2 numbers above 0"),
    (None, ["a", "b", "--weights", "1,nan"], "--weights needs 2 numbers above 0"),
    (None, ["a", "b", "--weights", "1e308,1"], "--weights needs 2 numbers above 0"),
])
def test_refusals_are_one_line_and_write_nothing(tmp_path, change, args, message):
    good = json.loads(TINY.read_text())
    (tmp_path / "a").write_text(json.dumps(good))
    other = json.loads(TINY.read_text())
    if change:
        change(other)
    (tmp_path / "b").write_text(json.dumps(other))
    out = tmp_path / "m.json"
    status, _, err = cli("merge", *[tmp_path / x if x in ("a", "b") else x for x in args], "-o", out)
    assert status != 0 and message in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not out.exists()


def test_an_input_is_never_the_output(tmp_path):
    (tmp_path / "a").write_text(TINY.read_text())
    (tmp_path / "b").write_text(TINY.read_text())
    status, _, err = cli("merge", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "b", "--force")
    assert status != 0 and "is one of the profiles to merge" in err
    assert (tmp_path / "b").read_text() == TINY.read_text()


def test_a_runs_profile_is_not_replaced_but_a_merged_one_is(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(TINY.read_text())
    status, _, err = cli("merge", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "c")
    assert status != 0 and "is the profile of a run" in err
    assert (tmp_path / "c").read_text() == TINY.read_text()
    assert cli("merge", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "m")[0] == 0
    assert cli("merge", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "m", "--weights", "1,2")[0] == 0


def test_runs_that_could_not_read_a_module_merge_with_those_that_could():
    """A site's function start is null in a run that could not read its
    module's frames: the families are made again from the runs that could,
    and each run's family graph still lands on the merged families."""
    a = json.loads(TINY.read_text())
    a["version"] = 3
    for i, s in enumerate(a["sites"]):
        s["function_start"] = 0x1000 if i in (1, 2) else None   # sites 1 and 2: one function
    for c in a["contexts"]:
        c["family"] = c["id"]
    a["families"] = [{"id": c["id"], "sites": c["sites"], "contexts": [c["id"]]} for c in a["contexts"]]
    a["family_graph"] = {"nodes": [0, 1], "edges": [[0, 1, 40001]], "coverage": 1.0}
    a["ds_graph"] = {"pointer_stores": 0, "edges": [], "array_like": []}
    b = json.loads(json.dumps(a))
    for s in b["sites"]:
        s["function_start"] = None
    for x, y in ((a, b), (b, a)):
        m = merge([x, y], ["x", "y"])
        check_profile(m)
        assert sum(e[2] for e in m["family_graph"]["edges"]) == 2 * 40001


def test_totals_a_run_lacks_stay_out():
    a = load_profile(TINY)
    b = json.loads(json.dumps(a))
    a["totals"]["run_accesses"] = 5000
    m = merge([a, b], ["a", "b"])
    assert "run_accesses" not in m["totals"] and m["totals"]["accesses"] == 2 * a["totals"]["accesses"]


def test_sampling_totals_are_summed_and_the_base_is_the_largest_where_every_run_has_them():
    """Raw version 10 on, a profile says what its analyses saw
    (profiler/sample.c): merged, the windows and the accesses seen add up,
    weighted like the accesses, and the base is the largest; a run of an
    older tool, which analysed every access, leaves all three out."""
    a = load_profile(TINY)
    b = json.loads(json.dumps(a))
    for p, base, windows, seen in ((a, 1 << 22, 3, 5000), (b, 1 << 20, 7, 2000)):
        p["totals"].update(sample_base=base, sampled_windows=windows, analysed_accesses=seen)
        check_profile(p)
    m = merge([a, b], ["a", "b"], [1.0, 2.0])
    check_profile(m)
    assert (m["totals"]["sample_base"], m["totals"]["sampled_windows"], m["totals"]["analysed_accesses"]) == \
        (1 << 22, 3 + 2 * 7, 5000 + 2 * 2000)
    older = load_profile(TINY)
    m = merge([a, older], ["a", "older"])
    assert not {"sample_base", "sampled_windows", "analysed_accesses"} & set(m["totals"])


def test_a_file_that_is_no_profile_is_not_replaced(tmp_path):
    (tmp_path / "a").write_text(TINY.read_text())
    mine = tmp_path / "notes.txt"
    mine.write_text("mine\n")
    status, _, err = cli("merge", tmp_path / "a", tmp_path / "a", "-o", mine)
    assert status != 0 and "not replacing it" in err
    assert mine.read_text() == "mine\n"


def test_the_layouts_d1_misses_are_summed_and_their_ll_misses_kept_only_where_every_run_has_them():
    """rest_layouts' models have a D1 and no LL from raw version 9 on: a
    merge of an older run with a newer one sums the D1 misses and leaves
    the LL misses out, which only the older one counted."""
    def with_layouts(p, one, classes, ll):
        p["rest_layouts"] = {"max_size": 256, "objects": 10, "accesses": 100,
                             "one": {"d1_misses": one, **({"ll_misses": 1} if ll else {})},
                             "classes": {"d1_misses": classes, **({"ll_misses": 1} if ll else {})}}
        check_profile(p)
        return p
    ctx = [([1, 5], 100, 1000)]
    old = with_layouts(run_of(["prog", "a"], ctx, [(0, 0, 10)]), 40, 30, True)
    new = with_layouts(run_of(["prog", "b"], ctx, [(0, 0, 10)]), 20, 10, False)
    m = merge([old, new], ["a.json", "b.json"], [1.0, 2.0])
    check_profile(m)
    assert m["rest_layouts"]["one"] == {"d1_misses": 40 + 2 * 20}
    assert m["rest_layouts"]["classes"] == {"d1_misses": 30 + 2 * 10}
    both = merge([old, old], ["a.json", "a.json"], [1.0, 1.0])
    assert both["rest_layouts"]["one"] == {"d1_misses": 80, "ll_misses": 2}
