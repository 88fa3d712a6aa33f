"""The import pipeline: sources -> units -> reader/parser -> writer -> store.

``run_import`` lists the sources (or takes a listing made elsewhere: a remote
server's), skips every unit (and container) whose change token is what its
checkpoint says, imports each other unit in its own transaction, and at the
end lets each kind apply what it gathered for the groups the run touched
(session metadata). One bad unit never stops the others. Nothing here asks
what kind a unit is.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import deque
from typing import Callable

import orjson

from .sources import Discovery, Source, all_sources, discover
from .store import BackgroundFailure, RowRejected, Store
from .units import Checkpoint, Container, NotATranscript, SourceError, SourceLost, prefetch, unchanged
from .writer import ImportReport, import_one, record_problem, unit_row

log = logging.getLogger("agentbase")


def run_import(
    store: Store,
    paths: list[str],
    server: str | None = None,
    agent: str | None = None,
    progress: Callable[[list], object] | None = None,
    sources: Discovery | None = None,
    fs=None,
) -> ImportReport:
    """Import every unit under ``paths``; one bad unit never stops the others.

    ``sources``, when given, is an already made listing (a remote server's,
    see sync.py) imported instead of discovering ``paths``.
    """
    started = time.perf_counter()
    report = ImportReport()
    # Parsed transcripts are millions of short-lived containers; the cyclic
    # GC would walk them again and again for nothing (they hold no cycles).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        found = sources if sources is not None else discover(paths, server=server, agent=agent, fs=fs)
        return _Run(store, report).run(found, progress, started)
    finally:
        if gc_was_enabled:
            gc.enable()


class _Run:
    def __init__(self, store: Store, report: ImportReport):
        self.store = store
        self.report = report
        self.known: dict[tuple[str, str], dict] = {}  # parsed_files rows by group, then by key
        self.touched: set[tuple[str, str]] = set()  # groups whose kinds finish at the end
        self.metadata: dict[tuple[str, str, str], dict] = {}  # (server, agent, source name) -> session metadata
        self.defer = store.defers_commits
        self.in_flight: deque = deque()  # (unit, its figures, Commit) not yet landed

    def run(self, found: Discovery, progress, started: float) -> ImportReport:
        report, store = self.report, self.store
        report.warnings.extend(found.warnings)
        for message in found.errors:
            report.failures.append(("", message))
            report.files_failed += 1
        items = found.units
        iterator = progress(items) if progress else items
        self.ahead = None
        if self.defer:
            self.ahead = _Lookahead(items, self.known, store.busy)
            groups = sorted({u.group for u in items})
            store.expect(groups)
            for group in groups:  # loaded now: later, a query would wait for the background writes
                self.known[group] = store.parsed_files(*group)
        try:
            for index, item in enumerate(iterator):
                if isinstance(item, Container):
                    if not self.settle():
                        return self._done(started)
                    if not self.container(item):
                        return self._done(started)
                elif not self.unit(item, index):
                    return self._done(started)
            self.settle()
        finally:
            self.settle_quietly()
        self.finish_groups()
        return self._done(started)

    def _done(self, started: float) -> ImportReport:
        self.report.elapsed_s = time.perf_counter() - started
        return self.report

    def rows(self, group: tuple[str, str]) -> dict:
        rows = self.known.get(group)
        if rows is None:
            rows = self.known[group] = self.store.parsed_files(*group)
        return rows

    # -- one unit ------------------------------------------------------------

    def unit(self, unit, index: int | None = None, rows: dict | None = None) -> bool:
        """Import one unit unless unchanged; False: the run must stop (the
        connection to its source is gone)."""
        report = self.report
        if rows is None:
            group = (unit.server, unit.agent_id)
            rows = self.known.get(group)
            if rows is None:
                if not self.settle():
                    return False
                rows = self.rows(group)
        row = rows.get(unit.key)
        if unit.counted:
            report.files_seen += 1
        if unchanged(row, unit.token):
            if unit.counted:
                report.files_unchanged += 1
                report.pending_lines += row["pending_lines"] or 0
            if unit.meta:
                # Applied again at the end (a no-op when nothing differs): a run
                # killed after importing it, before applying it, left its
                # metadata off the sessions.
                self.touched.add(unit.group)
            return True
        if not (self.defer and index is not None and unit.prefetch_limit is not None):
            if not self.settle():
                return False
            part, stop = self.attempt(unit)
            if part is not None:
                self.count(unit, part)
            return not stop
        ready = None
        if self.ahead is not None:
            self.ahead.fill(index)  # this unit, and the next ones while the store is busy
            ready = self.ahead.take(index)
        try:
            part, stop = self.attempt(unit, ready, defer=True)
        except BackgroundFailure as failure:
            if not self.recover(failure):
                return False
            part, stop = self.attempt(unit)
            if part is not None:
                self.count(unit, part)
        else:
            if part is not None:
                if self.store.last_commit is None:
                    self.count(unit, part)
                else:
                    self.in_flight.append((unit, part, self.store.last_commit))
            self.collect()
        if stop:
            self.settle()  # the units before this one still count
            return False
        return True

    def attempt(self, unit, ready=None, defer: bool = False):
        """One unit in one transaction, a failure recorded (and counted) here.
        Returns (its figures or None when it failed, whether the run must stop
        because the connection to the source went away)."""
        report, store = self.report, self.store
        try:
            return import_one(store, unit, ready, defer=defer), False
        except SourceLost as exc:
            # This unit (rolled back) and the ones after it stay as recorded, for the next run.
            report.failures.append((unit.key, str(exc)))
            report.files_failed += 1
            return None, True
        except NotATranscript as exc:
            record_problem(store, unit, "ignored", str(exc))
            report.files_ignored += 1
        except (OSError, SourceError, orjson.JSONDecodeError, UnicodeDecodeError, RowRejected) as exc:
            reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            message = f"cannot read {unit.key}: {reason}"
            record_problem(store, unit, "failed", message)
            report.failures.append((unit.key, message))
            report.files_failed += 1
        return None, False

    def count(self, unit, part: ImportReport) -> None:
        """Add a committed unit's figures to the run's."""
        report = self.report
        report.add(part)
        report.warnings.extend(part.warnings)
        self.touched.add(unit.group)
        if unit.counted:
            if part.files_unchanged:
                report.files_unchanged += 1
            else:
                report.files_imported += 1

    # -- a container -------------------------------------------------------------

    def container(self, item: Container) -> bool:
        """Every unit of a container, each in its own transaction; the
        container itself is recorded (with how many units it holds) and not
        opened again while its token stands. False: the run must stop."""
        report = self.report
        rows = self.rows(item.group)
        row = rows.get(item.key)
        if unchanged(row, item.token):
            held = row["parsed_lines"] or 0
            report.files_seen += held
            report.files_unchanged += held
            return True
        failed_before = report.files_failed
        try:
            with item.open() as opened:
                report.warnings.extend(opened.warnings)
                for unit in opened.units:
                    if not self.unit(unit, rows=rows):
                        return False
                metadata = opened.metadata()
                units = len(opened.units)
        except SourceLost as exc:
            report.failures.append((item.key, str(exc)))
            report.files_failed += 1
            return False
        except (SourceError, OSError) as exc:
            message = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            self._record(item, "failed", message, 0)
            report.failures.append((item.key, message))
            report.files_failed += 1
            return True
        if metadata:
            self.metadata.setdefault((*item.group, item.source.name), {}).update(metadata)
            self.touched.add(item.group)
        # A container with a failed unit is opened again next run, which retries it.
        self._record(item, "success" if report.files_failed == failed_before else "partial", None, units)
        return True

    def _record(self, item: Container, status: str, message: str | None, units: int) -> None:
        with self.store.transaction():
            self.store.upsert_row(
                "parsed_files",
                unit_row(item, status, Checkpoint(status=status, token=item.token, lines=units),
                         error_message=message),
                ("server", "agent_id", "file_path"),
            )

    # -- after the units -----------------------------------------------------------

    def finish_groups(self) -> None:
        """Each kind applies what it gathered for the groups the run touched, in
        kind order (sessions.json before the newer SQLite store's metadata);
        then sessions whose provider's own transcript is archived count their
        usage there."""
        kinds = [s for s in all_sources() if type(s).finish_group is not Source.finish_group]
        for group in sorted(self.touched):
            for source in kinds:
                with self.store.transaction():
                    source.finish_group(self.store, *group, self.metadata.get((*group, source.name), {}))
        if self.touched:
            with self.store.transaction():
                count_once_in_provider_transcripts(self.store)

    # -- deferred commits (MariaDB) --------------------------------------------------
    # A store that defers commits stores units in the background while this
    # thread reads and parses the next ones (_Lookahead). A unit counts once
    # its commit has landed; when the background met a failure, every unit
    # whose commit had not landed runs again in the foreground, where its
    # error (if it is its own) gets the usual handling.

    def collect(self) -> None:
        while self.in_flight and self.in_flight[0][2].done:
            unit, part, _commit = self.in_flight.popleft()
            self.count(unit, part)

    def recover(self, failure: BackgroundFailure) -> bool:
        self.collect()
        redo = list(self.in_flight)
        self.in_flight.clear()
        for unit, _part, _commit in redo:
            log.info("running %s again after %s", unit.key, failure)
            part, stop = self.attempt(unit)
            if part is not None:
                self.count(unit, part)
            if stop:
                return False
        return True

    def settle(self) -> bool:
        """Everything in flight landed (or ran again); False: the run must stop."""
        try:
            self.store.settle()
        except BackgroundFailure as failure:
            return self.recover(failure)
        self.collect()
        return True

    def settle_quietly(self) -> None:
        if self.in_flight:
            self.settle()


def count_once_in_provider_transcripts(store: Store) -> int:
    """A session that names the provider's own transcript of its conversation
    (``provider_session_id``: the agent-server's Claude or Codex session) and
    whose transcript is archived on the same server counts its model calls
    there, once: its usage rows are not counted, its totals follow, it links to
    the transcript (``counted_in_session_id``) and its kind is told
    (``Source.usage_deferred``). Idempotent; returns how many sessions changed."""
    pairs = store.tuples(
        "SELECT a.id, a.source, b.session_uuid, a.counted_in_session_id FROM sessions a "
        "JOIN sessions b ON b.server = a.server AND b.session_uuid = a.provider_session_id AND b.id <> a.id "
        "WHERE a.provider_session_id IS NOT NULL")
    if not pairs:
        return 0
    changed = 0
    by_kind: dict[str, list[int]] = {}
    for session_id, kind, transcript, linked in pairs:
        counted = store.tuples("SELECT COUNT(*) FROM messages WHERE session_id = ? AND usage_counted = 1 "
                               "AND cost_source IS NOT NULL", (session_id,))[0][0]
        if not counted and linked == transcript:
            continue
        store.execute("UPDATE messages SET usage_counted = 0 WHERE session_id = ? AND usage_counted = 1 "
                      "AND cost_source IS NOT NULL", (session_id,))
        agg = store.tuples(
            "SELECT SUM(input_tokens * usage_counted), SUM(output_tokens * usage_counted), "
            "SUM(cache_read_tokens * usage_counted), SUM(cache_write_tokens * usage_counted), "
            "SUM(total_tokens * usage_counted), SUM(cost_usd * usage_counted) FROM messages WHERE session_id = ?",
            (session_id,))[0]
        store.update("sessions", session_id, {
            "counted_in_session_id": transcript, "input_tokens": agg[0], "output_tokens": agg[1],
            "cache_read_tokens": agg[2], "cache_write_tokens": agg[3], "total_tokens": agg[4], "cost_usd": agg[5]})
        by_kind.setdefault(kind, []).append(session_id)
        changed += 1
    for source in all_sources():
        if source.kind in by_kind and type(source).usage_deferred is not Source.usage_deferred:
            source.usage_deferred(store, by_kind[source.kind])
    return changed


class _Lookahead:
    """Units read and parsed ahead (units.prefetch) while a store that
    defers commits is still storing earlier ones: the parsing of the next
    units overlaps with the server's work instead of following it.

    Holds at most MAX_FILES units and MAX_BYTES of their new bytes; only
    units whose group's parsed_files rows are already loaded (no query may
    run while the store is busy)."""

    MAX_FILES = 4
    MAX_BYTES = 16 * 1024 * 1024

    def __init__(self, items: list, known: dict, busy: Callable[[], bool]):
        self.items = items
        self.known = known
        self.busy = busy
        self.ready: dict[int, object] = {}  # index in items -> Prefetched or None
        self.sizes: dict[int, int] = {}
        self.next = 0  # the first index not looked at yet

    def fill(self, current: int) -> None:
        """Prefetch unit ``current`` and, while the store is busy, the next ones."""
        self.next = max(self.next, current)
        while self.next < len(self.items):
            if self.next > current and (not self.busy() or len(self.ready) >= self.MAX_FILES
                                        or sum(self.sizes.values()) >= self.MAX_BYTES):
                return
            index, unit = self.next, self.items[self.next]
            if isinstance(unit, Container) or unit.prefetch_limit is None:
                self.next += 1
                continue
            if unit.group not in self.known:
                return  # its rows need a query: wait for the unit's turn
            self.next += 1
            row = self.known[unit.group].get(unit.key)
            if unchanged(row, unit.token):
                continue
            checkpoint = Checkpoint.from_row(row)
            self.ready[index] = prefetch(unit, checkpoint)
            done = checkpoint.offset if checkpoint is not None else 0
            self.sizes[index] = unit.size - min(unit.size, done)

    def take(self, index: int):
        self.sizes.pop(index, None)
        return self.ready.pop(index, None)
