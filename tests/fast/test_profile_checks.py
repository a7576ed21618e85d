"""A profile's checks with no build: corrupt profiles refused in one line,
and the hot-node filter that picks the graph's nodes."""

import json

import pytest

from conftest import DATA
from cohort.formats.profilefile import load_profile
from cohort.measure.profile import hot_nodes


def test_hot_node_filter():
    ctxs = [{"id": i, "accesses": a} for i, a in enumerate([5, 50, 0, 40, 5])]
    assert hot_nodes(ctxs, 0.9) == ([1, 3], 0.9)
    assert hot_nodes(ctxs, 0.95)[0] == [1, 3, 0]
    assert hot_nodes(ctxs, 1.0)[0] == [1, 3, 0, 4]


def test_corrupt_profiles_are_refused(tmp_path):
    from cohort.errors import CohortError
    good = json.loads((DATA / "tiny-profile.json").read_text())
    cases = {"garbage": "{not json", "other": json.dumps({"format": "x"}),
             "version": json.dumps(dict(good, version=99)),
             "dangling": json.dumps(dict(good, graph={"nodes": [7], "edges": [], "coverage": 1}))}
    for name, text in cases.items():
        f = tmp_path / name
        f.write_text(text)
        with pytest.raises(CohortError):
            load_profile(f)
    with pytest.raises(CohortError, match="no such profile"):
        load_profile(tmp_path / "absent.json")
