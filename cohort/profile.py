"""`cohort profile`: run a program under Cohort's Valgrind tool and write
profile.json (docs/profile-format.md).

The tool (profiler/) does all per-access work and writes a raw, line-oriented
dump at exit; this module runs it, reads the dump, adds what C cannot easily
know (build ids, the 90% node filter), and writes the versioned JSON."""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from cohort import __version__, elf, families
from cohort.errors import CohortError
from cohort.files import write_atomically
from cohort.paths import profiler_lib
from cohort.runner import resolve_program

FORMAT = "cohort-profile"
VERSION = 2          # written; 1 (no context families) is still read
READS = (1, 2)
RAW_VERSION = "1"

DEFAULTS = {"affinity_distance": 128, "max_size": 4096, "coverage": 0.9}


# ---- running the tool ------------------------------------------------------

def run_tool(argv, workdir, affinity_distance, max_size):
    """Run argv under the tool; the target keeps the terminal. Returns
    (returncode, raw path of the main process, valgrind log path)."""
    path = resolve_program(argv)
    what = elf.kind(path)
    if what not in ("x86-64", "script"):
        raise CohortError(f"cannot profile {argv[0]}: {what} (Cohort profiles x86-64 ELF programs)")
    valgrind = shutil.which("valgrind")
    if not valgrind:
        raise CohortError("valgrind is not installed (apt-get install valgrind)")
    lib = profiler_lib()
    log = Path(workdir) / "valgrind.log"
    raw = Path(workdir) / "raw.%p"
    cmd = [valgrind, "--tool=cohort", "-q", f"--log-file={log}",
           f"--cohort-out={raw}", f"--cohort-main={os.path.realpath(path)}",
           f"--affinity-distance={affinity_distance}", f"--max-size={max_size}",
           path, *argv[1:]]
    env = dict(os.environ, VALGRIND_LIB=str(lib))
    env.pop("LD_PRELOAD", None)  # a preloaded allocator would hide every object
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        raise CohortError(f"cannot run valgrind: {e.strerror}") from e
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.wait()
        raise
    return rc, Path(workdir) / f"raw.{proc.pid}", log


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
                   "function_start": function_of.get(s["id"])}
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


def write_json(path, data):
    write_atomically(path, json.dumps(data, indent=1) + "\n")


def profile(target, output, force=False, affinity_distance=128, max_size=4096, coverage=0.9):
    """The whole `cohort profile`. Returns (profile dict, target's return code)."""
    output = Path(output)
    if output.exists() and not force:
        raise CohortError(f"{output} exists (use --force to overwrite it)")
    if not output.parent.is_dir():
        raise CohortError(f"cannot write {output}: no directory {output.parent}")
    if affinity_distance < 1 or max_size < 1 or not 0 < coverage <= 1:
        raise CohortError("affinity distance and max size must be positive, coverage in (0, 1]")
    params = {"affinity_distance": affinity_distance, "max_size": max_size, "coverage": coverage}
    with tempfile.TemporaryDirectory(prefix="cohort-profile.") as work:
        rc, raw_path, log = run_tool(target, work, affinity_distance, max_size)
        if not raw_path.exists():
            why = log_tail(log)
            raise CohortError(f"the profiler wrote no profile for {target[0]}"
                              + (f" (valgrind: {why})" if why else f" (exit status {rc})"))
        try:
            raw = parse_raw(raw_path.read_text(errors="replace"))
        except ValueError as e:
            raise CohortError(f"the profiler's output is unusable: {e}") from e
    data = build_profile(raw, target, params, rc)
    write_json(output, data)
    return data, rc


# ---- reading profiles back -------------------------------------------------

def load_profile(path):
    """A profile.json, checked enough that later stages can trust its shape."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise CohortError(f"{path}: no such profile") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CohortError(f"{path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise CohortError(f"{path}: not a profile (bad JSON at line {e.lineno})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CohortError(f"{path}: not a Cohort profile")
    if data.get("version") not in READS:
        raise CohortError(f"{path}: profile version {data.get('version')} is not supported "
                          f"(this Cohort reads versions {READS[0]} to {READS[-1]})")
    try:
        n_mod, n_site, n_ctx = len(data["modules"]), len(data["sites"]), len(data["contexts"])
        for s in data["sites"]:
            assert 0 <= s["module"] < n_mod and isinstance(s["offset"], int)
        for c in data["contexts"]:
            assert all(0 <= s < n_site for s in c["sites"])
            assert isinstance(c["accesses"], int) and isinstance(c["allocations"], int)
        for x, y, w in data["graph"]["edges"]:
            assert 0 <= x < n_ctx and 0 <= y < n_ctx and w > 0
        assert all(0 <= n < n_ctx for n in data["graph"]["nodes"])
    except (KeyError, TypeError, ValueError, AssertionError):
        raise CohortError(f"{path}: corrupt profile (inconsistent or missing fields)") from None
    return data


def summary(data, rc):
    """One paragraph for the terminal after profiling."""
    t, g = data["totals"], data["graph"]
    lines = [f"cohort: profiled {data['target']['argv'][0]}: {t['allocations']} allocations in "
             f"{len(data['contexts'])} contexts, {t['accesses']} accesses to tracked objects; "
             f"graph of {len(g['nodes'])} contexts ({g['coverage']:.0%} of accesses), "
             f"{len(g['edges'])} edges"]
    if rc != 0:
        how = f"was killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
        lines.append(f"cohort: note: the target {how}; the profile covers the run up to then")
    return "\n".join(lines)
