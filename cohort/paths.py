"""Where Cohort's own build products and the system's allocators live."""

import os
from pathlib import Path

from cohort.errors import CohortError

ROOT = Path(__file__).resolve().parent.parent

ALLOCATORS = {
    "glibc": None,
    "jemalloc": ("libjemalloc.so.2", "libjemalloc2"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    "mimalloc": ("libmimalloc.so.2", "libmimalloc2.0"),
}
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib", "/usr/local/lib")


def runtime_library():
    """libcohort.so: $COHORT_LIB, else the project's build tree."""
    env = os.environ.get("COHORT_LIB")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT / "build" / "runtime" / "libcohort.so")
    for c in candidates:
        if c.is_file():
            return c.resolve()
    raise CohortError("libcohort.so not found (build it with `make`, or set COHORT_LIB)")


def allocator_library(name):
    """The shared library of a next allocator, or None for glibc's own malloc."""
    if name not in ALLOCATORS:
        raise CohortError(f"unknown allocator '{name}' (choose from {', '.join(ALLOCATORS)})")
    spec = ALLOCATORS[name]
    if spec is None:
        return None
    soname, package = spec
    for d in LIB_DIRS:
        p = Path(d) / soname
        if p.exists():
            return p
    raise CohortError(f"{name} is not installed ({soname} not found; apt-get install {package})")


def measure_tool():
    """build/tools/cohort-measure, which runs a command and reports its own
    peak RSS (tools/measure.c says why Python cannot), or None."""
    p = ROOT / "build" / "tools" / "cohort-measure"
    return p if p.is_file() and os.access(p, os.X_OK) else None


def shift_library():
    """build/tools/libcohort-shift.so, the preload that moves a run's heap
    (tools/layout_shift.c; cohort bench --layout-runs)."""
    p = ROOT / "build" / "tools" / "libcohort-shift.so"
    if p.is_file():
        return p
    raise CohortError("libcohort-shift.so is not built (run `make`)")


def plan_checker():
    """build/tools/cohort-plan-check: the runtime's own plan parser (tools/plan_check.c)."""
    p = ROOT / "build" / "tools" / "cohort-plan-check"
    if p.is_file() and os.access(p, os.X_OK):
        return p
    raise CohortError("cohort-plan-check is not built (run `make`)")


def anchor_tool():
    """build/tools/cohort-anchor: call sites' anchors and where they lie in
    another build, by the runtime's own code (tools/anchor.c)."""
    p = ROOT / "build" / "tools" / "cohort-anchor"
    if p.is_file() and os.access(p, os.X_OK):
        return p
    raise CohortError("cohort-anchor is not built (run `make`)")


def sequitur_tool():
    """build/tools/cohort-sequitur: SEQUITUR in C (tools/sequitur.c)."""
    p = ROOT / "build" / "tools" / "cohort-sequitur"
    if p.is_file() and os.access(p, os.X_OK):
        return p
    raise CohortError("cohort-sequitur is not built (run `make`)")


def profile_schema():
    """docs/profile.schema.json, which every profile read is validated against."""
    return ROOT / "docs" / "profile.schema.json"


def profiler_lib():
    """The directory VALGRIND_LIB must name to run Cohort's tool: $COHORT_PROFILER_LIB,
    else the project's build tree."""
    env = os.environ.get("COHORT_PROFILER_LIB")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT / "build" / "profiler" / "lib")
    for c in candidates:
        if (c / "cohort-amd64-linux").is_file() and (c / "vgpreload_core-amd64-linux.so").exists():
            return c.resolve()
    raise CohortError("Cohort's profiler is not built (run `make`, or set COHORT_PROFILER_LIB)")
