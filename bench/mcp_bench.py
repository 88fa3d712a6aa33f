#!/usr/bin/env python3
"""MCP tools benchmark: each tool of datasette_agentbase/mcp_server.py on a generated snapshot.

Builds the snapshot as bench/explorer_bench.py does (its build(): a generated tree of made-up text, one long
session, rows replicated with SQL up to --messages, exported; kept and reused with --workdir), then calls
each tool's function on a read-only connection, as `agentbase mcp` does for each call (the connection opened
each time, as there), and prints the median of --repeat calls (after one warm-up) and the answer's size;
usage_report both as a first call (its one pass over the messages) and again (kept for the snapshot version).
The protocol's own cost (JSON-RPC over stdio or HTTP) is not in the figures.

Usage: python3 bench/mcp_bench.py [--messages 1000000] [--size-mb 120] [--repeat 5] [--workdir DIR]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from datasette_agentbase import mcp_server as M  # noqa: E402
from explorer_bench import build, options  # noqa: E402


def main() -> None:
    args, work = options(__doc__.splitlines()[0], 5, "agentbase-mcp-bench-")
    snapshot = build(work, args.messages, args.size_mb, args.seed)
    conn = M.open_snapshot(snapshot)
    total = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    long_id = conn.execute("SELECT id FROM sessions ORDER BY message_count DESC LIMIT 1").fetchone()[0]
    agent = conn.execute("SELECT agent_id FROM session_list GROUP BY agent_id ORDER BY COUNT(*) DESC "
                         "LIMIT 1").fetchone()[0]
    conn.close()
    calls = [
        ("search_sessions rare phrase", M.search_sessions, {"query": '"permission denied"'}),
        ("search_sessions word", M.search_sessions, {"query": "nginx"}),
        ("search_sessions Chinese", M.search_sessions, {"query": "部署"}),
        ("search_sessions word, one agent", M.search_sessions, {"query": "timeout", "agent": agent}),
        ("search_messages word", M.search_messages, {"query": "nginx"}),
        ("search_messages page 5", M.search_messages, {"query": "nginx", "offset": 80}),
        ("get_session first page (long)", M.get_session, {"session": long_id}),
        ("get_session 200k budget (long)", M.get_session, {"session": long_id, "max_chars": 200_000}),
        ("list_sessions", M.list_sessions, {}),
        ("list_sessions 7 days, one agent", M.list_sessions, {"days": 7, "agent": agent}),
        ("usage_report daily, first call", M.usage_report, {"kind": "daily"}),
        ("usage_report daily, again", M.usage_report, {"kind": "daily"}),
        ("usage_report session, first call", M.usage_report, {"kind": "session"}),
        ("usage_report session, again", M.usage_report, {"kind": "session"}),
        ("shell_commands latest day", M.shell_commands, {}),
        ("shell_commands one agent", M.shell_commands, {"agent": agent}),
    ]
    print(f"{total:,} messages; median of {args.repeat} (after one warm-up), a connection opened per call")
    for label, fn, kw in calls:
        times = []
        size = 0
        for i in range(args.repeat + 1):
            if label.endswith("first call"):
                M._usage_cache.clear()  # (reports are kept per snapshot version: this one reads the messages)
            started = time.perf_counter()
            conn = M.open_snapshot(snapshot)
            try:
                size = len(orjson.dumps(fn(conn, **kw)))
            finally:
                conn.close()
            if i:
                times.append(time.perf_counter() - started)
        print(f"  {label:<36} {statistics.median(times) * 1000:8.0f} ms  {size:>8,} bytes", flush=True)


if __name__ == "__main__":
    main()
