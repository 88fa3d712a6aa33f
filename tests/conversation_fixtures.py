"""A snapshot of made-up sessions of every source kind the importer reads, for the conversation
view and its exports (tests/test_explorer.py, tests/test_explorer_browser.py):

- OpenClaw (server ``alpha``, agent ``main``): session D, written to be read: Markdown in text and
  thinking (with HTML and ``javascript:`` payloads inside links, images and raw HTML), file
  writes and edits in OpenClaw's and Claude's shapes, a Codex-style patch, a provider error
  object repeated three times, a tool failing the same way three times, a JSON tool error; E, a
  fork of D (its header's ``parentSession`` is D's file); F, a sub-agent D spawned (sessions.json's
  ``spawnedBy``);
- pi: one session in pi's own layout;
- mini-OpenClaw: the canonical object and the LangChain list (role ``tool``);
- Codex: a session with context, reasoning, shell calls and an apply_patch, and a sub-agent of it
  (``parent_session_uuid``); the two mini-OpenClaw sessions are made a reset chain in the snapshot
  (``previous_session_id``, ``next_session_id``, ``reason``, as OpenClaw's SQLite store records
  them);
- Claude Code: a session with injected context, thinking, Edit, Write, a failing Bash and a Task
  whose sub-agent has a transcript of its own (``parent_session_uuid`` and ``parent_call_id``);
- the agent-server: tests/agent_server_fixture.py's database (Claude's Bash/Edit/Read calls,
  Codex's fileChange, ``reasoning``, ``toolCall`` and ``run`` rows).

Every text is invented. Payloads set a window flag if a page ever ran them (PAYLOAD_FLAGS).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import agent_server_fixture as AF
import claude_code_fixtures as KF
import codex_fixtures as CF
import mini_openclaw_fixtures as MF
from transcripts import Chain, do_import, exec_call, header, sessions_dir, write

SID_D = "dddddddd-0000-4000-8000-00000000000d"
SID_E = "eeeeeeee-0000-4000-8000-00000000000e"
SID_F = "ffffffff-0000-4000-8000-00000000000f"
SID_PI = "0a0a0a0a-0000-4000-8000-0000000000a1"

PAYLOAD_FLAGS = ["__xss_md", "__xss_code", "__xss_link", "__xss_mdimg", "__xss_raw", "__xss_auto", "__xss_data",
                 "__xss_think", "__xss_write", "__xss_edit", "__xss_patch", "__xss_jsonerr", "__xss_provider",
                 "__xss_title", "__xss_alt"]

USER_MD = ("Please **fix** the greeting in `src/app.py` — see the [docs](javascript:window.__xss_link=1) "
           "and <script>window.__xss_md=1</script>.")
ASSISTANT_MD = """## Plan

1. Read `src/app.py`
2. Change the greeting, then **test** it

| step | tool |
|------|------|
| read | `read` |
| edit | `edit` |

```python
def greet(name):
    return f"hello {name}"  # <script>window.__xss_code=1</script>
```

A [safe link](https://example.com/docs?a=1&b=2), a [bad one](javascript:window.__xss_link=1), a
[data one](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX194c3NfZGF0YT0xPC9zY3JpcHQ+),
[a title](https://example.com "x&quot; onmouseover=&quot;window.__xss_title=1"), an image
![pic <img src=x onerror=window.__xss_alt=1>](https://example.com/x.png) and raw HTML
<img src=x onerror="window.__xss_raw=1"> and <javascript:window.__xss_auto=1>.

> quoted ~~old~~ text"""
THINKING_MD = ("**Plan**: read the file first, then edit.\n\n- check `greet()`\n- keep the tests green\n"
               "<img src=x onerror=window.__xss_think=1>")
WRITE_CONTENT = ('def greet(name):\n    return "hi " + name\n\n\nif __name__ == "__main__":\n'
                 '    print(greet("<script>window.__xss_write=1</script>"))\n')
EDIT_OLD = '    return "hi " + name\n'
EDIT_NEW = '    return f"hello {name}"  # <b onmouseover=window.__xss_edit=1>\n'
PATCH = ("*** Begin Patch\n*** Update File: src/app.py\n@@ def greet(name):\n-    return \"hi \" + name\n"
         "+    return \"hello \" + name\n*** Add File: NOTES.md\n+# Notes <script>window.__xss_patch=1</script>\n"
         "+greeting changed\n*** End Patch\n")
PROVIDER_ERROR = json.dumps({"type": "error", "error": {
    "type": "overloaded_error", "message": "Overloaded <script>window.__xss_provider=1</script>"}})
JSON_TOOL_ERROR = json.dumps({"status": "error", "tool": "exec",
                              "error": "<img src=x onerror=window.__xss_jsonerr=1> permission denied"})
MISSING = "cat: /srv/missing.txt: No such file or directory"


def session_d() -> list[dict]:
    c = Chain(minute=900)
    objs = [header(SID_D, cwd="/home/dev/app")]
    objs.append(c.user(USER_MD))
    objs.append(c.assistant([{"type": "thinking", "thinking": THINKING_MD}, {"type": "text", "text": ASSISTANT_MD}],
                            cost=0.01, tokens=900))
    objs.append(c.assistant([{"type": "toolCall", "id": "call_w1", "name": "write",
                              "arguments": {"path": "src/app.py", "content": WRITE_CONTENT}}], cost=0.01, tokens=400))
    objs.append(c.result("call_w1", "Successfully wrote 120 bytes to src/app.py", name="write"))
    objs.append(c.assistant([{"type": "toolCall", "id": "call_e1", "name": "edit",
                              "arguments": {"path": "src/app.py", "oldText": EDIT_OLD, "newText": EDIT_NEW}}],
                            cost=0.01, tokens=400))
    objs.append(c.result("call_e1", "Successfully replaced text in src/app.py", name="edit"))
    objs.append(c.assistant([{"type": "toolCall", "id": "call_e2", "name": "Edit",
                              "arguments": {"file_path": "/home/dev/app/README.md", "old_string": "# App\n",
                                            "new_string": "# App\n\nSays hello.\n", "replace_all": False}}],
                            cost=0.01, tokens=400))
    objs.append(c.result("call_e2", "The file /home/dev/app/README.md has been updated.", name="Edit"))
    objs.append(c.assistant([{"type": "toolCall", "id": "call_p1", "name": "apply_patch",
                              "arguments": {"input": PATCH}}], cost=0.01, tokens=400))
    objs.append(c.result("call_p1", "Success. Updated the following files:\nM src/app.py\nA NOTES.md",
                         name="apply_patch"))
    objs.append(c.assistant([{"type": "toolCall", "id": "call_w2", "name": "Write",
                              "arguments": {"file_path": "/home/dev/app/config.json",
                                            "content": '{\n  "greeting": "hello"\n}\n'}}], cost=0.01, tokens=400))
    objs.append(c.result("call_w2", "File created successfully at: /home/dev/app/config.json", name="Write"))
    for i in range(3):  # the same failing call three times in a row
        objs.append(c.assistant([exec_call(f"call_x{i}", "cat /srv/missing.txt")], cost=0.001, tokens=100))
        objs.append(c.result(f"call_x{i}", MISSING, details={"status": "completed", "exitCode": 1, "durationMs": 4},
                             is_error=True))
    objs.append(c.assistant([exec_call("call_j1", "sudo systemctl reload app")], cost=0.001, tokens=100))
    objs.append(c.result("call_j1", JSON_TOOL_ERROR, is_error=True))
    for _ in range(3):  # the provider answering with the same error object three times
        err = c.assistant([], cost=0.0, tokens=0)
        err["message"].update(stopReason="error", errorMessage=PROVIDER_ERROR)
        objs.append(err)
    objs.append(c.assistant([{"type": "text", "text": "Done: the greeting now says **hello**."}],
                            cost=0.002, tokens=120))
    return objs


def session_e(parent_file: Path) -> list[dict]:
    """A fork of D: OpenClaw's header names the file it was forked from."""
    c = Chain(minute=1500)
    objs = [header(SID_E, parentSession=str(parent_file))]
    objs.append(c.user("Try the greeting in French instead"))
    objs.append(c.assistant([{"type": "text", "text": "*Bonjour* it is."}], cost=0.001, tokens=50))
    return objs


def session_f() -> list[dict]:
    """A sub-agent D spawned (sessions.json says spawnedBy)."""
    c = Chain(minute=960)
    objs = [header(SID_F)]
    objs.append(c.user("Check the tests of src/app.py"))
    objs.append(c.assistant([{"type": "text", "text": "All `3` tests pass."}], cost=0.001, tokens=50))
    return objs


def session_pi() -> list[dict]:
    c = Chain(minute=1200)
    objs = [header(SID_PI, cwd="/home/dev/pi-demo")]
    objs.append(c.user("What does `ls` show?"))
    objs.append(c.assistant([exec_call("call_pi1", "ls")], cost=0.001, tokens=60))
    objs.append(c.result("call_pi1", "README.md\nsrc\n", details={"status": "completed", "exitCode": 0,
                                                                 "durationMs": 3}))
    objs.append(c.assistant([{"type": "text", "text": "A `README.md` and a `src/` folder."}], cost=0.001, tokens=60))
    return objs


def codex_pair():
    parent = CF.conversation(turns=1)
    parent.turn("Rename the greeting")
    parent.reasoning("Use a patch for the rename")
    cid = parent.patch("*** Begin Patch\n*** Update File: src/greet.py\n@@ def greet():\n-    return 'hi'\n"
                       "+    return 'hello'\n*** End Patch\n")
    parent.tokens(5000, 4000, 80)
    parent.output(cid, "Success. Updated the following files:\nM src/greet.py\n", custom=True)
    spawn = parent.call("spawn_agent", {"task": "review the rename"})
    parent.output(spawn, "started")
    parent.assistant("Renamed; a sub-agent reviews it.")
    parent.tokens(5200, 5000, 40)
    child = CF.fork_of(parent, parent.ms + 60_000, subagent=True)
    child.turn("Review the rename")
    child.tokens(200, 0, 5)  # a model call before anything the model wrote: a row of role usage
    child.assistant("The rename looks right.")
    child.tokens(300, 0, 20)
    return parent, child, spawn


CLAUDE_SID = "c1a0de00-0000-4000-8000-0000000000cc"


def claude_tree(root: Path) -> Path:
    """A Claude config dir: a session that edits, writes, runs a failing command and starts a sub-agent."""
    folder = KF.config_dir(root / ".claude") / "projects" / "-home-dev-app"
    c = KF.Conv(CLAUDE_SID, tag=21, cwd="/home/dev/app")
    c.user("<command-name>/init</command-name>", isMeta=True)
    c.user("Make `greet()` say **hello**, then have a sub-agent review it")
    c.assistant([KF.thinking("Edit the function, then *delegate* the review."),
                 KF.tool("toolu_ed1", "Edit", file_path="/home/dev/app/greet.py", old_string="    return 'hi'\n",
                         new_string="    return 'hello'\n")], mid="msg_c1", rid="req_c1", stop="tool_use")
    c.result("toolu_ed1", "The file /home/dev/app/greet.py has been updated.")
    c.assistant([KF.tool("toolu_wr1", "Write", file_path="/home/dev/app/CHANGES.md",
                         content="# Changes\n\n- greet() says hello\n")], mid="msg_c2", rid="req_c2", stop="tool_use")
    c.result("toolu_wr1", "File created successfully at: /home/dev/app/CHANGES.md")
    c.assistant([KF.tool("toolu_td1", "TodoWrite", todos=[
        {"content": "Edit greet()", "status": "completed", "activeForm": "Editing greet()"},
        {"content": "Run the <b>tests</b>", "status": "in_progress", "activeForm": "Running the tests"},
        {"content": "Get a review", "status": "pending", "activeForm": "Getting a review"}])],
        mid="msg_c2b", rid="req_c2b", stop="tool_use")
    c.result("toolu_td1", "Todos have been modified successfully.")
    c.assistant([KF.tool("toolu_bs1", "Bash", command="pytest -q", description="Run the tests")], mid="msg_c3",
                rid="req_c3", stop="tool_use")
    c.result("toolu_bs1", "Exit code 1\n1 failed", is_error=True)
    c.assistant([KF.tool("toolu_task1", "Task", description="Review the change", subagent_type="general-purpose",
                         prompt="Review **greet.py**:\n\n- is the greeting right?\n- are the tests?")],
                mid="msg_c4", rid="req_c4", stop="tool_use")
    c.result("toolu_task1", "Looks right; one test needs the new greeting.",
             tur={"agentId": "a77e51", "status": "completed"})
    c.assistant([KF.text("Done: `greet()` says hello; the reviewer wants one test updated.")], mid="msg_c5",
                rid="req_c5", stop="end_turn")
    KF.write(folder / f"{CLAUDE_SID}.jsonl", c.lines)
    sub = KF.Conv(CLAUDE_SID, tag=22, agent="a77e51", cwd="/home/dev/app", second=30)
    sub.user("Review **greet.py**:\n\n- is the greeting right?\n- are the tests?")
    sub.assistant([KF.text("Looks right; one test needs the new greeting.")], mid="msg_s1", rid="req_s1",
                  stop="end_turn")
    KF.write(folder / CLAUDE_SID / "subagents" / "agent-a77e51.jsonl", sub.lines)
    return root / ".claude"


def build_kinds_snapshot(tmp: Path, name: str = "snapshot.db") -> tuple[Path, dict]:
    """Import one tree of each kind, export (Asia/Shanghai); returns the snapshot and the ids of
    the sessions the tests look at (``sessions.id`` by name)."""
    from importer.snapshot import export_snapshot
    from importer.store import open_store

    tmp.mkdir(parents=True, exist_ok=True)
    archive = tmp / "archive.db"
    alpha = tmp / "alpha"
    d_file = write(sessions_dir(alpha, "main") / f"{SID_D}.jsonl", session_d())
    write(sessions_dir(alpha, "main") / f"{SID_E}.jsonl", session_e(d_file))
    write(sessions_dir(alpha, "main") / f"{SID_F}.jsonl", session_f())
    (sessions_dir(alpha, "main") / "sessions.json").write_text(json.dumps({
        "agent:main:main": {"sessionId": SID_D, "updatedAt": 1775400000000, "label": "greeting fix"},
        "agent:main:subagent:0001": {"sessionId": SID_F, "updatedAt": 1775400001000, "spawnedBy": "agent:main:main"},
    }), encoding="utf-8")
    reports = [do_import(archive, alpha, server="alpha")]
    pi = tmp / "pi" / ".pi"
    write(pi / "agent" / "sessions" / "--home-dev-pi-demo--" / f"2026-04-05T10-00-00-000Z_{SID_PI}.jsonl",
          session_pi())
    reports.append(do_import(archive, pi, server="laptop"))
    mini = tmp / "mini"
    MF.canonical(mini)
    MF.langchain(mini)
    reports.append(do_import(archive, mini, server="mini"))
    parent, child, _spawn = codex_pair()
    codex = tmp / "codex" / ".codex"
    parent.write_in(codex / "sessions")
    child.write_in(codex / "sessions")
    reports.append(do_import(archive, codex, server="laptop"))
    AF.build_agent_db(tmp / "agent-server", seed=0)
    reports.append(do_import(archive, tmp / "agent-server", server="as"))
    reports.append(do_import(archive, claude_tree(tmp / "claude"), server="laptop"))
    for report in reports:
        assert report.files_failed == 0, report.failures
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp / name, timezone="Asia/Shanghai")
    finally:
        store.close()
    snapshot = tmp / name
    conn = sqlite3.connect(snapshot)
    try:
        def sid(where: str, *params) -> int:
            return conn.execute(f"SELECT id FROM sessions WHERE {where} ORDER BY id LIMIT 1", params).fetchone()[0]

        ids = {"reading": sid("session_uuid = ?", SID_D), "fork": sid("session_uuid = ?", SID_E),
               "subagent": sid("session_uuid = ?", SID_F), "pi": sid("session_uuid = ?", SID_PI),
               "mini": sid("source = 'mini-openclaw' AND session_uuid = 'session-0a1b2c3d4e5f'"),
               "langchain": sid("source = 'mini-openclaw' AND session_uuid = 'session_1775000000123'"),
               "codex": sid("session_uuid = ?", parent.sid), "codex_child": sid("session_uuid = ?", child.sid),
               "agent_server": sid("source = 'agent-server' AND title = 'Refactor config loader'"),
               "agent_server_codex": sid("id IN (SELECT session_id FROM tool_calls WHERE tool_name = 'fileChange')"),
               "claude": sid("session_uuid = ?", CLAUDE_SID), "claude_sub": sid("session_uuid = ?", CLAUDE_SID + ":a77e51")}
        # what OpenClaw's SQLite store records of a reset: the chain of sessions and the reason
        conn.execute("UPDATE sessions SET next_session_id = 'session_1775000000123' WHERE id = ?", (ids["mini"],))
        conn.execute("UPDATE sessions SET previous_session_id = 'session-0a1b2c3d4e5f', reason = 'reset' "
                     "WHERE id = ?", (ids["langchain"],))
        conn.commit()
    finally:
        conn.close()
    return snapshot, ids


def grow_kinds(tmp: Path) -> None:
    """More lines at the end of build_kinds_snapshot's Codex parent and Claude Code session, as the
    agents append them: a Codex turn with a shell call, a Claude turn whose API message is logged
    twice (its usage counts once)."""
    parent, _child, _spawn = codex_pair()
    parent.turn("Update the docs for the rename")
    parent.assistant("The docs say hello too.")
    parent.tokens(5400, 5100, 30)
    parent.write_in(tmp / "codex" / ".codex" / "sessions")  # (the same lines, then the new ones)
    path = KF.config_dir(tmp / "claude" / ".claude") / "projects" / "-home-dev-app" / f"{CLAUDE_SID}.jsonl"
    last = json.loads(path.read_bytes().splitlines()[-1])
    c = KF.Conv(CLAUDE_SID, tag=23, cwd="/home/dev/app", second=600, parent=last["uuid"])
    c.user("Now update the failing test")
    c.assistant([KF.tool("toolu_bs2", "Bash", command="pytest -q tests/test_greet.py")], mid="msg_c6", rid="req_c6",
                stop="tool_use")
    c.result("toolu_bs2", "1 passed")
    answer = c.assistant([KF.text("The test passes now.")], mid="msg_c7", rid="req_c7", stop="end_turn")
    c.lines.append(dict(answer[0], uuid=answer[0]["uuid"][:-4] + "ffff"))  # the same API call, logged again
    with open(path, "ab") as f:
        for line in c.lines:
            f.write(KF.dumps(line))
