"""`agentbase doctor` and the import's warning when a kind's files stop being read (issue #24,
"the archive notices when a kind goes silent"), through the real CLI with a HOME made in tmp."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CODEX_HOMES = [SHARED / "other-samples" / "codex" / repo / ".codex" / "sessions"
               for repo in ("JaydenXsoe__ocodex", "EdofEngland__code_butler")]
SECRET = "sk-proj-" + "Q7x" * 16  # planted in an unknown record: never printed by doctor


def agentbase(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBASE_")}
    env.update(HOME=str(home), AGENTBASE_HOME=str(home / "ab"), PYTHONPATH=str(REPO), XDG_CONFIG_HOME=str(home / "cfg"))
    return subprocess.run([sys.executable, "-m", "importer", *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=str(home))


@pytest.fixture
def codex_files() -> list[Path]:
    files = [(f, home) for home in CODEX_HOMES for f in sorted(home.rglob("rollout-*.jsonl"))]
    if len({home for _, home in files}) < len(CODEX_HOMES):
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"Codex samples missing under {CODEX_HOMES}")
        pytest.skip(f"no Codex samples at {CODEX_HOMES}")
    return files


def _pi_file(path: Path) -> None:
    """A pi session with one prompt and one record of a type pi does not know."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {"type": "session", "version": 3, "id": "doctor-pi-1", "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/w"},
        {"type": "message", "id": "m1", "parentId": None, "timestamp": "2026-03-01T10:00:01.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "hello"}]}},
        {"type": "hologram_state", "id": "h1", "parentId": "m1", "timestamp": "2026-03-01T10:00:02.000Z",
         "payload": SECRET},
        {"type": "hologram_state", "id": "h2", "parentId": "h1", "timestamp": "2026-03-01T10:00:03.000Z"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_doctor_lists_places_sessions_and_unknown_types(tmp_path, codex_files):
    home = tmp_path / "home"
    for f, root in codex_files:
        target = home / ".codex" / "sessions" / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
    _pi_file(home / ".pi" / "agent" / "sessions" / "--w--" / "2026-03-01T10-00-00-000Z_doctor-pi-1.jsonl")
    # the oracle: Codex writes one rollout file per session; newer ones say their CLI's version
    codex_sessions = len(codex_files)
    versions = set()
    for f, _root in codex_files:
        first = json.loads(f.read_text().splitlines()[0])
        if first.get("type") == "session_meta" and first["payload"].get("cli_version"):
            versions.add(first["payload"]["cli_version"])
    assert versions  # (the newer sample has one)
    got = agentbase(home, "import", "-q")  # no PATH: every kind's default places in this HOME
    assert got.returncode == 0, got.stderr
    # the import says it too: per server and kind, counted, one example's place, never the content
    notes = [x for x in got.stderr.splitlines() if "of types it does not know" in x]
    assert len(notes) == 1 and notes[0].startswith("note: pi on ") and "2 records" in notes[0], got.stderr
    assert "hologram_state x2" in notes[0] and "session doctor-pi-1, record 2" in notes[0]
    assert SECRET not in got.stderr
    got = agentbase(home, "doctor", "--json")
    assert got.returncode == 0, got.stderr
    assert SECRET not in got.stdout
    servers = json.loads(got.stdout)["servers"]
    assert [s["server"] for s in servers] == [socket.gethostname().split(".")[0] or "local"]
    kinds = {k["kind"]: k for k in servers[0]["kinds"]}
    codex = kinds["codex"]
    assert codex["found"] and codex["places"] == [{"path": "~/.codex", "found": True}]
    assert codex["sessions"] == codex_sessions and codex["files"] == len(codex_files)
    assert codex["last_file"].endswith(".jsonl") and codex["last_session_at"]
    assert codex["unknown_types"] == [] and set(codex["versions"]) == versions
    pi = kinds["pi"]
    assert pi["found"] and pi["sessions"] == 1
    assert [(u["type"], u["count"]) for u in pi["unknown_types"]] == [("hologram_state", 2)]
    assert pi["unknown_types"][0]["example"] == "session doctor-pi-1, record 2"
    claude = kinds["claude-code"]
    assert not claude["found"] and claude["sessions"] == 0
    # the table: found kinds, their figures, and the others summed up in one line
    text = agentbase(home, "doctor")
    assert text.returncode == 0, text.stderr
    assert SECRET not in text.stdout
    line = next(x for x in text.stdout.splitlines() if x.strip().startswith("codex"))
    assert "~/.codex" in line and f" {codex_sessions} " in line
    assert "hologram_state x2" in text.stdout
    assert "more kinds neither found nor archived here" in text.stdout
    assert "claude-code" in agentbase(home, "doctor", "--all").stdout
    # the dashboard's coverage panel says the same from the snapshot
    from conftest import serving

    snapshot = tmp_path / "snap.db"
    got = agentbase(home, "export", "-o", str(snapshot), "-q")
    assert got.returncode == 0, got.stderr
    with serving(snapshot) as served:
        status, _h, page, _t = served.request("GET", "/-/agentbase")
    assert status == 200 and 'id="coverage"' in page and SECRET not in page
    panel = page[page.index('id="coverage"'):]
    panel = panel[:panel.index("</table>")]
    rows = {r.split('data-source="', 1)[1].split('"', 1)[0]: r for r in panel.split("<tr")[2:]}
    assert set(rows) == {"codex", "pi"}
    cells = [c.split(">", 1)[1].split("<", 1)[0] for c in rows["codex"].split("<td")[1:]]
    assert cells[2] == str(codex_sessions) and cells[4] == str(len(codex_files))
    assert set(cells[7].split(", ")) == versions
    assert ">2</span>" in rows["pi"].split("<td")[7]  # the two records pi did not know


def test_a_renamed_key_is_warned_about_and_a_readable_file_is_not(tmp_path, codex_files):
    home = tmp_path / "home"
    day = home / ".codex" / "sessions" / "2025" / "01" / "01"
    day.mkdir(parents=True)
    sample = codex_files[0][0]
    # the format changed: every record's "type" key is now called "kind"
    (day / sample.name).write_text(sample.read_text().replace('"type":', '"kind":'))
    got = agentbase(home, "import", str(home / ".codex"), "-q")
    assert got.returncode == 0, got.stderr
    warned = [x for x in got.stderr.splitlines() if "format not recognised" in x]
    assert len(warned) == 1 and "1 codex file changed" in warned[0] and "none read" in warned[0], got.stderr
    # the same run with a readable rollout beside it: the kind is read, no warning
    home2 = tmp_path / "home2"
    day2 = home2 / ".codex" / "sessions" / "2025" / "01" / "01"
    day2.mkdir(parents=True)
    (day2 / sample.name).write_text(sample.read_text().replace('"type":', '"kind":'))
    shutil.copyfile(codex_files[1][0], day2 / codex_files[1][0].name)
    got = agentbase(home2, "import", str(home2 / ".codex"), "-q")
    assert got.returncode == 0 and "format not recognised" not in got.stderr, got.stderr
    # and a file seen before that only grows never warns: re-import the first home unchanged
    again = agentbase(home, "import", str(home / ".codex"), "-q")
    assert again.returncode == 0 and "format not recognised" not in again.stderr


def test_doctor_without_an_archive_says_so_and_makes_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    got = agentbase(home, "doctor", "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert got.returncode == 1 and "no archive at" in got.stderr and len(got.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "none.db").exists()


def test_doctor_checks_every_configured_server_over_ssh(tmp_path, codex_files):
    """A configured server over SSH (a real sshd on loopback, its SFTP home made in tmp): doctor finds
    its places there, the archive's figures for it, and says which server it could not reach."""
    from ports import free_port
    from sshd import SSHServer, require_sshd
    from test_ssh import import_config, write_config

    require_sshd()
    remote_home = tmp_path / "remote-home"
    for f, root in codex_files:
        target = remote_home / ".codex" / "sessions" / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
    server = SSHServer(tmp_path / "sshd", home=remote_home).start()
    try:
        config = write_config(tmp_path, server, [
            {"name": "box", "host": "127.0.0.1", "port": server.port, "user": server.user,
             "identity_file": str(server.user_key), "paths": ["~/.codex"]},
            {"name": "gone", "host": "127.0.0.1", "port": free_port(), "user": server.user,
             "identity_file": str(server.user_key)}])
        imported = import_config(config, server="box")
        assert imported.ok, [s.error for s in imported.servers]
        got = agentbase(tmp_path, "doctor", "--config", str(config), "--json")
    finally:
        server.stop()
    assert got.returncode == 0, got.stderr
    servers = {s["server"]: s for s in json.loads(got.stdout)["servers"]}
    assert set(servers) == {"box", "gone"}
    box = {k["kind"]: k for k in servers["box"]["kinds"]}
    assert servers["box"]["where"].startswith("ssh ") and servers["box"]["error"] is None
    assert box["codex"]["places"] == [{"path": "~/.codex", "found": True}]
    assert box["codex"]["sessions"] == len(codex_files)
    assert box["claude-code"]["found"] is False and box["claude-code"]["sessions"] == 0
    assert servers["gone"]["error"].startswith("not reached")
    assert all(p["found"] is None for k in servers["gone"]["kinds"] for p in k["places"])
