"""Plans written by hand: call sites found in a binary's own disassembly
(objdump), build ids read from its notes. The tests and the demo use
it to name known call sites; `cohort plan` derives plans from profiles."""

import functools
import re
import subprocess
from pathlib import Path

from cohort.formats import elf, planfile


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
    content = {"max_size": max_size or None, "modules": [(build_id(m), Path(m).resolve()) for m in modules],
               "sites": [(mod, off, verdict, None) for mod, off, verdict in sites], "groups": groups,
               "group_at": at or {}, "selects": selects, "rest": rest, "paths": list(paths),
               "unknown_entry": unknown_entry or None, "unknown_path": unknown_path or None}
    Path(path).write_text(planfile.plan_text(content, ["# written by hand in a test"], version=version))
    return path


def read_log(path):
    """Lines "kind index group address" -> {kind: [(index, group, address)]}."""
    objs = {}
    for line in Path(path).read_text().splitlines():
        kind, idx, grp, addr = line.split()
        objs.setdefault(kind, []).append((int(idx), int(grp), int(addr, 16)))
    return objs
