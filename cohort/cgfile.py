"""Cachegrind's output file: how much of a run's cost lies in Cohort's runtime.

A cachegrind out file lists, per source file (fl=) and function (fn=), lines
of event counts in the order its "events:" line names. The runtime's share is
what the lines of libcohort's own sources add up to: files under the
project's runtime/ directory, or, in a build without line information,
functions named as the runtime names its own (ch_*, cohort_*).
"""

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
    """{"Ir", "D1_misses"} of the lines in Cohort's runtime, or None when the
    file holds no counts (a run that died early). A function's lines may
    come from other files (fi=/fe=, inlined code); each fn= starts again at
    its fl= file."""
    events, fl, cur, fn = None, "", "", ""
    runtime = {"Ir": 0, "D1_misses": 0}
    names = {}
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("fl="):
                fl = cur = _name(line[3:].strip(), names, "fl")
            elif line.startswith(("fi=", "fe=")):
                cur = _name(line[3:].strip(), names, "fl")
            elif line.startswith("fn="):
                fn = _name(line[3:].strip(), names, "fn")
                cur = fl
            elif line[:1].isdigit() and events is not None and _is_runtime(cur, fn):
                counts = dict(zip(events, (int(x) for x in line.split()[1:])))
                runtime["Ir"] += counts.get("Ir", 0)
                runtime["D1_misses"] += counts.get("D1mr", 0) + counts.get("D1mw", 0)
    return runtime if events is not None else None


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
