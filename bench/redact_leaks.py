#!/usr/bin/env python3
"""How many planted credentials reach the snapshot: the planted corpus of
tests/secret_corpus.py, imported and exported by a checkout's code.

    python3 bench/redact_leaks.py [--code DIR] [--workdir DIR]

``--code`` is the checkout whose importer runs (default: this one), so the
same corpus measures the code before and after a change:

    python3 bench/redact_leaks.py --code /work/main

Prints the number of planted values (and of classes and fields) of which the
value, or any 10-character piece of it, or one of its encoded forms, is in the
snapshot file's bytes (or its -wal), then the classes and fields that leak
(never a value), and whether the look-alikes came through untouched.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import secret_corpus  # noqa: E402


def pieces(value: str, size: int = 10) -> set[str]:
    return {value[i:i + size] for i in range(len(value) - size + 1)} if len(value) >= size else {value}


class Windows:
    """Every 10-byte window of the snapshot (and of its lower-cased bytes), for
    a quick look-up of many pieces."""

    def __init__(self, data: bytes, size: int = 10):
        self.data = data
        self.size = size
        self.seen = {data[i:i + size] for i in range(len(data) - size + 1)}
        low = data.lower()
        self.seen.update(low[i:i + size] for i in range(len(low) - size + 1))

    def leaked(self, plant) -> bool:
        for value in plant.values:
            b = value.encode()
            if len(b) < self.size:
                if b in self.data or b.lower() in self.data.lower():
                    return True
                continue
            for i in range(len(b) - self.size + 1):
                w = b[i:i + self.size]
                if w in self.seen or w.lower() in self.seen:
                    return True
        return any(e.encode() in self.data for e in plant.encoded)


def snapshot_bytes(snap: Path) -> bytes:
    data = snap.read_bytes()
    wal = snap.with_name(snap.name + "-wal")
    if wal.exists():
        data += wal.read_bytes()
    return data


def run(code: Path, work: Path, seed: int = 12) -> dict:
    state = work / "state"
    placed = secret_corpus.build(state, seed=seed)
    db, snap = work / "archive.db", work / "snap.db"
    env = dict(os.environ, PYTHONPATH=str(code), AGENTBASE_HOME=str(work / "home"))
    for args in (["import", str(state), "--db", f"sqlite:///{db}", "--server", "s"],
                 ["export", "--db", f"sqlite:///{db}", "-o", str(snap), "--timezone", "UTC"]):
        proc = subprocess.run([sys.executable, "-m", "importer", *args], cwd=code, env=env,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{args[0]} failed: {proc.stderr[-500:]}")
    data = snapshot_bytes(snap)
    windows = Windows(data)
    leaks = [p for p in placed if windows.leaked(p.plant)]
    looks = [s for s in secret_corpus.LOOK_ALIKES if s.encode() not in data
             and s.replace("\\", "\\\\").encode() not in data]
    return {"placed": placed, "leaks": leaks, "look_alikes_missing": len(looks),
            "png": secret_corpus.PNG.encode() in data, "signature": secret_corpus.SIGNATURE.encode() in data}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", default=str(REPO), help="checkout whose importer runs (default: this one)")
    ap.add_argument("--workdir", help="where to write the corpus, store and snapshot (default: a temp dir)")
    ap.add_argument("--detail", action="store_true", help="list each leaking class/field pair")
    ap.add_argument("--seed", type=int, default=12, help="the corpus's seed (default 12, the tests')")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agentbase-leaks-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        r = run(Path(args.code).resolve(), work, args.seed)
    placed, leaks = r["placed"], r["leaks"]
    print(f"code: {args.code}")
    print(f"planted: {len(placed)} values of {len({p.plant.cls for p in placed})} classes in "
          f"{len({p.field for p in placed})} fields")
    print(f"reaching the snapshot (value, a 10-character piece, or an encoded form): {len(leaks)}")
    for issue in sorted({p.plant.issue for p in placed}):
        mine = [p for p in placed if p.plant.issue == issue]
        print(f"  issue #{issue}'s classes: {len({p.plant.cls for p in mine})}, {len(mine)} planted, "
              f"{sum(1 for p in leaks if p.plant.issue == issue)} reaching the snapshot")
    if leaks:
        by_class = Counter(p.plant.cls for p in leaks)
        by_field = Counter(p.field for p in leaks)
        print("  by class: " + ", ".join(f"{k} {n}" for k, n in by_class.most_common()))
        print("  by field: " + ", ".join(f"{k} {n}" for k, n in by_field.most_common()))
        if args.detail:
            print("  class/field: " + ", ".join(sorted({f"{p.plant.cls}/{p.field}" for p in leaks})))
    print(f"look-alikes missing from the snapshot: {r['look_alikes_missing']} of {len(secret_corpus.LOOK_ALIKES)}; "
          f"image intact: {r['png']}; signature intact: {r['signature']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
