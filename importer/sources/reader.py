"""Reading line-oriented units (OpenClaw and pi JSONL, Claude Code, Codex): what
is new in a file, as parsed entries. A helper of the kinds; no database.

``read_lines`` reads a unit's bytes (or only what it gained since its
checkpoint) in bounded chunks and hands them to a line parser (for OpenClaw
and pi: ``parser.TranscriptParser``; other JSONL kinds bring their own with
the same ``feed`` protocol). A file that only grew since the last run (its
first bytes and the bytes just before the recorded offset are unchanged) is
read from that offset; anything else is read whole (and merged by entry id by
the writer).
"""

from __future__ import annotations

from .. import parser as P
from ..units import Batch, Checkpoint, Outcome, Reading, Unit

CHUNK = 4 * 1024 * 1024  # bytes read at a time; memory stays bounded by this plus the longest line
WINDOW = 1024  # bytes hashed at the head and before the last offset to tell an append from a rewrite


def _read_at(f, start: int, length: int) -> bytes:
    f.seek(start)
    return f.read(length)


def read_lines(unit: Unit, checkpoint: Checkpoint | None, parser_cls=P.TranscriptParser,
               appendable: bool = True) -> Reading:
    """Yield Batches of what is new in a line-oriented unit; return its Outcome.

    ``parser_cls(name, state)`` parses complete lines (see TranscriptParser);
    its ``known_types`` tell a transcript from another JSON-lines file, and its
    ``sessions(state)`` the session-level values (a header line's).
    ``appendable``: False for files read whole every time (compressed archives).
    """
    state = P.ParseState()
    offset = 0
    bad = pending = entries_read = bad_before = 0
    bytes_read = 0
    head = b""  # first WINDOW bytes of the file, as far as read
    tail = b""  # last WINDOW bytes before the consumed offset
    append = False
    with unit.open() as f:
        if appendable and checkpoint is not None and checkpoint.resumable and checkpoint.offset:
            old = checkpoint.offset
            if unit.size >= old:
                head = _read_at(f, 0, min(WINDOW, old))
                tail = head if old <= WINDOW else _read_at(f, old - WINDOW, WINDOW)
                bytes_read += len(head) + (0 if old <= WINDOW else len(tail))
                if P.short_hash(head) == checkpoint.head_hash and P.short_hash(tail) == checkpoint.tail_hash:
                    append = True
                    offset = old
                    state = P.ParseState(session_id=checkpoint.session_uuid, legacy=checkpoint.legacy,
                                         next_line=checkpoint.lines, last_entry_id=checkpoint.last_entry_id,
                                         extra=dict(checkpoint.state))
                    bad = bad_before = checkpoint.bad_lines
                    entries_read = checkpoint.entries_read
                else:
                    head = tail = b""
        parser = parser_cls(unit.name, state)
        known = parser.known_types
        f.seek(offset)
        consumed_to = offset
        leftover = b""
        typed = append  # an appended file was already recognised as a transcript
        saw_entries = False
        while True:
            chunk = f.read(CHUNK)
            bytes_read += len(chunk)
            if len(head) < WINDOW and consumed_to + len(leftover) == len(head):
                head += chunk[: WINDOW - len(head)]
            data = leftover + chunk if leftover else chunk
            final = not chunk
            result = parser.feed(data, final=final)
            if result.consumed:
                tail = (tail + data[max(0, result.consumed - WINDOW):result.consumed])[-WINDOW:]
            consumed_to += result.consumed
            leftover = data[result.consumed:]
            bad += result.bad_lines
            pending += result.pending_lines
            if result.entries:
                saw_entries = True
                entries_read += len(result.entries)
                if not typed and any(e.type in known for e in result.entries):
                    typed = True
                if result.batches is not None:
                    yield from result.batches
                else:
                    yield Batch(state.session_id or P.session_id_from_name(unit.name), result.entries)
            if final:
                break
    sessions = parser.sessions()
    if state.header is not None:
        typed = True
    new = Checkpoint(
        status="success", token=unit.token, offset=consumed_to, lines=state.next_line,
        head_hash=P.short_hash(head[: min(WINDOW, consumed_to)]) if consumed_to else None,
        tail_hash=P.short_hash(tail) if consumed_to else None,
        last_entry_id=state.last_entry_id, legacy=state.legacy, bad_lines=bad, pending_lines=pending,
        entries_read=entries_read,
        session_uuid=state.session_id or (checkpoint.session_uuid if checkpoint is not None else None),
        state=state.extra,
    )
    return Outcome(new, sessions, bad=bad, bad_before=bad_before, pending=pending, bytes_read=bytes_read,
                   typed=typed, saw_entries=saw_entries)
