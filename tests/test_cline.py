"""Cline (importer/sources/cline.py): the real task folder in ../shared/other-samples-2/cline, and
made-up task folders written here for the layouts and traps (docs/cline.md).

Expected figures are established independently of the importer: :func:`oracle` reads the sample's
JSON with the plain json module and counts what docs/cline.md's rules say (it shares no code with
the importer). The samples are real people's data: assertions compare counts, ids and booleans only,
never their text.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
from transcripts import do_import, dump, rows, scalar  # noqa: E402
from vocabulary_checks import assert_vocabulary  # noqa: E402

from importer.sources import Scope, discover  # noqa: E402
from importer.sources import cline as C  # noqa: E402
from importer.sources.base import Discovery  # noqa: E402
from importer.sources.fs import LOCAL  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT.parent / "shared" / "other-samples-2" / "cline"
KIND = "cline"
PROMPT_TAGS = ("<task>", "<feedback>", "<answer>", "<user_message>")


def samples() -> Path:
    if not SAMPLES.is_dir():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"Cline samples missing under CI: {SAMPLES}")
        pytest.skip(f"no Cline samples at {SAMPLES}")
    return SAMPLES


# -- an independent counter -------------------------------------------------------------------
# From docs/cline.md's rules only: a session is a folder holding api_conversation_history.json;
# a prompt is a user text block starting with <task>, <feedback>, <answer> or <user_message>; an
# assistant message is an item of role assistant; a tool call a distinct tool_use id; a shell call
# one of execute_command; tokens and cost are the api_req_started messages' of ui_messages.json.


def oracle(root: Path) -> dict:
    out = {"sessions": 0, "user": 0, "assistant": 0, "tool_calls": 0, "shell_calls": 0, "results": 0,
           "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "ui_prompts": 0}
    for history in sorted(root.glob("**/api_conversation_history.json")):
        out["sessions"] += 1
        items = json.loads(history.read_text("utf-8"))
        ids, shell = set(), set()
        for item in items:
            content = item["content"] if isinstance(item["content"], list) else [
                {"type": "text", "text": item["content"]}]
            if item["role"] == "assistant":
                out["assistant"] += 1
                for b in content:
                    if b.get("type") == "tool_use":
                        ids.add(b["id"])
                        if b["name"] == "execute_command":
                            shell.add(b["id"])
            else:
                for b in content:
                    text = b.get("text", "") if b.get("type") == "text" else ""
                    out["user"] += text.lstrip().startswith(PROMPT_TAGS)
                    out["results"] += b.get("type") == "tool_result" or (
                        text.startswith("[") and "] Result:" in text.split("\n", 1)[0])
        out["tool_calls"] += len(ids)
        out["shell_calls"] += len(shell)
        ui_path = history.parent / "ui_messages.json"
        ui = json.loads(ui_path.read_text("utf-8")) if ui_path.exists() else []
        for m in ui:
            if m.get("say") == "api_req_started":
                info = json.loads(m["text"])
                out["input"] += info.get("tokensIn") or 0
                out["output"] += info.get("tokensOut") or 0
                out["cacheRead"] += info.get("cacheReads") or 0
                out["cacheWrite"] += info.get("cacheWrites") or 0
                out["cost"] += info.get("cost") or 0
        # what the panel shows as typed: the task (its first message, before any request) and feedback
        out["ui_prompts"] += sum(1 for n, m in enumerate(ui) if m.get("say") in ("task", "user_feedback") or (
            n == 0 and m.get("say") == "text" and m.get("conversationHistoryIndex") == -1))
    return out


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("cline") / "a.db"
    report = do_import(db, samples(), server="samples")
    assert (report.files_seen, report.files_imported, report.files_failed) == (1, 1, 0), report.failures
    return db


def test_samples_counts_equal_the_oracle(archive):
    want = oracle(samples())
    assert want["user"] == want["ui_prompts"], "the two ways of counting prompts disagree"
    db = archive
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = 'cline'") == want["sessions"]
    by_role = dict(rows(db, "SELECT role, COUNT(*) FROM messages GROUP BY role"))
    assert by_role["user"] == want["user"]
    assert by_role["assistant"] == want["assistant"]  # each reply once (every request matched one)
    assert by_role["toolResult"] == want["results"]
    calls = scalar(db, "SELECT COUNT(*) FROM (SELECT DISTINCT session_id, call_id FROM tool_calls)")
    assert calls == want["tool_calls"]
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE command IS NOT NULL") == want["shell_calls"]
    got = rows(db, "SELECT SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), SUM(cache_write_tokens), "
                   "SUM(cost_usd) FROM messages WHERE usage_counted = 1")[0]
    assert got[:4] == (want["input"], want["output"], want["cacheRead"], want["cacheWrite"])
    assert got[4] == pytest.approx(want["cost"])
    # every model call's cost is the one Cline recorded; every call has a time of its own
    assert rows(db, "SELECT DISTINCT cost_source FROM messages WHERE role = 'assistant'") == [("recorded",)]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE timestamp IS NULL OR time_approximate = 1") == 0
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'assistant' AND has_thinking = 1") > 0
    # every tool result is paired with its call; the session knows its folder and version
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NOT NULL") == want["results"]
    assert rows(db, "SELECT agent_id, cwd IS NOT NULL, project IS NOT NULL, agent_version IS NOT NULL, title FROM sessions") \
        == [("cline", 1, 1, 1, None)]


def test_samples_stats_json_by_source(archive):
    want = oracle(samples())
    proc = ic.run_cli(["stats", "--json", "--db", f"sqlite:///{archive}"])
    assert proc.returncode == 0, ic.describe(proc, "stats --json")
    mine = json.loads(proc.stdout)["by_source"][KIND]
    assert (mine["sessions"], mine["tool_calls"], mine["shell_calls"], mine["model_calls"]) == (
        want["sessions"], want["tool_calls"], want["shell_calls"], want["assistant"])
    assert mine["messages_by_role"]["user"] == want["user"]
    assert mine["messages_by_role"]["assistant"] == want["assistant"]
    usage = mine["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]) == (
        want["input"], want["output"], want["cacheRead"], want["cacheWrite"])
    assert usage["totalTokens"] == want["input"] + want["output"] + want["cacheRead"] + want["cacheWrite"]
    assert usage["cost_total"] == pytest.approx(want["cost"])


def test_samples_speak_the_vocabulary(archive):
    assert_vocabulary(archive, KIND, usage=True, shell_exit_codes=False, tool_results=True)


def test_samples_render_in_the_conversation_view(archive, tmp_path):
    from importer.snapshot import export_snapshot
    from test_explorer import Site

    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    site = Site(tmp_path / "snapshot.db")
    (sid,) = [r[0] for r in rows(tmp_path / "snapshot.db", "SELECT id FROM sessions")]
    page = site.get(f"/-/agentbase/session/{sid}")
    assert page.status_code == 200 and "ab-turn-assistant" in page.text


def test_a_grown_copy_adds_only_the_new_messages(tmp_path):
    task = tmp_path / "tasks" / "1769053680585"
    shutil.copytree(next(samples().glob("*/*")), task)
    for p in task.iterdir():
        p.chmod(0o644)
    db = tmp_path / "a.db"
    first = do_import(db, tmp_path / "tasks")
    before = set(rows(db, "SELECT message_uuid, raw_hash, usage_counted FROM messages"))
    history = json.loads((task / C.HISTORY).read_text("utf-8"))
    ui = json.loads((task / C.UI).read_text("utf-8"))
    n = len(history)
    history.append({"role": "user", "content": [
        {"type": "text", "text": "<feedback>\nmade-up follow-up\n</feedback>"},
        {"type": "text", "text": "<environment_details>\nx\n</environment_details>"}]})
    history.append({"role": "assistant", "content": [{"type": "text", "text": "made-up reply"}],
                    "modelInfo": {"modelId": "claude-test", "providerId": "anthropic"}})
    ts = ui[-1]["ts"] + 1000
    ui.append({"ts": ts, "type": "say", "say": "user_feedback", "text": "made-up follow-up",
               "conversationHistoryIndex": n - 1})
    ui.append({"ts": ts + 1, "type": "say", "say": "api_req_started", "conversationHistoryIndex": n - 1,
               "text": json.dumps({"request": "x", "tokensIn": 7, "tokensOut": 5, "cacheReads": 3, "cacheWrites": 2,
                                   "cost": 0.5})})
    (task / C.HISTORY).write_text(json.dumps(history))
    (task / C.UI).write_text(json.dumps(ui))
    second = do_import(db, tmp_path / "tasks")
    assert (second.files_imported, second.messages_added) == (1, 3)  # the prompt, its context, the reply
    after = set(rows(db, "SELECT message_uuid, raw_hash, usage_counted FROM messages"))
    assert before <= after and len(after - before) == 3
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 0
    assert rows(db, "SELECT role, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, "
                    "timestamp IS NOT NULL FROM messages WHERE message_uuid = ?", (str(n + 1),)) == [
        ("assistant", 7, 5, 3, 2, 0.5, 1)]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'user'") == 2
    third = do_import(db, tmp_path / "tasks")
    assert (third.files_imported, third.files_unchanged, third.bytes_read) == (0, 1, 0)
    assert first.files_imported == 1


# -- made-up task folders ---------------------------------------------------------------------

T0 = 1770000000000


def task(folder: Path, history: list, ui: list | None = None, metadata: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / C.HISTORY).write_text(json.dumps(history))
    if ui is not None:
        (folder / C.UI).write_text(json.dumps(ui))
    if metadata is not None:
        (folder / C.METADATA).write_text(json.dumps(metadata))
    return folder


def conversation(command: str = "ls -la") -> tuple[list, list]:
    """A task: a prompt, a shell call, its result, a final reply; the UI log's two requests."""
    history = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nlist the files\n</task>"},
                                     {"type": "text", "text": "<environment_details>\n# Current Working Directory "
                                                              "(/home/dev/proj) Files\n</environment_details>"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "use the shell", "signature": "c2ln"},
                                          {"type": "tool_use", "id": "toolu_1", "name": "execute_command",
                                           "input": {"command": command, "requires_approval": False}}],
         "modelInfo": {"modelId": "claude-test", "providerId": "anthropic", "mode": "act"},
         "metrics": {"tokens": {"prompt": 10, "completion": 20, "cached": 30}}},
        {"role": "user", "content": [{"type": "text", "text": f"[execute_command for '{command}'] Result:\n"
                                                              "Command executed.\nOutput:\na b"},
                                     {"type": "text", "text": "<environment_details>\n</environment_details>"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Two files."}],
         "modelInfo": {"modelId": "claude-test", "providerId": "anthropic", "mode": "act"},
         "metrics": {"tokens": {"prompt": 1, "completion": 2, "cached": 3}}},
    ]
    ui = [
        {"ts": T0 + 10, "type": "say", "say": "text", "text": "list the files", "conversationHistoryIndex": -1},
        {"ts": T0 + 20, "type": "say", "say": "api_req_started", "conversationHistoryIndex": -1,
         "text": json.dumps({"request": "r", "tokensIn": 10, "tokensOut": 20, "cacheWrites": 30, "cacheReads": 0,
                             "cost": 0.25})},
        {"ts": T0 + 30, "type": "say", "say": "reasoning", "text": "", "conversationHistoryIndex": 0},
        {"ts": T0 + 40, "type": "say", "say": "command", "text": command, "conversationHistoryIndex": 0},
        {"ts": T0 + 50, "type": "say", "say": "api_req_started", "conversationHistoryIndex": 1,
         "text": json.dumps({"request": "r", "tokensIn": 1, "tokensOut": 2, "cacheWrites": 0, "cacheReads": 3,
                             "cost": 0.125})},
        {"ts": T0 + 60, "type": "say", "say": "text", "text": "Two files.", "conversationHistoryIndex": 2},
    ]
    return history, ui


def test_a_made_up_task_maps_to_the_vocabulary(tmp_path):
    history, ui = conversation()
    task(tmp_path / "saoudrizwan.claude-dev" / "tasks" / str(T0), history, ui,
                  {"model_usage": [{"ts": T0, "model_id": "claude-test"}],
                   "environment_history": [{"cline_version": "3.51.0"}], "files_in_context": [{"path": "a"}]})
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "saoudrizwan.claude-dev")
    assert report.files_imported == 1, report.failures
    assert rows(db, "SELECT message_uuid, role, native_role, timestamp FROM messages ORDER BY seq, message_uuid") == [
        ("0:0", "user", "user", "2026-02-02 02:40:00.020"),
        ("0:1", "system", "user", "2026-02-02 02:40:00.020"),
        ("1", "assistant", "assistant", "2026-02-02 02:40:00.030"),
        ("2:0", "toolResult", "user", "2026-02-02 02:40:00.050"),
        ("2:1", "system", "user", "2026-02-02 02:40:00.050"),
        ("3", "assistant", "assistant", "2026-02-02 02:40:00.060")]
    assert rows(db, "SELECT tool_name, command, result_message_id IS NOT NULL FROM tool_calls") == [
        ("execute_command", "ls -la", 1)]
    assert rows(db, "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_usd, "
                    "cost_source, model, provider FROM messages WHERE role = 'assistant' ORDER BY seq") == [
        (10, 20, 0, 30, 60, 0.25, "recorded", "claude-test", "anthropic"),
        (1, 2, 3, 0, 6, 0.125, "recorded", "claude-test", "anthropic")]
    assert rows(db, "SELECT session_uuid, agent_id, cwd, project, agent_version, started_at FROM sessions") == [
        (str(T0), "cline", "/home/dev/proj", "proj", "3.51.0", "2026-02-02 02:40:00.000")]
    assert json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE message_uuid = '1'"))[0] == {
        "type": "thinking", "thinking": "use the shell", "thinkingSignature": "c2ln"}
    assert_vocabulary(db, KIND, usage=True, shell_exit_codes=False, tool_results=True)


def test_without_the_ui_log_usage_comes_from_the_metrics_and_times_are_approximate(tmp_path):
    history, _ui = conversation()
    task(tmp_path / "tasks" / str(T0), history)
    db = tmp_path / "a.db"
    assert do_import(db, tmp_path / "tasks").files_imported == 1
    assert rows(db, "SELECT input_tokens, output_tokens, cache_read_tokens, cost_usd, cost_source FROM messages "
                    "WHERE role = 'assistant' ORDER BY seq") == [(10, 20, 30, None, "unpriced"),
                                                                 (1, 2, 3, None, "unpriced")]
    assert scalar(db, "SELECT MIN(time_approximate) FROM messages") == 1
    assert rows(db, "SELECT times_approximate, started_at FROM sessions") == [(1, "2026-02-02 02:40:00.000")]


def test_a_request_without_its_reply_keeps_its_usage_once(tmp_path):
    history, ui = conversation()
    folder = task(tmp_path / "tasks" / str(T0), history[:3], ui[:5])  # the second reply not written yet
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "tasks")
    assert rows(db, "SELECT native_role, content_blocks, output_tokens FROM messages WHERE seq = 3") == [
        ("api_req_started", None, 2)]
    task(folder, history, ui)
    do_import(db, tmp_path / "tasks")
    # the reply arrived: its usage is the request's, counted once
    assert rows(db, "SELECT native_role, usage_counted FROM messages WHERE role = 'assistant' AND output_tokens = 2 "
                    "ORDER BY native_role") == [("api_req_started", 1), ("assistant", 0)]
    assert scalar(db, "SELECT SUM(output_tokens) FROM messages WHERE usage_counted = 1") == 22


def test_a_truncated_history_fails_clearly_and_is_read_once_complete(tmp_path):
    history, ui = conversation()
    folder = task(tmp_path / "tasks" / str(T0), history, ui)
    whole = (folder / C.HISTORY).read_bytes()
    (folder / C.HISTORY).write_bytes(whole[: len(whole) // 2])
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "tasks")
    assert report.files_failed == 1
    (message,) = [r[0] for r in rows(db, "SELECT error_message FROM parsed_files WHERE status = 'failed'")]
    assert "half-written" in message and "\n" not in message and "list the files" not in message
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 0
    (folder / C.HISTORY).write_bytes(whole)
    again = do_import(db, tmp_path / "tasks")
    assert (again.files_imported, again.files_failed, again.messages_added) == (1, 0, 6)


def test_an_unknown_history_item_is_kept_as_an_entry(tmp_path):
    history, ui = conversation()
    history.insert(1, {"role": "developer", "content": [{"type": "text", "text": "made-up"}]})
    task(tmp_path / "tasks" / str(T0), history)
    db = tmp_path / "a.db"
    assert do_import(db, tmp_path / "tasks").files_imported == 1
    assert rows(db, "SELECT entry_uuid, entry_type, custom_type FROM entries") == [
        ("1:x", "history-item.developer", "unknown")]  # a role the kind does not know: marked (docs/sources.md)
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 6


def test_other_files_are_not_claimed(tmp_path):
    # an api_conversation_history.json that is no message list, named directly: a clear "not a Cline task"
    other = tmp_path / "x" / C.HISTORY
    other.parent.mkdir()
    other.write_text(json.dumps({"messages": []}))
    db = tmp_path / "a.db"
    report = do_import(db, other)
    assert (report.files_imported, report.files_ignored) == (0, 1)
    assert "not a Cline task" in scalar(db, "SELECT error_message FROM parsed_files")
    # a folder of other JSON files (no api_conversation_history.json) is no Cline layout
    (tmp_path / "y" / "sub").mkdir(parents=True)
    (tmp_path / "y" / "sub" / "ui_messages.json").write_text("[]")
    out = Discovery()
    assert C.SOURCE.find(LOCAL, str(tmp_path / "y"), Scope("s"), out) is False and out.units == []
    assert not C.SOURCE.claims_file("session.json", b'[{"role": "user"}]')
    assert C.SOURCE.claims_file(C.HISTORY, b"{}")


def test_roo_code_and_the_default_places(tmp_path):
    history, ui = conversation()
    storage = tmp_path / "globalStorage"
    task(storage / C.CLINE_EXTENSION / "tasks" / str(T0), history, ui)
    task(storage / C.ROO_EXTENSION / "tasks" / str(T0 + 1), history, ui)
    found = discover([str(storage)], server="s")
    assert sorted((u.agent_id, u.key.split("/")[-2]) for u in found.units) == [
        ("cline", str(T0)), ("roo-code", str(T0 + 1))]
    assert "~/.config/Code/User/globalStorage/saoudrizwan.claude-dev" in C.SOURCE.candidates()
    assert "~/Library/Application Support/Code/User/globalStorage/saoudrizwan.claude-dev" in C.SOURCE.candidates()
    # --agent names the agent
    found = discover([str(storage / C.ROO_EXTENSION)], server="s", agent="mine")
    assert [u.agent_id for u in found.units] == ["mine"]


# -- over SSH ---------------------------------------------------------------------------------


def test_samples_over_ssh_equal_a_local_import(tmp_path):
    import yaml
    from sshd import SSHServer, require_sshd

    from importer.config import load_config
    from importer.sync import import_from_config

    root = samples()
    require_sshd()
    server = SSHServer(tmp_path / "sshd").start()
    try:
        known = tmp_path / "known_hosts"
        server.write_known_hosts(known)
        config = {"database": f"sqlite:///{tmp_path / 'ssh.db'}", "known_hosts": str(known),
                  "ssh_config": str(tmp_path / "no-ssh-config"), "connect_timeout": 5, "read_timeout": 30,
                  "servers": [{"name": "remote", "host": "127.0.0.1", "port": server.port, "user": server.user,
                               "identity_file": str(server.user_key), "paths": [str(root)]}]}
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
    do_import(local, root, server="remote")
    got, want = dump(tmp_path / "ssh.db"), dump(local)
    assert got["messages"] and got == want
    assert sqlite3.connect(tmp_path / "ssh.db").execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 1


def test_roo_code_tool_result_blocks_and_message_times(tmp_path):
    history = [
        {"role": "user", "ts": T0 + 1, "content": [
            {"type": "text", "text": "<task>\nshow the date\n</task>"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
        {"role": "assistant", "ts": T0 + 2, "content": [
            {"type": "tool_use", "id": "call_1", "name": "execute_command", "input": {"command": "date"}}]},
        {"role": "user", "ts": T0 + 3, "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "is_error": True, "content": [
                {"type": "text", "text": "Command failed"}]},
            {"type": "text", "text": "<environment_details>\n</environment_details>"}]},
    ]
    task(tmp_path / C.ROO_EXTENSION / "tasks" / "roo-task", history)
    db = tmp_path / "a.db"
    assert do_import(db, tmp_path / C.ROO_EXTENSION).files_imported == 1
    assert rows(db, "SELECT message_uuid, role, timestamp, time_approximate, tool_call_id, is_error FROM messages "
                    "ORDER BY seq, message_uuid") == [
        ("0:0", "user", "2026-02-02 02:40:00.001", 0, None, 0),
        ("1", "assistant", "2026-02-02 02:40:00.002", 0, None, 0),
        ("2:0", "toolResult", "2026-02-02 02:40:00.003", 0, "call_1", 1),
        ("2:1", "system", "2026-02-02 02:40:00.003", 0, None, 0)]
    assert [b["type"] for b in json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE message_uuid = '0:0'"))] \
        == ["text", "image"]
    assert rows(db, "SELECT agent_id, session_uuid, started_at, times_approximate FROM sessions") == [
        ("roo-code", "roo-task", "2026-02-02 02:40:00.001", None)]
    assert rows(db, "SELECT command, is_error, result_message_id IS NOT NULL FROM tool_calls") == [("date", 1, 1)]


def test_doctor_lists_the_versions_the_samples_hold(tmp_path):
    import doctor_check as dc

    # the oracle: each task's task_metadata.json, its last environment's cline_version
    want = set()
    for meta in samples().rglob(C.METADATA):
        envs = json.loads(meta.read_text()).get("environment_history") or []
        if envs and isinstance(envs[-1].get("cline_version"), str):
            want.add(envs[-1]["cline_version"])
    assert want
    db = tmp_path / "a.db"
    assert do_import(db, samples(), server="samples").files_failed == 0
    assert dc.doctor_versions(tmp_path / "home", KIND, db) == want
