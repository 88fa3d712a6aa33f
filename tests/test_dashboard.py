"""The dashboard (/-/agentbase) through Datasette's test client, on a made-up snapshot
(tests/dashboard_fixture.py): every figure on the page against SQL over the snapshot, one colour
per agent, agents of one name on two servers apart, round ticks, presets that keep the filters,
the heatmap, the cache, escaping."""

from __future__ import annotations

import html as htmlmod
import math
import re
import shutil
import sqlite3
from datetime import date, timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest

import dashboard_fixture as DF
from datasette_agentbase import dashboard as D
from test_explorer import Site

LATEST = DF.LATEST_LOCAL_DAY


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    return DF.build(tmp_path_factory.mktemp("dashboard"))


@pytest.fixture(scope="module")
def site(snapshot) -> Site:
    return Site(snapshot)


@pytest.fixture(scope="module")
def db(snapshot):
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    yield conn
    conn.close()


def page(site, query: str = "") -> str:
    r = site.get("/-/agentbase" + (f"?{query}" if query else ""))
    assert r.status_code == 200, r.text[:300]
    return r.text


def start_of(days: int | None) -> str:
    return "0000" if days is None else (date.fromisoformat(LATEST) - timedelta(days=days - 1)).isoformat()


def where(days=None, server=None, source=None, agent=None) -> tuple[str, list]:
    """The page's rows: counted once, in the range, matching the filters."""
    sql, params = ["usage_counted = 1", "day >= ?"], [start_of(days)]
    for column, value in (("server", server), ("source", source), ("agent_id", agent)):
        if value is not None:
            sql.append(f"{column} = ?")
            params.append(value)
    return " AND ".join(sql), params


def labels(db) -> dict[tuple, str]:
    """(server, agent) -> its label: agent@server where the name is on two servers."""
    pairs = db.execute("SELECT DISTINCT server, agent_id FROM messages WHERE usage_counted = 1").fetchall()
    names = [a for _, a in pairs]
    return {(s, a): f"{a}@{s}" if names.count(a) > 1 else a for s, a in pairs}


def chart(html: str, title: str) -> str:
    m = re.search(r'<svg class="ab-chart[^"]*" role="img" aria-label="' + re.escape(title) + r'".*?</svg>', html, re.S)
    assert m, f"no chart {title!r}"
    return m.group(0)


def bars(svg: str) -> dict[str, dict[str, str]]:
    """series label -> {day: the value its tooltip says}."""
    out: dict[str, dict[str, str]] = {}
    for name, body in re.findall(r'<g class="ab-series" data-series="([^"]*)" fill="[^"]*">(.*?)</g>', svg, re.S):
        name = htmlmod.unescape(name)
        for day, value in re.findall(r"<title>(\d{4}-\d\d-\d\d) · .*?: ([^<]*)</title>", body):
            out.setdefault(name, {})[day] = htmlmod.unescape(value)
    return out


def colours(html: str) -> dict[str, set[str]]:
    """label -> every colour it has on the page: chart series, bars in the tables, legends."""
    found: dict[str, set[str]] = {}
    for name, color in re.findall(r'data-series="([^"]*)" fill="(#[0-9a-f]{6})"', html):
        found.setdefault(htmlmod.unescape(name), set()).add(color)
    for name, color in re.findall(r'data-series="([^"]*)"><i style="background: (#[0-9a-f]{6})"', html):
        found.setdefault(htmlmod.unescape(name), set()).add(color)
    return found


# -- colours and series ------------------------------------------------------------------------------------

PAGES = ["days=all", "", "days=7", "days=30&server=beta", "days=all&source=openclaw", "days=all&agent=main"]


def test_one_colour_per_agent_on_every_chart_and_page(site, db):
    every: dict[str, set[str]] = {}
    for query in PAGES:
        found = colours(page(site, query))
        assert found, query
        for name, cs in found.items():
            assert len(cs) == 1, f"{name} has colours {cs} on ?{query}"
            every.setdefault(name, set()).update(cs)
        agents = [n for n in found if not n.endswith("other agents")]
        assert len({next(iter(found[n])) for n in agents}) == len(agents), f"two agents share a colour on ?{query}"
    # the same agent, the same colour from one filter and visit to the next
    assert all(len(cs) == 1 for cs in every.values()), every
    # every agent with messages got a colour, shown in the legend and the table of agents
    assert set(labels(db).values()) <= set(every)
    all_days = page(site, "days=all")
    for label in labels(db).values():
        for where_ in (chart(all_days, "Messages per day per agent"), all_days.split("<h2>Agents</h2>")[1]):
            assert f'data-series="{htmlmod.escape(label)}"' in where_, label


def test_colours_follow_first_appearance(site, db):
    """Agents take the palette in the order of their first day (then server, name)."""
    firsts = db.execute("SELECT server, agent_id, MIN(day) FROM messages WHERE usage_counted = 1 "
                        "GROUP BY 1, 2 ORDER BY 3, 1, 2").fetchall()
    names = labels(db)
    found = colours(page(site, "days=all"))
    assert [next(iter(found[names[(s, a)]])) for s, a, _ in firsts] == list(D.PALETTE[:len(firsts)])
    assert D.OTHER_COLOR not in D.PALETTE and len(set(D.PALETTE)) == len(D.PALETTE) == 20


def test_same_name_on_two_servers_is_two_series(site, db):
    html = page(site, "days=all")
    names = labels(db)
    assert names[("alpha", "main")] == "main@alpha" and names[("beta", "main")] == "main@beta"
    assert names[("beta", "ops")] == "ops"  # a name on one server only: no @
    messages = bars(chart(html, "Messages per day per agent"))
    cost = bars(chart(html, "Cost per day per agent (USD, each model call once)"))
    sql, params = where()
    expected_messages: dict[str, dict[str, str]] = {}
    expected_cost: dict[str, dict[str, str]] = {}
    for server, agent, day, n, priced in db.execute(
            f"SELECT server, agent_id, day, COUNT(*), SUM(CASE WHEN cost_source IN ('recorded', 'computed') "
            f"THEN cost_usd ELSE 0 END) FROM messages WHERE {sql} GROUP BY 1, 2, 3", params):
        expected_messages.setdefault(names[(server, agent)], {})[day] = f"{n:,}"
        if priced:
            expected_cost.setdefault(names[(server, agent)], {})[day] = D.fmt_cost(priced, exact=True)
    assert messages == expected_messages
    assert cost == expected_cost
    assert "main@alpha" in messages and "main@beta" in messages and "main" not in messages
    # filtered to the name: still two agents; with the server too: one
    both = bars(chart(page(site, "days=all&agent=main"), "Messages per day per agent"))
    assert set(both) == {"main@alpha", "main@beta"}
    one = page(site, "days=all&agent=main&server=beta")
    assert set(bars(chart(one, "Messages per day per agent"))) == {"main@beta"}
    # its query links say which server
    assert 'href="/snapshot/agent_day?agent=main&amp;server=beta"' in one


def test_more_agents_than_series_fold_into_other(monkeypatch, site):
    monkeypatch.setattr(D, "MAX_SERIES", 3)
    cube = site.ds._agentbase_dashboard["cubes"]
    fig = D.page(next(iter(cube.values())), days=None)
    shown = bars(chart(str(fig["messages_chart"]), "Messages per day per agent"))
    assert len(shown) == 3 and any(name.endswith("other agents") for name in shown)
    assert re.search(r'data-series="\d+ other agents" fill="' + D.OTHER_COLOR, str(fig["messages_chart"]))


# -- cost per model ------------------------------------------------------------------------------------------

FILTERS = [dict(), dict(days=7), dict(days=30, server="beta"), dict(days=None, source="codex"),
           dict(days=None, agent="main"), dict(days=None, server="alpha", agent="local"), dict(days=1)]


def query_of(f: dict) -> str:
    params = {k: v for k, v in f.items() if v is not None and k != "days"}
    params["days"] = "all" if f.get("days") is None else str(f.get("days"))
    return "&".join(f"{k}={v}" for k, v in params.items())


def model_rows(html: str, priced: bool) -> dict[str, dict]:
    table = re.search(r'<table class="ab-totals ab-models ab-unpriced-models">.*?</table>' if not priced else
                      r'<table class="ab-totals ab-models">.*?</table>', html, re.S)
    if not table:
        return {}
    out = {}
    for attrs in re.findall(r"<tr (data-model=[^>]*)>", table.group(0)):
        a = {k: htmlmod.unescape(v) for k, v in re.findall(r'data-([a-z]+)="([^"]*)"', attrs)}
        out[a.pop("model")] = a
    return out


@pytest.mark.parametrize("f", FILTERS, ids=query_of)
def test_cost_per_model_equals_sql(site, db, f):
    html = page(site, query_of(f))
    sql, params = where(f.get("days"), f.get("server"), f.get("source"), f.get("agent"))
    priced = {m: (n, t, c) for m, n, t, c in db.execute(
        f"SELECT COALESCE(model, '(no model)'), COUNT(*), SUM(COALESCE(total_tokens, 0)), SUM(cost_usd) FROM messages "
        f"WHERE {sql} AND cost_source IN ('recorded', 'computed') GROUP BY 1", params)}
    unpriced = {m: (n, t) for m, n, t in db.execute(
        f"SELECT COALESCE(model, '(no model)'), COUNT(*), SUM(COALESCE(total_tokens, 0)) FROM messages "
        f"WHERE {sql} AND cost_source = 'unpriced' GROUP BY 1", params)}
    got = model_rows(html, priced=True)
    assert set(got) == set(priced)
    for model, (n, tokens, cost) in priced.items():
        assert int(got[model]["calls"]) == n and int(got[model]["tokens"]) == tokens, model
        assert float(got[model]["cost"]) == pytest.approx(cost, abs=1e-12), model
    got_unpriced = model_rows(html, priced=False)
    assert {m: (int(v["calls"]), int(v["tokens"])) for m, v in got_unpriced.items()} == unpriced
    # unpriced: never a price, never $0
    table = re.search(r'<table class="ab-totals ab-models ab-unpriced-models">.*?</table>', html, re.S)
    assert table is None or "$" not in table.group(0)
    # the totals on top say the same
    total_cost = sum(c for _, _, c in priced.values())
    summary = re.search(r'<dl class="ab-summary">.*?</dl>', html, re.S).group(0)
    label = D.money(total_cost) if priced else "unpriced" if unpriced else "–"
    assert f"<dt>cost</dt><dd>{label}</dd>" in summary
    assert f"<dt>model calls</dt><dd>{sum(v[0] for v in priced.values()) + sum(v[0] for v in unpriced.values()):,}</dd>" in summary


def test_unpriced_is_never_zero_dollars(site, db):
    html = page(site, "days=all&server=alpha&agent=local")  # an agent whose every call is unpriced
    row = re.search(r'<tr data-series="local">.*?</tr>', html, re.S).group(0)
    cells = re.findall(r'<td class="ab-num">(.*?)</td>', row, re.S)
    assert cells[3] == "unpriced" and "$" not in row  # cost
    assert '<span class="ab-unpriced">4</span>' in cells[4]
    assert "<dt>cost</dt><dd>unpriced</dd>" in html  # no priced call here: not $0 either
    assert "No priced model calls in this range." in html
    # the days with unpriced calls are marked under the cost bars, with their calls and tokens
    html = page(site, "days=all")
    marks = re.search(r'<g class="ab-unpriced-marks".*?</g>', html, re.S).group(0)
    sql, params = where()
    expected = {day: (n, t) for day, n, t in db.execute(
        f"SELECT day, COUNT(*), SUM(total_tokens) FROM messages WHERE {sql} AND cost_source = 'unpriced' GROUP BY day",
        params)}
    got = {day: (int(n.replace(",", "")), int(t.replace(",", ""))) for day, n, t in re.findall(
        r"<title>(\d{4}-\d\d-\d\d): ([\d,]+) unpriced calls? \(([\d,]+) tokens", marks)}
    assert got == expected and got


# -- sources, agents, totals ---------------------------------------------------------------------------------------

def test_totals_per_source_and_agent_equal_sql(site, db):
    html = page(site, "days=all")
    table = re.search(r'<table class="ab-totals ab-sources">.*?</table>', html, re.S).group(0)
    got = {}
    for source, body in re.findall(r'<tr data-source="([^"]*)">(.*?)</tr>', table, re.S):
        got[source] = [c.strip() for c in re.findall(r'<td class="ab-num">(.*?)</td>', body, re.S)]
    sql, params = where()
    expected = {}
    for source, agents, n, calls, tokens, cost, unpriced in db.execute(
            f"SELECT source, COUNT(DISTINCT server || '/' || agent_id), COUNT(*), COUNT(cost_source), "
            f"SUM(CASE WHEN cost_source IS NOT NULL THEN total_tokens ELSE 0 END), "
            f"SUM(CASE WHEN cost_source IN ('recorded', 'computed') THEN cost_usd ELSE 0 END), "
            f"SUM(cost_source = 'unpriced') FROM messages WHERE {sql} GROUP BY 1", params):
        cell = f'<span class="ab-unpriced">{unpriced:,}</span>' if unpriced else "0"
        expected[source] = [str(agents), f"{n:,}", f"{calls:,}", f"{tokens:,}", D.money(cost), cell]
    assert got == expected and set(got) == {"openclaw", "codex", "pi"}
    # each source links to the page of that source, the other filters kept
    assert 'href="/-/agentbase?source=codex&amp;days=all"' in table
    # agents: messages, calls, tokens, days active and last day
    names = {v: k for k, v in labels(db).items()}
    for label, body in re.findall(r'<tr data-series="([^"]*)">(.*?)</tr>', html, re.S):
        server, agent = names[htmlmod.unescape(label)]
        n, calls, tokens, days_active, last = db.execute(
            f"SELECT COUNT(*), COUNT(cost_source), SUM(CASE WHEN cost_source IS NOT NULL THEN total_tokens ELSE 0 END), "
            f"COUNT(DISTINCT day), MAX(day) FROM messages WHERE {sql} AND server = ? AND agent_id = ?",
            params + [server, agent]).fetchone()
        cells = [c.strip() for c in re.findall(r'<td class="ab-num">(.*?)</td>', body, re.S)]
        assert cells[:3] == [f"{n:,}", f"{calls:,}", f"{tokens:,}"] and cells[5] == str(days_active), label
        assert f'<td class="ab-day">{last}</td>' in body


def test_source_and_agent_filters(site, db):
    codex = page(site, "days=all&source=codex")
    assert set(bars(chart(codex, "Messages per day per agent"))) == {"codex"}
    assert '<option value="codex" selected>codex</option>' in codex
    assert re.search(r'<span class="ab-chip">source: codex <a href="/-/agentbase\?days=all"', codex)
    pi = page(site, "days=all&source=pi")
    assert set(bars(chart(pi, "Messages per day per agent"))) == {"pi"}
    nobody = page(site, "days=all&agent=nobody")
    assert "No messages in this range." in nobody and "<dt>messages</dt><dd>0</dd>" in nobody
    assert "No agent has messages in this range." in nobody


# -- axes ---------------------------------------------------------------------------------------------------------

def round_step(step: float) -> bool:
    exp = math.floor(math.log10(step) + 1e-9)
    return any(math.isclose(step, f * 10 ** exp, rel_tol=1e-9) for f in (1, 2, 5))


@pytest.mark.parametrize("top", [0.00042, 0.0036, 0.07, 0.4, 1, 3, 7, 9.99, 10, 11, 17, 49, 99, 101, 640, 1234,
                                 25_000, 99_999, 1_020_487, 3.3e9])
@pytest.mark.parametrize("integer", [True, False])
def test_ticks_are_round(top, integer):
    t = D.ticks(top, integer=integer)
    step = t[1] - t[0]
    assert t[0] == 0 and t[-1] >= top * (1 - 1e-9) and t[-2] < top  # the first tick at or above the top is the last
    assert round_step(step) and 2 <= len(t) - 1 <= 5 or (integer and step == 1 and top <= 5)
    assert all(math.isclose(v, k * step, rel_tol=1e-9, abs_tol=1e-15) for k, v in enumerate(t))
    if integer:
        assert step >= 1 and step == int(step)


def test_axis_labels():
    assert [D.fmt_count(v, step=5000) for v in D.ticks(21_300, integer=True)] == [
        "0", "5,000", "10,000", "15,000", "20,000", "25,000"]
    assert [D.fmt_cost(v, step=0.01) for v in D.ticks(0.036)] == ["$0.00", "$0.01", "$0.02", "$0.03", "$0.04"]
    assert [D.fmt_cost(v, step=0.005) for v in (0, 0.005, 0.01)] == ["$0.000", "$0.005", "$0.010"]
    assert [D.fmt_cost(v, step=500) for v in (0, 500, 1500)] == ["$0", "$500", "$1,500"]
    # an amount too small for the fourth decimal reads as the session list says it, never as an exponent
    assert D.fmt_cost(0.0360, exact=True) == "$0.0360" and D.fmt_cost(0.00001234, exact=True) == "<$0.0001"
    assert D.money(1234.5) == "$1,234.50" and D.money(0.036) == "$0.0360" and D.money(0.00001234) == "<$0.0001"


def test_page_axes_are_round(site):
    for query in ("days=all", "days=7", "days=30&server=beta"):
        html = page(site, query)
        for title, money in (("Messages per day per agent", False),
                             ("Cost per day per agent (USD, each model call once)", True)):
            svg = chart(html, title)
            texts = re.findall(r'<text x="64" y="[\d.]+" class="ab-axis" text-anchor="end">([^<]*)</text>', svg)
            assert all(t.startswith("$") == money for t in texts), texts
            values = [float(t.lstrip("$").replace(",", "")) for t in texts]
            assert values[0] == 0 and len(values) >= 2
            step = values[1] - values[0]
            assert round_step(step) and all(math.isclose(v, k * step, rel_tol=1e-6) for k, v in enumerate(values))
            # the day labels: every day up to 16 days, else Mondays (a month here)
            days = re.findall(r'class="ab-axis" text-anchor="middle">(\d\d-\d\d)</text>', svg)
            if query.startswith("days=7"):
                assert days == [(date.fromisoformat(start_of(7)) + timedelta(days=i)).isoformat()[5:] for i in range(7)]
            else:
                assert days and all(date.fromisoformat(f"2026-{d}").weekday() == 0 for d in days), days


def test_day_labels_over_a_year():
    days = [(date(2025, 4, 7) + timedelta(days=i)).isoformat() for i in range(365)]
    got = D._x_ticks(days)
    assert [label for _, label in got] == [f"2025-{m:02d}" for m in range(5, 13)] + [f"2026-{m:02d}" for m in range(1, 5)]
    assert all(days[i].endswith("-01") for i, _ in got)
    five_years = [(date(2021, 1, 1) + timedelta(days=i)).isoformat() for i in range(5 * 365)]
    got = D._x_ticks(five_years)
    assert [label for _, label in got] == [f"{y}-{m}" for y in range(2021, 2026) for m in ("01", "07")]


# -- presets and filters ----------------------------------------------------------------------------------------------

def presets(html: str) -> list[tuple[str, dict, bool]]:
    nav = re.search(r'<nav class="ab-presets".*?</nav>', html, re.S).group(0)
    out = []
    for attrs, label in re.findall(r"<a ([^>]*)>([^<]*)</a>", nav):
        href = htmlmod.unescape(re.search(r'href="([^"]*)"', attrs).group(1))
        out.append((label, dict(parse_qsl(urlsplit(href).query)), 'aria-current="page"' in attrs))
    return out


def test_presets_keep_the_other_filters(site):
    html = page(site, "server=beta&source=openclaw&agent=main&days=30")
    got = presets(html)
    assert [label for label, _, _ in got] == ["latest day", "7 days", "30 days", "90 days", "a year", "all"]
    assert [q for _, q, _ in got] == [{"server": "beta", "source": "openclaw", "agent": "main", "days": d}
                                      for d in ("1", "7", "30", "90", "365", "all")]
    assert [current for _, _, current in got] == [False, False, True, False, False, False]
    # the form keeps them too (the days as a hidden field), and each filter can be taken off alone
    assert '<option value="beta" selected>beta</option>' in html and '<option value="main" selected>main</option>' in html
    assert '<option value="openclaw" selected>openclaw</option>' in html
    assert '<input type="hidden" name="days" value="30">' in html
    chips = dict(re.findall(r'<span class="ab-chip">(\w+): [^<]* <a href="([^"]*)"', html))
    assert {k: dict(parse_qsl(urlsplit(htmlmod.unescape(v)).query)) for k, v in chips.items()} == {
        "server": {"source": "openclaw", "agent": "main", "days": "30"},
        "source": {"server": "beta", "agent": "main", "days": "30"},
        "agent": {"server": "beta", "source": "openclaw", "days": "30"}}
    # ?db= is kept as well; no filter: the default range (the whole archive)
    assert all(q.get("db") == "snapshot" for _, q, _ in presets(page(site, "db=snapshot&days=7")))
    assert [current for _, _, current in presets(page(site))] == [False, False, False, False, False, True]
    # each preset is the range it says: its first day, the latest day minus days - 1
    for days in (1, 7, 30):
        html = page(site, f"days={days}")
        start = max(start_of(days), "2026-03-02")
        assert re.search(rf"<strong>{start}</strong>" + (rf" → <strong>{LATEST}</strong>" if days > 1 else ""), html)


def test_today_when_the_latest_day_is_the_export_day(snapshot, tmp_path):
    copy = tmp_path / "snapshot.db"
    shutil.copy(snapshot, copy)
    conn = sqlite3.connect(copy)
    conn.execute("UPDATE agentbase_snapshot SET value = ? WHERE key = 'exported_at'", (f"{LATEST}T02:00:00+00:00",))
    conn.commit()
    conn.close()
    assert presets(page(Site(copy), "days=1"))[0][:1] == ("today",)
    conn = sqlite3.connect(copy)  # 20:00 UTC on the latest day is already the next day in Shanghai
    conn.execute("UPDATE agentbase_snapshot SET value = ? WHERE key = 'exported_at'", (f"{LATEST}T20:00:00+00:00",))
    conn.commit()
    conn.close()
    assert presets(page(Site(copy), "days=1"))[0][:1] == ("latest day",)


# -- the heatmap ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("f", [dict(days=None), dict(days=7), dict(days=30, server="beta", agent="main"),
                               dict(days=None, source="codex")], ids=query_of)
def test_heatmap_counts_equal_sql(site, db, f):
    html = page(site, query_of(f))
    cells = {(int(w), int(h)): int(n) for w, h, n in re.findall(
        r'data-weekday="(\d)" data-hour="(\d+)" data-count="(\d+)"', html)}
    assert len(cells) == 7 * 24
    sql, params = where(f.get("days"), f.get("server"), f.get("source"), f.get("agent"))
    expected = {k: 0 for k in cells}
    for w, h, n in db.execute(f"SELECT (CAST(strftime('%w', day) AS INTEGER) + 6) % 7, "
                              f"CAST(substr(local_time, 12, 2) AS INTEGER), COUNT(*) FROM messages WHERE {sql} "
                              f"GROUP BY 1, 2", params):
        expected[(w, h)] = n
    assert cells == expected and sum(cells.values())
    assert "Messages by weekday and hour (Asia/Shanghai time)" in html


def test_heatmap_is_in_local_time(site):
    # beta/main works at 20:00 UTC: 04:00 the next day in Shanghai
    html = page(site, "days=all&server=beta&agent=main")
    cells = {(int(w), int(h)): int(n) for w, h, n in re.findall(
        r'data-weekday="(\d)" data-hour="(\d+)" data-count="(\d+)"', html)}
    assert {h for (_, h), n in cells.items() if n} == {4}
    # 2026-03-20 20:00 UTC is Saturday 2026-03-21 in Shanghai
    assert cells[(5, 4)] > 0


def test_heatmap_legend_classes():
    assert D.heat_classes(15) == [(1, 5), (6, 10), (11, 15)]
    assert D.heat_classes(7_999) == [(1, 2000), (2001, 4000), (4001, 6000), (6001, 8000)]
    assert D.heat_classes(1) == [(1, 1)] and D.heat_classes(0) == []
    heat = [[0] * 24 for _ in range(7)]
    heat[0][9], heat[2][23] = 1, 15
    svg = str(D.heatmap(heat, "UTC"))
    assert 'data-weekday="2" data-hour="23" data-count="15"' in svg and f'fill="{D.HEAT_RAMP[-1]}"' in svg
    assert "<title>Wed 23:00–24:00: 15 messages</title>" in svg and "11–15" in svg


# -- the cache, escaping, offline ---------------------------------------------------------------------------------------

def test_one_scan_and_a_page_per_filter(site):
    state = site.ds._agentbase_dashboard
    assert len(state["cubes"]) == 1
    queries = ["days=7&server=beta", "days=7&server=beta&source=pi", "days=7&server=beta&source=pi&agent=pi",
               "days=30&server=beta&source=pi&agent=pi"]
    htmls = [page(site, q) for q in queries]
    assert len(set(htmls)) == len(htmls)  # every filter makes its own page
    keys = {k[1:] for k in state["pages"]}
    assert {("beta", None, None, 7), ("beta", "pi", None, 7), ("beta", "pi", "pi", 7), ("beta", "pi", "pi", 30)} <= keys
    assert [page(site, q) for q in queries] == htmls  # and it is cached: the same page again
    assert len(state["cubes"]) == 1  # from the one cube


def test_everything_is_escaped_and_offline(site):
    for query in ("days=all", "days=all&agent=" + "%3Cimg%20src%3Dx%20onerror%3Dwindow.__xss_agent%3D1%3E",
                  "days=all&server=%3Cb%3Ebold%3C%2Fb%3E&source=%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E"):
        html = page(site, query)
        assert "<script>window.__xss" not in html and "<img src=x" not in html and "<b>bold</b>" not in html
        assert '"><script>alert(1)' not in html
        assert not re.search(r'src="(?:https?:)?//', html) and not re.search(r'<link[^>]+href="(?:https?:)?//', html)
    html = page(site, "days=all")
    assert "&lt;script&gt;window.__xss_model=1&lt;/script&gt;" in html  # the model name, as text
    assert "&lt;img src=x onerror=window.__xss_agent=1&gt;" in html  # the agent name, as text
    # the charts are SVG drawn on the server: no script of the dashboard's own
    body = html.split('<div class="ab-page ab-dashboard">')[1].split("<footer")[0]
    assert "<script" not in body and "<svg" in body


def test_bad_arguments(site):
    for query in ("days=abc", "days=-3", "days=0", "days=99999", "server=", "days=1&agent="):
        assert site.get("/-/agentbase?" + query).status_code == 200, query
    assert presets(page(site, "days=abc"))[5][2]  # nonsense: the default, the whole archive
    assert site.get("/-/agentbase?db=nope").status_code == 404


def test_the_cube_uses_the_dashboard_index_when_the_snapshot_has_it(snapshot, tmp_path):
    """Without the index: a table scan; with it (an export could add it): the same cube, read in order."""
    copy = tmp_path / "snapshot.db"
    shutil.copy(snapshot, copy)
    conn = sqlite3.connect(copy)
    try:
        assert "NOT INDEXED" in D.cube_sql(conn)
        before = D.load(conn)
        conn.execute(D.DASHBOARD_INDEX_SQL)
        plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + D.cube_sql(conn)))
        assert D.DASHBOARD_INDEX in plan and "TEMP B-TREE" not in plan
        after = D.load(conn)
    finally:
        conn.close()
    def rows(cube):  # sums in another order: the same to 12 decimals
        return sorted((tuple(round(v, 12) if isinstance(v, float) else v for v in r) for r in cube["cube"]),
                      key=lambda r: tuple(str(v) for v in r))

    assert rows(after) == rows(before)
    assert D.page(after, days=None)["total"] == pytest.approx(D.page(before, days=None)["total"])


def test_rows_without_a_model_agent_server_or_time():
    """An agent-server run without a model, an agent or server left empty, a day without a time:
    counted, labelled, never a crash; a snapshot without rows: an empty page."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE messages (day TEXT, local_time TEXT, server TEXT, agent_id TEXT, source TEXT, "
                 "model TEXT, usage_counted INTEGER, cost_source TEXT, cost_usd REAL, total_tokens INTEGER)")
    empty = D.page(D.load(conn), days=None)
    assert empty["days"] == [] and empty["agents"] == [] and "No messages" in str(empty["messages_chart"])
    conn.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        ("2026-04-06", "2026-04-06 10:00:00.000", "s1", "runner", "agent-server", None, 1, "recorded", 0.5, 100),
        ("2026-04-06", None, "s1", None, "agent-server", None, 1, None, None, None),
        ("2026-04-05", "2026-04-05 23:59:59.000", None, "runner", "agent-server", "m", 1, "unpriced", None, 7),
        ("2026-04-05", "2026-04-05 23:00:00.000", None, "runner", "agent-server", "m", 0, "recorded", 9.0, 9),  # a copy
    ])
    cube = D.load(conn)  # no agentbase_snapshot table: no time zone, no export day
    assert cube["timezone"] is None and cube["exported_day"] is None
    fig = D.page(cube, days=None)
    assert sorted(a["label"] for a in fig["agents"]) == ["(no agent)", "runner@?", "runner@s1"]
    assert {m["model"]: (m["priced_calls"], m["unpriced_calls"]) for m in fig["models"]} == {
        "(no model)": (1, 0), "m": (0, 1)}
    assert fig["total"] == {"messages": 3, "calls": 2, "tokens": 107, "cost": 0.5, "unpriced_calls": 1,
                            "unpriced_tokens": 7, "cost_label": "$0.5000"}
    assert sum(map(sum, fig["heat"])) == 2  # the row without a time is in no hour
    assert "(local time)" in str(fig["heatmap"])
