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
