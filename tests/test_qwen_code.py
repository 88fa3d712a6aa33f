"""Qwen Code sessions (importer/sources/qwen_code.py, docs/qwen-code.md).

The real files in ../shared/other-samples-2/qwen-code (SOURCES.md there: three repositories, the
chat logs of 0.13.0 to 0.14.3, two old session files, a saved chat, a logs.json and a todo list)
are read where they are: required under CI=true, skipped with a message otherwise. They hold real
people's text: assertions show counts and ids only. Their figures are counted here by ``oracle``,
from the counting rules with the plain json module, sharing no code with the importer.

Everything else runs on made-up sessions written by the helpers below.
"""

from __future__ import annotations

import json
import os
import re
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

from importer.sources import Discovery, Scope, all_sources, discover  # noqa: E402
from importer.sources import qwen_code as Q  # noqa: E402
from importer.sources.fs import FileSystem  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
SAMPLES = SHARED / "other-samples-2" / "qwen-code"
KIND = "qwen-code"
USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")


# ---------------------------------------------------------------------------
# The oracle: the samples counted with json alone


def _usage(prompt, candidates, thoughts, cached, total) -> Counter:
    """The counting rules: input excludes the cached tokens; thoughts are inside output unless the
    total counts them apart."""
    prompt, candidates, thoughts, cached, total = (v or 0 for v in (prompt, candidates, thoughts, cached, total))
    output = candidates + thoughts if thoughts and total == prompt + candidates + thoughts else candidates
    return Counter({"input": prompt - cached, "output": output, "cacheRead": cached, "totalTokens": total})


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def oracle(root: Path) -> dict:
    """Per session id: messages by role, tool calls (distinct ids), shell calls, exit codes
    said by shell results, model calls and token sums."""
    out: dict[str, dict] = {}

    def session(sid: str) -> dict:
        return out.setdefault(sid, {"roles": Counter(), "calls": set(), "shell": set(), "exit_codes": 0,
                                    "model_calls": 0, "usage": Counter(), "thinking": 0})

    for path in _files(root):
        if path.suffix == ".jsonl" and path.parent.name == "chats":
            shell_results = set()
            for raw in path.read_text(encoding="utf-8").splitlines():
                if not raw.strip():
                    continue
                line = json.loads(raw)
                s = session(line["sessionId"])
                t = line["type"]
                if t == "user":
                    s["roles"]["user"] += 1
                elif t == "assistant":
                    s["roles"]["assistant"] += 1
                    s["thinking"] += any(p.get("thought") is True for p in line["message"]["parts"])
                    u = line["usageMetadata"]
                    s["model_calls"] += 1
                    s["usage"] += _usage(u.get("promptTokenCount"), u.get("candidatesTokenCount"),
                                         u.get("thoughtsTokenCount"), u.get("cachedContentTokenCount"),
                                         u.get("totalTokenCount"))
                    for part in line["message"]["parts"]:
                        if "functionCall" in part:
                            s["calls"].add(part["functionCall"]["id"])
                            if part["functionCall"]["name"] == "run_shell_command":
                                s["shell"].add(part["functionCall"]["id"])
                elif t == "tool_result":
                    for part in line["message"]["parts"]:
                        s["roles"]["toolResult"] += 1
                        fr = part["functionResponse"]
                        if fr["name"] == "run_shell_command" and re.search(
                                r"^Exit Code: -?\d+", fr["response"].get("output", ""), re.M):
                            shell_results.add(fr["id"])
                elif t == "system" and line["subtype"] == "ui_telemetry":
                    event = line["systemPayload"]["uiEvent"]
                    prompt = event.get("prompt_id", "")
                    own = prompt.startswith(line["sessionId"]) and re.fullmatch(
                        r"#+\d+", prompt[len(line["sessionId"]):])
                    if event["event.name"] == "qwen-code.api_response" and prompt and not own:
                        s["roles"]["assistant"] += 1  # a sub-agent's model call: its usage alone
                        s["model_calls"] += 1
                        s["usage"] += _usage(event.get("input_token_count"), event.get("output_token_count"),
                                             event.get("thoughts_token_count"),
                                             event.get("cached_content_token_count"), event.get("total_token_count"))
            s["exit_codes"] += len(shell_results & s["shell"])
        elif path.name.startswith("session-") and path.suffix == ".json":
            doc = json.loads(path.read_text(encoding="utf-8"))
            s = session(doc["sessionId"])
            for m in doc["messages"]:
                if m["type"] == "user":
                    s["roles"]["user"] += 1
                elif m["type"] == "qwen":
                    s["roles"]["assistant"] += 1
                    s["thinking"] += bool(m.get("thoughts"))
                    tk = m["tokens"]
                    s["model_calls"] += 1
                    s["usage"] += _usage(tk.get("input"), tk.get("output"), tk.get("thoughts"), tk.get("cached"),
                                         tk.get("total"))
                    for c in m.get("toolCalls") or []:
                        s["calls"].add(c["id"])
        elif path.name.startswith("checkpoint-") and path.suffix == ".json":
            items = json.loads(path.read_text(encoding="utf-8"))
            s = session(f"checkpoint-{path.parent.name[:16]}-{path.stem[len('checkpoint-'):]}")
            for index, item in enumerate(items):
                kinds = {next(iter(p)) for p in item["parts"]}
                if item["role"] == "model":
                    s["roles"]["assistant"] += 1
                    for p in item["parts"]:
                        if "functionCall" in p:
                            s["calls"].add(p["functionCall"]["id"])
                elif kinds == {"functionResponse"}:
                    s["roles"]["toolResult"] += len(item["parts"])
                elif index == 0 and item["parts"][0]["text"].startswith("This is the Qwen Code."):
                    s["roles"]["system"] += 1  # the CLI's context setup
                else:
                    s["roles"]["user"] += 1
    return out


# ---------------------------------------------------------------------------
# Synthetic sessions


SID = "0a1b2c3d-0000-4000-8000-000000000001"
T0 = "2026-04-01T10:00:00.000Z"


def ts(n: int) -> str:
    return f"2026-04-01T10:00:{n:02d}.000Z"


class Chat:
    """A made-up chat log: lines in the 0.14 shape, each the parent of the next."""

    def __init__(self, sid: str = SID, version: str = "0.14.0", cwd: str = "C:\\Users\\someone\\Project"):
        self.sid, self.version, self.cwd = sid, version, cwd
        self.lines: list[dict] = []

    def _add(self, type_: str, **fields) -> dict:
        n = len(self.lines)
        line = {"uuid": f"{self.sid[:8]}-line-{n:04d}", "parentUuid": self.lines[-1]["uuid"] if self.lines else None,
                "sessionId": self.sid, "timestamp": ts(n % 60), "type": type_, "cwd": self.cwd,
                "version": self.version, **fields}
        self.lines.append(line)
        return line

    def user(self, text: str) -> dict:
        return self._add("user", message={"role": "user", "parts": [{"text": text}]})

    def telemetry(self, prompt: str, total: int, cached: int = 0) -> dict:
        return self._add("system", subtype="ui_telemetry", systemPayload={"uiEvent": {
            "event.name": "qwen-code.api_response", "event.timestamp": T0, "response_id": f"r-{len(self.lines)}",
            "model": "coder-model", "status_code": 200, "duration_ms": 10, "input_token_count": total - 10,
            "output_token_count": 10, "cached_content_token_count": cached, "thoughts_token_count": 2,
            "tool_token_count": 0, "total_token_count": total, "prompt_id": prompt}})

    def assistant(self, text: str, thought: str | None = None, calls: list[tuple[str, str, dict]] = (),
                  total: int = 1000, cached: int = 400) -> dict:
        parts = ([{"text": thought, "thought": True}] if thought else []) + [{"text": text}]
        parts += [{"functionCall": {"id": cid, "name": name, "args": args}} for cid, name, args in calls]
        return self._add("assistant", model="coder-model", message={"role": "model", "parts": parts},
                         usageMetadata={"promptTokenCount": total - 10, "candidatesTokenCount": 10,
                                        "thoughtsTokenCount": 3, "totalTokenCount": total,
                                        "cachedContentTokenCount": cached}, contextWindowSize=1000000)

    def result(self, cid: str, name: str, output: str, status: str = "success") -> dict:
        return self._add("tool_result", message={"role": "user", "parts": [
            {"functionResponse": {"id": cid, "name": name, "response": {"output": output}}}]},
            toolCallResult={"callId": cid, "status": status, "resultDisplay": output})

    def bytes(self) -> bytes:
        return b"".join(json.dumps(line).encode() + b"\n" for line in self.lines)

    def write(self, home: Path, slug: str = "c--users-someone-project") -> Path:
        path = home / "projects" / slug / "chats" / f"{self.sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.bytes())
        return path


def conversation(sid: str = SID) -> Chat:
    c = Chat(sid)
    c.user("Please run the build")
    c.telemetry(f"{sid}########0", 1000)
    c.assistant("Running it now.", thought="The user wants a build.",
                calls=[("call_1", "run_shell_command", {"command": "make build", "is_background": False}),
                       ("call_2", "read_file", {"file_path": "/tmp/x"})])
    c.result("call_1", "run_shell_command", "Command: make build\nOutput: broken\nExit Code: 2\nSignal: (none)")
    c.result("call_2", "read_file", "file text")
    c.telemetry(f"{sid}########0", 1200, cached=900)
    c.assistant("The build failed with exit code 2.", total=1200, cached=900)
    return c


def imp(db: Path, *paths, server: str = "test", agent: str | None = None):
    report = do_import(db, *paths, server=server, agent=agent)
    assert report.files_failed == 0, report.failures
    return report


def by_role(db: Path, sid: str | None = None) -> dict:
    where, params = ("WHERE session_uuid = ?", (sid,)) if sid else ("", ())
    return dict(rows(db, f"SELECT role, COUNT(*) FROM messages {where} GROUP BY role", params))


def usage(db: Path, where: str = "1 = 1", params=()) -> dict:
    sums = ", ".join(f"COALESCE(SUM({c} * usage_counted), 0)" for c in (
        "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens"))
    return dict(zip(USAGE_KEYS, rows(db, f"SELECT {sums} FROM messages WHERE {where}", params)[0]))


# ---------------------------------------------------------------------------
# The real samples


@pytest.fixture(scope="module")
def samples():
    if not SAMPLES.is_dir():
        message = f"Qwen Code samples not found at {SAMPLES} (expected ../shared/other-samples-2/qwen-code)"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message + "; they are required when CI=true")
        pytest.skip(message)
    return SAMPLES


@pytest.fixture(scope="module")
def imported(samples, tmp_path_factory):
    """Every sample imported by the CLI: the folder holds one repository (one server) per subfolder."""
    tmp = tmp_path_factory.mktemp("qwen")
    proc = ic.run_cli(["import", samples, "--db", f"sqlite:///{tmp}/a.db", "--json-summary"])
    assert proc.returncode == 0, ic.describe(proc, "import")
    summary = json.loads(proc.stdout)
    assert summary["files_failed"] == 0 and summary["files_ignored"] == 0 and summary["bad_lines"] == 0, summary
    assert summary["files_imported"] == 10  # 7 chat logs, 2 old session files, 1 saved chat
    return tmp / "a.db"


def test_samples_match_the_oracle(samples, imported):
    want = oracle(samples)
    assert len(want) == 10
    assert scalar(imported, "SELECT COUNT(*) FROM sessions WHERE source = ?", (KIND,)) == 10
    assert rows(imported, "SELECT DISTINCT agent_id FROM sessions") == [(KIND,)]
    for sid, w in want.items():
        assert by_role(imported, sid) == dict(w["roles"]), sid
        calls = rows(imported, "SELECT call_id, command IS NOT NULL, exit_code FROM tool_calls WHERE session_uuid = ?",
                     (sid,))
        assert {c for c, _, _ in calls} == w["calls"] and len(calls) == len(w["calls"]), sid
        assert {c for c, shell, _ in calls if shell} == w["shell"], sid
        assert sum(1 for _, _, code in calls if code is not None) == w["exit_codes"], sid
        assert scalar(imported, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND call_key IS NOT NULL "
                                "AND usage_counted = 1", (sid,)) == w["model_calls"], sid
        got = usage(imported, "session_uuid = ?", (sid,))
        assert got == {k: w["usage"].get(k, 0) for k in USAGE_KEYS}, sid
        assert scalar(imported, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND has_thinking = 1",
                      (sid,)) == w["thinking"], sid
    # every tool result paired with its call; thinking in the 0.13+ logs only (old files' thoughts are empty)
    assert scalar(imported, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NULL") == 0
    assert sum(w["thinking"] for w in want.values()) == 28
    # every line is kept: as a message or an entry
    lines = sum(1 for p in _files(samples) if p.suffix == ".jsonl" for raw in p.read_bytes().splitlines() if raw)
    chat_rows = scalar(imported, "SELECT (SELECT COUNT(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
                                 "WHERE s.file_path LIKE '%.jsonl') + (SELECT COUNT(*) FROM entries)")
    assert chat_rows == lines


def test_stats_json_by_source(samples, imported):
    want = oracle(samples)
    proc = ic.run_cli(["stats", "--db", f"sqlite:///{imported}", "--json"])
    assert proc.returncode == 0, ic.describe(proc, "stats")
    got = json.loads(proc.stdout)["by_source"][KIND]
    roles = Counter()
    for w in want.values():
        roles.update(w["roles"])
    assert got["sessions"] == 10 and got["messages"] == sum(roles.values()) == 142
    assert got["messages_by_role"] == dict(roles)
    assert got["tool_calls"] == sum(len(w["calls"]) for w in want.values()) == 26
    assert got["shell_calls"] == sum(len(w["shell"]) for w in want.values()) == 3
    assert got["model_calls"] == sum(w["model_calls"] for w in want.values()) == 85
    total = sum((w["usage"] for w in want.values()), Counter())
    for key in USAGE_KEYS:
        assert got["usage"][key] == total.get(key, 0), key
    assert got["calls_without_output"] == 25  # the two sub-agent runs' model calls
    assert got["unpriced_calls"] == 85  # "coder-model" is in no price table: unpriced, never $0


def test_the_vocabulary_holds(imported):
    assert_vocabulary(imported, KIND, usage=True, shell_exit_codes=True, tool_results=True)


def test_sample_sessions_values(samples, imported):
    # cwd and project from the chat log's lines (Windows paths); the saved chat's times are the file's
    got = dict(rows(imported, "SELECT session_uuid, project FROM sessions WHERE project IS NOT NULL"))
    assert len(got) == 7 and all(got.values())
    saved = rows(imported, "SELECT session_type, label, times_approximate FROM sessions WHERE session_uuid LIKE "
                           "'checkpoint-%'")
    assert saved == [("checkpoint", "configuracion-zellij", 1)]
    assert scalar(imported, "SELECT COUNT(*) FROM messages WHERE time_approximate = 1") == \
        scalar(imported, "SELECT message_count FROM sessions WHERE session_uuid LIKE 'checkpoint-%'")
    # logs.json and todos/ are not opened: no session of theirs, no file of theirs recorded
    assert scalar(imported, "SELECT COUNT(*) FROM parsed_files WHERE file_path LIKE '%logs.json' "
                            "OR file_path LIKE '%/todos/%'") == 0


def test_incremental_append_of_a_real_log_reads_only_the_new(samples, tmp_path):
    source = next(p for p in _files(samples) if p.name.startswith("6676775b"))
    lines = source.read_bytes().splitlines(keepends=True)
    home = tmp_path / ".qwen" / "projects" / "p" / "chats"
    home.mkdir(parents=True)
    target = home / source.name
    cut = len(lines) // 2
    target.write_bytes(b"".join(lines[:cut]))
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".qwen")
    first = scalar(db, "SELECT COUNT(*) FROM messages") + scalar(db, "SELECT COUNT(*) FROM entries")
    assert first == cut
    rest = b"".join(lines[cut:])
    with target.open("ab") as f:
        f.write(rest)
    report = imp(db, tmp_path / ".qwen")
    assert report.files_imported == 1
    assert report.bytes_read <= len(rest) + 2 * 1024  # the new bytes, and the windows that tell an append
    assert scalar(db, "SELECT COUNT(*) FROM messages") + scalar(db, "SELECT COUNT(*) FROM entries") == len(lines)
    whole = tmp_path / "whole.db"
    imp(whole, source)
    assert by_role(db) == by_role(whole) and usage(db) == usage(whole)
    assert rows(db, "SELECT call_id, result_message_id IS NOT NULL FROM tool_calls ORDER BY 1") == \
        rows(whole, "SELECT call_id, result_message_id IS NOT NULL FROM tool_calls ORDER BY 1")


# ---------------------------------------------------------------------------
# Made-up sessions


def test_mapping_of_a_synthetic_conversation(tmp_path):
    c = conversation()
    path = c.write(tmp_path / ".qwen")
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".qwen")
    assert by_role(db) == {"user": 1, "assistant": 2, "toolResult": 2}
    assert dict(rows(db, "SELECT native_role, COUNT(*) FROM messages GROUP BY 1")) == \
        {"user": 1, "assistant": 2, "tool_result": 2}
    assert rows(db, "SELECT entry_type, custom_type FROM entries") == \
        [("system", "ui_telemetry.qwen-code.api_response")] * 2
    assert rows(db, "SELECT tool_name, command, exit_code FROM tool_calls ORDER BY call_id") == \
        [("run_shell_command", "make build", 2), ("read_file", None, None)]
    assert rows(db, "SELECT tool_call_id, is_error, exit_code FROM messages WHERE role = 'toolResult' ORDER BY 1") == \
        [("call_1", 1, 2), ("call_2", 0, None)]
    # thinking inside output (Qwen's counts: total = prompt + candidates), input without the cached
    assert rows(db, "SELECT has_thinking, thinking_text, input_tokens, output_tokens, cache_read_tokens, "
                    "total_tokens, model FROM messages WHERE role = 'assistant' ORDER BY seq") == \
        [(1, "The user wants a build.", 590, 10, 400, 1000, "coder-model"),
         (0, None, 290, 10, 900, 1200, "coder-model")]
    session = rows(db, "SELECT session_uuid, cwd, project, started_at, title FROM sessions")
    assert session == [(SID, "C:\\Users\\someone\\Project", "Project", "2026-04-01 10:00:00.000", None)]
    # the parent chain is the active path
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    assert rows(db, "SELECT file_path FROM parsed_files") == [(str(path),)]


def test_a_subagents_model_calls_are_counted_once_from_the_telemetry(tmp_path):
    c = Chat()
    c.user("Review the code")
    c.telemetry(f"{SID}########0", 1000)
    c.assistant("Starting a reviewer.", calls=[("call_a", "agent", {"prompt": "review"})])
    c.telemetry(f"{SID}#code-reviewer-abc123#0", 500, cached=100)
    c.telemetry(f"{SID}#code-reviewer-abc123#1", 700, cached=450)
    c.result("call_a", "agent", "reviewed")
    c.telemetry(f"{SID}########0", 1300)
    c.assistant("Done.", total=1300)
    c.write(tmp_path / ".qwen")
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".qwen")
    assert rows(db, "SELECT native_role, content_blocks IS NULL, input_tokens, output_tokens, cache_read_tokens, "
                    "total_tokens FROM messages WHERE role = 'assistant' ORDER BY seq") == [
        ("assistant", 0, 590, 10, 400, 1000), ("api_response", 1, 390, 10, 100, 500),
        ("api_response", 1, 240, 10, 450, 700), ("assistant", 0, 890, 10, 400, 1300)]
    assert usage(db)["totalTokens"] == 1000 + 500 + 700 + 1300
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE call_key IS NOT NULL AND usage_counted = 1") == 4


def test_version_changing_inside_one_file(tmp_path):
    c = conversation()
    c.version = "0.14.3"
    c.user("And now?")
    c.assistant("Still fine.")
    c.write(tmp_path / ".qwen")
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".qwen")
    assert by_role(db) == {"user": 2, "assistant": 3, "toolResult": 2}
    versions = {json.loads(r)["version"] for (r,) in rows(db, "SELECT raw_json FROM messages")}
    assert versions == {"0.14.0", "0.14.3"}


def test_appended_lines_read_only_the_new_and_grow_counts_exactly(tmp_path):
    c = conversation()
    path = c.write(tmp_path / ".qwen")
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".qwen")
    before = c.bytes()
    c.user("One more thing")
    c.assistant("Sure.", total=1500)
    path.write_bytes(c.bytes())
    report = imp(db, tmp_path / ".qwen")
    assert report.files_imported == 1 and report.messages_added == 2
    assert report.bytes_read <= len(c.bytes()) - len(before) + 2 * 1024
    assert by_role(db) == {"user": 2, "assistant": 3, "toolResult": 2}
    assert usage(db)["totalTokens"] == 1000 + 1200 + 1500
    again = imp(db, tmp_path / ".qwen")
    assert again.files_unchanged == 1 and again.messages_added == 0


def test_a_truncated_last_line_is_pending_then_imported_once(tmp_path):
    c = conversation()
    path = c.write(tmp_path / ".qwen")
    c.user("A prompt cut in half")
    last = json.dumps(c.lines[-1]).encode()
    path.write_bytes(c.bytes()[: -len(last) - 1] + last[:40])
    db = tmp_path / "a.db"
    report = imp(db, tmp_path / ".qwen")
    assert report.pending_lines == 1 and report.bad_lines == 0
    assert by_role(db) == {"user": 1, "assistant": 2, "toolResult": 2}
    path.write_bytes(c.bytes())
    imp(db, tmp_path / ".qwen")
    assert by_role(db) == {"user": 2, "assistant": 2, "toolResult": 2}
    # a complete last line without its newline: imported, and not twice when the newline comes
    c.assistant("No newline yet.")
    path.write_bytes(c.bytes()[:-1])
    imp(db, tmp_path / ".qwen")
    path.write_bytes(c.bytes())
    imp(db, tmp_path / ".qwen")
    assert by_role(db) == {"user": 2, "assistant": 3, "toolResult": 2}
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE call_key IS NOT NULL AND usage_counted = 1") == 3


def test_unknown_record_types_are_kept_as_entries(tmp_path):
    c = conversation()
    c._add("checkpoint_marker", note="something new")
    c._add("system", subtype="model_switch", systemPayload={"from": "a", "to": "b"})
    c.user("after them")
    c.write(tmp_path / ".qwen")
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".qwen")
    assert by_role(db) == {"user": 2, "assistant": 2, "toolResult": 2}
    assert rows(db, "SELECT entry_type, custom_type FROM entries WHERE entry_type <> 'system' "
                    "OR custom_type = 'model_switch' ORDER BY seq") == \
        [("checkpoint_marker", "unknown"), ("system", "model_switch")]  # (a type it does not know: marked)
    # the chain runs through them: everything on the active path
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0


def test_made_up_types_in_the_old_layout_and_a_saved_chat_are_marked_unknown(tmp_path):
    project = tmp_path / ".qwen" / "tmp" / ("ef" * 32)
    (project / "chats").mkdir(parents=True)
    sid = "21111111-2222-4333-8444-555555555555"
    doc = _old_session(sid)
    doc["messages"].append({"id": "m9", "timestamp": ts(4), "type": "hologram", "content": "x"})
    (project / "chats" / "session-2025-11-01T10-00-21111111.json").write_text(json.dumps(doc))
    (project / "checkpoint-t.json").write_text(json.dumps(_saved_chat() + [{"role": "oracle", "parts": []}]))
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".qwen")
    assert rows(db, "SELECT entry_type, custom_type FROM entries ORDER BY entry_type") == [
        ("hologram", "unknown"), ("info", None), ("oracle", "unknown")]


def test_a_real_log_whose_type_key_is_renamed_is_warned_about(samples, tmp_path):
    import doctor_check as dc

    log = sorted(samples.rglob("projects/*/chats/*.jsonl"))[0]
    home = tmp_path / "home"
    target = home / ".qwen" / "projects" / "p" / "chats" / log.name
    target.parent.mkdir(parents=True)
    target.write_text(log.read_text().replace('"type":', '"kind":'))  # the record-type key renamed
    dc.assert_warned(dc.unrecognised(home), KIND)


def _old_session(sid: str, model_type: str = "qwen") -> dict:
    return {"sessionId": sid, "projectHash": "ab" * 32, "startTime": T0, "lastUpdated": ts(5), "messages": [
        {"id": "m1", "timestamp": ts(1), "type": "user",
         "content": "<system-reminder>injected</system-reminder>\nFix the tests"},
        {"id": "m2", "timestamp": ts(2), "type": model_type, "content": "Fixed.", "thoughts": [],
         "tokens": {"input": 100, "output": 5, "cached": 40, "thoughts": 0, "tool": 0, "total": 105},
         "model": "coder-model"},
        {"id": "m3", "timestamp": ts(3), "type": "info", "content": "Request cancelled."}]}


def _saved_chat() -> list:
    return [
        {"role": "user", "parts": [{"text": "This is the Qwen Code. We are setting up the context."}]},
        {"role": "model", "parts": [{"text": "Got it. Thanks for the context!"}]},
        {"role": "user", "parts": [{"text": "<system-reminder>x</system-reminder>"}, {"text": "search it"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "web_search", "args": {"query": "q"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "web_search",
                                                         "response": {"output": "found"}}}]},
        {"role": "model", "parts": [{"text": "Here it is."}]}]


def test_old_layout_session_file_and_saved_chat(tmp_path):
    project = tmp_path / ".qwen" / "tmp" / ("cd" * 32)
    (project / "chats").mkdir(parents=True)
    sid = "11111111-2222-4333-8444-555555555555"
    (project / "chats" / "session-2025-11-01T10-00-11111111.json").write_text(json.dumps(_old_session(sid)))
    (project / "checkpoint-my%20work.json").write_text(json.dumps(_saved_chat()))
    (project / "logs.json").write_text(json.dumps([{"sessionId": sid, "messageId": 0, "type": "user",
                                                    "message": "Fix the tests", "timestamp": T0}]))
    (tmp_path / ".qwen" / "todos").mkdir()
    (tmp_path / ".qwen" / "todos" / f"{sid}.json").write_text("[]")
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".qwen")
    assert by_role(db, sid) == {"user": 1, "assistant": 1}
    assert rows(db, "SELECT native_role, text_preview FROM messages WHERE session_uuid = ? AND role = 'user'",
                (sid,)) == [("user", "Fix the tests")]
    assert rows(db, "SELECT input_tokens, output_tokens, cache_read_tokens, total_tokens FROM messages "
                    "WHERE session_uuid = ? AND role = 'assistant'", (sid,)) == [(60, 5, 40, 105)]
    assert rows(db, "SELECT entry_type FROM entries") == [("info",)]
    saved = f"checkpoint-{'cd' * 8}-my work"
    assert rows(db, "SELECT role, native_role, is_synthetic, time_approximate FROM messages WHERE session_uuid = ? "
                    "ORDER BY seq", (saved,)) == [
        ("system", "user", 0, 1), ("assistant", "model", 1, 1), ("user", "user", 0, 1),
        ("assistant", "model", 0, 1), ("toolResult", "user", 0, 1), ("assistant", "model", 0, 1)]
    assert rows(db, "SELECT label, session_type, times_approximate FROM sessions WHERE session_uuid = ?",
                (saved,)) == [("my work", "checkpoint", 1)]
    assert rows(db, "SELECT tool_name, result_message_id IS NOT NULL FROM tool_calls") == [("web_search", 1)]
    # logs.json and todos/ are not read: two sessions, no other files recorded
    assert scalar(db, "SELECT COUNT(*) FROM sessions") == 2
    assert scalar(db, "SELECT COUNT(*) FROM parsed_files") == 2
    # a rewrite of the whole file (a new message) merges by message id
    doc = _old_session(sid)
    doc["messages"].append({"id": "m4", "timestamp": ts(6), "type": "user", "content": "thanks"})
    (project / "chats" / "session-2025-11-01T10-00-11111111.json").write_text(json.dumps(doc))
    report = imp(db, tmp_path / ".qwen")
    assert report.messages_added == 1 and by_role(db, sid) == {"user": 2, "assistant": 1}


def test_other_kinds_are_not_claimed(tmp_path):
    # Claude Code's lines have the same outer shape (uuid, parentUuid, sessionId, type): not Qwen's parts
    claude = tmp_path / "claude" / "s.jsonl"
    claude.parent.mkdir()
    claude.write_text(json.dumps({"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
                                  "timestamp": T0, "message": {"role": "user", "content": "hi"}}) + "\n")
    head = claude.read_bytes()
    assert not Q.SOURCE.claims_file(claude.name, head)
    gemini = _old_session("22222222-2222-4333-8444-555555555555", model_type="gemini")
    assert not Q.SOURCE.claims_file("session-x.json", json.dumps(gemini).encode())
    assert Q.SOURCE.claims_file("session-x.json", json.dumps(_old_session("x")).encode())
    assert Q.SOURCE.claims_file(f"{SID}.jsonl", conversation().bytes())
    # a Gemini CLI home's tmp tree: nothing listed by this kind
    gem = tmp_path / ".gemini" / "tmp" / ("ef" * 32) / "chats"
    gem.mkdir(parents=True)
    (gem / "session-2026-01-01T10-00-22222222.json").write_text(json.dumps(gemini))
    (gem.parent / "checkpoint-saved.json").write_text(json.dumps(_saved_chat()))
    for path in (tmp_path / ".gemini", tmp_path / ".gemini" / "tmp", gem.parent, gem):
        out = Discovery()
        assert not Q.SOURCE.find(FileSystem(), str(path), Scope("s"), out) and out.units == [], path
    # a Claude Code transcript named directly goes to Claude Code; in a Qwen chats folder it is no session
    db = tmp_path / "a.db"
    imp(db, claude)
    assert rows(db, "SELECT source FROM sessions") == [("claude-code",)]
    chats = tmp_path / ".qwen" / "projects" / "p" / "chats"
    chats.mkdir(parents=True)
    shutil.copy(claude, chats / "odd.jsonl")
    db2 = tmp_path / "b.db"
    report = imp(db2, tmp_path / ".qwen")
    assert report.files_ignored == 1 and scalar(db2, "SELECT COUNT(*) FROM messages") == 0
    assert rows(db2, "SELECT status FROM parsed_files") == [("ignored",)]


def test_a_file_named_directly_that_is_not_a_session(tmp_path):
    project = tmp_path / ".qwen" / "tmp" / "h" / "chats"
    project.mkdir(parents=True)
    bad = project / "session-2025-01-01T00-00-deadbeef.json"
    bad.write_text(json.dumps({"sessionId": "x", "note": "no messages"}))
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / ".qwen")
    assert report.files_ignored == 1 and report.files_failed == 0
    assert rows(db, "SELECT status, error_message FROM parsed_files") == [("ignored", "not a Qwen Code session")]
    # a session file caught half-written: a failed read with a one-line error (no content), read again next run
    half = project / "session-2025-01-01T00-01-cafecafe.json"
    whole = json.dumps(_old_session("33333333-2222-4333-8444-555555555555"))
    half.write_text(whole[: len(whole) // 2])
    report = do_import(db, tmp_path / ".qwen")
    assert report.files_failed == 1
    (path, message), = report.failures
    assert path == str(half)
    assert message == f"cannot read {half}: not valid JSON ({len(whole) // 2} bytes: being written?)"
    half.write_text(whole)
    report = do_import(db, tmp_path / ".qwen")
    assert report.files_failed == 0 and report.messages_added == 2


def test_discovery_paths_and_default(tmp_path, monkeypatch):
    home = tmp_path / "repo" / ".qwen"
    path = conversation().write(home)
    fs = FileSystem()
    for named in (tmp_path / "repo", home, home / "projects", path.parent.parent, path.parent, path):
        d = discover([str(named)], server="s", fs=fs)
        assert [u.key for u in d.units] == [str(path)] and d.units[0].source is Q.SOURCE, named
        assert d.units[0].agent_id == KIND
    assert discover([str(path)], server="s", agent="mine", fs=fs).units[0].agent_id == "mine"
    monkeypatch.setenv("HOME", str(tmp_path / "repo"))
    assert Q.SOURCE.default_paths(fs) == ["~/.qwen"]
    monkeypatch.setenv("HOME", str(tmp_path / "nowhere"))
    assert Q.SOURCE.default_paths(fs) == []
    assert Q.SOURCE in all_sources()


# ---------------------------------------------------------------------------
# Over SSH, and the snapshot


def test_import_over_ssh_equals_a_local_import(tmp_path, samples):
    from sshd import SSHServer, require_sshd
    from test_ssh import import_config, write_config

    require_sshd()
    server = SSHServer(tmp_path / "sshd").start()
    paths = [str(p) for p in sorted(samples.iterdir()) if p.is_dir()]
    try:
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
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM sessions") == 10


def test_export_and_the_conversation_page(tmp_path):
    import asyncio

    from datasette.app import Datasette

    from datasette_agentbase.serve import load_metadata
    from importer.snapshot import export_snapshot

    conversation().write(tmp_path / ".qwen")
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".qwen")
    store = open_store(f"sqlite:///{db}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db")
    finally:
        store.close()
    snap = tmp_path / "snapshot.db"
    ds = Datasette([str(snap)], metadata=load_metadata(snap), template_dir=str(REPO_ROOT / "templates"))
    asyncio.run(ds.invoke_startup())
    conn = sqlite3.connect(snap)
    sid = conn.execute("SELECT id FROM sessions WHERE session_uuid = ?", (SID,)).fetchone()[0]
    conn.close()
    page = asyncio.run(ds.client.get(f"/-/agentbase/session/{sid}"))
    assert page.status_code == 200
    html = page.text
    assert "Please run the build" in html and "The build failed with exit code 2." in html
    assert "make build" in html and "file text" in html  # a call, with its output
    assert "The user wants a build." in html  # thinking
    assert "no result recorded" not in html


def test_doctor_lists_the_versions_the_samples_hold(samples, imported, tmp_path):
    import doctor_check as dc

    # the oracle: each chat log's latest line that says a version (the old layout's files say none)
    want = set()
    for log in samples.rglob("projects/*/chats/*.jsonl"):
        said = [json.loads(x).get("version") for x in log.read_text().splitlines() if x.strip()]
        said = [v for v in said if isinstance(v, str) and v]
        if said:
            want.add(said[-1])
    assert len(want) >= 2
    assert dc.doctor_versions(tmp_path / "home", KIND, imported) == want
