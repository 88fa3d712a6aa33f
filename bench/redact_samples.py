#!/usr/bin/env python3
"""What the detector finds in the real samples: a false-positive check.

    python3 bench/redact_samples.py [--shared DIR] [--shapes]

Imports ``shared/samples`` (real people's transcripts, see its SOURCES.md)
into a temporary store, runs ``agentbase secrets --json`` on it and prints
the total, the count per kind and per table.column. Then reads every JSON
line of ``shared/other-samples`` and ``shared/other-samples-2`` (Claude Code,
Codex, Gemini, Cline... transcripts, and in the second their Markdown, YAML
and history files whole) with the same detector and prints the same counts:
every kind the detector knows, the ones issue #22 added included, is counted.

Never prints a value or any text of the transcripts: ``--shapes`` prints,
per value found, only its kind, length, character classes, entropy and the
masked shape of the value and of the text around it (letters become a or A,
digits 0, other scripts C), enough to tell a password from a word of prose.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from importer import redact as R  # noqa: E402


def mask(text: str) -> str:
    text = re.sub(r"[0-9]", "0", text)
    text = re.sub(r"[a-z]", "a", text)
    text = re.sub(r"[A-Z]", "A", text)
    return re.sub(r"[^\x00-\x7f]", "C", text)


def shape(value: str, kind: str, around: str = "") -> str:
    d, u, l, s = R._classes(value)
    classes = ("0" if d else "") + ("A" if u else "") + ("a" if l else "") + ("." if s else "")
    return (f"  {kind:16s} len={len(value):4d} classes={classes:4s} entropy={R.entropy(value):.1f} "
            f"value={mask(value)[:32]!r} around={around!r}")


def around(texts, value: str) -> str:
    for t in texts:
        i = t.find(value)
        if i >= 0:
            return mask(t[max(0, i - 40):i]) + " <V> " + mask(t[i + len(value):i + len(value) + 20])
    return ""


def samples(shared: Path, shapes: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="agentbase-samples-") as tmp:
        db = f"sqlite:///{tmp}/samples.db"
        env = dict(os.environ, PYTHONPATH=str(REPO), AGENTBASE_HOME=tmp)
        paths = [shared / "samples"]
        paths += sorted((shared / "samples").glob("*/packages/*/test/fixtures/*.jsonl"))  # pi's own layout
        for path in paths:
            subprocess.run([sys.executable, "-m", "importer", "import", str(path), "--db", db, "--server", "real", "-q"],
                           cwd=REPO, env=env, capture_output=True, text=True)
        proc = subprocess.run([sys.executable, "-m", "importer", "secrets", "--db", db, "--json"], cwd=REPO, env=env,
                              capture_output=True, text=True, check=True)
        found = json.loads(proc.stdout)
        import sqlite3

        conn = sqlite3.connect(f"{tmp}/samples.db")
        n = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sessions", "messages", "entries")}
        print(f"shared/samples: {n['sessions']} sessions, {n['messages']} messages, {n['entries']} entries")
        print(f"  agentbase secrets: {found['total']} occurrences; kinds {found['kinds']}")
        print("  places: " + ", ".join(f"{k} {v}" for k, v in Counter(
            f"{p['table']}.{p['column']}" for p in found["places"]).most_common()))
        if shapes:
            from importer.shape import redact_columns
            from importer.store import open_store

            store = open_store(db)
            secrets = R.collect(store, redact_columns())
            store.close()
            texts = [json.dumps(json.loads(r[0]), ensure_ascii=False) for r in
                     conn.execute("SELECT content_blocks FROM messages WHERE content_blocks IS NOT NULL")]
            texts += [r[0] for r in conn.execute("SELECT raw_json FROM entries")]
            print(f"  {len(secrets)} distinct values:")
            for v, k in secrets.values():
                print(shape(v, k, around(texts, v)))
        conn.close()


def other_samples(shared: Path, shapes: bool, folder: str = "other-samples") -> None:
    """Every JSON line (and, in other-samples-2, every other text file: Markdown, YAML, a shell
    history, read whole) read with the detector."""
    d = R.detector()
    kinds: Counter = Counter()
    values: dict[str, str] = {}
    lines = files = 0
    texts = []

    def take(findings, text: str) -> None:
        """One JSON line's or text's findings, counted (and the text kept for the shapes)."""
        nonlocal lines
        lines += 1
        for v, k in findings:
            kinds[k] += 1
            values.setdefault(v, k)
        if shapes:
            texts.append(text)

    for path in sorted((shared / folder).rglob("*")):
        if not path.is_file() or path.name == "SOURCES.md":
            continue
        if path.suffix in (".jsonl", ".json"):
            files += 1
            for line in path.read_text(errors="replace").splitlines():
                if line.strip():
                    take(d.scan_json(line), line)
        elif folder != "other-samples" and path.suffix in (".md", ".txt", ".yaml", ".yml", ".history", "") \
                and path.stat().st_size < 16 << 20:
            text = path.read_text(errors="replace")
            if "\x00" in text:
                continue
            files += 1
            take(d.scan(text), text)
    print(f"shared/{folder}: {files} files, {lines} JSON lines or texts")
    print(f"  detector: {sum(kinds.values())} findings, {len(values)} distinct values; kinds {dict(kinds)}")
    if shapes:
        for v, k in sorted(values.items(), key=lambda x: x[1]):
            print(shape(v, k, around(texts, json.dumps(v)[1:-1])))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared"), help="the shared folder (default: ../shared)")
    ap.add_argument("--shapes", action="store_true", help="the masked shape of each value found (never the value)")
    args = ap.parse_args(argv)
    shared = Path(args.shared)
    if not (shared / "samples").is_dir():
        shared = Path("/work/shared")
    samples(shared, args.shapes)
    for folder in ("other-samples", "other-samples-2"):
        if (shared / folder).is_dir():
            other_samples(shared, args.shapes, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
