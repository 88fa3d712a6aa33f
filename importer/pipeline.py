"""The import pipeline: sources -> reader -> parser -> rows -> store.

One transaction per file, including its ``parsed_files`` row, so that killing
the importer at any moment leaves the store as it was before that file.

Identity (DESIGN.md): a session is (server, agent, header id); an entry is
(session, entry id). A file is only a container: the live file, its
``.reset``/``.deleted`` rename, checkpoint and backup copies all map to the
same session and entries, so nothing is counted twice; the archive only grows.
"""

from __future__ import annotations

import gc
import io
import itertools
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import orjson

from . import openclaw_db
from . import parser as P
from .sources import Discovery, SourceFile, SourceLost, discover
from .store import RowRejected, Store, now_utc

log = logging.getLogger("agentbase")

CHUNK = 4 * 1024 * 1024  # bytes read at a time; memory stays bounded by this plus the longest line
WINDOW = 1024  # bytes hashed at the head and before the last offset to tell an append from a rewrite
KNOWN_TYPES = {
    "session", "message", "model_change", "thinking_level_change", "compaction", "branch_summary",
    "custom", "custom_message", "label", "session_info", "reset",
}


@dataclass
class ImportReport:
    files_seen: int = 0
    files_unchanged: int = 0
    files_imported: int = 0
    files_failed: int = 0
    files_ignored: int = 0
    messages_added: int = 0
    entries_added: int = 0
    bad_lines: int = 0
    pending_lines: int = 0
    bytes_read: int = 0
    events_read: int = 0  # rows and records read from OpenClaw SQLite stores
    elapsed_s: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "files_seen": self.files_seen,
            "files_unchanged": self.files_unchanged,
            "files_imported": self.files_imported,
            "files_failed": self.files_failed,
            "files_ignored": self.files_ignored,
            "messages_added": self.messages_added,
            "entries_added": self.entries_added,
            "bad_lines": self.bad_lines,
            "pending_lines": self.pending_lines,
            "bytes_read": self.bytes_read,
            "events_read": self.events_read,
            "elapsed_s": round(self.elapsed_s, 4),
        }

    def add(self, other: "ImportReport") -> None:
        """Add a committed file's figures (not its file counters)."""
        for name in ("messages_added", "entries_added", "bad_lines", "pending_lines", "bytes_read", "events_read"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def summary(self) -> str:
        return (
            f"files: {self.files_seen} seen, {self.files_unchanged} unchanged, "
            f"{self.files_imported} imported, {self.files_failed} failed, {self.files_ignored} not transcripts; "
            f"messages added: {self.messages_added}; bad lines: {self.bad_lines}; "
            f"pending lines: {self.pending_lines}"
        )


class NotATranscript(Exception):
    pass


def _rank(source: SourceFile) -> str:
    """Which file decides a session's derived fields: live files and renames
    over checkpoint/backup copies, then the newest."""
    return f"{0 if P.is_copy(source.name) else 1}:{source.mtime_ns:020d}:{source.name}"


class SessionWriter:
    """Accumulates one file's entries for one session and writes them."""

    def __init__(self, store: Store, source: SourceFile, session_uuid: str):
        self.store = store
        self.source = source
        self.session_uuid = session_uuid
        row = store.session(source.server, source.agent_id, session_uuid)
        if row is None:
            self.session_id = store.next_id("sessions")
            store.insert_rows(
                "sessions",
                [{
                    "id": self.session_id, "server": source.server, "agent_id": source.agent_id,
                    "session_uuid": session_uuid, "file_path": source.path,
                    "session_type": P.session_type_for(source.name), "message_count": 0,
                    "created_at": now_utc(), "source_rank": "",
                }],
            )
            self.session = None
            self.known: dict[str, list] = {}
            self.counted: set[str] = set()
        else:
            self.session_id = row["id"]
            self.session = row
            self.known = {
                eid: [parent, active, h, table] for eid, parent, active, h, table in store.session_entries(row["id"])
            }
            self.counted = store.counted_call_keys(row["id"])
        self.rank = _rank(source)
        self.wins = self.session is None or self.rank >= (self.session["source_rank"] or "")
        self.next_message_id = store.next_id("messages")
        self.messages: list[dict] = []
        self.tool_calls: list[dict] = []
        self.entries: list[dict] = []
        self.added_messages = 0
        self.added_entries = 0
        self.changed = False
        self.next_call_id = store.next_id("tool_calls")
        self.open_calls: dict[str, dict] = {}  # this file's calls still waiting for a result
        self.flushed_calls: dict[str, int] = {}  # ... already written: call_id -> row id
        self.late_results: dict[str, tuple] = {}  # results whose call is not in memory
        self.last_entry_id: str | None = None
        self.created_at = now_utc()

    def add(self, entry: P.Entry) -> None:
        self.last_entry_id = entry.entry_id
        digest = entry.raw_hash
        known = self.known.get(entry.entry_id)
        if known is not None:
            if known[2] == digest:
                return
            if not self.wins:
                # An older or lesser copy (backup, checkpoint) disagrees with the
                # archive: keep its version aside, the archive's stays.
                self._keep_revision(entry.entry_id, entry.raw.decode("utf-8", "replace"), None)
                return
            self._replace(entry.entry_id, known[3])
        common = {
            "session_id": self.session_id, "server": self.source.server,
            "agent_id": self.source.agent_id, "session_uuid": self.session_uuid,
        }
        entry.derive()
        if entry.type == "message":
            row = entry.row
            row.update(common)
            row["id"] = self.next_message_id
            self.next_message_id += 1
            row["created_at"] = self.created_at
            row["is_active_path"] = 1
            row["raw_hash"] = digest
            key = row["call_key"]
            if key is not None and key in self.counted:
                row["usage_counted"] = 0
            else:
                row["usage_counted"] = 1
                if key is not None:
                    self.counted.add(key)
            self.messages.append(row)
            for call in entry.calls:
                call.update(common)
                call.update({
                    "id": self.next_call_id, "message_id": row["id"], "message_uuid": entry.entry_id,
                    "is_active_path": 1, "created_at": self.created_at,
                    "result_message_id": None, "result_preview": None, "is_error": 0,
                    "exit_code": None, "duration_ms": None,
                })
                self.next_call_id += 1
                self.tool_calls.append(call)
                if call["call_id"] is not None:
                    self.open_calls[call["call_id"]] = call
            if row["role"] == "toolResult" and row["tool_call_id"] is not None:
                self._result(row, entry.obj.get("message"))
            self.added_messages += 1
            table = "messages"
        else:
            row = entry.row
            row.update(common)
            row["created_at"] = self.created_at
            row["is_active_path"] = 1
            row["raw_hash"] = digest
            self.entries.append(row)
            self.added_entries += 1
            table = "entries"
        self.known[entry.entry_id] = [entry.parent_id, 1, digest, table]
        self.changed = True
        if len(self.messages) + len(self.entries) >= 500:
            self.flush()

    def _replace(self, entry_id: str, table: str) -> None:
        """An entry came back with different JSON: the newest file's version
        goes into the main tables, the previous one into entry_revisions."""
        self.flush()
        store = self.store
        if table == "messages":
            old = store.query(
                "SELECT id, raw_json, content_blocks, call_key, usage_counted FROM messages "
                "WHERE session_id = ? AND message_uuid = ?",
                (self.session_id, entry_id),
            )[0]
            store.execute("DELETE FROM tool_calls WHERE message_id = ?", (old["id"],))
            store.execute("DELETE FROM messages WHERE id = ?", (old["id"],))
            if old["usage_counted"] and old["call_key"]:
                self.counted.discard(old["call_key"])
            raw, content = old["raw_json"], old["content_blocks"]
            self.added_messages -= 1
        else:
            old = store.query(
                "SELECT id, raw_json FROM entries WHERE session_id = ? AND entry_uuid = ?",
                (self.session_id, entry_id),
            )[0]
            store.execute("DELETE FROM entries WHERE id = ?", (old["id"],))
            raw, content = old["raw_json"], None
            self.added_entries -= 1
        self._keep_revision(entry_id, raw, content)

    def _keep_revision(self, entry_id: str, raw: str, content: str | None) -> None:
        """Record a version of an entry that is not (or no longer) the archive's."""
        self.flush()
        if self.store.query(
            "SELECT 1 FROM entry_revisions WHERE session_id = ? AND entry_uuid = ? AND raw_json = ?",
            (self.session_id, entry_id, raw),
        ):
            return
        self.store.insert_rows(
            "entry_revisions",
            [{
                "session_id": self.session_id, "entry_uuid": entry_id, "raw_json": raw,
                "content_blocks": content, "replaced_at": now_utc(), "replaced_by_file": self.source.path,
            }],
        )

    def _result(self, row: dict, message) -> None:
        """Pair a tool result with its call: in memory when the call is in this
        file (the usual case), else by an UPDATE when the file is finished."""
        failed, exit_code, duration = P.result_failed(message if isinstance(message, dict) else {})
        values = {"result_message_id": row["id"], "result_preview": row["text_preview"],
                  "is_error": int(failed), "exit_code": exit_code, "duration_ms": duration}
        call_id = row["tool_call_id"]
        call = self.open_calls.get(call_id)
        if call is not None:
            call.update(values)
            if not row["is_synthetic"]:
                del self.open_calls[call_id]
            return
        if call_id in self.late_results and row["is_synthetic"]:
            return  # a real result already arrived; the synthetic stand-in does not replace it
        values["synthetic"] = row["is_synthetic"]
        self.late_results[call_id] = values

    def flush(self) -> None:
        self.store.insert_rows("messages", self.messages)
        self.store.insert_rows("tool_calls", self.tool_calls)
        self.store.insert_rows("entries", self.entries)
        if self.open_calls:
            # Calls written before their result arrived: paired by UPDATE later.
            for call_id, call in self.open_calls.items():
                self.flushed_calls[call_id] = call["id"]
            self.open_calls = {}
        self.messages, self.tool_calls, self.entries = [], [], []

    def finish(self, state: P.ParseState) -> None:
        """Derived fields: the session's newest file, active path, tool-result
        pairing and totals."""
        self.flush()
        store = self.store
        rank = self.rank
        session = self.session
        wins = self.wins
        values: dict = {}
        leaf = session["leaf_entry_id"] if session is not None else None
        if wins:
            values.update({
                "source_rank": rank, "file_path": self.source.path,
                "session_type": P.session_type_for(self.source.name),
            })
            if self.last_entry_id is not None:
                leaf = self.last_entry_id
                values["leaf_entry_id"] = leaf
        header = state.header
        old_header = session["header_json"] if session is not None else None
        if header is not None and old_header is not None:
            new_header = state.header_raw.decode("utf-8", "replace")
            if new_header != old_header:
                # Keep the header that loses as a revision: every line stays rebuildable.
                self._keep_revision("@header", old_header if wins else new_header, None)
        if header is not None and (wins or session is None or session["header_json"] is None):
            values.update({
                "cwd": P._str(header.get("cwd"), 512),
                "started_at": P.format_timestamp(header.get("timestamp")),
                "version": P._int(header.get("version")) or 1,
                "parent_session": P._str(header.get("parentSession") or header.get("branchedFrom"), 512),
                "header_json": state.header_raw.decode("utf-8", "replace"),
            })
        if self.changed or (session is not None and leaf != session["leaf_entry_id"]):
            self._mark_active_path(leaf)
        self._pair_remaining()
        if self.changed or session is None:
            agg = store.query(
                "SELECT COUNT(*), MIN(timestamp), MAX(timestamp), "
                "SUM(input_tokens * usage_counted), SUM(output_tokens * usage_counted), "
                "SUM(cache_read_tokens * usage_counted), SUM(cache_write_tokens * usage_counted), "
                "SUM(total_tokens * usage_counted), SUM(cost_usd * usage_counted) "
                "FROM messages WHERE session_id = ?",
                (self.session_id,),
            )[0]
            values.update({
                "message_count": agg[0], "first_message_at": agg[1], "last_message_at": agg[2],
                "input_tokens": agg[3], "output_tokens": agg[4], "cache_read_tokens": agg[5],
                "cache_write_tokens": agg[6], "total_tokens": agg[7], "cost_usd": agg[8],
            })
        if values:
            values["updated_at"] = now_utc()
            store.update("sessions", self.session_id, values)

    def _mark_active_path(self, leaf: str | None) -> None:
        parents = {eid: info[0] for eid, info in self.known.items()}
        path = P.active_path(leaf, parents)
        changes: dict[str, list] = {"messages": [], "entries": []}
        for eid, info in self.known.items():
            want = 1 if eid in path else 0
            if info[1] != want:
                info[1] = want
                changes[info[3]].append((want, eid))
        store = self.store
        if changes["messages"]:
            store.executemany(
                "UPDATE messages SET is_active_path = ? WHERE session_id = ? AND message_uuid = ?",
                [(w, self.session_id, e) for w, e in changes["messages"]],
            )
            store.executemany(
                "UPDATE tool_calls SET is_active_path = ? WHERE session_id = ? AND message_uuid = ?",
                [(w, self.session_id, e) for w, e in changes["messages"]],
            )
        if changes["entries"]:
            store.executemany(
                "UPDATE entries SET is_active_path = ? WHERE session_id = ? AND entry_uuid = ?",
                [(w, self.session_id, e) for w, e in changes["entries"]],
            )

    def _pair_remaining(self) -> None:
        """Pairs that could not be made in memory: results for calls already
        written (earlier in this file or in an earlier run), and calls of this
        file whose result was imported before them."""
        store = self.store
        sets = ("UPDATE tool_calls SET result_message_id = ?, result_preview = ?, is_error = ?, "
                "exit_code = ?, duration_ms = ? ")
        if self.late_results:
            # A real result replaces a synthetic "missing tool result"; never the reverse.
            store.executemany(
                sets + "WHERE session_id = ? AND call_id = ? AND (result_message_id IS NULL OR ? = 0)",
                [(v["result_message_id"], v["result_preview"], v["is_error"], v["exit_code"],
                  v["duration_ms"], self.session_id, call_id, v["synthetic"])
                 for call_id, v in self.late_results.items()],
            )
        waiting = [c for c in self.flushed_calls if c not in self.late_results]
        if not waiting:
            return
        updates = []
        for i in range(0, len(waiting), 500):
            batch = waiting[i:i + 500]
            marks = ", ".join("?" for _ in batch)
            seen = set()
            for r in store.execute(
                "SELECT id, tool_call_id, text_preview, raw_json FROM messages WHERE session_id = ? "
                f"AND role = 'toolResult' AND tool_call_id IN ({marks}) ORDER BY is_synthetic, id",
                (self.session_id, *batch),
            ):
                if r[1] in seen:
                    continue
                seen.add(r[1])
                try:
                    message = orjson.loads(r[3]).get("message")
                except (orjson.JSONDecodeError, AttributeError):
                    message = None
                failed, exit_code, duration = P.result_failed(message if isinstance(message, dict) else {})
                updates.append((r[0], r[2], int(failed), exit_code, duration, self.flushed_calls[r[1]]))
        if updates:
            store.executemany(sets + "WHERE id = ?", updates)


def _read_at(f, start: int, length: int) -> bytes:
    f.seek(start)
    return f.read(length)


@dataclass
class ReadOutcome:
    """What reading one transcript found, besides its entries."""

    state: P.ParseState
    append: bool
    consumed_to: int
    bad: int
    pending: int
    entries_read: int
    bytes_read: int
    head: bytes
    tail: bytes
    typed: bool
    saw_entries: bool


def _read_key(previous) -> tuple | None:
    """The parts of a parsed_files row that decide what reading a file does."""
    if previous is None:
        return None
    return tuple(previous[k] for k in ("status", "parsed_offset", "head_hash", "tail_hash", "parsed_lines",
                                       "last_entry_id", "session_uuid", "legacy_format", "bad_lines"))


def read_transcript(source: SourceFile, previous, derive: bool = False):
    """The reader stage: yields (session id, entries) batches of what is new in
    a transcript and returns a ReadOutcome. No database: it can run ahead on
    another thread while the previous file is written.

    A file that only grew since the last run (its first bytes and the bytes
    just before the recorded offset are unchanged) is read from that offset;
    anything else is read whole (and merged by entry id by the writer).
    """
    state = P.ParseState()
    offset = 0
    bad = pending = entries_read = 0
    bytes_read = 0
    head = b""  # first WINDOW bytes of the file, as far as read
    tail = b""  # last WINDOW bytes before the consumed offset
    append = False
    with _open_transcript(source) as f:
        if (previous is not None and previous["status"] == "success" and previous["parsed_offset"]
                and not source.name.endswith(".zst")):  # .zst archives are immutable: read whole
            old = previous["parsed_offset"]
            if source.size >= old:
                head = _read_at(f, 0, min(WINDOW, old))
                tail = head if old <= WINDOW else _read_at(f, old - WINDOW, WINDOW)
                bytes_read += len(head) + (0 if old <= WINDOW else len(tail))
                if (P.short_hash(head) == previous["head_hash"]
                        and P.short_hash(tail) == previous["tail_hash"]):
                    append = True
                    offset = old
                    state = P.ParseState(
                        session_id=previous["session_uuid"],
                        legacy=bool(previous["legacy_format"]),
                        next_line=previous["parsed_lines"] or 0,
                        last_entry_id=previous["last_entry_id"],
                    )
                    bad = previous["bad_lines"] or 0
                    entries_read = previous["entries_read"] or 0
                else:
                    head = tail = b""
        parser = P.TranscriptParser(source.name, state)
        f.seek(offset)
        consumed_to = offset
        leftover = b""
        typed = append  # an appended file was already recognised as a transcript
        saw_entries = False
        while True:
            chunk = f.read(CHUNK)
            bytes_read += len(chunk)
            if len(head) < WINDOW and consumed_to + len(leftover) == len(head):
                head += chunk[: WINDOW - len(head)]
            data = leftover + chunk if leftover else chunk
            final = not chunk
            result = parser.feed(data, final=final)
            if result.consumed:
                tail = (tail + data[max(0, result.consumed - WINDOW):result.consumed])[-WINDOW:]
            consumed_to += result.consumed
            leftover = data[result.consumed:]
            bad += result.bad_lines
            pending += result.pending_lines
            if result.entries:
                saw_entries = True
                entries_read += len(result.entries)
                if not typed and any(e.type in KNOWN_TYPES for e in result.entries):
                    typed = True
                if derive:
                    for entry in result.entries:
                        entry.derive()
                yield state.session_id or P.session_id_from_name(source.name), result.entries
            if final:
                break
    if state.header is not None:
        typed = True
    return ReadOutcome(state, append, consumed_to, bad, pending, entries_read, bytes_read, head, tail,
                       typed, saw_entries)


class Prefetch:
    """Reads (and parses, and derives rows of) the next file on a thread while
    the current one is written: the writer's waits (SQLite's C code, MariaDB's
    round trips) release the GIL. At most a few batches are held."""

    def __init__(self, source: SourceFile, previous):
        self.source = source
        self.key = _read_key(previous)
        self.items: queue.Queue = queue.Queue(maxsize=4)
        self.cancelled = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(previous,), daemon=True)
        self.thread.start()

    def _run(self, previous) -> None:
        try:
            reader = read_transcript(self.source, previous, derive=True)
            while True:
                try:
                    batch = next(reader)
                except StopIteration as stop:
                    self._put(("done", stop.value))
                    return
                if not self._put(("batch", batch)):
                    reader.close()
                    return
        except BaseException as exc:  # handed to the writer, which decides
            self._put(("error", exc))

    def _put(self, item) -> bool:
        while not self.cancelled.is_set():
            try:
                self.items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def stream(self):
        """The same protocol as read_transcript()."""
        while True:
            kind, value = self.items.get()
            if kind == "batch":
                yield value
            elif kind == "done":
                return value
            else:
                raise value

    def cancel(self) -> None:
        self.cancelled.set()
        while self.thread.is_alive():
            try:
                self.items.get(timeout=0.1)
            except queue.Empty:
                pass
        self.thread.join()


def import_file(store: Store, source: SourceFile, previous, report: ImportReport,
                prefetch: Prefetch | None = None) -> None:
    """The writer stage for one transcript, inside the caller's transaction:
    entries merged into the session by id, then derived fields and the
    file's parsed_files row."""
    if prefetch is not None and prefetch.key == _read_key(previous):
        stream = prefetch.stream()
    else:
        if prefetch is not None:  # another importer moved the file on meanwhile
            prefetch.cancel()
        stream = read_transcript(source, previous)
    writer: SessionWriter | None = None
    while True:
        try:
            session_id, entries = next(stream)
        except StopIteration as stop:
            outcome: ReadOutcome = stop.value
            break
        if writer is None:
            writer = SessionWriter(store, source, session_id)
        for entry in entries:
            writer.add(entry)
    state = outcome.state
    if not outcome.typed and (outcome.bad or outcome.saw_entries):
        raise NotATranscript("not an OpenClaw transcript: no session header and no known entry type")
    if writer is None and state.header is not None:
        writer = SessionWriter(store, source, state.session_id)
    if writer is not None:
        writer.finish(state)
        report.messages_added += writer.added_messages
        report.entries_added += writer.added_entries
    consumed_to, head, tail = outcome.consumed_to, outcome.head, outcome.tail
    report.bytes_read += outcome.bytes_read
    report.bad_lines += outcome.bad - ((previous["bad_lines"] or 0) if outcome.append else 0)
    report.pending_lines += outcome.pending
    store.upsert_row(
        "parsed_files",
        {
            "server": source.server, "agent_id": source.agent_id, "file_path": source.path,
            "file_mtime": source.mtime_ns // 1_000_000_000, "file_mtime_ns": source.mtime_ns,
            "file_size": source.size, "status": "success", "parsed_at": now_utc(), "error_message": None,
            "session_uuid": state.session_id or (previous["session_uuid"] if previous is not None else None),
            "session_type": P.session_type_for(source.name),
            "parsed_offset": consumed_to, "parsed_lines": state.next_line,
            "head_hash": P.short_hash(head[: min(WINDOW, consumed_to)]) if consumed_to else None,
            "tail_hash": P.short_hash(tail) if consumed_to else None,
            "last_entry_id": state.last_entry_id, "legacy_format": int(state.legacy),
            "bad_lines": outcome.bad, "pending_lines": outcome.pending, "entries_read": outcome.entries_read,
        },
        ("server", "agent_id", "file_path"),
    )


def _record_problem(store: Store, source: SourceFile, status: str, message: str) -> None:
    with store.transaction():
        store.upsert_row(
            "parsed_files",
            {
                "server": source.server, "agent_id": source.agent_id, "file_path": source.path,
                "file_mtime": source.mtime_ns // 1_000_000_000, "file_mtime_ns": source.mtime_ns,
                "file_size": source.size, "status": status, "parsed_at": now_utc(),
                "error_message": message, "parsed_offset": 0, "parsed_lines": 0,
                "head_hash": None, "tail_hash": None, "bad_lines": 0, "pending_lines": 0,
            },
            ("server", "agent_id", "file_path"),
        )


def import_index(store: Store, source: SourceFile) -> None:
    """sessions.json: session key -> label, display name, channel, chat type..."""
    with source.open() as f:
        data = orjson.loads(f.read())
    if not isinstance(data, dict):
        raise NotATranscript("sessions.json is not a JSON object")
    rows = []
    for key, value in data.items():
        if not isinstance(value, dict) or not isinstance(value.get("sessionId"), str):
            continue
        origin = value.get("origin") if isinstance(value.get("origin"), dict) else {}
        rows.append({
            "server": source.server, "agent_id": source.agent_id, "session_key": key[:255],
            "session_uuid": value["sessionId"][:64],
            "label": P._str(value.get("label"), 255),
            "display_name": P._str(value.get("displayName"), 255),
            "channel": P._str(value.get("channel") or value.get("lastChannel") or origin.get("provider"), 64),
            "chat_type": P._str(value.get("chatType") or origin.get("chatType"), 32),
            "spawned_by": P._str(value.get("spawnedBy"), 255),
            "updated_at": P._int(value.get("updatedAt")),
        })
    for row in rows:
        store.upsert_row("session_index", row, ("server", "agent_id", "session_key"))
    store.upsert_row(
        "parsed_files",
        {
            "server": source.server, "agent_id": source.agent_id, "file_path": source.path,
            "file_mtime": source.mtime_ns // 1_000_000_000, "file_mtime_ns": source.mtime_ns,
            "file_size": source.size, "status": "success", "parsed_at": now_utc(), "error_message": None,
            "session_type": "index", "parsed_offset": source.size, "bad_lines": 0, "pending_lines": 0,
        },
        ("server", "agent_id", "file_path"),
    )


def apply_index(store: Store, server: str, agent_id: str) -> None:
    """Copy sessions.json metadata onto the sessions it names (newest key wins)."""
    index = store.query(
        "SELECT * FROM session_index WHERE server = ? AND agent_id = ? ORDER BY updated_at, session_key",
        (server, agent_id),
    )
    if not index:
        return
    latest = {row["session_uuid"]: row for row in index}
    fields = ("session_key", "label", "display_name", "channel", "chat_type", "spawned_by")
    updates = []
    for s in store.query(
        "SELECT id, session_uuid, " + ", ".join(fields) + " FROM sessions WHERE server = ? AND agent_id = ?",
        (server, agent_id),
    ):
        row = latest.get(s["session_uuid"])
        if row is None:
            continue
        values = tuple(row[f] for f in fields)
        if values != tuple(s[f] for f in fields):
            updates.append((*values, s["id"]))
    if updates:
        store.executemany(
            "UPDATE sessions SET " + ", ".join(f"{f} = ?" for f in fields) + " WHERE id = ?", updates
        )


def _in_transaction(store: Store, label: str, work: Callable[["ImportReport"], None],
                    attempts: int = 5) -> "ImportReport":
    """Run ``work`` in one transaction, again when the engine asks for it (a
    deadlock); the figures it reports count only the attempt that committed."""
    for attempt in range(attempts):
        part = ImportReport()
        try:
            with store.transaction():
                work(part)
            return part
        except Exception as exc:
            if attempt + 1 < attempts and store.retryable(exc):
                log.info("retrying %s after %s", label, exc)
                time.sleep(0.05 * (attempt + 1))
                continue
            raise
    raise AssertionError("unreachable")


def _import_one(store: Store, source: SourceFile, prefetch: Prefetch | None = None) -> "ImportReport":
    """One file in one transaction (with what a Prefetch already read, if any)."""
    unused = [prefetch] if prefetch is not None else []

    def work(part: ImportReport) -> None:
        ahead = unused.pop() if unused else None  # a retry reads the file again itself
        # Read again under the write lock: another importer may have taken
        # this file since the listing.
        previous = store.parsed_file(source.server, source.agent_id, source.path)
        if source.kind == "index":
            import_index(store, source)
        elif _unchanged(source, previous):
            part.files_unchanged = 1
        else:
            import_file(store, source, previous, part, ahead)
            ahead = None
        if ahead is not None:
            ahead.cancel()

    try:
        return _in_transaction(store, source.path, work)
    finally:
        for left in unused:
            left.cancel()


def _unchanged(source: SourceFile, previous) -> bool:
    return (
        previous is not None
        and previous["status"] in ("success", "ignored")
        and previous["file_size"] == source.size
        and previous["file_mtime_ns"] == source.mtime_ns
    )


def run_import(
    store: Store,
    paths: list[str],
    server: str | None = None,
    agent: str | None = None,
    progress: Callable[[list[SourceFile]], object] | None = None,
    sources: Discovery | None = None,
) -> ImportReport:
    """Import every transcript under ``paths``; one bad file never stops the others.

    ``sources``, when given, is an already made listing (a remote server's,
    see remote.py) imported instead of discovering ``paths``.
    """
    started = time.perf_counter()
    report = ImportReport()
    # Parsed transcripts are millions of short-lived containers; the cyclic
    # GC would walk them again and again for nothing (they hold no cycles).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(store, paths, server, agent, progress, report, started, sources)
    finally:
        if gc_was_enabled:
            gc.enable()


def _run(store, paths, server, agent, progress, report, started, sources=None) -> ImportReport:
    found = sources if sources is not None else discover(paths, server=server, agent=agent)
    report.warnings.extend(found.warnings)
    for message in found.errors:
        report.failures.append(("", message))
        report.files_failed += 1
    known: dict[tuple[str, str], dict] = {}
    touched: set[tuple[str, str]] = set()
    store_meta: dict[tuple[str, str], dict] = {}  # OpenClaw SQLite stores: session metadata per group
    files = found.files
    iterator = progress(files) if progress else files
    prefetches: dict[int, Prefetch] = {}

    def listed_previous(src: SourceFile):
        grp = (src.server, src.agent_id)
        if grp not in known:
            known[grp] = store.parsed_files(*grp)
        return known[grp].get(src.path)

    def prefetch_after(i: int) -> None:
        """Start reading the next local transcript that will be imported."""
        for j in range(i + 1, min(i + 64, len(files))):
            nxt = files[j]
            if nxt.kind != "transcript" or type(nxt) is not SourceFile:
                continue
            prev = listed_previous(nxt)
            if _unchanged(nxt, prev):
                continue
            if j not in prefetches:
                prefetches[j] = Prefetch(nxt, prev)
            return

    try:
        _import_all(store, files, iterator, report, known, touched, store_meta, listed_previous,
                    prefetch_after, prefetches)
    finally:
        for pending in prefetches.values():
            pending.cancel()
    for group in sorted(touched):
        with store.transaction():
            apply_index(store, *group)
    for group in sorted(store_meta):  # after sessions.json: the store is the newer source
        with store.transaction():
            apply_store_metadata(store, *group, store_meta[group])
    report.elapsed_s = time.perf_counter() - started
    return report


def _import_all(store, files, iterator, report, known, touched, store_meta, listed_previous, prefetch_after,
                prefetches) -> None:
    for index, source in enumerate(iterator):
        group = (source.server, source.agent_id)
        previous = listed_previous(source)
        if source.kind == "openclaw_db":
            meta = import_openclaw_db(store, source, report, known[group])
            if meta is not None:
                store_meta.setdefault(group, {}).update(meta)
                touched.add(group)
            continue
        if source.kind == "transcript":
            report.files_seen += 1
        if _unchanged(source, previous):
            if source.kind == "transcript":
                report.files_unchanged += 1
                report.pending_lines += previous["pending_lines"] or 0
            continue
        try:
            prefetch_after(index)
            part = _import_one(store, source, prefetches.pop(index, None))
            report.add(part)
            touched.add(group)
            if source.kind == "transcript":
                if part.files_unchanged:
                    report.files_unchanged += 1
                else:
                    report.files_imported += 1
        except SourceLost as exc:
            # The connection went away: this file (rolled back) and the ones
            # after it stay as recorded, for the next run.
            report.failures.append((source.path, str(exc)))
            report.files_failed += 1
            break
        except NotATranscript as exc:
            _record_problem(store, source, "ignored", str(exc))
            report.files_ignored += 1
        except (OSError, orjson.JSONDecodeError, UnicodeDecodeError, RowRejected) as exc:
            reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            message = f"cannot read {source.path}: {reason}"
            _record_problem(store, source, "failed", message)
            report.failures.append((source.path, message))
            report.files_failed += 1


# ---------------------------------------------------------------------------
# OpenClaw's SQLite store (2026.8+): one agent database holds many sessions.
#
# Each session is one import unit with its own ``parsed_files`` row, file_path
# "<db path>#<session id>": parsed_offset is the last seq imported, head_hash
# the hash of the session's rewrite watermark (transcript_rewrite_watermarks),
# tail_hash the hash of the event at parsed_offset and file_size its number of
# events. A unit whose last seq, event count and watermark are unchanged is not
# read; one that only grew (same watermark, same event at parsed_offset) is read
# from parsed_offset on; anything else is read whole and merged by entry id.
# A deleted or reset session kept in session_transcript_archives is a unit
# "<db path>#archive/<archive name>", immutable: imported once, like a file.
# The database itself gets a row too (session_type "openclaw_db").


def _open_transcript(source: SourceFile):
    """The bytes of a transcript; ``*.zst`` archives decompressed as a stream."""
    f = source.open()
    return openclaw_db.ZstdReader(f) if source.name.endswith(".zst") else f


@dataclass
class BlobSource(SourceFile):
    """A transcript held in a database value (a deleted or reset archive)."""

    blob: bytes = b""

    def open(self):
        return io.BytesIO(self.blob)


def _unit_source(source: SourceFile, key: str, size: int, time_ms: int, cls=SourceFile, **extra) -> SourceFile:
    # The unit's time ranks it against the JSONL files of the same session
    # (newest decides derived fields); its name gives its session type
    # ("normal" for "<db>#<session id>", "deleted"/"reset" for an archive's name).
    return cls(source.server, source.agent_id, f"{source.path}#{key}", size, max(time_ms, 0) * 1_000_000,
               "openclaw_db", **extra)


def _generation_hash(unit: "openclaw_db.SessionUnit") -> str:
    return P.short_hash(b"generation:" + (unit.generation or "").encode("utf-8", "replace"))


def _unit_unchanged(unit: "openclaw_db.SessionUnit", previous) -> bool:
    return (
        previous is not None
        and previous["status"] == "success"
        and previous["parsed_offset"] == unit.last_seq
        and previous["file_size"] == unit.count
        and previous["head_hash"] == _generation_hash(unit)
    )


def import_store_session(store: Store, conn, layout: "openclaw_db.Layout", db_path: str, source: SourceFile,
                         unit: "openclaw_db.SessionUnit", previous, report: ImportReport) -> None:
    """Read what is new in one session of an OpenClaw store and archive it, in
    the caller's transaction. Events go through the same parser as JSONL lines
    (one event = one line, its ``seq`` = its line index: seq 0 is the header),
    so identity, revisions and derived fields follow the JSONL rules."""
    generation = _generation_hash(unit)
    after = None
    state = P.ParseState()
    bad = entries_read = 0
    last_seq = None
    tail_hash = None
    if (previous is not None and previous["status"] == "success" and previous["parsed_offset"] is not None
            and previous["head_hash"] == generation and unit.last_seq > previous["parsed_offset"]):
        old = previous["parsed_offset"]
        same_tail = unit.cold is not None  # a cold archive is immutable while its generation stands
        if not same_tail:
            event = openclaw_db.hot_event(conn, layout, unit.session_id, old)
            same_tail = event is not None and P.short_hash(event) == previous["tail_hash"]
        if same_tail:
            after = old
            state = P.ParseState(session_id=previous["session_uuid"], legacy=bool(previous["legacy_format"]),
                                 next_line=old + 1, last_entry_id=previous["last_entry_id"])
            bad = previous["bad_lines"] or 0
            entries_read = previous["entries_read"] or 0
            last_seq, tail_hash = old, previous["tail_hash"]
    skipped: list[int] = []  # compressed events that do not decode
    streams = []
    if unit.cold is not None:
        data = openclaw_db.cold_archive_bytes(conn, db_path, unit.cold)
        report.bytes_read += len(data)
        streams.append(openclaw_db.iter_cold_events(data, unit.cold, after))
    if unit.hot:
        streams.append(openclaw_db.iter_hot_events(conn, layout, unit.session_id, after, skipped))
    parser = P.TranscriptParser(unit.session_id, state)
    writer: SessionWriter | None = None
    for seq, raw in itertools.chain(*streams):
        report.events_read += 1
        report.bytes_read += len(raw)
        if b"\n" in raw:  # JSON whitespace only (a string cannot hold a raw newline)
            raw = raw.replace(b"\n", b" ")
        state.next_line = seq
        result = parser.feed(raw + b"\n")
        bad += result.bad_lines
        last_seq, tail_hash = seq, P.short_hash(raw)
        for entry in result.entries:
            if writer is None:
                writer = SessionWriter(store, source, state.session_id or unit.session_id)
            entries_read += 1
            writer.add(entry)
    if skipped:
        log.warning("session %s: %d compressed events do not decode (seq %s)", unit.session_id,
                    len(skipped), ", ".join(map(str, skipped[:5])))
        bad += len(skipped)
        if last_seq is None or max(skipped) > last_seq:
            last_seq, tail_hash = max(skipped), None
    if writer is None and state.header is not None:
        writer = SessionWriter(store, source, state.session_id)
    if writer is not None:
        writer.finish(state)
        report.messages_added += writer.added_messages
        report.entries_added += writer.added_entries
    report.bad_lines += bad - ((previous["bad_lines"] or 0) if after is not None else 0)
    store.upsert_row(
        "parsed_files",
        {
            "server": source.server, "agent_id": source.agent_id, "file_path": source.path,
            "file_mtime": source.mtime_ns // 1_000_000_000, "file_mtime_ns": source.mtime_ns,
            "file_size": unit.count, "status": "success", "parsed_at": now_utc(), "error_message": None,
            "session_uuid": state.session_id or unit.session_id,
            "session_type": P.session_type_for(source.name),
            "parsed_offset": last_seq if last_seq is not None else unit.last_seq,
            "parsed_lines": state.next_line,
            "head_hash": generation, "tail_hash": tail_hash,
            "last_entry_id": state.last_entry_id, "legacy_format": int(state.legacy),
            "bad_lines": bad, "pending_lines": 0, "entries_read": entries_read,
        },
        ("server", "agent_id", "file_path"),
    )


def _import_store_unit(store: Store, conn, layout, db_path: str, source: SourceFile,
                       unit: "openclaw_db.SessionUnit") -> ImportReport:
    """One store session in one transaction."""

    def work(part: ImportReport) -> None:
        previous = store.parsed_file(source.server, source.agent_id, source.path)
        if _unit_unchanged(unit, previous):
            part.files_unchanged = 1
        else:
            import_store_session(store, conn, layout, db_path, source, unit, previous, part)

    return _in_transaction(store, source.path, work)


def _record_db(store: Store, source: SourceFile, status: str, message: str | None, units: int) -> None:
    with store.transaction():
        store.upsert_row(
            "parsed_files",
            {
                "server": source.server, "agent_id": source.agent_id, "file_path": source.path,
                "file_mtime": source.mtime_ns // 1_000_000_000, "file_mtime_ns": source.mtime_ns,
                "file_size": source.size, "status": status, "parsed_at": now_utc(),
                "error_message": message, "session_type": "openclaw_db", "parsed_offset": 0,
                "parsed_lines": units, "head_hash": None, "tail_hash": None,
                "bad_lines": 0, "pending_lines": 0,
            },
            ("server", "agent_id", "file_path"),
        )


def import_openclaw_db(store: Store, source: SourceFile, report: ImportReport,
                       known: dict | None = None) -> dict | None:
    """Every session of one agent's SQLite store: its hot and cold transcripts
    and its deleted/reset archives, each unit in its own transaction (one that
    fails is recorded and the others go on). ``known`` is the group's
    ``parsed_files`` rows by path (read when not given): unchanged units are
    skipped without a transaction. Returns the session metadata to apply once
    the run's files are in (None when the store cannot be read)."""
    if known is None:
        known = store.parsed_files(source.server, source.agent_id)
    try:
        # A remote store is read from the consistent copy sync.py fetched (remote.RemoteStoreFile).
        conn = openclaw_db.connect_readonly(getattr(source, "local_path", None) or source.path)
    except openclaw_db.SourceError as exc:
        _fail(store, source, str(exc), report, whole_store=True)
        return None
    try:
        try:
            layout = openclaw_db.detect_layout(conn)
            units = openclaw_db.session_units(conn, layout)
            archives = openclaw_db.transcript_archives(conn, layout)
        except openclaw_db.SourceError as exc:
            _fail(store, source, f"{source.path}: {exc}", report, whole_store=True)
            return None
        if layout.kind == "events":
            report.warnings.append(f"{source.path}: transcripts without a known session table "
                                   f"(schema {layout.user_version}): metadata not read")
        # The store is as new as its last write: a session it holds outranks the
        # JSONL files it was migrated from (their last write came before).
        try:
            wal_ns = os.stat(source.path + "-wal").st_mtime_ns
        except OSError:
            wal_ns = 0
        store_ms = max(source.mtime_ns, wal_ns) // 1_000_000
        for unit in units:
            usrc = _unit_source(source, unit.session_id, unit.count, max(store_ms, unit.updated_ms))
            report.files_seen += 1
            if _unit_unchanged(unit, known.get(usrc.path)):
                report.files_unchanged += 1
                continue
            try:
                part = _import_store_unit(store, conn, layout, source.path, usrc, unit)
            except (openclaw_db.SourceError, OSError, RowRejected) as exc:
                _fail(store, usrc, f"cannot read session {unit.session_id} of {source.path}: "
                      f"{getattr(exc, 'strerror', None) or str(exc).splitlines()[0]}", report)
                continue
            report.add(part)
            if part.files_unchanged:
                report.files_unchanged += 1
            else:
                report.files_imported += 1
        for archive in archives:
            asrc = _unit_source(source, "archive/" + archive.archive_name, archive.size, archive.created_ms,
                                cls=BlobSource)
            report.files_seen += 1
            if _unchanged(asrc, known.get(asrc.path)):
                report.files_unchanged += 1
                continue
            try:
                asrc.blob = openclaw_db.transcript_archive_bytes(conn, archive)
                part = _import_one(store, asrc)
            except NotATranscript as exc:
                _record_problem(store, asrc, "ignored", str(exc))
                report.files_ignored += 1
                continue
            except (openclaw_db.SourceError, OSError, orjson.JSONDecodeError, UnicodeDecodeError,
                    RowRejected) as exc:
                _fail(store, asrc, f"cannot read {asrc.path}: "
                      f"{getattr(exc, 'strerror', None) or str(exc).splitlines()[0]}", report)
                continue
            finally:
                asrc.blob = b""
            report.add(part)
            report.files_imported += 1
        try:
            meta = openclaw_db.session_metadata(conn, layout)
        except openclaw_db.SourceError as exc:
            report.warnings.append(f"{source.path}: {exc}")
            meta = {}
    finally:
        conn.close()
    _record_db(store, source, "success", None, len(units) + len(archives))
    return meta


def _fail(store: Store, source: SourceFile, message: str, report: ImportReport, whole_store: bool = False) -> None:
    if whole_store:
        _record_db(store, source, "failed", message, 0)
    else:
        _record_problem(store, source, "failed", message)
    report.failures.append((source.path, message))
    report.files_failed += 1


STORE_FIELDS = ("session_key", "label", "display_name", "channel", "chat_type", "spawned_by", "reason",
                "previous_session_id", "status", "ended_at", "model_provider", "model", "archived_at")


def apply_store_metadata(store: Store, server: str, agent_id: str, meta: dict[str, dict]) -> None:
    """Session metadata from OpenClaw SQLite stores onto the archived sessions
    (a value the store does not know never erases one already archived), then
    the reset/rollover chain: ``next_session_id`` is the session whose
    ``previous_session_id`` is this one (the latest started, if several)."""
    rows = store.query(
        "SELECT id, session_uuid, started_at, next_session_id, " + ", ".join(STORE_FIELDS)
        + " FROM sessions WHERE server = ? AND agent_id = ?",
        (server, agent_id),
    )
    chain: list[tuple[str, int, str, str]] = []
    for s in rows:
        m = meta.get(s["session_uuid"])
        values: dict = {}
        if m:
            for f in STORE_FIELDS:
                if f in ("ended_at", "archived_at"):
                    value = P.format_timestamp(m.get(f[:-3] + "_ms"))
                else:
                    value = m.get(f)
                if value is not None and value != s[f]:
                    values[f] = value
            if s["started_at"] is None and m.get("started_ms") is not None:
                values["started_at"] = P.format_timestamp(m["started_ms"])
        previous = values.get("previous_session_id", s["previous_session_id"])
        if previous:
            chain.append((s["started_at"] or values.get("started_at") or "", s["id"], previous, s["session_uuid"]))
        if values:
            store.update("sessions", s["id"], values)
    following = {prev: sid for _, _, prev, sid in sorted(chain)}  # the latest started wins
    for s in rows:
        want = following.get(s["session_uuid"])
        if want != s["next_session_id"]:
            store.update("sessions", s["id"], {"next_session_id": want})
