"""`cohort plan`: from a profile to the runtime's plan (docs/plan-format.md).

Grouping (halo.py) decides which contexts share a pool; identification
(identification.py) derives the selectors that recognise them; this module
puts both into a plan within the runtime's limits, decides the quick test's
verdicts for entry sites, and reports what it did."""

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cohort.plan.cost import (COST_DEFAULTS, as_read, assess, direct_sites, identification_text, pair_cost,
                              worth_text)
from cohort.plan.lines import choose_line_offsets, rest_for_lines
from cohort.plan.paths import MAX_SITES, decision_paths, stop_sites
from cohort.plan.rest import add_rest, lies_among, rest_against, rest_text, shape_verdict
from cohort.policies import DS, DS_POLICIES, KEEP_ALL, NONE, PLAN_POLICIES, STREAMS, apa, grouping, halo, hds
from cohort.plan import identification, transfer, scale as scaling
from cohort.formats import planfile
from cohort.plan.rebase import plan_anchors, valid_anchor
from cohort.errors import CohortError
from cohort.files import claim, write_output

MAX_GROUPS = 63   # runtime/system/system.h CH_PLAN_GROUPS (the last group is the pool API's)
MIN_MAX_SIZE, MAX_MAX_SIZE = 8, (1 << 20) // 8   # runtime/plan/plan.c: 8 to the default chunk size / 8
REST_MAX = transfer.REST_MAX    # runtime/memory/heap.c EXACT_MAX: sizes the pools serve from exact bins
# The rest pool's shape: decided by the profile's model, or given (--rest-shape).
# Where a pool's blocks of whole lines start: chosen from the profile's
# model of the places (auto), or left where the runtime puts them (none).
LINE_OFFSETS = ("auto", "none")

PLAN_DEFAULTS = dict(halo.DEFAULTS, unknown_entry="auto", unknown_path="auto", entry_purity=0.98)


@dataclass
class PlannedGroup:
    name: str
    members: list
    weight: int
    score: float
    accesses: int
    allocations: int
    conjunctions: list
    conflicts: list
    unidentifiable: list
    nodes: list = field(default_factory=list)   # its nodes in the graph (families or contexts)
    merged: bool = False   # formed by halo.consolidate: priced as stack walks (assess)
    apart: list = field(default_factory=list)   # nodes of the groups split from it by size class


@dataclass
class Plan:
    groups: list                       # PlannedGroup, in selector order
    rejected: list                     # halo.Group under the threshold
    sites: list                        # site ids of the profile, in plan order
    verdicts: dict                     # site id -> "cold" | "walk" | "group=G"
    modules: list                      # module ids of the profile, in plan order
    unknown_entry: str
    max_size: int
    predicted: dict                    # context id -> group index or None
    notes: list = field(default_factory=list)
    stops: dict = field(default_factory=dict)   # site id -> group a walk reaching it ends in
    worth: list = field(default_factory=list)   # Worth per group
    rest: int = None                            # the rest pool's group index, if any
    rest_max: int = None                        # the largest request it takes
    rest_one: bool = False                      # the rest pool stays one pool, not split by size class
    rest_layouts: dict = None                   # the profile's model of both shapes (shape_verdict), if any
    line_at: dict = field(default_factory=dict)  # group index -> bytes into a line its line-sized blocks
                                                 # start (plan version 8's at=K), where not the default
    paths: dict = field(default_factory=dict)   # (site id, ...) -> "cold" | "group=G": decision paths
    frames: dict = field(default_factory=dict)  # context id -> frames its walk looks at, if walked
    why_none: str = None                        # why there is no group, if there is none
    unknown_path: str = "walk"                  # a walk leaving the paths: "walk" on, or "cold"
    paths_complete: bool = True                 # every walked context has its path (no limit hit)
    transfers: list = field(default_factory=list)   # transfer.Transfer per validation run
    pricing: object = None                          # scale.Pricing its groups were priced with
    allocator: str = "glibc"                        # the allocator it was made to run in front of
    policy: str = "halo"                            # how the groups were formed (PLAN_POLICIES)


def site_name(profile, sid):
    """A call site for people: function (file:line), with the functions the
    compiler inlined it from where debug information says so, and the
    module+offset of its return address, which is what a plan names (two
    sites in one function and line of -O2 code differ there)."""
    s = profile["sites"][sid]
    m = profile["modules"][s["module"]]
    at = f"{os.path.basename(m['path'])}+{s['offset']:#x}"
    levels = s.get("inlined")
    if levels:   # innermost first; the last is the function the code is in
        where = levels[0] + "".join(f", inlined into {x}" for x in levels[1:])
    else:
        where = (s["function"] or "?") + (f" ({s['file']}:{s['line']})" if s.get("file") and s.get("line") else "")
    return f"{where} [{at}]"


def group_label(profile, members, conjunctions=()):
    """A one-word name: the function of the innermost site of the group's
    first selector term (past any shared wrapper), else of its hottest
    member's entry site."""
    candidates = [conj[0] for conj in conjunctions[:1] if conj]
    candidates += [profile["contexts"][c]["sites"][0] for c in members if profile["contexts"][c]["sites"]]
    for sid in candidates:
        fn = profile["sites"][sid]["function"]
        if fn:
            return re.sub(r"[^A-Za-z0-9_.]+", "_", fn.split("(")[0])[:40].strip("_")
    return ""


def replay(plan, profile, validations, costs, identify, rest_pool=None, pricing=None):
    """The plan replayed on each validation run's profile (transfer.py),
    its merged groups priced as stack walks there too (assess), its groups
    weighed against the rest pool of shape rest_pool (None: the plan's),
    each run priced where the plan runs (pricing, in proportion to its size)."""
    read = as_read(plan, profile)
    walked = {i for i, g in enumerate(plan.groups) if g.merged}
    return [transfer.evaluate(read, profile, v, costs, identify, walked, rest_pool, pricing) for v in validations]


def growth_of(profile, validations, scale):
    """How the plan's figures grow to the run it is for (scale.Growth): fitted
    on the validation run whose size differs most from the training run's,
    when one differs enough (scale.MIN_FIT_RATIO), else in proportion to
    `scale` (the user's --scale; None: scale.DEFAULT_SCALE)."""
    size = sum(c["allocations"] for c in profile["contexts"])
    best = None
    for v in validations or ():
        n = sum(c["allocations"] for c in v["contexts"])
        if size and n and (best is None or abs(math.log(n / size)) > best[0]):
            best = (abs(math.log(n / size)), v)
    if best is not None:
        keys = (transfer.family_keys(profile), transfer.family_keys(best[1]))
        fitted = scaling.fit(profile, best[1], keys, scale)
        if fitted is not None:
            return fitted
    return scaling.uniform(scale)


def choose_unknowns(plan, profile, validations, unknown_entry, unknown_path):
    """What the runtime does with stacks the profile never showed.
    unknown-path: with "auto", a walk that leaves the decision paths ends
    there (cold), so an unknown stack costs no more frames than the paths
    hold, unless the validation runs show that such walks mostly (over half
    of their allocations) find a group. unknown-entry: "auto" has already
    chosen from the selectors (assemble); validation runs where the walks of
    unknown entries mostly find no group make it cold."""
    auto_path = unknown_path == "auto" and plan.paths and plan.paths_complete
    auto_entry = unknown_entry == "auto" and plan.unknown_entry == "walk"
    # Without paths, or past the runtime's limits, contexts need the full walk.
    plan.unknown_path = unknown_path if unknown_path != "auto" else "walk"
    tally = {"path": [0, 0], "entry": [0, 0]}   # allocations whose full walk found a group, of all
    if validations and (auto_path or auto_entry):
        read = as_read(plan, profile)   # unknown-path walk: what the full walk would find
        known = {transfer.site_key(profile, s) for s in plan.verdicts}
        for v in validations:
            dec, _ = transfer.decisions(read, v)
            for c in v["contexts"]:
                g, _, gone = dec[c["id"]]
                n, found = c["allocations"], g is not None and g != plan.rest
                unseen = bool(c["sites"]) and transfer.site_key(v, c["sites"][0]) not in known
                for kind, counts in (("path", gone), ("entry", unseen)):
                    if counts:
                        tally[kind][0] += n if found else 0
                        tally[kind][1] += n
    if auto_path:
        found, tried = tally["path"]
        plan.unknown_path = "walk" if tried and found * 2 > tried else "cold"
        if plan.unknown_path == "walk":
            plan.notes.append(f"unknown-path walk: on the validation runs, walks that left the decision "
                              f"paths found a group for {found} of {tried} allocations")
    found, tried = tally["entry"]
    if auto_entry and tried and found * 2 <= tried:
        plan.unknown_entry = "cold"
        plan.notes.append(f"unknown-entry cold: on the validation runs, walks of allocations entering "
                          f"where training never entered found a group for {found} of {tried}")


def require_streams(profile, what):
    """The one-line refusal for a profile without hot data streams."""
    if profile.get("hot_streams") is None:
        raise CohortError(f"{what} needs the heap reference trace's hot data streams, which this profile "
                          f"does not have: profile with --trace (cohort profile --trace, or cohort "
                          f"optimize --policy hds)")


def set_aside_large(profile, accesses, edges, members):
    """Affinity between small objects and large ones (a mean size over
    REST_MAX), taken out of `edges` before HALO groups: notes. A large
    object beside a small one shares a line with it at most, so the
    affinity buys little, and in the small objects' pool it spreads them
    apart: a walk over them then touches a line and often a page for each,
    the layout the group was to end (`mixed`: a list of 48-byte nodes, each
    with its 2-4 KiB buffer, docs/planner.md). Large objects may still be
    grouped with each other."""
    contexts = profile["contexts"]
    nbytes = halo.node_bytes(profile, members)
    size = {}
    for n in accesses:
        allocations = sum(contexts[c]["allocations"] for c in members[n])
        size[n] = nbytes[n] / allocations if allocations else 0
    large = {n for n in accesses if size[n] > transfer.LARGE_BYTES}
    cut = {}   # large node: the weight of its edges to smaller ones
    for k in [k for k in edges if (k[0] in large) != (k[1] in large)]:
        n = k[0] if k[0] in large else k[1]
        cut[n] = cut.get(n, 0) + edges.pop(k)
    order = sorted(cut, key=lambda n: -accesses[n])
    notes = [f"context {members[n][0]} (objects of {size[n]:.0f} bytes on average) kept out of the groups "
             f"of smaller objects: {cut[n]} affinitive accesses with them set aside, since an object over "
             f"{REST_MAX} bytes shares at most a line with its neighbour and would spread theirs apart"
             for n in order[:LARGE_NOTES]]
    rest = order[LARGE_NOTES:]
    if rest:   # cppcheck's profile: 140 such contexts, a line each, drowned the plan's own notes
        notes.append(f"{len(rest)} more contexts of objects over {REST_MAX} bytes kept out of the groups of "
                     f"smaller objects likewise ({sum(cut[n] for n in rest)} affinitive accesses set aside)")
    return notes


# set_aside_large names this many contexts, the most used first, and counts the others.
LARGE_NOTES = 5


def size_class(mean_size):
    """The runtime's size class of a request of `mean_size` bytes: one per
    16 bytes up to REST_MAX, one per power of two above (runtime/system/system.h,
    ch_rest_class)."""
    n = max(1, math.ceil(mean_size))
    return (n + 15) // 16 if n <= REST_MAX else 16 + (n - 1).bit_length()


def split_by_class(profile, formed, edges, total, members, group_threshold, costs=None):
    """A group's pool keeps its objects in allocation order, whatever their
    sizes, as the rest pool's `one` shape does. Where its members' objects
    missed less by size class in the profile's model of both shapes
    (`layout_d1_misses`, profiler/layouts.c), the group is split into one
    group per size class of its members' mean sizes: a walk over one kind
    then steps over no object of another kind made between them (cppcheck's
    tokens, each made with its 136-byte TokenImpl: the list walks of its
    tokenizer touch only the tokens; docs/planner.md, "A group's shape").
    As for the rest pool's shape (shape_verdict), the misses the split saves
    in the model (miss_ns each) must be worth more than it costs the
    members' allocations (split_ns each). A part keeps HALO's threshold on
    its internal weight. Returns (groups, notes); a profile without the
    model leaves every group whole."""
    costs = dict(COST_DEFAULTS, **(costs or {}))
    contexts = profile["contexts"]
    out, notes = [], []
    for g in formed:
        ids = [c for n in g.members for c in members[n]]
        if not g.kept or not all("layout_d1_misses" in contexts[c] for c in ids):
            out.append(g)
            continue
        by_class = {}
        for n in g.members:
            allocations = sum(contexts[c]["allocations"] for c in members[n])
            mean = sum(contexts[c]["bytes"] for c in members[n]) / allocations if allocations else 0
            by_class.setdefault(size_class(mean), []).append(n)
        if len(by_class) < 2:
            out.append(g)
            continue
        one = sum(contexts[c]["layout_d1_misses"]["one"] for c in ids)
        classes = sum(contexts[c]["layout_d1_misses"]["classes"] for c in ids)
        # The one-pool model holds strangers too, which the group's pool
        # would not: grant them every miss in proportion to the share of
        # the members' neighbours they are there, and split only if the
        # classes still miss less (render's scene nodes: 2.72 M misses in
        # one pool, 85% of their neighbours strangers, 1.63 M by class; its
        # plan split missed 3.6% more than unsplit, under cachegrind).
        beside_one = transfer.beside_strangers(profile, ids, "one") or 0.0
        saved = one * (1.0 - beside_one) - classes
        # graph's cells and edge entries: 40,690 misses fewer by class, 0.14
        # ms, for 284,852 allocations (0.34 ms); split, its plan ran 12%
        # slower than the rest pool alone (docs/planner.md, "A group's shape").
        if saved * costs["miss_ns"] <= sum(contexts[c]["allocations"] for c in ids) * costs["split_ns"]:
            out.append(g)
            continue
        parts = sorted(by_class.values(), key=lambda ns: -halo.internal(edges, ns)[0])
        for ns in parts:
            weight, _ = halo.internal(edges, ns)
            # A part of a merged group is priced as one (assess: stack walks).
            history = [(ns[0], None)] + [h for h in g.history if h[1] == "merged"]
            out.append(halo.Group(members=ns, weight=weight, score=halo.score(edges, ns),
                                      kept=weight >= total * group_threshold, history=history,
                                      apart=[n for other in parts if other is not ns for n in other]))
        notes.append(f"group around context {members[g.members[0]][0]} split by size class into "
                     f"{len(parts)} groups: its members' objects missed {classes} times by size class, in "
                     f"the profile's model of both shapes, and {one} times in allocation order, where "
                     f"{100 * beside_one:.0f}% of their neighbours were other contexts' objects, which a "
                     f"group's pool would not hold")
    return out, notes


def halo_groups(profile, accesses, edges, total, members, min_weight, max_members, tolerance,
                group_threshold, costs=None):
    """HALO's grouping (Figure 6) and our consolidation of it: (formed
    groups, notes)."""
    formed = halo.group(accesses, edges, total, min_weight=min_weight, max_members=max_members,
                            tolerance=tolerance, group_threshold=group_threshold)
    formed, merges = halo.consolidate(formed, accesses, edges, total, max_members=max_members,
                                          group_threshold=group_threshold,
                                          nbytes=halo.node_bytes(profile, members))
    formed, split_notes = split_by_class(profile, formed, edges, total, members, group_threshold, costs)
    notes = [f"group around context {members[n][0]} merged with the "
             f"{'group around context' if kept_partner else 'ungrouped context'} {members[p][0]}: its objects are "
             f"used with objects outside it ({outside:.0f} affinitive accesses, {link:.0f} of them with "
             f"those) at least as much as with each other ({inside:.0f}), so on its own it would not pay"
             if kind == "merged" else
             f"context {members[n][0]} joined the group around context {members[p][0]}: its objects are used "
             f"with that group's ({link:.0f} affinitive accesses) at least as much as with each other "
             f"({inside:.0f}), which kept it out of HALO's groups"
             for n, p, kept_partner, link, inside, outside, kind in merges]
    return formed, notes + split_notes


def apa_groups(profile, policy, accesses, edges, members):
    """An APA heuristic's pools (apa.py) as groups of graph units, every
    one kept: the paper's heuristics use no affinity and no threshold.
    Returns (formed groups, notes)."""
    g = apa.build(profile, accesses)
    formed = []
    for pool in apa.pools(g, policy):
        units = [u for n in pool for u in g.units[n]]
        weight, _ = halo.internal(edges, units)
        formed.append(halo.Group(members=units, weight=weight,
                                     score=halo.score(edges, units), history=[(units[0], None)]))
    notes = []
    for n in g.unified:
        if n in g.hot:
            first = [members[u][0] for u in g.units[n]]
            notes.append(f"contexts {', '.join(map(str, first[:6]))}{' ...' if len(first) > 6 else ''} are one "
                         f"DS node, one data structure to APA (one allocation site but for recursion, or the "
                         f"targets of one pointer field)")
    if policy == "apa-collections":
        pooled = {u for f in formed for u in f.members}
        left = sum(1 for n in g.hot if not set(g.units[n]) & pooled)
        notes.append(f"{len(g.collections())} collections (lists, trees, cycles, arrays of pointers) in the "
                     f"DS graph; {left} of {len(g.hot)} hot DS nodes are not reachable from one and get no "
                     f"pool of their own")
    return formed, notes


def hds_groups(profile, accesses, edges, members):
    """The hot-data-streams comparator's groups (HALO, section 5): the
    profile's co-allocation sets of contexts (hds.py) become sets of
    immediate call sites, the allocation's entry site, which is all that
    HALO's replication identified groups by; sets that name the same sites
    add up, and weighted set packing chooses disjoint ones. Each group holds
    every context that enters at its sites. Returns (formed groups, notes)."""
    contexts = profile["contexts"]
    hs = profile["hot_streams"]
    sets = {}
    for st in hs["sets"]:
        key = frozenset(contexts[c]["sites"][0] for c in st["contexts"] if contexts[c]["sites"])
        if key:
            sets[key] = sets.get(key, 0) + st["saving"]
    by_site = {}
    for c in contexts:
        if c["sites"]:
            by_site.setdefault(c["sites"][0], []).append(c["id"])
    node_of = {c: n for n, cs in members.items() for c in cs}
    formed = []
    for sites, _saving in hds.pack(sets):
        ctxs = sorted((c for s in sites for c in by_site[s]), key=lambda c: (-contexts[c]["accesses"], c))
        nodes = list(dict.fromkeys(node_of[c] for c in ctxs if node_of.get(c) in accesses))
        weight, _ = halo.internal(edges, nodes)
        g = halo.Group(members=ctxs, weight=weight, score=halo.score(edges, nodes),
                           history=[(ctxs[0], None)])
        g.nodes = nodes
        formed.append(g)
    t = hs["trace"]
    notes = [f"{hs['streams']} minimal hot data streams of {hs['min_length']} to {hs['max_length']} objects "
             f"cover {hs['coverage']:.0%} of {t['references']:,} traced heap references"
             + (f" (one burst in {t['sampled_one_in']} of the run)" if t["sampled_one_in"] > 1 else "")
             + f"; by immediate call site, their {len(hs['sets'])} co-allocation sets of contexts come to "
             f"{len(sets)}, of which set packing chose {len(formed)}"]
    return formed, notes


def make_plan(profile, min_weight=None, max_members=16, tolerance=0.05, group_threshold=0.005,
              unknown_entry="auto", entry_purity=0.98, rest="auto", costs=None, identify="patched",
              unknown_path="auto", validations=(), policy="halo", rest_max=REST_MAX, scale=None,
              cache_sizes=None, exclude=(), allocator="glibc", rest_shape="auto", line_offsets="auto"):
    """The plan for a profile. policy: halo (HALO's grouping of the
    affinity graph), halo+ds (the same, with the DS graph's pointer edges
    as extra affinity), or one of APA's heuristics on the DS graph
    (apa-all, apa-collections, apa-maximal; apa.py). Under halo and
    halo+ds, groups whose identification costs more than their placement
    can save are dropped, one at a time, the worst first, and the plan made
    again without them; so are groups that do not pay on the profile of
    some validation run (`validations`: profiles of other inputs of the
    same program, transfer.py). APA's heuristics keep every pool they make,
    as the paper's do. With rest="pool" every small allocation no group
    claims shares one more pool (docs/planner.md). identify: "patched"
    prices identification as the runtime does with its selector call sites
    patched (its default), "walk" as stack walks (COHORT_PATCH=0).
    rest_shape: "auto" (the profile's model decides, shape_verdict), or
    "one" or "classes", as a measurement on a larger input decided (cohort
    optimize --ref) or the user asks. line_offsets: "auto" (each pool's
    blocks of whole lines where the profile's model stalls least,
    choose_line_offsets) or "none" (where the runtime puts them)."""
    if policy not in PLAN_POLICIES:
        raise CohortError(f"unknown plan policy '{policy}' (choose {', '.join(PLAN_POLICIES)})")
    if line_offsets not in LINE_OFFSETS:
        raise CohortError(f"--line-offsets must be {' or '.join(LINE_OFFSETS)}, not '{line_offsets}'")
    if policy in DS_POLICIES:
        apa.require(profile, f"--policy {policy}")
    how = grouping(policy)
    if how == STREAMS:
        require_streams(profile, f"--policy {policy}")
    costs = dict(COST_DEFAULTS, **(costs or {}))
    contexts = profile["contexts"]
    direct = direct_sites(profile)
    accesses, edges, total, members = halo.from_profile(profile)
    if how != DS and policy in DS_POLICIES:   # halo+ds: the DS graph's traversals join the affinity
        unit_of, _ = apa.units(profile)
        for key, w in apa.traversal_weights(profile, unit_of, accesses).items():
            edges[key] = edges.get(key, 0) + w
    keep_all = policy in KEEP_ALL
    if how == NONE:
        formed, notes = [], []
    elif how == STREAMS:    # groups of contexts already, with their nodes
        formed, notes = hds_groups(profile, accesses, edges, members)
    else:
        if how == DS:
            formed, notes = apa_groups(profile, policy, accesses, edges, members)
        else:
            large_notes = set_aside_large(profile, accesses, edges, members)
            formed, notes = halo_groups(profile, accesses, edges, total, members, min_weight, max_members,
                                        tolerance, group_threshold, costs)
            notes = large_notes + notes
        for g in formed:   # from graph nodes (families) to their contexts
            g.nodes = g.members
            g.members = [c for n in g.nodes for c in members[n]]
    kept = [g for g in formed if g.kept]
    rejected = [g for g in formed if not g.kept]
    excluded = {tuple(sorted(m)) for m in exclude}
    for g in [g for g in kept if tuple(sorted(g.members)) in excluded]:
        notes.append(f"group around context {g.members[0]} dropped: it lost where the plan was measured "
                     f"(cohort optimize --ref)")
        kept.remove(g)
    if len(kept) > MAX_GROUPS:
        notes.append(f"{len(kept) - MAX_GROUPS} groups dropped: the runtime takes at most {MAX_GROUPS}")
        kept = sorted(kept, key=lambda g: -(sum(contexts[c]["accesses"] for c in g.members) if keep_all
                                            else g.weight))[:MAX_GROUPS]
    if not MIN_MAX_SIZE <= profile["parameters"]["max_size"] <= MAX_MAX_SIZE:
        notes.append(f"the plan's max-size is {MIN_MAX_SIZE if profile['parameters']['max_size'] < 8 else MAX_MAX_SIZE} "
                     f"bytes, not the profile's {profile['parameters']['max_size']}: the runtime groups "
                     f"objects of {MIN_MAX_SIZE} bytes to an eighth of its 1 MiB chunks")
    params = dict(unknown_entry=unknown_entry, entry_purity=entry_purity)
    shape = shape_verdict([profile.get("rest_layouts")] + [v.get("rest_layouts") for v in validations or ()],
                          costs, rest_shape)
    passed_over = None   # rest_against's note, when it left the rest pool out
    if rest == "auto":
        rest, why = rest_against(allocator, shape, costs)
        if why:
            notes.append(why)
            passed_over = why if rest == "none" else None
    rest_pool = lies_among(rest == "pool", shape[0], allocator)
    pricing = scaling.Pricing.of(profile, costs, growth_of(profile, validations, scale), cache_sizes)
    while True:
        plan = assemble(profile, kept, params, list(notes))
        plan.pricing = pricing
        plan.worth = assess(plan, contexts, edges, costs, identify, direct, profile, rest_pool, pricing,
                            passthrough=rest != "pool", pair_ns=pair_cost(allocator, rest, costs))
        choose_unknowns(plan, profile, validations, unknown_entry, unknown_path)
        losers = [i for i, w in enumerate(plan.worth) if not w.pays and not keep_all]
        if not losers and validations and not keep_all:
            plan.transfers = replay(plan, profile, validations, costs, identify, rest_pool, pricing)
            moved = [(i, t) for t in plan.transfers for i, gt in enumerate(t.groups)
                     if gt is not None and not gt.pays]
            if moved:
                i, t = max(moved, key=lambda it: (it[1].groups[it[0]].walk_ns - it[1].groups[it[0]].saving_ns,
                                                  -it[0]))
                g = plan.groups[i]
                notes.append(f"group around context {g.members[0]} dropped: it does not transfer to the "
                             f"run `{t.run}`: {t.groups[i].why_not()}")
                kept = [k for k in kept if k.members != g.members]
                continue
        if not losers:
            break
        # A group used more with others than within goes whatever it costs,
        # so those go first: while one stays grouped, the objects it would
        # leave to the rest pool are no group's strangers there, and the
        # groups that share their place look as if they gained nothing.
        apart = [i for i in losers if plan.worth[i].inside <= plan.worth[i].outside]
        i = max(apart or losers, key=lambda i: (plan.worth[i].outside - plan.worth[i].inside) * costs["miss_ns"]
                + plan.worth[i].cost_ns - plan.worth[i].saving_ns)
        g, w = plan.groups[i], plan.worth[i]
        if w.inside <= w.outside:
            notes.append(f"group around context {g.members[0]} dropped: its objects are used with "
                         f"objects outside it ({w.outside} affinitive accesses) at least as much as "
                         f"with each other ({w.inside}); a pool of its own would take them away "
                         f"from those")
        else:
            notes.append(f"group around context {g.members[0]} dropped: identifying it costs more "
                         f"than its placement can save ({identification_text(w, 1)}, against at most "
                         f"{w.saving_ns / 1e6:.1f} ms from {w.inside} affinitive accesses inside "
                         f"it less {w.outside} with objects outside it"
                         f"{transfer.misses_clause(w.misses, w.inside - w.outside)}"
                         f"{transfer.share_clause(w.mean_size, w.share)}"
                         f"{transfer.strangers_clause(w.strangers, w.one_pool, w.beside)}"
                         f"{w.at.clause() if w.at else ''})")
        kept = [k for k in kept if k.members != g.members]
    plan.notes += kept_verdicts(plan, policy if keep_all else None, bool(validations))
    plan.rejected = rejected
    plan.policy = policy
    plan.allocator = allocator
    if rest == "pool":
        add_rest(plan, contexts, shape, rest_max)
    elif passed_over and line_offsets == "auto" and \
            rest_for_lines(plan, contexts, shape, rest_max, costs, allocator, passed_over):
        rest = "pool"
    if line_offsets == "auto":
        choose_line_offsets(plan, contexts, costs, rest_only=rest == "pool" and not plan.groups)
    if validations:   # as the plan file will be, rest pool and all
        plan.transfers = replay(plan, profile, validations, costs, identify, pricing=pricing)
    if not plan.groups:
        plan.why_none = why_no_groups(profile, accesses, formed, [g for g in formed if g.kept], group_threshold,
                                      policy, rest_pool=rest == "pool", allocator=allocator)
    elif pricing.growth.source == "default" and not keep_all:
        plan.notes.append(f"the groups are priced at {pricing.growth.scale:g} times the training run, with "
                          f"every figure assumed to grow in proportion: a group whose objects are made and "
                          f"used mostly at start-up does not grow so. Give --scale, a --train run of another "
                          f"size (its growth is then measured), or --ref to confirm on a larger input")
    hint = runtime_hint(profile)
    if hint:
        plan.notes.append(hint)
    return plan


def own_allocator(profile):
    """The share of heap bytes in blocks over the profile's max size when it
    is over half: the program looks like it carves its objects out of big
    blocks with an allocator of its own. Else None."""
    p = profile["parameters"]["max_size"]
    contexts = profile["contexts"]
    total = sum(c["bytes"] for c in contexts)
    big = sum(c["bytes"] for c in contexts if c["min_size"] > p)
    return big / total if total and big > total / 2 else None


# A runtime known to keep small objects in an allocator of its own, and the
# switch that hands them to malloc instead, where Cohort can place them.
CPYTHON_MODULE = re.compile(r"^(lib)?python3(\.\d+)?[a-z]*(\.so.*)?$")
CPYTHON = ("this is CPython: it takes its small objects from its own allocator (pymalloc) unless "
           "PYTHONMALLOC=malloc is set: set it for the profile and for every run "
           "(PYTHONMALLOC=malloc cohort optimize ..., and the same for cohort run)")


def runtime_hint(profile):
    """What to do for a program whose runtime hides its objects from Cohort, or None."""
    if any(CPYTHON_MODULE.match(os.path.basename(m["path"])) for m in profile["modules"]):
        return CPYTHON
    return None


def why_no_groups(profile, accesses, formed, kept, group_threshold, policy="halo", rest_pool=True,
                  allocator="glibc"):
    """Why a plan has no group, in words, with what to do about it.
    rest_pool: whether the plan keeps its rest pool (where the small
    objects then go), else they are the allocator's alone."""
    where = "small objects still share the rest pool" if rest_pool else f"every object is {allocator}'s alone"
    t = profile["totals"]
    p = profile["parameters"]["max_size"]
    small = sum(c["allocations"] for c in profile["contexts"] if c["min_size"] <= p)
    hint = runtime_hint(profile)
    if hint:
        return f"no groups: {hint}"
    if grouping(policy) == NONE:
        return f"no groups: --policy {policy} keeps every small object in the rest pool alone"
    if small == 0:
        return (f"no groups: the program made no heap allocation of up to {p} bytes "
                f"({sum(c['allocations'] for c in profile['contexts'])} allocations in all); Cohort "
                "places small objects")
    own = own_allocator(profile)
    if own:
        return (f"no groups: {own:.0%} of the heap bytes it allocates are in blocks over {p} bytes: "
                "the program probably carves its objects out of them with an allocator of its own "
                "(an arena, pool or slab), where Cohort cannot see them; if it can be told to use "
                "malloc for each object, profile and run it that way")
    if not accesses:
        return (f"no groups: too few accesses to small heap objects to place ({t['accesses']} to "
                f"{small} allocations); profile on an input that runs longer, or give the program "
                "more work")
    if grouping(policy) == STREAMS and not formed:
        hs = profile["hot_streams"]
        return (f"no groups: the {hs['streams']} hot data streams of the heap trace (covering "
                f"{hs['coverage']:.0%} of it) project no saving in cache lines, or none of their objects has "
                f"a call site in the application")
    if policy in KEEP_ALL:
        if not formed:
            return (f"no groups: no hot object is reachable from a collection (a list, tree, cycle or "
                    f"array of pointers) in the DS graph, which holds "
                    f"{len(profile['ds_graph']['edges'])} pointer edges from "
                    f"{profile['ds_graph']['pointer_stores']} stores; --policy apa-all pools every hot "
                    f"context")
        return (f"no groups: none of the {len(formed)} pools can be selected (the notes below say why); "
                f"{where}")
    if not formed:
        return ("no groups: no two hot contexts' objects are used together within the affinity "
                "distance (the graph has no edge above --min-weight): the heap is not walked in a "
                "way that placement helps")
    if not kept:
        best = max(g.weight for g in formed)
        share = best / max(t["accesses"], 1)
        return (f"no groups: everything is cold: the best of the {len(formed)} candidate groups "
                f"carries {share:.2%} of heap accesses as internal affinity, under --group-threshold "
                f"{group_threshold:g}; if the training run is much shorter than real runs, lower it "
                f"(e.g. --group-threshold {group_threshold / 10:g})")
    return (f"no groups: all {len(kept)} candidate groups were dropped (the notes below say "
            "why): none pays, since identifying it costs more than its placement saves, its objects "
            "are used more with others than with each other, it does not transfer to a validation "
            f"run, or it lost when measured on a larger input (--ref); {where}")


def assemble(profile, kept, params, notes):
    """Identification, sites, predictions, verdicts and stop sites for the
    groups `kept` (halo.Group), in the runtime's limits."""
    unknown_entry, entry_purity = params["unknown_entry"], params["entry_purity"]
    contexts = profile["contexts"]
    chains = {c["id"]: c["sites"] for c in contexts}
    index = identification.holding(chains)   # the contexts that hold each site
    popularity = [sum(contexts[m]["accesses"] for m in g.members) for g in kept]
    selectors = identification.identify([g.members for g in kept], chains, popularity, index)

    # Sites: selector sites first (they must fit), most popular group first.
    sites, planned = [], []
    for sel in selectors:
        g = kept[sel.group]
        if not sel.conjunctions:
            notes.append(f"group around context {g.members[0]} dropped: none of its {len(g.members)} "
                         f"contexts has a call site in the application (their stacks hold system "
                         f"libraries only), so nothing can select it")
            continue
        need = [s for conj in sel.conjunctions for s in conj if s not in sites]
        if len(sites) + len(dict.fromkeys(need)) > MAX_SITES:
            notes.append(f"group around context {g.members[0]} dropped: its selector needs more "
                         f"than the runtime's {MAX_SITES} sites")
            continue
        sites.extend(dict.fromkeys(need))
        planned.append(PlannedGroup(
            name="-".join(filter(None, (f"g{len(planned)}",
                                        group_label(profile, g.members, sel.conjunctions)))),
            members=g.members,
            weight=g.weight, score=g.score, accesses=popularity[sel.group],
            allocations=sum(contexts[m]["allocations"] for m in g.members),
            conjunctions=sel.conjunctions, conflicts=sel.conflicts,
            unidentifiable=sel.unidentifiable, nodes=getattr(g, "nodes", g.members),
            merged=any(h[1] == "merged" for h in g.history), apart=g.apart))

    # What the runtime will decide for every profiled context (first match):
    # each group's contexts found through the sites' index, the later groups
    # first, so that an earlier group's overwrite them.
    ids = [c["id"] for c in contexts]

    def first_match():
        out = dict.fromkeys(ids)
        for i in reversed(range(len(planned))):
            for conj in planned[i].conjunctions:
                for c in identification.matching(conj, index, ids):
                    out[c] = i
        return out
    predicted = first_match()

    # A group none of whose members the runtime would give it (an earlier
    # group's selector takes them all: their stacks hold all its sites) is
    # no group: drop it and say which group takes its contexts.
    shadowed = [i for i, g in enumerate(planned) if all(predicted[m] != i for m in g.members)]
    if shadowed:
        for i in shadowed:
            g = planned[i]
            takers = sorted({planned[predicted[m]].name for m in g.members if predicted[m] is not None})
            notes.append(f"group around context {g.members[0]} dropped: the selector of "
                         f"{', '.join(takers) or 'an earlier group'} also matches all its contexts "
                         f"(their stacks hold every site it tests), and the first match wins")
        planned = [g for i, g in enumerate(planned) if i not in shadowed]
        for i, g in enumerate(planned):
            g.name = re.sub(r"^g\d+", f"g{i}", g.name)
        sites = list(dict.fromkeys(s for g in planned for conj in g.conjunctions for s in conj))
        predicted = first_match()

    # An allocation entering at a site the profile never saw can match a
    # selector only through sites seen deeper than the entry. If every
    # conjunction holds a site only ever seen as an entry, walking such an
    # allocation can find nothing: "auto" makes unknown entries cold.
    if unknown_entry == "auto":
        deep = {s for c in contexts for s in c["sites"][1:]}
        reachable = any(all(s in deep for s in conj) for g in planned for conj in g.conjunctions)
        unknown_entry = "walk" if reachable else "cold"

    # Quick-test verdicts on entry sites, the busiest entries first, within
    # the budget: "group=G" if the site alone is one of G's conjunctions and
    # every context entering there goes to G, or if G takes at least
    # `entry_purity` of the allocations entering there and no other group
    # takes any (the rest, ungrouped until now, join G: a conflict the
    # report counts, traded for no walk beyond that frame); "walk" if some
    # context entering there is grouped; else "cold".
    entries = {}
    for c in contexts:
        if c["sites"]:
            e = entries.setdefault(c["sites"][0], {"grouped": False, "allocations": 0, "groups": {}})
            e["grouped"] |= predicted[c["id"]] is not None
            g = predicted[c["id"]]
            e["groups"][g] = e["groups"].get(g, 0) + c["allocations"]
            e["allocations"] += c["allocations"]
    absorbed, decided = 0, {}
    verdicts = {}
    order = sorted(entries, key=lambda s: (not entries[s]["grouped"], -entries[s]["allocations"], s))
    for s in order:
        if s not in sites and len(sites) >= MAX_SITES:
            notes.append(f"{len(order) - len(verdicts)} entry sites left without a verdict "
                         f"(the runtime takes {MAX_SITES} sites); they get unknown-entry {unknown_entry}")
            break
        if s not in sites:
            sites.append(s)
        gs = entries[s]["groups"]
        real = [g for g in gs if g is not None]
        only = real[0] if len(real) == 1 else None
        if only is not None and len(gs) == 1 and (s,) in planned[only].conjunctions:
            verdicts[s] = f"group={only}"
        elif only is not None and gs[only] >= entry_purity * max(entries[s]["allocations"], 1):
            verdicts[s] = f"group={only}"
            absorbed += gs.get(None, 0)
            decided[s] = only
        else:
            verdicts[s] = "walk" if entries[s]["grouped"] else "cold"
    for c in contexts:  # what the runtime will now do with those entering there
        if c["sites"] and c["sites"][0] in decided:
            predicted[c["id"]] = decided[c["sites"][0]]
    if absorbed:
        notes.append(f"entry-site verdicts also group {absorbed} allocations of otherwise ungrouped "
                     f"contexts (--entry-purity {entry_purity}), sparing their stack walks")
    stops = stop_sites(contexts, sites, verdicts, predicted, unknown_entry, entry_purity, notes)
    paths, frames, complete = decision_paths(contexts, sites, verdicts, predicted, unknown_entry, stops,
                                             entry_purity, notes)
    modules = list(dict.fromkeys(profile["sites"][s]["module"] for s in sites))
    return Plan(groups=planned, rejected=[], sites=sites, verdicts=verdicts, stops=stops,
                paths=paths, frames=frames, modules=modules, paths_complete=complete,
                unknown_entry=unknown_entry,
                max_size=min(max(profile["parameters"]["max_size"], MIN_MAX_SIZE), MAX_MAX_SIZE),
                predicted=predicted, notes=notes)


def kept_verdicts(plan, keep_all_policy, validated):
    """For each group the plan keeps, the rule that kept it and its figures,
    beside the notes on the groups dropped: what cohort explain shows from
    the plan file (render writes every note into it). keep_all_policy: the
    policy that keeps every group it forms, if it is one."""
    out = []
    for i, (g, w) in enumerate(zip(plan.groups, plan.worth)):
        if keep_all_policy:
            out.append(f"group {i} {g.name} kept: the {keep_all_policy} policy keeps every group it forms")
            continue
        out.append(f"group {i} {g.name} kept: its objects are used more with each other ({w.inside} "
                   f"affinitive accesses) than with objects outside it ({w.outside}), and its placement "
                   f"saves at most {w.saving_ns / 1e6:.2f} ms against {w.cost_ns / 1e6:.2f} ms of identifying "
                   f"its objects{' where the plan runs' if w.at else ''}"
                   f"{'; it pays on every validation run too' if validated else ''}")
    return out


def verdicts(plan):
    """The planner's verdicts on a plan, as its file carries them: every
    note (the groups kept and dropped, and why), then the rest pool's
    shape and its figures."""
    rest = [f"group {plan.rest} rest kept, {rest_text(plan)}"] if plan.rest is not None else []
    return list(plan.notes) + rest


def render(plan, profile, source="profile.json"):
    """The plan file's text."""
    header = [f"# made by cohort plan{'' if plan.policy == 'halo' else ' --policy ' + plan.policy} from {source}",
              f"{planfile.ALLOCATOR_MARK} {plan.allocator}"]
    # The planner's verdicts, which cohort explain shows from the file.
    header += [f"{planfile.NOTE_MARK} {' '.join(n.split())}" for n in verdicts(plan)]
    mod_index = {m: i for i, m in enumerate(plan.modules)}
    site_index = {s: i for i, s in enumerate(plan.sites)}
    notes = {("site", i): site_name(profile, s) for i, s in enumerate(plan.sites)}
    # What carries the sites to another build (cohort plan --rebase; the
    # runtime does it too): the profile's, taken when it was made; for a
    # profile made before anchors, the module's file's, if it is still the
    # build profiled (a plan is rendered many times over by tune and bench,
    # so the file is not read again for a profile that has its anchors).
    anchors = {i: profile["sites"][s]["anchor"] for i, s in enumerate(plan.sites)
               if valid_anchor(profile["sites"][s].get("anchor"))}
    missing = [i for i, s in enumerate(plan.sites) if i not in anchors]
    if missing and not any("anchor" in s for s in profile["sites"]):
        anchors.update(plan_anchors({i: (profile["modules"][m]["build_id"], profile["modules"][m]["path"])
                                     for i, m in enumerate(plan.modules)},
                                    {i: (mod_index[profile["sites"][plan.sites[i]]["module"]],
                                         profile["sites"][plan.sites[i]]["offset"]) for i in missing}))
    groups = [g.name for g in plan.groups]
    notes.update({("group", i): f"contexts {' '.join(map(str, g.members))}" for i, g in enumerate(plan.groups)})
    if plan.rest is not None:
        groups.append("rest")
        notes[("group", plan.rest)] = f"every allocation of up to {plan.rest_max} bytes no other group claims"
    content = {
        "max_size": plan.max_size,
        "modules": [(profile["modules"][m]["build_id"], profile["modules"][m]["path"]) for m in plan.modules],
        "sites": [(mod_index[profile["sites"][s]["module"]], profile["sites"][s]["offset"], plan.verdicts.get(s),
                   plan.stops.get(s)) for s in plan.sites],
        "anchors": anchors, "groups": groups, "group_at": plan.line_at,
        "selects": [(i, [site_index[s] for s in conj]) for i, g in enumerate(plan.groups) for conj in g.conjunctions],
        "rest": plan.rest, "rest_max": plan.rest_max, "rest_one": plan.rest_one,
        "paths": {tuple(site_index[s] for s in path): verdict for path, verdict in plan.paths.items()},
        "unknown_entry": plan.unknown_entry, "unknown_path": plan.unknown_path}
    return planfile.plan_text(content, header, notes=notes)


def report(plan, profile):
    """What the planner did, for people (printed by `cohort plan`)."""
    contexts = profile["contexts"]
    total_alloc = sum(c["allocations"] for c in contexts) or 1
    if profile.get("families") is not None:
        hot = f"{len(profile['family_graph']['nodes'])} hot context families"
    else:
        hot = f"{len(profile['graph']['nodes'])} hot contexts"
    if grouping(plan.policy) == DS:
        out = [f"{len(plan.groups)} groups from {hot}, made by APA's heuristic {plan.policy} on the DS graph"]
    elif grouping(plan.policy) == STREAMS:
        out = [f"{len(plan.groups)} groups from the heap trace's hot data streams (hds), each a set of "
               f"immediate call sites"]
    else:
        out = [f"{len(plan.groups)} groups from {hot} ({len(plan.rejected)} more under the weight threshold)"
               + (", with the DS graph's pointers as extra affinity (halo+ds)" if plan.policy == "halo+ds" else "")]
    if plan.why_none:
        out.append(f"  {plan.why_none}")
    for i, g in enumerate(plan.groups):
        out.append(f"  group {i} {g.name}: {len(g.members)} contexts, {g.allocations} allocations, "
                   f"{g.accesses} accesses, internal weight {g.weight}, score {g.score:.0f}, "
                   f"{len(g.conjunctions)} selector terms")
        if i < len(plan.worth):
            out.append(f"    worth: {worth_text(plan.worth[i])}")
        if g.conflicts:
            extra = sum(contexts[c]["allocations"] for c in g.conflicts)
            out.append(f"    conflicts: its selector also matches {len(g.conflicts)} other contexts "
                       f"({extra} allocations, {100 * extra / total_alloc:.1f}% of all)")
        if g.unidentifiable:
            out.append(f"    {len(g.unidentifiable)} members have no application frame and cannot be selected")
    if plan.rest is not None:
        rest = sum(c["allocations"] for c in contexts if plan.predicted[c["id"]] == plan.rest)
        out.append(f"  group {plan.rest} rest: the {rest} other allocations of up to {plan.rest_max} bytes "
                   f"({100 * rest / total_alloc:.1f}%), pooled apart from the groups (--rest pool), "
                   f"{rest_text(plan)}")
    for n in plan.notes:
        out.append(f"  note: {n}")
    if plan.transfers:
        out.append("Validation runs (the plan replayed on their profiles):")
        out += transfer.lines(plan.transfers, [g.name for g in plan.groups] + ["rest"])
    return "\n".join(out)


def load_validations(profile, paths, what="the training profile"):
    """The profiles of validation runs, each checked to be of the same build
    of the same program as `profile`."""
    from cohort.formats.profilefile import load_profile
    out = []
    for p in paths or ():
        v = load_profile(p)
        transfer.same_program(profile, v, what, f"validation profile {p}")
        out.append(v)
    return out


def plan_command(profile_path, output, force=False, validate=(), loaded=None, **params):
    """profile_path's plan, written to output; returns (plan, profile).
    loaded: the profile at profile_path, already read (cohort optimize
    hands on the one it has just written: read again and checked, a large
    program's took seconds), else it is read and checked here."""
    from cohort.formats.profilefile import load_profile
    output = Path(output)
    claim(output, "plan", force)
    if params.get("unknown_entry") not in ("walk", "cold", "auto"):
        raise CohortError("--unknown-entry must be walk, cold or auto")
    if params.get("unknown_path", "auto") not in ("walk", "cold", "auto"):
        raise CohortError("--unknown-path must be walk, cold or auto")
    if not 0 <= params.get("tolerance", 0.05) < 1 or params.get("max_members", 1) < 1 or \
            not 0 < params.get("entry_purity", 0.98) <= 1:
        raise CohortError("tolerance must be in [0, 1), max members at least 1, entry purity in (0, 1]")
    if params.get("rest_max") is not None and not 16 <= params["rest_max"] <= MAX_MAX_SIZE:
        raise CohortError(f"--rest-max must be 16 to {MAX_MAX_SIZE} bytes")
    if params.get("rest", "auto") not in ("pool", "none", "auto"):
        raise CohortError("--rest must be pool, none or auto")
    if any(not 0 <= v < float("inf") for v in (params.get("costs") or {}).values()):
        raise CohortError("--walk-cost, --frame-cost, --patched-cost, --stub-cost, --stop-cost, --stop-stub-cost, "
                          "--empty-cost, --miss-cost, --split-cost, --passthrough-cost, --quick-cost and "
                          "--entry-stub-cost must be finite and not negative")
    profile = loaded if loaded is not None else load_profile(profile_path)
    validations = load_validations(profile, validate, f"profile {profile_path}")
    plan = make_plan(profile, validations=validations, **params)
    write_output(output, render(plan, profile, source=os.path.basename(str(profile_path))), "plan", force)
    return plan, profile
