"""The derived table session_list (importer/derived.py) on a made-up snapshot of every source kind
(tests/session_list_fixture.py): every row against the snapshot's own rows, summed here in Python
(not with the module's SQL), the titles of every kind, the gateway envelopes taken off a prompt,
the full-text index, the export's hook, and a refresh of some sessions after their rows changed,
which must equal a whole build row by row, full-text index included."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import defaultdict
from datetime import datetime, timezone

import pytest

import session_list_fixture as SF
from importer import derived, shape
from importer.search import fts_query


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    return SF.build(tmp_path_factory.mktemp("session-list"))


@pytest.fixture(scope="module")
def db(snapshot):
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


def table(conn, sql, params=()) -> list[dict]:
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def blank(text) -> bool:
    return not isinstance(text, str) or not text.strip()


def expected_rows(conn) -> dict[int, dict]:
    """Every session's row, computed in Python from the snapshot's sessions, messages and tool calls."""
    messages = defaultdict(list)
    for m in table(conn, "SELECT * FROM messages"):
        messages[m["session_id"]].append(m)
    calls = defaultdict(list)
    for t in table(conn, "SELECT * FROM tool_calls"):
        calls[t["session_id"]].append(t)
    out = {}
    for s in table(conn, "SELECT * FROM sessions"):
        ms = messages[s["id"]]
        counted = [m for m in ms if m["usage_counted"] == 1]
        model = [m for m in counted if m["cost_source"] is not None]
        priced = [m for m in model if m["cost_source"] != "unpriced"]
        timed = sorted((m for m in ms if m["timestamp"] is not None), key=lambda m: (m["timestamp"], m["id"]))
        users = sorted((m for m in ms if m["role"] == "user" and not m["is_context"] and not blank(m["text_preview"])),
                       key=lambda m: (m["seq"] if m["seq"] is not None else -1, m["id"]))
        prompt = derived.prompt_text(users[0]["content_blocks"], users[0]["text_preview"]) if users else None
        label, title = derived.shorten(s["label"], 120), derived.shorten(s["title"], 120)
        prompt_title = derived.shorten(prompt, 120)
        display = derived.shorten(s["display_name"], 120)
        started = timed[0]["local_time"] if timed else None
        last = timed[-1]["local_time"] if timed else s["local_time"]
        failed = sum(1 for t in calls[s["id"]] if t["is_error"] == 1)
        model_errors = sum(1 for m in counted if m["role"] == "assistant" and m["is_error"] == 1)
        out[s["id"]] = {
            "id": s["id"], "session_uuid": s["session_uuid"],
            "title": label or title or prompt_title or display,
            "title_from": ("label" if label else "title" if title else "prompt" if prompt_title
                           else "display_name" if display else None),
            "first_prompt": prompt, "agent_id": s["agent_id"], "server": s["server"], "source": s["source"],
            "session_type": s["session_type"], "project": s["project"],
            "started_local": started, "last_local": last,
            "first_day": (started or last or "")[:10] or None, "last_day": (last or "")[:10] or None,
            "last_message_at": timed[-1]["timestamp"] if timed else (s["last_message_at"] or s["started_at"] or ""),
            "message_count": len(counted), "model_calls": len(model),
            "tool_call_count": len(calls[s["id"]]), "failed_tool_calls": failed, "model_errors": model_errors,
            "has_errors": int(bool(failed or model_errors)),
            "has_thinking": int(any(m["has_thinking"] for m in ms)),
            "total_tokens": sum(m["total_tokens"] or 0 for m in model),
            "cost_usd": sum(m["cost_usd"] or 0 for m in priced) if priced else None,
            "priced_calls": len(priced), "unpriced_calls": sum(1 for m in model if m["cost_source"] == "unpriced"),
        }
    return out


def got_rows(conn) -> dict[int, dict]:
    return {r["id"]: r for r in table(conn, f"SELECT * FROM {derived.TABLE}")}


def same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for sid, row in want.items():
        for column, value in row.items():
            if isinstance(value, float):
                assert got[sid][column] == pytest.approx(value, rel=1e-9, abs=1e-12), (sid, column)
            else:
                assert got[sid][column] == value, (sid, column, got[sid][column], value)


def test_every_row_against_the_snapshot(db):
    want = expected_rows(db)
    assert len(want) >= 45  # the fixture itself: every kind is there
    same(got_rows(db), want)
    assert [c for c in table(db, f"SELECT * FROM {derived.TABLE} LIMIT 1")[0]] == list(derived.COLUMNS)


def test_the_figures_the_fixture_planted(db):
    rows = list(got_rows(db).values())
    by_title = {r["title"]: r for r in rows}
    # a failed exec call; thinking; a model error without a failed tool call
    assert by_title[SF.FEISHU_TEXT]["failed_tool_calls"] == 1 and by_title[SF.FEISHU_TEXT]["has_errors"] == 1
    alerts = by_title["summarise the alerts"]
    assert (alerts["model_errors"], alerts["failed_tool_calls"], alerts["has_errors"]) == (1, 0, 1)
    assert by_title[SF.TELEGRAM_TEXT]["has_thinking"] == 1
    # every call of the hostile prompt's session is unpriced: no cost, counted apart
    hostile = by_title[SF.HOSTILE_PROMPT]
    assert (hostile["cost_usd"], hostile["priced_calls"], hostile["unpriced_calls"]) == (None, 0, 2)
    assert hostile["total_tokens"] == 2 * 1500 - 900  # a 1,000-token call (1,500) and a 400-token answer (600)
    # the two night shifts end at the same instant (the keyset's tie)
    night = [r for r in rows if r["title"] in ("a main night shift", "a ops night shift")]
    assert len({r["last_message_at"] for r in night}) == 1
    # over local midnight: 15:59:55 UTC is 23:59:55 in Shanghai, and the second round goes on past it
    assert {(r["first_day"], r["last_day"]) for r in night} == {("2026-04-05", "2026-04-06")}
    assert all(r["started_local"] == "2026-04-05 23:59:56.000" for r in night)
    long = next(r for r in rows if r["first_prompt"] and r["first_prompt"].startswith("Please look at the quokka"))
    assert len(long["first_prompt"]) == derived.PROMPT_CHARS and long["first_prompt"].endswith("…")
    assert len(long["title"]) == derived.TITLE_CHARS and long["title"].endswith("…")
    assert long["last_message_at"] == "2026-04-04 23:30:08.000" and long["last_day"] == "2026-04-05"


def test_titles_of_every_kind(db):
    rows = list(got_rows(db).values())
    kinds = defaultdict(list)
    for r in rows:
        kinds[r["source"]].append(r)
    assert set(kinds) == {"openclaw", "pi", "mini-openclaw", "agent-server", "claude-code", "codex"}
    titles = {r["title"] for r in rows}
    # OpenClaw: the label first; a prompt without the gateway's envelope
    assert {SF.HOSTILE_LABEL, SF.TELEGRAM_TEXT, SF.FEISHU_TEXT, SF.HOSTILE_PROMPT} <= titles
    labelled = next(r for r in rows if r["title"] == SF.HOSTILE_LABEL)
    assert labelled["title_from"] == "label" and labelled["first_prompt"] == "the prompt under a label"
    assert next(r for r in kinds["pi"])["title"] == "pi: tidy the imports"
    assert next(r for r in kinds["claude-code"])["title"] == SF.CC_PROMPT
    # Codex: the first prompt typed, not the environment context it injects first
    assert {r["title"] for r in kinds["codex"]} == {"Please check the build, step 0"}
    assert all(r["title_from"] == "prompt" for r in kinds["codex"])
    # the agent-server and mini-OpenClaw keep the titles their sessions have (Chinese too)
    assert {"部署 nginx 并检查日志", "Fix flaky test in payments service"} <= {r["title"] for r in kinds["agent-server"]}
    assert all(r["title_from"] == "title" for r in kinds["agent-server"])
    assert {"示例会话", "目录检查"} <= {r["title"] for r in kinds["mini-openclaw"]}
    # every session that has a prompt has a title, and none is only whitespace or longer than the limit
    for r in rows:
        if r["first_prompt"]:
            assert r["title"]
        assert r["title"] is None or (r["title"].strip() == r["title"] and len(r["title"]) <= derived.TITLE_CHARS)


@pytest.mark.parametrize("text, want", [
    (SF.TELEGRAM_PROMPT, SF.TELEGRAM_TEXT),
    (SF.FEISHU_PROMPT, SF.FEISHU_TEXT),
    ("[Fri 2026-05-01 09:27 PDT] status", "status"),
    ("<command-message>clear</command-message>\n<command-name>/clear</command-name>\n<command-args></command-args>",
     "/clear"),
    ("<command-name>/review</command-name><command-args>the  quokka\nbranch</command-args>",
     "/review the quokka branch"),
    ("  two\n\nlines\tand   spaces ", "two lines and spaces"),
    ("[not a date] stays as typed", "[not a date] stays as typed"),
    ("System: [2026-04-05 10:05:42 GMT+8] an event with nothing after it", None),
    ("   ", None),
])
def test_prompt_text(text, want):
    blocks = json.dumps([{"type": "text", "text": text}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}])
    got = derived.prompt_text(blocks, None)
    if want is None and text.strip():
        assert got == derived.shorten(text, derived.PROMPT_CHARS)  # only an envelope: kept as it was
    else:
        assert got == want
    assert derived.prompt_text(None, text) == got  # from the preview when there are no blocks


def test_search_index(db):
    def found(q: str) -> set[str]:
        return {r[0] for r in db.execute(
            f"SELECT l.title FROM {derived.FTS} f JOIN {derived.TABLE} l ON l.id = f.rowid "
            f"WHERE {derived.FTS} MATCH ?", (fts_query(q),))}

    assert found("quokka gateway") == {SF.TELEGRAM_TEXT}
    assert SF.HOSTILE_LABEL in found("deploy notes")
    # the first prompt is searched too: the labelled session's own prompt
    assert found('"prompt under a label"') == {SF.HOSTILE_LABEL}
    # Chinese words of two and three characters (character pairs, as in the message search)
    assert {SF.FEISHU_TEXT, SF.HOSTILE_PROMPT, "部署 nginx 并检查日志"} <= found("部署")
    assert found("服务器") == {SF.HOSTILE_PROMPT}
    assert found("zzqx") == set()
    assert db.execute(f"SELECT COUNT(*) FROM {derived.FTS}").fetchone()[0] == \
        db.execute(f"SELECT COUNT(*) FROM {derived.TABLE}").fetchone()[0]


def test_the_export_builds_it_with_its_indexes(db, snapshot):
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE tbl_name = ? AND type = 'index'",
                                      (derived.TABLE,))}
    assert {derived.index_name(cols) for cols in derived.INDEXES} <= names
    assert db.execute(f"SELECT COUNT(*) FROM {derived.TABLE}").fetchone()[0] == \
        db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    counts = json.loads(db.execute("SELECT value FROM agentbase_snapshot WHERE key = 'counts'").fetchone()[0])
    assert counts[derived.TABLE] == db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    # the page's order is read from an index, in order, for each filter
    for where in ("", "WHERE agent_id = 'main'", "WHERE server = 'beta'", "WHERE source = 'codex'",
                  "WHERE has_errors = 1", "WHERE has_thinking = 1",
                  "WHERE last_day >= '2026-04-01' AND last_message_at >= '2026-03-31'"):
        plan = " ".join(r[3] for r in db.execute(
            f"EXPLAIN QUERY PLAN SELECT * FROM {derived.TABLE} {where} ORDER BY last_message_at DESC, id DESC LIMIT 5"))
        assert "USING INDEX" in plan and "TEMP B-TREE" not in plan, (where, plan)


# -- a refresh of some sessions in place ------------------------------------------------------------

def dump(conn) -> tuple:
    """The whole derived state: the rows, the index's rows and its terms (every token and where it is)."""
    rows = conn.execute(f"SELECT * FROM {derived.TABLE} ORDER BY id").fetchall()
    fts = conn.execute(f"SELECT rowid, title, first_prompt FROM {derived.FTS} ORDER BY rowid").fetchall()
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, '{derived.FTS}', 'instance')")
    terms = conn.execute("SELECT term, doc, col, offset FROM temp.vocab ORDER BY 1, 2, 3, 4").fetchall()
    conn.execute("DROP TABLE temp.vocab")
    return [tuple(r) for r in rows], [tuple(r) for r in fts], [tuple(r) for r in terms]


def change(conn) -> list[int]:
    """Change the snapshot's rows as an update of it would; the sessions whose rows changed."""
    ids = dict(conn.execute("SELECT title, id FROM session_list").fetchall())
    telegram, feishu, label = ids[SF.TELEGRAM_TEXT], ids[SF.FEISHU_TEXT], ids[SF.HOSTILE_LABEL]
    night = ids["a main night shift"]
    codex = conn.execute("SELECT id FROM sessions WHERE source = 'codex' ORDER BY id LIMIT 1").fetchone()[0]
    gone = conn.execute("SELECT id FROM sessions WHERE source = 'pi'").fetchone()[0]
    # new messages at the end of a session: a later time, a failed tool call, thinking, an unpriced call
    cols = [d[1] for d in conn.execute("PRAGMA table_info(messages)")]  # (the stored columns: none generated)
    m = conn.execute(f"SELECT {', '.join(cols)} FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                     (telegram,)).fetchone()
    top = conn.execute("SELECT MAX(id) FROM messages").fetchone()[0]
    for k, (role, cost_source) in enumerate((("assistant", "unpriced"), ("toolResult", None))):
        row = dict(zip(cols, m))
        row.update(id=top + 1 + k, seq=(row["seq"] or 0) + 1 + k, role=role, cost_source=cost_source, cost_usd=None,
                   total_tokens=777 if cost_source else None, timestamp_kept=None,
                   timestamp_ms=int(datetime(2026, 4, 7, 1, 0, k, tzinfo=timezone.utc).timestamp() * 1000),
                   utc_offset_s=8 * 3600, has_thinking=1, usage_counted=1,
                   message_uuid=f"new-{k}")
        conn.execute(f"INSERT INTO messages ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                     list(row.values()))
    calls = shape.base_table("tool_calls")  # (tool_calls is a view over its stored rows)
    tcols = [d[1] for d in conn.execute(f"PRAGMA table_info({calls})")]
    t = conn.execute(f"SELECT {', '.join(tcols)} FROM {calls} WHERE session_id = ? LIMIT 1", (telegram,)).fetchone()
    trow = dict(zip(tcols, t))
    trow.update(id=conn.execute(f"SELECT MAX(id) + 1 FROM {calls}").fetchone()[0], is_error=1, call_id="new-call")
    conn.execute(f"INSERT INTO {calls} ({', '.join(trow)}) VALUES ({', '.join('?' * len(trow))})",
                 list(trow.values()))
    # a prompt edited (redacted, say), and its session's label set: the title moves to the label
    conn.execute("UPDATE messages SET preview_kept = '重新 部署 quokka', preview_path = NULL, content_blocks = ? "
                 "WHERE session_id = ? AND role = 'user'", (json.dumps([{"type": "text", "text": "重新 部署 quokka"}]), feishu))
    conn.execute("UPDATE sessions SET label = 'the quokka redeploy' WHERE id = ?", (feishu,))
    # a label taken away: the prompt is the title again
    conn.execute("UPDATE sessions SET label = NULL WHERE id = ?", (label,))
    # a failed tool call that no longer failed; a model call counted elsewhere now
    conn.execute(f"UPDATE {calls} SET is_error = 0 WHERE session_id = ?", (feishu,))
    conn.execute("UPDATE messages SET usage_counted = 0 WHERE id = (SELECT MIN(id) FROM messages WHERE session_id = ? "
                 "AND cost_source IS NOT NULL)", (codex,))
    # every message of a session gone: what the session row still says (its own times) stays
    conn.execute("DELETE FROM messages WHERE session_id = ?", (night,))
    conn.execute(f"DELETE FROM {calls} WHERE session_id = ?", (night,))
    # a session gone altogether
    for tbl, column in (("messages", "session_id"), (calls, "session_id"), ("sessions", "id")):
        conn.execute(f"DELETE FROM {tbl} WHERE {column} = ?", (gone,))
    return [telegram, feishu, label, night, codex, gone]


def test_refreshing_some_sessions_equals_a_whole_build(snapshot, tmp_path):
    partial, whole = tmp_path / "partial.db", tmp_path / "whole.db"
    shutil.copy(snapshot, partial)
    shutil.copy(snapshot, whole)
    a, b = sqlite3.connect(partial), sqlite3.connect(whole)
    try:
        before = dump(a)
        changed = change(a)
        assert change(b) == changed
        a.commit()
        b.commit()
        assert dump(a) == before  # (nothing derived moved by itself)
        assert derived.refresh_session_list(a, changed + [10**9]) == len(changed) - 1  # the one gone has no row
        a.commit()
        assert derived.refresh_session_list(b) == b.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
        b.commit()
        got, want = dump(a), dump(b)
        assert got[0] == want[0]
        assert got[1] == want[1]
        assert got[2] == want[2]
        assert got != before
        # and the whole build is what the snapshot's rows say
        a.row_factory = sqlite3.Row
        same(got_rows(a), expected_rows(a))
        rows = got_rows(a)
        feishu = next(r for r in rows.values() if r["title"] == "the quokka redeploy")
        assert (feishu["title_from"], feishu["first_prompt"], feishu["has_errors"]) == ("label", "重新 部署 quokka", 0)
        telegram = next(r for r in rows.values() if r["first_prompt"] == SF.TELEGRAM_TEXT)
        assert telegram["last_message_at"] == "2026-04-07 01:00:01.000" and telegram["last_day"] == "2026-04-07"
        assert telegram["unpriced_calls"] == 1 and telegram["failed_tool_calls"] == 1
        assert not any(r["source"] == "pi" for r in rows.values())
        found = {r[0] for r in a.execute(f"SELECT rowid FROM {derived.FTS} WHERE {derived.FTS} MATCH ?",
                                         (fts_query("重新 部署"),))}
        assert found == {feishu["id"]}
        # refreshing sessions that did not change changes nothing
        derived.refresh_session_list(a, list(rows)[:5])
        assert dump(a) == got
    finally:
        a.close()
        b.close()


def test_a_subset_on_a_snapshot_without_the_list_builds_it_whole(snapshot, tmp_path):
    copy = tmp_path / "old.db"
    shutil.copy(snapshot, copy)
    conn = sqlite3.connect(copy)
    try:
        want = dump(conn)
        conn.execute(f"DROP TABLE {derived.FTS}")
        conn.execute(f"DROP TABLE {derived.TABLE}")
        assert not derived.exists(conn)
        derived.refresh_session_list(conn, [1])
        conn.commit()
        assert derived.exists(conn) and dump(conn) == want
        # in the caller's transaction: a savepoint, rolled back with it
        conn.execute("BEGIN")
        derived.refresh_session_list(conn, [1, 2])
        conn.execute("DELETE FROM sessions")
        derived.refresh_session_list(conn)
        assert conn.execute(f"SELECT COUNT(*) FROM {derived.TABLE}").fetchone()[0] == 0
        conn.execute("ROLLBACK")
        assert dump(conn) == want
    finally:
        conn.close()


def test_first_and_last_times_of_every_form(snapshot, tmp_path):
    """A session's first and last times are compared as integers when held as milliseconds (and as
    text otherwise): with both forms in one session, times before 1970 and after the year 3998,
    offsets of seconds and of 14 hours, each row still equals the Python sum of the text's order."""
    copy = tmp_path / "times.db"
    shutil.copy(snapshot, copy)
    conn = sqlite3.connect(copy)
    conn.row_factory = sqlite3.Row
    try:
        sessions = [r[0] for r in conn.execute(
            "SELECT session_id FROM messages GROUP BY session_id HAVING COUNT(*) >= 3 ORDER BY session_id")]
        assert len(sessions) >= 4
        ms = lambda *a: int(datetime(*a, tzinfo=timezone.utc).timestamp() * 1000)  # noqa: E731
        forms = [  # (timestamp_ms, timestamp_kept, utc_offset_s) of a session's first three messages
            [(ms(2026, 4, 7, 1, 0, 0, 5000), None, 28800 + 343), (None, "2026-04-07 00:59:59.999", 28800),
             (None, "2026-04-07T02:00:00Z", -3600)],  # ('T' sorts after ' ': the text decides)
            [(-86_400_000 * 3 - 7, None, 0), (ms(1970, 1, 1), None, 50400), (ms(2026, 1, 1), None, -43200)],
            [(64_000_000_000_001, None, 0), (ms(2026, 5, 1), None, 3600), (None, "1999-13-45 not a time", 0)],
            [(ms(2026, 6, 1, 12), None, 7200), (ms(2026, 6, 1, 12), None, 7200), (None, None, None)],
        ]
        for sid, rows in zip(sessions, forms):
            ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = ? ORDER BY id LIMIT 3",
                                              (sid,))]
            for mid, (t_ms, kept, offset) in zip(ids, rows):
                conn.execute("UPDATE messages SET timestamp_ms = ?, timestamp_kept = ?, utc_offset_s = ? "
                             "WHERE id = ?", (t_ms, kept, offset, mid))
        conn.commit()
        derived.refresh_session_list(conn)
        conn.commit()
        got, want = got_rows(conn), expected_rows(conn)
        same(got, want)
        assert got[sessions[0]]["last_message_at"] == "2026-04-07T02:00:00Z"
        assert got[sessions[1]]["started_local"].startswith("1969-12-29")
        assert got[sessions[2]]["last_message_at"].startswith("3998-")
    finally:
        conn.close()
