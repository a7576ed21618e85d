"""DPA, the online policy (COHORT_POLICY=dpa): adaptive partial call chains
through wrappers found by machine-code analysis, thresholds, merging by the
storage shape graph, and plain pass-through on bad settings."""

import json
import subprocess

import pytest

from cohort.measure.workloads import binary as workload_binary, inputs
from conftest import BUILD, cohort_env, run

WORKLOADS = BUILD / "workloads"


def functions(binary):
    """(start, name) of the binary's functions, sorted, from its symbol table."""
    out = subprocess.run(["nm", "-n", str(binary)], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            syms.append((int(parts[0], 16), parts[2]))
    return syms


def name_of(syms, offset):
    best = "?"
    for start, name in syms:
        if start <= offset:
            best = name
    return best


def dpa_run(tmp_path, argv, stdin=None, **settings):
    stats = tmp_path / "stats.json"
    plain = run(argv, input=stdin)
    r = run(argv, env=cohort_env(policy="dpa", stats=stats, **settings), input=stdin)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    return r, json.loads(stats.read_text())


def chains(stats, binary):
    syms = functions(binary)
    return [(c, [name_of(syms, f["offset"]) for f in c["frames"]]) for c in stats["dpa"]["chains"]]


def placements(stats):
    """Each pool's name and how many objects it received."""
    return sorted((g["name"], g["allocations"]) for g in stats["groups"])


def dpa_allocations(ident):
    """The allocations DPA decided, by any of its paths."""
    return ident["dpa"] + ident["dpa_hinted"] + ident["dpa_prefix"] + ident["dpa_below"]


def test_wrapped_two_level_wrapper(tmp_path):
    """safe_malloc -> xalloc -> malloc: safe_malloc is a tail call (no frame of
    its own), xalloc a wrapper; each chain ends at the caller that links the
    object into its structure, so the three structures get three groups."""
    binary = WORKLOADS / "wrapped"
    _, stats = dpa_run(tmp_path, [binary, 20000, 100000])
    named = chains(stats, binary)
    assert sorted(tuple(f) for _, f in named) == [
        ("xalloc", "insert_entry"), ("xalloc", "new_record"), ("xalloc", "tree_insert")]
    assert stats["dpa"]["chain_lengths"]["2"] == 3
    assert stats["dpa"]["wrapper_verdicts"]["yes"] == 1
    assert stats["dpa"]["pools"] == 3
    assert all(c["pool"] >= 0 for c, _ in named)
    assert stats["identification"]["dpa"] + stats["identification"]["dpa_hinted"] > 40000


def test_hints_name_the_group_at_the_outermost_call(tmp_path):
    """Once a chain's group has its pool, the chain's outermost call is
    patched to name it (DPA's section 4): the allocations through it are
    decided by checking the chain on the stack, not by probing the table.
    COHORT_PATCH=0 keeps every call as it was, with the same groups."""
    argv = [WORKLOADS / "wrapped", 20000, 100000]
    _, stats = dpa_run(tmp_path, argv)
    assert stats["dpa"]["hints_patched"] == 3
    assert [c["hint"] for c in stats["dpa"]["chains"]] == ["patched"] * 3
    ident = stats["identification"]
    assert ident["dpa_hinted"] > 40000 and ident["dpa_hinted"] > 100 * ident["dpa"]
    _, unpatched = dpa_run(tmp_path, argv, patch=0)
    assert unpatched["dpa"]["hints_patched"] == 0
    assert [c["hint"] for c in unpatched["dpa"]["chains"]] == ["none"] * 3
    assert unpatched["identification"]["dpa_hinted"] == 0
    assert unpatched["identification"]["dpa"] == ident["dpa"] + ident["dpa_hinted"]
    assert unpatched["dpa"]["pools"] == stats["dpa"]["pools"]


def test_trusted_hints_place_as_checked_hints_do(tmp_path):
    """A hint whose allocations keep going to its pool is trusted: malloc
    takes its pool with no stack check but now and then. Where every hinted
    call allocates its own chain, trusting changes no object's place."""
    argv = [WORKLOADS / "wrapped", 20000, 100000]
    _, stats = dpa_run(tmp_path, argv)
    assert stats["dpa"]["hints_trusted"] == 3 and stats["dpa"]["hints_distrusted"] == 0
    _, unpatched = dpa_run(tmp_path, argv, patch=0)
    assert unpatched["dpa"]["hints_trusted"] == 0
    assert placements(stats) == placements(unpatched)


def test_a_trusted_hint_found_wrong_is_checked_again(tmp_path):
    """trusthint: A's hint is trusted, then its call stops allocating on
    every other round, and the hint it left is found by an allocation of B's,
    which no hint names. The next check finds B's pool and ends the trust,
    which never comes back (every other check fails): at most one gap of
    unchecked allocations, 64, went to A's pool."""
    binary = BUILD / "tests" / "programs" / "trusthint"
    count = 100000
    _, stats = dpa_run(tmp_path, [binary, count])
    assert stats["dpa"]["hints_trusted"] == 1 and stats["dpa"]["hints_distrusted"] == 1
    pool_of = {c["size"]: c["pool"] for c in stats["dpa"]["chains"]}
    made = {g["id"]: g["allocations"] for g in stats["groups"]}
    a_total, b_total = count + count // 2, 2 * count
    assert made[pool_of[16]] <= a_total - 100 + 64
    assert made[pool_of[48]] >= b_total - 200 - 64
    assert made[pool_of[16]] + made[pool_of[48]] + stats["identification"]["dpa_below"] == a_total + b_total


def test_a_recursive_builder_gets_its_prefix_named(tmp_path):
    """recbuild: step() calls itself (through a pointer) before it makes its
    entry, so the hint that its recursive call set is gone by the time the
    entry is made, and the chain was found by probing. After 64 such misses
    the call one frame in (step's call of new_entry) is patched to name the
    chain's prefix, and almost nothing is probed any more: the allocations
    take one trie step from the prefix's node. (patients' step calls itself
    directly: its chains stop at it.)"""
    argv = [BUILD / "tests" / "programs" / "recbuild", 300, 8]
    _, stats = dpa_run(tmp_path, argv)
    ident = stats["identification"]
    total = dpa_allocations(ident)
    assert stats["dpa"]["prefix_hints"] >= 1 and stats["dpa"]["hints_trusted"] >= 1
    assert ident["dpa_prefix"] > 0.3 * total
    assert ident["dpa"] < 0.01 * total
    _, unpatched = dpa_run(tmp_path, argv, patch=0)
    assert unpatched["identification"]["dpa"] > 0.9 * total


def test_a_recursive_evaluator_finds_its_group_in_the_prefix_memo(tmp_path):
    """receval, recursing through a pointer: eval() makes its node after its
    recursive calls, so the hint of the call that asked is gone, and that
    call tells the group: kept (the first recursive call), churned (the
    second) or main's. The prefix up to eval's call of make() is named
    instead, and is never trusted (its allocations go to two pools in turn);
    its memo holds the three groups one frame beyond it, and the allocations
    through it are placed exactly as probing alone places them."""
    argv = [BUILD / "tests" / "programs" / "receval", 400, 8, "indirect"]
    _, stats = dpa_run(tmp_path, argv)
    ident = stats["identification"]
    total = dpa_allocations(ident)
    assert total == 400 * 511
    assert stats["dpa"]["object_groups"] == 3
    assert stats["dpa"]["prefix_hints"] == 1 and stats["dpa"]["prefix_memos"] == 3
    assert ident["dpa_prefix"] > 0.45 * total and ident["dpa"] < 0.01 * total
    _, unpatched = dpa_run(tmp_path, argv, patch=0)
    assert unpatched["dpa"]["prefix_memos"] == 0
    assert placements(stats) == placements(unpatched)


def test_a_wrapper_that_calls_itself_ends_its_chains(tmp_path):
    """receval, recursing directly: eval() returns the node it makes, so it
    is a wrapper, and it calls its own entry, so the frames beyond it are its
    recursion's call sites. Its chains stop at it: one group, whose hint at
    eval's call of make() names it, so nearly every allocation is hinted and
    none needs the prefix or a probe."""
    binary = BUILD / "tests" / "programs" / "receval"
    _, stats = dpa_run(tmp_path, [binary, 400, 8])
    assert stats["dpa"]["wrapper_verdicts"]["recursive"] == 1
    named = chains(stats, binary)
    assert [f for _, f in named] == [["xalloc", "make", "eval"]]
    ident = stats["identification"]
    total = dpa_allocations(ident)
    assert total == 400 * 511
    assert ident["dpa_hinted"] > 0.99 * total and ident["dpa_prefix"] == 0
    assert stats["dpa"]["prefix_hints"] == 0


def test_prefix_hints_where_no_call_tells_the_group(tmp_path):
    """Six groups, each a pair of calls: make() allocates at two places and
    build() calls it at three. The chains' outermost call, which ends all
    six, names one group; the calls one frame in (build's) name the chains'
    prefixes instead, two to a call, and the allocations through them take
    one trie step from the prefix's node. COHORT_PATCH=0 finds the same
    groups by probing alone."""
    binary = BUILD / "tests" / "programs" / "crossgroups"
    _, stats = dpa_run(tmp_path, [binary, 100000])
    named = chains(stats, binary)
    assert len(named) == 6
    assert {tuple(f) for _, f in named} == {("xalloc", "make", "build", "main")}
    assert len({(c["frames"][1]["offset"], c["frames"][2]["offset"]) for c, _ in named}) == 6
    assert stats["dpa"]["prefix_hints"] == 3
    ident = stats["identification"]
    assert ident["dpa_prefix"] > 0.7 * 300000
    assert ident["dpa"] + ident["dpa_hinted"] + ident["dpa_prefix"] + ident["dpa_below"] == 300000
    _, unpatched = dpa_run(tmp_path, [binary, 100000], patch=0)
    assert unpatched["dpa"]["prefix_hints"] == 0
    assert unpatched["identification"]["dpa_prefix"] == 0
    assert unpatched["dpa"]["object_groups"] == 6


def test_churn_pool_goes_back(tmp_path):
    """A group that never has more than one object live gets a pool at its
    threshold, and goes to the churn pool, shared by every such group, once
    sampling has seen its own pool hold no more than its state's lines; a
    group of the same size whose objects stay live keeps its pool."""
    binary = BUILD / "tests" / "programs" / "churnpools"
    _, stats = dpa_run(tmp_path, [binary, 100000])
    named = chains(stats, binary)
    temp = [c for c, f in named if f[0] == "temp"]
    kept = [c for c, f in named if f[0] != "temp"]
    churn = stats["dpa"]["churn_pool"]
    assert churn >= 0 and len(temp) == 1 and temp[0]["pool"] == churn
    assert kept and all(c["pool"] >= 0 and c["pool"] != churn for c in kept)
    assert stats["dpa"]["pools_demoted"] == 1
    assert f"dpa-churn-{churn}" in [g["name"] for g in stats["groups"]]
    assert stats["identification"]["dpa_below"] < 1000


def test_interpreter_wrappers(tmp_path):
    """The stdin interpreter shape: kind_alloc -> xmalloc -> malloc. xmalloc
    and the constructors that fill in their object and return it are both
    wrappers, so those chains reach the code that uses the object."""
    binary = WORKLOADS / "calc"
    program = run([binary, "--generate", 48, 2]).stdout
    _, stats = dpa_run(tmp_path, [binary, 10], stdin=program)
    named = chains(stats, binary)
    assert named and all(f[0] == "xmalloc" for _, f in named)
    constructors = {"node_alloc", "num_alloc", "cell_alloc", "list_alloc", "str_alloc", "dict_alloc", "entry_alloc"}
    through = [f for _, f in named if f[1] in constructors]
    assert len(through) >= 10
    assert all(len(f) >= 3 for f in through), [f for f in through if len(f) < 3]
    # symbol_alloc hands its object to memcpy: not a wrapper, the chain stops there
    assert all(len(f) == 2 for _, f in named if f[1] == "symbol_alloc")
    assert stats["dpa"]["merges"]["type1"] >= 1


def test_a_recursive_builder_is_one_group(tmp_path):
    """bintree's builder makes a node, links its two subtrees into it and
    returns it: a wrapper that calls itself. Its chains stop at it, so the
    tree is one group whatever the recursive call that asked for a node
    (before, each of the two recursive calls had a group of its own, and
    the storage shape graph merged them into one pool again)."""
    binary = workload_binary("bintree")
    _, stats = dpa_run(tmp_path, [binary, *inputs("bintree")["train"]])
    assert stats["dpa"]["wrapper_verdicts"]["recursive"] >= 1
    named = chains(stats, binary)
    assert [f for c, f in named if c["size"] == 32] == [["build"]]


def test_threshold_keeps_small_groups_out(tmp_path):
    """Below COHORT_DPA_MIN_OBJECTS a group has no pool: the next allocator serves."""
    _, stats = dpa_run(tmp_path, [WORKLOADS / "wrapped", 2000, 1000], dpa_min_objects=100000)
    assert stats["dpa"]["pools"] == 0
    assert stats["identification"]["dpa"] == 0
    assert stats["identification"]["dpa_below"] > 0
    assert all(c["pool"] == -1 for c in stats["dpa"]["chains"])


def test_size_threshold(tmp_path):
    """Objects above COHORT_DPA_MAX_SIZE go to the next allocator."""
    _, stats = dpa_run(tmp_path, [WORKLOADS / "wrapped", 2000, 1000], dpa_max_size=16)
    assert stats["dpa"]["max_size"] == 16
    assert stats["dpa"]["pools"] == 0
    assert stats["identification"]["large"] > 0


@pytest.mark.parametrize("workload", ["mt", "xform"])
def test_threads_and_cxx_unchanged(tmp_path, workload):
    _, stats = dpa_run(tmp_path, [workload_binary(workload), *inputs(workload)["train"]])
    assert stats["mode"] == "dpa"
    assert stats["dpa"]["pools"] >= 1


@pytest.mark.parametrize("setting, message", [
    ({"policy": "nonsense"}, "COHORT_POLICY=nonsense is not halo, dpa or mo; grouping is off"),
    ({"policy": "halo"}, "COHORT_POLICY=halo needs a plan (COHORT_PLAN); grouping is off"),
    ({"policy": "dpa", "dpa_min_objects": "lots"}, "COHORT_DPA_MIN_OBJECTS=lots must be a count"),
    ({"policy": "dpa", "dpa_max_size": "0"}, "COHORT_DPA_MAX_SIZE=0 must be from 8 to 4096 bytes"),
])
def test_bad_settings_warn_once(tmp_path, setting, message):
    argv = [WORKLOADS / "wrapped", 2000, 1000]
    plain = run(argv)
    r = run(argv, env=cohort_env(**setting))
    assert r.returncode == 0
    assert r.stdout == plain.stdout
    err = r.stderr.decode()
    assert err.count(message) == 1, err
    assert err.count("\n") == 1, err


def test_cli_policy(tmp_path):
    """`cohort run --policy dpa` needs no plan; an unknown policy is the
    runtime's one warning, and the program runs as it would without Cohort."""
    from conftest import COHORT
    argv = [WORKLOADS / "wrapped", 2000, 1000]
    plain = run(argv)
    stats = tmp_path / "s.json"
    r = run([COHORT, "run", "--policy", "dpa", "--stats", stats, "--", *argv])
    assert r.returncode == 0 and r.stdout == plain.stdout, r.stderr
    assert json.loads(stats.read_text())["mode"] == "dpa"
    r = run([COHORT, "run", "--policy", "bogus", "--", *argv])
    assert r.returncode == 0 and r.stdout == plain.stdout
    assert r.stderr.decode().strip() == "cohort: warning: COHORT_POLICY=bogus is not halo, dpa or mo; grouping is off"


def test_no_chain_before_the_caller_is_ripe(tmp_path):
    """A caller that has made fewer than min_objects allocations gets no
    chain: no unwinding, no wrapper analysis, the next allocator. From its
    min_objects-th allocation on its chain is built and counted."""
    from conftest import PROGRAMS
    sizesites = PROGRAMS / "sizesites"
    _, few = dpa_run(tmp_path, [sizesites, 60])   # every site of the program makes at most 60
    mine = [c for c, _ in chains(few, sizesites) if c["frames"][0]["module"] == str(sizesites)]
    assert mine == []
    assert few["dpa"]["unripe"] >= 3 * 60          # node, text and late sites, 60 each at least
    _, many = dpa_run(tmp_path, [sizesites, 1000], dpa_min_objects=100)
    node = [c for c, f in chains(many, sizesites) if f and f[0] == "node_site"]
    assert len(node) == 1
    # counted from the caller's 100th allocation on, and pooled at 100 more
    assert node[0]["objects_counted"] == 100 and node[0]["pool"] >= 0


@pytest.mark.parametrize("attempt", range(3))
def test_many_chains_from_threads(tmp_path, attempt):
    """256 chains share their first frame (wrap's call of malloc), so that
    frame's children in the compound table outgrow block after block while
    four threads read them (runtime/policy/dpa/chain_trie.c). Each chain is its own
    group of three frames, whichever thread met it first, and none is lost
    to a full table. Three runs: a thread whose walk met another refreshing
    the modules once took the wrapper's frame for one in no module, and every
    allocation of the run for one chain of no frame."""
    from conftest import PROGRAMS
    binary = PROGRAMS / "manychains"
    _, stats = dpa_run(tmp_path, [binary, 4, 100])
    dpa = stats["dpa"]
    assert dpa["object_groups"] == 256 and dpa["chain_lengths"]["3"] == 256
    assert dpa["table_full"] == 0 and dpa["groups_refused"] == 0
    named = chains(stats, binary)
    assert {f[0] for _, f in named} == {"wrap"}
    assert len({f[1] for _, f in named}) == len(named)   # a make_ function each
    assert all(f[1].startswith("make_") and f[2] == "worker" for _, f in named)
