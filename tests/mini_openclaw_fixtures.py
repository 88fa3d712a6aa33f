"""Made-up mini-OpenClaw session files, one builder per variant and trap of
FORMAT-OTHERS.md section 1 that the real samples lack (or show only once).

Everything here is invented for the tests: no text comes from a real session. Files
are written as the app writes them (``json.dump(..., indent=2, ensure_ascii=False)``).
"""

from __future__ import annotations

import json
from pathlib import Path

CREATED = 1_775_000_000.25  # 2026-03-31 23:33:20.250 UTC
UPDATED = 1_775_000_900.5


def write(path: Path, obj, crlf: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    if crlf:
        text = text.replace("\n", "\r\n")
    path.write_bytes(text.encode("utf-8"))
    return path


def sessions_dir(app: Path) -> Path:
    d = app / "backend" / "sessions"
    d.mkdir(parents=True, exist_ok=True)
    return d


def call(tool: str, args: dict, output: str | None, python_repr: bool = True) -> dict:
    """A canonical tool call: ``input`` is str(dict) (the course code) or a JSON string."""
    c = {"tool": tool, "input": str(args) if python_repr else json.dumps(args, ensure_ascii=False)}
    if output is not None:
        c["output"] = output
    return c


def canonical_messages() -> list[dict]:
    """Two user turns; the second answered by several consecutive assistant segments, with
    terminal / python_repl / read_file calls, a Windows path, CRLF output, an error and a timeout."""
    return [
        {"role": "user", "content": "列出 skills 目录"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("terminal", {"command": "dir C:\\Users\\demo\\skills"},
                 " Volume in drive C has no label.\r\n Directory of C:\\Users\\demo\\skills\r\n\r\n"
                 "weather  notes\r\n"),
        ]},
        {"role": "assistant", "content": "skills 目录里有 weather 和 notes。"},
        {"role": "user", "content": "算一下 2**10，然后读 notes"},
        {"role": "assistant", "content": "先算。", "tool_calls": [
            call("python_repl", {"code": "print(2**10)"}, "1024\n"),
        ]},
        {"role": "assistant", "content": "", "tool_calls": [
            call("read_file", {"path": "skills/notes/SKILL.md"}, "Error: file not found: skills/notes/SKILL.md"),
            call("terminal", {"command": "sleep 100"}, "❌ Command timed out (30s limit)"),
        ]},
        {"role": "assistant", "content": "", "tool_calls": [
            call("read_file", {"path": "skills\\notes\\SKILL.md"}, "# notes\nA made-up skill.\n", python_repr=False),
        ]},
        {"role": "assistant", "content": "2**10 = 1024；notes 是一个示例技能。"},
    ]


def canonical(app: Path, sid: str = "session-0a1b2c3d4e5f", messages: list | None = None, **extra) -> Path:
    doc = {"title": "示例会话", "created_at": CREATED, "updated_at": UPDATED,
           "messages": canonical_messages() if messages is None else messages}
    doc.update(extra)
    return write(sessions_dir(app) / f"{sid}.json", doc)


def bare_list_v1(app: Path, sid: str = "v1-session") -> Path:
    return write(sessions_dir(app) / f"{sid}.json", [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi there"},
        {"role": "user", "content": "what is 1+1"},
        {"role": "assistant", "content": "2"},
    ])


def langchain(app: Path, sid: str = "session_1775000000123") -> Path:
    """The LangChain serialisation (bare list of type user/assistant/tool, tool_calls[{name,args,id}])."""
    return write(sessions_dir(app) / f"{sid}.json", [
        {"type": "human", "content": "run two commands"},
        {"type": "ai", "content": "", "tool_calls": [
            {"name": "terminal", "args": {"commands": ["echo one", "echo two"]}, "id": "call_00_aaaaaaaa",
             "type": "tool_call"},
            {"name": "Python_REPL", "args": {"__arg1": "print('x')"}, "id": "call_01_bbbbbbbb",
             "type": "tool_call"},
        ]},
        {"type": "tool", "content": "one\ntwo\n", "tool_call_id": "call_00_aaaaaaaa", "name": "terminal"},
        {"type": "tool", "content": "Error: NameError", "tool_call_id": "call_01_bbbbbbbb", "name": "Python_REPL"},
        {"type": "assistant", "content": "done"},
        {"type": "user", "content": "thanks"},
        {"type": "assistant", "content": "you are welcome"},
    ])


def timestamped(app: Path, sid: str = "session_20260401_093000") -> Path:
    """A bare list of {role, content, timestamp (ISO, local, no zone), tool_calls}."""
    return write(sessions_dir(app) / f"{sid}.json", [
        {"role": "user", "content": "早上好", "timestamp": "2026-04-01T09:30:00"},
        {"role": "assistant", "content": "早上好！", "timestamp": "2026-04-01T09:30:05.250000",
         "tool_calls": [call("terminal", {"command": "date"}, "Wed Apr  1 09:30:04 CST 2026\n")]},
        {"role": "user", "content": "bye", "timestamp": "2026-04-01T01:31:00Z"},
    ])


def plan_object(app: Path, sid: str = "plan-session") -> Path:
    """Newer code's {messages, title, plan}, with per-message timestamps."""
    return write(sessions_dir(app) / f"{sid}.json", {
        "messages": [{"role": "user", "content": "plan a trip", "timestamp": "2026-04-02T10:00:00"},
                     {"role": "assistant", "content": "step 1: pack", "timestamp": "2026-04-02T10:00:09"}],
        "title": "Trip", "plan": {"steps": ["pack", "go"], "done": 0}})


def with_ids(app: Path, sid: str = "0123456789abcdef0123456789abcdef") -> Path:
    """Mythical-Age style: an id field and per-message fork fields."""
    return write(sessions_dir(app) / f"{sid}.json", {
        "id": sid, "title": "New Session", "created_at": CREATED, "updated_at": UPDATED,
        "compressed_context": "", "runtime_state": {"mode": "chat"},
        "messages": [
            {"role": "user", "content": "ping"},
            {"role": "assistant", "content": "pong", "answer_channel": "final", "answer_source": "model",
             "answer_persist_policy": "always", "answer_finalization_policy": "stream"},
        ]})


def index_layout(app: Path) -> list[Path]:
    """sessions.json + files named after titles, each with session_id and ISO times."""
    d = sessions_dir(app)
    files = []
    for n, title in enumerate(("Weather in Paris", "读书笔记")):
        files.append(write(d / f"{title}.json", {
            "session_id": f"idx-{n:04d}", "title": title,
            "created_at": f"2026-04-0{n + 3}T08:00:00", "updated_at": f"2026-04-0{n + 3}T08:05:00",
            "messages": [{"role": "user", "content": f"question {n}", "timestamp": f"2026-04-0{n + 3}T08:00:00"},
                         {"role": "assistant", "content": f"answer {n}", "timestamp": f"2026-04-0{n + 3}T08:04:59"}]}))
    write(d / "sessions.json", {"sessions": [
        {"title": p.stem, "file": p.name, "created_at": "2026-04-03T08:00:00", "updated_at": "2026-04-03T08:05:00",
         "message_count": 2} for p in files]})
    return files


def long_history(n_turns: int = 5) -> list[dict]:
    out = []
    for i in range(n_turns):
        out.append({"role": "user", "content": f"turn {i}: please check"})
        out.append({"role": "assistant", "content": "", "tool_calls": [
            call("terminal", {"command": f"ls /tmp/dir{i}"}, f"file{i}.txt\n")]})
        out.append({"role": "assistant", "content": f"dir{i} holds file{i}.txt"})
    return out


def compress(app: Path, sid: str, messages: list[dict], moved: int, ts: int, form: str = "dict",
             summary: str = "用户查看了几个目录。", previous_summary: str = "") -> tuple[Path, Path]:
    """The session after a compression of ``messages`` (what its file held): the first ``moved`` in
    ``archive/<sid>_<ts>.json`` (``form`` dict: {session_id, archived_at, messages}; list: bare),
    the summary appended to compressed_context."""
    d = sessions_dir(app)
    archived = messages[:moved]
    body = {"session_id": sid, "archived_at": ts + 0.5, "messages": archived} if form == "dict" else archived
    archive = write(d / "archive" / f"{sid}_{ts}.json", body)
    joined = previous_summary + ("\n---\n" if previous_summary else "") + summary
    session = write(d / f"{sid}.json", {"title": "目录检查", "created_at": CREATED, "updated_at": UPDATED + ts % 100,
                                       "compressed_context": joined, "messages": messages[moved:]})
    return session, archive


def truncated(app: Path, sid: str = "half-written") -> Path:
    full = json.dumps({"title": "x", "created_at": CREATED, "updated_at": UPDATED,
                       "messages": canonical_messages()}, indent=2, ensure_ascii=False).encode("utf-8")
    path = sessions_dir(app) / f"{sid}.json"
    path.write_bytes(full[: len(full) // 2])
    return path


def empty(app: Path, sid: str = "empty-session") -> Path:
    return write(sessions_dir(app) / f"{sid}.json", {"title": "New Chat", "created_at": CREATED,
                                                     "updated_at": CREATED, "compressed_context": None,
                                                     "messages": []})


def duplicates(app: Path, sid: str = "retries") -> Path:
    """The same user message twice (a retry), each answered."""
    return canonical(app, sid, [
        {"role": "user", "content": "再试一次"},
        {"role": "user", "content": "再试一次"},
        {"role": "assistant", "content": "好的"},
        {"role": "user", "content": "再试一次"},
        {"role": "assistant", "content": "好的"},
    ])


def not_sessions(app: Path) -> list[Path]:
    d = sessions_dir(app)
    return [
        write(d / "smoke-chat-001.json", {"ok": True, "checks": [{"name": "chat", "passed": True}], "ms": 812}),
        write(d / "config.json", {"rag_mode": False, "model": "deepseek-chat"}),
        write(d / "numbers.json", [1, 2, 3]),
        write(d / "scalar.json", "just a string"),
    ]


def build_tree(root: Path) -> dict[str, Path]:
    """One app folder per variant group (what most tests import)."""
    apps = {name: root / name for name in ("course", "langchain-app", "fork")}
    canonical(apps["course"])
    bare_list_v1(apps["course"])
    duplicates(apps["course"])
    empty(apps["course"])
    langchain(apps["langchain-app"])
    timestamped(apps["langchain-app"])
    with_ids(apps["fork"])
    plan_object(apps["fork"])
    compress(apps["fork"], "compressed-one", long_history(), 6, 1_775_000_500)
    not_sessions(apps["fork"])
    return apps
