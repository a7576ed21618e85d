"""make bench-stock: stock Debian programs (stock/programs.py), each trained
small and run large through `cohort bench` (profile on train, plan, time on
ref, cachegrind on the mid input), then one report: results/stock/report.md,
whose checks say where a Cohort configuration is slower than its baseline
beyond noise.

Each program is profiled on one small input (train), as `cohort optimize`
is by default. BENCH_TRAINS=2 also profiles a second small input of another
size (train2), as docs/planner.md ("A miss at the run's scale") asks of a
user who does not know the production input's scale: the plan is made from
the first, how each context grows is fitted on the second, and groups that
do not transfer to it are dropped.

Usage: .venv/bin/python scripts/bench-stock.py [TRIALS] [PROGRAM ...]
BENCH_RESULTS (default results/stock), BENCH_POLICIES (default halo,rest)
and BENCH_ALLOCATORS (default glibc,jemalloc,mimalloc) choose where and
what; BENCH_CONFIRM=1 also confirms each plan on the mid input before timing
it (`cohort bench --confirm`)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cohort.measure.bench import chosen_names, report_runs, script_arguments  # noqa: E402
from stock import programs  # noqa: E402

COHORT = ROOT / "bin" / "cohort"
RESULTS = Path(os.environ.get("BENCH_RESULTS", ROOT / "results" / "stock"))


def main():
    trials, names = script_arguments(sys.argv, __doc__, 5)
    names = chosen_names(names, list(programs.PROGRAMS), "a stock program", sys.argv[0])
    policies = os.environ.get("BENCH_POLICIES", "halo,rest")
    allocators = os.environ.get("BENCH_ALLOCATORS", "glibc,jemalloc,mimalloc")
    trains = os.environ.get("BENCH_TRAINS", "1")
    if trains not in ("1", "2"):
        raise SystemExit(f"bench-stock.py: BENCH_TRAINS must be 1 or 2, not {trains!r}")
    done, failed = [], []
    for name in names:
        spec = programs.PROGRAMS[name]
        out = RESULTS / name
        if not shutil.which(spec["program"]):
            print(f"bench-stock: {name}: {spec['program']} is not installed "
                  f"(Debian package {spec['package']}; `scripts/install-deps.sh stock`)", flush=True)
            failed.append(name)
            continue
        try:
            inputs = programs.make_inputs(name, RESULTS / "inputs" / name)
        except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
            print(f"bench-stock: {name}: cannot make its inputs: {e}", flush=True)
            failed.append(name)
            continue
        args = spec["args"]
        confirm = ["--confirm", args["cachegrind"]] if os.environ.get("BENCH_CONFIRM") == "1" else []
        second = ["--train", args["train2"]] if trains == "2" else []
        cmd = [str(COHORT), "bench", "--force", "--trials", str(trials), "--policies", policies,
               "--allocators", allocators, "--no-random", "--train", args["train"], *second,
               "--cachegrind-args", args["cachegrind"], *confirm, "-o", str(out.resolve()), "--",
               spec["program"], *args["ref"].split()]
        print(f"== {name}: {spec['what']}", flush=True)
        r = subprocess.run(cmd, cwd=inputs, env={**os.environ, **spec["env"]}, stderr=subprocess.DEVNULL)
        (failed if r.returncode else done).append(name)
    report_runs(RESULTS, names, COHORT)
    if failed:
        sys.exit(f"bench-stock: problems in {', '.join(failed)}")


if __name__ == "__main__":
    main()
