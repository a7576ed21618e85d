"""A group's worth at the scale the plan runs at (docs/planner.md, "A miss at
the run's scale").

Users profile a small input and run large ones. On the training run a
structure that a program walks may fit in L2, where an avoided miss saves a
few ns; on the production input the same structure is several times larger
than the last-level cache, each avoided miss saves a trip to memory, and the
structure is walked more often per object. Both figures of a group's worth,
what its placement saves and what identifying its objects costs, are
therefore priced at the run the plan is for, not at the training run:

- the *scale*: the production run's size over the training run's, in
  allocations (`--scale S`; else DEFAULT_SCALE);
- the *growth* of each context's allocations, accesses and bytes, and of
  the run's accesses and live bytes, with that scale: in proportion to it by
  default, or fitted from two training runs of different sizes (`fit`);
- the *distance* between two touches of one of a group's lines there, in
  bytes of other data, which names the cache level that serves a miss on
  it, and so the *price* of an avoided miss (`Machine`, from the machine's
  own cache sizes and latencies measured on this machine kind).
"""

import math
import os
from dataclasses import dataclass

from cohort.errors import CohortError

# The production run over the training run when the user gives no scale and
# only one run: users profile a tenth of their input or less (HALO's own
# evaluation profiles SPEC's test inputs and measures on ref ones, which are
# larger still). A plan priced at the training run's own scale drops the
# groups that pay where it runs (docs/planner.md, "A miss at the run's scale").
DEFAULT_SCALE = 10.0

# Fitted growth exponents are kept within these: a context's figures do not
# shrink as its input grows, and a power above two fitted from two runs says
# more about noise in small counts than about the program.
MIN_EXPONENT, MAX_EXPONENT = 0.0, 2.0

# Two runs whose allocations differ by less than this factor cannot tell
# growth from noise: their sizes are too close to fit anything.
MIN_FIT_RATIO = 1.5

# What one dependent load costs here, in ns, with its line in each level
# (`build/tools/cohort-latency -r 9 SIZE_KIB...`: a random cycle of one
# pointer per line, median of 9 rounds, 2026-11-29, AMD EPYC under KVM):
# 1.1 in 16 KiB (L1), 3.9 to 5.0 in 64 to 512 KiB (L2), 13.3 to 16.4 in 2 to
# 4 MiB (L3), 150 to 200 from 24 MiB on (memory; the VM's share of the
# 32 MiB L3 ends near 6 MiB, where 56 ns is measured already). An avoided
# miss saves the level's latency over L1's; L2's is the planner's
# --miss-cost (3.5, measured the same way).
L1_NS = 1.1
LEVEL_NS = {3: 14.0}
MEMORY_NS = 150.0

# The simulated caches of the profiler (profiler/profiler.h), and of
# cachegrind's fixed geometry: the machine's when sysfs says nothing.
FALLBACK_SIZES = {1: 32 << 10, 2: 1 << 20}

CACHE_ROOT = "/sys/devices/system/cpu/cpu0/cache"


def cache_sizes(root=CACHE_ROOT):
    """{level: bytes} of the data caches of this machine's first processor,
    from sysfs (FALLBACK_SIZES when it cannot be read)."""
    sizes = {}
    try:
        for entry in sorted(os.listdir(root)):
            if not entry.startswith("index"):
                continue
            path = os.path.join(root, entry)
            with open(os.path.join(path, "type")) as f:
                kind = f.read().strip()
            if kind not in ("Data", "Unified"):
                continue
            with open(os.path.join(path, "level")) as f:
                level = int(f.read())
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip()
            unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            sizes[level] = int(text.rstrip("KMG")) * unit
    except (OSError, ValueError):
        return dict(FALLBACK_SIZES)
    return sizes if 1 in sizes else dict(FALLBACK_SIZES)


@dataclass(frozen=True)
class Machine:
    """The caches a miss may be served from: [(level, bytes, ns saved by an
    avoided L1 miss served there)], smallest first, and memory's saving."""
    levels: tuple
    memory_ns: float

    @classmethod
    def here(cls, costs, sizes=None):
        """This machine's levels (sysfs), priced: L2 at the planner's
        miss_ns, L3 and memory at what cohort-latency measures here."""
        sizes = cache_sizes() if sizes is None else sizes
        levels = []
        for level in sorted(sizes):
            if level == 1:
                continue
            ns = costs["miss_ns"] if level == 2 else LEVEL_NS.get(level, MEMORY_NS) - L1_NS
            levels.append((level, sizes[level], ns))
        return cls(levels=tuple(levels), memory_ns=MEMORY_NS - L1_NS), sizes[1]

    def serves(self, distance):
        """(name, ns) of the level that serves a miss on a line touched
        again after `distance` bytes of other data: the first that holds it."""
        for level, size, ns in self.levels:
            if distance <= size:
                return f"L{level}", ns
        return "memory", self.memory_ns


@dataclass
class Growth:
    """How a run's figures grow from the training run to the run a plan is
    for: the scale (allocations there over allocations in training), and the
    power of it that each context's allocations, accesses and bytes, and the
    run's accesses and live bytes, grow by (1: in proportion)."""
    scale: float = DEFAULT_SCALE
    source: str = "default"            # "default", "--scale", "relative" (a validation run's), or the run fitted on
    contexts: dict = None               # {context id: (allocations, accesses, bytes) exponents}; None: all 1
    run: tuple = (1.0, 1.0)             # (accesses, live bytes) exponents of the run

    def describe(self):
        if self.source == "default":
            return f"at {self.scale:g} times the profiled run (the default: no --scale)"
        if self.source == "--scale":
            return f"at {self.scale:g} times the profiled run (--scale)"
        if self.source == "relative":
            return f"at {self.scale:g} times this run (the plan's scale over this run's size)"
        return f"at {self.scale:g} times the profiled run, growth fitted on {self.source}"

    def factor(self, exponent):
        return self.scale ** exponent

    def context_factors(self, contexts, ids):
        """(allocations, accesses, lines) factors of the given contexts
        together: each context's figure grown by its own power, summed."""
        if not self.contexts:
            return self.scale, self.scale, self.scale
        out = []
        for k, field in enumerate(("allocations", "accesses", "bytes")):
            base = sum(contexts[c].get(field, 0) for c in ids)
            grown = sum(contexts[c].get(field, 0) * self.factor(self.contexts.get(c, (1.0,) * 3)[k])
                        for c in ids)
            out.append(grown / base if base else self.scale)
        return tuple(out)


def uniform(scale=None):
    """Growth in proportion to the scale: the user's, or the default."""
    if scale is None:
        return Growth()
    return Growth(scale=float(scale), source="--scale")


def check_scale(text):
    """The --scale the user gave, as a number of at least 1; CohortError else."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = None
    if value is None or not math.isfinite(value) or value < 1:
        raise CohortError(f"a scale is a number of at least 1 (the production input's size over the "
                          f"training input's), not '{text}'")
    return value


def exponent(small, large, ratio):
    """The power of `ratio` that takes `small` to `large`, within bounds."""
    if small <= 0 or large <= 0:
        return 1.0
    return min(MAX_EXPONENT, max(MIN_EXPONENT, math.log(large / small) / math.log(ratio)))


def fit(train, other, keys, scale=None):
    """Growth fitted on two training runs of different sizes: `train` (the
    profile the plan is made from) and `other` (a larger or smaller run of
    the same program). `keys`: (train keys, other keys) naming each
    context's family the same in both (transfer.family_keys). Each context
    grows as its family did between the runs; a family the other run did
    not show keeps the run's own growth. Returns None when the runs' sizes
    are too close (MIN_FIT_RATIO) to tell growth from noise."""
    total = sum(c["allocations"] for c in train["contexts"])
    total_other = sum(c["allocations"] for c in other["contexts"])
    if not total or not total_other:
        return None
    ratio = total_other / total
    if max(ratio, 1 / ratio) < MIN_FIT_RATIO:
        return None
    train_keys, other_keys = keys
    families = {}
    for run, names, slot in ((train, train_keys, 0), (other, other_keys, 1)):
        for c in run["contexts"]:
            f = families.setdefault(names[c["id"]], [[0, 0, 0], [0, 0, 0]])
            for k, field in enumerate(("allocations", "accesses", "bytes")):
                f[slot][k] += c.get(field, 0)
    everything = (sum(c.get("accesses", 0) for c in train["contexts"]),
                  sum(c.get("accesses", 0) for c in other["contexts"]))
    live = (train.get("totals", {}).get("peak_live_bytes", 0), other.get("totals", {}).get("peak_live_bytes", 0))
    run = (exponent(*everything, ratio), exponent(*live, ratio))
    contexts = {}
    for c in train["contexts"]:
        small, large = families[train_keys[c["id"]]]
        if not large[0]:
            contexts[c["id"]] = (run[1], run[0], run[1])
            continue
        contexts[c["id"]] = tuple(exponent(small[k], large[k], ratio) for k in range(3))
    name = " ".join(other["target"]["argv"])
    return Growth(scale=scale if scale is not None else max(DEFAULT_SCALE, ratio), source=f"`{name}`",
                  contexts=contexts, run=run)


@dataclass
class AtScale:
    """A group's figures at the run a plan is for."""
    growth: Growth
    allocations: float      # factor on its allocations (and the decisions and stub calls they need)
    accesses: float         # factor on its accesses and affinity
    lines: float            # factor on its lines
    distance: float         # bytes of other data between two touches of one of its lines there (None: unknown)
    level: str              # the cache level that serves a miss on it there
    miss_ns: float          # what an avoided miss saves there
    cached: bool            # its lines stay in L1 there

    def clause(self):
        """For the texts that quote a saving."""
        if self.cached:
            where = "its lines stay in L1"
        else:
            where = f"a miss on its objects is served by {self.level}, {self.miss_ns:.1f} ns"
        if self.distance is None:
            return f"; {self.growth.describe()}, the profile does not say how far apart its touches are: {where}"
        return (f"; {self.growth.describe()} its objects are touched again after about "
                f"{_bytes(self.distance)} of other data: {where}")


def _bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def at_scale(growth, machine, l1_bytes, contexts, ids, misses, live_bytes, stayed):
    """Where a group of the given contexts stands at the growth's scale.
    misses: transfer.context_misses of its objects in training (D1 misses,
    lines, touch gap in accesses), or None; live_bytes: the training run's
    peak live bytes; stayed: whether its objects stayed in the cache in
    training (transfer.stays_cached). The distance between two touches of
    one of its lines is the touch gap (accesses to tracked objects in
    between, each at most a line of other data) grown with the run's
    accesses and the group's lines over its accesses, and at most the run's
    live bytes there. Whether its objects stay in L1 there: with growth
    fitted on two runs, from that distance; in proportion to the scale, as
    in training, since a structure whose objects stayed in the cache in
    training is most often one whose number does not grow with the input
    (a parser's state), and the proportional guess would move it out."""
    allocations, accesses, lines = growth.context_factors(contexts, ids)
    run_accesses, run_live = growth.factor(growth.run[0]), growth.factor(growth.run[1])
    live = live_bytes * run_live if live_bytes else None
    gap = misses[2] if misses is not None else None
    if gap is not None:
        distance = gap * 64 * run_accesses * lines / accesses
        if live is not None:
            distance = min(distance, live)
    else:
        distance = live
    if growth.contexts is None:
        cached = stayed
    else:
        cached = misses is not None and (misses[0] <= misses[1] or (gap is not None and distance <= l1_bytes))
    # The few misses of objects that stay in the cache are their first
    # touches and rare bursts, priced as misses to the next level.
    level, ns = machine.serves(0.0 if cached else distance or 0.0)
    return AtScale(growth=growth, allocations=allocations, accesses=accesses, lines=lines, distance=distance,
                   level=level, miss_ns=ns, cached=cached)


@dataclass
class Pricing:
    """What the planner prices a profile's groups with: how its figures
    grow to the run the plan is for, and the machine's caches there."""
    growth: Growth
    machine: Machine
    l1_bytes: int
    live_bytes: int         # the profiled run's peak live bytes

    @classmethod
    def of(cls, profile, costs, growth=None, sizes=None):
        machine, l1 = Machine.here(costs, sizes)
        return cls(growth=growth or uniform(), machine=machine, l1_bytes=l1,
                   live_bytes=profile.get("totals", {}).get("peak_live_bytes", 0))

    def at(self, contexts, ids, misses, stayed):
        return at_scale(self.growth, self.machine, self.l1_bytes, contexts, ids, misses, self.live_bytes, stayed)

    def allocations(self, contexts, ids):
        """The factor on the allocations of the contexts `ids` where the
        plan runs. What a group's runtime does to the allocations it does not
        take (hands them on, decides them at their entry, walks past the
        system frames they enter through) grows as those contexts do, not as
        the group's own: a group whose objects do not grow with the input
        still pays for every other allocation of a run that does."""
        return self.growth.context_factors(contexts, ids)[0] if ids else self.growth.scale

    def relative(self, profile, train_allocations):
        """The same pricing for another run of the program (a validation
        run): its own live bytes, the scale taken from its size, in
        proportion (at least 1)."""
        allocations = sum(c["allocations"] for c in profile["contexts"])
        ratio = allocations / train_allocations if train_allocations else 1.0
        growth = Growth(scale=max(1.0, self.growth.scale / ratio) if ratio else self.growth.scale,
                        source="relative")
        return Pricing(growth=growth, machine=self.machine, l1_bytes=self.l1_bytes,
                       live_bytes=profile.get("totals", {}).get("peak_live_bytes", 0))
