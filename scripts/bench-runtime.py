"""The runtime's own costs, measured side by side in one run (issue 2):
pass-through overhead, cost of a grouped allocation, identification cost.
Interleaved trials, medians and quartiles of allocbench's ns/op.
Usage: .venv/bin/python scripts/bench-runtime.py [TRIALS] [SECTION ...]
with sections passthrough, real, grouped, pairs, groups, deep, alt, wrapper
(default: all). The pairs section counts, under cachegrind, what one malloc+free pair
of allocbench churn costs (mode all: no identification), and the groups
section (1, 4, 16 and 63 groups, for allocbench groups and for allocbench
stream, whose requests do not change with G) also counts, under cachegrind
(fixed geometry), the
instructions and D1 misses each malloc+free pair costs: the difference
between runs of 2N and N pairs, divided by N, so start-up is left out.
The pairs section also counts allocbench sizes (a window of 5,000 objects
of LO..HI-1 bytes, larson's shape in one thread) at 8..255, 8..399, 8..999
and 257..319 bytes.
The wrapper section counts the same for allocbench wrapper (two kinds made
through the program's own wrapper and a shared helper, told apart two
frames past the entry): the rest pool alone, against the two kinds grouped
and decided from patched selector and stop sites, and by stack walks; and
what one call through a patched stop or selector site adds (allocbench
calls: a function that allocates nothing)."""

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cohort.plan.handplan import call_sites, write_plan  # noqa: E402
from cohort.measure.runs import CACHEGRIND_GEOMETRY, clean_environment  # noqa: E402
from cohort.measure.bench import script_arguments  # noqa: E402
from cohort.measure.stats import spread  # noqa: E402
from cohort.measure.runner import environment  # noqa: E402

BIN = ROOT / "build" / "workloads" / "allocbench"
OUT = ROOT / "demo-out"
TRIALS, names = script_arguments(sys.argv, __doc__, 11)
GROUP_COUNTS = (1, 4, 16, 63)
SECTIONS = set(names) or {"passthrough", "real", "grouped", "pairs", "groups", "deep", "alt", "wrapper"}


def plans():
    deep = call_sites(BIN, "run_deep", "descend")[0]
    entry = call_sites(BIN, "leaf_alloc", "malloc")[0]
    other = call_sites(BIN, "main", "malloc")[0]
    return {
        # the selector site is near the outermost frame: a full walk that matches
        "walk-match": write_plan(OUT / "ab-walk.plan", [BIN], [(0, deep, None)], ["deep"], [(0, [0])]),
        # the selector site is never on the stack: a full walk that finds nothing
        "walk-nomatch": write_plan(OUT / "ab-none.plan", [BIN], [(0, other, None)], ["x"], [(0, [0])]),
        # the entry site is cold: the quick test
        "cold": write_plan(OUT / "ab-cold.plan", [BIN], [(0, deep, None), (0, entry, "cold")],
                           ["deep"], [(0, [0])]),
    }


def alt_plans():
    """For the alternating chains: (plan, COHORT_PATCH) per case. "ab" puts
    each chain's objects in its own group by the call of leaf_alloc at the
    chain's end; "ab-recursive" by the chain's recursive call, so that a
    patched run goes through the stub at every level."""
    alt = call_sites(BIN, "main", "run_alt")[0]
    other = call_sites(BIN, "main", "malloc")[0]
    entry = call_sites(BIN, "leaf_alloc", "malloc")[0]
    a_leaf = call_sites(BIN, "chain_a", "leaf_alloc")[0]
    b_leaf = call_sites(BIN, "chain_b", "leaf_alloc")[0]
    a_rec = call_sites(BIN, "chain_a", "chain_a")[0]
    b_rec = call_sites(BIN, "chain_b", "chain_b")[0]
    ab = write_plan(OUT / "ab-leaf.plan", [BIN], [(0, a_leaf, None), (0, b_leaf, None)], ["a", "b"],
                    [(0, [0]), (1, [1])])
    # as cohort plan writes it: the entry site marked walk, so that its call
    # is patched to decide from the activations with no quick test
    ab_entry = write_plan(OUT / "ab-leaf-entry.plan", [BIN], [(0, entry, "walk"), (0, a_leaf, None),
                                                              (0, b_leaf, None)], ["a", "b"], [(0, [1]), (1, [2])])
    rec = write_plan(OUT / "ab-rec.plan", [BIN], [(0, a_rec, None), (0, b_rec, None)], ["a", "b"],
                     [(0, [0]), (1, [1])])
    return {
        "walk-match": (write_plan(OUT / "ab-alt.plan", [BIN], [(0, alt, None)], ["alt"], [(0, [0])]), "0"),
        "walk-nomatch": (write_plan(OUT / "ab-none.plan", [BIN], [(0, other, None)], ["x"], [(0, [0])]), "0"),
        # decision paths (plan version 5): chain_a's objects are told from
        # chain_b's one frame past the entry, whatever the depth
        "path": (write_plan(OUT / "ab-path.plan", [BIN],
                            [(0, entry, "walk"), (0, a_leaf, None), (0, b_leaf, None)], ["a", "b"],
                            [(0, [1]), (1, [2])], version=5,
                            paths=[([0, 1], "group=0"), ([0, 2], "group=1")]), "0"),
        "ab walked": (ab, "0"),
        "ab patched": (ab, "1"),
        "ab patched, entry walk": (ab_entry, "1"),
        "ab-recursive walked": (rec, "0"),
        "ab-recursive patched": (rec, "1"),
    }


def wrapper_plans():
    """For allocbench wrapper: {case: plan}. "rest" sends both kinds to the
    rest pool with no identification; "grouped" is what cohort plan writes
    for them: the entry (xalloc's call of malloc) marked walk, each kind's
    call of new_cell a selector and a stop site of its group."""
    entry = call_sites(BIN, "xalloc", "malloc")[0]
    red = call_sites(BIN, "make_red", "new_cell")[0]
    blue = call_sites(BIN, "make_blue", "new_cell")[0]
    return {
        "rest": write_plan(OUT / "ab-wrap-rest.plan", [BIN], [], ["rest"], [], version=4, rest=0),
        "grouped": write_plan(OUT / "ab-wrap.plan", [BIN], [(0, entry, "walk"), (0, red, "stop=0"),
                                                          (0, blue, "stop=1")], ["red", "blue", "rest"],
                              [(0, [1]), (1, [2])], version=4, rest=2),
    }


def call_plans():
    """For allocbench calls: {case: plan}. The call of tally, which
    allocates nothing, unpatched (a plan of the rest pool alone), patched
    as a stop site, and patched as a selector site that is no stop."""
    site = call_sites(BIN, "run_calls", "tally")[0]
    return {
        "unpatched": OUT / "ab-wrap-rest.plan",
        "stop site": write_plan(OUT / "ab-calls-stop.plan", [BIN], [(0, site, "stop=0")], ["t", "rest"],
                                [(0, [0])], version=4, rest=1),
        "selector site": write_plan(OUT / "ab-calls-sel.plan", [BIN], [(0, site, None)], ["t", "rest"],
                                    [(0, [0])], version=4, rest=1),
    }


def groups_plan(n):
    """Each of allocbench's first n group_alloc functions' malloc call site
    puts its allocations in a group of its own (an entry verdict: no walk)."""
    sites = [(0, call_sites(BIN, f"group_alloc_{i // 8}{i % 8}", "malloc")[0], f"group={i}") for i in range(n)]
    return write_plan(OUT / f"ab-groups-{n}.plan", [BIN], sites, [f"g{i}" for i in range(n)],
                      [(i, [i]) for i in range(n)], version=2)


def cachegrind_counts(argv, env):
    """(instructions, D1 misses) of one run under cachegrind."""
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHEGRIND_GEOMETRY,
                        "--cachegrind-out-file=/dev/null", *[str(a) for a in argv]],
                       env=env, capture_output=True, text=True, check=True)
    ir = re.search(r"I\s+refs:\s+([\d,]+)", r.stderr)
    d1 = re.search(r"D1\s+misses:\s+([\d,]+)", r.stderr)
    return int(ir.group(1).replace(",", "")), int(d1.group(1).replace(",", ""))


def per_pair(make_argv, env, n):
    """Instructions and D1 misses per pair: (run of 2n - run of n) / n."""
    a, b = cachegrind_counts(make_argv(n), env), cachegrind_counts(make_argv(2 * n), env)
    return (b[0] - a[0]) / n, (b[1] - a[1]) / n


def ns(argv, env):
    """allocbench's own figure; for any other program, wall-clock ms."""
    t0 = time.perf_counter()
    r = subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, check=True)
    wall = (time.perf_counter() - t0) * 1e3
    m = re.search(r"([\d.]+) ns/op", r.stdout)
    return float(m.group(1)) if m else wall


# An allocation-heavy Python script: dicts, lists, strings, tuples.
PY_SCRIPT = """
d = {}
for i in range(300000):
    d[str(i)] = [i, (i, str(i * 7)), {"k": i}]
s = 0
for k, v in d.items():
    s += len(k) + v[0] + len(v[1][1])
print(s)
"""


def measure(cases):
    """cases: {name: (argv, env)}; all run once per round, rounds interleaved."""
    got = {k: [] for k in cases}
    for name, (argv, env) in cases.items():
        ns(argv, env)  # warm-up
    for _ in range(TRIALS):
        for name, (argv, env) in cases.items():
            got[name].append(ns(argv, env))
    return got


def show(title, got, base, unit="ns/op"):
    print(f"\n{title}")
    b = statistics.median(got[base])
    for k, v in got.items():
        lo, m, hi = spread(v)
        print(f"  {k:<28} median {m:7.2f} {unit}  (p25 {lo:6.2f}, p75 {hi:6.2f})  x{m / b:5.3f}")


def main():
    OUT.mkdir(exist_ok=True)   # the plans of the deep, alt and groups sections
    plain = clean_environment()
    off = environment(mode="off")
    jem = environment(allocator="jemalloc", mode="off")
    jem_plain = dict(plain, LD_PRELOAD="/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    every = environment(mode="all")
    print(f"allocbench, {TRIALS} interleaved trials per case; ratios against the first line")

    churn = [BIN, "churn", 20_000_000]
    if "passthrough" in SECTIONS:
        show("pass-through: malloc+free pairs, 16..256 B, window of 1024",
             measure({"glibc": (churn, plain), "libcohort off -> glibc": (churn, off),
                      "jemalloc": (churn, jem_plain), "libcohort off -> jemalloc": (churn, jem)}), "glibc")

    # The same on real allocation-heavy programs, in wall-clock time.
    if "real" in SECTIONS:
        with tempfile.TemporaryDirectory() as tmp:
            words = Path(tmp) / "words"
            words.write_text("".join(f"{(i * 2654435761) % 1000003:x} line {i}\n" for i in range(400_000)))
            real = {"python3": ["python3", "-c", PY_SCRIPT], "sort": ["sort", words]}
            for name, argv in real.items():
                show(f"pass-through, {name} (wall clock)",
                     measure({"glibc": (argv, plain), "libcohort off -> glibc": (argv, off)}), "glibc", "ms")

    if "grouped" in SECTIONS:
        bump = [BIN, "bump", 10_000_000]
        checked = dict(every, COHORT_CHECK="1")   # redzones around every grouped block
        show("grouped allocation: 10M mallocs of 32 B (no identification: mode all)",
             measure({"glibc": (bump, plain), "jemalloc": (bump, jem_plain), "cohort group": (bump, every),
                      "cohort group, COHORT_CHECK=1": (bump, checked)}), "glibc")
        show("grouped churn: malloc+free pairs (mode all)",
             measure({"glibc": (churn, plain), "jemalloc": (churn, jem_plain), "cohort group": (churn, every),
                      "cohort group, COHORT_CHECK=1": (churn, checked)}), "glibc")

    if "pairs" in SECTIONS:
        print("\ncachegrind, per malloc+free pair of allocbench churn (loop included, about 26 instructions)")
        for name, env in (("glibc", plain), ("jemalloc", jem_plain), ("cohort group (mode all)", every)):
            i, d = per_pair(lambda n: [BIN, "churn", n], env, 200_000)
            print(f"  {name:<28} {i:7.1f} instructions  {d:6.3f} D1 misses")
        # Above 256 bytes the group allocator's bins are mixed (docs/runtime.md,
        # "Holes of a nearby size"): larson's shape in one thread.
        for lo, hi in ((8, 256), (8, 400), (8, 1000), (257, 320)):
            print(f"cachegrind, per malloc+free pair of allocbench sizes, {lo}..{hi - 1} bytes, window of 5,000")
            for name, env in (("glibc", plain), ("jemalloc", jem_plain), ("cohort group (mode all)", every)):
                i, d = per_pair(lambda n: [BIN, "sizes", n, lo, hi], env, 400_000)
                print(f"  {name:<28} {i:7.1f} instructions  {d:6.3f} D1 misses")

    # Churn spread over 1..63 groups in rotation: the allocator's own
    # metadata must not make a pair dearer as groups are added. 63 is the
    # most a plan can name (the 64th group is the pool API's). "groups"
    # gives each function three sizes of its own, so its sizes (and every
    # allocator's misses) grow with G; "stream" makes the same requests
    # whatever G, so that only the spread over groups changes.
    if "groups" in SECTIONS:
        allocators = ("glibc", "jemalloc", "cohort groups")
        for test, sizes in (("groups", "three sizes per function, 16..256 B"),
                            ("stream", "the same requests whatever G: 16, 96 or 176 B")):
            counts = {}
            for g in GROUP_COUNTS:
                run = [BIN, test, 10_000_000, g]
                envs = dict(zip(allocators, (plain, jem_plain, environment(plan=groups_plan(g)))))
                show(f"allocbench {test}: churn over {g} group(s) in rotation, {sizes}, window of 1024",
                     measure({name: (run, env) for name, env in envs.items()}), "glibc")
                for name, env in envs.items():
                    counts[(g, name)] = per_pair(lambda n: [BIN, test, n, g], env, 200_000)
            print(f"\ncachegrind, allocbench {test}, per malloc+free pair (loop included), "
                  "D1 32 KiB 8-way, LL 1 MiB 16-way")
            print(f"  {'groups':>6}  " + "  ".join(f"{name:>24}" for name in allocators))
            print(f"  {'':>6}  " + "  ".join(f"{'instr':>11} {'D1 misses':>12}" for _ in allocators))
            for g in GROUP_COUNTS:
                print(f"  {g:>6}  " + "  ".join(f"{counts[(g, name)][0]:11.1f} {counts[(g, name)][1]:12.3f}"
                                                for name in allocators))

    if "deep" in SECTIONS:
        p = plans()
        for depth in (3, 15):
            deep = [BIN, "deep", 2_000_000, depth]
            cases = {"glibc": (deep, plain), "libcohort off": (deep, off), "mode all (no identification)": (deep, every)}
            cases.update({f"plan {k}": (deep, environment(plan=v)) for k, v in p.items()})
            cases.update({f"plan {k}, walked": (deep, environment(plan=v, patch="0")) for k, v in p.items()})
            show(f"identification: malloc+free {depth} calls deep, -O2 PIE without frame pointers",
                 measure(cases), "mode all (no identification)")

    # Every walk steps through the frames itself here: consecutive
    # allocations share nothing below main's loop. "mode all" is the same
    # grouped allocation with no identification at all: a case's cost of
    # identification per allocation is its time minus that line's.
    if "wrapper" in SECTIONS:
        plans = wrapper_plans()
        n = 200_000
        base = per_pair(lambda k: [BIN, "wrapper", k], environment(plan=plans["rest"]), n)
        print("\nidentification through a wrapper (allocbench wrapper: two kinds through xalloc and a shared "
              "new_cell, told apart two frames out), cachegrind, per malloc+free pair")
        for name, env in (("rest pool alone", environment(plan=plans["rest"])),
                          ("grouped, patched selector and stop sites", environment(plan=plans["grouped"])),
                          ("grouped, stack walks (COHORT_PATCH=0)", environment(plan=plans["grouped"], patch="0"))):
            ir, d1 = per_pair(lambda k: [BIN, "wrapper", k], env, n)
            print(f"  {name:<44} {ir:7.1f} instructions ({ir - base[0]:+6.1f}), {d1:5.2f} D1 misses")
        print("calls that allocate nothing (allocbench calls), cachegrind, per call")
        calls = call_plans()
        plain_call = per_pair(lambda k: [BIN, "calls", k], environment(plan=calls["unpatched"]), n)[0]
        for name, plan in calls.items():
            ir = per_pair(lambda k: [BIN, "calls", k], environment(plan=plan), n)[0]
            print(f"  {name:<44} {ir:7.1f} instructions ({ir - plain_call:+6.1f})")
        cases = {k: ([BIN, "wrapper", 2_000_000], environment(plan=v)) for k, v in plans.items()}
        cases["grouped, walked"] = ([BIN, "wrapper", 2_000_000], environment(plan=plans["grouped"], patch="0"))
        show("identification through a wrapper, timed", measure(cases), "rest")
        show("calls that allocate nothing, timed (ns a call)",
             measure({k: ([BIN, "calls", 20_000_000], environment(plan=v)) for k, v in calls.items()}), "unpatched")

    if "alt" in SECTIONS:
        for depth in (3, 15, 40):
            alt = [BIN, "alt", 1_000_000, depth]
            cases = {"glibc": (alt, plain), "libcohort off": (alt, off), "mode all (no identification)": (alt, every)}
            cases.update({f"plan {k}": (alt, environment(plan=v, patch=patch))
                          for k, (v, patch) in alt_plans().items()})
            show(f"identification, stacks alternating: two {depth}-deep chains with different frames",
                 measure(cases), "mode all (no identification)")


if __name__ == "__main__":
    main()
