"""`cohort bench`: baseline and optimised runs of one program, side by side.

Every trial round runs every configuration once, in a fixed order (glibc,
cohort+glibc, jemalloc, cohort+jemalloc, random control), so drifts on a noisy
machine hit all of them alike; a warm-up round is discarded. A trial that
fails or whose output differs from the first glibc baseline is kept in
results.json, flagged, and never enters a median. Cache misses come from
cachegrind on a separate (smaller) input with a fixed, recorded geometry.
The schema is docs/results-format.md."""

import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from cohort import __version__
from cohort.errors import CohortError
from cohort.files import write_atomically
from cohort.paths import allocator_library
from cohort.runner import check_plan_fits, environment, resolve_program

FORMAT = "cohort-results"
VERSION = 1
GEOMETRY = {"D1": "32768,8,64", "LL": "1048576,16,64"}


# ---- configurations --------------------------------------------------------

def configurations(allocators, plan, random_control=True, base_env=None):
    """[(name, kind, allocator, env builder)] in trial order. The env builder
    takes the statistics path (or None)."""
    # The user's own COHORT_* settings and preloads would skew every run.
    base_env = {k: v for k, v in (os.environ if base_env is None else base_env).items()
                if not k.startswith("COHORT_") and k != "LD_PRELOAD"}
    configs = []
    for a in allocators:
        lib = allocator_library(a)

        def baseline(stats, lib=lib):
            return dict(base_env, LD_PRELOAD=str(lib)) if lib else dict(base_env)

        def optimised(stats, a=a):
            return environment(plan=plan, allocator=a, stats=stats, base=base_env)

        configs.append((a, "baseline", a, baseline))
        configs.append((f"cohort+{a}", "cohort", a, optimised))
    if random_control:
        # HALO's control: each small allocation to one of four pools at
        # random, in front of the first allocator, compared with its baseline.
        def rnd(stats, a=allocators[0]):
            return environment(allocator=a, mode="random:4", stats=stats, base=base_env)
        configs.append(("random", "random", allocators[0], rnd))
    return configs


# ---- one run ---------------------------------------------------------------

def run_once(argv, env, workdir):
    """Wall and user time, peak RSS, exit status, output digest."""
    with tempfile.TemporaryFile(dir=workdir) as out, tempfile.TemporaryFile(dir=workdir) as err:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise CohortError(f"cannot run {argv[0]}: {e.strerror}") from e
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        digest = hashlib.sha256(out.read()).hexdigest()
        err.seek(0)
        tail = err.read()[-400:].decode(errors="replace")
    return {"wall_s": round(wall, 6), "user_s": round(usage.ru_utime, 6),
            "max_rss_kb": usage.ru_maxrss, "exit": proc.returncode, "output_sha256": digest,
            "stderr_tail": tail if proc.returncode != 0 else ""}


def percentile(values, q):
    """Linear interpolation between closest ranks (q in [0, 1])."""
    v = sorted(values)
    if not v:
        return None
    pos = (len(v) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarise(trials, names):
    out = {}
    for name in names:
        ok = [t for t in trials if t["config"] == name and t["status"] == "ok"]
        walls = [t["wall_s"] for t in ok]
        out[name] = {
            "ok_trials": len(ok),
            "failed_trials": sum(1 for t in trials if t["config"] == name and t["status"] != "ok"),
            "wall_median_s": percentile(walls, 0.5), "wall_p25_s": percentile(walls, 0.25),
            "wall_p75_s": percentile(walls, 0.75),
            "user_median_s": percentile([t["user_s"] for t in ok], 0.5),
            "max_rss_median_kb": percentile([t["max_rss_kb"] for t in ok], 0.5),
        }
    return out


# ---- cachegrind ------------------------------------------------------------

def cachegrind(argv, env):
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--D1={GEOMETRY['D1']}",
           f"--LL={GEOMETRY['LL']}", "--cachegrind-out-file=/dev/null", *argv]
    r = subprocess.run(cmd, env=env, capture_output=True)
    err = r.stderr.decode(errors="replace")

    def grab(label):
        m = re.search(rf"{label}:\s+([\d,]+)", err)
        return int(m.group(1).replace(",", "")) if m else None
    result = {"exit": r.returncode, "output_sha256": hashlib.sha256(r.stdout).hexdigest(),
              "D_refs": grab("D   refs"), "D1_misses": grab("D1  misses"), "LLd_misses": grab("LLd misses")}
    if r.returncode != 0 or result["D1_misses"] is None:
        result["error"] = err.strip().splitlines()[-1] if err.strip() else f"exit {r.returncode}"
    return result


# ---- the whole bench -------------------------------------------------------

def machine():
    info = {"hostname": platform.node(), "kernel": platform.release(), "python": platform.python_version(),
            "cpus": os.cpu_count()}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["memory_kb"] = int(line.split()[1])
                break
    except OSError:
        pass
    return info


def bench(target, outdir, trials=10, warmup=1, allocators=("glibc", "jemalloc"), plan=None, train=None,
          cachegrind_args=None, random_control=True, force=False, log=print):
    outdir = Path(outdir)
    results_path = outdir / "results.json"
    if results_path.exists() and not force:
        raise CohortError(f"{results_path} exists (use --force to replace it)")
    if trials < 1 or warmup < 0:
        raise CohortError("--trials must be at least 1 and --warmup at least 0")
    if (plan is None) == (train is None):
        raise CohortError("give exactly one of --plan PLAN or --train 'TRAIN ARGS'")
    if not allocators:
        raise CohortError("--allocators needs at least one allocator")
    prog = resolve_program(target)
    outdir.mkdir(parents=True, exist_ok=True)
    commands = {"ref": target}
    if train is not None:
        from cohort.planner import PLAN_DEFAULTS, plan_command
        from cohort.profile import profile
        train_argv = [target[0], *shlex.split(train)]
        commands["train"] = train_argv
        log(f"cohort bench: profiling {' '.join(train_argv)}")
        profile(train_argv, outdir / "profile.json", force=True)
        plan_command(outdir / "profile.json", outdir / "plan", force=True, **PLAN_DEFAULTS)
        plan = outdir / "plan"
    plan = Path(plan).resolve()
    check_plan_fits(plan, prog)
    configs = configurations(allocators, plan, random_control)
    names = [c[0] for c in configs]
    stats_dir = outdir / "stats"
    stats_dir.mkdir(exist_ok=True)
    trial_log, reference = [], None
    with tempfile.TemporaryDirectory(prefix="cohort-bench.") as work:
        for rnd in range(warmup + trials):
            for name, kind, alloc, make_env in configs:
                stats = stats_dir / f"{name}.json" if kind != "baseline" else None
                r = run_once(target, make_env(stats), work)
                r.update(config=name, round=rnd, warmup=rnd < warmup)
                if reference is None and kind == "baseline" and r["exit"] == 0:
                    reference = r["output_sha256"]
                if r["exit"] != 0:
                    r["status"] = "failed"
                elif reference is not None and r["output_sha256"] != reference:
                    r["status"] = "mismatch"
                else:
                    r["status"] = "ok"
                if r["status"] != "ok":
                    log(f"cohort bench: {name} round {rnd}: {r['status'].upper()} "
                        f"(exit {r['exit']}{'; ' + r['stderr_tail'].strip().splitlines()[-1] if r['stderr_tail'].strip() else ''})")
                trial_log.append(r)
            if rnd >= warmup:
                log(f"cohort bench: round {rnd - warmup + 1}/{trials} done")
    measured = [t for t in trial_log if not t["warmup"]]
    summary = summarise(measured, names)
    ratios = {}
    for name, kind, alloc, _ in configs:
        if kind == "baseline":
            continue
        base = summary[alloc]["wall_median_s"]
        mine = summary[name]
        if base and mine["wall_median_s"] is not None:
            ratios[name] = {"vs": alloc, "time_ratio": mine["wall_median_s"] / base,
                            "time_ratio_p25": mine["wall_p25_s"] / base,
                            "time_ratio_p75": mine["wall_p75_s"] / base}
    cg = None
    if cachegrind_args is not None:
        cg_argv = [target[0], *shlex.split(cachegrind_args)]
        commands["cachegrind"] = cg_argv
        cg = {}
        for name, kind, alloc, make_env in configs:
            log(f"cohort bench: cachegrind {name}")
            cg[name] = cachegrind(cg_argv, make_env(None))
        ref_digest = cg[names[0]]["output_sha256"]
        for name, r in cg.items():
            if "error" not in r and r["output_sha256"] != ref_digest:
                r["error"] = "output differs from the glibc baseline"
        for name, kind, alloc, _ in configs:
            if kind != "baseline" and name in ratios and "error" not in cg[name] and "error" not in cg[alloc]:
                ratios[name]["d1_ratio"] = cg[name]["D1_misses"] / max(cg[alloc]["D1_misses"], 1)
                ratios[name]["lld_ratio"] = cg[name]["LLd_misses"] / max(cg[alloc]["LLd_misses"], 1)
    runtime_stats = {}
    for name in names:
        p = stats_dir / f"{name}.json"
        if p.exists():
            try:
                st = json.loads(p.read_text())
            except ValueError:
                continue
            groups = st.get("groups", [])
            frag = sum(g.get("fragmentation_at_peak_bytes", 0) for g in groups)
            resident = sum(g.get("resident_at_peak_bytes", 0) for g in groups)
            runtime_stats[name] = {
                "groups": len(groups), "grouped_allocations": sum(g.get("allocations", 0) for g in groups),
                "fragmentation_at_peak_bytes": frag,
                "fragmentation_at_peak_percent": round(100 * frag / resident, 2) if resident else 0.0,
                "identification": st.get("identification", {}), "plan_active": st.get("plan_active"),
            }
    problems = [f"{t['config']} round {t['round']}: {t['status']}" for t in measured if t["status"] != "ok"]
    if cg:
        problems += [f"cachegrind {n}: {r['error']}" for n, r in cg.items() if "error" in r]
    results = {
        "format": FORMAT, "version": VERSION, "cohort": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
        "workload": os.path.basename(prog), "commands": commands, "plan": str(plan),
        "parameters": {"trials": trials, "warmup": warmup, "allocators": list(allocators),
                       "random_control": random_control, "cache_geometry": GEOMETRY, "order": names},
        "trials": trial_log, "summary": summary, "ratios": ratios, "cachegrind": cg,
        "runtime_stats": runtime_stats, "problems": problems,
    }
    write_atomically(results_path, json.dumps(results, indent=1) + "\n")
    try:
        from cohort.plots import bench_plots
        bench_plots(results, outdir)
    except ImportError:
        log("cohort bench: matplotlib is missing; no plots (pip install matplotlib)")
    return results


def load_results(path):
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CohortError(f"{path}: no such results file") from None
    except (OSError, ValueError) as e:
        raise CohortError(f"{path}: not a results file ({e.__class__.__name__})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CohortError(f"{path}: not a Cohort results file")
    if data.get("version") != VERSION:
        raise CohortError(f"{path}: results version {data.get('version')} is not supported")
    for key in ("workload", "summary", "ratios", "trials", "parameters"):
        if key not in data:
            raise CohortError(f"{path}: corrupt results (no '{key}')")
    return data


def console_table(results):
    s, r, cg = results["summary"], results["ratios"], results["cachegrind"] or {}
    lines = [f"{'config':<18} {'ok':>3} {'median s':>9} {'p25':>8} {'p75':>8} {'time vs':>14} {'D1 misses':>12} {'D1 vs':>7}"]
    for name in results["parameters"]["order"]:
        x = s[name]
        ratio = r.get(name)
        tv = f"{ratio['time_ratio']:.3f} {ratio['vs']}" if ratio else ""
        d1 = cg.get(name, {}).get("D1_misses")
        dv = f"{ratio['d1_ratio']:.3f}" if ratio and "d1_ratio" in ratio else ""
        med = f"{x['wall_median_s']:.3f}" if x["wall_median_s"] is not None else "-"
        p25 = f"{x['wall_p25_s']:.3f}" if x["wall_p25_s"] is not None else "-"
        p75 = f"{x['wall_p75_s']:.3f}" if x["wall_p75_s"] is not None else "-"
        lines.append(f"{name:<18} {x['ok_trials']:>3} {med:>9} {p25:>8} {p75:>8} {tv:>14} "
                     f"{(f'{d1:,}' if d1 is not None else '-'):>12} {dv:>7}")
    for p in results["problems"]:
        lines.append(f"PROBLEM: {p}")
    return "\n".join(lines)
