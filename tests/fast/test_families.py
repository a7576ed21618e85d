"""Context families (cohort/policies/families.py): recursive re-entries
folded out of a context, and orders joined within a module, on hand-made
sites. No build."""

from cohort.policies.families import families, fold


def test_fold_drops_recursive_reentries():
    # m, L, R in build (function 1); M in main (2); w in a wrapper (3)
    fn = {"m": 1, "L": 1, "R": 1, "M": 2, "w": 3, "x": None}
    assert fold(["m", "L", "R", "M"], fn) == ["m", "M"]
    assert fold(["m", "R", "L", "M"], fn) == ["m", "M"]
    assert fold(["w", "m", "L", "M"], fn) == ["w", "m", "M"]
    # mutual recursion a -> b -> a: the outer a's site goes
    fn2 = {"a1": "A", "b1": "B", "a2": "A", "M": "main"}
    assert fold(["a1", "b1", "a2", "M"], fn2) == ["a1", "b1", "M"]
    # sites of unknown function are never folded
    assert fold(["x", "x2", "M"], {"x": None, "x2": None, "M": 2}) == ["x", "x2", "M"]


def test_families_join_orders_and_keep_modules_apart():
    ctxs = [{"id": 0, "sites": [1, 2, 3, 4]}, {"id": 1, "sites": [1, 3, 2, 4]},
            {"id": 2, "sites": [1, 4]}, {"id": 3, "sites": [5, 4]}, {"id": 4, "sites": [6, 7]}]
    fn = {1: 0x10, 2: 0x10, 3: 0x10, 4: 0x90, 5: 0x40, 6: 0x10, 7: 0x10}
    mod = {1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 1, 7: 1}   # 6 and 7: same offsets, another module
    fams = families(ctxs, fn, mod)
    assert [f["contexts"] for f in fams] == [[0, 1, 2], [3], [4]]
    assert fams[0]["sites"] == [1, 4] and fams[2]["sites"] == [6]
