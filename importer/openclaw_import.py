"""Importing OpenClaw's SQLite stores (2026.8+): one agent database holds many
sessions, each imported through the same parser and writer as a JSONL file.

Reading the databases safely is openclaw_db.py's job; this module turns their
sessions and archives into import units and writes them.
"""

from __future__ import annotations

import itertools
import logging
import os

import orjson

from . import openclaw_db
from . import parser as P
from .reader import BlobSource
from .sources import SourceFile
from .store import RowRejected, Store
from .writer import (
    ImportReport, NotATranscript, SessionWriter, import_one, in_transaction, parsed_file_row, record_problem,
    unchanged,
)

log = logging.getLogger("agentbase")


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
                         unit: "openclaw_db.SessionUnit", previous, report: ImportReport,
                         read_file=None) -> None:
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
        data = openclaw_db.cold_archive_bytes(conn, db_path, unit.cold, read_file)
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
        parsed_file_row(source, "success", **{
            "file_size": unit.count, "error_message": None,  # a unit's size: its number of events
            "session_uuid": state.session_id or unit.session_id,
            "session_type": P.session_type_for(source.name),
            "parsed_offset": last_seq if last_seq is not None else unit.last_seq,
            "parsed_lines": state.next_line,
            "head_hash": generation, "tail_hash": tail_hash,
            "last_entry_id": state.last_entry_id, "legacy_format": int(state.legacy),
            "bad_lines": bad, "pending_lines": 0, "entries_read": entries_read,
        }),
        ("server", "agent_id", "file_path"),
    )


def _import_store_unit(store: Store, conn, layout, db_path: str, source: SourceFile,
                       unit: "openclaw_db.SessionUnit", read_file=None) -> ImportReport:
    """One store session in one transaction. ``read_file`` reads files beside
    the store (cold archives) when it is on another server."""

    def work(part: ImportReport) -> None:
        previous = store.parsed_file(source.server, source.agent_id, source.path)
        if _unit_unchanged(unit, previous):
            part.files_unchanged = 1
        else:
            import_store_session(store, conn, layout, db_path, source, unit, previous, part, read_file)

    return in_transaction(store, source.path, work)


def _record_db(store: Store, source: SourceFile, status: str, message: str | None, units: int) -> None:
    with store.transaction():
        store.upsert_row(
            "parsed_files",
            parsed_file_row(source, status, **{
                "error_message": message, "session_type": "openclaw_db", "parsed_offset": 0,
                "parsed_lines": units, "head_hash": None, "tail_hash": None,
                "bad_lines": 0, "pending_lines": 0,
            }),
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
                part = _import_store_unit(store, conn, layout, source.path, usrc, unit,
                                          getattr(source, "read_file", None))
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
            if unchanged(asrc, known.get(asrc.path)):
                report.files_unchanged += 1
                continue
            try:
                asrc.blob = openclaw_db.transcript_archive_bytes(conn, archive)
                part = import_one(store, asrc)
            except NotATranscript as exc:
                record_problem(store, asrc, "ignored", str(exc))
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
        record_problem(store, source, "failed", message)
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
