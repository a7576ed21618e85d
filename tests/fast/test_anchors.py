"""A profile's anchors go into the plan only as the runtime's parser takes
them (docs/plan-format.md, "Anchors"); the schema checks their shape, and
the planner that the place lies among the count."""

import json

from cohort.formats.profilefile import check_profile
from cohort.plan.planner import make_plan, render
from cohort.plan.rebase import valid_anchor
from profile_mutants import TINY

ANCHOR = ("call=d:malloc in=new_order nth=0/1 before=672cdca3,2cf281f2,24b0af4b,a41d3ffa,fc574670,fca9804d,"
          "2cf281f2,2cf281f2 after=2cf281f2,672cdca3,24b0af4b,dd016611,2cf281f2,672cdca3,dd016611,24b0af4b")


def test_valid_anchors():
    assert valid_anchor(ANCHOR)
    assert valid_anchor(ANCHOR.replace("in=new_order", "in=new_order tofn=xalloc"))
    assert valid_anchor(ANCHOR.replace("nth=0/1", "nth=0/0"))
    for bad in (ANCHOR.replace("nth=0/1", "nth=1/1"), ANCHOR.replace("malloc", "mal,loc"),
                ANCHOR.replace("call=d", "call=x"), ANCHOR[:-9], ANCHOR + " ", None, 7):
        assert not valid_anchor(bad), bad


def test_a_plan_takes_the_profiles_valid_anchors():
    profile = json.loads(TINY.read_text())
    for s in profile["sites"]:
        s["anchor"] = ANCHOR
    plan = make_plan(profile)
    assert len(plan.sites) >= 2
    wrong = plan.sites[0]   # the plan's site 0: the schema's shape, a place beyond the count
    profile["sites"][wrong]["anchor"] = ANCHOR.replace("nth=0/1", "nth=3/1")
    check_profile(profile)
    text = render(plan, profile)
    sites = {int(line.split()[1]) for line in text.splitlines() if line.startswith("site ")}
    anchored = {int(line.split()[1]) for line in text.splitlines() if line.startswith("anchor ")}
    assert anchored == sites - {0}
