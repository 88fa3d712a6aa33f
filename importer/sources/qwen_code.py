"""Qwen Code sessions: ``~/.qwen/projects/<slug>/chats/<sessionId>.jsonl`` (0.13 and later) and the
older Gemini-like ``~/.qwen/tmp/<sha256 of the project>/`` (docs/qwen-code.md).

A PATH may be a Qwen home (``~/.qwen``, or a folder holding ``.qwen/``), its ``projects/`` or ``tmp/``
folder, one project folder in them, its ``chats/`` folder, or one session file. ``settings.json``,
``oauth_creds.json`` and the other files of a home, ``todos/`` and ``tmp/<hash>/logs.json`` are never
opened (and kept from other kinds' looser rules).

Three formats:

- the chat log (``projects/<slug>/chats/<sessionId>.jsonl``), read incrementally by
  :class:`ChatParser` (the ``feed`` protocol of ``parser.TranscriptParser``, so ``reader.read_lines``
  reads only what was appended): one line per record ``{uuid, parentUuid, sessionId, timestamp, type,
  cwd, version, gitBranch?, ...}``, a parent chain as in Claude Code. ``user`` lines are prompts,
  ``assistant`` lines the model's reply (Gemini ``Content`` parts: ``text``, ``text`` with
  ``thought: true``, ``functionCall``) with ``usageMetadata``, ``tool_result`` lines a tool's
  ``functionResponse`` with ``toolCallResult``. ``system`` lines (``ui_telemetry``, ``slash_command``,
  ``at_command``, ...) are entries; an ``api_response`` telemetry event of a sub-agent (its prompt id is
  not the session's) is a model call whose usage only the telemetry keeps: an ``assistant`` row
  without content, ``native_role`` ``api_response``.
- the old session file (``tmp/<hash>/chats/session-<time>-<id8>.json``, Qwen Code 0.1, the format of
  Gemini CLI's ``.json`` sessions with ``type: "qwen"`` for the model), read whole when it changes.
- a saved chat (``tmp/<hash>/checkpoint-<tag>.json``, from ``/chat save``): a bare array of Gemini
  ``Content`` ``{role, parts}``, no ids or times; one session of its own, its times the file's
  (flagged approximate), its label the tag.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..parser import ChunkResult, Entry, ParseState
from ..units import Batch, Checkpoint, NotATranscript, Outcome, SessionInfo, SourceError, Unit
from . import gemini_cli as G
from .base import Discovery, Scope, Source
from .fs import FileSystem, entry_is_dir as _is_dir, listing as _listing
from .reader import read_lines

KIND = "qwen-code"
AGENT = "qwen-code"
HOME = ".qwen"
PROJECTS = "projects"
TMP = "tmp"
CHATS = "chats"
SHELL_TOOLS = frozenset({"run_shell_command"})
CHAT_TYPES = frozenset({"user", "assistant", "tool_result", "system"})
OLD_NOTICE_TYPES = G.NOTICE_TYPES  # an old session's info, warning, error: known, kept as entries
PREFETCH_LIMIT = 8 * 1024 * 1024
MAX_BYTES = 256 * 1024 * 1024  # an old session or saved chat is parsed whole: larger files are refused
SNIFF_BYTES = 64 * 1024
# The first user turn of a saved chat: the CLI's own context setup, and the canned reply to it.
CONTEXT_SETUP = ("This is the Qwen Code.", "This is the Gemini CLI.")
CANNED_REPLY = "Got it. Thanks for the context!"
REMINDER_RE = re.compile(r"^\s*<system-reminder>.*?</system-reminder>\s*", re.S)
MAIN_PROMPT_RE = re.compile(r"^#+\d+$")
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_SESSION_NAME_RE = re.compile(r"^session-.*\.json$")


# ---------------------------------------------------------------------------
# Recognising the files


def looks_like_chat_line(obj: Any) -> bool:
    """A Qwen Code chat-log line: a record of one of its types with a uuid and a session id,
    its message in Gemini ``Content`` form (``parts``) or a ``systemPayload`` (Claude Code's lines,
    of the same shape otherwise, have ``message.content``)."""
    if not isinstance(obj, dict) or obj.get("type") not in CHAT_TYPES:
        return False
    if not isinstance(obj.get("sessionId"), str) or not isinstance(obj.get("uuid"), str):
        return False
    message = obj.get("message")
    if isinstance(message, dict):
        return isinstance(message.get("parts"), list)
    return obj.get("type") == "system" and isinstance(obj.get("systemPayload"), dict)


def looks_like_chat(head: bytes) -> bool:
    """Whether a file's first bytes read as a Qwen Code chat log: its first line that tells."""
    lines = head.split(b"\n")
    complete = lines[:-1] if len(lines) > 1 else []
    for raw in complete[:16]:
        if not raw.strip():
            continue
        obj, _ = P.loads_line(raw.rstrip(b"\r"))
        if isinstance(obj, dict):
            return looks_like_chat_line(obj)
    start = head[:4096].lstrip()
    # One long first line: its keys tell.
    return (not complete and start.startswith(b'{"uuid"') and b'"sessionId"' in start
            and (b'"parts"' in head or b'"systemPayload"' in head))


def looks_like_session_json(head: bytes) -> bool:
    """An old session file (Gemini CLI's ``.json`` form) with a Qwen model reply in its head."""
    start = head.lstrip()[:1]
    return (start == b"{" and b'"sessionId"' in head and b'"messages"' in head
            and bool(G.QWEN_TYPE.search(head)))


def is_checkpoint_name(name: str) -> bool:
    return name.startswith("checkpoint-") and name.endswith(".json")


def looks_like_checkpoint(head: bytes) -> bool:
    return head.lstrip()[:1] == b"[" and b'"role"' in head and b'"parts"' in head


def checkpoint_tag(name: str) -> str:
    return unquote(name[len("checkpoint-"):-len(".json")])


# ---------------------------------------------------------------------------
# Conversions


def _id(value: Any) -> str | None:
    return P.clamp_id(value) if isinstance(value, str) and value else None


def _project(cwd: str | None) -> str | None:
    if not cwd:
        return None
    name = re.split(r"[\\/]", cwd.rstrip("/\\"))[-1]
    return name[:255] or None


def usage_columns(prompt: Any, candidates: Any, thoughts: Any, cached: Any, total: Any) -> dict:
    """A model call's counts in the archive's words. ``prompt`` includes the cached tokens (input =
    prompt - cached); output is ``candidates``, plus ``thoughts`` only where the total says they were
    counted apart (``total = prompt + candidates + thoughts``); Qwen's own models count thinking inside
    ``candidates``. No cache writes are reported."""
    values = {"prompt": prompt, "candidates": candidates, "thoughts": thoughts, "cached": cached, "total": total}
    n: dict[str, int | None] = {}
    invalid = False
    for key, value in values.items():
        number = R.integer(value) if value.__class__ is not bool else None
        if value is not None and (number is None or number < 0):
            invalid = True
            number = None
        n[key] = number
    prompt_n, cand, th, cache, tot = n["prompt"], n["candidates"], n["thoughts"], n["cached"] or 0, n["total"]
    output = cand
    if cand is not None and th and prompt_n is not None and tot == prompt_n + cand + th:
        output = cand + th
    return {
        "input_tokens": max(prompt_n - cache, 0) if prompt_n is not None else None,
        "output_tokens": output, "cache_read_tokens": n["cached"], "cache_write_tokens": None,
        "total_tokens": tot, "usage_invalid": int(invalid),
    }


def part_blocks(parts: Any, owner: str) -> list:
    """Gemini ``Content`` parts as pi-style blocks: text, thinking (``thought: true``), toolCall
    (``functionCall``), image (``inlineData``); any other part kept whole inside a block of its own.
    ``owner``: the id a call without an id of its own is named after."""
    out: list = []
    for index, part in enumerate(parts if isinstance(parts, list) else []):
        if isinstance(part, str):
            out.append({"type": "text", "text": part})
            continue
        if not isinstance(part, dict):
            out.append({"type": "part", "part": part})
            continue
        call = part.get("functionCall")
        if isinstance(call, dict):
            args = call.get("args")
            out.append({"type": "toolCall", "id": _id(call.get("id")) or P.clamp_id(f"{owner}#{index}"),
                        "name": R.text(call.get("name"), 128),
                        "arguments": args if isinstance(args, dict) else ({} if args is None else {"input": args})})
        elif isinstance(part.get("text"), str):
            if part.get("thought") is True:
                block = {"type": "thinking", "thinking": part["text"]}
                if isinstance(part.get("thoughtSignature"), str):
                    block["thinkingSignature"] = part["thoughtSignature"]
                out.append(block)
            else:
                out.append({"type": "text", "text": part["text"]})
        elif isinstance(part.get("inlineData"), dict) and isinstance(part["inlineData"].get("data"), str):
            data = part["inlineData"]
            out.append({"type": "image", "data": data["data"], "mimeType": R.text(data.get("mimeType"))})
        else:
            out.append({"type": "part", "part": part})  # functionResponse in a user turn, fileData, ...
    return out


def typed_preview(blocks: list) -> Any:
    """A prompt's preview: the first text a person typed, without the CLI's leading
    ``<system-reminder>`` (which old sessions prepend to every prompt)."""
    for block in blocks:
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            continue
        typed = REMINDER_RE.sub("", block["text"], count=1)
        if typed.strip():
            return R.preview(typed)
    return R.text_preview({"content": blocks})


def response_text(response: Any) -> tuple[str, bool]:
    """A ``functionResponse.response`` as text, and whether it says the call failed."""
    if isinstance(response, dict):
        if isinstance(response.get("output"), str):
            return response["output"], "error" in response
        if isinstance(response.get("error"), str):
            return response["error"], True
        if isinstance(response.get("content"), str):
            return response["content"], False
        return R.dumps(response), "error" in response
    if isinstance(response, str):
        return response, False
    return ("" if response is None else R.dumps(response)), False


def exit_code_of(tool: str | None, output: str) -> int | None:
    """The exit code a shell call's output says (``Exit Code: N``; ``(none)`` is none): Qwen's shell
    tool is Gemini CLI's, its output read as Gemini's (the last such line)."""
    if tool not in SHELL_TOOLS:
        return None
    return G.shell_exit_code([{"type": "text", "text": output[-8192:]}])


def _entry_row(entry_id: str, parent: str | None, etype: str, custom: str | None, preview: Any,
               ts: str | None, seq: int, raw: bytes) -> dict:
    return {"entry_uuid": entry_id, "parent_uuid": parent, "entry_type": etype, "custom_type": custom,
            "text_preview": R.preview(preview) if isinstance(preview, str) else None, "timestamp": ts,
            "seq": seq, "raw_json": raw.decode("utf-8", "replace")}


def _result_entries(owner: str, parent: str | None, index: int, obj: Any, raw: bytes, responses: list,
                    ts: str | None, status: str | None, fallback_id: str | None, native: str,
                    approximate: bool = False) -> list[Entry]:
    """One toolResult row per ``functionResponse``; the last takes ``owner`` as its id (the line's
    uuid), the ones before ``owner#i``, chained in order."""
    out = []
    for i, resp in enumerate(responses):
        eid = owner if i == len(responses) - 1 else P.clamp_id(f"{owner}#{i}")
        resp = resp if isinstance(resp, dict) else {}
        name = R.text(resp.get("name"), 128)
        text, failed = response_text(resp.get("response"))
        call_id = _id(resp.get("id")) or (fallback_id if len(responses) == 1 else None)
        code = exit_code_of(name, text)
        row = R.message_row(
            eid, V.TOOL_RESULT, blocks=[{"type": "text", "text": text}], native_role=native, parent=parent,
            timestamp=ts, seq=index, raw_json=raw.decode("utf-8", "replace"), tool_call_id=call_id,
            tool_name=name, exit_code=code, time_approximate=approximate,
            is_error=failed or status in ("error", "cancelled") or (code is not None and code != 0))
        out.append(Entry(eid, parent, "message", index, obj, raw, row=row, calls=[], shell_tools=SHELL_TOOLS))
        parent = eid
    return out


def _calls(row: dict, blocks: list) -> list[dict]:
    return R.tool_call_rows(blocks, row["timestamp"], SHELL_TOOLS)


# ---------------------------------------------------------------------------
# The chat log (0.13 and later)


class ChatParser:
    """Incremental parser of one chat log (see the module docstring); the ``feed`` protocol of
    ``parser.TranscriptParser``. Pure: bytes in, entries out. ``state.extra`` carries across runs
    the session's values (``info``: cwd, project, start, model, the agent version) and its raw id (``sid``).
    A line's ``version`` can change inside one file (a CLI updated mid-session): the session's
    ``agent_version`` is the latest line's; each line keeps its own in ``raw_json``."""

    # Entry types that make a file a chat log (a file of only unknown records is not one).
    known_types = frozenset({"message", "system"})

    def __init__(self, file_name: str, state: ParseState | None = None):
        self.file_name = file_name
        self.state = state or ParseState()
        self.extra = self.state.extra

    def feed(self, data: bytes, final: bool = False) -> ChunkResult:
        return P.feed_lines(self.state, data, final, self._line)

    def sessions(self) -> dict:
        sid = self.state.session_id
        info = {k: v for k, v in (self.extra.get("info") or {}).items() if v is not None}
        if sid is None or not info:
            return {}
        return {sid: SessionInfo(info, None)}

    def _line(self, raw: bytes, result: ChunkResult, pending: bool = False) -> bool:
        st = self.state
        index, obj, raw = P.read_line(st, raw, result, pending)
        if obj is None:
            return False
        if st.session_id is None:
            st.session_id = _id(obj.get("sessionId")) or P.session_id_from_name(self.file_name)
            self.extra["sid"] = R.text(obj.get("sessionId")) or st.session_id
        self._info(obj)
        entry_id = _id(obj.get("uuid")) or f"@{index}"
        parent = _id(obj.get("parentUuid")) if "parentUuid" in obj else st.last_entry_id
        ts = P.format_timestamp(obj.get("timestamp"))
        etype = obj.get("type")
        message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
        raw_json = raw.decode("utf-8", "replace")
        if etype in CHAT_TYPES and not looks_like_chat_line(obj):
            etype = None  # not of Qwen's shape (another kind's line, say): kept as an entry, read as nothing
        if etype == "user":
            blocks = part_blocks(message.get("parts"), entry_id)
            row = R.message_row(entry_id, V.USER, blocks=blocks, native_role="user", parent=parent, timestamp=ts,
                                seq=index, raw_json=raw_json, text_preview=typed_preview(blocks))
            entries = [Entry(entry_id, parent, "message", index, obj, raw, row=row, calls=_calls(row, blocks),
                             shell_tools=SHELL_TOOLS)]
        elif etype == "assistant":
            blocks = part_blocks(message.get("parts"), entry_id)
            usage = obj.get("usageMetadata")
            fields: dict = {"model": R.text(obj.get("model"), 128)}
            if isinstance(usage, dict):
                fields.update(usage_columns(usage.get("promptTokenCount"), usage.get("candidatesTokenCount"),
                                            usage.get("thoughtsTokenCount"), usage.get("cachedContentTokenCount"),
                                            usage.get("totalTokenCount")))
                fields["call_key"] = P.short_hash(f"{st.session_id}:{entry_id}".encode("utf-8", "surrogatepass"))
            row = R.message_row(entry_id, V.ASSISTANT, blocks=blocks, native_role="assistant", parent=parent,
                                timestamp=ts, seq=index, raw_json=raw_json, **fields)
            entries = [Entry(entry_id, parent, "message", index, obj, raw, row=row, calls=_calls(row, blocks),
                             shell_tools=SHELL_TOOLS)]
        elif etype == "tool_result":
            result_info = obj.get("toolCallResult") if isinstance(obj.get("toolCallResult"), dict) else {}
            responses = [p.get("functionResponse") for p in R.blocks_of(message.get("parts"))
                         if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
            entries = _result_entries(entry_id, parent, index, obj, raw, responses or [{}], ts,
                                      R.text(result_info.get("status")), _id(result_info.get("callId")),
                                      "tool_result")
        elif etype == "system":
            entries = [self._system(entry_id, parent, index, obj, raw, ts)]
        else:  # a record type this reader does not know: kept as an entry, marked (docs/sources.md)
            name = obj.get("type")
            name = name[:64] if isinstance(name, str) and name and etype is not None else V.UNKNOWN
            entries = [Entry(entry_id, parent, name, index, obj, raw,
                             row=_entry_row(entry_id, parent, name, V.UNKNOWN, None, ts, index, raw))]
        result.entries.extend(entries)
        st.last_entry_id = entries[-1].entry_id
        return True

    def _info(self, obj: dict) -> None:
        info = self.extra.setdefault("info", {})
        if info.get("cwd") is None and isinstance(obj.get("cwd"), str):
            info["cwd"] = P.cut_str(obj["cwd"], 512)
            info["project"] = _project(obj["cwd"])
        if info.get("started_at") is None:
            info["started_at"] = P.format_timestamp(obj.get("timestamp"))
        if obj.get("type") == "assistant" and isinstance(obj.get("model"), str):
            info["model"] = obj["model"][:128]
        if isinstance(obj.get("version"), str) and obj["version"]:
            info["agent_version"] = obj["version"][:64]  # the Qwen Code that wrote the latest line

    def _system(self, entry_id: str, parent: str | None, index: int, obj: dict, raw: bytes, ts: str | None) -> Entry:
        """A ``system`` record: an entry, except a sub-agent's ``api_response`` telemetry, which is
        a model call the chat log holds no reply of (an assistant row with its usage, no content)."""
        subtype = R.text(obj.get("subtype"), 64)
        payload = obj.get("systemPayload") if isinstance(obj.get("systemPayload"), dict) else {}
        event = payload.get("uiEvent") if isinstance(payload.get("uiEvent"), dict) else None
        custom = subtype
        preview = None
        if event is not None:
            name = R.text(event.get("event.name"), 100)
            custom = f"{subtype}.{name}" if name else subtype
            if name == "qwen-code.api_response" and self._subagent_call(event):
                fields = usage_columns(event.get("input_token_count"), event.get("output_token_count"),
                                       event.get("thoughts_token_count"), event.get("cached_content_token_count"),
                                       event.get("total_token_count"))
                key = R.text(event.get("response_id")) or entry_id
                row = R.message_row(
                    entry_id, V.ASSISTANT, blocks=None, native_role="api_response", parent=parent, timestamp=ts,
                    seq=index, raw_json=raw.decode("utf-8", "replace"), model=R.text(event.get("model"), 128),
                    call_key=P.short_hash(f"{self.state.session_id}:{key}".encode("utf-8", "surrogatepass")),
                    duration_ms=R.integer(event.get("duration_ms")), **fields)
                return Entry(entry_id, parent, "message", index, obj, raw, row=row, calls=[],
                             shell_tools=SHELL_TOOLS)
        elif subtype == "slash_command":
            preview = payload.get("rawCommand")
        return Entry(entry_id, parent, "system", index, obj, raw,
                     row=_entry_row(entry_id, parent, "system", custom, preview, ts, index, raw))

    def _subagent_call(self, event: dict) -> bool:
        """An API response of another prompt than the session's own turns (``<sessionId>########<n>``;
        a sub-agent's are ``<sessionId>#<agent>-<id>#<n>``): a sub-agent's model call, whose reply is only
        in the ``agent`` tool's result. The session's own calls are counted on their assistant lines
        (``usageMetadata``); an event without a prompt id is taken for one of them."""
        prompt = R.text(event.get("prompt_id"))
        if prompt is None:
            return False
        sid = self.extra.get("sid") or self.state.session_id or ""
        return not (prompt.startswith(sid) and MAIN_PROMPT_RE.match(prompt[len(sid):]))


# ---------------------------------------------------------------------------
# The old layout (Qwen Code 0.1: Gemini CLI's session file) and saved chats


def _read_json(unit: Unit) -> tuple[Any, int]:
    if unit.size > MAX_BYTES:
        raise SourceError(f"{unit.size} bytes, more than the {MAX_BYTES} a session file may have")
    with unit.open() as f:
        data = f.read()
    obj, _ = P.loads_line(data.strip())
    if obj is None and data.strip():
        # (a file being rewritten, say): failed now, read again next run
        raise SourceError(f"not valid JSON ({len(data)} bytes: being written?)")
    return obj, len(data)


def _raw(obj: Any) -> bytes:
    return R.dumps(obj).encode("utf-8", "surrogatepass")


def old_session_entries(doc: dict, sid: str) -> tuple[list[Entry], int]:
    """The entries of an old session file (its messages in file order, each the parent of the next),
    and how many of its messages were not objects (bad)."""
    entries: list[Entry] = []
    bad = 0
    parent = None
    for index, m in enumerate(doc.get("messages") or []):
        if not isinstance(m, dict):
            bad += 1
            continue
        raw = _raw(m)
        mid = _id(m.get("id")) or f"@{index}"
        ts = P.format_timestamp(m.get("timestamp"))
        mtype = m.get("type")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else part_blocks(content, mid)
        if mtype == "user":
            row = R.message_row(mid, V.USER, blocks=blocks, native_role="user", parent=parent, timestamp=ts, seq=index,
                                raw_json=raw.decode(), text_preview=typed_preview(blocks))
            new = [Entry(mid, parent, "message", index, m, raw, row=row, calls=[], shell_tools=SHELL_TOOLS)]
        elif mtype == "qwen":
            thinking = []
            for t in m.get("thoughts") if isinstance(m.get("thoughts"), list) else []:
                if isinstance(t, dict):
                    text = "\n\n".join(s for s in (R.text(t.get("subject")), R.text(t.get("description"))) if s)
                    thinking.append({"type": "thinking", "thinking": text})
            calls = [c for c in m.get("toolCalls") or [] if isinstance(c, dict)] \
                if isinstance(m.get("toolCalls"), list) else []
            tool_blocks = [{"type": "toolCall", "id": _id(c.get("id")) or P.clamp_id(f"{mid}#{i}"),
                            "name": R.text(c.get("name"), 128),
                            "arguments": c.get("args") if isinstance(c.get("args"), dict) else {}}
                           for i, c in enumerate(calls)]
            all_blocks = thinking + blocks + tool_blocks
            fields: dict = {"model": R.text(m.get("model"), 128)}
            tokens = m.get("tokens")
            if isinstance(tokens, dict):
                fields.update(usage_columns(tokens.get("input"), tokens.get("output"), tokens.get("thoughts"),
                                            tokens.get("cached"), tokens.get("total")))
                fields["call_key"] = P.short_hash(f"{sid}:{mid}".encode("utf-8", "surrogatepass"))
            row = R.message_row(mid, V.ASSISTANT, blocks=all_blocks, native_role="qwen", parent=parent, timestamp=ts,
                                seq=index, raw_json=raw.decode(), **fields)
            new = [Entry(mid, parent, "message", index, m, raw, row=row, calls=_calls(row, all_blocks),
                         shell_tools=SHELL_TOOLS)]
            for block, call in zip(tool_blocks, calls):
                responses = [r.get("functionResponse") for r in call.get("result") or []
                             if isinstance(r, dict) and isinstance(r.get("functionResponse"), dict)] \
                    if isinstance(call.get("result"), list) else []
                if not responses:
                    continue
                owner = P.clamp_id(f"{mid}:{block['id']}")
                new += _result_entries(owner, new[-1].entry_id, index, m, raw, responses,
                                       P.format_timestamp(call.get("timestamp")) or ts, R.text(call.get("status")),
                                       block["id"], "toolCall.result")
        else:  # info, error and any other type: kept as an entry (another type marked unknown)
            name = mtype[:64] if isinstance(mtype, str) and mtype else V.UNKNOWN
            new = [Entry(mid, parent, name, index, m, raw,
                         row=_entry_row(mid, parent, name, None if mtype in OLD_NOTICE_TYPES else V.UNKNOWN,
                                        content if isinstance(content, str) else None, ts, index, raw))]
        entries += new
        parent = new[-1].entry_id
    return entries, bad


def checkpoint_entries(items: list, ts: str | None) -> tuple[list[Entry], int]:
    """The entries of a saved chat: each item of the array a row (ids ``@<index>``, in order; the
    array only grows when the same tag is saved again), its times ``ts`` (the file's), flagged."""
    entries: list[Entry] = []
    bad = 0
    parent = None
    setup = False
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("parts"), list):
            bad += 1
            continue
        raw = _raw(item)
        eid = f"@{index}"
        role = item.get("role")
        parts = item["parts"]
        responses = [p["functionResponse"] for p in parts if isinstance(p, dict)
                     and isinstance(p.get("functionResponse"), dict)]
        common = {"parent": parent, "timestamp": ts, "seq": index, "raw_json": raw.decode(), "time_approximate": True}
        if role == "user" and responses and len(responses) == len(parts):
            new = _result_entries(eid, parent, index, item, raw, responses, ts, None, None, "user", approximate=True)
        elif role == "user":
            blocks = part_blocks(parts, eid)
            first = next((b.get("text") for b in blocks if b.get("type") == "text"), None)
            if index == 0 and isinstance(first, str) and first.startswith(CONTEXT_SETUP):
                setup = True
                row = R.message_row(eid, V.SYSTEM, blocks=blocks, native_role="user", **common)
            else:
                row = R.message_row(eid, V.USER, blocks=blocks, native_role="user", text_preview=typed_preview(blocks),
                                    **common)
            new = [Entry(eid, parent, "message", index, item, raw, row=row, calls=[], shell_tools=SHELL_TOOLS)]
        elif role == "model":
            blocks = part_blocks(parts, eid)
            texts = [b.get("text") for b in blocks if b.get("type") == "text"]
            canned = setup and index == 1 and texts == [CANNED_REPLY] and len(blocks) == 1
            row = R.message_row(eid, V.ASSISTANT, blocks=blocks, native_role="model", is_synthetic=canned, **common)
            new = [Entry(eid, parent, "message", index, item, raw, row=row, calls=_calls(row, blocks),
                         shell_tools=SHELL_TOOLS)]
        else:
            name = (role[:64] if isinstance(role, str) and role else V.UNKNOWN)
            new = [Entry(eid, parent, name, index, item, raw, row=_entry_row(eid, parent, name, V.UNKNOWN, None, ts,
                                                                            index, raw))]
        entries += new
        parent = new[-1].entry_id
    return entries, bad


# ---------------------------------------------------------------------------
# Units


class ChatFile(Unit):
    """One chat log (``projects/<slug>/chats/<sessionId>.jsonl``), read incrementally."""

    prefetch_limit = PREFETCH_LIMIT

    def read(self, checkpoint):
        return read_lines(self, checkpoint, ChatParser)


class SessionFile(Unit):
    """One old session file (``tmp/<hash>/chats/session-*.json``), read whole when it changes
    (Qwen Code rewrites it whole); the writer merges by message id."""

    prefetch_limit = PREFETCH_LIMIT

    def read(self, checkpoint: Checkpoint | None):
        doc, read = _read_json(self)
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list) \
                or not isinstance(doc.get("sessionId"), str) or not doc["sessionId"]:
            raise NotATranscript(self.source.not_this_kind())
        sid = P.clamp_id(doc["sessionId"])
        entries, bad = old_session_entries(doc, sid)
        if entries:
            yield Batch(sid, entries)
        values = {"started_at": P.format_timestamp(doc.get("startTime"))}
        models = [e.row["model"] for e in entries if e.type == "message" and e.row.get("model")]
        if models:
            values["model"] = models[-1]
        new = Checkpoint(status="success", token=self.token, offset=self.size, lines=len(entries), bad_lines=bad,
                         entries_read=len(entries), session_uuid=sid)
        return Outcome(new, {sid: SessionInfo({k: v for k, v in values.items() if v is not None}, None)}, bad=bad,
                       bytes_read=read, saw_entries=bool(entries))


class SavedChat(Unit):
    """One saved chat (``tmp/<hash>/checkpoint-<tag>.json``), read whole when it changes."""

    prefetch_limit = PREFETCH_LIMIT

    def read(self, checkpoint: Checkpoint | None):
        doc, read = _read_json(self)
        if not isinstance(doc, list) or (doc and not any(isinstance(i, dict) and "parts" in i for i in doc)):
            raise NotATranscript(f"{self.source.not_this_kind()}: not a saved chat (an array of role and parts)")
        sid = saved_chat_id(self.fs, self.path)
        # The file's time, in whole seconds: what every filesystem (SFTP too) says the same.
        ts = P.format_timestamp(self.mtime_ns // 1_000_000_000 * 1000) if self.mtime_ns else None
        entries, bad = checkpoint_entries(doc, ts)
        if entries:
            yield Batch(sid, entries)
        values = {"started_at": ts, "times_approximate": 1, "label": P.cut_str(checkpoint_tag(self.name), 255)}
        new = Checkpoint(status="success", token=self.token, offset=self.size, lines=len(entries), bad_lines=bad,
                         entries_read=len(entries), session_uuid=sid)
        return Outcome(new, {sid: SessionInfo({k: v for k, v in values.items() if v is not None}, None)}, bad=bad,
                       bytes_read=read, saw_entries=bool(entries))


def saved_chat_id(fs: FileSystem, path: str) -> str:
    """A saved chat has no id: its project folder (the hash, first 16 characters) and its tag name it."""
    project = fs.basename(fs.dirname(path))[:16]
    return P.clamp_id(f"checkpoint-{project}-{checkpoint_tag(fs.basename(path))}")


# ---------------------------------------------------------------------------
# The kind


class QwenCodeSource(Source):
    kind = KIND
    # Before Claude Code's rules (a home's projects/ folder, and a chat log's lines, look like its own).
    order = 11
    shell_tools = SHELL_TOOLS
    places = ("~/.qwen",)
    not_this = "not a Qwen Code session"

    def session_type(self, name: str) -> str:
        return "checkpoint" if is_checkpoint_name(name) else "normal"

    # -- single files --------------------------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        if name.endswith(".jsonl"):
            return looks_like_chat(head)
        if is_checkpoint_name(name):
            return looks_like_checkpoint(head)
        return name.endswith(".json") and looks_like_session_json(head)

    def file_unit(self, fs, path, size, mtime_ns, scope, out) -> Unit:
        name = fs.basename(path)
        cls = ChatFile if name.endswith(".jsonl") else SavedChat if is_checkpoint_name(name) else SessionFile
        return cls(self, scope.server, scope.agent or AGENT, path, name, size, mtime_ns, fs=fs)

    # -- folders -------------------------------------------------------------------

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        listing = _listing(fs, path)
        if listing is None:
            return False
        names = {e.name: e for e in listing}
        home = None
        if fs.basename(path) == HOME and any(n in names and _is_dir(names[n]) for n in (PROJECTS, TMP)):
            home = path
        elif HOME in names and _is_dir(names[HOME]):
            home = names[HOME].path
        agent = scope.agent or AGENT
        lister = _Lister(self, fs, scope.server, agent, out, scope.wants(agent))
        if home is not None:
            lister.home(home)
            return True
        # Part of a home (trusted inside a folder named .qwen; elsewhere its files are sniffed).
        name = fs.basename(path)
        parent = fs.basename(fs.dirname(path))
        inside = _inside_home(fs, path)
        if name == PROJECTS:
            return lister.projects(path, listing, trusted=inside)
        if name == TMP:
            return lister.tmp(path, listing, trusted=inside)
        if parent == PROJECTS and CHATS in names and _is_dir(names[CHATS]):
            return lister.chats(names[CHATS].path, sniff=not inside)
        if parent == TMP and (CHATS in names or any(is_checkpoint_name(n) for n in names)):
            return lister.project_tmp(path, listing, trusted=inside)
        if name == CHATS:
            grand = fs.basename(fs.dirname(fs.dirname(path)))
            if grand == TMP:
                return lister.old_chats(path, listing, trusted=inside)
            return lister.chats(path, sniff=not (inside and grand == PROJECTS), listing=listing)
        return False

    def extra_stats(self, store) -> dict:
        rows = store.query("SELECT COUNT(*) FROM messages WHERE source = ? AND native_role = 'api_response'", (KIND,))
        # calls_without_output: sub-agent model calls whose usage only the telemetry keeps
        return {"calls_without_output": int(rows[0][0] or 0)}


SOURCE = QwenCodeSource()


# ---------------------------------------------------------------------------
# The layout


def _inside_home(fs: FileSystem, path: str) -> bool:
    """Whether ``path`` is inside a folder named ``.qwen`` (then its files need no sniffing)."""
    cur = path
    for _ in range(4):
        cur = fs.dirname(cur)
        if fs.basename(cur) == HOME:
            return True
        if not fs.basename(cur):
            break
    return False


def _sniff(fs: FileSystem, path: str, size: int, test) -> bool:
    try:
        with fs.open(path, size) as f:
            return test(f.read(SNIFF_BYTES))
    except OSError:
        return False


class _Lister:
    """Lists one discovery's Qwen units (``wanted``: the agent is wanted; else only recognised)."""

    def __init__(self, source: QwenCodeSource, fs: FileSystem, server: str, agent: str, out: Discovery,
                 wanted: bool):
        self.source, self.fs, self.server, self.agent, self.out, self.wanted = source, fs, server, agent, out, wanted

    def _add(self, cls, entry) -> None:
        if not self.wanted:
            return
        try:
            size, mtime = entry.size, entry.mtime_ns
        except OSError as exc:
            self.out.errors.append(f"cannot stat {entry.path}: {exc.strerror or exc}")
            return
        self.out.add(cls(self.source, self.server, self.agent, entry.path, entry.name, size, mtime, fs=self.fs))

    def _reserve(self, path: str) -> None:
        """Listed as nobody's unit: no other kind's looser rule opens it."""
        self.out.keys.add((self.server, path))

    def home(self, home: str) -> None:
        for e in _listing(self.fs, home) or []:
            if e.name in (PROJECTS, TMP):
                sub = _listing(self.fs, e.path)
                if sub is not None:
                    (self.projects if e.name == PROJECTS else self.tmp)(e.path, sub, trusted=True)
            elif e.name == "todos":
                for t in _listing(self.fs, e.path) or []:
                    self._reserve(t.path)
            elif not _is_dir(e):
                self._reserve(e.path)  # settings.json, oauth_creds.json, ...

    def projects(self, folder: str, listing, trusted: bool) -> bool:
        """``projects/<slug>/chats/*.jsonl``."""
        found = False
        for e in sorted(listing, key=lambda e: e.name):
            if _is_dir(e) and self.fs.is_dir(self.fs.join(e.path, CHATS)):
                found = self.chats(self.fs.join(e.path, CHATS), sniff=not trusted) or found
        return found or trusted

    def chats(self, folder: str, sniff: bool, listing=None) -> bool:
        listing = listing if listing is not None else _listing(self.fs, folder)
        found = False
        for e in sorted(listing or [], key=lambda e: e.name):
            if not e.name.endswith(".jsonl") or not e.is_file() or self.out.has(self.server, e.path):
                continue
            if sniff and not _sniff(self.fs, e.path, e.size, looks_like_chat):
                continue
            found = True
            self._add(ChatFile, e)
        return found or not sniff

    def tmp(self, folder: str, listing, trusted: bool) -> bool:
        """``tmp/<hash>/`` folders (the old layout)."""
        found = False
        for e in sorted(listing, key=lambda e: e.name):
            # outside a .qwen home only folders named by a project hash are looked into
            if _is_dir(e) and (trusted or _HASH_RE.match(e.name)):
                sub = _listing(self.fs, e.path)
                if sub is not None:
                    found = self.project_tmp(e.path, sub, trusted=trusted) or found
        return found or trusted

    def project_tmp(self, folder: str, listing, trusted: bool) -> bool:
        """One project's ``tmp/<hash>/``: ``chats/session-*.json`` and ``checkpoint-<tag>.json``;
        ``logs.json`` (the prompts again) is never opened."""
        found = False
        for e in sorted(listing, key=lambda e: e.name):
            if e.name == CHATS and _is_dir(e):
                sub = _listing(self.fs, e.path)
                if sub is not None:
                    found = self.old_chats(e.path, sub, trusted) or found
            elif is_checkpoint_name(e.name) and e.is_file():
                if trusted or found:
                    found = True
                    self._add(SavedChat, e)
            elif e.name == "logs.json" and trusted:
                self._reserve(e.path)
        return found

    def old_chats(self, folder: str, listing, trusted: bool) -> bool:
        found = False
        for e in sorted(listing, key=lambda e: e.name):
            if not _SESSION_NAME_RE.match(e.name) or not e.is_file() or self.out.has(self.server, e.path):
                continue
            if not trusted and not _sniff(self.fs, e.path, e.size, looks_like_session_json):
                continue
            found = True
            self._add(SessionFile, e)
        return found
