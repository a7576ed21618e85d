"""Cachegrind's output file: how much of a run's cost lies in Cohort's runtime.

A cachegrind out file lists, per source file (fl=) and function (fn=), lines
of event counts in the order its "events:" line names. The runtime's share is
what the lines of libcohort's own sources add up to: files under the
project's runtime/ directory, or, in a build without line information,
functions named as the runtime names its own (ch_*, cohort_*). Of its D1
misses, those on lines whose source says "[block]" (runtime/memory/heap.c: the
link and free key in a block the program freed or is handed) fall on the
program's own memory, which whoever touches it first pays for; the rest
are the runtime's metadata.
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


BLOCK_MARK = "[block]"


def _block_lines(fl, cache):
    """The numbers of fl's lines that touch a program's block, or None when
    its source cannot be read."""
    if fl not in cache:
        try:
            with open(fl, errors="replace") as f:
                cache[fl] = {i for i, text in enumerate(f, 1) if BLOCK_MARK in text}
        except OSError:
            cache[fl] = None
    return cache[fl]


def runtime_share(path):
    """{"Ir", "D1_misses", "D1_block_misses"} of the lines in Cohort's
    runtime, or None when the file holds no counts (a run that died early).
    D1_block_misses: those on "[block]" lines, None when a runtime source
    could not be read. A function's lines may come from other files (fi=/fe=,
    inlined code); each fn= starts again at its fl= file."""
    events, fl, cur, fn = None, "", "", ""
    runtime = {"Ir": 0, "D1_misses": 0, "D1_block_misses": 0}
    names, sources = {}, {}
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
                fields = line.split()
                counts = dict(zip(events, (int(x) for x in fields[1:])))
                misses = counts.get("D1mr", 0) + counts.get("D1mw", 0)
                runtime["Ir"] += counts.get("Ir", 0)
                runtime["D1_misses"] += misses
                if misses and runtime["D1_block_misses"] is not None:
                    marked = _block_lines(cur, sources) if cur.startswith(RUNTIME_DIR) else None
                    if marked is None:   # no source to read: which lines these are is unknown
                        runtime["D1_block_misses"] = None
                    elif int(fields[0]) in marked:
                        runtime["D1_block_misses"] += misses
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
