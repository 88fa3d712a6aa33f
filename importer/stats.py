"""Totals read back from the archive (``agentbase stats``).

Token and cost sums count each model call once (``usage_counted = 1``): the
copies OpenClaw's truncation recovery re-appends stay in the archive but are
not paid twice. A model call is a message that carries a call identity
(``call_key``), counted once, and was written by a model (not synthetic).
Shell calls are the tool calls each kind runs shell commands with
(``Source.shell_tools``). Days are UTC calendar days of the message
timestamps. ``by_source`` gives the same figures per source kind, plus what
a kind counts of its own (``Source.extra_stats``).
"""

from __future__ import annotations

import shutil

from .amounts import compact, marked_cost
from .sources import all_sources
from .store import Store
from .terminal import clean

GROUPS = {
    None: ([], []),
    "server": (["server"], ["server"]),
    "agent": (["server", "agent_id"], ["server", "agent_id"]),
    "day": (["substr(timestamp, 1, 10)"], ["day"]),
    "source": (["source"], ["source"]),
}


def _empty() -> dict:
    return {
        "sessions": 0,
        "messages": 0,
        "messages_by_role": {},
        "tool_calls": 0,
        "shell_calls": 0,
        "exec_calls": 0,  # the former name of shell_calls, kept for scripts
        "model_calls": 0,
        "unpriced_calls": 0,
        "invalid_usage": 0,  # messages whose usage is negative or not a number: not in any total
        "messages_with_thinking": 0,
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0, "cost_total": 0.0},
    }


def _shell_tools() -> dict[str, frozenset[str]]:
    """Source kind -> the tool names that run shell commands."""
    out: dict[str, set[str]] = {}
    for source in all_sources():
        out.setdefault(source.kind, set()).update(source.shell_tools)
    return {k: frozenset(v) for k, v in out.items()}


def collect(store: Store, by: str | None = None) -> dict | list[dict]:
    """Totals as one dict (with ``by_source``), or a list of dicts (one per
    group) when ``by`` is set."""
    totals = _collect(store, by)
    if by is None:
        per_kind = {t["source"] or "(none)": t for t in _collect(store, "source")}
        for source in all_sources():
            extra = source.extra_stats(store)
            if extra and source.kind in per_kind:
                per_kind[source.kind].update(extra)
        # a kind's own words for its rows (docs/vocabulary.md): its figures, not the archive's
        for row in store.query("SELECT source, native_role, COUNT(*) AS n FROM messages GROUP BY source, native_role"):
            t = per_kind.get(row["source"] or "(none)")
            if t is not None:
                t.setdefault("messages_by_native_role", {})[row["native_role"] or "(none)"] = row["n"]
        for t in per_kind.values():
            t.pop("source", None)
            t.pop("exec_calls", None)
        totals["by_source"] = per_kind
    return totals


def _collect(store: Store, by: str | None) -> dict | list[dict]:
    exprs, names = GROUPS[by]
    select = "".join(f"{e} AS [{n}], " for e, n in zip(exprs, names))
    group = (" GROUP BY " + ", ".join(exprs)) if exprs else ""
    groups: dict[tuple, dict] = {}

    def slot(row) -> dict:
        key = tuple(row[n] for n in names)
        if key not in groups:
            groups[key] = _empty()
            groups[key].update({n: v for n, v in zip(names, key)})
        return groups[key]

    u = "CASE WHEN usage_counted = 1 THEN {} ELSE 0 END"
    for row in store.query(
        f"SELECT {select}role, COUNT(*) AS n, SUM(has_thinking) AS thinking, "
        f"SUM({u.format('COALESCE(input_tokens, 0)')}) AS input, "
        f"SUM({u.format('COALESCE(output_tokens, 0)')}) AS output, "
        f"SUM({u.format('COALESCE(cache_read_tokens, 0)')}) AS cache_read, "
        f"SUM({u.format('COALESCE(cache_write_tokens, 0)')}) AS cache_write, "
        f"SUM({u.format('COALESCE(total_tokens, 0)')}) AS total, "
        f"SUM({u.format('COALESCE(cost_usd, 0)')}) AS cost, "
        "SUM(CASE WHEN usage_counted = 1 AND call_key IS NOT NULL AND is_synthetic = 0 THEN 1 ELSE 0 END) AS calls, "
        "SUM(CASE WHEN usage_counted = 1 AND cost_source = 'unpriced' THEN 1 ELSE 0 END) AS unpriced, "
        "SUM(CASE WHEN usage_invalid = 1 THEN 1 ELSE 0 END) AS invalid "
        f"FROM messages{group}{',' if group else ' GROUP BY'} role"
    ):
        t = slot(row)
        t["messages"] += row["n"]
        t["messages_by_role"][row["role"] or "(none)"] = row["n"]
        t["messages_with_thinking"] += int(row["thinking"] or 0)
        t["model_calls"] += int(row["calls"] or 0)
        t["unpriced_calls"] += int(row["unpriced"] or 0)
        t["invalid_usage"] += int(row["invalid"] or 0)
        usage = t["usage"]
        usage["input"] += int(row["input"] or 0)
        usage["output"] += int(row["output"] or 0)
        usage["cacheRead"] += int(row["cache_read"] or 0)
        usage["cacheWrite"] += int(row["cache_write"] or 0)
        usage["totalTokens"] += int(row["total"] or 0)
        usage["cost_total"] += float(row["cost"] or 0.0)
    shell = _shell_tools()
    for row in store.query(f"SELECT {select}source, tool_name, COUNT(*) AS n FROM tool_calls{group}"
                           f"{',' if group else ' GROUP BY'} source, tool_name"):
        t = slot(row)
        t["tool_calls"] += row["n"]
        if row["tool_name"] in shell.get(row["source"], ()):
            t["shell_calls"] += row["n"]
            t["exec_calls"] += row["n"]
    if by == "day":
        for row in store.query(f"SELECT {select}COUNT(DISTINCT session_id) AS n FROM messages{group}"):
            slot(row)["sessions"] = row["n"]
    else:
        for row in store.query(f"SELECT {select}COUNT(*) AS n FROM sessions{group}"):
            if row["n"]:
                slot(row)["sessions"] = row["n"]
        for row in store.query(
            f"SELECT {select}SUM(bad_lines) AS bad, SUM(pending_lines) AS pending, COUNT(*) AS files "
            f"FROM parsed_files WHERE COALESCE(session_type, '') <> 'index'{group}"
        ):
            if row["files"]:
                t = slot(row)
                t["bad_lines"] = int(row["bad"] or 0)
                t["pending_lines"] = int(row["pending"] or 0)
                t["files"] = row["files"]
    for t in groups.values():
        t["usage"]["cost_total"] = round(t["usage"]["cost_total"], 8)
        t.setdefault("bad_lines", 0)
        t.setdefault("pending_lines", 0)
        t.setdefault("files", 0)
    if by is None:
        return groups.get((), {**_empty(), "bad_lines": 0, "pending_lines": 0, "files": 0})
    return [groups[k] for k in sorted(groups, key=lambda k: tuple("" if v is None else str(v) for v in k))]


def format_table(totals: dict | list[dict], by: str | None, width: int | None = None) -> str:
    """Human-readable totals (with a line per source kind when there are several), fitting ``width``
    columns (the terminal's): every figure when there is room, the main ones otherwise."""
    rows = totals if isinstance(totals, list) else [totals]
    names = list(GROUPS[by][1])
    if by is None and isinstance(totals, dict) and len(totals.get("by_source") or {}) > 1:
        names = ["source"]
        rows = [{**t, "source": kind} for kind, t in sorted(totals["by_source"].items())]
        rows.append({**totals, "source": "all"})
    header = names + ["sessions", "messages", "user", "assistant", "toolResult", "tool_calls", "shell",
                      "model_calls", "thinking", "input", "output", "cacheRead", "cacheWrite", "totalTokens",
                      "cost_usd", "unpriced", "invalid"]
    if by != "day":
        header += ["bad", "pending"]
    table = [header]
    for t in rows:
        roles = t["messages_by_role"]
        u = t["usage"]
        line = [clean(t.get(n)) for n in names] + [  # server, agent, source: transcript text
            str(t["sessions"]), str(t["messages"]), str(roles.get("user", 0)), str(roles.get("assistant", 0)),
            str(roles.get("toolResult", 0)), str(t["tool_calls"]), str(t["shell_calls"]), str(t["model_calls"]),
            str(t["messages_with_thinking"]), str(u["input"]), str(u["output"]), str(u["cacheRead"]),
            str(u["cacheWrite"]), str(u["totalTokens"]), f"{u['cost_total']:.4f}", str(t["unpriced_calls"]),
            str(t["invalid_usage"]),
        ]
        if by != "day":
            line += [str(t.get("bad_lines", 0)), str(t.get("pending_lines", 0))]
        table.append(line)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    width = width or shutil.get_terminal_size((80, 24)).columns
    if sum(widths) + 2 * (len(widths) - 1) <= width:
        return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in table)
    return _narrow(rows, names, width)


def _narrow(rows: list[dict], names: list[str], width: int) -> str:
    """The figures a terminal of ``width`` columns has room for (at least 80): compact numbers, the
    name columns cut; every figure is in the wider table and in --json."""
    header = names + ["sessions", "messages", "tools", "shell", "calls", "tokens", "cost"]
    table = [header]
    for t in rows:
        u = t["usage"]
        table.append([clean(t.get(n)) for n in names] + [
            compact(t["sessions"]), compact(t["messages"]), compact(t["tool_calls"]), compact(t["shell_calls"]),
            compact(t["model_calls"]), compact(u["totalTokens"]), marked_cost(u["cost_total"], t["unpriced_calls"])])
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    room = max(width, 80) - (sum(widths[len(names):]) + 2 * (len(widths) - 1))
    for i in range(len(names)):  # the names give way
        widths[i] = max(len(header[i]), min(widths[i], room // len(names)))
    lines = []
    for r in table:
        cells = [(c if len(c) <= widths[i] else c[:widths[i] - 1] + "…").ljust(widths[i]) if i < len(names)
                 else c.rjust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    lines.append("tools: tool calls; calls: model calls; *: some unpriced. Every figure: --json")
    return "\n".join(lines)
