"""A plan names the allocator it was made for (cohort/plan/scale.py,
docs/planner.md, "The rest pool against the allocator underneath"); `cohort
run` says so when it runs in front of another. The planner's side of it,
which needs no build, is tests/fast/test_scale.py."""

from conftest import COHORT, run


def test_a_plan_run_in_front_of_another_allocator_is_warned_about(tmp_path):
    """cohort run names the allocator a plan was made for when it runs in
    front of another, and goes on."""
    from conftest import PROGRAMS
    toy = PROGRAMS / "benchtoy"
    r = run([COHORT, "optimize", "-o", tmp_path / "opt", "--allocator", "jemalloc", "--rest", "pool", "--", toy],
            text=True)
    assert r.returncode == 0, r.stderr
    assert "# made for allocator jemalloc" in (tmp_path / "opt" / "plan").read_text()
    r = run([COHORT, "run", "--plan", tmp_path / "opt", "--", toy], text=True)
    assert r.returncode == 0, r.stderr
    assert "was made for jemalloc, and runs in front of glibc" in r.stderr
    r = run([COHORT, "run", "--plan", tmp_path / "opt", "--allocator", "jemalloc", "--", toy], text=True)
    assert r.returncode == 0 and "was made for" not in r.stderr
