"""Bad plans: each gives one documented warning on stderr, and the program
runs exactly as it would without Cohort."""

import pytest

from conftest import PROGRAMS, cohort_env, run
from cohort.plan.handplan import call_sites, write_plan

BINARY = PROGRAMS / "groups_O2"


def good_plan(path, binary=BINARY):
    sites = [(0, call_sites(binary, "build", "make_a")[0], None)]
    return write_plan(path, [binary], sites, ["a"], [(0, [0])])


def run_with(plan, tmp_path):
    base = run([BINARY], env=cohort_env())
    r = run([BINARY, tmp_path / "log"], env=cohort_env(plan=plan))
    assert r.returncode == 0
    assert r.stdout == base.stdout
    groups = {line.split()[2] for line in (tmp_path / "log").read_text().splitlines()}
    assert groups == {"-1"}, "nothing may be grouped under a bad plan"
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def edit(tmp_path, old, new):
    p = good_plan(tmp_path / "plan")
    p.write_text(p.read_text().replace(old, new, 1))
    return p


def test_missing_file(tmp_path):
    msg = run_with(tmp_path / "nope", tmp_path)
    assert msg == f"cohort: warning: cannot read plan {tmp_path / 'nope'}: No such file or directory; running without grouping"


def test_garbage(tmp_path):
    p = tmp_path / "plan"
    p.write_bytes(bytes(range(256)) * 4)
    msg = run_with(p, tmp_path)
    assert msg.startswith(f"cohort: warning: plan {p} line 1: ")
    assert msg.endswith("; running without grouping")


@pytest.mark.parametrize("old,new,message", [
    ("cohort-plan 1", "cohort-plan 10", "line 1: plan format version 10; this runtime reads versions 1 to 9"),
    ("site 0 0 0x", "site 1 0 0x1 group=0\nsite 0 0 0x", "site 1 out of order"),
    ("group 0 a", "group 0 a\nsite 1 0 0x10 group=0", "'group=G' (version 2), 'stop=G' (version 3) or 'next' (version 4), not 'group=0'"),
    ("cohort-plan 1", "cohort-plan 2", None),
    ("group 0 a", "group 0 a\nsite 1 0 0x10 stop=0", "(version 4), not 'stop=0'"),
    ("group 0 a", "group 0 a\nfrobnicate 3", "line 6: unknown directive 'frobnicate'"),
    ("end\n", "", "truncated: no 'end' line"),
    ("select 0 0", "select 0 9", "select names an undeclared site '9'"),
    ("site 0 0 ", "site 0 4 ", "site names an undeclared module"),
], ids=["version", "order", "group-verdict-v1", "v2-ok", "stop-v1", "directive", "truncated",
        "undeclared-site", "undeclared-module"])
def test_malformed_plan_names_the_line(tmp_path, old, new, message):
    if message is None:  # a good plan after all: it must work
        r = run([BINARY, tmp_path / "log"], env=cohort_env(plan=edit(tmp_path, old, new)))
        assert r.returncode == 0 and r.stderr == b""
        return
    msg = run_with(edit(tmp_path, old, new), tmp_path)
    assert message in msg


def test_group_verdict_must_name_a_declared_group(tmp_path):
    p = edit(tmp_path, "cohort-plan 1", "cohort-plan 2")
    p.write_text(p.read_text().replace("group 0 a", "site 1 0 0x10 group=5\ngroup 0 a"))
    assert "verdict names group 5, which is not declared" in run_with(p, tmp_path)


def test_stop_must_name_a_declared_group_once(tmp_path):
    p = edit(tmp_path, "cohort-plan 1", "cohort-plan 3")
    text = p.read_text()
    p.write_text(text.replace("group 0 a", "site 1 0 0x10 walk stop=5\ngroup 0 a"))
    assert "stop names group 5, which is not declared" in run_with(p, tmp_path)
    p.write_text(text.replace("group 0 a", "site 1 0 0x10 stop=0 stop=0\ngroup 0 a"))
    assert "bad 'stop=0': one stop=G per site" in run_with(p, tmp_path)
    p.write_text(text.replace("group 0 a", "site 1 0 0x10 cold walk\ngroup 0 a"))
    assert "extra text after site" in run_with(p, tmp_path)


def test_wrong_build_id(tmp_path):
    p = good_plan(tmp_path / "plan")
    text = p.read_text()
    bid = text.split("module 0 ")[1].split()[0]
    p.write_text(text.replace(bid, "00" * (len(bid) // 2)))
    msg = run_with(p, tmp_path)
    assert msg == (f"cohort: warning: plan {p} was made for another build of groups_O2 "
                   f"(build-id {'00' * (len(bid) // 2)}, running {bid}), and its anchors do not carry it "
                   "(the plan has no anchors to find its sites by); running without grouping")


def test_plan_for_another_program_is_quiet(tmp_path):
    """An exec'd child of the planned program inherits the plan; a plan that
    names no module of the process is ignored without a word."""
    plan = good_plan(tmp_path / "plan", PROGRAMS / "groups_O0")
    other = run([PROGRAMS / "cxx_map", 1000], env=cohort_env(plan=plan))
    assert other.returncode == 0 and other.stderr == b""


@pytest.mark.parametrize("rest,message", [
    ("rest 1", "rest names an undeclared group"),
    ("rest 0\nrest 0", "one rest line per plan"),
    ("rest", "rest names an undeclared group"),
    ("rest 0 0", "rest takes one option, max=BYTES"),
    ("rest 0 max=4", "rest takes one option, max=BYTES"),
    ("rest 0 max=256 x", "rest takes one option, max=BYTES"),
])
def test_malformed_rest_line(tmp_path, rest, message):
    """Version 4's rest line: it must name one declared group, once."""
    p = good_plan(tmp_path / "plan")
    p.write_text(p.read_text().replace("cohort-plan 1", "cohort-plan 4", 1).replace("end\n", rest + "\nend\n"))
    assert message in run_with(p, tmp_path)


@pytest.mark.parametrize("path,message", [
    ("path 0 1", "a path needs at least two sites and a verdict"),
    ("path 0 1 group=5", "a path ends in 'group=G' (a declared group), 'cold' or 'next', not 'group=5'"),
    ("path 0 1 walk", "not 'walk'"),
    ("path 0 7 cold", "path names an undeclared site '7'"),
    ("path 0 1 0 cold", "site 0 comes twice in one path"),
    ("path 2 0 cold", "path enters at site 2, whose own verdict already decides"),
    ("path 0 1 cold\npath 0 1 next", "path decided twice"),
    ("path 0 1 cold\npath 0 1 2 next", "path goes on past a decided path"),
    ("path 0 1 2 cold\npath 0 1 next", "path decides where a longer path goes on"),
    ("path " + " ".join(["0"] * 40) + " cold", "a path holds at most 32 sites"),
])
def test_malformed_path_line(tmp_path, path, message):
    """Version 5's decision paths: declared sites, each once, a verdict, an
    entry that does not decide alone, and no path through another's end."""
    p = good_plan(tmp_path / "plan")
    text = p.read_text().replace("cohort-plan 1", "cohort-plan 5", 1)
    text = text.replace("group 0 a", "site 1 0 0x20\nsite 2 0 0x30 cold\ngroup 0 a")
    p.write_text(text.replace("end\n", path + "\nend\n"))
    assert message in run_with(p, tmp_path)


def test_path_line_needs_version_5(tmp_path):
    p = good_plan(tmp_path / "plan")
    p.write_text(p.read_text().replace("cohort-plan 1", "cohort-plan 4", 1).replace("end\n", "path 0 0 cold\nend\n"))
    assert "unknown directive 'path'" in run_with(p, tmp_path)


@pytest.mark.parametrize("version, line, message", [
    (5, "unknown-path cold", "unknown directive 'unknown-path'"),
    (6, "unknown-path", "unknown-path needs 'walk' or 'cold'"),
    (6, "unknown-path sometimes", "unknown-path needs 'walk' or 'cold'"),
    (6, "unknown-path cold extra", "unknown-path needs 'walk' or 'cold'"),
])
def test_unknown_path_line(tmp_path, version, line, message):
    """Version 6's unknown-path line: refused before version 6 and with
    anything but walk or cold, by the runtime and the CLI alike."""
    from cohort import plans
    from cohort.errors import CohortError
    p = good_plan(tmp_path / "plan")
    p.write_text(p.read_text().replace("cohort-plan 1", f"cohort-plan {version}", 1)
                 .replace("end\n", line + "\nend\n"))
    assert message in run_with(p, tmp_path)
    with pytest.raises(CohortError, match=rf"^plan {p} line \d+: "):
        plans.read_plan(p)
    p.write_text(p.read_text().replace(line, "unknown-path cold").replace("cohort-plan 5", "cohort-plan 6"))
    assert plans.read_plan(p)["unknown_path"] == "cold"


@pytest.mark.parametrize("version, option, message", [
    (7, "at=32", "group name must be one word"),
    (8, "at=8", "group takes one option, at=0, 16, 32 or 48"),
    (8, "at=64", "group takes one option, at=0, 16, 32 or 48"),
    (8, "at=32 at=32", "group takes a one-word name and at most the option at=K"),
    (8, "colour=3", "group takes one option, at=0, 16, 32 or 48"),
])
def test_group_at_option(tmp_path, version, option, message):
    """Version 8's at=K on a group line: refused before version 8 and with
    anything but one of 0, 16, 32, 48, by the runtime and the CLI alike; a
    good one is read."""
    from cohort import plans
    from cohort.errors import CohortError
    p = good_plan(tmp_path / "plan")
    p.write_text(p.read_text().replace("cohort-plan 1", f"cohort-plan {version}", 1)
                 .replace("group 0 a", f"group 0 a {option}"))
    assert message in run_with(p, tmp_path)
    with pytest.raises(CohortError, match=rf"^plan {p} line \d+: "):
        plans.read_plan(p)
    p.write_text(p.read_text().replace(f"group 0 a {option}", "group 0 a at=16").replace("cohort-plan 7", "cohort-plan 8"))
    assert plans.read_plan(p)["group_at"] == {0: 16}
    # digits only, as every number of the format: leading zeros read as the runtime reads them
    p.write_text(p.read_text().replace("group 0 a at=16", "group 0 a at=0032"))
    assert plans.read_plan(p)["group_at"] == {0: 32}


@pytest.mark.parametrize("path", ["path 0 1", "path 0 1 group=5", "path 0 7 cold", "path 0 1 0 cold",
                                  "path 2 0 cold", "path 0 1 cold\npath 0 1 next",
                                  "path 0 1 cold\npath 0 1 2 next", "path 0 1 2 cold\npath 0 1 next"])
def test_cli_reader_refuses_the_same_path_lines(tmp_path, path):
    from cohort import plans
    from cohort.errors import CohortError
    p = good_plan(tmp_path / "plan")
    text = p.read_text().replace("cohort-plan 1", "cohort-plan 5", 1)
    text = text.replace("group 0 a", "site 1 0 0x20\nsite 2 0 0x30 cold\ngroup 0 a")
    p.write_text(text.replace("end\n", path + "\nend\n"))
    with pytest.raises(CohortError, match=rf"^plan {p} line \d+: "):
        plans.read_plan(p)
