#!/usr/bin/env python3
"""AgentBase's figures next to ccusage's on the same Claude Code and Codex transcripts, per day and in
total, with the `agentbase report --explain` lines that account for each difference.

    python3 bench/peers.py [--samples ../shared/other-samples] [--ccusage-version 20.0.24] [--timezone UTC]

ccusage is installed from npm into ~/.cache/agentbase-bench/ccusage when it is not there (never a global
install; bench/peer_compare.py's installer and sample layout: the samples are copied into a temporary
Claude config dir, projects/<project>/..., and Codex home, sessions/...). Both tools read the copies
offline in the same zone: `ccusage claude daily --json` and `ccusage codex daily --json`, and
`agentbase import` + `agentbase report daily --json --explain --source claude-code|codex`, then again per
day that differs (`--since D --until D`) for that day's reasons. Only numbers and the --explain lines
(counts, never transcript text) are printed. Exit status 0 whatever the figures are, 1 when a tool could
not run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_compare import REPO, peer_main  # noqa: E402

TOKENS = (("input", "inputTokens"), ("output", "outputTokens"), ("cacheWrite", "cacheCreationTokens"),
          ("cacheRead", "cacheReadTokens"))
SOURCES = {"claude": "claude-code", "codex": "codex"}


def ccusage_days(binary: Path, kind: str, home: Path, work: Path, zone: str) -> dict[str, dict]:
    """day -> {input, output, cacheWrite, cacheRead, cost} as ccusage reports them."""
    env = dict(os.environ, HOME=str(work), CLAUDE_CONFIG_DIR=str(home), CODEX_HOME=str(home), NO_COLOR="1")
    proc = subprocess.run([str(binary), kind, "daily", "--json", "--offline", "--timezone", zone],
                          capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        sys.exit(f"ccusage {kind} daily failed: {proc.stderr.strip()[-300:]}")
    out = {}
    for day in json.loads(proc.stdout).get("daily", []):
        cost = day.get("totalCost") if "totalCost" in day else day.get("costUSD")
        out[day["date"]] = {**{k: int(day.get(c) or 0) for k, c in TOKENS}, "cost": float(cost or 0.0)}
    return out


class AgentBase:
    """One archive of both homes; reports per kind (and per day) with --explain."""

    def __init__(self, work: Path, zone: str):
        self.env = dict(os.environ, AGENTBASE_HOME=str(work / "agentbase"), AGENTBASE_CONFIG=str(work / "none.yml"),
                        HOME=str(work))
        self.db = f"sqlite:///{work / 'agentbase' / 'peers.db'}"
        self.zone = zone

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "importer", *args, "--db", self.db], cwd=REPO,
                              capture_output=True, text=True, env=self.env)

    def load(self, *homes: Path) -> None:
        for home in homes:
            proc = self.run("import", str(home), "-q")
            if proc.returncode not in (0, 1):
                sys.exit(f"agentbase import failed: {proc.stderr.strip()[-300:]}")

    def report(self, kind: str, day: str | None = None) -> dict:
        args = ["report", "daily", "--json", "--explain", "--timezone", self.zone, "--source", SOURCES[kind]]
        if day:
            args += ["--since", day, "--until", day]
        proc = self.run(*args)
        if proc.returncode != 0:
            sys.exit(f"agentbase report failed: {proc.stderr.strip()[-300:]}")
        return json.loads(proc.stdout)

    def days(self, report: dict) -> dict[str, dict]:
        return {r["day"]: {**{k: r[k] for k, _ in TOKENS}, "cost": r["cost_usd"], "unpriced": r["unpriced_calls"]}
                for r in report["rows"]}


def fmt(r: dict | None) -> str:
    if r is None:
        return f"{'(none)':>44}"
    toks = "/".join(f"{r[k]:,}" for k, _ in TOKENS)
    extra = f" +{r['unpriced']} unpriced" if r.get("unpriced") else ""
    return f"{toks:>34}  ${r['cost']:>8.4f}{extra}"


def diff(a: dict | None, b: dict | None) -> dict | None:
    if a is None and b is None:
        return None
    a, b = a or {k: 0 for k, _ in TOKENS} | {"cost": 0.0}, b or {k: 0 for k, _ in TOKENS} | {"cost": 0.0}
    return {**{k: b[k] - a[k] for k, _ in TOKENS}, "cost": b["cost"] - a["cost"]}


def fmt_diff(d: dict) -> str:
    return f"{'/'.join(f'{d[k]:+,}' for k, _ in TOKENS):>34}  {d['cost']:+9.4f}"


def compare(kind: str, theirs: dict[str, dict], ab: AgentBase) -> None:
    whole = ab.report(kind)
    ours = ab.days(whole)
    print(f"\n== {kind} ({SOURCES[kind]}), days in {ab.zone}: tokens input/output/cache write/cache read, cost")
    print(f"{'day':<10}  {'tool':<9}  {'tokens':>34}  {'cost':>9}")
    print("-" * 72)
    zero = {k: 0 for k, _ in TOKENS} | {"cost": 0.0}
    total = {"ccusage": dict(zero), "agentbase": dict(zero)}
    for day in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(day), ours.get(day)
        for who, r in (("ccusage", a), ("agentbase", b)):
            print(f"{day:<10}  {who:<9}  {fmt(r)}")
            if r:
                for k in total[who]:
                    total[who][k] += r[k]
        d = diff(a, b)
        if any(d[k] for k, _ in TOKENS) or abs(d["cost"]) >= 0.00005:
            print(f"{'':<10}  {'diff':<9}  {fmt_diff(d)}")
            for reason in ab.report(kind, day)["explain"]:
                print(f"{'':<10}  {'why':<9}  {reason['text']}")
    print("-" * 72)
    for who, r in total.items():
        print(f"{'total':<10}  {who:<9}  {fmt(r)}")
    print(f"{'':<10}  {'diff':<9}  {fmt_diff(diff(total['ccusage'], total['agentbase']))}")
    print("agentbase report --explain (all days):")
    for reason in whole["explain"] or [{"text": "(no reason)"}]:
        print(f"  - {reason['text']}")


def main() -> None:
    def run(args, binary: Path, work: Path, claude: Path, codex: Path) -> None:
        ab = AgentBase(work, args.timezone)
        ab.load(claude, codex)
        for kind, home in (("claude", claude), ("codex", codex)):
            compare(kind, ccusage_days(binary, kind, home, work, args.timezone), ab)

    peer_main(__doc__.splitlines()[0], "agentbase-peers-", run, timezone=True)


if __name__ == "__main__":
    main()
