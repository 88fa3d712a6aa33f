"""The importer against the independent oracle (tests/oracle.py) on the real samples.

The samples live outside the repository, in ../shared/samples next to the clone. They hold real
people's chats: assertion messages here show counts, ids and file names only, never their text.

Expected figures come from the oracle, which reads the raw files with the project's identity rules
and shares no code with the importer. A few of them were also established by hand (HAND_CHECKED).
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
import oracle  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT.parent / "shared" / "samples"

# SQLite-era stores (agent databases, a published .zst archive, standalone pi folders): the oracle
# reads JSONL only, so their sessions are left out of every comparison here; they are checked
# against figures established independently in test_openclaw_samples.py.
EXCLUDED_SERVERS = ("openclaw-2026.9.6",)
# No agents/ tree: its one file is imported on its own, as server pi-fixture, agent pi.
PI_SERVER = "badlogic__pi-mono"
PI_FILE_REL = Path(PI_SERVER, "packages", "coding-agent", "test", "fixtures", "before-compaction.jsonl")
PI_GROUP = ("pi-fixture", "pi")


def _u(inp, out, cache_read, cache_write, total, cost):
    return {"input": inp, "output": out, "cacheRead": cache_read, "cacheWrite": cache_write,
            "totalTokens": total, "cost_total": cost}


# Figures established by hand, independently of oracle.py, on the raw files:
#   messages_by_role:        grep -c '"role":"<role>"' FILE      (one message per line)
#   messages:                grep -c '"type":"message"' FILE
#   tool_calls:              grep -o '"type":"toolCall"' FILE | wc -l
#   exec_calls:              grep -o '"name":"exec"' FILE | wc -l  (+ the same for "bash")
#   messages_with_thinking:  grep -c '"type":"thinking"' FILE
#   usage:                   jq -s over the assistant lines: sum of .message.usage.input, .output,
#                            .cacheRead, .cacheWrite, .totalTokens and .cost.total (missing = 0);
#                            jq also showed no two assistant lines share (timestamp, provider,
#                            model, usage), so every call counts.
#   session id:              jq '.id' of the first line.
# sirdeuce's session spans the live file and its checkpoint copy: jq -s over both files,
# unique_by(.id) of the message lines (live: 198 message lines, checkpoint: 196, all 196 in both).
# The pi fixture (v1, no entry ids) was counted with the same grep/jq commands.
HAND_CHECKED = {
    ("Ccccx__openclaw-bak", "main", "4cd0abc6-56b7-41af-ad24-4dfe17acb43c"): {
        "messages": 6, "messages_by_role": {"user": 1, "assistant": 3, "toolResult": 2},
        "tool_calls": 3, "exec_calls": 3, "messages_with_thinking": 3,
        "usage": _u(3290, 267, 74052, 37295, 114904, 0.021043545),
    },
    # the .jsonl.reset.2026-03-23T02-49-56.475Z archive
    ("Ccccx__openclaw-bak", "main", "e7979dab-538c-4ca6-bc76-61bf495108f1"): {
        "messages": 8, "messages_by_role": {"user": 1, "assistant": 4, "toolResult": 3},
        "tool_calls": 3, "exec_calls": 2, "messages_with_thinking": 4,
        "usage": _u(2599, 334, 38655, 13153, 54741, 0.009612675),
    },
    ("42naodia__moltbot-config", "main", "1b975ccf-9dbe-4f4e-9d2b-8abe12178979"): {
        "messages": 2, "messages_by_role": {"user": 1, "assistant": 1},
        "tool_calls": 0, "exec_calls": 0, "messages_with_thinking": 1,
        "usage": _u(16, 208, 11808, 6, 12038, 0.036396),
    },
    # one legacy gateway-injected assistant line; its usage has input/output/totalTokens only (all 0)
    ("HUSTLERLOGAN__clawdbackup", "main", "1ee3c374-ecfa-4686-a3c1-6cb899e72696"): {
        "messages": 1, "messages_by_role": {"assistant": 1},
        "tool_calls": 0, "exec_calls": 0, "messages_with_thinking": 0,
        "usage": _u(0, 0, 0, 0, 0, 0),
    },
    ("sirdeuce__nucbox-backup", "main", "29330952-50b3-43df-bbfe-a0e2046f3800"): {
        "messages": 198, "messages_by_role": {"user": 101, "assistant": 97},
        "tool_calls": 0, "exec_calls": 0, "messages_with_thinking": 0,
        "usage": _u(397312, 809, 0, 0, 398121, 0),
    },
    # header id differs from the file name (before-compaction.jsonl)
    ("pi-fixture", "pi", "ffae836b-9420-4060-ac13-7745215f90ff"): {
        "messages": 990, "messages_by_role": {"user": 55, "assistant": 484, "toolResult": 448, "bashExecution": 3},
        "tool_calls": 454, "exec_calls": 206, "messages_with_thinking": 49,
        "usage": _u(3689, 187895, 54693675, 1685320, 56570579, 42.5959075),
    },
}


# --------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def samples():
    if not SAMPLES.is_dir():
        message = f"sample transcripts not found at {SAMPLES} (expected ../shared/samples beside the repository)"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message + "; they are required when CI=true")
        pytest.skip(message)
    return SAMPLES


@pytest.fixture(scope="module")
def expected_files(samples):
    """{(server, agent): [transcript files]} as the oracle sees them."""
    groups = {}
    for (server, agent), files in oracle.group_files(samples, exclude=EXCLUDED_SERVERS).items():
        if agent is None:
            if server == PI_SERVER:
                assert files == [samples / PI_FILE_REL], f"{PI_SERVER}: {len(files)} transcript files"
                groups[PI_GROUP] = files
                continue
            pytest.fail(f"{server}: {len(files)} transcript files outside an agents/<id>/sessions/ folder")
        groups[(server, agent)] = files
    return groups


@pytest.fixture(scope="module")
def expected(expected_files):
    return {group: oracle.count_files(files) for group, files in expected_files.items()}


@pytest.fixture(scope="module")
def expected_totals(expected):
    return oracle.sum_counts(expected.values())


def _import_all(source_root, pi_file, db_url):
    return [
        ("import samples", ic.run_cli(["import", source_root, "--db", db_url])),
        ("import pi fixture", ic.run_cli(["import", pi_file, "--server", PI_GROUP[0],
                                          "--agent", PI_GROUP[1], "--db", db_url])),
    ]


@pytest.fixture(scope="module")
def full_import(samples, tmp_path_factory):
    """The whole samples folder imported as it is, plus the pi fixture."""
    tmp = tmp_path_factory.mktemp("full")
    db_url = f"sqlite:///{tmp}/a.db"
    runs = _import_all(samples, samples / PI_FILE_REL, db_url)
    return {"db": tmp / "a.db", "url": db_url, "runs": runs}


@pytest.fixture(scope="module")
def clean_import(samples, tmp_path_factory):
    """A copy of the samples without the excluded servers, so that `stats` totals are exact."""
    tmp = tmp_path_factory.mktemp("clean")
    copy = tmp / "samples"
    skip = set(EXCLUDED_SERVERS) | {PI_SERVER}
    shutil.copytree(samples, copy, ignore=lambda d, names: [n for n in names if Path(d) == samples and n in skip])
    db_url = f"sqlite:///{tmp}/a.db"
    runs = _import_all(copy, samples / PI_FILE_REL, db_url)
    return {"db": tmp / "a.db", "url": db_url, "runs": runs}


# --------------------------------------------------------------------------------------------
# the oracle itself


def test_hand_checked_figures_match_oracle(expected):
    diffs = []
    for (server, agent, sid), want in HAND_CHECKED.items():
        got = expected.get((server, agent), {}).get("per_session", {}).get(sid)
        if got is None:
            diffs.append(f"oracle has no session {server}/{agent}/{sid}")
            continue
        for field in ("messages", "messages_by_role", "tool_calls", "exec_calls", "messages_with_thinking"):
            if got[field] != want[field]:
                diffs.append(f"{server}/{agent}/{sid}: {field} oracle={got[field]} hand={want[field]}")
        for field, value in want["usage"].items():
            if got["usage"][field] != pytest.approx(value, rel=1e-9, abs=1e-12):
                diffs.append(f"{server}/{agent}/{sid}: usage.{field} oracle={got['usage'][field]} hand={value}")
    assert not diffs, ic.report(diffs)


def test_oracle_sees_every_sample_transcript(expected_files):
    names = sorted(p.name for files in expected_files.values() for p in files)
    assert len(names) == 10, names
    assert not [n for n in names if n.endswith((".lock", ".trajectory.jsonl", ".json"))], names


def test_oracle_sample_figures(expected):
    """No bad or pending lines in the samples; sessions per group as listed in SOURCES.md."""
    sessions = {group: sorted(result["per_session"]) for group, result in expected.items()}
    assert {g: len(s) for g, s in sessions.items()} == {
        ("42naodia__moltbot-config", "main"): 2,
        ("Ccccx__openclaw-bak", "main"): 2,
        ("HUSTLERLOGAN__clawdbackup", "main"): 2,
        ("VerveAILabs__openclaw-backup", "main"): 1,
        ("sirdeuce__nucbox-backup", "main"): 1,
        PI_GROUP: 1,
    }
    assert all(r["bad_lines"] == 0 and r["pending_lines"] == 0 for r in expected.values())


# --------------------------------------------------------------------------------------------
# the importer against the oracle


def test_import_exit_status(full_import):
    failed = [ic.describe(proc, label) for label, proc in full_import["runs"] if proc.returncode != 0]
    assert not failed, "\n".join(failed)


def test_per_session_counts(full_import, expected, expected_files):
    figures = ic.db_figures(full_import["db"])
    diffs = ic.compare(expected, figures, expected_files, ignore_servers=EXCLUDED_SERVERS)
    assert not diffs, ic.report(diffs)


def test_hand_checked_figures_match_database(full_import):
    figures = ic.db_figures(full_import["db"])["sessions"]
    diffs = []
    for key, want in HAND_CHECKED.items():
        name = "%s/%s/%s" % key
        got = figures.get(key)
        if got is None:
            diffs.append(f"database has no session {name}")
            continue
        for field in ("messages", "messages_by_role", "tool_calls", "exec_calls", "messages_with_thinking"):
            if got[field] != want[field]:
                diffs.append(f"{name}: {field} db={got[field]} hand={want[field]}")
        for field, value in want["usage"].items():
            if got["usage"][field] != pytest.approx(value, rel=1e-6, abs=1e-9):
                diffs.append(f"{name}: usage.{field} db={got['usage'][field]} hand={value}")
    assert not diffs, ic.report(diffs)


def test_has_tool_calls_agrees_with_tool_call_count(full_import):
    con = ic.connect(full_import["db"])
    try:
        bad = con.execute(
            "SELECT server, agent_id, session_uuid, message_uuid FROM messages "
            "WHERE (CASE WHEN has_tool_calls THEN 1 ELSE 0 END) != "
            "(CASE WHEN COALESCE(tool_call_count, 0) > 0 THEN 1 ELSE 0 END) LIMIT 20").fetchall()
    finally:
        con.close()
    assert not bad, "has_tool_calls disagrees with tool_call_count for: " + ", ".join("/".join(map(str, r)) for r in bad)


def test_clean_import_exit_status(clean_import):
    failed = [ic.describe(proc, label) for label, proc in clean_import["runs"] if proc.returncode != 0]
    assert not failed, "\n".join(failed)


def test_clean_import_has_exactly_the_oracle_sessions(clean_import, expected, expected_files):
    diffs = ic.compare(expected, ic.db_figures(clean_import["db"]), expected_files)
    assert not diffs, ic.report(diffs)


def test_stats_totals(clean_import, expected_totals):
    got = ic.stats(clean_import["url"])
    diffs = ic.compare_stats(expected_totals, got)
    assert not diffs, ic.report(diffs)
    assert got["usage"]["cost_total"] == pytest.approx(expected_totals["usage"]["cost_total"])


def test_second_import_changes_no_count(full_import, samples):
    """Runs last in this module: imports the same samples again into the same database."""
    before = (ic.table_counts(full_import["db"]), ic.stats(full_import["url"]),
              ic.db_figures(full_import["db"]))
    runs = _import_all(samples, samples / PI_FILE_REL, full_import["url"])
    failed = [ic.describe(proc, "re-" + label) for label, proc in runs if proc.returncode != 0]
    assert not failed, "\n".join(failed)
    after = (ic.table_counts(full_import["db"]), ic.stats(full_import["url"]),
             ic.db_figures(full_import["db"]))
    assert after[0] == before[0], f"table rows before={before[0]} after={after[0]}"
    diffs = [f"stats.{k} before={before[1].get(k)} after={after[1].get(k)}"
             for k in sorted(set(before[1]) | set(after[1])) if before[1].get(k) != after[1].get(k)]
    changed = sorted("%s/%s/%s" % k for k in set(before[2]["sessions"]) | set(after[2]["sessions"])
                     if before[2]["sessions"].get(k) != after[2]["sessions"].get(k))
    diffs += [f"session figures changed: {sid}" for sid in changed]
    diffs += [f"parsed_files figures changed: {g[0]}/{g[1]}"
              for g in sorted(set(before[2]["files"]) | set(after[2]["files"]), key=str)
              if before[2]["files"].get(g) != after[2]["files"].get(g)]
    assert not diffs, ic.report(diffs)
