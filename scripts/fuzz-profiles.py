"""Fuzzing of profiles (issues 11 and 20): N mutants (default 2000) from a
seed (default 1), of the bundled tiny profile (format 1) and of a profile
the profiler makes of tests/programs/builders (format 2, with families),
half each. Each goes through `cohort plan` and `cohort explain` in this
process (a plan written is read back through the runtime's parser,
cohort-plan-check), and, where it decodes, through the schema twice: the
validator Cohort runs and jsonschema, which must agree. Prints the counts
and every problem; exit 1 if there is any traceback, stray file or
disagreement.
Usage: .venv/bin/python scripts/fuzz-profiles.py [N] [SEED]"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
import profile_mutants  # noqa: E402
from cohort.measure.bench import whole_number  # noqa: E402


def schemas_agree(raw):
    """None if Cohort's validator and jsonschema agree on raw (or it is not
    a profile-shaped JSON object), else what each said."""
    verdicts = profile_mutants.schema_verdicts(raw)
    if verdicts is None or (verdicts[0] is None) == (verdicts[1] is None):
        return None
    ours, theirs = verdicts
    return f"schema disagreement: cohort says {ours!r}, jsonschema says {theirs and theirs[:120]!r}"


def main():
    count = whole_number(sys.argv[1], "N", sys.argv[0], least=1) if len(sys.argv) > 1 else 2000
    seed = whole_number(sys.argv[2], "SEED", sys.argv[0]) if len(sys.argv) > 2 else 1
    t0 = time.monotonic()
    problems, accepted, n = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        builders = tmp / "builders.json"
        r = subprocess.run([str(ROOT / "bin" / "cohort"), "profile", "-o", str(builders), "--",
                            str(ROOT / "build" / "tests" / "programs" / "builders"), "/dev/null", "3"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"fuzz-profiles: cannot profile the builders: {r.stderr.strip()}")
        work = tmp / "mutants"
        work.mkdir()
        for k, base in enumerate((ROOT / "tests" / "data" / "tiny-profile.json", builders)):
            good = tmp / f"good{k}.plan"
            profile_mutants.cli("plan", base, "-o", good)
            for what, data in profile_mutants.mutants(base.read_text(), count // 2 + k * (count % 2), seed + k):
                found, ok = profile_mutants.try_mutant(work, n, what, data, plan=good if n % 3 == 0 else None,
                                                       graph=n % 10 == 0)
                said = schemas_agree(data)
                problems += found + ([f"mutant {n} ({what}): {said}"] if said else [])
                accepted += ok
                n += 1
    for p in problems:
        print(p)
    print(f"fuzz-profiles: seed {seed}: {n} mutants, {accepted} accepted, {n - accepted} refused; "
          f"{len(problems)} problems (tracebacks, stray files, disagreements); {time.monotonic() - t0:.0f} s")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
