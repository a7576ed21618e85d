"""`cohort profile`: run a program under Cohort's Valgrind tool and write
profile.json (docs/profile-format.md).

The tool (profiler/) does all per-access work and writes a raw, line-oriented
dump at exit; this module runs it, reads the dump, adds what C cannot easily
know (build ids, the 90% node filter), and writes the versioned JSON."""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cohort import __version__
from cohort.formats import elf, heaptrace, profilefile
from cohort.policies import families, hds
from cohort.policies.apa import ARRAY_OFFSETS
from cohort.errors import CohortError
from cohort.files import ESCAPE, claim, write_output
from cohort.paths import profiler_lib
from cohort.formats.profilefile import FORMAT
from cohort.measure.runner import check_input, open_input, resolve_program, script_advice
from cohort.plan.rebase import plan_anchors

VERSION = 3          # written; profilefile.py reads 1 (no context families) and 2 (no DS graph) too
RAW_VERSION = "11"
MAX_SAMPLE_BASE = 1 << 40   # the tool's bound (--sample-base)
# The offsets within a line profiler/lines.c models a line-sized block at:
# where the rest pool packs it, then 0, 16, 32 and 48 bytes into a line.
LINE_OFFSETS = ["packed", 0, 16, 32, 48]

DEFAULTS = {"affinity_distance": 128, "max_size": 4096, "coverage": 0.9}
TRACE_BUDGET = 1_000_000          # references the heap trace holds by default (4 MB; sampled beyond)
MAX_TRACE_BUDGET = 1 << 30        # the tool's limit


# ---- running the tool ------------------------------------------------------

class FunctionReader:
    """The functions (.eh_frame, which families.py folds recursion by) of
    the program and of each non-system module the tool names in its
    modules file (--cohort-modules), read while the program runs under the
    tool, on the core the tool leaves idle: after the run, they took 1.8 s
    for cppcheck's own, about 3 s for dot's 20 libraries and plugins.
    A daemon thread: an interrupted run exits without waiting for it, and
    what it did not read, build_profile reads (and reports)."""

    def __init__(self, main):
        self.main, self.starts, self.done = main, {}, threading.Event()
        self.thread, self.abandoned = None, False

    def start(self, modules):
        self.thread = threading.Thread(target=self.run, args=(modules,), name="cohort-eh-frame", daemon=True)
        self.thread.start()

    def read(self, path):
        try:
            self.starts[path] = families.function_starts(path)
        except Exception:   # build_profile reads it again, and reports it there
            pass

    def run(self, modules):
        self.read(self.main)
        offset = 0
        while True:
            over = self.done.is_set()   # then one more look at the file, and stop
            offset = self.read_new(modules, offset)
            if over:
                return
            self.done.wait(0.5)

    def read_new(self, modules, offset):
        """Reads the modules named in the file past offset, in whole lines
        (the tool may be writing one); returns the new offset."""
        try:
            with open(modules, "rb") as f:
                f.seek(offset)
                text = f.read()
        except OSError:
            return offset
        end = text.rfind(b"\n") + 1
        for path in text[:end].decode("utf-8", "surrogateescape").splitlines():
            if self.abandoned:
                break
            if path and path not in self.starts:
                self.read(path)
        return offset + end

    def finish(self):
        """{path: function starts} read so far, once the run has ended:
        what is left, build_profile reads."""
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        return dict(self.starts)

    def abandon(self):
        """The run failed or was interrupted: stop, without waiting."""
        self.abandoned = True
        self.done.set()


def run_tool(argv, workdir, affinity_distance, max_size, stdin=None, tool_args=(), preload=None, started=None):
    """Run argv under the tool; the target keeps the terminal, and reads the
    file stdin (a path checked by runner.check_input) as its standard input if
    one is given, else cohort's own. tool_args: more options for the tool;
    preload: variables (LD_PRELOAD, COHORT_*) that put the runtime in front
    of the tool's allocator, for `cohort loads --plan`; started: called with
    the path of the tool's modules file once the tool runs. Returns
    (returncode, raw path of the main process, valgrind log path)."""
    path = resolve_program(argv)
    what = elf.kind(path)
    if what == "script":
        raise CohortError(script_advice(argv, path))
    if what != "x86-64":
        raise CohortError(f"cannot profile {argv[0]}: {what} (Cohort profiles x86-64 ELF programs)")
    valgrind = shutil.which("valgrind")
    if not valgrind:
        raise CohortError("valgrind is not installed (apt-get install valgrind)")
    lib = profiler_lib()
    log = Path(workdir) / "valgrind.log"
    raw = Path(workdir) / "raw.%p"
    progress = Path(workdir) / "progress"
    modules = Path(workdir) / "modules"
    cmd = [valgrind, "--tool=cohort", "-q", "--read-inline-info=yes", f"--log-file={log}",
           f"--cohort-progress={progress}", f"--cohort-modules={modules}",
           f"--cohort-out={raw}", f"--cohort-main={os.path.realpath(path)}",
           f"--affinity-distance={affinity_distance}", f"--max-size={max_size}",
           *tool_args, path, *argv[1:]]
    env = dict(os.environ, VALGRIND_LIB=str(lib))
    env.pop("LD_PRELOAD", None)  # a preloaded allocator would hide every object
    env.update(preload or {})
    source = open_input(stdin)
    try:
        try:
            proc = subprocess.Popen(cmd, env=env, stdin=source)
        except OSError as e:
            raise CohortError(f"cannot run valgrind: {e.strerror}") from e
        if started:
            started(modules)
        try:
            rc = wait_reporting(proc, progress)
        except KeyboardInterrupt:
            proc.wait()
            raise
    finally:
        if source is not None:
            source.close()
    return rc, Path(workdir) / f"raw.{proc.pid}", log


def progress_interval(tty):
    """Seconds between progress reports: every second on a terminal (one line
    rewritten in place), else a line every COHORT_PROGRESS_SECONDS (default
    60; 0 for none)."""
    if tty:
        return 1.0
    try:
        return max(float(os.environ.get("COHORT_PROGRESS_SECONDS", "60")), 0.0)
    except ValueError:
        return 60.0


def wait_reporting(proc, progress, out=None):
    """Wait for the profiled program, telling the user on stderr how far it
    has got: elapsed time, allocations and accesses (the tool's progress file)."""
    out = out or sys.stderr
    tty = out.isatty()
    interval = progress_interval(tty)
    if interval <= 0:
        return proc.wait()
    start = time.monotonic()
    shown = False
    while True:
        try:
            rc = proc.wait(timeout=interval)
            break
        except subprocess.TimeoutExpired:
            pass
        line = progress_line(progress, time.monotonic() - start)
        if line:
            out.write(f"\r{line}\033[K" if tty else line + "\n")
            out.flush()
            shown = True
    if shown and tty:
        out.write("\r\033[K")
        out.flush()
    return rc


def progress_line(progress, elapsed):
    try:
        words = Path(progress).read_text(errors="replace").split()
    except OSError:
        words = []
    m, s = divmod(int(elapsed), 60)
    h, m = divmod(m, 60)
    when = f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"
    if len(words) >= 5 and words[0] == "progress" and all(w.isdigit() for w in words[1:5]):
        # words[3], the accesses to tracked objects, moves only in the
        # windows the analyses see past the sample base; words[4], every
        # access to the heap around them, moves with the run.
        allocs, heap = int(words[2]), int(words[4])
        return f"cohort: profiling, {when}: {allocs:,} allocations, {heap:,} accesses to the heap"
    return f"cohort: profiling, {when}: starting"


def log_tail(log, lines=3):
    try:
        text = Path(log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.split("== ", 1)[-1] for line in text[-lines:])


# ---- the raw dump ----------------------------------------------------------

def parse_raw(text):
    """The tool's dump as plain Python data. Raises ValueError if malformed."""
    lines = text.splitlines()
    if not lines or lines[0].split()[:1] != ["cohort-raw"]:
        raise ValueError("not a raw profile from Cohort's tool")
    if lines[0].split()[1:] != [RAW_VERSION]:
        raise ValueError(f"raw profile version {lines[0].split()[1:]} (expected {RAW_VERSION})")
    if lines[-1] != "end":
        raise ValueError("raw profile is truncated (the tool did not finish)")
    raw = {"params": {}, "modules": [], "sites": [], "contexts": [], "edges": [], "near": None, "loads": [],
           "pointers": None, "pointer_stores": 0}
    besides = None
    # The kinds of line a large program's dump holds many of come first
    # (cppcheck's: 136,000 edge, 133,000 beside, 130,000 pointer and 76,000
    # context lines).
    for line in lines[1:-1]:
        kind, _, rest = line.partition(" ")
        if kind == "beside":    # in a layout's model, how often a context's objects lay beside others'
            # Kept as text ("C N COUNT N COUNT ..."): only the pairs among
            # the contexts a group could hold are read (beside_pairs).
            layout, _, pairs = rest.partition(" ")
            if besides is None:
                besides = raw["beside"] = {"one": [], "classes": []}
            besides[layout].append(pairs)
        elif kind == "edge":   # x y weight [near weight in 64ths]
            v = [int(t) for t in rest.split()]
            raw["edges"].append((v[0], v[1], v[2]))
            if len(v) > 3:   # a profiler that measures near weights: {} even if all are 0
                if raw["near"] is None:
                    raw["near"] = {}
                if v[3]:
                    raw["near"][(v[0], v[1])] = v[3]
        elif kind == "pointer":
            src, off, dst, n = (int(t) for t in rest.split())
            raw["pointers"].append((src, off, dst, n))
        elif kind == "param":
            k, v = rest.split()
            raw["params"][k] = int(v)
        elif kind == "exit":
            raw["exit"] = int(rest)
        elif kind in ("objects", "accesses", "sample"):
            f = rest.split()
            raw[kind] = {f[i]: int(f[i + 1]) for i in range(0, len(f), 2)}
        elif kind == "module":
            mid, system, bias, path = rest.split(" ", 3)
            raw["modules"].append({"id": int(mid), "system": system == "1",
                                   "bias": int(bias, 16), "path": path})
        elif kind == "site":
            head, fn, file, lineno = rest.split("\t")
            sid, mod, off, call, calls = head.split(" ")
            raw["sites"].append({"id": int(sid), "module": int(mod), "offset": int(off, 16),
                                 "call": call, "calls": int(calls), "function": fn or None,
                                 "file": file or None, "line": int(lineno) or None})
        elif kind == "inline":
            sid, *levels = rest.split("\t")
            raw["sites"][int(sid)]["inlined"] = levels
        elif kind == "context":
            nums, _, sites = rest.partition(":")
            v = [int(x) for x in nums.split()]
            raw["contexts"].append({"id": v[0], "truncated": v[1] == 1, "allocs": v[2],
                                    "bytes": v[3], "min": v[4], "max": v[5], "frees": v[6],
                                    "life_sum": v[7], "life_max": v[8], "accesses": v[9],
                                    "macro": v[10], "d1_misses": v[11], "ll_misses": v[12],
                                    "layout_d1": v[13:15], "through": v[15], "through_frames": v[16],
                                    "beside": v[17:19], "sites": [int(x) for x in sites.split()]})
        elif kind == "layouts":   # the rest pool's two layouts, simulated (profiler/layouts.c)
            f = rest.split()
            v = {f[i]: int(f[i + 1]) for i in range(0, len(f), 2)}
            raw["layouts"] = {"max_size": v["max"], "objects": v["objects"], "accesses": v["accesses"],
                              "one": {"d1_misses": v["one-d1"]}, "classes": {"d1_misses": v["classes-d1"]}}
        elif kind == "lines":     # the line offsets modelled (profiler/lines.c)
            f = rest.split()
            if f[1:6] != [str(o) for o in LINE_OFFSETS]:
                raise ValueError(f"raw profile's lines model has places {f[1:6]} (expected {LINE_OFFSETS})")
            raw["lines"] = {"max_size": int(f[7]), "accesses": int(f[9]), "contexts": {}}
        elif kind == "line":      # a context's misses and waited chases at each offset
            v = [int(x) for x in rest.split()]
            raw.setdefault("lines", {"contexts": {}})["contexts"][v[0]] = {
                "chases": v[1], "d1_misses": v[2:7], "chase_waits": v[7:12]}
        elif kind == "cache":     # the whole run's simulated misses (cohort/plan/headroom.py)
            f = rest.split()
            raw["run"] = {f[i].replace("-", "_"): int(f[i + 1]) for i in range(0, len(f), 2)}
        elif kind == "loads":     # --cohort-loads=yes: the cache and its totals
            f = rest.split()
            raw["cache"] = {"window": int(f[1]), "line": int(f[3]), "d1": [int(f[5]), int(f[6])],
                            "ll": [int(f[8]), int(f[9])]}
            raw["load_totals"] = {f[i].replace("-", "_"): int(f[i + 1]) for i in range(10, len(f), 2)}
        elif kind == "load":
            head, fn, file, lineno = rest.split("\t")
            v = head.split(" ")
            raw["loads"].append({"module": int(v[0]), "offset": int(v[1], 16), "execs": int(v[2]),
                                 "d1_misses": int(v[3]), "ll_misses": int(v[4]), "windows": int(v[5]),
                                 "strided_windows": int(v[6]),
                                 "strides": [[int(a), int(b)] for a, b in (w.split(":") for w in v[7:])],
                                 "function": fn or None, "file": file or None, "line": int(lineno) or None})
        elif kind == "pointers":  # absent when the tool ran with --cohort-pointers=no
            raw["pointer_stores"] = int(rest.split()[1])
            raw["pointers"] = []
        elif kind == "trace":     # --cohort-trace: how the heap trace went
            f = rest.split()
            raw["trace"] = {"written": f[0] == "written", **{f[i]: int(f[i + 1]) for i in range(1, len(f), 2)}}
        else:
            raise ValueError(f"unknown line in raw profile: {line[:40]!r}")
    for i, key in enumerate(("modules", "sites", "contexts")):
        if [e["id"] for e in raw[key]] != list(range(len(raw[key]))):
            raise ValueError(f"raw profile {key} are not numbered in order")
    return raw


# ---- the profile -----------------------------------------------------------

def hot_nodes(contexts, coverage):
    """HALO's filter: take contexts from most to least accessed until
    `coverage` of all accesses is accounted for; the rest are dropped."""
    total = sum(c["accesses"] for c in contexts)
    kept, running = [], 0
    for c in sorted(contexts, key=lambda c: (-c["accesses"], c["id"])):
        if c["accesses"] == 0 or (total and running >= coverage * total):
            break
        kept.append(c["id"])
        running += c["accesses"]
    return kept, (running / total if total else 0.0)


def near_weights(raw, edges):
    """{"near": [...]}: each edge's near weight in 64ths, in the edges'
    order (profiler/affinity.c: how likely its affinitive pairs' bytes are
    to share a line with the two objects side by side), or {} from a
    profiler that did not measure it."""
    if raw["near"] is None:
        return {}
    return {"near": [raw["near"].get((x, y), 0) for x, y, _ in edges]}


def ds_graph(pointers, stores):
    """APA's DS graph as the profiler measured it: edges [source context,
    field offset, target context, stores], heaviest first, and the
    array-like contexts."""
    offsets = {}
    for src, off, dst, _ in pointers:
        offsets.setdefault((src, dst), set()).add(off)
    array_like = sorted({src for (src, _), offs in offsets.items() if len(offs) >= ARRAY_OFFSETS})
    edges = sorted(([s, o, d, n] for s, o, d, n in pointers), key=lambda e: (-e[3], e[0], e[1], e[2]))
    return {"pointer_stores": stores, "edges": edges, "array_like": array_like}


def as_text(s):
    """A command-line string or path as valid Unicode: bytes that were not
    UTF-8 (Python holds them as lone surrogates) become \\xNN, as in
    everything else Cohort writes (files.ESCAPE)."""
    return s.encode("utf-8", ESCAPE).decode("utf-8")


def build_profile(raw, target, params, returncode, starts=None):
    """profile.json's content from the raw dump and what the CLI knows.
    starts: {path: families.function_starts(path)} already read (the
    program's own, while it ran under the tool); other modules are read
    here."""
    modules = []
    for m in raw["modules"]:
        modules.append({"id": m["id"], "path": m["path"], "build_id": elf.build_id(m["path"]),
                        "system": m["system"]})
    contexts = []
    for c in raw["contexts"]:
        freed = c["frees"]
        contexts.append({
            "id": c["id"], "sites": c["sites"], "truncated": c["truncated"],
            "allocations": c["allocs"], "bytes": c["bytes"],
            "min_size": c["min"], "max_size": c["max"], "same_size": c["min"] == c["max"],
            "frees": freed,
            "lifetime": {"mean": round(c["life_sum"] / freed, 2) if freed else None,
                         "max": c["life_max"] if freed else None,
                         "live_at_exit": c["allocs"] - freed},
            "accesses": c["accesses"], "macro_accesses": c["macro"],
            "d1_misses": c["d1_misses"], "ll_misses": c["ll_misses"],
            "through_system": {"allocations": c["through"], "frames": c["through_frames"]},
            **({"layout_d1_misses": {"one": c["layout_d1"][0], "classes": c["layout_d1"][1]},
                "beside": {"one": c["beside"][0], "classes": c["beside"][1]}} if "layouts" in raw else {}),
            **({"lines": raw["lines"]["contexts"][c["id"]]} if c["id"] in raw.get("lines", {}).get("contexts", {})
               else {}),
        })
    kept, covered = hot_nodes(contexts, params["coverage"])
    keep = set(kept)
    known = starts or {}
    function_of = families.site_functions(
        modules, raw["sites"], lambda path: known[path] if path in known else families.function_starts(path))
    fams = families.families(contexts, function_of, {s["id"]: s["module"] for s in raw["sites"]})
    for f in fams:
        for c in f["contexts"]:
            contexts[c]["family"] = f["id"]
    edges = sorted(([x, y, w] for x, y, w in raw["edges"] if x in keep and y in keep),
                   key=lambda e: (-e[2], e[0], e[1]))
    family_graph = families.family_graph(fams, contexts, raw["edges"], params["coverage"], hot_nodes)
    # What relates the sites to another build (cohort merge, cohort plan --rebase).
    anchors = plan_anchors({m["id"]: (m["build_id"], m["path"]) for m in modules if not m["system"]},
                           {s["id"]: (s["module"], s["offset"]) for s in raw["sites"]})
    status = {"exit_status": returncode if returncode >= 0 else None,
              "signal": -returncode if returncode < 0 else None}
    return {
        "format": FORMAT, "version": VERSION,
        "tool": {"name": "cohort", "raw_version": RAW_VERSION, "cohort": __version__},
        "parameters": params,
        "target": {"argv": [as_text(a) for a in target],
                   "executable": as_text(os.path.realpath(resolve_program(target))),
                   "cwd": as_text(os.getcwd()), **status},
        "modules": modules,
        "sites": [{**{k: s[k] for k in ("id", "module", "offset", "call", "calls", "function", "file", "line")},
                   "function_start": function_of.get(s["id"]),
                   **({"anchor": anchors[s["id"]]} if s["id"] in anchors else {}),
                   **({"inlined": s["inlined"]} if s.get("inlined") else {})}
                  for s in raw["sites"]],
        "contexts": contexts,
        "graph": {"nodes": kept, "edges": edges, **near_weights(raw, edges), "coverage": round(covered, 6),
                  "dropped_contexts": len(contexts) - len(kept),
                  "dropped_affinity": families.dropped_affinity(raw["edges"], keep, lambda c: c)},
        "families": fams,
        **({"ds_graph": ds_graph(raw["pointers"], raw["pointer_stores"])} if raw["pointers"] is not None else {}),
        "family_graph": family_graph,
        "totals": {
            "allocations": raw["objects"]["allocations"],
            "peak_live_objects": raw["objects"]["peak-live"],
            "peak_live_bytes": raw["objects"]["peak-bytes"],
            "accesses": raw["accesses"]["tracked"],
            "macro_accesses": raw["accesses"]["macro"],
            "threads": raw["accesses"]["threads"],
            "edges_before_filter": len(raw["edges"]),
            "weight_before_filter": sum(w for _, _, w in raw["edges"]),
            "weight": sum(e[2] for e in edges),
            "unknown_frees": raw["objects"]["unknown-frees"],
            # The accesses to the span of tracked objects (span_accesses) the
            # per-access analyses saw (profiler/sample.c): every one up to
            # sample_base, then windows standing for the rest.
            "span_accesses": raw["accesses"]["all"],
            **({"sample_base": raw["sample"]["base"], "sampled_windows": raw["sample"]["windows"],
                "analysed_accesses": raw["sample"]["analysed"]} if "sample" in raw else {}),
            **({"run_accesses": raw["run"]["accesses"], "run_d1_misses": raw["run"]["d1"],
                "run_ll_misses": raw["run"]["ll"], "heap_other_d1_misses": raw["run"]["heap_other_d1"],
                "heap_other_ll_misses": raw["run"]["heap_other_ll"]} if "run" in raw else {}),
        },
        **({"rest_layouts": dict(raw["layouts"], beside=beside(raw, keep, fams, family_graph["nodes"]))}
           if "layouts" in raw else {}),
        **({"line_offsets": {"offsets": LINE_OFFSETS, "max_size": raw["lines"]["max_size"],
                             "accesses": raw["lines"]["accesses"]}} if "max_size" in raw.get("lines", {}) else {}),
    }


def beside(raw, keep, fams, hot_families):
    """The layouts' neighbour counts among the contexts a group could hold
    (the graph's nodes and the contexts of the family graph's), as
    {layout: [[context, neighbour's context, placements], ...]}, most first."""
    hot = set(keep)
    fam_contexts = {f["id"]: f["contexts"] for f in fams}
    for f in hot_families:
        hot.update(fam_contexts[f])
    return {layout: sorted(beside_pairs(pairs, hot), key=lambda e: (-e[2], e[0], e[1]))
            for layout, pairs in raw.get("beside", {"one": [], "classes": []}).items()}


def beside_pairs(lines, hot):
    """[[context, neighbour's context, placements]] of the raw dump's pairs
    (a line per context C: "C N COUNT N COUNT ...") whose two contexts are
    in hot, read only for those."""
    names = {str(c) for c in hot}
    out = []
    for line in lines:
        c, _, rest = line.partition(" ")
        if c not in names:
            continue
        v = rest.split()
        out.extend([int(c), int(v[i]), int(v[i + 1])] for i in range(0, len(v), 2) if v[i] in names)
    return out


def run_and_read(argv, what, affinity_distance, max_size, trace_budget=None, **tool):
    """Run argv under the tool (run_tool's keywords) in a scratch directory
    and read its raw dump: (returncode, raw). what names the product in the
    error when the tool wrote none. With trace_budget (references), the
    tool also records the heap reference trace, and raw["trace"] gains
    "data": the heaptrace.Trace, or None if the tool could not write it."""
    with tempfile.TemporaryDirectory(prefix=f"cohort-{what}.") as work:
        if trace_budget is not None:
            tool["tool_args"] = (*tool.get("tool_args", ()), f"--cohort-trace={Path(work) / 'trace.%p'}",
                                 f"--trace-budget={trace_budget}")
        rc, raw_path, log = run_tool(argv, work, affinity_distance, max_size, **tool)
        if not raw_path.exists():
            why = log_tail(log)
            raise CohortError(f"the profiler wrote no {what} for {argv[0]}"
                              + (f" (valgrind: {why})" if why else f" (exit status {rc})"))
        try:
            raw = parse_raw(raw_path.read_text(errors="replace"))
        except ValueError as e:
            raise CohortError(f"the profiler's output is unusable: {e}") from e
        if trace_budget is not None:
            raw.setdefault("trace", {"written": False})["data"] = read_trace(
                Path(work) / ("trace" + raw_path.suffix), raw["trace"])
        return rc, raw


def read_trace(path, status):
    """The heap trace the tool wrote, or None (after a warning) if it wrote
    none or one that cannot be read."""
    if not status.get("written"):
        warn("the profiler could not write the heap reference trace (see above); "
             "the profile has no hot data streams")
        return None
    try:
        return heaptrace.read(path)
    except (OSError, ValueError) as e:
        warn(f"the profiler's heap reference trace is unusable ({e}); the profile has no hot data streams")
        return None


def warn(message):
    print(f"cohort: warning: {message}", file=sys.stderr)


def hot_streams(trace, budget):
    """profile.json's hot_streams record for the trace, saying on the
    terminal what it holds and how long the analysis takes."""
    sampled = (f", one burst of {trace.burst} in {trace.period} (the run made "
               f"{trace.seen:,}; --trace-budget {budget:,})" if trace.period > 1 else "")
    print(f"cohort: finding hot data streams in {len(trace.refs):,} heap references{sampled}",
          file=sys.stderr)
    return hds.analyse(trace)


def profile(target, output, force=False, affinity_distance=128, max_size=4096, coverage=0.9, stdin=None,
            trace_budget=None, sample_base=None):
    """The whole `cohort profile`. stdin: a file the target reads as its
    standard input (default: cohort's own). trace_budget: record the heap
    reference trace, up to this many references, and add its hot data
    streams to the profile (the hds policy's input). sample_base: tracked
    accesses the per-access analyses see whole before they sample windows
    (profiler/sample.c; 0: every access; None: the tool's default).
    Returns (profile dict, target's return code)."""
    output = Path(output)
    claim(output, "profile", force)
    if affinity_distance < 1 or max_size < 1 or not 0 < coverage <= 1:
        raise CohortError("affinity distance and max size must be positive, coverage in (0, 1]")
    if trace_budget is not None and not 1 <= trace_budget <= MAX_TRACE_BUDGET:
        raise CohortError(f"the trace budget must be 1 to {MAX_TRACE_BUDGET:,} references")
    if sample_base is not None and not 0 <= sample_base <= MAX_SAMPLE_BASE:
        raise CohortError(f"the sample base must be 0 to {MAX_SAMPLE_BASE:,} accesses")
    if stdin is not None:
        stdin = check_input(stdin)
    params = {"affinity_distance": affinity_distance, "max_size": max_size, "coverage": coverage}
    reader = FunctionReader(os.path.realpath(resolve_program(target)))
    try:
        rc, raw = run_and_read(target, "profile", affinity_distance, max_size, stdin=stdin,
                               trace_budget=trace_budget, started=reader.start,
                               tool_args=() if sample_base is None else (f"--sample-base={sample_base}",))
    except BaseException:
        reader.abandon()
        raise
    data = build_profile(raw, target, params, rc, starts=reader.finish())
    if raw.get("trace", {}).get("data") is not None:
        data["hot_streams"] = hot_streams(raw["trace"]["data"], trace_budget)
    write_output(output, profilefile.dumps(data), "profile", force)
    return data, rc


def sampled(totals):
    """Whether the analyses saw only windows of the run (profiler/sample.c):
    its counts past the base, among them the accesses, are estimates."""
    if "span_accesses" in totals:   # raw version 11 on
        return totals.get("analysed_accesses", totals["span_accesses"]) < totals["span_accesses"]
    return totals.get("analysed_accesses", totals["accesses"]) < totals["accesses"]


def summary(data, rc):
    """One paragraph for the terminal after profiling."""
    t, g = data["totals"], data["graph"]
    lines = [f"cohort: profiled {data['target']['argv'][0]}: {t['allocations']} allocations in "
             f"{len(data['contexts'])} contexts, {t['accesses']} accesses to tracked objects; "
             f"graph of {len(g['nodes'])} contexts ({g['coverage']:.0%} of accesses), "
             f"{len(g['edges'])} edges"]
    if sampled(t):
        lines.append(f"cohort: the analyses saw {t['analysed_accesses']:,} of the "
                     f"{t['span_accesses']:,} accesses to the heap around them: the first "
                     f"{t['sample_base']:,} (--sample-base), then {t['sampled_windows']:,} windows "
                     f"whose counts stand for the rest, as estimates")
    return "\n".join(lines)
