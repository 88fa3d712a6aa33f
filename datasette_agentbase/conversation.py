"""The conversation view of one session: ``/-/agentbase/session/<id>``.

The active path in order (walked from the session's leaf entry back through
the parent ids, so it is right even when lines of several files interleave),
user / assistant / tool turns styled apart, each tool call followed by its
result, compactions, model changes and branch points marked, model, tokens and
cost per model call, and the session's totals (each model call once).
``?all=1`` adds the entries of abandoned branches, marked as such.

Every source kind's rows read sensibly. A kind that writes each item of a model's output as a
row of its own (Codex's reasoning, message and function_call rows; the agent-server's reasoning,
tool.started and assistant.message) reads like the others: the assistant rows between two inputs
(a prompt, a tool's output, context) are one assistant card holding their thinking, text and tool
calls (each with its result under it), with one usage line (:func:`group_items`). A model call
kept as its usage alone (a Codex token count, an agent-server run, at the end of its run) is one
usage line. Codex's ``compacted`` lines are compaction markers, as OpenClaw's and pi's. Injected
context (``is_context``, ``developer`` and ``system`` rows) folded, a copy of a
message (its tool calls attached to another copy, or its usage counted there)
marked as a copy, and identical errors in a row (a retry loop) shown once with
their count. The session's relatives (parent and sub-agent sessions, forks,
the sessions before and after a reset or rollover) are linked where the
archive knows them (:func:`related`).

The same turns make the standalone HTML export (``build(..., standalone=True)``:
no links out of the file, nothing cut); session_export.py writes the JSON and
Markdown ones.
"""

from __future__ import annotations

import json
import re
import sqlite3

from markupsafe import Markup, escape

from importer import amounts

from . import facts, render, richtext

MESSAGE_COLUMNS = (
    "id", "message_uuid", "parent_message_uuid", "role", "first_tool_call", "has_thinking", "is_error", "provider",
    "model", "stop_reason", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "total_tokens", "cost_usd", "cost_source", "timestamp", "local_time", "is_active_path", "is_synthetic",
    "usage_counted", "tool_call_id", "tool_name", "seq", "exit_code", "duration_ms", "is_context",
    "calls_elsewhere", "native_role", "text_preview", "error_message", "content_blocks",
)
ENTRY_COLUMNS = "id, entry_uuid, parent_uuid, entry_type, custom_type, timestamp, seq, is_active_path, " \
                "text_preview, raw_json"
# Entry types worth a line in the conversation (the rest: ?all=1).
MARKED_ENTRIES = {"compaction", "branch_summary", "model_change", "thinking_level_change", "reset",
                  "custom_message", "label", "session_info", "compacted"}
# (entry_type, custom_type) of other entries worth a line: Codex's context_compacted event (a compaction
# marker, unless it follows the compacted line it announces).
MARKED_EVENTS = {("event_msg", "context_compacted")}
VIEW = render.Options(limit=50_000, fold_lines=15, fold_chars=1500, markdown=True)
STANDALONE = render.Options(limit=None, fold_lines=15, fold_chars=1500, markdown=True, links=False)
# Characters of code a page colours (about 0.1 s of Pygments); the rest is monospaced only.
HIGHLIGHT_PAGE_CHARS = 40_000
HIGHLIGHT_EXPORT_CHARS = 1_000_000
# The archive's roles (docs/vocabulary.md), the same for every kind.
RESULT_ROLES = ("toolResult",)  # a tool's output, paired with its call
CONTEXT_ROLES = ("system",)  # instructions and injected context
ROLE_CSS = {"user": "user", "assistant": "assistant", "toolResult": "tool"}
ROLE_LABEL = {"toolResult": "tool result"}


def is_usage_only(row: dict) -> bool:
    """A model call whose output the transcript did not keep (a Codex token count, an
    agent-server run): an assistant row with usage and no content."""
    return row["role"] == "assistant" and row["content_blocks"] is None and (
        row.get("total_tokens") is not None or row.get("input_tokens") is not None
        or row.get("output_tokens") is not None or row.get("cost_usd") is not None)


def model_item(row: dict, blocks) -> tuple[str, str] | None:
    """(css, label) of an assistant row that is one item the model produced, thinking or a tool
    call, which its kind writes as a row of its own (its native role is not "assistant": Codex's
    reasoning and function_call, the agent-server's tool.started...); None otherwise."""
    if row["role"] != "assistant" or row.get("native_role") in ("assistant", None) \
            or not isinstance(blocks, list) or len(blocks) != 1 or not isinstance(blocks[0], dict):
        return None
    kind = blocks[0].get("type")
    if kind == "thinking":
        return "reasoning", "thinking"
    if kind == "toolCall":
        return "call", "tool call"
    return None


def is_itemized(messages: list[dict]) -> bool:
    """A session whose kind writes each item of a model's output as a row of its own, naming
    them apart (Codex's reasoning, function_call and assistant rows; the agent-server's
    reasoning, tool.started and assistant.message), drawn by group_items: its assistant rows
    with content have more than one native role, and one of them is a single item (model_item).
    A kind that writes one row per message under one word (Gemini's ``gemini``, OpenClaw's
    ``assistant``) is not, even where a message holds nothing but a tool call."""
    natives = {m.get("native_role") for m in messages if m["role"] == "assistant" and m["content_blocks"] is not None}
    if len(natives) < 2:
        return False
    return any(model_item(m, _blocks(m["content_blocks"])) for m in messages
               if m["role"] == "assistant" and m.get("native_role") not in ("assistant", None)
               and m["content_blocks"] is not None)


SESSION_LINK_COLUMNS = "id, session_uuid, server, agent_id, title, label, display_name, source, " \
                       "first_message_at, message_count, parent_call_id, reason, parent_session_uuid, " \
                       "parent_session, spawned_by, session_key, session_type"
# Stop reasons of a model call that ended as it should (OpenClaw's, Claude's, OpenAI's, the agent-server's
# runs): not worth a word on the usage line; the others (length, max_tokens, error, aborted...) are shown.
NORMAL_STOPS = {"stop", "toolUse", "tool_use", "end_turn", "tool_calls", "stop_sequence", "completed"}
MAX_LISTED_CHILDREN = 30  # child sessions named in the header (the rest are counted)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def _rows(conn: sqlite3.Connection, sql: str, params=()) -> list[dict]:
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def money(cost, tokens) -> str:
    """$ amount, four decimals; 'unpriced' for tokens without a cost (not free); '' for nothing."""
    if cost:
        return amounts.money(cost, 4)
    return "unpriced" if tokens else ""


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_xinfo({table})")}


def _message_columns(conn: sqlite3.Connection) -> str:
    """The view's columns that this snapshot has (one made by an older export lacks the newest:
    they read as NULL)."""
    have = _columns(conn, "messages")
    return ", ".join(c if c in have else f"NULL AS {c}" for c in MESSAGE_COLUMNS)


def _rule_title(conn: sqlite3.Connection) -> str:
    """The title by the one rule of every kind (importer/titles.py: its label, else its own title,
    else its first prompt, else its chat's name), as the export wrote it into ``session_list``."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'session_list'").fetchone() is None:
        return "NULL AS rule_title"
    return "(SELECT l.title FROM session_list l WHERE l.id = sessions.id) AS rule_title"


def load(conn: sqlite3.Connection, session_id: int, everything: bool = False) -> dict | None:
    """Everything the view shows, read in one go (runs in Datasette's SQL thread)."""
    found = _rows(conn, f"SELECT *, {_rule_title(conn)} FROM sessions WHERE id = ?", (session_id,))
    if not found:
        return None
    session = found[0]
    where = "" if everything else " AND is_active_path = 1"
    messages = _rows(conn, f"SELECT {_message_columns(conn)} FROM messages WHERE session_id = ?{where} "
                           "ORDER BY seq, id", (session_id,))
    entries = _rows(conn, f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ?{where} ORDER BY seq, id",
                    (session_id,))
    return _around(conn, session, messages, entries)


def _around(conn: sqlite3.Connection, session: dict, messages: list[dict], entries: list[dict]) -> dict:
    """load()'s data around the rows it shows: their calls, the branches off them, the usage, the relatives."""
    session_id = session["id"]
    calls = {r["call_id"]: r for r in _rows(
        conn, "SELECT call_id, message_id, exit_code, duration_ms, is_error, result_message_id "
              "FROM tool_calls WHERE session_id = ?", (session_id,)) if r["call_id"]}
    off_path: dict[str, int] = {}
    for table, parent in (("messages", "parent_message_uuid"), ("entries", "parent_uuid")):
        for r in conn.execute(f"SELECT {parent}, COUNT(*) FROM {table} WHERE session_id = ? AND is_active_path = 0 "
                              f"GROUP BY {parent}", (session_id,)):
            if r[0] is not None:
                off_path[r[0]] = off_path.get(r[0], 0) + r[1]
    usage = _rows(conn, """
        SELECT COUNT(*) AS calls,
               SUM(CASE WHEN COALESCE(cost_usd, 0) = 0 THEN COALESCE(total_tokens, 0) ELSE 0 END) AS unpriced_tokens,
               SUM(CASE WHEN COALESCE(cost_usd, 0) = 0 AND COALESCE(total_tokens, 0) > 0 THEN 1 ELSE 0 END)
                 AS unpriced_calls
        FROM messages WHERE session_id = ? AND cost_source IS NOT NULL AND usage_counted = 1 AND is_synthetic = 0
    """, (session_id,))[0]
    zone = facts.marker(conn, "timezone").get("timezone")
    times = [m["local_time"] for m in messages if m["local_time"]]
    return {"session": session, "messages": messages, "entries": entries, "calls": calls,
            "off_path": off_path, "usage": usage, "timezone": zone or "UTC",
            "first": min(times)[:19] if times else "", "last": max(times)[:19] if times else "",
            "related": related(conn, session)}


def _itemized(conn: sqlite3.Connection, session_id: int) -> bool:
    """is_itemized of a whole session, read without loading it: its assistant rows' native roles,
    then the rows of the others until one is a single item."""
    natives = [r[0] for r in conn.execute(
        "SELECT DISTINCT native_role FROM messages WHERE session_id = ? AND role = 'assistant' "
        "AND content_blocks IS NOT NULL", (session_id,))]
    if len(natives) < 2:
        return False
    for native, blocks in conn.execute(
            "SELECT native_role, content_blocks FROM messages WHERE session_id = ? AND role = 'assistant' "
            "AND content_blocks IS NOT NULL AND native_role IS NOT NULL AND native_role <> 'assistant'",
            (session_id,)):
        if model_item({"role": "assistant", "native_role": native}, _blocks(blocks)):
            return True
    return False


# is_usage_only, in SQL
USAGE_ONLY = ("(role = 'assistant' AND content_blocks IS NULL AND (total_tokens IS NOT NULL OR input_tokens IS NOT NULL "
              "OR output_tokens IS NOT NULL OR cost_usd IS NOT NULL))")


def _restart_points(conn: sqlite3.Connection, session_id: int, itemized: bool):
    """The rows of the active path, the last first, where a build may begin
    and give the turns the whole one gives from there on (read backwards, a few rows, by the
    session's seq index): a message with content, no tool result, no error (a retry would fold under
    the one before), that starts a card of its own whatever came before it (where the kind writes
    each item as a row: a prompt or context, or an assistant row whose parent, the row just before
    it, is no assistant item); or a run's usage line (held to the end of its run, and the one before
    it shown where it comes) whose child, the row after it, is a prompt."""
    rows = conn.execute(
        f"SELECT seq, id, timestamp, role, is_context, content_blocks IS NULL, is_error, error_message IS NOT NULL, "
        f"message_uuid, parent_message_uuid, {USAGE_ONLY}, native_role FROM messages WHERE session_id = ? "
        "AND is_active_path = 1 AND seq IS NOT NULL ORDER BY seq DESC, id DESC", (session_id,))
    later = None
    current = next(rows, None)
    try:
        while current is not None:
            previous = next(rows, None)
            seq, row_id, ts, role, context, empty, error, error_text, uuid, parent, usage_only, native = current
            if usage_only and native == "run":
                starts = later is not None and later[9] == uuid and later[3] != "assistant"
            else:
                starts = role not in RESULT_ROLES and not empty and not error and not error_text
                if starts and itemized and role == "assistant" and not context:
                    starts = previous is not None and previous[8] == parent and (
                        previous[3] != "assistant" or bool(previous[4]) or bool(previous[10]))
            if starts:
                yield {"seq": seq, "id": row_id, "timestamp": ts, "run": bool(usage_only and native == "run")}
            later, current = current, previous
    finally:
        rows.close()


TAIL_TRIES = 12  # restart points tried before a live answer builds the whole conversation


def load_tail(conn: sqlite3.Connection, session_id: int, key: str | None, replay: int) -> dict | None:
    """:func:`load`'s data for the end of the active path only, for a live page whose last card is
    ``key``: the rows from the nearest restart point (:func:`_restart_points`) from which the build
    holds ``replay`` cards up to ``key`` and nothing before it is drawn after it (no tool result or
    call of the same id as a call after it, no copy, no run's usage line held past it) and the path
    from the leaf goes back to it through the rows after it; its turns are then those the whole
    conversation's build ends with, card for card (``shown_before``: the messages before it, for
    the totals). None: no such point near enough (the caller loads everything)."""
    found = re.fullmatch(r"m(\d+)", key or "")
    if not found:
        return None
    anchor = _rows(conn, "SELECT seq, id FROM messages WHERE id = ? AND session_id = ? AND is_active_path = 1 "
                         "AND seq IS NOT NULL", (int(found.group(1)), session_id))
    if not anchor:
        return None
    session = _rows(conn, f"SELECT *, {_rule_title(conn)} FROM sessions WHERE id = ?", (session_id,))[0]
    itemized = _itemized(conn, session_id)
    for tries, point in enumerate(_restart_points(conn, session_id, itemized)):
        if tries >= TAIL_TRIES:
            return None
        data = _tail_from(conn, session, point, itemized)
        if data is None:
            continue
        turns = _Deferred(data, False, lambda table, row_id: None, lambda session_id, message_id=None: None,
                          True).turns()
        keys = [t["id"] for t in turns if t.get("id")]
        # (a first turn that is a retry's error could fold under the one before the point: not a point)
        if key in keys and keys.index(key) >= replay - 1 and turns[0].get("signature") is None:
            full = _around(conn, session, data["messages"], data["entries"])
            full["itemized"] = itemized
            full["shown_before"] = data["shown_before"]
            return full
    return None


def _tail_from(conn: sqlite3.Connection, session: dict, point: dict, itemized: bool) -> dict | None:
    """The active path's rows from ``point`` on, or None when something before it is drawn after it."""
    session_id, seq, first_id, ts = session["id"], point["seq"], point["id"], point["timestamp"]
    before = "session_id = ? AND is_active_path = 1 AND (seq < ? OR (seq = ? AND id < ?))"
    after = "session_id = ? AND is_active_path = 1 AND (seq > ? OR (seq = ? AND id >= ?))"
    bound = (session_id, seq, seq, first_id)
    held = "0" if point["run"] else (f"(native_role = 'run' AND {USAGE_ONLY} AND (? IS NULL OR "
                                     "replace(timestamp, 'T', ' ') >= replace(?, 'T', ' ')))")
    if conn.execute(f"SELECT 1 FROM messages WHERE {before} AND (calls_elsewhere = 1 OR {held}) LIMIT 1",
                    bound + (() if point["run"] else (ts, ts))).fetchone():
        return None  # a copy, or a run's usage line shown after its run: drawn after the point
    messages = _rows(conn, f"SELECT {_message_columns(conn)} FROM messages WHERE {after} ORDER BY seq, id", bound)
    entries = _rows(conn, f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND is_active_path = 1 "
                          "AND seq > ? ORDER BY seq, id", (session_id, seq))
    if session.get("leaf_entry_id") is None and conn.execute(
            "SELECT 1 FROM entries WHERE session_id = ? AND is_active_path = 1 AND seq = ? LIMIT 1",
            (session_id, seq)).fetchone():
        return None  # (in line order, an entry on the point's own line may go before it or after it)
    calls_here = set()
    for m in messages:
        blocks = _blocks(m["content_blocks"]) if m["role"] == "assistant" else None
        for block in blocks if isinstance(blocks, list) else []:
            if isinstance(block, dict) and block.get("type") == "toolCall" and isinstance(block.get("id"), str):
                calls_here.add(block["id"])
    answered = {m["tool_call_id"] for m in messages if m["role"] in RESULT_ROLES and m.get("tool_call_id")}
    if not answered <= calls_here:
        return None  # a result of a call before the point: drawn under it
    if calls_here:
        marks = ", ".join("?" * len(calls_here))
        ids = tuple(sorted(calls_here))
        results = ", ".join(f"'{r}'" for r in RESULT_ROLES)
        if conn.execute(f"SELECT 1 FROM messages WHERE {before} AND role IN ({results}) AND tool_call_id IN ({marks}) "
                        "LIMIT 1", bound + ids).fetchone() or conn.execute(
                f"SELECT 1 FROM tool_call_rows t JOIN messages c ON c.id = t.message_id WHERE t.session_id = ? "
                f"AND t.call_id IN ({marks}) AND c.is_active_path = 1 AND (c.seq < ? OR (c.seq = ? AND c.id < ?)) "
                "LIMIT 1", (session_id,) + ids + bound[1:]).fetchone():
            return None  # a call of the same id before the point: its result goes there
    data = {"session": session, "messages": messages, "entries": entries, "itemized": itemized,
            "calls": {}, "off_path": {}, "related": {}}
    if session.get("leaf_entry_id") is not None:
        walked = _walk(*_items(data), session["leaf_entry_id"])
        if len(walked) != len(messages) + len(entries) or not walked or walked[0] != messages[0]["message_uuid"]:
            return None  # the path from the leaf leaves these rows before the point, or misses some of them
    data["shown_before"] = conn.execute(f"SELECT COUNT(*) FROM messages WHERE {before}", bound).fetchone()[0]
    return data


# -- the session's relatives ---------------------------------------------------------------------

def _best(rows: list[dict], session: dict) -> dict | None:
    """Of sessions with the same id, the one on this session's server and agent."""
    if not rows:
        return None
    return sorted(rows, key=lambda r: (r["server"] != session.get("server"), r["agent_id"] != session.get("agent_id"),
                                       r["id"]))[0]


def _file_uuid(path) -> str | None:
    """The session id in a transcript file's name (``<uuid>.jsonl``, ``<ISO>_<uuid>.jsonl``)."""
    if not isinstance(path, str):
        return None
    found = _UUID.findall(path.replace("\\", "/").rsplit("/", 1)[-1])
    return found[-1].lower() if found else None


def is_subagent(session: dict) -> bool:
    """A session some other session's agent started: a spawning tool call, OpenClaw's spawnedBy
    or a ``:subagent:`` session key, Codex's ``source.subagent``."""
    header = session.get("header_json")
    return bool(session.get("parent_call_id") or session.get("spawned_by") or session.get("session_type") == "subagent"
                or ":subagent:" in (session.get("session_key") or "")
                or (session.get("parent_session_uuid") and (session.get("header_subagent") or (
                    isinstance(header, str) and '"subagent"' in header))))


def related(conn: sqlite3.Connection, session: dict) -> dict:
    """The sessions this one is linked to, as the archive knows them:

    - ``parent``: the session this one is a sub-agent or fork of (``parent_session_uuid``; OpenClaw's
      ``spawnedBy`` session key; OpenClaw's ``parentSession`` file of a fork), and ``parent_message``,
      the parent's message holding the tool call that spawned it (``parent_call_id``);
    - ``children``: sessions whose parent this one is, each with the ``parent_call_id`` of its
      spawning call when known;
    - ``previous`` / ``next``: the reset or rollover chain (``previous_session_id``,
      ``next_session_id``), each with its ``reason``.
    """
    out: dict = {"parent": None, "parent_message": None, "parent_kind": None, "children": [],
                 "previous": None, "next": None}
    cols = _columns(conn, "sessions")
    link_cols = ", ".join(c if c in cols else f"NULL AS {c}" for c in SESSION_LINK_COLUMNS.split(", ")) + (
        """, instr(header_json, '"subagent"') > 0 AS header_subagent""" if "header_json" in cols else
        ", NULL AS header_subagent") + ", " + _rule_title(conn)
    me = session["id"]

    def sessions(where: str, params) -> list[dict]:
        return _rows(conn, f"SELECT {link_cols} FROM sessions WHERE ({where}) AND id != ?", (*params, me))

    parent = None
    if session.get("parent_session_uuid"):
        parent = _best(sessions("session_uuid = ?", (session["parent_session_uuid"],)), session)
    if parent is None and session.get("parent_session"):  # an OpenClaw fork: the parent's file
        found = sessions("file_path = ?", (session["parent_session"],))
        uuid = _file_uuid(session["parent_session"])
        if not found and uuid:
            found = sessions("session_uuid = ?", (uuid,))
        parent = _best(found, session)
    if parent is None and session.get("spawned_by") and "session_key" in cols:
        # OpenClaw's spawnedBy: the spawner's session key; of its sessions, the one running then
        found = _rows(conn, f"SELECT {link_cols} FROM sessions WHERE session_key = ? AND server IS ? AND id != ? "
                            "AND (first_message_at IS NULL OR first_message_at <= COALESCE(?, first_message_at)) "
                            "ORDER BY first_message_at DESC LIMIT 1",
                      (session["spawned_by"], session.get("server"), me, session.get("first_message_at")))
        parent = found[0] if found else None
    if parent is not None:
        out["parent"] = parent
        out["parent_kind"] = "sub-agent" if is_subagent(session) else "fork"
        if session.get("parent_call_id"):
            hit = conn.execute("SELECT message_id FROM tool_calls WHERE session_id = ? AND call_id = ? LIMIT 1",
                               (parent["id"], session["parent_call_id"])).fetchone()
            out["parent_message"] = hit[0] if hit else None

    children: dict[int, dict] = {}
    if session.get("session_uuid") and "parent_session_uuid" in cols:
        for r in sessions("parent_session_uuid = ?", (session["session_uuid"],)):
            children[r["id"]] = r
    if (session.get("file_path") or session.get("session_uuid")) and "parent_session" in cols:
        uuid = (session.get("session_uuid") or "").lower()
        for r in _rows(conn, f"SELECT {link_cols} FROM sessions WHERE parent_session IS NOT NULL AND id != ?", (me,)):
            if r["parent_session"] == session.get("file_path") or (uuid and _file_uuid(r["parent_session"]) == uuid):
                children.setdefault(r["id"], r)
    if session.get("session_key") and "spawned_by" in cols:
        # OpenClaw's spawnedBy names a session key, which every reset of it shares: the children of this
        # one are those started while it was the key's session (until the key's next session began)
        start = session.get("first_message_at")
        later = conn.execute("SELECT MIN(first_message_at) FROM sessions WHERE session_key = ? AND server IS ? "
                             "AND first_message_at > ?", (session["session_key"], session.get("server"),
                                                          start or "")).fetchone()[0] if start else None
        for r in sessions("spawned_by = ? AND server IS ? AND (? IS NULL OR first_message_at >= ?) "
                          "AND (? IS NULL OR first_message_at < ?)",
                          (session["session_key"], session.get("server"), start, start, later, later)):
            children.setdefault(r["id"], r)
    out["children"] = sorted(children.values(), key=lambda r: (r["first_message_at"] or "", r["id"]))
    out["children_total"] = len(out["children"])

    for key, column in (("previous", "previous_session_id"), ("next", "next_session_id")):
        if session.get(column):  # (a column the snapshot lacks is not in the row either)
            out[key] = _best(sessions("session_uuid = ?", (session[column],)), session)
    return out


def session_label(s: dict | None) -> str:
    if not s:
        return ""
    found = s.get("rule_title") or s.get("title") or s.get("label") or s.get("display_name")
    if found:
        return found
    # never a bare id as a heading: what it is, and when
    day = s.get("day") or (str(s.get("last_message_at") or s.get("started_at") or "")[:10] or None)
    return f"Untitled {s.get('source') or s.get('agent_id') or 'agent'} session" + (f" of {day}" if day else "")


# -- the order ----------------------------------------------------------------------------------

def ordered(data: dict, everything: bool) -> list[tuple[str, dict]]:
    """(kind, row) along the active path, root first. With ``everything``, each
    abandoned branch follows the entry it grew from (depth first, line order)."""
    items, parents = _items(data)

    def line_order(key):
        row = items[key][1]
        return (row["seq"] if row["seq"] is not None else 0, row["id"])

    path = _walk(items, parents, data["session"].get("leaf_entry_id"))
    seen = set(path)
    if not path:  # no leaf known: line order
        return [items[k] for k in sorted(items, key=line_order)]
    children: dict[str | None, list[str]] = {}
    for key in sorted(items, key=line_order):
        if key not in seen:
            children.setdefault(parents[key], []).append(key)
    out: list[tuple[str, dict]] = []
    placed: set[str] = set()

    def branch(root: str) -> None:
        stack = [root]
        while stack:
            key = stack.pop()
            if key in placed:
                continue
            placed.add(key)
            out.append(items[key])
            stack.extend(reversed(children.get(key, [])))

    for key in path:
        out.append(items[key])
        placed.add(key)
        if everything:
            for child in children.get(key, []):
                branch(child)
    rest = [k for k in sorted(items, key=line_order) if k not in placed]
    if everything:
        out.extend(items[k] for k in rest)
    else:  # on the active path but not reachable from the leaf (should not happen): keep them
        out.extend(items[k] for k in rest if items[k][1]["is_active_path"])
    return out


def _items(data: dict) -> tuple[dict, dict]:
    """The rows by uuid, as (kind, row), and each one's parent uuid."""
    items: dict[str, tuple[str, dict]] = {}
    parents: dict[str, str | None] = {}
    for m in data["messages"]:
        items[m["message_uuid"]] = ("message", m)
        parents[m["message_uuid"]] = m["parent_message_uuid"]
    for e in data["entries"]:
        items[e["entry_uuid"]] = ("entry", e)
        parents[e["entry_uuid"]] = e["parent_uuid"]
    return items, parents


def _walk(items: dict, parents: dict, leaf=None) -> list[str]:
    """The path from ``leaf`` back through the parents, among ``items``, root first."""
    path: list[str] = []
    seen: set[str] = set()
    node = leaf
    while node is not None and node in items and node not in seen:
        seen.add(node)
        path.append(node)
        node = parents.get(node)
    path.reverse()
    return path


# -- turns --------------------------------------------------------------------------------------

def _time(row: dict) -> str:
    value = row.get("local_time") or row.get("timestamp") or ""
    return value[:19]


def is_copy(m: dict) -> bool:
    """A re-appended copy of a message: its tool calls are attached to another copy, or (an
    assistant message) its model call's usage is counted on another."""
    return bool(m.get("calls_elsewhere")) or (m.get("role") == "assistant" and m.get("usage_counted") == 0)


def _usage_line(m: dict, calls: int = 1, unpriced: int = 0) -> Markup:
    """Model, tokens and cost of a model call, or of the ``calls`` model calls of one card (their
    sums; ``unpriced`` of them have no cost) (built with escape() and plain strings: it runs for
    every message of the page)."""
    parts = []
    if m.get("model"):
        model = (f"{m['provider']}/" if m.get("provider") else "") + str(m["model"])
        parts.append(f'<span class="ab-model">{escape(model)}</span>')
    if calls > 1:
        parts.append(f'<span class="ab-calls" title="the usage of each is summed here">{calls:,} model calls</span>')
    tokens = m.get("total_tokens")
    if m.get("cost_source") is not None and (tokens or m.get("input_tokens") or m.get("output_tokens")):
        parts.append('<span class="ab-tokens" title="input / output / cache read / cache write">'
                     f'{_int(tokens):,} tokens ({_int(m.get("input_tokens")):,} in, {_int(m.get("output_tokens")):,} '
                     f'out, {_int(m.get("cache_read_tokens")):,} cache read, {_int(m.get("cache_write_tokens")):,} '
                     'cache write)</span>')
        label = money(m.get("cost_usd"), tokens or m.get("input_tokens") or m.get("output_tokens"))
        css = "ab-unpriced" if label == "unpriced" else "ab-cost"
        parts.append(f'<span class="{css}">{escape(label)}</span>')
        if unpriced and label != "unpriced":
            parts.append(f'<span class="ab-unpriced">{unpriced:,} of the calls unpriced</span>')
        if not m.get("usage_counted"):
            parts.append('<span class="ab-dim" title="a re-appended copy of an earlier model call">'
                         'copy: not counted</span>')
    if m.get("stop_reason") and m["stop_reason"] not in NORMAL_STOPS:
        parts.append(f'<span class="ab-dim">stop: {escape(m["stop_reason"])}</span>')
    if m.get("is_synthetic"):
        parts.append('<span class="ab-dim">synthetic (not from a model)</span>')
    return Markup(" · ".join(parts))


USAGE_COLUMNS = ("total_tokens", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def has_usage(row: dict) -> bool:
    """A row that carries its model call's usage."""
    return row.get("cost_source") is not None and bool(
        row.get("total_tokens") or row.get("input_tokens") or row.get("output_tokens"))


def group_usage_line(rows: list[dict]) -> Markup:
    """One usage line for the rows of one card: the usage of the model call whose usage is on one
    of them, or the sums of the calls' (each counted once: copies left out) when several are."""
    used = [r for r in rows if has_usage(r)]
    counted = [r for r in used if r.get("usage_counted")] or used
    merged = dict(used[-1] if used else next((r for r in reversed(rows) if r.get("model")), rows[-1]))
    if not merged.get("model"):
        named = next((r for r in reversed(rows) if r.get("model")), None)
        if named is not None:
            merged.update(model=named["model"], provider=named.get("provider"))
    unpriced = 0
    if len(counted) > 1:
        for column in USAGE_COLUMNS:
            merged[column] = sum(_int(r.get(column)) for r in counted)
        costs = [r["cost_usd"] for r in counted if r.get("cost_usd")]
        merged["cost_usd"] = sum(costs) if costs else None
        merged["usage_counted"] = 1 if any(r.get("usage_counted") for r in counted) else 0
        unpriced = len(counted) - len(costs)
    merged["stop_reason"] = next((r["stop_reason"] for r in reversed(rows) if r.get("stop_reason")), None)
    merged["is_synthetic"] = any(r.get("is_synthetic") for r in rows)
    return _usage_line(merged, calls=len(counted), unpriced=unpriced)


def _int(value) -> int:
    return value if isinstance(value, int) else int(value or 0) if isinstance(value, float) else 0


def _result_meta(call: dict | None, result: dict) -> Markup:
    bits = []
    exit_code = call.get("exit_code") if call else None
    duration = call.get("duration_ms") if call else None
    exit_code = result.get("exit_code") if exit_code is None else exit_code
    duration = result.get("duration_ms") if duration is None else duration
    if exit_code is not None:
        bits.append(f"exit {exit_code}")
    if isinstance(duration, (int, float)):
        bits.append(f"{duration:,} ms")
    bits.append(_time(result)[11:])
    return Markup(f'<span class="ab-dim">{escape(" · ".join(b for b in bits if b))}</span>')


def _blocks(value):
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


def _same(value) -> str:
    """A value's identity for telling repeated errors apart (ids and times left out by the caller)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


class _Builder:
    """Turns of one session, as HTML: which rows make a turn (an assistant card, a tool's result
    under its call, a marker, repeated errors folded) is decided here once; how each part is drawn
    is the ``draw_*`` methods', which session_export's Markdown builder draws as text instead."""

    def __init__(self, data: dict, everything: bool, row_href, session_href, standalone: bool):
        self.data = data
        self.everything = everything
        self.row_href = row_href if not standalone else (lambda table, row_id: None)
        self.session_href = session_href if not standalone else (lambda session_id, message_id=None: None)
        self.standalone = standalone
        self.base = (STANDALONE if standalone else VIEW).but(budget=richtext.Budget(
            HIGHLIGHT_EXPORT_CHARS if standalone else HIGHLIGHT_PAGE_CHARS))
        self.results: dict[str, dict] = {}
        self.shown_at: dict[str, int] = {}  # a result's tool call id -> the id of the message it is shown under
        self.used: set = set()
        self.drawn: list[int] = []  # the ids of the results drawn under their calls, in order
        self.children_by_call: dict[str, list[dict]] = {}
        for child in data.get("related", {}).get("children", []):
            if child.get("parent_call_id"):
                self.children_by_call.setdefault(child["parent_call_id"], []).append(child)
        # (a live page's answer builds the end of a conversation only: whether it is itemized is the whole one's)
        self.itemized = data["itemized"] if "itemized" in data else is_itemized(data["messages"])

    def options(self, message_id) -> render.Options:
        return self.base.but(more_href=self.row_href("messages", message_id))

    def _child_links(self, call_id) -> Markup:
        links = []
        for child in self.children_by_call.get(call_id, []) if isinstance(call_id, str) else []:
            href = self.session_href(child["id"])
            label = session_label(child)
            links.append(Markup('<div class="ab-subagent-link">↳ sub-agent session: {}</div>').format(
                Markup('<a href="{}">{}</a>').format(href, label) if href else label))
        return Markup("").join(links)

    # -- how a part is drawn ------------------------------------------------------------------

    def draw_text(self, text: str, options: render.Options):
        return render.text(text, options)

    def draw_result(self, content, result: dict, call: dict | None, options: render.Options, anchor=None):
        return render.tool_result(content, options, is_error=bool(result["is_error"]), name=result.get("tool_name"),
                                  meta=_result_meta(call, result), anchor=anchor)

    def draw_blocks(self, blocks, options: render.Options):
        return render.render_blocks(blocks, options)

    def draw_block(self, block, options: render.Options):
        return render.render_block(block, options)

    def draw_call(self, block: dict, options: render.Options, call_id):
        return render.tool_call(block, options, extra=self._child_links(call_id))

    def draw_elsewhere(self, where):
        return Markup('<div class="ab-result ab-dim">result shown with {}</div>').format(
            Markup('<a href="#m{}">the first copy</a>').format(where) if where else "another copy")

    def draw_no_result(self):
        return Markup('<div class="ab-result ab-dim">no result recorded</div>')

    def draw_error(self, text: str, options: render.Options):
        return render.error_text(text, options)

    def draw_parts(self, parts: list):
        return Markup('<div class="ab-blocks">{}</div>').format(Markup("").join(parts))

    def draw_context(self, row: dict, html):
        first = render._first_line(row.get("text_preview") or "", 90)
        return Markup('<details class="ab-context"><summary><span class="ab-badge ab-badge-context" title="text the agent put into the conversation (instructions, files, a summary)">context'
                      '</span> <span class="ab-dim">injected, not typed by anyone: '
                      '<span class="ab-preview">{}</span></span>'
                      '</summary>{}'
                      '</details>').format(first or row["role"] or "?", html)

    def draw_card(self, parts: list[dict]):
        body = []
        for i, p in enumerate(parts):
            link = Markup('<a class="ab-row-link" href="{}" title="the message row">row</a>').format(
                p["row_href"]) if i and p["row_href"] else ""
            body.append(Markup('<div class="ab-part ab-part-{}{}"{}>{}{}</div>').format(
                p["part"], " ab-part-error" if p["error"] else "",
                Markup(' id="{}"').format(p["id"]) if i else "", link, p["html"]))
        return Markup('<div class="ab-parts">{}</div>').format(Markup("").join(body))

    def draw_usage(self, row: dict):
        return _usage_line(row)

    def draw_group_usage(self, rows: list[dict]):
        return group_usage_line(rows)

    def draw_entry(self, row: dict):
        return _entry_html(row, self.base)

    def draw_branch(self, entries: int, all_href):
        return Markup('<div class="ab-marker ab-branch"><strong>Branch point</strong>: {:,} entr{} on an abandoned '
                      'branch went on from here{}</div>').format(
            entries, "y" if entries == 1 else "ies",
            Markup(' (<a href="{}">show every branch</a>)').format(all_href) if all_href else "")

    # -- which rows make a turn ----------------------------------------------------------------

    def _result_html(self, result: dict, call_id, anchor: bool):
        rblocks = _blocks(result["content_blocks"])
        return self.draw_result(rblocks if rblocks is not None else result.get("text_preview") or "", result,
                                self.data["calls"].get(call_id), self.options(result["id"]),
                                anchor=f"m{result['id']}" if anchor else None)

    def message(self, m: dict) -> tuple[Markup, tuple | None]:
        """A message's HTML, and its error signature (None unless it is an error that a retry could
        repeat word for word)."""
        blocks = _blocks(m["content_blocks"])
        options = self.options(m["id"])
        if blocks is None:  # bashExecution and other content-less messages
            return self.draw_text(m.get("text_preview") or "", options), None
        if m["role"] in RESULT_ROLES:
            html = self.draw_result(blocks, m, self.data["calls"].get(m.get("tool_call_id")), options)
            return html, (("result", m.get("tool_name"), _same(blocks)) if m["is_error"] else None)
        if not isinstance(blocks, list):
            return self.draw_blocks(blocks, options), None
        parts = []
        calls = []  # (name, arguments, result content, is_error) of each tool call
        texts = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                call_id = block.get("id") if isinstance(block.get("id"), str) else None
                parts.append(self.draw_call(block, options, call_id))
                result = self.results.get(call_id) if call_id else None
                if result is not None and result["id"] not in self.used:
                    self.used.add(result["id"])
                    self.drawn.append(result["id"])
                    self.shown_at[call_id] = m["id"]
                    parts.append(self._result_html(result, call_id, anchor=True))
                    calls.append((block.get("name"), _same(block.get("arguments")), result["content_blocks"],
                                  bool(result["is_error"])))
                elif result is not None:  # a copy of a call whose result is shown with the first copy
                    parts.append(self.draw_elsewhere(self.shown_at.get(call_id)))
                    calls.append(None)
                else:
                    parts.append(self.draw_no_result())
                    calls.append(None)
            else:
                parts.append(self.draw_block(block, options))
                if isinstance(block, dict) and block.get("type") == "text":
                    texts.append(block.get("text"))
        if m.get("error_message"):
            parts.append(self.draw_error(m["error_message"], options))
        signature = None
        if m.get("error_message") and not calls:
            signature = ("model", m["error_message"], _same(texts))
        elif calls and all(c is not None and c[3] for c in calls):
            signature = ("tool", _same(calls), _same(texts))
        return self.draw_parts(parts), signature

    def message_turn(self, row: dict) -> dict:
        role = row["role"] or "?"
        off = not row["is_active_path"]
        context = bool(row.get("is_context")) or role in CONTEXT_ROLES
        drawn = len(self.drawn)
        html, signature = self.message(row)
        item = model_item(row, _blocks(row["content_blocks"]))
        css = "context" if context else item[0] if item else ROLE_CSS.get(role, "other")
        label = item[1] if item else ROLE_LABEL.get(role, role)
        if context:
            html = self.draw_context(row, html)
        badges = [COPY_BADGE] if is_copy(row) else []
        return {
            "kind": "message", "css": css, "role": label, "id": f"m{row['id']}", "time": _time(row),
            # (a model is a model call's: a prompt the agent-server stamps with its run's model shows none)
            "usage": self.draw_usage(row) if role == "assistant" or has_usage(row) else "", "off": off,
            "error": bool(row["is_error"]) or bool(row.get("error_message")),
            "row_href": self.row_href("messages", row["id"]), "badges": Markup(" ").join(badges),
            "html": html, "signature": signature, "repeats": [], "ts": row.get("timestamp"),
            # a part of an assistant card (group_items): the row, and what it holds
            "row": row, "part": item[0] if item else "text",
            "groupable": self.itemized and role == "assistant" and not context,
            # the message rows it shows (its own, and the results drawn under its calls), and whether it is a copy
            "ids": [row["id"], *self.drawn[drawn:]], "copy": is_copy(row),
        }

    def card(self, parts: list[dict]) -> dict:
        """One assistant card of the message turns ``parts`` (rows of one kind that writes each
        item as a row): their thinking, text and tool calls in order, each part keeping its anchor
        (the first one's is the card's) and a link to its row, one usage line."""
        rows = [p["row"] for p in parts]
        signatures = [p["signature"] for p in parts]
        copy = any(is_copy(r) for r in rows)
        return dict(parts[0], css="assistant", role="assistant", usage=self.draw_group_usage(rows),
                    error=any(p["error"] for p in parts), parts=len(parts),
                    badges=COPY_BADGE if copy else Markup(""), copy=copy,
                    ids=[i for p in parts for i in p["ids"]], html=self.draw_card(parts),
                    signature=("card", tuple(signatures)) if all(s is not None for s in signatures) else None)

    def group_items(self, turns: list[dict]) -> list[dict]:
        """The assistant rows between two inputs (a prompt, a tool's output (``input``: shown under
        its call), context, a marker, a usage line) as one card: the rows of one model call, or of
        the model calls between two inputs (the snapshot keeps no call of its own for a row: a
        Codex model call's usage is on the last row it wrote, an agent-server run's on a row of
        its own)."""
        out: list[dict] = []
        run: list[dict] = []
        for turn in turns + [None]:
            if turn is not None and turn.get("groupable") and (not run or run[-1]["off"] == turn["off"]):
                run.append(turn)
                continue
            if run:
                out.append(self.card(run))
                run = []
            if turn is not None:
                if turn.get("groupable"):
                    run.append(turn)
                elif turn["kind"] != "input":
                    out.append(turn)
        return out

    def usage_turn(self, row: dict) -> dict:
        """A model call kept as its usage alone (a run, a token count): one line (what the model
        calls cost), no content of its own."""
        note = row.get("text_preview") or ""
        return {"kind": "usage", "id": f"m{row['id']}", "role": "usage", "time": _time(row),
                "off": not row["is_active_path"], "error": bool(row["is_error"]),
                "usage": self.draw_usage(row), "note": note, "row_href": self.row_href("messages", row["id"]),
                "signature": None, "repeats": [], "ts": row.get("timestamp"), "ids": [row["id"]],
                "run": row.get("native_role") == "run"}

    def turns(self) -> list[dict]:
        items = ordered(self.data, self.everything)
        for kind, row in items:
            if kind == "message" and row["role"] in RESULT_ROLES and row.get("tool_call_id"):
                self.results.setdefault(row["tool_call_id"], row)
        turns: list[dict] = []
        all_href = None if self.standalone else self.data.get("all_href")
        held: dict | None = None  # an agent-server run's usage line, shown where its run ends

        def add(turn: dict) -> None:
            nonlocal held
            if held is not None and (turn.get("run") or _later(turn.get("ts"), held["ts"])):
                turns.append(held)
                held = None
            if turn.get("run") and not turn["off"]:
                # its row sits where the run started (its prompt's parent); its time is when the run
                # completed: it goes after the run's last turn, before the first one after that time
                held = turn
            else:
                turns.append(turn)

        for kind, row in items:
            off = not row["is_active_path"]
            branch = None if off else self.data["off_path"].get(
                row["entry_uuid"] if kind == "entry" else row["message_uuid"])
            if kind == "entry":
                event = (row["entry_type"], row.get("custom_type")) in MARKED_EVENTS
                if event and not self.everything and turns and turns[-1].get("compaction") == "compacted":
                    pass  # Codex's context_compacted event after the compacted line it announces: one marker
                elif self.everything or row["entry_type"] in MARKED_ENTRIES or event:
                    add({"kind": "marker", "html": self.draw_entry(row), "off": off, "entry_id": row["id"],
                         "id": f"e{row['id']}", "signature": None, "ts": row.get("timestamp"),
                         "compaction": row.get("custom_type") if event else row["entry_type"]})
            elif row["id"] not in self.used:  # (a tool result already shown under its call is not repeated)
                self.used.add(row["id"])
                if is_usage_only(row):
                    add(self.usage_turn(row))
                else:
                    add(self.message_turn(row))
            elif self.itemized:  # a tool's output, shown under its call: an input all the same (group_items)
                turns.append({"kind": "input"})
            if branch:
                turns.append({"kind": "marker", "off": False, "id": None, "signature": None,
                              "html": self.draw_branch(branch, all_href), "branch": branch})
        if held is not None:
            turns.append(held)
        if self.itemized:
            turns = self.group_items(turns)
        return collapse_repeats(turns)


class _Later:
    """A part's drawing put off (a :class:`_Deferred` builder's): made by :func:`drawn`."""

    __slots__ = ("draw", "args", "kwargs")

    def __init__(self, draw, args, kwargs):
        self.draw, self.args, self.kwargs = draw, args, kwargs


def drawn(value):
    """``value`` (a turn, a list of turns...) with every drawing it holds made, in order (the
    highlighting budget is spent in that order, as a page drawing them would)."""
    if isinstance(value, _Later):
        return value.draw(*drawn(list(value.args)), **drawn(value.kwargs))
    if isinstance(value, list):
        return [drawn(v) for v in value]
    if isinstance(value, dict):
        return {k: drawn(v) for k, v in value.items()}
    return value


class _Deferred(_Builder):
    """The same turns as the HTML builder's, every drawing put off until :func:`drawn`: a live
    page's answer groups the whole conversation (cheap) and draws only the cards it sends."""


def _put_off(name: str):
    draw = getattr(_Builder, name)

    def method(self, *args, **kwargs):
        return _Later(draw.__get__(self), args, kwargs)

    method.__name__ = name
    return method


for _name in [n for n in vars(_Builder) if n.startswith("draw_")]:
    setattr(_Deferred, _name, _put_off(_name))


def _later(ts, than) -> bool:
    """A timestamp after another (the snapshot's UTC text, either ISO separator)."""
    if not isinstance(ts, str) or not isinstance(than, str):
        return False
    return ts.replace("T", " ") > than.replace("T", " ")


COPY_BADGE = Markup('<span class="ab-badge ab-badge-copy" title="a re-appended copy of an earlier message: its tool '
                    'calls and usage are counted on the other copy">copy</span>')


def collapse_repeats(turns: list[dict]) -> list[dict]:
    """Identical errors in a row (the same model error, or the same failing tool calls with the same
    output: a retry loop) become the first one with the others folded under it."""
    out: list[dict] = []
    for turn in turns:
        last = out[-1] if out else None
        if (turn.get("signature") is not None and last is not None and last.get("signature") == turn["signature"]
                and last.get("off") == turn.get("off")):
            last["repeats"].append(turn)
        else:
            out.append(turn)
    for turn in out:
        if turn.get("repeats"):
            turn["count"] = len(turn["repeats"]) + 1
            turn["last_time"] = turn["repeats"][-1]["time"]
    return out


def _entry_html(e: dict, options: render.Options = VIEW) -> Markup | None:
    kind = e["entry_type"]
    try:
        raw = json.loads(e["raw_json"]) if e.get("raw_json") else {}
    except ValueError:
        raw = {}
    if not isinstance(raw, dict):
        raw = {}
    if kind == "compaction":
        before = raw.get("tokensBefore")
        head = Markup("<strong>Compaction</strong>{}").format(
            f": {before:,} tokens summarized" if isinstance(before, int) else "")
        summary = raw.get("summary")
        body = render.prose(summary, options) if isinstance(summary, str) else Markup("")
        return Markup('<details class="ab-marker ab-compaction"><summary>{}</summary>{}</details>').format(head, body)
    if kind == "compacted" or (kind, e.get("custom_type")) in MARKED_EVENTS:
        # Codex: a compacted line (its summary in payload.message, the history that replaced the
        # conversation in payload.replacement_history), and the context_compacted event after it
        payload = raw.get("payload") if isinstance(raw.get("payload"), dict) else raw
        kept = payload.get("replacement_history")
        head = Markup("<strong>Compaction</strong>: the conversation so far was compacted{}").format(
            f" ({len(kept):,} item{'' if len(kept) == 1 else 's'} kept as its history)" if isinstance(kept, list)
            else "")
        summary = payload.get("message") if kind == "compacted" else None
        if isinstance(summary, str) and summary.strip():
            return Markup('<details class="ab-marker ab-compaction"><summary>{}</summary>{}</details>').format(
                head, render.prose(summary, options))
        return Markup('<div class="ab-marker ab-compaction">{}</div>').format(head)
    if kind == "branch_summary":
        summary = raw.get("summary")
        body = render.prose(summary, options) if isinstance(summary, str) else Markup("")
        return Markup('<details class="ab-marker ab-branch"><summary><strong>Branch summary</strong> '
                      '(the conversation returned here from another branch)</summary>{}</details>').format(body)
    if kind == "model_change":
        return Markup('<div class="ab-marker ab-small">model → {}{}</div>').format(
            f"{raw.get('provider')}/" if isinstance(raw.get("provider"), str) else "", raw.get("modelId") or "?")
    if kind == "thinking_level_change":
        return Markup('<div class="ab-marker ab-small">thinking level → {}</div>').format(
            raw.get("thinkingLevel") or "?")
    if kind == "reset":
        return Markup('<div class="ab-marker ab-reset"><strong>Reset</strong>: the session started over here</div>')
    return Markup('<details class="ab-marker ab-small"><summary>{}{}</summary>{}</details>').format(
        kind, f" ({e['custom_type']})" if e.get("custom_type") else "", render.pretty_json(raw, options))


def build(data: dict, everything: bool, row_href, self_href: str, session_href=None,
          standalone: bool = False, later: bool = False) -> dict:
    """The template's context: turns as HTML, and the totals. ``row_href(table, id)`` and
    ``session_href(id, message_id=None)`` make links; ``standalone``: a file on its own (the HTML
    export): no links out of it, nothing cut; ``later``: the turns' drawings are put off, for
    :func:`drawn` to make (those of the turns wanted only)."""
    data = dict(data, all_href=self_href + ("&" if "?" in self_href else "?") + "all=1")
    builder = (_Deferred if later else _Builder)(
        data, everything, row_href, session_href or (lambda session_id, message_id=None: None), standalone)
    turns = builder.turns()
    s = data["session"]
    u = data["usage"]
    totals = {
        "messages": s.get("message_count"), "shown": len(builder.used) + data.get("shown_before", 0),
        "calls": u["calls"] or 0,
        "input": s.get("input_tokens") or 0, "output": s.get("output_tokens") or 0,
        "cache_read": s.get("cache_read_tokens") or 0, "cache_write": s.get("cache_write_tokens") or 0,
        "total": s.get("total_tokens") or 0,
        # a session with no usage at all recorded no cost: never "$0" (it may have cost something)
        "cost": money(s.get("cost_usd"), s.get("total_tokens")) or (
            "$0" if u["calls"] or s.get("total_tokens") else "no usage recorded"),
        "unpriced_tokens": u["unpriced_tokens"] or 0, "unpriced_calls": u["unpriced_calls"] or 0,
    }
    return {"turns": turns, "totals": totals, "relatives": relatives(data, builder.session_href)}


def relatives(data: dict, session_href) -> dict:
    """The header's links to related sessions: (label, href or None, what it is)."""
    rel = data.get("related") or {}
    s = data["session"]
    out: dict = {"parent": None, "children": [], "previous": None, "next": None,
                 "subagent": is_subagent(s), "fork": False}
    if rel.get("parent"):
        p = rel["parent"]
        out["parent"] = {"label": session_label(p), "href": session_href(p["id"]), "kind": rel.get("parent_kind"),
                         "call_href": session_href(p["id"], rel["parent_message"]) if rel.get("parent_message")
                         else None}
        out["fork"] = rel.get("parent_kind") == "fork"
    elif s.get("parent_session_uuid") or s.get("parent_session"):
        out["parent"] = {"label": s.get("parent_session_uuid") or s.get("parent_session"), "href": None,
                         "kind": "sub-agent" if out["subagent"] else "fork", "call_href": None, "missing": True}
        out["fork"] = not out["subagent"]
    listed = rel.get("children") or []
    out["children_total"] = len(listed)
    out["children_more"] = max(0, len(listed) - MAX_LISTED_CHILDREN)
    for child in listed[:MAX_LISTED_CHILDREN]:
        out["children"].append({"label": session_label(child), "href": session_href(child["id"]),
                                "kind": "sub-agent" if is_subagent(child) else "fork",
                                "messages": child.get("message_count")})
    for key in ("previous", "next"):
        other = rel.get(key)
        if other:
            reason = (s if key == "previous" else other).get("reason")
            out[key] = {"label": session_label(other), "href": session_href(other["id"]),
                        "reason": reason if reason and reason != "initial" else None}
    return out
