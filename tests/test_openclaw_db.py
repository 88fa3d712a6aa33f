"""OpenClaw's SQLite store (2026.8+), its archives, and standalone pi sessions (issue 6).

The stores are built at test time with OpenClaw's own DDL (tests/openclaw_fixtures.py); their
content is made up. The real stores OpenClaw 2026.9.6 wrote are checked in
test_openclaw_samples.py.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zstandard

import openclaw_fixtures as F
from transcripts import Chain, do_import, header, rows, scalar, write
from importer.sources import openclaw_db
from importer.store import open_store

REPO = Path(__file__).resolve().parents[1]
SID_A = "aaaaaaaa-0000-4000-8000-000000000001"
SID_B = "bbbbbbbb-0000-4000-8000-000000000002"
SID_C = "cccccccc-0000-4000-8000-000000000003"
SID_D = "dddddddd-0000-4000-8000-000000000004"


def agent_store(state: Path, agent: str = "main", schema=23) -> tuple[Path, sqlite3.Connection]:
    path = state / "agents" / agent / "agent" / "openclaw-agent.sqlite"
    return path, F.create_agent_store(path, schema=schema, agent_id=agent)


def messages_of(db: Path, sid: str) -> int:
    return scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = ?", (sid,))


def n_messages(events: list[dict]) -> int:
    return sum(1 for e in events if e.get("type") == "message")


def test_compressed_events_are_decoded(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state)
    F.add_window(conn, SID_A, "agent:main:main", status="done", model_provider="mock", model="mock-model")
    events = F.conversation_events(SID_A, turns=3, big=3000)
    big = {i for i, e in enumerate(events) if len(F.compact(e)) > 1024}
    assert len(big) == 3  # the three long tool results
    F.add_events(conn, SID_A, events, compress=big)
    F.set_watermark(conn, SID_A, "a" * 32)
    conn.close()
    assert rows(path, "SELECT COUNT(*) FROM transcript_events WHERE event_zstd IS NOT NULL") == [(3,)]

    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert (report.files_failed, report.files_imported, report.events_read) == (0, 1, len(events))
    assert messages_of(db, SID_A) == n_messages(events) == 12
    # The compressed tool results came back exactly.
    want = {e["message"]["toolCallId"]: e["message"]["content"] for i, e in enumerate(events) if i in big}
    got = {r[0]: json.loads(r[1]) for r in rows(
        db, "SELECT tool_call_id, content_blocks FROM messages WHERE role = 'toolResult'")}
    assert got == want
    assert rows(db, "SELECT session_type, cwd, status, model_provider, model, session_key FROM sessions") == [
        ("normal", "/work", "done", "mock", "mock-model", "agent:main:main")]
    assert rows(db, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NOT NULL") == [(3,)]


def test_cold_archives_file_and_embedded_blob(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state)
    sessions = {SID_A: "file", SID_B: "sqlite", SID_C: "file"}
    events = {}
    for n, (sid, storage) in enumerate(sessions.items()):
        F.add_window(conn, sid, f"agent:main:s{n}")
        events[sid] = F.conversation_events(sid, turns=n + 1)
        F.add_events(conn, sid, events[sid])
    archives = {sid: F.move_to_cold(conn, sid, path, storage) for sid, storage in sessions.items()}
    conn.close()
    assert rows(path, "SELECT COUNT(*) FROM transcript_events") == [(0,)]
    # Damage one archive file: it must fail alone, checked by its sha256.
    cold_c = state / "agents" / "main" / "sessions" / "cold" / archives[SID_C]["name"]
    data = bytearray(cold_c.read_bytes())
    data[-5] ^= 0xFF
    cold_c.write_bytes(bytes(data))

    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert report.files_failed == 1 and report.files_imported == 2
    assert [p for p, _ in report.failures] == [f"{path}#{SID_C}"]
    assert "sha256" in report.failures[0][1]
    assert messages_of(db, SID_A) == n_messages(events[SID_A])
    assert messages_of(db, SID_B) == n_messages(events[SID_B])
    assert messages_of(db, SID_C) == 0
    # Only "event" records are transcript lines: identity and fts records add nothing.
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE session_uuid = ?", (SID_A,)) == 1  # model_change
    assert report.events_read == archives[SID_A]["events"] + archives[SID_B]["events"]
    # Unchanged cold archives are not even decoded on the next run.
    report = do_import(db, state)
    assert (report.files_unchanged, report.events_read, report.files_failed) == (2, 0, 1)


def test_cold_archive_counts_are_checked(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state)
    F.add_window(conn, SID_A, "agent:main:main")
    F.add_events(conn, SID_A, F.conversation_events(SID_A))
    F.move_to_cold(conn, SID_A, path, "sqlite")
    conn.execute("UPDATE session_transcript_cold_archives SET event_count = event_count + 1")
    conn.close()
    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert report.files_failed == 1 and "events ending at seq" in report.failures[0][1]
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 0  # rolled back whole


def test_deleted_archive_and_its_published_zst(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state)
    sessions_dir = state / "agents" / "main" / "sessions"
    gone = F.conversation_events(SID_A, turns=2)
    reset = F.conversation_events(SID_B, turns=1)
    deleted_name = F.add_transcript_archive(conn, SID_A, "agent:main:to-delete", gone, publish_dir=sessions_dir)
    F.add_transcript_archive(conn, SID_B, "agent:main:old", reset, reason="reset", encoding="identity",
                             generation="b" * 32)
    conn.close()
    assert deleted_name.endswith(".zst") and (sessions_dir / deleted_name).is_file()

    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert (report.files_failed, report.files_seen, report.files_imported) == (0, 3, 3)
    assert rows(db, "SELECT session_uuid, session_type, message_count, session_key FROM sessions "
                    "ORDER BY session_uuid") == [
        (SID_A, "deleted", n_messages(gone), "agent:main:to-delete"),
        (SID_B, "reset", n_messages(reset), "agent:main:old")]
    # The archive row and the published file hold the same lines: each entry once, no revision.
    assert messages_of(db, SID_A) == n_messages(gone)
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 0
    assert do_import(db, state).files_unchanged == 3

    # The published .zst alone, anywhere JSONL is read (a single file, a bare folder).
    db2 = tmp_path / "b.db"
    report = do_import(db2, sessions_dir / deleted_name, agent="main")
    assert (report.files_imported, report.files_failed) == (1, 0)
    assert rows(db2, "SELECT session_uuid, session_type, message_count FROM sessions") == [
        (SID_A, "deleted", n_messages(gone))]


def test_corrupt_zst_file_fails_alone(tmp_path):
    sessions_dir = tmp_path / "state" / "agents" / "main" / "sessions"
    write(sessions_dir / f"{SID_B}.jsonl", F.conversation_events(SID_B, version=3))
    bad = sessions_dir / f"{SID_A}.jsonl.deleted.2026-11-30T10-49-41.860Z.{'c' * 32}.zst"
    bad.write_bytes(F.zstd_stream(F.jsonl(F.conversation_events(SID_A)))[:-20] + b"garbage-garbage-garb")
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "state")
    assert (report.files_failed, report.files_imported) == (1, 1)
    assert report.failures[0][0] == str(bad)
    assert messages_of(db, SID_B) == 8


def test_migrated_jsonl_and_sqlite_hold_each_entry_once(tmp_path):
    """The pre-migration files (a live .jsonl left in sessions/, a copy moved to
    session-sqlite-import-archive/) and the store hold the same session."""
    state = tmp_path / "state"
    path, conn = agent_store(state)
    before = F.conversation_events(SID_A, turns=2)
    after = F.more_events(SID_A, before, turns=2)
    agent_dir = state / "agents" / "main"
    write(agent_dir / "sessions" / f"{SID_A}.jsonl", before)
    write(agent_dir / "session-sqlite-import-archive" / f"agent_main_main.{SID_A}.jsonl.imported-1796035000000",
          before)
    # An unreferenced file the migration never imported: the only copy of its session.
    write(agent_dir / "session-sqlite-import-archive" / f"archive-tier.{SID_B}.jsonl.imported-1796035000001",
          F.conversation_events(SID_B, turns=1))
    F.add_window(conn, SID_A, "agent:main:main")
    F.add_events(conn, SID_A, before + after)
    conn.close()

    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert report.files_failed == 0 and report.files_seen == 4
    assert messages_of(db, SID_A) == n_messages(before + after)
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 0
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE session_uuid = ?", (SID_A,)) == 1
    assert rows(db, "SELECT session_uuid, session_type FROM sessions ORDER BY session_uuid") == [
        (SID_A, "normal"), (SID_B, "normal")]
    # The store is the newest source: it decides the session's file and active path.
    assert scalar(db, "SELECT file_path FROM sessions WHERE session_uuid = ?", (SID_A,)) == f"{path}#{SID_A}"
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND is_active_path = 0", (SID_A,)) == 0
    # Imported in the other order (the store first), the archive is the same.
    db2 = tmp_path / "b.db"
    do_import(db2, path, agent="main")
    do_import(db2, agent_dir / "sessions", agent="main")
    assert messages_of(db2, SID_A) == n_messages(before + after)
    assert scalar(db2, "SELECT COUNT(*) FROM entry_revisions") == 0


def test_import_while_the_gateway_holds_a_write_transaction(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state)
    events = F.conversation_events(SID_A, turns=2)
    F.add_window(conn, SID_A, "agent:main:main")
    F.add_events(conn, SID_A, events)
    conn.close()
    gateway = F.writer(path)
    extra = F.more_events(SID_A, events, turns=1)
    gateway.execute("BEGIN IMMEDIATE")
    F.add_events(gateway, SID_A, extra, start_seq=len(events))
    try:
        db = tmp_path / "a.db"
        started = time.monotonic()
        report = do_import(db, state)
        assert time.monotonic() - started < openclaw_db.BUSY_TIMEOUT_S  # never waited for the lock
        assert report.files_failed == 0
        assert messages_of(db, SID_A) == n_messages(events)  # the open transaction is not seen
    finally:
        gateway.execute("COMMIT")
        gateway.close()
    report = do_import(db, state)
    assert report.events_read == len(extra)
    assert messages_of(db, SID_A) == n_messages(events + extra)


def test_a_store_locked_longer_than_the_busy_timeout_fails_and_is_read_next_time(tmp_path, monkeypatch):
    """Rollback-journal mode (not OpenClaw's WAL): an exclusive lock blocks readers,
    for the busy timeout at most; the store fails that run, the others go on."""
    monkeypatch.setattr(openclaw_db, "BUSY_TIMEOUT_S", 0.2)
    state = tmp_path / "state"
    path, conn = agent_store(state)
    F.add_window(conn, SID_A, "agent:main:main")
    F.add_events(conn, SID_A, F.conversation_events(SID_A))
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("BEGIN EXCLUSIVE")
    write(state / "agents" / "main" / "sessions" / f"{SID_B}.jsonl", F.conversation_events(SID_B, version=3))
    db = tmp_path / "a.db"
    try:
        started = time.monotonic()
        report = do_import(db, state)
        assert time.monotonic() - started < 5
        assert (report.files_failed, report.files_imported) == (1, 1)
        assert "locked" in report.failures[0][1]
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    report = do_import(db, state)
    assert (report.files_failed, report.files_imported) == (0, 1)
    assert messages_of(db, SID_A) == 8


def test_incremental_rerun_reads_only_new_events(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state)
    events = F.conversation_events(SID_A, turns=5)
    other = F.conversation_events(SID_B, turns=1)
    F.add_window(conn, SID_A, "agent:main:main")
    F.add_window(conn, SID_B, "agent:main:other")
    F.add_events(conn, SID_A, events, compress={4})
    F.add_events(conn, SID_B, other)
    F.set_watermark(conn, SID_A, "1" * 32)
    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert report.events_read == len(events) + len(other)

    report = do_import(db, state)
    assert (report.events_read, report.files_unchanged, report.bytes_read) == (0, 2, 0)

    extra = F.more_events(SID_A, events, turns=2)
    F.add_events(conn, SID_A, extra, start_seq=len(events))
    report = do_import(db, state)
    assert (report.events_read, report.files_imported, report.files_unchanged) == (len(extra), 1, 1)
    assert report.messages_added == n_messages(extra)
    assert messages_of(db, SID_A) == n_messages(events + extra)
    assert scalar(db, "SELECT parsed_offset FROM parsed_files WHERE file_path = ?",
                  (f"{path}#{SID_A}",)) == len(events + extra) - 1

    # A rewrite (new watermark generation) is read whole and merged by entry id.
    F.set_watermark(conn, SID_A, "2" * 32)
    report = do_import(db, state)
    assert report.events_read == len(events + extra) and report.messages_added == 0
    assert messages_of(db, SID_A) == n_messages(events + extra)
    # So is a session whose last imported event changed without a new generation.
    conn.execute("UPDATE transcript_events SET event_json = ? WHERE session_id = ? AND seq = ?",
                 (F.compact({**extra[-1], "edited": True}), SID_A, len(events + extra) - 1))
    more = F.more_events(SID_A, extra, turns=1)
    F.add_events(conn, SID_A, more, start_seq=len(events + extra))
    report = do_import(db, state)
    assert report.events_read == len(events + extra + more)
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 1
    conn.close()


def test_auth_profile_tables_are_never_queried(tmp_path, monkeypatch):
    state = tmp_path / "state"
    path, conn = agent_store(state)
    F.add_window(conn, SID_A, "agent:main:main")
    F.add_events(conn, SID_A, F.conversation_events(SID_A), compress={3})
    F.add_transcript_archive(conn, SID_B, "agent:main:gone", F.conversation_events(SID_B))
    F.add_window(conn, SID_C, "agent:main:cold")
    F.add_events(conn, SID_C, F.conversation_events(SID_C))
    F.move_to_cold(conn, SID_C, path, "sqlite")
    conn.close()
    _, conn = agent_store(state, "old", schema="prerelease")
    conn.close()
    _, conn = agent_store(state, "v1", schema=1)
    conn.close()
    custom = tmp_path / "elsewhere" / "openclaw-agent.sqlite"
    F.create_agent_store(custom, agent_id="ops").close()
    F.create_state_db(state, [("main", "agents/main/agent/openclaw-agent.sqlite"), ("ops", str(custom))])

    statements: list[str] = []
    opened: list[str] = []
    original = openclaw_db.connect_readonly

    def traced(p, *args, **kwargs):
        c = original(p, *args, **kwargs)
        opened.append(Path(p).name)
        c.set_trace_callback(statements.append)
        return c

    monkeypatch.setattr(openclaw_db, "connect_readonly", traced)
    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert report.files_failed == 0
    assert sorted(opened) == ["openclaw-agent.sqlite"] * 4 + ["openclaw.sqlite"]
    assert statements and not [s for s in statements if "auth_profile" in s.lower()]
    assert scalar(db, "SELECT COUNT(DISTINCT agent_id) FROM parsed_files") == 4  # main, old, v1, ops
    assert F.SECRET.encode() not in db.read_bytes()
    # And SQLite itself refuses: the connection may read the transcript tables only.
    c = original(path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="prohibited|not authorized"):
            c.execute("SELECT store_json FROM auth_profile_store").fetchall()
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            c.execute("PRAGMA table_info(auth_profile_state)").fetchall()
        with pytest.raises(sqlite3.DatabaseError):
            c.execute("DELETE FROM transcript_events")
    finally:
        c.close()


def test_rollover_chain_and_window_metadata(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state)
    key = "agent:main:telegram:direct:42"
    F.add_window(conn, SID_A, key, current=False, reason="initial", status="done", started_at=F.NOW_MS,
                 ended_at=F.NOW_MS + 60_000, chat_type="direct", channel="telegram", model_provider="mock",
                 model="mock-model")
    F.add_window(conn, SID_B, key, current=False, previous_session_id=SID_A, reason="rollover", status="done")
    F.add_window(conn, SID_C, key, previous_session_id=SID_B, reason="reset", status="running",
                 display_name="Made-up chat", node_label="made-up label")
    for sid in (SID_A, SID_B, SID_C):
        F.add_events(conn, sid, F.conversation_events(sid, turns=1))
    conn.close()
    db = tmp_path / "a.db"
    do_import(db, state)
    assert rows(db, "SELECT session_uuid, reason, previous_session_id, next_session_id, status FROM sessions "
                    "ORDER BY session_uuid") == [
        (SID_A, "initial", None, SID_B, "done"),
        (SID_B, "rollover", SID_A, SID_C, "done"),
        (SID_C, "reset", SID_B, None, "running")]
    assert rows(db, "SELECT session_key, channel, chat_type, model_provider, model, ended_at FROM sessions "
                    "WHERE session_uuid = ?", (SID_A,)) == [
        (key, "telegram", "direct", "mock", "mock-model", "2026-11-30 10:37:40.000")]
    assert rows(db, "SELECT label, display_name FROM sessions WHERE session_uuid = ?", (SID_C,)) == [
        ("made-up label", "Made-up chat")]
    # Walking the chain backwards from the current session, as a query.
    chain = [SID_C]
    while True:
        prev = scalar(db, "SELECT previous_session_id FROM sessions WHERE session_uuid = ?", (chain[-1],))
        if prev is None:
            break
        chain.append(prev)
    assert chain == [SID_C, SID_B, SID_A]
    # Metadata changes without new events are picked up by the next run.
    conn = F.writer(path)
    conn.execute("UPDATE session_windows SET status = 'done', ended_at = ? WHERE session_id = ?", (F.NOW_MS, SID_C))
    conn.close()
    report = do_import(db, state)
    assert report.files_unchanged == 3
    assert rows(db, "SELECT status, ended_at FROM sessions WHERE session_uuid = ?", (SID_C,)) == [
        ("done", "2026-11-30 10:36:40.000")]


def test_prerelease_layout_sessions_and_session_entries(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state, schema="prerelease")
    for sid, key, prev in ((SID_A, "agent:main:main", None), (SID_B, "agent:main:main", SID_A)):
        conn.execute("INSERT INTO sessions (session_id, session_key, created_at, updated_at, status, channel, "
                     "chat_type, model_provider, model) VALUES (?, ?, ?, ?, 'done', 'discord', 'group', 'mock', "
                     "'mock-model')", (sid, key, F.NOW_MS, F.NOW_MS))
        F.add_events(conn, sid, F.conversation_events(sid, turns=1), prerelease=True)
    conn.execute("INSERT INTO session_entries (session_key, session_id, entry_json, updated_at) VALUES (?, ?, ?, ?)",
                 ("agent:main:main", SID_B, F.compact({"sessionId": SID_B, "previousSessionId": SID_A,
                                                       "label": "made-up"}), F.NOW_MS))
    conn.close()
    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert (report.files_failed, report.files_imported) == (0, 2)
    assert rows(db, "SELECT session_uuid, message_count, status, channel, chat_type, previous_session_id, "
                    "next_session_id, label FROM sessions ORDER BY session_uuid") == [
        (SID_A, 4, "done", "discord", "group", None, SID_B, None),
        (SID_B, 4, "done", "discord", "group", SID_A, None, "made-up")]


def test_schema_1_store_has_no_transcripts(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state, schema=1)
    conn.close()
    write(state / "agents" / "main" / "sessions" / f"{SID_A}.jsonl", F.conversation_events(SID_A, version=3))
    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert (report.files_failed, report.files_seen, report.files_imported) == (0, 1, 1)
    assert messages_of(db, SID_A) == 8
    assert rows(db, "SELECT status, session_type FROM parsed_files WHERE file_path = ?", (str(path),)) == [
        ("success", "openclaw_db")]


def test_registered_store_in_a_custom_folder(tmp_path):
    state = tmp_path / "state"
    (state / "agents").mkdir(parents=True)
    custom = tmp_path / "data" / "ops-agent" / "openclaw-agent.sqlite"
    conn = F.create_agent_store(custom, agent_id="ops")
    F.add_window(conn, SID_A, "agent:ops:main")
    F.add_events(conn, SID_A, F.conversation_events(SID_A))
    conn.close()
    relative, conn = agent_store(state, "rel")
    F.add_window(conn, SID_B, "agent:rel:main")
    F.add_events(conn, SID_B, F.conversation_events(SID_B))
    conn.close()
    F.create_state_db(state, [("ops", str(custom)), ("rel", "agents/rel/agent/openclaw-agent.sqlite"),
                              ("gone", str(tmp_path / "missing.sqlite"))])
    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert report.files_failed == 0 and report.files_imported == 2
    assert any("missing.sqlite" in w for w in report.warnings)
    assert rows(db, "SELECT agent_id, session_uuid FROM sessions ORDER BY agent_id") == [("ops", SID_A),
                                                                                          ("rel", SID_B)]
    # --agent keeps only that agent.
    db2 = tmp_path / "b.db"
    do_import(db2, state, agent="ops")
    assert rows(db2, "SELECT agent_id FROM sessions") == [("ops",)]


def test_incognito_sentinel_is_skipped(tmp_path):
    state = tmp_path / "state"
    (state / "agents" / "main" / "agent").mkdir(parents=True)
    sentinel = state / "agents" / "main" / "agent" / "incognito-openclaw-agent.sqlite"
    sentinel.write_bytes(b"")
    report = do_import(tmp_path / "a.db", state)
    assert (report.files_seen, report.files_failed) == (0, 0)
    report = do_import(tmp_path / "a.db", sentinel)
    assert (report.files_seen, report.files_failed, len(report.warnings)) == (0, 0, 1)


def test_standalone_pi_sessions(tmp_path):
    pi = tmp_path / ".pi" / "agent"
    sid1, sid2 = "01a22c0b-0000-7000-8000-000000000001", "01a22c0b-0000-7000-8000-000000000002"
    for sid, cwd in ((sid1, "/tmp/piwork"), (sid2, "/home/u/project")):
        folder = pi / "sessions" / ("--" + cwd.strip("/").replace("/", "-") + "--")
        c = Chain()
        write(folder / f"2026-11-30T10-40-57-206Z_{sid}.jsonl",
              [header(sid, version=3, cwd=cwd), c.user("hello"), c.assistant([{"type": "text", "text": "hi"}])])
    (pi / "settings.json").write_text("{}")
    (pi / "auth.json").write_text("{}")
    db = tmp_path / "a.db"
    report = do_import(db, pi)
    assert (report.files_failed, report.files_imported) == (0, 2)
    assert rows(db, "SELECT agent_id, session_uuid, cwd, message_count FROM sessions ORDER BY session_uuid") == [
        ("pi", sid1, "/tmp/piwork", 2), ("pi", sid2, "/home/u/project", 2)]
    for path, agent in ((tmp_path / ".pi", "pi"), (pi / "sessions", "coder")):
        db2 = tmp_path / f"{agent}.db"
        report = do_import(db2, path, agent=None if agent == "pi" else agent)
        assert report.files_imported == 2
        assert rows(db2, "SELECT DISTINCT agent_id FROM sessions") == [(agent,)]
    # One --<cwd>-- folder on its own is pi's too.
    db3 = tmp_path / "c.db"
    do_import(db3, next((pi / "sessions").iterdir()))
    assert rows(db3, "SELECT agent_id FROM sessions") == [("pi",)]


def test_store_that_is_not_a_database_fails_alone(tmp_path):
    state = tmp_path / "state"
    bad = state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a database" * 100)
    write(state / "agents" / "main" / "sessions" / f"{SID_A}.jsonl", F.conversation_events(SID_A, version=3))
    db = tmp_path / "a.db"
    report = do_import(db, state)
    assert report.files_failed == 1 and report.files_imported == 1
    assert rows(db, "SELECT status FROM parsed_files WHERE file_path = ?", (str(bad),)) == [("failed",)]


def test_cli_reports_events_read(tmp_path):
    state = tmp_path / "state"
    path, conn = agent_store(state)
    F.add_window(conn, SID_A, "agent:main:main")
    events = F.conversation_events(SID_A)
    F.add_events(conn, SID_A, events)
    conn.close()
    proc = subprocess.run([sys.executable, "-m", "importer", "import", str(state), "--server", "t",
                           "--db", f"sqlite:///{tmp_path / 'a.db'}", "--json-summary"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert (summary["events_read"], summary["files_imported"]) == (len(events), 1)


def test_migration_adds_the_session_columns_to_an_older_archive(tmp_path):
    db = tmp_path / "a.db"
    store = open_store(f"sqlite:///{db}")
    new = ["reason", "previous_session_id", "next_session_id", "status", "ended_at", "model_provider",
           "model", "archived_at"]
    for column in new:
        store.execute(f"ALTER TABLE sessions DROP COLUMN {column}")
    store.execute("DELETE FROM _migrations WHERE version > 1")
    store.close()
    store = open_store(f"sqlite:///{db}")
    try:
        assert set(new) <= set(store.columns("sessions"))
        assert store.columns("sessions")[-len(new):] == new  # appended to an upgraded table
        assert store.query("SELECT name FROM _migrations WHERE version = 2")[0][0] == \
            "openclaw sqlite-era session metadata"
    finally:
        store.close()


def test_zstd_reader_streams_frames_without_content_size():
    data = b"".join(b'{"type":"custom","id":"%08x"}\n' % i for i in range(5000))
    stream = F.zstd_stream(data[:40000]) + F.zstd_stream(data[40000:])
    assert zstandard.get_frame_parameters(stream).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert b"\n".join(openclaw_db.iter_zstd_lines(stream)) + b"\n" == data


def test_mariadb_store_holds_the_same_rows(tmp_path, mariadb_url):
    """Units, metadata and the chain through the MariaDB dialect: the same rows as the embedded store."""
    from transcripts import dump_store

    state = tmp_path / "state"
    path, conn = agent_store(state)
    key = "agent:main:main"
    F.add_window(conn, SID_A, key, current=False, reason="initial", status="done", ended_at=F.NOW_MS)
    F.add_window(conn, SID_B, key, previous_session_id=SID_A, reason="rollover", model="mock-model")
    F.add_events(conn, SID_A, F.conversation_events(SID_A, big=3000), compress={4})
    F.add_events(conn, SID_B, F.conversation_events(SID_B))
    F.move_to_cold(conn, SID_A, path, "sqlite")
    F.add_transcript_archive(conn, SID_C, "agent:main:gone", F.conversation_events(SID_C),
                             publish_dir=state / "agents" / "main" / "sessions")
    conn.close()
    sqlite_url = f"sqlite:///{tmp_path / 'a.db'}"
    for url in (sqlite_url, mariadb_url):
        for _ in range(2):  # the rerun changes nothing
            proc = subprocess.run([sys.executable, "-m", "importer", "import", str(state), "--server", "t",
                                   "--db", url, "-q"], cwd=REPO, capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr[-2000:]
    assert dump_store(mariadb_url) == dump_store(sqlite_url)
    chain = "SELECT session_uuid, reason, previous_session_id, next_session_id, status, ended_at, model " \
            "FROM sessions ORDER BY session_uuid"
    got = []
    for url in (sqlite_url, mariadb_url):
        store = open_store(url)
        try:
            got.append([tuple(r) for r in store.query(chain)])
        finally:
            store.close()
    assert got[0] == got[1]
    assert [r[:4] for r in got[0]] == [(SID_A, "initial", None, SID_B), (SID_B, "rollover", SID_A, None),
                                       (SID_C, None, None, None)]
