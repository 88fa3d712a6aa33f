"""The agent-server's tool calls pair on every id its notes name (issue 22, section 5).

FORMAT-OTHERS.md section 2 gives a tool call's id as the provider writes it: the ``tool_use`` block's
``id`` on a Claude tool.started and the ``tool_result``'s ``tool_use_id`` on its tool.completed, the
item's ``id`` on both Codex events. The fixture's first database also has the server's own
``toolCallId`` on both (``tool_ids="server"``); a second one written from the same notes has only the
provider's (``tool_ids="provider"``). Both must archive every completed call once, paired with its
result, and flag only the call that never completed."""

from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent_server_fixture as F  # noqa: E402
from transcripts import do_import, rows, scalar  # noqa: E402

from importer.sources import agent_server as A  # noqa: E402

SHAPES = ("server", "provider")


def import_db(archive: Path, root: Path):
    report = do_import(archive, root, server="srv")
    assert report.files_failed == 0, [m for _p, m in report.failures]
    return report


def src(db: Path, sql: str, params=()) -> list[tuple]:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> dict:
    out = {}
    for shape in SHAPES:
        work = tmp_path_factory.mktemp(f"as-{shape}")
        built = F.build_agent_db(work / "server", seed=0, tool_ids=shape, workspace_base="/srv/agent-server/workspaces")
        import_db(work / "archive.db", built.root)
        out[shape] = (built, work / "archive.db")
    return out


def test_the_second_shape_has_only_the_providers_ids(archives):
    for shape, (built, _archive) in archives.items():
        payloads = [json.loads(p) for (p,) in src(built.db_path, "SELECT payload FROM events WHERE type LIKE 'tool.%'")]
        assert payloads and all(A.tool_ids(p) for p in payloads)
        assert all(("toolCallId" in p) == (shape == "server") for p in payloads)


@pytest.mark.parametrize("shape", SHAPES)
def test_every_completed_call_is_paired_once_and_none_is_flagged(archives, shape):
    built, archive = archives[shape]
    t = built.totals
    assert t.tool_calls > 30 and t.tool_started_without_completed == 1
    assert scalar(archive, "SELECT COUNT(*) FROM tool_calls") == t.tool_calls
    assert scalar(archive, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NULL") == 0
    pairs = rows(archive, "SELECT t.call_id, r.tool_call_id FROM tool_calls t JOIN messages r ON r.id = t.result_message_id")
    assert len(pairs) == t.tool_calls and all(a == b and a for a, b in pairs)
    assert len({a for a, _b in pairs}) == t.tool_calls  # each call once
    assert scalar(archive, "SELECT COUNT(*) FROM entries WHERE custom_type = 'never_completed'") == 1
    assert scalar(archive, "SELECT COUNT(*) FROM messages WHERE role = 'toolResult'") == t.tool_calls
    # both providers' calls are there
    assert {n for (n,) in rows(archive, "SELECT DISTINCT tool_name FROM tool_calls")} >= {"Bash", "commandExecution"}


def test_both_shapes_archive_the_same_calls(archives):
    (_b1, first), (_b2, second) = archives["server"], archives["provider"]
    sql = ("SELECT session_uuid, call_id, tool_name, command, exit_code, is_error, is_truncated, result_preview "
           "FROM tool_calls ORDER BY session_uuid, call_id")
    assert rows(first, sql) == rows(second, sql)


@pytest.mark.parametrize("shape", SHAPES)
def test_an_open_call_completed_in_a_later_read_is_paired_by_the_providers_id(tmp_path, shape):
    built = F.build_agent_db(tmp_path / "server", seed=3, tool_ids=shape)
    db, archive = built.db_path, tmp_path / "archive.db"
    import_db(archive, built.root)
    assert scalar(archive, "SELECT COUNT(*) FROM entries WHERE custom_type = 'never_completed'") == 1
    ((seq, sid),) = rows(archive, "SELECT seq, session_uuid FROM entries WHERE custom_type = 'never_completed'")
    (run_id, payload, provider) = src(db, "SELECT e.run_id, e.payload, s.provider FROM events e JOIN sessions s "
                                          "ON s.id = e.session_id WHERE e.session_id = ? AND e.seq = ? AND "
                                          "e.type = 'tool.started'", (sid, seq))[0]
    started = json.loads(payload)
    (call,) = A.tool_ids(started)
    if provider == "claude":  # only the tool_result's tool_use_id names the call
        result = {"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": call, "type": "tool_result", "content": "Exit code 137\nkilled", "is_error": True}]},
            "parent_tool_use_id": None, "session_id": "x", "uuid": "u", "tool_use_result": "Error: killed",
            "tool": started.get("tool"), "kind": started.get("kind"), "exitCode": 137, "truncated": False}
    else:  # only the item's id
        item = dict(started["item"], status="failed", exitCode=137, aggregatedOutput="killed", durationMs=5)
        result = {"threadId": started.get("threadId"), "turnId": started.get("turnId"), "item": item,
                  "tool": started.get("tool"), "kind": started.get("kind"), "exitCode": 137, "truncated": False}
    if shape == "server":
        result["toolCallId"] = call
    with closing(sqlite3.connect(db)) as conn:
        last, ts = conn.execute("SELECT last_seq, updated_at FROM sessions WHERE id = ?", (sid,)).fetchone()
        conn.execute("INSERT INTO events VALUES (?, ?, ?, 'tool.completed', ?, ?)",
                     (sid, last + 1, run_id, json.dumps(result), ts + 1000))
        conn.execute("UPDATE sessions SET last_seq = ?, updated_at = ? WHERE id = ?", (last + 1, ts + 1000, sid))
        conn.commit()
    report = import_db(archive, built.root)
    assert report.events_read == 1 and report.messages_added == 2  # the call (was an entry) and its result
    assert scalar(archive, "SELECT COUNT(*) FROM entries WHERE custom_type = 'never_completed'") == 0
    assert rows(archive, "SELECT t.exit_code, t.is_error, r.seq FROM tool_calls t JOIN messages r "
                         "ON r.id = t.result_message_id WHERE t.call_id = ?", (call,)) == [(137, 1, last + 1)]
    assert scalar(archive, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NULL") == 0
    assert scalar(archive, "SELECT COUNT(*) FROM tool_calls") == built.totals.tool_calls + 1


def test_a_completion_is_taken_by_one_call_only(tmp_path):
    """Two tool.started naming the same id, one tool.completed: one call paired, the other open."""
    built = F.build_agent_db(tmp_path / "server", seed=0, tool_ids="provider")
    db, archive = built.db_path, tmp_path / "archive.db"
    with closing(sqlite3.connect(db)) as conn:
        sid, seq, run_id, payload, ts = conn.execute(
            "SELECT e.session_id, e.seq, e.run_id, e.payload, e.ts FROM events e WHERE e.type = 'tool.started' "
            "AND EXISTS (SELECT 1 FROM events c WHERE c.session_id = e.session_id AND c.seq > e.seq "
            "AND c.type = 'tool.completed') ORDER BY e.seq LIMIT 1").fetchone()
        # the same tool.started again, right after the session's last event
        last, updated = conn.execute("SELECT last_seq, updated_at FROM sessions WHERE id = ?", (sid,)).fetchone()
        conn.execute("INSERT INTO events VALUES (?, ?, ?, 'tool.started', ?, ?)",
                     (sid, last + 1, run_id, payload, updated + 1000))
        conn.execute("UPDATE sessions SET last_seq = ?, updated_at = ? WHERE id = ?", (last + 1, updated + 1000, sid))
        conn.commit()
    import_db(archive, built.root)
    assert scalar(archive, "SELECT COUNT(*) FROM tool_calls") == built.totals.tool_calls
    assert scalar(archive, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NULL") == 0
    assert scalar(archive, "SELECT COUNT(*) FROM entries WHERE custom_type = 'never_completed'") == 2
