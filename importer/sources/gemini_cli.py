"""Gemini CLI transcripts: ``~/.gemini/tmp/<project>/chats/`` (docs/gemini-cli.md says what is
imported and how).

``<project>`` is the SHA-256 of the project's path (older releases) or a short name registered in
``~/.gemini/projects.json`` (``tmp/<name>/.project_root`` holds the path); both sit side by side.
A chat is either one ``.json`` session object (``{sessionId, projectHash, startTime, lastUpdated,
messages[], kind?, summary?, directories?}``, rewritten whole) or a ``.jsonl`` file (a header line,
message lines and ``{"$set": {...}}`` lines, appended; a message is written again with the same
``id`` when its tool calls finish: the last copy wins). Sub-agent runs are ``chats/<parent
sessionId>/<short id>.json`` (``kind: "subagent"``), skill extraction ``chats/skill-extraction-<id>/``.
Next to ``chats/``: ``logs.json`` (the prompts a person typed, per session) and ``checkpoints/``
(a file snapshot before a tool edits it, with the model's history): both kept as entries of their
session, never as messages.

A PATH may be a Gemini home (``~/.gemini``), a folder holding one (``.gemini/``), its ``tmp/``, one
project folder, its ``chats/``, a sub-agent folder inside it, or one file.

What a message becomes (the plain functions below read the Gemini chat-record format and make no
assumption of this kind, so a Gemini-like kind can reuse them): ``user`` -> a ``user`` row (one the
CLI wrote itself, ``System: Please continue.``, is context: ``system``); ``gemini`` -> an
``assistant`` row: its ``thoughts`` as ``thinking`` blocks, its text, its ``toolCalls`` as
``toolCall`` blocks, its ``tokens`` as the model call's usage; each tool call's ``result`` -> a
``toolResult`` row (``result:<call id>``); ``info``, ``warning`` and ``error`` -> ``system`` rows; a
message type this module does not know -> an entry.
"""

from __future__ import annotations

import hashlib
import re
from functools import partial

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..units import Batch, Checkpoint, NotATranscript, Outcome, SessionInfo, SourceError, Unit
from .base import Discovery, Scope, Source
from .fs import FileSystem
from .reader import read_lines

KIND = "gemini-cli"
AGENT = KIND  # the agent of every Gemini CLI session (--agent overrides)
HOME = ".gemini"
TMP = "tmp"
CHATS = "chats"
LOGS = "logs.json"
CHECKPOINTS = "checkpoints"
PROJECT_ROOT = ".project_root"
PROJECTS = "projects.json"
PROVIDER = "google"
SHELL_TOOLS = frozenset({"run_shell_command"})
ASSISTANT_TYPES = frozenset({"gemini"})
NOTICE_TYPES = frozenset({"info", "warning", "error"})  # the CLI's own notes: context, not sent by a person
# A user message the CLI wrote itself (the "next speaker" nudge), not a person.
INJECTED_PREFIX = "System: "
MAX_BYTES = 256 * 1024 * 1024  # a .json session is parsed whole: larger files are refused (per-file error)
SMALL_FILE = 64 * 1024  # projects.json, .project_root: read only when this small
PREFETCH_LIMIT = 8 * 1024 * 1024
LOG_SEQ = 1_000_000_000  # logs.json and checkpoint entries sort after every message of their session
RECENT = 32  # messages remembered across runs of a .jsonl (a re-written copy keeps its place)

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_SESSION_NAME_RE = re.compile(r"^session-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-(?P<id>[0-9a-fA-F]{8})")
_CHECKPOINT_NAME_RE = re.compile(r"^(?P<d>\d{4}-\d{2}-\d{2})T(?P<h>\d{2})-(?P<m>\d{2})-(?P<s>\d{2})_(?P<ms>\d{3})Z-")
_EXIT_CODE_RE = re.compile(rb"^Exit Code: (-?\d{1,10})\s*$", re.M)
QWEN_TYPE = re.compile(rb'"type"\s*:\s*"qwen"')  # a Qwen Code model message (its old layout is this format)
_GEMINI_TYPE = re.compile(rb'"type"\s*:\s*"gemini"')


def is_uuid(value: str) -> bool:
    return bool(_UUID_RE.match(value))


def _dumps(value) -> str:
    return R.dumps(value)


def _raw(value) -> bytes:
    return _dumps(value).encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------
# The Gemini chat-record format: plain functions (reusable by Gemini-like kinds)


def part_blocks(content) -> tuple[list, bool]:
    """A message's ``content`` (a string, or a list of Gemini ``Part``s) as pi-style blocks: text
    parts as ``text`` blocks, ``inlineData`` as ``image`` blocks. Returns (blocks, whether some part
    is not among them: a ``functionResponse``, a file, ...; the caller keeps those in raw_json)."""
    if isinstance(content, str):
        return ([{"type": "text", "text": content}] if content else []), False
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return [], content is not None
    blocks, other = [], False
    for part in content:
        if isinstance(part, str):
            if part:
                blocks.append({"type": "text", "text": part})
        elif isinstance(part, dict) and isinstance(part.get("text"), str) and not part.get("thought"):
            if part["text"]:
                blocks.append({"type": "text", "text": part["text"]})
            other = other or len(part) > 1
        elif isinstance(part, dict) and isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            blocks.append({"type": "image", "data": R.text(data.get("data")) or "",
                           "mimeType": R.text(data.get("mimeType")) or ""})
        else:
            other = True
    return blocks, other


def text_of(content) -> str:
    """The text parts of a ``content``, joined (for classifying a message, never stored)."""
    blocks, _ = part_blocks(content)
    return "".join(b["text"] for b in blocks if b.get("type") == "text")


def thought_blocks(thoughts) -> list:
    """A ``gemini`` message's ``thoughts[{subject, description, timestamp}]`` as ``thinking`` blocks:
    the thought as the model wrote it (its bold subject line, then the description), the fields
    kept beside it."""
    out = []
    for t in thoughts if isinstance(thoughts, list) else []:
        if isinstance(t, str):
            if t:
                out.append({"type": "thinking", "thinking": t})
            continue
        if not isinstance(t, dict):
            continue
        subject, description = R.text(t.get("subject")) or "", R.text(t.get("description")) or ""
        thinking = f"**{subject}**\n\n{description}" if subject and description else (
            f"**{subject}**" if subject else description)
        block = {"type": "thinking", "thinking": thinking}
        for key, value in t.items():
            if key not in ("type", "thinking", "description"):
                block[key] = value
        out.append(block)
    return out


def tool_call_block(call: dict) -> dict:
    """A ``toolCalls[]`` item as a ``toolCall`` block: ``id``, ``name``, ``args`` as ``arguments``;
    its other fields (status, timestamp, displayName, description, ...) kept, but not its
    ``result`` and ``resultDisplay``, which belong to its result row."""
    args = call.get("args")
    block = {"type": "toolCall", "id": R.text(call.get("id")), "name": R.text(call.get("name")),
             "arguments": args if isinstance(args, dict) else ({} if args is None else {"args": args})}
    for key, value in call.items():
        if key not in ("id", "name", "args", "result", "resultDisplay", "type", "arguments"):
            block[key] = value
    return block


def call_output(call: dict) -> tuple[list, bool]:
    """What a tool call's ``result`` says: (text blocks, whether it failed). The output is each
    ``functionResponse.response``'s ``output`` (its ``error`` when it failed), then any other text
    parts; ``status`` ``error`` or ``cancelled`` is a failure too."""
    blocks, failed = [], R.text(call.get("status")) in ("error", "cancelled")
    result = call.get("result")
    for part in result if isinstance(result, list) else ([result] if result is not None else []):
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"].get("response")
            if isinstance(response, dict):
                if "error" in response:
                    failed = True
                for key in ("output", "error"):
                    value = response.get(key)
                    if value is not None:
                        blocks.append({"type": "text", "text": value if isinstance(value, str) else _dumps(value)})
                rest = {k: v for k, v in response.items() if k not in ("output", "error")}
                if rest:
                    blocks.append({"type": "text", "text": _dumps(rest)})
            elif response is not None:
                blocks.append({"type": "text", "text": response if isinstance(response, str) else _dumps(response)})
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif isinstance(part, str):
            blocks.append({"type": "text", "text": part})
        elif part is not None:
            blocks.append({"type": "text", "text": _dumps(part)})
    return blocks, failed


def shell_exit_code(blocks: list) -> int | None:
    """The exit status a shell call's output states (``Exit Code: N``, written by the shell tool
    when a command exits non-zero, and always by older releases); None: it says none."""
    for block in blocks:
        text = block.get("text") if isinstance(block, dict) else None
        if not isinstance(text, str) or "Exit Code:" not in text:
            continue
        found = _EXIT_CODE_RE.findall(text.encode("utf-8", "surrogatepass"))
        if found:
            return R.integer(int(found[-1]))
    return None


def usage_columns(tokens) -> dict:
    """A ``gemini`` message's ``tokens{input, output, cached, thoughts, tool, total}`` (the API's
    prompt, candidates, cached-content, thoughts and tool-use-prompt counts) as usage columns:
    ``input_tokens`` = input - cached + tool (prompt tokens not read from the cache),
    ``output_tokens`` = output + thoughts (both are generated and billed as output),
    ``cache_read_tokens`` = cached, ``total_tokens`` = total. Values that are not counts are kept
    nowhere but raw_json, and flag the row ``usage_invalid``."""
    if not isinstance(tokens, dict):
        return {}
    counts = {}
    invalid = False
    for key in ("input", "output", "cached", "thoughts", "tool", "total"):
        value = tokens.get(key)
        n = R.integer(value) if not isinstance(value, bool) else None
        if value is not None and (n is None or n < 0):
            invalid = True
            n = None
        counts[key] = n
    inp, cached, tool = counts["input"], counts["cached"] or 0, counts["tool"] or 0
    out = {
        "input_tokens": max(inp - cached, 0) + tool if inp is not None else None,
        "output_tokens": (counts["output"] or 0) + (counts["thoughts"] or 0)
        if counts["output"] is not None or counts["thoughts"] is not None else None,
        "cache_read_tokens": counts["cached"],
        "total_tokens": counts["total"],
    }
    if invalid:
        out["usage_invalid"] = 1
    return out


def call_key(session_uuid: str, message_id: str) -> str:
    """A model call's identity: its message (one ``gemini`` message is one API response)."""
    return "g" + P.short_hash(f"{session_uuid}\x00{message_id}".encode("utf-8", "surrogatepass"))


class ChatMessages:
    """The entries of one chat's messages, in order: each message's row, then its tool results.

    ``session_uuid``: the session the entries go to; ``assistant_types``: the ``type`` values of
    the model's messages (``gemini``); ``shell_tools``: the kind's shell tools; ``provider``: the
    model calls' provider. ``last`` is the
    entry the next one hangs from (the chat is one chain); ``recent`` maps the last messages' ids
    to [parent, seq, last entry of the message], so that a message written again keeps its place.
    ``fallback_time``: the time of a message without one (approximate)."""

    def __init__(self, session_uuid: str, *, assistant_types=ASSISTANT_TYPES, shell_tools=SHELL_TOOLS,
                 provider: str | None = PROVIDER, last: str | None = None, recent: dict | None = None,
                 fallback_time: str | None = None):
        self.session_uuid = session_uuid
        self.provider = provider
        self.assistant_types = frozenset(assistant_types)
        self.shell_tools = frozenset(shell_tools)
        self.last = last
        self.recent: dict[str, list] = dict(recent or {})
        self.fallback_time = fallback_time
        self.approximate = False
        self.bad = 0

    def entry_id(self, m: dict, seq: int) -> str:
        own = m.get("id")
        if isinstance(own, str) and own:
            return P.clamp_id(own)
        return f"@{seq}"

    def message(self, m: dict, seq: int) -> list:
        """The entries of one message record (a dict). Unknown types become an entry."""
        eid = self.entry_id(m, seq)
        placed = self.recent.get(eid)
        again = isinstance(placed, list) and len(placed) == 3
        if again:
            parent, seq, tail = placed[0], placed[1], placed[2]
        else:
            parent, tail = self.last, None
        when = P.format_timestamp(m.get("timestamp"))
        approximate = when is None
        if approximate:
            when = self.fallback_time
            self.approximate = True
        else:
            self.fallback_time = when
        kind = m.get("type") if isinstance(m.get("type"), str) else None
        if kind in self.assistant_types:
            out = self._assistant(eid, parent, m, seq, when, approximate)
        elif kind == "user" or kind in NOTICE_TYPES:
            out = [self._plain(eid, parent, kind, m, seq, when, approximate)]
        else:
            out = [self.other(eid, parent, kind or V.UNKNOWN, m, seq, unknown=True)]
        # A copy written again continues the chain only if nothing came after its first copy.
        if not again or self.last in (tail, None):
            self.last = out[-1].entry_id
        self.recent.pop(eid, None)
        self.recent[eid] = [parent, seq, out[-1].entry_id]
        while len(self.recent) > RECENT:
            self.recent.pop(next(iter(self.recent)))
        return out

    def other(self, eid: str, parent: str | None, etype: str, obj, seq: int, unknown: bool = False) -> P.Entry:
        """An entry (not a message): a record of a type this module does not know (``unknown``: its
        ``custom_type`` says so, vocabulary.UNKNOWN), or a bookkeeping line."""
        raw = _raw(obj)
        row = {"entry_uuid": eid, "parent_uuid": parent, "entry_type": etype[:64],
               "custom_type": V.UNKNOWN if unknown else None,
               "text_preview": None, "timestamp": P.format_timestamp(obj.get("timestamp")) if isinstance(obj, dict)
               else None, "seq": seq, "raw_json": raw.decode("utf-8", "replace")}
        return P.Entry(eid, parent, etype[:64], seq, obj if isinstance(obj, dict) else {}, raw, row=row)

    def _plain(self, eid: str, parent: str | None, kind: str, m: dict, seq: int, when: str | None,
               approximate: bool) -> P.Entry:
        blocks, other = part_blocks(m.get("content"))
        if kind == "user":
            text = text_of(m.get("content"))
            role = V.SYSTEM if text.startswith(INJECTED_PREFIX) and not other else V.USER
        else:
            role = V.SYSTEM
        slim = {k: v for k, v in m.items() if k != "content"} if not other else m
        row = R.message_row(
            eid, role, blocks=blocks, native_role=kind, parent=parent, timestamp=when, seq=seq,
            raw_json=_dumps(slim), is_error=int(kind == "error"), time_approximate=int(approximate))
        return P.Entry(eid, parent, "message", seq, m, _raw({"parent": parent, "message": m}), row=row, calls=[])

    def _assistant(self, eid: str, parent: str | None, m: dict, seq: int, when: str | None,
                   approximate: bool) -> list:
        text_blocks, other = part_blocks(m.get("content"))
        listed = m.get("toolCalls")
        calls = [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
        blocks = thought_blocks(m.get("thoughts")) + text_blocks + [tool_call_block(c) for c in calls]
        usage = usage_columns(m.get("tokens"))
        slim = {k: v for k, v in m.items() if k not in ("thoughts", "toolCalls") and (k != "content" or other)}
        if "toolCalls" in m:
            slim["toolCalls"] = [{k: v for k, v in c.items() if k not in ("result", "resultDisplay")}
                                 if isinstance(c, dict) else c for c in listed] if isinstance(listed, list) else listed
        row = R.message_row(
            eid, V.ASSISTANT, blocks=blocks, native_role=R.text(m.get("type")), parent=parent, timestamp=when,
            seq=seq, raw_json=_dumps(slim), provider=self.provider, model=R.text(m.get("model")),
            call_key=call_key(self.session_uuid, eid) if any(v is not None for v in usage.values()) else None,
            time_approximate=int(approximate),
            **usage)
        entries = [P.Entry(eid, parent, "message", seq, m, _raw({"parent": parent, "message": slim,
                                                                 "content": m.get("content"),
                                                                 "thoughts": m.get("thoughts")}),
                           row=row, calls=R.tool_call_rows(blocks, when, self.shell_tools))]
        last = eid
        for k, call in enumerate(calls):
            if "result" not in call and R.text(call.get("status")) not in ("success", "error", "cancelled"):
                continue  # still running: its result comes with the message's next copy
            entries.append(self._result(eid, k, call, last, seq, when, approximate))
            last = entries[-1].entry_id
        return entries

    def _result(self, eid: str, k: int, call: dict, parent: str, seq: int, when: str | None,
                approximate: bool) -> P.Entry:
        call_id = R.text(call.get("id"), 255)
        rid = P.clamp_id(f"result:{call_id}") if call_id else f"{eid}:r{k}"
        name = R.text(call.get("name"), 128)
        blocks, failed = call_output(call)
        exit_code = shell_exit_code(blocks) if name in self.shell_tools else None
        at = P.format_timestamp(call.get("timestamp")) or when
        meta = {"of_message": eid, "id": call.get("id"), "name": call.get("name"), "status": call.get("status"),
                "result": call.get("result"), "resultDisplay": call.get("resultDisplay")}
        row = R.message_row(
            rid, V.TOOL_RESULT, blocks=blocks, native_role="functionResponse", parent=parent, timestamp=at,
            seq=seq, raw_json=_dumps({k2: v for k2, v in meta.items() if k2 not in ("result",)}),
            tool_call_id=call_id, tool_name=name, is_error=int(failed), exit_code=exit_code,
            time_approximate=int(approximate and at == when))
        return P.Entry(rid, parent, "message", seq, meta, _raw({"parent": parent, "result": meta}), row=row, calls=[])


def session_uuid_of(session_id, stem: str, folder: str | None) -> str:
    """The session a chat file holds: its ``sessionId`` (else the file name's stem); a sub-agent's
    short id is prefixed by its folder (the parent session's id), so ids of two parents never meet."""
    sid = session_id if isinstance(session_id, str) and session_id else stem
    if folder and not is_uuid(sid):
        sid = f"{folder}:{sid}"
    return P.clamp_id(sid)


def looks_like_gemini(head: bytes) -> bool:
    """Whether a file's first bytes read as a Gemini CLI chat (not a Qwen Code one, whose old
    layout is the same with ``type: "qwen"``)."""
    if QWEN_TYPE.search(head):
        return False
    h = head.lstrip()
    if not h.startswith(b"{"):
        return False
    if b'"sessionId"' not in h[:4096] or b'"projectHash"' not in h[:4096]:
        return False
    return True


# ---------------------------------------------------------------------------
# Where a file is: its project, cwd, sub-agent folder


class Place:
    """What a chat file's path says: its project folder (``tmp/<project>``), the project's name,
    and the sub-agent folder (``chats/<folder>/``) it is in."""

    def __init__(self, project_dir: str | None, folder: str | None = None):
        self.project_dir = project_dir
        self.folder = folder

    @classmethod
    def of(cls, fs: FileSystem, path: str) -> "Place":
        parent = fs.dirname(path)
        if fs.basename(parent) == CHATS:
            return cls(fs.dirname(parent))
        if fs.basename(fs.dirname(parent)) == CHATS:
            return cls(fs.dirname(fs.dirname(parent)), fs.basename(parent))
        if fs.basename(parent) == CHECKPOINTS:
            return cls(fs.dirname(parent))
        return cls(parent if fs.basename(path) == LOGS else None)

    def values(self, fs: FileSystem) -> dict:
        """``project`` (the folder's name: a registered name or the path's hash) and ``cwd`` (from
        ``.project_root``, else ``projects.json``), as far as the files say."""
        if self.project_dir is None:
            return {}
        project = fs.basename(self.project_dir)
        cwd = None
        root = _small(fs, fs.join(self.project_dir, PROJECT_ROOT))
        if root is not None:
            cwd = root.decode("utf-8", "replace").strip() or None
        if cwd is None and fs.basename(fs.dirname(self.project_dir)) == TMP:
            data = _small(fs, fs.join(fs.dirname(fs.dirname(self.project_dir)), PROJECTS))
            try:
                projects = orjson.loads(data).get("projects") if data else None
            except (orjson.JSONDecodeError, AttributeError):
                projects = None
            if isinstance(projects, dict):
                for path, name in projects.items():
                    if not isinstance(path, str):
                        continue
                    if name == project or hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest() == project:
                        cwd = path
                        break
        return {"project": P.cut_str(project, 255), "cwd": P.cut_str(cwd, 512) if cwd else None}


def _small(fs: FileSystem, path: str) -> bytes | None:
    try:
        found = fs.stat(path)
        if found is None or found[0] != "file" or found[1] > SMALL_FILE:
            return None
        return fs.read_bytes(path)
    except OSError:
        return None


def _session_values(doc: dict, place_values: dict, folder: str | None, approximate: bool) -> dict:
    values = dict(place_values)
    values["started_at"] = P.format_timestamp(doc.get("startTime"))
    summary = doc.get("summary")
    values["title"] = P.cut_str(summary, 512) if isinstance(summary, str) and summary.strip() else None
    sub = doc.get("kind") == "subagent" or folder is not None
    values["parent_session_uuid"] = P.clamp_id(folder) if sub and folder and is_uuid(folder) else None
    values["times_approximate"] = int(approximate)
    return {k: v for k, v in values.items() if v is not None}


# ---------------------------------------------------------------------------
# Units


def _load(name: str, data: bytes):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        where = exc.pos if isinstance(exc.pos, int) else 0
        what = ("ends before its JSON document does (a half-written file?)" if where >= len(data.rstrip())
                else f"is not valid JSON at byte {where}")
        raise SourceError(f"{name} ({len(data)} bytes) {what}; it is read again on the next run") from None


class _Whole(Unit):
    """A JSON file read whole every time it changes (rewritten whole by the CLI)."""

    prefetch_limit = PREFETCH_LIMIT

    def __init__(self, *args, place: Place | None = None, **kw):
        super().__init__(*args, **kw)
        self.place = place or Place(None)

    def _document(self):
        if self.size > MAX_BYTES:
            raise SourceError(f"{self.name}: {self.size} bytes, more than the {MAX_BYTES} a Gemini CLI file may have")
        with self.open() as f:
            data = f.read()
        if not data.strip():
            raise SourceError(f"{self.name} is empty (a file being written?); it is read again on the next run")
        return data, _load(self.name, data)


class ChatFile(_Whole):
    """A ``.json`` session object: every message, each once (by its ``id``)."""

    def read(self, checkpoint):
        data, doc = self._document()
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            raise NotATranscript(f"not a Gemini CLI transcript: {self.name} is no session object with messages")
        messages = doc["messages"]
        if any(isinstance(m, dict) and m.get("type") == "qwen" for m in messages):
            raise NotATranscript("not a Gemini CLI transcript: a Qwen Code session")
        stem = self.name.rsplit(".", 1)[0]
        session = session_uuid_of(doc.get("sessionId"), stem, self.place.folder)
        chat = ChatMessages(session, fallback_time=P.format_timestamp(doc.get("startTime"))
                            or P.format_timestamp(self.mtime_ns // 1_000_000))
        entries: list[P.Entry] = []
        for seq, m in enumerate(messages, start=1):
            if not isinstance(m, dict):
                chat.bad += 1
                continue
            entries.extend(chat.message(m, seq))
        entries = _last_copies(entries)
        header = {k: v for k, v in doc.items() if k != "messages"}
        values = _session_values(doc, self.place.values(self.fs), self.place.folder, chat.approximate)
        if entries:
            yield Batch(session, entries)
        new = Checkpoint(status="success", token=self.token, offset=self.size, lines=len(messages),
                         bad_lines=chat.bad, entries_read=len(entries), session_uuid=session)
        return Outcome(new, {session: SessionInfo(values, _dumps(header))}, bad=chat.bad, bytes_read=len(data),
                       saw_entries=bool(entries))


def _last_copies(entries: list) -> list:
    """One entry per id, where it first came, holding its last copy (a message written again)."""
    index: dict[str, int] = {}
    out: list = []
    for e in entries:
        at = index.get(e.entry_id)
        if at is None:
            index[e.entry_id] = len(out)
            out.append(e)
        else:
            out[at] = e
    return out


class ChatLineParser:
    """The ``.jsonl`` chat, incrementally (``sources/reader.py``'s ``feed`` protocol): line 0 the
    header, then message lines and ``$set`` lines. State carried across runs (``ParseState.extra``):
    the header, the ``$set`` values, the entry the next one hangs from, the last messages' places."""

    known_types: frozenset = frozenset()  # a file is a Gemini chat by its header line (read_lines: state.header)

    def __init__(self, file_name: str, state: P.ParseState | None = None, place: Place | None = None,
                 values: dict | None = None):
        self.file_name = file_name
        self.state = state or P.ParseState()
        self.place = place or Place(None)
        self.place_values = values or {}
        extra = self.state.extra
        header = extra.get("header")
        if isinstance(header, dict):
            self.state.header = header
        self.chat: ChatMessages | None = None
        if self.state.session_id:
            self._start(self.state.session_id)

    def _start(self, session: str) -> None:
        extra = self.state.extra
        self.chat = ChatMessages(session, last=extra.get("last"), recent=extra.get("recent"),
                                 fallback_time=extra.get("time"))

    def sessions(self) -> dict:
        state = self.state
        if state.session_id is None:
            return {}
        header = dict(state.header or {})
        header.update(state.extra.get("set") or {})
        approximate = bool(state.extra.get("approximate")) or bool(self.chat and self.chat.approximate)
        values = _session_values(header, self.place_values, self.place.folder, approximate)
        return {state.session_id: SessionInfo(values, _dumps(state.header) if state.header is not None else None)}

    def feed(self, data: bytes, final: bool = False) -> P.ChunkResult:
        result = P.ChunkResult()
        entries: list[P.Entry] = []
        end = len(data)
        start = result.consumed = P.complete_lines(data, lambda raw: self._line(raw, entries, result), self.state)
        if final and start < end and data[start:].strip():
            # The unterminated tail: imported when it is already a whole object, but not consumed,
            # so the next run reads it again (same id) once its newline comes.
            saved = (self.state.next_line, orjson.loads(orjson.dumps(self.state.extra)), self._chat_state())
            obj, _ = P.loads_line(data[start:])
            if isinstance(obj, dict):
                self._line(data[start:], entries, result)
                self.state.next_line = saved[0]
                self.state.extra = saved[1]
                self._restore(saved[2])
            else:
                result.pending_lines += 1
        if self.chat is not None:
            self.state.extra.update(self._chat_state())
        entries = _last_copies(entries)
        result.entries = entries
        if entries:
            result.batches = [Batch(self.state.session_id or P.session_id_from_name(self.file_name), entries)]
        return result

    def _chat_state(self) -> dict:
        if self.chat is None:
            return {}
        return {"last": self.chat.last, "recent": dict(self.chat.recent), "time": self.chat.fallback_time,
                "approximate": int(self.chat.approximate or bool(self.state.extra.get("approximate")))}

    def _restore(self, saved: dict) -> None:
        if self.chat is not None and saved:
            self.chat.last, self.chat.recent, self.chat.fallback_time = saved["last"], saved["recent"], saved["time"]

    def _line(self, raw: bytes, entries: list, result: P.ChunkResult) -> None:
        state = self.state
        index, obj, raw = P.read_line(state, raw, result)
        if obj is None:
            return
        if index == 0 and isinstance(obj.get("sessionId"), str) and "type" not in obj and "$set" not in obj:
            state.header = obj
            state.extra["header"] = obj
            session = session_uuid_of(obj.get("sessionId"), self.file_name.rsplit(".", 1)[0], self.place.folder)
            state.session_id = session
            self._start(session)
            self.chat.fallback_time = P.format_timestamp(obj.get("startTime"))
            return
        if self.chat is None:
            session = session_uuid_of(None, self.file_name.rsplit(".", 1)[0], self.place.folder)
            state.session_id = session
            self._start(session)
        if "$set" in obj and "type" not in obj:
            changes = obj.get("$set")
            if isinstance(changes, dict):
                kept = state.extra.setdefault("set", {})
                for key, value in changes.items():
                    if isinstance(value, (str, int, float, bool)) or value is None:
                        kept[key] = value
            # Bookkeeping, kept as an entry hanging from the chat (never part of its chain).
            entries.append(self.chat.other(f"$set@{index}", self.chat.last, "$set", obj, index))
            return
        if obj.get("type") == "qwen":
            result.bad_lines += 1  # (a Qwen Code line in a Gemini file: not this kind's; counted, kept nowhere)
            return
        entries.extend(self.chat.message(obj, index))


class ChatLines(Unit):
    """A ``.jsonl`` chat, read from where the last run stopped."""

    prefetch_limit = PREFETCH_LIMIT

    def __init__(self, *args, place: Place | None = None, **kw):
        super().__init__(*args, **kw)
        self.place = place or Place(None)

    def read(self, checkpoint):
        values = self.place.values(self.fs)
        return (yield from read_lines(self, checkpoint, partial(ChatLineParser, place=self.place, values=values)))


class LogsFile(_Whole):
    """``logs.json``: the prompts a person typed (``{sessionId, messageId, type, message, timestamp}``),
    each an entry of its session (``log:<messageId>``), never a message."""

    meta = True

    def read(self, checkpoint):
        data, doc = self._document()
        if not isinstance(doc, list):
            raise NotATranscript(f"not a Gemini CLI transcript: {LOGS} that is no list of prompts")
        by_session: dict[str, list] = {}
        bad = 0
        for i, item in enumerate(doc):
            sid = item.get("sessionId") if isinstance(item, dict) else None
            if not isinstance(sid, str) or not sid:
                bad += 1
                continue
            session = P.clamp_id(sid)
            mid = R.integer(item.get("messageId"))
            eid = f"log:{mid}" if mid is not None else f"log@{i}"
            raw = _raw(item)
            message = item.get("message")
            row = {"entry_uuid": eid, "parent_uuid": None, "entry_type": "log",
                   "custom_type": R.text(item.get("type"), 128),
                   "text_preview": R.preview(message) if isinstance(message, str) else None,
                   "timestamp": P.format_timestamp(item.get("timestamp")), "seq": LOG_SEQ + i,
                   "raw_json": raw.decode("utf-8", "replace")}
            by_session.setdefault(session, []).append(P.Entry(eid, None, "log", i, item, raw, row=row))
        values = self.place.values(self.fs)
        for session, entries in by_session.items():
            yield Batch(session, _last_copies(entries))
        new = Checkpoint(status="success", token=self.token, offset=self.size, lines=len(doc), bad_lines=bad,
                         entries_read=sum(len(e) for e in by_session.values()))
        return Outcome(new, {s: SessionInfo(values) for s in by_session}, bad=bad, bytes_read=len(data),
                       saw_entries=bool(by_session))


class CheckpointFile(_Whole):
    """``checkpoints/<time>-<file>-<tool>.json``: the state before a tool changed a file (the shadow
    git commit, the tool call, the model's history): one entry of the session its ``messageId``
    names (``<sessionId>########<n>``), never messages."""

    meta = True

    def read(self, checkpoint):
        data, doc = self._document()
        if not isinstance(doc, dict) or not ("clientHistory" in doc or "toolCall" in doc or "messageId" in doc):
            raise NotATranscript(f"not a Gemini CLI checkpoint: {self.name}")
        mid = R.text(doc.get("messageId")) or ""
        sid = mid.split("#", 1)[0] if "#" in mid else ""
        if not sid:
            raise NotATranscript(f"a Gemini CLI checkpoint that names no session: {self.name}")
        session = P.clamp_id(sid)
        m = _CHECKPOINT_NAME_RE.match(self.name)
        when = P.format_timestamp(f"{m['d']}T{m['h']}:{m['m']}:{m['s']}.{m['ms']}Z") if m else None
        call = doc.get("toolCall") if isinstance(doc.get("toolCall"), dict) else {}
        eid = P.clamp_id(f"checkpoint:{self.name[:-5] if self.name.endswith('.json') else self.name}")
        raw = data
        row = {"entry_uuid": eid, "parent_uuid": None, "entry_type": "checkpoint",
               "custom_type": R.text(call.get("name"), 128), "text_preview": None, "timestamp": when,
               "seq": LOG_SEQ, "raw_json": _dumps(doc)}
        yield Batch(session, [P.Entry(eid, None, "checkpoint", 0, doc, raw, row=row)])
        new = Checkpoint(status="success", token=self.token, offset=self.size, lines=1, entries_read=1,
                         session_uuid=session)
        return Outcome(new, {session: SessionInfo(self.place.values(self.fs))}, bytes_read=len(data),
                       saw_entries=True)


# ---------------------------------------------------------------------------
# The kind


def _wanted(name: str) -> bool:
    return (name.endswith(".json") or name.endswith(".jsonl")) and not name.startswith(".")


class GeminiCli(Source):
    kind = KIND
    order = 14  # before the looser kinds (a folder named chats/ or tmp/ says nothing to them)
    records_costs = False  # no cost is stored: priced from the table
    shell_tools = SHELL_TOOLS
    places = ("~/" + HOME,)
    not_this = "not a Gemini CLI transcript"

    def session_type(self, name: str) -> str:
        if name == LOGS:
            return "logs"
        if _CHECKPOINT_NAME_RE.match(name):
            return "checkpoint"
        return "normal"

    def is_copy(self, name: str) -> bool:
        # logs.json and checkpoints only add entries: they never decide a session's derived fields
        return name == LOGS or bool(_CHECKPOINT_NAME_RE.match(name))

    def claimed_session(self, name: str) -> str | None:
        m = _SESSION_NAME_RE.match(name)
        return m.group("id").lower() if m else None

    # -- discovery -----------------------------------------------------------------------------

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        projects = self._projects(fs, path)
        if projects is None:
            return False
        agent = scope.agent or AGENT
        if not scope.wants(agent):
            return True
        for project, only in projects:
            self._project(fs, project, only, scope.server, agent, out)
        return True

    def _projects(self, fs: FileSystem, path: str) -> list[tuple[str, str | None]] | None:
        """The project folders at ``path`` (with the one chats/ sub-folder to list, when the path is
        one), or None when it is not this kind's layout."""
        name = fs.basename(path)
        parent = fs.dirname(path)
        home = None
        if name == HOME:
            home = path
        elif fs.is_dir(fs.join(path, HOME, TMP)):
            home = fs.join(path, HOME)
        if home is not None:
            tmp = fs.join(home, TMP)
            return [(sub.path, None) for sub in fs.subdirs(tmp)] if fs.is_dir(tmp) else None
        if name == TMP and fs.basename(parent) == HOME:
            return [(sub.path, None) for sub in fs.subdirs(path)]
        if name == CHATS and self._ours(fs, parent):
            return [(parent, None)]
        if fs.basename(parent) == CHATS and self._ours(fs, fs.dirname(parent)):
            return [(fs.dirname(parent), name)]
        if fs.basename(parent) == TMP and fs.basename(fs.dirname(parent)) == HOME:
            return [(path, None)]
        if fs.is_dir(fs.join(path, CHATS)) and self._ours(fs, path):
            return [(path, None)]
        return None

    def _ours(self, fs: FileSystem, project: str) -> bool:
        """A project folder (``tmp/<project>``) is Gemini's: under ``.gemini/tmp/``, or, outside one
        (a copy), when a chat file in it reads as Gemini's (Qwen Code's old layout is the same shape)."""
        tmp = fs.dirname(project)
        if fs.basename(tmp) == TMP:
            home = fs.basename(fs.dirname(tmp))
            if home == HOME:
                return True
            if home == ".qwen":
                return False
        chats = fs.join(project, CHATS)
        try:
            entries = fs.listdir(chats) or []
        except OSError:
            return False
        for e in sorted(entries, key=lambda e: e.name):
            try:
                if not (_wanted(e.name) and e.is_file()):
                    continue
                with fs.open(e.path, e.size) as f:
                    head = f.read(64 * 1024)
            except OSError:
                continue
            return looks_like_gemini(head) and (_GEMINI_TYPE.search(head) is not None or e.name.endswith(".jsonl")
                                                or b'"messages"' in head)
        return False

    def _project(self, fs: FileSystem, project: str, only: str | None, server: str, agent: str,
                 out: Discovery) -> None:
        chats = fs.join(project, CHATS)
        if only is not None:
            self._chat_folder(fs, fs.join(chats, only), Place(project, only), server, agent, out)
            return
        if fs.is_dir(chats):
            try:
                entries = fs.listdir(chats) or []
            except OSError as exc:
                out.errors.append(f"cannot list {chats}: {exc.strerror or exc}")
                entries = []
            for e in sorted(entries, key=lambda e: e.name):
                try:
                    if e.is_dir():
                        self._chat_folder(fs, e.path, Place(project, e.name), server, agent, out)
                    elif _wanted(e.name) and e.is_file():
                        out.add(self._chat_unit(fs, e.path, e.name, e.size, e.mtime_ns, Place(project), server,
                                                agent, "normal"))
                except OSError as exc:
                    out.errors.append(f"cannot stat {e.path}: {exc.strerror or exc}")
        logs = fs.join(project, LOGS)
        found = fs.stat(logs)
        if found is not None and found[0] == "file":
            out.add(LogsFile(self, server, agent, logs, LOGS, found[1], found[2], fs=fs, place=Place(project),
                             session_type="logs"))
        checkpoints = fs.join(project, CHECKPOINTS)
        if fs.is_dir(checkpoints):
            for e in sorted(fs.listdir(checkpoints) or [], key=lambda e: e.name):
                try:
                    if e.name.endswith(".json") and e.is_file():
                        out.add(CheckpointFile(self, server, agent, e.path, e.name, e.size, e.mtime_ns, fs=fs,
                                               place=Place(project), session_type="checkpoint"))
                except OSError as exc:
                    out.errors.append(f"cannot stat {e.path}: {exc.strerror or exc}")

    def _chat_folder(self, fs: FileSystem, folder: str, place: Place, server: str, agent: str,
                     out: Discovery) -> None:
        try:
            entries = fs.listdir(folder) or []
        except OSError as exc:
            out.errors.append(f"cannot list {folder}: {exc.strerror or exc}")
            return
        for e in sorted(entries, key=lambda e: e.name):
            try:
                if _wanted(e.name) and e.is_file():
                    out.add(self._chat_unit(fs, e.path, e.name, e.size, e.mtime_ns, place, server, agent,
                                            "subagent"))
            except OSError as exc:
                out.errors.append(f"cannot stat {e.path}: {exc.strerror or exc}")

    def _chat_unit(self, fs: FileSystem, path: str, name: str, size: int, mtime_ns: int, place: Place, server: str,
                   agent: str, session_type: str) -> Unit:
        cls = ChatLines if name.endswith(".jsonl") else ChatFile
        return cls(self, server, agent, path, name, size, mtime_ns, fs=fs, place=place, session_type=session_type)

    # -- one file named on the command line -------------------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        if name == LOGS:
            return b'"sessionId"' in head and b'"messageId"' in head and head.lstrip().startswith(b"[")
        if _CHECKPOINT_NAME_RE.match(name) and name.endswith(".json"):
            return b'"clientHistory"' in head and b'"messageId"' in head
        return _wanted(name) and looks_like_gemini(head)

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope,
                  out: Discovery) -> Unit | None:
        name = fs.basename(path)
        place = Place.of(fs, path)
        agent = scope.agent or AGENT
        if name == LOGS:
            return LogsFile(self, scope.server, agent, path, name, size, mtime_ns, fs=fs, place=place,
                            session_type="logs")
        if _CHECKPOINT_NAME_RE.match(name):
            return CheckpointFile(self, scope.server, agent, path, name, size, mtime_ns, fs=fs, place=place,
                                  session_type="checkpoint")
        return self._chat_unit(fs, path, name, size, mtime_ns, place, scope.server, agent,
                               "subagent" if place.folder else "normal")


SOURCE = GeminiCli()
