"""Where in its line a line-sized block starts (docs/planner.md, "Where in
its line"): the profiler replays the accesses to line-sized objects at
each offset a pool could give them and counts the pointer chases that wait
for a line the same visit missed (profiler/lines.c); the planner moves a
pool's blocks where the walks wait least (plan version 8's at=K), and the
runtime puts them there (test_layout.py checks the placement)."""

import copy
import json

from conftest import COHORT, run
from cohort.formats.planfile import PLAN_VERSION
from cohort.measure import workloads
from cohort.plan.lines import LINE_AT, choose_line_offsets
from cohort.plan.planner import make_plan, report

TOUR = workloads.binary("tour")


def profile_of(tmp_path, argv):
    out = tmp_path / "profile.json"
    r = run([COHORT, "profile", "-o", out, "--", *argv])
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


def summed(profile):
    lines = [c["lines"] for c in profile["contexts"] if "lines" in c]
    return {key: [sum(x[key][k] for x in lines) for k in range(len(LINE_AT))] for key in ("d1_misses", "chase_waits")}


def test_the_profile_counts_the_walks_waits_at_each_offset(tmp_path):
    """tour's walk follows each city's next pointer (mov 0x20(%r12),%r12, a
    chase) right after reading its coordinates: at offsets 0 and 16 both
    lie in one line, and the chase waits for the line the coordinates
    missed; at 32 and 48 it lies in the line after. As many lines miss at
    every offset: cachegrind sees no difference."""
    p = profile_of(tmp_path, [TOUR, "20000", "2", "7"])
    assert p["line_offsets"]["offsets"] == ["packed", 0, 16, 32, 48]
    assert sum(c["lines"]["chases"] for c in p["contexts"] if "lines" in c) > 20000
    s = summed(p)
    packed, start, at16, at32, at48 = s["chase_waits"]
    assert packed == start == at16 and at32 < 0.6 * start and at48 < 0.6 * start
    assert abs(s["d1_misses"][3] - s["d1_misses"][1]) < 0.1 * s["d1_misses"][1]


def test_the_plan_moves_the_rest_pool_where_the_walks_wait_least(tmp_path):
    p = profile_of(tmp_path, [TOUR, "20000", "2", "7"])
    plan = make_plan(p, cache_sizes={1: 32 << 10, 2: 1 << 20, 3: 32 << 20})
    assert not plan.groups and plan.rest == 0
    assert plan.line_at.get(0) in (32, 48)
    assert f"start {plan.line_at[0]} bytes into a line" in report(plan, p)


def test_no_offset_without_a_saving_worth_the_lane(tmp_path):
    """A rest pool alone gives up its lane for requests over 48 bytes when it
    places blocks into lines: a model that waits a little less elsewhere
    does not pay for that, and a profile without the model moves nothing."""
    p = profile_of(tmp_path, [TOUR, "20000", "2", "7"])
    few = copy.deepcopy(p)
    for c in few["contexts"]:
        if "lines" in c:   # the same waits everywhere but one fewer at 48
            c["lines"]["chase_waits"] = [c["lines"]["chase_waits"][1]] * 4 + [c["lines"]["chase_waits"][1] - 1]
            c["lines"]["d1_misses"] = [c["lines"]["d1_misses"][1]] * 5
    assert make_plan(few).line_at == {}
    for c in few["contexts"]:
        c.pop("lines", None)
    assert make_plan(few).line_at == {}


def test_a_group_keeps_its_line_start_unless_its_own_walks_say_otherwise(tmp_path):
    """A group's blocks start on a line unless its members' model waits
    less elsewhere; the rest pool's model is its own members'."""
    p = profile_of(tmp_path, [TOUR, "20000", "2", "7"])
    plan = make_plan(p)
    plan.line_at = {}
    # as if every context were the plan's group 0 and none the rest pool's
    plan.predicted = {c["id"]: 0 for c in p["contexts"]}
    plan.groups = [type("G", (), {"name": "cities"})()]
    plan.rest = None
    choose_line_offsets(plan, p["contexts"], {"miss_ns": 3.5})
    assert plan.line_at.get(0) in (32, 48)
    plan.line_at = {}
    plan.predicted = {c["id"]: None for c in p["contexts"]}
    choose_line_offsets(plan, p["contexts"], {"miss_ns": 3.5})
    assert plan.line_at == {}


def test_optimize_writes_the_offset_and_the_runtime_uses_it(tmp_path):
    out = tmp_path / "opt"
    r = run([COHORT, "optimize", "-o", out, "--", TOUR, "20000", "2", "7"])
    assert r.returncode == 0, r.stderr
    text = (out / "plan").read_text()
    assert text.startswith(f"cohort-plan {PLAN_VERSION}\n")
    assert any(line.startswith("group 0 rest at=") for line in text.splitlines())
    assert "blocks of whole lines start" in (out / "explain.txt").read_text()
    base = run([TOUR, "5000", "2", "7"])
    r = run([COHORT, "run", "--plan", out / "plan", "--", TOUR, "5000", "2", "7"])
    assert r.returncode == 0 and r.stdout == base.stdout, r.stderr


def test_in_front_of_jemalloc_the_rest_pool_comes_back_for_its_lines(tmp_path):
    """jemalloc's classes start tour's 64-byte cities on a line, as the rest
    pool would where its layout alone does not pay (rest none): placed 32
    or 48 bytes into their lines they stall so much less that the pool pays
    for its pairs over jemalloc's, so the plan keeps it, with them there."""
    p = profile_of(tmp_path, [TOUR, "20000", "2", "7"])
    plan = make_plan(p, allocator="jemalloc", cache_sizes={1: 32 << 10, 2: 1 << 20, 3: 32 << 20})
    assert plan.rest == 0 and plan.line_at.get(0) in (32, 48)
    text = report(plan, p)
    assert "in front of jemalloc the rest pool stays, its blocks of whole lines" in text
    assert "(--rest none)" not in text
    flat = copy.deepcopy(p)
    for c in flat["contexts"]:
        c.pop("lines", None)
    assert make_plan(flat, allocator="jemalloc").rest is None


def test_plan_line_offsets_none_leaves_the_blocks_where_the_runtime_puts_them(tmp_path):
    p = tmp_path / "profile.json"
    assert run([COHORT, "profile", "-o", p, "--", TOUR, "20000", "2", "7"]).returncode == 0
    r = run([COHORT, "plan", "--line-offsets", "none", "-o", tmp_path / "plan", p])
    assert r.returncode == 0, r.stderr
    assert " at=" not in (tmp_path / "plan").read_text()
    r = run([COHORT, "plan", "--line-offsets", "sometimes", "-o", tmp_path / "plan2", p])
    assert r.returncode != 0 and b"Traceback" not in r.stderr and not (tmp_path / "plan2").exists()


def test_the_confirmation_leaves_placements_within_lines_to_the_clock(tmp_path):
    """cachegrind counts as many misses wherever tour's cities lie in their
    lines, so its steps of the confirmation do not drop a rest pool that
    places them (nor the plan for the allocator alone); with no timed
    rounds the plan stays as made, its rest pool and offset kept."""
    out = tmp_path / "opt"
    r = run([COHORT, "optimize", "--allocator", "jemalloc", "--ref", "40000 2 7", "--ref-trials", "0",
             "-o", out, "--", TOUR, "20000", "2", "7"])
    assert r.returncode == 0, r.stderr
    text = (out / "plan").read_text()
    assert any(line.startswith("group 0 rest at=") for line in text.splitlines()), text
    assert any(line.startswith("rest 0 ") for line in text.splitlines())
