"""The writer stage: what a unit's reader yields, into the store, one
transaction per unit.

:class:`SessionWriter` merges a unit's entries into their session by entry id
(identity, DESIGN.md: a session is (server, agent, session id), an entry is
(session, entry id); the live file, its ``.reset``/``.deleted`` rename,
checkpoint and backup copies are only containers), then derives the session's
fields: the newest unit decides its type and active path, each model call is
counted once, tool calls are paired with their results. ``import_one`` runs a
unit in one transaction with its checkpoint (its ``parsed_files`` row), so that
killing the importer at any moment leaves the store as it was before that
unit. Nothing here knows which source kind a unit is.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

import orjson

from . import parser as P
from . import prices
from .schema import COUNTED_USAGE, USAGE_TOTALS
from .vocabulary import UNKNOWN
from .store import Store, now_utc
from .units import Checkpoint, NotATranscript, Outcome, Prefetched, SessionInfo, Unit, unchanged

__all__ = ["ImportReport", "SessionWriter", "import_one", "in_transaction", "record_problem", "unit_row"]

log = logging.getLogger("agentbase")


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
    unknown_entries: int = 0  # entries of records their kind does not know
    # (server, kind) -> {record type: [count, where the first is]}: what import says of them
    unknown_types: dict = field(default_factory=dict)
    elapsed_s: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    not_read: list[tuple[str, str]] = field(default_factory=list)  # (file, why): files not of their kind

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

    def note_unknown(self, server: str, kind: str, types: dict) -> None:
        mine = self.unknown_types.setdefault((server, kind), {})
        for name, (count, where) in types.items():
            if name in mine:
                mine[name][0] += count
            else:
                mine[name] = [count, where]

    def add(self, other: "ImportReport") -> None:
        """Add a committed file's figures (not its file counters)."""
        for name in ("messages_added", "entries_added", "bad_lines", "pending_lines", "bytes_read", "events_read",
                     "unknown_entries"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for (server, kind), types in other.unknown_types.items():
            self.note_unknown(server, kind, types)

    def summary(self) -> str:
        return (
            f"files: {self.files_seen} seen, {self.files_unchanged} unchanged, "
            f"{self.files_imported} imported, {self.files_failed} failed, {self.files_ignored} not transcripts; "
            f"messages added: {self.messages_added}; bad lines: {self.bad_lines}; "
            f"pending lines: {self.pending_lines}"
        )


class _Totals:
    """A new session's message count, time span and usage sums (each model
    call once), as SQL's COUNT/MIN/MAX/SUM would give them: saves reading the
    rows back. NULL (None) where no row has a value."""

    COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens",
               "cost_usd")

    def __init__(self):
        self.count = 0
        self.first = self.last = None
        self.sums: dict[str, int | float | None] = dict.fromkeys(self.COLUMNS)

    def add(self, row: dict) -> None:
        self.count += 1
        ts = row["timestamp"]
        if ts is not None:
            if self.first is None or ts < self.first:
                self.first = ts
            if self.last is None or ts > self.last:
                self.last = ts
        counted = row["usage_counted"]
        sums = self.sums
        for column in self.COLUMNS:
            value = row[column]
            if value is not None:
                sums[column] = (sums[column] or 0) + value * counted

    def values(self) -> dict:
        return {"message_count": self.count, "first_message_at": self.first, "last_message_at": self.last,
                **self.sums}


# Message columns a kind's parser may leave out, with what they then hold.
MESSAGE_DEFAULTS = {
    "cost_source": None, "cache_write_5m_tokens": None, "cache_write_1h_tokens": None, "is_context": 0,
    "time_approximate": 0, "usage_invalid": 0, "exit_code": None, "duration_ms": None, "error_message": None,
    "tool_call_id": None, "tool_name": None, "call_key": None, "api": None, "stop_reason": None,
    "native_role": None,
}
_DEFAULT_KEYS = MESSAGE_DEFAULTS.keys()


class _NextIds:
    """The next free messages and tool_calls ids. The writers of a unit that holds several sessions
    share one: each buffers rows the store does not have yet, so ids read from the store would
    collide."""

    __slots__ = ("message", "call")

    def __init__(self, message: int, call: int):
        self.message = message
        self.call = call

    def share(self, other: "_NextIds") -> "_NextIds":
        other.message = max(other.message, self.message)
        other.call = max(other.call, self.call)
        return other


class SessionWriter:
    """Accumulates one unit's entries for one session and writes them."""

    def __init__(self, store: Store, unit: Unit, session_uuid: str):
        self.store = store
        self.unit = unit
        self.session_uuid = session_uuid
        row = store.session(unit.server, unit.agent_id, session_uuid)
        next_session, next_message, next_call = store.next_ids("sessions", "messages", "tool_calls")
        self.ids = _NextIds(next_message, next_call)
        if row is None:
            self.session_id = next_session
            store.insert_rows(
                "sessions",
                [{
                    "id": self.session_id, "server": unit.server, "agent_id": unit.agent_id,
                    "session_uuid": session_uuid, "file_path": unit.key,
                    "session_type": unit.session_type, "message_count": 0,
                    "created_at": now_utc(), "source_rank": "", "source": unit.kind,
                }],
            )
            self.session = None
            self.known: dict[str, list] = {}
            self.counted: set[str] = set()
            self.calls: dict[str, int] = {}
        else:
            self.session_id = row["id"]
            self.session = row
            self.known = {
                eid: [parent, active, h, table] for eid, parent, active, h, table in store.session_entries(row["id"])
            }
            self.counted = store.counted_call_keys(row["id"])
            self.calls = store.session_call_ids(row["id"])
        # A tool call is (session, call id): a copy of its message (re-appended,
        # restored, checkpointed) keeps its entry, not a second tool_calls row.
        self.copied_calls = False
        self.rank = unit.rank
        self.wins = self.session is None or self.rank >= (self.session["source_rank"] or "")
        # A unit whose name claims another session than the unit the session was
        # archived from (a copy under another name, an id collision): where
        # their entries differ, the archive's stay and this unit's are kept as
        # revisions, and it decides none of the session's derived fields.
        self.rival = False
        self.conflicts = 0
        if self.session is not None:
            theirs = (self.session["source_rank"] or "").split(":", 2)[-1]
            mine = unit.source.claimed_session(unit.name)
            if mine is not None and theirs and theirs != unit.name:
                other = unit.source.claimed_session(theirs)
                self.rival = other is not None and other != mine
        self.messages: list[dict] = []
        self.tool_calls: list[dict] = []
        self.entries: list[dict] = []
        self.added_messages = 0
        self.added_entries = 0
        self.unknown_entries = 0  # of them, records the kind does not know (docs/sources.md, "Unknown records")
        self.unknown_types: dict[str, list] = {}  # their type -> [count, where the first is]
        self.changed = False
        self.totals = _Totals() if self.session is None else None  # a new session's figures, kept as rows go in
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
            if not self.wins or self.rival:
                # An older or lesser copy (backup, checkpoint), or a rival file,
                # disagrees with the archive: keep its version aside, the archive's stays.
                self._keep_revision(entry.entry_id, entry.raw.decode("utf-8", "replace"), None)
                if self.rival:
                    self.conflicts += 1
                return
            self._replace(entry.entry_id, known[3])
        unit = self.unit
        common = {
            "session_id": self.session_id, "server": unit.server,
            "agent_id": unit.agent_id, "session_uuid": self.session_uuid,
        }
        entry.derive()
        if entry.type == "message":
            row = entry.row
            if not _DEFAULT_KEYS <= row.keys():
                # The columns a kind's parser may leave out take their defaults: every
                # row of a batch has the same keys (one INSERT statement for all).
                entry.row = row = {**MESSAGE_DEFAULTS, **row}
            row.update(common)
            row["source"] = unit.kind
            row["calls_elsewhere"] = 0
            row["id"] = self.ids.message
            self.ids.message += 1
            row["created_at"] = self.created_at
            row["is_active_path"] = 1
            row["raw_hash"] = digest
            if row.get("cost_source") is None:
                self._price(row)
            key = row["call_key"]
            if row["usage_invalid"]:
                row["usage_counted"] = 0  # negative or non-numeric usage: kept, flagged, never summed
            elif key is not None and key in self.counted:
                row["usage_counted"] = 0
            else:
                row["usage_counted"] = 1
                if key is not None:
                    self.counted.add(key)
            self.messages.append(row)
            if self.totals is not None:
                self.totals.add(row)
            for call in entry.calls:
                call_id = call["call_id"]
                if call_id is not None:
                    if call_id in self.calls:
                        row["tool_call_count"] -= 1
                        row["calls_elsewhere"] += 1
                        self.copied_calls = True
                        continue
                    self.calls[call_id] = self.ids.call
                if "is_truncated" not in call:
                    call["is_truncated"] = 0
                call.update(common)
                call.update({
                    "id": self.ids.call, "message_id": row["id"], "message_uuid": entry.entry_id,
                    "source": unit.kind,
                    "is_active_path": 1, "created_at": self.created_at,
                    "result_message_id": None, "result_preview": None, "is_error": 0,
                    "exit_code": None, "duration_ms": None,
                })
                self.ids.call += 1
                self.tool_calls.append(call)
                if call["call_id"] is not None:
                    self.open_calls[call["call_id"]] = call
            if row["tool_call_id"] is not None:
                # a tool's result (OpenClaw's toolResult, the "tool" role some kinds keep): paired with its call
                self._result(row)
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
            if row.get("custom_type") == UNKNOWN or row.get("entry_type") == UNKNOWN:
                self.unknown_entries += 1
                seen = self.unknown_types.get(row.get("entry_type") or UNKNOWN)
                if seen is None:
                    self.unknown_types[row.get("entry_type") or UNKNOWN] = [
                        1, f"session {self.session_uuid}, record {row.get('seq')}"]
                else:
                    seen[0] += 1
            table = "entries"
        self.known[entry.entry_id] = [entry.parent_id, 1, digest, table]
        self.changed = True
        if len(self.messages) + len(self.entries) >= 500:
            self.flush()

    def _price(self, row: dict) -> None:
        """``cost_source`` (and, for a kind that records no cost, ``cost_usd``
        from the price table) of a message that carries usage."""
        cost = row["cost_usd"]
        tokens = [row["input_tokens"], row["output_tokens"], row["cache_read_tokens"], row["cache_write_tokens"]]
        if cost is None and all(t is None for t in tokens):
            return  # no usage: not a model call
        if self.unit.source.records_costs:
            # Never replaced; zero with tokens means unpriced (FORMAT.md section 8), never free.
            row["cost_source"] = prices.RECORDED if (cost or 0) > 0 or not any(tokens) else prices.UNPRICED
            return
        write_1h = row.get("cache_write_1h_tokens") or 0
        write_5m = row.get("cache_write_5m_tokens")
        if write_5m is None:
            write_5m = max((row["cache_write_tokens"] or 0) - write_1h, 0)
        usage = {"input": row["input_tokens"] or 0, "output": row["output_tokens"] or 0,
                 "cache_read": row["cache_read_tokens"] or 0, "cache_write_5m": write_5m, "cache_write_1h": write_1h}
        row["cost_usd"], row["cost_source"] = prices.price_call(prices.current(), row["model"], row["provider"],
                                                                usage, cost)

    def _replace(self, entry_id: str, table: str) -> None:
        """An entry came back with different JSON: the newest file's version
        goes into the main tables, the previous one into entry_revisions."""
        self.totals = None  # a row goes away: the totals are counted in SQL
        self.flush()
        store = self.store
        if table == "messages":
            old = store.query(
                "SELECT id, raw_json, content_blocks, call_key, usage_counted FROM messages "
                "WHERE session_id = ? AND message_uuid = ?",
                (self.session_id, entry_id),
            )[0]
            for (call_id,) in store.tuples("SELECT call_id FROM tool_calls WHERE message_id = ? AND call_id IS NOT NULL",
                                            (old["id"],)):
                self.calls.pop(call_id, None)
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
                "content_blocks": content, "replaced_at": now_utc(), "replaced_by_file": self.unit.key,
            }],
        )

    def _result(self, row: dict) -> None:
        """Pair a tool result with its call: in memory when the call is in this
        unit (the usual case), else by an UPDATE when the unit is finished."""
        values = {"result_message_id": row["id"], "result_preview": row["text_preview"],
                  "is_error": row["is_error"], "exit_code": row["exit_code"], "duration_ms": row["duration_ms"]}
        call_id = row["tool_call_id"]
        call = self.open_calls.get(call_id)
        if call is not None:
            call.update(values)
            if not row["is_synthetic"]:
                del self.open_calls[call_id]
            return
        if call_id in self.late_results and (row["is_synthetic"] or not self.late_results[call_id]["synthetic"]):
            return  # the earliest real result pairs; a synthetic stand-in never replaces one
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

    def finish(self, info: SessionInfo | None = None) -> None:
        """Derived fields: the session's newest unit, active path, tool-result
        pairing and totals; ``info``: the session-level values this unit holds."""
        self.flush()
        store = self.store
        rank = self.rank
        session = self.session
        wins = self.wins and not self.conflicts
        values: dict = {}
        leaf = session["leaf_entry_id"] if session is not None else None
        if wins:
            values.update({"source_rank": rank, "file_path": self.unit.key, "session_type": self.unit.session_type})
            if self.last_entry_id is not None:
                leaf = self.last_entry_id
                values["leaf_entry_id"] = leaf
        if info is not None:
            old_header = session["header_json"] if session is not None else None
            if info.raw is not None and old_header is not None and info.raw != old_header:
                # Keep the header that loses as a revision: every line stays rebuildable.
                self._keep_revision("@header", old_header if wins else info.raw, None)
            if wins or session is None or (info.raw is not None and old_header is None):
                values.update(info.values)
                if info.raw is not None:
                    values["header_json"] = info.raw
        if self.changed or (session is not None and leaf != session["leaf_entry_id"]):
            self._mark_active_path(leaf)
            if self.session is not None or self.copied_calls:
                self._attach_calls_to_active_copies()
        self._pair_remaining()
        if self.totals is not None:
            values.update(self.totals.values())
        elif self.changed or session is None:
            agg = store.tuples(f"SELECT COUNT(*), MIN(timestamp), MAX(timestamp), {COUNTED_USAGE} "
                               "FROM messages WHERE session_id = ?", (self.session_id,))[0]
            values.update({"message_count": agg[0], "first_message_at": agg[1], "last_message_at": agg[2],
                           **dict(zip(USAGE_TOTALS, agg[3:]))})
        if values:
            values["updated_at"] = now_utc()
            store.update("sessions", self.session_id, values)
        # (its rows may have changed by UPDATE and DELETE too: the snapshot re-reads the session)
        store.touch((self.session_id,))

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

    def _attach_calls_to_active_copies(self) -> None:
        """A tool call belongs to the copy of its message on the active path when
        there is one, else to the earliest (the one it was first attached to):
        a call whose message left the active path moves to an active copy.
        ``calls_elsewhere`` counts a message's calls attached to another copy."""
        store = self.store
        stranded = {r[0]: (r[1], r[2]) for r in store.tuples(
            "SELECT call_id, id, message_id FROM tool_calls WHERE session_id = ? AND is_active_path = 0 "
            "AND call_id IS NOT NULL", (self.session_id,))}
        if not stranded:
            return
        moves, holders = [], {}
        for mid, muuid, content, ts in store.tuples(
            "SELECT id, message_uuid, content_blocks, timestamp FROM messages WHERE session_id = ? "
            "AND is_active_path = 1 AND calls_elsewhere > 0", (self.session_id,)):
            try:
                blocks = orjson.loads(content) if content else []
            except orjson.JSONDecodeError:
                continue
            for index, block in enumerate(blocks if isinstance(blocks, list) else []):
                if isinstance(block, dict) and block.get("type") == "toolCall" and block.get("id") in stranded:
                    row_id, old = stranded.pop(block["id"])
                    moves.append((mid, muuid, index, ts, row_id))
                    holders[mid] = holders.get(mid, 0) + 1
                    holders[old] = holders.get(old, 0) - 1
        if moves:
            store.executemany("UPDATE tool_calls SET message_id = ?, message_uuid = ?, block_index = ?, "
                              "timestamp = ?, is_active_path = 1 WHERE id = ?", moves)
            store.executemany("UPDATE messages SET tool_call_count = tool_call_count + ?, "
                              "calls_elsewhere = calls_elsewhere - ? WHERE id = ?",
                              [(n, n, mid) for mid, n in holders.items() if n])

    def _pair_remaining(self) -> None:
        """Pairs that could not be made in memory: results for calls already
        written (earlier in this file or in an earlier run), and calls of this
        file whose result was imported before them."""
        store = self.store
        sets = ("UPDATE tool_calls SET result_message_id = ?, result_preview = ?, is_error = ?, "
                "exit_code = ?, duration_ms = ? ")
        if self.late_results:
            # The earliest real result pairs with a call: a real result replaces a
            # synthetic "missing tool result", never another real one or the reverse.
            store.executemany(
                sets + "WHERE session_id = ? AND call_id = ? AND (result_message_id IS NULL OR (? = 0 AND EXISTS "
                "(SELECT 1 FROM messages r WHERE r.id = tool_calls.result_message_id AND r.is_synthetic = 1)))",
                [(v["result_message_id"], v["result_preview"], v["is_error"], v["exit_code"],
                  v["duration_ms"], self.session_id, call_id, v["synthetic"])
                 for call_id, v in self.late_results.items()],
            )
        waiting = [c for c in self.flushed_calls if c not in self.late_results]
        if not waiting or self.session is None:
            # A new session's results all came through this file: the ones
            # for calls already written are in late_results.
            return
        updates = []
        for i in range(0, len(waiting), 500):
            batch = waiting[i:i + 500]
            marks = ", ".join("?" for _ in batch)
            seen = set()
            for r in store.execute(
                "SELECT id, tool_call_id, text_preview, is_error, exit_code, duration_ms FROM messages "
                f"WHERE session_id = ? AND tool_call_id IN ({marks}) ORDER BY is_synthetic, id",
                (self.session_id, *batch),
            ):
                if r[1] in seen:
                    continue
                seen.add(r[1])
                updates.append((r[0], r[2], r[3], r[4], r[5], self.flushed_calls[r[1]]))
        if updates:
            store.executemany(sets + "WHERE id = ?", updates)



def import_unit(store: Store, unit: Unit, checkpoint: Checkpoint | None, report: ImportReport,
                ready: Prefetched | None = None) -> None:
    """The writer stage for one unit, inside the caller's transaction: its
    entries merged into their sessions by id, rows of other tables upserted,
    then derived fields and the unit's checkpoint. ``ready``: the unit already
    read and parsed, used when it was read against the same checkpoint."""
    stream = ready.replay() if ready is not None and ready.fits(checkpoint) else unit.read(checkpoint)
    writers: dict[str, SessionWriter] = {}
    while True:
        try:
            batch = next(stream)
        except StopIteration as stop:
            outcome: Outcome = stop.value
            break
        for table, rows, key in batch.rows:
            for row in rows:
                store.upsert_row(table, row, key)
        if batch.entries:
            writer = writers.get(batch.session)
            if writer is None:
                writer = SessionWriter(store, unit, batch.session)
                if writers:
                    writer.ids = writer.ids.share(next(iter(writers.values())).ids)
                writers[batch.session] = writer
            for entry in batch.entries:
                writer.add(entry)
    if not outcome.typed and (outcome.bad or outcome.saw_entries):
        raise NotATranscript(unit.source.not_this_kind())
    for session in outcome.sessions:
        if session not in writers:
            writers[session] = SessionWriter(store, unit, session)
    for session, writer in writers.items():
        writer.finish(outcome.sessions.get(session))
        report.messages_added += writer.added_messages
        report.entries_added += writer.added_entries
        report.unknown_entries += writer.unknown_entries
        if writer.unknown_types:
            report.note_unknown(unit.server, unit.source.kind, writer.unknown_types)
        if writer.conflicts:
            theirs = (writer.session["source_rank"] or "").split(":", 2)[-1]
            report.warnings.append(
                f"{unit.key} claims session {session}, archived from {theirs}, with different content: "
                f"{writer.conflicts} entries kept as revisions; the session's cost and active path stay the first's")
    report.bytes_read += outcome.bytes_read
    report.events_read += outcome.events_read
    report.bad_lines += outcome.bad - outcome.bad_before
    report.pending_lines += outcome.pending
    report.warnings.extend(outcome.warnings)
    store.upsert_row("parsed_files", unit_row(unit, "success", outcome.checkpoint), ("server", "agent_id", "file_path"))


def unit_row(unit, status: str, checkpoint: Checkpoint | None = None, **values) -> dict:
    """A unit's (or container's) ``parsed_files`` row: what identifies and
    dates it, its checkpoint, plus ``values``."""
    row = {
        "server": unit.server, "agent_id": unit.agent_id, "file_path": unit.key,
        "file_mtime": unit.mtime_ns // 1_000_000_000, "file_mtime_ns": unit.mtime_ns,
        "file_size": unit.size, "status": status, "parsed_at": now_utc(), "error_message": None,
        "session_type": unit.session_type, "source": unit.source.kind,
    }
    if checkpoint is not None:
        row.update(checkpoint.columns())
    row.update(values)
    return row


def record_problem(store: Store, unit, status: str, message: str) -> None:
    """A unit that failed or is not of its kind: recorded with no checkpoint to
    resume from (the next run reads it whole once it changes)."""
    with store.transaction():
        store.upsert_row(
            "parsed_files",
            unit_row(unit, status, Checkpoint(status=status, token=unit.token), error_message=message),
            ("server", "agent_id", "file_path"),
        )


def in_transaction(store: Store, label: str, work: Callable[["ImportReport"], None],
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


def import_one(store: Store, unit: Unit, ready: Prefetched | None = None) -> "ImportReport":
    """One unit in one transaction (``ready``: see import_unit)."""

    def work(part: ImportReport) -> None:
        # Read again under the write lock: another importer may have taken
        # this unit since the listing.
        row = store.parsed_file(unit.server, unit.agent_id, unit.key)
        if unchanged(row, unit.token):
            part.files_unchanged = 1
        else:
            import_unit(store, unit, Checkpoint.from_row(row), part, ready)

    return in_transaction(store, unit.key, work)
