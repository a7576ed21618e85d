"""A plan's rest pool split by size class (docs/planner.md, "The rest pool"):
objects no group claims go to one group per size class, each named after
the largest request it takes; COHORT_REST=one keeps HALO's single pool."""

import json

import pytest

from conftest import COHORT, PROGRAMS, block_size, cohort_env, rest_class_name, run
from cohort.plan.handplan import call_sites, read_log, write_plan

BINARY = PROGRAMS / "restsizes"
SIZES = [24, 40, 20, 100, 0, 256, 16]


def rest_only_plan(tmp_path, rest="0 max=256"):
    """Nothing to decide: the lane serves every small request (no walk)."""
    return write_plan(tmp_path / "plan", [BINARY], [], ["rest"], [], version=4, rest=rest,
                      unknown_entry="cold")


def plan_with_group(tmp_path, ngroups=1, rest_max=256):
    """make_hot's objects in group 0, the rest pool the last group, every
    other entry cold (the quick test sends it to the rest pool)."""
    sites = [(0, call_sites(BINARY, "make_hot", "malloc")[0], "group=0"),
             (0, call_sites(BINARY, "make", "malloc")[0], "cold")]
    names = [f"g{i}" for i in range(ngroups)] + ["rest"]
    return write_plan(tmp_path / "plan", [BINARY], sites, names, [], version=4,
                      rest=f"{ngroups} max={rest_max}", unknown_entry="cold")


def run_sizes(tmp_path, plan, sizes, threads=1, **settings):
    base = run([BINARY, tmp_path / "base.log", threads, *sizes])
    stats = tmp_path / "stats.json"
    r = run([BINARY, tmp_path / "log", threads, *sizes], env=cohort_env(plan=plan, stats=stats, **settings))
    assert r.returncode == 0, r.stderr
    assert r.stdout == base.stdout
    st = json.loads(stats.read_text())
    assert st["plan_active"] is True
    return r, read_log(tmp_path / "log"), st


def check_classes(objs, st, sizes, rest_max=256, threads=1, hot_in_rest=True):
    """Each size's objects in its class's group, apart from every other
    class's, and packed there in allocation order (per thread)."""
    names = {g["id"]: g["name"] for g in st["groups"]}
    group_of_size = {}
    for n in sizes:
        got = {g for _, g, _ in objs[f"s{n}"]}
        assert len(got) == 1, (n, got)
        group_of_size[n] = got.pop()
        assert names[group_of_size[n]] == rest_class_name(n, rest_max=rest_max), n
    for a in sizes:
        for b in sizes:
            same = rest_class_name(a, rest_max=rest_max) == rest_class_name(b, rest_max=rest_max)
            assert (group_of_size[a] == group_of_size[b]) == same, (a, b)
    if threads == 1:
        for n in sizes:
            if sum(1 for m in sizes + [32] * hot_in_rest if rest_class_name(m) == rest_class_name(n)) > 1:
                continue   # a class shared by two sizes (or with make_hot's) interleaves them
            addrs = [p for _, _, p in sorted(objs[f"s{n}"])]
            step = block_size(n)
            assert sum(1 for p, q in zip(addrs, addrs[1:]) if q == p + step) >= len(addrs) - 3, n
    return group_of_size


@pytest.mark.parametrize("threads", [1, 2])
def test_a_rest_only_plan_places_each_size_class_apart(tmp_path, threads):
    """The plan of a program whose contexts transfer nothing: its rest pool
    alone, served by the frameless lane, now by size class."""
    _, objs, st = run_sizes(tmp_path, rest_only_plan(tmp_path), SIZES + [32], threads)
    groups = check_classes(objs, st, SIZES + [32], threads=threads)
    assert {g for _, g, _ in objs["hot"]} == {groups[32]}
    assert groups[16] == groups[0] == 0                      # the rest group's own id: its first class
    assert [g["name"] for g in st["groups"]] == [f"rest/{16 * (i + 1)}" for i in range(16)]
    assert sum(g["allocations"] for g in st["groups"]) == threads * 2000 * (len(SIZES) + 2)
    assert st["identification"]["cold"] >= threads * 2000 * (len(SIZES) + 1)


def test_a_plans_groups_keep_theirs_and_the_rest_splits(tmp_path):
    """Under a plan with a group, the quick test's cold entries go to the
    rest pool's classes; the group keeps its objects whatever their size."""
    _, objs, st = run_sizes(tmp_path, plan_with_group(tmp_path), SIZES + [32])
    groups = check_classes(objs, st, SIZES + [32], hot_in_rest=False)
    assert {g for _, g, _ in objs["hot"]} == {0} and 0 not in groups.values()
    names = [g["name"] for g in st["groups"]]
    assert names[0] == "g0" and names[1] == "rest/16" and names[2] == "rest/32"   # classes follow the plan's ids
    assert st["groups"][0]["allocations"] == 2000


def test_one_rest_pool_keeps_its_small_sizes_together_and_classes_above_256_bytes(tmp_path):
    """`rest 0 max=1000 one` (a plan made with --rest-max 1000): the sizes up
    to 256 bytes share the one pool, in allocation order; larger ones keep
    a class per power of two, as under the split, so that varied large
    blocks do not fragment the pool of small ones. The lane serves the
    small ones, the ordinary path the classes."""
    sizes = [24, 300, 40, 600, 256, 1000]
    plan = write_plan(tmp_path / "plan", [BINARY], [], ["rest"], [], version=7, rest="0 max=1000 one",
                      unknown_entry="cold")
    _, objs, st = run_sizes(tmp_path, plan, sizes)
    names = {g["id"]: g["name"] for g in st["groups"]}
    group = {n: {g for _, g, _ in objs[f"s{n}"]} for n in sizes}
    assert all(len(g) == 1 for g in group.values()), group
    group = {n: g.pop() for n, g in group.items()}
    assert group[24] == group[40] == group[256] and names[group[24]] == "rest"
    assert names[group[300]] == "rest/512" and names[group[600]] == names[group[1000]] == "rest/1000"
    # the small sizes interleave in allocation order in the one pool
    small = sorted((a, n) for n in (24, 40, 256) for _, _, a in objs[f"s{n}"][:50])
    assert len({n for _, n in small[:6]}) == 3


def test_classes_above_256_bytes_are_powers_of_two(tmp_path):
    """A rest group allowed larger requests (max=1024): one class per power
    of two above 256 bytes, the last named after the group's limit."""
    sizes = [300, 512, 600, 1000, 200]
    _, objs, st = run_sizes(tmp_path, rest_only_plan(tmp_path, rest="0 max=1000"), sizes)
    groups = check_classes(objs, st, sizes, rest_max=1000)
    assert groups[300] == groups[512] != groups[600] == groups[1000]
    assert [g["name"] for g in st["groups"]][-2:] == ["rest/512", "rest/1000"]


def test_one_rest_pool_when_asked_or_when_ids_run_out(tmp_path):
    """COHORT_REST=one keeps every size in the rest group (HALO's rest pool,
    the comparison); a plan that leaves one group id gives the second class
    that id and the larger sizes with it."""
    _, objs, st = run_sizes(tmp_path, rest_only_plan(tmp_path), SIZES, rest="one")
    assert {g for n in SIZES for _, g, _ in objs[f"s{n}"]} == {0}
    assert [g["name"] for g in st["groups"]] == ["rest"]

    (tmp_path / "many").mkdir()
    _, objs, st = run_sizes(tmp_path / "many", plan_with_group(tmp_path / "many", ngroups=61), [16, 24, 100, 256])
    names = {g["id"]: g["name"] for g in st["groups"]}
    got = {n: {g for _, g, _ in objs[f"s{n}"]} for n in (16, 24, 100, 256)}
    assert got[16] == {61} and got[24] == got[100] == got[256] == {62}
    assert names[61] == "rest/16" and names[62] == "rest/256" and len(names) == 63


def test_a_bad_rest_setting_warns_once_and_keeps_the_classes(tmp_path):
    r, objs, st = run_sizes(tmp_path, rest_only_plan(tmp_path), [24, 100], rest="all")
    assert r.stderr.decode().count("COHORT_REST=all") == 1
    assert r.stderr.decode().splitlines()[0].endswith("COHORT_REST=all must be size or one; "
                                                      "the rest group stays as the plan says")
    check_classes(objs, st, [24, 100])


def test_a_rest_limit_inside_a_class_names_it_after_the_limit(tmp_path):
    """max=100: the lane serves requests up to 100 bytes, the last class
    (97 to 100) named after the limit; 101 bytes go to the next allocator."""
    _, objs, st = run_sizes(tmp_path, rest_only_plan(tmp_path, rest="0 max=100"), [100, 90, 24, 101])
    check_classes(objs, st, [100, 90, 24], rest_max=100)
    assert {g for _, g, _ in objs["s101"]} == {-1}
    assert [g["name"] for g in st["groups"]][-1] == "rest/100"


SHAPES = PROGRAMS / "restshapes"


@pytest.fixture(scope="module")
def shape_profiles(tmp_path_factory):
    """restshapes profiled in both modes: {mode: (profile path, profile)}."""
    out = {}
    for mode in ("walk", "pairs", "large"):
        d = tmp_path_factory.mktemp(mode)
        r = run([COHORT, "profile", "-o", d / "profile.json", "--", SHAPES, mode])
        assert r.returncode == 0, r.stderr
        out[mode] = (d / "profile.json", json.loads((d / "profile.json").read_text()))
    return out


def test_the_profile_models_both_rest_shapes(shape_profiles):
    """profiler/layouts.c places every small object again in one pool and by
    size class: a list whose nodes were allocated between unread payloads
    misses less by class; entries visited with the keys allocated beside
    them, in one pool."""
    walk = shape_profiles["walk"][1]["rest_layouts"]
    pairs = shape_profiles["pairs"][1]["rest_layouts"]
    for m in (walk, pairs):
        assert m["max_size"] == 256 and m["objects"] == 8000 and m["accesses"] > 0
        assert set(m["one"]) == set(m["classes"]) == {"d1_misses"}   # a D1 per model, no LL (raw version 9)
    # 4000 nodes walked 20 times: about a line each in one pool, half a line by class
    assert walk["classes"]["d1_misses"] < 0.6 * walk["one"]["d1_misses"]
    assert pairs["one"]["d1_misses"] < 0.7 * pairs["classes"]["d1_misses"]


def test_the_profile_says_who_lay_beside_whom_and_each_context_s_misses(shape_profiles):
    """Each modelled layout also counts, per pair of contexts, how often an
    object of one was placed beside a live object of the other, and gives
    each context the D1 misses of its objects at their places in each
    (raw version 6). The walk's nodes, allocated in turn with payloads of
    another size: in one pool each node lies after the payload made before
    it; by class, after the node made before it. Their misses are fewer by
    class; the payloads', written once and never read, are a miss or so a
    line in both."""
    p = shape_profiles["walk"][1]
    ctx = p["contexts"]
    node = max((c for c in ctx if c["max_size"] == 32), key=lambda c: c["accesses"])
    payload = next(c for c in ctx if c["max_size"] == 208)
    pairs = {layout: {(c, n): k for c, n, k in p["rest_layouts"]["beside"][layout]} for layout in ("one", "classes")}
    n, q = node["id"], payload["id"]
    assert pairs["one"].get((n, q), 0) >= 3990 and pairs["one"].get((n, n), 0) == 0
    assert pairs["classes"].get((n, n), 0) >= 3990 and pairs["classes"].get((n, q), 0) == 0
    assert node["beside"] == {"one": pairs["one"][(n, q)], "classes": pairs["classes"][(n, n)]}
    m = node["layout_d1_misses"]
    assert m["classes"] < 0.6 * m["one"]
    lines = 4000 * (208 // 64 + 1)
    assert all(payload["layout_d1_misses"][k] <= lines for k in ("one", "classes"))


def test_the_split_model_places_large_objects_by_power_of_two(shape_profiles):
    """The split model places every tracked object, those over 256 bytes in
    a class per power of two, as the split rest pool and jemalloc's classes
    do: 1000-byte records made in turn with 32-byte nodes lie beside each
    other there; the single pool leaves them at their own addresses, so
    they meet no neighbour of its."""
    p = shape_profiles["large"][1]
    ctx = p["contexts"]
    record = next(c for c in ctx if c["max_size"] == 1000)
    pairs = {(c, n): k for c, n, k in p["rest_layouts"]["beside"]["classes"]}
    assert record["beside"]["one"] == 0
    assert record["beside"]["classes"] == pairs[(record["id"], record["id"])] >= 3990
    assert p["rest_layouts"]["objects"] == sum(c["allocations"] for c in ctx if 0 < c["max_size"] <= 256)


def rest_line(plan_path):
    return next(line for line in plan_path.read_text().splitlines() if line.startswith("rest "))


def test_the_plan_keeps_the_rest_shape_that_missed_less(shape_profiles, tmp_path):
    for mode, one in (("walk", False), ("pairs", True)):
        plan = tmp_path / f"{mode}.plan"
        r = run([COHORT, "plan", "-o", plan, shape_profiles[mode][0]])
        assert r.returncode == 0, r.stderr
        assert rest_line(plan).split()[-1] == "one" if one else "one" not in rest_line(plan).split(), mode
        assert ("in one pool, in allocation order: by class the profile's model of both saves" if one else
                "split by size class: by class the profile's model of both saves") in r.stdout.decode(), mode
        stats = tmp_path / f"{mode}.stats"
        base = run([SHAPES, mode])
        r = run([SHAPES, mode], env=cohort_env(plan=plan, stats=stats))
        assert r.returncode == 0 and r.stdout == base.stdout, r.stderr
        names = [g["name"] for g in json.loads(stats.read_text())["groups"]]
        assert "rest" in names or "rest/16" in names, (mode, names)
        # one pool keeps the sizes up to 256 bytes together (classes stay above)
        small = [n for n in names if n.startswith("rest/") and int(n.split("/")[1]) <= 256]
        assert bool(small) != one, (mode, names)


def test_plan_takes_the_rest_shape_it_is_given(shape_profiles, tmp_path):
    for mode, given in (("walk", "one"), ("pairs", "classes")):   # each the shape its model did not choose
        plan = tmp_path / f"{mode}.plan"
        r = run([COHORT, "plan", "--rest-shape", given, "-o", plan, shape_profiles[mode][0]])
        assert r.returncode == 0, r.stderr
        assert (rest_line(plan).split()[-1] == "one") == (given == "one"), (mode, rest_line(plan))
        assert f"(--rest-shape {given}: measured on a larger input, or asked for)" in r.stdout.decode()


def test_cohort_rest_overrides_the_plans_shape(tmp_path):
    plan = rest_only_plan(tmp_path)
    text = plan.read_text().replace("cohort-plan 4", "cohort-plan 7").replace("rest 0 max=256", "rest 0 max=256 one")
    plan.write_text(text)
    _, objs, st = run_sizes(tmp_path, plan, SIZES)
    assert [g["name"] for g in st["groups"]] == ["rest"]
    (tmp_path / "size").mkdir()
    _, objs, st = run_sizes(tmp_path / "size", plan, SIZES, rest="size")
    check_classes(objs, st, SIZES)


@pytest.mark.parametrize("version,rest,message", [
    (6, "0 max=256 one", "rest takes one option, max=BYTES"),
    (7, "0 one one", "rest takes the options max=BYTES (8 to 131072) and one, each once"),
    (7, "0 max=64 max=64", "rest takes the options max=BYTES"),
    (7, "0 all", "rest takes the options max=BYTES"),
])
def test_a_bad_rest_option_is_named(tmp_path, version, rest, message):
    plan = write_plan(tmp_path / "plan", [BINARY], [], ["rest"], [], version=version, rest=rest,
                      unknown_entry="cold")
    r = run([BINARY, tmp_path / "log", 1, 24], env=cohort_env(plan=plan))
    assert r.returncode == 0
    err = r.stderr.decode()
    assert err.count("\n") == 1 and message in err and err.rstrip().endswith("running without grouping"), err
