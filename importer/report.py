"""Usage reports read back from the archive (``agentbase report``): tokens and
cost per local day, week (from Monday), month, session or 5-hour billing block,
each with a totals row and, with ``breakdown``, a line per model.

The figures are stats' (stats.py): every message counted once
(``usage_counted = 1``), the five token sums and the cost; calls with tokens
and no price are counted as ``unpriced_calls``, never as $0. Days are local
days in the report's time zone: usage is summed per UTC hour in SQL, and each
hour goes to its local day (every zone's offset is a whole number of quarter
hours, so a UTC hour never straddles two local days except in zones offset by
a fraction of an hour: those are summed per UTC minute instead).
"""

from __future__ import annotations

import shutil
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone as dt_timezone

from .amounts import compact, marked_cost
from .store import Store, StoreError
from .terminal import clean
from .titles import first_prompts, session_title

KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
COLUMNS = {"input": "input_tokens", "output": "output_tokens", "cacheRead": "cache_read_tokens",
           "cacheWrite": "cache_write_tokens", "totalTokens": "total_tokens"}
# What a report sums per group (messages m), in the order of Figures' fields: the five token sums, the cost,
# the calls without a price, the calls (with a cost source) and those priced from the price table.
FIGURES_SQL = (", ".join(f"SUM(COALESCE(m.{c}, 0))" for c in COLUMNS.values()) + ", SUM(COALESCE(m.cost_usd, 0)), "
               "SUM(CASE WHEN m.cost_source = 'unpriced' THEN 1 ELSE 0 END), "
               "SUM(CASE WHEN m.cost_source IS NOT NULL THEN 1 ELSE 0 END), "
               "SUM(CASE WHEN m.cost_source = 'computed' THEN 1 ELSE 0 END)")
KINDS = ("daily", "weekly", "monthly", "session", "blocks")
BLOCK_HOURS = 5  # a billing window: it starts at the hour of its first call and lasts five hours


@dataclass
class Figures:
    """A group's figures, in FIGURES_SQL's order: the five token sums (``tokens``, by KEYS), the
    cost, the calls without a price, the calls (with a cost source) and those priced from the price
    table."""

    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KEYS, 0))
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    calls: int = 0
    computed_calls: int = 0  # priced from the price table

    def add(self, other: "Figures") -> None:
        for k in KEYS:
            self.tokens[k] += other.tokens[k]
        self.cost_usd += other.cost_usd
        self.unpriced_calls += other.unpriced_calls
        self.calls += other.calls
        self.computed_calls += other.computed_calls

    def as_dict(self) -> dict:
        return {**self.tokens, "cost_usd": round(self.cost_usd, 10), "unpriced_calls": self.unpriced_calls}

    @classmethod
    def of(cls, values) -> "Figures | None":
        """A group's FIGURES_SQL values; None when it has no usage at all (a user message's): not in a report."""
        if not any(values[:5]) and not values[5] and not values[6]:
            return None
        return cls(dict(zip(KEYS, (int(v or 0) for v in values[:5]))), float(values[5] or 0.0), int(values[6] or 0),
                   int(values[7] or 0), int(values[8] or 0))


@dataclass
class Row:
    key: str  # the day, the month, or the session's id (sessions.id as text)
    figures: Figures = field(default_factory=Figures)
    models: dict[str, Figures] = field(default_factory=dict)
    info: dict = field(default_factory=dict)  # a session's title, agent, server, source, last activity; a block's end

    def add(self, model: str | None, f: Figures) -> None:
        """A group's figures, into the row and its model's line."""
        self.figures.add(f)
        self.models.setdefault(model or "(no model)", Figures()).add(f)


def _day_bounds(value: str | None, what: str) -> str | None:
    """YYYY-MM-DD (or YYYYMMDD, as ccusage takes it) -> YYYY-MM-DD; a one-line error otherwise."""
    if value is None:
        return None
    v = value.strip()
    if len(v) == 8 and v.isdigit():
        v = f"{v[:4]}-{v[4:6]}-{v[6:]}"
    try:
        datetime.strptime(v, "%Y-%m-%d")
    except ValueError:
        raise StoreError(f"{what} {value!r} is not a day: use YYYY-MM-DD (or YYYYMMDD)") from None
    return v


def collect(store: Store, kind: str, zone, since: str | None = None, until: str | None = None,
            agent: str | None = None, server: str | None = None, source: str | None = None) -> list[Row]:
    """The report's rows, oldest first (sessions: by last activity)."""
    if kind not in KINDS:
        raise StoreError(f"unknown report {kind!r}: {', '.join(KINDS)}")
    check_filters(store, agent, server, source)
    since, until = _day_bounds(since, "--since"), _day_bounds(until, "--until")
    where, params = _where("m.usage_counted = 1", agent, server, source, since, until)
    # Local days need the UTC time to the hour; zones off by a fraction of an hour (and blocks) to the minute.
    cut = 13 if _whole_hours(zone) and kind != "blocks" else 16
    per_session = kind == "session"
    group = f"substr(m.timestamp, 1, {cut})" + (", m.session_id" if per_session else "")
    sql = (f"SELECT {group}, COALESCE(m.model, ''), {FIGURES_SQL} "
           f"FROM messages m WHERE {' AND '.join(where)} AND m.timestamp IS NOT NULL "
           f"GROUP BY {group}, COALESCE(m.model, '')")
    rows: dict[str, Row] = {}
    local = _LocalDay(zone)
    records = store.tuples(sql, params)
    if kind == "blocks":
        return _blocks(records, local, since, until, zone)
    for rec in records:
        stamp = rec[0]
        offset = 2 if per_session else 1
        model = rec[offset]
        values = rec[offset + 1:]
        day = local(stamp)
        if day is None or (since and day < since) or (until and day > until):
            continue
        f = Figures.of(values)
        if f is None:
            continue
        key = str(rec[1]) if per_session else (day[:7] if kind == "monthly" else
                                              _week_start(day) if kind == "weekly" else day)
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(key)
        row.add(model, f)
        if per_session:
            last = row.info.get("last_day")
            if last is None or day > last:
                row.info["last_day"] = day
    if per_session and rows:
        _session_info(store, rows)
        return sorted(rows.values(), key=lambda r: (r.info.get("last_day") or "", r.key))
    return [rows[k] for k in sorted(rows)]


def message_filters(agent: str | None, server: str | None, source: str | None) -> tuple[list[str], list]:
    """The SQL terms (on messages ``m``) and parameters of the agent, server and source asked for."""
    given = [(column, value) for column, value in (("m.agent_id", agent), ("m.server", server), ("m.source", source))
             if value is not None]
    return [f"{column} = ?" for column, _ in given], [value for _, value in given]


def _where(first: str, agent: str | None, server: str | None, source: str | None, since: str | None,
           until: str | None) -> tuple[list[str], list]:
    """``first``, the filters, and the local days' range with a margin of a day on each side in UTC (the
    exact local bounds are applied to each group read)."""
    where, params = message_filters(agent, server, source)
    where.insert(0, first)
    if since:
        where.append("m.timestamp >= ?")
        params.append((datetime.fromisoformat(since) - timedelta(days=1)).strftime("%Y-%m-%d"))
    if until:
        where.append("m.timestamp < ?")
        params.append((datetime.fromisoformat(until) + timedelta(days=2)).strftime("%Y-%m-%d"))
    return where, params


def check_filters(store: Store, agent: str | None, server: str | None, source: str | None) -> None:
    """A filter that names nothing the archive holds is an error that says what it holds (a typo
    would otherwise print an empty report)."""
    for column, value, what in (("agent_id", agent, "agent"), ("server", server, "server"),
                                ("source", source, "source")):
        if value is None or store.tuples(f"SELECT 1 FROM sessions WHERE {column} = ? LIMIT 1", (value,)):
            continue
        held = [v for (v,) in store.tuples(f"SELECT DISTINCT {column} FROM sessions ORDER BY 1") if v is not None]
        shown = ", ".join(clean(v) for v in held[:12]) + (f", ... ({len(held)} in all)" if len(held) > 12 else "")
        raise StoreError(f"no {what} {clean(value)!r} in the archive ({what}s: {shown or 'none'})")


def _week_start(day: str) -> str:
    """The Monday of a local day's week (weeks as ISO 8601 counts them)."""
    d = datetime.strptime(day, "%Y-%m-%d")
    return (d - timedelta(days=d.weekday())).strftime("%Y-%m-%d")


def _blocks(records, local, since, until, zone, now: datetime | None = None) -> list[Row]:
    """5-hour billing windows: a block starts at the UTC hour of the first call after the previous
    block ended and lasts five hours; the one that has not ended yet is active. Keys are the block's
    start as local time; ``info`` has its end and whether it is active."""
    per_minute: dict[str, list] = {}
    for stamp, model, *values in records:
        f = Figures.of(values)
        if f is not None:
            per_minute.setdefault(stamp, []).append((model, f))
    now = now or datetime.now(dt_timezone.utc)
    rows: list[Row] = []
    end = None
    for stamp in sorted(per_minute):
        try:
            at = datetime.fromisoformat(stamp.replace(" ", "T") + ":00").replace(tzinfo=dt_timezone.utc)
        except ValueError:
            continue
        day = local(stamp)
        if day is None or (since and day < since) or (until and day > until):
            continue
        if end is None or at >= end:
            start = at.replace(minute=0, second=0, microsecond=0)
            end = start + timedelta(hours=BLOCK_HOURS)
            rows.append(Row(start.astimezone(zone).strftime("%Y-%m-%d %H:%M"),
                            info={"start_utc": start.strftime("%Y-%m-%d %H:%M"),
                                  "end": end.astimezone(zone).strftime("%Y-%m-%d %H:%M"),
                                  "active": now < end}))
        row = rows[-1]
        row.info["last_call"] = at.astimezone(zone).strftime("%Y-%m-%d %H:%M")
        for model, f in per_minute[stamp]:
            row.add(model, f)
    return rows


def _session_info(store: Store, rows: dict[str, Row]) -> None:
    """Each session's uuid, agent, server, source and title (titles.py's rule; its uuid when it has no text)."""
    ids = [int(k) for k in rows]
    prompts = first_prompts(store, ids)
    for i in range(0, len(ids), 500):
        batch = ids[i:i + 500]
        marks = ", ".join("?" for _ in batch)
        for sid, uuid, agent, server, source, title, label, display_name in store.tuples(
                "SELECT id, session_uuid, agent_id, server, source, title, label, display_name FROM sessions "
                f"WHERE id IN ({marks})", batch):
            heading, _ = session_title(label, title, prompts.get(sid), display_name)
            rows[str(sid)].info.update({"session_uuid": uuid, "agent": agent, "server": server, "source": source,
                                        "title": heading or uuid, "label": session_label(heading, agent, uuid)})


def session_label(title: str | None, agent: str | None, uuid: str | None) -> str:
    """How a report names a session: its agent and its title by the one rule; with no title, its
    agent and the start of its id (never a bare id)."""
    who = agent or "?"
    return f"{who}: {title}" if title else f"{who}: (untitled {str(uuid or '')[:8]})"


def _whole_hours(zone) -> bool:
    now = datetime.now(dt_timezone.utc)
    for days in range(0, 366, 30):  # both sides of a daylight-saving change
        offset = (now + timedelta(days=days)).astimezone(zone).utcoffset() or timedelta(0)
        if offset.total_seconds() % 3600:
            return False
    return True


class _LocalDay:
    """UTC 'YYYY-MM-DD HH[:MM]' -> the local day it falls on (cached)."""

    def __init__(self, zone):
        self.zone = zone
        self.cache: dict[str, str | None] = {}

    def __call__(self, stamp: str) -> str | None:
        found = self.cache.get(stamp)
        if found is None and stamp not in self.cache:
            try:
                text = stamp + (":00" if len(stamp) == 13 else "") + ":00"
                dt = datetime.fromisoformat(text.replace(" ", "T")).replace(tzinfo=dt_timezone.utc)
                found = dt.astimezone(self.zone).strftime("%Y-%m-%d")
            except (ValueError, OverflowError):
                found = None
            self.cache[stamp] = found
        return found


def totals(rows: list[Row]) -> Figures:
    out = Figures()
    for row in rows:
        out.add(row.figures)
    return out


def ordered(rows: list[Row], order: str) -> list[Row]:
    """``asc``: oldest first (as collected); ``desc``: newest first."""
    if order not in ("asc", "desc"):
        raise StoreError(f"--order {order!r}: asc or desc")
    return list(reversed(rows)) if order == "desc" else rows


def as_json(kind: str, rows: list[Row], zone_name: str, price_date: str | None, breakdown: bool) -> dict:
    name = {"daily": "day", "weekly": "week", "monthly": "month", "session": "session_id", "blocks": "start"}[kind]
    out_rows = []
    for row in rows:
        d = {name: int(row.key) if kind == "session" else row.key, **row.figures.as_dict(),
             "models": sorted(row.models)}
        if kind == "session":
            d.update({k: row.info.get(k) for k in ("session_uuid", "title", "agent", "server", "source", "last_day")})
        if kind == "blocks":
            d.update({k: row.info.get(k) for k in ("end", "active", "last_call")})
        if breakdown:
            d["breakdown"] = [{"model": m, **f.as_dict()} for m, f in sorted(row.models.items())]
        out_rows.append(d)
    return {"report": kind, "timezone": zone_name, "price_table": price_date, "rows": out_rows,
            "totals": totals(rows).as_dict()}


# -- the table -----------------------------------------------------------------


def _width(text: str) -> int:
    """Columns a text takes in a terminal (Chinese, Japanese and Korean characters take two)."""
    if text.isascii():
        return len(text)
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


def _cut(text: str, width: int) -> str:
    if _width(text) <= width:
        return text
    out, used = [], 0
    for c in text:
        w = _width(c)
        if used + w > width - 1:
            break
        out.append(c)
        used += w
    return "".join(out) + "…"


def format_table(kind: str, rows: list[Row], zone_name: str, price_date: str | None, breakdown: bool,
                 width: int | None = None) -> str:
    """The report as text: fits ``width`` columns (the terminal's, at least 80)."""
    width = width or max(80, shutil.get_terminal_size((80, 24)).columns)
    label = {"daily": "Day", "weekly": "Week of", "monthly": "Month", "session": "Session",
             "blocks": "Block (5 h)"}[kind]
    wide = width >= 120
    number = (lambda n: f"{n:,}") if wide else compact
    head = [label, "Input", "Output", "Cache write", "Cache read", "Total", "Cost"]
    if wide:
        head.insert(1, "Models")
    lines: list[list[str]] = []

    def line(name: str, f: Figures, models: str = "") -> list[str]:
        t = f.tokens
        cells = [name, number(t["input"]), number(t["output"]), number(t["cacheWrite"]), number(t["cacheRead"]),
                 number(t["totalTokens"]), marked_cost(f.cost_usd, f.unpriced_calls)]
        if wide:
            cells.insert(1, models)
        return cells

    for row in rows:  # (titles, keys and models are transcript text: terminal.clean)
        name = clean(row.key)
        if kind == "session":
            name = f"{row.info.get('last_day', '')} {clean(row.info.get('label') or row.key)}"
        elif kind == "blocks":
            name = f"{row.key}-{row.info['end'][11:]}" + (" (active)" if row.info.get("active") else "")
        lines.append(line(name, row.figures, ", ".join(sorted(clean(m) for m in row.models))))
        if breakdown:
            for model, f in sorted(row.models.items()):
                lines.append(line("  └", f, clean(model)) if wide else line(f"  └ {clean(model)}", f))
    total = totals(rows)
    lines.append(line("Total", total, ""))
    widths = [len(h) for h in head]
    for cells in lines:
        for i, c in enumerate(cells):
            widths[i] = max(widths[i], _width(c))
    # The name column (and a wide table's models) give way to fit the width.
    fixed = sum(widths) + 2 * (len(widths) - 1)
    if fixed > width:
        squeeze = [1, 0] if wide else [0]
        for i in squeeze:
            over = sum(widths) + 2 * (len(widths) - 1) - width
            if over <= 0:
                break
            widths[i] = max(len(head[i]), widths[i] - over)

    def render(cells: list[str]) -> str:
        out = []
        for i, c in enumerate(cells):
            text = _cut(c, widths[i])
            pad = " " * (widths[i] - _width(text))
            first = i == 0 or (wide and i == 1)
            out.append(text + pad if first else pad + text)
        return "  ".join(out).rstrip()

    rule = "-" * min(width, sum(widths) + 2 * (len(widths) - 1))
    body = [render(head), rule] + [render(c) for c in lines[:-1]] + [rule, render(lines[-1])]
    notes = [f"Local days in {zone_name}. Each model call counted once."]
    if kind == "blocks":
        notes.append("Blocks: 5-hour billing windows from the hour of their first call; (active): not ended yet.")
    if total.unpriced_calls:
        notes.append(f"* / unpriced: {total.unpriced_calls:,} calls have tokens but no price: not in the cost "
                     "(never $0).")
    if price_date and total.computed_calls:
        notes.append(f"Costs the agents did not record are priced from the price table of {price_date}.")
    return "\n".join(body + [""] + notes)


# -- why a peer's figures may differ (--explain) --------------------------------


@dataclass
class Reason:
    reason: str  # copies, streamed, cache_breakdown, unpriced, recorded, computed, counted_elsewhere, subagents, days
    source: str | None  # the kind, or None for the whole report
    count: int
    text: str

    def as_dict(self) -> dict:
        return {"reason": self.reason, "source": self.source, "count": self.count, "text": self.text}


def explain(store: Store, zone, zone_name: str, price_date: str | None, since: str | None = None,
            until: str | None = None, agent: str | None = None, server: str | None = None,
            source: str | None = None) -> list[Reason]:
    """One line per reason another tool's figures for the same transcripts may differ from the report's,
    each with its count from the archive (the report's filters and local days applied); only counts > 0.
    Reads counts and ids only, never transcript text (Claude Code's merged lines: the ``_agentbase``
    record of raw_json, its lines' usage and requestId)."""
    check_filters(store, agent, server, source)
    since, until = _day_bounds(since, "--since"), _day_bounds(until, "--until")
    where, params = _where("m.timestamp IS NOT NULL", agent, server, source, since, until)
    cut = 13 if _whole_hours(zone) else 16
    local = _LocalDay(zone)

    def inside(stamp: str) -> bool:
        day = local(stamp)
        return day is not None and not (since and day < since) and not (until and day > until)

    def grouped(condition: str, extra: str = "") -> list[tuple]:
        """(stamp, kind, *extra, count) per UTC hour (or minute), inside the report's days."""
        group = f"substr(m.timestamp, 1, {cut}), COALESCE(m.source, '')" + (f", {extra}" if extra else "")
        sql = (f"SELECT {group}, COUNT(*) FROM messages m LEFT JOIN sessions s ON s.id = m.session_id "
               f"WHERE {' AND '.join(where + [condition])} GROUP BY {group}")
        return [r for r in store.tuples(sql, params) if inside(r[0])]

    def per_kind(records, at: int = -1) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in records:
            out[r[1]] = out.get(r[1], 0) + int(r[at])
        return out

    usage = "(m.cost_source IS NOT NULL OR COALESCE(m.total_tokens, 0) > 0)"
    counted = "m.usage_counted = 1 AND m.cost_source IS NOT NULL"
    reasons: list[Reason] = []
    for kind, n in sorted(per_kind(grouped(f"m.usage_counted = 0 AND {usage} AND s.counted_in_session_id IS NULL"))
                          .items()):
        reasons.append(Reason("copies", kind, n, f"{kind}: {n:,} copies of a model call already counted (a continued "
                              "session's or a sub-agent's copy of it) are counted once; a tool counting each copy "
                              "counts more"))
    streamed, breakdown = _streamed_lines(store, where, params, inside)
    for kind, (lines, calls, no_request, *extra) in sorted(streamed.items()):
        text = (f"{kind}: {lines:,} streamed lines of {calls:,} model calls repeat their call's usage and are "
                "counted once (each call's largest usage)")
        if no_request:
            text += (f"; {no_request:,} of them have no requestId, so a tool that tells copies apart by message id "
                     "and request id counts each (input/output/cache read "
                     f"{'/'.join(f'{n:,}' for n in extra)} tokens more)")
        reasons.append(Reason("streamed", kind, lines, text))
    for kind, (calls, tokens) in sorted(breakdown.items()):
        reasons.append(Reason("cache_breakdown", kind, calls, f"{kind}: {calls:,} calls write {tokens:,} more cache "
                              "tokens than their 5-minute/1-hour breakdown says: the total is counted; a tool that "
                              "sums the breakdown counts fewer"))
    for kind, n in sorted(per_kind(grouped("m.usage_counted = 1 AND m.cost_source = 'unpriced'")).items()):
        reasons.append(Reason("unpriced", kind, n, f"{kind}: {n:,} calls have tokens but no price: unpriced, not in "
                              "the cost (never $0); a tool with another price table may price them"))
    costs = grouped(f"{counted} AND m.cost_source IN ('recorded', 'computed')", "m.cost_source")
    for kind, n in sorted(per_kind([r for r in costs if r[2] == "recorded"]).items()):
        reasons.append(Reason("recorded", kind, n, f"{kind}: {n:,} calls' cost is the one the agent recorded, "
                              "not computed from a price table"))
    table = f"the price table of {price_date}" if price_date else "the price table"
    for kind, n in sorted(per_kind([r for r in costs if r[2] == "computed"]).items()):
        reasons.append(Reason("computed", kind, n, f"{kind}: {n:,} calls' cost is computed from {table} (the "
                              "agent recorded none); a tool with other prices computes another cost"))
    for reason, condition, what in (
            ("counted_elsewhere", "m.usage_counted = 0 AND s.counted_in_session_id IS NOT NULL",
             "sessions count their {calls:,} model calls in the provider's own archived transcript, once "
             "(not in these sessions)"),
            ("subagents", f"{counted} AND s.parent_session_uuid IS NOT NULL",
             "sub-agent sessions' {calls:,} model calls are included (a tool that leaves sub-agents out, or "
             "reports them apart, counts fewer)")):
        records = grouped(condition, "m.session_id")
        sessions: dict[str, set] = {}
        for r in records:
            sessions.setdefault(r[1], set()).add(r[2])
        for kind, calls in sorted(per_kind(records).items()):
            n = len(sessions[kind])
            reasons.append(Reason(reason, kind, n, f"{kind}: {n:,} " + what.format(calls=calls)))
    moved = sum(int(r[-1]) for r in grouped(counted) if (local(r[0]) or "") != r[0][:10])
    if moved:
        reasons.append(Reason("days", None, moved, f"{moved:,} model calls fall on another day in {zone_name} than "
                              "in UTC: days are local days in the zone given (--timezone)"))
    return reasons


def _streamed_lines(store: Store, where: list[str], params: list, inside) -> tuple[dict, dict]:
    """What raw_json says of Claude Code's calls (counts only, never text), per kind:

    - streamed lines: Claude Code writes one model call as several lines sharing message.id (one per
      content block, each with a copy of the usage); the reader merges them into one message and keeps
      the other lines in raw_json's ``_agentbase.lines``: (other lines carrying usage, calls with such
      lines, of those lines the ones whose call has no requestId);
    - cache breakdown: a call whose ``usage.cache_creation`` (5-minute and 1-hour writes) adds up to less
      than its ``cache_creation_input_tokens`` (some backends write both parts as 0): (calls, tokens more).
    """
    import json

    sql = (f"SELECT substr(m.timestamp, 1, 16), COALESCE(m.source, ''), m.cache_write_tokens, m.raw_json "
           f"FROM messages m WHERE {' AND '.join(where)} AND m.usage_counted = 1 AND m.role = 'assistant' "
           "AND (m.raw_json LIKE ? OR m.raw_json LIKE ?)")
    streamed: dict[str, list[int]] = {}
    breakdown: dict[str, list[int]] = {}
    for stamp, kind, written, raw in store.tuples(sql, [*params, '%"_agentbase"%', '%"cache_creation"%']):
        if not inside(stamp):
            continue
        try:
            obj = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
            extra = (obj.get("_agentbase") or {}).get("lines") or []
            usage = (obj.get("message") or {}).get("usage") or {}
        except (ValueError, AttributeError):
            continue
        parts = usage.get("cache_creation") if isinstance(usage, dict) else None
        if isinstance(parts, dict) and written:
            said = sum(v for v in (parts.get("ephemeral_5m_input_tokens"), parts.get("ephemeral_1h_input_tokens"))
                       if isinstance(v, int) and not isinstance(v, bool))
            if said < written:
                b = breakdown.setdefault(kind, [0, 0])
                b[0] += 1
                b[1] += int(written) - said
        lines = [x for x in extra if isinstance(x, dict) and isinstance(x.get("message"), dict)
                 and isinstance(x["message"].get("usage"), dict)]
        if not lines:
            continue
        figures = streamed.setdefault(kind, [0, 0, 0, 0, 0, 0])
        figures[0] += len(lines)
        figures[1] += 1
        if not isinstance(obj.get("requestId"), str) or not obj.get("requestId"):
            figures[2] += len(lines)
            for line in lines:
                for i, key in ((3, "input_tokens"), (4, "output_tokens"), (5, "cache_read_input_tokens")):
                    v = line["message"]["usage"].get(key)
                    figures[i] += v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0
    return ({k: tuple(v) for k, v in streamed.items()}, {k: (v[0], v[1]) for k, v in breakdown.items()})


def format_explain(reasons: list[Reason]) -> str:
    """The --explain lines under the table (clean: a kind's name is archive text)."""
    if not reasons:
        return "Why another tool may count otherwise: nothing in these figures (no copies, all priced alike)."
    return "\n".join(["Why another tool may count otherwise:"] + [f"- {clean(r.text)}" for r in reasons])
