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

from . import derived
from . import parser as P
from . import shape
from .search import TOKENIZE, index_text
from .store import Dialect, Store, StoreError, default_db_path, private_file

BATCH = 2000
COUNT_COLUMN = shape.COUNT_COLUMN


def _tables() -> tuple[str, ...]:
    """The tables copied, in this order."""
    return tuple(shape.tables())


@dataclass
class ExportReport:
    path: str
    timezone: str
    rows: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    elapsed_s: float = 0.0
    secrets_redacted: int | None = None  # None: exported with --no-redact
    unchanged: bool = False  # if_changed: the snapshot already showed this store; nothing written

    def summary(self) -> str:
        if self.unchanged:
            return f"snapshot {self.path} unchanged: nothing new in the store since it was made"
        counts = ", ".join(f"{n} {t}" for t, n in self.rows.items() if t in ("sessions", "messages", "tool_calls"))
        redacted = ("credentials kept (--no-redact)" if self.secrets_redacted is None
                    else f"{self.secrets_redacted} credentials redacted")
        return (f"snapshot {self.path}: {counts}; {redacted}; {self.bytes / 2**20:.1f} MB; "
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


def redact_columns() -> dict[str, tuple[str, ...]]:
    """Table -> the columns the detector reads (pass 1: every credential value
    found in any of them goes into one set) and where its replacements are
    counted (the redactions table); from shape.py. Pass 2 replaces every value
    of the set in every text column of every table, these and the rest (a
    message's thinking_text, tool_calls_json and preview, cut from its
    content_blocks; a tool call's arguments, command and result, copied from
    its messages; an entry's preview; ids and paths). A message's text_preview
    is read and counted only when the message has no content_blocks."""
    return {name: t.redact for name, t in shape.tables().items() if t.redact}




def _snapshot_columns(table: str) -> list[tuple[str, str]]:
    return shape.columns(table)


def prepare_rows(table: str, names: tuple[str, ...], rows: list[tuple], redact: bool, fts: bool):
    """For rows of the snapshot's columns ``names``: the replaced values of
    each row that held a credential of the export's set (redact.installed(),
    pass 1's), where they were counted, and (messages) the text to index,
    from the replaced content. Runs in a worker process while the main one
    writes (module level: picklable). Returns (patches: [(index in rows,
    {column: value})], findings: [(table, row id, session id, column, kind,
    count)], fts rows)."""
    from . import redact as R

    secrets = R.installed() if redact else None
    patches: list[tuple[int, dict]] = []
    findings: list[tuple] = []
    fts_rows: list[tuple[int, str]] = []
    at = {c: i for i, c in enumerate(names)}
    content_at, preview_at, session_at = at.get("content_blocks"), at.get("text_preview"), at.get("session_id")
    redacted = R.redact_rows(secrets, table, names, rows, redact_columns()) if secrets else {}
    for index, row in enumerate(rows):
        got = redacted.get(index)
        patch = got[0] if got else {}
        if patch:
            patches.append((index, patch))
        if got:
            session = row[session_at] if session_at is not None else (row[0] if table == "sessions" else None)
            for column, counts in got[1]:
                for kind, n in counts.items():
                    findings.append((table, row[0], session, column, kind, n))
        if fts:
            content = patch.get("content_blocks", row[content_at] if content_at is not None else None)
            preview = patch.get("text_preview", row[preview_at] if preview_at is not None else None)
            text = message_search_text(content, preview)
            if text:
                fts_rows.append((row[0], index_text(text)))
    return patches, findings, fts_rows


def search_rows(batch: list[tuple]) -> list[tuple[int, str]]:
    """(rowid, indexed text) for (id, content_blocks, text_preview) rows; runs
    in a worker process while the main one writes (module level: picklable)."""
    out = []
    for row_id, content, preview in batch:
        text = message_search_text(content, preview)
        if text:
            out.append((row_id, index_text(text)))
    return out


class _Preparer:
    """Redacts rows and prepares search text on the other core, a few batches
    ahead at most (bounded memory); the main process writes each batch, in
    order, once its result is back."""

    def __init__(self, out: sqlite3.Connection, redact: bool):
        self.out = out
        self.redact = redact
        self.pending: deque = deque()
        self.pool = None
        # message id -> its redacted preview, for the tool calls it answers
        self.previews: dict[int, str | None] = {}
        if (os.cpu_count() or 1) > 1:
            try:
                self.pool = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn").Pool(1)
            except (OSError, ValueError):  # no processes here: do it inline
                self.pool = None

    def collect(self, store: Store):
        """Pass 1: every credential value in the store (the worker reads half
        of the messages, see redact.collect), then the set goes to the worker."""
        from . import redact as R

        secrets = R.collect(store, redact_columns(), self.pool)
        R.install_set(secrets)
        if self.pool is not None:  # (the worker runs its tasks in order: this one before the rows)
            self.pending.append(([], lambda rows, result: None, self.pool.apply_async(R.install, (secrets.values(),))))
        return secrets

    def add(self, table: str, names: tuple, rows: list, write, text_cols=None) -> None:
        from . import redact as R

        fts = table == "messages"
        redact = self.redact and bool(R.installed())  # (nothing to replace in a store without credentials)
        if not redact and not fts:
            write(rows, ([], [], []))
            return
        payload = rows
        # fewer values to send to the worker: the text columns, or only the search text's
        want = text_cols if redact else ("id", "content_blocks", "text_preview")
        if want is not None and len(want) < len(names):
            keep = [i for i, c in enumerate(names) if c in want]
            names = tuple(names[i] for i in keep)
            payload = [tuple(row[i] for i in keep) for row in rows]
        if self.pool is None:
            write(rows, prepare_rows(table, names, payload, redact, fts))
            return
        self.pending.append((rows, write, self.pool.apply_async(prepare_rows, (table, names, payload, redact, fts))))
        while len(self.pending) > 4:  # bounded memory: a few batches ahead at most
            self._finish_one()

    def _finish_one(self) -> None:
        rows, write, result = self.pending.popleft()
        write(rows, result.get())

    def drain(self) -> None:
        while self.pending:
            self._finish_one()

    def close(self) -> None:
        self.pending.clear()
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None


def _copy_table(store: Store, out: sqlite3.Connection, table: str, to_local: LocalTime,
                prep: _Preparer) -> int:
    have = set(store.columns(table))
    snap_cols = [c for c, _ in _snapshot_columns(table) if c in have or c in ("day", "local_time", COUNT_COLUMN)]
    select_cols = [c for c in snap_cols if c not in ("day", "local_time", COUNT_COLUMN)]
    local_from = shape.tables()[table].local_time_from
    # the count column goes last in the INSERT; the snapshot's column order is the table's
    insert_cols = [c for c in snap_cols if c != COUNT_COLUMN] + ([COUNT_COLUMN] if COUNT_COLUMN in snap_cols else [])
    insert = Dialect().insert(table, insert_cols)
    has_count = COUNT_COLUMN in snap_cols
    positions = {c: i for i, c in enumerate(select_cols)}
    ts_at = positions.get(local_from) if local_from else None
    # where day and local_time go in the snapshot row (they follow ts_at)
    split = ts_at + 1 if ts_at is not None else None
    names = tuple(select_cols)
    # what the worker needs of a row: its ids and its text (a number or a time holds no credential)
    types = dict(_snapshot_columns(table))
    text_cols = {c for c in select_cols if c in ("id", "session_id") or types.get(c, "").startswith("str")
                 or types.get(c) in ("text", "json")}
    redact = prep.redact
    previews = prep.previews
    result_id_at = positions.get("result_message_id")
    result_preview_at = positions.get("result_preview")
    select = f"SELECT {', '.join(f'[{c}]' for c in select_cols)} FROM [{table}] WHERE id > ? ORDER BY id LIMIT {BATCH}"
    count = 0

    def write(rows, result) -> None:
        patches, findings, fts_rows = result
        batch = [list(row) for row in rows] if patches or (table == "tool_calls" and previews) else rows
        for index, patch in patches:
            values = batch[index]
            for column, value in patch.items():
                values[positions[column]] = value
            if table == "messages" and "text_preview" in patch:
                previews[values[0]] = patch["text_preview"]
        if table == "tool_calls" and previews:
            for values in batch:
                rid = values[result_id_at]
                if rid in previews:
                    values[result_preview_at] = previews[rid]
        per_row: dict[int, int] = {}
        if has_count and table == "messages":
            for _t, row_id, _s, _column, _k, n in findings:
                per_row[row_id] = per_row.get(row_id, 0) + n
        zero = 0 if redact else None
        out_rows = []
        for values in batch:
            values = tuple(values)
            if split is not None:
                local = to_local(values[ts_at])
                values = values[:split] + (local[:10] if local else None, local) + values[split:]
            if has_count:
                values = values + (per_row.get(values[0], zero),)
            out_rows.append(values)
        out.executemany(insert, out_rows)
        if fts_rows:
            out.executemany(f"INSERT INTO {shape.FTS_TABLE} (rowid, {shape.FTS_COLUMN}) VALUES (?, ?)", fts_rows)
        if findings:
            out.executemany("INSERT INTO redactions VALUES (?, ?, ?, ?, ?, ?)", findings)

    last = 0
    while True:
        rows = store.tuples(select, (last,))
        if not rows:
            break
        prep.add(table, names, rows, write, text_cols)
        count += len(rows)
        last = rows[-1][0]
    prep.drain()
    return count


# Bump when the snapshot made from an unchanged store would differ (new
# columns, indexes, search text): a snapshot of another format is rebuilt.
SNAPSHOT_FORMAT = 3  # 2: credentials found anywhere are replaced everywhere; 3: the session list (derived.py)


def store_state(store: Store, zone_name: str, redact: bool) -> str:
    """A short digest that changes whenever a snapshot of ``store`` would:
    any committed import (each writes its file's parsed_files row, with the
    time it was parsed; a replaced entry gets a new id), a migration, the
    time zone, redaction, the code's version or snapshot format. Cheap: key
    maxima and one small table's count."""
    from . import __version__

    parts: list = [__version__, SNAPSHOT_FORMAT, zone_name, redact, store.location, store.schema_version()]
    for table in _tables():
        parts.append(store.tuples(f"SELECT MAX(id) FROM [{table}]")[0][0])
    parts.extend(store.tuples("SELECT COUNT(*), MAX(parsed_at), MAX(file_mtime_ns) FROM parsed_files")[0])
    parts.extend(store.tuples("SELECT COUNT(*), MAX(updated_at) FROM sessions")[0])
    return hashlib.sha256(orjson.dumps(parts, default=str)).hexdigest()[:32]


def _snapshot_state(path: Path) -> str | None:
    """The store state a snapshot was made from, or None (no file, not a
    snapshot, an older snapshot without one, unreadable)."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute(f"SELECT value FROM {shape.MARKER} WHERE key = 'store_state'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(4 * 2**20), b""):
            h.update(chunk)
    return h.hexdigest()


def remove_leftovers(target: Path) -> list[Path]:
    """Temporary files a killed export left beside ``target`` (its pid no longer
    runs, or this is it): removed, so they never pile up. Returns them."""
    gone = []
    for pattern in (f".{target.name}.tmp-*", f".{inspect_path(target).name}.tmp-*"):
        for leftover in target.parent.glob(pattern):
            pid = leftover.name.rsplit(".tmp-", 1)[-1].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and _running(int(pid)):
                continue  # another export's, still at work
            try:
                leftover.unlink()
                gone.append(leftover)
            except OSError:
                pass
    return gone


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def inspect_path(snapshot: Path) -> Path:
    """The counts file beside a snapshot: ``snapshot.db`` -> ``snapshot-inspect.json``."""
    return snapshot.with_name(snapshot.stem + "-inspect.json")


def export_snapshot(store: Store, output: str | os.PathLike | None = None, timezone: str | None = None,
                    progress=None, redact: bool = True, if_changed: bool = False) -> ExportReport:
    """Build the snapshot at ``output`` (default: snapshot.db beside the embedded store).

    ``redact`` (the default) replaces credentials in every transcript text
    with ``[REDACTED:<kind>]`` (see redact.py); the store keeps the originals.
    ``if_changed``: leave the snapshot as it is when it was made from this
    very store state, with the same time zone and redaction (see
    :func:`store_state`); the report then says ``unchanged``.
    """
    started = time.perf_counter()
    target = Path(output).expanduser() if output else snapshot_path_for(store)
    zone_name, zone = resolve_zone(timezone)
    # Taken before reading: a commit landing during the export changes the
    # state, so the next if_changed run rebuilds rather than miss it.
    try:
        state = store_state(store, zone_name, redact)
    except sqlite3.Error as exc:  # an unreadable store
        raise StoreError(f"export failed: {exc}; {target} is unchanged") from None
    inspect_file = inspect_path(target)
    if if_changed and inspect_file.is_file() and _snapshot_state(target) == state:
        report = ExportReport(str(target), zone_name, unchanged=True)
        report.bytes = target.stat().st_size
        report.elapsed_s = time.perf_counter() - started
        return report
    if redact:
        from . import redact as _load_detectors  # noqa: F401  (once, before the worker forks)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    inspect_tmp = inspect_file.with_name(f".{inspect_file.name}.tmp-{os.getpid()}")
    remove_leftovers(target)
    private_file(tmp)  # 0600 in a 0700 folder: the snapshot holds transcripts
    report = ExportReport(str(target), zone_name)
    out = sqlite3.connect(str(tmp), isolation_level=None)
    prep = None
    try:
        out.execute("PRAGMA page_size = 16384")
        out.execute("PRAGMA journal_mode = OFF")  # a temporary file: a failure discards it whole
        out.execute("PRAGMA synchronous = OFF")
        out.execute("PRAGMA cache_size = -65536")
        dialect = Dialect()
        out.execute("BEGIN")
        for table in _tables():
            out.execute(dialect.create_table(table, _snapshot_columns(table), []))
        out.execute(f"CREATE VIRTUAL TABLE {shape.FTS_TABLE} USING fts5({shape.FTS_COLUMN}, content='', "
                    f"tokenize='{TOKENIZE}')")
        out.execute(f"CREATE TABLE {shape.MARKER} (key TEXT PRIMARY KEY, value TEXT)")
        out.execute(shape.REDACTIONS_DDL)
        # Fewer, larger merges while loading; 'optimize' merges all at the end.
        # A 64 MB term buffer (the default is 1 MB) writes far fewer small
        # segments to merge: the index of a million messages in a quarter
        # less time (27 s -> 20 s here).
        fts = shape.FTS_TABLE
        out.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('automerge', 16)")
        out.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('hashsize', ?)", (64 * 2**20,))
        to_local = LocalTime(zone)
        prep = _Preparer(out, redact)
        if redact:
            if progress:
                progress("credentials")
            prep.collect(store)
        for table in _tables():
            if progress:
                progress(table)
            report.rows[table] = _copy_table(store, out, table, to_local, prep)
        prep.close()
        if redact:
            for cols in shape.REDACTIONS_INDEXES:
                out.execute(f"CREATE INDEX [{shape.index_name(shape.REDACTIONS, cols)}] "
                            f"ON {shape.REDACTIONS} ({', '.join(cols)})")
            out.execute(f"UPDATE sessions SET [{COUNT_COLUMN}] = COALESCE("
                        "(SELECT SUM(count) FROM redactions r WHERE r.session_id = sessions.id), 0)")
            report.secrets_redacted = out.execute(f"SELECT COALESCE(SUM(count), 0) FROM {shape.REDACTIONS}").fetchone()[0]
        report.rows["redactions"] = out.execute("SELECT COUNT(*) FROM redactions").fetchone()[0]
        report.rows[derived.TABLE] = derived.refresh_session_list(out)  # the session browser's (derived.py)
        for table in shape.tables().values():
            for cols in table.indexes:
                out.execute(f"CREATE INDEX [{shape.index_name(table.name, cols)}] ON [{table.name}] "
                            f"({', '.join(f'[{c}]' for c in cols)})")
        out.executemany(
            f"INSERT INTO {shape.MARKER} (key, value) VALUES (?, ?)",
            [("exported_at", datetime.now(tz=None).astimezone().isoformat(timespec="seconds")),
             ("timezone", zone_name), ("source", store.location), ("redacted", "yes" if redact else "no"),
             ("secrets_redacted", str(report.secrets_redacted) if redact else ""), ("store_state", state)],
        )
        out.execute("COMMIT")
        out.execute(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')")
        out.execute("ANALYZE")
        out.close()
        out = None
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        counts = {"hash": _file_sha256(tmp), "size": tmp.stat().st_size, "file": target.name,
                  "tables": {t: {"count": n} for t, n in report.rows.items()}}
        private_file(inspect_tmp)
        inspect_tmp.write_text(json.dumps({target.stem: counts}, indent=2))
        os.replace(tmp, target)
        os.replace(inspect_tmp, inspect_file)
    except BaseException as exc:
        if prep is not None:
            prep.close()
        if out is not None:
            out.close()
        for leftover in (tmp, inspect_tmp):
            if leftover.exists():
                leftover.unlink()
        if isinstance(exc, sqlite3.Error):  # the disk is full, the store is unreadable...
            raise StoreError(f"export failed: {exc}; {target} is unchanged") from None
        raise
    report.bytes = target.stat().st_size
    report.elapsed_s = time.perf_counter() - started
    return report
