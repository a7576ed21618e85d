"""Cachegrind's output file: how much of a run's cost lies in Cohort's runtime.

A cachegrind out file lists, per source file (fl=) and function (fn=), lines
of event counts in the order its "events:" line names. The runtime's share is
what the lines of libcohort's own sources add up to: files under the
project's runtime/ directory, or, in a build without line information,
functions named as the runtime names its own (ch_*, cohort_*).
"""

from collections import Counter

from cohort.paths import ROOT

RUNTIME_DIR = str(ROOT / "runtime") + "/"
RUNTIME_PREFIXES = ("ch_", "cohort_")


def _is_runtime(fl, fn):
    if fl.startswith(RUNTIME_DIR):
        return True
    if fl in ("???", "") and fn.startswith(RUNTIME_PREFIXES):
        return True
    return False


def runtime_share(path):
    """{"Ir", "D1_misses"} for the whole run and for the runtime alone, or
    None when the file holds no counts (a run that died early)."""
    events, fl, fn = None, "", ""
    total, runtime = Counter(), Counter()
    names = {}
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
                continue
            if line.startswith(("fl=", "fi=", "fe=")):
                fl = _name(line[3:].strip(), names, "fl")
                continue
            if line.startswith("fn="):
                fn = _name(line[3:].strip(), names, "fn")
                continue
            if not line[:1].isdigit() or events is None:
                continue
            parts = line.split()
            counts = dict(zip(events, (int(x) for x in parts[1:])))
            d1 = counts.get("D1mr", 0) + counts.get("D1mw", 0)
            ir = counts.get("Ir", 0)
            total["Ir"] += ir
            total["D1_misses"] += d1
            if _is_runtime(fl, fn):
                runtime["Ir"] += ir
                runtime["D1_misses"] += d1
    if events is None:
        return None
    return {"total": dict(total), "runtime": dict(runtime)}


def _name(text, names, kind):
    # Valgrind may compress repeated names as "(n) name" then "(n)".
    if text.startswith("("):
        key, _, rest = text.partition(")")
        key = (kind, key)
        rest = rest.strip()
        if rest:
            names[key] = rest
        return names.get(key, rest)
    return text


def share_text(split):
    """"runtime 3.1% of D1 misses, 12.0% of instructions" for a console line."""
    t, r = split["total"], split["runtime"]
    d1 = r.get("D1_misses", 0) / t["D1_misses"] if t.get("D1_misses") else 0.0
    ir = r.get("Ir", 0) / t["Ir"] if t.get("Ir") else 0.0
    return f"runtime {d1:.1%} of D1 misses, {ir:.1%} of instructions"

