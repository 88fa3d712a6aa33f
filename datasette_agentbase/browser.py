"""The session browser: the explorer's home page (``/``, also ``/-/agentbase/sessions`` and its ``.json``).

Newest sessions first, one line each (title, agent, server, source, first and last activity in local
time, messages, tool calls, failed tool calls, tokens, cost), read from the snapshot's ``session_list``
(importer/derived.py), which has an index for every filter and for the order. Filters are GET
parameters, so a page is a bookmark:

- ``agent``, ``server``, ``source``: equal to;
- ``days`` (1, 7, 30: the days up to the snapshot's latest day), or ``from`` / ``to`` (local
  ``YYYY-MM-DD``, either end open): sessions active in the range (first day <= to, last day >= from);
- ``errors=1`` (a failed tool call or a model error), ``thinking=1``;
- ``q``: the session search (importer/session_search.py, docs/search.md): the sessions whose messages,
  title or first prompt hold the words, best first, each with its best matching messages as snippets,
  their number, a relevance and a link to the conversation at the first match; the query's own
  ``agent:``, ``server:``, ``source:``, ``tool:`` add to the filters; bad syntax is a message on the page
  (a 400 of the JSON), never a 500;
- ``limit`` (rows a page, default 50, at most 500) and ``after`` (``<last_message_at>|<id>`` of the
  previous page's last row: keyset paging, never OFFSET); a search pages by ``start`` (its rank order
  has no key to keep).

A snapshot without ``session_list`` (exported by an older AgentBase) gets a page that says so, with
links to the sessions table and the dashboard. When no AgentBase snapshot is served, ``/`` is
Datasette's own index page.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field
from datetime import date, timedelta
from urllib.parse import urlencode

from datasette.utils.asgi import BadRequest, NotFound, Response

from importer import amounts, session_search
from importer.search import fts_query

from . import facts
from .facts import SESSION_LIST, SESSION_LIST_COLUMNS, SESSION_LIST_FTS

from . import dashboard, live, live_pages, render, served

PAGE_SIZE = 50
MAX_PAGE = 500
PRESETS = (("1", "today"), ("7", "7 days"), ("30", "30 days"))
PARAMS = ("agent", "server", "source", "days", "from", "to", "errors", "thinking", "q", "limit")
MAX_START = 10_000  # the deepest a search pages
COLUMNS = tuple(SESSION_LIST_COLUMNS)


@dataclass
class Filters:
    agent: str | None = None
    server: str | None = None
    source: str | None = None
    days: str | None = None  # a preset: "1", "7", "30"
    day_from: str | None = None
    day_to: str | None = None
    errors: bool = False
    thinking: bool = False
    q: str | None = None
    limit: int = PAGE_SIZE
    after: tuple[str, int] | None = None
    start_at: int = 0  # a search's page: the rank of its first row (0: the best)
    # what a person typed that could not be used (a message each, shown on the page; the page keeps
    # the value in its form, to be fixed): parse(strict=False)
    problems: list[str] = field(default_factory=list)
    typed: dict = field(default_factory=dict)
    bad: bool = False  # a value was malformed (the page answers 400, with its form)
    # resolved against the snapshot: the range a preset stands for
    start: str | None = None
    end: str | None = None

    def params(self, **changes) -> list[tuple[str, str]]:
        """The URL parameters of these filters (no cursor), with some changed (None: dropped)."""
        values = {"agent": self.agent, "server": self.server, "source": self.source, "days": self.days,
                  "from": self.day_from, "to": self.day_to, "errors": "1" if self.errors else None,
                  "thinking": "1" if self.thinking else None, "q": self.q,
                  "limit": str(self.limit) if self.limit != PAGE_SIZE else None}
        values.update(changes)
        return [(k, values[k]) for k in PARAMS if values.get(k) not in (None, "")]


def _day(value: str | None, name: str) -> str | None:
    try:
        return session_search.check_day(value, name)
    except session_search.QueryError as exc:
        raise BadRequest(str(exc)) from None


def parse(args, strict: bool = True) -> Filters:
    """The filters of a request's GET parameters; a malformed day or cursor is a 400 (``strict``:
    scripts, JSON), or (a page) a problem the page names, the value kept in its form and not applied."""
    f = Filters()
    for name in ("agent", "server", "source"):
        setattr(f, name, args.get(name) or None)
    days = (args.get("days") or "").strip()
    f.days = str(max(1, min(int(days), 3660))) if days.isdigit() else None  # (a preset, or any number of days)
    if days and not days.isdigit() and days != "all":  # (taken as no range, as scripts have known it)
        f.problems.append(f"days: {days[:40]!r} is not a number of days (1 to 3660), nor all: the whole "
                          "archive is shown")
    for name, attr in (("from", "day_from"), ("to", "day_to")):
        try:
            setattr(f, attr, _day(args.get(name), name))
        except BadRequest as exc:
            if strict:
                raise
            f.problems.append(f"{exc.args[0] if exc.args else name}: {(args.get(name) or '')[:40]!r} is not "
                              "applied")
            f.typed[name] = (args.get(name) or "")[:40]
            f.bad = True
    f.errors = args.get("errors") in ("1", "on", "true", "yes")
    f.thinking = args.get("thinking") in ("1", "on", "true", "yes")
    q = (args.get("q") or "").strip()
    f.q = q[:500] or None
    limit = args.get("limit")
    if limit and limit.isdigit():
        f.limit = max(1, min(int(limit), MAX_PAGE))
    start = args.get("start") or ""
    if start.isdigit():
        f.start_at = min(int(start), MAX_START)
    after = args.get("after")
    if after:
        at, _, row_id = after.rpartition("|")
        if not row_id.isdigit() or len(at) > 64 or len(row_id) > 19:
            raise BadRequest("after must be <last_message_at>|<id>, as in a next page link")
        f.after = (at, int(row_id))
    return f


def _meta(conn: sqlite3.Connection) -> dict:
    return facts.marker(conn)


_choices_cache: dict = {}
_choices_lock = threading.Lock()


def _choices(conn: sqlite3.Connection, database: str | None) -> dict:
    """The filters' choices (agents, servers, sources) and the latest day; kept per snapshot version
    (live.version: its build and update), so an update that brings a new agent or day shows it at
    once. One version is kept per database."""
    version = live.version(conn)
    key = (database, *version) if version else None
    if key is not None:
        with _choices_lock:
            found = _choices_cache.get(key)
        if found is not None:
            return found
    out = {}
    for name in ("agent_id", "server", "source"):
        out[name] = [r[0] for r in conn.execute(
            f"SELECT DISTINCT [{name}] FROM {SESSION_LIST} WHERE [{name}] IS NOT NULL ORDER BY [{name}]")]
    row = conn.execute(f"SELECT last_day FROM {SESSION_LIST} WHERE last_day IS NOT NULL "
                       "ORDER BY last_message_at DESC, id DESC LIMIT 1").fetchone()
    out["latest"] = row[0] if row else None
    if key is not None:
        with _choices_lock:
            for old in [k for k in _choices_cache if k[0] == database]:
                del _choices_cache[old]
            _choices_cache[key] = out
    return out


def options(f: Filters, **more) -> session_search.Options:
    """The filters as the session search takes them (its ``Options``)."""
    return session_search.Options(
        agent=[f.agent] if f.agent else [], server=[f.server] if f.server else [],
        source=[f.source] if f.source else [], since=f.start, until=f.end, errors=f.errors, thinking=f.thinking,
        **more)


def where(f: Filters) -> tuple[list[str], list]:
    """The WHERE terms and parameters of the filters (no cursor), the query's as a match of the session
    list's own index (titles, first prompts)."""
    terms, params = session_search.list_terms(options(f))
    if f.q:
        terms.append(f"id IN (SELECT rowid FROM {SESSION_LIST_FTS} WHERE {SESSION_LIST_FTS} MATCH ?)")
        params.append(fts_query(f.q))
    return terms, params


def page_sql(f: Filters) -> tuple[str, list]:
    terms, params = where(f)
    if f.after is not None:
        at, row_id = f.after
        terms.append("last_message_at <= ? AND (last_message_at < ? OR id < ?)")
        params += [at, at, row_id]
    sql = (f"SELECT {', '.join(COLUMNS)} FROM {SESSION_LIST}"
           + (" WHERE " + " AND ".join(terms) if terms else "")
           + " ORDER BY last_message_at DESC, id DESC LIMIT ?")
    return sql, params + [f.limit + 1]


def count_sql(f: Filters, before_cursor: bool = False) -> tuple[str, list]:
    """How many sessions the filters select; ``before_cursor``: how many of them the pages before this
    one showed (those newer than the cursor, and the cursor's own row)."""
    terms, params = where(f)
    if before_cursor:
        at, row_id = f.after
        terms.append("last_message_at >= ? AND (last_message_at > ? OR id >= ?)")
        params += [at, at, row_id]
    return (f"SELECT COUNT(*) FROM {SESSION_LIST}" + (" WHERE " + " AND ".join(terms) if terms else ""), params)


def resolve_range(f: Filters, latest: str | None) -> None:
    """The range the filters stand for: from/to as given, else a preset's days up to the latest day."""
    if f.day_from or f.day_to:
        f.start, f.end = f.day_from, f.day_to
    elif f.days and latest:
        f.start = (date.fromisoformat(latest) - timedelta(days=int(f.days) - 1)).isoformat()
        f.end = latest


def search(conn: sqlite3.Connection, f: Filters, href) -> dict:
    """A page of the session search: its sessions as the list's rows (every column), each with what the
    search found (snippets, matches, relevance, the link at the first match)."""
    try:
        found = session_search.search(conn, f.q, options(f, limit=f.limit, offset=f.start_at), session_href=href)
    except session_search.QueryError as exc:
        return {"rows": [], "more": False, "count": 0, "skipped": f.start_at, "error": str(exc), "search": None}
    ids = [s["id"] for s in found["sessions"]]
    full = {}
    if ids:
        cur = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM {SESSION_LIST} WHERE id IN "
                           f"({', '.join('?' * len(ids))})", ids)
        names = [d[0] for d in cur.description]
        full = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    keep = ("score", "relevance", "matches", "matches_exact", "title_match", "partial", "first_match_id", "snippets")
    rows = []
    for s in found["sessions"]:
        row = full.get(s["id"])
        if row is not None:
            row.update({k: s[k] for k in keep})
            row["match_href"] = s["href"]
            rows.append(row)
    listed = found["count"] + found["partial_count"]
    return {"rows": rows, "more": f.start_at + len(rows) < listed and f.start_at + f.limit <= MAX_START,
            "count": found["count"], "skipped": f.start_at, "error": None,
            "search": {k: found[k] for k in ("fts", "filters", "count_exact", "partial_count")}
            | {"note": found.get("note")}}


def load(conn: sqlite3.Connection, f: Filters, database: str | None = None, href=None) -> dict:
    """Everything a page shows (runs in Datasette's SQL thread)."""
    if not facts.has_tables(conn, SESSION_LIST, SESSION_LIST_FTS):
        return {"missing": True, "meta": _meta(conn)}
    version = live.version(conn)  # (first: an update landing meanwhile is a change the live page sees next)
    choices = _choices(conn, database)
    resolve_range(f, choices["latest"])
    if f.q:
        return {"missing": False, "meta": _meta(conn), "choices": choices, "version": version,
                **search(conn, f, href)}
    sql, params = page_sql(f)
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r)) for r in cur.fetchall()]
    more = len(rows) > f.limit
    rows = rows[: f.limit]
    sql, params = count_sql(f)
    total = conn.execute(sql, params).fetchone()[0]
    skipped = 0
    if f.after is not None:
        sql, params = count_sql(f, before_cursor=True)
        skipped = conn.execute(sql, params).fetchone()[0]
    return {"missing": False, "meta": _meta(conn), "choices": choices, "rows": rows, "more": more,
            "count": total, "skipped": skipped, "version": version}


# -- how a row reads ----------------------------------------------------------------------------------

def _minute(local: str | None) -> str:
    return local[:16] if local else ""


def cost_label(row: dict) -> str:
    """The priced calls' cost as the dashboard writes a total (cents from $1, four decimals under);
    "unpriced" where every call is; a dash without calls."""
    return amounts.cost_label(row["cost_usd"], row["priced_calls"], row["unpriced_calls"], 4, cents_from=1)


def present(row: dict) -> dict:
    """A row as the page shows it: times to the minute, the last one without the date (or year) it
    shares with the start."""
    started, last = row["started_local"], row["last_local"]
    if started and last and started[:10] == last[:10]:
        last_label = last[11:16]
    elif started and last and started[:4] == last[:4]:
        last_label = last[5:16]
    else:
        last_label = _minute(last)
    return {**row, "started": _minute(started), "last": last_label, "cost_label": cost_label(row)}


# -- the views ----------------------------------------------------------------------------------------

async def _datasette_index(datasette, request, send):
    """Datasette's own home page (no AgentBase snapshot is served here)."""
    from datasette.views.index import IndexView

    request.scope["url_route"] = {"kwargs": {"format": None}}
    return await IndexView.as_view(datasette)(request, send)


async def home_view(datasette, request, send):
    try:
        await served.snapshot_db(datasette, request)
    except NotFound:
        if request.args.get("db"):
            raise
        return await _datasette_index(datasette, request, send)
    return await sessions_view(datasette, request)


async def sessions_html_view(datasette, request):
    return await sessions_view(datasette, request)


async def sessions_json_view(datasette, request):
    return await sessions_view(datasette, request, as_json=True)


async def sessions_view(datasette, request, as_json: bool = False):
    db = await served.snapshot_db(datasette, request)
    await served.check(datasette, request, db.name)
    f = parse(request.args, strict=as_json)

    def match_href(session_id, message_id=None):
        return served.session_path(datasette, db.name, session_id, message_id)

    data = await db.execute_fn(lambda conn: load(conn, f, db.name, match_href))
    keep_db = [("db", db.name)] if request.args.get("db") else []
    base = str(datasette.urls.path("-/agentbase/sessions"))
    self_href = str(datasette.urls.instance()) if request.path == "/" else base

    def href(path: str = self_href, **changes) -> str:
        params = keep_db + f.params(**changes)
        return path + ("?" + urlencode(params) if params else "")

    if data["missing"]:
        if as_json:
            return Response.json({"ok": False, "error": "This snapshot has no session list: export it again "
                                  "with this version of AgentBase (agentbase export).", "rows": []}, status=404)
        html = await datasette.render_template("agentbase_sessions.html", {
            "missing": True, "database": db.name, "database_href": str(datasette.urls.database(db.name)),
            "sessions_table_href": str(datasette.urls.table(db.name, "sessions")) + "?_sort_desc=last_message_at",
            "dashboard_href": str(datasette.urls.path("-/agentbase")), "timezone": data["meta"].get("timezone"),
        }, request=request)
        return Response.html(html)

    rows = data["rows"]
    for r in rows:
        r["href"] = served.session_path(datasette, db.name, r["id"])
    next_href = None
    if data["more"] and rows and f.q:
        params = keep_db + f.params() + [("start", str(f.start_at + len(rows)))]
        next_href = (base + ".json" if as_json else self_href) + "?" + urlencode(params)
    elif data["more"] and rows:
        last = rows[-1]
        params = keep_db + f.params() + [("after", f"{last['last_message_at']}|{last['id']}")]
        next_href = (base + ".json" if as_json else self_href) + "?" + urlencode(params)
    search_href = None
    if f.q:
        # the message search takes words, not the session search's filters: those become its parameters
        words, given = f.q, {}
        try:
            parsed = session_search.parse(f.q)
            if parsed.filters:
                words = " ".join(t.highlight() for c in parsed.clauses for t in c)
                given = {k: v[0] for k, v in parsed.filters.items() if k in ("agent", "server", "source")}
        except session_search.QueryError:
            pass
        params = [("q", words)] + [(k, v) for k, v in (("agent", f.agent or given.get("agent")),
                                                       ("server", f.server or given.get("server")),
                                                       ("source", given.get("source"))) if v]
        search_href = str(datasette.urls.query(db.name, "search")) + "?" + urlencode(params)
    if as_json:
        if data.get("error"):
            return Response.json({"ok": False, "error": data["error"], "rows": []}, status=400)
        body = {
            "ok": True, "database": db.name, "timezone": data["meta"].get("timezone"),
            "filters": dict(f.params()), "from": f.start, "to": f.end, "count": data["count"],
            "skipped": data["skipped"],
            "rows": rows, "next": f"{rows[-1]['last_message_at']}|{rows[-1]['id']}" if next_href else None,
            "next_url": next_href, "search_messages_url": search_href,
        }
        if f.q:
            body["next"] = str(f.start_at + len(rows)) if next_href else None
            body["search"] = data["search"]
        return Response.json(body)
    choices = data["choices"]
    latest = choices["latest"]
    exported_day = dashboard._local_day(data["meta"].get("exported_at"), data["meta"].get("timezone"))
    presets = []
    for value, label in PRESETS:
        if value == "1" and latest and exported_day != latest:
            label = "latest day"  # an older snapshot: its latest day is not today
        presets.append({"value": value, "label": label, "current": f.days == value and not (f.day_from or f.day_to),
                        "href": href(days=value, **{"from": None, "to": None})})
    presets.append({"value": "all", "label": "all", "href": href(days=None, **{"from": None, "to": None}),
                    "current": not (f.days or f.day_from or f.day_to)})
    active = []
    for name, value, label in (("agent", f.agent, "agent"), ("server", f.server, "server"),
                               ("source", f.source, "source"), ("from", f.day_from, "from"),
                               ("to", f.day_to, "to"), ("errors", "yes" if f.errors else None, "has errors"),
                               ("thinking", "yes" if f.thinking else None, "has thinking"),
                               ("q", f.q, "search")):
        if value:
            active.append({"name": label, "value": value, "href": href(**{name: None})})
    shown = [present(r) for r in rows]
    for r in shown:
        r["snippets"] = [{**snip, "html": render.render_snippet(snip["snippet"])} for snip in r.get("snippets", [])]
    context = {
        "missing": False,
        "database": db.name,
        "database_href": str(datasette.urls.database(db.name)),
        "dashboard_href": str(datasette.urls.path("-/agentbase")),
        "self_href": self_href,
        "keep_db": keep_db,
        "f": f,
        "page_size": PAGE_SIZE,
        "rows": shown,
        "relevance_label": session_search.relevance_label,
        "count": data["count"],
        "skipped": data["skipped"],
        "paged": f.after is not None or bool(f.q and f.start_at),
        "searched": bool(f.q),
        "search_error": data.get("error"),
        "search": data.get("search"),
        "first_href": href(),
        "next_href": next_href,
        "json_href": href(base + ".json"),
        "search_href": search_href,
        "presets": presets,
        "active": active,
        "reset_href": (self_href + "?" + urlencode(keep_db)) if keep_db else self_href,
        "agents": choices["agent_id"],
        "servers": choices["server"],
        "sources": choices["source"],
        "latest": latest,
        "timezone": data["meta"].get("timezone"),
        **live_pages.page_vars(datasette, db, request, data["version"]),
    }
    html = await datasette.render_template("agentbase_sessions.html", context, request=request)
    return Response.html(html, status=400 if f.bad else 200)


ROUTES = [
    (r"^/$", home_view),
    (r"^/-/agentbase/sessions$", sessions_html_view),
    (r"^/-/agentbase/sessions\.json$", sessions_json_view),
]
