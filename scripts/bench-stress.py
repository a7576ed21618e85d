"""Allocation stress with blocks handed between threads (issue 20): the
prodcons workload's four shapes (ring, split, relay, larson) at 1, 2 and 8 threads,
under glibc, jemalloc, mimalloc, libcohort passing every call through
(COHORT_MODE=off: the baseline the grouped modes answer to), with every
small allocation grouped (COHORT_MODE=all) and the random-pools control.
Interleaved trials; medians
with quartiles of the workload's own ops/s, the ratio to glibc's median, and
fragmentation at peak: the runtime's own (1 - live/resident of its chunks,
from COHORT_STATS) and the process's (1 - live/resident added, which also
counts thread stacks, spare chunks and each allocator's metadata).

Usage: .venv/bin/python scripts/bench-stress.py [TRIALS] [SHAPE ...]
STRESS_THREADS (default "1 2 8"), STRESS_DEPTHS (queue depth in batches,
which sets the live set; default "256 2048": about 1 MB and 6 to 80 MB live,
the second near the 12.5 MB of the stress test that opened issue 20) and
STRESS_BATCHES (per run, split between the threads; default 120000) narrow it
down. Writes results/stress.md
(BENCH_RESULTS sets the directory)."""

import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cohort.measure.bench import chosen_names, publish, script_arguments, whole_number, whole_numbers
from cohort.measure.runs import clean_environment
from cohort.measure.stats import spread
from cohort.paths import allocator_library  # noqa: E402
from cohort.measure.runner import environment  # noqa: E402

BIN = ROOT / "build" / "workloads" / "prodcons"
KNOWN_SHAPES = ["ring", "split", "relay", "larson"]
TRIALS, SHAPES = script_arguments(sys.argv, __doc__, 5)
SHAPES = chosen_names(SHAPES, KNOWN_SHAPES, "a shape of prodcons", sys.argv[0])
THREADS = whole_numbers(os.environ.get("STRESS_THREADS", "1 2 8"), "STRESS_THREADS", sys.argv[0], least=1)
DEPTHS = whole_numbers(os.environ.get("STRESS_DEPTHS", "256 2048"), "STRESS_DEPTHS", sys.argv[0], least=1)
BATCHES = whole_number(os.environ.get("STRESS_BATCHES", "120000"), "STRESS_BATCHES", sys.argv[0], least=1)
CASES = list(itertools.product(SHAPES, DEPTHS, THREADS))
RESULTS = Path(os.environ.get("BENCH_RESULTS", ROOT / "results"))
ALLOCATORS = ["glibc", "jemalloc", "mimalloc", "cohort off", "cohort all", "cohort random:4"]
GROUPED = ("cohort all", "cohort random:4")
LINE = re.compile(r"([\d.]+) M ops/s, peak live ([\d.]+) MiB, peak resident added ([\d.]+) MiB, "
                  r"fragmentation ([\d.]+)%")


def env_for(allocator, stats):
    base = clean_environment()
    if allocator == "glibc":
        return base
    if allocator in ("jemalloc", "mimalloc"):
        return {**base, "LD_PRELOAD": str(allocator_library(allocator))}
    return environment(mode=allocator.split()[1], stats=stats if allocator != "cohort off" else None, base=base)


def run(shape, threads, depth, allocator, stats):
    argv = [str(BIN), shape, str(threads), str(max(1, BATCHES // threads)), str(depth)]
    r = subprocess.run(argv, env=env_for(allocator, stats), capture_output=True, text=True, timeout=600)
    m = LINE.search(r.stderr)
    if r.returncode or not m:
        raise SystemExit(f"bench-stress: {' '.join(argv)} under {allocator} failed "
                         f"(exit {r.returncode}): {r.stderr.strip()[-300:]}")
    ops, _live, _added, process_frag = map(float, m.groups())
    runtime_frag = None
    if stats and Path(stats).exists():
        groups = json.loads(Path(stats).read_text())["groups"]
        live = sum(g["peak_live_bytes"] for g in groups)
        resident = sum(g["resident_at_peak_bytes"] for g in groups)
        runtime_frag = 100.0 * (1 - live / resident) if resident else 0.0
        Path(stats).unlink()
    return ops, process_frag, runtime_frag


def main():
    if not BIN.exists():
        raise SystemExit(f"bench-stress: {BIN} is not built (make build)")
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        stats = str(Path(tmp) / "stats.json")
        for trial in range(TRIALS):
            for shape, depth, threads in CASES:
                for allocator in ALLOCATORS:
                    s = stats if allocator.startswith("cohort") else None
                    got.setdefault((shape, depth, threads, allocator), []).append(
                        run(shape, threads, depth, allocator, s))
            print(f"bench-stress: trial {trial + 1} of {TRIALS} done", flush=True)
    lines = [f"# Cross-thread allocation stress (`scripts/bench-stress.py {TRIALS}`)", "",
             f"prodcons SHAPE THREADS {BATCHES}/THREADS DEPTH; {TRIALS} interleaved trials; "
             "ops/s median (p25-p75); x: median over glibc's median, and the grouped modes' over "
             "pass-through's (cohort off); fragmentation at peak, medians: "
             "the runtime's chunks, and the process (resident it added)", "",
             "| shape | depth | threads | allocator | M ops/s | x glibc | x pass-through | runtime frag. | "
             "process frag. |",
             "|---|---|---|---|---|---|---|---|---|"]
    for shape, depth, threads in CASES:
        base = statistics.median(r[0] for r in got[(shape, depth, threads, "glibc")])
        off = statistics.median(r[0] for r in got[(shape, depth, threads, "cohort off")])
        for allocator in ALLOCATORS:
            rows = got[(shape, depth, threads, allocator)]
            lo, med, hi = spread([r[0] for r in rows])
            rf = [r[2] for r in rows if r[2] is not None]
            runtime = f"{statistics.median(rf):.1f}%" if rf else "-"
            process = f"{statistics.median(r[1] for r in rows):.1f}%"
            lines.append(f"| {shape} | {depth} | {threads} | {allocator} | {med:.1f} ({lo:.1f}-{hi:.1f}) | "
                         f"{med / base:.2f} | {f'{med / off:.2f}' if allocator in GROUPED else '-'} | "
                         f"{runtime} | {process} |")
    publish("\n".join(lines) + "\n", RESULTS / "stress.md", __file__)


if __name__ == "__main__":
    main()
