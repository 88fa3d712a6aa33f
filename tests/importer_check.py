"""Run the importer CLI and read back what it stored, for comparison with tests/oracle.py.

Only the CLI (`python -m importer ...`) and the documented tables are used: nothing of the
importer's code is imported here. Everything this module reports is counts, ids, names of
fields and exit statuses, never transcript text.
"""

import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
USAGE_FIELDS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost_total")
COUNT_FIELDS = ("messages", "tool_calls", "exec_calls", "messages_with_thinking")
EXEC_TOOL_NAMES = ("exec", "bash")
MAX_DIFF_LINES = 60


# --------------------------------------------------------------------------------------------
# running the CLI


def run_cli(args, timeout=1800):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "importer", *[str(a) for a in args]],
                          cwd=str(REPO_ROOT), env=env, capture_output=True, text=True,
                          errors="replace", timeout=timeout)


def describe(proc, label):
    """One line about a finished CLI run: exit status, traceback frames, exception type.

    The text of error messages is left out on purpose: it could quote transcript content.
    """
    lines = [line for line in (proc.stderr or "").splitlines() if line.strip()]
    frames = [line.strip() for line in lines if line.strip().startswith('File "')]
    exc_type = ""
    if lines:
        match = re.match(r"^([A-Za-z_][\w.]*)(:|$)", lines[-1].strip())
        if match:
            exc_type = match.group(1)
    return (f"{label}: exit status {proc.returncode}; {len(lines)} stderr lines; "
            f"last frames {frames[-4:]}; final line starts with {exc_type!r}")


def stats(db_url):
    proc = run_cli(["stats", "--db", db_url, "--json"])
    status = proc.returncode  # assert on the int only: pytest would print the process's output
    assert status == 0, describe(proc, "importer stats")
    try:
        value = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"importer stats --json did not print one JSON object ({len(proc.stdout)} chars)")
    assert isinstance(value, dict), "importer stats --json did not print a JSON object"
    return value


# --------------------------------------------------------------------------------------------
# reading the database


def connect(db_path):
    db_path = Path(db_path)
    assert db_path.is_file(), f"the importer wrote no database at {db_path}"
    return sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)


def _blank():
    return {"messages": 0, "messages_by_role": {}, "tool_calls": 0, "exec_calls": 0,
            "messages_with_thinking": 0, "usage": {k: 0 for k in USAGE_FIELDS},
            "session_rows": 0, "message_count": 0, "message_tool_call_count": 0}


def db_figures(db_path):
    """{"sessions": {(server, agent, sid): figures}, "files": {(server, agent): {...}}}."""
    con = connect(db_path)
    try:
        sessions = {}

        def fig(key):
            return sessions.setdefault(tuple(key), _blank())

        for server, agent, sid, rows, message_count in con.execute(
                "SELECT server, agent_id, session_uuid, COUNT(*), SUM(COALESCE(message_count, 0)) "
                "FROM sessions GROUP BY server, agent_id, session_uuid"):
            f = fig((server, agent, sid))
            f["session_rows"] = rows
            f["message_count"] = message_count

        for row in con.execute(
                # by the kind's own word (native_role: the oracle counts message.role as written)
                "SELECT server, agent_id, session_uuid, COALESCE(native_role, ''), COUNT(*), "
                "SUM(CASE WHEN has_thinking THEN 1 ELSE 0 END), SUM(COALESCE(tool_call_count, 0)), "
                "SUM(CASE WHEN usage_counted THEN COALESCE(input_tokens, 0) ELSE 0 END), "
                "SUM(CASE WHEN usage_counted THEN COALESCE(output_tokens, 0) ELSE 0 END), "
                "SUM(CASE WHEN usage_counted THEN COALESCE(cache_read_tokens, 0) ELSE 0 END), "
                "SUM(CASE WHEN usage_counted THEN COALESCE(cache_write_tokens, 0) ELSE 0 END), "
                "SUM(CASE WHEN usage_counted THEN COALESCE(total_tokens, 0) ELSE 0 END), "
                "SUM(CASE WHEN usage_counted THEN COALESCE(cost_usd, 0) ELSE 0 END) "
                "FROM messages GROUP BY server, agent_id, session_uuid, COALESCE(native_role, '')"):
            server, agent, sid, role, n, thinking, tool_call_count = row[:7]
            f = fig((server, agent, sid))
            f["messages"] += n
            f["messages_by_role"][role] = f["messages_by_role"].get(role, 0) + n
            f["messages_with_thinking"] += thinking or 0
            f["message_tool_call_count"] += tool_call_count or 0
            for name, value in zip(USAGE_FIELDS, row[7:]):
                f["usage"][name] += value or 0

        for server, agent, sid, n, n_exec in con.execute(
                "SELECT server, agent_id, session_uuid, COUNT(*), "
                "SUM(CASE WHEN tool_name IN (?, ?) THEN 1 ELSE 0 END) "
                "FROM tool_calls GROUP BY server, agent_id, session_uuid", EXEC_TOOL_NAMES):
            f = fig((server, agent, sid))
            f["tool_calls"] = n
            f["exec_calls"] = n_exec or 0

        files = {}
        for server, agent, path, bad, pending in con.execute(
                "SELECT server, agent_id, file_path, MAX(COALESCE(bad_lines, 0)), "
                "MAX(COALESCE(pending_lines, 0)) FROM parsed_files "
                "GROUP BY server, agent_id, file_path"):
            g = files.setdefault((server, agent), {"bad_lines": 0, "pending_lines": 0, "names": set()})
            g["bad_lines"] += bad or 0
            g["pending_lines"] += pending or 0
            g["names"].add(Path(path).name)
    finally:
        con.close()
    return {"sessions": sessions, "files": files}


def table_counts(db_path):
    con = connect(db_path)
    try:
        return {table: con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                for table in ("sessions", "messages", "tool_calls", "parsed_files")}
    finally:
        con.close()


# --------------------------------------------------------------------------------------------
# comparing


def close(a, b):
    return math.isclose(float(a or 0), float(b or 0), rel_tol=1e-6, abs_tol=1e-9)


def compare(expected, figures, expected_files=None, ignore_servers=(), check_files=True):
    """Differences between oracle results and the database, as lines of counts and ids.

    expected: {(server, agent): oracle.count_files(...) result}
    expected_files: {(server, agent): [paths]} (optional): every one must appear in parsed_files.
    Database sessions of servers in ignore_servers are left out; any other session the oracle
    does not know is reported. check_files=False skips the parsed_files checks.
    """
    diffs = []
    want_sessions = {}
    for (server, agent), result in expected.items():
        for sid, counts in result["per_session"].items():
            want_sessions[(server, agent, sid)] = counts
    got_sessions = {k: v for k, v in figures["sessions"].items() if k[0] not in ignore_servers}

    for key in sorted(set(want_sessions) - set(got_sessions), key=str):
        diffs.append("missing session %s/%s/%s" % key)
    for key in sorted(set(got_sessions) - set(want_sessions), key=str):
        diffs.append("unexpected session %s/%s/%s (%d messages)" % (key + (got_sessions[key]["messages"],)))

    for key in sorted(set(want_sessions) & set(got_sessions), key=str):
        want, got = want_sessions[key], got_sessions[key]
        name = "%s/%s/%s" % key
        if got["session_rows"] != 1:
            diffs.append(f"{name}: {got['session_rows']} rows in sessions, expected 1")
        if got["message_count"] != want["messages"]:
            diffs.append(f"{name}: sessions.message_count={got['message_count']} oracle={want['messages']}")
        for field in COUNT_FIELDS:
            if got[field] != want[field]:
                diffs.append(f"{name}: {field} db={got[field]} oracle={want[field]}")
        if got["message_tool_call_count"] != want["tool_calls"]:
            diffs.append(f"{name}: sum(messages.tool_call_count)={got['message_tool_call_count']} "
                         f"oracle={want['tool_calls']}")
        if got["messages_by_role"] != want["messages_by_role"]:
            diffs.append(f"{name}: messages_by_role db={sorted(got['messages_by_role'].items())} "
                         f"oracle={sorted(want['messages_by_role'].items())}")
        for field in USAGE_FIELDS:
            g, w = got["usage"][field], want["usage"][field]
            if not (close(g, w) if field == "cost_total" else g == w):
                diffs.append(f"{name}: usage.{field} db={g} oracle={w}")

    for (server, agent), result in sorted(expected.items(), key=str):
        if not check_files:
            break
        files = figures["files"].get((server, agent))
        if files is None:
            diffs.append(f"{server}/{agent}: no parsed_files rows")
            continue
        for field in ("bad_lines", "pending_lines"):
            if files[field] != result[field]:
                diffs.append(f"{server}/{agent}: parsed_files.{field} db={files[field]} oracle={result[field]}")
        for path in (expected_files or {}).get((server, agent), []):
            if Path(path).name not in files["names"]:
                diffs.append(f"{server}/{agent}: file {Path(path).name} not in parsed_files")
    return diffs


# OpenClaw's and pi's message roles in the archive's vocabulary (docs/vocabulary.md): stats counts
# those; the store keeps the oracle's raw words in native_role.
VOCABULARY = {"user": "user", "assistant": "assistant", "toolResult": "toolResult", "bashExecution": "user"}


def compare_stats(expected_totals, got):
    """Differences between oracle totals and `importer stats --json`."""
    diffs = []
    for field in ("sessions", "messages", "tool_calls", "exec_calls", "messages_with_thinking",
                  "bad_lines", "pending_lines"):
        if got.get(field) != expected_totals[field]:
            diffs.append(f"stats.{field}={got.get(field)} oracle={expected_totals[field]}")
    roles = got.get("messages_by_role")
    want_roles: dict = {}
    for role, n in expected_totals["messages_by_role"].items():
        word = VOCABULARY.get(role, "system")
        want_roles[word] = want_roles.get(word, 0) + n
    if roles != want_roles:
        diffs.append(f"stats.messages_by_role={sorted(roles.items()) if isinstance(roles, dict) else roles} "
                     f"oracle={sorted(want_roles.items())}")
    usage = got.get("usage") if isinstance(got.get("usage"), dict) else {}
    for field in USAGE_FIELDS:
        g, w = usage.get(field), expected_totals["usage"][field]
        if field == "cost_total":
            same = isinstance(g, (int, float)) and close(g, w)
        else:
            same = g == w
        if not same:
            diffs.append(f"stats.usage.{field}={g} oracle={w}")
    return diffs


def report(diffs):
    shown = diffs[:MAX_DIFF_LINES]
    more = len(diffs) - len(shown)
    return "\n".join(shown + ([f"... and {more} more"] if more > 0 else []))
