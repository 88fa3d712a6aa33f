"""The one filesystem interface every source reads through: local, or SFTP
(``remote.SFTPFileSystem``), so that every source kind works over SSH with no
remote code of its own.

What a source may do: list a folder (entries with their kind, size and
modification time, like ``os.scandir``), stat a path, open a file for ranged
reads of its listed size, read a small file whole, and get a consistent
local copy of a live SQLite database (:meth:`FileSystem.sqlite_copy`: the
file itself when local, opened read-only in place; over SSH a copy made on
the server in one read transaction and fetched).
"""

from __future__ import annotations

import os
import posixpath
import stat as stat_mod
from contextlib import contextmanager
from typing import BinaryIO, Iterator


class Listed:
    """One entry of a folder listing (the subset of ``os.DirEntry`` sources use).
    What the listing did not say (a link's target, a local file's size) is
    looked up on first use."""

    __slots__ = ("name", "path", "_kind", "_size", "_mtime_ns", "_fs", "_entry")

    def __init__(self, fs: "FileSystem", name: str, path: str, kind: str | None = None,
                 size: int | None = None, mtime_ns: int | None = None, entry: os.DirEntry | None = None):
        self._fs = fs
        self.name = name
        self.path = path
        self._kind = kind  # "file", "dir", "other", "missing" (a dangling link); None: not known yet
        self._size = size
        self._mtime_ns = mtime_ns
        self._entry = entry

    def _resolve(self) -> None:
        if self._entry is not None:
            try:
                st = self._entry.stat()
            except (FileNotFoundError, NotADirectoryError):
                found = None
            except OSError as exc:
                if exc.errno != 40:  # ELOOP: a symlink loop is nothing to read
                    raise
                found = None
            else:
                mode = st.st_mode
                found = ("dir" if stat_mod.S_ISDIR(mode) else "file" if stat_mod.S_ISREG(mode) else "other",
                         st.st_size, st.st_mtime_ns)
        else:
            found = self._fs.stat(self.path)
        if found is None:
            self._kind, self._size, self._mtime_ns = "missing", 0, 0
        else:
            self._kind, self._size, self._mtime_ns = found

    @property
    def kind(self) -> str:
        if self._kind is None or (self._kind == "file" and self._size is None):
            self._resolve()
        return self._kind

    def is_dir(self) -> bool:
        if self._kind is None and self._entry is not None:
            try:
                return self._entry.is_dir()  # the listing's file type; a link's target is looked up
            except OSError:
                return False
        return self.kind == "dir"

    def is_file(self) -> bool:
        if self._kind is None and self._entry is not None:
            try:
                return self._entry.is_file()
            except OSError:
                return False
        return self.kind == "file"

    @property
    def size(self) -> int:
        if self._size is None:
            self._resolve()
        return self._size or 0

    @property
    def mtime_ns(self) -> int:
        if self._mtime_ns is None:
            self._resolve()
        return self._mtime_ns or 0


class FileSystem:
    """The interface (and the local implementation). Paths are strings."""

    remote = False
    label = "local"

    # -- paths -----------------------------------------------------------------

    def abspath(self, path: str) -> str:
        return os.path.abspath(os.path.expanduser(path))

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)

    def basename(self, path: str) -> str:
        return os.path.basename(path)

    def dirname(self, path: str) -> str:
        return os.path.dirname(path)

    def resolve(self, path: str) -> str:
        """The path with symlinks followed (a single file given on the command line)."""
        return os.path.realpath(path)

    # -- metadata ----------------------------------------------------------------

    def stat(self, path: str) -> tuple[str, int, int] | None:
        """(kind, size, mtime_ns) following symlinks; None when nothing is there.
        Other errors (permission denied) raise OSError."""
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == 40:  # ELOOP: a symlink loop is nothing to read
                return None
            raise
        kind = "dir" if stat_mod.S_ISDIR(st.st_mode) else "file" if stat_mod.S_ISREG(st.st_mode) else "other"
        return kind, st.st_size, st.st_mtime_ns

    def is_dir(self, path: str) -> bool:
        try:
            found = self.stat(path)
        except OSError:
            return False
        return found is not None and found[0] == "dir"

    def is_file(self, path: str) -> bool:
        try:
            found = self.stat(path)
        except OSError:
            return False
        return found is not None and found[0] == "file"

    def listdir(self, path: str) -> list[Listed] | None:
        """The folder's entries, in no particular order; None when it is not a
        folder. A folder that cannot be listed raises OSError."""
        try:
            with os.scandir(path) as it:
                return [Listed(self, e.name, e.path, entry=e) for e in it]
        except (FileNotFoundError, NotADirectoryError):
            return None

    def subdirs(self, path: str) -> list[Listed]:
        """The folders in ``path``, by name (none when it cannot be listed)."""
        try:
            return sorted((e for e in self.listdir(path) or [] if e.is_dir()), key=lambda e: e.name)
        except OSError:
            return []

    # -- contents ----------------------------------------------------------------

    def open(self, path: str, size: int | None = None) -> BinaryIO:
        """The file for reading (seek/read)."""
        return open(path, "rb")

    def read_bytes(self, path: str) -> bytes:
        with self.open(path) as f:
            return f.read()

    @contextmanager
    def sqlite_copy(self, path: str, tables: list[str]) -> Iterator[str]:
        """A local path to read the SQLite database at ``path`` from: here the
        file itself (readers open it read-only, WAL-safe, in place)."""
        yield path


LOCAL = FileSystem()


class PosixPaths:
    """Path arithmetic for a POSIX filesystem on another machine."""

    def join(self, *parts: str) -> str:
        return posixpath.join(*parts)

    def basename(self, path: str) -> str:
        return posixpath.basename(path)

    def dirname(self, path: str) -> str:
        return posixpath.dirname(path)
