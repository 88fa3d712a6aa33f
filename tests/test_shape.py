"""The snapshot's shape (importer/shape.py) against what reads it: metadata.yml's
facets and sorts each have an index, its tables and columns exist, and a
built snapshot has exactly the declared columns and indexes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import yaml

from importer import shape
from importer.snapshot import export_snapshot
from importer.pipeline import run_import
from importer.sources import all_sources
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


def _snapshot_columns(table: str) -> set[str]:
    if table in shape.tables():
        return {c for c, _ in shape.columns(table)}
    if table == shape.SESSION_LIST:
        return set(shape.SESSION_LIST_COLUMNS)
    if table == shape.REDACTIONS:
        return {c for c, _ in shape.REDACTIONS_COLUMNS}
    return set()


def test_metadata_tables_say_what_shape_declares_in_full():
    """metadata.yml's tables section is checked against shape.PAGES, both ways: every table it names is a
    snapshot table with exactly the facts shape.py declares (label, sort, facets, full-text index, hidden,
    hidden columns; only its description is metadata.yml's own), and every table shape.py gives a fact is
    in metadata.yml."""
    meta = _metadata_tables()
    assert set(meta) <= set(shape.PAGES), f"not snapshot tables: {sorted(set(meta) - set(shape.PAGES))}"
    for table, entry in meta.items():
        facts = {k: v for k, v in entry.items() if k != "description"}
        assert facts == shape.PAGES[table].metadata(), f"metadata.yml: {table} differs from shape.PAGES"
    missing = [t for t, page in shape.PAGES.items() if page.metadata() and t not in meta]
    assert not missing, f"shape.PAGES tables metadata.yml lacks: {missing}"


def test_every_column_a_page_names_is_a_snapshot_column():
    for table, page in shape.PAGES.items():
        named = [page.label_column, page.sort_desc, page.fts_pk, *page.hidden_columns,
                 *(f[1] if isinstance(f, tuple) else f for f in page.facets)]
        names = _snapshot_columns(table)
        bad = [c for c in named if c and c not in names]
        assert not bad, f"{table}: {bad} are not its columns"
        if page.fts_table:
            assert page.fts_table in shape.PAGES and shape.PAGES[page.fts_table].hidden


def test_every_table_of_a_snapshot_is_declared():
    own = set(shape.tables()) | set(shape.VIEWS.values()) | {
        shape.FTS_TABLE, shape.TOOL_FTS_TABLE, shape.MARKER, shape.REDACTIONS, shape.SESSION_LIST,
        shape.SESSION_LIST_FTS}
    kinds = {t.name for s in all_sources() for t in getattr(s, "snapshot_tables", ()) or ()}
    assert own - kinds <= set(shape.PAGES), sorted(own - kinds - set(shape.PAGES))


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
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        assert {shape.FTS_TABLE, shape.MARKER, shape.REDACTIONS, shape.SESSION_LIST} <= names
        # every table (shadow tables of the full-text indexes aside) is one shape.py declares
        shadows = {n for n in names for fts in (shape.FTS_TABLE, shape.TOOL_FTS_TABLE, shape.SESSION_LIST_FTS)
                   if n.startswith(fts + "_")}
        assert names - shadows - {"sqlite_stat1", "sqlite_stat4"} <= set(shape.PAGES) | set(shape.tables())
        assert [r[1] for r in conn.execute(f"PRAGMA table_info({shape.REDACTIONS})")] == \
            [c for c, _ in shape.REDACTIONS_COLUMNS]
        assert set(dict(conn.execute(f"SELECT key, value FROM {shape.MARKER}"))) == set(shape.MARKER_KEYS)
    finally:
        conn.close()
