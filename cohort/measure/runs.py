"""Running a program for a measurement: its environment (the user's own
COHORT_* settings and preloads left out), one timed run with its output
checked against the reference run's, one run under cachegrind in the fixed
geometry, and the runs with the heap and stack moved that give a
baseline's layout band. bench, confirm, tune and the prefetch check all
measure through here."""

import hashlib
import os
import re
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from cohort.errors import CohortError
from cohort.formats.cgfile import runtime_share
from cohort.paths import measure_tool, shift_library
from cohort.measure.runner import open_input


GEOMETRY = {"D1": "32768,8,64", "LL": "1048576,16,64"}
CACHEGRIND_GEOMETRY = [f"--D1={GEOMETRY['D1']}", f"--LL={GEOMETRY['LL']}"]   # cachegrind's options for it


def clean_environment(base=None):
    """os.environ (or base) without the user's own COHORT_* settings and
    preloads, which would skew every run."""
    return {k: v for k, v in (os.environ if base is None else base).items()
            if not k.startswith("COHORT_") and k != "LD_PRELOAD"}


def alone_environment(base_env, lib):
    """A run of the allocator alone: lib (allocator_library's) preloaded,
    or nothing for glibc's own malloc."""
    return dict(base_env, LD_PRELOAD=str(lib)) if lib else dict(base_env)


# A run's standard output is kept in memory up to this many bytes, to show
# where a mismatching run's output first differs from the reference's.
KEPT_OUTPUT = 1 << 16


def output_digest(data, ignore=None):
    """(SHA-256 of a run's standard output, the output kept to compare):
    with `ignore` (a compiled pattern, --ignore-output), the lines it
    matches anywhere are left out of both (a program that prints its own
    run time or the date)."""
    if ignore is not None:
        data = b"".join(line for line in data.splitlines(keepends=True)
                        if not ignore.search(line.decode(errors="replace")))
    return hashlib.sha256(data).hexdigest(), data[:KEPT_OUTPUT]


def ignore_pattern(text):
    """--ignore-output's regular expression, compiled; None for none; a
    one-line CohortError if it does not compile."""
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as e:
        raise CohortError(f"--ignore-output {text!r} is not a regular expression ({e})") from None


def first_difference(mine, theirs):
    """Where two outputs first differ, in words: the line number and both
    lines, shortened."""
    a, b = mine.splitlines(), theirs.splitlines()
    for i in range(max(len(a), len(b))):
        x = a[i].decode(errors="replace") if i < len(a) else None
        y = b[i].decode(errors="replace") if i < len(b) else None
        if x != y:
            show = lambda t: "no such line" if t is None else repr(t[:80])  # noqa: E731
            return f"line {i + 1}: {show(x)}, the reference's {show(y)}"
    return "beyond the first 64 KiB"


def sha256_file(f):
    h = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


class OutputFile:
    """The file the target writes (--output-file). clear() before a run
    removes it, so a stale file cannot pass as that run's output; collect()
    after the run hashes it. Only a file one of our runs wrote is removed:
    collect() notes its identity (device, inode, size, mtime), and clear()
    stops the bench rather than delete a file that is not the one noted.
    With force, the file found at the start may be removed too. done()
    removes what the last run left, so the bench leaves no file behind."""

    def __init__(self, path, force=False):
        self.path = path
        self.initial_ok = force     # may the file there before any run go?
        self.noted = None           # identity of the file the last run left
        self.running = False        # a run started since clear(): the file is its

    @staticmethod
    def _identity(st):
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, stat.S_IFMT(st.st_mode))

    def _ours(self, st):
        if self.running:
            return True
        if self.noted is not None:
            return self._identity(st) == self.noted
        return self.initial_ok

    def clear(self):
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            self.running = True
            return
        if stat.S_ISDIR(st.st_mode) or not self._ours(st):
            raise CohortError(f"--output-file {self.path} was replaced by something other than this bench's "
                              "runs; stopping without deleting it")
        os.unlink(self.path)
        self.running = True

    def collect(self):
        """(digest or None, reason it is None)."""
        self.running, self.noted, self.initial_ok = False, None, False
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None, f"wrote no output file {self.path}"
        self.noted = self._identity(st)
        if not stat.S_ISREG(st.st_mode):
            return None, f"output file {self.path} is not a regular file"
        try:
            with open(self.path, "rb") as f:
                return sha256_file(f), None
        except OSError as e:
            return None, f"cannot read output file {self.path} ({e.strerror})"

    def done(self):
        """Remove the file the last run left, if it is still that file."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode) and (self.running or (self.noted is not None
                                                              and self._identity(st) == self.noted)):
            os.unlink(self.path)


class Usage:
    """The part of a struct rusage the bench keeps."""

    def __init__(self, maxrss_kb, utime_s):
        self.ru_maxrss, self.ru_utime = maxrss_kb, utime_s


def run_once(argv, env, workdir, stdin=None, output_file=None, ignore=None):
    """Wall and user time, peak RSS, exit status, output digest; with an
    OutputFile, its digest too (None if the run wrote none, with the reason).
    The target reads a fresh stream of the file stdin, else /dev/null."""
    if output_file is not None:
        output_file.clear()
    source = open_input(stdin) if stdin is not None else subprocess.DEVNULL
    measure = measure_tool()
    report_r, report_w = os.pipe() if measure else (None, None)
    if measure:   # the command's own peak RSS, not Python's (tools/measure.c)
        env = {k: v for k, v in env.items() if k != "LD_PRELOAD"} | (
            {"COHORT_MEASURE_PRELOAD": env["LD_PRELOAD"]} if "LD_PRELOAD" in env else {})
        argv = [str(measure), str(report_w), *argv]
    try:
        with tempfile.TemporaryFile(dir=workdir) as out, tempfile.TemporaryFile(dir=workdir) as err:
            t0 = time.perf_counter()
            try:
                proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=source,
                                        pass_fds=(report_w,) if measure else ())
            except OSError as e:
                if measure:
                    os.close(report_r)
                raise CohortError(f"cannot run {argv[0]}: {e.strerror}") from e
            finally:
                if measure:
                    os.close(report_w)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            if measure:
                with os.fdopen(report_r, "rb") as f:
                    words = f.read(200).split()
                if len(words) != 4:
                    err.seek(0)
                    raise CohortError(f"cannot run {argv[2]}: "
                                      f"{err.read(300).decode(errors='replace').strip() or 'no report'}")
                status = int(words[0])
                usage = Usage(int(words[1]), float(words[2]))
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            digest, kept = output_digest(out.read(), ignore)
            err.seek(0, os.SEEK_END)
            err.seek(max(err.tell() - 400, 0))
            tail = err.read().decode(errors="replace")
    finally:
        if source is not subprocess.DEVNULL:
            source.close()
    r = {"wall_s": round(wall, 6), "user_s": round(usage.ru_utime, 6),
         "max_rss_kb": usage.ru_maxrss, "exit": proc.returncode, "output_sha256": digest,
         "stderr_tail": tail, "stdout": kept}
    if output_file is not None:
        r["output_file_sha256"], r["output_file_problem"] = output_file.collect()
    return r


def judge(r, reference):
    """The trial's status and, unless ok, the reason in words. reference:
    the first successful baseline run's digests, or None (this is it)."""
    if r["exit"] != 0:
        return "failed", f"exit {r['exit']}"
    if r.get("output_file_problem"):
        return "failed", r["output_file_problem"]
    if reference is not None:
        if r["output_sha256"] != reference["output_sha256"]:
            where = first_difference(r.get("stdout", b""), reference.get("stdout", b""))
            return "mismatch", f"stdout differs from the reference run's ({where})"
        if r.get("output_file_sha256") != reference.get("output_file_sha256"):
            return "mismatch", "output file differs from the reference run's"
    return "ok", None


def cachegrind(argv, env, stdin=None, output_file=None, ignore=None):
    """One cachegrind run: its totals, and the share of instructions and D1
    misses that lie in Cohort's runtime (runtime_Ir, runtime_D1_misses)."""
    with tempfile.TemporaryDirectory(prefix="cohort-cg-") as tmp:
        out = Path(tmp) / "cachegrind.out"
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHEGRIND_GEOMETRY,
               f"--cachegrind-out-file={out}", *argv]
        if output_file is not None:
            output_file.clear()
        source = open_input(stdin) if stdin is not None else subprocess.DEVNULL
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, stdin=source)
        finally:
            if source is not subprocess.DEVNULL:
                source.close()
        split = runtime_share(out) if out.exists() else None
    err = r.stderr.decode(errors="replace")

    def grab(label):
        m = re.search(rf"{label}:\s+([\d,]+)", err)
        return int(m.group(1).replace(",", "")) if m else None
    result = {"exit": r.returncode, "output_sha256": output_digest(r.stdout, ignore)[0],
              "D_refs": grab("D   refs"), "D1_misses": grab("D1  misses"), "LLd_misses": grab("LLd misses"),
              "I_refs": grab("I   refs")}
    if split is not None:
        result["runtime_Ir"], result["runtime_D1_misses"] = split["Ir"], split["D1_misses"]
        if split["D1_block_misses"] is not None:
            result["runtime_D1_block_misses"] = split["D1_block_misses"]
    if r.returncode != 0 or result["D1_misses"] is None:
        result["error"] = err.strip().splitlines()[-1] if err.strip() else f"exit {r.returncode}"
    if output_file is not None:
        result["output_file_sha256"], problem = output_file.collect()
        if problem and "error" not in result:
            result["error"] = problem
    return result


MAX_LAYOUT_RUNS = 16


def layouts(n):
    """n (heap shift, stack pad) pairs in bytes: the heap moved by 16-byte
    steps and the stack by 64-byte steps across a page, by strides prime to
    the page so that no two runs share either."""
    return [(16 * (1 + (37 * k) % 255), 64 * (1 + (23 * k) % 63)) for k in range(1, n + 1)]


def layout_counts(argv, env, base, n, stdin, output_file, log, name, ignore=None):
    """cachegrind runs of one baseline under n moved layouts: [{heap_shift,
    stack_pad, I_refs, D1_misses, LLd_misses}] of those that ran as the
    baseline's own run did (same output); one that did not is left out,
    with a line in the log."""
    shim = str(shift_library())
    out = []
    for heap, pad in layouts(n):
        e = dict(env)
        e["LD_PRELOAD"] = f"{shim} {e['LD_PRELOAD']}" if e.get("LD_PRELOAD") else shim
        e["COHORT_SHIFT_HEAP"] = str(heap)
        e["COHORT_LAYOUT_PAD"] = "x" * pad   # the environment sits above the stack: this moves it
        log(f"cohort bench: cachegrind {name}, heap +{heap} B, stack -{pad} B")
        r = cachegrind(argv, e, stdin=stdin, output_file=output_file, ignore=ignore)
        if "error" in r or r["output_sha256"] != base["output_sha256"] \
                or r.get("output_file_sha256") != base.get("output_file_sha256"):
            log(f"cohort bench: warning: {name} with its layout moved (heap +{heap} B) did not run as before; "
                "left out of the band")
            continue
        out.append({"heap_shift": heap, "stack_pad": pad, "I_refs": r["I_refs"], "D1_misses": r["D1_misses"],
                    "LLd_misses": r["LLd_misses"]})
    return out
