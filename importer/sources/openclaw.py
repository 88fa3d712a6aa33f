"""OpenClaw's JSONL transcripts: Clawdbot, Moltbot and OpenClaw up to 2026.6.x
write one file per session in ``<state>/agents/<agent>/sessions/``; 2026.8+
keeps them in a SQLite store (``openclaw_store.py``) but leaves files beside
it (un-migrated leftovers, published archives, ``session-sqlite-import-archive/``).
Also each agent's ``sessions.json`` index (session key -> label, channel...).

A PATH may be an OpenClaw state dir (``~/.openclaw``, ``~/.clawdbot``,
``~/.moltbot``) or a folder holding one, its ``agents/`` folder, one agent's
``sessions/`` folder, a bare folder of transcripts, or one transcript file.
The format is pi's (FORMAT.md sections 2-8): ``parser.TranscriptParser``.
"""

from __future__ import annotations

import re
from functools import partial

import orjson

from .. import parser as P
from .reader import read_lines
from ..units import Batch, Checkpoint, NotATranscript, Outcome, Unit
from .base import Discovery, Scope, Source
from .fs import FileSystem

STATE_DIR_NAMES = (".openclaw", ".clawdbot", ".moltbot")
INDEX_NAME = "sessions.json"
# agents/<id>/session-sqlite-import-archive/: the files OpenClaw's SQLite migration moved away
IMPORT_ARCHIVE_DIR = "session-sqlite-import-archive"
_NEVER = (".lock", ".tmp", ".trajectory.jsonl", ".trajectory-path.json", ".acp-stream.jsonl", ".zst")
_ARCHIVE_MARKERS = (".jsonl.reset.", ".jsonl.deleted.", ".jsonl.bak")
_IMPORTED_RE = re.compile(r"\.imported-\d+(?:\.\d+)?$")
PREFETCH_LIMIT = 8 * 1024 * 1024  # larger files are streamed in chunks, never held whole
SNIFF_BYTES = 64 * 1024


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


def claimed_session(name: str) -> str | None:
    """The session id a transcript's name implies: its stem (``X.jsonl``,
    ``X.jsonl.reset.<ts>``, ``X.checkpoint.<uuid>.jsonl``, a store's ``<db>#X``
    or ``<db>#archive/X.jsonl.deleted...``): renames and copies of one session
    share it."""
    if "#" in name:
        name = name.split("#", 1)[1]
        name = name[len("archive/"):] if name.startswith("archive/") else name
        if "." not in name:
            return P.clamp_id(name)
    return P.session_id_from_name(name)


def looks_like_pi_format(head: bytes) -> bool:
    """Whether the first bytes of a file read as an OpenClaw/pi transcript: a
    ``session`` header, or entries of the types that format has."""
    for raw in head.split(b"\n")[:8]:
        raw = raw.strip()
        if not raw:
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and obj.get("type") in P.TranscriptParser.known_types:
            return obj.get("type") != "message" or isinstance(obj.get("message"), dict)
        return False
    return False


class TranscriptFile(Unit):
    """One JSONL transcript (or a compressed published archive, read whole)."""

    prefetch_limit = PREFETCH_LIMIT

    def raw(self):
        return self.fs.open(self.path, self.size)

    def open(self):
        f = self.raw()
        if self.name.endswith(".zst"):
            from .openclaw_db import ZstdReader

            return ZstdReader(f)
        return f

    def read(self, checkpoint):
        parser = partial(P.TranscriptParser, shell_tools=self.source.shell_tools)
        return read_lines(self, checkpoint, parser, appendable=not self.name.endswith(".zst"))


class IndexFile(Unit):
    """An agent's sessions.json: session key -> session metadata, applied to the
    sessions it names once the run's transcripts are in."""

    counted = False
    meta = True

    def read(self, checkpoint):
        with self.open() as f:
            data = orjson.loads(f.read())
        if not isinstance(data, dict):
            raise NotATranscript("sessions.json is not a JSON object")
        rows = []
        for key, value in data.items():
            if not isinstance(value, dict) or not isinstance(value.get("sessionId"), str):
                continue
            origin = value.get("origin") if isinstance(value.get("origin"), dict) else {}
            rows.append({
                "server": self.server, "agent_id": self.agent_id, "session_key": key[:255],
                "session_uuid": P.visible_id(value["sessionId"])[:64],
                "label": P.cut_str(value.get("label"), 255),
                "display_name": P.cut_str(value.get("displayName"), 255),
                "channel": P._str(value.get("channel") or value.get("lastChannel") or origin.get("provider"), 64),
                "chat_type": P._str(value.get("chatType") or origin.get("chatType"), 32),
                "spawned_by": P.cut_str(value.get("spawnedBy"), 255),
                "updated_at": P._int(value.get("updatedAt")),
            })
        yield Batch(None, rows=[("session_index", rows, ("server", "agent_id", "session_key"))])
        return Outcome(Checkpoint(status="success", token=self.token, offset=self.size))


class OpenClawKind(Source):
    """What the OpenClaw kind's two sources (its JSONL files, its SQLite store) share: the kind,
    its recorded costs, its shell tools, its copies and the session a file name claims."""

    kind = "openclaw"
    records_costs = True
    # exec runs a shell command ({"command"}); bash is its name in older releases (and pi's).
    # Not process: it polls, sends keys to or kills a background exec session ({"action",
    # "sessionId", "keys"?}) and has no command of its own (docs/sources.md).
    shell_tools = frozenset({"exec", "bash"})
    not_this = "not an OpenClaw transcript: no session header and no known entry type"

    def session_type(self, name: str) -> str:
        return P.session_type_for(name)

    def is_copy(self, name: str) -> bool:
        return P.is_copy(name)

    def claimed_session(self, name: str) -> str | None:
        return claimed_session(name)


class OpenClawJSONL(OpenClawKind):
    name = "openclaw"
    order = 20
    places = tuple("~/" + name for name in STATE_DIR_NAMES)

    def session_type(self, name: str) -> str:
        return "index" if name == INDEX_NAME else P.session_type_for(name)

    # -- discovery ---------------------------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        return (is_transcript_name(name) or name.endswith(".jsonl")) and looks_like_pi_format(head)

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        agents = state_agents_dir(fs, path)
        if agents is not None:
            list_agents_dir(self, fs, agents, scope, out)
            return True
        name = fs.basename(path)
        if name == "agents" or any(_has_transcripts(fs, fs.join(d.path, "sessions")) for d in fs.subdirs(path)):
            return list_agents_dir(self, fs, path, scope, out)
        if name == "sessions" or _has_transcripts(fs, path):
            agent = scope.agent or (fs.basename(fs.dirname(path)) if name == "sessions" else name)
            list_sessions_dir(self, fs, scope.server, agent, path, out)
            return True
        return False

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope, out: Discovery) -> Unit:
        """One file named on the command line: in an agent's ``sessions/`` it is
        OpenClaw's (its agent the folder above, unless ``--agent``); elsewhere
        it is standalone pi's."""
        parent = fs.dirname(path)
        if fs.basename(parent) != "sessions":
            from . import kind  # (by name: pi builds on this module, not the other way)

            return kind("pi").file_unit(fs, path, size, mtime_ns, scope, out)
        agent = scope.agent or fs.basename(fs.dirname(parent))
        return TranscriptFile(self, scope.server, agent, path, fs.basename(path), size, mtime_ns, fs=fs)

    # -- after the run -----------------------------------------------------------

    def finish_group(self, store, server: str, agent_id: str, metadata: dict) -> None:
        """Copy sessions.json metadata onto the sessions it names (newest key wins)."""
        index = store.query(
            "SELECT * FROM session_index WHERE server = ? AND agent_id = ? ORDER BY updated_at, session_key",
            (server, agent_id),
        )
        if not index:
            return
        latest = {row["session_uuid"]: row for row in index}
        fields = ("session_key", "label", "display_name", "channel", "chat_type", "spawned_by")
        updates = []
        for s in store.query(
            "SELECT id, session_uuid, " + ", ".join(fields) + " FROM sessions WHERE server = ? AND agent_id = ?",
            (server, agent_id),
        ):
            row = latest.get(s["session_uuid"])
            if row is None:
                continue
            values = tuple(row[f] for f in fields)
            if values != tuple(s[f] for f in fields):
                updates.append((*values, s["id"]))
        if updates:
            store.executemany(
                "UPDATE sessions SET " + ", ".join(f"{f} = ?" for f in fields) + " WHERE id = ?", updates
            )
            store.touch(u[-1] for u in updates)


SOURCE = OpenClawJSONL()


# ---------------------------------------------------------------------------
# The layout, shared with the SQLite store's source


def state_agents_dir(fs: FileSystem, path: str) -> str | None:
    """The ``agents/`` folder of a state dir at or just inside ``path``."""
    if fs.is_dir(fs.join(path, "agents")):
        return fs.join(path, "agents")
    for name in STATE_DIR_NAMES:
        candidate = fs.join(path, name, "agents")
        if fs.is_dir(candidate):
            return candidate
    return None


def _has_transcripts(fs: FileSystem, path: str) -> bool:
    try:
        return any(is_transcript_name(e.name) for e in fs.listdir(path) or [])
    except OSError:
        return False


def _list_error(out: Discovery, fs: FileSystem, path: str, exc: OSError) -> None:
    where = "" if not fs.remote else f"{fs.label}: "
    out.errors.append(f"{where}cannot list {path}: {exc.strerror or exc}")


def list_sessions_dir(source: OpenClawJSONL, fs: FileSystem, server: str, agent: str, folder: str,
                      out: Discovery) -> None:
    """Every transcript and the sessions.json index of one folder."""
    try:
        entries = fs.listdir(folder)
    except OSError as exc:
        _list_error(out, fs, folder, exc)
        return
    for entry in entries or []:
        name = entry.name
        if name == INDEX_NAME:
            cls = IndexFile
        elif is_transcript_name(name):
            cls = TranscriptFile
        else:
            continue
        try:
            if not entry.is_file():
                continue
            size, mtime = entry.size, entry.mtime_ns
        except OSError as exc:
            out.errors.append(f"cannot stat {entry.path}: {exc.strerror or exc}")
            continue
        out.add(cls(source, server, agent, entry.path, name, size, mtime, fs=fs))


def list_agents_dir(source: OpenClawJSONL, fs: FileSystem, agents: str, scope: Scope, out: Discovery) -> bool:
    """Each agent's ``sessions/`` and ``session-sqlite-import-archive/``; True
    when ``agents`` holds at least one agent folder."""
    try:
        names = sorted(e.name for e in fs.listdir(agents) or [] if e.is_dir())
    except OSError as exc:
        _list_error(out, fs, agents, exc)
        return True
    for agent in names:
        if not scope.wants(agent):
            continue
        for sub in ("sessions", IMPORT_ARCHIVE_DIR):
            list_sessions_dir(source, fs, scope.server, agent, fs.join(agents, agent, sub), out)
    return bool(names)
