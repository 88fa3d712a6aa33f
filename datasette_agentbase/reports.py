"""The Reports page, ``/-/agentbase/reports`` (and its ``.json`` and ``.csv``): usage and cost per
day, week, month, model or session, with the totals row on top.

What is counted is what the dashboard and ``agentbase report`` count: a *model call* is a message
with ``usage_counted = 1`` (a re-appended copy of a call is not counted again) and a cost source;
its tokens are its ``total_tokens``; its cost is ``cost_usd`` when it was priced (recorded by the
agent or computed from a price list), and a call without a price is *unpriced*: counted apart, never
as $0. A *message* is any message counted once.

Where the figures come from, so that a page is answered in milliseconds at a million messages: per
day, week, month and model, the dashboard's cube (dashboard.py: the messages grouped by local day,
hour, server, agent, source and model, made once per snapshot version, in the background at
start-up); per session, the snapshot's ``session_list`` (a row per session with its totals, made by
the export and kept by the in-place update). The plugin imports nothing of the importer at request
time.

Filters are the session browser's (browser.py), as GET parameters: ``agent``, ``server``, ``source``,
``days`` (the days up to the snapshot's latest day) or ``from`` / ``to`` (local days); ``by``
(``day``, ``week``, ``month``, ``model``, ``session``; default ``day``) and ``order`` (``desc``,
newest or costliest first, or ``asc``). Each row links to its sessions in the session browser (a
model's row: to its calls in the messages table).
"""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from urllib.parse import urlencode

from datasette.utils.asgi import BadRequest, Response

from importer import amounts

from . import browser, dashboard, facts, served
from .facts import SESSION_LIST

KINDS = (("day", "daily"), ("week", "weekly"), ("month", "monthly"), ("model", "per model"),
         ("session", "per session"))
PRESETS = (("7", "7 days"), ("30", "30 days"), ("90", "90 days"), ("365", "a year"), ("all", "all"))
SESSION_ROWS = 100  # the costliest sessions shown; the totals row counts every one


def cost_label(t: dict) -> str:
    """The priced calls' cost in cents, the same precision on every row (under a cent: said so);
    "unpriced" where every call is; a dash without any call."""
    return amounts.cost_label(t["cost"], t["priced_calls"], t["unpriced_calls"])


def monday(day: str) -> str:
    d = date.fromisoformat(day)
    return (d - timedelta(days=d.weekday())).isoformat()


def month_end(month: str) -> str:
    y, m = int(month[:4]), int(month[5:7])
    first_next = date(y + (m == 12), m % 12 + 1, 1)
    return (first_next - timedelta(days=1)).isoformat()


def period(by: str, day: str) -> tuple[str, str, str, str]:
    """(key, label, first day, last day) of the period a day falls in."""
    if by == "week":
        start = monday(day)
        end = (date.fromisoformat(start) + timedelta(days=6)).isoformat()
        year, week, _ = date.fromisoformat(start).isocalendar()
        return start, f"{year}-W{week:02d} (from {start})", start, end
    if by == "month":
        return day[:7], day[:7], day[:7] + "-01", month_end(day[:7])
    return day, day, day, day


def day_rows(cube: dict) -> list[tuple]:
    """The cube without its hours: (day, server, agent, source, model, messages, calls, tokens, cost,
    unpriced calls, unpriced tokens), made once per cube (a version of the snapshot) and kept in it: a
    report sums some thousand rows instead of the cube's tens of thousands."""
    found = cube.get("_report_days")
    if found is not None:
        return found
    sums: dict[tuple, list] = {}
    for r in cube["cube"]:
        key = (r[dashboard.DAY], r[dashboard.SERVER], r[dashboard.AGENT], r[dashboard.SOURCE], r[dashboard.MODEL])
        t = sums.get(key)
        if t is None:
            sums[key] = [r[dashboard.MESSAGES], r[dashboard.CALLS], r[dashboard.TOKENS], r[dashboard.COST],
                         r[dashboard.UNPRICED], r[dashboard.UNPRICED_TOKENS]]
        else:
            t[0] += r[dashboard.MESSAGES]
            t[1] += r[dashboard.CALLS]
            t[2] += r[dashboard.TOKENS]
            t[3] += r[dashboard.COST]
            t[4] += r[dashboard.UNPRICED]
            t[5] += r[dashboard.UNPRICED_TOKENS]
    found = cube["_report_days"] = [(*k, *v) for k, v in sums.items()]
    return found


def _figures_of(v: list) -> dict:
    messages, calls, tokens, cost, unpriced, unpriced_tokens = v
    return {"messages": messages, "calls": calls, "tokens": tokens, "cost": cost, "priced_calls": calls - unpriced,
            "unpriced_calls": unpriced, "unpriced_tokens": unpriced_tokens}


def from_cube(cube: dict, by: str, f: browser.Filters) -> tuple[dict, list[dict]]:
    """The totals and the rows of a report by day, week, month or model, summed from the cube for
    the filters (agent, server, source, and the range f.start..f.end, either end open)."""
    total = [0, 0, 0, 0.0, 0, 0]
    groups: dict = {}
    keys: dict = {}  # day -> its period's key
    bounds: dict = {}  # key -> [first day, last day] with usage
    for day, server, agent, source, model, *v in day_rows(cube):
        if (f.start and day < f.start) or (f.end and day > f.end) or (
                f.server is not None and server != f.server) or (
                f.source is not None and source != f.source) or (f.agent is not None and agent != f.agent):
            continue
        if by == "model":
            if not v[1]:
                continue  # a model's row counts its calls (a message without a call has no model to speak of)
            key = model or ""
        elif by == "day":
            key = day
        else:
            key = keys.get(day)
            if key is None:
                key = keys[day] = period(by, day)[0]
        g = groups.get(key)
        if g is None:
            g = groups[key] = [0, 0, 0, 0.0, 0, 0]
            bounds[key] = [day, day]
        for i in range(6):
            g[i] += v[i]
            total[i] += v[i]
        b = bounds[key]
        if day < b[0]:
            b[0] = day
        elif day > b[1]:
            b[1] = day
    rows = []
    for key, v in groups.items():
        g = {**_figures_of(v), "key": key, "first_day": bounds[key][0], "last_day": bounds[key][1]}
        if by == "model":
            g["model"] = key or None
            g["label"] = key or "(no model)"
        else:
            _, g["label"], g["from"], g["to"] = period(by, key)
            g[by] = key
        rows.append(g)
    return _figures_of(total), rows


def order_rows(by: str, rows: list[dict], order: str) -> list[dict]:
    if by == "model":  # costliest first (asc: cheapest first), then the most calls
        rows.sort(key=lambda g: (g["cost"], g["calls"], g["unpriced_calls"], g["label"]), reverse=order != "asc")
        return rows
    rows.sort(key=lambda g: g["key"], reverse=order != "asc")
    return rows


SESSION_TOTALS = ("SELECT COUNT(*), SUM(message_count), SUM(model_calls), SUM(total_tokens), SUM(cost_usd), "
                  "SUM(priced_calls), SUM(unpriced_calls) FROM " + SESSION_LIST)
SESSION_COLUMNS = ("id", "title", "session_uuid", "agent_id", "server", "source", "started_local", "last_local",
                   "message_count", "model_calls", "total_tokens", "cost_usd", "priced_calls", "unpriced_calls")


def sessions(conn, f: browser.Filters, order: str, limit: int = SESSION_ROWS) -> tuple[dict, list[dict], int]:
    """The totals of every session the filters select (active in the range: its whole figures), and
    the ``limit`` costliest (asc: the cheapest), from session_list."""
    terms, params = browser.where(f)
    where = " WHERE " + " AND ".join(terms) if terms else ""
    n, messages, calls, tokens, cost, priced, unpriced = conn.execute(SESSION_TOTALS + where, params).fetchone()
    total = {"sessions": n or 0, "messages": messages or 0, "calls": calls or 0, "tokens": tokens or 0,
             "cost": float(cost or 0.0), "priced_calls": priced or 0, "unpriced_calls": unpriced or 0}
    direction = "ASC" if order == "asc" else "DESC"
    cur = conn.execute(
        f"SELECT {', '.join(SESSION_COLUMNS)} FROM {SESSION_LIST}{where} "
        f"ORDER BY COALESCE(cost_usd, 0) {direction}, total_tokens {direction}, last_message_at DESC, id DESC "
        "LIMIT ?", params + [limit])
    rows = []
    for r in cur.fetchall():
        d = dict(zip(SESSION_COLUMNS, r))
        rows.append({**d, "label": d["title"] or f"Untitled {d['source'] or d['agent_id'] or 'agent'} session",
                     "messages": d["message_count"] or 0, "calls": d["model_calls"] or 0,
                     "tokens": d["total_tokens"] or 0, "cost": float(d["cost_usd"] or 0.0),
                     "priced_calls": d["priced_calls"] or 0, "unpriced_calls": d["unpriced_calls"] or 0})
    return total, rows, total["sessions"]


# -- the view -------------------------------------------------------------------------------------

def _parse(request) -> tuple[str, str, browser.Filters]:
    by = request.args.get("by") or "day"
    if by not in dict(KINDS):
        raise BadRequest(f"by must be one of {', '.join(k for k, _ in KINDS)}")
    order = request.args.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise BadRequest("order must be asc or desc")
    return by, order, browser.parse(request.args)


def _json_row(by: str, r: dict) -> dict:
    out = {by if by != "session" else "session_id": r["key"] if by != "session" else r["id"]}
    if by == "session":
        out.update({"title": r["label"], "session_uuid": r["session_uuid"], "agent": r["agent_id"],
                    "server": r["server"], "source": r["source"], "started": r["started_local"],
                    "last_activity": r["last_local"]})
    elif by == "model":
        out["model"] = r["model"]
    else:
        out.update({"from": r["from"], "to": r["to"]})
    out.update(_figures(r))
    if r.get("href"):
        out[{"model": "calls_url", "session": "conversation_url"}.get(by, "sessions_url")] = r["href"]
    return out


def _figures(t: dict) -> dict:
    return {"messages": t["messages"], "model_calls": t["calls"], "tokens": t["tokens"],
            "cost_usd": round(t["cost"], 6) if t["priced_calls"] else None, "cost": cost_label(t),
            "priced_calls": t["priced_calls"], "unpriced_calls": t["unpriced_calls"]}


async def reports_view(datasette, request):
    db = await served.snapshot_db(datasette, request)
    await served.check(datasette, request, db.name)
    fmt = request.url_vars.get("format")
    by, order, f = _parse(request)

    from . import pages  # (pages imports this module's view)

    def load(conn):
        _, cube = pages.dashboard_cube(datasette, db, conn)
        browser.resolve_range(f, cube["latest"])
        if by == "session":
            if not facts.has_tables(conn, SESSION_LIST):
                return cube, None, [], 0
            total, rows, count = sessions(conn, f, order)
            return cube, total, rows, count
        total, rows = from_cube(cube, by, f)
        return cube, total, order_rows(by, rows, order), len(rows)

    cube, total, rows, count = await db.execute_fn(load)
    keep_db = [("db", db.name)] if request.args.get("db") else []
    base = str(datasette.urls.path("-/agentbase/reports"))
    home = str(datasette.urls.instance())
    scope = [(k, v) for k, v in (("agent", f.agent), ("server", f.server), ("source", f.source)) if v]

    def href(path: str = base, **changes) -> str:
        values = {"by": by if by != "day" else None, "order": order if order != "desc" else None,
                  **dict(f.params()), **changes}
        values.pop("limit", None)
        names = ("by", "order", "agent", "server", "source", "days", "from", "to")
        params = keep_db + [(k, values[k]) for k in names if values.get(k) not in (None, "")]
        return path + ("?" + urlencode(params) if params else "")

    for r in rows:
        if by == "session":
            r["href"] = served.session_path(datasette, db.name, r["id"])
        elif by == "model":
            params = [("model", r["model"])] if r["model"] else [("model__isnull", "1")]
            params += [("agent_id" if k == "agent" else k, v) for k, v in scope]
            params += [("day__gte", f.start)] if f.start else []
            params += [("day__lte", f.end)] if f.end else []
            params += [("usage_counted", "1"), ("cost_source__notblank", "1"), ("_sort_desc", "timestamp")]
            r["href"] = str(datasette.urls.table(db.name, "messages")) + "?" + urlencode(params)
        else:
            # the sessions active in the period (and the range): the session browser's from/to
            lo = max(r["from"], f.start) if f.start else r["from"]
            hi = min(r["to"], f.end) if f.end else r["to"]
            r["href"] = home + "?" + urlencode(keep_db + scope + [("from", lo), ("to", hi)])
    name = f"agentbase-report-{by}"
    if fmt == "json":
        return Response.json({
            "ok": True, "database": db.name, "by": by, "order": order, "filters": dict(f.params()),
            "from": f.start, "to": f.end, "timezone": cube["timezone"],
            "total": None if total is None else {**_figures(total), **(
                {"sessions": total["sessions"]} if by == "session" else {})},
            "rows": [_json_row(by, r) for r in rows], "rows_total": count,
        })
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        first = ["session_id", "title", "agent", "server", "source", "last_activity"] if by == "session" else (
            ["model"] if by == "model" else [by, "from", "to"])
        figures = ["messages", "model_calls", "tokens", "cost_usd", "priced_calls", "unpriced_calls"]
        writer.writerow(first + figures)

        def numbers(t):
            fig = _figures(t)
            return [fig[k] if fig[k] is not None else "" for k in figures]

        if total is not None:
            writer.writerow(["Total"] + [""] * (len(first) - 1) + numbers(total))
        for r in rows:
            if by == "session":
                lead = [r["id"], r["label"], r["agent_id"], r["server"], r["source"], r["last_local"]]
            elif by == "model":
                lead = [r["model"] or ""]
            else:
                lead = [r["key"], r["from"], r["to"]]
            writer.writerow(lead + numbers(r))
        return Response(out.getvalue(), content_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'})

    for t in rows + ([total] if total else []):
        t["cost_label"] = cost_label(t)
    presets = [{"label": label, "href": href(days=value, **{"from": None, "to": None}), "value": value,
                "current": (f.days == value and not (f.day_from or f.day_to))
                or (value == "all" and not (f.days or f.day_from or f.day_to))}
               for value, label in PRESETS]
    kinds = [{"by": k, "label": label, "href": href(by=k if k != "day" else None), "current": k == by}
             for k, label in KINDS]
    active = []
    for pname, value in (("agent", f.agent), ("server", f.server), ("source", f.source),
                         ("from", f.day_from), ("to", f.day_to)):
        if value:
            active.append({"name": pname, "value": value, "href": href(**{pname: None})})
    context = {
        "database": db.name, "by": by, "order": order, "f": f, "kinds": kinds, "presets": presets,
        "active": active, "rows": rows, "total": total, "count": count, "session_rows": SESSION_ROWS,
        "self_href": base, "keep_db": keep_db, "timezone": cube["timezone"], "first": cube["first"],
        "latest": cube["latest"], "agents": cube["agent_names"], "servers": cube["servers"],
        "sources": cube["sources"],
        "order_href": href(order="asc" if order == "desc" else None),
        "json_href": href(base + ".json"), "csv_href": href(base + ".csv"),
        "reset_href": base + ("?" + urlencode(keep_db + ([("by", by)] if by != "day" else [])) if keep_db or by != "day"
                              else ""),
        "label": dict(KINDS)[by],
    }
    html = await datasette.render_template("agentbase_reports.html", context, request=request)
    return Response.html(html)


ROUTES = [
    (r"^/-/agentbase/reports$", reports_view),
    (r"^/-/agentbase/reports\.(?P<format>json|csv)$", reports_view),
]
