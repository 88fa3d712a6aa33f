"""The import pipeline: sources -> reader -> parser -> writer -> store.

``run_import`` lists the sources, skips what did not change, imports each
file (and each session of an OpenClaw SQLite store) in its own
transaction, and applies
sessions.json and store metadata at the end. One bad file never stops the
others.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import deque
from typing import Callable

import orjson

from .openclaw_import import apply_store_metadata, import_openclaw_db
from .reader import prefetch
from .sources import Discovery, SourceFile, SourceLost, discover
from .store import BackgroundFailure, Commit, RowRejected, Store
from .writer import ImportReport, NotATranscript, apply_index, import_one, record_problem, unchanged

log = logging.getLogger("agentbase")


def run_import(
    store: Store,
    paths: list[str],
    server: str | None = None,
    agent: str | None = None,
    progress: Callable[[list[SourceFile]], object] | None = None,
    sources: Discovery | None = None,
) -> ImportReport:
    """Import every transcript under ``paths``; one bad file never stops the others.

    ``sources``, when given, is an already made listing (a remote server's,
    see remote.py) imported instead of discovering ``paths``.
    """
    started = time.perf_counter()
    report = ImportReport()
    # Parsed transcripts are millions of short-lived containers; the cyclic
    # GC would walk them again and again for nothing (they hold no cycles).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(store, paths, server, agent, progress, report, started, sources)
    finally:
        if gc_was_enabled:
            gc.enable()


def _run(store, paths, server, agent, progress, report, started, sources=None) -> ImportReport:
    found = sources if sources is not None else discover(paths, server=server, agent=agent)
    report.warnings.extend(found.warnings)
    for message in found.errors:
        report.failures.append(("", message))
        report.files_failed += 1
    known: dict[tuple[str, str], dict] = {}
    touched: set[tuple[str, str]] = set()
    store_meta: dict[tuple[str, str], dict] = {}  # OpenClaw SQLite stores: session metadata per group
    files = found.files
    iterator = progress(files) if progress else files

    ahead = None
    if store.defers_commits:
        ahead = _Lookahead(files, known, store.busy)
        groups = sorted({(f.server, f.agent_id) for f in files if f.kind in ("transcript", "index")})
        store.expect(groups)
        for group in groups:  # loaded now: later, a query would wait for the background writes
            known[group] = store.parsed_files(*group)
    _import_all(store, iterator, report, known, touched, store_meta, ahead)
    for group in sorted(touched):
        with store.transaction():
            apply_index(store, *group)
    for group in sorted(store_meta):  # after sessions.json: the store is the newer source
        with store.transaction():
            apply_store_metadata(store, *group, store_meta[group])
    report.elapsed_s = time.perf_counter() - started
    return report


class _Lookahead:
    """Transcripts read and parsed ahead (reader.prefetch) while a store that
    defers commits is still storing earlier files: the parsing of the next
    files overlaps with the server's work instead of following it.

    Holds at most MAX_FILES files and MAX_BYTES of their new bytes; only
    files whose group's parsed_files rows are already loaded (no query may
    run while the store is busy)."""

    MAX_FILES = 4
    MAX_BYTES = 16 * 1024 * 1024

    def __init__(self, files: list[SourceFile], known: dict, busy: Callable[[], bool]):
        self.files = files
        self.known = known
        self.busy = busy
        self.ready: dict[int, object] = {}  # index in files -> Prefetched or None
        self.sizes: dict[int, int] = {}
        self.next = 0  # the first index not looked at yet

    def fill(self, current: int) -> None:
        """Prefetch file ``current`` and, while the store is busy, the next ones."""
        self.next = max(self.next, current)
        while self.next < len(self.files):
            if self.next > current and (not self.busy() or len(self.ready) >= self.MAX_FILES
                                        or sum(self.sizes.values()) >= self.MAX_BYTES):
                return
            index, source = self.next, self.files[self.next]
            group = (source.server, source.agent_id)
            if source.kind != "transcript":
                self.next += 1
                continue
            if group not in self.known:
                return  # its rows need a query: wait for the file's turn
            self.next += 1
            previous = self.known[group].get(source.path)
            if unchanged(source, previous):
                continue
            self.ready[index] = prefetch(source, previous)
            self.sizes[index] = source.size - min(source.size, (previous["parsed_offset"] or 0)
                                                  if previous is not None else 0)

    def take(self, index: int):
        self.sizes.pop(index, None)
        return self.ready.pop(index, None)


def _import_all(store, iterator, report, known, touched, store_meta, ahead=None) -> None:
    # A store that defers commits (MariaDB) stores files in the background
    # while this thread reads and parses the next ones (_Lookahead). A file
    # counts once its commit has landed; when the background met a failure,
    # every file whose commit had not landed runs again in the foreground,
    # where its error (if it is its own) gets the usual handling.
    defer = store.defers_commits
    in_flight: deque[tuple[SourceFile, ImportReport, Commit]] = deque()

    def collect() -> None:
        while in_flight and in_flight[0][2].done:
            source, part, _commit = in_flight.popleft()
            _count(report, source, part, touched)

    def recover(failure: BackgroundFailure) -> bool:
        collect()
        redo = list(in_flight)
        in_flight.clear()
        for source, _part, _commit in redo:
            log.info("running %s again after %s", source.path, failure)
            part, stop = _attempt(store, source, report)
            if part is not None:
                _count(report, source, part, touched)
            if stop:
                return False
        return True

    def settle() -> bool:
        """Everything in flight landed (or ran again); False: the run must stop."""
        try:
            store.settle()
        except BackgroundFailure as failure:
            return recover(failure)
        collect()
        return True

    for index, source in enumerate(iterator):
        group = (source.server, source.agent_id)
        if group not in known:
            if not settle():
                return
            known[group] = store.parsed_files(*group)
        previous = known[group].get(source.path)
        if source.kind == "openclaw_db":
            if not settle():
                return
            meta = import_openclaw_db(store, source, report, known[group])
            if meta is not None:
                store_meta.setdefault(group, {}).update(meta)
                touched.add(group)
            continue
        if source.kind == "transcript":
            report.files_seen += 1
        if unchanged(source, previous):
            if source.kind == "transcript":
                report.files_unchanged += 1
                report.pending_lines += previous["pending_lines"] or 0
            elif source.kind == "index":
                # Applied again at the end (a no-op when nothing differs): a run
                # killed after importing sessions.json, before applying it, left
                # its metadata off the sessions.
                touched.add(group)
            continue
        if not (defer and source.kind in ("transcript", "index")):
            if not settle():
                return
            part, stop = _attempt(store, source, report)
            if part is not None:
                _count(report, source, part, touched)
            if stop:
                return
            continue
        ready = None
        if ahead is not None and source.kind == "transcript":
            ahead.fill(index)  # this file, and the next ones while the store is busy
            ready = ahead.take(index)
        try:
            part, stop = _attempt(store, source, report, ready, defer=True)
        except BackgroundFailure as failure:
            if not recover(failure):
                return
            part, stop = _attempt(store, source, report)
            if part is not None:
                _count(report, source, part, touched)
        else:
            if part is not None:
                if store.last_commit is None:
                    _count(report, source, part, touched)
                else:
                    in_flight.append((source, part, store.last_commit))
            collect()
        if stop:
            settle()  # the files before this one still count
            return
    settle()


def _count(report: ImportReport, source: SourceFile, part: ImportReport, touched: set) -> None:
    """Add a committed file's figures to the run's."""
    report.add(part)
    touched.add((source.server, source.agent_id))
    if source.kind == "transcript":
        if part.files_unchanged:
            report.files_unchanged += 1
        else:
            report.files_imported += 1


def _attempt(store, source: SourceFile, report: ImportReport, ready=None, defer: bool = False):
    """One file in one transaction, a failure recorded (and counted) here.
    Returns (its figures or None when it failed, whether the run must stop
    because the connection to the source went away)."""
    try:
        return import_one(store, source, ready, defer=defer), False
    except SourceLost as exc:
        # This file (rolled back) and the ones after it stay as recorded,
        # for the next run.
        report.failures.append((source.path, str(exc)))
        report.files_failed += 1
        return None, True
    except NotATranscript as exc:
        record_problem(store, source, "ignored", str(exc))
        report.files_ignored += 1
    except (OSError, orjson.JSONDecodeError, UnicodeDecodeError, RowRejected) as exc:
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        message = f"cannot read {source.path}: {reason}"
        record_problem(store, source, "failed", message)
        report.failures.append((source.path, message))
        report.files_failed += 1
    return None, False
