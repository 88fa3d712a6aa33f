"""Trees and sources (issue 22, section 5): folders that loop through links, a file reached by two
paths, locally and over SFTP (a real sshd on loopback).

A link to a folder that holds it (``ln -s . x``) is never walked; a file is listed once, by its own
path; an import reads each file once (its bytes read are the file's size, not seven times it)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import claude_code_fixtures as F  # noqa: E402
import importer_check as ic  # noqa: E402
from sshd import SSHServer, require_sshd  # noqa: E402
from transcripts import rows, scalar  # noqa: E402

from importer.sources import discover  # noqa: E402

CODEX_ID = "0199aaaa-0000-7000-8000-000000000001"


def big_claude(path: Path, size: int = 5_000_000) -> Path:
    """A Claude Code session of about ``size`` bytes (made-up filler text)."""
    c = F.Conv()
    c.user("start the quokka service")
    n = total = 0
    while total < size:
        n += 1
        total += sum(len(F.dumps(o)) for o in
                     c.assistant([F.text(f"step {n} " + "q" * 4000)], mid=f"msg_{n}", rid=f"req_{n}"))
    return F.write(path, c.lines)


def codex_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-2026-03-02T10-00-00-{CODEX_ID}.jsonl"
    path.write_text(
        '{"timestamp":"2026-03-02T10:00:00.000Z","type":"session_meta","payload":{"id":"%s","cwd":"/w"}}\n'
        '{"timestamp":"2026-03-02T10:00:01.000Z","type":"response_item","payload":{"type":"message",'
        '"role":"user","content":[{"type":"input_text","text":"hello"}]}}\n' % CODEX_ID)
    return path


def looped_tree(root: Path) -> tuple[Path, Path]:
    """A Claude config dir whose project folder holds ``x -> .`` and ``up -> ..``, and a Codex tree
    whose day folder holds ``x -> .`` and whose month holds ``up -> ..``."""
    cfg = F.config_dir(root / ".claude")
    project = cfg / "projects" / F.PROJECT
    transcript = big_claude(project / f"{F.SID}.jsonl")
    os.symlink(".", project / "x")
    os.symlink("..", project / "up")
    day = root / ".codex" / "sessions" / "2026" / "03" / "02"
    codex_file(day)
    os.symlink(".", day / "x")
    os.symlink("..", day.parent / "up")
    return cfg, transcript


def _import(db: Path, *paths, follow: bool = False):
    args = ["import", *map(str, paths), "--db", f"sqlite:///{db}", "--json-summary", "-q"]
    if follow:
        args.append("--follow-symlinks")
    proc = ic.run_cli(args)
    assert proc.returncode == 0, ic.describe(proc, "import")
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.parametrize("follow", [False, True], ids=["default", "follow-symlinks"])
def test_a_folder_that_links_to_itself_is_read_once(tmp_path, follow):
    cfg, transcript = looped_tree(tmp_path / "home")
    size = transcript.stat().st_size
    assert size > 4_500_000
    db = tmp_path / "a.db"
    summary, stderr = _import(db, cfg, tmp_path / "home" / ".codex", follow=follow)
    paths = [p for (p,) in rows(db, "SELECT file_path FROM parsed_files")]
    assert sorted(paths) == sorted([str(transcript), str(next((tmp_path / "home" / ".codex").rglob("rollout-*")))])
    assert not any("/x/" in p or "/up/" in p for p in paths)
    # the 5 MB file was read once (plus the small Codex file), not once per path round the loop
    assert size <= summary["bytes_read"] < size + 10_000, summary["bytes_read"]
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = 'claude-code'") == 1
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = 'codex'") == 1
    assert stderr.count("a link to a folder that holds it") == 4


def test_a_second_path_to_a_folder_is_listed_once_by_its_own_path(tmp_path):
    cfg = F.config_dir(tmp_path / ".claude")
    own = F.write(cfg / "projects" / F.PROJECT / f"{F.SID}.jsonl", F.basic_session().lines)
    os.symlink(F.PROJECT, cfg / "projects" / "-a")  # shorter, but a link's path
    found = discover([str(cfg)], server="t").units
    assert [u.path for u in found] == [str(own)]
    # two paths named that overlap: each file once
    found = discover([str(cfg), str(cfg / "projects" / "-a")], server="t").units
    assert [u.path for u in found] == [str(own)]


# -- over SSH -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    require_sshd()
    server = SSHServer(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()


def _ssh_config(tmp: Path, sshd, paths: list[Path], **top) -> Path:
    known = tmp / "known_hosts"
    sshd.write_known_hosts(known)
    data = {"database": f"sqlite:///{tmp / 'ssh.db'}", "known_hosts": str(known),
            "ssh_config": str(tmp / "no-ssh-config"), "connect_timeout": 5, "read_timeout": 20,
            "servers": [{"name": "far", "host": "127.0.0.1", "port": sshd.port, "user": sshd.user,
                         "identity_file": str(sshd.user_key), "paths": [str(p) for p in paths]}]}
    data.update(top)
    path = tmp / "config.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("follow", [False, True], ids=["default", "follow-symlinks"])
def test_over_sftp_a_looping_folder_is_read_once(tmp_path, sshd, follow):
    home = tmp_path / "home"
    cfg, transcript = looped_tree(home)
    # and a second path to the project folder: listed once, by its own path
    os.symlink(F.PROJECT, cfg / "projects" / "-a")
    size = transcript.stat().st_size
    config = _ssh_config(tmp_path, sshd, [cfg, home / ".codex"], follow_symlinks=follow)
    proc = ic.run_cli(["import", "--config", config, "--json-summary"])
    assert proc.returncode == 0, ic.describe(proc, "import --config")
    summary = json.loads(proc.stdout)
    assert summary["servers_failed"] == [] and summary["files_failed"] == 0
    db = tmp_path / "ssh.db"
    paths = sorted(p for (p,) in rows(db, "SELECT file_path FROM parsed_files"))
    assert paths == sorted([str(transcript), str(next((home / ".codex").rglob("rollout-*")))])
    assert size <= summary["bytes_read"] < size + 10_000, summary["bytes_read"]
    wire = summary["servers"][0]["wire_bytes"]
    assert wire < size * 1.2, wire
    assert scalar(db, "SELECT COUNT(*) FROM sessions") == 2
    assert proc.stderr.count("a link to a folder that holds it") >= 4  # (those seen through -a too)


# -- session ids that hold a NUL ---------------------------------------------------------------
# A NUL is written out as \u0000 (six visible characters): the id stays whole, and two ids that differ
# after the NUL stay two sessions (cut at the NUL, both were "a", and merged with a session "a").

NUL_IDS = ("a\x00b", "a\x00c", "a")
SHOWN = {"a\x00b": "a\\u0000b", "a\x00c": "a\\u0000c", "a": "a"}


def _sessions(db: Path, source: str) -> dict[str, int]:
    """session_uuid -> messages, of one kind."""
    return dict(rows(db, "SELECT s.session_uuid, COUNT(m.id) FROM sessions s LEFT JOIN messages m "
                         "ON m.session_id = s.id WHERE s.source = ? GROUP BY s.id", (source,)))


def _no_nul_anywhere(db: Path) -> None:
    for table, column in (("sessions", "session_uuid"), ("messages", "session_uuid"), ("parsed_files", "file_path"),
                          ("parsed_files", "session_uuid")):
        values = [v for (v,) in rows(db, f"SELECT {column} FROM {table}") if isinstance(v, str)]
        assert not any("\x00" in v for v in values), (table, column)


def test_jsonl_session_ids_with_a_nul_stay_whole_and_apart(tmp_path):
    from transcripts import conversation, sessions_dir, write

    home = tmp_path / "home"
    # OpenClaw: the header's id
    sd = sessions_dir(home / ".openclaw")
    for i, sid in enumerate(NUL_IDS):
        write(sd / f"5e55a0a0-0000-4000-8000-00000000000{i}.jsonl", conversation(sid=sid, turns=i + 1))
    # pi: the same lines in pi's tree
    pi = home / ".pi" / "agent" / "sessions" / "--home-dev--"
    for i, sid in enumerate(NUL_IDS):
        write(pi / f"2026-03-02T10-00-0{i}-000Z_5e55a0a0-0000-4000-8000-00000000001{i}.jsonl",
              conversation(sid=sid, turns=i + 1))
    # Claude Code: each line's sessionId
    cfg = F.config_dir(home / ".claude")
    for i, sid in enumerate(NUL_IDS):
        c = F.Conv(sid, tag=i + 1)
        for n in range(i + 1):
            c.user(f"prompt {n}")
            c.assistant([F.text(f"answer {n}")], mid=f"msg_{i}_{n}", rid=f"req_{i}_{n}")
        F.write(cfg / "projects" / F.PROJECT / f"c1a0de00-0000-4000-8000-00000000010{i}.jsonl", c.lines)
    # Codex: session_meta's id
    day = home / ".codex" / "sessions" / "2026" / "03" / "02"
    day.mkdir(parents=True)
    for i, sid in enumerate(NUL_IDS):
        lines = [{"timestamp": "2026-03-02T10:00:00.000Z", "type": "session_meta", "payload": {"id": sid, "cwd": "/w"}}]
        for n in range(i + 1):
            lines.append({"timestamp": f"2026-03-02T10:00:0{n + 1}.000Z", "type": "response_item", "payload": {
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": f"prompt {n}"}]}})
        (day / f"rollout-2026-03-02T10-00-0{i}-0199aaaa-0000-7000-8000-00000000000{i}.jsonl").write_text(
            "".join(json.dumps(o) + "\n" for o in lines))
    db = tmp_path / "a.db"
    _import(db, home / ".openclaw", home / ".pi", cfg, home / ".codex")
    for source in ("openclaw", "pi", "claude-code", "codex"):
        found = _sessions(db, source)
        assert set(found) == set(SHOWN.values()), (source, found)
        # each kept its own messages: the session with i+1 turns has the most of a kind
        counts = [found[SHOWN[sid]] for sid in NUL_IDS]
        assert counts[0] < counts[1] < counts[2], (source, counts)
    _no_nul_anywhere(db)


def test_a_sqlite_source_session_id_with_a_nul_stays_whole_and_apart(tmp_path):
    import sqlite3

    import agent_server_fixture as AS

    built = AS.build_agent_db(tmp_path / "server", seed=0)
    agent_db = built.root / "data" / "agent.db"
    reference = tmp_path / "ref.db"
    _import(reference, built.root)
    before = _sessions(reference, "agent-server")
    first, second = sorted(before)[:2]
    conn = sqlite3.connect(agent_db)
    with conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        linked = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                  if any(c[1] == "session_id" for c in conn.execute(f"PRAGMA table_info([{t}])"))]
        for old, new in ((first, "a\x00b"), (second, "a\x00c")):
            conn.execute("UPDATE sessions SET id = ? WHERE id = ?", (new, old))
            for table in linked:
                conn.execute(f"UPDATE [{table}] SET session_id = ? WHERE session_id = ?", (new, old))
    conn.close()
    db = tmp_path / "a.db"
    _import(db, built.root)
    after = _sessions(db, "agent-server")
    assert "a\\u0000b" in after and "a\\u0000c" in after and len(after) == len(before)
    assert after["a\\u0000b"] == before[first] and after["a\\u0000c"] == before[second]
    _no_nul_anywhere(db)
    # a second run finds both unchanged (their keys kept whole)
    summary, _ = _import(db, built.root)
    assert summary["files_imported"] == 0 and summary["files_failed"] == 0
