"""The system of record: the only package that speaks SQL.

``open_store(url)`` returns a :class:`Store` on the embedded SQLite file (the
zero-setup default), on the file a ``sqlite:///path`` URL names, or on MariaDB
(``mysql://user:password@host:port/database``, through pymysql). The rest of
the code writes one SQL text (``?`` placeholders, ``[name]`` quoting); what
differs between the engines is named in ``dialects.py`` and the two store
classes (``sqlite.py``, ``mariadb.py``), not scattered as ``if mysql:`` branches.

Schema changes are an ordered list of migrations (``migrations.py``) recorded
in ``_migrations``; a store written by a newer AgentBase is refused instead of
being misread.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from urllib.parse import quote

from .common import (  # noqa: F401  (the package's public names)
    BackgroundFailure, Commit, Row, RowRejected, RowTooLarge, StoreError, busy_timeout, default_db_path, now_utc,
    private_file, sqlite_tables, what_is,
)
from .dialects import Dialect, MariaDBDialect  # noqa: F401
from .migrations import MIGRATIONS, SCHEMA_VERSION  # noqa: F401
from .sqlite import Store


def __getattr__(name: str):
    """The MariaDB store's names, imported at their first use (an embedded store's run does without
    the module: a start-up's 4 ms when it is compiled)."""
    if name in ("MariaDBStore", "_open_mariadb", "mask_url"):
        from . import mariadb

        return getattr(mariadb, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ARCHIVE_TABLE = "_migrations"  # every AgentBase archive has it, from its first migration on
SNAPSHOT_TABLE = "agentbase_snapshot"  # the snapshot's marker (shape.MARKER)


def is_mariadb_url(url: str | None) -> bool:
    return bool(url) and url.split("://", 1)[0] in ("mysql", "mariadb", "mysql+pymysql")


def sqlite_path(url: str | None) -> Path | None:
    """The file an archive URL names (``sqlite:///path``, a bare path, or None for the embedded
    default); None for a MariaDB URL."""
    if is_mariadb_url(url):
        return None
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
    return path.expanduser()


def _no_archive(where: str, why: str = "") -> StoreError:
    return StoreError(f"no archive at {where}{why}: run agentbase import")


def _existing_archive(path: Path, create: bool) -> bool:
    """Whether ``path`` holds an AgentBase archive (False: nothing there yet, or an empty file, which
    only ``create`` may make one of). Anything else is refused before it is opened, changed or made
    private: a folder, a device, a FIFO, a file that is not SQLite, a SQLite database of something
    else (a snapshot among them)."""
    try:
        st = os.stat(path)  # a link to an archive is the archive
    except (FileNotFoundError, NotADirectoryError):
        if not create:
            raise _no_archive(str(path)) from None
        return False
    except OSError as exc:
        raise StoreError(f"cannot open the store at {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{path} is {what_is(st.st_mode)}, not an AgentBase archive")
    tables = sqlite_tables(path) if st.st_size else set()
    if tables is None:
        raise StoreError(f"{path} is not an AgentBase archive (not a SQLite database); it was left as it is")
    if ARCHIVE_TABLE in tables:
        return True
    if SNAPSHOT_TABLE in tables:
        raise StoreError(f"{path} is an AgentBase snapshot, not an AgentBase archive: --db names the archive "
                         "that `agentbase import` writes")
    if tables:
        raise StoreError(f"{path} is a SQLite database that is not an AgentBase archive; it was left as it is")
    if not create:
        raise _no_archive(str(path), " (an empty file)")
    return False


def open_store(url: str | None = None, migrate: bool = True, create: bool = True) -> Store:
    """Open the archive at ``url`` (``sqlite:///path``, ``mysql://...``) or the embedded default.

    ``create`` (import, init, sync, watch): a missing SQLite file is made (0600, in folders made
    0700) and an empty database given its tables. Without it (the commands that only read) a
    missing archive is a StoreError saying so, and nothing is made. Either way, what is not an
    archive is refused untouched (see :func:`_existing_archive`)."""
    if is_mariadb_url(url):
        from .mariadb import _open_mariadb

        store = _open_mariadb(url, missing=None if create else _no_archive)
        if not create and store.schema_version() == 0:
            store.close()
            raise _no_archive(store.location, f" (the database {store.database} holds no AgentBase tables)")
        if migrate:
            try:
                store.migrate()
            except BaseException:
                store.close()
                raise
        return store
    path = sqlite_path(url)
    exists = _existing_archive(path, create)
    busy = busy_timeout()
    try:
        private_file(path)  # (an archive made by an AgentBase: never a file of something else)
        # an existing file is opened as one (mode=rw): SQLite never makes a new one in its place
        target = f"file:{quote(str(path))}?mode=rw" if exists else str(path)
        conn = sqlite3.connect(target, isolation_level=None, timeout=busy, check_same_thread=False, uri=exists)
        conn.row_factory = sqlite3.Row
        # Large pages: transcripts are mostly long values that would otherwise
        # spill over many 4 KB overflow pages. Only takes effect on a new file.
        conn.execute("PRAGMA page_size = 16384")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 4096")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA busy_timeout = {int(busy * 1000)}")
        conn.execute("PRAGMA cache_size = -65536")
        conn.execute("PRAGMA foreign_keys = OFF")
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open the store at {path}: {exc}") from None
    store = Store(conn, Dialect(), str(path))
    store.busy_timeout_s = busy
    if migrate:
        try:
            store.migrate()
        except sqlite3.DatabaseError as exc:
            store.close()
            raise StoreError(f"{path} is not an AgentBase store: {exc}") from None
    return store
