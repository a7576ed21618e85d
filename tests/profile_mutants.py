"""Mutated profiles, and what `cohort plan` and `cohort explain` must do
with each: succeed, or refuse in one line, never with a traceback and never
leaving a file behind (issues 11 and 20). Used by tests/integration/test_bad_profiles.py
(a bounded run in `make test`) and scripts/fuzz-profiles.py (as many
mutants as asked). Mutants come from a fixed-seed PRNG."""

import contextlib
import io
import json
import random
from pathlib import Path

from cohort.cli import main
from cohort.plans import read_plan

HUGE = "9" * 100_000   # a 100,000-digit number


def cli(*argv):
    """main(argv) in this process: (status, stdout, stderr). Output goes
    through strict UTF-8 streams, as to a terminal, so text that cannot be
    written fails here as it would there."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    out.flush()
    err.flush()
    return status, out.buffer.getvalue().decode(), err.buffer.getvalue().decode()


# ---- mutants -----------------------------------------------------------------

def slots(node, path=()):
    """Every (path, value) in a JSON document, containers included."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from slots(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from slots(v, path + (i,))


def put(doc, path, value):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def references(doc):
    """Paths of the ids that point into another list, with that list's length:
    a site's module, a context's sites, graph nodes and edge ends, families."""
    n = {k: len(doc.get(k) or []) for k in ("modules", "sites", "contexts", "families")}
    refs = [(("sites", i, "module"), n["modules"]) for i in range(n["sites"])]
    for i, c in enumerate(doc["contexts"]):
        refs += [(("contexts", i, "sites", j), n["sites"]) for j in range(len(c["sites"]))]
        if "family" in c:
            refs.append((("contexts", i, "family"), n["families"]))
    for graph, size in (("graph", n["contexts"]), ("family_graph", n["families"])):
        if graph in doc:
            refs += [((graph, "nodes", j), size) for j in range(len(doc[graph]["nodes"]))]
            refs += [((graph, "edges", j, e), size) for j in range(len(doc[graph]["edges"])) for e in (0, 1)]
    for i, f in enumerate(doc.get("families") or []):
        refs += [(("families", i, "contexts", j), n["contexts"]) for j in range(len(f["contexts"]))]
        refs += [(("families", i, "sites", j), n["sites"]) for j in range(len(f["sites"]))]
    for key in ("modules", "sites", "contexts", "families"):
        refs += [((key, i, "id"), n[key]) for i in range(n[key])]
    return refs


def mutate(text, rnd):
    """(description, mutant text) of one random mutation of a profile's text."""
    kind = rnd.choice(["flip", "byte", "truncate", "line", "key", "type", "huge", "range", "range",
                       "string", "string", "nonfinite", "float", "two"])
    raw = text.encode()
    if kind == "flip":
        i = rnd.randrange(len(raw))
        return f"bit flip at byte {i}", (raw[:i] + bytes([raw[i] ^ (1 << rnd.randrange(8))]) + raw[i + 1:])
    if kind == "byte":
        i = rnd.randrange(len(raw))
        return f"byte {i} replaced", raw[:i] + bytes([rnd.randrange(256)]) + raw[i + 1:]
    if kind == "truncate":
        i = rnd.randrange(len(raw))
        return f"truncated at byte {i}", raw[:i]
    if kind == "line":
        lines = text.splitlines(keepends=True)
        i = rnd.randrange(len(lines))
        return f"line {i + 1} deleted", "".join(lines[:i] + lines[i + 1:]).encode()
    if kind == "two":   # two mutations at once
        what1, once = mutate(text, rnd)
        try:
            what2, twice = mutate(once.decode(), rnd)
        except (ValueError, LookupError, TypeError, AttributeError):
            # not text, not JSON or not shaped like a profile any more: cut it short instead
            i = rnd.randrange(len(once))
            what2, twice = f"truncated at byte {i}", once[:i]
        return f"{what1}, then {what2}", twice

    doc = json.loads(text)
    everything = list(slots(doc))
    if kind == "key":
        keyed = [(p, v) for p, v in everything if isinstance(v, dict) and v]
        path, node = rnd.choice(keyed)
        key = rnd.choice(sorted(node))
        del node[key]
        what = f"key {'/'.join(map(str, path + (key,)))} deleted"
    elif kind == "type":
        path, _ = rnd.choice(everything[1:])
        new = rnd.choice(["text", 1.5, -3, 0, None, True, [], {}, [0, 1], {"id": 0}])
        put(doc, path, new)
        what = f"{'/'.join(map(str, path))} = {new!r}"
    elif kind in ("huge", "nonfinite", "float"):
        numbers = [(p, v) for p, v in everything if type(v) in (int, float)]
        path, v = rnd.choice(numbers)
        if kind == "huge":
            new = rnd.choice(["@HUGE@", "@-HUGE@", 10 ** 30, -(10 ** 30), 2 ** 64, 2 ** 63, 1e308, 1e999])
        elif kind == "nonfinite":
            new = rnd.choice([float("nan"), float("inf"), float("-inf")])
        else:
            new = v + 0.5 if rnd.random() < 0.5 else float(v)
        put(doc, path, new)
        what = f"{'/'.join(map(str, path))} = {str(new)[:12]}"
    elif kind == "range":
        path, n = rnd.choice(references(doc))
        new = rnd.choice([-1, n, n + 1, n + 1000, 2 ** 63, 2 ** 64 + 1, -(2 ** 64)])
        put(doc, path, new)
        what = f"{'/'.join(map(str, path))} = {new} (of {n})"
    else:   # a lone surrogate, or a line break or control character in a name
        strings = [(p, v) for p, v in everything if isinstance(v, str)]
        path, v = rnd.choice(strings)
        new = rnd.choice(["\ud800", v + "\udfff", "\udc80" + v, v + "\nend", v + "\u2028site 0", "\x00" + v, ""])
        put(doc, path, new)
        what = f"{'/'.join(map(str, path))} = {new!a}"
    out = json.dumps(doc, indent=1)   # NaN and Infinity as JSON's usual extensions
    out = out.replace('"@HUGE@"', HUGE).replace('"@-HUGE@"', "-" + HUGE)
    return what, out.encode()


def mutants(text, count, seed):
    rnd = random.Random(seed)
    for _ in range(count):
        yield mutate(text, rnd)


def check_failure(status, out, err, prefix):
    """A refusal: non-zero status and one line `cohort: ...` on stderr."""
    problems = []
    if status == 0:
        problems.append("exit status 0 with an error")
    if err.count("\n") != 1 or not err.startswith(prefix):
        problems.append(f"stderr is not one line starting {prefix!r}: {err[:300]!r}")
    if "Traceback" in err or "Traceback" in out:
        problems.append("a traceback")
    return problems


def try_mutant(tmp, n, what, data, plan=None, graph=True):
    """Plan and explain one mutant: (what went wrong, whether it was accepted)."""
    prof = tmp / f"m{n}.json"
    prof.write_bytes(data)
    plan_out, svg = tmp / f"m{n}.plan", tmp / f"m{n}.svg"
    problems, accepted = [], False
    try:
        status, out, err = cli("plan", prof, "-o", plan_out)
        if status == 0:
            read_plan(plan_out)   # a plan that was written parses
            if err.splitlines()[-1:] != [f"cohort: wrote {plan_out}"]:
                problems.append(f"plan: unexpected stderr {err[:300]!r}")
        else:
            problems += [f"plan: {p}" for p in check_failure(status, out, err, f"cohort: {prof}: ")]
            if plan_out.exists():
                problems.append("plan: a plan file was left behind")
        accepted = status == 0
        status, out, err = cli("explain", prof, "--graph", svg if graph else "-")
        if status == 0:
            if not accepted:
                problems.append("explain accepts what plan refused")
            if graph and not svg.read_text().rstrip().endswith("</svg>"):
                problems.append("explain: graph is not a whole SVG")
        else:
            problems += [f"explain: {p}" for p in check_failure(status, out, err, f"cohort: {prof}: ")]
            if svg.exists():
                problems.append("explain: a graph file was left behind")
            if accepted:
                problems.append("explain refuses what plan accepted")
        if plan is not None:   # with a good plan made from the original profile
            status, out, err = cli("explain", prof, plan, "--graph", "-")
            if status != 0:
                problems += [f"explain with plan: {p}" for p in check_failure(status, out, err, "cohort: ")]
    except Exception as e:  # noqa: BLE001 -- any exception is what this test looks for
        problems.append(f"{type(e).__name__}: {str(e)[:200]}")
    leftovers = [p.name for p in tmp.iterdir() if p not in (prof, plan_out, svg)]
    if leftovers:
        problems.append(f"files left behind: {leftovers}")
    for p in (prof, plan_out, svg):
        p.unlink(missing_ok=True)
    return [f"mutant {n} ({what}): {p}" for p in problems], accepted


# ---- the schema's two validators -------------------------------------------

SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "profile.schema.json"


def schema_verdicts(raw):
    """For a mutant that decodes to an object with a version Cohort reads:
    (Cohort's verdict, jsonschema's), each None for valid or the error's
    message; None for any other mutant. Cohort's is the validator it runs
    (fastjsonschema, compiled from the schema), jsonschema's is the
    reference implementation's on the same version's definition."""
    import fastjsonschema
    import jsonschema
    from cohort.formats.profilefile import Corrupt, _decode, _validator
    try:
        doc = _decode(raw)
    except Corrupt:
        return None
    if not isinstance(doc, dict) or type(doc.get("version")) is not int or doc["version"] not in (1, 2):
        return None
    try:
        _validator(doc["version"])(doc)
        ours = None
    except fastjsonschema.JsonSchemaValueException as e:
        ours = e.message
    schema = json.loads(SCHEMA.read_text())
    sub = {"$schema": schema["$schema"], "$ref": f"#/definitions/v{doc['version']}",
           "definitions": schema["definitions"]}
    err = next(jsonschema.Draft4Validator(sub).iter_errors(doc), None)
    return ours, None if err is None else err.message


# Named defects of the bundled tiny profile and the line each must give,
# shared by the fast tier (tests/fast/test_profile_refusals.py) and the
# subprocess runs of tests/integration/test_bad_profiles.py.
TINY = Path(__file__).resolve().parent / "data" / "tiny-profile.json"


SEED = 11


def edit(doc, change):
    doc = json.loads(json.dumps(doc))
    change(doc)
    return doc


CASES = [   # (name, change to the tiny profile, or raw text; what the message must say)
    ("huge number", lambda d: put(d, ("sites", 0, "offset"), "@HUGE@"), "more than 4300 digits"),
    ("NaN", lambda d: put(d, ("graph", "coverage"), float("nan")), "NaN, which JSON does not allow"),
    ("Infinity", lambda d: put(d, ("contexts", 0, "accesses"), float("inf")), "Infinity"),
    ("float id", lambda d: put(d, ("contexts", 0, "sites", 0), 1.0), "contexts[0].sites[0]: 1.0, not an id"),
    ("float count", lambda d: put(d, ("contexts", 1, "allocations"), 1.5), "contexts[1].allocations: 1.5"),
    ("bool count", lambda d: put(d, ("totals", "accesses"), True), "totals.accesses: true"),
    ("string for int", lambda d: put(d, ("parameters", "max_size"), "4096"), "parameters.max_size: '4096'"),
    ("negative module", lambda d: put(d, ("sites", 3, "module"), -1), "sites[3].module: -1"),
    ("module out of range", lambda d: put(d, ("sites", 3, "module"), 3), "sites[3].module: 3 is no module id (the profile has 3 modules)"),
    ("site out of range", lambda d: put(d, ("contexts", 2, "sites", 1), 15), "the profile has 15 sites"),
    ("node out of range", lambda d: put(d, ("graph", "nodes", 1), 3), "graph.nodes[1]: 3 is no context id"),
    ("edge to no node", lambda d: put(d, ("graph", "edges", 0, 1), 2), "not one of the graph's nodes"),
    ("edge out of order", lambda d: put(d, ("graph", "edges", 0), [1, 0, 5]), "not in order"),
    ("zero weight", lambda d: put(d, ("graph", "edges", 0, 2), 0), "graph.edges[0][2]: 0, not a weight"),
    ("node twice", lambda d: put(d, ("graph", "nodes"), [0, 0]), "listed twice"),
    ("near weights miscounted", lambda d: put(d, ("graph", "near"), [0, 0, 0, 0, 0]), "graph.near: 5 weights"),
    ("near weight too high", lambda d: put(d, ("graph", "near"), [10 ** 12] * len(d["graph"]["edges"])),
     "graph.near[0]"),
    ("negative near weight", lambda d: put(d, ("graph", "near"), [-1] * len(d["graph"]["edges"])), "graph.near[0]"),
    ("id out of order", lambda d: put(d, ("contexts", 1, "id"), 2), "contexts[1].id: 2"),
    ("offset too big", lambda d: put(d, ("sites", 1, "offset"), 2 ** 64), "sites[1].offset"),
    ("lone surrogate", lambda d: put(d, ("sites", 1, "function"), "new_\udc80"), "lone surrogate"),
    ("surrogate in argv", lambda d: put(d, ("target", "argv", 0), "\ud800"), "target.argv[0]"),
    ("newline in a name", lambda d: put(d, ("sites", 1, "file"), "a.c\nend"), "line break"),
    ("control in a path", lambda d: put(d, ("modules", 1, "path"), "/x\x1b[2J"), "modules[1].path"),
    ("build id not hex", lambda d: put(d, ("modules", 1, "build_id"), "xyz"), "not hex digits"),
    ("unknown call kind", lambda d: put(d, ("sites", 1, "call"), "jump"), "sites[1].call: 'jump'"),
    ("no totals", lambda d: d.pop("totals"), "profile: no 'totals'"),
    ("no argv", lambda d: put(d, ("target", "argv"), []), "target.argv: [], not a non-empty list"),
    ("version true", lambda d: put(d, ("version",), True), "profile version true is not supported"),
    ("version 1.0", lambda d: put(d, ("version",), 1.0), "profile version 1.0 is not supported"),
    ("list", "[1, 2]", "not a Cohort profile"),
    ("truncated", None, "bad JSON at line"),
    ("not UTF-8", b'{"format": "\xff"}', "not UTF-8 text"),
    ("deep", "[" * 100_000 + "]" * 100_000, "not a profile"),
]


def write_case(path, change):
    good = json.loads(TINY.read_text())
    if change is None:
        data = TINY.read_bytes()[:len(TINY.read_bytes()) // 2]
    elif isinstance(change, bytes):
        data = change
    elif isinstance(change, str):
        data = change.encode()
    else:
        data = json.dumps(edit(good, change), indent=1).replace('"@HUGE@"', HUGE).encode()
    path.write_bytes(data)
