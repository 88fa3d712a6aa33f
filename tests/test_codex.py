"""Codex CLI rollouts (importer/sources/codex.py, docs/codex.md).

The real rollouts in ../shared/other-samples/codex (SOURCES.md) are read where they are: required
under CI=true, skipped with a message otherwise. They hold real people's text: assertions show
counts and ids only. Their figures are established independently of the importer, twice:

- ``count_rollout`` below, written from the counting rules with the plain json module, sharing no
  code with the importer;
- the constants in ``EXACT``, established by hand with jq before the importer read the files, e.g.
  ``jq -s '[.[] | (.payload // .) | select(.type=="message") | .role] | group_by(.)'`` for messages
  by role, ``... select(.type=="function_call" or .type=="custom_tool_call" or
  .type=="local_shell_call") | .call_id] | unique | length`` for tool calls (names shell,
  shell_command, exec_command for shell calls), the token_count totals folded with
  ``reduce .[] as $t ({prev:null,n:0}; if $t == .prev then . else {prev:$t,n:(.n+1)} end)`` for
  model calls, and the last ``total_token_usage`` for the usage sums (input = input_tokens -
  cached_input_tokens). The context and usage-row counts were read off the line sequence.

Everything else runs on made-up rollouts (tests/codex_fixtures.py).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import codex_fixtures as F  # noqa: E402
import importer_check as ic  # noqa: E402
from transcripts import conversation as oc_conversation  # noqa: E402
from transcripts import do_import, dump, rows, scalar, sessions_dir, write  # noqa: E402

from importer import prices  # noqa: E402
from importer.sources import Discovery, Scope, all_sources, discover  # noqa: E402
from importer.sources import codex as C  # noqa: E402
from importer.sources.fs import FileSystem  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT.parent / "shared" / "other-samples" / "codex"
# Where each sample's rollouts are: a per-server folder holding .codex/, or the sessions/ folder.
SAMPLE_PATHS = {
    "EdofEngland__code_butler": "EdofEngland__code_butler",
    "JaydenXsoe__ocodex": "JaydenXsoe__ocodex",
    "Python-AI-Solutions__agentic-neurodata-conversion": "Python-AI-Solutions__agentic-neurodata-conversion",
    "madshn__localpush": "madshn__localpush/src-tauri/tests/fixtures/codex/2026-02-23/raw/sessions",
    "ryoppippi__ccusage": "ryoppippi__ccusage/apps/ccusage/test/fixtures/codex/sessions",
}
BIG = "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"  # the 1 MB localpush rollout


def _u(inp, out, cache_read, total):
    return {"input": inp, "output": out, "cacheRead": cache_read, "cacheWrite": 0, "totalTokens": total}


# Per rollout (session id): established by hand with jq (see the module docstring).
EXACT = {
    "019ab737-4612-7f91-bf54-c6a3b3870ee6": {  # EdofEngland, 0.63: shell_command, token_count before items
        "roles": {"user": 1, "system": 2, "assistant": 6, "toolResult": 2},
        "context": 2, "model_calls": 3, "tool_calls": 2, "shell_calls": 2, "exit_codes": 2,
        "usage": _u(1850, 560, 10368, 12778), "sum_last_token_usage": 21002},
    "ddb14791-ff64-4389-ad02-b847be462b33": {  # ocodex, old format, one message
        "roles": {"system": 1}, "context": 1, "model_calls": 0, "tool_calls": 0, "shell_calls": 0, "exit_codes": 0,
        "usage": _u(0, 0, 0, 0), "sum_last_token_usage": 0},
    "18a59085-ee11-4ef3-b460-f942642861b3": {  # ocodex, old format, shell + MCP calls, raw reasoning
        "roles": {"user": 1, "system": 2, "assistant": 7, "toolResult": 3},
        "context": 2, "model_calls": 0, "tool_calls": 3, "shell_calls": 1, "exit_codes": 1,
        "usage": _u(0, 0, 0, 0), "sum_last_token_usage": 0},
    "01999467-65bf-7281-8ab6-73bb53989041": {  # 0.41, first token_count info null, one repeat
        "roles": {"user": 2, "system": 1, "assistant": 4},
        "context": 1, "model_calls": 2, "tool_calls": 0, "shell_calls": 0, "exit_codes": 0,
        "usage": _u(1511, 128, 3840, 5479), "sum_last_token_usage": 8221},
    BIG: {  # 0.104 sanitized, 1 MB: 573 token_count, 286 repeats, compaction, apply_patch
        "roles": {"user": 46, "system": 45, "assistant": 839, "toolResult": 365},
        "context": 45, "model_calls": 286, "tool_calls": 365, "shell_calls": 212, "exit_codes": 0,
        "usage": _u(2188981, 133999, 31621504, 33944484), "sum_last_token_usage": 69395466},
    "019c8bfe-ec25-79e0-97d7-bda6a9c575ff": {  # 0.104 sanitized: 12 token_count, 5 repeats
        "roles": {"user": 3, "system": 4, "assistant": 17, "toolResult": 5},
        "context": 4, "model_calls": 6, "tool_calls": 5, "shell_calls": 0, "exit_codes": 0,
        "usage": _u(59525, 1123, 238848, 299496), "sum_last_token_usage": 535265},
    "session-alpha": {  # ccusage's synthetic fixture: a turn_context and two token_count, no session_meta
        "roles": {"assistant": 2}, "context": 0, "model_calls": 2, "tool_calls": 0, "shell_calls": 0, "exit_codes": 0,
        "usage": _u(2750, 425, 750, 4200), "sum_last_token_usage": 4200},
}


# ---------------------------------------------------------------------------
# The independent counter: the counting rules, with json only


_UUID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")
_SHELL = {"shell", "shell_command", "exec_command"}
_WRAPPERS = ("<environment_context", "<user_instructions", "<INSTRUCTIONS", "# AGENTS.md instructions",
             "<permissions instructions", "<collaboration_mode", "<skill", "<user_shell_command", "<turn_aborted",
             "<subagent_notification")


def count_rollout(path: Path) -> tuple[str, dict]:
    """(session id, figures) of one rollout by the rules (docs/vocabulary.md): every response_item
    message a row (developer ones and the wrapper user ones system, context), reasoning, calls and
    outputs rows of their own (assistant, assistant, toolResult); a model call a token_count whose
    total differs from the one before (info null skipped), its usage on the last model-written row
    since the last input, turn start or model call, else on the next model-written row before the
    next of those (unless that row's own token_count follows), else on an assistant row of its own;
    tool calls distinct call ids."""
    objs = [json.loads(raw) for raw in path.read_bytes().split(b"\n") if raw.strip()]
    first = objs[0]
    wrapped = True
    if first.get("type") == "session_meta":
        sid, body = first["payload"]["id"], objs[1:]
    elif "type" not in first and "record_type" not in first and "id" in first:
        sid, body, wrapped = first["id"], objs[1:], False
    else:
        m = _UUID.search(path.name)
        sid, body = (m.group(1) if m else path.name[: -len(".jsonl")]), objs
    roles, context, calls = Counter(), 0, {}
    model_calls, written, pending, claim_only = 0, 0, False, False
    prev, sums, last_sum = None, [0, 0, 0, 0], 0
    for obj in body:
        kind, p = (obj.get("type"), obj.get("payload") or {}) if wrapped else (
            ("response_item", obj) if "type" in obj else ("state", obj))
        pt = p.get("type")

        def model_wrote():
            nonlocal written, pending, claim_only
            if pending:  # the usage read before it is this row's (unless the row gets one of its own)
                pending, written, claim_only = False, 1, True
            else:
                written, claim_only = written + 1, False

        def request_over():
            nonlocal written, pending, claim_only
            if pending:  # a call with no row of its own: an assistant row carries it
                roles["assistant"] += 1
                pending = False
            written, claim_only = 0, False

        if kind == "response_item":
            if pt == "message":
                texts = [c.get("text", "") for c in p.get("content") or []
                         if c.get("type") in ("input_text", "output_text")]
                if p["role"] == "developer" or (
                        p["role"] == "user" and texts and all(t.lstrip().startswith(_WRAPPERS) for t in texts)):
                    context += 1
                    roles["system"] += 1
                else:
                    roles[p["role"]] += 1
                if p["role"] == "assistant":
                    model_wrote()
                else:
                    request_over()
            elif pt == "reasoning":
                roles["assistant"] += 1
                model_wrote()
            elif pt in ("function_call", "custom_tool_call", "local_shell_call"):
                roles["assistant"] += 1
                model_wrote()
                calls.setdefault(p.get("call_id"), "local_shell" if pt == "local_shell_call" else p.get("name"))
            elif pt.endswith("_output"):
                roles["toolResult"] += 1
                request_over()
        elif kind in ("turn_context", "compacted") or (
                kind == "event_msg" and pt in ("task_started", "task_complete", "turn_aborted", "user_message")):
            request_over()
        elif kind == "event_msg" and pt == "token_count" and p.get("info"):
            t = p["info"]["total_token_usage"]
            total = [t["input_tokens"], t["cached_input_tokens"], t["output_tokens"], t["total_tokens"]]
            last_sum += p["info"]["last_token_usage"]["total_tokens"]
            if total != prev:
                model_calls += 1
                base = prev or [0, 0, 0, 0]
                sums = [s + a - b for s, a, b in zip(sums, total, base)]
                prev = total
                if written == 0:
                    request_over()
                    pending = True
                elif claim_only:  # the row's own usage: the earlier call keeps an assistant row
                    roles["assistant"] += 1
                written, claim_only = 0, False
    request_over()
    last = prev or [0, 0, 0, 0]
    assert sums == last, f"{sid}: the deltas add up to the last total"
    return sid, {
        "roles": dict(roles), "context": context, "model_calls": model_calls, "tool_calls": len(calls),
        "shell_calls": sum(1 for n in calls.values() if n in _SHELL or n == "local_shell"),
        "usage": _u(last[0] - last[1], last[2], last[1], last[3]), "sum_last_token_usage": last_sum,
    }


# ---------------------------------------------------------------------------
# Reading the store back


def figures(db: Path, sid: str) -> dict:
    roles = dict(rows(db, "SELECT role, COUNT(*) FROM messages WHERE session_uuid = ? GROUP BY role", (sid,)))
    context = scalar(db, "SELECT COALESCE(SUM(is_context), 0) FROM messages WHERE session_uuid = ?", (sid,))
    calls = scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND call_key IS NOT NULL "
                       "AND usage_counted = 1 AND is_synthetic = 0", (sid,))
    tools = rows(db, "SELECT tool_name, exit_code FROM tool_calls WHERE session_uuid = ?", (sid,))
    sums = ", ".join(f"COALESCE(SUM({c} * usage_counted), 0)" for c in (
        "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens"))
    usage = rows(db, f"SELECT {sums} FROM messages WHERE session_uuid = ?", (sid,))[0]
    return {
        "roles": roles, "context": context, "model_calls": calls, "tool_calls": len(tools),
        "shell_calls": sum(1 for name, _ in tools if name in C.SHELL_TOOLS),
        "exit_codes": sum(1 for _, code in tools if code is not None),
        "usage": dict(zip(("input", "output", "cacheRead", "cacheWrite", "totalTokens"), usage)),
    }


def session_usage(db: Path, sid: str) -> dict:
    r = rows(db, "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens "
                 "FROM sessions WHERE session_uuid = ?", (sid,))[0]
    return dict(zip(("input", "output", "cacheRead", "cacheWrite", "totalTokens"), (v or 0 for v in r)))


def call_totals(db: Path) -> list[int]:
    return [t for (t,) in rows(db, "SELECT total_tokens FROM messages WHERE call_key IS NOT NULL ORDER BY seq")]


def imp(db: Path, *paths, server: str = "test", agent: str | None = None):
    report = do_import(db, *paths, server=server, agent=agent)
    assert report.files_failed == 0, report.failures
    return report


# ---------------------------------------------------------------------------
# The real samples


@pytest.fixture(scope="module")
def samples():
    if not SAMPLES.is_dir():
        message = (f"Codex sample rollouts not found at {SAMPLES} "
                   "(expected ../shared/other-samples/codex beside the repository)")
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message + "; they are required when CI=true")
        pytest.skip(message)
    return SAMPLES


def sample_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.jsonl"))


@pytest.fixture(scope="module")
def imported(samples, tmp_path_factory):
    """Every sample imported by the CLI, one server per sample folder."""
    tmp = tmp_path_factory.mktemp("codex")
    url = f"sqlite:///{tmp}/a.db"
    for server, rel in SAMPLE_PATHS.items():
        proc = ic.run_cli(["import", samples / rel, "--server", server, "--db", url, "--json-summary"])
        assert proc.returncode == 0, ic.describe(proc, f"import {server}")
        summary = json.loads(proc.stdout)
        assert summary["files_failed"] == 0 and summary["files_ignored"] == 0 and summary["bad_lines"] == 0
    return tmp / "a.db"


def test_samples_exact_figures(samples, imported):
    files = sample_files(samples)
    assert len(files) == len(EXACT) == 7
    assert scalar(imported, "SELECT COUNT(*) FROM sessions WHERE source = 'codex'") == 7
    for path in files:
        sid, independent = count_rollout(path)
        expected = {k: v for k, v in EXACT[sid].items() if k != "exit_codes"}
        assert independent == expected, f"{sid}: the independent counter disagrees with the jq figures"
        got = figures(imported, sid)
        assert got == {**{k: v for k, v in expected.items() if k != "sum_last_token_usage"},
                       "exit_codes": EXACT[sid]["exit_codes"]}, sid
        assert session_usage(imported, sid) == expected["usage"], sid
    # every session where its folder is, agent codex
    assert rows(imported, "SELECT DISTINCT agent_id FROM sessions") == [("codex",)]
    assert scalar(imported, "SELECT COUNT(*) FROM sessions WHERE server = 'JaydenXsoe__ocodex'") == 2


def test_usage_is_the_last_total_not_the_sum_of_last_token_usage(samples, imported):
    """FORMAT-OTHERS.md: summing last_token_usage over the 1 MB sample gives 69.4 M tokens, about
    twice its final total of 33.9 M (286 of its 573 token_count repeat the total before)."""
    path = next(p for p in sample_files(samples) if BIG in p.name)
    totals = [json.loads(raw)["payload"]["info"] for raw in path.read_bytes().split(b"\n")
              if b'"token_count"' in raw]
    totals = [t for t in totals if t]
    last = totals[-1]["total_token_usage"]
    assert last["total_tokens"] == 33_944_484
    assert sum(t["last_token_usage"]["total_tokens"] for t in totals) == 69_395_466
    assert session_usage(imported, BIG)["totalTokens"] == last["total_tokens"]
    assert session_usage(imported, BIG)["input"] == last["input_tokens"] - last["cached_input_tokens"]
    repeats = sum(1 for a, b in zip(totals, totals[1:]) if a["total_token_usage"] == b["total_token_usage"])
    assert (len(totals), repeats) == (572, 286)  # 573 token_count, one with info null
    assert scalar(imported, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND call_key IS NOT NULL",
                  (BIG,)) == 286


def test_stats_json_by_source(imported):
    proc = ic.run_cli(["stats", "--db", f"sqlite:///{imported}", "--json"])
    assert proc.returncode == 0, ic.describe(proc, "stats")
    codex = json.loads(proc.stdout)["by_source"]["codex"]
    roles = Counter()
    for e in EXACT.values():
        roles.update(e["roles"])
    assert codex["sessions"] == 7 and codex["messages"] == sum(roles.values())
    assert codex["messages_by_role"] == dict(roles)
    assert codex["model_calls"] == sum(e["model_calls"] for e in EXACT.values()) == 299
    assert codex["tool_calls"] == sum(e["tool_calls"] for e in EXACT.values()) == 375
    assert codex["shell_calls"] == sum(e["shell_calls"] for e in EXACT.values()) == 215
    for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
        assert codex["usage"][key] == sum(e["usage"][key] for e in EXACT.values()), key
    assert codex["unpriced_calls"] == 0 and codex["usage"]["cost_total"] > 0
    # one model call (session-alpha's two) kept as its usage alone; reasoning rows are Codex's own word
    assert codex["calls_without_output"] == 2 and codex["replayed_entries"] == 0
    assert codex["messages_with_thinking"] == codex["messages_by_native_role"]["reasoning"] == 233


def test_sample_costs_are_computed_from_the_price_table(imported):
    """Codex records no cost: every call is priced from the table (cost_source computed). One
    call of the 1 MB sample by hand: gpt-5.3-codex at $1.75 per M input, $0.175 per M cached input
    and $14 per M output (the packaged table)."""
    assert rows(imported, "SELECT DISTINCT cost_source FROM messages WHERE call_key IS NOT NULL") == [("computed",)]
    assert scalar(imported, "SELECT COUNT(*) FROM messages WHERE call_key IS NOT NULL AND cost_usd IS NULL") == 0
    price = prices.current().lookup("gpt-5.3-codex")
    assert (price.entry["input_cost_per_token"], price.entry["cache_read_input_token_cost"],
            price.entry["output_cost_per_token"]) == (1.75e-06, 1.75e-07, 1.4e-05)
    inp, out, read, cost = rows(imported, "SELECT input_tokens, output_tokens, cache_read_tokens, cost_usd "
                                          "FROM messages WHERE session_uuid = ? AND call_key IS NOT NULL "
                                          "ORDER BY seq LIMIT 1", (BIG,))[0]
    assert cost == pytest.approx(inp * 1.75e-06 + read * 1.75e-07 + out * 1.4e-05, rel=1e-9)
    total = scalar(imported, "SELECT cost_usd FROM sessions WHERE session_uuid = ?", (BIG,))
    assert total == pytest.approx(2188981 * 1.75e-06 + 31621504 * 1.75e-07 + 133999 * 1.4e-05, rel=1e-6)


def test_sample_formats_and_fields(samples, imported):
    # the old format: header id, times of the session's (approximate), exit code from shell's JSON
    old = "18a59085-ee11-4ef3-b460-f942642861b3"
    assert scalar(imported, "SELECT times_approximate FROM sessions WHERE session_uuid = ?", (old,)) == 1
    assert scalar(imported, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND time_approximate = 0",
                  (old,)) == 0
    assert rows(imported, "SELECT tool_name, exit_code FROM tool_calls WHERE session_uuid = ? "
                          "AND exit_code IS NOT NULL", (old,)) == [("shell", 0)]
    assert scalar(imported, "SELECT COUNT(*) FROM entries WHERE session_uuid = ? AND entry_type = 'state'",
                  (old,)) == 10
    # 0.63: shell_command's "Exit code: N"; the project is the cwd's last folder
    butler = "019ab737-4612-7f91-bf54-c6a3b3870ee6"
    assert rows(imported, "SELECT project, model, model_provider FROM sessions WHERE session_uuid = ?", (butler,)) == [
        ("code_butler", "gpt-5.1-codex-max", "openai")]
    cwd_ok = scalar(imported, "SELECT cwd FROM sessions WHERE session_uuid = ?", (butler,)).endswith("/code_butler")
    assert cwd_ok, "the session's cwd (not shown: a real path)"
    # the 1 MB sample: compaction and web search kept as entries, apply_patch with its input
    assert rows(imported, "SELECT entry_type, custom_type, COUNT(*) FROM entries WHERE session_uuid = ? AND "
                          "(entry_type = 'compacted' OR custom_type IN ('web_search_call', 'context_compacted')) "
                          "GROUP BY 1, 2 ORDER BY 1, 2", (BIG,)) == [
        ("compacted", None, 1), ("event_msg", "context_compacted", 1), ("response_item", "web_search_call", 7)]
    args = rows(imported, "SELECT arguments FROM tool_calls WHERE session_uuid = ? AND tool_name = 'apply_patch'",
                (BIG,))
    assert len(args) == 49 and all(set(json.loads(a)) == {"input"} for (a,) in args)
    # every line is kept: messages + entries + the header = the file's lines
    for path in sample_files(samples):
        sid, _ = count_rollout(path)
        lines = sum(1 for raw in path.read_bytes().split(b"\n") if raw.strip())
        kept = scalar(imported, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND native_role <> 'token_count'", (sid,)) + \
            scalar(imported, "SELECT COUNT(*) FROM entries WHERE session_uuid = ?", (sid,)) + \
            scalar(imported, "SELECT COUNT(*) FROM sessions WHERE session_uuid = ? AND header_json IS NOT NULL", (sid,))
        assert kept == lines, sid


def test_samples_as_per_server_trees(samples, tmp_path):
    """The samples folder as a tree of servers: the three with a .codex/ folder are found (their
    folder names are the servers); the two nested deeper are skipped with a warning."""
    db = tmp_path / "t.db"
    report = do_import(db, samples, server=None)
    assert report.files_failed == 0
    assert sorted(r[0] for r in rows(db, "SELECT DISTINCT server FROM sessions")) == [
        "EdofEngland__code_butler", "JaydenXsoe__ocodex", "Python-AI-Solutions__agentic-neurodata-conversion"]
    found = discover([str(samples)])
    assert sum(1 for w in found.warnings if "skipped" in w) == 2


# ---------------------------------------------------------------------------
# Tokens: cumulative, repeated totals


def test_repeated_totals_and_null_info_are_no_model_calls(tmp_path):
    r = F.Rollout()
    r.turn("hello")
    r.null_tokens()
    r.reasoning()
    r.assistant("one")
    a = r.tokens(1000, 200, 50)
    r.repeat()
    r.repeat()
    r.turn("again")
    r.repeat()
    r.reasoning()
    cid = r.call("shell_command", {"command": "ls"})
    b = r.tokens(1500, 1200, 80, 10)
    r.output(cid, "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nfile\n")
    r.repeat()
    db = tmp_path / "t.db"
    imp(db, r.write_in(tmp_path / ".codex" / "sessions"))
    calls = rows(db, "SELECT native_role, input_tokens, cache_read_tokens, output_tokens, cache_write_tokens, "
                     "total_tokens FROM messages WHERE call_key IS NOT NULL ORDER BY seq")
    assert calls == [("assistant", 800, 200, 50, 0, 1050), ("function_call", 300, 1200, 80, 0, 1580)]
    assert session_usage(db, r.sid) == _u(a[0] - a[1] + b[0] - b[1], a[2] + b[2], a[1] + b[1], r.total[4])
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE custom_type = 'token_count'") == 7  # all kept


def test_usage_before_its_items_goes_on_the_next_model_row(tmp_path):
    """0.41 and 0.63 write a request's token_count before its items: the usage goes on the next
    row the model wrote in that request (docs/vocabulary.md), no pseudo-row; a token_count whose
    request has no model-written row is that call's assistant row without content."""
    r = F.Rollout()
    r.turn("hi")
    r.tokens(900, 0, 40)
    r.reasoning()
    r.assistant("hello")
    r.turn("again")
    r.tokens(1000, 0, 10)
    db = tmp_path / "t.db"
    imp(db, r.write_in(tmp_path / ".codex" / "sessions"))
    assert rows(db, "SELECT role, native_role, content_blocks IS NULL, total_tokens, model FROM messages "
                    "WHERE call_key IS NOT NULL ORDER BY seq") == [
        ("assistant", "reasoning", 0, 940, "gpt-5-codex"), ("assistant", "token_count", 1, 1010, "gpt-5-codex")]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'assistant' AND total_tokens IS NULL") == 1


def test_a_counter_that_starts_again_counts_from_zero(tmp_path):
    r = F.Rollout()
    r.turn("a")
    r.assistant("x")
    r.tokens(1000, 0, 100)
    r.total = [0, 0, 0, 0, 0]  # a new process that counts from zero
    r.turn("b")
    r.assistant("y")
    r.tokens(300, 0, 30)
    db = tmp_path / "t.db"
    imp(db, r.write_in(tmp_path / ".codex" / "sessions"))
    assert call_totals(db) == [1100, 330]


# ---------------------------------------------------------------------------
# Forks and sub-agents


def _fork_pair(tmp_path, subagent=False, turn_ids=True):
    parent = F.conversation(turns=2)
    fork_ms = parent.ms + 60_000
    child = F.fork_of(parent, fork_ms, subagent=subagent, turn_ids=turn_ids)
    child.turn("Now do the other thing")
    child.reasoning()
    cid = child.call("exec_command", {"cmd": "make other"})
    own1 = child.tokens(9000, 8000, 120)
    child.output(cid, "Process exited with code 2\nOutput:\nfailed\n")
    child.reasoning()
    child.assistant("It failed.")
    own2 = child.tokens(9500, 9000, 60)
    sessions = tmp_path / ".codex" / "sessions"
    return parent, child, (own1, own2), parent.write_in(sessions), child.write_in(sessions)


@pytest.mark.parametrize("subagent, turn_ids", [(False, True), (True, True), (True, False), (False, False)])
def test_fork_replay_is_not_counted_twice(tmp_path, subagent, turn_ids):
    parent, child, own, *_ = _fork_pair(tmp_path, subagent, turn_ids)
    db = tmp_path / "t.db"
    imp(db, tmp_path / ".codex")
    assert scalar(db, "SELECT parent_session_uuid FROM sessions WHERE session_uuid = ?", (child.sid,)) == parent.sid
    # the child: only its own turn (prompt, 2 reasoning, a call, its output, an answer)
    roles = dict(rows(db, "SELECT native_role, COUNT(*) FROM messages WHERE session_uuid = ? GROUP BY native_role",
                      (child.sid,)))
    assert roles == {"user": 1, "reasoning": 2, "function_call": 1, "function_call_output": 1, "assistant": 1}
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = ? AND call_key IS NOT NULL",
                  (child.sid,)) == 2
    assert session_usage(db, child.sid) == _u(sum(u[0] - u[1] for u in own), sum(u[2] for u in own),
                                              sum(u[1] for u in own), sum(u[4] for u in own))
    assert rows(db, "SELECT tool_name, exit_code, is_error FROM tool_calls WHERE session_uuid = ?", (child.sid,)) == [
        ("exec_command", 2, 1)]
    # the replayed history is kept, as entries
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE session_uuid = ? AND entry_type = 'replayed'",
                  (child.sid,)) == len(parent.lines)
    # the parent is counted as itself, and the whole archive's usage is parent + child's own
    assert session_usage(db, parent.sid)["totalTokens"] == parent.total[4]
    proc = ic.run_cli(["stats", "--db", f"sqlite:///{db}", "--json"])
    stats = json.loads(proc.stdout)
    assert stats["usage"]["totalTokens"] == child.total[4]  # the child's last total includes the parent's
    assert stats["model_calls"] == 4 + 2 and stats["tool_calls"] == 2 + 1
    assert stats["by_source"]["codex"]["replayed_entries"] == len(parent.lines)


def test_a_replay_stamped_in_the_second_after_the_childs_session_meta(tmp_path):
    """The child's session_meta written at .990 s, the replay stamped a few ms later, in the
    next second: the replay's second is its first line's (the parent's session_meta)."""
    parent = F.conversation(turns=1)
    fork_ms = (parent.ms // 1000 + 60) * 1000 + 990
    child = F.fork_of(parent, fork_ms, subagent=True, turn_ids=False)
    for obj in child.lines[1:]:
        obj["timestamp"] = F.iso(fork_ms + 20)
    child.turn("mine")
    child.assistant("ok")
    child.tokens(500, 100, 50)
    db = tmp_path / "t.db"
    imp(db, child.write_in(tmp_path / ".codex" / "sessions"))
    assert dict(rows(db, "SELECT role, COUNT(*) FROM messages GROUP BY role")) == {"user": 1, "assistant": 1}
    assert session_usage(db, child.sid)["totalTokens"] == 550


def test_fork_whose_own_lines_come_within_its_first_second(tmp_path):
    """The child's first turn starts in the second it was made: its turn id (minted after the
    fork) ends the replay, not the time stamps."""
    parent = F.conversation(turns=1)
    fork_ms = parent.ms + 60_000
    child = F.fork_of(parent, fork_ms)
    child.ms = fork_ms - 1500 + 100  # the next line 100 ms after the fork
    turn_ms = fork_ms + 50
    child.add("turn_context", {"turn_id": F.uuid7(turn_ms, 9), "cwd": child.cwd, "model": "gpt-5"}, ms=fork_ms + 60)
    child.item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "quick"}]},
               ms=fork_ms + 70)
    child.item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
               ms=fork_ms + 80)
    child.tokens(100, 0, 10)
    db = tmp_path / "t.db"
    imp(db, child.write_in(tmp_path / ".codex" / "sessions"))
    assert dict(rows(db, "SELECT role, COUNT(*) FROM messages GROUP BY role")) == {"user": 1, "assistant": 1}
    assert session_usage(db, child.sid)["totalTokens"] == 110
    assert scalar(db, "SELECT model FROM messages WHERE call_key IS NOT NULL") == "gpt-5"


# ---------------------------------------------------------------------------
# Archived copies


def test_the_copy_in_sessions_wins_over_archived_sessions(tmp_path):
    home = tmp_path / ".codex"
    both = F.conversation(turns=2)
    archived_only = F.conversation(sid=F.uuid7(F.T0 + 5_000_000, 3), start_ms=F.T0 + 5_000_000, turns=1)
    live = both.write_in(home / "sessions")
    (home / "archived_sessions").mkdir(parents=True)
    (home / "archived_sessions" / live.name).write_bytes(live.read_bytes())
    archived_only.write(home / "archived_sessions" / F.rollout_name(archived_only.sid, F.T0 + 5_000_000))
    db = tmp_path / "t.db"
    imp(db, home)
    archived_path = home / "archived_sessions" / F.rollout_name(archived_only.sid, F.T0 + 5_000_000)
    assert rows(db, "SELECT session_uuid, session_type, file_path FROM sessions ORDER BY session_uuid") == sorted([
        (both.sid, "normal", str(live)), (archived_only.sid, "archived", str(archived_path))])
    assert rows(db, "SELECT COUNT(*) FROM parsed_files") == [(2,)]  # the duplicate is not even read
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE session_uuid = ?", (both.sid,)) == 3 + 2 * 6
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE session_uuid = ?", (both.sid,)) == 2
    # named directly, archived_sessions/ still defers to the sessions/ beside it
    assert [u.name for u in discover([str(home / "archived_sessions")]).units] == [
        F.rollout_name(archived_only.sid, F.T0 + 5_000_000)]


def test_an_archived_copy_imported_first_is_not_doubled_by_the_live_one(tmp_path):
    home = tmp_path / ".codex"
    r = F.conversation(turns=2)
    archived = r.write(home / "archived_sessions" / F.rollout_name(r.sid, F.T0))
    db = tmp_path / "t.db"
    imp(db, home)
    before = dump(db)
    # unarchived (moved back) and continued
    live = r.write_in(home / "sessions")
    archived.unlink()
    imp(db, home)
    assert scalar(db, "SELECT COUNT(*) FROM sessions") == 1
    assert dump(db)["messages"] == before["messages"]
    assert scalar(db, "SELECT file_path FROM sessions") == str(live)
    r.turn("more")
    r.assistant("done")
    r.tokens(100, 0, 10)
    r.write(live)
    imp(db, home)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE call_key IS NOT NULL AND usage_counted = 1") == 5
    assert session_usage(db, r.sid)["totalTokens"] == r.total[4]
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls") == 2


# ---------------------------------------------------------------------------
# Incremental reads


def _split_import(tmp_path, r: F.Rollout, cut: int):
    """Import the first ``cut`` lines, then the whole file (appended): (db, second report)."""
    path = F.day_path(tmp_path / "h" / ".codex" / "sessions", r.sid, F.T0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(F.line(o) for o in r.lines[:cut]))
    db = tmp_path / f"split{cut}.db"
    imp(db, path)
    path.write_bytes(r.bytes())
    return db, imp(db, path), path


def test_an_append_rerun_reads_only_the_new_bytes_and_continues_the_deltas(tmp_path):
    r = F.conversation(turns=3)
    whole = tmp_path / "whole.db"
    one = r.write(tmp_path / "w" / ".codex" / "sessions" / "2026" / "01" / "01" / F.rollout_name(r.sid, F.T0))
    imp(whole, one)
    n = len(r.lines)
    # a cut after a model call (a boundary): the archive equals a one-shot import
    cut = max(i for i, o in enumerate(r.lines[: n // 2]) if o["payload"].get("type") == "task_complete") + 1
    db, second, path = _split_import(tmp_path, r, cut)
    new_bytes = len(b"".join(F.line(o) for o in r.lines[cut:]))
    assert new_bytes <= second.bytes_read <= new_bytes + 2 * 1024 + 64 * 1024  # the new lines, two check windows
    assert second.bytes_read < path.stat().st_size
    strip = lambda d: {k: v for k, v in d.items() if k != "parsed_files"}  # noqa: E731
    assert strip(dump(db)) == strip(dump(whole))
    # every cut: the same model calls, usage and tool calls (the usage may sit on a row of its own)
    bare = lambda db: scalar(db, "SELECT COUNT(*) FROM messages WHERE native_role = 'token_count'")  # noqa: E731
    want = figures(whole, r.sid)
    assert bare(whole) == 0
    split_requests = 0
    for cut in range(1, n):
        db, _, _ = _split_import(tmp_path, r, cut)
        got = figures(db, r.sid)
        assert (got["model_calls"], got["usage"], got["tool_calls"], got["exit_codes"]) == (
            want["model_calls"], want["usage"], want["tool_calls"], want["exit_codes"]), cut
        roles = {**got["roles"], "assistant": got["roles"]["assistant"] - bare(db)}
        assert roles == want["roles"], cut
        assert session_usage(db, r.sid) == want["usage"], cut
        split_requests += bare(db)
    assert split_requests >= 6  # cuts inside a request: its usage came on a usage row


def test_a_whole_read_after_a_split_one_neither_loses_nor_doubles_usage(tmp_path):
    """A row imported before its request's token_count arrived carries no usage. When the file
    is read whole again (a failed run, a rewrite) that row gets the usage: it is replaced (the
    old version kept as a revision), and a usage row an append run made meanwhile keeps the
    call counted once (same call key)."""
    r = F.conversation(turns=2)
    cut = next(i for i, o in enumerate(r.lines) if o["payload"].get("type") == "function_call") + 1
    whole = tmp_path / "whole.db"
    imp(whole, r.write(tmp_path / "w" / ".codex" / "sessions" / F.rollout_name(r.sid, F.T0)))
    want = figures(whole, r.sid)
    for append_first in (False, True):
        db, _, path = _split_import(tmp_path / str(append_first), r, cut) if append_first else (None, None, None)
        if not append_first:
            path = F.day_path(tmp_path / "f" / ".codex" / "sessions", r.sid, F.T0)
            path.parent.mkdir(parents=True)
            path.write_bytes(b"".join(F.line(o) for o in r.lines[:cut]))
            db = tmp_path / "f.db"
            imp(db, path)
            path.write_bytes(r.bytes())
        con = sqlite3.connect(db)
        con.execute("DELETE FROM parsed_files")  # no checkpoint: the next run reads the file whole
        con.commit()
        con.close()
        imp(db, path)
        got = figures(db, r.sid)
        assert (got["model_calls"], got["usage"]) == (want["model_calls"], want["usage"]), append_first
        assert session_usage(db, r.sid) == want["usage"], append_first
        assert scalar(db, "SELECT COUNT(*) FROM messages WHERE call_key IS NOT NULL") == \
            want["model_calls"] + (1 if append_first else 0)
        assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 1


def test_token_counts_appended_in_a_second_run(tmp_path):
    """A second run that only brings token_count events (a repeat, then a new total): the
    delta is taken from the total the first run ended with, kept in the checkpoint."""
    r = F.Rollout()
    r.turn("go")
    r.reasoning()
    cid = r.call("shell", {"command": ["bash", "-lc", "echo hi"]})
    r.tokens(1000, 100, 10)
    r.output(cid, json.dumps({"output": "hi\n", "metadata": {"exit_code": 0, "duration_seconds": 0.5}}))
    path = r.write_in(tmp_path / ".codex" / "sessions")
    db = tmp_path / "t.db"
    imp(db, path)
    state = json.loads(scalar(db, "SELECT resume_state FROM parsed_files"))
    assert state["tot"] == r.total
    size = path.stat().st_size
    r.repeat()
    r.reasoning()
    r.assistant("said hi")
    r.tokens(1200, 1000, 20)
    r.repeat()
    r.write(path)
    report = imp(db, path)
    assert report.bytes_read < path.stat().st_size - size + 3 * 1024
    assert rows(db, "SELECT native_role, total_tokens FROM messages WHERE call_key IS NOT NULL ORDER BY seq") == [
        ("function_call", 1010), ("assistant", 1220)]
    assert session_usage(db, r.sid)["totalTokens"] == r.total[4] == 2230
    assert rows(db, "SELECT command, exit_code, duration_ms FROM tool_calls") == [("echo hi", 0, 500)]


def test_an_unterminated_last_line_is_imported_once(tmp_path):
    r = F.Rollout()
    r.turn("go")
    r.assistant("x")
    r.tokens(100, 0, 10)
    data = r.bytes()
    path = F.day_path(tmp_path / ".codex" / "sessions", r.sid, F.T0)
    path.parent.mkdir(parents=True)
    path.write_bytes(data[:-1])  # the token_count without its newline
    db = tmp_path / "t.db"
    first = imp(db, path)
    assert first.pending_lines == 0
    assert scalar(db, "SELECT total_tokens FROM messages WHERE call_key IS NOT NULL") == 110
    path.write_bytes(data)
    imp(db, path)
    r.turn("more")
    r.assistant("y")
    r.tokens(50, 0, 5)
    r.write(path)
    imp(db, path)
    assert call_totals(db) == [110, 55]
    assert scalar(db, "SELECT COUNT(*) FROM entries WHERE custom_type = 'token_count'") == 2
    # a half-written line is pending, and read once it is whole
    path.write_bytes(r.bytes() + b'{"timestamp":"2026-01-01T01:00:00.000Z","type":"event_')
    assert imp(db, path).pending_lines == 1


# ---------------------------------------------------------------------------
# Costs


def test_costs_priced_from_the_table_and_unknown_models_unpriced(tmp_path):
    home = tmp_path / ".codex" / "sessions"
    r = F.Rollout(model="gpt-5")
    r.turn("priced")
    r.assistant("a")
    r.tokens(10_000, 4_000, 500, 100)
    r.turn("codex", model="gpt-5-codex")
    r.assistant("b")
    r.tokens(20_000, 16_000, 800)
    r.write_in(home)
    local = F.Rollout(sid=F.uuid7(F.T0 + 9_000_000, 5), start_ms=F.T0 + 9_000_000, model="qwen-local-coder:7b",
                      provider="ollama")
    local.turn("local")
    local.assistant("c")
    cid = local.call("shell", {"command": ["ls"]}, call_id="functions.shell:3")
    local.tokens(3_000, 0, 100)
    local.output(cid, json.dumps({"output": "", "metadata": {"exit_code": 1, "duration_seconds": 0.1}}))
    local.write_in(home)
    db = tmp_path / "t.db"
    imp(db, tmp_path / ".codex")
    got = rows(db, "SELECT model, provider, input_tokens, cache_read_tokens, output_tokens, cost_usd, cost_source "
                   "FROM messages WHERE call_key IS NOT NULL ORDER BY timestamp")
    # gpt-5 and gpt-5-codex: $1.25 per M input, $0.125 per M cached input, $10 per M output
    assert got[0][:5] == ("gpt-5", "openai", 6_000, 4_000, 500)
    assert got[0][5] == pytest.approx(6_000 * 1.25e-06 + 4_000 * 1.25e-07 + 500 * 1e-05) and got[0][6] == "computed"
    assert got[1][0] == "gpt-5-codex" and got[1][6] == "computed"
    assert got[1][5] == pytest.approx(4_000 * 1.25e-06 + 16_000 * 1.25e-07 + 800 * 1e-05)
    assert got[2] == ("qwen-local-coder:7b", "ollama", 3_000, 0, 100, None, "unpriced")  # never $0
    proc = ic.run_cli(["stats", "--db", f"sqlite:///{db}", "--json"])
    stats = json.loads(proc.stdout)
    assert stats["by_source"]["codex"]["unpriced_calls"] == 1
    assert stats["usage"]["cost_total"] == pytest.approx(got[0][5] + got[1][5])
    assert rows(db, "SELECT call_id, command, exit_code, is_error FROM tool_calls") == [
        ("functions.shell:3", "ls", 1, 1)]


# ---------------------------------------------------------------------------
# Calls, results, reasoning, context


def test_tool_calls_results_and_exit_codes(tmp_path):
    r = F.Rollout()
    r.turn("run things")
    r.reasoning()
    a = r.call("exec_command", {"cmd": "pytest -q", "workdir": "/w"})
    r.tokens(100, 0, 10)
    r.exec_end(a, ["bash", "-lc", "pytest -q"], 3, ms=1250)
    r.output(a, "Chunk ID: 1\nWall time: 1.2500 seconds\nProcess exited with code 3\nOutput:\nfailed\n")
    b = r.call("exec_command", {"cmd": "sleep 100"})
    r.tokens(100, 0, 10)
    r.output(b, "Chunk ID: 2\nWall time: 10.0000 seconds\nProcess running with session ID 7\nOutput:\n")
    c = r.local_shell(["bash", "-lc", "git status"])
    r.tokens(100, 0, 10)
    r.output(c, json.dumps({"output": "clean", "metadata": {"exit_code": 0, "duration_seconds": 0.25}}))
    d = r.patch("*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n")
    r.tokens(100, 0, 10)
    r.output(d, "Success. Updated the following files:\nA a.txt\n", custom=True)
    e = r.call("mcp__docs__search", {"query": "Exit code: 9"})
    r.tokens(100, 0, 10)
    r.output(e, "Exit code: 9 (this is an MCP tool's text, not a shell's)")
    r.call("exec_command", {"cmd": "pytest -q"}, call_id=a)  # the same call id again: no second call
    r.tokens(100, 0, 10)
    db = tmp_path / "t.db"
    imp(db, r.write_in(tmp_path / ".codex" / "sessions"))
    assert rows(db, "SELECT tool_name, command, exit_code, duration_ms, is_error, result_message_id IS NOT NULL "
                    "FROM tool_calls ORDER BY id") == [
        ("exec_command", "pytest -q", 3, 1250, 1, 1),
        ("exec_command", "sleep 100", None, None, 0, 1),
        ("local_shell", "git status", 0, 250, 0, 1),
        ("apply_patch", None, None, None, 0, 1),
        ("mcp__docs__search", None, None, None, 0, 1),
    ]
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'assistant' AND has_tool_calls = 1") == 6
    assert json.loads(scalar(db, "SELECT arguments FROM tool_calls WHERE tool_name = 'apply_patch'")) == {
        "input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"}
    block = json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE native_role = 'function_call' "
                                  "ORDER BY seq LIMIT 1"))
    assert block == [{"type": "toolCall", "id": a, "name": "exec_command",
                      "arguments": {"cmd": "pytest -q", "workdir": "/w"}}]
    assert rows(db, "SELECT tool_name, exit_code, is_error FROM messages WHERE role = 'toolResult' "
                    "ORDER BY seq LIMIT 1") == [("exec_command", 3, 1)]
    stats = json.loads(ic.run_cli(["stats", "--db", f"sqlite:///{db}", "--json"]).stdout)
    assert (stats["tool_calls"], stats["shell_calls"]) == (5, 3)


def test_reasoning_encrypted_and_readable(tmp_path):
    r = F.Rollout()
    r.turn("think")
    r.reasoning(None)  # only the ciphertext
    r.reasoning("A summary")  # a summary and the ciphertext
    r.reasoning(None, encrypted=False, content="Raw reasoning of an open model")
    r.assistant("done")
    r.tokens(10, 0, 5)
    db = tmp_path / "t.db"
    imp(db, r.write_in(tmp_path / ".codex" / "sessions"))
    got = [(json.loads(b)[0], t, h) for b, t, h in rows(
        db, "SELECT content_blocks, thinking_text, has_thinking FROM messages WHERE native_role = 'reasoning' ORDER BY seq")]
    assert got[0] == ({"type": "thinking", "thinking": C.ENCRYPTED_PLACEHOLDER, "encrypted": True,
                       "encryptedChars": 406}, None, 1)
    assert got[1] == ({"type": "thinking", "thinking": "A summary", "encrypted": True, "encryptedChars": 406},
                      "A summary", 1)
    assert got[2] == ({"type": "thinking", "thinking": "Raw reasoning of an open model"},
                      "Raw reasoning of an open model", 1)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE content_blocks LIKE '%Q29kZXhDaXBoZXJ0ZXh0%'") == 0
    # nothing of the ciphertext reaches the snapshot's search index
    store = open_store(f"sqlite:///{db}")
    try:
        from importer.snapshot import export_snapshot

        export_snapshot(store, tmp_path / "snap.db")
    finally:
        store.close()
    con = sqlite3.connect(tmp_path / "snap.db")
    try:
        assert con.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'summary'").fetchone()[0] == 1
        assert con.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH "
                           "'gAAAABQ29kZXhDaXBoZXJ0ZXh0Q29kZXhDaXBoZXJ0ZXh0*'").fetchone()[0] == 0
    finally:
        con.close()


def test_context_messages_are_flagged_and_event_mirrors_are_entries(tmp_path):
    r = F.Rollout(cwd="/srv/app")
    r.context()
    r.turn("real question")
    r.assistant("answer")
    r.tokens(10, 0, 5)
    db = tmp_path / "t.db"
    imp(db, r.write_in(tmp_path / ".codex" / "sessions"))
    assert rows(db, "SELECT role, native_role, is_context FROM messages WHERE native_role IN ('user', 'developer') "
                    "ORDER BY seq") == [("system", "developer", 1), ("system", "user", 1), ("system", "user", 1),
                                        ("user", "user", 0)]
    assert rows(db, "SELECT custom_type FROM entries WHERE custom_type IN ('user_message', 'agent_message') "
                    "ORDER BY seq") == [("user_message",), ("agent_message",)]
    assert rows(db, "SELECT cwd, project FROM sessions") == [("/srv/app", "app")]


# ---------------------------------------------------------------------------
# Discovery


class RecordingFS(FileSystem):
    def __init__(self):
        super().__init__()
        self.opened: list[str] = []

    def open(self, path, size=None):
        self.opened.append(path)
        return super().open(path, size)


def _home(tmp_path) -> tuple[Path, F.Rollout]:
    home = tmp_path / "user" / ".codex"
    r = F.conversation(turns=1)
    r.write_in(home / "sessions")
    (home / "history.jsonl").write_text('{"session_id":"x","ts":1,"text":"a prompt"}\n')
    (home / "session_index.jsonl").write_text('{"id":"x","thread_name":"t"}\n')
    (home / "auth.json").write_text('{"OPENAI_API_KEY":"sk-made-up"}')
    (home / "state_5.sqlite").write_bytes(b"SQLite format 3\x00")
    (home / "config.toml").write_text('model = "gpt-5"\n')
    return home, r


def test_discovery_of_a_codex_home_opens_no_history_auth_or_state(tmp_path):
    home, r = _home(tmp_path)
    fs = RecordingFS()
    day = home / "sessions" / "2026" / "01" / "01"
    for path in (home, home.parent, home / "sessions", home / "sessions" / "2026", day):
        found = discover([str(path)], server="s", fs=fs)
        assert not found.errors, path
        assert [(u.source.kind, u.agent_id, u.name) for u in found.units] == [
            ("codex", "codex", F.rollout_name(r.sid, F.T0))], path
    from importer.pipeline import run_import

    store = open_store(f"sqlite:///{tmp_path / 't.db'}")
    try:
        report = run_import(store, [], sources=discover([str(home.parent)], server="s", fs=fs))
    finally:
        store.close()
    assert report.files_imported == 1 and report.files_failed == report.files_ignored == 0
    assert fs.opened and all(p.endswith(".jsonl") and "/sessions/" in p for p in fs.opened)
    assert rows(tmp_path / "t.db", "SELECT file_path FROM parsed_files") == [(str(next(day.glob("*.jsonl"))),)]
    # --agent names the agent
    assert {u.agent_id for u in discover([str(home)], agent="laptop-codex").units} == {"laptop-codex"}


def test_other_kinds_layouts_are_not_claimed(tmp_path):
    # an OpenClaw agent's sessions/ and a pi tree: Codex lists nothing there
    oc = tmp_path / "oc"
    write(sessions_dir(oc, "main") / "5e55a0a0-0000-4000-8000-00000000000a.jsonl", oc_conversation())
    for path in (oc, oc / "agents", oc / "agents" / "main" / "sessions"):
        assert all(u.source.kind == "openclaw" for u in discover([str(path)]).units), path
    codex = next(s for s in all_sources() if s.kind == "codex")
    out = Discovery()
    assert not codex.find(FileSystem(), str(oc / "agents" / "main" / "sessions"), Scope("s"), out) and not out.units
    pi = tmp_path / "pi" / "agent" / "sessions" / "--home-dev--"
    write(pi / "2026-01-01T00-00-00-000Z_5e55a0a0-0000-4000-8000-00000000000a.jsonl", oc_conversation())
    assert not codex.find(FileSystem(), str(tmp_path / "pi"), Scope("s"), out) and not out.units
    # a folder with a year folder is no sessions tree unless it is named so
    (tmp_path / "photos" / "2024").mkdir(parents=True)
    assert not codex.find(FileSystem(), str(tmp_path / "photos"), Scope("s"), out)
    # single files: by their first line
    home, r = _home(tmp_path)
    rollout = next((home / "sessions").rglob("*.jsonl"))
    assert [u.source.kind for u in discover([str(rollout)]).units] == ["codex"]
    oc_file = next((oc / "agents" / "main" / "sessions").glob("*.jsonl"))
    assert [u.source.kind for u in discover([str(oc_file)]).units] == ["openclaw"]
    assert C.looks_like_rollout(b'{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"'
                                + b"x" * 70000)
    assert C.looks_like_rollout(b'{"id":"ddb14791-ff64-4389-ad02-b847be462b33","timestamp":"2025-08-30T12:33:03.000Z",'
                                b'"instructions":null}\n{"record_type":"state"}\n')
    assert not C.looks_like_rollout(b'{"type":"session","id":"x","timestamp":"2026-01-01T00:00:00.000Z"}\n')
    # a .jsonl in a sessions tree that is not Codex's is not listed; a rollout-named one that
    # is not a rollout is recorded as ignored
    (home / "sessions" / "2026" / "01" / "01" / "notes.jsonl").write_text('{"type":"session","id":"x"}\n')
    (home / "sessions" / "2026" / "01" / "01" / "rollout-2026-01-01T00-00-00-junk.jsonl").write_text('{"a": 1}\n')
    db = tmp_path / "t.db"
    report = do_import(db, home)
    assert (report.files_imported, report.files_ignored, report.files_failed) == (1, 1, 0)


def test_default_paths(tmp_path, monkeypatch):
    codex = next(s for s in all_sources() if s.kind == "codex")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    assert codex.candidates() == ["~/.codex"] and codex.default_paths(FileSystem()) == []
    (tmp_path / ".codex" / "sessions").mkdir(parents=True)
    assert codex.default_paths(FileSystem()) == ["~/.codex"]
    other = tmp_path / "elsewhere"
    (other / "sessions").mkdir(parents=True)
    monkeypatch.setenv("CODEX_HOME", str(other))
    assert codex.candidates() == [str(other), "~/.codex"] and codex.default_paths(FileSystem()) == [str(other)]
    # a CODEX_HOME of any name is recognised by its markers
    F.conversation(turns=1).write_in(other / "sessions")
    (other / "config.toml").write_text("")
    assert [u.source.kind for u in discover([str(other)]).units] == ["codex"]


def test_a_folder_of_servers_each_with_a_codex_home(tmp_path):
    for n, name in enumerate(("laptop", "build-box")):
        F.conversation(sid=F.uuid7(F.T0, 40 + n), turns=1).write_in(tmp_path / "trees" / name / ".codex" / "sessions")
    db = tmp_path / "t.db"
    imp(db, tmp_path / "trees", server=None)
    assert rows(db, "SELECT server, agent_id FROM sessions ORDER BY server") == [
        ("build-box", "codex"), ("laptop", "codex")]


# ---------------------------------------------------------------------------
# Over SSH, and the explorer


def test_import_over_ssh_equals_a_local_import(tmp_path, samples):
    from sshd import SSHServer, require_sshd
    from test_ssh import import_config, write_config

    require_sshd()
    made = tmp_path / "made" / ".codex"
    parent, child, *_ = _fork_pair(tmp_path / "made")
    F.conversation(sid=F.uuid7(F.T0 + 1, 2), turns=1).write(made / "archived_sessions" / "rollout-x-a.jsonl")
    (made / "history.jsonl").write_text("{}\n")
    server = SSHServer(tmp_path / "sshd").start()
    try:
        paths = [str(samples / rel) for rel in SAMPLE_PATHS.values()] + [str(made)]
        config = write_config(tmp_path, server, [
            {"name": "box", "host": "127.0.0.1", "port": server.port, "user": server.user,
             "identity_file": str(server.user_key), "paths": paths}])
        first = import_config(config)
        assert first.ok, [s.error for s in first.servers]
        assert first.servers[0].where.startswith("ssh")
        second = import_config(config)
        assert second.ok and second.totals().files_imported == 0
    finally:
        server.stop()
    local = tmp_path / "local.db"
    imp(local, *paths, server="box")
    got, want = dump(tmp_path / "ssh.db"), dump(local)
    assert got["messages"] and got == want
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM sessions") == 7 + 3


def test_the_conversation_page_renders_a_codex_session(tmp_path):
    from datasette.app import Datasette
    import asyncio

    from importer.snapshot import export_snapshot

    r = F.conversation(turns=2)
    db = tmp_path / "t.db"
    imp(db, r.write_in(tmp_path / ".codex" / "sessions"))
    store = open_store(f"sqlite:///{db}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db")
    finally:
        store.close()
    from datasette_agentbase.serve import load_metadata

    snap = tmp_path / "snapshot.db"
    ds = Datasette([str(snap)], metadata=load_metadata(snap),
                   template_dir=str(REPO_ROOT / "templates"))
    asyncio.run(ds.invoke_startup())
    sid = sqlite3.connect(snap).execute("SELECT id FROM sessions WHERE session_uuid = ?", (r.sid,)).fetchone()[0]
    page = asyncio.run(ds.client.get(f"/-/agentbase/session/{sid}"))
    assert page.status_code == 200
    html = page.text
    assert "Please check the build, step 1" in html and "Step 1 is done." in html
    assert "make test-1" in html and "result 1" in html  # a call, with its output under it
    assert "Look at the build output 0" in html and "encrypted reasoning" in html
    assert "Q29kZXhDaXBoZXJ0ZXh0" not in html
    assert "no result recorded" not in html


def test_mariadb_holds_the_same_rows(samples, tmp_path, mariadb_url):
    from transcripts import dump_store

    paths = [str(samples / rel) for rel in SAMPLE_PATHS.values()]
    parent, child, *_ = _fork_pair(tmp_path / "made")
    paths.append(str(tmp_path / "made" / ".codex"))
    sqlite_url = f"sqlite:///{tmp_path / 'a.db'}"
    for url in (sqlite_url, mariadb_url):
        proc = ic.run_cli(["import", *paths, "--server", "box", "--db", url])
        assert proc.returncode == 0, ic.describe(proc, "import")
    assert dump_store(mariadb_url) == dump_store(sqlite_url)
    stats = [json.loads(ic.run_cli(["stats", "--db", url, "--json"]).stdout)["by_source"]["codex"]
             for url in (sqlite_url, mariadb_url)]
    assert stats[0] == stats[1] and stats[0]["replayed_entries"] == len(parent.lines)


def test_a_folder_of_groups_of_servers(tmp_path):
    """Servers grouped one level deeper (by kind, by site): each found, named by its own folder; a
    group with nothing known inside is named in a warning."""
    for n, (group, name) in enumerate((("codex", "laptop"), ("codex", "build-box"), ("site-b", "nas"))):
        F.conversation(sid=F.uuid7(F.T0, 60 + n), turns=1).write_in(tmp_path / "trees" / group / name / ".codex" / "sessions")
    (tmp_path / "trees" / "notes" / "drafts").mkdir(parents=True)
    found = discover([str(tmp_path / "trees")])
    assert sorted({(u.server, u.source.kind) for u in found.units}) == [
        ("build-box", "codex"), ("laptop", "codex"), ("nas", "codex")]
    assert [w for w in found.warnings if "notes" in w] == [
        f"skipped {tmp_path / 'trees' / 'notes'}: no transcripts of a known kind inside"]
