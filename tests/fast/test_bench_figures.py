"""The bench's figures from known inputs (cohort/measure/stats.py and the
report): percentiles and medians, the runtime's misses counted apart from
the program's, and where a plan loses beyond noise. No build."""

import pytest

from conftest import ROOT
from cohort.measure.bench import round_order
from cohort.measure.stats import percentile, quartiles, spread, summarise


def test_percentiles_and_medians_from_known_inputs():
    assert percentile([3, 1, 2], 0.5) == 2
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile([1, 2, 3, 4, 5], 0.25) == 2 and percentile([1, 2, 3, 4, 5], 0.75) == 4
    assert percentile([10, 20], 0.25) == 12.5
    assert percentile([], 0.5) is None
    # the scripts' quartiles are the summary's: one definition of the band
    assert quartiles([1, 2, 3, 4, 5]) == (2, 4) and quartiles([7]) == (7, 7)
    assert spread([5, 1, 3]) == (2, 3, 4) and spread([4, 1, 3, 2]) == (1.75, 2.5, 3.25)
    trials = [{"config": "a", "status": "ok", "wall_s": w, "user_s": w, "max_rss_kb": 1} for w in (4, 1, 3, 2)]
    trials.append({"config": "a", "status": "mismatch", "wall_s": 100, "user_s": 1, "max_rss_kb": 1})
    s = summarise(trials, ["a"])["a"]
    assert (s["ok_trials"], s["failed_trials"], s["wall_median_s"], s["wall_p25_s"], s["wall_p75_s"]) == \
        (4, 1, 2.5, 1.75, 3.25)


def test_the_runtimes_misses_on_the_programs_blocks_are_counted_apart(tmp_path):
    """cgfile: D1 misses on runtime lines marked "[block]" (a freed or handed
    block's link and key) against the rest, the runtime's metadata; unknown
    (None) when a runtime line's source cannot be read."""
    from cohort.formats.cgfile import runtime_share
    heap = ROOT / "runtime" / "memory" / "heap.c"
    lines = heap.read_text().split("\n")
    marked = next(i for i, t in enumerate(lines, 1) if "[block]" in t)
    plain = next(i for i, t in enumerate(lines, 1) if "[block]" not in t and i > 100)
    out = tmp_path / "cg.out"
    out.write_text("events: Ir D1mr D1mw\n"
                   f"fl={heap}\nfn=free\n{marked} 5 7 1\n{plain} 9 2 0\n"
                   "fl=/usr/src/prog.c\nfn=main\n10 100 50 5\n")
    got = runtime_share(out)
    assert got == {"Ir": 14, "D1_misses": 10, "D1_block_misses": 8}
    out.write_text("events: Ir D1mr D1mw\n"
                   f"fl={ROOT / 'runtime' / 'gone.c'}\nfn=ch_free\n3 1 4 0\n"
                   f"fl={heap}\nfn=free\n{marked} 5 7 1\n")
    assert runtime_share(out) == {"Ir": 6, "D1_misses": 12, "D1_block_misses": None}


def test_report_lists_where_a_plan_loses_beyond_noise():
    """The report's "Where Cohort loses": a plan whose 25th percentile lies
    above its allocator's 75th (or the rest pool's, in front of the first
    allocator) is named with both bands; overlapping bands are not; D1 misses
    above the allocator's are listed."""
    from cohort.present.report import losses_section

    def cfg(p25, p75):
        return {"ok_trials": 5, "wall_p25_s": p25, "wall_median_s": (p25 + p75) / 2, "wall_p75_s": p75}
    run_ = {"label": "w", "parameters": {"allocators": ["glibc", "jemalloc"]},
            "summary": {"glibc": cfg(1.0, 1.1), "cohort+glibc": cfg(1.05, 1.2), "rest": cfg(0.8, 0.9),
                        "jemalloc": cfg(1.0, 1.1), "cohort+jemalloc": cfg(1.2, 1.3)},
            "ratios": {"cohort+glibc": {"d1_ratio": 0.9}, "cohort+jemalloc": {"d1_ratio": 1.04}},
            "cachegrind": {}}
    row = [line for line in losses_section([run_], ["glibc", "jemalloc"]) if line.startswith("| w |")][0]
    assert "cohort+glibc than glibc" not in row                       # 1.05-1.2 overlaps 1.0-1.1
    assert "cohort+glibc than rest (1.050-1.200 s against 0.800-0.900)" in row
    assert "cohort+jemalloc than jemalloc (1.200-1.300 s against 1.000-1.100)" in row
    assert "cohort+jemalloc than rest" not in row                     # rest runs in front of glibc
    assert row.endswith("| cohort+jemalloc 1.040 |")


@pytest.mark.parametrize("n", range(1, 13))
def test_rounds_put_each_configuration_after_each_other_equally_often(n):
    """bench.round_order: every round is an order of all n configurations,
    round 0 starts with the first (the reference baseline), and over a
    whole square (n rounds, 2n for an odd n) each configuration runs right
    after each other one equally often: a turned list put each one after
    the same one in every round but one."""
    from collections import Counter
    period = n if n % 2 == 0 else 2 * n
    rows = [round_order(n, r) for r in range(period)]
    assert all(sorted(row) == list(range(n)) for row in rows)
    assert rows[0][0] == 0
    pairs = Counter(p for row in rows for p in zip(row, row[1:]))
    assert len(pairs) == n * (n - 1) and len(set(pairs.values())) <= 1
    assert round_order(n, period + 3) == round_order(n, 3)
