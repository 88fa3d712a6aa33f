"""Opening a source's SQLite database read-only, with an authorizer: the one
opener of every kind that reads a live database (OpenClaw's store, the
agent-server's ``agent.db``, Crush's and OpenCode's databases, ...), and
:class:`Database`, such a database as a container of units. A helper of the kinds.

The connection may read only the tables its kind names: every other table
(the credential tables first: OpenClaw's ``auth_profile_*``, the
agent-server's ``api_keys``, ...) is refused by SQLite itself, not just left
out of the queries; so are writes, ``ATTACH``, temporary objects and every
pragma but the few named here (``table_info``/``table_xinfo`` only of a
readable table).

``mode=ro`` keeps WAL semantics: committed rows still in ``-wal`` are seen,
readers never block the writer, the writer's open transaction is not seen.
``immutable=1`` (which ignores the WAL) is the fallback only for a file
SQLite cannot open read-only in place (a read-only folder without its
``-shm``) that has no ``-wal`` at all; never for a locked or busy one.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import urllib.parse
from contextlib import contextmanager
from typing import Callable, Iterator

from ..units import Container, Opened, SourceError, Unit

BUSY_TIMEOUT_S = 10.0
# Every readable database also lets its schema be read.
SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"})
PRAGMAS = frozenset({"query_only", "busy_timeout", "user_version", "table_info", "table_xinfo", "journal_mode"})
_TABLE_PRAGMAS = ("table_info", "table_xinfo")


def authorizer(readable: frozenset[str]) -> Callable[..., int]:
    """The authorizer of a connection that may read ``readable`` (and the schema) only."""
    tables = frozenset(readable) | SCHEMA_TABLES

    def check(action: int, arg1, arg2, _db, _source) -> int:
        if action == sqlite3.SQLITE_READ:
            return sqlite3.SQLITE_OK if (arg1 or "") in tables else sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name not in PRAGMAS or (name in _TABLE_PRAGMAS and (arg2 or "") not in tables):
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_TRANSACTION):
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY  # no writes, no ATTACH, no temp objects

    return check


def connect(path: str | os.PathLike, readable: frozenset[str], timeout: float | None = None,
            error: type[SourceError] = SourceError) -> sqlite3.Connection:
    """A read-only connection to a database that may be in use, allowed to read
    ``readable`` only; a database that cannot be opened raises ``error`` (one
    line naming the path)."""
    timeout = BUSY_TIMEOUT_S if timeout is None else timeout
    path = os.path.abspath(os.fspath(path))
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro"
    check = authorizer(readable)
    try:
        return _open(uri, timeout, check)
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        cannot_open = (code is not None and (code & 0xFF) in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY)) or (
            code is None and ("unable to open" in str(exc) or "readonly" in str(exc)))
        if not cannot_open or os.path.exists(path + "-wal") or not os.path.isfile(path):
            raise error(f"cannot open {path} read-only: {exc}") from None
        try:
            return _open(uri + "&immutable=1", timeout, check)
        except sqlite3.Error as exc2:
            raise error(f"cannot open {path} read-only: {exc2}") from None


@contextmanager
def connect_copy(fs, path: str, tables, readable: frozenset[str], *,
                 opener: Callable[[str], sqlite3.Connection] | None = None,
                 indexes: dict[str, str] | None = None, private_copy: bool = False) -> Iterator[sqlite3.Connection]:
    """``connect`` to ``fs.sqlite_copy`` of the database at ``path`` (its ``tables``: the file itself
    on this machine, a consistent copy from another server): errors name ``path``, never the copy;
    the connection is closed on leaving.

    ``opener``: the kind's own ``connect`` of a path (``readable`` already in it); ``indexes``: table ->
    columns of the indexes the kind's reads need, added to a copy from another server (which has its
    tables without their indexes); ``private_copy``: a database of this machine that SQLite cannot open
    read-only in place (a read-only folder with a ``-wal`` but no usable ``-shm``) is read from a
    private writable copy of the file and its ``-wal``."""
    open_path = opener or (lambda local: connect(local, readable))
    with fs.sqlite_copy(path, sorted(tables)) as local:
        if indexes and fs.remote:
            _index_copy(local, indexes)
        tmp = None
        try:
            try:
                conn = open_path(local)
            except SourceError:
                if not private_copy or fs.remote:
                    raise
                tmp = tempfile.mkdtemp(prefix="agentbase-readonly-")
                copy = os.path.join(tmp, "copy.db")
                for suffix in ("", "-wal"):
                    if suffix == "" or fs.stat(path + suffix) is not None:
                        with fs.open(path + suffix) as src, open(copy + suffix, "wb") as dst:
                            shutil.copyfileobj(src, dst)
                conn = open_path(copy)
        except SourceError as exc:
            raise SourceError(str(exc).replace(local, path)) from None
        try:
            yield conn
        finally:
            conn.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)


def with_wal(fs, path: str, listed: tuple[int, int], out) -> tuple[int, int] | None:
    """A live SQLite database's (size, mtime) as its change token sees them: its ``-wal``'s bytes and
    time added, since committed rows may sit there (an empty ``-wal``, as a reader's open may leave,
    holds nothing). None, the reason said in ``out.errors``, when the ``-wal`` cannot be looked at."""
    size, mtime = listed
    try:
        wal = fs.stat(path + "-wal")
    except OSError as exc:
        out.errors.append(f"cannot stat {path}-wal: {exc.strerror or exc}")
        return None
    if wal is not None and wal[0] == "file" and wal[1] > 0:
        size, mtime = size + wal[1], max(mtime, wal[2])
    return size, mtime


class Layout:
    """The columns of the tables of ``readable`` a database has (a kind's schema check is its
    subclass's): which are there, and a select list that reads a missing column as NULL."""

    def __init__(self, conn: sqlite3.Connection, readable: frozenset[str]):
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            self.columns = {t: {r[1] for r in conn.execute(f"PRAGMA table_info([{t}])")}
                            for t in sorted(names & readable)}
        except sqlite3.Error as exc:
            raise SourceError(f"cannot read the schema: {exc}") from None

    def has(self, table: str, *columns: str) -> bool:
        cols = self.columns.get(table)
        return cols is not None and all(c in cols for c in columns)

    def select(self, table: str, columns: tuple[str, ...], alias: str = "") -> str:
        have = self.columns.get(table, set())
        prefix = f"{alias}." if alias else ""
        return ", ".join(f"{prefix}[{c}]" if c in have else f"NULL AS [{c}]" for c in columns)


def _index_copy(path: str, indexes: dict[str, str]) -> None:
    """Add ``indexes`` (table -> columns) to the tables a copy has: the copy is this run's own
    temporary file, never the server's database."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, cols in indexes.items():
            if table in names:
                conn.execute(f"CREATE INDEX IF NOT EXISTS agentbase_{table} ON {table} ({cols})")
    except sqlite3.Error as exc:
        raise SourceError(f"cannot index the copy of the database: {exc}") from None
    finally:
        conn.close()


class Database(Container):
    """A source's SQLite database as a container: its units are listed (:meth:`_units`) from one
    read-only connection (:meth:`connect`) once its kind's :attr:`layout` has checked the schema;
    what goes wrong is one :class:`SourceError` naming the database."""

    layout: type[Layout]

    def __init__(self, *args, scope, **kw):
        super().__init__(*args, **kw)
        self.scope = scope

    @classmethod
    def list_into(cls, out, source, fs, path: str, scope, agent: str, listed: tuple[int, int]) -> "Database | None":
        """The database at ``path`` listed into ``out`` (a ``Discovery``) as ``agent``'s, its change token
        its ``-wal``'s too (:func:`with_wal`); None when it is listed already or its ``-wal`` cannot be
        looked at."""
        if out.has(scope.server, path):
            return None
        token = with_wal(fs, path, listed, out)
        if token is None:
            return None
        size, mtime = token
        container = cls(source, scope.server, agent, path, fs.basename(path), size, mtime, fs=fs, scope=scope)
        out.add(container)
        return container

    def connect(self):
        """A context manager giving the connection the units are listed and read from."""
        raise NotImplementedError

    def _units(self, conn: sqlite3.Connection, layout: Layout) -> list[Unit]:
        raise NotImplementedError

    @contextmanager
    def open(self) -> Iterator[Opened]:
        with self.connect() as conn:
            try:
                layout = self.layout(conn)
                units = self._units(conn, layout)
            except SourceError as exc:
                raise SourceError(f"{self.path}: {exc}") from None
            except sqlite3.Error as exc:
                raise SourceError(f"{self.path}: cannot list the sessions: {exc}") from None
            yield Opened(units)


def _open(uri: str, timeout: float, check: Callable[..., int]) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.set_authorizer(check)
        conn.execute("PRAGMA query_only = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()  # really open it now
    except BaseException:
        conn.close()
        raise
    return conn
