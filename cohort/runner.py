"""Running a target program with libcohort preloaded in front of an allocator."""

import os
import shutil
from pathlib import Path

from cohort.errors import CohortError
from cohort.paths import allocator_library, runtime_library
from cohort.planfile import check_plan_header

MODES = ("plan", "off", "all", "random")


def resolve_program(argv):
    """The executable the command line names, or a clear error."""
    if not argv:
        raise CohortError("no program given (usage: cohort run [options] -- ./prog args...)")
    prog = argv[0]
    path = shutil.which(prog) if "/" not in prog else prog
    if not path or not os.path.exists(path):
        raise CohortError(f"cannot run {prog}: no such file", status=127)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise CohortError(f"cannot run {prog}: not an executable file", status=126)
    return path


def environment(plan=None, allocator="glibc", mode=None, stats=None, base=None):
    """The environment for a run: LD_PRELOAD puts libcohort first, the chosen
    allocator behind it, then whatever the user already preloads."""
    env = dict(os.environ if base is None else base)
    preload = [str(runtime_library())]
    alloc = allocator_library(allocator)
    if alloc:
        preload.append(str(alloc))
    if env.get("LD_PRELOAD"):
        preload.append(env["LD_PRELOAD"])
    env["LD_PRELOAD"] = " ".join(preload)
    for key in ("COHORT_PLAN", "COHORT_MODE", "COHORT_STATS"):
        env.pop(key, None)
    if plan is not None:
        plan = Path(plan)
        check_plan_header(plan)
        env["COHORT_PLAN"] = str(plan.resolve())
    if mode is not None:
        if mode.split(":")[0] not in MODES:
            raise CohortError(f"unknown mode '{mode}' (choose from {', '.join(MODES)})")
        env["COHORT_MODE"] = mode
    if stats is not None:
        env["COHORT_STATS"] = str(Path(stats).resolve())
    return env


def exec_program(argv, env):
    """Replace this process with the target, so its exit status and signals
    are the caller's to see unchanged."""
    path = resolve_program(argv)
    try:
        os.execve(path, argv, env)
    except OSError as e:
        raise CohortError(f"cannot run {argv[0]}: {e.strerror}", status=126) from e
