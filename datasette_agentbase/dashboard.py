"""The dashboard: messages and cost per day per agent, drawn as SVG on the
server (no JavaScript, no CDN: it works offline), and totals per agent.

Cost counts each model call once (``usage_counted = 1``): the messages that
carry a model call's usage (a ``cost_source``: an assistant message, a Codex
tool call or reasoning item, an agent-server run); tokens without a cost are
unpriced, shown apart, never as $0.
"""

from __future__ import annotations

import math
import sqlite3

from markupsafe import Markup

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")
OTHER_COLOR = "#cccccc"
MAX_SERIES = len(PALETTE)

DAILY_SQL = """
SELECT day, agent_id,
       SUM(CASE WHEN usage_counted = 1 THEN 1 ELSE 0 END) AS messages,
       SUM(CASE WHEN cost_source IS NOT NULL AND usage_counted = 1 THEN COALESCE(cost_usd, 0) ELSE 0 END) AS cost,
       SUM(CASE WHEN cost_source IS NOT NULL AND usage_counted = 1 THEN COALESCE(total_tokens, 0) ELSE 0 END) AS tokens,
       SUM(CASE WHEN cost_source IS NOT NULL AND usage_counted = 1 AND COALESCE(cost_usd, 0) = 0
                THEN COALESCE(total_tokens, 0) ELSE 0 END) AS unpriced_tokens
FROM messages
WHERE day >= ? {server}  -- re-appended copies of a model call are not counted twice
GROUP BY day, agent_id
"""


def load(conn: sqlite3.Connection, server: str | None, days: int | None) -> dict:
    """Per (day, agent) figures for the ``days`` days up to the latest day with data."""
    params: list = []
    first, latest = conn.execute("SELECT MIN(day), MAX(day) FROM messages").fetchone()
    start = first or ""
    if latest and days:
        start = max(start, conn.execute("SELECT date(?, ?)", (latest, f"-{days - 1} days")).fetchone()[0])
    params.append(start)
    server_sql = ""
    if server:
        server_sql = "AND server = ?"
        params.append(server)
    rows = conn.execute(DAILY_SQL.format(server=server_sql), params).fetchall()
    servers = [r[0] for r in conn.execute("SELECT DISTINCT server FROM sessions WHERE server IS NOT NULL ORDER BY 1")]
    return {"rows": rows, "latest": latest, "start": start, "servers": servers}


def _day_range(first: str, last: str) -> list[str]:
    from datetime import date, timedelta

    a, b = date.fromisoformat(first), date.fromisoformat(last)
    return [(a + timedelta(days=i)).isoformat() for i in range((b - a).days + 1)]


def series(data: dict, column: int) -> tuple[list[str], list[tuple[str, list[float]]]]:
    """Days (every day of the range, gaps included) and one value list per agent,
    biggest agents first; past the palette the rest is one 'other' series."""
    rows = data["rows"]
    if not rows:
        return [], []
    days = _day_range(data["start"] or min(r[0] for r in rows), data["latest"])
    index = {d: i for i, d in enumerate(days)}
    per_agent: dict[str, list[float]] = {}
    for r in rows:
        if r[0] not in index:
            continue
        values = per_agent.setdefault(r[1] or "?", [0.0] * len(days))
        values[index[r[0]]] += r[column] or 0
    ranked = sorted(per_agent.items(), key=lambda kv: (-sum(kv[1]), kv[0]))
    if len(ranked) > MAX_SERIES:
        head, tail = ranked[: MAX_SERIES - 1], ranked[MAX_SERIES - 1:]
        other = [sum(v[i] for _, v in tail) for i in range(len(days))]
        ranked = head + [(f"{len(tail)} other agents", other)]
    return days, ranked


def _nice(top: float) -> float:
    if top <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(top))
    for step in (1, 2, 2.5, 5, 10):
        if top <= step * exp:
            return step * exp
    return 10 * exp


def colors(names: list[str]) -> dict[str, str]:
    return {n: PALETTE[i] if i < MAX_SERIES else OTHER_COLOR for i, n in enumerate(names)}


def bar_chart(days: list[str], ranked: list[tuple[str, list[float]]], fmt, title: str,
              width: int = 960, height: int = 260) -> Markup:
    """A stacked bar chart as inline SVG; every bar segment has a tooltip."""
    if not days:
        return Markup('<p class="ab-dim">No data.</p>')
    left, right, top, bottom = 64, 10, 12, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(v[i] for _, v in ranked) for i in range(len(days))]
    y_max = _nice(max(totals))
    slot = plot_w / len(days)
    bar = max(1.0, slot * 0.8)
    palette = colors([n for n, _ in ranked])
    parts = [Markup('<svg class="ab-chart" role="img" viewBox="0 0 {} {}" width="100%" '
                    'preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">'
                    '<title>{}</title>').format(width, height, title)]
    for k in range(5):
        value = y_max * k / 4
        y = top + plot_h - plot_h * k / 4
        parts.append(Markup('<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="ab-grid"/>'
                            '<text x="{}" y="{:.1f}" class="ab-axis" text-anchor="end">{}</text>').format(
            left, width - right, y, y, left - 6, y + 4, fmt(value)))
    for i, day in enumerate(days):
        x = left + i * slot + (slot - bar) / 2
        base = top + plot_h
        for name, values in ranked:
            v = values[i]
            if v <= 0:
                continue
            h = plot_h * v / y_max
            base -= h
            parts.append(Markup('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}">'
                                '<title>{} · {}: {}</title></rect>').format(
                x, base, bar, h, palette[name], day, name, fmt(v, exact=True)))
    step = max(1, math.ceil(len(days) / 12))
    for i in range(0, len(days), step):
        x = left + i * slot + slot / 2
        parts.append(Markup('<text x="{:.1f}" y="{}" class="ab-axis" text-anchor="middle">{}</text>').format(
            x, height - bottom + 16, days[i][5:]))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def fmt_count(value: float, exact: bool = False) -> str:
    if exact or value < 1000:
        return f"{value:,.0f}"
    if value < 1_000_000:
        return f"{value / 1000:g}k"
    return f"{value / 1_000_000:g}M"


def fmt_cost(value: float, exact: bool = False) -> str:
    if exact:
        return f"${value:,.4f}" if value >= 0.0001 or value == 0 else f"${value:.2g}"
    if value == 0:
        return "$0"
    if value >= 100:
        return f"${value:,.0f}"
    return f"${value:,.2f}" if value >= 1 else f"${value:.3g}"


def agent_totals(data: dict) -> list[dict]:
    out: dict[str, dict] = {}
    for day, agent, messages, cost, tokens, unpriced in data["rows"]:
        t = out.setdefault(agent or "?", {"agent": agent or "?", "messages": 0, "cost": 0.0, "tokens": 0,
                                          "unpriced_tokens": 0, "days": 0, "last_day": day})
        t["messages"] += messages
        t["cost"] += cost or 0
        t["tokens"] += tokens or 0
        t["unpriced_tokens"] += unpriced or 0
        t["days"] += 1
        t["last_day"] = max(t["last_day"], day)
    return sorted(out.values(), key=lambda t: (-t["messages"], t["agent"]))
