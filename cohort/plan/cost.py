"""The planner's cost model: what a group's placement can save and what
identifying its objects costs, both where the plan runs (docs/planner.md,
"What a group is worth"): the prices (COST_DEFAULTS), a group's Worth,
the walks, stubs and entry decisions charged to it (assess), and the
texts that quote them."""

from dataclasses import dataclass

from cohort.plan import transfer
from cohort.plan.paths import walk_frames
from cohort.policies import halo

# Measured costs of the runtime's paths on this machine (scripts/bench-runtime.py,
# docs/planner.md): a stack walk's fixed part and each frame it steps, and the
# most a placement can save per affinitive access (a D1 miss served by L2).
# With the selector sites patched (the runtime's default), an allocation
# past the entry is decided from the bits its stubs set: patched_ns is that
# decision, measured against the same grouped allocation with no
# identification at all, where cohort plan's own plans send it: an entry
# marked walk, whose call is patched too (`scripts/bench-runtime.py 7 alt`,
# "plan ab patched, entry walk" less "mode all", 2026-11-28: 18.4, 18.0 and
# 19.5 ns at 3, 15 and 40 frames, each with one stub's push, stub_ns, in
# it). It was 10 until then, taken from a plan whose entry was not marked
# and from a mode all that still paid for a prefetch of address 0. A
# stub's push is paid per call through a selector site that changes the
# bits, not per allocation (3 ns more where every allocation follows such a
# call). Profiles from raw version 5 on count every call site's calls, and
# stub_ns prices them: a call through a patched selector or stop site runs
# its stub whether or not it allocates (docs/runtime.md, "Patched selector
# sites": 3 ns for a call that pushes an activation, 1.1 ns for one that
# changes nothing, as a recursive call; the dearer is taken). split_ns
# is what splitting the rest pool by size class costs a malloc+free pair:
# `allocbench churn 20000000` under a plan of the rest pool alone, 7
# interleaved runs, medians 10.26 ns by class and 9.10 ns in one pool
# (cachegrind: 124.1 against 117.7 instructions and 1.10 against 0.90 D1
# misses per pair, the classes' own chunk headers and heap lines).
# rest_ns is what a malloc+free pair in the rest pool costs over the same
# pair in jemalloc's thread cache: `scripts/bench-runtime.py`'s stream at
# one group, 2026-11-29, 10.84 ns against 8.98 (stop 74's run); cachegrind
# on calc counts 90 instructions a pair against jemalloc's 67. A group of
# a plan with no rest pool, in front of such an allocator, takes its
# objects from it and pays the same for each of their pairs.
# passthrough_ns is what the runtime's plan mode costs a malloc+free pair it
# hands to the next allocator: a cold site's call patched to reach it
# directly, and free's range test. `allocbench churn 20000000` in front of
# jemalloc under a plan whose entry is cold, 15 interleaved runs,
# 2026-11-29: median 9.08 ns (8.98-9.71) against jemalloc alone's 8.45
# (8.08-9.48), rounded up (through the quick test, before the cold sites
# were patched: 15.16, priced 5.5). A plan with no rest pool loads the
# runtime for its groups alone, so they pay it for every allocation they
# do not take.
# stop_ns is an allocation decided from a stop site's record (the innermost
# stop on its stack), over the same allocation in the rest pool, and
# stop_stub_ns a call through a stop site: stop sites keep records of their
# own (docs/runtime.md, "Stop sites"). empty_ns is one that finds no
# selector or stop site live, decided as an empty stack is. allocbench
# wrapper, 25 interleaved runs of 4 M pairs, 2026-11-29, first quartiles
# (the machine's quiet runs): the rest pool alone 11.23 ns a pair, both
# kinds decided by their stop sites 11.72 (+15.0 instructions under
# cachegrind, the stop's stub included), one kind's call a stop site and
# the other's nothing 12.18, so 12.64 for the kind with nothing live (+47
# instructions); `scripts/bench-runtime.py 9 wrapper`: a call through a
# stop site 2.11 against 1.88 ns (+5.0 instructions). Each rounded up.
# quick_ns and entry_stub_ns are what a plan with groups costs each other
# allocation against a plan of the rest pool alone, whose allocations take
# the lane with no identification: decided at its entry site by the quick
# test where no stub reaches the site (not a direct call), by the site's
# stub where one does. `allocbench churn 5000000`, its sites marked cold in
# a plan with one group elsewhere and the rest pool, 5 interleaved runs,
# 2026-11-29, medians: 16.27 ns a pair through the quick test
# (COHORT_PATCH=0), 12.20 through the stubs, 11.72 under the rest pool alone.
COST_DEFAULTS = {"walk_ns": 30.0, "frame_ns": 4.0, "miss_ns": 3.5, "patched_ns": 15.0, "split_ns": 1.2,
                 "stub_ns": 3.0, "rest_ns": 1.9, "passthrough_ns": 1.0, "stop_ns": 0.5, "stop_stub_ns": 0.3,
                 "empty_ns": 1.5, "quick_ns": 4.5, "entry_stub_ns": 0.5}


# The allocators a plan may be made for: glibc's malloc keeps a header
# beside each block and places small blocks of every size together, which
# the rest pool beats; jemalloc and tcmalloc keep small blocks by size class
# in slabs, the rest pool's layout split by class, at a cheaper pair.
SIZE_CLASS_ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")


@dataclass
class Worth:
    """Why a group is worth having: what its placement can save at most and
    what identifying its objects costs (the stack walks it makes necessary),
    both in ns over the profiled run. A pool of its own brings the group's
    objects together (`inside`: the affinity among them) but takes them away
    from the objects they were allocated among in the shared rest pool
    (`outside`: their affinity with every context outside the group); what
    it can save is the difference, priced at one avoided miss per access."""
    inside: int
    outside: int
    saving_ns: float
    walk_ns: float = 0.0
    walked_allocations: int = 0
    frames: float = 0.0                # mean frames per walk charged to it
    identify: str = "patched"          # how those allocations are decided: "patched" or "walk"
    misses: tuple = None               # transfer.context_misses of its objects (None: not measured)
    mean_size: float = 0.0             # of its objects (transfer.line_share)
    share: float = None                # transfer.near_share of its affinity (None: from its mean size)
    stub_calls: int = 0                # calls through its patched selector and stop sites (its share)
    stub_ns: float = 0.0               # what their stubs cost
    strangers: float = 1.0             # transfer.strangers_of: what a pool of its own takes it from
    beside: str = None                 # the layout its strangers were measured in (None: counted)
    one_pool: bool = False             # the rest pool stays one pool
    at: object = None                  # scale.AtScale: the group where the plan runs (None: the profiled run)
    passed: int = 0                    # allocations the runtime hands on for it (its share; no rest pool)
    passthrough_ns: float = 0.0        # what handing them on costs
    quick: int = 0                     # other allocations it puts through the quick test (its share)
    entry_ns: float = 0.0              # what deciding other allocations at their entry sites costs
    taken: int = 0                     # its allocations taken from an allocator of size classes (no rest pool)
    taken_ns: float = 0.0              # what their pairs cost in its pool over that allocator's
    framed: int = 0                    # other allocations walked past system frames for it (its share)
    framed_ns: float = 0.0             # what those walks cost
    others: float = None               # the factor on the other allocations where the plan runs (None: grown's)

    @property
    def grown(self):
        """What its identification is multiplied by where the plan runs."""
        return self.at.allocations if self.at else 1.0

    @property
    def others_grown(self):
        """What its charges for the other allocations (handed on, decided at
        their entry, walked past system frames) are multiplied by where the
        plan runs: those allocations grow as their own contexts do."""
        return self.others if self.others is not None else self.grown

    @property
    def cost_ns(self):
        """What identifying its objects costs in all, decisions and stubs,
        where the plan runs."""
        return ((self.walk_ns + self.stub_ns + self.taken_ns) * self.grown
                + (self.passthrough_ns + self.entry_ns + self.framed_ns) * self.others_grown)

    @property
    def pays(self):
        return transfer.group_pays(self.inside, self.outside, self.saving_ns, self.cost_ns)


def direct_sites(profile):
    """The profile's call sites the runtime can patch: direct calls (every
    site, in a profile that does not say)."""
    return {s["id"] for s in profile.get("sites", []) if s.get("call", "direct") == "direct"}


def entry_decisions(contexts, walked, direct):
    """(by the quick test, at a stub): the allocations that a plan with
    groups decides at their entry sites and a plan of the rest pool alone
    does not decide at all, those of every context with sites that is not
    walked for (walked(c)): at the entry site's stub where the runtime can
    patch the site (direct: those site ids; None: every site), else by the
    quick test."""
    quick = stubbed = 0
    for c in contexts:
        if not c["sites"] or walked(c):
            continue
        n = c["allocations"] - through_system(c)[0]   # those walk (framed_walks)
        if direct is None or c["sites"][0] in direct:
            stubbed += n
        else:
            quick += n
    return quick, stubbed


def through_system(c):
    """(allocations, system frames above their entry, in all) of a
    context's allocations that entered the allocator through a system
    module's code: libstdc++ making a std::string, libc's strdup (profiles
    before raw version 7 do not say: none)."""
    t = c.get("through_system") or {}
    return t.get("allocations", 0), t.get("frames", 0)


def framed_walks(contexts, walked, costs):
    """(allocations, ns) of every context not walked for anyway (walked(c))
    that entered the allocator through a system module's code. Under a plan
    with groups the runtime cannot decide them at the door: the return
    address is the system module's, shared by every caller, so it walks
    past the system frames to the entry site (a stack walk of those frames
    and the entry's), where a plan of the rest pool alone decides nothing.
    On `objects` (a C++ program whose log strings and map keys libstdc++
    makes) a plan with one group ran 23% more instructions than its rest
    pool alone, 29 M of them in those walks (docs/planner.md, "Allocations
    entered through a system module")."""
    n = ns = 0
    for c in contexts:
        a, frames = through_system(c)
        if not a or not c["sites"] or walked(c):
            continue
        n += a
        ns += a * costs["walk_ns"] + (frames + a) * costs["frame_ns"]
    return n, ns


def stub_costs(plan, profile, costs):
    """{group: (calls, ns)} of the stubs at its patched sites
    (transfer.patched_sites, transfer.stub_shares); None where the profile
    does not count calls."""
    read = as_read(plan, profile)
    to_profile = dict(enumerate(plan.sites))
    return transfer.stub_shares(transfer.patched_sites(read, to_profile), profile["sites"], costs,
                                transfer.stop_sites(read, to_profile))


@dataclass
class WalkShare:
    """What deciding allocations past their entry costs a group
    (walk_shares): allocations, the frames a walk would step on average,
    ns, and how many of them are decided from patched call sites."""
    allocations: int = 0
    frames: float = 0.0
    ns: float = 0.0
    patched: int = 0


def walk_shares(contexts, walk_of, group_of, deciding):
    """{group: WalkShare}: every allocation whose entry site walks
    (`walk_of(c)`: the frames its walk looks at, None if its entry decides)
    is decided there at `deciding(c, frames)`: (ns, from patched sites), and
    each entry site's total is shared by the groups that allocate there in
    proportion to their allocations: an allocation no group takes is
    decided all the same, for the groups' sake. A site where no group
    allocates is charged to None."""
    sites = {}
    for c in contexts:
        frames = walk_of(c) if c["sites"] else None
        if frames is None:
            continue
        ns, patched = deciding(c, frames)
        w = sites.setdefault(c["sites"][0], [WalkShare(), {}])
        n = c["allocations"]
        w[0].allocations += n
        w[0].frames += n * frames
        w[0].ns += n * ns
        w[0].patched += n if patched else 0
        g = group_of(c["id"])
        w[1][g] = w[1].get(g, 0) + n
    out = {}
    for total, groups in sites.values():
        mine = {g: n for g, n in groups.items() if g is not None} or {None: total.allocations}
        for g, n in mine.items():
            part = n / sum(mine.values())
            o = out.setdefault(g, WalkShare())
            o.allocations += round(total.allocations * part)
            o.frames += total.frames * part
            o.ns += total.ns * part
            o.patched += round(total.patched * part)
    for o in out.values():
        o.frames = o.frames / o.allocations if o.allocations else 0.0
    return out


def assess(plan, contexts, edges, costs, identify="patched", direct=None, profile=None, rest_pool=None,
           pricing=None, passthrough=False, pair_ns=0.0):
    """Worth of each planned group. `edges`: the graph's {(x, y): weight}
    over the groups' nodes. Every allocation its entry site does not decide
    is charged to the groups its entry site walks for, shared by their
    allocations there: at patched_ns each when the selector sites are
    patched, else a walk to the end of its decision path. The runtime
    patches only direct calls (`direct`: those site ids; None: all): a
    context on which some selector or stop site is another kind of call
    is priced as a walk. With the selector sites patched, each group also
    pays its stubs, per call through its sites (`profile`: its sites count
    their calls; stub_costs). A profile that does not count
    them leaves its merged groups priced as stack walks instead, since
    their selectors span the call sites of several structures, often hot
    recursive ones. rest_pool: "classes" or "one", the shape of the rest
    pool every small object no group claims goes to (None: none), against
    which a group's saving is weighed (transfer.rest_strangers). pricing:
    the scale.Pricing that prices both sides where the plan runs (None:
    over the profiled run, miss_ns a miss). passthrough: the plan has no
    rest pool, so the runtime is loaded for its groups alone, and they pay
    for every allocation it hands on (passthrough_ns), and pair_ns for each
    of their own, taken from the allocator underneath (an allocator of size
    classes, whose pair is cheaper than a pool's: rest_ns)."""
    stubs = stub_costs(plan, profile, costs) if identify == "patched" and profile else None
    selector_sites = {s for g in plan.groups for conj in g.conjunctions for s in conj} | set(plan.stops)
    # A stop site no stub can reach (not a direct call) could be inner to
    # any record, so the runtime decides nothing from the patched sites:
    # every allocation past its entry is a stack walk (docs/runtime.md,
    # "Stop sites").
    stops_whole = direct is None or all(s in direct for s in plan.stops)

    def walk_of(c):
        verdict = plan.verdicts.get(c["sites"][0]) or plan.unknown_entry
        return walk_frames(c, plan.stops, plan.frames) if verdict == "walk" else None

    def deciding(c, frames):
        g = plan.predicted.get(c["id"])
        patched = identify == "patched" and stops_whole and (direct is None or all(
            s in direct for s in c["sites"] if s in selector_sites)) and not (
            stubs is None and g is not None and g < len(plan.groups) and plan.groups[g].merged)
        live = transfer.live_kind(c["sites"], selector_sites, plan.stops)
        return transfer.identification_ns(costs, patched, frames, live), patched
    shares = walk_shares(contexts, walk_of, plan.predicted.get, deciding)
    worth = []
    everything = transfer.run_accesses(contexts)
    others = pricing.allocations(contexts, [c["id"] for c in contexts if plan.predicted.get(c["id"]) is None]) \
        if pricing else None
    cold = halo.dropped_affinity(profile) if profile else {}
    for g in plan.groups:
        nodes, apart = set(g.nodes), set(g.apart)
        inside = sum(w for (x, y), w in edges.items() if x in nodes and y in nodes)
        # Affinity with the groups split from it by size class is given up
        # on purpose: the model of both shapes found the split misses less.
        # Affinity with the contexts the graph dropped is outside it too.
        outside = sum(w for (x, y), w in edges.items() if (x in nodes) != (y in nodes)
                      and not ({x, y} - nodes) & apart) + sum(cold.get(x, 0) for x in nodes)
        misses = transfer.context_misses(contexts, g.members, everything)
        mean = transfer.contexts_mean_size(contexts, g.members)
        share = transfer.near_share(profile, g.members) if profile else None
        calls, ns = (stubs or {}).get(len(worth), (0, 0.0))
        one = rest_pool == "one"
        strangers, beside = transfer.strangers_of(profile or {"contexts": contexts}, g.members, rest_pool,
                                                  lambda c: plan.predicted.get(c["id"]) is None)
        at = pricing.at(contexts, g.members, misses, misses is not None and transfer.stays_cached(misses)) \
            if pricing else None
        worth.append(Worth(inside=inside, outside=outside, misses=misses, mean_size=mean, share=share,
                           strangers=strangers, beside=beside, one_pool=one, at=at,
                           saving_ns=transfer.saving_ns(inside, outside, misses, costs, mean, strangers, at, share),
                           identify="walk" if g.merged and stubs is None else identify,
                           stub_calls=round(calls), stub_ns=ns, others=others))
    for g, share in shares.items():
        if g is not None and g < len(worth):
            worth[g].walked_allocations, worth[g].frames, worth[g].walk_ns = share.allocations, share.frames, share.ns
    mine = [sum(contexts[c]["allocations"] for c in g.members) for g in plan.groups]
    parts = [n / sum(mine) if sum(mine) else 1 / len(worth) for n in mine]   # each group's share
    framed, framed_ns = framed_walks(contexts, lambda c: walk_of(c) is not None, costs) if worth else (0, 0.0)
    for x, part in zip(worth, parts):
        x.framed, x.framed_ns = round(framed * part), framed_ns * part
    if passthrough and worth:
        # No rest pool: the runtime is loaded for the groups alone, and
        # hands every other allocation on at passthrough_ns, shared by the
        # groups as their allocations are.
        passed = sum(c["allocations"] for c in contexts) - sum(mine)
        for x, part, n in zip(worth, parts, mine):
            x.passed = round(passed * part)
            x.passthrough_ns = passed * part * costs["passthrough_ns"]
            x.taken, x.taken_ns = (n, n * pair_ns) if pair_ns else (0, 0.0)
    elif worth:
        # Against the rest pool alone, which takes every small allocation on
        # the lane with no identification, the groups make every allocation
        # not walked for be decided at its entry site: by the quick test
        # where no stub reaches the site, else by its stub; shared by the
        # groups as their allocations are (docs/planner.md, "What the
        # groups cost the rest").
        quick, stubbed = entry_decisions(
            contexts, lambda c: (plan.verdicts.get(c["sites"][0]) or plan.unknown_entry) == "walk", direct)
        for x, part in zip(worth, parts):
            x.quick = round(quick * part)
            x.entry_ns = (quick * costs["quick_ns"] + stubbed * costs["entry_stub_ns"]) * part
    return worth


def as_read(plan, profile):
    """The plan as plans.read_plan would read it back from its file, for
    planfile.decide and transfer.evaluate."""
    mod_index = {m: i for i, m in enumerate(plan.modules)}
    site_index = {s: i for i, s in enumerate(plan.sites)}
    names = [g.name for g in plan.groups] + (["rest"] if plan.rest is not None else [])
    paths = {tuple(site_index[s] for s in p): v for p, v in plan.paths.items()}
    return {
        "modules": [(profile["modules"][m]["build_id"], profile["modules"][m]["path"]) for m in plan.modules],
        "sites": [(mod_index[profile["sites"][s]["module"]], profile["sites"][s]["offset"],
                   plan.verdicts.get(s), plan.stops.get(s)) for s in plan.sites],
        "groups": names,
        "selects": [(i, [site_index[s] for s in conj]) for i, g in enumerate(plan.groups) for conj in g.conjunctions],
        "max_size": plan.max_size, "unknown_entry": plan.unknown_entry, "unknown_path": plan.unknown_path,
        "rest": plan.rest, "rest_max": plan.rest_max, "rest_one": plan.rest_one, "paths": paths,
        "path_prefixes": {p[:k] for p in paths for k in range(1, len(p))},
        "apart": {i: {j for j, h in enumerate(plan.groups) if set(h.nodes) & set(g.apart)}
                  for i, g in enumerate(plan.groups) if g.apart},
    }


def handed_text(w, digits=2):
    """What the runtime its group needs costs the other allocations (assess):
    those it hands on, for a plan with no rest pool; else those it decides
    at their entry sites, against the rest pool alone. And what its own
    pairs cost over an allocator of size classes it takes them from."""
    if w.passed or w.taken:
        handed = passed_text(w.passed, w.passthrough_ns * w.others_grown, digits) + taken_text(w.taken, w.taken_ns * w.grown,
                                                                                          digits)
    else:
        handed = entry_text(w.entry_ns * w.others_grown, w.quick, digits)
    return handed + framed_text(w.framed, w.framed_ns * w.others_grown, digits)


def framed_text(framed, ns, digits=2):
    """What walking past system frames to the entry costs a group (ns;
    `framed` allocations: framed_walks), for the texts that quote it."""
    if not framed:
        return ""
    return (f"; {framed} other allocations entered through a system module (libstdc++, libc), walked past its "
            f"frames to their entry site, about {ns / 1e6:.{digits}f} ms")


def pair_cost(allocator, rest, costs):
    """What each allocation a group takes from the allocator underneath
    costs over that allocator's own pair: rest_ns in front of an allocator
    of size classes when the plan has no rest pool (the groups take their
    objects from it), else nothing (from the rest pool, or from glibc,
    whose pair costs more than a pool's)."""
    return costs["rest_ns"] if rest != "pool" and allocator in SIZE_CLASS_ALLOCATORS else 0.0


def taken_text(taken, ns, digits=2):
    """What a group's own pairs cost over the allocator it takes them from."""
    if not taken:
        return ""
    return (f"; its own {taken} allocations, taken from an allocator of size classes, cost a pool's pair over "
            f"that allocator's, about {ns / 1e6:.{digits}f} ms")


def passed_text(passed, ns, digits=2):
    """What handing `passed` other allocations on to the next allocator
    costs a group of a plan with no rest pool (ns), for the texts that quote
    it; empty when none."""
    if not passed:
        return ""
    return f"; the runtime it needs hands {passed} other allocations on to the next allocator, about " \
           f"{ns / 1e6:.{digits}f} ms"


def entry_text(ns, quick, digits=2):
    """What deciding the other allocations at their entry sites costs a
    group (ns; quick of them by the quick test), for the texts that quote
    it; empty when nothing."""
    if not ns:
        return ""
    return (f"; deciding the other allocations at their entry sites, which the rest pool alone does not, "
            f"costs about {ns / 1e6:.{digits}f} ms"
            + (f" ({quick} of them by the quick test: no stub reaches their entry)" if quick else ""))


def identification_text(w, digits=2):
    """What identifying a group's objects past their entry site costs, and
    its selector stubs."""
    n = w.walked_allocations
    text = decided_text(n, n if w.identify == "patched" else 0, w.frames, w.walk_ns * w.grown, digits)
    return text + transfer.stubs_clause(w.stub_calls, w.stub_ns * w.grown, digits) + handed_text(w, digits)


def decided_text(n, patched, frames, ns, digits=2):
    """Deciding n allocations past their entry sites, `patched` of them from
    patched call sites and the rest by stack walks (`frames` a walk would
    step on average), at ns in all."""
    if patched == n:
        return (f"{n} allocations decided from patched call sites (a walk would step {frames:.1f} frames), "
                f"about {ns / 1e6:.{digits}f} ms")
    if patched:
        return (f"{n} allocations decided past their entry, {patched} of them from patched call sites and the "
                f"rest by stack walks of {frames:.1f} frames on average, about {ns / 1e6:.{digits}f} ms")
    return f"{n} stack walks of {frames:.1f} frames, about {ns / 1e6:.{digits}f} ms"


def worth_text(w):
    walks = (identification_text(w) if w.walked_allocations
             else "no stack walk (decided by entry or stop sites)"
            + transfer.stubs_clause(w.stub_calls, w.stub_ns * w.grown) + handed_text(w))
    return (f"saves at most {w.saving_ns / 1e6:.2f} ms ({w.inside} affinitive accesses inside it, "
            f"{w.outside} with objects outside it{transfer.misses_clause(w.misses, w.inside - w.outside)}"
            f"{transfer.share_clause(w.mean_size, w.share)}{transfer.strangers_clause(w.strangers, w.one_pool, w.beside)}"
            f"{w.at.clause() if w.at else ''}); "
            f"identification: {walks}")
