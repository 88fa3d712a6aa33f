"""What a source kind is: :class:`Source`, the scope a discovery runs for, and
what discovery found.

A source kind (one module of this package, or a plug-in registered under the
``agentbase.sources`` entry point) recognises its layout under a path and
lists units and containers (``importer/units.py``: the unit types, the
checkpoint and what reading a unit gives the writer) into a
:class:`Discovery`. The pipeline never asks what kind a unit is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..units import Unit
from .fs import folders

if TYPE_CHECKING:
    from .fs import FileSystem


def default_server_name() -> str:
    import socket  # (here: most of a start-up needs no socket module)

    return socket.gethostname().split(".")[0] or "local"


# ---------------------------------------------------------------------------
# Source kinds and what discovery found


@dataclass
class Scope:
    """Who a discovery is for: the server name its units get, the agent that
    names a single file or bare folder (``--agent``), and the agents to keep
    in a larger tree (None: all)."""

    server: str
    agent: str | None = None
    agents: frozenset[str] | None = None
    # The IANA zone the server's local times are in (a source that writes times
    # without a zone); None: this machine's.
    timezone: str | None = None

    def wants(self, agent_id: str) -> bool:
        return (self.agents is None or agent_id in self.agents) and (self.agent is None or self.agent == agent_id)


@dataclass
class Discovery:
    units: list = field(default_factory=list)  # Units and Containers
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    keys: set = field(default_factory=set, repr=False)  # (server, key) of every unit listed

    def add(self, item) -> bool:
        """List a unit or container once: a key listed already (by another kind,
        or another path) is not listed again. Returns whether it was added."""
        key = (item.server, item.key)
        if key in self.keys:
            return False
        self.keys.add(key)
        self.units.append(item)
        return True

    def has(self, server: str, key: str) -> bool:
        return (server, key) in self.keys


class Source:
    """A source kind. Subclasses (one per module of this package) set ``kind``
    (the ``source`` column's value) and, where it is not the kind's, ``name``
    (unique), declare where the kind lives (``places``) and implement
    :meth:`find`; the units they list read themselves."""

    kind = "unknown"
    name = "unknown"  # a subclass that sets no name of its own is named after its kind
    order = 100  # discovery order: lower first (a more specific layout before a looser one)
    # The kind writes each model call's cost itself (OpenClaw, pi): never
    # replaced. Otherwise calls are priced from the price table (prices.py).
    records_costs = False
    # The tool names that run a shell command in this kind: its one list (docs/sources.md, "Shell
    # calls"). Its parser gives their calls a command (and no other call one); stats counts them.
    shell_tools: frozenset[str] = frozenset()
    # Datasette canned queries over the kind's tables, offered on every snapshot
    # (name -> {"title", "sql", "params", ...}, as metadata.yml spells them).
    canned_queries: dict[str, dict] = {}
    # Where this kind lives on a machine by default, in order (``~`` allowed): ``$VAR`` or
    # ``$VAR/sub`` where this machine's environment sets VAR (left out over SSH: the variable is
    # this machine's, not the server's). :meth:`candidates`, :meth:`default_paths`.
    places: tuple[str, ...] = ()
    # Why a unit of this kind was not read as one (a file of its name holding something else).
    not_this = ""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__ and "kind" in cls.__dict__:
            cls.name = cls.kind

    def find(self, fs: "FileSystem", path: str, scope: Scope, out: Discovery) -> bool:
        """List this kind's units at or under ``path`` into ``out``; True when
        ``path`` holds this kind's layout (even if nothing is in it yet)."""
        return False

    def claims_file(self, name: str, head: bytes) -> bool:
        """Whether a single file named on the command line is this kind's (by its
        name and first bytes)."""
        return False

    def file_unit(self, fs: "FileSystem", path: str, size: int, mtime_ns: int, scope: Scope,
                  out: Discovery) -> "Unit | None":
        """The unit for a single file this kind claimed."""
        raise NotImplementedError

    def finish_group(self, store, server: str, agent_id: str, metadata: dict) -> None:
        """After a run touched a (server, agent) group: apply what this kind's
        units and containers gathered for it (``metadata``: session uuid ->
        ``sessions`` columns), in its own transaction. Kinds are called in
        ``order``."""

    def usage_deferred(self, store, session_ids: list[int]) -> None:
        """These sessions of this kind now count their usage in the provider's own
        transcript (``sessions.counted_in_session_id``): a kind with tables of its
        own that carry usage follows suit here."""

    def extra_stats(self, store) -> dict:
        """Figures this kind counts of its own, added to its ``stats`` ``by_source``
        entry (e.g. the tables it declares)."""
        return {}

    def candidates(self) -> list[str]:
        """Where this kind lives on this machine by default (``~`` allowed): its ``places``."""
        out = []
        for place in self.places:
            if place.startswith("$"):
                variable, _, sub = place[1:].partition("/")
                value = os.environ.get(variable)
                if not value:
                    continue
                place = os.path.join(value, sub) if sub else value
            out.append(place)
        return out

    def default_paths(self, fs: "FileSystem") -> list[str]:
        """The places to import this kind from on a machine when no PATH is
        given (and for servers configured without ``paths``): by default the
        first of :meth:`candidates` that is a folder there (over SSH, of the
        ``places`` no environment variable names; a kind that declares no places
        but its own candidates(), a plug-in's say: of those)."""
        if fs.remote and self.places:
            places = [p for p in self.places if not p.startswith("$")]
        else:
            places = self.candidates()
        first = next(folders(fs, places), None)
        return [first] if first is not None else []

    def session_type(self, name: str) -> str:
        """The session type a unit's file name implies."""
        return "normal"

    def is_copy(self, name: str) -> bool:
        """Copies (checkpoints, backups) never decide a session's derived fields
        while a live file exists."""
        return False

    def claimed_session(self, name: str) -> str | None:
        """The session a unit's name says it holds (None: its name says nothing).
        Two units of one session whose names claim different sessions are rivals:
        a second file that claims an existing session id with different content
        (a copy put under another name, an id collision) never rewrites what the
        first brought."""
        return None

    def not_this_kind(self) -> str:
        return self.not_this or f"not a {self.kind} transcript"


def sort_units(units: list) -> None:
    """Import order: per server and agent, oldest first, metadata units last,
    so the newest unit's content and derived fields win whatever the run
    history."""
    units.sort(key=lambda u: (u.server, u.agent_id, u.meta, u.mtime_ns, u.key))
