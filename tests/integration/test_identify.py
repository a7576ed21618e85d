"""Identification: a plan written by hand against a test program's known call
sites groups exactly the objects it names, on every kind of build."""

import json
import shutil
import subprocess

import pytest

from conftest import PROGRAMS, block_size, cohort_env, rest_class_name, run
from cohort.plan.handplan import call_sites, read_log, write_plan

SIZES = {"a": 32, "b": 48, "c": 24, "w1": 40, "w2": 40}


def groups_plan(tmp_path, binary, ctor_module=None):
    """group 0 'hot': objects made by make_a or make_b called from build();
    group 1 'wrapped': the shared wrapper reached through via_wrap_1; the
    malloc call in make_c is a cold entry (the quick test rejects it)."""
    modules = [binary] + ([ctor_module] if ctor_module else [])
    cm = 1 if ctor_module else 0
    ctors = ctor_module or binary
    main_callee = (lambda f: f)
    sites = [
        (0, call_sites(binary, "build", main_callee("make_a"))[0], None),
        (0, call_sites(binary, "build", main_callee("make_b"))[0], None),
        (0, call_sites(binary, "build", main_callee("via_wrap_1"))[0], None),
        (cm, call_sites(ctors, "make_c", "malloc")[0], "cold"),
    ]
    return write_plan(tmp_path / "plan", modules, sites, ["hot", "wrapped"],
                      [(0, [0]), (0, [1]), (1, [2])])


def run_beside_plain(tmp_path, binary, plan, **env):
    """binary's run under plan, checked to exit cleanly, say nothing on
    stderr and print what it prints without Cohort: (the objects' log it
    wrote, its statistics file)."""
    base = run([binary, tmp_path / "base.log"], env=cohort_env())
    stats = tmp_path / "stats.json"
    r = run([binary, tmp_path / "log"], env=cohort_env(plan=plan, stats=stats, **env))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert r.stdout == base.stdout
    return read_log(tmp_path / "log"), stats


def check_layout(objs, threads=1):
    for kind in ("a", "b", "w1"):
        assert all(g == (1 if kind == "w1" else 0) for _, g, _ in objs[kind]), kind
    for kind in ("c", "w2"):
        assert all(g == -1 for _, g, _ in objs[kind]), kind
    # group 0 in allocation order: a0 b0 a1 b1 ... each right after the last
    # (within one thread's run; a chunk boundary may intervene)
    per_thread = len(objs["a"]) // threads
    for t in range(threads):
        seq = []
        for i in range(per_thread):
            seq.append((objs["a"][t * per_thread + i][2], block_size(SIZES["a"])))
            seq.append((objs["b"][t * per_thread + i][2], block_size(SIZES["b"])))
        adjacent = sum(1 for (p, n), (q, _) in zip(seq, seq[1:]) if q == p + n)
        assert adjacent >= len(seq) - 1 - 2, f"only {adjacent} of {len(seq) - 1} consecutive"
        w = [objs["w1"][t * per_thread + i][2] for i in range(per_thread)]
        assert sum(1 for p, q in zip(w, w[1:]) if q == p + block_size(SIZES["w1"])) >= len(w) - 3


@pytest.mark.parametrize("patch", ["1", "0"], ids=["patched", "walk"])
@pytest.mark.parametrize("build", ["groups_O2", "groups_O0"])
def test_plan_groups_named_objects(tmp_path, build, patch):
    """The same groups whether the selector sites are patched (the bits
    decide, no walk) or walked (COHORT_PATCH=0)."""
    binary = PROGRAMS / build
    plan = groups_plan(tmp_path, binary)
    objs, stats = run_beside_plain(tmp_path, binary, plan, patch=patch)
    check_layout(objs)
    st = json.loads(stats.read_text())
    assert st["plan_active"] is True
    assert [g["name"] for g in st["groups"]] == ["hot", "wrapped"]
    assert st["groups"][0]["allocations"] == 4000 and st["groups"][1]["allocations"] == 2000
    ident = st["identification"]
    assert ident["cold"] == 2000            # every make_c allocation, by the quick test
    if patch == "1":
        assert ident["patched"] >= 8000 and ident["walk_group"] == ident["walk_none"] == 0
        assert st["patch"]["sites_patched"] > 0 and st["patch"]["sites_unpatched"] == 0
    else:
        assert ident["walk_group"] == 6000
        assert ident["walk_none"] >= 2000       # via_wrap_2 and the program's own stdio
        assert ident["patched"] == 0 and st["patch"]["sites_patched"] == 0
    assert ident["truncated"] == 0


@pytest.mark.parametrize("selects", [True, False, "next", "rest-max"],
                         ids=["groups-and-rest", "rest-only", "next-max", "rest-only-max"])
def test_rest_group_takes_what_nothing_else_claims(tmp_path, selects):
    """Plan format 4: a rest group receives every small allocation that no
    verdict or selector claims (cold entries, walks that match nothing);
    the groups keep theirs, and the output is unchanged. A plan with nothing
    but its rest group decides without a look at the stack, and keeps the
    rest group's max= there too."""
    binary = PROGRAMS / "groups_O2"
    sites = [
        (0, call_sites(binary, "build", "make_a")[0], None),
        (0, call_sites(binary, "build", "make_b")[0], None),
        (0, call_sites(binary, "build", "via_wrap_1")[0], None),
        (0, call_sites(binary, "make_c", "malloc")[0], "cold"),
    ]
    if selects == "next":
        # make_c's objects go to the next allocator (verdict next); the rest
        # group takes nothing over 32 bytes, so w2 (40 bytes) stays out too
        sites[3] = (0, sites[3][1], "next")
        plan = write_plan(tmp_path / "plan", [binary], sites, ["hot", "wrapped", "rest"],
                          [(0, [0]), (0, [1]), (1, [2])], version=4, rest="2 max=32")
    elif selects is True:
        plan = write_plan(tmp_path / "plan", [binary], sites, ["hot", "wrapped", "rest"],
                          [(0, [0]), (0, [1]), (1, [2])], version=4, rest=2)
    else:
        plan = write_plan(tmp_path / "plan", [binary], sites[3:], ["rest"], [], version=4,
                          rest="0 max=32" if selects == "rest-max" else 0)
    objs, stats = run_beside_plain(tmp_path, binary, plan)
    rest = 2 if selects in (True, "next") else 0
    expect = {"a": 0, "b": 0, "w1": 1} if rest else {}
    if selects == "next":
        expect.update(c=-1, w2=-1)
    if selects == "rest-max":
        expect.update(b=-1, w1=-1, w2=-1)   # over 32 bytes
    st = json.loads(stats.read_text())
    assert st["plan_active"] is True
    names = {g["id"]: g["name"] for g in st["groups"]}
    rest_max = 32 if selects in ("next", "rest-max") else 256
    for kind, size in (("a", 32), ("b", 48), ("w1", 40), ("c", 24), ("w2", 40)):
        if kind in expect:
            assert all(g == expect[kind] for _, g, _ in objs[kind]), kind
        else:   # the rest pool's class of its size
            assert all(names[g] == rest_class_name(size, rest_max=rest_max) for _, g, _ in objs[kind]), kind
    assert names[rest] == "rest/16"   # the rest group's id is its first class's
    assert sum(g["allocations"] for g in st["groups"] if g["name"].startswith("rest/")) >= \
        (0 if selects == "next" else 4000 if rest or selects == "rest-max" else 10000)
    if not rest:
        ident = st["identification"]
        assert ident["cold"] >= 10000 and st["frames_walked"]["0"] == ident["cold"]   # b, w1, w2 too
        assert sum(ident.values()) == ident["cold"] + ident["large"] + ident["reentrant"]


def test_stripped_binary_same_result(tmp_path):
    """Plans name sites by build id and offset, so stripping changes nothing."""
    binary = tmp_path / "groups_stripped"
    shutil.copy(PROGRAMS / "groups_O2", binary)
    plan = groups_plan(tmp_path, PROGRAMS / "groups_O2")
    subprocess.run(["strip", "-s", binary], check=True)
    r = run([binary, tmp_path / "log"], env=cohort_env(plan=plan))
    assert r.returncode == 0 and r.stderr == b""
    check_layout(read_log(tmp_path / "log"))


def test_sites_in_a_shared_library(tmp_path):
    binary = PROGRAMS / "groups_lib"
    lib = PROGRAMS / "libgroupsctors.so"
    plan = groups_plan(tmp_path, binary, ctor_module=lib)
    stats = tmp_path / "stats.json"
    r = run([binary, tmp_path / "log"], env=cohort_env(plan=plan, stats=stats))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    check_layout(read_log(tmp_path / "log"))
    assert json.loads(stats.read_text())["identification"]["cold"] == 2000


def test_threads_each_get_contiguous_groups(tmp_path):
    binary = PROGRAMS / "groups_O2"
    plan = groups_plan(tmp_path, binary)
    r = run([binary, tmp_path / "log", 4], env=cohort_env(plan=plan))
    assert r.returncode == 0 and r.stderr == b""
    base = run([binary, tmp_path / "base", 4], env=cohort_env())
    assert r.stdout == base.stdout
    objs = read_log(tmp_path / "log")
    for kind in ("a", "b"):
        assert all(g == 0 for _, g, _ in objs[kind])
    assert all(g == -1 for _, g, _ in objs["c"])


@pytest.mark.parametrize("allocator", ["glibc", "jemalloc", "tcmalloc", "mimalloc"])
def test_cxx_new_is_identified(tmp_path, allocator):
    binary = PROGRAMS / "cxx_groups"
    sites = [(0, call_sites(binary, "main", "_Z9make_leafl")[0], None),
             (0, call_sites(binary, "main", "_Z9make_pairl")[0], None)]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["hot"], [(0, [0]), (0, [1])])
    base = run([binary], env=cohort_env(allocator))
    r = run([binary, tmp_path / "log"], env=cohort_env(allocator, plan=plan))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert r.stdout == base.stdout
    objs = read_log(tmp_path / "log")
    assert all(g == 0 for _, g, _ in objs["leaf"] + objs["pair"])
    assert all(g == -1 for _, g, _ in objs["cold"])


def test_unknown_entry_cold_rejects_everything_unlisted(tmp_path):
    """With `unknown-entry cold`, only allocations whose innermost site the
    plan lists as `walk` are walked at all."""
    binary = PROGRAMS / "groups_O2"
    sites = [(0, call_sites(binary, "build", "make_a")[0], None),
             (0, call_sites(binary, "make_a", "malloc")[0], "walk")]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["a"], [(0, [0])], unknown_entry="cold")
    stats = tmp_path / "stats.json"
    r = run([binary, tmp_path / "log"], env=cohort_env(plan=plan, stats=stats, patch=0))
    assert r.returncode == 0 and r.stderr == b""
    objs = read_log(tmp_path / "log")
    assert all(g == 0 for _, g, _ in objs["a"])
    assert all(g == -1 for _, g, _ in objs["b"] + objs["w1"])
    ident = json.loads(stats.read_text())["identification"]
    assert ident["walk_group"] == 2000 and ident["walk_none"] == 0


def test_entry_site_verdict_decides_without_a_walk(tmp_path):
    """A `group=G` verdict (plan version 2) on the innermost application site
    puts every allocation entering there into G after one frame."""
    binary = PROGRAMS / "groups_O2"
    sites = [(0, call_sites(binary, "make_a", "malloc")[0], "group=0"),
             (0, call_sites(binary, "make_c", "malloc")[0], "cold")]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["a"], [(0, [0])], version=2)
    stats = tmp_path / "stats.json"
    r = run([binary, tmp_path / "log"], env=cohort_env(plan=plan, stats=stats))
    assert r.returncode == 0 and r.stderr == b""
    objs = read_log(tmp_path / "log")
    assert {g for _, g, _ in objs["a"]} == {0}
    assert all(g == -1 for k in ("b", "c", "w1", "w2") for _, g, _ in objs[k])
    ident = json.loads(stats.read_text())["identification"]
    # after the first, the site is patched to reach its group directly (test_direct.py)
    assert ident["entry"] + ident["direct"] == 2000 and ident["cold"] == 2000 and ident["walk_group"] == 0


def test_stop_site_ends_the_walk(tmp_path):
    """A `stop=G` site (plan version 3) ends a walk that reaches it, in G:
    objects made through the shared wrapper from via_wrap_1 go to G after
    three frames, those from via_wrap_2 (no stop site on their stack) are
    walked to the end and match nothing."""
    binary = PROGRAMS / "groups_O2"
    sites = [(0, call_sites(binary, "wrap", "malloc")[0], "walk"),
             (0, call_sites(binary, "via_wrap_1", "wrap")[0], "stop=1"),
             (0, call_sites(binary, "build", "make_a")[0], None)]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["a", "w1"], [(0, [2])], version=3)
    stats = tmp_path / "stats.json"
    for patch in "01":
        r = run([binary, tmp_path / "log"], env=cohort_env(plan=plan, stats=stats, patch=patch))
        assert r.returncode == 0 and r.stderr == b""
        objs = read_log(tmp_path / "log")
        assert {g for _, g, _ in objs["w1"]} == {1}
        assert {g for _, g, _ in objs["a"]} == {0}
        assert all(g == -1 for k in ("b", "c", "w2") for _, g, _ in objs[k])
        ident = json.loads(stats.read_text())["identification"]
        if patch == "0":
            assert ident["stop"] == 2000 and ident["walk_group"] == 2000
        else:   # the stub of the stop site and of the selector site set the bits
            assert ident["stop"] == ident["walk_group"] == 0 and ident["patched"] >= 6000


@pytest.mark.parametrize("build", ["samestack_O2", "samestack_O0"])
@pytest.mark.parametrize("selected", ["path_a", "path_b"])
def test_paths_differing_only_further_out(tmp_path, build, selected):
    """The walk reuses the outer frames of the thread's previous walk only
    after checking their return addresses: two paths with identical inner
    frames, differing in one outer return address, interleaved, each get
    their own verdict on every allocation."""
    binary = PROGRAMS / build
    sites = [(0, call_sites(binary, selected, "middle")[0], None)]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["sel"], [(0, [0])])
    stats = tmp_path / "stats.json"
    base = run([binary], env=cohort_env())
    r = run([binary, tmp_path / "log"], env=cohort_env(plan=plan, stats=stats, patch=0))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert r.stdout == base.stdout
    objs = read_log(tmp_path / "log")
    want = selected[-1]
    assert len(objs["a"]) > 500 and len(objs["b"]) > 500
    assert all(g == (0 if k == want else -1) for k in "ab" for _, g, _ in objs[k])
    st = json.loads(stats.read_text())
    assert st["identification"]["walk_group"] == len(objs[want])
    assert st["walks_joined"] > 0


def test_line_sized_blocks_start_on_lines_in_groups_only(tmp_path):
    """Under a plan, a group's blocks of whole cache lines start on a line,
    however the group's smaller blocks left its bump pointer; the gap goes
    to the group's bins, not to another group. The rest pool packs: its
    128-byte records follow each other as they come."""
    binary = PROGRAMS / "lines"
    sites = [
        (0, call_sites(binary, "main", "make_node")[0], None),
        (0, call_sites(binary, "main", "make_leaf")[0], None),
        (0, call_sites(binary, "make_record", "malloc")[0], "cold"),
    ]
    plan = write_plan(tmp_path / "plan", [binary], sites, ["hot", "rest"], [(0, [0]), (0, [1])],
                      version=4, rest=1)
    objs, stats = run_beside_plain(tmp_path, binary, plan)
    names = {g["id"]: g["name"] for g in json.loads(stats.read_text())["groups"]}
    assert all(g == 0 for _, g, _ in objs["node"] + objs["leaf"])
    assert all(names[g] == "rest/128" for _, g, _ in objs["record"])
    assert all(a % 64 == 0 for _, _, a in objs["node"])
    # node, leaf, gap, node...: the next node in the line after a leaf, or
    # right after the last node when the leaf was served from a gap
    nodes = [a for _, _, a in objs["node"]]
    assert sum(1 for p, q in zip(nodes, nodes[1:]) if q - p in (128, 192)) >= len(nodes) - 3
    records = [a for _, _, a in objs["record"]]
    assert sum(1 for p, q in zip(records, records[1:]) if q == p + 128) >= len(records) - 3


def test_controls_pack_line_sized_blocks(tmp_path):
    """COHORT_MODE=all is plain pooling, the control a plan is measured
    against: no line placement, every block right after the last."""
    binary = PROGRAMS / "lines"
    r = run([binary, tmp_path / "log"], env=cohort_env(mode="all"))
    assert r.returncode == 0, r.stderr
    objs = read_log(tmp_path / "log")
    seq = sorted(a for kind in ("node", "leaf", "record") for _, _, a in objs[kind])
    sizes = {a: block_size(24 if kind == "leaf" else 128) for kind in objs for _, _, a in objs[kind]}
    assert sum(1 for p, q in zip(seq, seq[1:]) if q == p + sizes[p]) >= len(seq) - 3


def test_random_control_draws_follow_the_seed(tmp_path):
    """COHORT_SEED fixes the random control's draws: the same seed places
    the same objects in the same groups run after run (addresses are
    randomised between runs), and another seed places them otherwise."""
    binary = PROGRAMS / "lines"

    def counts(seed, n):
        stats = tmp_path / f"stats-{seed}-{n}.json"
        r = run([binary, tmp_path / "log"], env=cohort_env(mode="random:4", seed=seed, stats=stats))
        assert r.returncode == 0, r.stderr
        return [g["allocations"] for g in json.loads(stats.read_text())["groups"]]

    first = counts(7, 1)
    assert len(first) == 4 and min(first) > 0
    assert counts(7, 2) == first == counts(7, 3)
    assert counts(8, 1) != first
