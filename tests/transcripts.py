"""Build small made-up transcripts for rule tests, and read the store back."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from importer.pipeline import run_import
from importer.store import open_store

SID = "5e55a0a0-0000-4000-8000-00000000000a"


def header(sid: str = SID, version: int | None = 3, **extra) -> dict:
    h = {"type": "session", "id": sid, "timestamp": "2026-04-05T01:00:00.000Z", "cwd": "/work"}
    if version is not None:
        h["version"] = version
    h.update(extra)
    return h


def line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class Chain:
    """Entries with 8-hex ids, each the child of the previous one."""

    def __init__(self, start: int = 1, parent: str | None = None, minute: int = 0):
        self.n = start
        self.parent = parent
        self.minute = minute

    def entry(self, type_: str, parent: str | None | bool = True, **fields) -> dict:
        eid = f"{self.n:08x}"
        self.n += 1
        self.minute += 1
        obj = {"type": type_, "id": eid,
               "parentId": self.parent if parent is True else (parent or None),
               "timestamp": f"2026-04-05T{2 + self.minute // 3600:02d}:{self.minute // 60 % 60:02d}:"
                            f"{self.minute % 60:02d}.000Z"}
        obj.update(fields)
        self.parent = eid
        return obj

    def user(self, text: str, **kw) -> dict:
        return self.entry("message", message={"role": "user", "content": [{"type": "text", "text": text}],
                                              "timestamp": 1775354400000 + self.n}, **kw)

    def assistant(self, blocks: list, cost: float = 0.01, tokens: int = 100, ts: int | None = None, **kw) -> dict:
        usage = {"input": tokens, "output": tokens // 2, "cacheRead": 0, "cacheWrite": 0,
                 "totalTokens": tokens + tokens // 2,
                 "cost": {"input": cost / 2, "output": cost / 2, "cacheRead": 0, "cacheWrite": 0, "total": cost}}
        return self.entry("message", message={
            "role": "assistant", "content": blocks, "api": "anthropic-messages", "provider": "anthropic",
            "model": "claude-test", "usage": usage, "stopReason": "toolUse" if any(
                b.get("type") == "toolCall" for b in blocks) else "stop",
            "timestamp": ts if ts is not None else 1775354400000 + self.n}, **kw)

    def result(self, call_id: str, text: str, name: str = "exec", details: dict | None = None,
               is_error: bool = False) -> dict:
        msg = {"role": "toolResult", "toolCallId": call_id, "toolName": name,
               "content": [{"type": "text", "text": text}], "isError": is_error,
               "timestamp": 1775354400000 + self.n}
        if details is not None:
            msg["details"] = details
        return self.entry("message", message=msg)


def exec_call(call_id: str, command: str) -> dict:
    return {"type": "toolCall", "id": call_id, "name": "exec", "arguments": {"command": command}}


def conversation(sid: str = SID, turns: int = 3) -> list[dict]:
    """A header and ``turns`` user/assistant(exec)/toolResult/assistant rounds."""
    c = Chain()
    out = [header(sid)]
    for i in range(turns):
        out.append(c.user(f"question {i} 部署 服务器"))
        out.append(c.assistant([{"type": "thinking", "thinking": f"plan {i}", "thinkingSignature": "sig"},
                                exec_call(f"toolu_{sid[:4]}_{i}", f"ls -la /tmp/{i}")]))
        out.append(c.result(f"toolu_{sid[:4]}_{i}", f"output {i}",
                            details={"status": "completed", "exitCode": i % 2, "durationMs": 10 + i}))
        out.append(c.assistant([{"type": "text", "text": f"answer {i}"}]))
    return out


def write(path: Path, objs: list[dict], raw_tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line(o) for o in objs) + raw_tail)
    return path


def sessions_dir(root: Path, agent: str = "main") -> Path:
    d = root / "agents" / agent / "sessions"
    d.mkdir(parents=True, exist_ok=True)
    return d


def do_import(db: Path, *paths, server: str = "test", agent: str | None = None):
    store = open_store(f"sqlite:///{db}")
    try:
        return run_import(store, [str(p) for p in paths], server=server, agent=agent)
    finally:
        store.close()


def rows(db: Path, sql: str, params=()) -> list[tuple]:
    conn = sqlite3.connect(str(db))
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def scalar(db: Path, sql: str, params=()):
    return rows(db, sql, params)[0][0]


CONTENT_TABLES = {
    # table -> columns that must match between two stores (no ids or run times)
    "sessions": "server, agent_id, session_uuid, session_type, cwd, started_at, first_message_at, "
                "last_message_at, message_count, leaf_entry_id, cost_usd, total_tokens, header_json",
    "messages": "server, agent_id, session_uuid, message_uuid, parent_message_uuid, role, text_preview, "
                "first_tool_call, tool_call_count, has_thinking, is_error, cost_usd, timestamp, "
                "is_active_path, is_synthetic, usage_counted, raw_hash, content_blocks, raw_json",
    "tool_calls": "server, agent_id, session_uuid, message_uuid, block_index, call_id, tool_name, command, "
                  "result_preview, is_error, exit_code, duration_ms, is_active_path",
    "entries": "server, agent_id, session_uuid, entry_uuid, parent_uuid, entry_type, is_active_path, raw_json",
    "parsed_files": "server, agent_id, file_path, file_size, status, parsed_offset, parsed_lines, "
                    "bad_lines, pending_lines, head_hash, tail_hash",
}


def dump(db: Path) -> dict[str, list[tuple]]:
    """The store's content, comparable across runs."""
    return {t: sorted(rows(db, f"SELECT {cols} FROM {t}"), key=repr) for t, cols in CONTENT_TABLES.items()}


def rebuild_lines(db: Path) -> dict[tuple[str, str], dict]:
    """Every archived entry rebuilt as parsed JSON, by (session, entry id)."""
    out = {}
    for sid, eid, raw, content in rows(
        db, "SELECT session_uuid, message_uuid, raw_json, content_blocks FROM messages"
    ):
        obj = json.loads(raw)
        if content is not None:
            obj["message"]["content"] = json.loads(content)
        out[(sid, eid)] = obj
    for sid, eid, raw in rows(db, "SELECT session_uuid, entry_uuid, raw_json FROM entries"):
        out[(sid, eid)] = json.loads(raw)
    for sid, raw in rows(db, "SELECT session_uuid, header_json FROM sessions WHERE header_json IS NOT NULL"):
        out[(sid, "header")] = json.loads(raw)
    return out


def dump_store(url: str) -> dict[str, list[tuple]]:
    """Like dump(), through the store API: works for SQLite and MariaDB URLs."""
    from importer.store import open_store

    store = open_store(url)
    try:
        return {t: sorted((tuple(r) for r in store.query(f"SELECT {cols} FROM {t}")), key=repr)
                for t, cols in CONTENT_TABLES.items()}
    finally:
        store.close()
