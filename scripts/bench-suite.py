"""make bench: every workload with an inputs file, through `cohort bench`
(profile on train, plan, time on ref, cachegrind on its own input), then one
report: results/report.md. BENCH_TRIALS (default 10) and BENCH_WORKLOADS
(comma-separated) narrow it down."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cohort import workloads  # noqa: E402

COHORT = ROOT / "bin" / "cohort"
RESULTS = Path(os.environ.get("BENCH_RESULTS", ROOT / "results"))


def main():
    names = workloads.names()
    if os.environ.get("BENCH_WORKLOADS"):
        names = [n for n in names if n in os.environ["BENCH_WORKLOADS"].split(",")]
    trials = os.environ.get("BENCH_TRIALS", "10")
    done, failed = [], []
    for name in names:
        inp = {k: " ".join(v) for k, v in workloads.inputs(name).items()}
        out = RESULTS / name
        print(f"== {name}", flush=True)
        cmd = [str(COHORT), "bench", "--force", "--trials", trials, "--train", inp["train"],
               "--cachegrind-args", inp["cachegrind"], "-o", str(out), "--",
               str(workloads.binary(name)), *inp["ref"].split()]
        r = subprocess.run(cmd, stderr=subprocess.DEVNULL)
        (failed if r.returncode else done).append(name)
    dirs = [str(RESULTS / n) for n in names if (RESULTS / n / "results.json").exists()]
    if dirs:
        subprocess.run([str(COHORT), "report", *dirs, "-o", str(RESULTS / "report.md")], check=True)
        print(f"report: {RESULTS / 'report.md'}")
    if failed:
        sys.exit(f"bench: problems in {', '.join(failed)} (see their results.json)")


if __name__ == "__main__":
    main()
