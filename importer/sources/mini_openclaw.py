"""mini-OpenClaw (a Python teaching re-implementation of OpenClaw): one JSON
document per session in ``<app>/backend/sessions/<session id>.json``, rewritten
whole after each exchange, and the messages moved out of it when the history
is compressed in ``sessions/archive/<session id>_<unix ts>.json``
(FORMAT-OTHERS.md section 1; docs/mini-openclaw.md for what is read and how).

A PATH may be an app folder (the one holding ``backend/``), its ``backend/``
folder, ``backend/sessions/``, one session (or archive) file, or a folder of
such app folders, one per server (the registry tries each subfolder). The
agent is the app folder's name (``--agent`` overrides).

A **unit** is one session file and the archive files of its session id (an
archive whose session file is gone is a unit of its own): its key is the
session file's path (the oldest archive's for an orphan), its token the
session file's size:mtime joined with its archives'. Read whole every time it
changes (the file is rewritten whole): archives in order, then the session
file's messages, each message's id derived from its content and its
occurrence number in that merged sequence, so a compression (the first
messages moving to an archive) changes no id and doubles nothing.
"""

from __future__ import annotations

import ast
import json
import math
import re
from datetime import datetime, timezone as dt_timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..units import Batch, Checkpoint, NotATranscript, Outcome, SessionInfo, SourceError, Unit, file_token
from .base import Discovery, Scope, Source
from .fs import FileSystem, files_in

KIND = "mini-openclaw"
AGENT = KIND  # the agent of a file outside an app folder (no --agent)
BACKEND_DIR = "backend"
SESSIONS_DIR = "sessions"
ARCHIVE_DIR = "archive"  # compression archives: <sid>_<unix ts>.json
ARCHIVED_SESSIONS_DIR = "archived_sessions"  # whole sessions put away (one fork): <sid>.json
INDEX_NAME = "sessions.json"  # the index layout: titles and files of the sessions (not a session)
SUMMARY_ID = "compressed_context"  # the entry id of a session's compression summary
MAX_BYTES = 256 * 1024 * 1024  # a JSON document is parsed whole: larger files are refused (per-file error)
PREFETCH_LIMIT = 8 * 1024 * 1024
LITERAL_LIMIT = 1024 * 1024  # Python-literal tool inputs longer than this are kept as text
UTF8_BOM = b"\xef\xbb\xbf"

_ARCHIVE_RE = re.compile(r"^(?P<sid>.+)_(?P<ts>\d{9,11})\.json$")
# Times a session id may carry when its file has none: session_<ms>, session_<s>, session_YYYYMMDD_HHMMSS.
_NAME_MS_RE = re.compile(r"(?:^|[_-])(\d{13})$")
_NAME_S_RE = re.compile(r"(?:^|[_-])(\d{10})$")
_NAME_LOCAL_RE = re.compile(r"(?:^|[_-])(\d{8})[_-](\d{6})$")
# A single file named on the command line (its first 64 KB).
_HEAD_MESSAGES = re.compile(rb'"messages"\s*:\s*\[')
_HEAD_KEYS = re.compile(rb'"(title|created_at|updated_at|compressed_context|session_id|archived_at|archive_at)"\s*:')
_HEAD_LIST = re.compile(rb'^\[\s*\{[^{}]{0,2048}?"(?:role|type)"\s*:\s*"(?:user|assistant|human|ai|system|tool)"')

ROLE_OF_TYPE = {"human": "user", "ai": "assistant"}  # LangChain message types
# The title a session has until the model names it: no title of its own (titles.py falls back on the
# first prompt). Kept in header_json.
PLACEHOLDER_TITLES = frozenset({"新对话", "New Chat", "New Session"})
# LangChain's shell tool. Not python_repl (Python_REPL): it runs Python, its code stays in `arguments`.
SHELL_TOOLS = frozenset({"terminal"})
_COMMAND_KEYS = ("command", "commands", "cmd", "__arg1", "input")

# What an output says about its call (nothing else tells: no exit code is stored). Only the
# first non-blank line is looked at: a cross, an error/exception/traceback line, "<something>
# failed:", a timeout; or a JSON object whose status/ok/success says it failed.
_ERROR_LINE = re.compile(
    r"^(?:❌|✖|✗|⛔)"
    r"|^\W{0,3}(?:(?:error|exception|fatal)\b|traceback \(most recent call last\))"
    r"|^[^\n:：]{0,60}\bfailed\s*[:：]"
    r"|\btimed out\b|\btimeout\b",
    re.IGNORECASE,
)


# ---------------------------------------------------------------------------
# Small conversions (transcripts are untrusted input)


def _zone(name: str | None):
    """The zone of naive local times: the server's configured one, else this machine's (None)."""
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _utc_text(dt: datetime) -> str | None:
    if not 1000 <= dt.year <= 9999:
        return None
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{dt.microsecond // 1000:03d}"


def parse_time(value, zone) -> str | None:
    """A time as the files write it -> UTC text (parser.format_timestamp's form).

    Numbers are epoch seconds (created_at/updated_at, time.time()), or milliseconds when
    that large; ISO text without a zone is local time in ``zone`` (None: this machine's)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            number = float(text)
        except ValueError:
            number = None
        if number is not None:
            return parse_time(number, zone)
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        try:
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=zone) if zone is not None else dt.astimezone()
            dt = dt.astimezone(dt_timezone.utc)
        except (OverflowError, ValueError, OSError):
            return None
        return _utc_text(dt)
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            return None
        ms = value if value >= 1e11 else value * 1000.0
        return P.format_timestamp(ms)
    return None


def _time_from_name(stem: str, zone) -> str | None:
    """The creation time some session ids carry (session_<ms>, session_YYYYMMDD_HHMMSS)."""
    m = _NAME_MS_RE.search(stem)
    if m:
        return P.format_timestamp(int(m.group(1)))
    m = _NAME_S_RE.search(stem)
    if m:
        return P.format_timestamp(int(m.group(1)) * 1000)
    m = _NAME_LOCAL_RE.search(stem)
    if m:
        d, t = m.group(1), m.group(2)
        return parse_time(f"{d[:4]}-{d[4:6]}-{d[6:]}T{t[:2]}:{t[2:4]}:{t[4:]}", zone)
    return None


def _jsonable(value):
    """A Python literal as JSON values: tuples and sets as lists, bytes as text, other
    scalars (complex, Ellipsis) as their repr."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {k if isinstance(k, str) else repr(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def parse_input(value) -> tuple[dict, str]:
    """A tool call's ``input`` (canonical: ``str(dict)``, a Python literal; some forks: a
    JSON string; LangChain: an ``args`` object) -> (arguments object, how it was read:
    ``object``, ``json``, ``python``, ``text``). A Python literal is parsed with
    ``ast.literal_eval``, which builds literals only and never runs code."""
    if isinstance(value, dict):
        return value, "object"
    if not isinstance(value, str):
        return ({} if value is None else {"input": value}), "object"
    text = value.strip()
    if text[:1] in ("{", "["):
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            parsed = None
        else:
            return (parsed if isinstance(parsed, dict) else {"input": parsed}), "json"
        if len(text) <= LITERAL_LIMIT:
            try:
                parsed = ast.literal_eval(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
            else:
                parsed = _jsonable(parsed)
                return (parsed if isinstance(parsed, dict) else {"input": parsed}), "python"
    return {"input": value}, "text"


def output_failed(output) -> bool:
    """Whether a tool's output says the call failed (see _ERROR_LINE); False: not known."""
    if isinstance(output, dict):
        status = output.get("status")
        return (isinstance(status, str) and status.lower() in ("error", "failed", "failure")
                or output.get("ok") is False or output.get("success") is False)
    if not isinstance(output, str):
        return False
    text = output.lstrip()
    if text[:1] == "{":
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            return output_failed(obj)
    first = text.split("\n", 1)[0][:500]
    return bool(_ERROR_LINE.search(first))


def _command(tool: str | None, args: dict) -> str | None:
    """A shell call's command line (None for any other call)."""
    if tool not in SHELL_TOOLS:
        return None
    for key in _COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return "\n".join(value)
    return None


def load_json(name: str, data: bytes):
    """A whole JSON document, or a per-file error that says where it stops (never what it holds)."""
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:  # what Python's json.dump writes and orjson refuses: NaN, huge integers, lone surrogates
        return P._clean(json.loads(data.decode("utf-8", "replace")))
    except json.JSONDecodeError as exc:
        where = len(data.decode("utf-8", "replace")[: exc.pos].encode("utf-8"))
        what = ("ends before its JSON document does (a half-written file?)" if where >= len(data.rstrip())
                else f"is not valid JSON at byte {where}")
        raise SourceError(f"{name} ({len(data)} bytes) {what}; it is read again on the next run") from None
    except RecursionError:
        raise SourceError(f"{name}: JSON nested too deeply ({len(data)} bytes)") from None


def messages_of(obj) -> list | None:
    """The message list of a session or archive document (None: not one)."""
    if isinstance(obj, list):
        if not obj or any(isinstance(m, dict) and _raw_role(m) is not None for m in obj):
            return obj
        return None
    if isinstance(obj, dict) and isinstance(obj.get("messages"), list):
        return obj["messages"]
    return None


def not_a_session(name: str, obj) -> str:
    if name == INDEX_NAME:
        return f"{INDEX_NAME}: the index of the session files, not a session (titles and times are read from the files)"
    if isinstance(obj, dict):
        return "not a mini-OpenClaw session: a JSON object without a messages list"
    if isinstance(obj, list):
        return "not a mini-OpenClaw session: a JSON list that holds no messages"
    return f"not a mini-OpenClaw session: a JSON {type(obj).__name__}"


def _vocabulary_role(native: str | None, tool_call_id: str | None) -> str:
    """The vocabulary's role (docs/vocabulary.md) of a message the file gives this role: a
    LangChain ``tool`` message answering a call is a tool result; a role the vocabulary has no
    word for (``system``, ``function``, none) is context the agent gave the model."""
    if native in (V.USER, V.ASSISTANT):
        return native
    if native in ("tool", V.TOOL_RESULT) and tool_call_id:
        return V.TOOL_RESULT
    return V.SYSTEM


def _raw_role(m: dict) -> str | None:
    """The message's role as the file has it: ``role``, else LangChain's ``type``
    (human/ai as user/assistant, tool as a role of its own)."""
    role = m.get("role")
    if isinstance(role, str):
        return role
    kind = m.get("type")
    if isinstance(kind, str):
        return ROLE_OF_TYPE.get(kind, kind)
    return None


# ---------------------------------------------------------------------------
# The parser: documents in, entries out (pure)


class _Merged:
    """One message of the merged sequence and where it came from."""

    __slots__ = ("obj", "archive", "time")

    def __init__(self, obj, archive: int | None, time: str | None):
        self.obj = obj
        self.archive = archive  # index of its archive, None: the session file
        self.time = time  # the approximate time of a message without one of its own


def _identity(m: dict, role: str | None) -> bytes:
    """What a message is, for its id: role, content and its tool calls (not their
    outputs, not a fork's bookkeeping fields, not times)."""
    calls = []
    for c in m["tool_calls"] if isinstance(m.get("tool_calls"), list) else []:
        if isinstance(c, dict):
            calls.append([c.get("tool", c.get("name")), c.get("input", c.get("args")), c.get("id")])
        else:
            calls.append(c)
    return R.dumps([role, m.get("content"), calls, m.get("tool_call_id")]).encode("utf-8", "surrogatepass")


def _message_id(key: bytes, occurrence: int) -> str:
    return f"m{P.short_hash(key)[:20]}-{occurrence}"


class SessionParser:
    """The entries of one session: its archives' messages in order, its compression
    summary, then the session file's messages (see the module docstring).

    ``main``: (file name, parsed document) or None for an orphan archive group;
    ``archives``: [(file name, parsed document, time from the name)] oldest first."""

    def __init__(self, main: tuple[str, object] | None, archives: list[tuple[str, object, str | None]],
                 zone=None):
        self.main = main
        self.archives = archives
        self.zone = zone
        self.bad = 0
        self.warnings: list[str] = []
        self.entries: list[P.Entry] = []
        self.session_uuid = ""
        self.info = SessionInfo()

    # -- the session ---------------------------------------------------------------

    def parse(self) -> "SessionParser":
        zone = self.zone
        doc = self.main[1] if self.main is not None else None
        header = doc if isinstance(doc, dict) else {}
        if self.main is not None:
            stem = self.main[0][:-5] if self.main[0].endswith(".json") else self.main[0]
        else:
            m = _ARCHIVE_RE.match(self.archives[0][0])
            stem = m.group("sid") if m else self.archives[0][0].rsplit(".", 1)[0]
        own = header.get("session_id") if isinstance(header.get("session_id"), str) else header.get("id")
        self.session_uuid = P.clamp_id(own if isinstance(own, str) and own.strip() else stem)
        created = parse_time(header.get("created_at"), zone) or _time_from_name(stem, zone)
        updated = parse_time(header.get("updated_at"), zone)

        merged: list[_Merged] = []
        archive_lists = 0
        for index, (name, archive_doc, name_time) in enumerate(self.archives):
            found = messages_of(archive_doc)
            if found is None:
                self.warnings.append(f"{name}: not a compression archive (no message list): skipped")
                continue
            archive_lists += 1
            when = None
            if isinstance(archive_doc, dict):
                when = parse_time(archive_doc.get("archived_at", archive_doc.get("archive_at")), zone)
            merged.extend(_Merged(m, index, when or name_time or created) for m in found)
        if doc is None and not archive_lists:
            raise NotATranscript("not a mini-OpenClaw compression archive: no message list")
        live = messages_of(doc) if doc is not None else []
        if live is None:
            raise NotATranscript(not_a_session(self.main[0], doc))
        live = self._drop_archived_prefix(merged, live)
        archived = len(merged)
        merged.extend(_Merged(m, None, updated or created) for m in live)
        if merged and created is not None:
            merged[0].time = created  # the first message: when the session was created

        summary = header.get("compressed_context")
        seen: dict[bytes, int] = {}
        used: set[str] = set()
        parent: str | None = None
        seq = 0
        own_times = 0
        for position, item in enumerate(merged):
            if position == archived and isinstance(summary, str) and summary.strip():
                parent = self._summary(summary, parent, seq, merged[archived - 1].time if archived else created)
            m = item.obj
            if not isinstance(m, dict):
                self.bad += 1
                continue
            role = _raw_role(m)
            key = _identity(m, role)
            occurrence = seen.get(key, 0)
            seen[key] = occurrence + 1
            eid = m.get("id")
            eid = P.clamp_id(eid) if isinstance(eid, str) and eid.strip() and eid not in used else None
            eid = eid or _message_id(key, occurrence)
            used.add(eid)
            stamp = parse_time(m.get("timestamp", m.get("created_at")), zone)
            if stamp is not None:
                own_times += 1
            parent, seq = self._message(m, role, eid, parent, seq, stamp or item.time, stamp is None)
        if archived == len(merged) and isinstance(summary, str) and summary.strip():
            self._summary(summary, parent, seq, merged[-1].time if merged else created)

        dated = sum(isinstance(i.obj, dict) for i in merged)
        values = {"started_at": created, "times_approximate": int(own_times < dated)}
        title = header.get("title")
        if isinstance(title, str) and title.strip() not in PLACEHOLDER_TITLES:
            values["title"] = R.cut_text(title, 512)
        raw = None
        if header:
            kept = {k: v for k, v in header.items() if k not in ("messages", "compressed_context", "updated_at")}
            raw = R.dumps(kept)
        self.info = SessionInfo(values, raw)
        return self

    def _drop_archived_prefix(self, merged: list[_Merged], live: list) -> list:
        """A session file caught between its compression's two writes still starts with
        the whole newest archive: those messages are the archive's, not new ones."""
        if not self.archives or not merged:
            return live
        newest = [i.obj for i in merged if i.archive == merged[-1].archive]
        if len(live) >= len(newest) and all(
            isinstance(a, dict) and isinstance(b, dict) and _identity(a, _raw_role(a)) == _identity(b, _raw_role(b))
            for a, b in zip(newest, live)
        ):
            self.warnings.append(f"{self.main[0] if self.main else 'session'}: starts with its newest archive's "
                                 f"{len(newest)} messages (written mid-compression): counted once")
            return live[len(newest):]
        return live

    # -- entries ---------------------------------------------------------------------

    def _summary(self, text: str, parent: str | None, seq: int, when: str | None) -> str:
        obj = {"type": "compaction", "summary": text}
        raw = R.dumps({"parent": parent, "compressed_context": text}).encode("utf-8", "surrogatepass")
        row = {
            "entry_uuid": SUMMARY_ID, "parent_uuid": parent, "entry_type": "compaction", "custom_type": None,
            "text_preview": P.entry_preview(obj), "timestamp": when, "seq": seq,
            "raw_json": R.dumps({"compressed_context": text}),
        }
        self.entries.append(P.Entry(SUMMARY_ID, parent, "compaction", seq, obj, raw, row=row))
        return SUMMARY_ID

    def _message(self, m: dict, role: str | None, eid: str, parent: str | None, seq: int, when: str | None,
                 approximate: bool) -> tuple[str, int]:
        content = m.get("content")
        blocks: list[dict] = []
        reasoning = m.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            blocks.append({"type": "thinking", "thinking": reasoning})
        if isinstance(content, str):
            if content:
                blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, str):
                    blocks.append({"type": "text", "text": part})
                elif isinstance(part, dict):
                    blocks.append(part)
        elif content is not None:
            blocks.append({"type": "text", "text": R.dumps(content)})

        raw_calls = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []
        commands: dict[int, str | None] = {}  # block index -> a shell call's command line
        results: list[tuple[str, str | None, object]] = []  # (call id, tool, output) of canonical calls
        slim_calls = []
        for k, c in enumerate(raw_calls):
            if not isinstance(c, dict):
                slim_calls.append(c)
                continue
            canonical = "tool" in c or "input" in c or "output" in c
            tool = R.text(c.get("tool") if canonical else c.get("name"), 128)
            arguments, _how = parse_input(c.get("input") if canonical else c.get("args"))
            own = c.get("id")
            call_id = R.text(own, 255) if isinstance(own, str) and own else f"{eid}:{k}"
            commands[len(blocks)] = _command(tool, arguments)
            blocks.append({"type": "toolCall", "id": call_id, "name": tool, "arguments": arguments})
            if canonical:
                slim_calls.append({key: value for key, value in c.items() if key != "output"})
                if c.get("output") is not None:
                    results.append((call_id, tool, c.get("output")))
            else:
                slim_calls.append(c)

        slim = {key: value for key, value in m.items() if key not in ("content", "reasoning_content")}
        if raw_calls:
            slim["tool_calls"] = slim_calls
        tool_call_id = R.text(m.get("tool_call_id"), 255)
        is_error = role == "tool" and (m.get("status") == "error" or output_failed(content))
        row = R.message_row(eid, _vocabulary_role(role, tool_call_id), blocks=blocks, native_role=role or None,
                            parent=parent, timestamp=when, seq=seq, raw_json=R.dumps(slim),
                            time_approximate=approximate, is_error=is_error, tool_call_id=tool_call_id,
                            tool_name=m.get("name") if tool_call_id else None)
        calls = R.tool_call_rows(blocks, when, SHELL_TOOLS, commands, role=row["role"])
        raw = R.dumps({"parent": parent, "message": m}).encode("utf-8", "surrogatepass")
        self.entries.append(P.Entry(eid, parent, "message", seq, m, raw, row=row, calls=calls))
        parent, seq = eid, seq + 1
        for k, (call_id, tool, output) in enumerate(results):
            parent, seq = self._result(eid, k, call_id, tool, output, parent, seq, when, approximate)
        return parent, seq

    def _result(self, eid: str, k: int, call_id: str, tool: str | None, output, parent: str, seq: int,
                when: str | None, approximate: bool) -> tuple[str, int]:
        """A canonical call's output, as the toolResult message the writer pairs with it."""
        rid = f"{eid}:r{k}"
        text = output if isinstance(output, str) else R.dumps(output)
        failed = output_failed(output)
        blocks = [{"type": "text", "text": text}]
        meta = {"tool": tool, "tool_call_index": k, "of_message": eid, "outcome": "error" if failed else "unknown"}
        # (the kind has no word for it: the output is a field of its call)
        row = R.message_row(rid, V.TOOL_RESULT, blocks=blocks, native_role="toolResult", parent=parent,
                            timestamp=when, seq=seq, raw_json=R.dumps(meta), time_approximate=approximate,
                            is_error=failed, tool_call_id=call_id, tool_name=tool)
        raw = R.dumps({"parent": parent, "tool": tool, "output": output}).encode("utf-8", "surrogatepass")
        self.entries.append(P.Entry(rid, parent, "message", seq, meta, raw, row=row, calls=[]))
        return rid, seq + 1


# ---------------------------------------------------------------------------
# Units


class SessionUnit(Unit):
    """A session file and the compression archives of its session id (or those
    archives alone, when the session file is gone), read whole when any changes."""

    prefetch_limit = PREFETCH_LIMIT

    def __init__(self, source: "MiniOpenClaw", server: str, agent_id: str, main: tuple | None, archives: list,
                 fs: FileSystem, zone: str | None, session_type: str = "normal"):
        # main: (path, name, size, mtime_ns) or None; archives: [(path, name, size, mtime_ns, ts)] oldest first
        first = main or archives[0]
        size = sum(f[2] for f in ([main] if main else []) + archives)
        mtime = main[3] if main else max(a[3] for a in archives)
        token = file_token(main[2], main[3]) if main else "-"
        if archives:
            joined = "|".join(f"{a[1]}={a[2]}:{a[3]}" for a in archives)
            token += f"+{len(archives)}a:{P.short_hash(joined.encode('utf-8', 'surrogatepass'))}"
        super().__init__(source, server, agent_id, first[0], first[1], size, mtime, token=token, fs=fs,
                         path=first[0], session_type=session_type)
        self.main = main
        self.archives = archives
        self.zone = zone

    def _bytes(self, path: str, size: int) -> bytes:
        if size > MAX_BYTES:
            raise SourceError(f"{self.fs.basename(path)}: {size} bytes, more than the {MAX_BYTES} a session "
                              "file may have")
        with self.fs.open(path, size) as f:
            return f.read()

    def read(self, checkpoint: Checkpoint | None):
        zone = _zone(self.zone)
        read = 0
        main = None
        if self.main is not None:
            data = self._bytes(self.main[0], self.main[2])
            read += len(data)
            main = (self.main[1], load_json(self.main[1], data))
            if messages_of(main[1]) is None:
                raise NotATranscript(not_a_session(self.main[1], main[1]))
        archives = []
        for path, name, size, _mtime, ts in self.archives:
            data = self._bytes(path, size)
            read += len(data)
            archives.append((name, load_json(name, data), P.format_timestamp(ts * 1000) if ts else None))
        parsed = SessionParser(main, archives, zone).parse()
        if parsed.entries:
            yield Batch(parsed.session_uuid, parsed.entries)
        new = Checkpoint(status="success", token=self.token, offset=self.size, lines=len(parsed.entries),
                         bad_lines=parsed.bad, entries_read=len(parsed.entries), session_uuid=parsed.session_uuid)
        return Outcome(new, {parsed.session_uuid: parsed.info}, bad=parsed.bad, bytes_read=read,
                       saw_entries=bool(parsed.entries), warnings=parsed.warnings)


class OtherJSON(Unit):
    """A JSON file in ``sessions/`` that is only ever an index (sessions.json): recorded
    as ignored, with the reason."""

    def read(self, checkpoint):
        raise NotATranscript(not_a_session(self.name, {}))
        yield  # pragma: no cover


# ---------------------------------------------------------------------------
# The kind


class MiniOpenClaw(Source):
    kind = KIND
    order = 15  # before OpenClaw's "any folder named sessions" (it would list sessions.json as its index)
    shell_tools = SHELL_TOOLS
    not_this = "not a mini-OpenClaw session"

    # -- discovery ---------------------------------------------------------------

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        found = self._layout(fs, path)
        if found is None:
            return False
        sessions, app = found
        try:
            entries = fs.listdir(sessions)
        except OSError as exc:
            out.errors.append(f"{'' if not fs.remote else fs.label + ': '}cannot list {sessions}: "
                              f"{exc.strerror or exc}")
            return True
        if entries is None:
            return False
        if any(e.name.endswith(".jsonl") for e in entries):
            return False  # OpenClaw's agents/<id>/sessions/ (an agent named "backend")
        agent = scope.agent or P.clamp_id(fs.basename(app) or AGENT)
        if scope.wants(agent):
            self._list(fs, sessions, entries, scope, agent, out)
        return True

    @staticmethod
    def _layout(fs: FileSystem, path: str) -> tuple[str, str] | None:
        """(sessions folder, app folder) when ``path`` is an app folder, its backend/ or
        backend/sessions/; never a folder above them (a folder of per-server trees)."""
        name = fs.basename(path)
        parent = fs.dirname(path)
        if name == SESSIONS_DIR and fs.basename(parent) == BACKEND_DIR:
            backend, sessions = parent, path
        elif name == BACKEND_DIR and fs.is_dir(fs.join(path, SESSIONS_DIR)):
            backend, sessions = path, fs.join(path, SESSIONS_DIR)
        elif fs.is_dir(fs.join(path, BACKEND_DIR, SESSIONS_DIR)):
            backend, sessions = fs.join(path, BACKEND_DIR), fs.join(path, BACKEND_DIR, SESSIONS_DIR)
        else:
            return None
        app = fs.dirname(backend)
        if fs.basename(app) == "agents":
            return None  # OpenClaw: <state>/agents/backend/sessions
        return sessions, app

    def _list(self, fs: FileSystem, sessions: str, entries: list, scope: Scope, agent: str, out: Discovery) -> None:
        mains: list[tuple] = []  # (path, name, size, mtime, session_type)
        archives: dict[str, list[tuple]] = {}  # sid -> [(path, name, size, mtime, ts)]
        for entry in sorted(entries, key=lambda e: e.name):
            try:
                if entry.is_dir():
                    if entry.name == ARCHIVE_DIR:
                        for a in self._json_files(fs, entry.path, out):
                            m = _ARCHIVE_RE.match(a[1])
                            sid, ts = (m.group("sid"), int(m.group("ts"))) if m else (a[1][:-5], None)
                            archives.setdefault(sid, []).append((*a, ts))
                    elif entry.name == ARCHIVED_SESSIONS_DIR:
                        mains.extend((*a, "archived") for a in self._json_files(fs, entry.path, out))
                    continue
                if _wanted(entry.name) and entry.is_file():
                    mains.append((entry.path, entry.name, entry.size, entry.mtime_ns, "normal"))
            except OSError as exc:
                out.errors.append(f"cannot stat {entry.path}: {exc.strerror or exc}")
        for group in archives.values():
            group.sort(key=lambda a: (a[4] is not None, a[4] or 0, a[1]))
        stems = set()
        for path, name, size, mtime, kind in mains:
            stem = name[:-5]
            if name == INDEX_NAME:
                out.add(OtherJSON(self, scope.server, agent, path, name, size, mtime, fs=fs, session_type="index"))
                continue
            stems.add(stem)
            out.add(SessionUnit(self, scope.server, agent, (path, name, size, mtime), archives.get(stem, []), fs,
                                scope.timezone, kind))
        for sid, group in sorted(archives.items()):
            if sid not in stems:
                out.add(SessionUnit(self, scope.server, agent, None, group, fs, scope.timezone, "archive"))

    @staticmethod
    def _json_files(fs: FileSystem, folder: str, out: Discovery) -> list[tuple]:
        return files_in(fs, folder, _wanted, out)

    # -- one file named on the command line -----------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        if not name.endswith(".json"):
            return False
        head = head[len(UTF8_BOM):] if head.startswith(UTF8_BOM) else head
        head = head.lstrip()
        if head[:1] == b"{":
            keys = set(_HEAD_KEYS.findall(head))
            return bool(_HEAD_MESSAGES.search(head) and keys) or len(keys) >= 2
        if head[:1] == b"[":
            return bool(_HEAD_LIST.match(head))
        return False

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope,
                  out: Discovery) -> Unit | None:
        """One file: the unit of its session (with its archives, or the session file an
        archive belongs to), its agent the app folder's name."""
        folder = fs.dirname(path)
        name = fs.basename(path)
        inside = fs.basename(folder)
        sessions = fs.dirname(folder) if inside in (ARCHIVE_DIR, ARCHIVED_SESSIONS_DIR) else folder
        layout = fs.basename(sessions) == SESSIONS_DIR and fs.basename(fs.dirname(sessions)) == BACKEND_DIR
        agent = scope.agent or (P.clamp_id(fs.basename(fs.dirname(fs.dirname(sessions))) or AGENT) if layout
                                else AGENT)
        archive_dir = fs.join(sessions, ARCHIVE_DIR)
        if inside == ARCHIVE_DIR:
            m = _ARCHIVE_RE.match(name)
            sid = m.group("sid") if m else name[:-5]
            main_path = fs.join(sessions, sid + ".json")
            found = fs.stat(main_path)
            if found is not None and found[0] == "file":
                main = (main_path, sid + ".json", found[1], found[2])
            else:
                main = None
            kind = "normal" if main else "archive"
        else:
            sid = name[:-5]
            main = (path, name, size, mtime_ns)
            kind = "archived" if inside == ARCHIVED_SESSIONS_DIR else "normal"
        group = []
        for a in self._json_files(fs, archive_dir, out) if fs.is_dir(archive_dir) else []:
            m = _ARCHIVE_RE.match(a[1])
            a_sid, ts = (m.group("sid"), int(m.group("ts"))) if m else (a[1][:-5], None)
            if a_sid == sid:
                group.append((*a, ts))
        group.sort(key=lambda a: (a[4] is not None, a[4] or 0, a[1]))
        if main is None and not group:
            group = [(path, name, size, mtime_ns, None)]
        return SessionUnit(self, scope.server, agent, main, group, fs, scope.timezone, kind)


def _wanted(name: str) -> bool:
    """A JSON document of sessions/ (not a temporary or hidden file)."""
    return name.endswith(".json") and not name.startswith(".")


SOURCE = MiniOpenClaw()
