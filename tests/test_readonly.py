"""The one read-only SQLite opener of the kinds (importer/sources/readonly.py): every kind that
reads a live database opens it through it, with the same rules: its own tables and the schema
readable, every other table (the credential tables first) refused by SQLite itself, no writes, no
ATTACH, no temporary objects, only a few pragmas."""

from __future__ import annotations

import sqlite3

import pytest

from importer.sources import agent_server as A
from importer.sources import openclaw_db, readonly
from importer.units import SourceError

# (the kind's opener, a table it reads, a credential table of its kind)
KINDS = {
    "agent-server": (A.connect_readonly, "events", "api_keys"),
    "openclaw-store": (openclaw_db.connect_readonly, "transcript_events", "auth_profile_store"),
}


def _database(path, readable: str, secret: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE {readable} (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute(f"INSERT INTO {readable} (body) VALUES ('kept')")
    conn.execute(f"CREATE TABLE {secret} (id INTEGER PRIMARY KEY, value TEXT)")
    conn.execute(f"INSERT INTO {secret} (value) VALUES ('made-up-credential')")
    conn.commit()
    conn.close()


def _refused(conn, sql: str) -> None:
    with pytest.raises(sqlite3.DatabaseError):
        conn.execute(sql).fetchall()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_opens_with_the_same_rules(tmp_path, kind):
    connect, readable, secret = KINDS[kind]
    path = tmp_path / "live.db"
    _database(path, readable, secret)
    conn = connect(str(path))
    try:
        assert conn.execute(f"SELECT body FROM {readable}").fetchall() == [("kept",)]
        # The schema of a readable table, in either pragma (the two openers once disagreed on table_xinfo).
        assert [r[1] for r in conn.execute(f"PRAGMA table_info({readable})")] == ["id", "body"]
        assert [r[1] for r in conn.execute(f"PRAGMA table_xinfo({readable})")] == ["id", "body"]
        for sql in (f"SELECT value FROM {secret}", f"SELECT (SELECT COUNT(*) FROM {secret})",
                    f"SELECT r.body FROM {readable} r JOIN {secret} s ON s.id = r.id",
                    f"PRAGMA table_info({secret})", f"PRAGMA table_xinfo({secret})",
                    f"DELETE FROM {readable}", f"INSERT INTO {readable} (body) VALUES ('x')",
                    "ATTACH DATABASE ':memory:' AS other", "CREATE TEMP TABLE t (x)",
                    "PRAGMA writable_schema = ON"):
            _refused(conn, sql)
    finally:
        conn.close()
    # Nothing was written to the database.
    check = sqlite3.connect(path)
    assert check.execute(f"SELECT body FROM {readable}").fetchall() == [("kept",)]
    check.close()


def test_the_opener_reads_only_what_it_is_given(tmp_path):
    path = tmp_path / "live.db"
    _database(path, "events", "settings")
    conn = readonly.connect(path, frozenset({"events"}))
    try:
        assert conn.execute("SELECT COUNT(*) FROM events").fetchone() == (1,)
        assert conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall() == [("events",), ("settings",)]
        _refused(conn, "SELECT * FROM settings")
    finally:
        conn.close()
    conn = readonly.connect(path, frozenset())
    try:
        _refused(conn, "SELECT * FROM events")
    finally:
        conn.close()


def test_a_database_that_cannot_be_opened_is_one_line_naming_it(tmp_path):
    missing = tmp_path / "nowhere" / "agent.db"
    with pytest.raises(SourceError) as err:
        A.connect_readonly(str(missing))
    assert str(missing) in str(err.value) and "\n" not in str(err.value)
    # A kind's own error class is kept (OpenClaw's store raises its own SourceError subclass).
    with pytest.raises(openclaw_db.SourceError):
        openclaw_db.connect_readonly(missing)
    not_sqlite = tmp_path / "notes.db"
    not_sqlite.write_bytes(b"plain text, not a database\n" * 100)
    with pytest.raises(SourceError):
        readonly.connect(not_sqlite, frozenset({"events"}))
