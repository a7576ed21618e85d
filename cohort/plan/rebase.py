"""Plans that survive a rebuild (docs/plan-format.md, "Anchors"): the
anchors a plan carries for its call sites, and a plan rebased onto another
build of its program. Both run build/tools/cohort-anchor, which is the
runtime's own code for it (runtime/bind/anchor.c), so `cohort plan --rebase`
and the runtime meeting another build find the same sites."""

import os
import re
import subprocess
from collections import Counter
from pathlib import Path

from cohort.errors import CohortError
from cohort.files import write_output
from cohort.formats import planfile
from cohort.formats.elf import build_id
from cohort.paths import anchor_tool

# The percent of a plan's selectors (select lines and group=G verdicts)
# that must be found again for a rebased plan to group anything; the
# runtime's default is the same (COHORT_REBASE_MIN, runtime/system/options.c),
# compared as it is, in whole numbers. Below it the plan is treated as
# stale, as a plan for another build always was.
DEFAULT_MIN_KEPT = 90


def too_few(found, of, percent):
    """Fewer than percent of `of` (as the runtime counts it)."""
    return found * 100 < percent * of


_NAME = r"[!-\"$-+\--<>-~]{1,160}"
_ANCHOR = re.compile(rf"call=[dgi]:{_NAME} in={_NAME}( tofn={_NAME})? nth=(\d{{1,9}})/(\d{{1,9}}) "
                     r"before=([0-9a-f]{8},){7}[0-9a-f]{8} after=([0-9a-f]{8},){7}[0-9a-f]{8}")


def valid_anchor(words):
    """Whether a profile's anchor is one the runtime's parser takes (the
    schema checks its shape; the place must also lie among the count)."""
    m = _ANCHOR.fullmatch(words) if isinstance(words, str) else None
    return bool(m) and (int(m.group(3)) == 0 or int(m.group(2)) < int(m.group(3)))


def _run(args, stdin=None):
    try:
        r = subprocess.run([str(anchor_tool()), *map(str, args)], input=stdin, capture_output=True, text=True,
                           errors="replace", timeout=600, env=dict(os.environ, LD_PRELOAD=""))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CohortError(f"cannot run cohort-anchor: {e}") from None
    if r.returncode == 1:
        raise CohortError(r.stderr.strip().removeprefix("cohort-anchor: ") or "cohort-anchor failed")
    if r.returncode:
        raise CohortError(f"cohort-anchor exited {r.returncode}")
    lines = r.stdout.splitlines()
    if not lines or not lines[0].startswith("build-id "):
        raise CohortError("cohort-anchor wrote no build id")
    return lines[0].split()[1], lines[1:]


def describe(binary, offsets):
    """{offset: the words of its anchor} for the call sites of `binary` at
    these offsets that a call returns to."""
    offsets = sorted(set(offsets))
    if not offsets:
        return {}
    _, lines = _run(["describe", binary, *(f"{o:x}" for o in offsets)])
    out = {}
    for line in lines:
        off, _, words = line.partition(" ")
        if words and not words.startswith("- "):
            out[int(off, 16)] = words
    return out


def plan_anchors(modules, sites):
    """The anchors a new plan carries: {site: words}, for the sites of every
    module whose file is still the build profiled (modules: {index: (build
    id, path)}; sites: {site: (module, offset)}). A module rebuilt or gone
    since, or no cohort-anchor built, gives its sites none: the plan is
    good for its build, and cannot be carried to another."""
    try:
        anchor_tool()
    except CohortError:
        return {}
    out = {}
    for m, (bid, path) in modules.items():
        mine = {s: off for s, (mod, off) in sites.items() if mod == m}
        if not mine or not bid or not Path(path).is_file() or build_id(path) != bid:
            continue
        try:
            found = describe(path, mine.values())
        except CohortError:
            continue
        out.update({s: found[off] for s, off in mine.items() if off in found})
    return out


def find(binary, anchors):
    """Where each anchor lies in `binary`: (its build id, {site: (offset or
    None, how it was found or why not, the call's own anchor in `binary` or
    None)})."""
    if not anchors:
        return build_id(binary), {}
    bid, lines = _run(["find", binary], "".join(f"{s} {w}\n" for s, w in anchors.items()))
    out = {}
    for line in lines:
        said, _, words = line.partition("\t")
        site, off, how = (said.split(" ", 2) + ["", ""])[:3]
        out[int(site)] = (None, how, None) if off == "-" else (int(off, 16), how, words or None)
    return bid, out


def distinct(offsets):
    """{site: offset or None} with every offset that two sites were found at
    left out (None): which of them the call is, neither anchor knows. As
    the runtime drops them (plan_bind.c)."""
    taken = Counter(o for o in offsets.values() if o is not None)
    return {s: o if o is not None and taken[o] == 1 else None for s, o in offsets.items()}


def _module_for(plan, binary):
    """The plan module that `binary` is another build of: the one with its
    file name, else the plan's only module."""
    name = Path(binary).name
    named = [i for i, (_, path) in enumerate(plan["modules"]) if Path(path).name == name]
    if len(named) == 1:
        return named[0]
    if len(plan["modules"]) == 1:
        return 0
    raise CohortError(f"the plan names no module called {name} (its modules: "
                      + ", ".join(Path(p).name for _, p in plan["modules"]) + ")")


def rebase(plan, binary, min_kept=DEFAULT_MIN_KEPT):
    """The plan carried onto `binary`, another build of one of its modules:
    (the new plan's content as parse_plan gives it, and a report {"module",
    "old_build", "new_build", "sites": {site: (old offset, new offset or None,
    how or why)}, "selectors": (kept, of), "stale": bool}). Sites found again
    move; a site not found is dropped with the selectors and paths that
    name it, so what is left decides as before or not at all, never for
    another call. Below min_kept of the selectors kept (of the module's
    sites found, for a plan with no selector), the plan groups nothing
    (stale)."""
    m = _module_for(plan, binary)
    old_bid = plan["modules"][m][0]
    mine = [s for s, site in enumerate(plan["sites"]) if site[0] == m]
    anchored = {s: plan["anchors"][s] for s in mine if s in plan["anchors"]}
    new_bid, where = find(binary, anchored)
    report = {"module": m, "old_build": old_bid, "new_build": new_bid, "sites": {}}
    where = {s: where.get(s, (None, "the plan has no anchor for it", None)) for s in mine}
    moved = distinct({s: off for s, (off, _, _) in where.items()})
    for s, (off, how, _) in where.items():
        if off is not None and moved[s] is None:
            how = "found at the call another site was found at"
        report["sites"][s] = (plan["sites"][s][1], moved[s], how)
    same_build = new_bid == old_bid and new_bid not in (None, "-")
    if same_build:
        moved = {s: plan["sites"][s][1] for s in mine}   # nothing moves
        report["sites"] = {s: (o, o, "same build") for s, (o, _, _) in report["sites"].items()}
    kept_sites = [s for s in range(len(plan["sites"])) if s not in moved or moved[s] is not None]
    kept = set(kept_sites)
    # The selectors that name a site of this module, as the runtime counts them.
    selectors = [sites for _, sites in plan["selects"] if any(s in moved for s in sites)] + \
        [[s] for s in mine if plan["sites"][s][2] and plan["sites"][s][2].startswith("group=")]
    n_kept = sum(all(s in kept for s in sel) for sel in selectors)
    report["selectors"] = (n_kept, len(selectors))
    # A plan with no selector (its rest pool and verdicts alone) is judged by its sites.
    found, of = (n_kept, len(selectors)) if selectors else (sum(moved[s] is not None for s in mine), len(mine))
    report["stale"] = too_few(found, of, min_kept)
    new = dict(plan, anchors={}, sites=[], selects=[], paths={}, modules=list(plan["modules"]))
    new["modules"][m] = (None if new_bid == "-" else new_bid, str(Path(binary).resolve()))
    if report["stale"]:
        new["groups"], new["rest"], new["group_at"], new["unknown_entry"] = [], None, {}, "cold"
        return new, report
    index = {s: i for i, s in enumerate(kept_sites)}
    for s in kept_sites:
        mod, off, verdict, stop = plan["sites"][s]
        new["sites"].append((mod, moved.get(s, off), verdict, stop))
        if s in plan["anchors"] and s not in moved:
            new["anchors"][index[s]] = plan["anchors"][s]
    new["selects"] = [(g, [index[s] for s in sites]) for g, sites in plan["selects"]
                      if all(s in kept for s in sites)]
    new["paths"] = {tuple(index[s] for s in path): v for path, v in plan["paths"].items()
                    if all(s in kept for s in path)}
    # The moved sites' anchors as the new build has them: the next rebuild starts from this one.
    for s in mine:
        words = plan["anchors"].get(s) if same_build else where[s][2]
        if moved.get(s) is not None and words:
            new["anchors"][index[s]] = words
    return new, report


def summary(report, binary):
    """One line: what the rebase kept."""
    sites = report["sites"].values()
    found = sum(new is not None for _, new, _ in sites)
    kept, of = report["selectors"]
    text = (f"rebased onto {binary}: {found} of {len(sites)} call sites found, "
            f"{kept} of {of} selectors kept")
    if report["stale"]:
        text += " (too few: the plan groups nothing)"
    return text


def rebase_text(plan_path, binary, min_kept=DEFAULT_MIN_KEPT):
    """`cohort explain --plan P --binary B`: each of the plan's call sites in
    the module B is a build of, where its anchor finds it in B and how, or
    why not; then what the rebase keeps."""
    from cohort.plans import read_plan
    if not Path(binary).is_file():
        raise CohortError(f"{binary}: no such file")
    plan = read_plan(plan_path)
    _, report = rebase(plan, binary, min_kept)
    m = report["module"]
    out = [f"Plan {plan_path}, module {m} ({Path(plan['modules'][m][1]).name}, build {report['old_build'] or '-'})"
           f" in {binary} (build {report['new_build']}):"]
    for s, (old, new, how) in sorted(report["sites"].items()):
        words = dict(w.split("=", 1) for w in plan["anchors"].get(s, "").split() if "=" in w)
        call = f"  call {words['call'][2:]} in {words['in']}" if "call" in words and "in" in words else ""
        where = f"{new:#x}  {how}" if new is not None else f"dropped: {how}"
        out.append(f"  site {s:>3}  {old:#x} -> {where}{call}")
    out.append(summary(report, binary))
    return "\n".join(out) + "\n"


def rebase_command(plan_path, binary, output, force=False, min_kept=DEFAULT_MIN_KEPT):
    """`cohort plan --rebase BINARY PLAN -o OUT`: (the report, its summary)."""
    from cohort.plans import read_plan
    if min_kept not in range(101):
        raise CohortError("--min-kept must be a whole percent from 0 to 100")
    if not Path(binary).is_file():
        raise CohortError(f"{binary}: no such file")
    if Path(output).resolve() == Path(plan_path).resolve():
        raise CohortError(f"{output} is the plan being rebased: write the rebased plan elsewhere")
    plan = read_plan(plan_path)
    if not plan["anchors"]:
        raise CohortError(f"plan {plan_path} has no anchors (plans of format version 9 made by cohort plan "
                          "have them): make it again from its profile")
    new, report = rebase(plan, binary, min_kept)
    header = [f"# rebased by cohort plan --rebase onto {binary} from {plan_path}"]
    allocator = planfile.made_for(plan_path)
    if allocator:
        header.append(f"{planfile.ALLOCATOR_MARK} {allocator}")
    write_output(output, planfile.plan_text(new, header), "plan", force)
    return report, summary(report, binary)
