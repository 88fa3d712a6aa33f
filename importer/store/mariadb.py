"""MariaDB through pymysql: the system of record for several servers, with its
write-behind sender: an import's transactions commit in the background, behind
a :class:`batch.DeferredWriteBatch` (``store.batch()``), so that nothing above
the store knows they are deferred."""

from __future__ import annotations

import os
import re
import sys
import threading
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence
from urllib.parse import unquote, urlsplit

from .. import schema
from .batch import DeferredWriteBatch
from .common import BackgroundFailure, Commit, Row, RowRejected, RowTooLarge, StoreError, _row
from .dialects import MariaDBDialect
from .sqlite import Store


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

    Deferred transactions (``transaction(defer=True)``, and every
    transaction a :meth:`batch`'s job runs: the importer's unit
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
        self._deferring = False  # inside deferring(): every transaction is deferred
        self.last_commit: Commit | None = None  # the last deferred transaction's
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

    def batch(self, units: list, landed) -> DeferredWriteBatch:
        """A run's units, their commits deferred (see batch.py)."""
        return DeferredWriteBatch(self, units, landed)

    @contextmanager
    def deferring(self) -> Iterator[None]:
        """Every transaction begun inside is deferred (``transaction(defer=True)``)."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False

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
        self._note_rows(table, rows)

    def upsert_row(self, table: str, row: dict, key: Sequence[str]) -> None:
        columns = list(row.keys())
        self._send(self._job(self.dialect.translate(self.dialect.upsert(table, columns, key)),
                             tuple(row[c] for c in columns)))
        self._note_rows(table, (row,))
        if self._held:
            if table == "parsed_files" and (row["server"], row["agent_id"]) in self._files:
                rows = self._files[(row["server"], row["agent_id"])]
                old = rows.get(row["file_path"])
                names = [name for name, _kind in schema.TABLES["parsed_files"]]  # a core table
                merged = {n: row[n] if n in row else (old[n] if old is not None else None) for n in names}
                rows[row["file_path"]] = _row(merged)
            elif table == "sessions" or table in self._ids:
                self._forget()

    def update(self, table: str, row_id: int, values: dict) -> None:
        sets = ", ".join(f"`{c}` = %s" for c in values)
        self._send(self._job(f"UPDATE `{table}` SET {sets} WHERE id = %s", (*values.values(), row_id)))
        if table == "sessions":
            self.touch((row_id,))
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
    def reading(self) -> Iterator[None]:
        """One consistent read (REPEATABLE READ snapshot) for everything read inside."""
        if self._in_tx:
            yield
            return
        self.settle()
        self._plain("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        try:
            yield
        finally:
            try:
                self._plain("COMMIT")
            except Exception:  # the connection is gone: nothing to end
                pass

    @contextmanager
    def transaction(self, defer: bool = False) -> Iterator[None]:
        """One write transaction under the store's named lock.

        With ``defer``, the BEGIN, writes and COMMIT go to the sender and this
        returns at once (``last_commit`` tells when it landed); the lock stays
        held for the next deferred transaction, until :meth:`settle`, which
        the caller must call before anything else.
        """
        import pymysql

        defer = defer or self._deferring
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
        self._touched.clear()
        try:
            if defer:
                self._send(self._guarded(self.conn.begin))
                yield
                self._write_touched()
                commit = Commit()
                self._send(self._commit_job(commit))
                self.last_commit = commit
                return
            try:
                self.conn.begin()
            except pymysql.MySQLError as exc:
                raise self._error(exc) from None
            yield
            self._write_touched()
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
            self._touched.clear()
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

    def tables(self) -> set[str]:
        return {r[0] for r in self.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")}

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
_KEEPS_LOOKUPS = re.compile(r"\s*(SELECT\b|UPDATE\s+[\[`]?(messages|tool_calls|entries|_change_counter)\b"
                            r"|INSERT\s+INTO\s+_changes\b)", re.I)


def _changes_lookups(sql: str) -> bool:
    """Whether a statement may change what MariaDBStore answers from its
    caches (parsed_files rows, sessions, next ids): anything but a SELECT,
    an UPDATE of messages, tool_calls or entries (ids never change) or a
    write of the change log."""
    return _KEEPS_LOOKUPS.match(sql) is None



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


_UNKNOWN_DATABASE = 1049


def _open_mariadb(url: str, missing: Callable[[str, str], StoreError] | None = None) -> MariaDBStore:
    """Connect to the database ``url`` names. It is never created here: when it does not exist,
    ``missing(where, why)`` makes the error (the read-only commands' "no archive at ..."), else
    the connection's error is the message."""
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
        if missing is not None and exc.args[:1] == (_UNKNOWN_DATABASE,):
            raise missing(mask_url(url), f" (the database {database} does not exist on {host}:{port}; create it "
                          "with CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, then)") from None
        raise StoreError(f"cannot connect to MariaDB at {host}:{port}/{database}: {_first_line(exc)}") from None
    return MariaDBStore(conn, mask_url(url), database)

