"""The vocabulary's questions (docs/vocabulary.md), asked of one kind's rows in an archive.

Every kind's tests call :func:`assert_vocabulary` on an archive of its samples (tests/test_vocabulary.py
for the first seven kinds; a new kind's own test module for it), so that "messages by role", model
calls, tool calls, shell calls, thinking, usage, context and titles mean the same in every kind.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

ROLES = {"user", "assistant", "toolResult", "system"}


def q(db: Path, sql: str, params=()) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def assert_vocabulary(db: Path, kind: str, *, usage: bool = True, shell_exit_codes: bool = False,
                      tool_results: bool = True) -> None:
    """The rows of source ``kind`` in the SQLite archive ``db`` speak the vocabulary.

    ``usage``: the kind records usage per model call (its assistant rows carry model calls);
    ``shell_exit_codes``: its shell calls' results say an exit code (some rows carry one);
    ``tool_results``: its tool results name their call (every one is paired).
    """
    where = "source = ?"
    by_role = dict(q(db, f"SELECT role, COUNT(*) FROM messages WHERE {where} GROUP BY 1", (kind,)))
    assert by_role, f"no {kind} messages"
    assert set(by_role) <= ROLES, by_role
    assert {"user", "assistant"} <= set(by_role), (kind, by_role)
    assert q(db, f"SELECT COUNT(*) FROM messages WHERE {where} AND native_role IS NULL", (kind,))[0][0] == 0
    # usage: only on assistant rows (the model call's), counted once per call
    assert q(db, f"SELECT role, COUNT(*) FROM messages WHERE {where} AND role <> 'assistant' AND (input_tokens IS NOT NULL "
                 "OR output_tokens IS NOT NULL OR total_tokens IS NOT NULL OR cost_usd IS NOT NULL) GROUP BY 1",
             (kind,)) == []
    assert q(db, f"SELECT COUNT(*) FROM (SELECT session_id, call_key FROM messages WHERE {where} AND call_key IS NOT NULL "
                 "AND usage_counted = 1 GROUP BY 1, 2 HAVING COUNT(*) > 1)", (kind,))[0][0] == 0
    calls = q(db, f"SELECT COUNT(*) FROM messages WHERE {where} AND call_key IS NOT NULL AND usage_counted = 1",
              (kind,))[0][0]
    if usage:
        assert calls > 0, f"{kind}: no model call carries usage"
        assert q(db, f"SELECT DISTINCT role FROM messages WHERE {where} AND call_key IS NOT NULL", (kind,)) == \
            [("assistant",)]
    if tool_results:
        unpaired = q(db, f"SELECT COUNT(*) FROM messages m WHERE m.{where} AND m.role = 'toolResult' AND "
                         "(m.tool_call_id IS NULL OR NOT EXISTS (SELECT 1 FROM tool_calls t "
                         "WHERE t.session_id = m.session_id AND t.call_id = m.tool_call_id))", (kind,))[0][0]
        assert unpaired == 0, f"{kind}: {unpaired} tool results without their call"
    # tool calls sit on assistant rows
    roles = q(db, f"SELECT DISTINCT m.role FROM tool_calls t JOIN messages m ON m.id = t.message_id WHERE t.{where}",
              (kind,))
    assert roles in ([], [("assistant",)]), roles
    if shell_exit_codes:
        assert q(db, f"SELECT SUM(exit_code IS NOT NULL) FROM tool_calls WHERE {where} AND command IS NOT NULL",
                 (kind,))[0][0], f"{kind}: no shell call with an exit code"
    # thinking only on assistant rows; context: system rows and only they
    assert q(db, f"SELECT DISTINCT role FROM messages WHERE {where} AND has_thinking = 1", (kind,)) in \
        ([], [("assistant",)])
    assert q(db, f"SELECT role, is_context, COUNT(*) FROM messages WHERE {where} AND (role = 'system') <> "
                 "(is_context = 1) GROUP BY 1, 2", (kind,)) == []
    # a title (or a first prompt to make one) for every session that has a prompt
    assert q(db, "SELECT COUNT(*) FROM sessions s WHERE s.source = ? AND s.title IS NULL AND EXISTS (SELECT 1 FROM "
                 "messages m WHERE m.session_id = s.id AND m.role = 'user') AND NOT EXISTS (SELECT 1 FROM messages m "
                 "WHERE m.session_id = s.id AND m.role = 'user' AND m.text_preview IS NOT NULL)", (kind,))[0][0] == 0
