"""Issue #22: the export never fails, and stays fast, whatever it has to
redact; and what enters the set of values replaced everywhere is a
credential, never a word users search for.

A store with 2,000 distinct long bearer JWTs (all sharing their first
characters, as real ones do) and base64-encoded JSON blobs of client secrets
(generated here, none real): ``agentbase export`` and ``agentbase secrets``
succeed and no planted value reaches the snapshot. Before, each value became
a large pattern in one RE2 program: about 100 such JWTs made both fail with
"pattern too large". Then junk that the detector takes for a value (a PEM
header, ``users:``, ``token:``, ``MONGO_URI=``, ``ConnectionStrings``, a user
name given as a password) is not replaced elsewhere, and a server or agent
named like a weak password keeps its name.
"""

from __future__ import annotations

import base64
import json
import random
import sqlite3
import string
import subprocess
import sys
from pathlib import Path

import pytest
import re2

from importer import redact as R
from importer import shape
from importer.search import fts_query
from importer.snapshot import export_snapshot
from importer.store import open_store
from transcripts import Chain, do_import, exec_call, header, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]
AN = string.ascii_letters + string.digits
URLSAFE = AN + "-_"


def _fake(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


def jwt(rng: random.Random) -> tuple[str, str]:
    """A long RS256-style bearer JWT (the same header and claims' names as every other one) and its signature."""
    head = _b64url({"alg": "RS256", "typ": "JWT", "kid": "k1"})
    body = _b64url({"iss": "https://auth.example.com/", "sub": "user-" + _fake(rng, AN, 12), "aud": "api",
                    "scope": "read:items write:items admin:items " * 8, "iat": 1775354400,
                    "exp": 1775358000, "jti": _fake(rng, AN, 22)})
    sig = _fake(rng, URLSAFE, 342)
    return f"{head}.{body}.{sig}", sig


def blob(rng: random.Random) -> tuple[str, list[str]]:
    """Base64 of a JSON document holding two secrets: the blob and the secrets."""
    secrets = [_fake(rng, AN, 24) + "7", _fake(rng, AN, 40) + "3"]
    doc = {"client_id": "app-" + _fake(rng, AN, 8), "client_secret": secrets[0], "refresh_token": secrets[1]}
    return base64.b64encode(json.dumps(doc).encode()).decode(), secrets


def cli(*args, home: Path):
    return subprocess.run([sys.executable, "-m", "importer", *args], cwd=REPO, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "AGENTBASE_HOME": str(home),
                               "PYTHONPATH": str(REPO)}, timeout=900)


def _leaks(data: bytes, pieces: list[str]) -> int:
    """How many of ``pieces`` occur in ``data`` (their first 24 characters; one RE2 pass)."""
    options = re2.Options()
    options.max_mem = 1 << 30
    options.encoding = re2.Options.Encoding.LATIN1
    finder = re2.compile(b"|".join(re2.escape(p[:24].encode()) for p in pieces), options)
    return len({m.group() for m in finder.finditer(data)})


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scale")
    rng = random.Random(22)
    tokens, blobs = [], []
    for s in range(50):
        c = Chain()
        objs = [header(f"5ca1e000-0000-4000-8000-{s:012x}")]
        for m in range(40):
            token, sig = jwt(rng)
            tokens.append((token, sig))
            if m % 4 == 3:  # some in a tool call and its output
                objs.append(c.assistant([exec_call(f"t{m}", f"curl -sH 'Authorization: Bearer {token}' "
                                                           "https://api.example.com/v1/items")]))
                objs.append(c.result(f"t{m}", f"200 OK for Bearer {token}"))
            else:
                objs.append(c.user(f"curl -H 'Authorization: Bearer {token}' https://api.example.com/v1/items"))
        for m in range(10):
            b, secrets = blob(rng)
            blobs.append((b, secrets))
            objs.append(c.user(f"echo {b} | base64 -d > creds.json"))
        write(sessions_dir(tmp / "state") / f"5ca1e000-0000-4000-8000-{s:012x}.jsonl", objs)
    db = f"sqlite:///{tmp / 'archive.db'}"
    imported = cli("import", str(tmp / "state"), "--db", db, "--server", "s", home=tmp)
    assert imported.returncode == 0, imported.stderr[-500:]
    snap = tmp / "snap.db"
    exported = cli("export", "--db", db, "-o", str(snap), "--timezone", "UTC", home=tmp)
    found = cli("secrets", "--db", db, "--json", home=tmp)
    return {"tmp": tmp, "snap": snap, "exported": exported, "found": found, "tokens": tokens, "blobs": blobs}


def test_export_succeeds_with_thousands_of_distinct_jwts(many):
    assert len({t for t, _s in many["tokens"]}) == 2000
    assert len({t[:10] for t, _s in many["tokens"]}) == 1  # they all start alike
    exported = many["exported"]
    assert exported.returncode == 0, exported.stderr[-300:]
    assert "credentials redacted" in exported.stderr
    data = many["snap"].read_bytes()
    assert _leaks(data, [t for t, _s in many["tokens"]]) == 0
    assert _leaks(data, [s for _t, s in many["tokens"]]) == 0, "a JWT's signature"
    assert _leaks(data, [b for b, _s in many["blobs"]]) == 0, "a base64 blob"
    assert _leaks(data, [x for _b, s in many["blobs"] for x in s]) == 0, "a secret inside a blob"
    conn = sqlite3.connect(many["snap"])
    try:
        # every JWT replaced where it stood: in the text, the command, the result
        assert conn.execute("SELECT SUM(count) FROM redactions WHERE kind = 'jwt'").fetchone()[0] >= 2000
        assert "[REDACTED:jwt]" in conn.execute("SELECT command FROM tool_calls LIMIT 1").fetchone()[0]
    finally:
        conn.close()


def test_secrets_succeeds_and_counts_what_the_export_redacted(many):
    found = many["found"]
    assert found.returncode == 0, found.stderr[-300:]
    report = json.loads(found.stdout)
    conn = sqlite3.connect(many["snap"])
    try:
        assert report["total"] == conn.execute("SELECT SUM(count) FROM redactions").fetchone()[0]
    finally:
        conn.close()
    assert _leaks(found.stdout.encode(), [s for _t, s in many["tokens"]]) == 0


def test_a_set_of_many_values_that_share_their_start_stays_small():
    """10,000 distinct JWTs and 10,000 base64 blobs in one set: a text with one of them is replaced
    at once (no pattern made of them all), in its written forms too."""
    rng = random.Random(5)
    tokens = [jwt(rng)[0] for _ in range(10000)]
    blobs = [blob(rng)[0] for _ in range(10000)]
    s = R.SecretSet([(t, "jwt") for t in tokens] + [(b, "secret") for b in blobs])
    for text in (f"Bearer {tokens[1234]} ok", json.dumps({"out": f'{{"token": "{tokens[77]}"}}'}),
                 f"echo {blobs[4321]} | base64 -d"):
        new, counts = s.replace(text)
        assert sum(counts.values()) == 1 and "[REDACTED:" in new
        assert tokens[1234][-40:] not in new and tokens[77][-40:] not in new and blobs[4321][-40:] not in new


# -- what enters the set ----------------------------------------------------------------

JUNK_SOURCES = [
    "private_key: -----BEGIN RSA PRIVATE KEY-----",
    "secrets:\n  password: users:\n",
    "auth_token: token:",
    "DB_PASSWORD=MONGO_URI=",
    '{"connection_secret": "ConnectionStrings"}',
    "sshpass -p octocat ssh deploy@build",
]
_CERT_RNG = random.Random(9)
CERT_BODY = "\n".join(_fake(_CERT_RNG, AN + "+/", 64) for _ in range(6))
CERT = f"-----BEGIN CERTIFICATE-----\n{CERT_BODY}\n-----END CERTIFICATE-----"
# text that holds each junk word where it is no credential
ELSEWHERE = [
    CERT,
    "The file must start with -----BEGIN RSA PRIVATE KEY----- and end with its END line.",
    "users: alice, bob and carol",
    "the token: field is optional",
    "Set MONGO_URI= and PORT= in the .env file",
    '"ConnectionStrings": {"Default": "Server=db;Database=app"}',
    "octocat opened a pull request; thanks octocat",
]


@pytest.fixture(scope="module")
def junk(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("junk")
    rng = random.Random(3)
    real_key = "\n".join(_fake(rng, AN + "+/", 64) for _ in range(5))
    c = Chain()
    objs = [header("a0a0a0a0-0000-4000-8000-000000000022")]
    for line in JUNK_SOURCES:
        objs.append(c.user(line))
    objs.append(c.user(f"-----BEGIN RSA PRIVATE KEY-----\n{real_key}\n-----END RSA PRIVATE KEY-----"))
    objs.append(c.assistant([{"type": "text", "text": "\n\n".join(ELSEWHERE)}]))
    write(sessions_dir(tmp / "state", agent="octocat") / "a0a0a0a0-0000-4000-8000-000000000022.jsonl", objs)
    db = tmp / "archive.db"
    report = do_import(db, tmp / "state", server="octocat__devbox")
    assert not report.failures
    store = open_store(f"sqlite:///{db}")
    try:
        snap = export_snapshot(store, tmp / "snap.db", timezone="UTC")
    finally:
        store.close()
    conn = sqlite3.connect(snap.path)
    try:
        text = conn.execute("SELECT content_blocks FROM messages WHERE role = 'assistant'").fetchone()[0]
        names = conn.execute("SELECT server, agent_id FROM sessions").fetchall()
        users = [r[0] for r in conn.execute("SELECT content_blocks FROM messages WHERE role = 'user' ORDER BY id")]
        key_row = users[len(JUNK_SOURCES)]
    finally:
        conn.close()
    return {"text": json.loads(text)[0]["text"], "names": names, "key_row": key_row, "real_key": real_key}


@pytest.mark.parametrize("i", range(len(ELSEWHERE)), ids=["certificate", "pem_header_in_prose", "users", "token",
                                                         "mongo_uri", "connection_strings", "user_name"])
def test_junk_words_are_not_replaced_elsewhere(junk, i):
    assert ELSEWHERE[i] in junk["text"]


def test_server_and_agent_named_like_a_weak_password_keep_their_names(junk):
    assert junk["names"] == [("octocat__devbox", "octocat")]


def test_a_real_private_key_is_still_redacted(junk):
    assert "[REDACTED:private_key]" in junk["key_row"]
    assert not any(line in junk["key_row"] for line in junk["real_key"].splitlines())


@pytest.mark.parametrize("value, kind", [
    ("-----BEGIN", "secret"), ("-----BEGIN RSA PRIVATE KEY-----", "private_key"),
    ("-----BEGIN RSA PRIVATE KEY----- then", "private_key"), ("users:", "password"), ("token:", "secret"),
    ("MONGO_URI=", "password"), ("ConnectionStrings", "secret"), ("octocat", "password"),
    ("[REDACTED:password]x", "password"), ("connectionString", "secret"), ("getAccessToken", "secret"),
])
def test_not_credential_shaped(value, kind):
    assert not R.credential_shaped(value, kind)
    assert not R.SecretSet([(value, kind)])


@pytest.mark.parametrize("value, kind", [
    ("hunter2X", "password"), ("Zx8Yw7Vu6Ts5Rq4Po3Nm2/k1Ji0HgFeDcBa9AbCd", "secret"), ("p@ss!w0rd", "url_password"),
    ("dXNlcjpwYXNzd29yZA==", "authorization"), ("QWxhZGRpbjpvcGVuIHNlc2Ft", "secret"), ("admin:S3cr", "password"),
    ("ghp_" + "a1B2" * 9, "github_token"),
    ("-----BEGIN RSA PRIVATE KEY-----\n" + "A" * 64 + "\n-----END RSA PRIVATE KEY-----", "private_key"),
])
def test_credential_shaped(value, kind):
    assert R.credential_shaped(value, kind)
    assert value in R.SecretSet([(value, kind)]).kinds


def test_names_are_rewritten_only_by_credential_shaped_values():
    s = R.SecretSet([("Zq8rT3xW9vB2nM5k", "password"), ("alice99", "password"), ("ghp_" + "a1B2" * 9, "github_token")])
    assert s.replace("alice99__devbox", names=True)[0] == "alice99__devbox"
    assert s.replace("alice99__devbox")[0] == "[REDACTED:password]__devbox"
    assert s.replace("Zq8rT3xW9vB2nM5k__devbox", names=True)[0] == "[REDACTED:password]__devbox"
    assert s.replace("ghp_" + "a1B2" * 9, names=True)[0] == "[REDACTED:github_token]"


class _CountingSet(R.SecretSet):
    """The real set, counting the texts searched whole (SecretSet.search)."""

    searched = 0

    def search(self, text):
        type(self).searched += 1
        return super().search(text)


def test_rows_cut_at_their_limit_that_hold_no_value_are_not_searched_again():
    """Every long message's preview is cut at its limit: pass 2 looks at its end (a cut
    credential's head) and nothing more, not each column of the row searched once more (with
    a large set, a cost per row of the tree: 0.3 ms each); one that ends in a known value's
    head still gets the head's marker, and a row that holds a value is still replaced."""
    from importer import parser as P
    from importer.snapshot import redaction

    rng = random.Random(7)
    values = [("ghp_" + _fake(rng, AN, 36), "github_token") for _ in range(200)]
    secrets = _CountingSet(values)
    names = ("id", "session_id", "content_blocks", "text_preview")
    cut = P.PREVIEW_CHARS
    rows = [(i, 1, json.dumps([{"type": "text", "text": "w " * 400}]), ("w " * 400)[:cut]) for i in range(300)]
    head = values[5][0][:20]
    rows.append((300, 1, None, ("x " * 400)[:cut - 21] + " " + head))  # cut through a value
    rows.append((301, 1, json.dumps([{"type": "text", "text": "key " + values[9][0]}]), "key " + values[9][0]))
    _CountingSet.searched = 0
    out = redaction.redact_rows(secrets, "messages", names, rows, {"messages": ("content_blocks", "text_preview")})
    assert sorted(out) == [300, 301]
    assert head not in out[300][0]["text_preview"] and out[300][0]["text_preview"].endswith("]")
    assert values[9][0] not in out[301][0]["content_blocks"] and values[9][0] not in out[301][0]["text_preview"]
    assert _CountingSet.searched < 20, _CountingSet.searched


def test_pass_one_shared_with_the_worker_finds_what_one_process_finds(tmp_path):
    """The export's pass 1 gives the worker every other stripe of message ids: the set it collects
    is the one a single process collects, wherever the credentials are (here one every 97 messages
    of 40,000, so in both processes' stripes)."""
    import multiprocessing

    from importer import shape

    rng = random.Random(31)
    c = Chain()
    lines = [header("5e55a0a0-0000-4000-8000-00000000057a")]
    planted = []
    for i in range(40000):
        if i % 97 == 0:
            v = "ghp_" + _fake(rng, string.ascii_letters + string.digits, 36)
            planted.append(v)
            lines.append(c.user(f"step {i}: GH_TOKEN={v}"))
        else:
            lines.append(c.user(f"step {i}: nothing to see"))
    write(sessions_dir(tmp_path / "state") / "a.jsonl", lines)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    store = open_store(f"sqlite:///{db}")
    first, last = store.tuples("SELECT MIN(id), MAX(id) FROM messages")[0]
    assert last - first > 8 * R._STRIPE  # (several ranges each)
    alone = R.collect(store, shape.redact_columns())
    pool = multiprocessing.get_context("fork").Pool(1)
    try:
        shared = R.collect(store, shape.redact_columns(), pool)
    finally:
        pool.terminate()
        pool.join()
    assert set(planted) <= set(alone.kinds)
    assert shared.values() == alone.values()
    # the shared pass indexed each value as it came (SecretSet.eager): the index is the one a set
    # built all at once has
    assert shared.ready() and alone.ready()
    for part in ("_entries", "_forward", "_backward", "_loose", "_glued"):
        assert getattr(shared, part) == getattr(alone, part), part


def test_an_eager_index_follows_a_kind_named_later_and_the_values_added_after_it_is_built():
    """A value indexed as it is added keeps the kind the set names it with at the end (the most
    specific found), and a value added after the index is complete is found too."""
    rng = random.Random(5)
    token = "ghp_" + _fake(rng, string.ascii_letters + string.digits, 36)
    other = "glpat-" + _fake(rng, string.ascii_letters + string.digits, 20)
    eager = R.SecretSet()
    eager.eager()
    eager.add(token, "password")
    eager.add(token, "github_token")
    at_once = R.SecretSet([(token, "github_token")])
    text = f"first {token} then {token}"
    assert eager.replace(text)[0] == at_once.replace(text)[0] == \
        f"first {R.REDACTED.format('github_token')} then {R.REDACTED.format('github_token')}"
    eager.add(other, "gitlab_token")
    assert eager.replace(f"x {other} {token}")[0] == \
        f"x {R.REDACTED.format('gitlab_token')} {R.REDACTED.format('github_token')}"


def _snapshot_rows(path: Path) -> dict:
    """Every table's rows of a snapshot, and what full-text searches find, but the marker (its times and id)."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE '%fts%' AND name NOT LIKE 'sqlite_%'")]
        out = {t: sorted(map(repr, conn.execute(f"SELECT * FROM [{t}]"))) for t in tables if t != shape.MARKER}
        conn.execute(f"CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, {shape.FTS_TABLE}, 'row')")
        out["fts terms"] = conn.execute("SELECT term, doc, cnt FROM temp.terms ORDER BY term").fetchall()
        for q in ("部", "部署", "quokka", "ghp*", "REDACTED"):
            out["fts " + q] = sorted(r[0] for r in conn.execute(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (fts_query(q),)))
        return out
    finally:
        conn.close()


def test_batches_this_process_prepares_are_written_as_the_worker_would(tmp_path, monkeypatch):
    """The export's main process prepares batches itself while the worker is behind (worker.AHEAD,
    INLINE): redacted, derived and indexed as the worker does them. All of them prepared here and all
    of them by the worker give the same snapshot, full-text index included (CJK text: its index form
    is made once, not twice)."""
    from importer.snapshot import worker as W

    rng = random.Random(5)
    c = Chain()
    lines = [header("5e55a0a0-0000-4000-8000-0000000005e1")]
    keys = chinese = 0
    for i in range(9000):
        if i % 50 == 0:
            lines.append(c.user(f"step {i}: GH_TOKEN=ghp_{_fake(rng, string.ascii_letters + string.digits, 36)}"))
            keys += 1
        elif i % 3 == 0:
            lines.append(c.user(f"第{i}步：请帮我把网站部署到新的服务器上"))
            chinese += 1
        else:
            lines.append(c.assistant([{"type": "text", "text": f"step {i}: the quokka config is fine"}]))
    write(sessions_dir(tmp_path / "state") / "a.jsonl", lines)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    store = open_store(f"sqlite:///{db}")
    monkeypatch.setattr(W, "AHEAD", 10 ** 6)  # the worker prepares every batch
    export_snapshot(store, tmp_path / "worker.db", timezone="UTC")
    monkeypatch.setattr(W, "AHEAD", 0)  # this process prepares every batch it can
    monkeypatch.setattr(W, "INLINE", 10 ** 6)
    export_snapshot(store, tmp_path / "here.db", timezone="UTC")
    worker, here = _snapshot_rows(tmp_path / "worker.db"), _snapshot_rows(tmp_path / "here.db")
    assert len(worker["messages"]) == 9000
    assert len(worker["fts 部"]) == len(worker["fts 部署"]) == chinese and len(worker["fts REDACTED"]) == keys
    assert worker == here


def test_look_alikes_of_known_values_compile_no_pattern(tmp_path):
    """A text holding look-alikes of known values (one character changed, dots made tildes: their
    longest runs are there, the others are not) is left as it is, without compiling any value's
    pattern (a long JWT's takes milliseconds: 10,000 look-alikes took 35 s of an export)."""
    rng = random.Random(7)
    tokens = [jwt(rng)[0] for _ in range(40)]
    secrets = R.SecretSet((t, "jwt") for t in tokens)
    text = "\n".join("Reference: x" + t[1:].replace(".", "~") for t in tokens)
    escaped = json.dumps({"t": text})  # (the JSON escapes make each a candidate written escaped)
    R._value_regex.cache_clear()
    assert secrets.replace(escaped)[0] == escaped
    assert R._value_regex.cache_info().misses == 0
    # and a value written escaped (its dots \u002e) is still found, by its pattern
    written = '{"t": "' + tokens[0].replace(".", "\\u002e") + '"}'
    replaced = secrets.replace(written)[0]
    assert json.loads(replaced)["t"] == "[REDACTED:jwt]" and R._value_regex.cache_info().misses == 1
