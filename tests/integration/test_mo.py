"""MO, the online policy (COHORT_POLICY=mo): a memory request monitor per
call site, size-consistent pools for hot sites whose recent requests had one
size, the next allocator for everything else, and plain pass-through on bad
settings."""

import json

import pytest

from cohort.measure.workloads import binary as workload_binary, inputs
from conftest import COHORT, PROGRAMS, block_size, cohort_env, run
from test_dpa import functions, name_of

SIZESITES = PROGRAMS / "sizesites"
N = 10000


def mo_run(tmp_path, argv, **settings):
    stats = tmp_path / "stats.json"
    plain = run(argv)
    r = run(argv, env=cohort_env(policy="mo", stats=stats, **settings))
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    assert r.stderr == b""
    return json.loads(stats.read_text())


def sites(stats):
    """The program's own monitored sites by function name."""
    syms = functions(SIZESITES)
    return {name_of(syms, s["offset"]): s for s in stats["mo"]["sites_listed"]
            if s["module"] == str(SIZESITES)}


def test_hot_sites_of_one_size_get_pools(tmp_path):
    stats = mo_run(tmp_path, [SIZESITES, N])
    by = sites(stats)
    assert set(by) == {"node_site", "text_site", "cold_site", "late_site"}
    assert by["node_site"]["decided"] and by["node_site"]["size"] == 48 and by["node_site"]["pool"] >= 0
    assert by["late_site"]["decided"] and by["late_site"]["size"] == 40 and by["late_site"]["pool"] >= 0
    assert by["node_site"]["pool"] != by["late_site"]["pool"]
    # A new size every time: inspected once, left to the next allocator for good.
    assert by["text_site"]["decided"] and by["text_site"]["pool"] == -1
    # Five requests never make a site hot.
    assert not by["cold_site"]["decided"] and by["cold_site"]["requests_counted"] == 5
    mo = stats["mo"]
    assert (mo["sites_pooled"], mo["sites_mixed"], mo["pools"]) == (2, 1, 2)
    hot = mo["hot_requests"]
    assert hot == 50
    # Every request of the two pooled sites after the hot window, and nothing else.
    assert stats["identification"]["mo"] == 2 * (N - hot)
    # late_site's later requests of another size go to the next allocator.
    # (text_site's go there too, but once its call is patched to reach the
    # next allocator's malloc itself, nothing counts them.)
    assert stats["identification"]["mo_next"] >= N // 10


def test_decided_sites_skip_the_monitors_with_the_same_decisions(tmp_path):
    """A site decided for good has its call patched to reach its pool, or the
    next allocator, directly: node_site, late_site and text_site (the three
    hot ones) are patched, cold_site is not. With patching off nothing is.
    Either way every request is decided alike, and counted alike but for
    text_site's once its call reaches the next allocator's malloc itself."""
    on = mo_run(tmp_path, [SIZESITES, N])
    off = mo_run(tmp_path, [SIZESITES, N], patch="0")
    assert on["mo"]["sites_patched"] == on["patch"]["direct_sites"] == 3
    assert off["mo"]["sites_patched"] == off["patch"]["direct_sites"] == 0
    # Patching may allocate itself (the runtime's own requests, "reentrant").
    program = lambda s: {k: v for k, v in s["identification"].items() if k not in ("reentrant", "mo_next")}  # noqa: E731
    assert program(on) == program(off)
    assert off["identification"]["mo_next"] - on["identification"]["mo_next"] > N - 200
    assert on["identification"]["mo"] == 2 * (N - on["mo"]["hot_requests"])
    allocations = lambda s: {g["name"]: g["allocations"] for g in s["groups"]}  # noqa: E731
    assert allocations(on) == allocations(off) == {"mo-0": N - 50, "mo-1": N - 50}


def test_pools_are_size_consistent_and_empty_after_frees(tmp_path):
    stats = mo_run(tmp_path, [SIZESITES, N])
    groups = {g["name"]: g for g in stats["groups"]}
    assert set(groups) == {"mo-0", "mo-1"}
    for g in groups.values():
        assert g["allocations"] == g["frees"] == N - 50
        assert g["live_bytes"] == 0
    # One object size per pool: the peak is a whole number of that size's blocks.
    by = sites(stats)
    for site in ("node_site", "late_site"):
        g = groups[f"mo-{by[site]['pool']}"]
        assert g["peak_live_bytes"] % block_size(by[site]["size"]) == 0


def test_realloc_moves_pooled_objects_out(tmp_path):
    """A pooled object that is resized leaves its pool for the next
    allocator, so no pool holds a block of another size. The program prints
    how many resized objects are still pooled: the same output as without
    Cohort (mo_run) means none."""
    stats = mo_run(tmp_path, [SIZESITES, N, "realloc"])
    pool = sites(stats)["late_site"]["pool"]
    g = next(g for g in stats["groups"] if g["name"] == f"mo-{pool}")
    assert g["allocations"] == g["frees"] == N - 50
    assert g["live_bytes"] == 0


def test_hot_threshold_setting(tmp_path):
    stats = mo_run(tmp_path, [SIZESITES, N], mo_hot=2 * N)
    assert stats["mo"]["pools"] == 0 and stats["identification"]["mo"] == 0
    assert not any(s["decided"] for s in sites(stats).values())
    stats = mo_run(tmp_path, [SIZESITES, N], mo_hot=1)
    by = sites(stats)
    assert by["cold_site"]["decided"] and by["cold_site"]["pool"] >= 0
    assert stats["mo"]["hot_requests"] == 1


@pytest.mark.parametrize("workload", ["mt", "xform", "bintree"])
def test_threads_and_cxx_unchanged(tmp_path, workload):
    stats = mo_run(tmp_path, [workload_binary(workload), *inputs(workload)["train"]])
    assert stats["mode"] == "mo"
    assert stats["mo"]["pools"] >= 1
    assert stats["identification"]["mo"] > 0
    assert stats["mo"]["sites_patched"] >= 1   # operator new's calls in xform


def test_wrapper_hides_sizes_from_mo(tmp_path):
    """MO sees only the immediate call site: a shared wrapper mixes sizes, so
    the wrapped workload gets no pool (DPA's call chains are the answer)."""
    argv = [workload_binary("wrapped"), 2000, 1000]
    stats = mo_run(tmp_path, argv)
    assert stats["mo"]["pools"] == 0
    assert stats["mo"]["sites_mixed"] >= 1


@pytest.mark.parametrize("value", ["0", "lots", "2000000"])
def test_bad_hot_setting_warns_once(tmp_path, value):
    argv = [SIZESITES, 1000]
    plain = run(argv)
    r = run(argv, env=cohort_env(policy="mo", mo_hot=value))
    assert r.returncode == 0 and r.stdout == plain.stdout
    err = r.stderr.decode()
    assert err == f"cohort: warning: COHORT_MO_HOT={value} must be a count from 1 to 1000000; using 50\n"


def test_cli_policy_mo(tmp_path):
    argv = [SIZESITES, 1000]
    plain = run(argv)
    stats = tmp_path / "s.json"
    r = run([COHORT, "run", "--policy", "mo", "--stats", stats, "--", *argv])
    assert r.returncode == 0 and r.stdout == plain.stdout, r.stderr
    assert json.loads(stats.read_text())["mode"] == "mo"


MANYSITES = PROGRAMS / "manysites"
POOLS = 63   # runtime/system/system.h CH_PLAN_GROUPS


def test_more_valid_sites_than_groups(tmp_path):
    """80 hot sites of one size each, the first 70 of 32 bytes: 63 get pools
    of their own (the runtime's last group is the pool API's), the seven
    later 32-byte sites share one of those, and the ten sites of a size no
    pool has get none, each counted."""
    stats = mo_run(tmp_path, [MANYSITES, 100])
    mo = stats["mo"]
    assert (mo["pools"], mo["sites_shared"], mo["pools_refused"]) == (POOLS, 70 - POOLS, 10)
    syms = functions(MANYSITES)
    by = {name_of(syms, s["offset"]): s for s in mo["sites_listed"] if s["module"] == str(MANYSITES)}
    site = {int(n.split("_")[1].split(".")[0]): s for n, s in by.items() if n.startswith("site_")}
    assert sorted(site) == list(range(80))
    assert all(site[k]["decided"] for k in site)
    own = [site[k]["pool"] for k in range(POOLS)]
    assert sorted(own) == list(range(POOLS))                    # one pool each, in the order they turned hot
    sizes = {site[k]["pool"]: site[k]["size"] for k in range(POOLS)}
    for k in range(POOLS, 70):
        assert site[k]["size"] == 32 and sizes[site[k]["pool"]] == 32   # shared, and size-consistent
    for k in range(70, 80):
        assert site[k]["size"] == 32 + 16 * (k - 69) and site[k]["pool"] == -1


@pytest.mark.parametrize("patch", ["1", "0"], ids=["patched", "monitored"])
def test_a_pooled_site_whose_sizes_drift_goes_to_the_next_allocator(tmp_path, patch):
    """driftsite's xmalloc asks for 48 bytes 200 times (valid when hot: a
    pool), then for eight sizes in turn: once sampled requests show most of
    them missing the pool's size, the site is demoted for good, patched or
    not, and its later requests go to the next allocator."""
    n = 100000
    stats = mo_run(tmp_path, [PROGRAMS / "driftsite", n], patch=patch)
    mo = stats["mo"]
    assert (mo["sites_pooled"], mo["sites_demoted"], mo["pools"]) == (1, 1, 1)
    assert mo["sites_patched"] == (1 if patch == "1" else 0)
    ident = stats["identification"]
    if patch == "0":   # patched, the site's later requests reach the next allocator uncounted
        assert ident["mo"] + ident["mo_next"] >= 200 + n
    else:
        assert ident["mo_next"] < n // 2
    # Pooled: the hot window's remaining 150 requests of 48 bytes and, until
    # the demotion, one in eight; after it, none (a pool that kept the site
    # would have taken 12,500 of the drifting requests).
    pooled = {g["name"]: g["allocations"] for g in stats["groups"]}["mo-0"]
    assert pooled == ident["mo"] and 150 < pooled < 150 + 1000
    # The pooled objects were freed back into the pool after the demotion.
    assert all(g["live_bytes"] == 0 for g in stats["groups"])


def test_a_pooled_site_that_mostly_hits_keeps_its_pool(tmp_path):
    """late_site's N/10 requests of another size after N of its own are
    sampled too, and are too few to demote it."""
    stats = mo_run(tmp_path, [SIZESITES, N])
    assert stats["mo"]["sites_demoted"] == 0
