"""The snapshot's shape, declared once as data: every table it holds (the
archive's, with their columns, the local-time columns it adds, the columns
whose transcript text is redacted, indexes and full-text indexes; the session
list; the marker and its keys; the redactions), and what Datasette shows of
each (``PAGES``: label, sort, facets, hidden columns).

The export builds the snapshot from this; ``metadata.yml``'s tables section
says the same as ``PAGES`` and tests/test_shape.py checks the two against each
other in full, both ways (the way github-to-sqlite declares ``FTS_CONFIG``,
``FOREIGN_KEYS`` and ``VIEWS`` as data and applies them in one place).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import declared, schema
from .tables import Table


# A message's filters by its id: what a full-text search joins each match with to keep those of an
# agent, a server, a kind or a session (the search's filters, its counts) reads this narrow index
# instead of the wide rows (INDEXED BY: 0.6 s -> 0.1 s for 170,000 matches at a million messages).
MESSAGE_SCOPE = ("id", "usage_counted", "agent_id", "server", "source", "session_id")

# In copy order; the archive's bookkeeping (_migrations) stays behind.
TABLES: dict[str, Table] = {t.name: t for t in (
    Table(
        "sessions",
        local_time_from="last_message_at",
        redact=("header_json", "cwd", "label", "display_name", "spawned_by", "file_path", "model", "model_provider",
                "parent_session", "session_key", "title", "project", "agent_version"),
        count_before="header_json",
        indexes=(("server",), ("agent_id",), ("session_type",), ("last_message_at",), ("day",), ("session_uuid",),
                 ("source",)),
        first=("local_time", "day", "agent_id", "server", "source", "session_type", "title", "label",
               "message_count", "total_tokens", "cost_usd"),
        last=("leaf_entry_id", "source_rank", "header_json"),
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
                 ("has_thinking",), ("is_error",), ("session_id", "seq"), ("timestamp",), ("agent_id", "day"),
                 ("source",), ("native_role",), MESSAGE_SCOPE),
        first=("local_time", "agent_id", "role", "text_preview", "model", "first_tool_call", "tool_name", "is_error",
               "has_thinking", "server", "source", "day", "timestamp"),
        last=("session_id", "session_uuid", "message_uuid", "parent_message_uuid", "seq", "tool_call_id", "thinking_text",
              "tool_calls_json", "error_message", "content_blocks"),
    ),
    Table(
        "tool_calls",
        local_time_from="timestamp",
        # A tool call's text is its messages': replaced here, counted there.
        # (tool_name with session_id: the sessions that called a tool, from the index alone: tool:)
        indexes=(("agent_id", "timestamp"), ("day",), ("server",), ("tool_name", "session_id"), ("is_error",), ("session_id",),
                 ("timestamp",), ("message_id",), ("agent_id", "day"), ("source",), ("result_message_id",)),
        first=("local_time", "agent_id", "tool_name", "command", "is_error", "exit_code", "duration_ms",
               "result_preview", "server", "source", "day", "timestamp"),
        last=("session_id", "message_id", "session_uuid", "message_uuid", "block_index", "call_id", "result_message_id",
              "arguments"),
    ),
    Table(
        "entries",
        leave_out=("raw_hash",),
        redact=("raw_json", "custom_type"),
        indexes=(("session_id", "seq"), ("entry_type",), ("custom_type",), ("agent_id",), ("timestamp",)),
    ),
    Table("entry_revisions", redact=("raw_json", "content_blocks", "replaced_by_file"),
          indexes=(("replaced_at",), ("session_id",))),
    Table("parsed_files", redact=("file_path", "error_message"),
          indexes=(("server", "agent_id"), ("status",), ("agent_id",), ("session_type",), ("parsed_at",))),
    Table("session_index", redact=("session_key", "label", "display_name", "spawned_by"),
          indexes=(("server",), ("agent_id",), ("channel",))),
)}

COUNT_COLUMN = "secrets_redacted"
LOCAL_COLUMNS = (("day", "str:10"), ("local_time", "datetime"))

# Bump when the snapshot made from an unchanged store would differ (new columns, indexes, search
# text, facts): a snapshot of another format is rebuilt in full. 3: generated columns,
# tool_calls_fts, updated in place (WAL) with a state file; 4: day by date(); 5: the facts table,
# the vocabulary's roles and messages.native_role (docs/vocabulary.md); 6: the index text holds the
# last character of each CJK run (a single character is searchable: importer/search.py); 7: the
# messages' scope index (MESSAGE_SCOPE, named by MESSAGE_SCOPE_INDEX: the search's SQL names it) and
# tool_calls (tool_name, session_id).
FORMAT = 7

# -- the snapshot's own tables -------------------------------------------------------------------

# Key/value facts about the snapshot; its presence marks a file as a snapshot (the plugin looks for
# it by this name; store/__init__.py's SNAPSHOT_TABLE, below this module, says the same).
MARKER = "agentbase_snapshot"
MARKER_KEYS = ("exported_at", "updated_at", "timezone", "source", "redacted", "secrets_redacted", "snapshot_id",
               "generation", "format", "counts")

# What the pages need to know of the kinds and of the shape, written by the export, read by the
# plugin (which imports no kind): name -> a JSON value. FACT_KEYS: what each holds.
FACTS = "agentbase_facts"
FACTS_COLUMNS = (("name", "TEXT"), ("value", "TEXT"))
FACT_KEYS = {
    "shell_tools": "kind -> the tools it runs shell commands with (Source.shell_tools)",
    "canned_queries": "name -> {query: Datasette's canned query, tables: the tables it needs rows in} "
                      "(Source.canned_queries)",
    "latest_day_of": "canned query -> what its latest day is the latest day with, when its day is left empty",
    "tables": "the archive's and the kinds' tables, in copy order",
    "views": "table -> the base table its view reads its rows from",
    "render_columns": "blocks, json, thinking -> the columns the pages render as content blocks, "
                      "indented JSON, long text",
}

# Where each credential the export replaced was, and how many times.
REDACTIONS = "redactions"
REDACTIONS_COLUMNS = (("table_name", "TEXT"), ("row_id", "INTEGER"), ("session_id", "INTEGER"),
                      ("column_name", "TEXT"), ("kind", "TEXT"), ("count", "INTEGER"))
REDACTIONS_INDEXES = (("session_id",), ("kind",), ("table_name", "row_id"))

# The session browser's list (built by derived.py from the snapshot's own tables), and its full-text
# index over the title and first prompt.
SESSION_LIST = "session_list"
SESSION_LIST_FTS = "session_list_fts"
# Its columns, in order (sqlite-utils types).
SESSION_LIST_COLUMNS: dict[str, type] = {
    "id": int,
    "session_uuid": str,
    "title": str,
    "title_from": str,
    "first_prompt": str,
    "agent_id": str,
    "server": str,
    "source": str,
    "session_type": str,
    "project": str,
    "started_local": str,
    "last_local": str,
    "first_day": str,
    "last_day": str,
    "last_message_at": str,
    "message_count": int,
    "model_calls": int,
    "tool_call_count": int,
    "failed_tool_calls": int,
    "model_errors": int,
    "has_errors": int,
    "has_thinking": int,
    "total_tokens": int,
    "cost_usd": float,
    "priced_calls": int,
    "unpriced_calls": int,
}
# Every filter of the browser, each followed by the sort key, so that a filtered page is read in order
# from its index (SQLite walks an index backwards for DESC; the rowid, the id, breaks ties). The
# first one also holds first_day, so a day range's end is checked on the index alone (and the id, so that
# first_day does not stand between the sort key and the tie-break).
SESSION_LIST_INDEXES: tuple[tuple[str, ...], ...] = (
    ("last_message_at", "id", "first_day"),
    ("agent_id", "last_message_at"),
    ("server", "last_message_at"),
    ("source", "last_message_at"),
    ("has_errors", "last_message_at"),
    ("has_thinking", "last_message_at"),
)

# The full-text index: a contentless FTS5 table whose rowid is messages.id,
# over everything searchable in a message (see search.message_search_text).
FTS_TABLE = "messages_fts"
FTS_COLUMN = "body"
# ... and tool_calls': rowid tool_calls.id, over its tool, command, arguments and result preview
# (search.tool_call_search_text).
TOOL_FTS_TABLE = "tool_calls_fts"

# What the explorer renders specially (datasette_agentbase.render).
BLOCK_COLUMNS = frozenset({"content_blocks", "tool_calls_json"})  # content blocks
JSON_COLUMNS = frozenset({"raw_json", "header_json", "arguments"})  # indented JSON
THINKING_COLUMNS = frozenset({"thinking_text", "thinking"})  # long text with line breaks


def redact_columns() -> dict[str, tuple[str, ...]]:
    """Table -> the columns the detector reads (pass 1: every credential value
    found in any of them goes into one set) and where its replacements are
    counted (the redactions table): each table's ``redact`` above, and a kind's
    tables'. Pass 2 replaces every value of the set in every text column of
    every table, these and the rest (a message's thinking_text, tool_calls_json
    and preview, cut from its content_blocks; a tool call's arguments, command
    and result, copied from its messages; an entry's preview; ids and paths). A
    message's text_preview is read and counted only when the message has no
    content_blocks."""
    return {name: t.redact for name, t in tables().items() if t.redact}


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


# -- columns computed from the row itself ---------------------------------------------------
#
# The snapshot stores a value once. Columns that repeat another's content are SQLite generated
# columns (VIRTUAL: computed when read, stored nowhere) over a small stored helper: a message's
# preview, first thinking block and tool-call blocks are cut from its content_blocks, and the
# local time and day from the UTC time and the zone's offset at that moment. The export checks,
# row by row, that the expression gives the archive's value exactly; where it would not, the
# helper ``*_kept`` column holds the value itself (COALESCE takes it first; json_extract only runs
# on a row whose content the export could read as JSON: it fails on any other). What a reader sees
# and queries is unchanged; the file is about a fifth smaller.

UTC_OFFSET = "utc_offset_s"  # the export's zone's offset from UTC at the row's time, in seconds

MESSAGE_DERIVED = {
    # column: (helper columns, expression)
    "text_preview": ((("preview_path", "str:64"), ("preview_kept", "text")),
                     "COALESCE(preview_kept, CASE WHEN preview_path IS NOT NULL "
                     "THEN substr(json_extract(content_blocks, preview_path), 1, 512) END)"),
    "thinking_text": ((("thinking_block", "int"), ("thinking_kept", "text")),
                      "COALESCE(thinking_kept, CASE WHEN thinking_block IS NOT NULL "
                      "THEN json_extract(content_blocks, '$[' || thinking_block || '].thinking') END)"),
    "tool_calls_json": ((("tool_calls_from", "int"), ("tool_calls_kept", "json")),
                        "COALESCE(tool_calls_kept, '[' || substr(content_blocks, tool_calls_from))"),
}


# A table held as a view over its stored rows (in a base table of another name), for columns
# whose values are other rows': a tool call's arguments are its message's block (json_extract of
# the call message's content_blocks) and its result preview its result message's preview. Each
# is checked row by row when written; ``*_linked`` = 1 says the view takes the value from there,
# else ``*_kept`` holds it.
# (column, table, column) each table's rows point at: declared in the snapshot (Datasette links them)
FOREIGN_KEYS = {
    "messages": [("session_id", "sessions", "id")],
    "tool_calls": [("session_id", "sessions", "id"), ("message_id", "messages", "id"),
                   ("result_message_id", "messages", "id")],
    "entries": [("session_id", "sessions", "id")],
    "entry_revisions": [("session_id", "sessions", "id")],
}

VIEWS = {"tool_calls": "tool_call_rows"}
LINKED: dict[str, dict[str, tuple]] = {
    "tool_calls": {
        # column: (helper columns, the view's expression over t (the row), m (its message), r (its result))
        "arguments": ((("arguments_linked", "bool"), ("arguments_kept", "json")),
                      "CASE WHEN t.arguments_linked = 1 THEN json_extract(m.content_blocks, "
                      "'$[' || t.block_index || '].arguments') ELSE t.arguments_kept END"),
        "result_preview": ((("result_preview_linked", "bool"), ("result_preview_kept", "str:512")),
                           "CASE WHEN t.result_preview_linked = 1 THEN r.text_preview ELSE t.result_preview_kept END"),
    },
}


def base_table(table: str) -> str:
    """Where a table's rows are stored: itself, or the base table of its view."""
    return VIEWS.get(table, table)


def view_sql(table: str) -> str:
    """The SELECT of a table held as a view: its columns in reading order (helpers left out)."""
    linked = LINKED[table]
    helper_names = {c for c, _ in helpers(table)}
    parts = []
    for column, _kind in columns(table):
        if column in helper_names:
            continue
        parts.append(f"{linked[column][1]} AS [{column}]" if column in linked else f"t.[{column}]")
    return (f"SELECT {', '.join(parts)} FROM [{base_table(table)}] t "
            "LEFT JOIN messages m ON m.id = t.message_id LEFT JOIN messages r ON r.id = t.result_message_id")


# UTC times of the big tables as whole milliseconds since 1970 (6 bytes where the text takes 23),
# shown as the same 'YYYY-MM-DD HH:MM:SS.fff' text (integer arithmetic only: exact); a value not
# of that form is kept as it is.
TIME_COLUMNS = {"messages": ("timestamp", "created_at"), "tool_calls": ("timestamp", "created_at"),
                "entries": ("timestamp", "created_at")}


def ms_text(ms: str, plus: str = "") -> str:
    return (f"strftime('%Y-%m-%d %H:%M:%S', {ms} / 1000{plus}, 'unixepoch') || '.' || "
            f"printf('%03d', {ms} % 1000)")


def generated(table: str) -> dict[str, str]:
    """Column -> the SQL expression a generated column of ``table`` computes."""
    shape = tables()[table]
    out: dict[str, str] = {}
    for column in TIME_COLUMNS.get(table, ()):
        out[column] = (f"COALESCE({column}_kept, CASE WHEN {column}_ms IS NOT NULL "
                       f"THEN {ms_text(column + '_ms')} END)")
    if shape.local_time_from:
        ts = shape.local_time_from
        local = f"strftime('%Y-%m-%d %H:%M:%f', [{ts}], {UTC_OFFSET} || ' seconds')"
        if ts in TIME_COLUMNS.get(table, ()):
            local = (f"CASE WHEN {ts}_ms IS NOT NULL THEN {ms_text(ts + '_ms', f' + {UTC_OFFSET}')} "
                     f"ELSE {local} END")
        out["local_time"] = local
        # from integer times, the same day by date() alone: a scan that reads every day (the
        # dashboard, the cost queries) then does not pay for local_time's text (a third of it)
        out["day"] = (f"CASE WHEN {ts}_ms IS NOT NULL THEN date({ts}_ms / 1000 + {UTC_OFFSET}, 'unixepoch') "
                      "ELSE substr(local_time, 1, 10) END" if ts in TIME_COLUMNS.get(table, ())
                      else "substr(local_time, 1, 10)")
    if table == "messages":
        out.update((column, expr) for column, (_helpers, expr) in MESSAGE_DERIVED.items())
    return out


def helpers(table: str) -> list[tuple[str, str]]:
    """The stored helper columns the generated ones read, (column, abstract type)."""
    out = [(UTC_OFFSET, "int")] if tables()[table].local_time_from else []
    if table == "messages":
        for helper_columns, _expr in MESSAGE_DERIVED.values():
            out.extend(helper_columns)
    for helper_columns, _expr in LINKED.get(table, {}).values():
        out.extend(helper_columns)
    for column in TIME_COLUMNS.get(table, ()):
        out += [(f"{column}_ms", "bigint"), (f"{column}_kept", "text")]
    return out


def columns(table: str) -> list[tuple[str, str]]:
    """The snapshot's (column, abstract type) of ``table`` in reading order: the archive's columns,
    the local time and day, the redaction count, and the helpers of generated columns (which are
    among these: see :func:`generated`)."""
    shape = tables()[table]
    out = [c for c in declared.all_tables()[table] if c[0] not in shape.leave_out]
    if shape.local_time_from:
        at = [c for c, _ in out].index(shape.local_time_from) + 1
        out[at:at] = list(LOCAL_COLUMNS)
    if shape.count_before:
        at = [c for c, _ in out].index(shape.count_before)
        out[at:at] = [(COUNT_COLUMN, "int")]
    if not (shape.first or shape.last or helpers(table)):
        return out
    kinds = dict(out)
    first = [c for c in ("id", *shape.first) if c in kinds]
    last = [c for c in shape.last if c in kinds]
    # helpers go before the long stored texts at the end
    long_at = next((i for i, c in enumerate(last) if kinds[c] in ("text", "json") and c not in generated(table)),
                   len(last))
    last[long_at:long_at] = [c for c, _ in helpers(table)]
    kinds.update(helpers(table))
    middle = [c for c in kinds if c not in first and c not in last]
    return [(c, kinds[c]) for c in first + middle + last]


def stored(table: str) -> list[tuple[str, str]]:
    """The columns a row of ``table`` stores (the snapshot's columns less the generated ones and
    those its view takes from other rows), in order."""
    gen = generated(table)
    linked = LINKED.get(table, {})
    return [c for c in columns(table) if c[0] not in gen and c[0] not in linked]


def base_columns(table: str) -> list[tuple[str, str]]:
    """The columns of the table the rows are stored in (generated ones among them)."""
    linked = LINKED.get(table, {})
    return [c for c in columns(table) if c[0] not in linked]


def index_name(table: str, cols: tuple[str, ...]) -> str:
    return f"idx_{table}_{'_'.join(cols)}"


MESSAGE_SCOPE_INDEX = index_name("messages", MESSAGE_SCOPE)


# -- what Datasette shows of each table -----------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """A table's page in Datasette: metadata.yml's entry for it says exactly this
    (tests/test_shape.py holds the two together, in full)."""

    label_column: str | None = None
    sort_desc: str | None = None
    # a column, or calendar(column): the day facet that lists days newest first
    facets: tuple[str | tuple[str, str], ...] = ()
    fts_table: str | None = None
    fts_pk: str | None = None
    hidden: bool = False
    # left out of the HTML page (never of JSON or CSV) until "show all columns" (the plugin's)
    hidden_columns: tuple[str, ...] = ()

    def metadata(self) -> dict:
        """The entry metadata.yml holds for the table (its description aside)."""
        out: dict = {}
        for key in ("label_column", "sort_desc"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.facets:
            out["facets"] = [{f[0]: f[1]} if isinstance(f, tuple) else f for f in self.facets]
        for key in ("fts_table", "fts_pk"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.hidden:
            out["hidden"] = True
        if self.hidden_columns:
            out["plugins"] = {"datasette-agentbase": {"hidden_columns": list(self.hidden_columns)}}
        return out


def calendar(column: str) -> tuple[str, str]:
    return ("calendar", column)


# Every table a snapshot holds (and the store's bookkeeping, hidden should the store itself be
# served), by name. A kind's own tables (Source.snapshot_tables) show with Datasette's defaults.
PAGES: dict[str, Page] = {
    "sessions": Page(
        label_column="session_uuid", sort_desc="last_message_at",
        facets=("server", "agent_id", "session_type", calendar("day")),
        hidden_columns=("leaf_entry_id", "source_rank", "created_at", "updated_at", "version", "times_approximate",
                        "counted_in_session_id", "parent_call_id", "provider_session_id", "header_json")),
    "messages": Page(
        label_column="text_preview", sort_desc="timestamp",
        facets=("server", "agent_id", calendar("day"), "role", "native_role", "first_tool_call", "model", "has_thinking",
                "is_error"),
        fts_table=FTS_TABLE, fts_pk="id",
        hidden_columns=("message_uuid", "parent_message_uuid", "created_at", "seq", "api", "tool_call_id", "is_context",
                        "time_approximate", "usage_invalid", "calls_elsewhere", "cache_write_5m_tokens",
                        "cache_write_1h_tokens", "tool_calls_json")),
    "tool_calls": Page(
        label_column="command", sort_desc="timestamp",
        facets=("server", "agent_id", calendar("day"), "tool_name", "is_error"),
        fts_table=TOOL_FTS_TABLE, fts_pk="id",
        hidden_columns=("message_uuid", "call_id", "block_index", "result_message_id", "created_at")),
    "entries": Page(
        sort_desc="timestamp", facets=("entry_type", "custom_type", "agent_id"),
        hidden_columns=("entry_uuid", "parent_uuid", "created_at", "seq")),
    "entry_revisions": Page(sort_desc="replaced_at"),
    "parsed_files": Page(
        sort_desc="parsed_at", facets=("server", "agent_id", "status", "session_type"),
        hidden_columns=("file_mtime_ns", "head_hash", "tail_hash", "last_entry_id", "change_token", "resume_state")),
    "session_index": Page(facets=("server", "agent_id", "channel")),
    SESSION_LIST: Page(label_column="title", fts_table=SESSION_LIST_FTS, fts_pk="id"),
    SESSION_LIST_FTS: Page(hidden=True),
    FTS_TABLE: Page(hidden=True),
    TOOL_FTS_TABLE: Page(hidden=True),
    VIEWS["tool_calls"]: Page(hidden=True),  # what the tool_calls view reads its rows from
    MARKER: Page(hidden=True),
    FACTS: Page(hidden=True),
    REDACTIONS: Page(),
    "_migrations": Page(hidden=True),  # the store's bookkeeping (never in a snapshot)
}
