"""The `cohort` command line."""

import argparse
import sys
from pathlib import Path

from cohort import __version__
from cohort.errors import CohortError
from cohort.paths import ALLOCATORS
from cohort.planner import COST_DEFAULTS


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line and exit with status 2."""

    def error(self, message):
        sys.stderr.write(f"cohort: {message}\n")
        sys.exit(2)


def split_command(argv):
    """Split at the first '--': Cohort's options before it, the target after."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def cmd_run(args, target):
    from cohort.runner import check_plan_fits, environment, exec_program, resolve_program
    if not target:
        raise CohortError("no program given (usage: cohort run [options] -- ./prog args...)")
    if args.plan:
        check_plan_fits(args.plan, resolve_program(target))
    env = environment(plan=args.plan, allocator=args.allocator, mode=args.mode, stats=args.stats)
    if args.plan and "COHORT_PLAN" not in env:
        print(f"cohort: plan {args.plan} places no object (it has no group): running without the runtime"
              + (f"; no statistics in {args.stats}" if args.stats else ""), file=sys.stderr)
    exec_program(target, env)


def cmd_profile(args, target):
    from cohort.profile import profile, summary
    if not target:
        raise CohortError("no program given (usage: cohort profile [options] -o profile.json -- ./prog args...)")
    data, rc = profile(target, args.output, force=args.force, affinity_distance=args.affinity_distance,
                       max_size=args.max_size, coverage=args.coverage, stdin=args.stdin)
    print(summary(data, rc), file=sys.stderr)
    print(f"cohort: wrote {args.output}", file=sys.stderr)
    return 0


def cmd_plan(args, target):
    from cohort.planner import plan_command, report
    if target:
        raise CohortError("cohort plan takes no program (usage: cohort plan profile.json -o plan)")
    plan, profile = plan_command(args.profile, args.output, force=args.force, **plan_params(args))
    print(report(plan, profile))
    print(f"cohort: wrote {args.output}", file=sys.stderr)
    return 0


def cmd_explain(args, target):
    from cohort.explain import explain
    if target:
        raise CohortError("cohort explain takes no program (usage: cohort explain profile.json [plan])")
    graph = args.graph
    if graph is None:
        graph = str(Path(args.profile).with_suffix(".svg"))
    text = explain(args.profile, args.plan, graph_path=None if graph == "-" else graph,
                   top=args.top, force=args.force)
    sys.stdout.write(text)
    if graph != "-":
        print(f"cohort: drew the affinity graph in {graph}", file=sys.stderr)
    return 0


def cmd_optimize(args, target):
    from cohort.explain import explain
    from cohort.planner import plan_command, report
    from cohort.profile import profile, summary
    from cohort.runner import check_input
    if not target:
        raise CohortError("no program given (usage: cohort optimize -o DIR -- ./prog train-args...)")
    stdin = check_input(args.stdin) if args.stdin is not None else None
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise CohortError(f"{out} exists and is not a directory")
    products = [out / n for n in ("profile.json", "plan", "explain.txt", "graph.svg")]
    if not args.force and any(p.exists() for p in products):
        raise CohortError(f"{out} already holds a profile or plan (use --force to replace them)")
    out.mkdir(parents=True, exist_ok=True)
    data, rc = profile(target, products[0], force=True, affinity_distance=args.affinity_distance,
                       max_size=args.max_size, coverage=args.coverage, stdin=stdin)
    print(summary(data, rc), file=sys.stderr)
    plan, prof = plan_command(products[0], products[1], force=True, **plan_params(args))
    print(report(plan, prof))
    text = explain(products[0], products[1], graph_path=products[3], force=True)
    products[2].write_text(text)
    print(f"cohort: wrote {', '.join(str(p) for p in products)}", file=sys.stderr)
    return 0


def cmd_bench(args, target):
    from cohort.bench import bench, console_table
    if not target:
        raise CohortError("no program given (usage: cohort bench [options] -o DIR -- ./prog ref-args...)")
    allocators = [a for a in args.allocators.split(",") if a]
    results = bench(target, args.output, trials=args.trials, warmup=args.warmup, allocators=allocators,
                    plan=args.plan, train=args.train, cachegrind_args=args.cachegrind_args,
                    random_control=not args.no_random, force=args.force,
                    log=lambda m: print(m, file=sys.stderr), stdin=args.stdin, train_stdin=args.train_stdin,
                    cachegrind_stdin=args.cachegrind_stdin, output_file=args.output_file,
                    all_control=not args.no_all)
    print(console_table(results))
    print(f"cohort: wrote {Path(args.output) / 'results.json'}", file=sys.stderr)
    return 1 if results["problems"] else 0


def cmd_report(args, target):
    from cohort.report import report
    if target:
        raise CohortError("cohort report takes results directories, not a program")
    out = report(args.results, args.output)
    print(f"cohort: wrote {out}", file=sys.stderr)
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


def plan_params(args):
    """The planner's keyword arguments from the options add_plan_options defines."""
    params = {k: getattr(args, k) for k in ("min_weight", "max_members", "tolerance", "group_threshold",
                                            "unknown_entry", "entry_purity", "rest", "identify")}
    params["costs"] = {"walk_ns": args.walk_cost, "frame_ns": args.frame_cost, "miss_ns": args.miss_cost,
                       "patched_ns": args.patched_cost}
    return params


def add_plan_options(p):
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
    p.add_argument("--rest", default="pool", choices=("pool", "none"),
                   help="small allocations no group claims: one more pool, apart from the groups, "
                        "or the next allocator, as in HALO (default: pool)")
    p.add_argument("--walk-cost", type=float, default=COST_DEFAULTS["walk_ns"], metavar="NS",
                   help="cost of a stack walk besides its frames, to weigh a group's identification "
                        f"(default: {COST_DEFAULTS['walk_ns']:g}, measured here)")
    p.add_argument("--frame-cost", type=float, default=COST_DEFAULTS["frame_ns"], metavar="NS",
                   help=f"cost of each frame a walk steps (default: {COST_DEFAULTS['frame_ns']:g})")
    p.add_argument("--identify", default="patched", choices=("patched", "walk"),
                   help="how the runtime will identify allocations past their entry site, to price "
                        "it: from the bits of patched selector call sites (its default), or by stack "
                        "walks (when run with COHORT_PATCH=0) (default: patched)")
    p.add_argument("--patched-cost", type=float, default=COST_DEFAULTS["patched_ns"], metavar="NS",
                   help="cost of deciding an allocation from patched call sites "
                        f"(default: {COST_DEFAULTS['patched_ns']:g}, measured here)")
    p.add_argument("--miss-cost", type=float, default=COST_DEFAULTS["miss_ns"], metavar="NS",
                   help="the most a placement saves per affinitive access: one D1 miss served by L2 "
                        f"(default: {COST_DEFAULTS['miss_ns']:g})")
    p.add_argument("--unknown-entry", default="auto", choices=("walk", "cold", "auto"),
                   help="allocations entering at a site the profile never saw: walk the stack "
                        "and test every selector, or never group them (to the rest pool, if any); "
                        "auto: walk only if some selector can match such a stack (default: auto)")


def build_parser():
    p = Parser(prog="cohort", description="Place related heap objects together.")
    p.add_argument("--version", action="version", version=f"cohort {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=Parser)

    r = sub.add_parser("run", help="run a program with the Cohort runtime preloaded",
                       description="Run PROG with libcohort.so preloaded in front of an allocator. "
                                   "Usage: cohort run [options] -- PROG ARGS...")
    r.add_argument("--plan", help="plan file made by `cohort plan` (default: no grouping)")
    r.add_argument("--allocator", default="glibc", choices=sorted(ALLOCATORS),
                   help="the allocator behind Cohort for everything not grouped (default: glibc)")
    r.add_argument("--mode", help="runtime mode: plan, off, all (group every small object) "
                                  "or random[:N] (HALO's random control)")
    r.add_argument("--stats", help="write the runtime's statistics (JSON) to this file at exit")
    r.set_defaults(func=cmd_run)

    pr = sub.add_parser("profile", help="profile a program: HALO's affinity graph of its heap contexts",
                        description="Run PROG under Cohort's Valgrind tool and write a profile "
                                    "(docs/profile-format.md). Usage: cohort profile [options] "
                                    "-o profile.json -- PROG ARGS...")
    pr.add_argument("-o", "--output", default="profile.json", help="profile to write (default: profile.json)")
    pr.add_argument("--force", action="store_true", help="overwrite an existing profile")
    add_profile_options(pr)
    pr.set_defaults(func=cmd_profile)

    pl = sub.add_parser("plan", help="group a profile's contexts and write a plan for the runtime",
                        description="HALO's grouping (weighted density) and identification (selectors) "
                                    "on a profile; writes the runtime's plan (docs/plan-format.md).")
    pl.add_argument("profile", help="profile.json from cohort profile")
    pl.add_argument("-o", "--output", default="plan", help="plan to write (default: plan)")
    pl.add_argument("--force", action="store_true", help="overwrite an existing plan")
    add_plan_options(pl)
    pl.set_defaults(func=cmd_plan)

    ex = sub.add_parser("explain", help="show a profile (and plan) for people, and draw the graph",
                        description="Print the hottest contexts with their call stacks and the groups "
                                    "with their members and selectors; draw the affinity graph "
                                    "coloured by group as SVG.")
    ex.add_argument("profile", help="profile.json from cohort profile")
    ex.add_argument("plan", nargs="?", help="a plan (default: the groups cohort plan would make)")
    ex.add_argument("--graph", metavar="FILE.svg",
                    help="where to draw the graph (default: the profile's name with .svg; - for none)")
    ex.add_argument("--top", type=int, default=10, help="how many hot contexts to list (default: 10)")
    ex.add_argument("--force", action="store_true", help="overwrite a graph file cohort did not draw")
    ex.set_defaults(func=cmd_explain)

    op = sub.add_parser("optimize", help="profile + plan + explain in one step",
                        description="Profile PROG on a training input, plan, and explain; "
                                    "products go to DIR (profile.json, plan, explain.txt, graph.svg). "
                                    "Usage: cohort optimize -o DIR [options] -- PROG TRAIN-ARGS...")
    op.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the products")
    op.add_argument("--force", action="store_true", help="replace products already in DIR")
    add_profile_options(op)
    add_plan_options(op)
    op.set_defaults(func=cmd_optimize)

    be = sub.add_parser("bench", help="baseline vs optimised, side by side",
                        description="Run PROG under each baseline allocator and under Cohort, in "
                                    "interleaved trials; measure cache misses with cachegrind; write "
                                    "DIR/results.json (docs/results-format.md) and plots. "
                                    "Usage: cohort bench [options] -o DIR -- PROG REF-ARGS...")
    be.add_argument("-o", "--output", required=True, metavar="DIR", help="results directory")
    be.add_argument("--trials", type=int, default=10, help="measured rounds (default: 10)")
    be.add_argument("--warmup", type=int, default=1, help="discarded rounds first (default: 1)")
    be.add_argument("--allocators", default="glibc,jemalloc",
                    help="baselines, comma-separated (default: glibc,jemalloc)")
    be.add_argument("--plan", help="use this plan")
    be.add_argument("--train", metavar="'ARGS'", help="profile PROG with these arguments and plan first")
    be.add_argument("--cachegrind-args", metavar="'ARGS'",
                    help="arguments for the cachegrind runs (default: no cachegrind)")
    be.add_argument("--stdin", metavar="FILE",
                    help="every timed run reads FILE, from the start, as its standard input "
                         "(default: /dev/null)")
    be.add_argument("--train-stdin", metavar="FILE",
                    help="standard input of the profiling run with --train (default: /dev/null, "
                         "never --stdin's file)")
    be.add_argument("--cachegrind-stdin", metavar="FILE",
                    help="standard input of the cachegrind runs (default: --stdin's file, else /dev/null)")
    be.add_argument("--output-file", metavar="PATH",
                    help="a file the program writes: removed before every run, its SHA-256 checked "
                         "after each like stdout's; must not exist (unless --force)")
    be.add_argument("--no-random", action="store_true", help="skip HALO's random-placement control")
    be.add_argument("--no-all", action="store_true",
                    help="skip the one-pool control (every small allocation in one pool, COHORT_MODE=all)")
    be.add_argument("--force", action="store_true",
                    help="replace an existing results.json, and let --output-file's PATH be deleted "
                         "if it exists")
    be.set_defaults(func=cmd_bench)

    rp = sub.add_parser("report", help="a Markdown report from bench results",
                        description="Turn one or more results directories into one Markdown report "
                                    "with tables and plots.")
    rp.add_argument("results", nargs="+", help="results directories (or results.json files)")
    rp.add_argument("-o", "--output", default="report.md", help="report to write (default: report.md)")
    rp.set_defaults(func=cmd_report)
    return p


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
    ours, target = split_command(argv)
    parser = build_parser()
    args = parser.parse_args(ours)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
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
