"""What the plugin knows of a snapshot, read from the snapshot itself.

A database is an AgentBase snapshot when it has the marker table
(``importer.shape.MARKER``). What its pages need to know of the source kinds
and of the snapshot's shape (the tools each kind runs shell commands with,
the canned queries a kind declares and the tables they read, what a query's
latest day is the latest day with, the tables and views, the columns drawn as
content blocks, JSON or long text) the export wrote into its facts table
(``importer.shape.FACTS``, keys ``FACT_KEYS``): the plugin reads them there
and imports no kind, so a snapshot is served as it was made, by whatever
version of the importer made it.

Only names come from ``importer.shape`` (constants: the marker's, the facts
table's and the session list's; it opens nothing), through this module alone.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from importer.shape import FACTS, MARKER, SESSION_LIST, SESSION_LIST_COLUMNS, SESSION_LIST_FTS  # noqa: F401


@dataclass(frozen=True)
class Facts:
    """One snapshot's facts (empty for a snapshot made before the facts table existed: such a
    snapshot is rebuilt by the next export, its format being older)."""

    shell_pairs: frozenset = frozenset()  # {(kind, tool name)} of the tools that run shell commands
    canned_queries: dict = field(default_factory=dict)  # name -> (Datasette's query, tables it needs rows in)
    latest_day_of: dict = field(default_factory=dict)  # query name -> what its latest day is the latest day with
    tables: frozenset = frozenset()
    views: dict = field(default_factory=dict)  # table -> the base table its view reads
    blocks: frozenset = frozenset()  # columns of content blocks
    json: frozenset = frozenset()  # columns of indented JSON
    thinking: frozenset = frozenset()  # columns of long text with line breaks


def is_snapshot(conn: sqlite3.Connection) -> bool:
    try:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                            (MARKER,)).fetchone() is not None
    except sqlite3.Error:
        return False


def has_tables(conn: sqlite3.Connection, *names: str) -> bool:
    found = {r[0] for r in conn.execute(f"SELECT name FROM sqlite_master WHERE name IN ({', '.join('?' * len(names))})",
                                        names)}
    return found == set(names)


def marker(conn: sqlite3.Connection, *keys: str) -> dict[str, str]:
    """The marker's values (of ``keys``; every one when none is named); {} when it has none."""
    sql = f"SELECT key, value FROM [{MARKER}]"
    if keys:
        sql += f" WHERE key IN ({', '.join('?' * len(keys))})"
    try:
        return dict(conn.execute(sql, keys).fetchall())
    except sqlite3.Error:
        return {}


def read(conn: sqlite3.Connection) -> Facts:
    try:
        raw = {name: json.loads(value) for name, value in conn.execute(f"SELECT name, value FROM [{FACTS}]")}
    except (sqlite3.Error, ValueError):
        return Facts()
    shell = raw.get("shell_tools") or {}
    queries = {name: (dict(q.get("query") or {}), list(q.get("tables") or []))
               for name, q in (raw.get("canned_queries") or {}).items()}
    columns = raw.get("render_columns") or {}
    return Facts(
        shell_pairs=frozenset((kind, tool) for kind, tools in shell.items() for tool in tools),
        canned_queries=queries,
        latest_day_of=dict(raw.get("latest_day_of") or {}),
        tables=frozenset(raw.get("tables") or ()),
        views=dict(raw.get("views") or {}),
        blocks=frozenset(columns.get("blocks") or ()),
        json=frozenset(columns.get("json") or ()),
        thinking=frozenset(columns.get("thinking") or ()),
    )
