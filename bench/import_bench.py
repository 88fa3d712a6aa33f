#!/usr/bin/env python3
"""AgentBase import benchmark: one run, six figures, one table.

    python3 bench/import_bench.py [--size-mb 500] [--workdir DIR] [--keep]

(a) orjson parse-only throughput over a generated tree (read, split on b"\\n", orjson.loads)
(a2) the importer's own reader and parser over the same tree, every row derived, no store: the
     ceiling of (b) for any store on this machine (information)
(b) full import throughput into a fresh embedded SQLite store (`python -m importer import`)
(c) ratio (b)/(a)                                        target >= 0.25
(d) no-change rerun over 10,000 small files              target < 1 s
(e) rerun after appending one line to the largest file   target bytes_read <= line + 4096, elapsed_s < 0.2 s
(f) peak RSS of the full import                          target < 300 MiB

Every import runs as its own child process, started by a tiny launcher that reaps it with os.wait4():
its peak RSS is that child's ru_maxrss, not inflated by this script's memory (see _LAUNCHER).
The exit status is 0 whatever the figures are (this is a report), 1 if an import failed.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import trees  # noqa: E402  (bench/trees.py)

MIB = 1024 * 1024

# Targets
RATIO_MIN = 0.25
RERUN_MAX_S = 1.0
APPEND_SLACK_BYTES = 4096
APPEND_MAX_S = 0.2
PEAK_MAX_MIB = 300.0


def log(msg: str = "") -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------------------
# running the importer
# --------------------------------------------------------------------------------------


@dataclass
class ChildRun:
    cmd: list
    returncode: int
    wall_s: float
    peak_rss_mib: float
    stdout: str
    stderr: str
    summary: dict | None = field(default=None)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def get(self, key: str):
        return self.summary.get(key) if self.summary else None


def _maxrss_mib(ru_maxrss: int) -> float:
    # Linux reports KiB, macOS bytes.
    return ru_maxrss / MIB if sys.platform == "darwin" else ru_maxrss / 1024


# Each importer run goes through this tiny launcher (python -S, only os/sys/time loaded, ~8 MiB).
# Why: Linux carries the parent's RSS high-water mark into a child it forks/vforks and execs, so a child
# spawned straight from this script (which has just generated a tree) would report at least this
# script's own peak; getrusage(RUSAGE_CHILDREN) has the same problem. The launcher spawns the importer,
# reaps it with wait4 (rusage of that one child) and prints: exit code, ru_maxrss, wall seconds.
_LAUNCHER = """
import os, sys, time
out, err, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
           (os.POSIX_SPAWN_OPEN, 1, out, flags, 0o644),
           (os.POSIX_SPAWN_OPEN, 2, err, flags, 0o644)]
t0 = time.perf_counter()
pid = os.posix_spawn(cmd[0], cmd, os.environ, file_actions=actions)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
print(os.waitstatus_to_exitcode(status), ru.ru_maxrss, repr(wall))
"""


def run_import(tree: Path, db: Path, home: Path) -> ChildRun:
    """Run `python -m importer import <tree> --db sqlite:///<db> --json-summary` in a child process
    (via _LAUNCHER); return its exit code, wall time, own peak RSS, output and parsed JSON summary."""
    cmd = [sys.executable, "-m", "importer", "import", str(tree), "--db", f"sqlite:///{db}", "--json-summary"]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["AGENTBASE_HOME"] = str(home)  # keep any default files the importer writes inside the workdir
    env.pop("AGENTBASE_DB", None)
    with tempfile.TemporaryDirectory(prefix="agentbase-bench-run-") as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        launcher = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, str(out), str(err), *cmd],
                                  cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        stdout = out.read_text("utf-8", "replace") if out.exists() else ""
        stderr = err.read_text("utf-8", "replace") if err.exists() else ""
    try:
        code, maxrss, wall = launcher.stdout.split()
        returncode, peak, wall_s = int(code), _maxrss_mib(int(maxrss)), float(wall)
    except ValueError:  # the launcher itself failed (e.g. cannot exec): report that
        returncode, peak, wall_s = launcher.returncode or 1, 0.0, 0.0
        stderr += launcher.stderr
    run = ChildRun(cmd, returncode, wall_s, peak, stdout, stderr)
    # --json-summary: the summary is the last non-empty stdout line
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if lines:
        try:
            summary = orjson.loads(lines[-1])
            run.summary = summary if isinstance(summary, dict) else None
        except orjson.JSONDecodeError:
            pass
    return run


def report_child(label: str, run: ChildRun) -> None:
    log(f"  {label}: exit {run.returncode}, wall {run.wall_s:.3f} s, peak RSS {run.peak_rss_mib:.1f} MiB")
    if run.summary:
        log("  importer summary: " + ", ".join(f"{k}={v}" for k, v in run.summary.items()))
    else:
        log("  (no JSON summary on stdout)")
    if not run.ok:
        log("  command: " + " ".join(run.cmd))
        tail = run.stderr.strip().splitlines()[-15:]
        for ln in tail:
            log("  | " + ln)


# --------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------


def transcript_files(tree: Path) -> list[Path]:
    """Every generated transcript (live, topic and .reset files); not sessions.json."""
    return sorted(p for p in tree.rglob("*") if p.is_file() and p.name != "sessions.json")


def parse_only(files: list[Path]) -> tuple[int, int, float]:
    """(bytes, lines, seconds) to read every file, split on b"\\n" only and orjson.loads each line."""
    loads = orjson.loads
    nbytes = nlines = 0
    t0 = time.perf_counter()
    for path in files:
        with open(path, "rb") as fh:
            data = fh.read()
        nbytes += len(data)
        for line in data.split(b"\n"):
            if line:
                loads(line)
                nlines += 1
    return nbytes, nlines, time.perf_counter() - t0


def parse_derive(tree: Path) -> tuple[int, float]:
    """(bytes, seconds) for the importer's own reader and parser over the tree,
    deriving every row it would store (messages, tool calls, entries), with no
    store at all: the most any store's import could reach on this machine."""
    from importer.sources import discover
    from importer.units import Container

    units = [u for u in discover([str(tree)]).units if not isinstance(u, Container) and not u.meta]
    nbytes = 0
    t0 = time.perf_counter()
    for unit in units:
        stream = unit.read(None)
        while True:
            try:
                batch = next(stream)
            except StopIteration as stop:
                nbytes += stop.value.bytes_read
                break
            for entry in batch.entries:
                entry.derive()
    return nbytes, time.perf_counter() - t0


def append_line(tree: Path) -> tuple[Path, int]:
    """Append one complete user message to the largest live .jsonl file; return (path, line bytes).
    Its parentId is the file's current last entry (the leaf), its id new in the file."""
    live = [p for p in tree.rglob("*.jsonl") if p.is_file()]
    path = max(live, key=lambda p: (p.stat().st_size, str(p)))
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        raise SystemExit(f"{path} does not end with a newline")
    body = data[:-1]
    last = orjson.loads(body[body.rfind(b"\n") + 1:])
    n = 0
    while True:  # a fresh 8-hex id: deterministic, and not used in the file
        new_id = "be%06x" % n
        if f'"id":"{new_id}"'.encode() not in data:
            break
        n += 1
    when = dt.datetime.fromisoformat(last["timestamp"].replace("Z", "+00:00")) + dt.timedelta(minutes=3)
    ms = int(when.timestamp() * 1000)
    entry = {
        "type": "message", "id": new_id, "parentId": last["id"],
        "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000),
        "message": {"role": "user", "content": [{"type": "text", "text":
                    "One more thing: check the deploy on ubuntu1 again. 再检查一下服务器上的部署状态。"}],
                    "timestamp": ms},
    }
    line = orjson.dumps(entry) + b"\n"
    with open(path, "ab") as fh:
        fh.write(line)
    return path, len(line)


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _db_paths(db: Path) -> list[Path]:
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"), db.with_name(db.name + "-journal")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=500, help="size of the generated tree in MiB (default 500)")
    ap.add_argument("--workdir", help="where to write trees and stores (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated trees and stores")
    ap.add_argument("--files", type=int, default=10_000, help="files in the no-change rerun tree (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    ap.add_argument("--skip-import", action="store_true", help="only generate and measure (a): no importer runs")
    args = ap.parse_args(argv)

    own_tmp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="agentbase-bench-") if own_tmp else args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    tree, files_tree = work / "tree", work / "files"
    db_main, db_files = work / "bench.db", work / "files.db"
    home = work / "home"
    ours = [tree, files_tree, home, *_db_paths(db_main), *_db_paths(db_files)]
    for p in ours:  # fresh start: only the paths this script owns
        _remove(p)
    home.mkdir()
    log(f"workdir: {work}")

    results: dict[str, object] = {}
    failed = False
    try:
        # ---- generate -------------------------------------------------------------------
        t0 = time.perf_counter()
        gen = trees.generate_tree(tree, target_bytes=int(args.size_mb * MIB), seed=args.seed)
        gen_s = time.perf_counter() - t0
        log(f"generated {gen['files']} files, {gen['bytes'] / MIB:.1f} MiB in {gen_s:.2f} s "
            f"({gen['bytes'] / MIB / gen_s:.0f} MiB/s); median file {gen['median_file_bytes'] / 1024:.0f} KiB, "
            f"largest {gen['largest_file_bytes'] / MIB:.2f} MiB, longest line {gen['max_line_bytes'] / 1024:.0f} KiB, "
            f"{gen['messages']} messages")

        # ---- (a) parse only ---------------------------------------------------------------
        files = transcript_files(tree)
        nbytes, nlines, secs = parse_only(files)
        results["a"] = nbytes / MIB / secs
        log(f"(a) parse-only: {len(files)} files, {nbytes / MIB:.1f} MiB, {nlines} lines in {secs:.2f} s "
            f"= {results['a']:.1f} MiB/s")
        tree_bytes = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
        nbytes, secs = parse_derive(tree)
        results["a2"] = nbytes / MIB / secs
        log(f"(a2) the importer's reader and parser, rows derived, no store: {nbytes / MIB:.1f} MiB in "
            f"{secs:.2f} s = {results['a2']:.1f} MiB/s = {results['a2'] / results['a']:.3f} x (a)")

        if not args.skip_import:
            # ---- (b) + (f) full import: the first importer child ------------------------------
            log("(b) full import into a fresh store ...")
            full = run_import(tree, db_main, home)
            report_child("full import", full)
            if full.ok:
                results["b"] = tree_bytes / MIB / full.wall_s
                results["c"] = results["b"] / results["a"]
                results["f"] = full.peak_rss_mib
                log(f"(b) full import: {tree_bytes / MIB:.1f} MiB in {full.wall_s:.2f} s = {results['b']:.1f} MiB/s"
                    + (f" (importer elapsed_s {full.get('elapsed_s')})" if full.summary else ""))
                log(f"(c) ratio (b)/(a) = {results['c']:.3f}")
                log(f"(f) peak RSS of the full import: {full.peak_rss_mib:.1f} MiB")
            else:
                failed = True

            # ---- (e) append one line, rerun ---------------------------------------------------
            if full.ok:
                path, line_bytes = append_line(tree)
                log(f"(e) appended {line_bytes} bytes to {path.relative_to(tree)} ({path.stat().st_size} bytes now)")
                rerun = run_import(tree, db_main, home)
                report_child("append rerun", rerun)
                if rerun.ok:
                    results["e_line"] = line_bytes
                    results["e_bytes"] = rerun.get("bytes_read")
                    results["e_elapsed"] = rerun.get("elapsed_s")
                    results["e_wall"] = rerun.wall_s
                    log(f"(e) bytes_read {results['e_bytes']} (line {line_bytes}), importer elapsed_s "
                        f"{results['e_elapsed']}, wall {rerun.wall_s:.3f} s")
                else:
                    failed = True

            # ---- (d) no-change rerun over many small files -----------------------------------
            t0 = time.perf_counter()
            small = trees.generate_file_count_tree(files_tree, files=args.files, seed=args.seed)
            log(f"(d) generated {small['session_files']} small files ({small['bytes'] / MIB:.1f} MiB) "
                f"in {time.perf_counter() - t0:.2f} s; first import (not timed) ...")
            first = run_import(files_tree, db_files, home)
            report_child("first import", first)
            if first.ok:
                second = run_import(files_tree, db_files, home)
                report_child("no-change rerun", second)
                if second.ok:
                    results["d_wall"] = second.wall_s
                    results["d_elapsed"] = second.get("elapsed_s")
                    log(f"(d) no-change rerun over {small['session_files']} files: wall {second.wall_s:.3f} s, "
                        f"importer elapsed_s {results['d_elapsed']}")
                else:
                    failed = True
            else:
                failed = True
    finally:
        if not args.keep:
            if own_tmp:
                shutil.rmtree(work, ignore_errors=True)
            else:
                for p in ours:
                    _remove(p)
        else:
            log(f"kept: {work}")

    print_table(results, args)
    log(f"(this script's own peak RSS: {_maxrss_mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss):.1f} MiB, "
        "not part of any figure)")
    if failed:
        log("an importer run failed: exit 1")
    return 1 if failed else 0


def print_table(r: dict, args) -> None:
    def verdict(value, ok) -> str:
        return "n/a" if value is None else ("PASS" if ok else "FAIL")

    def num(value, fmt: str) -> str:
        return "n/a" if value is None else fmt.format(value)

    a, b, c, f = r.get("a"), r.get("b"), r.get("c"), r.get("f")
    d_wall, d_el = r.get("d_wall"), r.get("d_elapsed")
    e_line, e_bytes, e_el, e_wall = r.get("e_line"), r.get("e_bytes"), r.get("e_elapsed"), r.get("e_wall")
    e_limit = None if e_line is None else e_line + APPEND_SLACK_BYTES
    rows = [
        ("(a) parse-only throughput", num(a, "{:.1f} MiB/s"), "-", "info" if a is not None else "n/a"),
        ("(a2) parse + derive rows, no store", num(r.get("a2"), "{:.1f} MiB/s")
         + ("" if r.get("a2") is None else f" = {r['a2'] / a:.3f} x (a)"), "-", "info" if r.get("a2") else "n/a"),
        ("(b) full import throughput", num(b, "{:.1f} MiB/s"), "-", "info" if b is not None else "n/a"),
        ("(c) ratio (b)/(a)", num(c, "{:.3f}"), f">= {RATIO_MIN}", verdict(c, c is not None and c >= RATIO_MIN)),
        (f"(d) no-change rerun, {args.files} files, wall", num(d_wall, "{:.3f} s"), f"< {RERUN_MAX_S:g} s",
         verdict(d_wall, d_wall is not None and d_wall < RERUN_MAX_S)),
        ("(d) same, importer elapsed_s", num(d_el, "{:.3f} s"), f"< {RERUN_MAX_S:g} s",
         verdict(d_el, d_el is not None and d_el < RERUN_MAX_S)),
        ("(e) append rerun, bytes_read", num(e_bytes, "{} B") + ("" if e_line is None else f" (line {e_line} B)"),
         "n/a" if e_limit is None else f"<= {e_limit} B", verdict(e_bytes, e_bytes is not None and e_bytes <= e_limit)),
        ("(e) append rerun, importer elapsed_s", num(e_el, "{:.3f} s"), f"< {APPEND_MAX_S:g} s",
         verdict(e_el, e_el is not None and e_el < APPEND_MAX_S)),
        ("(e) append rerun, wall (incl. start-up)", num(e_wall, "{:.3f} s"), "-",
         "info" if e_wall is not None else "n/a"),
        ("(f) peak RSS of full import", num(f, "{:.1f} MiB"), f"< {PEAK_MAX_MIB:g} MiB",
         verdict(f, f is not None and f < PEAK_MAX_MIB)),
    ]
    head = ("figure", "value", "target", "result")
    widths = [max(len(str(row[i])) for row in rows + [head]) for i in range(4)]
    log()
    log(f"AgentBase import benchmark, tree {args.size_mb:g} MiB, seed {args.seed}")
    for row in [head, tuple("-" * w for w in widths)] + rows:
        log("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    sys.exit(main())
