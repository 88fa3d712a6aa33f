"""Cursor: the agent's plain-text transcripts and the Cursor CLI's chat stores. See
docs/cursor.md for what is read and how it maps to the archive.

- **Agent transcripts**: ``~/.cursor/projects/<project>/agent-transcripts/<uuid>.txt``, one
  session per file: blocks that start with a ``user:`` or ``assistant:`` line; a prompt inside
  ``<user_query>``; in assistant blocks ``[Thinking]``, ``[Tool call] <name>`` with indented
  ``key: value`` arguments, ``[Tool result] <name>`` with its output. No times, ids, model or
  tokens: every row's time is the file's modification time when it was read (``time_approximate``).
  Read with ``reader.read_lines`` and :class:`TranscriptParser`: a grown file is read from the
  start of its last block (which may still be growing), so only what is new is parsed.
- **CLI chat stores**: ``~/.cursor/chats/<hash>/<agent id>/store.db`` (SQLite: ``meta``,
  ``blobs``), one session per file. ``meta`` key ``0`` is hex-encoded JSON (``agentId``,
  ``latestRootBlobId``, ``name``, ``createdAt``, ``lastUsedModel``, ``mode``); ``blobs`` is a
  content-addressed tree (id = SHA-256 of the data). The root blob is a protobuf node whose field 1
  lists the conversation's messages in order (JSON leaves in the AI SDK's form: ``system``,
  ``user``, ``assistant`` with ``reasoning`` / ``text`` / ``tool-call`` parts, ``tool`` with
  ``tool-result`` parts), field 2 the UI's turns (a second copy of the same conversation: not
  imported), field 4 the assistant message in progress (inline JSON: imported after the others).
  A message's entry id is its position and its blob's id: an unchanged message is not fetched again.
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
from ..parser import ChunkResult, Entry, ParseState
from ..units import Batch, Checkpoint, Outcome, SessionInfo, SourceError, Unit
from . import readonly
from .base import Discovery, Scope, Source
from .fs import FileSystem
from .reader import read_lines

KIND = "cursor"
SQLITE_MAGIC = b"SQLite format 3\x00"
STORE_DB = "store.db"
TRANSCRIPTS = "agent-transcripts"
STORE_TABLES = frozenset({"meta", "blobs"})
# Cursor's shell tool (the agent's ``Shell``; ``run_terminal_cmd`` in older releases and the CLI).
SHELL_TOOLS = frozenset({"Shell", "run_terminal_cmd"})
HEADERS = {b"user:": V.USER, b"assistant:": V.ASSISTANT}
MARKER_RE = re.compile(r"^\[(Thinking|Tool call|Tool result)\](?: (.*))?$")
ARG_RE = re.compile(r"^  ([A-Za-z_][A-Za-z0-9_.\-]*): ?(.*)$")
QUERY_RE = re.compile(r"<user_query>\n?(.*?)\n?</user_query>", re.S)
BATCH = 500
MAX_DEPTH = 64  # nested nodes followed from the root (a cycle cannot be built by hashes; a bound anyway)


def _dumps(value: Any) -> str:
    return R.dumps(value)


def _mtime_time(mtime_ns: int) -> str | None:
    """A file's modification time as a row's approximate time, in whole seconds (what every
    filesystem, SFTP too, reports alike)."""
    return P.format_timestamp(mtime_ns // 1_000_000_000 * 1000) if mtime_ns > 0 else None


def _trim(lines: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    while lines and not lines[0].strip():
        lines = lines[1:]
    return "\n".join(lines)


def _pair(results: list[dict], calls: list[dict]) -> None:
    """Each result names its tool only: it answers the first call of that name (in order) not
    answered yet, else the first call not answered."""
    free = list(calls)
    for result in results:
        match = next((c for c in free if c["name"] == result["name"]), None) or (free[0] if free else None)
        if match is not None:
            free.remove(match)
            result["call"] = match["id"]


# ---------------------------------------------------------------------------
# Agent transcripts (.txt)


class TranscriptParser:
    """The ``feed`` protocol of ``reader.read_lines`` over a ``.txt`` transcript: each block (from
    its ``user:`` / ``assistant:`` line to the next one) gives its rows. The last block is never
    consumed (it may still be growing): it is read again, whole, with what comes after it."""

    known_types = frozenset({"message"})

    def __init__(self, file_name: str, state: ParseState | None = None, mtime_ns: int = 0, project: str | None = None):
        self.state = state or ParseState()
        if self.state.session_id is None:
            self.state.session_id = P.clamp_id(file_name[:-4] if file_name.endswith(".txt") else file_name)
        self.timestamp = _mtime_time(mtime_ns)
        self.project = project

    def sessions(self) -> dict:
        values = {"times_approximate": 1}
        if self.project:
            values["project"] = R.text(self.project, 255)
        return {self.state.session_id: SessionInfo(values)}

    def feed(self, data: bytes, final: bool = False) -> ChunkResult:
        result = ChunkResult()
        starts = []  # offsets of the block headers in data
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            line = data[pos:nl if nl >= 0 else len(data)].rstrip(b"\r")
            if line in HEADERS and (nl >= 0 or final):
                starts.append(pos)
            if nl < 0:
                break
            pos = nl + 1
        if not starts:
            if final and data.strip() and self.state.next_line == 0:
                result.bad_lines += 1  # no block at all: not a transcript
            return result
        if starts[0] > 0 and self.state.next_line == 0 and data[:starts[0]].strip():
            result.bad_lines += 1  # text before the first block
        for i, start in enumerate(starts[:-1]):
            self._block(data[start:starts[i + 1]], result)
        result.consumed = starts[-1]
        if final:
            saved = (self.state.next_line, self.state.last_entry_id)
            self._block(data[starts[-1]:], result)
            self.state.next_line, self.state.last_entry_id = saved
        return result

    def _block(self, raw: bytes, result: ChunkResult) -> None:
        index = self.state.next_line
        self.state.next_line += 1
        text = raw.decode("utf-8", "replace")
        lines = text.split("\n")
        role = HEADERS[lines[0].rstrip("\r").encode()]
        body = [ln.rstrip("\r") for ln in lines[1:]]
        if role == V.USER:
            entries = self._user(index, body, text)
        else:
            entries = self._assistant(index, body, text)
        for entry in entries:
            entry.parent_id = self.state.last_entry_id
            entry.row["parent_message_uuid"] = entry.parent_id
            self.state.last_entry_id = entry.entry_id
            result.entries.append(entry)

    def _row(self, eid: str, role: str, native: str, blocks: list, seq: int, raw: dict, **fields) -> Entry:
        raw_text = _dumps(raw)
        row = R.message_row(eid, role, blocks=blocks, native_role=native, timestamp=self.timestamp, seq=seq,
                            raw_json=raw_text, time_approximate=1, **fields)
        calls = R.tool_call_rows(blocks, self.timestamp, SHELL_TOOLS, role=role)
        return Entry(eid, None, "message", seq, raw, raw_text.encode(), row=row, calls=calls)

    def _user(self, index: int, body: list[str], text: str) -> list[Entry]:
        whole = _trim(body)
        queries = QUERY_RE.findall(whole)
        raw = {"block": index, "text": text}
        if queries:
            typed = "\n\n".join(q.strip("\n") for q in queries)
            return [self._row(f"b{index}", V.USER, "user", [{"type": "text", "text": typed}], index, raw)]
        # No <user_query>: what Cursor put there itself (attached context) when it is tags only, else typed text.
        role = V.SYSTEM if whole.startswith("<") else V.USER
        return [self._row(f"b{index}", role, "user", [{"type": "text", "text": whole}], index, raw)]

    def _assistant(self, index: int, body: list[str], text: str) -> list[Entry]:
        segments: list[dict] = []  # {"kind": text|thinking|call|result, "name", "lines", "args"}
        current = {"kind": "text", "lines": []}
        segments.append(current)
        for line in body:
            m = MARKER_RE.match(line)
            if m:
                marker, rest = m.group(1), m.group(2)
                if marker == "Thinking":
                    current = {"kind": "thinking", "lines": [rest] if rest else []}
                elif marker == "Tool call":
                    current = {"kind": "call", "name": (rest or "").strip(), "lines": [], "args": {}, "last": None}
                else:
                    current = {"kind": "result", "name": (rest or "").strip(), "lines": []}
                segments.append(current)
                continue
            if current["kind"] == "thinking" and not line.strip() and current["lines"]:
                current = {"kind": "text", "lines": []}  # a blank line ends the thinking
                segments.append(current)
                continue
            if current["kind"] == "call":
                a = ARG_RE.match(line)
                if a:
                    current["args"][a.group(1)] = a.group(2)
                    current["last"] = a.group(1)
                elif current["last"] is not None:
                    current["args"][current["last"]] += "\n" + line
                elif line.strip():
                    current["lines"].append(line)
                continue
            current["lines"].append(line)
        blocks: list = []
        calls: list[dict] = []
        results: list[dict] = []
        for seg in segments:
            kind = seg["kind"]
            if kind == "text":
                value = _trim(seg["lines"])
                if value:
                    blocks.append({"type": "text", "text": value})
            elif kind == "thinking":
                blocks.append({"type": "thinking", "thinking": _trim(seg["lines"])})
            elif kind == "call":
                args = {k: v.rstrip("\n") for k, v in seg["args"].items()}
                if seg["lines"]:
                    args["_text"] = _trim(seg["lines"])
                call = {"type": "toolCall", "id": f"b{index}.c{len(calls)}", "name": seg["name"], "arguments": args}
                blocks.append(call)
                calls.append(call)
            else:
                results.append({"name": seg["name"], "text": _trim(seg["lines"]), "call": None})
        _pair(results, calls)
        out = [self._row(f"b{index}", V.ASSISTANT, "assistant", blocks, index, {"block": index, "text": text})]
        for k, res in enumerate(results):
            content = [{"type": "text", "text": res["text"]}] if res["text"] else []
            out.append(self._row(f"b{index}.r{k}", V.TOOL_RESULT, "tool_result", content, index,
                                 {"block": index, "result": k, "name": res["name"], "text": res["text"]},
                                 tool_call_id=res["call"], tool_name=R.text(res["name"], 128) or None))
        return out


class TranscriptUnit(Unit):
    """One ``agent-transcripts/<uuid>.txt``."""

    def __init__(self, *args, project: str | None = None, **kw):
        super().__init__(*args, **kw)
        self.project = project

    def read(self, checkpoint: Checkpoint | None):
        mtime, project = self.mtime_ns, self.project

        def make(name: str, state: ParseState) -> TranscriptParser:
            return TranscriptParser(name, state, mtime_ns=mtime, project=project)

        return (yield from read_lines(self, checkpoint, parser_cls=make))


# ---------------------------------------------------------------------------
# CLI chat stores (store.db)


def _varint(b: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError("truncated varint")
        x = b[i]
        i += 1
        result |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return result, i


def proto_fields(b: bytes) -> list[tuple[int, int, Any]]:
    """A protobuf message's fields, in order: (field number, wire type, value); bytes for
    length-delimited values. Raises ValueError when ``b`` is not one."""
    i = 0
    out = []
    while i < len(b):
        tag, i = _varint(b, i)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ValueError("field 0")
        if wire == 0:
            value, i = _varint(b, i)
        elif wire == 2:
            length, i = _varint(b, i)
            if i + length > len(b):
                raise ValueError("truncated field")
            value = b[i:i + length]
            i += length
        elif wire == 1:
            value, i = b[i:i + 8], i + 8
        elif wire == 5:
            value, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(b):
            raise ValueError("truncated field")
        out.append((number, wire, value))
    return out


def read_meta(conn: sqlite3.Connection) -> dict:
    """``meta`` key ``0``: hex-encoded JSON (plain JSON accepted too)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = '0'").fetchone()
    except sqlite3.Error as exc:
        raise SourceError(f"not a {KIND} chat store: {exc}") from None
    if row is None:
        raise SourceError(f"not a {KIND} chat store: no meta entry 0")
    value = row[0]
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    try:
        data = bytes.fromhex(text.strip())
    except ValueError:
        data = text.encode()
    try:
        meta = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise SourceError(f"not a {KIND} chat store: meta entry 0 is not hex-encoded JSON") from None
    if not isinstance(meta, dict):
        raise SourceError(f"not a {KIND} chat store: meta entry 0 is not an object")
    return meta


class StoreUnit(Unit):
    """One ``chats/<hash>/<agent id>/store.db``: one session."""

    def _blob(self, conn: sqlite3.Connection, blob_id: str) -> bytes | None:
        try:
            row = conn.execute("SELECT data FROM blobs WHERE id = ?", (blob_id,)).fetchone()
        except sqlite3.Error as exc:
            raise SourceError(f"cannot read blob {blob_id[:16]}: {exc}") from None
        if row is None or row[0] is None:
            return None
        data = row[0]
        return bytes(data) if not isinstance(data, str) else data.encode("utf-8")

    def read(self, checkpoint: Checkpoint | None):
        with readonly.connect_copy(self.fs, self.path, STORE_TABLES, STORE_TABLES) as conn:
            return (yield from self._read(conn, checkpoint))

    def _messages(self, conn, root_id: str, warnings: list[str]) -> tuple[list[tuple[str, bytes | None]], Any]:
        """The root's messages in order: (blob id, its bytes or None when not fetched yet), and
        the inline message in progress (field 4) if any."""
        root = self._blob(conn, root_id)
        if root is None:
            raise SourceError(f"the root blob {root_id[:16]} is missing")
        try:
            fields = proto_fields(root)
        except ValueError:
            raise SourceError(f"the root blob {root_id[:16]} is not a tree node") from None
        ids: list[str] = []
        pending = None
        others = set()
        for number, wire, value in fields:
            if number == 1 and wire == 2 and len(value) == 32:
                ids.append(value.hex())
            elif number == 4 and wire == 2:
                pending = value
            elif number != 2:
                others.add(number)
        if others:
            warnings.append(f"{self.key}: root fields the {KIND} kind does not know ({sorted(others)}), not read")
        return ids, pending

    def _read(self, conn: sqlite3.Connection, checkpoint: Checkpoint | None):
        meta = read_meta(conn)
        root_id = meta.get("latestRootBlobId")
        sid = P.clamp_id(R.text(meta.get("agentId")) or self.fs.basename(self.fs.dirname(self.path)))
        warnings: list[str] = []
        ids, pending = self._messages(conn, root_id, warnings) if isinstance(root_id, str) and root_id else ([], None)
        old_ids: list = []
        old_last: list = []
        if checkpoint is not None and checkpoint.resumable and checkpoint.session_uuid == sid:
            old_ids = checkpoint.state.get("ids") or []
            old_last = checkpoint.state.get("last") or []
        timestamp = _mtime_time(self.mtime_ns)
        mapper = StoreMessages(timestamp)
        entries: list[Entry] = []
        last_ids: list[str] = []
        parent = None
        events = bytes_read = unknown = 0
        total = len(ids) + (1 if pending is not None else 0)
        for i, blob_id in enumerate(ids):
            same = i < len(old_ids) and old_ids[i] == blob_id and i < len(old_last)
            tail = i == total - 1
            if same and not tail:
                parent = old_last[i]
                last_ids.append(parent)
                continue
            data = self._blob(conn, blob_id)
            if not same:
                events += 1
                bytes_read += len(data or b"")
            made, odd = mapper.entries(i, blob_id, data, parent)
            unknown += odd
            entries.extend(made)
            parent = made[-1].entry_id
            last_ids.append(parent)
        if pending is not None:
            blob_id = hashlib.sha256(pending).hexdigest()
            made, odd = mapper.entries(len(ids), blob_id, pending, parent, in_progress=True)
            events += 1
            bytes_read += len(pending)
            unknown += odd
            entries.extend(made)
        for start in range(0, len(entries), BATCH):
            yield Batch(sid, entries[start:start + BATCH])
        if unknown:
            warnings.append(f"{self.key}: {unknown} record(s) the {KIND} kind does not know, kept as entries")
        title = P.cut_str(meta.get("name"), 512)
        values = {"started_at": P.format_timestamp(meta.get("createdAt")) if R.integer(meta.get("createdAt")) else None,
                  "title": title if title and title.strip() else None, "times_approximate": 1,
                  "model": R.text(meta.get("lastUsedModel"), 128)}
        info = SessionInfo(values, _dumps({k: v for k, v in meta.items() if k != "latestRootBlobId"}))
        new = Checkpoint(status="success", token=self.token, offset=len(ids), lines=total, session_uuid=sid,
                         entries_read=total, state={"ids": ids, "last": last_ids},
                         last_entry_id=entries[-1].entry_id if entries else None)
        return Outcome(new, sessions={sid: info}, bytes_read=bytes_read, events_read=events, warnings=warnings,
                       saw_entries=bool(entries) or bool(ids))


class StoreMessages:
    """A message blob (the AI SDK's ``{role, content}``) -> its entries."""

    def __init__(self, timestamp: str | None):
        self.timestamp = timestamp

    def entries(self, index: int, blob_id: str, data: bytes | None, parent: str | None,
                in_progress: bool = False) -> tuple[list[Entry], int]:
        eid = P.clamp_id(f"{index}:{blob_id[:16]}")
        ts = self.timestamp
        obj = None
        if data is not None:
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError:
                obj = None
        if not isinstance(obj, dict) or not isinstance(obj.get("role"), str):
            what = "missing" if data is None else ("text" if obj is None else "json")
            raw = {"index": index, "blob": blob_id, "kind": what,
                   "data": data.decode("utf-8", "replace") if data is not None and obj is None else obj}
            return [self._entry(eid, parent, index, "cursor_blob", V.UNKNOWN, raw)], 1
        role = obj["role"]
        raw = {"index": index, "blob": blob_id, "message": obj}
        if in_progress:
            raw["in_progress"] = True
        content = obj.get("content")
        if role == "tool":
            return self._results(index, blob_id, obj, parent, raw), 0
        vocab = {"system": V.SYSTEM, "user": V.USER, "assistant": V.ASSISTANT}.get(role)
        if vocab is None:
            # its role stays in entry_type (doctor lists it): message.<role>
            return [self._entry(eid, parent, index, f"message.{role[:56]}", V.UNKNOWN, raw)], 1
        blocks, odd = self._blocks(content)
        raw_text = _dumps(raw)
        row = R.message_row(eid, vocab, blocks=blocks, native_role=role, parent=parent, timestamp=ts, seq=index,
                            raw_json=raw_text, time_approximate=1)
        calls = R.tool_call_rows(blocks, ts, SHELL_TOOLS, role=vocab)
        return [Entry(eid, parent, "message", index, raw, raw_text.encode(), row=row, calls=calls)], odd

    @staticmethod
    def _blocks(content: Any) -> tuple[list, int]:
        if isinstance(content, str):
            return [{"type": "text", "text": content}], 0
        blocks: list = []
        odd = 0
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                blocks.append({"type": "text", "text": R.text(part.get("text")) or ""})
            elif kind == "reasoning":
                blocks.append(P.thinking_block(part.get("text"), part.get("signature")))
            elif kind == "tool-call":
                args = part.get("args", part.get("input"))
                blocks.append({"type": "toolCall", "id": R.text(part.get("toolCallId")),
                               "name": R.text(part.get("toolName")),
                               "arguments": args if isinstance(args, dict) else {"input": args}})
            elif kind == "image" and isinstance(part.get("image"), str):
                blocks.append({"type": "image", "data": part["image"], "mimeType": part.get("mimeType")})
            else:
                odd += 1
                blocks.append(dict(part))
        return blocks, odd

    def _results(self, index: int, blob_id: str, obj: dict, parent: str | None, raw: dict) -> list[Entry]:
        out: list[Entry] = []
        parts = obj.get("content") if isinstance(obj.get("content"), list) else []
        for k, part in enumerate(parts):
            if not isinstance(part, dict) or part.get("type") != "tool-result":
                continue
            eid = P.clamp_id(f"{index}:{blob_id[:16]}:{k}")
            result = part.get("result")
            if isinstance(result, str):
                blocks = [{"type": "text", "text": result}]
            else:
                blocks, _odd = self._blocks(part.get("experimental_content"))
                if not blocks and result is not None:
                    blocks = [{"type": "text", "text": _dumps(result)}]
            one = {**raw, "part": k}
            raw_text = _dumps({"index": index, "blob": blob_id, "part": k, "message": {
                "role": obj.get("role"), "id": obj.get("id"), "content": [part]}})
            row = R.message_row(eid, V.TOOL_RESULT, blocks=blocks, native_role="tool", parent=parent,
                                timestamp=self.timestamp, seq=index, raw_json=raw_text, time_approximate=1,
                                tool_call_id=R.text(part.get("toolCallId"), 255),
                                tool_name=R.text(part.get("toolName"), 128), is_error=bool(part.get("isError")))
            out.append(Entry(eid, parent, "message", index, one, raw_text.encode(), row=row, calls=[]))
            parent = eid
        if not out:
            eid = P.clamp_id(f"{index}:{blob_id[:16]}")
            out.append(self._entry(eid, parent, index, "cursor_message", "no_results", raw))
        return out

    def _entry(self, eid: str, parent: str | None, index: int, etype: str, custom: str, raw: dict) -> Entry:
        raw_text = _dumps(raw)
        row = {"entry_uuid": eid, "parent_uuid": parent, "entry_type": etype, "custom_type": custom,
               "text_preview": None, "timestamp": self.timestamp, "seq": index, "raw_json": raw_text}
        return Entry(eid, parent, etype, index, raw, raw_text.encode(), row=row)


# ---------------------------------------------------------------------------
# The kind


def _looks_like_transcript(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    return first in HEADERS


def _looks_like_store(head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC) and b"CREATE TABLE blobs" in head and b"CREATE TABLE meta" in head


class CursorSource(Source):
    kind = KIND
    order = 46
    shell_tools = SHELL_TOOLS
    places = ("~/.cursor",)

    def claims_file(self, name: str, head: bytes) -> bool:
        if name.endswith(".txt"):
            return _looks_like_transcript(head)
        return name == STORE_DB and _looks_like_store(head)

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope, out: Discovery):
        if fs.basename(path) == STORE_DB:
            return self._store(fs, path, scope, out, (size, mtime_ns))
        folder = fs.dirname(path)
        project = fs.basename(fs.dirname(folder)) if fs.basename(folder) == TRANSCRIPTS else None
        return TranscriptUnit(self, scope.server, scope.agent or KIND, path, fs.basename(path), size, mtime_ns,
                              fs=fs, project=project)

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        base = fs.basename(path)
        home = path if base == ".cursor" else fs.join(path, ".cursor")
        found = False
        if fs.is_dir(home):
            for project in fs.subdirs(fs.join(home, "projects")) if fs.is_dir(fs.join(home, "projects")) else []:
                found |= self._transcripts(fs, project.path, scope, out)
            if fs.is_dir(fs.join(home, "chats")):
                found |= self._chats(fs, fs.join(home, "chats"), scope, out)
            return found or fs.is_dir(fs.join(home, "projects")) or fs.is_dir(fs.join(home, "chats"))
        if base == "projects" and fs.basename(fs.dirname(path)) == ".cursor":
            for project in fs.subdirs(path):
                found |= self._transcripts(fs, project.path, scope, out)
            return True
        if base == TRANSCRIPTS:
            return self._transcripts(fs, fs.dirname(path), scope, out)
        if fs.is_dir(fs.join(path, TRANSCRIPTS)):
            return self._transcripts(fs, path, scope, out)
        if base == "chats" and fs.basename(fs.dirname(path)) == ".cursor":
            self._chats(fs, path, scope, out)
            return True
        db = fs.join(path, STORE_DB)
        st = fs.stat(db)
        if st is not None and st[0] == "file" and fs.basename(fs.dirname(fs.dirname(path))) == "chats":
            self._store(fs, db, scope, out, (st[1], st[2]))  # one chat's folder, chats/<hash>/<agent id>
            return True
        return False

    def _transcripts(self, fs: FileSystem, project: str, scope: Scope, out: Discovery) -> bool:
        folder = fs.join(project, TRANSCRIPTS)
        listed = fs.listdir(folder)
        if listed is None:
            return False
        agent = scope.agent or KIND
        if not scope.wants(agent):
            return True
        name = fs.basename(project)
        newer = 0
        for item in listed:
            if item.is_file and item.name.endswith(".txt"):
                out.add(TranscriptUnit(self, scope.server, agent, item.path, item.name, item.size, item.mtime_ns,
                                       fs=fs, project=name))
            elif item.is_dir or item.name.endswith(".jsonl"):
                newer += 1
        if newer:
            out.warnings.append(f"{folder}: {newer} transcript(s) in the newer <uuid>/<uuid>.jsonl form, "
                                f"which the {KIND} kind does not read yet")
        return True

    def _chats(self, fs: FileSystem, chats: str, scope: Scope, out: Discovery) -> bool:
        found = False
        for workspace in fs.subdirs(chats):
            for agent_dir in fs.subdirs(workspace.path):
                db = fs.join(agent_dir.path, STORE_DB)
                st = fs.stat(db)
                if st is not None and st[0] == "file":
                    self._store(fs, db, scope, out, (st[1], st[2]))
                    found = True
        return found

    def _store(self, fs: FileSystem, path: str, scope: Scope, out: Discovery, listed: tuple[int, int]):
        agent = scope.agent or KIND
        if not scope.wants(agent) or out.has(scope.server, path):
            return None
        token = readonly.with_wal(fs, path, listed, out)
        if token is None:
            return None
        size, mtime = token
        unit = StoreUnit(self, scope.server, agent, path, STORE_DB, size, mtime, fs=fs, session_type="normal")
        out.add(unit)
        return unit

    def session_type(self, name: str) -> str:
        return "normal"


SOURCE = CursorSource()

__all__ = ["SOURCE", "CursorSource", "TranscriptParser", "TranscriptUnit", "StoreUnit", "proto_fields", "read_meta"]
