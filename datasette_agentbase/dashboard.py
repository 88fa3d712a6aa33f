"""The dashboard: messages and cost per day per agent, cost per model, an
activity heatmap (weekday by hour, local time), totals per agent and per source
kind, drawn as SVG on the server (no JavaScript, no CDN: it works offline).

How the figures are made
    One pass over ``messages`` groups the snapshot by (local day, local hour,
    server, agent, source, model): the *cube*, a few thousand rows for a million
    messages (about 1.5 s at a million, done once at start-up in the background,
    and again after each update of the snapshot: live.version). Every page -- any date preset,
    server, source or agent -- is then summed from the cube in Python, in
    milliseconds, and cached under all of its filters.

What is counted
    A message is a ``messages`` row with ``usage_counted = 1`` (a re-appended copy
    of a model call is not a second message). A model call is such a row with a
    ``cost_source`` (an assistant message, a Codex tool call or reasoning item, an
    agent-server run): ``recorded`` and ``computed`` calls have a cost;
    ``unpriced`` ones (``cost_usd`` NULL) are counted and shown apart, never as $0.

An agent is a (server, agent_id) pair: ``main`` on two servers is two agents,
labelled ``main@alpha`` and ``main@beta`` wherever its name repeats in the
snapshot. Each agent has one colour, in every chart of every page: agents take
the palette in order of their first day in the snapshot (then server, name), so
an agent keeps its colour from one visit, filter and export to the next.
"""

from __future__ import annotations

import math
import sqlite3
from datetime import date, datetime, timedelta

from markupsafe import Markup

from importer import amounts

from . import facts

# Twenty colours told apart on a white page: Tableau's ten (its grey left out: "other" is grey),
# then ten of other hues or lightness; agents take them in order of their first day.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7",
           "#9c755f", "#3d3d3d", "#17becf", "#bcbd22", "#8b1e3f", "#a6d854", "#1f3d7a", "#ffbe7d",
           "#6b3fa0", "#0b6e4f", "#d4a6c8", "#a0cbe8")
OTHER_COLOR = "#bbbbbb"
UNPRICED_COLOR = "#b35900"
# The heatmap: no activity, then five classes of a sequential ramp.
HEAT_EMPTY = "#f3f4f6"
HEAT_RAMP = ("#c7e9b4", "#7fcdbb", "#41b6c4", "#2c7fb8", "#253494")
MAX_SERIES = 12  # agents drawn one by one in a chart; the rest are one grey "other agents" series
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
PRESETS = (("1", "today"), ("7", "7 days"), ("30", "30 days"), ("90", "90 days"), ("365", "a year"),
           ("all", "all"))
DEFAULT_DAYS = None  # the whole archive
# The bars of a range this many days long or longer are weeks, then months (a bar a day would be a hair).
WEEKLY_FROM_DAYS = 120
MONTHLY_FROM_DAYS = 730

# One pass, grouped in SQLite; the day and hour are local to the export's time zone. A table scan
# (NOT INDEXED: the planner would walk an index and look every row up, twice as slow) unless the
# snapshot has DASHBOARD_INDEX, which holds every column in the GROUP BY's order: read in order, it
# needs no sort (0.2 s instead of 1.4 s at a million messages).
DASHBOARD_INDEX = "idx_messages_dashboard"
DASHBOARD_INDEX_SQL = (f"CREATE INDEX {DASHBOARD_INDEX} ON messages (day, server, agent_id, source, model, "
                       "substr(local_time, 12, 2), usage_counted, cost_source, cost_usd, total_tokens)")
CUBE_SQL = """
SELECT day, {hour}, server, agent_id, source, model,
       COUNT(*),
       SUM(cost_source IS NOT NULL),
       SUM(CASE WHEN cost_source IS NOT NULL THEN COALESCE(total_tokens, 0) ELSE 0 END),
       SUM(CASE WHEN cost_source IS NOT NULL AND cost_source <> 'unpriced' THEN COALESCE(cost_usd, 0) ELSE 0 END),
       SUM(cost_source = 'unpriced'),
       SUM(CASE WHEN cost_source = 'unpriced' THEN COALESCE(total_tokens, 0) ELSE 0 END)
FROM messages {access}
WHERE usage_counted = 1 AND day IS NOT NULL
GROUP BY day, server, agent_id, source, model, {hour}
"""
# The local hour, from the stored milliseconds and offset where there are (integer arithmetic, not
# local_time's text: a pass over a million messages in about a third less time).
HOUR_FROM_MS = ("CASE WHEN timestamp_ms IS NOT NULL AND timestamp_ms / 1000 + utc_offset_s >= 0 "
                "THEN ((timestamp_ms / 1000 + utc_offset_s) % 86400) / 3600 ELSE substr(local_time, 12, 2) END")


def cube_sql(conn: sqlite3.Connection) -> str:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ? AND tbl_name = 'messages'",
                         (DASHBOARD_INDEX,)).fetchone()
    if found:  # (the index holds the text's hour)
        return CUBE_SQL.format(access=f"INDEXED BY {DASHBOARD_INDEX}", hour="substr(local_time, 12, 2)")
    columns = {r[1] for r in conn.execute("PRAGMA table_xinfo(messages)")}
    hour = HOUR_FROM_MS if {"timestamp_ms", "utc_offset_s"} <= columns else "substr(local_time, 12, 2)"
    return CUBE_SQL.format(access="NOT INDEXED", hour=hour)


# Positions in a cube row.
DAY, HOUR, SERVER, AGENT, SOURCE, MODEL, MESSAGES, CALLS, TOKENS, COST, UNPRICED, UNPRICED_TOKENS, WEEKDAY = range(13)


# -- the cube ----------------------------------------------------------------------------------------

def _meta(conn: sqlite3.Connection) -> dict:
    return facts.marker(conn)


def _local_day(stamp: str | None, zone_name: str | None) -> str | None:
    """The export's date in the export's time zone (for the "today" preset's label)."""
    if not stamp:
        return None
    try:
        moment = datetime.fromisoformat(stamp)
        if zone_name and moment.tzinfo is not None:
            from zoneinfo import ZoneInfo

            moment = moment.astimezone(ZoneInfo(zone_name))
        return moment.date().isoformat()
    except (ValueError, KeyError, ImportError, OSError):
        return None


def agent_label(server, agent, repeated: bool) -> str:
    name = agent if agent is not None else "(no agent)"
    return f"{name}@{server if server is not None else '?'}" if repeated else name


def load(conn: sqlite3.Connection) -> dict:
    """The snapshot's cube and what every page shares: the agents in colour order, with their
    labels and colours; the servers, sources and agent names (the filters' choices); the first
    and latest day; the time zone."""
    weekdays: dict[str, int | None] = {}

    def weekday(day: str) -> int | None:
        if day not in weekdays:
            try:
                weekdays[day] = date.fromisoformat(day).weekday()
            except (TypeError, ValueError):
                weekdays[day] = None
        return weekdays[day]

    cube = []
    for r in conn.execute(cube_sql(conn)):
        hour = r[1] if isinstance(r[1], int) and 0 <= r[1] < 24 else (
            int(r[1]) if isinstance(r[1], str) and r[1].isdigit() and int(r[1]) < 24 else None)
        cube.append((r[0], hour, r[2], r[3], r[4], r[5], r[6] or 0, r[7] or 0, r[8] or 0, float(r[9] or 0),
                     r[10] or 0, r[11] or 0, weekday(r[0])))
    first_day: dict[tuple, str] = {}
    for row in cube:
        key = (row[SERVER], row[AGENT])
        if key not in first_day or row[DAY] < first_day[key]:
            first_day[key] = row[DAY]
    order = sorted(first_day, key=lambda k: (first_day[k], k[0] or "", k[1] or ""))
    servers_of: dict = {}
    for server, agent in order:
        servers_of.setdefault(agent, set()).add(server)
    agents = {key: {"key": key, "server": key[0], "agent": key[1], "rank": i,
                    "label": agent_label(key[0], key[1], len(servers_of[key[1]]) > 1),
                    "color": PALETTE[i % len(PALETTE)]}
              for i, key in enumerate(order)}
    meta = _meta(conn)
    days = [row[DAY] for row in cube]
    return {
        "cube": cube,
        "agents": agents,
        "first": min(days) if days else None,
        "latest": max(days) if days else None,
        "servers": sorted({r[SERVER] for r in cube if r[SERVER] is not None}),
        "sources": sorted({r[SOURCE] for r in cube if r[SOURCE] is not None}),
        "agent_names": sorted({r[AGENT] for r in cube if r[AGENT] is not None}),
        "timezone": meta.get("timezone"),
        "exported_day": _local_day(meta.get("exported_at"), meta.get("timezone")),
        "coverage": coverage(conn),
    }


def coverage(conn: sqlite3.Connection) -> list[dict]:
    """What the snapshot holds of each kind on each server (the archive's side of `agentbase doctor`):
    sessions and the last one, files and those not read (failed, not recognised), records of types the
    kind did not know (entries marked ``unknown``), and the agent versions seen, newest first."""
    rows: dict[tuple, dict] = {}

    def row(server, source) -> dict:
        return rows.setdefault((server or "", source or ""), {
            "server": server, "source": source, "sessions": 0, "last": None, "files": 0, "failed": 0,
            "unrecognised": 0, "unknown": 0, "versions": []})

    try:
        for server, source, n, last in conn.execute(
                "SELECT server, source, COUNT(*), MAX(COALESCE(last_message_at, started_at)) FROM sessions "
                "GROUP BY 1, 2"):
            r = row(server, source)
            r["sessions"], r["last"] = n, (str(last)[:16] if last else None)
        for server, source, n, failed, ignored in conn.execute(
                "SELECT server, source, COUNT(*), SUM(status = 'failed'), SUM(status = 'ignored') FROM parsed_files "
                "GROUP BY 1, 2"):
            r = row(server, source)
            r["files"], r["failed"], r["unrecognised"] = n, failed or 0, ignored or 0
        for server, source, n in conn.execute(
                "SELECT s.server, s.source, COUNT(*) FROM entries e JOIN sessions s ON s.id = e.session_id "
                "WHERE e.custom_type = 'unknown' OR e.entry_type = 'unknown' GROUP BY 1, 2"):
            row(server, source)["unknown"] = n
        for server, source, version in conn.execute(
                "SELECT server, source, agent_version FROM sessions WHERE agent_version IS NOT NULL "
                "GROUP BY 1, 2, 3 ORDER BY MAX(COALESCE(last_message_at, started_at)) DESC"):
            versions = row(server, source)["versions"]
            if len(versions) < 5:
                versions.append(version)
    except sqlite3.Error:  # a snapshot of an older format: the panel is left out
        return []
    return [rows[k] for k in sorted(rows)]


def parse_days(value: str | None) -> int | None:
    """?days=: a number of days (1 to 3,660), ``all`` (None), else the default (the whole archive)."""
    if value == "all":
        return None
    if value and value.isdigit():
        return max(1, min(int(value), 3660))
    return DEFAULT_DAYS


def _day_range(first: str, last: str) -> list[str]:
    a, b = date.fromisoformat(first), date.fromisoformat(last)
    return [(a + timedelta(days=i)).isoformat() for i in range((b - a).days + 1)]


# -- one page's figures ------------------------------------------------------------------------------

def _zeros(n: int) -> list:
    return [0] * n


def figures(base: dict, server: str | None = None, source: str | None = None, agent: str | None = None,
            days: int | None = DEFAULT_DAYS) -> dict:
    """Everything one page shows, summed from the cube: the ``days`` days up to the snapshot's
    latest day (every day, gaps included), for the rows of ``server``, ``source`` and ``agent``."""
    latest, first = base["latest"], base["first"]
    start = first
    if latest and days:
        start = max(first, (date.fromisoformat(latest) - timedelta(days=days - 1)).isoformat())
    day_list = _day_range(start, latest) if latest else []
    index = {d: i for i, d in enumerate(day_list)}
    n = len(day_list)
    per_agent: dict[tuple, dict] = {}
    models: dict[str, dict] = {}
    sources: dict[str, dict] = {}
    heat = [[0] * 24 for _ in range(7)]
    unpriced_days = _zeros(n)
    unpriced_day_tokens = _zeros(n)
    total = {"messages": 0, "calls": 0, "tokens": 0, "cost": 0.0, "unpriced_calls": 0, "unpriced_tokens": 0}
    left_out = {"messages": 0, "calls": 0, "cost": 0.0, "first": None}  # what the filters select before the range
    for row in base["cube"]:
        if (server is not None and row[SERVER] != server) or (
                source is not None and row[SOURCE] != source) or (agent is not None and row[AGENT] != agent):
            continue
        i = index.get(row[DAY])
        if i is None:
            if row[MESSAGES] and (left_out["first"] is None or row[DAY] < left_out["first"]):
                left_out["first"] = row[DAY]
            left_out["messages"] += row[MESSAGES]
            left_out["calls"] += row[CALLS]
            left_out["cost"] += row[COST]
            continue
        key = (row[SERVER], row[AGENT])
        a = per_agent.get(key)
        if a is None:
            a = per_agent[key] = {"key": key, "messages": 0, "calls": 0, "tokens": 0, "cost": 0.0,
                                  "unpriced_calls": 0, "unpriced_tokens": 0, "days": set(), "last_day": row[DAY],
                                  "sources": set(), "by_day": _zeros(n), "cost_by_day": [0.0] * n}
        s = sources.get(row[SOURCE] or "")
        if s is None:
            s = sources[row[SOURCE] or ""] = {"source": row[SOURCE], "agents": set(), "messages": 0, "calls": 0,
                                             "tokens": 0, "cost": 0.0, "unpriced_calls": 0, "unpriced_tokens": 0}
        for t in (a, s, total):
            t["messages"] += row[MESSAGES]
            t["calls"] += row[CALLS]
            t["tokens"] += row[TOKENS]
            t["cost"] += row[COST]
            t["unpriced_calls"] += row[UNPRICED]
            t["unpriced_tokens"] += row[UNPRICED_TOKENS]
        s["agents"].add(key)
        a["days"].add(row[DAY])
        a["last_day"] = max(a["last_day"], row[DAY])
        if row[SOURCE] is not None:
            a["sources"].add(row[SOURCE])
        a["by_day"][i] += row[MESSAGES]
        a["cost_by_day"][i] += row[COST]
        if row[UNPRICED]:
            unpriced_days[i] += row[UNPRICED]
            unpriced_day_tokens[i] += row[UNPRICED_TOKENS]
        if row[HOUR] is not None and row[WEEKDAY] is not None:
            heat[row[WEEKDAY]][row[HOUR]] += row[MESSAGES]
        if row[CALLS]:
            m = models.get(row[MODEL] or "")
            if m is None:
                m = models[row[MODEL] or ""] = {"model": row[MODEL] or "(no model)", "calls": 0, "tokens": 0,
                                               "cost": 0.0, "priced_calls": 0, "priced_tokens": 0,
                                               "unpriced_calls": 0, "unpriced_tokens": 0, "by_agent": {},
                                               "unpriced_by_agent": {}}
            m["calls"] += row[CALLS]
            m["tokens"] += row[TOKENS]
            m["cost"] += row[COST]
            m["priced_calls"] += row[CALLS] - row[UNPRICED]
            m["priced_tokens"] += row[TOKENS] - row[UNPRICED_TOKENS]
            m["unpriced_calls"] += row[UNPRICED]
            m["unpriced_tokens"] += row[UNPRICED_TOKENS]
            if row[CALLS] - row[UNPRICED]:
                m["by_agent"][key] = m["by_agent"].get(key, 0.0) + row[COST]
            if row[UNPRICED]:
                m["unpriced_by_agent"][key] = m["unpriced_by_agent"].get(key, 0) + row[UNPRICED]
    colors = page_colors(base, per_agent)
    agents_info = base["agents"]

    def label(key) -> str:
        info = agents_info.get(key)
        return info["label"] if info else agent_label(key[0], key[1], True)

    agent_rows = []
    for key, a in per_agent.items():
        agent_rows.append({**a, "label": label(key), "server": key[0], "agent": key[1], "color": colors[key],
                           "days": len(a["days"]), "sources": sorted(a["sources"]),
                           "rank": agents_info.get(key, {}).get("rank", 1 << 30)})
    agent_rows.sort(key=lambda t: (-t["messages"], t["rank"]))
    model_rows = sorted(models.values(), key=lambda m: (-m["cost"], -m["calls"], m["model"]))
    for m in model_rows:
        m["by_agent"] = _ranked_parts(m["by_agent"], agents_info)
        m["unpriced_by_agent"] = _ranked_parts(m["unpriced_by_agent"], agents_info)
    source_rows = sorted(sources.values(), key=lambda s: (-s["messages"], s["source"] or ""))
    for s in source_rows:
        s["agents"] = len(s["agents"])
    return {
        "days": day_list,
        "start": day_list[0] if day_list else None,
        "latest": latest,
        "agents": agent_rows,
        "colors": colors,
        "labels": {key: label(key) for key in per_agent},
        "models": model_rows,
        "sources": source_rows,
        "heat": heat,
        "unpriced_days": unpriced_days,
        "unpriced_day_tokens": unpriced_day_tokens,
        "total": total,
        "left_out": {**left_out, "until": (date.fromisoformat(day_list[0]) - timedelta(days=1)).isoformat()
                     if day_list and left_out["messages"] else None},
    }


def _ranked_parts(values: dict, agents_info: dict) -> list[tuple]:
    return sorted(values.items(), key=lambda kv: (-kv[1], agents_info.get(kv[0], {}).get("rank", 1 << 30)))


def page_colors(base: dict, keys) -> dict:
    """Each agent's colour on a page: its own (by its first day in the snapshot); past the palette's
    20 agents two could share one, so on a page a later agent then takes the first colour free."""
    agents = base["agents"]
    ordered = sorted(keys, key=lambda k: agents.get(k, {}).get("rank", 1 << 30))
    used: set = set()
    out = {}
    for key in ordered:
        color = agents[key]["color"] if key in agents else PALETTE[len(out) % len(PALETTE)]
        if color in used:
            color = next((c for c in PALETTE if c not in used), color)
        used.add(color)
        out[key] = color
    return out


def series(fig: dict, field: str) -> list[tuple[str, list, str, tuple | None]]:
    """(label, values per day, colour, agent key) per agent, biggest first; past ``MAX_SERIES``
    the smallest are one grey series."""
    ranked = [a for a in sorted(fig["agents"], key=lambda a: (-sum(a[field]), a["rank"])) if any(a[field])]
    out = [(a["label"], a[field], a["color"], a["key"]) for a in ranked]
    if len(out) > MAX_SERIES:
        head, tail = out[: MAX_SERIES - 1], out[MAX_SERIES - 1:]
        other = [sum(v[i] for _, v, _, _ in tail) for i in range(len(fig["days"]))]
        out = head + [(f"{len(tail)} other agents", other, OTHER_COLOR, None)]
    return out


def page(cube: dict, server: str | None = None, source: str | None = None, agent: str | None = None,
         days: int | None = DEFAULT_DAYS) -> dict:
    """One page's figures with its charts and tables ready to show (markup, every value escaped)."""
    fig = figures(cube, server, source, agent, days)
    labels, colors = fig["labels"], fig["colors"]
    unit = bar_unit(len(fig["days"]))
    starts, names, groups = buckets(fig["days"], unit)
    message_series = [(n, regroup(v, groups), c, k) for n, v, c, k in series(fig, "by_day")]
    cost_series = [(n, regroup(v, groups), c, k) for n, v, c, k in series(fig, "cost_by_day")]
    fig["unit"] = unit
    fig["messages_chart"] = bar_chart(starts, message_series, fmt_count, f"Messages per {unit} per agent",
                                      "messages", names=names, unit_of_bars=unit)
    fig["cost_chart"] = bar_chart(
        starts, cost_series, fmt_cost, f"Cost per {unit} per agent (USD, each model call once)",
        "priced model calls", unpriced=(regroup(fig["unpriced_days"], groups),
                                        regroup(fig["unpriced_day_tokens"], groups)),
        names=names, unit_of_bars=unit)
    fig["legend"] = [(name, color) for name, _, color, _ in message_series]
    fig["cost_legend"] = [(name, color) for name, _, color, _ in cost_series]
    fig["heatmap"] = heatmap(fig["heat"], cube["timezone"])
    priced = [m for m in fig["models"] if m["priced_calls"]]
    top = max((m["cost"] for m in priced), default=0)
    total_cost = sum(m["cost"] for m in priced)
    fig["priced_models"] = [
        {**m, "share": (m["cost"] / total_cost * 100) if total_cost else None,
         "cost_label": money(m["cost"]),
         "bar": part_bar(m["by_agent"], top, labels, colors, fmt_cost)}
        for m in priced]
    unpriced = sorted((m for m in fig["models"] if m["unpriced_calls"]),
                      key=lambda m: (-m["unpriced_calls"], m["model"]))
    top_calls = max((m["unpriced_calls"] for m in unpriced), default=0)
    fig["unpriced_models"] = [
        {**m, "bar": part_bar(m["unpriced_by_agent"], top_calls, labels, colors, fmt_unpriced_calls)}
        for m in unpriced]
    for t in fig["agents"] + fig["sources"] + [fig["total"]]:
        t["cost_label"] = cost_label(t)
    return fig


def bar_unit(n_days: int) -> str:
    """What a bar stands for in a range of ``n_days`` days: a day, a week (from WEEKLY_FROM_DAYS) or a
    month (from MONTHLY_FROM_DAYS)."""
    return "month" if n_days >= MONTHLY_FROM_DAYS else "week" if n_days >= WEEKLY_FROM_DAYS else "day"


def buckets(days: list[str], unit: str) -> tuple[list[str], list[str], list[int]]:
    """The bars of a range: their first days, their names (the day; "week of" its Monday; the month),
    and for each day of the range the index of its bar. A week starts on a Monday, a month on its
    first day; the first bar starts at the range's start (a part of its week or month)."""
    starts: list[str] = []
    names: list[str] = []
    groups: list[int] = []
    last_key = None
    for d in days:
        if unit == "day":
            key = d
        elif unit == "week":
            parsed = date.fromisoformat(d)
            key = (parsed - timedelta(days=parsed.weekday())).isoformat()
        else:
            key = d[:7]
        if key != last_key:
            starts.append(d)
            names.append(d if unit == "day" else f"week of {key}" if unit == "week" else key)
            last_key = key
        groups.append(len(starts) - 1)
    return starts, names, groups


def regroup(values: list, groups: list[int]) -> list:
    """Per-day values summed per bar (``groups``: each day's bar)."""
    if not groups or groups[-1] == len(groups) - 1:
        return list(values)
    out = [type(values[0])() if values else 0] * (groups[-1] + 1)
    for v, g in zip(values, groups):
        out[g] += v
    return out


def cost_label(t: dict) -> str:
    """The cost of priced calls; where every call is unpriced, "unpriced" (not $0); no call: a dash."""
    return amounts.cost_label(t["cost"], t["calls"] - t["unpriced_calls"], t["unpriced_calls"], 4, cents_from=1)


# -- numbers ------------------------------------------------------------------------------------------

def nice_step(raw: float, integer: bool = False) -> float:
    """The smallest of 1, 2, 5 x 10^n at least ``raw`` (at least 1 for counts)."""
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    exp = 10.0 ** math.floor(math.log10(raw))
    for f in (1, 2, 5, 10):
        step = f * exp
        if step >= raw * (1 - 1e-9):
            break
    if integer:
        step = max(1.0, round(step))
    return step


def ticks(top: float, integer: bool = False, intervals: int = 5) -> list[float]:
    """Axis ticks 0, s, 2s, ... up to the first at or above ``top``: at most ``intervals`` steps of a
    round step (1, 2 or 5 x 10^n)."""
    if top <= 0:
        return [0.0, 1.0]
    step = nice_step(top / intervals, integer)
    count = max(1, math.ceil(top / step - 1e-9))
    return [round(k * step, 12) for k in range(count + 1)]


def _decimals(step: float) -> int:
    return max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0


def fmt_count(value: float, exact: bool = False, step: float | None = None) -> str:
    return f"{value:,.0f}"


def fmt_cost(value: float, exact: bool = False, step: float | None = None) -> str:
    """Money: an axis label with the decimals its step needs (at least two below $1, none from $1), or
    an exact value (4 decimals)."""
    if exact:
        return amounts.money(value, 4)
    return amounts.money(value, max(2, _decimals(step)) if step is not None and step < 1 else 0)


def fmt_unpriced_calls(value: float, exact: bool = False, step: float | None = None) -> str:
    return f"{value:,.0f} unpriced call{'' if value == 1 else 's'}"


def money(value: float) -> str:
    """A total: cents (4 decimals under a dollar)."""
    return amounts.money(value, 4, cents_from=1)


# -- charts -------------------------------------------------------------------------------------------

def _x_ticks(days: list[str]) -> list[tuple[int, str]]:
    """Round dates to label: every day (up to 16), Mondays (up to 120 days), else the first of
    every 1, 2, 3, 6 or 12 months."""
    n = len(days)
    if n <= 16:
        return [(i, d[5:]) for i, d in enumerate(days)]
    parsed = [date.fromisoformat(d) for d in days]
    if n <= 120:
        return [(i, d.isoformat()[5:]) for i, d in enumerate(parsed) if d.weekday() == 0]
    months = n / 30.4
    every = next((m for m in (1, 2, 3, 6, 12) if months / m <= 13), 12 * math.ceil(months / 156))
    return [(i, d.isoformat()[:7]) for i, d in enumerate(parsed)
            if d.day == 1 and (d.year * 12 + d.month - 1) % every == 0]


def _bucket_ticks(starts: list[str]) -> list[tuple[int, str]]:
    """Labels of weekly or monthly bars: the bar where a month (every 1, 2, 3, 6 or 12 months: at most
    13 labels) begins, as YYYY-MM."""
    months = sorted({s[:7] for s in starts})
    every = next((m for m in (1, 2, 3, 6, 12) if len(months) / m <= 13), 12 * math.ceil(len(months) / 156))
    out, seen = [], set()
    for i, s in enumerate(starts):
        month = s[:7]
        y, m = int(month[:4]), int(month[5:7])
        if month not in seen and (y * 12 + m - 1) % every == 0:
            out.append((i, month))
        seen.add(month)
    return out


def _svg_open(width: int, height: int, title: str, cls: str = "ab-chart") -> Markup:
    return Markup('<svg class="{}" role="img" aria-label="{}" viewBox="0 0 {} {}" width="100%" '
                  'preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">'
                  '<title>{}</title>').format(cls, title, width, height, title)


def bar_chart(days: list[str], ranked: list[tuple], fmt, title: str, what: str, unit: str = "",
              unpriced: tuple[list, list] | None = None, width: int = 960, height: int = 260,
              names: list[str] | None = None, unit_of_bars: str = "day") -> Markup:
    """A stacked bar chart per day (or week, or month: ``days`` are then the bars' first days, ``names``
    what the tooltips call them): one ``<g data-series>`` per series, filled with its colour; every
    bar segment has a tooltip. ``unpriced`` (calls and tokens per bar) adds a strip under the axis
    marking the bars with unpriced calls."""
    if not days or not ranked:
        return Markup('<p class="ab-dim ab-nodata">No {} in this range.</p>').format(what)
    names = names or days
    strip = 16 if unpriced and any(unpriced[0]) else 0
    left, right, top, bottom = 70, 12, 12, 34 + strip
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(v[i] for _, v, _, _ in ranked) for i in range(len(days))]
    integer = fmt is fmt_count
    y_ticks = ticks(max(totals), integer=integer)
    y_max = y_ticks[-1]
    step = y_ticks[1] - y_ticks[0]
    slot = plot_w / len(days)
    bar = min(56.0, max(1.0, slot * 0.8)) if slot >= 1.25 else slot  # a few days: bars, not walls
    parts = [_svg_open(width, height, title)]
    for value in y_ticks:
        y = top + plot_h - plot_h * value / y_max
        parts.append(Markup('<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="ab-grid"/>'
                            '<text x="{}" y="{:.1f}" class="ab-axis" text-anchor="end">{}</text>').format(
            left, width - right, y, y, left - 6, y + 4, fmt(value, step=step)))
    base = [top + plot_h] * len(days)
    for name, values, color, _ in ranked:
        parts.append(Markup('<g class="ab-series" data-series="{}" fill="{}">').format(name, color))
        for i, v in enumerate(values):
            if v <= 0:
                continue
            h = plot_h * v / y_max
            base[i] -= h
            x = left + i * slot + (slot - bar) / 2
            parts.append(Markup('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}">'
                                '<title>{} · {}: {}{}</title></rect>').format(
                x, base[i], bar, max(h, 0.5), names[i], name, fmt(v, exact=True), unit))
        parts.append(Markup("</g>"))
    axis_y = top + plot_h
    parts.append(Markup('<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="ab-baseline"/>').format(
        left, width - right, axis_y, axis_y))
    for i, text in (_x_ticks(days) if unit_of_bars == "day" else _bucket_ticks(days)):
        x = left + i * slot + slot / 2
        parts.append(Markup('<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" class="ab-tick"/>'
                            '<text x="{:.1f}" y="{:.1f}" class="ab-axis" text-anchor="middle">{}</text>').format(
            x, x, axis_y, axis_y + 4, x, axis_y + 16, text))
    if strip:
        y = height - strip + 2
        parts.append(Markup('<text x="{}" y="{}" class="ab-axis ab-unpriced-label" text-anchor="end">'
                            'unpriced</text><g class="ab-unpriced-marks" fill="{}">').format(
            left - 6, y + 9, UNPRICED_COLOR))
        for i, calls in enumerate(unpriced[0]):
            if calls:
                x = left + i * slot + (slot - bar) / 2
                parts.append(Markup('<rect x="{:.1f}" y="{}" width="{:.1f}" height="10">'
                                    '<title>{}: {} unpriced call{} ({} tokens, no price: not $0)</title>'
                                    '</rect>').format(x, y, max(bar, 2.0), names[i], f"{calls:,}",
                                                      "" if calls == 1 else "s", f"{unpriced[1][i]:,}"))
        parts.append(Markup("</g>"))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def part_bar(parts: list[tuple], top: float, labels: dict, colors: dict, fmt, width: int = 240,
             height: int = 14) -> Markup:
    """A horizontal bar for one table row, split by agent (their colours), scaled to ``top``."""
    out = [Markup('<svg class="ab-rowbar" role="img" viewBox="0 0 {} {}" width="{}" height="{}" '
                  'xmlns="http://www.w3.org/2000/svg">').format(width, height, width, height)]
    x = 0.0
    for key, value in parts:
        w = width * value / top if top > 0 else 0
        if w <= 0:
            continue
        out.append(Markup('<g data-series="{}" fill="{}"><rect x="{:.1f}" y="1" width="{:.1f}" height="{}">'
                          '<title>{}: {}</title></rect></g>').format(
            labels.get(key, "?"), colors.get(key, OTHER_COLOR), x, max(w, 0.8), height - 2,
            labels.get(key, "?"), fmt(value, exact=True)))
        x += w
    out.append(Markup("</svg>"))
    return Markup("").join(out)


def heat_classes(peak: int) -> list[tuple[int, int]]:
    """The heatmap's classes above zero: (low, high) with a round width, at most five."""
    if peak <= 0:
        return []
    step = int(nice_step(peak / len(HEAT_RAMP), integer=True))
    count = max(1, math.ceil(peak / step))
    return [(k * step + 1, (k + 1) * step) for k in range(count)]


def heatmap(heat: list[list[int]], zone: str | None, width: int = 960) -> Markup:
    """Messages by weekday (rows, Monday first) and local hour (columns), with a legend of its
    classes; each cell says its count."""
    peak = max(max(r) for r in heat)
    if peak <= 0:
        return Markup('<p class="ab-dim ab-nodata">No messages in this range.</p>')
    classes = heat_classes(peak)
    # the classes spread over the whole ramp: the busiest hours are always the darkest
    ramp = [HEAT_RAMP[-1]] if len(classes) == 1 else [
        HEAT_RAMP[round(k * (len(HEAT_RAMP) - 1) / (len(classes) - 1))] for k in range(len(classes))]
    left, top, cell_w, cell_h = 44, 22, 34, 22
    grid_h = 7 * cell_h
    legend_y = top + grid_h + 16
    height = legend_y + 30
    title = f"Messages by weekday and hour ({zone or 'local'} time)"
    parts = [_svg_open(width, height, title, "ab-chart ab-heatmap")]
    for h in range(0, 24):
        x = left + h * cell_w + cell_w / 2
        parts.append(Markup('<text x="{:.1f}" y="{}" class="ab-axis" text-anchor="middle">{:02d}</text>').format(
            x, top - 7, h))
    for wd in range(7):
        y = top + wd * cell_h
        parts.append(Markup('<text x="{}" y="{:.1f}" class="ab-axis" text-anchor="end">{}</text>').format(
            left - 6, y + cell_h / 2 + 4, WEEKDAYS[wd]))
        for h in range(24):
            v = heat[wd][h]
            k = next((i for i, (lo, hi) in enumerate(classes) if v <= hi), len(classes) - 1) if v else -1
            color = ramp[k] if v else HEAT_EMPTY
            parts.append(Markup('<rect class="ab-heat" x="{}" y="{}" width="{}" height="{}" fill="{}" '
                                'data-weekday="{}" data-hour="{}" data-count="{}">'
                                '<title>{} {:02d}:00–{:02d}:00: {} message{}</title></rect>').format(
                left + h * cell_w + 1, y + 1, cell_w - 2, cell_h - 2, color, wd, h, v,
                WEEKDAYS[wd], h, (h + 1) % 24 or 24, f"{v:,}", "" if v == 1 else "s"))
    x = left
    swatches = [("0", HEAT_EMPTY)] + [
        (f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}", ramp[i]) for i, (lo, hi) in enumerate(classes)]
    parts.append(Markup('<g class="ab-heat-legend">'))
    for text, color in swatches:
        parts.append(Markup('<rect x="{}" y="{}" width="16" height="12" fill="{}" stroke="#d0d7de"/>'
                            '<text x="{}" y="{}" class="ab-axis">{}</text>').format(
            x, legend_y, color, x + 20, legend_y + 10, text))
        x += 28 + 7 * len(text)
    parts.append(Markup('<text x="{}" y="{}" class="ab-axis">messages per hour of the week, summed over the '
                        'range</text></g>').format(x + 8, legend_y + 10))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)
