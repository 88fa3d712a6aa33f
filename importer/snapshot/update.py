"""An update in place, in one write transaction: the sessions the store's change
log names since the snapshot last saw it, and the tables of no session compared
whole; a row is written again only when its hash differs from the state
file's, rows the store lost are removed, with their full-text rows and
redaction counts. A newly found credential overlapping a known one (or another
export having got there first) sends it back to a full build (None)."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path

from .. import derived, shape
from ..snapshot_state import State, row_hash
from ..store import Store
from .facts import finish_counts, read_marker, refresh_derived, write_marker
from .report import ExportReport
from .rows import BATCH, Plan, Writer, store_rows, store_rows_by_id, table_plans
from .worker import Preparer


def update(store: Store, target: Path, conn: sqlite3.Connection, state: State, zone, zone_name: str,
           redact: bool, seq: int, progress) -> ExportReport | None:
    """Apply the store's changes since the snapshot last saw it, in one transaction; None when a
    full build must do it instead."""
    # the snapshot's write lock first: what the update reads of it is what it changes
    conn.execute("BEGIN IMMEDIATE")
    state.begin()
    meta = state.meta()
    if read_marker(conn).get("generation") != meta.get("generation"):  # another export got here first
        conn.execute("ROLLBACK")
        state.rollback()
        return None
    applied = int(meta.get("applied_seq") or 0)
    touched = store.changed_sessions(applied, seq)
    plans = table_plans(store)
    # 1. which rows differ (their hash), which are gone; then the credentials of the rows that differ
    changes: dict[str, tuple[set, set]] = {plan.name: _differences(store, conn, state, plan, touched)
                                           for plan in plans}
    if not any(w or g for w, g in changes.values()):
        # nothing new (and so no credential new either): redact.py and its detectors (detect-secrets,
        # requests: a third of such a sync's instructions) are not even imported
        conn.execute("ROLLBACK")
        state.rollback()
        report = ExportReport(str(target), zone_name, unchanged=True, mode="update")
        report.bytes = target.stat().st_size
        return report
    known, new_values = None, []
    if redact:
        from .. import redact as R

        detect = shape.redact_columns()
        detections: list[tuple[str, str]] = []
        for plan in plans:
            write = changes[plan.name][0]
            if write and plan.name in detect:
                for rows in store_rows_by_id(store, plan, sorted(write)):
                    detections += R.detect_rows(plan.name, plan.select, rows, tuple(detect[plan.name]))
        known = R.SecretSet(state.secrets())
        new_values = known.newer(detections)
    secrets = known
    if new_values:
        if _overlaps(known, new_values):
            conn.execute("ROLLBACK")
            state.rollback()
            return None  # a new value inside a known one (or the reverse): replaced anew only by a full build
        secrets = R.SecretSet([*known.values(), *new_values])
        # rows exported before that hold a new value (or one now of another kind) are written again
        fresh = R.SecretSet(new_values)
        for plan in plans:
            changes[plan.name][0].update(_holding(conn, plan, fresh))
    prep = Preparer(redact, parallel=sum(len(w) for w, _ in changes.values()) > 20 * BATCH,
                    secrets=secrets)
    writer = Writer(conn, state, prep, zone, redact)
    try:
        changed: dict[str, int] = {}
        # A tool call's arguments and result preview are its messages' (its view): those of a
        # message written again or gone are written again too. Rows go first, the tables that
        # depend on others before these: a tool call's old search text is read through its view
        # while its messages are still as they were.
        if "tool_calls" in changes:
            messages_write, messages_gone = changes["messages"]
            linked = _present(conn, "messages", messages_write) | messages_gone
            changes["tool_calls"][0].update(_calls_of(conn, linked))
        for plan in reversed(plans):
            write, gone = changes[plan.name]
            writer.remove(plan, sorted(gone | _present(conn, plan.target, write)))
        for plan in plans:
            write, gone = changes[plan.name]
            for rows in store_rows_by_id(store, plan, sorted(write)):
                writer.copy(plan, rows)
            prep.drain()
            changed[plan.name] = len(write | gone)
        prep.close()
        sessions = set(touched) | writer.sessions_written
        secrets_total = finish_counts(conn, sessions, redact)
        refresh_derived(conn, sessions)
        marker = read_marker(conn)
        counts = json.loads(marker.get("counts") or "{}")
        for name, delta in writer.counts.items():
            counts[name] = counts.get(name, 0) + delta
        for name in (shape.REDACTIONS, derived.TABLE):  # (small: counted)
            counts[name] = conn.execute(f"SELECT COUNT(*) FROM [{name}]").fetchone()[0]
        generation = str(int(marker.get("generation") or 0) + 1)
        write_marker(conn, {"updated_at": datetime.now(tz=None).astimezone().isoformat(timespec="seconds"),
                            "secrets_redacted": str(secrets_total) if redact else "",
                            "generation": generation, "counts": json.dumps(counts)})
        if new_values:
            state.add_secrets(new_values)
        state.set_meta({"generation": generation, "applied_seq": str(seq)})
        conn.execute("COMMIT")
        state.commit()
    except BaseException:
        prep.close()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        state.rollback()
        raise
    report = ExportReport(str(target), zone_name, mode="update", changed=changed,
                          sessions_changed=len(sessions))
    report.rows = {t: counts.get(t, 0) for t in tuple(shape.tables())}
    report.secrets_redacted = secrets_total
    report.bytes = target.stat().st_size
    return report


def _differences(store: Store, conn: sqlite3.Connection, state: State, plan: Plan,
                 touched: list[int]) -> tuple[set, set]:
    """(ids of the store's rows to write: new, or with another hash; ids of the snapshot's rows the
    store no longer has) among the rows of the touched sessions, of no session, or (a table of no
    session) all."""
    write: set[int] = set()
    seen: set[int] = set()
    snap_ids: set[int] = set()

    def compare(rows) -> None:
        hashes = state.hashes(plan.number, [r[0] for r in rows])
        for row in rows:
            seen.add(row[0])
            if hashes.get(row[0]) != row_hash(row):
                write.add(row[0])

    if plan.session_col is None:
        for rows in store_rows(store, plan):
            compare(rows)
        snap_ids = set(state.hashes(plan.number))
    else:
        col = plan.session_col
        for i in range(0, len(touched), 500):
            chunk = tuple(touched[i:i + 500])
            marks = ", ".join("?" * len(chunk))
            for rows in store_rows(store, plan, f"[{col}] IN ({marks})", chunk):
                compare(rows)
            snap_ids.update(r[0] for r in conn.execute(f"SELECT id FROM [{plan.target}] WHERE [{col}] IN ({marks})",
                                                       chunk))
        if col != "id":  # rows of no session yet (a source kind links them later)
            for rows in store_rows(store, plan, f"[{col}] IS NULL"):
                compare(rows)
            snap_ids.update(r[0] for r in conn.execute(f"SELECT id FROM [{plan.target}] WHERE [{col}] IS NULL"))
    gone = snap_ids - seen
    if gone and plan.session_col is not None:
        # a row that moved to a session not touched is still in the store: written again, not lost
        ids = sorted(gone)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            moved = {r[0] for r in store.tuples(f"SELECT id FROM [{plan.name}] WHERE id IN "
                                                f"({', '.join('?' * len(chunk))})", tuple(chunk))}
            write |= moved
            gone -= moved
    return write, gone


def _present(conn: sqlite3.Connection, table: str, ids) -> set[int]:
    ids = sorted(ids)
    out: set[int] = set()
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        out.update(r[0] for r in conn.execute(f"SELECT id FROM [{table}] WHERE id IN ({', '.join('?' * len(chunk))})",
                                              chunk))
    return out


def _calls_of(conn: sqlite3.Connection, message_ids: set[int]) -> set[int]:
    """The tool calls whose call or result is one of these messages (the view takes their arguments
    and result preview from there)."""
    ids = sorted(message_ids)
    out: set[int] = set()
    base = shape.base_table("tool_calls")
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ", ".join("?" * len(chunk))
        out.update(r[0] for r in conn.execute(f"SELECT id FROM [{base}] WHERE message_id IN ({marks}) UNION "
                                              f"SELECT id FROM [{base}] WHERE result_message_id IN ({marks})",
                                              chunk + chunk))
    return out


def _overlaps(known, new_values) -> bool:
    """Whether a new value contains a known one or is contained in one: the rows holding it had
    the known value replaced first, so only a full build replaces them as it would."""
    if known is None or not known:
        return False
    olds = list(known.kinds)
    for value, _kind in new_values:
        for old in olds:
            if old != value and (old in value or value in old):
                return True
    return False


def _holding(conn: sqlite3.Connection, plan: Plan, secrets) -> set[int]:
    """The ids of the snapshot's rows whose text holds a value of ``secrets`` (in any of its forms)."""
    from .. import redact as R

    text_cols = [c for c, t in shape.stored(plan.name) if t.startswith("str") or t in ("text", "json")]
    if not text_cols:
        return set()
    select = (f"SELECT id, {', '.join(f'[{c}]' for c in text_cols)} FROM [{plan.target}] WHERE id > ? "
              f"ORDER BY id LIMIT {BATCH}")
    out: set[int] = set()
    last = -(2 ** 63)
    while True:
        rows = conn.execute(select, (last,)).fetchall()
        if not rows:
            return out
        hit = secrets.rows_hit([R.row_text(r[1:]) for r in rows])
        out.update(rows[i][0] for i in hit)
        last = rows[-1][0]
