"""One session as a file: ``/-/agentbase/session/<id>.json``, ``.md`` and ``.html``.

- **JSON** (:func:`load_json`, in Datasette's SQL thread): the session's row (``header_json``
  parsed as ``header``), every message of the session in line order (``seq``; abandoned branches
  too, each with ``is_active_path``) with its columns and its content blocks parsed as ``blocks``
  (the derived ``text_preview``, ``thinking_text`` and ``tool_calls_json`` left out), its tool calls
  (``tool_calls`` rows: which result answers which call, exit codes, durations), its other
  entries (compactions, model changes...: ``data`` is the entry as the source wrote it), and
  ``turns`` (:func:`outline`): the view's turns by the ids of the rows each shows.
- **Markdown** (:func:`markdown`): the conversation as the view shows it (the active path;
  ``?all=1`` every branch), its turns grouped by the view's own code (conversation._Builder, drawn
  as text by :class:`_MarkdownBuilder`), for reading or pasting: a heading per turn (an assistant
  card of a kind that writes each item as a row is one), text and thinking as written, tool calls
  as fenced code (commands, diffs of edits, patches, written files, other arguments as JSON), each
  result under its call, identical errors in a row said once with their count.
- **HTML**: the view's own turns in a page of its own (conversation.build(standalone=True) and
  templates/agentbase_session_export.html): the stylesheet and the script inline, images as data:
  URLs, no link out of the file, nothing cut, and a Content-Security-Policy that lets it load
  nothing else.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import re
import sqlite3

import orjson

from . import conversation, facts, render

FORMAT = "agentbase-session"
VERSION = 1
DERIVED = ("text_preview", "thinking_text", "tool_calls_json", "content_blocks")
SESSION_COPIES = ("session_id", "server", "agent_id", "session_uuid", "source")  # the session's, said once
TOOL_CALL_COLUMNS = ("id", "call_id", "message_id", "block_index", "tool_name", "command", "exit_code",
                     "duration_ms", "is_error", "result_message_id", "timestamp")


def _parse(value):
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _select(conn: sqlite3.Connection, sql: str, params=()) -> tuple[list[str], list[tuple]]:
    cur = conn.execute(sql, params)
    return [d[0] for d in cur.description], cur.fetchall()


def load_json(conn: sqlite3.Connection, session_id: int, database: str, everything: bool = False) -> dict | None:
    """The JSON export's document (None: no such session); its ``turns`` along the active path
    (``everything``: every branch, as ``?all=1`` shows them)."""
    names, rows = _select(conn, "SELECT * FROM sessions WHERE id = ?", (session_id,))
    if not rows:
        return None
    session = dict(zip(names, rows[0]))
    if "header_json" in session:
        session["header"] = _parse(session.pop("header_json"))
    zone = facts.marker(conn, "timezone").get("timezone")
    names, rows = _select(conn, "SELECT * FROM messages WHERE session_id = ? ORDER BY seq, id", (session_id,))
    keep = [(i, n) for i, n in enumerate(names) if n not in DERIVED and n not in SESSION_COPIES]
    blocks_at = names.index("content_blocks") if "content_blocks" in names else None
    messages = []
    for row in rows:
        m = {n: row[i] for i, n in keep}
        m["blocks"] = _parse(row[blocks_at]) if blocks_at is not None else None
        messages.append(m)
    have = {r[1] for r in conn.execute("PRAGMA table_xinfo(tool_calls)")}
    cols = ", ".join(c for c in TOOL_CALL_COLUMNS if c in have)
    names, rows = _select(conn, f"SELECT {cols} FROM tool_calls WHERE session_id = ? ORDER BY message_id, id",
                          (session_id,))
    calls = [dict(zip(names, r)) for r in rows]
    names, rows = _select(conn, "SELECT * FROM entries WHERE session_id = ? ORDER BY seq, id", (session_id,))
    entries = []
    for row in rows:
        e = dict(zip(names, row))
        for name in SESSION_COPIES:
            e.pop(name, None)
        e["data"] = _parse(e.pop("raw_json", None))
        entries.append(e)
    return {"format": FORMAT, "version": VERSION, "database": database,
            "timezone": zone or "UTC", "session": session,
            "message_count": len(messages), "messages": messages, "tool_calls": calls, "entries": entries,
            "turns_shown": "every branch" if everything else "the active path",
            "turns": outline(conversation.load(conn, session_id, everything), everything)}


def dump_json(doc: dict) -> bytes:
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str)


# -- Markdown -------------------------------------------------------------------------------------

LANGUAGES = {"py": "python", "js": "javascript", "ts": "typescript", "tsx": "tsx", "jsx": "jsx", "sh": "sh",
             "bash": "bash", "json": "json", "yml": "yaml", "yaml": "yaml", "md": "markdown", "html": "html",
             "css": "css", "go": "go", "rs": "rust", "rb": "ruby", "java": "java", "c": "c", "h": "c",
             "cpp": "cpp", "toml": "toml", "sql": "sql", "conf": "nginx", "ini": "ini", "xml": "xml"}
_TICKS = re.compile(r"`{3,}|~{3,}")


def fence(body: str, lang: str = "") -> str:
    """``body`` as a fenced code block whose fence no line of it can close."""
    longest = max((len(m) for m in _TICKS.findall(body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body.rstrip(chr(10))}\n{ticks}"


def _lang(path) -> str:
    if not isinstance(path, str) or "." not in path.rsplit("/", 1)[-1]:
        return ""
    return LANGUAGES.get(path.rsplit(".", 1)[-1].lower(), "")


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.rstrip("\n").split("\n"))


def _json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _md_call(block: dict) -> str:
    name = block.get("name") if isinstance(block.get("name"), str) else "?"
    call_id = block.get("id") if isinstance(block.get("id"), str) else None
    out = [f"**tool call** `{name}`" + (f" ({call_id})" if call_id else "")]
    kind, shape = render.call_shape(name, block.get("arguments", block.get("partialJson")))
    if kind == "shell":
        if shape["note"]:
            out.append(f"*{shape['note']}*")
        out.append(fence(shape["command"], "sh"))
    elif kind == "patch":
        out.append(fence(shape["patch"], "diff"))
    elif kind == "changes":
        for change in shape["changes"]:
            out.append(f"{change['kind'] or 'change'} `{change['path']}`")
            if change["diff"] is not None:
                out.append(fence(change["diff"], "diff"))
            elif change["content"] is not None:
                out.append(fence(change["content"], _lang(change["path"])))
    elif kind == "edit":
        out.append(f"edit `{shape['path'] or '(no path)'}`")
        for old, new in shape["edits"]:
            diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3))[2:]
            out.append(fence("\n".join(diff) or "(no change)", "diff"))
    elif kind == "write":
        out.append(f"write `{shape['path']}`")
        out.append(fence(shape["content"], _lang(shape["path"])))
    elif kind == "text":
        out.append(fence(shape["text"]))
    elif shape["args"] not in (None, {}):
        out.append(fence(_json(shape["args"]), "json"))
    rest = shape.get("rest")
    if rest:
        out.append(fence(_json(rest), "json"))
    return "\n\n".join(out)


def _md_output(content) -> str:
    if isinstance(content, str):
        return fence(_pretty(content))
    parts = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(fence(_pretty(block["text"])))
        else:
            parts.append(_md_block(block))
    return "\n\n".join(p for p in parts if p)


def _pretty(text: str) -> str:
    found = render.json_in_text(text)
    if found is None:
        return text
    prefix, data = found
    return (prefix + "\n" if prefix else "") + _json(data)


def _md_block(block) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return fence(_json(block), "json")
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return block["text"]
    if kind == "thinking":
        thought = block.get("thinking")
        if block.get("redacted") or not isinstance(thought, str):
            return "> *thinking (redacted)*"
        return _quote("**thinking**\n\n" + thought)
    if kind == "toolCall":
        return _md_call(block)
    if kind == "image":
        mime = block.get("mimeType") or block.get("mime_type") or "image"
        data = block.get("data")
        return f"*[image: {mime}, {len(data) if isinstance(data, str) else 0:,} characters of base64]*"
    if kind == "toolResult":
        return "**result**\n\n" + _md_output(block.get("content"))
    return fence(_json(block), "json")


def _result_line(result: dict, call: dict | None) -> str:
    bits = []
    exit_code = (call or {}).get("exit_code")
    exit_code = result.get("exit_code") if exit_code is None else exit_code
    duration = (call or {}).get("duration_ms")
    duration = result.get("duration_ms") if duration is None else duration
    if exit_code is not None:
        bits.append(f"exit {exit_code}")
    if duration is not None:
        bits.append(f"{duration:,} ms")
    label = "**error**" if result.get("is_error") else "**result**"
    return label + (f" ({' · '.join(bits)})" if bits else "")


def _entry_md(e: dict) -> str | None:
    try:
        raw = json.loads(e["raw_json"]) if e.get("raw_json") else {}
    except ValueError:
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    kind = e["entry_type"]
    if kind == "compaction":
        before = raw.get("tokensBefore")
        head = "**Compaction**" + (f": {before:,} tokens summarized" if isinstance(before, int) else "")
        summary = raw.get("summary")
        return _quote(head + ("\n\n" + summary if isinstance(summary, str) and summary else ""))
    if kind == "compacted" or (kind, e.get("custom_type")) in conversation.MARKED_EVENTS:
        # Codex: its compacted line (the summary in payload.message), and the event after it
        payload = raw.get("payload") if isinstance(raw.get("payload"), dict) else raw
        kept = payload.get("replacement_history")
        head = "**Compaction**: the conversation so far was compacted" + (
            f" ({len(kept):,} item{'' if len(kept) == 1 else 's'} kept as its history)" if isinstance(kept, list)
            else "")
        summary = payload.get("message") if kind == "compacted" else None
        return _quote(head + ("\n\n" + summary if isinstance(summary, str) and summary.strip() else ""))
    if kind == "branch_summary":
        summary = raw.get("summary")
        return _quote("**Branch summary** (the conversation returned here from another branch)"
                      + ("\n\n" + summary if isinstance(summary, str) else ""))
    if kind == "model_change":
        provider = f"{raw['provider']}/" if isinstance(raw.get("provider"), str) else ""
        return f"*model → {provider}{raw.get('modelId') or '?'}*"
    if kind == "thinking_level_change":
        return f"*thinking level → {raw.get('thinkingLevel') or '?'}*"
    if kind == "reset":
        return "*— Reset: the session started over here —*"
    custom = f" ({e['custom_type']})" if e.get("custom_type") else ""
    return f"*{kind}{custom}*"


def markdown(data: dict, everything: bool, database: str) -> str:
    """The conversation as Markdown (``data``: conversation.load's)."""
    s = data["session"]
    rel = data.get("related") or {}
    title = conversation.session_label(s)
    out = [f"# {title}", ""]
    meta = [f"- session: `{s.get('session_uuid')}` (#{s['id']} in {database})",
            f"- server / agent: {s.get('server')} / {s.get('agent_id')}"
            + (f" · source: {s['source']}" if s.get("source") else ""),
            f"- time: {data['first']} → {data['last']} ({data['timezone']})"]
    if s.get("cwd"):
        meta.append(f"- cwd: `{s['cwd']}`")
    u = data["usage"]
    cost = conversation.money(s.get("cost_usd"), s.get("total_tokens")) or "$0"
    meta.append(f"- model calls: {u['calls'] or 0:,} · tokens: {s.get('total_tokens') or 0:,} "
                f"({s.get('input_tokens') or 0:,} in, {s.get('output_tokens') or 0:,} out, "
                f"{s.get('cache_read_tokens') or 0:,} cache read, {s.get('cache_write_tokens') or 0:,} cache write)"
                f" · cost: {cost}" + (f" + {u['unpriced_tokens']:,} unpriced tokens" if u["unpriced_calls"]
                                      and cost != "unpriced" else ""))
    def named(other: dict) -> str:
        label, uuid = conversation.session_label(other), other.get("session_uuid")
        return f"`{uuid}`" if label == uuid else f"{label} (`{uuid}`)"

    if rel.get("parent"):
        kind = "sub-agent of" if rel.get("parent_kind") == "sub-agent" else "forked from"
        meta.append(f"- {kind}: {named(rel['parent'])}")
    for key in ("previous", "next"):
        if rel.get(key):
            meta.append(f"- {key} session: {named(rel[key])}")
    children = rel.get("children") or []
    for child in children[:conversation.MAX_LISTED_CHILDREN]:
        kind = "sub-agent" if conversation.is_subagent(child) else "fork"
        meta.append(f"- {kind} started from this one: {named(child)}")
    if len(children) > conversation.MAX_LISTED_CHILDREN:
        meta.append(f"- and {len(children) - conversation.MAX_LISTED_CHILDREN:,} more sessions started from this one")
    meta.append("- shown: " + ("every entry, abandoned branches marked" if everything else "the active path"))
    out += meta + [""]
    for turn in _MarkdownBuilder(data, everything).turns():
        if turn["kind"] == "marker":
            out += [turn["html"] or "", ""]
        elif turn["kind"] == "usage":
            line = " · ".join(b for b in ("usage", turn["time"], turn["note"], turn["usage"]) if b)
            out += [f"*{line}*", ""]
        else:
            flags = [flag for flag, on in (("context", turn["css"] == "context"), ("copy", turn["copy"]),
                                           ("off the active path", turn["off"]), ("error", turn["error"])) if on]
            out.append(f"## {turn['role']} · {turn['time']}" + (f" ({', '.join(flags)})" if flags else ""))
            if turn["usage"]:
                out.append(f"*{turn['usage']}*")
            out += ["", turn["html"], ""]
        if turn.get("repeats"):
            n = len(turn["repeats"])
            out += [f"*(the same error {n:,} more time{'s' if n != 1 else ''})*", ""]
    return "\n".join(out).rstrip("\n") + "\n"


class _MarkdownBuilder(conversation._Builder):
    """The conversation view's turns, grouped by the view's own code (conversation._Builder: one
    assistant card per model call of a kind that writes each item as a row, each result under its
    call, repeated errors folded), each part drawn as Markdown instead of HTML."""

    def __init__(self, data: dict, everything: bool):
        super().__init__(data, everything, None, None, standalone=True)

    def draw_text(self, text, options):
        return text

    def draw_result(self, content, result, call, options, anchor=None):
        return _result_line(result, call) + "\n\n" + _md_output(content)

    def draw_blocks(self, blocks, options):
        return _md_block(blocks)

    def draw_block(self, block, options):
        return _md_block(block)

    def draw_call(self, block, options, call_id):
        return _md_call(block)

    def draw_elsewhere(self, where):
        return "*(result shown with another copy)*"

    def draw_no_result(self):
        return "*no result recorded*"

    def draw_error(self, text, options):
        return "**error**\n\n" + fence(_pretty(text))

    def draw_parts(self, parts):
        return "\n\n".join(p for p in parts if p)

    def draw_context(self, row, body):
        return _quote(body) if body else body

    def draw_card(self, parts):
        return "\n\n".join(p["html"] for p in parts if p["html"])

    def draw_usage(self, row):
        return conversation._usage_line(row).striptags()

    def draw_group_usage(self, rows):
        return conversation.group_usage_line(rows).striptags()

    def draw_entry(self, row):
        return _entry_md(row)

    def draw_branch(self, entries, all_href):
        return (f"*Branch point: {entries:,} entr{'y' if entries == 1 else 'ies'} on an abandoned branch went on "
                "from here*")


def outline(data: dict, everything: bool) -> list[dict]:
    """The JSON export's ``turns``: the conversation view's turns (the same grouping as the page and
    the Markdown), each naming the rows it shows by id (``message_ids``: an assistant card's rows,
    and each tool result under its call), never their content again."""
    out = []
    for turn in _MarkdownBuilder(data, everything).turns():
        kind = turn["kind"]
        item = {"kind": "card" if turn.get("parts") else kind, "time": turn.get("time"),
                "off_path": bool(turn.get("off")), "error": bool(turn.get("error"))}
        if kind == "message":
            item["role"] = turn["role"]
            item["context"] = turn["css"] == "context"
            item["copy"] = bool(turn["copy"])
        if kind == "marker":
            item["entry_id"] = turn.get("entry_id")
            if turn.get("branch"):
                item["branch_entries"] = turn["branch"]
        else:
            item["message_ids"] = turn["ids"]
            item["repeats"] = [r["ids"] for r in turn.get("repeats") or []]
        out.append(item)
    return out


# -- the standalone HTML ---------------------------------------------------------------------------

def csp_hash(text: str) -> str:
    """A Content-Security-Policy source for exactly this inline text."""
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def file_name(session: dict, extension: str) -> str:
    uuid = re.sub(r"[^A-Za-z0-9_-]", "", str(session.get("session_uuid") or ""))[:40]
    return f"session-{session['id']}" + (f"-{uuid}" if uuid else "") + f".{extension}"
