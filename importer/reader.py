"""The reader stage: what is new in a transcript, as parsed entries.

``read_transcript`` reads a file (or only what it gained since the last run)
in bounded chunks and hands them to the parser; no database is involved.
``*.zst`` archives are decompressed as a stream.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from . import openclaw_db
from . import parser as P
from .sources import SourceFile

CHUNK = 4 * 1024 * 1024  # bytes read at a time; memory stays bounded by this plus the longest line
WINDOW = 1024  # bytes hashed at the head and before the last offset to tell an append from a rewrite
KNOWN_TYPES = {
    "session", "message", "model_change", "thinking_level_change", "compaction", "branch_summary",
    "custom", "custom_message", "label", "session_info", "reset",
}


def _read_at(f, start: int, length: int) -> bytes:
    f.seek(start)
    return f.read(length)


@dataclass
class ReadOutcome:
    """What reading one transcript found, besides its entries."""

    state: P.ParseState
    append: bool
    consumed_to: int
    bad: int
    pending: int
    entries_read: int
    bytes_read: int
    head: bytes
    tail: bytes
    typed: bool
    saw_entries: bool


def read_transcript(source: SourceFile, previous):
    """The reader stage: yields (session id, entries) batches of what is new in
    a transcript and returns a ReadOutcome. No database.

    A file that only grew since the last run (its first bytes and the bytes
    just before the recorded offset are unchanged) is read from that offset;
    anything else is read whole (and merged by entry id by the writer).
    """
    state = P.ParseState()
    offset = 0
    bad = pending = entries_read = 0
    bytes_read = 0
    head = b""  # first WINDOW bytes of the file, as far as read
    tail = b""  # last WINDOW bytes before the consumed offset
    append = False
    with open_transcript(source) as f:
        if (previous is not None and previous["status"] == "success" and previous["parsed_offset"]
                and not source.name.endswith(".zst")):  # .zst archives are immutable: read whole
            old = previous["parsed_offset"]
            if source.size >= old:
                head = _read_at(f, 0, min(WINDOW, old))
                tail = head if old <= WINDOW else _read_at(f, old - WINDOW, WINDOW)
                bytes_read += len(head) + (0 if old <= WINDOW else len(tail))
                if (P.short_hash(head) == previous["head_hash"]
                        and P.short_hash(tail) == previous["tail_hash"]):
                    append = True
                    offset = old
                    state = P.ParseState(
                        session_id=previous["session_uuid"],
                        legacy=bool(previous["legacy_format"]),
                        next_line=previous["parsed_lines"] or 0,
                        last_entry_id=previous["last_entry_id"],
                    )
                    bad = previous["bad_lines"] or 0
                    entries_read = previous["entries_read"] or 0
                else:
                    head = tail = b""
        parser = P.TranscriptParser(source.name, state)
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
                if not typed and any(e.type in KNOWN_TYPES for e in result.entries):
                    typed = True
                yield state.session_id or P.session_id_from_name(source.name), result.entries
            if final:
                break
    if state.header is not None:
        typed = True
    return ReadOutcome(state, append, consumed_to, bad, pending, entries_read, bytes_read, head, tail,
                       typed, saw_entries)


PREFETCH_LIMIT = 8 * 1024 * 1024  # larger files are streamed in CHUNKs, never held whole


@dataclass
class Prefetched:
    """A transcript read and parsed ahead of its transaction, against the
    ``parsed_files`` row the listing had for it (``previous``)."""

    previous: tuple | None
    batches: list
    outcome: ReadOutcome

    def fits(self, previous) -> bool:
        """Whether it was read against the same ``parsed_files`` row (another
        importer may have taken the file since the listing)."""
        return (previous is None) == (self.previous is None) and (
            previous is None or tuple(previous) == self.previous)

    def replay(self):
        """The same protocol as :func:`read_transcript`."""
        for batch in self.batches:
            yield batch
        return self.outcome


def prefetch(source: SourceFile, previous, limit: int = PREFETCH_LIMIT) -> Prefetched | None:
    """Read and parse a plain transcript of at most ``limit`` new bytes ahead
    of time, its rows derived; None when it is larger, compressed, or fails
    (the writer then reads it itself and meets the error in its own
    transaction)."""
    if source.name.endswith(".zst") or isinstance(source, BlobSource):
        return None
    done = previous["parsed_offset"] or 0 if previous is not None else 0
    if source.size - min(done, source.size) > limit:
        return None
    batches = []
    stream = read_transcript(source, previous)
    try:
        while True:
            session_id, entries = next(stream)
            for entry in entries:
                entry.derive()
            batches.append((session_id, entries))
    except StopIteration as stop:
        return Prefetched(tuple(previous) if previous is not None else None, batches, stop.value)
    except Exception:
        return None


def open_transcript(source: SourceFile):
    """The bytes of a transcript; ``*.zst`` archives decompressed as a stream."""
    f = source.open()
    return openclaw_db.ZstdReader(f) if source.name.endswith(".zst") else f


@dataclass
class BlobSource(SourceFile):
    """A transcript held in a database value (a deleted or reset archive)."""

    blob: bytes = b""

    def open(self):
        return io.BytesIO(self.blob)
