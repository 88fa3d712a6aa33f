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
- ``register_routes``: the conversation view ``/-/agentbase/session/<id>``
  and its exports ``<id>.json``, ``<id>.md``, ``<id>.html`` (session_export.py),
  the dashboard ``/-/agentbase``, the login page ``/-/agentbase/login``, the
  stylesheet, the view's script and, with a password, ``/-/logout`` (see
  access.py).
- ``permission_allowed`` and ``forbidden``: with a password configured,
  everything is behind the login (see access.py).
- ``prepare_jinja2_environment``: ``agentbase_next_href(rows, columns)`` for
  the "Next page" link of the canned queries that page (templates/query.html).
- ``canned_queries``: on a snapshot holding a source kind's data, the canned
  queries the kind declares (``Source.canned_queries``: name -> title, sql,
  params..., and optionally the ``tables`` it reads), beside metadata.yml's.
- ``extra_css_urls``, ``menu_links``; ``startup`` checks the access settings
  and computes the dashboard's cube (dashboard.py) in a background thread.
- The explorer's pages (explorer.py), in hooks of their own (pluggy's
  ``specname`` where the hook has another implementation here): the SQL
  function ``agentbase_is_shell(source, tool_name)``; counts and costs
  formatted in HTML cells; the canned queries' forms (``extra_template_vars``
  for query.html) and table pages with internal columns hidden (table.html);
  the ``calendar`` facet (``register_facet_classes``); a 400 for a canned
  query's JSON or CSV with a malformed day (``asgi_wrapper``).
- Security headers on every answer (Content-Security-Policy, X-Frame-Options,
  nosniff: headers.py, in the same ``asgi_wrapper``), and ``handle_exception``:
  a sort on a column that cannot be sorted is a 400 with a clear message.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from datetime import datetime
from pathlib import Path
from urllib.parse import urlencode

from datasette import hookimpl
from datasette.utils.asgi import NotFound, Response
from markupsafe import Markup

from importer.search import fts_query

from . import access, browser, conversation, dashboard, explorer, facts, headers, live, render, session_export
from .snippets import snippet

HERE = Path(__file__).resolve().parent
CSS_PATH = HERE / "static" / "agentbase.css"
JS_PATH = HERE / "static" / "agentbase.js"
SNAPSHOT_MARKER = facts.MARKER
LINK_COLUMNS = {"conversation", "session", "message", "tool_call", "messages", "next"}


def _snapshots(datasette) -> dict:
    """The databases that are AgentBase snapshots, name -> their facts (facts.py; filled by
    prepare_connection)."""
    found = getattr(datasette, "_agentbase_snapshots", None)
    if found is None:
        found = {}
        datasette._agentbase_snapshots = found
    return found


def _facts(datasette, database: str | None) -> facts.Facts:
    """A served snapshot's facts (none for another database)."""
    return _snapshots(datasette).get(database) or facts.Facts()


async def _is_snapshot_db(datasette, db) -> bool:
    if _snapshots(datasette).get(db.name):
        return True
    if not await db.table_exists(SNAPSHOT_MARKER):
        return False
    _snapshots(datasette)[db.name] = await db.execute_fn(facts.read)
    return True


def session_path(datasette, database: str | None, session_id, message_id=None) -> str:
    path = str(datasette.urls.path(f"-/agentbase/session/{int(session_id)}"))
    names = [n for n in datasette.databases if _snapshots(datasette).get(n)]
    if database and names and database != names[0]:
        path += "?" + urlencode({"db": database})
    if message_id is not None:
        path += f"#m{int(message_id)}"
    return path


def row_path(datasette, database: str, table: str, row_id) -> str:
    if table in _facts(datasette, database).views:  # a view has no row pages: its page filtered to the row
        return str(datasette.urls.table(database, table)) + f"?id={int(row_id)}"
    return str(datasette.urls.row(database, table, str(int(row_id))))


@hookimpl
def prepare_connection(conn, database, datasette):
    found = facts.read(conn) if facts.is_snapshot(conn) else None
    if found is not None:
        _snapshots(datasette)[database] = found
    explorer.register_functions(conn, found.shell_pairs if found else frozenset())

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
        value = row[key]
    except (KeyError, IndexError, TypeError):
        return None
    return _raw(value)


def _raw(value):
    """A cell's value; a foreign key Datasette expanded (``{"value": 4, "label": ...}``) as its value."""
    if isinstance(value, dict) and "value" in value and "label" in value:
        return value["value"]
    return value


def _looks_like_json(value: str) -> bool:
    stripped = value.strip()
    return (stripped[:1], stripped[-1:]) in (("{", "}"), ("[", "]"))


@hookimpl(tryfirst=True)
def render_cell(row, value, column, table, database, datasette):
    if column in ("session_id", "message_id", "result_message_id"):
        value = _raw(value)  # (the snapshot's foreign keys: the plugin links them to the conversation)
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
    known = _facts(datasette, database)
    if table in known.tables and isinstance(_row_get(row, "id"), int):
        row_id = int(_row_get(row, "id"))
        more = (f"{datasette.urls.table(database, table)}.json?id={row_id}&_shape=array" if table in known.views
                else row_path(datasette, database, table, row_id) + ".json")
    options = render.Options(limit=limit, more_href=more)
    if column in known.blocks and _looks_like_json(value):
        return render.render_blocks(value, options)
    if column == "arguments" and _looks_like_json(value):
        return render.tool_arguments(_row_get(row, "tool_name"), value, options)
    if column in known.json and _looks_like_json(value):
        return render.pretty_json(value, options)
    if column == "snippet":
        return render.render_snippet(value)
    if column in known.thinking:
        return render.text(value, options)
    if _looks_like_json(value):
        # transcript text that happens to be JSON: text, not a datasette-json-html value
        return Markup("{}").format(value if limit is None or len(value) <= limit else value[:limit] + "…")
    return None


@hookimpl
def canned_queries(datasette, database, actor):
    db = datasette.databases.get(database)
    if db is None or database == "_internal":
        return None

    async def inner():
        if not await _is_snapshot_db(datasette, db):
            return {}
        out = {}
        for name, (query, tables) in _facts(datasette, database).canned_queries.items():
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
        if await _is_snapshot_db(datasette, db):
            return db
    raise NotFound("No AgentBase snapshot is served here" + (f" under the name {wanted!r}" if wanted else ""))


async def _check(datasette, request, database: str) -> None:
    for action, resource in (("view-instance", None), ("view-database", database),
                             ("view-table", (database, "messages"))):
        if not await datasette.permission_allowed(request.actor, action, resource, default=True):
            from datasette.utils.asgi import Forbidden

            raise Forbidden("You do not have permission to view this")


def _session_id(request) -> int:
    session_id = int(request.url_vars["id"])
    if session_id >= 2**63:  # no such row can exist (SQLite's integers are 64-bit): not a server error
        raise NotFound(f"Session {session_id} not found")
    return session_id


def _session_links(datasette, db, request, session_id: int) -> dict:
    """The hrefs a session's pages use, all respecting base_url and ?db=."""
    suffix = "?" + urlencode({"db": db.name}) if request.args.get("db") else ""
    base = str(datasette.urls.path(f"-/agentbase/session/{session_id}"))
    everything = "&all=1" if suffix else "?all=1"
    keep_all = everything if request.args.get("all") in ("1", "true", "yes") else ""
    return {
        "self": base + suffix,
        "exports": {"json": f"{base}.json{suffix}", "md": f"{base}.md{suffix}{keep_all}",
                    "html": f"{base}.html{suffix}{keep_all}"},
        "row": lambda table, row_id: row_path(datasette, db.name, table, row_id),
        "session": lambda other, message_id=None: session_path(datasette, db.name, other, message_id),
    }


def _everything(request) -> bool:
    return request.args.get("all") in ("1", "true", "yes")


async def _load_session(datasette, request):
    """The snapshot, the session id and conversation.load's data, after the same permission checks
    as every other page (with a password: the login)."""
    session_id = _session_id(request)
    db = await _snapshot_db(datasette, request)
    await _check(datasette, request, db.name)
    everything = _everything(request)
    data = await db.execute_fn(lambda conn: conversation.load(conn, session_id, everything))
    if data is None:
        raise NotFound(f"Session {session_id} not found")
    return db, session_id, data


def _session_context(datasette, db, data, view: dict, links: dict, everything: bool) -> dict:
    s = data["session"]
    return {
        "database": db.name,
        "session": s,
        "title": conversation.session_label(s),
        "turns": view["turns"],
        "relatives": view["relatives"],
        "timezone": data["timezone"], "first": data["first"], "last": data["last"],
        "totals": view["totals"],
        "everything": everything,
    }


async def session_view(datasette, request):
    db, session_id, data = await _load_session(datasette, request)
    everything = _everything(request)
    links = _session_links(datasette, db, request, session_id)
    view = conversation.build(data, everything, links["row"], links["self"], session_href=links["session"])
    context = _session_context(datasette, db, data, view, links, everything)
    context.update({
        "self_href": links["self"],
        "exports": links["exports"],
        "session_row_href": links["row"]("sessions", session_id),
        "dashboard_href": str(datasette.urls.path("-/agentbase")),
        "js_href": str(datasette.urls.path("-/agentbase/agentbase.js")),
    })
    html = await datasette.render_template("agentbase_session.html", context, request=request)
    return Response.html(html)


def _download(body, content_type: str, name: str, attachment: bool = True, csp: str | None = None) -> Response:
    sent = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=60"}
    if attachment:
        sent["Content-Disposition"] = f'attachment; filename="{name}"'
    if csp:
        sent["Content-Security-Policy"] = csp  # its own, in place of the explorer's (headers.py)
    return Response(body, content_type=content_type, headers=sent)


async def session_export_view(datasette, request):
    """``/-/agentbase/session/<id>.json|.md|.html``: the session as a file (session_export.py), behind
    the same checks as the view."""
    fmt = request.url_vars["format"]
    if fmt == "json":
        session_id = _session_id(request)
        db = await _snapshot_db(datasette, request)
        await _check(datasette, request, db.name)
        doc = await db.execute_fn(lambda conn: session_export.load_json(conn, session_id, db.name))
        if doc is None:
            raise NotFound(f"Session {session_id} not found")
        return _download(session_export.dump_json(doc), "application/json; charset=utf-8",
                         session_export.file_name(doc["session"], "json"),
                         attachment=request.args.get("download") in ("1", "true", "yes"))
    db, session_id, data = await _load_session(datasette, request)
    everything = _everything(request)
    name = session_export.file_name(data["session"], fmt)
    if fmt == "md":
        text = session_export.markdown(data, everything, db.name)
        return _download(text, "text/markdown; charset=utf-8", name)
    links = _session_links(datasette, db, request, session_id)
    view = conversation.build(data, everything, links["row"], links["self"], session_href=links["session"],
                              standalone=True)
    context = _session_context(datasette, db, data, view, links, everything)
    css, js = _static("css"), _static("js")
    context.update({
        "self_href": None, "exports": None,
        "css": Markup(css), "js": Markup(js),
        "style_hash": session_export.csp_hash(css), "script_hash": session_export.csp_hash(js),
        "exported_at": datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %z"),
    })
    html = await datasette.render_template("agentbase_session_export.html", context, request=request)
    # the page's own policy (its <meta>), and no framing (which a <meta> policy cannot forbid)
    csp = (f"default-src 'none'; img-src data:; style-src '{context['style_hash']}'; "
           f"script-src '{context['script_hash']}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return _download(html, "text/html; charset=utf-8", name, csp=csp)


_DASHBOARD_PAGES = 64  # pages (figures and charts) kept; each some hundred KB at most
_dashboard_lock = threading.Lock()


def _dashboard_state(datasette) -> dict:
    """The dashboard's cubes (one per snapshot version: dashboard.load) and its pages (one per
    version and every filter). A snapshot's version (live.version: its build and update number)
    changes with every export, so an update's figures show on the next visit, and between two
    exports the cube is computed once and every page from it at most once."""
    state = getattr(datasette, "_agentbase_dashboard", None)
    if state is None:
        state = datasette._agentbase_dashboard = {"cubes": {}, "locks": {}, "pages": {}}
    return state


def _dashboard_key(db, conn) -> tuple:
    return (db.name, live.version(conn))


def _dashboard_cube(datasette, db, conn) -> tuple[tuple, dict]:
    """(the version, its cube), computed once per version: whoever comes second (the page while
    the start-up thread computes it) waits for the first instead of scanning the messages again."""
    state = _dashboard_state(datasette)
    key = _dashboard_key(db, conn)
    with _dashboard_lock:
        lock = state["locks"].setdefault(key, threading.Lock())
    with lock:
        cube = state["cubes"].get(key)
        if cube is None:
            cube = dashboard.load(conn)
            with _dashboard_lock:
                for old in [k for k in state["cubes"] if k[0] == db.name]:
                    del state["cubes"][old]  # an older version's figures go
                    state["locks"].pop(old, None)
                for old in [k for k in state["pages"] if k[0][0] == db.name and k[0] != key]:
                    del state["pages"][old]
                state["cubes"][key] = cube
        return key, cube


@hookimpl
def startup(datasette):
    """Serve every snapshot as a live one (live.py: updated in place, replaced by a full build),
    check the access settings (a configured password that is missing stops the server), then
    compute the dashboard's cube in the background (one pass over the messages: about 1.5 s per
    million), so that no visit of the dashboard waits for it."""
    live.take_over(datasette)
    access.check_startup(datasette)
    snapshots = [db for db in datasette.databases.values() if not db.is_memory and db.path]

    def warm():
        for db in snapshots:
            try:
                conn = sqlite3.connect(f"file:{db.path}?mode=ro", uri=True)
            except sqlite3.Error:
                continue
            try:
                if facts.is_snapshot(conn):
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
    version, cube = await db.execute_fn(lambda conn: _dashboard_cube(datasette, db, conn))
    pages = _dashboard_state(datasette)["pages"]
    key = (version, filters["server"], filters["source"], filters["agent"], days)
    fig = pages.get(key)
    if fig is None:
        fig = dashboard.page(cube, filters["server"], filters["source"], filters["agent"], days)
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


_static_cache: dict[str, str] = {}


def _static(kind: str) -> str:
    if kind not in _static_cache:
        _static_cache[kind] = (CSS_PATH if kind == "css" else JS_PATH).read_text(encoding="utf-8")
    return _static_cache[kind]


async def css_view(datasette, request):
    return Response(_static("css"), content_type="text/css; charset=utf-8",
                    headers={"Cache-Control": "max-age=3600"})


async def js_view(datasette, request):
    return Response(_static("js"), content_type="text/javascript; charset=utf-8",
                    headers={"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"})


@hookimpl
def register_routes(datasette):
    routes = browser.ROUTES + [  # the session browser: the home page (browser.py)
        (r"^/-/agentbase/session/(?P<id>\d+)$", session_view),
        (r"^/-/agentbase/session/(?P<id>\d+)\.(?P<format>json|md|html)$", session_export_view),
        (r"^/-/agentbase/?$", dashboard_view),
        (r"^/-/agentbase/login$", access.login_view),
        (r"^/-/agentbase/agentbase\.css$", css_view),
        # the snapshot's download, as one consistent copy of a file updated in place (live.py)
        (r"^/(?P<database>[^/]+)\.db$", live.download_view),
        (r"^/-/agentbase/agentbase\.js$", js_view),
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


# -- the explorer: canned-query forms, table pages, numbers (explorer.py) -----------------------

@hookimpl(specname="render_cell")
def explorer_render_cell(value, column, table, database, datasette):
    # after render_cell above (tryfirst), which leaves numbers (but session ids) and plain text alone
    if not _snapshots(datasette).get(database):
        return None
    if isinstance(value, str):
        # a table page's long text scrolls in its cell (query.html does the same for canned queries)
        return explorer.long_text(value, datasette.setting("truncate_cells_html")) if table else None
    return explorer.format_number(column, value)


def _choices_cache(datasette) -> dict:
    cache = getattr(datasette, "_agentbase_choices", None)
    if cache is None:
        cache = datasette._agentbase_choices = {}
    return cache


@hookimpl
def extra_template_vars(template, database, table, request, datasette):
    if request is None or not database or not _snapshots(datasette).get(database):
        return None
    db = datasette.databases.get(database)
    if db is None:
        return None
    if template == "query.html":
        async def query_vars():
            # the drop-downs' values, once per snapshot version (live.version)
            key = (db.name, await db.execute_fn(live.version))
            cache = _choices_cache(datasette)
            choices = cache.get(key)
            if choices is None:
                choices = await explorer.load_choices(db)
                for old in [k for k in cache if k[0] == db.name]:
                    del cache[old]
                cache[key] = choices

            latest = _facts(datasette, database).latest_day_of

            def form(name, values, columns, rows):
                return explorer.QueryForm(name, values, columns, rows, choices, latest)

            return {"agentbase_query_form": form}

        return query_vars
    if template == "table.html" and table:
        async def table_vars():
            if not await db.table_exists(table) and table not in await db.view_names():
                return {}
            config = datasette.plugin_config(access.PLUGIN, database=database, table=table, fallback=False) or {}
            fts = (datasette.table_metadata(database, table) or {}).get("fts_table")
            search_ok = not fts or await db.table_exists(fts)
            page = explorer.TablePage(request, await db.table_columns(table), await db.primary_keys(table),
                                      list(config.get("hidden_columns") or []), search_ok)
            return {"agentbase_table": page}

        return table_vars
    return None


@hookimpl
def register_facet_classes():
    return [explorer.CalendarFacet]


@hookimpl
def asgi_wrapper(datasette):
    def query_names(database):
        names = set((datasette.metadata("queries", database=database) or {}))
        return names | set(_facts(datasette, database).canned_queries)

    params = explorer.param_errors_wrapper(datasette, lambda name: bool(_snapshots(datasette).get(name)),
                                           query_names)
    # the security headers outermost: on every answer, the replaced ones too (headers.py)
    return lambda app: headers.wrap(datasette, params(app))


@hookimpl(tryfirst=True)
def handle_exception(datasette, request, exception):
    # a sort Datasette cannot do is the visitor's mistake (400), not a server error; Datasette's own
    # handler (which runs next) then draws the page or the JSON with the new status and message
    headers.sort_error(request, exception)
    return None
