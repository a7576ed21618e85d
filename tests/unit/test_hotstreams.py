"""SEQUITUR (cohort/policies/sequitur.py) and hot data streams (cohort/hds.py),
the hds comparator's analysis, on sequences with known answers."""

import random
from array import array

import pytest

from cohort.formats import heaptrace
from cohort.policies import hds, sequitur
from cohort.errors import CohortError


def text(g):
    """The grammar as 'S -> ...' lines, nonterminals named by order."""
    rules = g.rules()
    name = {r.number: ("S" if i == 0 else chr(ord("A") + i - 1)) for i, r in enumerate(rules)}
    return ["%s -> %s" % (name[r.number], " ".join(name[s.number] if isinstance(s, sequitur.Rule) else chr(s)
                                                   for s in r.symbols())) for r in rules]


def test_the_papers_example():
    """Nevill-Manning and Witten's abcdbcabcd: S -> CAC, A -> bc, C -> aAd."""
    assert text(sequitur.build(map(ord, "abcdbcabcd"))) == ["S -> A B A", "A -> a B d", "B -> b c"]


def test_rule_reuse_and_expansion_of_a_rule_used_once():
    # ab is made a rule, then abcab...: the rule for ab survives inside abc(ab)d
    assert text(sequitur.build(map(ord, "abcabdabcabd"))) == ["S -> A A", "A -> B c B d", "B -> a b"]
    # aaa holds two overlapping digrams, which are not a repeat
    assert text(sequitur.build(map(ord, "aaa"))) == ["S -> a a a"]
    assert text(sequitur.build(map(ord, "aaaa"))) == ["S -> A A", "A -> a a"]


def check(seq):
    """Expansion gives the input back; digram uniqueness; rule utility."""
    g = sequitur.build(seq)
    assert sequitur.expand(g.start) == list(seq)
    rules = g.rules()
    uses, digrams = {}, {}
    key = lambda s: ("rule", s.number) if isinstance(s, sequitur.Rule) else s   # noqa: E731
    for r in rules:
        syms = r.symbols()
        for s in syms:
            if isinstance(s, sequitur.Rule):
                uses[s.number] = uses.get(s.number, 0) + 1
        for i in range(len(syms) - 1):
            digrams.setdefault((key(syms[i]), key(syms[i + 1])), []).append((r.number, i))
    for r in rules[1:]:
        assert uses.get(r.number, 0) >= 2 and len(r.symbols()) >= 2
    for (a, b), where in digrams.items():
        # only the overlapping pair of a run of three equal symbols may repeat
        assert len(where) == 1 or (len(where) == 2 and a == b and where[0][0] == where[1][0]
                                   and abs(where[0][1] - where[1][1]) == 1), (seq, a, b, where)


@pytest.mark.parametrize("alphabet", [1, 2, 4, 30])
def test_random_sequences_keep_both_properties(alphabet):
    rnd = random.Random(alphabet)
    for _ in range(400):
        check([rnd.randint(0, alphabet) for _ in range(rnd.randint(0, 80))])


def test_a_repeated_stream_among_noise_is_the_hot_stream():
    """(1 2 3) ten times, each followed by a fresh object: the stream covers
    30 of the 40 references."""
    trace = []
    for i in range(10):
        trace += [1, 2, 3, 100 + i]
    streams, threshold, covered = hds.hot_streams(trace, target=0.7)
    assert streams == [([1, 2, 3], 10)] and covered == 0.75 and threshold == 30


def test_minimal_streams_and_the_threshold():
    """Two streams, one three times as frequent; a lower target admits only
    the hotter; the longer stream that holds both is not minimal."""
    hot, cold = [1, 2, 3, 4], [5, 6, 7]
    trace, k = [], 0
    for i in range(12):
        trace += hot + [1000 + k]
        k += 1
        if i % 3 == 0:
            trace += cold + [1000 + k]
            k += 1
    streams, _, covered = hds.hot_streams(trace, target=0.6)
    assert streams == [(hot, 12)] and covered == pytest.approx(48 / len(trace))
    streams, _, covered = hds.hot_streams(trace, target=0.8)
    assert sorted(streams) == [(hot, 12), (cold, 4)]
    # a stream longer than 20 symbols is no stream; its parts may be
    long = list(range(1, 26))
    streams, _, _ = hds.hot_streams((long + [999]) * 2 + long, target=0.5)
    assert all(2 <= len(s) <= 20 for s, _ in streams)


def test_coallocation_sets_and_packing():
    context = {1: "a", 2: "b", 3: "a", 4: None}
    size = {1: 16, 2: 16, 3: 16, 4: 16}
    sets = hds.coallocation_sets([([1, 2, 3, 1], 10), ([1, 3], 5), ([4, 1], 7)], context, size)
    # three 16-byte objects: 3 lines apart, 1 together, 10 times; two: 1 saved 5 times
    assert sets == {frozenset("ab"): 20, frozenset("a"): 5}
    chosen = hds.pack({frozenset("ab"): 10, frozenset("bc"): 8, frozenset("c"): 5,
                              frozenset("de"): 1})
    assert chosen == [(frozenset("ab"), 10), (frozenset("c"), 5), (frozenset("de"), 1)]


def test_a_long_repeated_traversal_spreads_over_many_streams():
    """100 distinct objects walked 5 times: the one rule (100 long) is no
    stream, but its five 20-object pieces are, each 5 times."""
    walk = list(range(100))
    streams, threshold, covered = hds.hot_streams(walk * 5, target=0.9)
    assert sorted(streams) == [(walk[i:i + 20], 5) for i in range(0, 100, 20)]
    assert covered == 1.0 and threshold == 100
    assert hds.pieces(45, 20) == [15, 15, 15] and hds.pieces(0, 20) == []


def test_a_hot_rule_inside_a_long_one_splits_its_stretches():
    """The inner pair (7 8) repeats far more often than the long walk it sits
    in; it is a stream of its own, and the walk's stretches around it are
    pieces."""
    walk = list(range(100, 130)) + [7, 8] + list(range(130, 160))
    trace = walk * 4 + [7, 8] * 40
    streams, _, _ = hds.hot_streams(trace, target=0.9)
    assert ([7, 8], 44) in streams
    assert all(7 not in s or s == [7, 8] for s, _ in streams)
    assert sum(len(s) for s, u in streams if s != [7, 8]) == 60


def test_analyse_gives_the_profiles_record():
    trace = heaptrace.Trace(burst=4096, period=2, seen=5000, contexts=array("I", [3, 4, 3]),
                            sizes=array("I", [32, 32, 32]), refs=array("I", [0, 1, 2] * 6))
    hs = hds.analyse(trace)
    assert hs["trace"] == {"references": 18, "objects": 3, "macro_accesses": 5000, "burst": 4096,
                           "sampled_one_in": 2}
    assert hs["coverage"] >= 0.9 and hs["sets"][0]["contexts"] == [3, 4]
    assert hs["sets"][0]["saving"] > 0 and hs["sets"][0]["streams"] >= 1


def test_trace_files_are_read_and_bad_ones_refused():
    trace = heaptrace.Trace(4096, 1, 3, array("I", [5, 6]), array("I", [16, 24]), array("I", [0, 1, 0]))
    data = heaptrace.encode(trace)
    assert heaptrace.parse(data) == trace
    for bad, why in [(b"NOTATRACE" + data[9:], "not a heap trace"), (data[:-2], "truncated"),
                     (data[:-4] + bytes([9, 0, 0, 0]), "reference to object 9 of 2"),
                     (data[:8] + bytes(4) + data[12:], "must be positive")]:
        with pytest.raises(ValueError, match=why):
            heaptrace.parse(bad)


def test_sequitur_refuses_what_it_cannot_encode():
    with pytest.raises(CohortError, match="SEQUITUR failed: cohort-sequitur: a symbol of 2\\^31 or more"):
        sequitur.build([1, 2, 1 << 31])
    with pytest.raises(ValueError, match="not a grammar"):
        sequitur.parse(b"CHGRAM2\0" + bytes(8))
    with pytest.raises(ValueError, match="truncated"):
        sequitur.parse(sequitur.MAGIC + array("I", [1, 5, 1, 2]).tobytes())
