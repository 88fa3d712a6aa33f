"""Gemini CLI (importer/sources/gemini_cli.py): the real samples in ../shared/other-samples-2/gemini-cli
and made-up chats written here for the rules and traps of SOURCES.md's Gemini CLI FORMAT note.

The expected figures are counted independently of the importer: :func:`oracle` reads the sample files
with the plain json module following the counting rules of docs/gemini-cli.md (it shares no code with the
importer). The samples are real people's data: assertions on them compare counts, ids and booleans only,
never their text.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
from transcripts import do_import, dump, rows, scalar  # noqa: E402
from vocabulary_checks import assert_vocabulary  # noqa: E402

from importer.pipeline import run_import  # noqa: E402
from importer.sources import discover  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT.parent / "shared" / "other-samples-2" / "gemini-cli"
KIND = "gemini-cli"
SHELL = "run_shell_command"
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@pytest.fixture(scope="module")
def samples() -> Path:
    if not SAMPLES.is_dir():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"Gemini CLI samples missing under CI: {SAMPLES}")
        pytest.skip(f"no Gemini CLI samples at {SAMPLES}")
    return SAMPLES


def import_trees(db: Path, root: Path):
    """Import a folder of per-server trees (one per sample repository: the server is its name)."""
    store = open_store(f"sqlite:///{db}")
    try:
        return run_import(store, [], sources=discover([str(root)]))
    finally:
        store.close()


# -- an independent counter -------------------------------------------------------------------------
# From docs/gemini-cli.md's rules only: a chat is a .json object's messages or a .jsonl's lines after
# the header that are not $set lines; a message id seen again is the same message (its last copy wins);
# a session is its sessionId (a sub-agent's short id prefixed by its chats/ folder), wherever its files
# are; logs.json prompts and checkpoints/ files are entries of the session they name, never messages.


def _chat_messages(path: Path) -> tuple[dict, list, int]:
    """(header, messages with the last copy of each id in the place of its first, $set lines)."""
    if path.suffix == ".jsonl":
        lines = [json.loads(x) for x in path.read_bytes().split(b"\n") if x.strip()]
        header, body = lines[0], lines[1:]
        sets = sum(1 for o in body if "$set" in o)
        body = [o for o in body if "$set" not in o]
    else:
        header = json.loads(path.read_bytes())
        body, sets = header["messages"], 0
    order, last = [], {}
    for m in body:
        if m["id"] not in last:
            order.append(m["id"])
        last[m["id"]] = m
    return header, [last[i] for i in order], sets


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def _session_of(path: Path, header: dict) -> str:
    sid = header["sessionId"]
    folder = path.parent.name if path.parent.name != "chats" else None
    return f"{folder}:{sid}" if folder and not UUID.match(sid) else sid


def oracle(root: Path) -> dict:
    sessions: dict[tuple, dict] = {}

    def session(repo: str, sid: str) -> dict:
        return sessions.setdefault((repo, sid), {"messages": {}, "logs": 0, "checkpoints": 0, "sets": 0})

    for path in sorted(root.glob("*/.gemini/tmp/*/chats/**/*.json*")):
        repo = path.relative_to(root).parts[0]
        header, messages, sets = _chat_messages(path)
        s = session(repo, _session_of(path, header))
        s["sets"] += sets
        for m in messages:
            s["messages"][m["id"]] = m  # the same id in two files of one session: one message
    for path in sorted(root.glob("*/.gemini/tmp/*/logs.json")):
        for item in json.loads(path.read_bytes()):
            session(path.relative_to(root).parts[0], item["sessionId"])["logs"] += 1
    for path in sorted(root.glob("*/.gemini/tmp/*/checkpoints/*.json")):
        sid = json.loads(path.read_bytes())["messageId"].split("#")[0]
        session(path.relative_to(root).parts[0], sid)["checkpoints"] += 1
    total = Counter()
    for s in sessions.values():
        calls = {}
        for m in s["messages"].values():
            kind = m["type"]
            if kind == "user":
                total["system" if _text(m["content"]).startswith("System: ") else "user"] += 1
            elif kind == "gemini":
                total["assistant"] += 1
                total["thinking"] += bool(m.get("thoughts"))
                t = m.get("tokens")
                if t:
                    total["model_calls"] += 1
                    total["input"] += t["input"] - t["cached"] + t["tool"]
                    total["output"] += t["output"] + t["thoughts"]
                    total["cache_read"] += t["cached"]
                    total["total"] += t["total"]
                for c in m.get("toolCalls") or []:
                    calls[c["id"]] = c
            else:
                total["system"] += 1
        total["tool_calls"] += len(calls)
        for c in calls.values():
            total["shell"] += c["name"] == SHELL
            outputs = [p["functionResponse"]["response"] for p in c.get("result") or [] if "functionResponse" in p]
            total["failed"] += c["status"] in ("error", "cancelled") or any("error" in r for r in outputs)
            total["exit_codes"] += c["name"] == SHELL and any(
                re.search(r"^Exit Code: -?\d+\s*$", r.get("output") or "", re.M) for r in outputs)
        total["sessions"] += 1
        total["chat_sessions"] += bool(s["messages"])
        total["logs"] += s["logs"]
        total["checkpoints"] += s["checkpoints"]
        total["sets"] += s["sets"]
    return {"sessions": sessions, "total": total}


# Counted once by hand from a structure listing of the files (types, ids, tool call names), before the
# importer read them: a guard on the counter itself.
HAND = {"sessions": 30, "chat_sessions": 8, "user": 59, "assistant": 161, "system": 21, "tool_calls": 134,
        "shell": 29, "logs": 375, "checkpoints": 1, "exit_codes": 5, "model_calls": 159}


@pytest.fixture(scope="module")
def imported(samples, tmp_path_factory):
    db = tmp_path_factory.mktemp("gemini") / "a.db"
    report = import_trees(db, samples)
    return db, report


def test_samples_import_and_match_the_oracle(samples, imported):
    db, report = imported
    want = oracle(samples)
    t = want["total"]
    assert {k: t[k] for k in HAND} == HAND, "the hand counts and the independent counter disagree"
    assert report.files_failed == 0 and report.files_ignored == 0 and report.files_imported == 12
    assert scalar(db, "SELECT COUNT(*) FROM parsed_files WHERE status <> 'success'") == 0
    by_role = dict(rows(db, "SELECT role, COUNT(*) FROM messages WHERE source = ? GROUP BY 1", (KIND,)))
    assert by_role == {"user": t["user"], "assistant": t["assistant"], "system": t["system"],
                       "toolResult": t["tool_calls"]}
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = ?", (KIND,)) == t["sessions"]
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE message_count > 0") == t["chat_sessions"]
    # tool calls: distinct ids per session, each with its result; shell calls with their command
    assert rows(db, "SELECT COUNT(*), COUNT(DISTINCT session_id || ':' || call_id), SUM(result_message_id IS NULL), "
                    "SUM(tool_name = ?), COUNT(command), SUM(is_error), COUNT(exit_code) FROM tool_calls",
                (SHELL,)) == [
        (t["tool_calls"], t["tool_calls"], 0, t["shell"], t["shell"], t["failed"], t["exit_codes"])]
    # usage: once per model call
    assert rows(db, "SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), "
                    "SUM(total_tokens) FROM messages WHERE call_key IS NOT NULL AND usage_counted = 1") == [
        (t["model_calls"], t["input"], t["output"], t["cache_read"], t["total"])]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE cost_source = 'recorded'") == 0
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE has_thinking = 1") == t["thinking"]
    # a shell call's command is its arguments' command
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE tool_name = ? AND command = "
                      "json_extract(arguments, '$.command')", (SHELL,)) == t["shell"]
    # logs.json prompts and checkpoints are entries, never messages; $set lines are entries too
    assert dict(rows(db, "SELECT entry_type, COUNT(*) FROM entries GROUP BY 1")) == {
        "log": t["logs"], "checkpoint": t["checkpoints"], "$set": t["sets"]}
    # per session: each chat session's messages (a message re-written in the .jsonl counted once)
    for (repo, sid), s in want["sessions"].items():
        got = scalar(db, "SELECT COUNT(*) FROM messages m JOIN sessions s ON s.id = m.session_id WHERE s.server = ? "
                         "AND s.session_uuid = ? AND m.role <> 'toolResult'", (repo, sid))
        assert got == len(s["messages"]), (repo, sid[:8])
    # every message of a chat is on the active path (one chain); every message has a time of its own
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0 OR time_approximate = 1") == 0


def test_samples_sessions_subagents_and_projects(imported):
    db, _ = imported
    # the sub-agent in chats/<parent sessionId>/ names its parent; skill extraction's folder names none
    subs = rows(db, "SELECT session_uuid, parent_session_uuid, session_type FROM sessions "
                    "WHERE session_type = 'subagent' ORDER BY session_uuid")
    assert len(subs) == 2
    linked = [s for s in subs if s[1] is not None]
    assert len(linked) == 1 and linked[0][0].startswith(linked[0][1] + ":")
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE session_uuid = ?", (linked[0][1],)) == 1
    # the kind's own summary is the title (two files have one); no computed title
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE title IS NOT NULL") == 2
    # both project naming schemes: a registered name with its .project_root, and a path hash
    projects = {p: c for p, c in rows(db, "SELECT DISTINCT project, cwd IS NOT NULL FROM sessions "
                                          "WHERE message_count > 0")}
    assert projects["idaho-vault"] == 1 and projects["anthonyguera"] == 1
    assert sum(1 for p in projects if re.fullmatch(r"[0-9a-f]{64}", p)) == 2
    assert {a for (a,) in rows(db, "SELECT DISTINCT agent_id FROM sessions")} == {KIND}
    # a session known only from logs.json or a checkpoint: entries, no messages
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE message_count = 0 AND session_type IN "
                      "('logs', 'checkpoint')") == 22


def test_samples_speak_the_vocabulary(imported):
    db, _ = imported
    assert_vocabulary(db, KIND, usage=True, shell_exit_codes=True, tool_results=True)
    assert set(rows(db, "SELECT role, native_role FROM messages")) == {
        ("user", "user"), ("system", "user"), ("system", "info"), ("assistant", "gemini"),
        ("toolResult", "functionResponse")}
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE has_thinking = 1 AND role = 'assistant'") > 0


def test_samples_stats_json_by_source(samples, tmp_path):
    t = oracle(samples)["total"]
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    proc = ic.run_cli(["import", str(samples), "--db", db, "-q"])
    assert proc.returncode == 0, ic.describe(proc, "import")
    proc = ic.run_cli(["stats", "--json", "--db", db])
    assert proc.returncode == 0, ic.describe(proc, "stats --json")
    mine = json.loads(proc.stdout)["by_source"][KIND]
    assert mine["sessions"] == t["sessions"]
    assert mine["messages_by_role"] == {"user": t["user"], "assistant": t["assistant"], "system": t["system"],
                                        "toolResult": t["tool_calls"]}
    assert (mine["tool_calls"], mine["shell_calls"], mine["model_calls"]) == (t["tool_calls"], t["shell"],
                                                                                t["model_calls"])
    assert mine["usage"]["totalTokens"] == t["total"] and mine["usage"]["cacheRead"] == t["cache_read"]
    assert mine["unpriced_calls"] == 0 and mine["usage"]["cost_total"] > 0  # priced from the table


def test_a_sample_jsonl_cut_then_appended_reads_only_what_is_new(samples, tmp_path):
    src = next(samples.glob("*/.gemini/tmp/*/chats/session-2026-04-25T*.jsonl"))
    data = src.read_bytes()
    lines = data.split(b"\n")
    # cut just after the first copy of a message that is written again (its tool calls finished later)
    seen, cut = set(), None
    for i, raw in enumerate(lines[1:], 1):
        obj = json.loads(raw) if raw.strip() else {}
        if "id" not in obj:
            continue
        if obj["id"] in seen:
            cut = sum(len(x) + 1 for x in lines[:i - 1])  # before the line preceding the re-written copy
            break
        seen.add(obj.get("id"))
    assert cut is not None
    chats = tmp_path / ".gemini" / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    work = chats / src.name
    work.write_bytes(data[:cut])
    db = tmp_path / "split.db"
    do_import(db, tmp_path / ".gemini")
    first = scalar(db, "SELECT COUNT(*) FROM messages")
    with open(work, "ab") as f:
        f.write(data[cut:])
    again = do_import(db, tmp_path / ".gemini")
    assert again.bytes_read < len(data) - cut + 4096  # the new bytes (and the windows checked), not the file
    whole = tmp_path / "whole.db"
    do_import(whole, tmp_path / ".gemini")  # (a fresh archive: one read)
    assert again.messages_added == scalar(whole, "SELECT COUNT(*) FROM messages") - first
    for table in ("sessions", "messages", "tool_calls", "entries"):
        assert dump(db)[table] == dump(whole)[table], table
    # the re-written message: counted once, its earlier copy kept as a revision
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") >= 1
    h, messages, _ = _chat_messages(src)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'assistant'") == sum(
        1 for m in messages if m["type"] == "gemini")


# -- made-up chats ------------------------------------------------------------------------------------

SID = "0a1b2c3d-0000-4000-8000-00000000000a"
SID2 = "0a1b2c3d-0000-4000-8000-00000000000b"


def ts(n: int) -> str:
    return f"2026-05-01T10:{n // 60:02d}:{n % 60:02d}.000Z"


class Chat:
    """A made-up Gemini CLI chat: messages in the chat-record format."""

    def __init__(self, sid: str = SID, kind: str = "main"):
        self.sid, self.kind, self.messages, self.n = sid, kind, [], 0

    def _id(self) -> str:
        self.n += 1
        return f"{self.n:08x}-1111-4222-8333-444455556666"

    def user(self, text: str, type_: str = "user") -> dict:
        m = {"id": self._id(), "timestamp": ts(self.n), "type": type_, "content": [{"text": text}]}
        self.messages.append(m)
        return m

    def notice(self, type_: str, text: str) -> dict:
        m = {"id": self._id(), "timestamp": ts(self.n), "type": type_, "content": text}
        self.messages.append(m)
        return m

    def gemini(self, text: str, calls=(), thoughts=(("Planning", "I will look first."),), tokens=(1000, 50, 400, 20)):
        inp, out, cached, thought = tokens
        m = {"id": self._id(), "timestamp": ts(self.n), "type": "gemini", "content": text,
             "thoughts": [{"subject": s, "description": d, "timestamp": ts(self.n)} for s, d in thoughts],
             "tokens": {"input": inp, "output": out, "cached": cached, "thoughts": thought, "tool": 0,
                        "total": inp + out + thought},
             "model": "gemini-2.5-pro"}
        if calls:
            m["toolCalls"] = [self.call(*c) for c in calls]
        self.messages.append(m)
        return m

    def call(self, name: str, args: dict, output: str, status: str = "success") -> dict:
        cid = f"{name}_{1777000000000 + self.n}_{len(args)}"
        return {"id": cid, "name": name, "args": args, "status": status, "timestamp": ts(self.n),
                "result": [{"functionResponse": {"id": cid, "name": name, "response": {"output": output}}}],
                "resultDisplay": output, "displayName": name, "description": "", "renderOutputAsMarkdown": False}

    def document(self) -> dict:
        return {"sessionId": self.sid, "projectHash": "ab" * 32, "startTime": ts(0), "lastUpdated": ts(self.n),
                "messages": self.messages, "kind": self.kind}

    def write_json(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.document(), indent=2))
        return path

    def jsonl_lines(self) -> list[bytes]:
        """Header, messages, $set lines; a message with tool calls written first without them, then again."""
        head = {k: v for k, v in self.document().items() if k != "messages"}
        out = [head]
        for m in self.messages:
            if "toolCalls" in m:
                out.append({k: v for k, v in m.items() if k != "toolCalls"})
                out.append({"$set": {"lastUpdated": m["timestamp"]}})
            out.append(m)
            out.append({"$set": {"lastUpdated": m["timestamp"]}})
        return [json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in out]

    def write_jsonl(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(self.jsonl_lines()))
        return path


def chats_dir(root: Path, project: str = "demo") -> Path:
    return root / ".gemini" / "tmp" / project / "chats"


def conversation() -> Chat:
    c = Chat()
    c.user("Please list the files")
    c.gemini("", calls=[(SHELL, {"command": "ls -la", "description": "list"},
                         "Output: total 0\nExit Code: 2\nProcess Group PGID: 77"),
                        ("read_file", {"file_path": "/srv/a.txt"}, "alpha")])
    c.gemini("There are no files here.", calls=())
    return c


def test_a_json_chat_maps_to_the_vocabulary(tmp_path):
    c = conversation()
    c.user("System: Please continue.")
    c.notice("info", "Request cancelled.")
    c.notice("error", "Quota exceeded.")
    c.write_json(chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.json")
    (tmp_path / ".gemini" / "tmp" / "demo" / ".project_root").write_text("/srv/demo\n")
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / ".gemini")
    assert (report.files_imported, report.files_failed) == (1, 0)
    assert rows(db, "SELECT role, native_role, is_context, is_error FROM messages ORDER BY seq, id") == [
        ("user", "user", 0, 0), ("assistant", "gemini", 0, 0), ("toolResult", "functionResponse", 0, 0),
        ("toolResult", "functionResponse", 0, 0), ("assistant", "gemini", 0, 0), ("system", "user", 1, 0),
        ("system", "info", 1, 0), ("system", "error", 1, 1)]
    assert rows(db, "SELECT session_uuid, cwd, project, started_at, times_approximate FROM sessions") == [
        (SID, "/srv/demo", "demo", "2026-05-01 10:00:00.000", 0)]
    calls = rows(db, "SELECT tool_name, command, exit_code, result_preview, is_error FROM tool_calls ORDER BY id")
    assert calls == [(SHELL, "ls -la", 2, "Output: total 0\nExit Code: 2\nProcess Group PGID: 77", 0),
                     ("read_file", None, None, "alpha", 0)]
    # usage: input without the cached part, thoughts counted as output; priced from the table
    assert rows(db, "SELECT input_tokens, output_tokens, cache_read_tokens, total_tokens, cost_source, provider, "
                    "model FROM messages WHERE role = 'assistant' ORDER BY seq") == [
        (600, 70, 400, 1070, "computed", "google", "gemini-2.5-pro")] * 2
    thinking = json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE role = 'assistant' ORDER BY seq"))
    assert thinking[0] == {"type": "thinking", "thinking": "**Planning**\n\nI will look first.", "subject": "Planning",
                           "timestamp": ts(2)}
    assert [b["type"] for b in thinking] == ["thinking", "toolCall", "toolCall"]
    # one chain, in order
    chain = rows(db, "SELECT message_uuid, parent_message_uuid FROM messages ORDER BY seq, id")
    assert chain[0][1] is None and all(chain[i][1] == chain[i - 1][0] for i in range(1, len(chain)))
    # re-importing an unchanged file reads nothing; a rewritten one (a message added) adds just that
    assert do_import(db, tmp_path / ".gemini").bytes_read == 0
    c.gemini("One more.")
    c.write_json(chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.json")
    assert do_import(db, tmp_path / ".gemini").messages_added == 1
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions WHERE entry_uuid <> '@header'") == 0


def test_an_appended_jsonl_line_is_all_that_is_read(tmp_path):
    c = conversation()
    path = c.write_jsonl(chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.jsonl")
    db = tmp_path / "a.db"
    do_import(db, path.parent)
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 5  # user, 2 gemini (one written twice), 2 results
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 0  # the copies of one read: the last one only
    size = path.stat().st_size
    m = c.user("And now the hidden ones")
    line = json.dumps(m).encode() + b"\n"
    with open(path, "ab") as f:
        f.write(line)
    again = do_import(db, path.parent)
    assert again.messages_added == 1 and again.bytes_read <= len(line) + 2 * 1024
    assert path.stat().st_size == size + len(line)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == 6


def test_a_truncated_last_line_is_pending_then_imported_once(tmp_path):
    c = conversation()
    lines = c.jsonl_lines()
    path = chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:-1] + lines[-2][:10])  # a half-written line
    db = tmp_path / "a.db"
    first = do_import(db, path.parent)
    assert first.files_failed == 0 and first.pending_lines == 1
    path.write_bytes(b"".join(lines))
    do_import(db, path.parent)
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 5
    assert scalar(db, "SELECT pending_lines FROM parsed_files") == 0


def test_a_truncated_json_chat_fails_clearly_and_loses_nothing(tmp_path):
    c = conversation()
    path = c.write_json(chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.json")
    db = tmp_path / "a.db"
    do_import(db, path.parent)
    before = dump(db)["messages"]
    text = json.dumps(c.document())
    path.write_text(text[: len(text) // 2])
    report = do_import(db, path.parent)
    assert report.files_failed == 1
    status, message = rows(db, "SELECT status, error_message FROM parsed_files")[0]
    assert status == "failed" and "half-written" in message and "\n" not in message
    assert "list the files" not in message  # never the content
    assert dump(db)["messages"] == before  # nothing archived is lost
    c.write_json(path)
    assert do_import(db, path.parent).files_failed == 0


def test_unknown_records_are_entries_not_messages(tmp_path):
    c = conversation()
    c.messages.insert(1, {"id": "ffff0000-1111-4222-8333-444455556666", "timestamp": ts(1), "type": "compression",
                          "content": "summary of the chat so far"})
    c.messages.insert(2, {"id": "ffff0001-1111-4222-8333-444455556666", "timestamp": ts(1), "type": {"not": "a name"},
                          "content": 7})  # (a type that is no name: an entry, never a crash)
    lines = c.jsonl_lines()
    lines.insert(2, b'{"note":"a line of no known shape"}\n')
    path = chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines))
    db = tmp_path / "a.db"
    assert do_import(db, path.parent).files_failed == 0
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 5
    types = Counter(t for (t,) in rows(db, "SELECT entry_type FROM entries"))
    assert types["compression"] == 1 and types["unknown"] == 2 and types["$set"] == 6
    # each record of a type the kind does not know is marked so (docs/sources.md, "Unknown records"); $set is known
    assert Counter(rows(db, "SELECT entry_type, custom_type FROM entries WHERE custom_type IS NOT NULL")) == {
        ("compression", "unknown"): 1, ("unknown", "unknown"): 2}


def test_a_real_chat_whose_type_key_is_renamed_is_warned_about(samples, tmp_path):
    import doctor_check as dc

    chats = sorted(samples.rglob("chats/session-*.json"))
    assert chats
    home = tmp_path / "home"
    target = home / ".gemini" / "tmp" / "proj" / "chats" / chats[0].name
    target.parent.mkdir(parents=True)
    # the format changed: every message's "type" key is now called "kind"
    target.write_text(chats[0].read_text().replace('"type":', '"kind":'))
    dc.assert_warned(dc.unrecognised(home), KIND)
    doctor = dc.doctor(home, KIND)
    assert [u["type"] for u in doctor["unknown_types"]] == ["unknown"]
    # the same chat as written: read, no warning
    home2 = tmp_path / "home2"
    (home2 / ".gemini" / "tmp" / "proj" / "chats").mkdir(parents=True)
    shutil.copyfile(chats[0], home2 / ".gemini" / "tmp" / "proj" / "chats" / chats[0].name)
    assert dc.unrecognised(home2) == []


def test_the_same_session_in_two_files_is_one_session(tmp_path):
    c = conversation()
    early = Chat()
    early.messages = [dict(m) for m in c.messages[:2]]
    early.n = 2
    early.write_json(chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.json")
    c.write_json(chats_dir(tmp_path) / "session-2026-05-01T10-01-0a1b2c3d.json")
    db = tmp_path / "a.db"
    do_import(db, tmp_path / ".gemini")
    assert rows(db, "SELECT session_uuid, message_count FROM sessions") == [(SID, 5)]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE call_key IS NOT NULL AND usage_counted = 1") == 2
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls") == 2


def test_subagents_logs_and_checkpoints(tmp_path):
    c = conversation()
    c.write_json(chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.json")
    sub = Chat("x7k2p9", kind="subagent")
    sub.user("Investigate the layout")
    sub.gemini("Done.", calls=[("complete_task", {"result": "ok"}, "ok")])
    sub.write_json(chats_dir(tmp_path) / SID / "x7k2p9.json")
    project = tmp_path / ".gemini" / "tmp" / "demo"
    (project / "logs.json").write_text(json.dumps([
        {"sessionId": SID, "messageId": 0, "type": "user", "message": "Please list the files", "timestamp": ts(1)},
        {"sessionId": SID2, "messageId": 0, "type": "user", "message": "an older chat", "timestamp": ts(0)}]))
    (project / "checkpoints").mkdir()
    (project / "checkpoints" / "2026-05-01T10-02-00_000Z-a.txt-replace.json").write_text(json.dumps({
        "toolCall": {"name": "replace", "args": {"file_path": "a.txt"}}, "commitHash": "0" * 40,
        "messageId": f"{SID}########2", "clientHistory": [{"role": "user", "parts": [{"text": "hi"}]}]}))
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / ".gemini")
    assert (report.files_imported, report.files_failed) == (4, 0)
    assert rows(db, "SELECT session_uuid, parent_session_uuid, session_type, message_count FROM sessions "
                    "ORDER BY session_uuid") == [
        (SID, None, "normal", 5), (f"{SID}:x7k2p9", SID, "subagent", 3), (SID2, None, "logs", 0)]
    assert rows(db, "SELECT session_uuid, entry_type, entry_uuid FROM entries ORDER BY 1, 2") == [
        (SID, "checkpoint", "checkpoint:2026-05-01T10-02-00_000Z-a.txt-replace"), (SID, "log", "log:0"),
        (SID2, "log", "log:0")]
    # the chat decides its session, not the logs or the checkpoint (read after it)
    assert scalar(db, "SELECT file_path FROM sessions WHERE session_uuid = ?", (SID,)).endswith(".json")
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0


def test_other_kinds_are_not_claimed(tmp_path):
    # Qwen Code's old layout: the same shape under ~/.qwen/tmp/, the model's messages typed "qwen"
    qwen = tmp_path / "q" / ".qwen" / "tmp" / ("cd" * 32) / "chats"
    doc = Chat().document()
    doc["messages"] = [{"id": "1", "timestamp": ts(1), "type": "user", "content": "hi"},
                       {"id": "2", "timestamp": ts(2), "type": "qwen", "content": "hello", "thoughts": []}]
    qwen.mkdir(parents=True)
    (qwen / "session-2025-11-15T12-30-af806c55.json").write_text(json.dumps(doc))
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "q" / ".qwen")
    do_import(db, qwen)
    do_import(db, qwen / "session-2025-11-15T12-30-af806c55.json")
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = ?", (KIND,)) == 0
    # a JSON file in a Gemini chats/ folder that is no chat: ignored, saying why
    chats = chats_dir(tmp_path / "g")
    chats.mkdir(parents=True)
    (chats / "notes.json").write_text(json.dumps({"some": "thing"}))
    db2 = tmp_path / "b.db"
    report = do_import(db2, tmp_path / "g" / ".gemini")
    assert report.files_ignored == 1 and scalar(db2, "SELECT COUNT(*) FROM sessions") == 0
    assert "not a Gemini CLI transcript" in scalar(db2, "SELECT error_message FROM parsed_files")


def test_a_message_without_a_time_is_dated_approximately(tmp_path):
    c = conversation()
    del c.messages[2]["timestamp"]
    c.write_json(chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.json")
    db = tmp_path / "a.db"
    do_import(db, tmp_path / ".gemini")
    assert rows(db, "SELECT timestamp, time_approximate FROM messages WHERE role = 'assistant' ORDER BY seq") == [
        ("2026-05-01 10:00:02.000", 0), ("2026-05-01 10:00:02.000", 1)]
    assert scalar(db, "SELECT times_approximate FROM sessions") == 1


def test_import_over_ssh_equals_a_local_import(samples, tmp_path):
    from sshd import SSHServer, require_sshd
    from test_ssh import import_config, write_config

    require_sshd()
    root = next(samples.glob("AnthonyontheHub__*"))
    server = SSHServer(tmp_path / "sshd").start()
    try:
        config = write_config(tmp_path, server, [
            {"name": "box", "host": "127.0.0.1", "port": server.port, "user": server.user,
             "identity_file": str(server.user_key), "paths": [str(root)]}])
        first = import_config(config)
        assert first.ok, [s.error for s in first.servers]
        assert first.servers[0].where.startswith("ssh")
        second = import_config(config)
        assert second.ok and second.totals().files_imported == 0
    finally:
        server.stop()
    local = tmp_path / "local.db"
    do_import(local, root, server="box")
    got, want = dump(tmp_path / "ssh.db"), dump(local)
    assert got["messages"] and got == want


def test_the_snapshot_renders_a_gemini_session(tmp_path):
    from importer.snapshot import export_snapshot
    from test_explorer import Site

    conversation().write_json(chats_dir(tmp_path) / "session-2026-05-01T10-00-0a1b2c3d.json")
    archive = tmp_path / "archive.db"
    do_import(archive, tmp_path / ".gemini")
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    site = Site(tmp_path / "snapshot.db")
    sid = scalar(tmp_path / "snapshot.db", "SELECT id FROM sessions WHERE session_uuid = ?", (SID,))
    r = site.get(f"/-/agentbase/session/{sid}")
    assert r.status_code == 200
    html = r.text
    assert "Please list the files" in html and "There are no files here." in html
    assert "ls -la" in html and "alpha" in html and "ab-turn-assistant" in html
    assert "no result recorded" not in html
    facts = scalar(tmp_path / "snapshot.db", "SELECT COUNT(*) FROM sessions WHERE source = ?", (KIND,))
    assert facts == 1


def test_discovery_one_file_agent_and_default_paths(samples, tmp_path, monkeypatch):
    from importer.sources import all_sources
    from importer.sources.fs import FileSystem

    # every unit of the sample trees is this kind's, and a tree is found from each of its levels
    assert {u.source.kind for u in discover([str(samples)]).units} == {KIND}
    path = conversation().write_json(chats_dir(tmp_path / "h") / "session-2026-05-01T10-00-0a1b2c3d.json")
    home = tmp_path / "h" / ".gemini"
    for where in (tmp_path / "h", home, home / "tmp", home / "tmp" / "demo", path.parent, path):
        units = discover([str(where)]).units
        assert [(u.source.kind, u.key) for u in units] == [(KIND, str(path))], where
    assert {u.agent_id for u in discover([str(home)], agent="laptop-gemini").units} == {"laptop-gemini"}
    # one file named directly: imported as its session
    db = tmp_path / "a.db"
    assert do_import(db, path).files_imported == 1
    assert rows(db, "SELECT source, session_uuid, message_count FROM sessions") == [(KIND, SID, 5)]
    gemini = next(s for s in all_sources() if s.kind == KIND)
    monkeypatch.setenv("HOME", str(tmp_path / "empty"))
    assert gemini.candidates() == ["~/.gemini"] and gemini.default_paths(FileSystem()) == []
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert gemini.default_paths(FileSystem()) == ["~/.gemini"]


def test_mariadb_holds_the_same_rows(samples, tmp_path, mariadb_url):
    from transcripts import dump_store

    root = next(samples.glob("AnthonyontheHub__*"))
    sqlite_url = f"sqlite:///{tmp_path / 'a.db'}"
    for url in (sqlite_url, mariadb_url):
        store = open_store(url)
        try:
            assert run_import(store, [str(root)], server="box").files_failed == 0
        finally:
            store.close()
    got = dump_store(mariadb_url)
    assert got["messages"] and got == dump_store(sqlite_url)


def test_samples_export_and_every_session_renders(imported, tmp_path):
    from importer.snapshot import export_snapshot
    from test_explorer import Site

    db, _ = imported
    store = open_store(f"sqlite:///{db}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    site = Site(tmp_path / "snapshot.db")
    sessions = rows(tmp_path / "snapshot.db", "SELECT id, message_count FROM sessions")
    assert len(sessions) == HAND["sessions"]
    for session_id, count in sessions:
        r = site.get(f"/-/agentbase/session/{session_id}")
        assert r.status_code == 200, session_id
        if count:
            assert "ab-turn-assistant" in r.text and "no result recorded" not in r.text, session_id


def test_doctor_lists_no_version_as_the_samples_hold_none(samples, imported, tmp_path):
    import doctor_check as dc

    # the oracle: a chat's header (the .json session object, a .jsonl's first line) saying a version
    want = set()
    for chat in samples.rglob("chats/**/*.json*"):
        text = chat.read_text()
        head = json.loads(text.splitlines()[0] if chat.suffix == ".jsonl" else text)
        for key in ("version", "cliVersion", "geminiCliVersion"):
            if isinstance(head.get(key), str):
                want.add(head[key])
    db, _report = imported
    assert dc.doctor_versions(tmp_path / "home", KIND, db) == want == set()
