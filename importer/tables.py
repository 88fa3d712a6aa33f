"""How a snapshot table is declared (:class:`Table`): the type ``shape.TABLES`` declares the
archive's tables with and a source kind its own (``Source.snapshot_tables``).

It stands on the ground floor, importing nothing of the importer, so that a kind declares its
tables without reaching up into the snapshot's shape (shape.py reads the kinds' declarations).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """One archive table as the snapshot holds it."""

    name: str
    # Archive-internal columns the explorer has no use for.
    leave_out: tuple[str, ...] = ()
    # A UTC column after which ``day`` (YYYY-MM-DD) and ``local_time`` go, in the export's zone.
    local_time_from: str | None = None
    # Columns the redaction's detector reads for credentials, and where what it
    # replaces is counted (every text column of every table is replaced).
    redact: tuple[str, ...] = ()
    # The snapshot-only ``secrets_redacted`` count goes before this column.
    count_before: str | None = None
    # Indexes: the design's, plus every facet and sort of metadata.yml.
    indexes: tuple[tuple[str, ...], ...] = ()
    # Reading order: these columns first (after id), ``last`` at the end, the rest between in the
    # archive's order. (A stored long text should stay last: SQLite walks overflow pages to reach a
    # column stored after one; generated columns are stored nowhere.)
    first: tuple[str, ...] = ()
    last: tuple[str, ...] = ()
