"""Constants of the C runtime that the Python package mirrors (a limit the
planner must keep plans within, a bound of a file the runtime reads) equal
their C definitions, and every `runtime/FILE NAME` a comment in the package
cites names a macro that FILE still defines."""

import ast
import importlib
import re

import pytest

from conftest import ROOT

# (module, its name, C file, C macro, what the Python value is of the C one)
MIRRORED = [
    ("cohort.plan.paths", "MAX_SITES", "runtime/plan/plan.h", "CH_MAX_SITES", lambda c: c),
    ("cohort.plan.planner", "MAX_GROUPS", "runtime/system/system.h", "CH_PLAN_GROUPS", lambda c: c),
    ("cohort.plan.planner", "REST_MAX", "runtime/system/system.h", "CH_EXACT_MAX", lambda c: c),
    ("cohort.plan.transfer", "REST_MAX", "runtime/system/system.h", "CH_EXACT_MAX", lambda c: c),
    ("cohort.formats.planfile", "MAX_PATH", "runtime/plan/plan.h", "CH_MAX_PATH", lambda c: c),
    ("cohort.formats.planfile", "MAX_NODES", "runtime/plan/plan.h", "CH_MAX_NODES", lambda c: c - 1),  # less the root
    ("cohort.formats.prefetchfile", "MAX_LOADS", "runtime/policy/mo/mo.h", "CH_PREFETCH_MAX", lambda c: c),
    ("cohort.formats.prefetchfile", "MAX_MODULES", "runtime/policy/mo/prefetch.c", "PF_MODULES", lambda c: c),
]

DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+(.+?)\s*(?:/\*.*)?$", re.M)


def defines(path):
    return dict(DEFINE.findall((ROOT / path).read_text()))


def value(name, table, depth=0):
    """A macro's value: an integer expression of numbers and other macros
    (of the same file or system.h), casts and suffixes dropped, evaluated."""
    assert depth < 8, f"{name}: macros nest too deep"
    expr = re.sub(r"\((?:size_t|unsigned|int|u?int\d+_t)\)", "", table[name])
    expr = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", expr)
    env = {w: value(w, table, depth + 1) for w in re.findall(r"[A-Za-z_]\w*", expr)}
    return eval(compile(ast.parse(expr, mode="eval"), name, "eval"), {"__builtins__": {}}, env)


@pytest.mark.parametrize("module,name,path,macro,of", MIRRORED, ids=[f"{m[1]}={m[3]}" for m in MIRRORED])
def test_a_mirrored_constant_equals_its_c_definition(module, name, path, macro, of):
    table = {**defines("runtime/system/system.h"), **defines(path)}
    assert macro in table, f"{path} no longer defines {macro}"
    assert getattr(importlib.import_module(module), name) == of(value(macro, table))


def test_every_cited_runtime_macro_exists():
    """`# runtime/plan/plan.h CH_MAX_PATH` in the package: plan.h defines
    CH_MAX_PATH (a comment that outlives its constant misleads)."""
    cited = re.compile(r"#.*?\b((?:runtime|profiler)/[\w/]+\.[ch])\s+([A-Z][A-Z0-9_]{2,})\b")
    missing = []
    for f in (ROOT / "cohort").rglob("*.py"):
        for path, macro in cited.findall(f.read_text()):
            if not (ROOT / path).exists():
                missing.append(f"{f.relative_to(ROOT)}: {path} does not exist")
            elif macro not in defines(path) and not re.search(rf"\b{macro}\b", (ROOT / path).read_text()):
                missing.append(f"{f.relative_to(ROOT)}: {path} does not define {macro}")
    assert not missing, missing
