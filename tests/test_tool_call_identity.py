"""A tool call is one row, however many copies of its message exist (issue: trust, part 1).

A restored or re-appended transcript (and OpenClaw's truncation recovery) writes the same assistant
message again under a new entry id, with the same toolCall id. Every copy stays in messages and
entries; tool_calls has one row per (session, toolCall id), attached to the copy on the active path
when there is one, else the earliest; its result is the earliest real result for that id. A block
without an id is (entry id, block index).
"""

from __future__ import annotations

import copy
import json
import sqlite3

from importer.store import open_store
from transcripts import SID, Chain, do_import, exec_call, header, rows, scalar, sessions_dir, write


def _call_then_copy(c: Chain, on_active_path: str = "copy"):
    """user -> assistant(exec) -> result; then the assistant message again under a new id (a copy)
    with its result again. ``on_active_path``: which one the session's last entry descends from."""
    user = c.user("deploy 部署")
    call = c.assistant([{"type": "text", "text": "running"}, exec_call("toolu_dup", "systemctl restart nginx")])
    result = c.result("toolu_dup", "done", details={"status": "completed", "exitCode": 0, "durationMs": 5})
    answer = c.assistant([{"type": "text", "text": "restarted"}])
    again = c.entry("message", parent=user["id"], message=copy.deepcopy(call["message"]))
    result2 = c.result("toolu_dup", "done again", details={"status": "completed", "exitCode": 3})
    tail = [again, result2]
    if on_active_path == "original":  # the conversation goes on from the first copy
        tail.append(c.entry("message", parent=answer["id"], message={
            "role": "user", "content": [{"type": "text", "text": "thanks"}], "timestamp": 1775354500000}))
    return [user, call, result, answer, *tail], call, again


def test_a_copy_is_one_tool_call_attached_to_the_active_copy(tmp_path):
    c = Chain()
    objs, call, again = _call_then_copy(c, on_active_path="copy")
    write(sessions_dir(tmp_path / "s") / f"{SID}.jsonl", [header()] + objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "s")
    # both copies stay messages; one tool call, on the copy that is on the active path
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'assistant' AND has_tool_calls = 1") == 2
    assert rows(db, "SELECT call_id, message_uuid, is_active_path, command FROM tool_calls") == [
        ("toolu_dup", again["id"], 1, "systemctl restart nginx")]
    # its result is the earliest real one
    assert rows(db, "SELECT result_preview, exit_code, duration_ms FROM tool_calls") == [("done", 0, 5)]
    # tool_call_count totals follow the rule; the other copy says where its call went
    assert scalar(db, "SELECT SUM(tool_call_count) FROM messages") == 1
    assert rows(db, "SELECT message_uuid, tool_call_count, calls_elsewhere FROM messages "
                    "WHERE has_tool_calls = 1 ORDER BY seq") == [(call["id"], 0, 1), (again["id"], 1, 0)]
    store = open_store(f"sqlite:///{db}")
    try:
        from importer.stats import collect

        totals = collect(store)
    finally:
        store.close()
    assert (totals["tool_calls"], totals["shell_calls"]) == (1, 1)


def test_without_an_active_copy_the_earliest_keeps_the_call(tmp_path):
    c = Chain()
    objs, call, _again = _call_then_copy(c, on_active_path="original")
    write(sessions_dir(tmp_path / "s") / f"{SID}.jsonl", [header()] + objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "s")
    assert rows(db, "SELECT message_uuid, is_active_path FROM tool_calls") == [(call["id"], 1)]


def test_the_call_moves_when_a_later_run_puts_the_copy_on_the_active_path(tmp_path):
    c = Chain()
    user = c.user("deploy")
    call = c.assistant([exec_call("toolu_move", "make deploy")])
    result = c.result("toolu_move", "ok", details={"exitCode": 0})
    path = write(sessions_dir(tmp_path / "s") / f"{SID}.jsonl", [header(), user, call, result])
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "s")
    assert rows(db, "SELECT message_uuid, is_active_path FROM tool_calls") == [(call["id"], 1)]
    # a restore re-appends the call on a new branch from the user message: the old one is abandoned
    again = c.entry("message", parent=user["id"], message=copy.deepcopy(call["message"]))
    with open(path, "ab") as f:
        f.write((json.dumps(again) + "\n").encode())
    do_import(db, tmp_path / "s")
    assert rows(db, "SELECT message_uuid, is_active_path, result_preview FROM tool_calls") == [(again["id"], 1, "ok")]
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls") == 1
    assert rows(db, "SELECT message_uuid, tool_call_count, calls_elsewhere FROM messages WHERE has_tool_calls = 1 "
                    "ORDER BY seq") == [(call["id"], 0, 1), (again["id"], 1, 0)]


def test_blocks_without_an_id_are_one_call_per_entry_and_block(tmp_path):
    c = Chain()
    block = {"type": "toolCall", "name": "exec", "arguments": {"command": "uptime"}}
    first = c.assistant([block])
    second = c.entry("message", message=copy.deepcopy(first["message"]))
    write(sessions_dir(tmp_path / "s") / f"{SID}.jsonl", [header(), c.user("?"), first, second])
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "s")
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls") == 2


def test_a_copy_in_another_file_of_the_session_adds_no_call(tmp_path):
    """A backup copy holds the message under another entry id: still the same tool call."""
    c = Chain()
    user = c.user("go")
    call = c.assistant([exec_call("toolu_bak", "df -h")])
    sd = sessions_dir(tmp_path / "s")
    write(sd / f"{SID}.jsonl", [header(), user, call, c.result("toolu_bak", "ok", details={"exitCode": 0})])
    restored = dict(copy.deepcopy(call), id="beefbeef")
    write(sd / f"{SID}.jsonl.bak-1-2", [header(), user, restored])
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "s")
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE has_tool_calls = 1") == 2
    assert rows(db, "SELECT call_id, result_preview FROM tool_calls") == [("toolu_bak", "ok")]


def test_the_migration_folds_duplicates_of_an_older_store(tmp_path):
    """A store written before this rule holds a row per copy: opening it folds them into one row
    (the active copy's), paired with the earliest real result, and the counts follow."""
    c = Chain()
    objs, call, again = _call_then_copy(c, on_active_path="copy")
    write(sessions_dir(tmp_path / "s") / f"{SID}.jsonl", [header()] + objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "s")
    conn = sqlite3.connect(db)
    # what the older importer wrote: a second row for the first copy, counts per block, schema 4
    conn.execute("INSERT INTO tool_calls (session_id, message_id, server, agent_id, session_uuid, message_uuid, "
                 "block_index, call_id, tool_name, is_error, timestamp, is_active_path, command) "
                 "SELECT session_id, id, server, agent_id, session_uuid, message_uuid, 1, 'toolu_dup', 'exec', 0, "
                 "timestamp, 0, 'systemctl restart nginx' FROM messages WHERE message_uuid = ?", (call["id"],))
    conn.execute("UPDATE messages SET tool_call_count = 1, calls_elsewhere = NULL WHERE has_tool_calls = 1")
    conn.execute("UPDATE tool_calls SET result_message_id = NULL, result_preview = 'done again'")
    conn.execute("DELETE FROM _migrations WHERE version >= 5")
    conn.commit()
    conn.close()
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls") == 2
    open_store(f"sqlite:///{db}").close()
    assert rows(db, "SELECT message_uuid, result_preview FROM tool_calls") == [(again["id"], "done")]
    assert scalar(db, "SELECT SUM(tool_call_count) FROM messages") == 1
