"""A session's title: one rule for every kind (importer/titles.py), the same in `agentbase report
session` (read from the archive) and in the snapshot's session_list (the title the session browser,
the conversation view and exports show).

Made-up sessions of several kinds: one with a label (OpenClaw), with its own title (Claude Code's AI
title), with only a summary (Claude Code's summary line), with only a first prompt (OpenClaw under a
gateway envelope, pi, Codex after its injected context, mini-OpenClaw under a placeholder title), with
only its chat's display name, and with no text at all; each but mini-OpenClaw's has a model call with
usage, so that `report session` lists it."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import claude_code_fixtures as CC
import codex_fixtures as CX
import mini_openclaw_fixtures as MO
from transcripts import Chain, do_import, header, sessions_dir, write

from importer import titles

REPO = Path(__file__).resolve().parents[1]

S_LABEL = "7e000000-0000-4000-8000-000000000001"
S_PROMPT = "7e000000-0000-4000-8000-000000000002"
S_DISPLAY = "7e000000-0000-4000-8000-000000000003"
S_NONE = "7e000000-0000-4000-8000-000000000004"
S_PI = "7e000000-0000-4000-8000-000000000005"
CC_TITLE = "c1a0de00-0000-4000-8000-00000000000a"
CC_SUMMARY = "c1a0de00-0000-4000-8000-00000000000b"

LABEL = "Quarterly deploy notes"
ENVELOPED = "[Telegram Alice (@alice) id:42 2026-04-05 10:46 GMT+8] restart the quokka   service\n[message_id: 7]"
AI_TITLE = "Fix the quokka unit file"
SUMMARY = "Tidying the quokka tests"
DISPLAY = "Telegram: ops group"

# session uuid -> (title, title_from); None: no text at all (the report shows the uuid)
WANT = {
    S_LABEL: (LABEL, "label"),
    S_PROMPT: ("restart the quokka service", "prompt"),
    S_DISPLAY: (DISPLAY, "display_name"),
    S_NONE: (None, None),
    S_PI: ("pi: tidy the imports", "prompt"),
    CC_TITLE: (AI_TITLE, "title"),
    CC_SUMMARY: (SUMMARY, "title"),
}


def openclaw_session(sid: str, prompt: str | None) -> list[dict]:
    c = Chain()
    out = [header(sid)]
    if prompt is not None:
        out.append(c.user(prompt))
    out.append(c.assistant([{"type": "text", "text": "done"}]))
    return out


def claude_session(sid: str, tag: int, prompt: str) -> CC.Conv:
    c = CC.Conv(sid, tag)
    c.user(prompt)
    c.assistant([CC.text("On it.")], mid=f"msg_{tag}", rid=f"req_{tag}")
    return c


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, Path, str, list[Path]]:
    """(archive, snapshot, the Codex session's uuid, the folders imported)."""
    tmp = tmp_path_factory.mktemp("titles")
    oc = tmp / "oc"
    folder = sessions_dir(oc, "main")
    write(folder / f"{S_LABEL}.jsonl", openclaw_session(S_LABEL, "the prompt under a label"))
    write(folder / f"{S_PROMPT}.jsonl", openclaw_session(S_PROMPT, ENVELOPED))
    write(folder / f"{S_DISPLAY}.jsonl", openclaw_session(S_DISPLAY, None))
    write(folder / f"{S_NONE}.jsonl", openclaw_session(S_NONE, None))
    index = {"agent:main:webchat:direct:1": {"sessionId": S_LABEL, "updatedAt": 1775354400000, "label": LABEL},
             "agent:main:telegram:group:2": {"sessionId": S_DISPLAY, "updatedAt": 1775354400001,
                                             "displayName": DISPLAY}}
    (folder / "sessions.json").write_text(json.dumps(index))
    pi = tmp / "pi" / ".pi"
    write(pi / "agent" / "sessions" / "--home-dev-app--" / f"2026-04-05T10-30-00-000Z_{S_PI}.jsonl",
          openclaw_session(S_PI, "  pi: tidy\n the imports "))
    claude = CC.config_dir(tmp / "claude")
    titled = claude_session(CC_TITLE, 10, "the prompt under an AI title")
    titled.floating("ai-title", aiTitle=AI_TITLE, sessionId=CC_TITLE)
    CC.write(claude / "projects" / CC.PROJECT / f"{CC_TITLE}.jsonl", titled.lines)
    summed = claude_session(CC_SUMMARY, 11, "the prompt under a summary")
    summed.floating("summary", summary=SUMMARY, leafUuid=summed.lines[-1]["uuid"])
    CC.write(claude / "projects" / CC.PROJECT / f"{CC_SUMMARY}.jsonl", summed.lines)
    mini = tmp / "mini" / "mini-openclaw"
    MO.canonical(mini)  # its own title
    MO.canonical(mini, sid="session-placeholder", title="New Chat")  # not named yet: its first prompt
    rollout = CX.conversation()
    codex = tmp / "codex" / ".codex"
    rollout.write_in(codex / "sessions")
    db = tmp / "archive.db"
    roots = [oc, pi, claude, codex, mini]
    for where in roots:
        do_import(db, where, server="laptop")
    from importer.snapshot import export_snapshot
    from importer.store import open_store

    store = open_store(f"sqlite:///{db}")
    try:
        export_snapshot(store, tmp / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    return db, tmp / "snapshot.db", rollout.sid, roots


def report_titles(db: Path | str) -> dict[str, str]:
    url = db if isinstance(db, str) else f"sqlite:///{db}"
    proc = subprocess.run([sys.executable, "-m", "importer", "report", "session", "--json", "--timezone", "UTC",
                           "--db", url], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="80"))
    assert proc.returncode == 0, proc.stderr
    return {r["session_uuid"]: r["title"] for r in json.loads(proc.stdout)["rows"]}


def session_list(snapshot: Path) -> dict[str, tuple]:
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    try:
        return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT session_uuid, title, title_from FROM session_list")}
    finally:
        conn.close()


def test_every_kind_one_rule_in_the_snapshot(archive):
    _, snapshot, codex, _ = archive
    got = session_list(snapshot)
    for uuid, want in WANT.items():
        assert got[uuid] == want, uuid
    # Codex: the first prompt typed, not the environment context it injects before it
    assert got[codex] == ("Please check the build, step 0", "prompt")
    # mini-OpenClaw: its title; the placeholder a session has until the model names it is none
    assert got["session-0a1b2c3d4e5f"] == ("示例会话", "title")
    assert got["session-placeholder"] == ("列出 skills 目录", "prompt")


def test_report_session_gives_the_same_titles(archive):
    db, snapshot, codex, _ = archive
    got = report_titles(db)
    assert set(got) == set(WANT) | {codex}  # (mini-OpenClaw records no usage: not in a usage report)
    listed = session_list(snapshot)
    for uuid, title in got.items():
        # the session list's title; a session with no text at all: its uuid, never instead of text
        assert title == (listed[uuid][0] or uuid), uuid
    assert got[S_NONE] == S_NONE and got[S_PROMPT] == "restart the quokka service"


def test_report_session_on_mariadb(archive, mariadb_url):
    """The first prompt read with the other engine's SQL: the same titles."""
    from importer.pipeline import run_import
    from importer.store import open_store

    db, _, _, roots = archive
    store = open_store(mariadb_url)
    try:
        for where in roots:
            run_import(store, [str(where)], server="laptop")
    finally:
        store.close()
    assert report_titles(mariadb_url) == report_titles(db)


@pytest.mark.parametrize("label", [None, "", " \n", "L"])
@pytest.mark.parametrize("title", [None, "\t", "T"])
@pytest.mark.parametrize("prompt", [None, "P " * 80])
@pytest.mark.parametrize("display", [None, " ", "D"])
def test_python_and_sql_forms_agree(label, title, prompt, display):
    conn = sqlite3.connect(":memory:")
    conn.create_function("one_line", 2, titles.shorten, deterministic=True)
    candidates = {n: f"one_line(:{n}, {titles.TITLE_CHARS})" for n in titles.ORDER}
    title_sql, from_sql = titles.title_sql(candidates)
    values = {"label": label, "title": title, "prompt": prompt, "display_name": display}
    got = conn.execute(f"SELECT {title_sql}, {from_sql}", values).fetchone()
    assert got == titles.session_title(label, title, prompt, display)
    if any(v and v.strip() for v in values.values()):
        assert got[0] and len(got[0]) <= titles.TITLE_CHARS


def test_the_conversation_view_and_its_exports_head_with_the_rules_title(archive):
    """The page's heading, its <title>, and the Markdown and JSON exports name each session by the
    rule (session_list.title), not a bare UUID, for every kind."""
    import asyncio
    import html as html_mod

    from datasette.app import Datasette

    from datasette_agentbase.serve import load_metadata

    _, snapshot, codex, _ = archive
    ds = Datasette([str(snapshot)], metadata=load_metadata(snapshot), template_dir=str(REPO / "templates"))
    asyncio.run(ds.invoke_startup())
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    try:
        titled = conn.execute("SELECT id, session_uuid, title FROM session_list WHERE title IS NOT NULL").fetchall()
    finally:
        conn.close()
    assert codex in {uuid for _i, uuid, _t in titled}
    for sid, uuid, title in titled:
        page = asyncio.run(ds.client.get(f"/-/agentbase/session/{sid}"))
        assert page.status_code == 200
        heading = re.search(r"<h1[^>]*>(.*?)</h1>", page.text, re.S).group(1)
        assert html_mod.unescape(re.sub(r"<[^>]+>", "", heading)).strip() == title, uuid
        md = asyncio.run(ds.client.get(f"/-/agentbase/session/{sid}.md"))
        assert md.text.splitlines()[0] == f"# {title}", uuid
