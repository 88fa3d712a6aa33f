"""mini-OpenClaw (importer/sources/mini_openclaw.py): the real samples in
../shared/other-samples/mini-openclaw, and made-up files (tests/mini_openclaw_fixtures.py)
for every variant and trap of FORMAT-OTHERS.md section 1.

Expected figures are established independently of the importer: ``count_independently``
below reads the JSON with the plain json module following the issue's counting rules
(it shares no code with the importer), and the constants in SAMPLE_COUNTS were counted by
hand. The samples are real people's data: assertions on them compare counts, ids and
booleans only, never their text.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
import mini_openclaw_fixtures as F  # noqa: E402
from transcripts import do_import, dump, dump_store, rows, scalar  # noqa: E402

from importer.pipeline import run_import  # noqa: E402
from importer.sources import Scope, discover  # noqa: E402
from importer.sources import mini_openclaw as M  # noqa: E402
from importer.sources.base import Discovery  # noqa: E402
from importer.sources.fs import LOCAL  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT.parent / "shared" / "other-samples" / "mini-openclaw"
KIND = "mini-openclaw"


def samples() -> Path:
    if not SAMPLES.is_dir():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"mini-OpenClaw samples missing under CI: {SAMPLES}")
        pytest.skip(f"no mini-OpenClaw samples at {SAMPLES}")
    return SAMPLES


# -- an independent counter ------------------------------------------------------------------
# Written from the issue's counting rules only: a session is a file of sessions/ holding a list,
# or an object with a "messages" list; archives sessions/archive/<sid>_<ts>.json are merged into
# session <sid> (one whose session file is gone is a session of its own); roles are the raw
# roles ("role", else LangChain's "type" with human/ai as user/assistant); tool calls are the
# tool_calls entries; shell calls are those of "terminal". The importer adds one toolResult
# message per canonical {tool, input, output} entry with an output: counted here as "added".


def _archive_messages(doc):
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return doc["messages"]
    return []


def _count(messages) -> dict:
    roles: Counter = Counter()
    calls = shell = added = 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if not isinstance(role, str):
            role = {"human": "user", "ai": "assistant"}.get(m.get("type"), m.get("type"))
        roles[role] += 1
        for c in m.get("tool_calls") or []:
            calls += 1
            name = c.get("tool", c.get("name"))
            shell += name == "terminal"
            added += "tool" in c and c.get("output") is not None
    return {"roles": dict(roles), "tool_calls": calls, "shell": shell, "added": added}


def count_independently(root: Path) -> dict[str, dict | None]:
    """Per session file (path relative to ``root``; an orphan archive group by its oldest
    archive): its counts, None when it is not valid JSON, "ignored" when it is no session."""
    out: dict[str, dict | None] = {}
    for sessions in sorted(root.glob("**/backend/sessions")):
        archives: dict[str, list] = {}
        for a in sorted((sessions / "archive").glob("*.json")):
            sid, _, ts = a.stem.rpartition("_")
            archives.setdefault(sid, []).append((int(ts), a))
        for f in sorted(sessions.glob("*.json")):
            rel = str(f.relative_to(root))
            try:
                doc = json.loads(f.read_bytes().decode("utf-8"))
            except ValueError:
                out[rel] = None
                continue
            msgs = doc if isinstance(doc, list) else doc.get("messages") if isinstance(doc, dict) else None
            if not isinstance(msgs, list) or (isinstance(doc, list) and doc and not any(
                    isinstance(m, dict) and ("role" in m or "type" in m) for m in doc)):
                out[rel] = "ignored"
                continue
            merged = []
            for _ts, a in sorted(archives.pop(f.stem, [])):
                merged.extend(_archive_messages(json.loads(a.read_bytes().decode("utf-8"))))
            out[rel] = _count(merged + msgs)
        for sid, group in archives.items():
            merged = []
            for _ts, a in sorted(group):
                merged.extend(_archive_messages(json.loads(a.read_bytes().decode("utf-8"))))
            out[str(min(group)[1].relative_to(root))] = _count(merged)
    return out


def imported_counts(db: Path, root: Path) -> dict[str, dict]:
    """The same figures read back from the store, per unit (parsed_files.file_path)."""
    out = {}
    for (path,) in rows(db, "SELECT file_path FROM parsed_files WHERE status = 'success'"):
        # the raw roles are the rows' native_role (docs/vocabulary.md); the importer's added results are
        # native toolResult rows
        roles = dict(rows(db, "SELECT m.native_role, COUNT(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
                              "WHERE s.file_path = ? AND m.native_role <> 'toolResult' GROUP BY m.native_role", (path,)))
        calls, shell = rows(db, "SELECT COUNT(*), COALESCE(SUM(t.tool_name = 'terminal'), 0) FROM tool_calls t "
                                "JOIN sessions s ON s.id = t.session_id WHERE s.file_path = ?", (path,))[0]
        added = scalar(db, "SELECT COUNT(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
                           "WHERE s.file_path = ? AND m.native_role = 'toolResult'", (path,))
        out[str(Path(path).relative_to(root))] = {"roles": roles, "tool_calls": calls, "shell": shell,
                                                  "added": added}
    return out


# -- the real samples -------------------------------------------------------------------------

MA = "wei-boundless__Mythical-Age/backend/sessions/"
TM = "SuKaa233__TryMyMiniClaw/backend/sessions/"
WC = "wangchengln__-_-agent-/backend/sessions/"
# Counted by hand, once, from a listing of each file's structure (roles, tool_calls entries and
# their tool names, whether an "output" is present, the first line of each output classified by
# eye: a cross mark, "Error...", "<tool> failed: ..."), before the importer read them.
# errors: calls whose output says they failed.
SAMPLE_COUNTS = {
    WC + "session-8678a6987371.json": {"roles": {"user": 2, "assistant": 12}, "tool_calls": 10, "shell": 2,
                                       "added": 10, "errors": 2},
    TM + "session_1773821099035.json": {"roles": {"user": 3, "assistant": 7, "tool": 4}, "tool_calls": 4,
                                        "shell": 1, "added": 0, "errors": 1},
    TM + "ont_1773974115955.json": {"roles": {"user": 1, "assistant": 2, "tool": 1}, "tool_calls": 1, "shell": 0,
                                    "added": 0, "errors": 0},
    # with its archive (2 user + 2 assistant, 2 calls) merged in
    MA + "084c0a5daa2449f39d10ff62a0c332f7.json": {"roles": {"user": 3, "assistant": 3}, "tool_calls": 3,
                                                   "shell": 0, "added": 3, "errors": 0},
    MA + "0bb8f89f302644519770b55cc64ab9a1.json": {"roles": {}, "tool_calls": 0, "shell": 0, "added": 0,
                                                   "errors": 0},
    MA + "3acbc2be79044c3aa6b73f41fa241a94.json": {"roles": {"user": 3, "assistant": 3}, "tool_calls": 3,
                                                   "shell": 0, "added": 3, "errors": 0},
    MA + "6ecce49c0fd6440ca8f45a4fe713679e.json": {"roles": {"user": 3, "assistant": 3}, "tool_calls": 15,
                                                   "shell": 0, "added": 15, "errors": 9},
}
TRUNCATED = MA + "7fca357cd6de400abba193fb281ea57d.json"
SAMPLE_TOTALS = {"sessions": 7, "messages_by_role": {"user": 15, "assistant": 30, "toolResult": 36},
                 "messages_by_native_role": {"user": 15, "assistant": 30, "tool": 5, "toolResult": 31},
                 "tool_calls": 36, "shell_calls": 3}


def _without_errors(counts: dict) -> dict:
    return {k: {f: v for f, v in c.items() if f != "errors"} for k, c in counts.items()}


def test_samples_exact_per_file_counts(tmp_path):
    root = samples()
    independent = count_independently(root)
    assert independent.pop(TRUNCATED) is None
    assert independent == _without_errors(SAMPLE_COUNTS), "the hand counts and the independent counter disagree"
    db = tmp_path / "a.db"
    report = do_import(db, root, server="samples")
    assert (report.files_seen, report.files_imported, report.files_failed, report.files_ignored) == (8, 7, 1, 0)
    got = imported_counts(db, root)
    assert got == independent, "per-file counts differ from the independent counter"
    # the truncated file: a clear per-file error, naming it, saying nothing of its content
    status, message = rows(db, "SELECT status, error_message FROM parsed_files WHERE file_path LIKE ?",
                           ("%" + TRUNCATED,))[0]
    assert status == "failed" and "half-written" in message and message.count("\n") == 0
    assert len(message) < 400
    # errors guessed from the outputs, per file; everything else unknown (no exit code stored)
    for rel, want in SAMPLE_COUNTS.items():
        errors = scalar(db, "SELECT COUNT(*) FROM tool_calls t JOIN sessions s ON s.id = t.session_id "
                            "WHERE s.file_path = ? AND t.is_error = 1", (str(root / rel),))
        assert errors == want["errors"], f"{rel}: {errors} calls flagged as failed"
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE exit_code IS NOT NULL") == 0
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NULL") == 0
    # agents: the app folders' names; one compaction summary (the compressed session)
    assert {a for (a,) in rows(db, "SELECT DISTINCT agent_id FROM sessions")} == {
        "wei-boundless__Mythical-Age", "SuKaa233__TryMyMiniClaw", "wangchengln__-_-agent-"}
    assert rows(db, "SELECT entry_type, is_active_path FROM entries") == [("compaction", 1)]
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE title IS NOT NULL") == 5  # the 5 object-shaped files
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    # terminal calls (shell calls) carry their command; python_repl calls run Python, not a shell: no
    # command, their code in the arguments
    assert rows(db, "SELECT tool_name, COUNT(*), COUNT(command) FROM tool_calls WHERE lower(tool_name) IN "
                    "('terminal', 'python_repl') GROUP BY tool_name ORDER BY tool_name") == [
        ("Python_REPL", 1, 0), ("python_repl", 2, 0), ("terminal", 3, 3)]
    assert sorted(sorted(json.loads(a)) for (a,) in rows(
        db, "SELECT arguments FROM tool_calls WHERE lower(tool_name) = 'python_repl'")) == [["code"], ["code"], ["query"]]
    # a rerun opens nothing but the truncated file, tried again (a failed read counts no bytes)
    again = do_import(db, root, server="samples")
    assert (again.files_unchanged, again.files_failed, again.messages_added, again.bytes_read) == (7, 1, 0, 0)


def test_samples_stats_json_by_source(tmp_path):
    root = samples()
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    proc = ic.run_cli(["import", root, "--db", db, "-q"])
    assert proc.returncode != 0  # the truncated sample is a failure the exit status reports
    proc = ic.run_cli(["stats", "--json", "--db", db])
    assert proc.returncode == 0, ic.describe(proc, "stats --json")
    mine = json.loads(proc.stdout)["by_source"][KIND]
    got = {k: mine[k] for k in SAMPLE_TOTALS}
    assert got == SAMPLE_TOTALS
    independent = [c for c in count_independently(root).values() if isinstance(c, dict)]
    raw = Counter()
    for c in independent:
        raw.update(c["roles"])
    want = dict(raw)
    want["toolResult"] = sum(c["added"] for c in independent)
    assert mine["messages_by_native_role"] == want
    # in the vocabulary: LangChain's tool messages (each answering a call) are tool results
    assert mine["messages_by_role"] == {"user": want["user"], "assistant": want["assistant"],
                                        "toolResult": want["toolResult"] + want["tool"]}
    assert mine["tool_calls"] == sum(c["tool_calls"] for c in independent)
    assert mine["shell_calls"] == sum(c["shell"] for c in independent)
    assert mine["sessions"] == len(independent)
    assert (mine["model_calls"], mine["usage"]["totalTokens"], mine["usage"]["cost_total"]) == (0, 0, 0)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    from sshd import SSHServer, require_sshd

    require_sshd()
    server = SSHServer(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()


def _ssh_config(tmp: Path, sshd, paths: list[Path]) -> Path:
    import yaml

    known = tmp / "known_hosts"
    sshd.write_known_hosts(known)
    data = {"database": f"sqlite:///{tmp / 'ssh.db'}", "known_hosts": str(known),
            "ssh_config": str(tmp / "no-ssh-config"), "connect_timeout": 5, "read_timeout": 20,
            "servers": [{"name": "mini", "host": "127.0.0.1", "port": sshd.port, "user": sshd.user,
                         "identity_file": str(sshd.user_key), "paths": [str(p) for p in paths]}]}
    path = tmp / "config.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _import_config(path: Path):
    from importer.config import load_config
    from importer.sync import import_from_config

    config = load_config(path)
    store = open_store(config.database)
    try:
        return import_from_config(store, config)
    finally:
        store.close()


def test_samples_over_ssh_equal_a_local_import(tmp_path, sshd):
    root = samples()
    report = _import_config(_ssh_config(tmp_path, sshd, [root]))
    server = report.servers[0]
    assert server.error is None and server.where.startswith("ssh") and server.wire_bytes > 0
    assert (server.report.files_imported, server.report.files_failed) == (7, 1)
    local = tmp_path / "local.db"
    do_import(local, root, server="mini")
    got, want = dump(tmp_path / "ssh.db"), dump(local)
    same = got == want
    assert got["messages"] and same, "SSH and local imports differ: " + ", ".join(
        f"{t}: {len(got[t])} vs {len(want[t])} rows" for t in got if got[t] != want[t])
    # a rerun transfers only the listings (and the truncated file, tried again)
    again = _import_config(_ssh_config(tmp_path, sshd, [root])).servers[0]
    assert (again.report.files_unchanged, again.report.files_failed, again.report.messages_added) == (7, 1, 0)
    assert again.wire_bytes < server.wire_bytes


# -- variants (made-up files) ----------------------------------------------------------------


def _one(db: Path, sql: str, params=()):
    found = rows(db, sql, params)
    assert len(found) == 1, f"{len(found)} rows"
    return found[0]


def test_canonical_object_tool_calls_and_results(tmp_path):
    app = tmp_path / "course"
    path = F.canonical(app)
    db = tmp_path / "a.db"
    report = do_import(db, path.parent)
    assert report.files_imported == 1 and report.files_failed == 0
    session = _one(db, "SELECT session_uuid, agent_id, source, title, started_at, first_message_at, "
                       "last_message_at, message_count, times_approximate, header_json FROM sessions")
    assert session[:4] == ("session-0a1b2c3d4e5f", "course", KIND, "示例会话")
    assert session[4] == session[5] == "2026-03-31 23:33:20.250" and session[6] == "2026-03-31 23:48:20.500"
    assert session[7] == 8 + 5 and session[8] == 1  # 8 messages, 5 results
    assert json.loads(session[9]) == {"title": "示例会话", "created_at": F.CREATED}
    # 5 calls: terminal (Windows path, CRLF output), python_repl, read_file (error), terminal (timeout),
    # read_file with a JSON input holding a Windows path
    calls = rows(db, "SELECT t.tool_name, t.command, t.arguments, t.is_error, t.exit_code, t.result_preview, "
                     "r.role, r.content_blocks, t.call_id FROM tool_calls t "
                     "JOIN messages r ON r.id = t.result_message_id ORDER BY t.id")
    assert [c[0] for c in calls] == ["terminal", "python_repl", "read_file", "terminal", "read_file"]
    terminal, repl, missing, timeout, windows = calls
    assert terminal[1] == "dir C:\\Users\\demo\\skills"
    assert json.loads(terminal[2]) == {"command": "dir C:\\Users\\demo\\skills"}
    out = F.canonical_messages()[1]["tool_calls"][0]["output"]
    assert json.loads(terminal[7]) == [{"type": "text", "text": out}] and "\r\n" in out  # CRLF kept byte for byte
    assert terminal[5] == out[:512]
    assert repl[1] is None and json.loads(repl[2]) == {"code": "print(2**10)"} and repl[3] == 0
    assert (missing[1], missing[3]) == (None, 1) and timeout[3] == 1
    assert json.loads(windows[2]) == {"path": "skills\\notes\\SKILL.md"}
    assert all(c[4] is None for c in calls) and all(c[6] == "toolResult" for c in calls)
    assert len({c[8] for c in calls}) == 5
    # unknown outcomes stay unknown: is_error 0, and raw_json says "unknown"
    outcomes = Counter(json.loads(r)["outcome"] for (r,) in rows(
        db, "SELECT raw_json FROM messages WHERE role = 'toolResult'"))
    assert outcomes == {"unknown": 3, "error": 2}
    # consecutive assistant messages kept as stored, in order, one chain
    assert [r for (r,) in rows(db, "SELECT role FROM messages WHERE role <> 'toolResult' ORDER BY seq")] == [
        "user", "assistant", "assistant", "user", "assistant", "assistant", "assistant", "assistant"]
    chain = rows(db, "SELECT message_uuid, parent_message_uuid FROM messages ORDER BY seq")
    assert chain[0][1] is None and all(chain[i][1] == chain[i - 1][0] for i in range(1, len(chain)))
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == len(chain)
    # every message rebuilds the file's: raw_json (without content and outputs) + content_blocks + results
    rebuilt = []
    for raw, blocks in rows(db, "SELECT raw_json, content_blocks FROM messages WHERE role <> 'toolResult' "
                                "ORDER BY seq"):
        m = json.loads(raw)
        text = [b["text"] for b in json.loads(blocks) if b["type"] == "text"]
        m["content"] = text[0] if text else ""
        rebuilt.append(m)
    results = iter(json.loads(b)[0]["text"] for (b,) in rows(
        db, "SELECT content_blocks FROM messages WHERE role = 'toolResult' ORDER BY seq"))
    for m in rebuilt:
        for c in m.get("tool_calls", []):
            c["output"] = next(results)
    assert rebuilt == F.canonical_messages()
    # no model calls, tokens or cost
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE call_key IS NOT NULL OR cost_usd IS NOT NULL "
                      "OR total_tokens IS NOT NULL") == 0


def test_bare_list_v1(tmp_path):
    path = F.bare_list_v1(tmp_path / "app")
    db = tmp_path / "a.db"
    do_import(db, path)
    assert _one(db, "SELECT session_uuid, title, started_at, message_count, header_json FROM sessions") == (
        "v1-session", None, None, 4, None)
    assert rows(db, "SELECT role, timestamp, time_approximate FROM messages ORDER BY seq") == [
        ("user", None, 1), ("assistant", None, 1), ("user", None, 1), ("assistant", None, 1)]


def test_langchain_list(tmp_path):
    path = F.langchain(tmp_path / "lc")
    db = tmp_path / "a.db"
    do_import(db, path.parent.parent.parent)
    assert rows(db, "SELECT role, native_role, COUNT(*) FROM messages GROUP BY 1, 2 ORDER BY 1") == [
        ("assistant", "assistant", 3), ("toolResult", "tool", 2), ("user", "user", 2)]
    calls = rows(db, "SELECT t.call_id, t.tool_name, t.command, t.is_error, r.native_role, r.tool_name, t.block_index "
                     "FROM tool_calls t LEFT JOIN messages r ON r.id = t.result_message_id ORDER BY t.id")
    assert calls == [
        ("call_00_aaaaaaaa", "terminal", "echo one\necho two", 0, "tool", "terminal", 0),
        ("call_01_bbbbbbbb", "Python_REPL", None, 1, "tool", "Python_REPL", 1),  # Python, not a shell
    ]
    # the id in the file name dates the session (approximately): 2026-03-31 23:33:20.123 UTC
    assert scalar(db, "SELECT started_at FROM sessions") == "2026-03-31 23:33:20.123"
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE timestamp = '2026-03-31 23:33:20.123' "
                      "AND time_approximate = 1") == 7


def test_a_langchain_result_written_after_its_call_is_paired_on_the_next_run(tmp_path):
    path = F.langchain(tmp_path / "lc")
    full = json.loads(path.read_text())
    F.write(path, full[:2])  # the calls, not yet their results
    db = tmp_path / "a.db"
    do_import(db, path)
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NULL") == 2
    F.write(path, full)
    assert do_import(db, path).messages_added == 5
    paired = [("call_00_aaaaaaaa", "tool", 0), ("call_01_bbbbbbbb", "tool", 1)]
    sql = ("SELECT t.call_id, r.native_role, t.is_error FROM tool_calls t JOIN messages r ON r.id = t.result_message_id "
           "ORDER BY t.id")
    assert rows(db, sql) == paired
    # the calls' message changes (a field of its own), its results do not: paired again from the store
    full[1]["response_metadata"] = {"finish_reason": "tool_calls"}
    F.write(path, full)
    assert do_import(db, path).messages_added == 0
    assert rows(db, sql) == paired and scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 1


def test_per_message_local_times_in_the_servers_zone(tmp_path):
    app = tmp_path / "app"
    F.timestamped(app)
    F.plan_object(app)
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        found = discover([str(app)], server="s1", timezone="Asia/Shanghai")
        run_import(store, [], sources=found)
    finally:
        store.close()
    db = tmp_path / "a.db"
    assert rows(db, "SELECT m.timestamp, m.time_approximate, m.role FROM messages m JOIN sessions s "
                    "ON s.id = m.session_id WHERE s.session_uuid = 'session_20260401_093000' ORDER BY m.seq") == [
        ("2026-04-01 01:30:00.000", 0, "user"), ("2026-04-01 01:30:05.250", 0, "assistant"),
        ("2026-04-01 01:30:05.250", 0, "toolResult"), ("2026-04-01 01:31:00.000", 0, "user")]
    assert rows(db, "SELECT session_uuid, title, times_approximate, started_at, header_json FROM sessions "
                    "ORDER BY session_uuid") == [
        ("plan-session", "Trip", 0, None, json.dumps({"title": "Trip", "plan": {"steps": ["pack", "go"], "done": 0}},
                                                     separators=(",", ":"))),
        ("session_20260401_093000", None, 0, "2026-04-01 01:30:00.000", None)]  # the name's local time


def test_times_in_this_machines_zone_by_default(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert M.parse_time("2026-07-01T08:00:00", None) == "2026-07-01 12:00:00.000"
        assert M.parse_time("2026-07-01T08:00:00", M._zone("Asia/Shanghai")) == "2026-07-01 00:00:00.000"
        assert M.parse_time("2026-07-01T08:00:00+02:00", None) == "2026-07-01 06:00:00.000"
        assert M.parse_time(1_775_000_000.25, None) == "2026-03-31 23:33:20.250"
        assert M.parse_time(1_775_000_000_250, None) == "2026-03-31 23:33:20.250"
        assert M.parse_time("not a time", None) is None and M.parse_time(True, None) is None
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_ids_fields_and_fork_fields(tmp_path):
    path = F.with_ids(tmp_path / "fork")
    db = tmp_path / "a.db"
    do_import(db, path)
    sid = "0123456789abcdef0123456789abcdef"
    assert scalar(db, "SELECT session_uuid FROM sessions") == sid
    header = json.loads(scalar(db, "SELECT header_json FROM sessions"))
    assert header == {"id": sid, "title": "New Session", "created_at": F.CREATED, "runtime_state": {"mode": "chat"}}
    assert scalar(db, "SELECT title FROM sessions") is None  # a placeholder, not a title
    raw = json.loads(scalar(db, "SELECT raw_json FROM messages WHERE role = 'assistant'"))
    assert raw == {"role": "assistant", "answer_channel": "final", "answer_source": "model",
                   "answer_persist_policy": "always", "answer_finalization_policy": "stream"}
    # an empty compressed_context is no summary
    assert scalar(db, "SELECT COUNT(*) FROM entries") == 0


def test_index_layout_files_named_after_titles(tmp_path):
    app = tmp_path / "idx"
    files = F.index_layout(app)
    db = tmp_path / "a.db"
    report = do_import(db, app)
    assert (report.files_imported, report.files_ignored) == (2, 1)
    assert rows(db, "SELECT session_uuid, title, started_at, times_approximate FROM sessions ORDER BY 1") == [
        ("idx-0000", "Weather in Paris", M.parse_time("2026-04-03T08:00:00", None), 0),
        ("idx-0001", "读书笔记", M.parse_time("2026-04-04T08:00:00", None), 0)]
    status, reason = _one(db, "SELECT status, error_message FROM parsed_files WHERE file_path LIKE '%sessions.json'")
    assert status == "ignored" and "index" in reason
    # the title changes and the file is renamed: same session, nothing doubled
    doc = json.loads(files[0].read_text())
    doc["title"] = "Paris, renamed"
    doc["messages"].append({"role": "user", "content": "and tomorrow?", "timestamp": "2026-04-03T08:06:00"})
    files[0].unlink()
    F.write(files[0].with_name("Paris, renamed.json"), doc)
    again = do_import(db, app)
    assert again.messages_added == 1
    assert rows(db, "SELECT session_uuid, title, message_count FROM sessions ORDER BY 1") == [
        ("idx-0000", "Paris, renamed", 3), ("idx-0001", "读书笔记", 2)]


# -- compression -------------------------------------------------------------------------------


def _messages(db: Path, sid: str) -> list[tuple]:
    return rows(db, "SELECT m.message_uuid, m.parent_message_uuid, m.role, m.content_blocks FROM messages m "
                    "JOIN sessions s ON s.id = m.session_id WHERE s.session_uuid = ? ORDER BY m.seq, m.id", (sid,))


@pytest.mark.parametrize("form", ["dict", "list"])
def test_compression_moves_messages_without_doubling_them(tmp_path, form):
    app, sid = tmp_path / "app", "growing"
    history = F.long_history(5)  # 15 messages, 5 terminal calls: 20 rows
    F.canonical(app, sid, history)
    db = tmp_path / "a.db"
    assert do_import(db, app).messages_added == 20
    before = _messages(db, sid)
    # compressed: the first 6 messages (and their 2 results) move to the archive
    F.compress(app, sid, history, 6, 1_775_000_600, form=form)
    second = do_import(db, app)
    assert second.files_imported == 1 and second.messages_added == 0  # the first live message: a new parent
    after = _messages(db, sid)
    assert {m[0] for m in after} == {m[0] for m in before} and len(after) == 20
    assert sorted(m[2:] for m in after) == sorted(m[2:] for m in before)
    summary = _one(db, "SELECT entry_uuid, parent_uuid, entry_type, is_active_path, text_preview FROM entries")
    assert summary[0] == "compressed_context" and summary[2:] == ("compaction", 1, "用户查看了几个目录。")
    archived_last = before[7][0]  # the 6th message (rows 0-7: 6 messages, 2 results): the last row moved
    assert summary[1] == archived_last
    assert [m[1] for m in after if m[0] == before[8][0]] == ["compressed_context"]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    # it grows and is compressed again (the previous summary kept, the new one appended)
    live = history[6:] + F.long_history(7)[15:]  # what the file held, and 6 new messages (2 calls)
    F.compress(app, sid, live, 6, 1_775_000_700, form="list", previous_summary="用户查看了几个目录。")
    third = do_import(db, app)
    assert third.files_imported == 1 and third.messages_added == 8  # 6 messages + 2 results
    final = _messages(db, sid)
    assert {m[0] for m in before} <= {m[0] for m in final} and len(final) == 28
    assert scalar(db, "SELECT COUNT(*) FROM entries") == 1
    assert "---" in scalar(db, "SELECT raw_json FROM entries")
    # the same final files imported afresh: the same ids, parents and content
    fresh = tmp_path / "fresh.db"
    do_import(fresh, app)
    assert _messages(fresh, sid) == final
    assert rows(fresh, "SELECT entry_uuid, parent_uuid, raw_json FROM entries") == rows(
        db, "SELECT entry_uuid, parent_uuid, raw_json FROM entries")


def test_a_file_caught_mid_compression_is_not_doubled(tmp_path):
    app, sid = tmp_path / "app", "midway"
    history = F.long_history(4)
    F.canonical(app, sid, history)
    db = tmp_path / "a.db"
    do_import(db, app)
    count = len(_messages(db, sid))
    # the archive is written, the session file not yet rewritten: it still starts with those messages
    F.write(F.sessions_dir(app) / "archive" / f"{sid}_1775000800.json", history[:6])
    report = do_import(db, app)
    assert report.messages_added == 0 and len(_messages(db, sid)) == count
    assert any("mid-compression" in w for w in report.warnings)
    F.compress(app, sid, history, 6, 1_775_000_800, form="list")
    assert do_import(db, app).messages_added == 0 and len(_messages(db, sid)) == count


def test_archive_whose_session_file_is_gone(tmp_path):
    app, sid = tmp_path / "app", "orphaned"
    history = F.long_history(3)
    session, archive = F.compress(app, sid, history, 6, 1_775_000_900)
    db = tmp_path / "a.db"
    do_import(db, app)
    ids = {m[0] for m in _messages(db, sid)}
    session.unlink()
    report = do_import(db, app)
    assert report.files_imported == 1 and report.messages_added == 0
    assert {m[0] for m in _messages(db, sid)} == ids
    # imported alone, the archive is a session of its own, with the same message ids
    alone = tmp_path / "alone.db"
    do_import(alone, app)
    assert _one(alone, "SELECT session_uuid, session_type, file_path FROM sessions") == (sid, "archive", str(archive))
    assert {m[0] for m in _messages(alone, sid)} <= ids and len(_messages(alone, sid)) == 8


# -- traps ---------------------------------------------------------------------------------------


def test_truncated_file_is_a_per_file_error_retried_next_run(tmp_path):
    app = tmp_path / "app"
    path = F.truncated(app)
    F.bare_list_v1(app)
    db = tmp_path / "a.db"
    first = do_import(db, app)
    assert (first.files_imported, first.files_failed) == (1, 1)
    (key, message), = first.failures
    assert key == str(path) and "half-written" in message and "skills" not in message
    assert scalar(db, "SELECT status FROM parsed_files WHERE file_path = ?", (str(path),)) == "failed"
    again = do_import(db, app)
    assert (again.files_unchanged, again.files_failed) == (1, 1)  # tried again, unchanged or not
    F.canonical(app, "half-written")  # the write completes
    done = do_import(db, app)
    assert (done.files_imported, done.files_failed, done.messages_added) == (1, 0, 13)


def test_a_truncated_archive_fails_its_session_until_complete(tmp_path):
    app, sid = tmp_path / "app", "cut-archive"
    _session, archive = F.compress(app, sid, F.long_history(3), 6, 1_775_001_000)
    full = archive.read_bytes()
    archive.write_bytes(full[:-40])
    db = tmp_path / "a.db"
    report = do_import(db, app)
    assert report.files_failed == 1 and archive.name in report.failures[0][1]
    archive.write_bytes(full)
    assert do_import(db, app).messages_added == 12


def test_empty_sessions(tmp_path):
    app = tmp_path / "app"
    F.empty(app)
    F.write(F.sessions_dir(app) / "empty-list.json", [])
    db = tmp_path / "a.db"
    report = do_import(db, app)
    assert (report.files_imported, report.files_ignored) == (2, 0)
    # "New Chat" is the title a session has until the model names it: no title (header_json keeps it)
    assert rows(db, "SELECT session_uuid, message_count, title FROM sessions ORDER BY 1") == [
        ("empty-list", 0, None), ("empty-session", 0, None)]
    assert json.loads(scalar(db, "SELECT header_json FROM sessions WHERE session_uuid = 'empty-session'"))[
        "title"] == "New Chat"


def test_duplicate_user_messages_are_both_kept(tmp_path):
    path = F.duplicates(tmp_path / "app")
    db = tmp_path / "a.db"
    do_import(db, path)
    msgs = rows(db, "SELECT message_uuid, role FROM messages ORDER BY seq")
    assert [r for _, r in msgs] == ["user", "user", "assistant", "user", "assistant"]
    assert len({i for i, _ in msgs}) == 5
    # a rerun of the rewritten file (one more message) keeps them apart and adds one
    doc = json.loads(path.read_text())
    doc["messages"].append({"role": "user", "content": "再试一次"})
    F.write(path, doc)
    assert do_import(db, path).messages_added == 1
    assert scalar(db, "SELECT COUNT(DISTINCT message_uuid) FROM messages WHERE role = 'user'") == 4


def test_windows_crlf_file(tmp_path):
    """A file written with CRLF line ends (text mode on Windows), outputs with CRLF and C:\\ paths."""
    d = F.sessions_dir(tmp_path / "app")
    doc = {"title": "win", "created_at": F.CREATED, "updated_at": F.UPDATED, "messages": F.canonical_messages()}
    F.write(d / "crlf.json", doc, crlf=True)
    F.write(d / "lf.json", doc)
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "app")
    assert report.files_imported == 2
    a, b = (rows(db, "SELECT m.message_uuid, m.content_blocks, m.raw_json FROM messages m JOIN sessions s "
                     "ON s.id = m.session_id WHERE s.session_uuid = ? ORDER BY m.seq", (sid,))
            for sid in ("crlf", "lf"))
    assert a == b  # line ends between JSON tokens are not data; those inside strings are kept


def test_a_folder_of_list_and_dict_shaped_files(tmp_path):
    app = tmp_path / "app"
    F.canonical(app)
    F.bare_list_v1(app)
    F.langchain(app)
    db = tmp_path / "a.db"
    report = do_import(db, app)
    assert (report.files_imported, report.files_failed, report.files_ignored) == (3, 0, 0)
    assert imported_counts(db, tmp_path) == {k: v for k, v in count_independently(tmp_path).items()}


def test_json_in_sessions_that_is_no_session_is_ignored_with_a_reason(tmp_path):
    app = tmp_path / "app"
    others = F.not_sessions(app)
    F.bare_list_v1(app)
    db = tmp_path / "a.db"
    report = do_import(db, app)
    assert (report.files_imported, report.files_ignored, report.files_failed) == (1, 4, 0)
    got = dict(rows(db, "SELECT file_path, error_message FROM parsed_files WHERE status = 'ignored'"))
    assert set(got) == {str(p) for p in others}
    assert all(reason.startswith("not a mini-OpenClaw session") for reason in got.values())
    assert scalar(db, "SELECT COUNT(*) FROM sessions") == 1
    again = do_import(db, app)
    assert (again.files_unchanged, again.files_ignored, again.bytes_read) == (5, 0, 0)


# -- incremental runs ----------------------------------------------------------------------------


def _table(db: Path, table: str) -> set[tuple]:
    return set(rows(db, f"SELECT * FROM {table}"))


def test_one_new_message_adds_one_row_and_rewrites_nothing_else(tmp_path):
    apps = F.build_tree(tmp_path / "tree")
    db = tmp_path / "a.db"
    first = do_import(db, tmp_path / "tree")
    assert first.files_failed == 0
    before = {t: _table(db, t) for t in ("messages", "tool_calls", "entries", "entry_revisions", "sessions")}
    path = F.sessions_dir(apps["course"]) / "session-0a1b2c3d4e5f.json"
    doc = json.loads(path.read_text())
    doc["messages"].append({"role": "user", "content": "one more question"})
    doc["updated_at"] += 60
    F.write(path, doc)
    second = do_import(db, tmp_path / "tree")
    assert (second.messages_added, second.files_imported, second.bytes_read) == (1, 1, path.stat().st_size)
    assert second.files_unchanged == first.files_imported + first.files_ignored - 1
    after = {t: _table(db, t) for t in before}
    assert before["messages"] <= after["messages"] and len(after["messages"] - before["messages"]) == 1
    for table in ("tool_calls", "entries", "entry_revisions"):
        assert after[table] == before[table], table
    changed = before["sessions"] - after["sessions"]
    assert len(changed) == 1 and next(iter(changed))[3] == "session-0a1b2c3d4e5f"
    new, = after["messages"] - before["messages"]
    assert scalar(db, "SELECT timestamp FROM messages WHERE id = ?", (new[0],)) == M.parse_time(doc["updated_at"], None)
    # nothing changed: no unit is opened
    third = do_import(db, tmp_path / "tree")
    assert (third.files_imported, third.bytes_read, third.messages_added) == (0, 0, 0)
    assert third.files_unchanged == second.files_unchanged + 1


def test_generated_tree_in_mariadb_equals_sqlite(tmp_path, mariadb_url):
    F.build_tree(tmp_path / "tree")
    do_import(tmp_path / "a.db", tmp_path / "tree", server="s")
    store = open_store(mariadb_url)
    try:
        run_import(store, [str(tmp_path / "tree")], server="s")
    finally:
        store.close()
    assert dump_store(mariadb_url) == dump_store(f"sqlite:///{tmp_path / 'a.db'}")


def test_stats_json_on_generated_tree(tmp_path):
    F.build_tree(tmp_path / "tree")
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    proc = ic.run_cli(["import", tmp_path / "tree", "--db", db, "-q"])
    assert proc.returncode == 0, ic.describe(proc, "import")
    mine = json.loads(ic.run_cli(["stats", "--json", "--db", db]).stdout)["by_source"][KIND]
    counts = [c for c in count_independently(tmp_path / "tree").values() if isinstance(c, dict)]
    roles = Counter()
    for c in counts:
        roles.update(c["roles"])
    native = {**roles, "toolResult": sum(c["added"] for c in counts)}
    assert mine["messages_by_native_role"] == native
    assert mine["messages_by_role"] == {"user": native["user"], "assistant": native["assistant"],
                                        "toolResult": native["toolResult"] + native["tool"]}
    assert (mine["sessions"], mine["tool_calls"], mine["shell_calls"]) == (
        len(counts), sum(c["tool_calls"] for c in counts), sum(c["shell"] for c in counts))


# -- discovery -------------------------------------------------------------------------------------


def _found(paths, **kw) -> list[tuple]:
    d = discover([str(p) for p in paths], **kw)
    assert not d.errors, d.errors
    return sorted((u.source.kind, u.server, u.agent_id, Path(u.key).name) for u in d.units)


def test_paths_accepted_and_the_agent_name(tmp_path):
    app = tmp_path / "servers" / "box1"
    F.canonical(app)
    F.compress(app, "c1", F.long_history(2), 3, 1_775_000_100)
    F.bare_list_v1(tmp_path / "servers" / "box2")
    want = [(KIND, "h", "box1", "c1.json"), (KIND, "h", "box1", "session-0a1b2c3d4e5f.json")]
    sessions = app / "backend" / "sessions"
    for path in (app, app / "backend", sessions):
        assert _found([path], server="h") == want
    assert _found([app], server="h", agent="other") == [(k, s, "other", n) for k, s, _a, n in want]
    assert _found([app], server="h", agents=["box1"]) == want and _found([app], server="h", agents=["x"]) == []
    # a folder of per-server trees: no kind claims it, each subfolder is a server
    assert not M.SOURCE.find(LOCAL, str(tmp_path / "servers"), Scope("h"), Discovery())
    assert _found([tmp_path / "servers"]) == [
        (KIND, "box1", "box1", "c1.json"), (KIND, "box1", "box1", "session-0a1b2c3d4e5f.json"),
        (KIND, "box2", "box2", "v1-session.json")]
    # one file: its unit holds its archives; an archive file names its session's unit
    d = discover([str(sessions / "c1.json")], server="h")
    unit, = d.units
    assert (unit.source.kind, unit.agent_id, unit.key, len(unit.archives)) == (
        KIND, "box1", str(sessions / "c1.json"), 1)
    d = discover([str(sessions / "archive" / "c1_1775000100.json")], server="h")
    assert [u.key for u in d.units] == [str(sessions / "c1.json")]
    lone = F.bare_list_v1(tmp_path / "loose", "x")
    shutil.move(str(lone), str(tmp_path / "x.json"))
    d = discover([str(tmp_path / "x.json")], server="h")
    assert [(u.source.kind, u.agent_id) for u in d.units] == [(KIND, "mini-openclaw")]


def test_openclaw_layouts_and_other_json_folders_are_not_claimed(tmp_path):
    state = tmp_path / ".openclaw"
    for agent in ("main", "backend"):
        d = state / "agents" / agent / "sessions"
        d.mkdir(parents=True)
        (d / "5e55a0a0-0000-4000-8000-00000000000a.jsonl").write_text(
            '{"type":"session","id":"5e55a0a0-0000-4000-8000-00000000000a","version":3}\n')
        (d / "sessions.json").write_text('{"agent:main:main": {"sessionId": "x", "updatedAt": 1}}')
    for path in (state, state / "agents", state / "agents" / "backend", state / "agents" / "backend" / "sessions",
                 tmp_path):
        assert not M.SOURCE.find(LOCAL, str(path), Scope("h"), Discovery()), path
    assert {u.source.kind for u in discover([str(state)], server="h").units} == {"openclaw"}
    # JSON folders of other programs
    (tmp_path / "web" / "sessions").mkdir(parents=True)
    F.write(tmp_path / "web" / "sessions" / "a.json", {"user": 1})
    (tmp_path / "api" / "backend").mkdir(parents=True)
    for path in (tmp_path / "web", tmp_path / "web" / "sessions", tmp_path / "api", tmp_path / "api" / "backend"):
        assert not M.SOURCE.find(LOCAL, str(path), Scope("h"), Discovery()), path


def test_claims_single_files_by_name_and_first_bytes(tmp_path):
    app = tmp_path / "app"
    claims = M.SOURCE.claims_file
    for path in (F.canonical(app), F.bare_list_v1(app), F.langchain(app), F.timestamped(app), F.with_ids(app),
                 F.compress(app, "z", F.long_history(2), 3, 1_775_000_000)[1]):
        assert claims(path.name, path.read_bytes()[:65536]), path.name
    assert claims("x.json", b"\xef\xbb\xbf" + json.dumps({"title": "t", "messages": []}).encode())
    for name, head in [("x.jsonl", b'{"title": "t", "messages": []}'), ("x.json", b"[]"), ("x.json", b"[1, 2]"),
                       ("sessions.json", b'{"agent:main:main": {"sessionId": "x", "updatedAt": 1}}'),
                       ("x.json", b'{"agentType": "workflow-subagent"}'), ("x.json", b'{"rag_mode": true}')]:
        assert not claims(name, head), (name, head)


# -- pieces ----------------------------------------------------------------------------------------


def test_tool_inputs_are_parsed_never_evaluated(tmp_path):
    marker = tmp_path / "ran"
    evil = f"{{'a': __import__('os').system('touch {marker}')}}"
    assert M.parse_input(evil) == ({"input": evil}, "text") and not marker.exists()
    assert M.parse_input("{'command': 'dir C:\\\\Users'}") == ({"command": "dir C:\\Users"}, "python")
    assert M.parse_input('{"path": "C:\\\\x"}') == ({"path": "C:\\x"}, "json")
    assert M.parse_input("{'s': {1, 2}, 't': (1, b'x'), 'n': None}") == (
        {"s": [1, 2], "t": [1, "x"], "n": None}, "python")
    assert M.parse_input("['a', 'b']") == ({"input": ["a", "b"]}, "python")
    assert M.parse_input("ls -la") == ({"input": "ls -la"}, "text")
    assert M.parse_input({"q": 1}) == ({"q": 1}, "object")
    assert M.parse_input("{" * 100_000) == ({"input": "{" * 100_000}, "text")


@pytest.mark.parametrize("output, failed", [
    ("❌ Command timed out (30s limit)", True),
    ("Error: file not found", True),
    ("Traceback (most recent call last):\n  File ...", True),
    ("Read failed: no such file", True),
    ("ERROR 1045 (28000): access denied", True),
    ('{"status": "error", "message": "x"}', True),
    ('{"ok": false}', True),
    ('{"status": "success"}', False),
    ("total 0\nError: in a later line", False),
    ("no errors found", False),
    ("", False),
    ("1024\n", False),
])
def test_output_failure_is_guessed_only_where_the_output_says_so(output, failed):
    assert M.output_failed(output) is failed


def test_message_ids_survive_a_shift_and_tell_duplicates_apart():
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "c"}]

    def ids(main, archives=()):
        p = M.SessionParser(("s.json", main), [(f"s_{i}.json", a, None) for i, a in enumerate(archives)]).parse()
        return [e.entry_id for e in p.entries if e.type == "message"]

    whole = ids(msgs)
    assert len(set(whole)) == 4
    assert ids({"messages": msgs[2:], "compressed_context": "s"}, [msgs[:2]]) == whole
    assert ids({"messages": msgs[3:]}, [msgs[:1], {"messages": msgs[1:3]}]) == whole
    assert ids(msgs[:1] + [{"role": "user", "content": "a"}]) == [whole[0], whole[2]]
