"""The affinity graph as an SVG picture, coloured by group (HALO's Figure 9).

Plain Python: a deterministic force-directed layout (Fruchterman-Reingold),
node area by accesses, edge width by weight, grey for ungrouped contexts."""

import math
import random
from html import escape

MARK = "<!-- drawn by cohort explain -->"
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]
GREY = "#b0b0b0"


def layout(nodes, edges, size=1.0, iterations=300, seed=1):
    """{node: (x, y)} in [0, size]^2. Heavier edges pull harder."""
    rnd = random.Random(seed)
    pos = {n: [rnd.random() * size, rnd.random() * size] for n in nodes}
    if len(nodes) < 2:
        return {n: (size / 2, size / 2) for n in nodes}
    k = size / math.sqrt(len(nodes))
    heaviest = max((w for (x, y), w in edges.items() if x != y), default=1) or 1
    temp = size / 10
    for _ in range(iterations):
        disp = {n: [0.0, 0.0] for n in nodes}
        for i, a in enumerate(nodes):
            for b in nodes[i + 1:]:
                dx, dy = pos[a][0] - pos[b][0], pos[a][1] - pos[b][1]
                d = math.hypot(dx, dy) or 1e-6
                f = k * k / d
                disp[a][0] += dx / d * f; disp[a][1] += dy / d * f
                disp[b][0] -= dx / d * f; disp[b][1] -= dy / d * f
        for (a, b), w in edges.items():
            if a == b or a not in pos or b not in pos:
                continue
            dx, dy = pos[a][0] - pos[b][0], pos[a][1] - pos[b][1]
            d = math.hypot(dx, dy) or 1e-6
            f = d * d / k * (0.2 + w / heaviest)
            disp[a][0] -= dx / d * f; disp[a][1] -= dy / d * f
            disp[b][0] += dx / d * f; disp[b][1] += dy / d * f
        for n in nodes:
            dx, dy = disp[n]
            d = math.hypot(dx, dy) or 1e-6
            step = min(d, temp)
            pos[n][0] = min(size, max(0.0, pos[n][0] + dx / d * step))
            pos[n][1] = min(size, max(0.0, pos[n][1] + dy / d * step))
        temp *= 0.98
    return {n: tuple(p) for n, p in pos.items()}


def render(nodes, edges, accesses, group_of, labels, title, width=900, height=900):
    """nodes: [id]; edges: {(x, y): w}; accesses: {id: n}; group_of: {id: group
    index or None}; labels: {id: text}."""
    margin = 70
    nodes = sorted(nodes)
    pos = layout(nodes, edges)
    xy = {n: (margin + p[0] * (width - 2 * margin), margin + p[1] * (height - 2 * margin))
          for n, p in pos.items()}
    top = max(accesses.values(), default=1) or 1
    heaviest = max(edges.values(), default=1) or 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 40}" '
           f'viewBox="0 0 {width} {height + 40}" font-family="sans-serif">', MARK,
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="16">{escape(title)}</text>']
    for (a, b), w in sorted(edges.items(), key=lambda e: e[1]):
        if a not in xy or b not in xy:
            continue
        width_px = 0.5 + 7 * w / heaviest
        same = group_of.get(a) is not None and group_of.get(a) == group_of.get(b)
        colour = PALETTE[group_of[a] % len(PALETTE)] if same else "#888888"
        if a == b:
            x, y = xy[a]
            out.append(f'<circle cx="{x:.1f}" cy="{y - 18:.1f}" r="12" fill="none" stroke="{colour}" '
                       f'stroke-width="{width_px:.2f}" opacity="0.6"><title>loop {a}: {w}</title></circle>')
        else:
            (x1, y1), (x2, y2) = xy[a], xy[b]
            out.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
                       f'stroke-width="{width_px:.2f}" opacity="0.6"><title>{a}-{b}: {w}</title></line>')
    for n in nodes:
        x, y = xy[n]
        r = 5 + 20 * math.sqrt(accesses.get(n, 0) / top)
        g = group_of.get(n)
        fill = PALETTE[g % len(PALETTE)] if g is not None else GREY
        label = escape(labels.get(n, str(n)))
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{fill}" stroke="black" '
                   f'stroke-width="0.5"><title>{label}: {accesses.get(n, 0)} accesses</title></circle>')
        out.append(f'<text x="{x:.1f}" y="{y + r + 12:.1f}" text-anchor="middle" font-size="10">{label}</text>')
    legend = sorted({g for g in group_of.values() if g is not None})
    for i, g in enumerate(legend[:12]):
        out.append(f'<rect x="{10 + i * 74}" y="{height + 12}" width="12" height="12" '
                   f'fill="{PALETTE[g % len(PALETTE)]}"/><text x="{26 + i * 74}" y="{height + 22}" '
                   f'font-size="11">group {g}</text>')
    out.append(f'<rect x="{10 + len(legend[:12]) * 74}" y="{height + 12}" width="12" height="12" '
               f'fill="{GREY}"/><text x="{26 + len(legend[:12]) * 74}" y="{height + 22}" '
               f'font-size="11">ungrouped</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
