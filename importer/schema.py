"""The archive's tables, declared once as data.

Column types are abstract; the store (``store/dialects.py``) turns them into each SQL
dialect's DDL. Table and column names follow the original design (``parsed_files``,
``sessions``, ``messages``) so its example queries run as written; the rest
(``tool_calls``, ``entries``, ``entry_revisions``, ``session_index``) extends it.

Abstract types: ``pk`` (auto-increment integer key), ``int``, ``bigint``,
``bool`` (0/1), ``str:N`` (short text, N characters), ``text`` (long text),
``json`` (JSON text), ``datetime`` (UTC, millisecond precision, stored as
'YYYY-MM-DD HH:MM:SS.fff'), ``decimal`` (USD amounts), ``float``. A type may
carry a numeric default, ``bool=1``: rows written without the column get it.
"""

from __future__ import annotations

TABLES: dict[str, list[tuple[str, str]]] = {
    # Incremental control: one row per transcript file ever seen.
    "parsed_files": [
        ("id", "pk"),
        ("server", "str:32"),
        ("agent_id", "str:64"),
        ("file_path", "str:1024"),
        ("file_mtime", "bigint"),  # seconds since the epoch (the design's column)
        ("file_mtime_ns", "bigint"),  # exact, for change detection
        ("file_size", "bigint"),
        ("status", "str:16"),  # success / failed / ignored
        ("parsed_at", "datetime"),
        ("error_message", "text"),
        ("session_uuid", "str:64"),
        ("session_type", "str:32"),
        ("parsed_offset", "bigint"),  # bytes up to the last complete line read
        ("parsed_lines", "int"),  # lines before parsed_offset
        ("head_hash", "str:32"),  # hash of the first bytes: detects rewrites
        ("tail_hash", "str:32"),  # hash of the bytes just before parsed_offset
        ("last_entry_id", "str:64"),
        ("legacy_format", "bool"),
        ("bad_lines", "int"),
        ("pending_lines", "int"),
        ("entries_read", "int"),
        # The checkpoint (units.py): the unit's change token when it was
        # read, and what its source's parser carries across runs.
        ("change_token", "str:160"),
        ("source", "str:32"),  # the kind: openclaw, pi, mini-openclaw, agent-server, ...
        ("resume_state", "json"),
    ],
    "sessions": [
        ("id", "pk"),
        ("server", "str:32"),
        ("agent_id", "str:64"),
        ("session_uuid", "str:64"),
        ("file_path", "str:1024"),  # the newest file holding the session
        ("session_type", "str:32"),  # normal / topic / reset / deleted / checkpoint / backup
        ("cwd", "str:512"),
        ("started_at", "datetime"),
        ("first_message_at", "datetime"),
        ("last_message_at", "datetime"),
        ("message_count", "int"),
        ("created_at", "datetime"),
        ("updated_at", "datetime"),
        ("version", "int"),
        ("parent_session", "str:512"),
        ("leaf_entry_id", "str:64"),
        ("source_rank", "str:160"),
        ("input_tokens", "bigint"),
        ("output_tokens", "bigint"),
        ("cache_read_tokens", "bigint"),
        ("cache_write_tokens", "bigint"),
        ("total_tokens", "bigint"),
        ("cost_usd", "decimal"),
        ("session_key", "str:255"),
        ("label", "str:255"),
        ("display_name", "str:255"),
        ("channel", "str:64"),
        ("chat_type", "str:32"),
        ("spawned_by", "str:255"),
        # OpenClaw's SQLite store (2026.8+): session_windows / session_nodes
        # (prerelease: sessions / session_entries). A reset or rollover chain runs
        # previous_session_id -> session_uuid; next_session_id is the session whose
        # previous_session_id is this one (kept up to date by the importer).
        ("reason", "str:32"),  # initial, reset, rollover, fork, rewind, switch, recovery, compaction
        ("previous_session_id", "str:64"),
        ("next_session_id", "str:64"),
        ("status", "str:16"),  # running, done, failed, killed, timeout
        ("ended_at", "datetime"),
        ("model_provider", "str:64"),
        ("model", "str:128"),
        ("archived_at", "datetime"),
        # Every source kind (sources/): which one, the title its model gave the
        # session, the session it is a sub-agent or fork of and the tool call
        # that spawned it, the provider's own id for it, and whether its message
        # times are approximate (a source without per-message times).
        ("source", "str:32"),
        ("title", "str:512"),
        ("parent_session_uuid", "str:64"),
        ("parent_call_id", "str:255"),
        ("provider_session_id", "str:128"),
        ("times_approximate", "bool"),
        ("project", "str:255"),  # the project (working directory) a coding agent's session was in
        # The archived transcript the provider itself wrote of this conversation (an
        # agent-server session's provider_session_id): its model calls count there, once.
        ("counted_in_session_id", "str:64"),
        # The version of the agent that wrote the session, as the kind records it (Codex's cli_version,
        # Claude Code's version, ...): `agentbase doctor` lists those seen, so a new format is noticed.
        ("agent_version", "str:64"),
        ("header_json", "json"),
    ],
    "messages": [
        ("id", "pk"),
        ("session_id", "int"),
        ("server", "str:32"),
        ("agent_id", "str:64"),
        ("session_uuid", "str:64"),
        ("message_uuid", "str:64"),
        ("parent_message_uuid", "str:64"),
        ("role", "str:32"),
        ("first_tool_call", "str:128"),
        ("tool_call_count", "int"),
        ("has_thinking", "bool"),
        ("has_tool_calls", "bool"),
        ("is_error", "bool"),
        ("provider", "str:64"),
        ("model", "str:128"),
        ("api", "str:64"),
        ("stop_reason", "str:64"),
        ("input_tokens", "int"),
        ("output_tokens", "int"),
        ("cache_read_tokens", "bigint"),
        ("cache_write_tokens", "bigint"),
        ("total_tokens", "int"),
        ("cost_usd", "decimal"),
        ("timestamp", "datetime"),
        ("created_at", "datetime"),
        ("is_active_path", "bool"),
        ("is_synthetic", "bool"),
        ("usage_counted", "bool"),  # 0 on a re-appended copy of a model call
        ("call_key", "str:32"),
        ("tool_call_id", "str:255"),
        ("tool_name", "str:128"),
        ("seq", "int"),
        ("raw_hash", "str:32"),
        ("source", "str:32"),
        ("exit_code", "int"),  # a tool result's (paired onto its call)
        ("duration_ms", "bigint"),
        # Where cost_usd comes from: recorded (by the agent), computed (from the
        # price table) or unpriced (tokens and no price: never shown as $0).
        ("cost_source", "str:16"),
        ("cache_write_5m_tokens", "bigint"),  # cache_write_tokens split by lifetime, where the source says
        ("cache_write_1h_tokens", "bigint"),
        ("is_context", "bool"),  # injected context (environment, instructions), not typed by anyone
        ("time_approximate", "bool"),  # no time of its own: its session's
        ("usage_invalid", "bool"),  # usage values that are negative or not numbers: kept, not summed
        ("calls_elsewhere", "int"),  # its tool calls attached to another copy of it (a tool call is one row)
        ("native_role", "str:64"),  # the kind's own word for the row (role is the vocabulary's: docs/vocabulary.md)
        # Long values last: SQLite must walk overflow pages to reach a column
        # stored after a large one, and the importer reads the short ones often.
        ("text_preview", "str:512"),
        ("error_message", "text"),
        ("thinking_text", "text"),
        ("tool_calls_json", "json"),
        ("content_blocks", "json"),
        ("raw_json", "json"),  # the entry without message.content
    ],
    "tool_calls": [
        ("id", "pk"),
        ("session_id", "int"),
        ("message_id", "int"),
        ("server", "str:32"),
        ("agent_id", "str:64"),
        ("session_uuid", "str:64"),
        ("message_uuid", "str:64"),
        ("block_index", "int"),
        ("call_id", "str:255"),
        ("tool_name", "str:128"),
        ("result_message_id", "int"),
        ("is_error", "bool"),
        ("exit_code", "int"),
        ("duration_ms", "bigint"),
        ("timestamp", "datetime"),
        ("is_active_path", "bool"),
        ("created_at", "datetime"),
        ("source", "str:32"),
        ("is_truncated", "bool"),  # the result was cut by the source (the full text is elsewhere)
        ("result_preview", "str:512"),
        ("command", "text"),
        ("arguments", "json"),
    ],
    "entries": [
        ("id", "pk"),
        ("session_id", "int"),
        ("server", "str:32"),
        ("agent_id", "str:64"),
        ("session_uuid", "str:64"),
        ("entry_uuid", "str:64"),
        ("parent_uuid", "str:64"),
        ("entry_type", "str:64"),
        ("custom_type", "str:128"),
        ("timestamp", "datetime"),
        ("seq", "int"),
        ("is_active_path", "bool"),
        ("created_at", "datetime"),
        ("raw_hash", "str:32"),
        ("text_preview", "str:512"),
        ("raw_json", "json"),
    ],
    # Earlier versions of an entry whose JSON changed in a later file.
    "entry_revisions": [
        ("id", "pk"),
        ("session_id", "int"),
        ("entry_uuid", "str:64"),
        ("raw_json", "json"),
        ("content_blocks", "json"),
        ("replaced_at", "datetime"),
        ("replaced_by_file", "str:1024"),
    ],
    # sessions.json: sessionKey -> session metadata, per agent.
    "session_index": [
        ("id", "pk"),
        ("server", "str:32"),
        ("agent_id", "str:64"),
        ("session_key", "str:255"),
        ("session_uuid", "str:64"),
        ("label", "str:255"),
        ("display_name", "str:255"),
        ("channel", "str:64"),
        ("chat_type", "str:32"),
        ("spawned_by", "str:255"),
        ("updated_at", "bigint"),
    ],
}

# A session's usage totals (these ``sessions`` columns) are the sums of its messages' usage that
# counts (``usage_counted``: a model call's first copy, not one counted in another transcript); every
# place that totals a session selects COUNTED_USAGE, in this order.
USAGE_TOTALS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens", "cost_usd")
COUNTED_USAGE = ", ".join(f"SUM({column} * usage_counted)" for column in USAGE_TOTALS)

UNIQUE: dict[str, list[tuple[str, ...]]] = {
    "parsed_files": [("server", "agent_id", "file_path")],
    "sessions": [("session_uuid", "server", "agent_id")],
    "messages": [("session_id", "message_uuid")],
    "tool_calls": [("session_id", "message_uuid", "block_index")],
    "entries": [("session_id", "entry_uuid")],
    "session_index": [("server", "agent_id", "session_key")],
}

# The original design's indexes, plus what the importer's own look-ups need.
INDEXES: dict[str, dict[str, tuple[str, ...]]] = {
    "messages": {
        "idx_agent_timestamp": ("agent_id", "timestamp"),
        "idx_first_tool_call": ("first_tool_call",),
        "idx_session_id": ("session_id",),
        "idx_role": ("role",),
        "idx_messages_tool_call_id": ("session_id", "tool_call_id"),
        "idx_messages_call_key": ("session_id", "call_key"),
    },
    "tool_calls": {
        "idx_tool_calls_session_call": ("session_id", "call_id"),
        "idx_tool_calls_agent_timestamp": ("agent_id", "timestamp"),
        "idx_tool_calls_tool_name": ("tool_name",),
    },
    "entries": {"idx_entries_type": ("entry_type",)},
    "entry_revisions": {"idx_revisions_entry": ("session_id", "entry_uuid")},
    "session_index": {"idx_session_index_uuid": ("server", "agent_id", "session_uuid")},
}
