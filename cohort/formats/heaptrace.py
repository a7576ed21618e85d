"""The heap reference trace that the profiler writes with --cohort-trace
(profiler/trace.c; docs/profile-format.md, "The heap reference trace"): the
input of the hds comparator's analysis (hotstreams.py)."""

import struct
from array import array
from dataclasses import dataclass

MAGIC = b"CHTRACE1"
HEAD = struct.Struct("<8sIIQII")   # magic, burst, period, macro accesses seen, objects, references


@dataclass
class Trace:
    burst: int          # macro accesses per burst
    period: int         # one burst in `period` was kept (1: the whole run)
    seen: int           # macro accesses in the run
    contexts: array     # per object index: its allocation context
    sizes: array        # per object index: its size in bytes
    refs: array         # the references, as object indices


def parse(data):
    """A Trace from the file's bytes. Raises ValueError if it is not one."""
    if len(data) < HEAD.size or data[:8] != MAGIC:
        raise ValueError("not a heap trace from Cohort's tool")
    _, burst, period, seen, n_objs, n_refs = HEAD.unpack_from(data)
    if len(data) != HEAD.size + 8 * n_objs + 4 * n_refs:
        raise ValueError(f"{len(data)} bytes, not the {HEAD.size + 8 * n_objs + 4 * n_refs} its "
                         f"header announces (truncated?)")
    if burst < 1 or period < 1:
        raise ValueError("burst and period must be positive")
    pairs = array("I")
    pairs.frombytes(data[HEAD.size:HEAD.size + 8 * n_objs])
    refs = array("I")
    refs.frombytes(data[HEAD.size + 8 * n_objs:])
    if refs and max(refs) >= n_objs:
        raise ValueError(f"a reference to object {max(refs)} of {n_objs}")
    return Trace(burst, period, seen, pairs[0::2], pairs[1::2], refs)


def read(path):
    with open(path, "rb") as f:
        return parse(f.read())


def encode(trace):
    """The file's bytes for a Trace (tests write traces with known answers)."""
    pairs = array("I", [0]) * (2 * len(trace.contexts))
    pairs[0::2] = array("I", trace.contexts)
    pairs[1::2] = array("I", trace.sizes)
    return (HEAD.pack(MAGIC, trace.burst, trace.period, trace.seen, len(trace.contexts), len(trace.refs))
            + pairs.tobytes() + array("I", trace.refs).tobytes())
