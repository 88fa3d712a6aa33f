"""Aider: ``.aider.chat.history.md`` in a repository's root, a markdown log that only grows: each run of
aider appends ``# aider chat started at <local time>`` and what follows (docs/aider.md says what is
imported and how).

A PATH may be a repository root holding the file, a folder of such repositories (each subfolder's root
is looked at: "a folder of projects"), or the file itself. The agent is ``aider`` (``--agent``
overrides); a session is one run.

What the lines are (Aider writes them; one kind of line at a time, blank lines between):

- ``# aider chat started at YYYY-MM-DD HH:MM:SS``: a run starts (the only time in the file);
- ``#### <text>``: a line of what the person typed (a multi-line prompt is consecutive ``####`` lines;
  ``/command`` lines are commands typed);
- ``> <text>`` (or a bare ``>``): Aider's own output: the run's header (version, ``Model: ... with
  <format> edit format``), ``Tokens: 3.2k sent, 222 received. Cost: $0.01 message, $0.05 session.``
  after each model reply, ``Applied edit to <file>``, questions, warnings, commits;
- any other line: the model's reply (markdown), with its edit blocks (``<<<<<<< SEARCH`` ...
  ``=======`` ... ``>>>>>>> REPLACE`` after the file's name; in the ``whole`` format a fenced file after
  its name; in ``udiff`` a fenced ``diff``), each read as a call of the ``edit`` tool.

The file is read incrementally (``sources/reader.py``'s ``read_lines``): the parser consumes what is
settled, and leaves the last block (a reply and the output after it, which may still be written) to
be read again with what follows it; entry ids are line indexes, so a block read twice is the same
entries.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone as dt_timezone
from functools import partial
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from .. import parser as P
from .. import rows as R
from .. import vocabulary as V
from ..units import Batch, SessionInfo, Unit
from .base import Discovery, Scope, Source
from .fs import FileSystem
from .reader import read_lines

KIND = "aider"
AGENT = "aider"
HISTORY = ".aider.chat.history.md"
EDIT_TOOL = "edit"
PREFETCH_LIMIT = 8 * 1024 * 1024
SKIP_DIRS = frozenset({"node_modules", ".git", "__pycache__", ".venv", "venv"})
CONTINUATION_LIMIT = 5000  # lines an output message may run on for
PENDING_LIMIT = 256  # edit calls remembered across runs while they wait for their "Applied edit"

_RUN_RE = re.compile(r"^# aider chat started at (\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})\s*$")
_VERSION_RE = re.compile(r"^Aider (v\d[\w.+-]*)")
_MODEL_RE = re.compile(r"^(?:Main model|Model): (\S+)(?: with ([\w-]+) edit format)?")
_N = r"(\d+(?:\.\d+)?[kKmM]?)"
_TOKENS_RE = re.compile(
    rf"^Tokens: {_N} sent(?:, {_N} cache write)?(?:, {_N} cache hit)?, {_N} received\."
    r"(?: Cost: \$(\d+(?:\.\d+)?) message, \$(\d+(?:\.\d+)?) session\.)?")
_APPLIED_RE = re.compile(r"^Applied edit to (.+?)\s*$")
_SEARCH_RE = re.compile(r"^<{5,9} SEARCH\s*$")
_DIVIDER_RE = re.compile(r"^={5,9}\s*$")
_REPLACE_RE = re.compile(r"^>{5,9} REPLACE\s*$")
_FENCE_RE = re.compile(r"^(`{3,}|~{3,})")


def _h8(value: str) -> str:
    return P.short_hash(value.encode("utf-8", "surrogatepass"))[:8]


def tokens(text: str | None) -> int | None:
    """Aider's rounded count (``222``, ``3.2k``, ``12k``, ``1.1M``) as a number of tokens."""
    if not text:
        return None
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1].lower(), 1)
    number = text[:-1] if scale != 1 else text
    try:
        return int(round(float(number) * scale))
    except ValueError:
        return None


def local_time(text: str, zone: str | None) -> str | None:
    """A run's start (local time, no zone) as UTC text: in ``zone`` (the server's), else this machine's."""
    try:
        dt = datetime.fromisoformat(text.replace(" ", "T"))
    except ValueError:
        return None
    tz = None
    if zone:
        try:
            tz = ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            tz = None
    try:
        dt = dt.replace(tzinfo=tz) if tz is not None else dt.astimezone()
        dt = dt.astimezone(dt_timezone.utc)
    except (OverflowError, ValueError, OSError):
        return None
    if not 1000 <= dt.year <= 9999:
        return None
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{dt.microsecond // 1000:03d}"


def line_kind(line: str, strict: bool = True) -> str:
    """``run``, ``prompt``, ``output``, ``blank`` or ``text`` (a line of a reply).

    ``strict``: a prompt line ends with the two spaces Aider writes after it (a reply's own ``####``
    heading does not); False for a file whose trailing spaces were trimmed."""
    if not line.strip():
        return "blank"
    if line.startswith("####") and (len(line) == 4 or line[4] == " ") and (not strict or line.endswith("  ")
                                                                           or not line[4:].strip()):
        return "prompt"
    if line.startswith(">") and (len(line) == 1 or line[1] in " \t"):
        return "output"
    if line.startswith("# aider chat started at "):
        return "run"
    return "text"


def _clean_path(line: str) -> str:
    return line.strip().strip("`*").strip().rstrip(":").strip()


def whole_file_name(line: str) -> str:
    """The file a fenced block is, in the ``whole`` edit format: the line just before its fence, cleaned
    as Aider cleans it (``*``, a trailing ``:``, backticks and leading ``#`` taken off), so it is the name
    Aider's "Applied edit to" line gives; empty when there is none."""
    name = line.strip().strip("*").rstrip(":").strip("`").lstrip("#").strip()
    return name if len(name) <= 250 else ""


def _looks_like_path(line: str) -> bool:
    s = _clean_path(line)
    return bool(s) and len(s) <= 1024 and " " not in s and ("." in s or "/" in s or "\\" in s)


_THINK_OPEN = ("<think>", "<thinking>", "► **THINKING**")
_THINK_CLOSE = ("</think>", "</thinking>", "► **ANSWER**")


def thinking_end(lines: list[str]) -> int:
    """Where a reply's leading reasoning ends (the line after its closing tag), 0 when it has none:
    ``<think>`` ... ``</think>`` as a model writes it, or Aider's ``► **THINKING**`` ... ``► **ANSWER**``."""
    first = next((k for k, t in enumerate(lines) if t.strip()), None)
    if first is None or lines[first].strip() not in _THINK_OPEN:
        return 0
    close = _THINK_CLOSE[_THINK_OPEN.index(lines[first].strip())]
    return next((k + 1 for k in range(first + 1, len(lines)) if lines[k].strip() == close), 0)


def edit_blocks(lines: list[str], edit_format: str | None) -> list[tuple[int, int, dict]]:
    """The edit blocks of a reply: (first line, line after the last, arguments), in order.

    SEARCH/REPLACE blocks in every format (the file's name is the line before the block, or before its
    opening fence); in the ``whole`` format a fenced block after a line naming a file; in ``udiff`` a
    fenced block holding ``--- `` and ``+++ `` lines. An unclosed block is text."""
    out = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if _SEARCH_RE.match(line):
            j = i + 1
            search, replace, k = [], [], None
            while j < n and not _DIVIDER_RE.match(lines[j]):
                search.append(lines[j])
                j += 1
            if j < n:
                k = j + 1
                while k < n and not _REPLACE_RE.match(lines[k]):
                    replace.append(lines[k])
                    k += 1
            if j >= n or k is None or k >= n:
                i += 1
                continue
            start, path = i, None
            p = i - 1
            while p >= 0 and not lines[p].strip():
                p -= 1
            if p >= 0 and _FENCE_RE.match(lines[p].strip()):
                start = p
                q = p - 1
                while q >= 0 and not lines[q].strip():
                    q -= 1
                if q >= 0 and _looks_like_path(lines[q]):
                    path, start = _clean_path(lines[q]), q
            elif p >= 0 and _looks_like_path(lines[p]):
                path, start = _clean_path(lines[p]), p
                if p > 0 and _FENCE_RE.match(lines[p - 1].strip()):
                    start = p - 1  # diff-fenced: the fence, the name, then the block
            end = k + 1
            if end < n and _FENCE_RE.match(lines[end].strip()) and lines[end].strip().strip("`~") == "":
                end += 1
            out.append((start, end, {"path": path, "search": "\n".join(search), "replace": "\n".join(replace)}))
            i = end
            continue
        fence = _FENCE_RE.match(line.strip())
        if fence and edit_format in ("whole", "udiff", "udiff-simple"):
            close = next((k for k in range(i + 1, n) if lines[k].strip() == fence.group(1)), None)
            if close is None:
                i += 1
                continue
            body = lines[i + 1:close]
            if edit_format == "whole":
                name = whole_file_name(lines[i - 1]) if i > 0 else ""
                if name:
                    out.append((i - 1, close + 1, {"path": name, "content": "\n".join(body)}))
                    i = close + 1
                    continue
            elif any(b.startswith("--- ") for b in body) and any(b.startswith("+++ ") for b in body):
                plus = next(b for b in body if b.startswith("+++ "))
                out.append((i, close + 1, {"path": _clean_path(plus[4:]), "diff": "\n".join(body)}))
                i = close + 1
                continue
            i = close + 1
            continue
        i += 1
    return out


# ---------------------------------------------------------------------------
# The parser (reader.read_lines's feed protocol)


class AiderParser:
    """Incremental parser of one ``.aider.chat.history.md``.

    ``feed(data, final)`` takes bytes starting at a line boundary; lines are grouped into blocks (a
    run's start, a prompt, a reply, Aider's output). Every block but the last is settled and consumed;
    the last (with the reply before it, when it is Aider's output after a reply: its usage and results)
    may still grow, so it is left to be fed again. With ``final`` it is parsed all the same and its
    entries returned, but the state carried to the next run is the state before it, and the checkpoint
    stays at its first line: the next run reads it again, whole (same ids, merged by the writer).
    """

    known_types = frozenset({"run"})  # a file is Aider's when a run starts in it

    def __init__(self, file_name: str, state: P.ParseState | None = None, folder: str = "",
                 zone: str | None = None):
        self.file_name = file_name
        self.state = state or P.ParseState()
        self.folder = folder
        self.zone = zone
        self.tag = _h8(folder or file_name)
        self._load(self.state.extra)

    def _load(self, x: dict) -> None:
        self.sid: str | None = x.get("sid")
        self.parent: str | None = x.get("parent")
        self.model: str | None = x.get("model")
        self.format: str | None = x.get("format")
        self.started: str | None = x.get("started")
        self.pending: list = [list(p) for p in x.get("pending") or []]  # [call id, path]
        self.values: dict = {k: dict(v) for k, v in (x.get("values") or {}).items()}
        self.strict: bool | None = x.get("strict")

    def _dump(self) -> dict:
        out = {"sid": self.sid, "parent": self.parent, "model": self.model, "format": self.format,
               "started": self.started, "pending": self.pending[-PENDING_LIMIT:], "values": self.values,
               "strict": self.strict}
        return orjson.loads(orjson.dumps(out))

    def sessions(self) -> dict:
        return {sid: SessionInfo({k: v for k, v in v.items() if v is not None}, None)
                for sid, v in self.values.items()}

    # -- feeding ---------------------------------------------------------------------------------

    def feed(self, data: bytes, final: bool = False) -> P.ChunkResult:
        result = P.ChunkResult()
        lines: list[tuple[int, int, str, bytes]] = []  # (offset, index, text, raw)
        start, end = 0, len(data)
        index = self.state.next_line
        while start < end:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            raw = data[start:nl]
            lines.append((start, index, raw.decode("utf-8", "replace").rstrip("\r"), raw))
            index += 1
            start = nl + 1
        complete_end, complete_index = start, index
        if final and start < end:
            raw = data[start:]
            lines.append((start, index, raw.decode("utf-8", "replace").rstrip("\r"), raw))
            index += 1
        if self.strict is None:
            # The file's first "####" line says whether its prompt lines keep Aider's two trailing spaces.
            first = next((t for _o, _i, t, _r in lines if line_kind(t, False) == "prompt"), None)
            if first is not None:
                self.strict = first.endswith("  ")
        blocks, open_block = self._blocks(lines, final, self.strict is not False)
        if open_block is not None:
            blocks = blocks[:open_block + 1]  # what follows it is fed again, with it
        settled = len(blocks) - 1 if blocks else 0
        if blocks and blocks[-1][0] == "output" and settled > 0 and blocks[settled - 1][0] == "text":
            settled -= 1
        self._out: dict[str, list] = {}
        self._reply = None
        for block in blocks[:settled]:
            self._take(block)
        self._flush()
        if settled < len(blocks):
            resume = blocks[settled][1][0]  # (offset, index, ...) of the first unsettled line
            if final:
                keep = self._dump()
                for block in blocks[settled:]:
                    self._take(block)
                self._flush()
                values = self.values
                self._load(keep)
                self.values = values  # (what the tail says of its sessions is said again when it is re-read)
            result.consumed, self.state.next_line = resume[0], resume[1]
        else:
            result.consumed, self.state.next_line = complete_end, complete_index
        self.state.extra = self._dump()
        self.state.session_id = self.sid
        result.batches = [Batch(s, entries) for s, entries in self._out.items() if entries]
        result.entries = [e for b in result.batches for e in b.entries]
        return result

    @staticmethod
    def _blocks(lines: list, final: bool, strict: bool) -> tuple[list[tuple[str, list]], int | None]:
        """Consecutive lines of one kind (blank lines go with the block before them; a reply keeps them),
        and the index of the first block that cannot be told yet (an output line whose end is not in
        ``lines``), None when all can.

        Aider writes a message of several lines (an error that quotes the failed edit block) with ``> ``
        before its first line only, and two spaces after its last: the lines up to that one are output
        too, if they reach it before a prompt, a run or another output line."""
        kinds = [line_kind(t, strict) for _o, _i, t, _r in lines]
        open_line = None
        i = 0
        while i < len(kinds):
            if kinds[i] == "output" and not lines[i][2].endswith("  "):
                j = i + 1
                while j < len(kinds) and j - i <= CONTINUATION_LIMIT and kinds[j] in ("text", "blank") \
                        and not lines[j][2].endswith("  "):
                    j += 1
                if j < len(kinds) and kinds[j] in ("text", "blank") and lines[j][2].endswith("  "):
                    for k in range(i + 1, j + 1):
                        kinds[k] = "output"
                    i = j + 1
                    continue
                if j >= len(kinds) and not final and open_line is None:
                    open_line = i  # its end may come with the next bytes
            i += 1
        blocks: list[tuple[str, list]] = []
        open_block = None
        after_blank = False
        for n, (item, kind) in enumerate(zip(lines, kinds)):
            if kind == "blank":
                if blocks:
                    blocks[-1][1].append(item)
                after_blank = True
                continue
            # a prompt is one input: Aider writes a blank line before each
            if kind == "run" or not blocks or blocks[-1][0] != kind or (kind == "prompt" and after_blank):
                blocks.append((kind, [item]))
            else:
                blocks[-1][1].append(item)
            after_blank = False
            if n == open_line:
                open_block = len(blocks) - 1
        return blocks, open_block

    # -- blocks -> entries -------------------------------------------------------------------------

    def _flush(self) -> None:
        reply = self._reply
        if reply is not None:
            self._reply = None
            self._assistant(reply, None)

    def _emit(self, entry: P.Entry) -> None:
        self._out.setdefault(self.sid, []).append(entry)
        self.parent = entry.entry_id
        self.state.last_entry_id = entry.entry_id

    def _ensure_session(self, first_index: int) -> None:
        if self.sid is None:  # lines before the first run's start
            self.sid = P.clamp_id(f"{self.tag}-L{first_index}")
            self.values[self.sid] = {"cwd": self.folder or None, "project": self._project(), "times_approximate": 1}

    def _project(self) -> str | None:
        base = self.folder.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] if self.folder else ""
        return base[:255] or None

    def _take(self, block: tuple[str, list]) -> None:
        kind, items = block
        reply = self._reply
        if reply is not None and kind != "output":
            self._reply = None
            self._assistant(reply, None)
        if kind == "run":
            self._run(items)
        elif kind == "prompt":
            self._ensure_session(items[0][1])
            self._prompt(items)
        elif kind == "text":
            self._ensure_session(items[0][1])
            self._reply = items
        else:
            self._ensure_session(items[0][1])
            if reply is not None:
                self._reply = None
                self._assistant(reply, items)
            self._output(items)

    def _run(self, items: list) -> None:
        offset, index, text, raw = items[0]
        m = _RUN_RE.match(text)
        local = m.group(1) if m else None
        started = local_time(local, self.zone) if local else None
        stamp = re.sub(r"[^0-9]", "", local)[:14] if local else "x"
        self.sid = P.clamp_id(f"{stamp[:8]}T{stamp[8:]}-{self.tag}-{index}" if local else f"{self.tag}-{index}")
        self.parent = None
        self.model = self.format = None
        self.started = started
        self.pending = []
        self.values[self.sid] = {"started_at": started, "cwd": self.folder or None, "project": self._project(),
                                 "times_approximate": 1}
        eid = f"run:{index}"
        body = "\n".join(t for _o, _i, t, _r in items)
        row = {"entry_uuid": eid, "parent_uuid": None, "entry_type": "run", "custom_type": None,
               "text_preview": R.preview(text), "timestamp": started, "seq": index, "raw_json": R.dumps(
                   {"line": index, "text": body})}
        self._emit(P.Entry(eid, None, "run", index, {}, self._raw(items), row=row))

    @staticmethod
    def _raw(items: list) -> bytes:
        """A block's bytes without the blank lines after it (more of them may follow once the file grows)."""
        end = len(items)
        while end > 1 and not items[end - 1][2].strip():
            end -= 1
        return b"\n".join(r for _o, _i, _t, r in items[:end])

    def _prompt(self, items: list) -> None:
        index = items[0][1]
        texts = []
        for _o, _i, t, _r in items:
            if not t.strip():
                continue
            texts.append(t[5:].rstrip() if len(t) > 4 else "")
        text = "\n".join(texts)
        self.pending = []
        native = "command" if text.startswith("/") else V.USER
        eid = f"p{index}"
        blocks = [{"type": "text", "text": text}]
        row = R.message_row(eid, V.USER, blocks=blocks, native_role=native, parent=self.parent,
                            timestamp=self.started, seq=index, time_approximate=True,
                            raw_json=R.dumps({"line": index, "lines": len(items)}))
        self._emit(P.Entry(eid, self.parent, "message", index, {}, self._raw(items), row=row, calls=[]))

    def _assistant(self, items: list, output: list | None) -> None:
        index = items[0][1]
        lines = [t for _o, _i, t, _r in items]
        while lines and not lines[-1].strip():
            lines.pop()
        blocks: list[dict] = []
        at = thinking_end(lines)
        if at:
            first = next(k for k, t in enumerate(lines) if t.strip())
            inner = "\n".join(lines[first + 1:at - 1]).strip("\n")
            blocks.append({"type": "thinking", "thinking": inner})
        base = at
        for s, e, args in edit_blocks(lines[base:], self.format):
            s, e = s + base, e + base
            piece = "\n".join(lines[at:s]).strip("\n")
            if piece.strip():
                blocks.append({"type": "text", "text": piece})
            blocks.append({"type": "toolCall", "id": f"edit-{items[s][1]}", "name": EDIT_TOOL, "arguments": args})
            at = e
        piece = "\n".join(lines[at:]).strip("\n")
        if piece.strip():
            blocks.append({"type": "text", "text": piece})
        usage: dict = {}
        found = None
        if output is not None:
            for _o, i, t, r in output:
                m = _TOKENS_RE.match(t[1:].strip()) if line_kind(t) == "output" else None
                if m:
                    found = (i, m, r)
                    break
        extra: dict = {"line": index, "lines": len(items)}
        if found is not None:
            i, m, _raw = found
            sent, write, hit, received = (tokens(m.group(k)) for k in (1, 2, 3, 4))
            cached = (write or 0) + (hit or 0)
            usage = {"input_tokens": max((sent or 0) - cached, 0) if sent is not None else None,
                     "output_tokens": received, "cache_read_tokens": hit, "cache_write_tokens": write}
            usage["total_tokens"] = sum(v or 0 for v in usage.values())
            if m.group(5) is not None:
                usage["cost_usd"] = R.number(float(m.group(5)))
            extra.update({"usage_line": i, "usage_rounded": True})
        provider = self.model.split("/", 1)[0] if self.model and "/" in self.model else None
        eid = f"a{index}"
        row = R.message_row(eid, V.ASSISTANT, blocks=blocks, native_role=V.ASSISTANT, parent=self.parent,
                            timestamp=self.started, seq=index, time_approximate=True, model=self.model,
                            provider=provider, call_key=_h8(self.sid or "") + P.short_hash(
                                f"{self.sid}|{index}".encode("utf-8", "surrogatepass"))[:16],
                            raw_json=R.dumps(extra), **usage)
        calls = R.tool_call_rows(blocks, self.started, SHELL_TOOLS)
        raw = self._raw(items) + (b"\n" + found[2] if found is not None else b"")
        self._emit(P.Entry(eid, self.parent, "message", index, {}, raw, row=row, calls=calls))
        # "Applied edit to <file>" in the output after it answers its edits of that file
        self.pending = [[b["id"], b["arguments"].get("path")] for b in blocks if b["type"] == "toolCall"]
        self.pending = self.pending[:PENDING_LIMIT]

    def _output(self, items: list) -> None:
        index = items[0][1]
        texts = []
        for _o, i, t, _r in items:
            if line_kind(t) != "output":
                continue
            body = t[1:].strip()
            texts.append(body)
            m = _VERSION_RE.match(body)
            if m and self.sid in self.values:
                self.values[self.sid]["agent_version"] = m.group(1)[:64]  # the Aider that ran the session
            m = _MODEL_RE.match(body)
            if m:
                self.model = m.group(1)[:128]
                self.format = m.group(2) or self.format
                if self.sid in self.values:
                    self.values[self.sid]["model"] = self.model
            m = _APPLIED_RE.match(body)
            if m:
                self._result(i, m.group(1), body)
        eid = f"o{index}"
        preview = next((t for t in texts if t), None)
        row = {"entry_uuid": eid, "parent_uuid": self.parent, "entry_type": "output", "custom_type": None,
               "text_preview": R.preview(preview), "timestamp": self.started, "seq": index,
               "raw_json": R.dumps({"line": index, "text": "\n".join(t for _o, _i, t, _r in items)})}
        self._emit(P.Entry(eid, self.parent, "output", index, {}, self._raw(items), row=row))

    def _result(self, index: int, path: str, body: str) -> None:
        """``Applied edit to <path>``: the result of each edit of that file in the reply just before (Aider
        applies a reply's edits and says so once per file): one toolResult row per call."""
        calls = [p for p in self.pending if p[1] == path]
        for n, call in enumerate(calls):
            self.pending.remove(call)
            eid = f"r{index}" if n == 0 else f"r{index}.{n}"
            row = R.message_row(eid, V.TOOL_RESULT, blocks=[{"type": "text", "text": body}], native_role="output",
                                parent=self.parent, timestamp=self.started, seq=index, time_approximate=True,
                                tool_call_id=call[0], tool_name=EDIT_TOOL,
                                raw_json=R.dumps({"line": index, "call": call[0]}))
            self._emit(P.Entry(eid, self.parent, "message", index, {}, body.encode("utf-8", "surrogatepass"),
                               row=row, calls=[]))


SHELL_TOOLS: frozenset[str] = frozenset()  # Aider's model makes no shell calls of its own (docs/aider.md)


# ---------------------------------------------------------------------------
# Units and the kind


class HistoryFile(Unit):
    """One ``.aider.chat.history.md``: its runs, read from where the last read left off."""

    prefetch_limit = PREFETCH_LIMIT

    def __init__(self, *args, zone: str | None = None, **kw):
        super().__init__(*args, **kw)
        self.zone = zone

    def read(self, checkpoint):
        folder = self.fs.dirname(self.path)
        return (yield from read_lines(self, checkpoint, partial(AiderParser, folder=folder, zone=self.zone)))


class Aider(Source):
    kind = KIND
    order = 19
    records_costs = False  # a recorded "Cost: $x message" is kept ('recorded'); a reply without one is priced
    shell_tools = SHELL_TOOLS
    not_this = "not an Aider chat history: no '# aider chat started at' line"

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        agent = scope.agent or AGENT
        own = fs.join(path, HISTORY)
        if fs.is_file(own):
            self._add(fs, own, scope, agent, out)
            return True
        found = False
        try:
            subs = fs.subdirs(path)
        except OSError:
            return False
        for sub in subs:  # a folder of projects
            if sub.name in SKIP_DIRS:
                continue
            history = fs.join(sub.path, HISTORY)
            if fs.is_file(history):
                self._add(fs, history, scope, agent, out)
                found = True
        return found

    def _add(self, fs: FileSystem, path: str, scope: Scope, agent: str, out: Discovery) -> None:
        if not scope.wants(agent):
            return
        found = fs.stat(path)
        if found is None:
            return
        out.add(HistoryFile(self, scope.server, agent, path, HISTORY, found[1], found[2], fs=fs, zone=scope.timezone))

    def claims_file(self, name: str, head: bytes) -> bool:
        return name == HISTORY

    def file_unit(self, fs: FileSystem, path: str, size: int, mtime_ns: int, scope: Scope,
                  out: Discovery) -> Unit | None:
        return HistoryFile(self, scope.server, scope.agent or AGENT, path, HISTORY, size, mtime_ns, fs=fs,
                           zone=scope.timezone)


SOURCE = Aider()
