"""Credentials stay out of the snapshot.

A corpus plants made-up credentials of every kind (right prefixes and
lengths, never real ones) in every kind of field: user text, assistant text,
thinking, tool arguments (an exec command), tool results, a compaction
summary and an assistant error. After import and export, none of them (nor
a 12-character piece of one) is anywhere in the snapshot file's bytes or in
its full-text index's terms; look-alikes (UUIDs, git and sha256 hashes,
base64 images, prose about passwords, empty ``token:``, paths, code) are left
alone; ``--no-redact`` keeps everything; ``agentbase secrets`` reports kinds
and places from the store without values.
"""

from __future__ import annotations

import base64
from collections import Counter
import json
import random
import sqlite3
import string
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from importer.snapshot import export_snapshot
from importer.redact import looks_secret, redact_json, redact_text
from importer.store import open_store
from transcripts import SID, Chain, do_import, exec_call, header, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]
AN = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = AN + "+/"


def _fake(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


def planted(rng: random.Random) -> list[tuple[str, str, list[str]]]:
    """(kind, a line holding it, the secret parts that must not survive)."""
    out = []

    def add(kind, line, *values):
        out.append((kind, line, list(values)))

    v = "sk-proj-" + _fake(rng, AN, 55) + "7"
    add("openai_key", f"export OPENAI_API_KEY={v}", v)
    v = "sk-" + _fake(rng, AN, 20) + "T3BlbkFJ" + _fake(rng, AN, 20)
    add("openai_key", f"old key {v} still works", v)
    v = "sk-ant-api03-" + _fake(rng, AN + "-_", 93) + "AA"
    add("anthropic_key", f"ANTHROPIC_API_KEY={v}", v)
    v = "sk-" + _fake(rng, HEX, 31) + "9"
    add("api_key", f"deepseek key {v}", v)
    v = "AIzaSy" + _fake(rng, AN + "-_", 33)
    add("google_api_key", f"GOOGLE_API_KEY={v}", v)
    v = "ghp_" + _fake(rng, AN, 36)
    add("github_token", f"git remote set-url origin https://{v}@github.com/me/repo.git", v)
    v = "github_pat_" + _fake(rng, AN, 22) + "_" + _fake(rng, AN, 59)
    add("github_token", f"fine-grained {v}", v)
    v = "glpat-" + _fake(rng, AN, 20)
    add("gitlab_token", f"GITLAB_TOKEN {v}", v)
    v = f"xoxb-{_fake(rng, '123456789', 11)}-{_fake(rng, '123456789', 13)}-{_fake(rng, AN, 24)}"
    add("slack_token", f"slack bot {v}", v)
    v = _fake(rng, "123456789", 10) + ":AA" + _fake(rng, AN + "_-", 33)
    add("telegram_bot_token", f"curl https://api.telegram.org/bot{v}/getMe", v)
    v = "M" + _fake(rng, AN, 23) + "." + _fake(rng, AN, 6) + "." + _fake(rng, AN + "_-", 27)
    add("discord_bot_token", f"discord token {v}", v)
    key_id = "AKIA" + _fake(rng, string.ascii_uppercase + string.digits, 16)
    key = _fake(rng, B64, 37) + "Ab1"
    add("aws", f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {key}", key_id, key)
    v = (_b64url({"alg": "HS256", "typ": "JWT"}) + "." + _b64url({"sub": _fake(rng, AN, 12), "iat": 1775354400})
         + "." + _fake(rng, AN + "-_", 43))
    add("jwt", f"session cookie {v}", v.rsplit(".", 1)[1], v.split(".")[1])
    body = [_fake(rng, B64, 64) for _ in range(5)]
    add("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END OPENSSH PRIVATE KEY-----",
        *body)
    v = _fake(rng, AN, 10) + "!9"
    add("password", f"DB_PASSWORD={v}", v)
    v = _fake(rng, AN, 23) + "5"
    add("secret", f"token: {v}", v)
    v = _fake(rng, AN, 15) + "3"
    add("secret", f'client_secret = "{v}"', v)
    v = _fake(rng, AN, 17) + "1"
    add("secret", f'{{"api_key": "{v}", "model": "gpt"}}', v)
    v = _fake(rng, AN, 39) + "8"
    add("authorization", f"curl -H 'Authorization: Bearer {v}' https://api.example.com/v1", v)
    v = _fake(rng, AN, 13) + "9"
    add("url_password", f"DATABASE_URL=postgres://admin:{v}@db.example.com:5432/app", v)
    v = _fake(rng, AN, 11) + "7"
    add("password", f"mysql -uroot -p{v} app < dump.sql", v)
    v = "sk_live_" + _fake(rng, AN, 24)
    add("stripe_key", f"stripe {v}", v)
    v = "SG." + _fake(rng, AN, 22) + "." + _fake(rng, AN, 43)
    add("sendgrid_key", f"sendgrid {v}", v)
    v = "npm_" + _fake(rng, AN, 36)
    add("npm_token", f"//registry.npmjs.org/:_authToken={v}", v)
    v = _fake(rng, AN, 15) + "4"
    add("password", f"密码：{v}", v)
    return out


LOOK_ALIKES = [
    str(uuid.UUID(int=random.Random(7).getrandbits(128))),
    "5e55a0a0-0000-4000-8000-00000000000a",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "docker pull nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31",
    "Please enter your password to continue; the password must have 12 characters.",
    "The API key is stored in the vault. Authorization header is required. Bearer tokens expire.",
    "token: ",
    "token: null",
    "max_tokens: 4096, input_tokens=1234, totalTokens: 5000, tokenizer: bert-base-uncased",
    "password = getpass.getpass()",
    "token = os.environ['GITHUB_TOKEN']",
    "api_key: ${OPENAI_API_KEY}",
    "password: <your password here>",
    "cat /etc/passwd; ls ~/.ssh/id_ed25519 /home/alice/.aws/credentials C:\\Users\\bob\\secrets.txt",
    "PWD=/home/alice/projects/agentbase",
    "git clone git@github.com:openclaw/openclaw.git && open https://example.com/a?b=1#top",
    "task-1234567890abcdef12345 and scikit-learn and mask-rcnn-resnet50-fpn",
    "mkdir -p /tmp/build && ssh -p 2222 host",
    "请输入密码，然后按回车。",
    "mysql://agentbase:***@127.0.0.1:3306/agentbase",
]
PNG = base64.b64encode(random.Random(3).randbytes(3000)).decode()
LOOK_ALIKES.append("data:image/png;base64," + PNG[:600])

FIELDS = ("user", "assistant", "thinking", "exec", "result", "compaction", "error")


def build(root: Path, seed: int = 1) -> dict[str, list[tuple[str, str, list[str]]]]:
    """The planted session and a look-alike session; returns what was planted per field."""
    rng = random.Random(seed)
    plants = {f: planted(rng) for f in FIELDS}
    text = {f: "\n".join(line for _k, line, _v in plants[f]) for f in FIELDS}
    c = Chain()
    objs = [header()]
    objs.append(c.user("here is my setup\n" + text["user"]))
    objs.append(c.assistant([
        {"type": "thinking", "thinking": "The user pasted credentials:\n" + text["thinking"], "thinkingSignature": "sig"},
        {"type": "text", "text": "I will configure it.\n" + text["assistant"]},
        {**exec_call("t1", text["exec"]), "arguments": {
            "command": text["exec"], "env": {"SERVICE_TOKEN": "Zt" + _fake(rng, AN, 26) + "4"}}},
    ]))
    objs.append(c.result("t1", "configured:\n" + text["result"]))
    compaction = c.entry("compaction", summary="Earlier the user shared:\n" + text["compaction"],
                         firstKeptEntryId="00000001", tokensBefore=1000)
    objs.append(compaction)
    objs.append(c.entry("message", message={
        "role": "assistant", "content": [], "stopReason": "error", "provider": "anthropic", "model": "claude-test",
        "errorMessage": "401 Unauthorized for request with " + text["error"], "timestamp": 1775354400000}))
    # a credential cut by the preview's 512th character
    cut = "ghp_" + _fake(rng, AN, 36)
    objs.append(c.user("x" * 505 + " " + cut))
    plants["cut"] = [("github_token", cut, [cut])]
    write(sessions_dir(root) / f"{SID}.jsonl", objs)

    other = "0a0a0a0a-0000-4000-8000-00000000000b"
    c = Chain(start=100)
    objs = [header(other)]
    joined = "\n".join(LOOK_ALIKES)
    objs.append(c.user(joined))
    objs.append(c.entry("message", message={
        "role": "user", "timestamp": 1775354400000,
        "content": [{"type": "text", "text": "a screenshot"}, {"type": "image", "data": PNG, "mimeType": "image/png"}]}))
    objs.append(c.assistant([{"type": "thinking", "thinking": joined, "thinkingSignature": PNG[:400]},
                             exec_call("t9", joined)]))
    objs.append(c.result("t9", joined))
    write(sessions_dir(root) / f"{other}.jsonl", objs)
    return plants


def cli(*args):
    return subprocess.run([sys.executable, "-m", "importer", *args], cwd=REPO, capture_output=True, text=True)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("redaction")
    plants = build(tmp / "state")
    db = tmp / "archive.db"
    report = do_import(db, tmp / "state", server="s")
    assert not report.failures
    store = open_store(f"sqlite:///{db}")
    try:
        snap = export_snapshot(store, tmp / "snap.db", timezone="UTC")
        plain = export_snapshot(store, tmp / "plain.db", timezone="UTC", redact=False)
    finally:
        store.close()
    return {"db": db, "snap": Path(snap.path), "plain": Path(plain.path), "plants": plants, "report": snap}


def _all_values(plants) -> list[tuple[str, str, str]]:
    return [(field, kind, v) for field, items in plants.items() for kind, _line, values in items for v in values]


def _pieces(value: str, size: int = 12) -> set[str]:
    """Every ``size``-character piece of the value's letters-and-digits runs
    (as an index would keep them)."""
    out = set()
    for run in "".join(ch if ch.isalnum() else " " for ch in value).split():
        out.update(run[i:i + size] for i in range(0, max(1, len(run) - size + 1)) if len(run) >= size)
    return out


def test_no_planted_value_in_the_snapshot_file(exported):
    data = exported["snap"].read_bytes()
    low = data.lower()
    counts_file = b""  # (no counts file beside a snapshot now: its counts are in its marker table)
    leaks = []
    for field, kind, value in _all_values(exported["plants"]):
        for piece in _pieces(value) | {value}:
            b = piece.encode()
            if b in data or b.lower() in low or b in counts_file:
                leaks.append((field, kind))
                break
    assert not leaks


def test_no_planted_token_in_the_search_index(exported):
    conn = sqlite3.connect(exported["snap"])
    conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, messages_fts, 'row')")
    terms = {r[0] for r in conn.execute("SELECT term FROM temp.vocab")}
    conn.close()
    assert "redacted" in terms  # the markers are searchable
    leaks = {(f, k) for f, k, v in _all_values(exported["plants"])
             for run in "".join(ch if ch.isalnum() else " " for ch in v).lower().split()
             if len(run) >= 8 and run in terms}
    assert not leaks


def test_every_kind_in_every_field_is_marked(exported):
    conn = sqlite3.connect(exported["snap"])
    blob = "\n".join(str(v) for row in conn.execute(
        "SELECT content_blocks, error_message FROM messages UNION ALL SELECT raw_json, text_preview FROM entries")
        for v in row)
    kinds = {k for items in exported["plants"].values() for k, _l, _v in items} - {"aws"}
    kinds |= {"aws_access_key", "aws_secret_key"}
    for kind in kinds:
        assert f"[REDACTED:{kind}]" in blob, kind
    # counts: per message, per session (their sum), and the places table
    per_message = dict(conn.execute("SELECT message_uuid, secrets_redacted FROM messages WHERE session_uuid = ?",
                                    (SID,)))
    assert all(n > 0 for n in per_message.values()), per_message
    total = conn.execute("SELECT SUM(count) FROM redactions").fetchone()[0]
    assert conn.execute("SELECT secrets_redacted FROM sessions WHERE session_uuid = ?", (SID,)).fetchone()[0] == total
    assert total == exported["report"].secrets_redacted > 100
    places = {r[0] for r in conn.execute("SELECT DISTINCT table_name || '.' || column_name FROM redactions")}
    assert places == {"messages.content_blocks", "messages.error_message", "entries.raw_json"}
    assert conn.execute("SELECT value FROM agentbase_snapshot WHERE key = 'redacted'").fetchone() == ("yes",)
    conn.close()


def test_json_columns_stay_valid(exported):
    conn = sqlite3.connect(exported["snap"])
    for table, column in (("messages", "content_blocks"), ("messages", "tool_calls_json"),
                          ("tool_calls", "arguments"), ("entries", "raw_json"), ("sessions", "header_json")):
        for (value,) in conn.execute(f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL"):
            json.loads(value)
    # the exec command and the env value under a secret-sounding key
    args = json.loads(conn.execute("SELECT arguments FROM tool_calls WHERE call_id = 't1'").fetchone()[0])
    assert args["env"]["SERVICE_TOKEN"] == "[REDACTED:secret]"
    assert "[REDACTED:github_token]" in conn.execute("SELECT command FROM tool_calls WHERE call_id = 't1'").fetchone()[0]
    conn.close()


def test_look_alikes_are_left_alone(exported):
    conn = sqlite3.connect(exported["snap"])
    rows = conn.execute("SELECT content_blocks, thinking_text, text_preview, secrets_redacted FROM messages "
                        "WHERE session_uuid != ?", (SID,)).fetchall()
    assert rows and all(r[3] == 0 for r in rows)
    assert not any("[REDACTED" in (v or "") for r in rows for v in r[:3])
    content = "\n".join(r[0] for r in rows)
    for look in LOOK_ALIKES:
        assert json.dumps(look, ensure_ascii=False)[1:-1] in content, look
    assert PNG in content  # the image block's base64, byte for byte
    args = conn.execute("SELECT command FROM tool_calls WHERE call_id = 't9'").fetchone()[0]
    assert args == "\n".join(LOOK_ALIKES)
    conn.close()


def test_no_redact_keeps_values(exported):
    data = exported["plain"].read_bytes()
    for _field, _kind, value in _all_values(exported["plants"]):
        assert json.dumps(value)[1:-1].encode() in data
    conn = sqlite3.connect(exported["plain"])
    assert conn.execute("SELECT COUNT(*) FROM redactions").fetchone()[0] == 0
    assert conn.execute("SELECT value FROM agentbase_snapshot WHERE key = 'redacted'").fetchone() == ("no",)
    conn.close()


def test_the_store_keeps_the_originals(exported):
    conn = sqlite3.connect(exported["db"])
    stored = "\n".join(r[0] or "" for r in conn.execute("SELECT content_blocks FROM messages"))
    conn.close()
    assert "[REDACTED" not in stored
    assert all(json.dumps(v)[1:-1] in stored for f, _k, v in _all_values(exported["plants"])
               if f in ("user", "assistant", "thinking", "exec", "result"))


def test_secrets_command_reports_kinds_and_places_never_values(exported):
    db = f"sqlite:///{exported['db']}"
    text = cli("secrets", "--db", db)
    as_json = cli("secrets", "--db", db, "--json")
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr[-300:]
    found = json.loads(as_json.stdout)
    snap = sqlite3.connect(exported["snap"])
    assert found["total"] == snap.execute("SELECT SUM(count) FROM redactions").fetchone()[0]
    assert found["kinds"] == dict(snap.execute("SELECT kind, SUM(count) FROM redactions GROUP BY kind"))
    snap.close()
    place = found["places"][0]
    assert place["server"] == "s" and place["agent"] == "main" and place["session"] == SID
    assert {"messages.content_blocks", "entries.raw_json", "messages.error_message"} == {
        f"{p['table']}.{p['column']}" for p in found["places"]}
    assert "github_token" in text.stdout and SID in text.stdout and "messages.content_blocks" in text.stdout
    for output in (text.stdout, as_json.stdout):
        for _field, _kind, value in _all_values(exported["plants"]):
            assert not (_pieces(value) & _pieces(output, 12)) and value not in output


def test_cli_no_redact_flag(tmp_path, exported):
    out = tmp_path / "s.db"
    proc = cli("export", "--db", f"sqlite:///{exported['db']}", "-o", str(out), "--no-redact")
    assert proc.returncode == 0 and "credentials kept" in proc.stderr
    conn = sqlite3.connect(out)
    assert conn.execute("SELECT value FROM agentbase_snapshot WHERE key = 'redacted'").fetchone() == ("no",)
    conn.close()


@pytest.mark.parametrize("text, kinds", [
    ("curl -u x https://user:p%40ss!w0rd@host/x", ["url_password"]),
    ("redis://:S3cretPass@localhost:6379/0", ["url_password"]),
    ("--password hunter2X --token abcdef123456", ["password", "secret"]),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", ["authorization"]),
    ("AWS_SECRET_ACCESS_KEY=Zx8Yw7Vu6Ts5Rq4Po3Nm2/k1Ji0HgFeDcBa9AbCd", ["secret"]),
    ("api_key: YOUR_API_KEY_HERE and token: \"OPENAI_TOKEN\" or secret=example-secret-123", []),  # placeholders
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx4Xz", ["private_key"]),  # cut: no END line
    ("password: Required", []),
    ("def password(self): pass", []),
    ("the secret: is out", []),
    ("sorted(items, key=lambda x: x[1])", []),
])
def test_text_cases(text, kinds):
    new, counts = redact_text(text)
    assert sorted(Counter(counts or {}).elements()) == sorted(kinds)
    if kinds:
        assert "[REDACTED:" in new


def test_json_redaction_keeps_escapes_valid():
    value = {"text": 'say "hi"\\ then password="Tr0ub4dor&3" \u2028 and \\"ghp_' + "a1" * 18 + '\\"'}
    new, counts, decoded = redact_json(json.dumps(value))
    assert counts and json.loads(new) == decoded and "Tr0ub4dor" not in new and "a1a1a1a1" not in new


def test_looks_secret():
    assert looks_secret("hunter2X") and looks_secret("Zq8rT3xW9vB2nM5k")
    for v in ("Required", "null", "${TOKEN}", "<password>", "********", "/home/u/x", "4096", "getPassword", "abc"):
        assert not looks_secret(v), v


@pytest.mark.parametrize("url", [
    "mysql://agentbase:S3cr/tXq@127.0.0.1:3306/agentbase",   # a / that URL parsers cut the password at
    "mysql://agentbase:S3cr#tXq@127.0.0.1:3306/agentbase",
    "mysql://agentbase:S3crtXq@127.0.0.1:99999/agentbase",   # a port out of range
    "mysql://agentbase:S3crtXq@127.0.0.1:1/agentbase",       # nothing listening
])
def test_database_password_is_never_shown(url):
    proc = cli("-v", "stats", "--db", url)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("Error:")
    assert "S3cr" not in proc.stderr + proc.stdout and "tXq" not in proc.stderr + proc.stdout


def test_mask_url():
    from importer.store import mask_url

    assert mask_url("mysql://u:p4ss@h:3306/d") == "mysql://u:***@h:3306/d"
    assert mask_url("mysql://u:p/q#r@h/d") == "mysql://u:***@h/d"
    assert mask_url("mysql://u@h/d") == "mysql://u@h/d"
    assert mask_url("sqlite:////tmp/a.db") == "sqlite:////tmp/a.db"


def test_each_format_found_from_its_literal_finds_what_its_pattern_finds():
    """A format whose matches all start with a literal is looked for with str.find and its
    pattern tried there (a pattern behind a look-behind is otherwise tried at every character):
    on texts made of every format's literal, runs, escapes and separators, glued and repeated,
    each format's matches are those of its pattern's finditer, in order."""
    from importer import redact as R

    literal_formats = [f for f in R.FORMATS if f.literal]
    assert len(literal_formats) >= 25  # (most formats start with one)
    rng = random.Random(22)
    pieces = [f.literal for f in R.FORMATS if f.literal] + [
        "", " ", "-", "_", ".", "=", "/", "?", "&", ";", "\\n", "\\t", "\n", ":", "@", "x", "7", "Z", "eyJ"]
    for _ in range(1500):
        text = "".join(rng.choice(pieces) if rng.random() < 0.5 else
                       "".join(rng.choice(string.ascii_letters + string.digits + "_-") for _ in range(rng.randint(1, 70)))
                       for _ in range(rng.randint(1, 12)))
        for f in R.FORMATS:
            assert [m.span(f.group) for m in f.finditer(text)] == \
                [m.span(f.group) for m in f.regex.finditer(text)], (f.kind, text)
        assert [m.span() for m in R._finditer_from(R._JWT, R._JWT_LITERAL, text)] == \
            [m.span() for m in R._JWT.finditer(text)], text
    # what counts as a literal: the characters before the first other one, none when the top level
    # has an alternative, and not the last one when it is repeated or optional
    assert R._leading_literal(r"sk-ant-[a-z]{20,}") == "sk-ant-"
    assert R._leading_literal(r"SG\.[a-z]+") == "SG."
    assert R._leading_literal(r"ab?c") == "a" and R._leading_literal(r"ab{2}") == "a"
    assert R._leading_literal(r"ntn_[a-z]+|secret_[a-z]+") == ""
    assert R._leading_literal(r"(?:ghp|gho)_x") == "" and R._leading_literal(r"a[|]b") == "a"
    assert R._leading_literal(r"a(?:b|c)d") == "a" and R._leading_literal(r"\d{8}:x") == ""


def test_entropy_is_the_shannon_formula_to_the_last_bit():
    """entropy() reads its terms from a table for texts up to 512 characters: the same float as
    the formula computed term by term, in the same order (thresholds compare it exactly)."""
    import math

    from importer import redact as R

    rng = random.Random(5)
    texts = ["".join(rng.choice("aab0Z中1é -_") for _ in range(n)) for n in range(1, 700)]
    texts += ["".join(rng.choice(string.printable) for _ in range(rng.randint(1, 600))) for _ in range(2000)]
    for t in texts:
        n = len(t)
        assert R.entropy(t) == -sum(c / n * math.log2(c / n) for c in Counter(t).values()), t
    assert R.entropy("") == 0.0 and R.entropy("abcdefgh") == 3.0


def test_has_digit_is_str_isdigit_of_any_character():
    from importer import redact as R

    for v in ("abc", "ab1", "٣", "x²", "①", "", "Ⅻ", "abcdefghijklmnopqrstuvwxyz9"):
        assert R._has_digit(v) == any(c.isdigit() for c in v), v


def test_the_heads_of_a_texts_runs_are_those_a_look_behind_pattern_finds():
    """SecretSet._hits reads the head (first 8 bytes) of every run of letters and digits of a text
    with bytes.translate and split: the same heads, of the runs of 3 or more, as the pattern
    (?<![A-Za-z0-9])[A-Za-z0-9]{3,8} finds, on texts of any bytes."""
    import re

    from importer import redact as R

    pattern = re.compile(rb"(?<![A-Za-z0-9])[A-Za-z0-9]{3,8}")
    rng = random.Random(9)
    alphabet = (string.ascii_letters + string.digits).encode() + b" \n\t-_./\\\x00\xe4\xb8\xad\xff"
    for _ in range(3000):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        assert {h for h in R._heads(data) if len(h) >= 3} == set(pattern.findall(data)), data


def test_bearer_and_auth_lines_are_found_where_their_words_are():
    """``Bearer X`` is looked for from where "bearer" is in the lower-cased text, and an ``_auth``
    line only in a text holding "_auth", ``auth'`` or ``auth"``: on texts of those words in any
    case, glued and repeated, the same matches as the patterns' finditer over the whole text."""
    from importer import redact as R

    rng = random.Random(11)
    pieces = ["bearer", "Bearer", "BEARER", "bEaReR", " ", "\t", "_auth", "'auth'", '"auth"', "auth", "=", ":",
              "x", "-", "Authorization: ", "İ", "K"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) if rng.random() < 0.6 else
                       "".join(rng.choice(string.ascii_letters + string.digits + "+/=") for _ in range(rng.randint(1, 30)))
                       for _ in range(rng.randint(1, 10)))
        low = text.lower()
        if len(low) == len(text):
            assert [m.span() for m in R._finditer_from(R._BEARER, "bearer", text, low)] == \
                [m.span() for m in R._BEARER.finditer(text)], text
        if R._AUTH_LINE.search(text):
            assert "_auth" in text or "auth'" in text or 'auth"' in text, text
