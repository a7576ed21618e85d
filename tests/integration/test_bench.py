"""The bench harness and report on a tiny program, and the workloads'
checksums under every allocator."""

import json

import jsonschema
import pytest

from conftest import COHORT, PROGRAMS, ROOT, cohort_env, run
from cohort.measure import workloads

TOY = PROGRAMS / "benchtoy"
SCHEMA = json.loads((ROOT / "docs" / "results.schema.json").read_text())


@pytest.fixture(scope="module")
def toy_plan(tmp_path_factory):
    d = tmp_path_factory.mktemp("toy")
    r = run([COHORT, "optimize", "-o", d, "--", TOY])
    assert r.returncode == 0, r.stderr.decode()
    return d / "plan"


def bench(tmp_path, plan, mode="ok", *extra):
    out = tmp_path / "res"
    r = run([COHORT, "bench", "--trials", "3", "--warmup", "1", "--plan", plan, *extra, "-o", out,
             "--", TOY, mode])
    return r, out


def predecessors(trials):
    """{config: the configurations it ran right after, one per round}."""
    before = {}
    for prev, t in zip(trials, trials[1:]):
        if prev["round"] == t["round"]:
            before.setdefault(t["config"], []).append(prev["config"])
    return before


def test_bench_orders_trials_and_writes_valid_results(tmp_path, toy_plan):
    r, out = bench(tmp_path, toy_plan, "ok", "--cachegrind-args", "ok")
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((out / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    order = ["glibc", "cohort+glibc", "jemalloc", "cohort+jemalloc", "mimalloc", "cohort+mimalloc", "random", "all"]
    assert res["parameters"]["order"] == order
    # Every round runs each configuration once, round 0 the first baseline
    # first (its output is the reference), and none runs right after the
    # same one in two rounds (a balanced Latin square's rows).
    rounds = [[t["config"] for t in res["trials"] if t["round"] == r_] for r_ in range(4)]
    assert [t["round"] for t in res["trials"]] == sorted(t["round"] for t in res["trials"])
    assert all(sorted(r_) == sorted(order) for r_ in rounds) and rounds[0][0] == "glibc"
    assert all(len(set(b)) == len(b) for b in predecessors(res["trials"]).values())
    assert [t["warmup"] for t in res["trials"]] == [True] * len(order) + [False] * (3 * len(order))
    assert all(t["status"] == "ok" for t in res["trials"]) and res["problems"] == []
    assert all(res["summary"][c]["ok_trials"] == 3 for c in order)
    assert set(res["ratios"]) == {"cohort+glibc", "cohort+jemalloc", "cohort+mimalloc", "random", "all"}
    assert res["ratios"]["cohort+jemalloc"]["vs"] == "jemalloc"
    assert res["ratios"]["cohort+mimalloc"]["vs"] == "mimalloc"
    assert all(res["cachegrind"][c]["D1_misses"] > 0 for c in order)
    # The runtime's part of the cost: none without it, some (and never more
    # than the whole) with it.
    cg = res["cachegrind"]
    assert cg["glibc"]["runtime_Ir"] == 0 and cg["glibc"]["runtime_D1_misses"] == 0
    for c in ("cohort+glibc", "random", "all"):
        assert 0 < cg[c]["runtime_Ir"] < cg[c]["I_refs"]
        assert 0 <= cg[c]["runtime_D1_misses"] <= cg[c]["D1_misses"]
        assert 0 <= cg[c]["runtime_D1_block_misses"] <= cg[c]["runtime_D1_misses"]
    assert cg["glibc"]["runtime_D1_block_misses"] == 0
    assert "rt D1" in r.stdout.decode() and "rt meta" in r.stdout.decode()
    # Without --stdin every run reads /dev/null; no output file was checked.
    assert {k: v["path"] for k, v in res["stdin"].items()} == {"ref": "/dev/null", "cachegrind": "/dev/null"}
    assert res["output_file"] is None and all("output_file_sha256" not in t for t in res["trials"])
    assert res["runtime_stats"]["cohort+glibc"]["plan_active"] is True
    assert res["runtime_stats"]["cohort+glibc"]["grouped_allocations"] >= 20000
    assert (out / "speedup.png").stat().st_size > 1000 and (out / "misses.png").exists()
    assert "cohort+glibc" in r.stdout.decode()

    rep = tmp_path / "report" / "report.md"
    rep.parent.mkdir()
    r = run([COHORT, "report", out, "-o", rep])
    assert r.returncode == 0, r.stderr.decode()
    text = rep.read_text()
    assert "| benchtoy | 3 |" in text and "time vs jemalloc" in text and "random control" in text
    assert "one pool (time, D1)" in text
    frames = res["runtime_stats"]["cohort+glibc"]["frames_walked"]
    assert sum(frames.values()) >= 20000
    assert "## Identification" in text and "| benchtoy | " in text.split("## Identification")[1]
    assert "![speed-up per policy](report-fig14.png)" in text and (rep.parent / "report-fig14.png").exists()
    assert f"cohort: wrote {rep}, {rep.parent / 'report-fig13.png'}, {rep.parent / 'report-fig14.png'}" \
        in r.stderr.decode()
    # the table a reader wants first, then HALO's figures and table
    assert text.index("## Best per workload") < text.index("## Every configuration") < text.index("## Figure 13")
    best = text.split("## Best per workload")[1].split("\n| benchtoy | ")[1].split(" |")[0]
    assert best in ("halo (cohort+glibc)", "halo (cohort+jemalloc)", "halo (cohort+mimalloc)", "random control",
                    "one pool (all)")   # which is fastest on the toy is the machine's noise
    for heading in ("## Figure 13: D1 misses per policy", "## Figure 14: speed-up per policy",
                    "## Figure 15: HALO against the random control", "## Table 1: fragmentation at peak"):
        assert heading in text


def test_checksum_mismatch_is_flagged_not_averaged(tmp_path, toy_plan):
    r, out = bench(tmp_path, toy_plan, "mismatch", "--allocators", "glibc", "--no-random", "--no-all")
    assert r.returncode == 1
    res = json.loads((out / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    assert {t["status"] for t in res["trials"] if t["config"] == "cohort+glibc"} == {"mismatch"}
    assert res["summary"]["cohort+glibc"]["ok_trials"] == 0
    assert "cohort+glibc" not in res["ratios"]
    assert any("mismatch (stdout differs" in p for p in res["problems"])
    assert all(t["reason"].startswith("stdout differs from the reference run's (line 1: 'checksum ")
               and "the reference's 'checksum " in t["reason"]
               for t in res["trials"] if t["config"] == "cohort+glibc")
    assert b"MISMATCH" in r.stderr and b"PROBLEM" in r.stdout


def test_crashing_target_is_reported(tmp_path, toy_plan):
    r, out = bench(tmp_path, toy_plan, "crash", "--allocators", "glibc", "--no-random", "--no-all")
    assert r.returncode == 1
    res = json.loads((out / "results.json").read_text())
    bad = [t for t in res["trials"] if t["config"] == "cohort+glibc"]
    assert all(t["status"] == "failed" and t["exit"] == -11 for t in bad)
    assert b"FAILED" in r.stderr and b"exit -11" in r.stderr


def test_bench_bad_input(tmp_path, toy_plan):
    r = run([COHORT, "bench", "-o", tmp_path / "x", "--", TOY])
    assert r.returncode != 0 and b"--plan" in r.stderr
    r = run([COHORT, "bench", "--plan", toy_plan, "-o", tmp_path / "x", "--", "/bin/true"])
    assert r.returncode != 0 and b"not true" in r.stderr
    r = run([COHORT, "bench", "--plan", toy_plan, "--allocators", "hoard", "-o", tmp_path / "x", "--", TOY])
    assert r.returncode != 0 and b"unknown allocator" in r.stderr
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "results.json").write_text("keep")
    r = run([COHORT, "bench", "--plan", toy_plan, "-o", tmp_path / "y", "--", TOY])
    assert r.returncode != 0 and b"--force" in r.stderr
    assert (tmp_path / "y" / "results.json").read_text() == "keep"
    r = run([COHORT, "report", tmp_path / "y", "-o", tmp_path / "r.md"])
    assert r.returncode != 0 and b"not a results file" in r.stderr


@pytest.mark.parametrize("name", workloads.names())
def test_workload_checksums_agree_under_every_allocator(name, tmp_path):
    argv = [workloads.binary(name), *workloads.inputs(name)["train"]]
    stdin = workloads.stdin_file(name, "train", tmp_path)     # calc reads its program there
    feed = {"input": stdin.read_bytes()} if stdin else {}
    outputs = {a: run(argv, env=cohort_env(allocator=a, mode="off"), **feed).stdout for a in ("glibc", "jemalloc")}
    r = run([COHORT, "optimize", "-o", tmp_path / "opt", *(["--stdin", stdin] if stdin else []), "--", *argv])
    assert r.returncode == 0, r.stderr.decode()
    for a in ("glibc", "jemalloc"):
        got = run(argv, env=cohort_env(allocator=a, plan=tmp_path / "opt" / "plan"), **feed)
        assert got.returncode == 0 and got.stdout == outputs["glibc"], a
    assert outputs["jemalloc"] == outputs["glibc"] and b"checksum" in outputs["glibc"]
    if stdin:
        assert b"statements 0 " not in outputs["glibc"]        # it did read a program


def test_policies_side_by_side(tmp_path, toy_plan):
    """--policies halo,dpa,mo: each policy is a configuration of the same
    interleaved rounds, with ratios, cachegrind and statistics, and a column
    of the report."""
    r, out = bench(tmp_path, toy_plan, "ok", "--policies", "halo,dpa,mo", "--allocators", "glibc",
                   "--cachegrind-args", "ok")
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((out / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    order = ["glibc", "cohort+glibc", "dpa", "mo", "random", "all"]
    assert res["parameters"]["order"] == order and res["parameters"]["policies"] == ["halo", "dpa", "mo"]
    # Every round runs each configuration once, round 0 the first baseline
    # first (its output is the reference), and none runs right after the
    # same one in two rounds (a balanced Latin square's rows).
    rounds = [[t["config"] for t in res["trials"] if t["round"] == r_] for r_ in range(4)]
    assert [t["round"] for t in res["trials"]] == sorted(t["round"] for t in res["trials"])
    assert all(sorted(r_) == sorted(order) for r_ in rounds) and rounds[0][0] == "glibc"
    assert all(len(set(b)) == len(b) for b in predecessors(res["trials"]).values())
    assert all(res["ratios"][p]["vs"] == "glibc" and "d1_ratio" in res["ratios"][p] for p in ("dpa", "mo"))
    assert json.loads((out / "stats" / "dpa.json").read_text())["mode"] == "dpa"
    assert json.loads((out / "stats" / "mo.json").read_text())["mode"] == "mo"
    rep = tmp_path / "report.md"
    r = run([COHORT, "report", out, "-o", rep])
    assert r.returncode == 0, r.stderr.decode()
    assert "| dpa (time, D1) | mo (time, D1) |" in rep.read_text()


def test_online_policies_need_no_plan(tmp_path):
    out = tmp_path / "res"
    r = run([COHORT, "bench", "--trials", "1", "--warmup", "0", "--policies", "mo", "--allocators", "glibc",
             "--no-random", "--no-all", "-o", out, "--", TOY, "ok"])
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((out / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    assert res["parameters"]["order"] == ["glibc", "mo"] and res["plan"] is None
    assert not (out / "plan").exists()


@pytest.mark.parametrize("policies, message", [
    ("halo,tuned", "--policies: 'tuned' is not a policy Cohort has (known: halo, halo+ds, apa-all, "
                   "apa-collections, apa-maximal, hds, rest, dpa, mo)"),
    ("halo,apa-all", "--policies apa-all needs a profile: give --train 'TRAIN ARGS' (one training run "
                     "feeds every plan policy); --plan is halo's plan only"),
    ("dpa,dpa", "--policies names a policy twice"),
    (",", "--policies needs at least one policy"),
])
def test_bad_policies_refused(tmp_path, toy_plan, policies, message):
    r = run([COHORT, "bench", "--policies", policies, "--plan", toy_plan, "-o", tmp_path / "x", "--", TOY])
    assert r.returncode != 0 and message in r.stderr.decode()
    assert b"Traceback" not in r.stderr and not (tmp_path / "x").exists()


def test_plan_policies_side_by_side_from_one_profile(tmp_path):
    """--train with plan policies: one profile, a plan per policy, each a
    configuration in front of the first allocator with its own statistics,
    and a column of the report."""
    out = tmp_path / "res"
    policies = ["halo", "halo+ds", "apa-all", "apa-collections", "apa-maximal", "hds", "dpa"]
    r = run([COHORT, "bench", "--trials", "1", "--warmup", "0", "--allocators", "glibc", "--no-random",
             "--policies", ",".join(policies), "--train", "2000", "--cachegrind-args", "1000",
             "-o", out, "--", PROGRAMS / "dsgraph", "3000"])
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((out / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    assert res["parameters"]["order"] == ["glibc", "cohort+glibc", *policies[1:], "all"]
    assert set(res["plans"]) == set(policies[1:6])
    assert "hot_streams" in json.loads((out / "profile.json").read_text())   # hds asked for the trace
    assert "--policy hds from profile.json" in (out / "plan-hds").read_text()
    for p in policies[1:5]:
        plan = out / f"plan-{p}"
        assert f"--policy {p} from profile.json" in plan.read_text() and res["plans"][p] == str(plan.resolve())
        stats = json.loads((out / "stats" / f"{p}.json").read_text())
        assert stats["plan_active"] and len(stats["groups"]) >= 2    # the tree, the list cells (and rest)
        assert "d1_ratio" in res["ratios"][p] and res["ratios"][p]["vs"] == "glibc"
    assert "apa-collections: 2 groups (g0-new_tree, g1-new_cell)" in r.stderr.decode()
    rep = tmp_path / "report.md"
    r = run([COHORT, "report", out, "-o", rep])
    assert r.returncode == 0, r.stderr.decode()
    assert "| halo+ds (time, D1) | apa-all (time, D1) | apa-collections (time, D1) |" in rep.read_text()


def test_bench_validates_its_plan_on_further_training_runs(tmp_path):
    """Several --train runs, as cohort optimize takes them: the plan is made
    from the first and validated on the others, whose profiles are kept
    (profile-2.json, ...) and named in results.json; a validation run that
    fails is left out with a warning, and the bench goes on. Each run reads
    its own --train-stdin; too few of those is an error before anything runs."""
    out = tmp_path / "res"
    (tmp_path / "in.txt").write_text("x\n")
    quick = ["--trials", "1", "--warmup", "0", "--allocators", "glibc", "--no-random", "--no-all"]
    r = run([COHORT, "bench", *quick, "--train", "2000", "--train", "3000",
             "--train-stdin", "/dev/null", "--train-stdin", tmp_path / "in.txt",
             "-o", out, "--", PROGRAMS / "dsgraph", "3000"])
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((out / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    prog = str(PROGRAMS / "dsgraph")
    assert res["commands"]["train"] == [prog, "2000"]
    assert res["commands"]["validate"] == [[prog, "3000"]]
    assert res["stdin"]["validate"][0]["path"] == str(tmp_path / "in.txt")
    assert (out / "profile-2.json").is_file()
    assert f"on {prog} 3000: transfer score" in (out / "explain.txt").read_text()
    r = run([COHORT, "bench", *quick, "--train", "-c true", "--train", "-c 'exit 4'", "-o", tmp_path / "z",
             "--", "sh", "-c", "true"])
    assert r.returncode == 0, r.stderr.decode()
    assert "cohort bench: WARNING: the validation run sh -c exit 4 failed (exit status 4); its profile is " \
           "left out" in r.stderr.decode()
    r = run([COHORT, "bench", *quick, "--train", "2000", "--train", "3000", "--train-stdin", "/dev/null",
             "-o", tmp_path / "y", "--", PROGRAMS / "dsgraph", "3000"])
    assert r.returncode != 0 and "--train-stdin given 1 times for 2 --train runs" in r.stderr.decode()
    assert not (tmp_path / "y").exists()


def test_plan_policies_need_the_training_run(tmp_path):
    r = run([COHORT, "bench", "--policies", "apa-maximal", "-o", tmp_path / "x", "--", TOY])
    assert r.returncode != 0 and "--policies apa-maximal needs a profile: give --train" in r.stderr.decode()
    r = run([COHORT, "bench", "--policies", "dpa", "--train", "ok", "-o", tmp_path / "x", "--", TOY])
    assert r.returncode != 0 and "--train feeds the plan policies" in r.stderr.decode()
    assert not (tmp_path / "x").exists()


def test_plan_without_halo_refused(tmp_path, toy_plan):
    r = run([COHORT, "bench", "--policies", "dpa", "--plan", toy_plan, "-o", tmp_path / "x", "--", TOY])
    assert r.returncode != 0 and b"--policies leaves out" in r.stderr


@pytest.mark.parametrize("sweep, message", [
    ("affinity-distance", "--sweep 'affinity-distance': give PARAM=V1,V2,... with PARAM one of affinity-distance"),
    ("colour=1,2", "--sweep 'colour=1,2': give PARAM=V1,V2,..."),
    ("affinity-distance=64", "--sweep affinity-distance: give at least two values, comma-separated"),
    ("affinity-distance=32,,64", "--sweep affinity-distance: give at least two values"),
    ("affinity-distance=32,sixty", "--sweep affinity-distance: 'sixty' is not an integer"),
    ("tolerance=0.1,nan", "--sweep tolerance: nan is out of range (0.0 to 1.0)"),
    ("affinity-distance=0,64", "--sweep affinity-distance: 0 is out of range (1 to 1048576)"),
    ("max-members=4,4", "--sweep max-members: a value is given twice"),
    ("rest-shape=one,both", "--sweep rest-shape: 'both' is not one of one, classes"),
    ("rest-shape=one,one", "--sweep rest-shape: a value is given twice"),
])
def test_bad_sweeps_refused_in_one_line(tmp_path, sweep, message):
    r = run([COHORT, "bench", "--sweep", sweep, "--train", "ok", "-o", tmp_path / "x", "--", TOY])
    err = r.stderr.decode()
    assert r.returncode != 0 and message in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and not (tmp_path / "x").exists()


def test_a_sweep_needs_the_training_run(tmp_path, toy_plan):
    r = run([COHORT, "bench", "--sweep", "tolerance=0.05,0.2", "--plan", toy_plan, "-o", tmp_path / "x", "--", TOY])
    assert r.returncode != 0 and "--sweep tolerance plans from the training run: give --train" in r.stderr.decode()
    assert not (tmp_path / "x").exists()


def test_affinity_distance_sweep_profiles_each_value_and_draws_figure_12(tmp_path):
    out = tmp_path / "res"
    r = run([COHORT, "bench", "--trials", "1", "--warmup", "0", "--allocators", "glibc", "--no-random",
             "--no-all", "--sweep", "affinity-distance=32,256", "--train", "2000", "--cachegrind-args", "1000",
             "-o", out, "--", PROGRAMS / "dsgraph", "3000"])
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((out / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    names = ["halo@affinity-distance=32", "halo@affinity-distance=256"]
    assert res["sweep"]["parameter"] == "affinity-distance" and res["sweep"]["values"] == [32, 256]
    assert res["sweep"]["configs"] == names and res["parameters"]["order"] == ["glibc", "cohort+glibc", *names]
    for v, n in zip((32, 256), names):
        prof = json.loads((out / f"profile-affinity-distance={v}.json").read_text())
        assert prof["parameters"]["affinity_distance"] == v
        assert (out / f"plan-{n}").exists() and "d1_ratio" in res["ratios"][n]
        assert (out / "stats" / f"{n}.json").exists()
    rep = tmp_path / "report.md"
    r = run([COHORT, "report", out, "-o", rep])
    assert r.returncode == 0, r.stderr.decode()
    text = rep.read_text()
    assert "## Figure 12: affinity-distance sweep" in text and "| dsgraph | 32 | " in text
    assert (tmp_path / "report-fig12-affinity-distance.png").stat().st_size > 1000
    # a file of the user's where a sweep would write is refused before anything runs
    mine = out / "profile-affinity-distance=32.json"
    mine.write_text("my notes\n")
    r = run([COHORT, "bench", "--trials", "1", "--warmup", "0", "--allocators", "glibc", "--no-random",
             "--no-all", "--sweep", "affinity-distance=32,64", "--train", "2000", "-o", out, "--",
             PROGRAMS / "dsgraph", "3000"])
    assert r.returncode != 0 and f"{mine} exists and is not a profile that cohort wrote" in r.stderr.decode()
    assert mine.read_text() == "my notes\n"


def test_also_runs_more_plans_under_their_names(tmp_path, toy_plan):
    out = tmp_path / "res"
    r = run([COHORT, "bench", "--trials", "1", "--warmup", "0", "--allocators", "glibc", "--no-random", "--no-all",
             "--plan", toy_plan, "--also", f"again={toy_plan}", "-o", out, "--", TOY, "ok"])
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((out / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    assert res["parameters"]["order"] == ["glibc", "cohort+glibc", "again"]
    assert res["ratios"]["again"]["vs"] == "glibc" and (out / "stats" / "again.json").exists()


@pytest.mark.parametrize("also, message", [
    ("again", "--also 'again': give NAME=PLAN"),
    ("=x.plan", "--also '=x.plan': give NAME=PLAN"),
    ("glibc={plan}", "a configuration named 'glibc' cannot be added"),
    ("gone={missing}", "missing.plan: no such file"),
])
def test_bad_also_refused_in_one_line(tmp_path, toy_plan, also, message):
    also = also.format(plan=toy_plan, missing=tmp_path / "missing.plan")
    r = run([COHORT, "bench", "--plan", toy_plan, "--also", also, "-o", tmp_path / "x", "--", TOY])
    err = r.stderr.decode()
    assert r.returncode != 0 and message in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not (tmp_path / "x").exists()


def test_an_also_plan_of_another_program_is_refused_before_the_training_run(tmp_path, toy_plan):
    r = run([COHORT, "bench", "--train", "2000", "--also", f"toy={toy_plan}", "-o", tmp_path / "x",
             "--", PROGRAMS / "dsgraph", "3000"])
    err = r.stderr.decode()
    assert r.returncode != 0 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "x").exists()


def test_ignore_output_leaves_a_programs_own_timings_out_of_the_check(tmp_path, toy_plan):
    """A program that prints its own run time mismatches on every run, and
    the reason says where its output first differs; with --ignore-output
    its timing lines are left out of the digest and every run is ok. A
    real difference still shows (the toy's mismatch mode under Cohort)."""
    base = [COHORT, "bench", "--trials", "1", "--warmup", "0", "--allocators", "glibc", "--no-random", "--no-all",
            "--plan", toy_plan]
    r = run(base + ["-o", tmp_path / "plain", "--", TOY, "timed"])
    res = json.loads((tmp_path / "plain" / "results.json").read_text())
    bad = [t for t in res["trials"] if t["status"] == "mismatch"]
    assert bad and "(line 1: 'took " in bad[0]["reason"] and "the reference's 'took " in bad[0]["reason"]
    r = run(base + ["--ignore-output", "^took [0-9]+ ns$", "-o", tmp_path / "kept", "--", TOY, "timed"])
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((tmp_path / "kept" / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    assert all(t["status"] == "ok" for t in res["trials"]) and res["parameters"]["ignore_output"] == "^took [0-9]+ ns$"
    assert all("stdout" not in t for t in res["trials"])
    r = run(base + ["--ignore-output", "^took", "-o", tmp_path / "wrong", "--", TOY, "mismatch"])
    res = json.loads((tmp_path / "wrong" / "results.json").read_text())
    bad = [t for t in res["trials"] if t["status"] == "mismatch"]
    assert bad and "line 1: 'checksum " in bad[0]["reason"]
    r = run(base + ["--ignore-output", "took (", "-o", tmp_path / "x", "--", TOY, "timed"])
    err = r.stderr.decode()
    assert r.returncode != 0 and len(err.strip().splitlines()) == 1 and "is not a regular expression" in err
    assert not (tmp_path / "x").exists()


def first_node(tmp_path, env):
    """Where the `lines` program's first node landed (its log's first line)."""
    log = tmp_path / "lines.log"
    r = run([PROGRAMS / "lines", log], env=env)
    assert r.returncode == 0, r.stderr.decode()
    return int(log.read_text().split("\n")[0].split()[3], 16)


def test_the_shift_library_moves_the_heap_within_its_page(tmp_path):
    import os
    shim = ROOT / "build" / "tools" / "libcohort-shift.so"
    plain = dict(os.environ)
    plain.pop("LD_PRELOAD", None)
    moved = dict(plain, LD_PRELOAD=str(shim), COHORT_SHIFT_HEAP="1040")
    # A page-granular start (ASLR) leaves the offset within the page alone;
    # the kept request moves it.
    assert first_node(tmp_path, plain) % 4096 == first_node(tmp_path, plain) % 4096
    assert first_node(tmp_path, moved) % 4096 != first_node(tmp_path, plain) % 4096
    # Nonsense asks for nothing, and the program runs as before.
    odd = dict(plain, LD_PRELOAD=str(shim), COHORT_SHIFT_HEAP="lots")
    assert first_node(tmp_path, odd) % 4096 == first_node(tmp_path, plain) % 4096


def test_bench_layout_runs_give_the_baselines_band(tmp_path, toy_plan):
    r, out = bench(tmp_path, toy_plan, "ok", "--allocators", "glibc", "--no-random", "--no-all",
                   "--cachegrind-args", "ok", "--layout-runs", "2")
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((out / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    assert res["parameters"]["layout_runs"] == 2
    base = res["cachegrind"]["glibc"]
    moved = base["layouts"]
    assert len(moved) == 2
    assert len({m["heap_shift"] for m in moved}) == 2 and len({m["stack_pad"] for m in moved}) == 2
    # the same work, counted again: instructions hardly move
    assert all(abs(m["I_refs"] - base["I_refs"]) < 0.01 * base["I_refs"] for m in moved)
    low, high = res["ratios"]["cohort+glibc"]["d1_layout_band"]
    d1 = [base["D1_misses"], *(m["D1_misses"] for m in moved)]
    assert (low, high) == (min(d1) / base["D1_misses"], max(d1) / base["D1_misses"])
    assert low <= 1.0 <= high
    assert "layout-runs" not in str(res["problems"])
    assert "layout noise: glibc's own D1 misses span" in r.stdout.decode()
    assert "over 2 moved layouts" in r.stdout.decode()
    assert "cachegrind glibc, heap +" in r.stderr.decode()
    # the Cohort configuration itself is not moved: its counts are its own run's
    assert "layouts" not in res["cachegrind"]["cohort+glibc"]
    rep = tmp_path / "report.md"
    r = run([COHORT, "report", out, "-o", rep])
    assert r.returncode == 0, r.stderr.decode()
    section = rep.read_text().split("## Layout noise")[1]
    assert f"| benchtoy | glibc | 2 | {low:.3f}-{high:.3f} | " in section


def test_bench_layout_runs_need_cachegrind_and_a_sane_count(tmp_path, toy_plan):
    r = run([COHORT, "bench", "--plan", toy_plan, "--layout-runs", "2", "-o", tmp_path / "x", "--", TOY, "ok"])
    assert r.returncode == 2
    assert b"--layout-runs moves the cachegrind runs' layout: it needs --cachegrind-args" in r.stderr
    assert b"Traceback" not in r.stderr and not (tmp_path / "x").exists()
    for n in ("-1", "17"):
        r = run([COHORT, "bench", "--plan", toy_plan, "--layout-runs", n, "--cachegrind-args", "ok",
                 "-o", tmp_path / "x", "--", TOY, "ok"])
        assert r.returncode != 0 and b"--layout-runs must be 0 to 16" in r.stderr
        assert not (tmp_path / "x").exists()


