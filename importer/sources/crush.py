"""opencode (Go, opencode-ai/opencode, 2025) and its successor Crush (charmbracelet/crush):
one SQLite database per project, ``<project>/.opencode/opencode.db`` or
``<project>/.crush/crush.db`` (WAL mode, goose migrations). See docs/crush.md for what is
read and how it maps to the archive.

- **Paths**: a project folder (its ``.opencode/`` or ``.crush/`` inside), the data folder
  itself, the database file, or Crush's global data folder (``~/.local/share/crush``, whose
  ``projects.json`` names each project's data folder).
- **Not this kind**: sst/opencode's ``opencode.db`` (``~/.local/share/opencode/``; tables
  ``session``, ``message``, ``part``, ...) is another kind's. This one has ``sessions`` and
  ``messages`` with a ``parts`` column; a database without them is not claimed (a file named
  directly: "not a crush transcript").
- **Reading**: the database is a container (token: size and time of the file with its
  non-empty ``-wal``), opened read-only and WAL-safe (``readonly.py``; where SQLite cannot
  open it in place, from a private writable copy of the file and its ``-wal``), or copied
  consistently on another server (``fs.sqlite_copy``). Only :data:`READABLE_TABLES` are
  read: never ``files`` (the snapshots of the files the agent edited).
- **Units**: one per session, key ``<db>#<session id>``; token: a digest of the session row
  and of its messages' count, ids, update times and sizes. The checkpoint keeps each message's
  (update time, size): a re-read fetches only new or rewritten messages.
- **Rows**: a ``user`` / ``assistant`` / ``system`` message is one row; a ``tool`` message is
  one ``toolResult`` row per ``tool_result`` part. Tokens and cost are recorded per session
  only: they go on the session (``sessions`` usage columns, and the kind's table
  ``crush_sessions``), never on a message: no per-call usage, no row invented to carry it.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from typing import Any, Iterator

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..tables import Table
from ..units import Batch, Checkpoint, Outcome, SessionInfo, SourceError, Unit
from . import readonly
from .base import Discovery, Scope, Source
from .fs import FileSystem

KIND = "crush"
# Database file name -> the data folder it sits in, inside the project.
DB_NAMES = {"opencode.db": ".opencode", "crush.db": ".crush"}
GLOBAL_DIR = "~/.local/share/crush"  # Crush's global data folder (projects.json)
PROJECTS = "projects.json"
SQLITE_MAGIC = b"SQLite format 3\x00"
READABLE_TABLES = frozenset({"sessions", "messages"})
PAGE = 200  # messages fetched per query
BATCH = 500  # entries per batch
SHELL_TOOLS = frozenset({"bash"})
KNOWN_ROLES = {"user": V.USER, "assistant": V.ASSISTANT, "system": V.SYSTEM, "tool": V.TOOL_RESULT}
# Titles opencode/Crush give a session before (or instead of) its generated title: placeholders.
PLACEHOLDER_TITLES = frozenset({"New Session", "New Agent Session", "New session"})
BAD = "bad_parts"  # ... of a message whose parts are not a JSON array
NO_RESULTS = "no_results"  # ... of a tool message without a tool_result part
EXIT_RE = re.compile(r"(?:^|\n)Exit code (-?\d{1,10})[ \t]*(?:\n|$)")
# What sst/opencode's database has and this kind's has not (its first 64 KB, where the schema usually is).
OTHER_OPENCODE = (b"CREATE TABLE `session`", b'CREATE TABLE "session"', b"CREATE TABLE session ",
                  b"CREATE TABLE `part`", b"CREATE TABLE `event_sequence`", b"CREATE TABLE `session_message`")
OURS = (b"CREATE TABLE messages", b"CREATE TABLE IF NOT EXISTS messages", b"goose_db_version")

CRUSH_SESSIONS = "crush_sessions"
TABLES: dict[str, list[tuple[str, str]]] = {
    CRUSH_SESSIONS: [("id", "pk"), ("server", "str:32"), ("agent_id", "str:64"), ("session_id", "int"),
                     ("session_uuid", "str:64"), ("prompt_tokens", "bigint"), ("completion_tokens", "bigint"),
                     ("cost_usd", "decimal"), ("message_count", "int"), ("usage_scope", "str:16"),
                     ("database", "str:1024")],
}
KEYS = {CRUSH_SESSIONS: ("server", "agent_id", "session_uuid")}
USAGE_SCOPE = "session"  # crush_sessions.usage_scope: the figures are the session's, not any call's


def _int(value: Any) -> int | None:
    return R.integer(value)


def _dumps(value: Any) -> str:
    return R.dumps(value)


def _digest(*parts: Any) -> str:
    return hashlib.blake2b(orjson.dumps(parts, default=str), digest_size=8).hexdigest()


def _time(value: Any) -> str | None:
    """Seconds (the samples, and the code's own triggers) or milliseconds (what the schema's
    comments say): parser.format_timestamp tells them apart."""
    return P.format_timestamp(value) if _int(value) is not None and _int(value) > 0 else None


def _ours(head: bytes) -> bool | None:
    """What the first bytes say: True (this kind's schema), False (sst/opencode's), None (nothing)."""
    if not head.startswith(SQLITE_MAGIC):
        return False
    if any(m in head for m in OTHER_OPENCODE):
        return False
    if any(m in head for m in OURS):
        return True
    return None


def spawning_call(session_id: str) -> str | None:
    """The agent tool call that started a sub-agent session, from the session's id: Crush's
    ``<message id>$$<tool call id>``, opencode's the call id itself; a title session
    (``title-<parent id>``, opencode) has none."""
    if "$$" in session_id:
        return R.text(session_id.split("$$", 1)[1], 255) or None
    if session_id.startswith("title-"):
        return None
    return R.text(session_id, 255)


# ---------------------------------------------------------------------------
# Opening the database


def open_database(fs: FileSystem, path: str):
    """A read-only connection to the database at ``path`` allowed to read
    :data:`READABLE_TABLES` only (a context manager): in place (``mode=ro`` sees committed rows
    still in the ``-wal``), else, where SQLite cannot open it so (a read-only folder without a
    usable ``-shm``), from a private writable copy of the file and its ``-wal``."""
    # (a copy from another server gets the index the reads need)
    return readonly.connect_copy(fs, path, READABLE_TABLES, READABLE_TABLES, indexes={"messages": "session_id"},
                                 private_copy=True)


class Layout(readonly.Layout):
    """The readable tables' columns; raises when the database is not this kind's."""

    def __init__(self, conn: sqlite3.Connection):
        super().__init__(conn, READABLE_TABLES)
        if not (self.has("sessions", "id", "title") and self.has("messages", "id", "session_id", "role", "parts")):
            raise SourceError("not a crush transcript: no sessions and messages (parts) tables "
                              "(an opencode.db of sst/opencode is the opencode kind's)")


SESSION_COLUMNS = ("id", "parent_session_id", "title", "message_count", "prompt_tokens", "completion_tokens", "cost",
                   "created_at", "updated_at", "summary_message_id")
MESSAGE_COLUMNS = ("id", "session_id", "role", "parts", "model", "provider", "created_at", "updated_at",
                   "finished_at", "is_summary_message")


class CrushDB(readonly.Database):
    """One ``opencode.db`` / ``crush.db``; its units are its sessions."""

    session_type = "crush_db"
    layout = Layout

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        data_dir = self.fs.dirname(self.path)
        # The project is the folder the data folder sits in (opencode and Crush run there).
        self.cwd = self.fs.dirname(data_dir) if self.fs.basename(data_dir) in DB_NAMES.values() else None

    def connect(self):
        return open_database(self.fs, self.path)

    def _units(self, conn: sqlite3.Connection, layout: Layout) -> list[Unit]:
        agent = self.scope.agent or KIND
        if not self.scope.wants(agent):
            return []
        digests: dict[str, Any] = {}
        for sid, mid, updated, size in conn.execute(
                "SELECT session_id, id, updated_at, length(parts) FROM messages ORDER BY session_id, rowid"):
            h = digests.get(sid)
            if h is None:
                h = digests[sid] = [hashlib.blake2b(digest_size=8), 0, 0]
            h[0].update(orjson.dumps([mid, updated, size], default=str))
            h[1] += 1
            h[2] = max(h[2], _int(updated) or 0)
        units: list[Unit] = []
        for row in conn.execute(f"SELECT {layout.select('sessions', SESSION_COLUMNS)} FROM sessions ORDER BY rowid"):
            values = dict(zip(SESSION_COLUMNS, row))
            if not isinstance(values["id"], str) or not values["id"]:
                continue
            d = digests.get(values["id"])
            units.append(SessionUnit(self, conn, layout, values, agent, d[0].hexdigest() if d else "", d[1] if d else 0,
                                     d[2] if d else 0))
        return units


class SessionUnit(Unit):
    """One session: its messages."""

    def __init__(self, db: CrushDB, conn, layout: Layout, session: dict, agent: str, digest: str, count: int,
                 newest: int):
        self.uuid = P.clamp_id(session["id"])
        times = [t for t in (_int(session["updated_at"]), _int(session["created_at"]), newest) if t]
        newest_s = max(times, default=0)
        newest_s = newest_s // 1000 if newest_s > 1e11 else newest_s
        super().__init__(db.source, db.server, agent, f"{db.key}#{self.uuid}", f"{db.name}#{self.uuid}", count,
                         newest_s * 1_000_000_000, token=f"{count}:{_digest(list(session.values()), digest)}",
                         fs=db.fs, session_type="subagent" if session["parent_session_id"] else "normal")
        self.db = db
        self.conn = conn
        self.layout = layout
        self.session = session
        self.sid = session["id"]

    def _query(self, sql: str, params: tuple) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise SourceError(f"cannot read session {self.uuid}: {exc}") from None

    def _messages(self, ids: list[str]) -> Iterator[dict]:
        cols = self.layout.select("messages", MESSAGE_COLUMNS)
        for i in range(0, len(ids), PAGE):
            page = ids[i:i + PAGE]
            found = {r[0]: dict(zip(MESSAGE_COLUMNS, r)) for r in self._query(
                f"SELECT {cols} FROM messages WHERE id IN ({', '.join('?' for _ in page)})", tuple(page))}
            for mid in page:
                if mid in found:
                    yield found[mid]

    def info(self) -> SessionInfo:
        s = self.session
        title = P.cut_str(s["title"], 512)
        if title is not None and (not title.strip() or title.strip() in PLACEHOLDER_TITLES):
            title = None
        parent = s["parent_session_id"] if isinstance(s["parent_session_id"], str) and s["parent_session_id"] else None
        values = {
            "started_at": _time(s["created_at"]), "title": title, "times_approximate": 0,
            "parent_session_uuid": P.clamp_id(parent) if parent else None,
            "parent_call_id": spawning_call(s["id"]) if parent else None,
        }
        if self.db.cwd:
            values["cwd"] = R.text(self.db.cwd, 512)
            values["project"] = R.text(self.db.fs.basename(self.db.cwd), 255)
        header = {k: v for k, v in s.items() if k not in ("updated_at", "message_count")}
        header["database"] = self.db.path
        return SessionInfo(values, _dumps(header))

    def usage_row(self) -> dict:
        s = self.session
        return {"server": self.server, "agent_id": self.agent_id, "session_uuid": self.uuid,
                "prompt_tokens": _int(s["prompt_tokens"]), "completion_tokens": _int(s["completion_tokens"]),
                "cost_usd": R.number(s["cost"]), "message_count": _int(s["message_count"]),
                "usage_scope": USAGE_SCOPE, "database": R.text(self.db.path, 1024)}

    def read(self, checkpoint: Checkpoint | None):
        order = self._query("SELECT id, updated_at, length(parts) FROM messages WHERE session_id = ? "
                            "ORDER BY created_at, rowid", (self.sid,))
        seen: dict = {}
        if checkpoint is not None and checkpoint.resumable and checkpoint.session_uuid == self.uuid:
            old = checkpoint.state.get("seen")
            seen = dict(old) if isinstance(old, dict) else {}
        shell_calls = set(checkpoint.state.get("shell") or []) if seen else set()
        summary_id = self.session["summary_message_id"]
        parser = MessageParser(self.uuid, shell_calls, summary_id if isinstance(summary_id, str) else None)
        wanted = [mid for mid, updated, size in order
                  if not isinstance(seen.get(mid), list) or seen[mid][:2] != [updated, size]]
        changed = set(wanted)
        if order and order[-1][0] not in changed:
            wanted.append(order[-1][0])  # the tail, handed over again (unchanged: skipped) to stay the leaf
        wanted_set = set(wanted)
        fetched: dict[str, dict] = {}
        position = {mid: i for i, (mid, _u, _s) in enumerate(order)}
        pending: list = []
        events = bytes_read = unknown = 0
        new_seen: dict = {}
        last_entry = None
        # Each message's parent is the last entry of the message before it (the session's order).
        previous_last: str | None = None
        for chunk_start in range(0, len(order), PAGE):
            chunk = order[chunk_start:chunk_start + PAGE]
            need = [mid for mid, _u, _s in chunk if mid in wanted_set]
            for m in self._messages(need):
                fetched[m["id"]] = m
            for mid, updated, size in chunk:
                m = fetched.pop(mid, None)
                if m is None:
                    known = seen.get(mid)
                    last_id = known[2] if isinstance(known, list) and len(known) > 2 else mid
                    new_seen[mid] = [updated, size, last_id, known[3] if isinstance(known, list) and len(known) > 3
                                     else 0]
                    previous_last = last_id
                    continue
                entries, flags = parser.entries(m, previous_last, position[mid])
                if mid in changed:
                    events += 1
                    bytes_read += len(m["parts"]) if isinstance(m["parts"], (str, bytes)) else 0
                unknown += flags.get("unknown", 0) if mid in changed else 0
                pending.extend(entries)
                last_entry = entries[-1] if entries else last_entry
                previous_last = entries[-1].entry_id if entries else previous_last
                new_seen[mid] = [updated, size, previous_last, flags.get("bad", 0)]
                if len(pending) >= BATCH:
                    yield Batch(self.uuid, pending)
                    pending = []
        if pending:
            yield Batch(self.uuid, pending)
        yield Batch(None, [], [(CRUSH_SESSIONS, [self.usage_row()], KEYS[CRUSH_SESSIONS])])
        bad = sum(v[3] for v in new_seen.values())
        bad_before = sum(v[3] for v in seen.values() if isinstance(v, list) and len(v) > 3 and isinstance(v[3], int))
        warnings = []
        if unknown:
            warnings.append(f"{self.key}: {unknown} message(s) of a role or part type the crush kind does not know, "
                            "kept as they are")
        state = {"seen": new_seen, "shell": sorted(parser.shell_calls)}
        new = Checkpoint(status="success", token=self.token, offset=len(order), lines=len(order),
                         session_uuid=self.uuid, entries_read=len(order), bad_lines=bad, state=state,
                         last_entry_id=last_entry.entry_id if last_entry is not None else None)
        return Outcome(new, sessions={self.uuid: self.info()}, bad=bad, bad_before=min(bad_before, bad),
                       bytes_read=bytes_read, events_read=events, warnings=warnings, saw_entries=bool(order))


# ---------------------------------------------------------------------------
# Messages -> entries


class MessageParser:
    """A messages row -> its entries (pure: the row's values in, entries out)."""

    def __init__(self, session_uuid: str, shell_calls: set, summary_id: str | None):
        self.session_uuid = session_uuid
        self.shell_calls = shell_calls  # call ids of shell calls (their results get an exit code)
        self.summary_id = summary_id

    @staticmethod
    def _raw(m: dict, parts: Any) -> dict:
        raw = {k: v for k, v in m.items() if k != "parts" and v is not None}
        raw["parts"] = parts
        return raw

    def entries(self, m: dict, parent: str | None, seq: int) -> tuple[list[P.Entry], dict]:
        mid = P.clamp_id(m["id"])
        role = m["role"] if isinstance(m["role"], str) else ""
        text = m["parts"].decode("utf-8", "replace") if isinstance(m["parts"], bytes) else m["parts"]
        try:
            parts = orjson.loads(text) if isinstance(text, str) else None
        except orjson.JSONDecodeError:
            parts = None
        ts = _time(m["created_at"])
        if not isinstance(parts, list):
            raw = self._raw(m, text)
            return [self._entry(mid, parent, seq, "crush_message", BAD, raw, ts)], {"bad": 1}
        if role not in KNOWN_ROLES:
            raw = self._raw(m, parts)
            # its role stays in entry_type (doctor lists it): message.<role>
            etype = f"message.{R.text(role, 56) or '?'}"
            return [self._entry(mid, parent, seq, etype, V.UNKNOWN, raw, ts)], {"unknown": 1}
        if role == "tool":
            return self._results(m, mid, parts, parent, seq, ts)
        blocks, finish, unknown = self._blocks(parts)
        summary = bool(_int(m["is_summary_message"])) or (self.summary_id is not None and m["id"] == self.summary_id)
        vocab = V.SYSTEM if summary else KNOWN_ROLES[role]
        raw = self._raw(m, parts)
        raw_text = _dumps(raw)
        reason = R.text(finish.get("reason"), 64) if finish else None
        fields: dict[str, Any] = {}
        if vocab == V.ASSISTANT:
            fields.update(model=R.text(m["model"]) or None, provider=R.text(m["provider"]) or None,
                          stop_reason=reason)
            if reason == "error":
                fields["is_error"] = 1
                fields["error_message"] = R.text(finish.get("message")) or R.text(finish.get("details"))
        row = R.message_row(mid, vocab, blocks=blocks, native_role="summary" if summary else role, parent=parent,
                            timestamp=ts, seq=seq, raw_json=raw_text, **fields)
        # (a toolCall block outside an assistant row is no call, never seen: kept in content only)
        calls = R.tool_call_rows(blocks, ts, SHELL_TOOLS, role=vocab)
        for c in calls:
            if c["tool_name"] in SHELL_TOOLS and c["call_id"]:
                self.shell_calls.add(c["call_id"])
        entry = P.Entry(mid, parent, "message", seq, raw, raw_text.encode(), row=row, calls=calls)
        return [entry], {"unknown": int(unknown)}

    @staticmethod
    def _blocks(parts: list) -> tuple[list, dict | None, bool]:
        """Parts -> pi-style blocks; the finish part; whether a part type is unknown."""
        blocks: list = []
        finish = None
        unknown = False
        for part in parts:
            if not isinstance(part, dict):
                unknown = True
                continue
            kind = part.get("type")
            data = part.get("data") if isinstance(part.get("data"), dict) else {}
            if kind == "text":
                blocks.append({"type": "text", "text": R.text(data.get("text")) or ""})
            elif kind == "reasoning":
                block = P.thinking_block(data.get("thinking"), data.get("signature"))
                blocks.append({**{k: v for k, v in data.items() if k not in ("thinking", "signature")}, **block})
            elif kind == "tool_call":
                raw_input = data.get("input")
                try:
                    args = orjson.loads(raw_input) if isinstance(raw_input, str) and raw_input.strip() else {}
                except orjson.JSONDecodeError:
                    args = None
                if not isinstance(args, dict):
                    args = {"input": raw_input}
                block = {"type": "toolCall", "id": R.text(data.get("id")), "name": R.text(data.get("name")),
                         "arguments": args}
                if data.get("finished") is False:
                    block["finished"] = False
                blocks.append(block)
            elif kind == "binary" and str(data.get("mime_type") or "").startswith("image/"):
                blocks.append({"type": "image", "data": data.get("data"), "mimeType": data.get("mime_type"),
                               "path": data.get("path")})
            elif kind == "finish":
                finish = data
            elif kind in ("image_url", "binary"):
                blocks.append({"type": kind, **data})
            else:
                unknown = True
                blocks.append({"type": kind if isinstance(kind, str) else "unknown", **data})
        return blocks, finish, unknown

    def _results(self, m: dict, mid: str, parts: list, parent: str | None, seq: int,
                 ts: str | None) -> tuple[list[P.Entry], dict]:
        out: list[P.Entry] = []
        head = {k: v for k, v in m.items() if k != "parts" and v is not None}
        unknown = 0
        for index, part in enumerate(parts):
            if not isinstance(part, dict) or part.get("type") != "tool_result":
                if not (isinstance(part, dict) and part.get("type") == "finish"):
                    unknown += 1
                continue
            data = part.get("data") if isinstance(part.get("data"), dict) else {}
            call_id = R.text(data.get("tool_call_id"), 255)
            raw = {"message": head, "part_index": index, "part": part}
            raw_text = _dumps(raw)
            content = R.text(data.get("content")) or ""
            is_error = bool(data.get("is_error"))
            exit_code = duration = None
            meta = data.get("metadata")
            try:
                meta = orjson.loads(meta) if isinstance(meta, str) and meta.strip() else meta
            except orjson.JSONDecodeError:
                meta = None
            if call_id in self.shell_calls:
                found = EXIT_RE.findall(content[-512:])
                if found:
                    exit_code = _int(int(found[-1]))
                if isinstance(meta, dict):
                    start, end = _int(meta.get("start_time")), _int(meta.get("end_time"))
                    if start is not None and end is not None and end >= start:
                        duration = end - start
            block = {"type": "text", "text": content}
            eid = P.clamp_id(f"{m['id']}:{call_id or index}")
            row = R.message_row(eid, V.TOOL_RESULT, blocks=[block], native_role="tool", parent=parent, timestamp=ts,
                                seq=seq, raw_json=raw_text, tool_call_id=call_id,
                                tool_name=R.text(data.get("name")) or None, is_error=is_error, exit_code=exit_code,
                                duration_ms=duration)
            out.append(P.Entry(eid, parent, "message", seq, raw, raw_text.encode(), row=row, calls=[]))
            parent = eid
        if not out:
            raw = self._raw(m, parts)
            return [self._entry(mid, parent, seq, "crush_message", NO_RESULTS, raw, ts)], {"unknown": unknown}
        return out, {"unknown": unknown}

    @staticmethod
    def _entry(eid: str, parent: str | None, seq: int, etype: str, custom: str, raw: dict, ts: str | None) -> P.Entry:
        raw_text = _dumps(raw)
        row = {"entry_uuid": eid, "parent_uuid": parent, "entry_type": etype, "custom_type": custom,
               "text_preview": None, "timestamp": ts, "seq": seq, "raw_json": raw_text}
        return P.Entry(eid, parent, etype, seq, raw, raw_text.encode(), row=row)


# ---------------------------------------------------------------------------
# The kind


class CrushSource(Source):
    kind = KIND
    order = 45
    records_costs = False  # no per-call cost: the session's recorded cost is kept on the session
    shell_tools = SHELL_TOOLS
    tables = TABLES
    unique = {t: [k] for t, k in KEYS.items()}
    indexes = {CRUSH_SESSIONS: {"idx_crush_sessions_link": ("server", "agent_id", "session_id")}}
    snapshot_tables = (Table(CRUSH_SESSIONS, indexes=(("session_id",), ("agent_id",), ("server",))),)
    places = (GLOBAL_DIR,)

    # -- discovery -------------------------------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        if name not in DB_NAMES:
            return False
        ours = _ours(head)
        # A crush.db is Crush's; an opencode.db only when its schema says so (sst/opencode's is another kind's).
        return ours is True or (ours is None and name == "crush.db")

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope, out: Discovery):
        return self._container(fs, path, scope, out, (size, mtime_ns))

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        base = fs.basename(path)
        places = [fs.join(path, folder, name) for name, folder in DB_NAMES.items()]
        places += [fs.join(path, name) for name, folder in DB_NAMES.items() if base == folder]
        recognised = False
        try:
            projects = fs.stat(fs.join(path, PROJECTS)) if base == "crush" else None
        except OSError:
            projects = None
        if projects is not None and projects[0] == "file":
            recognised = True
            places += self._projects(fs, fs.join(path, PROJECTS), out)
        for db in places:
            try:
                found = fs.stat(db)
            except OSError as exc:
                out.errors.append(f"cannot stat {db}: {exc.strerror or exc}")
                continue
            if found is None or found[0] != "file":
                continue
            try:
                with fs.open(db, found[1]) as f:
                    head = f.read(65536)
            except OSError:
                head = SQLITE_MAGIC  # read again, and failed clearly, by the import
            if _ours(head) is False:
                continue
            self._container(fs, db, scope, out, (found[1], found[2]))
            recognised = True
        return recognised

    @staticmethod
    def _projects(fs: FileSystem, path: str, out: Discovery) -> list[str]:
        """The databases Crush's ``projects.json`` names (``{"projects": [{"path", "data_dir"}]}``)."""
        try:
            doc = orjson.loads(fs.read_bytes(path))
        except (OSError, orjson.JSONDecodeError) as exc:
            out.warnings.append(f"cannot read {path}: {getattr(exc, 'strerror', None) or 'not JSON'}")
            return []
        found = []
        for p in doc.get("projects") or [] if isinstance(doc, dict) else []:
            if not isinstance(p, dict) or not isinstance(p.get("path"), str):
                continue
            data = p.get("data_dir") if isinstance(p.get("data_dir"), str) else ".crush"
            folder = data if data.startswith("/") else fs.join(p["path"], data)
            found.append(fs.join(folder, "crush.db"))
        return found

    def _container(self, fs: FileSystem, path: str, scope: Scope, out: Discovery, listed: tuple[int, int]):
        return CrushDB.list_into(out, self, fs, path, scope, scope.agent or KIND, listed)

    # -- after the run, and stats ------------------------------------------------------

    def finish_group(self, store, server: str, agent_id: str, metadata: dict) -> None:
        """Link ``crush_sessions`` rows to their archived session, and keep each session's
        recorded figures on it: ``sessions.input_tokens`` / ``output_tokens`` / ``total_tokens``
        / ``cost_usd`` (the writer sums the messages, which carry no usage here)."""
        store.execute(
            f"UPDATE {CRUSH_SESSIONS} SET session_id = (SELECT s.id FROM sessions s WHERE s.server = "
            f"{CRUSH_SESSIONS}.server AND s.agent_id = {CRUSH_SESSIONS}.agent_id AND s.session_uuid = "
            f"{CRUSH_SESSIONS}.session_uuid AND s.source = ?) WHERE server = ? AND agent_id = ? AND session_id IS NULL",
            (KIND, server, agent_id))
        updates = []
        for sid, prompt, completion, cost, *had in store.tuples(
                f"SELECT s.id, c.prompt_tokens, c.completion_tokens, c.cost_usd, s.input_tokens, s.output_tokens, "
                f"s.total_tokens, s.cost_usd FROM {CRUSH_SESSIONS} c JOIN sessions s ON s.id = c.session_id "
                "WHERE c.server = ? AND c.agent_id = ?", (server, agent_id)):
            total = None if prompt is None and completion is None else (prompt or 0) + (completion or 0)
            want = (prompt, completion, total, cost)
            if tuple(had[:3]) != want[:3] or (had[3] is None) != (cost is None) or (
                    cost is not None and abs(float(had[3]) - float(cost)) > 1e-9):
                updates.append((*want, sid))
        if updates:
            store.executemany("UPDATE sessions SET input_tokens = ?, output_tokens = ?, total_tokens = ?, "
                              "cost_usd = ? WHERE id = ?", updates)
            store.touch(u[-1] for u in updates)

    def extra_stats(self, store) -> dict:
        """The usage the kind records per session (no per-call usage: its messages carry none)."""
        row = store.query(f"SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_usd) "
                          f"FROM {CRUSH_SESSIONS}")[0]
        return {"per_call_usage": "no per-call usage",
                "session_usage": {"sessions": int(row[0] or 0), "input": int(row[1] or 0), "output": int(row[2] or 0),
                                  "totalTokens": int(row[1] or 0) + int(row[2] or 0),
                                  "cost_recorded": round(float(row[3] or 0.0), 8)}}


SOURCE = CrushSource()

__all__ = ["SOURCE", "CrushSource", "CrushDB", "SessionUnit", "MessageParser", "READABLE_TABLES", "TABLES"]
