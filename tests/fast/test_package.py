"""The Python package's layout (cohort/README.md): folders in the order of
the pipeline, a module importing only its own folder and those before it,
no import cycle, and no format module that starts a process. Imports made
inside functions count as much as those at the top: they are the ones that
hid the cycles this replaced (bench -> confirm -> tune -> bench, bench <->
prefetchfile)."""

import ast
import re

from conftest import ROOT

PACKAGE = ROOT / "cohort"


def layers():
    """[(layer, {module})] from cohort/README.md's table, first to last."""
    out = []
    for line in (PACKAGE / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*(\w[\w ]*?)\s*\|\s*(`.*?)\s*\|", line)
        if m:
            out.append((m.group(1), {n for n in re.findall(r"`([\w./]+)`", m.group(2))}))
    return out


def modules():
    """{dotted name: path} of every module of the package."""
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def imports(mods):
    """{module: {module it imports}}, at any depth of its code."""
    out = {m: set() for m in mods}
    for m, f in mods.items():
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "cohort":
                for a in n.names:
                    full = f"{n.module}.{a.name}"
                    target = full if full in mods else n.module
                    if target != m:
                        out[m].add(target)
            elif isinstance(n, ast.Import):
                out[m] |= {a.name for a in n.names if a.name in mods and a.name != m}
    return out


def layer_of(module, table):
    """Index in table of the layer a module belongs to: its folder
    (`formats/`) or its own file (`plans.py`)."""
    rel = module.split(".", 1)[1] if "." in module else "__init__"
    folder, file = rel.split(".")[0] + "/", rel.replace(".", "/") + ".py"
    for i, (_, entries) in enumerate(table):
        if folder in entries or file in entries:
            return i
    raise AssertionError(f"{module} is in no layer of cohort/README.md's table")


def test_every_module_is_in_one_layer_of_the_table():
    table = layers()
    assert [name for name, _ in table][:2] == ["base", "formats"], table
    for m in modules():
        layer_of(m, table)


def test_a_module_imports_only_its_own_layer_and_those_before_it():
    table, mods = layers(), modules()
    wrong = []
    for m, targets in imports(mods).items():
        for t in targets:
            if t == "cohort":
                continue   # the package itself: its version
            if layer_of(t, table) > layer_of(m, table):
                wrong.append(f"{m} imports {t}, a later layer")
    assert not wrong, wrong


def test_no_import_cycle():
    graph = imports(modules())
    state, cycles = {}, []

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(path[path.index(t):] + [t])
            elif t not in state:
                visit(t, path + [t])
        state[m] = 2
    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles


def test_no_format_module_starts_a_process():
    for f in (PACKAGE / "formats").glob("*.py"):
        tree = ast.parse(f.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                 for a in n.names} | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not names & {"subprocess", "multiprocessing"}, f"{f.name} imports a way to start a process"
        assert not any(n.startswith("cohort.measure") for n in names if n), f"{f.name} imports measure/"


def test_the_cli_checks_every_dependency_before_it_starts():
    """bin/cohort without the virtualenv says in one line what is missing
    (cohort/__main__.py); its list is pyproject.toml's dependencies, by the
    names they are imported under."""
    line = re.search(r"^dependencies = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    deps = re.findall(r'"([^"]+)"', line)
    wanted = {re.split(r"[<>=!~ ]", d)[0].lower() for d in deps}
    imported_as = {"pyelftools": "elftools"}
    tree = ast.parse((PACKAGE / "__main__.py").read_text())
    needed = next(ast.literal_eval(n.value) for n in tree.body
                  if isinstance(n, ast.Assign) and n.targets[0].id == "NEEDED")
    assert set(needed) == {imported_as.get(d, d) for d in wanted}
