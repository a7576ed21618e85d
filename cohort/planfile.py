"""The plan file (docs/plan-format.md): checks the CLI can make before a run.

The runtime parses plans itself (runtime/plan.c); this side only refuses a
plan that is plainly not one, so the user hears about it before the run."""

from pathlib import Path

from cohort.errors import CohortError

PLAN_VERSION = 1


def check_plan_header(path):
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except FileNotFoundError:
        raise CohortError(f"plan {path}: no such file") from None
    except OSError as e:
        raise CohortError(f"plan {path}: {e.strerror}") from None
    first = head.split(b"\n", 1)[0].split(b"#", 1)[0].strip()
    try:
        word, version = first.decode("ascii").split()
    except (UnicodeDecodeError, ValueError):
        raise CohortError(f"plan {path}: not a Cohort plan (first line must be 'cohort-plan {PLAN_VERSION}')") from None
    if word != "cohort-plan":
        raise CohortError(f"plan {path}: not a Cohort plan (first line must be 'cohort-plan {PLAN_VERSION}')")
    if version != str(PLAN_VERSION):
        raise CohortError(f"plan {path}: format version {version}; this Cohort reads version {PLAN_VERSION}")
