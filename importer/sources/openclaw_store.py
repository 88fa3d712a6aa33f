"""OpenClaw's SQLite store (2026.8+): one database per agent,
``<state>/agents/<agent>/agent/openclaw-agent.sqlite``, holds many sessions,
each imported through the same parser and writer as a JSONL file.

Reading a database safely is openclaw_db.py's job; this module finds the
stores and turns their sessions and archives into units. A store is a
container: opened read-only in place (or, on another server, copied
consistently there and fetched: ``fs.sqlite_copy``), and not opened at all
while its size and time (with its ``-wal``) are unchanged.

Each session is one unit with its own checkpoint, key "<db path>#<session
id>": its offset is the last seq imported, head_hash the hash of the
session's rewrite watermark (transcript_rewrite_watermarks), tail_hash the
hash of the event at that offset; its token is its last seq, event count and
watermark. A unit that only grew (same watermark, same event at the offset)
is read from the offset on; anything else is read whole and merged by entry
id. A deleted or reset session kept in session_transcript_archives is a unit
"<db path>#archive/<archive name>", immutable: imported once, like a file.
"""

from __future__ import annotations

import io
import itertools
import logging
from contextlib import contextmanager

from . import openclaw_db, readonly
from .. import parser as P
from ..units import Batch, Checkpoint, Container, Opened, Outcome, SourceError, Unit
from .base import Discovery, Scope
from .fs import FileSystem
from .openclaw import IMPORT_ARCHIVE_DIR, OpenClawKind, TranscriptFile, state_agents_dir

log = logging.getLogger("agentbase")

AGENT_DB_NAME = openclaw_db.AGENT_DB_NAME
BATCH = 500  # entries per batch handed to the writer

# The tables a consistent copy holds: those the reader may read (never the
# credential tables, nor memory indexes and caches).
COPIED_TABLES = ("schema_meta", "transcript_events", "session_windows", "session_nodes", "sessions",
                 "session_entries", "session_transcript_archives", "session_transcript_cold_archives")


def copied_tables() -> list[str]:
    return sorted(set(openclaw_db.READABLE_TABLES) | set(COPIED_TABLES))


class AgentStore(Container):
    """One agent's store; its units are its sessions and its deleted/reset archives."""

    session_type = "openclaw_db"

    @contextmanager
    def open(self):
        with readonly.connect_copy(self.fs, self.path, copied_tables(), openclaw_db.READABLE_TABLES,
                                   opener=openclaw_db.connect_readonly) as conn:
            try:
                layout = openclaw_db.detect_layout(conn)
                sessions = openclaw_db.session_units(conn, layout)
                archives = openclaw_db.transcript_archives(conn, layout)
            except openclaw_db.SourceError as exc:
                raise SourceError(f"{self.path}: {exc}") from None
            warnings = []
            if layout.kind == "events":
                warnings.append(f"{self.path}: transcripts without a known session table "
                                f"(schema {layout.user_version}): metadata not read")
            # The store is as new as its last write (its listing includes the
            # -wal): a session it holds outranks the JSONL files it was
            # migrated from (their last write came before).
            units: list[Unit] = [StoreSession(self, conn, layout, s, self.mtime_ns) for s in sessions]
            units += [StoreArchive(self, conn, a) for a in archives]

            def metadata() -> dict:
                try:
                    return openclaw_db.session_metadata(conn, layout)
                except openclaw_db.SourceError as exc:
                    warnings.append(f"{self.path}: {exc}")
                    return {}

            yield Opened(units, metadata, warnings)


def _generation_hash(generation: str | None) -> str:
    return P.short_hash(b"generation:" + (generation or "").encode("utf-8", "replace"))


class StoreSession(Unit):
    """One session of a store: its hot events, or its cold archive, or both."""

    def __init__(self, store: AgentStore, conn, layout, unit: "openclaw_db.SessionUnit", store_ns: int):
        self.generation = _generation_hash(unit.generation)
        # the session id as archived (a NUL written out); the store is queried with its own
        self.sid = P.visible_id(unit.session_id)
        super().__init__(store.source, store.server, store.agent_id, f"{store.key}#{self.sid}",
                         f"{store.name}#{self.sid}", unit.count,
                         max(store_ns, max(unit.updated_ms, 0) * 1_000_000),
                         token=f"{unit.last_seq}:{unit.count}:{self.generation}", fs=store.fs)
        self.store = store
        self.conn = conn
        self.layout = layout
        self.unit = unit

    def read(self, checkpoint: Checkpoint | None):
        """Events go through the same parser as JSONL lines (one event = one
        line, its ``seq`` = its line index: seq 0 is the header), so identity,
        revisions and derived fields follow the JSONL rules."""
        unit, conn, layout = self.unit, self.conn, self.layout
        after = None
        state = P.ParseState()
        bad = entries_read = bad_before = 0
        last_seq = tail_hash = None
        if (checkpoint is not None and checkpoint.resumable and checkpoint.head_hash == self.generation
                and unit.last_seq > checkpoint.offset):
            old = checkpoint.offset
            same_tail = unit.cold is not None  # a cold archive is immutable while its generation stands
            if not same_tail:
                event = openclaw_db.hot_event(conn, layout, unit.session_id, old)
                same_tail = event is not None and P.short_hash(event) == checkpoint.tail_hash
            if same_tail:
                after = old
                state = P.ParseState(session_id=checkpoint.session_uuid, legacy=checkpoint.legacy,
                                     next_line=old + 1, last_entry_id=checkpoint.last_entry_id)
                bad = bad_before = checkpoint.bad_lines
                entries_read = checkpoint.entries_read
                last_seq, tail_hash = old, checkpoint.tail_hash
        skipped: list[int] = []  # compressed events that do not decode
        streams = []
        events_read = bytes_read = 0
        if unit.cold is not None:
            data = openclaw_db.cold_archive_bytes(conn, self.store.path, unit.cold, self._read_beside)
            bytes_read += len(data)
            streams.append(openclaw_db.iter_cold_events(data, unit.cold, after))
        if unit.hot:
            streams.append(openclaw_db.iter_hot_events(conn, layout, unit.session_id, after, skipped))
        parser = P.TranscriptParser(self.sid, state, shell_tools=self.source.shell_tools)
        pending: list = []
        for seq, raw in itertools.chain(*streams):
            events_read += 1
            bytes_read += len(raw)
            if b"\n" in raw:  # JSON whitespace only (a string cannot hold a raw newline)
                raw = raw.replace(b"\n", b" ")
            state.next_line = seq
            result = parser.feed(raw + b"\n")
            bad += result.bad_lines
            last_seq, tail_hash = seq, P.short_hash(raw)
            if result.entries:
                entries_read += len(result.entries)
                pending.extend(result.entries)
                if len(pending) >= BATCH:
                    yield Batch(state.session_id or self.sid, pending)
                    pending = []
        if pending:
            yield Batch(state.session_id or self.sid, pending)
        if skipped:
            log.warning("session %s: %d compressed events do not decode (seq %s)", self.sid,
                        len(skipped), ", ".join(map(str, skipped[:5])))
            bad += len(skipped)
            if last_seq is None or max(skipped) > last_seq:
                last_seq, tail_hash = max(skipped), None
        new = Checkpoint(
            status="success", token=self.token,
            offset=last_seq if last_seq is not None else unit.last_seq, lines=state.next_line,
            head_hash=self.generation, tail_hash=tail_hash, last_entry_id=state.last_entry_id,
            legacy=state.legacy, bad_lines=bad, pending_lines=0, entries_read=entries_read,
            session_uuid=state.session_id or self.sid,
        )
        return Outcome(new, parser.sessions(), bad=bad, bad_before=bad_before, bytes_read=bytes_read,
                       events_read=events_read, saw_entries=entries_read > 0)

    def _read_beside(self, path: str) -> bytes:
        """A file beside the store (a cold archive), through the store's filesystem."""
        return self.fs.read_bytes(path)


class StoreArchive(TranscriptFile):
    """A deleted or reset session kept whole in session_transcript_archives."""

    prefetch_limit = None

    def __init__(self, store: AgentStore, conn, archive: "openclaw_db.TranscriptArchive"):
        super().__init__(store.source, store.server, store.agent_id, f"{store.key}#archive/{archive.archive_name}",
                         archive.archive_name, archive.size, max(archive.created_ms, 0) * 1_000_000, fs=store.fs)
        self.conn = conn
        self.archive = archive

    def raw(self):
        return io.BytesIO(openclaw_db.transcript_archive_bytes(self.conn, self.archive))


STORE_FIELDS = ("session_key", "label", "display_name", "channel", "chat_type", "spawned_by", "reason",
                "previous_session_id", "status", "ended_at", "model_provider", "model", "archived_at")


class OpenClawStore(OpenClawKind):
    name = "openclaw-store"
    order = 30

    # -- discovery ---------------------------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        return name.endswith(".sqlite")

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope, out: Discovery):
        name = fs.basename(path)
        if name.startswith("incognito-"):
            out.warnings.append(f"skipped {path}: OpenClaw's incognito sentinel holds no transcripts")
            return None
        parent = fs.dirname(path)
        agent = scope.agent or (fs.basename(fs.dirname(parent)) if fs.basename(parent) == "agent"
                                else fs.basename(parent))
        return self._container(fs, scope.server, agent, path, out, listed=(size, mtime_ns))

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        agents = state_agents_dir(fs, path)
        name = fs.basename(path)
        if agents is None and name == "agents":
            agents = path
        if agents is not None:
            try:
                names = sorted(e.name for e in fs.listdir(agents) or [] if e.is_dir())
            except OSError:
                names = []  # the JSONL source reports it
            for agent in names:
                if scope.wants(agent):
                    self._agent_store(fs, scope.server, agent, fs.join(agents, agent), out)
            self._registered(fs, fs.dirname(agents), scope, out)
            return bool(names)
        if name == "sessions":
            agent = scope.agent or fs.basename(fs.dirname(path))
            self._agent_store(fs, scope.server, agent, fs.dirname(path), out)
        return False

    def _agent_store(self, fs: FileSystem, server: str, agent: str, agent_dir: str, out: Discovery) -> None:
        """``agent/openclaw-agent.sqlite``, listed with its ``-wal``."""
        self._container(fs, server, agent, fs.join(agent_dir, "agent", AGENT_DB_NAME), out)

    def _container(self, fs: FileSystem, server: str, agent: str, path: str, out: Discovery,
                   listed: tuple[int, int] | None = None):
        if out.has(server, path):
            return None
        try:
            found = fs.stat(path) if listed is None else ("file",) + listed
            if found is None or found[0] != "file":
                return None
            wal = fs.stat(path + "-wal")
        except OSError as exc:
            out.errors.append(f"cannot stat {path}: {exc.strerror or exc}")
            return None
        size, mtime = found[1], found[2]
        if wal is not None and wal[0] == "file":
            # Committed rows may sit in the -wal: a store whose -wal changed has changed.
            size, mtime = size + wal[1], max(mtime, wal[2])
        container = AgentStore(self, server, agent, path, fs.basename(path), size, mtime, fs=fs)
        out.add(container)
        return container

    def _registered(self, fs: FileSystem, state_dir: str, scope: Scope, out: Discovery) -> None:
        """Agents with a custom folder: ``<state>/state/openclaw.sqlite`` ``agent_databases``."""
        db = fs.join(state_dir, "state", "openclaw.sqlite")
        if not fs.is_file(db):
            return
        try:
            with fs.sqlite_copy(db, ["agent_databases"]) as local:
                found = openclaw_db.registered_stores(local, state_dir)
        except (SourceError, OSError) as exc:
            out.warnings.append(f"cannot read {db}: {exc}")
            return
        for agent, path in found:
            if not scope.wants(agent):
                continue
            if fs.is_file(path):
                self._container(fs, scope.server, agent, path, out)
            else:
                out.warnings.append(f"agent {agent}: its registered store {path} does not exist")

    # -- after the run -----------------------------------------------------------

    def finish_group(self, store, server: str, agent_id: str, metadata: dict) -> None:
        """Session metadata from the stores onto the archived sessions (a value
        the store does not know never erases one already archived), then the
        reset/rollover chain: ``next_session_id`` is the session whose
        ``previous_session_id`` is this one (the latest started, if several).
        After sessions.json (the openclaw source): the store is the newer source."""
        if not metadata:
            return
        rows = store.query(
            "SELECT id, session_uuid, started_at, next_session_id, " + ", ".join(STORE_FIELDS)
            + " FROM sessions WHERE server = ? AND agent_id = ?",
            (server, agent_id),
        )
        chain: list[tuple[str, int, str, str]] = []
        for s in rows:
            m = metadata.get(s["session_uuid"])
            values: dict = {}
            if m:
                for f in STORE_FIELDS:
                    if f in ("ended_at", "archived_at"):
                        value = P.format_timestamp(m.get(f[:-3] + "_ms"))
                    else:
                        value = m.get(f)
                    if value is not None and value != s[f]:
                        values[f] = value
                if s["started_at"] is None and m.get("started_ms") is not None:
                    values["started_at"] = P.format_timestamp(m["started_ms"])
            previous = values.get("previous_session_id", s["previous_session_id"])
            if previous:
                chain.append((s["started_at"] or values.get("started_at") or "", s["id"], previous,
                              s["session_uuid"]))
            if values:
                store.update("sessions", s["id"], values)
        following = {prev: sid for _, _, prev, sid in sorted(chain)}  # the latest started wins
        for s in rows:
            want = following.get(s["session_uuid"])
            if want != s["next_session_id"]:
                store.update("sessions", s["id"], {"next_session_id": want})


SOURCE = OpenClawStore()

__all__ = ["SOURCE", "AgentStore", "StoreSession", "StoreArchive", "copied_tables", "IMPORT_ARCHIVE_DIR"]
