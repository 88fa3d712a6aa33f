"""The snapshot: a read-only SQLite file for Datasette, built from either store.

``export_snapshot`` copies the archive's tables, adds local-time columns
(``day``, ``local_time``) in a chosen time zone, builds the full-text index
(``messages_fts``, see search.py), the indexes the explorer's facets and sorts
need, runs ANALYZE and writes the counts file for ``datasette -i
--inspect-file``. It builds into a temporary file beside the target and
renames it into place, so a Datasette serving the old snapshot never sees
half a file. The snapshot is derived and disposable: rebuilt whole each time.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from . import schema
from .search import TOKENIZE, index_text
from .store import Dialect, Store, StoreError, default_db_path

BATCH = 2000
# Tables copied into the snapshot, in this order; the archive's bookkeeping
# (_migrations) stays behind.
TABLES = ("sessions", "messages", "tool_calls", "entries", "entry_revisions", "parsed_files", "session_index")
# Local-time columns added after the UTC column they derive from.
LOCAL_COLUMNS = {
    "messages": "timestamp",
    "tool_calls": "timestamp",
    "sessions": "last_message_at",
}
# Indexes for the explorer: the design's, plus every facet and sort of metadata.yml.
SNAPSHOT_INDEXES = {
    "messages": [("agent_id", "timestamp"), ("day",), ("server",), ("role",), ("first_tool_call",), ("model",),
                 ("provider",), ("has_thinking",), ("is_error",), ("session_id", "seq"), ("timestamp",),
                 ("agent_id", "day"), ("is_synthetic",)],
    "tool_calls": [("agent_id", "timestamp"), ("day",), ("server",), ("tool_name",), ("is_error",),
                   ("session_id",), ("timestamp",), ("message_id",), ("agent_id", "day")],
    "sessions": [("server",), ("agent_id",), ("session_type",), ("last_message_at",), ("day",),
                 ("session_uuid",)],
    "entries": [("session_id", "seq"), ("entry_type",), ("custom_type",)],
    "parsed_files": [("server", "agent_id"), ("status",)],
}


@dataclass
class ExportReport:
    path: str
    timezone: str
    rows: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    elapsed_s: float = 0.0

    def summary(self) -> str:
        counts = ", ".join(f"{n} {t}" for t, n in self.rows.items() if t in ("sessions", "messages", "tool_calls"))
        return (f"snapshot {self.path}: {counts}; {self.bytes / 2**20:.1f} MB; "
                f"time zone {self.timezone}; {self.elapsed_s:.1f} s")


def local_zone_name() -> str:
    """The machine's IANA time zone: $TZ, /etc/localtime's link, /etc/timezone, else UTC."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        return tz
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    try:
        name = Path("/etc/timezone").read_text().strip()
        if name:
            return name
    except OSError:
        pass
    return "UTC"


def resolve_zone(name: str | None) -> tuple[str, ZoneInfo | timezone]:
    name = name or local_zone_name()
    if name.upper() in ("UTC", "Z", "ETC/UTC"):
        return "UTC", timezone.utc
    try:
        return name, ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise StoreError(f"unknown time zone {name!r}: use an IANA name such as Asia/Shanghai or UTC") from None


def default_snapshot_path() -> Path:
    return default_db_path().parent / "snapshot.db"


def snapshot_path_for(store: Store) -> Path:
    """Where a store's snapshot goes unless told: snapshot.db beside a SQLite
    store's file (so two archives never share one), else beside the embedded
    default."""
    if store.kind == "sqlite":
        return Path(store.location).parent / "snapshot.db"
    return default_snapshot_path()


class LocalTime:
    """UTC 'YYYY-MM-DD HH:MM:SS.fff' -> the same in a time zone (cached per hour)."""

    def __init__(self, zone):
        self.zone = zone
        self.offsets: dict[str, timedelta] = {}

    def __call__(self, utc: str | None) -> str | None:
        if not utc:
            return None
        hour = utc[:13]
        offset = self.offsets.get(hour)
        if offset is None:
            try:
                dt = datetime.fromisoformat(hour + ":00:00").replace(tzinfo=timezone.utc)
                offset = dt.astimezone(self.zone).utcoffset() or timedelta(0)
            except (ValueError, OverflowError):
                return None
            self.offsets[hour] = offset
        if not offset:
            return utc
        try:
            local = datetime.fromisoformat(utc) + offset
        except (ValueError, OverflowError):
            return None
        return local.isoformat(sep=" ", timespec="milliseconds")


def message_search_text(content_blocks: str | None, fallback: str | None) -> str:
    """Everything searchable in a message: text, thinking, tool call arguments
    and tool results (their text), in block order."""
    if content_blocks is None:
        return fallback or ""
    try:
        content = orjson.loads(content_blocks)
    except orjson.JSONDecodeError:
        return fallback or ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                parts.append(block["thinking"])
            elif kind == "toolCall":
                name = block.get("name")
                if isinstance(name, str):
                    parts.append(name)
                args = block.get("arguments")
                if isinstance(args, dict):
                    parts.extend(v if isinstance(v, str) else orjson.dumps(v).decode() for v in args.values())
                elif args is not None:
                    parts.append(orjson.dumps(args).decode())
            elif kind == "toolResult":
                inner = block.get("content")
                if isinstance(inner, str):
                    parts.append(inner)
                elif isinstance(inner, list):
                    parts.extend(b["text"] for b in inner if isinstance(b, dict) and isinstance(b.get("text"), str))
    if not parts and fallback:
        parts.append(fallback)
    return "\n".join(parts)


# Archive-internal columns the explorer has no use for: the rebuildable JSON
# envelope of messages (details, usage... its content is in content_blocks)
# stays in the store, which keeps the snapshot about a third smaller.
LEFT_OUT = {"messages": {"raw_json", "raw_hash", "call_key"}, "entries": {"raw_hash"}}


def _snapshot_columns(table: str) -> list[tuple[str, str]]:
    columns = [c for c in schema.TABLES[table] if c[0] not in LEFT_OUT.get(table, ())]
    after = LOCAL_COLUMNS.get(table)
    if after:
        at = [c for c, _ in columns].index(after) + 1
        columns[at:at] = [("day", "str:10"), ("local_time", "datetime")]
    return columns


def search_rows(batch: list[tuple]) -> list[tuple[int, str]]:
    """(rowid, indexed text) for (id, content_blocks, text_preview) rows; runs
    in a worker process while the main one writes (module level: picklable)."""
    out = []
    for row_id, content, preview in batch:
        text = message_search_text(content, preview)
        if text:
            out.append((row_id, index_text(text)))
    return out


class _SearchFeeder:
    """Prepares search text on the other core, a few batches ahead at most
    (bounded memory), and writes it into messages_fts in order."""

    def __init__(self, fts: sqlite3.Cursor):
        self.fts = fts
        self.pending: deque = deque()
        self.pool = None
        if (os.cpu_count() or 1) > 1:
            try:
                self.pool = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn").Pool(1)
            except (OSError, ValueError):  # no processes here: do it inline
                self.pool = None

    def add(self, batch: list[tuple]) -> None:
        if self.pool is None:
            self._write(search_rows(batch))
            return
        self.pending.append(self.pool.apply_async(search_rows, (batch,)))
        while len(self.pending) > 2:
            self._write(self.pending.popleft().get())

    def _write(self, rows: list[tuple[int, str]]) -> None:
        if rows:
            self.fts.executemany("INSERT INTO messages_fts (rowid, body) VALUES (?, ?)", rows)

    def close(self) -> None:
        try:
            while self.pending:
                self._write(self.pending.popleft().get())
        finally:
            if self.pool is not None:
                self.pool.terminate()
                self.pool.join()


def _copy_table(store: Store, out: sqlite3.Connection, table: str, to_local: LocalTime,
                fts: "_SearchFeeder | None") -> int:
    have = set(store.columns(table))
    snap_cols = [c for c, _ in _snapshot_columns(table) if c in have or c in ("day", "local_time")]
    select_cols = [c for c in snap_cols if c not in ("day", "local_time")]
    local_from = LOCAL_COLUMNS.get(table)
    insert = Dialect().insert(table, snap_cols)
    positions = {c: i for i, c in enumerate(select_cols)}
    ts_at = positions.get(local_from) if local_from else None
    content_at = positions.get("content_blocks")
    preview_at = positions.get("text_preview")
    # where day and local_time go in the snapshot row (they follow ts_at)
    split = ts_at + 1 if ts_at is not None else None
    select = f"SELECT {', '.join(f'[{c}]' for c in select_cols)} FROM [{table}] WHERE id > ? ORDER BY id LIMIT {BATCH}"
    last = 0
    count = 0
    while True:
        rows = store.query(select, (last,))
        if not rows:
            break
        if fts is not None:
            fts.add([(row[0], row[content_at], row[preview_at]) for row in rows])
        batch = []
        for row in rows:
            values = tuple(row)
            if split is not None:
                local = to_local(values[ts_at])
                values = values[:split] + (local[:10] if local else None, local) + values[split:]
            batch.append(values)
        out.executemany(insert, batch)
        count += len(rows)
        last = rows[-1][0]
    return count


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(4 * 2**20), b""):
            h.update(chunk)
    return h.hexdigest()


def inspect_path(snapshot: Path) -> Path:
    """The counts file beside a snapshot: ``snapshot.db`` -> ``snapshot-inspect.json``."""
    return snapshot.with_name(snapshot.stem + "-inspect.json")


def export_snapshot(store: Store, output: str | os.PathLike | None = None, timezone: str | None = None,
                    progress=None) -> ExportReport:
    """Build the snapshot at ``output`` (default: snapshot.db beside the embedded store)."""
    started = time.perf_counter()
    target = Path(output).expanduser() if output else snapshot_path_for(store)
    zone_name, zone = resolve_zone(timezone)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
        if leftover.exists():
            leftover.unlink()
    report = ExportReport(str(target), zone_name)
    out = sqlite3.connect(str(tmp), isolation_level=None)
    try:
        out.execute("PRAGMA page_size = 16384")
        out.execute("PRAGMA journal_mode = OFF")  # a temporary file: a failure discards it whole
        out.execute("PRAGMA synchronous = OFF")
        out.execute("PRAGMA cache_size = -65536")
        dialect = Dialect()
        out.execute("BEGIN")
        for table in TABLES:
            out.execute(dialect.create_table(table, _snapshot_columns(table), []))
        out.execute(f"CREATE VIRTUAL TABLE messages_fts USING fts5(body, content='', tokenize='{TOKENIZE}')")
        out.execute("CREATE TABLE agentbase_snapshot (key TEXT PRIMARY KEY, value TEXT)")
        # Fewer, larger merges while loading; 'optimize' merges all at the end.
        out.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 16)")
        to_local = LocalTime(zone)
        for table in TABLES:
            if progress:
                progress(table)
            feeder = _SearchFeeder(out.cursor()) if table == "messages" else None
            try:
                report.rows[table] = _copy_table(store, out, table, to_local, feeder)
            finally:
                if feeder is not None:
                    feeder.close()
        for table, indexes in SNAPSHOT_INDEXES.items():
            for cols in indexes:
                name = f"idx_{table}_{'_'.join(cols)}"
                out.execute(f"CREATE INDEX [{name}] ON [{table}] ({', '.join(f'[{c}]' for c in cols)})")
        out.executemany(
            "INSERT INTO agentbase_snapshot (key, value) VALUES (?, ?)",
            [("exported_at", datetime.now(tz=None).astimezone().isoformat(timespec="seconds")),
             ("timezone", zone_name), ("source", store.location)],
        )
        out.execute("COMMIT")
        out.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
        out.execute("ANALYZE")
        out.close()
        out = None
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        counts = {"hash": _file_sha256(tmp), "size": tmp.stat().st_size, "file": target.name,
                  "tables": {t: {"count": n} for t, n in report.rows.items()}}
        inspect_file = inspect_path(target)
        inspect_tmp = inspect_file.with_name(f".{inspect_file.name}.tmp-{os.getpid()}")
        inspect_tmp.write_text(json.dumps({target.stem: counts}, indent=2))
        os.replace(tmp, target)
        os.replace(inspect_tmp, inspect_file)
    except BaseException:
        if out is not None:
            out.close()
        for leftover in (tmp,):
            if leftover.exists():
                leftover.unlink()
        raise
    report.bytes = target.stat().st_size
    report.elapsed_s = time.perf_counter() - started
    return report
