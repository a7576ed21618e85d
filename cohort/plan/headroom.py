"""The headroom (issue 79): the share of a run's simulated cache misses that
fall on the objects Cohort can place, and so the most any placement could
remove, with the rest of the heap and everything else said apart.

The profiler feeds every data access of the run through one simulated
cache (profiler/loads.c) and counts its misses three ways: all of them
(`totals.run_d1_misses`, `run_ll_misses`), those on tracked objects (each
context's `d1_misses`, objects of up to `--max-size` bytes), and those on
other heap memory among the tracked objects (`heap_other_d1_misses`:
larger objects, the allocator's own data, freed blocks). What is left is
the stack, globals, and memory beyond the tracked objects' span. The first
count is exact; past the profiler's sample base (raw version 11 on) the
other two are estimates from the windows it analysed (profiler/sample.c),
and so is the share."""

from dataclasses import dataclass

# Below this share of the run's D1 misses on placeable objects, removing
# every one of them changes a run's time by less than this machine's
# timing noise between interleaved runs (a few percent): the line says to
# expect no measurable gain.
SMALL = 0.05


@dataclass
class Headroom:
    d1: int             # the whole run's simulated D1 misses
    ll: int
    tracked_d1: int     # on objects Cohort can place
    tracked_ll: int
    heap_d1: int        # on other heap memory among them
    max_size: int

    def share(self, part, whole):
        return part / whole if whole else 0.0

    @property
    def tracked(self):
        return self.share(self.tracked_d1, self.d1)


def of(profile):
    """The profile's Headroom, or None for one written before the profiler
    counted the whole run's misses."""
    t = profile.get("totals", {})
    if "run_d1_misses" not in t or any(c.get("d1_misses") is None for c in profile["contexts"]):
        return None
    return Headroom(d1=t["run_d1_misses"], ll=t["run_ll_misses"],
                    tracked_d1=sum(c["d1_misses"] for c in profile["contexts"]),
                    tracked_ll=sum(c.get("ll_misses", 0) for c in profile["contexts"]),
                    heap_d1=t.get("heap_other_d1_misses", 0), max_size=profile["parameters"]["max_size"])


def line(profile):
    """The one line `cohort optimize` and `cohort explain` open with."""
    h = of(profile)
    if h is None:
        return ("headroom: unknown (this profile was made before the profiler counted the whole run's "
                "misses; profile the program again to see it)")
    if not h.d1:
        return "headroom: the run missed the simulated D1 cache nowhere: no placement can remove a miss"
    other = max(0, h.d1 - h.tracked_d1 - h.heap_d1)
    text = (f"headroom: objects of up to {h.max_size} bytes took {h.tracked:.1%} of the run's simulated D1 "
            f"misses ({h.tracked_d1:,} of {h.d1:,}) and {h.share(h.tracked_ll, h.ll):.1%} "
            f"of its LL misses, the most any placement could remove; larger objects and the allocator's "
            f"own data among them {h.share(h.heap_d1, h.d1):.1%}, the stack, globals and the rest "
            f"{h.share(other, h.d1):.1%}")
    if h.tracked < SMALL:
        text += (f". At most {h.tracked:.0%} of D1 misses are on small heap objects: expect no measurable "
                 f"gain from any plan")
    return text
