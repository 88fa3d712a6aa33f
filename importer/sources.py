"""Sources: where transcripts are, and their bytes.

``discover()`` turns the paths a user names into :class:`SourceFile` objects
(server, agent, path, size, mtime), listing each folder once. A PATH may be an
OpenClaw state dir (``~/.openclaw``, ``~/.clawdbot``, ``~/.moltbot``), its
``agents/`` folder, one agent's ``sessions/`` folder, a single transcript file,
or a folder holding one such tree per server (each subfolder name is then the
server name), or standalone pi's ``~/.pi/agent`` (its ``sessions/--<cwd>--/``
folders, agent ``pi``). Since OpenClaw 2026.8 an agent's transcripts are in its
SQLite store, ``agents/<id>/agent/openclaw-agent.sqlite`` (kind
``openclaw_db``, read by openclaw_db.py), beside leftover JSONL files in
``sessions/`` and ``session-sqlite-import-archive/``.

Reading goes through :meth:`SourceFile.open`, so a remote source only has to
provide listings and ranged reads.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

STATE_DIR_NAMES = (".openclaw", ".clawdbot", ".moltbot")
INDEX_NAME = "sessions.json"
_NEVER = (".lock", ".tmp", ".trajectory.jsonl", ".trajectory-path.json", ".acp-stream.jsonl", ".zst")
_ARCHIVE_MARKERS = (".jsonl.reset.", ".jsonl.deleted.", ".jsonl.bak")
_IMPORTED_RE = re.compile(r"\.imported-\d+(?:\.\d+)?$")
# agents/<id>/session-sqlite-import-archive/: the files OpenClaw's SQLite migration moved away
IMPORT_ARCHIVE_DIR = "session-sqlite-import-archive"
PI_SESSIONS_DIR = "sessions"  # ~/.pi/agent/sessions/--<cwd>--/<ISO>_<uuid>.jsonl


def is_transcript_name(name: str) -> bool:
    """Transcript files by name (FORMAT.md section 2): live files, renames
    (.reset/.deleted), checkpoint and backup copies; never locks, temp files,
    run traces or corrupt-marked files. Published archives compressed with zstd
    (``*.jsonl.<deleted|reset>.<ts>[.<generation>].zst``) and the files OpenClaw's
    SQLite migration moved to ``session-sqlite-import-archive/``
    (``<key>.<name>.imported-<ms>``) are judged by the name inside."""
    if _IMPORTED_RE.search(name):
        name = _IMPORTED_RE.sub("", name)
    if name.endswith(".zst"):
        inner = name[:-4]
        return any(m in inner for m in _ARCHIVE_MARKERS) and is_transcript_name(inner)
    if name.endswith(_NEVER) or ".corrupt" in name or name.startswith("."):
        return False
    return (
        name.endswith(".jsonl")
        or ".jsonl.reset." in name
        or ".jsonl.deleted." in name
        or ".jsonl.bak" in name
    )


def file_kind(name: str) -> str | None:
    """'index' for sessions.json, 'transcript' for a transcript file, else None."""
    if name == INDEX_NAME:
        return "index"
    return "transcript" if is_transcript_name(name) else None


def sort_sources(files: list) -> None:
    """Import order: per server and agent, oldest file first (index files
    last), so the newest file's content and derived fields win whatever the
    run history."""
    files.sort(key=lambda f: (f.server, f.agent_id, f.kind == "index", f.mtime_ns, f.path))


def default_server_name() -> str:
    return socket.gethostname().split(".")[0] or "local"


@dataclass
class SourceFile:
    server: str
    agent_id: str
    path: str
    size: int
    mtime_ns: int
    kind: str = "transcript"  # or "index" (sessions.json), "openclaw_db" (an agent's SQLite store)

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def open(self) -> BinaryIO:
        return open(self.path, "rb")


class SourceLost(Exception):
    """The connection behind a source went away mid-run (a remote server).

    The file being read is rolled back; it and the files after it from the
    same source are left for the next run with their recorded state untouched.
    """


@dataclass
class Discovery:
    files: list[SourceFile]
    warnings: list[str]
    errors: list[str]


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # symlink loops, permission errors
        return False


def _state_agents_dir(path: Path) -> Path | None:
    """The ``agents/`` folder of a state dir at or just inside ``path``."""
    if _is_dir(path / "agents"):
        return path / "agents"
    for name in STATE_DIR_NAMES:
        if _is_dir(path / name / "agents"):
            return path / name / "agents"
    return None


def _has_transcripts(path: Path) -> bool:
    try:
        with os.scandir(path) as it:
            return any(is_transcript_name(e.name) for e in it)
    except OSError:
        return False


def _list_sessions_dir(server: str, agent: str, sessions: Path, out: Discovery) -> None:
    try:
        with os.scandir(sessions) as it:
            entries = list(it)
    except OSError as exc:
        out.errors.append(f"cannot list {sessions}: {exc.strerror or exc}")
        return
    for entry in entries:
        kind = file_kind(entry.name)
        if kind is None:
            continue
        try:
            if not entry.is_file():
                continue
            st = entry.stat()
        except OSError as exc:
            out.errors.append(f"cannot stat {entry.path}: {exc.strerror or exc}")
            continue
        out.files.append(SourceFile(server, agent, os.path.abspath(entry.path), st.st_size, st.st_mtime_ns, kind))


def _list_agents_dir(server: str, agents: Path, agent_filter: str | None, out: Discovery) -> None:
    try:
        names = sorted(e.name for e in os.scandir(agents) if e.is_dir())
    except OSError as exc:
        out.errors.append(f"cannot list {agents}: {exc.strerror or exc}")
        return
    for agent in names:
        if agent_filter and agent != agent_filter:
            continue
        sessions = agents / agent / "sessions"
        if _is_dir(sessions):
            _list_sessions_dir(server, agent, sessions, out)
        _list_agent_store(server, agent, agents / agent, out)
    _list_registered_stores(server, agents.parent, agent_filter, out)


def _add_store(server: str, agent: str, path: Path, out: Discovery) -> None:
    """An agent's SQLite store (kind ``openclaw_db``), listed once."""
    real = os.path.realpath(path)
    if any(f.kind == "openclaw_db" and os.path.realpath(f.path) == real for f in out.files):
        return
    try:
        st = path.stat()
    except OSError as exc:
        out.errors.append(f"cannot stat {path}: {exc.strerror or exc}")
        return
    out.files.append(SourceFile(server, agent, os.path.abspath(path), st.st_size, st.st_mtime_ns, "openclaw_db"))


def _list_agent_store(server: str, agent: str, agent_dir: Path, out: Discovery) -> None:
    """The SQLite era (OpenClaw 2026.8+): ``agent/openclaw-agent.sqlite`` and the
    JSONL files the migration moved to ``session-sqlite-import-archive/``."""
    from .openclaw_db import AGENT_DB_NAME

    store = agent_dir / "agent" / AGENT_DB_NAME
    if store.is_file():
        _add_store(server, agent, store, out)
    imported = agent_dir / IMPORT_ARCHIVE_DIR
    if _is_dir(imported):
        _list_sessions_dir(server, agent, imported, out)


def _list_registered_stores(server: str, state_dir: Path, agent_filter: str | None, out: Discovery) -> None:
    """Agents with a custom folder: ``<state>/state/openclaw.sqlite`` ``agent_databases``."""
    from .openclaw_db import registered_stores

    for agent, path in registered_stores(state_dir):
        if agent_filter and agent != agent_filter:
            continue
        if os.path.isfile(path):
            _add_store(server, agent, Path(path), out)
        else:
            out.warnings.append(f"agent {agent}: its registered store {path} does not exist")


def _is_pi_cwd(name: str) -> bool:
    """pi's per-working-directory session folder: ``--<cwd with / as ->--``."""
    return len(name) >= 4 and name.startswith("--") and name.endswith("--")


def _pi_sessions_root(path: Path) -> Path | None:
    """The folder of ``--<cwd>--`` session folders, for ``~/.pi``, ``~/.pi/agent``
    or ``~/.pi/agent/sessions``."""
    for root in (path / "agent" / PI_SESSIONS_DIR, path / PI_SESSIONS_DIR, path):
        if _is_dir(root) and any(_is_pi_cwd(p.name) for p in _subdirs(root)):
            return root
    return None


def discover(paths: list[str], server: str | None = None, agent: str | None = None) -> Discovery:
    """Find transcript files under each path (see the module docstring).

    ``agent`` names the agent for a single file or a bare folder of
    transcripts, and filters the agents of a larger tree.
    """
    out = Discovery([], [], [])
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            out.errors.append(f"no such file or folder: {path}")
            continue
        here = server or default_server_name()
        if path.is_file():
            parent = path.parent
            if path.name.endswith(".sqlite"):  # an agent's store: agents/<id>/agent/openclaw-agent.sqlite
                if path.name.startswith("incognito-"):
                    out.warnings.append(f"skipped {path}: OpenClaw's incognito sentinel holds no transcripts")
                else:
                    _add_store(here, agent or (parent.parent.name if parent.name == "agent" else parent.name),
                               path, out)
                continue
            name = agent or (parent.parent.name if parent.name == "sessions" else "pi")
            st = path.stat()
            out.files.append(SourceFile(here, name, str(path.resolve()), st.st_size, st.st_mtime_ns))
            continue
        agents_dir = _state_agents_dir(path)
        pi_root = None if agents_dir is not None else _pi_sessions_root(path)
        if agents_dir is not None:
            _list_agents_dir(here, agents_dir, agent, out)
        elif pi_root is not None:
            # Standalone pi: ~/.pi/agent/sessions/--<cwd>--/<ISO>_<uuid>.jsonl, agent "pi".
            for cwd_dir in _subdirs(pi_root):
                if _is_pi_cwd(cwd_dir.name):
                    _list_sessions_dir(here, agent or "pi", cwd_dir, out)
        elif path.name == "agents" or any(_is_dir(p / "sessions") for p in _subdirs(path)):
            _list_agents_dir(here, path, agent, out)
        elif path.name == "sessions" or _has_transcripts(path):
            name = agent or (path.parent.name if path.name == "sessions" else
                             "pi" if _is_pi_cwd(path.name) else path.name)
            _list_sessions_dir(here, name, path, out)
            if path.name == "sessions":
                _list_agent_store(here, name, path.parent, out)
        else:
            # One subfolder per server.
            found = False
            for sub in _subdirs(path):
                sub_agents = _state_agents_dir(sub)
                if sub_agents is None:
                    out.warnings.append(f"skipped {sub}: no OpenClaw agents/ tree inside")
                    continue
                found = True
                _list_agents_dir(server or sub.name, sub_agents, agent, out)
            if not found:
                out.errors.append(f"no OpenClaw transcripts found under {path}")
    sort_sources(out.files)
    return out


def _subdirs(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if _is_dir(p))
    except OSError:
        return []
