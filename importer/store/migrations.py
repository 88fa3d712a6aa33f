"""Schema changes: an ordered, append-only list of small named functions,
recorded in ``_migrations`` (as llm's migrations.py does). A store written by a
newer AgentBase is refused instead of being misread (see Store.migrate)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .. import schema

if TYPE_CHECKING:
    from .sqlite import Store


def _migration_initial(store: "Store") -> None:
    d = store.dialect
    for table, columns in schema.TABLES.items():
        store.execute(d.create_table(table, columns, schema.UNIQUE.get(table, [])))
    for table, indexes in schema.INDEXES.items():
        for name, columns in indexes.items():
            store.execute(d.create_index(table, name, columns))


def _migration_openclaw_sqlite_metadata(store: "Store") -> None:
    store.ensure_columns("sessions", [
        "reason", "previous_session_id", "next_session_id", "status", "ended_at",
        "model_provider", "model", "archived_at",
    ])


# Ordered and append-only: version N is MIGRATIONS[N-1]. schema.TABLES is always
# the current schema, which migration 1 creates whole on a new store; a later
# migration that adds columns must do so with ``store.ensure_columns`` (a no-op
# where they already exist), so that new and upgraded stores end up the same.
MIGRATIONS: list[tuple[str, Callable[["Store"], None]]] = [
    ("initial schema", _migration_initial),
    ("openclaw sqlite-era session metadata", _migration_openclaw_sqlite_metadata),
]
SCHEMA_VERSION = len(MIGRATIONS)

