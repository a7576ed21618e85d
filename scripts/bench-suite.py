"""make bench: every workload with an inputs file, through `cohort bench`
(profile on train, plan, time on ref, cachegrind on its own input), then one
report: results/report.md. BENCH_TRIALS (default 10) and BENCH_WORKLOADS
(comma-separated) narrow it down; BENCH_POLICIES (comma-separated, default
every policy `cohort bench --policies` knows: each plan policy planned from
the one training profile, each online policy with none) and BENCH_ALLOCATORS
(default glibc,jemalloc,mimalloc) choose the configurations; BENCH_LAYOUT_RUNS=N
passes --layout-runs N (each baseline's band of D1 misses over moved
layouts). A workload that reads standard input
(`PHASE-stdin:` lines in its inputs file) gets each phase's input generated
into its results directory and passed as --train-stdin, --stdin (the timed
runs) and --cachegrind-stdin."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cohort.measure import workloads  # noqa: E402
from cohort.measure.bench import POLICIES, report_runs  # noqa: E402

COHORT = ROOT / "bin" / "cohort"
RESULTS = Path(os.environ.get("BENCH_RESULTS", ROOT / "results"))
STDIN_OPTIONS = {"train": "--train-stdin", "ref": "--stdin", "cachegrind": "--cachegrind-stdin"}


def bench_takes_stdin():
    """Whether this cohort's bench has the standard-input options."""
    r = subprocess.run([str(COHORT), "bench", "--help"], capture_output=True, text=True)
    return all(opt in r.stdout for opt in STDIN_OPTIONS.values())


def stdin_options(name, out):
    """--train-stdin FILE --stdin FILE --cachegrind-stdin FILE for the phases
    of workload `name` that read standard input (files made in out)."""
    opts = []
    for phase, opt in STDIN_OPTIONS.items():
        path = workloads.stdin_file(name, phase, out)
        if path is not None:
            opts += [opt, str(path)]
    return opts


def main():
    names = workloads.names()
    if os.environ.get("BENCH_WORKLOADS"):
        names = [n for n in names if n in os.environ["BENCH_WORKLOADS"].split(",")]
    trials = os.environ.get("BENCH_TRIALS", "10")
    policies = os.environ.get("BENCH_POLICIES", ",".join(POLICIES))
    allocators = os.environ.get("BENCH_ALLOCATORS", "glibc,jemalloc,mimalloc")
    layout = ["--layout-runs", os.environ["BENCH_LAYOUT_RUNS"]] if os.environ.get("BENCH_LAYOUT_RUNS") else []
    done, failed = [], []
    takes_stdin = None
    for name in names:
        inp = {k: " ".join(v) for k, v in workloads.inputs(name).items()}
        out = RESULTS / name
        print(f"== {name}", flush=True)
        extra = []
        if workloads.has_stdin(name):
            if takes_stdin is None:
                takes_stdin = bench_takes_stdin()
            if not takes_stdin:
                print(f"bench: {name} reads standard input, which this cohort bench cannot give it",
                      flush=True)
                failed.append(name)
                continue
            try:
                extra = stdin_options(name, out)
            except (OSError, RuntimeError) as e:
                print(f"bench: {name}: cannot make its standard input: {e}", flush=True)
                failed.append(name)
                continue
        cmd = [str(COHORT), "bench", "--force", "--trials", trials, "--policies", policies,
               "--allocators", allocators, "--train", inp["train"],
               "--cachegrind-args", inp["cachegrind"], *layout, *extra, "-o", str(out), "--",
               str(workloads.binary(name)), *inp["ref"].split()]
        r = subprocess.run(cmd, stderr=subprocess.DEVNULL)
        (failed if r.returncode else done).append(name)
    report_runs(RESULTS, names, COHORT)
    if failed:
        sys.exit(f"bench: problems in {', '.join(failed)} (see their results.json)")


if __name__ == "__main__":
    main()
