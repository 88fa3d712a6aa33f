"""The MCP server over the snapshot (datasette_agentbase/mcp_server.py), through the official SDK's own
client: over stdio (spawning ``python -m importer mcp SNAPSHOT``) and over streamable HTTP on a real
``agentbase serve`` (conftest.serving), every tool called on both. With a login configured an anonymous
HTTP request is refused and the login's cookie is let in; a credential planted in a transcript never
comes back (it is redacted in the snapshot, which is all the server reads); bad arguments are MCP tool
errors with a one-line message, and the server goes on answering. The snapshot is built from made-up
transcripts written here; the figures the tools must give are counted from those transcripts."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import string
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from mcp import Client  # (a requirement: setup.py; never skipped)
from mcp.client.stdio import StdioServerParameters

from conftest import REPO, serving
from importer.snapshot import export_snapshot
from importer.store import open_store
from transcripts import Chain, do_import, exec_call, header, sessions_dir, write

ZONE = "Asia/Shanghai"
OFFSET = timedelta(hours=8)
SID_DEPLOY = "d1d1d1d1-0000-4000-8000-0000000000d1"  # alpha/main, 2026-04-05: the quokka deploy, a planted key
SID_CHINESE = "c2c2c2c2-0000-4000-8000-0000000000c2"  # beta/ops, 2026-04-06: 部署 to a new server
SID_LONG = "a3a3a3a3-0000-4000-8000-0000000000a3"  # alpha/main, 2026-04-06: a long session, for paging
PASSWORD = "mcp-tr0ub4dor-3 部署"
VAR = "AGENTBASE_TEST_MCP_PASSWORD"
TOOLS = {"search_sessions", "search_messages", "get_session", "list_sessions", "usage_report", "shell_commands"}


def _secret() -> str:
    rng = random.Random(25)
    return "sk-ant-api03-" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(93)) + "AA"


SECRET = _secret()


def _shift(objs: list[dict], day: str) -> list[dict]:
    for o in objs:
        if isinstance(o.get("timestamp"), str):
            o["timestamp"] = day + o["timestamp"][10:]
    return objs


def session_deploy() -> list[dict]:
    c = Chain()
    objs = [header(SID_DEPLOY)]
    objs.append(c.user("deploy the quokka service to the staging server"))
    objs.append(c.assistant([{"type": "thinking", "thinking": "restart quokka first"},
                             exec_call("call_d1", "systemctl restart quokka.service")], cost=0.02, tokens=1000))
    objs.append(c.result("call_d1", "Job for quokka.service failed", details={"status": "completed", "exitCode": 1,
                                                                              "durationMs": 40}))
    objs.append(c.user(f"here is the key: export ANTHROPIC_API_KEY={SECRET}"))
    objs.append(c.assistant([exec_call("call_d2", f"echo ANTHROPIC_API_KEY={SECRET} >> ~/.quokka.env")],
                            cost=0.01, tokens=500))
    objs.append(c.result("call_d2", f"wrote ANTHROPIC_API_KEY={SECRET}",
                         details={"status": "completed", "exitCode": 0, "durationMs": 5}))
    objs.append(c.assistant([{"type": "text", "text": "The quokka service is deployed on staging."}],
                            cost=0.005, tokens=200))
    return objs


def session_chinese() -> list[dict]:
    c = Chain(minute=300)
    objs = [header(SID_CHINESE)]
    objs.append(c.user("请帮我把网站部署到新的服务器上"))
    objs.append(c.assistant([exec_call("call_c1", "df -h /srv")], cost=0.03, tokens=800))
    objs.append(c.result("call_c1", "Filesystem Size Used\n/dev/sda1 100G 40G",
                         details={"status": "completed", "exitCode": 0, "durationMs": 12}))
    objs.append(c.assistant([{"type": "text", "text": "网站已经部署到新的服务器"}], cost=0.01, tokens=300))
    return _shift(objs, "2026-04-06")


def session_long() -> list[dict]:
    c = Chain(minute=900)
    objs = [header(SID_LONG)]
    for i in range(12):
        objs.append(c.user(f"step {i}: tell me about the wombat burrow number {i}"))
        objs.append(c.assistant([{"type": "text", "text": f"Wombat burrow {i}: " + "dig deeper. " * 150}],
                                cost=0.001, tokens=100))
    return _shift(objs, "2026-04-06")


WRITTEN = {("alpha", "main", SID_DEPLOY): session_deploy(), ("beta", "ops", SID_CHINESE): session_chinese(),
           ("alpha", "main", SID_LONG): session_long()}


# -- the oracle: what the transcripts hold, counted here -------------------------------------------------

def _local_day(stamp: str) -> str:
    return (datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(timezone.utc) + OFFSET).strftime("%Y-%m-%d")


def oracle_usage() -> dict[str, dict]:
    """Per local day: total tokens and cost of the assistant messages written."""
    days: dict[str, dict] = {}
    for objs in WRITTEN.values():
        for o in objs:
            msg = o.get("message") or {}
            if o.get("type") == "message" and msg.get("role") == "assistant":
                d = days.setdefault(_local_day(o["timestamp"]), {"totalTokens": 0, "cost_usd": 0.0})
                d["totalTokens"] += msg["usage"]["totalTokens"]
                d["cost_usd"] += msg["usage"]["cost"]["total"]
    return days


def oracle_shell() -> Counter:
    """(day, agent) -> exec calls written."""
    out: Counter = Counter()
    for (_, agent, _), objs in WRITTEN.items():
        for o in objs:
            for b in (o.get("message") or {}).get("content") or []:
                if b.get("type") == "toolCall" and b.get("name") == "exec":
                    out[(_local_day(o["timestamp"]), agent)] += 1
    return out


def messages_written(sid: str) -> int:
    for (_, _, s), objs in WRITTEN.items():
        if s == sid:
            return sum(1 for o in objs if o.get("type") == "message")
    raise KeyError(sid)


def messages_saying(word: str) -> int:
    """Messages written whose content holds ``word`` (a whole word, any case)."""
    pattern = re.compile(rf"\b{re.escape(word)}\b", re.I)
    return sum(1 for objs in WRITTEN.values() for o in objs
               if o.get("type") == "message" and pattern.search(json.dumps(o["message"].get("content"))))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("mcp")
    for (server, agent, sid), objs in WRITTEN.items():
        write(sessions_dir(tmp / server, agent) / f"{sid}.jsonl", objs)
    archive = tmp / "archive.db"
    do_import(archive, tmp / "alpha", server="alpha")
    do_import(archive, tmp / "beta", server="beta")
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp / "snapshot.db", timezone=ZONE)
    finally:
        store.close()
    snapshot = tmp / "snapshot.db"
    import sqlite3

    conn = sqlite3.connect(f"file:{snapshot.resolve()}?mode=ro", uri=True)
    try:
        ids = {uuid: sid for sid, uuid in conn.execute("SELECT id, session_uuid FROM sessions")}
    finally:
        conn.close()
    return {"snapshot": snapshot, "archive": archive, "ids": ids}


def _digest(path: Path) -> str:
    return hashlib.sha256(Path(path).resolve().read_bytes()).hexdigest()


# -- one pass over every tool, the same on both transports ------------------------------------------------

def _doc(result) -> dict:
    assert not result.is_error, result.content[0].text if result.content else result
    return json.loads(result.content[0].text)


def _text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "text", None) is not None)


async def exercise(client, ids: dict) -> list[str]:
    """Call every tool with arguments that reach every session (the planted key's too), check each answer
    against the transcripts, and return every answer's text."""
    seen: list[str] = []

    async def call(name: str, args: dict) -> dict:
        result = await client.call_tool(name, args)
        seen.append(_text(result))
        return _doc(result)

    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    for tool in listed.tools:  # each says what it returns and its limits
        assert len(tool.description) > 150 and "Limits:" in tool.description, tool.name

    found = await call("search_sessions", {"query": "quokka"})
    assert [s["session_id"] for s in found["sessions"]] == [ids[SID_DEPLOY]]
    top = found["sessions"][0]
    assert top["agent"] == "main" and top["server"] == "alpha" and top["title"].startswith("deploy the quokka")
    assert top["matching_messages"] == messages_saying("quokka") and all("**quokka" in m["snippet"].lower() for m in top["matches"])
    found = await call("search_sessions", {"query": "部署 服务器"})
    assert [s["session_id"] for s in found["sessions"]] == [ids[SID_CHINESE]]
    found = await call("search_sessions", {"query": "quokka.service", "agent": "ops"})
    assert found["sessions"] == []

    hits = await call("search_messages", {"query": "wombat", "limit": 5})
    assert len(hits["messages"]) == 5 and hits["next_offset"] == 5
    assert {m["session_id"] for m in hits["messages"]} == {ids[SID_LONG]}
    rest = await call("search_messages", {"query": "wombat", "limit": 100, "offset": 5})
    assert len(hits["messages"]) + len(rest["messages"]) == 24 and rest["next_offset"] is None  # 12 asks, 12 answers
    assert not {m["message_id"] for m in hits["messages"]} & {m["message_id"] for m in rest["messages"]}
    key_hits = await call("search_messages", {"query": "ANTHROPIC_API_KEY"})
    assert {m["session_id"] for m in key_hits["messages"]} == {ids[SID_DEPLOY]} and len(key_hits["messages"]) == 3

    # a session in pages cut to a budget: every message once, in order, each page within its budget
    got: list[dict] = []
    cursor = None
    pages = 0
    while True:
        args = {"session_id": str(ids[SID_LONG]), "max_chars": 4000}
        if cursor:
            args["cursor"] = cursor
        page = await call("get_session", args)
        pages += 1
        assert len(json.dumps(page["messages"], ensure_ascii=False)) <= 4000 + 200 * len(page["messages"])
        got += page["messages"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert pages < 50
    assert pages > 3 and len(got) == messages_written(SID_LONG) == page["messages_in_session"]
    assert len({m["message_id"] for m in got}) == len(got)
    assert [m["role"] for m in got[:2]] == ["user", "assistant"] and got[0]["text"].startswith("step 0:")
    assert got[-1]["text"].startswith("Wombat burrow 11") and any(m.get("characters_cut") for m in got)
    whole = await call("get_session", {"session_id": SID_DEPLOY, "max_chars": 100_000})  # by uuid
    assert whole["next_cursor"] is None and len(whole["messages"]) == messages_written(SID_DEPLOY)
    by_number = await call("get_session", {"session_id": ids[SID_DEPLOY], "max_chars": 100_000})  # a JSON number
    assert by_number["messages"] == whole["messages"]
    call_msg = whole["messages"][1]
    assert call_msg["thinking"] == "restart quokka first"
    assert call_msg["tool_calls"][0]["name"] == "exec" and call_msg["tool_calls"][0]["exit_code"] == 1
    assert json.loads(call_msg["tool_calls"][0]["arguments"]) == {"command": "systemctl restart quokka.service"}
    assert whole["messages"][2]["role"] == "toolResult" and whole["messages"][2]["output"].startswith("Job for")

    listed_sessions = await call("list_sessions", {})
    assert listed_sessions["count"] == len(WRITTEN) and len(listed_sessions["sessions"]) == len(WRITTEN)
    assert {s["session_uuid"] for s in listed_sessions["sessions"]} == {sid for _, _, sid in WRITTEN}
    one = await call("list_sessions", {"agent": "ops"})
    assert [s["session_uuid"] for s in one["sessions"]] == [SID_CHINESE]
    first = await call("list_sessions", {"limit": 2})
    assert len(first["sessions"]) == 2 and first["next_cursor"]
    second = await call("list_sessions", {"limit": 2, "cursor": first["next_cursor"]})
    assert len(second["sessions"]) == 1 and second["next_cursor"] is None
    dated = await call("list_sessions", {"date_from": "2026-04-06"})
    assert {s["session_uuid"] for s in dated["sessions"]} == {SID_CHINESE, SID_LONG}

    usage = await call("usage_report", {"kind": "daily"})
    expected = oracle_usage()
    assert [r["day"] for r in usage["rows"]] == sorted(expected) and usage["timezone"] == ZONE
    for row in usage["rows"]:
        assert row["totalTokens"] == expected[row["day"]]["totalTokens"]
        assert row["cost_usd"] == pytest.approx(expected[row["day"]]["cost_usd"])
    assert usage["totals"]["totalTokens"] == sum(d["totalTokens"] for d in expected.values())
    monthly = await call("usage_report", {"kind": "monthly", "agent": "ops"})
    assert [r["month"] for r in monthly["rows"]] == ["2026-04"]
    per_session = await call("usage_report", {"kind": "session", "breakdown": True})
    assert {r["session_uuid"] for r in per_session["rows"]} == {sid for _, _, sid in WRITTEN}

    shells = oracle_shell()
    latest = max(day for day, _ in shells)
    cmds = await call("shell_commands", {})
    assert cmds["day"] == latest
    assert {(latest, a["agent"]): a["commands"] for a in cmds["per_agent"]} == \
        {k: v for k, v in shells.items() if k[0] == latest}
    day = await call("shell_commands", {"day": "2026-04-05", "agent": "main", "limit": 1})
    assert day["per_agent"] == [{"agent": "main", "server": "alpha", "commands": shells[("2026-04-05", "main")],
                                 "failed": 1}]
    assert day["commands"][0]["command"] == "systemctl restart quokka.service" and day["next_after"]
    more = await call("shell_commands", {"day": "2026-04-05", "agent": "main", "after": day["next_after"]})
    assert len(more["commands"]) == shells[("2026-04-05", "main")] - 1 and more["next_after"] is None
    return seen


BAD_CALLS = [
    ("get_session", {"session_id": "987654"}, "no session"),
    ("get_session", {"session_id": "1", "cursor": "garbage"}, "cursor"),
    ("get_session", {"session_id": "1", "max_chars": 5}, "max_chars"),
    ("list_sessions", {"date_from": "2026-13-01"}, "date_from"),
    ("list_sessions", {"cursor": "nonsense"}, "cursor"),
    ("list_sessions", {"limit": 0}, "limit"),
    ("usage_report", {"kind": "weekly"}, "kind"),
    ("usage_report", {"kind": "daily", "since": "last week"}, "since"),
    ("search_sessions", {"query": "   "}, "query"),
    ("search_messages", {"query": "x", "offset": -1}, "offset"),
    ("shell_commands", {"day": "yesterday"}, "day"),
    ("no_such_tool", {}, "no_such_tool"),
]


async def bad_arguments(client) -> None:
    for name, args, word in BAD_CALLS:
        result = await client.call_tool(name, args)
        text = _text(result)
        assert result.is_error, (name, args)
        assert word in text and "Traceback" not in text, (name, text)
    # and the server still answers
    assert (await client.call_tool("list_sessions", {"limit": 1})).is_error is False


def assert_redacted(answers: list[str]) -> None:
    joined = "\n".join(answers)
    assert SECRET not in joined and SECRET[13:45] not in joined
    assert "[REDACTED:" in joined  # the key's places were read and answered, redacted


# -- stdio ---------------------------------------------------------------------------------------------

def stdio(snapshot: Path) -> Client:
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "importer", "mcp", str(snapshot)],
                                        cwd=str(REPO)), read_timeout_seconds=60)


def test_stdio_every_tool_redacted_and_read_only(built):
    assert SECRET.encode() in built["archive"].read_bytes()  # the archive keeps it: the test can fail
    before = _digest(built["snapshot"])

    async def scenario():
        async with stdio(built["snapshot"]) as client:
            answers = await exercise(client, built["ids"])
            await bad_arguments(client)
            reports = {kind: _doc(await client.call_tool("usage_report", {"kind": kind, "breakdown": True}))
                       for kind in ("daily", "monthly", "session")}
            return answers, reports

    answers, reports = asyncio.run(scenario())
    assert_redacted(answers)
    assert _digest(built["snapshot"]) == before  # opened read-only: nothing written
    # usage_report is `agentbase report --json`: the same document, read from the archive by the CLI
    for kind, doc in reports.items():
        done = subprocess.run([sys.executable, "-m", "importer", "report", kind, "--json", "--breakdown",
                               "--db", f"sqlite:///{built['archive']}", "--timezone", ZONE],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-500:]
        assert doc == json.loads(done.stdout), kind
    titles = {r["session_uuid"]: r["title"] for r in reports["session"]["rows"]}
    assert titles == {sid: next(o["message"]["content"][0]["text"] for o in objs if o.get("type") == "message")
                      for (_, _, sid), objs in WRITTEN.items()}  # no title written: the first prompt


def test_stdio_refuses_what_is_not_a_snapshot(built, tmp_path):
    for target, words in ((tmp_path / "missing.db", "no snapshot"), (built["archive"], "")):
        done = subprocess.run([sys.executable, "-m", "importer", "mcp", str(target)], cwd=REPO, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 1 and done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:") and words in lines[0]


# -- streamable HTTP on agentbase serve ---------------------------------------------------------------------

def _post(server, body: dict, headers: dict | None = None, cookies: dict | None = None):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    try:
        given = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                 **(headers or {})}
        if cookies:
            given["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
        conn.request("POST", "/-/agentbase/mcp", body=json.dumps(body), headers=given)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}


def _cookie(headers, name: str) -> str:
    for value in headers.get_all("Set-Cookie") or []:
        found = re.match(rf"{name}=([^;]*)", value)
        if found and found.group(1):
            return found.group(1).strip('"')
    raise AssertionError(f"no {name} cookie")


def log_in(server) -> str:
    status, headers, text, _ = server.request("GET", "/-/agentbase/login")
    assert status == 200
    token = re.search(r'name="csrftoken" value="([^"]+)"', text).group(1)
    status, headers, _, _ = server.request("POST", "/-/agentbase/login",
                                           body={"password": PASSWORD, "csrftoken": token, "next": "/"},
                                           cookies={"ds_csrftoken": _cookie(headers, "ds_csrftoken")})
    assert status == 302
    return _cookie(headers, "ds_actor")


def http_client(url: str, cookies: dict | None = None, headers: dict | None = None) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = dict(headers or {})
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    return Client(transport, read_timeout_seconds=60)


def test_http_every_tool_on_agentbase_serve(built):
    with serving(built["snapshot"]) as server:
        async def scenario():
            async with Client(server.base + "/-/agentbase/mcp", read_timeout_seconds=60) as client:
                answers = await exercise(client, built["ids"])
                await bad_arguments(client)
                return answers

        assert_redacted(asyncio.run(scenario()))
        # a page elsewhere cannot drive the tools through a visitor's browser
        status, _ = _post(server, INITIALIZE, headers={"Origin": "http://evil.example"})
        assert status == 403
        status, text = _post(server, INITIALIZE, headers={"Origin": server.base})
        assert status == 200 and '"serverInfo"' in text


def test_http_behind_the_login(built):
    with serving(built["snapshot"], "--password-env", VAR, env={VAR: PASSWORD}, ready="/-/agentbase/login") as server:
        status, text = _post(server, INITIALIZE)
        assert status == 403 and "serverInfo" not in text and "Log in" in text
        status, _ = _post(server, INITIALIZE, cookies={"ds_actor": "forged"})
        assert status == 403

        async def anonymous():
            async with http_client(server.base + "/-/agentbase/mcp") as client:
                await client.list_tools()

        with pytest.raises(BaseException) as refused:
            asyncio.run(anonymous())
        assert "serverInfo" not in str(refused.value)
        cookie = log_in(server)
        status, text = _post(server, INITIALIZE, cookies={"ds_actor": cookie})
        assert status == 200 and '"serverInfo"' in text

        async def logged_in():
            async with http_client(server.base + "/-/agentbase/mcp", {"ds_actor": cookie}) as client:
                return await exercise(client, built["ids"])

        assert_redacted(asyncio.run(logged_in()))

        # an agent's config sends the password as a bearer token (checked as the login form checks it)
        status, text = _post(server, INITIALIZE, headers={"Authorization": "Bearer not-the-password"})
        assert status == 403 and "serverInfo" not in text
        bearer = {"Authorization": b"Bearer " + PASSWORD.encode("utf-8")}  # (its UTF-8 bytes on the wire)

        async def with_bearer():
            async with http_client(server.base + "/-/agentbase/mcp", headers=bearer) as client:
                await bad_arguments(client)
                return [_text(await client.call_tool("get_session", {"session_id": SID_DEPLOY}))]

        assert_redacted(asyncio.run(with_bearer()))
        status, _, _, _ = server.request("GET", "/snapshot.json", headers=bearer)
        assert status == 403  # the bearer is the MCP endpoint's alone: the pages still want the login


def test_an_export_update_is_seen_at_the_next_call(tmp_path):
    """The stdio server keeps nothing of an older snapshot: after `agentbase export` updates it in place, the
    next call answers from the new rows (usage_report's kept report too)."""
    root = tmp_path / "alpha"
    write(sessions_dir(root, "main") / f"{SID_DEPLOY}.jsonl", session_deploy())
    archive = tmp_path / "archive.db"
    snapshot = tmp_path / "snapshot.db"

    def export() -> None:
        store = open_store(f"sqlite:///{archive}")
        try:
            export_snapshot(store, snapshot, timezone=ZONE)
        finally:
            store.close()

    do_import(archive, root, server="alpha")
    export()
    later = session_long()

    async def scenario():
        async with stdio(snapshot) as client:
            before = _doc(await client.call_tool("usage_report", {"kind": "daily"}))
            found = _doc(await client.call_tool("search_sessions", {"query": "wombat"}))
            write(sessions_dir(root, "main") / f"{SID_LONG}.jsonl", later)
            do_import(archive, root, server="alpha")
            export()
            after = _doc(await client.call_tool("usage_report", {"kind": "daily"}))
            found_after = _doc(await client.call_tool("search_sessions", {"query": "wombat"}))
            return before, found, after, found_after

    before, found, after, found_after = asyncio.run(scenario())
    added = sum(o["message"]["usage"]["totalTokens"] for o in later
                if o.get("type") == "message" and o["message"]["role"] == "assistant")
    assert found["sessions"] == [] and [s["session_uuid"] for s in found_after["sessions"]] == [SID_LONG]
    assert after["totals"]["totalTokens"] == before["totals"]["totalTokens"] + added
