"""Differential fuzzing of plans (issue 20): N mutants (default 2000) from a
seed (default 1), each judged by the runtime's parser (cohort-plan-check),
the CLI (read_plan, then explain) and, for every tenth, the runtime
preloaded into /bin/true. Prints the counts and every problem; exit 1 if
there is any traceback or disagreement.
Usage: .venv/bin/python scripts/fuzz-plans.py [N] [SEED]"""

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
import plan_mutants  # noqa: E402
from cohort.measure.bench import whole_number  # noqa: E402
from cohort.paths import plan_checker, runtime_library  # noqa: E402


def main():
    count = whole_number(sys.argv[1], "N", sys.argv[0], least=1) if len(sys.argv) > 1 else 2000
    seed = whole_number(sys.argv[2], "SEED", sys.argv[0]) if len(sys.argv) > 2 else 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("COHORT_") and k != "LD_PRELOAD"}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        counts, problems = plan_mutants.run(seed, count, Path(tmp), plan_checker(), runtime_library(),
                                            ROOT / "tests" / "data" / "tiny-profile.json", env)
    for p in problems:
        print(p)
    print(f"fuzz-plans: seed {seed}: {counts['mutants']} mutants, {counts['accepted']} accepted, "
          f"{counts['refused']} refused, {counts['runtime_checked']} also run under the runtime; "
          f"{len(problems)} problems (tracebacks or disagreements); {time.monotonic() - t0:.0f} s")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
