"""Preparing rows for the snapshot, in a worker process while the main one
writes: credentials redacted (redact.py, the glue here), a message's generated
columns derived (encode.py), its search text computed and indexed into the
worker's own full-text file (copied into the snapshot at the end, ddl.py), and
the session list built from the committed rows (derived.py)."""

from __future__ import annotations

import multiprocessing
import operator
import os
import sqlite3
from collections import deque
from pathlib import Path

from .. import derived, shape
from ..search import index_text, message_search_text
from ..search import decoded_json as _decoded
from .ddl import BUSY_WAIT, WORKER_FTS, create_fts, load_settings
from .encode import derive_message


MESSAGE_TEXT = ("id", "content_blocks", "text_preview", "thinking_text", "tool_calls_json")


def prepare_rows(table: str, names: tuple[str, ...], rows: list[tuple], redact: bool, fts: bool):
    """For rows of the store's columns ``names``: the replaced values of
    each row that held a credential of the export's set (redact.installed(),
    pass 1's), where they were counted, and (messages) the text to index and
    the helpers of the generated columns, from the replaced content. Runs in
    a worker process while the main one writes (module level: picklable).
    Returns (patches: [(index in rows, {column: value})], findings: [(table,
    row id, session id, column, kind, count)], fts rows, derived: one tuple
    per row or None)."""
    from .. import redact as R
    from . import redaction

    secrets = R.installed() if redact else None
    patches: list[tuple[int, dict]] = []
    findings: list[tuple] = []
    fts_rows: list[tuple[int, str]] = []
    derived: list[tuple] | None = [] if table == "messages" else None
    at = {c: i for i, c in enumerate(names)}
    content_at, preview_at, session_at = at.get("content_blocks"), at.get("text_preview"), at.get("session_id")
    thinking_at, calls_at = at.get("thinking_text"), at.get("tool_calls_json")
    redacted = redaction.redact_rows(secrets, table, names, rows, shape.redact_columns()) if secrets else {}
    for index, row in enumerate(rows):
        got = redacted.get(index)
        patch = got[0] if got else {}
        if patch:
            patches.append((index, patch))
        if got:
            session = row[session_at] if session_at is not None else (row[0] if table == "sessions" else None)
            for column, counts in got[1]:
                for kind, n in counts.items():
                    findings.append((table, row[0], session, column, kind, n))
        if derived is not None:
            content = patch.get("content_blocks", row[content_at])
            preview = patch.get("text_preview", row[preview_at])
            decoded = _decoded(content)
            derived.append(derive_message(content, decoded, preview, patch.get("thinking_text", row[thinking_at]),
                                          patch.get("tool_calls_json", row[calls_at])))
            if fts:
                text = message_search_text(content, preview, decoded)
                if text:
                    fts_rows.append((row[0], index_text(text)))
    return patches, findings, fts_rows, derived


_CONTEXT = "fork" if hasattr(os, "fork") else "spawn"


def one_process():
    """A pool of one worker process, or None (one core, or no processes here: the work is done inline)."""
    if (os.cpu_count() or 1) < 2:
        return None
    try:
        return multiprocessing.get_context(_CONTEXT).Pool(1)
    except (OSError, ValueError):
        return None


# Tasks the worker is given to do before this process prepares a batch itself (so that the worker
# never waits for work while this one prepares), and how many batches this process may have prepared
# while the oldest is still with the worker (bounded memory: at most AHEAD + INLINE waiting).
AHEAD = 4
INLINE = 4


class _Done:
    """A batch this process prepared, waiting for its turn to be written."""

    def __init__(self, result):
        self.result = result

    def ready(self) -> bool:
        return True

    def get(self):
        return self.result


class Preparer:
    """Redacts rows and prepares search text on the other core, a few batches
    ahead at most (bounded memory); the main process writes each batch, in
    order, once its result is back. ``parallel=False``: all in this process
    (an update's few rows are not worth a worker)."""

    def __init__(self, redact: bool, parallel: bool = True, fts_file: Path | None = None, secrets=None):
        """``secrets``: the set pass 2 replaces (redact.py's SecretSet), searchable here and in the
        worker: its index is built before the worker is forked, which has it from then on (an
        index of 100,000 values takes a second to build: once, not in each process)."""
        self.redact = redact
        self.pending: deque = deque()
        self.indexing = False  # the worker writes the messages' index into fts_file
        self.closing = None  # and then completes it: the pending result
        if redact or secrets is not None:
            from .. import redact as R  # (once, before the worker forks)

        if secrets is not None:
            R.install_set(secrets)
            secrets.ready()
        self.pool = one_process() if parallel else None
        if self.pool is not None and secrets is not None and _CONTEXT != "fork":
            self._in_order(self.pool.apply_async(R.install, (secrets.values(),)))
        if self.pool is not None and fts_file is not None:
            self.pool.apply(_worker_fts_open, (str(fts_file),))
            self.indexing = True

    def close_index(self) -> None:
        """Once the messages are all sent: the worker completes its index (commit, optimize) while
        this process copies the other tables."""
        if self.indexing:
            self.closing = self.pool.apply_async(_worker_fts_close)
            self.indexing = False

    def finish_index(self) -> bool:
        """The worker's index complete (optimized, closed); whether there is one to adopt."""
        self.close_index()
        if self.closing is None:
            return False
        self.drain()
        self.closing.get()
        self.closing = None
        return True

    def index(self, fts: str, rows: list[tuple[int, str]]) -> bool:
        """Have the worker index (rowid, text) rows into its file's ``fts``, after the batches before
        them; False (nothing sent) when it builds no index."""
        if not self.indexing:
            return False
        self._in_order(self.pool.apply_async(index_in_worker, (fts, rows)))
        return True

    def derive(self, snapshot: Path, path: Path):
        """Have the worker build the session list of the snapshot's committed rows in ``path``
        (session_list_in_worker), after the tasks before it; the pending result."""
        return self.pool.apply_async(session_list_in_worker, (str(path), str(snapshot)))

    def _in_order(self, result) -> None:
        """A worker task with no rows to write, waited for in its place among the batches."""
        self.pending.append(([], lambda rows, got: None, result))

    def add(self, table: str, names: tuple, rows: list, write, text_cols=None) -> None:
        from .. import redact as R

        fts = table == "messages"
        redact = self.redact and bool(R.installed())  # (nothing to replace in a store without credentials)
        if not redact and not fts:
            write(rows, ([], [], [], None))
            return
        payload = rows
        # fewer values to send to the worker: the text columns, or only the message's own
        want = text_cols if redact else MESSAGE_TEXT
        if want is not None and len(want) < len(names):
            keep = [i for i, c in enumerate(names) if c in want]
            names = tuple(names[i] for i in keep)
            # (itemgetter: each row's tuple made in C, not by a generator per row)
            payload = list(map(operator.itemgetter(*keep), rows)) if len(keep) > 1 \
                else [tuple(row[i] for i in keep) for row in rows]
        if self.pool is None:
            write(rows, prepare_rows(table, names, payload, redact, fts))
            return
        while self.pending and self.pending[0][2].ready():
            self._finish_one()  # what is done, written first
        if len(self.pending) < AHEAD + INLINE and \
                sum(1 for entry in self.pending if not isinstance(entry[2], _Done)) >= AHEAD:
            # the worker has AHEAD tasks to do: this process prepares the batch itself (written in its
            # turn; its search text indexed by the worker, whose file holds the index)
            result = prepare_rows(table, names, payload, redact, fts)
            if fts and self.indexing and result[2]:
                self._in_order(self.pool.apply_async(index_in_worker, (shape.FTS_TABLE, result[2], False)))
                result = (*result[:2], [], result[3])
            self.pending.append((rows, write, _Done(result)))
            return
        work = prepare_and_index if self.indexing else prepare_rows
        self.pending.append((rows, write, self.pool.apply_async(work, (table, names, payload, redact, fts))))
        while len(self.pending) > AHEAD + INLINE:  # bounded memory: a few batches ahead at most
            self._finish_one()

    def _finish_one(self) -> None:
        rows, write, result = self.pending.popleft()
        write(rows, result.get())

    def drain(self) -> None:
        while self.pending:
            self._finish_one()

    def close(self) -> None:
        self.pending.clear()
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None


# The full-text indexes of a full build are built by the worker in a file of its own, then copied
# into the snapshot's shadow tables (all of an FTS5 index's state is in them): the largest single cost
# of a build moves off the main process, which writes the rows meanwhile. The messages' text is the
# worker's own (it computes it); the tool calls' comes from the main process, which links each call to
# its messages in the snapshot, and reaches the worker while it has no rows of its own to prepare.
# Measured on 300,000 messages: the main process's CPU 42-50 s -> 32-36 s, the build about a tenth
# faster. The snapshot's connection is reopened after the copy, so that FTS5 reads the index anew
# (WORKER_FTS, ddl.py: which indexes).
_worker_fts: sqlite3.Connection | None = None


def _worker_fts_open(path: str) -> None:
    global _worker_fts
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_WAIT)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    for fts in WORKER_FTS:
        create_fts(conn, fts)
        load_settings(conn, fts)
    conn.execute("BEGIN")
    _worker_fts = conn


def _worker_fts_close() -> None:
    global _worker_fts
    conn, _worker_fts = _worker_fts, None
    conn.execute("COMMIT")
    for fts in WORKER_FTS:
        conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')")
    conn.close()


def index_in_worker(fts: str, rows: list[tuple[int, str]], searched: bool = True) -> None:
    """Index (rowid, text) rows in the worker's file: the text as it is searched (index_text here),
    or ``searched=False``: already as the index sees it."""
    _worker_fts.executemany(f"INSERT INTO {fts} (rowid, {shape.FTS_COLUMN}) VALUES (?, ?)",
                            [(rowid, index_text(text)) for rowid, text in rows] if searched else rows)


def prepare_and_index(table: str, names: tuple[str, ...], rows: list[tuple], redact: bool, fts: bool):
    """prepare_rows, in the worker, with the messages' full-text rows written to its own index."""
    patches, findings, fts_rows, derived_rows = prepare_rows(table, names, rows, redact, fts)
    if fts_rows and _worker_fts is not None:
        _worker_fts.executemany(f"INSERT INTO {shape.FTS_TABLE} (rowid, {shape.FTS_COLUMN}) VALUES (?, ?)",
                                fts_rows)
        fts_rows = []
    return patches, findings, fts_rows, derived_rows


def session_list_in_worker(path: str, snapshot: str) -> int:
    """The session list (derived.py), built whole in a new file of its own from the committed rows
    of the snapshot, attached read-only: the snapshot is in WAL mode meanwhile, so the main process
    makes its indexes as this runs. Returns the rows."""
    conn = sqlite3.connect(path, isolation_level=None, uri=True, timeout=BUSY_WAIT)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("ATTACH DATABASE ? AS snapshot", (Path(snapshot).resolve().as_uri() + "?mode=ro",))
        return derived.refresh_session_list(conn)
    finally:
        conn.close()
