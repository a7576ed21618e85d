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

from cohort.policies import APA_POLICIES, DS_POLICIES, KEEP_ALL, PLAN_POLICIES, apa, halo, hds
from cohort.plan import identification, transfer, scale as scaling
from cohort.formats import planfile
from cohort.errors import CohortError
from cohort.files import claim, write_output

MAX_SITES = 256   # runtime/plan/plan.h CH_MAX_SITES
MAX_GROUPS = 63   # runtime/system/system.h CH_PLAN_GROUPS (the last group is the pool API's)
MIN_MAX_SIZE, MAX_MAX_SIZE = 8, (1 << 20) // 8   # runtime/plan/plan.c: 8 to the default chunk size / 8
REST_MAX = transfer.REST_MAX    # runtime/memory/heap.c EXACT_MAX: sizes the pools serve from exact bins
# The rest pool's shape: decided by the profile's model, or given (--rest-shape).
REST_SHAPES = ("auto", "one", "classes")
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


def stop_sites(contexts, sites, verdicts, predicted, unknown_entry, purity, notes):
    """Stop sites (DPA's partial call chains, adapted): a walk that reaches
    one ends there, in its group, so a wrapper's callers are told apart after
    a few frames instead of a walk to main. A plan site qualifies if the
    contexts whose walks reach it go to one group G only (the ungrouped among
    them may join G within `purity` of their allocations). Every context then
    keeps its group: two stop sites on one grouped context name its group
    both. Updates `predicted` for the contexts the walk now decides."""
    plan_sites = set(sites)

    def walked(c):
        if not c["sites"]:
            return False
        v = verdicts.get(c["sites"][0]) or unknown_entry
        return v == "walk"

    reach = {}
    for c in filter(walked, contexts):
        for s in c["sites"]:
            if s in plan_sites:
                r = reach.setdefault(s, {})
                r[predicted[c["id"]]] = r.get(predicted[c["id"]], 0) + c["allocations"]
    stops = {}
    for s, r in reach.items():
        real = [g for g in r if g is not None]
        if len(real) == 1 and r[real[0]] >= purity * max(sum(r.values()), 1):
            stops[s] = real[0]
    absorbed = 0
    for c in filter(walked, contexts):
        first = next((s for s in c["sites"] if s in stops), None)
        if first is not None:
            if predicted[c["id"]] is None:
                absorbed += c["allocations"]
            predicted[c["id"]] = stops[first]
    if absorbed:
        notes.append(f"stop sites also group {absorbed} allocations of otherwise ungrouped contexts "
                     f"(--entry-purity {purity}), sparing the rest of their stack walks")
    return stops


def decision_paths(contexts, sites, verdicts, predicted, unknown_entry, stops, purity, notes):
    """The decision paths (DPA's adaptive partial call chains, section 3.1,
    on HALO's selectors): from each entry site that needs a walk, the
    profiled contexts entering there are split by their next site outwards,
    and again, until those still together agree on a verdict (or one group
    takes `purity` of their allocations and no other any): the path of sites
    so far then decides, and the walk ends there. Sites a path needs join
    the plan's sites within the runtime's budget. A stop site that would
    decide the same needs no path. Returns ({path: verdict}, {context id:
    frames its walk looks at}) and updates `predicted` for the contexts the
    paths now decide."""
    def walked(c):
        return c["sites"] and c["sites"][0] in sites and \
            (verdicts.get(c["sites"][0]) or unknown_entry) == "walk"

    paths, frames, nodes = {}, {}, [0]
    absorbed = [0]
    full = [False]

    def split(prefix, members):
        counts = {}
        for c in members:
            counts[predicted[c["id"]]] = counts.get(predicted[c["id"]], 0) + c["allocations"]
        real = [g for g in counts if g is not None]
        if len(prefix) >= 2 and len(real) <= 1 and \
                (len(counts) == 1 or counts[real[0]] >= purity * sum(counts.values())):
            verdict = real[0] if real else None
            for c in members:
                frames[c["id"]] = len(prefix)
                if predicted[c["id"]] != verdict:
                    absorbed[0] += c["allocations"]
                    predicted[c["id"]] = verdict
            if not (verdict is not None and stops.get(prefix[-1]) == verdict):
                paths[tuple(prefix)] = "cold" if verdict is None else f"group={verdict}"
            return   # nothing goes on past a decided path: the walk ends there
        if len(prefix) == planfile.MAX_PATH:
            full[0] = True   # those beyond keep the full walk
            return
        onward = {}
        for c in members:
            if len(c["sites"]) > len(prefix):
                onward.setdefault(c["sites"][len(prefix)], []).append(c)
        for nxt, sub in sorted(onward.items(), key=lambda kv: (-sum(c["allocations"] for c in kv[1]), kv[0])):
            if nxt not in sites:
                if len(sites) >= MAX_SITES:
                    full[0] = True
                    continue
                sites.append(nxt)
            if nodes[0] >= planfile.MAX_NODES:
                full[0] = True
                return
            nodes[0] += 1
            split(prefix + [nxt], sub)

    entering = {}
    for c in filter(walked, contexts):
        entering.setdefault(c["sites"][0], []).append(c)
    for e, members in sorted(entering.items(), key=lambda kv: (-sum(c["allocations"] for c in kv[1]), kv[0])):
        nodes[0] += 1
        split([e], members)
    if absorbed[0]:
        notes.append(f"decision paths also group {absorbed[0]} allocations of otherwise ungrouped "
                     f"contexts (--entry-purity {purity}), sparing the rest of their walks")
    if full[0]:
        notes.append(f"some contexts keep the full walk: the decision paths reached the runtime's "
                     f"limit of {MAX_SITES} sites, {planfile.MAX_NODES} path nodes or "
                     f"{planfile.MAX_PATH} sites in one path")
    return paths, frames, not full[0]


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


def walk_frames(context, stops, frames=None):
    """Frames a walk steps for this context: to the end of its decision path
    (`frames`, by context id), else to its first stop site, else its whole
    chain and the start-up frames below main (two, in system modules)."""
    if frames and context["id"] in frames:
        return frames[context["id"]]
    for i, s in enumerate(context["sites"]):
        if s in stops:
            return i + 1
    return len(context["sites"]) + 2


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


# The policies the planner dispatches on by name; which policies there are,
# and what each needs and keeps, is the registry's (cohort/policies).
HDS_POLICY, REST_POLICY = "hds", "rest"


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
    if policy == HDS_POLICY:
        require_streams(profile, f"--policy {policy}")
    costs = dict(COST_DEFAULTS, **(costs or {}))
    contexts = profile["contexts"]
    direct = direct_sites(profile)
    accesses, edges, total, members = halo.from_profile(profile)
    if policy == "halo+ds":
        unit_of, _ = apa.units(profile)
        for key, w in apa.traversal_weights(profile, unit_of, accesses).items():
            edges[key] = edges.get(key, 0) + w
    keep_all = policy in KEEP_ALL
    if policy == REST_POLICY:
        formed, notes = [], []
    elif policy == HDS_POLICY:    # groups of contexts already, with their nodes
        formed, notes = hds_groups(profile, accesses, edges, members)
    else:
        if policy in APA_POLICIES:
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


# Where profiler/lines.c models a line-sized block (profile.LINE_OFFSETS):
# where the rest pool packs it, then 0, 16, 32 and 48 bytes into a line.
PACKED, LINE_START = 0, 1
LINE_AT = [None, 0, 16, 32, 48]
# An offset other than a pool's own is kept only when the chases that wait
# there are fewer by this share of the pool's chases, and its misses no
# more than this share higher: the model leaves the rest of the run's
# accesses out and keeps every pool's objects in one, so it moves a little
# either way from what the runtime's pools will do (layout noise of that
# order is common: results-format.md, "Layout noise").
LINE_MARGIN = 0.05
# What a rest pool that places its blocks into lines costs an allocation
# of more than 48 bytes, in a plan of the rest pool alone: the lane, which
# packs, serves it no more (runtime/identify/identify.c). `allocbench churn
# 20000000` (16 to 256 bytes) under such a plan, 7 interleaved runs,
# 2026-11-30: medians 10.70 ns a pair packed, 14.59 at=0, with 87% of the
# requests over 48 bytes: 4.5 ns each.
LANE_NS = 4.5
LANE_MAX = 48


def line_cost(lines, k):
    """The stalls the profile's model of offset k counts for a pool's objects:
    each D1 miss, and each chase that waited for its line (a pointer the
    walk follows, in a line that missed during the same visit), which
    stalls the walk once more (docs/planner.md, "Where in its line")."""
    return lines["d1_misses"][k] + lines["chase_waits"][k]


def line_totals(members):
    """The profile's model of the places (LINE_AT) summed over the contexts
    `members`, each with its `lines`: {"d1_misses": [per place],
    "chase_waits": [per place], "chases": n}."""
    totals = {key: [sum(c["lines"][key][k] for c in members) for k in range(len(LINE_AT))]
              for key in ("d1_misses", "chase_waits")}
    totals["chases"] = sum(c["lines"]["chases"] for c in members)
    return totals


def place_words(k, at=None):
    """How the texts say a pool's place: LINE_AT's index k, or the plan's
    at=K when given."""
    if at is not None:
        return f"{at} bytes into a line (at={at})"
    return "packed" if k == PACKED else "at a line's start" if k == LINE_START else f"{LINE_AT[k]} bytes into a line"


def line_choice(plan, contexts, members, own, choices, costs, charges=()):
    """Where the pool of the contexts `members` (each with its `lines`)
    should start its line-sized blocks, from its own place `own` (an index
    of LINE_AT) among `choices`: (the best index, or None to stay, and the
    text that says why; "" when no other place is a candidate). Another
    place is kept when the model stalls less there, and the stalls saved,
    priced where a miss on the pool's objects lands at the run's scale, are
    worth more than moving costs: charges, [(allocations, ns each, what
    they are)], grown with the pool's allocations to the run's scale."""
    lines = line_totals(members)
    # What the model exists for: chased pointers that stop waiting, a cost
    # cachegrind cannot see. A place is a candidate only where they wait
    # less by a material share of the chases, and the misses do not rise
    # beyond the margin; a change in misses alone is the layouts' to judge
    # (their models and cachegrind disagreed on xform's and listfrag's rest
    # pools, where this one saw 7% and 26% fewer misses and no chase).
    waits, misses = lines["chase_waits"], lines["d1_misses"]
    candidates = [k for k in choices if k == own or (
        waits[own] - waits[k] > LINE_MARGIN * lines["chases"] and misses[k] <= (1 + LINE_MARGIN) * misses[own])]
    best = min(candidates, key=lambda k: (line_cost(lines, k), k != own, k))
    saved = line_cost(lines, own) - line_cost(lines, best)
    if best == own or saved <= 0:
        return None, ""
    ids = [c["id"] for c in members]
    at = None
    if plan.pricing is not None:
        misses = transfer.context_misses(contexts, ids, transfer.run_accesses(contexts))
        at = plan.pricing.at(contexts, ids, misses, misses is not None and transfer.stays_cached(misses))
    miss_ns, grown, made = (at.miss_ns, at.accesses, at.allocations) if at else (costs["miss_ns"], 1.0, 1.0)
    saving_ns = saved * miss_ns * grown
    priced = [(n, n * ns * made, what) for n, ns, what in charges if n]
    cost_ns = sum(ns for _, ns, _ in priced)
    text = (f"the profile's model of its walks misses {lines['d1_misses'][best]} times there and waits "
            f"{lines['chase_waits'][best]} times for the line of a pointer it follows (of {lines['chases']}), "
            f"against {lines['d1_misses'][own]} and {lines['chase_waits'][own]} {place_words(own)}: "
            f"{saving_ns / 1e6:.2f} ms saved{at.clause() if at else ''}"
            + "".join(f"; its {n} {what}, {ns / 1e6:.2f} ms" for n, ns, what in priced))
    return (best if saving_ns > cost_ns else None), text


def lane_charge(members, rest_only):
    """What placing a rest pool's blocks within their lines costs a plan of
    the rest pool alone, as line_choice's charge: its allocations over
    LANE_MAX bytes leave the lane (LANE_NS each)."""
    lane = sum(c["allocations"] for c in members if c["max_size"] > LANE_MAX) if rest_only else 0
    return lane, LANE_NS, f"allocations over {LANE_MAX} bytes, which leave the lane"


def choose_line_offsets(plan, contexts, costs, rest_only=False):
    """Per pool of the plan, where in a line its line-sized blocks start
    (plan.line_at, the plan's at=K): a group's at a line's start and the
    rest pool's packed (split by class, each class's on lines) unless
    line_choice finds another place pays. Adds a note for each pool whose
    model prefers another place."""
    pools = list(range(len(plan.groups))) + ([plan.rest] if plan.rest is not None else [])
    for g in pools:
        if g in plan.line_at:
            continue
        members = [c for c in contexts if plan.predicted.get(c["id"]) == g and "lines" in c]
        if not members:
            continue
        own = PACKED if g == plan.rest and plan.rest_one else LINE_START
        choices = range(len(LINE_AT)) if g == plan.rest else range(LINE_START, len(LINE_AT))
        best, why = line_choice(plan, contexts, members, own, choices, costs, [lane_charge(members, rest_only)])
        if not why:
            continue
        name = "rest" if g == plan.rest else plan.groups[g].name
        if best is None:
            plan.notes.append(f"group {g} {name}: its blocks of whole lines stay {place_words(own)}, though "
                              f"the model prefers another place: {why}")
            continue
        plan.line_at[g] = LINE_AT[best]
        plan.notes.append(f"group {g} {name}: its blocks of whole lines start {place_words(best, LINE_AT[best])}: "
                          f"{why}")


def rest_for_lines(plan, contexts, shape, limit, costs, allocator, passed_over):
    """In front of an allocator of size classes the rest pool is left out
    when its layout alone does not pay (rest_against, whose note is
    passed_over); the allocator's classes start a line-sized block on a
    line. Placed elsewhere in their lines, the same objects may stall less
    by more than the rest pool's pairs cost over the allocator's (rest_ns
    each): then the rest pool comes back, with its blocks there. Returns
    whether it did."""
    saved = (dict(plan.predicted), plan.rest, plan.rest_max, plan.rest_one, plan.rest_layouts, list(plan.notes))
    add_rest(plan, contexts, shape, limit)
    if plan.rest is not None:
        members = [c for c in contexts if plan.predicted.get(c["id"]) == plan.rest and "lines" in c]
        allocations = sum(c["allocations"] for c in contexts if plan.predicted.get(c["id"]) == plan.rest)
        charges = [(allocations, costs["rest_ns"], f"pairs, each dearer than {allocator}'s"),
                   lane_charge(members, not plan.groups)]
        best, why = line_choice(plan, contexts, members, LINE_START, range(len(LINE_AT)), costs, charges) \
            if members else (None, "")
        if best is not None:
            plan.line_at[plan.rest] = LINE_AT[best]
            plan.notes = [n for n in plan.notes if n != passed_over]
            plan.notes.append(f"in front of {allocator} the rest pool stays, its blocks of whole lines "
                              f"{place_words(best, LINE_AT[best])}, where {allocator}'s classes start them on a "
                              f"line: {why}")
            return True
    plan.predicted, plan.rest, plan.rest_max, plan.rest_one, plan.rest_layouts, plan.notes = saved
    return False


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
    if policy == REST_POLICY:
        return "no groups: --policy rest keeps every small object in the rest pool alone"
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
    if policy == HDS_POLICY and not formed:
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


def lies_among(rest_pool, rest_one, allocator):
    """What a group's objects would otherwise lie among, for
    transfer.strangers_of: the rest pool, of its shape ("one" or
    "classes"); without one, an allocator of size classes as the rest pool
    by class (its classes keep a size's objects together in allocation
    order), glibc as objects of every size (None: the whole affinity
    counts)."""
    if rest_pool:
        return "one" if rest_one else "classes"
    return "classes" if allocator in SIZE_CLASS_ALLOCATORS else None


def shape_verdict(models, costs, given="auto"):
    """(keep the rest pool one pool?, the model it was decided from). The
    profiler places every object of up to 256 bytes in a model of each shape,
    one pool in allocation order and one pool per size class, and counts the
    misses of the whole run under each (profiler/layouts.c). The split, the
    runtime's default, stays when the D1 misses it saves in the model
    (miss_ns each) are worth more than it costs those objects' allocations
    (split_ns each); without the model, the default. models: the training
    run's model, then each validation run's (None where a profile has none),
    summed: a larger run's misses outweigh a small one's, and one input may
    walk the rest pool's objects quite otherwise than another (Xalan under
    another stylesheet; docs/planner.md, "The rest pool's shape").
    given: "one" or "classes" decides instead of the model, which is still
    kept for the report ("auto": the model decides)."""
    if given not in REST_SHAPES:
        raise CohortError(f"--rest-shape must be {', '.join(REST_SHAPES)}, not '{given}'")
    models = [m for m in models if m]
    if not models:
        return given == "one", ({"given": given} if given != "auto" else None)
    one = sum(m["one"]["d1_misses"] for m in models)
    classes = sum(m["classes"]["d1_misses"] for m in models)
    objects = sum(m["objects"] for m in models)
    saving = (one - classes) * costs["miss_ns"]
    cost = objects * costs["split_ns"]
    summed = dict(models[0], one=dict(models[0]["one"], d1_misses=one),
                  classes=dict(models[0]["classes"], d1_misses=classes), objects=objects)
    summed.update(saving_ns=saving, cost_ns=cost, runs=len(models))
    if given != "auto":
        return given == "one", dict(summed, given=given)
    return saving <= cost, summed


def rest_against(allocator, shape, costs):
    """Whether the rest pool pays in front of `allocator` ("pool" or
    "none"), and why (docs/planner.md, "The rest pool against the
    allocator underneath"). In front of glibc it does. An allocator of size
    classes already keeps small objects of a size together in allocation
    order, as the rest pool split by class does, at a cheaper pair: the
    rest pool pays there only as one pool, when the profile's model says
    one pool in allocation order misses less than classes by more than its
    objects' pairs cost over the allocator's (rest_ns each)."""
    if allocator not in SIZE_CLASS_ALLOCATORS:
        return "pool", None
    one, m = shape
    if not m or "one" not in m:
        return "none", (f"in front of {allocator} every ungrouped object goes to {allocator} (--rest none): "
                        f"the profile has no model of the rest pool's layouts to say it pays")
    saving = (m["classes"]["d1_misses"] - m["one"]["d1_misses"]) * costs["miss_ns"]
    cost = m["objects"] * costs["rest_ns"]
    if one and saving > cost:
        return "pool", (f"in front of {allocator} the rest pool stays, as one pool: in allocation order the "
                        f"profile's model misses {m['classes']['d1_misses'] - m['one']['d1_misses']} times less "
                        f"than by class ({allocator}'s layout), {saving / 1e6:.2f} ms, more than its "
                        f"{m['objects']} pairs cost over {allocator}'s ({cost / 1e6:.2f} ms)")
    return "none", (f"in front of {allocator} every ungrouped object goes to {allocator} (--rest none): one pool "
                    f"in allocation order saves {max(saving, 0) / 1e6:.2f} ms of D1 misses in the profile's "
                    f"model against {allocator}'s classes, no more than its {m['objects']} pairs cost over "
                    f"{allocator}'s ({cost / 1e6:.2f} ms)")


def rest_text(plan):
    """How the rest pool is laid out, and why, for `cohort plan`'s report."""
    shape = "in one pool, in allocation order" if plan.rest_one else "split by size class"
    m = plan.rest_layouts
    given = (m or {}).get("given")
    if given:
        shape += f" (--rest-shape {given}: measured on a larger input, or asked for)"
    if not m or "one" not in m:
        return shape if given else f"{shape} (the profile has no model of the two shapes: the runtime's default)"
    runs = m.get("runs", 1)
    whose = "the profile's model" if runs == 1 else f"the model of the {runs} runs (training and validation)"
    saves = (f"{m['saving_ns'] / 1e6:.2f} ms of D1 misses ({m['one']['d1_misses']} in one pool, "
             f"{m['classes']['d1_misses']} by class)")
    if given:
        return (f"{shape}; by class {whose} of both would save {saves}, against {m['cost_ns'] / 1e6:.2f} ms that "
                f"the classes cost its {m['objects']} small allocations")
    return (f"{shape}: by class {whose} of both saves {saves}, {'less' if plan.rest_one else 'more'} than the "
            f"classes cost its {m['objects']} small allocations ({m['cost_ns'] / 1e6:.2f} ms)")


def add_rest(plan, contexts, shape, limit):
    """The rest pool: every allocation of up to `limit` bytes (--rest-max,
    at most the plan's max-size) that no group claims. Larger ones stay
    with the next allocator. Above REST_MAX bytes the runtime keeps them in
    classes of their own, one per power of two, even when the pool stays
    one; whether taking them pays is the program's (docs/planner.md, "The
    rest pool's limit"), so the default stays REST_MAX and `cohort tune`
    tries more. Short-lived objects go to the rest pool too: a pooled
    malloc+free pair costs less than glibc's (docs/runtime.md, "The group
    allocator's own cost"), and a site sent to the next allocator would
    cost every allocation the quick test, where a plan with nothing but its
    rest pool needs none."""
    limit = min(limit, plan.max_size)
    taken = [c for c in contexts if plan.predicted[c["id"]] is None and c["max_size"] <= limit]
    if not plan.groups and not any(c["max_size"] <= REST_MAX for c in taken):
        # nothing small to place (a program's stdio buffers alone are no
        # reason to load the runtime): a plan with no pool at all lets the
        # runtime pass every call straight through, without even the quick test
        plan.notes.append("no pool: nothing the profile saw would go to one, so the plan leaves every "
                          "allocation to the next allocator and the runtime passes calls straight through")
        return
    plan.rest = len(plan.groups)
    plan.rest_max = limit
    plan.rest_one, plan.rest_layouts = shape   # the verdict on its shape, and the model
    for c in taken:
        plan.predicted[c["id"]] = plan.rest


def assemble(profile, kept, params, notes):
    """Identification, sites, predictions, verdicts and stop sites for the
    groups `kept` (halo.Group), in the runtime's limits."""
    unknown_entry, entry_purity = params["unknown_entry"], params["entry_purity"]
    contexts = profile["contexts"]
    chains = {c["id"]: c["sites"] for c in contexts}
    popularity = [sum(contexts[m]["accesses"] for m in g.members) for g in kept]
    selectors = identification.identify([g.members for g in kept], chains, popularity)

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

    # What the runtime will decide for every profiled context (first match).
    def first_match():
        out = {}
        for c in contexts:
            chain = frozenset(c["sites"])
            out[c["id"]] = next((i for i, g in enumerate(planned)
                                 if any(identification.matches(conj, chain) for conj in g.conjunctions)),
                                None)
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


def render(plan, profile, source="profile.json"):
    """The plan file's text."""
    lines = [f"cohort-plan {planfile.PLAN_VERSION}", f"# made by cohort plan{'' if plan.policy == 'halo' else ' --policy ' + plan.policy} from {source}",
             f"{planfile.ALLOCATOR_MARK} {plan.allocator}", f"max-size {plan.max_size}"]
    mod_index = {m: i for i, m in enumerate(plan.modules)}
    for i, m in enumerate(plan.modules):
        mod = profile["modules"][m]
        lines.append(f"module {i} {mod['build_id'] or '-'} {mod['path']}")
    site_index = {s: i for i, s in enumerate(plan.sites)}
    for i, s in enumerate(plan.sites):
        site = profile["sites"][s]
        words = [plan.verdicts.get(s), f"stop={plan.stops[s]}" if s in plan.stops else None]
        lines.append(f"site {i} {mod_index[site['module']]} {site['offset']:#x}"
                     + "".join(f" {w}" for w in words if w) + f"  # {site_name(profile, s)}")
    def at(g):
        return f" at={plan.line_at[g]}" if g in plan.line_at else ""
    for i, g in enumerate(plan.groups):
        lines.append(f"group {i} {g.name}{at(i)}  # contexts {' '.join(map(str, g.members))}")
    if plan.rest is not None:
        lines.append(f"group {plan.rest} rest{at(plan.rest)}  # every allocation of up to {plan.rest_max} bytes "
                     f"no other group claims")
    for i, g in enumerate(plan.groups):
        for conj in g.conjunctions:
            lines.append(f"select {i} " + " ".join(str(site_index[s]) for s in conj))
    if plan.rest is not None:
        lines.append(f"rest {plan.rest} max={plan.rest_max}" + (" one" if plan.rest_one else ""))
    for path, verdict in plan.paths.items():
        lines.append("path " + " ".join(str(site_index[s]) for s in path) + f" {verdict}")
    lines.append(f"unknown-entry {plan.unknown_entry}")
    lines.append(f"unknown-path {plan.unknown_path}")
    lines.append("end")
    return "\n".join(lines) + "\n"


def report(plan, profile):
    """What the planner did, for people (printed by `cohort plan`)."""
    contexts = profile["contexts"]
    total_alloc = sum(c["allocations"] for c in contexts) or 1
    if profile.get("families") is not None:
        hot = f"{len(profile['family_graph']['nodes'])} hot context families"
    else:
        hot = f"{len(profile['graph']['nodes'])} hot contexts"
    if plan.policy in APA_POLICIES:
        out = [f"{len(plan.groups)} groups from {hot}, made by APA's heuristic {plan.policy} on the DS graph"]
    elif plan.policy == HDS_POLICY:
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


def plan_command(profile_path, output, force=False, validate=(), **params):
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
    profile = load_profile(profile_path)
    validations = load_validations(profile, validate, f"profile {profile_path}")
    plan = make_plan(profile, validations=validations, **params)
    write_output(output, render(plan, profile, source=os.path.basename(str(profile_path))), "plan", force)
    return plan, profile
