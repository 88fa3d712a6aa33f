"""`agentbase report` and `agentbase stats` print transcript text (titles, first prompts, agent and
server names, models): no control character or escape sequence of it reaches the terminal (a window
title change, an OSC 8 link in disguise, C1 CSI), in the tables and in --json."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import claude_code_fixtures as F
from transcripts import Chain, header, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]
TITLE = "\x1b]0;pwned\x07Fix the \x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ bug"
PROMPT = "please \x9b31mrun\x9b0m this\x1b[2J\x1b[H\x1bP+q544e\x1b\\ and\tthat\nnow \x07\x7f\x85\u202e"
MODEL = "claude-\x1b]0;model\x07evil\x9b1m"
AGENT = "ag\x1b[31ment\x9d0;t\x9c"
SERVER = "srv\x1b]0;s\x07"
# what a terminal would obey: ESC, BEL, C1 controls (U+0080-U+009F), DEL, the bidi overrides
FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def agentbase(env, *args) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "importer", *map(str, args)], cwd=REPO, capture_output=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-800:]
    return proc


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("terminal")
    # Claude Code: an ai-title, a first prompt and a model with escapes
    c = F.Conv()
    c.user(PROMPT)
    c.assistant([F.text("done")], "msg_1", model=MODEL)
    c.floating("ai-title", aiTitle=TITLE, sessionId=F.SID)
    root = F.config_dir(tmp / "claude")
    F.write(root / "projects" / F.PROJECT / f"{F.SID}.jsonl", c.lines)
    # OpenClaw: an agent whose folder name holds escapes, its model too
    ch = Chain()
    objs = [header("0c0c0c0c-0000-4000-8000-00000000000a"), ch.user(PROMPT)]
    answer = ch.assistant([{"type": "text", "text": "ok"}])
    answer["message"]["model"] = MODEL
    objs.append(answer)
    write(sessions_dir(tmp / "openclaw", AGENT) / "0c0c0c0c-0000-4000-8000-00000000000a.jsonl", objs)
    env = dict(os.environ, AGENTBASE_HOME=str(tmp / "home"), AGENTBASE_CONFIG=str(tmp / "none.yml"),
               AGENTBASE_DB=f"sqlite:///{tmp / 'archive.db'}")
    agentbase(env, "import", root, "--server", SERVER, "-q")
    agentbase(env, "import", tmp / "openclaw", "--server", SERVER, "-q")
    return env


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _check(out: bytes) -> str:
    text = out.decode("utf-8")  # (a lone C1 byte would not even decode: only UTF-8 text is written)
    assert not FORBIDDEN.search(text), [hex(ord(c)) for c in FORBIDDEN.findall(text)][:10]
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    return text


@pytest.mark.parametrize("columns", ["80", "200"])
@pytest.mark.parametrize("args", [["report", "session"], ["report", "session", "--breakdown"],
                                  ["report", "daily", "--breakdown"], ["report", "monthly"],
                                  ["stats"], ["stats", "--by", "agent"], ["stats", "--by", "server"],
                                  ["stats", "--by", "day"]])
def test_tables_carry_no_control_sequence(archive, args, columns):
    text = _check(agentbase({**archive, "COLUMNS": columns}, *args).stdout)
    if args[:2] == ["report", "session"] and columns == "200":
        assert "Fix the click bug" in text  # the title's text stays, its link and window title go
        assert "claude-evil" in text  # (the model's)
    if args[-1] == "agent":
        assert "agent\ufffd" not in text and "agent" in text  # CSI gone, C1 OSC string gone


@pytest.mark.parametrize("args", [["report", "session", "--breakdown"], ["report", "daily", "--breakdown"],
                                  ["stats"], ["stats", "--by", "agent"], ["stats", "--by", "server"]])
def test_json_is_escaped_and_keeps_the_text(archive, args):
    out = agentbase(archive, *args, "--json").stdout
    _check(out)
    found = set(_strings(json.loads(out)))
    if args == ["stats"]:
        return  # (totals and source kinds only)
    assert found & {TITLE, MODEL, AGENT, SERVER}, sorted(found)[:20]  # the data itself, unchanged


def test_clean_units():
    from importer.terminal import clean, json_text

    assert clean("plain text 部署") == "plain text 部署"
    assert clean(TITLE) == "Fix the click bug"
    assert clean("a\tb\r\nc") == "a b c"
    assert clean("x\x9b31my\x9d0;t\x07z") == "xyz"
    assert clean("bell\x07 del\x7f nul\x00 ovr\u202e") == "bell\ufffd del\ufffd nul\ufffd ovr\ufffd"
    assert clean("\x1b]0;unterminated title") == "0;unterminated title"  # inert once its ESC is gone
    assert clean("\x1bc reset \x1b7saved") == " reset saved"
    assert clean(None) == "None" and clean(12) == "12"
    assert json.loads(json_text(json.dumps({"k": "\x9b\x7f\u2028"}, ensure_ascii=False))) == {"k": "\x9b\x7f\u2028"}
    assert not FORBIDDEN.search(json_text(json.dumps({"k": "\x9b\x7f"}, ensure_ascii=False)))


@pytest.fixture(scope="module")
def archive_with_a_key(tmp_path_factory):
    """An OpenClaw session of the escaped agent and server whose prompt holds a (made-up) token."""
    import random
    import string

    tmp = tmp_path_factory.mktemp("terminal-secrets")
    rng = random.Random(22)
    token = "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
    ch = Chain()
    objs = [header("0c0c0c0c-0000-4000-8000-00000000000b"), ch.user(f"use {token} to push")]
    objs.append(ch.assistant([{"type": "text", "text": "ok"}]))
    write(sessions_dir(tmp / "openclaw", AGENT) / "0c0c0c0c-0000-4000-8000-00000000000b.jsonl", objs)
    env = dict(os.environ, AGENTBASE_HOME=str(tmp / "home"), AGENTBASE_CONFIG=str(tmp / "none.yml"),
               AGENTBASE_DB=f"sqlite:///{tmp / 'archive.db'}")
    agentbase(env, "import", tmp / "openclaw", "--server", SERVER, "-q")
    return env, token


@pytest.mark.parametrize("as_json", [False, True])
def test_secrets_prints_no_escape_sequence_of_a_name(archive_with_a_key, as_json):
    env, token = archive_with_a_key
    out = agentbase(env, "secrets", *(["--json"] if as_json else [])).stdout
    text = _check(out)
    assert token not in text
    if as_json:
        found = json.loads(text)
        assert found["total"] >= 1
        assert AGENT in {p["agent"] for p in found["places"]}  # the JSON keeps the name as it is
    else:
        assert "github" in text.lower() or "token" in text.lower()
