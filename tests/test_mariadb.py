"""MariaDB as the system of record: same rows as the embedded store, safe
under concurrent importers and a killed connection (real server on 3306)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pymysql
import pytest

from importer.store import StoreError, open_store
from transcripts import SID, Chain, conversation, dump_store, header, sessions_dir, write
import synthetic

REPO = Path(__file__).resolve().parents[1]


def cli(*args, check=False):
    return subprocess.run([sys.executable, "-m", "importer", *args], cwd=REPO, capture_output=True, text=True,
                          check=check)


def _connect(url):
    from urllib.parse import urlsplit

    p = urlsplit(url)
    return pymysql.connect(host=p.hostname, port=p.port, user=p.username, password=p.password or "",
                           database=p.path.lstrip("/"), autocommit=True)


def test_same_rows_as_embedded_store(tmp_path, mariadb_url):
    root = tmp_path / "tree"
    synthetic.build(root)
    sqlite_url = f"sqlite:///{tmp_path / 'a.db'}"
    a = cli("import", str(root), "--db", sqlite_url)
    b = cli("-v", "import", str(root), "--db", mariadb_url)
    assert a.returncode == b.returncode
    assert "again after" not in b.stderr  # no background failure to recover from
    assert dump_store(mariadb_url) == dump_store(sqlite_url)
    _assert_links_hold(mariadb_url)
    assert json.loads(cli("stats", "--db", mariadb_url, "--json").stdout) == \
        json.loads(cli("stats", "--db", sqlite_url, "--json").stdout)
    # Chinese, emoji and raw U+2028 survive utf8mb4 as they are.
    store = open_store(mariadb_url)
    try:
        assert store.query("SELECT COUNT(*) FROM messages WHERE text_preview LIKE ?", ("%\u2028%",))[0][0] >= 1
    finally:
        store.close()


def test_rerun_migrations_is_a_no_op_and_newer_store_refused(mariadb_url):
    store = open_store(mariadb_url)
    assert store.migrate() == []
    version = store.schema_version()
    store.execute("INSERT INTO _migrations (version, name, applied_at) VALUES (?, ?, ?)",
                  (version + 1, "from the future", "2030-01-01"))
    store.close()
    with pytest.raises(StoreError, match="newer than this AgentBase"):
        open_store(mariadb_url)
    proc = cli("stats", "--db", mariadb_url)
    assert proc.returncode == 1 and "newer than this AgentBase" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unreachable_server_is_one_clear_line():
    proc = cli("stats", "--db", "mysql://root:secret-pw@127.0.0.1:1/nothing")
    assert proc.returncode == 1
    assert "cannot connect to MariaDB at 127.0.0.1:1/nothing" in proc.stderr
    assert "secret-pw" not in proc.stderr and "Traceback" not in proc.stderr


def _big_tree(root: Path, files: int = 6, turns: int = 400) -> Path:
    sd = sessions_dir(root)
    for n in range(files):
        sid = f"{n:08x}-0000-4000-8000-000000000000"
        write(sd / f"{sid}.jsonl", conversation(sid=sid, turns=turns))
    return root


def test_two_concurrent_importers_equal_one_run(tmp_path, mariadb_url, mariadb_server):
    root = _big_tree(tmp_path / "tree")
    # the reference: one run into the embedded store
    assert cli("import", str(root), "--server", "s", "--db", f"sqlite:///{tmp_path / 'one.db'}").returncode == 0
    # make sure the schema exists so both start importing at once
    open_store(mariadb_url).close()
    cmd = [sys.executable, "-m", "importer", "import", str(root), "--server", "s", "--db", mariadb_url, "-q"]
    procs = [subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-300:] for o in outs]
    assert dump_store(mariadb_url) == dump_store(f"sqlite:///{tmp_path / 'one.db'}")


def test_killed_connection_mid_import(tmp_path, mariadb_url):
    root = _big_tree(tmp_path / "tree", files=4, turns=2500)
    reference = f"sqlite:///{tmp_path / 'ref.db'}"
    assert cli("import", str(root), "--server", "s", "--db", reference).returncode == 0
    open_store(mariadb_url).close()
    database = mariadb_url.rsplit("/", 1)[1]
    admin = _connect(mariadb_url)
    killed = False
    proc = subprocess.Popen([sys.executable, "-m", "importer", "import", str(root), "--server", "s",
                             "--db", mariadb_url, "-q"], cwd=REPO, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        with admin.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM parsed_files")
            done = cur.fetchone()[0]
            cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
                        (database,))
            ids = [r[0] for r in cur.fetchall()]
            if done >= 1 and ids:
                for i in ids:
                    cur.execute(f"KILL {int(i)}")
                killed = True
                break
        time.sleep(0.02)
    _, err = proc.communicate(timeout=120)
    assert killed, "the import finished before its connection could be killed"
    assert proc.returncode == 1
    assert "lost the connection to MariaDB" in err and "Traceback" not in err
    # consistent: every file either wholly in or not at all
    with admin.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM parsed_files")
        files_done = cur.fetchone()[0]
        cur.execute("SELECT COUNT(*) FROM messages")
        messages = cur.fetchone()[0]
    assert 1 <= files_done < 4
    assert messages == files_done * 2500 * 4
    admin.close()
    assert cli("import", str(root), "--server", "s", "--db", mariadb_url).returncode == 0
    assert dump_store(mariadb_url) == dump_store(reference)


def test_line_larger_than_max_allowed_packet_fails_that_file_clearly(tmp_path, mariadb_url, mariadb_server):
    with mariadb_server.cursor() as cur:
        cur.execute("SELECT @@max_allowed_packet")
        limit = cur.fetchone()[0]
    sd = sessions_dir(tmp_path / "state")
    write(sd / f"{SID}.jsonl", conversation(turns=1))
    c = Chain()
    huge = [header("0d0d0d0d-0000-4000-8000-000000000000"), c.user("x" * (limit + 1024))]
    write(sd / "0d0d0d0d-0000-4000-8000-000000000000.jsonl", huge)
    proc = cli("import", str(tmp_path / "state"), "--server", "s", "--db", mariadb_url)
    assert proc.returncode == 1
    assert "max_allowed_packet" in proc.stderr and "Traceback" not in proc.stderr
    store = open_store(mariadb_url)
    try:
        assert store.query("SELECT COUNT(*) FROM messages")[0][0] == 4
        status = {r[0].rsplit("/", 1)[1][:8]: (r[1], r[2] is not None)
                  for r in store.query("SELECT file_path, status, error_message FROM parsed_files")}
        assert status == {SID[:8]: ("success", False), "0d0d0d0d": ("failed", True)}
    finally:
        store.close()


def _refuse_boom(url):
    """A trigger that makes the server refuse a message whose preview is 'boom',
    as it refuses a value out of range: a failure only the server sees."""
    admin = _connect(url)
    with admin.cursor() as cur:
        cur.execute(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON messages FOR EACH ROW "
            "IF NEW.text_preview = 'boom' THEN "
            "SIGNAL SQLSTATE '22001' SET MYSQL_ERRNO = 1406, MESSAGE_TEXT = 'refused by the test trigger'; "
            "END IF"
        )
    return admin


def test_failure_met_by_a_background_commit_fails_that_file_only(tmp_path, mariadb_url):
    # The importer hands inserts and COMMITs to a sender thread and parses the
    # next file meanwhile: a file the server refuses there must still be
    # rolled back whole, recorded as failed, and leave the other files in.
    sd = sessions_dir(tmp_path / "state")
    sids = [f"{n:08x}-0000-4000-8000-000000000000" for n in (1, 2, 3)]
    for sid in sids:
        c = Chain()
        lines = [header(sid), c.user("hello"), c.assistant([{"type": "text", "text": "hi"}])]
        if sid == sids[1]:
            lines.append(c.user("boom"))  # last: nothing reads the store after its insert
        write(sd / f"{sid}.jsonl", lines)
    open_store(mariadb_url).close()
    admin = _refuse_boom(mariadb_url)
    proc = cli("-v", "import", str(tmp_path / "state"), "--server", "s", "--db", mariadb_url)
    assert proc.returncode == 1, proc.stderr
    assert "MariaDB refused a value" in proc.stderr and "Traceback" not in proc.stderr
    # met in the background (by the commit's settle), then run again in the foreground
    assert f"running {sd / sids[1]}.jsonl again after" in proc.stderr
    with admin.cursor() as cur:
        cur.execute("SELECT session_uuid, COUNT(*) FROM messages GROUP BY session_uuid ORDER BY 1")
        assert cur.fetchall() == ((sids[0], 2), (sids[2], 2))
        cur.execute("SELECT session_uuid FROM sessions ORDER BY 1")
        assert [r[0] for r in cur.fetchall()] == [sids[0], sids[2]]
        cur.execute("SELECT file_path, status FROM parsed_files ORDER BY file_path")
        assert [(p.rsplit("/", 1)[1][:8], s) for p, s in cur.fetchall()] == [
            ("00000001", "success"), ("00000002", "failed"), ("00000003", "success")]
        # the write lock was released
        cur.execute("SELECT IS_FREE_LOCK(%s)", ("agentbase:" + mariadb_url.rsplit("/", 1)[1],))
        assert cur.fetchone()[0] == 1
        cur.execute("DROP TRIGGER refuse_boom")
    admin.close()
    # once the server takes it, a rerun imports that file and only that file
    proc = cli("import", str(tmp_path / "state"), "--server", "s", "--db", mariadb_url)
    assert proc.returncode == 0, proc.stderr
    assert "1 imported" in proc.stderr or "1 imported" in proc.stdout


def test_deferred_commit_error_is_raised_by_settle(mariadb_url):
    store = open_store(mariadb_url)
    admin = _refuse_boom(mariadb_url)
    try:
        row = {"id": 1, "session_id": 1, "message_uuid": "m1", "role": "user", "text_preview": "fine"}
        with store.transaction(defer=True):
            store.insert_rows("messages", [row])
            store.insert_rows("messages", [{**row, "id": 2, "message_uuid": "m2", "text_preview": "boom"}])
        with pytest.raises(Exception) as failure:
            store.settle()
        assert "refused" in str(failure.value)
        store.settle()  # reported once
        assert store.query("SELECT COUNT(*) FROM messages")[0][0] == 0
        with admin.cursor() as cur:
            cur.execute("SELECT IS_FREE_LOCK(%s)", (store.lock_name,))
            assert cur.fetchone()[0] == 1
        # the store goes on working
        with store.transaction(defer=True):
            store.insert_rows("messages", [row])
        store.settle()
        assert store.query("SELECT COUNT(*) FROM messages")[0][0] == 1
    finally:
        store.close()
        admin.close()


def test_incremental_runs_match_the_embedded_store(tmp_path, mariadb_url):
    # While MariaDB imports in the background, the writer's look-ups (a file's
    # parsed_files row, its session, the next ids) come from what the run
    # itself wrote. Rerun after appends, a rewrite with a changed entry, a
    # branch, a rename to .reset and a new session, in both stores: equal.
    root = tmp_path / "state"
    sd = sessions_dir(root)
    sd2 = sessions_dir(root, agent="ops")
    sids = [f"{n:08x}-0000-4000-8000-00000000000b" for n in range(1, 6)]
    convs = {sid: conversation(sid=sid, turns=3) for sid in sids}
    for sid in sids[:3]:
        write(sd / f"{sid}.jsonl", convs[sid])
    write(sd2 / f"{sids[3]}.jsonl", convs[sids[3]])
    urls = {"sqlite": f"sqlite:///{tmp_path / 'a.db'}", "mariadb": mariadb_url}

    def run_both():
        for url in urls.values():
            proc = cli("-v", "import", str(root), "--server", "s", "--db", url)
            assert proc.returncode == 0, proc.stderr
        # stored in the background with no failure to recover from
        assert "again after" not in proc.stderr
        assert dump_store(urls["mariadb"]) == dump_store(urls["sqlite"])
        _assert_links_hold(urls["mariadb"])

    run_both()
    # append to one file, rewrite another with one entry changed and a branch
    c = Chain(start=100, parent=convs[sids[0]][-1]["id"])
    write(sd / f"{sids[0]}.jsonl", convs[sids[0]] + [c.user("more"), c.assistant([{"type": "text", "text": "ok"}])])
    changed = [dict(o) for o in convs[sids[1]]]
    changed[2] = {**changed[2], "message": {**changed[2]["message"], "content": [{"type": "text", "text": "edited"}]}}
    b = Chain(start=200, parent=changed[1]["id"])
    write(sd / f"{sids[1]}.jsonl", changed + [b.user("branch")])
    # rename into a reset archive, and a new session in the other agent
    (sd / f"{sids[2]}.jsonl").rename(sd / f"{sids[2]}.jsonl.reset.2026-04-06T00-00-00.000Z")
    write(sd2 / f"{sids[4]}.jsonl", convs[sids[4]])
    run_both()
    store = open_store(mariadb_url)
    try:
        assert store.query("SELECT COUNT(*) FROM entry_revisions")[0][0] == 1
        assert store.query("SELECT COUNT(*) FROM sessions")[0][0] == 5
        assert store.query("SELECT COUNT(*) FROM messages WHERE is_active_path = 0")[0][0] > 0
    finally:
        store.close()
    run_both()  # nothing changed: a no-op in both


def _assert_links_hold(url):
    """The ids the importer assigned link the right rows (the dumps leave ids out)."""
    store = open_store(url)
    try:
        broken = {
            "message -> session": "SELECT COUNT(*) FROM messages m LEFT JOIN sessions s ON s.id = m.session_id "
                                  "WHERE s.session_uuid IS NULL OR s.session_uuid <> m.session_uuid",
            "call -> message": "SELECT COUNT(*) FROM tool_calls t LEFT JOIN messages m ON m.id = t.message_id "
                               "WHERE m.message_uuid IS NULL OR m.message_uuid <> t.message_uuid "
                               "OR m.session_id <> t.session_id",
            "call -> result": "SELECT COUNT(*) FROM tool_calls t JOIN messages m ON m.id = t.result_message_id "
                              "WHERE m.tool_call_id <> t.call_id OR m.session_id <> t.session_id",
            "entry -> session": "SELECT COUNT(*) FROM entries e LEFT JOIN sessions s ON s.id = e.session_id "
                                "WHERE s.session_uuid IS NULL OR s.session_uuid <> e.session_uuid",
        }
        assert {name: store.query(sql)[0][0] for name, sql in broken.items()} == dict.fromkeys(broken, 0)
        assert store.query("SELECT COUNT(*) FROM tool_calls WHERE result_message_id IS NOT NULL")[0][0] > 0
    finally:
        store.close()
