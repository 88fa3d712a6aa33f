"""The import pipeline: sources -> units -> reader/parser -> writer -> store.

``run_import`` lists the sources (or takes a listing made elsewhere: a remote
server's), skips every unit (and container) whose change token is what its
checkpoint says, submits each other unit to the store's batch
(``store.batch``: one transaction per unit, which the store commits at once or
in the background and runs again when that fails), counts each unit's figures
once its commit has landed, and at the end lets each kind apply what it
gathered for the groups the run touched (session metadata). One bad unit never
stops the others. Nothing here asks what kind a unit is, nor which engine the
store runs on.
"""

from __future__ import annotations

import gc
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Callable, Protocol

import orjson

from .sources import Discovery, Source, all_sources, discover
from .store import RowRejected, Store
from .schema import COUNTED_USAGE, USAGE_TOTALS
from .units import Checkpoint, Container, NotATranscript, SourceError, SourceLost, unchanged
from .writer import ImportReport, import_one, record_problem, unit_row

class Progress(Protocol):
    """What a run tells a progress display, in files: the unit of the
    summary's ``files seen`` (a container such as a SQLite store is not one;
    each session it holds is)."""

    def grow(self, files: int) -> None:
        """The files to come grew (or shrank) by ``files``: a container, once
        opened, holds more (or fewer) than its last run recorded."""

    def advance(self, files: int) -> None:
        """``files`` more were seen."""


class _NoProgress:
    def grow(self, files: int) -> None:
        pass

    def advance(self, files: int) -> None:
        pass


@dataclass
class _Done:
    """What a unit's attempt gives to count once it has landed: its figures,
    or its failure, or that it is not of its kind."""

    part: ImportReport | None = None
    failure: tuple[str, str] | None = None
    ignored: bool = False
    reason: str | None = None  # why an ignored unit is not its kind's


def run_import(
    store: Store,
    paths: list[str],
    server: str | None = None,
    agent: str | None = None,
    progress: Callable[[int], AbstractContextManager[Progress]] | None = None,
    sources: Discovery | None = None,
    fs=None,
) -> ImportReport:
    """Import every unit under ``paths``; one bad unit never stops the others.

    ``sources``, when given, is an already made listing (a remote server's,
    see sync.py) imported instead of discovering ``paths``. ``progress``, when
    given, is called with the files the run expects to see and gives the
    :class:`Progress` it tells as it goes: at the end, when the run was not
    stopped, it has advanced by the summary's ``files seen``.
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
        self.touched: set[tuple[str, str]] = set()  # groups whose kinds finish at the end
        self.metadata: dict[tuple[str, str, str], dict] = {}  # (server, agent, source name) -> session metadata
        self.batch = None
        # (server, kind) -> [changed units read, changed units not recognised as the kind's, their paths]
        self.kinds: dict[tuple[str, str], list] = {}
        self.first_seen: set[tuple[str, str]] = set()  # (server, key) of units never archived before
        self.progress: Progress = _NoProgress()

    def run(self, found: Discovery, progress, started: float) -> ImportReport:
        report = self.report
        report.warnings.extend(found.warnings)
        for message in found.errors:
            report.failures.append(("", message))
            report.files_failed += 1
        items = found.units
        with self.store.batch(items, self.count) as batch:
            self.batch = batch
            go_on = True
            with progress(self.expected(items)) if progress else nullcontext(_NoProgress()) as self.progress:
                for item in items:
                    go_on = self.container(item) if isinstance(item, Container) else self.unit(item)
                    if not go_on:
                        break
        if go_on:
            self.finish_groups()
        self.silent_kinds()
        self.report.elapsed_s = time.perf_counter() - started
        return self.report

    def expected(self, items: list) -> int:
        """The files the run will see, as far as the listing tells: its counted
        units, and what each container held when last recorded (0 for one
        never opened: :meth:`container` corrects it once open)."""
        files = 0
        for item in items:
            if isinstance(item, Container):
                row = self.batch.rows(item.group).get(item.key)
                files += (row["parsed_lines"] or 0) if row is not None else 0
            elif item.counted:
                files += 1
        return files

    def seen(self, files: int) -> None:
        self.report.files_seen += files
        self.progress.advance(files)

    # -- one unit ------------------------------------------------------------

    def unit(self, unit, rows: dict | None = None) -> bool:
        """Skip the unit if unchanged, else submit it; False: the run must stop
        (the connection to its source is gone)."""
        report = self.report
        if rows is None:
            rows = self.batch.rows(unit.group)
        row = rows.get(unit.key)
        if row is None:
            self.first_seen.add((unit.server, unit.key))
        if unit.counted:
            self.seen(1)
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
        return self.batch.submit(unit, lambda ready: self.attempt(unit, ready))

    def attempt(self, unit, ready=None) -> tuple["_Done", bool]:
        """One unit in one transaction, a failure recorded here. Returns (what
        to count once it has landed, whether the run may go on: False when the
        connection to the source went away). Counts nothing itself: the
        batch may run it again."""
        store = self.store
        try:
            return _Done(part=import_one(store, unit, ready)), True
        except SourceLost as exc:
            # This unit (rolled back) and the ones after it stay as recorded, for the next run.
            return _Done(failure=(unit.key, str(exc))), False
        except NotATranscript as exc:
            record_problem(store, unit, "ignored", str(exc))
            return _Done(ignored=True, failure=None, reason=str(exc)), True
        except (OSError, SourceError, orjson.JSONDecodeError, UnicodeDecodeError, RowRejected) as exc:
            reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            message = f"cannot read {unit.key}: {reason}"
            record_problem(store, unit, "failed", message)
            return _Done(failure=(unit.key, message)), True

    def count(self, unit, done: "_Done") -> None:
        """Add a landed unit's figures to the run's."""
        report = self.report
        if done.failure is not None:
            report.failures.append(done.failure)
            report.files_failed += 1
            return
        tally = self.kinds.setdefault((unit.server, unit.source.kind), [0, 0, []]) if not unit.named else [0, 0, []]
        part = done.part
        # Not recognised: not the kind's, or a file never seen before that gave no message and records
        # the kind does not know (a header-only file, a session just begun, gives neither: not a sign).
        if done.ignored or (not part.messages_added and part.unknown_entries
                            and (unit.server, unit.key) in self.first_seen):
            tally[1] += 1
            if len(tally[2]) < 1000:
                tally[2].append(unit.path)
        else:
            tally[0] += 1
        if done.ignored:
            report.files_ignored += 1
            report.not_read.append((unit.key, done.reason or unit.source.not_this_kind()))
            return
        report.add(part)
        report.warnings.extend(part.warnings)
        self.touched.add(unit.group)
        if unit.counted:
            if part.files_unchanged:
                report.files_unchanged += 1
            else:
                report.files_imported += 1

    def silent_kinds(self) -> None:
        """A kind whose changed files this run were none of them recognised has
        likely changed its format: say so (per server and kind), once."""
        for (server, kind), (read, unread, paths) in sorted(self.kinds.items()):
            if read or not unread:
                continue
            where = _common_folder(paths)
            self.report.warnings.append(
                f"format not recognised: {unread} {kind} file{'s' if unread != 1 else ''} changed"
                f"{f' under {where}' if where else ''} on {server}, none read (a new {kind} format?)")

    # -- a container -------------------------------------------------------------

    def container(self, item: Container) -> bool:
        """Every unit of a container, each in its own transaction; the
        container itself is recorded (with how many units it holds) and not
        opened again while its token stands. False: the run must stop."""
        report = self.report
        if not self.batch.flush():  # what came before has landed: the container's writes follow it
            return False
        rows = self.batch.rows(item.group)
        row = rows.get(item.key)
        recorded = (row["parsed_lines"] or 0) if row is not None else 0  # what expected() counted for it
        if unchanged(row, item.token):
            self.seen(recorded)
            report.files_unchanged += recorded
            return True
        failed_before = report.files_failed
        try:
            with item.open() as opened:
                report.warnings.extend(opened.warnings)
                self.progress.grow(sum(1 for unit in opened.units if unit.counted) - recorded)
                recorded = 0
                for unit in opened.units:
                    if not self.unit(unit, rows=rows):
                        return False
                if not self.batch.flush():  # its units have landed before it closes and is recorded
                    return False
                metadata = opened.metadata()
                units = len(opened.units)
        except SourceLost as exc:
            report.failures.append((item.key, str(exc)))
            report.files_failed += 1
            return False
        except (SourceError, OSError) as exc:
            self.progress.grow(-recorded)  # not opened: none of what it held was seen
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


def _common_folder(paths: list[str]) -> str | None:
    """The deepest folder holding every path (POSIX paths, local or remote)."""
    if not paths:
        return None
    parts = [p.split("/")[:-1] for p in paths]
    common = parts[0]
    for other in parts[1:]:
        n = 0
        while n < len(common) and n < len(other) and common[n] == other[n]:
            n += 1
        common = common[:n]
    return "/".join(common) or "/" if common else None


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
        totals = store.tuples(f"SELECT {COUNTED_USAGE} FROM messages WHERE session_id = ?", (session_id,))[0]
        store.update("sessions", session_id, {"counted_in_session_id": transcript, **dict(zip(USAGE_TOTALS, totals))})
        by_kind.setdefault(kind, []).append(session_id)
        changed += 1
    for source in all_sources():
        if source.kind in by_kind and type(source).usage_deferred is not Source.usage_deferred:
            source.usage_deferred(store, by_kind[source.kind])
    return changed
