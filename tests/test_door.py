"""The door of the explorer (issue 22, section 4), against a real `agentbase serve` on a loopback port
or Datasette's own test client:

- the login throttle keys on the peer's address; X-Forwarded-For counts only from a proxy named with
  `--forwarded-allow-ips` (none by default), and then its right-most entry that is not a named proxy;
- every answer (HTML, JSON, static files, the login page, errors) carries Content-Security-Policy,
  X-Frame-Options and X-Content-Type-Options; a sort on a column that cannot be sorted is a 400;
- the snapshot's download is off unless `--setting allow_download on`; on, concurrent downloads of one
  version share one copy instead of one each.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import Served
from test_explorer import REPO, build_snapshot

PASSWORD = "door-test password 8"
VAR = "AGENTBASE_TEST_DOOR_PASSWORD"


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    return build_snapshot(tmp_path_factory.mktemp("door"))


class Serve(Served):
    """`python -m importer serve SNAPSHOT --port P [args]` (with the password, unless told) until stopped."""

    def __init__(self, snapshot: Path, tmp: Path, *args: str, password: bool = True, env: dict | None = None):
        full_env = {"AGENTBASE_CONFIG": str(tmp / "no-config.yml"), **(env or {})}
        if password:
            full_env[VAR] = PASSWORD
            args = (*args, "--password-env", VAR)
        super().__init__(snapshot, *args, env=full_env, ready="/-/static-plugins/agentbase/agentbase.css")

    def guess(self, forwarded_for: str | None, password: str = "a wrong password"):
        headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
        return self.request("POST", "/-/agentbase/login", {"password": password}, headers)


@pytest.fixture
def serve(snapshot, tmp_path):
    started = []

    def start(*args, **kw) -> Serve:
        s = Serve(snapshot, tmp_path, *args, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


# -- the throttle and X-Forwarded-For ------------------------------------------------------------------

def test_rotating_x_forwarded_for_does_not_reset_the_throttle_by_default(serve):
    # (a wrong guess is answered after 1 s, when its address's wait of 1 s is over: the second guess
    # gets a check, and waits 2 s; the third comes before that)
    server = serve(env={"FORWARDED_ALLOW_IPS": "127.0.0.1"})  # not even uvicorn's variable widens it
    assert [server.guess(f"203.0.113.{i}")[0] for i in (1, 2)] == [403, 403]
    for i in range(3, 7):  # every guess claims another client: all are the peer's, 127.0.0.1
        status, headers, text, seconds = server.guess(f"203.0.113.{i}")
        assert status == 429 and int(headers["retry-after"]) >= 1 and seconds < 0.5, (i, status)
    assert server.guess(None, PASSWORD)[0] == 429  # the peer itself waits too


def test_a_named_proxy_is_followed(serve):
    server = serve("--forwarded-allow-ips", "127.0.0.1, 10.0.0.0/8")
    assert [server.guess("203.0.113.1")[0] for _ in range(2)] == [403, 403]
    # that client waits, whatever it prepends: the right-most entry that is not a named proxy
    # (10.0.0.0/8 here) is the client
    assert server.guess("203.0.113.1")[0] == 429
    assert server.guess("198.51.100.7, 203.0.113.1")[0] == 429
    assert server.guess("198.51.100.7, 203.0.113.1, 10.1.2.3")[0] == 429
    # other clients behind the proxy get checks of their own, and the right password gets in
    assert server.guess("203.0.113.2")[0] == 403
    assert server.guess("203.0.113.1, 203.0.113.3")[0] == 403
    status, headers, _, _ = server.guess("203.0.113.4", PASSWORD)
    assert status == 302 and "ds_actor=" in (headers.get("set-cookie") or "")


@pytest.mark.parametrize("value", ["not-an-address", "127.0.0.1, bogus", "*"])
def test_forwarded_allow_ips_is_checked(snapshot, tmp_path, value):
    proc = subprocess.run([sys.executable, "-m", "importer", "serve", str(snapshot), "--forwarded-allow-ips",
                           value], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "AGENTBASE_CONFIG": str(tmp_path / "none.yml")})
    assert proc.returncode == 2 and "--forwarded-allow-ips" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()[-1]) < 300


# -- security headers ------------------------------------------------------------------------------------

class Client:
    """Datasette as `agentbase serve` configures it (optionally with a password), its test client."""

    def __init__(self, snapshot: Path, monkeypatch=None, password: bool = False, settings: dict | None = None):
        from datasette.app import Datasette
        from datasette_agentbase.serve import load_metadata, with_password

        metadata = load_metadata(snapshot)
        if password:
            monkeypatch.setenv(VAR, PASSWORD)
            metadata = with_password(metadata, VAR)
        self.ds = Datasette([str(snapshot)], metadata=metadata, template_dir=str(REPO / "templates"),
                            settings={"suggest_facets": False, **(settings or {})})
        asyncio.run(self.ds.invoke_startup())

    def get(self, path: str, **kw):
        return asyncio.run(self.ds.client.get(path, **kw))


@pytest.fixture(scope="module")
def client(snapshot) -> Client:
    return Client(snapshot)


PAGES = ["/", "/snapshot", "/snapshot/messages", "/snapshot/messages/1", "/snapshot/sessions",
         "/snapshot/exec_commands", "/snapshot/search?q=nginx", "/snapshot?sql=select+1", "/snapshot/tool_calls",
         "/-/agentbase/session/1", "/-/agentbase", "/-/metadata", "/-/versions", "/snapshot/no_such_table",
         "/snapshot/messages?_sort=content_blocks%20desc"]
DATA = ["/.json", "/snapshot/messages.json", "/snapshot/messages.csv", "/snapshot/exec_commands.json?_shape=array",
        "/-/versions.json", "/snapshot/messages.json?_sort=nope", "/-/static/app.css", "/-/static/table.js",
        "/-/static-plugins/agentbase/agentbase.css", "/-/static-plugins/agentbase/agentbase.js", "/-/agentbase/session/1.md",
        "/-/agentbase/session/1.json", "/-/agentbase/login"]


def _check_headers(r, path):
    csp = r.headers.get("content-security-policy")
    assert csp, path
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert directives["frame-ancestors"] == ["'none'"], path
    assert "'unsafe-inline'" not in directives["script-src"] and "'unsafe-eval'" not in directives["script-src"]
    assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff", path
    return directives


@pytest.mark.parametrize("path", PAGES + DATA)
def test_every_answer_has_the_security_headers(client, path):
    r = client.get(path)
    assert r.status_code in (200, 302, 400, 404), (path, r.status_code)
    _check_headers(r, path)


def _handlers(html: str) -> list:
    """Inline event handlers (on...= attributes) and javascript: URLs of a page, as a browser parses it."""
    from html.parser import HTMLParser

    found = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            for name, value in attrs:
                if name.startswith("on") or (value or "").strip().lower().startswith("javascript:"):
                    found.append((tag, name))

    Parser().feed(html)
    return found


def test_every_inline_script_is_allowed_and_nothing_else_inline_runs(client):
    # each page's inline <script> blocks are allowed by their hash; no on...= handler or javascript: URL
    import base64
    import hashlib
    import re

    pages = PAGES + ["/snapshot/messages?_facet=role", "/snapshot/agent_day?agent=main&day=2026-04-05",
                     "/snapshot/sessions?_sort_desc=id", "/snapshot/messages?_search=nginx"]
    seen = 0
    for path in pages:
        r = client.get(path)
        if "text/html" not in r.headers.get("content-type", ""):
            continue
        allowed = _check_headers(r, path)["script-src"]
        for attrs, body in re.findall(r"<script([^>]*)>(.*?)</script>", r.text, re.S):
            if "src=" in attrs:
                continue
            seen += 1
            digest = "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
            assert digest in allowed, (path, body[:80])
        handlers = _handlers(r.text)
        assert not handlers, (path, handlers[:3])
    assert seen >= len(pages)  # (every page closes its menus with an inline script: they were checked)


def test_the_login_page_and_the_export_have_the_headers(snapshot, monkeypatch):
    locked = Client(snapshot, monkeypatch, password=True)
    for path in ("/-/agentbase/login", "/snapshot", "/snapshot.json", "/-/static/app.css"):
        r = locked.get(path)
        assert r.status_code in (200, 302, 403), path
        _check_headers(r, path)
    open_site = Client(snapshot)
    r = open_site.get("/-/agentbase/session/1.html")
    assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
    directives = _check_headers(r, "export")
    assert directives["default-src"] == ["'none'"]  # the export's own policy, not the explorer's
    assert directives["script-src"][0] in r.text and directives["style-src"][0] in r.text  # (its <meta>'s)


# -- sorting -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("query, said", [
    ("_sort=content_blocks%20desc", "_sort_desc=content_blocks"),
    ("_sort=no_such_column", "no sortable column"),
    ("_sort_desc=no_such_column", "no sortable column"),
    ("_sort=id&_sort_desc=id", "not both"),
])
def test_a_sort_that_cannot_be_done_is_a_clear_400(client, query, said):
    html = client.get(f"/snapshot/messages?{query}")
    assert html.status_code == 400 and said in html.text and "text/html" in html.headers["content-type"]
    data = client.get(f"/snapshot/messages.json?{query}")
    assert data.status_code == 400 and said in data.json()["error"] and data.json()["status"] == 400
    assert client.get("/snapshot/messages.json?_sort_desc=content_blocks&_size=1").status_code == 200


# -- the download ------------------------------------------------------------------------------------------

def _download_fds(pid: int) -> set[int]:
    """The inodes of the download copies the server process has open."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if ".download-" in target:
                found.add(os.stat(f"/proc/{pid}/fd/{fd}").st_ino)
        except OSError:
            pass
    return found


def test_the_download_is_off_unless_asked(serve, snapshot):
    server = serve(password=False)
    status, _, text, _ = server.request("GET", "/snapshot.db")
    assert status == 403 and "forbidden" in text.lower()
    assert "Download" not in server.request("GET", "/snapshot")[2]  # (the database page offers none)
    assert serve("--no-sql", "--setting", "allow_download", "on", password=False).request(
        "GET", "/snapshot.db")[0] == 403  # --no-sql keeps it off


def test_slow_concurrent_downloads_share_one_copy(serve, tmp_path):
    import sqlite3

    snap = build_snapshot(tmp_path / "big")
    conn = sqlite3.connect(snap)  # a file larger than what sockets buffer: the clients below hold it
    conn.execute("CREATE TABLE padding (b BLOB)")
    conn.executemany("INSERT INTO padding VALUES (randomblob(1048576))", [()] * 24)
    conn.commit()
    conn.close()
    server = Serve(snap, tmp_path, "--setting", "allow_download", "on", password=False)
    clients = []
    try:
        for _ in range(5):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
            s.settimeout(30)
            s.connect(("127.0.0.1", server.port))
            s.sendall(b"GET /snapshot.db HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                head += s.recv(100)
            clients.append([s, head])
            time.sleep(0.2)
        time.sleep(1.0)  # every client has read a few bytes and pauses
        copies = _download_fds(server.proc.pid)
        left_on_disk = list(snap.parent.glob(".snapshot.db.download-*"))
        assert len(copies) == 1 and not left_on_disk, (len(copies), left_on_disk)
        bodies = []
        for s, head in clients:
            header, _, body = head.partition(b"\r\n\r\n")
            assert header.startswith(b"HTTP/1.1 200"), header[:100]
            length = int(re_header(header, b"content-length"))
            while len(body) < length:
                chunk = s.recv(1 << 20)
                assert chunk
                body += chunk
            bodies.append(body)
        assert len(set(bodies)) == 1 and len(bodies[0]) > 24 << 20
        (tmp_path / "got.db").write_bytes(bodies[0])
        got = sqlite3.connect(tmp_path / "got.db")
        assert got.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert got.execute("SELECT COUNT(*) FROM padding").fetchone()[0] == 24
        assert got.execute("SELECT COUNT(*) FROM messages").fetchone()[0] > 0
        got.close()
        deadline = time.time() + 10
        while _download_fds(server.proc.pid) and time.time() < deadline:
            time.sleep(0.1)
        assert not _download_fds(server.proc.pid)  # the last reader closed it
    finally:
        for s, _ in clients:
            s.close()
        server.stop()


def re_header(head: bytes, name: bytes) -> bytes:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    raise KeyError(name)


# -- the policy in a real browser --------------------------------------------------------------------------

def test_pages_run_under_the_policy_in_a_browser(snapshot):
    """Headless Chromium on `agentbase serve`: no page logs a Content-Security-Policy violation, and
    the scripts that the policy allows ran (the SQL editor, the table's column menus, the
    conversation view's, the menus' closer)."""
    import shutil
    import tempfile

    from conftest import serving
    from test_explorer_browser import CHROMEDRIVER, CHROMIUM, FLAGS, _missing

    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        _missing(f"Chromium not installed ({CHROMIUM}, {CHROMEDRIVER})")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed: pip install -e '.[test]'")
    os.environ.setdefault("SE_OFFLINE", "true")
    profile = tempfile.mkdtemp(prefix="agentbase-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    checks = {
        "/": "return !!document.querySelector('form')",
        "/-/agentbase/session/1": "return document.documentElement.outerHTML.length > 1000",
        "/-/agentbase": "return !!document.querySelector('svg, table')",
        "/snapshot": "return !!document.querySelector('.CodeMirror')",  # _codemirror_foot.html's inline script
        "/snapshot?sql=select+1": "return !!document.querySelector('.CodeMirror')",
        "/snapshot/messages": "return typeof DATASETTE_ALLOW_FACET !== 'undefined'"
                              " && !!document.querySelector('th .dropdown-menu-icon')",  # table.js
        "/snapshot/messages/1": "return true",
        "/snapshot/exec_commands": "return true",
        "/snapshot/messages?_sort=content_blocks%20desc": "return document.body.innerText.includes('_sort_desc=content_blocks')",
    }
    try:
        with serving(snapshot) as server:
            for path, script in checks.items():
                driver.get(server.base + path)
                time.sleep(0.3)
                assert driver.execute_script(script), path
                logs = driver.get_log("browser")
                violations = [e["message"] for e in logs if "Content Security Policy" in e["message"]
                              or "Refused to" in e["message"]]
                assert not violations, (path, violations[:3])
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
