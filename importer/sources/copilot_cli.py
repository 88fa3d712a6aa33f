"""GitHub Copilot CLI sessions: ``~/.copilot/`` (``$COPILOT_HOME``, or ``$XDG_CONFIG_HOME/.copilot``), in
three layouts (docs/copilot-cli.md):

- ``session-state/<session id>/events.jsonl`` (with ``workspace.yaml``: cwd, repository, branch, name);
- ``session-state/<session id>.jsonl``: the same event lines, before the per-session folders;
- ``history-session-state/session_<session id>_<epoch ms>.json``: the old whole-file history
  (``chatMessages`` in OpenAI chat form beside a UI ``timeline``), rewritten whole.

A PATH may be a Copilot home (or a folder holding ``.copilot/``), its ``session-state/`` or
``history-session-state/`` folder, one session folder, or one file; a folder holding one home per
server works through discovery's per-server rule. ``session-store.db`` (the CLI's own index of its
sessions), a session folder's ``session.db`` (todos, inbox), ``checkpoints/`` and
``rewind-snapshots/`` are never opened (the doc page says why).

Events (``{type, data, id, timestamp, parentId}``, chained by ``parentId``) are read incrementally
by :class:`EventsParser` (the ``feed`` protocol of ``parser.TranscriptParser``, so
``reader.read_lines`` reads only what was appended). ``user.message`` is a ``user`` row,
``system.message`` a ``system`` row, ``assistant.message`` an ``assistant`` row (its
``reasoningText`` a thinking block, its ``toolRequests`` toolCall blocks, its ``outputTokens`` its
output usage, ``call_key`` from its ``messageId``), ``tool.execution_complete`` a ``toolResult`` row
paired by ``toolCallId``. ``session.shutdown`` carries the only input and cache counts, per model, for
the model calls since the previous shutdown: each model's are an ``assistant`` row without content
(``native_role`` ``session.shutdown``), whose output is only what the messages' ``outputTokens`` did
not already count, so no token is counted twice. Premium requests and nano-AIU are not dollars: no
cost is recorded (the price table prices the tokens). Every other event is an entry, kept raw.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..parser import ChunkResult, Entry, ParseState
from ..units import Batch, Checkpoint, NotATranscript, Outcome, SessionInfo, SourceError, Unit, file_token
from .base import Discovery, Scope, Source
from .fs import FileSystem, entry_is_dir as _is_dir, entry_is_file as _is_file, listing as _listing
from .reader import read_lines

KIND = "copilot-cli"
AGENT = KIND
HOME_NAMES = (".copilot", "copilot")
STATE_DIR = "session-state"
HISTORY_DIR = "history-session-state"
EVENTS_NAME = "events.jsonl"
WORKSPACE_NAME = "workspace.yaml"
# Files of a Copilot home beside the sessions: never opened, kept from other kinds' looser rules.
HOME_MARKERS = ("session-store.db", "config.json", "command-history-state.json", "mcp-config.json")
SHELL_TOOLS = frozenset({"bash", "powershell"})
PREFETCH_LIMIT = 8 * 1024 * 1024
MAX_BYTES = 256 * 1024 * 1024  # a history JSON document is parsed whole
WORKSPACE_MAX = 256 * 1024
MAX_TOOLS = 2048  # call id -> tool name, carried across runs
ENCRYPTED_PLACEHOLDER = "(encrypted reasoning: only the model can read it)"

# The event types this module knows (any other is kept as an entry too).
MESSAGE_EVENTS = frozenset({"user.message", "system.message", "assistant.message", "tool.execution_complete"})
EVENT_PREFIXES = ("session.", "user.", "assistant.", "tool.", "system.", "hook.", "permission.", "subagent.",
                  "skill.", "abort")
# The other events it knows: entries of their type (any other is marked unknown: docs/sources.md, "Unknown records").
ENTRY_EVENTS = frozenset({"session.start", "session.shutdown", "session.info", "session.error", "session.model_change",
                          "tool.execution_start", "assistant.turn_start", "assistant.turn_end", "abort"})
ENTRY_EVENT_PREFIXES = ("hook.", "permission.")
# The history timeline's item types it knows (each an entry ``timeline.<type>``).
TIMELINE_TYPES = frozenset({"user", "copilot", "tool_call_requested", "tool_call_completed", "info", "warning", "error"})
_HISTORY_RE = re.compile(r"^session_(?P<sid>[0-9A-Za-z-]+)_(?P<ms>\d{10,16})\.json$")
_EXIT_RE = re.compile(r"<exited with exit code (-?\d+)>")
_HEAD_HISTORY = re.compile(rb'"chatMessages"\s*:\s*\[')
_HEAD_SESSION_ID = re.compile(rb'"sessionId"\s*:\s*"')


# ---------------------------------------------------------------------------
# Small conversions


def _id(value: Any) -> str | None:
    return P.clamp_id(value) if isinstance(value, str) and value else None


def _hash(*parts: Any) -> str:
    return P.short_hash(R.dumps(list(parts)).encode("utf-8", "surrogatepass"))


def _tokens(value: Any) -> int | None:
    n = R.integer(value)
    return n if n is not None and n >= 0 else None


def _project(repository: Any, cwd: Any) -> str | None:
    if isinstance(repository, str) and repository:
        return repository[:255]
    if isinstance(cwd, str) and cwd.strip("/\\"):
        return re.split(r"[\\/]", cwd.rstrip("/\\"))[-1][:255] or None
    return None


def exit_code(text: str | None) -> int | None:
    """A shell call's exit status, as its output's last line says it (``<exited with exit code N>``)."""
    if not isinstance(text, str):
        return None
    found = _EXIT_RE.findall(text[-4096:])
    return int(found[-1]) if found else None


@functools.cache
def _workspace_loader():
    """YAML as ``workspace.yaml`` means it: ``true``/``false`` and ``null``/``~``/nothing are read,
    every other plain value stays the text it is (a time, a count: ``created_at`` is compared as
    written, and kept so in the session's header). Built at the first ``workspace.yaml`` read: PyYAML
    is a tenth of a start-up's instructions, and most runs read no Copilot CLI session."""
    import yaml

    class WorkspaceLoader(yaml.SafeLoader):
        yaml_implicit_resolvers: dict = {}

    WorkspaceLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))
    WorkspaceLoader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|)$"), ["~", "n", ""])
    return yaml, WorkspaceLoader


def parse_workspace(data: bytes) -> dict:
    """``workspace.yaml`` (PyYAML): the CLI's flat ``key: value`` mapping, each value a string, a
    boolean or None (a nested value is None). A file that is not such YAML raises ValueError, which
    says where, never what the file holds."""
    yaml, loader = _workspace_loader()
    try:
        doc = yaml.load(data.decode("utf-8", "replace"), Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ValueError(f"{WORKSPACE_NAME} is not YAML{where}") from None
    except RecursionError:
        raise ValueError(f"{WORKSPACE_NAME} is nested too deeply") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError(f"{WORKSPACE_NAME} is not a mapping of keys to values")
    return {k: v if isinstance(v, (str, bool, int, float)) else None for k, v in doc.items() if isinstance(k, str)}


def looks_like_events(head: bytes) -> bool:
    """A first line that is a Copilot event: ``{type, data, id, timestamp, parentId}`` with one of the
    CLI's dotted types (``session.start`` first in every file seen)."""
    for raw in head.split(b"\n"):
        if not raw.strip():
            continue
        obj, _ = P.loads_line(raw.rstrip(b"\r"))
        return _is_event(obj)
    return False


def _is_event(obj: Any) -> bool:
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), dict) or "parentId" not in obj:
        return False
    etype = obj.get("type")
    return isinstance(etype, str) and etype.startswith(EVENT_PREFIXES)


# ---------------------------------------------------------------------------
# Events: lines in, entries out (pure)


class EventsParser:
    """One events file (``events.jsonl`` or a flat ``<id>.jsonl``), incrementally.

    ``state.extra`` carries across runs: ``start`` (what ``session.start`` said), ``model`` (the
    latest ``session.model_change``), ``out`` (output tokens per model counted on messages since the
    last shutdown) and ``tools`` (call id -> tool name, for results)."""

    known_types = MESSAGE_EVENTS | {"message", "session.start", "session.shutdown", "tool.execution_start",
                                    "assistant.turn_start", "assistant.turn_end"}

    def __init__(self, file_name: str, state: ParseState | None = None, session_id: str | None = None,
                 workspace: dict | None = None):
        self.file_name = file_name
        self.state = state or ParseState()
        if self.state.session_id is None and session_id:
            self.state.session_id = P.clamp_id(session_id)
        self.workspace = workspace
        x = self.state.extra
        x.setdefault("out", {})
        x.setdefault("tools", {})

    # -- session values -------------------------------------------------------------

    def sessions(self) -> dict:
        state = self.state
        sid = state.session_id
        start = state.extra.get("start")
        ws = self.workspace or {}
        if sid is None or (start is None and not ws):
            return {}
        start = start or {}
        cwd = ws.get("cwd") if isinstance(ws.get("cwd"), str) else start.get("cwd")
        values = {
            "cwd": P.cut_str(cwd, 512),
            "started_at": P.format_timestamp(start.get("startTime")) or P.format_timestamp(ws.get("created_at")),
            "project": _project(ws.get("repository") or start.get("repository"), cwd),
        }
        if isinstance(ws.get("name"), str) and ws["name"].strip():
            values["title"] = P.cut_str(ws["name"], 512)  # the CLI's own name of the session
        version = R.integer(start.get("version"))
        if version is not None:
            values["version"] = version  # the event format's
        # the Copilot CLI that wrote it (copilotVersion; a release that wrote its own in "version" as a string)
        values["agent_version"] = R.text(start.get("copilotVersion"), 64) or R.text(start.get("version"), 64)
        raw = R.dumps({"session.start": start or None, "workspace": ws or None})
        return {sid: SessionInfo({k: v for k, v in values.items() if v is not None}, raw)}

    # -- lines ------------------------------------------------------------------------

    def feed(self, data: bytes, final: bool = False) -> ChunkResult:
        # (a tail taken is undone in state.extra too: it holds the tools started and the model)
        return P.feed_lines(self.state, data, final, self._line, keep_extra=True)

    def _line(self, raw: bytes, result: ChunkResult, pending: bool = False) -> bool:
        state = self.state
        index, obj, raw = P.read_line(state, raw, result, pending)
        if obj is None:
            return False
        etype = obj.get("type") if isinstance(obj.get("type"), str) else None
        data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
        if etype == "session.start":
            self._start(data)
        if state.session_id is None:
            state.session_id = P.session_id_from_name(self.file_name)
        eid = _id(obj.get("id")) or f"@{index}"
        parent = _id(obj.get("parentId")) if "parentId" in obj else state.last_entry_id
        ts = P.format_timestamp(obj.get("timestamp"))
        text = raw.decode("utf-8", "replace")
        handler = {
            "user.message": self._user, "system.message": self._system, "assistant.message": self._assistant,
            "tool.execution_complete": self._result,
        }.get(etype)
        if handler is not None:
            row, blocks = handler(eid, parent, ts, index, data, text)
            calls = R.tool_call_rows(blocks, ts, SHELL_TOOLS)
            result.entries.append(Entry(eid, parent, "message", index, obj, raw, row=row, calls=calls))
            state.last_entry_id = eid
            return True
        if etype == "tool.execution_start":
            self._tool(data.get("toolCallId"), data.get("toolName"))
        elif etype == "session.model_change" and isinstance(data.get("newModel"), str):
            state.extra["model"] = data["newModel"][:128]
        result.entries.append(self._entry(eid, parent, etype, index, obj, raw, data, ts, text))
        state.last_entry_id = eid
        if etype == "session.shutdown":
            self._shutdown(eid, index, data, ts, result)
        return True

    def _start(self, data: dict) -> None:
        ctx = data.get("context") if isinstance(data.get("context"), dict) else {}
        sid = _id(data.get("sessionId"))
        if sid:
            self.state.session_id = sid
        start = {"startTime": data.get("startTime"), "version": data.get("version"),
                 "copilotVersion": data.get("copilotVersion"), "producer": data.get("producer")}
        for key in ("cwd", "gitRoot", "repository", "branch"):
            if isinstance(ctx.get(key), str):
                start[key] = ctx[key]
        self.state.extra["start"] = {k: v for k, v in start.items() if v is not None}

    def _tool(self, call_id: Any, name: Any) -> None:
        if not isinstance(call_id, str) or not isinstance(name, str):
            return
        tools = self.state.extra["tools"]
        tools.pop(call_id, None)
        tools[call_id] = name[:128]
        while len(tools) > MAX_TOOLS:
            tools.pop(next(iter(tools)))

    # -- rows ----------------------------------------------------------------------------

    def _user(self, eid, parent, ts, index, data, text):
        content = data.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else []
        return R.message_row(eid, V.USER, blocks=blocks, native_role="user.message", parent=parent, timestamp=ts,
                             seq=index, raw_json=text), blocks

    def _system(self, eid, parent, ts, index, data, text):
        content = data.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else []
        return R.message_row(eid, V.SYSTEM, blocks=blocks, native_role="system.message", parent=parent, timestamp=ts,
                             seq=index, raw_json=text), blocks

    def _assistant(self, eid, parent, ts, index, data, text):
        blocks: list = []
        reasoning = data.get("reasoningText")
        if isinstance(reasoning, str) and reasoning:
            blocks.append({"type": "thinking", "thinking": reasoning})
        elif isinstance(data.get("reasoningOpaque"), str) and data["reasoningOpaque"]:
            blocks.append({"type": "thinking", "thinking": ENCRYPTED_PLACEHOLDER, "encrypted": True})
        content = data.get("content")
        if isinstance(content, str) and content:
            blocks.append({"type": "text", "text": content})
        for req in data.get("toolRequests") if isinstance(data.get("toolRequests"), list) else []:
            if not isinstance(req, dict):
                continue
            block = {"type": "toolCall", "id": req.get("toolCallId"), "name": req.get("name"),
                     "arguments": R.arguments(req.get("arguments"))}
            if isinstance(req.get("intentionSummary"), str):
                block["intentionSummary"] = req["intentionSummary"]
            blocks.append(block)
            self._tool(req.get("toolCallId"), req.get("name"))
        model = R.text(data.get("model"), 128) or self.state.extra.get("model")
        out = data.get("outputTokens")
        tokens = _tokens(out)
        invalid = out is not None and tokens is None
        if tokens and model:
            counted = self.state.extra["out"]
            counted[model] = counted.get(model, 0) + tokens
        key = data.get("messageId") if isinstance(data.get("messageId"), str) else eid
        row = R.message_row(eid, V.ASSISTANT, blocks=blocks, native_role="assistant.message", parent=parent,
                            timestamp=ts, seq=index, raw_json=text, model=model,
                            output_tokens=tokens if not invalid else None, total_tokens=tokens if not invalid else None,
                            call_key="cp" + _hash(self.state.session_id, key)[:22], usage_invalid=invalid)
        return row, blocks

    def _result(self, eid, parent, ts, index, data, text):
        call_id = R.text(data.get("toolCallId"), 255)
        name = self.state.extra["tools"].pop(call_id, None) if call_id else None  # (answered: not carried on)
        name = name or R.text(data.get("toolName"), 128)
        result = data.get("result")
        error = data.get("error")
        body = None
        if isinstance(result, dict):
            body = result.get("content")
        elif isinstance(result, str):
            body = result
        if body is None and isinstance(error, dict):
            body = error.get("message")
        elif body is None and isinstance(error, str):
            body = error
        if body is not None and not isinstance(body, str):
            body = R.dumps(body)
        blocks = [{"type": "text", "text": body if body is not None else ""}]
        code = exit_code(body) if name in SHELL_TOOLS else None
        failed = data.get("success") is False or (code is not None and code != 0)
        row = R.message_row(eid, V.TOOL_RESULT, blocks=blocks, native_role="tool.execution_complete", parent=parent,
                            timestamp=ts, seq=index, raw_json=text, tool_call_id=call_id, tool_name=name,
                            exit_code=code, is_error=failed)
        return row, []

    def _entry(self, eid, parent, etype, index, obj, raw, data, ts, text) -> Entry:
        custom = next((data[k] for k in ("infoType", "errorType", "hookType", "shutdownType", "reason")
                       if isinstance(data.get(k), str)), None)
        if etype not in ENTRY_EVENTS and not (etype or "").startswith(ENTRY_EVENT_PREFIXES):
            custom = V.UNKNOWN  # an event type the kind does not know
        preview = data.get("message") if isinstance(data.get("message"), str) else None
        row = {"entry_uuid": eid, "parent_uuid": parent, "entry_type": (etype or "unknown")[:64],
               "custom_type": R.text(custom, 128), "text_preview": R.preview(preview), "timestamp": ts, "seq": index,
               "raw_json": text}
        return Entry(eid, parent, (etype or "unknown")[:64], index, obj, raw, row=row)

    def _shutdown(self, eid, index, data, ts, result) -> None:
        """Each model's totals of the run: its input and cache tokens, and the output its messages did
        not carry, on an assistant row without content (no call_key: the totals of many calls)."""
        metrics = data.get("modelMetrics")
        if not isinstance(metrics, dict):
            return
        counted = self.state.extra["out"]
        parent = eid
        for model, m in metrics.items():
            usage = m.get("usage") if isinstance(m, dict) else None
            if not isinstance(usage, dict):
                continue
            details = m.get("tokenDetails") if isinstance(m.get("tokenDetails"), dict) else {}
            read = _tokens(usage.get("cacheReadTokens")) or 0
            write = _tokens(usage.get("cacheWriteTokens")) or 0
            plain = details.get("input") if isinstance(details.get("input"), dict) else None
            inp = _tokens(plain.get("tokenCount")) if plain else None
            if inp is None:
                inp = max((_tokens(usage.get("inputTokens")) or 0) - read - write, 0)
            out = max((_tokens(usage.get("outputTokens")) or 0) - counted.pop(model, 0), 0)
            rid = P.clamp_id(f"{eid}:{model}")
            raw_json = R.dumps({"model": model, **m})
            row = R.message_row(rid, V.ASSISTANT, blocks=None, native_role="session.shutdown", parent=parent,
                                timestamp=ts, seq=index, raw_json=raw_json, model=R.text(model, 128),
                                input_tokens=inp, output_tokens=out, cache_read_tokens=read, cache_write_tokens=write,
                                total_tokens=inp + out + read + write)
            raw = raw_json.encode("utf-8", "surrogatepass")
            result.entries.append(Entry(rid, parent, "message", index, m, raw, row=row, calls=[]))
            parent = rid
        self.state.extra["out"] = {}
        self.state.last_entry_id = parent


# ---------------------------------------------------------------------------
# The old history JSON: a document in, entries out (pure)


def history_entries(name: str, doc: Any) -> tuple[str, list[Entry], SessionInfo]:
    """The entries of a ``history-session-state`` document: its timeline items (entries, kept raw),
    then its chat messages chained in order. Ids come from content and occurrence, so a rewrite that
    appends changes no id. Times come from the timeline (a user message's, a tool's completion, the
    copilot reply's); a message without one gets the time before it, flagged approximate."""
    if not isinstance(doc, dict) or not isinstance(doc.get("chatMessages"), list):
        raise NotATranscript("not a GitHub Copilot CLI session: a JSON document without chatMessages")
    m = _HISTORY_RE.match(name)
    sid = _id(doc.get("sessionId")) or (m.group("sid") if m else P.session_id_from_name(name.rsplit(".", 1)[0]))
    started = P.format_timestamp(doc.get("startTime")) or (P.format_timestamp(int(m.group("ms"))) if m else None)
    model = R.text(doc.get("selectedModel"), 128)
    timeline = [t for t in doc.get("timeline") if isinstance(t, dict)] if isinstance(doc.get("timeline"), list) else []
    entries: list[Entry] = []
    user_times: list[str | None] = []
    reply_times: list[str | None] = []
    done: dict[str, dict] = {}
    for i, item in enumerate(timeline):
        kind = item.get("type") if isinstance(item.get("type"), str) else "unknown"
        ts = P.format_timestamp(item.get("timestamp"))
        if kind == "user":
            user_times.append(ts)
        elif kind == "copilot":
            reply_times.append(ts)
        elif kind == "tool_call_completed" and isinstance(item.get("callId"), str):
            done.setdefault(item["callId"], item)
        raw = R.dumps(item).encode("utf-8", "surrogatepass")
        eid = P.clamp_id("tl:" + (item["id"] if isinstance(item.get("id"), str) else f"{i}-{_hash(item)[:12]}"))
        row = {"entry_uuid": eid, "parent_uuid": None, "entry_type": ("timeline." + kind)[:64],
               "custom_type": None if kind in TIMELINE_TYPES else V.UNKNOWN,
               "text_preview": R.preview(R.text(item.get("text"))), "timestamp": ts, "seq": i, "raw_json": raw.decode()}
        entries.append(Entry(eid, None, row["entry_type"], i, item, raw, row=row))
    seen: dict[str, int] = {}
    tools: dict[str, str] = {}
    parent = None
    last_time = started
    approximate_any = False
    base = len(timeline)
    users = iter(user_times)
    replies = iter(reply_times)
    for k, msg in enumerate(doc["chatMessages"]):
        if not isinstance(msg, dict):
            continue
        native = msg.get("role") if isinstance(msg.get("role"), str) else None
        content = msg.get("content")
        calls = msg.get("tool_calls") if isinstance(msg.get("tool_calls"), list) else []
        ident = _hash(native, content, calls, msg.get("tool_call_id"))[:20]
        seen[ident] = seen.get(ident, 0) + 1
        eid = f"c{ident}-{seen[ident]}"
        blocks = _chat_blocks(content)
        when = None
        fields: dict[str, Any] = {}
        if native == "user":
            role = V.USER
            when = next(users, None)
        elif native == "assistant":
            role = V.ASSISTANT
            if any(b.get("type") == "text" and b.get("text") for b in blocks):
                when = next(replies, None)
            for c in calls:
                if not isinstance(c, dict):
                    continue
                fn = c.get("function") if isinstance(c.get("function"), dict) else {}
                blocks.append({"type": "toolCall", "id": c.get("id"), "name": fn.get("name"),
                               "arguments": R.arguments(fn.get("arguments"))})
                if isinstance(c.get("id"), str) and isinstance(fn.get("name"), str):
                    tools[c["id"]] = fn["name"]
            fields.update(model=model, call_key="cp" + _hash(sid, eid)[:22])
        elif native == "tool" and isinstance(msg.get("tool_call_id"), str):
            role = V.TOOL_RESULT
            call_id = msg["tool_call_id"]
            item = done.get(call_id)
            name = tools.get(call_id) or (R.text(item.get("name"), 128) if item else None)
            res = item.get("result") if item and isinstance(item.get("result"), dict) else {}
            text = content if isinstance(content, str) else None
            code = exit_code(text) if name in SHELL_TOOLS else None
            failed = (isinstance(res.get("type"), str) and res["type"] != "success") or (code is not None and code != 0)
            when = P.format_timestamp(item.get("timestamp")) if item else None
            fields.update(tool_call_id=call_id[:255], tool_name=name, exit_code=code, is_error=failed)
        else:
            role = V.SYSTEM
        approximate = when is None
        if approximate:
            when = last_time
            approximate_any = True
        else:
            last_time = when
        raw = R.dumps(msg).encode("utf-8", "surrogatepass")
        row = R.message_row(eid, role, blocks=blocks, native_role=native or "none", parent=parent, timestamp=when,
                            seq=base + k, raw_json=raw.decode(), time_approximate=approximate, **fields)
        entries.append(Entry(eid, parent, "message", base + k, msg, raw, row=row,
                             calls=R.tool_call_rows(blocks, when, SHELL_TOOLS)))
        parent = eid
    values = {"started_at": started, "times_approximate": int(approximate_any)}
    if model:
        values["model"] = model
    header = {k: v for k, v in doc.items() if k not in ("chatMessages", "timeline")}
    return sid, entries, SessionInfo({k: v for k, v in values.items() if v is not None}, R.dumps(header))


def _chat_blocks(content: Any) -> list:
    """OpenAI chat content (a string, or parts) as pi-style blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    out = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            out.append({"type": "text", "text": part["text"]})
        elif isinstance(part, str):
            out.append({"type": "text", "text": part})
        elif part is not None:
            out.append(part if isinstance(part, dict) else {"type": "text", "text": R.dumps(part)})
    return out


# ---------------------------------------------------------------------------
# Units


class EventsFile(Unit):
    """One events file, with its session folder's ``workspace.yaml`` (its token joins both)."""

    prefetch_limit = PREFETCH_LIMIT

    def __init__(self, source, server, agent_id, path, name, size, mtime_ns, fs, workspace=None,
                 session_id: str | None = None):
        token = file_token(size, mtime_ns)
        if workspace is not None:
            token += f"+ws:{workspace[1]}:{workspace[2]}"
        super().__init__(source, server, agent_id, path, name, size, mtime_ns, token=token, fs=fs)
        self.workspace = workspace  # (path, size, mtime_ns) or None
        self.session_id = session_id

    def read(self, checkpoint):
        ws = note = None
        if self.workspace is not None:
            path, size, _mtime = self.workspace
            if size <= WORKSPACE_MAX:
                try:
                    with self.fs.open(path, size) as f:
                        ws = parse_workspace(f.read(WORKSPACE_MAX))
                except OSError:
                    ws = None  # gone since the listing: the events still import
                except ValueError as exc:
                    note = f"{path}: {exc}: the session's name, folder and repository in it are not read"
        sid = self.session_id or (ws.get("id") if ws and isinstance(ws.get("id"), str) else None)

        def make(name, state):
            return EventsParser(name, state, sid, ws)

        outcome = yield from read_lines(self, checkpoint, make)
        if note is not None:
            outcome.warnings.append(note)
        return outcome


class HistoryFile(Unit):
    """One ``history-session-state`` JSON document, read whole whenever it changes."""

    prefetch_limit = PREFETCH_LIMIT

    def read(self, checkpoint: Checkpoint | None):
        if self.size > MAX_BYTES:
            raise SourceError(f"{self.name}: {self.size} bytes, more than the {MAX_BYTES} a history file may have")
        with self.fs.open(self.path, self.size) as f:
            data = f.read()
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise SourceError(f"{self.name} ({len(data)} bytes) is not valid JSON (a half-written file?); "
                              "it is read again on the next run") from None
        sid, entries, info = history_entries(self.name, doc)
        if entries:
            yield Batch(sid, entries)
        new = Checkpoint(status="success", token=self.token, offset=self.size, lines=len(entries),
                         entries_read=len(entries), session_uuid=sid)
        return Outcome(new, {sid: info}, bytes_read=len(data), saw_entries=bool(entries))


# ---------------------------------------------------------------------------
# The kind


def _sniff(fs: FileSystem, path: str, size: int) -> bool:
    """A flat ``session-state/<id>.jsonl``: Copilot's when its first line is an event (any other
    JSON-lines file there is left to the kinds it may be)."""
    try:
        with fs.open(path, size) as f:
            return looks_like_events(f.read(64 * 1024))
    except OSError:
        return False


class CopilotCliSource(Source):
    kind = KIND
    # Before OpenClaw's "a folder of *.jsonl transcripts" (it would take events.jsonl) and Claude Code's.
    order = 13
    shell_tools = SHELL_TOOLS
    places = ("$COPILOT_HOME", "$XDG_CONFIG_HOME/.copilot", "~/.copilot")
    not_this = "not a GitHub Copilot CLI session: no Copilot event lines"

    # -- discovery ------------------------------------------------------------------

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        listing = _listing(fs, path)
        if listing is None:
            return False
        agent = scope.agent or AGENT
        name = fs.basename(path)
        if self._is_home(fs, path, name, listing):
            if scope.wants(agent):
                self._home(fs, listing, scope, agent, out)
            return True
        inner = next((e for e in listing if e.name == ".copilot" and _is_dir(e)), None)
        if inner is not None:
            inner_listing = _listing(fs, inner.path)
            if inner_listing is not None and self._is_home(fs, inner.path, ".copilot", inner_listing):
                if scope.wants(agent):
                    self._home(fs, inner_listing, scope, agent, out)
                return True
        if name == STATE_DIR and self._looks_like_state(fs, listing):
            if scope.wants(agent):
                self._state(fs, listing, scope, agent, out)
            return True
        if name == HISTORY_DIR and any(_HISTORY_RE.match(e.name) for e in listing):
            if scope.wants(agent):
                self._history(listing, scope, agent, out, fs)
            return True
        events = next((e for e in listing if e.name == EVENTS_NAME and _is_file(e)), None)
        if events is not None and (fs.basename(fs.dirname(path)) == STATE_DIR
                                   or any(e.name == WORKSPACE_NAME for e in listing)):
            if scope.wants(agent):
                self._session_dir(fs, path, listing, scope, agent, out)
            return True
        return False

    def _is_home(self, fs: FileSystem, path: str, name: str, listing) -> bool:
        subs = {e.name: e for e in listing if e.name in (STATE_DIR, HISTORY_DIR) and _is_dir(e)}
        if not subs:
            return False
        if name in HOME_NAMES or any(e.name in HOME_MARKERS for e in listing):
            return True
        state = subs.get(STATE_DIR)
        if state is not None:
            found = _listing(fs, state.path)
            if found is not None and self._looks_like_state(fs, found):
                return True
        history = subs.get(HISTORY_DIR)
        if history is not None:
            found = _listing(fs, history.path)
            if found is not None and any(_HISTORY_RE.match(e.name) for e in found):
                return True
        return False

    @staticmethod
    def _looks_like_state(fs: FileSystem, listing) -> bool:
        """A ``session-state`` folder: session folders holding events.jsonl, or flat .jsonl files."""
        for e in listing:
            if e.name.endswith(".jsonl") and _is_file(e) and _sniff(fs, e.path, e.size):
                return True
            if _is_dir(e):
                sub = _listing(fs, e.path)
                if sub is not None and any(s.name == EVENTS_NAME for s in sub):
                    return True
        return False

    def _home(self, fs: FileSystem, listing, scope: Scope, agent: str, out: Discovery) -> None:
        for e in listing:
            if e.name in HOME_MARKERS or e.name.endswith((".db", ".db-wal", ".db-shm")):
                out.keys.add((scope.server, e.path))  # listed as done: never opened by another kind
        for e in sorted(listing, key=lambda e: e.name):
            if e.name == STATE_DIR and _is_dir(e):
                found = _listing(fs, e.path)
                if found is not None:
                    self._state(fs, found, scope, agent, out)
            elif e.name == HISTORY_DIR and _is_dir(e):
                found = _listing(fs, e.path)
                if found is not None:
                    self._history(found, scope, agent, out, fs)

    def _state(self, fs: FileSystem, listing, scope: Scope, agent: str, out: Discovery) -> None:
        for e in sorted(listing, key=lambda e: e.name):
            try:
                if e.is_dir():
                    sub = _listing(fs, e.path)
                    if sub is not None:
                        self._session_dir(fs, e.path, sub, scope, agent, out)
                elif e.name.endswith(".jsonl") and e.is_file() and _sniff(fs, e.path, e.size):
                    out.add(EventsFile(self, scope.server, agent, e.path, e.name, e.size, e.mtime_ns, fs,
                                       session_id=e.name[:-6]))
            except OSError as exc:
                out.errors.append(f"cannot stat {e.path}: {exc.strerror or exc}")

    def _session_dir(self, fs: FileSystem, folder: str, listing, scope: Scope, agent: str, out: Discovery) -> None:
        events = workspace = None
        for e in listing:
            try:
                if e.name == EVENTS_NAME and e.is_file():
                    events = e
                elif e.name == WORKSPACE_NAME and e.is_file():
                    workspace = (e.path, e.size, e.mtime_ns)
                elif e.is_file():
                    out.keys.add((scope.server, e.path))  # session.db and the like: never opened
            except OSError as exc:
                out.errors.append(f"cannot stat {e.path}: {exc.strerror or exc}")
        if events is not None:
            out.add(EventsFile(self, scope.server, agent, events.path, events.name, events.size, events.mtime_ns, fs,
                               workspace, session_id=fs.basename(folder)))

    def _history(self, listing, scope: Scope, agent: str, out: Discovery, fs: FileSystem) -> None:
        for e in sorted(listing, key=lambda e: e.name):
            if e.name.endswith(".json") and not e.name.startswith(".") and _is_file(e):
                out.add(HistoryFile(self, scope.server, agent, e.path, e.name, e.size, e.mtime_ns, fs=fs))

    # -- one file named on the command line ---------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        if name.endswith(".jsonl"):
            return looks_like_events(head)
        if name.endswith(".json"):
            return bool(_HEAD_HISTORY.search(head) and _HEAD_SESSION_ID.search(head))
        return False

    def file_unit(self, fs, path, size, mtime_ns, scope, out) -> Unit:
        agent = scope.agent or AGENT
        name = fs.basename(path)
        if name.endswith(".json"):
            return HistoryFile(self, scope.server, agent, path, name, size, mtime_ns, fs=fs)
        workspace = None
        sid = name[:-6]
        if name == EVENTS_NAME:
            folder = fs.dirname(path)
            sid = fs.basename(folder)
            ws_path = fs.join(folder, WORKSPACE_NAME)
            found = fs.stat(ws_path)
            if found is not None and found[0] == "file":
                workspace = (ws_path, found[1], found[2])
        return EventsFile(self, scope.server, agent, path, name, size, mtime_ns, fs, workspace, session_id=sid)


SOURCE = CopilotCliSource()
