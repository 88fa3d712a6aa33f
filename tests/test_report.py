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


@pytest.mark.parametrize("kind", ["daily", "weekly", "monthly", "session", "blocks"])
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


def test_weeks_are_their_days_from_monday(archive):
    from datetime import date, timedelta

    days = run_json(archive, "report", "daily", "--timezone", "Asia/Shanghai")["rows"]
    weeks = run_json(archive, "report", "weekly", "--timezone", "Asia/Shanghai")["rows"]
    want: dict[str, int] = {}
    for row in days:
        d = date.fromisoformat(row["day"])
        monday = (d - timedelta(days=d.weekday())).isoformat()
        want[monday] = want.get(monday, 0) + row["totalTokens"]
    assert {w["week"]: w["totalTokens"] for w in weeks} == want
    assert all(date.fromisoformat(w["week"]).weekday() == 0 for w in weeks)


def test_blocks_are_five_hour_windows_from_their_first_call(archive, tmp_path):
    """Each block lasts five hours from the hour of its first call; every call of the archive is in the
    block whose window holds it, and a block starts only after the one before it ended."""
    import sqlite3
    from datetime import datetime, timedelta, timezone

    blocks = run_json(archive, "report", "blocks", "--timezone", "UTC")["rows"]
    assert len(blocks) >= 2
    starts = [datetime.fromisoformat(b["start"]) for b in blocks]
    for b, start in zip(blocks, starts):
        assert datetime.fromisoformat(b["end"]) - start == timedelta(hours=5) and start.minute == 0
        assert start <= datetime.fromisoformat(b["last_call"]) < datetime.fromisoformat(b["end"])
    for before, after in zip(blocks, blocks[1:]):
        assert datetime.fromisoformat(after["start"]) >= datetime.fromisoformat(before["last_call"])
        assert datetime.fromisoformat(after["start"]) + timedelta(hours=1) > datetime.fromisoformat(before["end"])
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    assert [b["active"] for b in blocks] == [datetime.fromisoformat(b["end"]) > now for b in blocks]
    # the oracle: each counted call's tokens go to the block whose window holds its minute
    db = Path(archive["AGENTBASE_HOME"]) / "agentbase.db"
    conn = sqlite3.connect(db)
    calls = conn.execute("SELECT timestamp, COALESCE(total_tokens, 0) FROM messages WHERE usage_counted = 1 AND "
                         "timestamp IS NOT NULL AND (total_tokens OR cost_source IS NOT NULL OR input_tokens)").fetchall()
    conn.close()
    got = [0] * len(blocks)
    for stamp, tokens in calls:
        at = datetime.fromisoformat(stamp[:16])
        hits = [i for i, s in enumerate(starts) if s <= at < s + timedelta(hours=5)]
        assert len(hits) == 1, stamp
        got[hits[0]] += tokens
    assert got == [b["totalTokens"] for b in blocks]


def test_order_and_the_unpriced_label(archive):
    asc = run_json(archive, "report", "daily")["rows"]
    desc = run_json(archive, "report", "daily", "--order", "desc")["rows"]
    assert desc == list(reversed(asc)) and len(asc) > 1
    table = agentbase("report", "daily", env={**archive, "COLUMNS": "100"}).stdout
    assert "$0.00*" not in table
    unpriced = [r for r in asc if r["unpriced_calls"] and not r["cost_usd"]]
    for r in unpriced:
        line = next(x for x in table.splitlines() if x.startswith(r["day"]))
        assert line.rstrip().endswith("unpriced")
    # cents on every row: two decimals, or "<$0.01"
    import re

    costs = [x.split()[-1] for x in table.splitlines() if re.match(r"\d{4}-\d{2}-\d{2} ", x)]
    assert costs and all(re.fullmatch(r"(\$[\d,]+\.\d\d\*?|<\$0\.01\*?|unpriced)", c) for c in costs), costs
    sessions = run_json(archive, "report", "session")["rows"]
    text = agentbase("report", "session", env={**archive, "COLUMNS": "200"}).stdout
    for r in sessions:
        assert f"{r['agent']}: " in text  # every session named with its agent, never a bare id
