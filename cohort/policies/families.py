"""Context families: allocation contexts with their recursion folded away.

A recursive builder (`n->left = build(d-1); n->right = build(d-1);`) leaves
one context per *order* in which its recursive call sites were last entered:
two for a binary tree, dozens for a quad-tree's four calls. Each alone may be
too cold for HALO's graph filter, and the planner would see one logical
structure as many small, weakly linked nodes. A context's family is its chain
with every call site dropped that lies in a function already entered further
in: the recursive re-entries. All of a builder's contexts then share one
family, [malloc in build, build's call from main], which is how a person
would name the structure.

Function identity comes from the modules' call frame information
(`.eh_frame`, read with pyelftools): one FDE per function, present in
stripped binaries too; the function of a call site is the FDE that covers
its return address. Sites in modules that cannot be read keep their place
(never folded), so a family is never coarser than the evidence allows.

The planner groups families (docs/planner.md), and identification still
tests selectors against every real context, so a selector made from a
family's sites matches all of its contexts at run time."""

import bisect

from elftools.common.exceptions import ELFError
from elftools.dwarf.callframe import FDE
from elftools.elf.elffile import ELFFile


def function_starts(path):
    """Sorted [(start, end)] of the functions an ELF file's `.eh_frame`
    describes, as ELF virtual addresses; [] if it has none or cannot be read."""
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            if elf.get_section_by_name(".eh_frame") is None:
                return []
            dwarf = elf.get_dwarf_info(follow_links=False)
            spans = [(e.header["initial_location"], e.header["initial_location"] + e.header["address_range"])
                     for e in dwarf.EH_CFI_entries() if isinstance(e, FDE)]
    except (OSError, ELFError, ValueError, KeyError, AttributeError, TypeError, AssertionError,
            IndexError, UnicodeDecodeError):
        # pyelftools reports malformed input with many exception types
        return []
    return sorted(spans)


def site_functions(modules, sites, starts=function_starts):
    """{site id: function start offset or None} for the profile's sites of
    non-system modules."""
    wanted = {s["module"] for s in sites}
    spans = {m["id"]: starts(m["path"]) for m in modules if m["id"] in wanted and not m["system"]}
    out = {}
    for s in sites:
        table = spans.get(s["module"]) or []
        # the site is a return address: the call lies just before it, inside
        # the function (a call that ends a function returns to the next one)
        pc = s["offset"] - 1
        i = bisect.bisect_right(table, (pc, float("inf"))) - 1
        out[s["id"]] = table[i][0] if i >= 0 and table[i][0] <= pc < table[i][1] else None
    return out


def fold(chain, function_of):
    """The chain without the sites that lie in a function entered further in
    (innermost first, as contexts are)."""
    keys = [k for k in map(function_of.get, chain) if k is not None]
    if len(set(keys)) == len(keys):   # no function entered twice: nothing folds
        return list(chain)
    seen, out = set(), []
    for s in chain:
        f = function_of.get(s)
        if f is not None:
            if f in seen:
                continue
            seen.add(f)
        out.append(s)
    return out


def families(contexts, function_of, module_of):
    """[{"id", "sites", "contexts"}] in order of first context; a family's id
    is its position. `function_of`: {site: function start or None};
    `module_of`: {site: module id} (functions are told apart per module)."""
    keyed = {s: (module_of[s], f) if f is not None else None for s, f in function_of.items()}
    out, index = [], {}
    for c in contexts:
        folded = tuple(fold(c["sites"], keyed))
        if folded not in index:
            index[folded] = len(out)
            out.append({"id": len(out), "sites": list(folded), "contexts": []})
        out[index[folded]]["contexts"].append(c["id"])
    return out


def family_graph(fams, contexts, raw_edges, coverage, hot_nodes):
    """HALO's graph over families: each family's accesses are its contexts',
    an edge between two contexts of one family becomes the family's loop, and
    the same coverage filter keeps the hot families."""
    family_of = {c: f["id"] for f in fams for c in f["contexts"]}
    accesses = {c["id"]: c["accesses"] for c in contexts}
    nodes = [{"id": f["id"], "accesses": sum(accesses[c] for c in f["contexts"])} for f in fams]
    kept, covered = hot_nodes(nodes, coverage)
    keep = set(kept)
    weights = {}
    for x, y, w in raw_edges:
        fx, fy = family_of[x], family_of[y]
        if fx in keep and fy in keep:
            key = (min(fx, fy), max(fx, fy))
            weights[key] = weights.get(key, 0) + w
    edges = sorted(([x, y, w] for (x, y), w in weights.items()), key=lambda e: (-e[2], e[0], e[1]))
    return {"nodes": kept, "edges": edges, "coverage": round(covered, 6),
            "dropped_affinity": dropped_affinity(raw_edges, keep, family_of.get)}


def dropped_affinity(raw_edges, keep, node_of):
    """[[node, weight]] for each kept node that has any: its affinity with the
    nodes the coverage filter dropped, which no edge of the graph carries. A
    group that takes its objects away from those pays for it as for any
    other affinity outside it (docs/planner.md, "Affinity with the cold
    contexts")."""
    out = {}
    for x, y, w in raw_edges:
        nx, ny = node_of(x), node_of(y)
        if (nx in keep) != (ny in keep):
            n = nx if nx in keep else ny
            out[n] = out.get(n, 0) + w
    return sorted([n, w] for n, w in out.items())
