"""One test per identity and incremental rule of the archive core (issue 2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from transcripts import (
    SID, Chain, conversation, do_import, dump, exec_call, header, line, rebuild_lines, rows, scalar,
    sessions_dir, write,
)

REPO = Path(__file__).resolve().parents[1]


def totals(db):
    return json.loads(subprocess.run(
        [sys.executable, "-m", "importer", "stats", "--db", f"sqlite:///{db}", "--json"],
        cwd=REPO, capture_output=True, check=True, text=True).stdout)


def test_conversation_rows(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    write(sd / f"{SID}.jsonl", conversation(turns=3))
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "state")
    assert (report.files_imported, report.messages_added, report.files_failed) == (1, 12, 0)
    assert rows(db, "SELECT role, COUNT(*) FROM messages GROUP BY role ORDER BY role") == [
        ("assistant", 6), ("toolResult", 3), ("user", 3)]
    # Tool calls are paired with their results; a non-zero exit code is a failure
    # even though OpenClaw wrote isError: false.
    assert rows(db, "SELECT call_id, command, exit_code, duration_ms, is_error, result_preview "
                    "FROM tool_calls ORDER BY call_id") == [
        ("toolu_5e55_0", "ls -la /tmp/0", 0, 10, 0, "output 0"),
        ("toolu_5e55_1", "ls -la /tmp/1", 1, 11, 1, "output 1"),
        ("toolu_5e55_2", "ls -la /tmp/2", 0, 12, 0, "output 2"),
    ]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_error = 1") == 1
    assert scalar(db, "SELECT session_type || ' ' || message_count || ' ' || agent_id || ' ' || server "
                      "FROM sessions") == "normal 12 main test"
    # text_preview rules: text first, else thinking
    assert scalar(db, "SELECT text_preview FROM messages WHERE role = 'assistant' AND has_thinking = 1 "
                      "ORDER BY seq LIMIT 1") == "plan 0"
    assert scalar(db, "SELECT COUNT(*) FROM entries") == 0
    assert scalar(db, "SELECT ROUND(SUM(cost_usd), 6) FROM messages WHERE usage_counted = 1") == 0.06


def test_rename_to_reset_changes_no_count(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    live = write(sd / f"{SID}.jsonl", conversation())
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    before = totals(db)
    live.rename(sd / f"{SID}.jsonl.reset.2026-04-24T16-09-14.281Z")
    report = do_import(db, tmp_path / "state")
    assert report.files_imported == 1 and report.messages_added == 0
    after = totals(db)

    def but_files(t: dict) -> dict:  # the rename is a second file; nothing else may differ
        return {k: (but_files(v) if isinstance(v, dict) else v) for k, v in t.items() if k != "files"}

    assert but_files(after) == but_files(before)
    assert scalar(db, "SELECT session_type FROM sessions") == "reset"
    # A .deleted copy and a checkpoint copy beside it add nothing either.
    data = (sd / f"{SID}.jsonl.reset.2026-04-24T16-09-14.281Z").read_bytes()
    (sd / f"{SID}.jsonl.deleted.2026-04-25T00-00-00.000Z").write_bytes(data)
    (sd / f"{SID}.checkpoint.0f0f0f0f-0000-4000-8000-000000000000.jsonl").write_bytes(data[: len(data) // 2])
    do_import(db, tmp_path / "state")
    assert totals(db)["messages"] == before["messages"]
    assert totals(db)["usage"] == before["usage"]


def test_append_reads_only_new_bytes(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    objs = conversation(turns=40)
    path = write(sd / f"{SID}.jsonl", objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    unchanged = do_import(db, tmp_path / "state")
    assert (unchanged.files_unchanged, unchanged.bytes_read) == (1, 0)
    c = Chain(start=1000, parent=objs[-1]["id"])
    added = line(c.user("one more line"))
    with open(path, "ab") as f:
        f.write(added)
    size = path.stat().st_size
    assert size > 20_000
    report = do_import(db, tmp_path / "state")
    assert report.messages_added == 1
    # the new line plus two 1 KB windows that prove the old bytes did not change
    assert len(added) <= report.bytes_read <= len(added) + 2048
    assert scalar(db, "SELECT leaf_entry_id FROM sessions") == c.parent
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == 161


def test_pending_line_completed_later(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    objs = conversation(turns=1)
    c = Chain(start=500, parent=objs[-1]["id"])
    last = line(c.user("half written"))
    path = write(sd / f"{SID}.jsonl", objs, raw_tail=last[:-20])
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "state")
    assert (report.pending_lines, report.bad_lines, report.messages_added) == (1, 0, 4)
    assert totals(db)["pending_lines"] == 1
    with open(path, "ab") as f:
        f.write(last[-20:])
    report = do_import(db, tmp_path / "state")
    assert (report.pending_lines, report.messages_added) == (0, 1)
    assert totals(db)["pending_lines"] == 0
    # A complete last line without its newline is imported now and found again
    # (not doubled) when the newline arrives.
    c2 = Chain(start=600, parent=c.parent)
    nl_less = line(c2.user("no newline yet"))[:-1]
    with open(path, "ab") as f:
        f.write(nl_less)
    assert do_import(db, tmp_path / "state").messages_added == 1
    with open(path, "ab") as f:
        f.write(b"\n")
    assert do_import(db, tmp_path / "state").messages_added == 0
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 6


def test_truncate_and_rewrite_keeps_archive(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    objs = conversation(turns=4)
    path = write(sd / f"{SID}.jsonl", objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    # The gateway trims the file: header and first turns gone, a new entry added.
    kept = objs[9:]
    c = Chain(start=900, parent=kept[-1]["id"])
    kept.append(c.user("after trim"))
    write(path, kept)
    report = do_import(db, tmp_path / "state")
    assert report.messages_added == 1
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 17  # nothing lost
    assert scalar(db, "SELECT COUNT(*) FROM sessions") == 1
    # Rewritten in place with the same size prefix changed: read whole, merged.
    rewritten = [dict(o) for o in kept]
    rewritten[0] = dict(rewritten[0], timestamp="2026-04-05T09:09:09.000Z")
    write(path, rewritten)
    report = do_import(db, tmp_path / "state")
    assert report.messages_added == 0
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 1
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 17
    assert scalar(db, "SELECT timestamp FROM messages WHERE message_uuid = ?", (rewritten[0]["id"],)) \
        == "2026-04-05 09:09:09.000"
    # The file disappears: the archive keeps everything.
    path.unlink()
    do_import(db, tmp_path / "state")
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 17


def test_raw_u2028_and_malformed_middle_line(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    c = Chain()
    text = "first\u2028second\u2029third\u0085fourth"
    good = [header(), c.user(text), c.assistant([{"type": "text", "text": "ok"}])]
    data = line(good[0]) + line(good[1]) + b'{"type":"message","id":"broken",\n' + b"undefined\n" + line(good[2])
    assert "\u2028".encode() in data  # raw, not escaped
    (sd / f"{SID}.jsonl").write_bytes(data)
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "state")
    assert (report.bad_lines, report.messages_added, report.files_failed) == (2, 2, 0)
    assert scalar(db, "SELECT text_preview FROM messages WHERE role = 'user'") == text
    assert scalar(db, "SELECT bad_lines FROM parsed_files") == 2
    assert totals(db)["bad_lines"] == 2


def test_v1_file_gets_positional_ids(tmp_path):
    h = {"type": "session", "id": SID, "timestamp": "2025-12-09T00:53:29.825Z", "cwd": "/w",
         "provider": "anthropic", "modelId": "m", "thinkingLevel": "off"}
    lines = [h]
    for i in range(3):
        lines.append({"type": "message", "timestamp": f"2025-12-09T00:5{i}:00.000Z",
                      "message": {"role": "user", "content": [{"type": "text", "text": f"q{i}"}], "timestamp": i}})
        lines.append({"type": "message", "timestamp": f"2025-12-09T00:5{i}:30.000Z",
                      "message": {"role": "bashExecution", "command": f"echo {i}", "output": "x",
                                  "exitCode": i, "cancelled": False, "truncated": False}})
    path = write(tmp_path / "v1.jsonl", lines)
    db = tmp_path / "a.db"
    do_import(db, path, server="pi")
    assert rows(db, "SELECT message_uuid, parent_message_uuid FROM messages ORDER BY seq") == [
        ("@1", None), ("@2", "@1"), ("@3", "@2"), ("@4", "@3"), ("@5", "@4"), ("@6", "@5")]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == 6
    assert scalar(db, "SELECT agent_id || ' ' || version FROM sessions") == "pi 1"
    # pi's `!command`: a command a person typed (role user), pi's word kept (docs/vocabulary.md)
    assert rows(db, "SELECT role, text_preview, is_error FROM messages WHERE native_role = 'bashExecution' "
                    "ORDER BY seq") == [("user", "echo 0", 0), ("user", "echo 1", 1), ("user", "echo 2", 1)]
    # Appending to a v1 file chains to the previous last entry.
    with open(path, "ab") as f:
        f.write(line({"type": "message", "timestamp": "2025-12-09T01:00:00.000Z",
                      "message": {"role": "user", "content": "plain string content", "timestamp": 9}}))
    do_import(db, path, server="pi")
    assert rows(db, "SELECT message_uuid, parent_message_uuid, text_preview FROM messages WHERE seq = 7") == [
        ("@7", "@6", "plain string content")]


def test_headerless_file_and_name_mismatch(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    objs = conversation(sid=SID, turns=2)
    # header-less (trimmed by the gateway): session id from the file name
    write(sd / f"{SID}.jsonl", objs[1:])
    # a file whose name differs from its header id: the header wins
    other = "0a0a0a0a-1111-4000-8000-000000000001"
    write(sd / "2026-04-05T01-00-00-000Z_99999999-1111-4000-8000-000000000009.jsonl",
          conversation(sid=other, turns=1))
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    assert rows(db, "SELECT session_uuid, message_count, cwd FROM sessions ORDER BY session_uuid") == [
        (other, 4, "/work"), (SID, 8, None)]


def test_truncation_recovery_copy_counts_once(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    c = Chain()
    objs = [header(), c.user("hi")]
    reply = c.assistant([{"type": "text", "text": "hello"}], cost=0.5, tokens=1000, ts=1775354499999)
    objs.append(reply)
    # OpenClaw's recovery re-appends the same assistant message under a new id
    copy = json.loads(json.dumps(reply))
    copy["id"] = "feedbeef"
    copy["parentId"] = reply["id"]
    objs.append(copy)
    # a genuinely different call with the same usage but another request time counts
    objs.append(c.assistant([{"type": "text", "text": "again"}], cost=0.5, tokens=1000, ts=1775354500001))
    write(sd / f"{SID}.jsonl", objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    t = totals(db)
    assert t["messages_by_role"] == {"assistant": 3, "user": 1}
    assert t["usage"]["cost_total"] == pytest.approx(1.0)
    assert t["usage"]["input"] == 2000
    assert rows(db, "SELECT message_uuid, usage_counted FROM messages WHERE role = 'assistant' ORDER BY seq") == [
        (reply["id"], 1), ("feedbeef", 0), (objs[-1]["id"], 1)]
    assert scalar(db, "SELECT cost_usd FROM sessions") == pytest.approx(1.0)


def test_branches_and_synthetic_messages(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    c = Chain()
    objs = [header(), c.user("start")]
    root = c.parent
    a1 = c.assistant([exec_call("toolu_a", "echo a"), exec_call("toolu_b", "git status")])
    objs.append(a1)
    objs.append(c.result("toolu_a", "a"))
    # a mirror line written as a sibling of the tool result: off the active path
    mirror = c.entry("message", parent=a1["id"], message={
        "role": "assistant", "content": [{"type": "text", "text": "mirror"}], "provider": "openclaw",
        "model": "delivery-mirror", "usage": {"input": 0, "output": 0, "totalTokens": 0}, "stopReason": "stop",
        "timestamp": 1})
    objs.append(mirror)
    c.parent = objs[3]["id"]
    objs.append(c.result("toolu_b", "[openclaw] missing tool result in session history; inserted"))
    objs.append(c.entry("compaction", summary="summary text", firstKeptEntryId=root, tokensBefore=10))
    objs.append(c.entry("custom_message", customType="openclaw.runtime-context", content="ctx", display=False))
    objs.append(c.entry("reset_boundary"))  # unknown types are kept
    objs.append(c.user("end"))
    write(sd / f"{SID}.jsonl", objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    assert rows(db, "SELECT message_uuid FROM messages WHERE is_active_path = 0") == [(mirror["id"],)]
    assert rows(db, "SELECT message_uuid FROM messages WHERE is_synthetic = 1 ORDER BY seq") == [
        (mirror["id"],), (objs[5]["id"],)]
    # the second exec call is not the message's first tool call and still counts
    assert rows(db, "SELECT tool_name, command, block_index FROM tool_calls ORDER BY block_index") == [
        ("exec", "echo a", 0), ("exec", "git status", 1)]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE first_tool_call = 'exec'") == 1
    assert rows(db, "SELECT entry_type, custom_type, is_active_path FROM entries ORDER BY seq") == [
        # (reset_boundary: a type FORMAT.md says appears and the parser does not know: kept, marked unknown)
        ("compaction", None, 1), ("custom_message", "openclaw.runtime-context", 1), ("reset_boundary", "unknown", 1)]


def test_every_line_rebuilds_from_store(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    objs = conversation(turns=2)
    c = Chain(start=77, parent=objs[-1]["id"])
    objs.append(c.entry("model_change", provider="p", modelId="m"))
    objs.append(c.entry("message", message={"role": "user", "timestamp": 5}))  # no content key
    objs.append(c.entry("message", message={"role": "user", "content": None, "timestamp": 6}))
    objs.append(c.entry("message", message={"role": "user", "content": "s\u2028<b>x</b>", "timestamp": 7}))
    write(sd / f"{SID}.jsonl", objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    rebuilt = rebuild_lines(db)
    assert rebuilt[(SID, "header")] == objs[0]
    for obj in objs[1:]:
        assert rebuilt[(SID, obj["id"])] == obj
    assert scalar(db, "SELECT text_preview FROM messages WHERE seq = ?", (len(objs) - 1,)) == "s\u2028x"


def test_sessions_json_metadata(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    write(sd / f"{SID}.jsonl", conversation(turns=1))
    (sd / "sessions.json").write_text(json.dumps({
        "agent:main:telegram:group:42": {"sessionId": SID, "updatedAt": 5, "label": "ops", "displayName": "Ops",
                                         "channel": "telegram", "chatType": "group", "spawnedBy": "agent:main:main"},
    }))
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "state")
    assert report.files_seen == 1  # sessions.json is not counted as a transcript
    assert rows(db, "SELECT session_key, label, display_name, channel, chat_type, spawned_by FROM sessions") == [
        ("agent:main:telegram:group:42", "ops", "Ops", "telegram", "group", "agent:main:main")]


def test_unreadable_and_non_transcript_files(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    write(sd / f"{SID}.jsonl", conversation(turns=1))
    (sd / "random.jsonl").write_bytes(os.urandom(4096).replace(b"\n", b"x") + b"\n")
    (sd / "notes.jsonl").write_text('{"some": "other tool"}\n')
    locked = write(sd / "0b0b0b0b-0000-4000-8000-000000000000.jsonl", conversation(sid="0b0b0b0b", turns=1))
    locked.chmod(0)
    (sd / "x.jsonl.lock").write_text("{}")
    db = tmp_path / "a.db"
    proc = subprocess.run(
        [sys.executable, "-m", "importer", "import", str(tmp_path / "state"), "--server", "t",
         "--db", f"sqlite:///{db}"], cwd=REPO, capture_output=True, text=True)
    if os.geteuid() == 0:  # root reads a mode-000 file: only the non-transcripts remain
        assert proc.returncode == 0, proc.stderr[-500:]
    else:
        assert proc.returncode == 1
        assert "Permission denied" in proc.stderr
    assert rows(db, "SELECT file_path LIKE '%random.jsonl', status, error_message IS NOT NULL FROM parsed_files "
                    "WHERE status <> 'success' ORDER BY file_path") == [
        (0, "ignored", 1), (1, "ignored", 1)]
    assert "2 not transcripts" in proc.stderr
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE session_uuid = ?", (SID,)) == 1


def test_unreadable_file_fails_clearly_and_others_import(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    write(sd / f"{SID}.jsonl", conversation(turns=1))
    # a directory named like a transcript cannot be read as one
    broken = sd / "0c0c0c0c-0000-4000-8000-000000000000.jsonl"
    write(broken, conversation(sid="0c0c0c0c", turns=1))
    db = tmp_path / "a.db"
    from importer.sources import LOCAL
    from importer.sources.openclaw import SOURCE, TranscriptFile
    from importer.writer import ImportReport, import_unit
    from importer.store import open_store
    # A file that vanishes between listing and reading: one clear error, the rest imports.
    broken.unlink()
    store = open_store(f"sqlite:///{db}")
    unit = TranscriptFile(SOURCE, "t", "main", str(broken), broken.name, 10, 1, fs=LOCAL)
    with pytest.raises(FileNotFoundError):
        with store.transaction():
            import_unit(store, unit, None, ImportReport())
    store.close()
    proc = subprocess.run(
        [sys.executable, "-m", "importer", "import", str(sd / f"{SID}.jsonl"), str(broken),
         "--db", f"sqlite:///{db}"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") <= 3 and "no such file or folder" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 4


def test_kill_9_mid_file_then_rerun_equals_clean_run(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    small1 = write(sd / "11111111-0000-4000-8000-000000000001.jsonl", conversation(sid="11111111", turns=3))
    big_objs = [header("22222222-0000-4000-8000-000000000002")]
    c = Chain()
    for i in range(6000):
        big_objs.append(c.user(f"line {i} " + "数据库 " * 200))
        big_objs.append(c.assistant([{"type": "text", "text": "ok " * 300}, exec_call(f"t{i}", f"echo {i}")]))
        big_objs.append(c.result(f"t{i}", "x" * 2000, details={"exitCode": 0}))
    big = write(sd / "22222222-0000-4000-8000-000000000002.jsonl", big_objs)
    small2 = write(sd / "33333333-0000-4000-8000-000000000003.jsonl", conversation(sid="33333333", turns=3))
    for i, p in enumerate((small1, big, small2)):  # import order: oldest first
        os.utime(p, ns=(1_700_000_000_000_000_000 + i * 10**9,) * 2)
    clean = tmp_path / "clean.db"
    t0 = time.perf_counter()
    do_import(clean, tmp_path / "state")
    duration = time.perf_counter() - t0
    cmd = [sys.executable, "-m", "importer", "import", str(tmp_path / "state"), "--server", "test", "--quiet"]
    killed_mid_file = 0
    for trial, fraction in enumerate((0.35, 0.6, 0.85, 0.5, 0.7)):
        db = tmp_path / f"killed{trial}.db"
        do_import(db, small1)  # store initialised; the child only pays for import work
        proc = subprocess.Popen(cmd + ["--db", f"sqlite:///{db}"], cwd=REPO)
        time.sleep(0.3 + duration * fraction)
        if proc.poll() is not None:
            continue
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
        done = {r[0] for r in rows(db, "SELECT file_path FROM parsed_files")}
        if str(big) not in done:
            killed_mid_file += 1
            # the big file left no trace: its transaction never committed
            assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE session_uuid LIKE '22222222%'") == 0
        do_import(db, tmp_path / "state")
        assert dump(db) == dump(clean)
        if killed_mid_file >= 2:
            break
    assert killed_mid_file >= 1, "no trial killed the importer inside the big file"


def test_design_example_queries_run_as_written(tmp_path):
    sd = sessions_dir(tmp_path / "state", agent="xingyao")
    objs = conversation(turns=2)
    write(sd / f"{SID}.jsonl", objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    q1 = rows(db, """SELECT id, message_uuid, role, text_preview, has_thinking, first_tool_call, timestamp
FROM messages
WHERE agent_id = 'xingyao'
  AND timestamp BETWEEN '2026-04-05 00:00:00' AND '2026-04-05 23:59:59'
ORDER BY timestamp;""")
    assert len(q1) == 8
    q2 = rows(db, """SELECT m.id, m.timestamp, m.text_preview, m.session_uuid
FROM messages m
WHERE m.agent_id = 'xingyao'
  AND m.timestamp BETWEEN '2026-04-05 00:00:00' AND '2026-04-05 23:59:59'
  AND m.first_tool_call = 'exec';""")
    assert len(q2) == 2
    q3 = rows(db, """SELECT id, message_uuid, role, thinking_text, timestamp
FROM messages
WHERE agent_id = 'xingyao'
  AND has_thinking = 1
  AND timestamp BETWEEN '2026-04-05 00:00:00' AND '2026-04-05 23:59:59';""")
    assert [r[3] for r in q3] == ["plan 0", "plan 1"]


def test_newer_store_is_refused(tmp_path):
    db = tmp_path / "a.db"
    do_import(db, write(tmp_path / "x.jsonl", conversation(turns=1)))
    import sqlite3
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO _migrations VALUES (99, 'future', '2030-01-01')")
    conn.commit()
    conn.close()
    proc = subprocess.run([sys.executable, "-m", "importer", "stats", "--db", f"sqlite:///{db}"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "newer than this AgentBase" in proc.stderr and "Traceback" not in proc.stderr


def test_backup_copy_adds_lost_entries_but_never_overrides_live(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    objs = conversation(turns=2)
    live = write(sd / f"{SID}.jsonl", objs)
    # The backup holds an older version of one entry and an entry the live file lost.
    old_version = dict(objs[2], timestamp="2026-04-05T00:00:00.000Z")
    c = Chain(start=4000, parent=objs[1]["id"])
    lost = c.user("only in the backup")
    backup = write(sd / f"{SID}.jsonl.bak-123-456", [objs[0], objs[1], old_version, lost])
    os.utime(live, ns=(2_000_000_000_000_000_000,) * 2)  # live is newer, but import the backup last
    os.utime(backup, ns=(2_100_000_000_000_000_000,) * 2)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 9
    assert scalar(db, "SELECT timestamp FROM messages WHERE message_uuid = ?", (objs[2]["id"],)) \
        == objs[2]["timestamp"].replace("T", " ").rstrip("Z")
    assert [json.loads(r[0]) for r in rows(db, "SELECT raw_json FROM entry_revisions")] == [old_version]
    assert scalar(db, "SELECT session_type || ' ' || leaf_entry_id FROM sessions") == f"normal {objs[-1]['id']}"
    assert scalar(db, "SELECT is_active_path FROM messages WHERE message_uuid = ?", (lost["id"],)) == 0


def test_tool_result_paired_across_flushes_and_runs(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    c = Chain()
    objs = [header()]
    for i in range(260):  # > 500 entries: the writer flushes between a call and its result
        objs.append(c.assistant([exec_call(f"call{i}", f"echo {i}")]))
        objs.append(c.result(f"call{i}", f"out {i}", details={"exitCode": 2 if i == 249 else 0}))
    objs.append(c.assistant([exec_call("last", "sleep 1")]))  # its result comes in the next run
    path = write(sd / f"{SID}.jsonl", objs)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NULL") == 1
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls t JOIN messages m ON m.id = t.result_message_id "
                      "WHERE m.tool_call_id = t.call_id") == 260
    assert rows(db, "SELECT call_id, exit_code, is_error FROM tool_calls WHERE is_error = 1") == [("call249", 2, 1)]
    with open(path, "ab") as f:
        f.write(line(c.result("last", "[openclaw] missing tool result in session history; inserted")))
        f.write(line(c.result("last", "slept", details={"exitCode": 0, "durationMs": 1000})))
    do_import(db, tmp_path / "state")
    assert rows(db, "SELECT result_preview, duration_ms FROM tool_calls WHERE call_id = 'last'") == [("slept", 1000)]
