"""Shared fixtures. Tests talk to real services: MariaDB on 127.0.0.1:3306."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

MARIADB = dict(host=os.environ.get("AGENTBASE_TEST_MYSQL_HOST", "127.0.0.1"),
               port=int(os.environ.get("AGENTBASE_TEST_MYSQL_PORT", "3306")),
               user=os.environ.get("AGENTBASE_TEST_MYSQL_USER", "root"),
               password=os.environ.get("AGENTBASE_TEST_MYSQL_PASSWORD", ""))
RUN_PREFIX = f"agentbase_t{os.getpid()}_"


def _admin():
    import pymysql

    return pymysql.connect(autocommit=True, connect_timeout=5, **MARIADB)


@pytest.fixture(scope="session")
def mariadb_server():
    """The MariaDB server; missing under CI=true is a failure, elsewhere a skip."""
    try:
        conn = _admin()
    except Exception as exc:  # pymysql missing or server down
        message = f"MariaDB not reachable at {MARIADB['host']}:{MARIADB['port']}: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    yield conn
    with conn.cursor() as cur:  # drop whatever a crashed test left behind
        cur.execute("SHOW DATABASES LIKE %s", (RUN_PREFIX + "%",))
        for (name,) in cur.fetchall():
            cur.execute(f"DROP DATABASE `{name}`")
    conn.close()


@pytest.fixture
def mariadb_url(mariadb_server):
    """A fresh, empty database for one test, dropped afterwards."""
    name = RUN_PREFIX + uuid.uuid4().hex[:8]
    with mariadb_server.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    auth = MARIADB["user"] + (f":{MARIADB['password']}" if MARIADB["password"] else "")
    yield f"mysql://{auth}@{MARIADB['host']}:{MARIADB['port']}/{name}"
    mariadb_server.ping()
    with mariadb_server.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
