"""`cohort optimize --ref 'ARGS'`: the plan confirmed on a larger input under
cachegrind before it is written (cohort/measure/confirm.py; docs/planner.md,
"Confirmed on a larger input")."""

from conftest import BUILD, COHORT, PROGRAMS, run

WRAPKINDS = BUILD / "workloads" / "wrapkinds"


def optimize(tmp_path, *args, prog=WRAPKINDS, train=("20000", "2")):
    out = tmp_path / "opt"
    r = run([COHORT, "optimize", "-o", out, *args, "--", prog, *train], text=True, timeout=600)
    return r, out


def test_each_group_is_measured_with_and_without_it(tmp_path):
    """HALO's Figure 2 behind a wrapper, trained on 20,000 records and
    confirmed on 60,000 walked four times: the plan, the plan without each
    of its groups, and without its rest pool are each measured against the
    allocator alone; every verdict is reported with its figures, printed
    and kept in explain.txt, and the plan written is the confirmed one."""
    r, out = optimize(tmp_path, "--ref", "60000 4")
    assert r.returncode == 0, r.stderr
    text = (out / "explain.txt").read_text()
    assert "Confirmed on `" in text and "wrapkinds 60000 4` (cachegrind, fixed geometry), in front of glibc" in text
    assert "  the plan (" in text and "score " in text and "D1 misses " in text
    # the confirmation's verdicts, not the planner's (which come before them)
    confirmed = text[text.index("Confirmed on `"):]
    verdicts = [ln for ln in confirmed.splitlines() if ln.startswith("  group ") and (" kept: " in ln or " dropped: " in ln)]
    groups = [ln for ln in (out / "plan").read_text().splitlines() if ln.startswith("group ") and " rest" not in ln]
    # cachegrind's verdicts stand unless the timed rounds (noise, at 8 ms a
    # run) found a plan with no group faster
    timed_out = "the plan keeps no group" in text
    assert len(groups) == (0 if timed_out else sum(" kept: " in v for v in verdicts))
    assert "rest pool kept" in text or "rest pool left out" in text
    if "alone scores better" not in text:   # what cachegrind kept is timed against its fallbacks
        assert "  timed, 5 interleaved rounds (medians, quartiles): plan " in text
        timed = next(ln for ln in text.splitlines() if ln.startswith("  timed, "))
        if "rest pool kept" in text:   # and against its rest pool in the other shape
            assert " plan-one " in timed or " plan-classes " in timed, timed
        assert "the plan is the fastest: kept" in text or "is the fastest: the plan keeps no group" in text or \
            "the plan is kept: nothing is faster beyond noise" in text or "is the fastest: it keeps that shape" in text
        if "is the fastest: it keeps that shape" in text:
            rest = next(ln for ln in (out / "plan").read_text().splitlines() if ln.startswith("rest "))
            assert (rest.split()[-1] == "one") == (" plan-one " in timed), (rest, timed)
    assert "Confirmed on `" in r.stdout


def test_a_ref_run_that_fails_or_differs_leaves_the_plan_unconfirmed(tmp_path):
    """A --ref run that crashes under the plan, or prints other output
    there than under the allocator alone, is one line and exit 2; the plan
    stays, unconfirmed, and the line says where. With --allow-failure it is
    a warning and exit 0."""
    toy = PROGRAMS / "benchtoy"
    for mode, said in (("mismatch", "printed other output under the plan than in front of glibc alone"),
                       ("crash", "failed under the plan")):
        r, out = optimize(tmp_path, "--ref", mode, "--rest", "pool", prog=toy, train=("ok",))
        assert r.returncode == 2, r.stderr
        last = r.stderr.strip().splitlines()[-1]
        assert said in last and "the plan is not confirmed" in last and "written unconfirmed to" in last, last
        assert "Traceback" not in r.stderr
        assert (out / "plan").exists()
        r, out = optimize(tmp_path, "--ref", mode, "--allow-failure", "--force", prog=toy, train=("ok",))
        assert r.returncode == 0, r.stderr
        assert "WARNING" in r.stderr and "(--allow-failure: the unconfirmed plan stays)" in r.stderr


def test_bad_ref_options_are_refused_before_profiling(tmp_path):
    """A --ref-stdin that does not exist, or without --ref, a --ref that is
    not a well-formed argument list, and a negative --ref-trials: one line,
    a non-zero exit, nothing profiled."""
    r, out = optimize(tmp_path, "--ref", "1 2", "--ref-stdin", str(tmp_path / "none"))
    assert r.returncode != 0 and "--ref-stdin" in r.stderr and "Traceback" not in r.stderr
    assert not (out / "profile.json").exists()
    r, out = optimize(tmp_path, "--ref-stdin", str(tmp_path))
    assert r.returncode != 0 and "give --ref too" in r.stderr
    r, out = optimize(tmp_path, "--ref", "'unclosed")
    assert r.returncode != 0 and "--ref" in r.stderr and "Traceback" not in r.stderr
    assert not (out / "profile.json").exists()
    r, out = optimize(tmp_path, "--ref", "1 2", "--ref-trials", "-1")
    assert r.returncode != 0 and "--ref-trials must be 0 or more" in r.stderr
    assert not (out / "profile.json").exists()


def test_bench_confirms_each_allocators_plan_before_timing(tmp_path):
    """`cohort bench --train T --confirm C`: the plan made for each
    allocator is confirmed on C in front of that allocator, as optimize
    --ref confirms, before anything is timed; results.json keeps what each
    confirmation said, explain.txt the first allocator's, and the plans
    timed are the confirmed ones."""
    out = tmp_path / "b"
    r = run([COHORT, "bench", "-o", out, "--trials", "1", "--warmup", "0", "--allocators", "glibc,jemalloc",
             "--no-random", "--no-all", "--train", "20000 2", "--confirm", "60000 4", "--confirm-trials", "0",
             "--", WRAPKINDS, "60000 2"], text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    import json
    res = json.loads((out / "results.json").read_text())
    assert set(res["confirmed"]) == {"glibc", "jemalloc"}
    assert res["commands"]["confirm"][1:] == ["60000", "4"]
    for a, lines in res["confirmed"].items():
        assert lines[0].startswith("Confirmed on `") and f"in front of {a}" in lines[0]
    assert "Confirmed on `" in (out / "explain.txt").read_text()
    for a, plan in (("glibc", out / "plan"), ("jemalloc", out / "plan-for-jemalloc")):
        kept = [ln for ln in res["confirmed"][a] if ln.startswith("  group ") and " kept: " in ln]
        dropped_all = any("keeps no group" in ln for ln in res["confirmed"][a])
        groups = [ln for ln in plan.read_text().splitlines() if ln.startswith("group ") and " rest" not in ln]
        assert len(groups) == (0 if dropped_all else len(kept)), (a, res["confirmed"][a])


def test_bench_confirm_needs_a_plan_to_confirm(tmp_path):
    """--confirm without --train, a --confirm-stdin without --confirm, and a
    negative --confirm-trials: one line, a non-zero exit, nothing run."""
    base = [COHORT, "bench", "-o", tmp_path / "b", "--trials", "1"]
    for extra, said in ((["--policies", "dpa", "--confirm", "1 2"], "--confirm measures the plans"),
                        (["--train", "1 1", "--confirm-stdin", str(tmp_path)], "give --confirm too"),
                        (["--train", "1 1", "--confirm", "1 2", "--confirm-trials", "-1"],
                         "--confirm-trials must be 0 or more")):
        r = run([*base, *extra, "--", WRAPKINDS, "10", "1"], text=True, timeout=120)
        assert r.returncode != 0 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert not (tmp_path / "b" / "results.json").exists()


def timings(**medians):
    """A bench summary: each configuration's median, its quartiles 2% either side."""
    return {n.replace("_", "-").replace("cohort-", "cohort+"): dict(ok_trials=5, wall_median_s=m, wall_p25_s=m * 0.98,
                                                                  wall_p75_s=m * 1.02)
            for n, m in medians.items()}


def test_the_clock_decides_the_rest_pools_shape(tmp_path, monkeypatch):
    """The timed step runs the plan and its rest pool alone with that pool
    in the other shape too, and keeps what is faster beyond noise: that
    shape with every group, or without them; within noise, or where the
    plan has no rest pool, the shape stays as planned. cppcheck, trained
    on one file and run on 50: its rest pool alone in one pool 1.108 x
    glibc, by class 0.966 (docs/planner.md, "The rest pool's shape,
    measured")."""
    from types import SimpleNamespace
    import cohort.measure.confirm as confirm

    written = {}

    def planned(path, exclude, rest, shape=None, line_offsets=None):
        written[path.name] = (list(exclude), shape) if line_offsets is None else (list(exclude), shape, line_offsets)

    def run_with(summary, plan):
        written.clear()
        monkeypatch.setattr(confirm, "bench", lambda *a, **k: {"summary": summary})
        out = confirm.Confirmation()
        confirm.timed(out, plan, planned, ["prog"], "glibc", None, 5, lambda m: None, tmp_path, "test")
        return out

    grouped_one = SimpleNamespace(groups=[SimpleNamespace(members=[3])], rest=1, rest_one=True, line_at={})
    out = run_with(timings(cohort_glibc=1.0, glibc=1.05, rest=0.99, plan_classes=0.85, rest_classes=0.9), grouped_one)
    assert written == {"timed-plan": ([], None), "timed-rest": ([[3]], None), "timed-plan-classes": ([], "classes"),
                       "timed-rest-classes": ([[3]], "classes")}
    assert out.shape == "classes" and not out.exclude and out.rest == "auto"
    assert "split by size class is the fastest: it keeps that shape" in out.lines[-1]
    assert out.params() == dict(exclude=[], rest="auto", rest_shape="classes", line_offsets="auto")

    out = run_with(timings(cohort_glibc=1.0, glibc=1.05, rest=0.99, plan_classes=0.9, rest_classes=0.8), grouped_one)
    assert out.shape == "classes" and out.exclude == [[3]] and "alone is the fastest: the plan keeps no group, and " \
        "that shape" in out.lines[-1]

    out = run_with(timings(cohort_glibc=1.0, glibc=1.05, rest=0.99, plan_classes=0.99, rest_classes=1.0), grouped_one)
    assert out.shape == "auto" and not out.exclude and "nothing is faster beyond noise" in out.lines[-1]

    # a plan of the rest pool alone: its other shape is the one more candidate
    rest_only = SimpleNamespace(groups=[], rest=0, rest_one=False, line_at={})
    out = run_with(timings(cohort_glibc=1.0, glibc=1.05, plan_one=0.9), rest_only)
    assert set(written) == {"timed-plan", "timed-plan-one"} and out.shape == "one"

    # no rest pool: nothing to reshape; the allocator alone still wins beyond noise
    no_rest = SimpleNamespace(groups=[SimpleNamespace(members=[3])], rest=None, rest_one=False, line_at={})
    out = run_with(timings(cohort_glibc=1.0, glibc=0.8, rest=0.99), no_rest)
    assert set(written) == {"timed-plan", "timed-rest"}
    assert out.rest == "none" and out.exclude == [[3]] and out.shape == "auto"

    # a plan that moved a pool's blocks within their lines: without that too
    moved = SimpleNamespace(groups=[], rest=0, rest_one=True, line_at={0: 48})
    out = run_with(timings(cohort_glibc=1.0, glibc=1.3, plan_classes=1.0, plan_unmoved=0.9), moved)
    assert written["timed-plan-unmoved"] == ([], None, "none")
    assert out.line_offsets == "none" and out.params()["line_offsets"] == "none"
    assert "where the runtime puts them is the fastest" in out.lines[-1]
    out = run_with(timings(cohort_glibc=1.0, glibc=1.3, plan_classes=1.0, plan_unmoved=0.99), moved)
    assert out.line_offsets == "auto"

    # its rest pool among them, in a plan with groups: the plan without that pool too
    grouped_moved = SimpleNamespace(groups=[SimpleNamespace(members=[3])], rest=1, rest_one=True, line_at={1: 32})
    out = run_with(timings(cohort_glibc=1.0, glibc=1.3, rest=1.0, plan_classes=1.0, rest_classes=1.0,
                           plan_unmoved=1.0, plan_no_rest=0.8), grouped_moved)
    assert "timed-plan-no-rest" in written and out.rest == "none" and not out.exclude
    assert "every ungrouped object in glibc is the fastest" in out.lines[-1]
