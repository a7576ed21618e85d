"""The rest pool: its shape (one pool in allocation order, or one per size
class), decided from the profile's model of both, and whether it pays in
front of the allocator underneath (docs/planner.md, "The rest pool's
shape", "The rest pool against the allocator underneath")."""

from cohort.errors import CohortError
from cohort.plan.cost import SIZE_CLASS_ALLOCATORS
from cohort.plan.transfer import REST_MAX

REST_SHAPES = ("auto", "one", "classes")

def lies_among(rest_pool, rest_one, allocator):
    """What a group's objects would otherwise lie among, for
    transfer.strangers_of: the rest pool, of its shape ("one" or
    "classes"); without one, an allocator of size classes as the rest pool
    by class (its classes keep a size's objects together in allocation
    order), glibc as objects of every size (None: the whole affinity
    counts)."""
    if rest_pool:
        return "one" if rest_one else "classes"
    return "classes" if allocator in SIZE_CLASS_ALLOCATORS else None


def shape_verdict(models, costs, given="auto"):
    """(keep the rest pool one pool?, the model it was decided from). The
    profiler places every object of up to 256 bytes in a model of each shape,
    one pool in allocation order and one pool per size class, and counts the
    misses of the whole run under each (profiler/layouts.c). The split, the
    runtime's default, stays when the D1 misses it saves in the model
    (miss_ns each) are worth more than it costs those objects' allocations
    (split_ns each); without the model, the default. models: the training
    run's model, then each validation run's (None where a profile has none),
    summed: a larger run's misses outweigh a small one's, and one input may
    walk the rest pool's objects quite otherwise than another (Xalan under
    another stylesheet; docs/planner.md, "The rest pool's shape").
    given: "one" or "classes" decides instead of the model, which is still
    kept for the report ("auto": the model decides)."""
    if given not in REST_SHAPES:
        raise CohortError(f"--rest-shape must be {', '.join(REST_SHAPES)}, not '{given}'")
    models = [m for m in models if m]
    if not models:
        return given == "one", ({"given": given} if given != "auto" else None)
    one = sum(m["one"]["d1_misses"] for m in models)
    classes = sum(m["classes"]["d1_misses"] for m in models)
    objects = sum(m["objects"] for m in models)
    saving = (one - classes) * costs["miss_ns"]
    cost = objects * costs["split_ns"]
    summed = dict(models[0], one=dict(models[0]["one"], d1_misses=one),
                  classes=dict(models[0]["classes"], d1_misses=classes), objects=objects)
    summed.update(saving_ns=saving, cost_ns=cost, runs=len(models))
    if given != "auto":
        return given == "one", dict(summed, given=given)
    return saving <= cost, summed


def rest_against(allocator, shape, costs):
    """Whether the rest pool pays in front of `allocator` ("pool" or
    "none"), and why (docs/planner.md, "The rest pool against the
    allocator underneath"). In front of glibc it does. An allocator of size
    classes already keeps small objects of a size together in allocation
    order, as the rest pool split by class does, at a cheaper pair: the
    rest pool pays there only as one pool, when the profile's model says
    one pool in allocation order misses less than classes by more than its
    objects' pairs cost over the allocator's (rest_ns each)."""
    if allocator not in SIZE_CLASS_ALLOCATORS:
        return "pool", None
    one, m = shape
    if not m or "one" not in m:
        return "none", (f"in front of {allocator} every ungrouped object goes to {allocator} (--rest none): "
                        f"the profile has no model of the rest pool's layouts to say it pays")
    saving = (m["classes"]["d1_misses"] - m["one"]["d1_misses"]) * costs["miss_ns"]
    cost = m["objects"] * costs["rest_ns"]
    if one and saving > cost:
        return "pool", (f"in front of {allocator} the rest pool stays, as one pool: in allocation order the "
                        f"profile's model misses {m['classes']['d1_misses'] - m['one']['d1_misses']} times less "
                        f"than by class ({allocator}'s layout), {saving / 1e6:.2f} ms, more than its "
                        f"{m['objects']} pairs cost over {allocator}'s ({cost / 1e6:.2f} ms)")
    return "none", (f"in front of {allocator} every ungrouped object goes to {allocator} (--rest none): one pool "
                    f"in allocation order saves {max(saving, 0) / 1e6:.2f} ms of D1 misses in the profile's "
                    f"model against {allocator}'s classes, no more than its {m['objects']} pairs cost over "
                    f"{allocator}'s ({cost / 1e6:.2f} ms)")


def rest_text(plan):
    """How the rest pool is laid out, and why, for `cohort plan`'s report."""
    shape = "in one pool, in allocation order" if plan.rest_one else "split by size class"
    m = plan.rest_layouts
    given = (m or {}).get("given")
    if given:
        shape += f" (--rest-shape {given}: measured on a larger input, or asked for)"
    if not m or "one" not in m:
        return shape if given else f"{shape} (the profile has no model of the two shapes: the runtime's default)"
    runs = m.get("runs", 1)
    whose = "the profile's model" if runs == 1 else f"the model of the {runs} runs (training and validation)"
    saves = (f"{m['saving_ns'] / 1e6:.2f} ms of D1 misses ({m['one']['d1_misses']} in one pool, "
             f"{m['classes']['d1_misses']} by class)")
    if given:
        return (f"{shape}; by class {whose} of both would save {saves}, against {m['cost_ns'] / 1e6:.2f} ms that "
                f"the classes cost its {m['objects']} small allocations")
    return (f"{shape}: by class {whose} of both saves {saves}, {'less' if plan.rest_one else 'more'} than the "
            f"classes cost its {m['objects']} small allocations ({m['cost_ns'] / 1e6:.2f} ms)")


def add_rest(plan, contexts, shape, limit):
    """The rest pool: every allocation of up to `limit` bytes (--rest-max,
    at most the plan's max-size) that no group claims. Larger ones stay
    with the next allocator. Above REST_MAX bytes the runtime keeps them in
    classes of their own, one per power of two, even when the pool stays
    one; whether taking them pays is the program's (docs/planner.md, "The
    rest pool's limit"), so the default stays REST_MAX and `cohort tune`
    tries more. Short-lived objects go to the rest pool too: a pooled
    malloc+free pair costs less than glibc's (docs/runtime.md, "The group
    allocator's own cost"), and a site sent to the next allocator would
    cost every allocation the quick test, where a plan with nothing but its
    rest pool needs none."""
    limit = min(limit, plan.max_size)
    taken = [c for c in contexts if plan.predicted[c["id"]] is None and c["max_size"] <= limit]
    if not plan.groups and not any(c["max_size"] <= REST_MAX for c in taken):
        # nothing small to place (a program's stdio buffers alone are no
        # reason to load the runtime): a plan with no pool at all lets the
        # runtime pass every call straight through, without even the quick test
        plan.notes.append("no pool: nothing the profile saw would go to one, so the plan leaves every "
                          "allocation to the next allocator and the runtime passes calls straight through")
        return
    plan.rest = len(plan.groups)
    plan.rest_max = limit
    plan.rest_one, plan.rest_layouts = shape   # the verdict on its shape, and the model
    for c in taken:
        plan.predicted[c["id"]] = plan.rest
