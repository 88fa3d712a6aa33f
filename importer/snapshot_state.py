"""The snapshot's private companion, ``<stem>-state.db`` beside it (0600).

An in-place update (snapshot/update.py) needs two things the served snapshot must not
hold: the credential values found so far (each new row is redacted with them,
and a value found later is also taken out of the rows exported before it) and
a hash of every archive row as it was last copied (a row is copied again only
when its hash changed). A full build writes a new state file with the new
snapshot; an update changes both, and both carry the same ``snapshot_id`` and
``generation``: when they disagree (a run killed between the two commits, a
snapshot copied without its state) the next export rebuilds in full.

Row hashes are the first 64 bits of the SHA-256 of the archive row's values as
read (orjson-encoded): about 3 GB/s to encode and 1.5 GB/s to hash, with the
processor's SHA instructions (BLAKE2b, in Python's own C, did 0.8 GB/s here:
three seconds more of a million messages' full build). A state file of other
hashes is not wrong, only slower once: every row of a changed session then
looks changed and is written again.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import orjson

from .store import private_file

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE IF NOT EXISTS secrets (value TEXT PRIMARY KEY, kind TEXT) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS rows (tab INTEGER, id INTEGER, hash INTEGER, PRIMARY KEY (tab, id)) WITHOUT ROWID",
)


def state_path(snapshot: Path) -> Path:
    """``snapshot.db`` -> ``snapshot-state.db``."""
    snapshot = Path(snapshot)
    return snapshot.with_name(snapshot.stem + "-state.db")


def row_hash(row: tuple) -> int:
    """A signed 64-bit digest of an archive row's values (a SQLite INTEGER)."""
    digest = hashlib.sha256(orjson.dumps(row, default=str)).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


# Seconds a connection of a build waits for a lock on its own files (this state file, the snapshot being
# built, the worker's index and list): only the build's two processes use them, but a loaded machine can
# hold one past sqlite3's default 5 s (a CI run saw "database is locked" once, with two test suites at once).
BUSY_WAIT = 60


class State:
    """One open state file."""

    def __init__(self, path: Path, create: bool = False):
        self.path = Path(path)
        if create:
            private_file(self.path)
        elif not self.path.is_file():
            raise FileNotFoundError(self.path)
        self.conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=BUSY_WAIT)
        if create:
            self.conn.execute("PRAGMA journal_mode = OFF")  # a new file: a failed build discards it whole
            self.conn.execute("PRAGMA synchronous = OFF")
        else:
            self.conn.execute("PRAGMA journal_mode = DELETE")
        for ddl in SCHEMA:
            self.conn.execute(ddl)

    # -- facts -----------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta"))

    def set_meta(self, values: dict) -> None:
        self.conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                              [(k, None if v is None else str(v)) for k, v in values.items()])

    # -- the credential values ---------------------------------------------------------------

    def secrets(self) -> list[tuple[str, str]]:
        return list(self.conn.execute("SELECT value, kind FROM secrets"))

    def add_secrets(self, values) -> None:
        self.conn.executemany("INSERT OR REPLACE INTO secrets (value, kind) VALUES (?, ?)", list(values))

    # -- row hashes --------------------------------------------------------------------------

    def put(self, tab: int, pairs) -> None:
        """(id, hash) pairs of table number ``tab``."""
        self.conn.executemany(f"INSERT OR REPLACE INTO rows (tab, id, hash) VALUES ({int(tab)}, ?, ?)", pairs)

    def drop(self, tab: int, ids) -> None:
        self.conn.executemany(f"DELETE FROM rows WHERE tab = {int(tab)} AND id = ?", [(i,) for i in ids])

    def hashes(self, tab: int, ids=None) -> dict[int, int]:
        """id -> hash of table ``tab``'s rows (all of them when ``ids`` is None)."""
        if ids is None:
            return dict(self.conn.execute("SELECT id, hash FROM rows WHERE tab = ?", (tab,)))
        out: dict[int, int] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            out.update(self.conn.execute(
                f"SELECT id, hash FROM rows WHERE tab = ? AND id IN ({', '.join('?' * len(chunk))})", (tab, *chunk)))
        return out

    # -- transactions --------------------------------------------------------------------------

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.execute("COMMIT")
        if self.conn.in_transaction:  # (never: COMMIT ends it)
            self.conn.execute("COMMIT")

    def rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def close(self) -> None:
        self.conn.close()

    def fsync(self) -> None:
        with open(self.path, "rb+") as f:
            os.fsync(f.fileno())
