"""Bad profiles (issue 11): `cohort plan` and `cohort explain` on mutated
profiles either succeed or say what is wrong in one line, never with a
traceback and never leaving a partial plan or graph behind; output into a
closed pipe ends quietly; valid but empty profiles are planned and explained.

The fuzz part is deterministic: mutants come from a fixed-seed PRNG, from the
bundled tiny profile (format 1) and from a profile the profiler makes of the
recursive builders (format 2, with context families). They run in-process
through the CLI's main(); a few also run as real processes."""

import json
import os
import random
import re
import signal
import subprocess

import pytest

from conftest import COHORT, DATA, PROGRAMS, run
from cohort.plans import read_plan
from cohort.formats.profilefile import load_profile
from profile_mutants import HUGE, SCHEMA, check_failure, cli, mutants, put, schema_verdicts, try_mutant

TINY = DATA / "tiny-profile.json"
SEED = 11
MUTANTS = 300          # per base profile


@pytest.fixture(scope="module")
def builders(tmp_path_factory):
    """A format-2 profile with families, made by the profiler (a fraction of a second)."""
    out = tmp_path_factory.mktemp("builders") / "builders.json"
    r = run([COHORT, "profile", "-o", out, "--", PROGRAMS / "builders", os.devnull, "3"])
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(out.read_text())["version"] == 3
    return out


def test_mutants_are_deterministic():
    text = TINY.read_text()
    assert list(mutants(text, 40, SEED)) == list(mutants(text, 40, SEED))


# ---- the fuzz test ---------------------------------------------------------

def fuzz(base, tmp_path, seed, graph_every=1, with_plan=False):
    plan = None
    work = tmp_path / "mutants"
    work.mkdir()
    if with_plan:
        plan = tmp_path / "good.plan"
        assert cli("plan", base, "-o", plan)[0] == 0
    problems, accepted = [], 0
    for n, (what, data) in enumerate(mutants(base.read_text(), MUTANTS, seed)):
        found, ok = try_mutant(work, n, what, data, plan=plan if n % 3 == 0 else None,
                               graph=n % graph_every == 0)
        problems += found
        accepted += ok
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])
    assert accepted < MUTANTS / 2   # most mutants are corrupt, and are refused


def test_fuzz_tiny_profile(tmp_path):
    fuzz(TINY, tmp_path, SEED, with_plan=True)


def test_fuzz_profiled_builders(builders, tmp_path):
    fuzz(builders, tmp_path, SEED + 1, graph_every=10, with_plan=True)


# ---- named defects: the message says what and where -------------------------

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


@pytest.mark.parametrize("name,change,message", CASES, ids=[c[0] for c in CASES])
def test_named_defects(tmp_path, name, change, message):
    prof = tmp_path / "p.json"
    write_case(prof, change)
    for argv in (["plan", prof, "-o", tmp_path / "plan"], ["explain", prof, "--graph", tmp_path / "g.svg"]):
        status, out, err = cli(*argv)
        assert status == 2 and out == "", (name, err)
        assert err.startswith(f"cohort: {prof}: ") and err.count("\n") == 1, err
        assert message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


def test_families_must_partition_the_contexts(builders, tmp_path):
    doc = json.loads(builders.read_text())
    big = max(doc["families"], key=lambda f: len(f["contexts"]))
    moved = big["contexts"][-1]
    other = next(f for f in doc["families"] if f is not big)
    cases = {
        "context in two families": (lambda d: d["families"][other["id"]]["contexts"].append(moved),
                                    f"context {moved} is also in family"),
        "context in no family": (lambda d: d["families"][big["id"]]["contexts"].remove(moved),
                                 f"contexts[{moved}]: in no family"),
        "wrong family field": (lambda d: put(d, ("contexts", moved, "family"), other["id"]),
                               f"contexts[{moved}].family"),
        "family graph node": (lambda d: d["family_graph"]["nodes"].append(len(d["families"])),
                              "is no family id"),
        "no family graph": (lambda d: d.pop("family_graph"), "no 'family_graph'"),
        "no function_start": (lambda d: d["sites"][0].pop("function_start"), "sites[0]: no 'function_start'"),
    }
    for name, (change, message) in cases.items():
        prof = tmp_path / "p.json"
        prof.write_text(json.dumps(edit(doc, change)))
        status, _, err = cli("plan", prof, "-o", tmp_path / "plan")
        assert status == 2 and message in err and err.count("\n") == 1, (name, err)
        assert not (tmp_path / "plan").exists()


def test_subprocess_refusals_are_one_line(tmp_path):
    """The real exit path: bin/cohort in its own process."""
    for name, change, message in [CASES[0], CASES[9], CASES[17]]:
        prof = tmp_path / f"{name.replace(' ', '-')}.json"
        write_case(prof, change)
        for argv in (["plan", prof, "-o", tmp_path / "plan"], ["explain", prof, "--graph", "-"]):
            r = run([COHORT, *argv])
            err = r.stderr.decode()
            assert r.returncode == 2 and r.stdout == b"", err
            assert err.startswith(f"cohort: {prof}: ") and err.count("\n") == 1 and message in err, err
            assert "Traceback" not in err
            assert not (tmp_path / "plan").exists()


def test_mutant_in_a_subprocess(tmp_path):
    """A few fuzz mutants through bin/cohort, as they come."""
    text = TINY.read_text()
    for n, (what, data) in enumerate(mutants(text, 4, SEED + 100)):
        prof = tmp_path / f"m{n}.json"
        prof.write_bytes(data)
        r = run([COHORT, "plan", prof, "-o", tmp_path / f"m{n}.plan"])
        err = r.stderr.decode()
        assert "Traceback" not in err, (what, err)
        if r.returncode == 0:
            read_plan(tmp_path / f"m{n}.plan")
        else:
            assert err.startswith(f"cohort: {prof}: ") and err.count("\n") == 1, (what, err)
            assert not (tmp_path / f"m{n}.plan").exists()


def test_load_profile_takes_a_large_profile(tmp_path):
    """20,000 contexts of 20 sites each load whole. How fast is a benchmark's
    question, not a test's: this test once bounded the time and failed on a
    loaded machine (3.2 s against 3)."""
    doc = json.loads(TINY.read_text())
    rnd = random.Random(SEED)
    n = 20_000
    ctx = doc["contexts"][0]
    doc["contexts"] = [dict(ctx, id=i, sites=[rnd.randrange(len(doc["sites"])) for _ in range(20)])
                       for i in range(n)]
    doc["graph"] = {"nodes": list(range(0, n, 2)), "edges": [[i, i + 2, 5] for i in range(0, n - 2, 2)],
                    "coverage": 0.9, "dropped_contexts": n // 2}
    prof = tmp_path / "big.json"
    prof.write_text(json.dumps(doc))
    loaded = load_profile(prof)
    assert [c["id"] for c in loaded["contexts"]] == list(range(n))
    assert [len(c["sites"]) for c in loaded["contexts"]] == [20] * n


# ---- the schema: standard JSON Schema, and the reference validator agrees ----

def test_schema_is_draft4_and_holds_real_profiles(builders):
    import jsonschema
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    for prof in (TINY, builders):
        jsonschema.Draft4Validator(schema).validate(json.loads(prof.read_text()))


def test_schema_verdicts_agree_with_jsonschema():
    """Over mutants that decode as JSON: the validator Cohort runs
    (fastjsonschema, compiled from the schema) refuses exactly what
    jsonschema refuses."""
    checked = refused = 0
    for n, (what, raw) in enumerate(mutants(TINY.read_text(), 400, SEED + 7)):
        verdicts = schema_verdicts(raw)
        if verdicts is None:
            continue
        ours, theirs = verdicts
        assert (ours is None) == (theirs is None), (n, what, ours, theirs)
        checked += 1
        refused += ours is not None
    assert checked > 200 and 0 < refused < checked


def test_non_utf8_arguments_make_a_readable_profile(tmp_path):
    """Bytes that are not UTF-8 in the command line are written as \\xNN:
    the profile loads, and explain shows them so."""
    out = tmp_path / "p.json"
    arg = os.fsdecode(b"a\xffb")
    r = run([COHORT, "profile", "-o", out, "--", PROGRAMS / "builders", os.devnull, "1", arg])
    assert r.returncode == 0, r.stderr
    assert load_profile(out)["target"]["argv"][-1] == "a\\xffb"
    r = run([COHORT, "explain", out, "--graph", tmp_path / "g.svg"], env={**os.environ, "LC_ALL": "C"})
    assert r.returncode == 0 and b"a\\xffb" in r.stdout, r.stderr


def test_unencodable_names_are_escaped_in_messages(tmp_path):
    """An argument that is not UTF-8, under an ASCII locale: one line, the
    byte escaped, no traceback."""
    r = run([COHORT, "run", "--mode", "all", "--", os.fsdecode(b"./\xe9t\xff")],
            env={**os.environ, "LC_ALL": "C"}, cwd=tmp_path)
    assert r.returncode != 0
    assert r.stderr == b"cohort: cannot run ./\\xe9t\\xff: no such file\n", r.stderr


# ---- valid but empty -------------------------------------------------------

def cold(doc, empty_graph_only=False):
    """All contexts cold (no accesses), or only the graphs emptied."""
    if not empty_graph_only:
        for c in doc["contexts"]:
            c["accesses"] = c["macro_accesses"] = 0
        doc["totals"].update(accesses=0, macro_accesses=0, threads=0, weight=0, edges_before_filter=0,
                             weight_before_filter=0)
    doc["graph"].update(nodes=[], edges=[], coverage=0.0, dropped_contexts=len(doc["contexts"]))
    if "near" in doc["graph"]:
        doc["graph"]["near"] = []
    if "family_graph" in doc:
        doc["family_graph"].update(nodes=[], edges=[], coverage=0.0)
    return doc


def no_contexts(doc):
    doc.update(contexts=[], sites=[], modules=[])
    cold(doc)
    if "families" in doc:
        doc["families"] = []
    if "ds_graph" in doc:
        doc["ds_graph"].update(edges=[], array_like=[])
    if "beside" in doc.get("rest_layouts", {}):
        doc["rest_layouts"]["beside"] = {"one": [], "classes": []}
    return doc


@pytest.mark.parametrize("base", ["tiny", "builders"])
@pytest.mark.parametrize("shape", ["all cold", "empty graph", "no contexts"])
def test_empty_profiles_make_plans_without_groups(builders, tmp_path, base, shape):
    doc = json.loads((TINY if base == "tiny" else builders).read_text())
    doc = {"all cold": cold, "empty graph": lambda d: cold(d, empty_graph_only=True),
           "no contexts": no_contexts}[shape](doc)
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps(doc, indent=1))
    load_profile(prof)
    status, out, err = cli("plan", prof, "-o", tmp_path / "plan")
    assert status == 0, err
    plan = read_plan(tmp_path / "plan")
    assert plan["selects"] == [] and plan["groups"] in ([], ["rest"])
    assert out.startswith("0 groups")
    status, out, err = cli("explain", prof, "--graph", tmp_path / "g.svg")
    assert status == 0, err
    assert (tmp_path / "g.svg").read_text().rstrip().endswith("</svg>")
    status, out, err = cli("explain", prof, tmp_path / "plan", "--graph", "-")
    assert status == 0, err


# ---- output into a closed pipe -----------------------------------------------

def closed_pipe_run(argv, block_sigpipe=False):
    """Run bin/cohort with stdout a pipe nobody reads (its read end closed)."""
    r, w = os.pipe()
    os.close(r)
    try:
        block = (lambda: signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGPIPE])) if block_sigpipe else None
        return subprocess.run([str(a) for a in argv], stdout=w, stderr=subprocess.PIPE, timeout=120,
                              preexec_fn=block)
    finally:
        os.close(w)


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    """As with other Unix tools: SIGPIPE ends cohort, without a traceback
    (status 141 in a shell); where SIGPIPE is blocked, status 141 all the same."""
    for block in (False, True):
        for argv in ([COHORT, "explain", TINY, "--graph", "-"],
                     [COHORT, "plan", TINY, "-o", tmp_path / f"plan{block}"],
                     *([[COHORT, "--help"]] if not block else [])):   # argparse hides EPIPE itself
            r = closed_pipe_run(argv, block_sigpipe=block)
            assert r.returncode == (141 if block else -signal.SIGPIPE), (argv, r.returncode, r.stderr)
            assert b"Traceback" not in r.stderr and b"Error" not in r.stderr, r.stderr
        read_plan(tmp_path / f"plan{block}")   # the plan was written before the report


def test_pipeline_into_head(builders, tmp_path):
    script = (f'"{COHORT}" explain "{builders}" --top 5000 --graph - | head -1; echo "status ${{PIPESTATUS[0]}}" >&2; '
              f'"{COHORT}" plan "{builders}" -o "{tmp_path}/plan" | head -c 10; echo "status ${{PIPESTATUS[0]}}" >&2')
    r = run(["bash", "-c", script])
    err = r.stderr.decode()
    assert r.stdout.decode().startswith("headroom: objects of up to "), r.stdout
    assert "Traceback" not in err and "Error" not in err, err
    assert re.findall(r"status (\d+)", err)[0] in ("0", "141"), err


def test_programs_cohort_runs_do_not_inherit_an_ignored_sigpipe():
    """Python ignores SIGPIPE; `cohort run` execs its target, and an ignored
    signal stays ignored across exec. The target must get the default."""
    r = run([COHORT, "run", "--", "grep", "SigIgn", "/proc/self/status"])
    assert r.returncode == 0, r.stderr
    ignored = int(r.stdout.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)), hex(ignored)
    assert not ignored & (1 << (signal.SIGXFSZ - 1)), hex(ignored)


def test_a_file_cohort_cannot_write_is_one_line(tmp_path):
    (tmp_path / "plan").mkdir()
    status, out, err = cli("plan", TINY, "-o", tmp_path / "plan", "--force")
    assert status == 2 and err == f"cohort: {tmp_path / 'plan'} is a directory (name a file to write)\n", err
    assert [p.name for p in tmp_path.iterdir()] == ["plan"]   # no temporary file left
