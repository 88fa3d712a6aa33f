"""The conversation view of the kinds that write each item of a model's output as a row of its own
(Codex's reasoning, message and function_call rows; the agent-server's reasoning, tool.started and
assistant.message events): one assistant card per model call (the rows between two inputs),
holding its thinking, text and tool calls with their results, and one usage line; Codex's
compaction as a marker; the database page (``/snapshot``) with its populated tables first; the
real Codex samples (../shared/other-samples/codex) drawn the same way.

The expected cards are worked out here from the transcripts themselves (the rollout's lines, the
agent-server's events table), not from the archive: a card is the model's items (reasoning,
assistant message, tool call) between two inputs (a prompt or injected message, a tool's output,
a compaction); a Codex card's tokens are the sum of the token counts its request wrote (the
cumulative total's growth); an agent-server run's usage line follows the run's last card.
Screenshots at 1400 and 390 px of both in Chromium go to $AGENTBASE_ARTIFACT_DIR.
"""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

import agent_server_fixture as AF
import codex_fixtures as CF
from conftest import serving
from test_explorer import Site
from test_explorer_browser import artifact_dir, browser, full_page_screenshot  # noqa: F401 (a fixture)
from transcripts import do_import

COMPACT_SUMMARY = "Summary so far: both files were read, the third is next."


def codex_rollout() -> CF.Rollout:
    """A Codex session: a request with reasoning and a shell call; one with reasoning and an answer;
    one with two calls at once; one whose reasoning and answer were two model calls (two token
    counts, no input between); a compaction; one with text and a call together."""
    r = CF.conversation(turns=1)
    r.turn("Read a.txt and b.txt")
    r.reasoning("Read both at once")
    a = r.call("exec_command", {"cmd": "cat a.txt", "workdir": r.cwd})
    b = r.call("exec_command", {"cmd": "cat b.txt", "workdir": r.cwd})
    r.tokens(6000, 5000, 90)
    r.output(a, "Process exited with code 0\nOutput:\nalpha\n")
    r.output(b, "Process exited with code 0\nOutput:\nbravo\n")
    r.reasoning("Both are short")
    r.tokens(6200, 6000, 20)
    r.assistant("Both files are one word each.")
    r.tokens(6300, 6100, 15)
    r.event({"type": "task_complete", "turn_id": "t", "last_agent_message": "Both files are one word each."})
    r.add("compacted", {"message": COMPACT_SUMMARY, "replacement_history": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Read a.txt and b.txt"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One word each."}]}]})
    r.event({"type": "context_compacted"})
    r.turn("Now c.txt")
    r.assistant("Reading c.txt now.")
    c = r.call("exec_command", {"cmd": "cat c.txt", "workdir": r.cwd})
    r.tokens(7000, 6000, 40)
    r.output(c, "Process exited with code 1\nOutput:\ncat: c.txt: No such file or directory\n")
    r.reasoning("It does not exist")
    r.assistant("There is no c.txt.")
    r.tokens(7100, 7000, 12)
    return r


def codex_oracle(r: CF.Rollout) -> tuple[list, list]:
    """(turns, compactions) of the rollout as the view should draw it: turns as ("user",),
    ("context",) or ("assistant", [(part kind, what identifies it)...], tokens, model calls)."""
    turns: list = []
    compactions = []
    open_card = None
    last_total = 0
    for obj in r.lines:
        kind, p = obj["type"], obj["payload"]
        if kind == "compacted":
            compactions.append(p)
            open_card = None
        elif kind == "event_msg" and p.get("type") == "token_count" and p.get("info"):
            total = p["info"]["total_token_usage"]["total_tokens"]
            if total != last_total:  # a model call: its request's usage goes on its card
                assert open_card is not None, "the fixture's token counts each follow an item"
                open_card[2] += total - last_total
                open_card[3] += 1
                last_total = total
        elif kind == "response_item":
            t = p["type"]
            if t == "message" and p["role"] != "assistant":
                text = p["content"][0]["text"]
                wrapper = p["role"] == "developer" or text.startswith(("# AGENTS.md", "<environment_context"))
                turns.append(("context",) if wrapper else ("user",))
                open_card = None
            elif t.endswith("_output"):
                open_card = None  # a tool's output: shown under its call, an input all the same
            else:
                if open_card is None:
                    open_card = ["assistant", [], 0, 0]
                    turns.append(open_card)
                if t == "reasoning":
                    summary = p["summary"][0]["text"] if p["summary"] else None
                    open_card[1].append(("reasoning", summary))
                elif t == "message":
                    open_card[1].append(("text", p["content"][0]["text"]))
                else:
                    open_card[1].append(("call", p["call_id"]))
    return [tuple(t) for t in turns], compactions


def agent_server_oracle(db: Path, session_id: str) -> list:
    """The turns of one agent-server session from its events: ("user",), ("usage",) (a completed
    run: after its last card) and ("assistant", [part kinds]); a tool.started that no tool.completed
    closes is no call (docs/agent-server.md)."""
    conn = sqlite3.connect(db)
    try:
        events = [(kind, json.loads(payload)) for kind, payload in conn.execute(
            "SELECT type, payload FROM events WHERE session_id = ? ORDER BY seq", (session_id,))]
    finally:
        conn.close()

    def ids(value) -> set:  # every id a tool event names for its call (docs/agent-server.md)
        if isinstance(value, dict):
            return {v for k, v in value.items() if k in ("id", "tool_use_id", "toolCallId") and isinstance(v, str)} \
                | {i for v in value.values() for i in ids(v)}
        return {i for v in value for i in ids(v)} if isinstance(value, list) else set()

    completed = [ids(payload) for kind, payload in events if kind == "tool.completed"]
    parts = {"reasoning": "reasoning", "tool.started": "call", "assistant.message": "text"}
    turns: list = []
    open_card = None
    for kind, payload in events:
        if kind == "tool.started" and not any(ids(payload) & done for done in completed):
            continue  # a call never completed: an entry, not a call
        if kind in parts:
            if open_card is None:
                open_card = ["assistant", []]
                turns.append(open_card)
            open_card[1].append(parts[kind])
        elif kind in ("user.message", "tool.completed", "run.completed"):
            open_card = None
            if kind != "tool.completed":
                turns.append(["user" if kind == "user.message" else "usage"])
    return [(t[0], t[1]) if t[0] == "assistant" else (t[0],) for t in turns]


TURN = re.compile(r'<section class="ab-turn ab-turn-(\w+)[^"]*" id="(m\d+)">'
                  r'|<div class="ab-turn-usage[^"]*" id="(m\d+)">'
                  r'|<div class="ab-part ab-part-(\w+)[^"]*"(?: id="m\d+")?>')


def page_turns(page: str) -> list:
    """The conversation's turns as drawn: ("assistant", [(part kind, its HTML)...], its usage line),
    ("usage", its line), or (css,) of the other cards."""
    body = page[page.index('<div class="ab-conversation">'):]
    found = list(TURN.finditer(body))
    turns: list = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(body)
        chunk = body[m.start():end]
        if m.group(1) == "assistant":
            usage = re.search(r'<span class="ab-usage">(.*?)</span>\s*<a class="ab-row-link"', chunk, re.S)
            turns.append(("assistant", [], htmllib.unescape(re.sub(r"<[^>]+>", "", usage.group(1))) if usage else ""))
        elif m.group(1):
            turns.append((m.group(1),))
        elif m.group(3):
            line = chunk[:chunk.index("</div>")]
            turns.append(("usage", " ".join(htmllib.unescape(re.sub(r"<[^>]+>", "", line)).split())))
        else:
            assert turns and turns[-1][0] == "assistant", "a part outside an assistant card"
            turns[-1][1].append((m.group(4), chunk))
    return turns


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(Site, the Codex rollout, the agent-server database, session ids by uuid, the snapshot)."""
    from importer.snapshot import export_snapshot
    from importer.store import open_store

    tmp = tmp_path_factory.mktemp("turns")
    archive = tmp / "archive.db"
    rollout = codex_rollout()
    rollout.write_in(tmp / "codex" / ".codex" / "sessions")
    AF.build_agent_db(tmp / "agent-server", seed=0)
    for path, server in ((tmp / "codex" / ".codex", "laptop"), (tmp / "agent-server", "as")):
        report = do_import(archive, path, server=server)
        assert report.files_failed == 0, report.failures
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    conn = sqlite3.connect(tmp / "snapshot.db")
    try:
        ids = dict(conn.execute("SELECT session_uuid, id FROM sessions"))
    finally:
        conn.close()
    return Site(tmp / "snapshot.db"), rollout, tmp / "agent-server" / "data" / "agent.db", ids, tmp / "snapshot.db"


def test_codex_one_card_per_model_call(world):
    site, rollout, _db, ids, _snapshot = world
    expected, _ = codex_oracle(rollout)
    page = site.get(f"/-/agentbase/session/{ids[rollout.sid]}").text
    drawn = page_turns(page)
    assert [t[0] for t in drawn] == [t[0] for t in expected]
    cards = [(d, e) for d, e in zip(drawn, expected) if e[0] == "assistant"]
    assert len(cards) == 6
    for (_, parts, usage), (_, items, tokens, calls) in cards:
        assert [kind for kind, _ in parts] == [kind for kind, _ in items]
        for (kind, chunk), (_, what) in zip(parts, items):
            if what is not None:  # (encrypted reasoning has no summary: a placeholder)
                assert htmllib.escape(what, quote=False) in chunk, (kind, what)
            if kind == "call":
                assert "ab-result" in chunk  # its output under it, in the same card
        assert f"{tokens:,} tokens" in usage, (usage, tokens)
        assert ("model calls" in usage) == (calls > 1) and (calls < 2 or f"{calls} model calls" in usage)
    # no card of a reasoning or tool call row alone, no tool result of its own
    assert "ab-turn-reasoning" not in page and "ab-turn-call" not in page and "ab-turn-tool" not in page
    # two calls at once: both in one card, each with its result
    both = next(parts for (_, parts, _), _ in cards if [k for k, _ in parts] == ["reasoning", "call", "call"])
    assert all(chunk.count('class="ab-result') == 1 for kind, chunk in both if kind == "call")
    # every row keeps its anchor (a search hit or a tool call links to it)
    conn = sqlite3.connect(world[4])
    try:
        rows = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = ? AND role = 'assistant'",
                                           (ids[rollout.sid],))]
    finally:
        conn.close()
    assert rows and all(page.count(f'id="m{i}"') == 1 for i in rows)


def test_codex_compaction_marker(world):
    site, rollout, _db, ids, _snapshot = world
    _, compactions = codex_oracle(rollout)
    page = site.get(f"/-/agentbase/session/{ids[rollout.sid]}").text
    markers = re.findall(r'<(?:details|div) class="ab-marker ab-compaction">.*?</(?:details|div)>', page, re.S)
    assert len(markers) == len(compactions) == 1  # the compacted line and its context_compacted event: one marker
    kept = len(compactions[0]["replacement_history"])
    assert "<strong>Compaction</strong>" in markers[0] and f"({kept:,} items kept as its history)" in markers[0]
    assert htmllib.escape(compactions[0]["message"], quote=False) in markers[0]
    # between the turn before it and the one after
    first_after = htmllib.escape("Now c.txt", quote=False)
    assert page.index("Both files are one word each.") < page.index(markers[0]) < page.index(first_after)
    # every entry shown: the event as well
    everything = site.get(f"/-/agentbase/session/{ids[rollout.sid]}?all=1").text
    assert everything.count('class="ab-marker ab-compaction"') == 2


def test_agent_server_cards_and_run_usage(world):
    site, _rollout, db, ids, _snapshot = world
    conn = sqlite3.connect(db)
    try:
        sessions = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY id")]
    finally:
        conn.close()
    checked = 0
    for sid in sessions:
        if sid not in ids:
            continue
        expected = agent_server_oracle(db, sid)
        page = site.get(f"/-/agentbase/session/{ids[sid]}").text
        drawn = [(t[0], [kind for kind, _ in t[1]]) if t[0] == "assistant" else (t[0],)
                 for t in page_turns(page) if t[0] != "context"]
        assert drawn == expected, sid
        assert "ab-turn-reasoning" not in page and "ab-turn-call" not in page
        # a run's usage line (after its last card): the run's tokens, how it ended
        for t in page_turns(page):
            if t[0] == "usage":
                assert re.search(r"^usage \S+ \S+ run (completed|failed|interrupted) .* [\d,]+ tokens \(", t[1]), t[1]
        checked += 1
    assert checked == len(sessions) >= 5


MD_TURN = re.compile(r"^## (\S[^\n]*?) · (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: \(([^)\n]*)\))?$|^\*usage · ", re.M)


def md_turns(md: str) -> list:
    """The Markdown export's turns: ("usage",), or (label or "context", its text up to the next turn)."""
    found = list(MD_TURN.finditer(md))
    out = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(md)
        if m.group(1) is None:
            out.append(("usage", md[m.start():end]))
        else:
            flags = (m.group(3) or "").split(", ")
            out.append(("context" if "context" in flags else m.group(1), md[m.end():end]))
    return out


def test_markdown_and_json_exports_group_the_same_cards(world):
    """The .md export draws the page's turns (one heading per assistant card, its thinking, text and
    calls with their results under it), and the .json export's ``turns`` name the rows of each, the
    same rows the page's card holds; its ``messages`` stay every row, one by one."""
    site, rollout, db, ids, _snapshot = world
    expected, compactions = codex_oracle(rollout)
    sid = ids[rollout.sid]
    md = site.get(f"/-/agentbase/session/{sid}.md").text
    drawn = md_turns(md)
    assert [kind for kind, _ in drawn] == [t[0] for t in expected]
    cards = [(text, e) for (kind, text), e in zip(drawn, expected) if kind == "assistant"]
    assert len(cards) == 6
    for text, (_, items, tokens, calls) in cards:
        at = 0
        for kind, what in items:  # in order, each call's result right under it
            needle = f"({what})" if kind == "call" else what
            if needle is None:
                continue
            found = text.index(needle, at)
            if kind == "call":  # its result (or error) before anything else of the card's
                after = re.search(r"\*\*(result|error)\*\*|\*\*tool call\*\*", text[found:])
                assert after and after.group(1), (what, text[found:found + 200])
            at = found
        usage = text.split("\n", 2)[1]
        assert usage.startswith("*") and f"{tokens:,} tokens" in usage, (usage, tokens)
        assert ("model calls" in usage) == (calls > 1)
    # no row of its own for a tool result, a reasoning item or a call
    assert "## tool result" not in md and "## thinking" not in md and "## tool call" not in md
    # the compaction: one marker, where the page has it
    marker = f"> **Compaction**: the conversation so far was compacted " \
             f"({len(compactions[0]['replacement_history']):,} items kept as its history)"
    assert md.count(marker) == 1
    assert md.index("Both files are one word each.") < md.index(marker) < md.index("Now c.txt")

    # the JSON: the page's cards, by the rows they hold
    doc = site.get(f"/-/agentbase/session/{sid}.json").json()
    page = site.get(f"/-/agentbase/session/{sid}").text
    body = page[page.index('<div class="ab-conversation">'):]
    starts = [m.start() for m in re.finditer(r'<section class="ab-turn ', body)] + [len(body)]
    page_cards = [sorted(int(i) for i in re.findall(r'id="m(\d+)"', body[a:b]))
                  for a, b in zip(starts, starts[1:]) if body[a:b].startswith('<section class="ab-turn ab-turn-assistant')]
    json_cards = [sorted(t["message_ids"]) for t in doc["turns"] if t["kind"] == "card"]
    assert json_cards == page_cards and len(json_cards) == 6
    assert [t["kind"] for t in doc["turns"] if t["kind"] != "marker"] == [
        "card" if t[0] == "assistant" else "message" for t in expected]
    assert sum(t["kind"] == "marker" for t in doc["turns"]) == 1
    # every row shown once, and the rows one by one as before
    shown = [i for t in doc["turns"] for i in t.get("message_ids", [])]
    assert len(shown) == len(set(shown)) and set(shown) <= {m["id"] for m in doc["messages"]}
    assert doc["message_count"] == len(doc["messages"]) and doc["turns_shown"] == "the active path"

    # the agent-server's sessions: the same turns as their events say
    conn = sqlite3.connect(db)
    try:
        sessions = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY id")]
    finally:
        conn.close()
    for uuid in sessions:
        if uuid in ids:
            got = [kind for kind, _ in md_turns(site.get(f"/-/agentbase/session/{ids[uuid]}.md").text)]
            assert [k for k in got if k != "context"] == [t[0] for t in agent_server_oracle(db, uuid)], uuid


def test_a_live_answer_draws_only_its_cards_and_as_the_page_does(world):
    """since.json (a live page's answer) groups the whole conversation with its drawings put off
    (conversation.build(later=True)) and draws only the cards it sends: nothing is drawn before
    conversation.drawn, and what it draws is what the page draws, turn by turn, for every session
    (Codex's cards, the agent-server's run usage lines, markers)."""
    from datasette_agentbase import conversation

    site, _rollout, _db, ids, snapshot = world
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    try:
        for sid in ids.values():
            for everything in (False, True):
                data = conversation.load(conn, sid, everything)
                href = lambda *a, **k: "/x"  # noqa: E731
                page = conversation.build(data, everything, href, "/s", session_href=href)
                later = conversation.build(data, everything, href, "/s", session_href=href, later=True)
                assert all(isinstance(t["html" if "html" in t else "usage"], conversation._Later)
                           for t in later["turns"]), sid
                assert conversation.drawn(later["turns"]) == page["turns"], (sid, everything)
                assert later["totals"] == page["totals"]
    finally:
        conn.close()
    # and through the endpoint: the last cards of the page, as the page has them
    sid = ids[_rollout.sid]
    page = site.get(f"/-/agentbase/session/{sid}").text
    keys = re.findall(r'<(?:section|div) class="ab-turn[^"]*" id="([me]\d+)"', page)
    doc = site.get(f"/-/agentbase/session/{sid}/since.json?after={keys[-1]}").json()
    assert [c["key"] for c in doc["cards"]] == keys[-3:] and doc["count"] is None  # (from the end only)
    assert all(c["html"] in page for c in doc["cards"]) and doc["totals"] in page
    whole = site.get(f"/-/agentbase/session/{sid}/since.json?after={keys[-1]}&all=1").json()
    assert whole["count"] == len(re.findall(r'<(?:section|div) class="ab-turn[^"]*" id="[me]\d+"',
                                            site.get(f"/-/agentbase/session/{sid}?all=1").text))


def tails_match_wholes(snapshot: Path) -> tuple[int, int]:
    """For every session of ``snapshot`` and every card of its page, what a live page whose last card
    that is gets from the end of the conversation (conversation.load_tail) against what the whole
    conversation's build sends from the same card (live_pages.after): the same first card, the same
    cards drawn the same, the same totals. Returns (cards tried, answered from fewer rows than the whole)."""
    from datasette_agentbase import conversation
    from datasette_agentbase.live_pages import REPLAY, after, cards

    href = lambda *a, **k: "/x"  # noqa: E731
    tried = tails = 0
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    try:
        for (sid,) in conn.execute("SELECT id FROM sessions ORDER BY id").fetchall():
            whole = conversation.build(conversation.load(conn, sid), False, href, "/s", session_href=href,
                                       later=True)
            keyed = cards(whole["turns"])
            for card in keyed:
                tried += 1
                tail = conversation.load_tail(conn, sid, card["key"], REPLAY)
                if tail is None:
                    continue
                tails += len(tail["messages"]) < len(conversation.load(conn, sid)["messages"])
                part = conversation.build(tail, False, href, "/s", session_href=href, later=True)
                first, sent = after(keyed, card["key"])
                tail_first, tail_sent = after(cards(part["turns"]), card["key"])
                assert tail_first == first, (sid, card["key"])
                assert [c["key"] for c in tail_sent] == [c["key"] for c in sent], (sid, card["key"])
                assert conversation.drawn([t for c in tail_sent for t in c["turns"]]) == conversation.drawn(
                    [t for c in sent for t in c["turns"]]), (sid, card["key"])
                assert part["totals"] == whole["totals"], (sid, card["key"])
    finally:
        conn.close()
    return tried, tails


def test_a_live_answer_from_the_end_is_the_whole_conversations(world):
    tried, tails = tails_match_wholes(world[4])
    print(f"{tails} of {tried} cards answered from the end only")
    assert tails >= tried // 3


def test_other_kinds_keep_their_cards(world):
    """A kind that writes one row per model call (here, the rows of a Codex session whose rows are all
    messages: nothing itemized) keeps one card per row."""
    from datasette_agentbase.conversation import is_itemized

    def row(native, blocks):
        return {"role": "assistant", "native_role": native, "content_blocks": json.dumps(blocks)}

    call = [{"type": "toolCall", "id": "c1", "name": "x", "arguments": {}}]
    text = [{"type": "text", "text": "hi"}]
    assert is_itemized([row("reasoning", [{"type": "thinking", "thinking": "t"}]), row("assistant", text)])
    assert is_itemized([row("tool.started", call), row("assistant.message", text)])
    assert not is_itemized([row("gemini", call), row("gemini", text)])  # one word for every message
    assert not is_itemized([row("assistant", call), row("assistant", text)])
    assert not is_itemized([row("assistant.message", text), {"role": "assistant", "native_role": "session.shutdown",
                                                             "content_blocks": None}])


def test_snapshot_page_lists_populated_tables_first(world):
    site, _rollout, _db, _ids, snapshot = world
    page = site.get("/snapshot").text
    listed = re.findall(r'<div class="db-table">\s*<h3><a href="/snapshot/([^"]+)">', page)
    conn = sqlite3.connect(snapshot)
    try:
        counts = {name: conn.execute(f"SELECT COUNT(*) FROM [{name}]").fetchone()[0] for name in listed}
    finally:
        conn.close()
    assert any(counts.values()) and not all(counts.values())  # (both kinds, or the order proves nothing)
    populated = [name for name in listed if counts[name]]
    assert listed[:len(populated)] == populated  # every populated table before every empty one
    assert populated[0] == "sessions"  # the snapshot's copy order
    default = re.search(r'<textarea id="sql-editor" name="sql">(.*?)</textarea>', page, re.S).group(1)
    assert default == f"select * from {populated[0]}"
    for name in listed:  # each with its count
        assert re.search(rf'href="/snapshot/{name}">{name}</a>.*?<p>{counts[name]:,} rows?</p>', page, re.S), name


# -- the real Codex samples -----------------------------------------------------------------------

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def rollout_cards(path: Path) -> tuple[str | None, list | None]:
    """(session id, [part kinds of each assistant card]) of one rollout, read here line by line: the
    model's items (reasoning, assistant message, calls) between inputs (a message of another role, a
    tool's output, a compaction); (id, None) for a fork or sub-agent (its replayed history is
    entries), (None, None) for a file that names no session."""
    sid, cards, card = None, [], None
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        kind, p = obj.get("type"), obj.get("payload")
        if sid is None and kind is None and isinstance(obj.get("id"), str) and "instructions" in obj:
            sid = obj["id"]  # the old format's header
            continue
        if "payload" not in obj and isinstance(kind, str) and "record_type" not in obj:
            kind, p = "response_item", obj  # the old format's bare items
        if kind == "session_meta" and sid is None:
            if p.get("forked_from_id") or isinstance(p.get("source"), dict):
                return p.get("id"), None
            sid = p.get("id")
        elif kind == "compacted":
            card = None
        elif kind == "response_item" and isinstance(p, dict):
            t = p.get("type")
            if t == "message" and p.get("role") != "assistant":
                card = None
            elif isinstance(t, str) and t.endswith("_output") and p.get("call_id"):
                card = None
            elif t in ("reasoning", "message", "function_call", "custom_tool_call", "local_shell_call"):
                if card is None:
                    card = []
                    cards.append(card)
                card.append({"reasoning": "reasoning", "message": "text"}.get(t, "call"))
    return sid, cards


def test_codex_samples_one_card_per_model_call(tmp_path):
    from importer.snapshot import export_snapshot
    from importer.store import open_store
    from test_codex import SAMPLE_PATHS

    root = SHARED / "other-samples" / "codex"
    if not root.is_dir():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"samples missing under CI: {root}")
        pytest.skip(f"no samples at {root}")
    archive = tmp_path / "archive.db"
    for server, rel in SAMPLE_PATHS.items():
        report = do_import(archive, root / rel, server=server)
        assert report.files_failed == 0, report.failures
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    conn = sqlite3.connect(tmp_path / "snapshot.db")
    try:
        ids = dict(conn.execute("SELECT session_uuid, id FROM sessions WHERE source = 'codex'"))
    finally:
        conn.close()
    site = Site(tmp_path / "snapshot.db")
    checked = cards = 0
    for path in sorted(root.rglob("*.jsonl")):
        sid, want = rollout_cards(path)
        if want is None or sid not in ids:
            continue
        page = site.get(f"/-/agentbase/session/{ids[sid]}").text
        got = [[kind for kind, _ in t[1]] for t in page_turns(page) if t[0] == "assistant"]
        assert got == want, path.name
        checked += 1
        cards += len(want)
    assert checked >= 5 and cards >= 300, (checked, cards)


# -- in Chromium ----------------------------------------------------------------------------------

def test_codex_and_agent_server_in_chromium(world, browser):
    """Screenshots of both at 1400 and 390 px; neither wider than the window (the phone's too)."""
    _site, rollout, _db, ids, snapshot = world
    conn = sqlite3.connect(snapshot)
    try:
        agent_id = conn.execute("SELECT id FROM sessions WHERE source = 'agent-server' ORDER BY message_count DESC, id "
                                "LIMIT 1").fetchone()[0]
    finally:
        conn.close()
    try:
        with serving(snapshot) as server:
            for name, sid in (("codex", ids[rollout.sid]), ("agent-server", agent_id)):
                for width in (1400, 390):
                    browser.set_window_size(width, 900)
                    browser.get(f"{server.base}/-/agentbase/session/{sid}")
                    assert browser.execute_script(
                        "return document.querySelectorAll('section.ab-turn-assistant .ab-part').length") > 0
                    scroll, client = browser.execute_script(
                        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
                    assert scroll <= client, (name, width, scroll, client)
                    full_page_screenshot(browser, artifact_dir() / f"turns-{name}-{width}.png", cap=6000)
    finally:
        browser.set_window_size(1280, 1600)
