"""A small synthetic transcript tree exercising the identity rules the real samples do not.

Everything here is made up. The real samples have no bad or pending lines, no raw U+2028, no
header-less files, no backup copies, no repeated model calls and no file name / header mismatch in
an agents tree; this tree has all of them. Expected figures, worked out by hand, are in
test_oracle.py (EXPECTED_SYNTHETIC).

Layout written by build(root):

    root/synth-one/agents/main/sessions/   session A (live + .bak + .checkpoint), A2 (header-less .reset),
                                           D (fork file named after C), E (header-less <ISO>_<uuid>),
                                           F (topic file), plus non-transcript files
    root/synth-one/agents/ops/sessions/    a copy of A's live file (another agent: another session)
    root/synth-two/.openclaw/agents/main/sessions/
                                           G (.deleted with a header), H (v1: no entry ids) + its .bak copy
"""

import json
from pathlib import Path

A = "aaaaaaaa-0000-4000-8000-000000000001"
A2 = "aaaaaaaa-0000-4000-8000-000000000002"
C = "cccccccc-0000-4000-8000-000000000003"  # only in a file name
D = "dddddddd-0000-4000-8000-000000000004"  # header id of the file named after C
E = "eeeeeeee-0000-4000-8000-000000000005"
F = "ffffffff-0000-4000-8000-000000000006"
G = "12345678-0000-4000-8000-000000000007"
H = "87654321-0000-4000-8000-000000000008"
TRAJECTORY = "99999999-0000-4000-8000-000000000009"  # must never become a session

CWD = "/tmp/synthetic-work"
TS = "2026-04-24T16:09:14.281Z"


def _line(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _header(session_id, **extra):
    header = {"type": "session", "version": 3, "id": session_id, "timestamp": TS, "cwd": CWD}
    header.update(extra)
    return _line(header)


def _msg(entry_id, parent, message):
    obj = {"type": "message"}
    if entry_id is not None:
        obj["id"] = entry_id
        obj["parentId"] = parent
    obj["timestamp"] = TS
    obj["message"] = message
    return _line(obj)


def _usage(inp, out, cache_read=None, cache_write=None, total=None, cost=None):
    usage = {"input": inp, "output": out}
    if cache_read is not None:
        usage["cacheRead"] = cache_read
    if cache_write is not None:
        usage["cacheWrite"] = cache_write
    if total is not None:
        usage["totalTokens"] = total
    if cost is not None:
        usage["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}
    return usage


def _assistant(content, usage, timestamp, provider="synthprov", model="synth-model", **extra):
    message = {"role": "assistant", "content": content, "api": "anthropic-messages",
               "provider": provider, "model": model, "stopReason": "stop", "timestamp": timestamp}
    if usage is not None:
        message["usage"] = usage
    message.update(extra)
    return message


def _text(text):
    return {"type": "text", "text": text}


def _thinking(text):
    return {"type": "thinking", "thinking": text, "thinkingSignature": "sig"}


def _call(call_id, name, arguments):
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def _result(call_id, name, text):
    return {"role": "toolResult", "toolCallId": call_id, "toolName": name,
            "content": [_text(text)], "isError": False, "timestamp": 1}


def _user(content, timestamp=1):
    return {"role": "user", "content": content, "timestamp": timestamp}


def _session_a_lines():
    """Lines of session A's live file, as written (index = physical line number)."""
    u1 = _usage(10, 5, 100, 20, 135, 0.001)
    u2 = _usage(7, 3, total=10, cost=0.0005)
    repeated = _assistant(
        [_text("line\u2028separated\u2029paragraph\u0085next"), _call("toolu_2", "bash", {"command": "ls"}),
         _call("toolu_3", "read", {"path": "a.txt"})],
        u2, 2000)
    return [
        _header(A),                                                                  # 0
        _line({"type": "model_change", "id": "a0000001", "parentId": None, "timestamp": TS,
               "provider": "synthprov", "modelId": "synth-model"}),                  # 1
        _msg("a0000002", "a0000001", _user("hello")),                                # 2 content is a string
        _msg("a0000003", "a0000002", _assistant(
            [_thinking("hmm"), _text("running"), _call("toolu_1", "exec", {"command": "true"})],
            u1, 1000)),                                                              # 3
        _msg("a0000004", "a0000003", _result("toolu_1", "exec", "ok")),              # 4
        "undefined",                                                                 # 5 bad line
        "",                                                                          # 6 empty line
        _msg("a0000005", "a0000004", repeated),                                      # 7 raw U+2028/2029/0085
        _msg("a0000006", "a0000004", repeated),                                      # 8 same call re-appended
        "[1,2,3]",                                                                   # 9 bad: not an object
        _msg(None, None, _user([_text("legacy line without id")])),                  # 10 id "@10"
        _line({"type": "custom_message", "id": "a0000007", "parentId": "a0000006", "timestamp": TS,
               "customType": "openclaw.runtime-context", "content": "ctx", "display": False}),  # 11
        _msg("a0000008", "a0000007", _assistant([], _usage(0, 0, 0, 0, 0, 0), 3000,
                                                stopReason="error", errorMessage="boom")),  # 12
    ]


_PENDING_A = '{"type":"message","id":"a0000009","parentId":"a0000008","message":{"role":"user","content":"ha'


def _write(path, lines, trailing_newline=True, tail=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "\n".join(lines)
    if trailing_newline:
        data += "\n"
    if tail is not None:
        data += tail
    path.write_bytes(data.encode("utf-8"))


def build(root):
    """Write the synthetic tree under root; returns root."""
    root = Path(root)
    one = root / "synth-one" / "agents" / "main" / "sessions"
    ops = root / "synth-one" / "agents" / "ops" / "sessions"
    two = root / "synth-two" / ".openclaw" / "agents" / "main" / "sessions"

    a_lines = _session_a_lines()
    # live file: ends with a half-written line (pending)
    _write(one / f"{A}.jsonl", a_lines, tail=_PENDING_A)
    # backup copy: a prefix plus one entry the live file lost
    _write(one / f"{A}.jsonl.bak-4242-1777000000000",
           a_lines[:5] + [_msg("a00000b1", "a0000004", _user("only in the backup"))])
    # checkpoint copy: a prefix
    _write(one / f"{A}.checkpoint.0badc0de-0000-4000-8000-00000000000c.jsonl", a_lines[:4])

    # A2: header-less (trimmed) reset archive; last line complete but without "\n"
    _write(one / f"{A2}.jsonl.reset.2026-04-24T16-09-14.281Z", [
        _msg("b0000001", None, {"role": "user", "content": None, "timestamp": 1}),
        _msg("b0000002", "b0000001", _assistant("a plain string reply", None, 2000)),
        _msg("b0000003", "b0000002", _assistant([_call("call_1", "exec", {"command": "date"})],
                                                _usage(4, 2), 3000)),
        _msg("b0000004", "b0000003", _result("call_1", "exec", "today")),
        _msg("b0000005", "b0000004", _assistant([_text("done")], _usage(5, 2), 3000)),
    ], trailing_newline=False)

    # fork file named after C whose header says D
    _write(one / f"2026-04-01T10-00-00-000Z_{C}.jsonl", [
        _header(D, parentSession=f"{CWD}/{A}.jsonl"),
        _msg("d0000001", None, _user("fork")),
        _msg("d0000002", "d0000001", _assistant([_thinking("t"), _text("x")],
                                                _usage(1, 2, 3, 4, 10, 0.25), 4000)),
    ])

    # header-less file named <ISO>_<uuid>
    _write(one / f"2026-04-02T10-00-00-000Z_{E}.jsonl", [
        _msg("e0000001", None, _user("hi")),
        _msg("e0000002", "e0000001", _assistant([_text("yo")], _usage(1, 1, total=2, cost=0), 5000)),
    ])

    # topic file with a header
    _write(one / f"{F}-topic-77.jsonl", [
        _header(F),
        _msg("f0000001", None, _user("topic")),
        _msg("f0000002", "f0000001", _assistant(
            [_call("toolu_f1", "exec", {"command": "uptime"}), _call("toolu_f2", "process", {"action": "list"})],
            _usage(100, 50, 0, 0, 150, 0.01), 6000)),
        _msg("f0000003", "f0000002", _result("toolu_f1", "exec", "up")),
        _msg("f0000004", "f0000003", _result("toolu_f2", "process", "none")),
    ])

    # files that are not transcripts
    (one / "sessions.json").write_text(_line({"agent:main:main": {"sessionId": A}}) + "\n")
    (one / f"{A}.jsonl.lock").write_text(_line({"pid": 1, "createdAt": TS}))
    trajectory = [_header(TRAJECTORY), _msg("t0000001", None, _user("not a transcript"))]
    _write(one / f"{TRAJECTORY}.trajectory.jsonl", trajectory)
    _write(one / f"{TRAJECTORY}.acp-stream.jsonl", trajectory)
    _write(one / f"{TRAJECTORY}.jsonl.tmp", trajectory)
    _write(one / f"{TRAJECTORY}.jsonl.corrupt-1777000000000", trajectory)

    # another agent with a copy of A's live file: a different session (server, agent, id)
    _write(ops / f"{A}.jsonl", a_lines, tail=_PENDING_A)

    # second server, hidden .openclaw tree
    g_usage = _usage(20, 10, total=30, cost=0.002)
    _write(two / f"{G}.jsonl.deleted.2026-05-01T00-00-00.000Z", [
        _header(G),
        _msg("90000001", None, _user("go")),
        _msg("90000002", "90000001", _assistant([_thinking("plan"), _call("call_g", "exec", {"command": "id"})],
                                                g_usage, 7000)),
        _msg("90000003", "90000002", _result("call_g", "exec", "uid")),
        _msg("90000004", "90000003", _assistant([_text("done")], g_usage, 7001)),  # same usage, new call
    ])
    h_lines = [
        _line({"type": "session", "id": H, "timestamp": TS, "cwd": CWD, "provider": "anthropic",
               "modelId": "synth-model", "thinkingLevel": "off"}),
        _msg(None, None, _user("v1")),
        _msg(None, None, _assistant([_call("toolu_h", "bash", {"command": "pwd"})],
                                    _usage(3, 4, 5, 6, 18, 0.5), 8000)),
        _msg(None, None, _result("toolu_h", "bash", "/")),
        _msg(None, None, {"role": "bashExecution", "command": "ls", "output": "", "exitCode": 0,
                          "cancelled": False, "truncated": False, "timestamp": 9000}),
    ]
    _write(two / f"{H}.jsonl", h_lines)
    _write(two / f"{H}.jsonl.bak.2026-05-01T00-00-00.000Z", h_lines)
    return root
