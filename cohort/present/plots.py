"""PNG plots of bench results (matplotlib, no display needed). Each PNG
carries Software=cohort in a text chunk, so that a later run knows it may
replace it (cohort/files.py)."""

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from cohort import __version__  # noqa: E402
from cohort.files import PLOT_SOFTWARE, write_output  # noqa: E402


def _save(fig, path, force):
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": f"{PLOT_SOFTWARE} {__version__}"})
    plt.close(fig)
    write_output(path, buf.getvalue(), "plot", force)


def _bars(ax, labels, values, lows=None, highs=None, title="", ylabel=""):
    xs = range(len(labels))
    yerr = None
    if lows is not None:
        yerr = [[max(v - lo, 0) for v, lo in zip(values, lows)], [max(hi - v, 0) for v, hi in zip(values, highs)]]
    colours = ["#2ca02c" if v < 1 else "#d62728" for v in values]
    ax.bar(xs, values, yerr=yerr, capsize=4, color=colours)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)


def bench_plots(results, outdir, force=False):
    """speedup.png and misses.png for one results.json; returns the paths drawn."""
    ratios = results["ratios"]
    names = [n for n in results["parameters"]["order"] if n in ratios]
    drawn = []
    if not names:
        return drawn
    labels = [f"{n}\nvs {ratios[n]['vs']}" for n in names]
    fig, ax = plt.subplots(figsize=(6, 4))
    _bars(ax, labels, [ratios[n]["time_ratio"] for n in names], [ratios[n]["time_ratio_p25"] for n in names],
          [ratios[n]["time_ratio_p75"] for n in names],
          f"{results['workload']}: time / baseline (median, p25-p75)", "ratio (lower is faster)")
    _save(fig, f"{outdir}/speedup.png", force)
    drawn.append(f"{outdir}/speedup.png")
    d1 = [n for n in names if "d1_ratio" in ratios[n]]
    if d1:
        fig, ax = plt.subplots(figsize=(6, 4))
        _bars(ax, [f"{n}\nvs {ratios[n]['vs']}" for n in d1], [ratios[n]["d1_ratio"] for n in d1],
              title=f"{results['workload']}: D1 misses / baseline (cachegrind)", ylabel="ratio (lower is better)")
        _save(fig, f"{outdir}/misses.png", force)
        drawn.append(f"{outdir}/misses.png")
    return drawn


def suite_plot(rows, path, key, title, ylabel, force=False):
    """One grouped bar chart over workloads: rows = [(workload, {config: (v, lo, hi)})]."""
    configs = sorted({c for _, d in rows for c in d})
    if not rows or not configs:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(rows) * len(configs) / 2), 4))
    width = 0.8 / len(configs)
    for i, c in enumerate(configs):
        xs = [j + i * width for j in range(len(rows))]
        vals = [d.get(c, (float("nan"),) * 3) for _, d in rows]
        v = [x[0] for x in vals]
        err = [[max(x[0] - x[1], 0) for x in vals], [max(x[2] - x[0], 0) for x in vals]]
        ax.bar(xs, v, width, yerr=err, capsize=3, label=c)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + width * (len(configs) - 1) / 2 for j in range(len(rows))])
    ax.set_xticklabels([w for w, _ in rows], rotation=20, ha="right")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    _save(fig, path, force)
    return True


def sweep_plot(series, path, parameter, force=False):
    """HALO's Figure 12: time and D1 misses over the baseline against one
    parameter's values, a line per workload. series: [(workload, [(value,
    time, p25, p75, d1 or None)])]. A parameter whose values double is drawn
    on a log-2 axis."""
    if not series:
        return False
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 6), sharex=True)
    log2 = False
    for label, points in series:
        xs = [p[0] for p in points]
        if len(xs) > 2 and all(x > 0 for x in xs) and max(xs) / min(xs) >= 8:
            log2 = True
        top.errorbar(xs, [p[1] for p in points], capsize=3, marker="o", label=label,
                     yerr=[[max(p[1] - p[2], 0) for p in points], [max(p[3] - p[1], 0) for p in points]])
        d1 = [(p[0], p[4]) for p in points if p[4] is not None]
        if d1:
            bottom.plot([x for x, _ in d1], [y for _, y in d1], marker="o", label=label)
    for ax in (top, bottom):
        ax.axhline(1.0, color="black", linewidth=0.8)
        if log2:
            ax.set_xscale("log", base=2)
    top.set_title(f"Figure 12: {parameter} sweep")
    top.set_ylabel("time / baseline")
    bottom.set_ylabel("D1 misses / baseline")
    bottom.set_xlabel(parameter)
    top.legend(fontsize=8)
    _save(fig, path, force)
    return True
