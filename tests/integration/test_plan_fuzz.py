"""One plan grammar (issue 20): the CLI refuses exactly the plans the runtime
refuses, because it asks the runtime's own parser (cohort-plan-check); a
bounded differential fuzz run (fixed seed) holds the CLI, the checker and
the runtime preloaded into a real process to one verdict per mutant, with
no traceback. scripts/fuzz-plans.py runs as many mutants as asked."""

import os

import pytest

import plan_mutants
from conftest import DATA
from cohort.errors import CohortError
from cohort.paths import plan_checker, runtime_library
from cohort.plans import check_plan, read_plan

TINY = DATA / "tiny-profile.json"
PLAIN = {k: v for k, v in os.environ.items() if not k.startswith("COHORT_") and k != "LD_PRELOAD"}


def test_differential_fuzz(tmp_path):
    counts, problems = plan_mutants.run(20, 400, tmp_path, plan_checker(), runtime_library(), TINY, PLAIN)
    assert not problems, "\n".join(problems[:5])
    assert counts["accepted"] > 20 and counts["refused"] > 150, counts   # the mutants reach both sides
    assert counts["runtime_checked"] == 40


@pytest.mark.parametrize("text,reason", [
    # the cases the CLI used to accept and the runtime refused
    (b"cohort-plan 2\nmodule 0 - p\nsite 0 0 10 stop=0\ngroup 0 a\nselect 0 0\nend\n", "line 3: site verdict"),
    (b"cohort-plan 5\nmax-size 1\nend\n", "line 2: max-size needs a byte count from 8"),
    (b"cohort-plan 5\nend\ntext\n", "line 3: text after 'end'"),
    (b"cohort-plan 5\n# a \x00 in a comment\nend\n", "line 2: contains a NUL byte"),
    (b"cohort-plan 5\nmodule 0 zz p\nend\n", "line 2: bad build id 'zz'"),
    (b"cohort-plan 5\nmodule 0 - p\nsite 0 0 0x0x10\nend\n", "line 3: site needs a hex offset"),
])
def test_the_runtimes_reason(tmp_path, text, reason):
    p = tmp_path / "plan"
    p.write_bytes(text)
    with pytest.raises(CohortError, match=f"^plan {p} {reason}"):
        check_plan(p)
    with pytest.raises(CohortError, match=f"^plan {p} {reason}"):
        read_plan(p)


def test_max_size_follows_the_runs_chunk_size(tmp_path):
    p = tmp_path / "plan"
    p.write_bytes(b"cohort-plan 5\nmax-size 200000\nend\n")
    with pytest.raises(CohortError, match="max-size needs a byte count from 8 to 131072"):
        check_plan(p, PLAIN)
    assert check_plan(p, dict(PLAIN, COHORT_CHUNK_SIZE="2M")) == 5


def test_header_after_comments_is_read_as_the_runtime_reads_it(tmp_path):
    p = tmp_path / "plan"
    p.write_bytes(b"# a comment first\n\ncohort-plan 5 # the header\nmodule 0 - p\x0cq\ngroup 0 a\x1cb\nend\n")
    plan = read_plan(p)
    assert plan["modules"] == [(None, "p\x0cq")] and plan["groups"] == ["a\x1cb"]
