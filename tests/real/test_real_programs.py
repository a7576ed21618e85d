"""Real programs under the runtime, passing through and with every small
allocation grouped, must produce byte-identical output."""

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROGRAMS, cohort_env, run
from cohort.plan.handplan import calls, direct_call_sites, write_plan

MODES = [{}, {"mode": "off"}, {"mode": "all"}, {"mode": "random:4"}]
IDS = ["preload", "off", "all", "random"]

PY_SCRIPT = r"""
import collections, json, re
words = re.findall(r"[a-z]+", open('/usr/share/common-licenses/GPL-3').read().lower())
c = collections.Counter(words)
d = {w: [len(w), n, w[::-1]] for w, n in c.items()}
print(len(words), len(c), c.most_common(5))
print(json.dumps(sorted(d.items())[:50])[:2000])
print(sorted(c)[-10:], sum(len(v[2]) for v in d.values()))
"""


def executable(argv):
    exe = Path(shutil.which(str(argv[0])) or argv[0]).resolve()
    return exe if exe.read_bytes()[:4] == b"\x7fELF" else None


def walk_plan(exe, tmp_path):
    """A plan for the program's own executable whose one selector site is
    never on any stack: every small allocation is walked to the end of its
    stack and matches nothing (run with patching off: the site is no call)."""
    return write_plan(tmp_path / "walk.plan", [exe], [(0, 0x1001, None)], ["never"], [(0, [0])])


# Debian's python3 (the interpreter in one executable); another build may
# keep its code in libpython, which the plans here do not name.
PYTHON3 = Path("/usr/bin/python3").resolve() if Path("/usr/bin/python3").exists() else Path(sys.executable).resolve()


def patched_plan(exe, tmp_path):
    """A plan whose selector and stop sites are 68 direct calls (or all, if
    fewer) picked at random across the executable: each is patched, so the
    program runs through their stubs, and its allocations are decided from
    their bits."""
    rng = random.Random(7)
    calls = direct_call_sites(exe)
    picked = sorted(rng.sample(calls, min(68, len(calls))))
    sites = [(0, off, f"stop={i % 4}" if i % 17 == 3 else None) for i, off in enumerate(picked)]
    selects = [(i % 4, [i]) for i, (_, _, v) in enumerate(sites) if v is None]
    return write_plan(tmp_path / "patched.plan", [exe], sites, ["g0", "g1", "g2", "g3"], selects, version=3)


def direct_plan(exe, tmp_path):
    """A plan whose sites are the executable's own direct calls of malloc and
    operator new (up to 200), each with a verdict that decides alone: a
    group (group=G) or, one in three, cold with a rest group. The runtime
    patches them to reach their groups directly while the program runs."""
    callees = re.compile(r"<(malloc|_Znwm|_Znam)(@plt)?>")
    rets = sorted({ret for _, mnemonic, operand, ret in calls(exe)
                   if mnemonic.startswith("call") and callees.search(operand)})[:200]
    sites = [(0, ret, "cold" if i % 3 == 2 else f"group={i % 4}") for i, ret in enumerate(rets)]
    return write_plan(tmp_path / "direct.plan", [exe], sites, ["g0", "g1", "g2", "g3", "rest"], [],
                      version=4, rest="4 max=256")


def same_everywhere(argv, tmp_path, allocator="glibc", cwd=None, stdin=None):
    env0 = {k: v for k, v in os.environ.items() if not k.startswith("COHORT_") and k != "LD_PRELOAD"}
    base = subprocess.run([str(a) for a in argv], env=env0, capture_output=True, cwd=cwd, input=stdin, timeout=300)
    assert base.returncode == 0, base.stderr
    exe = executable(argv)
    plans = [{"plan": walk_plan(exe, tmp_path), "patch": 0}, {"plan": patched_plan(exe, tmp_path)},
             {"plan": direct_plan(exe, tmp_path), "direct": True}] if exe else []
    for settings in MODES + plans:
        stats = tmp_path / "stats.json"
        direct = settings.pop("direct", False)
        r = subprocess.run([str(a) for a in argv], env=cohort_env(allocator, stats=stats, **settings),
                           capture_output=True, cwd=cwd, input=stdin, timeout=300)
        assert r.returncode == base.returncode, (settings, r.stderr)
        assert r.stdout == base.stdout, settings
        assert r.stderr == base.stderr, settings
        if settings.get("mode") == "all":
            groups = json.loads(stats.read_text())["groups"]
            assert groups[0]["allocations"] > 100, "the program's objects should really be grouped"
        if settings.get("patch") == 0:
            st = json.loads(stats.read_text())
            ident = st["identification"]
            assert st["plan_active"] and ident["walk_group"] == 0
            assert ident["walk_none"] + ident["truncated"] > 100, "the program's allocations should be walked"
        elif direct:
            st = json.loads(stats.read_text())
            assert st["plan_active"] and st["patch"]["direct_sites"] >= 1, st["patch"]
            assert st["identification"]["direct"] > 0, st["identification"]
        elif "plan" in settings:
            st = json.loads(stats.read_text())
            wanted = sum(1 for line in settings["plan"].read_text().splitlines() if line.startswith("site "))
            assert st["plan_active"] and st["patch"]["sites_patched"] >= 0.9 * wanted, st["patch"]
            assert st["identification"]["patched"] > 100, "the program's allocations should be decided by bits"


@pytest.mark.parametrize("allocator", ["glibc", "jemalloc"])
def test_python(tmp_path, allocator):
    same_everywhere([PYTHON3, "-c", PY_SCRIPT], tmp_path, allocator)


PY_THREADS = r"""
import json, threading
res = [0] * 4
def work(k):
    for i in range(3000):
        res[k] += len(json.dumps({str(j): [j] * (j % 7) for j in range(i % 30)}))
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print(res)
"""


def test_python_threads(tmp_path):
    same_everywhere([PYTHON3, "-c", PY_THREADS], tmp_path)


def test_sort(tmp_path):
    rng = random.Random(7)
    data = tmp_path / "data.txt"
    with open(data, "w") as f:
        for i in range(250000):
            f.write(f"{rng.random():.12f} {rng.randrange(10**9)} line{i}\n")
    assert data.stat().st_size > 5_000_000
    same_everywhere(["sort", "-k2,2n", "-k1,1", data], tmp_path)
    same_everywhere(["sort", "-u", "--parallel=2", "-S", "2M", data], tmp_path, "jemalloc")


def test_git(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e", GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
    for i in range(30):
        (repo / f"f{i % 7}.txt").write_text("\n".join(f"line {i} {k}" for k in range(200)))
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
        subprocess.run(["git", "commit", "-qm", f"c{i}"], cwd=repo, check=True, env=env)
    same_everywhere(["git", "log", "--stat", "--format=%H %s"], tmp_path, cwd=repo)
    same_everywhere(["git", "-c", "core.pager=cat", "diff", "HEAD~20", "HEAD"], tmp_path, cwd=repo)
    same_everywhere(["git", "gc", "-q", "--aggressive"], tmp_path, cwd=repo)
    same_everywhere(["git", "fsck", "--full"], tmp_path, cwd=repo)


@pytest.mark.parametrize("allocator", ["glibc", "jemalloc", "tcmalloc", "mimalloc"])
def test_cxx_map_string(tmp_path, allocator):
    same_everywhere([PROGRAMS / "cxx_map"], tmp_path, allocator)
