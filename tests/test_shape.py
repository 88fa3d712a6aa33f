"""The snapshot's shape (importer/shape.py) against what reads it: metadata.yml's
facets and sorts each have an index, its tables and columns exist, and a
built snapshot has exactly the declared columns and indexes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import yaml

from importer import derived, shape
from importer.export import export_snapshot
from importer.pipeline import run_import
from importer.store import open_store

from transcripts import Chain, header, sessions_dir, write

REPO = Path(__file__).resolve().parent.parent


def _metadata_tables() -> dict:
    data = yaml.safe_load((REPO / "metadata.yml").read_text(encoding="utf-8"))
    return data["databases"]["snapshot"]["tables"]


def test_every_facet_and_sort_of_the_metadata_has_an_index():
    missing = []
    for table, meta in _metadata_tables().items():
        if table not in shape.TABLES:
            continue
        names = {c for c, _ in shape.columns(table)}
        leading = {cols[0] for cols in shape.TABLES[table].indexes}
        # a facet is a column, or {type: column} (the calendar facet of days)
        facets = [next(iter(f.values())) if isinstance(f, dict) else f for f in meta.get("facets", [])]
        wanted = facets + [meta[k] for k in ("sort", "sort_desc") if k in meta]
        for column in wanted:
            assert column in names, f"metadata.yml: {table}.{column} is not a snapshot column"
            if column not in leading:
                missing.append(f"{table}.{column}")
    assert not missing, f"facets/sorts without an index: {missing}"


def test_metadata_names_only_tables_the_snapshot_has():
    own = set(shape.TABLES) | {shape.FTS_TABLE, shape.TOOL_FTS_TABLE, shape.MARKER, shape.REDACTIONS, "_migrations"}
    own |= {derived.TABLE, derived.FTS}  # the derived tables (importer/derived.py)
    own |= set(shape.VIEWS.values())  # the tables views read their rows from
    assert set(_metadata_tables()) <= own


def test_a_snapshot_has_exactly_the_declared_shape(tmp_path):
    root = sessions_dir(tmp_path / "state", "main")
    chain = Chain()
    write(root / "s1.jsonl", [header("s1"), chain.user("hello"), chain.assistant([{"type": "text", "text": "hi"}])])
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        run_import(store, [str(tmp_path / "state")], server="s")
        export_snapshot(store, tmp_path / "snap.db", timezone="UTC")
    finally:
        store.close()
    conn = sqlite3.connect(tmp_path / "snap.db")
    try:
        for table in shape.TABLES:
            helpers = {c for c, _ in shape.helpers(table)}
            got = [r[1] for r in conn.execute(f"PRAGMA table_xinfo([{table}])")]
            if table in shape.VIEWS:  # a view of its columns (no helpers), over its base table's
                assert got == [c for c, _ in shape.columns(table) if c not in helpers], table
                base = [r[1] for r in conn.execute(f"PRAGMA table_xinfo([{shape.base_table(table)}])")]
                assert base == [c for c, _ in shape.base_columns(table)], table
            else:
                assert got == [c for c, _ in shape.columns(table)], table
            indexes = {r[1] for r in conn.execute(f"PRAGMA index_list([{shape.base_table(table)}])")}
            assert indexes == {shape.index_name(table, cols) for cols in shape.TABLES[table].indexes}, table
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {shape.FTS_TABLE, shape.MARKER, shape.REDACTIONS} <= names
    finally:
        conn.close()
