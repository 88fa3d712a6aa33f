"""Derived snapshot tables: what the explorer's pages need precomputed.

``session_list``: one row per session, for the session browser (the explorer's
home page): its title, where it runs, when it started and was last active
(local time, the export's zone), and its counts and cost, with an index for
every filter and for the page's order (newest first: ``last_message_at`` DESC,
``id`` DESC), and ``session_list_fts``, a full-text index over its title and
first prompt.

Everything is computed with SQL from the snapshot's own tables (``sessions``,
``messages``, ``tool_calls``), which the export has already redacted, so the
derived rows hold no credential the snapshot does not already hide. The
figures follow the dashboard's rules (datasette_agentbase/dashboard.py):

- ``message_count``: messages with ``usage_counted = 1`` (a re-appended copy of
  a model call is not a second message);
- ``model_calls``: those with a ``cost_source``; ``total_tokens`` sums their
  tokens; ``cost_usd`` sums the cost of the priced ones (``cost_source`` other
  than ``unpriced``), NULL when none is priced; ``unpriced_calls`` counts the
  calls with tokens and no price (never shown as $0);
- ``tool_call_count`` and ``failed_tool_calls``: the session's ``tool_calls``
  rows and those with ``is_error = 1``; ``model_errors``: assistant messages
  with ``is_error = 1``; ``has_errors``: either is non-zero;
- ``has_thinking``: a message with thinking;
- ``started_local`` / ``last_local``: ``local_time`` of the session's first and
  last timed message (``first_day`` / ``last_day``: their dates);
  ``last_message_at``: the last message's UTC time (the sort key; the session's
  own ``last_message_at``, then ``started_at``, when no message has a time; ''
  when nothing does);
- ``first_prompt``: the text of the first user message (``is_context = 0``,
  with text) in line order, without the envelope a gateway adds around it
  (OpenClaw's ``[Telegram ... 2026-02-09 18:46 GMT+1]`` header, ``System:``
  lines and ``(untrusted metadata)`` blocks, Claude Code's command tags),
  whitespace collapsed, at most ``PROMPT_CHARS`` characters;
- ``title``: the session's title by the one rule of every kind (titles.py: its
  label, else the title its source gave it, else its first prompt, else its
  chat's display name; one line of at most ``TITLE_CHARS`` characters);
  ``title_from`` says which (``label``, ``title``, ``prompt``,
  ``display_name``; NULL: none).

:func:`refresh_session_list` builds it whole, or recomputes some sessions' rows
in place (exactly what a whole build gives them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from .search import TOKENIZE, copy_index, index_text
from .shape import (SESSION_LIST, SESSION_LIST_COLUMNS, SESSION_LIST_FTS, SESSION_LIST_INDEXES, UTC_OFFSET,
                    ms_text)
from .titles import PROMPT_CHARS, TITLE_CHARS, prompt_text, shorten, title_sql

TABLE = SESSION_LIST  # declared in shape.py with its columns and indexes
FTS = SESSION_LIST_FTS
COLUMNS = SESSION_LIST_COLUMNS
INDEXES = SESSION_LIST_INDEXES

# SQL functions registered on the connection for the build (pure Python, deterministic).
_F_PROMPT = "agentbase_derived_prompt"
_F_LINE = "agentbase_derived_line"
_F_INDEX = "agentbase_derived_index_text"

# Per-session figures from the messages, in one pass. A first or last time and its local time are
# taken together: the UTC timestamp, then '|', then the local time, compared as text (the
# timestamp decides). A time held as milliseconds (nearly all: shape.TIME_COLUMNS) is compared as
# one integer, its milliseconds then its zone offset, and made text only once per session: its
# text is in the same order (from 1970 to the year 3998) and the offset follows the instant. Text
# (12 strftime calls a row) cost 3.0 of the list's 6.7 s at a million messages; this, 0.5 s. The
# first user prompt's message is the least (line, id) key, zero-padded.
_PACKED = ("timestamp_kept IS NULL AND timestamp_ms BETWEEN 0 AND 64000000000000 "
           f"AND {UTC_OFFSET} BETWEEN -65535 AND 65535")
_PACK = f"timestamp_ms * 131072 + {UTC_OFFSET} + 65536"


def _unpacked(key: str) -> str:
    """The 'timestamp|local_time' text of a packed key (NULL stays NULL)."""
    ms, offset = f"({key} / 131072)", f"({key} % 131072 - 65536)"
    return f"({ms_text(ms)} || '|' || {ms_text(ms, f' + {offset}')})"


def _least(packed: str, text: str, pick: str) -> str:
    return (f"CASE WHEN {packed} IS NULL THEN {text} WHEN {text} IS NULL THEN {_unpacked(packed)} "
            f"ELSE {pick}({_unpacked(packed)}, {text}) END")


_MESSAGES_SQL = f"""
INSERT INTO temp._sl_messages
SELECT session_id, message_count, {_least('p_first', 't_first', 'min')}, {_least('p_last', 't_last', 'max')},
       has_thinking, model_errors, model_calls, total_tokens, cost_usd, priced_calls, unpriced_calls, first_user
FROM (
SELECT session_id,
       SUM(usage_counted = 1) AS message_count,
       MIN(CASE WHEN {_PACKED} THEN {_PACK} END) AS p_first,
       MAX(CASE WHEN {_PACKED} THEN {_PACK} END) AS p_last,
       MIN(CASE WHEN timestamp IS NOT NULL AND NOT ({_PACKED}) THEN timestamp || '|' || COALESCE(local_time, '') END)
         AS t_first,
       MAX(CASE WHEN timestamp IS NOT NULL AND NOT ({_PACKED}) THEN timestamp || '|' || COALESCE(local_time, '') END)
         AS t_last,
       MAX(COALESCE(has_thinking, 0)) AS has_thinking,
       SUM(usage_counted = 1 AND role = 'assistant' AND is_error = 1) AS model_errors,
       SUM(usage_counted = 1 AND cost_source IS NOT NULL) AS model_calls,
       SUM(CASE WHEN usage_counted = 1 AND cost_source IS NOT NULL THEN COALESCE(total_tokens, 0) ELSE 0 END)
         AS total_tokens,
       SUM(CASE WHEN usage_counted = 1 AND cost_source IS NOT NULL AND cost_source <> 'unpriced'
                THEN COALESCE(cost_usd, 0) END) AS cost_usd,
       SUM(usage_counted = 1 AND cost_source IS NOT NULL AND cost_source <> 'unpriced') AS priced_calls,
       SUM(usage_counted = 1 AND cost_source = 'unpriced') AS unpriced_calls,
       MIN(CASE WHEN role = 'user' AND COALESCE(is_context, 0) = 0
                     AND trim(COALESCE(text_preview, ''), ' ' || char(9, 10, 13)) <> ''
                THEN printf('%020d %020d', COALESCE(seq, -1) + 1, id) END) AS first_user
FROM messages
WHERE session_id IS NOT NULL {{only}}
GROUP BY session_id)
"""


_TOOL_CALLS_SQL = """
INSERT INTO temp._sl_tool_calls
SELECT session_id, COUNT(*), SUM(is_error = 1)
FROM tool_calls
WHERE session_id IS NOT NULL {only}
GROUP BY session_id
"""

_LABEL = f"{_F_LINE}(s.label, {TITLE_CHARS})"
_TITLE = f"{_F_LINE}(s.title, {TITLE_CHARS})"
_PROMPT_TITLE = f"{_F_LINE}(p.prompt, {TITLE_CHARS})"
_DISPLAY_TITLE = f"{_F_LINE}(s.display_name, {TITLE_CHARS})"
_TITLE_SQL, _TITLE_FROM_SQL = title_sql({"label": "label", "title": "title", "prompt": "prompt_title",
                                         "display_name": "display_title"})

_ROWS_SQL = f"""
INSERT INTO {TABLE} ({', '.join(COLUMNS)})
SELECT id, session_uuid, {_TITLE_SQL}, {_TITLE_FROM_SQL}, prompt, agent_id, server, source, session_type, project,
       started_local, last_local, substr(COALESCE(started_local, last_local), 1, 10), substr(last_local, 1, 10),
       last_message_at,
       message_count, model_calls, tool_call_count, failed_tool_calls, model_errors,
       (failed_tool_calls > 0 OR model_errors > 0), has_thinking,
       total_tokens, cost_usd, priced_calls, unpriced_calls
FROM (
  SELECT s.id, s.session_uuid, {_LABEL} AS label, {_TITLE} AS title, {_PROMPT_TITLE} AS prompt_title,
         {_DISPLAY_TITLE} AS display_title,
         p.prompt, s.agent_id, s.server, s.source, s.session_type, s.project,
         NULLIF(substr(m.first_key, instr(m.first_key, '|') + 1), '') AS started_local,
         COALESCE(NULLIF(substr(m.last_key, instr(m.last_key, '|') + 1), ''), s.local_time) AS last_local,
         COALESCE(substr(m.last_key, 1, instr(m.last_key, '|') - 1), s.last_message_at, s.started_at, '')
           AS last_message_at,
         COALESCE(m.message_count, 0) AS message_count, COALESCE(m.model_calls, 0) AS model_calls,
         COALESCE(t.calls, 0) AS tool_call_count, COALESCE(t.failed, 0) AS failed_tool_calls,
         COALESCE(m.model_errors, 0) AS model_errors, COALESCE(m.has_thinking, 0) AS has_thinking,
         COALESCE(m.total_tokens, 0) AS total_tokens, m.cost_usd,
         COALESCE(m.priced_calls, 0) AS priced_calls, COALESCE(m.unpriced_calls, 0) AS unpriced_calls
  FROM sessions s
  LEFT JOIN temp._sl_messages m ON m.session_id = s.id
  LEFT JOIN temp._sl_tool_calls t ON t.session_id = s.id
  LEFT JOIN (SELECT x.session_id, {_F_PROMPT}(u.content_blocks, u.text_preview, {PROMPT_CHARS}) AS prompt
             FROM temp._sl_messages x JOIN messages u ON u.id = CAST(substr(x.first_user, 22) AS INTEGER)
             WHERE x.first_user IS NOT NULL) p ON p.session_id = s.id
  WHERE 1 {{only}}
)
"""

_FTS_SQL = (f"INSERT INTO {FTS} (rowid, title, first_prompt) "
            f"SELECT id, {_F_INDEX}(title), {_F_INDEX}(first_prompt) FROM {TABLE} WHERE 1 {{only}}")


def _index(text: str | None) -> str | None:
    return index_text(text) if isinstance(text, str) else None


def _register(conn: sqlite3.Connection) -> None:
    conn.create_function(_F_PROMPT, 3, prompt_text, deterministic=True)
    conn.create_function(_F_LINE, 2, shorten, deterministic=True)
    conn.create_function(_F_INDEX, 1, _index, deterministic=True)


# -- the build -------------------------------------------------------------------------------------

def exists(conn: sqlite3.Connection) -> bool:
    """Whether the snapshot has the session list (its full-text index too)."""
    found = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name IN (?, ?)", (TABLE, FTS))}
    return found == {TABLE, FTS}


def _database(conn: sqlite3.Connection):
    import sqlite_utils

    # (no PRAGMA, no plugin: the connection is the caller's, as it was)
    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


def _create(db) -> None:
    db.table(TABLE).create(COLUMNS, pk="id", not_null={"last_message_at"}, defaults={"last_message_at": ""})
    db.execute(f"CREATE VIRTUAL TABLE [{FTS}] USING fts5(title, first_prompt, tokenize='{TOKENIZE}')")


def _create_indexes(db) -> None:
    for cols in INDEXES:
        db.table(TABLE).create_index(list(cols), index_name=index_name(cols), if_not_exists=True)


def index_name(cols: tuple[str, ...]) -> str:
    return f"idx_{TABLE}_{'_'.join(cols)}"


def copy_session_list(conn: sqlite3.Connection, schema: str) -> int:
    """Copy the session list that :func:`refresh_session_list` built whole in another database,
    attached here as ``schema``, into this connection's main one: the table, the shadow tables of
    its full-text index, then its indexes. The same list as a whole build here; the rows copied.
    (A full export builds it in its worker process, see snapshot/worker.py)."""
    db = _database(conn)
    with db.atomic():
        for name in (FTS, TABLE):
            conn.execute(f"DROP TABLE IF EXISTS main.[{name}]")
        _create(db)
        rows = conn.execute(f"INSERT INTO main.[{TABLE}] SELECT * FROM [{schema}].[{TABLE}]").rowcount
        copy_index(conn, FTS, schema, content=True)
        _create_indexes(db)
    return rows


def refresh_session_list(conn: sqlite3.Connection, session_ids: Iterable[int] | None = None) -> int:
    """Build ``session_list`` and ``session_list_fts`` from the snapshot's tables.

    ``session_ids`` None: the whole list (the tables, their indexes and the
    full-text index made anew). A list: those sessions' rows recomputed in
    place, old rows and their index entries replaced (a session no longer in
    ``sessions`` loses its row); each then equals what a whole build gives it.
    When the snapshot has no session list yet, a list builds it whole. Runs in
    one transaction (a savepoint inside the caller's). Returns the rows written.
    """
    db = _database(conn)
    _register(conn)
    whole = session_ids is None or not exists(conn)
    with db.atomic():
        temp = ("_sl_messages", "_sl_tool_calls", "_sl_ids")
        for name in temp:
            conn.execute(f"DROP TABLE IF EXISTS temp.{name}")
        conn.execute("CREATE TEMP TABLE _sl_messages (session_id INTEGER PRIMARY KEY, message_count, first_key, "
                     "last_key, has_thinking, model_errors, model_calls, total_tokens, cost_usd, priced_calls, "
                     "unpriced_calls, first_user)")
        conn.execute("CREATE TEMP TABLE _sl_tool_calls (session_id INTEGER PRIMARY KEY, calls, failed)")
        if whole:
            for name in (FTS, TABLE):
                conn.execute(f"DROP TABLE IF EXISTS main.[{name}]")
            _create(db)
            only = ""
        else:
            conn.execute("CREATE TEMP TABLE _sl_ids (id INTEGER PRIMARY KEY)")
            conn.executemany("INSERT OR IGNORE INTO temp._sl_ids VALUES (?)", [(int(i),) for i in session_ids])
            conn.execute(f"DELETE FROM [{FTS}] WHERE rowid IN (SELECT id FROM temp._sl_ids)")
            conn.execute(f"DELETE FROM [{TABLE}] WHERE id IN (SELECT id FROM temp._sl_ids)")
            only = "AND session_id IN (SELECT id FROM temp._sl_ids)"
        conn.execute(_MESSAGES_SQL.format(only=only))
        conn.execute(_TOOL_CALLS_SQL.format(only=only))
        rows = conn.execute(_ROWS_SQL.format(only=only.replace("session_id", "s.id"))).rowcount
        conn.execute(_FTS_SQL.format(only=only.replace("session_id", "id")))
        if whole:
            _create_indexes(db)
            conn.execute(f"INSERT INTO [{FTS}] ([{FTS}]) VALUES ('optimize')")
        for name in temp:
            conn.execute(f"DROP TABLE IF EXISTS temp.{name}")
    return rows
