#!/usr/bin/env python3
"""Export time before and after a change to redaction: an A/B run on
import_bench's default tree; or, with ``--known``, the export's cost when
the store holds that many credentials, at two tree sizes.

    python3 bench/redact_bench.py --before DIR [--after DIR] [--size-mb 500] [--runs 3] [--corpus]
    python3 bench/redact_bench.py --known 100000 [--jwts 10000] [--sizes 50,100] [--runs 3]

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

``--known N`` (issue #22) measures this checkout alone. For each size of
``--sizes`` (MiB) it generates the tree, then two copies of it: one with N
made-up credentials planted in extra sessions (``--jwts`` of them distinct
long bearer JWTs that all begin ``eyJhbGciOi``, the rest API keys, tokens
and passwords, each where the detector recognises it: 20 a message), and
one where the same lines, of the same lengths, hold nothing the detector
recognises (the same bytes, no credential); and a third where FEW of the
lines hold their credential (a store with any credential has the whole tree
searched for the set: the ratio known/few is what the number of values
costs). All are imported and exported ``--runs`` times, alternately; prints
the medians, the ratio known/none (target: at most 1.3; also each round's,
known against the none export of the same round) and known/few and, for
each, seconds per MiB of tree at each size (linear: the same at both).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import work_dir  # noqa: E402  (bench/common.py)
MIB = 2 ** 20
AN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
PER_MESSAGE = 20
PER_SESSION = 50
FEW = 20  # the third copy's known values (the rest of its lines hold none)


def fresh(snapshot: Path) -> str:
    """``snapshot`` with no earlier one (nor its state file) left: the export builds it in full
    (an export to an up-to-date snapshot only checks it)."""
    for p in snapshot.parent.glob(snapshot.stem + "*"):
        p.unlink()
    return str(snapshot)


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


def _fake(rng: random.Random, n: int, alphabet: str = AN) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


def planted_lines(known: int, jwts: int, seed: int = 22) -> tuple[list[str], list[str]]:
    """``known`` lines that each hold one made-up credential the detector recognises
    (``jwts`` of them bearer JWTs), and as many of the same lengths that hold none."""
    rng = random.Random(seed)
    head = _b64url({"alg": "RS256", "typ": "JWT"})
    with_, none = [], []
    for i in range(known):
        if i < jwts:
            body = _b64url({"iss": "https://auth.example.com/", "sub": "user-" + _fake(rng, 12),
                            "scope": "read:items write:items", "iat": 1775354400 + i, "jti": _fake(rng, 16)})
            token = f"{head}.{body}.{_fake(rng, 86, AN + '-_')}"
            with_.append(f"Authorization: Bearer {token}")
            none.append(f"Reference: HeaderLine x{token[1:]}".replace(".", "~"))
            continue
        kind = i % 4
        if kind == 0:
            v = "ghp_" + _fake(rng, 36)
            with_.append(f"GH_TOKEN={v}")
            none.append(f"GH_COLOR=ghq_{v[4:]}")
        elif kind == 1:
            v = "sk-proj-" + _fake(rng, 48)
            with_.append(f"OPENAI_API_KEY={v}")
            none.append(f"OPENAI_API_URL=sk.proj.{v[8:]}")
        elif kind == 2:
            v = _fake(rng, 24) + "7"
            with_.append(f"token: {v}")
            none.append(f"shade: {v}")
        else:
            v = _fake(rng, 14) + "!3"
            with_.append(f"DB_PASSWORD={v}")
            none.append(f"DB_HOSTNAME={v[:-2]}.3")
    return with_, none


def write_planted(root: Path, lines: list[str]) -> int:
    """Extra sessions under ``root`` (an OpenClaw agent's folder), PER_MESSAGE lines a user message."""
    sessions = root / "planted" / "agents" / "keys" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    per_file = PER_MESSAGE * PER_SESSION
    files = 0
    for f in range(0, len(lines), per_file):
        sid = f"0b0b0b0b-0000-4000-8000-{files:012x}"
        objs = [{"type": "session", "id": sid, "version": 3, "timestamp": "2026-04-05T01:00:00.000Z", "cwd": "/w"}]
        parent = None
        chunk = lines[f:f + per_file]
        for m in range(0, len(chunk), PER_MESSAGE):
            eid = f"{m // PER_MESSAGE + 1:08x}"
            objs.append({"type": "message", "id": eid, "parentId": parent,
                         "timestamp": f"2026-04-05T02:{m // PER_MESSAGE // 60:02d}:{m // PER_MESSAGE % 60:02d}.000Z",
                         "message": {"role": "user", "timestamp": 1775354400000 + m, "content": [
                             {"type": "text", "text": "set up:\n" + "\n".join(chunk[m:m + PER_MESSAGE])}]}})
            parent = eid
        (sessions / f"{sid}.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objs))
        files += 1
    return files


@contextmanager
def work_folder(args, prefix: str) -> Iterator[Path]:
    """--workdir, else a new temporary folder, removed afterwards unless --keep."""
    work = work_dir(args.workdir, prefix).resolve()
    try:
        yield work
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def scale(args) -> int:
    """--known: the export with N known values against the same tree with none, at each size."""
    code = Path(args.after).resolve()
    sys.path.insert(0, str(code))
    sys.path.insert(0, str(code / "bench"))  # its bench/trees.py, with its importer
    import trees

    with_lines, none_lines = planted_lines(args.known, args.jwts)
    results = []
    with work_folder(args, "agentbase-redact-scale-") as work:
        for size in [float(x) for x in args.sizes.split(",")]:
            base = work / f"tree-{size:g}"
            variants = {}
            few = with_lines[:FEW] + none_lines[FEW:]
            for name, lines in (("none", none_lines), ("few", few), ("known", with_lines)):
                tree = work / f"{name}-{size:g}"
                if not tree.exists():
                    if not base.exists():
                        gen = trees.generate_tree(base, target_bytes=int(size * MIB), seed=args.seed)
                        print(f"tree {size:g} MiB: {gen['files']} files, {gen['messages']} messages", flush=True)
                    shutil.copytree(base, tree)
                    write_planted(tree, lines)
                mib = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file()) / MIB
                db = work / f"{name}-{size:g}.db"
                if not db.exists():
                    secs, _cpu, _line = run(code, ["import", str(tree), "--db", f"sqlite:///{db}", "-q"], work / "home")
                    print(f"{name} {size:g}: {mib:.1f} MiB imported in {secs:.1f} s", flush=True)
                variants[name] = (db, mib)
            times: dict[str, list[float]] = {name: [] for name in variants}
            cpus: dict[str, list[float]] = {name: [] for name in variants}
            for i in range(args.runs):
                for name, (db, _mib) in variants.items():
                    secs, cpu, line = run(code, ["export", "--db", f"sqlite:///{db}", "-o",
                                                 fresh(work / f"{name}-{size:g}-snap.db"), "--timezone", "UTC"],
                                          work / "home")
                    times[name].append(secs)
                    cpus[name].append(cpu)
                    print(f"{size:g} MiB run {i + 1} {name:5s} {secs:6.2f} s wall {cpu:6.2f} s CPU   {line}", flush=True)
            med = {name: statistics.median(t) for name, t in times.items()}
            med.update({name + "_cpu": statistics.median(t) for name, t in cpus.items()})
            # each round's known export against its none export: on a host whose speed
            # drifts (the same export's CPU seconds vary by a third here), the ratio of two medians
            # may pair a slow run with a fast one
            med["pairs"] = [k / n for k, n in zip(times["known"], times["none"])]
            results.append((size, variants, med))
        print()
        print(f"{args.known} known values ({args.jwts} distinct JWTs), medians of {args.runs} exports:")
        for size, variants, med in results:
            print(f"  {size:g} MiB tree: none {med['none']:.2f} s ({med['none'] / variants['none'][1]:.4f} s/MiB of "
                  f"{variants['none'][1]:.1f} MiB), known {med['known']:.2f} s "
                  f"({med['known'] / variants['known'][1]:.4f} s/MiB of {variants['known'][1]:.1f} MiB); "
                  f"ratio known/none {med['known'] / med['none']:.2f} (target <= 1.30); CPU none "
                  f"{med['none_cpu']:.2f} s, known {med['known_cpu']:.2f} s, ratio "
                  f"{med['known_cpu'] / med['none_cpu']:.2f}")
            print(f"    each round's known/none: {' '.join(f'{r:.2f}' for r in med['pairs'])} (median "
                  f"{statistics.median(med['pairs']):.2f})")
            print(f"    with {FEW} known values: {med['few']:.2f} s wall, {med['few_cpu']:.2f} s CPU; ratio known/few "
                  f"{med['known'] / med['few']:.2f} wall, {med['known_cpu'] / med['few_cpu']:.2f} CPU (what the number "
                  f"of values costs: a store with any credential has the whole tree searched for them)")
        if len(results) >= 2:
            (s1, v1, m1), (s2, v2, m2) = results[0], results[-1]
            for name in ("none", "few", "known", "none_cpu", "few_cpu", "known_cpu"):
                key = name.split("_")[0]
                a, b = m1[name] / v1[key][1], m2[name] / v2[key][1]
                print(f"  linearity ({name}): s/MiB {a:.4f} at {s1:g} MiB, {b:.4f} at {s2:g} MiB "
                      f"(ratio {b / a:.2f})")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="checkout of the code before the change (A/B mode)")
    ap.add_argument("--after", default=str(REPO), help="checkout of the code after it (default: this one)")
    ap.add_argument("--size-mb", type=float, default=500, help="size of the generated tree in MiB (default 500)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0, import_bench's)")
    ap.add_argument("--runs", type=int, default=3, help="exports per side (default 3)")
    ap.add_argument("--corpus", action="store_true", help="add the planted credentials of tests/secret_corpus.py")
    ap.add_argument("--workdir", help="where to write the tree, stores and snapshots (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    ap.add_argument("--known", type=int, help="known values planted (issue #22's mode: no --before)")
    ap.add_argument("--jwts", type=int, default=10000, help="of them, distinct bearer JWTs (default 10000)")
    ap.add_argument("--sizes", default="50,100", help="tree sizes in MiB for --known (default 50,100)")
    args = ap.parse_args(argv)
    if args.known:
        return scale(args)
    if not args.before:
        ap.error("--before is required (or --known N)")
    sides = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    with work_folder(args, "agentbase-redact-bench-") as work:
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
                                             fresh(work / f"{name}-snap.db"), "--timezone", "UTC"], work / "home")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
