"""Running a target program with libcohort preloaded in front of an allocator."""

import os
import shutil
import signal
import stat
from pathlib import Path

from cohort.errors import CohortError
from cohort.paths import allocator_library, runtime_library
from cohort.formats import elf
from cohort.plans import read_plan


def exit_words(rc):
    """A return code in words: 'exit status 3', 'killed by SIGSEGV'."""
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"

# Words that a shell would have read as redirections, pipes or lists; in a
# --train string they reach the program as arguments.
SHELL_WORDS = ("<", ">", ">>", "<<", "|", "||", "&&", ";", "&", "2>", "2>&1")


def shell_words_hint(words, option="--train", stdin_option="--train-stdin"):
    """For the message of a training run that failed: where its arguments
    hold a word a shell would have taken (`<`, `|`, ...), which Cohort
    passed to the program as an argument. Else ""."""
    found = next((w for w in words if w in SHELL_WORDS), None)
    if found is None:
        return ""
    return (f"; its arguments hold `{found}`, which the program got as an argument: {option} takes the "
            f"program's arguments, not a shell command line (give a run's standard input with "
            f"{stdin_option} FILE)")


MODES = ("plan", "off", "all", "random")


def resolve_program(argv):
    """The executable the command line names, or a clear error."""
    if not argv:
        raise CohortError("no program given (usage: cohort run [options] -- ./prog args...)")
    prog = argv[0]
    path = shutil.which(prog) if "/" not in prog else prog
    if not path or not os.path.exists(path):
        raise CohortError(f"cannot run {prog}: no such file", status=127)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise CohortError(f"cannot run {prog}: not an executable file", status=126)
    return path


SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox"}


def script_advice(argv, path):
    """What to say when asked to profile a '#!' script: Cohort's profiler
    follows one program, so name the interpreter to profile, or, for a
    shell script (a wrapper or version-manager shim), say to profile the
    program it starts."""
    try:
        with open(path, "rb") as f:
            first = f.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        first = "#!"
    words = first[2:].split()
    interp = words[0] if words else ""
    rest = words[1:]
    if os.path.basename(interp) == "env":     # #!/usr/bin/env [-S] [VAR=x] python3 -u
        rest = [w for w in rest if not w.startswith("-") and "=" not in w]
        interp = shutil.which(rest[0]) or rest[0] if rest else ""
        rest = rest[1:]
    name = os.path.basename(interp)
    if not interp:
        return f"{argv[0]} is a script with no interpreter on its first line ({first}); profile a program"
    if name in SHELLS:
        return (f"{argv[0]} is a shell script ({first}), not a program: profile the program it "
                f"starts, directly (for a shim such as pyenv's, `pyenv which python3` names it)")
    if os.path.isfile(interp) and elf.kind(interp) == "script":   # a shim in front of the interpreter
        real = f"$(pyenv which {name})" if "pyenv" in interp else f"/path/to/the/real/{name}"
        cmd = " ".join([real, *rest, argv[0], *argv[1:]])
        return (f"{argv[0]} is a script run by {name} ({first}), and {interp} is itself a script "
                f"(a shim): profile the real interpreter with the script as its argument, "
                f"e.g. cohort profile [options] -- {cmd}")
    cmd = " ".join([interp, *rest, argv[0], *argv[1:]])
    return (f"{argv[0]} is a script run by {interp} ({first}): profile the interpreter with the "
            f"script as its argument: cohort profile [options] -- {cmd}")


def check_input(path, option="--stdin", rereadable=False):
    """The absolute path of a file a target will read as its standard input,
    or a one-line CohortError naming the option: it must exist, be readable
    and not be a directory. With rereadable (cohort bench opens it anew for
    every run) it must also be a file that can be read from the start again:
    a regular file or a device such as /dev/null, not a pipe, a socket or a
    terminal. The check opens the file without blocking and reads nothing."""
    name = os.path.abspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CohortError(f"{option} {path}: no such file") from None
    except IsADirectoryError:
        raise CohortError(f"{option} {path}: is a directory") from None
    except OSError as e:
        raise CohortError(f"{option} {path}: cannot read it ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        tty = os.isatty(fd)
    finally:
        os.close(fd)
    if stat.S_ISDIR(st.st_mode):
        raise CohortError(f"{option} {path}: is a directory")
    if rereadable and (tty or not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode))):
        what = "a terminal" if tty else "a pipe or socket"
        raise CohortError(f"{option} {path}: is {what}; every run needs the whole input from the start, "
                          f"so give a file")
    return name


def open_input(path):
    """A fresh stream of an input file checked by check_input (None: None,
    the caller's own stdin)."""
    if path is None:
        return None
    try:
        return open(path, "rb")
    except OSError as e:
        raise CohortError(f"cannot read {path}: {e.strerror}") from None


def with_prefetch(env, prefetch):
    """env, also injecting the prefetch file (COHORT_PREFETCH), with
    libcohort preloaded for it if env left it out (a plan with no group)."""
    env = dict(env)
    lib = str(runtime_library())
    if lib not in env.get("LD_PRELOAD", "").split():
        env["LD_PRELOAD"] = " ".join(x for x in (lib, env.get("LD_PRELOAD", "")) if x)
    env["COHORT_PREFETCH"] = str(prefetch)
    return env


def environment(plan=None, allocator="glibc", mode=None, stats=None, base=None, patch=None, policy=None,
                prefetch=None):
    """The environment for a run: LD_PRELOAD puts libcohort first, the chosen
    allocator behind it, then whatever the user already preloads. A plan
    that declares no group leaves libcohort out: it would only pass every
    call through (`cohort run` says so). patch: "0" keeps the runtime from
    patching selector call sites (COHORT_PATCH); None leaves it as it is.
    policy: COHORT_POLICY (halo, or an online policy such as dpa); the
    runtime itself warns about one it does not know and passes through.
    prefetch: a prefetch file for the runtime to inject (COHORT_PREFETCH),
    which keeps libcohort preloaded even where nothing is grouped."""
    env = dict(os.environ if base is None else base)
    # Read (and so checked by the runtime's parser) once, under the run's environment.
    read = read_plan(plan, env) if plan is not None else None
    idle = read is not None and mode is None and policy is None and not read["groups"] and prefetch is None
    preload = [] if idle else [str(runtime_library())]
    alloc = allocator_library(allocator)
    if alloc:
        preload.append(str(alloc))
    if env.get("LD_PRELOAD"):
        preload.append(env["LD_PRELOAD"])
    env["LD_PRELOAD"] = " ".join(preload)
    if not preload:
        del env["LD_PRELOAD"]
    for key in ("COHORT_PLAN", "COHORT_MODE", "COHORT_STATS", "COHORT_POLICY", "COHORT_PREFETCH"):
        env.pop(key, None)
    if idle:
        return env
    if prefetch is not None:
        env["COHORT_PREFETCH"] = str(prefetch)
    if patch is not None:
        env["COHORT_PATCH"] = str(patch)
    if plan is not None:
        env["COHORT_PLAN"] = str(Path(plan).resolve())
    if mode is not None:
        if mode.split(":")[0] not in MODES:
            raise CohortError(f"unknown mode '{mode}' (choose from {', '.join(MODES)})")
        env["COHORT_MODE"] = mode
    if policy is not None:
        env["COHORT_POLICY"] = policy
    if stats is not None:
        env["COHORT_STATS"] = str(Path(stats).resolve())
    return env


def check_plan_fits(plan_path, program):
    """Refuse a plan made for another program before running: the runtime
    would only warn and run ungrouped, which on the command line is a mistake
    the user wants to hear about. A plan naming the program's file with
    another build id is stale; a plan naming only other main programs is
    someone else's. (Plans naming only shared libraries are left to the
    runtime, which binds them when they load.)"""
    plan = read_plan(plan_path)
    if not plan["modules"]:
        return
    real = os.path.realpath(program)
    mine = elf.build_id(real)
    base = os.path.basename(real)
    for build_id, path in plan["modules"]:
        if build_id and build_id == mine:
            return
        if os.path.basename(path) == base and os.path.realpath(path) == real and not build_id:
            return
    for m, (build_id, path) in enumerate(plan["modules"]):
        if os.path.basename(path) == base and build_id and mine and build_id != mine:
            # The runtime carries a plan with anchors onto this build (or
            # says why not, and runs ungrouped): docs/plan-format.md, "Anchors".
            if any(plan["sites"][s][0] == m for s in plan["anchors"]):
                return
            raise CohortError(f"plan {plan_path} was made for another build of {base} "
                              f"(build id {build_id[:12]}..., this one is {mine[:12]}...) and has no anchors "
                              "to carry it: profile and plan again")
    if all(elf.is_program(path) for _, path in plan["modules"]):
        names = ", ".join(sorted({os.path.basename(p) for _, p in plan["modules"]}))
        raise CohortError(f"plan {plan_path} is for {names}, not {base}")


def exec_program(argv, env):
    """Replace this process with the target, so its exit status and signals
    are the caller's to see unchanged."""
    path = resolve_program(argv)
    try:
        os.execve(path, argv, env)
    except OSError as e:
        raise CohortError(f"cannot run {argv[0]}: {e.strerror}", status=126) from e
