"""Patched selector sites (docs/runtime.md): the stubs record activations,
allocations decide from their bits, and nothing a program does to its stack
(exceptions, longjmp, recursion, threads) leaves a wrong bit behind: every
object gets the group its call sites say, patched or walked."""

import json
from collections import defaultdict

import pytest

from conftest import PROGRAMS, cohort_env, run
from cohort.plan.handplan import call_sites, calls, write_plan

BINARY = PROGRAMS / "patchsites"
GROUPS = ["a", "b", "ab", "ping", "pong", "rec"]
WANT = {"a": 0, "a-thrown": 0, "a-jumped": 0, "b": 1, "ab": 2, "ab-thrown": 2, "ab-jumped": 2,
        "rec": 5, "ping-last": 4, "pong-last": 3,
        "plain": -1, "after-catch": -1, "after-catch-deeper": -1, "after-jump": -1}


def plan(tmp_path, stops=True):
    site = lambda caller, callee: call_sites(BINARY, caller, callee)[0]
    sites = [(0, site("leaf", "malloc"), "walk"),
             (0, site("enter_a", "work"), None),
             (0, site("enter_a", "enter_b"), None),
             (0, site("enter_b", "work"), None),
             (0, site("rec_a", "rec_a"), None),
             (0, site("ping", "pong"), "stop=3" if stops else None),
             (0, site("pong", "ping"), "stop=4" if stops else None)]
    selects = [(2, [2, 3]), (0, [1]), (1, [3]), (5, [4])]
    return write_plan(tmp_path / "plan", [BINARY], sites, GROUPS, selects, version=3)


def groups_by_label(log):
    seen = defaultdict(set)
    for line in log.read_text().splitlines():
        label, group = line.split()
        seen[label].add(int(group))
    return dict(seen)


@pytest.mark.parametrize("patch", ["1", "0"], ids=["patched", "walk"])
def test_every_object_gets_its_sites_group(tmp_path, patch):
    stats = tmp_path / "stats.json"
    r = run([BINARY, tmp_path / "log", "12", "3"], env=cohort_env(plan=plan(tmp_path), stats=stats, patch=patch))
    assert r.returncode == 0 and r.stdout == b"done\n" and r.stderr == b"", r.stderr
    assert groups_by_label(tmp_path / "log") == {k: {v} for k, v in WANT.items()}
    st = json.loads(stats.read_text())
    ident = st["identification"]
    if patch == "1":
        assert st["patch"]["sites_patched"] == 6 and st["patch"]["sites_unpatched"] == 0
        assert ident["patched"] > 500
        assert st["patch"]["seeds"] >= 4           # each thread seeds once at least
        # 300 alternating stops: more than a thread keeps; the innermost
        # still decides, and the next allocation after it seeds again
        assert st["patch"]["seed_overflows"] > 0
    else:
        assert ident["patched"] == 0 and st["patch"]["sites_patched"] == 0


def test_patched_output_matches_plain_run(tmp_path):
    base = run([BINARY, tmp_path / "base"], env=cohort_env())
    r = run([BINARY, tmp_path / "log"], env=cohort_env(plan=plan(tmp_path, stops=False)))
    assert base.returncode == r.returncode == 0 and r.stdout == base.stdout and r.stderr == b""
    labels = lambda p: [line.split()[0] for line in p.read_text().splitlines()]
    assert sorted(labels(tmp_path / "log")) == sorted(labels(tmp_path / "base"))


def test_stale_plan_site_is_left_unpatched_with_one_warning(tmp_path):
    """A site whose bytes are no call (a plan for another build) is counted
    and warned about once; the rest are patched and the program runs on."""
    good = call_sites(BINARY, "enter_a", "work")[0]
    sites = [(0, good, None), (0, good + 1, None), (0, good + 2, None)]
    p = write_plan(tmp_path / "plan", [BINARY], sites, ["a", "x"], [(0, [0]), (1, [1]), (1, [2])])
    stats = tmp_path / "stats.json"
    r = run([BINARY, tmp_path / "log", "2", "1"], env=cohort_env(plan=p, stats=stats))
    assert r.returncode == 0 and r.stdout == b"done\n"
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and "2 of 3 selector call sites left unpatched" in lines[0], lines
    assert "is the plan for this build?" in lines[0]
    st = json.loads(stats.read_text())
    assert st["patch"]["sites_patched"] == 1 and st["patch"]["unpatched"]["not_a_call"] == 2
    assert groups_by_label(tmp_path / "log")["a"] == {0}


def test_patch_off_warns_on_a_bad_value(tmp_path):
    r = run([BINARY, tmp_path / "log", "1", "0"], env=cohort_env(plan=plan(tmp_path), patch="yes"))
    assert r.returncode == 0 and r.stdout == b"done\n"
    assert r.stderr.decode().count("COHORT_PATCH=yes must be 0 or 1") == 1


@pytest.mark.parametrize("threads", ["", "threaded", "thread-after"])
def test_module_loaded_by_dlopen_is_patched_late(tmp_path, threads):
    """A module the plan names, loaded after start-up: the runtime finds it
    and patches its selector sites. While the process has one thread, every
    one, as at start-up, and the runtime looks for such modules before the
    program starts its first thread (thread-after); once another thread
    runs (threaded), with one atomic store where the call's displacement
    lies within one aligned 8-byte word, and the others are left to the
    walk, counted. Either way every object it makes there is in the group."""
    lib = PROGRAMS / "libdlpatch_lib.so"
    sites = [call_sites(lib, f"make_in_lib{k}", "inner")[0] for k in range(4)]
    aligned = sum((s - 4) % 8 <= 4 for s in sites)
    assert aligned >= 1
    # the executable too: a plan naming no module loaded at start-up is off
    p = write_plan(tmp_path / "plan", [PROGRAMS / "dlpatch", lib],
                   [(0, call_sites(PROGRAMS / "dlpatch", "main", "malloc")[0], None)]
                   + [(1, s, None) for s in sites], ["lib"],
                   # the patched sites' selectors first: a selector with an unpatched
                   # site in a loaded module can only be decided by a walk
                   sorted([(0, [k + 1]) for k in range(4)], key=lambda x: (sites[x[1][0] - 1] - 4) % 8 > 4))
    stats = tmp_path / "stats.json"
    for patch in "10":
        r = run([PROGRAMS / "dlpatch", lib] + ([threads] if threads else []),
                env=cohort_env(plan=p, stats=stats, patch=patch))
        assert r.returncode == 0 and r.stderr == b"", r.stderr
        assert r.stdout.decode().split("\n") == ["lib 0"] * 40 + ["main -1", ""]
        st = json.loads(stats.read_text())
        if patch == "1":
            patched = aligned if threads == "threaded" else 4
            assert st["patch"]["sites_patched"] == patched
            assert st["patch"]["unpatched"]["unaligned_late"] == 4 - patched
            assert st["identification"]["patched"] >= 9000 * patched and st["patch"]["seeds"] >= 1
        else:
            assert st["patch"]["sites_patched"] == 0


STOPSTACKS = PROGRAMS / "stopstacks"


def stopstacks_plan(tmp_path, rest, unknown_entry=None):
    site = lambda caller, callee: call_sites(STOPSTACKS, caller, callee)[0]
    sites = [(0, site("xalloc", "malloc"), "walk"), (0, site("make_red", "new_cell"), "stop=0"),
             (0, site("make_blue", "new_cell"), "stop=1")]
    if rest:
        return write_plan(tmp_path / "plan", [STOPSTACKS], sites, ["red", "blue", "rest"], [], version=4, rest=2,
                          unknown_entry=unknown_entry)
    return write_plan(tmp_path / "plan", [STOPSTACKS], sites, ["red", "blue"], [], version=4,
                      unknown_entry=unknown_entry)


def test_a_threads_first_allocation_inside_its_own_pthread_getattr_np(tmp_path):
    """The runtime learns a thread's stack bounds at its first allocation
    that the activations decide; when that allocation is made inside the
    thread's own pthread_getattr_np (which holds the thread's lock), asking
    pthread_getattr_np again would deadlock: it reads /proc/self/maps."""
    plan = stopstacks_plan(tmp_path, rest=True, unknown_entry="walk")
    r = run([STOPSTACKS, "getattr"], env=cohort_env(plan=plan), timeout=60)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert r.stdout == b"getattr: ok\n"


@pytest.mark.parametrize("where", ["below", "above"])
def test_stop_records_and_other_stacks(tmp_path, where):
    """Inside red's call on the thread's stack, a coroutine on a stack below
    or above it makes blue: its blue objects get blue's group (the thread's
    live red record is not theirs), and red's cell, made after it back on the
    thread's stack, red's (a coroutine above replaced the last record without
    keeping it: the thread seeds again)."""
    r = run([STOPSTACKS, where], env=cohort_env(plan=stopstacks_plan(tmp_path, rest=True)))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert r.stdout.decode().strip() == f"{where}: red 0 blue 1 wrong red 0 wrong blue 0"


def test_a_request_of_nothing_that_nothing_live_decides(tmp_path):
    """malloc(0) through a walk entry with no stop live, under a plan with
    no rest group: the empty stack sends it to the next allocator."""
    r = run([STOPSTACKS, "zero"], env=cohort_env(plan=stopstacks_plan(tmp_path, rest=False)))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert r.stdout == b"zero: ok\n"


def test_a_stop_site_no_stub_can_reach(tmp_path):
    """A stop site at an indirect call stays unpatched: a record of another
    stop site may then be live outside it, so nothing is decided from the
    records or the activations, and every object is walked to its group,
    green's made inside red's call included (the innermost stop decides)."""
    site = lambda caller, callee: call_sites(STOPSTACKS, caller, callee)[0]
    indirect = [ret for fn, _, operand, ret in calls(STOPSTACKS) if fn == "make_green" and operand.startswith("*")]
    assert len(indirect) == 1, "make_green's call of the helper is not one indirect call"
    sites = [(0, site("xalloc", "malloc"), "walk"), (0, site("make_red", "new_cell"), "stop=0"),
             (0, site("make_blue", "new_cell"), "stop=1"), (0, indirect[0], "stop=2")]
    plan = write_plan(tmp_path / "plan", [STOPSTACKS], sites, ["red", "blue", "green", "rest"], [], version=4,
                      rest=3)
    stats = tmp_path / "stats.json"
    r = run([STOPSTACKS, "indirect"], env=cohort_env(plan=plan, stats=stats))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"indirect: red 0 blue 1 green 2 wrong 0 0 0\n"
    st = json.loads(stats.read_text())
    assert st["patch"]["sites_unpatched"] >= 1
    assert st["identification"]["patched"] == 0 and st["identification"]["stop"] >= 5 * 1000
