"""Bad profiles (issue 11): `cohort plan` and `cohort explain` on mutated
profiles either succeed or say what is wrong in one line, never with a
traceback and never leaving a partial plan or graph behind; output into a
closed pipe ends quietly; valid but empty profiles are planned and explained.

The fuzz part is deterministic: mutants come from a fixed-seed PRNG, from the
bundled tiny profile (format 1) and from a profile the profiler makes of the
recursive builders (format 2, with context families). They run in-process
through the CLI's main(); a few also run as real processes. The named
defects and the schema's verdicts, which need no build, are in
tests/fast/test_profile_refusals.py."""

import json
import os
import re
import signal
import subprocess

import pytest

from conftest import COHORT, PROGRAMS, run
from cohort.plans import read_plan
from cohort.formats.profilefile import load_profile
from profile_mutants import CASES, SCHEMA, SEED, TINY, cli, edit, mutants, put, try_mutant, write_case

MUTANTS = 300          # per base profile


@pytest.fixture(scope="module")
def builders(tmp_path_factory):
    """A format-2 profile with families, made by the profiler (a fraction of a second)."""
    out = tmp_path_factory.mktemp("builders") / "builders.json"
    r = run([COHORT, "profile", "-o", out, "--", PROGRAMS / "builders", os.devnull, "3"])
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(out.read_text())["version"] == 3
    return out


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


# ---- the schema: standard JSON Schema, and the reference validator agrees ----

def test_schema_is_draft4_and_holds_real_profiles(builders):
    import jsonschema
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    for prof in (TINY, builders):
        jsonschema.Draft4Validator(schema).validate(json.loads(prof.read_text()))


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


