"""Every file a command writes goes through here, under one rule: the path is
new, or holds a file of the same kind that Cohort wrote (recognised by its
content), or the user said --force. Writes go beside the destination and
are renamed over it, so that a crash never leaves half of a file, and every
output gets the same permissions as any new file (0644 under the usual
umask). The runtime's statistics writer (runtime/report/stats.c) applies the same
rule to COHORT_STATS.

Directories a command creates for its outputs are removed again if the
command fails and they are still empty (made_dirs)."""

import codecs
import contextlib
import os
import re
import tempfile
from pathlib import Path

from cohort.errors import CohortError

HEAD = 4096   # how much of a file the recognisers read


def _escape(e):
    """Encoding error handler for text Cohort writes: a byte that was not
    UTF-8 (Python holds it as U+DC80..U+DCFF) becomes \\xNN, as the user
    would write it; any other unencodable character \\uXXXX."""
    bad = e.object[e.start:e.end]
    return "".join(f"\\x{ord(c) - 0xdc00:02x}" if 0xdc80 <= ord(c) <= 0xdcff
                   else c.encode("ascii", "backslashreplace").decode() for c in bad), e.end


ESCAPE = "cohort-escape"
codecs.register_error(ESCAPE, _escape)


def _json_format(name):
    pattern = re.compile(rb'\A\s*\{\s*"format"\s*:\s*"' + re.escape(name.encode()) + rb'"')
    return lambda head: bool(pattern.match(head))


# Marks the writers put into their files, for the recognisers below.
REPORT_MARK = "<!-- written by cohort report -->"
GRAPH_MARK = "<!-- drawn by cohort explain -->"
PLOT_SOFTWARE = "cohort"

# kind -> (what it is called in messages, recogniser of the first HEAD bytes)
KINDS = {
    "profile": ("a profile", _json_format("cohort-profile")),
    "plan": ("a plan", lambda h: h.startswith(b"cohort-plan ")),
    "stats": ("runtime statistics", _json_format("cohort-stats")),
    "results": ("bench results", _json_format("cohort-results")),
    "loads": ("a loads measurement", _json_format("cohort-loads")),
    "prefetch": ("a prefetch file", lambda h: h.startswith(b"cohort-prefetch ")),
    "report": ("a report", lambda h: h.startswith(REPORT_MARK.encode())),
    # since 2026-11-29 opened by the headroom line (headroom.py)
    "explain": ("an explanation", lambda h: h.startswith(b"Profile of: ") or
                (h.startswith(b"headroom: ") and b"\n\nProfile of: " in h)),
    "graph": ("an affinity graph", lambda h: GRAPH_MARK.encode() in h),
    # PNGs carry a tEXt chunk "Software" = "cohort ..." (plots.py writes it)
    "plot": ("a plot", lambda h: h.startswith(b"\x89PNG") and b"Software\x00" + PLOT_SOFTWARE.encode() in h),
}

# The files `cohort optimize` (and `cohort bench --train`) put into a directory.
OPTIMIZE_PRODUCTS = {"profile.json": "profile", "plan": "plan", "explain.txt": "explain", "graph.svg": "graph"}


def kind_of(path):
    """The kind of Cohort file at path, or None (not ours, or unreadable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD)
    except OSError:
        return None
    for kind, (_, recognise) in KINDS.items():
        if recognise(head):
            return kind
    return None


def claim(path, kind, force=False, option="--force"):
    """Raise CohortError unless path may be written as a file of this kind:
    it does not exist, it is a file of this kind that Cohort wrote, or
    force. A directory or a device is never replaced."""
    path = Path(path)
    if not os.path.lexists(path):
        if not path.parent.is_dir():
            raise CohortError(f"cannot write {path}: no directory {path.parent}")
        return
    if path.is_dir():
        raise CohortError(f"{path} is a directory (name a file to write)")
    if path.exists() and not path.is_file():
        raise CohortError(f"{path} is not a regular file; cohort will not replace it")
    if force:
        return
    found = kind_of(path)
    if found == kind:
        return
    what = KINDS[kind][0]
    if found is not None:
        raise CohortError(f"{path} is {KINDS[found][0]} that cohort wrote, not {what}; not replacing it "
                          f"(choose another name, or {option} to replace it)")
    raise CohortError(f"{path} exists and is not {what} that cohort wrote; not replacing it "
                      f"(choose another name, or {option} to replace it)")


def write_atomically(path, data):
    """Write text or bytes to path through a temporary file beside it, with
    the permissions of a new file (0666 less the umask)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8", ESCAPE) if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_output(path, data, kind, force=False):
    """claim, then write_atomically."""
    claim(path, kind, force)
    write_atomically(path, data)


@contextlib.contextmanager
def made_dirs(path):
    """Create directory path (and its missing parents); if the block fails,
    remove again those of them that are still empty."""
    path = Path(path)
    created = []
    p = path
    while not os.path.lexists(p):
        created.append(p)
        if p.parent == p:
            break
        p = p.parent
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    except BaseException:
        for d in created:          # deepest first
            try:
                d.rmdir()
            except OSError:        # not empty (a product worth keeping), or gone
                break
        raise
