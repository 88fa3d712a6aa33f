"""Where a snapshot lives and what may be written: the default path, what
``-o`` may name (a new path or an export's snapshot, nothing else), what
``serve`` may serve, the build files behind the snapshot's symbolic link, and
the leftovers of an interrupted export."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .. import shape
from ..snapshot_state import state_path
from ..store import Store, StoreError, default_db_path, sqlite_path, sqlite_tables, what_is


def default_snapshot_path() -> Path:
    return default_db_path().parent / "snapshot.db"


def snapshot_path_for(store: Store) -> Path:
    """Where a store's snapshot goes unless told: snapshot.db beside a SQLite
    store's file (so two archives never share one), else beside the embedded
    default."""
    if store.kind == "sqlite":
        return Path(store.location).parent / "snapshot.db"
    return default_snapshot_path()


def remove_leftovers(target: Path) -> list[Path]:
    """Temporary files a killed export left beside ``target`` (its pid no longer
    runs, or this is it): removed, so they never pile up. Returns them."""
    gone = []
    for pattern in (f".{target.name}.tmp-*", f".{target.name}.link-*", f".{state_path(target).name}.tmp-*",
                    f".{inspect_path(target).name}.tmp-*", f".{target.name}.download-*"):
        for leftover in target.parent.glob(pattern):
            pid = leftover.name.rsplit(next(m for m in (".tmp-", ".link-", ".download-") if m in leftover.name),
                                       1)[-1].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and _running(int(pid)):
                continue  # another export's, still at work
            try:
                leftover.unlink()
                gone.append(leftover)
            except OSError:
                pass
    # a build killed between writing its file and pointing the link at it
    current = os.readlink(target) if target.is_symlink() else None
    for leftover in _generations(target):
        if current is None or not leftover.name.startswith(current):
            try:
                leftover.unlink()
                gone.append(leftover)
            except OSError:
                pass
    return gone


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_GENERATION = re.compile(r"[0-9a-f]{32}")


STATE_TABLES = frozenset({"meta", "secrets", "rows"})  # snapshot_state.SCHEMA's


def snapshot_target(db: str | None, output: str | os.PathLike | None) -> Path:
    """Where an export of the archive ``db`` (a URL, None: the embedded default) writes: ``output``,
    else what :func:`snapshot_path_for` gives for that store; known without opening the store."""
    if output:
        return Path(output).expanduser()
    path = sqlite_path(db)
    return path.parent / "snapshot.db" if path is not None else default_snapshot_path()


def is_snapshot_file(path: Path) -> bool:
    """A regular file (not a link) holding a SQLite database with the snapshot's marker table."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and shape.MARKER in (sqlite_tables(path) or ())


def check_target(target: Path) -> str:
    """What an export may write over, checked before it does anything (export, watch -o, sync):
    ``new`` (nothing there; the folders above are folders or missing), ``link`` (an export's link: a
    symbolic link whose text is the name of a build file beside it, ``.<name>.<32 hex digits>``,
    which is a regular SQLite file with the marker table ``agentbase_snapshot``), or ``plain`` (an
    older AgentBase's snapshot: a regular SQLite file with that marker, rebuilt as a link). The state
    file beside it, ``<stem>-state.db``, must be missing or a regular SQLite file with the state's
    tables. Anything else (a file that is not a snapshot, a device, a FIFO, a folder, a link to
    anything else, a dangling link) is a StoreError of one line, and nothing has been touched."""
    target = Path(target)
    refuse = f"refusing to write the snapshot at {target}"
    kind = _check_path(target, refuse, "an AgentBase snapshot")
    if kind == "regular":
        kind = "plain" if is_snapshot_file(target) else None
    elif kind == "link":
        text = os.readlink(target)
        ok = ("/" not in text and text.startswith(f".{target.name}.")
              and _GENERATION.fullmatch(text[len(target.name) + 2:]) is not None
              and is_snapshot_file(target.parent / text))
        if not ok:
            raise StoreError(f"{refuse}: it is a link to {text}, not an AgentBase snapshot (whose link names "
                             f".{target.name}.<id> beside it)")
    if kind is None:
        raise StoreError(f"{refuse}: it is a file that is not an AgentBase snapshot")
    spath = state_path(target)
    skind = _check_path(spath, f"refusing to write the snapshot's state file at {spath}",
                        "an AgentBase snapshot's state file")
    if skind == "link" or (skind == "regular" and not STATE_TABLES <= (sqlite_tables(spath) or set())):
        raise StoreError(f"refusing to write the snapshot's state file at {spath}: it is "
                         f"{'a link' if skind == 'link' else 'a file'} that is not an AgentBase snapshot's "
                         "state file")
    return kind


def _check_path(path: Path, refuse: str, what: str) -> str:
    """``new``, ``link`` or ``regular``; anything else is refused (a folder, a device, a FIFO...),
    and so is a new path below something that is not a folder."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        parent = path.parent
        while True:
            try:
                pst = os.stat(parent)
            except (FileNotFoundError, NotADirectoryError):
                if parent == parent.parent:
                    return "new"
                parent = parent.parent
                continue
            except OSError as exc:
                raise StoreError(f"{refuse}: {parent}: {exc.strerror or exc}") from None
            if not stat.S_ISDIR(pst.st_mode):
                raise StoreError(f"{refuse}: {parent} is {what_is(pst.st_mode)}, not a folder")
            return "new"
    except OSError as exc:
        raise StoreError(f"{refuse}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        return "link"
    if stat.S_ISREG(st.st_mode):
        return "regular"
    raise StoreError(f"{refuse}: it is {what_is(st.st_mode)}, not {what}")


def check_servable(path: Path) -> None:
    """What `agentbase serve` may serve: an AgentBase snapshot (through links: an export's, or one
    a user made). Checked before anything is served; each refusal is one line."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        if os.path.islink(path):
            raise StoreError(f"{path} is a link to nothing (no snapshot there): run `agentbase export` "
                             "first") from None
        raise StoreError(f"no snapshot at {path}: run `agentbase export` first") from None
    except OSError as exc:
        raise StoreError(f"cannot read the snapshot at {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{path} is {what_is(st.st_mode)}, not an AgentBase snapshot")
    tables = sqlite_tables(path)
    if tables is None:
        raise StoreError(f"{path} is not an AgentBase snapshot (not a SQLite database)")
    if shape.MARKER in tables:
        return
    if "_migrations" in tables:
        raise StoreError(f"{path} is an AgentBase archive, not a snapshot: serve the snapshot "
                         "`agentbase export` writes from it")
    raise StoreError(f"{path} is a SQLite database that is not an AgentBase snapshot")


def inspect_path(snapshot: Path) -> Path:
    """The counts file older snapshots had beside them (``snapshot-inspect.json``): removed by an
    export, since a snapshot updated in place is served as a live file, not an immutable one."""
    return snapshot.with_name(snapshot.stem + "-inspect.json")


def generation_file(target: Path, snapshot_id: str) -> Path:
    """Where a build's file lives: ``.snapshot.db.<id>`` beside ``snapshot.db``, a symbolic link
    to the newest. A build never renames a file over one a reader may hold in WAL mode (SQLite
    names the -wal after the file: a new file under the old name would be read with the old
    file's -wal by whoever still has it open); it writes a new file and points the link at it.
    A reader of the old file keeps reading it, whole, until it opens the name again."""
    return target.with_name(f".{target.name}.{snapshot_id}")


def _generations(target: Path) -> list[Path]:
    """The build files of ``target`` (and their -wal and -shm), the link's own among them."""
    prefix = f".{target.name}."
    out = []
    for path in target.parent.glob(f".{target.name}.*"):
        rest = path.name[len(prefix):]
        key = rest.split("-", 1)[0]
        if len(key) == 32 and all(c in "0123456789abcdef" for c in key):
            out.append(path)
    return out


def point(target: Path, real: Path) -> None:
    """Point ``target`` at ``real`` in one step, then remove the older builds' files."""
    link = target.with_name(f".{target.name}.link-{os.getpid()}")
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(real.name, link)
    os.replace(link, target)
    for old in _generations(target):
        if not old.name.startswith(real.name):
            try:
                old.unlink()  # a reader that has it open keeps it until it closes it
            except OSError:
                pass
