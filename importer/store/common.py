"""What every part of the store shares: its errors, the deferred-commit token,
result rows, the embedded store's default place and the UTC clock."""

from __future__ import annotations

import os
import sqlite3
import stat
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote


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




def _row(values: dict) -> Row:
    return Row(tuple(values.values()), {name: i for i, name in enumerate(values)})


def busy_timeout() -> float:
    """How long a write waits for another writer's lock on the embedded store:
    ``$AGENTBASE_BUSY_TIMEOUT`` seconds, else 60."""
    try:
        value = float(os.environ.get("AGENTBASE_BUSY_TIMEOUT", "60"))
    except ValueError:
        raise StoreError("AGENTBASE_BUSY_TIMEOUT must be a number of seconds") from None
    return max(value, 0.0)


def private_file(path: Path) -> None:
    """The archive and the snapshot hold credentials (the store keeps the
    originals): a file only its owner can read (0600), in folders this creates
    only its owner can enter (0700). An existing file that others could read is
    made private too, with its -wal and -shm."""
    path = Path(path)
    missing = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        return
    for one in (path, Path(str(path) + "-wal"), Path(str(path) + "-shm")):
        try:
            st = one.stat()
            if st.st_uid == os.getuid() and st.st_mode & 0o077:
                one.chmod(st.st_mode & 0o700)
        except OSError:
            pass  # not there, or not ours: left as it is


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def what_is(mode: int) -> str:
    """An inode type in words, for the one-line refusals: "a folder", "a device", ..."""
    for test, words in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
                        (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a link"),
                        (stat.S_ISREG, "a file")):
        if test(mode):
            return words
    return "not a regular file"


def sqlite_tables(path: Path) -> set[str] | None:
    """The table names of the SQLite database in the regular file ``path``; None when it is not one
    (no SQLite header: a text file, an empty file; or unreadable). Looks without touching: the header
    is read through a non-blocking descriptor checked to be a regular file (never a FIFO's or a
    device's), and the schema through a read-only, immutable connection, which makes no journal, -wal
    or -shm beside the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.read(fd, 16) != SQLITE_MAGIC:
            return None
    except OSError:
        return None
    finally:
        os.close(fd)
    for mode in ("ro&immutable=1", "ro"):  # immutable reads the main file alone; ro also its -wal
        try:
            conn = sqlite3.connect(f"file:{quote(str(path))}?mode={mode}", uri=True)
        except sqlite3.Error:
            continue
        try:
            return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error:
            continue
        finally:
            conn.close()
    return None
