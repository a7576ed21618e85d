"""`cohort loads`: MO's delinquent loads (Zhao, Rabbah & Wong 2005, section 3)
measured on a run, and the prefetch advice `cohort explain --prefetch`
derives from them.

The profiler (profiler/loads.c, --cohort-loads=yes) simulates the cache for
every data access and, for each static load, counts its misses and runs MO's
stride test over windows of its executions. This module runs it, decodes
each load with Capstone to keep MO's heap-pointer form (a base register that
is neither rsp nor rbp, no index register), and writes loads.json
(docs/loads-format.md).

The layout the loads see is the point of MO's paper: pooling turns the
scattered strides of a list into a constant one. So a run can be measured
under the next allocator (the profiler's own, which places blocks in
allocation order with headers between them, as glibc does) or with the
runtime in front of it, under a plan or an online policy; `cohort explain
--prefetch` sets two such files side by side."""

import hashlib
import json
from pathlib import Path

from cohort import __version__
from cohort.errors import CohortError
from cohort.files import claim, write_output

FORMAT = "cohort-loads"
VERSION = 1
KEEP = 1000            # loads written, the most missing first
NOT_HEAP = {"rsp", "rbp", "rip", "esp", "ebp", "eip"}   # MO: stack and globals, not the heap
DISTANCE_LINES = 5     # MO's n: p = 5 x line + s


# ---- decoding --------------------------------------------------------------

class Decoder:
    """The instruction at a module's virtual address, from the file on disk
    (code is never read from the running process). One per run; each
    module's loadable segments are read once."""

    def __init__(self):
        from capstone import CS_ARCH_X86, CS_MODE_64, Cs
        self.cs = Cs(CS_ARCH_X86, CS_MODE_64)
        self.cs.detail = True
        self.segments = {}

    def _segments(self, path):
        if path not in self.segments:
            from elftools.common.exceptions import ELFError
            from elftools.elf.elffile import ELFFile
            segs = []
            try:
                with open(path, "rb") as f:
                    for s in ELFFile(f).iter_segments():
                        if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1:   # executable
                            segs.append((s["p_vaddr"], s["p_filesz"], s["p_offset"]))
            except (OSError, ELFError, ValueError):
                segs = []
            self.segments[path] = segs
        return self.segments[path]

    def decode(self, path, vaddr):
        """{"text", "base", "index", "disp", "size"} of the load at vaddr, or
        None when the file or the instruction cannot be read."""
        for start, size, offset in self._segments(path):
            if start <= vaddr < start + size:
                try:
                    with open(path, "rb") as f:
                        f.seek(offset + vaddr - start)
                        code = f.read(15)
                except OSError:
                    return None
                break
        else:
            return None
        from capstone import CsError
        from capstone.x86 import X86_OP_MEM
        try:
            insn = next(self.cs.disasm(code, vaddr, 1), None)
            if insn is None:
                return None
            mem = [op for op in insn.operands if op.type == X86_OP_MEM]
        except CsError:
            return None
        out = {"text": f"{insn.mnemonic} {insn.op_str}".strip(), "base": None, "index": None,
               "disp": 0, "size": insn.size}
        if mem:
            m = mem[0].mem
            out["base"] = insn.reg_name(m.base) if m.base else None
            out["index"] = insn.reg_name(m.index) if m.index else None
            out["disp"] = m.disp
        return out


def heap_form(load):
    """MO's filter: a pointer dereference, base + constant, off the stack."""
    d = load.get("insn")
    return bool(d) and d["base"] is not None and d["base"] not in NOT_HEAP and d["index"] is None


def candidate(load):
    """A load the advice may name: MO's form, in the program's own code (not
    libc, the loader, the runtime: docs/context.md's system modules)."""
    return heap_form(load) and not load["system"]


# ---- measuring -------------------------------------------------------------

def layout_of(plan, policy):
    if plan is not None:
        data = Path(plan).read_bytes()
        return {"kind": "plan", "plan": str(Path(plan).resolve()),
                "plan_sha256": hashlib.sha256(data).hexdigest()}
    if policy is not None:
        return {"kind": "policy", "policy": policy}
    return {"kind": "next"}


def build(raw, target, layout, returncode):
    decoder = Decoder()
    modules = raw["modules"]
    loads = sorted(raw["loads"], key=lambda l: (-l["d1_misses"], -l["execs"], l["module"], l["offset"]))
    kept = []
    for l in loads[:KEEP]:
        if not l["d1_misses"]:
            break
        path = modules[l["module"]]["path"]
        kept.append({"module": path, "system": modules[l["module"]]["system"],
                     "offset": l["offset"], "function": l["function"],
                     "file": l["file"], "line": l["line"], "insn": decoder.decode(path, l["offset"]),
                     "execs": l["execs"], "d1_misses": l["d1_misses"], "ll_misses": l["ll_misses"],
                     "windows": l["windows"], "strided_windows": l["strided_windows"],
                     "strides": [{"stride": s, "windows": n}
                                 for s, n in sorted(l["strides"], key=lambda p: (-p[1], p[0]))]})
    return {"format": FORMAT, "version": VERSION, "cohort_version": __version__,
            "target": {"argv": list(target), "exit": returncode},
            "layout": layout, "cache": raw["cache"], "totals": raw["load_totals"],
            "loads_seen": len(raw["loads"]), "loads": kept}


def measure(target, output, plan=None, policy=None, force=False, stdin=None, window=64):
    """The whole `cohort loads`: run target under the profiler with the
    cache and stride analysis on, in the layout asked for; write loads.json.
    Returns (data, the target's return code)."""
    from cohort.measure.profile import run_and_read
    from cohort.measure.runner import check_input, environment
    output = Path(output)
    claim(output, "loads", force)
    if window < 4:
        raise CohortError("--window must be at least 4 executions")
    if stdin is not None:
        stdin = check_input(stdin)
    preload = None
    if plan is not None or policy is not None:
        # The runtime in front of the tool's allocator. Patched call sites
        # are rewritten code, which valgrind would not retranslate: walks
        # decide instead, which changes no placement.
        env = environment(plan=plan, policy=policy, base={}, patch=0)
        if "LD_PRELOAD" not in env:
            raise CohortError(f"plan {plan} places no object (it has no group): there is no pooled layout to measure")
        preload = {k: v for k, v in env.items() if k == "LD_PRELOAD" or k.startswith("COHORT_")}
    # Valgrind 3.19 replaces malloc in every user library that defines one,
    # libcohort's too; nouserintercepts keeps it to libc, behind the runtime.
    extra = ("--soname-synonyms=somalloc=nouserintercepts",) if preload else ()
    layout = layout_of(plan, policy)
    rc, raw = run_and_read(target, "measurement", 128, 4096, stdin=stdin, preload=preload,
                           tool_args=("--cohort-loads=yes", f"--stride-window={window}", *extra))
    if "cache" not in raw:
        raise CohortError("the profiler's output has no loads (is the tool in build/ out of date? run make)")
    data = build(raw, target, layout, rc)
    write_output(output, json.dumps(data, indent=1) + "\n", "loads", force)
    return data, rc


def summary(data):
    t = data["totals"]
    heap = sum(1 for l in data["loads"] if heap_form(l))
    return (f"cohort: {t['loads']:,} loads ({data['loads_seen']:,} static), {t['d1_misses']:,} D1 misses "
            f"in {t['accesses']:,} data accesses; {len(data['loads'])} missing loads kept, "
            f"{heap} of them pointer dereferences")


# ---- reading ---------------------------------------------------------------

def read(path):
    """A loads.json, checked enough that the advice cannot trip on it."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        raise CohortError(f"cannot read {path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CohortError(f"{path} is not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CohortError(f"{path} is not a loads file from `cohort loads`")
    if data.get("version") != VERSION:
        raise CohortError(f"{path}: loads format version {data.get('version')!r}, this cohort reads {VERSION}")
    try:
        _check(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CohortError(f"{path} is damaged ({type(e).__name__}: {e})") from None
    return data


def _int(v):
    if type(v) is not int or v < 0:
        raise ValueError(f"{v!r} is not a count")
    return v


def _check(data):
    cache = data["cache"]
    if _int(cache["line"]) == 0 or _int(cache["window"]) < 4:
        raise ValueError("bad cache line or window")
    _int(data["totals"]["d1_misses"])
    if not isinstance(data["layout"], dict) or not isinstance(data["layout"]["kind"], str):
        raise ValueError("bad layout")
    for l in data["loads"]:
        for k in ("offset", "execs", "d1_misses", "ll_misses", "windows", "strided_windows"):
            _int(l[k])
        if not isinstance(l["module"], str):
            raise ValueError("module is not a path")
        if not isinstance(l["system"], bool):
            raise ValueError("system is not true or false")
        for k in ("function", "file"):
            if l[k] is not None and not isinstance(l[k], str):
                raise ValueError(f"{k} is not text")
        if l["line"] is not None:
            _int(l["line"])
        for s in l["strides"]:
            if type(s["stride"]) is not int:
                raise ValueError("a stride is not an integer")
            _int(s["windows"])
        d = l["insn"]
        if d is not None:
            if not isinstance(d["text"], str) or type(d["disp"]) is not int:
                raise ValueError("bad instruction")
            for k in ("base", "index"):
                if d[k] is not None and not isinstance(d[k], str):
                    raise ValueError("bad register")


# ---- the advice ------------------------------------------------------------

def verdict(load, total_misses, line, min_share):
    """(stride, distance) when MO would prefetch for this load: a heap
    pointer dereference with at least min_share of the run's D1 misses whose
    windows mostly pass MO's stride test; else None."""
    if not candidate(load) or load["d1_misses"] < min_share * max(total_misses, 1):
        return None
    if not load["windows"] or 2 * load["strided_windows"] <= load["windows"] or not load["strides"]:
        return None
    s = load["strides"][0]["stride"]
    return s, distance(s, line)


def distance(stride, line):
    """MO's p = 5 x b + s, ahead in the direction the load walks."""
    return (DISTANCE_LINES * line + stride) if stride > 0 else -(DISTANCE_LINES * line) + stride


def _command(data):
    argv = data["target"]["argv"]
    return [Path(argv[0]).name, *argv[1:]] if argv else []


def _where(l):
    place = f"{Path(l['file']).name}:{l['line']}" if l["file"] and l["line"] else f"{Path(l['module']).name}+{l['offset']:#x}"
    return place, l["function"] or "?"


def _layout_name(data):
    lay = data["layout"]
    if lay["kind"] == "plan":
        p = Path(lay.get("plan", "?"))
        return f"plan {p.parent.name + '/' if p.name == 'plan' and p.parent.name else ''}{p.name}"
    if lay["kind"] == "policy":
        return f"policy {lay.get('policy', '?')}"
    return "next allocator"


def _cell(l, total):
    if l is None:
        return "no misses"
    share = l["d1_misses"] / max(total, 1)
    strided = l["strided_windows"] / l["windows"] if l["windows"] else 0.0
    s = f"{share:5.1%} of misses, {strided:4.0%} strided"
    if l["strides"] and l["strided_windows"]:
        s += f" (s={l['strides'][0]['stride']})"
    return s


def advice(first, second=None, min_share=0.01, top=10):
    """The text of `cohort explain --prefetch`: MO's delinquent loads of one
    or two measurements (two layouts of one program), and for each load
    worth a prefetch what to write in the source."""
    runs = [first] + ([second] if second else [])
    line = first["cache"]["line"]
    out = [f"Delinquent loads (MO, 2005, section 3) of {' '.join(first['target']['argv'])}",
           f"  cache: D1 {first['cache']['d1'][0] // 1024} KiB {first['cache']['d1'][1]}-way, "
           f"{line}-byte lines; stride window t = {first['cache']['window']} executions of a load",
           f"  a load is advised when it dereferences a heap pointer (base register not rsp/rbp/rip, "
           f"no index), has at least {min_share:.0%} of the D1 misses, and more than half of its "
           f"windows hold one stride s >= {line // 4} bytes over more than t/2 references; "
           f"distance p = {DISTANCE_LINES} x {line} + s"]
    for r in runs:
        system = sum(l["d1_misses"] for l in r["loads"] if l["system"])
        out.append(f"  {_layout_name(r)}: {r['totals']['d1_misses']:,} D1 misses in "
                   f"{r['totals']['accesses']:,} data accesses; {system / max(r['totals']['d1_misses'], 1):.1%} "
                   "of them by loads in system libraries and the runtime, which are not listed")
    if second and _command(second) != _command(first):
        out.append("  NOTE: the two measurements ran different commands; loads are matched by address")
    out.append("")
    index = [{(l["module"], l["offset"]): l for l in r["loads"]} for r in runs]
    keys = []
    for r in runs:
        for l in r["loads"]:
            k = (l["module"], l["offset"])
            if k not in keys and candidate(l) and l["d1_misses"] >= min_share * max(r["totals"]["d1_misses"], 1):
                keys.append(k)
    keys.sort(key=lambda k: -max((ix[k]["d1_misses"] / max(r["totals"]["d1_misses"], 1))
                                 for ix, r in zip(index, runs) if k in ix))
    keys = keys[:top]
    if not keys:
        out.append(f"No heap load has {min_share:.0%} of the misses: nothing to prefetch.")
        return "\n".join(out) + "\n"
    advised = []
    for n, k in enumerate(keys, 1):
        l = next(ix[k] for ix in index if k in ix)
        place, fn = _where(l)
        insn = l["insn"]["text"] if l["insn"] else "?"
        out.append(f"{n:2}. {place} in {fn}: {insn}")
        for ix, r in zip(index, runs):
            v = verdict(ix[k], r["totals"]["d1_misses"], line, min_share) if k in ix else None
            cell = _cell(ix.get(k), r["totals"]["d1_misses"])
            out.append(f"      {_layout_name(r):<22} {cell}"
                       + (f"  -> prefetch {v[1]:+d} bytes ahead" if v else "  -> no prefetch"))
            if v and (k, v) not in [(a[0], a[2]) for a in advised]:
                advised.append((k, l, v, _layout_name(r)))
    out.append("")
    if not advised:
        out.append("No load walks with a constant stride: a prefetch at a fixed distance would not help.")
        return "\n".join(out) + "\n"
    out.append("What to write (GCC and Clang), before each advised line; PTR is the pointer the load")
    out.append("reads through (the object it reads a field of), one prefetch per such pointer:")
    lines = {}   # source place -> [(load, stride, distance, layout)], in order
    for k, l, (st, p), lay in advised:
        lines.setdefault(_where(l), []).append((l, st, p, lay))
    for (place, fn), items in lines.items():
        regs = []
        for l, *_ in items:
            r = f"{l['insn']['base']} {l['insn']['disp']:+d}"
            if r not in regs:
                regs.append(r)
        out.append(f"  {place} in {fn} (read through {', '.join(regs)}):")
        shown = set()
        for l, st, p, lay in items:
            if (lay, p) in shown:
                continue
            shown.add((lay, p))
            code = f"__builtin_prefetch((const char *)PTR {'+' if p > 0 else '-'} {abs(p)});"
            ahead = f"{DISTANCE_LINES} x {line} + {st}" if st > 0 else f"-({DISTANCE_LINES} x {line}) - {-st}"
            out.append(f"    {code:<48} under the {lay} (stride {st:+d}: p = {ahead})")
    return "\n".join(out) + "\n"
