"""`agentbase doctor`: which agents are covered, on every server.

For each server (this machine, every configured one, and any other the archive holds) and each kind,
it lists the kind's default places there (found or not), and from the archive: the files seen
(and how many were failed or not recognised), the last one, the sessions and the last archived,
the record types the kind did not know (counted, one example each: a session and a position,
never content), and the agent versions seen. A kind whose format changed shows up here as places
found with nothing read, or as unknown types and a new version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .sources import FileSystem, all_sources
from .sources.base import default_server_name
from .vocabulary import UNKNOWN


@dataclass
class KindReport:
    kind: str
    places: list[dict] = field(default_factory=list)  # {"path", "found"}
    files: int = 0
    files_failed: int = 0
    files_unrecognised: int = 0
    last_file: str | None = None
    last_file_at: str | None = None
    sessions: int = 0
    last_session_at: str | None = None
    unknown_types: list[dict] = field(default_factory=list)  # {"type", "count", "example"}
    versions: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return any(p["found"] for p in self.places)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "found": self.found, "places": self.places, "files": self.files,
                "files_failed": self.files_failed, "files_unrecognised": self.files_unrecognised,
                "last_file": self.last_file, "last_file_at": self.last_file_at, "sessions": self.sessions,
                "last_session_at": self.last_session_at, "unknown_types": self.unknown_types,
                "versions": self.versions}


@dataclass
class ServerReport:
    name: str
    where: str  # "this machine", "ssh host", "archive only"
    error: str | None = None
    kinds: list[KindReport] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"server": self.name, "where": self.where, "error": self.error,
                "kinds": [k.as_dict() for k in self.kinds]}


def kinds_and_places() -> dict[str, list[str]]:
    """Every kind (the ``source`` value) with its default places, in discovery order."""
    out: dict[str, list[str]] = {}
    for source in all_sources():
        places = out.setdefault(source.kind, [])
        places.extend(p for p in source.candidates() if p not in places)
    return out


def check_places(fs: FileSystem, places: list[str]) -> list[dict]:
    out = []
    for path in places:
        try:
            found = fs.stat(fs.abspath(path)) is not None
        except OSError:
            found = False
        out.append({"path": path, "found": found})
    return out


def archive_figures(store, server: str, kind: str, report: KindReport) -> None:
    """What the archive holds of ``kind`` on ``server``."""
    row = store.tuples(
        "SELECT COUNT(*), SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN status = 'ignored' THEN 1 ELSE 0 END) FROM parsed_files WHERE server = ? AND source = ?",
        (server, kind))[0]
    report.files, report.files_failed, report.files_unrecognised = row[0] or 0, row[1] or 0, row[2] or 0
    last = store.tuples("SELECT file_path, parsed_at FROM parsed_files WHERE server = ? AND source = ? "
                        "ORDER BY file_mtime_ns DESC, id DESC LIMIT 1", (server, kind))
    if last:
        report.last_file, report.last_file_at = last[0][0], _text(last[0][1])
    row = store.tuples("SELECT COUNT(*), MAX(COALESCE(last_message_at, started_at)) FROM sessions "
                       "WHERE server = ? AND source = ?", (server, kind))[0]
    report.sessions, report.last_session_at = row[0] or 0, _text(row[1])
    unknown = store.tuples(
        "SELECT e.entry_type, COUNT(*), MIN(e.id) FROM entries e JOIN sessions s ON s.id = e.session_id "
        "WHERE s.server = ? AND s.source = ? AND (e.custom_type = ? OR e.entry_type = ?) GROUP BY e.entry_type "
        "ORDER BY COUNT(*) DESC", (server, kind, UNKNOWN, UNKNOWN))
    for entry_type, count, first in unknown[:20]:
        where = store.tuples("SELECT s.session_uuid, e.seq FROM entries e JOIN sessions s ON s.id = e.session_id "
                             "WHERE e.id = ?", (first,))[0]
        report.unknown_types.append({"type": entry_type, "count": count,
                                     "example": f"session {where[0]}, record {where[1]}"})
    report.versions = [v for (v,) in store.tuples(
        "SELECT agent_version FROM sessions WHERE server = ? AND source = ? AND agent_version IS NOT NULL "
        "GROUP BY agent_version ORDER BY MAX(COALESCE(last_message_at, started_at)) DESC", (server, kind))][:12]


def _text(value) -> str | None:
    if value is None:
        return None
    return str(value)[:19]


def diagnose(store, servers: list[tuple[str, str, FileSystem | None, str | None]]) -> list[ServerReport]:
    """``servers``: (name, where, filesystem or None when it cannot be reached, the error then).
    Servers the archive holds that are not named are added, with the archive's figures only."""
    kinds = kinds_and_places()
    named = [s[0] for s in servers]
    archived = [n for (n,) in store.tuples("SELECT DISTINCT server FROM sessions ORDER BY server")]
    out = []
    for name, where, fs, error in list(servers) + [(n, "archive only", None, None) for n in archived
                                                      if n not in named]:
        server = ServerReport(name, where, error)
        for kind, places in kinds.items():
            report = KindReport(kind)
            report.places = check_places(fs, places) if fs is not None else \
                [{"path": p, "found": None} for p in places]
            archive_figures(store, name, kind, report)
            server.kinds.append(report)
        out.append(server)
    return out


def local_server() -> tuple[str, str, FileSystem, None]:
    return (default_server_name(), "this machine", FileSystem(), None)


def format_text(reports: list[ServerReport], everything: bool = False) -> str:
    """One block per server, a line per kind (kinds neither found nor archived left out unless
    ``everything``)."""
    from .terminal import clean

    lines = []
    notes: set[str] = set()
    for server in reports:
        head = f"server {server.name} ({server.where})"
        if server.error:
            head += f": {server.error}"
        lines.append(clean(head))
        rows = [("kind", "found at", "files", "sessions", "last session", "unknown types", "versions")]
        hidden = 0
        for k in server.kinds:
            if not everything and not k.found and not k.files and not k.sessions:
                hidden += 1
                continue
            if not k.places:
                found = "(no default place)"
            elif any(p["found"] is None for p in k.places):
                found = "? (not checked)"
            else:
                found = ", ".join(p["path"] for p in k.places if p["found"]) or "not found"
            files = str(k.files)
            problems = [f"{k.files_failed} failed"] * bool(k.files_failed) + \
                [f"{k.files_unrecognised} not recognised"] * bool(k.files_unrecognised)
            if problems:
                files += f" ({', '.join(problems)})"
            unknown = ", ".join(f"{u['type']} x{u['count']}" for u in k.unknown_types[:3]) or "-"
            if len(k.unknown_types) > 3:
                unknown += f", +{len(k.unknown_types) - 3}"
            versions = ", ".join(k.versions[:3]) or "-"
            sessions = str(k.sessions)
            if k.found and not k.sessions:
                sessions += " (none read)"
                notes.add("none read: the kind's place is there but nothing of it is archived: run agentbase "
                          "import, or it holds a format AgentBase does not read")
            rows.append((k.kind, found, files, sessions, k.last_session_at or "-", unknown, versions))
        widths = [max(len(clean(r[i])) for r in rows) for i in range(len(rows[0]) - 1)]
        for r in rows if len(rows) > 1 else ():
            cells = [clean(c) for c in r]
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + cells[-1])
        if hidden:
            lines.append(f"  ({hidden} more kinds neither found nor archived here: --all lists them)")
        lines.append("")
    lines.extend(sorted(notes))
    return "\n".join(lines).rstrip() + "\n"
