"""What the import moves: units, their checkpoints, and what reading one gives.

The ground floor of the importer: it imports nothing of AgentBase, and every
stage above it (the source kinds in ``sources/``, the parser, the writer, the
pipeline, the store) speaks these types.

A **unit** is one thing imported in one transaction: a transcript file, a
session inside a store, a session file with its archives. It has a **change
token** (listing data that changes whenever the unit does: size and time of a
file, last sequence number and event count of a store session) and a key
(``parsed_files.file_path``). Units that share an expensive resource (a SQLite
database opened once, or copied once from a server) sit in a **container**,
which has a token of its own: an unchanged container is not even opened.

The pipeline keeps one :class:`Checkpoint` per unit (its ``parsed_files``
row). :func:`unchanged` says whether the unit can be skipped; otherwise
``unit.read(checkpoint)`` reads what is new since the checkpoint (or all of
it), yields :class:`Batch` objects (entries of one session, rows of other
tables) and returns an :class:`Outcome`, whose checkpoint the writer stores
with the unit's rows, in one transaction. :func:`prefetch` reads a unit ahead
of its transaction (the store's batch does, for a store that defers commits). Nobody above asks what
kind a unit is; the kinds themselves (``sources/base.py``'s ``Source``) are
one floor up.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Iterator

import orjson

class SourceLost(Exception):
    """The connection behind a source went away mid-run (a remote server).

    The unit being read is rolled back; it and the units after it from the
    same source are left for the next run with their recorded state untouched.
    """


class NotATranscript(Exception):
    """A unit that turned out not to be of its kind: recorded as ``ignored``."""


class SourceError(Exception):
    """A unit (or container) that cannot be read as expected; the message is one
    line naming paths, ids and sizes, never transcript content."""


# ---------------------------------------------------------------------------
# The checkpoint: "unchanged" and "resume from", for every source


@dataclass
class Checkpoint:
    """Where a unit was left: its change token, and where reading can resume.

    Stored as the unit's ``parsed_files`` row. ``offset`` is what was read up
    to (bytes of a file, the last ``seq`` of a store session), ``lines`` the
    line index at that offset, ``head_hash``/``tail_hash`` what tells a
    resumable append from a rewrite (each source decides what it hashes),
    ``state`` whatever else a source's parser must carry across runs.
    """

    status: str | None = None
    token: str | None = None
    offset: int = 0
    lines: int = 0
    head_hash: str | None = None
    tail_hash: str | None = None
    last_entry_id: str | None = None
    legacy: bool = False
    bad_lines: int = 0
    pending_lines: int = 0
    entries_read: int = 0
    session_uuid: str | None = None
    state: dict = field(default_factory=dict)

    @classmethod
    def from_row(cls, row) -> "Checkpoint | None":
        if row is None:
            return None
        raw = row["resume_state"]
        try:
            state = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            state = {}
        return cls(
            status=row["status"], token=row["change_token"], offset=row["parsed_offset"] or 0,
            lines=row["parsed_lines"] or 0, head_hash=row["head_hash"], tail_hash=row["tail_hash"],
            last_entry_id=row["last_entry_id"], legacy=bool(row["legacy_format"]),
            bad_lines=row["bad_lines"] or 0, pending_lines=row["pending_lines"] or 0,
            entries_read=row["entries_read"] or 0, session_uuid=row["session_uuid"],
            state=state if isinstance(state, dict) else {},
        )

    @property
    def resumable(self) -> bool:
        """Whether reading may go on from ``offset`` (the last read succeeded)."""
        return self.status == "success"

    def columns(self) -> dict:
        """The checkpoint's ``parsed_files`` columns."""
        return {
            "change_token": self.token, "parsed_offset": self.offset, "parsed_lines": self.lines,
            "head_hash": self.head_hash, "tail_hash": self.tail_hash, "last_entry_id": self.last_entry_id,
            "legacy_format": int(self.legacy), "bad_lines": self.bad_lines, "pending_lines": self.pending_lines,
            "entries_read": self.entries_read, "session_uuid": self.session_uuid,
            "resume_state": orjson.dumps(self.state).decode() if self.state else None,
        }


def unchanged(row, token: str) -> bool:
    """Whether a unit (or container) listed with ``token`` is as its stored
    checkpoint row left it. The one "unchanged" rule of every source."""
    return row is not None and row["status"] in ("success", "ignored") and row["change_token"] == token


def file_token(size: int, mtime_ns: int) -> str:
    """The change token of a plain file: its size and modification time."""
    return f"{size}:{mtime_ns}"


# ---------------------------------------------------------------------------
# What reading a unit gives the writer


@dataclass
class SessionInfo:
    """Session-level values a unit holds (from a header line, a session file's
    fields, a store's session row): ``sessions`` columns, and the raw JSON
    kept as ``header_json`` (when the source has one)."""

    values: dict = field(default_factory=dict)
    raw: str | None = None


@dataclass
class Batch:
    """What a unit's reader hands the writer at a time: entries of one session
    (parser.Entry objects with their rows derived or derivable), and rows of
    other tables, each upserted by its key columns."""

    session: str | None
    entries: list = field(default_factory=list)
    rows: list[tuple[str, list[dict], tuple[str, ...]]] = field(default_factory=list)


@dataclass
class Outcome:
    """What reading a unit found, besides its batches."""

    checkpoint: Checkpoint
    sessions: dict[str, SessionInfo] = field(default_factory=dict)  # session uuid -> its values
    bad: int = 0  # bad lines in the whole unit (not only this read)
    bad_before: int = 0  # of which were counted by earlier runs
    pending: int = 0
    bytes_read: int = 0
    events_read: int = 0
    typed: bool = True  # the unit was recognised as its kind (False: NotATranscript when it had content)
    saw_entries: bool = False
    warnings: list[str] = field(default_factory=list)


Reading = Generator[Batch, None, Outcome]


# ---------------------------------------------------------------------------
# Units and containers


@dataclass(eq=False, repr=False)
class _Listed:
    """What a listing says of a unit or a container: the kind that listed it, its (server,
    agent) group, its key, file name, size, time and change token, and where it is read."""

    source: Any
    server: str
    agent_id: str
    key: str
    name: str
    size: int
    mtime_ns: int
    token: str | None = None  # None: the size's and time's (file_token)
    fs: Any = None
    path: str | None = None  # None: the key
    # named on its own on the command line, not found in a kind's place
    named: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.token is None:
            self.token = file_token(self.size, self.mtime_ns)
        if self.path is None:
            self.path = self.key

    @property
    def group(self) -> tuple[str, str]:
        return (self.server, self.agent_id)


class Unit(_Listed):
    """One thing imported in one transaction, with its own checkpoint.

    ``key`` is its identity (``parsed_files.file_path``), ``name`` the file
    name it goes by (which gives a session type and ranks it against other
    files of the same session), ``size`` and ``mtime_ns`` what the listing
    said (a store session's size is its number of events), ``token`` its
    change token. ``counted``: it counts as a file in the run's figures
    (an index such as sessions.json does not). ``meta``: the unit only
    carries session metadata, applied once the run's transcripts are in.
    ``source`` is the kind that listed it (a ``sources.base.Source``), ``fs``
    the filesystem it is read through (``sources.fs``: local or SFTP).
    """

    counted = True
    meta = False
    # How the unit can be read again: the most new bytes a store's batch may
    # read and parse ahead of its transaction, and hold until its commit has
    # landed (a listed unit with a limit can also be read a second time, on
    # its own, when that commit fails). None: read only inside its
    # transaction, at once. Only the store's batch (store/batch.py) asks.
    prefetch_limit: int | None = None

    def __init__(self, source: Any, server: str, agent_id: str, key: str, name: str, size: int,
                 mtime_ns: int, token: str | None = None, fs: Any = None, path: str | None = None,
                 session_type: str | None = None):
        super().__init__(source, server, agent_id, key, name, size, mtime_ns, token, fs, path)
        self._session_type = session_type

    @property
    def session_type(self) -> str:
        if self._session_type is None:
            self._session_type = self.source.session_type(self.name)
        return self._session_type

    @property
    def kind(self) -> str:
        """The ``source`` column's value for what this unit holds."""
        return self.source.kind

    @property
    def rank(self) -> str:
        """Which unit decides a session's derived fields: live files before
        copies, then the newest (see Source.is_copy)."""
        return f"{0 if self.source.is_copy(self.name) else 1}:{self.mtime_ns:020d}:{self.name}"

    def read(self, checkpoint: Checkpoint | None) -> Reading:
        """Yield what is new since ``checkpoint`` (all of it when None); return the Outcome."""
        raise NotImplementedError

    def open(self):
        """The unit's bytes (a binary file object): a file unit's reading."""
        return self.fs.open(self.path, self.size)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.server}/{self.agent_id} {self.key}>"


class Problem(Unit):
    """Something a listing found that can never be read as it is (a name that
    is not valid UTF-8): one failed unit of its own, shown with escapes, so that
    everything else imports and the problem is reported every run until it is
    fixed."""

    def __init__(self, source: Any, server: str, agent_id: str, key: str, message: str):
        super().__init__(source, server, agent_id, key, key.rsplit("/", 1)[-1], 0, 0, token="problem")
        self.message = message

    @property
    def session_type(self) -> str:
        return "problem"

    def read(self, checkpoint):
        raise SourceError(self.message)
        yield  # pragma: no cover


class Container(_Listed):
    """Units that share an open resource (a SQLite database): listed when the
    container is opened, which is skipped when its token is unchanged.
    ``open()`` is a context manager yielding an :class:`Opened`."""

    counted = False
    meta = False


    session_type = "container"

    @contextmanager
    def open(self) -> Iterator["Opened"]:
        raise NotImplementedError
        yield  # pragma: no cover

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.server}/{self.agent_id} {self.key}>"


@dataclass
class Opened:
    """An open container: its units, and what to apply once they are in."""

    units: list
    # Session metadata to apply after the run's units: session uuid -> sessions columns.
    metadata: Callable[[], dict[str, dict]] = lambda: {}
    warnings: list[str] = field(default_factory=list)



# ---------------------------------------------------------------------------
# Reading ahead of the transaction


@dataclass
class Prefetched:
    """A unit read and parsed ahead of its transaction, against the checkpoint
    the listing had for it."""

    checkpoint: Checkpoint | None
    batches: list
    outcome: Outcome

    def fits(self, checkpoint: Checkpoint | None) -> bool:
        """Whether it was read against the same checkpoint (another importer
        may have taken the unit since the listing)."""
        return checkpoint == self.checkpoint

    def replay(self) -> Reading:
        """The same protocol as :meth:`Unit.read`."""
        for batch in self.batches:
            yield batch
        return self.outcome


def prefetch(unit: Unit, checkpoint: Checkpoint | None) -> Prefetched | None:
    """Read and parse a unit ahead of time, its rows derived; None when it
    would read more than its ``prefetch_limit``, or fails (the writer then
    reads it itself and meets the error in its own transaction)."""
    limit = unit.prefetch_limit
    if limit is None:
        return None
    done = checkpoint.offset if checkpoint is not None and checkpoint.resumable else 0
    if unit.size - min(done, unit.size) > limit:
        return None
    batches = []
    stream = unit.read(checkpoint)
    try:
        while True:
            batch = next(stream)
            for entry in batch.entries:
                entry.derive()
            batches.append(batch)
    except StopIteration as stop:
        return Prefetched(checkpoint, batches, stop.value)
    except Exception:
        return None
