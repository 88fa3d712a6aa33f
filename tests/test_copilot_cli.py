"""GitHub Copilot CLI sessions (importer/sources/copilot_cli.py, docs/copilot-cli.md).

The real sessions in ../shared/other-samples-2/copilot-cli (SOURCES.md there) are read where they
are: required under CI=true, skipped with a message otherwise. They hold real people's text:
assertions show counts and ids only. Their figures are established independently of the importer by
``oracle`` below, written from the counting rules with the plain json module (sharing no code with
the importer):

- events files: a session per file; user messages = ``user.message`` events, assistant messages =
  distinct ``assistant.message`` message ids, tool calls = distinct ``toolRequests`` call ids, shell
  calls = those of ``bash``/``powershell``; output tokens = per model the larger of the messages'
  ``outputTokens`` and the shutdown's, input = the shutdown's uncached input, cache = the shutdown's;
- history files: a session per file; messages by their chat role, tool calls = distinct
  ``tool_calls`` ids; no tokens.

Everything else runs on made-up sessions written below (never copied from the samples).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
from transcripts import do_import, dump, rows, scalar  # noqa: E402
from vocabulary_checks import assert_vocabulary  # noqa: E402

from importer.sources import Discovery, Scope, discover, kind  # noqa: E402
from importer.sources import copilot_cli as CP  # noqa: E402
from importer.sources.fs import FileSystem  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT.parent / "shared" / "other-samples-2" / "copilot-cli"
KIND = "copilot-cli"
SHELL = {"bash", "powershell"}
BIG = "b87feda8-379e-4f8c-aa42-b4f7d12f253a"


def imp(db: Path, *paths, server: str = "test", agent: str | None = None):
    report = do_import(db, *paths, server=server, agent=agent)
    assert report.files_failed == 0, report.failures
    return report


# ---------------------------------------------------------------------------
# Made-up sessions


def ts(n: int) -> str:
    return f"2026-01-02T03:{n // 60:02d}:{n % 60:02d}.000Z"


class Events:
    """A synthetic events file: each event chained to the one before by parentId."""

    def __init__(self, sid: str = "5e55a0a0-0000-4000-8000-000000000001"):
        self.sid = sid
        self.lines: list[dict] = []
        self.last = None

    def add(self, etype: str, data: dict) -> str:
        eid = f"{self.sid[:8]}-ev-{len(self.lines):04d}"
        self.lines.append({"type": etype, "data": data, "id": eid, "timestamp": ts(len(self.lines)),
                           "parentId": self.last})
        self.last = eid
        return eid

    def bytes(self, upto: int | None = None) -> bytes:
        return b"".join(json.dumps(o).encode() + b"\n" for o in self.lines[:upto])

    def write(self, path: Path, upto: int | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.bytes(upto))
        return path


def conversation(sid: str = "5e55a0a0-0000-4000-8000-000000000001", turns: int = 2, shutdown_out: int | None = None,
                 model: str = "claude-sonnet-4.5") -> Events:
    e = Events(sid)
    e.add("session.start", {"sessionId": sid, "version": 1, "producer": "copilot-agent", "copilotVersion": "1.0.60",
                            "startTime": ts(0), "context": {"cwd": "/home/dev/proj", "repository": "dev/proj"}})
    e.add("session.model_change", {"newModel": model})
    e.add("system.message", {"role": "system", "content": "You are a made-up assistant."})
    out = 0
    for t in range(turns):
        e.add("user.message", {"content": f"Please run the build, step {t}", "transformedContent": "<x/>",
                               "attachments": []})
        e.add("assistant.turn_start", {"turnId": str(t)})
        call = f"call-{t}-bash"
        e.add("assistant.message", {"messageId": f"m-{t}-a", "model": model, "content": "",
                                    "reasoningText": f"I should run make {t}", "reasoningOpaque": "c2lnbmF0dXJl",
                                    "toolRequests": [
                                        {"toolCallId": call, "name": "bash", "type": "function",
                                         "arguments": {"command": f"make step-{t}", "description": "build"}},
                                        {"toolCallId": f"call-{t}-view", "name": "view", "type": "function",
                                         "arguments": {"path": "/home/dev/proj/README.md"}}],
                                    "outputTokens": 10 + t})
        out += 10 + t
        e.add("tool.execution_start", {"toolCallId": call, "toolName": "bash", "arguments": {"command": "x"}})
        e.add("tool.execution_complete", {"toolCallId": call, "success": True,
                                          "result": {"content": f"built {t}\n<exited with exit code {t}>"}})
        e.add("tool.execution_complete", {"toolCallId": f"call-{t}-view", "success": True,
                                          "result": {"content": "readme text"}})
        e.add("assistant.message", {"messageId": f"m-{t}-b", "model": model, "content": f"Step {t} is done.",
                                    "toolRequests": [], "outputTokens": 5})
        out += 5
        e.add("assistant.turn_end", {"turnId": str(t)})
    e.add("session.shutdown", {"shutdownType": "routine", "totalPremiumRequests": 3, "modelMetrics": {model: {
        "requests": {"count": 2 * turns, "cost": 3},
        "usage": {"inputTokens": 1000, "outputTokens": out if shutdown_out is None else shutdown_out,
                  "cacheReadTokens": 600, "cacheWriteTokens": 100}}}})
    return e


def session_dir(home: Path, sid: str) -> Path:
    return home / ".copilot" / "session-state" / sid


def write_session(home: Path, e: Events, name: str = "made-up name") -> Path:
    folder = session_dir(home, e.sid)
    e.write(folder / "events.jsonl")
    (folder / "workspace.yaml").write_text(f"id: {e.sid}\ncwd: /home/dev/proj\nrepository: dev/proj\n"
                                           f"branch: main\nname: {name}\nsummary_count: 0\n")
    return folder / "events.jsonl"


def history(sid: str = "5e55a0a0-0000-4000-8000-0000000000a1", turns: int = 1) -> dict:
    chat, timeline = [], [{"id": "tl-info", "timestamp": ts(0), "type": "info", "text": "Connected"}]
    for t in range(turns):
        chat.append({"role": "user", "content": f"history question {t}"})
        timeline.append({"id": f"tl-u{t}", "timestamp": ts(1 + 4 * t), "type": "user", "text": "q"})
        chat.append({"role": "assistant", "padding": "xyz"[: t + 1], "content": None, "tool_calls": [
            {"id": f"h-call-{t}", "type": "function",
             "function": {"name": "bash", "arguments": json.dumps({"command": f"ls {t}"})}}]})
        chat.append({"role": "tool", "tool_call_id": f"h-call-{t}", "content": f"a\nb\n<exited with exit code {t}>"})
        timeline.append({"id": f"tl-t{t}", "timestamp": ts(2 + 4 * t), "type": "tool_call_completed",
                         "callId": f"h-call-{t}", "name": "bash", "result": {"type": "success", "log": "a"}})
        chat.append({"role": "assistant", "padding": "p", "content": f"history answer {t}"})
        timeline.append({"id": f"tl-c{t}", "timestamp": ts(3 + 4 * t), "type": "copilot", "text": "a"})
    return {"sessionId": sid, "startTime": ts(0), "chatMessages": chat, "timeline": timeline}


def write_history(home: Path, doc: dict) -> Path:
    path = home / ".copilot" / "history-session-state" / f"session_{doc['sessionId']}_1767323045000.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def figures(db: Path, sid: str) -> dict:
    roles = dict(rows(db, "SELECT role, COUNT(*) FROM messages WHERE session_uuid = ? AND "
                          "native_role <> 'session.shutdown' GROUP BY role", (sid,)))
    usage = rows(db, "SELECT " + ", ".join(f"COALESCE(SUM({c} * usage_counted), 0)" for c in (
        "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens"))
        + " FROM messages WHERE session_uuid = ?", (sid,))[0]
    calls = rows(db, "SELECT COUNT(DISTINCT call_id), COUNT(command), COUNT(exit_code) FROM tool_calls "
                     "WHERE session_uuid = ?", (sid,))[0]
    return {"roles": roles, "usage": tuple(usage), "tool_calls": calls[0], "shell_calls": calls[1],
            "exit_codes": calls[2],
            "model_calls": scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND call_key IS NOT NULL "
                                      "AND usage_counted = 1", (sid,))}


# ---------------------------------------------------------------------------
# The oracle: the samples counted with json alone


def oracle_events(path: Path) -> tuple[str, dict]:
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    sid = next(e["data"]["sessionId"] for e in events if e["type"] == "session.start")
    by = Counter(e["type"] for e in events)
    assistant = {e["data"]["messageId"] for e in events if e["type"] == "assistant.message"}
    requests = [r for e in events if e["type"] == "assistant.message" for r in e["data"].get("toolRequests", [])]
    calls = {r["toolCallId"] for r in requests}
    shell = {r["toolCallId"] for r in requests if r["name"] in SHELL}
    out_msgs = Counter()
    for e in events:
        if e["type"] == "assistant.message":
            out_msgs[e["data"]["model"]] += e["data"].get("outputTokens", 0)
    shutdowns = [e for e in events if e["type"] == "session.shutdown"]
    assert len(shutdowns) == 1  # (one process run per sample file)
    inp = out = read = write = 0
    for model, m in shutdowns[0]["data"]["modelMetrics"].items():
        u = m["usage"]
        read += u["cacheReadTokens"]
        write += u["cacheWriteTokens"]
        plain = m["tokenDetails"]["input"]["tokenCount"]
        assert plain == u["inputTokens"] - u["cacheReadTokens"] - u["cacheWriteTokens"]
        inp += plain
        out += max(u["outputTokens"], out_msgs[model])
    roles = {"user": by["user.message"], "assistant": len(assistant), "toolResult": by["tool.execution_complete"],
             "system": by["system.message"]}
    usage = (inp, out, read, write, inp + out + read + write)
    return sid, {"roles": {k: v for k, v in roles.items() if v}, "usage": usage,
                 "tool_calls": len(calls), "shell_calls": len(shell), "model_calls": len(assistant)}


def oracle_history(path: Path) -> tuple[str, dict]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    chat = doc["chatMessages"]
    roles = Counter({"user": "user", "assistant": "assistant", "tool": "toolResult"}.get(m["role"], "system")
                    for m in chat)
    calls = {c["id"] for m in chat for c in m.get("tool_calls") or []}
    shell = {c["id"] for m in chat for c in m.get("tool_calls") or [] if c["function"]["name"] in SHELL}
    return doc["sessionId"], {"roles": dict(roles), "usage": (0, 0, 0, 0, 0), "tool_calls": len(calls),
                              "shell_calls": len(shell), "model_calls": roles["assistant"]}


def sample_oracle(root: Path) -> dict[str, dict]:
    out = dict(oracle_events(p) for p in sorted(root.rglob("events.jsonl")))
    out.update(oracle_history(p) for p in sorted(root.rglob("history-session-state/*.json")))
    return out


@pytest.fixture(scope="module")
def samples():
    if not SAMPLES.is_dir():
        message = (f"Copilot CLI samples not found at {SAMPLES} "
                   "(expected ../shared/other-samples-2/copilot-cli beside the repository)")
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message + "; they are required when CI=true")
        pytest.skip(message)
    return SAMPLES


@pytest.fixture(scope="module")
def imported(samples, tmp_path_factory):
    """Every sample imported by the CLI: the folder of per-server trees, one server per repository."""
    tmp = tmp_path_factory.mktemp("copilot")
    proc = ic.run_cli(["import", samples, "--db", f"sqlite:///{tmp}/a.db", "--json-summary"])
    assert proc.returncode == 0, ic.describe(proc, "import")
    summary = json.loads(proc.stdout)
    assert (summary["files_imported"], summary["files_failed"], summary["files_ignored"], summary["bad_lines"]) == (
        4, 0, 0, 0)
    return tmp / "a.db"


def test_samples_match_the_oracle(samples, imported):
    want = sample_oracle(samples)
    assert len(want) == 4
    assert scalar(imported, "SELECT COUNT(*) FROM sessions WHERE source = ?", (KIND,)) == 4
    for sid, expected in want.items():
        got = figures(imported, sid)
        assert {k: got[k] for k in expected} == expected, sid
    assert rows(imported, "SELECT DISTINCT server FROM sessions ORDER BY 1") == [
        ("XEFF09__dotfiles",), ("polusiti__sys",)]
    assert rows(imported, "SELECT DISTINCT agent_id FROM sessions") == [(KIND,)]
    # only the transcripts were opened: no SQLite file, workspace.yaml beside its events file
    assert scalar(imported, "SELECT COUNT(*) FROM parsed_files WHERE file_path LIKE '%.db'") == 0
    assert scalar(imported, "SELECT COUNT(*) FROM parsed_files") == 4


def test_stats_json_by_source(samples, imported):
    want = sample_oracle(samples)
    proc = ic.run_cli(["stats", "--db", f"sqlite:///{imported}", "--json"])
    assert proc.returncode == 0, ic.describe(proc, "stats")
    got = json.loads(proc.stdout)["by_source"][KIND]
    roles = Counter()
    for e in want.values():
        roles.update(e["roles"])
    shutdown_rows = scalar(imported, "SELECT COUNT(*) FROM messages WHERE native_role = 'session.shutdown'")
    assert shutdown_rows == 2  # one per model of each shutdown
    roles["assistant"] += shutdown_rows
    assert got["sessions"] == 4 and got["messages_by_role"] == dict(roles)
    assert got["tool_calls"] == sum(e["tool_calls"] for e in want.values())
    assert got["shell_calls"] == sum(e["shell_calls"] for e in want.values())
    assert got["model_calls"] == sum(e["model_calls"] for e in want.values())
    for i, key in enumerate(("input", "output", "cacheRead", "cacheWrite", "totalTokens")):
        assert got["usage"][key] == sum(e["usage"][i] for e in want.values()), key
    assert got["usage"]["output"] > 0 and got["usage"]["cacheRead"] > 0
    assert got["messages_by_native_role"]["user.message"] == sum(
        e["roles"].get("user", 0) for s, e in want.items() if s in (BIG, "9a493a94-a307-489e-8bc7-d16f4afcd992"))


def test_samples_speak_the_vocabulary(imported):
    assert_vocabulary(imported, KIND, usage=True, shell_exit_codes=False, tool_results=True)


def test_sample_session_values(samples, imported):
    ws = CP.parse_workspace((samples / "XEFF09__dotfiles/.copilot/session-state" / BIG / "workspace.yaml").read_bytes())
    title, cwd, project, started = rows(imported, "SELECT title, cwd, project, started_at FROM sessions "
                                                  "WHERE session_uuid = ?", (BIG,))[0]
    assert (title, cwd, project) == (ws["name"], ws["cwd"], ws["repository"])
    assert started.startswith(ws["created_at"][:10])
    # the history: times from the timeline, the rest approximate; no usage
    assert scalar(imported, "SELECT COUNT(*) FROM sessions WHERE times_approximate = 1") == 1
    # no cost recorded: premium requests are not dollars; the tokens are priced from the table
    assert rows(imported, "SELECT DISTINCT cost_source FROM messages WHERE output_tokens IS NOT NULL") == [
        ("computed",)]
    # every event line is kept: entries + messages = lines (+ a shutdown row per model)
    lines = sum(len([x for x in p.read_text().splitlines() if x.strip()]) for p in samples.rglob("events.jsonl"))
    kept = scalar(imported, "SELECT COUNT(*) FROM entries WHERE entry_type NOT LIKE 'timeline.%'") + scalar(
        imported, "SELECT COUNT(*) FROM messages WHERE native_role LIKE '%.%' AND native_role <> 'session.shutdown'")
    assert kept == lines


# ---------------------------------------------------------------------------
# Made-up sessions: the mapping


def test_rows_of_a_made_up_session(tmp_path):
    e = conversation(turns=2)
    path = write_session(tmp_path, e)
    db = tmp_path / "t.db"
    imp(db, tmp_path / ".copilot")
    got = figures(db, e.sid)
    # 2 user, 4 assistant messages, 4 results; 4 calls, 2 of them shell calls with their exit codes
    assert got["roles"] == {"user": 2, "assistant": 4, "toolResult": 4, "system": 1}
    assert (got["tool_calls"], got["shell_calls"], got["exit_codes"], got["model_calls"]) == (4, 2, 2, 4)
    assert rows(db, "SELECT command, exit_code, is_error FROM tool_calls WHERE command IS NOT NULL ORDER BY 1") == [
        ("make step-0", 0, 0), ("make step-1", 1, 1)]
    # usage: output on the messages (31), input and cache only on the shutdown's row: counted once
    assert got["usage"] == (300, 31, 600, 100, 1031)
    assert rows(db, "SELECT input_tokens, output_tokens, call_key IS NULL, content_blocks IS NULL FROM messages "
                    "WHERE native_role = 'session.shutdown'") == [(300, 0, 1, 1)]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE has_thinking = 1") == 2
    assert rows(db, "SELECT title, cwd, project FROM sessions") == [("made-up name", "/home/dev/proj", "dev/proj")]
    # the chain is the file's parentId chain; the active path runs through every message
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    assert path.exists()


def test_workspace_yaml_is_read_as_yaml_and_bad_yaml_is_one_note(tmp_path):
    """workspace.yaml is YAML (PyYAML): quoted values unquoted, times and counts kept as written; a
    file that is not YAML imports the session all the same, with one warning naming the line."""
    e = conversation(turns=1)
    write_session(tmp_path, e)
    (session_dir(tmp_path, e.sid) / "workspace.yaml").write_text(
        f"id: {e.sid}\ncwd: '/home/dev/it''s here'\nname: \"a: quoted \\u00e9 name\"\nuser_named: true\n"
        "summary_count: 0\ncreated_at: 2026-01-02T03:00:00.000Z\nbranch:\n")
    assert CP.parse_workspace((session_dir(tmp_path, e.sid) / "workspace.yaml").read_bytes()) == {
        "id": e.sid, "cwd": "/home/dev/it's here", "name": "a: quoted \u00e9 name", "user_named": True,
        "summary_count": "0", "created_at": "2026-01-02T03:00:00.000Z", "branch": None}
    db = tmp_path / "t.db"
    report = imp(db, tmp_path / ".copilot")
    assert not [w for w in report.warnings if "workspace.yaml" in w]
    assert rows(db, "SELECT title, cwd FROM sessions") == [("a: quoted \u00e9 name", "/home/dev/it's here")]

    bad = tmp_path / "bad"
    e = conversation(turns=1)
    write_session(bad, e)
    (session_dir(bad, e.sid) / "workspace.yaml").write_text(f"id: {e.sid}\nname: [not closed\ncwd: /x\n")
    with pytest.raises(ValueError, match=r"workspace.yaml is not YAML \(line 3\)"):
        CP.parse_workspace((session_dir(bad, e.sid) / "workspace.yaml").read_bytes())
    db = tmp_path / "bad.db"
    report = imp(db, bad / ".copilot")
    notes = [w for w in report.warnings if "workspace.yaml" in w]
    assert len(notes) == 1 and "line 3" in notes[0] and "not closed" not in notes[0]
    assert report.files_imported == 1
    assert rows(db, "SELECT session_uuid, title FROM sessions") == [(e.sid, None)]  # (its cwd: the events')


def test_shutdown_output_beyond_the_messages_is_counted_once(tmp_path):
    """A shutdown that reports more output than its messages carried (a message line lost) adds only
    the difference; one that reports less adds none."""
    for shutdown_out, total_out in ((40, 40), (20, 31)):
        e = conversation(sid=f"5e55a0a0-0000-4000-8000-0000000000{shutdown_out}", turns=2, shutdown_out=shutdown_out)
        db = tmp_path / f"{shutdown_out}.db"
        imp(db, write_session(tmp_path / str(shutdown_out), e))
        assert figures(db, e.sid)["usage"][1] == total_out


def test_an_append_reads_only_what_is_new_and_equals_a_whole_import(tmp_path):
    e = conversation(turns=3)
    whole = tmp_path / "whole.db"
    imp(whole, write_session(tmp_path / "w", e))
    want = figures(whole, e.sid)
    n = len(e.lines)
    strip = lambda d: {k: v for k, v in d.items() if k != "parsed_files"}  # noqa: E731
    for cut in range(1, n):
        home = tmp_path / f"c{cut}"
        path = write_session(home, e)
        e.write(path, cut)
        db = tmp_path / f"c{cut}.db"
        imp(db, home / ".copilot")
        e.write(path)
        second = imp(db, home / ".copilot")
        new = len(e.bytes()) - len(e.bytes(cut))
        assert new <= second.bytes_read <= new + 2 * 1024 + 64, cut
        assert figures(db, e.sid) == want, cut
        assert strip(dump(db)) == strip(dump(whole)), cut
    # one more line: only it is read, the counts grow by exactly it
    e.add("user.message", {"content": "one more"})
    path = e.write(session_dir(tmp_path / "w", e.sid) / "events.jsonl")
    report = imp(whole, path)
    assert report.bytes_read < len(e.bytes()) // 2
    assert figures(whole, e.sid)["roles"] == {**want["roles"], "user": want["roles"]["user"] + 1}


def test_a_sample_appended_in_two_runs_equals_one_run(samples, tmp_path):
    src = samples / "XEFF09__dotfiles/.copilot/session-state" / BIG
    folder = tmp_path / ".copilot" / "session-state" / BIG
    shutil.copytree(src, folder)
    data = (src / "events.jsonl").read_bytes()
    cut = data.rfind(b"\n", 0, len(data) // 2) + 1
    (folder / "events.jsonl").write_bytes(data[:cut])
    db = tmp_path / "t.db"
    imp(db, tmp_path / ".copilot")
    (folder / "events.jsonl").write_bytes(data)
    second = imp(db, tmp_path / ".copilot")
    assert second.bytes_read < len(data) - cut + 4096
    _, want = oracle_events(src / "events.jsonl")
    got = figures(db, BIG)
    assert {k: got[k] for k in want} == want


def test_a_truncated_last_line_and_an_unknown_event(tmp_path):
    e = conversation(turns=1)
    e.add("future.thing", {"what": "a kind of event this importer never saw"})
    path = write_session(tmp_path, e)
    data = e.bytes()
    path.write_bytes(data + b'{"type":"user.message","data":{"content":"half')  # a half-written line
    db = tmp_path / "t.db"
    first = imp(db, path)
    assert first.pending_lines == 1 and first.files_failed == 0
    assert rows(db, "SELECT entry_type FROM entries WHERE entry_type = 'future.thing'") == [("future.thing",)]
    # the one event of a type the kind does not know is marked so (docs/sources.md, "Unknown records")
    assert rows(db, "SELECT entry_type FROM entries WHERE custom_type = 'unknown'") == [("future.thing",)]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'user'") == 1
    # the line completed: read once
    e.add("user.message", {"content": "whole now"})
    e.write(path)
    assert imp(db, path).pending_lines == 0
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'user'") == 2
    # a complete last line without its newline is imported, and not twice when the newline comes
    e.add("user.message", {"content": "no newline yet"})
    path.write_bytes(e.bytes()[:-1])
    imp(db, path)
    e.write(path)
    imp(db, path)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'user'") == 3
    assert figures(db, e.sid)["usage"][1] == 15  # the shutdown's output not counted twice


def test_history_rewritten_whole_is_merged_by_id(tmp_path):
    doc = history(turns=1)
    path = write_history(tmp_path, doc)
    db = tmp_path / "t.db"
    imp(db, tmp_path / ".copilot")
    first = figures(db, doc["sessionId"])
    assert first["roles"] == {"user": 1, "assistant": 2, "toolResult": 1}
    assert (first["tool_calls"], first["shell_calls"], first["exit_codes"], first["model_calls"]) == (1, 1, 1, 2)
    ids = set(rows(db, "SELECT message_uuid FROM messages"))
    bigger = history(turns=2)
    path.write_text(json.dumps(bigger))
    imp(db, path)
    got = figures(db, doc["sessionId"])
    assert got["roles"] == {"user": 2, "assistant": 4, "toolResult": 2}
    assert ids <= set(rows(db, "SELECT message_uuid FROM messages"))
    # times: the user's, the tool's completion, the reply's from the timeline; the tool call's approximate
    assert rows(db, "SELECT native_role, time_approximate FROM messages ORDER BY seq LIMIT 4") == [
        ("user", 0), ("assistant", 1), ("tool", 0), ("assistant", 0)]
    assert scalar(db, "SELECT times_approximate FROM sessions") == 1
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE entry_type = 'timeline.info'") == 1
    # a timeline item of a type the kind does not know: marked unknown
    bigger["timeline"].append({"id": "tl-x", "type": "hologram", "timestamp": bigger["startTime"]})
    path.write_text(json.dumps(bigger))
    imp(db, path)
    assert rows(db, "SELECT entry_type FROM entries WHERE custom_type = 'unknown'") == [("timeline.hologram",)]


def test_a_real_session_whose_type_key_is_renamed_is_warned_about(samples, tmp_path):
    import doctor_check as dc

    events = sorted(samples.rglob("session-state/*/events.jsonl"))[0]
    home = tmp_path / "home"
    target = home / ".copilot" / "session-state" / events.parent.name / "events.jsonl"
    target.parent.mkdir(parents=True)
    target.write_text(events.read_text().replace('"type":', '"kind":'))  # the record-type key renamed
    dc.assert_warned(dc.unrecognised(home), KIND)
    home2 = tmp_path / "home2"
    (home2 / ".copilot" / "session-state" / events.parent.name).mkdir(parents=True)
    shutil.copyfile(events, home2 / ".copilot" / "session-state" / events.parent.name / "events.jsonl")
    assert dc.unrecognised(home2) == []


def test_files_of_other_kinds_are_not_claimed(tmp_path):
    source = kind(KIND)
    # an OpenClaw/pi transcript, a Codex rollout, a JSON without chatMessages: not Copilot's
    assert not source.claims_file("x.jsonl", b'{"type":"session","id":"x","timestamp":"2026-01-01T00:00:00Z"}\n')
    assert not source.claims_file("r.jsonl", b'{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta",'
                                             b'"payload":{"id":"x"}}\n')
    assert not source.claims_file("s.json", b'{"session_id":"x","messages":[]}')
    assert source.claims_file("events.jsonl", conversation().bytes(1))
    assert source.claims_file("session_x_1.json", json.dumps(history()).encode())
    # a folder that is no Copilot layout is not recognised
    (tmp_path / "other" / "session-state").mkdir(parents=True)
    assert not source.find(FileSystem(), str(tmp_path / "other"), Scope("s"), Discovery())
    # a flat .jsonl in session-state/ that holds no Copilot events is not listed; a session
    # folder's events.jsonl that holds none is recorded as ignored, with the reason
    e = conversation()
    write_session(tmp_path, e)
    notes = tmp_path / ".copilot" / "session-state" / "notes.jsonl"
    notes.write_text('{"type":"session","id":"x"}\n')
    assert str(notes) not in {u.key for u in discover([str(tmp_path / ".copilot")], server="s").units}
    junk = tmp_path / ".copilot" / "session-state" / "not-a-session" / "events.jsonl"
    junk.parent.mkdir()
    junk.write_text('{"type":"session","id":"x"}\n{"a": 1}\n')
    db = tmp_path / "t.db"
    report = do_import(db, tmp_path / ".copilot")
    assert (report.files_imported, report.files_ignored, report.files_failed) == (1, 1, 0)
    reason = scalar(db, "SELECT error_message FROM parsed_files WHERE file_path = ?", (str(junk),))
    assert reason == source.not_this_kind()
    # named on the command line, a history file that is not one says so in one line
    bad = tmp_path / "session_y_1.json"
    bad.write_text('{"sessionId": "y", "timeline": [], "chatMessages": 3}')
    report = do_import(tmp_path / "u.db", bad)
    assert report.files_ignored == 1


def test_discovery_of_layouts_and_defaults(tmp_path, monkeypatch):
    e = conversation()
    write_session(tmp_path, e)
    flat = Events("5e55a0a0-0000-4000-8000-0000000000f1")
    flat.add("session.start", {"sessionId": flat.sid, "startTime": ts(0)})
    flat.add("user.message", {"content": "flat layout"})
    flat.write(tmp_path / ".copilot" / "session-state" / f"{flat.sid}.jsonl")
    write_history(tmp_path, history())
    (tmp_path / ".copilot" / "session-store.db").write_bytes(b"SQLite format 3\x00")
    home = tmp_path / ".copilot"
    for path in (tmp_path, home, home / "session-state"):
        units = discover([str(path)], server="s").units
        assert {u.source.kind for u in units} == {KIND}, path
    assert len(discover([str(home)], server="s").units) == 3
    assert len(discover([str(session_dir(tmp_path, e.sid))], server="s").units) == 1
    assert len(discover([str(home / "history-session-state")], server="s").units) == 1
    db = tmp_path / "t.db"
    imp(db, tmp_path)
    assert rows(db, "SELECT session_uuid FROM sessions ORDER BY 1") == sorted(
        [(e.sid,), (flat.sid,), (history()["sessionId"],)])
    monkeypatch.setenv("COPILOT_HOME", str(home))
    assert kind(KIND).default_paths(FileSystem()) == [str(home)]


def test_default_places_this_machines_variables_first_a_folder_only_and_none_over_ssh(tmp_path, monkeypatch):
    """$COPILOT_HOME, else $XDG_CONFIG_HOME/.copilot, else ~/.copilot: the first that is a folder
    (Source.places); over SSH only ~/.copilot (the variables are this machine's)."""
    source = kind(KIND)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    xdg = tmp_path / "xdg" / ".copilot"
    assert source.candidates() == [str(xdg), "~/.copilot"] and source.default_paths(FileSystem()) == []
    (tmp_path / "home" / ".copilot").mkdir(parents=True)
    xdg.parent.mkdir()
    xdg.write_text("")  # a file of that name is no home
    assert source.default_paths(FileSystem()) == ["~/.copilot"]
    xdg.unlink()
    xdg.mkdir()
    assert source.default_paths(FileSystem()) == [str(xdg)]

    class Remote(FileSystem):
        remote = True

    assert source.default_paths(Remote()) == ["~/.copilot"]


# ---------------------------------------------------------------------------
# Over SSH, and the snapshot


def test_import_over_ssh_equals_a_local_import(tmp_path, samples):
    from sshd import SSHServer, require_sshd
    from test_ssh import import_config, write_config

    require_sshd()
    made = tmp_path / "made"
    write_session(made, conversation())
    write_history(made, history())
    server = SSHServer(tmp_path / "sshd").start()
    try:
        paths = [str(samples / "XEFF09__dotfiles"), str(samples / "polusiti__sys" / ".copilot"), str(made)]
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
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM sessions") == 4 + 2


def test_the_conversation_page_renders_a_copilot_session(tmp_path):
    import asyncio

    from datasette.app import Datasette

    from datasette_agentbase.serve import load_metadata
    from importer.snapshot import export_snapshot

    e = conversation(turns=2)
    db = tmp_path / "t.db"
    imp(db, write_session(tmp_path, e))
    store = open_store(f"sqlite:///{db}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db")
    finally:
        store.close()
    snap = tmp_path / "snapshot.db"
    ds = Datasette([str(snap)], metadata=load_metadata(snap), template_dir=str(REPO_ROOT / "templates"))
    asyncio.run(ds.invoke_startup())
    sid = sqlite3.connect(snap).execute("SELECT id FROM sessions WHERE session_uuid = ?", (e.sid,)).fetchone()[0]
    page = asyncio.run(ds.client.get(f"/-/agentbase/session/{sid}"))
    assert page.status_code == 200
    html = page.text
    assert "Please run the build, step 1" in html and "Step 1 is done." in html
    assert "make step-1" in html and "built 1" in html  # a call, with its output
    assert "I should run make 1" in html  # its thinking
    assert "c2lnbmF0dXJl" not in html  # the opaque reasoning stays in raw_json


def test_doctor_lists_the_versions_the_samples_hold(samples, imported, tmp_path):
    import doctor_check as dc

    # the oracle: each events file's session.start copilotVersion (the history files say none)
    want = set()
    for events in samples.rglob("events.jsonl"):
        for x in events.read_text().splitlines():
            e = json.loads(x) if x.strip() else {}
            if e.get("type") == "session.start" and isinstance(e["data"].get("copilotVersion"), str):
                want.add(e["data"]["copilotVersion"])
    assert want
    assert dc.doctor_versions(tmp_path / "home", KIND, imported) == want
