"""Whether a plan transfers to another input (docs/planner.md, "Plans that
transfer").

A plan is made from one training run; the runs a user cares about use other
inputs, whose stacks differ: another recursion depth, other templates,
other functions of the script. This module replays a plan, exactly as the
runtime decides (planfile.decide), against the profile of another run of the
same program, and measures what carries over:

- predicted: the share of that run's allocations whose context (its family,
  recursion folded away) the training run showed, and which the plan
  decides as it decided it there. This is the plan's transfer score;
- grouped: the share the plan puts in one of its groups (not the rest pool);
- walks that find nothing: the share whose decision needs a stack walk past
  the entry and still ends in no group, the cost the unknown adds (counted
  apart: those decided from the bits of patched call sites, which cost a few
  ns, not a walk);
- per group, the planner's own test of worth on that run: its affinity
  inside against outside, and what identifying its objects costs there.

A group that does not pay on a validation run is what `cohort plan
--validate` and `cohort optimize --train ... --train ...` drop."""

import os
from dataclasses import dataclass, field

from cohort.policies import halo
from cohort.errors import CohortError
from cohort.formats.planfile import decide, leaves_paths, walk_length


def module_key(module):
    """What ties a module of one run to a module of another: its build id
    and file name (the path may differ between runs; the name and build do not)."""
    return (module["build_id"], os.path.basename(module["path"]))


def site_key(profile, sid):
    s = profile["sites"][sid]
    return module_key(profile["modules"][s["module"]]) + (s["offset"],)


def plan_site_map(plan, profile):
    """{plan site index: profile site id or None} for a plan as read_plan
    gives it, and its inverse {profile site id: plan site index}."""
    by_key = {site_key(profile, s["id"]): s["id"] for s in profile["sites"]}
    to_profile = {}
    for i, (mod, off, _, _) in enumerate(plan["sites"]):
        build_id, path = plan["modules"][mod]
        to_profile[i] = by_key.get((build_id, os.path.basename(path), off))
    return to_profile, {v: k for k, v in to_profile.items() if v is not None}


def same_program(a, b, what_a="the training profile", what_b="the validation profile",
                 advice="validate a plan with runs of the program it was made for", one_build=True):
    """CohortError unless two profiles are of one build of one program: the
    same executable file name with the same build id (or both without one).
    one_build=False: of one program, whatever its builds (cohort merge
    relates builds by their anchors)."""
    def main_module(p):
        exe = os.path.basename(p["target"].get("executable") or p["target"]["argv"][0])
        mods = [m for m in p["modules"] if os.path.basename(m["path"]) == exe]
        return exe, (mods[0]["build_id"] if mods else None)
    (ea, ba), (eb, bb) = main_module(a), main_module(b)
    if ea != eb:
        raise CohortError(f"{what_b} is of another program ({eb}) than {what_a} ({ea}): {advice}")
    if one_build and ba != bb:
        raise CohortError(f"{what_b} is of another build of {ea} than {what_a} (build id {bb or 'none'}, "
                          f"not {ba or 'none'}): profile both with one build")


def family_keys(profile):
    """{context id: key} where the key names the context's family (its
    sites with recursive re-entries folded away) by module and offset, so
    that it means the same in every run; the whole chain for a version 1
    profile."""
    out = {}
    fams = profile.get("families")
    if fams is not None:
        for f in fams:
            key = tuple(site_key(profile, s) for s in f["sites"])
            for c in f["contexts"]:
                out[c] = key
    for c in profile["contexts"]:
        if c["id"] not in out:
            out[c["id"]] = tuple(site_key(profile, s) for s in c["sites"])
    return out


@dataclass
class GroupTransfer:
    """A group of the plan on another run (counts over that run)."""
    name: str
    allocations: int = 0
    inside: int = 0        # affinity among its objects there
    outside: int = 0       # affinity of its objects with everything else
    walked: int = 0        # allocations decided past their entry that end in it
    walk_ns: float = 0.0   # what deciding those costs, priced as the planner prices it
    costs: dict = None     # the planner's prices (cost.COST_DEFAULTS)
    d1_misses: int = None  # misses of its objects' accesses there (None: not measured)
    bytes: int = 0         # bytes its objects took there
    accesses: int = 0      # accesses to its objects there
    run_accesses: int = 0  # accesses to every tracked object there
    stub_calls: int = 0    # calls through its patched selector and stop sites there (its share)
    stub_ns: float = 0.0   # what their stubs cost
    strangers: float = 1.0     # strangers_of there
    beside: str = None         # the layout its strangers were measured in (None: counted)
    one_pool: bool = False     # the plan's rest pool stays one pool
    pricing: object = None     # scale.Pricing of that run (None: at its own scale)
    members: list = None       # its context ids there
    contexts: list = None      # that run's contexts
    share: float = None        # near_share of its affinity there (None: estimated from sizes)

    @property
    def misses(self):
        if self.d1_misses is None:
            return None
        lines = lines_covered(self.allocations, self.bytes)
        return self.d1_misses, lines, touch_gap(lines, self.accesses, self.run_accesses)

    @property
    def mean_size(self):
        return self.bytes / self.allocations if self.allocations else 0.0

    @property
    def at(self):
        if self.pricing is None or self.contexts is None:
            return None
        misses = self.misses
        return self.pricing.at(self.contexts, self.members or [], misses,
                               misses is not None and stays_cached(misses))

    @property
    def saving_ns(self):
        return saving_ns(self.inside, self.outside, self.misses, self.costs, self.mean_size, self.strangers,
                         self.at, self.share)

    @property
    def cost_ns(self):
        """What identifying its objects costs there, decisions and stubs,
        at the scale it is priced at."""
        at = self.at
        return (self.walk_ns + self.stub_ns) * (at.allocations if at else 1.0)

    @property
    def pays(self):
        return group_pays(self.inside, self.outside, self.saving_ns, self.cost_ns)

    def why_not(self):
        if not self.allocations:
            return "its selectors and verdicts catch none of its objects there"
        if self.inside <= self.outside:
            return (f"its objects there are used with objects outside it ({self.outside} affinitive "
                    f"accesses) at least as much as with each other ({self.inside})")
        at = self.at
        grown = at.allocations if at else 1.0
        return (f"identifying its {self.walked} allocations past their entry costs about "
                f"{self.walk_ns * grown / 1e6:.2f} ms there"
                f"{stubs_clause(self.stub_calls, self.stub_ns * grown, lead=' and ')}, "
                f"more than the {self.saving_ns / 1e6:.2f} ms its "
                f"placement can save ({self.inside} affinitive accesses inside, {self.outside} outside"
                f"{misses_clause(self.misses, self.inside - self.outside)}{share_clause(self.mean_size, self.share)}"
                f"{strangers_clause(self.strangers, self.one_pool, self.beside)}{at.clause() if at else ''})")


@dataclass
class Transfer:
    """A plan replayed on the profile of another run."""
    run: str                        # the run's command line
    allocations: int
    predicted: int                  # allocations decided as in training (context seen there)
    known: int                      # allocations whose context the training run showed
    grouped: int                    # allocations in a group of the plan (not rest)
    walk_none: int                  # stack walks past the entry that end in no group
    bits_none: int                  # decided past the entry from patched call sites, in no group
    left: int                       # walks that left the decision paths (a stack never profiled)
    groups: list = field(default_factory=list)   # GroupTransfer per plan group (rest excluded)

    def share(self, n):
        return n / self.allocations if self.allocations else 0.0

    @property
    def score(self):
        return self.share(self.predicted)

    def summary(self):
        return (f"transfer score {self.score:.1%} (allocations decided as in training; "
                f"{self.share(self.known):.1%} in contexts training showed), grouped "
                f"{self.share(self.grouped):.1%}, stack walks that find no group {self.share(self.walk_none):.1%}"
                + (f" (and {self.share(self.bits_none):.1%} decided for no group from patched call sites, "
                   "with no walk)" if self.bits_none else "")
                + (f", walks leaving the decision paths {self.share(self.left):.1%}" if self.left else ""))


# The rest pool's largest request (runtime/memory/heap.c EXACT_MAX: sizes the pools
# serve from exact bins; planner.REST_MAX) and its classes, one per 16 bytes.
REST_MAX = 256


def rest_classes(context):
    """The rest pool's size classes a context's requests fall in."""
    lo, hi = context["min_size"], context["max_size"]
    return range((max(lo, 1) + 15) // 16, (max(hi, 1) + 15) // 16 + 1)


def rest_strangers(contexts, members, in_rest, one_pool):
    """What a pool of its own takes a group's objects away from, when the
    alternative is the rest pool: the share of the allocations in their
    place there (their size classes, or the whole pool when it stays one)
    that are not the group's own, averaged over its members by accesses.
    A group alone in its classes gains nothing from a pool of its own:
    the classes already keep its objects together in allocation order
    (docs/planner.md, *Groups against the rest pool's classes*). A
    context's allocations are taken as spread evenly over the classes of
    its sizes. `members`: context ids; `in_rest(context)`: whether a
    context's objects go to the rest pool. A member larger than the rest
    pool takes would go to the next allocator instead: 1 for it."""
    members = set(members)

    def place(c):   # the classes c's objects would lie among
        return [0] if one_pool else rest_classes(c)

    count = {}
    for c in contexts:
        if c["id"] in members or (c["max_size"] <= REST_MAX and in_rest(c)):
            classes = place(c)
            own = c["id"] in members
            for k in classes:
                n = count.setdefault(k, [0.0, 0.0])
                n[0 if own else 1] += c["allocations"] / len(classes)
    weight = total = 0.0
    for c in contexts:
        if c["id"] not in members:
            continue
        if c["max_size"] > REST_MAX:
            share = 1.0
        else:
            classes = place(c)
            share = sum(count[k][1] / (count[k][0] + count[k][1]) if count[k][0] + count[k][1] else 0.0
                        for k in classes) / len(classes)
        total += c["accesses"] * share
        weight += c["accesses"]
    return total / weight if weight else 1.0


def stubs_clause(calls, ns, digits=2, lead="; "):
    """For the texts that quote identification: the stubs of a group's
    patched call sites (stub_shares), when they run at all."""
    calls = round(calls)
    return f"{lead}its patched call sites' stubs run on {calls} calls, about {ns / 1e6:.{digits}f} ms" if calls else ""


# The profiler's two layouts (layouts.c), as the notes name them.
LAYOUT_TEXT = {"one": "allocation order", "classes": "size classes"}


def beside_strangers(run, members, layout):
    """The share of the neighbours a group's objects were placed beside in
    the profiler's model of `layout` that are of no member context
    (rest_layouts.beside), averaged over its members by accesses: measured,
    where rest_strangers only counts allocations. Tokens made in bursts lie
    beside tokens in their size class, though most of the class's
    allocations are another context's (docs/planner.md, "Strangers,
    measured"). A member none of whose objects the models place (all over
    256 bytes) is all strangers' (1), as in rest_strangers; a smaller one
    whose objects met no neighbour, none's.
    None when the profile does not measure it (raw versions before 6)."""
    pairs = ((run.get("rest_layouts") or {}).get("beside") or {}).get(layout)
    contexts = run["contexts"]
    if pairs is None or any("beside" not in contexts[c] for c in members):
        return None
    members = set(members)
    own = {}
    for c, n, k in pairs:
        if c in members and n in members:
            own[c] = own.get(c, 0) + k
    weight = total = 0.0
    for c in members:
        x = contexts[c]
        seen = x["beside"][layout]
        share = 1.0 - own.get(c, 0) / seen if seen else 1.0 if x["min_size"] > REST_MAX else 0.0
        total += x["accesses"] * max(0.0, share)
        weight += x["accesses"]
    return total / weight if weight else 1.0


def strangers_of(run, members, rest_pool, in_rest):
    """(share of strangers, the layout it was measured in or None): what a
    pool of its own takes a group's objects away from, against `rest_pool`
    ("classes", "one", or None: no rest pool, the allocator's heap). Against
    size classes (the rest pool split, or jemalloc's, mimalloc's), measured
    where the profile can (beside_strangers): a class already keeps a
    burst's objects together, and a group there gains only where strangers
    lie beside them. In allocation order, counted (rest_strangers; None: 1,
    all of them), as HALO would: measured there, it dropped groups of
    objects made in one burst whose pools still missed less (wrapsim's
    depots: 0% strangers beside them, yet LL misses 17% fewer with their
    group; docs/planner.md, "Strangers, measured")."""
    measured = beside_strangers(run, members, "classes") if rest_pool == "classes" else None
    if measured is not None:
        return measured, "classes"
    if rest_pool is None:
        return 1.0, None
    return rest_strangers(run["contexts"], members, in_rest, rest_pool == "one"), None


def strangers_clause(strangers, one_pool, beside=None):
    """For the texts that quote a saving: the share of strangers, when it
    bounds it: measured beside its objects in the profile's model of
    `beside`, else counted in the rest pool's allocations."""
    if beside is not None:
        return (f"; in the profile's model of {LAYOUT_TEXT[beside]}, {100 * strangers:.0f}% of its objects "
                f"lay beside another context's")
    if strangers >= 1.0:
        return ""
    where = "the rest pool" if one_pool else "the rest pool's size classes"
    return (f"; in {where}, {100 * strangers:.0f}% of the allocations its objects would lie among are "
            f"another context's")


def group_pays(inside, outside, saving, cost):
    """The test of worth the planner keeps a group by, and a validation run
    replays: its objects are used more with each other than with objects
    outside it, and its placement saves strictly more than identifying them
    costs."""
    return inside > outside and saving > cost


def saving_ns(inside, outside, misses, costs, mean_size=0.0, strangers=1.0, at=None, share=None):
    """The most a group's placement can save: the affinitive accesses it
    gains (its affinity inside less its affinity with objects outside),
    each at best one D1 miss turned into a hit (`miss_ns`), of which only
    the share `line_share` can fall on a line that objects of the group's
    mean size share with a neighbour, and only the share `strangers` of
    what it would lie among in the rest pool is not its own
    (rest_strangers). `misses`: (D1
    misses, cache lines) of the group's objects in the profiled run: the
    misses from the profiler's simulated cache, the lines those objects
    could occupy (`lines_covered`; None for a profile without misses).
    When the objects stayed in the cache (stays_cached: they missed no more
    than once per line, or their few lines were touched too often to be
    evicted), an access that hits has nothing to gain, so the saving is
    bounded by those misses. Otherwise they were evicted and fetched again,
    misses that grow with the input as the affinity does: those of them a
    placement could reach (the shares above) bound it, and grow with the
    accesses (docs/planner.md, *Savings bounded by misses*).
    at: the group at the scale the plan runs at (scale.AtScale): the
    accesses grow with it, the misses of objects that stay in the cache
    there with their lines, and an avoided miss saves what the level that
    serves it there costs (docs/planner.md, *A miss at the run's scale*);
    None prices the profiled run itself at `miss_ns`. share: the share of
    the group's affinitive accesses whose bytes would meet in a line with
    the two objects side by side (near_share, measured by the profiler);
    None estimates it from the objects' mean size (line_share)."""
    share = line_share(mean_size) if share is None else share
    gain = max(0, inside - outside) * share * strangers
    if misses is not None and (mean_size > LARGE_BYTES or not stays_cached(misses)):
        # No placement turns more accesses into hits than missed: the
        # objects' own misses bound it, and they grow with the input as the
        # affinity does (cppcheck's tokens: 3.4 M affinitive accesses, 0.33
        # M misses). Side by side, large objects share one line with each
        # neighbour: no more than that share of their misses can go (perl's
        # six interpreter structures of 3 KB, 28.9 M affinitive accesses
        # and 6,565 misses in its training run).
        gain = min(gain, misses[0] * share * strangers)
    if at is None:
        if misses is not None and stays_cached(misses):
            gain = min(gain, misses[0])
        return gain * costs["miss_ns"]
    gain *= at.accesses
    if misses is not None and at.cached:
        gain = min(gain, misses[0] * at.lines)
    return gain * at.miss_ns


# An object of more than this many bytes shares at most a line with each
# neighbour (planner.set_aside_large keeps such objects out of the groups of
# smaller ones): the runtime's largest exact size class, planner.REST_MAX.
LARGE_BYTES = REST_MAX


def near_share(profile, ids):
    """The share of the affinity among the given contexts (a group's) whose
    accessed bytes would share a line with the two objects side by side:
    the profiler's near weights (in 64ths) of the context graph's edges
    among them over those edges' weights (docs/planner.md, "Near
    affinity"). None where the profile has no near weights, or no edge
    among them."""
    graph = profile.get("graph", {})
    near = graph.get("near")
    if near is None:
        return None
    ids = set(ids)
    w = n = 0
    for (x, y, weight), m in zip(graph["edges"], near):
        if x in ids and y in ids:
            w += weight
            n += m
    return n / (64 * w) if w else None


def near_clause(share):
    """For the texts that quote a saving: the measured share."""
    if share is None or share >= 1:
        return ""
    return (f"; of those accesses, {percent(share)} touch bytes that would share a line with the two "
            f"objects side by side")


def share_clause(mean_size, share):
    """The measured share's clause where there is one, else the estimate's."""
    return near_clause(share) if share is not None else large_clause(mean_size)


def line_share(mean_size):
    """The share of the affinitive accesses to objects of `mean_size` bytes
    that placing them side by side can turn into hits. Two large neighbours
    share one line, and a pair of accesses to them meets there only when
    each falls on its own object's side of it: one of the mean_size / 64
    lines of each, (64 / mean_size) squared of the pairs where accesses
    spread over the objects' lines. A smaller object lies in lines its
    neighbours may share whole (docs/planner.md, *Groups of large
    objects*)."""
    return min(1.0, 64 / mean_size) ** 2 if mean_size > LARGE_BYTES else 1.0


def large_clause(mean_size):
    """For the texts that quote a saving: the share, when it bounds it."""
    if mean_size <= LARGE_BYTES:
        return ""
    return (f"; but its objects are of {mean_size:.0f} bytes on average, and two neighbours share one line, "
            f"where a pair of accesses meets only if each falls on its side of it: "
            f"{percent(line_share(mean_size))} of those accesses")


def percent(share):
    """A share as a percentage to three decimals, no trailing zeros."""
    return f"{100 * share:.3f}".rstrip("0").rstrip(".") + "%"


def contexts_mean_size(contexts, ids):
    """The mean size of the given contexts' objects (0 if none, or if a
    context does not say its bytes: then nothing is scaled)."""
    n = sum(contexts[c]["allocations"] for c in ids)
    if not n or any("bytes" not in contexts[c] for c in ids):
        return 0.0
    return sum(contexts[c]["bytes"] for c in ids) / n


# The simulated D1's lines (the profiler's geometry, profiler/profiler.h:
# 32 KiB of 64-byte lines), which every miss count in a profile is of.
D1_LINES = 512


def touch_gap(lines, accesses, total):
    """How many accesses to tracked objects come, on average, between two
    accesses to one of `lines` lines that take `accesses` of the run's
    `total` (None when unknown)."""
    if not accesses or not total:
        return None
    return total * lines / accesses


def stays_cached(misses):
    """Whether a group's objects stayed in the cache in the profiled run,
    so that an access to them that hits has nothing to gain: they missed
    no more than once per line, or their lines were touched so often that
    fewer accesses than the D1 holds lines came between two touches of
    each, which least-recently-used replacement does not evict (a
    parser's state, read on every byte: docs/planner.md, *Objects touched
    all the time*)."""
    d1, lines, gap = misses
    return d1 <= lines or (gap is not None and gap < D1_LINES)


def lines_covered(allocations, size):
    """The most cache lines `allocations` objects of `size` bytes in all
    can occupy: their bytes in whole lines, and one more for each, which
    may straddle a line boundary."""
    return -(-size // 64) + allocations


def misses_clause(misses, gained=None):
    """For the texts that quote a saving: the misses, when they bound it.
    gained: the affinitive accesses inside less those outside, which
    misses fewer than them bound even where the objects were evicted."""
    if misses is None:
        return ""
    if not stays_cached(misses):
        if gained is None or misses[0] >= gained:
            return ""
        return (f"; but its objects missed the simulated D1 only {misses[0]} times, the most a placement "
                f"can turn into hits")
    if misses[0] <= misses[1]:
        return (f"; but its objects stayed in the cache: their accesses missed the simulated D1 "
                f"{misses[0]} times, in {misses[1]} lines at most")
    return (f"; but its objects stayed in the cache: each of their {misses[1]} lines at most was touched "
            f"every {misses[2]:.0f} accesses on average, fewer than the simulated D1's {D1_LINES} lines, "
            f"and their accesses missed it {misses[0]} times")


def run_accesses(contexts):
    """The accesses to every tracked object of a run (its contexts')."""
    return sum(c.get("accesses", 0) for c in contexts)


def context_misses(contexts, ids, everything):
    """(D1 misses, the most lines they can occupy, touch_gap of those lines)
    of the given contexts' objects, or None when the profile did not
    measure misses. `contexts`: the run's, by id; `everything`: its
    run_accesses."""
    d1 = size = n = accesses = 0
    for c in ids:
        if contexts[c].get("d1_misses") is None:
            return None
        d1 += contexts[c]["d1_misses"]
        size += contexts[c]["bytes"]
        n += contexts[c]["allocations"]
        accesses += contexts[c].get("accesses", 0)
    lines = lines_covered(n, size)
    return d1, lines, touch_gap(lines, accesses, everything)


def identification_ns(costs, patched, frames, live="bits"):
    """What deciding one allocation costs: with its selector sites patched,
    from what is live on its stack (`live`: "stop", a stop site, whose
    record decides; "none", no selector or stop site at all, so that the
    empty stack's verdict does; "bits", the activations of other selector
    sites), else a stack walk of `frames` frames (cost.COST_DEFAULTS)."""
    if patched:
        key = {"stop": "stop_ns", "none": "empty_ns"}.get(live, "patched_ns")
        return costs.get(key, costs["patched_ns"])
    return costs["walk_ns"] + frames * costs["frame_ns"]


def live_kind(sites, selector_sites, stops):
    """What the runtime finds live for an allocation whose stack holds
    `sites` (identification_ns): "stop", "none" or "bits"."""
    if any(s in stops for s in sites):
        return "stop"
    return "bits" if any(s in selector_sites for s in sites) else "none"


def stop_sites(plan, to_profile):
    """The profile site ids of the plan's (as read_plan gives it) stop sites."""
    return {to_profile[i] for i, site in enumerate(plan["sites"])
            if site[3] is not None and to_profile.get(i) is not None}


def decisions(plan, profile):
    """{context id: (group or None, frames its walk looks at or None when
    the quick test decides at the entry, whether the walk leaves the decision
    paths)} for every context of the profile under the plan, and the plan's
    sites in the profile."""
    to_profile, to_plan = plan_site_map(plan, profile)
    out = {}
    for c in profile["contexts"]:
        chain = [to_plan.get(s) for s in c["sites"]]
        out[c["id"]] = (decide(plan, chain), walk_length(plan, chain),
                        leaves_paths(plan, chain))
    return out, to_profile


def patched_sites(plan, to_profile):
    """{profile site id: [groups]} of the plan's (as read_plan gives it)
    sites the runtime patches (runtime/code/patch.c), before the kind of call is
    looked at: every site of a select line, but those whose own entry
    verdict decides (cold, next, group=G) and are no stop site, and every
    stop site. Each site's groups: those whose select lines name it, and
    the group its walks stop in. to_profile: plan site index -> profile
    site id (plan_site_map)."""
    out = {}
    for g, conj in plan["selects"]:
        for site in conj:
            verdict, stop = plan["sites"][site][2:4]
            if stop is None and verdict is not None and (verdict in ("cold", "next")
                                                          or verdict.startswith("group=")):
                continue
            out.setdefault(site, set()).add(g)
    for i, site in enumerate(plan["sites"]):
        if site[3] is not None:
            out.setdefault(i, set()).add(site[3])
    return {to_profile[i]: sorted(gs) for i, gs in out.items() if to_profile.get(i) is not None}


def stub_shares(patched, sites, costs, stops=()):
    """{group: (calls, ns)} of the stubs at the patched sites ({site id:
    [groups]}, only direct calls are patched) of a profile's `sites`: every
    call through one runs its stub, whether or not it allocates, at
    stop_stub_ns for a stop site (`stops`: their ids) and stub_ns for
    another; a site several groups use is shared among them. None where the
    profile does not count calls (raw version 5 on)."""
    if not sites or any("calls" not in x for x in sites):
        return None
    out = {}
    for site, gs in patched.items():
        if sites[site].get("call", "direct") != "direct":
            continue
        share = sites[site]["calls"] / len(gs)
        for g in gs:
            calls, ns = out.get(g, (0, 0.0))
            per = costs.get("stop_stub_ns", costs.get("stub_ns", 0.0)) if site in stops else costs.get("stub_ns", 0.0)
            out[g] = (calls + share, ns + share * per)
    return out


def evaluate(plan, train, run, costs, identify="patched", walked=(), rest_pool=None, pricing=None):
    """The plan (as read_plan gives it) made from `train`, replayed on the
    profile `run` of another input. costs: the planner's (COST_DEFAULTS).
    walked: groups the planner prices as stack walks whatever their sites
    (its merged groups, cost.assess), where the run's profile does not
    count calls; a plan file does not say which. Where it does, each group
    also pays its stubs per call through its patched sites there.
    rest_pool: "classes" or "one", the rest pool the group's saving is
    weighed against (rest_strangers); by default the plan's own, if any.
    A plan still being made has no rest group yet: then what no group
    claims is what would go to it. pricing: the training run's
    scale.Pricing, which the run is priced at in proportion to its size
    (None: at its own scale, miss_ns a miss)."""
    real = {g for g in range(len(plan["groups"])) if g != plan.get("rest")}
    dec, to_profile = decisions(plan, run)
    train_decisions, _ = decisions(plan, train)
    train_keys, run_keys = family_keys(train), family_keys(run)
    seen = {}   # family key -> {group: allocations} in training
    for c in train["contexts"]:
        d = seen.setdefault(train_keys[c["id"]], {})
        g = train_decisions[c["id"]][0]
        d[g] = d.get(g, 0) + c["allocations"]
    expected = {k: max(d, key=lambda g: (d[g], -1 if g is None else g)) for k, d in seen.items()}

    total = predicted = known = grouped = walk_none = bits_none = left = 0
    measured = all("d1_misses" in c for c in run["contexts"])
    everything = run_accesses(run["contexts"])
    if pricing is not None:
        pricing = pricing.relative(run, sum(c["allocations"] for c in train["contexts"]))
    groups = [GroupTransfer(name=n, costs=costs, d1_misses=0 if measured else None, run_accesses=everything,
                            pricing=pricing, contexts=run["contexts"])
              for n in plan["groups"]]
    selector_sites = {to_profile[s] for _, conj in plan["selects"] for s in conj} | \
        {to_profile[i] for i, site in enumerate(plan["sites"]) if site[3] is not None}
    selector_sites.discard(None)
    stops = stop_sites(plan, to_profile)
    stops_whole = all(run["sites"][s].get("call", "direct") == "direct" for s in stops if s is not None)
    stubs = stub_shares(patched_sites(plan, to_profile), run["sites"], costs, stops) if identify == "patched" else None
    if stubs is not None:
        walked = ()
        for g, (calls, ns) in stubs.items():
            if g in real:
                groups[g].stub_calls, groups[g].stub_ns = round(calls), ns
    members = {g: [] for g in real}   # context ids decided into each group there
    for g in real:
        groups[g].members = members[g]
    for c in run["contexts"]:
        n = c["allocations"]
        g, frames, gone = dec[c["id"]]
        total += n
        k = run_keys[c["id"]]
        if k in expected:
            known += n
            predicted += n if expected[k] == g else 0
        if g in real:
            members[g].append(c["id"])
            grouped += n
            groups[g].allocations += n
            if measured:
                groups[g].d1_misses += c["d1_misses"]
                groups[g].bytes += c["bytes"]
                groups[g].accesses += c.get("accesses", 0)
        if frames is None:
            continue
        # The runtime decides from the bits of patched call sites when it
        # could patch every selector and stop site on the stack (direct calls),
        # and every stop site of the plan (an unpatched one anywhere could be
        # inner to any record: then everything is walked).
        patched = identify == "patched" and stops_whole and all(
            run["sites"][s].get("call", "direct") == "direct" for s in c["sites"] if s in selector_sites)
        left += n if gone and not patched else 0
        if g not in real:
            if patched:
                bits_none += n
            else:
                walk_none += n
            continue
        groups[g].walked += n
        groups[g].walk_ns += n * identification_ns(costs, patched and g not in walked, frames,
                                                   live_kind(c["sites"], selector_sites, stops))

    rest = plan.get("rest")
    if rest_pool is None and rest is not None:
        rest_pool = "one" if plan.get("rest_one") else "classes"
    for g in real:
        groups[g].one_pool = rest_pool == "one"
        groups[g].strangers, groups[g].beside = strangers_of(run, members[g], rest_pool,
                                                             lambda c: dec[c["id"]][0] == rest)

    # Affinity on that run: a graph node belongs to the group most of its
    # allocations are decided into.
    if run.get("families") is not None:
        graph = run["family_graph"]
        node_ctx = {f["id"]: f["contexts"] for f in run["families"]}
    else:
        graph = run["graph"]
        node_ctx = {c["id"]: [c["id"]] for c in run["contexts"]}
    node_group = {}
    for node, ctxs in node_ctx.items():
        d = {}
        for cid in ctxs:
            g = dec[cid][0]
            d[g] = d.get(g, 0) + run["contexts"][cid]["allocations"]
        node_group[node] = max(d, key=lambda g: (d[g], -1 if g is None else g)) if d else None
    apart = plan.get("apart", {})   # groups split by size class: their affinity is given up on purpose
    for x, y, w in graph["edges"]:
        gx, gy = node_group.get(x), node_group.get(y)
        if gy in apart.get(gx, ()):
            continue
        if gx is not None and gx == gy:
            if gx in real:
                groups[gx].inside += w
        else:
            for g in {gx, gy} & real:
                groups[g].outside += w
    for x, w in halo.dropped_affinity(run).items():   # with the contexts the graph dropped
        if node_group.get(x) in real:
            groups[node_group[x]].outside += w
    for g in real:
        groups[g].share = near_share(run, members[g])
    return Transfer(run=" ".join(run["target"]["argv"]), allocations=total, predicted=predicted, known=known,
                    grouped=grouped, walk_none=walk_none, bits_none=bits_none, left=left,
                    groups=[groups[g] if g in real else None for g in range(len(plan["groups"]))])


def lines(transfers, names):
    """`cohort plan` and `cohort explain`: one paragraph per validation run."""
    out = []
    for t in transfers:
        out.append(f"  on {t.run}: {t.summary()}")
        for i, g in enumerate(t.groups):
            if g is None:
                continue
            verdict = "transfers" if g.pays else f"does not transfer: {g.why_not()}"
            out.append(f"    group {i} {names[i]}: {t.share(g.allocations):.1%} of allocations, "
                       f"{g.inside} affinitive accesses inside, {g.outside} outside; {verdict}")
    return out
