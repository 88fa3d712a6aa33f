"""The system of record: the only module that speaks SQL.

``open_store(url)`` returns a :class:`Store` on the embedded SQLite file (the
zero-setup default) or on the file a ``sqlite:///path`` URL names. Dialect
differences (DDL types, placeholders, upsert syntax) live in :class:`Dialect`
so that other back ends plug in without ``if`` branches elsewhere.

Schema changes are an ordered list of migrations recorded in ``_migrations``;
a store written by a newer AgentBase is refused instead of being misread.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from . import schema


class StoreError(Exception):
    """A problem with the store a user can act on (bad URL, newer schema...)."""


def default_db_path() -> Path:
    """``$AGENTBASE_HOME/agentbase.db``, else ``$XDG_DATA_HOME/agentbase/agentbase.db``
    (``~/.local/share/agentbase/agentbase.db``): the same file every run."""
    home = os.environ.get("AGENTBASE_HOME")
    if home:
        return Path(home).expanduser() / "agentbase.db"
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "agentbase" / "agentbase.db"


def now_utc() -> str:
    dt = datetime.now(timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{dt.microsecond // 1000:03d}"


class Dialect:
    """How one SQL engine spells the things that differ."""

    name = "sqlite"
    placeholder = "?"
    types = {
        "pk": "INTEGER PRIMARY KEY",
        "int": "INTEGER",
        "bigint": "INTEGER",
        "bool": "INTEGER",
        "text": "TEXT",
        "json": "TEXT",
        "datetime": "TEXT",
        "decimal": "REAL",
        "float": "REAL",
    }

    def column_type(self, abstract: str) -> str:
        if abstract.startswith("str:"):
            return "TEXT"
        return self.types[abstract]

    def create_table(self, table: str, columns: list[tuple[str, str]], uniques: list[tuple[str, ...]]) -> str:
        parts = [f"[{name}] {self.column_type(kind)}" for name, kind in columns]
        parts += [f"UNIQUE ({', '.join(cols)})" for cols in uniques]
        return f"CREATE TABLE IF NOT EXISTS [{table}] (\n  " + ",\n  ".join(parts) + "\n)"

    def create_index(self, table: str, name: str, columns: Sequence[str]) -> str:
        return f"CREATE INDEX IF NOT EXISTS [{name}] ON [{table}] ({', '.join(columns)})"

    def upsert(self, table: str, columns: Sequence[str], key: Sequence[str]) -> str:
        cols = ", ".join(f"[{c}]" for c in columns)
        marks = ", ".join(self.placeholder for _ in columns)
        updates = ", ".join(f"[{c}] = excluded.[{c}]" for c in columns if c not in key)
        return (
            f"INSERT INTO [{table}] ({cols}) VALUES ({marks}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
        )

    def insert(self, table: str, columns: Sequence[str]) -> str:
        cols = ", ".join(f"[{c}]" for c in columns)
        marks = ", ".join(self.placeholder for _ in columns)
        return f"INSERT INTO [{table}] ({cols}) VALUES ({marks})"


def _migration_initial(store: "Store") -> None:
    d = store.dialect
    for table, columns in schema.TABLES.items():
        store.execute(d.create_table(table, columns, schema.UNIQUE.get(table, [])))
    for table, indexes in schema.INDEXES.items():
        for name, columns in indexes.items():
            store.execute(d.create_index(table, name, columns))


# Ordered and append-only: version N is MIGRATIONS[N-1]. schema.TABLES is always
# the current schema, which migration 1 creates whole on a new store; a later
# migration that adds columns must do so with ``store.ensure_columns`` (a no-op
# where they already exist), so that new and upgraded stores end up the same.
MIGRATIONS: list[tuple[str, Callable[["Store"], None]]] = [
    ("initial schema", _migration_initial),
]
SCHEMA_VERSION = len(MIGRATIONS)


class Store:
    """A connection to the archive plus the handful of queries the pipeline needs."""

    def __init__(self, conn: sqlite3.Connection, dialect: Dialect, location: str):
        self.conn = conn
        self.dialect = dialect
        self.location = location
        self._in_tx = False

    # -- plumbing -----------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; rolled back whole on any error."""
        self.conn.execute("BEGIN IMMEDIATE")
        self._in_tx = True
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        else:
            self.conn.commit()
        finally:
            self._in_tx = False

    def close(self) -> None:
        self.conn.close()

    # -- migrations ----------------------------------------------------------

    def schema_version(self) -> int:
        exists = self.query("SELECT name FROM sqlite_master WHERE type='table' AND name='_migrations'")
        if not exists:
            return 0
        row = self.query("SELECT MAX(version) FROM _migrations")
        return row[0][0] or 0

    def migrate(self) -> list[str]:
        """Apply pending migrations; returns their names (empty: nothing to do)."""
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{self.location} has schema version {current}, newer than this AgentBase "
                f"understands ({SCHEMA_VERSION}); upgrade AgentBase to use it"
            )
        applied = []
        if current == SCHEMA_VERSION:
            return applied
        with self.transaction():
            self.execute(
                "CREATE TABLE IF NOT EXISTS _migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)"
            )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                name, step = MIGRATIONS[version - 1]
                step(self)
                self.execute(
                    "INSERT INTO _migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, now_utc()),
                )
                applied.append(name)
        return applied

    def columns(self, table: str) -> list[str]:
        return [r[1] for r in self.query(f"PRAGMA table_info([{table}])")]

    def ensure_columns(self, table: str, names: Sequence[str]) -> None:
        """Add the named columns (typed as in schema.TABLES) where missing."""
        have = set(self.columns(table))
        kinds = dict(schema.TABLES[table])
        for name in names:
            if name not in have:
                self.execute(f"ALTER TABLE [{table}] ADD COLUMN [{name}] {self.dialect.column_type(kinds[name])}")

    # -- reads the pipeline needs ---------------------------------------------

    def parsed_files(self, server: str, agent_id: str) -> dict[str, sqlite3.Row]:
        rows = self.query(
            "SELECT * FROM parsed_files WHERE server = ? AND agent_id = ?", (server, agent_id)
        )
        return {row["file_path"]: row for row in rows}

    def session(self, server: str, agent_id: str, session_uuid: str) -> sqlite3.Row | None:
        rows = self.query(
            "SELECT * FROM sessions WHERE server = ? AND agent_id = ? AND session_uuid = ?",
            (server, agent_id, session_uuid),
        )
        return rows[0] if rows else None

    def session_entries(self, session_id: int) -> list[tuple[str, str | None, int, str, str]]:
        """(entry id, parent id, is_active_path, raw_hash, table) of every archived entry."""
        out = [
            (r[0], r[1], r[2], r[3], "messages")
            for r in self.execute(
                "SELECT message_uuid, parent_message_uuid, is_active_path, raw_hash "
                "FROM messages WHERE session_id = ?",
                (session_id,),
            )
        ]
        out += [
            (r[0], r[1], r[2], r[3], "entries")
            for r in self.execute(
                "SELECT entry_uuid, parent_uuid, is_active_path, raw_hash FROM entries WHERE session_id = ?",
                (session_id,),
            )
        ]
        return out

    def counted_call_keys(self, session_id: int) -> set[str]:
        return {
            r[0]
            for r in self.execute(
                "SELECT call_key FROM messages WHERE session_id = ? AND usage_counted = 1 "
                "AND call_key IS NOT NULL",
                (session_id,),
            )
        }

    def next_id(self, table: str) -> int:
        """The next free id; only valid inside a write transaction (the lock is held)."""
        return (self.query(f"SELECT COALESCE(MAX(id), 0) FROM [{table}]")[0][0]) + 1

    # -- writes ---------------------------------------------------------------

    def insert_rows(self, table: str, rows: list[dict]) -> None:
        if not rows:
            return
        columns = list(rows[0].keys())
        self.executemany(self.dialect.insert(table, columns), [tuple(r[c] for c in columns) for r in rows])

    def upsert_row(self, table: str, row: dict, key: Sequence[str]) -> None:
        columns = list(row.keys())
        self.execute(self.dialect.upsert(table, columns, key), tuple(row[c] for c in columns))

    def update(self, table: str, row_id: int, values: dict) -> None:
        sets = ", ".join(f"[{c}] = ?" for c in values)
        self.execute(f"UPDATE [{table}] SET {sets} WHERE id = ?", (*values.values(), row_id))


def open_store(url: str | None = None, migrate: bool = True) -> Store:
    """Open the archive at ``url`` (``sqlite:///path``) or the embedded default."""
    if url and "://" in url:
        scheme, _, rest = url.partition("://")
        if scheme != "sqlite":
            raise StoreError(
                f"unsupported database URL scheme {scheme!r}: use sqlite:///path/to/file.db"
            )
        # sqlite:///abs/path.db and sqlite:////abs/path.db both mean /abs/path.db.
        if not rest:
            raise StoreError("the SQLite URL names no file: use sqlite:///path/to/file.db")
        path = Path(rest[1:] if rest.startswith("//") else rest)
    elif url:
        path = Path(url)
    else:
        path = default_db_path()
    path = path.expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=60, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        # Large pages: transcripts are mostly long values that would otherwise
        # spill over many 4 KB overflow pages. Only takes effect on a new file.
        conn.execute("PRAGMA page_size = 16384")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 4096")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA busy_timeout = 60000")
        conn.execute("PRAGMA cache_size = -65536")
        conn.execute("PRAGMA foreign_keys = OFF")
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open the store at {path}: {exc}") from None
    store = Store(conn, Dialect(), str(path))
    if migrate:
        try:
            store.migrate()
        except sqlite3.DatabaseError as exc:
            store.close()
            raise StoreError(f"{path} is not an AgentBase store: {exc}") from None
    return store
