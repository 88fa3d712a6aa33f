"""The store's batch (``store.batch``): the pipeline skips, submits and counts, and knows no
engine; MariaDB's deferred commits, their lookahead and their retry live behind it (real server)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pymysql

from transcripts import Chain, dump_store, header, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "importer"

# What only the store may know: its engines, that commits can be deferred, how they are tracked.
# (Words, not parts of words: ``usage_deferred`` is a kind's hook, "OpenClaw's SQLite store" a kind.)
ENGINE_WORDS = re.compile(r"mariadb|mysql|sqlite3|dialect|\bdefer\b|\bdefers?_|in_flight|last_commit|settle|busy|"
                          r"expect\(|prefetch|lookahead|backgroundfailure|\.kind\s*==", re.I)


def test_the_pipeline_names_no_engine():
    source = (PACKAGE / "pipeline.py").read_text(encoding="utf-8")
    assert ENGINE_WORDS.findall(source) == []
    # and reaches nothing of the store but its batch, its reads and its transactions
    used = {n.attr for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Attribute) and n.value.attr == "store"}
    used |= {n.attr for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute)
             and isinstance(n.value, ast.Name) and n.value.id == "store"}
    assert used <= {"batch", "transaction", "upsert_row", "tuples", "execute", "update"}, used


def test_only_the_batch_reads_a_units_prefetch_limit():
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "prefetch_limit" and isinstance(node.ctx, ast.Load):
                readers.add(path.relative_to(REPO).as_posix())
    assert readers == {"importer/store/batch.py", "importer/units.py"}


def _connect(url):
    from urllib.parse import urlsplit

    p = urlsplit(url)
    return pymysql.connect(host=p.hostname, port=p.port, user=p.username, password=p.password or "",
                           database=p.path.lstrip("/"), autocommit=True)


def _tree(root: Path, files: int, turns: int, fused: int) -> list[str]:
    """``files`` transcripts; the ``fused`` one's last line is the message the trigger refuses once."""
    sd = sessions_dir(root)
    sids = [f"{n:08x}-0000-4000-8000-00000000b000" for n in range(files)]
    for n, sid in enumerate(sids):
        c = Chain()
        lines = [header(sid)]
        for t in range(turns):
            lines += [c.user(f"question {t} of {n}"),
                      c.assistant([{"type": "text", "text": f"answer {t} of {n} " + "w" * 200}])]
        if n == fused:
            lines.append(c.user("refused once"))  # last: nothing reads the store after its insert
        write(sd / f"{sid}.jsonl", lines)
    return sids


def test_a_background_commit_failure_mid_import_ends_with_every_unit_archived_once(tmp_path, mariadb_url):
    # The server refuses one insert of the third file once, in the background (the sender thread
    # runs it while the importer parses the next files): that file and every file whose commit had
    # not landed run again, and the run ends as a clean one would, every file in once.
    root = tmp_path / "tree"
    sids = _tree(root, files=6, turns=150, fused=2)
    reference = f"sqlite:///{tmp_path / 'ref.db'}"
    ref = subprocess.run([sys.executable, "-m", "importer", "import", str(root), "--server", "s", "--db",
                          reference], cwd=REPO, capture_output=True, text=True)
    assert ref.returncode == 0, ref.stderr[-500:]
    subprocess.run([sys.executable, "-m", "importer", "init", "--db", mariadb_url], cwd=REPO, check=True,
                   capture_output=True)
    admin = _connect(mariadb_url)
    with admin.cursor() as cur:
        # The fuse is MyISAM: not transactional, so the refusal's rollback does not reset it.
        cur.execute("CREATE TABLE test_fuse (n INT) ENGINE=MyISAM")
        cur.execute("INSERT INTO test_fuse VALUES (0)")
        cur.execute(
            "CREATE TRIGGER refuse_once BEFORE INSERT ON messages FOR EACH ROW "
            "IF NEW.text_preview = 'refused once' AND (SELECT n FROM test_fuse) = 0 THEN "
            "UPDATE test_fuse SET n = 1; "
            "SIGNAL SQLSTATE '22001' SET MYSQL_ERRNO = 1406, MESSAGE_TEXT = 'refused by the test trigger'; "
            "END IF")
    try:
        proc = subprocess.run([sys.executable, "-m", "importer", "-v", "import", str(root), "--server", "s",
                               "--db", mariadb_url, "--json-summary"], cwd=REPO, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-500:]
        with admin.cursor() as cur:
            cur.execute("SELECT n FROM test_fuse")
            assert cur.fetchone()[0] == 1  # the refusal happened
            cur.execute("DROP TRIGGER refuse_once")
            cur.execute("DROP TABLE test_fuse")
            cur.execute("SELECT IS_FREE_LOCK(%s)", ("agentbase:" + mariadb_url.rsplit("/", 1)[1],))
            assert cur.fetchone()[0] == 1
    finally:
        admin.close()
    # met in the background, then the file ran again in the foreground
    again = re.findall(r"running (\S+) again after", proc.stderr)
    assert f"{sids[2]}.jsonl" in {Path(p).name for p in again}, proc.stderr[-800:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (summary["files_seen"], summary["files_imported"], summary["files_failed"]) == (6, 6, 0)
    assert summary["messages_added"] == 6 * 300 + 1
    # every file in once: the same rows as a clean import, none doubled, none lost
    assert dump_store(mariadb_url) == dump_store(reference)
    rerun = subprocess.run([sys.executable, "-m", "importer", "import", str(root), "--server", "s", "--db",
                            mariadb_url, "--json-summary"], cwd=REPO, capture_output=True, text=True)
    assert json.loads(rerun.stdout.strip().splitlines()[-1])["files_unchanged"] == 6
