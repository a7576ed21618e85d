"""The runtime's C unit tests (tests/unit), each run under libcohort in the
modes and in front of the allocators it must work with."""

import json

import pytest

from conftest import UNIT, cohort_env, run

ALLOCATORS = ["glibc", "jemalloc", "tcmalloc", "mimalloc"]


@pytest.mark.parametrize("allocator", ALLOCATORS)
@pytest.mark.parametrize("mode", ["off", "all", "random:4"])
@pytest.mark.parametrize("test", ["test_api", "test_new", "test_fork"])
def test_program(test, mode, allocator):
    r = run([UNIT / test], env=cohort_env(allocator, mode=mode))
    assert r.returncode == 0, r.stderr.decode()
    assert f"{test}: ok" in r.stdout.decode()


@pytest.mark.parametrize("mode", ["all", "random:4"])
@pytest.mark.parametrize("test", ["test_api", "test_new", "test_fork", "test_threads"])
def test_program_checked(test, mode):
    """The checked mode (redzones round every grouped block) keeps the API's promises."""
    r = run([UNIT / test], env=cohort_env(mode=mode, check=1))
    assert r.returncode == 0, r.stderr.decode()
    assert f"{test}: ok" in r.stdout.decode()


@pytest.mark.parametrize("mode", ["all", "random:3"])
@pytest.mark.parametrize("allocator", ["glibc", "jemalloc"])
def test_threads(tmp_path, mode, allocator):
    # with one pool, the program also checks the statistics it writes
    args = [tmp_path / "threads.json"] if mode == "all" else []
    r = run([UNIT / "test_threads", *args], env=cohort_env(allocator, mode=mode))
    assert r.returncode == 0, r.stderr.decode()


@pytest.mark.parametrize("mode,check", [("off", 0), ("all", 0), ("random:4", 0), ("all", 1)])
@pytest.mark.parametrize("case,handed_on", [("lineage", None), ("takeover", 1), ("resume", 0), ("argument", 0)])
def test_threads_that_start_threads(tmp_path, mode, check, case, handed_on):
    """A thread that starts another leaves its heap idle: its own next
    allocation or free takes it back, a thread freeing a batch of its blocks
    takes it over (heaps_handed_on), one freed argument block does not; every
    block keeps its contents whoever frees it, in the checked mode too."""
    stats = tmp_path / "stats.json"
    r = run([UNIT / "test_lineage", case, stats], env=cohort_env(mode=mode, check=check))
    assert r.returncode == 0, r.stderr.decode()
    assert "test_lineage: ok" in r.stdout.decode()
    got = json.loads(stats.read_text())
    if mode == "off":
        assert got["heaps_handed_on"] == 0
    elif handed_on is not None:
        assert got["heaps_handed_on"] == handed_on
    if mode == "all" and case == "takeover":   # the orphans' counts add up
        assert got["groups"][0]["live_bytes"] == 0


@pytest.mark.parametrize("spares", [0, 8])
def test_chunk_reuse_and_purge(tmp_path, spares):
    r = run([UNIT / "test_chunks", tmp_path], env=cohort_env(mode="all", spares=spares))
    assert r.returncode == 0, r.stderr.decode()
    end = json.loads((tmp_path / "end.json").read_text())
    assert end["groups"][0]["live_bytes"] == 0


@pytest.mark.parametrize("mistake,message", [
    ("double-free", "free(): double free detected"),
    ("interior", "free(): invalid pointer"),
    ("misaligned", "free(): invalid pointer"),
    ("unallocated", "free(): invalid pointer"),
    ("realloc-freed", "realloc(): invalid pointer"),
    ("usable-freed", "malloc_usable_size(): invalid pointer"),
    ("double-free-last", "free(): double free detected"),
    ("double-free-large", "free(): double free detected"),
    ("double-free-class-later", "free(): double free detected"),
    ("free-at-bump", "free(): invalid pointer"),
    ("double-free-remote", "free(): double free detected"),
    ("double-free-after-remote", "free(): double free detected"),
    ("double-free-batched", "free(): double free detected"),
    ("double-free-emptied", "free(): double free detected"),
    ("double-free-retired", "free(): double free or invalid pointer"),
])
def test_misuse_stops_the_program(mistake, message):
    r = run([UNIT / "test_misuse", mistake], env=cohort_env(mode="all"))
    assert r.returncode == -6, (r.returncode, r.stderr)   # SIGABRT, as glibc
    err = r.stderr.decode()
    assert f"cohort: {message}" in err and "in a Cohort group chunk" in err
    assert "survived" not in r.stdout.decode()


def test_wild_write_into_reserved_region_memory_faults():
    r = run([UNIT / "test_misuse", "overrun-reserved"], env=cohort_env(mode="all"))
    assert r.returncode == -11, (r.returncode, r.stderr)   # SIGSEGV, not a silent write
    assert "survived" not in r.stdout.decode()


def test_copied_free_words_are_not_a_double_free():
    # A live block holding a copy of a freed block's key word: the owner
    # checks its bin before calling it a double free.
    r = run([UNIT / "test_misuse", "copied-free-words"], env=cohort_env(mode="all"))
    assert r.returncode == 0, r.stderr.decode()
    assert "survived copied-free-words" in r.stdout.decode()


def test_copied_recent_words_of_a_class_block_are_not_a_double_free():
    # The same for a block of a class above 256 bytes, whose freed copy
    # carries a recent list's mark: the owner walks the list first.
    r = run([UNIT / "test_misuse", "copied-class-words"], env=cohort_env(mode="all"))
    assert r.returncode == 0, r.stderr.decode()
    assert "survived copied-class-words" in r.stdout.decode()


def test_stale_key_in_bumped_memory_is_not_a_double_free():
    # A chunk that starts over takes a new key: a key left in memory the
    # bump pointer hands out again means nothing, even to another thread.
    r = run([UNIT / "test_misuse", "stale-key"], env=cohort_env(mode="all"))
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "stale key in place" in out and "survived stale-key" in out
