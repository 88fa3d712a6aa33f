"""Claude Code transcripts (importer/sources/claude_code.py, docs/claude-code.md).

Two halves. The real files in ../shared/other-samples/claude-code (required under CI=true, else
skipped with a message) are read where they are and counted by :func:`independent`, a counter written
from the counting rules with the json module alone (it shares no code with the importer), and
against hand-checked constants. They are real people's data: assertions and messages show counts,
booleans and hashes only, never their text. The made-up transcripts of claude_code_fixtures.py test
each trap on its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import claude_code_fixtures as F  # noqa: E402
from claude_code_fixtures import Conv, text, thinking, tool, usage  # noqa: E402
from transcripts import do_import, dump, rows, scalar  # noqa: E402

from importer import stats  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO.parent / "shared" / "other-samples" / "claude-code"
SWORD = "SWORDIntel__claude-backups/config"
AUSTIN = "austinweitao__claude-backup/projects"
SNIFFLY = "chiphuyen__sniffly/tests/mock-data"
CCUSAGE = "ryoppippi__ccusage/apps/ccusage/test/fixtures/claude"
TREES = (SWORD, AUSTIN, SNIFFLY, CCUSAGE)


@pytest.fixture(scope="module")
def samples() -> Path:
    if not SAMPLES.is_dir():
        message = f"the Claude Code samples are not at {SAMPLES}"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message + "; they are required when CI=true")
        pytest.skip(message)
    return SAMPLES


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLES.rglob("*.jsonl") if p.name != "journal.jsonl")


def ok(condition: bool, what: str) -> None:
    """An assertion whose message names what failed, never the values (sample content)."""
    if not condition:
        pytest.fail(what, pytrace=False)


def figures(db: Path, source: str = "claude-code") -> dict:
    store = open_store(f"sqlite:///{db}")
    try:
        t = stats.collect(store)["by_source"].get(source)
    finally:
        store.close()
    if t is None:
        return {"sessions": 0, "user": 0, "assistant": 0, "toolResult": 0, "model_calls": 0, "tool_calls": 0,
                "shell_calls": 0, "usage": [0, 0, 0, 0, 0]}
    u = t["usage"]
    roles = t["messages_by_role"]
    return {"sessions": t["sessions"], "user": roles.get("user", 0), "assistant": roles.get("assistant", 0),
            "toolResult": roles.get("toolResult", 0), "model_calls": t["model_calls"],
            "tool_calls": t["tool_calls"], "shell_calls": t["shell_calls"],
            "usage": [u["input"], u["output"], u["cacheRead"], u["cacheWrite"], u["totalTokens"]]}


# ---------------------------------------------------------------------------------------------
# The independent counter: the counting rules of the issue, the json module, nothing else.

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _objects(path: Path) -> list[dict]:
    data = path.read_bytes()
    chunks = data.split(b"\n")
    if not data.endswith(b"\n"):
        chunks = chunks[:-1]  # a trailing partial line is not a line yet
    out = []
    for raw in chunks:
        if raw.strip():
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def independent(paths: list[Path]) -> dict:
    """- a session is a distinct (sessionId, agentId or none); the isCompactSummary line opening a
      continued 1.0.x file carries the previous session's id but is the file's session's first line
      (the file's session: its name when some line has that id, else the first id);
    - user messages: user lines with string content or a block that is not a tool_result, one per
      line uuid, not isMeta or isCompactSummary;
    - assistant messages: one per message id (API calls and synthetic ones);
    - model calls: distinct (message.id, requestId) of the non-synthetic ones (not <synthetic>, not
      isApiErrorMessage), usage from the call's line with the largest token total, never summed;
    - toolResult messages: one per tool_use id of the tool_result blocks;
    - tool calls: distinct tool_use ids; shell calls: those named Bash."""
    sessions, users, assistants, results, tools, bash = set(), set(), set(), set(), set(), set()
    calls: dict = {}
    for path in paths:
        objs = _objects(path)
        stem = path.name[: -len(".jsonl")]
        named = [o["sessionId"] for o in objs if isinstance(o.get("sessionId"), str) and not o.get("isCompactSummary")]
        own = stem if _UUID.match(stem) and stem in named else (named[0] if named else None)
        for o in objs:
            message = o.get("message") if isinstance(o.get("message"), dict) else {}
            kind = o.get("type") or message.get("role")
            sid = o.get("sessionId")
            if sid is None:
                continue
            if o.get("isCompactSummary") and not o.get("isSidechain"):
                sid = own
            session = (sid, o.get("agentId") if o.get("isSidechain") else None)
            sessions.add(session)
            content = message.get("content")
            blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
            if kind == "user":
                if not (o.get("isMeta") or o.get("isCompactSummary")):
                    if isinstance(content, str) or any(b.get("type") != "tool_result" for b in blocks):
                        users.add((session, o.get("uuid")))
                for b in blocks:
                    if b.get("type") == "tool_result":
                        results.add((session, b.get("tool_use_id")))
            elif kind == "assistant":
                assistants.add((session, message.get("id")))
                for b in blocks:
                    if b.get("type") == "tool_use":
                        tools.add((session, b.get("id")))
                        if b.get("name") == "Bash":
                            bash.add((session, b.get("id")))
                if message.get("model") != "<synthetic>" and not o.get("isApiErrorMessage"):
                    u = message.get("usage") or {}
                    four = [u.get("input_tokens") or 0, u.get("output_tokens") or 0,
                            u.get("cache_read_input_tokens") or 0, u.get("cache_creation_input_tokens") or 0]
                    key = (message.get("id"), o.get("requestId"))
                    if key not in calls or sum(four) >= sum(calls[key]):
                        calls[key] = four
    sums = [sum(c[i] for c in calls.values()) for i in range(4)]
    return {"sessions": len(sessions), "user": len(users), "assistant": len(assistants),
            "toolResult": len(results), "model_calls": len(calls), "tool_calls": len(tools),
            "shell_calls": len(bash), "usage": sums + [sum(sums)]}


def _f(sessions, user, assistant, tool_result, calls, tool_calls, shell, inp, out, read, write):
    return {"sessions": sessions, "user": user, "assistant": assistant, "toolResult": tool_result,
            "model_calls": calls, "tool_calls": tool_calls, "shell_calls": shell,
            "usage": [inp, out, read, write, inp + out + read + write]}


# Per file, established before the importer counted them: session ids, tool_use / tool_result ids
# and Bash calls with grep -o over the raw lines (05305169 names two sessionIds: one is the
# compact summary's, see independent()), user lines without tool results and message ids with grep,
# and the usage sums a second way: the LAST line of each (message.id, requestId) instead of the
# largest (the same figures: every streamed copy grows or repeats). Then checked against the files'
# structure by hand (sizes in SOURCES.md, the split message ids and workflow run it describes).
EXPECTED = {
    "05305169-1775-4375-9db4-c1cd7548b644.jsonl": _f(1, 11, 83, 80, 83, 80, 24, 458, 7870, 6110702, 323589),
    "0ba93d49-429c-4f63-a270-180cd19703fa.jsonl": _f(1, 1, 1, 0, 1, 1, 0, 4, 3, 11459, 10662),
    "3e89eb15-32e7-43f8-8734-8d47310263ea.jsonl": _f(1, 6, 44, 39, 43, 39, 32, 1366179, 33726, 1138587, 111055),
    "agent-a12cea4a990e7e508.jsonl": _f(1, 0, 2, 1, 2, 2, 2, 58061, 181, 2607, 744),
    "agent-a5796fd8827d4b5dc.jsonl": _f(1, 1, 4, 3, 4, 3, 2, 116204, 3555, 11709, 3050),
    "c8b10888-2968-4b5b-aea9-3d6a7b1f1982.jsonl": _f(1, 3, 1, 0, 1, 0, 0, 216650, 144, 0, 0),
    "fed8ce56-bc79-401f-a83e-af084253362f.jsonl": _f(1, 3, 4, 7, 4, 7, 7, 88, 278, 44544, 16000),
    "ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl": _f(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),  # one summary line
    "chat.jsonl": _f(1, 0, 3, 0, 3, 0, 0, 600, 250, 70, 75),  # ccusage's fixture, costUSD
}


# ---------------------------------------------------------------------------------------------
# The real samples


def test_samples_each_file_counts_exactly(samples, tmp_path):
    files = sample_files()
    assert sorted(p.name for p in files) == sorted(EXPECTED)
    for i, path in enumerate(files):
        db = tmp_path / f"{i}.db"
        report = do_import(db, path, server="samples")
        ok(report.files_failed == 0 and report.files_imported == 1, f"{path.name}: not imported")
        got = figures(db)
        counted = independent([path])
        for key in EXPECTED[path.name]:
            ok(counted[key] == EXPECTED[path.name][key], f"{path.name}: the counter's {key} is not the constant")
            ok(got[key] == counted[key], f"{path.name}: {key} differs from the independent count")
        bad = scalar(db, "SELECT COALESCE(SUM(bad_lines), 0) + COALESCE(SUM(pending_lines), 0) FROM parsed_files")
        ok(bad == 0, f"{path.name}: bad or pending lines")


def _digests(objs) -> list[str]:
    return sorted(hashlib.sha256(json.dumps(o, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
                  for o in objs)


def _from_block(b):
    """docs/claude-code.md, "Every line kept": OpenClaw's block back to Claude's."""
    if not isinstance(b, dict):
        return b
    t = b.get("type")
    if t == "toolCall":
        return {("input" if k == "arguments" else k): ("tool_use" if k == "type" else v) for k, v in b.items()}
    if t == "thinking" and b.get("ccType") == "redacted_thinking":
        out = {k: v for k, v in b.items() if k not in ("redacted", "ccType")}
        out["type"] = "redacted_thinking"
        return out
    if t == "thinking":
        return {("signature" if k == "thinkingSignature" else k): v for k, v in b.items()}
    if t == "image" and "data" in b and "source" not in b:
        return {"type": "image", "source": {"type": "base64", "media_type": b.get("mimeType"), "data": b["data"]}}
    return b


def rebuild(db: Path) -> list[dict]:
    """Every line of the files imported into ``db``, rebuilt from the rows as docs/claude-code.md
    describes (written from the docs, not from the importer)."""
    conn = sqlite3.connect(str(db))
    try:
        messages = conn.execute("SELECT session_id, message_uuid, role, raw_json, content_blocks FROM messages").fetchall()
        entries = [r[0] for r in conn.execute("SELECT raw_json FROM entries")]
        orphans = [r[0] for r in conn.execute("SELECT value FROM claude_code_links WHERE kind = 'orphan'")]
    finally:
        conn.close()
    content_of = {(s, m): json.loads(c) for s, m, _r, _raw, c in messages}
    out = []
    for sid, mid, role, raw, _c in messages:
        base = json.loads(raw)
        info = base.pop("_agentbase", None)
        if info is not None and "part_of" in info:
            continue
        blocks = content_of[(sid, mid)]
        if info is None:
            base["message"]["content"] = [_from_block(b) for b in blocks]
            out.append(base)
        elif role == "assistant":
            lines = [base] + info.get("lines", [])
            for k, line in enumerate(lines):
                content = [_from_block(blocks[i]) if isinstance(i, int) else i["block"] for i in info["blocks"][k]]
                if info.get("string", [False] * len(lines))[k]:
                    content = content[0]["text"]
                if not info.get("absent", [False] * len(lines))[k]:
                    line["message"]["content"] = content
                out.append(line)
        else:
            placed, whole = {}, None
            for part in info["parts"]:
                got = content_of[(sid, part["id"])]
                if "result" in part:
                    block = dict(part["result"])
                    if part.get("string"):
                        block["content"] = got[0]["text"]
                    elif "value" in part:
                        block["content"] = part["value"]
                    elif not part.get("absent"):
                        block["content"] = [_from_block(x) for x in got]
                    placed[part["index"]] = block
                elif part.get("string"):
                    whole = got[0]["text"]
                else:
                    for j, i in enumerate(part["blocks"]):
                        placed[i] = _from_block(got[j])
            base["message"]["content"] = whole if whole is not None else [placed[i] for i in sorted(placed)]
            out.append(base)
    out.extend(json.loads(r) for r in entries)
    out.extend(json.loads(r) for r in orphans)
    return out


def test_samples_every_line_can_be_rebuilt(samples, tmp_path):
    for i, path in enumerate(sample_files()):
        db = tmp_path / f"{i}.db"
        do_import(db, path, server="samples")
        want = _digests(_objects(path))
        got = _digests(rebuild(db))
        ok(got == want, f"{path.name}: {len(set(want) - set(got))} lines not rebuilt, {len(set(got) - set(want))} extra")


def _workflow_call(parent: Path, run: str) -> str | None:
    """The Workflow tool_use whose result names the run (toolUseResult.runId), read with json."""
    for o in _objects(parent):
        tur = o.get("toolUseResult")
        if isinstance(tur, dict) and tur.get("runId") == run:
            for b in o["message"]["content"]:
                if b.get("type") == "tool_result":
                    return b["tool_use_id"]
    return None


def test_samples_trees_link_sub_agents_and_continuations(samples, tmp_path):
    db = tmp_path / "trees.db"
    for tree in TREES:
        report = do_import(db, samples / tree, server=tree.split("__")[0])
        ok(report.files_failed == 0, f"{tree}: a file failed")
    # every transcript of every tree, counted per server (a server's files are counted together:
    # a model call in two of its files would count once)
    for tree in TREES:
        server = tree.split("__")[0]
        files = [p for p in (samples / tree).rglob("*.jsonl") if p.name != "journal.jsonl"]
        store = open_store(f"sqlite:///{db}")
        try:
            per = {t["server"]: t for t in stats.collect(store, by="server")}
        finally:
            store.close()
        got, want = per[server], independent(files)
        ok(got["sessions"] == want["sessions"] and got["model_calls"] == want["model_calls"]
           and got["tool_calls"] == want["tool_calls"] and got["shell_calls"] == want["shell_calls"]
           and [got["usage"][k] for k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens")] == want["usage"],
           f"{tree}: the tree's figures differ from the independent count")
    # the workflow run: two sub-agent sessions of 3e89eb15, each linked to the Workflow call that
    # started the run (found from the parent's tool results with json, above)
    parent = next((samples / AUSTIN).rglob("3e89eb15-*.jsonl"))
    call = _workflow_call(parent, "wf_9cab1d1d-783")
    ok(call is not None, "the sample's Workflow result names its run")
    subs = rows(db, "SELECT session_uuid, parent_session_uuid, parent_call_id, session_type, reason FROM sessions "
                    "WHERE parent_session_uuid IS NOT NULL ORDER BY session_uuid")
    agents = sorted(p.name[len("agent-"):-len(".jsonl")] for p in (samples / AUSTIN).rglob("agent-*.jsonl"))
    ok([s[0] for s in subs] == [f"{parent.stem}:{a}" for a in agents], "a sub-agent session is <sessionId>:<agentId>")
    for _uuid, parent_uuid, parent_call, session_type, _reason in subs:
        ok(parent_uuid == parent.stem and parent_call == call and session_type == "subagent",
           "sub-agent linked to its parent session and the Workflow call")
    reasons = sorted(r[4] or "" for r in subs)
    ok(reasons == ["", "workflow-subagent"], "the agentType of the one .meta.json that says it")
    # the continued 1.0.x session: its compact summary names the session it continues
    continued = next((samples / SWORD).rglob("05305169-*.jsonl"))
    previous = next(o["sessionId"] for o in _objects(continued) if o.get("isCompactSummary"))
    got = rows(db, "SELECT previous_session_id FROM sessions WHERE session_uuid = ?", (continued.stem,))
    ok(got == [(previous,)], "previous_session_id of the continued session")
    # isMeta and isCompactSummary lines: kept, as system (context) rows of Claude Code's word user
    counted = sum(1 for p in sample_files() for o in _objects(p)
                  if o.get("type") == "user" and (o.get("isMeta") or o.get("isCompactSummary")))
    ok(scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'system' AND native_role = 'user' "
                  "AND is_context = 1") == counted,
       "isMeta / isCompactSummary lines are context messages")
    # the summary-only file holds no session: its line is kept as an orphan
    ok(scalar(db, "SELECT COUNT(*) FROM claude_code_links WHERE kind = 'orphan'") == 1, "the orphan summary line")
    # a Bash result saying "Exit code N" gives the call its exit code (the workflow sub-agent's 134)
    ok(rows(db, "SELECT exit_code, is_error FROM tool_calls WHERE exit_code IS NOT NULL") == [(134, 1)],
       "the one Exit code in the samples")


def test_samples_costs(samples, tmp_path):
    db = tmp_path / "costs.db"
    for tree in TREES:
        do_import(db, samples / tree, server="s")
    sources = dict(rows(db, "SELECT cost_source, COUNT(*) FROM messages WHERE role = 'assistant' GROUP BY 1"))
    # ccusage's fixture records costUSD: kept; everything else is priced from the table; nothing unpriced
    ok(sources.get("recorded") == 3 and "unpriced" not in sources, "cost sources of the samples")
    recorded = sorted(r[0] for r in rows(db, "SELECT cost_usd FROM messages WHERE cost_source = 'recorded'"))
    want = sorted(o["costUSD"] for o in _objects(next((samples / CCUSAGE).rglob("chat.jsonl"))))
    ok(recorded == want, "recorded costs are the files' costUSD")
    # one message by hand: 0ba93d49's call (claude-opus-4-1, 5-minute cache writes), the table's rates
    path = next((samples / SWORD).rglob("0ba93d49-*.jsonl"))
    line = [o for o in _objects(path) if o.get("type") == "assistant"][-1]
    u = line["message"]["usage"]
    table = json.loads((REPO / "importer" / "data" / "model_prices.json").read_text())
    price = table["anthropic.claude-opus-4-1-20250805-v1:0"]
    five = u["cache_creation"]["ephemeral_5m_input_tokens"]
    hour = u["cache_creation"]["ephemeral_1h_input_tokens"]
    by_hand = (u["input_tokens"] * price["input_cost_per_token"] + u["output_tokens"] * price["output_cost_per_token"]
               + u["cache_read_input_tokens"] * price["cache_read_input_token_cost"]
               + five * price["cache_creation_input_token_cost"] + hour * 2 * price["input_cost_per_token"])
    got = rows(db, "SELECT cost_usd, cost_source, cache_write_5m_tokens, cache_write_1h_tokens FROM messages "
                   "WHERE message_uuid = ?", (line["message"]["id"],))
    ok(len(got) == 1 and got[0][1] == "computed" and got[0][2:] == (five, hour)
       and abs(got[0][0] - by_hand) < 1e-9, "0ba93d49's cost by hand")


def test_samples_incremental_reads_equal_one_read(samples, tmp_path):
    """Each file cut at a few line boundaries and mid-line (inside split messages too), imported,
    then completed and imported again: the same rows as one read."""
    import random

    rng = random.Random(7)
    for i, path in enumerate(sample_files()):
        data = path.read_bytes()
        work = tmp_path / str(i) / path.name
        work.parent.mkdir()
        work.write_bytes(data)
        ref = tmp_path / f"ref{i}.db"
        do_import(ref, work, server="s")
        want = dump(ref)
        del want["parsed_files"]
        ends = [k + 1 for k, c in enumerate(data) if c == 10][:-1]
        cuts = sorted(set(rng.sample(ends, min(4, len(ends))) + rng.sample(range(1, len(data)), min(3, len(data) - 1))))
        for cut in cuts:
            db = tmp_path / f"c{i}-{cut}.db"
            work.write_bytes(data[:cut])
            do_import(db, work, server="s")
            with open(work, "ab") as f:
                f.write(data[cut:])
            do_import(db, work, server="s")
            got = dump(db)
            del got["parsed_files"]
            ok(got == want, f"{path.name} cut at byte {cut}: not the rows of one read")


def test_samples_render_in_the_conversation_view(samples, tmp_path):
    from importer.snapshot import export_snapshot
    from test_explorer import Site

    archive = tmp_path / "archive.db"
    for tree in TREES:
        do_import(archive, samples / tree, server="s")
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    site = Site(tmp_path / "snapshot.db")
    ids = [r[0] for r in rows(tmp_path / "snapshot.db", "SELECT id FROM sessions")]
    ok(len(ids) == 8, "eight sessions")
    for session_id in ids:
        r = site.get(f"/-/agentbase/session/{session_id}")
        ok(r.status_code == 200 and "ab-turn-assistant" in r.text, f"session {session_id} renders")


def test_samples_over_ssh_equal_a_local_import(samples, tmp_path):
    from sshd import SSHServer, require_sshd

    from importer.config import load_config
    from importer.sync import import_from_config

    require_sshd()
    server = SSHServer(tmp_path / "sshd").start()
    try:
        known = tmp_path / "known_hosts"
        server.write_known_hosts(known)
        config = {"database": f"sqlite:///{tmp_path / 'ssh.db'}", "known_hosts": str(known),
                  "ssh_config": str(tmp_path / "no-ssh-config"), "connect_timeout": 5, "read_timeout": 30,
                  "servers": [{"name": "remote", "host": "127.0.0.1", "port": server.port, "user": server.user,
                               "identity_file": str(server.user_key),
                               "paths": [str(samples / t) for t in TREES]}]}
        path = tmp_path / "config.yml"
        path.write_text(yaml.safe_dump(config))
        loaded = load_config(path)
        store = open_store(loaded.database)
        try:
            report = import_from_config(store, loaded)
        finally:
            store.close()
        assert report.ok
    finally:
        server.stop()
    local = tmp_path / "local.db"
    do_import(local, *[samples / t for t in TREES], server="remote")
    ok(dump(tmp_path / "ssh.db") == dump(local), "the SSH import differs from the local one")
    ok(rows(tmp_path / "ssh.db", "SELECT session_uuid, parent_call_id, previous_session_id, next_session_id "
                                  "FROM sessions ORDER BY 1")
       == rows(local, "SELECT session_uuid, parent_call_id, previous_session_id, next_session_id FROM sessions "
                      "ORDER BY 1"), "links differ over SSH")


# ---------------------------------------------------------------------------------------------
# Made-up transcripts: one trap at a time


def project(root: Path, name: str = F.PROJECT) -> Path:
    d = F.config_dir(root) / "projects" / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def imp(db: Path, *paths, **kw):
    report = do_import(db, *paths, server=kw.pop("server", "dev"), **kw)
    assert report.files_failed == 0, report.failures
    return report


def one(db: Path, sql: str, params=()):
    found = rows(db, sql, params)
    assert len(found) == 1, found
    return found[0]


def test_streaming_split_is_one_message_with_the_largest_usage(tmp_path):
    c = F.basic_session()
    path = F.write(project(tmp_path / ".claude") / f"{F.SID}.jsonl", c.lines)
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".claude")
    got = figures(db)
    assert got == independent([path])
    assert got == _f(1, 1, 3, 2, 3, 2, 1, 10, 137, 3500, 250)
    blocks, out, five, hour, total, stop = one(db, "SELECT content_blocks, output_tokens, cache_write_5m_tokens, "
                                               "cache_write_1h_tokens, total_tokens, stop_reason FROM messages "
                                               "WHERE message_uuid = 'msg_b1'")
    assert [b["type"] for b in json.loads(blocks)] == ["thinking", "text", "toolCall"]  # in order, each once
    assert json.loads(blocks)[0]["thinkingSignature"] == "c2lnbmF0dXJl"
    assert json.loads(blocks)[2]["arguments"] == {"command": "systemctl restart quokka", "description": "restart"}
    assert (out, five, hour, total, stop) == (95, 200, 0, 1298, "tool_use")  # the last, largest line; never summed
    assert one(db, "SELECT command, exit_code, is_error FROM tool_calls WHERE call_id = 'toolu_b1'") == (
        "systemctl restart quokka", 3, 1)
    # the tree: every line on the active path, the floating lines threaded in
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE is_active_path = 0") == 0
    assert one(db, "SELECT cwd, project, started_at FROM sessions") == (F.CWD, F.CWD, "2026-03-02 10:00:01.001")


def test_cumulative_snapshots_add_only_what_is_new(tmp_path):
    c = Conv()
    c.user("hi")
    first = text("Hello")
    grown = text("Hello, world")
    c.assistant([first], mid="msg_c", rid="req_c", usages=[usage(1, 2)])
    # a snapshot repeating the first block (grown) and adding a tool call
    line = c.assistant([grown], mid="msg_c", rid="req_c", usages=[usage(1, 9)])[0]
    line["message"]["content"] = [grown, tool("toolu_c", "Bash", command="ls")]
    path = F.write(tmp_path / "p" / f"{F.SID}.jsonl", c.lines)
    db = tmp_path / "a.db"
    imp(db, path)
    blocks = json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE message_uuid = 'msg_c'"))
    assert blocks == [{"type": "text", "text": "Hello, world"},
                      {"type": "toolCall", "id": "toolu_c", "name": "Bash", "arguments": {"command": "ls"}}]
    assert _digests(rebuild(db)) == _digests(c.lines)  # the shorter first copy is kept in raw_json


def test_a_message_split_between_two_runs_ends_up_whole(tmp_path):
    c = F.basic_session()
    lines = [F.dumps(o) for o in c.lines]
    at = next(i for i, o in enumerate(c.lines) if o.get("message", {}).get("id") == "msg_b1")  # its first line
    path = tmp_path / "p" / f"{F.SID}.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"".join(lines[: at + 2]))  # two of msg_b1's three lines
    db = tmp_path / "a.db"
    imp(db, path)
    assert len(json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE message_uuid = 'msg_b1'"))) == 2
    held = sum(len(x) for x in lines[:at])
    assert scalar(db, "SELECT parsed_offset FROM parsed_files") == held  # resumes at the group's first line
    with open(path, "ab") as f:
        f.write(b"".join(lines[at + 2:]))
    report = imp(db, path)
    rest = sum(len(x) for x in lines[at:])
    assert rest <= report.bytes_read <= rest + 2048  # the group again, the rest, two 1 KB windows
    blocks = json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE message_uuid = 'msg_b1'"))
    assert [b["type"] for b in blocks] == ["thinking", "text", "toolCall"]
    assert scalar(db, "SELECT output_tokens FROM messages WHERE message_uuid = 'msg_b1'") == 95
    assert figures(db) == independent([path])
    # the same rows as one read (the partial copy stays in entry_revisions)
    ref = tmp_path / "ref.db"
    imp(ref, path)
    assert dump(db)["messages"] == dump(ref)["messages"] and dump(db)["tool_calls"] == dump(ref)["tool_calls"]
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 1


def test_an_append_rerun_reads_only_the_new_bytes(tmp_path):
    c = Conv()
    for i in range(40):
        c.user(f"question {i} " + "x" * 200)
        c.assistant([text(f"answer {i} " + "y" * 200)], mid=f"msg_{i}", rid=f"req_{i}")
    c.user("thanks")
    path = F.write(tmp_path / "p" / f"{F.SID}.jsonl", c.lines)
    db = tmp_path / "a.db"
    imp(db, path)
    unchanged = imp(db, path)
    assert (unchanged.files_unchanged, unchanged.bytes_read) == (1, 0)
    more = Conv(tag=1, second=500, parent=c.lines[-1]["uuid"])
    more.n = 1000
    more.user("one more question")
    added = F.dumps(more.lines[-1])
    with open(path, "ab") as f:
        f.write(added)
    assert path.stat().st_size > 20_000
    report = imp(db, path)
    assert report.messages_added == 1
    assert len(added) <= report.bytes_read <= len(added) + 2048
    # ending in an assistant message (maybe still streaming): the rerun reads that group again, no more
    more.assistant([text("an answer")], mid="msg_last", rid="req_last")
    group = F.dumps(more.lines[-1])
    with open(path, "ab") as f:
        f.write(group)
    imp(db, path)
    more.user("and another")
    added = F.dumps(more.lines[-1])
    with open(path, "ab") as f:
        f.write(added)
    report = imp(db, path)
    assert report.messages_added == 1
    assert len(added) + len(group) <= report.bytes_read <= len(added) + len(group) + 2048
    assert figures(db) == independent([path])


def test_a_trailing_partial_line_is_pending_then_read(tmp_path):
    c = F.basic_session()
    whole = b"".join(F.dumps(o) for o in c.lines)
    cut = len(whole) - len(F.dumps(c.lines[-1])) // 2
    path = tmp_path / "p" / f"{F.SID}.jsonl"
    path.parent.mkdir()
    path.write_bytes(whole[:cut])
    db = tmp_path / "a.db"
    report = imp(db, path)
    assert report.pending_lines == 1 and report.bad_lines == 0
    path.write_bytes(whole)
    report = imp(db, path)
    assert report.pending_lines == 0
    assert figures(db) == independent([path])
    # a last line complete but for its newline is read now and again later, never twice
    c2 = F.basic_session(F.SID2, tag=2)
    data = b"".join(F.dumps(o) for o in c2.lines)
    p2 = tmp_path / "p" / f"{F.SID2}.jsonl"
    p2.write_bytes(data[:-1])
    imp(db, p2)
    p2.write_bytes(data)
    imp(db, p2)
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE session_uuid = ?", (F.SID2,)) == 3
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = ?", (F.SID2,)) == 6


def test_synthetic_and_api_error_messages_are_messages_not_calls(tmp_path):
    c = Conv()
    c.user("hello")
    c.assistant([text("API Error: 529 overloaded")], mid="5d1c0000-0000-4000-8000-000000000001", rid=None,
                usages=[usage(0, 0)], model="<synthetic>", isApiErrorMessage=True, error="overloaded")
    c.assistant([text("No response requested.")], mid="5d1c0000-0000-4000-8000-000000000002", rid=None,
                usages=[usage(0, 0)], model="<synthetic>")
    c.system("api_error", error={"status": 529}, retryAttempt=1)
    c.assistant([text("here it is")], mid="msg_real", rid="req_real", usages=[usage(7, 8)])
    path = F.write(tmp_path / "p" / f"{F.SID}.jsonl", c.lines)
    db = tmp_path / "a.db"
    imp(db, path)
    assert figures(db) == independent([path]) == _f(1, 1, 3, 0, 1, 0, 0, 7, 8, 0, 0)
    assert rows(db, "SELECT is_synthetic, is_error, call_key IS NULL, cost_usd, cost_source FROM messages "
                    "WHERE role = 'assistant' ORDER BY seq") == [(1, 1, 1, 0, "computed"), (1, 0, 1, 0, "computed"),
                                                                 (0, 0, 0, 8 * 1.5e-05 + 7 * 3e-06, "computed")]
    assert scalar(db, "SELECT error_message FROM messages WHERE is_error = 1") == "overloaded"
    assert one(db, "SELECT entry_type, custom_type FROM entries") == ("system", "api_error")


def _parent_and_sub_agent(tmp_path: Path, replay_rid: str) -> tuple[Path, Path]:
    folder = project(tmp_path / ".claude")
    c = Conv()
    c.user("review the repo")
    c.assistant([text("Starting a reviewer.")], mid="msg_p1", rid="req_p1", usages=[usage(100, 10, 0, 0)])
    c.assistant([tool("toolu_task", "Task", description="review", prompt="Review the repo", subagent_type="general")],
                mid="msg_p2", rid="req_p2", usages=[usage(120, 20)], stop="tool_use")
    c.result("toolu_task", [text("Reviewed: fine")], tur={"status": "completed", "agentId": "a1b2c3", "totalTokens": 1})
    parent = F.write(folder / f"{F.SID}.jsonl", c.lines)
    s = Conv(agent="a1b2c3", tag=9)
    s.user("Review the repo")
    # Claude Code re-logs parent context in a sidechain: msg_p1 with its requestId, msg_p2 with another
    s.assistant([text("Starting a reviewer.")], mid="msg_p1", rid="req_p1", usages=[usage(100, 10, 0, 0)])
    s.assistant([text("Starting a reviewer.")], mid="msg_p2", rid=replay_rid, usages=[usage(120, 20)])
    s.assistant([tool("toolu_s1", "Bash", command="git log -1")], mid="msg_s1", rid="req_s1",
                usages=[usage(50, 5)], stop="tool_use")
    s.result("toolu_s1", "commit 1")
    s.assistant([text("fine")], mid="msg_s2", rid="req_s2", usages=[usage(60, 6)])
    sub = F.write(folder / F.SID / "subagents" / "agent-a1b2c3.jsonl", s.lines)
    return parent, sub


@pytest.mark.parametrize("replay_rid", ["req_p2", "req_other"])
def test_sidechain_replays_are_counted_once(tmp_path, replay_rid):
    """A sub-agent's copy of a parent call: the same (message.id, requestId) is the same call, counted
    once; with another requestId it is still the parent's message re-logged (message.id names one API
    response), dropped as ccusage drops it, so the parent's usage is never paid twice."""
    parent, sub = _parent_and_sub_agent(tmp_path, replay_rid)
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".claude")
    got = figures(db)
    assert got["model_calls"] == 4 and got["sessions"] == 2
    assert got["usage"] == [100 + 120 + 50 + 60, 10 + 20 + 5 + 6, 0, 0, 371]
    if replay_rid == "req_p2":
        assert got == independent([parent, sub])  # the counter dedupes (message.id, requestId) too
    sub_session = f"{F.SID}:a1b2c3"
    assert rows(db, "SELECT message_uuid, usage_counted FROM messages WHERE session_uuid = ? AND role = 'assistant' "
                    "ORDER BY seq", (sub_session,)) == [("msg_p1", 0), ("msg_p2", 0), ("msg_s1", 1), ("msg_s2", 1)]
    assert one(db, "SELECT parent_session_uuid, parent_call_id, session_type FROM sessions WHERE session_uuid = ?",
               (sub_session,)) == (F.SID, "toolu_task", "subagent")
    # the session totals follow: the sub-agent's own calls only
    assert one(db, "SELECT input_tokens, output_tokens FROM sessions WHERE session_uuid = ?", (sub_session,)) == (110, 11)
    # the order the files are read in changes nothing
    db2 = tmp_path / "b.db"
    imp(db2, sub)
    imp(db2, parent)
    assert figures(db2) == got


def test_compaction_continuation_links_sessions_and_counts_replays_once(tmp_path):
    folder = project(tmp_path / ".claude")
    a = Conv(F.SID, tag=1, version="1.0.80")
    a.user("build it")
    a.assistant([tool("toolu_a1", "Bash", command="make")], mid="msg_a1", rid="req_a1", usages=[usage(10, 20, 300, 40)])
    a.result("toolu_a1", "ok")
    first = F.write(folder / f"{F.SID}.jsonl", a.lines)
    b = Conv(F.SID2, tag=2, version="1.0.80", second=100)
    b.floating("summary", summary="Building the project", leafUuid=a.lines[-1]["uuid"])
    summary = b.user("This session is being continued from a previous conversation...", isCompactSummary=True)
    summary["sessionId"] = F.SID  # as Claude Code 1.0.x writes it: the previous session's id
    summary["parentUuid"] = None
    b.parent = summary["uuid"]
    # history replayed from the previous session, with its ids
    b.assistant([tool("toolu_a1", "Bash", command="make")], mid="msg_a1", rid="req_a1", usages=[usage(10, 20, 300, 40)])
    b.user("now test it")
    b.assistant([text("tests pass")], mid="msg_b1", rid="req_b1", usages=[usage(5, 6, 0, 0)])
    second = F.write(folder / f"{F.SID2}.jsonl", b.lines)
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".claude")
    assert rows(db, "SELECT session_uuid, previous_session_id, next_session_id FROM sessions ORDER BY 1") == [
        (F.SID, None, F.SID2), (F.SID2, F.SID, None)]
    got = figures(db)
    assert got["sessions"] == 2 and got["model_calls"] == 2
    assert got["usage"] == [15, 26, 300, 40, 381]
    assert got == independent([first, second])
    assert scalar(db, "SELECT role FROM messages WHERE session_uuid = ? AND seq = 1", (F.SID2,)) == "system"
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    # a replayed call in the same session is the same message (one per message id)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE message_uuid = 'msg_a1'") == 2


def test_compact_boundary_keeps_the_path_and_marks_the_compaction(tmp_path):
    c = Conv()
    c.user("first task")
    c.assistant([text("done")], mid="msg_1", rid="req_1")
    last = c.parent
    boundary = c.system("compact_boundary", content="Conversation compacted", logicalParentUuid=last,
                        compactMetadata={"trigger": "auto", "preTokens": 150000})
    boundary["parentUuid"] = None
    c.user("This session is being continued...", isCompactSummary=True, isVisibleInTranscriptOnly=True)
    c.user("second task")
    c.assistant([text("done again")], mid="msg_2", rid="req_2")
    path = F.write(tmp_path / "p" / f"{F.SID}.jsonl", c.lines)
    db = tmp_path / "a.db"
    imp(db, path)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    assert one(db, "SELECT entry_type, custom_type, is_active_path FROM entries") == ("compaction", "compact_boundary", 1)
    assert figures(db) == independent([path]) == _f(1, 2, 2, 0, 2, 0, 0, 20, 40, 0, 0)


def test_archived_duplicates_count_once(tmp_path):
    c = F.basic_session()
    folder = project(tmp_path / ".claude")
    live = F.write(folder / f"{F.SID}.jsonl", c.lines)
    F.write(folder / "sessions" / f"{F.SID}.jsonl", c.lines)  # a backup repo's copy
    older = F.write(tmp_path / ".claude" / "projects" / "-backup" / f"{F.SID}.jsonl", c.lines[:6])  # older, shorter
    os.utime(older, ns=(live.stat().st_mtime_ns - 10**9,) * 2)
    db = tmp_path / "a.db"
    report = imp(db, tmp_path / ".claude")
    assert report.files_imported == 3
    assert figures(db) == independent([live])
    ref = tmp_path / "ref.db"
    imp(ref, live)
    assert dump(db)["messages"] == dump(ref)["messages"]


def test_non_anthropic_backend_keys_calls_on_message_id(tmp_path):
    c = Conv()
    c.user("hi")
    c.assistant([thinking("plan", sig=""), tool("tooluse_AbC123", "Bash", command="uname -a")],
                mid="3f6a0000-0000-4000-8000-00000000aaaa", rid=None, usages=[usage(40, 1), usage(40, 30)],
                model="claude-opus-4-8")
    c.result("tooluse_AbC123", "Linux", is_error=False)
    c.assistant([text("Linux")], mid="3f6a0000-0000-4000-8000-00000000bbbb", rid=None, usages=[usage(50, 3)],
                model="claude-opus-4-8")
    path = F.write(tmp_path / "p" / f"{F.SID}.jsonl", c.lines)
    db = tmp_path / "a.db"
    imp(db, path)
    assert figures(db) == independent([path]) == _f(1, 1, 2, 1, 2, 1, 1, 90, 33, 0, 0)
    assert scalar(db, "SELECT COUNT(DISTINCT call_key) FROM messages WHERE call_key IS NOT NULL") == 2
    assert one(db, "SELECT result_message_id IS NOT NULL, command FROM tool_calls") == (1, "uname -a")


def test_sub_agents_find_the_call_that_started_them(tmp_path):
    folder = project(tmp_path / ".claude")
    c = Conv()
    c.user("do three things")
    task_line = c.assistant([tool("toolu_t1", "Task", prompt="first thing")], mid="msg_1", rid="r1")[0]
    c.result("toolu_t1", "done", tur={"agentId": "aaa111", "status": "completed"})
    c.assistant([tool("toolu_t2", "Task", prompt="second thing")], mid="msg_2", rid="r2")
    c.result("toolu_t2", "done")
    progress = c.base("progress", data={"type": "agent_progress", "agentId": "ccc333"}, parentToolUseID="toolu_t3")
    assert progress
    c.assistant([tool("toolu_t3", "Agent", prompt="third thing")], mid="msg_3", rid="r3")
    c.result("toolu_t3", "done")
    # 1.0.x: a sidechain inline, no agentId, started by a Task whose prompt it repeats
    c.assistant([tool("toolu_t4", "Task", prompt="fourth thing")], mid="msg_4", rid="r4")
    side = Conv(tag=4, sidechain=True, second=200)
    side.user("fourth thing")
    side.assistant([text("did it")], mid="msg_s4", rid="rs4")
    c.lines.extend(side.lines)
    c.result("toolu_t4", "done")
    F.write(folder / f"{F.SID}.jsonl", c.lines)
    # 2.x: <session>/subagents/agent-<id>.jsonl, linked by the tool result's agentId
    one_ = Conv(agent="aaa111", tag=5)
    one_.user("first thing")
    one_.assistant([text("ok")], mid="msg_a", rid="ra")
    F.write(folder / F.SID / "subagents" / "agent-aaa111.jsonl", one_.lines)
    # ~2.0: a flat agent-<id>.jsonl in the project folder, linked by sourceToolAssistantUUID
    two = Conv(agent="bbb222", tag=6)
    two.user("second thing", sourceToolAssistantUUID=None)
    two.assistant([text("ok")], mid="msg_b", rid="rb")
    for line in two.lines:
        line["sourceToolAssistantUUID"] = next(o["uuid"] for o in c.lines
                                               if o.get("message", {}).get("id") == "msg_2")
    F.write(folder / "agent-bbb222.jsonl", two.lines)
    # linked by an agent_progress line of the parent
    three = Conv(agent="ccc333", tag=7)
    three.user("third thing")
    three.assistant([text("ok")], mid="msg_c", rid="rc")
    F.write(folder / F.SID / "subagents" / "agent-ccc333.jsonl", three.lines)
    (folder / F.SID / "subagents" / "agent-ccc333.meta.json").write_text('{"agentType": "Explore"}')
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".claude")
    got = dict((r[0], r[1:]) for r in rows(db, "SELECT session_uuid, parent_session_uuid, parent_call_id, reason "
                                               "FROM sessions WHERE parent_session_uuid IS NOT NULL"))
    inline = next(k for k in got if ":sc-" in k)
    assert got == {f"{F.SID}:aaa111": (F.SID, "toolu_t1", None), f"{F.SID}:bbb222": (F.SID, "toolu_t2", None),
                   f"{F.SID}:ccc333": (F.SID, "toolu_t3", "Explore"), inline: (F.SID, "toolu_t4", None)}
    assert len(inline) <= 64
    assert task_line["uuid"]
    assert figures(db)["sessions"] == 5
    # the main session's own lines are all on its path; the sidechain is not in it
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND is_active_path = 0", (F.SID,)) == 0


def test_user_lines_tool_results_and_context(tmp_path):
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    c = Conv()
    c.user("<command-name>/init</command-name>", isMeta=True)
    c.user([text("look at this"), {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                               "data": png}}])
    c.assistant([tool("toolu_1", "Bash", command="false"), tool("toolu_2", "Grep", pattern="x")], mid="msg_1",
                rid="r1", stop="tool_use")
    both = c.user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Exit code 1", "is_error": True},
                   {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Exit code 5 is in the file"},
                   text("[Request interrupted by user]")])
    c.user([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}])
    c.user([])  # nothing in it: an entry
    path = F.write(tmp_path / "p" / f"{F.SID}.jsonl", c.lines)
    db = tmp_path / "a.db"
    imp(db, path)
    assert figures(db) == independent([path]) == _f(1, 3, 1, 2, 1, 2, 1, 10, 20, 0, 0)
    assert dict(rows(db, "SELECT role, COUNT(*) FROM messages GROUP BY 1")) == {
        "system": 1, "user": 3, "assistant": 1, "toolResult": 2}
    # Claude Code's own word: a tool result and a context line are blocks of user lines
    assert dict(rows(db, "SELECT native_role, COUNT(*) FROM messages GROUP BY 1")) == {"user": 6, "assistant": 1}
    assert rows(db, "SELECT call_id, exit_code, is_error FROM tool_calls ORDER BY call_id") == [
        ("toolu_1", 1, 1), ("toolu_2", None, 0)]  # only a Bash result's "Exit code N" is an exit code
    image = json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE message_uuid = ?", (c.lines[1]["uuid"],)))
    assert image[1] == {"type": "image", "data": png, "mimeType": "image/png"}
    # the split line: a user message and two results, chained in order
    parts = rows(db, "SELECT message_uuid, role FROM messages WHERE seq = ? ORDER BY id", (c.lines.index(both),))
    assert parts == [("result:toolu_1", "toolResult"), ("result:toolu_2", "toolResult"), (both["uuid"], "user")]
    assert one(db, "SELECT entry_type FROM entries") == ("user",)
    assert _digests(rebuild(db)) == _digests(c.lines)


# ---------------------------------------------------------------------------------------------
# Where Claude Code lives, and what is not its


def _claude_units(found) -> list[tuple[str, str, str]]:
    return sorted((u.server, u.agent_id, u.name) for u in found.units if u.source.kind == "claude-code")


def test_paths_a_config_dir_projects_a_project_a_file_and_server_trees(tmp_path):
    from importer.sources import discover

    home = tmp_path / "home"
    folder = project(home / ".claude")
    F.write(folder / f"{F.SID}.jsonl", F.basic_session().lines)
    F.write(folder / F.SID / "subagents" / "agent-a1.jsonl", Conv(agent="a1", tag=3).lines + [
        Conv(agent="a1", tag=3).user("sub")])
    (folder / F.SID / "subagents" / "agent-a1.meta.json").write_text('{"agentType": "Explore"}')
    (folder / F.SID / "tool-results").mkdir()
    (folder / F.SID / "tool-results" / "big.txt").write_text("output")
    other = project(home / ".config" / "claude", "-srv-app")
    F.write(other / f"{F.SID2}.jsonl", F.basic_session(F.SID2, 2).lines)
    (home / ".claude" / "history.jsonl").write_text('{"display":"hi","project":"/x"}\n')  # prompt history: not a transcript
    everything = [("box", "claude-code", n) for n in (f"{F.SID}.jsonl", f"{F.SID2}.jsonl", "agent-a1.jsonl",
                                                      "agent-a1.meta.json")]
    assert _claude_units(discover([str(home)], server="box")) == sorted(everything)
    assert _claude_units(discover([str(home / ".claude")], server="box")) == sorted(
        e for e in everything if e[2] != f"{F.SID2}.jsonl")
    assert _claude_units(discover([str(home / ".claude" / "projects")], server="box")) == _claude_units(
        discover([str(home / ".claude")], server="box"))
    assert _claude_units(discover([str(folder)], server="box")) == _claude_units(
        discover([str(home / ".claude")], server="box"))
    assert _claude_units(discover([str(folder / F.SID)], server="box")) == [
        ("box", "claude-code", "agent-a1.jsonl"), ("box", "claude-code", "agent-a1.meta.json")]
    assert _claude_units(discover([str(folder / f"{F.SID}.jsonl")], server="box", agent="mine")) == [
        ("box", "mine", f"{F.SID}.jsonl")]
    # a folder of per-server trees: each subfolder a server
    servers = tmp_path / "servers"
    F.write(project(servers / "alpha" / ".claude") / f"{F.SID}.jsonl", F.basic_session().lines)
    F.write(project(servers / "beta") / f"{F.SID}.jsonl", F.basic_session().lines)  # beta/ is a config dir copy
    assert _claude_units(discover([str(servers)])) == [
        ("alpha", "claude-code", f"{F.SID}.jsonl"), ("beta", "claude-code", f"{F.SID}.jsonl")]
    db = tmp_path / "a.db"
    imp(db, servers, server=None)
    assert rows(db, "SELECT server, project FROM sessions ORDER BY 1") == [("alpha", F.CWD), ("beta", F.CWD)]


def test_a_backup_repo_layout_is_read_too(tmp_path):
    """austinweitao's backups: main sessions in sessions/, sub-agents in subagents/<sessionId>/."""
    parent, sub = _parent_and_sub_agent(tmp_path / "made", "req_p2")
    folder = tmp_path / "backup" / "projects" / F.PROJECT
    (folder / "sessions").mkdir(parents=True)
    (folder / "subagents" / F.SID).mkdir(parents=True)
    (folder / "sessions" / parent.name).write_bytes(parent.read_bytes())
    (folder / "subagents" / F.SID / sub.name).write_bytes(sub.read_bytes())
    db = tmp_path / "a.db"
    imp(db, tmp_path / "backup" / "projects")
    assert rows(db, "SELECT session_uuid, parent_call_id FROM sessions ORDER BY 1") == [
        (F.SID, None), (f"{F.SID}:a1b2c3", "toolu_task")]
    # a project folder without any cwd in its lines: the project is the folder's name, decoded
    c = Conv(F.SID3, tag=3)
    c.user("hi")
    for line in c.lines:
        del line["cwd"]
    F.write(folder / f"{F.SID3}.jsonl", c.lines)
    imp(db, tmp_path / "backup" / "projects")
    assert one(db, "SELECT cwd, project FROM sessions WHERE session_uuid = ?", (F.SID3,)) == (None, "/home/dev/quokka/app")


def test_default_paths_are_every_config_dir_that_exists(tmp_path, monkeypatch):
    from importer.sources import default_paths, discover
    from importer.sources.claude_code import SOURCE
    from importer.sources.fs import LOCAL

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    assert SOURCE.default_paths(LOCAL) == []
    (home / ".claude" / "projects").mkdir(parents=True)  # empty, as on a fresh machine
    assert SOURCE.default_paths(LOCAL) == ["~/.claude"]
    assert _claude_units(discover(default_paths())) == []
    F.write(project(home / ".config" / "claude") / f"{F.SID}.jsonl", F.basic_session().lines)
    extra_a, extra_b = tmp_path / "work-claude", tmp_path / "team-claude"
    F.write(project(extra_a, "-a") / f"{F.SID2}.jsonl", F.basic_session(F.SID2, 2).lines)
    F.write(project(extra_b, "-b") / f"{F.SID3}.jsonl", F.basic_session(F.SID3, 3).lines)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", f"{extra_a},{extra_b}")
    assert SOURCE.default_paths(LOCAL) == ["~/.claude", "~/.config/claude", str(extra_a), str(extra_b)]
    assert len(_claude_units(discover(default_paths()))) == 3
    # `agentbase import` with no PATH (and no config file) imports them
    from click.testing import CliRunner

    from importer.cli import cli

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("AGENTBASE_CONFIG", raising=False)
    db = tmp_path / "cli.db"
    result = CliRunner().invoke(cli, ["import", "--db", f"sqlite:///{db}", "--json-summary", "-q"])
    assert result.exit_code == 0, result.output
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = 'claude-code'") == 3


def test_other_kinds_trees_and_files_are_left_to_them(tmp_path):
    from transcripts import conversation, sessions_dir, write as write_openclaw

    from importer.sources import discover

    state = tmp_path / ".openclaw"
    write_openclaw(sessions_dir(state) / "5e55a0a0-0000-4000-8000-00000000000a.jsonl", conversation())
    codex = tmp_path / ".codex" / "sessions" / "2026" / "03" / "02"
    codex.mkdir(parents=True)
    (codex / "rollout-2026-03-02T10-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl").write_text(
        '{"timestamp":"2026-03-02T10:00:00.000Z","type":"session_meta","payload":{"id":"x","cwd":"/w"}}\n'
        '{"timestamp":"2026-03-02T10:00:01.000Z","type":"response_item","payload":{"type":"message"}}\n')
    pi = tmp_path / ".pi" / "agent" / "sessions" / "--home-dev--"
    write_openclaw(pi / "2026-03-02T10-00-00-000Z_5e55a0a0-0000-4000-8000-00000000000b.jsonl",
                   conversation("5e55a0a0-0000-4000-8000-00000000000b"))
    for path in (state, state / "agents", sessions_dir(state), tmp_path / ".codex", codex, tmp_path / ".pi", pi,
                 tmp_path):
        assert _claude_units(discover([str(path)], server="x")) == [], path
    # files named one by one: each to its kind (an OpenClaw file outside sessions/ is pi's)
    mixed = tmp_path / "mixed"
    F.write(mixed / f"{F.SID}.jsonl", F.basic_session().lines)
    write_openclaw(mixed / "5e55a0a0-0000-4000-8000-00000000000c.jsonl",
                   conversation("5e55a0a0-0000-4000-8000-00000000000c"))
    kinds = sorted((u.source.kind, u.name) for u in discover([str(mixed / n) for n in sorted(os.listdir(mixed))]).units)
    assert kinds == [("claude-code", f"{F.SID}.jsonl"), ("pi", "5e55a0a0-0000-4000-8000-00000000000c.jsonl")]
    # and the folder: the Claude file is Claude Code's, the other OpenClaw's
    kinds = sorted((u.source.kind, u.name) for u in discover([str(mixed)]).units)
    assert kinds == [("claude-code", f"{F.SID}.jsonl"), ("openclaw", "5e55a0a0-0000-4000-8000-00000000000c.jsonl")]


def test_stats_json_by_source(tmp_path):
    from click.testing import CliRunner

    from importer.cli import cli

    parent, sub = _parent_and_sub_agent(tmp_path, "req_p2")
    db = tmp_path / "a.db"
    imp(db, tmp_path / ".claude")
    result = CliRunner().invoke(cli, ["stats", "--db", f"sqlite:///{db}", "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)["by_source"]["claude-code"]
    want = independent([parent, sub])
    assert got["sessions"] == 2 and got["subagent_sessions"] == 1
    assert got["messages_by_role"] == {"user": want["user"], "assistant": want["assistant"],
                                       "toolResult": want["toolResult"]}
    assert (got["model_calls"], got["tool_calls"], got["shell_calls"]) == (
        want["model_calls"], want["tool_calls"], want["shell_calls"])
    assert [got["usage"][k] for k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens")] == want["usage"]
    assert got["unpriced_calls"] == 0 and got["usage"]["cost_total"] > 0
    assert (got["files"], got["bad_lines"], got["pending_lines"]) == (2, 0, 0)


def test_costs_computed_recorded_unpriced_and_the_cache_lifetimes(tmp_path):
    c = Conv()
    c.user("hi")
    c.assistant([text("priced")], mid="msg_1", rid="r1", usages=[usage(1000, 500, 20000, 3000, 1000, 2000)],
                model="claude-sonnet-4-5-20250929")
    c.assistant([text("unknown")], mid="msg_2", rid="r2", usages=[usage(10, 10)], model="claude-imaginary-9")
    line = c.assistant([text("recorded")], mid="msg_3", rid="r3", usages=[usage(10, 10)])[0]
    line["costUSD"] = 0.0123
    path = F.write(tmp_path / "p" / f"{F.SID}.jsonl", c.lines)
    db = tmp_path / "a.db"
    imp(db, path)
    got = {r[0]: r[1:] for r in rows(db, "SELECT message_uuid, cost_usd, cost_source, cache_write_5m_tokens, "
                                         "cache_write_1h_tokens FROM messages WHERE role = 'assistant'")}
    table = json.loads((REPO / "importer" / "data" / "model_prices.json").read_text())
    p = table["claude-sonnet-4-5"]  # the price of claude-sonnet-4-5-20250929 (its date stripped)
    by_hand = (1000 * p["input_cost_per_token"] + 500 * p["output_cost_per_token"]
               + 20000 * p["cache_read_input_token_cost"] + 1000 * p["cache_creation_input_token_cost"]
               + 2000 * p["cache_creation_input_token_cost_above_1hr"])
    assert got["msg_1"][1:] == ("computed", 1000, 2000) and abs(got["msg_1"][0] - by_hand) < 1e-12
    assert got["msg_2"] == (None, "unpriced", None, None)  # never $0
    assert got["msg_3"][:2] == (0.0123, "recorded")
    assert figures(db)["model_calls"] == 3
    store = open_store(f"sqlite:///{db}")
    try:
        t = stats.collect(store)
    finally:
        store.close()
    assert t["unpriced_calls"] == 1 and abs(t["usage"]["cost_total"] - round(by_hand + 0.0123, 8)) < 1e-8


def test_the_conversation_view_renders_claude_code_blocks(tmp_path):
    from importer.snapshot import export_snapshot
    from test_explorer import PNG_1PX, Site

    c = Conv()
    c.user("fix the quokka bug")
    c.assistant([thinking("I should read the file first"),
                 tool("toolu_read", "Read", file_path="/srv/quokka.py"),
                 tool("toolu_edit", "Edit", file_path="/srv/quokka.py", old_string="a = 1", new_string="a = 2"),
                 tool("toolu_write", "Write", file_path="/srv/notes.md", content="# notes"),
                 tool("toolu_bash", "Bash", command="pytest -q", description="run tests"),
                 tool("toolu_web", "WebFetch", url="https://example.org/quokka", prompt="summary"),
                 tool("toolu_mcp", "mcp__github__create_issue", title="quokka", body="fixed")],
                mid="msg_1", rid="r1", stop="tool_use")
    for tid, out in (("toolu_read", "a = 1"), ("toolu_edit", "The file has been updated."),
                     ("toolu_write", "File created"), ("toolu_bash", "Exit code 1\n1 failed"),
                     ("toolu_web", "A page about quokkas"), ("toolu_mcp", [text("issue #7")])):
        c.result(tid, out, is_error=out.startswith("Exit") if isinstance(out, str) else None)
    c.user([text("and this screenshot"), {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                      "data": PNG_1PX}}])
    c.assistant([text("Fixed: **a = 2**")], mid="msg_2", rid="r2")
    F.write(project(tmp_path / ".claude") / f"{F.SID}.jsonl", c.lines)
    archive = tmp_path / "archive.db"
    imp(archive, tmp_path / ".claude")
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    site = Site(tmp_path / "snapshot.db")
    html = site.get("/-/agentbase/session/1").text
    for name in ("Read", "Edit", "Write", "Bash", "WebFetch", "mcp__github__create_issue"):
        assert f'<strong class="ab-tool-name">{name}</strong>' in html
    assert "no result recorded" not in html  # every result under its call
    assert "pytest -q" in html and "https://example.org/quokka" in html
    # the Edit as a diff of old_string against new_string (issue #15), not as its JSON
    assert '<span class="ab-diff-del">-a = 1</span>' in html and '<span class="ab-diff-add">+a = 2</span>' in html
    assert "exit 1" in html and "ab-result ab-result-error" in html and "issue #7" in html
    assert "ab-badge-thinking" in html and f"data:image/png;base64,{PNG_1PX}" in html
    assert "claude-sonnet-4-5-20250929" in html and "ab-turn ab-turn-user" in html


def test_mariadb_import_equals_sqlite(tmp_path, mariadb_url):
    from transcripts import dump_store

    parent, _sub = _parent_and_sub_agent(tmp_path, "req_other")
    c = Conv(F.SID2, tag=2)
    c.user("inline")
    c.assistant([tool("toolu_x", "Task", prompt="go")], mid="msg_x", rid="rx")
    side = Conv(F.SID2, tag=8, sidechain=True)
    side.user("go")
    side.assistant([text("went")], mid="msg_y", rid="ry")
    F.write(parent.parent / f"{F.SID2}.jsonl", c.lines + side.lines)
    local = tmp_path / "a.db"
    imp(local, tmp_path / ".claude")
    store = open_store(mariadb_url)
    try:
        from importer.pipeline import run_import

        report = run_import(store, [str(tmp_path / ".claude")], server="dev")
        assert report.files_failed == 0
    finally:
        store.close()
    assert dump_store(mariadb_url) == dump_store(f"sqlite:///{local}")
    store = open_store(mariadb_url)
    try:
        links = sorted(tuple(r) for r in store.query("SELECT session_uuid, parent_call_id FROM sessions"))
    finally:
        store.close()
    assert links == sorted(rows(local, "SELECT session_uuid, parent_call_id FROM sessions"))


def test_side_lines_are_threaded_and_a_rewind_stays_a_branch(tmp_path):
    """Claude Code hangs a hook's attachment off the assistant message beside its tool result, and
    system lines off the last message: they go on the path. A prompt whose parent is further back
    (a rewind) starts a branch."""
    c = Conv()
    first = c.user("list the files")
    call = c.assistant([tool("toolu_1", "Bash", command="ls")], mid="msg_1", rid="r1", stop="tool_use")[-1]
    hook = c.base("attachment", attachment={"type": "hook_success", "hookName": "PostToolUse"})
    c.parent = call["uuid"]  # the result is the assistant's child too
    c.result("toolu_1", "a b c")
    c.assistant([text("a, b and c")], mid="msg_2", rid="r2")
    c.system("stop_hook_summary", hookCount=1)
    c.floating("last-prompt", lastPrompt="list the files", sessionId=F.SID)
    path = F.write(tmp_path / "p" / f"{F.SID}.jsonl", c.lines)
    db = tmp_path / "a.db"
    imp(db, path)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE is_active_path = 0") == 0
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE is_active_path = 0") == 0
    assert scalar(db, "SELECT parent_message_uuid FROM messages WHERE message_uuid = 'result:toolu_1'") == hook["uuid"]
    # a rewind: a new prompt whose parent is the first prompt's
    c.parent = first["parentUuid"]
    c.user("no, list the hidden files too")
    c.assistant([text("., .., a, b and c")], mid="msg_3", rid="r3")
    F.write(path, c.lines)
    imp(db, path)
    off = rows(db, "SELECT message_uuid FROM messages WHERE is_active_path = 0 ORDER BY seq")
    assert off == [(first["uuid"],), ("msg_1",), ("result:toolu_1",), ("msg_2",)]
    assert figures(db) == independent([path])


def test_a_renamed_block_keeps_its_fields_in_order_both_ways():
    """``to_block``: a ``tool_use`` becomes a ``toolCall`` with its new type first; a ``thinking``
    block's fields stay where they were (the samples hold both orders of both); ``from_block`` undoes
    both (a ``toolCall`` back to a ``tool_use``, its type first)."""
    from importer.sources.claude_code import from_block, to_block

    call = {"id": "c", "type": "tool_use", "name": "Bash", "input": {"command": "ls"}}
    ours = to_block(call)
    assert list(ours.items()) == [("type", "toolCall"), ("id", "c"), ("name", "Bash"), ("arguments", {"command": "ls"})]
    assert list(from_block(ours).items()) == [("type", "tool_use"), ("id", "c"), ("name", "Bash"),
                                              ("input", {"command": "ls"})]
    think = {"signature": "s", "type": "thinking", "thinking": "t"}
    assert list(to_block(think).items()) == [("thinkingSignature", "s"), ("type", "thinking"), ("thinking", "t")]
    assert list(from_block(to_block(think)).items()) == list(think.items())
