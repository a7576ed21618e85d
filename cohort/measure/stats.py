"""The statistics of measured runs: quartiles and medians of timed trials,
the screening score of a cachegrind run, and what lies beyond noise. Pure functions of
numbers: nothing here runs a process."""

import statistics


def quartiles(values):
    """(p25, p75) of the values, interpolated as `cohort bench`'s summary
    and its test of noise interpolate them (percentile), so that the
    benchmark scripts and the bench report quote one quartile; both the
    value itself when there is one."""
    return percentile(values, 0.25), percentile(values, 0.75)


def spread(values):
    """(p25, median, p75) of the values: what the benchmark scripts report."""
    lo, hi = quartiles(values)
    return lo, statistics.median(values), hi


def percentile(values, q):
    """Linear interpolation between closest ranks (q in [0, 1])."""
    v = sorted(values)
    if not v:
        return None
    pos = (len(v) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarise(trials, names):
    out = {}
    for name in names:
        ok = [t for t in trials if t["config"] == name and t["status"] == "ok"]
        walls = [t["wall_s"] for t in ok]
        out[name] = {
            "ok_trials": len(ok),
            "failed_trials": sum(1 for t in trials if t["config"] == name and t["status"] != "ok"),
            "wall_median_s": percentile(walls, 0.5), "wall_p25_s": percentile(walls, 0.25),
            "wall_p75_s": percentile(walls, 0.75),
            "user_median_s": percentile([t["user_s"] for t in ok], 0.5),
            "max_rss_median_kb": percentile([t["max_rss_kb"] for t in ok], 0.5),
        }
    return out


MISS_WEIGHTS = {"D1": 10, "LL": 100}   # cycles a miss costs, roughly (cachegrind's manual's model)


def score(cg):
    """The screening score of a cachegrind result: estimated cycles."""
    return cg["I_refs"] + MISS_WEIGHTS["D1"] * cg["D1_misses"] + MISS_WEIGHTS["LL"] * cg["LLd_misses"]


def beyond_noise(timings, base):
    """Of {name: a bench summary's entry}, the names faster than `base`
    beyond noise, the lowest median first: each one's quartile band lies
    wholly below base's. A median a few tenths of a percent lower, bands
    overlapping, is the machine's noise (patients: apa-collections 1.384 s
    [1.378-1.422] against the default plan's 1.394 s [1.386-1.504])."""
    floor = timings[base]["wall_p25_s"]
    return sorted((n for n, t in timings.items() if n != base and t["wall_p75_s"] < floor),
                  key=lambda n: (timings[n]["wall_median_s"], n))
