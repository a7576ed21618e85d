"""`cohort report`: one Markdown report from one or more bench results
directories. It opens with the best configuration per workload against
each baseline, then every configuration side by side, then HALO's
evaluation (CGO 2020, section 5) for these programs: Figure 13 (D1
misses per policy), Figure 14 (speed-up with quartiles), Figure 15 (halo
against the random control), Table 1 (fragmentation at peak) and, for
results with a sweep, Figure 12; each figure as PNG and as a table."""

from pathlib import Path

from cohort.formats.results import load_results
from cohort.errors import CohortError
from cohort.files import REPORT_MARK, claim, write_output


def short_walk_share(frames_walked):
    """The share of allocations identified within 3 frames past their entry,
    from the runtime statistics' frames_walked (None if it counted none)."""
    total = sum((frames_walked or {}).values())
    if not total:
        return None
    return sum(v for k, v in frames_walked.items() if k in ("0", "1", "2", "3")) / total

def _ratio(r, name, key="time_ratio"):
    x = r["ratios"].get(name)
    if not x or key not in x:
        return None
    return x[key]


def fmt_time(r, name):
    x = r["ratios"].get(name)
    if not x:
        return "-"
    return f"{x['time_ratio']:.3f} ({x['time_ratio_p25']:.2f}-{x['time_ratio_p75']:.2f})"


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def labels(paths, runs):
    """A row label per run: its workload, and where two runs share one, the
    results directory as given (its last component if that tells them apart)."""
    names = [r["workload"] for r in runs]
    dirs = [Path(p).parent if Path(p).name == "results.json" else Path(p) for p in paths]
    out = []
    for i, (n, d) in enumerate(zip(names, dirs)):
        same = [j for j, m in enumerate(names) if m == n]
        if len(same) == 1:
            out.append(n)
            continue
        tails = [dirs[j].resolve().name for j in same]
        tag = d.resolve().name if tails.count(d.resolve().name) == 1 else str(d)
        out.append(f"{n} ({tag})")
    # still equal (the same directory given twice): number them
    for i, lab in enumerate(out):
        if out.count(lab) > 1:
            out[i] = f"{lab} #{out[:i + 1].count(lab)}"
    return out


FIGURES = {"fig13": "D1 misses per policy", "fig14": "speed-up per policy",
           "fig15": "HALO against the random control"}


def plot_paths(output, sweeps=()):
    """The plots a report at output draws beside it, named after it: {key:
    path}, with a Figure 12 (fig12-PARAM) per parameter swept."""
    output = Path(output)
    keys = list(FIGURES) + [f"fig12-{p}" for p in sweeps]
    return {k: output.with_name(f"{output.stem}-{k}.png") for k in keys}


def configs_of(r):
    """A run's Cohort configurations (every one with a ratio), in its order."""
    return [n for n in r["parameters"]["order"] if n in r["ratios"]]


def against(r, name, base):
    """(time, D1) of config name over baseline base in one run, from the
    medians and cachegrind counts; None where either is missing."""
    s = r["summary"]
    t = None
    if name in s and base in s and s[name]["ok_trials"] and s[base]["ok_trials"] and s[base]["wall_median_s"]:
        t = s[name]["wall_median_s"] / s[base]["wall_median_s"]
    cg = r.get("cachegrind") or {}
    d = None
    if name in cg and base in cg and "error" not in cg[name] and "error" not in cg[base]:
        d = cg[name]["D1_misses"] / max(cg[base]["D1_misses"], 1)
    return t, d


def headroom_section(runs, allocs):
    """The headroom of each trained workload (cohort/plan/headroom.py) beside the
    D1 change its plans measured: the most a placement could remove, and
    what it did remove."""
    rows = [r for r in runs if (r.get("headroom") or {}).get("tracked_d1_share") is not None]
    if not rows:
        return []
    head = ["workload", "headroom (training run)"] + [f"D1 cohort+{a} vs {a}" for a in allocs]
    lines = ["## Headroom", "",
             "The share of the training run's simulated D1 misses on objects Cohort can place (the most any "
             "plan could remove), beside the D1 misses each plan measured against its allocator.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        row = [r["label"], f"{r['headroom']['tracked_d1_share']:.1%}"]
        row += [fmt(_ratio(r, f"cohort+{a}", "d1_ratio")) for a in allocs]
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def layout_section(runs, allocs):
    """Where the bench moved its baselines' layouts (--layout-runs): each
    baseline's band of its own D1 misses, and Cohort's ratio against it."""
    from cohort.formats.results import layout_band
    rows = []
    for r in runs:
        for a in allocs:
            base = (r.get("cachegrind") or {}).get(a) or {}
            band = layout_band(base)
            if band is None:
                continue
            d1 = _ratio(r, f"cohort+{a}", "d1_ratio")
            where = "-" if d1 is None else ("inside" if band[0] <= d1 <= band[1] else "outside")
            rows.append(f"| {r['label']} | {a} | {len(base['layouts'])} | {band[0]:.3f}-{band[1]:.3f} | "
                        f"{fmt(d1)} ({where}) |")
    if not rows:
        return []
    return ["## Layout noise", "",
            "Each baseline's own D1 misses with its heap and stack moved (`--layout-runs`), as ratios to "
            "its run above: a D1 ratio inside that band is no difference (docs/results-format.md).", "",
            "| workload | baseline | moved runs | band | cohort D1 vs baseline |", "|---|---|---|---|---|",
            *rows, ""]


def slower_beyond_noise(r, name, base):
    """Whether config name ran slower than base beyond noise in one run:
    its 25th percentile of wall time above base's 75th. None where either
    has no successful trial."""
    s = r["summary"]
    if not (s.get(name, {}).get("ok_trials") and s.get(base, {}).get("ok_trials")):
        return None
    return s[name]["wall_p25_s"] > s[base]["wall_p75_s"]


def losses_section(runs, allocs):
    """Where a plan loses beyond noise: each cohort+ALLOC against ALLOC
    alone, the plan in front of the run's first allocator against the rest
    pool alone (which runs in front of that one), and in D1 misses against
    its allocator (cachegrind counts are exact: any rise shows, outside the
    layout band where --layout-runs measured one)."""
    from cohort.formats.results import layout_band
    lines = ["## Where Cohort loses", "",
             "A plan is slower beyond noise when its 25th percentile of time lies above the other "
             "configuration's 75th, in the same run. D1 is listed where the plan's misses are above its "
             "allocator's (outside that allocator's layout band, where one was measured).", "",
             "| workload | slower beyond noise | more D1 misses |", "|---|---|---|"]
    for r in runs:
        slow, more = [], []
        for a in allocs:
            name = f"cohort+{a}"
            for base in (a, "rest") if a == r["parameters"]["allocators"][0] else (a,):
                if slower_beyond_noise(r, name, base):
                    s = r["summary"]
                    slow.append(f"{name} than {base} ({s[name]['wall_p25_s']:.3f}-{s[name]['wall_p75_s']:.3f} s "
                                f"against {s[base]['wall_p25_s']:.3f}-{s[base]['wall_p75_s']:.3f})")
            d1 = _ratio(r, name, "d1_ratio")
            band = layout_band((r.get("cachegrind") or {}).get(a) or {})
            if d1 is not None and d1 > (band[1] if band else 1.0005):
                more.append(f"{name} {d1:.3f}" + (f" (band to {band[1]:.3f})" if band else ""))
        lines.append(f"| {r['label']} | {'; '.join(slow) or 'none'} | {'; '.join(more) or 'none'} |")
    return lines + [""]


def best_config(r):
    """The Cohort configuration with the lowest median time, or None."""
    ok = [n for n in configs_of(r) if r["summary"][n]["ok_trials"]]
    return min(ok, key=lambda n: (r["summary"][n]["wall_median_s"], n)) if ok else None


def display(name):
    """What a config is, for a reader: halo's plan is cohort+ALLOC."""
    if name.startswith("cohort+"):
        return f"halo ({name})"
    return {"random": "random control", "all": "one pool (all)"}.get(name, name)


def report(paths, output, title="Cohort benchmark report", force=False):
    """Write the report; returns the paths written (the report first)."""
    runs = [load_results(p) for p in paths]
    if not runs:
        raise CohortError("no results given")
    output = Path(output)
    for r, lab in zip(runs, labels(paths, runs)):
        r["label"] = lab
    sweeps = {}
    for r in runs:
        sw = r.get("sweep")
        if sw:
            points = []
            for v, name in zip(sw["values"], sw["configs"]):
                x = r["ratios"].get(name)
                if x:
                    points.append((v, x["time_ratio"], x["time_ratio_p25"], x["time_ratio_p75"], x.get("d1_ratio")))
            if points:
                sweeps.setdefault(sw["parameter"], []).append((r["label"], points))
    pngs = plot_paths(output, sweeps)
    for p, kind in ((output, "report"), *((q, "plot") for q in pngs.values())):
        claim(p, kind, force)
    written = [output]
    # One column per policy that any run measured (halo's are the
    # cohort+ALLOC columns).
    online = []
    for r in runs:
        for p in r["parameters"].get("policies", ["halo"]):
            if p != "halo" and p not in online:
                online.append(p)
    allocs = []
    for r in runs:
        for a in r["parameters"]["allocators"]:
            if a not in allocs:
                allocs.append(a)
    lines = [REPORT_MARK, f"# {title}", ""]
    m = runs[0]["machine"]
    lines.append(f"Machine: {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs, "
                 f"{round(m.get('memory_kb', 0) / 2**20)} GiB; kernel {m.get('kernel', '?')}. "
                 f"Cohort {runs[0]['cohort']}.")
    g = runs[0]["parameters"]["cache_geometry"]
    lines.append(f"Cache misses: cachegrind, D1 {g['D1']}, LL {g['LL']} (size, ways, line). "
                 "Times: interleaved trials after a warm-up; medians, with the 25th-75th percentile "
                 "of the optimised runs over the baseline's median in brackets. Ratios below 1 are better.")
    lines.append("")

    # What a reader wants first: the best of Cohort on each workload.
    lines += ["## Best per workload", "",
              "The Cohort configuration with the lowest median time, against each baseline measured "
              "in the same run (time and D1 misses; below 1 is better).", ""]
    head = ["workload", "best"] + [f"{k} vs {a}" for a in allocs for k in ("time", "D1")]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        b = best_config(r)
        row = [r["label"], display(b) if b else "-"]
        for a in allocs:
            t, d = against(r, b, a) if b else (None, None)
            row += [fmt(t), fmt(d)]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")

    lines += ["## Every configuration", ""]
    head = ["workload", "trials"]
    for a in allocs:
        head += [f"time vs {a}", f"D1 vs {a}"]
    head += [f"{p} (time, D1)" for p in online]
    head += ["random control (time, D1)", "one pool (time, D1)", "fragmentation at peak", "problems"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    speed_rows, miss_rows, control_rows = [], [], []
    for r in runs:
        row = [r["label"], str(r["parameters"]["trials"])]
        srow, mrow, crow = {}, {}, {}
        for a in allocs:
            name = f"cohort+{a}"
            row += [fmt_time(r, name), fmt(_ratio(r, name, "d1_ratio"))]
        for control in (*online, "random", "all"):
            x = r["ratios"].get(control)
            row.append(f"{fmt(_ratio(r, control))}, {fmt(_ratio(r, control, 'd1_ratio'))}" if x else "-")
        for name in configs_of(r):
            x = r["ratios"][name]
            label = display(name)
            srow[label] = (x["time_ratio"], x["time_ratio_p25"], x["time_ratio_p75"])
            if "d1_ratio" in x:
                mrow[label] = (x["d1_ratio"],) * 3
            if name in (f"cohort+{r['parameters']['allocators'][0]}", "random"):
                crow[label] = srow[label]
        st = r["runtime_stats"].get(f"cohort+{allocs[0]}") or next(iter(r["runtime_stats"].values()), None)
        row.append(f"{st['fragmentation_at_peak_bytes']:,} B ({st['fragmentation_at_peak_percent']}%)"
                   if st else "-")
        row.append("; ".join(r["problems"]) if r["problems"] else "none")
        lines.append("| " + " | ".join(row) + " |")
        speed_rows.append((r["label"], srow))
        miss_rows.append((r["label"], mrow))
        control_rows.append((r["label"], crow))
    lines.append("")
    lines += losses_section(runs, allocs)
    lines += headroom_section(runs, allocs)
    lines += layout_section(runs, allocs)

    figures = [
        ("fig13", miss_rows, "d1", "Figure 13: D1 misses / baseline (cachegrind)", "ratio (lower is better)",
         "D1 misses of each configuration over those of the allocator it runs in front of (cachegrind, "
         "deterministic), as HALO's Figure 13."),
        ("fig14", speed_rows, "time", "Figure 14: time / baseline (median, p25-p75)", "ratio (lower is faster)",
         "Median time of each configuration over its baseline's, with the 25th-75th percentiles, as "
         "HALO's Figure 14 (a ratio of 0.9 is a 10% speed-up)."),
        ("fig15", control_rows, "time", "Figure 15: halo and the random control (time / baseline)",
         "ratio (lower is faster)",
         "HALO's plan against HALO's control, which sends each small object to one of four pools at "
         "random: what placement by affinity adds over pooling alone (HALO's Figure 15)."),
    ]
    try:
        from cohort.present.plots import suite_plot, sweep_plot
        plotting = True
    except ImportError:
        plotting = False
        lines += ["(matplotlib is missing: no plots)", ""]
    for key, rows, kind, heading, ylabel, words in figures:
        if not any(d for _, d in rows):
            continue
        lines += [f"## {heading.split(':')[0]}: {FIGURES[key]}", "", words, ""]
        if plotting and suite_plot(rows, pngs[key], kind, heading, ylabel, force):
            lines += [f"![{FIGURES[key]}]({pngs[key].name})", ""]
            written.append(pngs[key])
        names = list(dict.fromkeys(c for _, d in rows for c in d))
        lines += ["| workload | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
        for lab, d in rows:
            lines.append(f"| {lab} | " + " | ".join(
                (f"{d[c][0]:.3f}" + (f" ({d[c][1]:.2f}-{d[c][2]:.2f})" if kind == "time" else "")) if c in d else "-"
                for c in names) + " |")
        lines.append("")

    for param, series in sweeps.items():
        lines += [f"## Figure 12: {param} sweep", "",
                  f"halo's plan for each value of {param} (cohort bench --sweep), in front of the first "
                  "allocator: median time and D1 misses over that allocator's, as HALO's Figure 12.", ""]
        png = pngs[f"fig12-{param}"]
        if plotting and sweep_plot(series, png, param, force):
            lines += [f"![{param} sweep]({png.name})", ""]
            written.append(png)
        lines += [f"| workload | {param} | time | D1 |", "|---|---|---|---|"]
        for lab, points in series:
            for v, t, lo, hi, d1 in points:
                lines.append(f"| {lab} | {v:g} | {t:.3f} ({lo:.2f}-{hi:.2f}) | {fmt(d1)} |")
        lines.append("")

    frag_names = list(dict.fromkeys(n for r in runs for n in r["parameters"]["order"] if n in r["runtime_stats"]))
    if frag_names:
        lines += ["## Table 1: fragmentation at peak", "",
                  "Resident bytes of the groups' chunks less the bytes live in them, when live bytes "
                  "peaked, summed over the groups, and their share of those resident bytes (HALO's "
                  "Table 1); from each configuration's runtime statistics (docs/stats-format.md). "
                  "Baselines have none to report.", "",
                  "| workload | " + " | ".join(display(n) for n in frag_names) + " |",
                  "|" + "---|" * (len(frag_names) + 1)]
        for r in runs:
            cells = []
            for n in frag_names:
                st = r["runtime_stats"].get(n)
                cells.append(f"{st['fragmentation_at_peak_bytes']:,} B ({st['fragmentation_at_peak_percent']}%)"
                             if st else "-")
            lines.append(f"| {r['label']} | " + " | ".join(cells) + " |")
        lines.append("")
    ident_lines = []
    for r in runs:
        st = r["runtime_stats"].get(f"cohort+{allocs[0]}")
        if not st or not st.get("plan_active"):
            continue
        paths = ", ".join(f"{k} {v:,}" for k, v in st.get("identification", {}).items() if v)
        share = short_walk_share(st.get("frames_walked"))
        ident_lines.append(f"| {r['label']} | {paths or '-'} | "
                           + (f"{100 * share:.1f}%" if share is not None else "-") + " |")
    if ident_lines:
        lines += ["## Identification", "",
                  f"How the timed cohort+{allocs[0]} run decided each allocation (statistics paths: "
                  "docs/stats-format.md), and the share walked at most 3 frames past its entry.", "",
                  "| workload | paths | walked at most 3 frames |", "|---|---|---|"] + ident_lines + [""]
    lines.append("## Commands")
    lines.append("")
    for r in runs:
        c = r["commands"]
        lines.append(f"- **{r['label']}**: ref `{' '.join(map(str, c['ref']))}`"
                     + (f"; train `{' '.join(map(str, c['train']))}`" if "train" in c
                        else f"; plan `{r['plan']}`" if r.get("plan") else "")
                     + (f"; cachegrind `{' '.join(map(str, c['cachegrind']))}`" if "cachegrind" in c else ""))
    lines.append("")
    for r in runs:
        lines.append(f"### {r['label']}: medians")
        lines.append("")
        lines.append("| config | ok trials | median s | p25 | p75 | user s | max RSS KiB | D1 misses |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for name in r["parameters"]["order"]:
            s = r["summary"][name]
            d1 = (r["cachegrind"] or {}).get(name, {}).get("D1_misses")
            lines.append(f"| {name} | {s['ok_trials']} | {fmt(s['wall_median_s'])} | {fmt(s['wall_p25_s'])} | "
                         f"{fmt(s['wall_p75_s'])} | {fmt(s['user_median_s'])} | "
                         f"{int(s['max_rss_median_kb']) if s['max_rss_median_kb'] else '-'} | "
                         f"{f'{d1:,}' if d1 is not None else '-'} |")
        lines.append("")
    write_output(output, "\n".join(lines) + "\n", "report", force)
    return written
