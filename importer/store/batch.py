"""A run's units into the store: ``with store.batch(units, landed) as b: b.submit(unit, job)``.

The pipeline hands every unit it does not skip to a batch, with the job that
imports it (one transaction, its own errors handled); the batch runs it and
calls ``landed(unit, result)`` once what the job wrote is committed, in the
order the units were submitted. How and when that happens is the store's:

* :class:`WriteBatch` (the embedded SQLite store): a job commits at once, so
  it lands as soon as it returns.
* :class:`DeferredWriteBatch` (MariaDB, whose sender thread commits in the
  background): a job returns before its commit has landed, so the next units
  are read and parsed (:class:`_Lookahead`) while the server stores the
  earlier ones. The batch keeps the units in flight, and when the background
  meets a failure (``BackgroundFailure``: everything not yet landed was rolled
  back) it runs each of them again in the foreground, one by one, where a
  unit's own error gets its job's usual handling.

A job is ``job(ready) -> (result, go_on)``: ``ready`` is the unit already read
and parsed (:class:`units.Prefetched`) or None, ``result`` whatever ``landed``
is given, ``go_on`` False when the run must stop (its source is gone). A job
may be run twice (the first result is then dropped): it must change nothing
outside the store before its result lands.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable

from ..units import Checkpoint, Container, prefetch, unchanged
from .common import BackgroundFailure, Commit

log = logging.getLogger("agentbase")

Job = Callable[[Any], tuple[Any, bool]]
Landed = Callable[[Any, Any], None]


class WriteBatch:
    """Units whose commits land at once (the embedded store's)."""

    def __init__(self, store, units: list, landed: Landed):
        self.store = store
        self.units = units
        self.landed = landed
        self.known: dict[tuple[str, str], dict] = {}  # parsed_files rows by group, then by key

    def __enter__(self) -> "WriteBatch":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self.flush()
        else:
            self._flush_quietly()

    def rows(self, group: tuple[str, str]) -> dict:
        """The ``parsed_files`` rows of a (server, agent) group, by key, as
        this run found them (loaded once)."""
        rows = self.known.get(group)
        if rows is None:
            rows = self.known[group] = self.store.parsed_files(*group)
        return rows

    def submit(self, unit, job: Job) -> bool:
        """Run ``job`` for ``unit``; ``landed`` gets its result once it is
        committed. False: the run must stop."""
        result, go_on = job(None)
        self.landed(unit, result)
        return go_on

    def flush(self) -> bool:
        """Everything submitted has landed; False: the run must stop."""
        return True

    def _flush_quietly(self) -> None:
        """On the way out of a failed run: what landed is counted, nothing raised."""


# A job that committed nothing in the background (it failed, or was rolled back).
_LANDED = Commit()
_LANDED.done = True


class DeferredWriteBatch(WriteBatch):
    """Units whose commits a store defers (MariaDB's sender thread).

    The store must offer ``expect(groups)`` (a hint: the groups the run
    imports), ``deferring()`` (a context inside which its transactions
    return before their commit lands, leaving the last one's :class:`Commit`
    in ``last_commit``), ``busy()`` and ``settle()`` (wait for every deferred
    commit; raises BackgroundFailure when one failed)."""

    def __init__(self, store, units: list, landed: Landed):
        super().__init__(store, units, landed)
        self.position = {id(u): i for i, u in enumerate(units)}
        self.in_flight: deque = deque()  # (unit, job, result, Commit) not yet landed
        self.stopped = False
        groups = sorted({u.group for u in units})
        store.expect(groups)
        for group in groups:  # loaded now: later, a query would wait for the background writes
            self.known[group] = store.parsed_files(*group)
        self.ahead = _Lookahead(units, self.known, store.busy)

    def rows(self, group: tuple[str, str]) -> dict:
        if group not in self.known:
            self.flush()  # a query waits for the background: meet its failure here
        return super().rows(group)

    def submit(self, unit, job: Job) -> bool:
        if self.stopped:
            return False
        index = self.position.get(id(unit))
        if index is None or unit.prefetch_limit is None:
            # Not one of the listing's units (it reads through an open
            # container), or not to be read ahead: in the foreground.
            if not self.flush():
                return False
            return super().submit(unit, job)
        self.ahead.fill(index)  # this unit, and the next ones while the store is busy
        ready = self.ahead.take(index)
        store = self.store
        try:
            with store.deferring():
                store.last_commit = None
                result, go_on = job(ready)
                commit = store.last_commit
        except BackgroundFailure as failure:
            if not self._recover(failure):
                return False
            return super().submit(unit, job)
        self.in_flight.append((unit, job, result, commit or _LANDED))
        self._collect()
        return go_on

    def flush(self) -> bool:
        try:
            self.store.settle()
        except BackgroundFailure as failure:
            return self._recover(failure)
        self._collect()
        return not self.stopped

    def _flush_quietly(self) -> None:
        try:
            self.store.settle()
        except Exception:  # the run is failing already: its own error is the one to report
            pass
        self._collect()

    def _collect(self) -> None:
        while self.in_flight and self.in_flight[0][3].done:
            unit, _job, result, _commit = self.in_flight.popleft()
            self.landed(unit, result)

    def _recover(self, failure: BackgroundFailure) -> bool:
        """Every unit whose commit had not landed, again in the foreground."""
        self._collect()
        redo = list(self.in_flight)
        self.in_flight.clear()
        for unit, job, _result, _commit in redo:
            log.info("running %s again after %s", unit.key, failure)
            result, go_on = job(None)
            self.landed(unit, result)
            if not go_on:
                self.stopped = True
                return False
        return True


class _Lookahead:
    """Units read and parsed ahead (units.prefetch) while a store that
    defers commits is still storing earlier ones: the parsing of the next
    units overlaps with the server's work instead of following it.

    Holds at most MAX_FILES units and MAX_BYTES of their new bytes; only
    units whose group's parsed_files rows are already loaded (no query may
    run while the store is busy), each within its own ``prefetch_limit``."""

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
