"""The snapshot's shape, declared once as data: which archive tables it holds
and with which columns, the local-time columns it adds, the columns whose
transcript text is redacted, its indexes and its full-text index.

``export.py`` builds the snapshot from this, the Datasette plugin reads it to
know which tables and columns hold what, and a test holds ``metadata.yml``'s
facets and sorts against its indexes (the way github-to-sqlite declares
``FTS_CONFIG``, ``FOREIGN_KEYS`` and ``VIEWS`` and applies them in one place).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import schema


@dataclass(frozen=True)
class Table:
    """One archive table as the snapshot holds it."""

    name: str
    # Archive-internal columns the explorer has no use for.
    leave_out: tuple[str, ...] = ()
    # A UTC column after which ``day`` (YYYY-MM-DD) and ``local_time`` go, in the export's zone.
    local_time_from: str | None = None
    # Columns the redaction's detector reads for credentials, and where what it
    # replaces is counted (every text column of every table is replaced).
    redact: tuple[str, ...] = ()
    # The snapshot-only ``secrets_redacted`` count goes before this column.
    count_before: str | None = None
    # Indexes: the design's, plus every facet and sort of metadata.yml.
    indexes: tuple[tuple[str, ...], ...] = ()


# In copy order; the archive's bookkeeping (_migrations) stays behind.
TABLES: dict[str, Table] = {t.name: t for t in (
    Table(
        "sessions",
        local_time_from="last_message_at",
        redact=("header_json", "cwd", "label", "display_name", "spawned_by", "file_path", "model", "model_provider",
                "parent_session", "session_key", "title", "project"),
        count_before="header_json",
        indexes=(("server",), ("agent_id",), ("session_type",), ("last_message_at",), ("day",), ("session_uuid",)),
    ),
    Table(
        "messages",
        # The rebuildable JSON envelope of messages (details, usage... its
        # content is in content_blocks) stays in the store, which keeps the
        # snapshot about a third smaller.
        leave_out=("raw_json", "raw_hash", "call_key"),
        local_time_from="timestamp",
        # thinking_text, tool_calls_json and the preview are cut from content_blocks:
        # replaced there, counted once (text_preview only without content).
        redact=("content_blocks", "text_preview", "error_message", "model", "provider", "tool_name"),
        count_before="text_preview",
        indexes=(("agent_id", "timestamp"), ("day",), ("server",), ("role",), ("first_tool_call",), ("model",),
                 ("provider",), ("has_thinking",), ("is_error",), ("session_id", "seq"), ("timestamp",),
                 ("agent_id", "day"), ("is_synthetic",)),
    ),
    Table(
        "tool_calls",
        local_time_from="timestamp",
        # A tool call's text is its messages': replaced here, counted there.
        indexes=(("agent_id", "timestamp"), ("day",), ("server",), ("tool_name",), ("is_error",), ("session_id",),
                 ("timestamp",), ("message_id",), ("agent_id", "day")),
    ),
    Table(
        "entries",
        leave_out=("raw_hash",),
        redact=("raw_json", "custom_type"),
        indexes=(("session_id", "seq"), ("entry_type",), ("custom_type",), ("agent_id",), ("timestamp",)),
    ),
    Table("entry_revisions", redact=("raw_json", "content_blocks", "replaced_by_file"), indexes=(("replaced_at",),)),
    Table("parsed_files", redact=("file_path", "error_message"),
          indexes=(("server", "agent_id"), ("status",), ("agent_id",), ("session_type",), ("parsed_at",))),
    Table("session_index", redact=("session_key", "label", "display_name", "spawned_by"),
          indexes=(("server",), ("agent_id",), ("channel",))),
)}

COUNT_COLUMN = "secrets_redacted"
LOCAL_COLUMNS = (("day", "str:10"), ("local_time", "datetime"))

# The snapshot's own tables.
MARKER = "agentbase_snapshot"  # key/value facts about the snapshot; its presence marks a snapshot
REDACTIONS = "redactions"
REDACTIONS_DDL = (f"CREATE TABLE {REDACTIONS} (table_name TEXT, row_id INTEGER, session_id INTEGER, "
                  "column_name TEXT, kind TEXT, count INTEGER)")
REDACTIONS_INDEXES = (("session_id",), ("kind",))

# The full-text index: a contentless FTS5 table whose rowid is messages.id,
# over everything searchable in a message (see export.message_search_text).
FTS_TABLE = "messages_fts"
FTS_SOURCE = "messages"
FTS_COLUMN = "body"

# What the explorer renders specially (datasette_agentbase.render).
BLOCK_COLUMNS = frozenset({"content_blocks", "tool_calls_json"})  # content blocks
JSON_COLUMNS = frozenset({"raw_json", "header_json", "arguments"})  # indented JSON
THINKING_COLUMNS = frozenset({"thinking_text", "thinking"})  # long text with line breaks


def tables() -> dict[str, Table]:
    """Every table the snapshot holds, in copy order: the archive's, then those
    source kinds declare (``Source.snapshot_tables``)."""
    from .sources import all_sources

    kinds = all_sources()
    if _cache and _cache[0] == len(kinds):
        return _cache[1]
    out = dict(TABLES)
    for source in kinds:
        for table in getattr(source, "snapshot_tables", ()) or ():
            out.setdefault(table.name, table)
    _cache[:] = [len(kinds), out]
    return out


_cache: list = []  # [number of kinds registered, tables()]: kinds are only ever added


def columns(table: str) -> list[tuple[str, str]]:
    """The snapshot's (column, abstract type) of ``table``, in order."""
    shape = tables()[table]
    out = [c for c in schema.all_tables()[table] if c[0] not in shape.leave_out]
    if shape.local_time_from:
        at = [c for c, _ in out].index(shape.local_time_from) + 1
        out[at:at] = list(LOCAL_COLUMNS)
    if shape.count_before:
        at = [c for c, _ in out].index(shape.count_before)
        out[at:at] = [(COUNT_COLUMN, "int")]
    return out


def index_name(table: str, cols: tuple[str, ...]) -> str:
    return f"idx_{table}_{'_'.join(cols)}"
