"""The plugin's own pages, as Datasette route handlers: the conversation view of
a session (conversation.py) and its exports as JSON, Markdown and one
self-contained HTML file (session_export.py), and the dashboard (dashboard.py)
with its cube computed once per snapshot version. Each page checks the same
permissions as Datasette's (served.check); the session browser, the home page,
is browser.py's."""

from __future__ import annotations

import threading
from datetime import datetime
from urllib.parse import urlencode

from datasette.utils.asgi import NotFound, Response
from markupsafe import Markup

from . import conversation, dashboard, live, live_pages, nav, served, session_export


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
        "row": lambda table, row_id: served.row_path(datasette, db.name, table, row_id),
        "session": lambda other, message_id=None: served.session_path(datasette, db.name, other, message_id),
    }


def _everything(request) -> bool:
    return request.args.get("all") in ("1", "true", "yes")


async def _load_session(datasette, request):
    """The snapshot, the session id and conversation.load's data, after the same permission checks
    as every other page (with a password: the login)."""
    session_id = _session_id(request)
    db = await served.snapshot_db(datasette, request)
    await served.check(datasette, request, db.name)
    everything = _everything(request)

    def read(conn):
        seen = live.version(conn)  # (first: an update landing meanwhile is a change the live page sees next)
        found = conversation.load(conn, session_id, everything)
        return None if found is None else {**found, "version": seen}

    data = await db.execute_fn(read)
    if data is None:
        raise NotFound(f"Session {session_id} not found")
    return db, session_id, data


def _session_context(datasette, db, data, view: dict, links: dict, everything: bool) -> dict:
    s = data["session"]
    return {
        "database": db.name,
        "session": s,
        "title": conversation.session_label(s),
        "badges": nav.badges(s),
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
        "js_href": served.static_url(datasette, "agentbase.js"),
        **live_pages.page_vars(datasette, db, request, data["version"], session_id),
    })
    # the crumbs lead back to the session browser (all of it, then this agent's); previous and next
    # are the sessions around this one in the browser's order
    keep_db = [("db", db.name)] if request.args.get("db") else []
    home = str(datasette.urls.instance())
    s = data["session"]
    agent_params = keep_db + [(k, v) for k, v in (("agent", s.get("agent_id")), ("server", s.get("server"))) if v]
    around = await db.execute_fn(lambda conn: nav.neighbours(conn, session_id))
    for n in around.values():
        n["href"] = served.session_path(datasette, db.name, n["id"])
    context.update({
        "sessions_href": home + ("?" + urlencode(keep_db) if keep_db else ""),
        "agent_sessions_href": home + "?" + urlencode(agent_params) if agent_params != keep_db else None,
        "neighbours": around,
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
        db = await served.snapshot_db(datasette, request)
        await served.check(datasette, request, db.name)
        everything = _everything(request)
        doc = await db.execute_fn(lambda conn: session_export.load_json(conn, session_id, db.name, everything))
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
    css, js = served.static_text("agentbase.css"), served.static_text("agentbase.js")
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


def dashboard_cube(datasette, db, conn) -> tuple[tuple, dict]:
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


DASHBOARD_FILTERS = ("server", "source", "agent", "days")


async def dashboard_view(datasette, request):
    db = await served.snapshot_db(datasette, request)
    await served.check(datasette, request, db.name)
    filters = {name: request.args.get(name) or None for name in ("server", "source", "agent")}
    days = dashboard.parse_days(request.args.get("days"))
    typed_days = (request.args.get("days") or "").strip()
    problems = [] if not typed_days or typed_days == "all" or typed_days.isdigit() else [
        f"days: {typed_days[:40]!r} is not a number of days (1 to 3660), nor all: the whole archive is shown"]
    filters["days"] = "all" if days is None else str(days)
    version, cube = await db.execute_fn(lambda conn: dashboard_cube(datasette, db, conn))
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
        "coverage": [{**c, "href": href(server=c["server"], source=c["source"])} for c in cube["coverage"]
                     if (filters["server"] is None or c["server"] == filters["server"])
                     and (filters["source"] is None or c["source"] == filters["source"])],
        "queries": query_links,
        "reset_href": href(server=None, source=None, agent=None, days=None),
        "problems": problems,
        "all_href": href(days="all"),
    }
    html = await datasette.render_template("agentbase_dashboard.html", context, request=request)
    return Response.html(html)


async def session_since_view(datasette, request):
    """``/-/agentbase/session/<id>/since.json?after=<card id>``: the conversation's cards from a
    few before ``after`` to the end, drawn as the page draws them, and its totals. The rows are
    read from a restart point before those cards (conversation.load_tail), or, with none near, the
    turns grouped over the whole conversation (as the page's); only the cards sent are drawn."""
    refused = live_pages.read_only(request)
    if refused is not None:
        return refused
    everything = _everything(request)
    key = request.args.get("after")
    data = None
    if not everything and key:  # the rows from a little before the page's last card, when that is enough
        session_id = _session_id(request)
        db = await served.snapshot_db(datasette, request)
        await served.check(datasette, request, db.name)

        def read(conn):
            seen = live.version(conn)
            found = conversation.load_tail(conn, session_id, key, live_pages.REPLAY)
            return None if found is None else {**found, "version": seen}

        data = await db.execute_fn(read)
    tail = data is not None
    if not tail:
        db, session_id, data = await _load_session(datasette, request)
    links = _session_links(datasette, db, request, session_id)
    view = conversation.build(data, everything, links["row"], links["self"], session_href=links["session"],
                              later=True)
    cards = live_pages.cards(view["turns"])
    first, sent = live_pages.after(cards, key)
    turns = conversation.drawn([turn for card in sent for turn in card["turns"]])
    html = await datasette.render_template("_agentbase_turns.html", {"turns": turns}, request=request)
    drawn, _ = live_pages.split(f'<div class="ab-conversation">{html}</div>')
    totals = await datasette.render_template("_agentbase_totals.html", {"totals": view["totals"]}, request=request)
    return live_pages.fresh({"ok": True, "version": live_pages.version_label(data.get("version") or ()),
                             "session": session_id, "from": first, "cards": drawn,
                             "count": None if tail else len(cards),
                             "totals": totals.strip()})
