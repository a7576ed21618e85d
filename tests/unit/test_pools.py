"""The explicit pool API (runtime/include/cohort/pool.h): its promises in
every mode and in front of every allocator, its misuse stopping the program
with the right name, and the processlist example keeping each list apart."""

import json

import pytest

from conftest import BUILD, UNIT, cohort_env, run

POOL_GROUP = 63   # runtime/system/system.h CH_POOL_GROUP
PROCESSLIST = BUILD / "examples" / "pools" / "processlist"


@pytest.mark.parametrize("allocator", ["glibc", "jemalloc", "tcmalloc", "mimalloc"])
@pytest.mark.parametrize("mode", ["off", "all", "random:4"])
def test_pool_api(tmp_path, mode, allocator):
    stats = tmp_path / "s.json"
    r = run([UNIT / "test_pool", "stats", stats], env=cohort_env(allocator, mode=mode))
    assert r.returncode == 0, r.stderr.decode()
    assert b"test_pool: ok" in r.stdout
    pools = json.loads(stats.read_text())["pools"]
    # every pool destroyed: nothing live, no chunk left
    assert pools["made"] == pools["destroyed"] > 0 and pools["live"] == 0
    assert pools["live_bytes"] == 0 and pools["chunks"] == 0 and pools["resident_bytes"] == 0
    # big_destroy's objects (chunks report their live bytes in batches of 4 KiB)
    assert pools["peak_live_bytes"] >= 0.95 * 200000 * 48
    assert pools["allocations"] > 200000


def test_destroyed_pool_chunks_wait_then_go(tmp_path):
    """pooldestroy keeps the pool's chunks as spares, and those beyond
    COHORT_SPARES are purged once they have waited a second."""
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    r = run([UNIT / "test_pool", "decay", before, after], env=cohort_env(mode="off", spares=4))
    assert r.returncode == 0, r.stderr.decode()
    b, a = json.loads(before.read_text()), json.loads(after.read_text())
    assert b["chunks_purged"] == 0 and b["pools"]["chunks"] == 0
    # 20 MiB in about 21 chunks: all but the 4 spares allowed, and the one taken again, go
    assert a["chunks_purged"] >= 15, a["chunks_purged"]
    assert a["spares_reused"] >= 1


@pytest.mark.parametrize("setting", [{"policy": "dpa"}, {"policy": "mo"}, {"mode": "all", "check": 1}])
def test_pool_api_beside_policies(setting):
    """Pools beside the online policies and the checked mode, whose
    redzones pool objects do not carry."""
    r = run([UNIT / "test_pool"], env=cohort_env(**setting))
    assert r.returncode == 0, r.stderr.decode()


def test_pool_api_without_runtime_env():
    """Linked with -lcohort and run with no setting at all: pools work."""
    r = run([UNIT / "test_pool"], env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr.decode()


@pytest.mark.parametrize("mode", ["off", "all"])
def test_pool_api_from_cxx_by_preloading(mode):
    r = run([UNIT / "test_pool_cxx"], env=cohort_env(mode=mode))
    assert r.returncode == 0, r.stderr.decode()
    assert b"test_pool_cxx: ok" in r.stdout


@pytest.mark.parametrize("mistake,message", [
    ("double-poolfree", "poolfree(): double free detected"),
    ("poolfree-after-free", "poolfree(): double free detected"),
    ("free-after-poolfree", "free(): double free detected"),
    ("wrong-pool", "is an object of another pool, not of pool"),
    ("malloc-pointer", "is not an object of pool"),
    ("interior", "poolfree(): invalid pointer"),
    ("alloc-after-destroy", "poolalloc(): pool 0x"),
    ("destroy-twice", "pooldestroy(): pool 0x"),
    ("copy-after-destroy", "poolalloc(): pool 0x"),
    ("reused-copy", "poolfree(): pool 0x"),
    ("free-after-destroy", "free(): double free or invalid pointer"),
    ("uninitialised", "is not a pool (poolinit or poolcreate makes one)"),
    ("realloc-freed", "poolrealloc(): freed object"),
])
@pytest.mark.parametrize("mode", ["off", "all"])
def test_pool_misuse_stops_the_program(mistake, message, mode):
    r = run([UNIT / "test_pool", mistake], env=cohort_env(mode=mode))
    err = r.stderr.decode()
    assert r.returncode == -6, (r.returncode, err)   # SIGABRT, as the C library's checks
    assert message in err and b"not stopped" not in r.stdout, err
    if "destroy" in mistake and "free" not in mistake:
        assert "was destroyed" in err


def test_processlist_lists_apart(tmp_path):
    """APA's Figure 1: each list's nodes are one run of addresses in a pool
    of its own, and the output is malloc's."""
    plain = run([PROCESSLIST, "malloc", "20000", "1"], env=cohort_env(mode="off"))
    assert plain.returncode == 0, plain.stderr.decode()
    for mode in ["pools", "destroy"]:
        r = run([PROCESSLIST, mode, "20000", "1"], env=cohort_env(mode="off"))
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout == plain.stdout
    r = run([PROCESSLIST, "addresses", "20000"], env=cohort_env(mode="off"))
    assert r.returncode == 0, r.stderr.decode()
    lists = {}
    for line in r.stdout.decode().split("\n"):
        if line:
            name, addr, group = line.split()
            lists.setdefault(name, []).append((int(addr, 16), int(group)))
    assert set(lists) == {"A", "B"} and len(lists["A"]) + len(lists["B"]) == 20000
    for name, nodes in lists.items():
        assert all(g == POOL_GROUP for _, g in nodes)
        steps = {b[0] - a[0] for a, b in zip(nodes, nodes[1:])}
        assert steps == {16}, (name, sorted(steps)[:5])   # one after another, in list order
    a, b = lists["A"], lists["B"]
    assert a[-1][0] < b[0][0] or b[-1][0] < a[0][0]      # the two runs do not interleave
