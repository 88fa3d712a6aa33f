"""The session browser (the explorer's home page, datasette_agentbase/browser.py) through Datasette's
test client, on the made-up snapshot of tests/session_list_fixture.py: every filter's sessions, in
order, against the snapshot's session_list filtered here in Python; keyset pages that add up to the
whole list with nothing twice; the search and its link to the message search; the JSON; hostile text
escaped; bad parameters answered with a 400; an older snapshot without the list, a Datasette without
any snapshot, and the login."""

from __future__ import annotations

import html as htmlmod
from html.parser import HTMLParser
import re
import shutil
import sqlite3
from datetime import date, timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest

import session_list_fixture as SF
from importer import derived
from test_explorer import Site
from test_explorer_access import LockedSite

LATEST = SF.LATEST_LOCAL_DAY


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    return SF.build(tmp_path_factory.mktemp("session-browser"))


@pytest.fixture(scope="module")
def site(snapshot) -> Site:
    return Site(snapshot)


@pytest.fixture(scope="module")
def every(snapshot) -> list[dict]:
    """session_list, newest first, as the snapshot holds it."""
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    try:
        cur = conn.execute(f"SELECT * FROM {derived.TABLE}")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        conn.close()
    return sorted(rows, key=lambda r: (r["last_message_at"], r["id"]), reverse=True)


def matches(row: dict, params: dict) -> bool:
    """Whether a session belongs on the page of these filters (the page's rules, written again)."""
    if "agent" in params and row["agent_id"] != params["agent"]:
        return False
    if "server" in params and row["server"] != params["server"]:
        return False
    if "source" in params and row["source"] != params["source"]:
        return False
    start = end = None
    if "from" in params or "to" in params:
        start, end = params.get("from"), params.get("to")
    elif "days" in params:
        start = (date.fromisoformat(LATEST) - timedelta(days=int(params["days"]) - 1)).isoformat()
        end = LATEST
    if start and not (row["last_day"] and row["last_day"] >= start):
        return False
    if end and not (row["first_day"] and row["first_day"] <= end):
        return False
    if params.get("errors") and not (row["failed_tool_calls"] or row["model_errors"]):
        return False
    if params.get("thinking") and not row["has_thinking"]:
        return False
    if "q" in params:
        text = f"{row['title'] or ''} {row['first_prompt'] or ''}".lower()
        if not all(word.lower() in text for word in params["q"].split()):
            return False
    return True


FILTERS = [
    {}, {"agent": "main"}, {"server": "beta"}, {"source": "codex"}, {"source": "mini-openclaw"},
    {"errors": "1"}, {"thinking": "1"}, {"days": "1"}, {"days": "7"}, {"days": "30"},
    {"from": "2026-03-20", "to": "2026-03-31"}, {"from": "2026-04-05"}, {"to": "2026-03-05"},
    {"from": "2026-04-05", "to": "2026-04-05"}, {"q": "部署"}, {"q": "quokka"}, {"q": "check service"},
    {"agent": "main", "errors": "1", "days": "30"}, {"server": "alpha", "thinking": "1", "q": "check"},
    {"agent": "main", "server": "beta", "source": "openclaw", "days": "7", "errors": "0", "thinking": "1"},
]


def query(params: dict, **more) -> str:
    from urllib.parse import urlencode

    return urlencode({**params, **more})


def walk_json(site, params: dict, limit: int) -> tuple[list[int], list[dict]]:
    """Every page of the JSON list, following next_url; (ids, the pages)."""
    url = f"/-/agentbase/sessions.json?{query(params, limit=limit)}"
    ids, pages = [], []
    while url:
        r = site.get(url)
        assert r.status_code == 200, r.text[:300]
        data = r.json()
        pages.append(data)
        assert len(data["rows"]) <= limit
        assert data["skipped"] == len(ids)  # the rows of the pages before
        ids += [row["id"] for row in data["rows"]]
        url = data["next_url"]
        assert len(pages) < 100
    return ids, pages


def page_ids(text: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-id="(\d+)"', text)]


def next_link(text: str) -> str | None:
    found = re.search(r'<a href="([^"]+)" rel="next"', text)
    return htmlmod.unescape(found.group(1)) if found else None


@pytest.mark.parametrize("params", FILTERS, ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()) or "none")
def test_every_filter_pages_through_its_sessions(site, every, params):
    want = [r["id"] for r in every if matches(r, {k: v for k, v in params.items() if v != "0"})]
    assert want or params.get("source") == "openclaw" or params == FILTERS[-1]
    ids, pages = walk_json(site, params, limit=4)
    if "q" in params:
        # a search is ranked, over the messages too (tests/test_session_search.py): here every session whose
        # title or first prompt holds the words is among those it finds with every word, each once
        complete = [r["id"] for p in pages for r in p["rows"] if not r["partial"]]
        assert set(want) <= set(complete) and len(ids) == len(set(ids))
        # (a page filled by sessions with the words in one message does not count those with them apart:
        # its count is then a floor, said so)
        assert pages[-1]["count"] == len(complete)
        assert all(p["count"] == len(complete) or (p["count"] < len(complete) and not p["search"]["count_exact"])
                   for p in pages)
        return
    assert ids == want
    assert all(p["count"] == len(want) for p in pages)
    assert len(pages) == max(1, -(-len(want) // 4))  # full pages, and no empty page at the end
    # the HTML pages, by their "Next page" links, show the same sessions in the same order
    url, seen = "/?" + query(params, limit=4), []
    while url:
        r = site.get(url)
        assert r.status_code == 200, r.text[:300]
        if len(want) > 4:
            assert f"showing {len(seen) + 1}–{len(seen) + len(page_ids(r.text))}" in r.text
        seen += page_ids(r.text)
        assert f'data-count="{len(want)}"' in r.text
        url = next_link(r.text)
        if url:
            assert "after=" in url and "offset" not in url
    assert seen == want


def test_the_home_page(site, every):
    r = site.get("/")
    assert r.status_code == 200
    text = r.text
    assert page_ids(text) == [row["id"] for row in every[:50]]
    # Datasette's tables and SQL stay one click away, and the dashboard
    nav = re.search(r'<ul class="ab-navbar".*?</ul>', text, re.S).group(0)
    assert 'href="/snapshot" class="ab-nav-sql"' in nav and 'href="/-/agentbase" class="ab-nav-dashboard"' in nav
    tables = site.get("/snapshot")
    assert tables.status_code == 200
    assert "/snapshot/sessions" in tables.text and "/snapshot/session_list" in tables.text
    assert "/snapshot/session_list_fts" not in tables.text
    assert site.get("/.json").status_code == 200  # Datasette's own index, as JSON, is still there
    # each row links to its conversation view, which exists
    first = every[0]
    assert f'href="/-/agentbase/session/{first["id"]}"' in text
    assert site.get(f"/-/agentbase/session/{first['id']}").status_code == 200
    # the same page under its own path
    assert page_ids(site.get("/-/agentbase/sessions").text) == page_ids(text)
    # its stylesheets are the plugin's static files, served by Datasette itself (the plugin has no route
    # of its own for them any more)
    links = re.findall(r'<link rel="stylesheet" href="([^"]+)"', text)
    assert {"/-/static-plugins/agentbase/agentbase.css", "/-/static-plugins/agentbase/sessions.css"} <= set(links)
    for href in links:
        css = site.get(href)
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css"), href
    assert site.get("/-/agentbase/sessions.css").status_code == 404
    # the filters' choices come from the snapshot
    agents = re.search(r'<select name="agent">(.*?)</select>', text, re.S).group(1)
    assert {"main", "ops", "codex", "claude-code", "pi"} <= set(map(htmlmod.unescape, re.findall(
        r'<option value="([^"]+)"', agents)))
    sources = re.search(r'<select name="source">(.*?)</select>', text, re.S).group(1)
    assert re.findall(r'<option value="([^"]+)"', sources) == sorted({r["source"] for r in every})


def test_one_line_per_session_with_its_figures(site, every):
    text = site.get("/?limit=500").text
    for row in every:
        line = re.search(rf'<tr data-id="{row["id"]}"[^>]*>(.*?)</tr>', text, re.S).group(1)
        tds = re.findall(r"<td[^>]*>(.*?)</td>", line, re.S)
        cells = [htmlmod.unescape(re.sub(r"<[^>]+>", " ", c)).split() for c in tds]
        assert len(cells) == 11
        title = " ".join(cells[0])
        assert title.startswith(" ".join((row["title"] or "(untitled)").split()))
        assert cells[1] == (row["agent_id"] or "").split() and cells[3] == [row["source"]]
        if row["started_local"]:
            assert " ".join(cells[4]) == row["started_local"][:16]
            last = row["last_local"][11:16] if row["last_local"][:10] == row["started_local"][:10] \
                else row["last_local"][5:16]
            assert " ".join(cells[5]) == last
        numbers = [int(c[0].replace(",", "")) for c in cells[6:10]]
        assert numbers == [row["message_count"], row["tool_call_count"], row["failed_tool_calls"], row["total_tokens"]]
        cost = " ".join(cells[10])
        if row["priced_calls"]:
            assert cost.startswith("$") or cost.startswith("<$")
            if row["unpriced_calls"]:
                assert cost.endswith(f"+{row['unpriced_calls']} unpriced")
        elif row["unpriced_calls"]:
            assert cost == "unpriced"  # never $0
        else:
            assert cost == "–"
        assert ("thinking" in title) == bool(row["has_thinking"])
        assert ("model error" in title) == bool(row["model_errors"])


def test_presets_keep_the_filters(site):
    text = site.get("/?agent=main&errors=1&q=check").text
    presets = dict(re.findall(r'<a href="([^"]+)" data-days="(\w+)"', text))
    by_days = {v: dict(parse_qsl(urlsplit(htmlmod.unescape(k)).query)) for k, v in presets.items()}
    assert by_days["7"] == {"agent": "main", "errors": "1", "q": "check", "days": "7"}
    assert by_days["all"] == {"agent": "main", "errors": "1", "q": "check"}
    assert 'data-days="all" class="ab-current"' in text
    # the latest day of the snapshot is not the day it was exported: "latest day", not "today"
    assert re.search(r'data-days="1">latest day<', text)
    # a chip takes one filter off and keeps the rest
    chips = [dict(parse_qsl(urlsplit(htmlmod.unescape(h)).query))
             for h in re.findall(r'<span class="ab-chip">[^<]*<a href="([^"]+)"', text)]
    assert {"errors": "1", "q": "check"} in chips and {"agent": "main", "q": "check"} in chips


def test_search_links_to_the_message_search(site):
    text = site.get("/?" + query({"q": "部署", "agent": "main", "server": "alpha"})).text
    link = re.search(r'<a href="([^"]+)">Search messages for these words</a>', text).group(1)
    parts = urlsplit(htmlmod.unescape(link))
    assert parts.path == "/snapshot/search"
    assert dict(parse_qsl(parts.query)) == {"q": "部署", "agent": "main", "server": "alpha"}
    found = site.get(htmlmod.unescape(link) + "&_json=conversation")
    assert found.status_code == 200
    assert "Search messages for these words" not in site.get("/").text


def test_json(site, every):
    data = site.get("/-/agentbase/sessions.json?limit=2").json()
    assert data["ok"] is True and data["count"] == len(every) and data["timezone"] == SF.ZONE
    assert [r["id"] for r in data["rows"]] == [r["id"] for r in every[:2]]
    row = data["rows"][0]
    assert set(derived.COLUMNS) <= set(row) and row["href"] == f"/-/agentbase/session/{row['id']}"
    assert data["next"] == f"{every[1]['last_message_at']}|{every[1]['id']}"
    assert data["next_url"].startswith("/-/agentbase/sessions.json?")
    q = site.get("/-/agentbase/sessions.json?q=部署&days=7").json()
    assert q["filters"] == {"days": "7", "q": "部署"} and q["from"] == "2026-03-31" and q["to"] == LATEST
    assert q["search_messages_url"] == "/snapshot/search?q=%E9%83%A8%E7%BD%B2"


class Elements(HTMLParser):
    """Every element of a page as the browser's parser sees it, and the text of its scripts."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, list]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def test_hostile_text_is_escaped(site, every):
    for path in ("/?limit=500", "/?" + query({"agent": SF.HOSTILE_AGENT}), "/?q=deploy+notes",
                 "/?" + query({"q": "<script>alert(1)</script>"})):
        r = site.get(path)
        assert r.status_code == 200
        text = r.text
        assert "<script>window.__xss" not in text and "<script>alert(1)" not in text and "<img src=x" not in text
        elements = Elements()
        elements.feed(text)
        assert not [e for e in elements.found if e[0] == "img" or any(k.startswith("on") for k, _ in e[1])]
        assert all("__xss" not in body and "alert(1)" not in body for body in elements.scripts)
    text = site.get("/?limit=500").text
    assert htmlmod.escape(SF.HOSTILE_LABEL, quote=False) in text
    assert htmlmod.escape(SF.HOSTILE_PROMPT, quote=False) in text
    assert htmlmod.escape(SF.HOSTILE_AGENT, quote=False) in text
    hostile = next(r for r in every if r["agent_id"] == SF.HOSTILE_AGENT)
    assert page_ids(site.get("/?" + query({"agent": SF.HOSTILE_AGENT})).text) == [hostile["id"]]


@pytest.mark.parametrize("path", ["/?after=yesterday", "/?after=2026-04-05|x", "/?from=2026-02-30", "/?to=tomorrow",
                                  "/-/agentbase/sessions.json?from=04/05/2026"])
def test_bad_parameters_are_a_400(site, path):
    r = site.get(path)
    assert r.status_code == 400
    assert "Traceback" not in r.text


def test_odd_parameters_are_taken_as_far_as_they_make_sense(site, every):
    # an unknown preset and a limit out of range: every session, 500 at most a page
    r = site.get("/-/agentbase/sessions.json?days=abc&limit=100000").json()
    assert r["ok"] and r["filters"] == {"limit": "500"} and r["count"] == len(every)
    assert [row["id"] for row in r["rows"]] == [row["id"] for row in every[:500]]
    # a search of only punctuation has no word to find: nothing matches, and that is no error
    r = site.get("/-/agentbase/sessions.json?q=%22%22+%2F").json()
    assert r["ok"] and r["count"] == 0 and r["rows"] == []
    assert site.get("/?limit=0").status_code == 200
    assert site.get("/?agent=nobody").status_code == 200 and "No session matches" in site.get("/?agent=nobody").text


def test_a_snapshot_without_the_session_list(snapshot, tmp_path):
    old = tmp_path / "snapshot.db"
    shutil.copy(snapshot, old)
    conn = sqlite3.connect(old)
    conn.execute(f"DROP TABLE {derived.FTS}")
    conn.execute(f"DROP TABLE {derived.TABLE}")
    conn.commit()
    conn.close()
    older = Site(old)
    r = older.get("/")
    assert r.status_code == 200
    assert "This snapshot has no session list" in r.text and "agentbase export" in r.text
    assert 'href="/snapshot/sessions?_sort_desc=last_message_at"' in r.text
    j = older.get("/-/agentbase/sessions.json")
    assert j.status_code == 404 and j.json()["ok"] is False
    assert older.get("/-/agentbase").status_code == 200 and older.get("/snapshot").status_code == 200


def test_datasette_without_a_snapshot_keeps_its_own_home_page(tmp_path):
    import asyncio

    from datasette.app import Datasette

    plain = tmp_path / "plain.db"
    conn = sqlite3.connect(plain)
    conn.execute("CREATE TABLE birds (name TEXT)")
    conn.commit()
    conn.close()
    ds = Datasette([str(plain)])
    asyncio.run(ds.invoke_startup())
    r = asyncio.run(ds.client.get("/"))
    assert r.status_code == 200 and "plain" in r.text and "birds" in r.text and "Sessions" not in r.text
    assert asyncio.run(ds.client.get("/-/agentbase/sessions")).status_code == 404


def test_behind_the_login(snapshot, monkeypatch):
    locked = LockedSite(snapshot, monkeypatch)
    r = locked.get("/")
    assert r.status_code == 302 and r.headers["location"] == "/-/agentbase/login?next=%2F"
    for path in ("/-/agentbase/sessions.json", "/-/agentbase/sessions.json?q=quokka"):
        r = locked.get(path)
        assert r.status_code == 403 and "quokka" not in r.text
    assert locked.get("/-/agentbase/sessions").status_code == 302
    assert locked.login(next_path="/").status_code == 302
    r = locked.get("/")
    assert r.status_code == 200 and SF.TELEGRAM_TEXT in r.text
    assert locked.get("/-/agentbase/sessions.json").json()["ok"] is True


def test_a_bad_filter_value_is_a_message_on_the_page_with_the_filter_kept(site):
    """A person's typo: the page says what is wrong, keeps what they typed in the form to fix, and shows
    what it can (a script's JSON gets the 400 alone)."""
    r = site.get("/?from=2026-02-30&agent=main")
    assert r.status_code == 400 and 'class="ab-notice ab-problems"' in r.text
    assert "from must be a day" in r.text and 'value="2026-02-30"' in r.text and 'ab-session-list' in r.text
    r = site.get("/?days=bogus")
    assert r.status_code == 200 and "is not a number of days" in r.text and "ab-session-list" in r.text
    assert site.get("/-/agentbase/sessions.json?from=2026-02-30").status_code == 400
    dash = site.get("/-/agentbase?days=bogus")
    assert dash.status_code == 200 and "is not a number of days" in dash.text
    assert "ab-problems" not in site.get("/?days=7").text and "ab-problems" not in site.get("/-/agentbase").text
