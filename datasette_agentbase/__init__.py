"""Datasette plugin for AgentBase snapshots.

Registered under the ``datasette`` entry point by setup.py. Hooks (each also
in Datasette 1.0, with the same arguments):

- ``prepare_connection``: SQL functions for the canned queries:
  ``agentbase_fts(q)`` (what a user typed -> the FTS5 MATCH expression, see
  importer/search.py), ``agentbase_snippet(content_blocks, text_preview, q)``
  (the contentless index has no ``snippet()``), ``agentbase_session_url(id[,
  message_id])``, ``agentbase_row_url(table, id)`` and
  ``agentbase_query_url(name[, key, value]...)`` (links that respect
  ``base_url``), and ``agentbase_is_shell(source, tool_name)`` (each kind's
  shell tools, from the snapshot's facts); it also notes which databases are
  AgentBase snapshots, with their facts (served.py, facts.py).
- ``render_cell``: content blocks, tool arguments, thinking, JSON and search
  snippets as HTML, every value escaped; session ids and uuids link to the
  conversation view. It runs first (``tryfirst``), so transcript text that
  happens to look like a datasette-json-html value stays text; the link
  columns of the canned queries (conversation, session, message, tool_call)
  are left to datasette-json-html.
- ``register_routes``: the session browser (the home page, browser.py), the
  conversation view ``/-/agentbase/session/<id>`` and its exports ``<id>.json``,
  ``<id>.md``, ``<id>.html`` and the dashboard ``/-/agentbase`` (pages.py), the
  reports ``/-/agentbase/reports`` and its ``.json`` and ``.csv`` (reports.py), what a
  live page asks for (``/-/agentbase/version.json`` and a conversation's
  ``since.json``: live_pages.py), the login page ``/-/agentbase/login``, the MCP endpoint
  ``/-/agentbase/mcp`` (mcp_server.py, which ``skip_csrf`` exempts from the form token),
  the snapshot's download (live.py) and, with
  a password, ``/-/logout`` (see access.py). The stylesheets and the view's
  script are ``static/``, which Datasette serves itself under
  ``/-/static-plugins/agentbase/`` (served.static_url).
- ``permission_allowed`` and ``forbidden``: with a password configured,
  everything is behind the login (see access.py).
- ``prepare_jinja2_environment``: ``agentbase_next_href(rows, columns)`` for
  the "Next page" link of the canned queries that page (templates/query.html),
  ``agentbase_static(name)`` for a static file's URL, ``agentbase_places(request)``
  for the navigation bar every page opens with (nav.py, templates/base.html).
- ``canned_queries``: on a snapshot holding a source kind's data, the canned
  queries the kind declares (``Source.canned_queries``: name -> title, sql,
  params..., and optionally the ``tables`` it reads), as the export wrote them
  into the snapshot's facts (facts.py), beside metadata.yml's.
- ``extra_css_urls``, ``menu_links``; ``startup`` checks the access settings
  and computes the dashboard's cube (dashboard.py) in a background thread.
- The explorer's pages (explorer.py), in hooks of their own (pluggy's
  ``specname`` where the hook has another implementation here): counts and costs
  formatted in HTML cells; the canned queries' forms (``extra_template_vars``
  for query.html), table pages with internal columns hidden (table.html) and the
  database page with its populated tables first (database.html);
  the ``calendar`` facet (``register_facet_classes``); a 400 for a canned
  query's JSON or CSV with a malformed day (``asgi_wrapper``).
- Security headers on every answer (Content-Security-Policy, X-Frame-Options,
  nosniff: headers.py, in the same ``asgi_wrapper``), and ``handle_exception``:
  a sort on a column that cannot be sorted is a 400 with a clear message.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from urllib.parse import urlencode

from datasette import hookimpl
from markupsafe import Markup

from importer.search import fts_query
from importer.snippets import snippet

from . import access, browser, explorer, facts, headers, live, live_pages, mcp_server, nav, pages, render, reports, served

LINK_COLUMNS = {"conversation", "session", "message", "tool_call", "messages", "next"}


@hookimpl
def prepare_connection(conn, database, datasette):
    found = facts.read(conn) if facts.is_snapshot(conn) else None
    if found is not None:
        served.snapshots(datasette)[database] = found
    explorer.register_functions(conn, found.shell_pairs if found else frozenset())

    def session_url(session_id, message_id=None):
        if session_id is None:
            return None
        return served.session_path(datasette, database, session_id, message_id)

    def row_url(table, row_id):
        if row_id is None or not isinstance(table, str):
            return None
        return served.row_path(datasette, database, table, row_id)

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
    if not isinstance(value, (str, int)) or not served.snapshots(datasette).get(database):
        return None
    if column == "session_id" and table in ("messages", "tool_calls", "entries") and isinstance(value, int):
        anchor = _row_get(row, "id") if table == "messages" else _row_get(row, "message_id")
        return Markup('<a href="{}">{}</a>').format(served.session_path(datasette, database, value, anchor), value)
    if not isinstance(value, str):
        return None
    if column == "session_uuid" and table in ("sessions", "messages", "tool_calls", "entries"):
        sid = _row_get(row, "id") if table == "sessions" else _row_get(row, "session_id")
        if isinstance(sid, int):
            anchor = (_row_get(row, "id") if table == "messages"
                      else _row_get(row, "message_id") if table == "tool_calls" else None)
            return Markup('<a href="{}" title="conversation view">{}</a>').format(
                served.session_path(datasette, database, sid, anchor), value)
        return None
    if table is None and column in LINK_COLUMNS:
        return None  # a canned query's link value: datasette-json-html draws it
    limit = datasette.setting("truncate_cells_html") or None
    more = None
    known = served.facts_of(datasette, database)
    if table in known.tables and isinstance(_row_get(row, "id"), int):
        row_id = int(_row_get(row, "id"))
        more = (f"{datasette.urls.table(database, table)}.json?id={row_id}&_shape=array" if table in known.views
                else served.row_path(datasette, database, table, row_id) + ".json")
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
        if not await served.is_snapshot_db(datasette, db):
            return {}
        out = {}
        for name, (query, tables) in served.facts_of(datasette, database).canned_queries.items():
            # Only where the kind has data: its tables exist (a snapshot made before
            # the kind existed lacks them) and one of them holds a row.
            if all([await db.table_exists(t) for t in tables]) and any(
                    [(await db.execute(f"SELECT 1 FROM [{t}] LIMIT 1")).rows for t in tables]):
                out[name] = query
        return out

    return inner


@hookimpl
def extra_css_urls(datasette):
    return [served.static_url(datasette, "agentbase.css")]


@hookimpl
def menu_links(datasette):
    return nav.menu_links(datasette)


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
                    pages.dashboard_cube(datasette, db, conn)
            except sqlite3.Error:
                pass  # the page computes it itself
            finally:
                conn.close()

    if snapshots:
        threading.Thread(target=warm, name="agentbase-dashboard", daemon=True).start()

    async def verify_access():
        await access.verify(datasette)

    return verify_access


@hookimpl
def register_routes(datasette):
    routes = browser.ROUTES + [  # the session browser: the home page (browser.py)
        (r"^/-/agentbase/session/(?P<id>\d+)$", pages.session_view),
        (r"^/-/agentbase/session/(?P<id>\d+)\.(?P<format>json|md|html)$", pages.session_export_view),
        (r"^/-/agentbase/?$", pages.dashboard_view),
        *reports.ROUTES,  # /-/agentbase/reports and its .json and .csv (reports.py)
        (r"^/-/agentbase/login$", access.login_view),
        # the MCP tools over streamable HTTP, behind the same permission check as the pages (mcp_server.py)
        (r"^/-/agentbase/mcp/?$", mcp_server.http_view),
        *live_pages.ROUTES,  # what a live page asks for: the snapshot's version (live_pages.py)
        (r"^/-/agentbase/session/(?P<id>\d+)/since\.json$", pages.session_since_view),  # a conversation's new cards
        # the snapshot's download, as one consistent copy of a file updated in place (live.py)
        (r"^/(?P<database>[^/]+)\.db$", live.download_view),
    ]
    if access.configured(datasette):
        # plugin routes come before Datasette's own: its /-/logout only clears the cookie, this one also
        # closes the session on the server
        routes.append((r"^/-/logout$", access.logout_view))
    return routes


# -- access ------------------------------------------------------------------------------------

@hookimpl
def skip_csrf(datasette, scope):
    # the MCP endpoint's JSON-RPC POSTs carry no form token (mcp_server.skip_csrf says why that is safe)
    return True if mcp_server.skip_csrf(scope) else None


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
def prepare_jinja2_environment(env, datasette):
    env.globals["agentbase_next_href"] = next_href
    # where Datasette serves the plugin's static/ files (its stylesheets and script)
    env.globals["agentbase_static"] = lambda name: served.static_url(datasette, name)
    # the navigation bar on every page (templates/base.html)
    env.globals["agentbase_places"] = lambda request: nav.places(datasette, request)


# -- the explorer: canned-query forms, table pages, numbers (explorer.py) -----------------------

@hookimpl(specname="render_cell")
def explorer_render_cell(value, column, table, database, datasette):
    # after render_cell above (tryfirst), which leaves numbers (but session ids) and plain text alone
    if not served.snapshots(datasette).get(database):
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
    if request is None or not database or not served.snapshots(datasette).get(database):
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

            latest = served.facts_of(datasette, database).latest_day_of

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
    if template == "database.html":
        async def database_vars():
            value = (await db.execute_fn(lambda conn: facts.marker(conn, "counts"))).get("counts")
            try:
                counts = json.loads(value) if value else {}
            except ValueError:
                counts = {}
            counts = counts if isinstance(counts, dict) else {}
            return {"agentbase_tables": lambda tables: explorer.order_tables(tables, counts)}

        return database_vars
    return None


@hookimpl
def register_facet_classes():
    return [explorer.CalendarFacet]


@hookimpl
def asgi_wrapper(datasette):
    def query_names(database):
        names = set((datasette.metadata("queries", database=database) or {}))
        return names | set(served.facts_of(datasette, database).canned_queries)

    params = explorer.param_errors_wrapper(datasette, lambda name: bool(served.snapshots(datasette).get(name)),
                                           query_names)
    # the security headers outermost: on every answer, the replaced ones too (headers.py)
    return lambda app: headers.wrap(datasette, params(app))


@hookimpl(tryfirst=True)
def handle_exception(datasette, request, exception):
    # a sort Datasette cannot do is the visitor's mistake (400), not a server error; Datasette's own
    # handler (which runs next) then draws the page or the JSON with the new status and message
    headers.sort_error(request, exception)
    return None
