"""The embedded SQLite store: the zero-setup default, and the base class whose
reads and writes MariaDBStore shares."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence

from .. import declared, schema
from .batch import WriteBatch
from .common import StoreError, now_utc
from .dialects import Dialect
from .migrations import CHANGE_COUNTER, CHANGES, MIGRATIONS, SCHEMA_VERSION, ensure_source_tables


class Store:
    """A connection to the archive plus the handful of queries the pipeline needs.

    This class is the embedded SQLite store; :class:`MariaDBStore` overrides
    the plumbing for MariaDB.
    """

    busy_timeout_s = 60.0

    def __init__(self, conn, dialect: Dialect, location: str):
        self.conn = conn
        self.dialect = dialect
        self.location = location
        self._in_tx = False
        self._touched: set[int] = set()
        self._has_log: set[str] | None = None

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
    def transaction(self) -> Iterator[None]:
        """One write transaction; rolled back whole on any error."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._error(exc, "cannot start writing to") from None
        self._in_tx = True
        self._touched.clear()
        try:
            yield
            self._write_touched()
        except sqlite3.OperationalError as exc:
            self._rollback()
            raise self._error(exc, "stopped writing to") from None
        except BaseException:
            self._rollback()
            raise
        else:
            try:
                self.conn.commit()
            except sqlite3.OperationalError as exc:
                self._rollback()
                raise self._error(exc, "cannot commit to") from None
        finally:
            self._in_tx = False
            self._touched.clear()

    # -- the change log -------------------------------------------------------
    #
    # Every write transaction that changes a session's rows (the session, its
    # messages, tool calls, entries, revisions, a source kind's rows of it)
    # records the session in ``_changes`` with the transaction's number from
    # ``_change_counter``: the snapshot update (snapshot/update.py) re-reads exactly the
    # sessions whose number is above the one it last applied. Writers hold the
    # store's write lock, so numbers follow the commit order. Inserts of rows
    # with a ``session_id`` and writes of ``sessions`` rows through
    # insert_rows / upsert_row / update mark themselves; a raw UPDATE or DELETE
    # of a session's rows must call :meth:`touch`.

    def touch(self, session_ids: Iterable[int | None]) -> None:
        """Mark sessions as changed by the current write transaction."""
        self._touched.update(int(i) for i in session_ids if i is not None)
        if not self._in_tx:
            self._write_touched()

    def _note_rows(self, table: str, rows: Iterable[dict]) -> None:
        if table == "sessions":
            self.touch(r.get("id") for r in rows)
        else:
            self.touch(r.get("session_id") for r in rows)

    def _write_touched(self) -> None:
        if not self._touched or CHANGES not in self._log_tables():
            return
        ids = sorted(self._touched)
        self._touched.clear()
        self.executemany(f"UPDATE {CHANGE_COUNTER} SET n = n + 1 WHERE id = ?", [(1,)])
        self.executemany(self.dialect.mark_changed(), [(i,) for i in ids])

    def _log_tables(self) -> set[str]:
        """The change log's tables once they exist (a store before migration 7 has none)."""
        if self._has_log is None:
            have = self.tables()
            self._has_log = {CHANGES} if CHANGES in have and CHANGE_COUNTER in have else set()
        return self._has_log

    def change_seq(self) -> int:
        """The number of the last write transaction that changed a session (0: none yet)."""
        if CHANGES not in self._log_tables():
            return 0
        rows = self.tuples(f"SELECT n FROM {CHANGE_COUNTER} WHERE id = 1")
        return int(rows[0][0]) if rows else 0

    def archive_number(self) -> int | None:
        """A random number this archive drew when its change log began (None: no log yet)."""
        if CHANGES not in self._log_tables():
            return None
        rows = self.tuples(f"SELECT n FROM {CHANGE_COUNTER} WHERE id = 2")
        return int(rows[0][0]) if rows else None

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One read transaction: every read inside sees the same committed state of the store
        (the export's, so that a commit landing meanwhile is either all in the snapshot or not at all)."""
        if self._in_tx:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error:
                pass

    def changed_sessions(self, after: int, upto: int) -> list[int]:
        """The sessions changed by transactions ``after < number <= upto``."""
        if CHANGES not in self._log_tables():
            return []
        return [r[0] for r in self.tuples(f"SELECT session_id FROM {CHANGES} WHERE seq > ? AND seq <= ? "
                                          "ORDER BY session_id", (after, upto))]

    def _rollback(self) -> None:
        try:
            self.conn.rollback()
        except sqlite3.Error:
            pass  # nothing to roll back, or SQLite already did (a full disk)

    def _error(self, exc: sqlite3.OperationalError, doing: str) -> StoreError:
        """What a user can act on, in one line: the store is locked past the busy
        timeout, the disk is full, a file-size limit was hit. The transaction was
        rolled back: a rerun completes the work."""
        text = str(exc)
        if "locked" in text or "busy" in text:
            why = (f"another program holds its write lock (waited {self.busy_timeout_s:g} s; "
                   "AGENTBASE_BUSY_TIMEOUT sets how long)")
        elif "full" in text:
            why = "the disk is full"
        elif "I/O" in text or "disk" in text:
            why = f"a write failed ({text}: a full disk or a file-size limit?)"
        else:
            why = text
        return StoreError(f"{doing} the store {self.location}: {why}; nothing of the unit in progress was kept, "
                          "a rerun goes on from there")

    def batch(self, units: list, landed) -> WriteBatch:
        """A run's units into the store, each committed at once (see batch.py):
        ``with store.batch(units, landed) as b: b.submit(unit, job)``."""
        return WriteBatch(self, units, landed)

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
            self._source_tables()
            self._log_tables()
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
            ensure_source_tables(self)
        self._has_log = None
        self._log_tables()
        return applied

    def _source_tables(self) -> None:
        """Source kinds' own tables, when one is missing or lacks a column."""
        kinds_tables = declared.source_tables()
        if not kinds_tables:
            return
        have = self.tables()
        if all(t in have and {c for c, _ in cols} <= set(self.columns(t)) for t, cols in kinds_tables.items()):
            return
        with self.transaction():
            ensure_source_tables(self)

    def tables(self) -> set[str]:
        return {r[0] for r in self.query("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def columns(self, table: str) -> list[str]:
        return [r[1] for r in self.query(f"PRAGMA table_info([{table}])")]

    def ensure_columns(self, table: str, names: Sequence[str]) -> None:
        """Add the named columns (typed as in the schema) where missing."""
        have = set(self.columns(table))
        kinds = dict(declared.all_tables()[table])
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

    def session_call_ids(self, session_id: int) -> dict[str, int]:
        """call id -> tool_calls row id, for the calls of a session that have an id."""
        return {r[0]: r[1] for r in self.execute(
            "SELECT call_id, id FROM tool_calls WHERE session_id = ? AND call_id IS NOT NULL", (session_id,))}

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
        self._note_rows(table, rows)

    def upsert_row(self, table: str, row: dict, key: Sequence[str]) -> None:
        columns = list(row.keys())
        self.execute(self.dialect.upsert(table, columns, key), tuple(row[c] for c in columns))
        self._note_rows(table, (row,))

    def update(self, table: str, row_id: int, values: dict) -> None:
        sets = ", ".join(f"[{c}] = ?" for c in values)
        self.execute(f"UPDATE [{table}] SET {sets} WHERE id = ?", (*values.values(), row_id))
        if table == "sessions":
            self.touch((row_id,))

