"""Mutated plans, and the differential check that the CLI and the runtime
agree on each (issue 20). Used by tests/integration/test_plan_fuzz.py (a bounded run in
`make test`) and scripts/fuzz-plans.py (as many mutants as asked).

Each mutant is judged three ways: the runtime's parser (cohort-plan-check),
the CLI's reader (plans.read_plan, then `cohort explain` with it, both in
this process) and, for a sample, the runtime itself preloaded into a real
process. A CLI exception other than CohortError is a traceback; a verdict
that differs is a disagreement."""

import random
import subprocess
import traceback

from cohort.errors import CohortError

BASE_V5 = b"""cohort-plan 5
# by hand, every directive once or more
max-size 4096
module 0 0123456789abcdef0123456789abcdef01234567 /usr/bin/prog
module 1 - /usr/lib/x86_64-linux-gnu/libfoo.so.1
site 0 0 0x1a2b walk
site 1 0 1f00 cold
site 2 1 0x40 group=1
site 3 0 0x88 stop=0
site 4 1 0x99 walk stop=1
site 5 0 0x100 next
group 0 hot-lists
group 1 tree
select 0 3 4
select 1 2
rest 1 max=512
path 0 3 group=0
path 0 4 5 cold
unknown-entry walk
end
"""
BASE_V1 = b"""cohort-plan 1
module 0 - prog
site 0 0 10 walk
site 1 0 20 cold
site 2 0 30
group 0 a
group 1 b
select 0 0
select 1 0 2
end
"""
BASE_V6 = BASE_V5.replace(b"cohort-plan 5", b"cohort-plan 6").replace(b"unknown-entry walk\n",
                                                                      b"unknown-entry walk\nunknown-path cold\n")
BASE_V7 = BASE_V6.replace(b"cohort-plan 6", b"cohort-plan 7").replace(b"rest 1 max=512", b"rest 1 one max=512")
BASE_V8 = BASE_V7.replace(b"cohort-plan 7", b"cohort-plan 8").replace(b"group 0 hot-lists", b"group 0 hot-lists at=32") \
    .replace(b"group 1 tree", b"group 1 tree at=0")
ANCHOR = (b"call=d:malloc in=xalloc nth=0/1 before=672cdca3,2cf281f2,24b0af4b,a41d3ffa,fc574670,fca9804d,"
          b"2cf281f2,00000000 after=2cf281f2,672cdca3,24b0af4b,dd016611,2cf281f2,672cdca3,dd016611,24b0af4b")
BASE_V9 = BASE_V8.replace(b"cohort-plan 8", b"cohort-plan 9").replace(
    b"group 0 hot-lists", b"anchor 0 " + ANCHOR + b"\nanchor 3 " + ANCHOR.replace(b"call=d:malloc", b"call=g:~0badf00d")
    .replace(b"in=xalloc", b"in=-").replace(b"nth=0/1", b"nth=0/0") + b"\ngroup 0 hot-lists")
BASES = [BASE_V9, BASE_V8, BASE_V7, BASE_V6, BASE_V5, BASE_V1]

WORDS = [b"0", b"1", b"2", b"5", b"7", b"8", b"63", b"64", b"255", b"256", b"4095", b"4096", b"131072",
         b"131073", b"-1", b"+1", b"0x", b"0x10", b"0X1f", b"0x0x10", b"1_0", "\u0663".encode(),
         b"9" * 30, b"9" * 5000, b"group=0", b"group=1", b"group=9", b"group=x", b"group=", b"stop=0",
         b"stop=1", b"stop=64", b"stop=", b"one", b"cold", b"walk", b"next", b"max=8", b"max=7", b"max=",
         b"max=131072", b"at=0", b"at=16", b"at=48", b"at=64", b"at=8", b"at=", b"at=032", b"end", b"-", b"abc", b"zz", b"0123456789abcdef", b"\x00", "\u00e9".encode(),
         b"\xed\xa0\x80", b"\xff\xfe", b"\x0c", b"\x1c", b"\r", b"#", b"path", b"site", b"group", b"select",
         b"rest", b"module", b"max-size", b"unknown-entry", b"unknown-path", b"cohort-plan", b"anchor",
         b"call=d:free", b"tofn=xalloc", b"tofn=", b"call=x:free", b"call=i:*", b"call=d:", b"in=", b"in=-", b"nth=1/1", b"nth=0/0",
         b"nth=2/1", b"nth=/1", b"before=", b"after=0,0", b"after=" + b",".join([b"00000000"] * 8),
         b"before=" + b",".join([b"ffffffff"] * 8), b"before=" + b",".join([b"0000000g"] * 8)]
LINES = [b"", b"# a comment", b"end", b"cohort-plan 5", b"cohort-plan 5 extra", b"cohort-plan 6", b"cohort-plan 7", b"cohort-plan 8",
         b"cohort-plan 9", b"anchor 1 " + ANCHOR, b"anchor 0 " + ANCHOR, b"anchor 6 " + ANCHOR,
         b"anchor 1 " + ANCHOR[:-9], b"anchor 1 " + ANCHOR + b" extra", b"anchor 1", b"cohort-plan 2", b"cohort-plan 3", b"cohort-plan 4", b"unknown-entry cold", b"unknown-entry x",
         b"unknown-path cold", b"unknown-path walk", b"unknown-path x",
         b"max-size 1", b"max-size 8", b"rest 0", b"rest 0 max=7", b"rest 0 one", b"rest 0 max=64 one", b"rest 0 one one", b"path 0 1 cold", b"path 0 0 cold",
         b"path 3 4 next", b"select 0", b"group 2 extra", b"group 2 c at=16", b"group 2 c at=17", b"group 2 c at=0032", b"group 2 c at=16 at=16", b"group 2 two words", b"module 2 - /x",
         b"module 2 zz /x", b"module 2 abc /x", b"site 6 0 0x1 group=0 stop=1", b"site 6 0 0x1 cold walk",
         b"\t site 6 1 ff \t", b"text after end", b"\x00", b"\r", "\u2028".encode()]


def mutate(data, rng):
    """One to three random edits of a plan's bytes."""
    for _ in range(rng.randint(1, 3)):
        lines = data.split(b"\n")
        k = rng.randrange(13)
        i = rng.randrange(len(lines))
        if k == 0 and len(lines) > 1:
            del lines[i]
        elif k == 1:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif k == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif k == 3:
            lines.insert(i, rng.choice(LINES))
        elif k in (4, 5, 6, 7):
            words = lines[i].split(b" ")
            w = rng.randrange(len(words))
            words[w] = rng.choice(WORDS)
            lines[i] = b" ".join(words)
        elif k == 8:
            lines[i] = lines[i] + b" " + rng.choice(WORDS)
        data = b"\n".join(lines)
        if k == 9 and data:
            p = rng.randrange(len(data))
            data = data[:p] + bytes([data[p] ^ (1 << rng.randrange(8))]) + data[p + 1:]
        elif k == 10 and data:
            p = rng.randrange(len(data) + 1)
            data = data[:p] + bytes([rng.randrange(256)]) + data[p:]
        elif k == 11 and data:
            data = data[:rng.randrange(len(data))]
        elif k == 12:
            data = data + rng.choice(LINES) + b"\n"
    return data


def mutants(seed, count):
    """count mutants of the base plans, the same for the same seed."""
    rng = random.Random(seed)
    return [mutate(BASES[i % len(BASES)], rng) for i in range(count)]


def checker_accepts(checker, path, env):
    r = subprocess.run([str(checker), str(path)], capture_output=True, env=env, timeout=60)
    if r.returncode not in (0, 1):
        raise AssertionError(f"cohort-plan-check exited {r.returncode} on {path}: {r.stderr!r}")
    return r.returncode == 0


def cli_verdict(path, profile):
    """(accepted, traceback or None): the CLI's reader, then explain with the plan."""
    from cohort.present.explain import explain
    from cohort.plans import read_plan
    try:
        read_plan(path)
    except CohortError:
        return False, None
    except Exception:
        return False, traceback.format_exc()
    try:
        explain(profile, path, graph_path=None)
    except CohortError:
        pass
    except Exception:
        return True, traceback.format_exc()
    return True, None


def runtime_accepts(library, path, env):
    """The runtime itself, preloaded into a real process: did it refuse the
    plan's text (as opposed to finding its modules absent)?"""
    env = dict(env, LD_PRELOAD=str(library), COHORT_PLAN=str(path))
    r = subprocess.run(["/bin/true"], capture_output=True, env=env, timeout=60)
    err = r.stderr.decode("utf-8", "replace")
    if r.returncode != 0:
        raise AssertionError(f"the runtime broke /bin/true with plan {path}: {err}")
    return "cohort: warning: plan " + str(path) + " line " not in err and "cannot read plan" not in err


def run(seed, count, workdir, checker, library, profile, env, runtime_every=10):
    """Judge count mutants; returns a summary dict and the problems found."""
    problems = []
    counts = {"mutants": 0, "accepted": 0, "refused": 0, "runtime_checked": 0}
    for i, data in enumerate(mutants(seed, count)):
        path = workdir / f"mutant-{i}.plan"
        path.write_bytes(data)
        c = checker_accepts(checker, path, env)
        cli, tb = cli_verdict(path, profile)
        counts["mutants"] += 1
        counts["accepted" if c else "refused"] += 1
        if tb:
            problems.append(f"mutant {i}: traceback\n{tb}")
        elif cli != c:
            problems.append(f"mutant {i}: cohort-plan-check {'accepts' if c else 'refuses'}, "
                            f"the CLI {'accepts' if cli else 'refuses'}: {data!r}")
        if i % runtime_every == 0:
            counts["runtime_checked"] += 1
            if runtime_accepts(library, path, env) != c:
                problems.append(f"mutant {i}: the runtime and cohort-plan-check disagree: {data!r}")
        if not problems or not problems[-1].startswith(f"mutant {i}:"):
            path.unlink()
    return counts, problems
