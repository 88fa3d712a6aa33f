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

import errno
import fcntl
import os
import posixpath
import stat as stat_mod
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, Iterator

# How far past its listed size a file is read: what a live transcript can
# plausibly gain while it is being read. The rest is for the next run, so a
# file replaced by something endless is never read until memory runs out.
GROWTH = 64 * 1024 * 1024


@dataclass(slots=True, eq=False)
class Listed:
    """One entry of a folder listing (the subset of ``os.DirEntry`` sources use).
    What the listing did not say (a link's target, a local file's size) is
    looked up on first use: through ``entry`` (the local listing's own) or ``fs``."""

    fs: "FileSystem"
    name: str
    path: str
    # "file", "dir", "other", "missing" (a dangling link), "outside" (a link out of the tree, not
    # followed), "loop" (a link to a folder that holds it); None: not known yet
    _kind: str | None = None
    _size: int | None = None
    _mtime_ns: int | None = None
    entry: os.DirEntry | None = None

    def _resolve(self) -> None:
        if self.entry is not None:
            try:
                st = self.entry.stat()
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
            found = self.fs.stat(self.path)
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
        if self._kind is None and self.entry is not None:
            try:
                return self.entry.is_dir()  # the listing's file type; a link's target is looked up
            except OSError:
                return False
        return self.kind == "dir"

    def is_file(self) -> bool:
        if self._kind is None and self.entry is not None:
            try:
                return self.entry.is_file()
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
    """The interface (and the local implementation). Paths are strings.

    What a hostile or unlucky tree holds is refused here, for every source:
    only regular files are opened (a FIFO or a device put in a transcript's
    place is an error, never a hang), reads stop at the listed size plus
    :data:`GROWTH`, a symlink whose target leaves the tree being discovered
    (``confine``) is not followed unless ``follow_symlinks``, and an entry whose
    name is not valid UTF-8 is not listed but noted in ``bad_names``, so that it
    becomes one error of its own instead of failing every run.

    A link to a folder that holds it (``ln -s . x``, ``ln -s .. up``: a loop)
    is listed as ``"loop"``, neither folder nor file, whatever
    ``follow_symlinks`` says, so no walk goes round it; folders are told apart
    by what they are (device and inode here, the server's real path over
    SFTP), not by the path that reached them. :meth:`identity` tells the same
    of a file, so that discovery lists a file reached by two paths once.
    """

    remote = False
    label = "local"

    def __init__(self, follow_symlinks: bool = False):
        self.follow_symlinks = follow_symlinks
        self.confine: str | None = None  # the real path of the tree being discovered
        self.bad_names: list[tuple[str, str]] = []  # (parent folder, the name shown with escapes)
        self.outside: list[tuple[str, str]] = []  # (link, where it points): links not followed
        self.loops: list[str] = []  # links to a folder that holds them: never followed
        self._ancestors: dict[str, frozenset] = {}  # folder -> the identities of it and its parents

    def start(self) -> None:
        """A new discovery: forget what the last one listed (a tree may have changed since)."""
        self.bad_names, self.outside, self.loops = [], [], []
        self._ancestors = {}

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

    def realpath(self, path: str) -> str:
        """Where a path leads (the tree a discovery stays in)."""
        return os.path.realpath(path)

    # -- identity ----------------------------------------------------------------

    def identity(self, path: str):
        """What the file or folder at ``path`` is, whatever path reached it
        (links followed): its device and inode. None when nothing is there."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def through_link(self, path: str) -> bool:
        """Whether ``path`` reaches its file through a link (its real path is another)."""
        return os.path.realpath(path) != os.path.normpath(path)

    def _holders(self, folder: str) -> frozenset:
        """The identities of ``folder`` and of every folder above it."""
        found = self._ancestors.get(folder)
        if found is None:
            ids = set()
            real = os.path.realpath(folder)
            while True:
                ident = self.identity(real)
                if ident is not None:
                    ids.add(ident)
                parent = os.path.dirname(real)
                if parent == real:
                    break
                real = parent
            found = self._ancestors[folder] = frozenset(ids)
        return found

    def _is_loop(self, folder: str, entry: os.DirEntry) -> bool:
        """Whether a link listed in ``folder`` leads to that folder or one above it."""
        try:
            st = entry.stat()
        except OSError:
            return False
        if not stat_mod.S_ISDIR(st.st_mode):
            return False
        if (st.st_dev, st.st_ino) not in self._holders(folder):
            return False
        self.loops.append(entry.path)
        return True

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
        if self.confine is not None and not self.follow_symlinks:
            # A link (anywhere on the path) that leads out of the tree; a path the
            # tree itself names elsewhere (OpenClaw's registered stores) is fine.
            target = os.path.realpath(path)
            if target != os.path.normpath(path) and not _inside(target, self.confine):
                self.outside.append((path, target))
                return None
        kind = "dir" if stat_mod.S_ISDIR(st.st_mode) else "file" if stat_mod.S_ISREG(st.st_mode) else "other"
        return kind, st.st_size, st.st_mtime_ns

    def kind_of(self, path: str) -> str | None:
        """What :meth:`stat` says is at ``path`` ("file", "dir", "other"); None when nothing is there
        or it cannot be looked at."""
        try:
            found = self.stat(path)
        except OSError:
            return None
        return found[0] if found is not None else None

    def is_dir(self, path: str) -> bool:
        return self.kind_of(path) == "dir"

    def is_file(self, path: str) -> bool:
        return self.kind_of(path) == "file"

    def listdir(self, path: str) -> list[Listed] | None:
        """The folder's entries, in no particular order; None when it is not a
        folder. A folder that cannot be listed raises OSError."""
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return None
        out = []
        for e in entries:
            name = e.name
            if not name.isascii():
                try:
                    name.encode("utf-8")
                except UnicodeEncodeError:  # bytes that are not UTF-8, kept by surrogateescape
                    self.bad_names.append((path, shown(name)))
                    continue
            if e.is_symlink():
                if self.confine is not None and not self.follow_symlinks:
                    target = os.path.realpath(e.path)
                    if not _inside(target, self.confine):
                        self.outside.append((e.path, target))
                        out.append(Listed(self, name, e.path, "outside", 0, 0))
                        continue
                if self._is_loop(path, e):
                    out.append(Listed(self, name, e.path, "loop", 0, 0))
                    continue
            out.append(Listed(self, name, e.path, entry=e))
        return out

    def subdirs(self, path: str) -> list[Listed]:
        """The folders in ``path``, by name (none when it cannot be listed)."""
        try:
            return sorted((e for e in self.listdir(path) or [] if e.is_dir()), key=lambda e: e.name)
        except OSError:
            return []

    # -- contents ----------------------------------------------------------------

    def open(self, path: str, size: int | None = None) -> BinaryIO:
        """The file for reading (seek/read): a regular file only, read at most
        up to its listed ``size`` plus :data:`GROWTH`."""
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket is never read)")
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        except BaseException:
            os.close(fd)
            raise
        f = os.fdopen(fd, "rb")
        return Bounded(f, (size if size is not None else st.st_size) + GROWTH)

    def read_bytes(self, path: str) -> bytes:
        with self.open(path) as f:
            return f.read()

    @contextmanager
    def sqlite_copy(self, path: str, tables: list[str]) -> Iterator[str]:
        """A local path to read the SQLite database at ``path`` from: here the
        file itself (readers open it read-only, WAL-safe, in place)."""
        yield path


LOCAL = FileSystem()


def listing(fs: FileSystem, path: str) -> list[Listed] | None:
    """``fs.listdir(path)``, None when it cannot be listed (gone, no permission): a probe, not an error."""
    try:
        return fs.listdir(path)
    except OSError:
        return None


def folders(fs: FileSystem, paths: list[str]) -> Iterator[str]:
    """Those of ``paths`` (``~`` allowed) that are folders on ``fs``, in order: a kind's
    ``default_paths`` among its candidates."""
    for path in paths:
        try:
            full = fs.abspath(path)
        except OSError:
            continue
        if fs.kind_of(full) == "dir":
            yield path


def files_in(fs: FileSystem, folder: str, wanted, out) -> list[tuple[str, str, int, int]]:
    """The files of ``folder`` whose name ``wanted(name)`` accepts, by name: (path, name, size,
    mtime_ns). A folder or file that cannot be looked at is said in ``out.errors`` (a Discovery's)."""
    try:
        entries = fs.listdir(folder) or []
    except OSError as exc:
        out.errors.append(f"cannot list {folder}: {exc.strerror or exc}")
        return []
    found = []
    for e in sorted(entries, key=lambda e: e.name):
        try:
            if wanted(e.name) and e.is_file():
                found.append((e.path, e.name, e.size, e.mtime_ns))
        except OSError as exc:
            out.errors.append(f"cannot stat {e.path}: {exc.strerror or exc}")
    return found


def entry_is_dir(entry: Listed) -> bool:
    """A listed entry is a folder (False when it cannot be told: gone, a broken link)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def entry_is_file(entry: Listed) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def shown(name: str) -> str:
    """A name that is not valid UTF-8, with its bytes shown as escapes (storable, printable)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _inside(target: str, root: str) -> bool:
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


class Bounded:
    """A binary file read at most up to ``limit`` bytes."""

    def __init__(self, f, limit: int):
        self._f = f
        self.limit = limit

    def read(self, n: int = -1) -> bytes:
        left = self.limit - self._f.tell()
        if left <= 0:
            return b""
        return self._f.read(left if n is None or n < 0 else min(n, left))

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._f.seek(pos, whence)

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        self._f.close()

    @property
    def closed(self) -> bool:
        return self._f.closed

    def __enter__(self) -> "Bounded":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PosixPaths:
    """Path arithmetic for a POSIX filesystem on another machine."""

    def join(self, *parts: str) -> str:
        return posixpath.join(*parts)

    def basename(self, path: str) -> str:
        return posixpath.basename(path)

    def dirname(self, path: str) -> str:
        return posixpath.dirname(path)
