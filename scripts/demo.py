"""make demo: Cohort's whole pipeline on the bundled `tokens` workload (HALO's
Figure 2 pattern: three object types made by their own constructors in one
interleaved loop, then only two of them walked again and again).

  cohort profile (train input) -> cohort plan -> cohort explain -> run the ref
  input under glibc, jemalloc, mimalloc and Cohort, side by side: time (interleaved
  trials, medians), cachegrind D1 misses, and whether the output is identical.

Another bundled workload runs the same way: scripts/demo.sh wrapped."""

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

from cohort.plan import headroom  # noqa: E402
from cohort.present.explain import explain  # noqa: E402
from cohort.files import write_output  # noqa: E402
from cohort.plan.planner import PLAN_DEFAULTS, plan_command, report  # noqa: E402
from cohort.present.report import short_walk_share  # noqa: E402
from cohort.measure.profile import profile, summary  # noqa: E402
from cohort.measure.runs import CACHEGRIND_GEOMETRY  # noqa: E402
from cohort.measure.bench import whole_number  # noqa: E402
from cohort.measure.runner import environment  # noqa: E402
from cohort.measure.workloads import inputs as workload_inputs  # noqa: E402

WORKLOAD = sys.argv[1] if len(sys.argv) > 1 else "tokens"
BIN = ROOT / "build" / "workloads" / WORKLOAD
OUT = Path(os.environ.get("DEMO_OUT", ROOT / "demo-out")).resolve() / WORKLOAD
TRIALS = whole_number(os.environ.get("DEMO_TRIALS", "7"), "DEMO_TRIALS", sys.argv[0], least=1)


def shown(path):
    """A path as the user would type it: relative to the checkout, if inside."""
    try:
        return path.relative_to(ROOT)
    except ValueError:
        return path


def inputs():
    return workload_inputs(WORKLOAD)


def configs(plan, stats):
    return {
        "glibc": environment(allocator="glibc", mode="off"),
        "jemalloc": environment(allocator="jemalloc", mode="off"),
        "mimalloc": environment(allocator="mimalloc", mode="off"),
        "cohort+glibc": environment(plan=plan, allocator="glibc", stats=stats),
        # HALO's control: each small allocation to one of four pools at random
        "random": environment(allocator="glibc", mode="random:4"),
        # every small allocation in one pool: what a plan must beat
        "all": environment(allocator="glibc", mode="all"),
    }


def timed(argv, env):
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"demo: {argv[0]} failed ({r.returncode}): {r.stderr.decode()[-300:]}")
    return dt, r.stdout


def d1_misses(argv, env):
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHEGRIND_GEOMETRY,
                        "--cachegrind-out-file=/dev/null", *argv], env=env, capture_output=True)
    err = r.stderr.decode()
    m = re.search(r"D1  misses:\s+([\d,]+)", err)
    if r.returncode != 0 or not m:
        sys.exit(f"demo: cachegrind failed: {err[-400:]}")
    return int(m.group(1).replace(",", "")), r.stdout


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    inp = inputs()
    prof, plan = OUT / "profile.json", OUT / "plan"
    print(f"1. cohort profile -o {shown(prof)} -- {WORKLOAD} {' '.join(inp['train'])}   (train input)")
    data, rc = profile([str(BIN), *inp["train"]], prof, force=True)
    print("   " + summary(data, rc).replace("cohort: ", "").replace("\n", "\n   "))
    print("   " + headroom.line(data))
    print(f"2. cohort plan {shown(prof)} -o {shown(plan)}")
    made, _ = plan_command(prof, plan, force=True, **PLAN_DEFAULTS)
    print("   " + report(made, data).replace("\n", "\n   "))
    graph = OUT / "graph.svg"
    write_output(OUT / "explain.txt", explain(prof, plan, graph_path=graph, force=True), "explain", True)
    print(f"3. cohort explain: {shown(OUT / 'explain.txt')}, affinity graph in "
          f"{shown(graph)}")
    stats = OUT / "stats.json"
    envs = configs(plan, stats)
    ref = [str(BIN), *inp["ref"]]
    print(f"4. {WORKLOAD} {' '.join(inp['ref'])} (ref input): {TRIALS} interleaved trials per allocator")

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
    print(f"{'config':<13} {'median s':>9} {'vs glibc':>9} {'D1 misses':>12} {'vs glibc':>9}")
    for name in envs:
        med = statistics.median(times[name])
        print(f"{name:<13} {med:9.3f} {med / base:9.2f} {misses[name]:12,d} "
              f"{misses[name] / misses['glibc']:9.2f}")
    print("(random: HALO's control, every small object in one of 4 pools at random; "
          "all: every small object in one pool)")
    print(f"\noutput identical across allocators: {'yes' if same else 'NO'}")
    st = json.loads(stats.read_text())
    print(f"runtime statistics of the last Cohort run ({WORKLOAD} {' '.join(inp['cachegrind'])}, under cachegrind):")
    for g in st["groups"]:
        print(f"cohort group '{g['name']}': {g['allocations']:,} objects, peak {g['peak_live_bytes']:,} B live, "
              f"fragmentation at peak {g['fragmentation_at_peak_percent']}%")
    ident = st["identification"]
    print(f"identification: {ident.get('direct', 0):,} through call sites patched to reach their group directly, "
          f"{ident['entry']:,} grouped by their entry site alone, "
          f"{ident.get('patched', 0):,} decided from the bits of patched call sites (no walk), "
          f"{ident.get('path', 0):,} by a decision path, "
          f"{ident.get('stop', 0):,} by a walk that ended at a stop site, "
          f"{ident['walk_group']:,} by a full walk, {ident['walk_none']:,} walked and matching no selector, "
          f"{ident['cold']:,} turned away by the quick test (both go to the rest pool, if the plan has one)")
    share = short_walk_share(st.get("frames_walked"))
    if share is not None:
        print(f"frames walked past the entry: at most 3 for {100 * share:.1f}% of allocations")
    patch = st.get("patch")
    if patch and patch.get("sites_patched", 0) + patch.get("sites_unpatched", 0):
        print(f"selector call sites patched: {patch['sites_patched']}, left to the walk: {patch['sites_unpatched']}")
    if patch and patch.get("direct_sites", 0) + patch.get("direct_left", 0):
        print(f"allocation call sites patched to reach their group directly: {patch['direct_sites']}, "
              f"left as they were: {patch['direct_left']}")
    print(f"(cache geometry: D1 32 KiB 8-way, LL 1 MiB 16-way, 64 B lines; cachegrind input: {WORKLOAD} {' '.join(inp['cachegrind'])})")
    if not same:
        sys.exit("demo: outputs differ")


if __name__ == "__main__":
    main()
