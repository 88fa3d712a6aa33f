"""The explorer: canned queries (exact rows), facets, search (Chinese too), JSON
shapes, the content-block renderer, the conversation view and the dashboard,
through Datasette's own test client on a snapshot built from made-up transcripts."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from importer.export import export_snapshot, inspect_path
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
        from datasette_agentbase.serve import load_inspect, load_metadata

        self.ds = Datasette(immutables=[str(snapshot)], metadata=load_metadata(snapshot),
                            inspect_data=load_inspect(snapshot), template_dir=str(REPO / "templates"))
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
    assert rows[0]["rank"] <= rows[1]["rank"]
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
    from datasette_agentbase.snippets import snippet

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
    assert f'href="/{site.db}/agent_day?agent=ops"' in html
    # offline: nothing loaded from another host
    assert not re.search(r'src="(?:https?:)?//', html) and not re.search(r'<link[^>]+href="(?:https?:)?//', html)
    beta = site.get("/-/agentbase?server=beta&days=7").text
    assert "<title>2026-04-06 · ops: 6</title>" in beta and "· main:" not in beta
    assert site.get("/-/agentbase/agentbase.css").status_code == 200


# -- serving -------------------------------------------------------------------------------------------

def test_serve_applies_metadata_to_any_file_name(snapshot, tmp_path):
    import shutil

    from datasette_agentbase.serve import load_inspect, load_metadata

    other = tmp_path / "archive-2026.db"
    shutil.copy(snapshot, other)
    assert load_inspect(other) is None  # no counts file of its own
    shutil.copy(inspect_path(snapshot), inspect_path(other))
    counts = load_inspect(other)
    assert list(counts) == ["archive-2026"] and counts["archive-2026"]["tables"]["messages"]["count"] == 18
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
