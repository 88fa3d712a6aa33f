#!/usr/bin/env python3
"""Export time before and after a change to redaction: an A/B run on
import_bench's default tree.

    python3 bench/redact_bench.py --before DIR [--after DIR] [--size-mb 500] [--runs 3] [--corpus]

``--before`` and ``--after`` are checkouts (``after`` defaults to this one),
e.g. ``git worktree add /tmp/base <commit>`` or ``git archive <commit> | tar
-x -C /tmp/base``. The tree is the one ``bench/import_bench.py`` generates
(``bench/trees.py`` generate_tree, seed 0, 500 MiB by default); each side
imports it into its own store with its own code, then both export it
``--runs`` times, alternately (so a busy machine slows both alike), each
export a child process timed from start to exit. Prints every run, the
median of each side and their ratio (the target of issue #12: at most 1.3).

``--corpus`` also writes the planted corpus of tests/secret_corpus.py into
the tree (about 1,200 credentials in 470 small sessions), so the second pass
has values to replace: the export's cost when a store holds credentials.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIB = 2 ** 20


def run(code: Path, args: list[str], home: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process and its worker, its last line)."""
    env = dict(os.environ, PYTHONPATH=str(code), AGENTBASE_HOME=str(home))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "importer", *args], cwd=code, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args[:1])} with {code} failed: {proc.stderr[-800:]}")
    return elapsed, cpu, (proc.stderr.strip().splitlines() or [""])[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="checkout of the code before the change")
    ap.add_argument("--after", default=str(REPO), help="checkout of the code after it (default: this one)")
    ap.add_argument("--size-mb", type=float, default=500, help="size of the generated tree in MiB (default 500)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0, import_bench's)")
    ap.add_argument("--runs", type=int, default=3, help="exports per side (default 3)")
    ap.add_argument("--corpus", action="store_true", help="add the planted credentials of tests/secret_corpus.py")
    ap.add_argument("--workdir", help="where to write the tree, stores and snapshots (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    args = ap.parse_args(argv)
    sides = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    work = Path(args.workdir or tempfile.mkdtemp(prefix="agentbase-redact-bench-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        tree = work / "tree"
        if not tree.exists():
            sys.path.insert(0, str(sides["after"] / "bench"))  # its bench/trees.py, with its importer
            import trees

            t0 = time.perf_counter()
            gen = trees.generate_tree(tree, target_bytes=int(args.size_mb * MIB), seed=args.seed)
            print(f"tree: {gen['files']} files, {gen['bytes'] / MIB:.0f} MiB, {gen['messages']} messages "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
            if args.corpus:
                sys.path.insert(0, str(REPO / "tests"))
                import secret_corpus

                placed = secret_corpus.build(tree / "corpus")
                print(f"corpus: {len(placed)} planted values", flush=True)
        for name, code in sides.items():
            db = work / f"{name}.db"
            if not db.exists():
                secs, _cpu, line = run(code, ["import", str(tree), "--db", f"sqlite:///{db}", "-q"], work / "home")
                print(f"{name}: imported in {secs:.1f} s", flush=True)
        times: dict[str, list[float]] = {name: [] for name in sides}
        cpus: dict[str, list[float]] = {name: [] for name in sides}
        for i in range(args.runs):
            for name, code in sides.items():
                secs, cpu, line = run(code, ["export", "--db", f"sqlite:///{work / (name + '.db')}", "-o",
                                             str(work / f"{name}-snap.db"), "--timezone", "UTC"], work / "home")
                times[name].append(secs)
                cpus[name].append(cpu)
                print(f"run {i + 1} {name:6s} {secs:6.2f} s wall {cpu:6.2f} s CPU   {line}", flush=True)
        med = {name: statistics.median(t) for name, t in times.items()}
        med_cpu = {name: statistics.median(t) for name, t in cpus.items()}
        print()
        for name in sides:
            print(f"{name:6s} median {med[name]:6.2f} s wall (min {min(times[name]):.2f}, max {max(times[name]):.2f}),"
                  f" {med_cpu[name]:6.2f} s CPU  {sides[name]}")
        print(f"ratio after/before (medians): wall {med['after'] / med['before']:.2f}, "
              f"CPU {med_cpu['after'] / med_cpu['before']:.2f}  (target: wall <= 1.30)")
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
