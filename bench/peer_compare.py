#!/usr/bin/env python3
"""AgentBase next to ccusage on the same Claude Code and Codex transcripts: tokens and cost per day
and model, side by side, with every difference shown.

    python3 bench/peer_compare.py [--samples ../shared/other-samples] [--ccusage-version 20.0.24]

ccusage (npm) is installed once into ~/.cache/agentbase-bench/ccusage (the 20.0.26 package has no
native binary for this machine; 20.0.24 runs). The sample transcripts are copied into a temporary
Claude config dir (projects/<project>/...) and Codex home (sessions/...), the layouts both tools
read, and each tool reads them with its own default rules, offline, in UTC:
`ccusage claude daily --json --offline --breakdown --timezone UTC`, `ccusage codex daily --json
--offline --timezone UTC`, and `agentbase import` + `agentbase report daily --json --breakdown
--timezone UTC --source claude-code|codex`. The exit status is 0 whatever the figures are (this is
a report), 1 when a tool could not run. Nothing of the samples is printed but numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agentbase-bench" / "ccusage"
TOKENS = (("input", "inputTokens"), ("output", "outputTokens"), ("cacheWrite", "cacheCreationTokens"),
          ("cacheRead", "cacheReadTokens"))


def ccusage_binary(version: str) -> Path:
    binary = CACHE / "node_modules" / ".bin" / "ccusage"
    marker = CACHE / f".version-{version}"
    if binary.exists() and marker.exists():
        return binary
    CACHE.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(CACHE), f"ccusage@{version}"],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not binary.exists():
        sys.exit(f"cannot install ccusage@{version} with npm: {proc.stderr.strip()[-300:]}")
    marker.write_text(version)
    return binary


def arrange(samples: Path, work: Path) -> tuple[Path, Path]:
    """The samples in the layouts both tools read: <claude>/projects/<project>/..., <codex>/sessions/..."""
    claude, codex = work / "claude", work / "codex"
    for f in sorted((samples / "claude-code").rglob("*")):
        if not f.is_file() or f.suffix not in (".jsonl", ".json"):
            continue
        parts = f.relative_to(samples / "claude-code").parts
        anchor = "projects" if "projects" in parts else "mock-data" if "mock-data" in parts else None
        if anchor is None:
            continue
        dest = claude / "projects" / Path(*parts[parts.index(anchor) + 1:])
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)  # copies, not links: ccusage does not follow links
    for f in sorted((samples / "codex").rglob("*.jsonl")):
        parts = f.relative_to(samples / "codex").parts
        if "sessions" not in parts:
            continue
        dest = codex / "sessions" / Path(*parts[parts.index("sessions") + 1:])
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)
    return claude, codex


def run_ccusage(binary: Path, kind: str, home: Path, work: Path) -> tuple[list[dict], dict[str, float]]:
    """(rows per day and model with their tokens (and cost, where ccusage gives one per model),
    cost per day)."""
    env = dict(os.environ, HOME=str(work), CLAUDE_CONFIG_DIR=str(home), CODEX_HOME=str(home), NO_COLOR="1")
    args = [str(binary), kind, "daily", "--json", "--offline", "--timezone", "UTC"]
    if kind == "claude":
        args.append("--breakdown")
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        sys.exit(f"ccusage {kind} failed: {proc.stderr.strip()[-300:]}")
    data = json.loads(proc.stdout)
    rows, days = [], {}
    for day in data.get("daily", []):
        date = day.get("date")
        days[date] = float(day.get("totalCost") if "totalCost" in day else day.get("costUSD") or 0.0)
        if day.get("modelBreakdowns"):  # claude: a list, with a cost per model
            for m in day["modelBreakdowns"]:
                rows.append({"day": date, "model": m.get("modelName"), **{k: int(m.get(c) or 0) for k, c in TOKENS},
                             "cost": float(m.get("cost") or 0.0)})
        else:  # codex: a map of models (inputTokens already without the cached ones), one cost per day
            models = day.get("models") or {}
            for name, m in models.items():
                rows.append({"day": date, "model": name, **{k: int(m.get(c) or 0) for k, c in TOKENS},
                             "cost": days[date] if len(models) == 1 else None})
    return rows, days


def run_agentbase(home: Path, kind: str, work: Path) -> tuple[list[dict], dict[str, float]]:
    env = dict(os.environ, AGENTBASE_HOME=str(work / "agentbase"), AGENTBASE_CONFIG=str(work / "none.yml"),
               HOME=str(work))
    db = f"sqlite:///{work / 'agentbase' / 'peer.db'}"
    imp = subprocess.run([sys.executable, "-m", "importer", "import", str(home), "--db", db, "-q"], cwd=REPO,
                         capture_output=True, text=True, env=env)
    if imp.returncode not in (0, 1):
        sys.exit(f"agentbase import failed: {imp.stderr.strip()[-300:]}")
    source = {"claude": "claude-code", "codex": "codex"}[kind]
    rep = subprocess.run([sys.executable, "-m", "importer", "report", "daily", "--json", "--breakdown", "--timezone",
                          "UTC", "--source", source, "--db", db], cwd=REPO, capture_output=True, text=True, env=env)
    if rep.returncode != 0:
        sys.exit(f"agentbase report failed: {rep.stderr.strip()[-300:]}")
    rows, days = [], {}
    for day in json.loads(rep.stdout)["rows"]:
        days[day["day"]] = day["cost_usd"]
        for m in day["breakdown"]:
            rows.append({"day": day["day"], "model": m["model"], **{k: m[k] for k, _ in TOKENS},
                         "cost": m["cost_usd"], "unpriced": m["unpriced_calls"]})
    return rows, days


def compare(kind: str, theirs: tuple[list[dict], dict], ours: tuple[list[dict], dict]) -> None:
    (t_rows, t_days), (o_rows, o_days) = theirs, ours
    t = {(r["day"], r["model"]): r for r in t_rows}
    o = {(r["day"], r["model"]): r for r in o_rows}
    print(f"\n== {kind}: tokens (input/output/cache write/cache read) and cost per day and model")
    print(f"{'day':<10}  {'model':<36}  {'tool':<9}  {'tokens':>34}  {'cost':>10}")
    print("-" * 106)

    def fmt(r) -> str:
        toks = "/".join(f"{r[k]:,}" for k, _ in TOKENS)
        cost = "" if r.get("cost") is None else f"${r['cost']:.4f}"
        extra = f"  +{r['unpriced']} unpriced" if r.get("unpriced") else ""
        return f"{toks:>34}  {cost:>10}{extra}"

    totals = {"ccusage": [0] * 4, "agentbase": [0] * 4}
    for day in sorted(set(t_days) | set(o_days)):
        for model in sorted({m for d, m in t if d == day} | {m for d, m in o if d == day}):
            a, b = t.get((day, model)), o.get((day, model))
            for who, r in (("ccusage", a), ("agentbase", b)):
                print(f"{day:<10}  {model[:36]:<36}  {who:<9}  " + (fmt(r) if r else f"{'(none)':>34}"))
                if r:
                    totals[who] = [x + r[k] for x, (k, _) in zip(totals[who], TOKENS)]
            if a and b and any(a[k] != b[k] for k, _ in TOKENS):
                print(f"{'':<10}  {'':<36}  {'diff':<9}  {'/'.join(f'{b[k] - a[k]:+,}' for k, _ in TOKENS):>34}")
        tc, oc = t_days.get(day), o_days.get(day)
        line = f"{day:<10}  {'(day cost)':<36}  {'':<9}  {'':>34}  ccusage " + (
            f"${tc:.4f}" if tc is not None else "-") + "  agentbase " + (f"${oc:.4f}" if oc is not None else "-")
        if tc is not None and oc is not None:
            line += f"  diff {oc - tc:+.4f}"
        print(line)
    print("-" * 106)
    for who, sums in totals.items():
        cost = sum(v for v in (t_days if who == "ccusage" else o_days).values() if v is not None)
        print(f"{'total':<10}  {'':<36}  {who:<9}  {'/'.join(f'{x:,}' for x in sums):>34}  ${cost:.4f}")


def peer_main(description: str, prefix: str, run, timezone: bool = False) -> None:
    """A peer bench's main (this one's and peers.py's): its options (--samples, --ccusage-version,
    --timezone where it takes one, --keep), the ccusage binary, the samples arranged in a temporary
    folder, then ``run(args, binary, work, claude, codex)``; the folder is removed unless --keep."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--samples", default=str(REPO.parent / "shared" / "other-samples"))
    ap.add_argument("--ccusage-version", default="20.0.24")
    if timezone:
        ap.add_argument("--timezone", default="UTC")
    ap.add_argument("--keep", action="store_true", help="keep the temporary trees")
    args = ap.parse_args()
    samples = Path(args.samples)
    if not (samples / "claude-code").is_dir() or not (samples / "codex").is_dir():
        sys.exit(f"no samples at {samples}")
    binary = ccusage_binary(args.ccusage_version)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        claude, codex = arrange(samples, work)
        run(args, binary, work, claude, codex)
    finally:
        if args.keep:
            print(f"\nkept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    def run(args, binary: Path, work: Path, claude: Path, codex: Path) -> None:
        for kind, home in (("claude", claude), ("codex", codex)):
            compare(kind, run_ccusage(binary, kind, home, work), run_agentbase(home, kind, work))

    peer_main(__doc__.splitlines()[0], "agentbase-peer-", run)


if __name__ == "__main__":
    main()
