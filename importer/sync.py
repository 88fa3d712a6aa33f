"""Collecting from every configured server, and the cron job around it.

``import_from_config(store, config)`` imports each server of the config file
in turn: a ``local: true`` server through the local sources, any other over
SSH (remote.py). One server that cannot be reached, or whose connection drops,
never stops the others: its error is recorded in the :class:`ConfigReport`
and the run's exit status is non-zero.

``run_lock(path)`` keeps two runs (cron's ``agentbase sync`` and a manual
``agentbase import --config``) from overlapping: the second one exits at once.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from .config import Config
from .pipeline import run_import
from .writer import ImportReport
from .sources import default_candidates, default_paths, discover
from .sources.fs import FileSystem
from .store import Store, StoreError, default_db_path
from .units import SourceLost

log = logging.getLogger("agentbase")


class AlreadyRunning(Exception):
    """Another run holds the lock."""

    def __init__(self, message: str, watch_pid: int | None = None):
        super().__init__(message)
        self.watch_pid = watch_pid  # the holder is an `agentbase watch`: it keeps the archive up to date


@dataclass
class ServerResult:
    name: str
    where: str  # "local /path" or "ssh user@host:port"
    report: ImportReport = field(default_factory=ImportReport)
    error: str | None = None  # the server could not be (fully) read
    wire_bytes: int = 0  # bytes through the SSH connection, both ways
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.report.files_failed == 0

    def line(self) -> str:
        wire = f"; transferred {_human(self.wire_bytes)}" if self.where.startswith("ssh") else ""
        return f"server {self.name} ({self.where}): {self.report.summary()}{wire}"

    def as_dict(self) -> dict:
        d = self.report.as_dict()
        d.update({"server": self.name, "where": self.where, "status": "ok" if self.error is None else "failed",
                  "error": self.error, "wire_bytes": self.wire_bytes, "elapsed_s": round(self.elapsed_s, 4)})
        return d


@dataclass
class ConfigReport:
    servers: list[ServerResult] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def failed_servers(self) -> list[str]:
        return [s.name for s in self.servers if s.error is not None]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.servers)

    def totals(self) -> ImportReport:
        total = ImportReport()
        for s in self.servers:
            r = s.report
            for name in ("files_seen", "files_unchanged", "files_imported", "files_failed", "files_ignored",
                         "messages_added", "entries_added", "bad_lines", "pending_lines", "bytes_read"):
                setattr(total, name, getattr(total, name) + getattr(r, name))
        total.elapsed_s = self.elapsed_s
        return total

    def summary(self) -> str:
        failed = self.failed_servers
        ok = len(self.servers) - len(failed)
        servers = f"servers: {ok} imported, {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "")
        return f"{servers}; {self.totals().summary()}"

    def as_dict(self) -> dict:
        d = self.totals().as_dict()
        d["servers_failed"] = self.failed_servers
        d["servers"] = [s.as_dict() for s in self.servers]
        return d


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def _agents(config: Config, server, agent: str | None) -> list[str] | None:
    """The agents to import from one server: its list (else the config's), narrowed by --agent."""
    wanted = server.agents if server.agents is not None else config.agents
    if agent is None:
        return wanted
    return [agent] if wanted is None or agent in wanted else []


def import_from_config(
    store: Store,
    config: Config,
    server: str | None = None,
    agent: str | None = None,
    progress: Callable[[str], Callable] | None = None,
) -> ConfigReport:
    """Import every configured server (or only ``server``); ``agent`` narrows each one.

    ``progress(name)``, when given, returns ``run_import``'s ``progress`` for
    that server's files.
    """
    started = time.perf_counter()
    out = ConfigReport()
    servers = [config.server(server)] if server else config.servers
    for s in servers:
        agents = _agents(config, s, agent)
        wrap = progress(s.name) if progress else None
        t0 = time.perf_counter()
        try:
            if s.local:
                result = _import_local(store, config, s, agents, wrap)
            else:
                result = _import_remote(store, config, s, agents, wrap)
        except StoreError:
            raise  # the archive itself: no server can go on
        except Exception as exc:  # one server's surprise never stops the others
            log.debug("server %s", s.name, exc_info=True)
            text = str(exc).strip().splitlines()
            result = ServerResult(s.name, "local" if s.local else f"ssh {s.host}",
                                  error=f"server {s.name}: unexpected {type(exc).__name__}"
                                        + (f": {text[0][:200]}" if text else ""))
        result.elapsed_s = time.perf_counter() - t0
        out.servers.append(result)
    out.elapsed_s = time.perf_counter() - started
    return out


def server_paths(fs: FileSystem, s) -> tuple[list[str], str]:
    """What to import from one server: its ``paths`` as configured, else its
    ``state_dir``; with neither, the first OpenClaw state dir there (~/.openclaw,
    ~/.clawdbot, ~/.moltbot) and every other kind's default places that exist.
    Returns (the paths that exist, what was tried)."""
    wanted = list(s.paths or ([s.state_dir] if s.state_dir else []))
    if wanted:
        return [p for p in wanted if fs.stat(fs.abspath(p)) is not None], ", ".join(wanted)
    return default_paths(fs), ", ".join(default_candidates())


def _import_server(store: Store, fs: FileSystem, s, agents, wrap, result: ServerResult) -> None:
    paths, tried = server_paths(fs, s)
    if not paths:
        result.error = f"server {s.name}: nothing to import at {tried}"
        return
    if s.local:
        result.where = f"local {', '.join(paths)}"
    if agents == []:
        return
    found = discover(paths, server=s.name, fs=fs, agents=agents, timezone=s.timezone)
    result.report = run_import(store, [], server=s.name, progress=wrap, sources=found)


def _import_local(store: Store, config: Config, s, agents, wrap) -> ServerResult:
    result = ServerResult(s.name, "local")
    _import_server(store, FileSystem(follow_symlinks=config.follow_symlinks), s, agents, wrap, result)
    return result


def _import_remote(store: Store, config: Config, s, agents, wrap) -> ServerResult:
    from .remote import RemoteError, RemoteServer

    remote = RemoteServer(s, config)
    result = ServerResult(s.name, f"ssh {s.host}")
    try:
        remote.connect()
    except RemoteError as exc:
        result.error = f"server {s.name}: {exc}"
        result.wire_bytes = remote.counter.wire
        return result
    result.where = f"ssh {remote.endpoint}"
    try:
        _import_server(store, remote.fs, s, agents, wrap, result)
    except (SourceLost, RemoteError) as exc:
        result.error = f"server {s.name}: {exc}"
    finally:
        if remote.lost is not None and result.error is None:
            result.error = f"server {s.name}: {remote.lost}; the rest is left for the next run"
            # the pipeline's line for the unit being read says the same: keep one
            result.report.failures = [f for f in result.report.failures if not f[1].startswith(remote.lost)]
        result.wire_bytes = remote.counter.wire
        remote.close()
    return result


# -- the lock -------------------------------------------------------------------


def lock_path(store: Store) -> Path:
    """Beside the SQLite store (``agentbase.db.lock``); for MariaDB in the data dir."""
    if getattr(store, "kind", "sqlite") == "sqlite":
        return Path(str(store.location) + ".lock")
    return default_db_path().parent / "sync.lock"


@contextmanager
def run_lock(path: Path, what: str = "") -> Iterator[None]:
    """An exclusive, non-blocking ``flock``; raises :class:`AlreadyRunning`.
    ``what`` ("watch") says who holds it, for the next run's message.

    The kernel drops the lock when the process ends, however it ends, so a
    killed run never leaves a stale lock behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").split()
            except OSError:
                holder = []
            pid = holder[0] if holder and holder[0].isdigit() else ""
            if pid and holder[1:2] == ["watch"]:
                raise AlreadyRunning(f"agentbase watch (pid {pid}) keeps the archive up to date; lock {path}",
                                     watch_pid=int(pid)) from None
            who = f" (pid {pid})" if pid else ""
            raise AlreadyRunning(f"another agentbase run is in progress{who}; lock {path}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {what}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def export_after_sync(store: Store, config: Config) -> tuple[bool, str]:
    """Export the snapshot, unless it already shows the store as it is now:
    (True, its summary) or (False, the error)."""
    from .snapshot import export_snapshot

    output = str(Path(config.snapshot).expanduser()) if config.snapshot else None  # None: its default
    try:
        result = export_snapshot(store, output, timezone=config.timezone)
    except StoreError as exc:
        return False, f"snapshot not written: {exc}"
    except OSError as exc:
        return False, f"snapshot not written: {exc.strerror or exc}"
    return True, result.summary()
