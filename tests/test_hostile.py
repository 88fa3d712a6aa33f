"""A hostile or unlucky tree never stops the archive (issue: trust, part 3), and the archive's door.

Names that are not UTF-8, a FIFO or /dev/zero put in a transcript's place after the listing,
links out of the tree, impossible usage values, epoch seconds, a second file claiming a session,
a locked store, a file-size limit, a killed export's leftovers, an absurd session id in a URL,
and the modes of the files that hold credentials.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from transcripts import SID, Chain, conversation, do_import, exec_call, header, rows, scalar, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]


def run(*args, env=None, timeout=60, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "importer", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=env, preexec_fn=preexec_fn)


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))  # a runaway read dies, never the machine


def run_with_replacement(state: Path, db: Path, victim: str, how: str) -> subprocess.CompletedProcess:
    """Import ``state``; between the listing and the reading, replace the file whose name holds
    ``victim`` by a FIFO (``fifo``) or a link to /dev/zero (``zero``)."""
    script = textwrap.dedent(f"""
        import os, sys
        from importer import pipeline
        real = pipeline.discover
        def listing(*a, **k):
            found = real(*a, **k)
            for u in found.units:
                if {victim!r} in u.path:
                    os.unlink(u.path)
                    if {how!r} == "fifo":
                        os.mkfifo(u.path)
                    else:
                        os.symlink("/dev/zero", u.path)
            return found
        pipeline.discover = listing
        from importer.cli import cli
        sys.exit(cli(["import", sys.argv[1], "--db", sys.argv[2]], prog_name="agentbase"))
    """)
    return subprocess.run([sys.executable, "-c", script, str(state), f"sqlite:///{db}"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory)


def _two_sessions(state: Path) -> Path:
    sd = sessions_dir(state)
    write(sd / f"{SID}.jsonl", conversation(turns=2))
    write(sd / "0c0c0c0c-0000-4000-8000-00000000000c.jsonl", conversation(sid="0c0c0c0c-0000-4000-8000-00000000000c"))
    return sd


# -- names, FIFOs, devices, links ------------------------------------------------------------------


def test_a_name_that_is_not_utf8_is_one_error_and_everything_else_imports(tmp_path):
    sd = _two_sessions(tmp_path / "state")
    bad = os.fsencode(sd) + b"/caf\xe9-\xff.jsonl"
    with open(bad, "wb") as f:
        f.write(json.dumps(header("bad00000-0000-4000-8000-000000000000")).encode() + b"\n")
    bad_agent = os.fsencode(tmp_path / "state" / "agents") + b"/\xfeops"
    os.makedirs(bad_agent + b"/sessions")
    db = tmp_path / "a.db"
    for _ in range(2):  # every run: the same errors, nothing else disturbed
        proc = run("import", tmp_path / "state", "--db", f"sqlite:///{db}")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 2 and all("not valid UTF-8" in ln for ln in errors)
        assert any("caf\\xe9-\\xff.jsonl" in ln for ln in errors) and any("\\xfeops" in ln for ln in errors)
    assert scalar(db, "SELECT COUNT(*) FROM sessions") == 2
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 8 + 12
    failed = rows(db, "SELECT agent_id, file_path, status FROM parsed_files WHERE status = 'failed' ORDER BY file_path")
    assert [(a, Path(p).name, s) for a, p, s in failed] == [("\\xfeops", "\\xfeops", "failed"),
                                                            ("main", "caf\\xe9-\\xff.jsonl", "failed")]


@pytest.mark.parametrize("how", ["fifo", "zero"])
def test_a_fifo_or_dev_zero_in_a_transcripts_place_fails_alone_at_once(tmp_path, how):
    _two_sessions(tmp_path / "state")
    db = tmp_path / "a.db"
    started = time.monotonic()
    proc = run_with_replacement(tmp_path / "state", db, "0c0c0c0c", how)
    assert time.monotonic() - started < 30
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "0c0c0c0c" in errors[0] and "not a regular file" in errors[0]
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 8  # the other session imported


def test_reads_stop_near_the_listed_size(tmp_path):
    """A file that grows without end while it is read is read up to its listed size plus GROWTH."""
    from importer.sources import fs as F

    path = tmp_path / "big"
    path.write_bytes(b"x" * 1000)
    with F.LOCAL.open(str(path), 10) as f:
        assert len(f.read()) == 1000  # all of it: well within the bound
    small = F.Bounded(open(path, "rb"), 100)
    assert len(small.read()) == 100 and small.read() == b""
    small.close()


def test_links_out_of_the_tree_are_not_followed_unless_asked(tmp_path):
    sd = _two_sessions(tmp_path / "state")
    outside = write(tmp_path / "elsewhere" / "secret.jsonl", conversation(sid="5ec0e7e0-0000-4000-8000-000000000000"))
    (sd / "linked.jsonl").symlink_to(outside)
    (sd / "passwd.jsonl").symlink_to("/etc/passwd")
    # a link within the tree is followed
    kept = write(tmp_path / "state" / "kept" / "elsewhere.jsonl", conversation(sid="1e5e1de0-0000-4000-8000-000000000000"))
    (sd / "inside.jsonl").symlink_to(kept)
    # a second name of a file listed anyway is the same file: listed once, by its own name
    (sd / "again.jsonl").symlink_to(sd / f"{SID}.jsonl")
    db = tmp_path / "a.db"
    proc = run("import", tmp_path / "state", "--db", f"sqlite:///{db}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("points outside the tree") == 2
    paths = {Path(p).name for (p,) in rows(db, "SELECT file_path FROM parsed_files")}
    assert "linked.jsonl" not in paths and "passwd.jsonl" not in paths and "inside.jsonl" in paths
    assert "again.jsonl" not in paths and f"{SID}.jsonl" in paths
    assert scalar(db, "SELECT COUNT(*) FROM sessions") == 3
    proc = run("import", tmp_path / "state", "--db", f"sqlite:///{db}", "--follow-symlinks")
    assert scalar(db, "SELECT COUNT(*) FROM sessions") == 4
    assert "linked.jsonl" in {Path(p).name for (p,) in rows(db, "SELECT file_path FROM parsed_files")}


# -- values -------------------------------------------------------------------------------------


def test_negative_or_non_numeric_usage_is_kept_flagged_and_left_out_of_totals(tmp_path):
    c = Chain()
    good = c.assistant([{"type": "text", "text": "fine"}], cost=0.5, tokens=100)
    negative = c.assistant([{"type": "text", "text": "odd"}], cost=0.25, tokens=100, ts=1775354499000)
    negative["message"]["usage"]["input"] = -500
    text = c.assistant([{"type": "text", "text": "odder"}], cost=0.125, tokens=100, ts=1775354498000)
    text["message"]["usage"]["output"] = "lots"
    write(sessions_dir(tmp_path / "s") / f"{SID}.jsonl", [header(), c.user("hi"), good, negative, text])
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "s")
    assert rows(db, "SELECT input_tokens, output_tokens, usage_invalid, usage_counted FROM messages "
                    "WHERE role = 'assistant' ORDER BY seq") == [(100, 50, 0, 1), (-500, 50, 1, 0), (100, None, 1, 0)]
    assert rows(db, "SELECT cost_usd, input_tokens FROM sessions") == [(0.5, 100)]
    stats = json.loads(run("stats", "--db", f"sqlite:///{db}", "--json").stdout)
    assert stats["invalid_usage"] == 2 and stats["usage"]["input"] == 100
    assert stats["usage"]["cost_total"] == 0.5


def test_epoch_seconds_are_not_read_as_milliseconds(tmp_path):
    c = Chain()
    user = c.user("when?")
    del user["timestamp"]
    user["message"]["timestamp"] = 1775354400  # seconds: 2026-04-05 02:00:00 UTC
    write(sessions_dir(tmp_path / "s") / f"{SID}.jsonl", [header(), user])
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "s")
    assert scalar(db, "SELECT timestamp FROM messages") == "2026-04-05 02:00:00.000"


def test_a_second_file_claiming_a_session_keeps_both_versions_and_the_first_ones_cost(tmp_path):
    sd = sessions_dir(tmp_path / "s")
    c = Chain()
    user = c.user("deploy")
    call = c.assistant([exec_call("toolu_x", "deploy.sh")], cost=0.5, tokens=1000)
    result = c.result("toolu_x", "done", details={"exitCode": 0})
    write(sd / f"{SID}.jsonl", [header(), user, call, result])
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "s")
    before = rows(db, "SELECT cost_usd, leaf_entry_id, file_path FROM sessions")
    # another file, named for another session, says it is this one: same ids, other content
    rival = json.loads(json.dumps(call))
    rival["message"]["usage"]["cost"]["total"] = 99.0
    rival["message"]["usage"]["input"] = 999999
    c2 = Chain(start=50)
    extra = c2.user("something else entirely", parent=call["id"])
    time.sleep(0.01)
    write(sd / "f00dfeed-0000-4000-8000-00000000f00d.jsonl", [header(), user, rival, extra])
    report = do_import(db, tmp_path / "s")
    assert any("claims session" in w and "kept as revisions" in w for w in report.warnings)
    assert rows(db, "SELECT cost_usd, leaf_entry_id, file_path FROM sessions") == before
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions WHERE entry_uuid = ?", (call["id"],)) == 1
    # both versions kept: the rival's own entry is archived too, off the first file's active path
    assert rows(db, "SELECT is_active_path FROM messages WHERE message_uuid = ?", (extra["id"],)) == [(0,)]
    assert scalar(db, "SELECT SUM(cost_usd * usage_counted) FROM messages") == 0.5


# -- the store and the export ---------------------------------------------------------------------


def test_a_store_locked_past_the_busy_timeout_is_one_line_and_a_rerun_completes(tmp_path):
    _two_sessions(tmp_path / "state")
    db = tmp_path / "a.db"
    run("init", "--db", f"sqlite:///{db}")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        env = dict(os.environ, AGENTBASE_BUSY_TIMEOUT="1")
        proc = run("import", tmp_path / "state", "--db", f"sqlite:///{db}", env=env)
    finally:
        holder.rollback()
        holder.close()
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("Error:") and "write lock" in lines[0]
    assert run("import", tmp_path / "state", "--db", f"sqlite:///{db}").returncode == 0
    assert scalar(db, "SELECT COUNT(*) FROM messages") == 20


def test_a_file_size_limit_during_import_is_one_line_and_a_rerun_completes(tmp_path):
    sd = sessions_dir(tmp_path / "state")
    for i in range(8):
        sid = f"{i:08x}-0000-4000-8000-000000000000"
        write(sd / f"{sid}.jsonl", conversation(sid=sid, turns=40))
    db = tmp_path / "a.db"
    run("init", "--db", f"sqlite:///{db}")
    limit = db.stat().st_size + 200_000

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = run("import", tmp_path / "state", "--db", f"sqlite:///{db}", preexec_fn=small_files)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-500:]
    assert len(lines) == 1 and lines[0].startswith("Error:"), lines
    assert run("import", tmp_path / "state", "--db", f"sqlite:///{db}").returncode == 0
    clean = tmp_path / "clean.db"
    run("import", tmp_path / "state", "--db", f"sqlite:///{clean}")
    from transcripts import dump

    assert dump(db)["messages"] == dump(clean)["messages"]


def test_a_killed_exports_temporary_files_are_removed_by_the_next(tmp_path):
    _two_sessions(tmp_path / "state")
    db = tmp_path / "a.db"
    run("import", tmp_path / "state", "--db", f"sqlite:///{db}")
    dead = 2**22 + 12345  # no such process
    left = [tmp_path / f".snapshot.db.tmp-{dead}", tmp_path / f".snapshot.db.tmp-{dead}-journal",
            tmp_path / f".snapshot-state.db.tmp-{dead}", tmp_path / f".snapshot.db.link-{dead}",
            tmp_path / f".snapshot.db.download-{dead}-1",
            # a build killed after writing its file, before pointing the link at it
            tmp_path / ".snapshot.db.0123456789abcdef0123456789abcdef"]
    for p in left:
        p.write_bytes(b"half an export")
    assert run("export", "--db", f"sqlite:///{db}", "-o", tmp_path / "snapshot.db").returncode == 0
    assert not [p for p in left if p.exists()]
    assert (tmp_path / "snapshot.db").is_file()


def test_the_archive_and_the_snapshot_are_private(tmp_path, monkeypatch):
    home = tmp_path / "home" / "agentbase"
    monkeypatch.setenv("AGENTBASE_HOME", str(home))
    _two_sessions(tmp_path / "state")
    env = dict(os.environ, AGENTBASE_HOME=str(home))
    assert run("import", tmp_path / "state", env=env).returncode == 0
    assert run("export", env=env).returncode == 0
    # the snapshot (through its link), and its state file, which holds the credential values found
    for name in ("agentbase.db", "snapshot.db", "snapshot-state.db"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    # an older archive that others could read is made private when opened
    (home / "agentbase.db").chmod(0o644)
    assert run("stats", env=env).returncode == 0
    assert stat.S_IMODE((home / "agentbase.db").stat().st_mode) == 0o600


def test_a_session_id_too_large_for_an_integer_is_not_found(tmp_path):
    from datasette.app import Datasette

    _two_sessions(tmp_path / "state")
    db = tmp_path / "a.db"
    run("import", tmp_path / "state", "--db", f"sqlite:///{db}")
    run("export", "--db", f"sqlite:///{db}", "-o", tmp_path / "snapshot.db")
    ds = Datasette([str(tmp_path / "snapshot.db")])
    import asyncio

    async def get(path):
        return (await ds.client.get(path)).status_code

    assert asyncio.run(get("/-/agentbase/session/99999999999999999999999999")) == 404
    assert asyncio.run(get("/-/agentbase/session/1")) == 200
