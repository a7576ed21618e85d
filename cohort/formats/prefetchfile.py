"""The prefetch file (docs/prefetch-format.md): the loads that MO's advice
says to prefetch for, each with its distance, which the runtime injects at
start-up (COHORT_PREFETCH, runtime/policy/mo/prefetch.c). `cohort prefetch` writes it
from one loads measurement (docs/loads-format.md), taken under the layout
the program will run with (measure/prefetch.py chooses the loads)."""

from pathlib import Path

from cohort.formats.elf import build_id
from cohort.errors import CohortError

HEADER = "cohort-prefetch 1"
MAX_LOADS = 256      # runtime/policy/mo/mo.h CH_PREFETCH_MAX
MAX_MODULES = 16     # runtime/policy/mo/prefetch.c PF_MODULES
MAX_DISTANCE = 1 << 20


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
