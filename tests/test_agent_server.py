"""The agent-server kind (importer/sources/agent_server.py) against the made-up agent.db of
tests/agent_server_fixture.py: every figure of its Expected (computed by the generator, not by the
importer), each agent-server table, WAL safety, incremental reads, credentials never read, the
audit-log canned query, search of Chinese titles, SSH and MariaDB.

Assertion messages carry counts, ids and names only, never transcript text (texts are compared
through digests)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent_server_fixture as F  # noqa: E402
import importer_check as ic  # noqa: E402
from transcripts import CONTENT_TABLES, do_import, dump, dump_store, rows, scalar  # noqa: E402

from importer import search  # noqa: E402
from importer.snapshot import export_snapshot  # noqa: E402
from importer.sources import agent_server as A  # noqa: E402
from importer.sources import discover  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SERVER = "srv"
OWN_TABLES = {  # the kind's tables -> columns comparable across stores (no ids)
    A.RUNS: "server, agent_id, session_uuid, run_id, status, started_at, ended_at, duration_ms, input_tokens, "
            "output_tokens, cost_usd, usage_counted, error",
    A.INTERACTIONS: "server, agent_id, session_uuid, interaction_id, run_id, kind, status, created_at, resolved_at, "
                    "expires_at, request, response",
    A.FILES: "server, agent_id, session_uuid, file_id, origin, mime, size, sha256, created_at, rel_path",
    A.AUDIT_LOGS: "server, agent_id, session_uuid, audit_id, ts, actor, kind, summary, detail",
    A.USAGE_DAILY: "server, agent_id, date, api_key_id, provider, model, runs, input_tokens, output_tokens, cost_usd",
}


def digest(values) -> str:
    return hashlib.sha256(json.dumps(values, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


def same_texts(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} rows, expected {len(want)}"
    assert digest(got) == digest(want), f"{what}: same count ({len(got)}), different text"


def utc(ms: int | None) -> str | None:
    from importer.parser import format_timestamp

    return format_timestamp(ms) if ms is not None else None


def src(db: Path, sql: str, params=()) -> list[tuple]:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute(sql, params).fetchall()


def full_dump(db: Path) -> dict:
    out = dump(db)
    for table, cols in OWN_TABLES.items():
        out[table] = sorted(rows(db, f"SELECT {cols} FROM {table}"), key=repr)
    return out


def import_db(archive: Path, *paths, **kw):
    report = do_import(archive, *paths, server=SERVER, **kw)
    assert report.files_failed == 0, [m for _p, m in report.failures]
    return report


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> F.Expected:
    return F.build_agent_db(tmp_path_factory.mktemp("agent-server"), seed=0)


@pytest.fixture(scope="module")
def archive(built, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("archive") / "archive.db"
    import_db(path, built.root)
    return path


@pytest.fixture
def fresh(tmp_path) -> F.Expected:
    """A database of its own, for the tests that write to it."""
    return F.build_agent_db(tmp_path / "server", seed=3)


def session_ids(db: Path) -> dict[str, int]:
    return dict(rows(db, "SELECT session_uuid, id FROM sessions WHERE source = 'agent-server'"))


def shell_exit_codes(db: Path, sid: str) -> list:
    return [r[0] for r in rows(db, "SELECT t.exit_code FROM tool_calls t JOIN messages m ON m.id = t.message_id "
                                   "WHERE t.session_uuid = ? AND t.tool_name IN ('Bash', 'commandExecution') "
                                   "ORDER BY m.seq", (sid,))]


def assert_figures(db: Path, expected: F.Expected) -> None:
    """Every figure of Expected, per session and in total, read back from the archive."""
    ids = session_ids(db)
    assert set(ids) == set(expected.sessions)
    for sid, exp in expected.sessions.items():
        label = exp.session_id[:8]
        # the kind's own words (native_role: the event's type; run: a run's usage row)
        n = {role: c for role, c in rows(db, "SELECT native_role, COUNT(*) FROM messages WHERE session_uuid = ? "
                                             "GROUP BY 1", (sid,))}
        entries = dict(rows(db, "SELECT entry_type, COUNT(*) FROM entries WHERE session_uuid = ? GROUP BY 1", (sid,)))
        events = sum(c for r, c in n.items() if r != "run") + sum(entries.values())
        assert events == exp.events, (label, "events", events, exp.events)
        assert n.get("run", 0) == exp.runs, (label, "runs")
        assert n.get("user.message", 0) == exp.user_messages, (label, "user")
        assert n.get("assistant.message", 0) == exp.assistant_messages, (label, "assistant")
        assert n.get("reasoning", 0) == exp.reasoning, (label, "reasoning")
        assert n.get("tool.completed", 0) == exp.tool_calls, (label, "tool results")
        assert n.get("tool.started", 0) == exp.tool_calls, (label, "tool call messages")
        # and the vocabulary's: everything the model produced is assistant
        roles = dict(rows(db, "SELECT role, COUNT(*) FROM messages WHERE session_uuid = ? GROUP BY 1", (sid,)))
        assert roles.get("assistant", 0) == exp.assistant_messages + exp.reasoning + exp.tool_calls + exp.runs, label
        assert roles.get("toolResult", 0) == exp.tool_calls and roles.get("user", 0) == exp.user_messages, label
        assert entries.get("message.delta", 0) == exp.deltas, (label, "deltas")
        assert entries.get("error", 0) == exp.errors, (label, "errors")
        assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE session_uuid = ?", (sid,)) == exp.tool_calls
        assert shell_exit_codes(db, sid) == exp.shell_exit_codes, (label, "shell exit codes")
        prompts = [json.loads(c)[0]["text"] for (c,) in rows(
            db, "SELECT content_blocks FROM messages WHERE session_uuid = ? AND role = 'user' ORDER BY seq", (sid,))]
        same_texts(prompts, exp.prompts, f"{label} prompts")
        answers = [json.loads(c)[0]["text"] for (c,) in rows(
            db, "SELECT content_blocks FROM messages WHERE session_uuid = ? AND native_role = 'assistant.message' "
                "ORDER BY seq", (sid,))]
        same_texts(answers, exp.assistant_texts, f"{label} assistant texts")
        unknown = [r[0] for r in rows(db, "SELECT entry_type FROM entries WHERE session_uuid = ? AND custom_type = "
                                          "'unknown' ORDER BY seq", (sid,))]
        assert unknown == exp.unknown_types, (label, "unknown types")
        assert scalar(db, "SELECT COUNT(*) FROM entries WHERE session_uuid = ? AND custom_type = 'never_completed'",
                      (sid,)) == exp.tool_started_without_completed
        assert scalar(db, f"SELECT COUNT(*) FROM {A.INTERACTIONS} WHERE session_uuid = ?", (sid,)) == exp.interactions
        assert scalar(db, f"SELECT COUNT(*) FROM {A.AUDIT_LOGS} WHERE session_uuid = ?", (sid,)) == exp.audit_logs
        assert scalar(db, f"SELECT COUNT(*) FROM {A.FILES} WHERE session_uuid = ?", (sid,)) == exp.files
        runs, inp, out, cost = rows(db, f"SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost_usd) "
                                        f"FROM {A.RUNS} WHERE session_uuid = ?", (sid,))[0]
        assert (runs, inp or 0, out or 0) == (exp.runs, exp.input_tokens, exp.output_tokens), label
        assert (cost is None) == (exp.cost_usd is None) and (cost or 0) == pytest.approx(exp.cost_usd or 0, abs=1e-6)
        # the session's totals are its runs' (each once): input split into uncached + cache read + cache write
        s_in, s_out, s_cr, s_cw, s_cost = rows(db, "SELECT input_tokens, output_tokens, cache_read_tokens, "
                                                   "cache_write_tokens, cost_usd FROM sessions WHERE id = ?",
                                               (ids[sid],))[0]
        assert (s_in or 0) + (s_cr or 0) + (s_cw or 0) == exp.input_tokens and (s_out or 0) == exp.output_tokens
        if exp.provider == "claude":
            assert s_cost == pytest.approx(exp.cost_usd, abs=1e-6)
    t = expected.totals
    assert scalar(db, f"SELECT COUNT(*) FROM {A.AUDIT_LOGS}") == t.audit_logs == expected.counts["audit_logs"]
    assert scalar(db, f"SELECT COUNT(*) FROM {A.INTERACTIONS}") == t.interactions
    assert scalar(db, f"SELECT COUNT(*) FROM {A.RUNS}") == t.runs


# -- finding it --------------------------------------------------------------------------------

def test_the_root_its_data_folder_or_agent_db(built):
    db = str(built.db_path)
    for path in (built.root, built.root / "data", built.db_path):
        found = discover([str(path)], server=SERVER)
        assert not found.errors
        assert [(type(u).__name__, u.agent_id, u.key) for u in found.units] == [("AgentServerDB", "agent-server", db)]
    assert discover([str(built.root / "workspaces")], server=SERVER).errors  # nothing of this kind there


# -- every figure --------------------------------------------------------------------------------

def test_every_count_of_expected(archive, built):
    assert_figures(archive, built)
    t = built.totals
    assert (t.sessions, t.runs, t.events) == (8, 25, 267)  # the fixture itself (seed 0): what was checked
    stats = ic.stats(f"sqlite:///{archive}")
    mine = stats["by_source"]["agent-server"]
    assert mine["sessions"] == t.sessions
    assert (mine["runs"], mine["events"], mine["interactions"], mine["audit_logs"]) == (
        t.runs, t.events, t.interactions, t.audit_logs)
    assert mine["messages_by_role"]["user"] == t.user_messages  # the runs' prompts
    native = mine["messages_by_native_role"]
    assert native["assistant.message"] == t.assistant_messages  # deltas are not messages
    assert mine["messages_by_role"]["assistant"] == t.assistant_messages + native["reasoning"] + \
        native["tool.started"] + native["run"]
    assert mine["tool_calls"] == t.tool_calls and mine["shell_calls"] == t.shell_calls
    assert mine["model_calls"] == t.runs  # one per run
    assert mine["unknown_events"] == t.unknown_events and mine["tool_calls_never_completed"] == 1
    assert mine["files_metadata"] == t.files
    u = mine["usage"]
    assert u["input"] + u["cacheRead"] + u["cacheWrite"] == t.input_tokens and u["output"] == t.output_tokens
    assert mine["runs_usage"]["input"] == t.input_tokens and mine["runs_usage"]["output"] == t.output_tokens
    assert mine["runs_usage"]["cost_recorded"] == pytest.approx(t.cost_usd, abs=1e-6)
    assert sorted(set(t.shell_exit_codes), key=repr) == [0, 1, None]


def test_sessions_become_sessions(archive, built):
    for sid, exp in built.sessions.items():
        (s,) = [dict(zip(("agent", "title", "psid", "cwd", "archived_at", "model", "provider", "channel", "started",
                          "display", "source", "updated"), r)) for r in rows(
            archive, "SELECT agent_id, title, provider_session_id, cwd, archived_at, model, model_provider, channel, "
                     "started_at, display_name, source, updated_at FROM sessions WHERE session_uuid = ?", (sid,))]
        row = src(built.db_path, "SELECT created_at, updated_at FROM sessions WHERE id = ?", (sid,))[0]
        assert s["agent"] == exp.profile and s["source"] == "agent-server"
        same_texts([s["title"], s["display"]], [exp.title, exp.title], f"{sid[:8]} title")
        assert (s["psid"], s["cwd"], s["model"], s["provider"], s["channel"]) == (
            exp.provider_session_id, exp.workspace_dir, exp.model, exp.provider, exp.source)
        assert s["started"] == utc(row[0])
        assert s["archived_at"] == (utc(row[1]) if exp.archived else None)
    assert scalar(archive, "SELECT COUNT(*) FROM sessions WHERE archived_at IS NOT NULL") == built.totals.archived == 2


def test_each_event_is_one_row_kept_raw(archive, built):
    """Messages and entries together hold every events row once, its raw_json the row itself."""
    archived = {}
    for sid, raw in rows(archive, "SELECT session_uuid, raw_json FROM messages WHERE native_role <> 'run' "
                                  "UNION ALL SELECT session_uuid, raw_json FROM entries"):
        obj = json.loads(raw)
        key = (obj["session_id"], obj["seq"])
        assert key not in archived and obj["session_id"] == sid
        archived[key] = obj
    source = src(built.db_path, "SELECT session_id, seq, run_id, type, payload, ts FROM events")
    assert len(archived) == len(source) == built.totals.events
    for sid, seq, run_id, etype, payload, ts in source:
        obj = archived[(sid, seq)]
        assert (obj["run_id"], obj["type"], obj["ts"]) == (run_id, etype, ts), (sid[:8], seq)
        assert obj["payload"] == json.loads(payload), (sid[:8], seq)
    # which rows: recognised messages by role, the rest entries by type
    roles = dict(rows(archive, "SELECT json_extract(raw_json, '$.type'), GROUP_CONCAT(DISTINCT role) FROM messages "
                               "WHERE native_role <> 'run' GROUP BY 1"))
    assert roles == {"user.message": "user", "assistant.message": "assistant", "reasoning": "assistant",
                     "tool.started": "assistant", "tool.completed": "toolResult"}
    assert scalar(archive, "SELECT COUNT(*) FROM messages WHERE native_role <> 'run' "
                           "AND native_role IS NOT json_extract(raw_json, '$.type')") == 0
    kept = {r[0] for r in rows(archive, "SELECT DISTINCT entry_type FROM entries")}
    assert kept == {"run.started", "run.completed", "message.delta", "interaction.requested", "interaction.resolved",
                    "error", "tool.started", "plan.updated", "context.compacted", "rate_limit.updated", "x.custom"}
    # the one tool.started that never completed is flagged and is not a tool call
    (flagged,) = rows(archive, "SELECT entry_type, custom_type, text_preview FROM entries "
                               "WHERE custom_type IS NOT NULL "
                               "AND custom_type <> 'unknown'")
    assert flagged[:2] == ("tool.started", "never_completed") and "never completed" in flagged[2]
    # every message and entry is on its session's active path (run messages included)
    assert scalar(archive, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    assert scalar(archive, "SELECT COUNT(*) FROM entries WHERE is_active_path = 0") == 0


def test_content_blocks_in_openclaw_vocabulary(archive, built):
    kinds = {}
    for role, content in rows(archive, "SELECT native_role, content_blocks FROM messages "
                                       "WHERE content_blocks IS NOT NULL"):
        for block in json.loads(content):
            kinds.setdefault(role, set()).add(block["type"])
    assert kinds == {"user.message": {"text"}, "assistant.message": {"text"}, "reasoning": {"thinking"},
                     "tool.started": {"toolCall"}, "tool.completed": {"text"}}
    for content, tool_json, name, count in rows(archive, "SELECT content_blocks, tool_calls_json, first_tool_call, "
                                                         "tool_call_count FROM messages WHERE native_role = 'tool.started'"):
        (block,) = json.loads(content)
        assert set(block) == {"type", "id", "name", "arguments"} and isinstance(block["arguments"], dict)
        assert (name, count, json.loads(tool_json)) == (block["name"], 1, [block])
    claude_thinking = rows(archive, "SELECT content_blocks FROM messages m JOIN sessions s ON s.id = m.session_id "
                                    "WHERE m.native_role = 'reasoning' AND s.model_provider = 'claude'")
    assert claude_thinking and all("thinkingSignature" in json.loads(c)[0] for (c,) in claude_thinking)
    assert scalar(archive, "SELECT COUNT(*) FROM messages WHERE native_role = 'reasoning' AND has_thinking = 1 "
                           "AND thinking_text IS NOT NULL") == built.totals.reasoning


def test_tool_calls_with_results_exit_codes_and_the_truncated_flag(archive, built):
    # every call paired with its result (the tool.completed event)
    assert scalar(archive, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NULL") == 0
    pairs = rows(archive, "SELECT t.call_id, r.tool_call_id, t.exit_code, r.exit_code, t.is_error, r.is_error "
                          "FROM tool_calls t JOIN messages r ON r.id = t.result_message_id")
    assert len(pairs) == built.totals.tool_calls and all(p[0] == p[1] and p[2] == p[3] and p[4] == p[5] for p in pairs)
    # exit codes and errors as the server recorded them
    want = {(json.loads(p)["toolCallId"]): json.loads(p).get("exitCode") for (p,) in src(
        built.db_path, "SELECT payload FROM events WHERE type = 'tool.completed'")}
    got = dict(rows(archive, "SELECT call_id, exit_code FROM tool_calls"))
    assert got == want
    assert {r[0] for r in rows(archive, "SELECT DISTINCT tool_name FROM tool_calls WHERE command IS NOT NULL")} == {
        "Bash", "commandExecution"}
    assert scalar(archive, "SELECT COUNT(*) FROM tool_calls WHERE tool_name IN ('Bash', 'commandExecution') "
                           "AND command IS NULL") == 0
    failed = rows(archive, "SELECT exit_code, is_error FROM tool_calls WHERE exit_code <> 0")
    assert failed and all(e for _c, e in failed)
    # cut at 64 KB: flagged on its call
    (cut,) = built.truncated_outputs
    assert rows(archive, "SELECT call_id FROM tool_calls WHERE is_truncated = 1") == [(cut.tool_call_id,)]


def test_runs_and_their_usage_messages(archive, built):
    source = {r[0]: r for r in src(built.db_path, "SELECT r.id, r.session_id, r.status, r.started_at, r.ended_at, "
                                                  "r.input_tokens, r.output_tokens, r.cost_usd, r.error, s.provider "
                                                  "FROM runs r JOIN sessions s ON s.id = r.session_id")}
    got = {r[0]: r for r in rows(archive, f"SELECT run_id, session_uuid, status, started_at, ended_at, input_tokens, "
                                          f"output_tokens, cost_usd, error, usage_counted, session_id FROM {A.RUNS}")}
    assert set(got) == set(source)
    ids = session_ids(archive)
    for rid, s in source.items():
        g = got[rid]
        assert g[:9] == (s[0], s[1], s[2], utc(s[3]), utc(s[4]), s[5], s[6], s[7], s[8]), rid[:8]
        assert g[9] == 1 and g[10] == ids[s[1]]  # counted; linked to the archived session
    by_run = {}
    for raw, *values in rows(archive, "SELECT raw_json, input_tokens, cache_read_tokens, cache_write_tokens, "
                                      "output_tokens, total_tokens, cost_usd, cost_source, usage_counted, "
                                      "is_synthetic, timestamp, provider, model FROM messages WHERE native_role = 'run'"):
        by_run[json.loads(raw)["id"]] = values
    assert set(by_run) == set(source)
    for rid, (inp, cr, cw, out, total, cost, cost_source, counted, synthetic, ts, provider, model) in by_run.items():
        s = source[rid]
        assert inp + (cr or 0) + (cw or 0) == s[5] and out == s[6] and total == s[5] + s[6], rid[:8]
        assert cr is not None and cr > 0, rid[:8]  # the split came from run.completed
        assert (counted, synthetic, ts, provider) == (1, 0, utc(s[4]), s[9])
        if s[9] == "claude":
            assert (cost, cost_source) == (s[7], "recorded")
        else:
            assert s[7] is None and cost_source == "computed" and cost > 0  # priced from the table
    # Codex: the run's cached input is the change of the thread's cumulative total
    codex = [r for r in source.values() if r[9] == "codex"]
    assert codex and all(by_run[r[0]][1] < r[5] for r in codex)


def test_interactions_files_audit_logs_and_usage_daily(archive, built):
    db = built.db_path
    want = sorted((r[0], r[1], r[2], r[3], r[4], r[5], utc(r[6]), utc(r[7]), utc(r[8]), r[9]) for r in src(
        db, "SELECT id, run_id, session_id, kind, request, status, created_at, resolved_at, expires_at, response "
            "FROM interactions"))
    got = sorted(rows(archive, f"SELECT interaction_id, run_id, session_uuid, kind, request, status, created_at, "
                               f"resolved_at, expires_at, response FROM {A.INTERACTIONS}"))
    assert len(got) == built.counts["interactions"] and digest(got) == digest(want)
    want = sorted((r[0], r[1], r[2], r[3], r[4], r[5], utc(r[6])) for r in src(
        db, "SELECT id, session_id, rel_path, origin, mime, size, created_at FROM files"))
    got = sorted(rows(archive, f"SELECT file_id, session_uuid, rel_path, origin, mime, size, created_at "
                               f"FROM {A.FILES}"))
    assert len(got) == built.counts["files"] and digest(got) == digest(want)  # metadata only
    want = sorted((r[0], utc(r[1]), r[2], r[3], r[4], r[5], r[6]) for r in src(
        db, "SELECT id, ts, actor, session_id, kind, summary, detail FROM audit_logs"))
    got = sorted(rows(archive, f"SELECT audit_id, ts, actor, session_uuid, kind, summary, detail FROM {A.AUDIT_LOGS}"))
    assert len(got) == built.counts["audit_logs"] and digest(got) == digest(want)
    assert scalar(archive, f"SELECT COUNT(*) FROM {A.AUDIT_LOGS} WHERE session_uuid IS NULL") == \
        built.audit_logs_without_session
    assert scalar(archive, f"SELECT COUNT(*) FROM {A.AUDIT_LOGS} WHERE session_uuid IS NOT NULL "
                           f"AND session_id IS NULL") == 0
    usage = {(r[0], r[1], r[2], r[3]): r[4:] for r in rows(
        archive, f"SELECT date, api_key_id, provider, model, runs, input_tokens, output_tokens, cost_usd "
                 f"FROM {A.USAGE_DAILY}")}
    assert set(usage) == set(built.usage_daily)
    for key, (n, inp, out, cost) in usage.items():
        u = built.usage_daily[key]
        assert (n, inp, out) == (u.runs, u.input_tokens, u.output_tokens)
        assert cost == pytest.approx(u.cost_usd, abs=1e-6)
    # shown beside the runs, never added to them: the archive's totals are the runs' alone
    t = built.totals
    total_in = scalar(archive, "SELECT SUM(input_tokens) + SUM(cache_read_tokens) + SUM(cache_write_tokens) "
                               "FROM sessions WHERE source = 'agent-server'")
    assert total_in == t.input_tokens == sum(u.input_tokens for u in built.usage_daily.values())


# -- credentials ------------------------------------------------------------------------------

def test_credential_tables_are_refused_by_the_connection(built):
    conn = A.connect_readonly(str(built.db_path))
    try:
        for sql in ("SELECT key_hash FROM api_keys", "SELECT id FROM admin_sessions", "SELECT value FROM settings",
                    "SELECT s.id FROM sessions s JOIN api_keys k ON k.id = s.api_key_id",
                    "SELECT (SELECT COUNT(*) FROM settings)", "PRAGMA table_info(api_keys)",
                    "ATTACH DATABASE ':memory:' AS x", "DELETE FROM events", "CREATE TEMP TABLE t (x)"):
            with pytest.raises(sqlite3.DatabaseError):
                conn.execute(sql).fetchall()
        assert conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] == built.totals.events
    finally:
        conn.close()
    assert not set(A.COPIED_TABLES) & set(A.NEVER_READ)


def test_credentials_are_never_queried_nor_archived_nor_exported(built, tmp_path, monkeypatch):
    statements: list[str] = []
    real = A.connect_readonly

    def traced(path):
        conn = real(path)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(A, "connect_readonly", traced)
    archive = tmp_path / "archive.db"
    import_db(archive, built.root)
    assert statements
    for table in A.NEVER_READ:
        assert not [s for s in statements if table in s.lower()], table
    snapshot = tmp_path / "snapshot.db"
    proc = ic.run_cli(["export", "--db", f"sqlite:///{archive}", "-o", snapshot, "--timezone", "UTC", "-q"])
    assert proc.returncode == 0, ic.describe(proc, "export")
    pieces = {s[i:i + 10] for s in built.secrets for i in range(len(s) - 9)}
    assert len(built.secrets) == 10 and pieces
    for path in (archive, snapshot):
        data = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        found = [p for p in pieces if p.encode() in data]
        assert not found, f"{path.name}: {len(found)} pieces of credentials"
    with closing(sqlite3.connect(snapshot)) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert set(OWN_TABLES) <= tables and not {"api_keys", "admin_sessions", "settings"} & tables


# -- the live database ---------------------------------------------------------------------------

def test_rows_only_in_the_wal_are_imported(fresh, tmp_path):
    db, wal = fresh.db_path, Path(str(fresh.db_path) + "-wal")
    archive = tmp_path / "archive.db"
    claude = fresh.by_title("部署 nginx 并检查日志").session_id
    codex = fresh.by_title("Fix flaky test in payments service").session_id
    with F.running_server(db):
        expected = fresh.plus(F.append_events(db, claude, 7)).plus(F.add_run(db, codex, exit_code=3))
        assert wal.stat().st_size > 0
        with closing(sqlite3.connect(f"file:{db}?immutable=1", uri=True)) as main_only:
            assert main_only.execute("SELECT COUNT(*) FROM events").fetchone()[0] == fresh.totals.events
        report = import_db(archive, fresh.root)
        assert report.events_read == expected.totals.events
        assert_figures(archive, expected)
        assert shell_exit_codes(archive, codex)[-1] == 3


def test_a_write_in_progress_is_never_seen(fresh, tmp_path):
    db = fresh.db_path
    archive = tmp_path / "archive.db"
    sid = fresh.by_title("Fix flaky test in payments service").session_id
    with F.running_server(db):
        with F.pending_write(db, sid, 6) as pending:
            report = import_db(archive, fresh.root)
            assert report.events_read == fresh.totals.events
            assert_figures(archive, fresh)
            assert scalar(archive, f"SELECT COUNT(*) FROM {A.RUNS} WHERE status = 'running'") == 0
            added = pending.commit()
        report = import_db(archive, fresh.root)
        assert report.events_read == 6
        assert_figures(archive, fresh.plus(added))
        assert rows(archive, f"SELECT status, ended_at FROM {A.RUNS} WHERE run_id = ?", (added.run_id,)) == [
            ("running", None)]


def test_incremental_rerun_reads_only_the_new_event(fresh, tmp_path, monkeypatch):
    db = fresh.db_path
    archive = tmp_path / "archive.db"
    sid = fresh.by_title("解释 WAL 模式").session_id
    import_db(archive, fresh.root)
    with F.running_server(db):
        added = F.append_events(db, sid, 1)  # a streaming delta: an entry, not a message
        report = import_db(archive, fresh.root)
        assert (report.events_read, report.messages_added, report.entries_added) == (1, 0, 1)
        assert report.files_imported == 1  # that session only; the others unchanged
        expected = fresh.plus(added)
        added = F.append_events(db, sid, 3)  # delta, delta, assistant message
        report = import_db(archive, fresh.root)
        assert (report.events_read, report.messages_added, report.entries_added) == (3, 1, 2)
        expected = expected.plus(added)
        assert_figures(archive, expected)
        assert scalar(archive, "SELECT COUNT(*) FROM entry_revisions") == 0  # appends replace nothing
        leaf = rows(archive, "SELECT leaf_entry_id FROM sessions WHERE session_uuid = ?", (sid,))
        assert leaf == [(A.event_id(expected.sessions[sid].last_seq),)]
        # an unchanged database is not opened at all
        opened = []
        real = A.connect_readonly
        monkeypatch.setattr(A, "connect_readonly", lambda path: opened.append(path) or real(path))
        report = import_db(archive, fresh.root)
        assert opened == [] and report.events_read == 0 and report.files_imported == 0
        assert report.files_unchanged == len(fresh.sessions) + 1
    # the server's last connection folded the -wal into agent.db: opened, nothing new in it
    report = import_db(archive, fresh.root)
    assert len(opened) == 1 and report.events_read == 0 and report.files_imported == 0


def test_a_run_that_changes_without_new_events_is_seen(fresh, tmp_path):
    db = fresh.db_path
    archive = tmp_path / "archive.db"
    sid = fresh.by_title("Refactor config loader").session_id
    import_db(archive, fresh.root)
    (rid, cost) = src(db, "SELECT id, cost_usd FROM runs WHERE session_id = ? ORDER BY started_at LIMIT 1", (sid,))[0]
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE runs SET cost_usd = ?, error = 'late' WHERE id = ?", (cost + 1.0, rid))
        conn.commit()
    report = import_db(archive, fresh.root)
    assert (report.events_read, report.files_imported) == (0, 1)
    assert rows(archive, f"SELECT cost_usd, error FROM {A.RUNS} WHERE run_id = ?", (rid,)) == [
        (pytest.approx(cost + 1.0), "late")]
    (cost_now,) = rows(archive, "SELECT cost_usd FROM messages WHERE session_uuid = ? AND message_uuid = ?",
                       (sid, A.run_entry_id(rid)))[0]
    assert cost_now == pytest.approx(cost + 1.0)
    assert scalar(archive, "SELECT cost_usd FROM sessions WHERE session_uuid = ?", (sid,)) == pytest.approx(
        fresh.sessions[sid].cost_usd + 1.0)
    assert scalar(archive, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0


def test_a_tool_call_that_completes_in_a_later_read_becomes_a_tool_call(fresh, tmp_path):
    db = fresh.db_path
    archive = tmp_path / "archive.db"
    sid = fresh.by_title("升级依赖并修复构建").session_id
    import_db(archive, fresh.root)
    assert scalar(archive, "SELECT COUNT(*) FROM entries WHERE custom_type = 'never_completed'") == 1
    (seq, run_id, payload) = src(db, "SELECT seq, run_id, payload FROM events WHERE session_id = ? AND "
                                     "type = 'tool.started' ORDER BY seq DESC LIMIT 1", (sid,))[0]
    call = json.loads(payload)["toolCallId"]
    with closing(sqlite3.connect(db)) as conn:
        last, ts = conn.execute("SELECT last_seq, updated_at FROM sessions WHERE id = ?", (sid,)).fetchone()
        result = {"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": call, "type": "tool_result", "content": "Exit code 137\nkilled", "is_error": True}]},
            "parent_tool_use_id": None, "session_id": "x", "uuid": "u", "tool_use_result": "Error: killed",
            "toolCallId": call, "tool": "Bash", "kind": "shell", "exitCode": 137, "truncated": False}
        conn.execute("INSERT INTO events VALUES (?, ?, ?, 'tool.completed', ?, ?)",
                     (sid, last + 1, run_id, json.dumps(result), ts + 1000))
        conn.execute("UPDATE sessions SET last_seq = ?, updated_at = ? WHERE id = ?", (last + 1, ts + 1000, sid))
        conn.commit()
    report = import_db(archive, fresh.root)
    assert report.events_read == 1 and report.messages_added == 2  # the call (was an entry) and its result
    assert scalar(archive, "SELECT COUNT(*) FROM entries WHERE custom_type = 'never_completed'") == 0
    assert rows(archive, "SELECT role, native_role FROM messages WHERE session_uuid = ? AND message_uuid = ?",
                (sid, A.event_id(seq))) == [("assistant", "tool.started")]
    assert rows(archive, "SELECT t.exit_code, t.is_error, r.seq FROM tool_calls t JOIN messages r "
                         "ON r.id = t.result_message_id WHERE t.call_id = ?", (call,)) == [(137, 1, last + 1)]
    assert rows(archive, "SELECT entry_uuid FROM entry_revisions") == [(A.event_id(seq),)]  # the entry it was


# -- the explorer -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def snapshot(archive, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("snapshot") / "snapshot.db"
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, path, timezone="UTC")
    finally:
        store.close()
    return path


def test_chinese_titles_are_kept_and_found(snapshot, built):
    """Titles are sessions.title (and display_name, which the conversation view shows), exactly;
    Datasette's filters find them by any word; the words a title shares with its conversation are
    found by the full-text search (messages_fts indexes messages, not titles)."""
    from datasette.app import Datasette

    cjk = [s for s in built.sessions.values() if search.CJK_RUN.search(s.title)]
    assert len(cjk) == 4
    ds = Datasette(immutables=[str(snapshot)])
    shared = 0
    with closing(sqlite3.connect(snapshot)) as conn:
        for s in cjk:
            (title, shown) = conn.execute("SELECT title, display_name FROM sessions WHERE session_uuid = ?",
                                          (s.session_id,)).fetchone()
            same_texts([title, shown], [s.title, s.title], "title")
            words = {run[i:i + 2] for run in search.CJK_RUN.findall(s.title) for i in range(len(run) - 1)}
            assert words
            for word in words:
                r = asyncio.run(ds.client.get(f"/snapshot/sessions.json?_shape=array&title__contains={word}"))
                assert s.session_id in {row["session_uuid"] for row in r.json()}, s.session_id[:8]
            said = "\n".join(s.prompts + s.assistant_texts)
            for word in (w for w in words if w in said):
                shared += 1
                found = {r[0] for r in conn.execute(
                    "SELECT m.session_uuid FROM messages_fts f JOIN messages m ON m.id = f.rowid "
                    "WHERE messages_fts MATCH ?", (search.fts_query(word),))}
                assert s.session_id in found, s.session_id[:8]
    assert shared >= 6


def test_the_snapshot_holds_the_kinds_tables_with_days_and_indexes(snapshot, built):
    with closing(sqlite3.connect(snapshot)) as conn:
        for table in OWN_TABLES:
            cols = [r[1] for r in conn.execute(f"PRAGMA table_xinfo({table})")]
            assert "session_id" in cols or table == A.USAGE_DAILY
            if table != A.USAGE_DAILY:
                assert "day" in cols and "local_time" in cols, table
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        for cols in (("day",), ("kind",), ("actor",), ("session_id",)):
            assert f"idx_{A.AUDIT_LOGS}_{'_'.join(cols)}" in indexes
        assert conn.execute(f"SELECT COUNT(*) FROM {A.AUDIT_LOGS}").fetchone()[0] == built.counts["audit_logs"]


def test_the_audit_log_canned_query(snapshot, built):
    from datasette.app import Datasette

    from datasette_agentbase.serve import load_metadata

    ds = Datasette([str(snapshot)], metadata=load_metadata(snapshot),
                   template_dir=str(REPO / "templates"))
    asyncio.run(ds.invoke_startup())

    def get(path):
        r = asyncio.run(ds.client.get(path))
        assert r.status_code == 200, r.status_code
        return r.json()

    days = [r[0] for r in src(built.db_path, "SELECT DISTINCT date(ts / 1000, 'unixepoch') FROM audit_logs ORDER BY 1")]

    def want(day, kind=None):
        return [(utc(r[0]), r[1], r[2], r[3]) for r in src(
            built.db_path, "SELECT ts, kind, actor, summary FROM audit_logs WHERE date(ts / 1000, 'unixepoch') = ? "
                           "AND ? IN ('', kind) ORDER BY ts, id", (day, kind or ""))]

    def got(rows_):
        return [(r["time"], r["kind"], r["actor"], r["summary"]) for r in rows_]

    latest = get("/snapshot/audit_log.json?_shape=array")
    assert len(latest) == len(want(days[-1])) and digest(got(latest)) == digest(want(days[-1]))
    total = 0
    for day in days:
        found = get(f"/snapshot/audit_log.json?_shape=array&day={day}")
        assert len(found) == len(want(day)) and digest(got(found)) == digest(want(day)), day
        total += len(found)
    assert total == built.counts["audit_logs"]
    day = next(d for d in days if [w for w in want(d, "command")])
    found = get(f"/snapshot/audit_log.json?_shape=array&day={day}&kind=command")
    assert found and all(r["kind"] == "command" and r["actor"] == "agent" for r in found)
    assert len(found) == len(want(day, "command"))
    linked = [r for r in found if r["conversation"]]
    assert len(linked) == len(found)
    assert json.loads(linked[0]["conversation"])["href"].startswith("/-/agentbase/session/")
    queries = asyncio.run(ds.get_canned_queries("snapshot", None))
    assert "audit_log" in queries and "exec_commands" in queries  # beside metadata.yml's
    assert "audit_log" not in asyncio.run(ds.get_canned_queries("_memory", None))


def test_the_dashboard_counts_the_runs_costs(snapshot, built):
    from datasette_agentbase import dashboard

    with closing(sqlite3.connect(snapshot)) as conn:
        cube = dashboard.load(conn)
        recorded, computed = conn.execute("SELECT SUM(CASE WHEN cost_source = 'recorded' THEN cost_usd END), "
                                          "SUM(CASE WHEN cost_source = 'computed' THEN cost_usd END) FROM messages "
                                          "WHERE native_role = 'run'").fetchone()
    cost = dashboard.figures(cube, days=None)["total"]["cost"]  # every day, every agent
    assert recorded == pytest.approx(built.totals.cost_usd, abs=1e-6)
    assert cost == pytest.approx(recorded + computed, abs=1e-6) and computed > 0


# -- over SSH, and MariaDB -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    from sshd import SSHServer, require_sshd

    require_sshd()
    server = SSHServer(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()


def test_import_over_ssh_equals_a_local_import(fresh, tmp_path, sshd):
    from importer.config import load_config
    from importer.remote import RemoteServer
    from importer.store import open_store as open_
    from importer.sync import import_from_config

    db = fresh.db_path
    known = sshd.write_known_hosts(tmp_path / "known_hosts")
    config_path = tmp_path / "config.yml"
    config_path.write_text(yaml.safe_dump({
        "database": f"sqlite:///{tmp_path / 'ssh.db'}", "known_hosts": str(known),
        "ssh_config": str(tmp_path / "no-ssh-config"), "connect_timeout": 5, "read_timeout": 20,
        "servers": [{"name": SERVER, "host": "127.0.0.1", "port": sshd.port, "user": sshd.user,
                     "identity_file": str(sshd.user_key), "paths": [str(fresh.root)]}]}))
    config = load_config(config_path)

    def run():
        store = open_(config.database)
        try:
            return import_from_config(store, config)
        finally:
            store.close()

    with F.running_server(db):
        expected = fresh.plus(F.add_run(db, fresh.by_title("解释 WAL 模式").session_id))  # only in the -wal
        with F.pending_write(db, fresh.by_title("Refactor config loader").session_id):
            # the copy made on the server: the tables read, no others, nothing uncommitted
            server = RemoteServer(config.servers[0], config).connect()
            try:
                local = server.fetch_sqlite_copy(str(db), tmp_path, list(A.COPIED_TABLES))
            finally:
                server.close()
            with closing(sqlite3.connect(local)) as copy:
                tables = {r[0] for r in copy.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                assert tables == set(A.COPIED_TABLES)
                assert copy.execute("SELECT COUNT(*) FROM events").fetchone()[0] == expected.totals.events
            data = local.read_bytes()
            assert not [s for s in fresh.secrets if s.encode() in data]
            first = run()
            assert first.ok, [s.error for s in first.servers]
        reference = tmp_path / "local.db"
        import_db(reference, fresh.root)
        second = run()  # unchanged: not copied again
        assert second.ok and second.totals().files_imported == 0 and second.servers[0].wire_bytes < 64 * 1024
    got, want = full_dump(tmp_path / "ssh.db"), full_dump(reference)
    assert got["messages"] and set(got) == set(CONTENT_TABLES) | set(OWN_TABLES)
    for table in got:
        assert got[table] == want[table], table
    assert_figures(tmp_path / "ssh.db", expected)


def test_mariadb_holds_the_same_rows(built, tmp_path, mariadb_url):
    sqlite_url = f"sqlite:///{tmp_path / 'a.db'}"
    for url in (sqlite_url, mariadb_url):
        proc = ic.run_cli(["import", str(built.root), "--db", url, "--server", SERVER])
        assert proc.returncode == 0, ic.describe(proc, "import")
    assert dump_store(mariadb_url) == dump_store(sqlite_url)
    for url in (sqlite_url, mariadb_url):
        store = open_store(url)
        try:
            mine = {t: sorted((tuple(r) for r in store.query(f"SELECT {c} FROM {t}")), key=repr)
                    for t, c in OWN_TABLES.items()}
        finally:
            store.close()
        if url == sqlite_url:
            reference = mine
    for table in OWN_TABLES:
        assert len(mine[table]) == len(reference[table]), table
        for a, b in zip(mine[table], reference[table]):
            assert [pytest.approx(x) if isinstance(x, float) else x for x in a] == list(b), table
    assert ic.stats(mariadb_url) == ic.stats(sqlite_url)


def test_a_new_run_read_on_from_the_checkpoint(fresh, tmp_path):
    db = fresh.db_path
    archive = tmp_path / "archive.db"
    sid = fresh.by_title("Summarise open PRs for the release notes").session_id  # Codex
    import_db(archive, fresh.root)
    with F.running_server(db):
        added = F.add_run(db, sid, exit_code=0)
        report = import_db(archive, fresh.root)
    assert report.events_read == len(added.seqs)
    # prompt, shell call and its result, the answer, the run's usage message
    assert report.messages_added == 5 and report.files_imported == 2  # the session, the audit log
    assert_figures(archive, fresh.plus(added))
    inp, cached = rows(archive, "SELECT input_tokens, cache_read_tokens FROM messages WHERE session_uuid = ? "
                                "AND message_uuid = ?", (sid, A.run_entry_id(added.run_id)))[0]
    (total,) = src(db, "SELECT input_tokens FROM runs WHERE id = ?", (added.run_id,))[0]
    assert cached > 0 and inp + cached == total  # the thread's cumulative usage, carried in the checkpoint


def test_a_session_archived_later_is_seen(fresh, tmp_path):
    db = fresh.db_path
    archive = tmp_path / "archive.db"
    sid = fresh.by_title("解释 WAL 模式").session_id
    import_db(archive, fresh.root)
    assert rows(archive, "SELECT archived_at FROM sessions WHERE session_uuid = ?", (sid,)) == [(None,)]
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE sessions SET archived = 1, updated_at = updated_at + 86400000 WHERE id = ?", (sid,))
        conn.commit()
        (updated,) = conn.execute("SELECT updated_at FROM sessions WHERE id = ?", (sid,)).fetchone()
    report = import_db(archive, fresh.root)
    assert (report.events_read, report.messages_added, report.files_imported) == (0, 0, 1)
    assert rows(archive, "SELECT archived_at FROM sessions WHERE session_uuid = ?", (sid,)) == [(utc(updated),)]
    assert rows(archive, "SELECT entry_uuid FROM entry_revisions") == [("@header",)]  # the header it had


def test_one_agent_only(built, tmp_path):
    archive = tmp_path / "archive.db"
    import_db(archive, built.root, agent="ops-runbook")
    (mine,) = [s for s in built.sessions.values() if s.profile == "ops-runbook"]
    assert session_ids(archive).keys() == {mine.session_id}
    assert rows(archive, f"SELECT DISTINCT session_uuid FROM {A.AUDIT_LOGS}") == [(mine.session_id,)]
    assert scalar(archive, f"SELECT COUNT(*) FROM {A.USAGE_DAILY}") == 0  # server-wide: not one agent's
    assert scalar(archive, f"SELECT COUNT(*) FROM {A.RUNS}") == mine.runs
