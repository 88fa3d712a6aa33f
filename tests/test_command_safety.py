"""A command never destroys or creates what it should not (issue 22, section 1).

`-o` (export, watch, sync's snapshot) names a new path or an existing AgentBase snapshot, and its state
file beside it is new or an AgentBase state file; anything else is refused with one line, untouched.
Read-only commands (stats, report, secrets, export, serve) never create a store, never change a file
that is not one, and say where no archive is. `serve` refuses what is not a snapshot before serving.
Every case runs the real command line (`python -m importer`) and checks the target afterwards: the
same kind of inode, bytes, mode and link, and nothing new beside it.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ports import free_port
from transcripts import SID, conversation, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]


def run(*args, cwd=None, env=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "importer", *map(str, args)], cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=timeout, env=env)


def isolated(tmp_path: Path) -> dict:
    """No config file, no embedded default of the user's: every path is under tmp_path."""
    return dict(os.environ, AGENTBASE_HOME=str(tmp_path / "home"), AGENTBASE_CONFIG=str(tmp_path / "none.yml"))


def one_line_error(proc: subprocess.CompletedProcess, *words: str) -> str:
    assert proc.returncode != 0, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def fingerprint(path: Path) -> tuple:
    """What a path is: its inode type, mode, bytes (of a regular file), link text, and what its folder
    holds (so that nothing new appears beside it)."""
    st = os.lstat(path)
    kind = stat.S_IFMT(st.st_mode)
    body = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    return kind, stat.S_IMODE(st.st_mode), st.st_rdev, body, link, sorted(os.listdir(path.parent))


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """A small SQLite archive of two sessions (read by the tests, never written after)."""
    root = tmp_path_factory.mktemp("archive")
    sd = sessions_dir(root / "state")
    write(sd / f"{SID}.jsonl", conversation(turns=2))
    write(sd / "0c0c0c0c-0000-4000-8000-00000000000c.jsonl", conversation(sid="0c0c0c0c-0000-4000-8000-00000000000c"))
    db = root / "a.db"
    proc = run("import", root / "state", "--db", f"sqlite:///{db}", "-q", env=isolated(root))
    assert proc.returncode == 0, proc.stderr
    return db


@pytest.fixture(scope="module")
def built(archive, tmp_path_factory) -> Path:
    """A snapshot exported from the archive, in a folder of its own."""
    out = tmp_path_factory.mktemp("built") / "snapshot.db"
    proc = run("export", "--db", f"sqlite:///{archive}", "-o", out, "-q", env=isolated(out.parent))
    assert proc.returncode == 0, proc.stderr
    return out


def _text(path: Path) -> Path:
    path.write_text("my notes, not a snapshot\n")
    path.chmod(0o644)
    return path


def _kinds(tmp_path: Path, built: Path, archive: Path) -> dict:
    """Things that are not an AgentBase snapshot, each made at a path of tmp_path."""
    gen = built.parent / os.readlink(built)
    return {
        "text file": lambda p: _text(p),
        "empty file": lambda p: p.write_bytes(b""),
        "device": lambda p: os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3)),
        "fifo": lambda p: os.mkfifo(p),
        "folder": lambda p: p.mkdir(),
        "archive store": lambda p: shutil.copyfile(archive, p),
        "link to a text file": lambda p: os.symlink(_text(tmp_path / "real-notes.txt"), p),
        "link to a device": lambda p: (os.mknod(tmp_path / "dev", stat.S_IFCHR | 0o666, os.makedev(1, 3)),
                                       os.symlink(tmp_path / "dev", p)),
        "link to a folder": lambda p: ((tmp_path / "dir").mkdir(), os.symlink(tmp_path / "dir", p)),
        "dangling link": lambda p: os.symlink(tmp_path / "nothing-here", p),
        # a real snapshot's build file, but not one of this name: the link is not an export's
        "link to another snapshot's file": lambda p: os.symlink(gen, p),
        "link to a snapshot": lambda p: os.symlink(built, p),
    }


KINDS = ["text file", "empty file", "device", "fifo", "folder", "archive store", "link to a text file",
         "link to a device", "link to a folder", "dangling link", "link to another snapshot's file",
         "link to a snapshot"]


# -- export -o ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_export_refuses_an_output_that_is_not_a_snapshot(tmp_path, archive, built, kind):
    target = tmp_path / "notes.txt"
    _kinds(tmp_path, built, archive)[kind](target)
    before = fingerprint(target)
    proc = run("export", "--db", f"sqlite:///{archive}", "-o", target, env=isolated(tmp_path))
    one_line_error(proc, str(target), "not an AgentBase snapshot")
    assert fingerprint(target) == before
    assert not (tmp_path / "notes-state.db").exists()


@pytest.mark.parametrize("kind", ["text file", "device", "fifo", "folder", "archive store", "link to a text file",
                                  "dangling link"])
def test_export_refuses_a_state_path_that_is_not_a_state_file(tmp_path, archive, built, kind):
    target = tmp_path / "snap.db"
    state = tmp_path / "snap-state.db"
    _kinds(tmp_path, built, archive)[kind](state)
    before = fingerprint(state)
    proc = run("export", "--db", f"sqlite:///{archive}", "-o", target, env=isolated(tmp_path))
    one_line_error(proc, str(state), "not an AgentBase snapshot's state file")
    assert fingerprint(state) == before
    assert not os.path.lexists(target)


def test_export_refuses_a_new_path_under_a_file(tmp_path, archive):
    notes = _text(tmp_path / "notes.txt")
    before = fingerprint(notes)
    proc = run("export", "--db", f"sqlite:///{archive}", "-o", notes / "snap.db", env=isolated(tmp_path))
    one_line_error(proc, "not a folder")
    assert fingerprint(notes) == before


def test_export_to_a_new_path_then_over_its_snapshot(tmp_path, archive):
    target = tmp_path / "new" / "dir" / "snap.db"
    env = isolated(tmp_path)
    first = run("export", "--db", f"sqlite:///{archive}", "-o", target, "--timezone", "UTC", env=env)
    assert first.returncode == 0, first.stderr
    assert target.is_symlink() and (target.parent / "snap-state.db").is_file()
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    link = os.readlink(target)
    again = run("export", "--db", f"sqlite:///{archive}", "-o", target, "--timezone", "UTC", env=env)
    assert again.returncode == 0 and "unchanged" in again.stderr, again.stderr
    rebuilt = run("export", "--db", f"sqlite:///{archive}", "-o", target, "--timezone", "UTC", "--full", env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert os.readlink(target) != link and target.is_symlink()
    assert sorted(os.listdir(target.parent)) == sorted(["snap.db", "snap-state.db", os.readlink(target)])
    conn = sqlite3.connect(target)
    assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 2
    conn.close()


def test_an_older_plain_file_snapshot_is_taken_over(tmp_path, archive, built):
    """A snapshot from before the build files (a plain file carrying the marker) is rebuilt as a link."""
    target = tmp_path / "snapshot.db"
    shutil.copyfile(built.parent / os.readlink(built), target)
    proc = run("export", "--db", f"sqlite:///{archive}", "-o", target, env=isolated(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert target.is_symlink() and (tmp_path / "snapshot-state.db").is_file()


# -- watch -o and sync: the same check, before any work ------------------------------------------------

def test_watch_refuses_a_bad_output_before_any_work(tmp_path, archive):
    notes = _text(tmp_path / "notes.txt")
    before = fingerprint(notes)
    state = archive.parent / "state"
    db = tmp_path / "fresh.db"
    proc = run("watch", state, "--db", f"sqlite:///{db}", "-o", notes, env=isolated(tmp_path), timeout=60)
    one_line_error(proc, str(notes), "not an AgentBase snapshot")
    assert fingerprint(notes) == before
    assert not db.exists()  # nothing imported, no store made


def test_sync_refuses_a_bad_snapshot_before_any_work(tmp_path, archive):
    fifo = tmp_path / "snap.db"
    os.mkfifo(fifo)
    db = tmp_path / "fresh.db"
    config = tmp_path / "config.yml"
    config.write_text(f"database: sqlite:///{db}\nsnapshot: {fifo}\n"
                      f"servers:\n  - name: here\n    local: true\n    state_dir: {archive.parent / 'state'}\n")
    before = fingerprint(fifo)
    proc = run("sync", "--config", config, env=isolated(tmp_path), timeout=60)
    one_line_error(proc, str(fifo), "not an AgentBase snapshot")
    assert fingerprint(fifo) == before
    assert not db.exists()


# -- read-only commands never create a store ------------------------------------------------------------

READ_ONLY = [["stats"], ["report", "daily"], ["secrets"], ["export", "-o", "snap.db"]]


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: c[0])
def test_a_read_only_command_on_a_missing_store_creates_nothing(tmp_path, command):
    work = tmp_path / "work"
    work.mkdir()
    for db in ("bogus", "no/dir/x.db", f"sqlite:///{work}/no/dir/x.db"):
        proc = run(*command, "--db", db, cwd=work, env=isolated(tmp_path))
        one_line_error(proc, "no archive at", "run agentbase import")
        assert tree(work) == [], (db, tree(work))
    # the embedded default too
    proc = run(*command, cwd=work, env=isolated(tmp_path))
    one_line_error(proc, "no archive at", str(tmp_path / "home" / "agentbase.db"))
    assert not (tmp_path / "home").exists() and tree(work) == []


@pytest.mark.parametrize("command", READ_ONLY + [["import", str(REPO / "tests" / "fixtures")]], ids=lambda c: c[0])
@pytest.mark.parametrize("kind", ["text file", "folder", "fifo", "device", "other sqlite", "snapshot"])
def test_db_on_what_is_not_an_archive_is_left_alone(tmp_path, built, command, kind):
    target = tmp_path / "thing.db"
    if kind == "text file":
        _text(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    elif kind == "other sqlite":
        conn = sqlite3.connect(target)
        conn.execute("CREATE TABLE recipes (name TEXT)")
        conn.execute("INSERT INTO recipes VALUES ('bread')")
        conn.commit()
        conn.close()
        target.chmod(0o644)
    else:
        shutil.copyfile(built.parent / os.readlink(built), target)
        target.chmod(0o644)
    work = tmp_path / "work"
    work.mkdir()
    before = fingerprint(target)
    proc = run(*command, "--db", f"sqlite:///{target}", cwd=work, env=isolated(tmp_path), timeout=60)
    one_line_error(proc, str(target), "not an AgentBase archive")
    assert fingerprint(target) == before
    assert tree(work) == []


def test_a_0644_archive_is_still_made_private_and_read(tmp_path, archive):
    db = tmp_path / "a.db"
    shutil.copyfile(archive, db)
    db.chmod(0o644)
    proc = run("stats", "--db", f"sqlite:///{db}", env=isolated(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


def test_import_on_a_fresh_path_creates_the_store(tmp_path, archive):
    db = tmp_path / "deep" / "new.db"
    proc = run("import", archive.parent / "state", "--db", f"sqlite:///{db}", "-q", env=isolated(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    stats = run("stats", "--db", f"sqlite:///{db}", "--json", env=isolated(tmp_path))
    assert stats.returncode == 0 and '"sessions":2' in stats.stdout.replace(" ", ""), stats.stdout


# -- MariaDB --------------------------------------------------------------------------------------------

def _databases(admin) -> set[str]:
    admin.ping()
    with admin.cursor() as cur:
        cur.execute("SHOW DATABASES")
        return {r[0] for r in cur.fetchall()}


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: c[0])
def test_a_read_only_command_on_a_missing_mariadb_database_creates_nothing(tmp_path, mariadb_server, command):
    from conftest import MARIADB, RUN_PREFIX

    name = RUN_PREFIX + "missing_" + uuid.uuid4().hex[:8]
    assert name not in _databases(mariadb_server)
    auth = MARIADB["user"] + (f":{MARIADB['password']}" if MARIADB["password"] else "")
    url = f"mysql://{auth}@{MARIADB['host']}:{MARIADB['port']}/{name}"
    work = tmp_path / "work"
    work.mkdir()
    try:
        proc = run(*command, "--db", url, cwd=work, env=isolated(tmp_path))
        one_line_error(proc, "no archive at", name)
        assert name not in _databases(mariadb_server)
        assert tree(work) == []
    finally:
        with mariadb_server.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: c[0])
def test_a_read_only_command_on_an_empty_mariadb_database_creates_no_tables(tmp_path, mariadb_server, mariadb_url,
                                                                             command):
    name = mariadb_url.rsplit("/", 1)[1]
    work = tmp_path / "work"
    work.mkdir()
    proc = run(*command, "--db", mariadb_url, cwd=work, env=isolated(tmp_path))
    one_line_error(proc, "no archive at", name, "run agentbase import")
    mariadb_server.ping()
    with mariadb_server.cursor() as cur:
        cur.execute(f"SHOW TABLES FROM `{name}`")
        assert cur.fetchall() == ()
    assert tree(work) == []


# -- serve ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["text file", "archive store", "folder", "fifo", "device", "other sqlite",
                                  "dangling link", "link to a text file"])
def test_serve_refuses_what_is_not_a_snapshot_before_serving(tmp_path, archive, built, kind):
    target = tmp_path / "thing.db"
    if kind == "other sqlite":
        conn = sqlite3.connect(target)
        conn.execute("CREATE TABLE recipes (name TEXT)")
        conn.commit()
        conn.close()
    else:
        _kinds(tmp_path, built, archive)[kind](target)
    before = fingerprint(target)
    port = free_port()
    try:
        proc = run("serve", target, "--port", port, env=isolated(tmp_path), timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve started on a {kind}")
    line = one_line_error(proc, str(target))
    assert "snapshot" in line
    assert fingerprint(target) == before
    with socket.socket() as s:  # nothing listens: it never started
        assert s.connect_ex(("127.0.0.1", port)) != 0
