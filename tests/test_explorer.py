"""The explorer: canned queries (exact rows), facets, search (Chinese too), JSON
shapes, the content-block renderer, the conversation view and the dashboard,
through Datasette's own test client on a snapshot built from made-up transcripts."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
from pathlib import Path

import pytest

from importer.snapshot import export_snapshot
from importer.store import open_store
from transcripts import Chain, exec_call, header, sessions_dir, write, do_import

REPO = Path(__file__).resolve().parents[1]
SID_A = "aaaaaaaa-0000-4000-8000-00000000000a"  # alpha/main, 2026-04-05: deploy, failed restart, branch, compaction
SID_B = "bbbbbbbb-0000-4000-8000-00000000000b"  # alpha/main, 2026-04-06: unpriced model, a re-appended copy
SID_C = "cccccccc-0000-4000-8000-00000000000c"  # beta/ops, 2026-04-06: HTML payloads, image, model error
PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
# Payloads: each would set a window flag if the page ran it.
XSS_TEXT = '<script>window.__xss_text=1</script> hello <img src=x onerror="window.__xss_img=1">'
XSS_THINKING = "<script>window.__xss_thinking=1</script> I should look at the <b>logs</b> first"
XSS_COMMAND = "echo '<script>window.__xss_args=1</script>' '<img src=x onerror=window.__xss_args2=1>'"
XSS_RESULT = "<script>window.__xss_result=1</script>\n" + "\n".join(f"line {i} of output" for i in range(40))
XSS_ERROR = "<img src=x onerror=window.__xss_err=1> not found"
XSS_MODEL_ERROR = "<script>window.__xss_errmsg=1</script> upstream overloaded"


def _shift(objs: list[dict], day: str) -> list[dict]:
    """Move entries to another UTC day (entry timestamps decide the columns)."""
    for o in objs:
        if isinstance(o.get("timestamp"), str):
            o["timestamp"] = day + o["timestamp"][10:]
    return objs


def session_a() -> list[dict]:
    c = Chain()
    objs = [header(SID_A)]
    objs.append(c.entry("model_change", provider="anthropic", modelId="claude-test"))
    objs.append(c.user("请帮我把网站部署到新的服务器上"))
    objs.append(c.assistant([{"type": "thinking", "thinking": "Check the disk before deploying", "thinkingSignature": "s"},
                             exec_call("call_a1", "df -h /srv")], cost=0.02, tokens=1000))
    objs.append(c.result("call_a1", "Filesystem Size Used\n/dev/sda1 100G 40G",
                         details={"status": "completed", "exitCode": 0, "durationMs": 120}))
    objs.append(c.assistant([exec_call("call_a2", "systemctl restart nginx")], cost=0.01, tokens=500))
    objs.append(c.result("call_a2", "Job for nginx.service failed", details={"status": "completed", "exitCode": 1,
                                                                             "durationMs": 2300}))
    fork = c.parent
    objs.append(c.assistant([{"type": "text", "text": "An abandoned attempt"}], cost=0.001, tokens=10))
    c.parent = fork  # the conversation went on from the failed result: the line above is a dead branch
    objs.append(c.entry("compaction", summary="Disk checked; the nginx restart failed.", firstKeptEntryId="00000003",
                        tokensBefore=12345))
    objs.append(c.assistant([{"type": "text", "text": "部署失败了：nginx 无法重启"}], cost=0.005, tokens=200))
    return objs


def session_b() -> list[dict]:
    c = Chain(minute=300)
    objs = [header(SID_B)]
    objs.append(c.user("check the quokka logs"))
    call = c.assistant([{"type": "thinking", "thinking": "Looking at the quokka logs"},
                        exec_call("call_b1", "tail -n 5 /var/log/quokka.log")], cost=0.0, tokens=800, ts=1775440000000)
    call["message"]["provider"], call["message"]["model"] = "ollama", "local-model"
    objs.append(call)
    objs.append(c.result("call_b1", "quokka ok", details={"status": "completed", "exitCode": 0, "durationMs": 15}))
    copy = c.entry("message", message=json.loads(json.dumps(call["message"])))  # re-appended copy: counted once
    objs.append(copy)
    objs.append(c.assistant([{"type": "text", "text": "All good"}], cost=0.03, tokens=300))
    return _shift(objs, "2026-04-06")


def session_c() -> list[dict]:
    c = Chain(minute=600)
    objs = [header(SID_C)]
    objs.append(c.user(XSS_TEXT))
    objs.append(c.assistant([{"type": "thinking", "thinking": XSS_THINKING},
                             exec_call("call_c1", XSS_COMMAND),
                             {"type": "toolCall", "id": "call_c2", "name": "read",
                              "arguments": {"path": "<img src=x onerror=window.__xss_readargs=1>"}}],
                            cost=0.04, tokens=2000))
    objs.append(c.result("call_c1", XSS_RESULT, details={"status": "completed", "exitCode": 0, "durationMs": 7}))
    objs.append(c.result("call_c2", XSS_ERROR, name="read", is_error=True))
    objs.append(c.entry("message", message={
        "role": "user", "timestamp": 1775354400000,
        "content": [{"type": "text", "text": "a screenshot"},
                    {"type": "image", "data": PNG_1PX, "mimeType": "image/png"},
                    {"type": "image", "data": "PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIj48L3N2Zz4=", "mimeType": "image/svg+xml"},
                    {"type": "mystery", "payload": "<script>window.__xss_unknown=1</script>"}]}))
    err = c.assistant([], cost=0.0, tokens=0)
    err["message"].update(stopReason="error", errorMessage=XSS_MODEL_ERROR)
    objs.append(err)
    return _shift(objs, "2026-04-06")


def build_snapshot(tmp: Path, name: str = "snapshot.db") -> Path:
    """Import the three sessions (servers alpha and beta) and export them (Asia/Shanghai days)."""
    alpha, beta = tmp / "alpha", tmp / "beta"
    write(sessions_dir(alpha, "main") / f"{SID_A}.jsonl", session_a())
    write(sessions_dir(alpha, "main") / f"{SID_B}.jsonl", session_b())
    write(sessions_dir(beta, "ops") / f"{SID_C}.jsonl", session_c())
    archive = tmp / "archive.db"
    do_import(archive, alpha, server="alpha")
    do_import(archive, beta, server="beta")
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp / name, timezone="Asia/Shanghai")
    finally:
        store.close()
    return tmp / name


# -- the served snapshot ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    return build_snapshot(tmp_path_factory.mktemp("explorer"))


class Site:
    """Datasette as `agentbase serve` configures it, driven through its test client."""

    def __init__(self, snapshot: Path):
        from datasette.app import Datasette
        from datasette_agentbase.serve import load_metadata

        # served as `agentbase serve` serves it: a live file (datasette_agentbase/live.py)
        self.ds = Datasette([str(snapshot)], metadata=load_metadata(snapshot), template_dir=str(REPO / "templates"))
        asyncio.run(self.ds.invoke_startup())
        self.db = snapshot.stem

    def get(self, path: str):
        return asyncio.run(self.ds.client.get(path))

    def rows(self, query: str, **params) -> list[dict]:
        qs = "&".join(f"{k}={v}" for k, v in params.items())
        r = self.get(f"/{self.db}/{query}.json?_shape=array" + (f"&{qs}" if qs else ""))
        assert r.status_code == 200, r.text[:500]
        return r.json()


@pytest.fixture(scope="module")
def site(snapshot) -> Site:
    return Site(snapshot)


def pick(rows: list[dict], *keys) -> list[tuple]:
    return [tuple(r[k] for k in keys) for r in rows]


def link(value: str) -> tuple[str, str]:
    data = json.loads(value)
    assert set(data) == {"href", "label"}
    return data["href"], data["label"]


# -- canned queries: exact rows ---------------------------------------------------------------------

def test_exec_commands(site):
    # defaults: the latest day with a command (2026-04-06 in Shanghai), every agent; the re-appended
    # copy of session B's call is not listed twice
    rows = site.rows("exec_commands")
    assert pick(rows, "time", "agent", "server", "command", "exit_code", "duration_ms", "is_error") == [
        ("2026-04-06 10:05:02.000", "main", "alpha", "tail -n 5 /var/log/quokka.log", 0, 15, 0),
        ("2026-04-06 10:10:02.000", "ops", "beta", XSS_COMMAND, 0, 7, 0),
    ]
    assert link(rows[0]["conversation"]) == ("/-/agentbase/session/2#m9", "conversation")
    assert link(rows[0]["session"]) == ("/snapshot/sessions/2", "bbbbbbbb")
    assert link(rows[0]["message"]) == ("/snapshot/messages/9", "#9")
    rows = site.rows("exec_commands", agent="main", day="2026-04-05")
    assert pick(rows, "command", "exit_code", "duration_ms", "is_error", "result_preview") == [
        ("df -h /srv", 0, 120, 0, "Filesystem Size Used\n/dev/sda1 100G 40G"),
        ("systemctl restart nginx", 1, 2300, 1, "Job for nginx.service failed"),
    ]
    assert site.rows("exec_commands", agent="ops", server="alpha") == []
    assert site.rows("exec_commands", agent="nobody") == []


def test_thinking(site):
    rows = site.rows("thinking")
    assert pick(rows, "time", "agent", "model", "thinking") == [
        ("2026-04-06 10:05:02.000", "main", "local-model", "Looking at the quokka logs"),
        ("2026-04-06 10:10:02.000", "ops", "claude-test", XSS_THINKING),
    ]
    # an agent alone: its own latest day with thinking
    rows = site.rows("thinking", agent="main", day="2026-04-05")
    assert pick(rows, "thinking", "first_tool_call") == [("Check the disk before deploying", "exec")]
    assert link(rows[0]["conversation"])[0] == "/-/agentbase/session/1#m2"


def test_agent_day(site):
    rows = site.rows("agent_day")  # the latest day, every agent, in time order; the copy left out
    assert pick(rows, "agent", "role") == [
        ("main", "user"), ("main", "assistant"), ("main", "toolResult"), ("main", "assistant"),
        ("ops", "user"), ("ops", "assistant"), ("ops", "toolResult"), ("ops", "toolResult"),
        ("ops", "user"), ("ops", "assistant")]
    rows = site.rows("agent_day", agent="main", day="2026-04-05")
    assert pick(rows, "time", "role", "first_tool_call", "total_tokens", "cost_usd") == [
        ("2026-04-05 10:00:02.000", "user", None, None, None),
        ("2026-04-05 10:00:03.000", "assistant", "exec", 1500, 0.02),
        ("2026-04-05 10:00:04.000", "toolResult", None, None, None),
        ("2026-04-05 10:00:05.000", "assistant", "exec", 750, 0.01),
        ("2026-04-05 10:00:06.000", "toolResult", None, None, None),
        ("2026-04-05 10:00:07.000", "assistant", None, 15, 0.001),  # the abandoned branch
        ("2026-04-05 10:00:09.000", "assistant", None, 300, 0.005),
    ]
    # the agent's own latest day when no day is given
    assert {r["time"][:10] for r in site.rows("agent_day", agent="main")} == {"2026-04-06"}


def test_daily_cost(site):
    keys = ("day", "agent", "model", "calls", "total_tokens", "cost_usd", "unpriced_calls", "cost")
    expected_0406 = [
        ("2026-04-06", "main", "claude-test", 1, 450, 0.03, 0, "$0.0300"),
        # tokens without a cost: unpriced, not $0 (and the re-appended copy counted once)
        ("2026-04-06", "main", "local-model", 1, 1200, None, 1, "unpriced"),
        ("2026-04-06", "ops", "claude-test", 2, 3000, 0.04, 0, "$0.0400"),
    ]
    expected_0405 = [("2026-04-05", "main", "claude-test", 4, 2565, 0.036, 0, "$0.0360")]
    # the last row is the totals (is_total = 1): the sums of the rows above it
    total_all = [(None, None, None, 8, 7215, 0.106, 1, "$0.1060 + 1 unpriced")]
    assert pick(site.rows("daily_cost"), *keys) == expected_0406 + expected_0405 + total_all  # 7 days up to the latest
    assert pick(site.rows("daily_cost", day="2026-04-05"), *keys) == expected_0405 + [
        (None, None, None, 4, 2565, 0.036, 0, "$0.0360")]
    assert pick(site.rows("daily_cost", day="2026-04"), *keys) == expected_0406 + expected_0405 + total_all  # a month
    assert pick(site.rows("daily_cost", month="2026-04"), *keys) == expected_0406 + expected_0405 + total_all
    assert pick(site.rows("daily_cost", agent="ops"), *keys) == expected_0406[2:] + [
        (None, None, None, 2, 3000, 0.04, 0, "$0.0400")]
    assert [r["is_total"] for r in site.rows("daily_cost")] == [0, 0, 0, 0, 1]
    assert site.rows("daily_cost", day="2026-03-01") == []  # no usage: no rows, not a totals row of zeros
    page = site.get(f"/{site.db}/daily_cost").text
    assert "unpriced" in page
    rows = site.rows("daily_cost", day="2026-04-05")  # links: the costliest call's conversation, the day
    assert link(rows[0]["conversation"]) == ("/-/agentbase/session/1#m2", "costliest: aaaaaaaa")
    assert link(rows[0]["messages"]) == ("/snapshot/agent_day?agent=main&day=2026-04-05", "the day")
    assert '<a href="/snapshot/agent_day?agent=main&amp;day=2026-04-06">the day</a>' in page


def test_monthly_cost(site):
    keys = ("month", "agent", "provider", "model", "days", "calls", "input_tokens", "output_tokens", "total_tokens",
            "cost_usd", "unpriced_calls", "cost", "is_total")
    rows = [
        ("2026-04", "main", "anthropic", "claude-test", 2, 5, 2010, 1005, 3015, 0.066, 0, "$0.0660", 0),
        ("2026-04", "main", "ollama", "local-model", 1, 1, 800, 400, 1200, None, 1, "unpriced", 0),
        ("2026-04", "ops", "anthropic", "claude-test", 1, 2, 2000, 1000, 3000, 0.04, 0, "$0.0400", 0),
    ]
    total = (None, None, None, None, None, 8, 4810, 2405, 7215, 0.106, 1, "$0.1060 + 1 unpriced", 1)
    assert pick(site.rows("monthly_cost"), *keys) == rows + [total]  # the latest month
    assert pick(site.rows("monthly_cost", month="2026-04"), *keys) == rows + [total]
    assert pick(site.rows("monthly_cost", month="2026"), *keys) == rows + [total]  # a year: its months
    assert pick(site.rows("monthly_cost", agent="ops"), *keys) == [
        rows[2], (None, None, None, None, None, 2, 2000, 1000, 3000, 0.04, 0, "$0.0400", 1)]
    assert site.rows("monthly_cost", month="2025-12") == []
    got = site.rows("monthly_cost")
    assert link(got[0]["messages"]) == ("/snapshot/daily_cost?agent=main&month=2026-04", "per day")
    assert link(got[0]["conversation"]) == ("/-/agentbase/session/2#m12", "costliest: bbbbbbbb")  # $0.03 on 04-06
    assert got[-1]["conversation"] is None and got[-1]["messages"] is None


def test_failed_tools(site):
    rows = site.rows("failed_tools")
    assert pick(rows, "time", "agent", "kind", "tool", "call", "exit_code", "error", "session_errors") == [
        ("2026-04-06 10:10:02.000", "ops", "tool", "read", '{"path":"<img src=x onerror=window.__xss_readargs=1>"}',
         None, " not found", 2),
        ("2026-04-06 10:10:06.000", "ops", "model", None, "claude-test", None, XSS_MODEL_ERROR, 2),
    ]
    assert link(rows[1]["conversation"])[0] == "/-/agentbase/session/3#m18"
    rows = site.rows("failed_tools", agent="main")  # main's latest day with a failure
    assert pick(rows, "time", "tool", "call", "exit_code", "error", "session_errors") == [
        ("2026-04-05 10:00:05.000", "exec", "systemctl restart nginx", 1,
         "Job for nginx.service failed", 1)]


@pytest.mark.parametrize("q, ids", [
    ("部署", [7, 1]),          # a two-character Chinese word, inside sentences; ranked
    ("服务器", [1]),
    ("quokka", [10, 9, 8]),    # text, tool arguments, tool result; the copy (11) not repeated
    ("nginx", [4, 5, 7]),
    ('"restart nginx"', [4]),
    ("ngin*", [4, 5, 7]),
    ("部署 nginx", [7]),
    ("zzzz", []),
])
def test_search(site, q, ids):
    from urllib.parse import quote

    rows = site.rows("search", q=quote(q))
    assert [int(link(r["message"])[1][1:]) for r in rows] == ids


def test_search_snippets_and_filters(site):
    from urllib.parse import quote

    rows = site.rows("search", q=quote("部署"))
    assert [r["snippet"] for r in rows] == ["<mark>部署</mark>失败了：nginx 无法重启", "请帮我把网站<mark>部署</mark>到新的服务器上"]
    # a relevance, not the raw bm25: 100 for the best match, less for the others; the number of all matches
    assert rows[0]["relevance"] == 100 and 0 < rows[1]["relevance"] <= 100 and "rank" not in rows[0]
    assert [r["found"] for r in rows] == ["1 of 2", "2 of 2"] and rows[-1]["next"] is None
    assert site.rows("search", q=quote("部署"), agent="ops") == []
    assert len(site.rows("search", q="quokka", day="2026-04-05")) == 0
    newest = site.rows("search")  # no q: the newest messages
    assert [link(r["message"])[1] for r in newest[:2]] == ["#18", "#17"]
    # the HTML page marks the words and escapes the rest
    page = site.get(f"/{site.db}/search?q=" + quote("window")).text
    assert "<script>window" not in page and "&lt;script&gt;<mark>window</mark>" in page
    assert 'onerror="window' not in page and "<img src=x" not in page


def test_every_query_has_title_description_and_links(site):
    meta = site.ds.metadata("queries", database=site.db)
    assert set(meta) == {"exec_commands", "thinking", "agent_day", "daily_cost", "monthly_cost", "failed_tools",
                         "search"}
    for name, query in meta.items():
        assert query["title"] and query["description"]
        page = site.get(f"/{site.db}/{name}")
        assert page.status_code == 200
        rows = site.rows(name)
        assert rows, f"{name} shows no rows with its defaults"
        rows = [r for r in rows if not r.get("is_total")]  # a totals row belongs to no conversation
        assert all(link(r["conversation"])[0].startswith("/-/agentbase/session/") for r in rows)
        # datasette-json-html draws the link values as links
        assert '<a href="/-/agentbase/session/' in page.text


# -- JSON shapes, facets, table search ---------------------------------------------------------------

def test_json_shapes(site):
    full = site.get(f"/{site.db}/exec_commands.json").json()
    assert {"database", "rows", "columns", "truncated", "query"} <= set(full)
    assert full["columns"][:4] == ["time", "agent", "server", "tool"]
    objects = site.get(f"/{site.db}/exec_commands.json?_shape=objects").json()
    assert objects["rows"][0]["command"] == "tail -n 5 /var/log/quokka.log"
    parsed = site.get(f"/{site.db}/exec_commands.json?_shape=array&_json=conversation").json()
    assert parsed[0]["conversation"] == {"href": "/-/agentbase/session/2#m9", "label": "conversation"}
    # every link leads somewhere
    for value in ("conversation", "session", "message"):
        href = link(site.rows("exec_commands")[0][value])[0].split("#")[0]
        assert site.get(href).status_code == 200, href


def test_facets(site):
    data = site.get(f"/{site.db}/messages.json?_shape=objects&_size=0").json()
    facets = data["facet_results"]
    assert {"server", "agent_id", "day", "role", "first_tool_call", "model", "has_thinking", "is_error"} <= set(facets)
    counts = {f["value"]: f["count"] for f in facets["role"]["results"]}
    assert counts == {"assistant": 9, "toolResult": 5, "user": 4}
    days = [(f["value"], f["count"]) for f in facets["day"]["results"]]
    assert days == [("2026-04-06", 11), ("2026-04-05", 7)]  # by date, newest first (not the commonest first)
    narrowed = site.get(f"/{site.db}/tool_calls.json?_shape=objects&_size=0&agent_id=main").json()["facet_results"]
    # the re-appended copy's call is the same tool call: one row, not two
    assert {f["value"]: f["count"] for f in narrowed["is_error"]["results"]} == {0: 2, 1: 1}
    sessions = site.get(f"/{site.db}/sessions.json?_size=0").json()["facet_results"]
    assert {f["value"] for f in sessions["server"]["results"]} == {"alpha", "beta"}


def test_table_search_two_character_chinese(site):
    rows = site.get(f"/{site.db}/messages.json?_search=部署&_shape=array&_col=role").json()
    assert sorted(r["role"] for r in rows) == ["assistant", "user"]


def test_hidden_tables(site):
    names = [t["name"] for t in site.get(f"/{site.db}.json").json()["tables"]]
    assert "messages" in names and "messages_fts" not in names and "agentbase_snapshot" not in names


# -- the content-block renderer --------------------------------------------------------------------------

def no_payload(html: str) -> None:
    """None of the transcripts' markup reached the page as markup."""
    assert "<script>window" not in html
    assert "<img src=x" not in html and "<img src=\"x\"" not in html
    assert not re.search(r"<[^>]*\bonerror=", html)
    assert "<b>logs</b>" not in html


def test_render_cell_blocks(site):
    html = site.get(f"/{site.db}/messages/14").text  # thinking, exec and read calls, all with payloads
    no_payload(html)
    assert '<details class="ab-thinking">' in html
    assert '<pre class="ab-command"><code>echo &#39;&lt;script&gt;' in html
    assert "&lt;img src=x onerror=window.__xss_readargs=1&gt;" in html
    html = site.get(f"/{site.db}/messages/17").text  # images: PNG shown, SVG not; unknown block as JSON
    no_payload(html)
    assert f'src="data:image/png;base64,{PNG_1PX}"' in html
    assert "data:image/svg" not in html and "image not shown (image/svg+xml" in html
    assert "&#34;type&#34;: &#34;mystery&#34;" in html
    html = site.get(f"/{site.db}/tool_calls/5").text
    no_payload(html)
    html = site.get(f"/{site.db}/messages?session_id=3").text
    no_payload(html)


def test_rows_link_to_the_conversation(site):
    html = site.get(f"/{site.db}/sessions").text
    assert '<a href="/-/agentbase/session/1" title="conversation view">aaaaaaaa-' in html
    html = site.get(f"/{site.db}/messages/7").text
    assert 'href="/-/agentbase/session/1#m7"' in html
    html = site.get(f"/{site.db}/tool_calls?session_id=1").text
    assert 'href="/-/agentbase/session/1#m4"' in html


def test_renderer_units():
    from markupsafe import Markup
    from datasette_agentbase import render

    html = render.render_blocks(json.dumps([
        {"type": "text", "text": "a\n<b>b</b>"},
        {"type": "thinking", "thinking": "x" * 10, "redacted": True},
        {"type": "image", "data": "AAAA\" onerror=\"alert(1)", "mimeType": "image/png"},
        {"type": "image", "data": PNG_1PX, "mimeType": "IMAGE/JPEG"},
        {"type": "toolCall", "id": "c", "name": "write", "arguments": {"path": "/x", "content": "</pre><script>"}},
        {"type": "toolResult", "content": [{"type": "text", "text": "\n".join(["l"] * 30)}], "isError": True},
        "bare <string>",
        42,
    ]))
    assert isinstance(html, Markup)
    assert "&lt;b&gt;b&lt;/b&gt;" in html and "thinking (redacted)" in html
    assert 'onerror="alert' not in html and "image not shown (image/png" in html  # not base64: not shown
    assert "data:image/jpeg;base64," in html
    assert "&lt;/pre&gt;&lt;script&gt;" in html
    assert '<details class="ab-result ab-result-error">' in html  # long: folded (no "open")
    assert "bare &lt;string&gt;" in html
    short = render.tool_result([{"type": "text", "text": "ok"}])
    assert "<details class=\"ab-result\" open>" in short
    assert "more characters" in render.text("y" * 50, render.Options(limit=10))
    assert render.render_snippet("<mark>a</mark> <script>") == Markup(
        '<div class="ab-text ab-snippet"><mark>a</mark> &lt;script&gt;</div>')
    assert "<mark>" not in render.render_snippet("<mark>unbalanced")


def test_snippet_units():
    from importer.snippets import snippet

    blocks = json.dumps([{"type": "text", "text": "intro " * 40 + "部署到服务器 then Nginx/error.log <mark>"}])
    out = snippet(blocks, None, "服务器 nginx/error.log")
    assert out.startswith("…") and "<mark>服务器</mark>" in out and "<mark>Nginx/error.log</mark>" in out
    assert "<mark>\u200b" not in out and "<mark\u200b>" in out  # a literal <mark> stays text
    assert snippet(json.dumps([{"type": "text", "text": "nginxy nginx"}]), None, "nginx") == "nginxy <mark>nginx</mark>"
    assert snippet(None, "preview only", "zzz") == "preview only"


# -- the conversation view -----------------------------------------------------------------------------

def turn_ids(html: str) -> list[str]:
    return re.findall(r'<(?:section|div) class="ab-turn(?:-marker)?(?: [^"]*)?"(?: id="([^"]+)")?', html)


def test_conversation_view(site):
    r = site.get("/-/agentbase/session/1")
    assert r.status_code == 200
    html = r.text
    # the active path in order; each tool result inside its call's turn; branch and compaction marked
    assert turn_ids(html) == ["e1", "m1", "m2", "m4", "", "e2", "m7"]
    assert html.index('id="m3"') < html.index('id="m4"') < html.index('id="m5"') < html.index("Branch point")
    assert "ab-turn ab-turn-user" in html and "ab-turn ab-turn-assistant" in html
    assert "An abandoned attempt" not in html and "<strong>Compaction</strong>: 12,345 tokens" in html
    assert "anthropic/claude-test" in html and "1,500 tokens (1,000 in, 500 out" in html and "$0.0200" in html
    assert "exit 1 · 2,300 ms" in html and "ab-result ab-result-error" in html
    assert re.search(r"<td>2,565</td>\s*<td class=\"ab-session-cost\">\$0.0360", html)
    everything = site.get("/-/agentbase/session/1?all=1").text
    assert turn_ids(everything) == ["e1", "m1", "m2", "m4", "", "m6", "e2", "m7"]
    assert 'class="ab-turn ab-turn-assistant ab-offpath" id="m6"' in everything


def test_conversation_view_unpriced_and_copies(site):
    html = site.get("/-/agentbase/session/2").text
    assert '<span class="ab-unpriced">unpriced</span>' in html
    assert "copy: not counted" in html
    assert "+ 1,200 unpriced tokens" in html  # the session total says so too (not $0)


def test_conversation_view_escapes_everything(site):
    html = site.get("/-/agentbase/session/3").text
    no_payload(html)
    assert "&lt;script&gt;window.__xss_text=1&lt;/script&gt;" in html
    assert f'src="data:image/png;base64,{PNG_1PX}"' in html and "data:image/svg" not in html
    assert "&lt;script&gt;window.__xss_errmsg=1&lt;/script&gt; upstream overloaded" in html
    assert site.get("/-/agentbase/session/999").status_code == 404
    assert site.get("/-/agentbase/session/1?db=nope").status_code == 404


# -- the dashboard -------------------------------------------------------------------------------------

def test_dashboard(site):
    r = site.get("/-/agentbase?days=all")
    assert r.status_code == 200
    html = r.text
    assert html.count('<svg class="ab-chart"') == 2
    assert "<title>2026-04-06 · ops: 6</title>" in html and "<title>2026-04-06 · main: 4</title>" in html
    assert "<title>2026-04-05 · main: $0.0360</title>" in html
    assert "1,200 unpriced tokens" in html
    assert f'href="/{site.db}/agent_day?agent=ops&amp;server=beta"' in html  # an agent is a (server, name)
    # offline: nothing loaded from another host
    assert not re.search(r'src="(?:https?:)?//', html) and not re.search(r'<link[^>]+href="(?:https?:)?//', html)
    beta = site.get("/-/agentbase?server=beta&days=7").text
    assert "<title>2026-04-06 · ops: 6</title>" in beta and "· main:" not in beta
    assert site.get("/-/static-plugins/agentbase/agentbase.css").status_code == 200


# -- serving -------------------------------------------------------------------------------------------

def test_serve_applies_metadata_to_any_file_name(snapshot, tmp_path):
    import shutil

    from datasette_agentbase.serve import load_metadata

    other = tmp_path / "archive-2026.db"
    shutil.copy(snapshot, other)
    metadata = load_metadata(other)
    assert "snapshot" not in metadata["databases"] and "exec_commands" in metadata["databases"]["archive-2026"]["queries"]
    site = Site(other)
    rows = site.rows("exec_commands")
    assert link(rows[0]["session"])[0] == "/archive-2026/sessions/2"
    assert site.get("/-/agentbase/session/2").status_code == 200


def test_plain_datasette_command(snapshot):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "datasette", str(snapshot), "-m", str(REPO / "metadata.yml"), "--template-dir",
         str(REPO / "templates"), "--get", "/snapshot/exec_commands.json?_shape=array"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert [r["command"] for r in json.loads(proc.stdout)][0] == "tail -n 5 /var/log/quokka.log"


def test_serve_without_snapshot_is_one_line(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "importer", "serve", str(tmp_path / "none.db")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "no snapshot at" in proc.stderr and "Traceback" not in proc.stderr


def test_serve_removes_what_killed_runs_left(tmp_path, monkeypatch):
    """A killed `agentbase serve` cannot remove its metadata folder; the next start does, and only
    folders whose process is gone."""
    import subprocess
    import sys
    import tempfile

    from datasette_agentbase import serve

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{serve.RUN_PREFIX}{dead.pid}-abc"
    alive = tmp_path / f"{serve.RUN_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{serve.RUN_PREFIX}notapid-x"
    for folder in (stale, alive, other):
        folder.mkdir()
        (folder / "metadata.json").write_text("{}")
    serve._remove_stale_runs()
    assert not stale.exists() and alive.exists() and other.exists()


# -- paging: a page of `limit` rows (default 200), the last row's `next` link to the next one -----------------

def pages(site, query: str, **params) -> list[list[dict]]:
    """Every page of a canned query, following the `next` links; each page's rows without `next`."""
    from urllib.parse import parse_qsl, urlsplit

    out = []
    for _ in range(50):
        rows = site.rows(query, **params)
        assert all(r["next"] is None for r in rows[:-1]), "only the last row links to the next page"
        out.append([{k: v for k, v in r.items() if k != "next"} for r in rows])
        if not rows or rows[-1]["next"] is None:
            return out
        href, label = link(rows[-1]["next"])
        assert label == "next page" and href.startswith(f"/{site.db}/{query}?")
        params = dict(parse_qsl(urlsplit(href).query))
    raise AssertionError("more than 50 pages")


@pytest.mark.parametrize("query, params, size", [
    ("exec_commands", {"agent": "main", "day": "2026-04-05"}, 1),
    ("exec_commands", {}, 1),
    ("thinking", {}, 1),
    ("agent_day", {}, 3),
    ("agent_day", {"agent": "main", "day": "2026-04-05"}, 2),
    ("failed_tools", {}, 1),  # a tool call, then a model error: cursors t<id> and m<id>
    ("daily_cost", {"day": "2026-04"}, 1),
    ("daily_cost", {}, 3),
    ("monthly_cost", {}, 2),
])
def test_paging_gives_every_row_once_in_order(site, query, params, size):
    whole = [{k: v for k, v in r.items() if k != "next"} for r in site.rows(query, **params)]
    assert len(whole) > size
    got = pages(site, query, **params, limit=size)
    assert [len(p) for p in got] == [size] * (len(whole) // size) + ([len(whole) % size] if len(whole) % size else [])
    assert [r for p in got for r in p] == whole


def test_paging_defaults_and_bounds(site):
    for name in ("exec_commands", "thinking", "agent_day", "daily_cost", "monthly_cost", "failed_tools"):
        rows = site.rows(name)  # default: 200 rows a page; these fit on one
        assert rows and all(r["next"] is None for r in rows), name
    # the next page is for the day that was shown, even when the first page left the day empty
    first = site.rows("agent_day", limit=4)
    assert len(first) == 4 and link(first[-1]["next"])[0] == (
        f"/{site.db}/agent_day?day=2026-04-06&limit=4&after={link(first[-1]['message'])[1][1:]}")
    assert len(site.rows("agent_day", limit=0)) == 10  # 0 or nonsense: the default
    assert len(site.rows("agent_day", limit="x")) == 10 and len(site.rows("agent_day", limit=-3)) == 1
    assert site.rows("agent_day", after=999999) == []  # a cursor that names no row: nothing, not everything
    assert site.rows("failed_tools", after="x1") == []


def test_paging_html(site):
    html = site.get(f"/{site.db}/agent_day?agent=main&day=2026-04-05&limit=5").text
    assert '<p class="ab-next-page"><a href="/snapshot/agent_day?agent=main&amp;day=2026-04-05&amp;limit=5&amp;after=' in html
    assert html.count("Next page") == 1 and "<title>snapshot: Everything an agent did on a day</title>" in html
    # the form keeps agent, day, server and limit; not `after`, so a new choice starts at the first page
    assert all(f'name="{name}"' in html for name in ("agent", "day", "server", "limit"))
    assert 'name="after"' not in html
    assert "ab-next-page" not in site.get(f"/{site.db}/agent_day?agent=main&day=2026-04-05").text
    assert "ab-next-page" not in site.get(f"/{site.db}/messages").text


def test_search_filter_beyond_the_best_2000(snapshot, tmp_path):
    """An agent with a match outside the 2,000 best overall: found by ranking only its own messages."""
    import shutil
    import sqlite3

    copy = tmp_path / "snapshot.db"
    shutil.copy(snapshot, copy)
    conn = sqlite3.connect(copy)
    cols = [r[1] for r in conn.execute("PRAGMA table_info(messages)") if r[1] != "id"]
    top = conn.execute("SELECT MAX(id) FROM messages").fetchone()[0]
    rows, fts = [], []
    for i in range(1, 2102):
        rows.append((top + i, "bulk" if i < 2101 else "main"))
        # short bodies rank best; the one message of main is long, so it ranks last
        fts.append((top + i, "walrus" if i < 2101 else "walrus " + "filler " * 400))
    conn.executemany(f"INSERT INTO messages (id, {', '.join(cols)}) SELECT ?, {', '.join(cols)} FROM messages "
                     "WHERE id = 1", [(r[0],) for r in rows])
    conn.executemany("UPDATE messages SET agent_id = ?, usage_counted = 1 WHERE id = ?", [(a, i) for i, a in rows])
    conn.executemany("INSERT INTO messages_fts (rowid, body) VALUES (?, ?)", fts)
    conn.commit()
    conn.close()
    site = Site(copy)
    main = site.rows("search", q="walrus", agent="main")
    assert [link(r["message"])[1] for r in main] == [f"#{top + 2101}"]
    assert len(site.rows("search", q="walrus", agent="bulk")) == 100
    assert len(site.rows("search", q="walrus", server="alpha")) == 100
    assert site.rows("search", q="walrus", agent="ops") == []


# -- the conversation view of every source kind, and the session exports --------------------------------

@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """(Site, ids) on a snapshot holding sessions of every source kind (tests/conversation_fixtures.py)."""
    from conversation_fixtures import build_kinds_snapshot

    snapshot, ids = build_kinds_snapshot(tmp_path_factory.mktemp("kinds"))
    return Site(snapshot), ids


class _Tags:
    """Every element and attribute of a page, as a browser's parser sees them."""

    def __init__(self, html: str):
        from html.parser import HTMLParser

        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        outer = self

        class Parser(HTMLParser):
            def handle_starttag(self, tag, attrs):
                outer.tags.append((tag, {k: v or "" for k, v in attrs}))

            def handle_data(self, data):
                if outer.tags and outer.tags[-1][0] == "script":
                    outer.scripts.append(data)

        parser = Parser(convert_charrefs=True)
        parser.feed(html)
        parser.close()


def no_markup_from_transcripts(html: str) -> None:
    """No transcript text became markup: no script of theirs, no event handler, no javascript: or
    data: link, no image fetched from anywhere (what a browser's parser would see)."""
    no_payload(html)
    page = _Tags(html)
    assert not [t for t in page.scripts if "__xss" in t]
    handlers = [(tag, k) for tag, attrs in page.tags for k in attrs if k.startswith("on")]
    assert handlers == [], handlers
    for tag, attrs in page.tags:
        for key in ("href", "src", "action", "formaction", "srcset", "poster"):
            value = (attrs.get(key) or "").strip().lower()
            assert not value.startswith(("javascript:", "vbscript:", "data:text")), (tag, attrs)
        if tag == "img":
            assert attrs.get("src", "").startswith("data:image/"), attrs
        assert tag not in ("iframe", "object", "embed", "form") or "__xss" not in str(attrs), attrs


def test_markdown_in_text_and_thinking(kinds):
    site, ids = kinds
    html = site.get(f"/-/agentbase/session/{ids['reading']}").text
    no_markup_from_transcripts(html)
    # the assistant's Markdown: a heading, a numbered list, a table, code coloured by language
    assert "<h2>Plan</h2>" in html and "<ol>\n<li>Read <code>src/app.py</code></li>" in html
    assert "<table>" in html and "<th>step</th>" in html
    assert '<pre><code class="language-python"><span class="k">def</span>' in html
    assert '<span class="c1"># &lt;script&gt;window.__xss_code=1&lt;/script&gt;</span>' in html
    # links: http(s) only, marked rel; javascript: and data: stay text; an image is a link, not loaded
    assert ('<a href="https://example.com/docs?a=1&amp;b=2" rel="nofollow noopener noreferrer" class="ab-link">'
            'safe link</a>') in html
    assert "[bad one](javascript:window.__xss_link=1)" in html and "[data one](data:text/html;base64," in html
    assert 'title="x&quot; onmouseover=&quot;window.__xss_title=1"' in html  # an attribute value, escaped
    assert ('<a class="ab-link" rel="nofollow noopener noreferrer" href="https://example.com/x.png"><span '
            'class="ab-md-image">[image: pic &lt;img src=x onerror=window.__xss_alt=1&gt;]</span></a>') in html
    assert "raw HTML<br />\n&lt;img src=x onerror=&quot;window.__xss_raw=1&quot;&gt;" in html
    assert "&lt;javascript:window.__xss_auto=1&gt;" in html
    assert "<blockquote>\n<p>quoted <s>old</s> text</p>" in html
    # the user's Markdown too, its HTML escaped
    assert "Please <strong>fix</strong> the greeting in <code>src/app.py</code>" in html
    assert "&lt;script&gt;window.__xss_md=1&lt;/script&gt;" in html
    # thinking: folded, its first words on the fold, Markdown inside
    assert re.search(r'<details class="ab-thinking"><summary>.*?<span class="ab-thinking-preview ab-preview">Plan: read the '
                     r'file first, then edit\.</span></summary><div class="ab-md"><p><strong>Plan</strong>', html)
    # table cells keep plain text (no Markdown): the message row page
    message_id = re.findall(r'id="m(\d+)"', html.split("<h2>Plan</h2>")[0])[-1]
    row = site.get(f"/{site.db}/messages/{message_id}").text
    assert "<h2>Plan</h2>" not in row and "## Plan" in row


def test_file_writes_edits_and_patches(kinds):
    site, ids = kinds
    html = site.get(f"/-/agentbase/session/{ids['reading']}").text
    # OpenClaw's write and Claude's Write: the file's content, coloured by its name
    assert '<span class="ab-badge ab-badge-file" title="what the tool did to a file">write</span> <code class="ab-path">src/app.py</code>' in html
    assert '<pre class="ab-code"><code><span class="k">def</span><span class="w"> </span><span class="nf">greet' in html
    assert "__xss_write" in html and "&lt;/script&gt;" in html.split("__xss_write")[1][:200]
    assert '<code class="ab-path">/home/dev/app/config.json</code> <span class="ab-dim">3 lines</span>' in html
    # OpenClaw's edit {oldText, newText} and Claude's Edit {old_string, new_string}: a diff
    assert '<code class="ab-path">src/app.py</code> <span class="ab-dim">+1 −1</span>' in html
    assert '<span class="ab-diff-del">-    return &#34;hi &#34; + name</span>' in html
    assert ('<span class="ab-diff-add">+    return f&#34;hello {name}&#34;  # &lt;b onmouseover=window.__xss_edit=1&gt;'
            '</span>') in html
    assert ('<span class="ab-diff-ctx"> # App</span><span class="ab-diff-add">+</span>'
            '<span class="ab-diff-add">+Says hello.</span>') in html
    # a Codex-style patch: a diff as it is
    assert ('<span class="ab-diff-file">*** Update File: src/app.py</span><span class="ab-diff-hunk">@@ def greet(name):'
            '</span>') in html
    assert '<span class="ab-diff-add">+# Notes &lt;script&gt;window.__xss_patch=1&lt;/script&gt;</span>' in html
    assert "2 files, +3 −1" in html
    # none of them as escaped JSON
    assert "&#34;oldText&#34;" not in html and "&#34;content&#34;" not in html and "&#34;input&#34;" not in html
    # the agent-server's Codex fileChange and Claude's Edit; Codex's own apply_patch
    html = site.get(f"/-/agentbase/session/{ids['agent_server_codex']}").text
    assert '<span class="ab-badge ab-badge-file" title="what the tool did to a file">update</span> <code class="ab-path">payments/refunds.py</code>' in html
    assert '<span class="ab-diff-file">--- a/payments/refunds.py</span>' in html and "ab-diff-add" in html
    html = site.get(f"/-/agentbase/session/{ids['agent_server']}").text
    assert '<span class="ab-badge ab-badge-file" title="what the tool did to a file">edit</span>' in html and "ab-diff-del" in html
    html = site.get(f"/-/agentbase/session/{ids['codex']}").text
    assert '<span class="ab-diff-file">*** Update File: src/greet.py</span>' in html
    # Claude Code's Edit, Write, Bash (with its description) and Task (its prompt as Markdown)
    html = site.get(f"/-/agentbase/session/{ids['claude']}").text
    assert ('<code class="ab-path">/home/dev/app/greet.py</code> <span class="ab-dim">+1 −1</span>' in html
            and "<span class=\"ab-diff-add\">+    return &#39;hello&#39;</span>" in html)
    assert '<code class="ab-path">/home/dev/app/CHANGES.md</code> <span class="ab-dim">3 lines</span>' in html
    assert ('<div class="ab-call-note">Run the tests</div><pre class="ab-command"><code>pytest -q</code></pre>'
            in html)
    assert ('<span class="ab-arg-key">prompt</span><div class="ab-md"><p>Review <strong>greet.py</strong>:</p>'
            in html)
    assert ('<ul class="ab-todo"><li class="ab-todo-completed"><span class="ab-todo-mark" title="completed">✓</span> '
            'Edit greet()</li><li class="ab-todo-in_progress"><span class="ab-todo-mark" title="in_progress">▸</span> '
            'Run the &lt;b&gt;tests&lt;/b&gt;</li>') in html


def test_errors_pretty_and_repeats_collapsed(kinds):
    site, ids = kinds
    html = site.get(f"/-/agentbase/session/{ids['reading']}").text
    # the provider's error object, indented
    assert ('<div class="ab-error-message"><div class="ab-json">{\n  &#34;type&#34;: &#34;error&#34;,\n  &#34;error'
            '&#34;: {\n    &#34;type&#34;: &#34;overloaded_error&#34;') in html
    assert "Overloaded &lt;script&gt;window.__xss_provider=1&lt;/script&gt;" in html
    # a tool's JSON error, indented
    assert '<div class="ab-json">{\n  &#34;status&#34;: &#34;error&#34;,\n  &#34;tool&#34;: &#34;exec&#34;' in html
    # three identical model errors, three identical failing calls: each once, with its count
    assert html.count('<span class="ab-badge ab-badge-repeat" title="the same error, 3 times in a row">× 3</span>') == 2
    assert html.count('<details class="ab-repeats">') == 2
    assert "the same error 2 more times, until 2026-04-05 10:15:17" in html
    # the folded copies keep their anchors (a query's link to them still lands)
    repeats = html.split('<details class="ab-repeats">')[1].split("</details>\n")[0]
    assert len(re.findall(r'<section class="ab-turn ab-turn-assistant[^"]*" id="m\d+"', repeats)) == 2
    assert html.count(MISSING_TEXT) == 2 * 3  # each failing result: its summary line and its output


MISSING_TEXT = "cat: /srv/missing.txt: No such file or directory"


def _rule_title(site: Site, session_id: int) -> str:
    """A session's title by the one rule (the snapshot's session_list), as the pages name it."""
    import sqlite3

    conn = sqlite3.connect(f"file:{site.ds.databases[site.db].path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT title FROM session_list WHERE id = ?", (session_id,)).fetchone()[0]
    finally:
        conn.close()


def test_related_sessions(kinds):
    site, ids = kinds
    reading = site.get(f"/-/agentbase/session/{ids['reading']}").text
    assert "2 sessions started from this one" in reading
    sub, fork_title = _rule_title(site, ids["subagent"]), _rule_title(site, ids["fork"])
    assert sub and fork_title  # named by their first prompts, not by their uuids
    assert f'<a href="/-/agentbase/session/{ids["subagent"]}">{html.escape(sub)}</a> ' \
           f'<span class="ab-dim">(sub-agent, 2 messages)</span>' in reading
    assert f'<a href="/-/agentbase/session/{ids["fork"]}">{html.escape(fork_title)}</a> ' \
           f'<span class="ab-dim">(fork, 2 messages)</span>' in reading
    fork = site.get(f"/-/agentbase/session/{ids['fork']}").text
    assert f'Forked from\n    <a href="/-/agentbase/session/{ids["reading"]}">greeting fix</a>' in fork
    assert 'title="a fork of another session">fork</span>' in fork
    sub = site.get(f"/-/agentbase/session/{ids['subagent']}").text
    assert f'Sub-agent of\n    <a href="/-/agentbase/session/{ids["reading"]}">greeting fix</a>' in sub
    assert '>sub-agent</span>' in sub
    # a Claude Code sub-agent, whose spawning call is known: the child links to the call, the call to the child
    child = site.get(f"/-/agentbase/session/{ids['claude_sub']}").text
    call = re.search(rf'\(<a href="/-/agentbase/session/{ids["claude"]}#m(\d+)">the call that started it</a>\)', child)
    assert call and '>sub-agent</span>' in child
    parent = site.get(f"/-/agentbase/session/{ids['claude']}").text
    turn = parent.split(f'id="m{call.group(1)}"')[1].split("</section>")[0]
    assert "toolu_task1" in turn and (f'<div class="ab-subagent-link">↳ sub-agent session: <a href="/-/agentbase/'
                                      f'session/{ids["claude_sub"]}">') in turn
    assert "1 session started from this one" in parent
    # a Codex sub-agent (no spawning call recorded): linked both ways from the headers
    child = site.get(f"/-/agentbase/session/{ids['codex_child']}").text
    assert f'Sub-agent of\n    <a href="/-/agentbase/session/{ids["codex"]}">' in child
    assert "the call that started it" not in child
    assert f'<a href="/-/agentbase/session/{ids["codex_child"]}">' in site.get(f"/-/agentbase/session/{ids['codex']}").text
    # a reset chain: each links the other, with the reason
    before = site.get(f"/-/agentbase/session/{ids['mini']}").text
    after = site.get(f"/-/agentbase/session/{ids['langchain']}").text
    nxt = html.escape(_rule_title(site, ids["langchain"]))
    assert nxt != "session_1775000000123"  # its first prompt, not its id
    assert f'Next session (reset):\n    <a href="/-/agentbase/session/{ids["langchain"]}">{nxt}</a>' in before
    assert (f'Previous session (this one began with a reset):\n    <a href="/-/agentbase/session/{ids["mini"]}">示例会话'
            '</a>') in after
    usage = re.findall(r'<div class="ab-turn-usage" id="m\d+">\s*<span class="ab-role">usage</span>(.*?)</div>', child, re.S)
    assert len(usage) == 1 and "205 tokens" in usage[0]  # a model call's usage alone: one line


def test_every_kind_reads_sensibly(kinds, site):
    kinds_site, ids = kinds
    for name, sid in ids.items():
        r = kinds_site.get(f"/-/agentbase/session/{sid}")
        assert r.status_code == 200, name
        no_markup_from_transcripts(r.text)
        assert "no result recorded" not in r.text, name
    # Codex: injected context folded; reasoning like thinking and toolCall rows as calls with their result,
    # inside assistant cards (tests/test_conversation_turns.py checks the grouping)
    codex = kinds_site.get(f"/-/agentbase/session/{ids['codex']}").text
    assert codex.count('<section class="ab-turn ab-turn-context"') == 3
    assert '<details class="ab-context"><summary><span class="ab-badge ab-badge-context" title="text the agent put into the conversation (instructions, files, a summary)">context' in codex
    assert '<div class="ab-part ab-part-reasoning">' in codex and '<details class="ab-thinking">' in codex
    assert "ab-turn-reasoning" not in codex and "ab-turn-call" not in codex
    calls = re.findall(r'<div class="ab-part ab-part-call"[^>]*>.*?</section>', codex, re.S)
    assert calls and all("ab-result" in c for c in calls)
    assert "<span class=\"ab-role\">tool result</span>" not in codex  # every result under its call
    # Claude Code: its isMeta line folded as context
    claude = kinds_site.get(f"/-/agentbase/session/{ids['claude']}").text
    assert claude.count('<section class="ab-turn ab-turn-context"') == 1
    # the agent-server: run rows as one usage line
    agent_server = kinds_site.get(f"/-/agentbase/session/{ids['agent_server']}").text
    runs = re.findall(r'<div class="ab-turn-usage[^"]*" id="m\d+">(.*?)</div>', agent_server, re.S)
    assert len(runs) == 3 and all("tokens" in r and "run completed" in r for r in runs)
    assert '<pre class="ab-command"><code>rm -rf build &amp;&amp; npm run build</code></pre>' in agent_server
    # LangChain's tool rows are results of their calls; mini-OpenClaw's and pi's shell tools as code
    langchain = kinds_site.get(f"/-/agentbase/session/{ids['langchain']}").text
    assert '<pre class="ab-command"><code>echo one\necho two</code></pre>' in langchain
    assert langchain.count('class="ab-result') == 2 and "ab-turn-tool" not in langchain
    assert '<pre class="ab-command"><code>ls</code></pre>' in kinds_site.get(f"/-/agentbase/session/{ids['pi']}").text
    assert '<pre class="ab-command"><code>dir C:\\Users\\demo\\skills</code></pre>' in kinds_site.get(
        f"/-/agentbase/session/{ids['mini']}").text
    # a re-appended copy of a message is marked as one
    copies = site.get("/-/agentbase/session/2").text
    assert copies.count('<span class="ab-badge ab-badge-copy"') == 1
    assert "result shown with <a href=\"#m" in copies


def test_session_page_links_its_exports_and_script(kinds):
    site, ids = kinds
    sid = ids["reading"]
    html = site.get(f"/-/agentbase/session/{sid}").text
    for ext in ("json", "md", "html"):
        assert f'href="/-/agentbase/session/{sid}.{ext}"' in html
    assert '<script src="/-/static-plugins/agentbase/agentbase.js" defer></script>' in html
    assert '<div class="ab-toolbar" hidden>' in html  # shown by the script; the page reads without it
    js = site.get("/-/static-plugins/agentbase/agentbase.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in js.text and "fetch(" not in js.text and "http" not in js.text
    everything = site.get(f"/-/agentbase/session/{sid}?all=1").text
    assert f'href="/-/agentbase/session/{sid}.md?all=1"' in everything


def test_json_export(kinds):
    import sqlite3

    site, ids = kinds
    conn = sqlite3.connect(f"file:{site.ds.databases[site.db].path}?mode=ro", uri=True)
    for name, sid in ids.items():
        r = site.get(f"/-/agentbase/session/{sid}.json")
        assert r.status_code == 200, name
        assert r.headers["content-type"] == "application/json; charset=utf-8"
        doc = r.json()
        assert doc["format"] == "agentbase-session" and doc["version"] == 1 and doc["database"] == site.db
        assert doc["session"]["id"] == sid and isinstance(doc["session"]["header"], (dict, type(None)))
        expected = conn.execute("SELECT id, role, content_blocks FROM messages WHERE session_id = ? ORDER BY seq, id",
                                (sid,)).fetchall()
        assert [(m["id"], m["role"]) for m in doc["messages"]] == [(i, role) for i, role, _ in expected], name
        assert [m["blocks"] for m in doc["messages"]] == [json.loads(b) if b else None for _, _, b in expected]
        assert doc["message_count"] == len(expected)
        seqs = [m["seq"] for m in doc["messages"]]
        assert seqs == sorted(seqs)
        assert all("content_blocks" not in m and "text_preview" not in m and "session_uuid" not in m
                   for m in doc["messages"])
        calls = conn.execute("SELECT COUNT(*) FROM tool_calls WHERE session_id = ?", (sid,)).fetchone()[0]
        assert len(doc["tool_calls"]) == calls
    doc = site.get(f"/-/agentbase/session/{ids['reading']}.json").json()
    write = next(m for m in doc["messages"] if m["blocks"] and m["blocks"][0].get("id") == "call_w1")
    assert write["blocks"][0]["arguments"]["path"] == "src/app.py" and write["role"] == "assistant"
    result = next(c for c in doc["tool_calls"] if c["call_id"] == "call_w1")
    assert result["result_message_id"] == next(m["id"] for m in doc["messages"] if m["tool_call_id"] == "call_w1")
    assert site.get("/-/agentbase/session/99999.json").status_code == 404
    dl = site.get(f"/-/agentbase/session/{ids['reading']}.json?download=1")
    assert dl.headers["content-disposition"] == (
        f'attachment; filename="session-{ids["reading"]}-dddddddd-0000-4000-8000-00000000000d.json"')
    # the main snapshot's sessions too: every message of session 1, branches and all
    main = site.get("/-/agentbase/session/999999999999999999999.json")
    assert main.status_code == 404


def test_json_export_keeps_every_branch(site):
    doc = site.get("/-/agentbase/session/1.json").json()
    texts = [b.get("text") for m in doc["messages"] for b in (m["blocks"] or []) if isinstance(b, dict)]
    assert "An abandoned attempt" in texts
    assert [m["is_active_path"] for m in doc["messages"] if m["blocks"] and m["blocks"][0].get("text") ==
            "An abandoned attempt"] == [0]
    assert any(e["entry_type"] == "compaction" and e["data"]["summary"].startswith("Disk checked")
               for e in doc["entries"])


def test_live_answers_from_the_end_match_the_whole_conversation(kinds, site):
    """Every kind's sessions, and the branches, compactions and errors of the main snapshot: a live
    page's answer built from the end of the conversation is the whole one's (test_conversation_turns)."""
    from test_conversation_turns import tails_match_wholes

    for s in (kinds[0], site):
        tried, tails = tails_match_wholes(Path(s.ds.databases[s.db].path))
        print(f"{tails} of {tried} cards answered from the end only")
        assert tails


def test_markdown_export(kinds, site):
    kinds_site, ids = kinds
    r = kinds_site.get(f"/-/agentbase/session/{ids['reading']}.md")
    assert r.status_code == 200 and r.headers["content-type"] == "text/markdown; charset=utf-8"
    assert r.headers["content-disposition"].startswith("attachment; filename=\"session-")
    md = r.text
    assert md.startswith("# greeting fix\n\n- session: `dddddddd-0000-4000-8000-00000000000d`")
    sub = _rule_title(kinds_site, ids["subagent"])
    assert f"- sub-agent started from this one: {sub} (`ffffffff-0000-4000-8000-00000000000f`)" in md
    assert "## user · 2026-04-05 10:15:01\n\nPlease **fix** the greeting" in md
    assert "> **thinking**\n>\n> **Plan**: read the file first, then edit." in md
    assert "**tool call** `write` (call_w1)\n\nwrite `src/app.py`\n\n```python\ndef greet(name):" in md
    assert "```diff\n@@ -1 +1 @@\n-    return \"hi \" + name\n+    return f\"hello {name}\"" in md
    assert "```diff\n*** Begin Patch\n*** Update File: src/app.py" in md
    assert md.count("*(the same error 2 more times)*") == 2
    assert '"type": "overloaded_error",' in md  # the provider's error object, indented
    assert "**error** (exit 1 · 4 ms)\n\n```\ncat: /srv/missing.txt" in md
    # a fence is never closed by what it holds
    from datasette_agentbase.session_export import fence

    assert fence("a\n```\nb") == "````\na\n```\nb\n````"
    main = site.get("/-/agentbase/session/1.md").text
    assert "An abandoned attempt" not in main and "An abandoned attempt" in site.get(
        "/-/agentbase/session/1.md?all=1").text
    assert "> **Compaction**: 12,345 tokens summarized" in main
    assert "**tool call** `exec` (call_a1)\n\n```sh\ndf -h /srv\n```" in main
    for name, sid in ids.items():
        assert kinds_site.get(f"/-/agentbase/session/{sid}.md").status_code == 200, name


def test_html_export_opens_offline(kinds, site):
    import base64
    import hashlib

    kinds_site, ids = kinds
    for name, sid in list(ids.items()) + [("payloads", None)]:
        r = site.get("/-/agentbase/session/3.html") if sid is None else kinds_site.get(f"/-/agentbase/session/{sid}.html")
        assert r.status_code == 200, name
        assert r.headers["content-type"] == "text/html; charset=utf-8"
        assert r.headers["content-disposition"].startswith('attachment; filename="session-')
        html = r.text
        no_markup_from_transcripts(html)
        # nothing that leaves the file: no http(s) or protocol-relative reference, no link out of it
        assert not re.search(r"""(?:src|href|action|formaction|srcset|poster|data|background)\s*=\s*["']?\s*"""
                             r"""(?:https?:)?//""", html, re.I), name
        assert re.findall(r'\bhref="([^"#][^"]*)"', html) == [], name  # only anchors within the page
        assert "<link" not in html and "@import" not in html and "url(" not in html
        assert re.findall(r'\bsrc="([^"]*)"', html) == [] or all(
            s.startswith("data:image/") for s in re.findall(r'\bsrc="([^"]*)"', html))
        # the stylesheet and the script inline, each allowed by its hash and nothing else
        style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
        script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
        assert html.count("<script") == 1 and html.count("<style") == 1
        csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html).group(1)

        def digest(text):
            return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

        assert f"style-src '{digest(style)}'" in csp and f"script-src '{digest(script)}'" in csp
        assert "default-src 'none'" in csp and "img-src data:" in csp
        assert ".ab-turn" in style and "ab-find" in script
    html = kinds_site.get(f"/-/agentbase/session/{ids['reading']}.html").text
    assert "<h2>Plan</h2>" in html and "ab-diff-del" in html and "× 3" in html
    # a link in a message: its text and its URL shown as text, not a reference
    assert ('<span class="ab-link-off">safe link</span> <span class="ab-url">(https://example.com/docs?a=1&amp;b=2)'
            '</span>') in html
    assert '<span class="ab-md-image">[image: pic &lt;img src=x onerror=window.__xss_alt=1&gt;]</span> <span ' \
           'class="ab-url">(https://example.com/x.png)</span>' in html
    # the relatives by name, without links; nothing cut
    assert "greeting fix" in kinds_site.get(f"/-/agentbase/session/{ids['fork']}.html").text
    assert "more characters" not in html


def test_exports_need_the_login(snapshot, monkeypatch):
    from urllib.parse import quote

    from test_explorer_access import LockedSite

    locked = LockedSite(snapshot, monkeypatch)
    for ext in ("json", "md", "html"):
        path = f"/-/agentbase/session/3.{ext}"
        r = locked.get(path)
        if ext == "json":  # data: a 403, no redirect
            assert r.status_code == 403 and r.json()["title"] == "Login required", ext
        else:
            assert r.status_code == 302 and r.headers["location"] == "/-/agentbase/login?next=" + quote(path, safe="")
        assert "__xss" not in r.text and "cccccccc" not in r.text
    assert locked.get("/-/static-plugins/agentbase/agentbase.js").status_code == 200  # the script holds no data
    assert locked.login().status_code == 302
    for ext in ("json", "md", "html"):
        r = locked.get(f"/-/agentbase/session/3.{ext}")
        assert r.status_code == 200 and "cccccccc" in r.text, ext


@pytest.mark.parametrize("source, expected", [
    ("<script>alert(1)</script> **b**", "<p>&lt;script&gt;alert(1)&lt;/script&gt; <strong>b</strong></p>\n"),
    ("[x](javascript:alert(1))", "<p>[x](javascript:alert(1))</p>\n"),
    ("[x](JaVaScRiPt:alert(1))", "<p>[x](JaVaScRiPt:alert(1))</p>\n"),
    ("[x](&#106;avascript:alert(1))", "<p>[x](javascript:alert(1))</p>\n"),  # entities decoded, then refused
    ("[x](java\tscript:alert(1))", "<p>[x](java\tscript:alert(1))</p>\n"),
    ("[x](data:text/html,<b>)", "<p>[x](data:text/html,&lt;b&gt;)</p>\n"),
    ("[x](vbscript:msgbox)", "<p>[x](vbscript:msgbox)</p>\n"),
    ("[x](/-/logout)", "<p>[x](/-/logout)</p>\n"),  # relative: not a link into the explorer
    ("<javascript:alert(1)>", "<p>&lt;javascript:alert(1)&gt;</p>\n"),
    ("![a](data:image/png;base64,AAAA)", "<p>![a](data:image/png;base64,AAAA)</p>\n"),
    ("![a\"b](https://e.com/i.png)", '<p><a class="ab-link" rel="nofollow noopener noreferrer" href="https://e.com/i.png">'
                                    '<span class="ab-md-image">[image: a&#34;b]</span></a></p>\n'),
    ('[a](https://e.com/?q="x")', '<p><a href="https://e.com/?q=%22x%22" rel="nofollow noopener noreferrer" '
                                  'class="ab-link">a</a></p>\n'),
    ("mailto <mailto:a@b.c>", '<p>mailto <a href="mailto:a@b.c" rel="nofollow noopener noreferrer" class="ab-link">'
                              'mailto:a@b.c</a></p>\n'),
    ("plain\ntext", "<p>plain<br />\ntext</p>\n"),
    ("```js\nx = '<i>'\n```", None),
])
def test_markdown_units(source, expected):
    from datasette_agentbase import richtext

    html = str(richtext.markdown(source))
    if expected is not None:
        assert html == expected
    else:
        assert "&lt;i&gt;" in html and "<i>" not in html and 'class="language-js"' in html
    # the fast path (no Markdown syntax) gives what the parser gives
    for text in ("hello world", "two\nlines", "para\n\npara", "snake_case and file_name.txt", "a < b > c"):
        assert str(richtext.markdown(text)).replace("&#39;", "'") == richtext._parser().render(text)


def test_highlight_and_call_shapes():
    from datasette_agentbase import render, richtext

    code = richtext.highlight("x = '<script>alert(1)</script>'", "python")
    assert "<script>" not in code and "&lt;script&gt;" in code and '<span class="n">x</span>' in code
    assert richtext.highlight("x", "no-such-language") is None and richtext.highlight("x" * 50_000, "python") is None
    budget = richtext.Budget(10)
    assert richtext.highlight("print(1)", "python", budget=budget) is not None  # 8 characters: within
    assert richtext.highlight("print(1)", "python", budget=budget) is None  # spent: monospaced only
    shapes = [
        ("exec", json.dumps({"command": "ls"}), "shell", "command", "ls"),
        ("Bash", {"command": "ls -la", "description": "List"}, "shell", "note", "List"),
        ("shell", {"command": ["bash", "-lc", "make test"]}, "shell", "command", "make test"),
        ("local_shell", {"command": ["git", "log", "-1"]}, "shell", "command", "git log -1"),
        ("terminal", {"commands": ["a", "b"]}, "shell", "command", "a\nb"),
        ("exec_command", {"cmd": "pytest"}, "shell", "command", "pytest"),
        ("apply_patch", {"input": "*** Begin Patch\n*** End Patch"}, "patch", "patch", "*** Begin Patch\n*** End Patch"),
        ("apply_patch", "*** Begin Patch\n*** End Patch", "patch", "patch", "*** Begin Patch\n*** End Patch"),
        ("write", {"path": "a.py", "content": "x"}, "write", "path", "a.py"),
        ("Write", {"file_path": "b.md", "content": "# b"}, "write", "content", "# b"),
        ("edit", {"path": "a", "oldText": "x", "newText": "y"}, "edit", "edits", [("x", "y")]),
        ("edit", {"path": "a", "old_string": "x", "new_string": ""}, "edit", "edits", [("x", "")]),
        ("str_replace_based_edit_tool", {"command": "str_replace", "path": "a", "old_str": "1", "new_str": "2"},
         "edit", "rest", {"command": "str_replace"}),
        ("MultiEdit", {"file_path": "a", "edits": [{"old_string": "1", "new_string": "2"},
                                                  {"old_string": "3", "new_string": "4"}]},
         "edit", "edits", [("1", "2"), ("3", "4")]),
        ("fileChange", {"changes": [{"path": "p", "kind": {"type": "add"}, "diff": "+x"}]}, "changes", "changes",
         [{"kind": "add", "path": "p", "diff": "+x", "content": None}]),
        ("read", {"path": "a"}, "args", "args", {"path": "a"}),
        ("process", {"action": "list"}, "args", "args", {"action": "list"}),
    ]
    for name, args, kind, key, value in shapes:
        got_kind, shape = render.call_shape(name, args)
        assert (got_kind, shape[key]) == (kind, value), (name, args, got_kind, shape)
    html = render.tool_arguments("edit", {"path": "<a>", "oldText": "a\nb\n", "newText": "a\nc\n"})
    assert '<code class="ab-path">&lt;a&gt;</code>' in html and '<span class="ab-diff-del">-b</span>' in html
    assert '<span class="ab-diff-add">+c</span>' in html and '<span class="ab-diff-ctx"> a</span>' in html
    assert render.json_in_text('400 {"error": {"message": "x"}}') == ("400", {"error": {"message": "x"}})
    assert render.json_in_text("not json {") is None and render.json_in_text("{}") is None


def test_real_samples_render_quietly(tmp_path):
    """Every session of the real samples beside the repository (OpenClaw and pi backups, Codex
    rollouts, mini-OpenClaw sessions, Claude Code projects: other people's data, read where they are,
    never printed):
    the view and the three exports answer, and no transcript text becomes markup."""
    import os

    from importer.snapshot import export_snapshot
    from importer.store import open_store
    from test_codex import SAMPLE_PATHS as CODEX_PATHS
    from transcripts import do_import

    shared = REPO.parent / "shared"
    trees = [(shared / "samples", None)]
    trees += [(shared / "other-samples" / "codex" / rel, name) for name, rel in CODEX_PATHS.items()]
    for kind in ("mini-openclaw", "claude-code"):
        trees += [(p, p.name) for p in sorted((shared / "other-samples" / kind).glob("*")) if p.is_dir()]
    missing = [str(path) for path, _ in trees if not path.exists()]
    if missing:
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"samples missing under CI: {missing[:3]}")
        pytest.skip(f"no samples at {missing[:3]}")
    archive = tmp_path / "archive.db"
    for path, server in trees:  # (a half-written sample file is the importer tests' business)
        do_import(archive, path, server=server)
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    site = Site(tmp_path / "snapshot.db")
    import sqlite3

    conn = sqlite3.connect(tmp_path / "snapshot.db")
    sessions = conn.execute("SELECT id, source FROM sessions ORDER BY id").fetchall()
    conn.close()
    assert {source for _, source in sessions} >= {"openclaw", "codex", "mini-openclaw", "claude-code"}
    for sid, source in sessions:
        for suffix in ("", ".json", ".md", ".html"):
            r = site.get(f"/-/agentbase/session/{sid}{suffix}")
            if r.status_code != 200:  # (no content in the message: these are real people's sessions)
                raise AssertionError(f"session {sid} ({source}){suffix}: HTTP {r.status_code}")
            if suffix in ("", ".html"):
                try:
                    no_markup_from_transcripts(r.text)
                except AssertionError:
                    raise AssertionError(f"session {sid} ({source}){suffix}: transcript text became markup") from None
