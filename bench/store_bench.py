#!/usr/bin/env python3
"""Store benchmark: MariaDB next to the embedded SQLite store, and the snapshot export.

On the same generated tree as bench/import_bench.py (bench/trees.py generate_tree, same seed) it prints
side by side:
  (a) import throughput into the embedded store and into MariaDB, and their ratio (target >= 0.5);
  (b) export time and snapshot size of that store, per million messages;
  (c) export of a store of >= 1,000,000 messages (the imported rows replicated under new session ids
      with SQL, so the content stays realistic): time (target < 120 s) and snapshot size; then the
      same export with --if-changed on the unchanged store (what `agentbase sync` pays then).

Usage: python3 bench/store_bench.py [--size-mb 200] [--export-messages 1000000] [--mysql URL]
MariaDB: mysql://root@127.0.0.1:3306 by default; a database agentbase_bench_<pid> is created and dropped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common import store_options, print_figures, work_dir  # noqa: E402  (bench/common.py)
from trees import generate_tree  # noqa: E402  (bench/trees.py)
from importer.snapshot import export_snapshot  # noqa: E402
from importer.store import open_store  # noqa: E402


def run_import(tree: Path, url: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "importer", "import", str(tree), "--db", url, "-q"],
                          cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"import into {url.split('@')[-1]} failed: {proc.stderr[-500:]}")
    return elapsed


def replicate(db: Path, target_messages: int) -> int:
    """Copy every session, message and tool call under new ids until the store holds
    at least ``target_messages`` messages; returns the message count."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    m_max, s_max, t_max = (conn.execute(f"SELECT MAX(id) FROM {t}").fetchone()[0] or 0
                           for t in ("messages", "sessions", "tool_calls"))
    count = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    base = count
    cols = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in ("sessions", "messages", "tool_calls")}
    k = 0
    while count < target_messages:
        k += 1
        shifted = {
            "sessions": {"id": f"id + {k * s_max}", "session_uuid": f"session_uuid || ':r{k}'"},
            "messages": {"id": f"id + {k * m_max}", "session_id": f"session_id + {k * s_max}",
                         "session_uuid": f"session_uuid || ':r{k}'"},
            "tool_calls": {"id": f"id + {k * t_max}", "session_id": f"session_id + {k * s_max}",
                           "message_id": f"message_id + {k * m_max}",
                           "result_message_id": f"result_message_id + {k * m_max}",
                           "session_uuid": f"session_uuid || ':r{k}'"},
        }
        conn.execute("BEGIN")
        for table, exprs in shifted.items():
            names = cols[table]
            select = ", ".join(exprs.get(c, c) for c in names)
            bound = {"sessions": s_max, "messages": m_max, "tool_calls": t_max}[table]
            conn.execute(f"INSERT INTO {table} ({', '.join(names)}) SELECT {select} FROM {table} WHERE id <= {bound}")
        conn.execute("COMMIT")
        count += base
    conn.close()
    return count


def export(url: str, out: Path) -> tuple[float, int, int]:
    store = open_store(url)
    try:
        started = time.perf_counter()
        report = export_snapshot(store, out, timezone="Asia/Shanghai")
        return time.perf_counter() - started, report.bytes, report.rows["messages"]
    finally:
        store.close()


def export_if_changed(url: str, out: Path) -> tuple[float, bool]:
    """What sync pays when nothing changed: (seconds, whether it was left alone)."""
    store = open_store(url)
    try:
        started = time.perf_counter()
        report = export_snapshot(store, out, timezone="Asia/Shanghai")
        return time.perf_counter() - started, report.unchanged
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    store_options(ap, 200)
    ap.add_argument("--export-messages", type=int, default=1_000_000)
    args = ap.parse_args()
    work = work_dir(args.workdir, "agentbase-store-bench-")
    import pymysql
    from urllib.parse import urlsplit

    p = urlsplit(args.mysql)
    dbname = f"agentbase_bench_{os.getpid()}"
    admin = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or "root",
                            password=p.password or "", autocommit=True)
    admin.cursor().execute(f"CREATE DATABASE `{dbname}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    mysql_url = f"{args.mysql.rstrip('/')}/{dbname}"
    rows = []
    try:
        tree = work / "tree"
        print(f"generating a {args.size_mb:.0f} MB tree (seed {args.seed}) ...", flush=True)
        info = generate_tree(str(tree), target_bytes=int(args.size_mb * 2**20), seed=args.seed)
        mb = info["transcript_bytes"] / 2**20
        lite_db = work / "archive.db"
        t_lite = run_import(tree, f"sqlite:///{lite_db}")
        t_maria = run_import(tree, mysql_url)
        rows += [
            ("import into embedded SQLite", f"{mb / t_lite:.1f} MB/s ({t_lite:.1f} s)", "", ""),
            ("import into MariaDB", f"{mb / t_maria:.1f} MB/s ({t_maria:.1f} s)", "", ""),
            ("MariaDB / embedded", f"{t_lite / t_maria:.2f}", ">= 0.5", "PASS" if t_lite / t_maria >= 0.5 else "FAIL"),
        ]
        t_exp, size, n = export(f"sqlite:///{lite_db}", work / "snap-small.db")
        t_exp_m, _, _ = export(mysql_url, work / "snap-maria.db")
        per_m = 1_000_000 / max(n, 1)
        rows += [
            (f"export from SQLite ({n:,} messages)", f"{t_exp:.1f} s = {t_exp * per_m:.0f} s per million", "", ""),
            (f"export from MariaDB ({n:,} messages)", f"{t_exp_m:.1f} s = {t_exp_m * per_m:.0f} s per million", "", ""),
            ("snapshot size", f"{size / 2**20:.0f} MB = {size / 2**30 * per_m:.1f} GB per million messages", "", ""),
        ]
        if args.export_messages:
            big = work / "big.db"
            shutil.copy(lite_db, big)
            total = replicate(big, args.export_messages)
            t_big, size_big, n_big = export(f"sqlite:///{big}", work / "snap-big.db")
            rows += [(f"export of a {n_big:,}-message store", f"{t_big:.1f} s, {size_big / 2**30:.2f} GB",
                      "< 120 s", "PASS" if t_big < 120 else "FAIL")]
            t_same, unchanged = export_if_changed(f"sqlite:///{big}", work / "snap-big.db")
            rows += [("the same, --if-changed, store unchanged", f"{t_same:.2f} s" + ("" if unchanged else
                      " (rebuilt: the state check missed)"), "", "")]
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{dbname}`")
        admin.close()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print_figures(rows, 48)


if __name__ == "__main__":
    main()
