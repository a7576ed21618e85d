"""Where in its line a group's blocks of whole lines start (plan version 8,
`at=K`): the profile's model of each place, priced, and the rest pool's
blocks too (docs/planner.md, "Where in its line a block starts")."""

from cohort.plan import transfer
from cohort.plan.rest import add_rest

# Where profiler/lines.c models a line-sized block (profile.LINE_OFFSETS):
# where the rest pool packs it, then 0, 16, 32 and 48 bytes into a line.
PACKED, LINE_START = 0, 1
LINE_AT = [None, 0, 16, 32, 48]
# An offset other than a pool's own is kept only when the chases that wait
# there are fewer by this share of the pool's chases, and its misses no
# more than this share higher: the model leaves the rest of the run's
# accesses out and keeps every pool's objects in one, so it moves a little
# either way from what the runtime's pools will do (layout noise of that
# order is common: results-format.md, "Layout noise").
LINE_MARGIN = 0.05
# What a rest pool that places its blocks into lines costs an allocation
# of more than 48 bytes, in a plan of the rest pool alone: the lane, which
# packs, serves it no more (runtime/identify/identify.c). `allocbench churn
# 20000000` (16 to 256 bytes) under such a plan, 7 interleaved runs,
# 2026-11-30: medians 10.70 ns a pair packed, 14.59 at=0, with 87% of the
# requests over 48 bytes: 4.5 ns each.
LANE_NS = 4.5
LANE_MAX = 48


def line_cost(lines, k):
    """The stalls the profile's model of offset k counts for a pool's objects:
    each D1 miss, and each chase that waited for its line (a pointer the
    walk follows, in a line that missed during the same visit), which
    stalls the walk once more (docs/planner.md, "Where in its line")."""
    return lines["d1_misses"][k] + lines["chase_waits"][k]


def line_totals(members):
    """The profile's model of the places (LINE_AT) summed over the contexts
    `members`, each with its `lines`: {"d1_misses": [per place],
    "chase_waits": [per place], "chases": n}."""
    totals = {key: [sum(c["lines"][key][k] for c in members) for k in range(len(LINE_AT))]
              for key in ("d1_misses", "chase_waits")}
    totals["chases"] = sum(c["lines"]["chases"] for c in members)
    return totals


def place_words(k, at=None):
    """How the texts say a pool's place: LINE_AT's index k, or the plan's
    at=K when given."""
    if at is not None:
        return f"{at} bytes into a line (at={at})"
    return "packed" if k == PACKED else "at a line's start" if k == LINE_START else f"{LINE_AT[k]} bytes into a line"


def line_choice(plan, contexts, members, own, choices, costs, charges=()):
    """Where the pool of the contexts `members` (each with its `lines`)
    should start its line-sized blocks, from its own place `own` (an index
    of LINE_AT) among `choices`: (the best index, or None to stay, and the
    text that says why; "" when no other place is a candidate). Another
    place is kept when the model stalls less there, and the stalls saved,
    priced where a miss on the pool's objects lands at the run's scale, are
    worth more than moving costs: charges, [(allocations, ns each, what
    they are)], grown with the pool's allocations to the run's scale."""
    lines = line_totals(members)
    # What the model exists for: chased pointers that stop waiting, a cost
    # cachegrind cannot see. A place is a candidate only where they wait
    # less by a material share of the chases, and the misses do not rise
    # beyond the margin; a change in misses alone is the layouts' to judge
    # (their models and cachegrind disagreed on xform's and listfrag's rest
    # pools, where this one saw 7% and 26% fewer misses and no chase).
    waits, misses = lines["chase_waits"], lines["d1_misses"]
    candidates = [k for k in choices if k == own or (
        waits[own] - waits[k] > LINE_MARGIN * lines["chases"] and misses[k] <= (1 + LINE_MARGIN) * misses[own])]
    best = min(candidates, key=lambda k: (line_cost(lines, k), k != own, k))
    saved = line_cost(lines, own) - line_cost(lines, best)
    if best == own or saved <= 0:
        return None, ""
    ids = [c["id"] for c in members]
    at = None
    if plan.pricing is not None:
        misses = transfer.context_misses(contexts, ids, transfer.run_accesses(contexts))
        at = plan.pricing.at(contexts, ids, misses, misses is not None and transfer.stays_cached(misses))
    miss_ns, grown, made = (at.miss_ns, at.accesses, at.allocations) if at else (costs["miss_ns"], 1.0, 1.0)
    saving_ns = saved * miss_ns * grown
    priced = [(n, n * ns * made, what) for n, ns, what in charges if n]
    cost_ns = sum(ns for _, ns, _ in priced)
    text = (f"the profile's model of its walks misses {lines['d1_misses'][best]} times there and waits "
            f"{lines['chase_waits'][best]} times for the line of a pointer it follows (of {lines['chases']}), "
            f"against {lines['d1_misses'][own]} and {lines['chase_waits'][own]} {place_words(own)}: "
            f"{saving_ns / 1e6:.2f} ms saved{at.clause() if at else ''}"
            + "".join(f"; its {n} {what}, {ns / 1e6:.2f} ms" for n, ns, what in priced))
    return (best if saving_ns > cost_ns else None), text


def lane_charge(members, rest_only):
    """What placing a rest pool's blocks within their lines costs a plan of
    the rest pool alone, as line_choice's charge: its allocations over
    LANE_MAX bytes leave the lane (LANE_NS each)."""
    lane = sum(c["allocations"] for c in members if c["max_size"] > LANE_MAX) if rest_only else 0
    return lane, LANE_NS, f"allocations over {LANE_MAX} bytes, which leave the lane"


def choose_line_offsets(plan, contexts, costs, rest_only=False):
    """Per pool of the plan, where in a line its line-sized blocks start
    (plan.line_at, the plan's at=K): a group's at a line's start and the
    rest pool's packed (split by class, each class's on lines) unless
    line_choice finds another place pays. Adds a note for each pool whose
    model prefers another place."""
    pools = list(range(len(plan.groups))) + ([plan.rest] if plan.rest is not None else [])
    for g in pools:
        if g in plan.line_at:
            continue
        members = [c for c in contexts if plan.predicted.get(c["id"]) == g and "lines" in c]
        if not members:
            continue
        own = PACKED if g == plan.rest and plan.rest_one else LINE_START
        choices = range(len(LINE_AT)) if g == plan.rest else range(LINE_START, len(LINE_AT))
        best, why = line_choice(plan, contexts, members, own, choices, costs, [lane_charge(members, rest_only)])
        if not why:
            continue
        name = "rest" if g == plan.rest else plan.groups[g].name
        if best is None:
            plan.notes.append(f"group {g} {name}: its blocks of whole lines stay {place_words(own)}, though "
                              f"the model prefers another place: {why}")
            continue
        plan.line_at[g] = LINE_AT[best]
        plan.notes.append(f"group {g} {name}: its blocks of whole lines start {place_words(best, LINE_AT[best])}: "
                          f"{why}")


def rest_for_lines(plan, contexts, shape, limit, costs, allocator, passed_over):
    """In front of an allocator of size classes the rest pool is left out
    when its layout alone does not pay (rest_against, whose note is
    passed_over); the allocator's classes start a line-sized block on a
    line. Placed elsewhere in their lines, the same objects may stall less
    by more than the rest pool's pairs cost over the allocator's (rest_ns
    each): then the rest pool comes back, with its blocks there. Returns
    whether it did."""
    saved = (dict(plan.predicted), plan.rest, plan.rest_max, plan.rest_one, plan.rest_layouts, list(plan.notes))
    add_rest(plan, contexts, shape, limit)
    if plan.rest is not None:
        members = [c for c in contexts if plan.predicted.get(c["id"]) == plan.rest and "lines" in c]
        allocations = sum(c["allocations"] for c in contexts if plan.predicted.get(c["id"]) == plan.rest)
        charges = [(allocations, costs["rest_ns"], f"pairs, each dearer than {allocator}'s"),
                   lane_charge(members, not plan.groups)]
        best, why = line_choice(plan, contexts, members, LINE_START, range(len(LINE_AT)), costs, charges) \
            if members else (None, "")
        if best is not None:
            plan.line_at[plan.rest] = LINE_AT[best]
            plan.notes = [n for n in plan.notes if n != passed_over]
            plan.notes.append(f"in front of {allocator} the rest pool stays, its blocks of whole lines "
                              f"{place_words(best, LINE_AT[best])}, where {allocator}'s classes start them on a "
                              f"line: {why}")
            return True
    plan.predicted, plan.rest, plan.rest_max, plan.rest_one, plan.rest_layouts, plan.notes = saved
    return False
