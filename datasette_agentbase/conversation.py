"""The conversation view of one session: ``/-/agentbase/session/<id>``.

The active path in order (walked from the session's leaf entry back through
the parent ids, so it is right even when lines of several files interleave),
user / assistant / tool turns styled apart, each tool call followed by its
result, compactions, model changes and branch points marked, model, tokens and
cost per model call, and the session's totals (each model call once).
``?all=1`` adds the entries of abandoned branches, marked as such.
"""

from __future__ import annotations

import json
import sqlite3

from markupsafe import Markup

from . import render

MESSAGE_COLUMNS = (
    "id, message_uuid, parent_message_uuid, role, first_tool_call, has_thinking, is_error, provider, model, "
    "stop_reason, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_usd, "
    "cost_source, "
    "timestamp, local_time, is_active_path, is_synthetic, usage_counted, tool_call_id, tool_name, seq, "
    "text_preview, error_message, content_blocks"
)
ENTRY_COLUMNS = "id, entry_uuid, parent_uuid, entry_type, custom_type, timestamp, seq, is_active_path, " \
                "text_preview, raw_json"
# Entry types worth a line in the conversation (the rest: ?all=1).
MARKED_ENTRIES = {"compaction", "branch_summary", "model_change", "thinking_level_change", "reset",
                  "custom_message", "label", "session_info"}
VIEW = render.Options(limit=50_000, fold_lines=15, fold_chars=1500)


def _rows(conn: sqlite3.Connection, sql: str, params=()) -> list[dict]:
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def money(cost, tokens) -> str:
    """$ amount; 'unpriced' for tokens without a cost (not free); '' for nothing."""
    if cost:
        return f"${cost:.4f}" if cost >= 0.0001 else f"${cost:.2g}"
    return "unpriced" if tokens else ""


def load(conn: sqlite3.Connection, session_id: int, everything: bool = False) -> dict | None:
    """Everything the view shows, read in one go (runs in Datasette's SQL thread)."""
    found = _rows(conn, "SELECT * FROM sessions WHERE id = ?", (session_id,))
    if not found:
        return None
    session = found[0]
    where = "" if everything else " AND is_active_path = 1"
    messages = _rows(conn, f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ?{where} ORDER BY seq, id",
                     (session_id,))
    entries = _rows(conn, f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ?{where} ORDER BY seq, id",
                    (session_id,))
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
    zone = conn.execute("SELECT value FROM agentbase_snapshot WHERE key = 'timezone'").fetchone()
    times = [m["local_time"] for m in messages if m["local_time"]]
    return {"session": session, "messages": messages, "entries": entries, "calls": calls,
            "off_path": off_path, "usage": usage, "timezone": zone[0] if zone else "UTC",
            "first": min(times)[:19] if times else "", "last": max(times)[:19] if times else ""}


def ordered(data: dict, everything: bool) -> list[tuple[str, dict]]:
    """(kind, row) along the active path, root first. With ``everything``, each
    abandoned branch follows the entry it grew from (depth first, line order)."""
    items: dict[str, tuple[str, dict]] = {}
    parents: dict[str, str | None] = {}
    for m in data["messages"]:
        items[m["message_uuid"]] = ("message", m)
        parents[m["message_uuid"]] = m["parent_message_uuid"]
    for e in data["entries"]:
        items[e["entry_uuid"]] = ("entry", e)
        parents[e["entry_uuid"]] = e["parent_uuid"]

    def line_order(key):
        row = items[key][1]
        return (row["seq"] if row["seq"] is not None else 0, row["id"])

    path: list[str] = []
    seen: set[str] = set()
    node = data["session"].get("leaf_entry_id")
    while node is not None and node in items and node not in seen:
        seen.add(node)
        path.append(node)
        node = parents.get(node)
    path.reverse()
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


def _time(row: dict) -> str:
    value = row.get("local_time") or row.get("timestamp") or ""
    return value[:19]


def _usage_line(m: dict) -> Markup:
    parts = []
    if m.get("model"):
        parts.append(Markup('<span class="ab-model">{}{}</span>').format(
            f"{m['provider']}/" if m.get("provider") else "", m["model"]))
    tokens = m.get("total_tokens")
    if m.get("cost_source") is not None and (tokens or m.get("input_tokens") or m.get("output_tokens")):
        parts.append(Markup('<span class="ab-tokens" title="input / output / cache read / cache write">'
                            '{:,} tokens ({:,} in, {:,} out, {:,} cache read, {:,} cache write)</span>').format(
            tokens or 0, m.get("input_tokens") or 0, m.get("output_tokens") or 0,
            m.get("cache_read_tokens") or 0, m.get("cache_write_tokens") or 0))
        label = money(m.get("cost_usd"), tokens or m.get("input_tokens") or m.get("output_tokens"))
        css = "ab-unpriced" if label == "unpriced" else "ab-cost"
        parts.append(Markup('<span class="{}">{}</span>').format(css, label))
        if not m.get("usage_counted"):
            parts.append(Markup('<span class="ab-dim" title="a re-appended copy of an earlier model call">'
                                'copy: not counted</span>'))
    if m.get("stop_reason") and m["stop_reason"] not in ("stop", "toolUse"):
        parts.append(Markup('<span class="ab-dim">stop: {}</span>').format(m["stop_reason"]))
    if m.get("is_synthetic"):
        parts.append(Markup('<span class="ab-dim">synthetic (not from a model)</span>'))
    return Markup(" · ").join(parts)


def _result_meta(call: dict | None, result: dict) -> Markup:
    bits = []
    if call and call.get("exit_code") is not None:
        bits.append(f"exit {call['exit_code']}")
    if call and call.get("duration_ms") is not None:
        bits.append(f"{call['duration_ms']:,} ms")
    bits.append(_time(result)[11:])
    return Markup('<span class="ab-dim">{}</span>').format(" · ".join(b for b in bits if b))


def _blocks(value):
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


def _message_html(m: dict, results: dict[str, dict], calls: dict, used: set, row_href) -> Markup:
    blocks = _blocks(m["content_blocks"])
    options = render.Options(VIEW.limit, VIEW.fold_lines, VIEW.fold_chars, more_href=row_href("messages", m["id"]))
    if blocks is None:  # bashExecution and other content-less messages
        return render.text(m.get("text_preview") or "", options)
    if m["role"] == "toolResult":
        return render.tool_result(blocks, options, is_error=bool(m["is_error"]), name=m.get("tool_name"),
                                  meta=_result_meta(calls.get(m.get("tool_call_id")), m))
    if not isinstance(blocks, list):
        return render.render_blocks(blocks, options)
    parts = []
    for block in blocks:
        parts.append(render.render_block(block, options))
        if isinstance(block, dict) and block.get("type") == "toolCall":
            result = results.get(block.get("id")) if isinstance(block.get("id"), str) else None
            if result is not None and result["id"] not in used:
                used.add(result["id"])
                rblocks = _blocks(result["content_blocks"])
                roptions = render.Options(VIEW.limit, VIEW.fold_lines, VIEW.fold_chars,
                                          more_href=row_href("messages", result["id"]))
                parts.append(render.tool_result(
                    rblocks if rblocks is not None else result.get("text_preview") or "", roptions,
                    is_error=bool(result["is_error"]), name=result.get("tool_name"),
                    meta=_result_meta(calls.get(block.get("id")), result), anchor=f"m{result['id']}"))
            elif result is None:
                parts.append(Markup('<div class="ab-result ab-dim">no result recorded</div>'))
    if m.get("error_message"):
        parts.append(Markup('<div class="ab-error-message">{}</div>').format(m["error_message"]))
    return Markup('<div class="ab-blocks">{}</div>').format(Markup("").join(parts))


def _entry_html(e: dict) -> Markup | None:
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
        body = render.text(summary, VIEW) if isinstance(summary, str) else Markup("")
        return Markup('<details class="ab-marker ab-compaction"><summary>{}</summary>{}</details>').format(head, body)
    if kind == "branch_summary":
        summary = raw.get("summary")
        body = render.text(summary, VIEW) if isinstance(summary, str) else Markup("")
        return Markup('<details class="ab-marker ab-branch"><summary><strong>Branch summary</strong> '
                      '(the conversation returned here from another branch)</summary>{}</details>').format(body)
    if kind == "model_change":
        return Markup('<div class="ab-marker ab-small">model → {}{}</div>').format(
            f"{raw.get('provider')}/" if isinstance(raw.get("provider"), str) else "", raw.get("modelId") or "?")
    if kind == "thinking_level_change":
        return Markup('<div class="ab-marker ab-small">thinking level → {}</div>').format(raw.get("thinkingLevel") or "?")
    if kind == "reset":
        return Markup('<div class="ab-marker ab-reset"><strong>Reset</strong>: the session started over here</div>')
    return Markup('<details class="ab-marker ab-small"><summary>{}{}</summary>{}</details>').format(
        kind, f" ({e['custom_type']})" if e.get("custom_type") else "", render.pretty_json(raw, VIEW))


def build(data: dict, everything: bool, row_href, self_href: str) -> dict:
    """The template's context: turns as HTML, and the totals."""
    items = ordered(data, everything)
    results = {}
    for kind, row in items:
        if kind == "message" and row["role"] == "toolResult" and row.get("tool_call_id"):
            results.setdefault(row["tool_call_id"], row)
    used: set = set()
    turns = []
    all_href = self_href + ("&" if "?" in self_href else "?") + "all=1"
    for kind, row in items:
        off = not row["is_active_path"]
        branch = None if off else data["off_path"].get(row["entry_uuid"] if kind == "entry" else row["message_uuid"])
        if kind == "entry":
            if everything or row["entry_type"] in MARKED_ENTRIES:
                turns.append({"kind": "marker", "html": _entry_html(row), "off": off, "id": f"e{row['id']}"})
        elif row["id"] not in used:  # (a tool result already shown under its call is not repeated)
            used.add(row["id"])
            role = row["role"] or "?"
            css = {"user": "user", "assistant": "assistant", "toolResult": "tool"}.get(role, "other")
            turns.append({
                "kind": "message", "css": css, "role": {"toolResult": "tool result"}.get(role, role),
                "id": f"m{row['id']}", "time": _time(row), "usage": _usage_line(row), "off": off,
                "error": bool(row["is_error"]), "row_href": row_href("messages", row["id"]),
                "html": _message_html(row, results, data["calls"], used, row_href),
            })
        if branch:
            turns.append({"kind": "marker", "off": False, "id": None, "html": Markup(
                '<div class="ab-marker ab-branch"><strong>Branch point</strong>: {:,} entr{} on an abandoned branch '
                'went on from here (<a href="{}">show every branch</a>)</div>').format(
                branch, "y" if branch == 1 else "ies", all_href)})
    s = data["session"]
    u = data["usage"]
    totals = {
        "messages": s.get("message_count"), "shown": len(used),
        "calls": u["calls"] or 0,
        "input": s.get("input_tokens") or 0, "output": s.get("output_tokens") or 0,
        "cache_read": s.get("cache_read_tokens") or 0, "cache_write": s.get("cache_write_tokens") or 0,
        "total": s.get("total_tokens") or 0,
        "cost": money(s.get("cost_usd"), s.get("total_tokens")) or "$0",
        "unpriced_tokens": u["unpriced_tokens"] or 0, "unpriced_calls": u["unpriced_calls"] or 0,
    }
    return {"turns": turns, "totals": totals}

