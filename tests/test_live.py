"""Live pages' endpoints (datasette_agentbase/live_pages.py), through Datasette's test client: the
snapshot's version read from its marker, a conversation's cards since one it shows (drawn as its page
draws them), after an update in place too; the pages name their version for static/live.js; nothing
of it without the login when one is set, nor by any method but GET. The browser test is
test_live_browser.py."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from datasette_agentbase.live_pages import REPLAY, after, split
from importer.snapshot import export_snapshot
from importer.store import open_store
from live_fixture import query, version
from test_explorer import Site
from test_explorer_access import LockedSite
from transcripts import SID, Chain, conversation, do_import, sessions_dir, write


class Growing:
    """A transcript imported and exported (the ordinary import and export), and lines appended."""

    def __init__(self, tmp: Path):
        self.state = tmp / "state"
        objs = conversation(turns=3)
        self.path = write(sessions_dir(self.state) / f"{SID}.jsonl", objs)
        self.chain = Chain(start=900, parent=objs[-1]["id"], minute=20)
        self.db, self.snapshot = tmp / "archive.db", tmp / "snap" / "snapshot.db"
        self.sync()

    def sync(self):
        assert do_import(self.db, self.state).files_failed == 0
        store = open_store(f"sqlite:///{self.db}")
        try:
            return export_snapshot(store, self.snapshot, timezone="UTC")
        finally:
            store.close()

    def append(self, *objs: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs))

    def session_id(self) -> int:
        return query(self.snapshot, "SELECT id FROM sessions WHERE session_uuid = ?", (SID,))[0][0]

    def turns(self) -> list[str]:
        """The oracle: the cards of this conversation, every message on the active path but the tool
        results (drawn under their calls), in order."""
        return [f"m{r[0]}" for r in query(self.snapshot, "SELECT id FROM messages WHERE session_id = ? AND "
                                          "is_active_path = 1 AND role != 'toolResult' ORDER BY seq, id",
                                          (self.session_id(),))]


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> Growing:
    """One archive for the tests that only read it."""
    return Growing(tmp_path_factory.mktemp("live"))


@pytest.fixture(scope="module")
def site(grown) -> Site:
    return Site(grown.snapshot)


@pytest.fixture
def growing(tmp_path) -> Growing:
    return Growing(tmp_path)


def _json(site, path: str) -> dict:
    r = site.get(path)
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
    assert r.headers["cache-control"] == "no-store"
    return r.json()


def test_version_is_the_snapshots_marker(grown, site):
    doc = _json(site, "/-/agentbase/version.json")
    assert doc == {"ok": True, "database": "snapshot", "version": version(grown.snapshot)}
    assert doc["version"].endswith(":1")
    assert site.get("/-/agentbase/version.json?db=nothing").status_code == 404


def test_the_pages_name_their_version_for_the_script(grown, site):
    sid = grown.session_id()
    for path, since in ((f"/-/agentbase/session/{sid}", f"/-/agentbase/session/{sid}/since.json"),
                        ("/", None), ("/-/agentbase/sessions", None)):
        page = site.get(path).text
        tag = re.search(r"<script [^>]*live\.js[^>]*>", page).group(0)
        assert f'data-ab-version="{version(grown.snapshot)}"' in tag, path
        assert 'data-ab-version-href="/-/agentbase/version.json"' in tag
        assert (f'data-ab-since-href="{since}"' in tag) if since else "data-ab-since-href" not in tag
        assert "live.css" in page
    # ?db= and ?all=1 are kept in what the script asks
    page = site.get(f"/-/agentbase/session/{sid}?db=snapshot&all=1").text
    assert f'data-ab-since-href="/-/agentbase/session/{sid}/since.json?db=snapshot&amp;all=1"' in page
    assert 'data-ab-version-href="/-/agentbase/version.json?db=snapshot"' in page


def test_since_sends_the_pages_own_cards(grown, site):
    sid = grown.session_id()
    page = site.get(f"/-/agentbase/session/{sid}").text
    turns = grown.turns()
    whole = _json(site, f"/-/agentbase/session/{sid}/since.json")
    assert whole["from"] is None and whole["version"] == version(grown.snapshot)
    assert [c["key"] for c in whole["cards"]] == turns and whole["count"] == len(turns)
    for card in whole["cards"]:  # drawn by the page's own template: each one is on the page as it is
        assert card["html"].startswith("<section") and f'id="{card["key"]}"' in card["html"]
        assert card["html"] in page
    assert whole["totals"].startswith('<table class="ab-totals">') and whole["totals"] in page
    # from a card the page has: the last REPLAY it has (they may have changed), then what is new
    tail = _json(site, f"/-/agentbase/session/{sid}/since.json?after={turns[-1]}")
    assert tail["from"] == turns[-REPLAY] and [c["key"] for c in tail["cards"]] == turns[-REPLAY:]
    # built from the end of the conversation only (conversation.load_tail: "count" unknown), drawn the same
    assert tail["count"] is None and all(card["html"] in page for card in tail["cards"]) and tail["totals"] in page
    middle = _json(site, f"/-/agentbase/session/{sid}/since.json?after={turns[1]}")
    assert [c["key"] for c in middle["cards"]] == turns and middle["from"] == turns[0]
    # a card it does not know (another path): everything, to be drawn again whole
    other = _json(site, f"/-/agentbase/session/{sid}/since.json?after=m999999")
    assert other["from"] is None and [c["key"] for c in other["cards"]] == turns
    assert site.get("/-/agentbase/session/999999/since.json").status_code == 404


def test_an_update_in_place_is_a_new_version_with_new_cards(growing):
    site = Site(growing.snapshot)
    sid = growing.session_id()
    old, first = growing.turns(), version(growing.snapshot)
    c = growing.chain
    growing.append(c.user("pelican follow-up 鹈鹕"), c.assistant([{"type": "text", "text": "pelican answer"}]))
    assert growing.sync().mode == "update"
    now = _json(site, "/-/agentbase/version.json")["version"]
    assert now == version(growing.snapshot) and now != first
    assert now.split(":")[0] == first.split(":")[0] and now.endswith(":2")  # the same build, its next update
    turns = growing.turns()
    assert turns[:len(old)] == old and len(turns) == len(old) + 2
    doc = _json(site, f"/-/agentbase/session/{sid}/since.json?after={old[-1]}")
    assert doc["version"] == now and doc["from"] == old[-REPLAY]
    assert [c["key"] for c in doc["cards"]] == old[-REPLAY:] + turns[len(old):]
    assert "pelican follow-up 鹈鹕" in doc["cards"][-2]["html"] and "pelican answer" in doc["cards"][-1]["html"]
    # the totals say the new count, as the snapshot holds it
    count = query(growing.snapshot, "SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,))[0][0]
    assert f"of {count:,}" in doc["totals"]
    # a full build (a new file under the name): another build id, and the page's cards still found in it
    store = open_store(f"sqlite:///{growing.db}")
    try:
        assert export_snapshot(store, growing.snapshot, timezone="UTC", full=True).mode == "full"
    finally:
        store.close()
    rebuilt = _json(site, "/-/agentbase/version.json")["version"]
    assert rebuilt == version(growing.snapshot) and rebuilt.split(":")[0] != now.split(":")[0]
    doc = _json(site, f"/-/agentbase/session/{sid}/since.json?after={turns[-1]}")
    assert doc["version"] == rebuilt and [c["key"] for c in doc["cards"]] == growing.turns()[-REPLAY:]


def test_only_get(grown, site):
    sid = grown.session_id()
    for path in ("/-/agentbase/version.json", f"/-/agentbase/session/{sid}/since.json"):
        r = asyncio.run(site.ds.client.post(path, data={"after": "m1"}))
        assert r.status_code in (403, 405), (path, r.status_code)
        assert version(grown.snapshot) not in r.text and "question 0" not in r.text


def test_behind_the_login_the_same_cookie_opens_them(grown, monkeypatch):
    site = LockedSite(grown.snapshot, monkeypatch)
    sid = grown.session_id()
    paths = ("/-/agentbase/version.json", f"/-/agentbase/session/{sid}/since.json",
             f"/-/agentbase/session/{sid}/since.json?after=m1")
    for path in paths:
        r = site.get(path)
        assert r.status_code == 403 and r.json()["title"] == "Login required", path
        assert version(grown.snapshot).split(":")[0] not in r.text and "question" not in r.text
    assert site.login().status_code == 302
    assert site.get(paths[0]).json()["version"] == version(grown.snapshot)
    assert [c["key"] for c in site.get(paths[1]).json()["cards"]] == grown.turns()
    page = site.get(f"/-/agentbase/session/{sid}").text
    assert "live.js" in page and version(grown.snapshot) in page


# -- cutting a page into its cards ---------------------------------------------------------------------------

def test_split_cuts_at_the_conversations_own_children():
    html = ('<table class="ab-totals"><tr><td>1</td></tr></table><p>before</p>'
            '<div class="ab-conversation">\n'
            '<section id="m1"><p>unclosed paragraph<div>inner</div></section>\n'
            '<details class="ab-repeats"><summary>x</summary><section id="m2"></section></details>\n'
            '<div id="e3"><img src="data:," alt="a"><br/>stray</span> end</div>'
            '<hr>'
            '<section id="m4">&lt;script&gt; text</section>\n'
            '</div><section id="m9">after the conversation</section>')
    cards, totals = split(html)
    assert totals == '<table class="ab-totals"><tr><td>1</td></tr></table>'
    assert [c["key"] for c in cards] == ["m1", "e3", "m4"]
    assert cards[0]["html"] == ('<section id="m1"><p>unclosed paragraph<div>inner</div></section>\n'
                                '<details class="ab-repeats"><summary>x</summary><section id="m2"></section>'
                                '</details>')
    assert cards[1]["html"] == '<div id="e3"><img src="data:," alt="a"><br/>stray</span> end</div>\n<hr>'
    assert cards[2]["html"] == '<section id="m4">&lt;script&gt; text</section>'
    assert split("<p>no conversation</p>") == ([], None)
    assert after(cards, "m4") == ("m1", cards) and after(cards, None) == (None, cards)
    assert after(cards, "m1") == ("m1", cards) and after(cards, "zz") == (None, cards)
