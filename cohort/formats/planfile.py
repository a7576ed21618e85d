"""The plan file (docs/plan-format.md) as the CLI reads it.

Whether a plan is valid is decided by the runtime's own parser
(runtime/plan/plan.c, run as build/tools/cohort-plan-check: plans.py), so the
CLI and the runtime cannot disagree; parse_plan then reads the structure the
planner and `cohort explain` use, tokenising lines exactly as the runtime
does (split at '\n' only, words separated by spaces and tabs). Nothing here
runs a process."""

import re
from pathlib import Path

from cohort.errors import CohortError

PLAN_VERSION = 9        # the version written; 1 to 8 are still read
# The comment that names the allocator a plan was made to run in front of
# (its rest pool was decided for it: docs/planner.md, "The rest pool against
# the allocator underneath"); the runtime reads no comment.
ALLOCATOR_MARK = "# made for allocator"
NOTE_MARK = "# note:"

MAX_PATH = 32           # runtime/plan/plan.h CH_MAX_PATH: sites in one path
MAX_NODES = 4095        # CH_MAX_NODES less the root: nodes of the paths' trie
_BLANKS = re.compile(r"[ \t]+")


def header_comments(path):
    """The comment lines of a plan file's header (before its first line
    that is not one, after `cohort-plan`); [] where it cannot be read."""
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("#"):
                    out.append(line.rstrip("\n"))
                elif line.strip() and not line.startswith("cohort-plan"):
                    break
    except OSError:
        return []
    return out


def made_for(path):
    """The allocator a plan file was made for, or None (older plans, and
    plans written by hand, do not say)."""
    for line in header_comments(path):
        if line.startswith(ALLOCATOR_MARK):
            words = line[len(ALLOCATOR_MARK):].split()
            return words[0] if words else None
    return None


def notes_of(path):
    """The planner's verdicts a plan file carries (cohort plan writes one
    `# note:` line each: a group kept or dropped and why, the rest pool's
    shape): [] for older plans, plans written by hand and rebased ones."""
    return [line[len(NOTE_MARK):].strip() for line in header_comments(path) if line.startswith(NOTE_MARK)]


def plan_argument(path, what="--plan"):
    """The plan file a command-line argument names: the file itself, or, for
    a directory that `cohort optimize` or `cohort bench --train` filled, its
    plan (returns (path, note about that or None))."""
    path = Path(path)
    if path.is_dir():
        inner = path / "plan"
        if inner.is_file():
            return inner, f"{what} {path} is a directory: using {inner}"
        raise CohortError(f"{what} {path} is a directory with no plan in it "
                          "(name the plan file, e.g. DIR/plan from cohort optimize -o DIR)")
    return path, None


def parse_plan(path, version):
    """The content of a plan of this format version that the runtime's own
    parser has accepted (plans.read_plan checks it first): {"modules": [(build_id, path)], "sites": [(module, offset, verdict,
    stop)], "groups": [name], "selects": [(group, [site])], "max_size": n, "unknown_entry": s,
    "unknown_path": s, "rest": group index or None, "rest_max": bytes or None,
    "rest_one": the rest group stays one pool (version 7), "paths": {(site, ...): verdict},
    "group_at": {group: bytes into a line its line-sized blocks start} (version 8),
    "anchors": {site: the words of its anchor line} (version 9),
    "path_prefixes": every proper beginning of a path (the trie's inner nodes)}.
    verdict is None, "cold", "walk", "next" or "group=G"; stop is a group index or None;
    a path's verdict is "cold", "next" or "group=G".
    Raises CohortError naming the line for anything malformed."""
    plan = {"modules": [], "sites": [], "groups": [], "selects": [], "max_size": 4096,
            "unknown_entry": "walk", "unknown_path": "walk", "rest": None, "rest_max": None, "rest_one": False,
            "paths": {}, "path_prefixes": set(), "group_at": {}, "anchors": {}}
    prefixes = plan["path_prefixes"]
    header = False
    for n, raw in enumerate(Path(path).read_bytes().decode("utf-8", "replace").split("\n"), start=1):
        line = raw.split("#", 1)[0].rstrip(" \t\r").lstrip(" \t")
        words = _BLANKS.split(line) if line else []
        if not words:
            continue
        if not header:
            header = True
            continue

        def bad(why):
            return CohortError(f"plan {path} line {n}: {why}")

        try:
            if words[0] == "end":
                return plan
            if words[0] == "max-size":
                plan["max_size"] = int(words[1], 10)
            elif words[0] == "module":
                if int(words[1]) != len(plan["modules"]):
                    raise bad("modules must be numbered in order")
                path_text = _BLANKS.split(line, 3)[3]
                plan["modules"].append((None if words[2] == "-" else words[2], path_text))
            elif words[0] == "site":
                if int(words[1]) != len(plan["sites"]) or not 0 <= int(words[2]) < len(plan["modules"]):
                    raise bad("site out of order or naming an undeclared module")
                verdict, stop = None, None
                for w in words[4:]:
                    if w.startswith("stop=") and stop is None and version >= 3:
                        stop = int(w[5:])
                    elif (w in ("cold", "walk") or (w.startswith("group=") and version >= 2)
                          or (w == "next" and version >= 4)) and verdict is None:
                        verdict = w
                    else:
                        raise bad(f"unexpected '{w}' on a site line")
                plan["sites"].append((int(words[2]), int(words[3], 16), verdict, stop))
            elif words[0] == "anchor" and version >= 9:
                site = int(words[1])
                if not 0 <= site < len(plan["sites"]) or site in plan["anchors"] or len(words) < 3:
                    raise bad("anchor names an undeclared site, or one anchored already")
                plan["anchors"][site] = " ".join(words[2:])
            elif words[0] == "group":
                if int(words[1]) != len(plan["groups"]):
                    raise bad("groups must be numbered in order")
                options = words[3:]
                # digits only, as the runtime reads a number: at=032 is 32
                at = options[0][3:] if options else ""
                if options and (version < 8 or len(options) > 1 or not options[0].startswith("at=") or
                                not at or not all("0" <= ch <= "9" for ch in at) or int(at) not in (0, 16, 32, 48)):
                    raise bad("group takes one option, at=0, 16, 32 or 48" if version >= 8
                              else "group name must be one word")
                if options:
                    plan["group_at"][len(plan["groups"])] = int(at)
                plan["groups"].append(words[2])
            elif words[0] == "select":
                g, sites = int(words[1]), [int(w) for w in words[2:]]
                if not 0 <= g < len(plan["groups"]) or not sites or \
                        not all(0 <= s < len(plan["sites"]) for s in sites):
                    raise bad("select names an undeclared group or site")
                plan["selects"].append((g, sites))
            elif words[0] == "rest" and version >= 4:
                options = words[2:]
                maxes = [w for w in options if w.startswith("max=")]
                ones = [w for w in options if w == "one"] if version >= 7 else []
                if plan["rest"] is not None or len(words) < 2 or \
                        not 0 <= int(words[1]) < len(plan["groups"]) or \
                        len(maxes) > 1 or len(ones) > 1 or len(maxes) + len(ones) != len(options):
                    raise bad("rest names an undeclared group, comes twice, or has an unknown option")
                plan["rest"] = int(words[1])
                plan["rest_max"] = int(maxes[0][4:]) if maxes else None
                plan["rest_one"] = bool(ones)
            elif words[0] == "path" and version >= 5:
                *sites, verdict = words[1:]
                sites = tuple(int(w) for w in sites)
                if not 2 <= len(sites) <= MAX_PATH or len(set(sites)) != len(sites) or \
                        not all(0 <= s < len(plan["sites"]) for s in sites):
                    raise bad(f"a path holds 2 to {MAX_PATH} distinct declared sites")
                if not (verdict in ("cold", "next") or (verdict.startswith("group=")
                                                         and 0 <= int(verdict[6:]) < len(plan["groups"]))):
                    raise bad(f"a path ends in 'group=G' (a declared group), 'cold' or 'next', not '{verdict}'")
                if plan["sites"][sites[0]][2] not in (None, "walk"):
                    raise bad(f"path enters at site {sites[0]}, whose own verdict already decides")
                if any(sites[:k] in plan["paths"] for k in range(2, len(sites))):
                    raise bad("path goes on past a decided path")
                if sites in plan["paths"]:
                    raise bad("path decided twice")
                if sites in prefixes:
                    raise bad("path decides where a longer path goes on")
                prefixes.update(sites[:k] for k in range(1, len(sites)))
                if len(prefixes) + len(plan["paths"]) > MAX_NODES:
                    raise bad(f"more than {MAX_NODES} path nodes")
                plan["paths"][sites] = verdict
            elif words[0] == "unknown-entry":
                plan["unknown_entry"] = words[1]
            elif words[0] == "unknown-path" and version >= 6:
                plan["unknown_path"] = words[1]
            else:
                raise bad(f"unknown directive '{words[0]}'")
        except (IndexError, ValueError):
            raise bad(f"malformed '{words[0]}' line") from None
    raise CohortError(f"plan {path}: truncated (no 'end' line)")


def plan_text(plan, header=(), version=PLAN_VERSION, notes=None):
    """A plan's text from its content in parse_plan's form: the one writer
    of the grammar (cohort plan, plan --rebase, the tests' plans by hand),
    which the runtime's parser reads back. header: comment lines after the
    first; notes: {("site" or "group", index): a comment for its line}.
    A "max_size", "unknown_entry" or "unknown_path" of None, and a
    "rest_max" of None, leave their line or word out (the runtime's
    defaults); a key that is missing counts as None, or as empty. "paths"
    may also be a list of (sites, verdict), which a test's plan may repeat."""
    notes = notes or {}

    def noted(kind, i, text):
        note = notes.get((kind, i))
        return text if note is None else f"{text}  # {note}"

    lines = [f"cohort-plan {version}", *header]
    if plan.get("max_size") is not None:
        lines.append(f"max-size {plan['max_size']}")
    for i, (build, path) in enumerate(plan["modules"]):
        lines.append(f"module {i} {build or '-'} {path}")
    for i, (mod, off, verdict, stop) in enumerate(plan["sites"]):
        words = [verdict, None if stop is None else f"stop={stop}"]
        lines.append(noted("site", i, f"site {i} {mod} {off:#x}" + "".join(f" {w}" for w in words if w)))
    lines += [f"anchor {s} {w}" for s, w in sorted((plan.get("anchors") or {}).items())]
    at = plan.get("group_at") or {}
    for i, name in enumerate(plan["groups"]):
        lines.append(noted("group", i, f"group {i} {name}" + (f" at={at[i]}" if i in at else "")))
    lines += [f"select {g} " + " ".join(map(str, sites)) for g, sites in plan["selects"]]
    if plan.get("rest") is not None:
        lines.append(f"rest {plan['rest']}" + (f" max={plan['rest_max']}" if plan.get("rest_max") else "")
                     + (" one" if plan.get("rest_one") else ""))
    paths = plan.get("paths") or {}
    lines += ["path " + " ".join(map(str, p)) + f" {v}" for p, v in (paths.items() if isinstance(paths, dict) else paths)]
    lines += [f"{word} {plan[key]}" for word, key in (("unknown-entry", "unknown_entry"),
                                                      ("unknown-path", "unknown_path"))
              if plan.get(key) is not None]
    lines.append("end")
    return "\n".join(lines) + "\n"


def decide(plan, sites, size=None, patched=False):
    """The group the runtime gives an allocation whose application call
    sites, innermost first, are `sites` (plan site indexes, None for a site
    the plan does not name), or None: the quick test on the innermost site,
    then the walk (`_walk`), then the selectors, first match; what nothing
    claims goes to the rest group, if any and if `size` (the request, if
    known) is within its max (docs/plan-format.md). `patched`: the runtime
    has patched every selector and stop site, so the bits their activations
    set decide, as a walk to the end would: the decision paths, a shortcut
    of the walk, are not taken."""
    rest = plan.get("rest")
    if rest is not None and size is not None and plan.get("rest_max") is not None and size > plan["rest_max"]:
        rest = None

    def outcome(verdict):
        return int(verdict[6:]) if verdict.startswith("group=") else None if verdict == "next" else rest

    if not sites:
        return rest
    verdict = _entry_verdict(plan, sites)
    if verdict != "walk":
        return outcome(verdict)
    how, what, _ = _walk(plan, sites, use_paths=not patched)
    if how == "path":
        return outcome(what)
    if how == "stop":
        return what
    present = set(sites)
    return next((g for g, conj in plan["selects"] if all(s in present for s in conj)), rest)


def walk_length(plan, sites):
    """Frames the runtime's walk looks at for these sites (as for decide(),
    the entry included), or None when the quick test decides at the entry:
    to the end of a decision path or a stop site, else the whole stack and
    the two start-up frames below main."""
    if not sites or _entry_verdict(plan, sites) != "walk":
        return None
    how, _, i = _walk(plan, sites)
    return i + 1 if how != "full" else len(sites) + 2


def _entry_verdict(plan, sites):
    """What the quick test says of the innermost site: "walk", "cold",
    "next" or "group=G"."""
    first = plan["sites"][sites[0]] if sites[0] is not None else None
    return (first[2] if first else None) or plan["unknown_entry"]


def leaves_paths(plan, sites):
    """Whether the runtime's walk for these sites enters the decision paths
    and then leaves them before they decide: a stack the profile never
    showed past that point (what `unknown-path` is about)."""
    if not sites or not plan.get("paths") or _entry_verdict(plan, sites) != "walk":
        return False
    return _follow(plan, sites)[0] == "left"


def _follow(plan, sites):
    """The decision paths from the entry outwards: ("path", verdict, i),
    ("stop", group, i), ("left", None, i) where a stack that had entered
    them leaves at sites[i], or ("off", None, i) where the walk goes on past
    them (the entry begins no path, or the stack ends on them)."""
    paths, starts = plan.get("paths") or {}, plan.get("path_prefixes") or set()
    met, i = [], 0
    for i, s in enumerate(sites):
        if s is not None and s in met:
            continue
        if s is None or (tuple(met + [s]) not in starts and tuple(met + [s]) not in paths):
            if s is not None and plan["sites"][s][3] is not None:
                return "stop", plan["sites"][s][3], i   # where the planner left a path to the stop
            return ("left" if met else "off"), None, i
        met.append(s)
        if tuple(met) in paths:
            return "path", paths[tuple(met)], i
        if plan["sites"][s][3] is not None:
            return "stop", plan["sites"][s][3], i
    return "off", None, i


def _walk(plan, sites, use_paths=True):
    """The runtime's walk past the quick test, as (how, what, index):
    ("path", verdict, i) where a decision path ends at sites[i],
    ("stop", group, i) where a stop site ends it, or ("full", None, None)
    when it reaches the outermost frame. The paths (version 5) are followed
    from the entry outwards, passing over sites met before, while the sites
    met are a path's beginning; a stop site met on the way ends the walk
    too. Where the paths no longer lead, the walk ends there ("path",
    "cold") under unknown-path cold (version 6), else goes on to the first
    stop site."""
    leave = 0
    if use_paths and plan.get("paths"):
        how, what, leave = _follow(plan, sites)
        if how in ("path", "stop"):
            return how, what, leave
        if how == "left" and plan.get("unknown_path") == "cold":   # version 6: the walk ends there
            return "path", "cold", leave
    for i, s in enumerate(sites[leave:], start=leave):
        if s is not None and plan["sites"][s][3] is not None:
            return "stop", plan["sites"][s][3], i
    return "full", None, None
