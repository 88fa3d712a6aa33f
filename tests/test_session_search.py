"""The session search (importer/session_search.py): ``agentbase search``, the session browser's ``/?q=``
and its JSON, on a made-up snapshot (every text here is invented): the ranking's order (a person's
prompt above a tool's output, several matching messages above one, recency between equals), every
query form (words in one message or several, OR, -word, NOT, "a phrase", prefix*, the agent:, server:,
source:, tool: filters), a single Chinese character, identifiers that tokenize badly, bad syntax as a
one-line message (never a 500), the filters of the CLI and of the page, paging, snippets and the link at
the first match. Expected sessions are named by what the test wrote into them, never read from the
search's own output."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from importer import session_search as S
from importer.cli import cli
from importer.snapshot import export_snapshot
from importer.store import open_store
from transcripts import Chain, do_import, exec_call, header, sessions_dir, write

T0 = datetime(2026, 4, 1, 2, 0, tzinfo=timezone.utc)


def _session(sid: str, start: datetime, turns: list[tuple[str, str]], tool: str = "exec") -> list[dict]:
    """A header, then each (role, text): user prompts, assistant text, or a tool call and its result
    ("tool": the text is its output)."""
    c = Chain()
    objs = [header(sid)]
    for k, (role, text) in enumerate(turns):
        if role == "user":
            objs.append(c.user(text))
        elif role == "assistant":
            objs.append(c.assistant([{"type": "text", "text": text}]))
        else:
            call = exec_call(f"call_{sid[:4]}_{k}", "make build")
            call["name"] = tool
            objs.append(c.assistant([call]))
            objs.append(c.result(call["id"], text, name=tool))
    for k, o in enumerate(objs):
        o["timestamp"] = (start + timedelta(seconds=k)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return objs


# (name, server, agent, start offset in hours, tool name, turns)
SESSIONS = [
    ("prompt", "alpha", "main", 1, "exec", [("user", "the walrus gateway times out behind the proxy"),
                                            ("assistant", "raise proxy_read_timeout in walrus.conf")]),
    ("output", "alpha", "main", 2, "exec", [("user", "list the logs"),
                                            ("tool", "lots of lines and one walrus among them " + "noise " * 80)]),
    ("several", "alpha", "main", 3, "exec", [("user", "hello"), ("assistant", "walrus metrics look fine"),
                                             ("assistant", "walrus latency is up"), ("assistant", "walrus again")]),
    ("once", "alpha", "main", 4, "exec", [("user", "hello"), ("assistant", "walrus metrics look fine")]),
    ("apart", "beta", "ops", 5, "exec", [("user", "tune the narwhal cache"), ("assistant", "done"),
                                         ("user", "now vacuum the pelican database")]),
    ("together", "beta", "ops", 6, "exec", [("user", "narwhal cache and pelican database both slow")]),
    ("chinese", "beta", "ops", 7, "exec", [("user", "数据库出现死锁"), ("assistant", "已经部署到服务器")]),
    ("phrase", "alpha", "main", 8, "exec", [("tool", "ran rm -rf /tmp/build-cache then exit 0")]),
    ("scattered", "alpha", "main", 9, "exec", [("tool", "rm nothing; the build went to tmp instead of cache")]),
    ("prefix", "beta", "ops", 10, "exec", [("assistant", "kubectl rollout restart finished")]),
    ("reader", "beta", "ops", 11, "read", [("tool", "quokka settings loaded from file")]),
    ("runner", "alpha", "main", 12, "exec", [("tool", "quokka settings loaded from file")]),
    ("ident", "alpha", "main", 13, "exec", [("tool", "Error: ERR_SOCKET_CLOSED in src/net/socket_pool.py line 4")]),
    ("exclude", "alpha", "main", 14, "exec", [("user", "zebra and apache config")]),
    ("zebra", "alpha", "main", 15, "exec", [("user", "zebra crossing rules")]),
    ("older_twin", "beta", "ops", 16, "exec", [("user", "identical ocelot words")]),
    ("newer_twin", "beta", "ops", 17, "exec", [("user", "identical ocelot words")]),
]
SID = {name: f"{k + 1:08x}-0000-4000-8000-{k + 1:012x}" for k, (name, *_rest) in enumerate(SESSIONS)}
# many sessions with one shared word, to page through
PAGED = 30
MANY = 130  # messages of one session with one shared word: the message search's pages


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("session-search")
    for name, server, agent, hours, tool, turns in SESSIONS:
        write(sessions_dir(tmp / server, agent) / f"{SID[name]}.jsonl",
              _session(SID[name], T0 + timedelta(hours=hours), turns, tool))
    many = f"{999:08x}-0000-4000-a000-{999:012x}"
    write(sessions_dir(tmp / "gamma", "bulk") / f"{many}.jsonl",
          _session(many, T0 + timedelta(days=2), [("assistant" if k % 2 else "user", f"armadillo note {k}")
                                                  for k in range(MANY)]))
    for k in range(PAGED):
        sid = f"{k + 1:08x}-0000-4000-9000-{k + 1:012x}"
        write(sessions_dir(tmp / "gamma", "bulk") / f"{sid}.jsonl",
              _session(sid, T0 + timedelta(days=1, minutes=k), [("user", f"capybara report number {k}")]))
    archive = tmp / "archive.db"
    for server in ("alpha", "beta", "gamma"):
        do_import(archive, tmp / server, server=server)
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    return tmp / "snapshot.db"


@pytest.fixture(scope="module")
def conn(snapshot):
    c = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    yield c
    c.close()


@pytest.fixture(scope="module")
def names(conn) -> dict[int, str]:
    """session id -> the name of the session the test wrote."""
    by_uuid = {v: k for k, v in SID.items()}
    return {r[0]: by_uuid.get(r[1], "bulk") for r in conn.execute("SELECT id, session_uuid FROM sessions")}


def found(conn, names, q: str, **options) -> list[str]:
    """The sessions that hold every word (not those after them with some of the words)."""
    return [names[s["id"]] for s in S.search(conn, q, S.Options(**options))["sessions"] if not s["partial"]]


# -- the ranking ----------------------------------------------------------------------------------

def test_a_prompt_outranks_a_tool_output_and_several_messages_outrank_one(conn, names):
    got = found(conn, names, "walrus")
    assert set(got) == {"prompt", "output", "several", "once"}
    assert got.index("prompt") < got.index("output")
    assert got.index("several") < got.index("once")


def test_equal_sessions_come_newest_first(conn, names):
    assert found(conn, names, "ocelot") == ["newer_twin", "older_twin"]


def test_words_apart_are_found_after_words_together(conn, names):
    got = found(conn, names, "narwhal pelican")
    assert got[:2] == ["together", "apart"]  # in one message beats in two
    result = S.search(conn, "narwhal pelican")
    assert result["count"] == 2 and not any(s["partial"] for s in result["sessions"][:2])


def test_a_session_with_some_of_the_words_comes_after_those_with_all(conn, names):
    result = S.search(conn, "zebra apache")
    got = [names[s["id"]] for s in result["sessions"]]
    assert got == ["exclude", "zebra"]
    assert [s["partial"] for s in result["sessions"]] == [False, True]
    assert result["count"] == 1 and result["partial_count"] == 1


def test_snippets_counts_and_the_link_at_the_first_match(conn, names, snapshot):
    result = S.search(conn, "walrus")
    several = next(s for s in result["sessions"] if names[s["id"]] == "several")
    assert several["matches"] == 3 and several["matches_exact"]
    assert len(several["snippets"]) == 3 and all("<mark>walrus</mark>" in x["snippet"] for x in several["snippets"])
    first = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True).execute(
        "SELECT id FROM messages WHERE session_id = ? AND text_preview LIKE '%walrus%' ORDER BY timestamp, id LIMIT 1",
        (several["id"],)).fetchone()[0]
    assert several["first_match_id"] == first
    assert several["href"] == f"/-/agentbase/session/{several['id']}#m{first}"
    assert result["sessions"][0]["relevance"] == 100
    assert all(0 <= s["relevance"] <= 100 for s in result["sessions"])


# -- the query forms --------------------------------------------------------------------------------

def test_or_exclusion_phrase_and_prefix(conn, names):
    assert set(found(conn, names, "narwhal OR kubectl")) == {"apart", "together", "prefix"}
    assert found(conn, names, "zebra -apache") == ["zebra"]
    assert found(conn, names, "zebra NOT apache") == ["zebra"]
    assert found(conn, names, '-"apache config" zebra') == ["zebra"]
    assert found(conn, names, '"rm -rf /tmp/build"') == ["phrase"]
    assert set(found(conn, names, "rm build tmp")) == {"phrase", "scattered"}
    assert found(conn, names, "kube*") == ["prefix"]
    assert found(conn, names, "kube") == []


def test_identifiers_that_tokenize_badly(conn, names):
    assert found(conn, names, "ERR_SOCKET_CLOSED") == ["ident"]
    assert found(conn, names, "socket_pool.py") == ["ident"]
    assert found(conn, names, "src/net/socket_pool.py") == ["ident"]
    assert found(conn, names, "walrus.conf") == ["prompt"]
    assert found(conn, names, "--proxy_read_timeout") == ["prompt"]  # two dashes: a word, not an exclusion


def test_chinese_words_and_a_single_character(conn, names):
    assert found(conn, names, "死锁") == ["chinese"]
    assert found(conn, names, "服务器 部署") == ["chinese"]
    for ch in ("锁", "库", "数", "器", "已"):  # the end, middle and start of a run
        assert found(conn, names, ch) == ["chinese"], ch
    assert found(conn, names, "猫") == []
    assert found(conn, names, "锁 -部署") == ["chinese"]  # message-level exclusion: the prompt holds no 部署


def test_filters_in_the_query_and_as_options(conn, names):
    assert found(conn, names, "quokka tool:read") == ["reader"]
    assert found(conn, names, "quokka tool:exec") == ["runner"]
    assert found(conn, names, "quokka agent:ops") == ["reader"]
    assert found(conn, names, "quokka server:alpha") == ["runner"]
    assert found(conn, names, "quokka source:openclaw agent:main agent:ops") in (["runner", "reader"],
                                                                                ["reader", "runner"])
    assert found(conn, names, "quokka", agent=["main"]) == ["runner"]
    assert found(conn, names, "quokka", tool=["read"]) == ["reader"]
    assert found(conn, names, "quokka source:codex") == []
    assert found(conn, names, "walrus", since="2026-04-02") == []
    assert len(found(conn, names, "capybara", since="2026-04-02", limit=100)) == PAGED
    only = S.search(conn, "tool:read")  # filters alone: their sessions, newest first
    assert [names[s["id"]] for s in only["sessions"]] == ["reader"]


@pytest.mark.parametrize("q, message", [
    ('"unclosed phrase', "quote"), ("OR walrus", "OR needs a word"), ("walrus OR", "OR needs a word"),
    ("walrus OR OR zebra", "OR needs a word"), ("-walrus", "only excluded words"), ("walrus NOT", "NOT needs"),
    ("agent:", "needs a value"), ("walrus OR -zebra", "OR cannot join"),
])
def test_bad_syntax_is_a_clear_message(conn, q, message):
    with pytest.raises(S.QueryError) as err:
        S.search(conn, q)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_punctuation_alone_finds_nothing_and_is_no_error(conn):
    result = S.search(conn, '"" / ++')
    assert result["sessions"] == [] and result["count"] == 0


def test_paging_adds_up(conn):
    # one word; and two words in one message, whose last page reads the words apart too: the same order
    for q in ("capybara", "capybara report"):
        seen = []
        for offset in range(0, PAGED, 7):
            seen += [s["id"] for s in S.search(conn, q, S.Options(limit=7, offset=offset))["sessions"]]
        assert len(seen) == len(set(seen)) == PAGED, q
        assert seen == [s["id"] for s in S.search(conn, q, S.Options(limit=PAGED))["sessions"]], q


# -- the CLI -----------------------------------------------------------------------------------------

def test_the_cli(snapshot, names):
    runner = CliRunner()
    got = runner.invoke(cli, ["search", "--snapshot", str(snapshot), "--json", "quokka", "--agent", "ops"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    assert [names[s["id"]] for s in data["sessions"]] == ["reader"]
    got = runner.invoke(cli, ["search", "--snapshot", str(snapshot), "narwhal pelican"])
    assert got.exit_code == 0 and "2 sessions with every word" in got.output
    assert "[narwhal]" in got.output and "/-/agentbase/session/" in got.output
    # one session: the one with both words in one message fills it (the words apart are not read)
    got = runner.invoke(cli, ["search", "--snapshot", str(snapshot), "narwhal pelican", "--limit", "1"])
    assert got.exit_code == 0 and "1 or more session with every word" in got.output
    assert got.output.count("\n1. ") == 1 and "\n2. " not in got.output
    got = runner.invoke(cli, ["search", "--snapshot", str(snapshot), '"walrus'])
    assert got.exit_code == 1 and "quote" in got.output and "Traceback" not in got.output
    got = runner.invoke(cli, ["search", "--snapshot", str(snapshot), "walrus", "--since", "April"])
    assert got.exit_code == 1 and "--since must be a day" in got.output
    got = runner.invoke(cli, ["search", "--snapshot", str(snapshot.parent / "none.db"), "walrus"])
    assert got.exit_code == 1 and "no snapshot" in got.output


# -- the browser and its JSON -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(snapshot):
    from test_explorer import Site

    return Site(snapshot)


def test_the_page_and_its_json(site, names):
    data = site.get("/-/agentbase/sessions.json?q=walrus").json()
    assert data["ok"] and data["count"] == 4
    got = [names[r["id"]] for r in data["rows"]]
    assert got.index("prompt") < got.index("output") and got.index("several") < got.index("once")
    row = data["rows"][0]
    assert {"title", "message_count", "snippets", "matches", "relevance", "match_href"} <= set(row)
    assert row["match_href"].startswith(f"/-/agentbase/session/{row['id']}#m")
    page = site.get("/?q=walrus").text
    assert "<mark>walrus</mark>" in page and "matching message" in page and "best first" in page
    assert f'href="{row["match_href"]}"' in page
    data = site.get("/-/agentbase/sessions.json?q=" + quote("quokka tool:read agent:ops")).json()
    assert [names[r["id"]] for r in data["rows"]] == ["reader"]
    # the link to the message search carries the words, and the filters it knows as its parameters
    assert data["search_messages_url"].endswith("/search?q=quokka&agent=ops")
    data = site.get("/-/agentbase/sessions.json?agent=ops&q=quokka").json()
    assert [names[r["id"]] for r in data["rows"]] == ["reader"]
    data = site.get("/-/agentbase/sessions.json?q=" + quote("锁")).json()
    assert [names[r["id"]] for r in data["rows"]] == ["chinese"]


def test_the_page_pages_a_search(site):
    url, ids = "/-/agentbase/sessions.json?limit=8&q=capybara", []
    while url:
        data = site.get(url).json()
        assert data["skipped"] == len(ids)
        ids += [r["id"] for r in data["rows"]]
        url = data["next_url"]
    assert len(ids) == len(set(ids)) == PAGED
    assert 'rel="next"' in site.get("/?limit=8&q=capybara").text


def test_bad_syntax_on_the_page_is_a_message_not_a_500(site):
    r = site.get("/?q=" + quote('"walrus'))
    assert r.status_code == 200 and "cannot be read" in r.text and "quote" in r.text
    r = site.get("/-/agentbase/sessions.json?q=" + quote("walrus OR"))
    assert r.status_code == 400 and not r.json()["ok"] and "OR needs a word" in r.json()["error"]
    r = site.get("/?q=" + quote("<script>alert(1)</script> OR"))
    assert r.status_code == 200 and "<script>alert(1)" not in r.text


def test_the_message_search_pages_past_100_with_a_total_and_a_relevance(site):
    first = site.rows("search", q="armadillo")
    assert len(first) == 100 and first[0]["found"] == f"1 of {MANY}" and first[-1]["found"] == f"100 of {MANY}"
    assert first[0]["relevance"] == 100 and all(0 < r["relevance"] <= 100 for r in first)
    assert json.loads(first[-1]["next"])["href"].endswith("page=2")
    second = site.rows("search", q="armadillo", page="2")
    assert len(second) == MANY - 100 and second[0]["found"] == f"101 of {MANY}" and second[-1]["next"] is None
    ids = {r["message"] for r in first} | {r["message"] for r in second}
    assert len(ids) == MANY
    assert site.rows("search", q="armadillo", page="3") == []
    assert site.rows("search", q="armadillo", page="x")[0]["found"] == f"1 of {MANY}"  # (a bad page: the first)
    filtered = site.rows("search", q="armadillo", agent="bulk", page="2")
    assert len(filtered) == MANY - 100 and filtered[0]["found"] == f"101 of {MANY}"


def test_a_narrow_filter_finds_its_session_beyond_the_best_of_the_whole_index(conn, names, monkeypatch):
    # the best few of the whole index are all another agent's: the filter's own matches are ranked then
    monkeypatch.setattr(S, "CANDIDATES", 10)
    for narrow in (S.NARROW_MESSAGES, 0):  # the filter's sessions' messages as candidates, or the index's newest
        monkeypatch.setattr(S, "NARROW_MESSAGES", narrow)
        assert found(conn, names, "armadillo OR quokka agent:ops") == ["reader"]
        assert found(conn, names, "armadillo OR quokka", server=["alpha"]) == ["runner"]
    result = S.search(conn, "armadillo")
    assert not result["count_exact"] and result["sessions"][0]["matches"] == 10
    assert not result["sessions"][0]["matches_exact"]


# -- what keeps a common query fast at a million messages -------------------------------------------------

def test_a_common_query_is_ranked_among_its_newest_matches(conn, names, monkeypatch):
    from importer import search

    newest = [r[0] for r in conn.execute(
        "SELECT m.session_id FROM messages_fts f JOIN messages m ON m.id = f.rowid "
        "WHERE messages_fts MATCH 'walrus' AND m.usage_counted = 1 ORDER BY f.rowid DESC")]
    assert len(set(newest)) >= 3
    everything = found(conn, names, "walrus")
    monkeypatch.setattr(search, "RANKED", 1)  # only the newest match is ranked (and the titles)
    result = S.search(conn, "walrus")
    by_message = [s for s in result["sessions"] if s["matches"]]
    assert [s["id"] for s in by_message] == [newest[0]] and by_message[0]["matches"] == 1
    # with a filter: the newest match among the filter's
    other = next(sid for sid in newest if names[sid] != names[newest[0]])
    agent = conn.execute("SELECT agent_id, server FROM session_list WHERE id = ?", (other,)).fetchone()
    monkeypatch.setattr(S, "CANDIDATES", 10)  # (few pass among the best of the whole index: the filter's own)
    filtered = S.search(conn, "walrus", S.Options(agent=[agent[0]], server=[agent[1]]))
    assert [s["id"] for s in filtered["sessions"] if s["matches"]][:1] in ([other], [newest[0]])
    monkeypatch.setattr(search, "RANKED", 20_000)
    assert found(conn, names, "walrus") == everything


def test_a_prefix_is_read_as_the_terms_it_starts(conn, names, monkeypatch):
    query = S.parse("kube* 锁 -apach*")
    expansions = S.expand(conn, query)
    kube, lock = query.clauses[0][0], query.clauses[1][0]
    assert expansions[kube] and all(t.startswith("kube") for t in expansions[kube])
    assert all(t.startswith("锁") for t in expansions[lock]) and "锁" in expansions[lock]
    def ors(term):
        return "(" + " OR ".join(f'"{t}"' for t in expansions[term]) + ")"

    assert query.fts(expansions) == f"(({ors(kube)}) AND ({ors(lock)})) NOT ({ors(query.excluded[0])})"
    with_terms = {q: found(conn, names, q) for q in ("kube*", "锁", "库", "已", "锁 -部署", "zebra -apach*")}
    monkeypatch.setattr(S, "PREFIX_TERMS", 0)  # as FTS5's prefix query
    assert S.expand(conn, query) == {}
    assert {q: found(conn, names, q) for q in with_terms} == with_terms
    assert with_terms["kube*"] == ["prefix"] and with_terms["锁"] == ["chinese"]


def test_the_message_search_ranks_the_same_newest_matches():
    """metadata.yml's search query says RANKED as a literal, for its newest matches with and without a
    filter (its SQL calls no Python but agentbase_fts)."""
    from importer import search, shape

    sql = (Path(__file__).resolve().parents[1] / "metadata.yml").read_text(encoding="utf-8")
    query = sql[sql.index("      search:"):]
    assert query.count(f"THEN {search.RANKED} ELSE 0 END") == 1 and query.count(f"ELSE {search.RANKED} END") == 1
    assert f"INDEXED BY {shape.MESSAGE_SCOPE_INDEX}" in query
