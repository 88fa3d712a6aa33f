"""Transcript parser: bytes in, entries and rows out.

Pure by design: no files, no database, no network. A kind's reader
(``sources/reader.py`` for line-oriented files) feeds it the bytes of a
transcript (whole, or only what was appended since the last run); the writer
stores what comes out. See FORMAT.md sections 2-8 for the input.

Rules implemented here:
- lines are split on ``\\n`` only (raw U+2028/U+2029/U+0085 inside JSON strings
  are data, not line breaks);
- a last line without ``\\n`` is *pending* unless it already parses as a JSON
  object; the caller keeps its offset before that line, so it is read again
  (and deduplicated by entry id) once it is complete;
- a complete line that is not a JSON object is *bad*: counted and skipped;
- the first line, if it is ``{"type": "session"}``, is the header; files
  without one (trimmed by the gateway) take the session id from the file name;
- entries without an ``id`` (pi v1 files, legacy lines) get ``@<line index>``;
  in v1 files each entry's parent is the entry before it.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson

from . import rows as R
from . import vocabulary as V
# The conversions every kind uses live with the row builder (rows.py); their old names stay.
from .rows import PREVIEW_CHARS, cut_text, strip_html, text_preview  # noqa: F401
from .rows import blocks_of as _blocks  # noqa: F401
from .rows import dumps as _dumps  # noqa: F401
from .rows import integer as _int  # noqa: F401
from .rows import number as _num  # noqa: F401
from .rows import text as _str  # noqa: F401

SYNTHETIC_PROVIDERS = {"openclaw", "clawdbot", "moltbot"}
SYNTHETIC_MODELS = {"gateway-injected", "delivery-mirror"}
MISSING_RESULT_RE = re.compile(r"^\[(?:openclaw|clawdbot|moltbot)\] missing tool result")

# ---------------------------------------------------------------------------
# File names


_TS_UUID_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T[\d-]+Z?_(?P<id>[0-9A-Za-z-]+)$")
# OpenClaw's SQLite migration moves JSONL files to session-sqlite-import-archive/
# as "<session key slug>.<original name>.imported-<ms>[.<n>]".
_IMPORTED_RE = re.compile(r"\.imported-\d+(?:\.\d+)?$")


def session_type_for(name: str) -> str:
    """The session type a file name implies (original design 2.2, plus copies)."""
    if ".jsonl.reset." in name:
        return "reset"
    if ".jsonl.deleted." in name:
        return "deleted"
    if ".checkpoint." in name:
        return "checkpoint"
    if ".jsonl.bak" in name or (_IMPORTED_RE.search(name) and not name.startswith("archive-tier.")):
        # A migration leftover is a copy of what the SQLite store holds
        # ("archive-tier." ones were never imported: the only copy).
        return "backup"
    if "-topic-" in name:
        return "topic"
    return "normal"


def is_copy(name: str) -> bool:
    """Checkpoint and backup copies never decide a session's derived fields
    while a live file or its rename exists."""
    return session_type_for(name) in ("checkpoint", "backup")


ID_CHARS = 64


def visible_id(value: str) -> str:
    """An id as archived: whole, with each NUL character written ``\\u0000``
    (its JSON escape, six visible characters). A NUL is cut at by C strings
    (SQLite's functions, drivers): ``a<NUL>b`` would become ``a``, and merge
    with another session; written out it stays whole and distinct."""
    return value.replace("\x00", "\\u0000") if "\x00" in value else value


def clamp_id(value: str) -> str:
    """Ids are at most 64 characters in every store; a longer one (never seen
    in real files) keeps a readable prefix and a hash, so it stays unique.
    A NUL is made visible first (:func:`visible_id`)."""
    if "\x00" in value:
        value = visible_id(value)
    if len(value) <= ID_CHARS:
        return value
    return value[:40] + "~" + hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=11).hexdigest()


def session_id_from_name(name: str) -> str:
    """Session id for a header-less file: the file-name stem."""
    if _IMPORTED_RE.search(name):
        name = _IMPORTED_RE.sub("", name)
        name = name.split(".", 1)[1] if "." in name else name  # drop the session key slug
    stem = name
    for marker in (".checkpoint.", ".jsonl"):
        pos = stem.find(marker)
        if pos > 0:
            stem = stem[:pos]
    m = _TS_UUID_RE.match(stem)
    if m:
        return clamp_id(m.group("id"))
    return clamp_id(stem)


# ---------------------------------------------------------------------------
# Small, total conversions: transcripts are untrusted input


def cut_str(value: Any, limit: int) -> str | None:
    """:func:`_str` for a text a reader sees (a label, a title, a path): cut by :func:`cut_text`."""
    return cut_text(value, limit) if isinstance(value, str) else None


def format_timestamp(value: Any) -> str | None:
    """ISO string or epoch milliseconds -> 'YYYY-MM-DD HH:MM:SS.fff' in UTC.

    That text form sorts correctly and makes the original design's
    ``timestamp BETWEEN '2026-04-05 00:00:00' AND '2026-04-05 23:59:59'`` work.
    """
    if isinstance(value, str):
        s = value.strip()
        # Fast path: the canonical '2026-04-28T05:47:07.929Z'.
        if len(s) == 24 and s[10] == "T" and s[23] == "Z" and s[19] == "." and s[4] == s[7] == "-":
            try:
                # days past the 28th go the slow way, which knows month lengths
                if (1000 <= int(s[:4]) and 1 <= int(s[5:7]) <= 12 and 1 <= int(s[8:10]) <= 28
                        and int(s[11:13]) < 24 and int(s[14:16]) < 60 and int(s[17:19]) < 60
                        and s[20:23].isdigit() and s[13] == s[16] == ":"):
                    return f"{s[:10]} {s[11:23]}"
            except ValueError:
                pass
        try:
            dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
            if dt.tzinfo is not None:
                dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
        except (ValueError, OverflowError):
            return None
        if not 1000 <= dt.year <= 9999:  # the range every store's DATETIME holds
            return None
        return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{dt.microsecond // 1000:03d}"
    ms = _num(value)
    if ms is not None and 0 < ms < 1e11:
        # Seconds, not milliseconds: 1e11 ms is March 1973, 1e11 s the year 5138.
        ms *= 1000
    if ms is None or not (0 <= ms < 253402300800000):  # 1970 to year 9999
        return None
    dt = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{dt.microsecond // 1000:03d}"


def short_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


# ---------------------------------------------------------------------------
# Lines and entries


@dataclass
class Entry:
    """One parsed line other than the header."""

    entry_id: str
    parent_id: str | None
    type: str | None
    line_index: int
    obj: dict
    raw: bytes
    # Filled by derive(): ahead of time (reader.prefetch) or on demand.
    row: dict | None = None
    calls: list | None = None
    _hash: str | None = None
    # The tool names that run a shell in this entry's kind (its Source.shell_tools), given by the parser.
    shell_tools: frozenset = frozenset()

    @property
    def raw_hash(self) -> str:
        """Tells whether an entry seen again changed: length and CRC-32 of its
        line (a fast check; only ever compared for the same entry id)."""
        if self._hash is None:
            self._hash = f"{len(self.raw):x}-{zlib.crc32(self.raw):08x}"
        return self._hash

    def derive(self) -> "Entry":
        """Compute this entry's row (and tool call rows) once."""
        if self.row is None:
            if self.type == "message":
                self.row = message_row(self)
                self.calls = tool_call_rows(self, self.row, self.shell_tools)
            else:
                self.row = entry_row(self)
            self.raw_hash
        return self


@dataclass
class ParseState:
    """What the parser must remember between incremental reads of one file."""

    session_id: str | None = None
    header: dict | None = None
    header_raw: bytes | None = None
    version: int | None = None  # header version; None = unknown (no header yet)
    legacy: bool = False  # pi v1: no ids, order is the sequence
    next_line: int = 0  # index of the next line to read
    last_entry_id: str | None = None
    extra: dict = field(default_factory=dict)  # what another kind's parser carries across runs


@dataclass
class ChunkResult:
    entries: list[Entry] = field(default_factory=list)
    bad_lines: int = 0
    pending_lines: int = 0
    consumed: int = 0  # bytes up to and including the last complete line
    batches: list | None = None  # a parser of several sessions per file: its entries, by session


class TranscriptParser:
    """Incremental parser for one transcript file.

    ``feed(data, final)`` takes bytes that start at a line boundary. It returns
    the entries of every complete line and reports how many bytes it consumed;
    the caller passes the rest again with more data. With ``final=True`` the
    unterminated tail is looked at: returned as an entry if it is already a
    complete JSON object (not consumed, so it is re-read when it grows), else
    counted as pending.

    ``shell_tools``: the tool names that run a shell in the kind read (its
    ``Source.shell_tools``): their calls get a ``command``. The parser keeps
    no list of its own.
    """

    # Entry types that tell a transcript from any other JSON-lines file.
    known_types = frozenset({
        "session", "message", "model_change", "thinking_level_change", "compaction", "branch_summary",
        "custom", "custom_message", "label", "session_info", "reset",
    })

    def __init__(self, file_name: str, state: ParseState | None = None, shell_tools: frozenset = frozenset()):
        self.file_name = file_name
        self.state = state or ParseState()
        self.shell_tools = frozenset(shell_tools)

    def sessions(self) -> dict:
        """The session-level values the file's header gives (none without one)."""
        from .units import SessionInfo

        state = self.state
        header = state.header
        if header is None:
            return {}
        return {state.session_id: SessionInfo({
            "cwd": cut_str(header.get("cwd"), 512),
            "started_at": format_timestamp(header.get("timestamp")),
            "version": _int(header.get("version")) or 1,
            "parent_session": cut_str(header.get("parentSession") or header.get("branchedFrom"), 512),
        }, state.header_raw.decode("utf-8", "replace"))}

    def feed(self, data: bytes, final: bool = False) -> ChunkResult:
        return feed_lines(self.state, data, final, self._line)

    def _line(self, raw: bytes, result: ChunkResult, pending: bool = False) -> bool:
        state = self.state
        index, obj, raw = read_line(state, raw, result, pending)
        if obj is None:
            return False
        etype = obj.get("type")
        if index == 0 and etype == "session":
            state.header = obj
            state.header_raw = raw
            sid = _str(obj.get("id"))
            state.session_id = clamp_id(sid) if sid else session_id_from_name(self.file_name)
            version = _int(obj.get("version"))
            state.version = version if version is not None else 1
            state.legacy = version is None or version <= 1
            return True
        if state.session_id is None:
            state.session_id = session_id_from_name(self.file_name)
        entry_id = _str(obj.get("id"))
        entry_id = clamp_id(entry_id) if entry_id else f"@{index}"
        if "parentId" in obj:
            parent = _str(obj.get("parentId"))
            parent = clamp_id(parent) if parent else None
        elif state.legacy:
            parent = state.last_entry_id
        else:
            parent = None
        result.entries.append(
            Entry(entry_id, parent, etype[:64] if isinstance(etype, str) else None, index, obj, raw,
                  shell_tools=self.shell_tools)
        )
        state.last_entry_id = entry_id
        return True


def feed_lines(state: ParseState, data: bytes, final: bool, line, keep_extra: bool = False) -> ChunkResult:
    """The ``feed`` of a parser of one JSON object a line, ``line(raw, result, pending)`` its ``_line``
    (True: the line was taken): every complete line (:func:`complete_lines`); then, with ``final``,
    the unterminated tail, taken when it is already a whole object but left unconsumed, with the
    state as it was before it (``keep_extra``: ``state.extra`` too), so that the next run reads it
    again, with the same entry ids, once its newline arrives. A tail not taken is pending."""
    result = ChunkResult()
    end = len(data)
    start = result.consumed = complete_lines(data, lambda raw: line(raw, result), state)
    if final and start < end and data[start:].strip():
        saved = (state.next_line, state.last_entry_id, orjson.dumps(state.extra) if keep_extra else None)
        before = len(result.entries)
        if line(data[start:], result, pending=True):
            state.next_line, state.last_entry_id = saved[0], saved[1]
            if keep_extra:
                state.extra = orjson.loads(saved[2])
        else:
            del result.entries[before:]
            result.pending_lines += 1
    return result


def read_line(state: ParseState, raw: bytes, result: ChunkResult,
              pending: bool = False) -> tuple[int, dict | None, bytes]:
    """How every line parser's ``_line`` starts: the line's index (the state moves past it), its JSON
    object and the bytes to keep as its JSON (:func:`loads_line`, a closing ``\\r`` left out). A line
    that is not a JSON object gives None and is counted bad, unless it is the ``pending`` tail."""
    index = state.next_line
    state.next_line += 1
    if raw[-1:] == b"\r":
        raw = raw[:-1]
    obj, raw = loads_line(raw)
    if not isinstance(obj, dict):
        if not pending:
            result.bad_lines += 1
        return index, None, raw
    return index, obj, raw


def complete_lines(data: bytes, on_line, state: "ParseState") -> int:
    """Hand each complete line of ``data`` (split on ``\\n`` only) to ``on_line(raw)``; an empty line
    is only counted (``state.next_line``). Returns the bytes consumed: up to the last newline; what
    follows it is the unterminated tail, which each parser handles its own way (``feed``)."""
    start, end = 0, len(data)
    find = data.find
    while start < end:
        nl = find(b"\n", start)
        if nl < 0:
            break
        if nl > start:
            on_line(data[start:nl])
        else:
            state.next_line += 1
        start = nl + 1
    return start


def loads_line(raw: bytes) -> tuple[Any, bytes]:
    """Parse one line; returns (object or None, the bytes to keep as its JSON).

    orjson is strict; lines it refuses are tried once more with the standard
    library, which accepts what JavaScript writes but orjson does not: lone
    surrogate escapes (a string cut inside an emoji), integers over 64 bits,
    NaN. Invalid UTF-8 bytes become U+FFFD. Such lines are kept as the JSON of
    their cleaned value instead of being lost.
    """
    try:
        return orjson.loads(raw), raw
    except orjson.JSONDecodeError:
        pass
    if not raw.lstrip()[:1] == b"{":
        return None, raw
    try:
        obj = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None, raw
    if not isinstance(obj, dict):
        return None, raw
    try:
        obj = _clean(obj)
    except RecursionError:
        return None, raw
    return obj, _dumps(obj).encode()


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _clean(value: Any) -> Any:
    """Replace lone surrogates (not encodable as UTF-8) with U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


# ---------------------------------------------------------------------------
# Rows derived from entries


def thinking_block(text: Any, signature: Any = None) -> dict:
    """The archive's ``thinking`` block of a kind's reasoning part: its text (empty when it has none)
    and its signature, when it has one."""
    block = {"type": "thinking", "thinking": _str(text) or ""}
    if signature:
        block["thinkingSignature"] = signature
    return block


def result_failed(message: dict) -> tuple[bool, int | None, int | None]:
    """(is_error, exit_code, duration_ms) for a toolResult message.

    OpenClaw stores a failed shell command with ``isError: false`` and a
    non-zero ``details.exitCode``; some tools report ``details.status: error``.
    """
    details = message.get("details")
    exit_code = duration = None
    failed = message.get("isError") is True
    if isinstance(details, dict):
        exit_code = _int(details.get("exitCode"))
        duration = _int(details.get("durationMs"))
        if details.get("status") == "error" or (exit_code is not None and exit_code != 0):
            failed = True
    return failed, exit_code, duration


def is_synthetic(message: dict) -> bool:
    provider = _str(message.get("provider"))
    model = _str(message.get("model"))
    if provider in SYNTHETIC_PROVIDERS and model in SYNTHETIC_MODELS:
        return True
    if message.get("stopReason") == "injected":
        return True
    if message.get("role") == "toolResult":
        for block in _blocks(message.get("content")):
            if isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                return isinstance(text, str) and bool(MISSING_RESULT_RE.match(text))
    return False


# (column, OpenClaw's usage key)
USAGE_KEYS = tuple(zip(R.USAGE_COLUMNS, ("input", "output", "cacheRead", "cacheWrite", "totalTokens"), strict=True))


def message_row(entry: Entry) -> dict:
    """The ``messages`` row for a ``message`` entry (keys = column names).

    ``raw_json`` holds the entry without ``message.content``; the content is in
    ``content_blocks``. Together they rebuild the line (as parsed JSON).
    """
    obj = entry.obj
    message = obj.get("message")
    if not isinstance(message, dict):
        message = {}
    content_present = "content" in message
    content = message.get("content")
    blocks = _blocks(content)
    native_role = _str(message.get("role"), 64)
    role = V.openclaw_role(native_role)
    is_error = message.get("isError") is True
    tool_call_id = tool_name = exit_code = duration = None
    if native_role == "toolResult":
        is_error, exit_code, duration = result_failed(message)
        tool_call_id = _str(message.get("toolCallId"), 255)
        tool_name = _str(message.get("toolName"), 128)
    elif role == "assistant" and message.get("stopReason") == "error":
        is_error = True
    elif native_role == "bashExecution":
        exit_code = _int(message.get("exitCode"))
        is_error = exit_code is not None and exit_code != 0
    usage = message.get("usage")
    row = R.message_row(
        entry.entry_id, role, blocks=blocks, native_role=native_role, parent=entry.parent_id,
        timestamp=format_timestamp(obj.get("timestamp")) or format_timestamp(message.get("timestamp")),
        seq=entry.line_index,
        # content as written (a string, or even null), and the preview's rules for roles without blocks
        content_blocks=_dumps(content) if content_present else None, text_preview=text_preview(message),
        is_error=is_error, is_synthetic=is_synthetic(message), provider=message.get("provider"),
        model=message.get("model"), api=message.get("api"), stop_reason=message.get("stopReason"),
        error_message=message.get("errorMessage"), tool_call_id=tool_call_id, tool_name=tool_name,
        exit_code=exit_code, duration_ms=duration,
    )
    cost = None
    if isinstance(usage, dict):
        invalid = False
        for column, key in USAGE_KEYS:
            value = usage.get(key)
            number = _int(value) if value.__class__ is not bool else None
            if value is not None and (number is None or number < 0):
                invalid = True  # kept as written (raw_json), flagged, never summed
            row[column] = number
        cost_obj = usage.get("cost")
        if isinstance(cost_obj, dict):
            total = cost_obj.get("total")
            cost = _num(total)
            if total is not None and (cost is None or cost < 0):
                invalid = True
        if invalid:
            row["usage_invalid"] = 1
        if role == "assistant":
            # One model call = same session, request time, provider, model and usage.
            key = [message.get("timestamp"), message.get("provider"), message.get("model"), usage]
            row["call_key"] = short_hash(_dumps(key, sort_keys=True).encode())
    else:
        for column, _ in USAGE_KEYS:
            row[column] = None
    row["cost_usd"] = cost
    row["raw_json"] = _dumps(_without_content(obj, message) if content_present else obj)
    return row


def _without_content(obj: dict, message: dict) -> dict:
    slim = dict(obj)
    inner = dict(message)
    del inner["content"]
    slim["message"] = inner
    return slim


def tool_call_rows(entry: Entry, row: dict, shell_tools: frozenset) -> list[dict]:
    """One row per toolCall block of a message (rows.tool_call_rows)."""
    message = entry.obj.get("message")
    if not isinstance(message, dict):
        return []
    return R.tool_call_rows(_blocks(message.get("content")), row["timestamp"], shell_tools, role=row["role"])


def entry_preview(obj: dict) -> str | None:
    """The preview of a non-message entry: its summary, content, thinking
    level, model or label (HTML stripped, 512 characters)."""
    preview = None
    for key in ("summary", "content", "thinkingLevel", "modelId", "label"):
        value = obj.get(key)
        if isinstance(value, str):
            preview = value
            break
        if key == "content" and isinstance(value, list):
            preview = text_preview({"content": value})
            break
    if preview is not None:
        preview = cut_text(strip_html(preview[: PREVIEW_CHARS * 8]))
    return preview


def entry_row(entry: Entry) -> dict:
    """The ``entries`` row for any entry that is not a message."""
    obj = entry.obj
    preview = entry_preview(obj)
    return {
        "entry_uuid": entry.entry_id,
        "parent_uuid": entry.parent_id,
        "entry_type": entry.type,
        # a type this format does not know: kept, marked (vocabulary.UNKNOWN) for import and doctor to count
        "custom_type": _str(obj.get("customType"), 128) if entry.type in TranscriptParser.known_types else V.UNKNOWN,
        "text_preview": preview,
        "timestamp": format_timestamp(obj.get("timestamp")),
        "seq": entry.line_index,
        "raw_json": entry.raw.decode("utf-8", "replace"),
    }


def active_path(leaf: str | None, parents: dict[str, str | None]) -> set[str]:
    """Entry ids on the path from ``leaf`` back to its root (cycle-safe)."""
    path: set[str] = set()
    node = leaf
    while node is not None and node in parents and node not in path:
        path.add(node)
        node = parents[node]
    return path
