"""Made-up Codex CLI rollouts, built at test time in the wrapped format Codex 0.104 writes
(``{timestamp, type, payload}`` lines; FORMAT-OTHERS.md section 4): session_meta, turn_context
with UUIDv7 turn ids, response items, event_msg token_count with cumulative totals, and a fork
or sub-agent that replays its parent's history the way Codex does (its own session_meta, then
the parent's session_meta and lines, re-stamped at the second the child was made).

Every text here is invented. :class:`Rollout` keeps the cumulative total as Codex does, so a
test's expected usage is plain arithmetic on the numbers it passed.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path

T0 = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC, in ms


def uuid7(ms: int, n: int = 0) -> str:
    """A UUIDv7 minted at ``ms`` (``n`` tells ids of the same millisecond apart)."""
    h = f"{ms:012x}7{n & 0xfff:03x}{0x8000 | (n >> 12) & 0x3fff:04x}{n:012x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def iso(ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def rollout_name(sid: str, ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return f"rollout-{dt.strftime('%Y-%m-%dT%H-%M-%S')}-{sid}.jsonl"


def day_path(root: Path, sid: str, ms: int) -> Path:
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return root / dt.strftime("%Y") / dt.strftime("%m") / dt.strftime("%d") / rollout_name(sid, ms)


def line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class Rollout:
    """One rollout, line by line. Times advance 1.5 s per line unless told."""

    def __init__(self, sid: str | None = None, start_ms: int = T0, cwd: str = "/home/dev/projects/demo",
                 model: str = "gpt-5-codex", provider: str = "openai", meta: bool = True, **meta_fields):
        self.ms = start_ms
        self.sid = sid or uuid7(start_ms, 1)
        self.model = model
        self.cwd = cwd
        self.lines: list[dict] = []
        self.total = [0, 0, 0, 0, 0]  # input, cached input, output, reasoning output, total
        self.turns = 0
        self.calls = 0
        if meta:
            payload = {"id": self.sid, "timestamp": iso(start_ms), "cwd": cwd, "originator": "codex_cli_rs",
                       "cli_version": "0.104.0", "source": "cli", "model_provider": provider,
                       "base_instructions": {"text": "You are a coding agent."},
                       "git": {"commit_hash": "0" * 40, "branch": "main", "repository_url": "git@example.com:demo.git"}}
            payload.update(meta_fields)
            self.add("session_meta", payload, ms=start_ms)

    # -- lines ---------------------------------------------------------------------

    def add(self, type_: str, payload: dict, ms: int | None = None) -> dict:
        if ms is None:
            self.ms += 1500
            ms = self.ms
        obj = {"timestamp": iso(ms), "type": type_, "payload": payload}
        self.lines.append(obj)
        return obj

    def item(self, payload: dict, **kw) -> dict:
        return self.add("response_item", payload, **kw)

    def event(self, payload: dict, **kw) -> dict:
        return self.add("event_msg", payload, **kw)

    def context(self) -> None:
        """The injected messages a session starts with (flagged as context)."""
        permissions = "<permissions instructions>sandbox</permissions instructions>"
        self.item({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": permissions}]})
        self.item({"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /home/dev\n\nBe brief."}]})
        environment = f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n</environment_context>"
        self.item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": environment}]})

    def turn(self, prompt: str, model: str | None = None, turn_ms: int | None = None) -> str:
        """A user turn: task_started, the prompt (response item + its event), turn_context."""
        self.turns += 1
        if model:
            self.model = model
        turn_id = uuid7(turn_ms if turn_ms is not None else self.ms + 1000, 100 + self.turns)
        self.event({"type": "task_started", "turn_id": turn_id, "model_context_window": 258400})
        self.item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]})
        self.event({"type": "user_message", "message": prompt, "images": []})
        self.add("turn_context", {"turn_id": turn_id, "cwd": self.cwd, "approval_policy": "on-request",
                                  "sandbox_policy": {"type": "workspace-write"}, "model": self.model,
                                  "effort": "medium", "summary": "auto"})
        return turn_id

    def reasoning(self, summary: str | None = "Thinking about the task", encrypted: bool = True,
                  content: str | None = None) -> None:
        payload = {"type": "reasoning", "summary": [{"type": "summary_text", "text": summary}] if summary else [],
                   "content": [{"type": "reasoning_text", "text": content}] if content else None,
                   "encrypted_content": "gAAAAB" + "Q29kZXhDaXBoZXJ0ZXh0" * 20 if encrypted else None}
        self.item(payload)

    def assistant(self, text: str) -> None:
        self.event({"type": "agent_message", "message": text})
        self.item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})

    def call(self, name: str, arguments: dict, call_id: str | None = None) -> str:
        self.calls += 1
        call_id = call_id or f"call_{self.sid[:8]}_{self.calls}"
        self.item({"type": "function_call", "name": name, "arguments": json.dumps(arguments), "call_id": call_id})
        return call_id

    def patch(self, text: str) -> str:
        self.calls += 1
        call_id = f"call_{self.sid[:8]}_{self.calls}"
        self.item({"type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": "apply_patch",
                   "input": text})
        return call_id

    def local_shell(self, command: list[str]) -> str:
        self.calls += 1
        call_id = f"call_{self.sid[:8]}_{self.calls}"
        self.item({"type": "local_shell_call", "call_id": call_id, "status": "completed",
                   "action": {"type": "exec", "command": command, "timeout_ms": 10000}})
        return call_id

    def output(self, call_id: str, output, custom: bool = False) -> None:
        self.item({"type": "custom_tool_call_output" if custom else "function_call_output", "call_id": call_id,
                   "output": output})

    def exec_end(self, call_id: str, command: list[str], exit_code: int, ms: int = 250) -> None:
        self.event({"type": "exec_command_end", "call_id": call_id, "turn_id": "t", "command": command,
                    "cwd": self.cwd, "source": "agent", "stdout": "", "stderr": "", "aggregated_output": "",
                    "exit_code": exit_code, "duration": {"secs": ms // 1000, "nanos": (ms % 1000) * 1_000_000},
                    "status": "completed" if exit_code == 0 else "failed"})

    def tokens(self, inp: int, cached: int, out: int, reasoning: int = 0) -> list[int]:
        """A model call: the cumulative total grows by this request's usage."""
        last = [inp, cached, out, reasoning, inp + out]
        self.total = [a + b for a, b in zip(self.total, last)]
        self._token_count(last)
        return last

    def repeat(self) -> None:
        """The same total again (Codex emits these; they are no model call)."""
        self._token_count([0, 0, 0, 0, 0])

    def null_tokens(self) -> None:
        self.event({"type": "token_count", "info": None, "rate_limits": {"primary": None}})

    def _token_count(self, last: list[int]) -> None:
        def usage(v):
            return {"input_tokens": v[0], "cached_input_tokens": v[1], "output_tokens": v[2],
                    "reasoning_output_tokens": v[3], "total_tokens": v[4]}
        self.event({"type": "token_count", "info": {"total_token_usage": usage(self.total),
                                                     "last_token_usage": usage(last),
                                                     "model_context_window": 258400},
                    "rate_limits": {"primary": {"used_percent": 1.0}}})

    # -- files -----------------------------------------------------------------------

    def bytes(self) -> bytes:
        return b"".join(line(o) for o in self.lines)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.bytes())
        return path

    def write_in(self, sessions: Path) -> Path:
        return self.write(day_path(sessions, self.sid, int(datetime.fromisoformat(
            self.lines[0]["timestamp"].replace("Z", "+00:00")).timestamp() * 1000)))


def conversation(sid: str | None = None, start_ms: int = T0, model: str = "gpt-5-codex", turns: int = 2,
                 **kw) -> Rollout:
    """A session as Codex 0.104 writes it: context, then per turn a reasoning, a shell call
    (exec_command, exit code in its output), its output, a token_count, a repeat, then a
    reasoning, an answer and a token_count."""
    r = Rollout(sid, start_ms, model=model, **kw)
    r.context()
    for i in range(turns):
        r.turn(f"Please check the build, step {i}")
        r.null_tokens() if i == 0 else r.repeat()
        r.reasoning(f"Look at the build output {i}")
        cid = r.call("exec_command", {"cmd": f"make test-{i}", "workdir": r.cwd})
        r.tokens(4000 + 100 * i, 3000, 200 + i, 64)
        r.output(cid, f"Chunk ID: a{i}\nWall time: 0.2500 seconds\nProcess exited with code {i % 2}\n"
                      f"Original token count: 12\nOutput:\nresult {i}\n")
        r.repeat()
        r.reasoning(None)  # encrypted only
        r.assistant(f"Step {i} is done.")
        r.tokens(4500 + 100 * i, 4000, 300, 0)
        r.event({"type": "task_complete", "turn_id": "t", "last_agent_message": f"Step {i} is done."})
    return r


def fork_of(parent: Rollout, fork_ms: int, subagent: bool = False, turn_ids: bool = True) -> Rollout:
    """A fork (``forked_from_id``) or sub-agent (``source.subagent.thread_spawn``) of ``parent``,
    made at ``fork_ms``: its own session_meta, then the parent's session_meta and every other
    line of the parent replayed and re-stamped at that second, as Codex does. Without
    ``turn_ids`` the replayed turn_context lines carry none (older parents)."""
    sid = uuid7(fork_ms, 7)
    extra = ({"source": {"subagent": {"thread_spawn": {"parent_thread_id": parent.sid, "depth": 1,
                                                          "agent_role": "worker"}}}}
             if subagent else {"forked_from_id": parent.sid})
    child = Rollout(sid, fork_ms, cwd=parent.cwd, model=parent.model, **extra)
    stamp = iso(fork_ms)
    for obj in parent.lines:
        replayed = copy.deepcopy(obj)
        replayed["timestamp"] = stamp
        if not turn_ids and replayed["type"] in ("turn_context", "event_msg"):
            replayed["payload"].pop("turn_id", None)
        child.lines.append(replayed)
    child.total = list(parent.total)  # the child's own totals go on from the parent's
    child.ms = fork_ms
    return child
