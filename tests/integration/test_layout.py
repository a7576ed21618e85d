"""The same layout every run (docs/runtime.md, "The same layout every run"):
a program that prints a hash of the order of its objects' addresses prints
one line, run after run, in every mode of the runtime and in front of every
allocator, as it does under the allocators alone. Address-space
randomisation moves the region, the libraries and the next allocator's
mappings; none of it may move an object against another."""

import pytest

from conftest import NEXT, PROGRAMS, cohort_env, run
from cohort.plan.handplan import call_sites, write_plan

BINARY = PROGRAMS / "addrorder"
RUNS = 4


def plan(tmp_path):
    site = lambda caller, callee: call_sites(BINARY, caller, callee)[0]
    sites = [(0, site("make_red", "malloc"), "group=0"), (0, site("xalloc", "malloc"), "walk"),
             (0, site("make_blue", "xalloc"), "stop=1"), (0, site("make_green", "calloc"), "group=2")]
    return write_plan(tmp_path / "plan", [BINARY], sites, ["red", "blue", "green", "rest"], [], version=4, rest=3)


def outputs(env):
    seen = set()
    for _ in range(RUNS):
        r = run([BINARY], env=env)
        assert r.returncode == 0 and r.stderr == b"", r.stderr
        seen.add(r.stdout)
    return seen


def test_the_program_is_address_sensitive_and_the_allocators_alone_are_steady():
    """The program sees a layout at all (glibc's and the runtime's differ),
    and the allocators alone print one line each."""
    alone = outputs(None)
    assert len(alone) == 1
    assert outputs(cohort_env(mode="all")) != alone


MODES = {
    "plan": dict(plan=True),
    "plan-walked": dict(plan=True, patch=0),
    "plan-checked": dict(plan=True, check=1),
    "plan-no-spares": dict(plan=True, spares=0),
    "all": dict(mode="all"),
    "random": dict(mode="random:4"),
    "dpa": dict(policy="dpa"),
    "mo": dict(policy="mo"),
}


@pytest.mark.parametrize("allocator", ["glibc", "jemalloc", "mimalloc"])
@pytest.mark.parametrize("mode", MODES)
def test_one_layout_in_every_mode(tmp_path, mode, allocator):
    if NEXT[allocator] is None and allocator != "glibc":
        pytest.skip(f"{allocator} is not installed")
    settings = dict(MODES[mode])
    if settings.pop("plan", False):
        settings["plan"] = plan(tmp_path)
    env = cohort_env(allocator, **settings)
    if allocator == "jemalloc":
        # jemalloc returns dirty pages on a clock: on a loaded machine the
        # purge lands at another point of the run and its later blocks go
        # elsewhere, so that jemalloc alone prints several layouts (4 in 12
        # runs beside two busy loops; one with the clock's purging off).
        # What is tested is Cohort's placement, not jemalloc's clock.
        env["MALLOC_CONF"] = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
    seen = outputs(env)
    assert len(seen) == 1, f"{mode} in front of {allocator} printed {len(seen)} layouts in {RUNS} runs"


def test_patched_and_walked_decisions_place_alike(tmp_path):
    """Deciding from patched call sites or by walking the stack changes
    what a decision costs, never where an object goes."""
    p = plan(tmp_path)
    assert outputs(cohort_env(plan=p)) == outputs(cohort_env(plan=p, patch=0))


def test_stubs_leave_room_for_the_brk_heap(tmp_path):
    """Without address-space randomisation glibc's brk heap starts right
    after the executable, where stubs once went when the space below was
    taken: the heap stopped a megabyte in, glibc took memory elsewhere, and
    the objects the program moves past what a pool takes (to glibc) landed
    in another order, patched only (the randomised runs above met it now
    and then, when brk happened to start that close)."""
    import shutil
    if not shutil.which("setarch") or run(["setarch", "-R", "true"]).returncode != 0:
        pytest.skip("setarch -R (util-linux) cannot turn randomisation off here")
    p = plan(tmp_path)
    seen = set()
    for patch in (1, 0):
        r = run(["setarch", "-R", BINARY], env=cohort_env(plan=p, patch=patch))
        assert r.returncode == 0 and r.stderr == b"", r.stderr
        seen.add(r.stdout)
    assert len(seen) == 1, seen


LINEAT = PROGRAMS / "lineat"


def lineat(tmp_path, at, rest_only=False):
    """lineat's blocks under a plan: nodes in group 0 (unless rest_only),
    everything else in the rest group; at: the plan's at=K per group."""
    site = lambda caller: call_sites(LINEAT, caller, "malloc")[0]
    if rest_only:
        sites, groups, rest = [], ["rest"], 0
    else:
        sites, groups, rest = [(0, site("make_node"), "group=0")], ["nodes", "rest"], 1
    plan = write_plan(tmp_path / "plan", [LINEAT], sites, groups, [], version=8, rest=rest, at=at)
    r = run([LINEAT], env=cohort_env(plan=plan))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    return {line.split()[0]: [int(x) for x in line.split()[1:]] for line in r.stdout.decode().splitlines()}


def test_line_sized_blocks_start_where_the_plan_says(tmp_path):
    """A plan's at=K: a group's blocks of whole lines start K bytes into a
    line (at a line's start without it), the rest pool's too when it says
    so (packed without it), after frees and reuse as when first bumped; other
    blocks pack as before."""
    default = lineat(tmp_path, None)
    assert default["node"] == [3000, 0, 0, 0], "a group's line-sized blocks start on a line"
    moved = lineat(tmp_path, {0: 32, 1: 48})
    assert moved["node"] == [0, 0, 3000, 0]
    assert moved["record"] == [0, 0, 0, 3000]
    assert sum(moved["note"]) == 3000
    only = lineat(tmp_path, {0: 16}, rest_only=True)
    assert only["node"] == [0, 3000, 0, 0] and only["record"] == [0, 3000, 0, 0]
