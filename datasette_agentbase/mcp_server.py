"""The MCP server over a snapshot: an agent looks up what it (or another agent) did before.

Six read-only tools, built with the official MCP Python SDK (``mcp``: its ``MCPServer``), over the
snapshot only, so every answer is what the explorer shows: credentials redacted by the export
(docs/snapshot.md), never the archive:

- ``search_sessions``: the sessions whose messages (and title, first prompt) match, best first, each
  with its best matching messages as snippets (:func:`find_sessions`, kept in one function so that a
  better session search can replace it);
- ``search_messages``: matching messages, best first, with a snippet, paged;
- ``get_session``: a session's header and a range of its messages in line order, each with its text,
  tool calls and tool results, cut to a size budget, with a cursor to continue;
- ``list_sessions``: the session browser's list and filters (browser.py), newest first, paged;
- ``usage_report``: tokens and cost per day, month or session, as ``agentbase report --json``
  (importer/report.py, read from the snapshot's tables, in the snapshot's time zone);
- ``shell_commands``: the shell calls of a day (the latest by default) per agent, as the
  ``exec_commands`` canned query counts them (``agentbase_is_shell``), paged.

Two ways in: ``agentbase mcp [SNAPSHOT]`` (stdio, :func:`run_stdio`; the snapshot opened read-only,
``mode=ro``, a connection per call so that an export's update or rebuild is seen whole), and
``/-/agentbase/mcp`` on a running ``agentbase serve`` (streamable HTTP, :func:`http_view`: stateless,
JSON answers, the same permission check as every page, so behind the login when a password is set: the
login's cookie, or the password as ``Authorization: Bearer``, checked as the login page checks it; the
queries run in Datasette's own read connections).

A tool given bad arguments (a malformed day, an unknown session, a bad cursor) answers an MCP tool
error (``isError``) with a one-line message; nothing in the snapshot is ever written.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import Field

from importer.search import decoded_json, fts_query, message_search_text
from importer.session_search import QueryError, check_day
from importer.snippets import snippet

from . import facts
from .facts import SESSION_LIST, SESSION_LIST_FTS

NAME = "agentbase"
INSTRUCTIONS = (
    "AgentBase's archive of AI-agent sessions (OpenClaw, Claude Code, Codex, ...), read-only and with "
    "credentials redacted. Find a past session with search_sessions (words, identifiers, Chinese works), "
    "browse with list_sessions, read one with get_session (follow next_cursor for more), and ask about "
    "usage (usage_report) or shell commands run (shell_commands). Times are local to the snapshot's "
    "time zone (the timezone field)."
)
MAX_LIMIT = 100
DEFAULT_BUDGET = 20_000
MAX_BUDGET = 200_000
SEARCH_CANDIDATES = 2000  # best message matches (of those the filters select) a session search groups
SNIPPETS_PER_SESSION = 3
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_CURSOR = re.compile(r"(-?\d{1,19}):(\d{1,19})")
_UUID_ISH = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.:-]{3,199}")
SESSION_FIELDS = ("id", "session_uuid", "title", "agent_id", "server", "source", "project", "started_local",
                  "last_local", "message_count", "tool_call_count", "failed_tool_calls", "model_errors",
                  "total_tokens", "cost_usd", "unpriced_calls")


class BadArguments(Exception):
    """What the caller asked is not valid: the message says why (an MCP tool error)."""


# -- the snapshot's connection ------------------------------------------------------------------------

def open_snapshot(path: Path) -> sqlite3.Connection:
    """A read-only connection to the snapshot (``mode=ro``: never written, never created), with the
    SQL functions the queries use."""
    conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, check_same_thread=False)
    found = facts.read(conn) if facts.is_snapshot(conn) else facts.Facts()
    prepare(conn, found.shell_pairs)
    return conn


def prepare(conn: sqlite3.Connection, shell_pairs: frozenset) -> None:
    conn.create_function("agentbase_is_shell", 2, lambda source, tool: 1 if (source, tool) in shell_pairs else 0,
                         deterministic=True)


def _rows(conn: sqlite3.Connection, sql: str, params=()) -> list[dict]:
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _zone(conn: sqlite3.Connection) -> str:
    return facts.marker(conn, "timezone").get("timezone") or "UTC"


def _has(conn: sqlite3.Connection, *tables: str) -> bool:
    return facts.has_tables(conn, *tables)


# -- arguments --------------------------------------------------------------------------------------

def _day(value: str | None, name: str) -> str | None:
    try:
        return check_day(value, name)
    except QueryError as exc:
        raise BadArguments(str(exc)) from None


def _limit(value: int | None, default: int, most: int = MAX_LIMIT) -> int:
    if value is None:
        return default
    if not 1 <= value <= most:
        raise BadArguments(f"limit must be between 1 and {most}")
    return value


def _query(q: str | None) -> str:
    q = (q or "").strip()
    if not q:
        raise BadArguments("query is empty: give words, an identifier or a phrase to search for")
    if len(q) > 500:
        raise BadArguments("query is longer than 500 characters")
    return q


def _match(conn: sqlite3.Connection, sql: str, params) -> list[tuple]:
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc) or "MATCH" in str(exc) or "syntax" in str(exc):
            raise BadArguments("this query cannot be searched: use words, \"a phrase\" or prefix*") from None
        raise


def _marked(text: str) -> str:
    """A snippet's matches between ** (the explorer's <mark>): plain text for an agent."""
    return text.replace("<mark>", "**").replace("</mark>", "**")


def _filters(agent, server, source, *more: tuple[str, object], table: str = "m") -> tuple[str, list]:
    """`` AND ...`` for each filter given: the agent, server and source (columns of ``table``), then each
    (condition, value) of ``more``; and their parameters."""
    given = [(c, v) for c, v in ((f"{table}.agent_id = ?", agent), (f"{table}.server = ?", server),
                                 (f"{table}.source = ?", source), *more) if v]
    return "".join(f" AND {c}" for c, _ in given), [v for _, v in given]


# -- search_sessions ----------------------------------------------------------------------------------

def find_sessions(conn: sqlite3.Connection, q: str, agent: str | None = None, server: str | None = None,
                  source: str | None = None, since: str | None = None, until: str | None = None,
                  limit: int = 10) -> list[dict]:
    """Sessions matching ``q``, best first: (session id, score, matching message ids best first).

    The one place the MCP server ranks sessions (so that it can later call a better session search):
    the best ``SEARCH_CANDIDATES`` message matches the filters select, by BM25 (``messages_fts``, the
    query through importer.search's ``fts_query``), grouped by session; a session scores its best
    message's BM25 plus a little for each further matching message, and more when its title or first
    prompt matches (``session_list_fts``); the newest first among equals."""
    match = fts_query(q)
    where, params = _filters(agent, server, source, ("m.day >= ?", since), ("m.day <= ?", until))
    # Unfiltered, the best are kept from the index alone, then read; filtered, the filters apply before the
    # best are kept (every match read): a filtered search misses no session the filters select.
    best = ("SELECT rowid AS id, bm25(messages_fts) AS rank FROM messages_fts WHERE messages_fts MATCH ?"
            + ("" if where else f" ORDER BY rank LIMIT {SEARCH_CANDIDATES}"))
    hits = _match(conn, f"""
        WITH r AS MATERIALIZED ({best})
        SELECT m.session_id, m.id, r.rank, m.timestamp_ms FROM r JOIN messages m ON m.id = r.id
        WHERE m.session_id IS NOT NULL{where} ORDER BY r.rank LIMIT {SEARCH_CANDIDATES}""", [match, *params])
    sessions: dict[int, dict] = {}
    for sid, mid, rank, stamp in hits:
        s = sessions.get(sid)
        if s is None:
            s = sessions[sid] = {"id": sid, "best": rank, "count": 0, "messages": [], "latest": stamp or 0}
        s["count"] += 1
        if len(s["messages"]) < SNIPPETS_PER_SESSION:
            s["messages"].append(mid)
        if stamp and stamp > s["latest"]:
            s["latest"] = stamp
    titled: set[int] = set()
    if _has(conn, SESSION_LIST, SESSION_LIST_FTS):
        listed, list_params = _filters(agent, server, source, ("l.last_day >= ?", since), ("l.first_day <= ?", until),
                                       table="l")
        sql = (f"SELECT l.id FROM {SESSION_LIST_FTS} f JOIN {SESSION_LIST} l ON l.id = f.rowid "
               f"WHERE {SESSION_LIST_FTS} MATCH ?{listed} LIMIT 500")
        titled = {r[0] for r in _match(conn, sql, [match, *list_params])}
    for sid in titled - set(sessions):
        sessions[sid] = {"id": sid, "best": 0.0, "count": 0, "messages": [], "latest": 0}

    def score(s: dict) -> float:  # lower is better, as bm25
        value = s["best"] - 0.5 * min(s["count"] - 1, 10) if s["count"] else 0.0
        if s["id"] in titled:
            value -= 5.0
        return value

    for s in sessions.values():
        s["score"] = score(s)
    return sorted(sessions.values(), key=lambda s: (s["score"], -s["latest"]))[:limit]


def search_sessions(conn: sqlite3.Connection, query: str, agent=None, server=None, source=None, since=None,
                    until=None, limit=None) -> dict:
    q = _query(query)
    since, until = _day(since, "since"), _day(until, "until")
    limit = _limit(limit, 10, 50)
    found = find_sessions(conn, q, agent, server, source, since, until, limit)
    info = _session_rows(conn, [s["id"] for s in found])
    ids = [m for s in found for m in s["messages"]]
    texts = {}
    if ids:
        marks = ", ".join("?" * len(ids))
        for r in _rows(conn, f"SELECT id, role, local_time, content_blocks, text_preview FROM messages "
                             f"WHERE id IN ({marks})", ids):
            texts[r["id"]] = {"message_id": r["id"], "role": r["role"], "time": r["local_time"],
                              "snippet": _marked(snippet(r["content_blocks"], r["text_preview"], q))}
    out = []
    for s in found:
        row = info.get(s["id"], {"id": s["id"]})
        out.append({**row, "matching_messages": s["count"], "matches": [texts[m] for m in s["messages"] if m in texts],
                    "score": round(-s["score"], 3)})
    return {"query": q, "timezone": _zone(conn), "sessions": out,
            "note": f"matching_messages counts among the best {SEARCH_CANDIDATES} message matches; "
                    "read a session with get_session(session_id)."}


def _session_rows(conn: sqlite3.Connection, ids: list[int]) -> dict[int, dict]:
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    if _has(conn, SESSION_LIST):
        rows = _rows(conn, f"SELECT {', '.join(SESSION_FIELDS)} FROM {SESSION_LIST} WHERE id IN ({marks})", ids)
    else:
        rows = _rows(conn, "SELECT id, session_uuid, title, agent_id, server, source FROM sessions "
                           f"WHERE id IN ({marks})", ids)
    return {r["id"]: _session_out(r) for r in rows}


def _session_out(r: dict) -> dict:
    """A session row for an answer: ``session_id`` first, ``agent`` for agent_id."""
    return {("session_id" if k == "id" else "agent" if k == "agent_id" else k): v for k, v in r.items()}


# -- search_messages ----------------------------------------------------------------------------------

def search_messages(conn: sqlite3.Connection, query: str, agent=None, server=None, source=None, day=None,
                    role=None, limit=None, offset=None) -> dict:
    q = _query(query)
    day = _day(day, "day")
    limit = _limit(limit, 20)
    offset = offset or 0
    if not 0 <= offset <= 10_000:
        raise BadArguments("offset must be between 0 and 10000")
    where, params = _filters(agent, server, source, ("m.day = ?", day), ("m.role = ?", role))
    columns = ("m.id, m.session_id, m.role, m.local_time, m.agent_id, m.server, m.source, m.tool_name, "
               "m.content_blocks, m.text_preview")
    if where:  # every match read, the filters applied, then the page
        rows = _match(conn, f"""
            SELECT {columns}
            FROM (SELECT rowid AS id, bm25(messages_fts) AS rank FROM messages_fts WHERE messages_fts MATCH ?) r
            JOIN messages m ON m.id = r.id WHERE 1{where}
            ORDER BY r.rank, m.id DESC LIMIT ? OFFSET ?""", [fts_query(q), *params, limit + 1, offset])
    else:  # the page from the index alone, then its rows read
        rows = _match(conn, f"""
            WITH r AS MATERIALIZED (
              SELECT rowid AS id, bm25(messages_fts) AS rank FROM messages_fts WHERE messages_fts MATCH ?
              ORDER BY rank, rowid DESC LIMIT ? OFFSET ?)
            SELECT {columns} FROM r JOIN messages m ON m.id = r.id ORDER BY r.rank, m.id DESC""",
                      [fts_query(q), limit + 1, offset])
    more = len(rows) > limit
    out = [{"message_id": r[0], "session_id": r[1], "role": r[2], "time": r[3], "agent": r[4], "server": r[5],
            "source": r[6], **({"tool": r[7]} if r[7] else {}),
            "snippet": _marked(snippet(r[8], r[9], q))} for r in rows[:limit]]
    return {"query": q, "timezone": _zone(conn), "messages": out,
            "next_offset": offset + limit if more else None}


# -- get_session ----------------------------------------------------------------------------------------

def _session_id(conn: sqlite3.Connection, session: str | int) -> int:
    text = str(session).strip()
    if text.isdigit() and len(text) <= 18:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (int(text),)).fetchone():
            return int(text)
    elif _UUID_ISH.fullmatch(text):
        found = conn.execute("SELECT id FROM sessions WHERE session_uuid = ? ORDER BY last_message_at DESC LIMIT 2",
                             (text,)).fetchall()
        if len(found) == 1:
            return found[0][0]
        if len(found) > 1:
            raise BadArguments("several sessions have this uuid (on other servers or agents): give its session_id")
    raise BadArguments("no session with this id in the snapshot (session_id as search_sessions or list_sessions "
                       "give it, or the session's uuid)")


def _cut(text: str | None, most: int) -> tuple[str | None, int]:
    if text is None or len(text) <= most:
        return text, 0
    return text[:most], len(text) - most


def _json(value) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def message_out(m: dict, calls: dict, per_message: int, thinking: bool) -> dict:
    """One message as get_session gives it: text, thinking, tool calls (arguments as JSON) and, for a
    tool result, its output; each part cut to ``per_message`` characters (what was cut is counted)."""
    out: dict[str, Any] = {"message_id": m["id"], "role": m["role"], "time": m["local_time"]}
    for key in ("model", "tool_name", "tool_call_id", "exit_code", "stop_reason", "error_message"):
        if m.get(key) is not None:
            out[key] = m[key]
    if m.get("is_error"):
        out["is_error"] = True
    if not m.get("is_active_path"):
        out["abandoned_branch"] = True
    cut = 0
    content = decoded_json(m.get("content_blocks"), otherwise=m.get("content_blocks"))
    texts: list[str] = []
    thoughts: list[str] = []
    tool_calls: list[dict] = []
    other: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking":
            thoughts.append(str(block.get("thinking") or ""))
        elif kind == "toolCall":
            call_id = block.get("id")
            args, n = _cut(_json(block.get("arguments")), per_message)
            cut += n
            call = {"name": block.get("name"), "call_id": call_id, "arguments": args}
            found = calls.get(call_id) if call_id else None
            if found is not None:
                for key in ("exit_code", "duration_ms", "result_message_id"):
                    if found.get(key) is not None:
                        call[key] = found[key]
                if found.get("is_error"):
                    call["is_error"] = True
            tool_calls.append(call)
        elif kind == "image":
            other.append(f"[image {block.get('mimeType') or ''}]".replace(" ]", "]"))
        else:
            text = message_search_text(orjson.dumps([block]).decode(), None)
            if text:
                texts.append(text)
    if content is None and m.get("text_preview"):
        texts.append(m["text_preview"])
    text = "\n\n".join(texts + other)
    if text:
        key = "output" if m["role"] == "toolResult" else "text"
        out[key], n = _cut(text, per_message)
        cut += n
    if thoughts:
        if thinking:
            out["thinking"], n = _cut("\n\n".join(thoughts), per_message)
            cut += n
        else:
            out["thinking_omitted"] = True
    if tool_calls:
        out["tool_calls"] = tool_calls
    if cut:
        out["characters_cut"] = cut
    return out


def get_session(conn: sqlite3.Connection, session: str | int, cursor: str | None = None, max_chars: int | None = None,
                max_message_chars: int | None = None, include_thinking: bool = True,
                all_branches: bool = False) -> dict:
    sid = _session_id(conn, session)
    budget = DEFAULT_BUDGET if max_chars is None else max_chars
    if not 1000 <= budget <= MAX_BUDGET:
        raise BadArguments(f"max_chars must be between 1000 and {MAX_BUDGET}")
    per_message = max_message_chars if max_message_chars is not None else max(500, budget // 4)
    if not 100 <= per_message <= budget:
        raise BadArguments("max_message_chars must be between 100 and max_chars")
    after: tuple[int, int] | None = None
    if cursor:
        found = _CURSOR.fullmatch(cursor.strip())
        if not found:
            raise BadArguments("cursor must be a next_cursor that get_session gave")
        after = (int(found.group(1)), int(found.group(2)))
    head = _session_rows(conn, [sid]).get(sid, {"session_id": sid})
    where = "" if all_branches else " AND is_active_path = 1"
    params: list = [sid]
    if after is not None:
        where += " AND (COALESCE(seq, -1) > ? OR (COALESCE(seq, -1) = ? AND id > ?))"
        params += [after[0], after[0], after[1]]
    total = conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?"
                         + ("" if all_branches else " AND is_active_path = 1"), (sid,)).fetchone()[0]
    calls = {r["call_id"]: r for r in _rows(
        conn, "SELECT call_id, exit_code, duration_ms, is_error, result_message_id FROM tool_calls "
              "WHERE session_id = ?", (sid,)) if r["call_id"]}
    cur = conn.execute(
        "SELECT id, seq, role, local_time, model, tool_name, tool_call_id, exit_code, stop_reason, error_message, "
        "is_error, is_active_path, text_preview, content_blocks FROM messages WHERE session_id = ?"
        f"{where} ORDER BY COALESCE(seq, -1), id", params)
    names = [d[0] for d in cur.description]
    messages: list[dict] = []
    used = 0
    next_cursor = None
    for row in cur:
        m = dict(zip(names, row))
        item = message_out(m, calls, per_message, include_thinking)
        size = len(orjson.dumps(item))
        if messages and used + size > budget:
            next_cursor = f"{last[0]}:{last[1]}"
            break
        messages.append(item)
        used += size
        last = (m["seq"] if m["seq"] is not None else -1, m["id"])
    cur.close()
    return {"session": head, "timezone": _zone(conn), "messages_in_session": total, "messages": messages,
            "next_cursor": next_cursor,
            "note": ("more messages follow: call get_session again with cursor=next_cursor" if next_cursor
                     else "the end of the session")}


# -- list_sessions ------------------------------------------------------------------------------------

def list_sessions(conn: sqlite3.Connection, agent=None, server=None, source=None, days=None, date_from=None,
                  date_to=None, errors=False, thinking=False, q=None, limit=None, cursor=None) -> dict:
    from datasette.utils.asgi import BadRequest

    from . import browser

    if days is not None and not 1 <= days <= 3660:
        raise BadArguments("days must be between 1 and 3660")
    args = {"agent": agent, "server": server, "source": source, "days": str(days) if days else None,
            "from": date_from, "to": date_to, "errors": "1" if errors else None,
            "thinking": "1" if thinking else None, "q": q, "limit": str(_limit(limit, 20)), "after": cursor}
    try:
        f = browser.parse({k: v for k, v in args.items() if v is not None})
    except BadRequest as exc:
        message = str(exc).replace("from must", "date_from must").replace("to must", "date_to must")
        raise BadArguments(message.replace("after must", "cursor must")) from None
    data = browser.load(conn, f)
    if data.get("missing"):
        raise BadArguments("this snapshot has no session list: export it again with this version of AgentBase")
    rows = [_session_out({k: r.get(k) for k in SESSION_FIELDS}) for r in data["rows"]]
    last = data["rows"][-1] if data["rows"] else None
    return {"timezone": data["meta"].get("timezone"), "from": f.start, "to": f.end, "count": data["count"],
            "sessions": rows,
            "next_cursor": f"{last['last_message_at']}|{last['id']}" if data["more"] and last else None}


# -- usage_report -----------------------------------------------------------------------------------------

def _report_day(value) -> str | None:
    """A group's local day: a day number (days since 1970-01-01, local) or the row's own ``day``."""
    if isinstance(value, int):
        try:
            return (date(1970, 1, 1) + timedelta(days=value)).isoformat()
        except OverflowError:
            return None
    return value if isinstance(value, str) and _DAY.fullmatch(value) else None


def usage_rows(conn: sqlite3.Connection, kind: str, since: str | None = None, until: str | None = None,
               agent: str | None = None, server: str | None = None, source: str | None = None) -> list:
    """importer/report.py's rows (``Row``, ``Figures``: the same figures and rules as ``collect``: each
    message with ``usage_counted = 1`` once, rows without usage left out, calls without a price counted as
    unpriced), read from the snapshot's own columns: a message's local day is its integer time plus the
    zone's offset the export stored with it (``utc_offset_s``), grouped in SQL, so no time text is made
    per row (the snapshot's ``timestamp`` is computed on read); titles and the rest of a session's line
    from ``session_list``."""
    from importer.report import COLUMNS, FIGURES_SQL, Figures, Row, message_filters

    where, params = message_filters(agent, server, source)
    where.insert(0, "m.usage_counted = 1")
    for bound, op in ((since, ">="), (until, "<=")):
        if bound:
            where.append(f"m.day {op} ?")  # (an index: idx_messages_day)
            params.append(bound)
    per_session = kind == "session"
    day = ("CASE WHEN m.timestamp_ms IS NOT NULL THEN (m.timestamp_ms / 1000 + COALESCE(m.utc_offset_s, 0)) / 86400 "
           "ELSE m.day END")
    group = "d" + (", m.session_id" if per_session else "")
    sql = (f"SELECT {day} AS d, {'m.session_id' if per_session else 'NULL'}, COALESCE(m.model, ''), {FIGURES_SQL} "
           # (a row without tokens, cost or an unpriced call adds nothing that a report shows: left out here)
           f"FROM messages m WHERE {' AND '.join(where)} AND (m.timestamp_ms IS NOT NULL OR m.day IS NOT NULL) "
           f"AND ({' OR '.join(f'COALESCE(m.{c}, 0) <> 0' for c in (*COLUMNS.values(), 'cost_usd'))} "
           "OR m.cost_source = 'unpriced') "
           f"GROUP BY {group}, COALESCE(m.model, '')")
    rows: dict[str, Row] = {}
    for rec in conn.execute(sql, params):
        local = _report_day(rec[0])
        if local is None or (since and local < since) or (until and local > until):
            continue
        f = Figures.of(rec[3:])
        if f is None:
            continue  # no usage at all (a user message): not in a usage report
        key = str(rec[1]) if per_session else (local[:7] if kind == "monthly" else local)
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(key)
        row.add(rec[2], f)
        if per_session and (row.info.get("last_day") is None or local > row.info["last_day"]):
            row.info["last_day"] = local
    if not per_session:
        return [rows[k] for k in sorted(rows)]
    ids = [int(k) for k in rows]
    for i in range(0, len(ids), 500):
        batch = ids[i:i + 500]
        marks = ", ".join("?" * len(batch))
        table = SESSION_LIST if _has(conn, SESSION_LIST) else "sessions"
        for sid, uuid, a, s, k, title in conn.execute(
                f"SELECT id, session_uuid, agent_id, server, source, title FROM {table} WHERE id IN ({marks})", batch):
            rows[str(sid)].info.update({"session_uuid": uuid, "agent": a, "server": s, "source": k,
                                        "title": title or uuid})
    return sorted(rows.values(), key=lambda r: (r.info.get("last_day") or "", r.key))


USAGE_CACHE = 32  # reports kept (their rows), for the snapshot version they were read from
_usage_cache: dict = {}
_usage_lock = threading.Lock()


def usage_report(conn: sqlite3.Connection, kind: str, since=None, until=None, agent=None, server=None, source=None,
                 breakdown: bool = False, limit: int | None = None) -> dict:
    from importer.prices import current
    from importer.report import as_json

    if kind not in ("daily", "monthly", "session"):
        raise BadArguments("kind must be daily, monthly or session")
    limit = _limit(limit, 100, 1000)
    since, until = _report_bound(since, "since"), _report_bound(until, "until")
    from .live import version

    # (one pass over the messages: kept for the snapshot's version, build and update, as the dashboard's cube)
    key = (version(conn), kind, since, until, agent, server, source)
    with _usage_lock:
        rows = _usage_cache.get(key) if key[0] else None
    if rows is None:
        rows = usage_rows(conn, kind, since, until, agent, server, source)
        if key[0]:
            with _usage_lock:
                while len(_usage_cache) >= USAGE_CACHE:
                    _usage_cache.pop(next(iter(_usage_cache)))
                _usage_cache[key] = rows
    doc = as_json(kind, rows, _zone(conn), current().date, breakdown)
    if len(doc["rows"]) > limit:  # the newest rows; the totals stay those of every row
        doc["rows_left_out"] = len(doc["rows"]) - limit
        doc["rows"] = doc["rows"][-limit:]
    return doc


def _report_bound(value: str | None, name: str) -> str | None:
    """A report's day as `agentbase report` takes it: YYYY-MM-DD or YYYYMMDD."""
    if value is not None and len(value.strip()) == 8 and value.strip().isdigit():
        v = value.strip()
        value = f"{v[:4]}-{v[4:6]}-{v[6:]}"
    return _day(value, name)


# -- shell_commands -----------------------------------------------------------------------------------

def shell_commands(conn: sqlite3.Connection, day=None, agent=None, server=None, source=None, limit=None,
                   after: int | None = None, max_output_chars: int | None = None) -> dict:
    day = _day(day, "day")
    limit = _limit(limit, 50, 500)
    most = 500 if max_output_chars is None else max_output_chars
    if not 0 <= most <= 20_000:
        raise BadArguments("max_output_chars must be between 0 and 20000")
    where, params = _filters(agent, server, source, table="t")
    where = "agentbase_is_shell(t.source, t.tool_name)" + where
    if day is None:
        found = conn.execute(f"SELECT t.day FROM tool_calls t WHERE {where} ORDER BY t.day DESC LIMIT 1",
                             params).fetchone()
        day = found[0] if found else None
    out = {"timezone": _zone(conn), "day": day, "per_agent": [], "commands": [], "next_after": None}
    if day is None:
        out["note"] = "no shell command in the snapshot for these filters"
        return out
    where += " AND t.day = ?"
    params.append(day)
    out["per_agent"] = [{"agent": a, "server": s, "commands": n, "failed": f} for a, s, n, f in conn.execute(
        f"SELECT t.agent_id, t.server, COUNT(*), SUM(CASE WHEN t.is_error = 1 OR COALESCE(t.exit_code, 0) <> 0 "
        f"THEN 1 ELSE 0 END) FROM tool_calls t WHERE {where} GROUP BY t.agent_id, t.server ORDER BY 3 DESC", params)]
    page_where, page_params = where, list(params)
    if after is not None:
        page_where += " AND (t.timestamp, t.id) > (SELECT timestamp, id FROM tool_calls WHERE id = ?)"
        page_params.append(after)
    rows = _rows(conn, f"SELECT t.id, t.local_time, t.agent_id, t.server, t.source, t.tool_name, t.command, "
                       f"t.exit_code, t.duration_ms, t.is_error, t.result_preview, t.session_id, t.message_id "
                       f"FROM tool_calls t WHERE {page_where} ORDER BY t.timestamp, t.id LIMIT ?",
                 page_params + [limit + 1])
    for r in rows[:limit]:
        result, n = _cut(r["result_preview"], most)
        item = {"call": r["id"], "time": r["local_time"], "agent": r["agent_id"], "server": r["server"],
                "tool": r["tool_name"], "command": r["command"], "exit_code": r["exit_code"],
                "duration_ms": r["duration_ms"], "session_id": r["session_id"], "message_id": r["message_id"],
                "output_start": result}
        if r["is_error"]:
            item["is_error"] = True
        if n:
            item["output_characters_cut"] = n
        out["commands"].append(item)
    if len(rows) > limit:
        out["next_after"] = rows[limit - 1]["id"]
    return out


# -- the MCP server ---------------------------------------------------------------------------------------

# the tools' arguments that several share (the annotations the SDK turns into each tool's input schema)
Agent = Annotated[str | None, Field(description="Only this agent (agent id, as list_sessions shows it).")]
Server = Annotated[str | None, Field(description="Only this server (where the transcripts were imported from).")]
Source = Annotated[str | None, Field(description="Only this source kind: openclaw, pi, claude-code, codex, ...")]
Day = Annotated[str | None, Field(description="A local day, YYYY-MM-DD.")]
Runner = Callable[[Callable[[sqlite3.Connection], dict]], Any]  # awaits fn(conn) in a snapshot connection

def build_server(run: Runner):
    """The MCP server and its tools; ``run(fn)`` awaits ``fn(conn)`` on a read-only snapshot connection."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ToolAnnotations

    from importer import __version__

    this = sys.modules[__name__]  # (the tools below are named as the functions they call)
    server = MCPServer(NAME, title="AgentBase", instructions=INSTRUCTIONS, version=__version__)
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    async def call(fn, *args, **kw) -> dict:
        try:
            return await run(lambda conn: fn(conn, *args, **kw))
        except BadArguments as exc:
            raise ToolError(str(exc)) from None
        except sqlite3.Error as exc:
            raise ToolError(f"the snapshot could not be read: {exc.__class__.__name__}") from None

    @server.tool(name="search_sessions", annotations=read_only, description=(
        "Find past sessions by what was said or done in them: ranked sessions (best first), each with its title, "
        "agent, server, source, first and last activity, the number of matching messages and up to "
        f"{SNIPPETS_PER_SESSION} matching messages as snippets (matches between **). Query: words (all must "
        "occur), \"a phrase\", prefix*; identifiers such as file names, commands and error strings work; Chinese "
        "words of two or more characters work. Limits: at most 50 sessions; ranks the best "
        f"{SEARCH_CANDIDATES} message matches (BM25) plus title and first-prompt matches."))
    async def search_sessions(
            query: Annotated[str, Field(description="What to look for (words, an identifier, \"a phrase\").")],
            agent: Agent = None, server: Server = None, source: Source = None,
            since: Annotated[str | None, Field(description="Only messages on or after this local day, YYYY-MM-DD.")] = None,
            until: Annotated[str | None, Field(description="Only messages on or before this local day.")] = None,
            limit: Annotated[int | None, Field(description="Sessions to return, 1-50 (default 10).")] = None) -> dict:
        return await call(this.search_sessions, query, agent, server, source, since, until, limit)

    @server.tool(name="search_messages", annotations=read_only, description=(
        "Full-text search over every message (text, thinking, tool calls and tool results): the matching messages, "
        "best first (BM25), each with its session_id, message_id, role, local time, agent and a snippet (matches "
        "between **). Same query syntax as search_sessions. Limits: at most 100 a call; page with "
        "offset=next_offset (up to 10,000)."))
    async def search_messages(
            query: Annotated[str, Field(description="What to look for.")],
            agent: Agent = None, server: Server = None, source: Source = None, day: Day = None,
            role: Annotated[str | None, Field(description="Only this role: user, assistant, toolResult, system.")] = None,
            limit: Annotated[int | None, Field(description="Messages to return, 1-100 (default 20).")] = None,
            offset: Annotated[int | None, Field(description="Skip this many (next_offset of the last call).")] = None
    ) -> dict:
        return await call(this.search_messages, query, agent, server, source, day, role, limit, offset)

    @server.tool(name="get_session", annotations=read_only, description=(
        "Read one session: its header (title, agent, server, source, times, counts, tokens, cost) and its messages "
        "in order, each with its role, local time, text, thinking, tool calls (name and arguments as JSON, exit "
        "code) and, for a tool result, its output. Limits: cut to a size budget, max_chars for the whole answer (default "
        f"{DEFAULT_BUDGET:,}, at most {MAX_BUDGET:,}), max_message_chars for each part of a message (what is cut "
        "is counted in characters_cut). When next_cursor is set, call again with cursor=next_cursor for the rest. "
        "Only the active branch unless all_branches is true."))
    async def get_session(
            session_id: Annotated[int | str, Field(description="The session: session_id as the other tools give "
                                                               "it, or its uuid.")],
            cursor: Annotated[str | None, Field(description="next_cursor of the previous call.")] = None,
            max_chars: Annotated[int | None, Field(description="Budget of the answer in characters.")] = None,
            max_message_chars: Annotated[int | None, Field(description="At most this many characters of each "
                                                                        "text, output or arguments.")] = None,
            include_thinking: Annotated[bool, Field(description="Include the model's thinking.")] = True,
            all_branches: Annotated[bool, Field(description="Include abandoned branches.")] = False) -> dict:
        return await call(this.get_session, session_id, cursor, max_chars, max_message_chars,
                          include_thinking, all_branches)

    @server.tool(name="list_sessions", annotations=read_only, description=(
        "List sessions newest first, as the explorer's session browser: id, uuid, title, agent, server, source, "
        "first and last local activity, messages, tool calls, failed tool calls, model errors, tokens, cost. "
        "Filters: agent, server, source, days (the last N days up to the snapshot's latest day) or "
        "date_from/date_to, errors (a failed tool call or model error), thinking, q (words of the title or first "
        "prompt). count is the number of sessions the filters select. Limits: at most 100 a call; page with "
        "cursor=next_cursor."))
    async def list_sessions(
            agent: Agent = None, server: Server = None, source: Source = None,
            days: Annotated[int | None, Field(description="Sessions active in the last N days (1-3660).")] = None,
            date_from: Annotated[str | None, Field(description="Active on or after this local day.")] = None,
            date_to: Annotated[str | None, Field(description="Active on or before this local day.")] = None,
            errors: Annotated[bool, Field(description="Only sessions with a failed tool call or error.")] = False,
            thinking: Annotated[bool, Field(description="Only sessions with thinking.")] = False,
            q: Annotated[str | None, Field(description="Words of the title or first prompt.")] = None,
            limit: Annotated[int | None, Field(description="Sessions to return, 1-100 (default 20).")] = None,
            cursor: Annotated[str | None, Field(description="next_cursor of the previous call.")] = None) -> dict:
        return await call(this.list_sessions, agent, server, source, days, date_from, date_to, errors,
                          thinking, q, limit, cursor)

    @server.tool(name="usage_report", annotations=read_only, description=(
        "Tokens and cost per local day, month or session, with totals, as `agentbase report --json`: input, "
        "output, cacheRead, cacheWrite, totalTokens, cost_usd and unpriced_calls (calls with tokens and no price: "
        "not in the cost, never $0), the models of each row (breakdown: figures per model). Each model call "
        "counted once. Limits: the newest `limit` rows (default 100, at most 1000; rows_left_out says how many "
        "more); totals cover every row."))
    async def usage_report(
            kind: Annotated[Literal["daily", "monthly", "session"], Field(description="daily, monthly or session.")],
            since: Annotated[str | None, Field(description="First local day, YYYY-MM-DD.")] = None,
            until: Annotated[str | None, Field(description="Last local day, YYYY-MM-DD.")] = None,
            agent: Agent = None, server: Server = None, source: Source = None,
            breakdown: Annotated[bool, Field(description="Figures per model under each row.")] = False,
            limit: Annotated[int | None, Field(description="Rows to return (the newest).")] = None) -> dict:
        return await call(this.usage_report, kind, since, until, agent, server, source, breakdown, limit)

    @server.tool(name="shell_commands", annotations=read_only, description=(
        "The shell commands agents ran on one local day (default: the latest day with one), in time order: "
        "command, tool, agent, server, exit code, duration, the start of the output, session_id and message_id; "
        "and per_agent, the day's count (and failed count) per agent. Shell tools are each kind's own (exec, "
        "Bash, shell...). Limits: at most 500 a call (default 50); page with after=next_after; output cut to "
        "max_output_chars (default 500)."))
    async def shell_commands(
            day: Day = None, agent: Agent = None, server: Server = None, source: Source = None,
            limit: Annotated[int | None, Field(description="Commands to return, 1-500 (default 50).")] = None,
            after: Annotated[int | None, Field(description="next_after of the previous call.")] = None,
            max_output_chars: Annotated[int | None, Field(description="Characters of output (0-20000).")] = None
    ) -> dict:
        return await call(this.shell_commands, day, agent, server, source, limit, after, max_output_chars)

    return server


# -- stdio: agentbase mcp ---------------------------------------------------------------------------------

def run_stdio(snapshot: Path) -> None:
    """Serve the tools on stdin/stdout until the client closes them (``agentbase mcp``)."""
    import anyio

    path = Path(snapshot)

    async def run(fn):
        def work():
            conn = open_snapshot(path)
            try:
                return fn(conn)
            finally:
                conn.close()

        return await anyio.to_thread.run_sync(work)

    build_server(run).run("stdio")


# -- streamable HTTP: /-/agentbase/mcp on agentbase serve ----------------------------------------------------

PATH = "/-/agentbase/mcp"


def _servers(datasette) -> dict:
    found = getattr(datasette, "_agentbase_mcp", None)
    if found is None:
        found = datasette._agentbase_mcp = {}
    return found


def _same_origin(scope) -> bool:
    """A browser's cross-site request (an Origin header naming another host) is refused: a page elsewhere
    must not drive the tools with a visitor's login."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
    origin = headers.get("origin")
    if not origin:
        return True
    from urllib.parse import urlsplit

    return urlsplit(origin).netloc.lower() == (headers.get("host") or "").lower()


async def http_view(datasette, request, scope, receive, send):
    """``/-/agentbase/mcp``: the tools over streamable HTTP (stateless, JSON answers), for whoever may
    read the snapshot's pages (served.check: with a password, a logged-in session only)."""
    from datasette.utils.asgi import Forbidden

    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from . import served

    db = await served.snapshot_db(datasette, request)
    if not _same_origin(scope):
        raise Forbidden("cross-origin MCP requests are refused")
    refused = await _bearer(datasette, request)
    if refused is not None:
        return refused
    await served.check(datasette, request, db.name)
    scope = request.scope
    servers = _servers(datasette)
    server = servers.get(db.name)
    if server is None:
        async def run(fn):  # (Datasette's connections have agentbase_is_shell: prepare_connection)
            return await db.execute_fn(fn)

        server = servers[db.name] = build_server(run)
    manager = StreamableHTTPSessionManager(server._lowlevel_server, json_response=True, stateless=True)
    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return None


MAX_BEARERS = 16  # passwords checked right, remembered for this run (as HMACs): no PBKDF2 on each call


async def _bearer(datasette, request):
    """``Authorization: Bearer <the explorer's password>``, for an agent's MCP config (which sends a header,
    not a login form): checked as the login page checks it (the same PBKDF2 hash, the same throttle per
    client address, the same delay after a wrong one), then the request carries a login session of its own,
    so the pages' permission check lets it in. A password checked right is remembered for the run (an HMAC
    of it, keyed per run), so later calls cost no PBKDF2. Returns the answer that refuses the request (a
    wrong password, or too many tries), else None (no password configured, no such header, or let in)."""
    import asyncio
    import hashlib
    import hmac
    import math
    import secrets

    from datasette.utils.asgi import Response

    from . import access

    header = request.headers.get("authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    try:
        gate = access.gate(datasette)
    except access.AccessConfigError:
        return None  # the permission check refuses everything then
    if gate is None or gate.admits(request.actor):
        return None
    token = token.strip()
    try:  # (headers arrive as latin-1: a password in UTF-8 is its bytes)
        token = token.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass
    known = getattr(datasette, "_agentbase_mcp_bearers", None)
    if known is None:
        known = datasette._agentbase_mcp_bearers = {"key": secrets.token_bytes(32), "actors": {}}
    slot = hmac.new(known["key"], token.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()
    actor = known["actors"].get(slot)
    if actor is None or not gate.admits(actor):
        address = access.client_address(request)
        wait = gate.throttle.wait(address)
        if wait > 0:
            seconds = math.ceil(wait)
            return Response.json({"ok": False, "status": 429, "error": f"Too many login attempts from your address: "
                                  f"try again in {seconds} s"}, status=429, headers={"Retry-After": str(seconds)})
        tries = gate.throttle.start(address)
        right = False
        try:
            right = await gate.check(token)
        finally:
            gate.throttle.finish(address, tries, right)
        if not right:
            await asyncio.sleep(access.FAILED_LOGIN_DELAY)
            return Response.json({"ok": False, "status": 403, "error": "Wrong password."}, status=403)
        while len(known["actors"]) >= MAX_BEARERS:
            known["actors"].pop(next(iter(known["actors"])))
        actor = known["actors"][slot] = gate.log_in()
    request.scope = dict(request.scope, actor=actor)
    return None


def skip_csrf(scope) -> bool:
    """The MCP endpoint takes JSON-RPC POSTs from agents, not forms: Datasette's CSRF token does not apply
    (a cross-site page cannot send them with a visitor's cookie: SameSite=Lax, a JSON body, and
    :func:`_same_origin`)."""
    path = scope.get("route_path") or scope.get("path") or ""
    return scope.get("type") == "http" and path.rstrip("/").endswith(PATH)

