"""`cohort tune`: the best plan for a program, chosen by measurement.

HALO tuned its affinity distance by hand (section 5.1, Figure 12); this
does it for every plan policy and the planner's parameters, on the user's
own program:

1. profile the training run (with the heap trace, for hds), and again at
   each other affinity distance of the grid;
2. make every candidate plan: each plan policy with its defaults, and halo
   with each grid value of one parameter changed at a time; candidates
   whose plans come out identical are screened once;
3. screen them deterministically: cachegrind on the training input, scored
   by a rough cycle count (instructions + 10 x D1 misses + 100 x LL data
   misses), against glibc's;
4. confirm the best few, and always the default plan (what `cohort
   optimize` makes), by interleaved timing on the reference input with
   `cohort bench`, beside the allocator alone;
5. keep the default plan as DIR/plan unless a candidate is faster beyond
   noise (its quartile band wholly below the default's; the lowest median
   of those that are), and write the evidence to DIR/tune.md. When the allocator alone is fastest, Cohort
   does not pay on this program in front of it: DIR/plan is then a plan
   with no group, under which `cohort run` leaves the runtime out.

Every measurement is in front of one allocator (`--allocator`, glibc by
default): a plan that beats glibc can lose to jemalloc, whose small-object
path is cheaper (docs/planner.md, "The rest pool against jemalloc").
The grid and the score are fixed, and the same for every program."""

import os
import shlex
import sys
from pathlib import Path

from cohort.measure.bench import PROFILE_SWEEPS, SWEEPS, bench, sweep_name, sweep_profiles
from cohort.measure.runs import alone_environment, cachegrind, clean_environment
from cohort.measure.stats import MISS_WEIGHTS, beyond_noise, score
from cohort.errors import CohortError
from cohort.files import REPORT_MARK, claim, made_dirs, write_output
from cohort.paths import allocator_library
from cohort.plan.planner import PLAN_DEFAULTS, plan_command
from cohort.policies import PLAN_POLICIES
from cohort.measure.profile import TRACE_BUDGET, profile
from cohort.measure.runner import check_input, environment, exit_words, resolve_program

# One parameter changed at a time from the defaults (128, 0.05, 16, 0.98,
# 256): the rest pool's limit up to the runtime's default max-size.
GRID = {
    "affinity-distance": (32, 512),
    "tolerance": (0.02, 0.2),
    "max-members": (4, 64),
    "entry-purity": (0.9, 1.0),
    "rest-max": (4096,),
    "rest-shape": ("one", "classes"),   # one of them is the default plan's: its twin is screened out
    "line-offsets": ("none",),          # the same as the default plan where it moved no pool
}
DEFAULT = "halo"
ALONE = "none"   # the allocator alone: no plan, no runtime


def plan_body(path):
    """A plan's lines without comments: two candidates with equal bodies place alike."""
    return [ln for ln in Path(path).read_text().splitlines() if not ln.lstrip().startswith("#")]


def products(outdir):
    """[(path, kind)] every tune writes directly into outdir (bench's own
    products in outdir/confirm are claimed by bench)."""
    out = [(outdir / "profile.json", "profile"), (outdir / "plan", "plan"), (outdir / "tune.md", "report"),
           (outdir / f"plan-{ALONE}", "plan")]
    out += [(path, "profile") for path in distance_profiles(outdir).values()]
    out += [(outdir / f"plan-{name}", "plan") for name, _, _ in candidates()]
    return out


def distance_profiles(outdir):
    """{affinity distance: path} of the profiles made again at the grid's
    other affinity distances, named as bench --sweep names them."""
    return sweep_profiles(outdir, ("affinity-distance", GRID["affinity-distance"]))


def candidates():
    """[(name, profile value of affinity distance or None, planner keywords)]."""
    out = [(p, None, dict(PLAN_DEFAULTS, policy=p)) for p in PLAN_POLICIES]
    for param, values in GRID.items():
        keyword = SWEEPS[param][3]
        for v in values:
            if param in PROFILE_SWEEPS:
                out.append((sweep_name(param, v), v, dict(PLAN_DEFAULTS)))
            else:
                out.append((sweep_name(param, v), None, dict(PLAN_DEFAULTS, **{keyword: v})))
    return out


def alone_plan(default_plan, path, force):
    """A plan with no group, from the default plan: its header and module
    lines, so that it names the same program, and nothing else. Under it
    `cohort run` and `cohort bench` leave the runtime out."""
    keep = [ln for ln in Path(default_plan).read_text().splitlines()
            if ln.split()[:1] in (["cohort-plan"], ["max-size"], ["module"], ["end"])]
    text = "\n".join([keep[0], "# made by cohort tune: the allocator alone was fastest; no group", *keep[1:]]) + "\n"
    write_output(path, text, "plan", force)


def tune(target, outdir, ref=None, trials=7, keep=3, force=False, log=None, stdin=None, ref_stdin=None,
         allocator="glibc"):
    """The whole `cohort tune`. target: the program and its training
    arguments; ref: the reference arguments (a string), timed to confirm
    (default: the training arguments). stdin: the training run's standard
    input (a file; default /dev/null); ref_stdin: the reference run's
    (default: stdin's). allocator: the one every run is in front of.
    Returns the summary dict."""
    log = log or (lambda m: print(m, file=sys.stderr))
    outdir = Path(outdir)
    if trials < 1 or keep < 1:
        raise CohortError("--trials and --keep must be at least 1")
    allocator_library(allocator)   # known and installed, or a one-line error
    stdin = check_input(stdin, "--stdin", rereadable=True) if stdin is not None else None
    ref_stdin = check_input(ref_stdin, "--ref-stdin", rereadable=True) if ref_stdin is not None else stdin
    prog = resolve_program(target)
    ref_argv = [target[0], *(shlex.split(ref) if ref is not None else target[1:])]
    if outdir.exists() and not outdir.is_dir():
        raise CohortError(f"{outdir} exists and is not a directory")
    with made_dirs(outdir):
        for path, kind in products(outdir):
            claim(path, kind, force)
        return _tune(target, prog, outdir, ref_argv, trials, keep, force, log, stdin, ref_stdin, allocator)


def _tune(target, prog, outdir, ref_argv, trials, keep, force, log, stdin=None, ref_stdin=None, allocator="glibc"):
    cands = candidates()
    # 1. profiles
    log(f"cohort tune: profiling {' '.join(target)} (with the heap trace)")
    # Every run reads --stdin's file, or /dev/null: never tune's own input,
    # which the screening and timed runs could not read again.
    train_in = stdin or os.devnull
    _, rc = profile(target, outdir / "profile.json", force=force, trace_budget=TRACE_BUDGET, stdin=train_in)
    if rc != 0:
        raise CohortError(f"the training run {' '.join(target)} failed ({exit_words(rc)}); "
                          f"its profile is in {outdir / 'profile.json'}")
    sources = {None: outdir / "profile.json", **distance_profiles(outdir)}
    for v in GRID["affinity-distance"]:
        log(f"cohort tune: profiling again with affinity distance {v}")
        _, rc = profile(target, sources[v], force=force, affinity_distance=v, stdin=train_in)
        if rc != 0:
            raise CohortError(f"the training run failed with affinity distance {v} ({exit_words(rc)})")

    # 2. plans, each body screened once
    made, skipped, same_as, bodies = [], {}, {}, {}
    for name, ad, params in cands:
        path = outdir / f"plan-{name}"
        try:
            plan_command(sources[ad], path, force=force, **params)
        except CohortError as e:
            skipped[name] = str(e)
            continue
        body = tuple(plan_body(path))
        if body in bodies:
            same_as[name] = bodies[body]
        else:
            bodies[body] = name
            made.append((name, path))
    log(f"cohort tune: {len(cands)} candidates, {len(made)} distinct plans"
        + (f", {len(skipped)} could not be made" if skipped else ""))

    # 3. screening on the training input
    base_env = clean_environment()
    baseline = cachegrind(list(target), alone_environment(base_env, allocator_library(allocator)), stdin=stdin)
    if "error" in baseline:
        raise CohortError(f"cachegrind could not run the training input: {baseline['error']}")
    screened = {}
    for i, (name, path) in enumerate(made, 1):
        log(f"cohort tune: screening {i}/{len(made)}: {name}")
        cg = cachegrind(list(target), environment(plan=path, allocator=allocator, base=base_env), stdin=stdin)
        if "error" not in cg and cg["output_sha256"] != baseline["output_sha256"]:
            cg["error"] = f"its output differs from {allocator}'s"
        screened[name] = cg
    ok = [n for n, _ in made if "error" not in screened[n]]
    if DEFAULT not in ok:
        raise CohortError(f"the default plan could not be screened: "
                          f"{screened.get(DEFAULT, {}).get('error', skipped.get(DEFAULT, 'not made'))}")
    ranked = sorted(ok, key=lambda n: (score(screened[n]), n))
    shortlist = list(dict.fromkeys([DEFAULT] + ranked[:keep]))
    log(f"cohort tune: confirming {', '.join(shortlist)} by timing {' '.join(ref_argv)}")

    # 4. confirmation by interleaved timing
    paths = dict(made)
    results = bench(ref_argv, outdir / "confirm", trials=trials, warmup=1, allocators=(allocator,),
                    plan=paths[DEFAULT], random_control=False, all_control=False, force=force, log=log,
                    policies=("halo",), extra_plans=[(n, paths[n]) for n in shortlist if n != DEFAULT],
                    stdin=ref_stdin)
    # The allocator alone is a candidate too: the baseline of the same rounds.
    config = {ALONE: allocator, **{n: (f"cohort+{allocator}" if n == DEFAULT else n) for n in shortlist}}
    summary = results["summary"]
    timed = [n for n in shortlist if summary[config[n]]["ok_trials"]]
    if DEFAULT not in timed:
        raise CohortError(f"the default plan's timed runs failed: see {outdir / 'confirm' / 'results.json'}")
    if summary[allocator]["ok_trials"]:
        timed.append(ALONE)
    best = pick(timed, summary, config)

    # 5. keep the best plan, and the evidence
    alone_plan(paths[DEFAULT], outdir / f"plan-{ALONE}", force)
    paths[ALONE] = outdir / f"plan-{ALONE}"
    write_output(outdir / "plan", Path(paths[best]).read_text(), "plan", force)
    text = report(target, ref_argv, cands, screened, baseline, skipped, same_as, shortlist, results, config, best,
                  trials, allocator)
    write_output(outdir / "tune.md", text, "report", force)
    base = summary[allocator]["wall_median_s"]
    default = summary[config[DEFAULT]]["wall_median_s"]
    mine = summary[config[best]]["wall_median_s"]
    return {"best": best, "plan": outdir / "plan", "report": outdir / "tune.md", "allocator": allocator,
            "vs_default": mine / default if default else None, "vs_allocator": mine / base if base else None}


def pick(timed, summary, config):
    """The default plan, unless a timed candidate (the allocator alone is
    one) is faster beyond noise; then the fastest of those that are."""
    faster = beyond_noise({n: summary[config[n]] for n in timed}, DEFAULT)
    return faster[0] if faster else DEFAULT


def report(target, ref_argv, cands, screened, baseline, skipped, same_as, shortlist, results, config, best,
           trials, allocator="glibc"):
    base_score = score(baseline)
    a = allocator
    lines = [REPORT_MARK, f"# cohort tune: {Path(target[0]).name}", "",
             f"Training run `{' '.join(target)}`; reference run `{' '.join(ref_argv)}`; every run in front of "
             f"{a}.", "", "## Decision", ""]
    s = results["summary"]
    g, d, b = (s[n]["wall_median_s"] for n in (a, config["halo"], config[best]))
    if best == ALONE:
        lines.append(f"Kept **{ALONE}**: {a} alone was the fastest on the reference input (median {b:.3f} s; "
                     f"the default plan {d / g:.3f} of it). Cohort does not pay on this program in front of "
                     f"{a}: DIR/plan declares no group, and `cohort run --plan` leaves the runtime out.")
    else:
        lines.append(f"Kept **{best}**: median {b:.3f} s on the reference input, {b / g:.3f} of {a}'s and "
                     f"{b / d:.3f} of the default plan's ({DEFAULT}, what `cohort optimize` makes)"
                     + (" (it is the default plan)" if best == DEFAULT else "") + "."
                     + (" No other candidate is faster beyond noise: each one's quartile band overlaps the "
                        "default's or lies above it." if best == DEFAULT else ""))
    lines += ["", "## Screening: cachegrind on the training input", "",
              f"Score: instructions + {MISS_WEIGHTS['D1']} x D1 misses + {MISS_WEIGHTS['LL']} x LL data "
              f"misses (estimated cycles), over {a}'s ({base_score:,}). Deterministic.", "",
              f"| candidate | score vs {a} | D1 vs {a} | instructions vs {a} | same plan as |",
              "|---|---|---|---|---|"]
    order = sorted(screened, key=lambda n: (score(screened[n]) if "error" not in screened[n] else float("inf"), n))
    for n in order:
        cg = screened[n]
        twins = ", ".join(k for k, v in same_as.items() if v == n) or "-"
        if "error" in cg:
            lines.append(f"| {n} | failed: {cg['error']} | - | - | {twins} |")
            continue
        lines.append(f"| {n}{' (shortlisted)' if n in shortlist else ''} | {score(cg) / base_score:.3f} | "
                     f"{cg['D1_misses'] / max(baseline['D1_misses'], 1):.3f} | "
                     f"{cg['I_refs'] / max(baseline['I_refs'], 1):.3f} | {twins} |")
    for n, why in skipped.items():
        lines.append(f"| {n} | not made: {why} | - | - | - |")
    lines += ["", f"## Confirmation: {trials} interleaved trials on the reference input", "",
              f"| candidate | median s | p25 | p75 | vs {a} | vs default |", "|---|---|---|---|---|---|"]
    for n in [*shortlist, ALONE]:
        x = s[config[n]]
        if not x["ok_trials"]:
            lines.append(f"| {n} | failed | - | - | - | - |")
            continue
        m = x["wall_median_s"]
        lines.append(f"| {'**' + n + '**' if n == best else n} | {m:.3f} | {x['wall_p25_s']:.3f} | "
                     f"{x['wall_p75_s']:.3f} | {m / g:.3f} | {m / d:.3f} |")
    lines += ["", f"{ALONE}: {a} alone, without Cohort. The full timings are in confirm/results.json.", ""]
    return "\n".join(lines)
