"""Checks of the agent-server fixture generator itself (tests/agent_server_fixture.py).

Plain sqlite3 and the generator's own Expected: no importer is involved. What is checked here is
what importer tests will rely on: the schema, WAL mode, dense seqs, usage_daily = the runs'
aggregate, the 64 KB cut, Expected = straight SQL, and the live-database helpers.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3
import urllib.parse
import uuid
from contextlib import closing
from pathlib import Path

import pytest

import agent_server_fixture as F

# SIBLINGS.md section 2, column by column.
SIBLINGS_COLUMNS = {
    "api_keys": "id name key_hash key_prefix enabled allowed_profile_ids default_profile_id created_at last_used_at",
    "profiles": "id name provider model system_prompt permission_mode allowed_tools disallowed_tools skills "
                "file_access knowledge_root_ids is_default builtin version updated_at",
    "knowledge_roots": "id name path description access enabled visible checked_at",
    "profile_knowledge": "profile_id knowledge_root_id",
    "sessions": "id source profile_id provider model permission_mode provider_session_id workspace_dir title "
                "last_seq created_at updated_at archived",
    "runs": "id session_id status started_at ended_at input_tokens output_tokens cost_usd error",
    "events": "session_id seq run_id type payload ts",
    "interactions": "id run_id session_id kind request response status created_at resolved_at expires_at",
    "files": "id session_id rel_path origin mime size sha256 created_at",
    "settings": "key value updated_at",
    "audit_logs": "id ts actor session_id kind summary detail",
    "usage_daily": "date api_key_id provider model runs input_tokens output_tokens cost_usd",
    "admin_sessions": "id created_at expires_at",
}
JSON_COLUMNS = {"api_keys": ["allowed_profile_ids"],
                "profiles": ["allowed_tools", "disallowed_tools", "skills", "file_access", "knowledge_root_ids"],
                "events": ["payload"], "interactions": ["request", "response"], "settings": ["value"],
                "audit_logs": ["detail"]}
MS_2025, MS_2026 = 1735689600000, 1767225600000


def ro(path: Path, immutable: bool = False) -> sqlite3.Connection:
    """A read-only connection, as an importer opens the live database (immutable=1 ignores the WAL)."""
    uri = "file:" + urllib.parse.quote(str(path)) + ("?immutable=1" if immutable else "?mode=ro")
    return sqlite3.connect(uri, uri=True, isolation_level=None)


def scalar(conn, sql, *args):
    return conn.execute(sql, args).fetchone()[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> F.Expected:
    return F.build_agent_db(tmp_path_factory.mktemp("agent-server"), seed=0)


@pytest.fixture(scope="module")
def db(built):
    conn = ro(built.db_path)
    yield conn
    conn.close()


@pytest.fixture
def fresh(tmp_path) -> F.Expected:
    """A database of its own, for the tests that write to it."""
    return F.build_agent_db(tmp_path, seed=3)


def sql_figures(conn: sqlite3.Connection, sid: str) -> dict:
    """A session's figures, straight from SQL (named as SessionExpected's fields)."""
    def col(sql):
        return [r[0] for r in conn.execute(sql, (sid,))]

    def one(sql):
        return conn.execute(sql, (sid,)).fetchone()

    title, provider, model, profile, key, archived, psid, mode, last_seq = one(
        "SELECT s.title, s.provider, s.model, p.name, k.name, s.archived, s.provider_session_id, s.permission_mode, "
        "s.last_seq FROM sessions s JOIN profiles p ON p.id = s.profile_id JOIN api_keys k ON k.id = s.api_key_id "
        "WHERE s.id = ?")
    types = dict(conn.execute("SELECT type, COUNT(*) FROM events WHERE session_id = ? GROUP BY type", (sid,)))
    started = col("SELECT json_extract(payload, '$.toolCallId') FROM events WHERE session_id = ? "
                  "AND type = 'tool.started'")
    completed = set(col("SELECT json_extract(payload, '$.toolCallId') FROM events WHERE session_id = ? "
                        "AND type = 'tool.completed'"))
    runs, inp, out, cost = one("SELECT COUNT(*), TOTAL(input_tokens), TOTAL(output_tokens), SUM(cost_usd) "
                               "FROM runs WHERE session_id = ?")
    return {
        "title": title, "provider": provider, "model": model, "profile": profile, "api_key": key,
        "archived": bool(archived), "provider_session_id": psid, "permission_mode": mode, "last_seq": last_seq,
        "events": scalar(conn, "SELECT COUNT(*) FROM events WHERE session_id = ?", sid),
        "event_types": types,
        "runs": runs, "input_tokens": int(inp), "output_tokens": int(out), "cost_usd": cost,
        "user_messages": types.get("user.message", 0),
        "prompts": col("SELECT COALESCE(json_extract(payload, '$.message.content[0].text'), "
                       "json_extract(payload, '$.item.content[0].text')) FROM events WHERE session_id = ? "
                       "AND type = 'user.message' ORDER BY seq"),
        "assistant_messages": types.get("assistant.message", 0),
        "assistant_texts": col("SELECT COALESCE(json_extract(payload, '$.message.content[0].text'), "
                               "json_extract(payload, '$.item.text')) FROM events WHERE session_id = ? "
                               "AND type = 'assistant.message' ORDER BY seq"),
        "deltas": types.get("message.delta", 0),
        "reasoning": types.get("reasoning", 0),
        "tool_started": len(started),
        "tool_calls": types.get("tool.completed", 0),
        "shell_exit_codes": col("SELECT json_extract(payload, '$.exitCode') FROM events WHERE session_id = ? "
                                "AND type = 'tool.completed' AND json_extract(payload, '$.kind') = 'shell' "
                                "ORDER BY seq"),
        "tool_started_without_completed": len(set(started) - completed),
        "unknown_types": col(f"SELECT type FROM events WHERE session_id = ? AND type NOT IN "
                             f"({', '.join(repr(t) for t in sorted(F.KNOWN_TYPES))}) ORDER BY seq"),
        "errors": types.get("error", 0),
        "interactions": scalar(conn, "SELECT COUNT(*) FROM interactions WHERE session_id = ?", sid),
        "audit_logs": scalar(conn, "SELECT COUNT(*) FROM audit_logs WHERE session_id = ?", sid),
        "files": scalar(conn, "SELECT COUNT(*) FROM files WHERE session_id = ?", sid),
    }


def assert_matches(conn: sqlite3.Connection, expected: F.Expected) -> None:
    assert set(expected.sessions) == {r[0] for r in conn.execute("SELECT id FROM sessions")}
    for sid, exp in expected.sessions.items():
        got = sql_figures(conn, sid)
        for name, value in got.items():
            want = getattr(exp, name)
            if name == "cost_usd":
                assert (value is None) == (want is None) and value == pytest.approx(want, abs=1e-6), (exp.title, name)
            else:
                assert value == want, (exp.title, name, value, want)
        assert exp.shell_calls == len(exp.shell_exit_codes)
        assert exp.unknown_events == len(exp.unknown_types)
    for table, n in expected.counts.items():
        assert scalar(conn, f"SELECT COUNT(*) FROM `{table}`") == n, table
    totals = expected.totals
    assert totals.events == scalar(conn, "SELECT COUNT(*) FROM events")
    assert totals.runs == scalar(conn, "SELECT COUNT(*) FROM runs")
    assert totals.audit_logs == scalar(conn, "SELECT COUNT(*) FROM audit_logs")
    assert totals.input_tokens == scalar(conn, "SELECT TOTAL(input_tokens) FROM runs")
    assert totals.cost_usd == pytest.approx(scalar(conn, "SELECT TOTAL(cost_usd) FROM runs"), abs=1e-6)
    usage = {tuple(r[:4]): F.UsageRow(*r[4:]) for r in conn.execute("SELECT * FROM usage_daily")}
    assert set(usage) == set(expected.usage_daily)
    for key, row in usage.items():
        want = expected.usage_daily[key]
        assert (row.runs, row.input_tokens, row.output_tokens) == (want.runs, want.input_tokens, want.output_tokens)
        assert row.cost_usd == pytest.approx(want.cost_usd, abs=1e-6)


def assert_usage_daily_is_the_runs_aggregate(conn: sqlite3.Connection) -> None:
    runs = conn.execute(
        "SELECT strftime('%Y-%m-%d', r.started_at / 1000, 'unixepoch') AS day, s.api_key_id, s.provider, s.model, "
        "COUNT(*), SUM(r.input_tokens), SUM(r.output_tokens), TOTAL(r.cost_usd) FROM runs r "
        "JOIN sessions s ON s.id = r.session_id WHERE r.ended_at IS NOT NULL "
        "GROUP BY day, s.api_key_id, s.provider, s.model ORDER BY 1, 2, 3, 4").fetchall()
    usage = conn.execute("SELECT * FROM usage_daily ORDER BY 1, 2, 3, 4").fetchall()
    assert [r[:7] for r in usage] == [r[:7] for r in runs]
    for u, r in zip(usage, runs):
        assert u[7] == pytest.approx(r[7], abs=1e-6)


# --- the schema ----------------------------------------------------------------------------

def test_every_table_of_the_data_model_with_its_columns(db):
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == set(SIBLINGS_COLUMNS) | {"__drizzle_migrations", "sqlite_sequence"}
    for table, names in SIBLINGS_COLUMNS.items():
        info = db.execute(f"PRAGMA table_info(`{table}`)").fetchall()
        cols = [r[1] for r in info]
        assert set(names.split()) <= set(cols), (table, set(names.split()) - set(cols))
        assert {r[2].lower() for r in info} <= {"text", "integer", "real"}, table  # Drizzle's SQLite types
        for _cid, name, type_, *_ in info:
            if name.endswith("_at") or name == "ts":
                assert type_.lower() == "integer", (table, name)  # epoch ms
    assert [r[1] for r in db.execute("PRAGMA table_info(sessions)")][1] == "api_key_id"


def test_primary_keys(db):
    def pk(table):
        return [r[1] for r in sorted(db.execute(f"PRAGMA table_info(`{table}`)"), key=lambda r: r[5]) if r[5]]
    assert pk("events") == ["session_id", "seq"]
    assert pk("usage_daily") == ["date", "api_key_id", "provider", "model"]
    assert pk("profile_knowledge") == ["profile_id", "knowledge_root_id"]
    for table in ("api_keys", "profiles", "knowledge_roots", "sessions", "runs", "interactions", "files",
                  "admin_sessions", "audit_logs"):
        assert pk(table) == ["id"], table
    assert pk("settings") == ["key"]
    with pytest.raises(sqlite3.IntegrityError):
        writer = sqlite3.connect(":memory:")
        for _tag, _when, text in F.MIGRATIONS:
            for statement in text.split("--> statement-breakpoint"):
                if statement.strip():
                    writer.execute(statement)
        writer.execute("INSERT INTO events VALUES ('s', 1, NULL, 't', '{}', 0)")
        writer.execute("INSERT INTO events VALUES ('s', 1, NULL, 't', '{}', 0)")


def test_drizzle_style_ddl_and_migrations_table(db):
    sql = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    assert sql["events"].startswith("CREATE TABLE `events` (\n\t`session_id` text NOT NULL,")
    assert "PRIMARY KEY(`session_id`, `seq`)" in sql["events"]
    assert ("FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE cascade"
            in sql["events"])
    assert "`archived` integer DEFAULT false NOT NULL" in sql["sessions"]  # added by migration 0001
    assert "id SERIAL PRIMARY KEY" in sql["__drizzle_migrations"]
    rows = db.execute("SELECT id, hash, created_at FROM __drizzle_migrations ORDER BY created_at").fetchall()
    assert rows == [(None, hashlib.sha256(text.encode()).hexdigest(), when) for _tag, when, text in F.MIGRATIONS]
    assert scalar(db, "PRAGMA user_version") == 0


def test_wal_mode_and_nothing_left_in_the_wal_after_a_build(built, db):
    assert scalar(db, "PRAGMA journal_mode") == "wal"
    header = built.db_path.read_bytes()[:100]
    assert header[:16] == b"SQLite format 3\x00" and header[18] == header[19] == 2  # WAL, persistently
    wal = Path(str(built.db_path) + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # a reader's open may create an empty one


def test_json_columns_hold_json_and_times_are_epoch_ms(db):
    for table, cols in JSON_COLUMNS.items():
        for col in cols:
            for (value,) in db.execute(f"SELECT `{col}` FROM `{table}` WHERE `{col}` IS NOT NULL"):
                json.loads(value)
    for table in SIBLINGS_COLUMNS:
        for r in db.execute(f"PRAGMA table_info(`{table}`)").fetchall():
            if r[1].endswith("_at") or r[1] == "ts":
                for (v,) in db.execute(f"SELECT `{r[1]}` FROM `{table}` WHERE `{r[1]}` IS NOT NULL"):
                    assert isinstance(v, int) and MS_2025 < v < MS_2026, (table, r[1], v)
    assert not db.execute("SELECT 1 FROM usage_daily WHERE date NOT GLOB '2025-[01][0-9]-[0-3][0-9]'").fetchall()


def test_foreign_keys_hold(db):
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    assert scalar(db, "SELECT COUNT(*) FROM events e LEFT JOIN runs r ON r.id = e.run_id "
                      "WHERE e.run_id IS NOT NULL AND r.id IS NULL") == 0


# --- the content ---------------------------------------------------------------------------

def test_events_are_dense_per_session_and_in_time_order(db):
    for sid, last_seq in db.execute("SELECT id, last_seq FROM sessions").fetchall():
        rows = db.execute("SELECT seq, ts FROM events WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
        assert [r[0] for r in rows] == list(range(1, last_seq + 1))
        assert all(a[1] <= b[1] for a, b in itertools.pairwise(rows))
    rowid_order = [tuple(r) for r in db.execute("SELECT session_id, seq FROM events ORDER BY rowid")]
    assert rowid_order != sorted(rowid_order)  # written in time order, sessions interleaved


def test_each_run_opens_with_run_started_and_one_prompt(db):
    for run_id, status, started, ended in db.execute("SELECT id, status, started_at, ended_at FROM runs").fetchall():
        types = [r[0] for r in db.execute("SELECT type FROM events WHERE run_id = ? ORDER BY seq", (run_id,))]
        assert types[:2] == ["run.started", "user.message"] and types.count("user.message") == 1
        assert types[-1] == "run.completed" and status in ("completed", "failed", "interrupted")
        assert scalar(db, "SELECT ts FROM events WHERE run_id = ? AND type = 'run.started'", run_id) == started
        assert scalar(db, "SELECT ts FROM events WHERE run_id = ? AND type = 'run.completed'", run_id) == ended
    assert db.execute("SELECT type FROM events WHERE run_id IS NULL").fetchall() == [("x.custom",)]


def test_usage_daily_equals_the_runs_aggregate(db):
    assert scalar(db, "SELECT COUNT(*) FROM runs WHERE ended_at IS NULL") == 0
    assert_usage_daily_is_the_runs_aggregate(db)
    crossing = db.execute("SELECT started_at, ended_at FROM runs WHERE started_at / 86400000 <> ended_at / 86400000"
                          ).fetchall()
    assert crossing  # a run across midnight UTC counts on the day it started


def test_costs_claude_priced_codex_null(db):
    by_provider = dict(db.execute(
        "SELECT s.provider, GROUP_CONCAT(COALESCE(r.cost_usd, 'null')) FROM runs r JOIN sessions s "
        "ON s.id = r.session_id GROUP BY s.provider"))
    assert set(by_provider["codex"].split(",")) == {"null"}
    assert all(float(c) > 0 for c in by_provider["claude"].split(","))
    for payload, cost in db.execute("SELECT e.payload, r.cost_usd FROM events e JOIN runs r ON r.id = e.run_id "
                                    "JOIN sessions s ON s.id = r.session_id WHERE e.type = 'run.completed' "
                                    "AND s.provider = 'claude'"):
        result = json.loads(payload)
        assert result["total_cost_usd"] == cost
    for payload, inp, out in db.execute(
            "SELECT e.payload, r.input_tokens, r.output_tokens FROM events e JOIN runs r ON r.id = e.run_id "
            "JOIN sessions s ON s.id = r.session_id WHERE e.type = 'run.completed' AND s.provider = 'claude'"):
        u = json.loads(payload)["usage"]
        assert inp == u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        assert out == u["output_tokens"]


def test_truncated_tool_output_is_64_kib_with_the_full_text_beside_it(built, db):
    assert len(built.truncated_outputs) == 1
    cut = built.truncated_outputs[0]
    payload = json.loads(scalar(db, "SELECT payload FROM events WHERE session_id = ? AND seq = ?",
                                cut.session_id, cut.seq))
    assert payload["truncated"] is True and payload["kind"] == "shell" and payload["exitCode"] == 0
    inline = payload["item"]["aggregatedOutput"].encode()
    assert len(inline) == F.TOOL_OUTPUT_CAP == 65_536 == cut.inline_bytes
    ws = Path(scalar(db, "SELECT workspace_dir FROM sessions WHERE id = ?", cut.session_id))
    full = (ws / payload["outputFile"]).read_bytes()
    assert payload["outputFile"] == cut.rel_path == f".agent/tool-outputs/{payload['toolCallId']}.log"
    assert len(full) == payload["originalBytes"] == cut.original_bytes > F.TOOL_OUTPUT_CAP
    assert full.startswith(inline) and hashlib.sha256(full).hexdigest() == cut.sha256
    flags = db.execute("SELECT json_extract(payload, '$.truncated'), COUNT(*) FROM events "
                       "WHERE type = 'tool.completed' GROUP BY 1").fetchall()
    assert dict(flags)[1] == 1 and 0 in dict(flags)
    assert scalar(db, "SELECT MAX(length(CAST(payload AS BLOB))) FROM events WHERE json_extract(payload, "
                      "'$.truncated') = 0 OR json_extract(payload, '$.truncated') IS NULL") < F.TOOL_OUTPUT_CAP


def test_expected_matches_straight_sql(built, db):
    assert_matches(db, built)


def test_every_feature_is_there(built, db):
    t = built.totals
    assert F.KNOWN_TYPES <= set(t.event_types)
    assert {"plan.updated", "x.custom"} <= set(t.unknown_types)
    assert t.tool_started_without_completed == 1 and t.errors >= 2 and t.archived >= 2
    assert {None, 0, 1} <= set(t.shell_exit_codes)
    assert {"claude", "codex"} == {s.provider for s in built.sessions.values()}
    assert {"claude-sonnet-4-5", "gpt-5-codex"} <= {s.model for s in built.sessions.values()}
    assert built.by_title("部署 nginx 并检查日志").permission_mode == ""
    assert built.by_title("部署 nginx 并检查日志").effective_permission_mode == "acceptEdits"
    for s in built.sessions.values():
        version = uuid.UUID(s.provider_session_id).version
        assert version == (4 if s.provider == "claude" else 7)
    kinds = {r[0] for r in db.execute("SELECT DISTINCT json_extract(payload, '$.kind') FROM events "
                                      "WHERE type = 'tool.completed'")}
    assert {"shell", "file_change", "mcp", "web_fetch", "web_search", "file_read", "question"} == kinds
    assert {r[0] for r in db.execute("SELECT DISTINCT status FROM interactions")} == {"approved", "answered",
                                                                                      "expired"}
    expired = db.execute("SELECT created_at, resolved_at, expires_at, response FROM interactions "
                         "WHERE status = 'expired'").fetchone()
    assert expired[1] == expired[2] == expired[0] + F.INTERACTION_TIMEOUT_MS and "deny" in expired[3]
    assert {r[0] for r in db.execute("SELECT DISTINCT kind FROM audit_logs")} == {
        "command", "file_access_denied", "approval", "admin"}
    assert {r[0] for r in db.execute("SELECT DISTINCT origin FROM files")} == {"upload", "agent"}
    assert {r[0] for r in db.execute("SELECT DISTINCT status FROM runs")} == {"completed", "failed", "interrupted"}
    gone = [s for s in built.sessions.values() if not s.workspace_exists]
    assert gone and all(s.archived and s.files and not Path(s.workspace_dir).exists() for s in gone)
    assert scalar(db, "SELECT COUNT(*) FROM admin_sessions") == 2


def test_files_rows_describe_the_files_on_disk(db):
    for rel, size, sha, ws in db.execute("SELECT f.rel_path, f.size, f.sha256, s.workspace_dir FROM files f "
                                         "JOIN sessions s ON s.id = f.session_id"):
        path = Path(ws) / rel
        if path.parent.parent.exists():
            data = path.read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (size, sha)


def test_secrets_are_where_the_data_model_says_and_nowhere_else(built, db):
    hashes = [r[0] for r in db.execute("SELECT key_hash FROM api_keys")]
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in hashes)
    assert all(p.startswith("ask_") and len(p) == 12 for (p,) in db.execute("SELECT key_prefix FROM api_keys"))
    admin = [r[0] for r in db.execute("SELECT id FROM admin_sessions")]
    settings = "\n".join(r[0] for r in db.execute("SELECT value FROM settings WHERE key IN (%s)"
                                                  % ",".join("?" * len(built.secret_settings)),
                                                  built.secret_settings))
    assert set(hashes) | set(admin) <= set(built.secrets)
    others = [s for s in built.secrets if s not in hashes and s not in admin]
    assert len(others) == 4 and all(s in settings for s in others)
    ordinary = "\n".join(r[0] for r in db.execute("SELECT value FROM settings WHERE key NOT IN (%s)"
                                                  % ",".join("?" * len(built.secret_settings)),
                                                  built.secret_settings))
    assert "/srv/agent-server/workspaces" in ordinary and "rm -rf /" in ordinary
    elsewhere = "\n".join(str(v) for t in ("sessions", "runs", "events", "interactions", "files", "audit_logs",
                                           "profiles", "knowledge_roots")
                          for row in db.execute(f"SELECT * FROM `{t}`") for v in row)
    assert not [s for s in built.secrets if s in elsewhere]


def test_deterministic_from_the_seed(tmp_path):
    base = "/srv/agent-server/workspaces"
    a = F.build_agent_db(tmp_path / "a", seed=7, workspace_base=base)
    b = F.build_agent_db(tmp_path / "b", seed=7, workspace_base=base)
    c = F.build_agent_db(tmp_path / "c", seed=8, workspace_base=base)
    assert a.sessions == b.sessions and a.secrets == b.secrets and a.usage_daily == b.usage_daily
    assert set(a.sessions).isdisjoint(c.sessions) and a.secrets != c.secrets
    with closing(ro(a.db_path)) as conn:
        assert scalar(conn, "SELECT workspace_dir FROM sessions LIMIT 1").startswith(base + "/")
        assert_matches(conn, a)


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_other_seeds_and_extra_sessions(tmp_path, seed):
    expected = F.build_agent_db(tmp_path, seed=seed, extra_sessions=3)
    assert len(expected.sessions) == 11
    conn = ro(expected.db_path)
    try:
        assert_matches(conn, expected)
        assert_usage_daily_is_the_runs_aggregate(conn)
    finally:
        conn.close()


def test_small(built):
    files = [p for p in built.root.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 600_000
    assert built.db_path.stat().st_size < 500_000


# --- live database helpers -----------------------------------------------------------------

def test_appended_events_are_seen_read_only_while_only_in_the_wal(fresh):
    db_path, wal = fresh.db_path, Path(str(fresh.db_path) + "-wal")
    claude = fresh.by_title("部署 nginx 并检查日志").session_id
    codex = fresh.by_title("Fix flaky test in payments service").session_id
    before = fresh.totals.events
    with F.running_server(db_path):
        added = F.append_events(db_path, claude, 7)
        added2 = F.append_events(db_path, codex, 4)
        assert wal.exists() and wal.stat().st_size > 0
        assert added.seqs == list(range(fresh.sessions[claude].last_seq + 1, fresh.sessions[claude].last_seq + 8))
        assert added.tally.event_types == {"message.delta": 5, "assistant.message": 2}
        after = fresh.plus(added).plus(added2)
        reader = ro(db_path)
        try:
            assert scalar(reader, "SELECT COUNT(*) FROM events") == before + 11
            assert_matches(reader, after)
        finally:
            reader.close()
        main_file_only = ro(db_path, immutable=True)
        try:
            assert scalar(main_file_only, "SELECT COUNT(*) FROM events") == before  # not in agent.db itself
            assert scalar(main_file_only, "SELECT last_seq FROM sessions WHERE id = ?", claude) == \
                fresh.sessions[claude].last_seq
        finally:
            main_file_only.close()
    assert not wal.exists()  # the server's connection was the last one: checkpointed into agent.db
    with closing(ro(db_path, immutable=True)) as conn:
        assert scalar(conn, "SELECT COUNT(*) FROM events") == before + 11


def test_add_run_keeps_usage_daily_exact(fresh):
    db_path = fresh.db_path
    expected = fresh
    with F.running_server(db_path):
        for title in ("解释 WAL 模式", "Summarise open PRs for the release notes"):
            sid = fresh.by_title(title).session_id
            added = F.add_run(db_path, sid, exit_code=3, output="inactive\n")
            assert added.tally.runs == 1 and added.tally.shell_exit_codes == [3]
            assert added.rows["runs"] == 1 and added.rows["audit_logs"] == 1
            expected = expected.plus(added)
        reader = ro(db_path)
        try:
            assert_matches(reader, expected)
            assert_usage_daily_is_the_runs_aggregate(reader)
            assert scalar(reader, "SELECT COUNT(*) FROM runs") == fresh.totals.runs + 2
        finally:
            reader.close()
        assert Path(str(db_path) + "-wal").stat().st_size > 0


def test_a_reader_never_sees_half_of_an_open_transaction(fresh):
    db_path = fresh.db_path
    sid = fresh.by_title("Fix flaky test in payments service").session_id
    last_seq = fresh.sessions[sid].last_seq

    def state(conn):
        return (scalar(conn, "SELECT COUNT(*) FROM events WHERE session_id = ?", sid),
                scalar(conn, "SELECT COUNT(*) FROM runs WHERE session_id = ?", sid),
                scalar(conn, "SELECT last_seq FROM sessions WHERE id = ?", sid))

    old = (last_seq, fresh.sessions[sid].runs, last_seq)
    with F.running_server(db_path):
        with F.pending_write(db_path, sid, 6) as pending:
            reader = ro(db_path)
            assert state(reader) == old
            assert scalar(reader, "SELECT COUNT(*) FROM runs WHERE status = 'running'") == 0
            pending.rollback()
            assert state(reader) == old
            reader.close()
        with F.pending_write(db_path, sid, 6) as pending:
            reader = ro(db_path)
            reader.execute("BEGIN")
            assert state(reader) == old  # a read transaction begun before the commit...
            added = pending.commit()
            assert state(reader) == old  # ...keeps its snapshot
            reader.execute("COMMIT")
            assert state(reader) == (last_seq + 6, old[1] + 1, last_seq + 6)  # then all of it at once
            assert added.seqs == list(range(last_seq + 1, last_seq + 7))
            assert scalar(reader, "SELECT status FROM runs WHERE id = ?", added.run_id) == "running"
            assert_matches(reader, fresh.plus(added))
            reader.close()
