"""The prefetch advice's rules (cohort/measure/loads.py) on hand-made
delinquent loads: which loads get a prefetch, at what distance, and the
advice when nothing is worth prefetching. No build."""

from cohort.measure.loads import advice, distance, verdict


def load(**kw):
    base = {"module": "/bin/x", "system": False, "offset": 16, "function": "f", "file": "f.c", "line": 3,
            "insn": {"text": "mov rax, qword ptr [rbx + 8]", "base": "rbx", "index": None, "disp": 8, "size": 4},
            "execs": 6400, "d1_misses": 500, "ll_misses": 10, "windows": 100, "strided_windows": 80,
            "strides": [{"stride": 48, "windows": 80}]}
    base.update(kw)
    return base


def test_the_rules_of_the_advice():
    assert distance(48, 64) == 368 and distance(-24, 64) == -344
    assert verdict(load(), 1000, 64, 0.01) == (48, 368)
    assert verdict(load(strided_windows=50), 1000, 64, 0.01) is None       # not more than half
    assert verdict(load(d1_misses=5), 1000, 64, 0.01) is None               # under 1% of misses
    assert verdict(load(system=True), 1000, 64, 0.01) is None
    idx = dict(load()["insn"], index="rcx")
    assert verdict(load(insn=idx), 1000, 64, 0.01) is None                  # an array access
    for reg in ("rsp", "rbp", "rip"):
        assert verdict(load(insn=dict(load()["insn"], base=reg)), 1000, 64, 0.01) is None
    assert verdict(load(insn=None), 1000, 64, 0.01) is None                 # not decoded


def test_advice_with_nothing_to_prefetch():
    data = {"target": {"argv": ["x"]}, "layout": {"kind": "next"},
            "cache": {"window": 64, "line": 64, "d1": [32768, 8], "ll": [1048576, 16]},
            "totals": {"accesses": 10, "loads": 5, "d1_misses": 1000, "ll_misses": 0},
            "loads": [load(strided_windows=0, strides=[])]}
    text = advice(data)
    assert "No load walks with a constant stride" in text
