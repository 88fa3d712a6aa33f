"""The explorer's canned-query pages and table pages, made for reading.

What the plugin's hooks (``__init__.py``, "the explorer") call on, kept here:

- ``register_functions(conn, shell_pairs)``: the SQL function ``agentbase_is_shell``, true
  for a tool that runs shell commands in that source kind (each kind's ``Source.shell_tools``,
  as the export wrote them into the snapshot's facts: exec/bash, Bash, shell/exec_command...,
  terminal, commandExecution), so ``exec_commands`` lists every kind's shell calls, as
  ``agentbase stats`` counts them.
- ``format_number(column, value)``: token counts, calls and durations with thousands
  separators, costs without float noise, in HTML only (JSON and CSV keep the numbers).
- ``QueryForm``: a canned query's form: agent, server and source as drop-downs filled
  from the snapshot's sessions (with an empty "any"), a date input for a day, a month
  input for a month, the effective day when the day was left empty, and a message for a
  malformed day or month (``bad_params``, also answered as a 400 to JSON and CSV by
  ``param_errors_wrapper``).
- ``TablePage``: internal columns hidden on HTML table pages unless the URL names its
  columns (``_col``), with a link to show them; whether a table's search index exists.
- ``order_tables``: the database page's tables, the populated ones first (by the snapshot's
  own counts), so the query box's default SQL reads one of them.
- ``CalendarFacet``: a facet whose values are dates, listed newest first.

Every value reaches the page through Jinja's autoescape or ``markupsafe``.
"""

from __future__ import annotations

import json
import re
from datetime import date
from decimal import Decimal, InvalidOperation
from urllib.parse import parse_qsl, urlencode

from datasette.database import QueryInterrupted
from datasette.facets import Facet
from datasette.utils import escape_sqlite, path_with_added_args, path_with_removed_args, tilde_decode
from markupsafe import Markup

# -- shell tools -------------------------------------------------------------------------------

def register_functions(conn, shell_pairs: frozenset) -> None:
    """``agentbase_is_shell(source, tool_name)``: 1 for a tool its kind runs shell commands with
    (``shell_pairs``: the snapshot's facts, see facts.py), else 0."""
    conn.create_function("agentbase_is_shell", 2, lambda source, tool: 1 if (source, tool) in shell_pairs else 0,
                         deterministic=True)


# -- numbers -------------------------------------------------------------------------------------

# Counts worth thousands separators; ids, exit codes, line numbers and years are left alone.
COUNT_COLUMNS = frozenset({
    "calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens",
    "cache_write_5m_tokens", "cache_write_1h_tokens", "unpriced_calls", "duration_ms", "message_count",
    "tool_call_count", "session_errors", "runs", "size", "file_size", "bad_lines", "pending_lines",
    "parsed_lines", "entries_read", "parsed_offset", "secrets_redacted", "count", "days",
})
COST_COLUMNS = frozenset({"cost_usd"})


def money(value: float) -> str:
    """A cost as a person reads it: ten significant digits at most (no float noise such as
    0.0016989449999999999), thousands separators, never an exponent."""
    try:
        exact = Decimal(f"{value:.10g}")
    except (InvalidOperation, ValueError):
        return str(value)
    text = f"{exact:,f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def format_number(column: str, value) -> Markup | None:
    """HTML for a number in a column of counts or costs, else None (Datasette's own)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if column in COST_COLUMNS:
        return Markup("{}").format(money(float(value)))
    if column in COUNT_COLUMNS and isinstance(value, int):
        return Markup("{}").format(f"{value:,}")
    return None


def long_text(value: str, limit: int | None) -> Markup | None:
    """A long plain text in a table page's cell (a tool's output, a preview of many lines) in a box that
    scrolls, so that a row stays a line of the listing; cut at ``limit`` characters as Datasette cuts
    cells. Short text: None (Datasette's own)."""
    if len(value) <= 300 and value.count("\n") <= 6:
        return None
    if limit and len(value) > limit:
        value = value[:limit] + "\u2026"
    return Markup('<div class="ab-clip">{}</div>').format(value)


# -- canned-query parameters -------------------------------------------------------------------

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_MONTH = re.compile(r"\d{4}-\d{2}")
_YEAR = re.compile(r"\d{4}")

# The queries whose `day` may also be a month (YYYY-MM).
DAY_OR_MONTH = frozenset({"daily_cost"})


def _is_day(value: str) -> bool:
    if not _DAY.fullmatch(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _is_month(value: str) -> bool:
    return bool(_MONTH.fullmatch(value)) and 1 <= int(value[5:]) <= 12


def bad_params(query: str, args: dict[str, str]) -> str | None:
    """What is wrong with a canned query's day or month, in one sentence; None when both are
    fine or empty."""
    day = (args.get("day") or "").strip()
    if day and not _is_day(day) and not (query in DAY_OR_MONTH and _is_month(day)):
        wanted = "a day, YYYY-MM-DD, or a month, YYYY-MM" if query in DAY_OR_MONTH else "a day: YYYY-MM-DD"
        return f"day {day!r} is not {wanted} (for example 2026-04-05)."
    month = (args.get("month") or "").strip()
    if month and not _is_month(month) and not _YEAR.fullmatch(month):
        return f"month {month!r} is not a month: YYYY-MM (for example 2026-04), or a year: YYYY."
    return None


# What the latest day of each of metadata.yml's queries is the latest day with, when its day is left
# empty (a kind's queries say it in the snapshot's facts: latest_day_of).
LATEST_DAY_OF = {
    "exec_commands": "a shell command",
    "thinking": "thinking",
    "agent_day": "a message",
    "failed_tools": "a failure",
}
CHOICES = ("agent", "server", "source")  # drop-downs, filled from the snapshot's sessions
CHOICES_SQL = ("SELECT 'agent', agent_id FROM (SELECT DISTINCT agent_id FROM sessions WHERE agent_id IS NOT NULL) "
               "UNION ALL SELECT 'server', server FROM (SELECT DISTINCT server FROM sessions WHERE server IS NOT NULL) "
               "UNION ALL SELECT 'source', source FROM (SELECT DISTINCT source FROM sessions WHERE source IS NOT NULL)")
HINTS = {
    "agent": "any: every agent",
    "server": "any: every server",
    "source": "any: every kind",
    "limit": "rows a page (default 200, at most 1,000)",
}


async def load_choices(db) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {name: [] for name in CHOICES}
    try:
        rows = (await db.execute(CHOICES_SQL)).rows
    except Exception:  # a database without sessions: plain text inputs
        return {}
    for name, value in rows:
        out[name].append(str(value))
    return {name: sorted(values, key=str.lower) for name, values in out.items()}


def _get(row, key):
    try:
        return row[key]
    except (KeyError, IndexError, TypeError):
        return None


class Field:
    def __init__(self, name: str, kind: str, value: str, hint: str = "", options=None, invalid: bool = False):
        self.name, self.kind, self.value, self.hint, self.invalid = name, kind, value, hint, invalid
        self.options = options or []  # [(value, label, selected)]


class QueryForm:
    """The fields of a canned query's form, the message for a malformed day or month, and
    which day (or days, or month) an empty form showed."""

    def __init__(self, query: str, values: dict, columns, rows, choices: dict[str, list[str]],
                 latest_day_of: dict | None = None):
        self.query = query
        self.latest_day_of = {**LATEST_DAY_OF, **(latest_day_of or {})}
        values = {k: "" if v is None else str(v) for k, v in (values or {}).items()}
        self.error = bad_params(query, values)
        self.fields: list[Field] = []
        for name, value in values.items():
            if name == "after":
                continue  # where a page starts: a new choice starts at the first page
            self.fields.append(self._field(name, value, choices))
        self.effective = None if self.error else self._effective(values, list(columns or []), list(rows or []))

    def _field(self, name: str, value: str, choices: dict[str, list[str]]) -> Field:
        if name in CHOICES and name in choices:
            options = [("", "any", value == "")]
            options += [(v, v, v == value) for v in choices[name]]
            if value and value not in choices[name]:
                options.append((value, f"{value} (not in this snapshot)", True))
            return Field(name, "select", value, HINTS[name], options)
        if name == "day":
            malformed = bool(self.error and self.error.startswith("day "))
            if self.query in DAY_OR_MONTH and _is_month(value):
                return Field(name, "month", value, "a month: every day of it")
            hint = "empty: the 7 days up to the latest" if self.query in DAY_OR_MONTH else (
                "empty: the latest day" if self.query in self.latest_day_of else "empty: any day")
            # a malformed value stays as typed (a date input would drop it), marked
            return Field(name, "text" if malformed else "date", value, hint, invalid=malformed)
        if name == "month":
            malformed = bool(self.error and self.error.startswith("month "))
            hint = "every day of a month" if self.query in DAY_OR_MONTH else "empty: the latest month"
            return Field(name, "text" if malformed else "month", value, hint, invalid=malformed)
        if name == "limit":
            return Field(name, "number", value, HINTS["limit"])
        if name == "q":
            return Field(name, "search", value, "words, \"a phrase\", prefix*")
        return Field(name, "text", value, "empty: any")

    def _effective(self, values: dict, columns: list, rows: list) -> str | None:
        """What an empty day (or month) resolved to, from the rows shown."""
        data = [r for r in rows if not _get(r, "is_total")]
        if "day" in values and not values["day"] and not values.get("month"):
            if self.query in DAY_OR_MONTH:
                days = sorted({_get(r, "day") for r in data if _get(r, "day")})
                if not days:
                    return "The day was empty: the 7 days up to the latest day with usage; none has any here."
                return (f"The day was empty: showing the 7 days up to {days[-1]}, the latest day with usage "
                        f"(from {_minus_days(days[-1], 6)}).")
            if self.query in self.latest_day_of and "time" in columns:
                what = self.latest_day_of[self.query]
                if not data:
                    return f"The day was empty: the latest day with {what}; there is none for this choice."
                first = str(_get(data[0], "time") or "")[:10]
                if first:
                    return f"The day was empty: showing {first}, the latest day with {what}."
        if "month" in values and not values["month"] and "month" in columns and (
                "day" not in values or not values["day"]):
            months = sorted({_get(r, "month") for r in data if _get(r, "month")})
            if months:
                return f"The month was empty: showing {months[-1]}, the latest month with usage."
            return "The month was empty: the latest month with usage; there is none for this choice."
        return None


def _minus_days(day: str, n: int) -> str:
    try:
        return date.fromordinal(date.fromisoformat(day).toordinal() - n).isoformat()
    except ValueError:
        return day


# -- answers to JSON and CSV with a malformed day or month ----------------------------------------

_DATA_PATH = re.compile(r"/(?P<db>[^/]+)/(?P<name>[^/]+?)\.(?P<ext>json|csv)")


def param_errors_wrapper(datasette, is_snapshot, query_names):
    """An ASGI wrapper: a canned query's JSON or CSV asked for with a malformed day or month
    gets a 400 naming the parameter, instead of an empty result that looks like "nothing
    happened". Datasette answers first (logins, permissions, unknown names keep their own
    answers): only a 200 is replaced. ``is_snapshot(db)`` and ``query_names(db)`` are asked
    when the answer starts, when the database's connection has been opened."""

    def wrap(app):
        async def inner(scope, receive, send):
            problem = _problem(datasette, scope) if scope.get("type") == "http" else None
            if problem is None:
                await app(scope, receive, send)
                return
            db, name, ext, message = problem
            replaced = False

            async def guarded_send(event):
                nonlocal replaced
                if event["type"] == "http.response.start":
                    if event.get("status") == 200 and is_snapshot(db) and name in query_names(db):
                        replaced = True
                        if ext == "json":
                            body = json.dumps({"ok": False, "error": message, "status": 400,
                                               "title": "Invalid parameter"}).encode()
                            ctype = b"application/json; charset=utf-8"
                        else:
                            body = f"error: {message}\n".encode()
                            ctype = b"text/plain; charset=utf-8"
                        await send({"type": "http.response.start", "status": 400,
                                    "headers": [(b"content-type", ctype),
                                                (b"content-length", str(len(body)).encode())]})
                        await send({"type": "http.response.body", "body": body})
                        return
                elif replaced:
                    return  # the body of the answer that was replaced
                await send(event)

            await app(scope, receive, guarded_send)

        return inner

    return wrap


def _problem(datasette, scope):
    path = scope.get("path") or ""
    base = datasette.setting("base_url") or "/"
    if base != "/" and path.startswith(base.rstrip("/")):
        path = path[len(base.rstrip("/")):]
    args = dict(parse_qsl((scope.get("query_string") or b"").decode("latin-1"), keep_blank_values=True))
    m = _DATA_PATH.fullmatch(path)
    if m:
        db, name, ext = tilde_decode(m["db"]), tilde_decode(m["name"]), m["ext"]
    else:
        parts = path.strip("/").split("/")
        if len(parts) != 2 or args.get("_format") not in ("json", "csv"):
            return None
        db, name, ext = tilde_decode(parts[0]), tilde_decode(parts[1]), args["_format"]
    if "day" not in args and "month" not in args:
        return None
    message = bad_params(name, args)
    return (db, name, ext, message) if message else None


# -- table pages ---------------------------------------------------------------------------------

class TablePage:
    """What a snapshot table's HTML page leaves out: the table's ``hidden_columns`` (plugin
    setting), unless the URL names its columns with ``_col`` (which the "show" link does)."""

    def __init__(self, request, table_columns: list[str], pks: list[str], hidden: list[str], search_ok: bool):
        self.search_ok = search_ok
        explicit = "_col" in request.args
        present = [c for c in hidden if c in table_columns and c not in pks]
        self.hidden = [] if explicit else present
        named = set(request.args.getlist("_col"))
        self.showing_all = explicit and bool(present) and all(c in named for c in present)
        pairs = [(k, v) for k, v in parse_qsl(request.query_string, keep_blank_values=True)
                 if k not in ("_col", "_nocol", "_next")]
        path = request.path
        everything = pairs + [("_col", c) for c in table_columns if c not in pks]
        self.show_all_href = path + "?" + urlencode(everything)
        self.default_href = path + ("?" + urlencode(pairs) if pairs else "")

    def columns(self, display_columns):
        return [c for c in display_columns if c["name"] not in self.hidden]

    def rows(self, display_rows):
        if not self.hidden:
            return display_rows
        return [[cell for cell in row if cell["column"] not in self.hidden] for row in display_rows]


# -- the database page ---------------------------------------------------------------------------

def order_tables(tables: list[dict], counts: dict) -> list[dict]:
    """The database page's tables (Datasette's dicts), the populated ones first, in the snapshot's
    copy order (the marker's ``counts``, which the export and its in-place update keep: no
    COUNT(*) over a million rows), then those it does not count, by name; each with its count from
    the marker where Datasette's own (cut off after a few milliseconds) is unknown. Hidden tables
    stay last. The query box's default SQL selects from the first."""
    order = {name: i for i, name in enumerate(counts)}

    def count(t: dict):
        known = counts.get(t["name"])
        return known if isinstance(known, int) and not isinstance(known, bool) else t.get("count")

    out = [dict(t, count=count(t)) for t in tables]
    # populated: a count above 0, or unknown (Datasette gave up counting: a large table)
    return sorted(out, key=lambda t: (bool(t.get("hidden")), t["count"] == 0, t["name"] not in order,
                                      order.get(t["name"], 0), t["name"]))


# -- the day facet -------------------------------------------------------------------------------

class CalendarFacet(Facet):
    """``{calendar: day}`` in a table's facets: the values of a date column (YYYY-MM-DD) with
    their counts, newest first, instead of the commonest first."""

    type = "calendar"

    async def suggest(self):
        return []

    async def facet_results(self):
        results, timed_out = [], []
        pairs = self.get_querystring_pairs()
        size = self.get_facet_size()
        for source_and_config in self.get_configs():
            config = source_and_config["config"]
            column = config.get("column") or config["simple"]
            col = escape_sqlite(column)
            sql = (f"select {col} as value, count(*) as count from ({self.sql}) "
                   f"where {col} is not null group by {col} order by {col} desc limit {size + 1}")
            try:
                found = await self.ds.execute(self.database, sql, self.params, truncate=False,
                                              custom_time_limit=self.ds.setting("facet_time_limit_ms"))
            except QueryInterrupted:
                timed_out.append(column)
                continue
            values = []
            key = f"{column}__exact" if column.startswith("_") else column
            for row in found.rows[:size]:
                selected = (key, str(row["value"])) in pairs
                if selected:
                    toggle = path_with_removed_args(self.request, {key: str(row["value"])})
                else:
                    toggle = path_with_added_args(self.request, {key: row["value"]})
                values.append({"value": row["value"], "label": row["value"], "count": row["count"],
                               "toggle_url": self.ds.absolute_url(self.request, self.ds.urls.path(toggle)),
                               "selected": selected})
            results.append({
                "name": column, "type": self.type, "hideable": source_and_config["source"] != "metadata",
                "toggle_url": self.ds.urls.path(path_with_removed_args(self.request, {f"_facet_{self.type}": column})),
                "results": values, "truncated": len(found.rows) > size,
            })
        return results, timed_out
