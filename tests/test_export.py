"""The snapshot: same rows from either store, local days, full-text search in
Chinese and English, atomic replacement, counts file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from importer.snapshot import export_snapshot
from importer.search import fts_query
from importer.store import StoreError, open_store
from transcripts import CONTENT_TABLES, SID, Chain, exec_call, header, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]


def corpus(root: Path) -> Path:
    """A session whose words each live in one kind of field."""
    c = Chain()
    objs = [header()]
    objs.append(c.user("请帮我把网站部署到新的服务器上，谢谢"))  # 部署 inside a sentence
    objs.append(c.assistant([
        {"type": "thinking", "thinking": "The user wants a deployment; check the zebrafish config first"},
        exec_call("t1", "rm -rf /tmp/build && tail -n 50 /var/log/nginx/error.log"),
    ]))
    objs.append(c.result("t1", "permission denied: quokka.conf", details={"exitCode": 1}))
    objs.append(c.assistant([{"type": "text", "text": "Deployment finished on the staging host."}]))
    # late in the UTC day: already the next day in Shanghai
    late = c.user("second question")
    late["timestamp"] = "2026-04-05T20:30:00.000Z"
    objs.append(late)
    write(sessions_dir(root) / f"{SID}.jsonl", objs)
    return root


def cli(*args):
    return subprocess.run([sys.executable, "-m", "importer", *args], cwd=REPO, capture_output=True, text=True)


@pytest.fixture
def snapshot(tmp_path):
    root = corpus(tmp_path / "state")
    db = f"sqlite:///{tmp_path / 'archive.db'}"
    assert cli("import", str(root), "--server", "s", "--db", db).returncode == 0
    out = tmp_path / "snap.db"
    proc = cli("export", "--db", db, "-o", str(out), "--timezone", "Asia/Shanghai")
    assert proc.returncode == 0, proc.stderr[-400:]
    return out


def search(path: Path, q: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute(
            "SELECT m.role FROM messages_fts f JOIN messages m ON m.id = f.rowid "
            "WHERE messages_fts MATCH ? ORDER BY m.seq", (fts_query(q),))]
    finally:
        conn.close()


@pytest.mark.parametrize("q, roles", [
    ("部署", ["user"]),                 # a two-character Chinese word inside a sentence
    ("服务器", ["user"]),               # three characters
    ("zebrafish", ["assistant"]),       # only in thinking
    ("quokka", ["toolResult"]),         # only in a tool result
    ("/var/log/nginx", ["assistant"]),  # a path fragment in tool arguments
    ("nginx/error.log", ["assistant"]),
    ('"rm -rf"', ["assistant"]),        # a command fragment, as a phrase
    ("rm -rf", ["assistant"]),
    ("deployment", ["assistant", "assistant"]),  # English, any case, text and thinking
    ("部署 staging", []),               # every term must occur in the same message
    ("部", ["user"]),                   # a single character: the start of a pair (部署)
    ("器", ["user"]),                   # ... and the end of a run (服务器: the index text holds it alone)
    ("", []),
])
def test_search(snapshot, q, roles):
    assert search(snapshot, q) == roles


def test_local_day_columns(snapshot):
    conn = sqlite3.connect(snapshot)
    rows = conn.execute("SELECT timestamp, local_time, day FROM messages ORDER BY seq").fetchall()
    assert rows[0] == ("2026-04-05 02:00:01.000", "2026-04-05 10:00:01.000", "2026-04-05")
    assert rows[-1] == ("2026-04-05 20:30:00.000", "2026-04-06 04:30:00.000", "2026-04-06")
    assert conn.execute("SELECT day FROM tool_calls").fetchall() == [("2026-04-05",)]
    assert conn.execute("SELECT value FROM agentbase_snapshot WHERE key = 'timezone'").fetchone() == ("Asia/Shanghai",)
    # every facet/sort column the explorer uses is indexed
    indexed = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"idx_messages_day", "idx_messages_agent_id_timestamp", "idx_tool_calls_tool_name_session_id"} <= indexed
    assert conn.execute("SELECT COUNT(*) FROM sqlite_stat1").fetchone()[0] > 0  # ANALYZE ran
    conn.close()


def test_a_live_snapshot_serves_datasette_with_its_own_counts(snapshot):
    conn = sqlite3.connect(snapshot)
    counts = json.loads(conn.execute("SELECT value FROM agentbase_snapshot WHERE key = 'counts'").fetchone()[0])
    real = {t: conn.execute(f"SELECT COUNT(*) FROM [{t}]").fetchone()[0] for t in counts}
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert counts == real and counts["messages"] == 5
    from datasette.app import Datasette
    import asyncio

    async def go():
        ds = Datasette([str(snapshot)], metadata={"databases": {"snap": {"tables": {"messages": {
            "fts_table": "messages_fts", "fts_pk": "id"}}}}})
        await ds.invoke_startup()
        r = await ds.client.get("/snap/messages.json?_search=部署&_shape=array&_col=role")
        return r.status_code, r.json(), await ds.databases["snap"].table_counts()

    status, rows, served = asyncio.run(go())
    assert status == 200 and [r["role"] for r in rows] == ["user"]
    # every table's count as the export keeps it (tool_calls is a view: listed apart, without one)
    assert served == {t: n for t, n in counts.items() if t != "tool_calls"}


def test_a_full_build_is_a_new_file_while_the_old_one_is_read(tmp_path, snapshot):
    old = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    old.execute("BEGIN")
    before = old.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    db = f"sqlite:///{tmp_path / 'archive.db'}"
    c = Chain(start=900)
    write(sessions_dir(tmp_path / "state") / "0e0e0e0e-0000-4000-8000-000000000000.jsonl",
          [header("0e0e0e0e-0000-4000-8000-000000000000"), c.user("more")])
    assert cli("import", str(tmp_path / "state"), "--server", "s", "--db", db).returncode == 0
    run = cli("export", "--db", db, "-o", str(snapshot), "--full")
    assert run.returncode == 0 and "built in full: asked for (--full)" in run.stderr, run.stderr
    # the reader of the old file is undisturbed (it keeps the file it opened); a new reader sees the new file
    assert old.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == before
    new = sqlite3.connect(snapshot)
    assert new.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == before + 1
    assert not list(snapshot.parent.glob(".snap.db.tmp-*"))
    # one build's file is left, the link's
    builds = {p.name.split("-")[0] for p in snapshot.parent.glob(".snap.db.*")}  # (with its -wal and -shm)
    assert builds == {os.readlink(snapshot)}
    old.close()
    new.close()


def test_bad_time_zone_is_one_line(tmp_path):
    proc = cli("export", "--db", f"sqlite:///{tmp_path / 'a.db'}", "-o", str(tmp_path / "s.db"),
               "--timezone", "Mars/Olympus")
    assert proc.returncode == 1 and "unknown time zone 'Mars/Olympus'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "s.db").exists()


def _snapshot_rows(path: Path) -> dict:
    conn = sqlite3.connect(path)
    out = {}
    for table, cols in CONTENT_TABLES.items():
        have = {r[1] for r in conn.execute(f"PRAGMA table_xinfo({table})")}
        cols = ", ".join(c for c in cols.split(", ") if c in have)
        extra = ", day, local_time" if table in ("messages", "tool_calls") else ""
        out[table] = sorted(conn.execute(f"SELECT {cols}{extra} FROM {table}").fetchall(), key=repr)
    out["fts"] = sorted(conn.execute(
        "SELECT m.message_uuid FROM messages_fts f JOIN messages m ON m.id = f.rowid "
        "WHERE messages_fts MATCH ?", (fts_query("部署"),)).fetchall())
    conn.close()
    return out


def test_snapshot_from_mariadb_equals_snapshot_from_sqlite(tmp_path, mariadb_url):
    import synthetic

    root = tmp_path / "tree"
    synthetic.build(root)
    corpus(root / "extra")
    lite = f"sqlite:///{tmp_path / 'a.db'}"
    for url in (lite, mariadb_url):
        cli("import", str(root), "--db", url)
        cli("import", str(root / "extra"), "--server", "x", "--db", url)
    snaps = []
    for n, url in enumerate((lite, mariadb_url)):
        store = open_store(url)
        try:
            report = export_snapshot(store, tmp_path / f"s{n}.db", timezone="Europe/Berlin")
        finally:
            store.close()
        assert report.rows["messages"] > 20
        snaps.append(_snapshot_rows(tmp_path / f"s{n}.db"))
    assert snaps[0] == snaps[1]
    assert snaps[0]["fts"]


def test_unknown_zone_raises_store_error(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    with pytest.raises(StoreError):
        export_snapshot(store, tmp_path / "s.db", timezone="Nowhere/Land")
    store.close()


def _file_id(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


def _append_turn(root: Path, text: str) -> None:
    """One more user message at the end of the corpus session (a file that grew)."""
    path = sessions_dir(root) / f"{SID}.jsonl"
    last = json.loads(path.read_bytes().splitlines()[-1])
    entry = {"type": "message", "id": f"ff{len(text):06x}", "parentId": last["id"],
             "timestamp": "2026-04-05T21:00:00.000Z",
             "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
    with open(path, "ab") as f:
        f.write(json.dumps(entry, ensure_ascii=False).encode() + b"\n")


def _if_changed_cycle(tmp_path: Path, url: str) -> None:
    """export --if-changed rebuilds exactly when the store (or the zone) changed."""
    root = tmp_path / "state"
    out = tmp_path / "snap.db"

    def export(**kw) -> "object":
        store = open_store(url)
        try:
            return export_snapshot(store, out, **kw)
        finally:
            store.close()

    first = export(timezone="Asia/Shanghai")
    assert not first.unchanged and first.rows["messages"] == 5
    made = _file_id(out)
    again = export(timezone="Asia/Shanghai")
    assert again.unchanged and "unchanged" in again.summary()
    assert _file_id(out) == made  # not rewritten
    # another time zone: the local days differ, so it is rebuilt
    berlin = export(timezone="Europe/Berlin")
    assert not berlin.unchanged and _file_id(out) != made
    made = _file_id(out)
    # a rerun that finds nothing new leaves the store, and so the snapshot, as it was
    assert cli("import", str(root), "--server", "s", "--db", url).returncode == 0
    assert export(timezone="Europe/Berlin").unchanged and _file_id(out) == made
    # an import that adds a message: applied in place (the same file), and the message is in it
    _append_turn(root, "请检查备份任务 checkpoint-otter")
    assert cli("import", str(root), "--server", "s", "--db", url).returncode == 0
    grown = export(timezone="Europe/Berlin")
    assert not grown.unchanged and grown.mode == "update" and grown.rows["messages"] == 6
    assert grown.sessions_changed == 1 and grown.changed["messages"] == 1, grown.summary()
    assert out.stat().st_ino == made[0]
    assert search(out, "checkpoint-otter") == ["user"] and search(out, "备份") == ["user"]
    # full=True (export --full) builds a new file however little changed
    store = open_store(url)
    try:
        rebuilt = export_snapshot(store, out, timezone="Europe/Berlin", full=True)
    finally:
        store.close()
    assert rebuilt.mode == "full" and rebuilt.rows["messages"] == 6 and out.stat().st_ino != made[0]
    # a snapshot made from another store at the same path is rebuilt from this one
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert cli("import", str(corpus(tmp_path / "other")), "--server", "o", "--db", other).returncode == 0
    store = open_store(other)
    try:
        assert not export_snapshot(store, out, timezone="Europe/Berlin").unchanged
    finally:
        store.close()


def test_export_if_changed_sqlite(tmp_path):
    db = f"sqlite:///{tmp_path / 'archive.db'}"
    assert cli("import", str(corpus(tmp_path / "state")), "--server", "s", "--db", db).returncode == 0
    _if_changed_cycle(tmp_path, db)


def test_export_if_changed_mariadb(tmp_path, mariadb_url):
    assert cli("import", str(corpus(tmp_path / "state")), "--server", "s", "--db", mariadb_url).returncode == 0
    _if_changed_cycle(tmp_path, mariadb_url)


def test_export_if_changed_cli(tmp_path, snapshot):
    db = f"sqlite:///{tmp_path / 'archive.db'}"
    made = _file_id(snapshot)
    proc = cli("export", "--db", db, "-o", str(snapshot), "--timezone", "Asia/Shanghai", "--if-changed")
    assert proc.returncode == 0 and proc.stderr.strip() == (
        f"snapshot {snapshot} unchanged: nothing new in the store since it was made")
    assert _file_id(snapshot) == made
    # the redaction setting is part of what the snapshot shows
    proc = cli("export", "--db", db, "-o", str(snapshot), "--timezone", "Asia/Shanghai", "--if-changed",
               "--no-redact")
    assert proc.returncode == 0 and "unchanged" not in proc.stderr and _file_id(snapshot) != made
