"""Injected prefetches (MO, 2005, section 3; runtime/policy/mo/prefetch.c, `cohort
prefetch`, `cohort run --prefetch`, `cohort bench --prefetch`): which loads
move and which are left alone, by reason; the program's results and its
exceptions unchanged; the stub known to the unwinder; bad files."""

import json
import re
import subprocess

import pytest

from cohort.formats.elf import build_id
from conftest import COHORT, PROGRAMS, cohort_env, run

ASM = PROGRAMS / "prefetchable"
CXX = PROGRAMS / "prefetch_unwind"


def symbol(binary, name):
    out = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    m = re.search(rf"^([0-9a-f]+) T {name}$", out, re.M)
    assert m, f"no {name} in {binary}"
    return int(m.group(1), 16)


def prefetch_file(path, binary, loads, build=None):
    """A prefetch file for binary: loads is [(address, distance)]."""
    lines = ["cohort-prefetch 1", f"module 0 {build or build_id(binary)} {binary}"]
    lines += [f"load 0 {a:#x} {d}" for a, d in loads]
    path.write_text("\n".join(lines + ["end"]) + "\n")
    return path


def said(r):
    """The runtime's lines on stderr (the program adds its own)."""
    return [l for l in r.stderr.splitlines() if l.startswith(b"cohort:")]


def results(stats):
    return [e["result"] for e in json.loads(stats.read_text())["prefetch"]["each"]]


@pytest.fixture(scope="module")
def plain():
    r = run([ASM, "3000", "5"])
    assert r.returncode == 0
    return r.stdout


def test_each_load_moves_only_where_nothing_jumps_into_the_moved_bytes(tmp_path, plain):
    loads = [(symbol(ASM, "walk_load"), 320),      # moves
             (symbol(ASM, "branchy_load"), 320),   # a jump lands inside its bytes
             (symbol(ASM, "table_load"), 320),     # its function jumps through a register
             (symbol(ASM, "call_load"), 320),      # a call among its bytes
             (symbol(ASM, "walk_sum") + 1, 64)]    # not an instruction's start
    f = prefetch_file(tmp_path / "p.txt", ASM, loads)
    stats = tmp_path / "stats.json"
    r = run([ASM, "3000", "5"], env=cohort_env(prefetch=f, stats=stats))
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain                                             # the sums
    assert b"walk_load patched; stub unwind entry found" in r.stderr
    assert results(stats) == ["injected", "branch_target", "indirect_jump", "unmovable", "not_a_load"]
    data = json.loads(stats.read_text())["prefetch"]
    assert data["loads"] == 5 and data["injected"] == 1 and data["file"] == str(f)
    # the address that is no load: one warning, naming it
    assert said(r) == [said(r)[0]] and b"prefetchable+0x" in said(r)[0]


def test_injection_works_whatever_the_mode(tmp_path, plain):
    f = prefetch_file(tmp_path / "p.txt", ASM, [(symbol(ASM, "walk_load"), 320)])
    for mode in ("off", "all", "random:4"):
        stats = tmp_path / f"{mode}.json"
        r = run([ASM, "3000", "5"], env=cohort_env(prefetch=f, stats=stats, mode=mode))
        assert r.returncode == 0 and r.stdout == plain
        assert results(stats) == ["injected"]


def test_patching_off_leaves_the_code_alone(tmp_path):
    f = prefetch_file(tmp_path / "p.txt", ASM, [(symbol(ASM, "walk_load"), 320)])
    r = run([ASM, "3000", "1"], env=cohort_env(prefetch=f, patch=0))
    assert r.returncode == 0 and b"walk_load not patched" in r.stderr and not said(r)


def test_a_function_with_landing_pads_keeps_its_exceptions(tmp_path):
    """The walk's function has a landing pad: its exception table is read, its
    load moves, and exceptions still pass through it, running the guard."""
    expected = run([CXX, "2000", "7"]).stdout
    loads = tmp_path / "loads.json"
    r = run([COHORT, "loads", "-o", loads, "--", CXX, "20000", "4"])
    assert r.returncode == 0, r.stderr
    f = tmp_path / "pf.txt"
    r = run([COHORT, "prefetch", "-o", f, loads])
    assert r.returncode == 0, r.stderr
    assert re.search(rb"prefetch_unwind.cc:\d+ in walk", r.stdout)
    text = f.read_text()
    assert text.startswith("cohort-prefetch 1\n") and text.endswith("end\n")
    assert f"module 0 {build_id(CXX)} {CXX}" in text
    stats = tmp_path / "stats.json"
    r = run([CXX, "2000", "7"], env=cohort_env(prefetch=f, stats=stats))
    assert r.returncode == 0 and r.stdout == expected
    assert b"caught 3 destructors 7" in r.stdout
    assert "injected" in results(stats)


def test_cohort_run_and_bench_inject_it(tmp_path, plain):
    f = prefetch_file(tmp_path / "p.txt", ASM, [(symbol(ASM, "walk_load"), 320)])
    stats = tmp_path / "s.json"
    r = run([COHORT, "run", "--prefetch", f, "--stats", stats, "--", ASM, "3000", "5"])
    assert r.returncode == 0 and b"walk_load patched" in r.stderr
    assert results(stats) == ["injected"]
    out = tmp_path / "bench"
    r = run([COHORT, "bench", "--policies", "mo", "--allocators", "glibc", "--no-random", "--no-all",
             "--trials", "1", "--warmup", "0", "--prefetch", f, "-o", out, "--", ASM, "3000", "2"], timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads((out / "results.json").read_text())
    assert res["parameters"]["order"] == ["glibc", "mo", "glibc+prefetch", "mo+prefetch"]
    assert res["parameters"]["prefetch"] == str(f)
    assert not res["problems"]
    assert res["ratios"]["glibc+prefetch"]["vs"] == "glibc"
    assert results(out / "stats" / "mo+prefetch.json") == ["injected"]


@pytest.mark.parametrize("content, why", [
    (None, b"No such file"),
    ("", b"not a Cohort prefetch file"),
    ("cohort-prefetch 2\nend\n", b"version 2 is not 1"),
    ("cohort-prefetch 1\nload 0 0x10 64\nend\n", b"names a module not declared"),
    ("cohort-prefetch 1\nmodule 0 - /x\nload 0 0x10 0\nend\n", b"non-zero number of bytes"),
    ("cohort-prefetch 1\nmodule 0 - /x\nload 0 10 64\nend\n", b"hexadecimal"),
    ("cohort-prefetch 1\nmodule 0 - /x\nload 0 0x10 64\n", b"cut short"),
    ("cohort-prefetch 1\nend\nload\n", b"after 'end'"),
    ("cohort-prefetch 1\nmodule 0 zz /x\nend\n", b"bad build id"),
    ("cohort-prefetch 1\nmodule 0 - /x\nload 0 0x10 64 extra\nend\n", b"unexpected 'extra'"),
])
def test_a_bad_file_gets_one_warning_and_changes_nothing(tmp_path, plain, content, why):
    f = tmp_path / "p.txt"
    if content is not None:
        f.write_text(content)
    r = run([ASM, "3000", "5"], env=cohort_env(prefetch=f))
    assert r.returncode == 0 and r.stdout == plain
    assert b"walk_load not patched" in r.stderr
    (line,) = said(r)
    assert why in line and b"no prefetches injected" in line


def test_a_file_for_another_build_is_left_alone(tmp_path):
    f = prefetch_file(tmp_path / "p.txt", ASM, [(symbol(ASM, "walk_load"), 320)], build="ab" * 20)
    stats = tmp_path / "s.json"
    r = run([ASM, "3000", "1"], env=cohort_env(prefetch=f, stats=stats))
    assert r.returncode == 0 and b"walk_load not patched" in r.stderr
    (line,) = said(r)
    assert b"another build of prefetchable" in line
    assert results(stats) == ["other_build"]


def test_cli_bad_input(tmp_path):
    plan_like = tmp_path / "plan"
    plan_like.write_text("cohort-plan 6\nend\n")
    r = run([COHORT, "run", "--prefetch", plan_like, "--", ASM, "10", "1"])
    assert r.returncode != 0 and b"not a Cohort prefetch file" in r.stderr and b"Traceback" not in r.stderr
    r = run([COHORT, "run", "--prefetch", tmp_path / "missing", "--", ASM, "10", "1"])
    assert r.returncode != 0 and b"cannot read prefetch file" in r.stderr
    r = run([COHORT, "prefetch", "-o", tmp_path / "p.txt", tmp_path / "missing.json"])
    assert r.returncode != 0 and r.stderr.count(b"\n") == 1 and b"Traceback" not in r.stderr
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes\n")
    loads = tmp_path / "l.json"
    assert run([COHORT, "loads", "-o", loads, "--", ASM, "20000", "2"]).returncode == 0
    r = run([COHORT, "prefetch", "-o", mine, loads])
    assert r.returncode != 0 and b"not replacing it" in r.stderr
    assert mine.read_text() == "my notes\n"


def test_keep_if_faster_needs_a_command_and_keeps_nothing_from_a_failing_one(tmp_path):
    loads = tmp_path / "l.json"
    assert run([COHORT, "loads", "-o", loads, "--", ASM, "20000", "2"]).returncode == 0
    out = tmp_path / "p.txt"
    r = run([COHORT, "prefetch", "--keep-if-faster", "-o", out, loads])
    assert r.returncode != 0 and b"give it after `--`" in r.stderr
    r = run([COHORT, "prefetch", "-o", out, loads, "--", ASM, "10", "1"])
    assert r.returncode != 0 and b"give --keep-if-faster" in r.stderr
    r = run([COHORT, "prefetch", "--keep-if-faster", "--trials", "2", "-o", out, loads, "--", ASM, "10"])
    assert r.returncode != 0 and b"nothing kept" in r.stderr and b"Traceback" not in r.stderr
    assert not out.exists()
