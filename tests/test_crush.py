"""opencode (Go) and Crush databases (importer/sources/crush.py, docs/crush.md).

The real database in ../shared/other-samples-2/opencode-go (SOURCES.md: opencode 2025, with its
``-wal``) is read where it is: required under CI=true, skipped with a message otherwise. It holds
real people's text: assertions show counts and ids only. Its figures are established here
independently of the importer (``oracle``: plain sqlite3 and json on a private copy of the file
and its ``-wal``, from the counting rules of issue #24).

Everything else runs on made-up databases with the same schema (``make_db``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
from transcripts import do_import, dump, rows, scalar  # noqa: E402
from vocabulary_checks import assert_vocabulary  # noqa: E402

from importer.sources import Discovery, Scope, all_sources  # noqa: E402
from importer.sources import crush as C  # noqa: E402
from importer.sources.fs import FileSystem  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
SAMPLES = SHARED / "other-samples-2" / "opencode-go"
SAMPLE_DB = SAMPLES / "WismutHansen__lst" / ".opencode" / "opencode.db"
SST_DB = SHARED / "other-samples-2" / "opencode" / "richardaiand__aiand-portfolio-web" / ".local" / "share" / \
    "opencode" / "opencode.db"


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """A private copy of the sample folder: SQLite writes a ``-shm`` beside a WAL database it opens,
    even read-only, wherever it may (root may anywhere), and the shared samples stay as they are."""
    if not SAMPLE_DB.is_file():
        message = (f"opencode (Go) sample not found at {SAMPLE_DB} "
                   "(expected ../shared/other-samples-2 beside the repository)")
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message + "; it is required when CI=true")
        pytest.skip(message)
    copy = tmp_path_factory.mktemp("samples") / "opencode-go"
    shutil.copytree(SAMPLES, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def sample_db(samples: Path) -> Path:
    return samples / SAMPLE_DB.relative_to(SAMPLES)


def imp(db: Path, *paths, server: str = "test", agent: str | None = None):
    report = do_import(db, *paths, server=server, agent=agent)
    assert report.files_failed == 0, report.failures
    return report


# ---------------------------------------------------------------------------
# The oracle: the sample read with sqlite3 and json, sharing no code with the importer


def oracle(db_file: Path, tmp: Path, with_wal: bool = True) -> dict:
    """Counts by the issue's rules: a session per sessions row; user messages = role user rows;
    assistant messages = role assistant rows; tool results = tool_result parts; tool calls =
    distinct tool_call ids per session; shell calls = those of ``bash``; tokens and cost =
    the sessions' columns."""
    tmp.mkdir(parents=True, exist_ok=True)
    copy = tmp / "copy.db"
    shutil.copyfile(db_file, copy)
    if with_wal and Path(str(db_file) + "-wal").exists():
        shutil.copyfile(str(db_file) + "-wal", str(copy) + "-wal")
    conn = sqlite3.connect(copy)
    try:
        out = Counter()
        calls, shell, bash_results = set(), set(), Counter()
        out["sessions"] = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
        out["rows"] = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        p, c, cost = conn.execute(
            "SELECT SUM(prompt_tokens), SUM(completion_tokens), SUM(cost) FROM sessions").fetchone()
        out["prompt"], out["completion"], out["cost"] = p or 0, c or 0, cost or 0.0
        for sid, role, parts in conn.execute("SELECT session_id, role, parts FROM messages"):
            out[role] += 1
            for part in json.loads(parts):
                if part["type"] == "tool_call":
                    calls.add((sid, part["data"]["id"]))
                    if part["data"]["name"] == "bash":
                        shell.add((sid, part["data"]["id"]))
                elif part["type"] == "tool_result":
                    out["results"] += 1
                    if (sid, part["data"]["tool_call_id"]) in shell and "Exit code " in part["data"]["content"]:
                        bash_results["exit"] += 1
                elif part["type"] == "reasoning":
                    out["thinking_parts"] += 1
        out["tool_calls"], out["shell_calls"], out["exit_codes"] = len(calls), len(shell), bash_results["exit"]
        return out
    finally:
        conn.close()


@pytest.fixture(scope="module")
def imported(samples, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crush")
    url = f"sqlite:///{tmp}/a.db"
    proc = ic.run_cli(["import", samples / "WismutHansen__lst", "--server", "lst", "--db", url, "--json-summary"])
    assert proc.returncode == 0, ic.describe(proc, "import")
    summary = json.loads(proc.stdout)
    assert summary["files_failed"] == 0 and summary["files_ignored"] == 0 and summary["bad_lines"] == 0
    return tmp / "a.db"


def test_sample_figures_equal_the_oracle(samples, imported, tmp_path):
    want = oracle(sample_db(samples), tmp_path / "o")
    # the -wal holds committed rows: without it the database has fewer (SOURCES.md: 72 of 120)
    assert oracle(sample_db(samples), tmp_path / "nowal", with_wal=False)["rows"] < want["rows"]
    db = imported
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = 'crush'") == want["sessions"]
    by_role = dict(rows(db, "SELECT role, COUNT(*) FROM messages WHERE source = 'crush' GROUP BY role"))
    assert by_role == {"user": want["user"], "assistant": want["assistant"], "toolResult": want["results"]}
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE source = 'crush'") == want["tool_calls"]
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE source = 'crush' AND command IS NOT NULL") == \
        want["shell_calls"]
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE source = 'crush' AND exit_code IS NOT NULL") == \
        want["exit_codes"]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE has_thinking = 1") == want["thinking_parts"]
    # every result paired with its call, but the one call the sample never answered
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NOT NULL") == want["results"]
    # tokens and cost on the sessions (recorded per session), none on any message
    got = rows(db, "SELECT SUM(input_tokens), SUM(output_tokens), SUM(total_tokens), SUM(cost_usd) FROM sessions")[0]
    assert got[:3] == (want["prompt"], want["completion"], want["prompt"] + want["completion"])
    assert got[3] == pytest.approx(want["cost"])
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE input_tokens IS NOT NULL OR output_tokens IS NOT NULL "
                      "OR cost_usd IS NOT NULL OR call_key IS NOT NULL") == 0
    assert scalar(db, "SELECT COUNT(*) FROM crush_sessions WHERE session_id IS NULL") == 0
    assert_vocabulary(db, "crush", usage=False, shell_exit_codes=True, tool_results=True)


def test_stats_json_by_source(samples, imported, tmp_path):
    want = oracle(sample_db(samples), tmp_path / "o")
    proc = ic.run_cli(["stats", "--db", f"sqlite:///{imported}", "--json"])
    assert proc.returncode == 0, ic.describe(proc, "stats")
    got = json.loads(proc.stdout)["by_source"]["crush"]
    assert got["sessions"] == want["sessions"]
    assert got["messages_by_role"] == {"user": want["user"], "assistant": want["assistant"],
                                       "toolResult": want["results"]}
    assert (got["tool_calls"], got["shell_calls"]) == (want["tool_calls"], want["shell_calls"])
    assert got["model_calls"] == 0 and got["usage"]["totalTokens"] == 0  # no per-call usage
    assert got["per_call_usage"] == "no per-call usage"
    assert got["session_usage"]["input"] == want["prompt"] and got["session_usage"]["output"] == want["completion"]
    assert got["session_usage"]["cost_recorded"] == pytest.approx(want["cost"])
    assert got["messages_by_native_role"] == {"user": want["user"], "assistant": want["assistant"],
                                              "tool": want["results"]}


def test_sample_sessions_and_a_second_run(samples, imported):
    got = rows(imported, "SELECT agent_id, cwd, project, started_at IS NOT NULL, times_approximate FROM sessions")
    assert {g for g in got} == {("crush", str(samples / "WismutHansen__lst"), "WismutHansen__lst", 1, 0)}
    # the placeholder title is no title; the generated one is kept
    assert scalar(imported, "SELECT COUNT(*) FROM sessions WHERE title IS NOT NULL") == 1
    report = imp(imported, samples / "WismutHansen__lst", server="lst")
    assert report.messages_added == 0 and report.files_imported == 0


def test_the_sst_opencode_database_is_not_claimed(samples, tmp_path):
    if not SST_DB.is_file():
        pytest.skip("no sst/opencode sample")
    head = SST_DB.read_bytes()[:65536]
    assert not C.SOURCE.claims_file("opencode.db", head)
    assert C.SOURCE.claims_file("opencode.db", (sample_db(samples)).read_bytes()[:65536])
    out = Discovery()
    assert not C.SOURCE.find(FileSystem(), str(SST_DB.parent), Scope("s"), out) and out.units == []


# ---------------------------------------------------------------------------
# Made-up databases


SCHEMA = """
CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL,
    is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_session_id TEXT, title TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0.0,
    updated_at INTEGER NOT NULL, created_at INTEGER NOT NULL {session_extra});
CREATE TABLE files (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, path TEXT NOT NULL, content TEXT NOT NULL,
    version TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL,
    parts TEXT NOT NULL default '[]', model TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
    finished_at INTEGER {message_extra});
"""
T0 = 1_750_000_000


def part(kind: str, **data) -> dict:
    return {"type": kind, "data": data}


def make_db(path: Path, crush: bool = False) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SCHEMA.format(
        session_extra=", summary_message_id TEXT" if crush else "",
        message_extra=", provider TEXT, is_summary_message INTEGER NOT NULL DEFAULT 0" if crush else ""))
    return conn


def add_session(conn, sid: str, title: str = "Fix the build", parent: str | None = None, tokens=(1000, 200),
                cost: float = 0.5, t: int = T0) -> None:
    conn.execute("INSERT INTO sessions (id, parent_session_id, title, prompt_tokens, completion_tokens, cost, "
                 "updated_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (sid, parent, title, *tokens, cost, t, t))


def add_message(conn, mid: str, sid: str, role: str, parts, t: int, model: str | None = None, **extra) -> None:
    cols = ["id", "session_id", "role", "parts", "model", "created_at", "updated_at", *extra]
    text = parts if isinstance(parts, str) else json.dumps(parts)
    conn.execute(f"INSERT INTO messages ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                 (mid, sid, role, text, model, t, t, *extra.values()))


def conversation(conn, sid: str = "s-1", t: int = T0) -> None:
    """A prompt, an answer with thinking and two calls (one shell), their results, a final answer."""
    add_session(conn, sid, t=t)
    add_message(conn, f"{sid}-u1", sid, "user", [part("text", text="Please run the tests"),
                                               part("finish", reason="stop", time=t)], t)
    add_message(conn, f"{sid}-a1", sid, "assistant", [
        part("reasoning", thinking="Run them with make."),
        part("tool_call", id=f"{sid}-c1", name="bash", input=json.dumps({"command": "make test"}), type="function",
             finished=True),
        part("tool_call", id=f"{sid}-c2", name="view", input=json.dumps({"file_path": "README"}), type="function",
             finished=True),
        part("finish", reason="tool_use", time=t + 1)], t + 1, model="gpt-4.1")
    add_message(conn, f"{sid}-t1", sid, "tool", [
        part("tool_result", tool_call_id=f"{sid}-c1", name="", content="2 failed\n\nExit code 2",
             metadata=json.dumps({"start_time": 1000, "end_time": 1500}), is_error=False),
        part("tool_result", tool_call_id=f"{sid}-c2", name="", content="readme text", metadata="", is_error=False),
        part("finish", reason="stop", time=t + 2)], t + 2)
    add_message(conn, f"{sid}-a2", sid, "assistant", [part("text", text="Two tests fail."),
                                                    part("finish", reason="end_turn", time=t + 3)], t + 3,
                model="gpt-4.1")


def test_a_made_up_conversation(tmp_path):
    conn = make_db(tmp_path / "proj" / ".opencode" / "opencode.db")
    conversation(conn)
    db = tmp_path / "a.db"
    imp(db, tmp_path / "proj")
    got = rows(db, "SELECT message_uuid, parent_message_uuid, role, native_role, has_thinking, tool_call_count, "
                   "tool_call_id, exit_code, duration_ms, model, stop_reason FROM messages ORDER BY seq, message_uuid")
    assert got == [
        ("s-1-u1", None, "user", "user", 0, 0, None, None, None, None, None),
        ("s-1-a1", "s-1-u1", "assistant", "assistant", 1, 2, None, None, None, "gpt-4.1", "tool_use"),
        ("s-1-t1:s-1-c1", "s-1-a1", "toolResult", "tool", 0, 0, "s-1-c1", 2, 500, None, None),
        ("s-1-t1:s-1-c2", "s-1-t1:s-1-c1", "toolResult", "tool", 0, 0, "s-1-c2", None, None, None, None),
        ("s-1-a2", "s-1-t1:s-1-c2", "assistant", "assistant", 0, 0, None, None, None, "gpt-4.1", "end_turn"),
    ]
    assert rows(db, "SELECT call_id, tool_name, command, exit_code, result_message_id IS NOT NULL FROM tool_calls "
                    "ORDER BY call_id") == [("s-1-c1", "bash", "make test", 2, 1), ("s-1-c2", "view", None, None, 1)]
    assert rows(db, "SELECT title, input_tokens, output_tokens, total_tokens, cost_usd, leaf_entry_id, cwd "
                    "FROM sessions") == [("Fix the build", 1000, 200, 1200, 0.5, "s-1-a2", str(tmp_path / "proj"))]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == 5
    assert_vocabulary(db, "crush", usage=False, shell_exit_codes=True, tool_results=True)


def test_a_grown_database_reads_only_what_is_new(tmp_path):
    conn = make_db(tmp_path / "proj" / ".opencode" / "opencode.db")
    conversation(conn)
    db = tmp_path / "a.db"
    first = imp(db, tmp_path / "proj")
    assert first.events_read == 4 and scalar(db, "SELECT COUNT(*) FROM messages") == 5
    # a new prompt and answer: read alone, chained to the former tail
    add_message(conn, "s-1-u2", "s-1", "user", [part("text", text="Fix them")], T0 + 10)
    add_message(conn, "s-1-a3", "s-1", "assistant", [part("text", text="Done.")], T0 + 11, model="gpt-4.1")
    conn.execute("UPDATE sessions SET prompt_tokens = 3000, cost = 0.75 WHERE id = 's-1'")
    second = imp(db, tmp_path / "proj")
    assert second.events_read == 2 and second.messages_added == 2
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 7
    assert rows(db, "SELECT parent_message_uuid FROM messages WHERE message_uuid = 's-1-u2'") == [("s-1-a2",)]
    assert rows(db, "SELECT leaf_entry_id, input_tokens, cost_usd, message_count FROM sessions") == \
        [("s-1-a3", 3000, 0.75, 7)]
    # a message rewritten in place (a streamed answer finishing): read again alone, replaced, not doubled
    conn.execute("UPDATE messages SET parts = ?, updated_at = ? WHERE id = 's-1-a3'",
                 (json.dumps([part("text", text="Done, all green."), part("finish", reason="end_turn", time=1)]),
                  T0 + 12))
    third = imp(db, tmp_path / "proj")
    assert third.events_read == 1 and third.messages_added == 0
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 7
    assert scalar(db, "SELECT text_preview FROM messages WHERE message_uuid = 's-1-a3'") == "Done, all green."
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == 7
    assert imp(db, tmp_path / "proj").files_imported == 0  # unchanged: the container is not opened


def test_bad_parts_unknown_roles_and_part_types_are_kept(tmp_path):
    conn = make_db(tmp_path / "proj" / ".opencode" / "opencode.db")
    conversation(conn)
    add_message(conn, "s-1-x", "s-1", "assistant", '[{"type":"text","data":{"text":"cut of', T0 + 20)
    add_message(conn, "s-1-y", "s-1", "narrator", [part("text", text="an aside")], T0 + 21)
    add_message(conn, "s-1-z", "s-1", "assistant", [part("hologram", beam=1), part("text", text="still here")],
                T0 + 22)
    db = tmp_path / "a.db"
    report = imp(db, tmp_path / "proj")
    assert report.bad_lines == 1
    assert rows(db, "SELECT entry_uuid, custom_type FROM entries ORDER BY entry_uuid") == \
        [("s-1-x", "bad_parts"), ("s-1-y", "unknown")]
    # the made-up role stays in entry_type, for doctor to list (docs/sources.md, "Unknown records")
    assert rows(db, "SELECT entry_type FROM entries WHERE custom_type = 'unknown'") == [("message.narrator",)]
    blocks = json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE message_uuid = 's-1-z'"))
    assert blocks == [{"type": "hologram", "beam": 1}, {"type": "text", "text": "still here"}]
    assert any("does not know" in w for w in report.warnings)
    # the raw row is kept for every one of them
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE raw_json IS NULL") == 0


def test_crush_layout_sub_agents_summaries_and_placeholder_titles(tmp_path):
    conn = make_db(tmp_path / "proj" / ".crush" / "crush.db", crush=True)
    conversation(conn, "main")
    add_session(conn, "main-a1$$main-c1", title="New Agent Session", parent="main", tokens=(10, 5), cost=0.01)
    add_message(conn, "k-u", "main-a1$$main-c1", "user", [part("text", text="look around")], T0 + 1,
                provider="openai")
    add_message(conn, "k-a", "main-a1$$main-c1", "assistant", [part("reasoning", thinking="hm", signature="sig"),
                                                      part("text", text="found it")], T0 + 2, model="claude",
                provider="anthropic")
    add_message(conn, "main-sum", "main", "assistant", [part("text", text="Summary of the work")], T0 + 30,
                model="claude", is_summary_message=1)
    db = tmp_path / "a.db"
    imp(db, tmp_path / "proj")
    assert rows(db, "SELECT session_uuid, session_type, parent_session_uuid, parent_call_id, title FROM sessions "
                    "ORDER BY session_uuid") == [("main", "normal", None, None, "Fix the build"),
                                                 ("main-a1$$main-c1", "subagent", "main", "main-c1", None)]
    assert C.spawning_call("call_1") == "call_1" and C.spawning_call("title-abc") is None
    assert rows(db, "SELECT role, native_role, is_context FROM messages WHERE message_uuid = 'main-sum'") == \
        [("system", "summary", 1)]
    assert json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE message_uuid = 'k-a'"))[0] == \
        {"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"}
    assert rows(db, "SELECT provider, model FROM messages WHERE message_uuid = 'k-a'") == [("anthropic", "claude")]
    assert_vocabulary(db, "crush", usage=False, shell_exit_codes=True, tool_results=True)


def test_other_databases_are_not_claimed(tmp_path):
    # sst/opencode's schema (singular tables, drizzle): neither in a folder nor named directly
    other = tmp_path / "share" / "opencode" / "opencode.db"
    other.parent.mkdir(parents=True)
    conn = sqlite3.connect(other)
    conn.executescript("CREATE TABLE `session` (`id` text PRIMARY KEY, `title` text);"
                       "CREATE TABLE `message` (`id` text PRIMARY KEY, `session_id` text, `data` text);"
                       "CREATE TABLE `part` (`id` text PRIMARY KEY, `message_id` text, `data` text);")
    conn.close()
    assert not C.SOURCE.claims_file("opencode.db", other.read_bytes()[:65536])
    out = Discovery()
    assert not C.SOURCE.find(FileSystem(), str(other.parent), Scope("s"), out)
    # a project's .opencode/ holding a database of another schema: one clear failure, nothing archived
    odd = tmp_path / "proj" / ".opencode" / "opencode.db"
    odd.parent.mkdir(parents=True)
    conn = sqlite3.connect(odd)
    conn.executescript("CREATE TABLE notes (id TEXT);")
    conn.close()
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "proj")
    assert report.files_failed == 1 and "not a crush transcript" in report.failures[0][1]
    # a JSONL transcript is not claimed by this kind
    assert not any(isinstance(s, C.CrushSource) and s.claims_file("x.jsonl", b'{"type":"session"}\n')
                   for s in all_sources())


def _read_only(paths, on: bool) -> None:
    """Make ``paths`` read-only (or writable again) for whoever runs the test: the mode bits, and
    for root, who writes through them, the immutable attribute (chattr)."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if root and not on:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)
    for p in paths:
        if on:
            p.chmod(0o555 if p.is_dir() else 0o444)
        elif p.is_dir():
            p.chmod(0o755)
    if root and on:
        got = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
        if got.returncode != 0:
            pytest.fail(f"root cannot make a folder read-only here (chattr: {got.stderr.strip()})")


def test_a_read_only_folder_is_read_from_a_private_copy(tmp_path):
    conn = make_db(tmp_path / "proj" / ".opencode" / "opencode.db")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conversation(conn)
    folder = tmp_path / "proj" / ".opencode"
    # the set as a repository holds it: the database, its -wal (rows only there), no -shm, read-only
    keep = tmp_path / "ro" / "proj" / ".opencode"
    keep.mkdir(parents=True)
    for name in ("opencode.db", "opencode.db-wal"):
        shutil.copyfile(folder / name, keep / name)
    conn.close()
    assert (keep / "opencode.db-wal").stat().st_size > 0
    locked = [keep / "opencode.db", keep / "opencode.db-wal", keep]
    _read_only(locked, True)
    try:
        db = tmp_path / "a.db"
        imp(db, tmp_path / "ro" / "proj")
        assert scalar(db, "SELECT COUNT(*) FROM messages") == 5
        assert sorted(p.name for p in keep.iterdir()) == ["opencode.db", "opencode.db-wal"]
    finally:
        _read_only(locked, False)


def test_default_place_is_crushs_projects_registry(tmp_path):
    home = tmp_path / "home" / ".local" / "share" / "crush"
    home.mkdir(parents=True)
    conn = make_db(tmp_path / "work" / "app" / ".crush" / "crush.db", crush=True)
    conversation(conn)
    conn.close()
    (home / "projects.json").write_text(json.dumps({"projects": [
        {"path": str(tmp_path / "work" / "app"), "data_dir": ".crush", "last_accessed": "2025-08-01T00:00:00Z"},
        {"path": str(tmp_path / "gone"), "data_dir": ".crush"}]}))
    out = Discovery()
    assert C.SOURCE.find(FileSystem(), str(home), Scope("s"), out)
    assert [u.key for u in out.units] == [str(tmp_path / "work" / "app" / ".crush" / "crush.db")]
    assert C.SOURCE.candidates() == ["~/.local/share/crush"]


# ---------------------------------------------------------------------------
# Over SSH, and the explorer


def test_import_over_ssh_equals_a_local_import(tmp_path, samples):
    from sshd import SSHServer, require_sshd
    from test_ssh import import_config, write_config

    require_sshd()
    made = tmp_path / "made"
    conn = make_db(made / ".crush" / "crush.db", crush=True)
    conversation(conn)
    conn.close()
    server = SSHServer(tmp_path / "sshd").start()
    try:
        paths = [str(samples / "WismutHansen__lst"), str(made)]
        config = write_config(tmp_path, server, [
            {"name": "box", "host": "127.0.0.1", "port": server.port, "user": server.user,
             "identity_file": str(server.user_key), "paths": paths}])
        first = import_config(config)
        assert first.ok, [s.error for s in first.servers]
        assert first.servers[0].where.startswith("ssh")
        second = import_config(config)
        assert second.ok and second.totals().files_imported == 0
    finally:
        server.stop()
    local = tmp_path / "local.db"
    imp(local, *paths, server="box")
    got, want = dump(tmp_path / "ssh.db"), dump(local)
    assert got["messages"] and got == want
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM sessions") == 2 + 1


def test_the_conversation_page_renders_a_crush_session(tmp_path):
    from datasette.app import Datasette
    import asyncio

    from importer.snapshot import export_snapshot
    from datasette_agentbase.serve import load_metadata

    conn = make_db(tmp_path / "proj" / ".opencode" / "opencode.db")
    conversation(conn)
    conn.close()
    db = tmp_path / "t.db"
    imp(db, tmp_path / "proj")
    store = open_store(f"sqlite:///{db}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db")
    finally:
        store.close()
    snap = tmp_path / "snapshot.db"
    assert sqlite3.connect(snap).execute("SELECT COUNT(*) FROM crush_sessions").fetchone()[0] == 1
    ds = Datasette([str(snap)], metadata=load_metadata(snap), template_dir=str(REPO_ROOT / "templates"))
    asyncio.run(ds.invoke_startup())
    sid = sqlite3.connect(snap).execute("SELECT id FROM sessions WHERE session_uuid = 's-1'").fetchone()[0]
    page = asyncio.run(ds.client.get(f"/-/agentbase/session/{sid}"))
    assert page.status_code == 200
    html = page.text
    assert "Please run the tests" in html and "Two tests fail." in html
    assert "make test" in html and "2 failed" in html


def test_doctor_lists_no_version_as_the_database_holds_none(samples, imported, tmp_path):
    import doctor_check as dc

    conn = sqlite3.connect(f"file:{sample_db(samples)}?mode=ro", uri=True)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
    conn.close()
    assert "version" not in columns  # the oracle: no version in the sessions table
    assert dc.doctor_versions(tmp_path / "home", C.KIND, imported) == set()
