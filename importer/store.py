"""The system of record: the only module that speaks SQL.

``open_store(url)`` returns a :class:`Store` on the embedded SQLite file (the
zero-setup default), on the file a ``sqlite:///path`` URL names, or on MariaDB
(``mysql://user:password@host:port/database``, through pymysql). The rest of
the code writes one SQL text (``?`` placeholders, ``[name]`` quoting); what
differs between the engines (DDL types, placeholders, quoting, upserts,
catalog look-ups, locking) is named in :class:`Dialect` and the two
``Store`` classes, not scattered as ``if mysql:`` branches.

Schema changes are an ordered list of migrations recorded in ``_migrations``;
a store written by a newer AgentBase is refused instead of being misread.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import threading
from collections import deque
from urllib.parse import unquote, urlsplit
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
        marks = ", ".join("?" for _ in columns)
        updates = ", ".join(f"[{c}] = excluded.[{c}]" for c in columns if c not in key)
        return (
            f"INSERT INTO [{table}] ({cols}) VALUES ({marks}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
        )

    def insert(self, table: str, columns: Sequence[str]) -> str:
        cols = ", ".join(f"[{c}]" for c in columns)
        marks = ", ".join("?" for _ in columns)
        return f"INSERT INTO [{table}] ({cols}) VALUES ({marks})"


class MariaDBDialect(Dialect):
    """MariaDB/MySQL: utf8mb4 with binary collation (ids and paths compare
    exactly, as in SQLite), DATETIME(3), LONGTEXT for JSON, DOUBLE for money
    (DECIMAL(12,8) would round real sub-cent costs such as 7.77e-09 away)."""

    name = "mariadb"
    types = {
        "pk": "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY",
        "int": "INT",
        "bigint": "BIGINT",
        "bool": "TINYINT",
        "text": "LONGTEXT",
        "json": "LONGTEXT",
        "datetime": "DATETIME(3)",
        "decimal": "DOUBLE",
        "float": "DOUBLE",
    }
    table_options = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin ROW_FORMAT=DYNAMIC"

    def column_type(self, abstract: str) -> str:
        if abstract.startswith("str:"):
            return f"VARCHAR({int(abstract[4:])})"
        return self.types[abstract]

    def create_table(self, table, columns, uniques):
        return super().create_table(table, columns, uniques) + self.table_options

    def upsert(self, table: str, columns: Sequence[str], key: Sequence[str]) -> str:
        cols = ", ".join(f"[{c}]" for c in columns)
        marks = ", ".join("?" for _ in columns)
        updates = ", ".join(f"[{c}] = VALUES([{c}])" for c in columns if c not in key)
        return f"INSERT INTO [{table}] ({cols}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {updates}"

    def insert(self, table: str, columns: Sequence[str]) -> str:
        cols = ", ".join(f"[{c}]" for c in columns)
        marks = ", ".join("?" for _ in columns)
        return f"INSERT INTO [{table}] ({cols}) VALUES ({marks})"

    _BRACKETS = re.compile(r"\[(\w+)\]")

    def translate(self, sql: str) -> str:
        """The project's SQL text -> pymysql's: backquotes, %s placeholders."""
        sql = self._BRACKETS.sub(r"`\1`", sql)
        return sql.replace("%", "%%").replace("?", "%s")


def _migration_initial(store: "Store") -> None:
    d = store.dialect
    for table, columns in schema.TABLES.items():
        store.execute(d.create_table(table, columns, schema.UNIQUE.get(table, [])))
    for table, indexes in schema.INDEXES.items():
        for name, columns in indexes.items():
            store.execute(d.create_index(table, name, columns))


def _migration_openclaw_sqlite_metadata(store: "Store") -> None:
    store.ensure_columns("sessions", [
        "reason", "previous_session_id", "next_session_id", "status", "ended_at",
        "model_provider", "model", "archived_at",
    ])


# Ordered and append-only: version N is MIGRATIONS[N-1]. schema.TABLES is always
# the current schema, which migration 1 creates whole on a new store; a later
# migration that adds columns must do so with ``store.ensure_columns`` (a no-op
# where they already exist), so that new and upgraded stores end up the same.
MIGRATIONS: list[tuple[str, Callable[["Store"], None]]] = [
    ("initial schema", _migration_initial),
    ("openclaw sqlite-era session metadata", _migration_openclaw_sqlite_metadata),
]
SCHEMA_VERSION = len(MIGRATIONS)


class BackgroundFailure(StoreError):
    """Writes handed to the background failed (``cause``): every file whose
    commit had not landed (``Commit.done``) was rolled back or never sent,
    and must be run again."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


class Commit:
    """A deferred transaction's commit: ``done`` once it has landed."""

    __slots__ = ("done",)

    def __init__(self):
        self.done = False


class RowRejected(StoreError):
    """The engine refused a value of one file (too large, out of range...):
    that file fails with this message, the others go on."""


class RowTooLarge(RowRejected):
    """One value does not fit the engine's packet limit."""


class Store:
    """A connection to the archive plus the handful of queries the pipeline needs.

    This class is the embedded SQLite store; :class:`MariaDBStore` overrides
    the plumbing for MariaDB.
    """

    def __init__(self, conn, dialect: Dialect, location: str):
        self.conn = conn
        self.dialect = dialect
        self.location = location
        self._in_tx = False

    @property
    def kind(self) -> str:
        return self.dialect.name

    def retryable(self, exc: BaseException) -> bool:
        """Whether a failed file transaction may simply be run again."""
        return False

    # -- plumbing -----------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    def tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Like :meth:`query`, as plain tuples: cheaper for bulk reads (the export)."""
        cur = self.conn.cursor()
        cur.row_factory = None
        try:
            return cur.execute(sql, params).fetchall()
        finally:
            cur.close()

    @contextmanager
    def transaction(self, defer: bool = False) -> Iterator[None]:
        """One write transaction; rolled back whole on any error.

        ``defer``: the store may finish the commit in the background (see
        :meth:`MariaDBStore.transaction`); the caller must then call
        :meth:`settle` before it counts the work as done. SQLite commits
        at once either way.
        """
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

    last_commit: "Commit | None" = None  # the last deferred transaction's; None: committed at once

    def settle(self) -> None:
        """Wait for every deferred commit; a failure raises
        :class:`BackgroundFailure`. A no-op where commits are never deferred."""

    @property
    def defers_commits(self) -> bool:
        """Whether ``transaction(defer=True)`` can return before the commit is done."""
        return False

    def busy(self) -> bool:
        """Whether writes are still being sent in the background."""
        return False

    def expect(self, groups: Iterable[tuple[str, str]]) -> None:
        """A hint: the (server, agent) groups a run is about to import."""

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
            current = self.schema_version()  # another process may have migrated meanwhile
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

    def parsed_file(self, server: str, agent_id: str, file_path: str):
        rows = self.query(
            "SELECT * FROM parsed_files WHERE server = ? AND agent_id = ? AND file_path = ?",
            (server, agent_id, file_path),
        )
        return rows[0] if rows else None

    def session(self, server: str, agent_id: str, session_uuid: str) -> sqlite3.Row | None:
        """What the writer needs of an archived session (not all its columns:
        MariaDB describes every column of every result, once per file)."""
        rows = self.query(
            "SELECT id, source_rank, leaf_entry_id, header_json FROM sessions "
            "WHERE server = ? AND agent_id = ? AND session_uuid = ?",
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
        return self.next_ids(table)[0]

    def next_ids(self, *tables: str) -> list[int]:
        """The next free id of each table, in one round trip."""
        parts = ", ".join(f"(SELECT COALESCE(MAX(id), 0) FROM [{t}])" for t in tables)
        return [int(v) + 1 for v in self.query(f"SELECT {parts}")[0]]

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


class Row:
    """A result row addressable by position and by column name (as sqlite3.Row)."""

    __slots__ = ("_values", "_index")

    def __init__(self, values: tuple, index: dict[str, int]):
        self._values = values
        self._index = index

    def __getitem__(self, key):
        if isinstance(key, (int, slice)):
            return self._values[key]
        return self._values[self._index[key]]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._index)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._index, self._values))!r})"


# pymysql error codes
_DEADLOCK, _LOCK_WAIT = 1213, 1205
_PACKET_TOO_LARGE = 1153
_BAD_VALUE = {1264, 1292, 1366, 1406, 3140}  # out of range, bad datetime/string, too long, bad JSON
_GONE = {2006, 2013, 2055, 0}


class _Sender:
    """One background thread that runs queued write jobs in order.

    MariaDB spends about as long storing a batch as the importer spends
    parsing the next one; handing the writes that return nothing (inserts,
    updates, COMMIT) to this thread lets the two overlap. The first job that
    fails stores its error and the jobs queued after it are dropped;
    :meth:`wait` hands the error back. At most ``limit`` bytes of statements
    wait in the queue, so memory stays bounded when the server is slower.
    """

    def __init__(self, limit: int = 32 * 2**20):
        self.limit = limit
        self._cond = threading.Condition()
        self._jobs: deque = deque()
        self._queued = 0  # bytes of statements waiting or running
        self._busy = False
        self._closed = False
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="agentbase-sender", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None], size: int = 0) -> None:
        with self._cond:
            while self._queued > self.limit and self.failure is None:
                self._cond.wait()
            if self.failure is not None:
                return  # the transaction is lost anyway: wait() reports why
            self._jobs.append((job, size))
            self._queued += size
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._cond.wait()
                if not self._jobs:
                    return
                job, size = self._jobs.popleft()
                self._busy = True
                skip = self.failure is not None
            try:
                if not skip:
                    job()
            except BaseException as exc:  # handed to the caller by wait()
                with self._cond:
                    self.failure = exc
            finally:
                with self._cond:
                    self._busy = False
                    self._queued -= size
                    self._cond.notify_all()

    def busy(self) -> bool:
        with self._cond:
            return bool(self._jobs) or self._busy

    def wait(self) -> BaseException | None:
        """Wait until every queued job ran; returns (and clears) the first failure."""
        with self._cond:
            while self._jobs or self._busy:
                self._cond.wait()
            failure, self.failure = self.failure, None
            return failure

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()


class MariaDBStore(Store):
    """MariaDB through pymysql. Writers serialise on a named lock, so two
    importers running at once behave as one run after the other (ids stay
    dense, nothing is doubled), and a killed connection releases it (and
    rolls its transaction back) at once.

    Deferred transactions (``transaction(defer=True)``, the importer's file
    transactions) overlap the server's work with the importer's: their
    writes and COMMIT go to a sender thread, the lock is held from the first
    of them until :meth:`settle`, and while it is held the look-ups the
    writer makes for every file (its parsed_files row, its session, the next
    ids) are answered from what this connection read and wrote, so that the
    importer never waits for the server between files.
    """

    def __init__(self, conn, location: str, database: str):
        super().__init__(conn, MariaDBDialect(), location)
        self.database = database
        self.lock_name = f"agentbase:{database}"[:64]
        self._sender: _Sender | None = None
        self._switch: float | None = None
        self._held = False  # the write lock is held across deferred transactions
        self._files: dict[tuple[str, str], dict] = {}  # parsed_files rows by group, while held
        self._sessions: dict[tuple[str, str], dict] = {}  # session look-up rows by group, while held
        self._session_keys: dict[int, tuple[str, str, str]] = {}  # session id -> (server, agent, uuid)
        self._ids: dict[str, int] = {}  # next ids, while held
        self._groups: list[tuple[str, str]] = []  # groups to load at once when the lock is taken
        self.max_packet = int(self._plain("SELECT @@max_allowed_packet")[0][0])

    # -- the background sender ---------------------------------------------

    def _send(self, job: Callable[[], None], size: int = 0) -> None:
        """Run a write that returns nothing on the sender thread, in order."""
        if self._sender is None:
            self._sender = _Sender()
            # A sender waiting for the GIL after each reply would otherwise
            # wait the default 5 ms switch interval while the parser runs.
            self._switch = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch, 0.0001))
        self._sender.submit(job, size)

    def _sync(self) -> None:
        """Before anything that reads or ends a transaction: let every queued
        write land, and raise the first that failed (as a BackgroundFailure
        while deferred transactions are in flight: not the caller's own)."""
        if self._sender is not None:
            failure = self._sender.wait()
            if failure is not None:
                if self._held:
                    self._abandon()
                    raise BackgroundFailure(failure)
                raise failure

    def _guarded(self, action: Callable[[], None]) -> Callable[[], None]:
        """``action`` as a sender job: its pymysql errors become the store's."""
        import pymysql

        def run() -> None:
            try:
                action()
            except pymysql.MySQLError as exc:
                raise self._error(exc) from None

        return run

    def _job(self, sql: str, params: Any = None, many: bool = False) -> Callable[[], None]:
        def action() -> None:
            with self.conn.cursor() as cur:
                if many:
                    cur.executemany(sql, params)
                else:
                    cur.execute(sql, params)

        return self._guarded(action)

    @property
    def defers_commits(self) -> bool:
        return True

    def busy(self) -> bool:
        return self._sender is not None and self._sender.busy()

    def settle(self) -> None:
        """Wait until every deferred commit has landed, then release the
        write lock. On a failure: roll back, release, and raise
        BackgroundFailure (the files whose Commit is not done must run again)."""
        if self._sender is not None:
            failure = self._sender.wait()
            if failure is not None:
                self._abandon()
                raise BackgroundFailure(failure)
        if self._held:
            self._release()

    def _abandon(self) -> None:
        """After a background failure: roll back what is open, drop the lock."""
        import pymysql

        try:
            self.conn.rollback()
        except pymysql.MySQLError:
            pass  # a lost connection: the server rolled back and released the lock
        self._release()

    def _release(self) -> None:
        import pymysql

        self._held = False
        self._forget()
        try:
            self._plain(f"SELECT RELEASE_LOCK('{self.lock_name}')")
        except pymysql.MySQLError:
            pass

    def _forget(self) -> None:
        """Drop the look-up caches: the next look-ups read the store."""
        self._files.clear()
        self._sessions.clear()
        self._session_keys.clear()
        self._ids.clear()

    # -- look-ups answered from the caches while the lock is held ----------

    def expect(self, groups: Iterable[tuple[str, str]]) -> None:
        """The (server, agent) groups a run will import: their look-ups are
        loaded together when the lock is taken, not one by one between
        files (each would wait for the server to finish the queue)."""
        self._groups = sorted(set(groups))

    def _warm(self) -> None:
        for server, agent_id in self._groups:
            self.parsed_file(server, agent_id, "")
            self.session(server, agent_id, "")

    def parsed_file(self, server: str, agent_id: str, file_path: str):
        if not self._held:
            return super().parsed_file(server, agent_id, file_path)
        group = (server, agent_id)
        if group not in self._files:
            self._files[group] = self.parsed_files(server, agent_id)
        return self._files[group].get(file_path)

    def session(self, server: str, agent_id: str, session_uuid: str):
        if not self._held:
            return super().session(server, agent_id, session_uuid)
        group = (server, agent_id)
        if group not in self._sessions:
            rows = self.query(
                "SELECT session_uuid, id, source_rank, leaf_entry_id, header_json FROM sessions "
                "WHERE server = ? AND agent_id = ?",
                (server, agent_id),
            )
            self._sessions[group] = {r[0]: dict(zip(_SESSION_LOOKUP, r[1:])) for r in rows}
            for r in rows:
                self._session_keys[r[1]] = (server, agent_id, r[0])
        found = self._sessions[group].get(session_uuid)
        return _row(found) if found is not None else None

    def next_ids(self, *tables: str) -> list[int]:
        if not self._held:
            return super().next_ids(*tables)
        missing = [t for t in tables if t not in self._ids]
        if missing:
            self._ids.update(zip(missing, super().next_ids(*missing)))
        return [self._ids[t] for t in tables]

    def _wrote(self, table: str, rows: list[dict]) -> None:
        """Keep the caches true to rows this connection wrote."""
        if table in self._ids:
            ids = [r.get("id") for r in rows]
            if None in ids:
                del self._ids[table]
            else:
                self._ids[table] = max(self._ids[table], max(ids) + 1)
        if table == "sessions":
            for r in rows:
                group = (r["server"], r["agent_id"])
                if group in self._sessions:
                    self._sessions[group][r["session_uuid"]] = {c: r.get(c) for c in _SESSION_LOOKUP}
                    self._session_keys[r["id"]] = (*group, r["session_uuid"])

    def _error(self, exc: Exception) -> Exception:
        import pymysql

        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        if isinstance(exc, pymysql.err.InterfaceError) or code in _GONE:
            return StoreError(f"lost the connection to MariaDB ({self.location}): {_first_line(exc)}")
        if code == _PACKET_TOO_LARGE:
            return RowTooLarge(
                f"a value is larger than MariaDB's max_allowed_packet ({self.max_packet // 2**20} MB): "
                "raise it (SET GLOBAL max_allowed_packet=1073741824) and run again"
            )
        if code in _BAD_VALUE:
            return RowRejected(f"MariaDB refused a value: {_first_line(exc)}")
        return exc

    def _plain(self, sql: str):
        self._sync()
        with self.conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()

    def execute(self, sql: str, params: Sequence[Any] = ()):
        import pymysql

        self._sync()
        if self._held and _changes_lookups(sql):
            self._forget()  # a write the caches do not follow
        cur = self.conn.cursor()
        try:
            cur.execute(self.dialect.translate(sql), tuple(params))
        except pymysql.MySQLError as exc:
            raise self._error(exc) from None
        return cur

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """On the sender, like the inserts: statements that return nothing."""
        rows = list(rows)
        if not rows:
            return
        self._send(self._job(self.dialect.translate(sql), rows, many=True), 64 * len(rows))
        if self._held and _changes_lookups(sql):
            self._forget()  # a write the caches do not follow

    def tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        cur = self.execute(sql, params)
        try:
            return list(cur.fetchall()) if cur.description is not None else []
        finally:
            cur.close()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        cur = self.execute(sql, params)
        try:
            if cur.description is None:
                return []
            index = {d[0]: i for i, d in enumerate(cur.description)}
            return [Row(values, index) for values in cur.fetchall()]
        finally:
            cur.close()

    def insert_rows(self, table: str, rows: list[dict]) -> None:
        """Multi-row INSERTs, each under max_allowed_packet, with values
        quoted here: the session runs with NO_BACKSLASH_ESCAPES, so a string
        literal only needs its quotes doubled, which is much cheaper than
        pymysql's general per-value escaping on megabytes of text."""
        if not rows:
            return
        columns = list(rows[0].keys())
        head = f"INSERT INTO `{table}` ({', '.join(f'`{c}`' for c in columns)}) VALUES "
        limit = self.max_packet - 65536
        budget = min(limit, 4 * 2**20)  # per statement: large enough to amortise round trips
        statements: list[str] = []
        values: list[str] = []
        size = 0
        for row in rows:
            # The common types inline (no call per value); the rest through _sql_literal.
            literal = "(" + ",".join([
                "NULL" if v is None else
                ("'" + v.replace("'", "''") + "'" if v.__class__ is str else
                 (str(v) if v.__class__ is int else _sql_literal(v)))
                for v in map(row.get, columns)]) + ")"
            n = len(literal)
            if n * 4 > limit and len(literal.encode()) > limit:
                raise RowTooLarge(
                    f"an entry of {n / 2**20:.1f} MB does not fit MariaDB's max_allowed_packet "
                    f"({self.max_packet // 2**20} MB): raise it (SET GLOBAL max_allowed_packet=1073741824) "
                    "and run again"
                )
            if values and (size + n) * 4 > budget:
                statements.append(head + ",".join(values))
                values, size = [], 0
            values.append(literal)
            size += n
        statements.append(head + ",".join(values))
        for sql in statements:
            self._send(self._job(sql), len(sql))  # no parameters: pymysql sends the text as it is
        if self._held:
            self._wrote(table, rows)

    def upsert_row(self, table: str, row: dict, key: Sequence[str]) -> None:
        columns = list(row.keys())
        self._send(self._job(self.dialect.translate(self.dialect.upsert(table, columns, key)),
                             tuple(row[c] for c in columns)))
        if self._held:
            if table == "parsed_files" and (row["server"], row["agent_id"]) in self._files:
                rows = self._files[(row["server"], row["agent_id"])]
                old = rows.get(row["file_path"])
                names = [name for name, _kind in schema.TABLES["parsed_files"]]
                merged = {n: row[n] if n in row else (old[n] if old is not None else None) for n in names}
                rows[row["file_path"]] = _row(merged)
            elif table == "sessions" or table in self._ids:
                self._forget()

    def update(self, table: str, row_id: int, values: dict) -> None:
        sets = ", ".join(f"`{c}` = %s" for c in values)
        self._send(self._job(f"UPDATE `{table}` SET {sets} WHERE id = %s", (*values.values(), row_id)))
        if self._held:
            key = self._session_keys.get(row_id) if table == "sessions" else None
            if key is not None:
                cached = self._sessions[key[:2]][key[2]]
                for c in _SESSION_LOOKUP:
                    if c in values:
                        cached[c] = values[c]
            elif table != "sessions":
                self._forget()

    @contextmanager
    def transaction(self, defer: bool = False) -> Iterator[None]:
        """One write transaction under the store's named lock.

        With ``defer``, the BEGIN, writes and COMMIT go to the sender and this
        returns at once (``last_commit`` tells when it landed); the lock stays
        held for the next deferred transaction, until :meth:`settle`, which
        the caller must call before anything else.
        """
        import pymysql

        if not defer or not self._held:
            self.settle()
            try:
                got = self._plain(f"SELECT GET_LOCK('{self.lock_name}', 3600)")[0][0]
                if got != 1:
                    raise StoreError(f"could not get the write lock on {self.location}")
            except pymysql.MySQLError as exc:
                raise self._error(exc) from None
            self._held = defer
            if defer:
                self._warm()
        self._in_tx = True
        try:
            if defer:
                self._send(self._guarded(self.conn.begin))
                yield
                commit = Commit()
                self._send(self._commit_job(commit))
                self.last_commit = commit
                return
            try:
                self.conn.begin()
            except pymysql.MySQLError as exc:
                raise self._error(exc) from None
            yield
            self._sync()
            try:
                self.conn.commit()
            except pymysql.MySQLError as exc:
                raise self._error(exc) from None
            self.last_commit = None
        except BackgroundFailure:
            raise  # rolled back and released by _sync
        except BaseException:
            failure = self._sender.wait() if self._sender is not None else None
            if failure is not None and defer:
                # An earlier file's writes failed in the background: it and
                # this one must run again.
                self._abandon()
                raise BackgroundFailure(failure) from None
            try:
                self.conn.rollback()
            except pymysql.MySQLError:
                pass  # the server rolls back a transaction whose connection is gone
            if defer:
                self._forget()  # they may hold this file's rolled-back rows
            raise
        finally:
            self._in_tx = False
            if not defer:
                try:
                    self._plain(f"SELECT RELEASE_LOCK('{self.lock_name}')")
                except pymysql.MySQLError:
                    pass

    def _commit_job(self, commit: Commit) -> Callable[[], None]:
        def action() -> None:
            self.conn.commit()
            commit.done = True

        return self._guarded(action)

    def retryable(self, exc: BaseException) -> bool:
        import pymysql

        return isinstance(exc, pymysql.err.OperationalError) and exc.args[:1] in ((_DEADLOCK,), (_LOCK_WAIT,))

    def schema_version(self) -> int:
        exists = self.query(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() "
            "AND table_name = '_migrations'"
        )
        if not exists[0][0]:
            return 0
        return self.query("SELECT MAX(version) FROM _migrations")[0][0] or 0

    def columns(self, table: str) -> list[str]:
        return [
            r[0]
            for r in self.query(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() "
                "AND table_name = ? ORDER BY ordinal_position",
                (table,),
            )
        ]

    def close(self) -> None:
        if self._sender is not None:
            self._sender.wait()  # a queued COMMIT belongs to a finished file: let it land
            self._held = False  # closing the connection releases the lock
            self._sender.close()
            self._sender = None
            sys.setswitchinterval(self._switch)
        try:
            self.conn.close()
        except Exception:  # already gone
            pass


_SESSION_LOOKUP = ("id", "source_rank", "leaf_entry_id", "header_json")
_KEEPS_LOOKUPS = re.compile(r"\s*(SELECT\b|UPDATE\s+[\[`]?(messages|tool_calls|entries)\b)", re.I)


def _changes_lookups(sql: str) -> bool:
    """Whether a statement may change what MariaDBStore answers from its
    caches (parsed_files rows, sessions, next ids): anything but a SELECT or
    an UPDATE of messages, tool_calls or entries (ids never change)."""
    return _KEEPS_LOOKUPS.match(sql) is None


def _row(values: dict) -> "Row":
    return Row(tuple(values.values()), {name: i for i, name in enumerate(values)})


def _sql_literal(value) -> str:
    """A value as a MariaDB literal under NO_BACKSLASH_ESCAPES."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return "NULL"
        return repr(value)
    if isinstance(value, (bytes, bytearray)):
        return "X'" + bytes(value).hex() + "'"
    raise TypeError(f"cannot store a {type(value).__name__}")


def _first_line(exc: BaseException) -> str:
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def mask_url(url: str) -> str:
    """A database URL with its password replaced by ***, also when the
    password holds characters a URL parser would cut it at (/ # ? @)."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at < 0:
        return url
    user, colon, _password = rest[:at].partition(":")
    if not colon:
        return url
    return f"{scheme}://{user}:***@{rest[at + 1:]}"


_URL_HINT = ("write it as mysql://user@host:3306/database and set AGENTBASE_DB_PASSWORD "
             "(or percent-encode / # ? @ : in a password written in the URL)")


def _open_mariadb(url: str) -> MariaDBStore:
    import pymysql
    from pymysql.constants import FIELD_TYPE
    from pymysql.converters import conversions

    parts = urlsplit(url)
    database = unquote(parts.path.lstrip("/"))
    if not database:
        raise StoreError(f"the MariaDB URL {mask_url(url)} names no database: {_URL_HINT}")
    try:
        host, port = parts.hostname or "127.0.0.1", parts.port or 3306
    except ValueError:  # its text may hold a piece of the password: never shown
        raise StoreError(f"cannot read the host and port of the MariaDB URL {mask_url(url)}: {_URL_HINT}") from None
    password = unquote(parts.password) if parts.password is not None else os.environ.get("AGENTBASE_DB_PASSWORD", "")
    conv = dict(conversions)
    # Datetimes come back as the same text the SQLite store holds.
    conv[FIELD_TYPE.DATETIME] = str
    conv[FIELD_TYPE.TIMESTAMP] = str
    conv[FIELD_TYPE.NEWDECIMAL] = float
    try:
        conn = pymysql.connect(
            host=host, port=port, user=unquote(parts.username or "root"), password=password,
            database=database, charset="utf8mb4", autocommit=True, conv=conv,
            connect_timeout=10, read_timeout=3600, write_timeout=3600, max_allowed_packet=2**30,
        )
        conn.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        # NO_BACKSLASH_ESCAPES: pymysql then only doubles quotes, several times
        # faster than its backslash escaping on megabytes of transcript text.
        conn.query("SET SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION,NO_BACKSLASH_ESCAPES'")
    except pymysql.MySQLError as exc:
        raise StoreError(f"cannot connect to MariaDB at {host}:{port}/{database}: {_first_line(exc)}") from None
    return MariaDBStore(conn, mask_url(url), database)


def open_store(url: str | None = None, migrate: bool = True) -> Store:
    """Open the archive at ``url`` (``sqlite:///path``, ``mysql://...``) or the embedded default."""
    if url and url.split("://", 1)[0] in ("mysql", "mariadb", "mysql+pymysql"):
        store = _open_mariadb(url)
        if migrate:
            try:
                store.migrate()
            except BaseException:
                store.close()
                raise
        return store
    if url and "://" in url:
        scheme, _, rest = url.partition("://")
        if scheme != "sqlite":
            raise StoreError(
                f"unsupported database URL scheme {scheme!r}: use sqlite:///path/to/file.db "
                "or mysql://user@host:3306/database"
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
