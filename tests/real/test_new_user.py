"""What a new user trips over: every writer keeps files Cohort did not write,
says what it wrote, and every common mistake gets a message that says what
to type instead (issue: "What a new user trips over")."""

import json
import os
import stat
import subprocess

import pytest

from conftest import COHORT, LIBCOHORT, PROGRAMS, ROOT, run

TOY = PROGRAMS / "benchtoy"
SOURCE = "int main(void) { return 0; }\n"
QUICK = ["--trials", "1", "--warmup", "0", "--allocators", "glibc", "--no-random", "--no-all"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """An optimize directory for the toy program."""
    d = tmp_path_factory.mktemp("opt") / "opt"
    r = run([COHORT, "optimize", "-o", d, "--", TOY])
    assert r.returncode == 0, r.stderr.decode()
    return d


def err(r):
    return r.stderr.decode()


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


# ---- never lose a file --------------------------------------------------------


def test_a_checkout_without_make_says_to_run_make(tmp_path):
    """bin/cohort in a checkout where make has not made the virtualenv runs
    the system's python3, which may lack Cohort's dependencies: one line
    that says to run make, not a traceback."""
    import shutil
    py = shutil.which("python3")
    if py is None or subprocess.run([py, "-c", "import elftools, fastjsonschema, matplotlib, capstone"],
                                    capture_output=True).returncode == 0:
        pytest.skip("the system's python3 has Cohort's dependencies: nothing is missing")
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "cohort", checkout / "cohort", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "bin", checkout / "bin")
    r = run([checkout / "bin" / "cohort", "--help"], cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "is missing: run `make` in" in err and str(checkout) in err and "Traceback" not in err


def test_run_stats_never_replaces_a_users_file(tmp_path, toy):
    src = tmp_path / "graph.c"
    src.write_text(SOURCE)
    r = run([COHORT, "run", "--plan", toy / "plan", "--stats", src, "--", TOY])
    assert r.returncode == 2 and src.read_text() == SOURCE
    assert err(r) == (f"cohort: {src} exists and is not runtime statistics that cohort wrote; not "
                      "replacing it (choose another name, or --force to replace it)\n")
    # statistics it wrote itself are replaced, run after run
    st = tmp_path / "st.json"
    for _ in range(2):
        r = run([COHORT, "run", "--plan", toy / "plan", "--stats", st, "--", TOY])
        assert r.returncode == 0, err(r)
        assert json.loads(st.read_text())["format"] == "cohort-stats"
    assert mode(st) == 0o644 and sorted(p.name for p in tmp_path.iterdir()) == ["graph.c", "st.json"]
    r = run([COHORT, "run", "--plan", toy / "plan", "--stats", src, "--force", "--", TOY])
    assert r.returncode == 0 and json.loads(src.read_text())["format"] == "cohort-stats"


def test_the_runtime_itself_keeps_a_file_named_by_COHORT_STATS(tmp_path):
    """By hand, with no cohort command in front: the same rule, one warning."""
    src = tmp_path / "notes.txt"
    src.write_text("mine\n")
    env = dict(os.environ, LD_PRELOAD=str(LIBCOHORT), COHORT_MODE="all", COHORT_STATS=str(src))
    r = run([TOY], env=env)
    assert r.returncode == 0 and src.read_text() == "mine\n"
    assert err(r).count("\n") == 1 and "COHORT_STATS: " + str(src) + " exists and is not statistics " \
        "Cohort wrote; not replacing it (remove it, name another file, or set COHORT_STATS_FORCE=1)" in err(r)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]   # no temporary file left
    r = run([TOY], env=dict(env, COHORT_STATS_FORCE="1"))
    assert r.returncode == 0 and json.loads(src.read_text())["format"] == "cohort-stats"
    (tmp_path / "d").mkdir()
    r = run([TOY], env=dict(env, COHORT_STATS=str(tmp_path / "d"), COHORT_STATS_FORCE="1"))
    assert r.returncode == 0 and "not replacing it" in err(r) and (tmp_path / "d").is_dir()


def test_report_never_replaces_a_users_file_and_names_every_file_it_writes(tmp_path, toy):
    res = tmp_path / "bench1"
    r = run([COHORT, "bench", *QUICK, "--plan", toy / "plan", "-o", res, "--", TOY])
    assert r.returncode == 0, err(r)
    src = tmp_path / "graph.c"
    src.write_text(SOURCE)
    r = run([COHORT, "report", res, "-o", src])
    assert r.returncode == 2 and src.read_text() == SOURCE
    assert err(r).startswith(f"cohort: {src} exists and is not a report that cohort wrote")
    # the plots are named after the report, and a user's plots beside it are kept
    (tmp_path / "speedup.png").write_bytes(b"my plot")
    (tmp_path / "r-fig14.png").write_bytes(b"my other plot")
    r = run([COHORT, "report", res, "-o", tmp_path / "r.md"])
    assert r.returncode == 2 and "r-fig14.png exists and is not a plot that cohort wrote" in err(r)
    assert not (tmp_path / "r.md").exists() and (tmp_path / "r-fig14.png").read_bytes() == b"my other plot"
    (tmp_path / "r-fig14.png").unlink()
    r = run([COHORT, "report", res, "-o", tmp_path / "r.md"])
    assert r.returncode == 0, err(r)
    assert err(r) == f"cohort: wrote {tmp_path / 'r.md'}, {tmp_path / 'r-fig14.png'}, {tmp_path / 'r-fig15.png'}\n"
    assert (tmp_path / "speedup.png").read_bytes() == b"my plot"
    assert mode(tmp_path / "r.md") == 0o644 and mode(tmp_path / "r-fig14.png") == 0o644
    r = run([COHORT, "report", res, "-o", tmp_path / "r.md"])      # its own files: replaced
    assert r.returncode == 0, err(r)


def test_bench_keeps_foreign_files_in_its_directory_and_says_what_it_wrote(tmp_path, toy):
    res = tmp_path / "res"
    res.mkdir()
    (res / "speedup.png").write_bytes(b"mine")
    r = run([COHORT, "bench", *QUICK, "--plan", toy / "plan", "-o", res, "--", TOY])
    assert r.returncode == 2 and "speedup.png exists and is not a plot that cohort wrote" in err(r)
    assert sorted(p.name for p in res.iterdir()) == ["speedup.png"]
    r = run([COHORT, "bench", *QUICK, "--force", "--plan", toy / "plan", "-o", res, "--", TOY])
    assert r.returncode == 0 and f"cohort bench: drew {res / 'speedup.png'}" in err(r), err(r)
    r = run([COHORT, "bench", *QUICK, "--plan", toy / "plan", "-o", res, "--", TOY])
    assert r.returncode == 0, err(r)   # everything there is its own now
    for p in [res / "results.json", res / "speedup.png", *res.glob("stats/*.json")]:
        assert mode(p) == 0o644, p


def test_bench_train_writes_the_explanation_and_graph_too(tmp_path):
    res = tmp_path / "res"
    r = run([COHORT, "bench", *QUICK, "--train", "", "-o", res, "--", TOY])
    assert r.returncode == 0, err(r)
    for name in ("profile.json", "plan", "explain.txt", "graph.svg"):
        assert mode(res / name) == 0o644, name
    assert (res / "explain.txt").read_text().startswith("headroom: ")
    assert "\nProfile of: " in (res / "explain.txt").read_text()
    assert f"cohort bench: wrote {res / 'profile.json'}, {res / 'plan'}, {res / 'explain.txt'}" in err(r)
    # the table ends with the training run's headroom, which the results keep
    assert "headroom: " in r.stdout.decode() and "(the training run)" in r.stdout.decode()
    results = json.loads((res / "results.json").read_text())
    assert 0 < results["headroom"]["tracked_d1_share"] <= 1 and results["headroom"]["line"].startswith("headroom: ")
    # and the report sets it beside the D1 change the plans measured
    r = run([COHORT, "report", res, "-o", tmp_path / "report.md"])
    assert r.returncode == 0, err(r)
    text = (tmp_path / "report.md").read_text()
    assert "## Headroom" in text and f"{results['headroom']['tracked_d1_share']:.1%}" in text


def test_a_failed_command_removes_the_directories_it_made(tmp_path):
    out = tmp_path / "x" / "y"
    r = run([COHORT, "optimize", "-o", out, "--", tmp_path / "nonexistent"])
    assert r.returncode == 127 and err(r) == f"cohort: cannot run {tmp_path / 'nonexistent'}: no such file\n"
    assert list(tmp_path.iterdir()) == []
    r = run([COHORT, "bench", *QUICK, "--train", "-c 'exit 3'", "-o", out, "--", "sh", "-c", "true"])
    assert r.returncode != 0 and "the training run sh -c exit 3 failed (exit status 3)" in err(r), err(r)
    assert (out / "profile.json").exists()        # a profile is worth keeping: so is its directory


def test_a_training_run_written_as_a_shell_line_is_named_when_it_fails(tmp_path):
    """--train takes the program's arguments: `<` in it reaches the program
    as an argument, not as a redirection. When such a run fails, the
    message says so and names --train-stdin; a run that fails for its own
    reasons gets no such hint."""
    (tmp_path / "in.txt").write_text("x\n")
    hint = ("its arguments hold `<`, which the program got as an argument: --train takes the program's "
            "arguments, not a shell command line (give a run's standard input with --train-stdin FILE)")
    r = run([COHORT, "optimize", "-o", tmp_path / "o", "--train", "-c 'test $# = 0' < in.txt", "--",
             "sh", "-c", "true"], cwd=tmp_path)
    assert r.returncode == 0, err(r)
    assert "failed (exit status 1); its profile is left out; " + hint in err(r), err(r)
    r = run([COHORT, "bench", *QUICK, "--train", "-c 'test $# = 0' < in.txt", "-o", tmp_path / "b", "--",
             "sh", "-c", "true"], cwd=tmp_path)
    assert r.returncode != 0 and hint in err(r), err(r)
    r = run([COHORT, "bench", *QUICK, "--train", "-c 'exit 3'", "-o", tmp_path / "c", "--", "sh", "-c", "true"])
    assert r.returncode != 0 and "exit status 3" in err(r) and "its arguments hold" not in err(r), err(r)


def test_optimize_with_a_failing_training_run_stops_loudly(tmp_path):
    out = tmp_path / "o"
    r = run([COHORT, "optimize", "-o", out, "--", "sh", "-c", "exit 3"])
    assert r.returncode == 1
    assert "cohort: WARNING: the training run sh -c exit 3 failed (exit status 3)" in err(r)
    assert err(r).rstrip().endswith(f"cohort: wrote {out / 'profile.json'}; not planning (fix the run, or "
                                    "give --allow-failure to use a failed run's profile)")
    assert sorted(p.name for p in out.iterdir()) == ["profile.json"]
    r = run([COHORT, "optimize", "--allow-failure", "-o", out, "--", "sh", "-c", "exit 3"])
    assert r.returncode == 0 and "WARNING" in err(r) and (out / "plan").exists()


# ---- say what went wrong, and what to do ----------------------------------------


@pytest.mark.parametrize("cmd", ["run", "profile", "optimize", "bench"])
def test_a_forgotten_double_dash_says_where_the_program_goes(cmd):
    extra = {"run": ["--plan", "p"], "profile": ["-o", "p.json"], "optimize": ["-o", "d"],
             "bench": ["--plan", "p", "-o", "d"]}[cmd]
    r = run([COHORT, cmd, *extra, "./prog", "a", "b"])
    assert r.returncode == 2
    assert err(r) == (f"cohort: the program and its arguments go after `--`: cohort {cmd} "
                      f"{' '.join(extra)} -- ./prog a b\n")
    r = run([COHORT, cmd, "--help"])
    assert r.stdout.decode().splitlines()[0].endswith(" -- PROG ARGS...") or \
        " -- PROG " in r.stdout.decode().splitlines()[0]


def test_an_unknown_option_says_the_programs_own_options_go_after_the_double_dash():
    r = run([COHORT, "run", "--verbose", "--", "true"])
    assert r.returncode == 2 and err(r) == (
        "cohort: cohort run has no option --verbose (see cohort run --help); the program's own options "
        "go after `--`: cohort run [options] -- PROG ARGS...\n")


def test_run_without_a_plan_says_it_passes_through(tmp_path):
    r = run([COHORT, "run", "--", "true"])
    assert r.returncode == 0
    assert err(r) == "cohort: no --plan and no --mode: running true in pass-through (nothing is grouped)\n"
    r = run([COHORT, "run", "--", "true", "--plan", "p"])
    assert err(r) == ("cohort: no --plan and no --mode: running true in pass-through (nothing is grouped); "
                      "--plan after `--` is the program's own argument (cohort's options go before `--`)\n")


def test_plan_directory_means_its_plan(toy, tmp_path):
    st = tmp_path / "st.json"
    r = run([COHORT, "run", "--plan", toy, "--stats", st, "--", TOY])
    assert r.returncode == 0 and err(r) == f"cohort: --plan {toy} is a directory: using {toy / 'plan'}\n"
    assert json.loads(st.read_text())["plan_active"] is True
    r = run([COHORT, "run", "--plan", tmp_path, "--", TOY])
    assert r.returncode == 2 and err(r).startswith(f"cohort: --plan {tmp_path} is a directory with no plan in it")
    r = run([COHORT, "explain", toy / "profile.json", toy, "--graph", "-"])
    assert r.returncode == 0 and "is a directory: using" in err(r)


def test_a_script_target_names_its_interpreter(tmp_path):
    perl = tmp_path / "walk.pl"
    perl.write_text("#!/usr/bin/perl -w\nprint 1;\n")
    shim = tmp_path / "python3"
    shim.write_text('#!/bin/bash\nexec /usr/bin/python3 "$@"\n')
    for p in (perl, shim):
        p.chmod(0o755)
    r = run([COHORT, "profile", "-o", tmp_path / "p.json", "--", perl, "x"])
    assert r.returncode == 2 and err(r) == (
        f"cohort: {perl} is a script run by /usr/bin/perl (#!/usr/bin/perl -w): profile the interpreter "
        f"with the script as its argument: cohort profile [options] -- /usr/bin/perl -w {perl} x\n")
    r = run([COHORT, "optimize", "-o", tmp_path / "o", "--", shim, "t.py"])
    assert r.returncode == 2 and err(r).startswith(f"cohort: {shim} is a shell script (#!/bin/bash), not a "
                                                   "program: profile the program it starts, directly")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["python3", "walk.pl"]


def test_profile_reports_progress_while_it_runs(tmp_path):
    env = dict(os.environ, COHORT_PROGRESS_SECONDS="0.3")
    r = run([COHORT, "profile", "-o", tmp_path / "p.json", "--", ROOT / "build" / "workloads" / "bintree",
             "19", "6", "1", "1"], env=env)
    assert r.returncode == 0, err(r)
    lines = [x for x in err(r).splitlines() if x.startswith("cohort: profiling, ")]
    assert len(lines) >= 2, err(r)
    assert any(" allocations, " in x and " accesses to the heap" in x for x in lines), lines


def test_cohort_works_through_a_symlink_on_path(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "cohort").symlink_to(COHORT)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    r = subprocess.run(["cohort", "--version"], env=env, cwd="/", capture_output=True)
    assert r.returncode == 0 and r.stdout.decode().startswith("cohort "), r.stderr


def test_a_structurally_wrong_profile_names_the_field(tmp_path, toy):
    data = json.loads((toy / "profile.json").read_text())
    data["contexts"][0]["allocations"] = "many"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    r = run([COHORT, "plan", bad, "-o", tmp_path / "plan"])
    assert r.returncode == 2 and "contexts[0].allocations" in err(r) and err(r).count("\n") == 1, err(r)


# ---- show what the plan does ----------------------------------------------------


@pytest.fixture(scope="module")
def inlined(tmp_path_factory):
    d = tmp_path_factory.mktemp("inl") / "opt"
    r = run([COHORT, "optimize", "-o", d, "--", PROGRAMS / "inlined"])
    assert r.returncode == 0, r.stderr.decode()
    return d


def test_explain_tells_apart_two_groups_of_one_inlined_helper_on_one_line(inlined):
    """tests/programs/inlined.c: at -O2 both lists come from new_node(),
    inlined twice into one line of main; only inline information and the
    sites' offsets tell the two groups apart."""
    text = (inlined / "explain.txt").read_text()
    assert "Legend: a stack lists call sites innermost first" in text
    for term in ("[direct]", "[indirect]", "Entry site:", "Stop site:", "Quick test:"):
        assert term in text.split("Hottest contexts")[0], term
    selects = [x.strip() for x in text.splitlines() if x.strip().startswith("select: ")]
    assert len(selects) == 2 and selects[0] != selects[1], selects
    for s in selects:
        assert s.startswith("select: new_node (inlined.c:16), inlined into main (inlined.c:28) [inlined+0x"), s
    entries = [x.strip() for x in text.splitlines() if x.strip().startswith("entry site: ")]
    assert len(entries) == 2 and entries[0] != entries[1]
    profile = json.loads((inlined / "profile.json").read_text())
    assert any(s.get("inlined") == ["new_node (inlined.c:16)", "main (inlined.c:28)"] for s in profile["sites"])


def test_the_graph_has_unambiguous_labels_visible_weights_and_a_legend(inlined):
    svg = (inlined / "graph.svg").read_text()
    assert svg.startswith("<svg") and svg.count('class="node"') >= 2
    import re
    labels = re.findall(r">(new_node \[inlined\+0x[0-9a-f]+\])<", svg)
    assert len(labels) == 2 and len(set(labels)) == 2, labels
    profile = json.loads((inlined / "profile.json").read_text())
    from cohort.present.graphsvg import compact
    heaviest = max(w for _, _, w in profile["graph"]["edges"])
    assert f">{compact(heaviest)}<" in svg                      # weights are drawn, not only hovered
    assert ">group 0: g0-" in svg and ">group 1: g1-" in svg and ">ungrouped<" in svg


def test_report_over_two_runs_of_one_program_labels_them_apart(tmp_path, toy):
    for d in ("before", "after"):
        r = run([COHORT, "bench", *QUICK, "--plan", toy / "plan", "-o", tmp_path / d, "--", TOY])
        assert r.returncode == 0, err(r)
    rep = tmp_path / "r.md"
    r = run([COHORT, "report", tmp_path / "before", tmp_path / "after", "-o", rep])
    assert r.returncode == 0, err(r)
    text = rep.read_text()
    assert "| benchtoy (before) | 1 |" in text and "| benchtoy (after) | 1 |" in text
    assert "### benchtoy (before): medians" in text and "### benchtoy (after): medians" in text


def test_bench_table_is_aligned_and_says_when_cache_misses_were_not_measured(tmp_path, toy):
    r = run([COHORT, "bench", *QUICK, "--plan", toy / "plan", "-o", tmp_path / "a", "--", TOY])
    assert r.returncode == 0, err(r)
    table = r.stdout.decode().splitlines()
    assert table[0].split() == ["config", "ok", "median", "s", "p25", "p75", "time", "vs", "peak", "RSS",
                                "MiB", "D1", "misses"]
    assert [x.split()[0] for x in table[1:3]] == ["glibc", "cohort+glibc"]
    assert all(x.endswith("no cachegrind input given") for x in table[1:3])
    assert len({len(x) for x in table[:3]}) == 1            # aligned: every row as wide as the header
    r = run([COHORT, "bench", *QUICK, "--plan", toy / "plan", "--cachegrind-args", "ok", "-o", tmp_path / "b",
             "--", TOY])
    table = r.stdout.decode().splitlines()
    assert "LL misses" in table[0] and "peak RSS MiB" in table[0] and "rt D1" in table[0]
    head = table[0]
    for row in table[1:3]:    # numbers end under the end of their column's name
        assert row[head.index("D1 misses") + len("D1 misses") - 1].isdigit(), (head, row)
        assert row[head.index("LL misses") + len("LL misses") - 1].isdigit(), (head, row)


def test_make_demo_shows_cohort_glibc_and_the_controls(tmp_path):
    env = dict(os.environ, DEMO_TRIALS="1", DEMO_OUT=str(tmp_path))
    r = run([ROOT / ".venv" / "bin" / "python", ROOT / "scripts" / "demo.py"], env=env, timeout=600)
    assert r.returncode == 0, err(r)
    rows = {x.split()[0] for x in r.stdout.decode().splitlines() if x.split()}
    assert {"glibc", "jemalloc", "cohort+glibc", "random", "all"} <= rows
    assert "output identical across allocators: yes" in r.stdout.decode()


def test_peak_rss_is_the_programs_own_not_the_harness(tmp_path):
    """Linux reports a child's peak RSS as at least its parent's at fork; the
    bench starts programs through tools/measure.c so that it is their own."""
    from cohort.measure.runs import run_once
    ballast = bytearray(120 << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    r = run_once(["true"], dict(os.environ), tmp_path)
    assert r["exit"] == 0 and 0 < r["max_rss_kb"] < 30 << 10, r
    r = run_once(["sh", "-c", "kill -TERM $$"], dict(os.environ), tmp_path)
    assert r["exit"] == -15
    del ballast


def test_a_missing_required_option_shows_the_usage_line():
    r = run([COHORT, "optimize", "./prog", "a"])
    assert r.returncode == 2 and err(r) == ("cohort: the following arguments are required: -o/--output "
                                            "(usage: cohort optimize [options] -o DIR -- PROG TRAIN-ARGS...)\n")


def test_profile_and_plan_keep_a_users_file(tmp_path, toy):
    src = tmp_path / "graph.c"
    src.write_text(SOURCE)
    r = run([COHORT, "profile", "-o", src, "--", TOY])
    assert r.returncode == 2 and src.read_text() == SOURCE
    assert err(r) == (f"cohort: {src} exists and is not a profile that cohort wrote; not replacing it "
                      "(choose another name, or --force to replace it)\n")
    r = run([COHORT, "plan", toy / "profile.json", "-o", src])
    assert r.returncode == 2 and src.read_text() == SOURCE and "is not a plan that cohort wrote" in err(r)
    r = run([COHORT, "explain", toy / "profile.json", "--graph", src])
    assert r.returncode == 2 and src.read_text() == SOURCE and "is not an affinity graph" in err(r)


def test_bench_stops_when_the_program_fails_without_cohort(tmp_path):
    r = run([COHORT, "bench", "--train", "-c true", "-o", tmp_path / "b", "--", "sh", "-c",
             "echo no such input >&2; exit 3"])
    assert r.returncode == 2
    assert err(r).splitlines()[-1] == ("cohort: sh -c echo no such input >&2; exit 3 fails without Cohort too "
                                       "(exit 3: no such input); check the command and its arguments; "
                                       "nothing was measured")
    assert "round 2" not in err(r)


def test_program_arguments_that_start_with_a_dash_need_no_equals_sign(tmp_path):
    """`--train -q` and `--cachegrind-args '-q'` are the program's own
    arguments, not Cohort's options: argparse alone would say "expected one
    argument". A forgotten value before another of Cohort's options is
    still an error."""
    from cohort.cli import attach_dash_values, build_parser, option_strings
    known = option_strings(build_parser())
    assert "--layout-runs" in known and "--train" in known
    assert attach_dash_values(["bench", "--train", "-q", "--cachegrind-args", "-x 3", "--trials", "1"], known) == \
        ["bench", "--train=-q", "--cachegrind-args=-x 3", "--trials", "1"]
    assert attach_dash_values(["tune", "--ref", "--stdin", "f"], known) == ["tune", "--ref", "--stdin", "f"]
    assert attach_dash_values(["bench", "--trials", "-1"], known) == ["bench", "--trials", "-1"]
    # end to end: the benchtoy program takes "ok" as its mode; -o's directory gets the plan
    out = tmp_path / "opt"
    r = run([COHORT, "optimize", "--train", "-v", "-o", out, "--", PROGRAMS / "benchtoy", "ok"])
    err = r.stderr.decode()
    assert "expected one argument" not in err
    assert r.returncode == 0, err
    assert "benchtoy -v: transfer score" in r.stdout.decode() + err   # validated on a run with its own argument
    r = run([COHORT, "optimize", "--train", "--force", "-o", tmp_path / "x", "--", PROGRAMS / "benchtoy", "ok"])
    assert r.returncode == 2 and b"expected one argument" in r.stderr
