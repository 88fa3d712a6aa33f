"""The tables the source kinds declare for themselves (``Source.tables``, ``.unique``,
``.indexes``: the agent-server's runs, Crush's sessions...), beside the archive's own
(``schema.py``, which knows no kind). The store creates and extends them like its own, without a
migration of their own (store/migrations.py ``ensure_source_tables``); the snapshot copies them.
"""

from __future__ import annotations

from . import schema


def _declared(attribute: str) -> dict:
    from .sources import all_sources

    out: dict = {}
    for source in all_sources():
        out.update(getattr(source, attribute, None) or {})
    return out


def source_tables() -> dict[str, list[tuple[str, str]]]:
    return _declared("tables")


def all_tables() -> dict[str, list[tuple[str, str]]]:
    """The archive's tables and every source kind's."""
    return {**schema.TABLES, **source_tables()}


def unique_keys(table: str) -> list[tuple[str, ...]]:
    return schema.UNIQUE.get(table) or _declared("unique").get(table, [])


def indexes(table: str) -> dict[str, tuple[str, ...]]:
    return schema.INDEXES.get(table) or _declared("indexes").get(table, {})
