#!/usr/bin/env python3
"""Search quality: does a search find the session a question is about?

Reads the labelled questions of bench/search_questions.json (each names the session(s) it should find
by (source, session_uuid), over ../shared/samples, other-samples and other-samples-2), imports those
samples into a temporary store and exports a snapshot with this checkout (or takes --snapshot), then
asks every question two ways:

- ``session``: the session search (importer/session_search.py: ``agentbase search``, the browser's ``/?q=``);
- ``message``: the message search as the explorer has it (metadata.yml's ``search`` canned query, run on
  the snapshot), its messages deduplicated to their sessions in the order they come.

With ``--before DIR`` (a checkout of an older AgentBase, e.g. ``git worktree add /tmp/before main``) the
message search runs on a snapshot that DIR's code exports, with DIR's metadata.yml and query words
(``fts_query``): the figures as they were.

It prints recall@1, recall@5, recall@10 (the share of questions with one of their sessions in the first
k) and MRR (the mean of 1/rank of the first right session, 0 past the tenth) per kind (keyword,
identifier, paraphrase) and language, and the median time of a session search. It also checks the
labels: a paraphrase must share no index token with its session but English function words (a, the,
for...; else it says which question).

Usage: python3 bench/search_quality.py [--snapshot PATH] [--before DIR] [--json] [--show-misses]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from importer import session_search  # noqa: E402
from importer.search import fts_query, index_text, message_search_text  # noqa: E402

SHARED = REPO.parent / "shared"
SAMPLE_DIRS = ("samples", "other-samples", "other-samples-2")
QUESTIONS = REPO / "bench" / "search_questions.json"
KS = (1, 5, 10)
# what a paraphrase may share with its session: English function words (no Chinese pair is one)
FUNCTION_WORDS = frozenset("a an the and or of on in to for my me via that is it with into this".split())


def _sample_roots() -> list[Path]:
    """Every folder a sample sits in, one import each (a folder of another kind, or of none, is skipped)."""
    roots = []
    for name in SAMPLE_DIRS:
        base = SHARED / name
        if not base.is_dir():
            sys.exit(f"no samples at {base}")
        roots += sorted(p for p in base.iterdir() if p.is_dir())
        for kind in sorted(p for p in base.iterdir() if p.is_dir()):
            roots += sorted(p for p in kind.iterdir() if p.is_dir())
    # the pi fixture is one file
    roots.append(SHARED / "samples" / "badlogic__pi-mono" / "packages" / "coding-agent" / "test" / "fixtures"
                 / "before-compaction.jsonl")
    return roots


def build_snapshot(code: Path, work: Path) -> Path:
    """Import every sample with the code at ``code`` and export a snapshot (its own subprocesses)."""
    store = work / "store.db"
    target = work / "snapshot.db"
    env = {**os.environ, "PYTHONPATH": str(code), "PYTHONDONTWRITEBYTECODE": "1"}
    for root in _sample_roots():
        subprocess.run([sys.executable, "-m", "importer", "import", "-q", "--db", f"sqlite:///{store}", str(root)],
                       cwd=code, env=env, capture_output=True)
    got = subprocess.run([sys.executable, "-m", "importer", "export", "-q", "--db", f"sqlite:///{store}",
                          "-o", str(target)], cwd=code, env=env, capture_output=True, text=True)
    if got.returncode != 0:
        sys.exit(f"export failed: {got.stderr.strip()[-300:]}")
    return target


def _canned_sql(code: Path) -> str:
    import yaml

    meta = yaml.safe_load((code / "metadata.yml").read_text(encoding="utf-8"))
    return meta["databases"]["snapshot"]["queries"]["search"]["sql"]


def _fts_of(code: Path):
    """``fts_query`` of the code at ``code`` (importer/search.py imports nothing of AgentBase)."""
    spec = importlib.util.spec_from_file_location("before_search", code / "importer" / "search.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fts_query


class MessageSearch:
    """The explorer's message search (the canned query), deduplicated to sessions."""

    def __init__(self, path: Path, sql: str, fts):
        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.conn.create_function("agentbase_fts", 1, lambda q: fts(q or ""))
        self.conn.create_function("agentbase_snippet", 3, lambda *a: "")
        self.conn.create_function("agentbase_session_url", 2, lambda sid, mid: str(sid))
        self.conn.create_function("agentbase_row_url", 2, lambda t, i: "")
        self.conn.create_function("agentbase_query_url", -1, lambda *a: "")
        self.sql = sql
        self.keys = {r[0]: (r[1], r[2]) for r in self.conn.execute("SELECT id, source, session_uuid FROM sessions")}

    def ranked(self, q: str) -> list[tuple[str, str]]:
        params = {"q": q, "agent": "", "day": "", "server": "", "source": "", "limit": "", "after": "", "page": ""}
        cur = self.conn.execute(self.sql, params)
        names = [d[0] for d in cur.description]
        at = names.index("conversation")
        out: list[tuple[str, str]] = []
        for row in cur:
            sid = int(json.loads(row[at])["href"])
            key = self.keys.get(sid)
            if key and key not in out:
                out.append(key)
        return out


class SessionSearch:
    def __init__(self, path: Path):
        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.times: list[float] = []

    def ranked(self, q: str) -> list[tuple[str, str]]:
        start = time.perf_counter()
        found = session_search.search(self.conn, q, session_search.Options(limit=10))
        self.times.append(time.perf_counter() - start)
        return [(s["source"], s["session_uuid"]) for s in found["sessions"]]


def check_labels(path: Path, questions: list[dict]) -> list[str]:
    """Each expected session exists; a paraphrase shares no index token with its session."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ids = {(r[1], r[2]): r[0] for r in conn.execute("SELECT id, source, session_uuid FROM sessions")}
    problems = []
    token = re.compile(r"\w+")
    vocab: dict[int, set[str]] = {}
    for n, q in enumerate(questions, 1):
        for source, uuid in q["expect"]:
            if (source, uuid) not in ids:
                problems.append(f"question {n}: no session ({source}, {uuid[:12]}...) in the snapshot")
        if q["kind"] != "paraphrase":
            continue
        for source, uuid in q["expect"]:
            sid = ids.get((source, uuid))
            if sid is None:
                continue
            if sid not in vocab:
                words = set()
                for cb, tp in conn.execute("SELECT content_blocks, text_preview FROM messages WHERE session_id = ?",
                                           (sid,)):
                    words.update(w.lower() for w in token.findall(index_text(message_search_text(cb, tp), ends=False)))
                title = conn.execute("SELECT title, first_prompt FROM session_list WHERE id = ?", (sid,)).fetchone()
                for t in title or ():
                    words.update(w.lower() for w in token.findall(index_text(t or "", ends=False)))
                vocab[sid] = words
            shared = {w.lower() for w in token.findall(index_text(q["q"], ends=False))} & vocab[sid] - FUNCTION_WORDS
            if shared:
                problems.append(f"question {n} (paraphrase) shares {len(shared)} word(s) with its session")
    conn.close()
    return problems


def score(ranked: list[tuple[str, str]], expect: list[list[str]]) -> tuple[int | None]:
    wanted = {tuple(e) for e in expect}
    for rank, key in enumerate(ranked[:10], 1):
        if key in wanted:
            return rank
    return None


def figures(ranks: list[int | None]) -> dict:
    n = len(ranks)
    out = {"n": n}
    for k in KS:
        out[f"recall@{k}"] = round(sum(1 for r in ranks if r is not None and r <= k) / n, 3) if n else 0.0
    out["mrr"] = round(sum(1 / r for r in ranks if r) / n, 3) if n else 0.0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--snapshot", type=Path, help="a snapshot of the samples (default: exported here)")
    ap.add_argument("--before", type=Path, help="an older checkout: the message search as it was")
    ap.add_argument("--json", action="store_true", help="the figures as one JSON object")
    ap.add_argument("--show-misses", action="store_true", help="the questions the session search misses "
                    "in its first 5 (their number, kind and words only)")
    args = ap.parse_args()
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]
    with tempfile.TemporaryDirectory(prefix="search-quality-") as tmp:
        tmp = Path(tmp)
        snapshot = args.snapshot
        if snapshot is None:
            (tmp / "new").mkdir()
            snapshot = build_snapshot(REPO, tmp / "new")
        problems = check_labels(snapshot, questions)
        if args.before:
            (tmp / "before").mkdir()
            before_snapshot = build_snapshot(args.before.resolve(), tmp / "before")
            message = MessageSearch(before_snapshot, _canned_sql(args.before), _fts_of(args.before))
        else:
            message = MessageSearch(snapshot, _canned_sql(REPO), fts_query)
        sessions = SessionSearch(snapshot)
        groups: dict[tuple[str, str, str], list] = defaultdict(list)
        misses = []
        for n, q in enumerate(questions, 1):
            for name, engine in (("session", sessions), ("message", message)):
                rank = score(engine.ranked(q["q"]), q["expect"])
                for key in ((name, q["kind"], q["lang"]), (name, q["kind"], "all"), (name, "all", "all")):
                    groups[key].append(rank)
                if name == "session" and (rank is None or rank > 5):
                    misses.append((n, q["kind"], q["lang"], q["q"], rank))
    table = {" ".join(k): figures(v) for k, v in sorted(groups.items())}
    median_ms = round(statistics.median(sessions.times) * 1000, 1)
    if args.json:
        print(json.dumps({"questions": len(questions), "label_problems": problems, "figures": table,
                          "session_search_median_ms": median_ms}, ensure_ascii=False, indent=1))
        return
    print(f"{len(questions)} questions; session search median {median_ms} ms a question (this snapshot)")
    for p in problems:
        print("label:", p)
    print(f"{'search':8} {'kind':11} {'lang':4} {'n':>3} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6}")
    order = {"keyword": 0, "identifier": 1, "paraphrase": 2, "all": 3}
    for key in sorted(groups, key=lambda k: (order[k[1]], k[2] == "all", k[2], k[0] != "session")):
        f = table[" ".join(key)]
        print(f"{key[0]:8} {key[1]:11} {key[2]:4} {f['n']:>3} {f['recall@1']:>6.3f} {f['recall@5']:>6.3f} "
              f"{f['recall@10']:>6.3f} {f['mrr']:>6.3f}")
    if args.show_misses:
        for n, kind, lang, q, rank in misses:
            print(f"miss: #{n} {kind} {lang} {q!r} rank {rank}")


if __name__ == "__main__":
    main()
