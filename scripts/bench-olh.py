"""Object-Local Heaps against malloc, realloc, linked lists, C arrays,
std::vector and std::map: the thesis's section 6 on this machine, side by
side in one run (`make bench-olh`). Every configuration is its own run of
build/olh/olhbench, the configurations interleaved trial by trial; medians
with quartiles, and ratios to the section's baseline measured in the same
trials.

- alloc: N one-byte objects, malloc against olh_alloc (thesis 6.2).
- grow: two arrays grown one byte at a time, realloc against olh_grow.
- iterate: a list of N two-field elements built with unrelated allocations
  in between at probability P, walked summing one field: a malloc'd list,
  a C array, a std::vector, the OLH list walked by references, and the OLH
  pool mapped run by run (thesis 6.3, Figure 10).
- fragment: a list of N elements, D of them deleted at random, then walked:
  the malloc'd list, a std::vector (compacted), the OLH list, and the OLH
  list after one collection, walked and mapped; the collection is timed on
  its own (6.4-6.5, Figures 11, 13 and 14).
- tree: N random keys inserted into a binary search tree and looked up:
  std::map against OLH trees in split, unsplit and grouped pools (the key
  and both children side by side, the value apart), the grouped tree also
  after a collection in depth-first and in block order (6.6, Figure 15).

Usage: .venv/bin/python scripts/bench-olh.py [TRIALS] [SECTION ...]
(default 7 trials, every section). OLH_N (default 1000000) sets N for
iterate, fragment and tree; alloc uses 4 N, grow N. Writes results/olh.md
and results/olh.png (BENCH_RESULTS sets the directory)."""

import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cohort.measure.bench import chosen_names, publish, script_arguments, whole_number  # noqa: E402
from cohort.measure.runs import clean_environment  # noqa: E402
from cohort.measure.stats import spread  # noqa: E402

BENCH = ROOT / "build" / "olh" / "olhbench"
KNOWN = ["alloc", "grow", "iterate", "fragment", "tree"]
TRIALS, SECTIONS = script_arguments(sys.argv, __doc__, 7)
SECTIONS = chosen_names(SECTIONS, KNOWN, "a section", sys.argv[0])
N = whole_number(os.environ.get("OLH_N", "1000000"), "OLH_N", sys.argv[0], least=1000)
RESULTS = Path(os.environ.get("BENCH_RESULTS", ROOT / "results"))
NOISE = [0.0, 0.1, 0.25, 0.5]
DELETE = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]
REPS = 10


def configs(section):
    """(row, column, argv, elements): the first column of each row is its
    baseline. The walks of iterate and fragment are repeated REPS times."""
    if section == "alloc":
        return [("alloc", v, ["alloc", v, 4 * N], 4 * N) for v in ("malloc", "olh")]
    if section == "grow":
        return [("grow", v, ["grow", v, N], N) for v in ("realloc", "olh")]
    if section == "iterate":
        return [(f"P={p}", v, ["list", v, N, p, 0, REPS], N)
                for p in NOISE for v in ("array", "list", "vector", "olh", "olh-map")]
    if section == "fragment":
        return [(f"D={d}", v, ["list", v, N, 0, d, REPS], max(1, round(N * (1 - d))))
                for d in DELETE for v in ("list", "vector", "olh", "olh-collected", "olh-collected-map")]
    return [("tree", v, ["tree", v, N], N)
            for v in ("map", "olh-split", "olh-unsplit", "olh-grouped", "olh-grouped-depth",
                      "olh-grouped-blocks")]


def measure(argv):
    """{phase: ns} of one run."""
    cmd = [str(BENCH), *map(str, argv)]
    r = subprocess.run(cmd, env=clean_environment(), capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise SystemExit(f"bench-olh: {' '.join(cmd)} failed (exit {r.returncode}): "
                         f"{r.stderr.strip()[-300:]}")
    got = {}
    for line in r.stdout.splitlines():
        phase, _, ns = line.partition(" ")
        if ns.strip().isdigit():
            got[phase] = int(ns)
    if not got:
        raise SystemExit(f"bench-olh: no timing from {' '.join(cmd)}")
    return got


def grid(section):
    """(configurations, row names, column names) of a section, in order."""
    rows = configs(section)
    return (rows, list(dict.fromkeys(r for r, _, _, _ in rows)),
            list(dict.fromkeys(c for _, c, _, _ in rows)))


def per_element(rows, phase):
    """{(row, column): elements one timed phase handles}."""
    reps = REPS if phase == "iterate" else 1
    return {(r, c): n * reps for r, c, _, n in rows}


def table(section, got):
    """Markdown rows: per row and column, ns per element of each phase."""
    rows, order, cols = grid(section)
    phases = list(dict.fromkeys(p for (s, r, c, p) in got if s == section))
    lines = []
    for phase in phases:
        per = per_element(rows, phase)
        present = [c for c in cols if (section, order[0], c, phase) in got]
        if not present:
            continue
        base = present[0]
        lines += [f"### {phase}: ns per element, median (p25-p75), and x {base}", "",
                  "| | " + " | ".join(present) + " |", "|---" * (len(present) + 1) + "|"]
        for r in order:
            if (section, r, base, phase) not in got:
                continue
            b = statistics.median(got[(section, r, base, phase)]) / per[(r, base)]
            cells = []
            for c in present:
                values = got.get((section, r, c, phase))
                if not values:
                    cells.append("")
                    continue
                lo, med, hi = (v / per[(r, c)] for v in spread(values))
                cells.append(f"{med:.3g} ({lo:.3g}-{hi:.3g}) x{med / b:.2f}")
            lines.append(f"| {r} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def plot(got, path):
    """One figure: a panel per section that ran."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = list(SECTIONS)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, section in zip(axes[0], panels):
        rows, order, cols = grid(section)
        phase = {"alloc": "alloc", "grow": "grow", "tree": "lookup"}.get(section, "iterate")
        per = per_element(rows, phase)
        if section in ("iterate", "fragment"):
            xs = [float(r.split("=")[1]) for r in order]
            for c in cols:
                ys = [statistics.median(got[(section, r, c, phase)]) / per[(r, c)] for r in order]
                ax.plot(xs, ys, marker="o", label=c)
            ax.set_xlabel("unrelated allocations (P)" if section == "iterate" else "deleted (D)")
            ax.set_yscale("log")
        else:
            ys = [statistics.median(got[(section, order[0], c, phase)]) / per[(order[0], c)] for c in cols]
            ax.bar(range(len(cols)), ys, color="#4c72b0")
            ax.set_xticks(range(len(cols)))
            ax.set_xticklabels(cols, rotation=30, ha="right", fontsize=7)
        ax.set_title(f"{section} ({phase})")
        ax.set_ylabel("ns per element")
        if section in ("iterate", "fragment"):
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    if not BENCH.exists():
        raise SystemExit(f"bench-olh: {BENCH} is not built (make build)")
    got = {}
    for trial in range(TRIALS):
        for section in SECTIONS:
            for row, col, argv, _ in configs(section):
                for phase, ns in measure(argv).items():
                    got.setdefault((section, row, col, phase), []).append(ns)
        print(f"bench-olh: trial {trial + 1} of {TRIALS} done", flush=True)
    lines = [f"# Object-Local Heaps, the thesis's section 6 (`scripts/bench-olh.py {TRIALS}`)", "",
             f"{TRIALS} interleaved trials, N = {N}; ns per element of the timed phase, median "
             "(p25-p75); x: median over the baseline's median (the first column) in the same "
             "row (below 1: faster). Plot: olh.png.", ""]
    for section in SECTIONS:
        lines += [f"## {section}", ""] + table(section, got)
    if "fragment" in SECTIONS:
        lines += amortised(got)
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(got, RESULTS / "olh.png")
    publish("\n".join(lines), RESULTS / "olh.md", __file__)


def amortised(got):
    """Figures 13 and 14: the collected list against the uncollected one and
    the vector, with the collection free (amortised over many walks) and
    paid by a single walk."""
    lines = ["## fragment: collecting, amortised and not (Figures 13 and 14)", "",
             "Time of one pass over the collected list, walked or mapped, over other structures' "
             "(the collection free: amortised over many passes); then with the collection paid by "
             "a single walk.", "",
             "| | walk after collection x list | x OLH list uncollected | map after collection "
             "x vector | collection + one walk x list | x OLH list uncollected |",
             "|---|---|---|---|---|---|"]
    for d in DELETE:
        r = f"D={d}"
        med = {c: statistics.median(got[("fragment", r, c, "iterate")]) / REPS
               for c in ("list", "vector", "olh", "olh-collected", "olh-collected-map")}
        gc = statistics.median(got[("fragment", r, "olh-collected", "collect")])
        once = gc + med["olh-collected"]
        lines.append(f"| {r} | {med['olh-collected'] / med['list']:.3f} | "
                     f"{med['olh-collected'] / med['olh']:.3f} | "
                     f"{med['olh-collected-map'] / med['vector']:.3f} | "
                     f"{once / med['list']:.3f} | {once / med['olh']:.3f} |")
    lines.append("")
    return lines


if __name__ == "__main__":
    main()
