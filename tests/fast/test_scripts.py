"""The benchmark and fuzz scripts refuse a bad count with one line that
names it, and a non-zero exit, before doing any work: never a traceback."""

import os
import sys

import pytest

from conftest import ROOT, run

SCRIPTS = ROOT / "scripts"
CASES = [
    (["bench-stress.py", "lots"], {}, "bench-stress.py: TRIALS must be a number, not 'lots'"),
    (["bench-stress.py", "0"], {}, "bench-stress.py: TRIALS must be at least 1, not 0"),
    (["bench-stress.py", "1", "ringo"], {}, "bench-stress.py: 'ringo' is not a shape of prodcons"),
    (["bench-stress.py", "1"], {"STRESS_THREADS": "1 two"}, "bench-stress.py: STRESS_THREADS must be a whole number, not 'two'"),
    (["bench-stress.py", "1"], {"STRESS_DEPTHS": "0"}, "bench-stress.py: STRESS_DEPTHS must be at least 1, not 0"),
    (["bench-pools.py", "1", "destroy"], {}, "bench-pools.py: 'destroy' is not a section"),
    (["bench-pools.py", "1"], {"POOLS_SIZE": "4"}, "bench-pools.py: POOLS_SIZE must be at least 8, not 4"),
    (["bench-olh.py", "1", "sort"], {}, "bench-olh.py: 'sort' is not a section"),
    (["bench-olh.py", "1"], {"OLH_N": "10"}, "bench-olh.py: OLH_N must be at least 1000, not 10"),
    (["bench-runtime.py", "-3"], {}, "bench-runtime.py: TRIALS must be a number, not '-3'"),
    (["fuzz-plans.py", "x"], {}, "fuzz-plans.py: N must be a whole number, not 'x'"),
    (["fuzz-profiles.py", "10", "9" * 30], {}, "fuzz-profiles.py: SEED must be a whole number"),
    (["bench-stock.py", "lots"], {}, "bench-stock.py: TRIALS must be a number, not 'lots'"),
    (["bench-stock.py", "1", "emacs"], {}, "bench-stock.py: 'emacs' is not a stock program"),
    (["bench-stock.py", "1"], {"BENCH_TRAINS": "3"}, "bench-stock.py: BENCH_TRAINS must be 1 or 2, not '3'"),
    (["demo.py"], {"DEMO_TRIALS": "seven"}, "demo.py: DEMO_TRIALS must be a whole number, not 'seven'"),
]


@pytest.mark.parametrize("argv,env,message", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_counts_get_one_line(argv, env, message):
    r = run([sys.executable, SCRIPTS / argv[0], *argv[1:]], env={**os.environ, **env})
    err = r.stderr.decode()
    assert r.returncode != 0
    assert err.startswith(message) and err.count("\n") <= 1, err
    assert "Traceback" not in err


def test_stock_inputs_are_the_same_everywhere(tmp_path):
    """bench-stock's inputs come from fixed seeds: two makes agree byte for
    byte, so a figure measured here can be measured again elsewhere."""
    sys.path.insert(0, str(ROOT))
    from stock import programs
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        programs.access_log(tmp_path / d / "x.log", 500, 3)
        programs.digraph(tmp_path / d / "x.dot", 40, 80, 3)
    for f in ("x.log", "x.dot"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert len((tmp_path / "a" / "x.log").read_text().splitlines()) == 500
    assert set(programs.PROGRAMS) >= {"gawk", "perl", "dot", "cppcheck"}
    for spec in programs.PROGRAMS.values():
        assert set(spec["args"]) == set(programs.PHASES)
