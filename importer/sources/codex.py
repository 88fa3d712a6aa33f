"""Codex CLI rollouts: ``${CODEX_HOME:-~/.codex}/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``,
archived ones in ``archived_sessions/`` (FORMAT-OTHERS.md section 4; docs/codex.md).

A PATH may be a Codex home (or a folder holding ``.codex/``), its ``sessions/`` or
``archived_sessions/`` folder (or any folder below them), or one rollout file; a folder holding
one such tree per server works through discovery's per-server rule. A rollout found in both
``sessions/`` and ``archived_sessions/`` is imported once, from ``sessions/``. ``auth.json``,
``history.jsonl``, ``session_index.jsonl`` and the state SQLite files are never opened.

Both formats are read by :class:`RolloutParser` (the ``feed`` protocol of
``parser.TranscriptParser``, so ``reader.read_lines`` (this package's) reads a rollout incrementally):

- the old unwrapped one (until about September 2025): a header line ``{id, timestamp,
  instructions, git?}``, ``{"record_type": "state"}`` markers and bare response items, no times
  of their own (their session's, flagged ``time_approximate``) and no token counts;
- the wrapped one: ``{timestamp, type, payload}`` lines of type ``session_meta``,
  ``turn_context``, ``response_item``, ``event_msg`` and ``compacted``.

Rows. Every response item ``message`` is a ``messages`` row of its role (``user``,
``assistant``, ``developer``; injected environment and instruction wrappers, and every developer
message, flagged ``is_context``). ``reasoning`` items are role ``reasoning`` (one thinking block;
encrypted reasoning shows its summary, or a placeholder, flagged ``encrypted``: the ciphertext
stays in ``raw_json`` only). ``function_call``, ``custom_tool_call`` and ``local_shell_call`` are
role ``toolCall`` (one toolCall block and its ``tool_calls`` row; a call id seen before in the
session adds no second row); their outputs are role ``toolResult``, with the exit code of shell
commands from the output (``shell``'s JSON metadata, ``Exit code: N``, ``Process exited with
code N``) or from the ``exec_command_end`` event before it. Every other line is an entry, kept
raw (``entry_type`` the line's type, ``custom_type`` the payload's).

Tokens. ``token_count`` totals are cumulative per session and often repeated: a model call is a
``token_count`` whose total differs from the previous one (``info: null`` skipped), its usage the
difference (input = input - cached, cacheRead = cached, output, cacheWrite 0, total), its model
the latest ``turn_context``'s, its ``call_key`` a hash of the session and the total. The usage
goes on the last row the model wrote in that request (reasoning, toolCall, assistant: rows since
the last input, tool output, turn start or model call) when it has one, else on a row of role
``usage`` with no content. Forks and sub-agents (``forked_from_id``,
``source.subagent.thread_spawn.parent_thread_id``) start by replaying their parent's history:
those lines are kept as entries of type ``replayed``; their token counts only move the baseline.
"""

from __future__ import annotations

import re
import shlex
import zlib
from typing import Any

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..parser import ChunkResult, Entry, ParseState
from .reader import read_lines
from ..units import SessionInfo, Unit
from .base import Discovery, Scope, Source
from .fs import FileSystem

AGENT = "codex"
HOME_NAMES = (".codex", "codex")
SESSIONS_DIR = "sessions"
ARCHIVED_DIR = "archived_sessions"
# Files of a Codex home that are not rollouts (prompt history, the title index, credentials,
# state databases): never opened, and kept from other kinds' "folder of transcripts" rules.
HOME_MARKERS = ("config.toml", "auth.json", "history.jsonl", "session_index.jsonl", "version.json")
PREFETCH_LIMIT = 8 * 1024 * 1024
SNIFF_BYTES = 64 * 1024
MAX_DEPTH = 6  # sessions/YYYY/MM/DD, and a little more

WRAPPED_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
OLD_HEADER_KEYS = frozenset({"id", "timestamp", "instructions", "git"})
CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
SHELL_TOOLS = frozenset({"shell", "shell_command", "exec_command", "local_shell"})
# event_msg types that start or end a turn: the request before them is over.
TURN_EVENTS = frozenset({"task_started", "task_complete", "turn_aborted", "user_message"})
CONTEXT_PREFIXES = (
    "<environment_context", "<user_instructions", "<INSTRUCTIONS", "# AGENTS.md instructions",
    "<permissions instructions", "<collaboration_mode", "<skill", "<user_shell_command", "<turn_aborted",
    "<subagent_notification",
)
ENCRYPTED_PLACEHOLDER = "(encrypted reasoning: only the model can read it)"

_ROLLOUT_RE = re.compile(r"^rollout-.*\.jsonl$")
_UUID_TAIL_RE = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$")
_WRAPPED_PREFIX_RE = re.compile(rb'^\s*\{\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"type"\s*:\s*"(\w+)"')
_EXIT_RE = re.compile(r"^(?:Exit code:|Process exited with code) *(-?\d+)", re.M)
_WALL_RE = re.compile(r"^Wall time: *(\d+(?:\.\d+)?) *s", re.M)
_CWD_RE = re.compile(r"<cwd>([^<\n]{1,1000})</cwd>")
_DATA_URL_RE = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.S)

# Bounds on what the parser carries across runs (the checkpoint's resume_state).
MAX_SEEN_CALLS = 2048
MAX_OPEN_CALLS = 512
MAX_HELD = 256


# ---------------------------------------------------------------------------
# Names and first lines


def is_rollout_name(name: str) -> bool:
    return bool(_ROLLOUT_RE.match(name))


def session_id_from_name(name: str) -> str:
    """A rollout's session id when no ``session_meta`` starts it: the uuid its name ends with,
    else the file's stem."""
    m = _UUID_TAIL_RE.search(name)
    if m:
        return m.group(1).lower()
    stem = name[:-6] if name.endswith(".jsonl") else name
    return P.clamp_id(stem)


def _first_line(head: bytes) -> tuple[Any, bytes]:
    for raw in head.split(b"\n"):
        if raw.strip():
            obj, _ = P.loads_line(raw.rstrip(b"\r"))
            return obj, raw
    return None, b""


def _is_old_header(obj: Any) -> bool:
    """The old format's first line: ``{id, timestamp, instructions, git?}`` and no type."""
    return (isinstance(obj, dict) and not {"type", "record_type", "payload"} & obj.keys()
            and isinstance(obj.get("id"), str) and isinstance(obj.get("timestamp"), str)
            and ("instructions" in obj or obj.keys() <= OLD_HEADER_KEYS))


def looks_like_rollout(head: bytes) -> bool:
    """Whether a file's first bytes read as a Codex rollout: a first line wrapped as
    ``{timestamp, type, payload}`` with one of Codex's line types, or the old format's header."""
    obj, raw = _first_line(head)
    if isinstance(obj, dict):
        if obj.get("type") in WRAPPED_TYPES and isinstance(obj.get("payload"), dict):
            return True
        return _is_old_header(obj)
    if obj is None and raw and b"\n" not in head.lstrip():
        # A first line longer than the head (a session_meta with long instructions).
        m = _WRAPPED_PREFIX_RE.match(raw)
        return bool(m) and m.group(1).decode() in WRAPPED_TYPES
    return False


# ---------------------------------------------------------------------------
# Small conversions


def _uuid7_ms(value: Any) -> int | None:
    """The millisecond time a UUIDv7 was minted at, else None."""
    if not isinstance(value, str):
        return None
    h = value.replace("-", "")
    if len(h) != 32 or h[12] != "7":
        return None
    try:
        return int(h[:12], 16)
    except ValueError:
        return None


def _ms(timestamp: Any) -> int | None:
    text = P.format_timestamp(timestamp)
    if text is None:
        return None
    from datetime import datetime, timezone

    try:
        dt = datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return int(dt.timestamp() * 1000)


def _project(cwd: str | None) -> str | None:
    if not cwd:
        return None
    name = re.split(r"[\\/]", cwd.rstrip("/\\"))[-1]
    return name[:255] or None


TOTAL_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens")


def _usage(value: Any) -> list[int] | None:
    """A token usage object as [input, cached input, output, reasoning output, total]."""
    if not isinstance(value, dict):
        return None
    out = []
    for key in TOTAL_KEYS:
        n = R.integer(value.get(key))
        out.append(n if n is not None and n >= 0 else 0)
    if not any(out):
        return out if any(k in value for k in TOTAL_KEYS) else None
    return out


def shell_command(name: str | None, args: Any) -> str | None:
    """The command line a shell-like tool call runs."""
    if name not in SHELL_TOOLS or not isinstance(args, dict):
        return None
    cmd = args.get("cmd") if name == "exec_command" else args.get("command")
    if cmd is None and name == "exec_command":
        cmd = args.get("command")
    if isinstance(cmd, str):
        return cmd
    if isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd):
        if len(cmd) == 3 and cmd[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and cmd[1] in ("-lc", "-c"):
            return cmd[2]
        return shlex.join(cmd)
    return None


def _is_context(role: str | None, blocks: list) -> bool:
    """Injected context, typed by no one: developer (and system) messages, and user messages
    that are one of Codex's wrappers (environment, AGENTS.md and user instructions, ...)."""
    if role in ("developer", "system"):
        return True
    if role != "user":
        return False
    texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return bool(texts) and all(isinstance(t, str) and t.lstrip().startswith(CONTEXT_PREFIXES) for t in texts)


def _image_block(url: Any) -> dict:
    if isinstance(url, str):
        m = _DATA_URL_RE.match(url)
        if m:
            return {"type": "image", "data": m.group(2), "mimeType": m.group(1)}
        return {"type": "text", "text": f"[image: {url[:300]}]"}
    return {"type": "text", "text": "[image]"}


def message_blocks(content: Any) -> list:
    """A response item's content in OpenClaw's block vocabulary."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            out.append({"type": "text", "text": item if isinstance(item, str) else R.dumps(item)})
            continue
        kind = item.get("type")
        if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text") and isinstance(
                item.get("text"), str):
            out.append({"type": "text", "text": item["text"]})
        elif kind == "refusal":
            out.append({"type": "text", "text": R.text(item.get("refusal")) or "", "refusal": True})
        elif kind in ("input_image", "image"):
            out.append(_image_block(item.get("image_url") or item.get("url")))
        else:
            out.append(item)  # unknown: rendered as JSON, kept whole
    return out


def _texts(items: Any) -> list[str]:
    return [i["text"] for i in items if isinstance(i, dict) and isinstance(i.get("text"), str)] \
        if isinstance(items, list) else []


def reasoning_block(payload: dict) -> tuple[dict, str | None]:
    """One thinking block for a reasoning item, and its readable text (None when only
    the encrypted form exists). Raw reasoning (``content``) wins over the summary."""
    content = _texts(payload.get("content"))
    summary = _texts(payload.get("summary"))
    text = "\n\n".join(content) if content else ("\n\n".join(summary) if summary else None)
    block: dict = {"type": "thinking", "thinking": text if text is not None else ENCRYPTED_PLACEHOLDER}
    encrypted = payload.get("encrypted_content")
    if isinstance(encrypted, str) and encrypted:
        block["encrypted"] = True
        block["encryptedChars"] = len(encrypted)
    if content and summary:
        block["summary"] = "\n\n".join(summary)
    return block, text


def _duration_ms(value: Any) -> int | None:
    if isinstance(value, dict):
        secs, nanos = R.number(value.get("secs")), R.number(value.get("nanos"))
        if secs is None and nanos is None:
            return None
        return int((secs or 0) * 1000 + (nanos or 0) / 1_000_000)
    n = R.number(value)
    return int(n * 1000) if n is not None else None


def tool_output(output: Any, tool: str | None) -> tuple[list, int | None, int | None, bool]:
    """(blocks, exit code, duration ms, failed) of a tool call's output."""
    success = None
    if isinstance(output, dict):  # {content, success} (or content items)
        success = output.get("success") if isinstance(output.get("success"), bool) else None
        output = output.get("content", output.get("output", output))
    if isinstance(output, list):
        blocks = message_blocks(output)
        text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
    elif isinstance(output, str):
        blocks, text = None, output
    else:
        blocks, text = None, "" if output is None else R.dumps(output)
    exit_code = duration = None
    if tool in SHELL_TOOLS and text:
        if text.lstrip().startswith("{"):
            try:
                data = orjson.loads(text)
            except orjson.JSONDecodeError:
                data = None
            meta = data.get("metadata") if isinstance(data, dict) else None
            if isinstance(meta, dict):
                exit_code = R.integer(meta.get("exit_code"))
                duration = _duration_ms(meta.get("duration_seconds"))
                if isinstance(data.get("output"), str):
                    text = data["output"]
        if exit_code is None:
            head = text[:4096]
            m = _EXIT_RE.search(head)
            if m:
                exit_code = int(m.group(1))
                w = _WALL_RE.search(head)
                if w:
                    duration = _duration_ms(float(w.group(1)))
    if blocks is None:
        blocks = [{"type": "text", "text": text}]
    failed = success is False or (exit_code is not None and exit_code != 0)
    return blocks, exit_code, duration, failed


def event_preview(ptype: str | None, payload: dict) -> str | None:
    if ptype in ("user_message", "agent_message"):
        return R.preview(R.text(payload.get("message")))
    if ptype in ("agent_reasoning", "agent_reasoning_raw_content"):
        return R.preview(R.text(payload.get("text")))
    if ptype == "exec_command_end":
        cmd = payload.get("command")
        return R.preview(shlex.join(cmd) if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd)
                        else R.text(cmd))
    if ptype in ("error", "stream_error", "warning"):
        return R.preview(R.text(payload.get("message")))
    return None


# ---------------------------------------------------------------------------
# The parser


class _Held:
    """Rows of the request under way, held until it ends (so a model call's usage can still
    be put on the last row the model wrote), in line order."""

    __slots__ = ("entries", "candidate", "pending", "claim")

    def __init__(self):
        self.entries: list[Entry] = []
        self.candidate: Entry | None = None  # the last model-written row
        self.pending: Entry | None = None  # a call's usage read before any row of it (held, in line order)
        # (pending row, the model-written row that took its usage, that row's digest before): the
        # pending row goes when the request ends, unless that row takes a usage of its own first
        self.claim: tuple[Entry, Entry, str] | None = None


class RolloutParser:
    """Incremental parser for one rollout (see the module docstring); the ``feed`` protocol of
    ``parser.TranscriptParser``. Pure: bytes in, entries out. ``state.extra`` carries across
    runs the last cumulative total, the model and working directory of the turn, the fork gate,
    the calls still waiting for an output and the call ids seen (bounded)."""

    known_types = frozenset(WRAPPED_TYPES | {"message", "state", "replayed"})

    def __init__(self, file_name: str, state: ParseState | None = None):
        self.file_name = file_name
        self.state = state or ParseState()
        self.extra = self.state.extra
        self.held = _Held()
        self.seen: dict[str, None] = dict.fromkeys(self.extra.get("seen") or [])  # call ids, oldest first

    # -- the feed protocol -----------------------------------------------------

    def feed(self, data: bytes, final: bool = False) -> ChunkResult:
        result = ChunkResult()
        end = len(data)
        start = result.consumed = P.complete_lines(data, lambda raw: self._line(raw, result), self.state)
        if final:
            if start < end and data[start:].strip():
                # The unterminated tail: imported now when it is already a whole JSON object,
                # but left unconsumed; the next run reads it again and, seeing the same
                # line, does not process it twice.
                index = self.state.next_line
                if not self._line(data[start:], result, tail=True):
                    result.pending_lines += 1
                self.state.next_line = index
            self._flush(result)
            if self.seen:
                self.extra["seen"] = list(self.seen)[-MAX_SEEN_CALLS:]
        return result

    def sessions(self) -> dict:
        st = self.state
        if st.session_id is None:
            return {}
        values = {k: v for k, v in (self.extra.get("info") or {}).items() if v is not None}
        if self.extra.get("model"):
            values["model"] = self.extra["model"]
        raw = st.header_raw.decode("utf-8", "replace") if st.header_raw is not None else None
        if not values and raw is None:
            return {}
        return {st.session_id: SessionInfo(values, raw)}

    # -- one line ----------------------------------------------------------------

    def _line(self, raw: bytes, result: ChunkResult, tail: bool = False) -> bool:
        st = self.state
        index = st.next_line
        st.next_line += 1
        if raw[-1:] == b"\r":
            raw = raw[:-1]
        crc = zlib.crc32(raw)
        done = self.extra.get("tail")
        if done is not None and done[0] == index:
            if done[1] == crc:
                if not tail:
                    del self.extra["tail"]
                return True  # the tail an earlier run imported (now complete, or still not)
            del self.extra["tail"]
        obj, raw = P.loads_line(raw)
        if not isinstance(obj, dict):
            if not tail:
                result.bad_lines += 1
            return False
        if tail:
            self.extra["tail"] = [index, crc]
        if index == 0 or st.session_id is None:
            if self._start(index, obj, raw):
                return True
        if self.extra.get("fmt") == "old":
            self._bare(index, obj, raw, result)
        elif obj.get("type") in WRAPPED_TYPES and isinstance(obj.get("payload"), dict):
            self.extra.setdefault("fmt", "wrapped")
            self._wrapped(index, obj, raw, result)
        else:  # a line of no format Codex writes: kept, and it does not make the file a rollout
            self._entry(index, obj, raw, "unknown", R.text(obj.get("type"), 128), None, result,
                        P.format_timestamp(obj.get("timestamp")))
        return True

    def _start(self, index: int, obj: dict, raw: bytes) -> bool:
        """The first line: a session_meta or the old header is the session's header (not an
        entry); anything else leaves the session id to the file name."""
        st = self.state
        info = self.extra.setdefault("info", {})
        if obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict) and index == 0:
            payload = obj["payload"]
            self.extra["fmt"] = "wrapped"
            sid = R.text(payload.get("id"))
            st.session_id = P.clamp_id(sid) if sid else session_id_from_name(self.file_name)
            st.header, st.header_raw = obj, raw
            self._meta(payload, obj, info)
            return True
        if index == 0 and _is_old_header(obj):
            self.extra["fmt"] = "old"
            st.legacy = True
            st.session_id = P.clamp_id(obj["id"])
            st.header, st.header_raw = obj, raw
            info["started_at"] = P.format_timestamp(obj.get("timestamp"))
            info["times_approximate"] = 1
            self.extra["ts"] = info["started_at"]
            return True
        st.session_id = session_id_from_name(self.file_name)
        return False

    def _meta(self, payload: dict, obj: dict, info: dict) -> None:
        """Session values from the first session_meta; arms the fork gate."""
        cwd = P.cut_str(payload.get("cwd"), 512)
        info["cwd"] = cwd
        info["project"] = _project(cwd)
        info["started_at"] = P.format_timestamp(payload.get("timestamp")) or P.format_timestamp(obj.get("timestamp"))
        info["model_provider"] = R.text(payload.get("model_provider"), 64)
        info["agent_version"] = R.text(payload.get("cli_version"), 64)  # the Codex CLI that wrote it
        parent = R.text(payload.get("forked_from_id"))
        source = payload.get("source")
        if not parent and isinstance(source, dict):
            spawn = source.get("subagent")
            spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
            if isinstance(spawn, dict):
                parent = R.text(spawn.get("parent_thread_id"))
        if parent:
            info["parent_session_uuid"] = P.clamp_id(parent)
            created = _uuid7_ms(payload.get("id")) or _ms(payload.get("timestamp")) or _ms(obj.get("timestamp"))
            second = _ms(obj.get("timestamp")) or created
            if created is not None:
                # Until the child's own first line, what follows is the parent's history.
                self.extra["gate"] = [created, second // 1000]
        if payload.get("model_provider"):
            self.extra["prov"] = R.text(payload.get("model_provider"), 64)

    def _replayed(self, obj: dict, payload: Any) -> bool:
        """Whether a line is the parent's history a fork or sub-agent replays: lines up to the
        child's first turn (a turn_context whose turn id was minted at or after the fork), or,
        without turn ids, up to the first line stamped after the second the child was made."""
        gate = self.extra.get("gate")
        if gate is None:
            return False
        created, second = gate
        ltype = obj.get("type")
        if (ltype == "turn_context" or (ltype == "event_msg" and payload.get("type") == "task_started")) \
                and isinstance(payload, dict):
            minted = _uuid7_ms(payload.get("turn_id"))
            if minted is not None:
                if minted < created:
                    return True
                del self.extra["gate"]
                return False
        ts = _ms(obj.get("timestamp"))
        if ltype == "session_meta":
            # The parent's, first of the replay: its stamp is the replay's (when the child's own
            # session_meta was written just before a second ended).
            if ts is not None and ts // 1000 > second:
                gate[1] = ts // 1000
            return True
        if ts is not None and ts // 1000 > second:
            del self.extra["gate"]
            return False
        return True

    # -- the two formats -------------------------------------------------------

    def _wrapped(self, index: int, obj: dict, raw: bytes, result: ChunkResult) -> None:
        ltype = obj["type"]
        payload = obj["payload"]
        ptype = R.text(payload.get("type"), 128)
        ts = P.format_timestamp(obj.get("timestamp"))
        if self._replayed(obj, payload):
            if ltype == "event_msg" and ptype == "token_count":
                info = payload.get("info")
                total = _usage(info.get("total_token_usage")) if isinstance(info, dict) else None
                if total is not None:
                    self.extra["tot"] = total  # the baseline the child's own totals continue from
            elif ltype == "turn_context" and R.text(payload.get("model")):
                self.extra["model"] = R.text(payload.get("model"), 128)
            self._entry(index, obj, raw, "replayed", f"{ltype}.{ptype}" if ptype else ltype, None, result, ts)
            return
        if ltype == "response_item":
            self._item(index, obj, raw, payload, ts, result)
        elif ltype == "event_msg":
            if ptype == "token_count":
                self._token_count(index, obj, raw, payload, ts, result)
                return
            if ptype == "exec_command_end":
                call_id = R.text(payload.get("call_id"), 255)
                if call_id:
                    ends = self.extra.setdefault("ends", {})
                    ends[call_id] = [R.integer(payload.get("exit_code")), _duration_ms(payload.get("duration"))]
                    while len(ends) > MAX_OPEN_CALLS:
                        del ends[next(iter(ends))]
            if ptype in TURN_EVENTS:
                self._flush(result)
            self._entry(index, obj, raw, ltype, ptype, event_preview(ptype, payload), result, ts)
        else:
            if ltype == "turn_context":
                self._flush(result)
                model = R.text(payload.get("model"), 128)
                if model:
                    self.extra["model"] = model
                cwd = P.cut_str(payload.get("cwd"), 512)
                info = self.extra.setdefault("info", {})
                if cwd and not info.get("cwd"):
                    info["cwd"], info["project"] = cwd, _project(cwd)
            elif ltype == "compacted":
                self._flush(result)
            elif ltype == "session_meta":
                info = self.extra.setdefault("info", {})
                if not info.get("started_at"):  # the first session_meta, after other lines
                    self._meta(payload, obj, info)
            preview = R.preview(R.text(payload.get("message"))) if ltype == "compacted" else None
            self._entry(index, obj, raw, ltype, ptype, preview, result, ts)

    def _bare(self, index: int, obj: dict, raw: bytes, result: ChunkResult) -> None:
        ts = self.extra.get("ts")
        if "record_type" in obj and "type" not in obj:
            self._entry(index, obj, raw, "state", R.text(obj.get("record_type"), 128), None, result, ts)
            return
        if isinstance(obj.get("type"), str):
            self._item(index, obj, raw, obj, ts, result, approximate=True)
            return
        self._entry(index, obj, raw, "unknown", None, None, result, ts)

    # -- response items ------------------------------------------------------------

    def _item(self, index: int, obj: dict, raw: bytes, payload: dict, ts: str | None, result: ChunkResult,
              approximate: bool = False) -> None:
        ptype = payload.get("type")
        if ptype == "message":
            role = R.text(payload.get("role"), 32)
            blocks = message_blocks(payload.get("content"))
            context = _is_context(role, blocks)
            if role == "user" and context and not (self.extra.get("info") or {}).get("cwd"):
                for b in blocks:
                    m = _CWD_RE.search(b.get("text") or "") if b.get("type") == "text" else None
                    if m:
                        info = self.extra.setdefault("info", {})
                        info["cwd"], info["project"] = P.cut_text(m.group(1), 512), _project(m.group(1))
                        break
            # developer and system messages, and Codex's wrappers in user messages, are context
            vocab = V.SYSTEM if context else V.USER if role == "user" else V.ASSISTANT if role == "assistant" \
                else V.SYSTEM
            row = self._row(index, vocab, blocks, ts, raw, approximate, native=role)
            self._message(index, obj, raw, row, None, result, model_written=role == "assistant")
        elif ptype == "reasoning":
            block, text = reasoning_block(payload)
            row = self._row(index, V.ASSISTANT, [block], ts, raw, approximate, thinking=text, native="reasoning")
            self._message(index, obj, raw, row, None, result, model_written=True)
        elif ptype in CALL_TYPES:
            self._call(index, obj, raw, payload, ptype, ts, result, approximate)
        elif isinstance(ptype, str) and ptype.endswith("_output") and R.text(payload.get("call_id")):
            self._output(index, obj, raw, payload, ts, result, approximate)
        else:
            bare = ptype[:64] if isinstance(ptype, str) else "unknown"
            entry_type = "response_item" if obj is not payload else bare
            self._entry(index, obj, raw, entry_type, R.text(ptype, 128), None, result, ts)

    def _call(self, index, obj, raw, payload, ptype, ts, result, approximate) -> None:
        if ptype == "local_shell_call":
            name = "local_shell"
            args = payload.get("action") if isinstance(payload.get("action"), dict) else {}
        elif ptype == "custom_tool_call":
            name = R.text(payload.get("name"), 128)
            args = {"input": payload.get("input")}  # apply_patch: the patch text, whole
        else:
            name = R.text(payload.get("name"), 128)
            args = R.arguments(payload.get("arguments"))
        call_id = R.text(payload.get("call_id"), 255) or R.text(payload.get("id"), 255)
        block = {"type": "toolCall", "id": call_id, "name": name, "arguments": args}
        if ptype != "function_call":
            block["callType"] = ptype
        command = shell_command(name, args)
        # Without text of its own, a call's preview is its command, else its name and arguments.
        describe = command if R.preview(command) else f"{name} {R.dumps(args)}"
        row = self._row(index, V.ASSISTANT, [block], ts, raw, approximate, native=ptype, preview_else=describe)
        calls = []
        if call_id is None or call_id not in self.seen:
            # A call id the session had already (a copy of the same call) adds no second call.
            calls = R.tool_call_rows([block], ts, SHELL_TOOLS, {0: command})
            if call_id is not None:
                self.seen[call_id] = None
        if call_id is not None and name is not None:
            names = self.extra.setdefault("names", {})
            names[call_id] = name
            while len(names) > MAX_OPEN_CALLS:
                del names[next(iter(names))]
        self._message(index, obj, raw, row, calls, result, model_written=True)

    def _output(self, index, obj, raw, payload, ts, result, approximate) -> None:
        self._flush(result)  # a tool's output: the request that called it is over
        call_id = R.text(payload.get("call_id"), 255)
        names = self.extra.get("names") or {}
        tool = names.pop(call_id, None)
        if payload.get("type") == "local_shell_call_output":
            tool = tool or "local_shell"
        blocks, exit_code, duration, failed = tool_output(payload.get("output"), tool)
        end = (self.extra.get("ends") or {}).pop(call_id, None)
        if end is not None:
            if end[0] is not None:
                exit_code = end[0]
                failed = failed or exit_code != 0
            if end[1] is not None:
                duration = end[1]
        row = self._row(index, V.TOOL_RESULT, blocks, ts, raw, approximate, tool_call_id=call_id, tool_name=tool,
                        exit_code=exit_code, duration_ms=duration, is_error=failed, native=payload.get("type"))
        self._message(index, obj, raw, row, None, result, model_written=False)

    # -- tokens ----------------------------------------------------------------------

    def _token_count(self, index, obj, raw, payload, ts, result) -> None:
        entry = self._entry_obj(index, obj, raw, "event_msg", "token_count", None, ts)
        info = payload.get("info")
        if not isinstance(info, dict):
            self._place(entry, result)
            return
        total = _usage(info.get("total_token_usage"))
        last = _usage(info.get("last_token_usage"))
        prev = self.extra.get("tot")
        if total is None:
            if last is None:
                self._place(entry, result)
                return
            # No cumulative total (not seen in Codex's own rollouts): the last request's usage.
            total = [a + b for a, b in zip(prev or [0] * 5, last)]
        if prev == total:
            self._place(entry, result)  # a repeat: no model call
            return
        if prev is not None and all(a >= b for a, b in zip(total, prev)):
            delta = [a - b for a, b in zip(total, prev)]
        else:
            delta = total  # the first total, or a counter that started again
        self.extra["tot"] = total
        # The model that served this call, when the event names it (newer Codex), else the turn's.
        model = R.text(info.get("model"), 128) or self.extra.get("model")
        key = P.short_hash(R.dumps([self.state.session_id, total]).encode())
        usage = {
            "input_tokens": max(delta[0] - delta[1], 0), "cache_read_tokens": delta[1],
            "output_tokens": delta[2], "cache_write_tokens": 0, "total_tokens": delta[4],
            "model": model, "provider": self.extra.get("prov"), "call_key": key,
        }
        held = self.held
        self._place(entry, result)
        target = held.candidate
        if target is not None:
            claim = held.claim
            if claim is not None and claim[1] is target:
                # the row that took an earlier usage has one of its own (it came after it): the
                # earlier call keeps its row, without output
                held.claim = None
                target._hash = claim[2]
            _carry(target, usage, key)
            self._flush(result)
        else:
            # No model-written row since the last input: older rollouts write the token_count
            # before the items of its call. The call's usage waits, held, for the next
            # model-written row of the same request (_message); when the request ends without one,
            # the held row stays: an assistant row without content that is that model call
            # (docs/vocabulary.md, "a model call without output").
            self._flush(result)
            row = R.message_row(f"@{index}:usage", V.ASSISTANT, native_role="token_count", parent=entry.entry_id,
                                timestamp=ts, seq=index, raw_json=R.dumps({"type": "usage", "line": index,
                                                                          "total_token_usage": total,
                                                                          "previous_total": prev}), **usage)
            usage_entry = Entry(row["message_uuid"], entry.entry_id, "message", index, {}, row["raw_json"].encode(),
                                row=row, calls=[])
            self._chain(usage_entry)
            held.entries.append(usage_entry)
            held.pending = usage_entry

    # -- rows and entries --------------------------------------------------------------

    @staticmethod
    def _row(index: int, role: str, blocks: list | None, ts: str | None, raw: bytes, approximate: bool, *,
             native: Any = None, **fields: Any) -> dict:
        """The ``messages`` row of line ``index`` (rows.message_row)."""
        return R.message_row(f"@{index}", role, blocks=blocks, native_role=native, timestamp=ts, seq=index,
                             raw_json=raw.decode("utf-8", "replace"), time_approximate=approximate, **fields)

    def _message(self, index, obj, raw, row, calls, result, model_written: bool) -> None:
        entry = Entry(row["message_uuid"], None, "message", index, obj, raw, row=row, calls=calls or [])
        if model_written:
            held = self.held
            pending = held.pending
            if pending is not None:
                # the call whose usage came first: its usage goes on this row (its own row goes
                # when the request ends: _flush)
                held.pending = None
                held.claim = (pending, entry, entry.raw_hash)
                p = pending.row
                _carry(entry, {k: p[k] for k in _USAGE_COLUMNS}, p["call_key"])
            held.entries.append(entry)
            held.candidate = entry
            self._chain(entry)
            if len(self.held.entries) > MAX_HELD:
                self._flush(result)
        else:
            self._flush(result)  # an input (a user, developer or tool message): the request before it is over
            self._place(entry, result)

    def _entry_obj(self, index, obj, raw, etype, custom, preview, ts=None) -> Entry:
        row = {"entry_uuid": f"@{index}", "parent_uuid": None, "entry_type": etype, "custom_type": custom,
               "text_preview": preview, "timestamp": ts, "seq": index, "raw_json": raw.decode("utf-8", "replace")}
        return Entry(row["entry_uuid"], None, etype, index, obj, raw, row=row)

    def _entry(self, index, obj, raw, etype, custom, preview, result, ts=None) -> None:
        self._place(self._entry_obj(index, obj, raw, etype, custom, preview, ts), result)

    def _chain(self, entry: Entry) -> None:
        """Each entry's parent is the one before it: the file's order is the conversation's."""
        entry.parent_id = self.state.last_entry_id
        if entry.row is not None:
            entry.row["parent_message_uuid" if entry.type == "message" else "parent_uuid"] = entry.parent_id
        self.state.last_entry_id = entry.entry_id

    def _place(self, entry: Entry, result: ChunkResult) -> None:
        """An entry in line order: behind the held rows while a request is under way."""
        self._chain(entry)
        if self.held.entries:
            self.held.entries.append(entry)
        else:
            result.entries.append(entry)

    def _flush(self, result: ChunkResult) -> None:
        held = self.held
        if held.claim is not None:
            pending = held.claim[0]
            held.entries = [e for e in held.entries if e is not pending]
            for other in held.entries:  # what hung on it hangs on its parent (the token_count entry)
                if other.parent_id == pending.entry_id:
                    other.parent_id = pending.parent_id
                    other.row["parent_message_uuid" if other.type == "message" else "parent_uuid"] = pending.parent_id
            if self.state.last_entry_id == pending.entry_id:
                self.state.last_entry_id = pending.parent_id
        if held.entries:
            result.entries.extend(held.entries)
            held.entries = []
        held.candidate = held.pending = held.claim = None


_USAGE_COLUMNS = ("input_tokens", "cache_read_tokens", "output_tokens", "cache_write_tokens", "total_tokens",
                  "model", "provider", "call_key")


def _carry(target: Entry, usage: dict, key: str) -> None:
    """A model call's usage onto the row the model wrote for it."""
    target.row.update(usage)
    # Its digest says it carries this call: a copy read before without it is replaced.
    target._hash = target.raw_hash + "+" + key[:8]


# ---------------------------------------------------------------------------
# Units and the kind


class RolloutFile(Unit):
    """One rollout file."""

    prefetch_limit = PREFETCH_LIMIT

    def read(self, checkpoint):
        return read_lines(self, checkpoint, RolloutParser)


def _reserve(out: Discovery, server: str, path: str) -> None:
    """Mark a path of a Codex home as listed without listing a unit for it: discovery lists a
    key once, so no other kind's looser rule ("a folder of *.jsonl transcripts") opens it."""
    out.keys.add((server, path))


class CodexSource(Source):
    kind = "codex"
    # Before Claude Code's and OpenClaw's looser rules (a Codex home holds history.jsonl,
    # which they would sniff): its files it never reads are kept away from them (_reserve).
    order = 12
    shell_tools = SHELL_TOOLS
    places = ("$CODEX_HOME", "~/.codex")
    not_this = "not a Codex rollout: no session_meta, header or Codex line type"

    # -- discovery ---------------------------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        return name.endswith(".jsonl") and looks_like_rollout(head)

    def file_unit(self, fs, path, size, mtime_ns, scope, out) -> Unit:
        archived = ARCHIVED_DIR in _parts(fs, path)
        return RolloutFile(self, scope.server, scope.agent or AGENT, path, fs.basename(path), size, mtime_ns, fs=fs,
                           session_type="archived" if archived else "normal")

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        listing = _listing(fs, path)
        if listing is None:
            return False
        home = path if _is_home(fs, path, listing) else None
        if home is None:
            inner = fs.join(path, ".codex")
            inner_listing = _listing(fs, inner) if any(e.name == ".codex" and e.is_dir() for e in listing) else None
            if inner_listing is not None and _is_home(fs, inner, inner_listing, named=True):
                home, listing = inner, inner_listing
        if home is not None:
            self._home(fs, home, listing, scope, out)
            return True
        name = fs.basename(path)
        if _is_tree(fs, path, listing, name):
            archived = name == ARCHIVED_DIR or ARCHIVED_DIR in _parts(fs, path)
            live = set() if not archived else _live_ids(fs, _sibling_live(fs, path))
            self._tree(fs, path, listing, scope, out, archived, live, 0)
            return True
        return False

    def _home(self, fs: FileSystem, home: str, listing, scope: Scope, out: Discovery) -> None:
        for e in listing:
            if e.name not in (SESSIONS_DIR, ARCHIVED_DIR) and not e.name.startswith("."):
                try:
                    if not e.is_dir():
                        _reserve(out, scope.server, e.path)  # history.jsonl, auth.json, state_*.sqlite ...
                except OSError:
                    continue
        sessions, archived = fs.join(home, SESSIONS_DIR), fs.join(home, ARCHIVED_DIR)
        live: set[str] = set()
        found = _listing(fs, sessions)
        if found is not None:
            live = self._tree(fs, sessions, found, scope, out, False, set(), 0)
        found = _listing(fs, archived)
        if found is not None:
            self._tree(fs, archived, found, scope, out, True, live, 0)

    def _tree(self, fs: FileSystem, folder: str, listing, scope: Scope, out: Discovery, archived: bool,
              live: set[str], depth: int) -> set[str]:
        """Every rollout under ``folder`` (a ``sessions/`` tree: YYYY/MM/DD); returns the names
        listed. In ``archived_sessions/`` a rollout whose name is in ``live`` (the copy in
        ``sessions/``) is skipped: the live copy is the session's."""
        names: set[str] = set()
        agent = scope.agent or AGENT
        for e in sorted(listing, key=lambda e: e.name):
            try:
                if e.is_dir():
                    if depth < MAX_DEPTH and not e.name.startswith("."):
                        sub = _listing(fs, e.path)
                        if sub is not None:
                            names |= self._tree(fs, e.path, sub, scope, out, archived, live, depth + 1)
                    continue
                if not e.name.endswith(".jsonl") or not e.is_file():
                    continue
                if not is_rollout_name(e.name) and not _sniff(fs, e.path, e.size):
                    continue
                if archived and _live_key(e.name) in live:
                    _reserve(out, scope.server, e.path)
                    continue
                size, mtime = e.size, e.mtime_ns
            except OSError as exc:
                out.errors.append(f"cannot stat {e.path}: {exc.strerror or exc}")
                continue
            names.add(_live_key(e.name))
            out.add(RolloutFile(self, scope.server, agent, e.path, e.name, size, mtime, fs=fs,
                                session_type="archived" if archived else "normal"))
        return names

    def extra_stats(self, store) -> dict:
        rows = store.query(
            "SELECT (SELECT COUNT(*) FROM messages WHERE source = 'codex' AND native_role = 'token_count') AS n, "
            "(SELECT COUNT(*) FROM entries e JOIN sessions s ON s.id = e.session_id "
            " WHERE s.source = 'codex' AND e.entry_type = 'replayed') AS replayed_entries")
        # calls_without_output: model calls whose items the rollout did not keep (their usage only)
        return {"calls_without_output": int(rows[0][0] or 0), "replayed_entries": int(rows[0][1] or 0)}


SOURCE = CodexSource()


# ---------------------------------------------------------------------------
# The layout


def _listing(fs: FileSystem, path: str):
    try:
        return fs.listdir(path)
    except OSError:
        return None


def _parts(fs: FileSystem, path: str) -> list[str]:
    out = []
    for _ in range(12):
        name = fs.basename(path)
        if not name:
            break
        out.append(name)
        path = fs.dirname(path)
    return out


def _sniff(fs: FileSystem, path: str, size: int) -> bool:
    """A .jsonl file not named like a rollout: Codex's when its first line is."""
    try:
        with fs.open(path, size) as f:
            return looks_like_rollout(f.read(SNIFF_BYTES))
    except OSError:
        return False


def _looks_like_sessions(listing, named: bool) -> bool:
    """A sessions tree by its listing: rollout files, or (in a folder named ``sessions`` or
    ``archived_sessions``) year folders (YYYY)."""
    for e in listing:
        name = e.name
        if is_rollout_name(name):
            return True
        if named and len(name) == 4 and name.isdigit():
            try:
                if e.is_dir():
                    return True
            except OSError:
                continue
    return False


def _is_home(fs: FileSystem, path: str, listing, named: bool = False) -> bool:
    """A Codex home: ``sessions/`` or ``archived_sessions/`` beside Codex's own files, or in a
    folder named like one, or holding a sessions tree."""
    names = {e.name: e for e in listing}
    subs = [names[n] for n in (SESSIONS_DIR, ARCHIVED_DIR) if n in names]
    try:
        subs = [e for e in subs if e.is_dir()]
    except OSError:
        return False
    if not subs:
        return False
    if named or fs.basename(path) in HOME_NAMES or any(m in names for m in HOME_MARKERS):
        return True
    for e in subs:
        sub = _listing(fs, e.path)
        if sub is not None and _looks_like_sessions(sub, True):
            return True
    return False


def _is_tree(fs: FileSystem, path: str, listing, name: str) -> bool:
    """A sessions tree (or a folder inside one): rollouts or year folders in it, or a
    ``sessions/``/``archived_sessions/`` folder of a Codex home."""
    named = name in (SESSIONS_DIR, ARCHIVED_DIR)
    if _looks_like_sessions(listing, named):
        return True
    if name.isdigit() and any(p in (SESSIONS_DIR, ARCHIVED_DIR) for p in _parts(fs, path)[1:4]):
        return True  # sessions/2025 or sessions/2025/09
    if named:
        parent = fs.dirname(path)
        found = _listing(fs, parent)
        return found is not None and _is_home(fs, parent, found)
    return False


def _live_key(name: str) -> str:
    """What tells two copies of one rollout apart from other rollouts: its session uuid
    (else its name)."""
    m = _UUID_TAIL_RE.search(name)
    return m.group(1).lower() if m else name


def _sibling_live(fs: FileSystem, path: str) -> str | None:
    """The ``sessions/`` folder beside the ``archived_sessions/`` that ``path`` is in."""
    cur = path
    for _ in range(MAX_DEPTH + 1):
        if fs.basename(cur) == ARCHIVED_DIR:
            return fs.join(fs.dirname(cur), SESSIONS_DIR)
        cur = fs.dirname(cur)
    return None


def _live_ids(fs: FileSystem, sessions: str | None, depth: int = 0) -> set[str]:
    """The rollouts in a ``sessions/`` tree, by :func:`_live_key` (names only: nothing opened)."""
    out: set[str] = set()
    if sessions is None or depth > MAX_DEPTH:
        return out
    for e in _listing(fs, sessions) or []:
        try:
            if e.is_dir():
                out |= _live_ids(fs, e.path, depth + 1)
            elif e.name.endswith(".jsonl"):
                out.add(_live_key(e.name))
        except OSError:
            continue
    return out
