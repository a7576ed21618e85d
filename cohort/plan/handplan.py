"""Plans written by hand: call sites found in a binary's own disassembly
(objdump), build ids read from its notes. The tests and the demo use
it to name known call sites; `cohort plan` derives plans from profiles."""

import functools
import re
import subprocess
from pathlib import Path

from cohort.formats import elf


def build_id(binary):
    return elf.build_id(binary) or "-"


@functools.lru_cache(maxsize=16)
def _calls(binary, mtime):
    """Every call objdump finds in the binary, as (function, mnemonic,
    operand, return address); function is None where no symbol names it."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary],
                         capture_output=True, text=True, check=True).stdout
    calls, fn, pending = [], None, None
    for line in out.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head:
            fn, pending = head.group(1), None
            continue
        ins = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if not ins:
            continue
        if pending:
            calls.append(pending + (int(ins.group(1), 16),))
            pending = None
        if ins.group(2).startswith("call"):
            pending = (fn, ins.group(2), ins.group(3))
    return tuple(calls)


def calls(binary):
    binary = Path(binary)
    return _calls(str(binary), binary.stat().st_mtime_ns)


def call_sites(binary, caller, callee):
    """Return addresses (ELF virtual addresses) of every call from function
    `caller` to `callee` (a symbol name; '@plt' calls match too)."""
    sites = [ret for fn, _, operand, ret in calls(binary)
             if fn == caller and re.search(rf"<{re.escape(callee)}(@plt)?>", operand)]
    if not sites:
        raise AssertionError(f"no call {caller} -> {callee} in {binary}")
    return sites


def direct_call_sites(binary):
    """Return addresses of every direct call (`call ADDRESS <...>`)."""
    return [ret for _, mnemonic, operand, ret in calls(binary)
            if mnemonic == "call" and re.match(r"[0-9a-f]+ <", operand)]


def write_plan(path, modules, sites, groups, selects, max_size=None, unknown_entry=None, version=1,
               rest=None, paths=(), unknown_path=None, at=None):
    """modules: [binary path]; sites: [(module index, offset, verdict or None)];
    groups: [name]; selects: [(group index, [site indexes])]; rest: the group
    of everything else (version 4); paths: [([site indexes], verdict)]
    (version 5); unknown_path: "walk" or "cold" (version 6); at: {group
    index: bytes into a line its line-sized blocks start} (version 8)."""
    lines = [f"cohort-plan {version}", "# written by hand in a test"]
    if max_size:
        lines.append(f"max-size {max_size}")
    for i, m in enumerate(modules):
        lines.append(f"module {i} {build_id(m)} {Path(m).resolve()}")
    for i, (mod, off, verdict) in enumerate(sites):
        lines.append(f"site {i} {mod} {off:#x}" + (f" {verdict}" if verdict else ""))
    for i, name in enumerate(groups):
        lines.append(f"group {i} {name}" + (f" at={at[i]}" if at and i in at else ""))
    for g, ss in selects:
        lines.append(f"select {g} " + " ".join(str(s) for s in ss))
    if rest is not None:
        lines.append(f"rest {rest}")
    for ss, verdict in paths:
        lines.append("path " + " ".join(str(s) for s in ss) + f" {verdict}")
    if unknown_entry:
        lines.append(f"unknown-entry {unknown_entry}")
    if unknown_path:
        lines.append(f"unknown-path {unknown_path}")
    lines.append("end")
    Path(path).write_text("\n".join(lines) + "\n")
    return path


def read_log(path):
    """Lines "kind index group address" -> {kind: [(index, group, address)]}."""
    objs = {}
    for line in Path(path).read_text().splitlines():
        kind, idx, grp, addr = line.split()
        objs.setdefault(kind, []).append((int(idx), int(grp), int(addr, 16)))
    return objs
