"""Collecting over SSH from a real OpenSSH server on loopback (issue 5), and the config file.

The server is Debian's /usr/sbin/sshd, started by tests/sshd.py on a free 127.0.0.1 port with a
generated host key and user key; missing openssh-server skips these tests (fails them under CI=true).
Several configured "servers" point at different state dirs served by the same sshd.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
import synthetic  # noqa: E402
from sshd import SSHServer, keygen, require_sshd  # noqa: E402
from transcripts import SID, Chain, conversation, do_import, dump, line, rows, scalar, sessions_dir, write  # noqa: E402

from importer import remote as remote_mod  # noqa: E402
from importer.config import ConfigError, default_config_path, load_config, parse_config  # noqa: E402
from importer.remote import HostKeyError, RemoteServer  # noqa: E402
from importer.sources import discover  # noqa: E402
from importer.sources.openclaw_store import copied_tables  # noqa: E402
from importer.store import open_store  # noqa: E402
from importer.sync import import_from_config, lock_path, run_lock  # noqa: E402


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    require_sshd()
    server = SSHServer(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()


def ssh_server(sshd, name, state_dir, **extra):
    entry = {"name": name, "host": "127.0.0.1", "port": sshd.port, "user": sshd.user,
             "identity_file": str(sshd.user_key), "state_dir": str(state_dir)}
    entry.update(extra)
    return entry


def write_config(tmp, sshd, servers, **top) -> Path:
    known = tmp / "known_hosts"
    if not known.exists() and sshd is not None:
        sshd.write_known_hosts(known)
    data = {"database": f"sqlite:///{tmp / 'ssh.db'}", "known_hosts": str(known),
            "ssh_config": str(tmp / "no-ssh-config"), "connect_timeout": 5, "read_timeout": 20,
            "servers": servers}
    data.update(top)
    path = tmp / "config.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def padded(size: int, *make) -> list[dict]:
    """A header, then entries from the ``make`` callables in turn until the file has ``size`` bytes."""
    objs = [conversation(turns=1)[0]]
    total = len(line(objs[0]))
    while total < size:
        for m in make:
            objs.append(m())
            total += len(line(objs[-1]))
    return objs


def whole_second_mtimes(root: Path, base: int = 1_775_000_000) -> None:
    """SFTP reports mtimes in whole seconds: give every file a distinct whole-second
    mtime (keeping their order) so a local import sees the same times."""
    files = sorted((p for p in root.rglob("*") if p.is_file()), key=lambda p: (p.stat().st_mtime_ns, str(p)))
    for i, p in enumerate(files):
        os.utime(p, ns=((base + i) * 1_000_000_000,) * 2)


def import_config(config_path: Path, **kw):
    config = load_config(config_path)
    store = open_store(config.database)
    try:
        return import_from_config(store, config, **kw)
    finally:
        store.close()


def local_reference(tmp: Path, trees: dict[str, Path]) -> Path:
    db = tmp / "local.db"
    for name, path in trees.items():
        report = do_import(db, path, server=name)
        assert report.files_failed == 0
    return db


# -- the config file ----------------------------------------------------------------------------


ISSUE_EXAMPLE = """
database: mysql://agentbase@127.0.0.1/agentbase   # password from AGENTBASE_DB_PASSWORD
timezone: Asia/Shanghai
known_hosts: ~/.ssh/known_hosts
servers:
  - name: macmini
    local: true
    state_dir: ~/.openclaw
  - name: ubuntu1
    host: 192.0.2.11
    port: 22
    user: shenwei
    identity_file: ~/.ssh/id_ed25519
    state_dir: /home/shenwei/.openclaw
    agents: [main, xingyao, xinghui]
"""


def test_config_file_keys_defaults_and_env(tmp_path, monkeypatch):
    path = tmp_path / "c.yml"
    path.write_text(ISSUE_EXAMPLE)
    config = load_config(path)
    assert config.database == "mysql://agentbase@127.0.0.1/agentbase"
    assert config.timezone == "Asia/Shanghai" and config.accept_new_host_keys is False
    mac, ubuntu = config.servers
    assert (mac.name, mac.local, mac.state_dirs) == ("macmini", True, ("~/.openclaw",))
    assert (ubuntu.host, ubuntu.port, ubuntu.user, ubuntu.agents) == (
        "192.0.2.11", 22, "shenwei", ["main", "xingyao", "xinghui"])
    # environment variables, with defaults; $$ is a dollar
    monkeypatch.setenv("AB_HOST", "192.0.2.99")
    monkeypatch.delenv("AB_UNSET", raising=False)
    config = parse_config(yaml.safe_load(
        "servers: [{name: a, host: '${AB_HOST}', user: '${AB_UNSET:-me}', state_dir: '/x/$$y'}]"))
    assert (config.servers[0].host, config.servers[0].user, config.servers[0].state_dir) == (
        "192.0.2.99", "me", "/x/$y")
    # default location
    monkeypatch.delenv("AGENTBASE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_config_path() == tmp_path / "xdg" / "agentbase" / "config.yml"
    monkeypatch.setenv("AGENTBASE_CONFIG", str(path))
    assert default_config_path() == path


@pytest.mark.parametrize("text, words", [
    ("servers: [{name: a, host: h, password: hunter2}]", "passwords do not belong"),
    ("database: mysql://u:hunter2@h/db\nservers: [{name: a, local: true}]", "AGENTBASE_DB_PASSWORD"),
    ("servers: [{name: a, host: '${AB_UNSET}'}]", "AB_UNSET is not set"),
    ("servers: [{name: a, hots: h}]", "unknown key 'hots'"),
    ("servers: [{name: a, local: true, host: h}]", "not both"),
    ("servers: [{name: a, host: h}, {name: a, host: g}]", "used twice"),
    ("timezone: Mars/Olympus\nservers: [{name: a, local: true}]", "unknown time zone"),
    ("servers: []", "no servers"),
    ("servers: [{name: a, host: h, port: 99999}]", "port"),
])
def test_config_errors_are_one_clear_line(text, words, monkeypatch):
    monkeypatch.delenv("AB_UNSET", raising=False)
    with pytest.raises(ConfigError) as err:
        parse_config(yaml.safe_load(text), "c.yml")
    message = str(err.value)
    assert words in message and "\n" not in message
    assert "hunter2" not in message


def test_database_password_may_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("AB_DB_PASS", "s3cret")
    config = parse_config(yaml.safe_load(
        "database: 'mysql://u:${AB_DB_PASS}@h/db'\nservers: [{name: a, local: true}]"))
    assert config.database == "mysql://u:s3cret@h/db"


# -- importing over SSH -------------------------------------------------------------------------


def test_two_ssh_servers_and_one_local_equal_a_local_import(tmp_path, sshd):
    tree = synthetic.build(tmp_path / "tree")  # synth-one, synth-two/.openclaw: every identity rule
    third = tmp_path / "tree" / "third"
    write(sessions_dir(third, "xingyao") / f"{SID}.jsonl", conversation(turns=4))
    (sessions_dir(third, "xingyao") / "sessions.json").write_text(json.dumps(
        {"agent:xingyao:main": {"sessionId": SID, "label": "nightly", "updatedAt": 1}}))
    whole_second_mtimes(tree)
    config = write_config(tmp_path, sshd, [
        ssh_server(sshd, "synth-one", tree / "synth-one"),
        ssh_server(sshd, "synth-two", tree / "synth-two" / ".openclaw"),
        {"name": "third", "local": True, "state_dir": str(third)},
    ])
    proc = ic.run_cli(["import", "--config", config, "--json-summary"])
    assert proc.returncode == 0, ic.describe(proc, "import --config")
    summary = json.loads(proc.stdout)
    assert summary["servers_failed"] == [] and summary["files_failed"] == 0
    assert [s["server"] for s in summary["servers"]] == ["synth-one", "synth-two", "third"]
    assert all(s["wire_bytes"] > 0 for s in summary["servers"][:2])
    reference = local_reference(tmp_path, {"synth-one": tree / "synth-one", "synth-two": tree / "synth-two",
                                           "third": third})
    assert dump(tmp_path / "ssh.db") == dump(reference)
    assert scalar(tmp_path / "ssh.db", "SELECT label FROM sessions WHERE server = 'third'") == "nightly"
    # A rerun opens nothing: only the listings cross the network.
    report = import_config(config)
    assert report.ok
    assert report.totals().files_imported == 0 and report.totals().bytes_read == 0
    assert dump(tmp_path / "ssh.db") == dump(reference)


def test_appending_a_line_to_a_3_mb_remote_file_transfers_little(tmp_path, sshd):
    state = tmp_path / "state"
    c = Chain()
    objs = padded(3_000_000, lambda: c.user("x" * 4000 + " 部署"),
                  lambda: c.assistant([{"type": "text", "text": "y" * 2000}]))
    path = write(sessions_dir(state) / f"{SID}.jsonl", objs)
    config = write_config(tmp_path, sshd, [ssh_server(sshd, "big", state)])
    first = import_config(config)
    assert first.ok and first.servers[0].wire_bytes > 3_000_000
    added = line(Chain(start=10_000, parent=c.parent).user("one more line"))
    with open(path, "ab") as f:
        f.write(added)
    second = import_config(config)
    assert second.ok and second.totals().messages_added == 1
    wire = second.servers[0].wire_bytes
    assert wire < 64 * 1024, f"{wire} bytes transferred for one appended line"
    # file bytes: the new line plus the two 1 KB windows that prove the rest unchanged
    assert len(added) <= second.totals().bytes_read <= len(added) + 2048
    assert dump(tmp_path / "ssh.db") == dump(local_reference(tmp_path, {"big": state}))


def test_unknown_and_changed_host_keys_are_refused(tmp_path, sshd):
    state = tmp_path / "state"
    write(sessions_dir(state) / f"{SID}.jsonl", conversation(turns=1))
    known = tmp_path / "known_hosts"
    # a changed key: known_hosts holds another key for [127.0.0.1]:port
    other = keygen(tmp_path / "other_host_key")
    kind, blob = Path(str(other) + ".pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    config = write_config(tmp_path, sshd, [ssh_server(sshd, "s1", state)], accept_new_host_keys=True)
    proc = ic.run_cli(["import", "--config", config])
    assert proc.returncode == 1
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "has CHANGED" in errors[0] and "refusing to connect" in errors[0]
    assert "Traceback" not in proc.stderr
    assert known.read_text() == f"[127.0.0.1]:{sshd.port} {kind} {blob}\n"  # not overwritten
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM messages") == 0
    # an unknown key: refused unless the config accepts new keys
    known.write_text("")
    config = write_config(tmp_path, sshd, [ssh_server(sshd, "s1", state)])
    with pytest.raises(HostKeyError, match="unknown host key"):
        RemoteServer(load_config(config).servers[0], load_config(config)).connect()
    config = write_config(tmp_path, sshd, [ssh_server(sshd, "s1", state)], accept_new_host_keys=True)
    assert import_config(config).ok
    assert known.read_text() == sshd.known_hosts_line()
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM messages") == 4


def test_a_stopped_server_fails_alone(tmp_path, sshd):
    trees = {}
    for name in ("up", "down", "here"):
        trees[name] = tmp_path / name
        write(sessions_dir(trees[name]) / f"{SID}.jsonl", conversation(turns=2))
    stopped = SSHServer(tmp_path / "sshd2", user_key=sshd.user_key).start()
    port = stopped.port
    stopped.stop()
    config = write_config(tmp_path, sshd, [
        ssh_server(sshd, "up", trees["up"]),
        ssh_server(sshd, "down", trees["down"], port=port),
        {"name": "here", "local": True, "state_dir": str(trees["here"])},
    ])
    proc = ic.run_cli(["import", "--config", config, "--json-summary"])
    assert proc.returncode == 1
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: server down: cannot connect to 127.0.0.1:{port}: connection refused"]
    summary = json.loads(proc.stdout)
    assert summary["servers_failed"] == ["down"]
    assert rows(tmp_path / "ssh.db", "SELECT server, COUNT(*) FROM messages GROUP BY server ORDER BY server") == [
        ("here", 8), ("up", 8)]


def test_connection_cut_mid_file_then_rerun_completes(tmp_path, sshd, monkeypatch):
    state = tmp_path / "state"
    sd = sessions_dir(state)
    for i in range(3):  # small files before and after the big one
        write(sd / f"{i:08d}-0000-4000-8000-000000000000.jsonl",
              conversation(sid=f"{i:08d}-0000-4000-8000-000000000000", turns=2))
    c = Chain()
    objs = padded(6_000_000, lambda: c.user("z" * 8000),  # two 4 MB chunks
                  lambda: c.assistant([{"type": "text", "text": "w" * 8000}]))
    big = write(sd / f"{SID}.jsonl", objs)
    # listing order (oldest first): small 0, the big file, small 1, small 2
    for seconds, path in zip((0, 2, 3, 1), [*sorted(sd.glob("0000000*.jsonl")), big]):
        os.utime(path, ns=((1_775_000_000 + seconds) * 1_000_000_000,) * 2)
    config = write_config(tmp_path, sshd, [ssh_server(sshd, "s1", state)])

    original = remote_mod.RemoteReader._fetch
    cut = []

    def fetch_then_cut(self, start, length):
        if self.path.endswith(f"{SID}.jsonl") and start > 0 and not cut:
            cut.append(sshd.kill_sessions())  # kill the sshd processes serving this connection
        return original(self, start, length)

    monkeypatch.setattr(remote_mod.RemoteReader, "_fetch", fetch_then_cut)
    first = import_config(config)
    assert cut and cut[0] >= 1
    result = first.servers[0]
    assert not first.ok and "connection to s1 lost while reading" in result.error
    assert result.report.files_imported == 1  # the file before the big one; the rest is left
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM parsed_files") == 1
    monkeypatch.setattr(remote_mod.RemoteReader, "_fetch", original)
    second = import_config(config)
    assert second.ok and second.totals().files_imported == 3
    assert dump(tmp_path / "ssh.db") == dump(local_reference(tmp_path, {"s1": state}))


def test_ssh_config_host_alias(tmp_path, sshd):
    state = tmp_path / "state"
    write(sessions_dir(state) / f"{SID}.jsonl", conversation(turns=1))
    (tmp_path / "ssh_config").write_text(
        f"Host archive-box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.user_key}\n")
    config = write_config(tmp_path, sshd, [{"name": "s1", "host": "archive-box", "state_dir": str(state)}],
                          ssh_config=str(tmp_path / "ssh_config"))
    report = import_config(config)
    assert report.ok and report.servers[0].where == f"ssh {sshd.user}@127.0.0.1:{sshd.port}"
    assert report.totals().messages_added == 4


def test_agents_list_and_agent_option(tmp_path, sshd):
    state = tmp_path / "state"
    for agent in ("main", "xingyao", "opencode"):
        write(sessions_dir(state, agent) / f"{SID}.jsonl", conversation(turns=1))
    config = write_config(tmp_path, sshd, [ssh_server(sshd, "s1", state, agents=["main", "xingyao"]),
                                           {"name": "here", "local": True, "state_dir": str(state),
                                            "agents": ["main", "xingyao"]}])
    assert import_config(config, agent="xingyao").ok
    assert rows(tmp_path / "ssh.db", "SELECT DISTINCT server, agent_id FROM sessions ORDER BY 1, 2") == [
        ("here", "xingyao"), ("s1", "xingyao")]
    assert import_config(config, server="s1").ok
    assert rows(tmp_path / "ssh.db", "SELECT DISTINCT server, agent_id FROM sessions ORDER BY 1, 2") == [
        ("here", "xingyao"), ("s1", "main"), ("s1", "xingyao")]


def test_sync_refuses_to_overlap(tmp_path):
    state = tmp_path / "state"
    write(sessions_dir(state) / f"{SID}.jsonl", conversation(turns=1))
    config = write_config(tmp_path, None, [{"name": "here", "local": True, "state_dir": str(state)}],
                          snapshot=str(tmp_path / "snapshot.db"))
    store = open_store(f"sqlite:///{tmp_path / 'ssh.db'}")
    lock = lock_path(store)
    store.close()
    with run_lock(lock):
        proc = ic.run_cli(["sync", "--config", config])
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "another agentbase run is in progress" in lines[0]
    assert f"pid {os.getpid()}" in lines[0]
    # the lock is free again: sync runs, then exports the snapshot
    proc = ic.run_cli(["sync", "--config", config, "-q"])
    assert proc.returncode == 0, ic.describe(proc, "sync")
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM messages") == 4
    assert (tmp_path / "snapshot.db").exists()
    with open(lock, "rb") as f:  # released when the process ended
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_sync_rebuilds_the_snapshot_only_when_the_store_changed(tmp_path):
    state = tmp_path / "state"
    write(sessions_dir(state) / f"{SID}.jsonl", conversation(turns=1))
    snapshot = tmp_path / "snapshot.db"
    config = write_config(tmp_path, None, [{"name": "here", "local": True, "state_dir": str(state)}],
                          snapshot=str(snapshot))
    proc = ic.run_cli(["sync", "--config", config])
    assert proc.returncode == 0 and f"snapshot {snapshot}: 1 sessions, 4 messages" in proc.stderr
    made = snapshot.stat().st_ino, snapshot.stat().st_mtime_ns
    proc = ic.run_cli(["sync", "--config", config])  # nothing new: the snapshot stays
    assert proc.returncode == 0, ic.describe(proc, "sync")
    assert f"snapshot {snapshot} unchanged" in proc.stderr
    assert (snapshot.stat().st_ino, snapshot.stat().st_mtime_ns) == made
    other = "5e55a0a0-0000-4000-8000-00000000000b"
    write(sessions_dir(state) / f"{other}.jsonl", conversation(other, turns=2))  # a new session
    proc = ic.run_cli(["sync", "--config", config])
    assert proc.returncode == 0 and f"snapshot {snapshot}: 2 sessions, 12 messages" in proc.stderr
    assert scalar(snapshot, "SELECT COUNT(*) FROM messages") == 12


def test_import_without_path_reads_the_default_config(tmp_path, monkeypatch):
    state = tmp_path / "state"
    write(sessions_dir(state) / f"{SID}.jsonl", conversation(turns=1))
    config = write_config(tmp_path, None, [{"name": "here", "local": True, "state_dir": str(state)}])
    monkeypatch.setenv("AGENTBASE_CONFIG", str(config))
    monkeypatch.delenv("AGENTBASE_DB", raising=False)
    proc = ic.run_cli(["import", "--json-summary"])
    assert proc.returncode == 0, ic.describe(proc, "import")
    assert json.loads(proc.stdout)["servers"][0]["server"] == "here"
    assert rows(tmp_path / "ssh.db", "SELECT DISTINCT server FROM sessions") == [("here",)]
    proc = ic.run_cli(["import", str(state), "--config", config])
    assert proc.returncode == 2 and "not both" in proc.stderr
    proc = ic.run_cli(["import", "--config", config, "--server", "nowhere"])
    assert proc.returncode == 1 and "no server named 'nowhere'" in proc.stderr


def _openclaw_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path))
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute("CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT)")
    db.execute("CREATE TABLE auth_profile_store (id TEXT, secret TEXT)")
    db.execute("INSERT INTO auth_profile_store VALUES ('p', 'sk-secret-value')")
    db.executemany("INSERT INTO transcript_events VALUES (?, ?, ?)",
                   [(SID, i, json.dumps({"type": "message", "id": f"{i:08x}"})) for i in range(50)])
    db.commit()  # committed, still only in the -wal file
    return db


@pytest.mark.parametrize("without_python", [False, True])
def test_remote_sqlite_store_copy_is_consistent_and_credential_free(tmp_path, sshd, without_python):
    store_dir = tmp_path / "state" / "agents" / "main" / "agent"
    store_dir.mkdir(parents=True)
    db = _openclaw_db(store_dir / "openclaw-agent.sqlite")
    writer = sqlite3.connect(str(store_dir / "openclaw-agent.sqlite"))
    writer.execute("BEGIN IMMEDIATE")  # a write in progress must not show
    writer.execute("INSERT INTO transcript_events VALUES ('uncommitted', 0, '{}')")
    config = load_config(write_config(tmp_path, sshd, [ssh_server(sshd, "s1", tmp_path / "state")]))
    server = RemoteServer(config.servers[0], config).connect()
    try:
        found = discover([str(tmp_path / "state")], server="s1", fs=server.fs)
        assert [(type(f).__name__, f.agent_id, f.path) for f in found.units] == [
            ("AgentStore", "main", str(store_dir / "openclaw-agent.sqlite"))]
        if without_python:  # the sqlite3 shell's .backup, on a server without python3
            bin_dir = tmp_path / "bin"
            bin_dir.mkdir()
            for tool in ("sh", "sqlite3", "mktemp", "rm", "cat"):
                target = next(Path(d, tool) for d in ("/usr/bin", "/bin") if Path(d, tool).exists())
                (bin_dir / tool).symlink_to(target)
            command = remote_mod._backup_command(str(store_dir / "openclaw-agent.sqlite"), copied_tables())
            status, out, err = server.run(f"PATH={bin_dir} sh -c {remote_mod.shlex.quote(command)}")
            assert status == 0, err.decode(errors="replace")[-300:]
            copy_path = Path(out.decode().strip())
            local = tmp_path / "fetched.sqlite"
            local.write_bytes(copy_path.read_bytes())
            copy_path.unlink()
            copy_path.parent.rmdir()  # nothing else left behind
        else:
            before, temps = server.counter.payload, set(Path("/tmp").glob("agentbase-sqlite-copy-*"))
            local = server.fetch_sqlite_copy(str(store_dir / "openclaw-agent.sqlite"), tmp_path, copied_tables())
            assert server.counter.payload - before == local.stat().st_size
            assert set(Path("/tmp").glob("agentbase-sqlite-copy-*")) == temps  # the server-side copy is removed
    finally:
        server.close()
        writer.rollback()
        writer.close()
        db.close()
    copy = sqlite3.connect(str(local))
    try:
        assert copy.execute("SELECT COUNT(*) FROM transcript_events").fetchone()[0] == 50
        tables = {r[0] for r in copy.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"transcript_events"}
    finally:
        copy.close()
    assert b"sk-secret-value" not in local.read_bytes()


SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "samples"


def test_remote_openclaw_sqlite_stores_equal_a_local_import(tmp_path, sshd):
    """A real OpenClaw 2026.9.6 state dir (SQLite stores with rows still in -wal, a .zst
    archive) read over SSH: through consistent copies made on the server."""
    sample = SAMPLES / "openclaw-2026.9.6"
    if not sample.is_dir():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"samples folder missing under CI: {sample}")
        pytest.skip(f"no samples folder at {sample}")
    import shutil

    state = tmp_path / "state"
    shutil.copytree(sample, state, ignore=shutil.ignore_patterns("pi", "README.md"))
    for p in state.rglob("*"):
        p.chmod(0o700 if p.is_dir() else 0o600)
    whole_second_mtimes(state)
    config = write_config(tmp_path, sshd, [ssh_server(sshd, "oc", state)])
    first = import_config(config)
    assert first.ok, [s.error for s in first.servers] + [m for s in first.servers for _p, m in s.report.failures]
    reference = local_reference(tmp_path, {"oc": state})
    got, want = dump(tmp_path / "ssh.db"), dump(reference)
    assert got["messages"] and got == want
    # unchanged stores are not copied again
    second = import_config(config)
    assert second.ok and second.totals().files_imported == 0
    assert second.servers[0].wire_bytes < 64 * 1024
    assert dump(tmp_path / "ssh.db") == want


def test_timeouts_a_silent_server_and_a_stalled_transfer(tmp_path, sshd, monkeypatch):
    import signal
    import socket
    import threading

    state = tmp_path / "state"
    c = Chain()
    objs = padded(5_000_000, lambda: c.user("q" * 8000))
    write(sessions_dir(state) / f"{SID}.jsonl", objs)
    # a server that accepts the connection and never says a word
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    accepted = []
    threading.Thread(target=lambda: accepted.append(silent.accept()), daemon=True).start()
    config = write_config(tmp_path, sshd, [
        ssh_server(sshd, "silent", state, port=silent.getsockname()[1]),
        ssh_server(sshd, "stalls", state),
    ], connect_timeout=1, read_timeout=1)
    original = remote_mod.RemoteReader._fetch
    stopped = []

    def fetch_then_stall(self, start, length):
        if start > 0 and not stopped:
            stopped.extend(sshd.session_pids())
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
        return original(self, start, length)

    monkeypatch.setattr(remote_mod.RemoteReader, "_fetch", fetch_then_stall)
    try:
        report = import_config(config)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        sshd.kill_sessions()
        silent.close()
        for conn, _addr in accepted:
            conn.close()
    errors = {s.name: s.error for s in report.servers}
    assert "no answer within 1 s" in errors["silent"]
    assert stopped and "lost while reading" in errors["stalls"] and "no data within 1 s" in errors["stalls"]
    assert scalar(tmp_path / "ssh.db", "SELECT COUNT(*) FROM messages") == 0


def test_remote_store_with_cold_archive_files_equals_a_local_import(tmp_path, sshd, monkeypatch):
    """A store whose sessions moved to cold archives: the embedded blob comes with the
    store's copy, the archive file under sessions/cold/ is read over SFTP."""
    import openclaw_fixtures as F

    # sshd serves this very machine, so a local read would also find the file:
    # record what goes through the SFTP reader (the real one, on the real connection).
    read_over_sftp = []
    original = remote_mod.SFTPFileSystem.read_bytes

    def recording(self, remote_path):
        data = original(self, remote_path)
        read_over_sftp.append((remote_path, len(data)))
        return data

    monkeypatch.setattr(remote_mod.SFTPFileSystem, "read_bytes", recording)

    state = tmp_path / "state"
    path = state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    conn = F.create_agent_store(path)
    sids = {"c01d0000-0000-4000-8000-000000000001": "file", "c01d0000-0000-4000-8000-000000000002": "sqlite"}
    for n, (sid, storage) in enumerate(sids.items()):
        F.add_window(conn, sid, f"agent:main:cold{n}")
        F.add_events(conn, sid, F.conversation_events(sid, turns=n + 2))
        F.move_to_cold(conn, sid, path, storage)
    conn.commit()
    conn.close()
    for p in state.rglob("*"):
        p.chmod(0o700 if p.is_dir() else 0o600)
    whole_second_mtimes(state)
    config = write_config(tmp_path, sshd, [ssh_server(sshd, "oc", state)])
    result = import_config(config)
    assert result.ok, [m for s in result.servers for _p, m in s.report.failures]
    got, want = dump(tmp_path / "ssh.db"), dump(local_reference(tmp_path, {"oc": state}))
    assert {r[2] for r in got["sessions"]} == set(sids)
    assert got["messages"] and got == want
    cold_files = sorted((state / "agents" / "main" / "sessions" / "cold").iterdir())
    assert [(Path(p).name, n) for p, n in read_over_sftp] == [(f.name, f.stat().st_size) for f in cold_files]
