"""A made-up snapshot for the session browser: sessions of every source kind (OpenClaw on two
servers, pi, mini-OpenClaw, the agent-server, Claude Code, Codex), gateway envelopes around OpenClaw
prompts, a label, titles, errors, thinking, unpriced calls, two sessions whose last message is at the
same instant (the keyset's tie-break), markup in a label, a prompt and an agent's name, and enough
sessions over five weeks to page through. Every text here is invented.

Days are local to Asia/Shanghai (UTC+8), the export's time zone.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import agent_server_fixture as AF
import claude_code_fixtures as CC
import codex_fixtures as CF
import mini_openclaw_fixtures as MF
from importer.snapshot import export_snapshot
from importer.store import open_store
from transcripts import Chain, do_import, exec_call, header, sessions_dir, write

ZONE = "Asia/Shanghai"
LATEST_LOCAL_DAY = "2026-04-06"
HOSTILE_LABEL = "<script>window.__xss_label=1</script> deploy notes"
HOSTILE_PROMPT = "<img src=x onerror=window.__xss_prompt=1> 检查 部署 的服务器"
HOSTILE_AGENT = "<img src=x onerror=window.__xss_agent=1>"
TELEGRAM_PROMPT = ("[Telegram Quokka Ops (@quokka_ops) id:100200300 2026-04-05 09:46 GMT+8] "
                   "restart the quokka gateway\n[message_id: 7]")
TELEGRAM_TEXT = "restart the quokka gateway"
FEISHU_TEXT = "检查 nginx 的部署状态"
FEISHU_PROMPT = (
    "System: [2026-04-05 10:05:42 GMT+8] Feishu[default] DM | ou_fake0001 [msg:om_fake0001]\n\n"
    "Conversation info (untrusted metadata):\n```json\n{\n  \"message_id\": \"om_fake0001\",\n"
    "  \"sender_id\": \"ou_fake0001\"\n}\n```\n\n"
    "Sender (untrusted metadata):\n```json\n{\n  \"label\": \"ou_fake0001\",\n  \"name\": \"ou_fake0001\"\n}\n```\n\n"
    + FEISHU_TEXT)
LONG_PROMPT = "Please look at the quokka deployment logs " + "and the queue depth " * 40
CC_PROMPT = "deploy the quokka service"


def _stamp(objs: list[dict], start: datetime) -> list[dict]:
    """Entries one second apart from ``start`` (UTC)."""
    for k, o in enumerate(objs):
        if isinstance(o.get("timestamp"), str):
            o["timestamp"] = (start + timedelta(seconds=k)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return objs


def utc(day: str, hour: int, minute: int = 0) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, minute=minute, tzinfo=timezone.utc)


def session(sid: str, start: datetime, prompt: str, turns: int = 1, fail: bool = False, think: bool = False,
            unpriced: bool = False, cost: float = 0.01, recovered: bool = False) -> list[dict]:
    """A prompt, then ``turns`` rounds of an exec call (failing with ``fail``), its result and an answer;
    ``recovered``: the first answer re-appended under a new id (OpenClaw's recovery: counted once)."""
    c = Chain()
    objs = [header(sid), c.user(prompt)]
    for i in range(turns):
        blocks = ([{"type": "thinking", "thinking": f"plan {i}", "thinkingSignature": "sig"}] if think else [])
        call = c.assistant(blocks + [exec_call(f"call_{sid[:6]}_{i}", f"systemctl status app-{i}")], cost=cost,
                           tokens=1000)
        objs.append(call)
        objs.append(c.result(f"call_{sid[:6]}_{i}", "failed" if fail else "active",
                             details={"status": "completed", "exitCode": 1 if fail else 0, "durationMs": 10},
                             is_error=fail))
        answer = c.assistant([{"type": "text", "text": f"round {i} done"}], cost=cost / 2, tokens=400)
        if unpriced:
            for m in (call, answer):
                m["message"]["provider"], m["message"]["model"] = "ollama", "local-model"
                m["message"]["usage"]["cost"] = {k: 0 for k in m["message"]["usage"]["cost"]}
        objs.append(answer)
        if recovered and i == 0:
            copy = json.loads(json.dumps(answer))
            copy["id"], copy["parentId"] = f"c0{answer['id'][2:]}", answer["id"]
            objs.append(copy)
            c.parent = copy["id"]
        if i == 0 and turns > 1:
            objs.append(c.user(f"and now round {i + 1}"))
    return _stamp(objs, start)


def build(tmp: Path, name: str = "snapshot.db") -> Path:
    """Import the made-up sources and export the snapshot (Asia/Shanghai days)."""
    alpha, beta = tmp / "alpha", tmp / "beta"
    n = 0

    def sid() -> str:
        nonlocal n
        n += 1
        return f"{n:08x}-0000-4000-8000-{n:012x}"

    index = {}
    # alpha/main: a session every day or two over five weeks (paging), mornings local
    days = [(datetime(2026, 3, 2) + timedelta(days=k)).date().isoformat() for k in range(0, 36, 2)]
    for k, day in enumerate(days):
        s = sid()
        write(sessions_dir(alpha, "main") / f"{s}.jsonl",
              session(s, utc(day, 1, k), f"check the app service, round {k}", turns=1 + k % 3, fail=k % 4 == 1,
                      think=k % 3 == 0, unpriced=k % 5 == 2, recovered=k % 6 == 4))
    # alpha/main: a label (markup), the Telegram and Feishu envelopes, a long prompt, a hostile prompt
    s = sid()
    write(sessions_dir(alpha, "main") / f"{s}.jsonl", session(s, utc("2026-04-05", 2), "the prompt under a label"))
    index["agent:main:webchat:direct:1"] = {"sessionId": s, "updatedAt": 1775354400000, "label": HOSTILE_LABEL,
                                            "chatType": "direct", "channel": "webchat"}
    s = sid()
    write(sessions_dir(alpha, "main") / f"{s}.jsonl", session(s, utc("2026-04-05", 1, 46), TELEGRAM_PROMPT, think=True))
    s = sid()
    write(sessions_dir(alpha, "main") / f"{s}.jsonl", session(s, utc("2026-04-05", 2, 5), FEISHU_PROMPT, fail=True))
    s = sid()
    write(sessions_dir(alpha, "main") / f"{s}.jsonl", session(s, utc("2026-04-04", 23, 30), LONG_PROMPT, turns=2))
    s = sid()
    write(sessions_dir(alpha, "main") / f"{s}.jsonl",
          session(s, utc("2026-04-06", 3), HOSTILE_PROMPT, fail=True, think=True, unpriced=True))
    (sessions_dir(alpha, "main") / "sessions.json").write_text(json.dumps(index, ensure_ascii=False))
    # beta: two sessions ending at the very same instant (agents main and ops), both over local midnight
    for agent in ("main", "ops"):
        s = sid()
        write(sessions_dir(beta, agent) / f"{s}.jsonl",
              session(s, utc("2026-04-05", 15, 59) + timedelta(seconds=55), f"a {agent} night shift", turns=2,
                      think=agent == "ops"))
    # beta/ops: a model call that ended in an error (no tool call failed)
    s = sid()
    c = Chain()
    broken = c.assistant([{"type": "text", "text": "upstream overloaded"}], cost=0.0, tokens=10)
    broken["message"]["stopReason"], broken["message"]["errorMessage"] = "error", "overloaded"
    objs = [header(s), c.user("summarise the alerts"), broken]
    write(sessions_dir(beta, "ops") / f"{s}.jsonl", _stamp(objs, utc("2026-04-04", 8)))
    # beta: an agent whose name is markup
    s = sid()
    write(sessions_dir(beta, HOSTILE_AGENT) / f"{s}.jsonl", session(s, utc("2026-04-03", 6), "hostile agent's work"))
    # beta: standalone pi
    pi_home = tmp / "beta-pi" / ".pi" / "agent" / "sessions" / "--home-dev-app--"
    s = sid()
    write(pi_home / f"2026-04-02T15-00-00-000Z_{s}.jsonl", session(s, utc("2026-04-02", 15), "pi: tidy the imports"))
    # gamma: mini-OpenClaw, the agent-server, Claude Code, Codex
    mini = tmp / "mini"
    MF.build_tree(mini)
    agent_server = AF.build_agent_db(tmp / "agent-server", seed=0)
    claude = CC.config_dir(tmp / "claude")
    conv = CC.Conv(CC.SID, 1)
    conv.user(CC_PROMPT)
    conv.assistant([CC.thinking("check the unit first"), CC.text("Restarting it."),
                    CC.tool("toolu_s1", "Bash", command="systemctl restart quokka")], mid="msg_s1", rid="req_s1",
                   stop="tool_use")
    conv.result("toolu_s1", "Job failed", is_error=True)
    conv.assistant([CC.text("It failed; see the journal.")], mid="msg_s2", rid="req_s2", stop="end_turn")
    CC.write(claude / "projects" / CC.PROJECT / f"{CC.SID}.jsonl", conv.lines)
    codex_home = tmp / "codex" / ".codex" / "sessions"
    for k, day in enumerate(["2026-03-28", "2026-04-06"]):
        ms = int(utc(day, 2, 30).timestamp() * 1000)
        CF.conversation(CF.uuid7(ms, k), start_ms=ms, turns=2).write_in(codex_home)

    archive = tmp / "archive.db"
    for path, server in ((alpha, "alpha"), (beta, "beta"), (pi_home.parent.parent.parent, "beta"),
                         (mini, "gamma"), (agent_server.root, "gamma"), (claude, "gamma"), (codex_home, "gamma")):
        report = do_import(archive, path, server=server)
        assert report.files_failed == 0, [m for _p, m in report.failures]
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp / name, timezone=ZONE)
    finally:
        store.close()
    return tmp / name
