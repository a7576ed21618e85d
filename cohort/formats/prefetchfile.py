"""The prefetch file (docs/prefetch-format.md): the loads that MO's advice
says to prefetch for, each with its distance, which the runtime injects at
start-up (COHORT_PREFETCH, runtime/policy/mo/prefetch.c). `cohort prefetch` writes it
from one loads measurement (docs/loads-format.md), taken under the layout
the program will run with."""

from pathlib import Path

from cohort.formats.elf import build_id
from cohort.errors import CohortError
from cohort.measure.loads import candidate, verdict

HEADER = "cohort-prefetch 1"
MAX_LOADS = 256      # runtime/policy/mo/mo.h CH_PREFETCH_MAX
MAX_MODULES = 16     # runtime/policy/mo/prefetch.c PF_MODULES
MAX_DISTANCE = 1 << 20


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


def _where(l):
    if l["file"] and l["line"]:
        return f"{Path(l['file']).name}:{l['line']}" + (f" in {l['function']}" if l["function"] else "")
    return f"{Path(l['module']).name}+{l['offset']:#x}"


def describe(item):
    """One line for people: where the load is, what it is, its advice."""
    l, stride, dist = item
    insn = l["insn"]["text"] if l["insn"] else "?"
    return f"{_where(l)}: {insn}, stride {stride:+d}, prefetch {dist:+d} bytes ahead"


def text(items, source):
    """The file's text for items from chosen()."""
    modules = []
    for l, _, _ in items:
        if l["module"] not in modules:
            modules.append(l["module"])
    if len(modules) > MAX_MODULES:
        raise CohortError(f"the advice spans {len(modules)} modules; a prefetch file holds at most {MAX_MODULES}")
    out = [HEADER, f"# made by cohort prefetch from {source}"]
    for i, m in enumerate(modules):
        if "\n" in m or "\r" in m:
            raise CohortError(f"a module's path holds a line break: {m!r}")
        out.append(f"module {i} {build_id(m) or '-'} {m}")
    for item in items:
        l, _, dist = item
        out.append(f"load {modules.index(l['module'])} {l['offset']:#x} {dist}  # {describe(item)}")
    out.append("end")
    return "\n".join(out) + "\n"


def check(path):
    """A one-line error unless path looks like a prefetch file (the runtime
    checks the rest, and warns)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise CohortError(f"cannot read prefetch file {path}: {e.strerror}")
    if not head.startswith(HEADER.encode()):
        raise CohortError(f"{path} is not a Cohort prefetch file (make one with `cohort prefetch`)")
    return str(Path(path).resolve())


def layout_environment(loads, prefetch=None):
    """The environment of a run in the layout loads was measured under (the
    next allocator, a plan or an online policy), with prefetch injected if
    given."""
    from cohort.measure.bench import clean_environment
    from cohort.measure.runner import environment, with_prefetch
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
    import tempfile
    from cohort.measure.bench import judge, run_once, spread
    from cohort.measure.runner import exit_words
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
