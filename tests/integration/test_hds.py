"""The hot-data-streams comparator end to end: the profiler's heap
reference trace (profiler/trace.c), its hot streams in the profile, and
`cohort plan --policy hds`, which groups by immediate call site."""

import json
import os

import pytest

from conftest import COHORT, PROGRAMS, ROOT, run
from cohort.formats import heaptrace
from cohort.formats.profilefile import load_profile

PATTERNS = PROGRAMS / "patterns_O0"


def profile(tmp_path, *argv, opts=("--trace",), name="profile.json"):
    out = tmp_path / name
    r = run([COHORT, "profile", *opts, "-o", out, "--", PATTERNS, *argv])
    assert r.returncode == 0, r.stderr.decode()
    return load_profile(out), r.stderr.decode()


def contexts_of(p, function):
    return sorted(c["id"] for c in p["contexts"]
                  if function in [p["sites"][s]["function"] for s in c["sites"]])


def plan(tmp_path, prof_path, *opts):
    out = tmp_path / "plan"
    r = run([COHORT, "plan", "--policy", "hds", *opts, "-o", out, prof_path])
    return r, out


@pytest.fixture(scope="module")
def alternate(tmp_path_factory):
    d = tmp_path_factory.mktemp("hds")
    p, err = profile(d, "alternate")
    return d, p, err


def test_the_trace_holds_every_macro_access_and_its_streams_pair_the_lists(alternate):
    _, p, err = alternate
    hs = p["hot_streams"]
    t = hs["trace"]
    # within budget: nothing sampled, one reference per macro access
    assert t["sampled_one_in"] == 1 and t["references"] == t["macro_accesses"]
    assert t["references"] <= p["totals"]["macro_accesses"] and t["objects"] >= 4000  # the lists, and stdio's buffer
    assert "finding hot data streams in" in err
    a, b = contexts_of(p, "new_a"), contexts_of(p, "new_b")
    # the lists are walked in step: the streams' objects come from both
    assert hs["sets"][0]["contexts"] == sorted(a + b)
    assert hs["coverage"] >= 0.8 and hs["streams"] >= 1000
    assert 2 <= hs["min_length"] <= hs["max_length"] == 20


def test_hds_groups_by_immediate_call_site(alternate, tmp_path):
    d, p, _ = alternate
    r, out = plan(tmp_path, d / "profile.json")
    assert r.returncode == 0, r.stderr.decode()
    text = out.read_text()
    assert "# made by cohort plan --policy hds from" in text
    report = r.stdout.decode()
    assert "from the heap trace's hot data streams (hds)" in report
    assert "minimal hot data streams" in report and "set packing chose 1" in report
    groups = [ln for ln in text.splitlines() if ln.startswith("group ") and "rest" not in ln]
    assert len(groups) == 1
    members = set(contexts_of(p, "new_a") + contexts_of(p, "new_b"))
    assert {int(x) for x in groups[0].split("# contexts ")[1].split()} == members


def test_one_wrapper_site_is_one_group_whatever_the_caller(tmp_path):
    """Through xmalloc, every object has the same immediate call site: hds
    cannot tell the callers apart (HALO's point about wrappers)."""
    p, _ = profile(tmp_path, "wrapper")
    r, out = plan(tmp_path, tmp_path / "profile.json")
    assert r.returncode == 0, r.stderr.decode()
    site_lines = [ln for ln in out.read_text().splitlines() if ln.startswith("site ") and "group=" in ln]
    assert len(site_lines) == 1 and "xmalloc" in site_lines[0]


def test_sets_that_enter_at_one_site_add_up(alternate, tmp_path):
    """Co-allocation sets are re-keyed by entry site: {a} and {b} made to
    enter at one site become one set, and packing sees their sum."""
    d, p, _ = alternate
    data = json.loads((d / "profile.json").read_text())
    a, b = contexts_of(p, "new_a"), contexts_of(p, "new_b")
    entry = data["contexts"][a[0]]["sites"][0]
    for c in b:
        data["contexts"][c]["sites"][0] = entry
    data["hot_streams"]["sets"] = [{"contexts": a, "saving": 5, "streams": 1},
                                   {"contexts": b, "saving": 7, "streams": 1}]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    r, _ = plan(tmp_path, path)
    assert r.returncode == 0, r.stderr.decode()
    assert "2 co-allocation sets of contexts come to 1, of which set packing chose 1" in r.stdout.decode()


def test_a_profile_without_a_trace_is_refused_in_one_line(tmp_path):
    profile(tmp_path, "alternate", opts=())
    r, out = plan(tmp_path, tmp_path / "profile.json")
    err = r.stderr.decode().strip()
    assert r.returncode != 0 and not out.exists() and len(err.splitlines()) == 1
    assert "profile with --trace" in err and "Traceback" not in err


def test_a_small_budget_samples_bursts_evenly(tmp_path):
    p, err = profile(tmp_path, "alternate", opts=("--trace-budget", "1"))
    t = p["hot_streams"]["trace"]
    # the budget is at least two bursts; beyond, every other burst goes
    assert t["sampled_one_in"] > 1 and t["references"] <= 2 * t["burst"]
    assert t["references"] >= t["macro_accesses"] // t["sampled_one_in"] - t["burst"]
    assert f"one burst of {t['burst']} in {t['sampled_one_in']}" in err


def test_bad_budgets_are_refused(tmp_path):
    for bad in ("0", "-3", str(1 << 31)):
        r = run([COHORT, "profile", "--trace-budget", bad, "-o", tmp_path / "p.json", "--", PATTERNS, "alternate"])
        assert r.returncode != 0 and b"trace budget" in r.stderr and b"Traceback" not in r.stderr
        assert not (tmp_path / "p.json").exists()


def test_a_trace_the_tool_cannot_write_leaves_the_profile(tmp_path):
    """Straight to the tool: an unwritable trace path gives a warning, a raw
    profile that says so, and no trace file."""
    raw = tmp_path / "raw"
    env = dict(os.environ, VALGRIND_LIB=str(ROOT / "build" / "profiler" / "lib"))
    r = run(["valgrind", "--tool=cohort", "-q", f"--cohort-out={raw}",
             f"--cohort-trace={tmp_path / 'no' / 'such' / 'dir' / 'trace'}", PATTERNS, "alternate"], env=env)
    assert r.returncode == 0
    assert b"could not write the heap trace" in r.stderr
    lines = raw.read_text().splitlines()
    assert lines[-1] == "end" and any(ln.startswith("trace unwritten references") for ln in lines)


def test_the_tools_trace_file_reads_back(tmp_path):
    trace = tmp_path / "trace"
    env = dict(os.environ, VALGRIND_LIB=str(ROOT / "build" / "profiler" / "lib"))
    r = run(["valgrind", "--tool=cohort", "-q", f"--cohort-out={tmp_path / 'raw'}", f"--cohort-trace={trace}",
             "--trace-budget=10000", PATTERNS, "separate"], env=env)
    assert r.returncode == 0, r.stderr.decode()
    t = heaptrace.read(trace)
    assert len(t.refs) <= 12288 and t.period >= 2 and len(t.contexts) == max(t.refs) + 1
    # every object described is referenced, in order of first reference
    first = list(dict.fromkeys(t.refs))
    assert first == list(range(len(t.contexts)))
    assert set(t.sizes) == {32}
