"""`cohort merge`: the profiles of several runs of a program, each
weighted, as one profile (docs/profile-format.md, "Merged profiles").

A plan made from one input is tuned to it; one made from several sees what
the runs have in common, as `llvm-profdata merge` does for PGO. Sites are
matched by module (build id, else path) and offset, contexts by their sites
and whether their walk was truncated, so that ids mean the same in every
run; every count is each run's times its weight, summed, and rounded. What
the profiles do not hold cannot be merged: an edge between two contexts
that one run's coverage filter dropped is not in that run's profile (its
weight is in the run's `dropped_affinity` instead, which the merged profile
keeps as such), and heap traces (`hot_streams`) are left out.

Runs of different builds of the program are related by their call sites'
anchors (docs/plan-format.md, "Anchors"): the build whose file is still on
disk is the merged profile's, and the others' sites are found in it; a
context with a site that is not found is left out of the merge, and the
merged profile says how many allocations that left out."""

import json
import os

from cohort import __version__
from cohort.errors import CohortError
from cohort.files import claim, write_output
from cohort.formats import profilefile
from cohort.measure.profile import LINE_OFFSETS, RAW_VERSION, as_text, ds_graph, hot_nodes
from cohort.formats import elf
from cohort.plan import rebase
from cohort.plan.transfer import same_program
from cohort.policies import families

COUNTS = ("allocations", "bytes", "frees", "accesses", "macro_accesses", "d1_misses", "ll_misses")
TOTALS = ("allocations", "accesses", "macro_accesses", "unknown_frees", "run_accesses", "run_d1_misses",
          "run_ll_misses", "heap_other_d1_misses", "heap_other_ll_misses", "weight_before_filter",
          "sampled_windows", "analysed_accesses", "span_accesses")
TOTALS_MAX = ("peak_live_objects", "peak_live_bytes", "threads")
# Kept, as the largest, only where every run has it (raw version 10 on).
TOTALS_MAX_OPTIONAL = ("sample_base",)
MAX_WEIGHT = 1e6   # counts of up to 2^44 each stay within a profile's 64 bits


def module_key(m):
    return m["build_id"] or m["path"]


class Merged:
    """The merged ids: modules, sites and contexts in order of first sight."""

    def __init__(self):
        self.modules, self.module_ids = [], {}
        self.sites, self.site_ids = [], {}
        self.contexts, self.context_ids = [], {}

    def module(self, m):
        key = module_key(m)
        if key not in self.module_ids:
            self.module_ids[key] = len(self.modules)
            self.modules.append({**m, "id": len(self.modules)})
        return self.module_ids[key]

    def site(self, profile, s, weight, moved=None):
        """The merged id of run site s; moved: (module, offset, anchor) where
        it lies in the merged profile's build, and its anchor there, if the
        run was of another build (its own function start and anchor are of
        that build, so they are left out)."""
        module, offset, anchor = moved or (profile["modules"][s["module"]], s["offset"], None)
        key = (module_key(module), offset)
        if key not in self.site_ids:
            self.site_ids[key] = len(self.sites)
            own = {k: v for k, v in s.items() if not moved or k not in ("function_start", "anchor")}
            self.sites.append({**own, "id": len(self.sites), "module": self.module(module), "offset": offset,
                               "calls": 0, **({"function_start": None} if moved else {}),
                               **({"anchor": anchor} if anchor else {})})
        site = self.sites[self.site_ids[key]]
        site["calls"] += weight * s.get("calls", 0)
        if not moved and site.get("function_start") is None and s.get("function_start") is not None:
            site["function_start"] = s["function_start"]   # a run that could read the module's frames
        if not moved and "anchor" not in site and "anchor" in s:
            site["anchor"] = s["anchor"]
        return site["id"]


def add_context(into, c, w):
    """Adds context c of one run, weighted w, to the merged context into."""
    for k in COUNTS:
        into[k] += w * c.get(k, 0)
    into["min_size"] = min(into["min_size"], c["min_size"])
    into["max_size"] = max(into["max_size"], c["max_size"])
    life = c["lifetime"]
    if c["frees"] and life["mean"] is not None:
        into["_life_sum"] += w * c["frees"] * life["mean"]
        into["_life_max"] = life["max"] if into["_life_max"] is None else max(into["_life_max"], life["max"])
    for part in ("through_system", "layout_d1_misses", "beside"):
        if part in c:
            have = into.setdefault(part, {k: 0 for k in c[part]})
            for k, v in c[part].items():
                have[k] = have.get(k, 0) + w * v
    if "lines" in c:
        have = into.setdefault("lines", {"chases": 0, "d1_misses": [0] * len(LINE_OFFSETS),
                                         "chase_waits": [0] * len(LINE_OFFSETS)})
        have["chases"] += w * c["lines"]["chases"]
        for k in ("d1_misses", "chase_waits"):
            have[k] = [a + w * b for a, b in zip(have[k], c["lines"][k])]


def finish_context(c):
    """The merged context's counts as whole numbers, its lifetime as the
    runs' mean over all their frees."""
    for k in COUNTS:
        c[k] = int(round(c[k]))
    frees, life_sum, life_max = c["frees"], c.pop("_life_sum"), c.pop("_life_max")
    c["same_size"] = c["min_size"] == c["max_size"]
    c["lifetime"] = {"mean": round(life_sum / frees, 2) if frees and life_max is not None else None,
                     "max": life_max if frees else None, "live_at_exit": max(0, c["allocations"] - frees)}
    for part in ("through_system", "layout_d1_misses", "beside"):
        if part in c:
            c[part] = {k: int(round(v)) for k, v in c[part].items()}
    if "lines" in c:
        c["lines"] = {"chases": int(round(c["lines"]["chases"])),
                      **{k: [int(round(v)) for v in c["lines"][k]] for k in ("d1_misses", "chase_waits")}}


def check_inputs(profiles, paths, weights):
    """CohortError unless the profiles are of one build of one program, with
    the same tracking parameters and weights that are positive numbers."""
    if len(profiles) < 2:
        raise CohortError("cohort merge needs at least two profiles")
    if len(weights) != len(profiles) or any(not 0 < w <= MAX_WEIGHT for w in weights):
        raise CohortError(f"--weights needs {len(profiles)} numbers above 0 and at most {MAX_WEIGHT:g}, "
                          "one per profile")
    first = profiles[0]
    for p, path in zip(profiles[1:], paths[1:]):
        same_program(first, p, f"profile {paths[0]}", f"profile {path}", "merge the profiles of one program's runs",
                     one_build=False)
        for k in ("affinity_distance", "max_size"):
            if p["parameters"][k] != first["parameters"][k]:
                raise CohortError(f"profile {path} was made with another {k.replace('_', ' ')} "
                                  f"({p['parameters'][k]}, not {first['parameters'][k]}): profile both alike")
        if p.get("version") != first.get("version"):
            raise CohortError(f"profile {path} is of format version {p.get('version')}, {paths[0]} of "
                              f"{first.get('version')}: profile both with one Cohort")


def relate(profiles, paths):
    """Per run, {site id: (module, offset) in the merged build} for the sites
    of its modules that are another build than the merged profile's, None
    for one not found there; and per run, for each such module, what
    relating it found (empty: the run is of the merged build). The merged
    build of a module is the one whose file is still at its path; a run of
    another build must carry anchors (cohort profile writes them) and have
    as many of its sites found as a plan carried to another build must
    keep."""
    builds = {}
    for p in profiles:
        for mod in p["modules"]:
            if not mod["system"]:
                builds.setdefault(os.path.basename(mod["path"]), {}).setdefault(mod["build_id"], mod)
    target = {}
    for name, found in builds.items():
        if len(found) < 2:
            continue
        on_disk = [m for bid, m in found.items() if bid and os.path.isfile(m["path"]) and elf.build_id(m["path"]) == bid]
        if not on_disk:
            raise CohortError(f"the profiles are of {len(found)} builds of {name}, and none of them is on disk to "
                              f"relate their call sites in (" + ", ".join(sorted(m["path"] for m in found.values()))
                              + "): merge the profiles of one build")
        target[name] = on_disk[0]
    moves, related = [], []
    for p, path in zip(profiles, paths):
        move, said = {}, []
        for mod in p["modules"]:
            name = os.path.basename(mod["path"])
            if mod["system"] or name not in target or mod["build_id"] == target[name]["build_id"]:
                continue
            mine = [s for s in p["sites"] if s["module"] == mod["id"]]
            anchored = {s["id"]: s["anchor"] for s in mine if "anchor" in s}
            if mine and not anchored:
                raise CohortError(f"profile {path} is of another build of {name} than the one on disk, and has no "
                                  "anchors to find its call sites in it by: profile it again with this Cohort, "
                                  "or merge the profiles of one build")
            _, found = rebase.find(target[name]["path"], anchored)
            offsets = rebase.distinct({s["id"]: found.get(s["id"], (None,))[0] for s in mine})
            move.update({s: None if off is None else (target[name], off, found[s][2]) for s, off in offsets.items()})
            n = sum(off is not None for off in offsets.values())
            # As for a plan carried to another build: below that share, too
            # little is the same call to trust the rest to be.
            if rebase.too_few(n, len(mine), rebase.DEFAULT_MIN_KEPT):
                raise CohortError(f"profile {path}: only {n} of its {len(mine)} call sites in {name} are found in "
                                  f"the build on disk ({target[name]['path']}), fewer than "
                                  f"{rebase.DEFAULT_MIN_KEPT}%: too little in common to merge")
            said.append({"module": mod["path"], "build_id": mod["build_id"] or "-", "sites": len(mine), "found": n,
                         "allocations_left_out": 0, "_id": mod["id"]})
        moves.append(move)
        related.append(said)
    return moves, related


def merge(profiles, paths, weights=None):
    """The merged profile (a dict in profile.json's format)."""
    weights = [1.0] * len(profiles) if weights is None else list(weights)
    check_inputs(profiles, paths, weights)
    moves, related = relate(profiles, paths)
    m = Merged()
    raw_edges, near, dropped, pointers, beside_pairs = {}, {}, {}, {}, {"one": {}, "classes": {}}
    fam_edges, fam_dropped = {}, {}   # by family key: the sites of the family, merged ids
    totals = {}
    layouts = lines = None
    for p, w, move, said in zip(profiles, weights, moves, related):
        # A module another build stands in for is the merged build's.
        moved_modules = {s["module"] for s in p["sites"] if s["id"] in move}
        for mod in p["modules"]:
            if mod["id"] not in moved_modules:
                m.module(mod)
        site_of = {s["id"]: None if s["id"] in move and move[s["id"]] is None else m.site(p, s, w, move.get(s["id"]))
                   for s in p["sites"]}
        ctx_of = {}
        module_of = {s["id"]: s["module"] for s in p["sites"]}
        for c in p["contexts"]:
            lost = [module_of[s] for s in c["sites"] if site_of[s] is None]
            if lost:   # a site not found in the merged build: counted against its module's first such
                next(r for r in said if r["_id"] == lost[0])["allocations_left_out"] += c["allocations"]
                ctx_of[c["id"]] = None
                continue
            key = (tuple(site_of[s] for s in c["sites"]), c["truncated"])
            if key not in m.context_ids:
                m.context_ids[key] = len(m.contexts)
                m.contexts.append({"id": len(m.contexts), "sites": list(key[0]), "truncated": c["truncated"],
                                   **{k: 0 for k in COUNTS}, "min_size": c["min_size"], "max_size": c["max_size"],
                                   "_life_sum": 0.0, "_life_max": None})
            ctx_of[c["id"]] = m.context_ids[key]
            add_context(m.contexts[ctx_of[c["id"]]], c, w)
        g = p["graph"]
        for i, (x, y, wt) in enumerate(g["edges"]):
            if ctx_of[x] is None or ctx_of[y] is None:
                continue
            key = tuple(sorted((ctx_of[x], ctx_of[y])))
            raw_edges[key] = raw_edges.get(key, 0) + w * wt
            if "near" in g:
                near[key] = near.get(key, 0) + w * g["near"][i]
        for x, wt in g.get("dropped_affinity", ()):
            if ctx_of[x] is not None:
                dropped[ctx_of[x]] = dropped.get(ctx_of[x], 0) + w * wt
        if "families" in p and "family_graph" in p:
            # A run's family, by one of its contexts: the merged families are
            # folded again, with every run's function starts, and a family
            # keeps its contexts together.
            rep = {f["id"]: next((ctx_of[c] for c in f["contexts"] if ctx_of[c] is not None), None)
                   for f in p["families"]}
            for x, y, wt in p["family_graph"]["edges"]:
                if rep[x] is not None and rep[y] is not None:
                    key = tuple(sorted((rep[x], rep[y])))
                    fam_edges[key] = fam_edges.get(key, 0) + w * wt
            for x, wt in p["family_graph"].get("dropped_affinity", ()):
                if rep[x] is not None:
                    fam_dropped[rep[x]] = fam_dropped.get(rep[x], 0) + w * wt
        if "ds_graph" in p:
            for src, off, dst, n in p["ds_graph"]["edges"]:
                if ctx_of[src] is not None and ctx_of[dst] is not None:
                    key = (ctx_of[src], off, ctx_of[dst])
                    pointers[key] = pointers.get(key, 0) + w * n
            totals["pointer_stores"] = totals.get("pointer_stores", 0) + w * p["ds_graph"]["pointer_stores"]
        for k in TOTALS:
            if k in p["totals"]:
                totals[k] = totals.get(k, 0) + w * p["totals"][k]
        for k in TOTALS_MAX:
            totals[k] = max(totals.get(k, 0), p["totals"][k])
        for k in TOTALS_MAX_OPTIONAL:
            if k in p["totals"]:
                totals[k] = max(totals.get(k, 0), p["totals"][k])
        if "rest_layouts" in p:
            r = p["rest_layouts"]
            if layouts is None:
                # LL misses only where every run has them (raw versions before 9)
                ll = all("ll_misses" in (q.get("rest_layouts") or {}).get("one", {}) for q in profiles)
                zero = {"d1_misses": 0, **({"ll_misses": 0} if ll else {})}
                layouts = {"max_size": r["max_size"], "objects": 0, "accesses": 0,
                           "one": dict(zero), "classes": dict(zero)}
            layouts["objects"] += w * r["objects"]
            layouts["accesses"] += w * r["accesses"]
            for shape in ("one", "classes"):
                for k in layouts[shape]:
                    layouts[shape][k] += w * r[shape][k]
                for c, n, k in (r.get("beside") or {}).get(shape, ()):
                    if ctx_of[c] is None or ctx_of[n] is None:
                        continue
                    key = (ctx_of[c], ctx_of[n])
                    beside_pairs[shape][key] = beside_pairs[shape].get(key, 0) + w * k
        if "line_offsets" in p:
            if lines is None:
                lines = {"offsets": LINE_OFFSETS, "max_size": p["line_offsets"]["max_size"], "accesses": 0}
            lines["accesses"] += w * p["line_offsets"]["accesses"]
    # Fields an older profile lacks stay out unless every run has them.
    every = lambda key, items: all(key in x for p in profiles for x in p[items])   # noqa: E731
    lacking = [k for k in ("d1_misses", "ll_misses", "through_system", "layout_d1_misses", "beside")
               if not every(k, "contexts")]
    if not all("line_offsets" in p for p in profiles):   # a context without lines had none placed
        lacking.append("lines")
    for c in m.contexts:
        finish_context(c)
        for k in lacking:
            c.pop(k, None)
    for k in TOTALS + TOTALS_MAX_OPTIONAL:
        if any(k not in p["totals"] for p in profiles):
            totals.pop(k, None)
    for s in m.sites:
        s["calls"] = int(round(s["calls"]))
        if not every("calls", "sites"):
            del s["calls"]
    return assemble(profiles, paths, weights, m, raw_edges, near, dropped, pointers, beside_pairs, totals,
                    layouts, lines, (fam_edges, fam_dropped), related)


def merged_family_graph(fams, contexts, coverage, fam_edges, fam_dropped, with_dropped):
    """The family graph from the runs' own family graphs, each run's family
    found by one of its contexts (fam_edges and fam_dropped are keyed by
    merged context ids), made as a run's is from its context edges
    (families.family_graph): each run's family graph holds affinity between
    contexts its context graph dropped, which the merged context graph
    cannot give back."""
    graph = families.family_graph(fams, contexts, [(a, b, int(round(w))) for (a, b), w in fam_edges.items()],
                                  coverage, hot_nodes)
    fid = {c: f["id"] for f in fams for c in f["contexts"]}
    lost = dict(graph.pop("dropped_affinity"))
    for c, w in fam_dropped.items():
        if fid[c] in graph["nodes"]:
            lost[fid[c]] = lost.get(fid[c], 0) + w
    if with_dropped:
        graph["dropped_affinity"] = sorted([n, int(round(w))] for n, w in lost.items() if round(w) > 0)
    return graph


def assemble(profiles, paths, weights, m, raw_edges, near, dropped, pointers, beside_pairs, totals, layouts,
             lines, fam_graphs, related):
    """The merged profile's graphs, families and totals, made as
    measure/profile.py makes a run's from its raw dump."""
    first = profiles[0]
    coverage = first["parameters"]["coverage"]
    contexts = m.contexts
    edges_all = [(x, y, int(round(w))) for (x, y), w in raw_edges.items() if round(w) > 0]
    kept, covered = hot_nodes(contexts, coverage)
    keep = set(kept)
    edges = sorted(([x, y, w] for x, y, w in edges_all if x in keep and y in keep), key=lambda e: (-e[2], e[0], e[1]))
    function_of = {s["id"]: s.get("function_start") for s in m.sites}
    fams = families.families(contexts, function_of, {s["id"]: s["module"] for s in m.sites})
    with_families = all("families" in p for p in profiles)   # not in version 1
    for f in fams if with_families else ():
        for c in f["contexts"]:
            contexts[c]["family"] = f["id"]
    # The runs' affinity with contexts their filters dropped, kept as such,
    # and that of merged edges that lead out of the merged graph's nodes.
    lost = {c: w for c, w in dropped.items()}
    for x, w in families.dropped_affinity(edges_all, keep, lambda c: c):
        lost[x] = lost.get(x, 0) + w
    hot = set(keep)
    if with_families:
        family_graph = merged_family_graph(fams, contexts, coverage, *fam_graphs,
                                           all("dropped_affinity" in p["family_graph"] for p in profiles))
        for f in family_graph["nodes"]:
            hot.update(fams[f]["contexts"])
    graph = {"nodes": kept, "edges": edges,
             **({"near": [min(int(round(near.get((x, y), 0))), 64 * w) for x, y, w in edges]}
                if all("near" in p["graph"] for p in profiles) else {}),
             "coverage": round(covered, 6), "dropped_contexts": len(contexts) - len(kept),
             **({"dropped_affinity": sorted([c, int(round(w))] for c, w in lost.items() if c in keep and round(w) > 0)}
                if all("dropped_affinity" in p["graph"] for p in profiles) else {})}
    out = {
        "format": profilefile.FORMAT, "version": first["version"],
        "tool": {"name": "cohort", "raw_version": RAW_VERSION, "cohort": __version__},
        "parameters": dict(first["parameters"]),
        "target": dict(first["target"]),
        "merged": [{"profile": as_text(os.path.abspath(p)), "argv": prof["target"]["argv"], "weight": w,
                    **({"related": [{**{k: v for k, v in r.items() if k != "_id"}, "module": as_text(r["module"])}
                                    for r in said]} if said else {})}
                   for p, prof, w, said in zip(paths, profiles, weights, related)],
        "modules": m.modules,
        "sites": m.sites,
        "contexts": contexts,
        "graph": graph,
        **({"families": fams, "family_graph": family_graph} if with_families else {}),
        # Before the filter, each run had its own edges: the merged profile
        # says how many the largest had (its weight before the filter is
        # the runs' weights', summed).
        "totals": {**{k: int(round(v)) for k, v in totals.items() if k != "pointer_stores"},
                   "edges_before_filter": max(p["totals"]["edges_before_filter"] for p in profiles),
                   "weight": sum(e[2] for e in edges)},
    }
    if all("ds_graph" in p for p in profiles):
        out["ds_graph"] = ds_graph([(s, o, d, int(round(n))) for (s, o, d), n in pointers.items() if round(n) > 0],
                                   int(round(totals.get("pointer_stores", 0))))
    if layouts is not None and all("rest_layouts" in p for p in profiles):
        layouts = {**layouts, "objects": int(round(layouts["objects"])), "accesses": int(round(layouts["accesses"])),
                   **{s: {k: int(round(v)) for k, v in layouts[s].items()} for s in ("one", "classes")}}
        if all("beside" in p["rest_layouts"] for p in profiles):
            layouts["beside"] = {s: sorted(([c, n, int(round(k))] for (c, n), k in pairs.items()
                                            if c in hot and n in hot and round(k) > 0),
                                           key=lambda e: (-e[2], e[0], e[1]))
                                 for s, pairs in beside_pairs.items()}
        out["rest_layouts"] = layouts
    if lines is not None and all("line_offsets" in p for p in profiles):
        out["line_offsets"] = {**lines, "accesses": int(round(lines["accesses"]))}
    return out


def merge_command(paths, output, weights=None, force=False):
    """`cohort merge`: the profiles at paths, checked, merged and written to
    output (never over a file that is not a profile, unless force), checked
    again as any profile is read. Returns the merged profile."""
    if any(os.path.realpath(output) == os.path.realpath(p) for p in paths):
        raise CohortError(f"{output} is one of the profiles to merge: write the merged profile elsewhere")
    claim(output, "profile", force)
    if not force and os.path.isfile(output):   # a run's own profile is not the merge's to replace
        try:
            with open(output, "rb") as f:
                had = json.load(f)
        except (OSError, ValueError):
            had = None
        if isinstance(had, dict) and "merged" not in had:
            raise CohortError(f"{output} is the profile of a run, not a merged one: not replacing it "
                              "(choose another name, or --force to replace it)")
    profiles = [profilefile.load_profile(p) for p in paths]
    merged = merge(profiles, [str(p) for p in paths], weights)
    try:
        profilefile.check_profile(merged)
    except profilefile.Corrupt as e:   # a bug of the merge's, said plainly rather than written
        raise CohortError(f"the merged profile would not be valid ({e}); nothing written") from None
    write_output(output, profilefile.dumps(merged), "profile", force)
    return merged
