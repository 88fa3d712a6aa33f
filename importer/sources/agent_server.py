"""The agent-server: a service that runs Claude (Agent SDK) and Codex (app-server)
sessions for other platforms, and keeps everything in one SQLite database,
``/srv/agent-server/data/agent.db`` (WAL mode, Drizzle migrations). See
docs/agent-server.md for what is read and how it maps to the archive.

- **Paths**: the server's root (``data/agent.db`` inside it), its ``data/``
  folder, or ``agent.db`` itself.
- **Reading**: the database is a container (token: the size and time of
  ``agent.db`` with its non-empty ``-wal``; not opened while unchanged),
  opened read-only in place (``mode=ro``: committed rows still only in the
  ``-wal`` are seen, a write in progress is not), or, on another server,
  copied consistently there in one read transaction and fetched
  (``fs.sqlite_copy``). Only :data:`COPIED_TABLES` are copied and an
  authorizer lets the connection read nothing else: ``api_keys`` (its
  ``key_hash``), ``admin_sessions`` and ``settings`` (provider keys, webhook
  tokens) are refused by SQLite itself. Every read is a short statement;
  events are paged by ``seq``.
- **Units**: one per session, key ``<db>#<session id>``, agent id = its
  profile's name; token = last seq, event count and a digest of the session
  row, its runs, interactions and files (a run that completes updates its
  row: a changed run is seen without new events). The checkpoint's offset is
  the last seq imported; a session that only grew is read from there. One
  more unit, ``<db>#server-tables``, holds the rows that belong to no single
  session's read: ``audit_logs`` (incremental by id) and ``usage_daily``.
- **Rows**: each event is exactly one archive row, its ``raw_json`` the
  event row itself: a message (prompts, assistant texts, reasoning, completed
  tool calls and their results) or an entry (``entry_type`` = the event type:
  streaming deltas, run and interaction events, errors, unknown types, a
  tool call that never completed). Each run adds one assistant row (native role ``run``)
  carrying the run's tokens and cost (its model-call identity: the run id),
  so that every report that sums ``messages`` counts the agent-server once
  per run. ``runs``, ``interactions``, ``files`` (metadata), ``audit_logs``
  and ``usage_daily`` become tables of their own (:data:`TABLES`).
"""

from __future__ import annotations

import hashlib
import sqlite3
import zlib
from typing import Any, Iterator

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..tables import Table
from ..units import Batch, Checkpoint, Outcome, SessionInfo, SourceError, Unit
from .base import Discovery, Scope, Source
from . import readonly
from .fs import FileSystem

KIND = "agent-server"
DB_NAME = "agent.db"
DEFAULT_ROOT = "/srv/agent-server"
# The agent id of what belongs to no profile: the database itself, server-wide rows.
SERVER_AGENT = "agent-server"
PAGE_EVENTS = 64  # events per keyset page: one short read each
BATCH = 500  # entries per batch handed to the writer
SQLITE_MAGIC = b"SQLite format 3\x00"

# The tables read, and the only ones a copy made on another server holds.
# Never api_keys (key_hash), admin_sessions (login tokens) or settings
# (provider API keys, webhook and cookie secrets).
COPIED_TABLES = ("sessions", "profiles", "runs", "events", "interactions", "files", "audit_logs", "usage_daily")
NEVER_READ = ("api_keys", "admin_sessions", "settings")
READABLE_TABLES = frozenset(COPIED_TABLES)

# Event types the importer interprets (the rest are kept as entries, counted as unknown).
KNOWN_TYPES = frozenset({
    "run.started", "user.message", "message.delta", "assistant.message", "reasoning", "tool.started",
    "tool.completed", "interaction.requested", "interaction.resolved", "run.completed", "error"})
SHELL_TOOLS = frozenset({"Bash", "commandExecution"})  # Claude's and Codex's shell tools
UNKNOWN = "unknown"  # entries.custom_type of an event of a type the importer does not know
NEVER_COMPLETED = "never_completed"  # ... of a tool.started that has no tool.completed
RUN_ROLE = "run"  # the native role of a run's usage row (its role: assistant; docs/vocabulary.md)

RUNS = "agent_server_runs"
INTERACTIONS = "agent_server_interactions"
FILES = "agent_server_files"
AUDIT_LOGS = "agent_server_audit_logs"
USAGE_DAILY = "agent_server_usage_daily"
_WHO = [("server", "str:32"), ("agent_id", "str:64"), ("session_id", "int"), ("session_uuid", "str:64")]
TABLES: dict[str, list[tuple[str, str]]] = {
    RUNS: [("id", "pk"), *_WHO, ("run_id", "str:64"), ("status", "str:16"), ("started_at", "datetime"),
           ("ended_at", "datetime"), ("duration_ms", "bigint"), ("input_tokens", "bigint"),
           ("output_tokens", "bigint"), ("cost_usd", "decimal"),
           # 0 once the provider's own transcript of this conversation is archived (its calls count there)
           ("usage_counted", "bool=1"), ("error", "text")],
    INTERACTIONS: [("id", "pk"), *_WHO, ("interaction_id", "str:64"), ("run_id", "str:64"), ("kind", "str:32"),
                   ("status", "str:16"), ("created_at", "datetime"), ("resolved_at", "datetime"),
                   ("expires_at", "datetime"), ("request", "json"), ("response", "json")],
    FILES: [("id", "pk"), *_WHO, ("file_id", "str:64"), ("origin", "str:16"), ("mime", "str:128"),
            ("size", "bigint"), ("sha256", "str:64"), ("created_at", "datetime"), ("rel_path", "str:1024")],
    AUDIT_LOGS: [("id", "pk"), *_WHO, ("audit_id", "bigint"), ("ts", "datetime"), ("actor", "str:128"),
                 ("kind", "str:32"), ("summary", "text"), ("detail", "json")],
    USAGE_DAILY: [("id", "pk"), ("server", "str:32"), ("agent_id", "str:64"), ("date", "str:10"),
                  ("api_key_id", "str:64"), ("provider", "str:32"), ("model", "str:128"), ("runs", "int"),
                  ("input_tokens", "bigint"), ("output_tokens", "bigint"), ("cost_usd", "decimal")],
}
KEYS: dict[str, tuple[str, ...]] = {
    RUNS: ("server", "run_id"), INTERACTIONS: ("server", "interaction_id"), FILES: ("server", "file_id"),
    AUDIT_LOGS: ("server", "audit_id"), USAGE_DAILY: ("server", "date", "api_key_id", "provider", "model"),
}
LINKED = (RUNS, INTERACTIONS, FILES, AUDIT_LOGS)  # tables whose session_id is the archive's sessions.id

AUDIT_LOG_QUERY = {
    "title": "Agent-server audit log of a day",
    "description": (
        "The agent-server's audit log (commands run, file access denied, approvals, admin actions) of one "
        "day, in time order: kind, actor, summary. day (YYYY-MM-DD, local) empty: the latest day with an "
        "entry; kind, actor, server empty: all."),
    "hide_sql": True,
    "params": ["day", "kind", "actor", "server"],
    "tables": [AUDIT_LOGS],  # offered on snapshots where this table has rows
    "latest_day_of": "an audit log entry",  # what an empty day shows (the query form says it)
    "sql": f"""SELECT a.local_time AS time, a.server, a.kind, a.actor, a.summary, a.agent_id AS agent,
       CASE WHEN a.session_id IS NOT NULL THEN json_object('href', agentbase_session_url(a.session_id),
            'label', COALESCE(NULLIF(s.title, ''), substr(a.session_uuid, 1, 8))) END AS conversation,
       a.detail
FROM {AUDIT_LOGS} a LEFT JOIN sessions s ON s.id = a.session_id
WHERE a.day = COALESCE(NULLIF(:day, ''),
                       (SELECT day FROM {AUDIT_LOGS} WHERE :server IN ('', server) ORDER BY day DESC LIMIT 1))
  AND :kind IN ('', a.kind) AND :actor IN ('', a.actor) AND :server IN ('', a.server)
ORDER BY a.ts, a.id""",
}


# ---------------------------------------------------------------------------
# Opening the database: read-only, WAL-safe, the credential tables refused (readonly.py)


def connect_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection to an ``agent.db`` that may be in use, allowed to
    read :data:`COPIED_TABLES` only."""
    return readonly.connect(path, READABLE_TABLES)


# The indexes the reads need, added to a copy made on another server (CREATE TABLE ... AS SELECT:
# its tables come without theirs).
COPY_INDEXES = {"events": "session_id, seq", "runs": "session_id", "interactions": "session_id", "files": "session_id"}


class Layout(readonly.Layout):
    """The readable tables present and their columns (selected by name)."""

    def __init__(self, conn: sqlite3.Connection):
        super().__init__(conn, READABLE_TABLES)
        if not (self.has("sessions", "id") and self.has("events", "session_id", "seq", "type", "payload")):
            raise SourceError("not an agent-server database: no sessions and events tables")


# ---------------------------------------------------------------------------
# Small, total conversions


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _time(ms: Any) -> str | None:
    return P.format_timestamp(ms) if R.integer(ms) is not None else None


def _digest(*parts: Any) -> str:
    return hashlib.blake2b(orjson.dumps(parts, default=str), digest_size=8).hexdigest()


def _hash(raw: bytes, derived: bytes = b"") -> str:
    """An entry's change hash (the writer's raw_hash): its bytes and, when the
    same bytes are read differently (a tool call that completed since, a run
    whose figures came in), what they were read as."""
    return f"{len(raw):x}-{zlib.crc32(raw + derived):08x}"


def event_id(seq: int) -> str:
    return f"event:{seq}"


def run_entry_id(run_id: str) -> str:
    return P.clamp_id(f"run:{run_id}")


def run_call_key(run_id: str) -> str:
    return P.short_hash(b"agent-server-run:" + run_id.encode("utf-8", "replace"))


# ---------------------------------------------------------------------------
# Events -> entries


class Event:
    """One events row: its columns, its payload (parsed) and its raw JSON."""

    __slots__ = ("seq", "run_id", "type", "ts", "payload", "raw")

    def __init__(self, session_id: str, seq: int, run_id, etype, ts, payload: bytes):
        self.seq = seq
        self.run_id = run_id if isinstance(run_id, str) else None
        self.type = etype if isinstance(etype, str) else ""
        self.ts = ts
        try:
            obj = orjson.loads(payload)
            text = payload
        except orjson.JSONDecodeError:
            obj, text = P.loads_line(payload)
            if obj is None:
                text = orjson.dumps(payload.decode("utf-8", "replace"))
        self.payload = obj if isinstance(obj, dict) else {}
        # The row as it is stored (columns in table order), the payload's JSON kept as written.
        self.raw = (b'{"session_id":' + orjson.dumps(session_id) + b',"seq":' + orjson.dumps(seq)
                    + b',"run_id":' + orjson.dumps(self.run_id) + b',"type":' + orjson.dumps(self.type)
                    + b',"payload":' + text + b',"ts":' + orjson.dumps(R.integer(ts)) + b"}")


def _claude_blocks(content: Any) -> list:
    """Claude API content -> OpenClaw's block vocabulary (other fields kept)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for block in _list(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "thinking":
            new = {k: v for k, v in block.items() if k != "signature"}
            if "signature" in block:
                new["thinkingSignature"] = block["signature"]
            out.append(new)
        elif kind in ("tool_use", "server_tool_use"):
            args = block.get("input")
            new = {"type": "toolCall", "id": block.get("id"), "name": block.get("name"),
                   "arguments": args if isinstance(args, dict) else {"input": args}}
            if kind != "tool_use":
                new["sourceType"] = kind
            out.append(new)
        elif kind == "image" and isinstance(block.get("source"), dict):
            source = block["source"]
            out.append({"type": "image", "data": source.get("data"), "mimeType": source.get("media_type")})
        elif kind == "tool_result":
            out.extend(_claude_blocks(block.get("content")))
        else:
            out.append(block)
    return out


def _codex_text_blocks(content: Any) -> list:
    out = []
    for block in _list(content):
        if isinstance(block, dict):
            out.append(block)
        elif isinstance(block, str):
            out.append({"type": "text", "text": block})
    return out


def _texts(items: Any) -> list[str]:
    out = []
    for item in _list(items):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            out.append(item["text"])
    return out


def tool_ids(payload: dict) -> list[str]:
    """Every id a tool.started / tool.completed payload names for its call, in
    the order they are preferred: Claude's own (the ``tool_use`` block's ``id``,
    the ``tool_result``'s ``tool_use_id``: FORMAT-OTHERS.md section 2), the
    server's ``toolCallId``, Codex's ``item.id``. A second agent.db written from
    the same notes carries only the provider's ids; one event may carry several
    (the same id, or not): the events pair on any of them."""
    ids = []
    message = _dict(payload.get("message"))
    for block in _list(message.get("content")):
        if isinstance(block, dict):
            kind = block.get("type")
            found = block.get("id") if kind in ("tool_use", "server_tool_use") else (
                block.get("tool_use_id") if kind == "tool_result" else None)
            if isinstance(found, str) and found:
                ids.append(found[:255])
    for found in (payload.get("toolCallId"), _dict(payload.get("item")).get("id")):
        if isinstance(found, str) and found:
            ids.append(found[:255])
    return list(dict.fromkeys(ids))


class _Tool:
    """What a tool.started / tool.completed payload says about its call."""

    def __init__(self, payload: dict, claude: bool):
        self.payload = payload
        self.item = _dict(payload.get("item"))
        self.claude = claude and not self.item
        ids = tool_ids(payload)
        # The call's id in the archive (tool_calls.call_id = the result's tool_call_id): the first id
        # named (a Claude block's id, as its toolCall block carries; else toolCallId, else item.id).
        self.call_id = ids[0] if ids else None
        self.name = R.text(payload.get("tool"), 128) or R.text(self.item.get("type"), 128)
        self.kind = R.text(payload.get("kind"))

    def call_blocks(self) -> list:
        """The tool call as toolCall blocks (Claude: the tool_use block(s) of the message)."""
        if self.claude:
            blocks = _claude_blocks(_dict(self.payload.get("message")).get("content"))
            if any(b.get("type") == "toolCall" for b in blocks if isinstance(b, dict)):
                return blocks
            return [{"type": "toolCall", "id": self.call_id, "name": self.name, "arguments": {}}]
        item = self.item
        kind = item.get("type")
        if kind == "commandExecution":
            args = {"command": item.get("command"), "cwd": item.get("cwd")}
        elif kind == "fileChange":
            args = {"changes": item.get("changes")}
        elif kind == "mcpToolCall":
            args = {"server": item.get("server"), "tool": item.get("tool"), "arguments": item.get("arguments")}
        elif kind == "webSearch":
            args = {"query": item.get("query")}
        else:
            args = {k: v for k, v in item.items() if k not in ("type", "id", "status")}
        return [{"type": "toolCall", "id": self.call_id, "name": self.name, "arguments": args}]

    def result(self) -> tuple[list, bool, int | None, int | None]:
        """(content blocks, is_error, exit code, duration ms) of a tool.completed."""
        payload = self.payload
        exit_code = R.integer(payload.get("exitCode"))
        duration = None
        if self.claude:
            result = {}
            for block in _list(_dict(payload.get("message")).get("content")):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    result = block
                    break
            blocks = _claude_blocks(result.get("content"))
            failed = result.get("is_error") is True
            detail = payload.get("tool_use_result")
            if isinstance(detail, dict):
                duration = R.integer(detail.get("durationMs"))
        else:
            item = self.item
            kind = item.get("type")
            status = item.get("status")
            failed = status in ("failed", "declined") or item.get("error") is not None
            duration = R.integer(item.get("durationMs"))
            if exit_code is None and kind == "commandExecution":
                exit_code = R.integer(item.get("exitCode"))
            text = None
            if kind == "commandExecution":
                text = R.text(item.get("aggregatedOutput"))
            elif kind == "mcpToolCall":
                parts = _texts(_dict(item.get("result")).get("content"))
                error = _dict(item.get("error")).get("message")
                text = "\n".join(parts) if parts else R.text(error)
            elif kind == "fileChange":
                paths = [c.get("path") for c in _list(item.get("changes")) if isinstance(c, dict)]
                text = f"{status}: " + ", ".join(p for p in paths if isinstance(p, str)) if status else None
            elif kind == "webSearch":
                text = R.text(_dict(item.get("action")).get("query")) or R.text(item.get("query"))
            blocks = [{"type": "text", "text": text}] if text is not None else []
        if exit_code is not None and exit_code != 0:
            failed = True
        return blocks, failed, exit_code, duration


def _message_row(entry_id: str, parent: str | None, role: str, blocks: list | None, *, seq: int | None,
                 ts: str | None, raw: bytes, provider: str | None, model: str | None, preview: str | None = None,
                 native: str | None = None, **values) -> dict:
    """The ``messages`` row of an event or a run (rows.message_row). ``role``: the vocabulary's
    (docs/vocabulary.md); ``native``: the event's type; ``preview``: what stands for a row whose
    blocks give no preview."""
    return R.message_row(entry_id, role, blocks=blocks, native_role=native, parent=parent, timestamp=ts, seq=seq,
                         raw_json=raw.decode("utf-8", "replace"), preview_else=preview, provider=provider,
                         model=model, **values)


def _entry_row(entry_id: str, parent: str | None, ev: Event, custom: str | None, preview: str | None) -> dict:
    return {"entry_uuid": entry_id, "parent_uuid": parent, "entry_type": ev.type[:64] or None,
            "custom_type": custom, "text_preview": R.preview(preview), "timestamp": _time(ev.ts), "seq": ev.seq,
            "raw_json": ev.raw.decode("utf-8", "replace")}


def _entry(entry_id: str, parent: str | None, etype: str, seq: int | None, raw: bytes, row: dict,
           calls: list | None = None, derived: bytes = b"") -> P.Entry:
    entry = P.Entry(entry_id, parent, etype, seq if seq is not None else 0, {}, raw, row=row,
                    calls=calls if calls is not None else ([] if etype == "message" else None))
    entry._hash = _hash(raw, derived)
    return entry


class SessionContext:
    """A session's provider and model: what the events are read with."""

    def __init__(self, provider: str | None, model: str | None):
        self.provider = R.text(provider, 64)
        self.model = R.text(model, 128)
        self.claude = provider != "codex"

    def entry(self, ev: Event, parent: str | None, completion: dict | None = None,
              call_id: str | None = None) -> P.Entry:
        """The event as its archive row: a message or an entry. ``completion``:
        for a tool.started, what its tool.completed said (None: it has none yet).
        ``call_id``: for a tool.completed, the id of the tool.started it closes
        (None: its own first id)."""
        eid = event_id(ev.seq)
        t, p, ts = ev.type, ev.payload, _time(ev.ts)
        common = dict(seq=ev.seq, ts=ts, raw=ev.raw, provider=self.provider, model=self.model)
        item = _dict(p.get("item"))
        if t == "user.message":
            if item:
                blocks = _codex_text_blocks(item.get("content"))
            else:
                blocks = _claude_blocks(_dict(p.get("message")).get("content"))
            return _entry(eid, parent, "message", ev.seq, ev.raw,
                          _message_row(eid, parent, V.USER, blocks, native=t, **common))
        if t == "assistant.message":
            if item:
                blocks = [{"type": "text", "text": item["text"]}] if isinstance(item.get("text"), str) else []
                model = self.model
            else:
                message = _dict(p.get("message"))
                blocks = _claude_blocks(message.get("content"))
                model = R.text(message.get("model"), 128) or self.model
            row = _message_row(eid, parent, V.ASSISTANT, blocks, native=t, **{**common, "model": model},
                               stop_reason=R.text(_dict(p.get("message")).get("stop_reason"), 64))
            return _entry(eid, parent, "message", ev.seq, ev.raw, row)
        if t == "reasoning":
            if item:
                text = "\n".join(_texts(item.get("summary")) + _texts(item.get("content")))
                blocks = [{"type": "thinking", "thinking": text, "id": item.get("id")}]
            else:
                blocks = _claude_blocks(_dict(p.get("message")).get("content"))
            return _entry(eid, parent, "message", ev.seq, ev.raw,
                          _message_row(eid, parent, V.ASSISTANT, blocks, native=t, **common))
        if t == "tool.started":
            tool = _Tool(p, self.claude)
            if completion is None or tool.call_id is None:
                row = _entry_row(eid, parent, ev, NEVER_COMPLETED,
                                 f"{tool.name or 'tool'} call started, never completed")
                return _entry(eid, parent, t, ev.seq, ev.raw, row, derived=b"open")
            blocks = tool.call_blocks()
            calls = R.tool_call_rows(blocks, ts, SHELL_TOOLS,
                                     truncated={tool.call_id} if completion.get("truncated") else ())
            row = _message_row(eid, parent, V.ASSISTANT, blocks, native=t, **common)
            return _entry(eid, parent, "message", ev.seq, ev.raw, row, calls)
        if t == "tool.completed":
            tool = _Tool(p, self.claude)
            blocks, failed, exit_code, duration = tool.result()
            status = R.text(item.get("status")) or ("error" if failed else "completed")
            row = _message_row(eid, parent, V.TOOL_RESULT, blocks, native=t, **common,
                               preview=f"{tool.name or 'tool'} {status}", tool_call_id=call_id or tool.call_id,
                               tool_name=tool.name, exit_code=exit_code, duration_ms=duration, is_error=int(failed))
            return _entry(eid, parent, "message", ev.seq, ev.raw, row)
        return _entry(eid, parent, t, ev.seq, ev.raw, _entry_row(eid, parent, ev, *self._other(ev)))

    def _other(self, ev: Event) -> tuple[str | None, str | None]:
        """(custom_type, text preview) of an event kept as an entry."""
        t, p = ev.type, ev.payload
        if t == "message.delta":
            delta = p.get("delta")
            if isinstance(delta, dict):  # (a Codex delta is the text itself)
                delta = delta.get("text")
            event = _dict(p.get("event"))
            if delta is None and event:
                delta = _dict(event.get("delta")).get("text")
            return None, R.text(delta)
        if t == "run.started":
            turn = _dict(p.get("turn"))
            return None, R.text(p.get("model")) or R.text(turn.get("status"))
        if t == "run.completed":
            turn = _dict(p.get("turn"))
            return None, R.text(p.get("subtype")) or R.text(turn.get("status"))
        if t in ("interaction.requested", "interaction.resolved"):
            request = _dict(p.get("request"))
            what = R.text(request.get("toolName")) or R.text(request.get("method"))
            parts = [x for x in (R.text(p.get("kind")), R.text(p.get("status")), what) if x]
            return None, " ".join(parts) or None
        if t == "error":
            return None, R.text(_dict(p.get("error")).get("message"))
        if t not in KNOWN_TYPES:
            return UNKNOWN, P.entry_preview(p)
        return None, None


def _run_split(payload: dict, claude: bool, previous_total: dict | None) -> tuple[list | None, dict | None]:
    """From a run.completed payload: ([uncached input, cache read, cache write]
    as the provider reports them, or None), and for Codex the thread's
    cumulative token usage after this run."""
    if claude:
        u = _dict(payload.get("usage"))
        values = [R.integer(u.get(k)) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
        return (values if all(v is not None and v >= 0 for v in values) else None), None
    total = _dict(_dict(payload.get("tokenUsage")).get("total"))
    if not total:
        return None, previous_total
    now = {k: R.integer(total.get(k)) or 0 for k in ("inputTokens", "cachedInputTokens", "outputTokens")}
    before = previous_total or {"inputTokens": 0, "cachedInputTokens": 0, "outputTokens": 0}
    inp = now["inputTokens"] - before.get("inputTokens", 0)
    cached = now["cachedInputTokens"] - before.get("cachedInputTokens", 0)
    if inp < 0 or not 0 <= cached <= inp:
        return None, now
    return [inp - cached, cached, 0], now


class RunRow:
    """A runs row as read."""

    COLUMNS = ("id", "session_id", "status", "started_at", "ended_at", "input_tokens", "output_tokens",
               "cost_usd", "error")

    def __init__(self, values: tuple):
        self.values = dict(zip(self.COLUMNS, values))
        v = self.values
        self.id = v["id"]
        self.digest = _digest(*values)

    def table_row(self, server: str, agent: str, session: str) -> dict:
        v = self.values
        started, ended = R.integer(v["started_at"]), R.integer(v["ended_at"])
        return {"server": server, "agent_id": agent, "session_uuid": session, "run_id": R.text(v["id"], 64),
                "status": R.text(v["status"], 16), "started_at": _time(started), "ended_at": _time(ended),
                "duration_ms": ended - started if started is not None and ended is not None else None,
                "input_tokens": R.integer(v["input_tokens"]), "output_tokens": R.integer(v["output_tokens"]),
                "cost_usd": R.number(v["cost_usd"]), "error": R.text(v["error"])}

    def entry(self, ctx: SessionContext, anchor: int | None, split: list | None) -> P.Entry:
        """The run's usage message: child of its run.started event (``anchor``)."""
        v = self.values
        raw = orjson.dumps(v)
        inp, out = R.integer(v["input_tokens"]), R.integer(v["output_tokens"])
        usage = {"input_tokens": inp, "cache_read_tokens": None, "cache_write_tokens": None}
        if split is not None and inp is not None and sum(split) == inp:
            usage = {"input_tokens": split[0], "cache_read_tokens": split[1], "cache_write_tokens": split[2]}
        started, ended = R.integer(v["started_at"]), R.integer(v["ended_at"])
        status = R.text(v["status"], 64)
        eid = run_entry_id(self.id)
        parent = event_id(anchor) if anchor is not None else None
        row = _message_row(
            eid, parent, V.ASSISTANT, None, native=RUN_ROLE, seq=anchor, ts=_time(ended if ended is not None else started), raw=raw,
            provider=ctx.provider, model=ctx.model, preview=f"run {status or '?'}",
            output_tokens=out, total_tokens=(inp or 0) + (out or 0) if inp is not None or out is not None else None,
            cost_usd=R.number(v["cost_usd"]), call_key=run_call_key(self.id), stop_reason=status,
            is_error=int(status == "failed"), error_message=R.text(v["error"]),
            duration_ms=ended - started if started is not None and ended is not None else None, **usage)
        return _entry(eid, parent, "message", anchor, raw, row, derived=orjson.dumps([anchor, split]))


# ---------------------------------------------------------------------------
# Units


class AgentServerDB(readonly.Database):
    """One ``agent.db``; its units are its sessions, and the server-wide tables."""

    session_type = "agent_server_db"
    layout = Layout

    def connect(self):
        return readonly.connect_copy(self.fs, self.path, COPIED_TABLES, READABLE_TABLES, opener=connect_readonly,
                                     indexes=COPY_INDEXES)

    def _units(self, conn: sqlite3.Connection, layout: Layout) -> list[Unit]:
        events = {sid: (last, count, newest) for sid, last, count, newest in conn.execute(
            f"SELECT session_id, MAX(seq), COUNT(*), MAX({'ts' if layout.has('events', 'ts') else 'NULL'}) "
            "FROM events GROUP BY session_id")}
        digests: dict[str, dict[str, Any]] = {}
        for table, cols in (("runs", RunRow.COLUMNS),
                            ("interactions", ("session_id", "id", "status", "resolved_at", "response")),
                            ("files", ("session_id", "id", "rel_path", "size", "sha256", "created_at"))):
            if not layout.has(table, "session_id", "id"):
                continue
            for row in conn.execute(f"SELECT {layout.select(table, cols)} FROM [{table}] ORDER BY session_id, id"):
                sid = row[1] if table == "runs" else row[0]
                h = digests.setdefault(sid, {}).get(table)
                if h is None:
                    h = digests[sid][table] = hashlib.blake2b(digest_size=8)
                h.update(orjson.dumps(row, default=str))
        join = ""
        profile = "NULL AS profile_name"
        if layout.has("profiles", "id", "name") and layout.has("sessions", "profile_id"):
            join, profile = " LEFT JOIN profiles p ON p.id = s.profile_id", "p.name AS profile_name"
        units: list[Unit] = []
        agents: dict[str, str] = {}
        for row in conn.execute(f"SELECT {layout.select('sessions', SessionRow.COLUMNS, 's')}, {profile} "
                                f"FROM sessions s{join} ORDER BY s.id"):
            s = SessionRow(row)
            if not isinstance(s.id, str) or not s.id:
                continue
            agent = R.text(s.profile_name, 64) or SERVER_AGENT
            if not self.scope.wants(agent):
                continue
            agents[s.id] = agent
            last, count, newest = events.get(s.id, (0, 0, None))
            d = digests.get(s.id, {})
            parts = {t: h.hexdigest() for t, h in d.items()}
            units.append(SessionUnit(self, conn, layout, s, agent, last or 0, count or 0, R.integer(newest), parts))
        units.append(ServerTables(self, conn, layout, agents, whole=self.scope.agents is None
                                  and self.scope.agent is None))
        return units


class SessionRow:
    """A sessions row as read (columns the database lacks are None)."""

    COLUMNS = ("id", "api_key_id", "source", "profile_id", "provider", "model", "permission_mode",
               "provider_session_id", "workspace_dir", "title", "last_seq", "created_at", "updated_at", "archived")

    def __init__(self, row: tuple):
        self.values = dict(zip(self.COLUMNS, row[:-1]))
        self.profile_name = row[-1]
        self.id = self.values["id"]

    def info(self, last_run: dict | None) -> SessionInfo:
        v = self.values
        title = P.cut_str(v["title"], 512) or None
        archived = bool(R.integer(v["archived"]))
        values = {
            "cwd": R.text(v["workspace_dir"], 512), "started_at": _time(v["created_at"]), "title": title,
            "display_name": title[:255] if title else None,
            "provider_session_id": P.visible_id(R.text(v["provider_session_id"], 128) or "") or None,
            "model": R.text(v["model"], 128), "model_provider": R.text(v["provider"], 64),
            "channel": R.text(v["source"], 64),
            # The server keeps no archive time: an archived session's last update is its archiving.
            "archived_at": _time(v["updated_at"]) if archived else None,
            "times_approximate": 0,
        }
        if last_run is not None:
            values["status"] = R.text(last_run["status"], 16)
            values["ended_at"] = _time(last_run["ended_at"])
        # The row as header_json, less what changes with every event (last_seq,
        # updated_at): a changed header is kept as a revision.
        header = {k: x for k, x in v.items() if k not in ("last_seq", "updated_at")}
        header["profile_name"] = self.profile_name
        return SessionInfo(values, R.dumps(header))


# How many content blocks of a Claude tool.completed are looked at for a tool_result's tool_use_id
# (one per result; parallel calls may share a message).
RESULT_BLOCKS = 16

# The tool.completed events of a range of seqs, with every id each names (see tool_ids): the
# tool_use_id of the first RESULT_BLOCKS content blocks (a JSON array, null where none: plain
# json_extract, as the connection's authorizer allows no table-valued function), toolCallId,
# item.id; and the truncated flag.
_COMPLETIONS_SQL = f"""
SELECT e.seq,
  CASE WHEN json_valid(e.payload) THEN json_extract(e.payload, {", ".join(
      f"'$.message.content[{i}].tool_use_id'" for i in range(RESULT_BLOCKS))}) END,
  CASE WHEN json_valid(e.payload) THEN json_extract(e.payload, '$.toolCallId') END,
  CASE WHEN json_valid(e.payload) THEN json_extract(e.payload, '$.item.id') END,
  CASE WHEN json_valid(e.payload) THEN json_extract(e.payload, '$.truncated') END
FROM events e
WHERE e.session_id = ? AND e.seq > ? AND e.seq <= ? AND e.type = 'tool.completed'
ORDER BY e.seq"""


class SessionUnit(Unit):
    """One session: its events, runs, interactions and files."""

    def __init__(self, db: AgentServerDB, conn, layout: Layout, session: SessionRow, agent: str, last_seq: int,
                 count: int, newest_ms: int | None, digests: dict[str, str]):
        v = session.values
        times = [t for t in (R.integer(v["updated_at"]), R.integer(v["created_at"]), newest_ms) if t is not None]
        token_digest = _digest(list(v.values()), session.profile_name, digests.get("runs"),
                               digests.get("interactions"), digests.get("files"))
        # the session id as archived (a NUL written out: P.visible_id); the database is queried with its own
        self.uuid = P.visible_id(session.id)
        super().__init__(db.source, db.server, agent, f"{db.key}#{self.uuid}", f"{db.name}#{self.uuid}", count,
                         max(times, default=0) * 1_000_000, token=f"{last_seq}:{count}:{token_digest}", fs=db.fs)
        self.db = db
        self.conn = conn
        self.layout = layout
        self.session = session
        self.sid = session.id
        self.last_seq = last_seq
        self.digests = digests
        self.ctx = SessionContext(v["provider"], v["model"])

    # -- reads -------------------------------------------------------------------------

    def _events(self, after: int, upto: int) -> Iterator[Event]:
        ts = "ts" if self.layout.has("events", "ts") else "NULL"
        run = "run_id" if self.layout.has("events", "run_id") else "NULL"
        sql = (f"SELECT seq, {run}, type, {ts}, CAST(payload AS BLOB) FROM events "
               "WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?")
        last = after
        while True:
            page = self._query(sql, (self.sid, last, upto, PAGE_EVENTS))
            for seq, run_id, etype, ts_value, payload in page:
                last = seq
                yield Event(self.sid, seq, run_id, etype, ts_value, bytes(payload or b""))
            if len(page) < PAGE_EVENTS:
                return

    def _event(self, seq: int) -> Event | None:
        ts = "ts" if self.layout.has("events", "ts") else "NULL"
        run = "run_id" if self.layout.has("events", "run_id") else "NULL"
        rows = self._query(f"SELECT seq, {run}, type, {ts}, CAST(payload AS BLOB) FROM events "
                           "WHERE session_id = ? AND seq = ?", (self.sid, seq))
        if not rows:
            return None
        seq, run_id, etype, ts_value, payload = rows[0]
        return Event(self.sid, seq, run_id, etype, ts_value, bytes(payload or b""))

    def _run_started(self, run_id: str) -> int | None:
        """The seq of a run's run.started event (None: it has none)."""
        if not self.layout.has("events", "run_id"):
            return None
        rows = self._query("SELECT MIN(seq) FROM events WHERE session_id = ? AND run_id = ? AND type = 'run.started'",
                           (self.sid, run_id))
        return rows[0][0] if rows else None

    def _completions(self, after: int, upto: int) -> dict[str, dict]:
        """call id -> {seq, truncated} of the tool.completed events in (after, upto],
        under every id each names (:func:`tool_ids`); an id named twice keeps its first."""
        rows = self._query(_COMPLETIONS_SQL, (self.sid, after, upto))
        out: dict[str, dict] = {}
        for seq, claude_ids, call, item, truncated in rows:
            try:
                named = orjson.loads(claude_ids) if claude_ids else []
            except orjson.JSONDecodeError:
                named = []
            ids = [*(named if isinstance(named, list) else []), call, item]
            completion = {"seq": seq, "truncated": bool(truncated)}
            for found in dict.fromkeys(i[:255] for i in ids if isinstance(i, str) and i):
                out.setdefault(found, completion)
        return out

    def _table(self, table: str, cols: tuple[str, ...], order: str) -> list[tuple]:
        if not self.layout.has(table, "session_id", *cols[:1]):
            return []
        return self._query(f"SELECT {self.layout.select(table, cols)} FROM [{table}] WHERE session_id = ? "
                           f"ORDER BY {order}", (self.sid,))

    def _query(self, sql: str, params: tuple) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise SourceError(f"cannot read session {self.uuid}: {exc}") from None

    # -- the unit ----------------------------------------------------------------------

    def read(self, checkpoint: Checkpoint | None):
        sid, ctx, upto = self.uuid, self.ctx, self.last_seq
        state: dict = {}
        after = 0
        tail_event = None
        if (checkpoint is not None and checkpoint.resumable and checkpoint.session_uuid == sid
                and isinstance(checkpoint.state.get("runs"), dict) and checkpoint.offset <= upto):
            old = checkpoint.offset
            if old == 0:
                after, state = 0, checkpoint.state
            else:
                tail_event = self._event(old)
                if tail_event is not None and P.short_hash(tail_event.raw) == checkpoint.tail_hash:
                    after, state = old, checkpoint.state
                else:
                    tail_event = None
        resumed = bool(state)
        runs_state: dict = dict(state.get("runs") or {})  # run id -> [digest, run.started seq, split]
        # call id (each the event names) -> [seq, parent] of an open tool.started
        open_calls: dict = dict(state.get("open") or {})
        codex_total = state.get("codex_total")
        tail = state.get("tail")
        tail_parent = state.get("tail_parent")
        tail_run = state.get("tail_run")  # the run whose usage message is the tail
        entries_read = checkpoint.entries_read if resumed else 0

        runs = [RunRow(r) for r in self._table("runs", RunRow.COLUMNS, "started_at, id")]
        by_id = {r.id: r for r in runs if isinstance(r.id, str)}
        emit: set[str] = {rid for rid, r in by_id.items() if (runs_state.get(rid) or [None])[0] != r.digest}
        completions = self._completions(after, upto)
        claimed: dict[int, str | None] = {}  # seq of a tool.completed paired in this read -> its call's id

        pending: list = []
        events_read = bytes_read = 0
        last_seq, last_hash = (after, checkpoint.tail_hash) if resumed and after else (None, None)
        last_entry: P.Entry | None = None

        def flush():
            nonlocal pending
            if pending:
                batch, pending = pending, []
                return Batch(sid, batch)
            return None

        for ev in self._events(after, upto):
            events_read += 1
            bytes_read += len(ev.raw)
            parent = tail
            completion = closes = None
            if ev.type == "tool.started":
                ids = tool_ids(ev.payload)
                # the first completion named by any of its ids that no other call took
                completion = next((c for c in (completions.get(i) for i in ids)
                                   if c is not None and c["seq"] not in claimed), None)
                if completion is not None:
                    claimed[completion["seq"]] = _Tool(ev.payload, ctx.claude).call_id
                else:
                    for i in ids:
                        open_calls[i] = [ev.seq, parent]
            elif ev.type == "tool.completed":
                ids = tool_ids(ev.payload)
                closes = claimed.get(ev.seq)
                opened = next((open_calls[i] for i in ids if i in open_calls), None) if ev.seq not in claimed else None
                if opened is not None:
                    # closed once, under every id it was kept by
                    for i in [k for k, v in open_calls.items() if v[0] == opened[0]]:
                        del open_calls[i]
                if opened is not None and opened[0] <= after:
                    # Started in an earlier read and kept as an open entry: now a tool call.
                    started = self._event(opened[0])
                    if started is not None:
                        truncated = next((completions[i]["truncated"] for i in ids if i in completions), False)
                        pending.append(ctx.entry(started, opened[1], {"truncated": truncated}))
                        closes = _Tool(started.payload, ctx.claude).call_id
            entry = ctx.entry(ev, parent, completion, closes)
            pending.append(entry)
            last_entry = entry
            entries_read += 1
            tail_parent, tail, tail_run = parent, entry.entry_id, None
            last_seq, last_hash = ev.seq, P.short_hash(ev.raw)
            if ev.type == "run.started" and ev.run_id in by_id:
                runs_state.setdefault(ev.run_id, [None, None, None])[1] = ev.seq
                emit.add(ev.run_id)
                tail_parent, tail, tail_run = tail, run_entry_id(ev.run_id), ev.run_id
            elif ev.type == "run.completed" and ev.run_id:
                split, codex_total = _run_split(ev.payload, ctx.claude, codex_total)
                runs_state.setdefault(ev.run_id, [None, None, None])[2] = split
                if ev.run_id in by_id:
                    emit.add(ev.run_id)
            if len(pending) >= BATCH:
                yield flush()

        # The runs' usage messages, then the chain's tail: the writer takes the
        # last entry of a unit as the session's leaf (the end of its active path).
        for rid in sorted(emit, key=lambda r: ((runs_state.get(r) or [None, None])[1] or 0, r)):
            known = runs_state.get(rid) or [None, None, None]
            if known[1] is None:
                started = self._run_started(rid)
                if started is not None and started > upto:
                    emit.discard(rid)  # its run.started is not read yet: next time, under it
                    continue
            runs_state[rid] = [by_id[rid].digest, known[1], known[2]]
            if rid != tail_run:
                pending.append(by_id[rid].entry(ctx, known[1], known[2]))
        if tail_run is not None and tail_run in by_id:
            known = runs_state.get(tail_run) or [None, None, None]
            pending.append(by_id[tail_run].entry(ctx, known[1], known[2]))
        elif tail is not None and pending and pending[-1].entry_id != tail:
            # The tail is an event (read above, or at the checkpoint's offset): handed over
            # again, unchanged, so that the writer skips it and keeps it as the leaf.
            if last_entry is not None and last_entry.entry_id == tail:
                pending.append(last_entry)
            elif tail_event is not None and event_id(tail_event.seq) == tail:
                pending.append(ctx.entry(tail_event, tail_parent))

        # Rows of the session's own tables.
        server, agent = self.server, self.agent_id
        rows: list = []
        changed_runs = [r.table_row(server, agent, sid) for r in runs if r.id in emit or not resumed]
        # (a run whose run.started is not read yet is upserted again next time: harmless)
        if changed_runs:
            rows.append((RUNS, changed_runs, KEYS[RUNS]))
        if not resumed or state.get("interactions") != self.digests.get("interactions"):
            found = self._interactions()
            if found:
                rows.append((INTERACTIONS, found, KEYS[INTERACTIONS]))
        if not resumed or state.get("files") != self.digests.get("files"):
            found = self._files()
            if found:
                rows.append((FILES, found, KEYS[FILES]))
        if rows:
            pending_batch = Batch(sid, pending, rows)
            pending = []
            yield pending_batch
        elif pending:
            yield flush()

        for rid in list(runs_state):
            if rid not in by_id:  # a run row gone (never here): forget it
                runs_state.pop(rid)
        new_state = {"runs": runs_state, "open": open_calls, "codex_total": codex_total, "tail": tail,
                     "tail_parent": tail_parent, "tail_run": tail_run, "interactions": self.digests.get("interactions"),
                     "files": self.digests.get("files")}
        last_run = max(runs, key=lambda r: (R.integer(r.values["started_at"]) or 0, str(r.id)), default=None)
        new = Checkpoint(status="success", token=self.token, offset=last_seq if last_seq is not None else 0,
                         lines=last_seq or 0, tail_hash=last_hash, last_entry_id=tail, entries_read=entries_read,
                         session_uuid=sid, state=new_state)
        return Outcome(new, {sid: self.session.info(last_run.values if last_run else None)},
                       bytes_read=bytes_read, events_read=events_read, saw_entries=entries_read > 0)

    def _interactions(self) -> list[dict]:
        cols = ("id", "run_id", "kind", "request", "response", "status", "created_at", "resolved_at", "expires_at")
        out = []
        for r in self._table("interactions", cols, "created_at, id"):
            v = dict(zip(cols, r))
            out.append({"server": self.server, "agent_id": self.agent_id, "session_uuid": self.uuid,
                        "interaction_id": R.text(v["id"], 64), "run_id": R.text(v["run_id"], 64),
                        "kind": R.text(v["kind"], 32), "status": R.text(v["status"], 16),
                        "created_at": _time(v["created_at"]), "resolved_at": _time(v["resolved_at"]),
                        "expires_at": _time(v["expires_at"]), "request": R.text(v["request"]),
                        "response": R.text(v["response"])})
        return [r for r in out if r["interaction_id"]]

    def _files(self) -> list[dict]:
        cols = ("id", "rel_path", "origin", "mime", "size", "sha256", "created_at")
        out = []
        for r in self._table("files", cols, "created_at, id"):
            v = dict(zip(cols, r))
            out.append({"server": self.server, "agent_id": self.agent_id, "session_uuid": self.uuid,
                        "file_id": R.text(v["id"], 64), "origin": R.text(v["origin"], 16), "mime": R.text(v["mime"], 128),
                        "size": R.integer(v["size"]), "sha256": R.text(v["sha256"], 64), "created_at": _time(v["created_at"]),
                        "rel_path": R.text(v["rel_path"], 1024)})
        return [r for r in out if r["file_id"]]


class ServerTables(Unit):
    """The rows no session's read holds: ``audit_logs`` (read on by id) and
    ``usage_daily`` (an aggregate of the runs, kept beside them, never added
    to them)."""

    def __init__(self, db: AgentServerDB, conn, layout: Layout, agents: dict[str, str], whole: bool):
        self.conn = conn
        self.layout = layout
        self.agents = agents  # session id -> its agent (profile name), for the sessions imported
        self.whole = whole  # no agent filter: server-wide rows too
        try:
            audit = (conn.execute("SELECT COUNT(*), MAX(id) FROM audit_logs").fetchone()
                     if layout.has("audit_logs", "id") else (0, None))
            usage = self._usage_rows() if layout.has("usage_daily", "date") else []
        except sqlite3.Error as exc:
            raise SourceError(f"cannot read the audit log and usage tables: {exc}") from None
        self.usage = usage
        self.usage_digest = _digest(usage)
        self.audit_max = audit[1] or 0
        super().__init__(db.source, db.server, SERVER_AGENT, f"{db.key}#server-tables", f"{db.name}#server-tables",
                         audit[0] or 0, db.mtime_ns, token=f"{audit[0]}:{audit[1]}:{self.usage_digest}", fs=db.fs,
                         session_type="server_tables")

    USAGE_COLUMNS = ("date", "api_key_id", "provider", "model", "runs", "input_tokens", "output_tokens", "cost_usd")

    def _usage_rows(self) -> list[tuple]:
        return self.conn.execute(f"SELECT {self.layout.select('usage_daily', self.USAGE_COLUMNS)} FROM usage_daily "
                                 "ORDER BY date, api_key_id, provider, model").fetchall()

    def read(self, checkpoint: Checkpoint | None):
        after = 0
        state = {}
        if checkpoint is not None and checkpoint.resumable and checkpoint.offset <= self.audit_max:
            after, state = checkpoint.offset, checkpoint.state
        last = after
        cols = ("id", "ts", "actor", "session_id", "kind", "summary", "detail")
        sql = (f"SELECT {self.layout.select('audit_logs', cols)} FROM audit_logs WHERE id > ? AND id <= ? "
               f"ORDER BY id LIMIT {BATCH}")
        while self.layout.has("audit_logs", "id"):
            try:
                page = self.conn.execute(sql, (last, self.audit_max)).fetchall()
            except sqlite3.Error as exc:
                raise SourceError(f"cannot read audit_logs: {exc}") from None
            rows = []
            for r in page:
                v = dict(zip(cols, r))
                last = v["id"]
                session = R.text(v["session_id"], 64)
                agent = self.agents.get(session) if session else None
                if agent is None and self.whole:
                    agent = SERVER_AGENT  # server-wide, or of a session no longer in the database
                if agent is None:
                    continue  # a session not imported here (another agent's)
                rows.append({"server": self.server, "agent_id": agent,
                             "session_uuid": P.visible_id(session) if session else session,
                             "audit_id": R.integer(v["id"]), "ts": _time(v["ts"]), "actor": R.text(v["actor"], 128),
                             "kind": R.text(v["kind"], 32), "summary": R.text(v["summary"]),
                             "detail": R.text(v["detail"])})
            if rows:
                yield Batch(None, [], [(AUDIT_LOGS, rows, KEYS[AUDIT_LOGS])])
            if len(page) < BATCH:
                break
        if self.whole and state.get("usage") != self.usage_digest and self.usage:
            rows = []
            for r in self.usage:
                v = dict(zip(self.USAGE_COLUMNS, r))
                rows.append({"server": self.server, "agent_id": SERVER_AGENT, "date": R.text(v["date"], 10),
                             "api_key_id": R.text(v["api_key_id"], 64), "provider": R.text(v["provider"], 32),
                             "model": R.text(v["model"], 128), "runs": R.integer(v["runs"]),
                             "input_tokens": R.integer(v["input_tokens"]), "output_tokens": R.integer(v["output_tokens"]),
                             "cost_usd": R.number(v["cost_usd"])})
            yield Batch(None, [], [(USAGE_DAILY, rows, KEYS[USAGE_DAILY])])
        new = Checkpoint(status="success", token=self.token, offset=last, lines=last,
                         state={"usage": self.usage_digest})
        return Outcome(new)


# ---------------------------------------------------------------------------
# The kind


class AgentServerSource(Source):
    kind = KIND
    name = "agent-server"
    order = 40
    records_costs = False  # Claude runs carry their cost (kept); Codex runs none: priced from the table
    shell_tools = SHELL_TOOLS
    tables = TABLES
    unique = {t: [k] for t, k in KEYS.items()}
    indexes = {
        RUNS: {"idx_as_runs_session": ("session_uuid",), "idx_as_runs_link": ("server", "agent_id", "session_id")},
        INTERACTIONS: {"idx_as_interactions_session": ("session_uuid",),
                       "idx_as_interactions_link": ("server", "agent_id", "session_id")},
        FILES: {"idx_as_files_session": ("session_uuid",), "idx_as_files_link": ("server", "agent_id", "session_id")},
        AUDIT_LOGS: {"idx_as_audit_ts": ("ts",), "idx_as_audit_link": ("server", "agent_id", "session_id")},
        USAGE_DAILY: {"idx_as_usage_date": ("date",)},
    }
    snapshot_tables = (
        Table(RUNS, local_time_from="started_at", redact=("error",),
              indexes=(("day",), ("status",), ("session_id",), ("agent_id",), ("server",), ("started_at",))),
        Table(INTERACTIONS, local_time_from="created_at", redact=("request", "response"),
              indexes=(("day",), ("kind",), ("status",), ("session_id",), ("agent_id",))),
        Table(FILES, local_time_from="created_at", redact=("rel_path",), indexes=(("day",), ("origin",), ("session_id",), ("agent_id",))),
        Table(AUDIT_LOGS, local_time_from="ts", redact=("summary", "detail", "actor"),
              indexes=(("day",), ("kind",), ("actor",), ("session_id",), ("server",), ("agent_id",), ("ts",))),
        Table(USAGE_DAILY, indexes=(("date",), ("provider",), ("model",), ("api_key_id",), ("server",))),
    )
    canned_queries = {"audit_log": AUDIT_LOG_QUERY}
    places = (DEFAULT_ROOT,)

    # -- discovery -------------------------------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        return name == DB_NAME and head.startswith(SQLITE_MAGIC)

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope, out: Discovery):
        return self._container(fs, path, scope, out, listed=(size, mtime_ns))

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        for db in (fs.join(path, "data", DB_NAME), fs.join(path, DB_NAME)):
            try:
                found = fs.stat(db)
            except OSError as exc:
                out.errors.append(f"cannot stat {db}: {exc.strerror or exc}")
                return True
            if found is not None and found[0] == "file" and self._is_sqlite(fs, db, found[1]):
                self._container(fs, db, scope, out, listed=(found[1], found[2]))
                return True
        return False

    @staticmethod
    def _is_sqlite(fs: FileSystem, path: str, size: int) -> bool:
        try:
            with fs.open(path, size) as f:
                return f.read(16) == SQLITE_MAGIC
        except OSError:
            return True  # read again, and failed clearly, by the import

    def _container(self, fs: FileSystem, path: str, scope: Scope, out: Discovery, listed: tuple[int, int]):
        return AgentServerDB.list_into(out, self, fs, path, scope, SERVER_AGENT, listed)

    # -- after the run, and stats ------------------------------------------------------

    def finish_group(self, store, server: str, agent_id: str, metadata: dict) -> None:
        """Link the rows of this kind's tables to their archived session
        (``session_id`` = sessions.id), once the session exists."""
        where, params = ("server = ?", (server,)) if agent_id == SERVER_AGENT else (
            "server = ? AND agent_id = ?", (server, agent_id))
        session_of = ("(SELECT s.id FROM sessions s WHERE s.server = [{t}].server AND s.agent_id = [{t}].agent_id "
                      "AND s.session_uuid = [{t}].session_uuid)")
        for table in LINKED:
            unlinked = f"WHERE {where} AND session_id IS NULL AND session_uuid IS NOT NULL"
            # the sessions gaining rows are re-read by the snapshot's update (store: the change log)
            store.touch(r[0] for r in store.tuples(
                f"SELECT DISTINCT {session_of.format(t=table)} FROM [{table}] {unlinked}", params))
            store.execute(f"UPDATE [{table}] SET session_id = {session_of.format(t=table)} {unlinked}", params)

    def usage_deferred(self, store, session_ids: list[int]) -> None:
        """Runs of sessions whose provider transcript is archived count there."""
        for i in range(0, len(session_ids), 500):
            batch = session_ids[i:i + 500]
            store.execute(f"UPDATE {RUNS} SET usage_counted = 0 WHERE session_id IN ({', '.join('?' for _ in batch)})",
                          batch)
            store.touch(batch)

    def extra_stats(self, store) -> dict:
        """Counted as stored: runs, events (every event is one message or one
        entry; the runs' usage messages are not events), interactions, audit
        logs; unknown event types and tool calls that never completed."""
        def one(sql: str, params=()) -> int:
            return int(store.query(sql, params)[0][0] or 0)

        entries = ("SELECT COUNT(*) FROM entries e JOIN sessions s ON s.id = e.session_id "
                   "WHERE s.source = ?")
        runs = store.query(f"SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost_usd) FROM {RUNS}")[0]
        return {
            "runs": int(runs[0] or 0),
            "events": one(entries, (KIND,)) + one("SELECT COUNT(*) FROM messages WHERE source = ? AND native_role <> ?",
                                                   (KIND, RUN_ROLE)),
            "interactions": one(f"SELECT COUNT(*) FROM {INTERACTIONS}"),
            "audit_logs": one(f"SELECT COUNT(*) FROM {AUDIT_LOGS}"),
            "files_metadata": one(f"SELECT COUNT(*) FROM {FILES}"),
            "unknown_events": one(entries + " AND e.custom_type = ?", (KIND, UNKNOWN)),
            "tool_calls_never_completed": one(entries + " AND e.custom_type = ?", (KIND, NEVER_COMPLETED)),
            "runs_usage": {"input": int(runs[1] or 0), "output": int(runs[2] or 0),
                           "cost_recorded": round(float(runs[3] or 0.0), 8)},
        }


SOURCE = AgentServerSource()

__all__ = ["SOURCE", "AgentServerSource", "AgentServerDB", "SessionUnit", "ServerTables", "connect_readonly",
           "COPIED_TABLES", "NEVER_READ", "TABLES"]
