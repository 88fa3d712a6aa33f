"""A full build: every table copied into a new file (rows prepared by the worker
process, full-text indexes and the session list built beside), the indexes,
counts, marker and facts, ANALYZE; the state file written, then the file put in
place as the newest build behind the snapshot's link (paths.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from datetime import datetime
from pathlib import Path

from .. import derived, shape
from ..snapshot_state import State, state_path
from ..store import Store, private_file
from .ddl import BUSY_WAIT, adopt_fts, create_indexes, create_schema, load_settings
from .facts import finish_counts, refresh_derived, snapshot_facts, table_counts, write_marker
from .paths import generation_file, inspect_path, is_snapshot_file, point
from .report import ExportReport
from .rows import Writer, store_rows, table_plans
from .worker import Preparer, one_process


def build(store: Store, target: Path, zone, zone_name: str, redact: bool, facts: dict, seq: int,
          progress) -> ExportReport:
    """A new snapshot and state file, put in place (the state first, then the link)."""
    # sqlite-utils (the schema here, the session list in the worker) imported once, before any
    # worker forks: each process imported it on its own (with numpy, 0.3-0.6 s apiece), the main
    # one after the index of the known values was built, on the way to the first batch
    import sqlite_utils  # noqa: F401

    snapshot_id = uuid.uuid4().hex
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    spath = state_path(target)
    state_tmp = spath.with_name(f".{spath.name}.tmp-{os.getpid()}")
    older = is_snapshot_file(target)  # an older AgentBase's plain file, whose counts file goes too
    private_file(tmp)  # 0600 in a 0700 folder: the snapshot holds transcripts
    report = ExportReport(str(target), zone_name)
    fts_file = tmp.with_name(tmp.name + "-fts")
    listing_file = tmp.with_name(tmp.name + "-list")
    out = None
    state = State(state_tmp, create=True)
    prep = None
    try:
        state.begin()
        secrets = None
        if redact:
            from .. import redact as R

            if progress:
                progress("credentials")
            pool = one_process()  # (pass 1's: forked before the set exists)
            try:
                secrets = R.collect(store, shape.redact_columns(), pool)
            finally:
                if pool is not None:
                    pool.terminate()
                    pool.join()
            state.add_secrets(secrets.values())
        prep = Preparer(redact, fts_file=fts_file, secrets=secrets)
        # the snapshot's file opened only now, with every worker forked: a child of a process that
        # holds a connection to a file inherits SQLite's record of that process's locks on it, so
        # the worker's own connection to it (the session list, below) would count on locks it does
        # not hold (sqlite.org/howtocorrupt.html, 2.6)
        out = _build_connection(tmp)
        out.execute("BEGIN")
        create_schema(out)
        for fts in (shape.FTS_TABLE, shape.TOOL_FTS_TABLE):
            load_settings(out, fts)
        writer = Writer(out, state, prep, zone, redact)
        for plan in table_plans(store):
            if progress:
                progress(plan.name)
            for rows in store_rows(store, plan):
                writer.copy(plan, rows)
            prep.drain()
            report.rows[plan.name] = writer.counts.get(plan.name, 0)
        # the worker completes its full-text indexes (commit, optimize), then builds the session list
        # from the committed rows, while this process makes the indexes (after every table's rows:
        # until then it redacts them). The list's queries read messages and tool calls by session:
        # those indexes first. (At a million messages the list is 3 s of the main process's time.)
        prep.close_index()
        listing = None
        if prep.pool is not None:
            create_indexes(out, redact, leading="session_id")
            out.execute("COMMIT")
            # the worker reads the rows, this process writes (else: the list is built here)
            if out.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal":
                listing = prep.derive(tmp, listing_file)
            out.execute("BEGIN")
        create_indexes(out, redact)
        report.secrets_redacted = finish_counts(out, None, redact)
        if listing is None:
            report.rows[derived.TABLE] = refresh_derived(out, None)
        else:
            listing.get()
            out.execute("ATTACH DATABASE ? AS listing", (str(listing_file),))
            report.rows[derived.TABLE] = derived.copy_session_list(out, "listing")
        counts = table_counts(out)
        report.rows["redactions"] = counts[shape.REDACTIONS]
        marker = {"exported_at": datetime.now(tz=None).astimezone().isoformat(timespec="seconds"),
                  "updated_at": None, "timezone": zone_name, "source": store.location,
                  "redacted": "yes" if redact else "no",
                  "secrets_redacted": str(report.secrets_redacted) if redact else "",
                  "snapshot_id": snapshot_id, "generation": "1", "format": str(shape.FORMAT),
                  "counts": json.dumps(counts)}
        write_marker(out, marker)
        out.executemany(f"INSERT INTO {shape.FACTS} (name, value) VALUES (?, ?)",
                        [(k, json.dumps(v)) for k, v in snapshot_facts().items()])
        state.set_meta({**facts, "snapshot_id": snapshot_id, "generation": "1", "applied_seq": str(seq)})
        out.execute("COMMIT")
        if listing is not None:
            out.execute("DETACH DATABASE listing")  # (not in the transaction that read it)
            listing_file.unlink()
        if prep.finish_index():
            out.close()
            out = None
            adopt_fts(tmp, fts_file)
            fts_file.unlink()
            out = _build_connection(tmp)
        prep.close()
        state.commit()
        for fts in (shape.FTS_TABLE, shape.TOOL_FTS_TABLE):
            out.execute(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')")
        out.execute("ANALYZE")
        out.execute("PRAGMA journal_mode = WAL")  # updated in place from now on, while Datasette reads it
        out.close()
        out = None
        state.close()
        for path in (tmp, state_tmp):
            with open(path, "rb+") as f:
                os.fsync(f.fileno())
        real = generation_file(target, snapshot_id)
        os.replace(tmp, real)
        # the state first: a snapshot without its own state is rebuilt, never updated with another's
        os.replace(state_tmp, spath)
        point(target, real)
        if older and inspect_path(target).is_file() and not inspect_path(target).is_symlink():
            inspect_path(target).unlink()  # that older snapshot's counts file: served live now
    except BaseException:
        if prep is not None:
            prep.close()
        if out is not None:
            out.close()
        state.close()
        for leftover in (tmp, state_tmp, fts_file, listing_file,
                         *(tmp.with_name(tmp.name + end) for end in ("-wal", "-shm"))):
            if leftover.exists():
                leftover.unlink()
        raise
    report.bytes = target.stat().st_size
    return report


def _build_connection(path: Path) -> sqlite3.Connection:
    out = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_WAIT)
    out.execute("PRAGMA page_size = 16384")
    out.execute("PRAGMA journal_mode = OFF")  # a temporary file: a failure discards it whole
    out.execute("PRAGMA synchronous = OFF")
    out.execute("PRAGMA cache_size = -65536")
    return out
