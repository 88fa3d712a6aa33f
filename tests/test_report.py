"""agentbase report: its figures equal stats' and the daily_cost canned query's on the same archive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CODEX = REPO.parent / "shared" / "other-samples" / "codex"


def agentbase(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "importer", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, env=env)


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    home = tmp_path_factory.mktemp("report")
    env = dict(os.environ, AGENTBASE_HOME=str(home), AGENTBASE_CONFIG=str(home / "none.yml"), COLUMNS="80")
    assert agentbase("import", "--demo", "-q", env=env).returncode == 0
    if CODEX.is_dir():  # a kind whose costs are computed from the price table
        assert agentbase("import", CODEX / "EdofEngland__code_butler", "-q", env=env).returncode == 0
    elif os.environ.get("CI") == "true":
        pytest.fail(f"samples folder missing under CI: {CODEX}")
    return env


def run_json(env, *args) -> dict:
    proc = agentbase(*args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("kind", ["daily", "monthly", "session"])
def test_totals_equal_stats(archive, kind):
    stats = run_json(archive, "stats")
    report = run_json(archive, "report", kind, "--timezone", "Asia/Shanghai")
    usage = stats["usage"]
    totals = report["totals"]
    for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
        assert totals[key] == usage[key], key
    assert totals["cost_usd"] == pytest.approx(usage["cost_total"], abs=1e-9)
    assert totals["unpriced_calls"] == stats["unpriced_calls"]
    # the rows add up to the totals
    for key in ("input", "output", "totalTokens", "unpriced_calls"):
        assert sum(r[key] for r in report["rows"]) == totals[key]
    assert report["price_table"] and report["timezone"] == "Asia/Shanghai"


def test_by_source_and_agent(archive):
    stats = run_json(archive, "stats")
    for kind, figures in stats["by_source"].items():
        report = run_json(archive, "report", "daily", "--source", kind)
        assert report["totals"]["totalTokens"] == figures["usage"]["totalTokens"], kind
    per_agent = run_json(archive, "stats", "--by", "agent")
    first = per_agent[0]
    report = run_json(archive, "report", "monthly", "--agent", first["agent_id"], "--server", first["server"])
    assert report["totals"]["totalTokens"] == first["usage"]["totalTokens"]


def test_days_equal_the_daily_cost_canned_query(archive, tmp_path):
    """The same local days, tokens and cost as the explorer's daily_cost, day by day."""
    snap = tmp_path / "snapshot.db"
    assert agentbase("export", "-o", snap, "--timezone", "Asia/Shanghai", "-q", env=archive).returncode == 0
    report = run_json(archive, "report", "daily", "--timezone", "Asia/Shanghai", "--breakdown")
    from datasette.app import Datasette
    import asyncio

    ds = Datasette([str(snap)], metadata=json.loads(json.dumps(__import__("yaml").safe_load(
        (REPO / "metadata.yml").read_text()))))

    async def day_rows(day):
        r = await ds.client.get(f"/snapshot/daily_cost.json?_shape=array&day={day}&limit=1000")
        return r.json()

    for row in report["rows"]:
        got = [r for r in asyncio.run(day_rows(row["day"])) if not r["is_total"]]  # the totals row: below
        assert sum(r["total_tokens"] or 0 for r in got) == row["totalTokens"], row["day"]
        assert sum(r["cost_usd"] or 0 for r in got) == pytest.approx(row["cost_usd"], abs=1e-5), row["day"]
        assert sum(r["unpriced_calls"] for r in got) == row["unpriced_calls"], row["day"]
        assert {r["model"] for r in got} == {b["model"] for b in row["breakdown"]}


def test_the_table_fits_80_columns_and_names_the_price_table(archive):
    proc = agentbase("report", "daily", "--breakdown", env=archive)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    from importer.report import _width

    assert max(_width(line) for line in lines) <= 80
    assert lines[0].startswith("Day") and any(line.startswith("Total") for line in lines)
    if CODEX.is_dir():
        assert "price table of" in proc.stdout
    wide = agentbase("report", "monthly", env={**archive, "COLUMNS": "160"})
    assert "Models" in wide.stdout.splitlines()[0]


def test_a_malformed_day_is_one_line(archive):
    proc = agentbase("report", "daily", "--since", "2026-13-45", env=archive)
    assert proc.returncode == 1 and proc.stderr.strip().count("\n") == 0 and "YYYY-MM-DD" in proc.stderr
