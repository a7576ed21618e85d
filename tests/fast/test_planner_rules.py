"""The planner's rules on hand-made graphs and synthetic profiles (HALO's
grouping and identification, the cost model's verdicts, the rest pool's and
a group's shape), with no build: nothing here runs a program or reads a plan
back through the runtime's parser."""

import pytest

from cohort.plan.identification import identify, member_conjunction
from cohort.policies.halo import group, merge_benefit, score
from synthetic_profiles import BUILDER, BUILDER_EDGES, FREE_WALKS, MODEST_COSTS, churn_profile, shape_profile

# ---- grouping -------------------------------------------------------------


def test_score_is_weighted_density_with_loops():
    assert score({(1, 2): 10}, [1, 2]) == 10           # 10 / (0 + 1)
    assert score({(1, 2): 10, (1, 1): 4}, [1, 2]) == 7  # 14 / (1 + 1)
    assert score({(1, 2): 6, (2, 3): 6}, [1, 2, 3]) == 4  # 12 / 3
    assert score({(1, 2): 6}, [1]) == 0.0               # nothing to divide by
    assert score({(1, 1): 5}, [1]) == 5
    assert score({(1, 1): 0, (1, 2): 3}, [1, 2]) == 3   # a zero loop is no loop


def test_merge_benefit():
    edges = {(1, 2): 10, (1, 1): 4, (2, 3): 1}
    # S({1,2}) = 14/2 = 7; S({1}) = 4, S({2}) = 0 -> 7 - 0.95 * 4
    assert merge_benefit(edges, [1], 2, 0.05) == pytest.approx(7 - 0.95 * 4)
    # adding 3 to {1,2}: S = 15 / (1 + 3) = 3.75 < 0.95 * 7
    assert merge_benefit(edges, [1, 2], 3, 0.05) < 0
    # tolerance lets a slightly worse merge through
    e2 = {(1, 2): 10, (1, 3): 9, (2, 3): 9}   # S({1,2}) = 10, S({1,2,3}) = 28/3
    assert merge_benefit(e2, [1, 2], 3, 0.05) < 0
    assert merge_benefit(e2, [1, 2], 3, 0.10) > 0


def test_two_disjoint_cliques_become_two_groups():
    acc = {n: 100 for n in range(1, 7)}
    edges = {(1, 2): 50, (1, 3): 50, (2, 3): 50, (4, 5): 40, (4, 6): 40, (5, 6): 40}
    gs = group(acc, edges, total_accesses=600)
    assert [sorted(g.members) for g in gs] == [[1, 2, 3], [4, 5, 6]]
    assert all(g.kept for g in gs)
    assert gs[0].weight == 150 and gs[0].score == 50


def test_weakly_connected_node_stays_ungrouped():
    acc = {1: 100, 2: 90, 3: 80, 4: 70}
    edges = {(1, 2): 50, (1, 3): 50, (2, 3): 50, (1, 4): 2}
    gs = group(acc, edges, total_accesses=340)
    assert [sorted(g.members) for g in gs] == [[1, 2, 3]]


def test_seed_is_the_hotter_node_and_ties_go_to_lower_ids():
    acc = {1: 10, 2: 20, 3: 5, 4: 5}
    edges = {(1, 2): 30, (3, 4): 30}
    gs = group(acc, edges, total_accesses=40, max_members=1)
    # equal strongest edges: (1,2) first (lower ids); its hotter node is 2;
    # then (3,4), seeded by 3 on the tie; then no edge joins available nodes
    assert [g.members for g in gs] == [[2], [3]]
    assert [g.kept for g in gs] == [False, False]  # singletons without loops weigh 0


def test_thresholds():
    acc = {1: 100, 2: 100, 3: 10, 4: 10}
    edges = {(1, 2): 100, (3, 4): 3}
    assert [sorted(g.members) for g in group(acc, edges, 220)] == [[1, 2], [3, 4]]
    # min weight drops the light edge, so 3 and 4 never meet
    assert [sorted(g.members) for g in group(acc, edges, 220, min_weight=5)] == [[1, 2]]
    # group threshold: 3 < 220 * 0.05 -> formed but not kept
    gs = group(acc, edges, 220, group_threshold=0.05)
    assert [(sorted(g.members), g.kept) for g in gs] == [([1, 2], True), ([3, 4], False)]
    # the size limit
    acc5 = {n: 10 for n in range(5)}
    full = {(a, b): 10 for a in range(5) for b in range(a + 1, 5)}
    assert [len(g.members) for g in group(acc5, full, 50, max_members=3)] == [3, 2]


# ---- identification -------------------------------------------------------


def test_shared_wrapper_is_not_a_selector():
    # sites: 1 = the wrapper's call to malloc, 11/12/13 = its callers, 9 = main
    contexts = {0: [1, 11, 9], 1: [1, 12, 9], 2: [1, 13, 9]}
    sels = identify([[0], [1]], contexts, popularity=[10, 5])
    assert [s.conjunctions for s in sels] == [[(11,)], [(12,)]]
    assert all(s.conflicts == [] for s in sels)


def test_one_deep_frame_distinguishes():
    contexts = {0: [1, 2, 3, 40], 1: [1, 2, 3, 41], 2: [1, 2, 3, 42]}
    sels = identify([[0]], contexts, popularity=[1])
    assert sels[0].conjunctions == [(40,)] and sels[0].conflicts == []


def test_innermost_site_wins_ties_and_earlier_groups_are_ignored():
    contexts = {0: [5, 6, 7], 1: [8, 6, 9], 2: [8, 10, 9]}
    # group A = {0}: sites 5 and 7 both remove every conflict; 5 is innermost
    assert member_conjunction(contexts[0], [1, 2], {c: set(s) for c, s in contexts.items()}) == (5,)
    # B = {1} (less popular) is handled after A; A's contexts no longer count,
    # so 8 is not enough (context 2 has it) but 6 alone is
    sels = identify([[0], [1]], contexts, popularity=[9, 1])
    assert sels[1].conjunctions == [(6,)]


def test_conjunctions_and_residual_conflicts():
    # member 0 shares 1 and 2 with context 1 (ungrouped), 2 with context 2:
    # 1 alone leaves one conflict, adding 2 removes nothing more, so the
    # selector is (1,) with context 1 still matching
    contexts = {0: [1, 2], 1: [1, 2, 3], 2: [4, 2]}
    sels = identify([[0]], contexts, popularity=[1])
    assert sels[0].conjunctions == [(1,)] and sels[0].conflicts == [1]
    # a member with no application frame cannot be selected
    sels = identify([[0, 3]], {**contexts, 3: []}, popularity=[1])
    assert sels[0].unidentifiable == [3]
    # a conjunction needs several sites when no single one separates
    contexts = {0: [1, 2], 1: [1, 3], 2: [4, 2]}
    assert identify([[0]], contexts, [1])[0].conjunctions == [(1, 2)]


# ---- the cost model and the plan's shape -----------------------------------


def synthetic_profile(hot_allocs, cold_allocs):
    """Two contexts entering at site 1: [1, 10] (hot, walked: a loop edge)
    and [1, 11] (ungrouped)."""
    site = lambda i: {"id": i, "module": 0, "offset": 0x100 + i, "call": "direct",  # noqa: E731
                      "function": None, "file": None, "line": None}
    ctx = lambda i, sites, allocs, acc: {"id": i, "sites": sites, "allocations": allocs,  # noqa: E731
                                         "accesses": acc, "truncated": False}
    return {"parameters": {"max_size": 4096}, "totals": {"accesses": 1000},
            "modules": [{"id": 0, "path": "/x/prog", "build_id": "ab", "system": False}],
            "sites": [site(i) for i in range(12)],
            "contexts": [ctx(0, [1, 10], hot_allocs, 1000), ctx(1, [1, 11], cold_allocs, 0)],
            "graph": {"nodes": [0], "edges": [[0, 0, 500]], "coverage": 1.0}}


def test_entry_verdicts_exact_and_by_purity():
    from functools import partial

    from cohort.plan.planner import make_plan
    make_plan = partial(make_plan, **FREE_WALKS)
    plan = make_plan(synthetic_profile(980, 20))
    assert plan.groups[0].conjunctions == [(10,)]
    assert plan.verdicts[1] == "group=0"          # 98% of what enters at 1 is group 0
    assert plan.predicted == {0: 0, 1: 0}          # so context 1 joins it
    assert any("also group 20 allocations" in n for n in plan.notes)
    exact = make_plan(synthetic_profile(980, 20), entry_purity=1.0)
    assert exact.verdicts[1] == "walk" and exact.predicted == {0: 0, 1: None}
    assert make_plan(synthetic_profile(900, 100)).verdicts[1] == "walk"


def test_equal_site_sets_make_one_selector_term():
    """Members whose conjunctions hold the same sites in another order keep
    one of them; neither drops the other (the group is not lost)."""
    from cohort.plan.identification import minimal
    chains = {c: s for c, s, _, _ in BUILDER}
    sel, = identify([[3, 4]], chains, popularity=[1])
    assert sel.conjunctions == [(2, 3)]
    assert sel.conflicts == [] and sel.unidentifiable == []
    assert minimal([(2, 3), (3, 2), (2, 3, 4), (5,)]) == [(2, 3), (5,)]
    assert minimal([(3, 2), (2,)]) == [(2,)]


def test_group_shadowed_by_an_earlier_selector_is_dropped_with_its_reason():
    from cohort.plan.planner import make_plan
    # context 1's stack holds every site of context 0's: group 0's selector
    # takes it, so a group made of context 1 would never receive an object
    profile = shape_profile([(0, [1, 2], 1000, 600000), (1, [3, 1, 2], 1000, 300000)],
                            [(0, 0, 500000), (1, 1, 200000)], 1_000_000)
    plan = make_plan(profile, **FREE_WALKS)
    assert [g.members for g in plan.groups] == [[0]]
    assert plan.predicted == {0: 0, 1: 0}
    assert any("group around context 1 dropped: the selector of g0" in n for n in plan.notes)


def test_the_plan_file_carries_why_each_group_was_kept_or_dropped(tmp_path):
    """cohort explain shows which rule kept or dropped each group from the
    plan file alone: render writes every verdict, the kept group's with its
    figures and the rest pool's shape, as one `# note:` line in the header,
    which planfile.notes_of reads back in order and the runtime skips."""
    from cohort.formats import planfile
    from cohort.plan.planner import make_plan, render, verdicts
    profile = shape_profile([(0, [1, 2], 1000, 600000), (1, [3, 1, 2], 1000, 300000)],
                            [(0, 0, 500000), (1, 1, 200000)], 1_000_000)
    plan = make_plan(profile, **dict(FREE_WALKS, rest="pool"))
    path = tmp_path / "plan"
    path.write_text(render(plan, profile))
    said = planfile.notes_of(path)
    assert said == [" ".join(n.split()) for n in verdicts(plan)]
    # with a rest pool, context 0 alone gains nothing over the rest pool's
    # size classes (it lies among its own there): dropped, with the figures
    assert any(n.startswith("group around context 0 dropped: identifying it costs more") and
               "against at most 0.0 ms" in n for n in said)
    kept = [n for n in said if n.startswith("group 0 g0")]
    assert len(kept) == 1 and " kept: " in kept[0] and "affinitive accesses" in kept[0] and " ms " in kept[0]
    assert said[-1].startswith(f"group {plan.rest} rest kept, ")
    assert planfile.made_for(path) == "glibc"
    assert planfile.notes_of(tmp_path / "missing") == []


def test_a_group_of_two_sizes_made_in_turn_is_split_by_size_class():
    """A group's pool keeps its members in allocation order. Two kinds of
    two sizes made in turn (cppcheck's tokens and their TokenImpls), whose
    objects missed less by size class than in allocation order in the
    profile's model of both, become two groups, one per class; their
    affinity with each other, given up on purpose, counts as neither
    inside nor outside. When most of their neighbours in the one-pool model
    were strangers, which the group's pool would not hold, the model says
    nothing of the group's own order, and the group stays whole."""
    from cohort.plan.planner import make_plan

    def pair(one_strangers):
        p = shape_profile([(0, [1, 9], 10_000, 500_000), (1, [2, 3, 9], 10_000, 300_000)],
                          [(0, 0, 100_000), (1, 1, 100_000), (0, 1, 300_000)], 800_000)
        p["contexts"][1].update(min_size=136, max_size=136, bytes=10_000 * 136)
        p["contexts"][0].update(min_size=88, max_size=88, bytes=10_000 * 88)
        own = round(20_000 * (1 - one_strangers))
        p["rest_layouts"] = {"max_size": 256, "objects": 20_000, "accesses": 800_000,
                             "one": {"d1_misses": 90_000, "ll_misses": 0},
                             "classes": {"d1_misses": 60_000, "ll_misses": 0},
                             "beside": {"one": [[0, 1, own], [1, 0, own]], "classes": [[0, 0, 20_000], [1, 1, 20_000]]}}
        for c in p["contexts"]:
            c["beside"] = {"one": 20_000, "classes": 20_000}
            c["layout_d1_misses"] = {"one": 45_000, "classes": 30_000}
        return p

    split = make_plan(pair(0.0), rest="none")
    assert sorted(g.members for g in split.groups) == [[0], [1]]
    assert all(w.outside == 0 for w in split.worth)
    assert any("split by size class into 2 groups" in n for n in split.notes)
    # explain says the same, given what the plan file does not carry
    from cohort.present.explain import worth_lines
    names = [g.name for g in split.groups]
    group_of = {c: i for i, g in enumerate(split.groups) for c in g.members}
    apart = {i: set(g.apart) for i, g in enumerate(split.groups)}
    said, _ = worth_lines(pair(0.0), names, group_of, lambda c: None, None, allocator="glibc", apart=apart)
    assert all(", 0 with objects outside it" in said[i] for i in range(2)), said

    whole = make_plan(pair(0.5), rest="none")
    assert [sorted(g.members) for g in whole.groups] == [[0, 1]]
    assert not any("split by size class" in n for n in whole.notes)


def test_no_group_because_of_an_allocator_of_its_own_names_it_and_the_remedy():
    from cohort.plan.planner import make_plan
    # no small allocation at all
    profile = shape_profile([(0, [1], 10, 3)], [], 1_000)
    for c in profile["contexts"]:
        c.update(min_size=8192, max_size=8192, bytes=81920)
    assert make_plan(profile).why_none.startswith("no groups: the program made no heap allocation of up "
                                                   "to 4096 bytes")
    # a few small ones beside big blocks the program carves itself
    profile["contexts"].append({**profile["contexts"][0], "id": 1, "sites": [2], "min_size": 32,
                                "max_size": 32, "bytes": 320})
    why = make_plan(profile).why_none
    assert why.startswith("no groups: 100% of the heap bytes it allocates are in blocks over 4096 "
                          "bytes: the program probably carves its objects out of them"), why
    # CPython, recognised by its module, gets its switch named
    profile["modules"][0]["path"] = "/usr/bin/python3.11"
    plan = make_plan(profile)
    assert plan.why_none.startswith("no groups: this is CPython: it takes its small objects from its "
                                    "own allocator (pymalloc) unless PYTHONMALLOC=malloc is set")
    assert any("PYTHONMALLOC=malloc" in n for n in plan.notes)


def test_max_size_is_kept_within_the_runtime_limits():
    from cohort.plan.planner import make_plan
    profile = shape_profile([(0, [1], 10, 3)], [], 1000)
    profile["parameters"]["max_size"] = 1_000_000      # `cohort profile --max-size` takes any
    plan = make_plan(profile)
    assert plan.max_size == 131072 and any("max-size is 131072" in n for n in plan.notes)


def test_plan_with_nothing_to_pool_has_no_pool():
    from cohort.plan.planner import make_plan, render
    profile = shape_profile([(0, [1, 9], 900000, 900000)], [], 1_000_000)
    profile["contexts"][0].update(min_size=8192, max_size=8192)   # over the plan's max-size, 4096
    plan = make_plan(profile)
    assert plan.groups == [] and plan.rest is None and plan.predicted == {0: None}
    assert any(n.startswith("no pool") for n in plan.notes)
    assert "\nrest" not in render(plan, profile)


@pytest.mark.parametrize("link,merged", [(82_780, False), (900_000, True)])
def test_consolidation_weighs_what_a_merge_dilutes(link, merged):
    """A tree walked over and over (a heavy loop) and a log written once per
    few nodes (used more with the tree than with itself): merging the log
    into the tree's pool would spread the tree over a fifth more bytes, which
    costs its walks more than the log's link to it brings, unless that link
    is heavy."""
    from cohort.plan.planner import make_plan
    profile = shape_profile([(0, [1, 10], 32768, 2_700_000), (1, [2, 11], 8192, 340_000)],
                            [(0, 0, 1_576_327), (0, 1, link), (1, 1, 28_725)], 3_100_000)
    plan = make_plan(profile, rest="none")   # tree and log are of one size: HALO's alternative
    members = [sorted(g.members) for g in plan.groups]
    assert ([0, 1] in members) == merged
    if not merged:
        assert members == [[0]]


@pytest.mark.parametrize("allocations,joined", [(1_000, True), (40_000, False)])
def test_a_node_used_mostly_with_a_group_joins_it(allocations, joined):
    """Two structures walked together (a heavy group) and a third kind of
    object whose loop is light but which is used with both far more than
    with itself: HALO's density keeps it out of the group, and on its own it
    is under the threshold, so it went to the rest pool. It joins the group,
    unless its bytes would dilute the group more than its link brings."""
    from cohort.plan.planner import make_plan
    profile = shape_profile([(0, [1, 10], 20_000, 1_500_000), (1, [2, 11], 20_000, 1_500_000),
                             (2, [3, 12], allocations, 400_000)],
                            [(0, 0, 1_000_000), (1, 1, 1_000_000), (0, 1, 1_500_000), (0, 2, 300_000),
                             (1, 2, 300_000), (2, 2, 5_000)], 4_000_000)
    plan = make_plan(profile, rest="none")   # all of one size: HALO's alternative
    members = [sorted(g.members) for g in plan.groups]
    assert members == ([[0, 1, 2]] if joined else [[0, 1]])
    note = [n for n in plan.notes if "joined" in n]
    assert bool(note) == joined
    if joined:
        assert note[0].startswith("context 2 joined the group around context ")
        assert "(600000 affinitive accesses)" in note[0] and "(5000)" in note[0]


def test_groups_of_large_objects_count_only_the_lines_neighbours_share(tmp_path):
    """The modest churn shape pays for its patched decisions with objects of
    32 bytes (or up to 256). Placed side by side, objects of 4000 bytes share
    one line with a neighbour, and a pair of accesses meets there only if
    each falls on its object's side of it: (64 / 4000) squared, 0.026% of
    the affinity counts, and the group is dropped, with the sizes named (a
    stock perl's arenas and interpreter state were so grouped, and missed
    more). At 256 bytes or less the objects lie in lines neighbours share
    whole, and the group stays. Priced at the profiled run's own scale
    (scale=1), where a miss costs L2's price."""
    from cohort.plan.cost import COST_DEFAULTS, worth_text
    from cohort.plan.planner import make_plan

    def with_size(size):
        p = churn_profile(affinity=16_000_000, accesses=18_000_000)
        for c in p["contexts"]:
            c["bytes"] = size * c["allocations"]
            c["min_size"] = c["max_size"] = size
        return p

    large = make_plan(with_size(4000), costs=MODEST_COSTS, scale=1)
    assert large.groups == [] and large.rest is None   # 4000 bytes and nothing small: no pool at all
    note = next(n for n in large.notes if "costs more than its placement can save" in n)
    assert "its objects are of 4000 bytes on average, and two neighbours share one line, where a pair of " \
           "accesses meets only if each falls on its side of it: 0.026% of those accesses" in note, note
    assert "from 16000000 affinitive accesses inside it" in note and "against at most 0.0 ms" in note, note

    small = make_plan(with_size(256), costs=MODEST_COSTS, scale=1)
    assert len(small.groups) == 1 and small.worth[0].pays
    assert small.worth[0].saving_ns == 16_000_000 * 0.5 * COST_DEFAULTS["miss_ns"]   # the twin: half its class
    assert "two neighbours share one line" not in worth_text(small.worth[0])


def test_a_validation_run_has_its_say_on_the_rest_pools_shape():
    """The rest pool's shape is decided on the model of every run given:
    a training input whose classes save nothing keeps one pool alone, and
    a validation run whose classes save many misses splits it, and `cohort
    plan` says over how many runs."""
    import copy

    from cohort.plan.planner import make_plan
    from cohort.plan.rest import rest_text

    def model(one, classes):
        return {"max_size": 256, "objects": 20_000, "accesses": 501_000,
                "one": {"d1_misses": one, "ll_misses": 0}, "classes": {"d1_misses": classes, "ll_misses": 0}}

    p = shape_profile([(0, [1, 9], 10_000, 500_000), (1, [2, 9], 10_000, 1_000)], [(0, 0, 400_000)], 501_000)
    p["rest_layouts"] = model(100, 100)
    p["target"] = {"argv": ["prog", "small"]}
    alone = make_plan(p)
    assert alone.rest_one and "the profile's model" in rest_text(alone)
    v = copy.deepcopy(p)
    v["rest_layouts"] = model(900_000, 700_000)
    v["target"] = {"argv": ["prog", "large"]}
    both = make_plan(p, validations=[v])
    assert not both.rest_one
    assert "split by size class: by class the model of the 2 runs (training and validation)" in rest_text(both)
    assert "(900100 in one pool, 700100 by class)" in rest_text(both)


def test_affinity_with_dropped_contexts_counts_outside():
    """A group's objects used mostly with objects of contexts the graph's
    coverage filter dropped: that affinity, which no edge carries, is outside
    the group (docs/planner.md, "Affinity with the cold contexts")."""
    from cohort.policies.families import dropped_affinity
    from cohort.plan.planner import make_plan
    builder = BUILDER + [(6, [7], 100000, 5000)]
    profile = shape_profile(builder, BUILDER_EDGES, 1_000_000)
    assert make_plan(profile).groups   # as far as the graph can tell, a group
    # context 6 is no node of the graph: its affinity with 3 and 4 is its own
    raw = BUILDER_EDGES + [(3, 6, 900000), (4, 6, 900000), (5, 6, 7)]
    keep = set(profile["graph"]["nodes"])
    assert dropped_affinity(raw, keep, lambda c: c) == [[3, 900000], [4, 900000]]
    profile["graph"]["dropped_affinity"] = dropped_affinity(raw, keep, lambda c: c)
    plan = make_plan(profile)
    assert plan.groups == []
    assert any("used with objects outside it (1800000" in n for n in plan.notes)


def test_groups_pay_for_the_entry_decisions_they_put_on_the_rest():
    """Against the rest pool alone, which takes small allocations with no
    identification, a plan with groups decides every other allocation at its
    entry site: the quick test where no stub reaches the site. A group that
    saves less than that is dropped (gawk's two interpreter buffers)."""
    from cohort.plan.planner import make_plan
    builder = [c if c[0] != 5 else (5, [5], 100000, 0) for c in BUILDER]
    profile = shape_profile(builder, BUILDER_EDGES, 1_000_000)
    kept = make_plan(profile)
    assert kept.groups and kept.worth[0].entry_ns > 0 and kept.worth[0].quick == 0
    # main's allocations at site 5 through a pointer: no stub reaches them
    profile["sites"][5]["call"] = "indirect"
    quick = make_plan(profile)
    assert quick.worth[0].quick == 100000
    assert quick.worth[0].entry_ns == pytest.approx(100000 * 4.5 + 100201 * 0.5)
    # a million of them cost more than the group saves
    profile["contexts"][5]["allocations"] = 1_000_000_000
    dropped = make_plan(profile)
    assert dropped.groups == []
    assert any("by the quick test: no stub reaches their entry" in n for n in dropped.notes)
