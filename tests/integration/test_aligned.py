"""Every block of 16 bytes or more is 16-aligned under every mode (the
x86-64 ABI's max_align_t, which glibc and jemalloc honour): a program that
copies 16-byte-aligned records with movaps must run as it does without
Cohort. With 8-byte granules it crashed under COHORT_MODE=all."""

import pytest

from conftest import PROGRAMS, cohort_env, run

SETTINGS = {
    "all": {"mode": "all"},
    "random": {"mode": "random:4"},
    "dpa": {"policy": "dpa", "dpa_min_objects": 1},
    "mo": {"policy": "mo", "mo_hot": 1},
    "checked": {"mode": "all", "check": 1},
}


@pytest.mark.parametrize("name", SETTINGS)
def test_blocks_are_16_aligned(name):
    binary = PROGRAMS / "aligned"
    base = run([binary])
    assert base.returncode == 0 and base.stdout.startswith(b"misaligned 0\n")
    r = run([binary], env=cohort_env(**SETTINGS[name]))
    assert r.returncode == 0, r.stderr
    assert r.stdout == base.stdout
