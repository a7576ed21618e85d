"""Shared by the four tiers (tests/README.md): where the sources, the stored
profiles and the build products are, and how to run under the runtime."""

import os
import subprocess
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FAST = TESTS / "fast"      # the tier that needs no build
DATA = TESTS / "data"      # stored profiles
BUILD = ROOT / "build"
LIBCOHORT = BUILD / "runtime" / "libcohort.so"
UNIT = BUILD / "tests" / "unit"
PROGRAMS = BUILD / "tests" / "programs"
COHORT = ROOT / "bin" / "cohort"
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
TCMALLOC = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")
MIMALLOC = Path("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2")
NEXT = {"glibc": None, "jemalloc": JEMALLOC, "tcmalloc": TCMALLOC, "mimalloc": MIMALLOC}

# The group allocator's block for a request: whole 16-byte granules, so that
# every block is aligned as glibc's are, up to 256 bytes; above, four size
# classes per power of two (runtime/system/system.h, ch_block_size).
GRANULE = 16
EXACT_MAX = 256


def block_size(request):
    n = max(GRANULE, -(-request // GRANULE) * GRANULE)
    if n <= EXACT_MAX:
        return n
    quarter = 1 << ((n - 1).bit_length() - 3)
    return -(-n // quarter) * quarter


def rest_class_name(request, rest="rest", rest_max=256):
    """The statistics' name of the group that takes a request of this size in
    a plan's rest pool, split by size class (docs/planner.md, "The rest
    pool"): one class per 16 bytes up to 256, one per power of two above,
    each named after the largest request it takes."""
    top = max(16, -(-request // 16) * 16) if request <= 256 else 1 << (request - 1).bit_length()
    return f"{rest}/{min(top, rest_max)}"


def cohort_env(allocator="glibc", **settings):
    """Environment with libcohort preloaded in front of an allocator; keyword
    arguments become COHORT_* variables (mode="all" -> COHORT_MODE=all)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COHORT_")}
    preload = [str(LIBCOHORT)]
    if NEXT[allocator]:
        preload.append(str(NEXT[allocator]))
    env["LD_PRELOAD"] = " ".join(preload)
    for k, v in settings.items():
        env["COHORT_" + k.upper()] = str(v)
    return env


def run(argv, env=None, timeout=300, **kw):
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, timeout=timeout, **kw)


@pytest.hookimpl(trylast=True)   # after -k and -m have deselected
def pytest_collection_modifyitems(config, items):
    """Every test needs the build (the runtime, the profiler, the workloads)
    but those of the fast tier, tests/fast (`make test-fast`): they read
    sources, stored files and the package alone."""
    if not LIBCOHORT.exists() and any(FAST not in i.path.resolve().parents for i in items):
        pytest.exit("build first: make (or run the fast tier alone: make test-fast)", returncode=2)
