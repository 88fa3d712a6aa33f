"""The real stores OpenClaw 2026.9.6 wrote (../shared/samples/openclaw-2026.9.6), imported by the CLI.

Expected figures are established independently of the importer: straight SQL over
transcript_events, zstd decoding with the zstandard package here, the published .zst archive
decoded as a stream, and tests/oracle.py for the counting. They hold real tool output and model
text: assertion messages show counts, ids and names only.
"""

import hashlib
import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
import oracle  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE = REPO_ROOT.parent / "shared" / "samples" / "openclaw-2026.9.6"
SERVER = "oc-2026.9.6"
DELETED = "6713e46e-a3db-4441-90c2-363f5d41bc98"


def _u(inp, out, cache_read, cache_write, total, cost):
    return {"input": inp, "output": out, "cacheRead": cache_read, "cacheWrite": cache_write,
            "totalTokens": total, "cost_total": cost}


# Established once by two independent routes, before the importer read these stores:
#  - the sqlite3 shell (`SELECT event_json FROM transcript_events`) piped into jq for the 149
#    event_json rows, plus the 5 event_zstd rows decoded with zstandard and counted with jq
#    (messages, toolCall blocks, exec calls, thinking messages, assistant usage sums, reset events);
#  - the published .jsonl.deleted...zst decompressed as a stream, counted with jq;
#  - _independent() below (SQL + zstandard + oracle.count_session; oracle.count_files for pi).
# No two assistant messages of a session share (timestamp, provider, model, usage): every call counts.
EXACT = {
    ("main", "2c3954a4-b038-4023-a925-38fbbbab62bb"): {
        "messages": 42, "messages_by_role": {"user": 10, "assistant": 21, "toolResult": 11},
        "tool_calls": 11, "exec_calls": 9, "messages_with_thinking": 21,
        "usage": _u(281145, 1421, 1344, 0, 283910, 0.2841214)},
    ("main", "8a7949b5-0856-406b-927a-02b6378868f4"): {
        "messages": 11, "messages_by_role": {"user": 3, "assistant": 5, "toolResult": 3},
        "tool_calls": 3, "exec_calls": 3, "messages_with_thinking": 5,
        "usage": _u(61243, 335, 320, 0, 61898, 0.061945)},
    ("main", "a8632c20-a53c-4190-85d8-3d9b2ccbcbc2"): {
        "messages": 10, "messages_by_role": {"user": 3, "assistant": 5, "toolResult": 2},
        "tool_calls": 2, "exec_calls": 1, "messages_with_thinking": 5,
        "usage": _u(90672, 2446, 320, 0, 93438, 0.095596)},
    ("main", DELETED): {
        "messages": 6, "messages_by_role": {"user": 2, "assistant": 3, "toolResult": 1},
        "tool_calls": 1, "exec_calls": 1, "messages_with_thinking": 3,
        "usage": _u(36036, 227, 192, 0, 36455, 0.0365092)},
    ("work", "b9b0aa1a-0829-4655-b1e9-548015dc2398"): {
        "messages": 20, "messages_by_role": {"user": 6, "assistant": 10, "toolResult": 4},
        "tool_calls": 4, "exec_calls": 3, "messages_with_thinking": 10,
        "usage": _u(15640, 2651, 633, 0, 18924, 0.0868749)},
    ("pi", "01a22c0b-2376-77f0-9ab2-affb64bd2653"): {
        "messages": 33, "messages_by_role": {"user": 7, "assistant": 16, "toolResult": 10},
        "tool_calls": 10, "exec_calls": 8, "messages_with_thinking": 16,
        "usage": _u(23549, 1076, 1024, 0, 25649, 0.0258034)},
    ("pi", "01a22c0b-49dc-75ef-9502-df7096b7aed5"): {
        "messages": 18, "messages_by_role": {"user": 5, "assistant": 9, "toolResult": 4},
        "tool_calls": 4, "exec_calls": 3, "messages_with_thinking": 9,
        "usage": _u(5426, 530, 532, 0, 6488, 0.0243876)},
}
EVENTS = {"main": 117, "work": 37}  # transcript_events rows
ZSTD_ROWS = {"main": 3, "work": 2}


@pytest.fixture(scope="module")
def sample():
    if not SAMPLE.is_dir():
        message = (f"OpenClaw 2026.9.6 sample stores not found at {SAMPLE} "
                   "(expected ../shared/samples beside the repository)")
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message + "; they are required when CI=true")
        pytest.skip(message)
    return SAMPLE


def _store(sample, agent):
    return sample / "agents" / agent / "agent" / "openclaw-agent.sqlite"


def _events(path):
    """{session id: [(seq, object)]}, by plain SQL; event_zstd decoded here."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        for sid, seq, text, blob, size in con.execute(
                "SELECT session_id, seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events "
                "ORDER BY session_id, seq"):
            if text is None:
                raw = zstandard.ZstdDecompressor().decompress(blob, max_output_size=size)
                assert len(raw) == size, f"{sid} seq {seq}: {len(raw)} bytes, declared {size}"
                text = raw.decode("utf-8")
            out.setdefault(sid, []).append((seq, json.loads(text)))
        return out
    finally:
        con.close()


def _deleted_file(sample):
    files = sorted((sample / "agents" / "main" / "sessions").glob("*.jsonl.deleted.*.zst"))
    assert len(files) == 1, [f.name for f in files]
    return files[0]


def _independent(sample):
    """{(agent, session id): oracle counts}."""
    out = {}
    for agent in ("main", "work"):
        for sid, events in _events(_store(sample, agent)).items():
            entries = [(str(obj.get("id") or f"@{seq}"), obj) for seq, obj in events
                       if not (seq == 0 and obj.get("type") == "session")]
            out[(agent, sid)] = oracle.count_session(entries)
    data = zstandard.ZstdDecompressor().decompressobj().decompress(_deleted_file(sample).read_bytes())
    objs = [json.loads(line) for line in data.split(b"\n") if line.strip()]
    assert objs[0]["type"] == "session"
    out[("main", objs[0]["id"])] = oracle.count_session([(o["id"], o) for o in objs[1:]])
    for path in sorted((sample / "pi").rglob("*.jsonl")):
        for sid, counts in oracle.count_files([path])["per_session"].items():
            out[("pi", sid)] = counts
    return out


@pytest.fixture(scope="module")
def imported(sample, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("oc")
    db_url = f"sqlite:///{tmp}/a.db"
    runs = {}
    for label, path in (("store", sample), ("pi", sample / "pi")):
        proc = ic.run_cli(["import", path, "--server", SERVER, "--db", db_url, "--json-summary"])
        runs[label] = proc
    return {"db": tmp / "a.db", "url": db_url, "runs": runs}


def _summary(proc):
    assert proc.returncode == 0, ic.describe(proc, "import")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_storage_facts(sample):
    """What the stores hold, as the sample's README describes it."""
    for agent in ("main", "work"):
        con = sqlite3.connect(f"file:{_store(sample, agent)}?mode=ro", uri=True)
        try:
            assert con.execute("PRAGMA user_version").fetchone()[0] == 23
            assert con.execute("SELECT COUNT(*) FROM transcript_events").fetchone()[0] == EVENTS[agent]
            assert con.execute("SELECT COUNT(*) FROM transcript_events WHERE event_zstd IS NOT NULL"
                               ).fetchone()[0] == ZSTD_ROWS[agent]
            archives = con.execute("SELECT archive_name, archive_blob, archive_sha256, encoding "
                                   "FROM session_transcript_archives").fetchall()
        finally:
            con.close()
        if agent == "main":
            (name, blob, sha, encoding), = archives
            published = _deleted_file(sample)
            assert (name, encoding) == (published.name, "zstd")
            assert blob == published.read_bytes() and hashlib.sha256(blob).hexdigest() == sha
            frame = zstandard.get_frame_parameters(blob)
            assert frame.content_size == zstandard.CONTENTSIZE_UNKNOWN  # decode as a stream
        else:
            assert archives == []


def test_independent_figures_match_the_exact_ones(sample):
    got = _independent(sample)
    assert sorted(got) == sorted(EXACT)
    diffs = []
    for key, want in EXACT.items():
        for field in ("messages", "messages_by_role", "tool_calls", "exec_calls", "messages_with_thinking"):
            if got[key][field] != want[field]:
                diffs.append(f"{key}: {field} independent={got[key][field]} exact={want[field]}")
        for field, value in want["usage"].items():
            if got[key]["usage"][field] != pytest.approx(value, rel=1e-9, abs=1e-12):
                diffs.append(f"{key}: usage.{field}")
    assert not diffs, ic.report(diffs)


def test_import_summary(imported):
    store, pi = _summary(imported["runs"]["store"]), _summary(imported["runs"]["pi"])
    # 4 store sessions (3 in main, 1 in work), main's delete archive row, its published .zst
    assert (store["files_seen"], store["files_imported"], store["files_failed"]) == (6, 6, 0)
    assert store["events_read"] == EVENTS["main"] + EVENTS["work"]
    assert (store["bad_lines"], store["pending_lines"]) == (0, 0)
    assert (pi["files_seen"], pi["files_imported"], pi["events_read"]) == (2, 2, 0)


def test_every_session_once_with_the_exact_figures(imported):
    figures = ic.db_figures(imported["db"])["sessions"]
    got = {(agent, sid): f for (server, agent, sid), f in figures.items() if server == SERVER}
    assert sorted(got) == sorted(EXACT)
    groups = {}  # compare() takes oracle results per (server, agent)
    for (agent, sid), counts in EXACT.items():
        groups.setdefault((SERVER, agent), {"per_session": {}})["per_session"][sid] = counts
    diffs = ic.compare(groups, {"sessions": figures}, check_files=False)
    assert not diffs, ic.report(diffs)


def test_session_metadata_and_types(imported):
    con = ic.connect(imported["db"])
    try:
        got = {r[0]: r[1:] for r in con.execute(
            "SELECT session_uuid, agent_id, session_type, session_key, status, model_provider, model, "
            "ended_at IS NOT NULL, archived_at IS NOT NULL, cwd IS NOT NULL, file_path FROM sessions "
            "WHERE server = ?", (SERVER,))}
        resets = dict(con.execute("SELECT session_uuid, COUNT(*) FROM entries WHERE entry_type = 'reset' "
                                  "GROUP BY session_uuid").fetchall())
        revisions = con.execute("SELECT COUNT(*) FROM entry_revisions").fetchone()[0]
    finally:
        con.close()
    main = "2c3954a4-b038-4023-a925-38fbbbab62bb"
    work = "b9b0aa1a-0829-4655-b1e9-548015dc2398"
    assert got[main][:9] == ("main", "normal", "agent:main:main", "done", "mock", "mock-model", 1, 0, 1)
    assert got[work][:9] == ("work", "normal", "agent:work:main", "done", "mockanth", "mock-claude", 1, 0, 1)
    assert got["8a7949b5-0856-406b-927a-02b6378868f4"][:3] == ("main", "normal", "agent:main:scratch-1")
    assert got["8a7949b5-0856-406b-927a-02b6378868f4"][7] == 1  # `sessions archive` set archived_at
    assert got[DELETED][:3] == ("main", "deleted", "agent:main:to-delete")
    assert got[main][9].endswith(f"openclaw-agent.sqlite#{main}")
    # The in-place resets are events of the same session, not new sessions.
    assert resets == {main: 1, work: 1}
    # The deleted session came from two containers (archive row, published file) with the same lines.
    assert revisions == 0
    pis = {sid: v for sid, v in got.items() if v[0] == "pi"}
    assert len(pis) == 2 and all(v[1] == "normal" and v[8] == 1 for v in pis.values())


def test_failed_commands_are_errors(imported, sample):
    """A failing exec is stored with isError false and a non-zero details.exitCode."""
    want = {}
    for agent in ("main", "work"):
        for sid, events in _events(_store(sample, agent)).items():
            for _, obj in events:
                msg = obj.get("message") or {}
                details = msg.get("details") if isinstance(msg.get("details"), dict) else {}
                if msg.get("role") == "toolResult" and (
                        msg.get("isError") is True or details.get("exitCode") not in (None, 0)
                        or details.get("status") == "error"):
                    want[sid] = want.get(sid, 0) + 1
    con = ic.connect(imported["db"])
    try:
        got = dict(con.execute("SELECT session_uuid, COUNT(*) FROM messages WHERE server = ? AND role = 'toolResult' "
                               "AND is_error = 1 AND agent_id != 'pi' AND session_uuid != ? GROUP BY session_uuid",
                               (SERVER, DELETED)).fetchall())
    finally:
        con.close()
    assert got == want and sum(want.values()) == 4


def test_rerun_reads_nothing(imported, sample):
    """Runs last: the same stores again change no row and read no event."""
    before = (ic.table_counts(imported["db"]), ic.db_figures(imported["db"])["sessions"])
    for path in (sample, sample / "pi"):
        summary = _summary(ic.run_cli(["import", path, "--server", SERVER, "--db", imported["url"],
                                       "--json-summary"]))
        assert summary["events_read"] == 0 and summary["files_unchanged"] == summary["files_seen"]
        assert summary["bytes_read"] == 0
    after = (ic.table_counts(imported["db"]), ic.db_figures(imported["db"])["sessions"])
    assert after[0] == before[0]
    assert after[1] == before[1]
