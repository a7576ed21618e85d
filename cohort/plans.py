"""Reading a plan file as the runtime reads it: the runtime's own parser
(runtime/plan/plan.c, built as build/tools/cohort-plan-check) decides
whether the plan is valid and which format version it is, and
formats/planfile.py parses what it accepted."""

import os
import re
import subprocess
from pathlib import Path

from cohort.errors import CohortError
from cohort.formats.planfile import parse_plan
from cohort.paths import plan_checker


def check_plan(path, env=None):
    """The plan's format version, if the runtime accepts the plan: its own
    parser reads it, under the environment the run will have (the chunk
    size bounds max-size). Otherwise CohortError with the runtime's reason,
    "plan PATH line N: WHY"."""
    path = Path(path)
    if not path.exists():
        raise CohortError(f"plan {path}: no such file")
    if path.is_dir():
        raise CohortError(f"plan {path}: is a directory")
    env = dict(os.environ if env is None else env)
    env.pop("LD_PRELOAD", None)
    try:
        r = subprocess.run([str(plan_checker()), str(path)], capture_output=True, env=env, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CohortError(f"cannot check plan {path}: {e}") from None
    out = r.stdout.decode("utf-8", "replace").strip()
    if r.returncode == 1 and out:
        raise CohortError(out)
    m = re.match(r"ok: version (\d+)", out)
    if r.returncode or not m:
        raise CohortError(f"cannot check plan {path}: cohort-plan-check exited {r.returncode}")
    return int(m.group(1))


def read_plan(path, env=None):
    """The plan's content (formats/planfile.parse_plan), if the runtime
    accepts it under env, the environment the plan will run under (as for
    check_plan); else CohortError with the runtime's reason."""
    return parse_plan(path, check_plan(path, env))
