"""The `cohort` command line."""

import argparse
import sys

from cohort import __version__
from cohort.errors import CohortError
from cohort.paths import ALLOCATORS


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
    from cohort.runner import environment, exec_program
    if not target:
        raise CohortError("no program given (usage: cohort run [options] -- ./prog args...)")
    env = environment(plan=args.plan, allocator=args.allocator, mode=args.mode, stats=args.stats)
    exec_program(target, env)


def cmd_profile(args, target):
    from cohort.profile import profile, summary
    if not target:
        raise CohortError("no program given (usage: cohort profile [options] -o profile.json -- ./prog args...)")
    data, rc = profile(target, args.output, force=args.force, affinity_distance=args.affinity_distance,
                       max_size=args.max_size, coverage=args.coverage)
    print(summary(data, rc), file=sys.stderr)
    print(f"cohort: wrote {args.output}", file=sys.stderr)
    return 0


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
    pr.add_argument("--affinity-distance", type=int, default=128, metavar="BYTES",
                    help="HALO's affinity distance A (default: 128)")
    pr.add_argument("--max-size", type=int, default=4096, metavar="BYTES",
                    help="largest object whose accesses are tracked (default: 4096)")
    pr.add_argument("--coverage", type=float, default=0.9, metavar="FRACTION",
                    help="keep the hottest contexts that make up this fraction of accesses (default: 0.9)")
    pr.set_defaults(func=cmd_profile)
    return p


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ours, target = split_command(argv)
    parser = build_parser()
    args = parser.parse_args(ours)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args, target) or 0
    except CohortError as e:
        sys.stderr.write(f"cohort: {e}\n")
        return e.status
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
