"""The `cohort` command line."""

import argparse
import os
import sys
from pathlib import Path

from cohort import __version__
from cohort.errors import CohortError
from cohort.paths import ALLOCATORS
from cohort.plan.cost import COST_DEFAULTS
from cohort.plan.planner import LINE_OFFSETS, REST_MAX
from cohort.plan.rest import REST_SHAPES
from cohort.policies import PLAN_POLICIES, needs_trace
from cohort.plan.scale import DEFAULT_SCALE


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line and exit with status 2."""

    def error(self, message):
        if message.startswith("the following arguments are required"):
            message += f" (usage: {' '.join(self.format_usage().split()[1:])})"
        sys.stderr.write(f"cohort: {message}\n")
        sys.exit(2)


def split_command(argv):
    """Split at the first '--': Cohort's options before it, the target after."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def note(message):
    print(f"cohort: {message}", file=sys.stderr)


# Options whose value is the program's own arguments, as one string.
PROGRAM_ARGUMENT_OPTIONS = ("--train", "--cachegrind-args", "--ref", "--confirm")


def option_strings(parser):
    """Every option string of the parser and of its subcommands."""
    import argparse
    found = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= option_strings(sub)
    return found


def attach_dash_values(ours, known):
    """`--train -q` as `--train=-q`: the program's own arguments often start
    with a dash, which argparse takes for an option of ours and then says
    "expected one argument". A value that is itself one of Cohort's
    options is left alone (a forgotten value is then still an error)."""
    out, i = [], 0
    while i < len(ours):
        t = ours[i]
        if t in PROGRAM_ARGUMENT_OPTIONS and i + 1 < len(ours) and ours[i + 1].startswith("-") \
                and ours[i + 1].split("=")[0] not in known:
            out.append(f"{t}={ours[i + 1]}")
            i += 2
            continue
        out.append(t)
        i += 1
    return out


def plan_option(path, what="--plan"):
    """A --plan argument: a plan file, or a directory holding one (said so)."""
    from cohort.formats.planfile import plan_argument
    if path is None:
        return None
    plan, said = plan_argument(path, what)
    if said:
        note(said)
    return plan


def cmd_run(args, target):
    from cohort.files import claim
    from cohort.measure.runner import check_plan_fits, environment, exec_program, resolve_program
    plan = plan_option(args.plan)
    if plan:
        check_plan_fits(plan, resolve_program(target))
        warn_allocator(plan, args.allocator)
    elif not args.mode and not args.policy:
        late = [a for a in target[1:] if a.split("=")[0] in ("--plan", "--mode", "--allocator", "--stats")]
        note(f"no --plan and no --mode: running {target[0]} in pass-through (nothing is grouped)"
             + (f"; {late[0].split('=')[0]} after `--` is the program's own argument (cohort's options "
                "go before `--`)" if late else ""))
    if args.stats and "%p" not in args.stats:
        claim(args.stats, "stats", args.force)
    prefetch = None
    if args.prefetch:
        from cohort.formats.prefetchfile import check
        prefetch = check(args.prefetch)
    env = environment(plan=plan, allocator=args.allocator, mode=args.mode, stats=args.stats, policy=args.policy,
                      prefetch=prefetch)
    if args.stats and args.force:
        env["COHORT_STATS_FORCE"] = "1"
    if args.check:
        env["COHORT_CHECK"] = "1"
    if plan and "COHORT_PLAN" not in env:
        note(f"plan {plan} places no object (it has no group): running without the runtime"
             + (f"; no statistics in {args.stats}" if args.stats else ""))
    exec_program(target, env)


def warn_allocator(plan, allocator):
    """A plan made for another allocator than the one it runs in front of:
    its rest pool was decided for that one (docs/planner.md, "The rest pool
    against the allocator underneath"). One warning; the run goes on."""
    from cohort.formats.planfile import made_for
    made = made_for(plan)
    if made is not None and made != allocator:
        note(f"WARNING: plan {plan} was made for {made}, and runs in front of {allocator}: its rest pool was "
             f"decided for {made} (make it again with `cohort plan --allocator {allocator}`)")


def training_failed(target, rc, allow, then):
    """After a training run that failed: a loud warning; the exit status
    (1, or 0 with --allow-failure)."""
    from cohort.measure.runner import exit_words
    if rc == 0:
        return 0
    note(f"WARNING: the training run {' '.join(target)} failed ({exit_words(rc)}); "
         "its profile covers the run up to then, which may not be the behaviour you want to optimise")
    if allow:
        return 0
    note(f"{then} (fix the run, or give --allow-failure to use a failed run's profile)")
    return 1


def cmd_profile(args, target):
    from cohort.measure.profile import profile, summary
    data, rc = profile(target, args.output, force=args.force, affinity_distance=args.affinity_distance,
                       max_size=args.max_size, coverage=args.coverage, stdin=args.stdin,
                       trace_budget=trace_budget(args), sample_base=args.sample_base)
    print(summary(data, rc), file=sys.stderr)
    note(f"wrote {args.output}")
    return training_failed(target, rc, args.allow_failure, "exiting with status 1")


def cmd_plan(args, target):
    if args.rebase:
        return rebase_plan(args)
    if args.min_kept is not None:
        raise CohortError("--min-kept goes with --rebase BINARY")
    from cohort.plan.planner import plan_command, report
    plan, profile = plan_command(args.profile, args.output, force=args.force, validate=args.validate or (),
                                 **plan_params(args))
    print(report(plan, profile))
    print(f"cohort: wrote {args.output}", file=sys.stderr)
    return 0


def whole_percent(text):
    """--min-kept: a whole number (its range is checked with the plan)."""
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole percent: {text!r}") from None


def rebase_plan(args):
    """`cohort plan --rebase BINARY PLAN -o OUT`: the plan carried onto another build."""
    from cohort.plan.rebase import DEFAULT_MIN_KEPT, rebase_command
    if args.validate:
        raise CohortError("--validate plans from a profile; --rebase carries a plan made already")
    report, text = rebase_command(args.profile, args.rebase, args.output, force=args.force,
                                  min_kept=DEFAULT_MIN_KEPT if args.min_kept is None else args.min_kept)
    if report["stale"]:
        raise CohortError(f"{text}; wrote {args.output} without them")
    print(f"cohort: {text}", file=sys.stderr)
    print(f"cohort: wrote {args.output}", file=sys.stderr)
    return 0


def cmd_merge(args, target):
    from cohort.measure.merge import merge_command
    merged = merge_command(args.profiles, args.output, weights=parse_weights(args.weights), force=args.force)
    print(f"cohort: merged {len(args.profiles)} profiles: {len(merged['contexts'])} contexts, "
          f"{merged['totals']['allocations']} allocations, {merged['totals']['accesses']} accesses to tracked "
          f"objects; graph of {len(merged['graph']['nodes'])} contexts", file=sys.stderr)
    note(f"wrote {args.output}")
    return 0


def parse_weights(text):
    """--weights W,W,...: the numbers, checked with the profiles by
    merge.check_inputs (None: all 1; [] for what is not numbers)."""
    if text is None:
        return None
    try:
        return [float(w) for w in text.split(",")]
    except ValueError:
        return []


def cmd_explain(args, target):
    from cohort.present.explain import explain
    if args.prefetch:
        return explain_prefetch(args)
    if args.binary:
        return explain_rebase(args)
    if args.plan_option:
        if args.plan:
            raise CohortError("give the plan once: positionally or with --plan")
        args.plan = args.plan_option
    if args.profile is None:
        raise CohortError("give a profile to explain (or --prefetch LOADS.json for the prefetch advice)")
    graph = args.graph
    if graph is None:
        graph = str(Path(args.profile).with_suffix(".svg"))
    plan = plan_option(args.plan, "plan")
    if plan and args.policy != "halo":
        raise CohortError("a plan already has its groups: give a plan or --policy, not both")
    text = explain(args.profile, plan, graph_path=None if graph == "-" else graph,
                   top=args.top, force=args.force, validate=args.validate or (), policy=args.policy,
                   ds_graph_path=args.ds_graph, scale=args.scale)
    sys.stdout.write(text)
    if graph != "-":
        print(f"cohort: drew the affinity graph in {graph}", file=sys.stderr)
    if args.ds_graph:
        print(f"cohort: drew the DS graph in {args.ds_graph}", file=sys.stderr)
    return 0


def explain_rebase(args):
    """`cohort explain --plan P --binary B`: where P's call sites lie in B."""
    from cohort.plan.rebase import rebase_text
    given = [p for p in (args.plan_option, args.profile, args.plan) if p is not None]
    if len(given) != 1:
        raise CohortError("with --binary, give the plan alone: cohort explain --plan PLAN --binary BINARY")
    sys.stdout.write(rebase_text(plan_option(given[0], "plan"), args.binary))
    return 0


def explain_prefetch(args):
    """`cohort explain --prefetch LOADS [--prefetch LOADS2]`: MO's advice."""
    from cohort.measure.loads import advice, read
    if len(args.prefetch) > 2:
        raise CohortError("--prefetch takes one or two loads files (two layouts of one program)")
    if args.profile is not None:
        raise CohortError(f"with --prefetch, give loads files only ({args.profile} is extra): "
                          "cohort explain --prefetch LOADS.json [--prefetch POOLED.json]")
    if not 0 < args.min_share <= 1:
        raise CohortError("--min-share must be in (0, 1]")
    runs = [read(p) for p in args.prefetch]
    sys.stdout.write(advice(*runs, min_share=args.min_share, top=args.top))
    return 0


def cmd_loads(args, target):
    from cohort.measure.loads import measure, summary
    from cohort.measure.runner import exit_words
    plan = plan_option(args.plan)
    if plan and args.policy:
        raise CohortError("--plan and --policy are two layouts: give one")
    from cohort.policies import ONLINE_POLICIES
    if args.policy is not None and args.policy not in ONLINE_POLICIES:
        raise CohortError(f"unknown policy '{args.policy}' (choose {' or '.join(ONLINE_POLICIES)}; a plan is --plan)")
    if plan:
        from cohort.measure.runner import check_plan_fits, resolve_program
        check_plan_fits(plan, resolve_program(target))
    data, rc = measure(target, args.output, plan=plan, policy=args.policy, force=args.force,
                       stdin=args.stdin, window=args.window)
    print(summary(data), file=sys.stderr)
    note(f"wrote {args.output}")
    if rc != 0:
        note(f"WARNING: {target[0]} failed ({exit_words(rc)}); the loads cover the run up to then")
        return 1
    return 0


def cmd_prefetch(args, target):
    from cohort.files import claim, write_output
    from cohort.measure.loads import read
    from cohort.measure.prefetch import chosen, pays
    from cohort.formats.prefetchfile import describe, text
    if args.stdin is not None and not args.keep_if_faster:
        raise CohortError("--stdin is the input of the timed runs: it needs --keep-if-faster")
    if target and not args.keep_if_faster:
        raise CohortError("cohort prefetch reads a loads file and runs nothing: give --keep-if-faster to time "
                          "the command after `--` with and without the prefetches")
    if args.keep_if_faster and not target:
        raise CohortError("--keep-if-faster times a command: give it after `--` (the program and its ref arguments)")
    if not 0 < args.min_share <= 1:
        raise CohortError("--min-share must be in (0, 1]")
    if args.top < 1 or args.trials < 2:
        raise CohortError("--top must be at least 1 and --trials at least 2")
    claim(args.output, "prefetch", args.force)
    stdin = None
    if args.stdin is not None:
        from cohort.measure.runner import check_input
        stdin = check_input(args.stdin, "--stdin", rereadable=True)
    loads = read(args.loads)
    items = chosen(loads, args.min_share, args.top)
    if not items:
        note(f"no load in {args.loads} walks with a constant stride and {args.min_share:.1%} of the misses: "
             f"nothing to prefetch, {args.output} not written")
        return 0
    for item in items:
        print(f"  {describe(item)}")
    body = text(items, args.loads)
    if args.keep_if_faster:
        import tempfile
        from cohort.measure.runner import resolve_program
        resolve_program(target)
        with tempfile.NamedTemporaryFile("w", prefix="cohort-prefetch.", suffix=".txt") as f:
            f.write(body)
            f.flush()
            kept, plain, injected = pays(target, loads, f.name, args.trials, stdin=stdin,
                                         log=lambda m: print(m, file=sys.stderr))
        said = (f"{' '.join(target)}: {injected[1]:.3f} s with the prefetches against {plain[1]:.3f} s without "
                f"(medians of {args.trials}; quartiles {injected[0]:.3f}-{injected[2]:.3f} and "
                f"{plain[0]:.3f}-{plain[2]:.3f})")
        if not kept:
            note(f"{said}: they do not pay beyond noise; {args.output} not written")
            return 0
        note(f"{said}: they pay")
    write_output(args.output, body, "prefetch", args.force)
    note(f"wrote {args.output}: {len(items)} load(s); inject with `cohort run --prefetch {args.output} ...`"
         + ("" if args.keep_if_faster else ", and keep it only where `cohort bench --prefetch` shows that it pays"))
    return 0


def training_runs(args, target):
    """The training runs of `cohort optimize`: the command after `--`, then
    one per --train (its arguments, with --train-stdin's files in order), as
    (command, stdin file or None)."""
    import shlex
    from cohort.measure.runner import check_input
    more = args.train or []
    stdins = args.train_stdin or []
    if stdins and len(stdins) != len(more):
        raise CohortError(f"--train-stdin given {len(stdins)} times for {len(more)} --train runs: give "
                          "one per --train, in the same order (/dev/null for a run that reads none)")
    runs = [(target, check_input(args.stdin) if args.stdin is not None else None)]
    for i, a in enumerate(more):
        try:
            words = shlex.split(a)
        except ValueError as e:
            raise CohortError(f"--train {a!r}: {e}") from None
        runs.append(([target[0], *words], check_input(stdins[i]) if stdins else None))
    return runs


def cmd_optimize(args, target):
    from cohort.plan import headroom
    from cohort.present.explain import plan_and_explain
    from cohort.files import OPTIMIZE_PRODUCTS, claim, made_dirs, write_output
    from cohort.plan.planner import report
    from cohort.measure.profile import profile, summary
    from cohort.measure.runner import exit_words, shell_words_hint
    runs = training_runs(args, target)
    ref = ref_run(args, target)
    out = Path(args.output)
    if os.path.lexists(out) and not out.is_dir():
        raise CohortError(f"{out} exists and is not a directory")
    products = [out / n for n in OPTIMIZE_PRODUCTS]
    profiles = [products[0]] + [out / f"profile-{k}.json" for k in range(2, len(runs) + 1)]
    for p in products + profiles[1:] + ([out / "profile-merged.json"] if args.merge else []):
        if os.path.lexists(p):
            claim(p, OPTIMIZE_PRODUCTS.get(p.name, "profile"), args.force)
    done, codes = [], []   # the profiles of the runs that count; every run's exit status
    # The profile the plan will be made from, as written (the first run's,
    # and the first that counts), which the planner takes as it is: only
    # those, since a large program's profile takes hundreds of MB in memory.
    built = {}
    with made_dirs(out):
        for k, ((cmd, stdin), path) in enumerate(zip(runs, profiles)):
            data, rc = profile(cmd, path, force=args.force, affinity_distance=args.affinity_distance,
                               max_size=args.max_size, coverage=args.coverage, stdin=stdin,
                               trace_budget=trace_budget(args), sample_base=args.sample_base)
            print(summary(data, rc), file=sys.stderr)
            codes.append(rc)
            if rc == 0:
                done.append(path)
            elif len(runs) > 1:
                note(f"WARNING: the training run {' '.join(cmd)} failed ({exit_words(rc)}); "
                     f"{'its profile is left out' if not args.allow_failure else 'its profile still counts (--allow-failure)'}"
                     f"{shell_words_hint(cmd[1:]) if k else ''}")   # --train's words, not a shell's
                if args.allow_failure:
                    done.append(path)
            if k == 0 or done[:1] == [path]:
                built[path] = data
    if not done:
        status = training_failed(target, codes[0], args.allow_failure,
                                 f"wrote {', '.join(map(str, profiles))}; not planning")
        if status:
            return status
        done = [profiles[0]]
    params = plan_params(args)
    merged_from = None
    if args.merge and len(done) > 1:
        from cohort.measure.merge import merge_command
        merged = out / "profile-merged.json"
        merge_command(done, merged, force=args.force)
        profiles.append(merged)
        merged_from, done = len(done), [merged]
    elif args.merge:
        note("WARNING: --merge has one training run to merge; the plan is made from it")
    plan, prof = plan_and_explain(out, force=args.force, profile_path=done[0], validate=done[1:],
                                  loaded=built.get(done[0]), **params)
    print(headroom.line(prof))
    if ref is not None:
        confirmed = confirm_plan(args, ref, done, params, prof)
        if confirmed is not None:
            plan, prof = plan_and_explain(out, force=args.force, profile_path=done[0], validate=done[1:],
                                          loaded=prof, **dict(params, **confirmed.params()))
            text = "\n".join(confirmed.lines) + "\n"
            explained = out / "explain.txt"
            write_output(explained, explained.read_text() + "\n" + text, "explain", True)
            print(text, end="")
    print(report(plan, prof))
    note(f"wrote {', '.join(str(p) for p in products + profiles[1:])}"
         + (f"; planned on {done[0]}, validated on {', '.join(map(str, done[1:]))}" if len(done) > 1 else "")
         + (f"; planned on {done[0]}, the {merged_from} training runs merged" if merged_from else ""))
    return 0


def ref_run(args, target):
    """`cohort optimize --ref`'s run, checked before anything is profiled:
    (argv, standard input or None), or None without --ref."""
    from cohort.measure.confirm import confirmation_run
    return confirmation_run(target[0], args.ref, args.ref_stdin, args.ref_trials, "--ref")


def confirm_plan(args, ref, profiles, params, loaded):
    """`cohort optimize --ref`: the plan measured on the larger input
    (confirm.py). A run that fails, or prints other output under a plan,
    leaves the plan unconfirmed: a CohortError, or with --allow-failure a
    warning and None. loaded: profiles[0], as the plan was made from it."""
    from cohort.measure.confirm import confirm
    try:
        return confirm(profiles[0], ref[0], params, validate=profiles[1:], allocator=args.allocator,
                       stdin=ref[1], log=lambda m: print(m, file=sys.stderr), trials=args.ref_trials,
                       loaded=loaded)
    except CohortError as e:
        if not args.allow_failure:
            raise CohortError(f"{e}; it is written unconfirmed to {Path(args.output) / 'plan'}") from None
        note(f"WARNING: {e} (--allow-failure: the unconfirmed plan stays)")
        return None


def cmd_bench(args, target):
    from cohort.measure.bench import bench, parse_policies, parse_sweep
    from cohort.present.table import console_table
    from cohort.measure.confirm import BenchConfirmation
    allocators = [a for a in args.allocators.split(",") if a]
    results = bench(target, args.output, trials=args.trials, warmup=args.warmup, allocators=allocators,
                    plan=plan_option(args.plan), train=args.train, cachegrind_args=args.cachegrind_args,
                    random_control=not args.no_random, force=args.force,
                    log=lambda m: print(m, file=sys.stderr), stdin=args.stdin, train_stdin=args.train_stdin,
                    cachegrind_stdin=args.cachegrind_stdin, output_file=args.output_file,
                    all_control=not args.no_all, policies=parse_policies(args.policies),
                    sweep=parse_sweep(args.sweep), prefetch=args.prefetch, layout_runs=args.layout_runs,
                    extra_plans=[also_option(a) for a in args.also or ()], ignore_output=args.ignore_output,
                    confirmation=BenchConfirmation(args.confirm, args.confirm_stdin, args.confirm_trials))
    print(console_table(results))
    print(f"cohort: wrote {Path(args.output) / 'results.json'}", file=sys.stderr)
    return 1 if results["problems"] else 0


def also_option(text):
    """A --also NAME=PLAN argument: (NAME, plan path), or a one-line CohortError."""
    name, eq, path = text.partition("=")
    if not eq or not name or not path:
        raise CohortError(f"--also {text!r}: give NAME=PLAN (a name for the configuration, then the plan)")
    return name, plan_option(path, f"--also {name}")


def cmd_tune(args, target):
    from cohort.measure.tune import ALONE, tune
    done = tune(target, args.output, ref=args.ref, trials=args.trials, keep=args.keep, force=args.force,
                stdin=args.stdin, ref_stdin=args.ref_stdin, allocator=args.allocator)
    a = done["allocator"]
    vs = f"{done['vs_default']:.3f} of the default plan's median time, {done['vs_allocator']:.3f} of {a}'s"
    if done["best"] == ALONE:
        print(f"cohort tune: {a} alone was fastest: Cohort does not pay on this program in front of it; "
              f"{done['plan']} declares no group ({vs}); the evidence is in {done['report']}")
    else:
        print(f"cohort tune: kept {done['best']} ({vs}) in {done['plan']}; the evidence is in {done['report']}")
    return 0


def cmd_report(args, target):
    from cohort.present.report import report
    written = report(args.results, args.output, force=args.force)
    print(f"cohort: wrote {', '.join(map(str, written))}", file=sys.stderr)
    return 0


def add_profile_options(p):
    p.add_argument("--stdin", metavar="FILE",
                   help="the program reads FILE as its standard input (default: cohort's own)")
    p.add_argument("--affinity-distance", type=int, default=128, metavar="BYTES",
                   help="HALO's affinity distance A (default: 128)")
    p.add_argument("--max-size", type=int, default=4096, metavar="BYTES",
                   help="largest object whose accesses are tracked (default: 4096)")
    p.add_argument("--coverage", type=float, default=0.9, metavar="FRACTION",
                   help="keep the hottest contexts that make up this fraction of accesses (default: 0.9)")
    p.add_argument("--sample-base", type=int, metavar="ACCESSES",
                   help="accesses to the heap around the tracked objects that the profiler's analyses "
                        "see whole, rounded up to a multiple of 65,536; beyond, they see windows whose "
                        "counts stand for the rest, so a long run costs little more than a short one "
                        "(default: 4,194,304; "
                        "0: every access, as with --trace, whose trace samples on its own)")
    p.add_argument("--trace", action="store_true",
                   help="also record the heap reference trace and keep its hot data streams in the "
                        "profile, for --policy hds (implied by --policy hds)")
    p.add_argument("--trace-budget", type=int, metavar="REFERENCES",
                   help="references the heap trace holds; beyond, it keeps an even sample of bursts "
                        "(default: 1,000,000; implies --trace)")


def trace_budget(args):
    """The trace budget the profile options ask for, or None for no trace."""
    from cohort.measure.profile import TRACE_BUDGET
    if args.trace_budget is not None:
        return args.trace_budget
    return TRACE_BUDGET if args.trace or needs_trace([getattr(args, "policy", None)]) else None


def plan_params(args):
    """The planner's keyword arguments from the options add_plan_options defines."""
    params = {k: getattr(args, k) for k in ("min_weight", "max_members", "tolerance", "group_threshold",
                                            "unknown_entry", "unknown_path", "entry_purity", "rest",
                                            "rest_max", "rest_shape", "line_offsets", "identify", "policy",
                                            "scale",
                                            "allocator")}
    params["costs"] = {key: getattr(args, flag[2:].replace("-", "_")) for flag, key, _ in COST_OPTIONS}
    return params


# The planner's measured costs (cost.COST_DEFAULTS), each an option of
# plan, optimize and bench: (option, key, what it prices).
COST_OPTIONS = (
    ("--walk-cost", "walk_ns", "cost of a stack walk besides its frames, to weigh a group's identification"),
    ("--frame-cost", "frame_ns", "cost of each frame a walk steps"),
    ("--patched-cost", "patched_ns", "cost of deciding an allocation from patched call sites"),
    ("--stub-cost", "stub_ns", "cost of each call through a patched selector or stop site, whether or not it "
                               "allocates, from the profile's counts of calls"),
    ("--stop-cost", "stop_ns", "cost of deciding an allocation from a patched stop site's record (a stop site "
                               "on its stack), over the rest pool's"),
    ("--stop-stub-cost", "stop_stub_ns", "cost of each call through a patched stop site"),
    ("--empty-cost", "empty_ns", "cost of deciding an allocation at a walk entry with no selector or stop site "
                                 "on its stack, over the rest pool's"),
    ("--miss-cost", "miss_ns", "the most a placement saves per affinitive access: one D1 miss served by L2"),
    ("--passthrough-cost", "passthrough_ns", "what the runtime costs each allocation it hands to the next "
                                             "allocator, charged to the groups of a plan with no rest pool, "
                                             "which load it for themselves"),
    ("--quick-cost", "quick_ns", "what a plan with groups costs each allocation whose entry site no stub reaches "
                                 "(the quick test), against the rest pool alone"),
    ("--entry-stub-cost", "entry_stub_ns", "what a plan with groups costs each allocation decided at its entry "
                                           "site's stub, against the rest pool alone"),
    ("--split-cost", "split_ns", "what splitting the rest pool by size class costs each small allocation, "
                                 "against the D1 misses the profile's model says it saves"),
)


POLICY_HELP = ("how contexts are grouped: halo (HALO's affinity grouping), halo+ds (the same, with the "
               "DS graph's pointers as extra affinity), or Automatic Pool Allocation's heuristics on the "
               "DS graph: apa-all (a pool per hot data-structure node), apa-collections (a pool per "
               "list, tree or array of pointers, with what hangs off it), apa-maximal (a pool per "
               "connected data structure); or hds, HALO's hot-data-streams comparator (co-allocation sets "
               "from the heap trace's hot data streams, by immediate call site; its profile needs "
               "--trace); or rest, no group: every small object in the rest pool alone, the control "
               "a plan's groups must beat; docs/planner.md (default: halo)")


def scale_value(text):
    """--scale: a number of at least 1, else one line (argparse's usage error)."""
    from cohort.plan.scale import check_scale
    try:
        return check_scale(text)
    except CohortError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_plan_options(p):
    p.add_argument("--policy", default="halo", choices=PLAN_POLICIES, help=POLICY_HELP)
    p.add_argument("--scale", type=scale_value, default=None, metavar="S",
                   help="the production input's size over the training input's (a number of at least 1): "
                        "every group is priced where the plan runs, its accesses and allocations grown S "
                        "times and its misses priced at the cache level that serves them there "
                        f"(default: fitted on a --train/--validate run of another size, else "
                        f"{DEFAULT_SCALE:g}; docs/planner.md, \"A miss at the run's scale\")")
    p.add_argument("--min-weight", type=float, default=None, metavar="W",
                   help="drop edges lighter than W (default: 1/1000 of the heaviest edge)")
    p.add_argument("--max-members", type=int, default=16, metavar="N",
                   help="largest group, in contexts (default: 16)")
    p.add_argument("--tolerance", type=float, default=0.05, metavar="T",
                   help="merge tolerance T of the merge benefit (default: 0.05)")
    p.add_argument("--group-threshold", type=float, default=0.005, metavar="F",
                   help="keep a group only if its internal weight is at least F x all accesses "
                        "(default: 0.005)")
    p.add_argument("--entry-purity", type=float, default=0.98, metavar="F",
                   help="let an entry site alone decide group G when G gets at least F of the "
                        "allocations entering there and no other group gets any (default: 0.98; "
                        "1 = only when exact)")
    p.add_argument("--allocator", default="glibc", choices=tuple(ALLOCATORS),
                   help="the allocator the plan will run in front of: its rest pool is decided for it, "
                        "the plan names it, and optimize --ref measures against it (default: glibc)")
    p.add_argument("--rest", default="auto", choices=("pool", "none", "auto"),
                   help="small allocations no group claims: one more pool, apart from the groups, "
                        "or the next allocator, as in HALO; auto: the pool in front of glibc, and in "
                        "front of an allocator of size classes (jemalloc, tcmalloc, mimalloc) only where "
                        "the profile's model says it pays there (default: auto)")
    p.add_argument("--rest-shape", default="auto", choices=REST_SHAPES,
                   help="the rest pool's shape: one pool in allocation order, or one pool per size class; "
                        "auto: the profile's model of both decides, and optimize --ref and bench --confirm "
                        "time the other shape too (default: auto)")
    p.add_argument("--line-offsets", default="auto", choices=LINE_OFFSETS,
                   help="where each pool's blocks of whole cache lines start: where the profile's model "
                        "of the places says its walks stall least (auto), or where the runtime puts them: "
                        "a group's at a line's start, the rest pool's packed (none). optimize --ref and "
                        "bench --confirm time the plan without its offsets too (default: auto)")
    p.add_argument("--rest-max", type=int, default=REST_MAX, metavar="BYTES",
                   help="the largest request the rest pool takes (at most the plan's max-size); larger "
                        f"ones go to the next allocator. Above {REST_MAX} bytes the runtime keeps one class "
                        f"per power of two (default: {REST_MAX}; cohort tune also tries 4096)")
    p.add_argument("--identify", default="patched", choices=("patched", "walk"),
                   help="how the runtime will identify allocations past their entry site, to price "
                        "it: from the bits of patched selector call sites (its default), or by stack "
                        "walks (when run with COHORT_PATCH=0) (default: patched)")
    for flag, key, what in COST_OPTIONS:
        p.add_argument(flag, type=float, default=COST_DEFAULTS[key], metavar="NS",
                       help=f"{what} (default: {COST_DEFAULTS[key]:g}, measured here)")
    p.add_argument("--unknown-entry", default="auto", choices=("walk", "cold", "auto"),
                   help="allocations entering at a site the profile never saw: walk the stack "
                        "and test every selector, or never group them (to the rest pool, if any); "
                        "auto: walk only if some selector can match such a stack and, given "
                        "validation runs, if such walks there mostly find a group (default: auto)")
    p.add_argument("--unknown-path", default="auto", choices=("walk", "cold", "auto"),
                   help="a walk that leaves the decision paths (a stack the profile never showed "
                        "past its entry): walk on to the outermost frame and test every selector, or "
                        "end there with no group; auto: cold, unless validation runs show that such "
                        "walks mostly find a group (default: auto)")


def build_parser():
    p = Parser(prog="cohort", description="Place related heap objects together.")
    p.add_argument("--version", action="version", version=f"cohort {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=Parser)

    r = sub.add_parser("run", help="run a program with the Cohort runtime preloaded",
                       usage="%(prog)s [--plan PLAN] [options] -- PROG ARGS...",
                       description="Run PROG with libcohort.so preloaded in front of an allocator. "
                                   "Cohort's options go before `--`, the program and its own "
                                   "arguments after it.")
    r.add_argument("--plan", help="plan made by `cohort plan`, or a directory `cohort optimize` "
                                  "filled (default: no grouping)")
    r.add_argument("--allocator", default="glibc", choices=sorted(ALLOCATORS),
                   help="the allocator behind Cohort for everything not grouped (default: glibc)")
    r.add_argument("--mode", help="runtime mode: plan, off, all (group every small object) "
                                  "or random[:N] (HALO's random control)")
    r.add_argument("--policy", help="where objects go: halo (the plan's groups; the default with --plan) "
                                    "or an online policy, which needs no profile: dpa (pools by call chain) or mo "
                                    "(size-consistent pools by call site); docs/policies.md")
    r.add_argument("--stats", help="write the runtime's statistics (JSON) to this file at exit "
                                   "(%%p: the process id)")
    r.add_argument("--check", action="store_true",
                   help="the checked mode: redzones round every grouped object, checked when it is freed, "
                        "so that overflows and underflows stop the program (about 4x dearer per "
                        "malloc+free; docs/runtime.md)")
    r.add_argument("--prefetch", metavar="FILE",
                   help="inject the prefetches of FILE (made by `cohort prefetch`) at start-up: MO's stride "
                        "prefetching, off unless given (docs/prefetch-format.md)")
    r.add_argument("--force", action="store_true",
                   help="let --stats replace a file that is not Cohort statistics")
    r.set_defaults(func=cmd_run)

    pr = sub.add_parser("profile", help="profile a program: HALO's affinity graph of its heap contexts",
                        usage="%(prog)s [options] -o profile.json -- PROG TRAIN-ARGS...",
                        description="Run PROG under Cohort's Valgrind tool and write a profile "
                                    "(docs/profile-format.md). Cohort's options go before `--`, the "
                                    "program and its own arguments after it.")
    pr.add_argument("-o", "--output", default="profile.json", help="profile to write (default: profile.json)")
    pr.add_argument("--force", action="store_true", help="overwrite a file that is not a Cohort profile")
    add_profile_options(pr)
    pr.add_argument("--allow-failure", action="store_true",
                    help="exit 0 even if the training run exits non-zero or is killed")
    pr.set_defaults(func=cmd_profile)

    pl = sub.add_parser("plan", help="group a profile's contexts and write a plan for the runtime",
                        usage="%(prog)s [options] profile.json -o plan\n       %(prog)s --rebase BINARY plan -o rebased-plan",
                        description="HALO's grouping (weighted density) and identification (selectors) "
                                    "on a profile; writes the runtime's plan (docs/plan-format.md).")
    pl.add_argument("profile", help="profile.json from cohort profile (with --rebase: the plan to carry)")
    pl.add_argument("-o", "--output", default="plan", help="plan to write (default: plan)")
    pl.add_argument("--rebase", metavar="BINARY",
                    help="instead of planning: carry the plan given onto BINARY, another build of its program, "
                         "by the anchors of its call sites (docs/plan-format.md, \"Anchors\")")
    pl.add_argument("--min-kept", type=whole_percent, default=None, metavar="PERCENT",
                    help="with --rebase: the percent of the plan's selectors that must be found in BINARY, else "
                         "the plan written groups nothing (default: 90, as the runtime's COHORT_REBASE_MIN)")
    pl.add_argument("--force", action="store_true", help="overwrite a file that is not a Cohort plan")
    pl.add_argument("--validate", action="append", metavar="PROFILE",
                    help="the profile of another run of the program (another input): the plan is "
                         "replayed on it, its transfer score reported, and groups that do not pay "
                         "there dropped (repeatable)")
    add_plan_options(pl)
    pl.set_defaults(func=cmd_plan)

    me = sub.add_parser("merge", help="merge the profiles of several runs of one build into one",
                        usage="%(prog)s [options] PROFILE PROFILE... -o merged.json",
                        description="The profiles of several runs (inputs, machines) of one build of a program "
                                    "as one profile, for a plan made from all of them: contexts matched by their "
                                    "call sites, every count each run's times its weight "
                                    "(docs/profile-format.md, \"Merged profiles\").")
    me.add_argument("profiles", nargs="+", metavar="PROFILE", help="profile.json files of one build")
    me.add_argument("-o", "--output", required=True, help="merged profile to write")
    me.add_argument("--weights", metavar="W,W,...",
                    help="one positive number per profile, in order: its counts are multiplied by it "
                         "(default: 1 each)")
    me.add_argument("--force", action="store_true", help="overwrite a file that is not a Cohort profile")
    me.set_defaults(func=cmd_merge)

    ex = sub.add_parser("explain", help="show a profile (and plan) for people, and draw the graph",
                        usage="%(prog)s [options] profile.json [plan]",
                        description="Print the hottest contexts with their call stacks and the groups "
                                    "with their members and selectors; draw the affinity graph "
                                    "coloured by group as SVG.")
    ex.add_argument("profile", nargs="?", help="profile.json from cohort profile")
    ex.add_argument("plan", nargs="?", help="a plan (default: the groups cohort plan would make)")
    ex.add_argument("--plan", dest="plan_option", metavar="PLAN", help="the plan (as the second argument)")
    ex.add_argument("--binary", metavar="BINARY",
                    help="with --plan alone: show where the plan's call sites lie in BINARY, another build of "
                         "its program, found by their anchors (what cohort plan --rebase and the runtime do)")
    ex.add_argument("--prefetch", action="append", metavar="LOADS.json",
                    help="instead: MO's prefetch advice from `cohort loads` (give a second file, "
                         "measured under a plan or policy, to set the two layouts side by side)")
    ex.add_argument("--min-share", type=float, default=0.01, metavar="F",
                    help="with --prefetch: list loads with at least F of the D1 misses (default: 0.01)")
    ex.add_argument("--graph", metavar="FILE.svg",
                    help="where to draw the graph (default: the profile's name with .svg; - for none)")
    ex.add_argument("--ds-graph", metavar="FILE.svg",
                    help="also draw the DS graph (which objects point to which) coloured by group")
    ex.add_argument("--policy", default="halo", choices=PLAN_POLICIES,
                    help="without a plan: the groups of this policy of cohort plan (default: halo)")
    ex.add_argument("--top", type=int, default=10, help="how many hot contexts to list (default: 10)")
    ex.add_argument("--scale", type=scale_value, default=None, metavar="S",
                    help="price each group where the plan runs: at S times the profiled input (default: "
                         "as cohort plan, fitted on a --validate run of another size, else "
                         f"{DEFAULT_SCALE:g})")
    ex.add_argument("--force", action="store_true", help="overwrite a graph file cohort did not draw")
    ex.add_argument("--validate", action="append", metavar="PROFILE",
                    help="the profile of another run of the program: show how the plan transfers to "
                         "it (transfer score, grouped share, walks that find no group) (repeatable)")
    ex.set_defaults(func=cmd_explain)

    op = sub.add_parser("optimize", help="profile + plan + explain in one step",
                        usage="%(prog)s [options] -o DIR -- PROG TRAIN-ARGS...",
                        description="Profile PROG on a training input, plan, and explain; "
                                    "products go to DIR (profile.json, plan, explain.txt, graph.svg). "
                                    "Cohort's options go before `--`, the program and its own "
                                    "arguments after it.")
    op.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the products")
    op.add_argument("--force", action="store_true",
                    help="replace files in DIR that Cohort did not write")
    add_profile_options(op)
    add_plan_options(op)
    op.add_argument("--allow-failure", action="store_true",
                    help="plan even if the training run exits non-zero or is killed")
    op.add_argument("--train", action="append", metavar="'ARGS'",
                    help="another training run of PROG with these arguments (repeatable): profiled "
                         "too (DIR/profile-2.json, ...), and the plan, made from the first run, is "
                         "validated on it: groups that do not transfer are dropped. Arguments, not a "
                         "shell command line: a run's standard input is --train-stdin")
    op.add_argument("--merge", action="store_true",
                    help="with --train: plan from the merged profile of every training run "
                         "(DIR/profile-merged.json) instead of from the first (cohort merge)")
    op.add_argument("--train-stdin", action="append", metavar="FILE",
                    help="standard input of the --train runs, one per --train in order")
    op.add_argument("--ref", metavar="'ARGS'",
                    help="confirm the plan on a larger input before writing it: PROG with these arguments "
                         "under cachegrind, the plan against itself without each group, without its rest "
                         "pool, and against the allocator alone; what loses there is dropped "
                         "(docs/planner.md, \"Confirmed on a larger input\")")
    op.add_argument("--ref-stdin", metavar="FILE", help="standard input of the --ref run (default: /dev/null)")
    op.add_argument("--ref-trials", type=int, default=5, metavar="N",
                    help="after the cachegrind steps, time the plan, its rest pool alone and the allocator "
                         "alone on the --ref input in N interleaved rounds; a fallback replaces the plan only "
                         "where it is faster beyond noise (default: 5; "
                         "0: cachegrind only)")
    op.set_defaults(func=cmd_optimize)

    lo = sub.add_parser("loads", help="find delinquent loads and their strides (MO's prefetch profile)",
                        usage="%(prog)s [--plan PLAN | --policy mo|dpa] -o loads.json -- PROG ARGS...",
                        description="Run PROG under Cohort's Valgrind tool with a simulated cache and "
                                    "MO's stride analysis per load; write loads.json "
                                    "(docs/loads-format.md) for `cohort explain --prefetch`. With --plan "
                                    "or --policy the runtime places the heap, so the strides are those "
                                    "of the pooled layout.")
    lo.add_argument("-o", "--output", default="loads.json", help="file to write (default: loads.json)")
    lo.add_argument("--plan", help="measure under this plan's layout (or a directory cohort optimize filled)")
    lo.add_argument("--policy", help="measure under an online policy's layout: mo or dpa")
    lo.add_argument("--window", type=int, default=64, metavar="T",
                    help="executions of a load per stride window, MO's t (default: 64)")
    lo.add_argument("--stdin", metavar="FILE", help="the program's standard input (default: cohort's own)")
    lo.add_argument("--force", action="store_true", help="overwrite a file that is not a loads measurement")
    lo.set_defaults(func=cmd_loads)

    pf = sub.add_parser("prefetch", help="write the prefetches MO's advice suggests, for the runtime to inject",
                        usage="%(prog)s [--min-share F] [--top N] -o prefetch.txt LOADS.json "
                              "[--keep-if-faster [--trials N] [--stdin FILE] -- PROG REF-ARGS...]",
                        description="From a loads measurement (`cohort loads`, taken under the layout the "
                                    "program will run with), write the prefetch file that `cohort run "
                                    "--prefetch` injects: each advised load with MO's distance "
                                    "(docs/prefetch-format.md).")
    pf.add_argument("loads", metavar="LOADS.json", help="a loads measurement")
    pf.add_argument("-o", "--output", default="prefetch.txt", help="file to write (default: prefetch.txt)")
    pf.add_argument("--min-share", type=float, default=0.01, metavar="F",
                    help="only loads with at least F of the D1 misses (default: 0.01)")
    pf.add_argument("--top", type=int, default=10, metavar="N", help="at most N loads (default: 10)")
    pf.add_argument("--keep-if-faster", action="store_true",
                    help="time the command after `--` in the loads file's layout without and with the "
                         "prefetches, interleaved, and write the file only if they pay beyond noise (the "
                         "injected runs' third quartile below the plain runs' first)")
    pf.add_argument("--trials", type=int, default=7, help="with --keep-if-faster: timed rounds (default: 7)")
    pf.add_argument("--stdin", metavar="FILE", help="with --keep-if-faster: the program's standard input")
    pf.add_argument("--force", action="store_true", help="overwrite a file that is not a prefetch file")
    pf.set_defaults(func=cmd_prefetch)

    be = sub.add_parser("bench", help="baseline vs optimised, side by side",
                        usage="%(prog)s [--policies LIST] (--plan PLAN | --train 'ARGS') [options] -o DIR -- PROG REF-ARGS...",
                        description="Run PROG under each baseline allocator and under Cohort, in "
                                    "interleaved trials; measure cache misses with cachegrind; write "
                                    "DIR/results.json (docs/results-format.md) and plots. Cohort's "
                                    "options go before `--`, the program and its own arguments after it.")
    be.add_argument("-o", "--output", required=True, metavar="DIR", help="results directory")
    be.add_argument("--trials", type=int, default=10, help="measured rounds (default: 10)")
    be.add_argument("--warmup", type=int, default=1, help="discarded rounds first (default: 1)")
    be.add_argument("--allocators", default="glibc,jemalloc,mimalloc",
                    help="baselines, comma-separated (default: glibc,jemalloc,mimalloc)")
    be.add_argument("--policies", default="halo", metavar="LIST",
                    help="policies to compare, comma-separated: halo (the plan: --plan or --train); "
                         "halo+ds, apa-all, apa-collections, apa-maximal, hds (plans from the --train profile, "
                         "which records the heap trace for hds; docs/planner.md); dpa, mo (online, no profile; docs/policies.md). Default: halo")
    be.add_argument("--sweep", metavar="PARAM=V1,V2,...",
                    help="also run halo's plan for each value of one parameter, planned from --train: "
                         "affinity-distance (a profile per value; HALO's Figure 12), tolerance, "
                         "max-members, entry-purity, group-threshold, rest-max, scale, rest-shape (one, classes) "
                         "or line-offsets (auto, none); e.g. "
                         "--sweep affinity-distance=32,64,128,256,512,1024")
    be.add_argument("--plan", help="use this plan")
    be.add_argument("--also", action="append", metavar="NAME=PLAN",
                    help="also run PLAN in front of the first allocator, as the configuration NAME "
                         "(repeatable): plans compared in one run, e.g. --also forced=groups.plan")
    be.add_argument("--train", action="append", metavar="'ARGS'",
                    help="profile PROG with these arguments and plan first (arguments, not a shell "
                         "command line: its standard input is --train-stdin); repeatable: the plan "
                         "is made from the first run and validated on the others, as cohort "
                         "optimize's (DIR/profile-2.json, ...)")
    be.add_argument("--cachegrind-args", metavar="'ARGS'",
                    help="arguments for the cachegrind runs (default: no cachegrind)")
    be.add_argument("--stdin", metavar="FILE",
                    help="every timed run reads FILE, from the start, as its standard input "
                         "(default: /dev/null)")
    be.add_argument("--train-stdin", action="append", metavar="FILE",
                    help="standard input of the profiling run with --train (default: /dev/null, "
                         "never --stdin's file); with several --train, one per --train, in order")
    be.add_argument("--cachegrind-stdin", metavar="FILE",
                    help="standard input of the cachegrind runs (default: --stdin's file, else /dev/null)")
    be.add_argument("--confirm", metavar="'ARGS'",
                    help="before timing, confirm each plan made from --train on PROG with these arguments, "
                         "in front of the allocator it is made for, as cohort optimize --ref does (a larger "
                         "input than the training run's, not the timed one): the plans timed keep what that "
                         "measurement kept")
    be.add_argument("--confirm-stdin", metavar="FILE",
                    help="standard input of the --confirm run (default: /dev/null)")
    be.add_argument("--confirm-trials", type=int, default=5, metavar="N",
                    help="timed rounds of each confirmation, after its cachegrind steps (0: none; default: 5)")
    be.add_argument("--layout-runs", type=int, default=0, metavar="N",
                    help="also run each baseline N more times under cachegrind with its heap and stack "
                         "moved: the spread of its D1 misses is the band a D1 ratio must leave to be a "
                         "difference (default: 0; at most 16)")
    be.add_argument("--output-file", metavar="PATH",
                    help="a file the program writes: removed before every run, its SHA-256 checked "
                         "after each like stdout's; must not exist (unless --force)")
    be.add_argument("--ignore-output", metavar="REGEX",
                    help="leave the lines of the program's standard output that REGEX matches (Python "
                         "syntax, anywhere in the line) out of the digest every run is checked by: a program "
                         "that prints its own run time or the date")
    be.add_argument("--prefetch", metavar="FILE",
                    help="also run each baseline and Cohort configuration with FILE's prefetches injected "
                         "(NAME+prefetch; made by `cohort prefetch`), to see whether they pay")
    be.add_argument("--no-random", action="store_true", help="skip HALO's random-placement control")
    be.add_argument("--no-all", action="store_true",
                    help="skip the one-pool control (every small allocation in one pool, COHORT_MODE=all)")
    be.add_argument("--force", action="store_true",
                    help="replace an existing results.json, and let --output-file's PATH be deleted "
                         "if it exists")
    be.set_defaults(func=cmd_bench)

    tu = sub.add_parser("tune", help="find the best plan for a program by measurement (all policies, "
                                     "their parameters)",
                        usage="%(prog)s [options] -o DIR -- PROG TRAIN-ARGS...",
                        description="Make a plan with every plan policy and with halo's parameters varied one "
                                    "at a time, screen them with cachegrind on the training input, confirm "
                                    "the best few and the default plan by interleaved timing on --ref, "
                                    "beside the allocator alone, and keep the default plan as DIR/plan unless "
                                    "another is faster beyond noise (then the fastest of those), with the "
                                    "evidence in DIR/tune.md. "
                                    "Takes minutes; progress goes to stderr.")
    tu.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the products")
    tu.add_argument("--ref", metavar="'ARGS'",
                    help="PROG's arguments for the timed confirmation (default: the training arguments)")
    tu.add_argument("--stdin", metavar="FILE",
                    help="standard input of the training runs (profiling, screening; default: /dev/null)")
    tu.add_argument("--ref-stdin", metavar="FILE",
                    help="standard input of the timed confirmation runs (default: --stdin's file)")
    tu.add_argument("--allocator", default="glibc", choices=tuple(ALLOCATORS),
                    help="the allocator every run is in front of, and the baseline (default: glibc); "
                         "if it alone is fastest, the kept plan declares no group")
    tu.add_argument("--trials", type=int, default=7, help="timed rounds of the confirmation (default: 7)")
    tu.add_argument("--keep", type=int, default=3,
                    help="candidates confirmed by timing besides the default plan (default: 3)")
    tu.add_argument("--force", action="store_true", help="replace files in DIR that Cohort did not write")
    tu.set_defaults(func=cmd_tune)

    rp = sub.add_parser("report", help="a Markdown report from bench results",
                        usage="%(prog)s [options] RESULTS-DIR... -o report.md",
                        description="Turn one or more results directories into one Markdown report "
                                    "with tables and plots.")
    rp.add_argument("results", nargs="+", help="results directories (or results.json files)")
    rp.add_argument("-o", "--output", default="report.md",
                    help="report to write (default: report.md); its plots go beside it as "
                         "NAME-fig13.png, NAME-fig14.png, ...")
    rp.add_argument("--force", action="store_true",
                    help="replace files at those paths that cohort did not write")
    rp.set_defaults(func=cmd_report)
    for sp in sub.choices.values():   # for "no program given" and its opposite (main)
        sp.set_defaults(usage_line=" ".join(sp.format_usage().split()[1:]))
    return p


TAKES_PROGRAM = ("run", "profile", "optimize", "bench", "loads", "tune")
MAY_TAKE_PROGRAM = ("prefetch",)   # with --keep-if-faster; the command checks


def misplaced(args, ours, extra):
    """What to say about arguments no option took: the first line a user
    reads after a mistake says what to type instead."""
    cmd = getattr(args, "command", None)
    if cmd in TAKES_PROGRAM:
        opts = [a for a in ours if a not in extra]
        if not extra[0].startswith("-"):
            return (f"the program and its arguments go after `--`: cohort {' '.join(opts)} -- "
                    f"{' '.join(extra)}")
        return (f"cohort {cmd} has no option {extra[0]} (see cohort {cmd} --help); the program's own "
                f"options go after `--`: cohort {cmd} [options] -- PROG ARGS...")
    if cmd:
        return f"unrecognized arguments for cohort {cmd}: {' '.join(extra)} (see cohort {cmd} --help)"
    return f"unrecognized arguments: {' '.join(extra)} (see cohort --help)"


def utf8_output():
    """Everything cohort prints is UTF-8, whatever the locale, and what
    cannot be encoded (bytes of a name that were not UTF-8) is escaped as
    \\xNN rather than ending the command with an error."""
    from cohort.files import ESCAPE
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(encoding="utf-8", errors=ESCAPE)
        except (AttributeError, ValueError):   # replaced by a caller, or closed
            pass


def default_signals():
    """Give SIGPIPE and SIGXFSZ back the default actions Python replaced with
    "ignore" at start-up. Output into a closed pipe (`cohort explain ... | head`)
    then ends cohort quietly, as it ends other Unix tools (status 141 in the
    shell), and the programs cohort runs do not inherit ignored signals: an
    ignored signal stays ignored across exec, and `cohort run` execs its target."""
    import signal
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def one_line(text):
    return " ".join(str(text).splitlines()) or "error"


def main(argv=None):
    """The command line; returns the exit status. As the program itself
    (argv None, from sys.argv) it first restores the default signal actions
    (default_signals); called from Python with an argv it leaves them alone."""
    import os
    import signal
    if argv is None:
        argv = sys.argv[1:]
        default_signals()
        utf8_output()
    ours, target = split_command(argv)
    parser = build_parser()
    ours = attach_dash_values(ours, option_strings(parser))
    args, extra = parser.parse_known_args(ours)
    if extra:
        parser.error(misplaced(args, ours, extra))
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if args.command not in MAY_TAKE_PROGRAM and (args.command in TAKES_PROGRAM) != bool(target):
        what = "no program given" if not target else f"cohort {args.command} takes no program"
        sys.stderr.write(f"cohort: {what} (usage: {args.usage_line})\n")
        return 2
    try:
        status = args.func(args, target) or 0
        sys.stdout.flush()   # a closed pipe shows here, not at exit
        return status
    except CohortError as e:
        sys.stderr.write(f"cohort: {one_line(e)}\n")
        return e.status
    except BrokenPipeError:
        # Only where SIGPIPE is blocked (or main was called from Python):
        # stop writing to the pipe, and end as if SIGPIPE had ended us.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 128 + signal.SIGPIPE
    except OSError as e:   # a file cohort cannot read or write
        name = e.filename2 or e.filename   # rename's destination, else the file
        where = f"{name}: " if name else ""
        sys.stderr.write(f"cohort: {one_line(where + (e.strerror or str(e)))}\n")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
