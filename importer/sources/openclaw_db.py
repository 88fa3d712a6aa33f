"""OpenClaw's SQLite store (2026.8+): reading it safely, read-only. A helper of
the OpenClaw kinds (openclaw_store.py; openclaw.py for its zstd archives).

Since OpenClaw 2026.8.1 transcripts live in one SQLite database per agent,
``<state>/agents/<agent>/agent/openclaw-agent.sqlite`` (FORMAT.md section 9).
This module finds those stores and reads what the importer needs from them;
it never writes to them and never touches the archive (``sources/openclaw_store.py`` turns
what it returns into rows, through the same parser as JSONL lines).

- **Finding stores**: ``agents/*/agent/openclaw-agent.sqlite`` (never the
  ``incognito-openclaw-agent.sqlite`` sentinel), plus agents with a custom
  folder, listed in ``<state>/state/openclaw.sqlite`` table ``agent_databases``
  (paths relative to the state dir, or absolute).
- **Opening** (``readonly.py``): ``file:<path>?mode=ro`` with a busy timeout and ``PRAGMA
  query_only``; ``immutable=1`` only as a fallback when no ``-wal`` file
  exists. Every read is a short statement: events are paged by ``seq``
  (keyset), so the gateway's checkpoints are never held up. An authorizer only
  lets the connection read the tables listed in :data:`READABLE_TABLES`: the
  ``auth_profile_*`` credential tables (and every other table) are refused by
  SQLite itself, not just left out of the queries.
- **Layouts**, detected by the tables and columns present (never by version
  number alone; columns are selected by name): schema 1 has no transcripts;
  prerelease schemas 4-13 keep metadata in ``sessions``/``session_entries``;
  schema 14+ in ``session_windows``/``session_nodes``; schema 23+ may store an
  event as ``event_zstd`` (one zstd frame, no dictionary, exactly
  ``event_utf8_bytes`` of UTF-8) instead of ``event_json``.
- **Events** of a session come from ``transcript_events`` in ``seq`` order,
  or, for a session moved to cold storage (schema 20+), from its archive: a
  zstd stream of JSON records, a file under ``sessions/cold/`` or the embedded
  blob, checked against its sha256, byte size, event count and last seq; only
  ``kind == "event"`` records are transcript lines.
- **Deleted and reset sessions** are whole JSONL texts in
  ``session_transcript_archives`` (``identity`` or ``zstd``, sha256-checked).
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

import orjson

from ..units import SourceError as _SourceError
from . import readonly

AGENT_DB_NAME = "openclaw-agent.sqlite"
INCOGNITO_DB_NAME = "incognito-openclaw-agent.sqlite"
BUSY_TIMEOUT_S = 10.0  # how long a read waits for the gateway's lock
PAGE_EVENTS = 64  # events per keyset page: one short read each
MAX_EVENT_BYTES = 4 * 1024 * 1024  # OpenClaw's bound for a compressed event

# The only tables a source connection may read. Everything else, the
# auth_profile_* credential tables first, is refused by the authorizer.
READABLE_TABLES = frozenset({
    "schema_meta",
    "transcript_events",
    "session_windows", "session_nodes",  # schema 14+
    "sessions", "session_entries",  # prerelease schemas 4-13
    "transcript_rewrite_watermarks", "session_transcript_generations",  # 13+ (the older name first)
    "session_transcript_archives", "session_transcript_cold_archives",
    "agent_databases",  # state/openclaw.sqlite
})


class SourceError(_SourceError):
    """A store (or one of its archives) that cannot be read as expected.

    Messages name tables, session ids, sequence numbers and sizes only, never
    transcript content.
    """


# ---------------------------------------------------------------------------
# Opening


def connect_readonly(path: str | os.PathLike, timeout: float | None = None) -> sqlite3.Connection:
    """A read-only connection to an OpenClaw database that may be in use,
    allowed to read :data:`READABLE_TABLES` only (``readonly.py``: ``mode=ro``,
    ``immutable=1`` only as its fallback)."""
    return readonly.connect(path, READABLE_TABLES, BUSY_TIMEOUT_S if timeout is None else timeout, error=SourceError)


# ---------------------------------------------------------------------------
# Finding stores


def registered_stores(state_db: str | os.PathLike, state_dir: str) -> list[tuple[str, str]]:
    """(agent id, absolute path) from a state database (``<state>/state/openclaw.sqlite``,
    or a local copy of it: ``state_db``) ``agent_databases``; paths are relative
    to ``state_dir`` (the state dir's path where the store is: maybe another
    server's); empty when there is no such table."""
    db = Path(state_db)
    if not db.is_file():
        return []
    try:
        conn = connect_readonly(db)
    except SourceError:
        return []
    try:
        if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agent_databases'"
        ).fetchall():
            return []
        rows = conn.execute("SELECT agent_id, path FROM agent_databases ORDER BY agent_id, path").fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    out = []
    for agent_id, stored in rows:
        if not isinstance(agent_id, str) or not isinstance(stored, str) or not stored:
            continue
        path = stored if stored.startswith("/") else posixpath.join(state_dir, stored)
        if posixpath.basename(stored) == INCOGNITO_DB_NAME:
            continue
        out.append((agent_id, posixpath.normpath(path)))
    return out


def artifact_dir(db_path: str | os.PathLike) -> Path:
    """Where OpenClaw publishes a store's files: ``agents/<id>/sessions`` for
    ``agents/<id>/agent/openclaw-agent.sqlite``, else the store's own folder."""
    store_dir = Path(db_path).parent
    return store_dir.parent / "sessions" if store_dir.name == "agent" else store_dir


# ---------------------------------------------------------------------------
# Layout


@dataclass
class Layout:
    user_version: int
    schema_version: int | None  # schema_meta (primary row), when present
    columns: dict[str, set[str]] = field(default_factory=dict)  # readable tables present -> columns

    def has(self, table: str, *columns: str) -> bool:
        cols = self.columns.get(table)
        return cols is not None and all(c in cols for c in columns)

    @property
    def has_events(self) -> bool:
        return self.has("transcript_events", "session_id", "seq", "event_json")

    @property
    def has_zstd(self) -> bool:
        return self.has("transcript_events", "event_zstd", "event_utf8_bytes")

    @property
    def kind(self) -> str:
        """``windows`` (14+), ``prerelease`` (4-13), ``events`` (transcripts
        without a known metadata table) or ``none`` (schema 1: no transcripts)."""
        if not self.has_events:
            return "none"
        if self.has("session_windows", "session_id"):
            return "windows"
        if self.has("sessions", "session_id"):
            return "prerelease"
        return "events"

    @property
    def watermark_table(self) -> str | None:
        for table in ("transcript_rewrite_watermarks", "session_transcript_generations"):
            if self.has(table, "session_id", "generation"):
                return table
        return None


def detect_layout(conn: sqlite3.Connection) -> Layout:
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        layout = Layout(user_version=conn.execute("PRAGMA user_version").fetchone()[0], schema_version=None)
        for table in sorted(names & READABLE_TABLES):
            if table.startswith("sqlite_"):
                continue
            layout.columns[table] = {r[1] for r in conn.execute(f"PRAGMA table_info([{table}])")}
        if layout.has("schema_meta", "schema_version"):
            where = " WHERE meta_key = 'primary'" if layout.has("schema_meta", "meta_key") else ""
            row = conn.execute(f"SELECT schema_version FROM schema_meta{where} LIMIT 1").fetchone()
            layout.schema_version = row[0] if row and isinstance(row[0], int) else None
    except sqlite3.Error as exc:
        raise SourceError(f"cannot read the schema: {exc}") from None
    return layout


# ---------------------------------------------------------------------------
# What a store holds


@dataclass
class ColdArchive:
    session_id: str
    generation: str | None
    archive_name: str
    archive_sha256: str
    event_count: int
    archive_bytes: int | None
    last_seq: int
    archived_at: int | None
    storage: str  # file / sqlite


@dataclass
class SessionUnit:
    """One session's events: hot rows in transcript_events, or a cold archive."""

    session_id: str
    last_seq: int
    count: int
    updated_ms: int  # newest event or transcript mutation time (epoch ms)
    generation: str | None  # the rewrite watermark
    cold: ColdArchive | None = None
    hot: bool = True  # has rows in transcript_events


@dataclass
class TranscriptArchive:
    """A deleted or reset session kept whole in session_transcript_archives."""

    session_id: str
    generation: str
    session_key: str | None
    reason: str | None
    encoding: str
    archive_sha256: str | None
    archive_name: str
    created_ms: int
    size: int


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def session_units(conn: sqlite3.Connection, layout: Layout) -> list[SessionUnit]:
    """Every session with events, hot or cold, ordered by session id."""
    if not layout.has_events:
        return []
    try:
        marks: dict[str, str] = {}
        table = layout.watermark_table
        if table:
            marks = {r[0]: r[1] for r in conn.execute(f"SELECT session_id, generation FROM [{table}]")}
        created = "MAX(created_at)" if layout.has("transcript_events", "created_at") else "0"
        units: dict[str, SessionUnit] = {}
        for sid, last_seq, count, newest in conn.execute(
            f"SELECT session_id, MAX(seq), COUNT(*), {created} FROM transcript_events GROUP BY session_id"
        ):
            if isinstance(sid, str) and isinstance(last_seq, int):
                units[sid] = SessionUnit(sid, last_seq, count, _int(newest) or 0, marks.get(sid))
        if layout.has("session_windows", "session_id", "transcript_updated_at"):
            for sid, updated in conn.execute("SELECT session_id, transcript_updated_at FROM session_windows"):
                unit = units.get(sid)
                if unit is not None and _int(updated) and updated > unit.updated_ms:
                    unit.updated_ms = updated
        cold_cols = ("session_id", "archive_name", "archive_sha256", "event_count", "last_seq", "storage")
        if layout.has("session_transcript_cold_archives", *cold_cols):
            cols = layout.columns["session_transcript_cold_archives"]
            opt = [c if c in cols else f"NULL AS {c}" for c in ("generation", "archive_bytes", "archived_at")]
            for row in conn.execute(
                f"SELECT {', '.join(cold_cols)}, {', '.join(opt)} FROM session_transcript_cold_archives"
            ):
                sid, name, sha, count, last_seq, storage, generation, nbytes, archived = row
                if not isinstance(sid, str) or not isinstance(last_seq, int) or not isinstance(name, str):
                    continue
                cold = ColdArchive(sid, generation, name, sha or "", _int(count) or 0, _int(nbytes),
                                   last_seq, _int(archived), storage or "")
                unit = units.get(sid)
                if unit is None:
                    units[sid] = SessionUnit(sid, last_seq, cold.event_count, cold.archived_at or 0,
                                             marks.get(sid, generation), cold, hot=False)
                else:  # restored while being archived: read both, archive first
                    unit.cold = cold
                    unit.count += cold.event_count
                    unit.last_seq = max(unit.last_seq, last_seq)
    except sqlite3.Error as exc:
        raise SourceError(f"cannot list transcript sessions: {exc}") from None
    return [units[k] for k in sorted(units)]


def transcript_archives(conn: sqlite3.Connection, layout: Layout) -> list[TranscriptArchive]:
    need = ("session_id", "generation", "encoding", "archive_blob", "archive_name")
    if not layout.has("session_transcript_archives", *need):
        return []
    cols = layout.columns["session_transcript_archives"]
    opt = [c if c in cols else f"NULL AS {c}" for c in ("session_key", "reason", "archive_sha256", "created_at")]
    try:
        rows = conn.execute(
            f"SELECT session_id, generation, encoding, archive_name, length(archive_blob), {', '.join(opt)} "
            "FROM session_transcript_archives ORDER BY created_at, archive_name"
            if "created_at" in cols else
            f"SELECT session_id, generation, encoding, archive_name, length(archive_blob), {', '.join(opt)} "
            "FROM session_transcript_archives ORDER BY archive_name"
        ).fetchall()
    except sqlite3.Error as exc:
        raise SourceError(f"cannot list session_transcript_archives: {exc}") from None
    out = []
    for sid, gen, encoding, name, size, key, reason, sha, created in rows:
        if not isinstance(sid, str) or not isinstance(name, str) or "/" in name or "\\" in name:
            continue
        out.append(TranscriptArchive(sid, str(gen), key, reason, encoding or "identity", sha, name,
                                     _int(created) or 0, _int(size) or 0))
    return out


# ---------------------------------------------------------------------------
# Reading events


def _zstd():
    """The zstandard module, imported when a compressed event or archive is first read (most runs
    read none: it is not paid at start-up)."""
    import zstandard

    return zstandard


def _decode_zstd_event(blob: bytes, nbytes: int | None) -> bytes:
    """A compressed event's bytes; ValueError (a zstd error too) when it does not decode to them."""
    if not isinstance(nbytes, int) or not 0 < nbytes <= MAX_EVENT_BYTES:
        raise ValueError(f"event_utf8_bytes {nbytes!r} out of range")
    zstandard = _zstd()
    try:
        params = zstandard.get_frame_parameters(blob)
        if params.dict_id:
            raise ValueError("frame needs a dictionary")
        raw = zstandard.ZstdDecompressor().decompress(blob, max_output_size=nbytes)
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None
    if len(raw) != nbytes:
        raise ValueError(f"decodes to {len(raw)} bytes, expected {nbytes}")
    return raw


def iter_hot_events(conn: sqlite3.Connection, layout: Layout, session_id: str, after: int | None,
                    bad: list | None = None) -> Iterator[tuple[int, bytes]]:
    """(seq, event JSON bytes) of a session's rows with ``seq > after`` (all
    when ``after`` is None), in seq order, one short keyset page at a time.

    A compressed event that does not decode to exactly its declared size is
    skipped and its seq appended to ``bad``.
    """
    zcols = ", event_zstd, event_utf8_bytes" if layout.has_zstd else ", NULL, NULL"
    sql = (f"SELECT seq, CAST(event_json AS BLOB){zcols} FROM transcript_events "
           "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?")
    last = -(2 ** 63) if after is None else after
    while True:
        try:
            page = conn.execute(sql, (session_id, last, PAGE_EVENTS)).fetchall()
        except sqlite3.Error as exc:
            raise SourceError(f"cannot read transcript_events of session {session_id}: {exc}") from None
        for seq, text, blob, nbytes in page:
            last = seq
            if text is not None:
                yield seq, bytes(text)
                continue
            try:
                yield seq, _decode_zstd_event(bytes(blob or b""), nbytes)
            except ValueError:
                if bad is not None:
                    bad.append(seq)
        if len(page) < PAGE_EVENTS:
            return


def hot_event(conn: sqlite3.Connection, layout: Layout, session_id: str, seq: int) -> bytes | None:
    """One event's bytes (None when the row is gone or does not decode)."""
    zcols = ", event_zstd, event_utf8_bytes" if layout.has_zstd else ", NULL, NULL"
    try:
        row = conn.execute(f"SELECT CAST(event_json AS BLOB){zcols} FROM transcript_events "
                           "WHERE session_id = ? AND seq = ?", (session_id, seq)).fetchone()
    except sqlite3.Error as exc:
        raise SourceError(f"cannot read transcript_events of session {session_id}: {exc}") from None
    if row is None:
        return None
    if row[0] is not None:
        return bytes(row[0])
    try:
        return _decode_zstd_event(bytes(row[1] or b""), row[2])
    except ValueError:
        return None


def _verified(data: bytes, sha256: str | None, size: int | None, what: str) -> bytes:
    if size is not None and len(data) != size:
        raise SourceError(f"{what}: {len(data)} bytes, expected {size}")
    if sha256 and hashlib.sha256(data).hexdigest() != sha256.lower():
        raise SourceError(f"{what}: sha256 mismatch")
    return data


def cold_archive_bytes(conn: sqlite3.Connection, db_path: str, cold: ColdArchive,
                       read_file: Callable[[str], bytes] | None = None) -> bytes:
    """The archive's compressed bytes, checked against its sha256 and size.

    A file archive is read with ``read_file(path)`` when given (a store on
    another server: the path is the server's), else from the local disk."""
    what = f"cold archive {cold.archive_name} of session {cold.session_id}"
    if cold.storage == "sqlite":
        try:
            row = conn.execute("SELECT archive_blob FROM session_transcript_cold_archives WHERE session_id = ?",
                               (cold.session_id,)).fetchone()
        except sqlite3.Error as exc:
            raise SourceError(f"{what}: {exc}") from None
        if row is None or row[0] is None:
            raise SourceError(f"{what}: no embedded blob")
        data = bytes(row[0])
    else:
        if not (len(cold.archive_name) > 9 and cold.archive_name.endswith(".jsonl.zst")
                and "/" not in cold.archive_name and "\\" not in cold.archive_name):
            raise SourceError(f"{what}: unexpected archive name")
        path = artifact_dir(db_path) / "cold" / cold.archive_name
        try:
            data = read_file(path.as_posix()) if read_file is not None else path.read_bytes()
        except OSError as exc:
            raise SourceError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    return _verified(data, cold.archive_sha256, cold.archive_bytes, what)


def iter_cold_events(data: bytes, cold: ColdArchive, after: int | None) -> Iterator[tuple[int, bytes]]:
    """(seq, event JSON bytes) of a cold archive's ``event`` records with
    ``seq > after``. The whole archive is checked: one header record for this
    session, ``event_count`` events, the last one at ``last_seq``; a mismatch
    raises :class:`SourceError` after the events (the caller's transaction then
    rolls back)."""
    what = f"cold archive {cold.archive_name} of session {cold.session_id}"
    count = 0
    last_seq = None
    header_seen = False
    for index, line in enumerate(iter_zstd_lines(data)):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise SourceError(f"{what}: record {index} is not JSON") from None
        kind = record.get("kind") if isinstance(record, dict) else None
        if kind == "header":
            if header_seen or index != 0 or record.get("sessionId") != cold.session_id:
                raise SourceError(f"{what}: unexpected header record {index}")
            header_seen = True
        elif kind == "event":
            row = record.get("row")
            seq = row.get("seq") if isinstance(row, dict) else None
            text = row.get("event_json") if isinstance(row, dict) else None
            if not isinstance(seq, int) or not isinstance(text, str):
                raise SourceError(f"{what}: malformed event record {index}")
            count += 1
            last_seq = seq
            if after is None or seq > after:
                yield seq, text.encode("utf-8", "surrogatepass")
        # identity / active / index / fts records: derived data, not transcript lines
    if not header_seen:
        raise SourceError(f"{what}: no header record")
    if count != cold.event_count or last_seq != cold.last_seq:
        raise SourceError(f"{what}: {count} events ending at seq {last_seq}, "
                          f"expected {cold.event_count} ending at {cold.last_seq}")


def transcript_archive_bytes(conn: sqlite3.Connection, archive: TranscriptArchive) -> bytes:
    """A deleted/reset archive's stored bytes (compressed when ``zstd``),
    checked against ``archive_sha256``."""
    what = f"archive {archive.archive_name}"
    try:
        row = conn.execute("SELECT archive_blob FROM session_transcript_archives WHERE session_id = ? "
                           "AND generation = ?", (archive.session_id, archive.generation)).fetchone()
    except sqlite3.Error as exc:
        raise SourceError(f"{what}: {exc}") from None
    if row is None or row[0] is None:
        raise SourceError(f"{what}: gone")
    data = row[0] if isinstance(row[0], bytes) else str(row[0]).encode("utf-8", "surrogatepass")
    if archive.encoding not in ("identity", "zstd"):
        raise SourceError(f"{what}: unknown encoding {archive.encoding!r}")
    return _verified(data, archive.archive_sha256, None, what)


# ---------------------------------------------------------------------------
# zstd streams (published archives, cold archives)


class ZstdReader(io.RawIOBase):
    """A zstd stream (one or more frames, with or without a content size) read
    as its decompressed bytes; corrupt input raises OSError."""

    def __init__(self, raw: BinaryIO):
        zstandard = _zstd()
        self._raw = raw
        self._error = zstandard.ZstdError
        self._reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        try:
            if size is None or size < 0:
                chunks = []
                while True:
                    chunk = self._reader.read(4 * 1024 * 1024)
                    if not chunk:
                        return b"".join(chunks)
                    chunks.append(chunk)
            return self._reader.read(size)
        except self._error as exc:
            raise OSError(f"corrupt zstd stream: {exc}") from None

    def seek(self, offset: int, whence: int = 0) -> int:
        if offset == 0 and whence == 0 and self._reader.tell() == 0:
            return 0
        raise OSError("a zstd stream can only be read from its start")

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._reader.close()
        finally:
            self._raw.close()
            super().close()


def iter_zstd_lines(data: bytes) -> Iterator[bytes]:
    """The ``\\n``-separated lines of a zstd stream, decoded chunk by chunk."""
    with ZstdReader(io.BytesIO(data)) as reader:
        rest = b""
        while True:
            chunk = reader.read(1024 * 1024)
            if not chunk:
                break
            data_ = rest + chunk
            start = 0
            while True:
                nl = data_.find(b"\n", start)
                if nl < 0:
                    break
                yield data_[start:nl]
                start = nl + 1
            rest = data_[start:]
        if rest:
            yield rest


# ---------------------------------------------------------------------------
# Session metadata


def _text(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) and value.strip() else None


def _entry(value: Any) -> dict:
    if not isinstance(value, str):
        return {}
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return {}
    return obj if isinstance(obj, dict) else {}


def session_metadata(conn: sqlite3.Connection, layout: Layout) -> dict[str, dict]:
    """Session id -> metadata, keyed by the archive's ``sessions`` column names.

    Times stay epoch milliseconds here (``started_ms``, ``ended_ms``,
    ``archived_ms``); absent values are None. Schema 14+: ``session_windows``
    (one row per transcript: reason, previous_session_id, status, started/ended,
    chat type, channel, model, display name, spawned by) with its node from
    ``session_nodes`` (label, display name, archived_at). Prerelease:
    ``sessions`` with ``session_entries.entry_json`` (label, display name,
    previousSessionId). Deleted/reset archives add their session key.
    """
    out: dict[str, dict] = {}
    try:
        if layout.kind == "windows":
            wcols = layout.columns["session_windows"]
            want = ("session_key", "previous_session_id", "reason", "started_at", "ended_at", "status",
                    "chat_type", "channel", "model_provider", "model", "display_name", "spawned_by")
            sel = ", ".join(f"w.{c}" if c in wcols else f"NULL AS {c}" for c in want)
            ncols = layout.columns.get("session_nodes", set())
            join = ""
            node = ("label", "display_name", "spawned_by", "archived_at")
            if "session_key" in ncols and "session_key" in wcols:
                nsel = ", ".join(f"n.{c} AS node_{c}" if c in ncols else f"NULL AS node_{c}" for c in node)
                join = " LEFT JOIN session_nodes n ON n.session_key = w.session_key"
            else:
                nsel = ", ".join(f"NULL AS node_{c}" for c in node)
            for row in conn.execute(f"SELECT w.session_id, {sel}, {nsel} FROM session_windows w{join}"):
                sid = row[0]
                if not isinstance(sid, str):
                    continue
                w = dict(zip(want, row[1:13]))
                n = dict(zip(node, row[13:]))
                out[sid] = {
                    "session_key": _text(w["session_key"], 255),
                    "previous_session_id": _text(w["previous_session_id"], 64),
                    "reason": _text(w["reason"], 32),
                    "status": _text(w["status"], 16),
                    "started_ms": _int(w["started_at"]),
                    "ended_ms": _int(w["ended_at"]),
                    "chat_type": _text(w["chat_type"], 32),
                    "channel": _text(w["channel"], 64),
                    "model_provider": _text(w["model_provider"], 64),
                    "model": _text(w["model"], 128),
                    "display_name": _text(w["display_name"], 255) or _text(n["display_name"], 255),
                    "spawned_by": _text(w["spawned_by"], 255) or _text(n["spawned_by"], 255),
                    "label": _text(n["label"], 255),
                    "archived_ms": _int(n["archived_at"]),
                }
        elif layout.kind == "prerelease":
            scols = layout.columns["sessions"]
            want = ("session_key", "started_at", "ended_at", "status", "chat_type", "channel",
                    "model_provider", "model", "display_name", "spawned_by")
            sel = ", ".join(f"s.{c}" if c in scols else f"NULL AS {c}" for c in want)
            entries: dict[str, tuple] = {}
            if layout.has("session_entries", "session_id", "entry_json"):
                ecols = layout.columns["session_entries"]
                order = " ORDER BY updated_at" if "updated_at" in ecols else ""
                key = "session_key" if "session_key" in ecols else "NULL"
                for sid, skey, entry in conn.execute(
                        f"SELECT session_id, {key}, entry_json FROM session_entries{order}"):
                    entries[sid] = (skey, entry)  # the newest entry of a session wins
            for row in conn.execute(f"SELECT s.session_id, {sel} FROM sessions s"):
                sid = row[0]
                if not isinstance(sid, str):
                    continue
                s = dict(zip(want, row[1:]))
                skey, raw = entries.get(sid, (None, None))
                e = _entry(raw)
                out[sid] = {
                    "session_key": _text(s["session_key"], 255) or _text(skey, 255),
                    "previous_session_id": _text(e.get("previousSessionId"), 64),
                    "reason": None,
                    "status": _text(s["status"], 16) or _text(e.get("status"), 16),
                    "started_ms": _int(s["started_at"]) or _int(e.get("startedAt")),
                    "ended_ms": _int(s["ended_at"]) or _int(e.get("endedAt")),
                    "chat_type": _text(s["chat_type"], 32) or _text(e.get("chatType"), 32),
                    "channel": _text(s["channel"], 64) or _text(e.get("channel") or e.get("lastChannel"), 64),
                    "model_provider": _text(s["model_provider"], 64) or _text(e.get("modelProvider"), 64),
                    "model": _text(s["model"], 128) or _text(e.get("model"), 128),
                    "display_name": _text(s["display_name"], 255) or _text(e.get("displayName"), 255),
                    "spawned_by": _text(s["spawned_by"], 255) or _text(e.get("spawnedBy"), 255),
                    "label": _text(e.get("label"), 255),
                    "archived_ms": _int(e.get("archivedAt")),
                }
    except sqlite3.Error as exc:
        raise SourceError(f"cannot read session metadata: {exc}") from None
    for archive in transcript_archives(conn, layout):
        meta = out.setdefault(archive.session_id, {})
        if not meta.get("session_key"):
            meta["session_key"] = _text(archive.session_key, 255)
    return out
