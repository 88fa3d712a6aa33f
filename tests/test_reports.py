"""The Reports page (/-/agentbase/reports) through Datasette's test client, on the dashboard's made-up
snapshot (tests/dashboard_fixture.py: five weeks over two months, two servers, priced and unpriced
models, names that hold markup): every figure of every report (per day, week, month, model and
session, with filters) against SQL over the snapshot's messages written here, the totals row on top
in HTML and CSV, one cost column in dollars, "unpriced" where no call had a price, no internal words
on the page, a link per row to its sessions, and the dashboard's whole-archive default."""

from __future__ import annotations

import csv
import html as htmlmod
import io
import re
import sqlite3
from datetime import date, timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest

import dashboard_fixture as DF
from datasette_agentbase import dashboard as D
from test_explorer import Site


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    return DF.build(tmp_path_factory.mktemp("reports"))


@pytest.fixture(scope="module")
def site(snapshot) -> Site:
    return Site(snapshot)


@pytest.fixture(scope="module")
def db(snapshot):
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    yield conn
    conn.close()


def report(site, query: str = "") -> dict:
    r = site.get("/-/agentbase/reports.json" + (f"?{query}" if query else ""))
    assert r.status_code == 200, r.text[:300]
    return r.json()


# -- the oracle: the counting rules, applied to the messages table ------------------------------------

def oracle(db, key: str, agent=None, server=None, source=None, start=None, end=None) -> tuple[dict, dict]:
    """(totals, figures per key) by the rules of docs/explorer.md: a message counted once
    (usage_counted = 1); a model call is one with a cost source; its tokens are total_tokens; its cost is
    cost_usd when priced (recorded or computed); unpriced calls apart. key: day, week (its Monday),
    month or model."""
    sql = ("SELECT day, model, cost_source, COALESCE(total_tokens, 0), cost_usd FROM messages "
           "WHERE usage_counted = 1 AND day IS NOT NULL")
    params: list = []
    for column, value in (("agent_id", agent), ("server", server), ("source", source)):
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    if start:
        sql += " AND day >= ?"
        params.append(start)
    if end:
        sql += " AND day <= ?"
        params.append(end)

    def zero():
        return {"messages": 0, "model_calls": 0, "tokens": 0, "cost": 0.0, "priced_calls": 0, "unpriced_calls": 0}

    total, groups = zero(), {}
    for day, model, cost_source, tokens, cost in db.execute(sql, params):
        if key == "model" and cost_source is None:
            continue
        k = {"day": day, "month": day[:7], "model": model,
             "week": (date.fromisoformat(day) - timedelta(days=date.fromisoformat(day).weekday())).isoformat()
             if key == "week" else None}[key]
        for t in (total, groups.setdefault(k, zero())):
            t["messages"] += 1
            if cost_source is not None:
                t["model_calls"] += 1
                t["tokens"] += tokens
            if cost_source in ("recorded", "computed"):
                t["priced_calls"] += 1
                t["cost"] += cost or 0.0
            if cost_source == "unpriced":
                t["unpriced_calls"] += 1
    return total, groups


def same(got: dict, want: dict, what: str) -> None:
    for name in ("messages", "model_calls", "tokens", "priced_calls", "unpriced_calls"):
        assert got[name] == want[name], (what, name, got[name], want[name])
    if want["priced_calls"]:
        assert got["cost_usd"] == pytest.approx(want["cost"], abs=1e-6), what
    else:
        assert got["cost_usd"] is None and got["cost"] == ("unpriced" if want["unpriced_calls"] else "–"), what


FILTERS = [{}, {"agent": "main"}, {"server": "beta"}, {"source": "openclaw", "from": "2026-03-20"},
           {"agent": "main", "server": "alpha", "from": "2026-03-09", "to": "2026-04-03"}, {"days": "7"}]


def query_of(by: str, f: dict) -> str:
    return "&".join([f"by={by}"] + [f"{k}={v}" for k, v in f.items()])


@pytest.mark.parametrize("by", ["day", "week", "month", "model"])
@pytest.mark.parametrize("f", FILTERS, ids=lambda f: "&".join(f"{k}={v}" for k, v in f.items()) or "none")
def test_every_figure_equals_sql(site, db, by, f):
    got = report(site, query_of(by, f))
    start = f.get("from")
    if f.get("days"):
        start = (date.fromisoformat(DF.LATEST_LOCAL_DAY) - timedelta(days=int(f["days"]) - 1)).isoformat()
    total, groups = oracle(db, by, f.get("agent"), f.get("server"), f.get("source"), start, f.get("to"))
    assert groups, "the filter selects something"
    same(got["total"], total, "total")
    rows = {r[by]: r for r in got["rows"]}
    assert set(rows) == set(groups)
    for key, want in groups.items():
        same(rows[key], want, f"{by} {key}")
    keys = [r[by] for r in got["rows"]]
    if by == "model":  # costliest first
        costs = [r["cost_usd"] or 0 for r in got["rows"]]
        assert costs == sorted(costs, reverse=True)
    else:  # newest first; asc: oldest first
        assert keys == sorted(keys, reverse=True)
        assert [r[by] for r in report(site, query_of(by, f) + "&order=asc")["rows"]] == sorted(keys)


def test_weeks_and_months_have_their_bounds(site):
    weeks = report(site, "by=week")["rows"]
    assert weeks and all(date.fromisoformat(r["from"]).weekday() == 0 for r in weeks)
    assert all((date.fromisoformat(r["to"]) - date.fromisoformat(r["from"])).days == 6 for r in weeks)
    months = {r["month"]: (r["from"], r["to"]) for r in report(site, "by=month")["rows"]}
    assert months == {"2026-03": ("2026-03-01", "2026-03-31"), "2026-04": ("2026-04-01", "2026-04-30")}


def test_per_session_equals_sql(site, db):
    got = report(site, "by=session&server=beta")
    want = {}
    for sid, cost_source, tokens, cost in db.execute(
            "SELECT session_id, cost_source, COALESCE(total_tokens, 0), cost_usd FROM messages "
            "WHERE usage_counted = 1 AND session_id IN (SELECT id FROM sessions WHERE server = 'beta')"):
        w = want.setdefault(sid, {"messages": 0, "model_calls": 0, "tokens": 0, "cost": 0.0, "priced_calls": 0,
                                  "unpriced_calls": 0})
        w["messages"] += 1
        w["model_calls"] += cost_source is not None
        w["tokens"] += tokens if cost_source is not None else 0
        w["priced_calls"] += cost_source in ("recorded", "computed")
        w["unpriced_calls"] += cost_source == "unpriced"
        w["cost"] += (cost or 0.0) if cost_source in ("recorded", "computed") else 0.0
    sessions = db.execute("SELECT COUNT(*) FROM sessions WHERE server = 'beta'").fetchone()[0]
    assert got["total"]["sessions"] == sessions == got["rows_total"] == len(got["rows"])
    rows = {r["session_id"]: r for r in got["rows"]}
    for sid, w in want.items():
        same(rows[sid], w, f"session {sid}")
    assert got["total"]["model_calls"] == sum(w["model_calls"] for w in want.values())
    assert got["total"]["cost_usd"] == pytest.approx(sum(w["cost"] for w in want.values()), abs=1e-6)
    costs = [r["cost_usd"] or 0 for r in got["rows"]]
    assert costs == sorted(costs, reverse=True)  # costliest first
    # each row is the session's title (the rule's, from session_list) and links to its conversation
    titles = dict(db.execute("SELECT id, title FROM session_list"))
    assert all(r["title"] == titles[r["session_id"]] for r in got["rows"] if titles[r["session_id"]])
    assert all(r["conversation_url"] == f"/-/agentbase/session/{r['session_id']}" for r in got["rows"])


def table_rows(html: str) -> list[list[str]]:
    table = re.search(r'<table class="ab-totals ab-report[^"]*">.*?</table>', html, re.S).group(0)
    body = table.split("<tbody>")[1]
    return [[htmlmod.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def test_the_page_reads_well(site, db):
    r = site.get("/-/agentbase/reports?by=model")
    assert r.status_code == 200
    html = r.text
    rows = table_rows(html)
    # the totals row on top; one cost column in dollars, the same precision on every row; unpriced said so
    assert rows[0][0] == "Total"
    header = re.findall(r"<th[^>]*>([^<]*)</th>", html)
    assert header[:6] == ["model", "messages", "model calls", "tokens", "cost", "unpriced calls"]
    costs = [row[4] for row in rows]
    assert all(re.fullmatch(r"\$[\d,]+\.\d\d|<\$0\.01|unpriced", c) for c in costs), costs
    by_model = {row[0]: row for row in rows[1:]}
    assert by_model["local-model"][4] == "unpriced"
    assert by_model[DF.HOSTILE_MODEL][0] == DF.HOSTILE_MODEL  # markup as text
    assert "<script>window.__xss_model" not in html
    # plain words: none of the archive's internal columns in what the page says (a link's URL may hold them)
    text = re.sub(r"<[^>]+>", " ", html)
    for word in ("usage_counted", "is_total", "cost_source", "is_synthetic"):
        assert word not in text
    # the navigation bar marks Reports
    nav = re.search(r'<ul class="ab-navbar".*?</ul>', html, re.S).group(0)
    assert re.findall(r'aria-current="page">([^<]*)<', nav) == ["Reports"]
    # CSV: the same rows, the totals first, numbers plain
    text = site.get("/-/agentbase/reports.csv?by=model").text
    lines = list(csv.reader(io.StringIO(text)))
    assert lines[0][:4] == ["model", "messages", "model_calls", "tokens"] and lines[1][0] == "Total"
    total, _ = oracle(db, "model")
    assert float(lines[1][4]) == pytest.approx(total["cost"], abs=1e-6) and int(lines[1][2]) == total["model_calls"]
    assert len(lines) == len(rows) + 1


def test_each_row_links_to_its_sessions(site, db):
    html = site.get("/-/agentbase/reports?by=day&server=beta").text
    links = [htmlmod.unescape(h) for h in re.findall(r'<a href="([^"]*)" class="ab-row-sessions">', html)]
    got = report(site, "by=day&server=beta")
    assert len(links) == len(got["rows"]) > 0
    for link, row in zip(links, got["rows"]):
        q = dict(parse_qsl(urlsplit(link).query))
        assert urlsplit(link).path == "/" and q == {"server": "beta", "from": row["day"], "to": row["day"]}
        # the session browser lists the sessions active that day: every one with a message on it
        listed = site.get(f"/-/agentbase/sessions.json?server=beta&from={row['day']}&to={row['day']}").json()
        want = {r[0] for r in db.execute("SELECT DISTINCT session_id FROM messages WHERE server = 'beta' AND day = ?",
                                         (row["day"],))}
        assert want <= {r["id"] for r in listed["rows"]}


def test_bad_parameters_are_a_400(site):
    for query in ("by=year", "order=up", "from=2026-13-01", "to=soon"):
        r = site.get("/-/agentbase/reports?" + query)
        assert r.status_code == 400, query
    assert site.get("/-/agentbase/reports?days=bogus").status_code == 200  # (as on the session browser)


# -- the dashboard's default: the whole archive ---------------------------------------------------------

def test_the_dashboard_shows_the_whole_archive_and_says_what_a_range_leaves_out(site, db):
    html = site.get("/-/agentbase").text
    first = db.execute("SELECT MIN(day) FROM messages WHERE usage_counted = 1").fetchone()[0]
    assert f"<strong>{first}</strong> → <strong>{DF.LATEST_LOCAL_DAY}</strong>" in html
    assert "The whole archive" in html
    seven = site.get("/-/agentbase?days=7").text
    start = (date.fromisoformat(DF.LATEST_LOCAL_DAY) - timedelta(days=6)).isoformat()
    before = db.execute("SELECT COUNT(*) FROM messages WHERE usage_counted = 1 AND day < ?", (start,)).fetchone()[0]
    until = (date.fromisoformat(start) - timedelta(days=1)).isoformat()
    assert f"This range leaves out {before:,} messages" in seven and f"from {first} to {until}" in seven


def test_long_ranges_are_drawn_a_week_or_a_month_a_bar():
    days = [(date(2025, 1, 1) + timedelta(days=i)).isoformat() for i in range(400)]
    assert D.bar_unit(len(days)) == "week" and D.bar_unit(119) == "day" and D.bar_unit(800) == "month"
    starts, names, groups = D.buckets(days, "week")
    # the first bar starts on the range's first day; every later one on a Monday
    assert starts[0] == days[0] and all(date.fromisoformat(s).weekday() == 0 for s in starts[1:])
    assert names[1] == f"week of {starts[1]}" and len(groups) == len(days)
    values = list(range(len(days)))
    summed = D.regroup(values, groups)
    assert sum(summed) == sum(values) and len(summed) == len(starts)
    assert summed[1] == sum(v for v, g in zip(values, groups) if g == 1)
    starts, names, _ = D.buckets(days, "month")
    assert names == sorted({d[:7] for d in days}) and len(starts) == 14
