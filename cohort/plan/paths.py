"""What the runtime walks for each allocation under a plan: the stop sites
that end a walk where it has decided, the decision paths (a trie over the
sites from the entry outwards) that end it sooner, and the frames a walk
steps for a context (docs/planner.md, "Decision paths")."""

from cohort.formats import planfile

MAX_SITES = 256   # runtime/plan/plan.h CH_MAX_SITES

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
