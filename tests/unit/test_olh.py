"""Object-Local Heaps (olh/): the C tests in tests/olh, with and without the
debug checks, and each misuse, which must abort with a message that names it."""

import pytest

from conftest import BUILD, run

OLH = BUILD / "tests" / "olh"


@pytest.mark.parametrize("variant", ["test_olh", "test_olh_debug"])
def test_behaviour(variant):
    r = run([OLH / variant])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip().endswith("test_olh: ok")


# Caught in every build: the collector and free check what they touch anyway.
ALWAYS = [
    ("double-free", "olh: olh_free(): double free of object 1 in pool 'node'"),
    ("free-unallocated", "olh: olh_free(): object 999 of pool 'node' was never allocated"),
    ("free-null", "olh: olh_free(): null reference (index 0) in pool 'node'"),
    ("collect-freed", "olh: olh_collect(): object 1 of pool 'node' refers through field 'next' "
                      "to object 2 of pool 'node', which is freed"),
    ("collect-freed-root", "olh: olh_collect(): root 0 refers to object 1 of pool 'node', "
                           "which is freed"),
]
# Caught by a program built with -DOLH_DEBUG.
DEBUG = [
    ("use-freed", "olh: object 2 of pool 'node' is freed (used through field 'id')"),
    ("use-null", "olh: null reference used in pool 'node' (field 'id')"),
    ("local-range", "olh: 16-bit range exhausted: object 1 of pool 'node' is in sub-pool 0"),
    ("stale-global", "to pool 'node' is stale: it was made before the pool's last collection"),
    ("stale-address", "through a raw address into pool 'node' from before its collection 1"),
]


def aborted_with(r, message):
    err = r.stderr.decode()
    assert r.returncode != 0, r.stdout.decode()
    assert "not caught" not in r.stdout.decode()
    assert message in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("variant", ["test_olh", "test_olh_debug"])
@pytest.mark.parametrize("misuse,message", ALWAYS)
def test_misuse_always_caught(variant, misuse, message):
    aborted_with(run([OLH / variant, misuse]), message)


@pytest.mark.parametrize("misuse,message", DEBUG)
def test_misuse_caught_in_debug_builds(misuse, message):
    aborted_with(run([OLH / "test_olh_debug", misuse]), message)


def test_debug_from_the_environment():
    """OLH_DEBUG=1 makes every pool a debug pool: a raw address kept across a
    collection is named, in a program built without -DOLH_DEBUG."""
    import os
    env = dict(os.environ, OLH_DEBUG="1")
    aborted_with(run([OLH / "test_olh", "stale-address"], env=env),
                 "through a raw address into pool 'node' from before its collection 1")


def test_release_builds_do_not_check_accesses():
    """What the debug checks cost is not paid without them: a use of a freed
    object reads its (zeroed) memory."""
    r = run([OLH / "test_olh", "use-freed"])
    assert r.returncode == 0 and "not caught" in r.stdout.decode()


def test_example_program():
    """wordfreq counts words in a tree, forgets the postings of words seen
    once, and collects both pools: the garbage is freed and the tree is laid
    out depth first."""
    text = b"the cat saw the dog and the bird saw the cat\n" * 50 + b"zebra quail\n"
    r = run([BUILD / "olh" / "wordfreq"], input=text)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode().splitlines()
    assert out[0] == "552 words, 8 distinct, 550 postings kept, 2 freed by the collection"
    assert out[1] == "tree nodes out of depth-first order after collecting: 0"
    assert out[2].split() == ["the", "200", "last", "at", "548"]


def test_bench_script_runs(tmp_path):
    """scripts/bench-olh.py: one small trial of every section gives a table
    for each and the plot."""
    import os
    import sys
    from conftest import ROOT
    env = dict(os.environ, BENCH_RESULTS=str(tmp_path), OLH_N="2000")
    r = run([sys.executable, ROOT / "scripts" / "bench-olh.py", "1"], env=env)
    assert r.returncode == 0, r.stderr.decode()
    md = (tmp_path / "olh.md").read_text()
    for title in ["## alloc", "## grow", "## iterate", "## fragment", "## tree",
                  "collecting, amortised and not"]:
        assert title in md
    assert "| tree | " in md and "olh-grouped-blocks" in md
    assert (tmp_path / "olh.png").stat().st_size > 1000


def test_installed_library_builds_a_program(tmp_path):
    """`cmake --install` ships libolh.so and olh.h beside libcohort: the
    example builds against the installed copy alone and runs."""
    prefix = tmp_path / "prefix"
    r = run(["cmake", "--install", BUILD, "--prefix", prefix])
    assert r.returncode == 0, r.stderr.decode()
    libdir = next(p.parent for p in prefix.rglob("libolh.so"))
    assert (libdir / "libcohort.so").exists()
    assert (prefix / "include" / "olh.h").exists()
    assert (prefix / "include" / "cohort" / "pool.h").exists()
    from conftest import ROOT
    exe = tmp_path / "wordfreq"
    r = run(["cc", "-std=c11", "-O2", "-I", prefix / "include", ROOT / "olh" / "example" / "wordfreq.c",
             "-L", libdir, "-lolh", f"-Wl,-rpath,{libdir}", "-o", exe])
    assert r.returncode == 0, r.stderr.decode()
    r = run([exe], input=b"one two two\n")
    assert r.returncode == 0 and r.stdout.decode().startswith("3 words, 2 distinct")
