"""Datasette plugin for AgentBase snapshots.

Registered under the ``datasette`` entry point by setup.py. Hooks (each also
in Datasette 1.0, with the same arguments):

- ``prepare_connection``: SQL functions for the canned queries:
  ``agentbase_fts(q)`` (what a user typed -> the FTS5 MATCH expression, see
  importer/search.py), ``agentbase_snippet(content_blocks, text_preview, q)``
  (the contentless index has no ``snippet()``), ``agentbase_session_url(id[,
  message_id])``, ``agentbase_row_url(table, id)`` and
  ``agentbase_query_url(name[, key, value]...)`` (links that respect
  ``base_url``); it also notes which databases are AgentBase snapshots.
- ``render_cell``: content blocks, tool arguments, thinking, JSON and search
  snippets as HTML, every value escaped; session ids and uuids link to the
  conversation view. It runs first (``tryfirst``), so transcript text that
  happens to look like a datasette-json-html value stays text; the link
  columns of the canned queries (conversation, session, message, tool_call)
  are left to datasette-json-html.
- ``register_routes``: the conversation view ``/-/agentbase/session/<id>``,
  the dashboard ``/-/agentbase``, the login page ``/-/agentbase/login``, the
  stylesheet and, with a password, ``/-/logout`` (see access.py).
- ``permission_allowed`` and ``forbidden``: with a password configured,
  everything is behind the login (see access.py).
- ``prepare_jinja2_environment``: ``agentbase_next_href(rows, columns)`` for
  the "Next page" link of the canned queries that page (templates/query.html).
- ``canned_queries``: on a snapshot holding a source kind's data, the canned
  queries the kind declares (``Source.canned_queries``: name -> title, sql,
  params..., and optionally the ``tables`` it reads), beside metadata.yml's.
- ``extra_css_urls``, ``menu_links``; ``startup`` checks the access settings
  and computes the dashboard's cube (dashboard.py) in a background thread.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from urllib.parse import urlencode

from datasette import hookimpl
from datasette.utils.asgi import NotFound, Response
from markupsafe import Markup

from importer import shape
from importer.search import fts_query

from . import access, browser, conversation, dashboard, render
from .snippets import snippet

HERE = Path(__file__).resolve().parent
CSS_PATH = HERE / "static" / "agentbase.css"
SNAPSHOT_MARKER = shape.MARKER
LINK_COLUMNS = {"conversation", "session", "message", "tool_call", "messages", "next"}
BLOCK_COLUMNS = shape.BLOCK_COLUMNS
JSON_COLUMNS = shape.JSON_COLUMNS
THINKING_COLUMNS = shape.THINKING_COLUMNS


def _snapshots(datasette) -> dict:
    """Names of the databases that are AgentBase snapshots (filled by prepare_connection)."""
    found = getattr(datasette, "_agentbase_snapshots", None)
    if found is None:
        found = {}
        datasette._agentbase_snapshots = found
    return found


def _is_snapshot_conn(conn: sqlite3.Connection) -> bool:
    try:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                            (SNAPSHOT_MARKER,)).fetchone() is not None
    except sqlite3.Error:
        return False


def session_path(datasette, database: str | None, session_id, message_id=None) -> str:
    path = str(datasette.urls.path(f"-/agentbase/session/{int(session_id)}"))
    names = [n for n in datasette.databases if _snapshots(datasette).get(n)]
    if database and names and database != names[0]:
        path += "?" + urlencode({"db": database})
    if message_id is not None:
        path += f"#m{int(message_id)}"
    return path


def row_path(datasette, database: str, table: str, row_id) -> str:
    return str(datasette.urls.row(database, table, str(int(row_id))))


@hookimpl
def prepare_connection(conn, database, datasette):
    if _is_snapshot_conn(conn):
        _snapshots(datasette)[database] = True

    def session_url(session_id, message_id=None):
        if session_id is None:
            return None
        return session_path(datasette, database, session_id, message_id)

    def row_url(table, row_id):
        if row_id is None or not isinstance(table, str):
            return None
        return row_path(datasette, database, table, row_id)

    conn.create_function("agentbase_fts", 1, lambda q: fts_query(q or ""), deterministic=True)
    conn.create_function("agentbase_snippet", 3, snippet, deterministic=True)
    conn.create_function("agentbase_session_url", 1, session_url)
    conn.create_function("agentbase_session_url", 2, session_url)
    conn.create_function("agentbase_row_url", 2, row_url)

    def query_url(name, *pairs):
        if not isinstance(name, str):
            return None
        params = [(str(k), str(v)) for k, v in zip(pairs[::2], pairs[1::2]) if v is not None]
        return str(datasette.urls.query(database, name)) + ("?" + urlencode(params) if params else "")

    conn.create_function("agentbase_query_url", -1, query_url)


def _row_get(row, key):
    try:
        return row[key]
    except (KeyError, IndexError, TypeError):
        return None


def _looks_like_json(value: str) -> bool:
    stripped = value.strip()
    return (stripped[:1], stripped[-1:]) in (("{", "}"), ("[", "]"))


@hookimpl(tryfirst=True)
def render_cell(row, value, column, table, database, datasette):
    if not isinstance(value, (str, int)) or not _snapshots(datasette).get(database):
        return None
    if column == "session_id" and table in ("messages", "tool_calls", "entries") and isinstance(value, int):
        anchor = _row_get(row, "id") if table == "messages" else _row_get(row, "message_id")
        return Markup('<a href="{}">{}</a>').format(session_path(datasette, database, value, anchor), value)
    if not isinstance(value, str):
        return None
    if column == "session_uuid" and table in ("sessions", "messages", "tool_calls", "entries"):
        sid = _row_get(row, "id") if table == "sessions" else _row_get(row, "session_id")
        if isinstance(sid, int):
            anchor = (_row_get(row, "id") if table == "messages"
                      else _row_get(row, "message_id") if table == "tool_calls" else None)
            return Markup('<a href="{}" title="conversation view">{}</a>').format(
                session_path(datasette, database, sid, anchor), value)
        return None
    if table is None and column in LINK_COLUMNS:
        return None  # a canned query's link value: datasette-json-html draws it
    limit = datasette.setting("truncate_cells_html") or None
    more = None
    if table in shape.tables() and isinstance(_row_get(row, "id"), int):
        more = row_path(datasette, database, table, _row_get(row, "id")) + ".json"
    options = render.Options(limit=limit, more_href=more)
    if column in BLOCK_COLUMNS and _looks_like_json(value):
        return render.render_blocks(value, options)
    if column == "arguments" and _looks_like_json(value):
        return render.tool_arguments(_row_get(row, "tool_name"), value, options)
    if column in JSON_COLUMNS and _looks_like_json(value):
        return render.pretty_json(value, options)
    if column == "snippet":
        return render.render_snippet(value)
    if column in THINKING_COLUMNS:
        return render.text(value, options)
    if _looks_like_json(value):
        # transcript text that happens to be JSON: text, not a datasette-json-html value
        return Markup("{}").format(value if limit is None or len(value) <= limit else value[:limit] + "…")
    return None


def source_queries() -> dict:
    """The canned queries every registered source kind declares: name -> (query, the
    tables it reads: its ``tables`` entry, else the kind's snapshot tables)."""
    from importer.sources import all_sources

    out: dict = {}
    for source in all_sources():
        for name, query in (getattr(source, "canned_queries", None) or {}).items():
            query = dict(query)
            tables = query.pop("tables", None) or [t.name for t in getattr(source, "snapshot_tables", ()) or ()]
            out.setdefault(name, (query, list(tables)))
    return out


@hookimpl
def canned_queries(datasette, database, actor):
    db = datasette.databases.get(database)
    if db is None or database == "_internal":
        return None

    async def inner():
        if not (_snapshots(datasette).get(database) or await db.table_exists(SNAPSHOT_MARKER)):
            return {}
        out = {}
        for name, (query, tables) in source_queries().items():
            # Only where the kind has data: its tables exist (a snapshot made before
            # the kind existed lacks them) and one of them holds a row.
            if all([await db.table_exists(t) for t in tables]) and any(
                    [(await db.execute(f"SELECT 1 FROM [{t}] LIMIT 1")).rows for t in tables]):
                out[name] = query
        return out

    return inner


@hookimpl
def extra_css_urls(datasette):
    return [str(datasette.urls.path("-/agentbase/agentbase.css"))]


@hookimpl
def menu_links(datasette):
    return [{"href": str(datasette.urls.path("-/agentbase")), "label": "AgentBase dashboard"}]


# -- routes ------------------------------------------------------------------------------------

async def _snapshot_db(datasette, request):
    """The database a page shows: ?db=NAME, else the first AgentBase snapshot."""
    wanted = request.args.get("db")
    candidates = [wanted] if wanted else list(datasette.databases)
    for name in candidates:
        db = datasette.databases.get(name)
        if db is None or name == "_internal":
            continue
        if _snapshots(datasette).get(name) or await db.table_exists(SNAPSHOT_MARKER):
            _snapshots(datasette)[name] = True
            return db
    raise NotFound("No AgentBase snapshot is served here" + (f" under the name {wanted!r}" if wanted else ""))


async def _check(datasette, request, database: str) -> None:
    for action, resource in (("view-instance", None), ("view-database", database),
                             ("view-table", (database, "messages"))):
        if not await datasette.permission_allowed(request.actor, action, resource, default=True):
            from datasette.utils.asgi import Forbidden

            raise Forbidden("You do not have permission to view this")


async def session_view(datasette, request):
    session_id = int(request.url_vars["id"])
    if session_id >= 2**63:  # no such row can exist (SQLite's integers are 64-bit): not a server error
        raise NotFound(f"Session {session_id} not found")
    db = await _snapshot_db(datasette, request)
    await _check(datasette, request, db.name)
    everything = request.args.get("all") in ("1", "true", "yes")
    data = await db.execute_fn(lambda conn: conversation.load(conn, session_id, everything))
    if data is None:
        raise NotFound(f"Session {session_id} not found")

    def row_href(table, row_id):
        return row_path(datasette, db.name, table, row_id)

    self_href = str(datasette.urls.path(f"-/agentbase/session/{session_id}"))
    if request.args.get("db"):
        self_href += "?" + urlencode({"db": db.name})
    view = conversation.build(data, everything, row_href, self_href)
    s = data["session"]
    context = {
        "database": db.name,
        "session": s,
        "title": s.get("label") or s.get("display_name") or s.get("session_uuid"),
        "turns": view["turns"],
        "timezone": data["timezone"], "first": data["first"], "last": data["last"],
        "totals": view["totals"],
        "everything": everything,
        "self_href": self_href,
        "session_row_href": row_href("sessions", session_id),
        "dashboard_href": str(datasette.urls.path("-/agentbase")),
        "previous_href": None,
        "next_href": None,
    }
    links = await db.execute(
        "SELECT id, session_uuid FROM sessions WHERE session_uuid IN (?, ?) AND server IS ? AND agent_id IS ?",
        (s.get("previous_session_id") or "", s.get("next_session_id") or "", s.get("server"), s.get("agent_id")))
    for r in links.rows:
        if r["session_uuid"] == s.get("previous_session_id"):
            context["previous_href"] = session_path(datasette, db.name, r["id"])
        if r["session_uuid"] == s.get("next_session_id"):
            context["next_href"] = session_path(datasette, db.name, r["id"])
    html = await datasette.render_template("agentbase_session.html", context, request=request)
    return Response.html(html)


_DASHBOARD_PAGES = 64  # pages (figures and charts) kept; each some hundred KB at most
_dashboard_lock = threading.Lock()


def _dashboard_state(datasette) -> dict:
    """The dashboard's cubes (one per snapshot file: dashboard.load) and its pages (one per snapshot
    and every filter). An immutable snapshot never changes under a running Datasette, so the cube
    is computed once and every page from it at most once."""
    state = getattr(datasette, "_agentbase_dashboard", None)
    if state is None:
        state = datasette._agentbase_dashboard = {"cubes": {}, "locks": {}, "pages": {}}
    return state


def _dashboard_key(db) -> tuple:
    try:
        stamp = os.stat(db.path).st_mtime_ns if db.path else None
    except OSError:
        stamp = None
    return (db.name, db.path, stamp)


def _dashboard_cube(datasette, db, conn) -> dict:
    """The snapshot's cube, computed once per file: whoever comes second (the page while the
    start-up thread computes it) waits for the first instead of scanning the messages again."""
    if db.is_mutable:
        return dashboard.load(conn)
    state = _dashboard_state(datasette)
    key = _dashboard_key(db)
    with _dashboard_lock:
        lock = state["locks"].setdefault(key, threading.Lock())
    with lock:
        cube = state["cubes"].get(key)
        if cube is None:
            cube = dashboard.load(conn)
            with _dashboard_lock:
                for old in [k for k in state["cubes"] if k[0] == db.name]:
                    del state["cubes"][old]  # the file was replaced: its old figures go
                state["cubes"][key] = cube
        return cube


@hookimpl
def startup(datasette):
    """Check the access settings (a configured password that is missing stops the server), then
    compute the dashboard's cube in the background (one pass over the messages: about 1.5 s per
    million), so that no visit of the dashboard waits for it."""
    access.check_startup(datasette)
    snapshots = [db for db in datasette.databases.values()
                 if not db.is_mutable and not db.is_memory and db.path]

    def warm():
        for db in snapshots:
            try:
                conn = sqlite3.connect(f"file:{db.path}?mode=ro", uri=True)
            except sqlite3.Error:
                continue
            try:
                if _is_snapshot_conn(conn):
                    _dashboard_cube(datasette, db, conn)
            except sqlite3.Error:
                pass  # the page computes it itself
            finally:
                conn.close()

    if snapshots:
        threading.Thread(target=warm, name="agentbase-dashboard", daemon=True).start()

    async def verify_access():
        await access.verify(datasette)

    return verify_access


DASHBOARD_FILTERS = ("server", "source", "agent", "days")


async def dashboard_view(datasette, request):
    db = await _snapshot_db(datasette, request)
    await _check(datasette, request, db.name)
    filters = {name: request.args.get(name) or None for name in ("server", "source", "agent")}
    days = dashboard.parse_days(request.args.get("days"))
    filters["days"] = "all" if days is None else str(days)
    cube = await db.execute_fn(lambda conn: _dashboard_cube(datasette, db, conn))
    pages = _dashboard_state(datasette)["pages"]
    key = (_dashboard_key(db), filters["server"], filters["source"], filters["agent"], days)
    fig = pages.get(key) if not db.is_mutable else None
    if fig is None:
        fig = dashboard.page(cube, filters["server"], filters["source"], filters["agent"], days)
        if not db.is_mutable:
            if len(pages) >= _DASHBOARD_PAGES:
                pages.pop(next(iter(pages)))
            pages[key] = fig

    self_href = str(datasette.urls.path("-/agentbase"))
    keep_db = [("db", db.name)] if request.args.get("db") else []

    def href(**changes) -> str:
        """This page with some filters changed (None: dropped), the others kept."""
        wanted = {**filters, **changes}
        params = keep_db + [(k, wanted[k]) for k in DASHBOARD_FILTERS if wanted.get(k) is not None]
        return self_href + ("?" + urlencode(params) if params else "")

    latest = cube["latest"]
    presets = []
    for value, label in dashboard.PRESETS:
        if value == "1" and latest and cube["exported_day"] != latest:
            label = "latest day"  # an older snapshot: its latest day is not today
        presets.append({"label": label, "href": href(days=value), "current": value == filters["days"],
                        "value": value})
    active = [{"name": name, "value": filters[name], "href": href(**{name: None})}
              for name in ("server", "source", "agent") if filters[name]]
    queries = {}
    try:
        queries = await datasette.get_canned_queries(db.name, request.actor)
    except Exception:  # an API that moved in a later Datasette: the page works without the list
        queries = {}
    query_links = [(name, q.get("title") or name, str(datasette.urls.query(db.name, name)))
                   for name, q in queries.items()]
    per_agent_queries = [(name, title, path) for name, title, path in query_links
                         if name in ("agent_day", "exec_commands", "thinking", "daily_cost", "failed_tools")]
    agents = []
    for t in fig["agents"]:
        params = [("agent", t["agent"])] if t["agent"] is not None else []
        params += [("server", t["server"])] if t["server"] is not None else []
        agents.append({**t, "href": href(agent=t["agent"], server=t["server"]),
                       "queries": [(name, title, path + ("?" + urlencode(params) if params else ""))
                                   for name, title, path in per_agent_queries]})
    context = {
        "database": db.name,
        "database_href": str(datasette.urls.database(db.name)),
        "self_href": self_href,
        "keep_db": keep_db,
        "filters": filters,
        "active": active,
        "presets": presets,
        "servers": cube["servers"],
        "sources": cube["sources"],
        "agent_names": cube["agent_names"],
        "timezone": cube["timezone"],
        "first": cube["first"],
        "latest": latest,
        "start": fig["start"],
        "fig": fig,
        "agents": agents,
        "sources_rows": [{**s, "href": href(source=s["source"])} for s in fig["sources"]],
        "queries": query_links,
        "reset_href": href(server=None, source=None, agent=None, days=None),
    }
    html = await datasette.render_template("agentbase_dashboard.html", context, request=request)
    return Response.html(html)


_css_cache: dict[str, str] = {}


async def css_view(datasette, request):
    if "css" not in _css_cache:
        _css_cache["css"] = CSS_PATH.read_text(encoding="utf-8")
    return Response(_css_cache["css"], content_type="text/css; charset=utf-8",
                    headers={"Cache-Control": "max-age=3600"})


@hookimpl
def register_routes(datasette):
    routes = browser.ROUTES + [  # the session browser: the home page (browser.py)
        (r"^/-/agentbase/session/(?P<id>\d+)$", session_view),
        (r"^/-/agentbase/?$", dashboard_view),
        (r"^/-/agentbase/login$", access.login_view),
        (r"^/-/agentbase/agentbase\.css$", css_view),
    ]
    if access.configured(datasette):
        # plugin routes come before Datasette's own: its /-/logout only clears the cookie, this one also
        # closes the session on the server
        routes.append((r"^/-/logout$", access.logout_view))
    return routes


# -- access ------------------------------------------------------------------------------------

@hookimpl
def permission_allowed(datasette, actor, action, resource):
    return access.permission_allowed(datasette, actor, action)


@hookimpl
def forbidden(datasette, request, message):
    return access.forbidden(datasette, request, message)


# -- paging ------------------------------------------------------------------------------------

def next_href(rows, columns) -> str | None:
    """The href of the last row's ``next`` link (a canned query with more pages), else None."""
    try:
        if not rows or "next" not in columns:
            return None
        value = rows[-1]["next"]
        href = json.loads(value).get("href") if isinstance(value, str) else None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return None
    return href if isinstance(href, str) and href.startswith("/") and not href.startswith("//") else None


@hookimpl
def prepare_jinja2_environment(env):
    env.globals["agentbase_next_href"] = next_href
