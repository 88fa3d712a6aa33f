"""The snapshot: a read-only SQLite file for Datasette, built from either store
and then kept up to date in place.

``export_snapshot`` either **updates** the existing snapshot or **builds** a new
one. An update applies, in one transaction, what changed in the store since
the snapshot last saw it: the store's change log (store/sqlite.py) names the
sessions written since, and a row of theirs is copied again only when its
hash differs from the one the state file (snapshot_state.py) holds; tables of
no session (parsed_files, session_index...) are compared whole, which is
cheap. Rows the store no longer has go, with their full-text rows and
redaction counts. The snapshot is in WAL mode, so a Datasette reading it sees
the update whole or not at all. The result is the very snapshot a full build
would make (tests/test_snapshot_update.py compares them row by row).

A build copies every table (local-time columns in a chosen zone, credentials
redacted, see redact.py), builds the full-text indexes (``messages_fts``,
``tool_calls_fts``, see search.py), the indexes the explorer's facets and
sorts need and the derived tables, runs ANALYZE, into a temporary file renamed
into place. It happens when it must: no snapshot or state file yet, another
time zone, redaction setting, AgentBase version, snapshot format, store or
store schema, or ``full=True``.

Schema work goes through sqlite-utils (tables with their primary and foreign
keys, indexes); SQLite's generated columns and FTS5's contentless tables,
which it does not declare, are plain SQL beside it. Rows are copied with
sqlite3's ``executemany``: the same rows through sqlite-utils' ``insert_all``
take about three times as long (it builds a dict per row and checks types).
"""

from __future__ import annotations

import bisect
import json
import multiprocessing
import operator
import os
import re
import sqlite3
import stat
import time
import uuid
from array import array
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
import sqlite_utils

from . import derived, shape
from .search import TOKENIZE, copy_index, index_text, message_search_text, tool_call_search_text
from .search import decoded_json as _decoded
from .snapshot_state import State, row_hash, state_path
from .store import Store, StoreError, default_db_path, private_file, sqlite_path, sqlite_tables, what_is

BATCH = 2000
COUNT_COLUMN = shape.COUNT_COLUMN

SNAPSHOT_FORMAT = shape.FORMAT


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
    unchanged: bool = False  # nothing new in the store since the snapshot last saw it
    mode: str = "full"  # full (a new file) or update (in place)
    why_full: str | None = None  # what made a full build necessary
    changed: dict[str, int] = field(default_factory=dict)  # an update's rows written or removed, per table
    sessions_changed: int = 0

    def summary(self) -> str:
        if self.unchanged:
            return f"snapshot {self.path} unchanged: nothing new in the store since it was made"
        redacted = ("credentials kept (--no-redact)" if self.secrets_redacted is None
                    else f"{self.secrets_redacted} credentials redacted")
        counts = ", ".join(f"{n} {t}" for t, n in self.rows.items() if t in ("sessions", "messages", "tool_calls"))
        if self.mode == "update":
            changed = ", ".join(f"{n} {t}" for t, n in self.changed.items() if n) or "no rows"
            return (f"snapshot {self.path}: {counts}; updated in place ({self.sessions_changed} sessions changed: "
                    f"{changed} written or removed); {redacted}; {self.bytes / 2**20:.1f} MB; "
                    f"{self.elapsed_s:.2f} s")
        why = f" (built in full: {self.why_full})" if self.why_full else ""
        return (f"snapshot {self.path}: {counts}; {redacted}; {self.bytes / 2**20:.1f} MB; "
                f"time zone {self.timezone}; {self.elapsed_s:.1f} s{why}")


# -- where, and in which zone ---------------------------------------------------------------

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


class Offsets:
    """UTC 'YYYY-MM-DD HH:MM:SS.fff' -> the zone's offset from UTC at that time, in seconds
    (cached per hour); None for a value that is not a time. The snapshot's ``local_time``
    and ``day`` are computed from it (shape.generated)."""

    def __init__(self, zone):
        self.zone = zone
        self.cache: dict[str, int | None] = {}

    def __call__(self, utc) -> int | None:
        if not utc or not isinstance(utc, str):
            return None
        hour = utc[:13]
        try:
            return self.cache[hour]
        except KeyError:
            pass
        try:
            dt = datetime.fromisoformat(hour + ":00:00").replace(tzinfo=timezone.utc)
            offset = dt.astimezone(self.zone).utcoffset() or timedelta(0)
            value: int | None = int(offset.total_seconds())
        except (ValueError, OverflowError):
            value = None
        self.cache[hour] = value
        return value


class Millis:
    """UTC 'YYYY-MM-DD HH:MM:SS.fff' -> (milliseconds since 1970, None), the snapshot's stored form of
    a time column (shape.TIME_COLUMNS), or (None, the value) for one not of that form (kept as it
    is): only a value that the generated text column gives back exactly is stored as a number. The
    minute's start is cached; seconds and milliseconds are read as digits."""

    def __init__(self):
        self.minutes: dict[str, int | None] = {}

    def __call__(self, value) -> tuple[int | None, str | None]:
        if value is None:
            return None, None
        if value.__class__ is not str or len(value) != 23 or value[19] != "." or value[16] != ":":
            return None, value
        minute = value[:16]
        base = self.minutes.get(minute, -1)
        if base == -1:
            base = self.minutes[minute] = _minute_ms(minute)
        seconds, fraction = value[17:19], value[20:23]
        if base is None or not (seconds.isascii() and fraction.isascii() and seconds.isdigit()
                                and fraction.isdigit()) or seconds > "59":
            return None, value
        return base + int(seconds) * 1000 + int(fraction), None


def _minute_ms(minute: str) -> int | None:
    """'YYYY-MM-DD HH:MM' -> its milliseconds since 1970, when it is written exactly as SQLite's
    strftime writes it back (after 1970); else None."""
    try:
        dt = datetime.fromisoformat(minute + ":00")
    except ValueError:
        return None
    if dt.tzinfo is not None or dt.strftime("%Y-%m-%d %H:%M") != minute or dt.year < 1970:
        return None
    return (dt - datetime(1970, 1, 1)) // timedelta(milliseconds=1)


# -- a message's generated columns -------------------------------------------------------------

def _preview_path(content, preview: str) -> str | None:
    """A JSON path into the content whose first 512 characters are the preview, or None."""
    if isinstance(content, str):
        return "$" if content[:512] == preview else None
    if not isinstance(content, list):
        return None
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        for key in ("text", "thinking"):
            value = block.get(key)
            if isinstance(value, str) and value[:512] == preview:
                return f"$[{i}].{key}"
        inner = block.get("content")
        if isinstance(inner, str) and inner[:512] == preview:
            return f"$[{i}].content"
        if isinstance(inner, list):
            for j, sub in enumerate(inner):
                if isinstance(sub, dict) and isinstance(sub.get("text"), str) and sub["text"][:512] == preview:
                    return f"$[{i}].content[{j}].text"
    return None


def derive_message(content_blocks, decoded, preview, thinking, tool_calls) -> tuple:
    """The helper columns of a message's generated ones (shape.MESSAGE_DERIVED), from its final
    (redacted) values: (preview_path, preview_kept, thinking_block, thinking_kept, tool_calls_from,
    tool_calls_kept). Each expression is checked to give the value exactly; where it would not,
    the value itself is kept."""
    ppath = pkept = tblock = tkept = cfrom = ckept = None
    readable = decoded is not None
    if preview is not None:
        ppath = _preview_path(decoded, preview) if readable else None
        if ppath is None:
            pkept = preview
    if thinking is not None:
        if readable and isinstance(decoded, list):
            for i, block in enumerate(decoded):
                if isinstance(block, dict) and block.get("type") == "thinking" and block.get("thinking") == thinking:
                    tblock = i
                    break
        if tblock is None:
            tkept = thinking
    if tool_calls is not None:
        # '[' || substr(content_blocks, from): the tool-call blocks are the content's last ones
        if (isinstance(content_blocks, str) and tool_calls[:1] == "[" and len(tool_calls) > 1
                and content_blocks.endswith(tool_calls[1:])):
            cfrom = len(content_blocks) - len(tool_calls) + 2
        else:
            ckept = tool_calls
    return ppath, pkept, tblock, tkept, cfrom, ckept


# -- rows, in a worker process ------------------------------------------------------------

MESSAGE_TEXT = ("id", "content_blocks", "text_preview", "thinking_text", "tool_calls_json")


def prepare_rows(table: str, names: tuple[str, ...], rows: list[tuple], redact: bool, fts: bool):
    """For rows of the store's columns ``names``: the replaced values of
    each row that held a credential of the export's set (redact.installed(),
    pass 1's), where they were counted, and (messages) the text to index and
    the helpers of the generated columns, from the replaced content. Runs in
    a worker process while the main one writes (module level: picklable).
    Returns (patches: [(index in rows, {column: value})], findings: [(table,
    row id, session id, column, kind, count)], fts rows, derived: one tuple
    per row or None)."""
    from . import redact as R

    secrets = R.installed() if redact else None
    patches: list[tuple[int, dict]] = []
    findings: list[tuple] = []
    fts_rows: list[tuple[int, str]] = []
    derived: list[tuple] | None = [] if table == "messages" else None
    at = {c: i for i, c in enumerate(names)}
    content_at, preview_at, session_at = at.get("content_blocks"), at.get("text_preview"), at.get("session_id")
    thinking_at, calls_at = at.get("thinking_text"), at.get("tool_calls_json")
    redacted = R.redact_rows(secrets, table, names, rows, shape.redact_columns()) if secrets else {}
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
        if derived is not None:
            content = patch.get("content_blocks", row[content_at])
            preview = patch.get("text_preview", row[preview_at])
            decoded = _decoded(content)
            derived.append(derive_message(content, decoded, preview, patch.get("thinking_text", row[thinking_at]),
                                          patch.get("tool_calls_json", row[calls_at])))
            if fts:
                text = message_search_text(content, preview, decoded)
                if text:
                    fts_rows.append((row[0], index_text(text)))
    return patches, findings, fts_rows, derived


class _Preparer:
    """Redacts rows and prepares search text on the other core, a few batches
    ahead at most (bounded memory); the main process writes each batch, in
    order, once its result is back. ``parallel=False``: all in this process
    (an update's few rows are not worth a worker)."""

    def __init__(self, redact: bool, parallel: bool = True, fts_file: Path | None = None):
        self.redact = redact
        self.pending: deque = deque()
        self.pool = None
        self.indexing = False  # the worker writes the messages' index into fts_file
        self.closing = None  # and then completes it: the pending result
        if parallel and (os.cpu_count() or 1) > 1:
            try:
                self.pool = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn").Pool(1)
            except (OSError, ValueError):  # no processes here: do it inline
                self.pool = None
        if self.pool is not None and fts_file is not None:
            self.pool.apply(_worker_fts_open, (str(fts_file),))
            self.indexing = True

    def close_index(self) -> None:
        """Once the messages are all sent: the worker completes its index (commit, optimize) while
        this process copies the other tables."""
        if self.indexing:
            self.closing = self.pool.apply_async(_worker_fts_close)
            self.indexing = False

    def finish_index(self) -> bool:
        """The worker's index complete (optimized, closed); whether there is one to adopt."""
        self.close_index()
        if self.closing is None:
            return False
        self.drain()
        self.closing.get()
        self.closing = None
        return True

    def index(self, fts: str, rows: list[tuple[int, str]]) -> bool:
        """Have the worker index (rowid, text) rows into its file's ``fts``, after the batches before
        them; False (nothing sent) when it builds no index."""
        if not self.indexing:
            return False
        self._in_order(self.pool.apply_async(index_in_worker, (fts, rows)))
        return True

    def derive(self, snapshot: Path, path: Path):
        """Have the worker build the session list of the snapshot's committed rows in ``path``
        (session_list_in_worker), after the tasks before it; the pending result."""
        return self.pool.apply_async(session_list_in_worker, (str(path), str(snapshot)))

    def _in_order(self, result) -> None:
        """A worker task with no rows to write, waited for in its place among the batches."""
        self.pending.append(([], lambda rows, got: None, result))

    def install(self, secrets) -> None:
        """The set pass 2 replaces, here and in the worker."""
        from . import redact as R

        R.install_set(secrets)
        if self.pool is not None:  # (the worker runs its tasks in order: this one before the rows)
            self._in_order(self.pool.apply_async(R.install, (secrets.values(),)))

    def add(self, table: str, names: tuple, rows: list, write, text_cols=None) -> None:
        from . import redact as R

        fts = table == "messages"
        redact = self.redact and bool(R.installed())  # (nothing to replace in a store without credentials)
        if not redact and not fts:
            write(rows, ([], [], [], None))
            return
        payload = rows
        # fewer values to send to the worker: the text columns, or only the message's own
        want = text_cols if redact else MESSAGE_TEXT
        if want is not None and len(want) < len(names):
            keep = [i for i, c in enumerate(names) if c in want]
            names = tuple(names[i] for i in keep)
            payload = [tuple(row[i] for i in keep) for row in rows]
        if self.pool is None:
            write(rows, prepare_rows(table, names, payload, redact, fts))
            return
        work = prepare_and_index if self.indexing else prepare_rows
        self.pending.append((rows, write, self.pool.apply_async(work, (table, names, payload, redact, fts))))
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


# -- how each table is copied ---------------------------------------------------------------

@dataclass
class _Plan:
    """One table's copy: the store columns read, the snapshot's stored columns, which session a
    row belongs to (``id`` for sessions, ``session_id``, or None: a table of no session)."""

    name: str
    target: str  # the table its rows are stored in (shape.base_table: a view's base table)
    number: int  # the table's number in the state file
    select: tuple[str, ...]
    stored: tuple[str, ...]
    session_col: str | None
    local_from: str | None
    text_cols: frozenset

    @property
    def per_session(self) -> bool:
        return self.session_col is not None


def _plans(store: Store) -> list[_Plan]:
    out = []
    for number, (name, table) in enumerate(shape.tables().items()):
        have = store.columns(name)
        stored = [c for c, _ in shape.stored(name)]
        helpers = {c for c, _ in shape.helpers(name)} | {COUNT_COLUMN}
        wanted = [c for c in stored if c not in helpers]
        if name == "messages":  # the generated columns' values, checked against their expressions
            wanted += [c for c in shape.MESSAGE_DERIVED if c not in wanted]
        wanted += [c for c in shape.LINKED.get(name, ()) if c not in wanted]  # (and a view's, against the rows')
        wanted += [c for c in shape.TIME_COLUMNS.get(name, ()) if c not in wanted]  # (as milliseconds)
        select = ["id"] + [c for c in have if c in wanted and c != "id"]
        types = dict(shape.columns(name))
        types.update(dict(shape.columns(name)))
        text = frozenset(c for c in select if c in ("id", "session_id") or types.get(c, "").startswith("str")
                         or types.get(c) in ("text", "json"))
        session_col = "id" if name == "sessions" else ("session_id" if "session_id" in have else None)
        out.append(_Plan(name, shape.base_table(name), number, tuple(select), tuple(stored), session_col,
                         table.local_time_from, text))
    return out


def _shape_digest() -> str:
    """Changes whenever the snapshot's shape would: tables, columns, expressions, indexes, format, version."""
    from . import __version__

    parts = [__version__, shape.FORMAT, TOKENIZE, snapshot_facts()]
    for name, table in shape.tables().items():
        parts.append([name, shape.columns(name), sorted(shape.generated(name).items()), table.indexes, table.redact,
                      shape.view_sql(name) if name in shape.VIEWS else None])
    return row_hash(tuple(orjson.dumps(parts, default=str).decode()[i::7] for i in range(7))).__format__("x")


# -- the schema, through sqlite-utils -----------------------------------------------------------

_PY_TYPES = {"pk": int, "int": int, "bigint": int, "bool": int, "decimal": float, "float": float}


def _generated_ddl(ddl: str, gen: dict[str, str]) -> str:
    """sqlite-utils' CREATE TABLE with the generated columns' definitions in their place (it
    declares no generated columns: each is given to it as a plain column, then made one here)."""
    for column, expr in gen.items():
        line = re.compile(rf'(\n\s+"{re.escape(column)}" [A-Z]+)(,?\n)')
        ddl, n = line.subn(lambda m: f"{m.group(1)} GENERATED ALWAYS AS ({expr}) VIRTUAL{m.group(2)}", ddl, count=1)
        if n != 1:
            raise RuntimeError(f"the snapshot's DDL has no column {column}")
    return ddl


def _create_schema(conn: sqlite3.Connection) -> None:
    """Every table (through sqlite-utils: its columns in reading order, the primary key, the
    archive's foreign keys; the generated columns made so in the same statement), the full-text
    indexes, the marker and the redactions table."""
    db = sqlite_utils.Database(conn)
    for name in _tables():
        cols = shape.base_columns(name)
        names = {c for c, _ in cols}
        types = {c: _PY_TYPES.get(t.partition("=")[0], str) for c, t in cols}
        fks = [fk for fk in shape.FOREIGN_KEYS.get(name, []) if fk[0] in names]
        ddl = db.create_table_sql(shape.base_table(name), types, pk="id", foreign_keys=fks)
        conn.execute(_generated_ddl(ddl, shape.generated(name)))
        if name in shape.VIEWS:
            db.create_view(name, shape.view_sql(name))
    # Contentless FTS5 (no copy of the text): sqlite-utils' enable_fts makes external-content tables
    # over a column, and the indexed text here is computed (message_search_text, tool_call_search_text).
    for fts in (shape.FTS_TABLE, shape.TOOL_FTS_TABLE):
        _create_fts(conn, fts)
    db.create_table(shape.MARKER, {"key": str, "value": str}, pk="key")
    db.create_table(shape.FACTS, {"name": str, "value": str}, pk="name")
    db.create_table(shape.REDACTIONS, {c: int if t == "INTEGER" else str for c, t in shape.REDACTIONS_COLUMNS})


def _create_fts(conn: sqlite3.Connection, fts: str) -> None:
    conn.execute(f"CREATE VIRTUAL TABLE [{fts}] USING fts5({shape.FTS_COLUMN}, content='', tokenize='{TOKENIZE}')")


def _load_settings(conn: sqlite3.Connection, fts: str) -> None:
    """Fewer, larger merges while loading; 'optimize' merges all at the end. A 64 MB term buffer
    (the default is 1 MB) writes far fewer small segments to merge: the index of a million messages
    in a quarter less time (27 s -> 20 s here)."""
    conn.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('automerge', 16)")
    conn.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('hashsize', ?)", (64 * 2**20,))


# The full-text indexes of a full build are built by the worker in a file of its own, then copied
# into the snapshot's shadow tables (all of an FTS5 index's state is in them): the largest single cost
# of a build moves off the main process, which writes the rows meanwhile. The messages' text is the
# worker's own (it computes it); the tool calls' comes from the main process, which links each call to
# its messages in the snapshot, and reaches the worker while it has no rows of its own to prepare.
# Measured on 300,000 messages: the main process's CPU 42-50 s -> 32-36 s, the build about a tenth
# faster. The snapshot's connection is reopened after the copy, so that FTS5 reads the index anew.
_WORKER_FTS = (shape.FTS_TABLE, shape.TOOL_FTS_TABLE)
_worker_fts: sqlite3.Connection | None = None


def _worker_fts_open(path: str) -> None:
    global _worker_fts
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    for fts in _WORKER_FTS:
        _create_fts(conn, fts)
        _load_settings(conn, fts)
    conn.execute("BEGIN")
    _worker_fts = conn


def _worker_fts_close() -> None:
    global _worker_fts
    conn, _worker_fts = _worker_fts, None
    conn.execute("COMMIT")
    for fts in _WORKER_FTS:
        conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')")
    conn.close()


def index_in_worker(fts: str, rows: list[tuple[int, str]]) -> None:
    """Index (rowid, text) rows (the text as it is searched: index_text here) in the worker's file."""
    _worker_fts.executemany(f"INSERT INTO {fts} (rowid, {shape.FTS_COLUMN}) VALUES (?, ?)",
                            [(rowid, index_text(text)) for rowid, text in rows])


def prepare_and_index(table: str, names: tuple[str, ...], rows: list[tuple], redact: bool, fts: bool):
    """prepare_rows, in the worker, with the messages' full-text rows written to its own index."""
    patches, findings, fts_rows, derived_rows = prepare_rows(table, names, rows, redact, fts)
    if fts_rows and _worker_fts is not None:
        _worker_fts.executemany(f"INSERT INTO {shape.FTS_TABLE} (rowid, {shape.FTS_COLUMN}) VALUES (?, ?)",
                                fts_rows)
        fts_rows = []
    return patches, findings, fts_rows, derived_rows


def _adopt_fts(path: Path, fts_file: Path) -> None:
    """Copy the index the worker built into the snapshot's (empty) one, through a connection of its
    own: the build's connection, reopened after, reads it as any other change made elsewhere."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("ATTACH DATABASE ? AS worker", (str(fts_file),))
        conn.execute("BEGIN")
        for fts in _WORKER_FTS:
            copy_index(conn, fts, "worker")
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE worker")
    finally:
        conn.close()


def _create_indexes(conn: sqlite3.Connection, redact: bool, leading: str | None = None) -> None:
    """The tables' indexes (``leading``: only those whose first column it is; those made already
    are left as they are)."""
    db = sqlite_utils.Database(conn)
    wanted = [(shape.base_table(table.name), shape.index_name(table.name, cols), cols)
              for table in shape.tables().values() for cols in table.indexes]
    wanted += [(shape.REDACTIONS, shape.index_name(shape.REDACTIONS, cols), cols) for cols in shape.REDACTIONS_INDEXES]
    for table, name, cols in wanted:
        if leading is None or cols[0] == leading:
            db[table].create_index(list(cols), index_name=name, if_not_exists=True)


def session_list_in_worker(path: str, snapshot: str) -> int:
    """The session list (derived.py), built whole in a new file of its own from the committed rows
    of the snapshot, attached read-only: the snapshot is in WAL mode meanwhile, so the main process
    makes its indexes as this runs. Returns the rows."""
    conn = sqlite3.connect(path, isolation_level=None, uri=True)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("ATTACH DATABASE ? AS snapshot", (Path(snapshot).resolve().as_uri() + "?mode=ro",))
        return derived.refresh_session_list(conn)
    finally:
        conn.close()


# -- writing rows -------------------------------------------------------------------------------

class _Writer:
    """Writes batches of store rows into the snapshot: each row with its redactions, local-time
    offset, generated columns' helpers, full-text rows and (in the state file) hash."""

    def __init__(self, out: sqlite3.Connection, state: State, prep: _Preparer, zone, redact: bool):
        self.out = out
        self.state = state
        self.prep = prep
        self.offsets = Offsets(zone)
        self.millis = Millis()
        self.redact = redact
        self.counts: dict[str, int] = {}
        self.sessions_written: set[int] = set()
        # the messages written, in id order, that have a preview: id and hash(preview), for their calls
        self.preview_ids, self.preview_hashes = array("q"), array("q")

    def _remember_previews(self, rows: list[tuple], id_at: int, preview_at: int) -> None:
        ids, hashes = self.preview_ids, self.preview_hashes
        for values in rows:
            preview = values[preview_at]
            if preview is not None and (not ids or values[id_at] > ids[-1]):
                ids.append(values[id_at])
                hashes.append(hash(preview))

    def copy(self, plan: _Plan, rows: list[tuple]) -> None:
        """Hand a batch of store rows (plan.select's columns) on; written when prepared."""
        if not rows:
            return
        hashes = [(row[0], row_hash(row)) for row in rows]
        self.prep.add(plan.name, plan.select, rows, lambda r, result: self._write(plan, r, result, hashes),
                      plan.text_cols)

    def _write(self, plan: _Plan, rows: list[tuple], result, hashes) -> None:
        patches, findings, fts_rows, derived = result
        at = {c: i for i, c in enumerate(plan.select)}
        if patches:
            rows = [list(row) for row in rows]
            for index, patch in patches:
                values = rows[index]
                for column, value in patch.items():
                    values[at[column]] = value
        per_row: dict[int, int] = {}
        for _t, row_id, _s, _column, _k, n in findings:
            per_row[row_id] = per_row.get(row_id, 0) + n
        zero = 0 if self.redact else None
        name = plan.name
        ts_at = at.get(plan.local_from) if plan.local_from else None
        rows = [tuple(values) for values in rows]
        fts_table = shape.FTS_TABLE
        if name == "tool_calls":
            derived, fts_rows = self._link_calls(rows, at)
            fts_table = shape.TOOL_FTS_TABLE
            if self.prep.index(fts_table, fts_rows):
                fts_rows = []
            else:
                fts_rows = [(rowid, index_text(text)) for rowid, text in fts_rows]
        elif name == "messages" and "text_preview" in at:
            self._remember_previews(rows, at["id"], at["text_preview"])
        # each stored column: a store column, the count, or a helper (shape.helpers, in order: the
        # local-time offset, a message's or a view's helpers, the time columns' milliseconds)
        width = len(plan.select)
        extra = {COUNT_COLUMN: width}
        extra.update((column, width + 1 + k) for k, (column, _type) in enumerate(shape.helpers(name)))
        none_at = width + 1 + len(shape.helpers(name))  # a column this store lacks: NULL
        pick = [at[c] if c in at else extra.get(c, none_at) for c in plan.stored]
        getter = operator.itemgetter(*pick)
        offsets, millis = self.offsets, self.millis
        times = [at.get(c) for c in shape.TIME_COLUMNS.get(name, ())]
        out_rows = []
        for index, values in enumerate(rows):
            tail = (per_row.get(values[0], zero),)
            if ts_at is not None:
                tail += (offsets(values[ts_at]),)
            if derived is not None:
                tail += derived[index]
            for t_at in times:
                tail += millis(values[t_at]) if t_at is not None else (None, None)
            out_rows.append(getter(values + tail + (None,)))
        cols = ", ".join(f"[{c}]" for c in plan.stored)
        self.out.executemany(f"INSERT INTO [{plan.target}] ({cols}) VALUES ({', '.join('?' * len(plan.stored))})",
                             out_rows)
        if fts_rows:
            self.out.executemany(f"INSERT INTO {fts_table} (rowid, {shape.FTS_COLUMN}) VALUES (?, ?)", fts_rows)
        if findings:
            self.out.executemany(f"INSERT INTO {shape.REDACTIONS} VALUES (?, ?, ?, ?, ?, ?)", findings)
        self.state.put(plan.number, hashes)
        self.counts[name] = self.counts.get(name, 0) + len(out_rows)
        if plan.session_col is not None:
            s_at = plan.stored.index(plan.session_col)
            self.sessions_written.update(r[s_at] for r in out_rows if r[s_at] is not None)

    def _link_calls(self, rows: list[tuple], at: dict) -> tuple[list[tuple], list[tuple]]:
        """Tool calls (their final values): the helpers of the view's linked columns (shape.LINKED) and
        the rows of tool_calls_fts (their text, before index_text). The arguments are linked when
        json_extract of the call's block in the snapshot's message gives them exactly; the result
        preview is the result message's (as redacted there: a value cut at the 512th character is
        gone whole), linked when it has one."""
        id_at, mid_at, block_at, rid_at = at["id"], at.get("message_id"), at.get("block_index"), \
            at.get("result_message_id")
        args_at, preview_at = at.get("arguments"), at.get("result_preview")
        extracted: dict = {}
        wanted = [(r[id_at], r[mid_at], r[block_at]) for r in rows
                  if mid_at is not None and r[mid_at] is not None and r[block_at] is not None
                  and args_at is not None and r[args_at] is not None]
        for i in range(0, len(wanted), 3000):
            chunk = wanted[i:i + 3000]
            values = ", ".join("(?, ?, ?)" for _ in chunk)
            extracted.update(self.out.execute(
                f"WITH v(id, mid, block) AS (VALUES {values}) SELECT v.id, CASE WHEN json_valid(m.content_blocks) "
                "THEN json_extract(m.content_blocks, '$[' || v.block || '].arguments') END "
                "FROM v JOIN messages m ON m.id = v.mid", [x for row in chunk for x in row]))
        # a result message this export wrote: its preview is the call's own when their hashes agree
        # (64-bit SipHash, keyed anew in each process); only the others are read back
        previews: dict = {}
        known, hashes = self.preview_ids, self.preview_hashes
        ids = set()
        for r in rows:
            rid = r[rid_at] if rid_at is not None else None
            if rid is None or preview_at is None or r[preview_at] is None:
                continue
            k = bisect.bisect_left(known, rid)
            if k < len(known) and known[k] == rid and hashes[k] == hash(r[preview_at]):
                previews[rid] = r[preview_at]
            else:
                ids.add(rid)
        ids = sorted(ids)
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            previews.update(self.out.execute(f"SELECT id, text_preview FROM messages WHERE id IN "
                                             f"({', '.join('?' * len(chunk))})", chunk))
        derived, fts_rows = [], []
        for r in rows:
            args = r[args_at] if args_at is not None else None
            args_linked = args is not None and extracted.get(r[id_at], None) == args
            preview = r[preview_at] if preview_at is not None else None
            rid = r[rid_at] if rid_at is not None else None
            preview_linked = preview is not None and rid in previews and previews[rid] is not None
            if preview_linked:
                preview = previews[rid]
            derived.append((1 if args_linked else 0, None if args_linked else args,
                            1 if preview_linked else 0, None if preview_linked else preview))
            text = tool_call_search_text(r[at["tool_name"]] if "tool_name" in at else None,
                                         r[at["command"]] if "command" in at else None, args, preview)
            if text:
                fts_rows.append((r[id_at], text))
        return derived, fts_rows

    def remove(self, plan: _Plan, ids: list[int]) -> int:
        """Take rows out of the snapshot (to go, or to be written again): their full-text rows (the
        text they were indexed with, computed again from what the snapshot holds), redaction counts,
        hashes. Returns how many there were."""
        if not ids:
            return 0
        name = plan.name
        gone = 0
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ", ".join("?" * len(chunk))
            if name == "messages":
                old = self.out.execute(f"SELECT id, content_blocks, text_preview, session_id FROM messages "
                                       f"WHERE id IN ({marks})", chunk).fetchall()
                fts = [(r[0], index_text(t)) for r in old if (t := message_search_text(r[1], r[2]))]
                self.out.executemany(f"INSERT INTO {shape.FTS_TABLE} ({shape.FTS_TABLE}, rowid, {shape.FTS_COLUMN}) "
                                     "VALUES ('delete', ?, ?)", fts)
            elif name == "tool_calls":
                old = self.out.execute(f"SELECT id, tool_name, command, arguments, result_preview, session_id "
                                       f"FROM tool_calls WHERE id IN ({marks})", chunk).fetchall()
                fts = [(r[0], index_text(t)) for r in old if (t := tool_call_search_text(*r[1:5]))]
                self.out.executemany(f"INSERT INTO {shape.TOOL_FTS_TABLE} ({shape.TOOL_FTS_TABLE}, rowid, "
                                     f"{shape.FTS_COLUMN}) VALUES ('delete', ?, ?)", fts)
            elif plan.session_col is not None:
                old = self.out.execute(f"SELECT id, [{plan.session_col}] FROM [{plan.target}] WHERE id IN ({marks})",
                                       chunk).fetchall()
            else:
                old = self.out.execute(f"SELECT id, NULL FROM [{plan.target}] WHERE id IN ({marks})",
                                       chunk).fetchall()
            self.sessions_written.update(r[-1] for r in old if r[-1] is not None)
            self.out.execute(f"DELETE FROM {shape.REDACTIONS} WHERE table_name = ? AND row_id IN ({marks})",
                             (name, *chunk))
            self.out.execute(f"DELETE FROM [{plan.target}] WHERE id IN ({marks})", chunk)
            gone += len(old)
        self.state.drop(plan.number, ids)
        self.counts[name] = self.counts.get(name, 0) - gone
        return gone


def _store_rows(store: Store, plan: _Plan, where: str = "", params: tuple = ()):
    """The store's rows of a plan's table (``where``: more conditions), by id, in batches."""
    cols = ", ".join(f"[{c}]" for c in plan.select)
    extra = f" AND ({where})" if where else ""
    select = f"SELECT {cols} FROM [{plan.name}] WHERE id > ?{extra} ORDER BY id LIMIT {BATCH}"
    last = -(2 ** 63)
    while True:
        rows = store.tuples(select, (last, *params))
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def _store_rows_by_id(store: Store, plan: _Plan, ids: list[int]):
    cols = ", ".join(f"[{c}]" for c in plan.select)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        rows = store.tuples(f"SELECT {cols} FROM [{plan.name}] WHERE id IN ({', '.join('?' * len(chunk))}) "
                            "ORDER BY id", tuple(chunk))
        if rows:
            yield rows


# -- facts ------------------------------------------------------------------------------------

def snapshot_facts() -> dict[str, object]:
    """What the pages need to know of the kinds and the shape (shape.FACT_KEYS), as the snapshot's
    facts table holds it: the plugin reads it there and imports no kind."""
    from .sources import all_sources

    shell: dict[str, set[str]] = {}
    queries: dict[str, dict] = {}
    latest: dict[str, str] = {}
    for source in all_sources():
        shell.setdefault(source.kind, set()).update(source.shell_tools or ())
        for name, query in (getattr(source, "canned_queries", None) or {}).items():
            query = dict(query)
            tables = query.pop("tables", None) or [t.name for t in getattr(source, "snapshot_tables", ()) or ()]
            what = query.pop("latest_day_of", None)
            if name not in queries:
                queries[name] = {"query": query, "tables": list(tables)}
                if what:
                    latest[name] = what
    return {"shell_tools": {kind: sorted(tools) for kind, tools in shell.items()},
            "canned_queries": queries, "latest_day_of": latest,
            "tables": list(shape.tables()), "views": dict(shape.VIEWS),
            "render_columns": {"blocks": sorted(shape.BLOCK_COLUMNS), "json": sorted(shape.JSON_COLUMNS),
                               "thinking": sorted(shape.THINKING_COLUMNS)}}


# -- marker -----------------------------------------------------------------------------------

def _marker(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(conn.execute(f"SELECT key, value FROM {shape.MARKER}"))
    except sqlite3.Error:
        return {}


def _write_marker(conn: sqlite3.Connection, values: dict) -> None:
    conn.executemany(f"INSERT OR REPLACE INTO {shape.MARKER} (key, value) VALUES (?, ?)",
                     [(k, None if v is None else str(v)) for k, v in values.items()])


def _finish_counts(conn: sqlite3.Connection, sessions, redact: bool) -> int | None:
    """sessions.secrets_redacted for ``sessions`` (None: all), and the snapshot's total."""
    if not redact:
        return None
    if sessions is None:
        conn.execute(f"UPDATE sessions SET [{COUNT_COLUMN}] = COALESCE("
                     f"(SELECT SUM(count) FROM {shape.REDACTIONS} r WHERE r.session_id = sessions.id), 0)")
    else:
        ids = sorted(sessions)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            conn.execute(f"UPDATE sessions SET [{COUNT_COLUMN}] = COALESCE((SELECT SUM(count) FROM "
                         f"{shape.REDACTIONS} r WHERE r.session_id = sessions.id), 0) "
                         f"WHERE id IN ({', '.join('?' * len(chunk))})", chunk)
    return conn.execute(f"SELECT COALESCE(SUM(count), 0) FROM {shape.REDACTIONS}").fetchone()[0]


def _table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    names = [*_tables(), shape.REDACTIONS, derived.TABLE]
    return {t: conn.execute(f"SELECT COUNT(*) FROM [{t}]").fetchone()[0] for t in names}


def _refresh_derived(conn: sqlite3.Connection, sessions) -> int:
    """The derived tables of the snapshot's own rows (derived.py: the session browser's list), for
    ``sessions`` (None: all); their rows written."""
    return derived.refresh_session_list(conn, None if sessions is None else sorted(sessions))


# -- leftovers and paths ---------------------------------------------------------------------------

def remove_leftovers(target: Path) -> list[Path]:
    """Temporary files a killed export left beside ``target`` (its pid no longer
    runs, or this is it): removed, so they never pile up. Returns them."""
    gone = []
    for pattern in (f".{target.name}.tmp-*", f".{target.name}.link-*", f".{state_path(target).name}.tmp-*",
                    f".{inspect_path(target).name}.tmp-*", f".{target.name}.download-*"):
        for leftover in target.parent.glob(pattern):
            pid = leftover.name.rsplit(next(m for m in (".tmp-", ".link-", ".download-") if m in leftover.name),
                                       1)[-1].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and _running(int(pid)):
                continue  # another export's, still at work
            try:
                leftover.unlink()
                gone.append(leftover)
            except OSError:
                pass
    # a build killed between writing its file and pointing the link at it
    current = os.readlink(target) if target.is_symlink() else None
    for leftover in _generations(target):
        if current is None or not leftover.name.startswith(current):
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


# -- what -o may name ------------------------------------------------------------------------------

_GENERATION = re.compile(r"[0-9a-f]{32}")
STATE_TABLES = frozenset({"meta", "secrets", "rows"})  # snapshot_state.SCHEMA's


def snapshot_target(db: str | None, output: str | os.PathLike | None) -> Path:
    """Where an export of the archive ``db`` (a URL, None: the embedded default) writes: ``output``,
    else what :func:`snapshot_path_for` gives for that store; known without opening the store."""
    if output:
        return Path(output).expanduser()
    path = sqlite_path(db)
    return path.parent / "snapshot.db" if path is not None else default_snapshot_path()


def _is_snapshot_file(path: Path) -> bool:
    """A regular file (not a link) holding a SQLite database with the snapshot's marker table."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and shape.MARKER in (sqlite_tables(path) or ())


def check_target(target: Path) -> str:
    """What an export may write over, checked before it does anything (export, watch -o, sync):
    ``new`` (nothing there; the folders above are folders or missing), ``link`` (an export's link: a
    symbolic link whose text is the name of a build file beside it, ``.<name>.<32 hex digits>``,
    which is a regular SQLite file with the marker table ``agentbase_snapshot``), or ``plain`` (an
    older AgentBase's snapshot: a regular SQLite file with that marker, rebuilt as a link). The state
    file beside it, ``<stem>-state.db``, must be missing or a regular SQLite file with the state's
    tables. Anything else (a file that is not a snapshot, a device, a FIFO, a folder, a link to
    anything else, a dangling link) is a StoreError of one line, and nothing has been touched."""
    target = Path(target)
    refuse = f"refusing to write the snapshot at {target}"
    kind = _check_path(target, refuse, "an AgentBase snapshot")
    if kind == "regular":
        kind = "plain" if _is_snapshot_file(target) else None
    elif kind == "link":
        text = os.readlink(target)
        ok = ("/" not in text and text.startswith(f".{target.name}.")
              and _GENERATION.fullmatch(text[len(target.name) + 2:]) is not None
              and _is_snapshot_file(target.parent / text))
        if not ok:
            raise StoreError(f"{refuse}: it is a link to {text}, not an AgentBase snapshot (whose link names "
                             f".{target.name}.<id> beside it)")
    if kind is None:
        raise StoreError(f"{refuse}: it is a file that is not an AgentBase snapshot")
    spath = state_path(target)
    skind = _check_path(spath, f"refusing to write the snapshot's state file at {spath}",
                        "an AgentBase snapshot's state file")
    if skind == "link" or (skind == "regular" and not STATE_TABLES <= (sqlite_tables(spath) or set())):
        raise StoreError(f"refusing to write the snapshot's state file at {spath}: it is "
                         f"{'a link' if skind == 'link' else 'a file'} that is not an AgentBase snapshot's "
                         "state file")
    return kind


def _check_path(path: Path, refuse: str, what: str) -> str:
    """``new``, ``link`` or ``regular``; anything else is refused (a folder, a device, a FIFO...),
    and so is a new path below something that is not a folder."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        parent = path.parent
        while True:
            try:
                pst = os.stat(parent)
            except (FileNotFoundError, NotADirectoryError):
                if parent == parent.parent:
                    return "new"
                parent = parent.parent
                continue
            except OSError as exc:
                raise StoreError(f"{refuse}: {parent}: {exc.strerror or exc}") from None
            if not stat.S_ISDIR(pst.st_mode):
                raise StoreError(f"{refuse}: {parent} is {what_is(pst.st_mode)}, not a folder")
            return "new"
    except OSError as exc:
        raise StoreError(f"{refuse}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        return "link"
    if stat.S_ISREG(st.st_mode):
        return "regular"
    raise StoreError(f"{refuse}: it is {what_is(st.st_mode)}, not {what}")


def check_servable(path: Path) -> None:
    """What `agentbase serve` may serve: an AgentBase snapshot (through links: an export's, or one
    a user made). Checked before anything is served; each refusal is one line."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        if os.path.islink(path):
            raise StoreError(f"{path} is a link to nothing (no snapshot there): run `agentbase export` "
                             "first") from None
        raise StoreError(f"no snapshot at {path}: run `agentbase export` first") from None
    except OSError as exc:
        raise StoreError(f"cannot read the snapshot at {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{path} is {what_is(st.st_mode)}, not an AgentBase snapshot")
    tables = sqlite_tables(path)
    if tables is None:
        raise StoreError(f"{path} is not an AgentBase snapshot (not a SQLite database)")
    if shape.MARKER in tables:
        return
    if "_migrations" in tables:
        raise StoreError(f"{path} is an AgentBase archive, not a snapshot: serve the snapshot "
                         "`agentbase export` writes from it")
    raise StoreError(f"{path} is a SQLite database that is not an AgentBase snapshot")


def inspect_path(snapshot: Path) -> Path:
    """The counts file older snapshots had beside them (``snapshot-inspect.json``): removed by an
    export, since a snapshot updated in place is served as a live file, not an immutable one."""
    return snapshot.with_name(snapshot.stem + "-inspect.json")


# -- the two ways ----------------------------------------------------------------------------

def _facts(store: Store, zone_name: str, redact: bool) -> dict[str, str]:
    """What a snapshot must have been made with for an update to be exact."""
    return {"shape": _shape_digest(), "timezone": zone_name, "redacted": "yes" if redact else "no",
            "source": str(store.location), "store_schema": str(store.schema_version()),
            "archive_number": str(store.archive_number())}


def _why_full(target: Path, facts: dict, store_seq: int) -> tuple[str | None, State | None, sqlite3.Connection | None]:
    """(why the snapshot must be built in full, or None; its state; a connection to it)."""
    if not target.is_file():
        return "no snapshot yet", None, None
    spath = state_path(target)
    if not spath.is_file():
        return "no state file beside the snapshot", None, None
    try:
        conn = sqlite3.connect(str(target), isolation_level=None, timeout=30)
        marker = _marker(conn)
    except sqlite3.Error as exc:
        return f"the snapshot cannot be read ({exc})", None, None
    try:
        state = State(spath)
        meta = state.meta()
    except (sqlite3.Error, OSError) as exc:
        conn.close()
        return f"the state file cannot be read ({exc})", None, None
    why = None
    if not marker.get("snapshot_id") or marker.get("snapshot_id") != meta.get("snapshot_id") or \
            marker.get("generation") != meta.get("generation"):
        why = "the state file is not this snapshot's"
    else:
        for key, label in (("shape", "the snapshot's format or AgentBase's version"), ("timezone", "the time zone"),
                           ("redacted", "the redaction setting"), ("source", "the store"),
                           ("archive_number", "the store"), ("store_schema", "the store's schema")):
            if meta.get(key) != facts[key]:
                why = f"{label} changed"
                break
        else:
            if facts["archive_number"] == "None":
                why = "the store has no change log"
            elif int(meta.get("applied_seq") or 0) > store_seq:
                why = "the store is older than the snapshot"
    if why:
        state.close()
        conn.close()
        return why, None, None
    return None, state, conn


def export_snapshot(store: Store, output: str | os.PathLike | None = None, timezone: str | None = None,
                    progress=None, redact: bool = True, if_changed: bool = False, full: bool = False) -> ExportReport:
    """Bring the snapshot at ``output`` (default: snapshot.db beside the embedded store) up to date
    with the store: in place when it can be, else built in full (see the module's text).

    ``redact`` (the default) replaces credentials in every transcript text
    with ``[REDACTED:<kind>]`` (see redact.py); the store keeps the originals.
    ``full``: build a new file even when an update could do. ``if_changed`` is
    kept for callers of old: an update that finds nothing new changes nothing
    either way (the report says ``unchanged``).
    """
    started = time.perf_counter()
    target = Path(output).expanduser() if output else snapshot_path_for(store)
    zone_name, zone = resolve_zone(timezone)
    check_target(target)  # before anything is written or removed beside it
    if redact:
        from . import redact as _load_detectors  # noqa: F401  (once, before the worker forks)
    remove_leftovers(target)
    try:
        with store.reading():  # one state of the store for the whole export
            facts = _facts(store, zone_name, redact)
            seq = store.change_seq()
            why, state, conn = ("asked for (--full)", None, None) if full else _why_full(target, facts, seq)
            if why is None:
                try:
                    report = _update(store, target, conn, state, zone, zone_name, redact, seq, progress)
                finally:
                    conn.close()
                    state.close()
                if report is not None:
                    report.elapsed_s = time.perf_counter() - started
                    return report
                why = "the update found changes it cannot apply in place"
            report = _build(store, target, zone, zone_name, redact, facts, seq, progress)
            report.why_full = why
    except sqlite3.Error as exc:  # the disk is full, the store is unreadable...
        raise StoreError(f"export failed: {exc}; {target} is unchanged") from None
    report.elapsed_s = time.perf_counter() - started
    return report


def generation_file(target: Path, snapshot_id: str) -> Path:
    """Where a build's file lives: ``.snapshot.db.<id>`` beside ``snapshot.db``, a symbolic link
    to the newest. A build never renames a file over one a reader may hold in WAL mode (SQLite
    names the -wal after the file: a new file under the old name would be read with the old
    file's -wal by whoever still has it open); it writes a new file and points the link at it.
    A reader of the old file keeps reading it, whole, until it opens the name again."""
    return target.with_name(f".{target.name}.{snapshot_id}")


def _generations(target: Path) -> list[Path]:
    """The build files of ``target`` (and their -wal and -shm), the link's own among them."""
    prefix = f".{target.name}."
    out = []
    for path in target.parent.glob(f".{target.name}.*"):
        rest = path.name[len(prefix):]
        key = rest.split("-", 1)[0]
        if len(key) == 32 and all(c in "0123456789abcdef" for c in key):
            out.append(path)
    return out


def _point(target: Path, real: Path) -> None:
    """Point ``target`` at ``real`` in one step, then remove the older builds' files."""
    link = target.with_name(f".{target.name}.link-{os.getpid()}")
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(real.name, link)
    os.replace(link, target)
    for old in _generations(target):
        if not old.name.startswith(real.name):
            try:
                old.unlink()  # a reader that has it open keeps it until it closes it
            except OSError:
                pass


def _build(store: Store, target: Path, zone, zone_name: str, redact: bool, facts: dict, seq: int,
           progress) -> ExportReport:
    """A new snapshot and state file, put in place (the state first, then the link)."""
    snapshot_id = uuid.uuid4().hex
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    spath = state_path(target)
    state_tmp = spath.with_name(f".{spath.name}.tmp-{os.getpid()}")
    older = _is_snapshot_file(target)  # an older AgentBase's plain file, whose counts file goes too
    private_file(tmp)  # 0600 in a 0700 folder: the snapshot holds transcripts
    report = ExportReport(str(target), zone_name)
    fts_file = tmp.with_name(tmp.name + "-fts")
    listing_file = tmp.with_name(tmp.name + "-list")
    out = _build_connection(tmp)
    state = State(state_tmp, create=True)
    prep = None
    try:
        out.execute("BEGIN")
        state.begin()
        _create_schema(out)
        for fts in (shape.FTS_TABLE, shape.TOOL_FTS_TABLE):
            _load_settings(out, fts)
        prep = _Preparer(redact, fts_file=fts_file)
        writer = _Writer(out, state, prep, zone, redact)
        if redact:
            from . import redact as R

            if progress:
                progress("credentials")
            secrets = R.collect(store, shape.redact_columns(), prep.pool)
            prep.install(secrets)
            state.add_secrets(secrets.values())
        for plan in _plans(store):
            if progress:
                progress(plan.name)
            for rows in _store_rows(store, plan):
                writer.copy(plan, rows)
            prep.drain()
            report.rows[plan.name] = writer.counts.get(plan.name, 0)
        # the worker completes its full-text indexes (commit, optimize), then builds the session list
        # from the committed rows, while this process makes the indexes (after every table's rows:
        # until then it redacts them). The list's queries read messages and tool calls by session:
        # those indexes first. (At a million messages the list is 3 s of the main process's time.)
        prep.close_index()
        listing = None
        if prep.pool is not None:
            _create_indexes(out, redact, leading="session_id")
            out.execute("COMMIT")
            # the worker reads the rows, this process writes (else: the list is built here)
            if out.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal":
                listing = prep.derive(tmp, listing_file)
            out.execute("BEGIN")
        _create_indexes(out, redact)
        report.secrets_redacted = _finish_counts(out, None, redact)
        if listing is None:
            report.rows[derived.TABLE] = _refresh_derived(out, None)
        else:
            listing.get()
            out.execute("ATTACH DATABASE ? AS listing", (str(listing_file),))
            report.rows[derived.TABLE] = derived.copy_session_list(out, "listing")
        counts = _table_counts(out)
        report.rows["redactions"] = counts[shape.REDACTIONS]
        marker = {"exported_at": datetime.now(tz=None).astimezone().isoformat(timespec="seconds"),
                  "updated_at": None, "timezone": zone_name, "source": store.location,
                  "redacted": "yes" if redact else "no",
                  "secrets_redacted": str(report.secrets_redacted) if redact else "",
                  "snapshot_id": snapshot_id, "generation": "1", "format": str(SNAPSHOT_FORMAT),
                  "counts": json.dumps(counts)}
        _write_marker(out, marker)
        out.executemany(f"INSERT INTO {shape.FACTS} (name, value) VALUES (?, ?)",
                        [(k, json.dumps(v)) for k, v in snapshot_facts().items()])
        state.set_meta({**facts, "snapshot_id": snapshot_id, "generation": "1", "applied_seq": str(seq)})
        out.execute("COMMIT")
        if listing is not None:
            out.execute("DETACH DATABASE listing")  # (not in the transaction that read it)
            listing_file.unlink()
        if prep.finish_index():
            out.close()
            out = None
            _adopt_fts(tmp, fts_file)
            fts_file.unlink()
            out = _build_connection(tmp)
        prep.close()
        state.commit()
        for fts in (shape.FTS_TABLE, shape.TOOL_FTS_TABLE):
            out.execute(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')")
        out.execute("ANALYZE")
        out.execute("PRAGMA journal_mode = WAL")  # updated in place from now on, while Datasette reads it
        out.close()
        out = None
        state.close()
        for path in (tmp, state_tmp):
            with open(path, "rb+") as f:
                os.fsync(f.fileno())
        real = generation_file(target, snapshot_id)
        os.replace(tmp, real)
        # the state first: a snapshot without its own state is rebuilt, never updated with another's
        os.replace(state_tmp, spath)
        _point(target, real)
        if older and inspect_path(target).is_file() and not inspect_path(target).is_symlink():
            inspect_path(target).unlink()  # that older snapshot's counts file: served live now
    except BaseException:
        if prep is not None:
            prep.close()
        if out is not None:
            out.close()
        state.close()
        for leftover in (tmp, state_tmp, fts_file, listing_file,
                         *(tmp.with_name(tmp.name + end) for end in ("-wal", "-shm"))):
            if leftover.exists():
                leftover.unlink()
        raise
    report.bytes = target.stat().st_size
    return report


def _build_connection(path: Path) -> sqlite3.Connection:
    out = sqlite3.connect(str(path), isolation_level=None)
    out.execute("PRAGMA page_size = 16384")
    out.execute("PRAGMA journal_mode = OFF")  # a temporary file: a failure discards it whole
    out.execute("PRAGMA synchronous = OFF")
    out.execute("PRAGMA cache_size = -65536")
    return out


def _update(store: Store, target: Path, conn: sqlite3.Connection, state: State, zone, zone_name: str,
            redact: bool, seq: int, progress) -> ExportReport | None:
    """Apply the store's changes since the snapshot last saw it, in one transaction; None when a
    full build must do it instead."""
    from . import redact as R

    # the snapshot's write lock first: what the update reads of it is what it changes
    conn.execute("BEGIN IMMEDIATE")
    state.begin()
    meta = state.meta()
    if _marker(conn).get("generation") != meta.get("generation"):  # another export got here first
        conn.execute("ROLLBACK")
        state.rollback()
        return None
    applied = int(meta.get("applied_seq") or 0)
    touched = store.changed_sessions(applied, seq)
    plans = _plans(store)
    # 1. which rows differ (their hash), which are gone; the credentials of the rows that differ
    known = R.SecretSet(state.secrets()) if redact else None
    detections: list[tuple[str, str]] = []
    changes: dict[str, tuple[set, set]] = {}
    detect = shape.redact_columns()
    for plan in plans:
        write, gone = _differences(store, conn, state, plan, touched)
        if write and redact and plan.name in detect:
            for rows in _store_rows_by_id(store, plan, sorted(write)):
                detections += R.detect_rows(plan.name, plan.select, rows, tuple(detect[plan.name]))
        changes[plan.name] = (write, gone)
    new_values = known.newer(detections) if redact else []
    if not any(w or g for w, g in changes.values()) and not new_values:
        conn.execute("ROLLBACK")
        state.rollback()
        report = ExportReport(str(target), zone_name, unchanged=True, mode="update")
        report.bytes = target.stat().st_size
        return report
    secrets = known
    if new_values:
        if _overlaps(known, new_values):
            conn.execute("ROLLBACK")
            state.rollback()
            return None  # a new value inside a known one (or the reverse): replaced anew only by a full build
        secrets = R.SecretSet([*known.values(), *new_values])
        # rows exported before that hold a new value (or one now of another kind) are written again
        fresh = R.SecretSet(new_values)
        for plan in plans:
            changes[plan.name][0].update(_holding(conn, plan, fresh))
    prep = _Preparer(redact, parallel=sum(len(w) for w, _ in changes.values()) > 20 * BATCH)
    writer = _Writer(conn, state, prep, zone, redact)
    try:
        if redact:
            prep.install(secrets)
        changed: dict[str, int] = {}
        # A tool call's arguments and result preview are its messages' (its view): those of a
        # message written again or gone are written again too. Rows go first, the tables that
        # depend on others before these: a tool call's old search text is read through its view
        # while its messages are still as they were.
        if "tool_calls" in changes:
            messages_write, messages_gone = changes["messages"]
            linked = _present(conn, "messages", messages_write) | messages_gone
            changes["tool_calls"][0].update(_calls_of(conn, linked))
        for plan in reversed(plans):
            write, gone = changes[plan.name]
            writer.remove(plan, sorted(gone | _present(conn, plan.target, write)))
        for plan in plans:
            write, gone = changes[plan.name]
            for rows in _store_rows_by_id(store, plan, sorted(write)):
                writer.copy(plan, rows)
            prep.drain()
            changed[plan.name] = len(write | gone)
        prep.close()
        sessions = set(touched) | writer.sessions_written
        secrets_total = _finish_counts(conn, sessions, redact)
        _refresh_derived(conn, sessions)
        marker = _marker(conn)
        counts = json.loads(marker.get("counts") or "{}")
        for name, delta in writer.counts.items():
            counts[name] = counts.get(name, 0) + delta
        for name in (shape.REDACTIONS, derived.TABLE):  # (small: counted)
            counts[name] = conn.execute(f"SELECT COUNT(*) FROM [{name}]").fetchone()[0]
        generation = str(int(marker.get("generation") or 0) + 1)
        _write_marker(conn, {"updated_at": datetime.now(tz=None).astimezone().isoformat(timespec="seconds"),
                             "secrets_redacted": str(secrets_total) if redact else "",
                             "generation": generation, "counts": json.dumps(counts)})
        if new_values:
            state.add_secrets(new_values)
        state.set_meta({"generation": generation, "applied_seq": str(seq)})
        conn.execute("COMMIT")
        state.commit()
    except BaseException:
        prep.close()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        state.rollback()
        raise
    report = ExportReport(str(target), zone_name, mode="update", changed=changed,
                          sessions_changed=len(sessions))
    report.rows = {t: counts.get(t, 0) for t in _tables()}
    report.secrets_redacted = secrets_total
    report.bytes = target.stat().st_size
    return report


def _differences(store: Store, conn: sqlite3.Connection, state: State, plan: _Plan,
                 touched: list[int]) -> tuple[set, set]:
    """(ids of the store's rows to write: new, or with another hash; ids of the snapshot's rows the
    store no longer has) among the rows of the touched sessions, of no session, or (a table of no
    session) all."""
    write: set[int] = set()
    seen: set[int] = set()
    snap_ids: set[int] = set()

    def compare(rows) -> None:
        hashes = state.hashes(plan.number, [r[0] for r in rows])
        for row in rows:
            seen.add(row[0])
            if hashes.get(row[0]) != row_hash(row):
                write.add(row[0])

    if plan.session_col is None:
        for rows in _store_rows(store, plan):
            compare(rows)
        snap_ids = set(state.hashes(plan.number))
    else:
        col = plan.session_col
        for i in range(0, len(touched), 500):
            chunk = tuple(touched[i:i + 500])
            marks = ", ".join("?" * len(chunk))
            for rows in _store_rows(store, plan, f"[{col}] IN ({marks})", chunk):
                compare(rows)
            snap_ids.update(r[0] for r in conn.execute(f"SELECT id FROM [{plan.target}] WHERE [{col}] IN ({marks})",
                                                       chunk))
        if col != "id":  # rows of no session yet (a source kind links them later)
            for rows in _store_rows(store, plan, f"[{col}] IS NULL"):
                compare(rows)
            snap_ids.update(r[0] for r in conn.execute(f"SELECT id FROM [{plan.target}] WHERE [{col}] IS NULL"))
    gone = snap_ids - seen
    if gone and plan.session_col is not None:
        # a row that moved to a session not touched is still in the store: written again, not lost
        ids = sorted(gone)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            moved = {r[0] for r in store.tuples(f"SELECT id FROM [{plan.name}] WHERE id IN "
                                                f"({', '.join('?' * len(chunk))})", tuple(chunk))}
            write |= moved
            gone -= moved
    return write, gone


def _present(conn: sqlite3.Connection, table: str, ids) -> set[int]:
    ids = sorted(ids)
    out: set[int] = set()
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        out.update(r[0] for r in conn.execute(f"SELECT id FROM [{table}] WHERE id IN ({', '.join('?' * len(chunk))})",
                                              chunk))
    return out


def _calls_of(conn: sqlite3.Connection, message_ids: set[int]) -> set[int]:
    """The tool calls whose call or result is one of these messages (the view takes their arguments
    and result preview from there)."""
    ids = sorted(message_ids)
    out: set[int] = set()
    base = shape.base_table("tool_calls")
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ", ".join("?" * len(chunk))
        out.update(r[0] for r in conn.execute(f"SELECT id FROM [{base}] WHERE message_id IN ({marks}) UNION "
                                              f"SELECT id FROM [{base}] WHERE result_message_id IN ({marks})",
                                              chunk + chunk))
    return out


def _overlaps(known, new_values) -> bool:
    """Whether a new value contains a known one or is contained in one: the rows holding it had
    the known value replaced first, so only a full build replaces them as it would."""
    if known is None or not known:
        return False
    olds = list(known.kinds)
    for value, _kind in new_values:
        for old in olds:
            if old != value and (old in value or value in old):
                return True
    return False


def _holding(conn: sqlite3.Connection, plan: _Plan, secrets) -> set[int]:
    """The ids of the snapshot's rows whose text holds a value of ``secrets`` (in any of its forms)."""
    from . import redact as R

    text_cols = [c for c, t in shape.stored(plan.name) if t.startswith("str") or t in ("text", "json")]
    if not text_cols:
        return set()
    select = (f"SELECT id, {', '.join(f'[{c}]' for c in text_cols)} FROM [{plan.target}] WHERE id > ? "
              f"ORDER BY id LIMIT {BATCH}")
    out: set[int] = set()
    last = -(2 ** 63)
    while True:
        rows = conn.execute(select, (last,)).fetchall()
        if not rows:
            return out
        hit = secrets.rows_hit([R.row_text(r[1:]) for r in rows])
        out.update(rows[i][0] for i in hit)
        last = rows[-1][0]
