"""What the snapshot says of itself: its marker (``shape.MARKER``: format, zone,
counts, ids), its facts table (``shape.FACTS``: what the pages need of the
kinds), the redaction counts per session, and the shape digest that decides
whether an existing snapshot can be updated."""

from __future__ import annotations

import sqlite3

import orjson

from .. import derived, shape
from ..search import TOKENIZE
from ..snapshot_state import row_hash


def shape_digest() -> str:
    """Changes whenever the snapshot's shape would: tables, columns, expressions, indexes, format, version."""
    from .. import __version__

    parts = [__version__, shape.FORMAT, TOKENIZE, snapshot_facts()]
    for name, table in shape.tables().items():
        parts.append([name, shape.columns(name), sorted(shape.generated(name).items()), table.indexes, table.redact,
                      shape.view_sql(name) if name in shape.VIEWS else None])
    return row_hash(tuple(orjson.dumps(parts, default=str).decode()[i::7] for i in range(7))).__format__("x")


def snapshot_facts() -> dict[str, object]:
    """What the pages need to know of the kinds and the shape (shape.FACT_KEYS), as the snapshot's
    facts table holds it: the plugin reads it there and imports no kind."""
    from ..sources import all_sources

    shell: dict[str, set[str]] = {}
    queries: dict[str, dict] = {}
    latest: dict[str, str] = {}
    for source in all_sources():
        shell.setdefault(source.kind, set()).update(source.shell_tools or ())
        for name, query in (getattr(source, "canned_queries", None) or {}).items():
            query = dict(query)
            tables = query.pop("tables", None) or [t.name for t in getattr(source, "snapshot_tables", ()) or ()]
            what = query.pop("latest_day_of", None)
            if name not in queries:
                queries[name] = {"query": query, "tables": list(tables)}
                if what:
                    latest[name] = what
    return {"shell_tools": {kind: sorted(tools) for kind, tools in shell.items()},
            "canned_queries": queries, "latest_day_of": latest,
            "tables": list(shape.tables()), "views": dict(shape.VIEWS),
            "render_columns": {"blocks": sorted(shape.BLOCK_COLUMNS), "json": sorted(shape.JSON_COLUMNS),
                               "thinking": sorted(shape.THINKING_COLUMNS)}}


def read_marker(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(conn.execute(f"SELECT key, value FROM {shape.MARKER}"))
    except sqlite3.Error:
        return {}


def write_marker(conn: sqlite3.Connection, values: dict) -> None:
    conn.executemany(f"INSERT OR REPLACE INTO {shape.MARKER} (key, value) VALUES (?, ?)",
                     [(k, None if v is None else str(v)) for k, v in values.items()])


def finish_counts(conn: sqlite3.Connection, sessions, redact: bool) -> int | None:
    """sessions.secrets_redacted for ``sessions`` (None: all), and the snapshot's total."""
    if not redact:
        return None
    if sessions is None:
        conn.execute(f"UPDATE sessions SET [{shape.COUNT_COLUMN}] = COALESCE("
                     f"(SELECT SUM(count) FROM {shape.REDACTIONS} r WHERE r.session_id = sessions.id), 0)")
    else:
        ids = sorted(sessions)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            conn.execute(f"UPDATE sessions SET [{shape.COUNT_COLUMN}] = COALESCE((SELECT SUM(count) FROM "
                         f"{shape.REDACTIONS} r WHERE r.session_id = sessions.id), 0) "
                         f"WHERE id IN ({', '.join('?' * len(chunk))})", chunk)
    return conn.execute(f"SELECT COALESCE(SUM(count), 0) FROM {shape.REDACTIONS}").fetchone()[0]


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    names = [*tuple(shape.tables()), shape.REDACTIONS, derived.TABLE]
    return {t: conn.execute(f"SELECT COUNT(*) FROM [{t}]").fetchone()[0] for t in names}


def refresh_derived(conn: sqlite3.Connection, sessions) -> int:
    """The derived tables of the snapshot's own rows (derived.py: the session browser's list), for
    ``sessions`` (None: all); their rows written."""
    return derived.refresh_session_list(conn, None if sessions is None else sorted(sessions))
