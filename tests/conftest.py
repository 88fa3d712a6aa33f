"""Shared fixtures. Tests talk to real services: MariaDB on 127.0.0.1:3306."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ports import free_port  # noqa: E402  (tests/ports.py: for Served)

MARIADB = dict(host=os.environ.get("AGENTBASE_TEST_MYSQL_HOST", "127.0.0.1"),
               port=int(os.environ.get("AGENTBASE_TEST_MYSQL_PORT", "3306")),
               user=os.environ.get("AGENTBASE_TEST_MYSQL_USER", "root"),
               password=os.environ.get("AGENTBASE_TEST_MYSQL_PASSWORD", ""))
RUN_PREFIX = f"agentbase_t{os.getpid()}_"


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pytest.ini): one worker per CPU this process may use, at most 4 (each worker's tests
    start servers, exports of two processes and Chromium: more would contend for MariaDB and disk)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


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


# -- agentbase serve, on a loopback port ---------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


class Served:
    """`python -m importer serve SNAPSHOT --port P [args]` started on a free loopback port, answering
    (``ready`` gave a 200) when made; ``stop()`` ends it. ``env`` adds to (a None value removes from)
    the environment; ``output``: (stdout, stderr) file paths instead of nothing and a pipe."""

    def __init__(self, snapshot: Path, *args: str, env: dict | None = None, ready: str = "/-/versions.json",
                 output: tuple[Path, Path] | None = None, timeout: float = 60):
        import subprocess
        import time

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        full_env = dict(os.environ)
        for key, value in (env or {}).items():
            if value is None:
                full_env.pop(key, None)
            else:
                full_env[key] = value
        command = [sys.executable, "-m", "importer", "serve", str(snapshot), "--port", str(self.port), *args]
        self.output = output
        if output:
            with open(output[0], "w") as out, open(output[1], "w") as err:
                self.proc = subprocess.Popen(command, cwd=REPO, env=full_env, stdout=out, stderr=err)
        else:
            self.proc = subprocess.Popen(command, cwd=REPO, env=full_env, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        deadline = time.time() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"agentbase serve exited: {self.errors()[-800:]}")
            try:
                if self.request("GET", ready)[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                self.stop()
                pytest.fail(f"agentbase serve did not answer within {timeout:.0f} s")
            time.sleep(0.1)

    def errors(self) -> str:
        """What the server wrote to stderr (once it has stopped, when piped)."""
        if self.output:
            return Path(self.output[1]).read_text(errors="replace")
        return self.proc.stderr.read() if self.proc.poll() is not None else ""

    def request(self, method: str, path: str, body: dict | None = None, headers: dict | None = None, *,
                source: str = "127.0.0.1", cookies: dict | None = None, sent=None, timeout: float = 10):
        """(status, headers, text, seconds): one request on a new connection from ``source`` (a loopback
        address); ``body``: a form; ``sent``: an event set once the request is sent."""
        import http.client
        import time
        from urllib.parse import urlencode

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout, source_address=(source, 0))
        try:
            conn.connect()
            if conn.sock.getsockname() == conn.sock.getpeername():
                raise ConnectionRefusedError(f"nothing listens on port {self.port}: this end met itself")
            given = dict(headers or {})
            if body is not None:
                given["Content-Type"] = "application/x-www-form-urlencoded"
            if cookies:
                given["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
            started = time.perf_counter()
            conn.request(method, path, body=urlencode(body) if body is not None else None, headers=given)
            if sent is not None:
                sent.set()
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
            return response.status, response.headers, text, time.perf_counter() - started
        finally:
            conn.close()

    def stop(self) -> None:
        import subprocess

        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def serving(snapshot: Path, *args: str, **kw):
    """`agentbase serve SNAPSHOT [args]` for the length of a ``with`` block: yields the :class:`Served`
    (``.base`` its URL), stopped at the end whatever happens."""
    import contextlib

    @contextlib.contextmanager
    def run():
        server = Served(snapshot, *args, **kw)
        try:
            yield server
        finally:
            server.stop()

    return run()
