"""The one row builder: a ``messages`` row and its ``tool_calls`` rows from what a
kind knows about a message (docs/vocabulary.md says what each column means).

A kind module maps its own record to the archive's words (a role of
:data:`vocabulary.ROLES`, content as pi-style blocks: ``text``, ``thinking``,
``toolCall``, ``toolResult``, ``image``) and calls :func:`message_row`; the
derived columns (``first_tool_call``, ``tool_call_count``, ``tool_calls_json``,
``has_tool_calls``, ``thinking_text``, ``has_thinking``, ``text_preview``,
``content_blocks``, ``is_context``), the defaults of every other column and the
widths the schema declares are made here, once, the same for every kind.
:func:`tool_call_rows` makes one ``tool_calls`` row per ``toolCall`` block; a call
gets a ``command`` only when its tool is one of the kind's shell tools.

The small total conversions transcripts need (they are untrusted input) live
here too, below every kind: :func:`text`, :func:`integer`, :func:`number`,
:func:`dumps`, :func:`cut_text`, :func:`strip_html`, :func:`text_preview`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Collection

import orjson

from . import schema
from . import vocabulary as V

PREVIEW_CHARS = 512
HTML_TAG_RE = re.compile(r"<[^<>]*>")

# ---------------------------------------------------------------------------
# Small, total conversions


def text(value: Any, limit: int | None = None) -> str | None:
    """``value`` if it is a string (its first ``limit`` characters), else None."""
    if isinstance(value, str):
        return value if limit is None else value[:limit]
    return None


def integer(value: Any) -> int | None:
    """An integer that fits 64 bits (a bool as 0/1, a finite float truncated), else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float) and value == value and abs(value) < 2**63:
        return int(value)
    return None


def number(value: Any) -> float | None:
    """A finite float (never from a bool), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            f = float(value)
        except OverflowError:
            return None
        return f if f == f and f not in (float("inf"), float("-inf")) else None
    return None


def dumps(value: Any, sort_keys: bool = False) -> str:
    """Compact JSON text (integers beyond 64 bits, from the fallback loader, too)."""
    try:
        # (orjson.dumps(value) alone when no option is wanted: the commonest call, kept the shortest)
        return (orjson.dumps(value, option=orjson.OPT_SORT_KEYS) if sort_keys else orjson.dumps(value)).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, allow_nan=True)


def strip_html(value: str) -> str:
    return HTML_TAG_RE.sub("", value) if "<" in value else value


def cut_text(value: str, limit: int = PREVIEW_CHARS) -> str:
    """``value[:limit]``, but never ending inside a credential: a value the redaction's detector
    finds across the cut (in the uncut text) is left out whole, the text ending before it. (A
    cut credential's head matches no pattern any more, so the export could not redact it.)"""
    if len(value) <= limit:
        return value
    from . import redact

    lo = max(0, limit - 1024)
    window = value[lo:limit + 1024]
    end = limit
    for found, _kind, s, e in redact.detector().find(window):
        if s < 0:  # found in a decoded form: where it stands as written (escaped, encoded), if it does
            at = redact.written_at(window, found)
            if at is None:
                continue
            s, e = at
        if lo + s < limit < lo + e:
            end = min(end, lo + s)
    return value[:end]


def arguments(value: Any) -> dict:
    """A tool call's arguments as the object a ``toolCall`` block holds: an object as it is, JSON text
    of one parsed, anything else kept under ``input`` (nothing: an empty object)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if value is None else {"input": value}


def blocks_of(content: Any) -> list:
    return content if isinstance(content, list) else []


def text_preview(message: dict) -> str | None:
    """The original design's four rules: first text, else thinking, else the
    first text inside a toolResult block; HTML stripped; 512 characters.
    ``message`` holds ``content`` (a string or blocks), and for roles without
    blocks a ``command`` or an ``errorMessage``."""
    content = message.get("content")
    found = None
    if isinstance(content, str):
        found = content
    else:
        blocks = blocks_of(content)
        for rule in ("text", "thinking", "toolResult"):
            for block in blocks:
                if not isinstance(block, dict) or block.get("type") != rule:
                    continue
                if rule == "toolResult":
                    inner = block.get("content")
                    if isinstance(inner, str):
                        found = inner
                    else:
                        for sub in blocks_of(inner):
                            if isinstance(sub, dict) and sub.get("type") == "text":
                                found = text(sub.get("text"))
                                if found is not None:
                                    break
                else:
                    found = text(block.get(rule))
                if found is not None:
                    break
            if found is not None:
                break
    if found is None:
        # Roles without blocks: pi's bashExecution, custom messages.
        found = text(message.get("command")) or text(message.get("errorMessage"))
    if found is None:
        return None
    # Strip before cutting, so a tag is never cut in half (preview(), without its call).
    return cut_text(strip_html(found[: PREVIEW_CHARS * 8]))


def preview(value: str | None) -> str | None:
    """A text as a preview: HTML stripped, cut at 512 characters (never inside a credential)."""
    if value is None:
        return None
    return cut_text(strip_html(value[: PREVIEW_CHARS * 8]))


# ---------------------------------------------------------------------------
# The rows

# Columns the writer fills (where a row goes, its identity in the store, how it is counted).
WRITER_COLUMNS = frozenset({"id", "session_id", "server", "agent_id", "session_uuid", "created_at",
                            "is_active_path", "usage_counted", "raw_hash", "source", "calls_elsewhere"})
MESSAGE_COLUMNS = tuple(c for c, _t in schema.TABLES["messages"] if c not in WRITER_COLUMNS)
USAGE_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens")
# Strings cut at the width the schema gives them (``str:N``), the same in every store; a
# string column holds a string or nothing (a number a transcript wrote there is not kept).
_WIDTHS = {c: int(t.split(":", 1)[1]) for c, t in schema.TABLES["messages"]
           if t.startswith("str:") and c in MESSAGE_COLUMNS and c != "text_preview"}
_STRINGS = tuple(c for c, t in schema.TABLES["messages"]
                 if (t.startswith("str:") or t == "text") and c in MESSAGE_COLUMNS)
# Flags stored as 0/1.
_FLAGS = tuple(c for c, t in schema.TABLES["messages"] if t == "bool" and c in MESSAGE_COLUMNS)
_DEFAULTS = {c: (0 if c in _FLAGS else None) for c in MESSAGE_COLUMNS}
# column -> 0 (a flag), its width (a short string), -1 (a long string); the named arguments' strings
_CHECKS = {**{c: 0 for c in _FLAGS}, **{c: -1 for c in _STRINGS}, **_WIDTHS}
_W = _WIDTHS
_W_UUID, _W_PARENT, _W_ROLE = _W["message_uuid"], _W["parent_message_uuid"], _W["native_role"]
_DERIVE = object()


def message_row(uuid: str, role: str, *, blocks: list | None = None, content: Any = _DERIVE,
                native_role: str | None = None, parent: str | None = None, timestamp: str | None = None,
                seq: int | None = None, raw_json: str | None = None, text_preview: Any = _DERIVE,
                thinking: Any = _DERIVE, preview_else: str | None = None, content_blocks: Any = _DERIVE,
                # the columns a kind gives (fields), named so that CPython matches them by identity
                is_error: Any = 0, is_synthetic: Any = 0, time_approximate: Any = 0, usage_invalid: Any = 0,
                provider: Any = None, model: Any = None, api: Any = None, stop_reason: Any = None,
                call_key: Any = None, tool_call_id: Any = None, tool_name: Any = None, cost_source: Any = None,
                error_message: Any = None, exit_code: Any = None, duration_ms: Any = None,
                input_tokens: Any = None, output_tokens: Any = None, cache_read_tokens: Any = None,
                cache_write_tokens: Any = None, total_tokens: Any = None, cost_usd: Any = None,
                cache_write_5m_tokens: Any = None, cache_write_1h_tokens: Any = None, **fields: Any) -> dict:
    """The ``messages`` row of one message (every key, so the rows of a batch share one INSERT).

    ``role``: one of the vocabulary's four words; ``native_role`` the kind's own.
    ``blocks``: the message's content as pi-style blocks (None: a row without content);
    ``content``: what ``content_blocks`` keeps when it is not ``blocks`` as they are
    (a kind whose content is a string, say; None: no content); ``content_blocks``: that JSON
    text itself, as a kind wrote it (not made twice). ``text_preview`` and
    ``thinking`` (``thinking_text``) are derived from the blocks unless given;
    ``preview_else``: the text that stands for the message when its content gives no preview, or an
    empty one (a tool call's command, a tool's status), made a preview the same way.
    The tool-call columns count the ``toolCall`` blocks of an ``assistant`` row (in a row of
    another role such a block is content, no call: :func:`tool_call_rows` makes none for it either).
    Every other column (usage, model, tool result, flags) is a named argument; ``fields``: a
    derived column a kind sets itself; a name that is not a column is an error. Flags become
    0/1; a string column keeps a string (cut to its schema width) or None.

    (Why every column is named: a keyword that lands in ``**`` is compared, as a string, with
    every named parameter first, and building that dict costs too; with a dozen columns given
    that was half of a row's cost. :func:`_signature_check` keeps the names and the schema's
    columns the same.)
    """
    if role not in V.ROLES:
        raise ValueError(f"role {role!r} is not one of the vocabulary's {V.ROLES}")
    # One pass over the blocks. A tool call is on the assistant row that made it
    # (docs/vocabulary.md): a toolCall block in a row of another role stays in its content and is no call.
    tools = []
    has_thinking = 0
    first_thinking = None
    if blocks:
        calls = role == V.ASSISTANT
        for b in blocks:
            if isinstance(b, dict):
                kind = b.get("type")
                if kind == "toolCall":
                    if calls:
                        tools.append(b)
                elif kind == "thinking" and not has_thinking:
                    has_thinking = 1
                    first_thinking = text(b.get("thinking"))
    if content is _DERIVE:
        content = blocks
    if content_blocks is _DERIVE:
        content_blocks = dumps(content) if content is not None else None
    if text_preview is _DERIVE:
        text_preview = _preview_of(content, blocks)
    if not text_preview and preview_else is not None:
        text_preview = preview(text(preview_else))
    elif text_preview.__class__ is not str:
        text_preview = None
    if thinking is _DERIVE:
        thinking = first_thinking
    elif thinking.__class__ is not str:
        thinking = None
    # Every column in the schema's order (a copy of the defaults: cheaper than building 39 keys),
    # then what is derived here, then each column a caller gave, made what its column holds: a flag
    # 0/1, a string a string (at its schema width) or None; a value left at its default is not set.
    row = _DEFAULTS.copy()
    # (the three every message has: _fit's checks inline)
    row["message_uuid"] = uuid if uuid.__class__ is str and len(uuid) <= _W_UUID else _fit(uuid, _W_UUID)
    if parent is not None:
        row["parent_message_uuid"] = (parent if parent.__class__ is str and len(parent) <= _W_PARENT
                                      else _fit(parent, _W_PARENT))
    row["role"] = role
    if native_role is not None:
        row["native_role"] = (native_role if native_role.__class__ is str and len(native_role) <= _W_ROLE
                              else _fit(native_role, _W_ROLE))
    row["tool_call_count"] = len(tools)
    if tools:
        row["first_tool_call"] = _fit(tools[0].get("name"), _W["first_tool_call"])
        row["has_tool_calls"] = 1
        row["tool_calls_json"] = dumps(tools)
    if has_thinking:
        row["has_thinking"] = 1
    if role == V.SYSTEM:
        row["is_context"] = 1
    row["text_preview"] = text_preview
    row["thinking_text"] = thinking
    row["content_blocks"] = content_blocks
    row["timestamp"] = timestamp
    row["seq"] = seq
    row["raw_json"] = raw_json
    _set_given(row, is_error, is_synthetic, time_approximate, usage_invalid, provider, model, api, stop_reason,
               call_key, tool_call_id, tool_name, cost_source, error_message, exit_code, duration_ms, input_tokens,
               output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_usd,
               cache_write_5m_tokens, cache_write_1h_tokens)
    if fields:
        # A derived column a kind sets itself (it wins), made what its column holds.
        checks = _CHECKS
        for name, value in fields.items():
            check = checks.get(name)
            if check is None:
                if name not in row:
                    raise TypeError(f"messages has no column {name!r}")
            elif check == 0:
                if value.__class__ is not int:
                    value = int(bool(value))
            elif value is not None:
                if value.__class__ is not str:
                    value = None
                elif check > 0 and len(value) > check:
                    value = value[:check]
            row[name] = value
    return row


# The columns message_row makes itself (the rest are its named arguments).
_DERIVED = frozenset({"message_uuid", "parent_message_uuid", "role", "native_role", "first_tool_call",
                      "tool_call_count", "tool_calls_json", "has_tool_calls", "has_thinking", "thinking_text",
                      "is_context", "text_preview", "content_blocks", "timestamp", "seq", "raw_json"})
_OPTIONS = frozenset({"blocks", "content", "parent", "thinking", "preview_else"})


def _given_setter() -> Callable:
    """``set_given(row, *values)``: each column a kind gives (message_row's named arguments that are
    columns it does not derive, in its signature's order) set on the row by its schema type: a flag
    0 unless given (an int as it is, anything else true 1), a short string cut to its width, a long
    one kept, anything but a string None, a number as it is; a value left at its default is not set.
    Its code is made from these rules, one test a column, as dataclasses make an __init__ (a loop
    over the names at run time cost more than a tenth of a row)."""
    code = message_row.__code__
    kwonly = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    names = [n for n in kwonly if n in MESSAGE_COLUMNS and n not in _DERIVED and n not in _OPTIONS]
    lines = [f"def set_given(row, {', '.join(names)}):"]
    for name in names:
        check = _CHECKS.get(name)
        if check == 0:
            lines += [f"    if {name}:", f"        row[{name!r}] = {name} if {name}.__class__ is int else 1"]
            continue
        lines.append(f"    if {name} is not None:")
        if check is None:
            lines.append(f"        row[{name!r}] = {name}")
        elif check < 0:
            lines.append(f"        row[{name!r}] = {name} if {name}.__class__ is str else None")
        else:
            lines.append(f"        row[{name!r}] = _fit({name}, {check})")
    made: dict = {"_fit": _fit}
    exec("\n".join(lines), made)  # noqa: S102 (the text above: names of the schema's columns)
    return made["set_given"]


def _signature_check() -> None:
    """message_row names every column of the schema it does not derive, and nothing else: a
    column added to schema.py and not there fails at import."""
    code = message_row.__code__
    named = set(code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
    columns = set(MESSAGE_COLUMNS)
    if named - _OPTIONS - columns or columns - _DERIVED - named:
        raise RuntimeError(f"rows.message_row's named columns {sorted(named - _OPTIONS - _DERIVED)} are not "
                           f"the schema's {sorted(columns - _DERIVED)}")


def _fit(value: Any, width: int) -> str | None:
    """A string at most ``width`` characters (anything else: None)."""
    if value.__class__ is str:
        return value if len(value) <= width else value[:width]
    return None


def _preview_of(content: Any, blocks: list | None) -> str | None:
    if isinstance(content, str):
        return text_preview({"content": content})
    if blocks is None:
        return None
    return text_preview({"content": blocks})


def tool_call_rows(blocks: list | None, timestamp: str | None, shell_tools: frozenset,
                   commands: dict | None = None, truncated: Collection[str] = (),
                   role: str = V.ASSISTANT) -> list[dict]:
    """One ``tool_calls`` row per ``toolCall`` block (``block_index``: its place among all
    the blocks). A call of one of ``shell_tools`` (the kind's one list) gets its command: a
    string ``arguments.command``, or ``commands[block_index]`` where the kind gives it (a
    command written as a list, say); no other call gets one. ``truncated``: the call ids
    whose result the source cut (``is_truncated``). ``role``: the message's; a row of another
    role than ``assistant`` makes no call (as :func:`message_row` counts none)."""
    if role != V.ASSISTANT:
        return []
    out = []
    for index, block in enumerate(blocks or ()):
        if not isinstance(block, dict) or block.get("type") != "toolCall":
            continue
        name = text(block.get("name"), 128)
        arguments = block.get("arguments")
        command = None
        if name in shell_tools:
            if commands is not None and index in commands:
                command = commands[index]
            elif isinstance(arguments, dict):
                command = text(arguments.get("command"))
        call_id = text(block.get("id"), 255)
        out.append({
            "block_index": index,
            "call_id": call_id,
            "tool_name": name,
            "arguments": dumps(arguments) if "arguments" in block else None,
            "command": command,
            "timestamp": timestamp,
            "is_truncated": int(call_id is not None and call_id in truncated),
        })
    return out


_signature_check()
_set_given = _given_setter()
