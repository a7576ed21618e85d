"""The checked mode (COHORT_CHECK=1) catches every heap mistake of
tests/programs/misuse_suite.c that glibc catches, and names it
(scripts/misuse-report.py prints the counts per class)."""

import os
import signal

import pytest

from conftest import PROGRAMS, cohort_env, run

SUITE = PROGRAMS / "misuse_suite"
SIZES = [24, 1000]   # small and medium; 16k+8, so glibc's chunk ends right after the block
NAMED = {   # mistake -> what the checked mode says (None: a fault)
    "double-free": "free(): double free detected",
    "double-free-later": "free(): double free detected",
    "interior-free": "free(): invalid pointer",
    "unaligned-free": "free(): invalid pointer",
    "invalid-free": "free(): invalid pointer",   # not ours: glibc's own free says it
    "underflow-1": "free(): buffer underflow detected",
    "overflow-1": "free(): buffer overflow detected",
    "overflow-32": "free(): buffer overflow detected",
    "overrun-1m": None,
    "overflow-1m": None,
}


def plain_env():
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("COHORT_")}


def caught(r):
    return not (r.returncode == 0 and b"survived" in r.stdout)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("mistake", sorted(NAMED))
@pytest.mark.parametrize("mode", ["all", "random:4"])
def test_checked_mode_catches_what_glibc_catches(mistake, size, mode):
    glibc = run([SUITE, mistake, size], env=plain_env())
    r = run([SUITE, mistake, size], env=cohort_env(mode=mode, check=1))
    if caught(glibc):
        assert caught(r), (mistake, size, r.stdout, r.stderr)
    if NAMED[mistake] is None:
        assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    else:
        assert r.returncode == -signal.SIGABRT, (r.returncode, r.stderr)
        assert NAMED[mistake] in r.stderr.decode(), r.stderr


@pytest.mark.parametrize("size", SIZES)
def test_no_mistake_no_complaint(size):
    want = run([SUITE, "none", size], env=plain_env())
    assert want.returncode == 0
    for mode in ("all", "random:4"):
        for check in (0, 1):
            r = run([SUITE, "none", size], env=cohort_env(mode=mode, check=check))
            assert (r.returncode, r.stdout, r.stderr) == (0, want.stdout, b""), (mode, check, r.stderr)


def test_bad_check_setting_is_one_warning():
    r = run([SUITE, "overflow-1", 24], env=cohort_env(mode="all", check="yes"))
    assert r.returncode == 0 and b"survived" in r.stdout   # checking stays off
    assert r.stderr == b"cohort: warning: COHORT_CHECK=yes must be 0 or 1; checking stays off\n", r.stderr


def test_cohort_run_check_option():
    from conftest import COHORT
    for extra, stopped in (([], False), (["--check"], True)):
        r = run([COHORT, "run", "--mode", "all", *extra, "--", SUITE, "overflow-1", 24])
        assert caught(r) == stopped, (extra, r.returncode, r.stderr)
    assert b"cohort: free(): buffer overflow detected" in r.stderr
