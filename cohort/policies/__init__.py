"""The grouping policies, in one registry that the planner, the CLI, bench
and tune learn them from: HALO's affinity grouping (halo), Automatic Pool
Allocation's data-structure graphs (apa), the hot-data-streams comparator
(hds, with sequitur), the rest pool alone (rest), and the runtime's online
policies (DPA's and MO's, which need no profile). families.py holds the
context families they group."""

from dataclasses import dataclass


# How a plan policy forms its groups, which the planner dispatches on:
# HALO's affinity graph, APA's data-structure graph, the heap trace's hot
# data streams, or no group at all (the rest pool alone).
AFFINITY, DS, STREAMS, NONE = "affinity", "ds", "streams", "none"


@dataclass(frozen=True)
class Policy:
    name: str
    grouping: str = AFFINITY   # how it forms groups (above); None for an online policy
    online: bool = False       # decided by the runtime as the program runs (docs/policies.md): no profile, no plan
    keeps_all: bool = False    # keeps every group it forms, as its paper does: no affinity or cost pruning,
                               # and no dropping of groups that do not transfer
    trace: bool = False        # its profile needs the heap reference trace (cohort profile --trace)
    ds_graph: bool = False     # it groups on the profile's DS graph (pointer stores between objects)


REGISTRY = (
    Policy("halo"),
    Policy("halo+ds", ds_graph=True),   # HALO's affinity, with the DS graph's traversals added to its edges
    Policy("apa-all", DS, keeps_all=True, ds_graph=True),
    Policy("apa-collections", DS, keeps_all=True, ds_graph=True),
    Policy("apa-maximal", DS, keeps_all=True, ds_graph=True),
    Policy("hds", STREAMS, keeps_all=True, trace=True),
    # No group: every small object in the rest pool, the control a plan's
    # groups must beat (as random placement and one pool for everything are
    # the runtime's): `cohort bench --policies halo,rest`, and a `cohort tune`
    # candidate.
    Policy("rest", NONE),
    Policy("dpa", None, online=True),
    Policy("mo", None, online=True),
)
BY_NAME = {p.name: p for p in REGISTRY}

PLAN_POLICIES = tuple(p.name for p in REGISTRY if not p.online)   # made into a plan from a profile
ONLINE_POLICIES = tuple(p.name for p in REGISTRY if p.online)
KEEP_ALL = tuple(p.name for p in REGISTRY if p.keeps_all)
DS_POLICIES = tuple(p.name for p in REGISTRY if p.ds_graph)
APA_POLICIES = tuple(p.name for p in REGISTRY if p.grouping == DS)


def grouping(name):
    """How the plan policy `name` forms its groups (AFFINITY, DS, STREAMS or
    NONE); None for an online policy or a name the registry does not hold."""
    p = BY_NAME.get(name)
    return p.grouping if p else None


def needs_trace(names):
    """Whether a profile for these policies must hold the heap trace."""
    return any(BY_NAME[n].trace for n in names if n in BY_NAME)
