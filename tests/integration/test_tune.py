"""`cohort tune`: every candidate made and screened, the default plan and
the best few confirmed by timing, the fastest kept, the evidence written;
and its refusals."""

import json

from conftest import COHORT, PROGRAMS, ROOT, run
from cohort.measure.tune import GRID, candidates

DSG = PROGRAMS / "dsgraph"


def test_tune_keeps_the_fastest_confirmed_plan_with_its_evidence(tmp_path):
    out = tmp_path / "t"
    r = run([COHORT, "tune", "-o", out, "--trials", "1", "--keep", "2", "--ref", "6000", "--", DSG, "2000"])
    err = r.stderr.decode()
    assert r.returncode == 0, err
    # progress while it runs
    assert "cohort tune: profiling" in err and "cohort tune: screening 1/" in err and "cohort tune: confirming halo" in err
    names = [n for n, _, _ in candidates()]
    assert len(names) == 7 + sum(len(v) for v in GRID.values())   # the plan policies, rest among them
    for n in names:   # every candidate made (hds from the trace of the one training profile)
        assert (out / f"plan-{n}").read_text().startswith("cohort-plan ")
    for v in GRID["affinity-distance"]:
        assert json.loads((out / f"profile-affinity-distance={v}.json").read_text())["parameters"][
            "affinity_distance"] == v
    assert "hot_streams" in json.loads((out / "profile.json").read_text())
    text = (out / "tune.md").read_text()
    best = text.split("Kept **")[1].split("**")[0]
    assert best in [*names, "none"] and (out / "plan").read_text() == (out / f"plan-{best}").read_text()
    assert (f"cohort tune: kept {best} (" if best != "none" else "glibc alone was fastest") in r.stdout.decode()
    # the default plan is always confirmed, beside glibc alone; the kept one
    # is the lowest median of those timed
    res = json.loads((out / "confirm" / "results.json").read_text())
    timed = {"halo": res["summary"]["cohort+glibc"]["wall_median_s"], "none": res["summary"]["glibc"]["wall_median_s"]}
    timed.update({n: res["summary"][n]["wall_median_s"] for n in res["extra_plans"]})
    assert len(timed) <= 4 and min(timed.values()) == timed[best]
    assert "| none |" in text or "| **none** |" in text
    for heading in ("## Decision", "## Screening: cachegrind on the training input", "## Confirmation"):
        assert heading in text
    # candidates with the same plan are screened once and named together
    assert "same plan as" in text


def test_tune_refuses_bad_input_in_one_line_and_keeps_the_users_files(tmp_path):
    out = tmp_path / "t"
    out.mkdir()
    mine = out / "plan"
    mine.write_text("my plan\n")
    r = run([COHORT, "tune", "-o", out, "--", DSG, "2000"])
    err = r.stderr.decode()
    assert r.returncode != 0 and f"{mine} exists and is not a plan that cohort wrote" in err
    assert mine.read_text() == "my plan\n" and len(err.strip().splitlines()) == 1
    for args, message in [(["--keep", "0"], "--trials and --keep must be at least 1"),
                          (["--trials", "0"], "--trials and --keep must be at least 1")]:
        r = run([COHORT, "tune", *args, "-o", tmp_path / "u", "--", DSG, "2000"])
        assert r.returncode != 0 and message in r.stderr.decode() and b"Traceback" not in r.stderr
    r = run([COHORT, "tune", "-o", tmp_path / "v", "--", tmp_path / "no-such-program"])
    assert r.returncode != 0 and b"Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "u").exists() and not (tmp_path / "v").exists()


def test_the_allocator_alone_is_a_plan_with_no_group_that_runs_without_the_runtime(tmp_path):
    """What tune keeps when the allocator alone was fastest: the default
    plan's program, no group; the runtime's own parser takes it, and
    cohort run leaves libcohort out under it."""
    from cohort.measure.tune import alone_plan
    opt = tmp_path / "opt"
    r = run([COHORT, "optimize", "-o", opt, "--", DSG, "2000"])
    assert r.returncode == 0, r.stderr.decode()
    alone = tmp_path / "plan-none"
    alone_plan(opt / "plan", alone, force=False)
    text = alone.read_text()
    modules = [ln for ln in (opt / "plan").read_text().splitlines() if ln.startswith("module ")]
    assert modules and all(m in text.splitlines() for m in modules)
    assert not [ln for ln in text.splitlines() if ln.split()[:1] in (["group"], ["site"], ["rest"], ["path"])]
    r = run([ROOT / "build" / "tools" / "cohort-plan-check", alone])
    assert r.returncode == 0, r.stderr.decode()
    from cohort.measure.runner import environment
    env = environment(plan=alone, base={"PATH": "/usr/bin"})
    assert "libcohort" not in env.get("LD_PRELOAD", "") and "COHORT_PLAN" not in env
    r = run([DSG, "2000"], env=env)
    assert r.returncode == 0, r.stderr.decode()


def test_tune_reads_its_inputs_from_stdin_files_in_front_of_jemalloc(tmp_path):
    prog = PROGRAMS / "stdinout"
    train, ref = tmp_path / "train.txt", tmp_path / "ref.txt"
    train.write_text("".join(f"line {i}\n" for i in range(3000)))
    ref.write_text("".join(f"other {i}\n" for i in range(9000)))
    out = tmp_path / "t"
    r = run([COHORT, "tune", "-o", out, "--trials", "1", "--keep", "1", "--allocator", "jemalloc",
             "--stdin", train, "--ref-stdin", ref, "--", prog, "-"])
    assert r.returncode == 0, r.stderr.decode()
    # the training run read its file: one allocation per line
    assert json.loads((out / "profile.json").read_text())["totals"]["allocations"] >= 3000
    res = json.loads((out / "confirm" / "results.json").read_text())
    assert res["stdin"]["ref"]["path"] == str(ref) and res["parameters"]["allocators"] == ["jemalloc"]
    assert "jemalloc" in res["summary"] and "cohort+jemalloc" in res["summary"]
    text = (out / "tune.md").read_text()
    assert "every run in front of jemalloc" in text and "| candidate | score vs jemalloc |" in text
    # bad inputs: one line each, nothing made
    for args, message in [(["--stdin", tmp_path / "nope"], "--stdin"),
                          (["--ref-stdin", tmp_path], "--ref-stdin")]:
        r = run([COHORT, "tune", *args, "-o", tmp_path / "u", "--", prog, "-"])
        err = r.stderr.decode()
        assert r.returncode != 0 and message in err and len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err and not (tmp_path / "u").exists()


def test_tune_keeps_no_group_when_the_allocator_alone_is_fastest(tmp_path):
    """benchtoy slow takes 50 ms longer under libcohort, whatever the plan:
    the allocator alone wins the timing, and tune keeps a plan with no
    group, says so, and explains it in tune.md."""
    toy = PROGRAMS / "benchtoy"
    out = tmp_path / "t"
    r = run([COHORT, "tune", "-o", out, "--trials", "3", "--keep", "1", "--", toy, "slow"])
    assert r.returncode == 0, r.stderr.decode()
    assert "cohort tune: glibc alone was fastest: Cohort does not pay on this program in front of it" in \
        r.stdout.decode()
    plan = (out / "plan").read_text()
    assert plan == (out / "plan-none").read_text()
    assert "# made by cohort tune: the allocator alone was fastest; no group" in plan
    assert not [ln for ln in plan.splitlines() if ln.split()[:1] in (["group"], ["rest"], ["site"])]
    text = (out / "tune.md").read_text()
    assert "Kept **none**: glibc alone was the fastest on the reference input" in text
    assert "| **none** |" in text
    from cohort.measure.runner import environment
    assert "libcohort" not in environment(plan=out / "plan", base={"PATH": "/usr/bin"}).get("LD_PRELOAD", "")


def test_tune_without_stdin_reads_dev_null_not_its_own_input(tmp_path):
    """Cohort's own standard input is a pipe nobody closes: a profiling run
    that inherited it would wait forever. Every run of tune reads /dev/null
    unless --stdin names a file."""
    import os
    rfd, wfd = os.pipe()
    try:
        r = run([COHORT, "tune", "-o", tmp_path / "t", "--trials", "1", "--keep", "1", "--",
                 PROGRAMS / "stdinout", "-"], stdin=rfd, timeout=300)
    finally:
        os.close(rfd)
        os.close(wfd)
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads((tmp_path / "t" / "profile.json").read_text())["totals"]["allocations"] < 100
