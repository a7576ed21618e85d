"""`cohort report`: one Markdown report from one or more bench results
directories: per workload, speedup and D1-miss reduction against each
baseline with spreads, HALO's random control, and fragmentation at peak."""

from pathlib import Path

from cohort.bench import load_results
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


def plot_paths(output):
    """The plots a report at output draws beside it, named after it."""
    output = Path(output)
    return output.with_name(f"{output.stem}-speedup.png"), output.with_name(f"{output.stem}-misses.png")


def report(paths, output, title="Cohort benchmark report", force=False):
    """Write the report; returns the paths written (the report first)."""
    runs = [load_results(p) for p in paths]
    if not runs:
        raise CohortError("no results given")
    output = Path(output)
    speed_png, miss_png = plot_paths(output)
    for p, kind in ((output, "report"), (speed_png, "plot"), (miss_png, "plot")):
        claim(p, kind, force)
    for r, lab in zip(runs, labels(paths, runs)):
        r["label"] = lab
    written = [output]
    # One column per online policy that any run measured (halo's are the
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
    head = ["workload", "trials"]
    for a in allocs:
        head += [f"time vs {a}", f"D1 vs {a}"]
    head += [f"{p} (time, D1)" for p in online]
    head += ["random control (time, D1)", "one pool (time, D1)", "fragmentation at peak", "problems"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    speed_rows, miss_rows = [], []
    for r in runs:
        row = [r["label"], str(r["parameters"]["trials"])]
        srow, mrow = {}, {}
        for a in allocs:
            name = f"cohort+{a}"
            row += [fmt_time(r, name), fmt(_ratio(r, name, "d1_ratio"))]
            x = r["ratios"].get(name)
            if x:
                srow[name] = (x["time_ratio"], x["time_ratio_p25"], x["time_ratio_p75"])
                if "d1_ratio" in x:
                    mrow[name] = (x["d1_ratio"],) * 3
        for control in (*online, "random", "all"):
            x = r["ratios"].get(control)
            row.append(f"{fmt(_ratio(r, control))}, {fmt(_ratio(r, control, 'd1_ratio'))}" if x else "-")
            if x:
                srow[control] = (x["time_ratio"], x["time_ratio_p25"], x["time_ratio_p75"])
                if "d1_ratio" in x:
                    mrow[control] = (x["d1_ratio"],) * 3
        st = r["runtime_stats"].get(f"cohort+{allocs[0]}") or next(iter(r["runtime_stats"].values()), None)
        row.append(f"{st['fragmentation_at_peak_bytes']:,} B ({st['fragmentation_at_peak_percent']}%)"
                   if st else "-")
        row.append("; ".join(r["problems"]) if r["problems"] else "none")
        lines.append("| " + " | ".join(row) + " |")
        speed_rows.append((r["label"], srow))
        miss_rows.append((r["label"], mrow))
    lines.append("")
    try:
        from cohort.plots import suite_plot
        if suite_plot(speed_rows, speed_png, "time", "Time / baseline (median, p25-p75)",
                      "ratio (lower is faster)", force):
            lines += [f"![time ratios]({speed_png.name})", ""]
            written.append(speed_png)
        if any(m for _, m in miss_rows) and suite_plot(miss_rows, miss_png, "d1",
                                                       "D1 misses / baseline (cachegrind)", "ratio", force):
            lines += [f"![D1 miss ratios]({miss_png.name})", ""]
            written.append(miss_png)
    except ImportError:
        lines += ["(matplotlib is missing: no plots)", ""]
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
