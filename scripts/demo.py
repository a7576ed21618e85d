"""make demo: Cohort's runtime on the bundled `tokens` workload (HALO's
Figure 2 pattern), against glibc and jemalloc, side by side.

Until the profiler and planner exist, the plan is written by hand from the
workload's known call sites (cohort/handplan.py): group the objects made by
new_token and new_attr, mark new_note's allocation cold."""

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cohort.handplan import call_sites, write_plan  # noqa: E402
from cohort.runner import environment  # noqa: E402

BIN = ROOT / "build" / "workloads" / "tokens"
OUT = ROOT / "demo-out"
TRIALS = int(os.environ.get("DEMO_TRIALS", "5"))
CACHE = ["--D1=32768,8,64", "--LL=1048576,16,64"]


def inputs():
    table = {}
    for line in (ROOT / "workloads" / "tokens" / "inputs").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, args = line.split(":", 1)
            table[name.strip()] = args.split()
    return table


def configs(plan, stats):
    return {
        "glibc": environment(allocator="glibc", mode="off"),
        "jemalloc": environment(allocator="jemalloc", mode="off"),
        "cohort": environment(plan=plan, allocator="glibc", stats=stats),
    }


def timed(argv, env):
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"demo: {argv[0]} failed ({r.returncode}): {r.stderr.decode()[-300:]}")
    return dt, r.stdout


def d1_misses(argv, env):
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHE,
                        "--cachegrind-out-file=/dev/null", *argv], env=env, capture_output=True)
    err = r.stderr.decode()
    m = re.search(r"D1  misses:\s+([\d,]+)", err)
    if r.returncode != 0 or not m:
        sys.exit(f"demo: cachegrind failed: {err[-400:]}")
    return int(m.group(1).replace(",", "")), r.stdout


def main():
    OUT.mkdir(exist_ok=True)
    plan = OUT / "tokens.plan"
    sites = [(0, call_sites(BIN, "main", "new_token")[0], None),
             (0, call_sites(BIN, "main", "new_attr")[0], None),
             (0, call_sites(BIN, "new_note", "malloc")[0], "cold")]
    write_plan(plan, [BIN], sites, ["tokens+attrs"], [(0, [0]), (0, [1])])
    stats = OUT / "stats.json"
    envs = configs(plan, stats)
    inp = inputs()
    ref = [str(BIN), *inp["ref"]]
    print(f"workload: tokens {' '.join(inp['ref'])} (ref), {TRIALS} interleaved trials each")
    print(f"plan:     {plan} (group tokens and attrs; notes stay with the next allocator)")

    times = {k: [] for k in envs}
    outputs = {}
    timed(ref, envs["glibc"])  # warm-up
    for _ in range(TRIALS):
        for name, env in envs.items():
            dt, out = timed(ref, env)
            times[name].append(dt)
            outputs.setdefault(name, out)
    same = len(set(outputs.values())) == 1

    cg = [str(BIN), *inp["cachegrind"]]
    misses = {name: d1_misses(cg, env)[0] for name, env in envs.items()}

    base = statistics.median(times["glibc"])
    print()
    print(f"{'allocator':<10} {'median s':>9} {'vs glibc':>9} {'D1 misses':>12} {'vs glibc':>9}")
    for name in envs:
        med = statistics.median(times[name])
        print(f"{name:<10} {med:9.3f} {med / base:9.2f} {misses[name]:12,d} "
              f"{misses[name] / misses['glibc']:9.2f}")
    print(f"\noutput identical across allocators: {'yes' if same else 'NO'}")
    st = json.loads(stats.read_text())
    g = st["groups"][0]
    print(f"cohort group '{g['name']}': {g['allocations']:,} objects, peak {g['peak_live_bytes']:,} B live, "
          f"fragmentation at peak {g['fragmentation_at_peak_percent']}%; "
          f"identification: {st['identification']['walk_group']:,} grouped by walk, "
          f"{st['identification']['cold']:,} rejected by the quick test")
    print(f"(cache geometry: D1 32 KiB 8-way, LL 1 MiB 16-way, 64 B lines; cachegrind input: tokens {' '.join(inp['cachegrind'])})")
    if not same:
        sys.exit("demo: outputs differ")


if __name__ == "__main__":
    main()
