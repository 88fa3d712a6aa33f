"""The vocabulary (docs/vocabulary.md) on every kind's real samples: the same questions of each
kind, and answers that mean what the page says; an archive made by the code before the vocabulary
(main at 4ed83e1), upgraded by its migration, equals a fresh import; stats' totals did not change.

The samples live beside the repository (../shared/samples, ../shared/other-samples: required
under CI=true, else skipped) and the agent-server's made-up agent.db (tests/agent_server_fixture.py).
Assertion messages show kinds, roles and counts only, never transcript text.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent_server_fixture as F  # noqa: E402
from vocabulary_checks import assert_vocabulary  # noqa: E402
from test_codex import SAMPLE_PATHS as CODEX_PATHS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
BEFORE = "4ed83e1"  # main before the vocabulary
ROLES = {"user", "assistant", "toolResult", "system"}
KINDS = {"openclaw", "pi", "codex", "mini-openclaw", "claude-code", "agent-server"}
PI_FILE = Path("badlogic__pi-mono", "packages", "coding-agent", "test", "fixtures", "before-compaction.jsonl")

# Imports every tree (JSON list of [path, server]) into the store at argv[1] with whatever code
# PYTHONPATH gives, then prints `stats --json`'s object.
IMPORT = """
import json, sys
from importer.pipeline import run_import
from importer.store import open_store
from importer import stats
store = open_store(sys.argv[1])
try:
    for path, server, *agent in json.loads(sys.argv[2]):
        run_import(store, [path], server=server, agent=agent[0] if agent else None)  # (one mini-OpenClaw sample is truncated: a failure)
    print(json.dumps(stats.collect(store), default=str))
finally:
    store.close()
"""


def _trees(agent_root: Path) -> list[list[str]]:
    trees = [[str(SHARED / "samples"), "test"]]
    # pi's fixture (no agents/ tree: imported on its own, as test_samples.py does)
    trees.append([str(SHARED / "samples" / PI_FILE), "pi-fixture", "pi"])
    trees += [[str(SHARED / "other-samples" / "codex" / rel), name] for name, rel in CODEX_PATHS.items()]
    for kind in ("mini-openclaw", "claude-code"):
        trees += [[str(p), p.name] for p in sorted((SHARED / "other-samples" / kind).glob("*")) if p.is_dir()]
    trees.append([str(agent_root), "agent-server"])
    return [[path, server[:32], *agent] for path, server, *agent in trees]  # (MariaDB's server column holds 32 characters)


def _run(code_root: Path, url: str, trees) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    proc = subprocess.run([sys.executable, "-c", IMPORT, url, json.dumps(trees)], env=env, capture_output=True,
                          text=True, cwd=str(code_root), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    missing = [p for p in (SHARED / "samples", SHARED / "other-samples") if not p.is_dir()]
    if missing:
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"samples missing under CI: {missing}")
        pytest.skip(f"no samples at {missing}")
    root = tmp_path_factory.mktemp("vocabulary")
    built = F.build_agent_db(root / "agent-server", seed=0)
    before = root / "before"
    before.mkdir()
    got = subprocess.run(["git", "-C", str(REPO), "archive", BEFORE], capture_output=True)
    if got.returncode != 0:  # (a shallow clone has no history to compare with)
        message = f"no commit {BEFORE} (main before the vocabulary) in this clone's history"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    archive = got.stdout
    subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
    trees = _trees(built.root)
    old_db, new_db = root / "old.db", root / "new.db"
    old_stats = _run(before, f"sqlite:///{old_db}", trees)
    new_stats = _run(REPO, f"sqlite:///{new_db}", trees)
    return {"root": root, "before": before, "trees": trees, "old": old_db, "new": new_db,
            "old_stats": old_stats, "new_stats": new_stats}


def q(db: Path, sql: str, params=()) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_every_kind_answers_in_the_vocabulary(work):
    db = work["new"]
    assert {s for (s,) in q(db, "SELECT DISTINCT source FROM messages")} >= KINDS
    assert {r for (r,) in q(db, "SELECT DISTINCT role FROM messages")} <= ROLES
    # the same questions, kind by kind (tests/vocabulary_checks.py: a new kind's tests ask them too)
    for kind in sorted(KINDS):
        assert_vocabulary(db, kind, usage=kind != "mini-openclaw",
                          shell_exit_codes=kind in ("openclaw", "codex", "agent-server"))


def test_stats_by_role_and_totals_unchanged(work):
    old, new = work["old_stats"], work["new_stats"]
    assert set(new["messages_by_role"]) <= ROLES
    for kind in KINDS:
        o, n = old["by_source"][kind], new["by_source"][kind]
        assert set(n["messages_by_role"]) <= ROLES, kind
        assert n["usage"] == o["usage"], kind  # tokens and cost: the same on every kind
        for key in ("model_calls", "tool_calls", "shell_calls", "messages_with_thinking", "unpriced_calls",
                    "sessions"):
            assert n[key] == o[key], (kind, key)
        assert sum(n["messages_by_native_role"].values()) == n["messages"], kind
    # the kind's own words: under by_source (Codex's reasoning, the agent-server's runs, LangChain's tool,
    # pi's bashExecution: a command a person typed, so a user row)
    assert new["by_source"]["pi"]["messages_by_native_role"]["bashExecution"] == \
        old["by_source"]["pi"]["messages_by_role"]["bashExecution"] > 0
    assert new["by_source"]["codex"]["messages_by_native_role"]["reasoning"] == \
        old["by_source"]["codex"]["messages_by_role"]["reasoning"]
    assert new["by_source"]["agent-server"]["messages_by_native_role"]["run"] == \
        old["by_source"]["agent-server"]["messages_by_role"]["run"]
    assert new["by_source"]["mini-openclaw"]["messages_by_native_role"]["tool"] == \
        old["by_source"]["mini-openclaw"]["messages_by_role"]["tool"]
    # only Codex's usage pseudo-rows went, their usage now on their call's row
    gone = old["messages"] - new["messages"]
    assert gone == old["by_source"]["codex"]["messages_by_role"]["usage"] - \
        new["by_source"]["codex"]["calls_without_output"] > 0
    assert new["usage"] == old["usage"] and new["model_calls"] == old["model_calls"]


COLUMNS = ("role", "native_role", "is_context", "parent_message_uuid", "input_tokens", "output_tokens",
           "cache_read_tokens", "cache_write_tokens", "total_tokens", "cost_usd", "cost_source", "usage_counted",
           "usage_invalid", "call_key", "model", "provider", "raw_hash", "tool_call_id", "has_thinking")


def _messages(conn_rows) -> dict:
    out = {}
    for row in conn_rows:
        key, values = (row[0], row[1], row[2]), list(row[3:])
        i = COLUMNS.index("cost_usd")
        values[i] = None if values[i] is None else round(float(values[i]), 9)
        out[key] = tuple(values)
    return out


SELECT = (f"SELECT s.session_uuid, s.server, m.message_uuid, {', '.join('m.' + c for c in COLUMNS)} "
          "FROM messages m JOIN sessions s ON s.id = m.session_id")
SESSIONS = ("SELECT session_uuid, server, message_count, leaf_entry_id, input_tokens, output_tokens, "
            "cache_read_tokens, cache_write_tokens, total_tokens FROM sessions")


def _assert_same(upgraded: tuple, fresh: tuple) -> None:
    up, new = _messages(upgraded[0]), _messages(fresh[0])
    assert up.keys() == new.keys(), (len(up), len(new))
    differ = [k for k in new if up[k] != new[k]]
    assert not differ, [(k[2], [c for c, a, b in zip(COLUMNS, up[k], new[k]) if a != b]) for k in differ[:5]]
    assert sorted(upgraded[1]) == sorted(fresh[1])


def test_upgraded_archive_equals_a_fresh_import(work):
    upgraded = work["root"] / "upgraded.db"
    shutil.copy(work["old"], upgraded)
    assert {r for (r,) in q(upgraded, "SELECT DISTINCT role FROM messages")} - ROLES  # the old words are there
    from importer.store import open_store

    store = open_store(f"sqlite:///{upgraded}")  # the migration runs
    store.close()
    _assert_same((q(upgraded, SELECT), q(upgraded, SESSIONS)), (q(work["new"], SELECT), q(work["new"], SESSIONS)))
    # nothing lost: every entry is still there
    assert q(upgraded, "SELECT COUNT(*) FROM entries") == q(work["old"], "SELECT COUNT(*) FROM entries")
    # stats on the upgraded archive: the fresh import's
    from importer import stats

    store = open_store(f"sqlite:///{upgraded}")
    try:
        assert json.loads(json.dumps(stats.collect(store), default=str)) == work["new_stats"]
    finally:
        store.close()


def test_upgraded_mariadb_archive_equals_a_fresh_import(work, mariadb_url):
    _run(work["before"], mariadb_url, work["trees"])
    from importer.store import open_store

    store = open_store(mariadb_url)  # the migration runs, on MariaDB
    try:
        upgraded = (store.tuples(SELECT), store.tuples(SESSIONS))
    finally:
        store.close()
    _assert_same(upgraded, (q(work["new"], SELECT), q(work["new"], SESSIONS)))


def test_codex_usage_before_its_items_upgraded_as_imported(work, tmp_path):
    """Made-up rollouts with each place a usage read before its call's items can go: the next
    model-written row; an assistant row of its own when none follows in the request, or when the
    next row has a usage of its own. Main's archive upgraded = a fresh import, row for row."""
    import codex_fixtures as CF

    r = CF.Rollout()
    r.turn("one")
    r.tokens(900, 0, 40)  # before its items: on the reasoning row
    r.reasoning()
    c = r.call("exec_command", {"cmd": "ls"})
    r.output(c, "Exit code: 0\nOutput:\nfile\n")
    r.tokens(1000, 0, 10)  # before its items, and the next row gets its own: a row of its own
    r.assistant("done")
    r.tokens(300, 0, 20)
    r.turn("two")
    r.tokens(50, 0, 5)  # nothing of its call in the request: a row of its own
    r.turn("three")
    path = r.write_in(tmp_path / ".codex" / "sessions")
    trees = [[str(path), "synthetic"]]
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    old_stats, new_stats = _run(work["before"], f"sqlite:///{old}", trees), _run(REPO, f"sqlite:///{new}", trees)
    assert new_stats["usage"] == old_stats["usage"] and new_stats["model_calls"] == old_stats["model_calls"] == 4
    assert q(new, "SELECT native_role, total_tokens FROM messages WHERE call_key IS NOT NULL ORDER BY seq") == [
        ("reasoning", 940), ("token_count", 1010), ("assistant", 320), ("token_count", 55)]
    assert q(new, "SELECT DISTINCT role FROM messages WHERE call_key IS NOT NULL") == [("assistant",)]
    from importer.store import open_store

    open_store(f"sqlite:///{old}").close()
    _assert_same((q(old, SELECT), q(old, SESSIONS)), (q(new, SELECT), q(new, SESSIONS)))
    # the chain holds: every parent is a row or an entry of the session
    assert q(old, "SELECT COUNT(*) FROM messages m WHERE m.parent_message_uuid IS NOT NULL AND NOT EXISTS "
                  "(SELECT 1 FROM messages x WHERE x.message_uuid = m.parent_message_uuid) AND NOT EXISTS "
                  "(SELECT 1 FROM entries e WHERE e.entry_uuid = m.parent_message_uuid)") == [(0,)]


def test_openclaw_roles_outside_the_vocabulary_upgraded_as_imported(work, tmp_path):
    """A pi/OpenClaw transcript with the roles the vocabulary maps (a `!command`, a hook's custom
    message, a branch summary, a message without a role): system rows are context, the word kept;
    main's archive upgraded = a fresh import."""
    sid = "0f0e0d0c-0b0a-4909-8807-060504030201"
    lines = [{"type": "session", "version": 3, "id": sid, "timestamp": "2026-04-01T10:00:00.000Z", "cwd": "/w"}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
        {"role": "bashExecution", "command": "ls", "output": "a\n", "exitCode": 0},
        {"role": "custom", "customType": "hook", "content": "remember the style guide", "display": False},
        {"role": "branchSummary", "summary": "tried another way"},
        {"content": "a message without a role"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "look"}, {"type": "text", "text": "a"}],
         "provider": "anthropic", "model": "claude-x", "api": "anthropic-messages", "stopReason": "stop",
         "usage": {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 12,
                   "cost": {"total": 0.001}}},
    ]
    parent = None
    for i, m in enumerate(messages):
        eid = f"e{i:07d}"
        lines.append({"type": "message", "id": eid, "parentId": parent,
                      "timestamp": f"2026-04-01T10:00:0{i}.000Z", "message": {**m, "timestamp": 1775037600000 + i}})
        parent = eid
    folder = tmp_path / "pi" / "sessions" / "--w--"
    folder.mkdir(parents=True)
    path = folder / f"2026-04-01T10-00-00-000Z_{sid}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    trees = [[str(path), "synthetic", "pi"]]
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    old_stats, new_stats = _run(work["before"], f"sqlite:///{old}", trees), _run(REPO, f"sqlite:///{new}", trees)
    assert new_stats["usage"] == old_stats["usage"] and new_stats["messages"] == old_stats["messages"] == 6
    assert q(new, "SELECT role, native_role, is_context FROM messages ORDER BY seq") == [
        ("user", "user", 0), ("user", "bashExecution", 0), ("system", "custom", 1), ("system", "branchSummary", 1),
        ("system", None, 1), ("assistant", "assistant", 0)]
    from importer.store import open_store

    open_store(f"sqlite:///{old}").close()
    _assert_same((q(old, SELECT), q(old, SESSIONS)), (q(new, SELECT), q(new, SESSIONS)))
