"""agentbase report --explain: one line per reason another tool's figures may differ, each count taken
from the archive, checked against counts made here from the made-up transcripts the test writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import claude_code_fixtures as F

REPO = Path(__file__).resolve().parents[1]
UNKNOWN = "claude-made-up-model-9"  # no price table has it: unpriced
REASONS = ("streamed", "cache_breakdown", "unpriced", "recorded", "computed")


def agentbase(*args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "importer", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, env=env)


def session_lines() -> list[dict]:
    """A prompt, then: a call streamed over three lines without requestId (priced from the table), a call
    over two lines with one (priced), a call of a model without a price, a call whose cost the agent recorded."""
    c = F.Conv()
    c.user("make the quokka dance")
    c.assistant([F.thinking("hmm"), F.text("step one"), F.tool("toolu_1", "Bash", command="true")], "msg_a", rid=None,
                usages=[F.usage(100, 1), F.usage(100, 5), F.usage(100, 9)])
    c.result("toolu_1", "ok")
    c.assistant([F.text("two"), F.text("parts")], "msg_b", rid="req_b",
                usages=[F.usage(10, 20, write=50, h5=0, h1=0)] * 2)  # a breakdown of 0 beside 50 cache writes
    c.user("again")
    c.assistant([F.text("unknown model")], "msg_c", rid="req_c", model=UNKNOWN)
    c.user("and once more")
    c.assistant([F.text("recorded")], "msg_d", rid="req_d", costUSD=0.25)
    return c.lines


def oracle(lines: list[dict]) -> dict[str, int]:
    """What the rules say, counted from the lines: a call is the lines sharing message.id; every line past
    a call's first repeats its usage; a call without requestId is counted per line by a peer."""
    calls: dict[str, list[dict]] = {}
    for line in lines:
        if line.get("type") == "assistant":
            calls.setdefault(line["message"]["id"], []).append(line)
    extra = sum(len(ls) - 1 for ls in calls.values())
    return {
        "streamed": extra,
        "streamed_calls": sum(1 for ls in calls.values() if len(ls) > 1),
        "no_request": sum(len(ls) - 1 for ls in calls.values() if "requestId" not in ls[0]),
        "no_request_tokens": "/".join(
            f"{sum(x['message']['usage'][k] for ls in calls.values() if 'requestId' not in ls[0] for x in ls[1:]):,}"
            for k in ("input_tokens", "output_tokens", "cache_read_input_tokens")),
        "cache_breakdown": sum(1 for ls in calls.values() for u in [ls[0]["message"]["usage"]]
                               if isinstance(u.get("cache_creation"), dict)
                               and sum(u["cache_creation"].values()) < u["cache_creation_input_tokens"]),
        "unpriced": sum(1 for ls in calls.values() if ls[0]["message"]["model"] == UNKNOWN),
        "recorded": sum(1 for ls in calls.values() if any("costUSD" in x for x in ls)),
        "computed": sum(1 for ls in calls.values() if ls[0]["message"]["model"] != UNKNOWN
                        and not any("costUSD" in x for x in ls)),
    }


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain")
    lines = session_lines()
    F.write(F.config_dir(root / "claude") / "projects" / F.PROJECT / f"{F.SID}.jsonl", lines)
    env = dict(os.environ, AGENTBASE_HOME=str(root / "home"), AGENTBASE_CONFIG=str(root / "none.yml"), COLUMNS="80")
    proc = agentbase("import", root / "claude", "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    return env, lines


def test_explain_lines_and_counts(archive):
    env, lines = archive
    want = oracle(lines)
    proc = agentbase("report", "daily", "--json", "--explain", "--timezone", "UTC", env=env)
    assert proc.returncode == 0, proc.stderr
    reasons = json.loads(proc.stdout)["explain"]
    got = {r["reason"]: r for r in reasons}
    assert sorted(got) == sorted(k for k in REASONS if want[k])
    assert len(reasons) == len(got)  # one kind, one line per reason
    for key in REASONS:
        assert got[key]["count"] == want[key], key
        assert got[key]["source"] == "claude-code"
    assert f"of {want['streamed_calls']} model calls" in got["streamed"]["text"]
    assert f"{want['no_request']} of them have no requestId" in got["streamed"]["text"]
    assert f"cache read {want['no_request_tokens']} tokens more" in got["streamed"]["text"]
    assert all(r["count"] > 0 for r in reasons)


def test_explain_under_the_table_and_only_with_the_flag(archive):
    env, lines = archive
    want = oracle(lines)
    plain = agentbase("report", "daily", "--timezone", "UTC", env=env)
    shown = agentbase("report", "daily", "--explain", "--timezone", "UTC", env=env)
    assert plain.returncode == shown.returncode == 0
    assert "explain" not in json.loads(agentbase("report", "daily", "--json", env=env).stdout)
    assert shown.stdout.startswith(plain.stdout.rstrip("\n"))
    tail = shown.stdout[len(plain.stdout):].strip().splitlines()
    assert tail[0] == "Why another tool may count otherwise:"
    assert len(tail) == 1 + sum(1 for k in REASONS if want[k])
    assert not any(" 0 " in t for t in tail)
    # never transcript text
    assert "quokka" not in shown.stdout and "step one" not in shown.stdout


def test_explain_follows_the_report_filters(archive):
    env, _ = archive
    proc = agentbase("report", "daily", "--json", "--explain", "--since", "2030-01-01", env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["rows"] == [] and out["explain"] == []


def test_a_replayed_copy_and_local_days(tmp_path):
    """A continued session repeating a call of the first (same message.id and requestId) is one copy
    counted once; in a zone 14 hours ahead every call is on another day than in UTC."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    first = F.Conv()
    first.user("first")
    first.assistant([F.text("answer")], "msg_r", rid="req_r")
    second = F.Conv(F.SID2, tag=2, second=100)
    second.user("continued")
    second.assistant([F.text("answer")], "msg_r", rid="req_r")  # the same call, logged again
    second.assistant([F.text("new")], "msg_s", rid="req_s")
    project = F.config_dir(tmp_path / "claude") / "projects" / F.PROJECT
    F.write(project / f"{F.SID}.jsonl", first.lines)
    F.write(project / f"{F.SID2}.jsonl", second.lines)
    env = dict(os.environ, AGENTBASE_HOME=str(tmp_path / "home"), AGENTBASE_CONFIG=str(tmp_path / "none.yml"))
    assert agentbase("import", tmp_path / "claude", "-q", env=env).returncode == 0
    ids: dict[tuple, list] = {}
    for line in first.lines + second.lines:
        if line.get("type") == "assistant":
            ids.setdefault((line["message"]["id"], line["requestId"]), []).append(line["timestamp"])
    copies = sum(len(v) - 1 for v in ids.values())
    zone = ZoneInfo("Pacific/Kiritimati")
    moved = 0
    for stamps in ids.values():
        first_seen = min(stamps)  # the copy that counts: the earliest
        at = datetime.fromisoformat(first_seen.replace("Z", "+00:00"))
        moved += at.astimezone(zone).date() != at.date()
    proc = agentbase("report", "daily", "--json", "--explain", "--timezone", "Pacific/Kiritimati", env=env)
    assert proc.returncode == 0, proc.stderr
    got = {r["reason"]: r["count"] for r in json.loads(proc.stdout)["explain"]}
    assert copies == 1 and got["copies"] == copies
    assert moved and got["days"] == moved
    utc = agentbase("report", "daily", "--json", "--explain", "--timezone", "UTC", env=env)
    assert "days" not in {r["reason"] for r in json.loads(utc.stdout)["explain"]}
