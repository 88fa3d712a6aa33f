"""Cursor agent transcripts and Cursor CLI chat stores (importer/sources/cursor.py, docs/cursor.md).

The real files in ../shared/other-samples-2/cursor (SOURCES.md: three ``agent-transcripts/*.txt``,
one ``chats/<hash>/<agent>/store.db``) are copied to a private folder and read there (SQLite may
write a ``-shm`` beside a database it opens): required under CI=true, skipped with a message
otherwise. They hold real people's text: assertions show counts and ids only. Their figures are
established here independently of the importer (``txt_oracle``: the block headers and markers
counted line by line; ``store_oracle``: sqlite3, json and a protobuf walk of the root blob written
here).

Everything else runs on made-up files (``write_txt``, ``make_store``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
from transcripts import do_import, dump, rows, scalar  # noqa: E402
from vocabulary_checks import assert_vocabulary  # noqa: E402

from importer import parser as P  # noqa: E402
from importer.sources import Discovery, Scope  # noqa: E402
from importer.sources import cursor as CU  # noqa: E402
from importer.sources.fs import FileSystem  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT.parent / "shared" / "other-samples-2" / "cursor"


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    if not SAMPLES.is_dir():
        message = f"Cursor samples not found at {SAMPLES} (expected ../shared/other-samples-2 beside the repository)"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message + "; they are required when CI=true")
        pytest.skip(message)
    copy = tmp_path_factory.mktemp("samples") / "cursor"
    shutil.copytree(SAMPLES, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def imp(db: Path, *paths, server: str = "test", agent: str | None = None):
    report = do_import(db, *paths, server=server, agent=agent)
    assert report.files_failed == 0, report.failures
    return report


# ---------------------------------------------------------------------------
# The oracles, sharing no code with the importer


def txt_oracle(path: Path) -> Counter:
    """Per the format: a block per ``user:`` / ``assistant:`` line; a prompt per user block with a
    ``<user_query>``; a tool call per ``[Tool call]`` line, a result per ``[Tool result]`` line."""
    out = Counter()
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line == "user:":
            out["user_blocks"] += 1
        elif line == "assistant:":
            out["assistant"] += 1
        elif line == "<user_query>":
            out["prompts"] += 1
        elif line.startswith("[Tool call] "):
            out["tool_calls"] += 1
        elif line.startswith("[Tool result] "):
            out["results"] += 1
        elif line.startswith("[Thinking]"):
            out["thinking"] += 1
    out["sessions"] = 1
    return out


def _varint(b: bytes, i: int):
    n = shift = 0
    while True:
        n |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return n, i


def _fields(b: bytes):
    i = 0
    while i < len(b):
        tag, i = _varint(b, i)
        assert tag & 7 == 2, "the root holds length-delimited fields only"
        size, i = _varint(b, i)
        yield tag >> 3, b[i:i + size]
        i += size


def store_oracle(path: Path, tmp: Path) -> Counter:
    """The messages the root blob lists (field 1) and the one in progress (field 4), by role;
    their tool-call, tool-result and reasoning parts."""
    tmp.mkdir(parents=True, exist_ok=True)
    copy = tmp / "store.db"
    shutil.copyfile(path, copy)
    conn = sqlite3.connect(copy)
    try:
        meta = json.loads(bytes.fromhex(conn.execute("SELECT value FROM meta WHERE key = '0'").fetchone()[0]))
        blob = {i: bytes(d) for i, d in conn.execute("SELECT id, data FROM blobs")}
    finally:
        conn.close()
    out = Counter()
    messages = []
    for number, value in _fields(blob[meta["latestRootBlobId"]]):
        if number == 1:
            messages.append(json.loads(blob[value.hex()]))
        elif number == 4:
            messages.append(json.loads(value))
    out["sessions"] = 1
    calls = set()
    for m in messages:
        out[m["role"]] += 1
        for part in m["content"] if isinstance(m["content"], list) else []:
            if part["type"] == "tool-call":
                calls.add(part["toolCallId"])
                out["shell_calls"] += part["toolName"] == "Shell"
            elif part["type"] == "tool-result":
                out["results"] += 1
            elif part["type"] == "reasoning":
                out["thinking"] += 1
    out["tool_calls"] = len(calls)
    out["prompts"] = out["user"]
    return out


def sample_figures(samples: Path, tmp: Path) -> Counter:
    total = Counter()
    for txt in sorted(samples.rglob("agent-transcripts/*.txt")):
        total.update(txt_oracle(txt))
    for db in sorted(samples.rglob("store.db")):
        got = store_oracle(db, tmp / db.parent.name)
        got["user_blocks"] = got["user"]
        total.update(got)
    return total


@pytest.fixture(scope="module")
def imported(samples, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cursor")
    url = f"sqlite:///{tmp}/a.db"
    for folder in sorted(samples.iterdir()):
        proc = ic.run_cli(["import", folder, "--server", folder.name, "--db", url, "--json-summary"])
        assert proc.returncode == 0, ic.describe(proc, f"import {folder.name}")
        summary = json.loads(proc.stdout)
        assert summary["files_failed"] == 0 and summary["files_ignored"] == 0 and summary["bad_lines"] == 0
        assert summary["files_imported"] >= 1
    return tmp / "a.db"


def test_sample_figures_equal_the_oracle(samples, imported, tmp_path):
    want = sample_figures(samples, tmp_path)
    db = imported
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = 'cursor'") == want["sessions"] == 4
    by_role = dict(rows(db, "SELECT role, COUNT(*) FROM messages WHERE source = 'cursor' GROUP BY role"))
    assert by_role == {"user": want["prompts"], "assistant": want["assistant"], "toolResult": want["results"],
                       "system": want["system"] + want["user_blocks"] - want["prompts"]}
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE source = 'cursor'") == want["tool_calls"]
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE source = 'cursor' AND command IS NOT NULL") == \
        want["shell_calls"]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE has_thinking = 1") == want["thinking"]
    # every result answers a call; the call still in progress in the store has none yet
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NOT NULL") == want["results"]
    # no usage anywhere; every time approximate (the transcripts have none)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE input_tokens IS NOT NULL OR output_tokens IS NOT NULL "
                      "OR cost_usd IS NOT NULL OR call_key IS NOT NULL") == 0
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE time_approximate = 0 OR timestamp IS NULL") == 0
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE times_approximate = 1") == 4
    assert scalar(db, "SELECT COUNT(*) FROM entries") == 0
    assert_vocabulary(db, "cursor", usage=False, shell_exit_codes=False, tool_results=True)


def test_stats_json_by_source(samples, imported, tmp_path):
    want = sample_figures(samples, tmp_path)
    proc = ic.run_cli(["stats", "--db", f"sqlite:///{imported}", "--json"])
    assert proc.returncode == 0, ic.describe(proc, "stats")
    got = json.loads(proc.stdout)["by_source"]["cursor"]
    assert got["sessions"] == want["sessions"]
    assert got["messages_by_role"]["user"] == want["prompts"]
    assert got["messages_by_role"]["assistant"] == want["assistant"]
    assert (got["tool_calls"], got["shell_calls"]) == (want["tool_calls"], want["shell_calls"])
    assert got["model_calls"] == 0 and got["usage"]["totalTokens"] == 0


def test_sample_sessions(samples, imported):
    meta_created = scalar(imported, "SELECT started_at FROM sessions WHERE file_path LIKE '%store.db'")
    assert meta_created is not None and meta_created.startswith("2025-")
    assert scalar(imported, "SELECT COUNT(*) FROM sessions WHERE file_path LIKE '%.txt' AND project IS NOT NULL") == 3
    assert scalar(imported, "SELECT COUNT(*) FROM sessions WHERE title IS NOT NULL") == 1  # the store's own name
    # the transcripts' times are the files' modification times
    for txt in samples.rglob("agent-transcripts/*.txt"):
        stamp = P.format_timestamp(txt.stat().st_mtime_ns // 1_000_000_000 * 1000)
        assert rows(imported, "SELECT DISTINCT timestamp FROM messages WHERE session_uuid = ?", (txt.stem,)) == \
            [(stamp,)]
    for folder in sorted(samples.iterdir()):
        report = imp(imported, folder, server=folder.name)
        assert report.messages_added == 0 and report.files_imported == 0


# ---------------------------------------------------------------------------
# Made-up transcripts


def block_user(text: str) -> str:
    return f"user:\n<user_query>\n{text}\n</user_query>\n\n"


def block_assistant(i: int, shell: bool = True) -> str:
    calls = "[Tool call] Shell\n  command: make test\n  description: run it\n" if shell else ""
    calls += f"[Tool call] StrReplace\n  path: /tmp/f{i}\n  old_string: a\nsecond line\n  new_string: b\n"
    results = "\n[Tool result] Shell\nok\n" if shell else ""
    results += "\n[Tool result] StrReplace\n\n"
    return f"assistant:\n[Thinking] Consider it {i}.\n\nWorking on {i}.\n{calls}{results}"


def write_txt(root: Path, sid: str, text: str, project: str = "Users-me-app") -> Path:
    folder = root / ".cursor" / "projects" / project / "agent-transcripts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{sid}.txt"
    path.write_text(text, encoding="utf-8")
    return path


SID = "11111111-2222-3333-4444-555555555555"


def test_a_made_up_transcript(tmp_path):
    write_txt(tmp_path, SID, block_user("Fix the tests") + block_assistant(1) + "assistant:\nAll done.\n")
    db = tmp_path / "a.db"
    imp(db, tmp_path)
    got = rows(db, "SELECT message_uuid, parent_message_uuid, role, native_role, has_thinking, tool_call_count, "
                   "tool_call_id, tool_name, text_preview FROM messages ORDER BY seq, message_uuid")
    assert got == [
        ("b0", None, "user", "user", 0, 0, None, None, "Fix the tests"),
        ("b1", "b0", "assistant", "assistant", 1, 2, None, None, "Working on 1."),
        ("b1.r0", "b1", "toolResult", "tool_result", 0, 0, "b1.c0", "Shell", "ok"),
        ("b1.r1", "b1.r0", "toolResult", "tool_result", 0, 0, "b1.c1", "StrReplace", None),
        ("b2", "b1.r1", "assistant", "assistant", 0, 0, None, None, "All done."),
    ]
    calls = rows(db, "SELECT call_id, tool_name, command, arguments FROM tool_calls ORDER BY call_id")
    assert [c[:3] for c in calls] == [("b1.c0", "Shell", "make test"), ("b1.c1", "StrReplace", None)]
    assert json.loads(calls[1][3]) == {"path": "/tmp/f1", "old_string": "a\nsecond line", "new_string": "b"}
    assert rows(db, "SELECT session_uuid, project, times_approximate, leaf_entry_id FROM sessions") == \
        [(SID, "Users-me-app", 1, "b2")]
    assert_vocabulary(db, "cursor", usage=False, shell_exit_codes=False, tool_results=True)


def test_an_appended_transcript_reads_from_its_last_block(tmp_path):
    text = block_user("one " * 4000) + block_assistant(1)
    path = write_txt(tmp_path, SID, text)
    db = tmp_path / "a.db"
    first = imp(db, tmp_path)
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 4
    more = block_user("two") + block_assistant(2, shell=False)
    with path.open("a", encoding="utf-8") as f:
        f.write(more)
    second = imp(db, tmp_path)
    # read from the start of the former last block: not the blocks before it
    assert second.bytes_read < len((text + more).encode()) - 16000 + 2 * 1024 + 100
    assert second.messages_added == 3 and scalar(db, "SELECT COUNT(*) FROM messages") == 7
    assert first.messages_added == 4
    assert rows(db, "SELECT parent_message_uuid FROM messages WHERE message_uuid = 'b2'") == [("b1.r1",)]
    assert scalar(db, "SELECT leaf_entry_id FROM sessions") == "b3.r0"
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == 7


def test_a_block_still_being_written_is_read_again_whole(tmp_path):
    path = write_txt(tmp_path, SID, block_user("one") + "assistant:\nHalf a sent")  # cut mid-line
    db = tmp_path / "a.db"
    report = imp(db, tmp_path)
    assert report.bad_lines == 0
    assert scalar(db, "SELECT text_preview FROM messages WHERE message_uuid = 'b1'") == "Half a sent"
    with path.open("a", encoding="utf-8") as f:
        f.write("ence, now whole.\n")
    imp(db, tmp_path)
    assert scalar(db, "SELECT text_preview FROM messages WHERE message_uuid = 'b1'") == "Half a sentence, now whole."
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 2
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 1


def test_other_files_are_not_claimed(tmp_path):
    terminals = tmp_path / ".cursor" / "projects" / "p" / "terminals"
    terminals.mkdir(parents=True)
    (terminals / "1.txt").write_text("$ ls\nfile\n")
    write_txt(tmp_path, SID, block_user("hi"), project="p")
    assert not CU.SOURCE.claims_file("1.txt", b"$ ls\nfile\n")
    assert not CU.SOURCE.claims_file("notes.txt", b"user: someone\n")
    assert CU.SOURCE.claims_file("x.txt", b"user:\n<user_query>\n")
    assert not CU.SOURCE.claims_file("store.db", b"SQLite format 3\x00" + b"CREATE TABLE messages")
    out = Discovery()
    assert CU.SOURCE.find(FileSystem(), str(tmp_path), Scope("s"), out)
    assert [Path(u.key).name for u in out.units] == [f"{SID}.txt"]
    out = Discovery()
    assert not CU.SOURCE.find(FileSystem(), str(terminals), Scope("s"), out) and out.units == []
    # the newer per-folder form is not read, and a warning says so
    (tmp_path / ".cursor" / "projects" / "p" / "agent-transcripts" / SID).mkdir()
    out = Discovery()
    CU.SOURCE.find(FileSystem(), str(tmp_path), Scope("s"), out)
    assert len(out.units) == 1 and any("newer" in w for w in out.warnings)


# ---------------------------------------------------------------------------
# Made-up chat stores


def _pb(number: int, data: bytes) -> bytes:
    def varint(n: int) -> bytes:
        out = b""
        while True:
            byte = n & 0x7F
            n >>= 7
            out += bytes([byte | (0x80 if n else 0)])
            if not n:
                return out
    return varint((number << 3) | 2) + varint(len(data)) + data


def make_store(path: Path, messages: list, pending: dict | None = None, name: str = "Check the build",
               blobs: dict | None = None) -> str:
    """A store.db: each message a JSON blob, a root node listing them (field 1), a turn node
    (field 2, the UI's copy), the message in progress inline (field 4)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS blobs (id TEXT PRIMARY KEY, data BLOB)")
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
    root = b""
    for m in messages:
        data = m if isinstance(m, bytes) else json.dumps(m).encode()
        bid = hashlib.sha256(data).hexdigest()
        conn.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (bid, data))
        root += _pb(1, bytes.fromhex(bid))
    turn = _pb(1, b"prompt text") + _pb(2, b"bubble")
    tid = hashlib.sha256(turn).hexdigest()
    conn.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (tid, turn))
    root += _pb(2, bytes.fromhex(tid))
    if pending is not None:
        root += _pb(4, json.dumps(pending).encode())
    rid = hashlib.sha256(root).hexdigest()
    conn.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (rid, root))
    meta = {"agentId": path.parent.name, "latestRootBlobId": rid, "name": name, "mode": "default",
            "createdAt": 1754635645568, "lastUsedModel": "gpt-5"}
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('0', ?)", (json.dumps(meta).encode().hex(),))
    conn.close()
    return rid


AGENT = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def store_path(root: Path) -> Path:
    return root / ".cursor" / "chats" / "0123456789abcdef0123456789abcdef" / AGENT / "store.db"


def chat(n: int = 1) -> list:
    out = [{"role": "system", "content": "You are an agent."}]
    for i in range(n):
        out += [{"role": "user", "content": [{"type": "text", "text": f"question {i}"}]},
                {"id": "1", "role": "assistant", "content": [
                    {"type": "reasoning", "text": f"think {i}", "signature": "s"},
                    {"type": "text", "text": f"answer {i}"},
                    {"type": "tool-call", "toolCallId": f"call_{i}", "toolName": "Shell", "args": {"command": "ls"}}]},
                {"id": f"call_{i}", "role": "tool", "content": [
                    {"type": "tool-result", "toolCallId": f"call_{i}", "toolName": "Shell", "result": f"out {i}"}]}]
    return out


def test_a_made_up_chat_store(tmp_path):
    pending = {"id": "1", "role": "assistant", "content": [{"type": "text", "text": "still typing"}]}
    make_store(store_path(tmp_path), chat(1), pending=pending)
    db = tmp_path / "a.db"
    imp(db, tmp_path)
    got = rows(db, "SELECT role, native_role, has_thinking, tool_call_count, tool_call_id, text_preview "
                   "FROM messages ORDER BY seq, message_uuid")
    assert got == [("system", "system", 0, 0, None, "You are an agent."),
                   ("user", "user", 0, 0, None, "question 0"),
                   ("assistant", "assistant", 1, 1, None, "answer 0"),
                   ("toolResult", "tool", 0, 0, "call_0", "out 0"),
                   ("assistant", "assistant", 0, 0, None, "still typing")]
    assert rows(db, "SELECT call_id, command, result_message_id IS NOT NULL FROM tool_calls") == [("call_0", "ls", 1)]
    assert rows(db, "SELECT session_uuid, title, model, started_at, times_approximate FROM sessions") == \
        [(AGENT, "Check the build", "gpt-5", "2025-08-08 06:47:25.568", 1)]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == 5
    assert_vocabulary(db, "cursor", usage=False, shell_exit_codes=False, tool_results=True)


def test_a_grown_store_reads_only_the_new_messages(tmp_path):
    path = store_path(tmp_path)
    make_store(path, chat(1))
    db = tmp_path / "a.db"
    first = imp(db, tmp_path)
    assert first.events_read == 4 and scalar(db, "SELECT COUNT(*) FROM messages") == 4
    make_store(path, chat(2))  # the same blobs, three more, a new root
    second = imp(db, tmp_path)
    assert second.events_read == 3 and second.messages_added == 3
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 7
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == 7
    leaf = scalar(db, "SELECT leaf_entry_id FROM sessions")
    assert leaf.startswith("6:") and leaf.endswith(":0")
    # a rewritten history (an edited prompt): the new branch is the active path, the old one stays archived
    edited = chat(2)
    edited[4]["content"][0]["text"] = "question 1, edited"
    make_store(path, edited[:5])
    imp(db, tmp_path)
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 8
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 1") == 5


def test_unknown_records_are_kept_as_entries(tmp_path):
    messages = chat(1) + [b"plain text leaf", {"role": "narrator", "content": "aside"},
                          {"id": "1", "role": "assistant", "content": [{"type": "hologram", "beam": 1}]}]
    make_store(store_path(tmp_path), messages)
    db = tmp_path / "a.db"
    report = imp(db, tmp_path)
    assert sorted(r[0] for r in rows(db, "SELECT custom_type FROM entries")) == ["unknown", "unknown"]
    # a made-up role stays in entry_type, for doctor to list (docs/sources.md, "Unknown records")
    assert sorted(rows(db, "SELECT entry_type FROM entries")) == [("cursor_blob",), ("message.narrator",)]
    assert json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE seq = 6")) == \
        [{"type": "hologram", "beam": 1}]
    assert any("does not know" in w for w in report.warnings)


def test_a_store_with_undecodable_meta_fails_clearly(tmp_path):
    path = store_path(tmp_path)
    make_store(path, chat(1))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = 'zz not hex' WHERE key = '0'")
    conn.commit()
    conn.close()
    report = do_import(tmp_path / "a.db", tmp_path)
    assert report.files_failed == 1 and "meta entry 0 is not hex-encoded JSON" in report.failures[0][1]
    assert "question" not in report.failures[0][1]


def test_proto_fields_refuses_what_is_not_a_node():
    assert CU.proto_fields(_pb(1, b"x" * 32) + _pb(4, b"{}")) == [(1, 2, b"x" * 32), (4, 2, b"{}")]
    for bad in (b"\x0a\x20abc", b"\x0f", b"\x00\x01"):
        with pytest.raises(ValueError):
            CU.proto_fields(bad)


# ---------------------------------------------------------------------------
# Over SSH, and the explorer


def test_import_over_ssh_equals_a_local_import(tmp_path, samples):
    from sshd import SSHServer, require_sshd
    from test_ssh import import_config, write_config

    require_sshd()
    made = tmp_path / "made"
    make_store(store_path(made), chat(2))
    write_txt(made, SID, block_user("Fix it") + block_assistant(1))
    server = SSHServer(tmp_path / "sshd").start()
    try:
        paths = [str(p) for p in sorted(samples.iterdir())] + [str(made)]
        config = write_config(tmp_path, server, [
            {"name": "box", "host": "127.0.0.1", "port": server.port, "user": server.user,
             "identity_file": str(server.user_key), "paths": paths}])
        first = import_config(config)
        assert first.ok, [s.error for s in first.servers]
        assert first.servers[0].where.startswith("ssh")
        second = import_config(config)
        assert second.ok and second.totals().files_imported == 0
    finally:
        server.stop()
    local = tmp_path / "local.db"
    imp(local, *paths, server="box")
    got, want = dump(tmp_path / "ssh.db"), dump(local)
    assert got["messages"] and got == want
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM sessions") == 4 + 2


def test_the_conversation_page_renders_a_cursor_session(tmp_path):
    from datasette.app import Datasette
    import asyncio

    from importer.snapshot import export_snapshot
    from datasette_agentbase.serve import load_metadata

    write_txt(tmp_path, SID, block_user("Fix the tests") + block_assistant(1) + "assistant:\nAll done.\n")
    db = tmp_path / "t.db"
    imp(db, tmp_path)
    store = open_store(f"sqlite:///{db}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db")
    finally:
        store.close()
    snap = tmp_path / "snapshot.db"
    ds = Datasette([str(snap)], metadata=load_metadata(snap), template_dir=str(REPO_ROOT / "templates"))
    asyncio.run(ds.invoke_startup())
    sid = sqlite3.connect(snap).execute("SELECT id FROM sessions WHERE session_uuid = ?", (SID,)).fetchone()[0]
    page = asyncio.run(ds.client.get(f"/-/agentbase/session/{sid}"))
    assert page.status_code == 200
    html = page.text
    assert "Fix the tests" in html and "All done." in html and "make test" in html


def test_doctor_lists_no_version_as_the_samples_hold_none(samples, imported, tmp_path):
    import doctor_check as dc

    # the oracle: no store meta names a version, and the transcripts are plain text without a header
    for store in samples.rglob("store.db"):
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        meta = CU.read_meta(conn)
        conn.close()
        assert not any("version" in k.lower() for k in meta)
    assert dc.doctor_versions(tmp_path / "home", CU.KIND, imported) == set()
