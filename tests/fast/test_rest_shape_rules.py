"""The rest pool's shape chosen from the profile's two layout models
(docs/planner.md, "The rest pool's shape"): a split must save more than it
costs, a given shape overrides the model, and every profiled run has its
say. No build."""

import pytest


def layouts(one, classes, objects):
    """A profile's rest_layouts: the two shapes' D1 misses over `objects`."""
    return {"max_size": 256, "objects": objects, "accesses": 1,
            "one": {"d1_misses": one, "ll_misses": 0}, "classes": {"d1_misses": classes, "ll_misses": 0}}


def test_the_split_must_save_more_than_it_costs():
    """A split by class costs every small allocation split_ns (its classes'
    own heap lines and chunk headers, the lane's class); the misses it saves
    in the model must be worth more. calc's rest pool, trained: the classes
    saved 23,717 misses in the model for 947,020 allocations, and in one
    pool its ref input ran 4.8% faster."""
    from cohort.plan.cost import COST_DEFAULTS
    from cohort.plan.rest import shape_verdict

    one, m = shape_verdict([layouts(583_795, 560_078, 947_020)], COST_DEFAULTS)
    assert one and m["saving_ns"] == 23_717 * COST_DEFAULTS["miss_ns"] and m["runs"] == 1
    assert m["cost_ns"] == 947_020 * COST_DEFAULTS["split_ns"]
    assert not shape_verdict([layouts(583_795, 560_078, 60_000)], COST_DEFAULTS)[0]
    assert shape_verdict([layouts(100, 100, 1)], COST_DEFAULTS)[0]        # level: one pool, the cheaper
    assert not shape_verdict([None], COST_DEFAULTS)[0]                    # no model: the default split
    assert not shape_verdict([layouts(583_795, 560_078, 947_020)], dict(COST_DEFAULTS, split_ns=0))[0]


def test_a_given_rest_shape_overrides_the_model():
    """--rest-shape one or classes (what a measurement on a larger input
    decided) stands whatever the model says; the model stays for the
    report. A shape that is neither is refused with one line."""
    from cohort.errors import CohortError
    from cohort.plan.cost import COST_DEFAULTS
    from cohort.plan.rest import shape_verdict

    one, m = shape_verdict([layouts(583_795, 560_078, 947_020)], COST_DEFAULTS, "classes")
    assert not one and m["given"] == "classes" and m["one"]["d1_misses"] == 583_795
    assert shape_verdict([layouts(583_795, 400_000, 1)], COST_DEFAULTS, "one")[0]
    assert shape_verdict([None], COST_DEFAULTS, "one") == (True, {"given": "one"})
    with pytest.raises(CohortError, match="--rest-shape must be"):
        shape_verdict([None], COST_DEFAULTS, "both")


def test_the_rest_shape_is_decided_over_every_run_profiled():
    """A validation run's model counts with the training run's: Xalan's
    training input saved 1.2% of the rest pool's misses by class (one pool
    won), where its larger inputs saved 7.3%. Summed, the larger run's misses
    outweigh the small one's; a run without a model adds nothing."""
    from cohort.plan.cost import COST_DEFAULTS
    from cohort.plan.rest import shape_verdict

    train = layouts(401_283, 396_512, 38_445)
    assert shape_verdict([train], COST_DEFAULTS)[0]
    larger = layouts(1_900_000, 1_760_000, 80_000)
    one, m = shape_verdict([train, None, larger], COST_DEFAULTS)
    assert not one and m["runs"] == 2 and m["objects"] == 118_445
    assert m["one"]["d1_misses"] == 2_301_283 and m["classes"]["d1_misses"] == 2_156_512
    assert m["saving_ns"] == (2_301_283 - 2_156_512) * COST_DEFAULTS["miss_ns"]
    # a validation run that agrees with the training run leaves one pool
    assert shape_verdict([train, layouts(50_000, 49_900, 40_000)], COST_DEFAULTS)[0]
