"""The snapshot updated in place is the snapshot a full build makes (issue 16).

One archive of every source kind (a generated OpenClaw tree of three servers,
pi, mini-OpenClaw, Codex, the agent-server, Claude Code) is exported once;
then the sources change as they do in life, and after each change the import
runs and the export updates the snapshot in place. Each time the updated
snapshot is compared with a full build of the same store, row by row, every
column (generated ones too), the redaction counts, the session list and the
terms of both full-text indexes (fts5vocab: term, row, column, offset).

The changes: lines appended to live sessions (a tool call whose result comes in
the next run), a new session, an entry rewritten with other content, a file
truncated and written again (a copy), a sessions.json label, a reset rollover
(the file renamed, a new one begun), a deleted file, a credential that a later
line reveals (the earlier message holding the same value is redacted too), a
Codex and a Claude Code session grown, nothing at all. Also: a reader in a loop
while updates run never sees half of one, and a served Datasette shows each
update (and a full build) on its next page.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import sqlite3
import threading
import urllib.request
from pathlib import Path

import pytest

import conversation_fixtures as CV
from conftest import Served
from importer import derived, shape
from importer.snapshot import export_snapshot
from importer.snapshot.export import export_facts
from importer.pipeline import run_import
from importer.snapshot_state import State, state_path
from importer.store import open_store
from transcripts import Chain, do_import, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import trees  # noqa: E402  (bench/trees.py: trees bigger than the demo)
ZONE = "Asia/Shanghai"
# a value no detector recognises alone, revealed as a password by a later line
HIDDEN = "Vq7Lm2Xr9Tz4Kp8W"


def contents(path: Path) -> dict:
    """Everything a reader of the snapshot can see or query, in a comparable form."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out: dict = {}
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE '%_fts%' ORDER BY name")]
        for name in names:
            cols = [r[1] for r in conn.execute(f"PRAGMA table_xinfo([{name}])")]
            if name == shape.MARKER:
                out[name] = sorted(r for r in conn.execute(f"SELECT key, value FROM [{name}]")
                                   if r[0] not in ("exported_at", "updated_at", "snapshot_id", "generation"))
                continue
            order = "1, 2, 3, 4, 5, 6" if name == shape.REDACTIONS else "name" if name == shape.FACTS else "id"
            out[name] = conn.execute(f"SELECT {', '.join(f'[{c}]' for c in cols)} FROM [{name}] "
                                     f"ORDER BY {order}").fetchall()
        out["schema"] = sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                                            "WHERE name NOT LIKE 'sqlite_%'"))
        for fts in (shape.FTS_TABLE, shape.TOOL_FTS_TABLE, derived.FTS):
            conn.execute(f"CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, {fts}, instance)")
            out[fts] = conn.execute("SELECT term, doc, col, offset FROM temp.v ORDER BY 1, 2, 3, 4").fetchall()
            conn.execute("DROP TABLE temp.v")
    finally:
        conn.close()
    return out


def differences(a: dict, b: dict) -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            left, right = a.get(key) or [], b.get(key) or []
            in_right, in_left = set(right), set(left)
            only_a = [r for r in left if r not in in_right][:2]
            only_b = [r for r in right if r not in in_left][:2]
            out.append(f"{key}: {len(left)} vs {len(right)} rows; updated only {only_a!r:.600}; "
                       f"full only {only_b!r:.600}")
    return out


class Archive:
    """A store of every kind, its snapshot, and what changes them."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.db = tmp / "archive.db"
        self.url = f"sqlite:///{self.db}"
        self.snapshot = tmp / "snap" / "snapshot.db"
        self.tree = tmp / "tree"
        self.builds = 0
        trees.generate_tree(str(self.tree), target_bytes=1_500_000, seed=7)
        self.kinds = tmp / "kinds"
        CV.build_kinds_snapshot(self.kinds)  # (imports every kind into kinds/archive.db)
        shutil.copy(self.kinds / "archive.db", self.db)
        self.import_tree()

    def import_tree(self) -> None:
        store = open_store(self.url)
        try:
            report = run_import(store, [str(self.tree)])
        finally:
            store.close()
        assert report.files_failed == 0, report.failures

    def reimport_kinds(self) -> None:
        for path, server in ((self.kinds / "codex" / ".codex", "laptop"), (self.kinds / "claude", "laptop")):
            report = do_import(self.db, path, server=server)
            assert report.files_failed == 0, report.failures

    def export(self, **kw):
        store = open_store(self.url)
        try:
            return export_snapshot(store, self.snapshot, timezone=ZONE, **kw)
        finally:
            store.close()

    def check(self, what: str, expect_update: bool = True):
        """Import, update the snapshot in place, compare it with a full build of the same store."""
        self.import_tree()
        report = self.export()
        if expect_update:
            assert report.mode == "update", f"{what}: {report.summary()}"
        self.builds += 1
        fresh = self.tmp / f"full-{self.builds}" / "snapshot.db"
        store = open_store(self.url)
        try:
            export_snapshot(store, fresh, timezone=ZONE)
        finally:
            store.close()
        diff = differences(contents(self.snapshot), contents(fresh))
        assert not diff, f"after {what}: " + "\n".join(diff)
        return report

    # -- the sources' files -----------------------------------------------------------------

    def live_files(self) -> list[Path]:
        files = sorted(p for p in self.tree.glob("*/agents/*/sessions/*.jsonl") if "-topic-" not in p.name)
        assert len(files) >= 4
        return files

    @staticmethod
    def last_entry(path: Path) -> dict:
        return json.loads(path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1])

    @staticmethod
    def append(path: Path, objs: list[dict]) -> None:
        with open(path, "a", encoding="utf-8") as f:
            for obj in objs:
                f.write(json.dumps(obj, ensure_ascii=False) + "\n")


def turn(parent: str, start: int, text: str, call: str | None = None, result: bool = True) -> list[dict]:
    """A user message, an assistant answer with a shell call, and (``result``) its result."""
    c = Chain(start=start, parent=parent, minute=start)
    out = [c.user(text)]
    blocks = [{"type": "thinking", "thinking": f"thinking about {text}"}, {"type": "text", "text": "running it"}]
    if call:
        blocks.append({"type": "toolCall", "id": call, "name": "exec", "arguments": {"command": f"echo {text}"}})
    out.append(c.assistant(blocks))
    if call and result:
        out.append(c.entry("message", message={"role": "toolResult", "toolCallId": call, "toolName": "exec",
                                               "content": [{"type": "text", "text": f"{text} done"}],
                                               "isError": False, "timestamp": 1775354400000 + start}))
    return out


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    a = Archive(tmp_path_factory.mktemp("update"))
    first = a.export()
    assert first.mode == "full"
    return a


def test_an_update_equals_a_full_build_after_every_kind_of_change(archive):
    a = archive
    files = a.live_files()
    # 1. lines appended to two live sessions; the second's tool result arrives only in the next run
    a.append(files[0], turn(a.last_entry(files[0])["id"], 9000, "append one", call="call-a1"))
    waiting = turn(a.last_entry(files[1])["id"], 9100, "append two", call="call-a2", result=False)
    a.append(files[1], waiting)
    report = a.check("appends")
    assert report.sessions_changed >= 2 and report.changed.get("messages", 0) >= 5
    # 2. the result of the waiting call (the call's row changes: its result, exit code, preview)
    c = Chain(start=9200, parent=waiting[-1]["id"], minute=9200)
    a.append(files[1], [c.entry("message", message={"role": "toolResult", "toolCallId": "call-a2",
                                                    "toolName": "exec", "isError": True,
                                                    "content": [{"type": "text", "text": "late result"}],
                                                    "timestamp": 1775354400000 + 9200})])
    a.check("a late tool result")
    # 3. a new session
    new = "0dd0dd00-0000-4000-8000-000000000001"
    root = files[0].parent
    c = Chain(minute=100)
    write(root / f"{new}.jsonl", [{"type": "session", "id": new, "timestamp": "2026-04-05T01:00:00.000Z",
                                   "cwd": "/srv", "version": 3},
                                  c.user("部署新的服务器 zebrafinch"),
                                  c.assistant([{"type": "text", "text": "已部署 zebrafinch"}])])
    a.check("a new session")
    # 4. an entry rewritten with other content (the same id): the new version wins, the old is kept
    lines = files[2].read_bytes().splitlines()
    for i, raw in enumerate(lines):
        obj = json.loads(raw)
        if obj.get("type") == "message" and obj["message"].get("role") == "user":
            obj["message"]["content"] = [{"type": "text", "text": "rewritten question about quokka"}]
            lines[i] = json.dumps(obj, ensure_ascii=False).encode()
            break
    files[2].write_bytes(b"\n".join(lines) + b"\n")
    a.check("a rewritten entry")
    # 5. a file truncated and written again: its first half, then new lines (a copy of the session)
    lines = files[3].read_bytes().splitlines()
    half = lines[: max(2, len(lines) // 2)]
    parent = json.loads(half[-1])["id"]
    files[3].write_bytes(b"\n".join(half) + b"\n")
    a.append(files[3], turn(parent, 9300, "after the truncation", call="call-t1"))
    a.check("a truncation copy")
    # 6. a sessions.json label
    index = root / "sessions.json"
    data = json.loads(index.read_text()) if index.exists() else {}
    data[f"agent:{root.parent.name}:relabelled"] = {"sessionId": new, "updatedAt": 1775400009000,
                                                    "label": "zebrafinch rollout"}
    index.write_text(json.dumps(data), encoding="utf-8")
    a.check("a sessions.json label")
    # 7. a reset: the file renamed aside, a new session begun
    reset = files[0].with_name(files[0].name + ".reset.2026-04-06T10-00-00.000Z")
    files[0].rename(reset)
    nxt = "0dd0dd00-0000-4000-8000-000000000002"
    c = Chain(minute=200)
    write(root / f"{nxt}.jsonl", [{"type": "session", "id": nxt, "timestamp": "2026-04-06T10:00:01.000Z",
                                   "cwd": "/srv", "version": 3}, c.user("after the reset")])
    a.check("a reset rollover")
    # 8. a file deleted from the source: the archive keeps what it had, and so does the snapshot
    files[4 if len(files) > 4 else 1].unlink()
    report = a.check("a deleted file", expect_update=True)
    # 9. a value that only a later line shows to be a password; the earlier message holds it too
    f = root / f"{new}.jsonl"
    a.append(f, turn(a.last_entry(f)["id"], 9400, f"remember the string {HIDDEN} for later"))
    a.check("an unremarkable value")
    snap = sqlite3.connect(a.snapshot)
    assert snap.execute("SELECT COUNT(*) FROM messages WHERE content_blocks LIKE ?", (f"%{HIDDEN}%",)).fetchone()[0]
    snap.close()
    a.append(f, turn(a.last_entry(f)["id"], 9500, f"export DB_PASSWORD={HIDDEN}"))
    report = a.check("the value revealed as a password")
    snap = sqlite3.connect(a.snapshot)
    assert not snap.execute("SELECT COUNT(*) FROM messages WHERE content_blocks LIKE ?",
                            (f"%{HIDDEN}%",)).fetchone()[0]
    # the user's message and the assistant's thinking that quoted it, exported one run before
    assert snap.execute("SELECT COUNT(*) FROM messages WHERE content_blocks LIKE '%remember the string [REDACTED:%'"
                        ).fetchone()[0] == 2
    snap.close()
    # 10. Codex and Claude Code sessions grown (Claude: usage counted once across files)
    CV.grow_kinds(a.kinds)
    a.reimport_kinds()
    a.check("codex and claude code grown")
    # 11. nothing new
    assert a.export().unchanged


def test_the_search_indexes_stay_right_through_an_update(archive):
    """The messages' scope index (what the searches read a match's filters from, shape.MESSAGE_SCOPE)
    and tool_calls' (tool_name, session_id), after an update in place: there, holding exactly what the
    rows hold (the new message too), and the searches find the new message through them."""
    from importer import session_search as S

    a = archive
    f = a.live_files()[0]
    a.append(f, turn(a.last_entry(f)["id"], 9700, "scope check walrus", call="call-s1"))
    a.check("a message for the scope index")  # (the schema and every row compared with a full build)
    conn = sqlite3.connect(f"file:{a.snapshot}?mode=ro", uri=True)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {shape.MESSAGE_SCOPE_INDEX, shape.index_name("tool_calls", ("tool_name", "session_id"))} <= names
        cols = ", ".join(shape.MESSAGE_SCOPE)
        indexed = conn.execute(f"SELECT {cols} FROM messages INDEXED BY {shape.MESSAGE_SCOPE_INDEX} "
                               "ORDER BY id").fetchall()
        assert indexed == conn.execute(f"SELECT {cols} FROM messages NOT INDEXED ORDER BY id").fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (mid, agent, sid), = conn.execute(
            "SELECT m.id, m.agent_id, m.session_id FROM messages_fts x JOIN messages m ON m.id = x.rowid "
            "WHERE messages_fts MATCH 'walrus' AND m.role = 'user'").fetchall()
        found = S.search(conn, "walrus", S.Options(agent=[agent]))
        assert [r["id"] for r in found["sessions"]] == [sid] and found["sessions"][0]["first_match_id"] == mid
        assert S.search(conn, "walrus tool:exec")["sessions"][0]["id"] == sid
        assert S.search(conn, "walrus", S.Options(agent=["no-such-agent"]))["sessions"] == []
    finally:
        conn.close()


def test_a_reader_in_a_loop_never_sees_half_an_update(archive):
    """Every read sees the messages and the sessions' counts of one and the same update."""
    a = archive
    stop = threading.Event()
    seen: list[tuple] = []
    errors: list[str] = []

    def read():
        conn = sqlite3.connect(f"file:{a.snapshot}?mode=ro", uri=True, timeout=30)
        while not stop.is_set():
            try:
                seen.append(conn.execute(
                    "SELECT (SELECT COUNT(*) FROM messages), (SELECT SUM(message_count) FROM sessions), "
                    "(SELECT COUNT(*) FROM session_list), (SELECT COUNT(*) FROM sessions)").fetchone())
            except sqlite3.Error as exc:
                errors.append(str(exc))
        conn.close()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        f = next(p for p in a.live_files())
        for k in range(6):
            a.append(f, turn(a.last_entry(f)["id"], 9600 + 10 * k, f"loop {k}", call=f"call-l{k}"))
            a.import_tree()
            assert a.export().mode == "update"
    finally:
        stop.set()
        reader.join()
    assert not errors, errors[:3]
    assert len({s[0] for s in seen}) >= 2, "the reader saw no update"
    for messages, counted, listed, sessions in seen:
        assert messages == counted and listed == sessions


def _get(url: str):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def test_a_served_snapshot_shows_each_update_and_a_full_build(archive):
    a = archive
    # (the download, off unless asked, is part of what is checked)
    server = Served(a.snapshot, "--setting", "allow_download", "on")
    base = server.base
    try:
        def count(word: str) -> int:
            rows = _get(f"{base}/snapshot/messages.json?_search={word}&_shape=array&_col=id")
            return len(rows)

        before = _get(f"{base}/snapshot/messages.json?_size=0")["filtered_table_rows_count"]
        dash = urllib.request.urlopen(f"{base}/-/agentbase?days=all", timeout=30).read().decode()
        f = a.live_files()[0]
        a.append(f, turn(a.last_entry(f)["id"], 9800, "servedotter", call="call-s1"))
        a.import_tree()
        assert a.export().mode == "update"
        assert count("servedotter") == 3  # the question, the thinking that repeats it, the result
        assert _get(f"{base}/snapshot/messages.json?_size=0")["filtered_table_rows_count"] == before + 3
        assert urllib.request.urlopen(f"{base}/-/agentbase?days=all", timeout=30).read().decode() != dash
        # the home page lists the session's new activity; the table counts are the export's
        tables = _get(f"{base}/snapshot.json")["tables"]
        assert {t["name"]: t["count"] for t in tables}["messages"] == before + 3
        # a new agent (a copy of another session under its name): the session browser offers it at once
        home = urllib.request.urlopen(f"{base}/", timeout=30).read().decode()  # (its choices kept now)
        assert "servedquokka" not in home
        other = a.live_files()[1]
        agent_dir = other.parent.parent.parent / "servedquokka" / "sessions"
        agent_dir.mkdir(parents=True)
        shutil.copy(other, agent_dir / other.name)
        a.import_tree()
        assert a.export().mode == "update"
        home = urllib.request.urlopen(f"{base}/", timeout=30).read().decode()
        assert re.search(r"<option[^>]*>servedquokka</option>", home), "the new agent is not offered"
        before = _get(f"{base}/snapshot/messages.json?_size=0")["filtered_table_rows_count"] - 3
        # a full build: a new file under the same name, read on the next page
        a.append(f, turn(a.last_entry(f)["id"], 9900, "fullbuildotter"))
        a.import_tree()
        assert a.export(full=True).mode == "full"
        assert count("fullbuildotter") == 2 and count("servedotter") == 3
        # the download is one consistent copy
        with urllib.request.urlopen(f"{base}/snapshot.db", timeout=60) as r:
            copy = a.tmp / "downloaded.db"
            copy.write_bytes(r.read())
        conn = sqlite3.connect(copy)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == before + 5
        conn.close()
        assert not list(a.snapshot.parent.glob(".snapshot.db.download-*"))
    finally:
        server.stop()
    assert "Traceback" not in server.errors()


def test_the_state_file_is_private_and_a_mismatch_rebuilds(archive, tmp_path):
    a = archive
    state = a.snapshot.with_name("snapshot-state.db")
    assert oct(os.stat(state).st_mode & 0o777) == "0o600"
    # a snapshot put back from elsewhere (its state no longer its own): built in full, not updated wrongly
    other = tmp_path / "other.db"
    store = open_store(a.url)
    try:
        export_snapshot(store, other, timezone=ZONE)
    finally:
        store.close()
    shutil.copy(other.with_name("other-state.db"), state)
    report = a.export()
    assert report.mode == "full" and "not this snapshot's" in report.why_full
    # another time zone: built in full
    store = open_store(a.url)
    try:
        report = export_snapshot(store, a.snapshot, timezone="Europe/Berlin")
    finally:
        store.close()
    assert report.mode == "full" and report.why_full == "the time zone changed"


def test_a_snapshot_of_an_older_format_is_rebuilt_in_full_with_its_facts(archive, monkeypatch):
    # an up-to-date snapshot is updated in place...
    archive.export()
    assert archive.export().mode == "update"
    # ...one of the format before (no facts table; its state holds the shape digest of its own format) is
    # built in full on the upgrade, facts and all, and then updated in place again
    conn = sqlite3.connect(archive.snapshot)
    conn.execute(f"DROP TABLE {shape.FACTS}")
    conn.execute(f"UPDATE {shape.MARKER} SET value = ? WHERE key = 'format'", (str(shape.FORMAT - 1),))
    conn.commit()
    conn.close()
    monkeypatch.setattr(shape, "FORMAT", shape.FORMAT - 1)
    store = open_store(archive.url)
    try:
        state = State(state_path(archive.snapshot))
        state.set_meta({"shape": export_facts(store, ZONE, True)["shape"]})  # (autocommit)
        state.close()
    finally:
        store.close()
    monkeypatch.undo()
    report = archive.export()
    assert report.mode == "full" and report.why_full == "the snapshot's format or AgentBase's version changed"
    conn = sqlite3.connect(archive.snapshot)
    try:
        assert conn.execute(f"SELECT value FROM {shape.MARKER} WHERE key = 'format'").fetchone() == (str(shape.FORMAT),)
        assert {r[0] for r in conn.execute(f"SELECT name FROM {shape.FACTS}")} == set(shape.FACT_KEYS)
    finally:
        conn.close()
    assert archive.export().mode == "update"


def test_a_build_with_its_worker_equals_one_built_in_one_process(archive, tmp_path, monkeypatch):
    # with two cores the worker builds the full-text indexes and the session list (from the rows
    # read through WAL) while the main process writes; with one, the main process does it all
    store = open_store(archive.url)
    try:
        two = export_snapshot(store, tmp_path / "two" / "snapshot.db", timezone=ZONE, full=True)
        monkeypatch.setattr(os, "cpu_count", lambda: 1)
        one = export_snapshot(store, tmp_path / "one" / "snapshot.db", timezone=ZONE, full=True)
    finally:
        store.close()
    assert os.cpu_count() == 1 and two.rows[derived.TABLE] == one.rows[derived.TABLE] > 0
    # nothing of the worker's is left beside it (its files, the -wal of the build), and it is served
    # in WAL mode
    left = sorted(p.name for p in (tmp_path / "two").iterdir())
    assert len(left) == 3 and left[1:] == ["snapshot-state.db", "snapshot.db"], left
    a, b = contents(Path(two.path)), contents(Path(one.path))
    assert a[derived.TABLE] and a[derived.FTS]
    assert differences(a, b) == []
    conn = sqlite3.connect(two.path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_an_update_from_mariadb_equals_a_full_build(tmp_path, mariadb_url):
    """The change log works the same on MariaDB (its numbers under the store's named write lock)."""
    tree = tmp_path / "tree"
    trees.generate_tree(str(tree), target_bytes=400_000, seed=3)
    snapshot = tmp_path / "snap" / "snapshot.db"

    def sync(**kw):
        store = open_store(mariadb_url)
        try:
            assert run_import(store, [str(tree)]).files_failed == 0
            return export_snapshot(store, snapshot, timezone=ZONE, **kw)
        finally:
            store.close()

    assert sync().mode == "full"
    files = sorted(tree.glob("*/agents/*/sessions/*.jsonl"))
    Archive.append(files[0], turn(Archive.last_entry(files[0])["id"], 9000, "mariadb otter", call="call-m1"))
    report = sync()
    assert report.mode == "update" and report.sessions_changed == 1 and report.changed["messages"] == 3
    store = open_store(mariadb_url)
    try:
        export_snapshot(store, tmp_path / "full" / "snapshot.db", timezone=ZONE)
    finally:
        store.close()
    assert not differences(contents(snapshot), contents(tmp_path / "full" / "snapshot.db"))
    assert sync().unchanged


def test_the_day_and_the_dashboards_hour_read_what_local_time_says(archive, tmp_path):
    """`day` (by date() from the stored milliseconds) and the dashboard's hour (by integer arithmetic)
    are quicker ways to the same values as local_time's text, in a zone with summer time too."""
    from datasette_agentbase import dashboard

    store = open_store(archive.url)
    try:
        export_snapshot(store, tmp_path / "berlin.db", timezone="Europe/Berlin")
    finally:
        store.close()
    for path in (archive.snapshot, tmp_path / "berlin.db"):
        conn = sqlite3.connect(path)
        for table in ("messages", "tool_calls"):
            n, wrong = conn.execute(f"SELECT COUNT(*), SUM(day IS NOT substr(local_time, 1, 10)) FROM {table}").fetchone()
            assert n > 100 and wrong == 0, (path.name, table)
        hours = conn.execute(f"SELECT {dashboard.HOUR_FROM_MS}, substr(local_time, 12, 2) FROM messages").fetchall()
        assert hours and all(h is None and t is None or str(h).zfill(2) == t for h, t in hours)
        conn.close()
