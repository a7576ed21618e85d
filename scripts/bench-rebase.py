"""Plans across a rebuild (issue 80): each workload is profiled on its train
input and planned, then rebuilt three ways from its source with the flags
of the build (`added`: a file that has nothing to do with its allocations
linked in; `reordered`: its functions in another order, by
-ffunction-sections and the linker's --sort-section=name; `O3`: the whole
program at -O3, which changes the planned code itself). For each rebuild:
what `cohort plan --rebase` finds (call sites, selectors kept), and under
cachegrind (fixed geometry) on the cachegrind input the D1 misses of the
plan as it is on the rebuild (the runtime rebases it), against the plan on
the original build and against no plan on the rebuild (what a plan for
another build gave before). Prints one Markdown table.
Usage: .venv/bin/python scripts/bench-rebase.py [OUTDIR] [WORKLOAD ...]
(OUTDIR default demo-out/rebase; a profile found there is reused)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cohort.measure import workloads  # noqa: E402
from cohort.measure.runs import CACHEGRIND_GEOMETRY, clean_environment  # noqa: E402
from cohort.paths import runtime_library  # noqa: E402

COHORT = [sys.executable, "-m", "cohort"]
STOCK = ["-O2", "-g", "-fPIE", "-pie", "-fomit-frame-pointer"]   # CMakeLists.txt's stock_program
CXX = {"objects", "xform", "render"}
SKIP = {"allocbench"}   # a microbenchmark of the runtime, with no plan of its own
UNRELATED = ROOT / "workloads" / "unrelated.c"   # a file with nothing to do with the allocations
VARIANTS = ("added", "reordered", "O3")


def run(argv, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=ROOT, **kw)


def rebuild(name, variant, out):
    """The workload built again, under its own name in out/VARIANT/."""
    cxx = name in CXX
    binary = out / variant / name
    binary.parent.mkdir(parents=True, exist_ok=True)
    flags = STOCK + (["-std=c++17"] if cxx else [])
    sources = [ROOT / "workloads" / name / (f"{name}.cc" if cxx else f"{name}.c")]
    if variant == "added":
        obj = out / "unrelated.o"
        r = run(["gcc", "-O2", "-fPIE", "-c", UNRELATED, "-o", obj])
        if r.returncode:
            raise SystemExit(r.stderr)
        sources.append(obj)
    elif variant == "reordered":
        flags += ["-ffunction-sections", "-Wl,--sort-section=name"]
    elif variant == "O3":
        flags = ["-O3"] + flags[1:]
    r = run(["g++" if cxx else "gcc", *flags, "-o", binary, *sources, "-lm", "-lpthread"])
    if r.returncode:
        raise SystemExit(f"{name} {variant}: {r.stderr}")
    return binary


def d1(binary, args, plan, stdin):
    """D1 misses of one run under cachegrind, with libcohort preloaded (and
    the plan, if any), and the runtime's own lines on stderr."""
    env = clean_environment()
    env["LD_PRELOAD"] = str(runtime_library())
    if plan:
        env["COHORT_PLAN"] = str(plan)
    with open(stdin) if stdin else open(os.devnull) as inp:
        r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHEGRIND_GEOMETRY,
                            "--cachegrind-out-file=/dev/null", str(binary), *args], env=env, stdin=inp,
                           capture_output=True, text=True)
    m = re.search(r"D1\s+misses:\s+([\d,]+)", r.stderr)
    if not m:
        raise SystemExit(f"{binary}: no cachegrind summary: {r.stderr[-500:]}")
    return int(m.group(1).replace(",", "")), [line for line in r.stderr.splitlines() if line.startswith("cohort:")]


def measure(name, out):
    out.mkdir(parents=True, exist_ok=True)
    table = workloads.inputs(name)
    profile = out / "profile.json"
    if not profile.exists():
        stdin = workloads.stdin_file(name, "train", out)
        with open(stdin) if stdin else open(os.devnull) as inp:
            r = run([*COHORT, "profile", "-o", profile, "--", workloads.binary(name), *table["train"]], stdin=inp)
        if r.returncode:
            raise SystemExit(f"{name}: {r.stderr}")
    plan = out / "plan"
    r = run([*COHORT, "plan", profile, "-o", plan, "--force"])
    if r.returncode:
        raise SystemExit(f"{name}: {r.stderr}")
    stdin = workloads.stdin_file(name, "cachegrind", out)
    row = {"workload": name, "plan": d1(workloads.binary(name), table["cachegrind"], plan, stdin)[0]}
    for variant in VARIANTS:
        binary = rebuild(name, variant, out)
        r = run([*COHORT, "plan", "--rebase", binary, plan, "-o", out / f"plan-{variant}", "--force"])
        m = re.search(r"(\d+ of \d+) call sites found, (\d+ of \d+) selectors kept", r.stderr)
        rebased, said = d1(binary, table["cachegrind"], plan, stdin)
        row[variant] = {"sites": m.group(1) if m else "?", "selectors": m.group(2) if m else "?",
                        "d1": rebased, "carried": any("rebased by its anchors" in line for line in said),
                        "unplanned": d1(binary, table["cachegrind"], None, stdin)[0]}
    return row


def main():
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    known = workloads.names()
    out = Path(args.pop(0)) if args and args[0] not in known else ROOT / "demo-out" / "rebase"
    unknown = [a for a in args if a not in known]
    if unknown:
        raise SystemExit(f"bench-rebase.py: no workload {unknown[0]} (workloads: {', '.join(known)})")
    names = args or [w for w in known if w not in SKIP]
    print("| workload | D1, the plan on its build | " + " | ".join(
        f"{v}: sites, selectors, D1 (x plan), no plan" for v in VARIANTS) + " |")
    print("|---|---|" + "---|" * len(VARIANTS))
    for name in names:
        row = measure(name, out / name)
        (out / name / "row.json").write_text(json.dumps(row))
        cells = []
        for v in VARIANTS:
            c = row[v]
            stale = "" if c["carried"] else " (not carried)"
            cells.append(f"{c['sites']}, {c['selectors']}, {c['d1'] / row['plan']:.4f}{stale}, "
                         f"{c['unplanned'] / row['plan']:.3f}")
        print(f"| {name} | {row['plan'] / 1e6:.3f} M | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
