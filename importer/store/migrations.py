"""Schema changes: an ordered, append-only list of small named functions,
recorded in ``_migrations`` (as llm's migrations.py does). A store written by a
newer AgentBase is refused instead of being misread (see Store.migrate, which
runs them: this module knows the store only as the :class:`Migrating` it is
handed)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from .. import declared, schema
from .dialects import Dialect


class Migrating(Protocol):
    """What a migration uses of the store it runs in (``sqlite.Store``, or its
    MariaDB subclass), inside the store's transaction."""

    dialect: Dialect

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...
    def query(self, sql: str, params: Sequence[Any] = ()) -> list: ...
    def tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]: ...
    def tables(self) -> set[str]: ...
    def columns(self, table: str) -> list[str]: ...
    def ensure_columns(self, table: str, names: Sequence[str]) -> None: ...


def _pages(store: Migrating, select: str, size: int = 2000) -> Iterator[list[tuple]]:
    """The rows of ``select`` (``SELECT id, ... WHERE ...``), ``size`` at a time in id order: each
    page is asked for once the one before has been dealt with (its updates made)."""
    last = 0
    while True:
        rows = store.tuples(f"{select} AND id > ? ORDER BY id LIMIT {size}", (last,))
        if not rows:
            return
        last = rows[-1][0]
        yield rows


def _migration_initial(store: Migrating) -> None:
    d = store.dialect
    for table, columns in schema.TABLES.items():
        store.execute(d.create_table(table, columns, schema.UNIQUE.get(table, [])))
    for table, indexes in schema.INDEXES.items():
        for name, columns in indexes.items():
            store.execute(d.create_index(table, name, columns))


def _migration_openclaw_sqlite_metadata(store: Migrating) -> None:
    store.ensure_columns("sessions", [
        "reason", "previous_session_id", "next_session_id", "status", "ended_at",
        "model_provider", "model", "archived_at",
    ])


def _migration_sources(store: Migrating) -> None:
    """One seam for every source kind: the checkpoint's change token and resume
    state, the ``source`` column, and the columns other kinds fill."""
    store.ensure_columns("parsed_files", ["change_token", "source", "resume_state"])
    store.ensure_columns("sessions", ["source", "title", "parent_session_uuid", "parent_call_id",
                                      "provider_session_id", "times_approximate"])
    store.ensure_columns("messages", ["source", "exit_code", "duration_ms"])
    store.ensure_columns("tool_calls", ["source"])
    d = store.dialect
    # Change tokens as the sources now make them: a file's size and time; an
    # OpenClaw store session's last seq, event count and watermark hash.
    store_session = "file_path LIKE '%#%' AND file_path NOT LIKE '%#archive/%' AND session_type <> 'openclaw_db'"
    colon, generation = "':'", "COALESCE(head_hash, '')"
    store.execute(f"UPDATE parsed_files SET change_token = "
                  f"{d.concat('parsed_offset', colon, 'file_size', colon, generation)} "
                  f"WHERE change_token IS NULL AND {store_session}")
    store.execute(f"UPDATE parsed_files SET change_token = {d.concat('file_size', colon, 'file_mtime_ns')} "
                  "WHERE change_token IS NULL")
    # Everything archived so far is OpenClaw's or standalone pi's.
    pi = "(agent_id = 'pi' OR file_path LIKE '%/--%--/%')"
    store.execute(f"UPDATE sessions SET source = CASE WHEN {pi} THEN 'pi' ELSE 'openclaw' END WHERE source IS NULL")
    store.execute(f"UPDATE parsed_files SET source = CASE WHEN {pi} THEN 'pi' ELSE 'openclaw' END WHERE source IS NULL")
    for table in ("messages", "tool_calls"):
        store.execute(f"UPDATE {table} SET source = (SELECT s.source FROM sessions s WHERE s.id = {table}.session_id) "
                      "WHERE source IS NULL")
    # A tool result's exit code and duration, which its call is paired with.
    import orjson

    from .. import parser as P

    for rows in _pages(store, "SELECT id, raw_json FROM messages WHERE role = 'toolResult'"):
        updates = []
        for row_id, raw in rows:
            try:
                message = orjson.loads(raw or "{}").get("message")
            except (orjson.JSONDecodeError, AttributeError):
                continue
            _failed, code, duration = P.result_failed(message if isinstance(message, dict) else {})
            if code is not None or duration is not None:
                updates.append((code, duration, row_id))
        if updates:
            store.executemany("UPDATE messages SET exit_code = ?, duration_ms = ? WHERE id = ?", updates)


def _migration_costs_and_flags(store: Migrating) -> None:
    """Prices for calls without a recorded cost, and flags other kinds need."""
    store.ensure_columns("sessions", ["project"])
    store.ensure_columns("messages", ["cost_source", "cache_write_5m_tokens", "cache_write_1h_tokens", "is_context",
                                      "time_approximate", "usage_invalid"])
    store.ensure_columns("tool_calls", ["is_truncated"])
    # What was archived so far recorded its own costs (OpenClaw, pi): zero with
    # tokens means unpriced (FORMAT.md section 8), never free.
    store.execute("UPDATE messages SET cost_source = CASE WHEN cost_usd > 0 OR COALESCE(total_tokens, 0) = 0 "
                  "THEN 'recorded' ELSE 'unpriced' END WHERE cost_source IS NULL AND role = 'assistant' "
                  "AND (cost_usd IS NOT NULL OR total_tokens IS NOT NULL)")


def _migration_one_row_per_tool_call(store: Migrating) -> None:
    """A tool call is (session, call id): copies of its message keep their
    entries, not a row of their own. Existing duplicates are folded into the
    row of the copy on the active path (else the earliest), whose paired result
    is the earliest real one; the copies' counts say where their calls went."""
    store.ensure_columns("messages", ["calls_elsewhere"])
    store.execute("UPDATE messages SET calls_elsewhere = 0 WHERE calls_elsewhere IS NULL")
    dups = store.tuples(
        "SELECT session_id, call_id FROM tool_calls WHERE call_id IS NOT NULL "
        "GROUP BY session_id, call_id HAVING COUNT(*) > 1")
    for session_id, call_id in dups:
        rows = store.tuples(
            "SELECT t.id, t.message_id, t.is_active_path FROM tool_calls t WHERE t.session_id = ? AND t.call_id = ? "
            "ORDER BY t.is_active_path DESC, t.timestamp, t.id", (session_id, call_id))
        keep, drop = rows[0], rows[1:]
        for row_id, message_id, _active in drop:
            store.execute("DELETE FROM tool_calls WHERE id = ?", (row_id,))
            store.execute("UPDATE messages SET tool_call_count = tool_call_count - 1, "
                          "calls_elsewhere = calls_elsewhere + 1 WHERE id = ?", (message_id,))
        result = store.tuples(
            "SELECT id, text_preview, is_error, exit_code, duration_ms FROM messages WHERE session_id = ? "
            "AND role = 'toolResult' AND tool_call_id = ? ORDER BY is_synthetic, id LIMIT 1", (session_id, call_id))
        if result:
            r = result[0]
            store.execute("UPDATE tool_calls SET result_message_id = ?, result_preview = ?, is_error = ?, "
                          "exit_code = COALESCE(?, exit_code), duration_ms = COALESCE(?, duration_ms) WHERE id = ?",
                          (r[0], r[1], r[2], r[3], r[4], keep[0]))


def _migration_provider_transcripts(store: Migrating) -> None:
    store.ensure_columns("sessions", ["counted_in_session_id"])


# The change log (store/sqlite.py, "the change log"): which sessions each write
# transaction changed, numbered in commit order, for the snapshot's in-place update.
CHANGES = "_changes"
CHANGE_COUNTER = "_change_counter"


def _migration_change_log(store: Migrating) -> None:
    store.execute(f"CREATE TABLE IF NOT EXISTS {CHANGES} (session_id BIGINT NOT NULL PRIMARY KEY, "
                  "seq BIGINT NOT NULL)")
    store.execute(f"CREATE INDEX IF NOT EXISTS idx_changes_seq ON {CHANGES} (seq)")
    store.execute(f"CREATE TABLE IF NOT EXISTS {CHANGE_COUNTER} (id INTEGER NOT NULL PRIMARY KEY, "
                  "n BIGINT NOT NULL)")
    if not store.query(f"SELECT 1 FROM {CHANGE_COUNTER} WHERE id = 1"):
        store.execute(f"INSERT INTO {CHANGE_COUNTER} (id, n) VALUES (1, 0)")
    if not store.query(f"SELECT 1 FROM {CHANGE_COUNTER} WHERE id = 2"):
        # row 2: this archive's own number, so a snapshot never takes another archive's log for its own
        # (a store deleted and imported again at the same path starts its numbers again)
        import secrets

        store.execute(f"INSERT INTO {CHANGE_COUNTER} (id, n) VALUES (2, ?)", (secrets.randbits(62),))


# Codex (sources/codex.py): what ends a request, so a usage read before its call's rows
# stops looking for them: an input, a turn's events and boundaries, the next call's usage.
_CODEX_INPUT_ROLES = ("user", "developer", "system", "toolResult")
_CODEX_MODEL_ROLES = ("assistant", "reasoning", "toolCall")
_CODEX_ENDS = "('task_started', 'task_complete', 'turn_aborted', 'user_message')"
_USAGE_MOVED = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens",
                "cost_usd", "cost_source", "cache_write_5m_tokens", "cache_write_1h_tokens", "usage_counted",
                "usage_invalid", "call_key", "provider", "model")


def _migration_vocabulary(store: Migrating) -> None:
    """One vocabulary for every kind (docs/vocabulary.md): ``role`` is user, assistant,
    toolResult or system, the kind's own word goes into ``native_role``. Rows archived before
    are rewritten from what the store holds (source, role, is_context, tool_call_id, raw_json),
    as a fresh import writes them; a Codex usage row moves its usage onto the row its model
    call wrote (or, without one, becomes that call's assistant row)."""
    import orjson

    store.ensure_columns("messages", ["native_role"])
    todo = "native_role IS NULL"
    # Codex's usage rows first (they need the old roles to find their call's row).
    usage_rows = store.tuples(
        f"SELECT id, session_id, seq, message_uuid, parent_message_uuid FROM messages "
        f"WHERE source = 'codex' AND role = 'usage' AND {todo} ORDER BY session_id, seq")
    columns = ", ".join(_USAGE_MOVED)
    for row_id, session_id, seq, uuid, parent in usage_rows:
        target = store.tuples(
            "SELECT id, role, seq, call_key FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq, id LIMIT 1",
            (session_id, seq))  # (the next call's usage row ends the request too)
        end = store.tuples(
            "SELECT MIN(seq) FROM entries WHERE session_id = ? AND seq > ? AND (entry_type IN "
            f"('turn_context', 'compacted') OR (entry_type = 'event_msg' AND custom_type IN {_CODEX_ENDS}))",
            (session_id, seq))[0][0]
        if not target or target[0][1] not in _CODEX_MODEL_ROLES or target[0][3] is not None \
                or (end is not None and end <= target[0][2]):
            continue  # no row of its call (the next carries a usage of its own): the call's assistant row (below)
        usage = store.tuples(f"SELECT {columns} FROM messages WHERE id = ?", (row_id,))[0]
        sets = ", ".join(f"{c} = ?" for c in _USAGE_MOVED)
        key = usage[_USAGE_MOVED.index("call_key")] or ""
        store.execute(f"UPDATE messages SET {sets}, raw_hash = {store.dialect.concat('raw_hash', '?')} WHERE id = ?",
                      (*usage, "+" + key[:8], target[0][0]))
        store.execute("DELETE FROM messages WHERE id = ?", (row_id,))
        # what hung on the usage row hangs on its parent (the token_count entry)
        store.execute("UPDATE messages SET parent_message_uuid = ? WHERE session_id = ? AND parent_message_uuid = ?",
                      (parent, session_id, uuid))
        store.execute("UPDATE entries SET parent_uuid = ? WHERE session_id = ? AND parent_uuid = ?",
                      (parent, session_id, uuid))
        store.execute("UPDATE sessions SET message_count = message_count - 1, "
                      "leaf_entry_id = CASE WHEN leaf_entry_id = ? THEN ? ELSE leaf_entry_id END WHERE id = ?",
                      (uuid, parent, session_id))
        store.execute("UPDATE parsed_files SET last_entry_id = ? WHERE session_uuid = "
                      "(SELECT session_uuid FROM sessions WHERE id = ?) AND source = 'codex' AND last_entry_id = ?",
                      (parent, session_id, uuid))
    store.execute(f"UPDATE messages SET native_role = 'token_count', role = 'assistant' "
                  f"WHERE source = 'codex' AND role = 'usage' AND {todo}")
    # Codex's calls and outputs: the response item's type is the kind's word.
    for rows in _pages(store, f"SELECT id, raw_json FROM messages WHERE source = 'codex' AND role IN "
                              f"('toolCall', 'toolResult') AND {todo}"):
        updates = []
        for row_id, raw in rows:
            try:
                obj = orjson.loads(raw or "{}")
            except orjson.JSONDecodeError:
                obj = None
            item = obj.get("payload") if isinstance(obj, dict) and isinstance(obj.get("payload"), dict) else obj
            kind = item.get("type") if isinstance(item, dict) else None
            updates.append((kind[:64] if isinstance(kind, str) else None, row_id))
        store.executemany("UPDATE messages SET native_role = ?, "
                          "role = CASE WHEN role = 'toolCall' THEN 'assistant' ELSE role END WHERE id = ?", updates)
    # Every other row, from its kind and old role; what had no role of the vocabulary is context.
    vocabulary = "('user', 'assistant', 'toolResult', 'system')"
    store.execute(f"UPDATE messages SET native_role = role, role = CASE "
                  f"WHEN role = 'reasoning' THEN 'assistant' "
                  f"WHEN role = 'user' AND is_context = 1 THEN 'system' "
                  f"WHEN role IN ('user', 'assistant') THEN role ELSE 'system' END "
                  f"WHERE source = 'codex' AND {todo}")
    store.execute(f"UPDATE messages SET native_role = CASE WHEN role = 'assistant' THEN 'assistant' ELSE 'user' END, "
                  f"role = CASE WHEN role = 'context' THEN 'system' WHEN role IN {vocabulary} THEN role "
                  f"ELSE 'system' END WHERE source = 'claude-code' AND {todo}")
    store.execute(f"UPDATE messages SET native_role = CASE role WHEN 'user' THEN 'user.message' "
                  f"WHEN 'assistant' THEN 'assistant.message' WHEN 'toolCall' THEN 'tool.started' "
                  f"WHEN 'toolResult' THEN 'tool.completed' ELSE role END, "
                  f"role = CASE WHEN role IN ('reasoning', 'toolCall', 'run') THEN 'assistant' "
                  f"WHEN role IN {vocabulary} THEN role ELSE 'system' END WHERE source = 'agent-server' AND {todo}")
    store.execute(f"UPDATE messages SET native_role = role, role = CASE "
                  f"WHEN role IN ('tool', 'toolResult') AND tool_call_id IS NOT NULL THEN 'toolResult' "
                  f"WHEN role IN ('user', 'assistant') THEN role ELSE 'system' END "
                  f"WHERE source = 'mini-openclaw' AND {todo}")
    # OpenClaw, pi (and a row of no known kind): their message.role (vocabulary.OPENCLAW_ROLES)
    from .. import vocabulary as V

    to_user = ", ".join(f"'{k}'" for k, v in V.OPENCLAW_ROLES.items() if v == V.USER and k != V.USER)
    store.execute(f"UPDATE messages SET native_role = role, role = CASE "
                  f"WHEN role IN ('user', 'assistant', 'toolResult') THEN role "
                  f"WHEN role IN ({to_user}) THEN 'user' ELSE 'system' END WHERE {todo}")
    store.execute("UPDATE messages SET is_context = 1 WHERE role = 'system' AND COALESCE(is_context, 0) = 0")


def ensure_source_tables(store: Migrating) -> None:
    """The tables source kinds declare (declared.py): created when
    missing, given the columns they gained; a no-op when all are there."""
    d = store.dialect
    kinds_tables = declared.source_tables()
    if not kinds_tables:
        return
    have = store.tables()
    for table, columns in kinds_tables.items():
        if table not in have:
            store.execute(d.create_table(table, columns, declared.unique_keys(table)))
            for name, cols in declared.indexes(table).items():
                store.execute(d.create_index(table, name, cols))
        else:
            missing = [c for c, _ in columns if c not in set(store.columns(table))]
            if missing:
                store.ensure_columns(table, missing)


# Ordered and append-only: version N is MIGRATIONS[N-1]. schema.TABLES is always
# the current schema, which migration 1 creates whole on a new store; a later
# migration that adds columns must do so with ``store.ensure_columns`` (a no-op
# where they already exist), so that new and upgraded stores end up the same.
def _migration_agent_version(store: Migrating) -> None:
    """The version of the agent that wrote each session (filled by the kinds that record one, from
    their next read of the session on)."""
    store.ensure_columns("sessions", ["agent_version"])


MIGRATIONS: list[tuple[str, Callable[[Migrating], None]]] = [
    ("initial schema", _migration_initial),
    ("openclaw sqlite-era session metadata", _migration_openclaw_sqlite_metadata),
    ("sources: change tokens, resume state, source column", _migration_sources),
    ("costs: cost_source, cache write lifetimes; context, time and usage flags", _migration_costs_and_flags),
    ("one tool_calls row per tool call", _migration_one_row_per_tool_call),
    ("sessions counted in the provider's own transcript", _migration_provider_transcripts),
    ("the change log: sessions changed by each write, for the snapshot's update", _migration_change_log),
    ("one vocabulary: roles user, assistant, toolResult, system; the kind's word in native_role",
     _migration_vocabulary),
    ("sessions: the agent version that wrote them", _migration_agent_version),
]
SCHEMA_VERSION = len(MIGRATIONS)

