"""The benchmark workloads of issues 11, 12 and 17 (bintree, quadtree, treesort,
treesim, graph, calc, mixed, wrapsim, xform, render), wrapkinds, wards, tour and queries,
on small inputs: the checksum must not depend on where objects live (glibc,
jemalloc, Cohort grouping everything, Cohort's random placement), their
inputs files must be complete, and the standard-input convention
(PHASE-stdin lines, cohort.measure.workloads.stdin_file, bench-suite's options) must
work. tests/integration/test_bench.py runs every workload's train input through
cohort optimize."""

import importlib.util
import json
import os

import pytest

from conftest import BUILD, COHORT, JEMALLOC, ROOT, cohort_env, run
from cohort.measure import workloads
from cohort.plan.handplan import call_sites, write_plan

NEW = ["bintree", "quadtree", "treesort", "treesim", "graph", "calc", "mixed", "wrapsim", "xform", "render",
       "wrapkinds", "wards", "tour", "queries"]

# Smaller than the train inputs: a few hundredths of a second each.
SMALL = {
    "bintree": ["12", "3", "2", "7"],
    "quadtree": ["8", "2", "2", "500", "7"],
    "treesort": ["11", "2", "7"],
    "treesim": ["6", "200", "7"],
    "graph": ["3000", "3", "2", "7"],
    "calc": ["3"],
    "mixed": ["300", "20", "7"],
    "wrapsim": ["3", "40", "7"],
    "xform": ["800", "3", "4", "7"],
    "render": ["40", "30", "3", "5", "150"],
    "wrapkinds": ["20000", "2"],
    "wards": ["3", "15", "7"],
    "tour": ["3000", "2", "7"],
    "queries": ["3000", "2000", "50", "7"],
}


# The caller's own preloads and COHORT_* settings would skew the comparison.
PLAIN = {k: v for k, v in os.environ.items() if not k.startswith("COHORT_") and k != "LD_PRELOAD"}


def small_stdin(name, tmp_path):
    path = workloads.stdin_file(name, "train", tmp_path)
    return path.read_bytes() if path else None


@pytest.mark.parametrize("name", NEW)
def test_checksum_does_not_depend_on_placement(name, tmp_path):
    argv = [workloads.binary(name), *SMALL[name]]
    stdin = small_stdin(name, tmp_path)
    plain = run(argv, env=PLAIN, input=stdin)
    assert plain.returncode == 0, plain.stderr
    assert b"checksum" in plain.stdout and plain.stderr == b""
    je = run(argv, env=dict(PLAIN, LD_PRELOAD=str(JEMALLOC)), input=stdin)
    assert (je.returncode, je.stdout, je.stderr) == (0, plain.stdout, b""), "jemalloc"
    for mode in ("all", "random:4"):
        stats = tmp_path / f"stats-{mode}.json"
        r = run([COHORT, "run", "--mode", mode, "--stats", stats, "--", *argv], env=PLAIN, input=stdin)
        assert (r.returncode, r.stdout, r.stderr) == (0, plain.stdout, b""), mode
        grouped = sum(g["allocations"] for g in json.loads(stats.read_text())["groups"])
        assert grouped > 100, f"{mode}: the program's objects should really be placed by Cohort"


def test_tour_lines_shows_which_line_the_walk_waits_for():
    """tour's `lines` simulation: at offsets 0 and 16 the `next` pointer
    shares its node's line, so every step waits for the line it misses; at
    32 and 48 it lies in the line after, which the previous node's step
    often brought in already (docs/runtime.md)."""
    r = run([workloads.binary("tour"), "3000", "2", "7", "lines"], env=PLAIN)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.decode().splitlines()]
    assert [row[1] for row in rows] == ["0:", "16:", "32:", "48:"]
    missed = {row[1]: float(row[4]) for row in rows}
    waited = {row[1]: float(row[7]) for row in rows}
    assert waited["0:"] == missed["0:"] and waited["16:"] == missed["16:"]
    assert waited["32:"] < 0.6 * waited["0:"]
    assert abs(missed["32:"] - missed["0:"]) < 0.05 * missed["0:"], "as many lines missed: cachegrind sees no difference"


def test_render_checksum_does_not_depend_on_threads():
    """The renderer's workers take rows in whatever order they get them; the
    picture, and so the checksum, is the same with any number of them."""
    argv = [workloads.binary("render"), "40", "30"]
    sums = {run([*argv, t, "5", "150"], env=PLAIN).stdout.split(b"checksum")[1] for t in ("1", "2", "4")}
    assert len(sums) == 1


@pytest.mark.parametrize("shape", ["ring", "split", "relay", "larson"])
def test_prodcons_hands_blocks_between_threads(shape, tmp_path):
    """Issue 20's stress: the checksum does not depend on the allocator or on
    how the threads interleave, and every run reports its throughput."""
    argv = [workloads.binary("prodcons"), shape, "3", "200", "8"]
    plain = run(argv, env=PLAIN)
    assert plain.returncode == 0 and b"checksum" in plain.stdout, plain.stderr
    assert b"M ops/s" in plain.stderr and b"fragmentation" in plain.stderr
    je = run(argv, env=dict(PLAIN, LD_PRELOAD=str(JEMALLOC)))
    assert (je.returncode, je.stdout) == (0, plain.stdout), "jemalloc"
    for mode in ("all", "random:4"):
        stats = tmp_path / f"stats-{mode}.json"
        r = run([COHORT, "run", "--mode", mode, "--stats", stats, "--", *argv], env=PLAIN)
        assert (r.returncode, r.stdout) == (0, plain.stdout), (mode, r.stderr)
        groups = json.loads(stats.read_text())["groups"]
        assert sum(g["allocations"] for g in groups) > 3 * 200 * 64
        # every block handed on was freed: what is left is the queues and stdio
        assert sum(g["live_bytes"] for g in groups) < 65536


@pytest.mark.parametrize("name", NEW + ["prodcons"])
def test_inputs_files(name):
    table = workloads.inputs(name)
    assert set(workloads.PHASES) <= set(table)
    for key in table:
        phase = key[:-len("-stdin")] if key.endswith("-stdin") else key
        assert phase in workloads.PHASES + workloads.OPTIONAL_PHASES, key
    assert workloads.binary(name).exists()


def test_stdin_files(tmp_path):
    assert workloads.has_stdin("calc") and not workloads.has_stdin("bintree")
    assert workloads.stdin_file("bintree", "ref", tmp_path) is None
    made = {p: workloads.stdin_file("calc", p, tmp_path / "a") for p in workloads.PHASES}
    assert all(made[p] == tmp_path / "a" / f"calc-{p}.stdin" for p in workloads.PHASES)
    again = workloads.stdin_file("calc", "ref", tmp_path / "b")
    assert again.read_bytes() == made["ref"].read_bytes(), "generated input must be deterministic"
    assert made["train"].read_bytes() != made["ref"].read_bytes(), "train runs another program"
    with pytest.raises(ValueError):
        workloads.stdin_file("calc", "test", tmp_path)


def test_every_phase_program_runs(tmp_path):
    """Each phase's generated program parses and runs (one round of it)."""
    for phase in workloads.PHASES:
        program = workloads.stdin_file("calc", phase, tmp_path).read_bytes()
        r = run([workloads.binary("calc"), "1"], input=program)
        assert r.returncode == 0 and r.stderr == b"", (phase, r.stderr)
        assert int(r.stdout.split()[-5]) > 1000, "statements executed"


@pytest.mark.parametrize("program, message", [
    (b"x = 1 +;", b"line 1: expected an expression"),
    (b"print y;", b"y is not set"),
    (b"l = [1];\nprint l[3];", b"line 2: index 3 out of range"),
    (b"l = [1, 2];\nfor v in l { push(l, v); }", b"list changed inside a for"),
    (b"def f(a) { return f(a); }\nf(1);", b"calls nested too deeply"),
])
def test_calc_errors(program, message):
    r = run([workloads.binary("calc")], input=program)
    assert r.returncode != 0 and message in r.stderr, r.stderr


def test_calc_language():
    program = b"""
    # every construct once
    def fib(n) { if n < 2 { return n; } return fib(n - 1) + fib(n - 2); }
    l = range(5) + [10, -3];
    s = 0;
    for v in l { s = s + v * 2; }
    repeat 3 { push(l, len(l)); }
    i = 0;
    while i < 3 && !(i == 5) || 0 { l[i] = l[i] * 100; i = i + 1; }
    print fib(15), s, shift(l), l, 7 / 0, -7 % 3, abs(-4), min(3, 9), max(3, 9), [1, [2]] == [1, [2]];
    """
    r = run([workloads.binary("calc")], input=program)
    assert r.returncode == 0, r.stderr
    first = r.stdout.decode().splitlines()[0]
    assert first == "610 34 0 [100, 200, 3, 4, 10, -3, 7, 8, 9] 0 -1 4 3 9 1"


def test_calc_pipeline_with_stdin(tmp_path):
    """Profile and plan calc with its program on standard input, then run
    the plan on another program: same output as a plain run."""
    train = workloads.stdin_file("calc", "train", tmp_path)
    ref = workloads.stdin_file("calc", "ref", tmp_path).read_bytes()
    with open(train, "rb") as f:
        r = run([COHORT, "optimize", "-o", tmp_path / "opt", "--", workloads.binary("calc"), "1"], stdin=f)
    assert r.returncode == 0, r.stderr.decode()
    argv = [workloads.binary("calc"), "2"]
    plain = run(argv, input=ref)
    got = run([COHORT, "run", "--plan", tmp_path / "opt" / "plan", "--", *argv], input=ref)
    assert plain.returncode == 0 and (got.returncode, got.stdout) == (0, plain.stdout)


def test_bench_suite_stdin_options(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_suite", ROOT / "scripts" / "bench-suite.py")
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    assert suite.stdin_options("bintree", tmp_path) == []
    opts = suite.stdin_options("calc", tmp_path)
    assert opts == ["--train-stdin", str(tmp_path / "calc-train.stdin"),
                    "--stdin", str(tmp_path / "calc-ref.stdin"),
                    "--cachegrind-stdin", str(tmp_path / "calc-cachegrind.stdin")]
    assert all((tmp_path / f"calc-{p}.stdin").stat().st_size > 1000 for p in workloads.PHASES)


def test_allocbench_stream_spreads_one_request_stream_over_groups(tmp_path):
    """allocbench stream makes the same requests whatever G, and a plan that
    names G of its functions' call sites spreads them evenly over G groups;
    allocbench groups does the same with sizes of each function's own."""
    binary = BUILD / "workloads" / "allocbench"
    sizes = {}
    for g in (1, 4):
        sites = [(0, call_sites(binary, f"group_alloc_{i // 8}{i % 8}", "malloc")[0], f"group={i}")
                 for i in range(g)]
        plan = write_plan(tmp_path / f"g{g}.plan", [binary], sites, [f"g{i}" for i in range(g)],
                          [(i, [i]) for i in range(g)], version=2)
        stats = tmp_path / f"g{g}.json"
        r = run([binary, "stream", "4000", str(g)], env=cohort_env(plan=plan, stats=stats))
        assert r.returncode == 0 and r.stdout.startswith(b"stream ") and r.stderr == b""
        groups = json.loads(stats.read_text())["groups"]
        assert [x["allocations"] for x in groups[:g]] == [4000 // g] * g
        sizes[g] = sum(x["peak_live_bytes"] for x in groups[:g])
    # the window holds the same 1024 requests either way: 16, 96 or 176 bytes
    assert sizes[1] <= 1024 * 176 and sizes[4] <= 1024 * 176
    r = run([binary, "stream", "10", "65"])
    assert r.returncode == 2 and r.stderr == b"allocbench: stream takes 1..64 groups\n"


def test_queries_merged_profile_groups_what_each_input_uses(tmp_path):
    """queries' two training inputs each make one structure hot (train the
    accounts' hash index, train2 the order tree): a plan from either groups
    its own structure only, and the plan from the two merged
    (optimize --train ... --merge) groups both (issue 80)."""
    table = workloads.inputs("queries")
    out = tmp_path / "o"
    r = run([COHORT, "optimize", "-o", out, "--train", " ".join(table["train2"]), "--merge", "--",
             workloads.binary("queries"), *table["train"]])
    assert r.returncode == 0, r.stderr

    def groups(plan):
        return {line.split()[2].split("-", 1)[-1] for line in plan.read_text().splitlines()
                if line.startswith("group ") and not line.split()[2] == "rest"}
    assert groups(out / "plan") == {"new_account", "new_order"}
    for profile, own in (("profile.json", "new_account"), ("profile-2.json", "new_order")):
        r = run([COHORT, "plan", out / profile, "-o", tmp_path / f"plan-{own}"])
        assert r.returncode == 0, r.stderr
        assert groups(tmp_path / f"plan-{own}") == {own}
