"""`cohort prefetch`: which of a loads measurement's loads MO's advice
prefetches for (written as a prefetch file, formats/prefetchfile.py), and
whether injecting them pays, timed in the layout the loads were measured
under."""

import tempfile

from cohort.errors import CohortError
from cohort.formats.prefetchfile import MAX_DISTANCE, MAX_LOADS
from cohort.measure.loads import candidate, verdict
from cohort.measure.runner import environment, exit_words, with_prefetch
from cohort.measure.runs import clean_environment, judge, run_once
from cohort.measure.stats import spread


def chosen(loads, min_share=0.01, top=10):
    """[(load, stride, distance)] that the advice prefetches for, the most
    missing first: the program's own loads (not system modules) of MO's form
    with at least min_share of the D1 misses and mostly strided windows."""
    total, line = loads["totals"]["d1_misses"], loads["cache"]["line"]
    out = []
    for l in sorted(loads["loads"], key=lambda l: -l["d1_misses"]):
        if l["system"] or not candidate(l):
            continue
        v = verdict(l, total, line, min_share)
        if v and abs(v[1]) <= MAX_DISTANCE:
            out.append((l, *v))
    return out[:min(top, MAX_LOADS)]


def layout_environment(loads, prefetch=None):
    """The environment of a run in the layout loads was measured under (the
    next allocator, a plan or an online policy), with prefetch injected if
    given."""
    lay = loads["layout"]
    base = clean_environment()
    if lay["kind"] == "plan":
        env = environment(plan=lay["plan"], base=base)
    elif lay["kind"] == "policy":
        env = environment(policy=lay["policy"], base=base)
    else:
        env = {k: v for k, v in base.items() if k != "LD_PRELOAD"}
    return with_prefetch(env, prefetch) if prefetch is not None else env


def pays(target, loads, prefetch, trials, stdin=None, log=print):
    """Time target in loads' layout without and with prefetch injected,
    interleaved, after one warm-up round: (kept, (q1, median, q3) without,
    the same with). Kept when the injected runs' third quartile lies below
    the plain runs' first (the prefetch pays beyond noise). A run that fails,
    or prints what the plain run did not, is a one-line error."""
    envs = {"plain": layout_environment(loads), "injected": layout_environment(loads, prefetch)}
    times = {k: [] for k in envs}
    reference = None
    with tempfile.TemporaryDirectory(prefix="cohort-prefetch.") as work:
        for rnd in range(trials + 1):
            for k, env in envs.items():
                r = run_once(target, env, work, stdin=stdin)
                status, reason = judge(r, reference)
                if status != "ok":
                    raise CohortError(f"{' '.join(target)} {'with the prefetches ' if k == 'injected' else ''}"
                                      f"{reason if r['exit'] == 0 else exit_words(r['exit'])}: nothing kept")
                reference = reference or r
                if rnd:
                    times[k].append(r["wall_s"])
            if rnd:
                log(f"cohort prefetch: round {rnd}/{trials}")
    plain, injected = spread(times["plain"]), spread(times["injected"])
    return injected[2] < plain[0], plain, injected
