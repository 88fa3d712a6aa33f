"""Cline (the VS Code extension ``saoudrizwan.claude-dev``): one folder per task,
``<globalStorage>/saoudrizwan.claude-dev/tasks/<taskId>/`` (docs/cline.md says what is imported and how).

A task folder holds ``api_conversation_history.json`` (the Anthropic message list the extension sends
the model: ``[{role, content[]}]``), ``ui_messages.json`` (the chat panel's log, ``[{ts, type, say|ask,
text, conversationHistoryIndex, ...}]``: the only times, and each request's tokens and cost in its
``say: api_req_started`` message) and ``task_metadata.json`` (models used, files in context,
environment). Roo Code (``rooveterinaryinc.roo-cline``), a fork, keeps the same layout: a task under its
folder is read the same way, as agent ``roo-code``.

A PATH may be a VS Code ``globalStorage`` folder, the extension's folder, its ``tasks/`` folder, one task
folder (by any name: an exported copy too), a folder of task folders, or one
``api_conversation_history.json``.

A **unit** is one task folder: its key is the path of its ``api_conversation_history.json``, its token
the three files' size:mtime joined. The files are rewritten whole, so the unit is read whole when any
changes; every message's id is its place in the history (``<index>``, and ``<index>:<part>`` for the
parts a user message is split into), which a rewrite that appends keeps, so the writer merges by id and
only what is new is added.
"""

from __future__ import annotations

import re

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..units import Batch, Checkpoint, NotATranscript, Outcome, SessionInfo, SourceError, Unit, file_token
from . import claude_code
from .base import Discovery, Scope, Source
from .fs import FileSystem, folders

KIND = "cline"
AGENT = "cline"
ROO_AGENT = "roo-code"
CLINE_EXTENSION = "saoudrizwan.claude-dev"
ROO_EXTENSION = "rooveterinaryinc.roo-cline"
EXTENSIONS = {CLINE_EXTENSION: AGENT, ROO_EXTENSION: ROO_AGENT}
TASKS = "tasks"
HISTORY = "api_conversation_history.json"
UI = "ui_messages.json"
METADATA = "task_metadata.json"
# VS Code's globalStorage folders (Linux, macOS, a VS Code server: Remote-SSH, Codespaces).
GLOBAL_STORAGE = (
    "~/.config/Code/User/globalStorage",
    "~/Library/Application Support/Code/User/globalStorage",
    "~/.vscode-server/data/User/globalStorage",
    "~/.vscode-remote/data/User/globalStorage",
)
SHELL_TOOLS = frozenset({"execute_command"})  # the tool that runs a shell command (Source.shell_tools)
MAX_BYTES = 256 * 1024 * 1024  # a JSON document is parsed whole: larger files are refused (per-unit error)
PREFETCH_LIMIT = 8 * 1024 * 1024
UTF8_BOM = b"\xef\xbb\xbf"

# A user text block's first characters: what Cline put there.
_RESULT_RE = re.compile(r"^\[(?P<tool>[A-Za-z0-9_.:-]{1,128})(?: for [^\n]*?)?\] Result:")
_PROMPT_TAGS = ("<task>", "<feedback>", "<answer>", "<user_message>")
_RESUMPTION = "[TASK RESUMPTION]"
_CWD_RE = re.compile(r"# Current Working Directory \(([^)\n]{1,4096})\)")
_TASK_ID_RE = re.compile(r"(\d{10,})$")


def _h16(value: str) -> str:
    return P.short_hash(value.encode("utf-8", "surrogatepass"))[:16]


def load_json(name: str, data: bytes):
    """A whole JSON document, or a one-line per-unit error that says where it stops (never what it holds)."""
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        where = exc.pos
        what = ("ends before its JSON document does (a half-written file?)" if where >= len(data.rstrip())
                else f"is not valid JSON at byte {where}")
        raise SourceError(f"{name} ({len(data)} bytes) {what}; it is read again on the next run") from None


# ---------------------------------------------------------------------------
# Blocks: Anthropic's -> the archive's (pi-style), other fields kept


def to_block(block):
    """One Anthropic content block in the archive's vocabulary, every other field kept: as Claude Code
    reads its own (``claude_code.to_block``: ``tool_use`` -> ``toolCall``, ``input`` -> ``arguments``;
    ``thinking``'s ``signature`` -> ``thinkingSignature``), but never to be turned back: a bare string
    is a text block, a ``redacted_thinking`` a redacted ``thinking`` of no text, any base64 ``image``
    (whatever else it holds) ``data``/``mimeType``."""
    if not isinstance(block, dict):
        return {"type": "text", "text": block} if isinstance(block, str) else block
    t = block.get("type")
    if t == "redacted_thinking":
        out = {"type": "thinking", "thinking": "", "redacted": True}
        out.update((k, v) for k, v in block.items() if k != "type")
        return out
    if t == "image" and isinstance(block.get("source"), dict):
        src = block["source"]
        if src.get("type") == "base64" and isinstance(src.get("data"), str):
            return {"type": "image", "data": src["data"], "mimeType": src.get("media_type")}
    return claude_code.to_block(block)


def _blocks(content) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _text_of(block) -> str | None:
    return block.get("text") if isinstance(block, dict) and block.get("type") == "text" and \
        isinstance(block.get("text"), str) else None


def classify(text: str) -> str:
    """What a user text block is: ``user`` (a prompt a person typed: the task, feedback, an answer, new
    instructions on resuming), ``result`` (a tool's result, ``[tool for '...'] Result:``) or ``system``
    (what Cline injected: environment details, reminders, notices)."""
    s = text.lstrip()
    if s.startswith(_PROMPT_TAGS):
        return V.USER
    if s.startswith(_RESUMPTION):
        return V.USER if "<user_message>" in s else V.SYSTEM
    if _RESULT_RE.match(s):
        return "result"
    return V.SYSTEM


# ---------------------------------------------------------------------------
# Usage: a request's api_req_started (tokens and cost), else the message's own metrics


def _count(value) -> tuple[int | None, bool]:
    if value is None:
        return None, False
    n = R.integer(value) if not isinstance(value, bool) else None
    if n is None or n < 0:
        return None, True
    return n, False


def usage_of(request: dict | None, metrics) -> dict:
    """The usage columns of one model call. ``request``: its ``api_req_started`` info (``tokensIn``
    excluding cache, ``tokensOut``, ``cacheReads``, ``cacheWrites``, ``cost``); else the history's
    ``metrics.tokens`` (``prompt``, ``completion``, ``cached``: reads and writes together, counted as
    reads)."""
    cols = {"input_tokens": None, "output_tokens": None, "cache_read_tokens": None, "cache_write_tokens": None,
            "total_tokens": None, "cost_usd": None, "usage_invalid": 0}
    invalid = False
    if request is not None:
        pairs = (("input_tokens", "tokensIn"), ("output_tokens", "tokensOut"), ("cache_read_tokens", "cacheReads"),
                 ("cache_write_tokens", "cacheWrites"))
        source = request
    else:
        tokens = metrics.get("tokens") if isinstance(metrics, dict) else None
        if not isinstance(tokens, dict):
            return cols
        pairs = (("input_tokens", "prompt"), ("output_tokens", "completion"), ("cache_read_tokens", "cached"))
        source = tokens
    seen = False
    for column, key in pairs:
        n, bad = _count(source.get(key))
        invalid |= bad
        cols[column] = n
        seen |= n is not None
    if seen:
        cols["total_tokens"] = sum(cols[c] or 0 for c, _ in pairs)
    if request is not None and "cost" in request:
        cost = R.number(request.get("cost"))
        if cost is None or cost < 0:
            invalid |= request.get("cost") is not None
            cost = None
        cols["cost_usd"] = cost
    cols["usage_invalid"] = int(invalid)
    return cols


def _request_info(ui: dict) -> dict | None:
    """An ``api_req_started`` message's JSON text, without the request text itself (what was sent)."""
    text = ui.get("text")
    if not isinstance(text, str):
        return None
    try:
        info = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(info, dict):
        return None
    return {k: v for k, v in info.items() if k != "request"}


# ---------------------------------------------------------------------------
# The parser: documents in, entries out (pure)


class TaskParser:
    """The entries of one task: its history's messages in order, each user message split into the
    prompt a person typed, the tool results and the context Cline added; usage and times from the UI
    log (see the module docstring)."""

    def __init__(self, task_id: str, history: list, ui: list | None, metadata: dict | None,
                 created_ms: int | None, fallback_time: str | None):
        self.task_id = task_id
        self.history = history
        self.ui = [m for m in ui if isinstance(m, dict)] if isinstance(ui, list) else []
        self.metadata = metadata if isinstance(metadata, dict) else {}
        self.created_ms = created_ms
        self.fallback_time = fallback_time
        self.entries: list[P.Entry] = []
        self.approximate = False
        self.cwd: str | None = None
        self.shell_tools = SHELL_TOOLS

    # -- the UI log: requests and times ------------------------------------------------------------

    def _index_ui(self) -> None:
        self.requests: list[dict] = []  # every api_req_started, in order: {ts, index, info, ui}
        self.by_index: dict[int, dict] = {}  # conversationHistoryIndex -> its api_req_started
        self.first_say: dict[int, int] = {}  # conversationHistoryIndex -> ts of the first reply message
        indexed = False
        for m in self.ui:
            ts = R.integer(m.get("ts"))
            idx = m.get("conversationHistoryIndex")
            idx = idx if isinstance(idx, int) and not isinstance(idx, bool) else None
            indexed |= idx is not None
            say = m.get("say") if m.get("type") == "say" else None
            if say == "api_req_started":
                info = _request_info(m)
                req = {"ts": ts, "index": idx, "info": info, "matched": False}
                self.requests.append(req)
                if idx is not None:
                    self.by_index.setdefault(idx, req)
            elif say in ("reasoning", "text", "tool", "command", "completion_result") and idx is not None \
                    and ts is not None:
                self.first_say.setdefault(idx, ts)
        self.indexed = indexed

    def _request_for(self, i: int, ordinal: int) -> dict | None:
        """The api_req_started of the assistant message at history index ``i`` (the ``ordinal``-th
        assistant message): the one whose conversationHistoryIndex is ``i - 2`` (the history's last
        index before the request's user message was added), else, in a log without indexes that has as
        many requests as the history has replies, the ``ordinal``-th."""
        if self.indexed:
            return self.by_index.get(i - 2)
        if len(self.requests) == self.assistants:
            return self.requests[ordinal]
        return None

    # -- the whole task ------------------------------------------------------------------------------

    def parse(self) -> "TaskParser":
        self._index_ui()
        self.assistants = sum(1 for m in self.history if isinstance(m, dict) and m.get("role") == "assistant")
        parent: str | None = None
        ordinal = 0
        pending_calls: list[tuple[str | None, str | None]] = []  # (call id, tool) not yet answered
        last_time = self._ms_text(self.created_ms) or self.fallback_time
        for i, m in enumerate(self.history):
            if not isinstance(m, dict) or m.get("role") not in (V.USER, V.ASSISTANT):
                parent = self._other(i, m, parent, last_time)
                continue
            if m["role"] == V.ASSISTANT:
                req = self._request_for(i, ordinal)
                ordinal += 1
                when, approximate = self._assistant_time(i, m, req, last_time)
                parent = self._assistant(i, m, req, parent, when, approximate)
                pending_calls = [(b.get("id"), b.get("name")) for b in _blocks(m.get("content"))
                                 if isinstance(b, dict) and b.get("type") == "tool_use"]
            else:
                when, approximate = self._user_time(i, m, last_time)
                parent = self._user(i, m, parent, when, approximate, pending_calls)
                pending_calls = []
            if when is not None:
                last_time = when
        self._unmatched(parent, last_time)
        return self

    def _ms_text(self, ms) -> str | None:
        return P.format_timestamp(ms) if ms is not None else None

    def _user_time(self, i: int, m: dict, last: str | None) -> tuple[str | None, bool]:
        own = self._ms_text(R.integer(m.get("ts")))  # Roo Code writes each message's time
        if own:
            return own, False
        req = self.by_index.get(i - 1) if self.indexed else None
        if req is not None and req["ts"] is not None:
            return self._ms_text(req["ts"]), False
        self.approximate = True
        return last, True

    def _assistant_time(self, i: int, m: dict, req: dict | None, last: str | None) -> tuple[str | None, bool]:
        own = self._ms_text(R.integer(m.get("ts")))
        if own:
            return own, False
        ts = self.first_say.get(i - 1) if self.indexed else None
        if ts is None and req is not None:
            ts = req["ts"]
        if ts is not None:
            return self._ms_text(ts), False
        self.approximate = True
        return last, True

    # -- rows ---------------------------------------------------------------------------------------

    def _slim(self, i: int, m: dict, **extra) -> str:
        slim = {k: v for k, v in m.items() if k != "content"}
        slim["_agentbase"] = {"index": i, **extra}
        return R.dumps(slim)

    def _emit(self, eid: str, parent: str | None, i: int, raw: dict, row: dict, calls: list) -> None:
        entry = P.Entry(eid, parent, "message", i, raw, R.dumps(raw).encode("utf-8", "surrogatepass"),
                        row=row, calls=calls)
        self.entries.append(entry)

    def _assistant(self, i: int, m: dict, req: dict | None, parent: str | None, when: str | None,
                   approximate: bool) -> str:
        eid = str(i)
        blocks = [to_block(b) for b in _blocks(m.get("content"))]
        info = m.get("modelInfo") if isinstance(m.get("modelInfo"), dict) else {}
        usage = usage_of(req["info"] if req is not None and req["info"] is not None else None, m.get("metrics"))
        if req is not None:
            req["matched"] = True
            key = _h16(f"{self.task_id}|req|{req['ts']}")
        else:
            key = _h16(f"{self.task_id}|msg|{i}")
        model = R.text(info.get("modelId")) or self._model_at(req["ts"] if req else None)
        row = R.message_row(
            eid, V.ASSISTANT, blocks=blocks, native_role=V.ASSISTANT, parent=parent, timestamp=when, seq=i,
            raw_json=self._slim(i, m, request=req["info"] if req else None),
            provider=R.text(info.get("providerId")), model=model, call_key=key,
            time_approximate=approximate, **usage)
        calls = R.tool_call_rows(blocks, when, SHELL_TOOLS)
        raw = {"message": m, "request": req["info"] if req else None}
        self._emit(eid, parent, i, raw, row, calls)
        return eid

    def _model_at(self, ts) -> str | None:
        """The model task_metadata.json says was in use at ``ts`` (its latest entry before)."""
        usage = self.metadata.get("model_usage")
        model = None
        for u in usage if isinstance(usage, list) else []:
            if not isinstance(u, dict):
                continue
            at = R.integer(u.get("ts"))
            if ts is not None and at is not None and at > ts:
                break
            model = R.text(u.get("model_id")) or model
        return model

    def _user(self, i: int, m: dict, parent: str | None, when: str | None, approximate: bool,
              pending: list) -> str:
        content = _blocks(m.get("content"))
        # Parts: runs of blocks of one role; each tool result a part of its own.
        parts: list[dict] = []
        open_calls = list(pending)
        for k, block in enumerate(content):
            text = _text_of(block)
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tid = R.text(block.get("tool_use_id"))
                name = next((n for c, n in open_calls if c == tid), None)
                open_calls = [(c, n) for c, n in open_calls if c != tid]
                inner = block.get("content")
                blocks = [to_block(b) for b in _blocks(inner)]
                parts.append({"role": V.TOOL_RESULT, "blocks": blocks, "at": [k], "call": tid, "tool": name,
                              "error": block.get("is_error") is True})
                continue
            role = classify(text) if text is not None else None
            if role == "result":
                tool = _RESULT_RE.match(text.lstrip()).group("tool")
                call = next(((c, n) for c, n in open_calls if n == tool), None)
                if call is not None:
                    open_calls.remove(call)
                parts.append({"role": V.TOOL_RESULT, "blocks": [block], "at": [k], "call": call[0] if call else None,
                              "tool": tool, "error": False})
                continue
            if role is None:  # an image, a document, a block of a type Cline may add: with the part before it
                role = parts[-1]["role"] if parts and parts[-1]["role"] != V.TOOL_RESULT else V.USER
            if parts and parts[-1]["role"] == role:
                parts[-1]["blocks"].append(to_block(block))
                parts[-1]["at"].append(k)
            else:
                parts.append({"role": role, "blocks": [to_block(block)], "at": [k]})
            if role == V.SYSTEM and self.cwd is None and text is not None:
                found = _CWD_RE.search(text)
                if found:
                    self.cwd = found.group(1)
        if not parts:
            parts.append({"role": V.USER, "blocks": [], "at": []})
        for n, p in enumerate(parts):
            eid = f"{i}:{n}"
            fields = {}
            if p["role"] == V.TOOL_RESULT:
                fields = {"tool_call_id": p["call"], "tool_name": p["tool"], "is_error": p["error"]}
            row = R.message_row(
                eid, p["role"], blocks=p["blocks"], native_role=V.USER, parent=parent, timestamp=when, seq=i,
                raw_json=self._slim(i, m, blocks=p["at"]), time_approximate=approximate, **fields)
            raw = {"index": i, "role": m.get("role"), "blocks": [content[k] for k in p["at"]],
                   "other": {k: v for k, v in m.items() if k not in ("role", "content")}}
            self._emit(eid, parent, i, raw, row, [])
            parent = eid
        return parent

    def _other(self, i: int, m, parent: str | None, when: str | None) -> str:
        """A history item that is not a user or assistant message (a role the kind does not know):
        kept as an entry ``history-item.<role>``, marked unknown (docs/sources.md, "Unknown records")."""
        eid = f"{i}:x"
        role = m.get("role") if isinstance(m, dict) else None
        raw = R.dumps(m)
        preview = None
        if isinstance(m, dict):
            preview = R.text_preview({"content": [to_block(b) for b in _blocks(m.get("content"))]})
        etype = f"history-item.{R.text(role, 51) or '?'}"
        row = {"entry_uuid": eid, "parent_uuid": parent, "entry_type": etype,
               "custom_type": V.UNKNOWN, "text_preview": preview, "timestamp": when, "seq": i,
               "raw_json": raw}
        self.entries.append(P.Entry(eid, parent, etype, i, m if isinstance(m, dict) else {},
                                    raw.encode("utf-8", "surrogatepass"), row=row))
        return eid

    def _unmatched(self, parent: str | None, last: str | None) -> None:
        """A request whose reply the history does not hold (a failed or cancelled one, or one still
        streaming): its usage, if any, as an assistant row with no content."""
        n = len(self.history)
        for req in self.requests:
            if req["matched"] or req["info"] is None:
                continue
            usage = usage_of(req["info"], None)
            if usage["total_tokens"] is None and usage["cost_usd"] is None:
                continue
            eid = f"req:{req['ts']}"
            when = self._ms_text(req["ts"]) or last
            row = R.message_row(
                eid, V.ASSISTANT, blocks=None, native_role="api_req_started", parent=parent, timestamp=when,
                seq=n, raw_json=R.dumps({"api_req_started": req["info"], "ts": req["ts"], "index": req["index"]}),
                call_key=_h16(f"{self.task_id}|req|{req['ts']}"), time_approximate=req["ts"] is None, **usage)
            self._emit(eid, parent, n, {"request": req["info"], "ts": req["ts"]}, row, [])
            parent = eid

    # -- the session --------------------------------------------------------------------------------

    def info(self) -> SessionInfo:
        values: dict = {}
        started = self._ms_text(self.created_ms)
        first_ui = next((R.integer(m.get("ts")) for m in self.ui if R.integer(m.get("ts")) is not None), None)
        if first_ui is not None and (self.created_ms is None or first_ui < self.created_ms):
            started = self._ms_text(first_ui)
        if started is None:  # no time in the task's id or log: its first message's own (Roo Code), else the file's
            started = next((e.row["timestamp"] for e in self.entries if e.type == "message" and e.row["timestamp"]
                            and not e.row["time_approximate"]), None)
        if started is None:
            started = self.fallback_time
            self.approximate = True
        values["started_at"] = started
        if self.cwd:
            values["cwd"] = self.cwd[:1024]
            base = self.cwd.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
            if base:
                values["project"] = base[:255]
        if self.approximate:
            values["times_approximate"] = 1
        envs = self.metadata.get("environment_history")
        if isinstance(envs, list) and envs and isinstance(envs[-1], dict):
            version = R.text(envs[-1].get("cline_version"))
            if version:
                values["agent_version"] = version[:64]  # the Cline that ran the task
        models = [e for e in self.entries if e.row and e.row.get("model")]
        if models:
            values["model"] = models[-1].row["model"]
            values["model_provider"] = models[-1].row.get("provider")
        header = {k: v for k, v in self.metadata.items() if k != "files_in_context"}
        if isinstance(self.metadata.get("files_in_context"), list):
            header["files_in_context_count"] = len(self.metadata["files_in_context"])
        return SessionInfo({k: v for k, v in values.items() if v is not None}, R.dumps(header) if header else None)


# ---------------------------------------------------------------------------
# Units


def task_id_of(folder_name: str) -> str:
    """A task folder's id: its name (``<epoch ms>``), or the number an exported copy's name ends with."""
    m = _TASK_ID_RE.search(folder_name)
    return P.clamp_id(m.group(1) if m else folder_name)


class TaskUnit(Unit):
    """One task folder, read whole when any of its files changes."""

    prefetch_limit = PREFETCH_LIMIT

    def __init__(self, source: "Cline", server: str, agent_id: str, folder: str, files: dict, fs: FileSystem):
        # files: name -> (size, mtime_ns) of the task's files present
        history = files[HISTORY]
        token = "|".join(f"{n}={file_token(*files[n])}" if n in files else f"{n}=-" for n in (HISTORY, UI, METADATA))
        size = sum(s for s, _m in files.values())
        mtime = max(m for _s, m in files.values())
        path = fs.join(folder, HISTORY)
        super().__init__(source, server, agent_id, path, HISTORY, size, mtime, token=token, fs=fs, path=path)
        self.folder = folder
        self.files = files
        self.history_mtime = history[1]

    def _bytes(self, name: str) -> bytes:
        size = self.files[name][0]
        if size > MAX_BYTES:
            raise SourceError(f"{name} of task {self.fs.basename(self.folder)}: {size} bytes, more than the "
                              f"{MAX_BYTES} a file may have")
        with self.fs.open(self.fs.join(self.folder, name), size) as f:
            return f.read()

    def read(self, checkpoint: Checkpoint | None):
        data = self._bytes(HISTORY)
        read = len(data)
        history = load_json(HISTORY, data)
        if not isinstance(history, list) or any(
                not isinstance(m, dict) or ("role" not in m and "content" not in m) for m in history):
            raise NotATranscript("not a Cline task: api_conversation_history.json is not a list of messages")
        warnings: list[str] = []
        docs = {}
        for name in (UI, METADATA):
            if name not in self.files:
                continue
            try:
                raw = self._bytes(name)
                read += len(raw)
                docs[name] = load_json(name, raw)
            except (SourceError, OSError) as exc:
                warnings.append(f"task {self.fs.basename(self.folder)}: {exc}; read without it")
        task_id = task_id_of(self.fs.basename(self.folder))
        created = R.integer(int(task_id)) if task_id.isdigit() and len(task_id) <= 16 else None
        parsed = TaskParser(task_id, history, docs.get(UI), docs.get(METADATA), created,
                            P.format_timestamp(self.history_mtime // 1_000_000)).parse()
        info = parsed.info()
        if parsed.entries:
            yield Batch(task_id, parsed.entries)
        new = Checkpoint(status="success", token=self.token, offset=self.size, lines=len(parsed.entries),
                         entries_read=len(parsed.entries), session_uuid=task_id)
        return Outcome(new, {task_id: info}, bytes_read=read, saw_entries=bool(parsed.entries), warnings=warnings)


# ---------------------------------------------------------------------------
# The kind


class Cline(Source):
    kind = KIND
    order = 18  # before OpenClaw's looser "a folder of transcripts"
    records_costs = False  # each request's recorded cost is kept (cost_source 'recorded'); a call without one is priced
    shell_tools = SHELL_TOOLS
    not_this = "not a Cline task"

    def candidates(self) -> list[str]:
        return [f"{root}/{ext}" for root in GLOBAL_STORAGE for ext in EXTENSIONS]

    def default_paths(self, fs: FileSystem) -> list[str]:
        """Every candidate that exists (Cline's and Roo Code's, on each VS Code of the machine)."""
        return list(folders(fs, self.candidates()))

    # -- discovery ---------------------------------------------------------------------------------

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        name = fs.basename(path)
        if fs.is_file(fs.join(path, HISTORY)):
            return self._tasks(fs, [path], scope, self._agent(fs, path), out)
        if name in EXTENSIONS:
            tasks = fs.join(path, TASKS)
            if fs.is_dir(tasks):
                self._tasks(fs, [s.path for s in fs.subdirs(tasks)], scope, EXTENSIONS[name], out)
            return True
        recognised = False
        for ext, agent in EXTENSIONS.items():  # a globalStorage folder
            tasks = fs.join(path, ext, TASKS)
            if fs.is_dir(tasks):
                self._tasks(fs, [s.path for s in fs.subdirs(tasks)], scope, agent, out)
                recognised = True
        if recognised:
            return True
        # tasks/, or any folder of task folders (exported copies)
        try:
            subs = fs.subdirs(path)
        except OSError:
            return False
        folders = [s.path for s in subs if fs.is_file(fs.join(s.path, HISTORY))]
        if not folders:
            return False
        return self._tasks(fs, folders, scope, self._agent(fs, folders[0]), out)

    @staticmethod
    def _agent(fs: FileSystem, task: str) -> str:
        """Roo Code's when the task sits in its extension's folder, else Cline's."""
        folder = task
        for _ in range(3):
            folder = fs.dirname(folder)
            if fs.basename(folder) in EXTENSIONS:
                return EXTENSIONS[fs.basename(folder)]
        return AGENT

    def _tasks(self, fs: FileSystem, folders: list[str], scope: Scope, agent: str, out: Discovery) -> bool:
        agent = scope.agent or agent
        if not scope.wants(agent):
            return True
        for folder in sorted(folders):
            unit = self._unit(fs, folder, scope, agent, out)
            if unit is not None:
                out.add(unit)
        return True

    def _unit(self, fs: FileSystem, folder: str, scope: Scope, agent: str, out: Discovery) -> TaskUnit | None:
        files = {}
        for name in (HISTORY, UI, METADATA):
            try:
                found = fs.stat(fs.join(folder, name))
            except OSError as exc:
                out.errors.append(f"cannot stat {fs.join(folder, name)}: {exc.strerror or exc}")
                return None
            if found is not None and found[0] == "file":
                files[name] = (found[1], found[2])
        if HISTORY not in files:
            return None
        return TaskUnit(self, scope.server, agent, folder, files, fs)

    # -- one file named on the command line ----------------------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        """By its name, which only Cline and its forks write (what it holds is checked on reading: a
        file that is no message list is "not a Cline task")."""
        return name == HISTORY

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope,
                  out: Discovery) -> Unit | None:
        folder = fs.dirname(path)
        return self._unit(fs, folder, scope, scope.agent or self._agent(fs, folder), out)


SOURCE = Cline()
