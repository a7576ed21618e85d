"""What each allocator catches of the heap mistakes in tests/programs/misuse_suite.c:
double, invalid, interior and misaligned frees, one-byte under- and
overflows, a 32-byte overflow and 1 MiB overruns, at a small and a medium
size, under glibc, jemalloc and Cohort (mode all and random:4, with and
without COHORT_CHECK=1). A mistake is caught when the program stops
(an abort or a fault) instead of printing "survived".

Usage: .venv/bin/python scripts/misuse-report.py [OUT.md]
Prints the table of counts per class and the detail of each run; OUT.md
(default results/misuse.md) gets the same."""

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "build" / "tests" / "programs" / "misuse_suite"
LIB = ROOT / "build" / "runtime" / "libcohort.so"
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")

CLASSES = [   # (class, mistakes)
    ("double free", ["double-free", "double-free-later"]),
    ("invalid free", ["invalid-free"]),
    ("interior free", ["interior-free"]),
    ("misaligned free", ["unaligned-free"]),
    ("1-byte underflow", ["underflow-1"]),
    ("1-byte overflow", ["overflow-1"]),
    ("32-byte overflow", ["overflow-32"]),
    ("1 MiB overrun", ["overrun-1m", "overflow-1m"]),
]
SIZES = {"small": 24, "medium": 1000}   # 16k+8: glibc's chunk ends right after the block


def configurations():
    plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("COHORT_")}
    out = {"glibc": plain}
    if JEMALLOC.exists():
        out["jemalloc"] = dict(plain, LD_PRELOAD=str(JEMALLOC))
    for mode in ("all", "random:4"):
        out[f"cohort {mode}"] = dict(plain, LD_PRELOAD=str(LIB), COHORT_MODE=mode)
        out[f"cohort {mode}, checked"] = dict(plain, LD_PRELOAD=str(LIB), COHORT_MODE=mode, COHORT_CHECK="1")
    return out


def outcome(mistake, size, env):
    """(caught, how) for one run."""
    r = subprocess.run([str(PROGRAM), mistake, str(size)], env=env, capture_output=True, text=True,
                       errors="replace", timeout=60)
    if r.returncode == 0 and "survived" in r.stdout:
        return False, "survived"
    if r.returncode < 0:
        name = signal.Signals(-r.returncode).name
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        said = lines[-1].split(" 0x")[0] if lines and name == "SIGABRT" else ""
        return True, f"{name}: {said}" if said else name
    return True, f"exit {r.returncode}"


def main():
    if not PROGRAM.exists() or not LIB.exists():
        sys.exit("misuse-report: build first (make)")
    out_path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "results" / "misuse.md"
    configs = configurations()
    runs = {}
    for cls, mistakes in CLASSES:
        for m in mistakes:
            for sname, size in SIZES.items():
                for name, env in configs.items():
                    runs[(m, sname, name)] = outcome(m, size, env)
    lines = ["# What each allocator catches", "",
             "`.venv/bin/python scripts/misuse-report.py`: tests/programs/misuse_suite.c, each mistake at "
             + " and ".join(f"{k} ({v} B)" for k, v in SIZES.items()) + " sizes. Caught runs of all runs.", "",
             "| class | " + " | ".join(configs) + " |", "|---|" + "---|" * len(configs)]
    totals = dict.fromkeys(configs, 0)
    n_all = 0
    for cls, mistakes in CLASSES:
        cells = []
        n = len(mistakes) * len(SIZES)
        n_all += n
        for name in configs:
            caught = sum(runs[(m, s, name)][0] for m in mistakes for s in SIZES)
            totals[name] += caught
            cells.append(f"{caught}/{n}")
        lines.append(f"| {cls} | " + " | ".join(cells) + " |")
    lines.append("| **all** | " + " | ".join(f"**{totals[k]}/{n_all}**" for k in configs) + " |")
    lines += ["", "## Each run", "", "| mistake | size | " + " | ".join(configs) + " |",
              "|---|---|" + "---|" * len(configs)]
    for cls, mistakes in CLASSES:
        for m in mistakes:
            for s in SIZES:
                lines.append(f"| {m} | {s} | " + " | ".join(runs[(m, s, k)][1].replace("|", "/")
                                                           for k in configs) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    out_path.parent.mkdir(exist_ok=True)
    out_path.write_text(text)


if __name__ == "__main__":
    main()
