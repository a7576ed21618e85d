"""`cohort profile`: run a program under Cohort's Valgrind tool and write
profile.json (docs/profile-format.md).

The tool (profiler/) does all per-access work and writes a raw, line-oriented
dump at exit; this module runs it, reads the dump, adds what C cannot easily
know (build ids, the 90% node filter), and writes the versioned JSON."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cohort import __version__, elf, families
from cohort.errors import CohortError
from cohort.files import claim, write_output
from cohort.paths import profiler_lib
from cohort.runner import check_input, open_input, resolve_program, script_advice

FORMAT = "cohort-profile"
VERSION = 2          # written; 1 (no context families) is still read
READS = (1, 2)
RAW_VERSION = "1"

DEFAULTS = {"affinity_distance": 128, "max_size": 4096, "coverage": 0.9}


# ---- running the tool ------------------------------------------------------

def run_tool(argv, workdir, affinity_distance, max_size, stdin=None):
    """Run argv under the tool; the target keeps the terminal, and reads the
    file stdin (a path checked by runner.check_input) as its standard input if
    one is given, else cohort's own. Returns (returncode, raw path of the main
    process, valgrind log path)."""
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
    cmd = [valgrind, "--tool=cohort", "-q", "--read-inline-info=yes", f"--log-file={log}",
           f"--cohort-progress={progress}",
           f"--cohort-out={raw}", f"--cohort-main={os.path.realpath(path)}",
           f"--affinity-distance={affinity_distance}", f"--max-size={max_size}",
           path, *argv[1:]]
    env = dict(os.environ, VALGRIND_LIB=str(lib))
    env.pop("LD_PRELOAD", None)  # a preloaded allocator would hide every object
    source = open_input(stdin)
    try:
        try:
            proc = subprocess.Popen(cmd, env=env, stdin=source)
        except OSError as e:
            raise CohortError(f"cannot run valgrind: {e.strerror}") from e
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
        allocs, tracked = int(words[2]), int(words[3])
        return f"cohort: profiling, {when}: {allocs:,} allocations, {tracked:,} accesses to them"
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
    raw = {"params": {}, "modules": [], "sites": [], "contexts": [], "edges": []}
    for line in lines[1:-1]:
        kind, _, rest = line.partition(" ")
        if kind == "param":
            k, v = rest.split()
            raw["params"][k] = int(v)
        elif kind == "exit":
            raw["exit"] = int(rest)
        elif kind in ("objects", "accesses"):
            f = rest.split()
            raw[kind] = {f[i]: int(f[i + 1]) for i in range(0, len(f), 2)}
        elif kind == "module":
            mid, system, bias, path = rest.split(" ", 3)
            raw["modules"].append({"id": int(mid), "system": system == "1",
                                   "bias": int(bias, 16), "path": path})
        elif kind == "site":
            head, fn, file, lineno = rest.split("\t")
            sid, mod, off, call = head.split(" ")
            raw["sites"].append({"id": int(sid), "module": int(mod), "offset": int(off, 16),
                                 "call": call, "function": fn or None, "file": file or None,
                                 "line": int(lineno) or None})
        elif kind == "inline":
            sid, *levels = rest.split("\t")
            raw["sites"][int(sid)]["inlined"] = levels
        elif kind == "context":
            nums, _, sites = rest.partition(":")
            v = [int(x) for x in nums.split()]
            raw["contexts"].append({"id": v[0], "truncated": v[1] == 1, "allocs": v[2],
                                    "bytes": v[3], "min": v[4], "max": v[5], "frees": v[6],
                                    "life_sum": v[7], "life_max": v[8], "accesses": v[9],
                                    "macro": v[10],
                                    "sites": [int(x) for x in sites.split()]})
        elif kind == "edge":
            x, y, w = (int(t) for t in rest.split())
            raw["edges"].append((x, y, w))
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


def build_profile(raw, target, params, returncode):
    """profile.json's content from the raw dump and what the CLI knows."""
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
        })
    kept, covered = hot_nodes(contexts, params["coverage"])
    keep = set(kept)
    function_of = families.site_functions(modules, raw["sites"])
    fams = families.families(contexts, function_of, {s["id"]: s["module"] for s in raw["sites"]})
    for f in fams:
        for c in f["contexts"]:
            contexts[c]["family"] = f["id"]
    edges = sorted(([x, y, w] for x, y, w in raw["edges"] if x in keep and y in keep),
                   key=lambda e: (-e[2], e[0], e[1]))
    status = {"exit_status": returncode if returncode >= 0 else None,
              "signal": -returncode if returncode < 0 else None}
    return {
        "format": FORMAT, "version": VERSION,
        "tool": {"name": "cohort", "raw_version": RAW_VERSION, "cohort": __version__},
        "parameters": params,
        "target": {"argv": target, "executable": os.path.realpath(resolve_program(target)),
                   "cwd": os.getcwd(), **status},
        "modules": modules,
        "sites": [{**{k: s[k] for k in ("id", "module", "offset", "call", "function", "file", "line")},
                   "function_start": function_of.get(s["id"]),
                   **({"inlined": s["inlined"]} if s.get("inlined") else {})}
                  for s in raw["sites"]],
        "contexts": contexts,
        "graph": {"nodes": kept, "edges": edges, "coverage": round(covered, 6),
                  "dropped_contexts": len(contexts) - len(kept)},
        "families": fams,
        "family_graph": families.family_graph(fams, contexts, raw["edges"], params["coverage"], hot_nodes),
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
        },
    }


def profile(target, output, force=False, affinity_distance=128, max_size=4096, coverage=0.9, stdin=None):
    """The whole `cohort profile`. stdin: a file the target reads as its
    standard input (default: cohort's own). Returns (profile dict, target's
    return code)."""
    output = Path(output)
    claim(output, "profile", force)
    if affinity_distance < 1 or max_size < 1 or not 0 < coverage <= 1:
        raise CohortError("affinity distance and max size must be positive, coverage in (0, 1]")
    if stdin is not None:
        stdin = check_input(stdin)
    params = {"affinity_distance": affinity_distance, "max_size": max_size, "coverage": coverage}
    with tempfile.TemporaryDirectory(prefix="cohort-profile.") as work:
        rc, raw_path, log = run_tool(target, work, affinity_distance, max_size, stdin=stdin)
        if not raw_path.exists():
            why = log_tail(log)
            raise CohortError(f"the profiler wrote no profile for {target[0]}"
                              + (f" (valgrind: {why})" if why else f" (exit status {rc})"))
        try:
            raw = parse_raw(raw_path.read_text(errors="replace"))
        except ValueError as e:
            raise CohortError(f"the profiler's output is unusable: {e}") from e
    data = build_profile(raw, target, params, rc)
    write_output(output, json.dumps(data, indent=1) + "\n", "profile", force)
    return data, rc


# ---- reading profiles back -------------------------------------------------

# Everything the planner, explain and the graph read is checked here, with
# types, ranges and cross-references, so that they can trust a loaded profile
# (docs/profile-format.md, "Validation"). One pass over the file: linear time.

LIMIT = 2 ** 64                 # counters, sizes and offsets: the tool's are 64-bit
INT = {int}
CALLS = ("direct", "indirect", "other")
TOTALS = ("allocations", "peak_live_objects", "peak_live_bytes", "accesses", "macro_accesses",
          "threads", "edges_before_filter", "weight_before_filter", "weight", "unknown_frees")
COUNTS = ("allocations", "bytes", "min_size", "max_size", "frees", "accesses", "macro_accesses")
# Characters a name may not hold: controls and line breaks (names go into the
# plan's line-oriented text; Python's splitlines also breaks at \x1c-\x1e,
# \x85, U+2028 and U+2029) and lone surrogates (not text; cannot be written).
NOT_IN_NAMES = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
SURROGATE = re.compile("[\ud800-\udfff]")
HEX = re.compile("(?:[0-9a-fA-F]{2})+")


class Corrupt(Exception):
    """What is wrong with a profile's content (the message names the field)."""


def _no_constant(name):
    raise Corrupt(f"{name}, which JSON does not allow")


def _decode(raw):
    """The JSON value of a profile file's bytes. Raises Corrupt (why not)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Corrupt(f"not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise Corrupt(f"bad JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except ValueError:
        # Python's int-string conversion limit (sys.set_int_max_str_digits,
        # 4300 digits by default): no count in a profile comes near it
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        raise Corrupt(f"a number of more than {limit} digits") from None
    except RecursionError:
        raise Corrupt("nested too deeply") from None


def _show(v):
    """A value, briefly, for a message."""
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if type(v) is int:
        return str(v) if abs(v) < 10 ** 24 else f"a number of about {int(v.bit_length() * 0.30103)} digits"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return ascii(v) if len(v) <= 40 else ascii(v[:37]) + "..."
    return "a list" if isinstance(v, list) else "an object"


def _field(obj, key, where):
    try:
        return obj[key]
    except KeyError:
        raise Corrupt(f"{where}: no '{key}'") from None


def _object(obj, key, where):
    v = _field(obj, key, where)
    if type(v) is not dict:
        raise Corrupt(f"{where}.{key}: {_show(v)}, not an object")
    return v


def _list(obj, key, where):
    v = _field(obj, key, where)
    if type(v) is not list:
        raise Corrupt(f"{where}.{key}: {_show(v)}, not a list")
    return v


def _records(data, key):
    """A top-level list of objects each with its index as "id"."""
    items = _list(data, key, "profile")
    for i, item in enumerate(items):
        if type(item) is not dict:
            raise Corrupt(f"{key}[{i}]: {_show(item)}, not an object")
        if _field(item, "id", f"{key}[{i}]") != i or type(item["id"]) is not int:
            raise Corrupt(f"{key}[{i}].id: {_show(item['id'])} (ids must be 0, 1, 2, ... in order)")
    return items


def _int(obj, key, where, lo=0, hi=LIMIT, null=False):
    v = _field(obj, key, where)
    if type(v) is int and lo <= v < hi or v is None and null:
        return v
    raise Corrupt(f"{where}.{key}: {_show(v)}, not an integer from {lo} to {hi - 1}"
                  + (" or null" if null else ""))


def _ints(obj, keys, where):
    """Counters: integers in [0, LIMIT)."""
    for k in keys:
        v = _field(obj, k, where)
        if type(v) is not int or not 0 <= v < LIMIT:
            _int(obj, k, where)


def _number(obj, key, where, lo, hi, null=False):
    v = _field(obj, key, where)
    if type(v) in (int, float) and lo <= v <= hi or v is None and null:
        return v
    raise Corrupt(f"{where}.{key}: {_show(v)}, not a number from {lo} to {hi}" + (" or null" if null else ""))


def _bool(obj, key, where):
    v = _field(obj, key, where)
    if type(v) is not bool:
        raise Corrupt(f"{where}.{key}: {_show(v)}, not true or false")
    return v


def _text(obj, key, where, name=False, null=False, empty=True):
    """A string: valid Unicode; a name (written into plans) also without
    controls or line breaks."""
    v = _field(obj, key, where)
    if v is None and null:
        return v
    if type(v) is not str or not v and not empty:
        raise Corrupt(f"{where}.{key}: {_show(v)}, not a{' non-empty' if not empty else ''} string"
                      + (" or null" if null else ""))
    if (NOT_IN_NAMES if name else SURROGATE).search(v):
        raise Corrupt(f"{where}.{key}: {_show(v)} holds a "
                      + ("control character, line break or " if name else "") + "lone surrogate")
    return v


def _ids(items, n, where, what):
    """A list of integer ids in [0, n); linear, with builtins on the good path."""
    if type(items) is not list:
        raise Corrupt(f"{where}: {_show(items)}, not a list")
    if items and (not INT.issuperset(map(type, items)) or min(items) < 0 or max(items) >= n):
        i, x = next((i, x) for i, x in enumerate(items) if type(x) is not int or not 0 <= x < n)
        raise Corrupt(f"{where}[{i}]: {_show(x)} is no {what} id (the profile has {n} {what}s)")
    return items


def _graph(data, key, n, what):
    """graph or family_graph: distinct nodes in [0, n), edges [x, y, w]
    between nodes with x <= y and w > 0, each pair once, and the coverage."""
    g = _object(data, key, "profile")
    nodes = _ids(_list(g, "nodes", key), n, f"{key}.nodes", what)
    kept = set(nodes)
    if len(kept) != len(nodes):
        raise Corrupt(f"{key}.nodes: a {what} is listed twice")
    pairs = set()
    for i, e in enumerate(_list(g, "edges", key)):
        if type(e) is not list or len(e) != 3:
            raise Corrupt(f"{key}.edges[{i}]: {_show(e)}, not [x, y, weight]")
        x, y, w = e
        for v in (x, y):
            if type(v) is not int or v not in kept:
                raise Corrupt(f"{key}.edges[{i}]: {_show(v)} is not one of the graph's nodes")
        if x > y:
            raise Corrupt(f"{key}.edges[{i}]: [{x}, {y}, ...] is not in order (x <= y)")
        if type(w) is not int or not 0 < w < LIMIT:
            raise Corrupt(f"{key}.edges[{i}]: weight {_show(w)}, not an integer from 1 to {LIMIT - 1}")
        if (x, y) in pairs:
            raise Corrupt(f"{key}.edges[{i}]: a second edge between {x} and {y}")
        pairs.add((x, y))
    _number(g, "coverage", key, 0, 1)
    return g


def check_profile(data):
    """Raises Corrupt naming the first field that is missing, of the wrong
    type, out of range, or names something that is not there."""
    if type(data) is not dict:
        raise Corrupt("not a JSON object")
    version = data.get("version")
    if type(version) is not int or version not in READS:
        raise Corrupt(f"version {_show(version)}, not one of {', '.join(map(str, READS))}")
    tool = _object(data, "tool", "profile")
    for k in ("name", "raw_version", "cohort"):
        _text(tool, k, "tool")
    params = _object(data, "parameters", "profile")
    _int(params, "affinity_distance", "parameters", lo=1)
    _int(params, "max_size", "parameters", lo=1)
    if _number(params, "coverage", "parameters", 0, 1) == 0:
        raise Corrupt("parameters.coverage: 0, not above 0")
    target = _object(data, "target", "profile")
    argv = _list(target, "argv", "target")
    if not argv:
        raise Corrupt("target.argv: empty")
    for i, a in enumerate(argv):
        if type(a) is not str or SURROGATE.search(a):
            raise Corrupt(f"target.argv[{i}]: {_show(a)}, not a string of valid Unicode")
    _text(target, "executable", "target")
    _text(target, "cwd", "target")
    _int(target, "exit_status", "target", lo=-2 ** 31, hi=2 ** 31, null=True)
    _int(target, "signal", "target", lo=0, hi=2 ** 31, null=True)

    modules = _records(data, "modules")
    for i, m in enumerate(modules):
        where = f"modules[{i}]"
        _text(m, "path", where, name=True, empty=False)
        b = _text(m, "build_id", where, null=True)
        if b is not None and not HEX.fullmatch(b):
            raise Corrupt(f"{where}.build_id: {_show(b)}, not hex digits in pairs")
        _bool(m, "system", where)

    sites = _records(data, "sites")
    for i, s in enumerate(sites):
        where = f"sites[{i}]"
        _int(s, "module", where, hi=len(modules))
        _int(s, "offset", where)
        if _field(s, "call", where) not in CALLS or type(s["call"]) is not str:
            raise Corrupt(f"{where}.call: {_show(s['call'])}, not one of {', '.join(CALLS)}")
        _text(s, "function", where, name=True, null=True)
        _text(s, "file", where, name=True, null=True)
        _int(s, "line", where, lo=1, hi=2 ** 63, null=True)
        if version >= 2 or "function_start" in s:
            _int(s, "function_start", where, null=True)
        if "inlined" in s:
            levels = s["inlined"]
            if type(levels) is not list or len(levels) > 64:
                raise Corrupt(f"{where}.inlined: {_show(levels)}, not a list of at most 64 names")
            for j in range(len(levels)):
                _text(levels, j, f"{where}.inlined", name=True)

    contexts = _records(data, "contexts")
    families = version >= 2 or data.get("families") is not None
    for i, c in enumerate(contexts):
        where = f"contexts[{i}]"
        _ids(_field(c, "sites", where), len(sites), f"{where}.sites", "site")
        _bool(c, "truncated", where)
        _ints(c, COUNTS, where)
        _bool(c, "same_size", where)
        life = _object(c, "lifetime", where)
        _number(life, "mean", f"{where}.lifetime", 0, float(LIMIT), null=True)
        _int(life, "max", f"{where}.lifetime", null=True)
        _int(life, "live_at_exit", f"{where}.lifetime", lo=-LIMIT)
        if families and type(_field(c, "family", where)) is not int:
            raise Corrupt(f"{where}.family: {_show(c['family'])}, not an integer")
    _graph(data, "graph", len(contexts), "context")
    _int(data["graph"], "dropped_contexts", "graph", hi=len(contexts) + 1)

    if families:
        fams = _records(data, "families")
        owner = [None] * len(contexts)
        for i, f in enumerate(fams):
            where = f"families[{i}]"
            _ids(_field(f, "sites", where), len(sites), f"{where}.sites", "site")
            members = _ids(_field(f, "contexts", where), len(contexts), f"{where}.contexts", "context")
            if not members:
                raise Corrupt(f"{where}.contexts: empty")
            for c in members:
                if owner[c] is not None:
                    raise Corrupt(f"{where}.contexts: context {c} is also in family {owner[c]}")
                owner[c] = i
        for i, c in enumerate(contexts):
            if owner[i] is None:
                raise Corrupt(f"contexts[{i}]: in no family")
            if c["family"] != owner[i]:
                raise Corrupt(f"contexts[{i}].family: {_show(c['family'])}, but families[{owner[i]}] "
                              f"holds it")
        _graph(data, "family_graph", len(fams), "family")

    totals = _object(data, "totals", "profile")
    _ints(totals, TOTALS, "totals")


def load_profile(path):
    """A profile.json, checked (check_profile) so that later stages can trust
    its shape: types, ranges and cross-references. Raises CohortError with
    one line `PATH: what is wrong`."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise CohortError(f"{path}: no such profile") from None
    except OSError as e:
        raise CohortError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        data = _decode(raw)
    except Corrupt as e:
        raise CohortError(f"{path}: not a profile: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CohortError(f"{path}: not a Cohort profile")
    version = data.get("version")
    if type(version) is not int or version not in READS:
        raise CohortError(f"{path}: profile version {_show(version)} is not supported "
                          f"(this Cohort reads versions {READS[0]} to {READS[-1]})")
    try:
        check_profile(data)
    except Corrupt as e:
        raise CohortError(f"{path}: corrupt profile: {e}") from None
    return data


def summary(data, rc):
    """One paragraph for the terminal after profiling."""
    t, g = data["totals"], data["graph"]
    lines = [f"cohort: profiled {data['target']['argv'][0]}: {t['allocations']} allocations in "
             f"{len(data['contexts'])} contexts, {t['accesses']} accesses to tracked objects; "
             f"graph of {len(g['nodes'])} contexts ({g['coverage']:.0%} of accesses), "
             f"{len(g['edges'])} edges"]
    return "\n".join(lines)
