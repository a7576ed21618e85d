"""The explicit pool API against malloc and free (issue 14), side by side in
one run: interleaved trials, medians with quartiles, ratios to glibc.

- processlist (APA's Figure 1, examples/pools): N nodes cloned into two
  lists, each walked and freed, ROUNDS times. malloc under glibc and
  jemalloc (processlist-plain, linked with nothing), against pools with
  poolfree loops and pools with pooldestroy alone (processlist, -lcohort).
  Wall time of the whole run.
- poolbench churn: 100 objects allocated, written and freed, over and over;
  ns per object (allocation + free), poolalloc/poolfree against
  malloc/free under glibc and jemalloc.
- poolbench release: N objects, then one pooldestroy against N frees; the
  release alone, in microseconds.

Usage: .venv/bin/python scripts/bench-pools.py [TRIALS] [SECTION ...]
with sections processlist, churn, release (default: all). POOLS_NODES
(default 2000000), POOLS_ROUNDS (5), POOLS_OBJECTS (1000000) and
POOLS_SIZE (32) set the sizes. Writes results/pools.md (BENCH_RESULTS sets
the directory)."""

import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cohort.measure.bench import chosen_names, publish, script_arguments, whole_number  # noqa: E402
from cohort.measure.runs import clean_environment  # noqa: E402
from cohort.measure.stats import spread  # noqa: E402
from cohort.paths import allocator_library  # noqa: E402

EX = ROOT / "build" / "examples" / "pools"
LIB = ROOT / "build" / "runtime" / "libcohort.so"
KNOWN = ["processlist", "churn", "release"]
TRIALS, SECTIONS = script_arguments(sys.argv, __doc__, 11)
SECTIONS = chosen_names(SECTIONS, KNOWN, "a section", sys.argv[0])
NODES = whole_number(os.environ.get("POOLS_NODES", "2000000"), "POOLS_NODES", sys.argv[0], least=1)
ROUNDS = whole_number(os.environ.get("POOLS_ROUNDS", "5"), "POOLS_ROUNDS", sys.argv[0], least=1)
OBJECTS = whole_number(os.environ.get("POOLS_OBJECTS", "1000000"), "POOLS_OBJECTS", sys.argv[0], least=1)
SIZE = whole_number(os.environ.get("POOLS_SIZE", "32"), "POOLS_SIZE", sys.argv[0], least=8)
RESULTS = Path(os.environ.get("BENCH_RESULTS", ROOT / "results"))
NS = re.compile(r": ([\d.]+) ns")


def env(preload):
    base = clean_environment()
    if preload == "jemalloc":
        base["LD_PRELOAD"] = str(allocator_library("jemalloc"))
    elif preload == "cohort":
        base["LD_PRELOAD"] = str(LIB)
    return base


# (label, argv, preload): one configuration of a section
def configs(section):
    if section == "processlist":
        n, r = str(NODES), str(ROUNDS)
        return [("malloc, glibc", [EX / "processlist-plain", "malloc", n, r], None),
                ("malloc, jemalloc", [EX / "processlist-plain", "malloc", n, r], "jemalloc"),
                ("pools, poolfree loops", [EX / "processlist", "pools", n, r], None),
                ("pools, pooldestroy alone", [EX / "processlist", "destroy", n, r], None)]
    count = str(OBJECTS if section == "release" else max(1, OBJECTS // 100))
    size = str(SIZE)
    return [("malloc/free, glibc", [EX / "poolbench", section, "malloc", size, count], None),
            ("malloc/free, jemalloc", [EX / "poolbench", section, "malloc", size, count], "jemalloc"),
            ("pool", [EX / "poolbench", section, "pool", size, count], "cohort")]


def measure(section, argv, preload):
    t0 = time.perf_counter()
    r = subprocess.run([str(a) for a in argv], env=env(preload), capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(f"bench-pools: {' '.join(map(str, argv))} failed (exit {r.returncode}): "
                         f"{r.stderr.strip()[-300:]}")
    if section == "processlist":
        return wall, r.stdout
    m = NS.search(r.stdout)
    if not m:
        raise SystemExit(f"bench-pools: no timing in {r.stdout.strip()!r}")
    v = float(m.group(1))
    return (v / 1000 if section == "release" else v), None


def main():
    for b in ["processlist", "processlist-plain", "poolbench"]:
        if not (EX / b).exists():
            raise SystemExit(f"bench-pools: {EX / b} is not built (make build)")
    got, outputs = {}, {}
    for trial in range(TRIALS):
        for section in SECTIONS:
            for label, argv, preload in configs(section):
                v, out = measure(section, argv, preload)
                got.setdefault((section, label), []).append(v)
                if out is not None:
                    outputs.setdefault(out, []).append(label)
        print(f"bench-pools: trial {trial + 1} of {TRIALS} done", flush=True)
    if len(outputs) > 1:
        raise SystemExit("bench-pools: processlist's outputs differ between configurations")
    units = {"processlist": "s (whole run)", "churn": "ns per object", "release": "us (the release alone)"}
    what = {"processlist": f"processlist MODE {NODES} {ROUNDS}",
            "churn": f"poolbench churn ALLOCATOR {SIZE} {max(1, OBJECTS // 100)}",
            "release": f"poolbench release ALLOCATOR {SIZE} {OBJECTS}"}
    lines = [f"# The pool API against malloc (`scripts/bench-pools.py {TRIALS}`)", "",
             f"{TRIALS} interleaved trials; median (p25-p75); x: median over glibc's median "
             "(below 1: cheaper)", ""]
    for section in SECTIONS:
        lines += [f"## {section}: `{what[section]}`, {units[section]}", "",
                  "| configuration | median (p25-p75) | x glibc |", "|---|---|---|"]
        rows = configs(section)
        base = statistics.median(got[(section, rows[0][0])])
        for label, _, _ in rows:
            lo, med, hi = spread(got[(section, label)])
            lines.append(f"| {label} | {med:.3g} ({lo:.3g}-{hi:.3g}) | {med / base:.3f} |")
        lines.append("")
    publish("\n".join(lines), RESULTS / "pools.md", __file__)


if __name__ == "__main__":
    main()
