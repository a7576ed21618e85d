"""Plans that transfer between inputs (issue 17): the CLI that profiles
several training runs, plans from the first and validates on the others.
The replay itself, on synthetic profiles, is in
tests/fast/test_validation_runs.py."""

import json

from conftest import BUILD, COHORT, run
from cohort.formats.planfile import PLAN_VERSION


XFORM = BUILD / "workloads" / "xform"


def test_optimize_with_training_runs(tmp_path):
    """cohort optimize --train: every run profiled, the plan made from the
    first and validated on the others; a run that fails is reported with its
    exit status and left out; explain --validate shows the transfer."""
    out = tmp_path / "o"
    r = run([COHORT, "optimize", "-o", out, "--train", "900 3 2 5", "--train", "1",   # usage: exit 2
             "--", XFORM, "600", "3", "1", "1"])
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    assert "WARNING: the training run" in err and "failed (exit status 2); its profile is left out" in err
    assert (out / "profile-2.json").exists() and (out / "profile-3.json").exists()
    assert b"Validation runs" in r.stdout and b"transfer score" in r.stdout
    assert "validated on " + str(out / "profile-2.json") in err
    assert (out / "plan").read_text().startswith(f"cohort-plan {PLAN_VERSION}\n")
    r = run([COHORT, "explain", out / "profile.json", out / "plan", "--graph", "-",
             "--validate", out / "profile-2.json"])
    assert r.returncode == 0 and b"Transfer to other inputs" in r.stdout and b"transfer score" in r.stdout
    # a profile of another program: one line, non-zero
    other = BUILD / "workloads" / "bst"
    r = run([COHORT, "profile", "-o", tmp_path / "bst.json", "--", other, "200", "300"])
    assert r.returncode == 0
    r = run([COHORT, "plan", out / "profile.json", "-o", tmp_path / "p", "--validate", tmp_path / "bst.json"])
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1 and b"is of another program (bst)" in r.stderr
    assert not (tmp_path / "p").exists()
    # --train-stdin must pair with --train
    r = run([COHORT, "optimize", "-o", tmp_path / "q", "--train", "1 1 1 1", "--train-stdin", "/dev/null",
             "--train-stdin", "/dev/null", "--", XFORM, "600", "3", "1", "1"])
    assert r.returncode != 0 and b"--train-stdin given 2 times for 1 --train runs" in r.stderr


def test_optimize_merges_its_training_runs(tmp_path):
    """cohort optimize --train ... --merge: the plan is made from the merged
    profile of every run (profile-merged.json), which explain names."""
    out = tmp_path / "o"
    r = run([COHORT, "optimize", "-o", out, "--train", "900 3 2 5", "--merge", "--", XFORM, "600", "3", "1", "1"])
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    assert "the 2 training runs merged" in err and str(out / "profile-merged.json") in err
    assert "Profile of: 2 runs merged: " in (out / "explain.txt").read_text()
    merged = json.loads((out / "profile-merged.json").read_text())
    runs = [json.loads((out / n).read_text()) for n in ("profile.json", "profile-2.json")]
    assert merged["totals"]["allocations"] == sum(p["totals"]["allocations"] for p in runs)
    assert [m["argv"][1:] for m in merged["merged"]] == [["600", "3", "1", "1"], ["900", "3", "2", "5"]]
    assert (out / "plan").read_text().startswith(f"cohort-plan {PLAN_VERSION}\n")
