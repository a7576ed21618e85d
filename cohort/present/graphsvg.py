"""The affinity graph as an SVG picture, coloured by group (HALO's Figure 9),
and the DS graph the same way (its edges directed: which objects point to
which).

Graphviz (`neato`, Debian's graphviz) lays the graph out: node area by
accesses, edge width by weight, each edge labelled with its weight, grey for
ungrouped contexts. Around its drawing goes a title and a legend that names
every group in its colour."""

import math
import re
import shutil
import subprocess
from html import escape

from cohort.errors import CohortError
from cohort.files import GRAPH_MARK
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]
GREY = "#b0b0b0"
PT = re.compile(r'<svg width="(\d+)pt" height="(\d+)pt"')
MAX_NODES, MAX_EDGES = 80, 240   # more is neither readable nor quick to lay out


def readable(nodes, edges, accesses, what="contexts"):
    """The hottest MAX_NODES nodes and the heaviest MAX_EDGES edges among
    them: (nodes, edges, what was left out, in words or None)."""
    keep = set(sorted(nodes, key=lambda n: (-accesses.get(n, 0), n))[:MAX_NODES])
    among = {e: w for e, w in edges.items() if e[0] in keep and e[1] in keep}
    shown = dict(sorted(among.items(), key=lambda e: (-e[1], e[0]))[:MAX_EDGES])
    if len(keep) == len(nodes) and len(shown) == len(edges):
        return keep, shown, None
    return keep, shown, (f"showing the {len(keep)} hottest of {len(nodes)} {what} and the "
                         f"{len(shown)} heaviest of {len(edges)} edges")


def compact(n):
    """12345 -> '12.3k': weights short enough to sit on an edge."""
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


def dot_quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(nodes, edges, accesses, group_of, labels, directed=False, shapes=None, edge_labels=None,
           names=None):
    """DOT text. directed: edges are (from, to), drawn as arrows; shapes:
    {node: extra DOT node attributes}; edge_labels: {edge: text} (default:
    its weight); names: {node: text inside it} (default: cN)."""
    top = max(accesses.values(), default=1) or 1
    heaviest = max(edges.values(), default=1) or 1
    shapes, edge_labels, names = shapes or {}, edge_labels or {}, names or {}
    out = [f"{'digraph' if directed else 'graph'} g {{",
           '  graph [overlap=false, sep="+12", outputorder=edgesfirst, forcelabels=true'
           + (', rankdir=LR, nodesep=0.5' if directed else '') + '];',
           '  node [shape=circle, style=filled, fontname="sans-serif", fontsize=9, fixedsize=true];',
           '  edge [fontname="sans-serif", fontsize=8, fontcolor="#444444", arrowsize=0.6];']
    for n in sorted(nodes):
        g = group_of.get(n)
        size = 0.35 + 1.1 * math.sqrt(accesses.get(n, 0) / top)
        fill = PALETTE[g % len(PALETTE)] if g is not None else GREY
        out.append(f"  n{n} [label={dot_quote(names.get(n, f'c{n}'))}, "
                   f"width={size:.2f}, fillcolor={dot_quote(fill)}, "
                   f"xlabel={dot_quote(labels.get(n, ''))}, "
                   f"tooltip={dot_quote(f'{labels.get(n, n)}: {accesses.get(n, 0)} accesses')}"
                   + "".join(f", {k}={dot_quote(str(v))}" for k, v in shapes.get(n, {}).items()) + "];")
    arrow = "->" if directed else "--"
    for (a, b), w in sorted(edges.items()):
        if a not in nodes or b not in nodes:
            continue
        same = group_of.get(a) is not None and group_of.get(a) == group_of.get(b)
        colour = PALETTE[group_of[a] % len(PALETTE)] if same else "#888888"
        out.append(f"  n{a} {arrow} n{b} [label={dot_quote(edge_labels.get((a, b), compact(w)))}, "
                   f"penwidth={0.6 + 6 * w / heaviest:.2f}, "
                   f"color={dot_quote(colour)}, weight={1 + round(9 * w / heaviest)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def layout_svg(dot_text, engine="neato"):
    """Graphviz's SVG of a DOT graph, without its XML prologue: neato's
    springs for affinity, dot's layers for pointers (which run one way)."""
    neato = shutil.which(engine)
    if not neato:
        raise CohortError("graphviz is not installed, so the graph cannot be drawn "
                          "(apt-get install graphviz, or --graph - for none)")
    try:
        r = subprocess.run([neato, "-Tsvg"], input=dot_text.encode(), capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise CohortError("graphviz took over two minutes to lay the graph out; no graph drawn "
                          "(--graph - for none)") from None
    if r.returncode != 0:
        raise CohortError(f"graphviz could not lay the graph out: {r.stderr.decode(errors='replace').strip()[:200]}")
    svg = r.stdout.decode(errors="replace")
    return svg[svg.index("<svg"):]


AFFINITY_KEY = ("node cN: context N, its area by accesses, labelled with its entry site; edge: affinity "
                "weight (affinitive accesses), width by weight")


def render(nodes, edges, accesses, group_of, labels, title, names=None, directed=False, shapes=None,
           edge_labels=None, key=AFFINITY_KEY, what="contexts", node_names=None):
    """nodes: [id]; edges: {(x, y): w}; accesses: {id: n}; group_of: {id: group
    index or None}; labels: {id: text}; names: group index -> name; key:
    the line under the picture that says how to read it; the rest as
    to_dot (node_names: its names)."""
    names = names or {}
    nodes, edges, cut = readable(list(nodes), edges, accesses, what)
    inner = layout_svg(to_dot(nodes, edges, accesses, group_of, labels, directed, shapes, edge_labels,
                              node_names), "dot" if directed else "neato")
    m = PT.search(inner)
    w, h = (int(m.group(1)), int(m.group(2))) if m else (800, 800)
    if m:   # draw graphviz's points as pixels, 1:1 with its viewBox
        inner = inner[:m.start()] + f'<svg width="{w}" height="{h}"' + inner[m.end():]
    groups = sorted({g for g in group_of.values() if g is not None})
    entries = [(PALETTE[g % len(PALETTE)], f"group {g}: {names.get(g, '')}".rstrip(": ")) for g in groups]
    entries.append((GREY, "ungrouped"))
    legend_w = 20 + 7 * max(len(t) for _, t in entries)
    width, height = max(w + legend_w + 30, 900), max(h, 30 + 18 * len(entries)) + 70 + (16 if cut else 0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif">', GRAPH_MARK,
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{width / 2:.0f}" y="24" text-anchor="middle" font-size="16">{escape(title)}</text>',
           f'<text x="{width / 2:.0f}" y="{height - 12}" text-anchor="middle" font-size="11">{escape(key)}</text>',
           *([f'<text x="{width / 2:.0f}" y="{height - 28}" text-anchor="middle" font-size="11">{cut}</text>']
             if cut else []),
           f'<g transform="translate(10,40)">', inner, "</g>"]
    x0 = width - legend_w - 10
    out.append(f'<text x="{x0}" y="54" font-size="12" font-weight="bold">groups</text>')
    for i, (colour, text) in enumerate(entries):
        y = 64 + 18 * i
        out.append(f'<rect x="{x0}" y="{y}" width="12" height="12" fill="{colour}" stroke="black" '
                   f'stroke-width="0.5"/><text x="{x0 + 18}" y="{y + 10}" font-size="11">{escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
