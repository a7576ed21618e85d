"""Freed memory is reused before fresh memory is taken (runtime/memory/heap.c;
docs/runtime.md, "Size classes" and "Merging before fresh pages"): blocks of
random mixed sizes replaced at random keep most of the group's resident
memory live, so does a queue of them freed oldest first, holes left by
large blocks serve a later phase of small requests, and runs of small holes
merge to serve larger requests, instead of fresh pages."""

import json
import re

from conftest import PROGRAMS, cohort_env, run

BINARY = PROGRAMS / "reuse"


def churned_group(tmp_path, argv):
    """The one group's statistics of a run under `all`, whose output matches glibc's."""
    stats = tmp_path / "stats.json"
    base = run(argv)
    r = run(argv, env=cohort_env(mode="all", stats=stats))
    assert r.returncode == 0, r.stderr
    assert r.stdout == base.stdout
    (group,) = json.loads(stats.read_text())["groups"]
    return group


def test_random_replacement_keeps_most_resident_memory_live(tmp_path):
    group = churned_group(tmp_path, [BINARY, "replace", 16384, 30])
    # Before size classes, 71% of the chunks' resident bytes were free here.
    assert group["fragmentation_at_peak_percent"] < 50, group


def test_queue_of_mixed_sizes_keeps_most_resident_memory_live(tmp_path):
    group = churned_group(tmp_path, [BINARY, "fifo", 10000, 60])
    # The freed oldest blocks are neighbours: merged, they serve any size.
    # Merging only chunks a quarter free, 16-25% of the resident bytes were
    # free here, in bins of sizes the requests did not come back for, and a
    # third chunk was taken beside the spill chunk.
    assert group["fragmentation_at_peak_percent"] < 20, group
    assert group["peak_chunks"] == 2, group


def peak_kib(result):
    return int(re.search(rb"peak resident (\d+) KiB", result.stderr).group(1))


def test_holes_of_large_blocks_serve_small_requests():
    base = run([BINARY, "phases", 20000])
    r = run([BINARY, "phases", 20000], env=cohort_env(mode="all"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == base.stdout
    # glibc splits its free large chunks for the small requests; a group
    # allocator that left them for fresh pages took a quarter more.
    assert peak_kib(r) <= peak_kib(base) * 1.1, (peak_kib(r), peak_kib(base))


def test_adjacent_small_holes_merge_for_larger_requests():
    base = run([BINARY, "merge", 8000])
    r = run([BINARY, "merge", 8000], env=cohort_env(mode="all"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == base.stdout
    # glibc merges its freed fast-bin chunks before a large request; a group
    # allocator that merged only the current chunk took a fifth more.
    assert peak_kib(r) <= peak_kib(base), (peak_kib(r), peak_kib(base))
