"""MO's delinquent loads (`cohort loads`, profiler/loads.c) and the prefetch
advice of `cohort explain --prefetch`: what the tool measures on a list walk
whose stride only pooling makes constant, the advice's rules, and bad
input."""

import json
from pathlib import Path

import pytest

from cohort.measure.loads import heap_form
from cohort.measure.workloads import binary as workload_binary, inputs
from conftest import COHORT, ROOT, run

LISTFRAG = workload_binary("listfrag")
SOURCE = ROOT / "workloads" / "listfrag" / "listfrag.c"


def free_loop_line():
    """The line of listfrag's last walk, which frees the list item by item."""
    lines = SOURCE.read_text().splitlines()
    return next(i for i, l in enumerate(lines, 1) if "free(head)" in l)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    d = tmp_path_factory.mktemp("loads")
    args = inputs("listfrag")["train"]
    out = {}
    for layout, extra in (("next", []), ("mo", ["--policy", "mo"])):
        path = d / f"{layout}.json"
        r = run([COHORT, "loads", *extra, "-o", path, "--", LISTFRAG, *args])
        assert r.returncode == 0, r.stderr
        assert b"listfrag" in r.stdout          # the program's own output is untouched
        out[layout] = (path, json.loads(path.read_text()))
    return out


def the_load(data, line):
    found = [l for l in data["loads"] if l["file"] and l["file"].endswith("listfrag.c") and l["line"] == line
             and heap_form(l)]
    assert found, f"no pointer load at listfrag.c:{line}"
    return max(found, key=lambda l: l["d1_misses"])


def test_the_file_says_what_was_measured(measured):
    path, data = measured["next"]
    assert data["format"] == "cohort-loads" and data["version"] == 1
    assert data["layout"] == {"kind": "next"}
    assert measured["mo"][1]["layout"] == {"kind": "policy", "policy": "mo"}
    assert data["cache"] == {"window": 64, "line": 64, "d1": [32768, 8], "ll": [1048576, 16]}
    t = data["totals"]
    assert t["accesses"] >= t["loads"] > 0 and t["d1_misses"] >= t["ll_misses"]
    misses = [l["d1_misses"] for l in data["loads"]]
    assert misses == sorted(misses, reverse=True) and all(m > 0 for m in misses)
    for l in data["loads"]:
        assert l["execs"] >= l["d1_misses"] >= l["ll_misses"]
        assert l["windows"] >= l["strided_windows"]
        assert l["windows"] == l["execs"] // 64
    # the runtime's own module is a system module, the program's is not
    assert not any(l["system"] for l in data["loads"] if l["module"] == str(LISTFRAG))


def test_pooling_makes_the_walk_strided(measured):
    """Junk of random sizes between the list items: under the next allocator
    the walk has no constant stride; in MO's size-consistent pool the items
    are 32 bytes apart, as the paper says pooling makes them."""
    line = free_loop_line()
    plain = the_load(measured["next"][1], line)
    pooled = the_load(measured["mo"][1], line)
    assert plain["strided_windows"] == 0
    assert pooled["strided_windows"] > pooled["windows"] / 2
    assert pooled["strides"][0]["stride"] == 32
    assert plain["execs"] == pooled["execs"] == int(inputs("listfrag")["train"][0])


def test_explain_advises_the_pooled_walk_only(measured):
    r = run([COHORT, "explain", "--prefetch", measured["next"][0], "--prefetch", measured["mo"][0]])
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    line = free_loop_line()
    assert f"listfrag.c:{line} in main" in text
    block = text[text.index(f"listfrag.c:{line} in main"):]
    assert "next allocator" in block.splitlines()[1] and "-> no prefetch" in block.splitlines()[1]
    assert "policy mo" in block.splitlines()[2] and "-> prefetch +352 bytes ahead" in block.splitlines()[2]
    assert "__builtin_prefetch((const char *)PTR + 352);     under the policy mo" in text
    assert "_dl_" not in text and "libcohort" not in text    # system code is never advised


def one_line_error(r, *words):
    err = r.stderr.decode()
    assert r.returncode != 0
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for w in words:
        assert w in err, err


def test_bad_input(tmp_path, measured):
    good = measured["next"][0]
    one_line_error(run([COHORT, "loads", "--policy", "mo", "--plan", good, "--", LISTFRAG]), "plan")
    one_line_error(run([COHORT, "loads", "--policy", "halo", "--", LISTFRAG]), "unknown policy")
    one_line_error(run([COHORT, "loads", "-o", tmp_path / "l.json", "--", tmp_path / "missing"]), "missing")
    one_line_error(run([COHORT, "explain"]), "give a profile")
    one_line_error(run([COHORT, "explain", "--prefetch", good, good]), "loads files only")
    one_line_error(run([COHORT, "explain", "--prefetch", good, "--prefetch", good, "--prefetch", good]),
                   "one or two")
    one_line_error(run([COHORT, "explain", "--prefetch", tmp_path / "none.json"]), "cannot read")
    data = json.loads(Path(good).read_text())
    data["loads"][0]["strides"] = [{"stride": "far", "windows": 1}]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    one_line_error(run([COHORT, "explain", "--prefetch", bad]), "damaged")
    notours = tmp_path / "profile.json"
    notours.write_text('{"format": "cohort-profile"}')
    one_line_error(run([COHORT, "explain", "--prefetch", notours]), "not a loads file")
    # a file that is not a loads measurement is never overwritten
    keep = tmp_path / "mine.json"
    keep.write_text("precious")
    one_line_error(run([COHORT, "loads", "-o", keep, "--", LISTFRAG, "10", "1", "1"]), "not replacing")
    assert keep.read_text() == "precious"
