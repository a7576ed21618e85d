"""The stock Debian programs Cohort is measured on, beside its own workloads:
each program's package, its arguments for the phases (train is profiled
and planned from; train2, a second small run of another size, is
profiled so that the planner can fit how the program grows with its input;
ref is timed; cachegrind is simulated, as in workloads/*/inputs),
and how its input files are made. Every input is made here, from a fixed
seed or a fixed commit of this repository, so a run anywhere measures the
same inputs. stock/README.md says why each program is here."""

import random
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PHASES = ("train", "train2", "ref", "cachegrind")

# cppcheck checks this repository's runtime as it was at this commit: frozen,
# so that the input does not change as the runtime does.
CPPCHECK_SOURCES = "6fd84d7"


def access_log(path, lines, seed):
    """A web server's access log: user, method, resource, bytes, status."""
    rng = random.Random(seed)
    methods = ("GET", "PUT", "POST", "DEL", "HEAD")
    with open(path, "w") as out:
        for _ in range(lines):
            out.write(f"u{rng.randrange(3000)} {rng.choice(methods)} /r/{rng.randrange(200)}/"
                      f"{rng.randrange(20)} {rng.randrange(1, 50001)} {rng.choice((200, 404))}\n")


def digraph(path, nodes, edges, seed):
    """A random directed graph for dot to lay out."""
    rng = random.Random(seed)
    with open(path, "w") as out:
        out.write("digraph G {\n")
        for _ in range(edges):
            out.write(f"  n{rng.randrange(nodes)} -> n{rng.randrange(nodes)};\n")
        out.write("}\n")


def runtime_sources(directory):
    """This repository's runtime/ at CPPCHECK_SOURCES, unpacked into directory."""
    if (directory / "runtime").is_dir():
        return
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", CPPCHECK_SOURCES, "runtime"],
                             capture_output=True)
    if archive.returncode != 0:
        raise RuntimeError(f"cannot read runtime/ at {CPPCHECK_SOURCES} from this repository's "
                           f"history (a clone with its history is needed): "
                           f"{archive.stderr.decode(errors='replace').strip()}")
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)


def make_gawk(d):
    for name, lines, seed in (("train.log", 30000, 1), ("mid.log", 150000, 2), ("ref.log", 500000, 3),
                              ("train2.log", 90000, 4)):
        if not (d / name).exists():
            access_log(d / name, lines, seed)


def make_dot(d):
    for name, nodes, edges, seed in (("train.dot", 60, 120, 1), ("mid.dot", 150, 300, 2),
                                     ("ref.dot", 230, 460, 3), ("train2.dot", 100, 200, 4)):
        if not (d / name).exists():
            digraph(d / name, nodes, edges, seed)


# name: package, program, {phase: arguments}, extra environment, input maker.
# Arguments are relative to the program's input directory, which is the runs'
# working directory.
PROGRAMS = {
    "gawk": {
        "package": "gawk", "program": "/usr/bin/gawk",
        "what": "a report over a web log in associative arrays of arrays",
        "args": {"train": f"-f {HERE}/report.awk train.log", "train2": f"-f {HERE}/report.awk train2.log",
                 "cachegrind": f"-f {HERE}/report.awk mid.log",
                 "ref": f"-f {HERE}/report.awk ref.log"},
        "env": {}, "make": make_gawk,
    },
    "perl": {
        "package": "perl", "program": "/usr/bin/perl",
        "what": "an interpreter building and walking trees of hashes",
        "args": {"train": f"{HERE}/tree.pl 12000", "train2": f"{HERE}/tree.pl 36000",
                 "cachegrind": f"{HERE}/tree.pl 40000",
                 "ref": f"{HERE}/tree.pl 120000"},
        # perl orders its hashes at random unless told not to: the same
        # output on every run is what lets a run be checked against another.
        "env": {"PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0"}, "make": lambda d: None,
    },
    "dot": {
        "package": "graphviz", "program": "/usr/bin/dot",
        "what": "graph layout (C, plugins loaded with dlopen, threads)",
        "args": {"train": "-Tplain train.dot", "train2": "-Tplain train2.dot", "cachegrind": "-Tplain mid.dot",
                 "ref": "-Tplain ref.dot"},
        "env": {}, "make": make_dot,
    },
    "cppcheck": {
        "package": "cppcheck", "program": "/usr/bin/cppcheck",
        "what": "a C++ static analyser with standard containers, checking file after file",
        "args": {"train": "-q runtime/heap.c", "train2": "-q runtime/heap.c runtime/stats.c runtime/prefetch.c",
                 "cachegrind": "-q runtime/identify.c runtime/patch.c",
                 "ref": "-q runtime/"},
        "env": {}, "make": runtime_sources,
    },
}


def make_inputs(name, directory):
    """Make program `name`'s input files in directory (kept if already there)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    PROGRAMS[name]["make"](directory)
    return directory
