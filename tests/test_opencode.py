"""OpenCode (sst/opencode; importer/sources/opencode.py): the real samples in
../shared/other-samples-2/opencode (an ``opencode.db`` of 1.17 and a partial, reconstructed JSON
storage of 0.6.5), and made-up databases and storage trees written here for the variants.

Expected figures are established independently of the importer: ``count_db`` and
``count_storage`` read the files with the plain sqlite3 and json modules and count what
docs/opencode.md's rules say (they share no code with the importer). The samples are real
people's data: assertions on them compare counts and booleans only, never their text.
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

from importer.sources import Scope, discover  # noqa: E402
from importer.sources import opencode as O  # noqa: E402
from importer.sources import readonly  # noqa: E402
from importer.sources.base import Discovery  # noqa: E402
from importer.sources.fs import LOCAL  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT.parent / "shared" / "other-samples-2" / "opencode"
DB_SAMPLE = "richardaiand__aiand-portfolio-web/.local/share/opencode/opencode.db"
STORAGE_SAMPLE = "theoneand33__.local-opencode/storage"
CRUSH_SAMPLE = REPO_ROOT.parent / "shared" / "other-samples-2" / "opencode-go" / "WismutHansen__lst" / ".opencode"
KIND = "opencode"


def samples() -> Path:
    if not SAMPLES.is_dir():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"OpenCode samples missing under CI: {SAMPLES}")
        pytest.skip(f"no OpenCode samples at {SAMPLES}")
    return SAMPLES


# -- the independent counter -----------------------------------------------------------------
# From docs/opencode.md's rules only. A session: a session row / a storage/session/*/ses_*.json
# file. A user message: one user row when it has a typed part (text that is not synthetic, or a
# file) or no synthetic text at all; each synthetic text part is a system row. An assistant
# message: one assistant row per step (a step ends at its step-finish; parts with text, reasoning
# or a tool after the last step-finish, or no step-finish at all, are one more step). A tool part
# is a tool call (distinct call ids per session); one whose state is completed or error has a
# result; a shell call is a bash call. Usage: each step-finish once (output + reasoning as output).


def _new_counts() -> dict:
    return {"sessions": 0, "user": 0, "system": 0, "assistant": 0, "toolResult": 0, "tool_calls": 0,
            "shell_calls": 0, "exit_codes": 0, "model_calls": 0, "input": 0, "output": 0, "cacheRead": 0,
            "cacheWrite": 0, "cost": 0.0, "thinking": 0}


def _count_message(c: dict, message: dict, parts: list[dict], calls: set) -> None:
    role = message.get("role")
    if role == "user":
        synthetic = [p for p in parts if p.get("type") == "text" and p.get("synthetic") is True]
        typed = [p for p in parts if (p.get("type") == "text" and p.get("synthetic") is not True)
                 or p.get("type") == "file"]
        c["user"] += 1 if typed or not synthetic else 0
        c["system"] += len(synthetic)
        return
    if role != "assistant":
        return
    finishes = [i for i, p in enumerate(parts) if p.get("type") == "step-finish"]
    trailing = parts[finishes[-1] + 1:] if finishes else parts
    steps = len(finishes) + (1 if not finishes or any(
        p.get("type") in ("text", "reasoning", "tool") for p in trailing) else 0)
    c["assistant"] += steps
    step_has_thinking = 0
    for p in parts:
        if p.get("type") == "reasoning":
            step_has_thinking = 1
        if p.get("type") == "step-finish":
            c["thinking"] += step_has_thinking
            step_has_thinking = 0
    c["thinking"] += step_has_thinking
    for p in parts:
        kind = p.get("type")
        if kind == "tool":
            calls.add(p["callID"])
            state = p.get("state") or {}
            if state.get("status") in ("completed", "error"):
                c["toolResult"] += 1
                if p["tool"] == "bash" and (state.get("metadata") or {}).get("exit") is not None:
                    c["exit_codes"] += 1
        elif kind == "step-finish":
            t = p["tokens"]
            c["model_calls"] += 1
            c["input"] += t["input"]
            c["output"] += t["output"] + t.get("reasoning", 0)
            c["cacheRead"] += t["cache"]["read"]
            c["cacheWrite"] += t["cache"]["write"]
            c["cost"] += p.get("cost") or 0


def count_db(path: Path, c: dict | None = None) -> dict:
    c = c if c is not None else _new_counts()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        for (sid,) in conn.execute("SELECT id FROM session"):
            c["sessions"] += 1
            calls: set = set()
            shell: set = set()
            parts: dict = {}
            for mid, data in conn.execute("SELECT message_id, data FROM part WHERE session_id = ? ORDER BY id", (sid,)):
                p = json.loads(data)
                parts.setdefault(mid, []).append(p)
                if p.get("type") == "tool" and p.get("tool") == "bash":
                    shell.add(p["callID"])
            for mid, data in conn.execute("SELECT id, data FROM message WHERE session_id = ? ORDER BY id", (sid,)):
                _count_message(c, json.loads(data), parts.get(mid, []), calls)
            c["tool_calls"] += len(calls)
            c["shell_calls"] += len(shell)
    finally:
        conn.close()
    return c


def count_storage(storage: Path, c: dict | None = None) -> dict:
    c = c if c is not None else _new_counts()
    for session in sorted((storage / "session").glob("*/ses_*.json")):
        c["sessions"] += 1
        sid = json.loads(session.read_text())["id"]
        calls: set = set()
        shell: set = set()
        for mfile in sorted((storage / "message" / sid).glob("msg_*.json")):
            message = json.loads(mfile.read_text())
            parts = []
            for pfile in sorted((storage / "part" / message["id"]).glob("prt_*.json")):
                try:
                    parts.append(json.loads(pfile.read_text()))
                except ValueError:
                    continue  # half-written: not counted
            shell.update(p["callID"] for p in parts if p.get("type") == "tool" and p.get("tool") == "bash")
            _count_message(c, message, parts, calls)
        c["tool_calls"] += len(calls)
        c["shell_calls"] += len(shell)
    return c


def archive_counts(db: Path) -> dict:
    by_role = dict(rows(db, "SELECT role, COUNT(*) FROM messages WHERE source = ? GROUP BY 1", (KIND,)))
    usage = rows(db, "SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), "
                     "SUM(cache_write_tokens), SUM(cost_usd) FROM messages WHERE source = ? AND call_key IS NOT NULL "
                     "AND usage_counted = 1", (KIND,))[0]
    return {
        "sessions": scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = ?", (KIND,)),
        **{r: by_role.get(r, 0) for r in ("user", "system", "assistant", "toolResult")},
        "tool_calls": scalar(db, "SELECT COUNT(DISTINCT session_id || ':' || call_id) FROM tool_calls "
                                 "WHERE source = ?", (KIND,)),
        "shell_calls": scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE source = ? AND command IS NOT NULL", (KIND,)),
        "exit_codes": scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE source = ? AND exit_code IS NOT NULL", (KIND,)),
        "model_calls": usage[0], "input": usage[1] or 0, "output": usage[2] or 0, "cacheRead": usage[3] or 0,
        "cacheWrite": usage[4] or 0, "cost": usage[5] or 0.0,
        "thinking": scalar(db, "SELECT COUNT(*) FROM messages WHERE source = ? AND has_thinking = 1", (KIND,)),
    }


def _same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for k in want:
        if k == "cost":
            assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-12), k
        else:
            assert got[k] == want[k], f"{k}: archive {got[k]}, independent count {want[k]}"


# -- the samples -----------------------------------------------------------------------------


def test_samples_import_and_match_the_independent_count(tmp_path):
    root = samples()
    want = count_storage(root / STORAGE_SAMPLE, count_db(root / DB_SAMPLE))
    db = tmp_path / "a.db"
    report = do_import(db, root, server="samples")
    assert (report.files_failed, report.files_ignored) == (0, 0)
    _same(archive_counts(db), want)
    assert want["sessions"] == 4 and want["assistant"] > 0 and want["model_calls"] > 0
    # OpenCode's own per-session sums are the sums of the step-finish parts: each step counted once
    conn = sqlite3.connect(f"file:{root / DB_SAMPLE}?mode=ro", uri=True)
    own = conn.execute("SELECT SUM(tokens_input), SUM(tokens_output + tokens_reasoning), SUM(cost) "
                       "FROM session").fetchone()
    events = conn.execute("SELECT COUNT(*) FROM event").fetchone()[0]
    conn.close()
    got = archive_counts(db)
    assert (got["input"], got["output"]) == own[:2] and got["cost"] == pytest.approx(own[2])
    # the event log (a second copy of the history) adds nothing: every message row comes from message/part
    assert events > 0 and scalar(db, "SELECT COUNT(*) FROM messages") == sum(
        want[r] for r in ("user", "system", "assistant", "toolResult"))
    # recorded cost, kept as recorded; sessions' values
    assert rows(db, "SELECT DISTINCT cost_source FROM messages WHERE call_key IS NOT NULL") == [("recorded",)]
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE cwd IS NULL OR started_at IS NULL") == 0
    assert scalar(db, "SELECT COUNT(DISTINCT agent_id) FROM sessions") == 1
    assert scalar(db, "SELECT agent_id FROM sessions LIMIT 1") == "opencode"
    assert_vocabulary(db, KIND, usage=True, shell_exit_codes=True, tool_results=True)
    # a rerun reads nothing
    again = do_import(db, root, server="samples")
    assert (again.messages_added, again.entries_added, again.files_failed) == (0, 0, 0)


def test_samples_stats_json_by_source(tmp_path):
    root = samples()
    want = count_storage(root / STORAGE_SAMPLE, count_db(root / DB_SAMPLE))
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    proc = ic.run_cli(["import", root, "--db", url, "-q"])
    assert proc.returncode == 0, ic.describe(proc, "import")
    mine = ic.stats(url)["by_source"][KIND]
    assert mine["sessions"] == want["sessions"]
    assert mine["messages_by_role"] == {r: want[r] for r in ("assistant", "system", "toolResult", "user") if want[r]}
    assert mine["messages_by_native_role"] == {"assistant": want["assistant"], "tool": want["toolResult"],
                                               "user": want["user"] + want["system"]}
    assert (mine["tool_calls"], mine["shell_calls"], mine["model_calls"]) == (
        want["tool_calls"], want["shell_calls"], want["model_calls"])
    assert mine["messages_with_thinking"] == want["thinking"]
    u = mine["usage"]
    assert (u["input"], u["output"], u["cacheRead"], u["cacheWrite"]) == (
        want["input"], want["output"], want["cacheRead"], want["cacheWrite"])
    assert u["cost_total"] == pytest.approx(want["cost"], rel=1e-6)


def test_the_credential_tables_and_the_event_log_are_refused(tmp_path):
    root = samples()
    copy = tmp_path / "opencode.db"
    shutil.copy(root / DB_SAMPLE, copy)
    conn = readonly.connect(copy, O.READABLE)
    try:
        assert conn.execute("SELECT COUNT(*) FROM session").fetchone()[0] > 0
        for table in ("account", "credential", "control_account", "session_share", "event"):
            with pytest.raises(sqlite3.DatabaseError, match="prohibited|not authorized"):
                conn.execute(f"SELECT * FROM {table}").fetchall()
    finally:
        conn.close()
    assert not set(O.READ_TABLES) & set(O.NEVER_READ)


def test_the_partial_reconstructed_storage_sample(tmp_path):
    """Its assistant message file is not in the copy: the parts of a message without its file are not read."""
    root = samples() / STORAGE_SAMPLE
    db = tmp_path / "s.db"
    report = do_import(db, root.parent)
    assert (report.files_imported, report.files_failed) == (1, 0)
    want = count_storage(root)
    _same(archive_counts(db), want)
    assert (want["user"], want["assistant"]) == (1, 0)
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE title IS NOT NULL AND cwd IS NOT NULL") == 1


# -- made-up databases and storage trees -----------------------------------------------------

T0 = 1_760_000_000_000
SECRET = "sk-planted-0penc0de-secret-DO-NOT-IMPORT"

SCHEMA = (
    "CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, time_created integer, time_updated integer)",
    "CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text, slug text NOT NULL, "
    "directory text NOT NULL, title text NOT NULL, version text NOT NULL, time_created integer NOT NULL, "
    "time_updated integer NOT NULL, time_archived integer, agent text, model text, cost real, tokens_input integer)",
    "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL, "
    "time_updated integer NOT NULL, data text NOT NULL)",
    "CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, "
    "time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL)",
    "CREATE TABLE event (id text PRIMARY KEY, aggregate_id text NOT NULL, seq integer NOT NULL, type text NOT NULL, "
    "data text NOT NULL)",
    "CREATE TABLE account (id text PRIMARY KEY, email text NOT NULL, url text NOT NULL, access_token text NOT NULL, "
    "refresh_token text NOT NULL)",
    "CREATE TABLE credential (id text PRIMARY KEY, label text NOT NULL, value text NOT NULL)",
    "CREATE TABLE control_account (email text NOT NULL, access_token text NOT NULL)",
    "CREATE TABLE session_share (session_id text PRIMARY KEY, secret text NOT NULL, url text NOT NULL)",
)


class Conversation:
    """One made-up session: messages and parts as OpenCode writes them (ids sort by time)."""

    def __init__(self, sid: str = "ses_0001made", directory: str = "/home/dev/proj", parent: str | None = None,
                 title: str = "Fix the build"):
        self.sid = sid
        self.directory = directory
        self.parent = parent
        self.title = title
        self.messages: list[tuple[str, int, dict]] = []  # (id, time, data)
        self.parts: list[tuple[str, str, int, dict]] = []  # (id, message id, time, data)
        self.n = 0

    def _id(self, prefix: str) -> tuple[str, int]:
        self.n += 1
        return f"{prefix}_{self.sid[4:]}{self.n:05d}", T0 + self.n * 1000

    def user(self, text: str, synthetic: str | None = None) -> str:
        mid, t = self._id("msg")
        self.messages.append((mid, t, {"role": "user", "time": {"created": t}, "agent": "build",
                                       "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4"}}))
        self.part(mid, {"type": "text", "text": text})
        if synthetic is not None:
            self.part(mid, {"type": "text", "text": synthetic, "synthetic": True})
        return mid

    def assistant(self, steps: list[list[dict]], usages: list[dict | None]) -> str:
        """``steps``: each step's parts (between step-start and step-finish); ``usages``: each
        step's tokens and cost (None: the step has no step-finish yet)."""
        mid, t = self._id("msg")
        last = [u for u in usages if u is not None]
        nothing = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
        tokens = last[-1]["tokens"] if last else nothing
        data = {"role": "assistant", "parentID": self.messages[-1][0], "mode": "build", "path": {"cwd": self.directory,
                "root": self.directory}, "cost": last[-1]["cost"] if last else 0, "tokens": tokens,
                "modelID": "claude-sonnet-4", "providerID": "anthropic", "time": {"created": t}}
        self.messages.append((mid, t, data))
        for step, usage in zip(steps, usages):
            self.part(mid, {"type": "step-start"})
            for p in step:
                self.part(mid, p)
            if usage is not None:
                self.part(mid, {"type": "step-finish", "reason": "tool-calls", **usage})
        return mid

    def part(self, mid: str, data: dict) -> str:
        pid, t = self._id("prt")
        self.parts.append((pid, mid, t, data))
        return pid

    # -- writers ---------------------------------------------------------------------------

    def write_db(self, path: Path, events: bool = True) -> Path:
        new = not path.exists()
        conn = sqlite3.connect(path)
        if new:
            for sql in SCHEMA:
                conn.execute(sql)
            conn.execute("INSERT INTO project VALUES ('global', '/', ?, ?)", (T0, T0))
            conn.execute("INSERT INTO account VALUES ('acc', 'dev@example.org', 'https://api.example.org', ?, ?)",
                         (SECRET, SECRET))
            conn.execute("INSERT INTO credential VALUES ('c1', 'key', ?)", (SECRET,))
        conn.execute("INSERT OR REPLACE INTO session (id, project_id, parent_id, slug, directory, title, version, "
                     "time_created, time_updated, model) VALUES (?, 'global', ?, 'slug', ?, ?, '1.17.3', ?, ?, ?)",
                     (self.sid, self.parent, self.directory, self.title, T0, T0 + self.n * 1000,
                      json.dumps({"id": "claude-sonnet-4", "providerID": "anthropic"})))
        for mid, t, data in self.messages:
            conn.execute("INSERT OR REPLACE INTO message VALUES (?, ?, ?, ?, ?)",
                         (mid, self.sid, t, t, json.dumps(data)))
            if events:
                conn.execute("INSERT OR REPLACE INTO event VALUES (?, ?, ?, 'message.updated.1', ?)",
                             ("ev" + mid, self.sid, t, json.dumps({"info": data})))
        for pid, mid, t, data in self.parts:
            conn.execute("INSERT OR REPLACE INTO part VALUES (?, ?, ?, ?, ?, ?)",
                         (pid, mid, self.sid, t, t, json.dumps(data)))
        conn.commit()
        conn.close()
        return path

    def write_storage(self, storage: Path) -> Path:
        (storage / "session" / "global").mkdir(parents=True, exist_ok=True)
        info = {"id": self.sid, "version": "0.6.5", "projectID": "global", "directory": self.directory,
                "title": self.title, "time": {"created": T0, "updated": T0 + self.n * 1000}}
        if self.parent:
            info["parentID"] = self.parent
        (storage / "session" / "global" / f"{self.sid}.json").write_text(json.dumps(info, indent=2))
        for mid, _t, data in self.messages:
            folder = storage / "message" / self.sid
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{mid}.json").write_text(json.dumps({"id": mid, "sessionID": self.sid, **data}, indent=2))
        for pid, mid, _t, data in self.parts:
            folder = storage / "part" / mid
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{pid}.json").write_text(json.dumps({"id": pid, "messageID": mid, "sessionID": self.sid,
                                                            **data}, indent=2))
        return storage


def usage(inp: int, out: int, cost: float, reasoning: int = 0, read: int = 0, write: int = 0) -> dict:
    return {"tokens": {"input": inp, "output": out, "reasoning": reasoning, "cache": {"read": read, "write": write}},
            "cost": cost}


def bash(call: str, command: str, exit_code: int | None, status: str = "completed") -> dict:
    state = {"status": status, "input": {"command": command, "description": "run it"},
             "time": {"start": T0 + 1, "end": T0 + 251}}
    if status == "completed":
        state.update(output=f"output of {call}", metadata={"output": "", "exit": exit_code, "truncated": False})
    elif status == "error":
        state.update(error=f"failed: {call}")
    return {"type": "tool", "tool": "bash", "callID": call, "state": state}


def conversation(sid: str = "ses_0001made") -> Conversation:
    c = Conversation(sid)
    c.user("Please run the tests", synthetic="Called the Read tool with the following input: {}")
    c.assistant([[{"type": "reasoning", "text": "Run them first.", "time": {"start": T0}},
                  {"type": "text", "text": "Running the tests."}, bash("call_1", "make test", 2)],
                 [{"type": "text", "text": "They fail; reading the log."},
                  {"type": "tool", "tool": "read", "callID": "call_2",
                   "state": {"status": "completed", "input": {"filePath": "/tmp/log"}, "output": "log text",
                             "time": {"start": T0 + 5, "end": T0 + 9}}}]],
                [usage(9644, 120, 0.03, reasoning=30, read=100), usage(19630, 80, 0.05, write=50)])
    c.user("Thanks")
    c.assistant([[{"type": "text", "text": "Done."}]], [usage(20000, 10, 0.04)])
    return c


def test_a_made_up_database_steps_usage_tools_and_context(tmp_path):
    c = conversation()
    path = c.write_db(tmp_path / "opencode.db")
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path)
    assert report.files_failed == 0
    _same(archive_counts(db), count_db(path))
    # three steps, three model calls: the first message's tokens are its last step's, never doubled
    assert rows(db, "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd "
                    "FROM messages WHERE call_key IS NOT NULL ORDER BY seq") == [
        (9644, 150, 100, 0, 0.03), (19630, 80, 0, 50, 0.05), (20000, 10, 0, 0, 0.04)]
    assert rows(db, "SELECT role, native_role, is_context, is_synthetic FROM messages ORDER BY seq") == [
        ("user", "user", 0, 0), ("system", "user", 1, 1), ("assistant", "assistant", 0, 0),
        ("toolResult", "tool", 0, 0), ("assistant", "assistant", 0, 0), ("toolResult", "tool", 0, 0),
        ("user", "user", 0, 0), ("assistant", "assistant", 0, 0)]
    # the chain: every row's parent is the row before it; all on the active path
    chain = rows(db, "SELECT message_uuid, parent_message_uuid FROM messages ORDER BY seq")
    assert [p for _m, p in chain[1:]] == [m for m, _p in chain[:-1]] and chain[0][1] is None
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    # the shell call: its command, its exit code (2: a failure); the read call is no shell call
    assert rows(db, "SELECT call_id, tool_name, command, exit_code, is_error, duration_ms FROM tool_calls "
                    "ORDER BY call_id") == [
        ("call_1", "bash", "make test", 2, 1, 250), ("call_2", "read", None, None, 0, 4)]
    assert rows(db, "SELECT has_thinking, thinking_text FROM messages WHERE has_thinking = 1") == [
        (1, "Run them first.")]
    s = rows(db, "SELECT title, cwd, project, started_at, model FROM sessions")[0]
    assert s == ("Fix the build", "/home/dev/proj", "proj", "2025-10-09 08:53:20.000", "claude-sonnet-4")
    # the credential tables were never read: the planted secret is nowhere in the archive
    assert SECRET.encode() not in db.read_bytes()
    assert_vocabulary(db, KIND, usage=True, shell_exit_codes=True, tool_results=True)


def test_a_grown_database_reads_only_what_is_new(tmp_path):
    c = conversation()
    path = c.write_db(tmp_path / "opencode.db")
    db = tmp_path / "a.db"
    first = do_import(db, tmp_path)
    before = archive_counts(db)
    # one more exchange: a prompt, an answer with a shell call and its result
    c.user("And the linter?")
    c.assistant([[{"type": "text", "text": "Linting."}, bash("call_3", "make lint", 0)]], [usage(21000, 20, 0.02)])
    c.write_db(path)
    second = do_import(db, tmp_path)
    after = archive_counts(db)
    assert second.messages_added == 3  # user, assistant, toolResult
    assert (after["user"], after["assistant"], after["toolResult"], after["model_calls"], after["input"]) == (
        before["user"] + 1, before["assistant"] + 1, before["toolResult"] + 1, before["model_calls"] + 1,
        before["input"] + 21000)
    # read from the last message on: it (1 message, 3 parts) and the new ones (2 messages, 5 parts)
    assert second.events_read == 4 + 7 < first.events_read + 7
    _same(after, count_db(path))
    chain = rows(db, "SELECT message_uuid, parent_message_uuid FROM messages ORDER BY seq")
    assert [p for _m, p in chain[1:]] == [m for m, _p in chain[:-1]]
    # a change before the last message (a tool that was running completes): the session is read again
    c2 = Conversation("ses_0002made")
    c2.user("Build it")
    c2.assistant([[bash("call_9", "make", None, status="running")]], [usage(500, 5, 0.01)])
    c2.user("Still running?")
    c2.write_db(path)
    do_import(db, tmp_path)
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE call_id = 'call_9' AND result_message_id IS NULL") == 1
    conn = sqlite3.connect(path)
    pid, data = conn.execute("SELECT id, data FROM part WHERE data LIKE '%call_9%'").fetchone()
    done = json.loads(data)
    done["state"] = bash("call_9", "make", 0)["state"]
    conn.execute("UPDATE part SET data = ?, time_updated = ? WHERE id = ?", (json.dumps(done), T0 + 10**6, pid))
    conn.commit()
    conn.close()
    do_import(db, tmp_path)
    assert rows(db, "SELECT exit_code, result_message_id IS NOT NULL FROM tool_calls "
                    "WHERE call_id = 'call_9'") == [(0, 1)]
    _same(archive_counts(db), count_db(path))


def test_a_live_database_is_read_with_what_its_wal_holds(tmp_path):
    path = tmp_path / "opencode.db"
    Conversation("ses_0000seed").write_db(path)  # the schema, in the main file
    holder = sqlite3.connect(path)  # OpenCode, running: the -wal is not checkpointed while it is open
    try:
        assert holder.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        holder.execute("PRAGMA wal_autocheckpoint=0")
        holder.execute("SELECT COUNT(*) FROM session").fetchall()  # holds the wal-index open
        c = conversation()
        c.write_db(path)
        assert (tmp_path / "opencode.db-wal").stat().st_size > 0
        db = tmp_path / "a.db"
        first = do_import(db, tmp_path)
        assert first.files_failed == 0
        assert scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = ?", (c.sid,)) == 8
        _same(archive_counts(db), count_db(path))
        # a write that only grows the -wal is seen by the next run
        c.user("One more thing")
        c.write_db(path)
        again = do_import(db, tmp_path)
        assert again.messages_added == 1
        _same(archive_counts(db), count_db(path))
    finally:
        holder.close()


def test_a_made_up_storage_tree_with_a_half_written_part_and_an_unknown_part(tmp_path):
    c = conversation("ses_0003made")
    mid = c.messages[-1][0]
    c.part(mid, {"type": "patch", "hash": "abc", "files": ["a.py"]})  # a part type this kind folds nowhere
    storage = c.write_storage(tmp_path / "data" / "storage")
    victim = sorted((storage / "part" / c.messages[0][0]).glob("prt_*.json"))[-1]  # the synthetic text part
    whole = victim.read_bytes()
    victim.write_bytes(whole[: len(whole) // 2])  # caught mid-write
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "data")
    assert (report.files_imported, report.files_failed, report.bad_lines) == (1, 0, 1)
    _same(archive_counts(db), count_storage(storage))
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'system'") == 0
    assert rows(db, "SELECT entry_type FROM entries") == [("part.patch",)]
    assert rows(db, "SELECT SUM(input_tokens), COUNT(*) FROM messages WHERE call_key IS NOT NULL") == [
        (9644 + 19630 + 20000, 3)]
    # written whole: the next run reads the session again, and only the missing row is new
    victim.write_bytes(whole)
    again = do_import(db, tmp_path / "data")
    assert (again.messages_added, again.bad_lines) == (1, 0)
    _same(archive_counts(db), count_storage(storage))
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'system'") == 1
    assert_vocabulary(db, KIND, usage=True, shell_exit_codes=True, tool_results=True)


def test_storage_and_database_give_the_same_rows(tmp_path):
    c = conversation()
    (tmp_path / "db").mkdir()
    c.write_db(tmp_path / "db" / "opencode.db")
    c.write_storage(tmp_path / "json" / "storage")
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    do_import(a, tmp_path / "db")
    do_import(b, tmp_path / "json")
    cols = "role, native_role, message_uuid, parent_message_uuid, input_tokens, output_tokens, cost_usd, tool_call_id"
    assert rows(a, f"SELECT {cols} FROM messages ORDER BY seq") == rows(b, f"SELECT {cols} FROM messages ORDER BY seq")


def test_a_sub_agent_names_its_parent_and_the_call_that_started_it(tmp_path):
    parent = Conversation("ses_0010parent")
    parent.user("Explore the repo")
    parent.assistant([[{"type": "tool", "tool": "task", "callID": "call_task",
                        "state": {"status": "completed", "input": {"prompt": "look around"}, "output": "found",
                                  "metadata": {"sessionId": "ses_0011child"}, "time": {"start": T0, "end": T0 + 5}}}]],
                     [usage(100, 10, 0.001)])
    child = Conversation("ses_0011child", parent="ses_0010parent", title="Child session - 2025-10-09T08:53:20.000Z")
    child.user("look around")
    child.assistant([[{"type": "text", "text": "Looked."}]], [usage(50, 5, 0.0005)])
    path = parent.write_db(tmp_path / "opencode.db")
    child.write_db(path)
    db = tmp_path / "a.db"
    do_import(db, tmp_path)
    assert rows(db, "SELECT session_uuid, parent_session_uuid, parent_call_id, title FROM sessions ORDER BY 1") == [
        ("ses_0010parent", None, None, "Fix the build"), ("ses_0011child", "ses_0010parent", "call_task", None)]


def test_other_files_are_not_claimed(tmp_path):
    # opencode-go / Crush keep an opencode.db too: its tables are not this kind's
    go = tmp_path / "proj" / ".opencode"
    go.mkdir(parents=True)
    conn = sqlite3.connect(go / "opencode.db")
    conn.execute("CREATE TABLE goose_db_version (id integer primary key, version_id integer, is_applied integer)")
    conn.execute("CREATE TABLE sessions (id text primary key, title text)")
    conn.execute("CREATE TABLE messages (id text primary key, session_id text, role text, parts text)")
    conn.commit()
    conn.close()
    out = Discovery()
    assert O.SOURCE.find(LOCAL, str(go), Scope("t"), out) is False and out.units == []
    assert not O.SOURCE.claims_file("opencode.db", (go / "opencode.db").read_bytes()[:65536])
    if CRUSH_SAMPLE.is_dir():
        out = Discovery()
        assert O.SOURCE.find(LOCAL, str(CRUSH_SAMPLE), Scope("t"), out) is False
        assert not O.SOURCE.claims_file("opencode.db", (CRUSH_SAMPLE / "opencode.db").read_bytes()[:65536])
    # a SQLite file named opencode.db without OpenCode's tables, named directly: one clear line
    other = tmp_path / "other" / "opencode.db"
    other.parent.mkdir()
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (id integer primary key, body text)")
    conn.commit()
    conn.close()
    db = tmp_path / "a.db"
    report = do_import(db, other)
    assert report.files_failed == 1 and scalar(db, "SELECT COUNT(*) FROM messages") == 0
    (message,) = [m for _k, m in report.failures]
    assert "not an OpenCode (sst/opencode) database" in message and "\n" not in message
    # a JSON file named like a session, outside storage/session/<project>/: not claimed as one
    stray = tmp_path / "stray" / "ses_0001.json"
    stray.parent.mkdir()
    stray.write_text(json.dumps({"id": "ses_0001", "directory": "/x", "projectID": "global"}))
    report = do_import(tmp_path / "b.db", stray)
    assert report.files_ignored == 1 and report.files_imported == 0


def test_paths_accepted_and_the_agent_name(tmp_path):
    c = conversation()
    home = tmp_path / "home"
    data = home / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    c.write_db(data / "opencode.db")
    conversation("ses_0005json").write_storage(data / "storage")
    for path in (home, data, data / "storage", data / "opencode.db"):
        found = discover([str(path)], server="t")
        kinds = Counter(type(u).__name__ for u in found.units)
        assert found.errors == [], path
        assert kinds == (Counter({"OpencodeDB": 1}) if path.name == "opencode.db" else
                         Counter({"StorageSession": 1}) if path.name == "storage" else
                         Counter({"OpencodeDB": 1, "StorageSession": 1})), (path, kinds)
    db = tmp_path / "a.db"
    do_import(db, home, agent="coder")
    assert rows(db, "SELECT DISTINCT agent_id, source FROM sessions") == [("coder", "opencode")]
    assert "~/.local/share/opencode" in O.SOURCE.candidates()


# -- over SSH, and the snapshot ---------------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    from sshd import SSHServer, require_sshd

    require_sshd()
    server = SSHServer(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()


def _import_over_ssh(tmp: Path, sshd, paths: list[Path]):
    import yaml

    from importer.config import load_config
    from importer.sync import import_from_config

    known = tmp / "known_hosts"
    sshd.write_known_hosts(known)
    data = {"database": f"sqlite:///{tmp / 'ssh.db'}", "known_hosts": str(known),
            "ssh_config": str(tmp / "no-ssh-config"), "connect_timeout": 5, "read_timeout": 20,
            "servers": [{"name": "box", "host": "127.0.0.1", "port": sshd.port, "user": sshd.user,
                         "identity_file": str(sshd.user_key), "paths": [str(p) for p in paths]}]}
    path = tmp / "config.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_config(path)
    store = open_store(config.database)
    try:
        return import_from_config(store, config)
    finally:
        store.close()


def test_samples_over_ssh_equal_a_local_import(tmp_path, sshd):
    root = samples()
    paths = [root / "richardaiand__aiand-portfolio-web", root / "theoneand33__.local-opencode"]
    report = _import_over_ssh(tmp_path, sshd, paths)
    server = report.servers[0]
    assert server.error is None and server.where.startswith("ssh") and server.wire_bytes > 0
    assert server.report.files_failed == 0
    local = tmp_path / "local.db"
    do_import(local, *paths, server="box")
    got, want = dump(tmp_path / "ssh.db"), dump(local)
    assert got["messages"] and got == want, ", ".join(
        f"{t}: {len(got[t])} vs {len(want[t])} rows" for t in got if got[t] != want[t])


def test_the_conversation_page_renders_an_opencode_session(tmp_path):
    import asyncio

    from datasette.app import Datasette

    from datasette_agentbase.serve import load_metadata
    from importer.snapshot import export_snapshot

    c = conversation()
    c.write_db(tmp_path / "opencode.db")
    db = tmp_path / "t.db"
    do_import(db, tmp_path / "opencode.db")
    store = open_store(f"sqlite:///{db}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db")
    finally:
        store.close()
    snap = tmp_path / "snapshot.db"
    ds = Datasette([str(snap)], metadata=load_metadata(snap), template_dir=str(REPO_ROOT / "templates"))
    asyncio.run(ds.invoke_startup())
    sid = sqlite3.connect(snap).execute("SELECT id FROM sessions WHERE session_uuid = ?", (c.sid,)).fetchone()[0]
    page = asyncio.run(ds.client.get(f"/-/agentbase/session/{sid}"))
    assert page.status_code == 200
    html = page.text
    assert "Please run the tests" in html and "Running the tests." in html and "Done." in html
    assert "make test" in html and "output of call_1" in html  # a call, with its output under it
    assert "Run them first." in html
    assert "no result recorded" not in html


# -- unknown records and agent versions (docs/sources.md, "Unknown records") ------------------


def test_a_role_and_a_part_type_the_kind_does_not_know_are_marked_unknown(tmp_path):
    from importer.vocabulary import UNKNOWN

    c = conversation("ses_0004made")
    c.part(c.messages[-1][0], {"type": "hologram", "payload": "x"})  # a part type OpenCode never wrote
    c.part(c.messages[-1][0], {"type": "patch", "hash": "abc", "files": ["a.py"]})  # known: kept, not unknown
    mid, t = c._id("msg")
    c.messages.append((mid, t, {"role": "oracle", "time": {"created": t}}))
    c.write_storage(tmp_path / "data" / "storage")
    db = tmp_path / "a.db"
    assert do_import(db, tmp_path / "data").files_failed == 0
    assert rows(db, "SELECT entry_type, custom_type FROM entries ORDER BY entry_type") == [
        ("message.oracle", UNKNOWN), ("part.hologram", UNKNOWN), ("part.patch", None)]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = 'ses_0004made'") > 0


def test_renamed_type_keys_in_the_real_storage_are_warned_about(tmp_path):
    import doctor_check as dc

    storage = samples() / STORAGE_SAMPLE
    home = tmp_path / "home"
    copy = home / "storage"
    for f in storage.rglob("*.json"):
        target = copy / f.relative_to(storage)
        target.parent.mkdir(parents=True, exist_ok=True)
        # the format changed: a message's "role" and a part's "type" are now called "kind"
        target.write_text(f.read_text().replace('"role":', '"kind":').replace('"type":', '"kind":'))
    dc.assert_warned(dc.unrecognised(home, copy), KIND)
    home2 = tmp_path / "home2"
    shutil.copytree(storage, home2 / "storage")
    assert dc.unrecognised(home2, home2 / "storage") == []


def test_doctor_lists_the_versions_the_samples_hold(tmp_path):
    import doctor_check as dc

    root = samples()
    db, storage = root / DB_SAMPLE, root / STORAGE_SAMPLE
    # the oracle: the session row's version (database) and the session file's (JSON storage)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    versions = {v for (v,) in conn.execute("SELECT version FROM session WHERE version IS NOT NULL AND version != ''")}
    conn.close()
    for f in (storage / "session").rglob("ses_*.json"):
        v = json.loads(f.read_text()).get("version")
        if isinstance(v, str) and v:
            versions.add(v)
    assert len(versions) >= 2
    home = tmp_path / "home"
    home.mkdir()
    got = dc.agentbase(home, "import", str(db.parent), str(storage), "-q")
    assert got.returncode == 0, got.stderr[-2000:]
    assert set(dc.doctor(home, KIND)["versions"]) == versions
