"""Direct sites: an allocation call whose own `group=G` verdict decides is
patched to reach the group allocator directly (runtime/select/direct.c). The objects
land where the quick test would have put them; what cannot be patched keeps
the quick test; COHORT_PATCH=0 turns it off."""

import json

import pytest

from conftest import PROGRAMS, block_size, cohort_env, run
from cohort.plan.handplan import call_sites, read_log, write_plan


def entry_plan(tmp_path, binary, ctor_module=None, caller="make_a", callee="malloc", group="group=0"):
    modules = [binary] + ([ctor_module] if ctor_module else [])
    site_module = 1 if ctor_module else 0
    sites = [(site_module, call_sites(ctor_module or binary, caller, callee)[0], group),
             (site_module, call_sites(ctor_module or binary, "make_c", "malloc")[0], "cold")]
    return write_plan(tmp_path / "plan", modules, sites, ["a"], [(0, [0])], version=2)


def run_stats(tmp_path, argv, plan, **env):
    stats = tmp_path / "stats.json"
    r = run(argv, env=cohort_env(plan=plan, stats=stats, **env))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    return r, json.loads(stats.read_text())


def plain_checksum(argv):
    return run(argv).stdout


def crosses_a_word(ret):
    """Whether a call's displacement (the 4 bytes before its return address)
    crosses an aligned 8-byte word: such a call cannot be patched while other
    threads may run it, so the runtime patches it when the program starts
    its first thread (runtime/select/direct.c, ch_direct_before_threads); module
    biases are page-aligned, so the file address tells."""
    return (ret - 4) % 8 > 4


@pytest.mark.parametrize("patch", ["1", "0"], ids=["direct", "quick"])
@pytest.mark.parametrize("build", ["groups_O2", "groups_O0"])
def test_direct_site_groups_what_the_quick_test_would(tmp_path, build, patch):
    binary = PROGRAMS / build
    plan = entry_plan(tmp_path, binary)
    r, st = run_stats(tmp_path, [binary, tmp_path / "log"], plan, patch=patch)
    assert r.stdout == plain_checksum([binary])
    objs = read_log(tmp_path / "log")
    assert {g for _, g, _ in objs["a"]} == {0}
    assert all(g == -1 for k in ("b", "c", "w1", "w2") for _, g, _ in objs[k])
    # grouped objects still follow one another in allocation order
    addrs = [p for _, _, p in objs["a"]]
    assert sum(1 for p, q in zip(addrs, addrs[1:]) if q == p + 32) >= len(addrs) - 3
    ident = st["identification"]
    assert ident["entry"] + ident["direct"] == 2000 and ident["cold"] == 2000
    assert st["groups"][0]["allocations"] == 2000
    if patch == "1":
        # the first allocation finds the site by a walk and patches it (one
        # thread: the program starts none, so nothing is patched before);
        # the cold site too, to the next allocator (the plan has no rest
        # group), its requests still counted cold
        assert st["patch"]["direct_sites"] == 2 and ident["direct"] == 1999
        assert st["frames_walked"]["0"] >= 1999 + 2000
    else:
        assert st["patch"]["direct_sites"] == 0 and ident["direct"] == 0


def test_a_plan_with_no_group_passes_every_request_through(tmp_path):
    """A plan that declares no group, whatever its sites' verdicts (cold
    entries, `unknown-entry walk`), can place nothing: the runtime passes
    every request through from the start (no group, no region), identifying
    nothing and patching no call. (`cohort run` leaves the runtime out
    for such a plan; this is the user who preloads it by hand.)"""
    binary = PROGRAMS / "groups_O2"
    sites = [(0, call_sites(binary, caller, "malloc")[0], "cold") for caller in ("make_a", "make_c")]
    plan = write_plan(tmp_path / "plan", [binary], sites, [], [], version=2, unknown_entry="walk")
    r, st = run_stats(tmp_path, [binary, tmp_path / "log"], plan)
    assert r.stdout == plain_checksum([binary])
    objs = read_log(tmp_path / "log")
    assert objs and all(g == -1 for k in objs for _, g, _ in objs[k])
    assert not any(st["identification"].values()), st["identification"]
    assert st["patch"]["direct_sites"] == 0 and st["groups"] == []


def test_direct_site_in_a_shared_library(tmp_path):
    """The site's call goes through the library's own PLT."""
    binary = PROGRAMS / "groups_lib"
    lib = PROGRAMS / "libgroupsctors.so"
    plan = entry_plan(tmp_path, binary, ctor_module=lib)
    r, st = run_stats(tmp_path, [binary, tmp_path / "log"], plan)
    objs = read_log(tmp_path / "log")
    assert {g for _, g, _ in objs["a"]} == {0}
    assert {g for _, g, _ in objs["c"]} == {-1}
    # make_a's site to its group, make_c's cold site to the next allocator
    assert st["patch"]["direct_sites"] == 2 and st["identification"]["direct"] == 1999
    assert st["identification"]["cold"] == 2000


def test_a_site_no_live_patch_can_reach_is_patched_before_threads_start(tmp_path):
    """A call whose displacement crosses an aligned 8-byte word cannot be
    patched by one atomic store while threads run it: it is patched when
    the program starts its first thread instead, so that eight threads that
    first reach it find it patched, and not one of their allocations pays
    the quick test."""
    found = [(b, f, ret) for b in ("groups_O2", "groups_O0") for f in ("make_a", "make_b", "make_c")
             for ret in call_sites(PROGRAMS / b, f, "malloc") if crosses_a_word(ret)]
    assert found, "no call of malloc in make_a, make_b or make_c crosses a word in either build: pick another"
    build, fn, ret = found[0]
    binary = PROGRAMS / build
    plan = write_plan(tmp_path / "plan", [binary], [(0, ret, "group=0")], ["g"], [(0, [0])], version=2)
    r, st = run_stats(tmp_path, [binary, tmp_path / "log", 8], plan)
    assert r.stdout == plain_checksum([binary, "/dev/null", 8])
    objs = read_log(tmp_path / "log")
    key = fn[len("make_"):]
    assert len(objs[key]) == 8 * 2000 and {g for _, g, _ in objs[key]} == {0}
    assert st["identification"]["direct"] == 8 * 2000
    assert st["patch"]["direct_sites"] == 1 and st["patch"]["direct_left"] == 0


def test_direct_sites_under_threads(tmp_path):
    """Eight threads allocate through the site while the first of them patches
    it (a live patch): every object still lands in its group."""
    binary = PROGRAMS / "groups_O2"
    plan = entry_plan(tmp_path, binary)
    r, st = run_stats(tmp_path, [binary, tmp_path / "log", 8], plan)
    assert r.stdout == plain_checksum([binary, "/dev/null", 8])
    objs = read_log(tmp_path / "log")
    assert len(objs["a"]) == 8 * 2000 and {g for _, g, _ in objs["a"]} == {0}
    assert {g for _, g, _ in objs["c"]} == {-1}
    ident = st["identification"]
    assert ident["entry"] + ident["direct"] == 8 * 2000 and ident["cold"] == 8 * 2000
    assert st["patch"]["direct_sites"] + st["patch"]["direct_left"] == 2   # make_a's and make_c's


@pytest.mark.parametrize("pair_cold,allocator", [(False, "glibc"), (True, "glibc"), (True, "jemalloc")],
                         ids=["pair-unplanned", "pair-cold", "pair-cold-jemalloc"])
def test_direct_operator_new(tmp_path, pair_cold, allocator):
    """A `new` expression's call of operator new is patched to the C++ stub.
    Under a plan without a rest group, a cold site's call of operator new is
    patched too, to reach the next allocator directly (jemalloc's own
    operator new; glibc's malloc, libstdc++'s operator new being a caller
    of ours): its objects are the next allocator's, each still counted cold,
    by the stub."""
    binary = PROGRAMS / "cxx_groups"
    sites = [(0, call_sites(binary, "_Z9make_leafl", "_Znwm")[0], "group=0")]
    if pair_cold:
        sites.append((0, call_sites(binary, "_Z9make_pairl", "_Znwm")[0], "cold"))
    plan = write_plan(tmp_path / "plan", [binary], sites, ["leaf"], [(0, [0])], version=2)
    r, st = run_stats(tmp_path, [binary, tmp_path / "log"], plan, allocator=allocator)
    assert r.stdout == plain_checksum([binary])
    objs = read_log(tmp_path / "log")
    assert {g for _, g, _ in objs["leaf"]} == {0}
    assert {g for _, g, _ in objs["pair"]} == {-1}
    assert st["patch"]["direct_sites"] == 1 + pair_cold and st["identification"]["direct"] == 2999
    if pair_cold:
        assert st["identification"]["cold"] == len(objs["pair"])


def test_a_call_to_another_entry_point_is_left_alone(tmp_path):
    """calloc is not one of the direct stubs' entry points: the site keeps the
    quick test, counted as left, and its allocations are still grouped."""
    binary = PROGRAMS / "groups_O2"
    sites = [(0, call_sites(binary, "run_one", "calloc")[0], "group=0")]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["batch"], [(0, [0])], version=2)
    r, st = run_stats(tmp_path, [binary, tmp_path / "log"], plan, max_size=1 << 17)   # the batch is 80,000 bytes
    assert st["patch"]["direct_sites"] == 0 and st["patch"]["direct_left"] == 1
    assert st["groups"][0]["allocations"] == 1 and st["identification"]["direct"] == 0


def run_wrapper_walk(tmp_path, threads, selects):
    """groups_O2 (with `threads` threads, 0: none) under a plan whose group
    takes the objects made through via_wrap_1, the shared wrapper's malloc a
    `walk` entry site and `selects` the group's select list (0:
    via_wrap_1's call, 1: the wrapper's malloc). Checks that the output is
    the plain run's and that via_wrap_1's objects, and no others, land in
    the group: (the run's statistics, how many objects of a kind it made, the
    run's arguments, the plan), so that a test can run it again."""
    binary = PROGRAMS / "groups_O2"
    sites = [(0, call_sites(binary, "build", "via_wrap_1")[0], None),
             (0, call_sites(binary, "wrap", "malloc")[0], "walk")]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["wrapped"], [(0, selects)], version=2)
    argv = [binary, tmp_path / "log"] + ([threads] if threads else [])
    r, st = run_stats(tmp_path, argv, plan)
    assert r.stdout == plain_checksum([binary, "/dev/null"] + ([threads] if threads else []))
    objs = read_log(tmp_path / "log")
    n = 2000 * max(threads, 1)
    assert len(objs["w1"]) == n and {g for _, g, _ in objs["w1"]} == {0}
    assert {g for _, g, _ in objs["w2"]} == {-1}
    return st, n, argv, plan


@pytest.mark.parametrize("threads", [0, 4])
def test_walk_site_decided_by_activations(tmp_path, threads):
    """A `walk` entry site (the shared wrapper's malloc) whose allocations the
    patched selector sites' activations decide is patched to skip the quick
    test: objects through via_wrap_1 land in the group, those through
    via_wrap_2 do not, as before."""
    st, n, _, _ = run_wrapper_walk(tmp_path, threads, [0])
    assert st["patch"]["sites_patched"] == 1 and st["patch"]["direct_sites"] == 1
    assert st["groups"][0]["allocations"] == n
    # all but the allocations before the patch are decided from the bits
    assert st["identification"]["patched"] >= 2 * n - 8


@pytest.mark.parametrize("threads", [0, 4])
def test_walk_site_that_is_also_a_selector(tmp_path, threads):
    """The wrapper's own malloc call is a selector too (select 0 1: the
    wrapper called through via_wrap_1), as a program's own allocation layer
    often is (perl's Perl_safesysmalloc was): patch.c gives its stub two
    variants that record the activation and then enter the activations'
    entry, and the first allocation through it sends the call to the one
    of its kind. The objects land as the walk would put them."""
    st, n, argv, plan = run_wrapper_walk(tmp_path, threads, [0, 1])
    assert st["patch"]["sites_patched"] == 2 and st["patch"]["direct_sites"] == 1
    assert st["patch"]["direct_left"] == 0
    assert st["groups"][0]["allocations"] == n
    assert st["identification"]["patched"] >= 2 * n - 8
    # with no code patched (COHORT_PATCH=0), the walks place them alike
    r, st = run_stats(tmp_path, argv, plan, patch="0")
    assert {g for _, g, _ in read_log(tmp_path / "log")["w1"]} == {0}


@pytest.mark.parametrize("rest_max,c_group", [(24, 2), (16, -1)])
def test_cold_site_goes_straight_to_the_rest_group(tmp_path, rest_max, c_group):
    """Under a plan with a rest group (format 4), a cold entry site is patched
    to reach the rest group directly, its request's size class there (group
    2, "rest/24": the second class, the one up to 24 bytes, takes the next id
    after the plan's); a request above the rest group's limit still goes to
    the next allocator (make_c's objects are 24 bytes)."""
    binary = PROGRAMS / "groups_O2"
    sites = [(0, call_sites(binary, "make_a", "malloc")[0], "group=0"),
             (0, call_sites(binary, "make_c", "malloc")[0], "cold")]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["a", "rest"], [(0, [0])], version=4,
                      rest=f"1 max={rest_max}")
    r, st = run_stats(tmp_path, [binary, tmp_path / "log"], plan)
    assert r.stdout == plain_checksum([binary])
    objs = read_log(tmp_path / "log")
    assert {g for _, g, _ in objs["a"]} == {0}
    assert {g for _, g, _ in objs["c"]} == {c_group}
    assert st["patch"]["direct_sites"] == 2
    ident = st["identification"]
    if c_group >= 0:
        assert [g["name"] for g in st["groups"]] == ["a", "rest/16", "rest/24"]
        assert st["groups"][c_group]["allocations"] >= 2000 and ident["direct"] >= 2 * 2000 - 4
        # the rest group's objects follow one another as the quick test would place them
        addrs = [p for _, _, p in objs["c"]]
        assert sum(1 for p, q in zip(addrs, addrs[1:]) if q == p + block_size(24)) >= len(addrs) - 3
    else:
        assert ident["cold"] >= 2000 and ident["direct"] >= 1999
    # With nothing patched (COHORT_PATCH=0), malloc remembers the cold
    # entry after its first request and decides the others at the door:
    # the same groups, each request counted cold.
    r, st = run_stats(tmp_path, [binary, tmp_path / "log"], plan, patch="0")
    assert r.stdout == plain_checksum([binary])
    objs = read_log(tmp_path / "log")
    assert {g for _, g, _ in objs["a"]} == {0}
    assert {g for _, g, _ in objs["c"]} == {c_group}
    assert st["identification"]["cold"] >= 2000 and st["patch"]["direct_sites"] == 0
    if c_group >= 0:
        assert st["groups"][c_group]["allocations"] >= 2000
