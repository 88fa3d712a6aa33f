"""The export's entry, :func:`export_snapshot`: update the snapshot in place
when it can be (its state file is its own and it was made with the same
shape, zone, redaction setting, store and store schema), else build it in
full; the report says which, and why."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from ..snapshot_state import State, state_path
from ..store import Store, StoreError
from ..zones import resolve_zone
from .facts import read_marker, shape_digest
from .paths import check_target, remove_leftovers, snapshot_path_for
from .report import ExportReport
from .update import update


def export_facts(store: Store, zone_name: str, redact: bool) -> dict[str, str]:
    """What a snapshot must have been made with for an update to be exact."""
    return {"shape": shape_digest(), "timezone": zone_name, "redacted": "yes" if redact else "no",
            "source": str(store.location), "store_schema": str(store.schema_version()),
            "archive_number": str(store.archive_number())}


def _why_full(target: Path, facts: dict, store_seq: int) -> tuple[str | None, State | None, sqlite3.Connection | None]:
    """(why the snapshot must be built in full, or None; its state; a connection to it)."""
    if not target.is_file():
        return "no snapshot yet", None, None
    spath = state_path(target)
    if not spath.is_file():
        return "no state file beside the snapshot", None, None
    try:
        conn = sqlite3.connect(str(target), isolation_level=None, timeout=30)
        marker = read_marker(conn)
    except sqlite3.Error as exc:
        return f"the snapshot cannot be read ({exc})", None, None
    try:
        state = State(spath)
        meta = state.meta()
    except (sqlite3.Error, OSError) as exc:
        conn.close()
        return f"the state file cannot be read ({exc})", None, None
    why = None
    if not marker.get("snapshot_id") or marker.get("snapshot_id") != meta.get("snapshot_id") or \
            marker.get("generation") != meta.get("generation"):
        why = "the state file is not this snapshot's"
    else:
        for key, label in (("shape", "the snapshot's format or AgentBase's version"), ("timezone", "the time zone"),
                           ("redacted", "the redaction setting"), ("source", "the store"),
                           ("archive_number", "the store"), ("store_schema", "the store's schema")):
            if meta.get(key) != facts[key]:
                why = f"{label} changed"
                break
        else:
            if facts["archive_number"] == "None":
                why = "the store has no change log"
            elif int(meta.get("applied_seq") or 0) > store_seq:
                why = "the store is older than the snapshot"
    if why:
        state.close()
        conn.close()
        return why, None, None
    return None, state, conn


def export_snapshot(store: Store, output: str | os.PathLike | None = None, timezone: str | None = None,
                    progress=None, redact: bool = True, full: bool = False) -> ExportReport:
    """Bring the snapshot at ``output`` (default: snapshot.db beside the embedded store) up to date
    with the store: in place when it can be, else built in full (see the module's text).

    ``redact`` (the default) replaces credentials in every transcript text
    with ``[REDACTED:<kind>]`` (see redact.py); the store keeps the originals.
    ``full``: build a new file even when an update could do. An update that
    finds nothing new changes nothing (the report says ``unchanged``).
    """
    started = time.perf_counter()
    target = Path(output).expanduser() if output else snapshot_path_for(store)
    zone_name, zone = resolve_zone(timezone)
    check_target(target)  # before anything is written or removed beside it
    remove_leftovers(target)
    try:
        with store.reading():  # one state of the store for the whole export
            facts = export_facts(store, zone_name, redact)
            seq = store.change_seq()
            why, state, conn = ("asked for (--full)", None, None) if full else _why_full(target, facts, seq)
            if why is None:
                try:
                    report = update(store, target, conn, state, zone, zone_name, redact, seq, progress)
                finally:
                    conn.close()
                    state.close()
                if report is not None:
                    report.elapsed_s = time.perf_counter() - started
                    return report
                why = "the update found changes it cannot apply in place"
            from .build import build  # (here: an update does without the build's modules)

            report = build(store, target, zone, zone_name, redact, facts, seq, progress)
            report.why_full = why
    except sqlite3.Error as exc:  # the disk is full, the store is unreadable...
        raise StoreError(f"export failed: {exc}; {target} is unchanged") from None
    report.elapsed_s = time.perf_counter() - started
    return report
