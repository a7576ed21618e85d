"""Plans that survive a rebuild (issue 80, part 2): a plan made on one build
of a workload is carried onto builds with unrelated changes by its sites'
anchors, offline (`cohort plan --rebase`, `cohort explain --binary`) and by
the runtime itself, and a build with too little in common gets no group."""

import json
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, COHORT, ROOT, cohort_env, run
from cohort.formats.planfile import PLAN_VERSION

SOURCE = ROOT / "workloads" / "queries" / "queries.c"
ORIGINAL = BUILD / "workloads" / "queries"
ARGS = ["3000", "6000", "50", "3"]
STOCK = ["-O2", "-g", "-fPIE", "-pie", "-fomit-frame-pointer"]
UNRELATED = ROOT / "workloads" / "unrelated.c"   # a file of the program with nothing to do with its allocations


def compile_queries(out, flags, extra=None):
    out.parent.mkdir(parents=True, exist_ok=True)
    sources = [SOURCE] + ([extra] if extra else [])
    r = subprocess.run(["gcc", *flags, "-o", out, *sources, "-lm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Rebuilds of queries, each named queries as a rebuild is: a file added,
    its functions in another order, another optimisation level, and the
    first stripped."""
    d = tmp_path_factory.mktemp("builds")
    out = {
        "added": compile_queries(d / "added" / "queries", STOCK, UNRELATED),
        "reordered": compile_queries(d / "reordered" / "queries",
                                     STOCK + ["-ffunction-sections", "-Wl,--sort-section=name"]),
        "O3": compile_queries(d / "O3" / "queries", ["-O3"] + STOCK[1:]),
    }
    stripped = d / "stripped" / "queries"
    stripped.parent.mkdir()
    subprocess.run(["strip", "-o", stripped, out["added"]], check=True)
    out["stripped"] = stripped
    return out


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    r = run([COHORT, "optimize", "-o", d, "--", ORIGINAL, *ARGS])
    assert r.returncode == 0, r.stderr
    return d / "plan"


def groups_of(plan_path):
    return [line.split()[2] for line in plan_path.read_text().splitlines() if line.startswith("group ")]


def grouped(binary, plan_path, tmp_path):
    """{group: allocations} of one run of binary under the plan, and its stderr."""
    stats = tmp_path / "stats.json"
    r = run([binary, *ARGS], env=cohort_env(plan=plan_path, stats=stats))
    assert r.returncode == 0, r.stderr
    return {g["name"]: g["allocations"] for g in json.loads(stats.read_text())["groups"]}, r.stderr.decode()


def test_a_plan_carries_anchors_for_its_sites(plan):
    text = plan.read_text()
    assert text.startswith(f"cohort-plan {PLAN_VERSION}\n")
    sites = [line for line in text.splitlines() if line.startswith("site ")]
    anchors = [line for line in text.splitlines() if line.startswith("anchor ")]
    assert sites and len(anchors) == len(sites)
    assert all(" call=d:malloc " in a or " call=" in a for a in anchors)


@pytest.mark.parametrize("variant", ["added", "reordered", "O3", "stripped"])
def test_rebase_keeps_the_groups_of_a_rebuild(plan, builds, variant, tmp_path):
    """Offline: every selector is kept, and the rebased plan groups as many
    allocations in each group on the rebuild as the plan on the original."""
    out = tmp_path / "plan"
    r = run([COHORT, "plan", "--rebase", builds[variant], plan, "-o", out])
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stderr.decode().splitlines() if "selectors kept" in x)
    kept, of = (int(w) for w in line.split(" selectors kept")[0].split(", ")[-1].split(" of "))
    assert of > 0 and kept == of, line
    before, _ = grouped(ORIGINAL, plan, tmp_path)
    after, err = grouped(builds[variant], out, tmp_path)
    assert err == ""
    named = [g for g in groups_of(plan) if g != "rest"]
    assert named and all(before[g] > 0 and after[g] == before[g] for g in named)


def test_stripped_rebuild_finds_the_sites_of_its_unstripped_twin(plan, builds, tmp_path):
    def offsets(binary):
        r = run([COHORT, "explain", "--plan", plan, "--binary", binary])
        assert r.returncode == 0, r.stderr
        return [line.split()[4] for line in r.stdout.decode().splitlines() if line.startswith("  site ")]
    assert offsets(builds["added"]) == offsets(builds["stripped"])


def test_the_runtime_rebases_a_plan_for_another_build(plan, builds, tmp_path):
    """The plan as it is, on a rebuild: the runtime finds its sites and says
    so in one line; the groups fill as on the original build."""
    before, _ = grouped(ORIGINAL, plan, tmp_path)
    for variant in ("reordered", "stripped"):
        after, err = grouped(builds[variant], plan, tmp_path)
        lines = err.splitlines()
        assert len(lines) == 1 and "was made for another build of queries" in lines[0], err
        assert "rebased by its anchors" in lines[0] and "selectors kept" in lines[0]
        assert all(after[g] == before[g] for g in groups_of(plan) if g != "rest")


def test_cohort_run_lets_the_runtime_rebase(plan, builds):
    r = run([COHORT, "run", "--plan", plan, "--", builds["reordered"], *ARGS])
    assert r.returncode == 0, r.stderr
    assert b"rebased by its anchors" in r.stderr


def test_explain_shows_where_each_site_went(plan, builds):
    r = run([COHORT, "explain", "--plan", plan, "--binary", builds["O3"]])
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode().splitlines()
    assert out[0].startswith(f"Plan {plan}, module 0 (queries")
    sites = [line for line in out if line.startswith("  site ")]
    assert sites and all(" -> 0x" in line for line in sites)
    assert out[-1].startswith(f"rebased onto {builds['O3']}:")


@pytest.fixture
def stranger(tmp_path):
    """Another program under the planned program's name."""
    p = tmp_path / "other" / "queries"
    p.parent.mkdir()
    shutil.copy(BUILD / "workloads" / "allocbench", p)
    return p


def test_rebase_onto_another_program_groups_nothing(plan, stranger, tmp_path):
    """One line, a non-zero exit, and a plan with no group: never a group
    for calls that are not the plan's."""
    out = tmp_path / "plan"
    r = run([COHORT, "plan", "--rebase", stranger, plan, "-o", out])
    assert r.returncode != 0
    errors = r.stderr.decode().splitlines()
    assert len(errors) == 1 and "the plan groups nothing" in errors[0], r.stderr
    assert groups_of(out) == [] and "\nselect " not in out.read_text()


def test_the_runtime_refuses_a_plan_it_cannot_carry(plan, stranger, tmp_path):
    stats = tmp_path / "stats.json"
    r = run([stranger, "churn", "1000"], env=cohort_env(plan=plan, stats=stats))
    assert r.returncode == 0
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and "its anchors do not carry it" in lines[0] and "running without grouping" in lines[0]
    assert not json.loads(stats.read_text())["plan_active"]


def test_rebase_bad_input(plan, builds, tmp_path):
    """A plan without anchors, a missing binary, and the plan as its own output: one line each."""
    bare = tmp_path / "bare"
    bare.write_text("".join(line + "\n" for line in plan.read_text().splitlines() if not line.startswith("anchor ")))
    cases = [
        ([bare], "has no anchors"),
        ([plan, "--rebase", tmp_path / "missing"], "no such file"),
        ([plan, "-o", plan], "is the plan being rebased"),
        ([plan, "--min-kept", "150"], "whole percent from 0 to 100"),
    ]
    for extra, message in cases:
        argv = [COHORT, "plan", "--rebase", builds["added"], *extra]
        if "-o" not in extra:
            argv += ["-o", tmp_path / "out"]
        r = run(argv)
        err = r.stderr.decode().strip().splitlines()
        assert r.returncode != 0 and len(err) == 1 and message in err[0], (extra, r.stderr)
    assert not (tmp_path / "out").exists()


def test_a_plan_without_selectors_is_judged_by_its_sites(plan, builds, stranger, tmp_path):
    """A plan of the rest pool and verdicts alone (calc's, say) is carried
    where its sites are found, and onto another program not at all."""
    bare = tmp_path / "rest-only"
    keep = [line for line in plan.read_text().splitlines() if not line.startswith("select ")]
    bare.write_text("".join(line.replace(" group=0", " cold").replace(" group=1", " cold") + "\n" for line in keep))
    assert run([COHORT, "plan", "--rebase", builds["added"], bare, "-o", tmp_path / "ok"]).returncode == 0
    r = run([COHORT, "plan", "--rebase", stranger, bare, "-o", tmp_path / "no"])
    assert r.returncode != 0 and b"0 of 0 selectors kept" in r.stderr
    r = run([stranger, "churn", "1000"], env=cohort_env(plan=bare))
    assert b"its anchors do not carry it" in r.stderr


def profile(binary, args, out):
    r = run([COHORT, "profile", "-o", out, "--", binary, *args])
    assert r.returncode == 0, r.stderr
    return out


def test_merge_relates_runs_of_two_builds(builds, tmp_path):
    """A run of the original build and one of a rebuild merge into one
    profile of the build on disk first named: each site of the other found,
    no context twice, nothing left out; a plan from it groups."""
    a = profile(ORIGINAL, ARGS, tmp_path / "a.json")
    b = profile(builds["added"], ["3000", "6000", "5", "4"], tmp_path / "b.json")
    same = profile(ORIGINAL, ["3000", "6000", "5", "4"], tmp_path / "same.json")
    for name, pair in (("ab", [a, b]), ("aa", [a, same])):
        r = run([COHORT, "merge", "-o", tmp_path / f"{name}.json", *pair])
        assert r.returncode == 0, r.stderr
    ab, plain = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("ab", "aa"))
    [related] = ab["merged"][1]["related"]
    assert related["found"] == related["sites"] > 0 and related["allocations_left_out"] == 0
    assert "related" not in ab["merged"][0]
    assert len(ab["contexts"]) == len(plain["contexts"])
    assert sum(c["allocations"] for c in ab["contexts"]) == sum(c["allocations"] for c in plain["contexts"])
    assert [m["path"] for m in ab["modules"] if not m["system"]] == [str(ORIGINAL)]
    r = run([COHORT, "plan", tmp_path / "ab.json", "-o", tmp_path / "plan"])
    assert r.returncode == 0, r.stderr
    assert [g for g in groups_of(tmp_path / "plan") if g != "rest"]


def test_merge_refuses_builds_it_cannot_relate(builds, stranger, tmp_path):
    a = profile(ORIGINAL, ARGS, tmp_path / "a.json")
    other = profile(stranger, ["churn", "2000"], tmp_path / "other.json")
    b = profile(builds["reordered"], ARGS, tmp_path / "b.json")
    bare = json.loads(b.read_text())
    for s in bare["sites"]:
        s.pop("anchor", None)
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    # a build whose file is gone, merged with another build that is gone too
    gone = tmp_path / "gone" / "queries"
    gone.parent.mkdir()
    shutil.copy(builds["O3"], gone)
    c = profile(gone, ARGS, tmp_path / "c.json")
    gone.unlink()
    gone2 = tmp_path / "gone2" / "queries"
    gone2.parent.mkdir()
    shutil.copy(builds["reordered"], gone2)
    d = profile(gone2, ARGS, tmp_path / "d.json")
    gone2.unlink()
    for pair, message in (([a, other], "too little in common"), ([a, tmp_path / "bare.json"], "has no anchors"),
                          ([c, d], "none of them is on disk")):
        r = run([COHORT, "merge", "-o", tmp_path / "m.json", *pair])
        err = r.stderr.decode().strip().splitlines()
        assert r.returncode != 0 and len(err) == 1 and message in err[0], (message, r.stderr)
        assert not (tmp_path / "m.json").exists()


def test_anchor_tool_survives_damaged_files(tmp_path):
    """The runtime reads a module's file to find its sites again: a file cut
    short or with damaged section headers gets a refusal or fewer calls,
    never a crash (the same code runs inside the host program)."""
    import random
    from cohort.paths import anchor_tool
    data = bytearray(ORIGINAL.read_bytes())
    shoff = int.from_bytes(data[0x28:0x30], "little")
    shnum = int.from_bytes(data[0x3c:0x3e], "little")
    rng = random.Random(5)
    damaged = tmp_path / "queries"
    for i in range(120):
        d = bytearray(data)
        if i % 4 == 0:
            d = d[:rng.randrange(len(d))]
        else:
            for _ in range(rng.randint(1, 4)):   # a field of a section header: offset, size, link, type
                at = shoff + 64 * rng.randrange(shnum) + rng.choice((4, 24, 32, 40))
                d[at:at + 8] = rng.randrange(1 << 64).to_bytes(8, "little")
        damaged.write_bytes(bytes(d))
        r = run([anchor_tool(), "describe", damaged, "16be", "1893"], timeout=60)
        assert r.returncode in (0, 1), (i, r.returncode, r.stderr)


def test_the_runtime_rebases_a_rebuilt_library(tmp_path):
    """A plan's sites in the program's own shared library, the library
    rebuilt with a function added: the runtime finds them there, and
    decides every allocation as with the library planned."""
    from conftest import PROGRAMS
    program = PROGRAMS / "groups_lib"
    out = tmp_path / "o"
    r = run([COHORT, "optimize", "-o", out, "--", program, tmp_path / "log"])
    assert r.returncode == 0, r.stderr
    plan = (out / "plan").read_text()
    assert "libgroupsctors.so" in plan and "\nanchor " in plan
    lib = tmp_path / "lib" / "libgroupsctors.so"
    lib.parent.mkdir()
    r = subprocess.run(["gcc", "-O2", "-g", "-fPIC", "-shared", "-fomit-frame-pointer", "-o", lib, UNRELATED,
                        ROOT / "tests" / "programs" / "groups_ctors.c", "-Wl,-soname,libgroupsctors.so"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    def decided(env):
        stats = tmp_path / "stats.json"
        r = run([program, tmp_path / "log"], env={**cohort_env(plan=out / "plan", stats=stats), **env})
        assert r.returncode == 0, r.stderr
        return json.loads(stats.read_text())["identification"], r.stderr.decode()
    before, _ = decided({})
    after, err = decided({"LD_LIBRARY_PATH": str(lib.parent)})
    assert "another build of libgroupsctors.so" in err
    assert re.search(r"rebased by its anchors, (\d+) of \1 call sites found", err), err
    assert after == before
