"""`cohort bench`: baseline and optimised runs of one program, side by side.

Every trial round runs every configuration once (glibc, cohort+glibc,
jemalloc, cohort+jemalloc, random control, ...), so drifts on a noisy
machine hit all of them alike; a warm-up round is discarded. Each round
runs them in another order, a row of a balanced Latin square (round_order),
so that no configuration runs right after the same one in every round and
none carries another's after-effects in all its trials. A trial that fails
or whose output differs from the first glibc baseline is kept in
results.json, flagged, and never enters a median. Cache misses come from
cachegrind on a separate (smaller) input with a fixed, recorded geometry.
The schema is docs/results-format.md.

Standard input: every run reads a fresh stream of the file given for it
(--stdin for the timed runs, --train-stdin for the profiling run,
--cachegrind-stdin for cachegrind, which defaults to --stdin's file), else
/dev/null; never cohort's own stdin, which may be a terminal. An output file
(--output-file) is removed before every run, so a stale one cannot pass as
output, and hashed after it like stdout; the harness deletes only files its
own runs wrote (or, with --force, the one there at the start)."""

import json
import os
import platform
import shlex
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from cohort import __version__
from cohort.errors import CohortError
from cohort.files import OPTIMIZE_PRODUCTS, claim, kind_of, made_dirs, write_output
from cohort.paths import allocator_library, shift_library
from cohort.plan.planner import MAX_MAX_SIZE
from cohort.policies import ONLINE_POLICIES, PLAN_POLICIES, needs_trace
from cohort.measure.runner import (check_input, check_plan_fits, environment, exit_words, resolve_program,
                                   shell_words_hint, with_prefetch)
from cohort.measure.runs import (GEOMETRY, MAX_LAYOUT_RUNS, OutputFile, alone_environment, cachegrind,
                                 clean_environment, ignore_pattern, judge, layout_counts, run_once, sha256_file)
from cohort.formats.results import layout_band
from cohort.measure.stats import summarise
from cohort.formats.results import FORMAT, VERSION

# The policies a bench can compare: HALO's plan; the other plan policies
# (docs/planner.md), planned from the same training profile; and the online
# policies, which need no profile (docs/policies.md).
PROFILE_POLICIES = tuple(p for p in PLAN_POLICIES if p != "halo")
POLICIES = ("halo",) + PROFILE_POLICIES + ONLINE_POLICIES


def policy_plan(outdir, policy):
    """Where a bench writes the plan of a policy other than halo."""
    return Path(outdir) / f"plan-{policy}"


def allocator_plan(outdir, allocator):
    """Where a bench writes halo's plan made for an allocator after the first."""
    return Path(outdir) / f"plan-for-{allocator}"



def whole_number(text, what, script, least=0):
    """A count a script was given (an argument or an environment setting),
    at least `least`, or exit with one line that names it."""
    if not text.strip().isdigit() or len(text.strip()) > 18:
        raise SystemExit(f"{Path(script).name}: {what} must be a whole number, not {text!r}")
    if int(text) < least:
        raise SystemExit(f"{Path(script).name}: {what} must be at least {least}, not {text.strip()}")
    return int(text)


def chosen_names(names, known, what, script):
    """The names a script was given (all of `known` if none), each one of
    `known`, or exit with one line: `SCRIPT: 'x' is not WHAT (KNOWN)`."""
    for n in names:
        if n not in known:
            raise SystemExit(f"{Path(script).name}: {n!r} is not {what} ({', '.join(known)})")
    return names or list(known)


def publish(text, path, script):
    """A benchmark script's Markdown table: printed, and written to path."""
    print(text)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)
    print(f"{Path(script).stem}: wrote {path}")


def report_runs(results, names, cohort):
    """A suite script's end: `cohort report` over the results directories
    results/NAME that hold a results.json, into results/report.md."""
    dirs = [str(Path(results) / n) for n in names if (Path(results) / n / "results.json").exists()]
    if dirs:
        subprocess.run([str(cohort), "report", *dirs, "-o", str(Path(results) / "report.md")], check=True)
        print(f"report: {Path(results) / 'report.md'}")


def whole_numbers(text, what, script, least=0):
    """A space-separated list of counts (STRESS_THREADS=\"1 2 8\"), each checked."""
    values = [whole_number(t, what, script, least) for t in text.split()]
    if not values:
        raise SystemExit(f"{Path(script).name}: {what} names no number")
    return values


def script_arguments(argv, doc, default_trials):
    """A benchmark script's command line, `SCRIPT [TRIALS] [NAME ...]`:
    (trials, names). -h or --help prints doc and exits; a TRIALS that is not
    a count exits with one line."""
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(doc)
        raise SystemExit(0)
    if len(argv) > 1 and not argv[1].isdigit():
        raise SystemExit(f"{Path(argv[0]).name}: TRIALS must be a number, not {argv[1]!r} (--help says how)")
    return (whole_number(argv[1], "TRIALS", argv[0], least=1) if len(argv) > 1 else default_trials), argv[2:]


# ---- configurations --------------------------------------------------------

# What --sweep can vary: (type, lowest, highest, profile option or planner keyword).
# affinity-distance is the profiler's, so each value gets a profile of its own.
SWEEPS = {
    "affinity-distance": (int, 1, 1 << 20, "affinity_distance"),
    "tolerance": (float, 0.0, 1.0, "tolerance"),
    "max-members": (int, 1, 4096, "max_members"),
    "entry-purity": (float, 0.0, 1.0, "entry_purity"),
    "group-threshold": (float, 0.0, 1.0, "group_threshold"),
    "rest-max": (int, 16, MAX_MAX_SIZE, "rest_max"),
    "scale": (float, 1.0, 1e9, "scale"),
    "rest-shape": (str, ("one", "classes"), None, "rest_shape"),   # a choice: lo holds the choices
    "line-offsets": (str, ("auto", "none"), None, "line_offsets"),
}
PROFILE_SWEEPS = ("affinity-distance",)


def parse_sweep(text):
    """--sweep PARAM=V1,V2,...: (PARAM, [values]), or a one-line CohortError."""
    if text is None:
        return None
    param, eq, rest = text.partition("=")
    param = param.strip()
    if not eq or param not in SWEEPS:
        raise CohortError(f"--sweep {text!r}: give PARAM=V1,V2,... with PARAM one of {', '.join(SWEEPS)}")
    kind, lo, hi, _ = SWEEPS[param]
    words = [w.strip() for w in rest.split(",")]
    if len(words) < 2 or not all(words):
        raise CohortError(f"--sweep {param}: give at least two values, comma-separated")
    values = []
    for w in words:
        if kind is str:
            if w not in lo:
                raise CohortError(f"--sweep {param}: {w!r} is not one of {', '.join(lo)}")
            values.append(w)
            continue
        try:
            v = kind(w)
        except ValueError:
            raise CohortError(f"--sweep {param}: {w!r} is not {'an integer' if kind is int else 'a number'}") \
                from None
        if not lo <= v <= hi or v != v:
            raise CohortError(f"--sweep {param}: {w} is out of range ({lo} to {hi})")
        values.append(v)
    if len(set(values)) != len(values):
        raise CohortError(f"--sweep {param}: a value is given twice")
    return param, values


def sweep_name(param, value):
    """The configuration (and plan, statistics) name of one sweep value."""
    return f"halo@{param}={value:g}" if isinstance(value, float) else f"halo@{param}={value}"


def parse_policies(text):
    """--policies: a comma-separated list of POLICIES, in the order given."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise CohortError("--policies needs at least one policy (known: " + ", ".join(POLICIES) + ")")
    for p in names:
        if p not in POLICIES:
            raise CohortError(f"--policies: {p!r} is not a policy Cohort has (known: {', '.join(POLICIES)})")
    if len(set(names)) != len(names):
        raise CohortError("--policies names a policy twice")
    return names


def round_order(n, rnd):
    """The order in which round rnd runs n configurations, as indexes into
    their list: row rnd of a balanced Latin square (Williams'), in which
    over n rounds (2n for an odd n) each configuration runs right after
    each other one equally often. Every row starts a turn of
    0, 1, n-1, 2, n-2, ...; row 0 runs the first, the reference baseline,
    first. Rounds that only turned the list, as bench's did before, kept
    each configuration after the same one in every round but one, so
    whatever a run leaves behind (a heavy glibc run's freed memory, the
    caches) fell on the same configuration every time: in a suite run of
    2026-11-30, bintree's plan, the rest pool's plan within one
    instruction, ran 0.656 s in the round it came first and 0.785 to 0.914
    s in the four it followed glibc, against the rest pool's 0.712 to 0.786
    s. Balanced, the two still came apart in a rerun (0.817-0.836 s
    against 0.724-0.781): at 5 trials the quartile test has false
    positives of its own on this machine."""
    start, lo, hi = [0], 1, n - 1
    while len(start) < n:
        start.append(lo)
        lo += 1
        if len(start) < n:
            start.append(hi)
            hi -= 1
    k = rnd % (n if n % 2 == 0 else 2 * n)
    row = [(i + k) % n for i in start]
    return row if k < n else row[::-1]   # an odd square's mirror rows give the pairs the first n lack


def configurations(allocators, plan, random_control=True, base_env=None, all_control=True,
                   policies=("halo",), plans=None, swept=(), prefetch=None, plans_for=None):
    """[(name, kind, allocator, env builder)] in trial order. The env builder
    takes the statistics path (or None). halo is cohort+ALLOC in front of each
    allocator; every other policy runs under its own name in front of the
    first: a plan policy with its plan (plans: {policy: path}), an online
    one with none; then each plan of a sweep (swept: [(name, path)]).
    prefetch: a prefetch file (cohort prefetch); each baseline and each
    Cohort configuration then has a twin NAME+prefetch that injects it.
    plans_for: {allocator: the plan cohort+ALLOC runs instead of `plan`},
    made for it (a plan's rest pool is decided for the allocator underneath)."""
    base_env = clean_environment(base_env)
    configs = []
    for a in allocators:
        lib = allocator_library(a)

        def baseline(stats, lib=lib):
            return alone_environment(base_env, lib)

        def optimised(stats, a=a):
            return environment(plan=(plans_for or {}).get(a, plan), allocator=a, stats=stats, base=base_env)

        configs.append((a, "baseline", a, baseline))
        if "halo" in policies:
            configs.append((f"cohort+{a}", "cohort", a, optimised))
    for p in policies:
        if p in PROFILE_POLICIES:
            def planned(stats, path=(plans or {})[p], a=allocators[0]):
                return environment(plan=path, allocator=a, stats=stats, base=base_env)
            configs.append((p, "policy", allocators[0], planned))
        elif p in ONLINE_POLICIES:
            def online(stats, p=p, a=allocators[0]):
                return environment(allocator=a, policy=p, stats=stats, base=base_env)
            configs.append((p, "policy", allocators[0], online))
    for name, path in swept:
        def sweep_plan(stats, path=path, a=allocators[0]):
            return environment(plan=path, allocator=a, stats=stats, base=base_env)
        configs.append((name, "sweep", allocators[0], sweep_plan))
    if random_control:
        # HALO's control: each small allocation to one of four pools at
        # random, in front of the first allocator, compared with its baseline.
        def rnd(stats, a=allocators[0]):
            return environment(allocator=a, mode="random:4", stats=stats, base=base_env)
        configs.append(("random", "random", allocators[0], rnd))
    if all_control:
        # The simple alternative a plan must match: every small allocation
        # in one pool, no identification (COHORT_MODE=all).
        def one(stats, a=allocators[0]):
            return environment(allocator=a, mode="all", stats=stats, base=base_env)
        configs.append(("all", "all", allocators[0], one))
    if prefetch is not None:
        twins = []
        for name, kind, a, make in configs:
            if kind in ("random", "all"):
                continue
            if kind == "baseline":
                def twin(stats, a=a):
                    return environment(allocator=a, stats=stats, base=base_env, prefetch=prefetch)
            else:
                def twin(stats, make=make):
                    return with_prefetch(make(stats), prefetch)
            twins.append((f"{name}+prefetch", "prefetch", a, twin))
        configs += twins
    return configs


# ---- one run ---------------------------------------------------------------



# ---- cachegrind ------------------------------------------------------------



# ---- layout noise -----------------------------------------------------------
# A program's cache misses can hang on where its blocks fall within a page,
# which no allocator chooses on purpose: one start-up request of another
# size moves sqlite3's D1 misses under glibc by up to 10%
# (docs/results-format.md, "Layout noise").
# Counts are exact, so a single baseline run hides that; a few runs with the
# heap and the stack moved show it.



# ---- the whole bench -------------------------------------------------------

def report_head(plan, profile):
    """A plan's groups in one line, for the bench's log."""
    names = [g.name for g in plan.groups]
    return (f"{len(names)} groups" + (f" ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})" if names else "")
            + (f"; {plan.why_none}" if plan.why_none else ""))


def machine():
    info = {"hostname": platform.node(), "kernel": platform.release(), "python": platform.python_version(),
            "cpus": os.cpu_count()}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["memory_kb"] = int(line.split()[1])
                break
    except OSError:
        pass
    return info


def check_output_file(path, outdir, inputs, force):
    """The absolute path of --output-file, or a one-line CohortError: its
    directory must exist and be writable, it may not be a directory, one of
    the bench's own products or an input (inputs: [(option, file or None)],
    what the runs read), and, unless force, may not exist."""
    name = Path(os.path.abspath(path))
    parent = name.parent
    if not parent.is_dir():
        raise CohortError(f"--output-file {path}: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CohortError(f"--output-file {path}: cannot write in {parent}")
    if name.is_dir():
        raise CohortError(f"--output-file {path}: is a directory")
    if os.path.lexists(name) and not (name.is_symlink() or name.is_file()):
        # A device, pipe or socket is never deleted, --force or not.
        raise CohortError(f"--output-file {path}: is not a regular file")
    ours = [outdir / n for n in ("results.json", "profile.json", "plan", "speedup.png", "misses.png")]
    if name in {Path(os.path.abspath(p)) for p in ours} or name.parent == Path(os.path.abspath(outdir / "stats")):
        raise CohortError(f"--output-file {path}: is one of cohort bench's own products in {outdir}")
    for option, f in inputs:
        if f is not None and (str(name) == f or (name.exists() and os.path.samefile(name, f))):
            raise CohortError(f"--output-file {path}: is also the {option} file, and the bench deletes "
                              "the output file before every run")
    if os.path.lexists(name) and not force:
        raise CohortError(f"--output-file {path} exists; cohort bench deletes it before every run "
                          "(use --force to let it, or name a file that does not exist)")
    return name


def input_record(path):
    """What results.json says of an input: its path and, for a regular file,
    its size and SHA-256 (so the results say exactly what the runs read)."""
    rec = {"path": path, "bytes": None, "sha256": None}
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if stat.S_ISREG(st.st_mode):
                rec["bytes"], rec["sha256"] = st.st_size, sha256_file(f)
    except OSError as e:
        raise CohortError(f"cannot read {path}: {e.strerror}") from None
    return rec


def bench(target, outdir, trials=10, warmup=1, allocators=("glibc", "jemalloc"), plan=None, train=None,
          cachegrind_args=None, random_control=True, force=False, log=print, stdin=None, train_stdin=None,
          cachegrind_stdin=None, output_file=None, all_control=True, policies=("halo",), sweep=None,
          extra_plans=(), prefetch=None, layout_runs=0, ignore_output=None, confirmation=None):
    """The whole `cohort bench` (see the module's docstring). train: the
    training runs' argument strings (the plan's first, then the validation
    runs'), or None; train_stdin: a file for each, or None. stdin,
    train_stdin, cachegrind_stdin: files the timed, profiling and cachegrind
    runs read as standard input (cachegrind's defaults to stdin; otherwise
    /dev/null). output_file: a file the target writes, checked like stdout.
    policies: what to compare (POLICIES); halo needs the plan or the
    training run, the online policies need neither. sweep: (parameter,
    values) from parse_sweep: halo's plan for each value, from the training
    run (a profile per value for a profiler parameter), in front of the
    first allocator (HALO's Figure 12). extra_plans: [(name, plan path)]
    run the same way, under their names (cohort tune's candidates).
    prefetch: a prefetch file, injected in a twin of each configuration.
    layout_runs: further cachegrind runs of each baseline, each with its
    heap and stack moved (layouts()), whose spread of D1 misses is the band
    a ratio must leave to be a difference. ignore_output: a regular
    expression; the lines of standard output it matches are left out of the
    digest that every run's output is checked by (timings, dates).
    confirmation: confirm.BenchConfirmation (--confirm), or None: halo's
    plans, each made for its allocator, are measured on a larger run before
    anything is timed, as `cohort optimize --ref` measures its plan, and made
    again from what the measurement kept. It is handed in, not imported:
    confirm measures through bench.
    Everything is checked before anything runs or is written."""
    outdir = Path(outdir)
    results_path = outdir / "results.json"
    ignore = ignore_pattern(ignore_output)
    if train_stdin is not None and train is not None and len(train_stdin) != len(train):
        raise CohortError(f"--train-stdin given {len(train_stdin)} times for {len(train)} --train runs: give "
                          "one per --train, in the same order (/dev/null for a run that reads none)")
    if os.path.lexists(outdir) and not outdir.is_dir():
        raise CohortError(f"{outdir} exists and is not a directory")
    if trials < 1 or warmup < 0:
        raise CohortError("--trials must be at least 1 and --warmup at least 0")
    if not 0 <= layout_runs <= MAX_LAYOUT_RUNS:
        raise CohortError(f"--layout-runs must be 0 to {MAX_LAYOUT_RUNS}")
    if layout_runs and cachegrind_args is None:
        raise CohortError("--layout-runs moves the cachegrind runs' layout: it needs --cachegrind-args")
    if layout_runs:
        shift_library()   # built, or a one-line error before anything runs
    policies = list(policies)
    profiled = [p for p in policies if p in PROFILE_POLICIES]
    if profiled and train is None:
        raise CohortError(f"--policies {','.join(profiled)} {'needs' if len(profiled) == 1 else 'need'} a "
                          "profile: give --train 'TRAIN ARGS' (one training run feeds every plan policy)"
                          + ("; --plan is halo's plan only" if plan is not None else ""))
    if "halo" in policies and (plan is None) == (train is None):
        raise CohortError("give exactly one of --plan PLAN or --train 'TRAIN ARGS'")
    if "halo" not in policies and plan is not None:
        raise CohortError("--plan is the halo policy's plan, which --policies leaves out; "
                          "add halo to --policies, or drop --plan")
    if "halo" not in policies and not profiled and train is not None:
        raise CohortError("--train feeds the plan policies (halo, halo+ds, apa-*, hds), which --policies "
                          "leaves out; add one, or drop --train")
    if not allocators:
        raise CohortError("--allocators needs at least one allocator")
    if sweep is not None and train is None:
        raise CohortError(f"--sweep {sweep[0]} plans from the training run: give --train 'TRAIN ARGS'")
    swept = [sweep_name(sweep[0], v) for v in sweep[1]] if sweep else []
    extra_plans = [(n, Path(p).resolve()) for n, p in extra_plans]
    taken = {*allocators, *(f"cohort+{a}" for a in allocators), *policies, *swept, "random", "all"}
    for n, _ in extra_plans:
        if n in taken or "/" in n or n.endswith("+prefetch"):
            raise CohortError(f"a configuration named {n!r} cannot be added")
        taken.add(n)
    if train_stdin is not None and train is None:
        raise CohortError("--train-stdin is the input of the profiling run: it needs --train")
    if confirmation is not None:
        confirmation.check(target, train, policies)
    if cachegrind_stdin is not None and cachegrind_args is None:
        raise CohortError("--cachegrind-stdin is the input of the cachegrind runs: it needs --cachegrind-args")
    for a in allocators:
        allocator_library(a)
    prog = resolve_program(target)
    for _, path in extra_plans:   # before anything runs or is written
        check_plan_fits(path, prog)
    inputs = {"ref": stdin, "train": train_stdin[0] if train_stdin else None, "cachegrind": cachegrind_stdin}
    options = {"ref": "--stdin", "train": "--train-stdin", "cachegrind": "--cachegrind-stdin"}
    inputs = {k: check_input(v, options[k], rereadable=True) if v is not None else None
              for k, v in inputs.items()}
    # the validation runs' (--train after the first): each its own --train-stdin, else /dev/null
    inputs["validate"] = [check_input(v, "--train-stdin", rereadable=True) for v in train_stdin[1:]] \
        if train_stdin else [None] * (len(train) - 1 if train else 0)
    if inputs["cachegrind"] is None:
        inputs["cachegrind"] = inputs["ref"]
    if output_file is not None:
        read = [(options[k], inputs[k]) for k in options] + [("--train-stdin", v) for v in inputs["validate"]]
        output_file = OutputFile(check_output_file(output_file, outdir, read,
                                                   force), force=force)
    stdin_used = {"ref": inputs["ref"] or os.devnull}
    if train is not None:
        stdin_used["train"] = inputs["train"] or os.devnull
    if cachegrind_args is not None:
        stdin_used["cachegrind"] = inputs["cachegrind"] or os.devnull
    stdin_records = {k: input_record(v) for k, v in stdin_used.items()}
    if inputs["validate"]:
        stdin_records["validate"] = [input_record(v or os.devnull) for v in inputs["validate"]]
    if prefetch is not None:
        from cohort.formats.prefetchfile import check
        prefetch = check(prefetch)
    stats_names = ([f"cohort+{a}" for a in allocators] if "halo" in policies else []) \
        + [p for p in policies if p != "halo"] + swept + [n for n, _ in extra_plans] \
        + ["random"] * random_control + ["all"] * all_control
    if prefetch is not None:
        stats_names += [f"{n}+prefetch" for n in [*allocators, *stats_names] if n not in ("random", "all")]
    for path, kind in products(outdir, train is not None, stats_names, profiled + swept,
                               sweep_profiles(outdir, sweep), validations=len(inputs["validate"]),
                               planned_for=allocators[1:] if "halo" in policies else ()):
        if os.path.lexists(path):
            claim(path, kind, force)
    with made_dirs(outdir):
        try:
            return _bench(target, prog, outdir, results_path, trials, warmup, allocators, plan, train,
                          cachegrind_args, random_control, log, inputs, stdin_records, output_file,
                          all_control, force, policies, sweep, extra_plans, prefetch, layout_runs, ignore,
                          confirmation)
        finally:
            if output_file is not None:
                output_file.done()


def sweep_profiles(outdir, sweep):
    """{value: path} of the profiles a sweep of a profiler parameter makes."""
    if not sweep or sweep[0] not in PROFILE_SWEEPS:
        return {}
    return {v: Path(outdir) / f"profile-{sweep[0]}={v}.json" for v in sweep[1]}


def sweep_plans(sweep, outdir, train_argv, train_stdin, force, log):
    """halo's plan for each value of the sweep: [(config name, plan path)].
    A profiler parameter gets a profile per value, from the training run
    again; a planner parameter plans from the one training profile."""
    from cohort.plan.planner import PLAN_DEFAULTS, plan_command
    from cohort.measure.profile import profile
    param, values = sweep
    keyword = SWEEPS[param][3]
    profiles = sweep_profiles(outdir, sweep)
    out = []
    for v in values:
        name = sweep_name(param, v)
        source, params = outdir / "profile.json", dict(PLAN_DEFAULTS)
        if param in PROFILE_SWEEPS:
            log(f"cohort bench: profiling {' '.join(train_argv)} with {param} {v}")
            source = profiles[v]
            _, rc = profile(train_argv, source, force=force, stdin=train_stdin, **{keyword: v})
            if rc != 0:
                raise CohortError(f"the training run failed with {param} {v} ({exit_words(rc)})")
        else:
            params[keyword] = v
        made, prof = plan_command(source, policy_plan(outdir, name), force=force, **params)
        log(f"cohort bench: {name}: {report_head(made, prof)}")
        out.append((name, policy_plan(outdir, name).resolve()))
    return out


def validation_profiles(outdir, n):
    """The profiles of the n validation runs (--train after the first), as
    cohort optimize names them."""
    return [Path(outdir) / f"profile-{k}.json" for k in range(2, n + 2)]


def products(outdir, trained, stats_names, profiled=(), profiles=None, validations=0, planned_for=()):
    """[(path, kind)] of every file a bench writes into outdir. profiled:
    the plan policies besides halo and the sweep's configurations, each
    with its plan; profiles: a sweep's own ({value: path}); validations:
    how many validation runs leave a profile each; planned_for: the
    allocators after the first, for which halo's plan is made again."""
    out = [(outdir / "results.json", "results")]
    if trained:
        out += [(outdir / name, kind) for name, kind in OPTIMIZE_PRODUCTS.items()]
        out += [(allocator_plan(outdir, a), "plan") for a in planned_for]
        out += [(p, "profile") for p in validation_profiles(outdir, validations)]
    out += [(policy_plan(outdir, p), "plan") for p in profiled]
    out += [(p, "profile") for p in (profiles or {}).values()]
    out += [(outdir / "speedup.png", "plot"), (outdir / "misses.png", "plot")]
    out += [(outdir / "stats" / f"{n}.json", "stats") for n in stats_names]
    return out


def _bench(target, prog, outdir, results_path, trials, warmup, allocators, plan, train, cachegrind_args,
           random_control, log, inputs, stdin_records, output_file, all_control=True, force=False,
           policies=("halo",), sweep=None, extra_plans=(), prefetch=None, layout_runs=0, ignore=None,
           confirmation=None):
    commands = {"ref": target}
    confirmed = None   # {allocator: the confirmation's lines} (BenchConfirmation.plans)
    plans, swept, plans_for = {}, [], {}
    headroom = None   # the training run's (trained_headroom)
    if train is not None:
        from cohort.present.explain import plan_and_explain
        from cohort.plan.planner import PLAN_DEFAULTS, plan_command
        from cohort.measure.profile import TRACE_BUDGET, profile
        train_argv = [target[0], *shlex.split(train[0])]
        commands["train"] = train_argv
        validate_argv = [[target[0], *shlex.split(t)] for t in train[1:]]
        if validate_argv:
            commands["validate"] = validate_argv
        if inputs["train"] is None and inputs["ref"] is not None:
            log("cohort bench: note: the profiling run reads /dev/null, not --stdin's file "
                "(give --train-stdin FILE for its own input)")
        log(f"cohort bench: profiling {' '.join(train_argv)}")
        if output_file is not None:
            output_file.clear()
        _, rc = profile(train_argv, outdir / "profile.json", force=force, stdin=inputs["train"] or os.devnull,
                        trace_budget=TRACE_BUDGET if needs_trace(policies) else None)
        if output_file is not None:
            output_file.collect()   # not checked; removed before the next run
        if rc != 0:
            raise CohortError(f"the training run {' '.join(train_argv)} failed ({exit_words(rc)}); "
                              f"its profile is in {outdir / 'profile.json'}; fix the training arguments, "
                              f"or plan from it by hand (cohort plan) and pass --plan"
                              f"{shell_words_hint(train_argv[1:])}")
        validated = []   # the validation runs' profiles that count: a failed run's is left out
        for argv, stdin_file, path in zip(validate_argv, inputs["validate"], validation_profiles(outdir, len(validate_argv))):
            log(f"cohort bench: profiling {' '.join(argv)} (a validation run)")
            if output_file is not None:
                output_file.clear()
            _, rc = profile(argv, path, force=force, stdin=stdin_file or os.devnull)
            if output_file is not None:
                output_file.collect()
            if rc != 0:
                log(f"cohort bench: WARNING: the validation run {' '.join(argv)} failed ({exit_words(rc)}); "
                    f"its profile is left out{shell_words_hint(argv[1:])}")
            else:
                validated.append(path)
        _, trained = plan_and_explain(outdir, force=force, validate=validated,
                                      **dict(PLAN_DEFAULTS, allocator=allocators[0]))
        headroom = trained_headroom(trained)
        written = [outdir / n for n in OPTIMIZE_PRODUCTS] + validation_profiles(outdir, len(validate_argv))
        if "halo" in policies:
            plan = outdir / "plan"
            # cohort+ALLOC runs the plan made for ALLOC: its rest pool is
            # decided for the allocator underneath (rest.rest_against).
            for a in allocators[1:]:
                made, prof = plan_command(outdir / "profile.json", allocator_plan(outdir, a), force=force,
                                          validate=validated, **dict(PLAN_DEFAULTS, allocator=a))
                plans_for[a] = allocator_plan(outdir, a).resolve()
                written.append(allocator_plan(outdir, a))
                log(f"cohort bench: cohort+{a}: {report_head(made, prof)}")
            if confirmation is not None and confirmation.run is not None:
                commands["confirm"] = confirmation.run[0]
                confirmed = confirmation.plans(outdir, allocators, validated, log)
        for p in policies:
            if p in PROFILE_POLICIES:
                made, prof = plan_command(outdir / "profile.json", policy_plan(outdir, p), force=force,
                                          validate=validated, **dict(PLAN_DEFAULTS, policy=p))
                plans[p] = policy_plan(outdir, p).resolve()
                written.append(policy_plan(outdir, p))
                log(f"cohort bench: {p}: {report_head(made, prof)}")
        if sweep:
            swept = sweep_plans(sweep, outdir, train_argv, inputs["train"] or os.devnull, force, log)
            written += [policy_plan(outdir, n) for n, _ in swept] + list(sweep_profiles(outdir, sweep).values())
        log(f"cohort bench: wrote {', '.join(map(str, written))}")
    if plan is not None:
        plan = Path(plan).resolve()
    named = swept + list(extra_plans)   # plans run under names of their own
    for path in ([plan] if plan is not None else []) + list(plans.values()) + list(plans_for.values()) + \
            [p for _, p in named]:
        check_plan_fits(path, prog)
    configs = configurations(allocators, plan, random_control, all_control=all_control, policies=policies,
                             plans=plans, swept=named, prefetch=prefetch, plans_for=plans_for)
    names = [c[0] for c in configs]
    stats_dir = outdir / "stats"
    stats_dir.mkdir(exist_ok=True)
    if force:   # the runtime replaces only statistics it wrote (runtime/report/stats.c)
        for name in names:
            p = stats_dir / f"{name}.json"
            if p.is_file() and kind_of(p) != "stats":
                p.unlink()
    trial_log, reference = [], None
    with tempfile.TemporaryDirectory(prefix="cohort-bench.") as work:
        for rnd in range(warmup + trials):
            for name, kind, alloc, make_env in [configs[i] for i in round_order(len(configs), rnd)]:
                stats = stats_dir / f"{name}.json" if kind != "baseline" else None
                r = run_once(target, make_env(stats), work, stdin=inputs["ref"], output_file=output_file,
                             ignore=ignore)
                r.update(config=name, round=rnd, warmup=rnd < warmup)
                r["status"], reason = judge(r, reference)
                r.pop("output_file_problem", None)
                if r["status"] == "ok" and reference is None and kind == "baseline":
                    reference = dict(r)   # keeps its output, to say where others differ
                r.pop("stdout", None)
                if r["status"] != "ok":
                    r["reason"] = reason
                    last = r["stderr_tail"].strip().splitlines()[-1:] if r["stderr_tail"].strip() else []
                    log(f"cohort bench: {name} round {rnd}: {r['status'].upper()} "
                        f"({'; '.join([reason, *last])})")
                else:
                    r["stderr_tail"] = ""
                trial_log.append(r)
            if reference is None:   # no baseline ran well: nothing to compare with, so stop
                bad = next(x for x in trial_log if x["config"] == names[0])
                last = bad["stderr_tail"].strip().splitlines()[-1:]
                raise CohortError(f"{' '.join(target)} fails without Cohort too ({bad['reason']}"
                                  + (f": {last[0][:160]}" if last else "") + "); check the command "
                                  "and its arguments; nothing was measured")
            if rnd >= warmup:
                log(f"cohort bench: round {rnd - warmup + 1}/{trials} done")
    measured = [t for t in trial_log if not t["warmup"]]
    summary = summarise(measured, names)
    ratios = {}
    for name, kind, alloc, _ in configs:
        if kind == "baseline":
            continue
        base = summary[alloc]["wall_median_s"]
        mine = summary[name]
        if base and mine["wall_median_s"] is not None:
            ratios[name] = {"vs": alloc, "time_ratio": mine["wall_median_s"] / base,
                            "time_ratio_p25": mine["wall_p25_s"] / base,
                            "time_ratio_p75": mine["wall_p75_s"] / base}
    cg = None
    if cachegrind_args is not None:
        cg_argv = [target[0], *shlex.split(cachegrind_args)]
        commands["cachegrind"] = cg_argv
        cg = {}
        for name, kind, alloc, make_env in configs:
            log(f"cohort bench: cachegrind {name}")
            cg[name] = cachegrind(cg_argv, make_env(None), stdin=inputs["cachegrind"], output_file=output_file,
                                  ignore=ignore)
        first = cg[names[0]]
        for name, r in cg.items():
            if "error" in r:
                continue
            if r["output_sha256"] != first["output_sha256"]:
                r["error"] = f"output differs from the {names[0]} baseline's"
            elif r.get("output_file_sha256") != first.get("output_file_sha256"):
                r["error"] = f"output file differs from the {names[0]} baseline's"
        for name, kind, alloc, make_env in configs:
            if kind == "baseline" and layout_runs and "error" not in cg[name]:
                cg[name]["layouts"] = layout_counts(cg_argv, make_env(None), cg[name], layout_runs,
                                                    inputs["cachegrind"], output_file, log, name, ignore)
        for name, kind, alloc, _ in configs:
            if kind != "baseline" and name in ratios and "error" not in cg[name] and "error" not in cg[alloc]:
                ratios[name]["d1_ratio"] = cg[name]["D1_misses"] / max(cg[alloc]["D1_misses"], 1)
                ratios[name]["lld_ratio"] = cg[name]["LLd_misses"] / max(cg[alloc]["LLd_misses"], 1)
                band = layout_band(cg[alloc])
                if band is not None:
                    ratios[name]["d1_layout_band"] = band
    runtime_stats = {}
    for name in names:
        p = stats_dir / f"{name}.json"
        if p.exists():
            try:
                st = json.loads(p.read_text())
            except ValueError:
                continue
            groups = st.get("groups", [])
            frag = sum(g.get("fragmentation_at_peak_bytes", 0) for g in groups)
            resident = sum(g.get("resident_at_peak_bytes", 0) for g in groups)
            runtime_stats[name] = {
                "groups": len(groups), "grouped_allocations": sum(g.get("allocations", 0) for g in groups),
                "fragmentation_at_peak_bytes": frag,
                "fragmentation_at_peak_percent": round(100 * frag / resident, 2) if resident else 0.0,
                "identification": st.get("identification", {}), "plan_active": st.get("plan_active"),
                "frames_walked": st.get("frames_walked", {}),
            }
    problems = [f"{t['config']} round {t['round']}: {t['status']} ({t['reason']})"
                for t in measured if t["status"] != "ok"]
    if cg:
        problems += [f"cachegrind {n}: {r['error']}" for n, r in cg.items() if "error" in r]
    results = {
        "format": FORMAT, "version": VERSION, "cohort": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
        "workload": os.path.basename(prog), "commands": commands, "stdin": stdin_records,
        "output_file": None if output_file is None else {
            "path": str(output_file.path),
            "reference_sha256": reference.get("output_file_sha256") if reference else None},
        "plan": str(plan) if plan is not None else None,
        "plans": {p: str(path) for p, path in plans.items()},
        "sweep": {"parameter": sweep[0], "values": list(sweep[1]), "configs": [n for n, _ in swept],
                  "plans": [str(path) for _, path in swept]} if sweep else None,
        "extra_plans": {n: str(path) for n, path in extra_plans},
        "parameters": {"trials": trials, "warmup": warmup, "allocators": list(allocators), "policies": policies,
                       "random_control": random_control, "all_control": all_control, "prefetch": prefetch,
                       "layout_runs": layout_runs, "ignore_output": ignore.pattern if ignore else None,
                       "cache_geometry": GEOMETRY, "order": names},
        "trials": trial_log, "summary": summary, "ratios": ratios, "cachegrind": cg,
        "runtime_stats": runtime_stats, "problems": problems,
        "headroom": headroom, "confirmed": confirmed,
    }
    write_output(results_path, json.dumps(results, indent=1) + "\n", "results", force)
    try:
        from cohort.present.plots import bench_plots
        drawn = bench_plots(results, outdir, force)
        if drawn:
            log(f"cohort bench: drew {', '.join(str(p) for p in drawn)}")
    except ImportError:
        log("cohort bench: matplotlib is missing; no plots (pip install matplotlib)")
    return results


def trained_headroom(profile):
    """The training run's headroom (cohort/plan/headroom.py), for the results
    and the table: {"tracked_d1_share": share or None, "line": text}."""
    from cohort.plan import headroom
    h = headroom.of(profile)
    return {"tracked_d1_share": round(h.tracked, 6) if h else None, "line": headroom.line(profile)}
