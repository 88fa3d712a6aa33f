"""Claude Code transcripts (importer/sources/claude_code.py, docs/claude-code.md).

Two halves. The real files in ../shared/other-samples/claude-code (required under CI=true, else
skipped with a message) are read where they are and counted by :func:`independent`, a counter written
from the counting rules with the json module alone (it shares no code with the importer), and
against hand-checked constants. They are real people's data: assertions and messages show counts,
booleans and hashes only, never their text. The made-up transcripts of claude_code_fixtures.py test
each trap on its own.
"""

from __future__ import annotations

import asyncio
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
    ok(len(subs) == 2, "two sub-agent sessions")
    for uuid, parent_uuid, parent_call, session_type, _reason in subs:
        ok(uuid.startswith(parent.stem + ":agent-") is False and uuid.split(":")[0] == parent.stem,
           "a sub-agent session is <sessionId>:<agentId>")
        ok(parent_uuid == parent.stem and parent_call == call and session_type == "subagent",
           "sub-agent linked to its parent session and the Workflow call")
    reasons = sorted(r[4] or "" for r in subs)
    ok(reasons == ["", "workflow-subagent"], "the agentType of the one .meta.json that says it")
    # the continued 1.0.x session: its compact summary names the session it continues
    continued = next((samples / SWORD).rglob("05305169-*.jsonl"))
    previous = next(o["sessionId"] for o in _objects(continued) if o.get("isCompactSummary"))
    got = rows(db, "SELECT previous_session_id FROM sessions WHERE session_uuid = ?", (continued.stem,))
    ok(got == [(previous,)], "previous_session_id of the continued session")
    # isMeta and isCompactSummary lines: kept, as role context
    counted = sum(1 for p in sample_files() for o in _objects(p)
                  if o.get("type") == "user" and (o.get("isMeta") or o.get("isCompactSummary")))
    ok(scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'context' AND is_context = 1") == counted,
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
    from importer.export import export_snapshot
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
