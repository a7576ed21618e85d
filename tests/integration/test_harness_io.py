"""Standard input and output files in the harness: profile/optimize --stdin,
bench --stdin/--train-stdin/--cachegrind-stdin/--output-file, on stdinout
(tests/programs/stdinout.c: reads stdin to the end, one malloc per line,
prints a digest of what it read and writes it to a file too)."""

import hashlib
import json
import os
import subprocess

import jsonschema
import pytest

from conftest import COHORT, PROGRAMS, ROOT, run
from cohort.measure.runs import OutputFile
from cohort.errors import CohortError

PROG = PROGRAMS / "stdinout"
SCHEMA = json.loads((ROOT / "docs" / "results.schema.json").read_text())
QUICK = ["--allocators", "glibc", "--no-random", "--no-all"]


def sha(data):
    return hashlib.sha256(data).hexdigest()


def lines(n, salt=""):
    return "".join(f"{salt}line {i}\n" for i in range(n)).encode()


def cohort(*argv, stdin=subprocess.DEVNULL, timeout=120):
    return run([COHORT, *argv], stdin=stdin, timeout=timeout)


def direct(data, out):
    """The program run by hand on data: (stdout, the file it wrote)."""
    r = subprocess.run([str(PROG), str(out)], input=data, capture_output=True, check=True)
    written = out.read_bytes()
    out.unlink()
    return r.stdout, written


def allocations(profile_json):
    return json.loads(profile_json.read_text())["totals"]["allocations"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    (d / "small.txt").write_bytes(lines(10))
    (d / "big.txt").write_bytes(lines(3000, "big "))
    return d


@pytest.fixture(scope="module")
def plan(tmp_path_factory, inputs):
    """optimize --stdin: its profile sees the file's 10 lines."""
    d = tmp_path_factory.mktemp("opt")
    r = cohort("optimize", "--stdin", inputs / "small.txt", "-o", d / "o", "--", PROG, "-")
    assert r.returncode == 0, r.stderr.decode()
    return d / "o" / "plan"


def test_profile_and_optimize_read_the_given_stdin(tmp_path, inputs, plan):
    r = cohort("profile", "--stdin", inputs / "big.txt", "-o", tmp_path / "big.json", "--", PROG, "-")
    assert r.returncode == 0, r.stderr.decode()
    big = allocations(tmp_path / "big.json")
    small = allocations(plan.parent / "profile.json")     # optimize --stdin small.txt
    assert big - small == 3000 - 10
    # Without --stdin the target reads cohort's own standard input, as before.
    r = run([COHORT, "profile", "-o", tmp_path / "own.json", "--", PROG, "-"],
            input=(inputs / "big.txt").read_bytes())
    assert r.returncode == 0, r.stderr.decode()
    assert allocations(tmp_path / "own.json") == big


def test_bench_gives_every_run_a_fresh_stream_and_checks_the_output_file(tmp_path, inputs):
    out = tmp_path / "result.txt"
    data = (inputs / "big.txt").read_bytes()
    want_stdout, want_file = direct(data, tmp_path / "by-hand.txt")
    res_dir = tmp_path / "res"
    r = cohort("bench", "--trials", "2", "--warmup", "1", *QUICK, "--stdin", inputs / "big.txt",
               "--train", str(out), "--train-stdin", inputs / "small.txt", "--cachegrind-args", str(out),
               "--output-file", out, "-o", res_dir, "--", PROG, out)
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((res_dir / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    assert len(res["trials"]) == 6 and all(t["status"] == "ok" for t in res["trials"])
    # Every trial, warm-up included, read the whole file from its start.
    assert {t["output_sha256"] for t in res["trials"]} == {sha(want_stdout)}
    assert {t["output_file_sha256"] for t in res["trials"]} == {sha(want_file)}
    assert res["output_file"] == {"path": str(out), "reference_sha256": sha(want_file)}
    # The profiling run read --train-stdin; cachegrind defaults to --stdin's file.
    assert allocations(res_dir / "profile.json") < 100
    assert res["stdin"]["ref"] == {"path": str(inputs / "big.txt"), "bytes": len(data), "sha256": sha(data)}
    assert res["stdin"]["train"]["path"] == str(inputs / "small.txt")
    assert res["stdin"]["cachegrind"] == res["stdin"]["ref"]
    for c in res["cachegrind"].values():
        assert "error" not in c
        assert (c["output_sha256"], c["output_file_sha256"]) == (sha(want_stdout), sha(want_file))
    assert not os.path.lexists(out)     # the bench leaves no output file behind


def test_bench_reads_dev_null_by_default_and_flags_an_output_file_mismatch(tmp_path):
    # cohort's own stdin is a pipe nobody closes: a run that inherited it
    # would wait forever. Under libcohort the program's file (not its
    # stdout) gets one more line ("vary"). The plan trained on /dev/null has
    # no group, so cohort+glibc runs without libcohort and agrees; the
    # one-pool control runs under it and differs.
    out = tmp_path / "result.txt"
    want_stdout, want_file = direct(b"", tmp_path / "by-hand.txt")
    rfd, wfd = os.pipe()
    try:
        r = cohort("bench", "--trials", "1", "--warmup", "0", "--allocators", "glibc", "--no-random",
                   "--train", str(out),
                   "--cachegrind-args", f"{out} vary", "--output-file", out, "-o", tmp_path / "res",
                   "--", PROG, out, "vary", stdin=rfd, timeout=60)
    finally:
        os.close(rfd)
        os.close(wfd)
    assert r.returncode == 1, r.stderr.decode()
    res = json.loads((tmp_path / "res" / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    assert {k: v["path"] for k, v in res["stdin"].items()} == \
        {"ref": "/dev/null", "train": "/dev/null", "cachegrind": "/dev/null"}
    base, planned, mine = res["trials"]
    assert base["status"] == "ok" and base["output_file_sha256"] == sha(want_file)
    assert planned["status"] == "ok" and planned["output_file_sha256"] == base["output_file_sha256"]
    assert mine["status"] == "mismatch" and mine["reason"] == "output file differs from the reference run's"
    assert mine["output_sha256"] == base["output_sha256"] == sha(want_stdout)
    assert mine["output_file_sha256"] != base["output_file_sha256"]
    assert res["problems"][0] == "all round 0: mismatch (output file differs from the reference run's)"
    assert "output file differs" in res["cachegrind"]["all"]["error"]
    assert "error" not in res["cachegrind"]["glibc"]
    assert b"MISMATCH" in r.stderr and b"PROBLEM" in r.stdout
    assert not os.path.lexists(out)


def test_a_missing_output_file_is_a_failed_trial(tmp_path, plan):
    out = tmp_path / "result.txt"
    r = cohort("bench", "--trials", "1", "--warmup", "0", *QUICK, "--plan", plan, "--output-file", out,
               "-o", tmp_path / "res", "--", PROG, out, "nofile")
    assert r.returncode == 1
    res = json.loads((tmp_path / "res" / "results.json").read_text())
    jsonschema.validate(res, SCHEMA)
    base, mine = res["trials"]
    assert base["status"] == "ok"
    assert mine["status"] == "failed" and mine["exit"] == 0 and mine["output_file_sha256"] is None
    assert mine["reason"] == f"wrote no output file {out}"
    assert res["summary"]["cohort+glibc"]["ok_trials"] == 0 and "cohort+glibc" not in res["ratios"]
    assert f"FAILED (wrote no output file {out})".encode() in r.stderr


def test_an_existing_output_file_is_kept_without_force(tmp_path, plan):
    out = tmp_path / "mine.txt"
    out.write_text("keep")
    argv = ["bench", "--trials", "1", "--warmup", "0", *QUICK, "--plan", plan, "--output-file", out,
            "-o", tmp_path / "res", "--", PROG, out]
    r = cohort(*argv)
    assert r.returncode == 2 and b"--force" in r.stderr and r.stderr.count(b"\n") == 1
    assert out.read_text() == "keep" and not (tmp_path / "res").exists()
    r = cohort(*argv[:1], "--force", *argv[1:])
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads((tmp_path / "res" / "results.json").read_text())
    assert res["output_file"]["path"] == str(out) and all(t["status"] == "ok" for t in res["trials"])
    assert not out.exists()


def test_output_file_guard_deletes_only_what_a_run_wrote(tmp_path):
    path = tmp_path / "out"
    f = OutputFile(path)
    f.clear()
    path.write_text("run 1")                 # what a run writes
    assert f.collect() == (sha(b"run 1"), None)
    f.clear()                                # ours: removed
    assert not path.exists()
    path.write_text("run 2")
    f.collect()
    os.unlink(path)
    path.write_text("someone else's")        # replaced between runs
    with pytest.raises(CohortError, match="stopping without deleting it"):
        f.clear()
    f.done()
    assert path.read_text() == "someone else's"
    g = OutputFile(path)                     # there before the first run, no --force
    with pytest.raises(CohortError):
        g.clear()
    assert path.exists()
    assert OutputFile(tmp_path / "none").collect() == (None, f"wrote no output file {tmp_path / 'none'}")


def test_bad_inputs_are_refused_before_anything_runs(tmp_path, inputs, plan):
    missing = tmp_path / "missing.txt"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    res = tmp_path / "res"
    bench = ["bench", "--trials", "1", *QUICK, "--plan", plan, "-o", res]
    cases = [
        (["profile", "--stdin", missing, "-o", tmp_path / "p.json"], f"--stdin {missing}: no such file"),
        (["profile", "--stdin", tmp_path, "-o", tmp_path / "p.json"], f"--stdin {tmp_path}: is a directory"),
        (["optimize", "--stdin", missing, "-o", res], f"--stdin {missing}: no such file"),
        ([*bench, "--stdin", missing], f"--stdin {missing}: no such file"),
        ([*bench, "--stdin", fifo], f"--stdin {fifo}: is a pipe or socket"),
        (["bench", "--train", "-", "--train-stdin", missing, "-o", res], f"--train-stdin {missing}: no such file"),
        ([*bench, "--cachegrind-args", "-", "--cachegrind-stdin", missing],
         f"--cachegrind-stdin {missing}: no such file"),
        ([*bench, "--train-stdin", inputs / "small.txt"], "--train-stdin is the input of the profiling run"),
        ([*bench, "--cachegrind-stdin", inputs / "small.txt"], "it needs --cachegrind-args"),
        ([*bench, "--output-file", tmp_path / "nodir" / "out"],
         f"--output-file {tmp_path / 'nodir' / 'out'}: no directory {tmp_path / 'nodir'}"),
        ([*bench, "--output-file", tmp_path], f"--output-file {tmp_path}: is a directory"),
        ([*bench, "--force", "--output-file", fifo], "is not a regular file"),
        ([*bench, "--force", "--stdin", inputs / "small.txt", "--output-file", inputs / "small.txt"],
         "is also the --stdin file"),
    ]
    if os.geteuid() != 0:       # root reads everything
        locked = tmp_path / "locked.txt"
        locked.write_text("x")
        locked.chmod(0)
        cases.append(([*bench, "--stdin", locked], f"--stdin {locked}: cannot read it (Permission denied)"))
    for argv, message in cases:
        r = cohort(*argv, "--", PROG, "-")
        err = r.stderr.decode()
        assert r.returncode == 2 and err.startswith("cohort: ") and message in err, (argv, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert not res.exists() and not (tmp_path / "p.json").exists(), argv
    assert (inputs / "small.txt").read_bytes() == lines(10)
