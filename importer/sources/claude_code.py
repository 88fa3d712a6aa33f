"""Claude Code transcripts: ``<config>/projects/<enc(cwd)>/<sessionId>.jsonl``, one JSON object a
line (FORMAT-OTHERS.md section 3; docs/claude-code.md says what is imported and how).

A PATH may be a Claude config dir (``~/.claude``, ``~/.config/claude``, each of
``$CLAUDE_CONFIG_DIR``), a folder holding one (``.claude/``, ``.config/claude/``), its ``projects/``
folder, one project folder, a folder inside one (a session's ``subagents/``, a workflow run), or one
file. Backup copies rearrange that tree (``sessions/`` folders, ``subagents/<sessionId>/``): inside a
project folder every ``*.jsonl`` is read wherever it is. Other kinds' trees and files are left to
them: a ``projects/`` folder outside a recognisable config dir is taken project by project, each when
its first files read as Claude Code's, and a folder outside ``projects/`` has each of its files'
first lines sniffed.

What a file becomes (the parser, :class:`ClaudeParser`):

- Sessions are ``sessionId``s; a sub-agent transcript (``isSidechain`` lines with an ``agentId``: flat
  ``agent-<id>.jsonl``, ``<session>/subagents/...``, workflow runs) is the session
  ``<sessionId>:<agentId>``, with ``parent_session_uuid`` its parent; 1.0.x sidechain lines without an
  ``agentId`` form one sub-agent session per sidechain (``<sessionId>:sc-<root uuid>``). The tool call
  that spawned a sub-agent (``parent_call_id``) is found after the run (:meth:`ClaudeCode.finish_group`)
  from what the files say: a tool result's ``toolUseResult.agentId`` or ``runId`` (Workflow), the
  workflow run folder and its ``journal.jsonl``, ``progress``/``queue-operation`` lines, the sub-agent's
  ``sourceToolAssistantUUID``, or (1.0.x) the Task prompt the sidechain starts with. A 1.0.x file
  continued after compaction opens with an ``isCompactSummary`` line carrying the previous session's id:
  that line is the new session's, and the id its ``previous_session_id``.
- One API call is one assistant message: the consecutive lines sharing ``message.id`` (and
  ``requestId``) are merged, content blocks in order (a line repeating earlier blocks, a cumulative
  snapshot, adds only what is new), usage from the line with the largest token total. The message is
  ``message.id`` (so a replayed copy in the same session is the same message), its ``call_key`` a hash
  of (``message.id``, ``requestId``). ``<synthetic>`` and ``isApiErrorMessage`` messages are kept, flagged
  ``is_synthetic``, with no call key. The last group of a read may be unfinished (still streaming): the
  checkpoint resumes at its first line, so the next run reads it again, whole.
- A user line becomes a ``user`` message (its text, images...) and one ``toolResult`` message per
  ``tool_result`` block (id ``result:<tool_use_id>``, so one per tool call, exit code from
  ``Exit code N``); ``isMeta`` and ``isCompactSummary`` lines are role ``context`` (``is_context``).
- Every other line is an entry (summary, system, compaction boundary, file-history snapshot,
  attachment, queue, mode, title lines...). Side lines Claude Code hangs beside the conversation's
  next line (hook attachments, system lines), lines without a ``uuid`` and lines whose parent was never
  written are threaded in after the line they follow, so the active path (leaf back to root) runs
  through the whole session; a rewind stays a branch.
- ``raw_json`` keeps each line (without ``message.content``, which is in ``content_blocks``), and for a
  merged message or a split user line how its blocks came from the lines (``_agentbase``), so that
  every line can be rebuilt (docs/claude-code.md).

Lines that carry no session (a file holding only ``summary`` lines) make no session: they are kept in
the ``claude_code_links`` table (kind ``orphan``), re-read while the file grows.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import partial

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from .reader import read_lines
from ..schema import COUNTED_USAGE, USAGE_TOTALS
from ..units import Batch, Checkpoint, Outcome, SessionInfo, Unit
from .base import Discovery, Scope, Source
from .fs import FileSystem

KIND = "claude-code"
AGENT = "claude-code"
CONFIG_DIRS = ("~/.claude", "~/.config/claude")
CONFIG_ENV = "CLAUDE_CONFIG_DIR"
PROJECTS = "projects"
LINKS = "claude_code_links"
SHELL_TOOLS = frozenset({"Bash"})  # the tools that run a shell command (Source.shell_tools)
# Tools whose calls start a sub-agent (Task/Agent) or a workflow of them.
SPAWNING_TOOLS = frozenset({"Task", "Agent", "Workflow"})
SNIFF_BYTES = 64 * 1024
DISCOVERY_SNIFF = 16 * 1024  # first bytes read of a file to tell its kind while listing
PREFETCH_LIMIT = 8 * 1024 * 1024
MAX_DEPTH = 6  # folder levels read below a project folder
SNIFF_FILES = 3  # files sniffed to tell whether a folder is Claude Code's
# Folders of a config dir or project that hold no transcripts.
SKIP_DIRS = frozenset({"tool-results", "file-history", "todos", "shell-snapshots", "statsig", "plugins", "ide",
                       "debug", "session-env", "node_modules", ".git"})
JOURNAL = "journal.jsonl"
META_SUFFIX = ".meta.json"
# Bounded parser memory carried across runs (ParseState.extra).
IDS_LIMIT = 4000  # line uuid -> entry id
TOOLS_LIMIT = 512  # tool_use id -> tool name
PROMPTS_LIMIT = 128  # Task prompt -> tool_use id
HELD_LIMIT = 2000  # lines held while a file's session is not known yet
SIDE_LIMIT = 64  # side lines after a session's last message, remembered to thread them

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_AGENT_FILE_RE = re.compile(r"^agent-(.+)\.jsonl$")
_EXIT_RE = re.compile(r"\s*Exit code (-?\d+)\b")
_TASK_ID_RE = re.compile(r"<task-id>([^<]+)</task-id>")
_TOOL_USE_ID_RE = re.compile(r"<tool-use-id>([^<]+)</tool-use-id>")
# Line types Claude Code writes (beside user/assistant) that tell its files from other JSON lines.
LINE_TYPES = frozenset({
    "summary", "system", "file-history-snapshot", "attachment", "queue-operation", "progress", "last-prompt",
    "mode", "permission-mode", "ai-title", "custom-title", "agent-name", "tag", "pr-link",
})
_OTHER_KINDS = frozenset({"session", "session_meta", "response_item", "event_msg", "turn_context", "compacted",
                          "message", "model_change", "custom", "custom_message"})


def _h8(value: str) -> str:
    return P.short_hash(value.encode("utf-8", "surrogatepass"))[:8]


def _h16(value: str) -> str:
    return P.short_hash(value.encode("utf-8", "surrogatepass"))[:16]


def is_uuid(name: str) -> bool:
    return bool(_UUID_RE.match(name))


# ---------------------------------------------------------------------------
# Recognising the format


def looks_like_claude_line(obj) -> bool | None:
    """True: a Claude Code line; False: another kind's; None: cannot tell."""
    if not isinstance(obj, dict):
        return None
    t = obj.get("type")
    if t is None:
        # ccusage's fixtures and older versions: no type, a message and a session.
        return True if isinstance(obj.get("message"), dict) and "sessionId" in obj else None
    if not isinstance(t, str):
        return None
    if t in ("user", "assistant"):
        return isinstance(obj.get("message"), dict) and ("sessionId" in obj or "uuid" in obj)
    if t in LINE_TYPES:
        return any(k in obj for k in ("sessionId", "uuid", "leafUuid", "messageId", "operation", "aiTitle"))
    if t in _OTHER_KINDS or "record_type" in obj or "payload" in obj:
        return False
    return None


_PREFIX_RE = re.compile(rb'^\s*\{"(?:parentUuid|isSidechain|logicalParentUuid)"')


def looks_like_claude(head: bytes) -> bool | None:
    """Whether a file's first bytes read as Claude Code's: the first lines that tell (None: none do)."""
    lines = head.split(b"\n")
    complete = lines[:-1] if len(lines) > 1 else []
    for raw in complete[:16]:
        raw = raw.strip()
        if not raw:
            continue
        obj, _ = P.loads_line(raw)
        verdict = looks_like_claude_line(obj)
        if verdict is not None:
            return verdict
    if not complete or not any(r.strip() for r in complete):
        # One long first line (a large paste): its first keys tell.
        start = head[:4096]
        if _PREFIX_RE.match(start) and b'"sessionId"' in start:
            return True
        obj, _ = P.loads_line(head.strip()) if head.strip().endswith(b"}") else (None, b"")
        return looks_like_claude_line(obj)
    return None


# ---------------------------------------------------------------------------
# Where a file sits: its project, sub-agent, workflow run


@dataclass(frozen=True)
class FileContext:
    """What a file's path says: the project folder's name, the sub-agent id of an ``agent-<id>.jsonl``,
    the workflow run it is in, and the session whose folder holds it."""

    name: str
    project: str | None = None
    agent: str | None = None
    run: str | None = None
    parent: str | None = None

    @classmethod
    def of(cls, fs: FileSystem, path: str, project: str | None = None) -> "FileContext":
        name = fs.basename(path)
        m = _AGENT_FILE_RE.match(name)
        parts = []
        folder = fs.dirname(path)
        for _ in range(8):
            base = fs.basename(folder)
            if not base or folder == fs.dirname(folder):
                break
            parts.append(base)
            folder = fs.dirname(folder)
        # parts: the folders above the file, nearest first
        run = None
        if parts and (parts[0].startswith("wf_") or (len(parts) > 1 and parts[1] == "workflows")):
            run = parts[0]
        parent = next((p for p in parts if is_uuid(p)), None)
        if project is None:
            if PROJECTS in parts:
                at = parts.index(PROJECTS)  # the nearest projects/ above the file
                project = parts[at - 1] if at > 0 else None
            else:
                project = next((p for p in parts if p not in ("sessions", "subagents", "workflows")
                                and not p.startswith("wf_") and not is_uuid(p)), None)
        return cls(name, project, m.group(1) if m else None, run, parent)


def decode_project(name: str | None) -> str | None:
    """A project folder's name back to a path, as well as it can be: Claude Code wrote every
    character that is not a letter or digit as ``-`` (``-home-x-my-app`` is ``/home/x/my/app``)."""
    if not name:
        return None
    m = re.match(r"^([A-Za-z])--(.*)$", name)
    if m:
        return f"{m.group(1)}:\\" + m.group(2).replace("-", "\\")
    if name.startswith("-"):
        return name.replace("-", "/")
    return name


# ---------------------------------------------------------------------------
# Content blocks: Claude's API blocks <-> OpenClaw's vocabulary (reversible)


# The blocks whose type and one field are renamed, Claude's -> OpenClaw's (the other fields kept: _renamed).
_RENAMED = {"tool_use": ("toolCall", "input", "arguments"), "thinking": ("thinking", "signature", "thinkingSignature")}
_RENAMED_BACK = {ours: (theirs, new, old) for theirs, (ours, old, new) in _RENAMED.items()}


def to_block(block):
    """One Claude content block in OpenClaw's vocabulary, every other field kept: ``tool_use`` ->
    ``toolCall`` (``input`` -> ``arguments``), ``thinking``'s ``signature`` -> ``thinkingSignature``,
    ``redacted_thinking`` -> a redacted ``thinking``, a base64 ``image`` -> ``data``/``mimeType``;
    others unchanged. :func:`from_block` undoes it."""
    if not isinstance(block, dict):
        return block
    t = block.get("type")
    if t == "redacted_thinking":
        out = {"type": "thinking", "redacted": True, "ccType": t}
        out.update((k, v) for k, v in block.items() if k != "type")
        return out
    if t == "image" and set(block) == {"type", "source"}:
        src = block["source"]
        if (isinstance(src, dict) and set(src) == {"type", "media_type", "data"} and src["type"] == "base64"
                and isinstance(src["data"], str)):
            return {"type": "image", "data": src["data"], "mimeType": src["media_type"]}
    return _renamed(block, _RENAMED.get(t))


def from_block(block):
    """The Claude block :func:`to_block` made ``block`` from."""
    if not isinstance(block, dict):
        return block
    t = block.get("type")
    if t == "thinking" and block.get("ccType") == "redacted_thinking":
        out = {"type": "redacted_thinking"}
        out.update((k, v) for k, v in block.items() if k not in ("type", "redacted", "ccType"))
        return out
    if t == "image" and "data" in block and "source" not in block:
        return {"type": "image", "source": {"type": "base64", "media_type": block.get("mimeType"),
                                            "data": block["data"]}}
    return _renamed(block, _RENAMED_BACK.get(t))


def _renamed(block: dict, renamed: tuple[str, str, str] | None) -> dict:
    """``block`` with the type ``renamed`` gives and its field ``old`` named ``new``, every other
    field kept, in order (a new type first; a type that stays, where it was); None: ``block`` as it is."""
    if renamed is None:
        return block
    type_, old, new = renamed
    if block["type"] == type_:
        return {(new if k == old else k): v for k, v in block.items()}
    out = {"type": type_}
    for k, v in block.items():
        if k != "type":
            out[new if k == old else k] = v
    return out


def _canon(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS) if _jsonable(value) else R.dumps(value, True).encode()


def _jsonable(value) -> bool:
    try:
        orjson.dumps(value)
        return True
    except (TypeError, orjson.JSONEncodeError):
        return False


def _aligned(old, new) -> bool:
    """Whether ``new`` is ``old`` again, or grown (a cumulative streaming snapshot)."""
    if not (isinstance(old, dict) and isinstance(new, dict)) or old.get("type") != new.get("type"):
        return False
    t = old.get("type")
    if t == "toolCall":
        return old.get("id") == new.get("id")
    for key in ("text", "thinking"):
        if t == key:
            a, b = old.get(key), new.get(key)
            return isinstance(a, str) and isinstance(b, str) and (b.startswith(a) or a.startswith(b))
    return old == new


def _longer(old, new):
    for key in ("text", "thinking"):
        if isinstance(old, dict) and old.get("type") == key:
            return new if len(new.get(key) or "") >= len(old.get(key) or "") else old
    return new


def merge_blocks(lines_blocks: list[list]) -> list:
    """The content of one API message from its lines' blocks (converted), in order: an additive
    chunk appends what is new; a cumulative snapshot (its first block is the merged first block,
    maybe grown) replaces what it repeats."""
    merged: list = []
    for blocks in lines_blocks:
        if merged and blocks and _aligned(merged[0], blocks[0]):
            for j, b in enumerate(blocks):
                if j < len(merged) and _aligned(merged[j], b):
                    merged[j] = _longer(merged[j], b)
                elif b not in merged:
                    merged.append(b)
            continue
        for b in blocks:
            if b in merged:
                continue
            if isinstance(b, dict) and b.get("type") == "toolCall" and b.get("id") is not None:
                same = next((i for i, m in enumerate(merged) if isinstance(m, dict) and m.get("type") == "toolCall"
                             and m.get("id") == b.get("id")), None)
                if same is not None:
                    merged[same] = b
                    continue
            merged.append(b)
    return merged


# ---------------------------------------------------------------------------
# Usage


# (column, Claude's usage key): the four counts before the total (Claude gives none).
USAGE_FIELDS = tuple(zip(R.USAGE_COLUMNS[:4], ("input_tokens", "output_tokens", "cache_read_input_tokens",
                                               "cache_creation_input_tokens"), strict=True))


def _count(value) -> tuple[int | None, bool]:
    """(a token count or None, whether the value was invalid: negative or not a number)."""
    if value is None:
        return None, False
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None, True
    if value < 0 or value >= 2**62:
        return None, True
    return int(value), False


def usage_columns(usage) -> tuple[dict, int]:
    """The usage columns of one line's ``message.usage``, and its token total."""
    cols: dict = {c: None for c, _ in USAGE_FIELDS}
    cols.update(total_tokens=None, cache_write_5m_tokens=None, cache_write_1h_tokens=None, usage_invalid=0)
    if not isinstance(usage, dict):
        return cols, -1
    invalid = False
    total = 0
    seen = False
    for column, key in USAGE_FIELDS:
        n, bad = _count(usage.get(key))
        invalid |= bad
        cols[column] = n
        if n is not None:
            seen = True
            total += n
    creation = usage.get("cache_creation")
    written = cols["cache_write_tokens"]
    if isinstance(creation, dict) and written is not None:
        # The 1-hour part as given; the rest of cache_creation_input_tokens is 5-minute writes
        # (some backends write both parts as 0 beside a non-zero total: all 5-minute, the default).
        hour, bad = _count(creation.get("ephemeral_1h_input_tokens"))
        _five, bad5 = _count(creation.get("ephemeral_5m_input_tokens"))
        invalid |= bad or bad5
        hour = min(hour or 0, written)
        cols["cache_write_1h_tokens"] = hour
        cols["cache_write_5m_tokens"] = written - hour
    cols["total_tokens"] = total if seen else None
    cols["usage_invalid"] = int(invalid)
    return cols, total if seen else -1


# ---------------------------------------------------------------------------
# The parser


@dataclass
class _Line:
    offset: int
    index: int
    obj: dict
    raw: bytes
    session: str | None = None


@dataclass
class _Group:
    key: tuple
    lines: list = field(default_factory=list)


def _type(obj: dict) -> str | None:
    t = obj.get("type")
    if t is None and isinstance(obj.get("message"), dict):
        role = obj["message"].get("role")
        return role if role in ("user", "assistant") else None
    return t if isinstance(t, str) else None


def _without_content(obj: dict) -> dict:
    slim = dict(obj)
    message = obj.get("message")
    if isinstance(message, dict) and "content" in message:
        inner = dict(message)
        del inner["content"]
        slim["message"] = inner
    return slim


def _first_text(blocks: list) -> str | None:
    for b in blocks:
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
            return b["text"]
    return None


def _put(d: dict, key, value, limit: int) -> None:
    d.pop(key, None)
    d[key] = value
    while len(d) > limit:
        del d[next(iter(d))]


class ClaudeParser:
    """Incremental parser for one Claude Code file, with ``TranscriptParser``'s ``feed`` protocol.

    ``feed(data, final)`` takes bytes starting at a line boundary and returns the entries of every
    session in ``ChunkResult.batches``. It consumes up to the last line it is sure of: an assistant
    group at the end (which may still be streaming) and lines that came before the file's session was
    known are left unconsumed, read again with the next bytes; at the end of the file they are
    returned all the same (the next run reads them again, whole). ``ParseState.extra`` carries what a
    later run needs: each session's tip and values, recent line ids and tool names.
    """

    known_types = frozenset({"message", "user", "compaction"} | LINE_TYPES)

    def __init__(self, file_name: str, state: P.ParseState | None = None, context: FileContext | None = None):
        self.file_name = file_name
        self.state = state or P.ParseState()
        if context is None:
            m = _AGENT_FILE_RE.match(file_name)
            context = FileContext(file_name, agent=m.group(1) if m else None)
        self.ctx = context
        self.stem = file_name[:-6] if file_name.endswith(".jsonl") else file_name
        self.stem_is_uuid = is_uuid(self.stem)
        self._load(self.state.extra)

    # -- state carried across runs -------------------------------------------------------------

    def _load(self, x: dict) -> None:
        self.file_session: str | None = x.get("file")
        self.previous: str | None = x.get("prev")
        self.sess: dict = {k: dict(v) for k, v in (x.get("s") or {}).items()}
        self.ids: dict = dict(x.get("u") or {})
        self.sidechains: dict = dict(x.get("sc") or {})
        self.tools: dict = dict(x.get("t") or {})
        self.prompts: dict = dict(x.get("p") or {})
        self.linked: set = set(x.get("l") or [])  # "kind|key" of link rows written already

    def _dump(self) -> dict:
        out = {"file": self.file_session, "prev": self.previous, "s": self.sess, "u": self.ids,
               "sc": self.sidechains, "t": self.tools, "p": self.prompts, "l": sorted(self.linked)}
        return orjson.loads(orjson.dumps(out))  # a copy that shares nothing

    def sessions(self) -> dict:
        out = {}
        for sid, st in self.sess.items():
            values = {k: v for k, v in (st.get("v") or {}).items() if v is not None}
            out[sid] = SessionInfo(values, None)
        return out

    # -- feeding -------------------------------------------------------------------------------

    def feed(self, data: bytes, final: bool = False) -> P.ChunkResult:
        result = P.ChunkResult()
        self._out: dict[str, list] = {}
        self._rows: list[dict] = []
        self._orphans: list = []
        self._result = result
        self._group: _Group | None = None
        self._held: list[_Line] = []
        self._bad: list[int] = []  # offsets of complete lines that are not JSON objects
        start = 0
        end = len(data)
        index = self.state.next_line
        find = data.find
        while start < end:
            nl = find(b"\n", start)
            if nl < 0:
                break
            raw = data[start:nl]
            if raw[-1:] == b"\r":
                raw = raw[:-1]
            if raw.strip():
                self._take_raw(start, index, raw)
            index += 1
            start = nl + 1
        complete_end, complete_index = start, index
        # Where reading must resume: the first line not settled (a group that may grow, held lines).
        pending_at = self._unsettled()
        if final:
            snapshot = self._dump() if (pending_at is not None or start < end) else None
            tail = data[start:].strip()
            if tail:
                obj, raw = P.loads_line(data[start:].rstrip(b"\r\n"))
                if isinstance(obj, dict):
                    self._take(_Line(start, index, obj, raw))
                    if pending_at is None:
                        pending_at = (start, index)
                else:
                    result.pending_lines += 1
            self._flush_group()
            if self._held:
                self._release_held(force=True)
            if pending_at is not None:
                result.consumed, self.state.next_line = pending_at
            else:
                result.consumed, self.state.next_line = complete_end, complete_index
            extra = snapshot if (pending_at is not None and snapshot is not None) else self._dump()
        else:
            if pending_at is not None:
                result.consumed, self.state.next_line = pending_at
            else:
                result.consumed, self.state.next_line = complete_end, complete_index
            extra = self._dump()
        # A bad line is counted once: when reading has gone past it for good.
        result.bad_lines = sum(1 for offset in self._bad if offset < result.consumed)
        self.state.extra = extra
        self.state.session_id = extra.get("file") or self.state.session_id
        batches = [Batch(s, entries) for s, entries in self._out.items() if entries]
        rows = self._rows + self._orphans
        if rows:
            batches.append(Batch(None, [], [(LINKS, rows, ("server", "agent_id", "session_uuid", "kind",
                                                           "link_key"))]))
        result.batches = batches
        return result

    def _unsettled(self):
        """(offset, line index) of the first line not settled (fed again with the next bytes), or None."""
        firsts = []
        if self._group is not None:
            firsts.append(self._group.lines[0])
        if self._held:
            firsts.append(self._held[0])
        if not firsts:
            return None
        first = min(firsts, key=lambda line: line.offset)
        return first.offset, first.index

    def _take_raw(self, offset: int, index: int, raw: bytes) -> None:
        obj, raw = P.loads_line(raw)
        if not isinstance(obj, dict):
            self._bad.append(offset)
            return
        self._take(_Line(offset, index, obj, raw))

    # -- sessions ------------------------------------------------------------------------------

    def _session_of(self, line: _Line) -> str | None:
        """The session a line names, or None when it is the file's (a line without a sessionId, the
        compact summary opening a continued file)."""
        obj = line.obj
        sid = obj.get("sessionId")
        sid = sid if isinstance(sid, str) and sid else None
        if obj.get("isSidechain") is True or (self.ctx.agent is not None and obj.get("isSidechain") is not False):
            # a sidechain line; every line of an agent-<id>.jsonl is its sub-agent's
            base = sid or self.ctx.parent or (self.file_session.split(":")[0] if self.file_session else None)
            agent = obj.get("agentId")
            agent = agent if isinstance(agent, str) and agent else self.ctx.agent
            if base is None:
                return None
            if agent:
                return P.clamp_id(f"{base}:{agent}")
            return self._inline_sidechain(base, obj)
        if sid is None or obj.get("isCompactSummary") is True:
            return None
        return P.clamp_id(sid)

    def _inline_sidechain(self, base: str, obj: dict) -> str:
        """A 1.0.x sidechain line without an agentId: the session of the sidechain it continues, or a
        new one named by its first line."""
        ref = obj.get("parentUuid")
        if isinstance(ref, str) and _h8(ref) in self.sidechains:
            session = self.sidechains[_h8(ref)]
        else:
            uuid = obj.get("uuid") if isinstance(obj.get("uuid"), str) else ""
            session = P.clamp_id(f"{base}:sc-{uuid.replace('-', '')[:16]}")
        if isinstance(obj.get("uuid"), str):
            _put(self.sidechains, _h8(obj["uuid"]), session, IDS_LIMIT)
        return session

    def _tells(self, session: str | None) -> bool:
        """Whether a line of ``session`` tells the file's own session: for a ``<uuid>.jsonl`` the one
        of that id, for other names (``agent-<id>.jsonl``, ``chat.jsonl``) the first one named."""
        if session is None:
            return False
        return session == self.stem if self.stem_is_uuid else True

    def _take(self, line: _Line) -> None:
        session = self._session_of(line)
        if self._held:
            # Holding: every line waits (in order) until the file's session is known.
            self._held.append(line)
            if self.file_session is None and self._tells(session):
                self.file_session = session
                self._release_held()
            elif len(self._held) > HELD_LIMIT:
                self._release_held(force=True)
            return
        if self.file_session is None:
            if not self._tells(session):
                self._held.append(line)
                return
            self.file_session = session
        line.session = session or self.file_session
        self._route(line)

    def _release_held(self, force: bool = False) -> None:
        held, self._held = self._held, []
        if self.file_session is None and force:
            # The file never named its own session: the first one its lines name, else none at all
            # (a file of summary lines): its lines are kept as orphans.
            self.file_session = next((s for s in (self._session_of(line) for line in held) if s), None)
            if self.file_session is None:
                for line in held:
                    self._orphan(line)
                return
        for line in held:
            line.session = self._session_of(line) or self.file_session
            self._route(line)

    def _orphan(self, line: _Line) -> None:
        """A line of a file that names no session: kept in the links table (and listed among the
        read's entries, which tell a Claude Code file from another JSON-lines file)."""
        raw = line.raw.decode("utf-8", "replace")
        self._result.entries.append(P.Entry(f"orphan:{line.index}", None, _type(line.obj) or "line", line.index,
                                            line.obj, line.raw))
        self._orphans.append(self._link(self.file_session or "", "orphan", f"{line.index}:{_h8(raw)}", value=raw))

    def _state(self, session: str) -> dict:
        st = self.sess.get(session)
        if st is None:
            st = self.sess[session] = {"tip": None, "real": None, "side": [], "v": {}}
        return st

    # -- grouping assistant lines --------------------------------------------------------------

    def _route(self, line: _Line) -> None:
        obj = line.obj
        t = _type(obj)
        message = obj.get("message")
        if t == "assistant" and isinstance(message, dict):
            mid = message.get("id")
            if isinstance(mid, str) and mid:
                rid = obj.get("requestId")
                key = (line.session, mid, rid if isinstance(rid, str) else None)
                if self._group is not None and self._group.key == key:
                    self._group.lines.append(line)
                    return
                self._flush_group()
                self._group = _Group(key, [line])
                return
            self._flush_group()
            self._assistant([line])
            return
        self._flush_group()
        if t == "user" and isinstance(message, dict):
            self._user(line)
        else:
            self._entry(line, t)

    def _flush_group(self) -> None:
        group, self._group = self._group, None
        if group is not None:
            self._assistant(group.lines)

    # -- tree ----------------------------------------------------------------------------------

    def _parent(self, st: dict, obj: dict, message: bool = False) -> str | None:
        """A line's parent in the tree. Claude Code hangs side lines (hook attachments, system lines,
        progress) off the message they follow, beside the conversation's next line: whatever hangs
        off the last message, or off a side line after it, is threaded at the tip instead, so the
        active path runs through all of it. Lines without a uuid, or whose parent was never written,
        go at the tip too; a parent further back (a rewind) stays a branch, and so does a message
        with no parent after the session's first (a rewind to the start)."""
        ref = obj.get("parentUuid") or obj.get("logicalParentUuid")
        if isinstance(ref, str) and ref:
            known = self.ids.get(_h8(ref))
            if known is not None:
                pid = known or P.clamp_id(ref)
                return st["tip"] if pid == st["real"] or pid in st["side"] else pid
        elif message and st["real"] is not None and "parentUuid" in obj:
            return None
        return st["tip"]

    def _placed(self, st: dict, entry_id: str, uuids: list, real: bool) -> None:
        """``real``: a message (user, assistant, tool result); else a side line."""
        for uuid in uuids:
            if isinstance(uuid, str) and uuid:
                _put(self.ids, _h8(uuid), "" if P.clamp_id(uuid) == entry_id else entry_id, IDS_LIMIT)
        st["tip"] = entry_id
        if real:
            st["real"] = entry_id
            st["side"] = []
        else:
            st["side"] = (st["side"] + [entry_id])[-SIDE_LIMIT:]

    def _emit(self, session: str, entry: P.Entry) -> None:
        self._result.entries.append(entry)
        self._out.setdefault(session, []).append(entry)

    def _values(self, st: dict, obj: dict, session: str) -> None:
        v = st["v"]
        if v.get("started_at") is None:
            ts = P.format_timestamp(obj.get("timestamp"))
            if ts is not None:
                v["started_at"] = ts
        cwd = obj.get("cwd")
        if v.get("cwd") is None and isinstance(cwd, str) and cwd:
            v["cwd"] = R.cut_text(cwd, 512)
            v["project"] = R.cut_text(cwd, 255)
        if v.get("project") is None:
            project = decode_project(self.ctx.project)
            if project:
                v["project"] = project[:255]
        if ":" in session and v.get("parent_session_uuid") is None:
            v["parent_session_uuid"] = session.split(":", 1)[0][:64]
        version = obj.get("version")
        if isinstance(version, str) and version:
            v["agent_version"] = version[:64]  # the Claude Code that wrote its latest line
        t = obj.get("type")
        if t == "ai-title" and isinstance(obj.get("aiTitle"), str):
            v["title"] = R.cut_text(obj["aiTitle"], 512)
        elif t == "custom-title" and isinstance(obj.get("customTitle"), str):
            v["title"] = R.cut_text(obj["customTitle"], 512)

    def _note_previous(self, obj: dict) -> None:
        """A main line carrying another session's id (the compact summary opening a continued 1.0.x
        file, replayed history): the file's session continues that one."""
        sid = obj.get("sessionId")
        main = self.file_session
        if (self.previous is None and isinstance(sid, str) and sid and obj.get("isSidechain") is not True
                and main and ":" not in main and P.clamp_id(sid) != main):
            self.previous = P.clamp_id(sid)
            self._state(main)["v"]["previous_session_id"] = self.previous[:64]

    def _link(self, session: str, kind: str, key: str, call: str | None = None, value: str | None = None) -> dict:
        return {"server": None, "agent_id": None, "session_uuid": session[:64], "kind": kind,
                "link_key": key[:255], "call_id": call[:255] if call else None, "value": value}

    def _links_of_session(self, session: str, obj: dict) -> None:
        if ":" not in session:
            return
        src = obj.get("sourceToolAssistantUUID")
        if isinstance(src, str) and src and "src|" + session not in self.linked:
            self.linked.add("src|" + session)
            self._rows.append(self._link(session, "source_line", src))
        if self.ctx.run and "inrun|" + session not in self.linked:
            self.linked.add("inrun|" + session)
            self._rows.append(self._link(session, "in_run", self.ctx.run))

    # -- lines -> entries ----------------------------------------------------------------------

    def _common(self, line: _Line) -> tuple[str, dict]:
        session = line.session
        st = self._state(session)
        self._note_previous(line.obj)
        self._values(st, line.obj, session)
        self._links_of_session(session, line.obj)
        return session, st

    def _entry(self, line: _Line, t: str | None) -> None:
        session, st = self._common(line)
        obj = line.obj
        uuid = obj.get("uuid") if isinstance(obj.get("uuid"), str) and obj.get("uuid") else None
        entry_type = t or "line"
        custom = None
        if t == "system":
            subtype = obj.get("subtype")
            custom = subtype if isinstance(subtype, str) else R.text(obj.get("level"))
            if subtype == "compact_boundary":
                entry_type = "compaction"
        elif t == "attachment" and isinstance(obj.get("attachment"), dict):
            custom = R.text(obj["attachment"].get("type"))
        elif t == "queue-operation":
            custom = R.text(obj.get("operation"))
        elif t == "message":
            entry_type = "line:message"  # another kind's message line: never a message here
        entry_id = P.clamp_id(uuid) if uuid else P.clamp_id(f"{entry_type[:24]}:{line.index}:{_h8(line.raw.decode('utf-8', 'replace'))}")
        parent = self._parent(st, obj)
        entry = P.Entry(entry_id, parent, entry_type[:64], line.index, obj, line.raw)
        entry.row = {
            "entry_uuid": entry_id, "parent_uuid": parent, "entry_type": entry_type[:64],
            "custom_type": custom[:128] if custom else None, "text_preview": _entry_preview(obj),
            "timestamp": P.format_timestamp(obj.get("timestamp")), "seq": line.index,
            "raw_json": line.raw.decode("utf-8", "replace"),
        }
        entry.calls = []
        self._emit(session, entry)
        self._placed(st, entry_id, [uuid], real=False)
        self._line_links(session, obj)
        if t == "summary" and isinstance(obj.get("leafUuid"), str) and isinstance(obj.get("summary"), str):
            # A title pointer: the title of the conversation ending at leafUuid, when it is here.
            if _h8(obj["leafUuid"]) in self.ids and st["v"].get("title") is None:
                st["v"]["title"] = R.cut_text(obj["summary"], 512)

    def _line_links(self, session: str, obj: dict) -> None:
        """Facts that tie a sub-agent to the tool call that started it."""
        t = obj.get("type")
        if t == "progress":
            data = obj.get("data")
            tid = obj.get("parentToolUseID")
            if isinstance(data, dict) and data.get("type") == "agent_progress" and isinstance(tid, str):
                agent = data.get("agentId")
                if isinstance(agent, str) and agent and "agent|" + agent not in self.linked:
                    self.linked.add("agent|" + agent)
                    self._rows.append(self._link(session, "agent", agent, tid))
        elif t == "queue-operation" and obj.get("operation") == "enqueue" and isinstance(obj.get("content"), str):
            content = obj["content"]
            task = tool = None
            if content.lstrip().startswith("{"):
                try:
                    parsed = orjson.loads(content)
                except orjson.JSONDecodeError:
                    parsed = None
                if isinstance(parsed, dict):
                    task, tool = R.text(parsed.get("task_id")), R.text(parsed.get("tool_use_id"))
            if not (task and tool):
                m1, m2 = _TASK_ID_RE.search(content), _TOOL_USE_ID_RE.search(content)
                task, tool = (m1.group(1) if m1 else None), (m2.group(1) if m2 else None)
            if task and tool and "agent|" + task not in self.linked:
                self.linked.add("agent|" + task)
                self._rows.append(self._link(session, "agent", task, tool))

    def _user(self, line: _Line) -> None:
        session, st = self._common(line)
        obj = line.obj
        message = obj["message"]
        content = message.get("content")
        uuid = obj.get("uuid") if isinstance(obj.get("uuid"), str) and obj.get("uuid") else None
        line_id = P.clamp_id(uuid) if uuid else P.clamp_id(f"user:{line.index}:{_h8(line.raw.decode('utf-8', 'replace'))}")
        context = obj.get("isMeta") is True or obj.get("isCompactSummary") is True
        parts: list[dict] = []  # each: id, role, blocks, origin (for raw_json), extra columns
        if isinstance(content, str):
            parts.append({"id": line_id, "role": V.USER, "blocks": [{"type": "text", "text": content}],
                          "origin": {"id": line_id, "string": True}})
        elif isinstance(content, list):
            plain = [i for i, b in enumerate(content) if not (isinstance(b, dict) and b.get("type") == "tool_result")]
            if plain:
                parts.append({"id": line_id, "role": V.USER, "blocks": [to_block(content[i]) for i in plain],
                              "origin": {"id": line_id, "blocks": plain}, "at": plain[0]})
            for i, b in enumerate(content):
                if not (isinstance(b, dict) and b.get("type") == "tool_result"):
                    continue
                tid = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) and b.get("tool_use_id") else None
                rid = P.clamp_id(f"result:{tid}") if tid else P.clamp_id(f"{line_id}:{i}")
                inner = b.get("content")
                origin = {"id": rid, "index": i, "result": {k: v for k, v in b.items() if k != "content"}}
                if isinstance(inner, str):
                    blocks = [{"type": "text", "text": inner}]
                    origin["string"] = True
                elif isinstance(inner, list):
                    blocks = [to_block(x) for x in inner]
                else:
                    blocks = []
                    origin["absent" if "content" not in b else "value"] = True if "content" not in b else inner
                parts.append({"id": rid, "role": V.TOOL_RESULT, "blocks": blocks, "origin": origin, "at": i,
                              "tool_call_id": tid, "is_error": b.get("is_error") is True})
            parts.sort(key=lambda p: p.get("at", 0))
        if not parts:
            self._entry(line, "user")
            return
        if context:
            for p in parts:
                if p["role"] == V.USER:
                    p["role"] = V.SYSTEM  # injected context (isMeta, a compaction's summary): not typed by anyone
        parent = self._parent(st, obj, message=True)
        slim = _without_content(obj)
        # One message holding every block of the line as it was: raw_json is the line without its
        # content. Otherwise raw_json says which message took which blocks (docs/claude-code.md).
        trivial = (len(parts) == 1 and parts[0]["id"] == line_id and isinstance(content, list)
                   and parts[0]["origin"].get("blocks") == list(range(len(content))))
        ts = P.format_timestamp(obj.get("timestamp"))
        tur = obj.get("toolUseResult")
        for n, p in enumerate(parts):
            if n == 0:
                raw_obj = dict(slim)
                if not trivial:
                    raw_obj["_agentbase"] = {"parts": [q["origin"] for q in parts]}
            else:
                raw_obj = {"_agentbase": {"part_of": line_id}}
            result: dict = {}
            if p["role"] == V.TOOL_RESULT:
                tid = p["tool_call_id"]
                name = self.tools.get(tid) if tid else None
                result = {"tool_call_id": tid, "tool_name": name, "is_error": p["is_error"]}
                text = _first_text(p["blocks"])
                if text is not None and (name is None or name in SHELL_TOOLS):
                    m = _EXIT_RE.match(text)
                    if m:
                        result["exit_code"] = R.integer(int(m.group(1)))
                if tid and isinstance(tur, dict):
                    self._result_links(session, tid, tur)
            row = self._row(p["id"], parent, p["role"], p["blocks"], ts, line.index, raw_obj, **result)
            # Each part changes when its line does: the line is the raw of every part.
            entry = P.Entry(p["id"], parent, "message", line.index, obj, line.raw)
            entry.row = row
            entry.calls = []  # a user line's tool_use block (never seen) is content, no call
            self._emit(session, entry)
            parent = p["id"]
        self._placed(st, parts[-1]["id"], [uuid], real=True)
        if context is False and obj.get("isSidechain") is True and ":sc-" in session:
            self._sidechain_prompt(session, st, content)

    def _sidechain_prompt(self, session: str, st: dict, content) -> None:
        """A 1.0.x sidechain's first prompt: the Task call whose prompt it is."""
        if st["v"].get("parent_call_id") is not None:
            return
        text = content if isinstance(content, str) else _first_text([b for b in content if isinstance(b, dict)]) \
            if isinstance(content, list) else None
        if isinstance(text, str):
            call = self.prompts.get(_h16(text.strip()))
            if call:
                st["v"]["parent_call_id"] = call[:255]

    def _result_links(self, session: str, tid: str, tur: dict) -> None:
        agent = tur.get("agentId")
        if isinstance(agent, str) and agent and "agent|" + agent not in self.linked:
            self.linked.add("agent|" + agent)
            self._rows.append(self._link(session, "agent", agent, tid))
        run = tur.get("runId")
        if isinstance(run, str) and run and "run|" + run not in self.linked:
            self.linked.add("run|" + run)
            self._rows.append(self._link(session, "run", run, tid))

    def _assistant(self, lines: list[_Line]) -> None:
        first = lines[0]
        session, st = self._common(first)
        for extra in lines[1:]:
            self._values(st, extra.obj, session)
        obj = first.obj
        message = obj["message"]
        mid = message.get("id") if isinstance(message.get("id"), str) and message.get("id") else None
        uuid = obj.get("uuid") if isinstance(obj.get("uuid"), str) and obj.get("uuid") else None
        if mid:
            entry_id = P.clamp_id(mid)
        elif uuid:
            entry_id = P.clamp_id(uuid)
        else:
            entry_id = P.clamp_id(f"assistant:{first.index}:{_h8(first.raw.decode('utf-8', 'replace'))}")
        originals: list[list] = []
        strings: list[bool] = []
        for line in lines:
            content = line.obj["message"].get("content")
            if isinstance(content, str):
                originals.append([{"type": "text", "text": content}])
                strings.append(True)
            else:
                originals.append(list(content) if isinstance(content, list) else [])
                strings.append(False)
        merged = merge_blocks([[to_block(b) for b in blocks] for blocks in originals])
        where = {}
        for k, b in enumerate(merged):
            where.setdefault(_canon(from_block(b)), k)
        # How each line's blocks come back: an index into the merged content, or the block itself
        # (a cumulative snapshot's shorter copy).
        maps = [[where.get(_canon(b), {"block": b}) for b in blocks] for blocks in originals]
        absent = ["content" not in line.obj["message"] for line in lines]
        trivial = (len(lines) == 1 and not strings[0] and not absent[0] and maps[0] == list(range(len(merged))))
        raw_obj = _without_content(obj)
        if not trivial:
            info: dict = {"blocks": maps}
            if any(strings):
                info["string"] = strings
            if any(absent):
                info["absent"] = absent
            if len(lines) > 1:
                info["lines"] = [_without_content(line.obj) for line in lines[1:]]
            raw_obj["_agentbase"] = info
        # Usage: the line with the largest token total (a streamed message repeats it, growing).
        best, best_total = None, -1
        for line in lines:
            cols, total = usage_columns(line.obj["message"].get("usage"))
            if best is None or total >= best_total:
                best, best_total, best_line = cols, total, line
        model = stop = None
        api_error = False
        error_text = None
        for line in lines:
            m = line.obj["message"]
            if isinstance(m.get("model"), str) and m["model"]:
                model = m["model"]
            if isinstance(m.get("stop_reason"), str):
                stop = m["stop_reason"]
            if line.obj.get("isApiErrorMessage") is True:
                api_error = True
                error_text = error_text or R.text(line.obj.get("error")) or _first_text(merged)
        synthetic = model == "<synthetic>" or api_error
        cost = R.number(best_line.obj.get("costUSD"))
        if cost is None:
            costs = [R.number(line.obj.get("costUSD")) for line in lines]
            costs = [c for c in costs if c is not None]
            cost = max(costs) if costs else None
        ts = P.format_timestamp(obj.get("timestamp"))
        parent = self._parent(st, obj, message=True)
        call_key = None
        if not synthetic:
            rid = first.obj.get("requestId") if isinstance(first.obj.get("requestId"), str) else ""
            call_key = _h16(mid or f"line:{entry_id}") + _h16(rid or "")
        row = self._row(entry_id, parent, V.ASSISTANT, merged, ts, first.index, raw_obj, **best,
                        model=model or None, stop_reason=stop or None, is_synthetic=synthetic, is_error=api_error,
                        error_message=error_text if api_error else None, cost_usd=cost, call_key=call_key)
        calls = R.tool_call_rows(merged, ts, SHELL_TOOLS)
        for call in calls:
            call_id, name = call["call_id"], call["tool_name"]
            args = merged[call["block_index"]].get("arguments")
            if call_id:
                _put(self.tools, call_id, name, TOOLS_LIMIT)
                if name in SPAWNING_TOOLS:
                    holder = next((ln for ln, blocks in zip(lines, originals, strict=True) if any(
                        isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id") == call_id
                        for b in blocks)), first)
                    line_uuid = holder.obj.get("uuid")
                    if isinstance(line_uuid, str) and line_uuid and "line|" + line_uuid not in self.linked:
                        self.linked.add("line|" + line_uuid)
                        self._rows.append(self._link(session, "line", line_uuid, call_id))
                    if isinstance(args, dict) and isinstance(args.get("prompt"), str):
                        _put(self.prompts, _h16(args["prompt"].strip()), call_id, PROMPTS_LIMIT)
        entry = P.Entry(entry_id, parent, "message", first.index, obj, b"\n".join(line.raw for line in lines))
        entry.row = row
        entry.calls = calls
        self._emit(session, entry)
        self._placed(st, entry_id, [line.obj.get("uuid") for line in lines], real=True)

    @staticmethod
    def _row(entry_id: str, parent: str | None, role: str, blocks: list, ts: str | None, seq: int,
             raw_obj: dict, **fields) -> dict:
        """The ``messages`` row of one message (rows.message_row): ``role`` the vocabulary's; Claude
        Code's own word is the line's ``message.role`` (a tool result is a block of a user line)."""
        native = "assistant" if role == V.ASSISTANT else "user"
        return R.message_row(entry_id, role, blocks=blocks, native_role=native, parent=parent, timestamp=ts,
                             seq=seq, raw_json=R.dumps(raw_obj), **fields)


def _entry_preview(obj: dict) -> str | None:
    for key in ("summary", "aiTitle", "customTitle", "lastPrompt", "content", "mode", "permissionMode",
                "operation"):
        value = obj.get(key)
        if isinstance(value, str) and value:
            return R.preview(value)
    attachment = obj.get("attachment")
    if isinstance(attachment, dict):
        for key in ("content", "prompt", "filename", "type"):
            value = attachment.get(key)
            if isinstance(value, str) and value:
                return R.preview(value)
    return None


# ---------------------------------------------------------------------------
# Units


_LINK_KEY = ("server", "agent_id", "session_uuid", "kind", "link_key")


class TranscriptFile(Unit):
    """One Claude Code JSONL file (a session, a sub-agent's transcript, a continued session)."""

    prefetch_limit = PREFETCH_LIMIT

    def __init__(self, *args, context: FileContext | None = None, **kw):
        super().__init__(*args, **kw)
        self.context = context or FileContext(self.name)

    def read(self, checkpoint):
        stream = read_lines(self, checkpoint, partial(ClaudeParser, context=self.context))
        while True:
            try:
                batch = next(stream)
            except StopIteration as stop:
                return stop.value
            for _table, rows, _key in batch.rows:
                for row in rows:
                    row["server"], row["agent_id"] = self.server, self.agent_id
            yield batch


class LinkFile(Unit):
    """A small file that only says how sub-agents hang together, read whole: a workflow run's
    ``journal.jsonl`` (the agents it started) or an ``agent-<id>.meta.json`` (the agent's type).
    Applied by :meth:`ClaudeCode.finish_group` after the run's transcripts."""

    counted = False
    meta = True

    def __init__(self, *args, context: FileContext | None = None, **kw):
        super().__init__(*args, **kw)
        self.context = context or FileContext(self.name)

    def read(self, checkpoint):
        with self.open() as f:
            data = f.read()
        ctx = self.context
        rows = []

        def link(session, kind, key, value=None):
            rows.append({"server": self.server, "agent_id": self.agent_id, "session_uuid": (session or "")[:64],
                         "kind": kind, "link_key": key[:255], "call_id": None, "value": value})

        if self.name.endswith(META_SUFFIX):
            agent = self.name[len("agent-"):-len(META_SUFFIX)] if self.name.startswith("agent-") else None
            try:
                meta = orjson.loads(data) if data.strip() else None
            except orjson.JSONDecodeError:
                meta = None
            if agent and ctx.parent and isinstance(meta, dict) and isinstance(meta.get("agentType"), str):
                link(P.clamp_id(f"{ctx.parent}:{agent}"), "meta", agent, meta["agentType"][:255])
        else:  # journal.jsonl: {type: started|result, key, agentId, result?}
            run = ctx.run or self.fs.basename(self.fs.dirname(self.path))
            seen = set()
            for raw in data.split(b"\n"):
                if not raw.strip():
                    continue
                obj, _ = P.loads_line(raw)
                agent = obj.get("agentId") if isinstance(obj, dict) else None
                if isinstance(agent, str) and agent and agent not in seen:
                    seen.add(agent)
                    link(ctx.parent, "journal", agent, run)
        if rows:
            yield Batch(None, rows=[(LINKS, rows, _LINK_KEY)])
        return Outcome(Checkpoint(status="success", token=self.token, offset=self.size))


# ---------------------------------------------------------------------------
# The kind


def _config_dir_like(fs: FileSystem, path: str) -> bool:
    """A folder that is a Claude config dir by its name or what is in it (an empty ``projects/``
    there is still Claude Code's)."""
    name = fs.basename(path)
    if name in (".claude", "claude") or name.startswith(".claude"):
        return True
    return any(fs.is_file(fs.join(path, f)) for f in ("history.jsonl", ".claude.json", "settings.json"))


class ClaudeCode(Source):
    kind = KIND
    order = 15  # after pi's --<cwd>-- folders, before OpenClaw's looser "a folder of transcripts"
    records_costs = False  # priced from the table; an older file's costUSD is kept as recorded
    shell_tools = SHELL_TOOLS
    tables = {LINKS: [
        ("id", "pk"),
        ("server", "str:32"),
        ("agent_id", "str:64"),
        ("session_uuid", "str:64"),  # the session the fact was read in
        ("kind", "str:16"),  # agent, run, line (a parent's calls); in_run, source_line, meta (a sub-agent's);
        # journal (a workflow run's agents); orphan (a line of a file that names no session)
        ("link_key", "str:255"),  # agent id, run id, line uuid
        ("call_id", "str:255"),  # the tool_use id that started the agent / run
        ("value", "text"),  # agentType, run id, an orphan line
    ]}
    unique = {LINKS: [_LINK_KEY]}
    indexes = {LINKS: {"idx_claude_code_links_group": ("server", "agent_id", "kind")}}
    not_this = "not a Claude Code transcript: no line of its format"

    def session_type(self, name: str) -> str:
        if name == JOURNAL or name.endswith(META_SUFFIX):
            return "index"
        return "subagent" if _AGENT_FILE_RE.match(name) else "normal"

    # -- where it lives ------------------------------------------------------------------------

    def candidates(self) -> list[str]:
        out = list(CONFIG_DIRS)
        for part in re.split(r"[,%s]" % re.escape(os.pathsep), os.environ.get(CONFIG_ENV, "")):
            part = part.strip()
            if part and part not in out:
                out.append(part)
        return out

    def default_paths(self, fs: FileSystem) -> list[str]:
        """Every candidate config dir that exists (not only the first); over SSH only the home's (the
        environment variable is this machine's)."""
        out, seen = [], set()
        for path in (CONFIG_DIRS if fs.remote else self.candidates()):
            full = fs.abspath(path)
            if full in seen:
                continue
            try:
                found = fs.stat(full)
            except OSError:
                found = None
            if found is not None and found[0] == "dir":
                seen.add(full)
                out.append(path)
        return out

    # -- discovery -----------------------------------------------------------------------------

    def claims_file(self, name: str, head: bytes) -> bool:
        return name.endswith(".jsonl") and name != JOURNAL and looks_like_claude(head) is True

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope, out: Discovery):
        return TranscriptFile(self, scope.server, scope.agent or AGENT, path, fs.basename(path), size, mtime_ns,
                              fs=fs, context=FileContext.of(fs, path))

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        agent = scope.agent or AGENT
        wanted = scope.wants(agent)
        name = fs.basename(path)
        roots = [path] if name == PROJECTS else [fs.join(path, PROJECTS), fs.join(path, ".claude", PROJECTS),
                                                   fs.join(path, ".config", "claude", PROJECTS)]
        recognised = False
        for root in roots:  # a folder may hold both .claude/ and .config/claude/: each is read
            if not fs.is_dir(root):
                continue
            config = fs.dirname(root)
            trusted = _config_dir_like(fs, config)
            found = trusted
            for sub in fs.subdirs(root):
                if sub.name in SKIP_DIRS or sub.name.startswith("."):
                    continue
                if self._tree(fs, sub.path, scope.server, agent, out, sub.name, trusted, loose=False, list_units=wanted):
                    found = True
            if self._tree(fs, root, scope.server, agent, out, None, trusted, loose=True, depth=0, list_units=wanted):
                found = True
            recognised |= found
        if recognised:
            return True
        # A project folder, or a folder inside one (a session's subagents/, a workflow run, sessions/).
        trusted = fs.basename(fs.dirname(path)) == PROJECTS
        return self._tree(fs, path, scope.server, agent, out, None, trusted=False, loose=not trusted,
                          list_units=wanted)

    def _tree(self, fs: FileSystem, folder: str, server: str, agent: str, out: Discovery, project: str | None,
              trusted: bool, loose: bool, depth: int = MAX_DEPTH, list_units: bool = True) -> bool:
        """List the Claude Code files at and under ``folder`` (a project folder, or part of one);
        True when it holds some. ``loose``: a folder outside ``projects/``, only its Claude-shaped
        subfolders read (``sessions/``, ``subagents/``, workflow runs, ``<sessionId>/``).
        ``trusted``: no need to sniff (a config dir's ``projects/``)."""
        files: list = []  # (depth, listed entry)
        self._walk(fs, folder, files, 0, depth, loose, out)
        transcripts = [e for d, e in sorted(files, key=lambda x: (x[0], x[1].name))
                       if e.name.endswith(".jsonl") and e.name != JOURNAL
                       and not out.has(server, e.path)]  # listed, or kept away, by another kind
        if not transcripts:
            return False
        if loose:
            # A folder outside projects/ may mix kinds: each file is sniffed, and only Claude Code's
            # (and empty ones beside them) are taken.
            verdicts = {e.path: self._sniff(fs, e) for e in transcripts}
            if True not in verdicts.values():
                return False
            files = [(d, e) for d, e in files if verdicts.get(e.path, True) is not False]
        elif not trusted:
            # A project folder: its first files tell.
            verdict = None
            for entry in transcripts[:SNIFF_FILES]:
                verdict = self._sniff(fs, entry)
                if verdict is not None:
                    break
            if verdict is not True:
                return False
        if not list_units:
            return True
        for _d, entry in files:
            try:
                size, mtime = entry.size, entry.mtime_ns
            except OSError as exc:
                out.errors.append(f"cannot stat {entry.path}: {exc.strerror or exc}")
                continue
            context = FileContext.of(fs, entry.path, project)
            cls = TranscriptFile if entry.name.endswith(".jsonl") and entry.name != JOURNAL else LinkFile
            out.add(cls(self, server, agent, entry.path, entry.name, size, mtime, fs=fs, context=context))
        return True

    def _sniff(self, fs: FileSystem, entry) -> bool | None:
        try:
            with fs.open(entry.path, entry.size) as f:
                return looks_like_claude(f.read(DISCOVERY_SNIFF))
        except OSError:
            return None

    def _walk(self, fs: FileSystem, folder: str, files: list, depth: int, limit: int, loose: bool,
              out: Discovery) -> None:
        try:
            entries = fs.listdir(folder) or []
        except OSError as exc:
            where = "" if not fs.remote else f"{fs.label}: "
            out.errors.append(f"{where}cannot list {folder}: {exc.strerror or exc}")
            return
        for entry in sorted(entries, key=lambda e: e.name):
            name = entry.name
            if name.startswith("."):
                continue
            if entry.is_dir():
                if depth >= limit or name in SKIP_DIRS:
                    continue
                if loose and not (name in ("sessions", "subagents", "workflows") or is_uuid(name)
                                  or name.startswith("wf_") or fs.basename(folder) in ("workflows", "subagents")):
                    continue
                self._walk(fs, entry.path, files, depth + 1, limit, loose, out)
            elif name.endswith(".jsonl") or (name.endswith(META_SUFFIX) and name.startswith("agent-")):
                try:
                    if not entry.is_file():
                        continue
                except OSError:
                    continue
                files.append((depth, entry))

    # -- after the run -------------------------------------------------------------------------

    def finish_group(self, store, server: str, agent_id: str, metadata: dict) -> None:
        """What needs several files: each sub-agent's spawning tool call and agent type, the
        continuation chain (``next_session_id``), and model calls replayed in another session
        (a continued session, a sub-agent's copy of its parent's context) counted once."""
        sessions = store.query(
            "SELECT id, session_uuid, parent_session_uuid, parent_call_id, previous_session_id, next_session_id, "
            "session_type, reason, started_at FROM sessions WHERE server = ? AND agent_id = ? AND source = ?",
            (server, agent_id, KIND))
        if not sessions:
            return
        links: dict = {}
        for r in store.query(f"SELECT session_uuid, kind, link_key, call_id, value FROM {LINKS} "
                             "WHERE server = ? AND agent_id = ? AND kind <> 'orphan'", (server, agent_id)):
            links.setdefault(r["kind"], {}).setdefault(r["session_uuid"], {})[r["link_key"]] = (r["call_id"], r["value"])

        def fact(kind, session, key):
            return links.get(kind, {}).get(session, {}).get(key)

        def only(kind, session):
            found = links.get(kind, {}).get(session)
            return next(iter(found)) if found else None

        journal_any: dict = {}
        for facts in links.get("journal", {}).values():
            for key, (_call, value) in facts.items():
                journal_any.setdefault(key, value)
        following: dict = {}
        for s in sessions:
            if s["previous_session_id"]:
                following.setdefault(s["previous_session_id"], []).append((s["started_at"] or "", s["session_uuid"]))
        for s in sessions:
            values: dict = {}
            uuid, parent = s["session_uuid"], s["parent_session_uuid"]
            if parent and ":" in uuid:
                agent = uuid.split(":", 1)[1]
                call = None
                hit = fact("agent", parent, agent)
                if hit:
                    call = hit[0]
                if call is None:
                    run = only("in_run", uuid)
                    if run is None:
                        j = fact("journal", parent, agent) or fact("journal", "", agent)
                        run = j[1] if j else journal_any.get(agent)
                    hit = fact("run", parent, run) if run else None
                    call = hit[0] if hit else None
                if call is None:
                    line = only("source_line", uuid)
                    hit = fact("line", parent, line) if line else None
                    call = hit[0] if hit else None
                if call and call != s["parent_call_id"]:
                    values["parent_call_id"] = call
                meta = fact("meta", uuid, agent)
                if meta and meta[1] != s["reason"]:
                    values["reason"] = meta[1]
                if s["session_type"] != "subagent":
                    values["session_type"] = "subagent"
            after = sorted(following.get(uuid, []))
            want = after[-1][1] if after else None
            if want != s["next_session_id"]:
                values["next_session_id"] = want
            if values:
                store.update("sessions", s["id"], values)
        self._count_replays_once(store, server, agent_id, sessions)

    def _count_replays_once(self, store, server: str, agent_id: str, sessions) -> None:
        """A model call in several sessions of the group is counted once: the same call_key
        (message.id and requestId) in a main session and a continued one, or in a sub-agent and
        its parent; and a sub-agent's copy of a message its parent session has (same message.id,
        another requestId: Claude Code re-logs the parent's context) is not counted, as ccusage
        drops it. Which copy counts: a main session's before a sub-agent's, then the earliest."""
        rows = store.query(
            "SELECT m.id, m.session_id, m.call_key, m.usage_counted, m.timestamp, m.message_uuid FROM messages m "
            "WHERE m.server = ? AND m.agent_id = ? AND m.source = ? AND m.call_key IS NOT NULL "
            "AND substr(m.call_key, 1, 16) IN (SELECT substr(call_key, 1, 16) FROM messages "
            "WHERE server = ? AND agent_id = ? AND source = ? AND call_key IS NOT NULL "
            "GROUP BY substr(call_key, 1, 16) HAVING COUNT(DISTINCT session_id) > 1)",
            (server, agent_id, KIND, server, agent_id, KIND))
        if not rows:
            return
        info = {s["id"]: s for s in sessions}
        groups: dict = {}
        for r in rows:
            groups.setdefault(r["call_key"][:16], []).append(r)
        changes = []
        touched = set()
        for members in groups.values():
            def rank(r):
                s = info.get(r["session_id"])
                sub = 1 if s is not None and s["parent_session_uuid"] else 0
                return (sub, r["timestamp"] or "", (s["started_at"] if s else None) or "",
                        s["session_uuid"] if s else "", r["message_uuid"])
            members.sort(key=rank)
            main_sessions = {r["session_id"] for r in members
                             if not (info.get(r["session_id"]) and info[r["session_id"]]["parent_session_uuid"])}
            counted_keys = set()
            for r in members:
                s = info.get(r["session_id"])
                sub = s is not None and bool(s["parent_session_uuid"])
                keep = r["call_key"] not in counted_keys and not (sub and main_sessions)
                if keep:
                    counted_keys.add(r["call_key"])
                want = 1 if keep else 0
                if want != r["usage_counted"]:
                    changes.append((want, r["id"]))
                    touched.add(r["session_id"])
        if not changes:
            return
        store.executemany("UPDATE messages SET usage_counted = ? WHERE id = ?", changes)
        store.touch(touched)
        for session_id in sorted(touched):
            totals = store.tuples(f"SELECT {COUNTED_USAGE} FROM messages WHERE session_id = ?", (session_id,))[0]
            store.update("sessions", session_id, dict(zip(USAGE_TOTALS, totals)))

    def extra_stats(self, store) -> dict:
        rows = store.query("SELECT COUNT(*) FROM sessions WHERE source = ? AND parent_session_uuid IS NOT NULL",
                           (KIND,))
        return {"subagent_sessions": int(rows[0][0] or 0)} if rows else {}


SOURCE = ClaudeCode()
