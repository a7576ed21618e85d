"""`cohort explain`: a profile (and a plan) for people.

With a plan, groups are what the runtime would decide for each profiled
context (quick test, decision paths, stop sites, then selectors in order:
planfile.decide);
without one, the groups are those `cohort plan` would make with its
defaults."""

import os
from pathlib import Path

from cohort.policies import apa, halo
from cohort.plan import cost, headroom, paths, planner, transfer, scale as scaling
from cohort.plan.lines import LINE_AT, LINE_START, PACKED, line_totals, place_words
from cohort.plan.rest import lies_among
from cohort.formats import planfile
from cohort.errors import CohortError
from cohort.files import claim, write_output
from cohort.present.graphsvg import compact, render
from cohort.formats.planfile import decide, walk_length
from cohort.plans import read_plan
from cohort.formats.profilefile import load_profile


LEGEND = [
    "Legend: a stack lists call sites innermost first, as function (file:line) [module+offset",
    "  of the return address, which the plan names]; \"inlined into\" follows a call the compiler",
    "  inlined. [direct]: a call to a fixed address; [indirect]: through a register or memory",
    "  (PLT, vtable, function pointer); [other]: not seen as a call. Entry site: where an allocation",
    "  enters the allocator, which may decide its group alone. Stop site: where a stack walk ends",
    "  with a group. Select: the sites a stack must hold for the group. Quick test: allocations",
    "  entering at a cold entry site skip the walk (to the rest pool, or the next allocator).",
]


def site_label(profile, sid):
    """A call site: its function (the innermost inlined one, if any) and the
    module+offset a plan names, which tells apart two sites of one function."""
    s = profile["sites"][sid]
    at = f"{os.path.basename(profile['modules'][s['module']]['path'])}+{s['offset']:#x}"
    fn = (s.get("inlined") or [None])[0]
    fn = fn.split(" (")[0] if fn else s["function"] and s["function"].split("(")[0]
    return f"{fn} [{at}]" if fn else at


def context_label(profile, cid):
    """The context's entry site (site_label)."""
    sites = profile["contexts"][cid]["sites"]
    return site_label(profile, sites[0]) if sites else f"ctx {cid}"


def plan_groups(profile, plan):
    """(names, {context: group}, [[conjunctions as profile site ids]]) by
    evaluating the plan against the profile."""
    site_map, _ = transfer.plan_site_map(plan, profile)
    if plan["modules"] and all(v is None for v in site_map.values()):
        raise CohortError("the plan names no call site of this profile (made for another program?)")
    conj = [[] for _ in plan["groups"]]
    for g, sites in plan["selects"]:
        conj[g].append([site_map[s] for s in sites])
    to_plan = {v: k for k, v in site_map.items() if v is not None}
    roles = {}   # profile site -> (entry verdict, group a walk stops in)
    for i, (_, _, verdict, stop) in enumerate(plan["sites"]):
        if site_map.get(i) is not None:
            roles[site_map[i]] = (verdict, stop)
    group_of = {}
    for c in profile["contexts"]:
        g = decide(plan, [to_plan.get(s) for s in c["sites"]])
        if g is not None:
            group_of[c["id"]] = g
    def frames(c):
        return walk_length(plan, [to_plan.get(s) for s in c["sites"]])
    return plan["groups"], group_of, conj, frames, plan.get("rest"), roles


def deciding(profile, conj, roles):
    """For worth_lines: (ns, patched) per allocation of a context whose walk
    looks at `frames` frames, as cost.assess prices it: decided from its
    patched selector and stop sites (what is live on its stack, at a stop
    site's record, the activations' bits, or the empty stack's verdict)
    where the runtime can patch them all, else a stack walk. conj: each
    group's conjunctions of profile sites; roles: {profile site: (entry
    verdict, stop group)}."""
    costs = cost.COST_DEFAULTS
    stops = {s for s, (_, stop) in roles.items() if stop is not None}
    selectors = {s for g in conj for c in g for s in c} | stops
    direct = cost.direct_sites(profile)
    whole = all(s in direct for s in stops)   # else the runtime decides nothing from the stubs

    def priced(c, frames):
        patched = whole and all(s in direct for s in c["sites"] if s in selectors)
        live = transfer.live_kind(c["sites"], selectors, stops)
        return transfer.identification_ns(costs, patched, frames, live), patched
    return priced


def worth_lines(profile, names, group_of, walks, rest, stubs=None, rest_one=False, pricing=None,
                allocator="glibc", decide=None, apart=None):
    """Per group: the most its placement can save (its internal affinity at
    one avoided miss each) against deciding the allocations that end in it
    past their entry (`decide`: deciding(); None: stack walks) and the
    stubs of its patched call sites (`stubs`: {group: (calls, ns)}), priced
    as the planner prices them (docs/planner.md), where the plan runs
    (`pricing`: scale.Pricing; None: over the profiled run), in front of
    `allocator`. apart: {group: the graph's nodes of the groups split from
    it by size class}, whose affinity with it is given up on purpose and
    not counted outside it, as the planner counts it (cost.assess; a
    plan file does not say). Returns ({group: text}, {group: the D1 misses
    of the profiled run it can remove at most})."""
    costs = cost.COST_DEFAULTS
    if decide is None:
        def decide(c, frames):
            return costs["walk_ns"] + frames * costs["frame_ns"], False
    inside, outside = [0] * len(names), [0] * len(names)
    if profile.get("families") is not None:   # the graph the planner grouped
        node_group = {f["id"]: group_of.get(f["contexts"][0]) for f in profile["families"]}
        graph = profile["family_graph"]
    else:
        node_group, graph = group_of, profile["graph"]
    for x, y, w in graph["edges"]:
        gx, gy = node_group.get(x), node_group.get(y)
        if gx is not None and gx == gy:
            inside[gx] += w
        else:
            for g, other in ((gx, y), (gy, x)):
                if g is not None and other not in (apart or {}).get(g, ()):
                    outside[g] += w
    for x, w in halo.dropped_affinity(profile).items():   # with the contexts the graph dropped
        if node_group.get(x) is not None:
            outside[node_group[x]] += w
    members = {}
    for c in profile["contexts"]:
        members.setdefault(group_of.get(c["id"]), []).append(c["id"])
    # Each walk entry's decisions shared by the groups that allocate there
    # (the rest pool is none), as the planner charges them.
    walked = cost.walk_shares(profile["contexts"], walks,
                                 lambda cid: None if group_of.get(cid) == rest else group_of.get(cid), decide)
    out, removed = {}, {}
    everything = transfer.run_accesses(profile["contexts"])
    # A plan with no rest pool loads the runtime for its groups alone: they
    # pay for every allocation it hands on, in proportion to their own
    # (cost.assess).
    mine = {g: sum(profile["contexts"][c]["allocations"] for c in members.get(g, [])) for g in range(len(names))}
    passed = sum(c["allocations"] for c in profile["contexts"]) - sum(mine.values())
    # With a rest pool, the groups make every allocation they do not walk
    # for be decided at its entry site, against the rest pool alone: by the
    # quick test where no stub reaches the site (cost.assess).
    quick, stubbed = (cost.entry_decisions(profile["contexts"], lambda c: walks(c) is not None,
                                              cost.direct_sites(profile))
                      if rest is not None and len(names) > 1 else (0, 0))
    real = sum(n for g, n in mine.items() if g != rest)
    pair_ns = cost.pair_cost(allocator, "pool" if rest is not None else "none", costs)
    # Allocations entered through a system module walk to their entry
    # under a plan with groups, shared as the groups' allocations are
    # (cost.assess).
    framed, framed_ns = (cost.framed_walks(profile["contexts"], lambda c: walks(c) is not None, costs)
                         if real else (0, 0.0))
    # What the groups do to the other allocations grows as those do (cost.assess).
    ungrouped = members.get(None, []) + (members.get(rest, []) if rest is not None else [])
    others = pricing.allocations(profile["contexts"], ungrouped) if pricing is not None else None
    for g in list(range(len(names))) + [None]:
        share = walked.get(g, cost.WalkShare())
        n, frames, patched = share.allocations, share.frames, share.patched
        at = None
        if g is not None and g != rest:
            misses = transfer.context_misses(profile["contexts"], members.get(g, []), everything)
            if pricing is not None:
                at = pricing.at(profile["contexts"], members.get(g, []), misses,
                                misses is not None and transfer.stays_cached(misses))
        grown = at.allocations if at else 1.0
        other = others if at else grown
        ns = share.ns * grown
        ident = (cost.decided_text(n, patched, frames, ns) if n
                 else "no stack walk (decided by entry or stop sites)")
        calls, stub_ns = (stubs or {}).get(g, (0, 0.0))
        ident += transfer.stubs_clause(calls, stub_ns * grown)
        handed = passed * mine[g] / sum(mine.values()) if g is not None and sum(mine.values()) else 0
        if rest is None:
            ident += cost.passed_text(round(handed), handed * costs["passthrough_ns"] * other)
        if g is not None and g != rest and pair_ns:
            ident += cost.taken_text(mine[g], mine[g] * pair_ns * grown)
        part = mine[g] / real if g is not None and g != rest and real else 0
        ident += cost.entry_text((quick * costs["quick_ns"] + stubbed * costs["entry_stub_ns"]) * part * other,
                                    round(quick * part))
        ident += cost.framed_text(round(framed * part), framed_ns * part * other)
        if g is None or g == rest:
            out[g] = f"identification: {ident}" if n else None
        else:
            mean = transfer.contexts_mean_size(profile["contexts"], members.get(g, []))
            pool = lies_among(rest is not None, rest_one, allocator)
            strangers, beside = transfer.strangers_of(profile, members.get(g, []), pool,
                                                      lambda c: group_of.get(c["id"]) == rest)
            share = transfer.near_share(profile, members.get(g, []))
            saving = transfer.saving_ns(inside[g], outside[g], misses, costs, mean, strangers, at, share)
            # The same group on the profiled run itself, in misses (the prediction explain sums).
            removed[g] = transfer.saving_ns(inside[g], outside[g], misses, costs, mean, strangers, None,
                                            share) / costs["miss_ns"]
            out[g] = (f"worth: saves at most {saving / 1e6:.2f} ms ({inside[g]} affinitive accesses "
                      f"inside it, {outside[g]} with objects outside it"
                      f"{transfer.misses_clause(misses, inside[g] - outside[g])}{transfer.share_clause(mean, share)}"
                      f"{transfer.strangers_clause(strangers, rest_one, beside)}{at.clause() if at else ''}); "
                      f"identification: {ident}")
    return out, removed


def prediction(profile, removed):
    """The plan's predicted gain, for the groups' section: the D1 misses of
    the profiled run its groups can remove at most (transfer.saving_ns on
    that run), against the run's own (headroom.of), as a share a
    measurement can be held against (docs/planner.md, "Predicted against
    measured")."""
    if not removed:
        return "predicted: no group, so no miss removed beyond what the layout of the rest does"
    total = sum(removed.values())
    h = headroom.of(profile)
    whole = f" of its {h.d1:,} ({total / h.d1:.1%})" if h and h.d1 else ""
    return (f"predicted: the groups remove at most {total:,.0f} D1 misses of the profiled run{whole}, "
            f"against the layout they would otherwise have")


def distinct_labels(profile, contexts):
    """{node: label of its context}, where two nodes whose contexts enter at
    the same site are told apart by their callers: "new_node [m+0x12fe] <
    make_lists [m+0x1345]", as far out as it takes."""
    depth = {n: 1 for n in contexts}
    while True:
        labels = {n: " < ".join(site_label(profile, x) for x in profile["contexts"][c]["sites"][:depth[n]])
                  or f"ctx {c}" for n, c in contexts.items()}
        seen = {}
        for n, text in labels.items():
            seen.setdefault(text, []).append(n)
        grow = [n for same in seen.values() if len(same) > 1 for n in same
                if depth[n] < len(profile["contexts"][contexts[n]]["sites"])]
        if not grow:
            return labels
        for n in grow:
            depth[n] += 1


def ds_picture(profile, g, group_of, names):
    """The DS graph as SVG: one node per DS node (its hottest context
    names it), an arrow per pointer edge labelled with its field offsets
    and stores; collections drawn with a double ring, array-like nodes as
    boxes; coloured by the group of each node's hottest context. g: the
    profile's apa.DSGraph."""
    touched = {n for e in g.edges for n in e} | g.hot
    hottest = {n: min(g.contexts[n], key=lambda c: (-profile["contexts"][c]["accesses"], c)) for n in touched}
    colls = {n for comp in g.collections() for n in comp}
    shapes = {n: {**({"peripheries": 2} if n in colls else {}), **({"shape": "box"} if n in g.array_like else {})}
              for n in touched}

    def offsets(offs):
        shown = ",".join(f"+{o}" for o in offs[:3])
        return shown + (f"..({len(offs)})" if len(offs) > 3 else "")
    return render(sorted(touched), dict(g.edges), {n: g.accesses[n] for n in touched},
                  {n: group_of.get(hottest[n]) for n in touched},
                  distinct_labels(profile, {n: hottest[n] for n in touched}),
                  f"DS graph of {os.path.basename(profile['target']['argv'][0])} (which objects point to "
                  "which), coloured by group",
                  names=dict(enumerate(names)), directed=True, shapes=shapes,
                  edge_labels={e: f"{offsets(g.offsets[e])}: {compact(w)}" for e, w in g.edges.items()},
                  key="node cN: the objects of context N and those one pointer field cannot tell from them "
                      "(+k: k more contexts), area by accesses; double ring: a collection (list, tree, "
                      "cycle); box: array-like; arrow: pointers stored, at those field offsets",
                  what="DS nodes",
                  node_names={n: f"c{hottest[n]}" + (f"+{len(g.contexts[n]) - 1}" if len(g.contexts[n]) > 1
                                                     else "") for n in touched})


def lines_line(profile, members, at, is_rest, rest_one):
    """Where the pool's blocks of whole lines start, and the profile's model
    of each place (docs/planner.md, "Where in its line a block starts"), or
    "" when its members have no such objects in the model."""
    model = [profile["contexts"][c] for c in members if "lines" in profile["contexts"][c]]
    if not model:
        return ""
    totals = line_totals(model)
    own = PACKED if is_rest and rest_one else LINE_START
    places = ", ".join(f"{'packed' if k is None else k}: {totals['d1_misses'][i]} misses, "
                       f"{totals['chase_waits'][i]} waits" for i, k in enumerate(LINE_AT))
    return (f"blocks of whole lines start {place_words(own, at)}; the profile's model of each place "
            f"({places}; of {totals['chases']} chased pointers)")


def explain(profile_path, plan_path=None, graph_path=None, top=10, force=False, validate=(), policy="halo",
            ds_graph_path=None, scale=None, made=None, profile=None):
    """Returns the text; writes the picture to graph_path, and that of the
    DS graph to ds_graph_path. validate: profiles of other runs of the
    program, on which the plan's transfer is shown. policy: without a plan,
    the groups of this policy (policies.PLAN_POLICIES). scale: the
    production input's size over the profiled one's, where groups are
    priced (None: the planner's default, scale.py). made: the plan object
    plan_path was written from, when the caller has it, for what its file
    does not carry (the groups split apart by size class). profile: the
    profile at profile_path, when the caller has loaded it already (the
    planner leaves it as it was: cppcheck's takes 6 s to load and check)."""
    profile = load_profile(profile_path) if profile is None else profile
    if ds_graph_path:
        apa.require(profile, "--ds-graph")
    validations = planner.load_validations(profile, validate, f"profile {profile_path}")
    if plan_path:
        plan = read_plan(plan_path)
        names, group_of, conj, walks, rest, roles = plan_groups(profile, plan)
        source = f"plan {plan_path}"
        pricing = scaling.Pricing.of(profile, cost.COST_DEFAULTS, planner.growth_of(profile, validations, scale))
        transfers = [transfer.evaluate(plan, profile, v, cost.COST_DEFAULTS, pricing=pricing)
                     for v in validations]
        to_profile = transfer.plan_site_map(plan, profile)[0]
        stubs = transfer.stub_shares(transfer.patched_sites(plan, to_profile), profile["sites"],
                                     cost.COST_DEFAULTS, transfer.stop_sites(plan, to_profile))
    else:
        made = planner.make_plan(profile, validations=validations, policy=policy, scale=scale)
        pricing = made.pricing
        transfers = made.transfers
        names = [g.name for g in made.groups] + (["rest"] if made.rest is not None else [])
        group_of = {c: g for c, g in made.predicted.items() if g is not None}
        conj = [[list(c) for c in g.conjunctions] for g in made.groups] + [[]]
        def walks(c):
            if not c["sites"] or (made.verdicts.get(c["sites"][0]) or made.unknown_entry) != "walk":
                return None
            return paths.walk_frames(c, made.stops, made.frames)
        rest = made.rest
        roles = {s: (made.verdicts.get(s), made.stops.get(s)) for s in set(made.verdicts) | set(made.stops)}
        source = "cohort plan's defaults" + (f" with --policy {policy}" if policy != "halo" else "")
        stubs = cost.stub_costs(made, profile, cost.COST_DEFAULTS)
    rest_one = plan["rest_one"] if plan_path else made.rest_one
    line_at = plan.get("group_at", {}) if plan_path else made.line_at
    allocator = (planfile.made_for(plan_path) if plan_path else made.allocator) or "glibc"
    apart = {i: set(g.apart) for i, g in enumerate(made.groups)} if made is not None else None
    worth, removed = worth_lines(profile, names, group_of, walks, rest, stubs, rest_one, pricing, allocator,
                                 deciding(profile, conj, roles), apart)

    t = profile["totals"]
    target = " ".join(profile["target"]["argv"])
    runs = profile.get("merged")
    if runs:   # cohort merge: every run, with its weight
        target = f"{len(runs)} runs merged: " + "; ".join(
            " ".join(r["argv"]) + (f" (weight {r['weight']:g})" if r["weight"] != 1 else "") for r in runs)
    lines = [headroom.line(profile), "",
             f"Profile of: {target}",
             f"  {t['allocations']} allocations in {len(profile['contexts'])} contexts; "
             f"{t['accesses']} accesses to tracked objects (objects up to "
             f"{profile['parameters']['max_size']} bytes); affinity distance "
             f"{profile['parameters']['affinity_distance']} bytes",
             f"  graph: {len(profile['graph']['nodes'])} contexts cover "
             f"{profile['graph']['coverage']:.1%} of accesses; {len(profile['graph']['edges'])} edges"]
    ds = apa.build(profile, halo.from_profile(profile)[0]) if profile.get("ds_graph") is not None else None
    if ds is not None:
        lines.append(f"  DS graph: {profile['ds_graph']['pointer_stores']} pointer stores, "
                     f"{len(ds.edges)} edges between {len({n for e in ds.edges for n in e})} DS nodes, "
                     f"{len(ds.collections())} collections (lists, trees, cycles, arrays of pointers)")
    lines.append("")
    total = t["accesses"] or 1
    hottest = sorted(profile["contexts"], key=lambda c: (-c["accesses"], c["id"]))[:top]
    lines += LEGEND + [""]
    lines.append(f"Hottest contexts (of {len(profile['contexts'])}):")
    for c in hottest:
        g = group_of.get(c["id"])
        lines.append(f"  context {c['id']}: {c['accesses']} accesses ({100 * c['accesses'] / total:.1f}%), "
                     f"{c['allocations']} allocations of {c['min_size']}"
                     + (f"-{c['max_size']}" if c['max_size'] != c['min_size'] else "")
                     + f" bytes, {'group ' + str(g) if g is not None else 'ungrouped'}")
        for sid in c["sites"][:8]:
            lines.append(f"      {planner.site_name(profile, sid)}  [{profile['sites'][sid]['call']}]")
        if len(c["sites"]) > 8:
            lines.append(f"      ... {len(c['sites']) - 8} more frames")
        if c["truncated"]:
            lines.append("      (stack walk truncated)")
    lines.append("")
    lines.append(f"Groups ({source}):")
    if not names:
        lines.append("  none")
    for g, name in enumerate(names):
        members = sorted(c for c, gg in group_of.items() if gg == g)
        allocs = sum(profile["contexts"][c]["allocations"] for c in members)
        acc = sum(profile["contexts"][c]["accesses"] for c in members)
        shape = "one pool in allocation order" if rest_one else "one pool per size class"
        what = f" (every small allocation no other group claims, {shape})" if g == rest else ""
        lines.append(f"  group {g} {name}{what}: {len(members)} contexts, {allocs} allocations, {acc} accesses")
        if worth.get(g):
            lines.append(f"      {worth[g]}")
        placed = lines_line(profile, members, line_at.get(g), g == rest, rest_one)
        if placed:
            lines.append(f"      {placed}")
        shown = members if g != rest else sorted(members, key=lambda c: -profile["contexts"][c]["accesses"])
        for c in shown[:12]:
            lines.append(f"      context {c}: {context_label(profile, c)}")
        if len(shown) > 12:
            lines.append(f"      ... {len(shown) - 12} more contexts")
        entries = sorted(s for s, (v, _) in roles.items() if v == f"group={g}")
        stops = sorted(s for s, (_, st) in roles.items() if st == g)
        for s in entries[:8]:
            lines.append(f"      entry site: {planner.site_name(profile, s)}")
        for s in stops[:8]:
            lines.append(f"      stop site: {planner.site_name(profile, s)}")
        if len(entries) > 8 or len(stops) > 8:
            lines.append(f"      ... {max(len(entries) - 8, 0)} more entry and {max(len(stops) - 8, 0)} "
                         "more stop sites")
        for terms in conj[g]:
            lines.append("      select: " + " and ".join(
                (planner.site_name(profile, s) if s is not None else "(site not in this profile)")
                for s in terms))
    cold = [s for s, (v, _) in roles.items() if v in ("cold", "next")]
    if cold:
        n = sum(c["allocations"] for c in profile["contexts"] if c["sites"] and c["sites"][0] in cold)
        lines.append(f"  quick test: {len(cold)} cold entry sites ({n} allocations) skip the walk")
    if worth.get(None):
        lines.append(f"  not grouped: {worth[None]}")
    lines.append(f"  {prediction(profile, removed)}")
    # Which rule kept or dropped each group, and its figures: the planner's
    # own notes, from the plan file where one is given (older plans, plans
    # written by hand and rebased ones carry none).
    verdicts = planner.verdicts(made) if made is not None else planfile.notes_of(plan_path)
    if verdicts:
        lines += ["", "The planner's verdicts:"] + [f"  {n}" for n in verdicts]
    if transfers:
        lines.append("")
        lines.append("Transfer to other inputs (the plan replayed on each run's profile):")
        lines += transfer.lines(transfers, names)
    text = "\n".join(lines) + "\n"

    if graph_path:
        graph_path = Path(graph_path)
        claim(graph_path, "graph", force)
        nodes = profile["graph"]["nodes"]
        edges = {(x, y): w for x, y, w in profile["graph"]["edges"]}
        acc = {n: profile["contexts"][n]["accesses"] for n in nodes}
        labels = {n: context_label(profile, n) for n in nodes}
        svg = render(nodes, edges, acc, {n: group_of.get(n) for n in nodes}, labels,
                     f"Affinity graph of {os.path.basename(profile['target']['argv'][0])}, coloured by group",
                     names=dict(enumerate(names)))
        write_output(graph_path, svg, "graph", force)
    if ds_graph_path:
        ds_graph_path = Path(ds_graph_path)
        claim(ds_graph_path, "graph", force)
        write_output(ds_graph_path, ds_picture(profile, ds, group_of, names), "graph", force)
    return text


def plan_and_explain(outdir, force=False, profile_path=None, validate=(), loaded=None, **params):
    """The steps of `cohort optimize` (and `cohort bench --train`) after the
    profile: outdir/profile.json (or profile_path) -> plan, explain.txt and
    graph.svg in outdir, validated on the profiles `validate`. Returns (plan,
    profile) as planner.plan_command does (loaded: as there)."""
    outdir = Path(outdir)
    profile_path = Path(profile_path or outdir / "profile.json")
    made = planner.plan_command(profile_path, outdir / "plan", force=force, validate=validate, loaded=loaded,
                                **params)
    text = explain(profile_path, outdir / "plan", graph_path=outdir / "graph.svg", force=force,
                   validate=validate, scale=params.get("scale"), made=made[0], profile=made[1])
    write_output(outdir / "explain.txt", text, "explain", force)
    return made
