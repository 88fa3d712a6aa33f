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

import sqlite3
from pathlib import Path

from .common import (  # noqa: F401  (the package's public names)
    BackgroundFailure, Commit, Row, RowRejected, RowTooLarge, StoreError, busy_timeout, default_db_path, now_utc,
    private_file,
)
from .dialects import Dialect, MariaDBDialect  # noqa: F401
from .mariadb import MariaDBStore, _open_mariadb, mask_url  # noqa: F401
from .migrations import MIGRATIONS, SCHEMA_VERSION  # noqa: F401
from .sqlite import Store


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
    busy = busy_timeout()
    try:
        private_file(path)
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=busy, check_same_thread=False)
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
