"""The profiler: `cohort profile` on programs whose affinity graphs are known
(tests/programs/patterns.c), and its handling of bad input."""

import json
import os

import pytest

from conftest import COHORT, PROGRAMS, ROOT, run
from cohort.measure.profile import FunctionReader
from cohort.plan import headroom, transfer
from cohort.formats.profilefile import load_profile

O0 = PROGRAMS / "patterns_O0"
O2 = PROGRAMS / "patterns_O2"      # PIE, no frame pointers, stripped
O2FP = PROGRAMS / "patterns_O2fp"  # the same code, not PIE, frame pointers, symbols


def profile(tmp_path, *argv, name="profile.json", expect_rc=0, opts=()):
    out = tmp_path / name
    r = run([COHORT, "profile", *opts, "-o", out, "--", *argv])
    assert r.returncode == expect_rc, r.stderr.decode()
    return load_profile(out), r


def fn_names(p, ctx):
    return [p["sites"][s]["function"] for s in p["contexts"][ctx]["sites"]]


def ctx_made_by(p, function):
    """Contexts whose sites include `function` (needs symbols)."""
    return [c["id"] for c in p["contexts"] if function in fn_names(p, c["id"])]


def weight(p, x, y):
    x, y = min(x, y), max(x, y)
    return sum(w for a, b, w in p["graph"]["edges"] if (a, b) == (x, y))


def the(ids):
    assert len(ids) == 1, ids
    return ids[0]


@pytest.fixture(scope="module")
def alternate(tmp_path_factory):
    return profile(tmp_path_factory.mktemp("alt"), O0, "alternate")[0]


def test_alternating_contexts_get_a_heavy_edge(alternate):
    p = alternate
    a, b = the(ctx_made_by(p, "new_a")), the(ctx_made_by(p, "new_b"))
    assert sorted(p["graph"]["nodes"]) == sorted([a, b])
    # 10 passes over 2000 pairs; each b access is affinitive to a few a nodes
    assert weight(p, a, b) > 10 * 2000
    assert weight(p, a, b) > weight(p, a, a)
    c = p["contexts"][a]
    assert (c["allocations"], c["bytes"], c["min_size"], c["max_size"], c["same_size"]) == \
        (2000, 2000 * 32, 32, 32, True)
    assert c["frees"] == 2000 and c["lifetime"]["live_at_exit"] == 0
    assert c["accesses"] >= 10 * 2000 * 2 and c["macro_accesses"] <= c["accesses"]
    assert p["target"]["exit_status"] == 0 and p["totals"]["threads"] == 1
    # The simulated cache: 4000 nodes of 32 bytes, 128 KB with their
    # neighbours, do not stay in a 32 KiB D1 across 10 passes, but fit the
    # 1 MiB LL, which misses each line about once.
    lines = transfer.lines_covered(c["allocations"], c["bytes"])
    assert c["d1_misses"] > 2 * lines and 0 < c["ll_misses"] <= lines
    assert not transfer.stays_cached(transfer.context_misses(p["contexts"], [a, b], transfer.run_accesses(p["contexts"])))


def test_one_hot_object_stays_in_the_simulated_cache(tmp_path):
    p = profile(tmp_path, O0, "self")[0]
    c = p["contexts"][the(ctx_made_by(p, "new_a"))]
    assert c["accesses"] >= 20000 and 0 < c["d1_misses"] <= 2
    assert transfer.stays_cached(transfer.context_misses(p["contexts"], [c["id"]], transfer.run_accesses(p["contexts"])))


def test_near_weight_measures_bytes_that_would_share_a_line(tmp_path, alternate):
    """Each edge also weighs how near its pairs' touched bytes would lie
    with the two objects side by side: the alternate lists' 32-byte nodes,
    whose walk reads a node's val, the other list's node's val, then each
    one's next (pairs 16 to 32 bytes apart: 32 to 48 of 64); the same lists
    of 256-byte nodes read at the same 16 bytes, too far apart to share a
    line (transfer.near_share, docs/planner.md "Near affinity")."""
    a, b = the(ctx_made_by(alternate, "new_a")), the(ctx_made_by(alternate, "new_b"))
    assert len(alternate["graph"]["near"]) == len(alternate["graph"]["edges"])
    assert 0.5 <= transfer.near_share(alternate, [a, b]) <= 0.75
    wide, _ = profile(tmp_path, O0, "wide")
    a, b = the(ctx_made_by(wide, "new_wide_a")), the(ctx_made_by(wide, "new_wide_b"))
    assert weight(wide, a, b) > 10 * 2000 and transfer.near_share(wide, [a, b]) == 0
    # no near weight: a saving estimated from the objects' mean size, as before
    assert transfer.near_share({"graph": {"edges": wide["graph"]["edges"]}}, [a, b]) is None


def test_headroom_counts_the_whole_runs_misses(tmp_path, alternate):
    """The profile counts the run's simulated misses beside the tracked
    objects' (cohort/plan/headroom.py): the alternate lists take nearly all of
    them; a run that walks a global array far more often leaves the heap
    a small share, and the line says to expect no measurable gain."""
    h = headroom.of(alternate)
    assert 0 < h.tracked_d1 <= h.d1 and h.tracked > 0.8
    assert headroom.line(alternate).startswith("headroom: objects of up to 4096 bytes took")
    glob, _ = profile(tmp_path, O0, "globals")
    h = headroom.of(glob)
    assert h.d1 > 40 * (1 << 20) // 64 // 2 and h.tracked < headroom.SMALL
    assert "expect no measurable gain" in headroom.line(glob)
    # a profile from before the totals: unknown, and how to see it
    old = dict(glob, totals={k: v for k, v in glob["totals"].items() if not k.startswith(("run_", "heap_"))})
    assert headroom.of(old) is None and "profile the program again" in headroom.line(old)


def test_explain_predicts_what_the_groups_remove(tmp_path):
    """explain ends the groups with their predicted removal of the profiled
    run's D1 misses, a share of the run's own (docs/planner.md, "Predicted
    against measured")."""
    from cohort.measure import workloads
    profile(tmp_path, workloads.binary("listfrag"), *workloads.inputs("listfrag")["train"])
    r = run([COHORT, "explain", tmp_path / "profile.json", "--graph", "-"])
    text = r.stdout.decode()
    assert r.returncode == 0 and text.startswith("headroom: ")
    line = next(x for x in text.splitlines() if x.startswith("  predicted: "))
    assert "D1 misses of the profiled run of its " in line and "%)" in line, line


def test_not_coallocatable_means_no_edge(tmp_path, alternate):
    p, _ = profile(tmp_path, O0, "separate")
    a, b = the(ctx_made_by(p, "new_a")), the(ctx_made_by(p, "new_b"))
    # All a nodes were allocated before all b nodes: between a_i and b_i lie
    # other a's. Only the pair (last a, first b) is co-allocatable: at most
    # one edge per pass, where alternate gets thousands.
    assert weight(p, a, b) <= 10 * 2
    assert weight(alternate, the(ctx_made_by(alternate, "new_a")),
                  the(ctx_made_by(alternate, "new_b"))) > 1000 * weight(p, a, b)
    assert weight(p, a, a) > 10 * 2000  # each list on its own is fine


def test_one_object_accessed_repeatedly_has_no_self_edge(tmp_path):
    p, _ = profile(tmp_path, O0, "self")
    a, b = the(ctx_made_by(p, "new_a")), the(ctx_made_by(p, "new_b"))
    assert weight(p, a, a) == 0 and weight(p, b, b) == 0
    assert weight(p, a, b) > 10000


def test_wrapper_contexts_are_told_apart_by_their_callers(tmp_path):
    p, _ = profile(tmp_path, O0, "wrapper")
    a, b = the(ctx_made_by(p, "wrapped_a")), the(ctx_made_by(p, "wrapped_b"))
    assert a != b
    sa, sb = p["contexts"][a]["sites"], p["contexts"][b]["sites"]
    assert sa[0] == sb[0] and fn_names(p, a)[0] == "xmalloc"  # same entry site
    assert sa[1] != sb[1]
    assert weight(p, a, b) > 10 * 2000


def test_recursion_is_reduced(tmp_path):
    p, _ = profile(tmp_path, O0, "recursive")
    ctxs = ctx_made_by(p, "build_rec")
    # 50 depths, but only two contexts: the outermost call (from main) and
    # every recursive one (each call site kept once).
    assert len(ctxs) == 2
    inner = max(ctxs, key=lambda c: p["contexts"][c]["allocations"])
    assert p["contexts"][inner]["allocations"] == 40 * 49
    assert fn_names(p, inner).count("build_rec") == 2
    sites = p["contexts"][inner]["sites"]
    assert len(sites) == len(set(sites))


def test_cold_context_is_filtered_out(tmp_path):
    p, _ = profile(tmp_path, O0, "cold")
    c = the(ctx_made_by(p, "new_c"))
    assert p["contexts"][c]["accesses"] > 0
    assert c not in p["graph"]["nodes"]
    assert all(c not in e[:2] for e in p["graph"]["edges"])
    assert p["graph"]["coverage"] >= 0.9


def graph_shape(p):
    """The graph with contexts named by order of first allocation and sites by
    position: everything but offsets and symbols."""
    return ([(len(c["sites"]), c["truncated"], c["allocations"], c["bytes"], c["accesses"])
             for c in p["contexts"]],
            sorted(map(tuple, p["graph"]["edges"])), p["graph"]["nodes"])


@pytest.mark.parametrize("mode", ["alternate", "wrapper", "recursive"])
def test_stripped_pie_without_frame_pointers_gives_the_same_graph(tmp_path, mode):
    stock, _ = profile(tmp_path, O2, mode, name="stock.json")
    fp, _ = profile(tmp_path, O2FP, mode, name="fp.json")
    assert graph_shape(stock) == graph_shape(fp)
    assert stock["sites"][stock["contexts"][0]["sites"][0]]["function"] is None  # really stripped
    # and -O0 -g has the same contexts and edges (weights differ: -O0 code
    # makes other accesses)
    o0, _ = profile(tmp_path, O0, mode, name="o0.json")
    assert [s[:3] for s in graph_shape(o0)[0]] == [s[:3] for s in graph_shape(stock)[0]]
    assert [e[:2] for e in graph_shape(o0)[1]] == [e[:2] for e in graph_shape(stock)[1]]


def test_threads_have_their_own_queues(tmp_path):
    p, _ = profile(tmp_path, O0, "threads")
    a, b, c, d = (the(ctx_made_by(p, f)) for f in ("new_a", "new_b", "new_c", "new_d"))
    assert weight(p, a, b) > 20 * 2000 and weight(p, c, d) > 20 * 2000
    for x in (a, b):
        for y in (c, d):
            assert weight(p, x, y) == 0
    assert p["totals"]["threads"] >= 3


def test_cxx_new_is_tracked(tmp_path):
    p, _ = profile(tmp_path, PROGRAMS / "cxx_patterns")
    sq, ci = the(ctx_made_by(p, "make_square(long)")), the(ctx_made_by(p, "make_circle(long)"))
    assert p["contexts"][sq]["allocations"] == 2000 and p["contexts"][sq]["frees"] == 2000
    assert weight(p, sq, ci) > 10 * 2000


def test_profile_records_modules_sites_and_call_kinds(alternate):
    p = alternate
    main = [m for m in p["modules"] if m["path"] == os.path.realpath(O0)]
    assert len(main) == 1 and not main[0]["system"] and len(main[0]["build_id"]) == 40
    libc = [m for m in p["modules"] if "libc.so" in m["path"]]
    assert libc and libc[0]["system"]
    a = the(ctx_made_by(p, "new_a"))
    entry = p["sites"][p["contexts"][a]["sites"][0]]
    assert entry["module"] == main[0]["id"] and entry["call"] == "direct"
    assert entry["file"] == "patterns.c" and entry["line"] > 0
    # the site is the return address: the byte before it ends a call to malloc
    system_sites = {s["id"] for s in p["sites"] if p["modules"][s["module"]]["system"]}
    assert all(not system_sites & set(c["sites"]) for c in p["contexts"])
    assert p["parameters"] == {"affinity_distance": 128, "max_size": 4096, "coverage": 0.9}
    assert p["format"] == "cohort-profile" and p["version"] == 3


def test_sites_count_their_calls(tmp_path):
    """Every call site counts how often its call ran (raw version 5), not
    only the calls that led to an allocation: maybe_new is called 20000
    times and allocates on one call in ten, through new_a's call of malloc."""
    p, _ = profile(tmp_path, O0, "sparse", "2000")
    ctx = the(ctx_made_by(p, "maybe_new"))
    assert p["contexts"][ctx]["allocations"] == 2000
    calls = {p["sites"][s]["function"]: p["sites"][s]["calls"] for s in p["contexts"][ctx]["sites"]}
    assert calls["sparse"] == 20000          # its call of maybe_new
    assert calls["maybe_new"] == 2000        # its call of new_a
    assert calls["new_a"] == 2000            # its call of malloc
    assert calls["main"] == 1                # its call of sparse


def test_affinity_distance_and_max_size_are_honoured(tmp_path):
    near, _ = profile(tmp_path, O0, "alternate", name="near.json")
    r = run([COHORT, "profile", "--affinity-distance", "16", "-o", tmp_path / "a16.json", "--", O0, "alternate"])
    assert r.returncode == 0
    small = load_profile(tmp_path / "a16.json")
    a, b = the(ctx_made_by(near, "new_a")), the(ctx_made_by(near, "new_b"))
    assert 0 < weight(small, a, b) < weight(near, a, b)
    r = run([COHORT, "profile", "--max-size", "16", "-o", tmp_path / "m16.json", "--", O0, "alternate"])
    tiny = load_profile(tmp_path / "m16.json")
    assert tiny["graph"]["edges"] == [] and tiny["contexts"][a]["accesses"] == 0
    assert tiny["contexts"][a]["allocations"] == 2000  # still counted


# ---- bad input --------------------------------------------------------------

def test_refuses_to_overwrite(tmp_path):
    out = tmp_path / "profile.json"
    out.write_text("precious")
    r = run([COHORT, "profile", "-o", out, "--", O0, "self", "10"])
    assert r.returncode != 0 and b"exists" in r.stderr and b"--force" in r.stderr
    assert out.read_text() == "precious"
    r = run([COHORT, "profile", "--force", "-o", out, "--", O0, "self", "10"])
    assert r.returncode == 0 and load_profile(out)["format"] == "cohort-profile"


def test_missing_and_unsupported_targets(tmp_path):
    r = run([COHORT, "profile", "-o", tmp_path / "p.json", "--", tmp_path / "nope"])
    assert r.returncode != 0 and r.stderr.decode().count("\n") == 1 and b"no such file" in r.stderr
    text = tmp_path / "data.txt"
    text.write_text("hello")
    text.chmod(0o755)
    r = run([COHORT, "profile", "-o", tmp_path / "p.json", "--", text])
    assert r.returncode != 0 and b"not an ELF file" in r.stderr
    assert not (tmp_path / "p.json").exists()
    r = run([COHORT, "profile", "-o", tmp_path / "p.json"])
    assert r.returncode != 0 and b"no program given" in r.stderr


def test_failing_target_still_gives_a_profile_and_a_loud_failure(tmp_path):
    """A training run that fails is no run to optimise: the profile is kept,
    and cohort profile says so and exits 1, unless --allow-failure."""
    p, r = profile(tmp_path, O0, "no-such-mode", expect_rc=1)
    assert p["target"]["exit_status"] == 2
    err = r.stderr.decode()
    assert "cohort: WARNING: the training run" in err and "failed (exit status 2)" in err, err
    assert "--allow-failure" in err and "patterns: unknown mode" in err
    r = run([COHORT, "profile", "--allow-failure", "-o", tmp_path / "p2.json", "--", O0, "no-such-mode"])
    assert r.returncode == 0 and b"WARNING" in r.stderr and (tmp_path / "p2.json").exists()


def test_crashing_target_still_gives_a_profile(tmp_path):
    p, r = profile(tmp_path, "sh", "-c", "kill -SEGV $$", expect_rc=1)
    assert p["target"]["signal"] == 11 or p["target"]["exit_status"] != 0
    assert b"killed by SIGSEGV" in r.stderr or b"failed (exit status" in r.stderr


DSGRAPH = PROGRAMS / "dsgraph"


def test_ds_graph_edges_are_measured(tmp_path):
    """APA's DS graph from pointer stores: tree nodes point to tree nodes at
    offsets 0 and 8 and to their payload at 16; list cells to cells at 0; a
    table of 32 list heads to cells at 32 offsets, which makes it array-like;
    payloads hold no pointers."""
    p, _ = profile(tmp_path, DSGRAPH, "2000")
    ds = p["ds_graph"]
    assert p["version"] == 3 and ds["pointer_stores"] > 0
    tree, payload, cell = ({c["id"] for c in p["contexts"] if fn_names(p, c["id"])[:1] == [f]}
                           for f in ("new_tree", "new_payload", "new_cell"))
    table = {c["id"] for c in p["contexts"] if c["min_size"] == c["max_size"] == 256}
    assert tree and payload and len(cell) == 1 and len(table) == 1
    edges = {}
    for src, off, dst, n in ds["edges"]:
        assert n > 0
        edges.setdefault(src, set()).add((off, dst))
    tree_edges = set().union(*(edges.get(t, set()) for t in tree))
    assert {off for off, dst in tree_edges if dst in tree} == {0, 8}
    assert {off for off, dst in tree_edges if dst in payload} == {16}
    assert not any(edges.get(c) for c in payload)
    (c,), (t,) = cell, table
    assert edges[c] == {(0, c)}
    assert edges[t] == {(8 * k, c) for k in range(32)}
    assert ds["array_like"] == [t]


def test_version_2_profiles_still_load(tmp_path):
    p, _ = profile(tmp_path, DSGRAPH, "200")
    del p["ds_graph"]
    p["version"] = 2
    old = tmp_path / "old.json"
    old.write_text(json.dumps(p))
    assert "ds_graph" not in load_profile(old)
    r = run([COHORT, "plan", "-o", tmp_path / "old.plan", old])
    assert r.returncode == 0, r.stderr.decode()


def test_allocations_entered_through_a_system_module_are_counted(tmp_path):
    """libstdc++ makes the strings `objects` builds with operator+: those
    allocations enter the allocator from libstdc++'s code, two frames above
    the program's call; the shapes' are made by the program's own `new`."""
    from conftest import BUILD
    p, _ = profile(tmp_path, BUILD / "workloads" / "objects", "1000", "1", "1000")
    through = {c["id"]: c["through_system"] for c in p["contexts"]}
    strings = [c for c, t in through.items() if t["allocations"]]
    assert strings and all(through[c]["allocations"] == p["contexts"][c]["allocations"] and
                           through[c]["frames"] >= through[c]["allocations"] for c in strings)
    shapes = the(ctx_made_by(p, "Shape* Maker<Circle>::make<long>(long)"))
    assert through[shapes] == {"allocations": 0, "frames": 0}


def test_each_analysis_that_can_be_switched_off_leaves_its_part_out(tmp_path):
    """profiler/README.md measures what each analysis costs by switching it
    off: the tool then writes nothing of it, the profile lacks what it gives
    (as an older profile does: no DS graph rather than an empty one), and
    the rest of the profile is the run's own."""
    from cohort.measure.profile import build_profile, run_and_read
    from cohort.plan.planner import make_plan
    argv = [str(O0), "alternate"]
    params = {"affinity_distance": 128, "max_size": 4096, "coverage": 0.9}
    made = {}
    for name, switches in (("all", ()), ("none", ("--cohort-layouts=no", "--cohort-pointers=no")),
                           ("lines", ("--cohort-lines=no",))):
        rc, raw = run_and_read(argv, "profile", 128, 4096, tool_args=switches)
        assert rc == 0
        made[name] = build_profile(raw, argv, params, rc)
    full, bare, unlined = made["all"], made["none"], made["lines"]
    assert {"rest_layouts", "line_offsets", "ds_graph"} <= set(full)
    assert not {"rest_layouts", "line_offsets", "ds_graph"} & set(bare)   # no layouts: no lines either
    assert "rest_layouts" in unlined and "line_offsets" not in unlined
    assert [c["accesses"] for c in bare["contexts"]] == [c["accesses"] for c in full["contexts"]]
    assert bare["graph"]["edges"] == full["graph"]["edges"]
    assert make_plan(bare).rest_layouts is None   # decided without the model, as for an older profile


def test_the_profile_as_built_is_the_profile_as_read_back(tmp_path):
    """cohort optimize plans from the profile it has just built without
    reading it back (planner.plan_command's `loaded`): the two must be one
    value, lists for lists and string keys for string keys."""
    from cohort.measure.profile import profile as build
    out = tmp_path / "p.json"
    data, rc = build([str(O2), "alternate"], out)
    assert rc == 0
    assert data == load_profile(out)


def test_past_the_sample_base_the_analyses_see_windows_that_stand_for_the_run(tmp_path):
    """profiler/sample.c: up to --sample-base accesses to the span of tracked
    objects every one is analysed, as before sampling; past it, windows
    whose counts stand for the accesses between them, the contexts'
    accesses and misses among them. The whole run's cache and the span's
    accesses count every access, and the estimates stay near the whole
    run's (the program walks its lists ten times alike). They run low by
    what the run's last period held past its last window (its teardown,
    here): at most a period, a sixteenth of a stage here."""
    from cohort.plan.planner import make_plan
    argv = (O0, "alternate", "60000")   # 3.4 M tracked accesses
    exact, _ = profile(tmp_path, *argv, name="exact.json", opts=("--sample-base", "0"))
    default, _ = profile(tmp_path, *argv, name="default.json")
    sampled, r = profile(tmp_path, *argv, name="sampled.json", opts=("--sample-base", str(16 * 65536)))
    t, s = exact["totals"], sampled["totals"]
    assert t["analysed_accesses"] == t["span_accesses"] >= t["accesses"] and t["sampled_windows"] == 0
    # Within the default base (4.2 M), the run is analysed whole.
    assert default["graph"] == exact["graph"] and default["contexts"] == exact["contexts"]
    assert s["sampled_windows"] > 0 and s["analysed_accesses"] < 0.8 * s["span_accesses"]
    assert b"the analyses saw" in r.stderr and b"estimates" in r.stderr, r.stderr
    exact_counts = ("span_accesses", "run_accesses", "run_d1_misses", "run_ll_misses")
    assert [s[k] for k in exact_counts] == [t[k] for k in exact_counts]
    near = lambda a, b, tol: abs(a - b) <= tol * b   # noqa: E731
    for k in ("accesses", "macro_accesses"):
        assert near(s[k], t[k], 0.1), k
    hot = [(c, d) for c, d in zip(exact["contexts"], sampled["contexts"]) if c["accesses"] > 100_000]
    assert len(hot) >= 2
    for c, d in hot:
        for k in ("accesses", "d1_misses", "ll_misses"):
            assert near(d[k], c[k], 0.15), (c["id"], k)
    a, b = the(ctx_made_by(exact, "new_a")), the(ctx_made_by(exact, "new_b"))
    assert near(weight(sampled, a, b), weight(exact, a, b), 0.1)
    for shape in ("one", "classes"):
        assert near(sampled["rest_layouts"][shape]["d1_misses"], exact["rest_layouts"][shape]["d1_misses"], 0.15)
    assert [sorted(g.members) for g in make_plan(sampled).groups] == \
        [sorted(g.members) for g in make_plan(exact).groups]


def test_a_bad_sample_base_is_one_line(tmp_path):
    for bad in ("-1", str(1 << 41), "many"):
        r = run([COHORT, "profile", "--sample-base", bad, "-o", tmp_path / "p.json", "--", O0, "self", "10"])
        assert r.returncode != 0 and r.stderr.decode().count("\n") == 1, r.stderr
        assert not (tmp_path / "p.json").exists()


def test_the_tool_names_each_non_system_module_as_it_first_sees_it(tmp_path):
    """--cohort-modules: a line per module whose sites an allocation's stack
    holds, system modules (libc, ld.so, the tool's preload) left out, so
    that `cohort profile` can read their functions while the program runs."""
    modules = tmp_path / "modules"
    env = dict(os.environ, VALGRIND_LIB=str(ROOT / "build" / "profiler" / "lib"))
    r = run(["valgrind", "--tool=cohort", "-q", f"--cohort-out={tmp_path / 'raw'}", f"--cohort-modules={modules}",
             f"--cohort-main={os.path.realpath(O0)}", O0, "alternate", "100"], env=env)
    assert r.returncode == 0, r.stderr
    assert modules.read_text().splitlines() == [os.path.realpath(O0)]


def test_the_function_reader_reads_the_modules_named_while_it_runs(tmp_path):
    """profile.FunctionReader reads the program's functions, then each module
    the tool appends, whole lines only; what is named by the time the run
    ends it reads before finish returns."""
    modules = tmp_path / "modules"
    reader = FunctionReader(os.path.realpath(O0))
    reader.start(modules)
    modules.write_text(f"{os.path.realpath(O2)}\n{os.path.realpath(O2FP)[:-3]}")   # the tool is writing a line
    with modules.open("a") as f:
        f.write(f"{os.path.realpath(O2FP)[-3:]}\n")
    starts = reader.finish()
    assert set(starts) == {os.path.realpath(p) for p in (O0, O2, O2FP)}
    assert all(starts.values())


def test_an_abandoned_function_reader_stops(tmp_path):
    modules = tmp_path / "modules"
    modules.write_text("".join(f"{os.path.realpath(O2)}{'/.' * i}\n" for i in range(200)))
    reader = FunctionReader(os.path.realpath(O0))
    reader.start(modules)
    reader.abandon()
    reader.thread.join(timeout=60)
    assert not reader.thread.is_alive() and len(reader.starts) < 200
