"""The snapshot's schema: every table of shape.py through sqlite-utils (columns
in reading order, primary and foreign keys, SQLite's generated columns in the
same statement, views), the contentless FTS5 tables (plain SQL: sqlite-utils
does not declare them), the indexes, and copying a worker's full-text index in."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from .. import shape
from ..search import TOKENIZE, copy_index
from ..snapshot_state import BUSY_WAIT  # (the build's files wait as its state file does)



# The full-text indexes a build's worker process fills (worker.py), then copied into the snapshot.
WORKER_FTS = (shape.FTS_TABLE, shape.TOOL_FTS_TABLE)

_PY_TYPES = {"pk": int, "int": int, "bigint": int, "bool": int, "decimal": float, "float": float}


def _generated_ddl(ddl: str, gen: dict[str, str]) -> str:
    """sqlite-utils' CREATE TABLE with the generated columns' definitions in their place (it
    declares no generated columns: each is given to it as a plain column, then made one here)."""
    for column, expr in gen.items():
        line = re.compile(rf'(\n\s+"{re.escape(column)}" [A-Z]+)(,?\n)')
        ddl, n = line.subn(lambda m: f"{m.group(1)} GENERATED ALWAYS AS ({expr}) VIRTUAL{m.group(2)}", ddl, count=1)
        if n != 1:
            raise RuntimeError(f"the snapshot's DDL has no column {column}")
    return ddl


def create_schema(conn: sqlite3.Connection) -> None:
    """Every table (through sqlite-utils: its columns in reading order, the primary key, the
    archive's foreign keys; the generated columns made so in the same statement), the full-text
    indexes, the marker and the redactions table."""
    import sqlite_utils  # (here: an update with nothing new makes no table; sqlite-utils imports numpy)

    db = sqlite_utils.Database(conn)
    for name in tuple(shape.tables()):
        cols = shape.base_columns(name)
        names = {c for c, _ in cols}
        types = {c: _PY_TYPES.get(t.partition("=")[0], str) for c, t in cols}
        fks = [fk for fk in shape.FOREIGN_KEYS.get(name, []) if fk[0] in names]
        ddl = db.create_table_sql(shape.base_table(name), types, pk="id", foreign_keys=fks)
        conn.execute(_generated_ddl(ddl, shape.generated(name)))
        if name in shape.VIEWS:
            db.create_view(name, shape.view_sql(name))
    # Contentless FTS5 (no copy of the text): sqlite-utils' enable_fts makes external-content tables
    # over a column, and the indexed text here is computed (message_search_text, tool_call_search_text).
    for fts in (shape.FTS_TABLE, shape.TOOL_FTS_TABLE):
        create_fts(conn, fts)
    db.create_table(shape.MARKER, {"key": str, "value": str}, pk="key")
    db.create_table(shape.FACTS, {c: str for c, _ in shape.FACTS_COLUMNS}, pk="name")
    db.create_table(shape.REDACTIONS, {c: int if t == "INTEGER" else str for c, t in shape.REDACTIONS_COLUMNS})


def create_fts(conn: sqlite3.Connection, fts: str) -> None:
    conn.execute(f"CREATE VIRTUAL TABLE [{fts}] USING fts5({shape.FTS_COLUMN}, content='', tokenize='{TOKENIZE}')")


def load_settings(conn: sqlite3.Connection, fts: str) -> None:
    """Fewer, larger merges while loading; 'optimize' merges all at the end. A 64 MB term buffer
    (the default is 1 MB) writes far fewer small segments to merge: the index of a million messages
    in a quarter less time (27 s -> 20 s here)."""
    conn.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('automerge', 16)")
    conn.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('hashsize', ?)", (64 * 2**20,))


def adopt_fts(path: Path, fts_file: Path) -> None:
    """Copy the index the worker built into the snapshot's (empty) one, through a connection of its
    own: the build's connection, reopened after, reads it as any other change made elsewhere."""
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_WAIT)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("ATTACH DATABASE ? AS worker", (str(fts_file),))
        conn.execute("BEGIN")
        for fts in WORKER_FTS:
            copy_index(conn, fts, "worker")
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE worker")
    finally:
        conn.close()


def create_indexes(conn: sqlite3.Connection, redact: bool, leading: str | None = None) -> None:
    """The tables' indexes (``leading``: only those whose first column it is; those made already
    are left as they are)."""
    import sqlite_utils

    db = sqlite_utils.Database(conn)
    wanted = [(shape.base_table(table.name), shape.index_name(table.name, cols), cols)
              for table in shape.tables().values() for cols in table.indexes]
    wanted += [(shape.REDACTIONS, shape.index_name(shape.REDACTIONS, cols), cols) for cols in shape.REDACTIONS_INDEXES]
    for table, name, cols in wanted:
        if leading is None or cols[0] == leading:
            db[table].create_index(list(cols), index_name=name, if_not_exists=True)
