"""Shell calls, the same rule in every kind (docs/sources.md, "Shell calls").

A shell call is a tool call whose tool the kind's ``Source.shell_tools`` names: that one list per
kind is what its parser gives a ``command``, what ``stats`` counts as ``shell_calls``. Checked on
every kind's real samples (../shared/samples, ../shared/other-samples; required under CI=true) and
on the agent-server's made-up database (there are no real ones): ``command`` is set exactly on the
calls of the kind's list. Assertion messages name kinds, tools and counts, never sample content.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent_server_fixture as AS  # noqa: E402
from transcripts import do_import, rows  # noqa: E402

from importer import parser as P  # noqa: E402
from importer import stats  # noqa: E402
from importer.sources import all_sources  # noqa: E402
from importer.store import open_store  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared"
# (server, path under SHARED, agent): every kind's real transcripts
SAMPLE_TREES = [
    *((p.name, f"samples/{p.name}", None) for p in sorted((SHARED / "samples").glob("*"))
      if p.is_dir() and p.name != "badlogic__pi-mono"),
    ("pi-fixture", "samples/badlogic__pi-mono/packages/coding-agent/test/fixtures/before-compaction.jsonl", "pi"),
    ("cc-sword", "other-samples/claude-code/SWORDIntel__claude-backups/config", None),
    ("cc-austin", "other-samples/claude-code/austinweitao__claude-backup/projects", None),
    ("cc-sniffly", "other-samples/claude-code/chiphuyen__sniffly/tests/mock-data", None),
    ("cc-ccusage", "other-samples/claude-code/ryoppippi__ccusage/apps/ccusage/test/fixtures/claude", None),
    ("cx-butler", "other-samples/codex/EdofEngland__code_butler", None),
    ("cx-ocodex", "other-samples/codex/JaydenXsoe__ocodex", None),
    ("cx-neuro", "other-samples/codex/Python-AI-Solutions__agentic-neurodata-conversion", None),
    ("cx-localpush", "other-samples/codex/madshn__localpush/src-tauri/tests/fixtures/codex/2026-02-23/raw/sessions",
     None),
    ("cx-ccusage", "other-samples/codex/ryoppippi__ccusage/apps/ccusage/test/fixtures/codex/sessions", None),
    ("mini", "other-samples/mini-openclaw", None),
]
KINDS = {"openclaw", "pi", "claude-code", "codex", "mini-openclaw", "agent-server"}


def shell_lists() -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for source in all_sources():
        assert out.setdefault(source.kind, source.shell_tools) == source.shell_tools, \
            f"two sources of kind {source.kind} list different shell tools"
    return out


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    missing = [rel for _, rel, _ in SAMPLE_TREES if not (SHARED / rel).exists()]
    if missing or not (SHARED / "samples").is_dir():
        message = f"samples missing under {SHARED}: {len(missing)} paths"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message + "; they are required when CI=true")
        pytest.skip(message)
    tmp = tmp_path_factory.mktemp("shell")
    db = tmp / "archive.db"
    for server, rel, agent in SAMPLE_TREES:
        do_import(db, SHARED / rel, server=server, agent=agent)
    AS.build_agent_db(tmp / "agent-server", seed=0)
    do_import(db, tmp / "agent-server", server="gateway")
    return db


def test_one_list_per_kind():
    lists = shell_lists()
    assert KINDS <= lists.keys()
    assert all(lists[k] for k in KINDS), "a kind without a shell tool"
    # OpenClaw's process tool polls or steers a background exec session: not a shell call
    assert "process" not in lists["openclaw"] | lists["pi"]
    assert {"exec", "bash"} <= lists["openclaw"]


def sanitized(arguments: str | None) -> bool:
    """Arguments a sample's owner replaced by a placeholder (localpush: ``[REDACTED_* len=.. sha=..]``)."""
    try:
        args = json.loads(arguments) if arguments else None
    except ValueError:
        return False
    return isinstance(args, dict) and list(args) == ["input"] and str(args["input"]).startswith("[REDACTED_")


def calls_by_kind(archive) -> dict[str, dict[str, int]]:
    """Per kind: the shell calls (by its list), those with a command, the other calls with a command, and
    the shell calls without a command whose arguments were sanitized."""
    lists = shell_lists()
    out: dict[str, dict[str, int]] = {}
    for source, tool, command, arguments in rows(archive, "SELECT source, tool_name, command, arguments "
                                                          "FROM tool_calls"):
        n = out.setdefault(source, {"shell": 0, "shell_with_command": 0, "other_with_command": 0,
                                    "shell_sanitized": 0})
        if tool in lists[source]:
            n["shell"] += 1
            n["shell_with_command"] += command is not None
            n["shell_sanitized"] += command is None and sanitized(arguments)
        else:
            n["other_with_command"] += command is not None
    return out


def test_command_exactly_on_the_kinds_shell_calls(archive):
    counts = calls_by_kind(archive)
    assert counts.keys() == KINDS
    for kind, n in counts.items():
        assert n["other_with_command"] == 0, f"{kind}: {n['other_with_command']} calls of no shell tool with a command"
        # a shell call has its command, unless its arguments hold none (a sanitized sample)
        assert n["shell_with_command"] + n["shell_sanitized"] == n["shell"], f"{kind}: {n}"
        assert n["shell_with_command"] > 0, f"{kind}: no shell call with a command in the samples"
    assert counts["codex"]["shell_sanitized"] == 212  # localpush's exec_command calls: arguments redacted
    assert sum(n["shell_sanitized"] for n in counts.values()) == 212
    # the samples' process calls (OpenClaw) and python_repl calls (mini-OpenClaw) are there, none a shell call
    assert rows(archive, "SELECT COUNT(*), COUNT(command) FROM tool_calls WHERE tool_name = 'process'") == [(9, 0)]
    assert rows(archive, "SELECT COUNT(*), COUNT(command) FROM tool_calls WHERE lower(tool_name) = 'python_repl'") \
        == [(3, 0)]


def test_stats_counts_the_shell_calls(archive):
    """stats' shell_calls per kind: the calls with a command, and the sanitized ones of a shell tool."""
    store = open_store(f"sqlite:///{archive}")
    try:
        totals = stats.collect(store)
    finally:
        store.close()
    want = {kind: n["shell_with_command"] + n["shell_sanitized"] for kind, n in calls_by_kind(archive).items()}
    got = {kind: t["shell_calls"] for kind, t in totals["by_source"].items()}
    assert got == want
    assert totals["shell_calls"] == totals["exec_calls"] == sum(want.values())


def test_the_shared_parser_takes_the_kinds_list():
    """OpenClaw's and pi's parser keeps no list: a call gets a command when the kind's list names its tool."""
    lines = [
        {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"},
        {"type": "message", "id": "m1", "parentId": None, "timestamp": "2026-01-01T00:00:01Z",
         "message": {"role": "assistant", "content": [
             {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"command": "ls"}},
             {"type": "toolCall", "id": "c2", "name": "process", "arguments": {"command": "ls"}},
             {"type": "toolCall", "id": "c3", "name": "run", "arguments": {"command": "ls"}}]}},
    ]
    data = b"".join(P._dumps(o).encode() + b"\n" for o in lines)

    def commands(shell_tools) -> dict:
        entries = P.TranscriptParser("s1.jsonl", shell_tools=shell_tools).feed(data, final=True).entries
        return {c["tool_name"]: c["command"] for e in entries if e.type == "message" for c in e.derive().calls}

    assert commands(shell_lists()["openclaw"]) == {"exec": "ls", "process": None, "run": None}
    assert commands(frozenset({"run"})) == {"exec": None, "process": None, "run": "ls"}
    assert commands(frozenset()) == {"exec": None, "process": None, "run": None}
