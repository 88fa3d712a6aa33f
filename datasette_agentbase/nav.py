"""The explorer's navigation: one bar on every page (the plugin's and Datasette's own, through
templates/base.html), the same places in Datasette's menu, and which of them a page belongs to.

The places, in order: Sessions (the session browser, the home page, and every conversation),
Search (the session browser's search box: ``/?q=``), Dashboard (``/-/agentbase``), Reports
(``/-/agentbase/reports``) and SQL/Tables (Datasette's page of the snapshot: its tables, canned
queries and SQL editor; every table, row and query page is under it). A page another database is
shown for keeps its ``?db=`` in the links of the plugin's pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from . import served


@dataclass(frozen=True)
class Place:
    key: str
    label: str
    href: str
    title: str
    current: bool = False


PLACES = (
    ("sessions", "Sessions", "every session, newest first"),
    ("search", "Search", "search the sessions' titles and first prompts"),
    ("dashboard", "Dashboard", "messages and cost per day, per model, per agent"),
    ("reports", "Reports", "usage and cost per day, week, month, session and model"),
    ("sql", "SQL/Tables", "Datasette's tables, canned queries and SQL editor"),
)


def _database(datasette, request) -> str | None:
    """The snapshot the links are for: ?db= when it names a database, else the first snapshot, else the
    first database served."""
    wanted = request.args.get("db") if request is not None else None
    if wanted and wanted in datasette.databases:
        return wanted
    names = [n for n in datasette.databases if n != "_internal"]
    known = served.snapshots(datasette)
    return next((n for n in names if known.get(n)), names[0] if names else None)


def current(datasette, request) -> str | None:
    """Which place a page belongs to (None: none of them, e.g. /-/metadata)."""
    if request is None:
        return None
    path = request.path
    base = (datasette.setting("base_url") or "/").rstrip("/")
    if base and path.startswith(base):
        path = path[len(base):] or "/"
    if path in ("/", "/-/agentbase/sessions"):
        return "search" if request.args.get("q") else "sessions"
    if path.startswith("/-/agentbase/session/"):
        return "sessions"
    if path.rstrip("/") == "/-/agentbase":
        return "dashboard"
    if path.startswith("/-/agentbase/reports"):
        return "reports"
    if path.startswith("/-/"):
        return None
    first = path.strip("/").split("/")[0]
    return "sql" if first and not first.endswith(".db") else None


def places(datasette, request) -> list[Place]:
    """The bar's places with their hrefs (respecting base_url and ?db=), the page's own marked (an error
    page may have no request: then none is)."""
    if not hasattr(request, "args"):
        request = None
    if not served.snapshots(datasette):
        return []  # Datasette serving other databases only: its own pages, as they are
    database = _database(datasette, request)
    keep = "?" + urlencode({"db": database}) if request is not None and request.args.get("db") else ""
    hrefs = {
        "sessions": str(datasette.urls.instance()) + keep,
        "search": str(datasette.urls.instance()) + keep + "#search",
        "dashboard": str(datasette.urls.path("-/agentbase")) + keep,
        "reports": str(datasette.urls.path("-/agentbase/reports")) + keep,
        "sql": str(datasette.urls.database(database)) if database else str(datasette.urls.instance()),
    }
    here = current(datasette, request)
    return [Place(key, label, hrefs[key], title, key == here) for key, label, title in PLACES]


def menu_links(datasette) -> list[dict]:
    """Datasette's menu: the same places (no request: the first snapshot's); nothing when no snapshot is
    served. (Not the snapshot's download: off unless asked for, it is every transcript in one click.)"""
    return [{"href": p.href, "label": p.label} for p in places(datasette, None)]


# -- a conversation's neighbours -----------------------------------------------------------------

def neighbours(conn, session_id: int) -> dict:
    """The sessions just newer and just older than this one in the session browser's order (last
    activity, newest first: session_list's index), each as {id, title}; {} for a snapshot without the
    session list."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'session_list'").fetchone() is None:
        return {}
    here = conn.execute("SELECT last_message_at, id FROM session_list WHERE id = ?", (session_id,)).fetchone()
    if here is None or here[0] is None:
        return {}
    at, sid = here
    out = {}
    for key, sql in (
            ("newer", "SELECT id, title, agent_id, last_local FROM session_list WHERE last_message_at >= ? "
                      "AND (last_message_at > ? OR id > ?) ORDER BY last_message_at, id LIMIT 1"),
            ("older", "SELECT id, title, agent_id, last_local FROM session_list WHERE last_message_at <= ? "
                      "AND (last_message_at < ? OR id < ?) ORDER BY last_message_at DESC, id DESC LIMIT 1")):
        row = conn.execute(sql, (at, at, sid)).fetchone()
        if row is not None:
            out[key] = {"id": row[0], "title": row[1] or f"Untitled {row[2] or 'agent'} session",
                        "agent": row[2], "last": (row[3] or "")[:16]}
    return out


# -- a session's badge line ------------------------------------------------------------------------

BADGE_TITLES = {
    "server": ("server", "the machine the transcript was read on"),
    "agent": ("agent", "the agent (or profile) that ran this session"),
    "source": ("source", "the kind of program that wrote the transcript"),
    "session_type": ("session type", "how the session was started"),
}


def badges(session: dict) -> list[dict]:
    """The badges at the top of a conversation: its server, agent, source kind and session type, each
    once (an agent named like its kind, ``claude-code`` by ``claude-code``, is one badge: "agent and
    source"), each saying what it is on hover; an ordinary session's type ("normal") is left out, and
    "subagent" (the page's own "sub-agent" badge says it, with the session it was started from)."""
    out: list[dict] = []
    for what in ("server", "agent", "source", "session_type"):
        value = session.get("agent_id" if what == "agent" else what)
        if value is None or value == "" or (what == "session_type" and value in ("normal", "subagent")):
            continue
        name, meaning = BADGE_TITLES[what]
        same = next((b for b in out if b["value"] == str(value)), None)
        if same is not None:
            same["names"].append(name)
            same["meanings"].append(meaning)
        else:
            out.append({"value": str(value), "what": what, "names": [name], "meanings": [meaning]})
    for b in out:
        b["title"] = f"{' and '.join(b['names'])}: {b['value']} ({'; '.join(b['meanings'])})"
    return out
