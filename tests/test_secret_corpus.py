"""Issues #12 and #22 (§3): no planted credential, nor any 10-character piece of one,
reaches the snapshot; look-alikes come through untouched; ``agentbase
secrets`` counts what the export redacted.

The corpus (tests/secret_corpus.py) plants fresh made-up values of every
class the issue lists in every field a transcript has; it is imported and
exported with the command line, as a user would, and the snapshot file's raw
bytes (and its -wal, if any) are read. Assertion messages name a class and
a field, never a value.
"""

from __future__ import annotations

import base64
import json
import random
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import secret_corpus as C
from importer import redact as R

REPO = Path(__file__).resolve().parents[1]


def cli(*args, home: Path):
    return subprocess.run([sys.executable, "-m", "importer", *args], cwd=REPO, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "AGENTBASE_HOME": str(home), "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    placed = C.build(tmp / "state")
    db = f"sqlite:///{tmp / 'archive.db'}"
    imported = cli("import", str(tmp / "state"), "--db", db, "--server", "s", home=tmp)
    assert imported.returncode == 0, imported.stderr[-500:]
    snap = tmp / "snap.db"
    exported = cli("export", "--db", db, "-o", str(snap), "--timezone", "UTC", home=tmp)
    assert exported.returncode == 0, exported.stderr[-500:]
    data = snap.read_bytes()
    for extra in (snap.with_name(snap.name + "-wal"), snap.with_name(snap.name + "-journal")):
        if extra.exists():
            data += extra.read_bytes()
    return {"tmp": tmp, "db": db, "snap": snap, "data": data, "placed": placed, "stderr": exported.stderr}


class Windows:
    """Every 10-byte window of the snapshot, as it is and lower-cased (the
    search index keeps words lower-cased)."""

    def __init__(self, data: bytes, size: int = 10):
        self.size = size
        self.data, self.low = data, data.lower()
        self.seen = {data[i:i + size] for i in range(len(data) - size + 1)}
        self.seen.update(self.low[i:i + size] for i in range(len(self.low) - size + 1))

    def leaks(self, value: str) -> bool:
        b = value.encode()
        if len(b) < self.size:
            return b in self.data or b.lower() in self.low
        return any(b[i:i + self.size] in self.seen or b[i:i + self.size].lower() in self.seen
                   for i in range(len(b) - self.size + 1))


def test_the_corpus_is_big_enough(corpus):
    placed = corpus["placed"]
    values = {v for p in placed for v in p.plant.values}
    assert len(values) >= 2000
    classes = {p.plant.cls for p in placed}
    assert len(classes) >= 110
    # issue 22 §3: every class it lists (what real users paste) is planted
    assert len({p.plant.cls for p in placed if p.plant.issue == 22}) >= 45
    fields = {p.field for p in placed}
    assert set(C.CONTENT_FIELDS) | set(C.SHORT_FIELDS) <= fields
    # every class in every content field; every class that fits in every short one
    for field in C.CONTENT_FIELDS:
        assert {p.plant.cls for p in placed if p.field == field} >= {p.cls for p in C.plants(random.Random(1))}, field


def test_no_planted_value_nor_a_piece_of_one_reaches_the_snapshot(corpus):
    windows = Windows(corpus["data"])
    leaks = Counter()
    for p in corpus["placed"]:
        if any(windows.leaks(v) for v in p.plant.values) or any(e.encode() in corpus["data"] for e in p.plant.encoded):
            leaks[(p.plant.cls, p.field)] += 1
    assert not leaks, f"{len(leaks)} class/field pairs leak: {sorted(leaks)}"


def test_base64_forms_are_gone_too(corpus):
    data = corpus["data"]
    leaks = set()
    for p in corpus["placed"]:
        for v in p.plant.values:
            if len(v) >= 16:
                for form in R._b64_forms(v):
                    if form[:16].encode() in data:
                        leaks.add((p.plant.cls, p.field))
    assert not leaks, sorted(leaks)


def test_look_alikes_are_untouched(corpus):
    conn = sqlite3.connect(corpus["snap"])
    try:
        sid = conn.execute("SELECT id FROM sessions WHERE label = 'Fix the token refresh bug'").fetchone()
        assert sid, "the look-alike session's label"
        rows = conn.execute("SELECT content_blocks, thinking_text, text_preview, error_message, secrets_redacted "
                            "FROM messages WHERE session_id = ?", sid).fetchall()
        assert rows and all(r[4] == 0 for r in rows)
        assert not any("[REDACTED" in (v or "") for r in rows for v in r[:4])
        entries = [r[0] for r in conn.execute("SELECT raw_json FROM entries WHERE session_id = ?", sid)]
        assert entries and not any("[REDACTED" in e for e in entries)
        content = "\n".join(r[0] for r in rows if r[0])
        missing = [i for i, look in enumerate(C.LOOK_ALIKES)
                   if json.dumps(look, ensure_ascii=False)[1:-1] not in content]
        assert not missing, f"look-alikes {missing} changed"
        assert C.PNG in content, "the image's base64"
        assert C.SIGNATURE in content, "the thinking and text signatures"
        command = conn.execute("SELECT command FROM tool_calls WHERE call_id = 'call_look'").fetchone()[0]
        assert command == "\n".join(C.LOOK_ALIKES)
        assert conn.execute("SELECT COUNT(*) FROM redactions WHERE session_id = ?", sid).fetchone()[0] == 0
    finally:
        conn.close()


def test_json_columns_stay_valid(corpus):
    conn = sqlite3.connect(corpus["snap"])
    try:
        for table, column in (("messages", "content_blocks"), ("messages", "tool_calls_json"),
                              ("tool_calls", "arguments"), ("entries", "raw_json"), ("sessions", "header_json"),
                              ("entry_revisions", "raw_json")):
            for (value,) in conn.execute(f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL"):
                json.loads(value)
    finally:
        conn.close()


def test_the_search_index_holds_no_piece(corpus):
    conn = sqlite3.connect(corpus["snap"])
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, messages_fts, 'row')")
        terms = [r[0] for r in conn.execute("SELECT term FROM temp.vocab")]
    finally:
        conn.close()
    assert "redacted" in terms  # the markers are searchable
    blob = "\n".join(terms).encode()
    windows = Windows(blob)
    leaks = {(p.plant.cls, p.field) for p in corpus["placed"] if any(windows.leaks(v) for v in p.plant.values)}
    assert not leaks, sorted(leaks)


def test_counts_and_the_redactions_table(corpus):
    conn = sqlite3.connect(corpus["snap"])
    try:
        total = conn.execute("SELECT SUM(count) FROM redactions").fetchone()[0]
        assert total and f"{total} credentials redacted" in corpus["stderr"]
        assert conn.execute("SELECT value FROM agentbase_snapshot WHERE key = 'secrets_redacted'").fetchone()[0] \
            == str(total)
        by_session = dict(conn.execute("SELECT session_id, SUM(count) FROM redactions GROUP BY session_id"))
        for sid, n in conn.execute("SELECT id, secrets_redacted FROM sessions"):
            assert n == by_session.get(sid, 0), sid
        per_message = dict(conn.execute(
            "SELECT row_id, SUM(count) FROM redactions WHERE table_name = 'messages' GROUP BY row_id"))
        for mid, n in conn.execute("SELECT id, secrets_redacted FROM messages"):
            assert n == per_message.get(mid, 0), mid
        places = {r[0] for r in conn.execute("SELECT DISTINCT table_name || '.' || column_name FROM redactions")}
        # the fields of the corpus, where they are counted
        for place in ("messages.content_blocks", "messages.error_message", "messages.model", "messages.tool_name",
                      "entries.raw_json", "entries.custom_type", "sessions.label", "sessions.display_name",
                      "sessions.spawned_by", "sessions.cwd", "sessions.header_json", "sessions.file_path",
                      "parsed_files.file_path", "session_index.label"):
            assert place in places, place
    finally:
        conn.close()


def test_secrets_command_reports_what_the_export_redacted(corpus):
    found = cli("secrets", "--db", corpus["db"], "--json", home=corpus["tmp"])
    assert found.returncode == 0, found.stderr[-500:]
    report = json.loads(found.stdout)
    conn = sqlite3.connect(corpus["snap"])
    try:
        assert report["total"] == conn.execute("SELECT SUM(count) FROM redactions").fetchone()[0]
        assert report["kinds"] == dict(conn.execute("SELECT kind, SUM(count) FROM redactions GROUP BY kind"))
        snap_places = Counter()
        for t, c, k, n in conn.execute("SELECT table_name, column_name, kind, count FROM redactions"):
            snap_places[(t, c, k)] += n
    finally:
        conn.close()
    places = Counter()
    for p in report["places"]:
        places[(p["table"], p["column"], p["kind"])] += p["count"]
    assert places == snap_places
    windows = Windows(found.stdout.encode())
    leaks = {(p.plant.cls, p.field) for p in corpus["placed"] if any(windows.leaks(v) for v in p.plant.values)}
    assert not leaks, sorted(leaks)


# -- one class at a time ---------------------------------------------------------

PLANTS = C.plants(random.Random(99))


@pytest.mark.parametrize("plant", PLANTS, ids=[p.cls for p in PLANTS])
def test_each_class_is_found_and_replaced(plant):
    values = R.detector().scan(plant.text)
    assert values, plant.cls
    new, counts = R.SecretSet(values).replace(plant.text)
    windows = Windows(new.encode())
    assert not any(windows.leaks(v) for v in plant.values), plant.cls
    assert not any(e in new for e in plant.encoded), plant.cls
    assert sum(counts.values()) >= 1 and "[REDACTED:" in new


@pytest.mark.parametrize("plant", PLANTS, ids=[p.cls for p in PLANTS])
def test_each_class_inside_json_text(plant):
    """The same line as a JSON document inside a tool's output, as stored: escaped twice."""
    doc = json.dumps([{"type": "toolResult", "content": [{"type": "text", "text": json.dumps({"out": plant.text})}]}])
    values = R.detector().scan_json(doc)
    new, _counts, _decoded = R.SecretSet(values).replace_json(doc)
    json.loads(new)
    windows = Windows(new.encode())
    assert not any(windows.leaks(v) for v in plant.values), plant.cls


@pytest.mark.parametrize("look", C.LOOK_ALIKES, ids=range(len(C.LOOK_ALIKES)))
def test_look_alike_finds_nothing(look):
    assert R.detector().scan(look) == []
    assert R.detector().scan_json(json.dumps({"content": [{"type": "text", "text": look}]})) == []


def test_value_forms():
    rng = random.Random(5)
    v = C.fake(rng, C.AN, 30)
    s = R.SecretSet([(v, "secret")])
    forms = {
        "plain": f"x {v} y",
        "json_escaped_quote": json.dumps({"a": f'say "{v}"'}),
        "u_escaped_all": "".join(f"\\u{ord(c):04x}" for c in v),
        "u_escaped_some": "".join(f"\\u{ord(c):04X}" if i % 4 == 0 else c for i, c in enumerate(v)),
        "u_escaped_twice": json.dumps("".join(f"\\u{ord(c):04x}" for c in v)),
        "url_encoded": "".join(f"%{ord(c):02X}" for c in v),
        "base64_whole": base64.b64encode(v.encode()).decode(),
        "base64_inside_1": base64.b64encode(b"x" + v.encode() + b"yy").decode(),
        "base64_inside_2": base64.b64encode(b"xy" + v.encode()).decode(),
        "base64_urlsafe": base64.urlsafe_b64encode(b"x" + v.encode() + b"y").decode(),
    }
    for name, text in forms.items():
        new, counts = s.replace(text)
        assert counts and "[REDACTED:secret]" in new, name
        assert v[5:15] not in new, name


@pytest.mark.parametrize("levels", [1, 2, 3, 4])
def test_a_u_escaped_key_is_found_and_replaced_levels_deep(levels):
    """JSON printed inside JSON, up to four levels (a log line quoting a tool result quoting a config
    file): a key written with \\u escapes is found by the detector and replaced in every level."""
    rng = random.Random(levels)
    v = "sk-proj-" + C.fake(rng, C.AN, 48)
    text = '{"openai_key": "%s"}' % "".join(f"\\u{ord(c):04x}" for c in v)
    for _ in range(levels - 1):
        text = json.dumps(text)
    assert text.count("\\" * 2 ** (levels - 1) + "u") == len(v)
    found = R.detector().scan(text)
    assert v in {value for value, _kind in found}
    new, counts = R.SecretSet(found).replace(text)
    assert sum(counts.values()) >= 1 and "[REDACTED:" in new
    assert v[10:30] not in new.replace("\\", "").replace("u00", "")  # (no escaped run of it either)
    plain = new
    for _ in range(levels):
        plain = json.loads(plain) if plain.startswith('"') else plain
    assert v[10:30] not in json.dumps(json.loads(plain)) and v[10:30] not in plain


def test_a_preview_ends_before_an_escaped_key_it_would_cut():
    """A preview cut at 512 characters through a \\u-escaped key (whose decoded form is what the
    detector finds) ends before the key: its escaped head would match no value in the export."""
    from importer.rows import cut_text

    v = "sk-proj-" + C.fake(random.Random(9), C.AN, 48)
    escaped = "".join(f"\\u{ord(c):04x}" for c in v)
    text = "x" * 400 + ' {"openai_key": "' + escaped + '"} and more'
    assert len(text) > 512 and 400 < text.index(escaped) < 512 < text.index(escaped) + len(escaped)
    cut = cut_text(text, 512)
    assert len(cut) <= text.index(escaped) and escaped[:12] not in cut


def test_a_value_with_special_characters_in_every_form():
    v = 'Ab3"q\\x/9@Zy!%7'
    s = R.SecretSet([(v, "password")])
    for text in (v, json.dumps(v), json.dumps(json.dumps(v)), "".join(f"%{b:02x}" for b in v.encode())):
        assert "[REDACTED:password]" in s.replace(text)[0], text


def test_a_short_value_is_replaced_only_as_a_word():
    s = R.SecretSet([("h7Kq9zX1", "password")])
    assert s.replace("pw h7Kq9zX1.")[0] == "pw [REDACTED:password]."
    assert s.replace("deadh7Kq9zX1ff")[0] == "deadh7Kq9zX1ff"


def test_pieces_of_a_split_key():
    rng = random.Random(8)
    v = "sk-proj-" + C.fake(rng, C.AN, 48)
    blocks = [{"type": "text", "text": "key " + v[:25]}, {"type": "text", "text": v[25:] + " end"}]
    found = R.detector().scan_json(json.dumps(blocks))
    s = R.SecretSet(found)
    assert v in s.kinds and v[:25] in s.kinds and v[25:] in s.kinds
    # the pieces elsewhere, e.g. one of the blocks copied into a preview
    assert v[25:] not in s.replace(f"... {v[25:]} end")[0]


def test_a_value_found_late_is_gone_from_an_earlier_message(tmp_path):
    """The bare value in message 1's thinking is only known as a credential
    from message 3: pass 1 reads everything before pass 2 writes anything."""
    from transcripts import Chain, do_import, header, sessions_dir, write

    from importer.snapshot import export_snapshot
    from importer.store import open_store

    v = C.fake(random.Random(4), C.AN, 26)
    c = Chain()
    write(sessions_dir(tmp_path / "state") / "a.jsonl", [
        header("5e55a0a0-0000-4000-8000-0000000000aa"),
        c.assistant([{"type": "thinking", "thinking": f"the user pasted {v} earlier"}, {"type": "text", "text": "ok"}]),
        c.user("noted"),
        c.user(f"and here it is again: OPENAI_API_KEY={v}"),
    ])
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "state")
    store = open_store(f"sqlite:///{db}")
    try:
        report = export_snapshot(store, tmp_path / "snap.db", timezone="UTC")
    finally:
        store.close()
    assert v[3:13].encode() not in (tmp_path / "snap.db").read_bytes()
    assert report.secrets_redacted == 2


def test_kind_of_a_value_found_twice_is_the_most_specific():
    v = "ghp_" + C.fake(random.Random(2), C.AN, 36)
    s = R.SecretSet([(v, "password"), (v, "github_token"), (v, "secret")])
    assert s.kinds[v] == "github_token"
