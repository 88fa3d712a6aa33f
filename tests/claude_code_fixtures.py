"""Made-up Claude Code transcripts for the rule tests (test_claude_code.py): every line written
here, nothing copied from anyone's data.

:class:`Conv` writes the lines of one session the way Claude Code does: each line a ``uuid`` and the
``parentUuid`` of the line before, an assistant API message as one line per content block sharing
``message.id`` and ``requestId`` (each with a copy of ``usage``), tool results as user lines.
"""

from __future__ import annotations

import json
from pathlib import Path

SID = "c1a0de00-0000-4000-8000-000000000001"
SID2 = "c1a0de00-0000-4000-8000-000000000002"
SID3 = "c1a0de00-0000-4000-8000-000000000003"
CWD = "/home/dev/quokka-app"
PROJECT = "-home-dev-quokka-app"
MODEL = "claude-sonnet-4-5-20250929"


def usage(inp: int = 10, out: int = 20, read: int = 0, write: int = 0, h5: int | None = None,
          h1: int | None = None) -> dict:
    u = {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": read,
         "cache_creation_input_tokens": write, "service_tier": "standard"}
    if h5 is not None or h1 is not None:
        u["cache_creation"] = {"ephemeral_5m_input_tokens": h5 or 0, "ephemeral_1h_input_tokens": h1 or 0}
    return u


class Conv:
    """One session's lines, each the child of the line before."""

    def __init__(self, session: str = SID, tag: int = 1, agent: str | None = None, sidechain: bool = False,
                 cwd: str = CWD, version: str = "2.1.3", second: int = 0, parent: str | None = None):
        self.session = session
        self.tag = tag
        self.agent = agent
        self.sidechain = sidechain or agent is not None
        self.cwd = cwd
        self.version = version
        self.n = 0
        self.second = second
        self.parent = parent
        self.lines: list[dict] = []

    def uuid(self) -> str:
        self.n += 1
        return f"{self.tag:08x}-1111-4000-8000-{self.n:012x}"

    def ts(self) -> str:
        self.second += 1
        return f"2026-03-02T10:{self.second // 60 % 60:02d}:{self.second % 60:02d}.{self.second % 1000:03d}Z"

    def base(self, kind: str, **extra) -> dict:
        line = {"parentUuid": self.parent, "isSidechain": self.sidechain, "userType": "external", "cwd": self.cwd,
                "sessionId": self.session, "version": self.version, "gitBranch": "main"}
        if self.agent is not None:
            line["agentId"] = self.agent
        line.update(type=kind, uuid=self.uuid(), timestamp=self.ts())
        line.update(extra)
        self.parent = line["uuid"]
        self.lines.append(line)
        return line

    def user(self, content, **extra) -> dict:
        return self.base("user", message={"role": "user", "content": content}, **extra)

    def result(self, tool_id: str, content, is_error: bool | None = None, tur=None, **extra) -> dict:
        block = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
        if is_error is not None:
            block["is_error"] = is_error
        if tur is not None:
            extra["toolUseResult"] = tur
        return self.user([block], **extra)

    def assistant(self, blocks: list, mid: str, rid: str | None = "req_1", usages: list | None = None,
                  model: str = MODEL, stop: str | None = None, **extra) -> list[dict]:
        """One API message: a line per block, usage on each (``usages``: one per line, else the same)."""
        out = []
        for i, block in enumerate(blocks):
            u = usages[i] if usages else usage()
            message = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [block],
                       "stop_reason": stop if i == len(blocks) - 1 else None, "stop_sequence": None, "usage": u}
            fields = dict(extra)
            if rid is not None:
                fields["requestId"] = rid
            out.append(self.base("assistant", message=message, **fields))
        return out

    def floating(self, kind: str, **fields) -> dict:
        """A line with no uuid (file-history-snapshot, last-prompt, mode, summary...)."""
        line = {"type": kind, **fields}
        self.lines.append(line)
        return line

    def system(self, subtype: str, **fields) -> dict:
        return self.base("system", subtype=subtype, level="info", **fields)


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def thinking(t: str, sig: str = "c2lnbmF0dXJl") -> dict:
    return {"type": "thinking", "thinking": t, "signature": sig}


def tool(tool_id: str, name: str, **arguments) -> dict:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}


def dumps(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def write(path: Path, lines: list[dict], tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(dumps(o) for o in lines) + tail)
    return path


def config_dir(root: Path) -> Path:
    """A Claude config dir with its projects/ folder (and a settings file, as Claude Code writes)."""
    (root / "projects").mkdir(parents=True, exist_ok=True)
    (root / "settings.json").write_text("{}")
    return root


def basic_session(session: str = SID, tag: int = 1) -> Conv:
    """A small session: a prompt, thinking + Bash streamed over three lines with growing output
    tokens, its failed result, a Read, an answer."""
    c = Conv(session, tag)
    c.floating("file-history-snapshot", messageId="m0", snapshot={"trackedFileBackups": {}}, isSnapshotUpdate=False)
    c.user("deploy the quokka service")
    c.assistant([thinking("check the unit first"), text("Restarting it."),
                 tool("toolu_b1", "Bash", command="systemctl restart quokka", description="restart")],
                mid="msg_b1", rid="req_b1",
                usages=[usage(3, 1, 1000, 200, 200, 0), usage(3, 40, 1000, 200, 200, 0), usage(3, 95, 1000, 200, 200, 0)],
                stop="tool_use")
    c.result("toolu_b1", "Exit code 3\nJob for quokka.service failed", is_error=True,
             tur={"stdout": "", "stderr": "Job for quokka.service failed", "interrupted": False, "isImage": False})
    c.assistant([tool("toolu_r1", "Read", file_path="/etc/quokka.conf")], mid="msg_b2", rid="req_b2",
                usages=[usage(5, 30, 1200, 0)], stop="tool_use")
    c.result("toolu_r1", [text("port = 8080")])
    c.assistant([text("The unit fails: port 8080 is taken.")], mid="msg_b3", rid="req_b3",
                usages=[usage(2, 12, 1300, 50)], stop="end_turn")
    c.system("turn_duration", durationMs=4200)
    c.floating("last-prompt", lastPrompt="deploy the quokka service", sessionId=session)
    return c
