"""OpenCode (sst/opencode): sessions kept under ``~/.local/share/opencode/``, either in its
SQLite database ``opencode.db`` (1.x; WAL mode) or, in older releases (0.x), as one JSON file per
object in ``storage/`` (docs/opencode.md says what is read and how it maps to the archive).

- **Paths**: the data folder (``~/.local/share/opencode``: ``opencode.db`` and/or ``storage/``),
  its ``storage/`` folder, a home folder holding ``.local/share/opencode``, ``opencode.db`` itself
  or one ``storage/session/<project>/ses_*.json`` file. opencode-go/Crush keep an
  ``opencode.db`` too (``.opencode/opencode.db``, tables ``sessions``/``messages``/``files``):
  told apart by its tables, never claimed.
- **The database** is a container (token: its size and time with its non-empty ``-wal``),
  opened read-only and WAL-safe through ``readonly.connect``, whose authorizer lets it read
  :data:`READ_TABLES` only: the credential tables (:data:`NEVER_READ`) are refused by SQLite
  itself, and the ``event`` table (a second copy of the history, as an event log) is never read.
  One unit per session, key ``<db>#<session id>``, token: the session row's digest and the
  count and newest ``time_updated`` of its messages and parts. A session that only grew (no
  message or part before its last message changed) is read from its last message on; anything
  else re-reads the session, merged by stable ids.
- **JSON storage**: one unit per session file, with its ``message/<session id>/msg_*.json`` and
  their ``part/<message id>/prt_*.json`` files (token: every file's size and time). The files are
  rewritten whole: the session is read whole whenever one changes, merged by stable ids.
- **Rows**: a user message is one ``user`` row (its typed text parts; a ``synthetic`` text part,
  injected by OpenCode, is a ``system`` row). An assistant message is one ``assistant`` row per
  step (``step-start`` ... ``step-finish``: one model call, its usage and recorded cost from its
  ``step-finish`` part, each once; the message's own ``tokens`` repeat its last step's and are
  never summed), its ``reasoning`` parts ``thinking`` blocks, its ``tool`` parts ``toolCall``
  blocks, each completed or failed tool then a ``toolResult`` row. Part types this module does
  not know are kept as entries.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from typing import Any

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..units import Batch, Checkpoint, NotATranscript, Outcome, SessionInfo, SourceError, Unit, file_token
from . import readonly
from .base import Discovery, Scope, Source
from .fs import FileSystem, files_in

KIND = "opencode"
AGENT = "opencode"
DB_RE = re.compile(r"^opencode(?:-[A-Za-z0-9._-]+)?\.db$")
DATA_DIR = ".local/share/opencode"
STORAGE = "storage"
SQLITE_MAGIC = b"SQLite format 3\x00"
# opencode-go / Crush: same file name, another format (their schema sits in the first page).
OTHER_DB_MARKERS = (b"goose_db_version", b"CREATE TABLE sessions", b"CREATE TABLE IF NOT EXISTS sessions")
SHELL_TOOLS = frozenset({"bash"})

# The tables read (and the only ones a copy made on another server holds). Never the credential
# tables, nor ``event`` (the history again, as an event log: never counted).
READ_TABLES = ("session", "message", "part", "project", "session_message")
NEVER_READ = ("account", "credential", "control_account", "session_share", "event")
READABLE = frozenset(READ_TABLES)
REQUIRED = ("session", "message", "part")

# Part types folded into messages; any other is kept as an entry (entry_type ``part.<type>``).
KNOWN_PARTS = frozenset({"text", "reasoning", "tool", "step-start", "step-finish"})
# Part types kept as entries (never a row's content): known, so not counted as unknown records.
ENTRY_PARTS = frozenset({"file", "patch", "snapshot", "agent", "subtask", "compaction", "retry"})
DONE = ("completed", "error")  # tool states that have a result
PLACEHOLDER_TITLE = re.compile(r"^(?:New session|Child session) - \d{4}-\d\d-\d\dT")
MAX_JSON_BYTES = 64 * 1024 * 1024
BATCH = 500


# ---------------------------------------------------------------------------
# Small, total conversions


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _time(ms: Any) -> str | None:
    return P.format_timestamp(ms) if R.integer(ms) is not None else None


def _digest(*parts: Any) -> str:
    return hashlib.blake2b(orjson.dumps(parts, default=str), digest_size=8).hexdigest()


def _project(cwd: str | None) -> str | None:
    if not cwd:
        return None
    name = re.split(r"[\\/]", cwd.rstrip("/\\"))[-1]
    return name[:255] or None


def _load(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        obj, _raw = P.loads_line(data.strip().replace(b"\r", b"").replace(b"\n", b" "))
        return obj


def call_key(part_id: str) -> str:
    """A model call's identity: its step-finish part (each counted once)."""
    return P.short_hash(b"opencode-step:" + part_id.encode("utf-8", "replace"))


# ---------------------------------------------------------------------------
# Messages and parts -> entries (the same for the database and the JSON storage)


class Item:
    """A message or a part as read: its id and its JSON (with the ids the database keeps in columns
    put back, so that both layouts give the same rows)."""

    __slots__ = ("id", "data")

    def __init__(self, id_: str, data: dict):
        self.id = id_
        self.data = data


class SessionParser:
    """Turns one session's messages (in id order: ids sort by time) into archive entries, chained:
    each row's parent is the row before it."""

    def __init__(self, sid: str, parent: str | None = None, seq: int = 0):
        self.sid = sid
        self.tail = parent
        self.seq = seq
        self.entries: list[P.Entry] = []

    # -- rows ---------------------------------------------------------------------------

    def _add(self, entry_id: str, row: dict, raw: bytes, calls: list | None = None, etype: str = "message") -> None:
        entry = P.Entry(entry_id, self.tail, etype, self.seq, {}, raw, row=row,
                        calls=calls if calls is not None else ([] if etype == "message" else None))
        self.entries.append(entry)
        self.tail = entry_id
        self.seq += 1

    def _message(self, entry_id: str, role: str, native: str, blocks: list | None, raw: bytes, **fields) -> None:
        ts = fields.pop("timestamp", None)
        row = R.message_row(entry_id, role, blocks=blocks, native_role=native, parent=self.tail, timestamp=ts,
                            seq=self.seq, raw_json=raw.decode("utf-8", "replace"), **fields)
        calls = R.tool_call_rows(blocks, ts, SHELL_TOOLS, role=role)
        self._add(entry_id, row, raw, calls)

    def _entry(self, entry_id: str, etype: str, obj: dict, raw: bytes, ts: str | None,
               custom: str | None = None) -> None:
        row = {"entry_uuid": entry_id, "parent_uuid": self.tail, "entry_type": etype[:64], "custom_type": custom,
               "text_preview": P.entry_preview(obj), "timestamp": ts, "seq": self.seq,
               "raw_json": raw.decode("utf-8", "replace")}
        self._add(entry_id, row, raw, etype=etype[:64])

    # -- a message ------------------------------------------------------------------------

    def message(self, msg: Item, parts: list[Item]) -> None:
        info = msg.data
        role = info.get("role")
        created = _time(_dict(info.get("time")).get("created"))
        if role == "user":
            self._user(msg, parts, created)
        elif role == "assistant":
            self._assistant(msg, parts, created)
        else:  # a role this module does not know: kept, not a message, marked (docs/sources.md, "Unknown records")
            self._entry(P.clamp_id(msg.id), f"message.{R.text(role) or '?'}", info, R.dumps({"message": info}).encode(),
                        created, custom=V.UNKNOWN)
            for part in parts:
                self._part_entry(part, created)

    def _part_entry(self, part: Item, ts: str | None) -> None:
        kind = R.text(part.data.get("type")) or "?"
        when = _time(_dict(part.data.get("time")).get("start")) or ts
        known = kind in KNOWN_PARTS or kind in ENTRY_PARTS
        self._entry(P.clamp_id(part.id), f"part.{kind}", part.data, R.dumps({"part": part.data}).encode(), when,
                    custom=None if known else V.UNKNOWN)

    def _user(self, msg: Item, parts: list[Item], created: str | None) -> None:
        info = msg.data
        typed, injected, other = [], [], []
        for part in parts:
            p = part.data
            kind = p.get("type")
            if kind == "text" and isinstance(p.get("text"), str):
                (injected if p.get("synthetic") is True else typed).append(part)
            elif kind == "file":
                typed.append(part)
            else:
                other.append(part)
        model = _dict(info.get("model"))
        common = {"provider": R.text(model.get("providerID")), "model": R.text(model.get("modelID"))}
        if typed or not injected:
            blocks = [self._user_block(p.data) for p in typed]
            raw = R.dumps({"message": info, "parts": [p.data for p in typed]}).encode()
            self._message(P.clamp_id(msg.id), V.USER, "user", blocks, raw, timestamp=created, **common)
        for part in injected:
            raw = R.dumps({"message": info, "parts": [part.data]}).encode()
            self._message(P.clamp_id(part.id), V.SYSTEM, "user", [{"type": "text", "text": part.data["text"]}], raw,
                          timestamp=created, is_synthetic=1, **common)
        for part in other:
            self._part_entry(part, created)

    @staticmethod
    def _user_block(p: dict) -> dict:
        if p.get("type") == "file":  # an attachment: its name and type, never its bytes (a data: URL)
            name = R.text(p.get("filename")) or R.text(_dict(p.get("source")).get("path")) or "file"
            return {"type": "text", "text": f"[file {name}]", "mimeType": R.text(p.get("mime"))}
        return {"type": "text", "text": p["text"]}

    def _assistant(self, msg: Item, parts: list[Item], created: str | None) -> None:
        info = msg.data
        steps: list[list[Item]] = []
        current: list[Item] = []
        others: list[Item] = []
        for part in parts:
            kind = part.data.get("type")
            if kind not in KNOWN_PARTS:
                others.append(part)
                continue
            if kind == "step-start" and current:
                steps.append(current)
                current = []
            current.append(part)
            if kind == "step-finish":
                steps.append(current)
                current = []
        if current or not steps:
            steps.append(current)
        for index, step in enumerate(steps):
            self._step(msg, step, index, created)
        for part in others:
            self._part_entry(part, created)

    def _step(self, msg: Item, step: list[Item], index: int, created: str | None) -> None:
        info = msg.data
        blocks: list = []
        finish = None
        started = None
        for part in step:
            p = part.data
            kind = p.get("type")
            when = R.integer(_dict(p.get("time")).get("start"))
            if started is None and when is not None:
                started = when
            if kind == "text" and isinstance(p.get("text"), str):
                blocks.append({"type": "text", "text": p["text"]})
            elif kind == "reasoning" and isinstance(p.get("text"), str):
                blocks.append({"type": "thinking", "thinking": p["text"]})
            elif kind == "tool":
                state = _dict(p.get("state"))
                args = state.get("input")
                blocks.append({"type": "toolCall", "id": R.text(p.get("callID")), "name": R.text(p.get("tool")),
                               "arguments": args if isinstance(args, dict) else {}})
            elif kind == "step-finish":
                finish = part
        if not blocks and finish is None and index > 0:
            return
        first = step[0].id if step else None
        # the first step is the message itself; a later one its step-start part (stable ids)
        eid = P.clamp_id(msg.id if index == 0 or first is None else first)
        usage: dict = {}
        if finish is not None:
            usage = self._usage(finish)
        ts = _time(started) or created
        raw = R.dumps({"message": info, "step": index, "parts": [p.data for p in step]}).encode()
        error = _dict(info.get("error"))
        self._message(
            eid, V.ASSISTANT, "assistant", blocks, raw, timestamp=ts,
            provider=R.text(info.get("providerID")), model=R.text(info.get("modelID")),
            stop_reason=R.text(_dict(finish.data).get("reason") if finish else info.get("finish")),
            is_error=bool(error), error_message=R.text(_dict(error.get("data")).get("message")) or R.text(
                error.get("name")),
            **usage)
        for part in step:
            p = part.data
            if p.get("type") == "tool" and _dict(p.get("state")).get("status") in DONE:
                self._result(part)

    @staticmethod
    def _usage(finish: Item) -> dict:
        p = finish.data
        tokens = _dict(p.get("tokens"))
        cache = _dict(tokens.get("cache"))
        values = [tokens.get("input"), tokens.get("output"), tokens.get("reasoning"), cache.get("read"),
                  cache.get("write")]
        numbers = [R.integer(v) if v is not None else 0 for v in values]
        cost = R.number(p.get("cost"))
        invalid = any(n is None or n < 0 for n in numbers) or (p.get("cost") is not None and cost is None)
        inp, out, reasoning, read, write = (n or 0 for n in numbers)
        total = R.integer(tokens.get("total"))
        if total is None or total < 0:
            total = inp + out + reasoning + read + write
        return {"input_tokens": inp, "output_tokens": out + reasoning, "cache_read_tokens": read,
                "cache_write_tokens": write, "total_tokens": total, "cost_usd": cost,
                "call_key": call_key(finish.id), "usage_invalid": invalid}

    def _result(self, part: Item) -> None:
        p = part.data
        state = _dict(p.get("state"))
        times = _dict(state.get("time"))
        failed = state.get("status") == "error"
        output = state.get("error") if failed else state.get("output")
        text = output if isinstance(output, str) else (R.dumps(output) if output is not None else "")
        tool = R.text(p.get("tool"), 128)
        meta = _dict(state.get("metadata"))
        exit_code = R.integer(meta.get("exit")) if tool in SHELL_TOOLS else None
        start, end = R.integer(times.get("start")), R.integer(times.get("end"))
        raw = R.dumps({"part": p}).encode()
        self._message(P.clamp_id(part.id), V.TOOL_RESULT, "tool", [{"type": "text", "text": text}], raw,
                      timestamp=_time(end) or _time(start), tool_call_id=R.text(p.get("callID"), 255),
                      tool_name=tool, exit_code=exit_code, is_error=failed or bool(exit_code),
                      duration_ms=end - start if start is not None and end is not None and end >= start else None)


def session_values(*, directory: str | None, parent: str | None, title: Any, created: Any,
                   archived: Any = None, worktree: str | None = None, model: Any = None, version: Any = None) -> dict:
    title = R.text(title)
    cwd = P.cut_str(directory, 512)
    values = {"cwd": cwd, "project": _project(worktree if worktree not in (None, "", "/") else cwd),
              "started_at": _time(created), "times_approximate": 0,
              "title": P.cut_str(title, 512) if title and not PLACEHOLDER_TITLE.match(title) else None}
    if parent:
        values["parent_session_uuid"] = P.clamp_id(parent)
    if R.integer(archived):
        values["archived_at"] = _time(archived)
    if R.text(version):
        values["agent_version"] = R.text(version, 64)  # the OpenCode that wrote the session
    m = _dict(model)
    if m:
        values["model"] = R.text(m.get("id") or m.get("modelID"), 128)
        values["model_provider"] = R.text(m.get("providerID"), 64)
    return values


# ---------------------------------------------------------------------------
# The database


class Layout(readonly.Layout):
    """The readable tables present and their columns."""

    def __init__(self, conn: sqlite3.Connection):
        super().__init__(conn, READABLE)
        if not (self.has("session", "id") and self.has("message", "id", "session_id", "data")
                and self.has("part", "id", "message_id", "session_id", "data")):
            raise SourceError("not an OpenCode (sst/opencode) database: no session, message and part tables")


SESSION_COLUMNS = ("id", "project_id", "parent_id", "slug", "directory", "title", "version", "time_created",
                   "time_updated", "time_archived", "agent", "model")


class OpencodeDB(readonly.Database):
    """One ``opencode.db``; its units are its sessions."""

    session_type = "opencode_db"
    layout = Layout

    def connect(self):
        return readonly.connect_copy(self.fs, self.path, READ_TABLES, READABLE)

    def _units(self, conn: sqlite3.Connection, layout: Layout) -> list[Unit]:
        agent = self.scope.agent or AGENT
        if not self.scope.wants(agent):
            return []
        upd = "time_updated" if layout.has("message", "time_updated") else "0"
        pupd = "time_updated" if layout.has("part", "time_updated") else "0"
        messages = {r[0]: r[1:] for r in conn.execute(
            f"SELECT session_id, COUNT(*), MAX({upd}) FROM message GROUP BY session_id")}
        parts = {r[0]: r[1:] for r in conn.execute(
            f"SELECT session_id, COUNT(*), MAX({pupd}) FROM part GROUP BY session_id")}
        extra = {}
        if layout.has("session_message", "session_id"):
            su = "time_updated" if layout.has("session_message", "time_updated") else "0"
            extra = {r[0]: r[1:] for r in conn.execute(
                f"SELECT session_id, COUNT(*), MAX({su}) FROM session_message GROUP BY session_id")}
        worktrees = {}
        if layout.has("project", "id", "worktree"):
            worktrees = dict(conn.execute("SELECT id, worktree FROM project").fetchall())
        spawned = self._spawned(conn)
        units: list[Unit] = []
        for row in conn.execute(f"SELECT {layout.select('session', SESSION_COLUMNS)} FROM session ORDER BY id"):
            v = dict(zip(SESSION_COLUMNS, row))
            if not isinstance(v["id"], str) or not v["id"]:
                continue
            units.append(SessionUnit(self, conn, layout, agent, v, messages.get(v["id"], (0, 0)),
                                     parts.get(v["id"], (0, 0)), extra.get(v["id"], (0, 0)),
                                     worktrees.get(v["project_id"]), spawned.get(v["id"])))
        return units

    @staticmethod
    def _spawned(conn: sqlite3.Connection) -> dict[str, str]:
        """child session id -> the ``task`` tool call that started it (its metadata names it)."""
        out: dict[str, str] = {}
        for (data,) in conn.execute("SELECT data FROM part WHERE data LIKE '%\"task\"%'"):
            p = _load(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data or b""))
            p = _dict(p)
            child = _dict(_dict(p.get("state")).get("metadata")).get("sessionId")
            if p.get("tool") == "task" and isinstance(child, str) and isinstance(p.get("callID"), str):
                out.setdefault(child, p["callID"])
        return out


class SessionUnit(Unit):
    """One session of the database: its messages and parts."""

    def __init__(self, db: OpencodeDB, conn, layout: Layout, agent: str, values: dict, messages: tuple,
                 parts: tuple, extra: tuple, worktree: str | None, spawned_by: str | None):
        self.sid = values["id"]
        self.uuid = P.clamp_id(self.sid)
        header = {k: x for k, x in values.items() if k != "time_updated"}
        token = f"{messages[0]}:{messages[1]}:{parts[0]}:{parts[1]}:{extra[0]}:{extra[1]}:{_digest(header)}"
        newest = max((R.integer(t) or 0 for t in (values["time_updated"], messages[1], parts[1])), default=0)
        super().__init__(db.source, db.server, agent, f"{db.key}#{self.uuid}", f"{db.name}#{self.uuid}",
                         (messages[0] or 0) + (parts[0] or 0), newest * 1_000_000, token=token, fs=db.fs)
        self.conn = conn
        self.layout = layout
        self.values = values
        self.header = header
        self.worktree = worktree
        self.spawned_by = spawned_by

    def _query(self, sql: str, params: tuple) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise SourceError(f"cannot read session {self.uuid}: {exc}") from None

    def _changed_before(self, last: str, watermark: int) -> bool:
        """Whether a message before ``last`` (or one of its parts) changed after ``watermark``."""
        if not self.layout.has("message", "time_updated") or not self.layout.has("part", "time_updated"):
            return True
        found = self._query("SELECT 1 FROM message WHERE session_id = ? AND id < ? AND time_updated > ? LIMIT 1",
                            (self.sid, last, watermark))
        found = found or self._query("SELECT 1 FROM part WHERE session_id = ? AND message_id < ? AND time_updated > ? "
                                     "LIMIT 1", (self.sid, last, watermark))
        return bool(found)

    def read(self, checkpoint: Checkpoint | None):
        # one read transaction: the messages, their parts and the watermark seen at one moment
        try:
            self.conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise SourceError(f"cannot read session {self.uuid}: {exc}") from None
        try:
            entries, outcome = self._read(checkpoint)
        finally:
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error:
                pass
        for i in range(0, len(entries), BATCH):
            yield Batch(self.uuid, entries[i:i + BATCH])
        return outcome

    def _read(self, checkpoint: Checkpoint | None) -> tuple[list, Outcome]:
        sid = self.uuid
        state = checkpoint.state if checkpoint is not None and checkpoint.resumable else {}
        after = None
        parser = SessionParser(sid)
        if (state and checkpoint.session_uuid == sid and isinstance(state.get("last"), str)
                and isinstance(state.get("w"), int) and not self._changed_before(state["last"], state["w"])):
            after = state["last"]
            parser = SessionParser(sid, state.get("before"), R.integer(state.get("seq")) or 0)
        mupd = "time_updated" if self.layout.has("message", "time_updated") else "0"
        pupd = "time_updated" if self.layout.has("part", "time_updated") else "0"
        where, params = ("session_id = ? AND id >= ?", (self.sid, after)) if after else ("session_id = ?", (self.sid,))
        msgs = self._query(f"SELECT id, {mupd}, data FROM message WHERE {where} ORDER BY id", params)
        pwhere, pparams = (("session_id = ? AND message_id >= ?", (self.sid, after)) if after
                           else ("session_id = ?", (self.sid,)))
        by_message: dict[str, list[Item]] = {}
        watermark = R.integer(state.get("w")) or 0 if after else 0
        bad = events = read = 0

        def load(updated, data) -> dict | None:
            """A row's data as the JSON object it holds (None, counted bad, when it holds none); the
            row, its bytes and its time_updated counted."""
            nonlocal bad, events, read, watermark
            events += 1
            raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data or b"")
            read += len(raw)
            watermark = max(watermark, R.integer(updated) or 0)
            obj = _load(raw)
            if isinstance(obj, dict):
                return obj
            bad += 1
            return None

        for pid, mid, updated, data in self._query(
                f"SELECT id, message_id, {pupd}, data FROM part WHERE {pwhere} ORDER BY message_id, id", pparams):
            obj = load(updated, data)
            if obj is not None:
                by_message.setdefault(mid, []).append(Item(pid, {"id": pid, "messageID": mid, "sessionID": self.sid,
                                                                 **obj}))
        last = before = None
        seq_before = parser.seq
        for mid, updated, data in msgs:
            obj = load(updated, data)
            if obj is None:
                continue
            last, before, seq_before = mid, parser.tail, parser.seq
            parser.message(Item(mid, {"id": mid, "sessionID": self.sid, **obj}), by_message.get(mid, []))
        entries = parser.entries
        if self.layout.has("session_message", "id", "session_id", "data"):
            entries = self._session_messages() + entries
        if last is None and after is not None:
            last, before, seq_before = after, state.get("before"), R.integer(state.get("seq")) or 0
        new_state = {"last": last, "before": before, "seq": seq_before, "w": watermark} if last else {}
        new = Checkpoint(status="success", token=self.token, offset=events, lines=parser.seq, bad_lines=bad,
                         entries_read=len(entries), session_uuid=sid, state=new_state)
        v = self.values
        values = session_values(directory=R.text(v["directory"]), parent=R.text(v["parent_id"]),
                                title=v["title"], created=v["time_created"], archived=v["time_archived"],
                                worktree=R.text(self.worktree), model=_load(v["model"].encode())
                                if isinstance(v["model"], str) else None, version=v["version"])
        if self.spawned_by and values.get("parent_session_uuid"):
            values["parent_call_id"] = self.spawned_by[:255]
        return entries, Outcome(new, {sid: SessionInfo(values, R.dumps(self.header))}, bad=bad, bytes_read=read,
                                events_read=events, saw_entries=bool(entries))

    def _session_messages(self) -> list[P.Entry]:
        """``session_message`` rows (a model switch, ...): kept as entries, each a root of its own (off
        the messages' chain, so that a resumed read hands them over unchanged)."""
        cols = ("id", "type", "time_created", "data")
        out = []
        for r in self._query(f"SELECT {self.layout.select('session_message', cols)} FROM session_message "
                             "WHERE session_id = ? ORDER BY id", (self.sid,)):
            v = dict(zip(cols, r))
            if not isinstance(v["id"], str):
                continue
            data = v["data"]
            obj = _load(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else None
            record = {"id": v["id"], "type": v["type"], "time_created": v["time_created"], "data": obj}
            raw = R.dumps(record).encode()
            eid = P.clamp_id("sm:" + v["id"])
            row = {"entry_uuid": eid, "parent_uuid": None, "entry_type": "session_message",
                   "custom_type": R.text(v["type"], 128), "text_preview": P.entry_preview(_dict(obj)),
                   "timestamp": _time(v["time_created"]), "seq": -1 - len(out),
                   "raw_json": raw.decode("utf-8", "replace")}
            out.append(P.Entry(eid, None, "session_message", -1 - len(out), {}, raw, row=row, calls=None))
        return out


# ---------------------------------------------------------------------------
# The JSON storage (0.x)


class StorageSession(Unit):
    """``storage/session/<project>/ses_*.json`` with its messages and their parts, read whole."""

    def __init__(self, source: "OpencodeSource", server: str, agent: str, path: str, name: str, size: int,
                 mtime_ns: int, storage: str, files: list[tuple[str, str, str, int, int]], fs: FileSystem):
        # files: (kind "message" | "part", message id, path, size, mtime_ns), messages first
        joined = "|".join(f"{f[2][len(storage):]}={f[3]}:{f[4]}" for f in files)
        token = file_token(size, mtime_ns) + f"+{len(files)}f:{P.short_hash(joined.encode('utf-8', 'surrogatepass'))}"
        newest = max([mtime_ns, *(f[4] for f in files)])
        super().__init__(source, server, agent, path, name, size + sum(f[3] for f in files), newest, token=token,
                         fs=fs, path=path)
        self.own_size = size
        self.storage = storage
        self.files = files

    def _json(self, path: str, size: int) -> tuple[Any, int]:
        if size > MAX_JSON_BYTES:
            raise SourceError(f"{self.fs.basename(path)}: {size} bytes, more than the {MAX_JSON_BYTES} a file may have")
        with self.fs.open(path, size) as f:
            data = f.read()
        return _load(data), len(data)

    def read(self, checkpoint: Checkpoint | None):
        info, read = self._json(self.path, self.own_size)
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            raise NotATranscript(f"{self.name}: not an OpenCode session file (no id)")
        sid = P.clamp_id(info["id"])
        bad = events = 0
        warnings: list[str] = []
        messages: list[Item] = []
        parts: dict[str, list[Item]] = {}
        for kind, mid, path, size, _mtime in self.files:
            obj, n = self._json(path, size)
            read += n
            events += 1
            stem = self.fs.basename(path)[:-5]
            if not isinstance(obj, dict):
                bad += 1  # half-written (read again when it changes)
                continue
            if kind == "message":
                messages.append(Item(R.text(obj.get("id")) or stem, obj))
            else:
                parts.setdefault(mid, []).append(Item(R.text(obj.get("id")) or stem, obj))
        if bad:
            warnings.append(f"{self.name}: {bad} of its message and part files are not complete JSON (skipped)")
        parser = SessionParser(sid)
        for msg in sorted(messages, key=lambda m: m.id):
            parser.message(msg, sorted(parts.get(msg.id, []), key=lambda p: p.id))
        if parser.entries:
            yield Batch(sid, parser.entries)
        t = _dict(info.get("time"))
        values = session_values(directory=R.text(info.get("directory")), parent=R.text(info.get("parentID")),
                                title=info.get("title"), created=t.get("created"), archived=t.get("archived"),
                                version=info.get("version"))
        new = Checkpoint(status="success", token=self.token, offset=self.size, lines=parser.seq, bad_lines=bad,
                         entries_read=len(parser.entries), session_uuid=sid)
        header = {**info, "time": {k: x for k, x in t.items() if k != "updated"}} if t else info
        return Outcome(new, {sid: SessionInfo(values, R.dumps(header))}, bad=bad, bytes_read=read, events_read=events,
                       saw_entries=bool(parser.entries), warnings=warnings)


class NotOurs(Unit):
    """A file named on the command line that turned out not to be OpenCode's: ignored, with why."""

    def __init__(self, *args, reason: str, **kw):
        super().__init__(*args, **kw)
        self.reason = reason

    def read(self, checkpoint):
        raise NotATranscript(self.reason)
        yield  # pragma: no cover


# ---------------------------------------------------------------------------
# The kind


def _json_files(fs: FileSystem, folder: str, prefix: str, out: Discovery) -> list[tuple[str, str, int, int]]:
    return files_in(fs, folder, lambda name: name.startswith(prefix) and name.endswith(".json"), out)


class OpencodeSource(Source):
    kind = KIND
    order = 45
    records_costs = True  # each step's cost is recorded by OpenCode (kept, never replaced)
    shell_tools = SHELL_TOOLS
    places = ("~/" + DATA_DIR,)
    not_this = "not an OpenCode (sst/opencode) transcript"

    # -- discovery -------------------------------------------------------------------

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        if fs.basename(path) == STORAGE and fs.is_dir(fs.join(path, "session")):
            self._storage(fs, path, scope, out)
            return True
        roots = [path, fs.join(path, *DATA_DIR.split("/"))]
        if fs.basename(path) == "share":
            roots.append(fs.join(path, "opencode"))
        for root in roots:
            if not fs.is_dir(root):
                continue
            found = self._databases(fs, root, scope, out)
            storage = fs.join(root, STORAGE)
            if fs.is_dir(fs.join(storage, "session")) and (fs.is_dir(fs.join(storage, "message"))
                                                           or fs.is_dir(fs.join(storage, "part"))):
                self._storage(fs, storage, scope, out)
                found = True
            if found:
                return True
        return False

    def _databases(self, fs: FileSystem, root: str, scope: Scope, out: Discovery) -> bool:
        try:
            entries = fs.listdir(root) or []
        except OSError as exc:
            out.errors.append(f"cannot list {root}: {exc.strerror or exc}")
            return False
        found = False
        for e in sorted(entries, key=lambda e: e.name):
            try:
                if not (DB_RE.match(e.name) and e.is_file()):
                    continue
                head = self._head(fs, e.path, e.size)
            except OSError as exc:
                out.errors.append(f"cannot stat {e.path}: {exc.strerror or exc}")
                continue
            if head is not None and not self._ours(head):
                continue
            self._container(fs, e.path, scope, out, (e.size, e.mtime_ns))
            found = True
        return found

    @staticmethod
    def _head(fs: FileSystem, path: str, size: int) -> bytes | None:
        try:
            with fs.open(path, size) as f:
                return f.read(64 * 1024)
        except OSError:
            return None  # read again, and failed clearly, by the import

    @staticmethod
    def _ours(head: bytes) -> bool:
        return head.startswith(SQLITE_MAGIC) and not any(m in head for m in OTHER_DB_MARKERS)

    def _container(self, fs: FileSystem, path: str, scope: Scope, out: Discovery, listed: tuple[int, int]):
        return OpencodeDB.list_into(out, self, fs, path, scope, scope.agent or AGENT, listed)

    def _storage(self, fs: FileSystem, storage: str, scope: Scope, out: Discovery) -> None:
        agent = scope.agent or AGENT
        if not scope.wants(agent):
            return
        sessions = fs.join(storage, "session")
        for project in fs.subdirs(sessions):
            for path, name, size, mtime in _json_files(fs, project.path, "ses_", out):
                out.add(self._session_unit(fs, storage, path, name, size, mtime, scope, out))

    def _session_unit(self, fs: FileSystem, storage: str, path: str, name: str, size: int, mtime: int,
                      scope: Scope, out: Discovery) -> StorageSession:
        sid = name[:-5]
        files: list[tuple[str, str, str, int, int]] = []
        msgs = _json_files(fs, fs.join(storage, "message", sid), "msg_", out)
        for mpath, mname, msize, mmtime in msgs:
            files.append(("message", mname[:-5], mpath, msize, mmtime))
        for _mpath, mname, _s, _m in msgs:
            mid = mname[:-5]
            folder = fs.join(storage, "part", mid)
            if fs.is_dir(folder):
                for ppath, _pname, psize, pmtime in _json_files(fs, folder, "prt_", out):
                    files.append(("part", mid, ppath, psize, pmtime))
        return StorageSession(self, scope.server, scope.agent or AGENT, path, name, size, mtime, storage, files, fs)

    # -- one file named on the command line -----------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        if DB_RE.match(name):
            return self._ours(head)
        return name.startswith("ses_") and name.endswith(".json") and b'"id"' in head and (
            b'"projectID"' in head or b'"directory"' in head)

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope, out: Discovery):
        name = fs.basename(path)
        if DB_RE.match(name):
            return self._container(fs, path, scope, out, (size, mtime_ns))
        project = fs.dirname(path)
        sessions = fs.dirname(project)
        storage = fs.dirname(sessions)
        if fs.basename(sessions) != "session":
            return NotOurs(self, scope.server, scope.agent or AGENT, path, name, size, mtime_ns, fs=fs,
                           reason=f"{name}: not in an OpenCode storage/session/<project>/ folder")
        return self._session_unit(fs, storage, path, name, size, mtime_ns, scope, out)


SOURCE = OpencodeSource()

__all__ = ["SOURCE", "OpencodeSource", "OpencodeDB", "SessionUnit", "StorageSession", "SessionParser",
           "READ_TABLES", "NEVER_READ"]
