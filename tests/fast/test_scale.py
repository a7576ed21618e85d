"""A group's worth at the scale the plan runs at (cohort/plan/scale.py;
docs/planner.md, "A miss at the run's scale"): users profile a small input
and run a large one, so the planner prices a group's avoided misses at the
cache level that serves them there, and its identification at the
allocations made there."""

import copy
import json

from conftest import COHORT, run
from cohort.plan import scale as scaling
from cohort.plan.planner import make_plan, report

# The machine the tests price for, whatever this one's sysfs says.
SIZES = {1: 32 << 10, 2: 1 << 20, 3: 32 << 20}
SIZE = 48


def wrapped_kinds(n, passes, misses=True):
    """HALO's Figure 2 behind one wrapper: trades (context 0), quotes (1)
    and remarks (2), n of each, all made through one allocation function
    (entry site 1, which every allocation enters at, so each is decided from
    the constructor's call site one frame out: 2, 3 or 4). Trades and quotes
    are walked `passes` times together; remarks are set aside. All three
    share a size class, so the rest pool interleaves them."""
    site = lambda i: {"id": i, "module": 0, "offset": 0x100 + i, "call": "direct",  # noqa: E731
                      "function": None, "file": None, "line": None}
    walked = 2 * n * passes
    contexts = []
    for i, (s, acc) in enumerate(((2, walked), (3, walked), (4, n))):
        c = {"id": i, "sites": [1, s, 9], "allocations": n, "accesses": acc, "truncated": False,
             "bytes": SIZE * n, "min_size": SIZE, "max_size": SIZE, "frees": 0,
             "lifetime": {"mean": None, "max": None, "live_at_exit": n}}
        if misses:   # the walked kinds are evicted between passes: a miss a line a pass
            c["d1_misses"] = acc // 2 if i < 2 else n
        contexts.append(c)
    edges = [(0, 0, n * passes), (1, 1, n * passes), (0, 1, 2 * n * passes), (0, 2, n // 10), (1, 2, n // 10)]
    return {"parameters": {"max_size": 4096},
            "totals": {"accesses": 2 * walked + n, "allocations": 3 * n, "peak_live_bytes": 3 * n * SIZE},
            "target": {"argv": ["/x/kinds", str(n), str(passes)], "executable": "/x/kinds"},
            "modules": [{"id": 0, "path": "/x/kinds", "build_id": "ab", "system": False}],
            "sites": [site(i) for i in range(12)],
            "contexts": contexts,
            "graph": {"nodes": [0, 1, 2], "edges": [list(e) for e in edges], "coverage": 1.0}}


def test_machine_levels_and_their_prices(tmp_path):
    """Levels from sysfs, data and unified caches only; L2 at the planner's
    miss price, the rest at what cohort-latency measured; a distance past
    every cache is memory's."""
    for i, (level, kind, size) in enumerate(((1, "Data", "32K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "1024K"), (3, "Unified", "32768K"))):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert scaling.cache_sizes(str(tmp_path)) == SIZES
    assert scaling.cache_sizes(str(tmp_path / "none")) == scaling.FALLBACK_SIZES
    machine, l1 = scaling.Machine.here({"miss_ns": 3.5}, SIZES)
    assert l1 == 32 << 10
    assert machine.serves(512 << 10) == ("L2", 3.5)
    assert machine.serves(8 << 20) == ("L3", scaling.LEVEL_NS[3] - scaling.L1_NS)
    assert machine.serves(64 << 20) == ("memory", scaling.MEMORY_NS - scaling.L1_NS)


def test_a_group_behind_a_wrapper_is_priced_where_the_plan_runs():
    """Trained small (6,000 objects of each kind, 3 passes: 864 KiB live, in
    L2), the walked kinds' group saves less than deciding its objects from
    the constructors' patched call sites costs: priced at the training run,
    it is dropped. The production run is larger; at ten times the
    training run (the default, or --scale 10) its objects are touched again
    after megabytes of other data, each avoided miss is served by L3, and the
    group pays; the remarks, used more with the group than with each other,
    go to the rest pool either way."""
    profile = wrapped_kinds(6000, 3)
    # Identification priced dear (ten times a stop record's measured cost):
    # the scale alone moves the verdict. The saving is bounded by the
    # walked kinds' misses, half their affinitive accesses.
    dear = {"stop_ns": 5.0, "stop_stub_ns": 1.0, "empty_ns": 5.0}
    small = make_plan(profile, scale=1, cache_sizes=SIZES, costs=dear)
    assert small.groups == []
    note = next(n for n in small.notes if "costs more than its placement can save" in n)
    assert "at 1 times the profiled run (--scale)" in note and "served by L2, 3.5 ns" in note, note
    # At what a stop site's record costs, HALO's rule holds at any scale: the
    # kinds decided by their constructors' stop sites are grouped.
    assert [sorted(g.members) for g in make_plan(profile, scale=1, cache_sizes=SIZES).groups] == [[0, 1]]

    for plan, said in ((make_plan(profile, cache_sizes=SIZES, costs=dear), "(the default: no --scale)"),
                       (make_plan(profile, scale=10, cache_sizes=SIZES, costs=dear), "(--scale)")):
        assert [sorted(g.members) for g in plan.groups] == [[0, 1]]
        w = plan.worth[0]
        assert w.pays and w.at.level == "L3" and w.at.accesses == 10
        assert w.cost_ns == (w.walk_ns + w.stub_ns) * 10
        assert f"at 10 times the profiled run {said}" in report(plan, profile)
    far = make_plan(profile, scale=100, cache_sizes=SIZES)
    assert far.worth[0].at.level == "memory"


def test_growth_is_fitted_on_a_run_of_another_size():
    """Given a second run twice the size, with twice the passes, each
    context grows as it did between the runs: the walked kinds' accesses
    with the square of the size. A run of the same size fits nothing."""
    small, large = wrapped_kinds(6000, 3), wrapped_kinds(12000, 6)
    large["target"]["argv"] = ["/x/kinds", "12000", "6"]
    plan = make_plan(small, validations=[large], cache_sizes=SIZES)
    w = plan.worth[0]
    assert w.at.growth.source == "`/x/kinds 12000 6`"
    assert abs(w.at.allocations - 10) < 1e-9          # allocations grow with the size
    assert abs(w.at.accesses - 100) < 1e-6             # accesses with its square: 10 ** 2
    assert w.pays
    assert make_plan(small, validations=[copy.deepcopy(small)], cache_sizes=SIZES).pricing.growth.source \
        == "default"


def test_a_few_objects_whose_number_does_not_grow_keep_their_distance():
    """Three objects read on every record, evicted now and then: fitted on a
    run twice the size, their lines do not grow, so the distance between
    two touches of one of them stays where it was; in proportion to the
    scale (no second run) it would grow tenfold."""
    def parser(records):
        p = wrapped_kinds(records, 1)
        p["contexts"][2].update(allocations=3, bytes=3 * 200, min_size=200, max_size=200,
                                accesses=records * 3, d1_misses=records // 4)
        p["target"]["argv"] = ["/x/kinds", str(records)]
        return p
    train, other = parser(20000), parser(40000)
    keys = ({c["id"]: c["id"] for c in train["contexts"]}, {c["id"]: c["id"] for c in other["contexts"]})
    fitted = scaling.fit(train, other, keys)
    assert fitted.contexts[2][2] == 0.0                # its bytes do not grow
    pricing = scaling.Pricing.of(train, {"miss_ns": 3.5}, fitted, SIZES)
    from cohort.plan.transfer import context_misses, run_accesses
    misses = context_misses(train["contexts"], [2], run_accesses(train["contexts"]))
    trained = misses[2] * 64
    at = pricing.at(train["contexts"], [2], misses, False)
    assert abs(at.distance - trained) / trained < 0.01
    proportional = scaling.Pricing.of(train, {"miss_ns": 3.5}, scaling.uniform(), SIZES)
    assert abs(proportional.at(train["contexts"], [2], misses, False).distance - 10 * trained) / trained < 0.1


def test_a_group_used_more_with_others_goes_before_the_groups_it_would_leave_alone():
    """While the remarks are a group of their own, nothing else shares the
    walked kinds' place in the rest pool, and their group seems to gain
    nothing there. The remarks' group, used more with the walked kinds than
    with each other, goes first whatever it costs; then the walked kinds'
    group is weighed against the rest pool the remarks are in."""
    profile = wrapped_kinds(6000, 3)
    profile["graph"]["edges"].append([2, 2, 1000])   # the remarks have a loop: HALO forms their group
    plan = make_plan(profile, cache_sizes=SIZES)
    assert [sorted(g.members) for g in plan.groups] == [[0, 1]]
    assert plan.worth[0].strangers > 0


def test_scale_must_be_a_number_of_at_least_one(tmp_path):
    """--scale 0.5 or a word: one line, exit 2, nothing written."""
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(wrapped_kinds(100, 1)))
    for bad in ("0.5", "ten", "nan"):
        r = run([COHORT, "plan", str(path), "-o", str(tmp_path / "plan"), "--scale", bad], text=True)
        assert r.returncode == 2, r.stderr
        assert "a scale is a number of at least 1" in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (tmp_path / "plan").exists()


def rest_model(one, classes, objects=20_000):
    return {"max_size": 256, "objects": objects, "accesses": 501_000,
            "one": {"d1_misses": one, "ll_misses": 0}, "classes": {"d1_misses": classes, "ll_misses": 0}}


def test_the_rest_pool_is_decided_for_the_allocator_underneath(tmp_path):
    """In front of glibc the rest pool stays. In front of jemalloc, whose
    size classes keep small objects of a size together as the rest pool's
    classes do, every ungrouped object goes to jemalloc, unless the
    profile's model says one pool in allocation order misses less than
    classes by more than its pairs cost over jemalloc's; a profile without
    the model leaves it out. The plan names its allocator."""
    from cohort.plan.cost import COST_DEFAULTS
    from cohort.plan.planner import render
    p = wrapped_kinds(6000, 3)
    glibc = make_plan(p, cache_sizes=SIZES)
    assert glibc.rest is not None and glibc.allocator == "glibc"
    bare = make_plan(p, allocator="jemalloc", cache_sizes=SIZES)
    assert bare.rest is None and bare.allocator == "jemalloc"
    assert any("no model of the rest pool's layouts" in n for n in bare.notes)
    assert "# made for allocator jemalloc" in render(bare, p)
    cheap = 20_000 * COST_DEFAULTS["rest_ns"] / COST_DEFAULTS["miss_ns"]   # misses its pairs' cost buys
    p["rest_layouts"] = rest_model(100, 100 + int(cheap) - 1)
    assert make_plan(p, allocator="jemalloc", cache_sizes=SIZES).rest is None
    p["rest_layouts"] = rest_model(100, 100 + int(cheap) + 1000)
    kept = make_plan(p, allocator="jemalloc", cache_sizes=SIZES)
    assert kept.rest is not None and kept.rest_one
    assert any("the rest pool stays, as one pool" in n for n in kept.notes)
    assert make_plan(p, allocator="jemalloc", rest="pool", cache_sizes=SIZES).rest is not None


def test_a_group_whose_use_does_not_grow_with_the_input_is_dropped():
    """A gawk report's shape: objects made and used together while the
    input is read, then left alone. Trained on one run, the group is priced
    as if its use grew with its allocations, and kept (the plan says the
    growth was assumed). A second run twice the size whose objects are as
    many times more, but used no more, fits that growth: their decisions
    cost ten times more at the default scale, their use saves no more, and
    the group goes."""
    small = wrapped_kinds(6000, 3)
    dear = {"stop_ns": 5.0, "stop_stub_ns": 1.0, "empty_ns": 5.0}   # dear: see above
    alone = make_plan(small, cache_sizes=SIZES, costs=dear)
    assert len(alone.groups) == 1
    assert any("priced at 10 times the training run, with every figure assumed" in n for n in alone.notes)
    large = wrapped_kinds(12000, 3)
    large["target"]["argv"] = ["/x/kinds", "12000", "used once"]
    for c, c_small in zip(large["contexts"], small["contexts"]):
        c["accesses"], c["d1_misses"] = c_small["accesses"], c_small["d1_misses"]
    large["graph"]["edges"] = copy.deepcopy(small["graph"]["edges"])
    large["totals"]["accesses"] = small["totals"]["accesses"]
    fitted = make_plan(small, validations=[large], cache_sizes=SIZES, costs=dear)
    assert fitted.groups == []
    assert not any("with every figure assumed" in n for n in fitted.notes)


def test_a_plan_without_a_rest_pool_pays_for_the_runtime_it_loads():
    """With no rest pool (in front of jemalloc, or --rest none), the runtime
    is loaded for the groups alone, and every allocation they do not take is
    handed on at passthrough_ns: the groups pay for it, and say so. With a
    rest pool the runtime is there anyway, and they do not."""
    from cohort.plan.cost import COST_DEFAULTS, worth_text
    p = wrapped_kinds(6000, 3)
    bare = make_plan(p, allocator="jemalloc", cache_sizes=SIZES)
    w = bare.worth[0]
    assert bare.rest is None and w.passed == 6000   # the remarks
    assert w.passthrough_ns == 6000 * COST_DEFAULTS["passthrough_ns"]
    assert w.cost_ns == (w.walk_ns + w.stub_ns + w.passthrough_ns + w.taken_ns) * w.grown
    assert "the runtime it needs hands 6000 other allocations on to the next allocator" in worth_text(w)
    pooled = make_plan(p, cache_sizes=SIZES)
    assert pooled.rest is not None and pooled.worth[0].passed == 0 and pooled.worth[0].passthrough_ns == 0


def test_a_group_pays_for_its_pairs_over_an_allocator_of_size_classes():
    """In front of jemalloc with no rest pool, a group takes its objects
    from jemalloc, whose thread cache serves a pair for rest_ns less than a
    pool does: each of the group's allocations costs that, and the text
    says so. prodcons's cells, freed by the other thread, had a group of
    their own that saved at most 0.6 ms against 4.9 ms of pairs at ten
    times, and ran 1.145 x jemalloc. From the rest pool, or in front of
    glibc (whose pair costs more than a pool's), a group takes nothing."""
    from cohort.plan.cost import COST_DEFAULTS, pair_cost, worth_text
    p = wrapped_kinds(6000, 3)
    bare = make_plan(p, allocator="jemalloc", cache_sizes=SIZES)
    w = bare.worth[0]
    mine = sum(p["contexts"][c]["allocations"] for c in bare.groups[0].members)
    assert w.taken == mine > 0 and w.taken_ns == mine * COST_DEFAULTS["rest_ns"]
    assert f"its own {mine} allocations, taken from an allocator of size classes, cost a pool's pair" in worth_text(w)
    assert pair_cost("jemalloc", "none", COST_DEFAULTS) == COST_DEFAULTS["rest_ns"]
    assert pair_cost("jemalloc", "pool", COST_DEFAULTS) == pair_cost("glibc", "none", COST_DEFAULTS) == 0
    for plan in (make_plan(p, allocator="glibc", rest="none", cache_sizes=SIZES),
                 make_plan(p, allocator="jemalloc", rest="pool", cache_sizes=SIZES)):
        assert all(x.taken == 0 and x.taken_ns == 0 for x in plan.worth)
    # dear enough pairs drop the group
    dear = make_plan(p, allocator="jemalloc", cache_sizes=SIZES, costs={"rest_ns": 1e4})
    assert dear.groups == [] and any("cost a pool's pair over that allocator's" in n for n in dear.notes)


def test_allocations_entered_through_a_system_module_are_walks_the_groups_pay_for():
    """A string that libstdc++ makes enters the allocator from libstdc++'s
    code, shared by every caller: under a plan with groups the runtime walks
    past libstdc++'s frames to its entry site to decide it, where a plan of
    the rest pool alone decides nothing. The groups pay for those walks as
    they pay for the other decisions their plan makes (a walk of the system
    frames and the entry's), and say so; enough of them drop a group.
    `objects`'s one group saved at most 2.5 ms against 5.6 ms of such
    walks, and its plan ran 23% more instructions than its rest pool
    alone."""
    from cohort.plan.cost import COST_DEFAULTS, entry_decisions, framed_walks, worth_text

    def with_strings(m):
        p = wrapped_kinds(6000, 3)
        p["contexts"].append({"id": 3, "sites": [10, 9], "allocations": m + 5, "accesses": m, "truncated": False,
                              "bytes": 32 * m, "min_size": 32, "max_size": 32, "frees": m,
                              "lifetime": {"mean": 3, "max": 9, "live_at_exit": 5},
                              "through_system": {"allocations": m, "frames": 2 * m}})
        return p

    p = with_strings(1000)
    assert framed_walks(p["contexts"], lambda c: False, COST_DEFAULTS) == (
        1000, 1000 * COST_DEFAULTS["walk_ns"] + 3000 * COST_DEFAULTS["frame_ns"])
    assert framed_walks(p["contexts"], lambda c: c["id"] == 3, COST_DEFAULTS) == (0, 0)   # walked anyway
    assert entry_decisions(p["contexts"][3:], lambda c: False, None) == (0, 5)   # the rest at their stubs
    plan = make_plan(p, cache_sizes=SIZES)
    assert len(plan.groups) == 1
    w = plan.worth[0]
    assert w.framed == 1000 and w.framed_ns == 1000 * COST_DEFAULTS["walk_ns"] + 3000 * COST_DEFAULTS["frame_ns"]
    assert "1000 other allocations entered through a system module (libstdc++, libc), walked past its frames " \
        "to their entry site" in worth_text(w)
    assert make_plan(wrapped_kinds(6000, 3), cache_sizes=SIZES).worth[0].framed == 0   # profiles without the count
    many = make_plan(with_strings(2_000_000), cache_sizes=SIZES)
    assert many.groups == [] and any("entered through a system module" in n for n in many.notes)


def test_what_a_group_does_to_other_allocations_grows_as_they_do():
    """A group whose objects do not grow with the input still pays, for
    every other allocation of a run that does, what its runtime does to them
    (hands them on, with no rest pool): fitted on a second run in which the
    remarks grew tenfold and the walked kinds not at all, the group's own
    identification keeps its size while the allocations it hands on grow as
    the remarks did. cppcheck's ValueFlow values, made anew for each file,
    were charged 0.94 ms for the allocations their runtime hands on, not
    grown, against a run 18.7 times the training run's allocations."""
    from cohort.plan.cost import COST_DEFAULTS, worth_text
    small = wrapped_kinds(6000, 3)
    large = wrapped_kinds(6000, 30)
    large["target"]["argv"] = ["/x/kinds", "6000", "30", "remarks"]
    remarks = large["contexts"][2]
    remarks.update(allocations=60000, accesses=60000, bytes=SIZE * 60000, d1_misses=60000)
    large["totals"]["allocations"] = 72000
    plan = make_plan(small, allocator="jemalloc", validations=[large], cache_sizes=SIZES)
    pricing = plan.pricing
    assert pricing.growth.source == "`/x/kinds 6000 30 remarks`"
    others = pricing.allocations(small["contexts"], [2])
    assert others > 10 and abs(pricing.allocations(small["contexts"], [0, 1]) - 1) < 1e-9
    assert plan.groups, plan.notes
    w = plan.worth[0]
    assert abs(w.grown - 1) < 1e-9 and abs(w.others_grown - others) < 1e-9
    assert w.passed == 6000
    assert abs(w.cost_ns - ((w.walk_ns + w.stub_ns + w.taken_ns) * w.grown
                            + (w.passthrough_ns + w.entry_ns + w.framed_ns) * others)) < 1e-6
    handed = 6000 * COST_DEFAULTS["passthrough_ns"] * others / 1e6
    assert f"hands 6000 other allocations on to the next allocator, about {handed:.2f} ms" in worth_text(w)
    # In proportion to a scale (no second run), the two factors are one.
    uniform = make_plan(small, allocator="jemalloc", cache_sizes=SIZES)
    assert all(x.others_grown == x.grown for x in uniform.worth)
