"""Confirmation by measurement: `cohort optimize --ref 'ARGS'` (docs/planner.md,
"Confirmed on a larger input").

The planner decides on a model of the training run, priced at the scale the
plan runs at (scale.py). A model can be wrong both ways, so before the plan
is written it is measured on a larger input the user names, under cachegrind
in the fixed geometry, scored as `cohort tune` screens (estimated cycles:
instructions + 10 x D1 misses + 100 x LL data misses), in front of the
allocator it will run with:

1. the allocator alone, whose output every other run must print too;
2. the plan; then, one group at a time, from the one the model thought least
   of, the plan made again without it: a group without which the plan
   scores no worse is dropped (what costs as much as it gains is not kept);
3. the plan with its rest pool against the same plan with every ungrouped
   object left to the allocator (`--rest none`);
4. the result against the allocator alone: if the allocator alone scores
   better, the plan keeps no group.

Then (unless --ref-trials 0) what is left is timed against its fallbacks
and against its rest pool in the other shape (one pool in allocation order,
or one per size class): the clock, not cachegrind, decides the shape,
since the layout that misses less in cachegrind's model can run slower
(docs/planner.md, "The rest pool's shape, measured").

Every step is reported with its figures. A --ref run that fails, or whose
output differs from the allocator alone's, stops the confirmation with one
line; the plan is then written unconfirmed."""

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cohort.measure.runs import alone_environment, cachegrind, clean_environment
from cohort.measure.bench import allocator_plan, bench
from cohort.errors import CohortError
from cohort.paths import allocator_library
from cohort.files import write_output
from cohort.plan.planner import PLAN_DEFAULTS, load_validations, make_plan, plan_command, render
from cohort.present.explain import plan_and_explain
from cohort.formats.profilefile import load_profile
from cohort.measure.runner import environment, exit_words
from cohort.measure.stats import beyond_noise, score


def confirmation_run(prog, text, stdin, trials, option):
    """The run a plan is confirmed on, from its options (optimize's --ref,
    bench's --confirm: `option` names it), checked before anything runs:
    (argv, standard input or None), or None without it; a one-line
    CohortError for a bad one."""
    import shlex
    from cohort.measure.runner import check_input
    if trials < 0:
        raise CohortError(f"{option}-trials must be 0 or more, not {trials}")
    if text is None:
        if stdin is not None:
            raise CohortError(f"{option}-stdin is the standard input of the {option} run: give {option} too")
        return None
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise CohortError(f"{option} {text!r}: {e}") from None
    return [prog, *words], check_input(stdin, f"{option}-stdin", rereadable=True) if stdin is not None else None


# How the report says each shape of the rest pool.
SHAPE_WORDS = {"one": "in one pool, in allocation order", "classes": "split by size class"}


@dataclass
class Confirmation:
    """What the measurement decided: groups dropped (each by its
    contexts), the rest pool's verdict and shape, and the report's lines."""
    exclude: list = field(default_factory=list)
    rest: str = "auto"
    shape: str = "auto"
    lines: list = field(default_factory=list)
    line_offsets: str = "auto"

    def params(self):
        """The planner's keywords for the plan the measurement kept."""
        return dict(exclude=self.exclude, rest=self.rest, rest_shape=self.shape, line_offsets=self.line_offsets)


def figures(cg, base):
    """One measurement against the allocator alone's, for the report."""
    return (f"score {score(cg) / score(base):.3f}, instructions {cg['I_refs'] / max(base['I_refs'], 1):.3f}, "
            f"D1 misses {cg['D1_misses'] / max(base['D1_misses'], 1):.3f}, "
            f"LL misses {cg['LLd_misses'] / max(base['LLd_misses'], 1):.3f}")


def confirm(profile_path, ref_argv, params, validate=(), allocator="glibc", stdin=None, log=None, trials=5,
            who="cohort optimize", loaded=None):
    """Measure the plan that make_plan makes from profile_path with
    `params` on the run ref_argv (its standard input: stdin, or /dev/null)
    and return the Confirmation. CohortError when the run fails, or prints
    other output under a plan than under the allocator alone. trials: the
    rounds of the timing that follows the cachegrind steps (0: none). who:
    the command its progress lines are said by. loaded: the profile at
    profile_path, already read (planner.plan_command)."""
    log = log or (lambda m: None)
    lib = allocator_library(allocator)
    base_env = clean_environment()
    run = " ".join(ref_argv)
    log(f"{who}: confirming on `{run}` under cachegrind: {allocator} alone")
    alone = cachegrind(list(ref_argv), alone_environment(base_env, lib), stdin=stdin)
    if "error" in alone:
        raise CohortError(f"the confirmation run `{run}` failed in front of {allocator} alone "
                          f"({exit_words(alone['exit']) if alone['exit'] else alone['error']}); the plan is "
                          f"not confirmed")
    # Read once: a large program's profile takes seconds to load, and every
    # variant below is planned from it.
    profile = loaded if loaded is not None else load_profile(profile_path)
    validations = load_validations(profile, validate, f"profile {profile_path}")

    def planned(path, exclude, rest, shape=None, line_offsets=None):
        plan = make_plan(profile, validations=validations,
                         **dict(params, exclude=exclude, rest=rest, rest_shape=shape or out.shape,
                                line_offsets=line_offsets or out.line_offsets))
        write_output(path, render(plan, profile, source=Path(profile_path).name), "plan", True)
        return plan

    out = Confirmation(rest=params.get("rest", "auto"), shape=params.get("rest_shape", "auto"),
                       line_offsets=params.get("line_offsets", "auto"))
    out.lines.append(f"Confirmed on `{run}` (cachegrind, fixed geometry), in front of {allocator}; every figure "
                     f"is over {allocator} alone's (score: instructions + 10 x D1 misses + 100 x LL misses)")

    with tempfile.TemporaryDirectory(prefix="cohort-confirm-") as tmp:
        def measured(exclude, rest, what):
            path = Path(tmp) / f"plan-{len(list(Path(tmp).iterdir()))}"
            plan = planned(path, exclude, rest)
            log(f"{who}: confirming: {what}")
            cg = cachegrind(list(ref_argv), environment(plan=path, allocator=allocator, base=base_env),
                            stdin=stdin)
            if "error" in cg:
                raise CohortError(f"the confirmation run `{run}` failed under {what} ({cg['error']}); the plan is "
                                  f"not confirmed")
            if cg["output_sha256"] != alone["output_sha256"]:
                raise CohortError(f"the confirmation run `{run}` printed other output under {what} than in front of "
                                  f"{allocator} alone; the plan is not confirmed")
            return plan, cg

        plan, best = measured(out.exclude, out.rest, "the plan")
        out.lines.append(f"  the plan ({len(plan.groups)} groups): {figures(best, alone)}")
        # The group the model thought least of first: its margin of saving over cost.
        order = sorted(range(len(plan.groups)), key=lambda i: plan.worth[i].saving_ns - plan.worth[i].cost_ns)
        for members, name in [(plan.groups[i].members, plan.groups[i].name) for i in order]:
            smaller, without = measured(out.exclude + [members], out.rest, f"the plan without {name}")
            if score(without) <= score(best):
                out.exclude.append(members)
                plan = smaller
                out.lines.append(f"  group {name} (contexts {' '.join(map(str, members))}) dropped: without it "
                                 f"{figures(without, alone)}, against {figures(best, alone)} with it")
                best = without
            else:
                out.lines.append(f"  group {name} (contexts {' '.join(map(str, members))}) kept: with it "
                                 f"{figures(best, alone)}, against {figures(without, alone)} without it")
        # The rest pool's other choice: without it where the plan has one,
        # with it where the plan left it out (in front of an allocator of
        # size classes); a tie goes to the plan without it.
        has_rest = plan.rest is not None
        other, other_cg = measured(out.exclude, "none" if has_rest else "pool",
                                   "the plan with no rest pool" if has_rest else "the plan with a rest pool")
        if has_rest or other.rest is not None:   # the two plans differ
            with_, without = (best, other_cg) if has_rest else (other_cg, best)
            keep = score(with_) < score(without)
            # A rest pool that places its blocks within their lines does
            # what cachegrind cannot see (docs/runtime.md, "A big build
            # walked out of allocation order"): the clock decides, below.
            pooled = plan if has_rest else other
            lined = pooled.rest in pooled.line_at
            unseen = not keep and lined
            keep = keep or lined
            out.rest = "pool" if keep else "none"
            if unseen:
                out.lines.append(f"  rest pool kept for the clock: without it {figures(without, alone)}, against "
                                 f"{figures(with_, alone)} with it, but cachegrind does not see where its blocks "
                                 f"lie within their lines; " + ("timed with and without it" if trials else
                                                                "kept, with no timed rounds (--ref-trials 0) to say"))
            elif keep:
                out.lines.append(f"  rest pool kept: with it {figures(with_, alone)}, against "
                                 f"{figures(without, alone)} with every ungrouped object in {allocator}")
            else:
                out.lines.append(f"  rest pool left out (every ungrouped object to {allocator}): without it "
                                 f"{figures(without, alone)}, against {figures(with_, alone)} with it")
            if keep != has_rest:
                plan, best = other, other_cg
        alone_better = score(alone) < score(best)
        if alone_better and plan.line_at:
            out.lines.append(f"  {allocator} alone scores better ({figures(best, alone)}), but cachegrind does not "
                             f"see where the plan's blocks lie within their lines: "
                             + ("the clock decides" if trials else "kept, with no timed rounds to say"))
        if alone_better and not plan.line_at:
            out.exclude += [g.members for g in plan.groups]
            out.rest = "none"
            out.lines.append(f"  {allocator} alone scores better than what is left of the plan "
                             f"({figures(best, alone)}): the plan keeps no group and no rest pool")
        elif trials and (plan.groups or plan.rest is not None):
            timed(out, plan, planned, ref_argv, allocator, stdin, trials, log, Path(tmp), who)
    return out


def timed(out, plan, planned, ref_argv, allocator, stdin, trials, log, tmp, who):
    """What cachegrind kept, timed against what it would fall back to, in
    `trials` interleaved rounds: the plan, its rest pool alone (when it has
    groups), the allocator alone, and, when it has a rest pool, both again
    with that pool in its other shape (one pool in allocation order, or one
    per size class), and, when it moved a pool's blocks within their lines,
    the plan without that (plan-unmoved). Another replaces the plan only
    where it is faster beyond noise (its quartile band wholly below the
    plan's), the faster median of those that are. cachegrind does not see
    every cost (the real caches' hierarchy, the TLB, the prefetchers:
    docs/runtime.md), and a plan that wins its model can still lose the
    clock. planned(path, exclude, rest, shape=None, line_offsets=None):
    writes that plan."""
    ungrouped = out.exclude + [g.members for g in plan.groups]
    other = ("classes" if plan.rest_one else "one") if plan.rest is not None else None
    # name: (groups it drops, the rest pool's shape there, line offsets, the
    # rest pool's verdict there), each a plan
    candidates = {"plan": (out.exclude, None, None, None)}
    if plan.groups:
        candidates["rest"] = (ungrouped, None, None, None)
    if other:
        candidates[f"plan-{other}"] = (out.exclude, other, None, None)
        if plan.groups:
            candidates[f"rest-{other}"] = (ungrouped, other, None, None)
    if plan.line_at:
        candidates["plan-unmoved"] = (out.exclude, None, "none", None)
        if plan.rest in plan.line_at and plan.groups:
            candidates["plan-no-rest"] = (out.exclude, None, None, "none")
    for name, (exclude, shape, lines, rest) in candidates.items():
        planned(tmp / f"timed-{name}", exclude, rest or out.rest, shape, lines)
    extra = [(name, tmp / f"timed-{name}") for name in candidates if name != "plan"]
    log(f"{who}: confirming by timing, {trials} interleaved rounds")
    results = bench(list(ref_argv), tmp / "timed", trials=trials, warmup=1, allocators=(allocator,),
                    plan=tmp / "timed-plan", random_control=False, all_control=False, force=True, log=log,
                    policies=("halo",), extra_plans=extra, stdin=stdin)
    summary = results["summary"]
    names = {"plan": f"cohort+{allocator}", "alone": allocator, **{n: n for n, _ in extra}}
    failed = [k for k, n in names.items() if not summary[n]["ok_trials"]]
    if failed:
        raise CohortError(f"the confirmation run `{' '.join(ref_argv)}` failed or printed other output when timed under "
                          f"{' and '.join(failed)}; the plan is not confirmed")
    median = {k: summary[n]["wall_median_s"] for k, n in names.items()}
    quart = {k: (summary[n]["wall_p25_s"], summary[n]["wall_p75_s"]) for k, n in names.items()}
    said = ", ".join(f"{k} {median[k]:.3f} s [{quart[k][0]:.3f}-{quart[k][1]:.3f}]" for k in names)
    out.lines.append(f"  timed, {trials} interleaved rounds (medians, quartiles): {said}")
    # Another overrules what cachegrind kept only where it is faster
    # beyond noise: its quartile band lies wholly below the plan's. On
    # cppcheck a rest pool 1% faster by median, its band overlapping the
    # plan's, dropped two groups with which cachegrind had counted 0.943 of
    # glibc's D1 misses and 0.773 of its LL misses (without the first,
    # 1.031 and 1.221).
    faster = beyond_noise({k: summary[n] for k, n in names.items()}, "plan")
    if not faster:
        out.lines.append("  the plan is the fastest: kept" if min(median, key=median.get) == "plan" else
                         "  the plan is kept: nothing is faster beyond noise (each band overlaps the plan's)")
        return
    best = faster[0]
    if best == "alone":
        out.exclude = ungrouped
        out.rest = "none"
        out.lines.append(f"  {allocator} alone is the fastest: the plan keeps no group and no rest pool")
        return
    out.exclude, shape, lines, rest = candidates[best]
    if rest:
        out.rest = rest
        out.lines.append(f"  the plan with every ungrouped object in {allocator} is the fastest: it keeps no "
                         f"rest pool")
        return
    if lines:
        out.line_offsets = lines
        out.lines.append("  the plan with its blocks of whole lines where the runtime puts them is the fastest: "
                         "it moves none within its lines")
        return
    if shape:
        out.shape = shape
    where = f"its rest pool {SHAPE_WORDS[shape]}" if shape else "its rest pool"
    out.lines.append(f"  the plan with {where} is the fastest: it keeps that shape" if best.startswith("plan-") else
                     f"  {where} alone is the fastest: the plan keeps no group"
                     + (", and that shape" if shape else ""))


class BenchConfirmation:
    """`cohort bench --confirm ARGS`: halo's plans, each made for its
    allocator, measured in front of it on the run ARGS as `cohort optimize
    --ref` measures, then made again from what the measurement kept, over
    the plans bench has just written. bench is handed one (it measures
    through bench, so bench imports nothing of this module): it calls check
    among its own checks, before anything runs, and plans once its plans
    are made."""

    def __init__(self, args, stdin=None, trials=5):
        self.args, self.stdin, self.trials = args, stdin, trials
        self.run = None   # (argv, standard input or None), once checked

    def check(self, target, train, policies):
        """The run, or None without --confirm; a one-line CohortError for
        what cannot be confirmed."""
        self.run = confirmation_run(target[0], self.args, self.stdin, self.trials, "--confirm")
        if self.run is not None and (train is None or "halo" not in policies):
            raise CohortError("--confirm measures the plans bench makes from --train: it needs --train and the "
                              "halo policy")
        return self.run

    def plans(self, outdir, allocators, validated, log):
        """{allocator: the confirmation's lines} (the first allocator's plan
        is explained again, with those lines)."""
        argv, stdin = self.run
        said = {}
        for a in allocators:
            params = dict(PLAN_DEFAULTS, allocator=a)
            done = confirm(outdir / "profile.json", argv, params, validate=validated, allocator=a, stdin=stdin,
                           log=log, trials=self.trials, who="cohort bench")
            params.update(done.params())
            if a == allocators[0]:
                plan_and_explain(outdir, force=True, validate=validated, **params)
                explained = outdir / "explain.txt"
                write_output(explained, explained.read_text() + "\n" + "\n".join(done.lines) + "\n", "explain",
                             True)
            else:
                plan_command(outdir / "profile.json", allocator_plan(outdir, a), force=True, validate=validated,
                             **params)
            for line in done.lines:
                log(f"cohort bench: {line}")
            said[a] = done.lines
        return said
