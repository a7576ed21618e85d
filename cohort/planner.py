"""`cohort plan`: from a profile to the runtime's plan (docs/plan-format.md).

Grouping (grouping.py) decides which contexts share a pool; identification
(identification.py) derives the selectors that recognise them; this module
puts both into a plan within the runtime's limits, decides the quick test's
verdicts for entry sites, and reports what it did."""

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cohort import grouping, identification
from cohort.errors import CohortError
from cohort.files import write_atomically

MAX_SITES = 256   # runtime/internal.h CH_MAX_SITES
MAX_GROUPS = 64   # runtime/internal.h CH_MAX_GROUPS

PLAN_DEFAULTS = dict(grouping.DEFAULTS, unknown_entry="walk", entry_purity=0.98)


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


@dataclass
class Plan:
    groups: list                       # PlannedGroup, in selector order
    rejected: list                     # grouping.Group under the threshold
    sites: list                        # site ids of the profile, in plan order
    verdicts: dict                     # site id -> "cold" | "walk" | "group=G"
    modules: list                      # module ids of the profile, in plan order
    unknown_entry: str
    max_size: int
    predicted: dict                    # context id -> group index or None
    notes: list = field(default_factory=list)
    stops: dict = field(default_factory=dict)   # site id -> group a walk reaching it ends in


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


def site_name(profile, sid):
    s = profile["sites"][sid]
    m = profile["modules"][s["module"]]
    where = s["function"] or f"{os.path.basename(m['path'])}+{s['offset']:#x}"
    return where + (f" ({s['file']}:{s['line']})" if s.get("file") and s.get("line") else "")


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


def make_plan(profile, min_weight=None, max_members=16, tolerance=0.05, group_threshold=0.005,
              unknown_entry="walk", entry_purity=0.98):
    contexts = profile["contexts"]
    accesses, edges, total = grouping.from_profile(profile)
    formed = grouping.group(accesses, edges, total, min_weight=min_weight, max_members=max_members,
                            tolerance=tolerance, group_threshold=group_threshold)
    kept = [g for g in formed if g.kept]
    rejected = [g for g in formed if not g.kept]
    notes = []
    if len(kept) > MAX_GROUPS:
        notes.append(f"{len(kept) - MAX_GROUPS} groups dropped: the runtime takes at most {MAX_GROUPS}")
        kept = sorted(kept, key=lambda g: -g.weight)[:MAX_GROUPS]
    chains = {c["id"]: c["sites"] for c in contexts}
    popularity = [sum(contexts[m]["accesses"] for m in g.members) for g in kept]
    selectors = identification.identify([g.members for g in kept], chains, popularity)

    # Sites: selector sites first (they must fit), most popular group first.
    sites, planned = [], []
    for sel in selectors:
        g = kept[sel.group]
        if not sel.conjunctions:
            notes.append(f"group around context {g.members[0]} dropped: none of its contexts has "
                         f"an application frame to select it by")
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
            unidentifiable=sel.unidentifiable))

    # What the runtime will decide for every profiled context (first match).
    predicted = {}
    for c in contexts:
        chain = frozenset(c["sites"])
        predicted[c["id"]] = next((i for i, g in enumerate(planned)
                                   if any(identification.matches(conj, chain) for conj in g.conjunctions)),
                                  None)

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
    modules = list(dict.fromkeys(profile["sites"][s]["module"] for s in sites))
    return Plan(groups=planned, rejected=rejected, sites=sites, verdicts=verdicts, stops=stops,
                modules=modules,
                unknown_entry=unknown_entry, max_size=profile["parameters"]["max_size"],
                predicted=predicted, notes=notes)


def render(plan, profile, source="profile.json"):
    """The plan file's text."""
    lines = ["cohort-plan 3", f"# made by cohort plan from {source}",
             f"max-size {plan.max_size}"]
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
    for i, g in enumerate(plan.groups):
        lines.append(f"group {i} {g.name}  # contexts {' '.join(map(str, g.members))}")
    for i, g in enumerate(plan.groups):
        for conj in g.conjunctions:
            lines.append(f"select {i} " + " ".join(str(site_index[s]) for s in conj))
    lines.append(f"unknown-entry {plan.unknown_entry}")
    lines.append("end")
    return "\n".join(lines) + "\n"


def report(plan, profile):
    """What the planner did, for people (printed by `cohort plan`)."""
    contexts = profile["contexts"]
    total_alloc = sum(c["allocations"] for c in contexts) or 1
    out = [f"{len(plan.groups)} groups from {len(profile['graph']['nodes'])} hot contexts "
           f"({len(plan.rejected)} more under the weight threshold)"]
    for i, g in enumerate(plan.groups):
        out.append(f"  group {i} {g.name}: {len(g.members)} contexts, {g.allocations} allocations, "
                   f"{g.accesses} accesses, internal weight {g.weight}, score {g.score:.0f}, "
                   f"{len(g.conjunctions)} selector terms")
        if g.conflicts:
            extra = sum(contexts[c]["allocations"] for c in g.conflicts)
            out.append(f"    conflicts: its selector also matches {len(g.conflicts)} other contexts "
                       f"({extra} allocations, {100 * extra / total_alloc:.1f}% of all)")
        if g.unidentifiable:
            out.append(f"    {len(g.unidentifiable)} members have no application frame and cannot be selected")
    for n in plan.notes:
        out.append(f"  note: {n}")
    return "\n".join(out)


def plan_command(profile_path, output, force=False, **params):
    from cohort.profile import load_profile
    output = Path(output)
    if output.exists() and not force:
        raise CohortError(f"{output} exists (use --force to overwrite it)")
    if not output.parent.is_dir():
        raise CohortError(f"cannot write {output}: no directory {output.parent}")
    if params.get("unknown_entry") not in ("walk", "cold"):
        raise CohortError("--unknown-entry must be walk or cold")
    if not 0 <= params.get("tolerance", 0.05) < 1 or params.get("max_members", 1) < 1 or \
            not 0 < params.get("entry_purity", 0.98) <= 1:
        raise CohortError("tolerance must be in [0, 1), max members at least 1, entry purity in (0, 1]")
    profile = load_profile(profile_path)
    plan = make_plan(profile, **params)
    write_atomically(output, render(plan, profile, source=os.path.basename(str(profile_path))))
    return plan, profile
