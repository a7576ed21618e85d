"""MO's prefetch advice, followed (issue 13): for each workload, measure its
loads with `cohort loads` on the train input under the next allocator and
under the mo policy, take the distance `cohort explain --prefetch` advises
for the workload's most missing advised load in each layout, rebuild the
workload with -DCOHORT_PREFETCH=that distance (workloads/prefetch.h), and
measure the four programs (each layout, without and with its prefetch); and
the workload's own build in each layout, without and with every advised
prefetch injected at start-up (`cohort prefetch`, `cohort run --prefetch`):
- time on the ref input: interleaved trials, median and quartiles, ratios
  against the first program (glibc without prefetch);
- cachegrind on the cachegrind input (fixed geometry): instructions and D1
  misses.
Usage: .venv/bin/python scripts/prefetch-experiment.py [TRIALS] [WORKLOAD ...]
(default: 11 trials; tokens and splitlists, the workloads whose sources hold
PREFETCH_AHEAD at the advised loads; any other workload gets the injected
variants only)."""

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cohort.measure.loads import candidate, measure, verdict  # noqa: E402
from cohort.measure.runs import CACHEGRIND_GEOMETRY  # noqa: E402
from cohort.measure.bench import script_arguments  # noqa: E402
from cohort.measure.stats import spread  # noqa: E402
from cohort.measure.prefetch import chosen  # noqa: E402
from cohort.formats.prefetchfile import text  # noqa: E402
from cohort.measure.runner import environment, with_prefetch  # noqa: E402
from cohort.measure.workloads import inputs  # noqa: E402

LAYOUTS = {"glibc": None, "mo": "mo"}

TRIALS, names = script_arguments(sys.argv, __doc__, 11)
WORKLOADS = names or ["tokens", "splitlists"]


def source_of(name):
    return ROOT / "workloads" / name / f"{name}.c"


def advised_distance(loads, binary):
    """((stride, distance), load) for the most missing advised load of the
    workload's own binary, or (None, None)."""
    line = loads["cache"]["line"]
    for l in loads["loads"]:
        if candidate(l) and Path(l["module"]).resolve() == binary.resolve():
            v = verdict(l, loads["totals"]["d1_misses"], line, 0.01)
            if v:
                return v, l
    return None, None


def has_hook(name):
    return "PREFETCH_AHEAD" in source_of(name).read_text()


def build(name, distance, out):
    src = source_of(name)
    cmd = ["cc", "-O2", "-g", "-fPIE", "-pie", "-fomit-frame-pointer", "-o", str(out), str(src)]
    if distance is not None:
        cmd.insert(1, f"-DCOHORT_PREFETCH={distance}")
    subprocess.run(cmd, check=True)
    return out


def cachegrind(binary, args, env, work):
    out = Path(work) / "cg.out"
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHEGRIND_GEOMETRY,
                        f"--cachegrind-out-file={out}", str(binary), *args],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    counts = {}
    for key in ("I   refs", "D1  misses"):
        m = re.search(re.escape(key) + r":\s+([\d,]+)", r.stderr)
        counts[key.split()[0]] = int(m.group(1).replace(",", "")) if m else None
    return counts


def run(name, work):
    ins = inputs(name)
    binary = ROOT / "build" / "workloads" / name
    programs = {}   # label -> (binary, env)
    print(f"== {name}: train {' '.join(ins['train'])}, ref {' '.join(ins['ref'])}")
    # The source variants need the PREFETCH_AHEAD hook at the advised load;
    # without it only injection is measured.
    hook = has_hook(name)
    plain = build(name, None, Path(work) / f"{name}-plain") if hook else binary
    for layout, policy in LAYOUTS.items():
        path = Path(work) / f"{name}-{layout}.json"
        data, _ = measure([str(binary), *ins["train"]], path, policy=policy, force=True)
        advised, load = advised_distance(data, binary)
        env = (environment(policy=policy, base=dict(os.environ)) if policy
               else {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
        programs[layout if hook else f"{layout}, stock build"] = (plain, env)
        if advised is None:
            print(f"   {layout}: no advice")
            continue
        injected = Path(work) / f"{name}-{layout}.prefetch"
        injected.write_text(text(chosen(data), path.name))
        if hook:
            programs[f"{layout}, stock build"] = (binary, env)
        programs[f"{layout}, stock + injected"] = (binary, with_prefetch(env, injected))
        if not hook:
            print(f"   {layout}: injected {len(chosen(data))} load(s); no source variant (no PREFETCH_AHEAD hook)")
            continue
        s, p = advised
        where = f"{Path(load['file']).name}:{load['line']}" if load["file"] else hex(load["offset"])
        print(f"   {layout}: advice at {where} ({load['insn']['text']}): stride {s:+d}, prefetch {p:+d} bytes ahead")
        programs[f"{layout}+prefetch {p}"] = (build(name, p, Path(work) / f"{name}-{layout}-pf"), env)
    times = {k: [] for k in programs}
    for _ in range(TRIALS + 1):           # the first round warms up and is dropped
        for k, (b, env) in programs.items():
            t0 = time.perf_counter()
            subprocess.run([str(b), *ins["ref"]], env=env, stdout=subprocess.DEVNULL, check=True)
            times[k].append(time.perf_counter() - t0)
    base = statistics.median(times[next(iter(programs))][1:])
    print(f"   {'program':<26} {'time (s): q1 / median / q3':>30} {'x glibc':>8} {'I refs':>14} {'D1 misses':>12}")
    for k, (b, env) in programs.items():
        q1, med, q3 = spread(times[k][1:])
        cg = cachegrind(b, ins["cachegrind"], env, work)
        print(f"   {k:<26} {q1:9.3f} / {med:7.3f} / {q3:7.3f} {med / base:8.3f} "
              f"{cg['I']:>14,} {cg['D1']:>12,}")


def main():
    with tempfile.TemporaryDirectory(prefix="cohort-prefetch.") as work:
        for name in WORKLOADS:
            run(name, work)


if __name__ == "__main__":
    main()
