"""Access to the explorer: with a password (`agentbase serve --password-env VAR`, or the config file's
serve: section) every page is behind /-/agentbase/login; `--no-sql` turns off arbitrary SQL while the
canned queries stay. Through Datasette's test client, configured as `agentbase serve` configures it.
The browser test is in test_explorer_browser.py."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Served
from test_explorer import REPO, build_snapshot, link

PASSWORD = "tr0ub4dor & 3 部署"  # spaces, an ampersand and Chinese: form-encoded on the way in
VAR = "AGENTBASE_TEST_EXPLORER_PASSWORD"

# every kind of page: instance, database, table, row, canned query, arbitrary SQL, each as HTML and JSON
# (CSV too), the download, Datasette's own /-/ pages, the conversation view and the dashboard
HTML_PAGES = ["/", "/snapshot", "/snapshot/messages", "/snapshot/messages/1", "/snapshot/sessions",
              "/snapshot/exec_commands", "/snapshot/search?q=nginx", "/snapshot?sql=select+1",
              "/-/agentbase/session/1", "/-/agentbase", "/-/agentbase?days=all", "/snapshot.db", "/-/metadata",
              "/-/databases", "/-/plugins", "/-/actor"]
DATA_PAGES = ["/.json", "/snapshot.json", "/snapshot/messages.json", "/snapshot/messages/1.json",
              "/snapshot/messages.csv", "/snapshot/exec_commands.json?_shape=array",
              "/snapshot/search.json?q=nginx", "/snapshot.json?sql=select+1", "/snapshot.csv?sql=select+1",
              "/-/versions.json", "/-/metadata.json", "/-/databases.json", "/-/plugins.json",
              "/-/settings.json", "/-/actor.json", "/-/threads.json"]


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    return build_snapshot(tmp_path_factory.mktemp("access"))


class LockedSite:
    """Datasette as `agentbase serve --password-env VAR [--no-sql]` configures it."""

    def __init__(self, snapshot: Path, monkeypatch, password: str = PASSWORD, no_sql: bool = False,
                 secret: str | None = None):
        from datasette.app import Datasette
        from datasette_agentbase.serve import NO_SQL_SETTINGS, load_metadata, with_password

        monkeypatch.setenv(VAR, password)
        settings = {"suggest_facets": False}
        if no_sql:  # as the command line gives them (strings) become, in Datasette's own settings
            settings.update({k: v != "off" for k, v in NO_SQL_SETTINGS.items()})
        self.metadata = with_password(load_metadata(snapshot), VAR)
        self.ds = Datasette([str(snapshot)], metadata=self.metadata,
                            template_dir=str(REPO / "templates"), settings=settings, secret=secret)
        asyncio.run(self.ds.invoke_startup())
        self.cookies: dict[str, str] = {}

    def get(self, path: str, **kw):
        return asyncio.run(self.ds.client.get(path, cookies=self.cookies, **kw))

    def login(self, password: str = PASSWORD, next_path: str = "/"):
        page = asyncio.run(self.ds.client.get("/-/agentbase/login"))
        assert page.status_code == 200
        token = re.search(r'name="csrftoken" value="([^"]+)"', page.text).group(1)
        response = asyncio.run(self.ds.client.post(
            "/-/agentbase/login", data={"password": password, "csrftoken": token, "next": next_path},
            cookies={"ds_csrftoken": page.cookies["ds_csrftoken"]}))
        if "ds_actor" in response.cookies:
            self.cookies["ds_actor"] = response.cookies["ds_actor"]
        return response


@pytest.fixture
def locked(snapshot, monkeypatch) -> LockedSite:
    return LockedSite(snapshot, monkeypatch)


def test_metadata_names_the_variable_never_the_password(locked):
    assert locked.metadata["plugins"]["datasette-agentbase"] == {"password": {"$env": VAR}}
    assert PASSWORD not in json.dumps(locked.metadata, ensure_ascii=False)


@pytest.mark.parametrize("path", HTML_PAGES)
def test_anonymous_html_goes_to_the_login_page(locked, path):
    from urllib.parse import quote

    r = locked.get(path)
    assert r.status_code == 302, (path, r.status_code)
    assert r.headers["location"] == "/-/agentbase/login?next=" + quote(path, safe="")
    assert "ds_actor" not in r.cookies


@pytest.mark.parametrize("path", DATA_PAGES)
def test_anonymous_data_is_refused(locked, path):
    r = locked.get(path)
    assert r.status_code == 403, (path, r.status_code)
    assert r.json()["title"] == "Login required"
    assert "aaaaaaaa" not in r.text and "quokka" not in r.text and "df -h" not in r.text


def test_login_page_itself_and_the_stylesheet_are_open(locked):
    page = locked.get("/-/agentbase/login?next=/snapshot")
    assert page.status_code == 200 and 'type="password"' in page.text and 'method="post"' in page.text
    assert 'name="next" value="/snapshot"' in page.text
    assert "aaaaaaaa" not in page.text and "snapshot/messages" not in page.text  # no data, no table list
    assert locked.get("/-/static-plugins/agentbase/agentbase.css").status_code == 200


def test_wrong_password_is_refused_slowly(locked):
    started = time.perf_counter()
    r = locked.login("tr0ub4dor & 3")
    assert r.status_code == 403 and "Wrong password" in r.text
    assert time.perf_counter() - started >= 0.9  # FAILED_LOGIN_DELAY: one guess a second
    assert "ds_actor" not in r.cookies and locked.get("/snapshot").status_code == 302
    assert locked.login("").status_code == 403


def test_login_with_a_wrong_csrf_token_is_refused(locked):
    # a browser that has a CSRF cookie must send its token (Datasette's asgi-csrf); a client without
    # cookies (a script) is no CSRF victim and may post the form directly
    r = asyncio.run(locked.ds.client.post("/-/agentbase/login", data={"password": PASSWORD, "csrftoken": "x"},
                                          cookies={"ds_csrftoken": "y"}))
    assert r.status_code == 403 and "ds_actor" not in r.cookies
    r = asyncio.run(locked.ds.client.post("/-/agentbase/login", data={"password": PASSWORD}))
    assert r.status_code == 302 and "ds_actor" in r.cookies


def test_right_password_opens_every_page(locked):
    r = locked.login(next_path="/-/agentbase/session/1")
    assert r.status_code == 302 and r.headers["location"] == "/-/agentbase/session/1"
    set_cookie = r.headers["set-cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=lax" in set_cookie and "Max-Age=604800" in set_cookie
    assert PASSWORD not in set_cookie and "tr0ub4dor" not in r.text
    for path in HTML_PAGES + DATA_PAGES:
        assert locked.get(path).status_code == 200, path
    html = locked.get("/-/agentbase/session/1").text
    assert "aaaaaaaa-0000-4000-8000-00000000000a" in html and "df -h /srv" in html
    rows = locked.get("/snapshot/exec_commands.json?_shape=array").json()
    assert [r["command"] for r in rows][0] == "tail -n 5 /var/log/quokka.log"
    actor = locked.get("/-/actor.json").json()["actor"]
    assert actor["id"] == "agentbase" and PASSWORD not in json.dumps(actor, ensure_ascii=False)
    # /-/metadata shows where the password comes from, not what it is
    assert PASSWORD not in locked.get("/-/metadata.json").text
    assert locked.get("/-/agentbase/login").headers.get("location") == "/"  # already in: go on
    assert "Log out" in locked.get("/").text  # Datasette's own logout (it clears the cookie)


def test_next_stays_on_this_site(locked):
    for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"):
        assert locked.login(next_path=target).headers["location"] == "/", target


def test_forged_stale_and_foreign_cookies_are_refused(snapshot, monkeypatch, locked):
    site = LockedSite(snapshot, monkeypatch, secret="s1")
    site.login()
    assert site.get("/snapshot").status_code == 200
    cookie = site.cookies["ds_actor"]
    # the same cookie on a server with another password (same secret): logged out
    other = LockedSite(snapshot, monkeypatch, password="another password", secret="s1")
    other.cookies["ds_actor"] = cookie
    assert other.get("/snapshot").status_code == 302
    # a server with another secret does not accept it at all
    locked.cookies["ds_actor"] = cookie
    assert locked.get("/snapshot").status_code == 302
    # an actor signed by this server but not logged in with the password (e.g. another plugin's): refused
    for actor in ({"id": "agentbase"}, {"id": "root"}, {"id": "agentbase", "agentbase_key": "0" * 64}):
        site.cookies["ds_actor"] = site.ds.sign({"a": actor}, "actor")
        assert site.get("/snapshot.json").status_code == 403, actor
    site.cookies["ds_actor"] = cookie[:-2] + ("A" if cookie[-2] != "A" else "B") + cookie[-1]  # tampered
    assert site.get("/snapshot").status_code == 302


def test_a_restart_logs_everyone_out(snapshot, monkeypatch):
    # logins live in the server's memory: the same secret and the same password do not bring them back
    site = LockedSite(snapshot, monkeypatch, secret="s1")
    site.login()
    restarted = LockedSite(snapshot, monkeypatch, secret="s1")
    restarted.cookies["ds_actor"] = site.cookies["ds_actor"]
    assert site.get("/snapshot").status_code == 200 and restarted.get("/snapshot").status_code == 302


# -- the door: the password's hash, logging out, failed logins ------------------------------------------

def _values(obj, depth=3):
    """Every value an object holds, through its attributes, containers and their attributes."""
    if isinstance(obj, (bytes, str, int, float, bool)) or obj is None:
        yield obj
        return
    if depth == 0:
        return
    items = (obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple, set))
             else vars(obj).items() if hasattr(obj, "__dict__") else ())
    for key, value in items:
        yield key
        yield from _values(value, depth - 1)


def test_the_password_is_kept_as_a_salted_slow_hash(snapshot, monkeypatch, locked):
    import base64
    import hashlib

    from datasette_agentbase.access import gate

    encoded = gate(locked.ds).password_hash
    algorithm, iterations, salt, digest = encoded.split("$")
    salt, digest = base64.b64decode(salt), base64.b64decode(digest)
    assert algorithm == "pbkdf2_sha256" and int(iterations) >= 480_000 and len(salt) >= 16
    assert hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), salt, int(iterations)) == digest
    # a salt made at each start: the same password never gives the same hash twice
    again = LockedSite(snapshot, monkeypatch)
    assert gate(again.ds).password_hash.split("$")[2:] != encoded.split("$")[2:]
    # nothing the gate holds is the password or a plain digest of it
    plain = PASSWORD.encode()
    unsalted = {hashlib.sha256(plain).digest(), hashlib.sha256(plain).hexdigest()}
    locked.login()
    for value in _values(gate(locked.ds)):
        assert value not in unsalted and value != PASSWORD and value != plain
    assert locked.get("/snapshot").status_code == 200  # and the login still works


def test_checking_a_password_does_not_hold_up_other_requests(locked):
    # the slow hash runs in a thread: the event loop goes on (a page is served) while it is checked
    async def scenario():
        ticks = []
        done = asyncio.Event()

        async def tick():
            while not done.is_set():
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.002)

        async def log_in():
            started = time.perf_counter()
            r = await locked.ds.client.post("/-/agentbase/login", data={"password": PASSWORD})
            ticks.append(time.perf_counter())
            done.set()
            return r, started, ticks[-1]

        async def page():
            await asyncio.sleep(0.01)
            r = await locked.ds.client.get("/-/static-plugins/agentbase/agentbase.css")
            return r, time.perf_counter()

        ticker = asyncio.create_task(tick())
        (login, started, finished), (css, css_done) = await asyncio.gather(log_in(), page())
        await ticker
        ticks.sort()
        return login, finished - started, css, css_done < finished, max(b - a for a, b in zip(ticks, ticks[1:]))

    login, took, css, css_first, longest_gap = asyncio.run(scenario())
    assert login.status_code == 302 and "ds_actor" in login.cookies and css.status_code == 200
    assert took >= 0.03  # the check is slow (PBKDF2)...
    assert longest_gap < took / 2 and css_first  # ... but the loop went on meanwhile: the page came first


def _csrf(page_text: str) -> str:
    return re.search(r'name="csrftoken" value="([^"]+)"', page_text).group(1)


def test_logging_out_ends_the_session(locked):
    locked.login()
    captured = locked.cookies["ds_actor"]
    assert locked.get("/snapshot").status_code == 200 and locked.get("/snapshot.json").status_code == 200
    home = locked.get("/").text
    assert '<form action="/-/logout" method="post">' in home  # the menu's "Log out" posts to /-/logout
    page = locked.get("/-/logout")
    assert page.status_code == 200 and "Log out" in page.text
    cookies = {**locked.cookies, "ds_csrftoken": page.cookies["ds_csrftoken"]}
    # a forged logout (wrong CSRF token) is refused and changes nothing
    r = asyncio.run(locked.ds.client.post("/-/logout", data={"csrftoken": "x"}, cookies=cookies))
    assert r.status_code == 403 and locked.get("/snapshot").status_code == 200
    r = asyncio.run(locked.ds.client.post("/-/logout", data={"csrftoken": _csrf(page.text)}, cookies=cookies))
    assert r.status_code == 302 and r.headers["location"] == "/"
    assert 'ds_actor=""' in r.headers["set-cookie"] or "ds_actor=;" in r.headers["set-cookie"]
    # the cookie captured before logging out is refused: on HTML, JSON and CSV pages alike
    replay = {"ds_actor": captured}
    assert asyncio.run(locked.ds.client.get("/snapshot", cookies=replay)).status_code == 302
    assert asyncio.run(locked.ds.client.get("/snapshot/messages.json", cookies=replay)).status_code == 403
    assert asyncio.run(locked.ds.client.get("/snapshot/messages.csv", cookies=replay)).status_code == 403
    assert asyncio.run(locked.ds.client.get("/-/agentbase/session/1", cookies=replay)).status_code == 302
    # logging in again opens a new session; the old cookie stays refused
    locked.cookies.clear()
    locked.login()
    assert locked.cookies["ds_actor"] != captured and locked.get("/snapshot.json").status_code == 200
    assert asyncio.run(locked.ds.client.get("/snapshot.json", cookies=replay)).status_code == 403


def test_no_password_keeps_datasettes_own_logout(snapshot):
    from datasette.app import Datasette
    from datasette_agentbase.serve import load_metadata

    ds = Datasette(immutables=[str(snapshot)], metadata=load_metadata(snapshot))
    asyncio.run(ds.invoke_startup())
    cookie = ds.sign({"a": {"id": "someone"}}, "actor")
    page = asyncio.run(ds.client.get("/-/logout", cookies={"ds_actor": cookie}))
    r = asyncio.run(ds.client.post("/-/logout", data={"csrftoken": _csrf(page.text)},
                                   cookies={"ds_actor": cookie, "ds_csrftoken": page.cookies["ds_csrftoken"]}))
    assert r.status_code == 302 and "ds_actor" in r.headers["set-cookie"]


def test_failed_logins_count_per_address_and_ipv6_per_64(locked):
    # one address's wrong guess holds back that address (and its /64), not another one
    import httpx

    async def post(host: str, password: str = "wrong password"):
        transport = httpx.ASGITransport(app=locked.ds.app(), client=(host, 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            started = time.perf_counter()
            r = await client.post("/-/agentbase/login", data={"password": password})
            return r.status_code, time.perf_counter() - started, r.headers.get("retry-after")

    async def later(*args):
        await asyncio.sleep(0.3)  # while the first guess is answered (its second)
        return await post(*args)

    async def scenario():
        return await asyncio.gather(post("2001:db8::1"), later("2001:db8::ffff", PASSWORD),
                                    later("2001:db8:0:1::1"), later("::ffff:192.0.2.1"))

    first, same_64, other_64, v4 = asyncio.run(scenario())
    assert first[0] == 403 and first[1] >= 0.9
    assert same_64[0] == 429 and same_64[1] < 0.5 and int(same_64[2]) >= 1  # even the right password: wait
    assert other_64[0] == 403 and v4[0] == 403


def test_the_table_of_addresses_is_bounded():
    from datasette_agentbase.access import Throttle

    throttle = Throttle(size=100)
    for i in range(1000):  # a flood from many addresses: the least recently seen are dropped
        address = f"10.0.{i // 256}.{i % 256}"
        throttle.finish(address, throttle.start(address), right=False)
        assert throttle.wait(address) > 0.5
    assert len(throttle) == 100
    throttle.finish("10.9.9.9", throttle.start("10.9.9.9"), right=True)  # the right password: forgotten
    assert len(throttle) == 99 and throttle.wait("10.9.9.9") == 0


def test_the_table_of_sessions_is_bounded():
    from datasette_agentbase.access import Sessions

    sessions = Sessions(size=3)
    opened = [sessions.open() for _ in range(5)]
    assert len(sessions) == 3 and [sessions.is_live(s) for s in opened] == [False, False, True, True, True]
    sessions.close(opened[-1])
    assert not sessions.is_live(opened[-1]) and len(sessions) == 2


# -- the door over real HTTP: `agentbase serve`, clients from several loopback addresses ------------------

class Server(Served):
    """`agentbase serve SNAPSHOT --password-env VAR` (no Datasette secret given), answering requests from any
    loopback address."""

    def __init__(self, snapshot: Path, tmp: Path):
        super().__init__(snapshot, "--password-env", VAR, ready="/-/agentbase/login", timeout=30,
                         env={VAR: PASSWORD, "AGENTBASE_CONFIG": str(tmp / "no-config.yml"), "DATASETTE_SECRET": None})

    def login(self, source: str, password: str = PASSWORD, **kw):
        return self.request("POST", "/-/agentbase/login", {"password": password}, source=source, **kw)


def _cookie(headers, name: str) -> str | None:
    from http.cookies import SimpleCookie

    for value in headers.get_all("set-cookie") or []:
        jar = SimpleCookie()
        jar.load(value)
        if name in jar:
            return jar[name].value
    return None


@pytest.fixture(scope="module")
def server(snapshot, tmp_path_factory):
    import socket

    try:
        with socket.create_connection(("127.0.0.1", 9), timeout=1, source_address=("127.0.0.2", 0)):
            pass
    except ConnectionRefusedError:
        pass  # 127.0.0.2 is usable as a source (nothing listens on port 9)
    except OSError as exc:
        pytest.skip(f"no second loopback address here: {exc}")
    s = Server(snapshot, tmp_path_factory.mktemp("server"))
    yield s
    s.stop()


def test_a_flood_of_wrong_guesses_does_not_keep_the_right_user_out(server):
    import threading
    from collections import Counter

    answers = []
    sent = [threading.Event() for _ in range(15)]
    # what one right login costs on this machine now (a shared machine is slow at times): the flood
    # must not make the right user wait for more than a few of them (15 checks in turn would)
    base = min(server.login("127.0.0.9", timeout=10)[3] for _ in range(2))

    def guess(event):
        status, _, _, seconds = server.login("127.0.0.2", "wrong password", sent=event)
        answers.append(status)

    threads = [threading.Thread(target=guess, args=(e,)) for e in sent]
    for t in threads:
        t.start()
    for e in sent:
        e.wait(10)
    time.sleep(0.1)
    status, headers, _, seconds = server.login("127.0.0.3", timeout=5)  # the right user, from elsewhere
    flooded = server.login("127.0.0.2", PASSWORD)  # meanwhile the flooding address waits, password or not
    for t in threads:
        t.join(10)
    assert status == 302 and _cookie(headers, "ds_actor") and seconds < max(1.0, 3 * base), (status, seconds, base)
    assert flooded[0] == 429 and "try again in" in flooded[2] and int(flooded[1]["retry-after"]) >= 1
    # the flood itself got one check: the others were turned away at once
    assert Counter(answers)[403] == 1 and Counter(answers)[429] == 14, Counter(answers)


def test_wrong_guesses_from_one_address_back_off(server):
    first = server.login("127.0.0.4", "wrong password")
    second = server.login("127.0.0.4", "wrong password 2")
    third = server.login("127.0.0.4", "wrong password 3")
    assert first[0] == 403 and first[3] >= 0.9 and second[0] == 403  # one a second
    assert third[0] == 429 and int(third[1]["retry-after"]) >= 1  # then 2 s, 4 s, ...


def test_logging_out_over_http_ends_the_session(server):
    status, headers, _, _ = server.login("127.0.0.5")
    captured = {"ds_actor": _cookie(headers, "ds_actor")}
    assert status == 302 and server.request("GET", "/snapshot.json", cookies=captured)[0] == 200
    status, headers, text, _ = server.request("GET", "/-/logout", cookies=captured)
    token = _cookie(headers, "ds_csrftoken")
    status, headers, _, _ = server.request("POST", "/-/logout", body={"csrftoken": _csrf(text)},
                                           cookies={**captured, "ds_csrftoken": token})
    assert status == 302 and _cookie(headers, "ds_actor") == ""
    assert server.request("GET", "/snapshot", cookies=captured)[0] == 302  # HTML: back to the login page
    assert server.request("GET", "/snapshot.json", cookies=captured)[0] == 403  # JSON: refused


def test_missing_password_stops_the_server(snapshot, monkeypatch):
    from datasette.app import Datasette
    from datasette_agentbase.access import AccessConfigError
    from datasette_agentbase.serve import load_metadata, with_password

    monkeypatch.delenv(VAR, raising=False)
    ds = Datasette(immutables=[str(snapshot)], metadata=with_password(load_metadata(snapshot), VAR))
    with pytest.raises(AccessConfigError) as exc:
        asyncio.run(ds.invoke_startup())
    assert VAR not in str(exc.value)


def test_a_datasette_that_ignores_the_permission_hook_is_refused(locked, monkeypatch):
    from datasette_agentbase.access import AccessConfigError, verify

    async def always(*args, **kwargs):
        return True

    asyncio.run(verify(locked.ds))  # this Datasette applies the login
    monkeypatch.setattr(locked.ds, "permission_allowed", always)
    with pytest.raises(AccessConfigError):
        asyncio.run(verify(locked.ds))


def test_no_password_no_login(snapshot):
    from datasette.app import Datasette
    from datasette_agentbase.serve import load_metadata

    ds = Datasette(immutables=[str(snapshot)], metadata=load_metadata(snapshot))
    asyncio.run(ds.invoke_startup())
    assert asyncio.run(ds.client.get("/snapshot/exec_commands")).status_code == 200
    assert asyncio.run(ds.client.get("/-/agentbase/login")).status_code == 302


# -- --no-sql ------------------------------------------------------------------------------------------

def test_no_sql_blocks_sql_but_not_the_canned_queries(snapshot, monkeypatch):
    site = LockedSite(snapshot, monkeypatch, no_sql=True)
    site.login()
    for path in ("/snapshot?sql=select+1", "/snapshot.json?sql=select+1", "/snapshot.csv?sql=select+1",
                 "/snapshot/messages?_where=id>1", "/snapshot/messages.json?_where=id>1", "/snapshot.db"):
        assert site.get(path).status_code == 403, path
    assert '<textarea id="sql-editor"' not in site.get("/snapshot").text
    # the canned queries, their JSON and paging, tables, rows, search, the conversation view, the dashboard
    rows = site.get("/snapshot/exec_commands.json?_shape=array&agent=main&day=2026-04-05").json()
    assert [r["command"] for r in rows] == ["df -h /srv", "systemctl restart nginx"]
    page = site.get("/snapshot/agent_day?agent=main&day=2026-04-05&limit=2")
    assert page.status_code == 200 and "Next page" in page.text
    assert "Edit SQL" not in page.text
    from urllib.parse import quote

    assert [link(r["message"])[1] for r in site.get(
        "/snapshot/search.json?_shape=array&q=" + quote("部署")).json()] == ["#7", "#1"]
    for path in ("/snapshot/messages", "/snapshot/messages.json?_search=nginx", "/snapshot/messages/1",
                 "/snapshot/daily_cost", "/snapshot/failed_tools", "/snapshot/thinking",
                 "/-/agentbase/session/1", "/-/agentbase"):
        assert site.get(path).status_code == 200, path


# -- the command line and the config file -------------------------------------------------------------------

def run_serve(args: list[str], env: dict) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "importer", "serve", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env})


@pytest.mark.parametrize("env, message", [
    ({}, "is not set or empty"),
    ({VAR: ""}, "is not set or empty"),
    ({VAR: "short"}, "shorter than 8 characters"),
])
def test_serve_refuses_a_missing_or_short_password(snapshot, env, message):
    import os

    env = {**env, "AGENTBASE_CONFIG": os.devnull + "-none"}
    base = {k: v for k, v in os.environ.items() if k != VAR}
    proc = subprocess.run([sys.executable, "-m", "importer", "serve", str(snapshot), "--password-env", VAR],
                          cwd=REPO, capture_output=True, text=True, timeout=60, env={**base, **env})
    assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    assert VAR not in proc.stderr and "short" not in proc.stderr.replace("shorter", "")


def test_serve_never_repeats_a_password_given_as_the_name(snapshot, tmp_path):
    proc = run_serve([str(snapshot), "--password-env", "my secret pass"], {"AGENTBASE_CONFIG": str(tmp_path / "x")})
    assert proc.returncode == 1 and "NAME of an environment variable" in proc.stderr
    assert "my secret pass" not in proc.stderr + proc.stdout


def test_config_serve_section(tmp_path, monkeypatch):
    from importer.config import ConfigError, load_serve_options, parse_config

    monkeypatch.setenv("AGENTBASE_CONFIG", str(tmp_path / "none.yml"))
    assert load_serve_options() == load_serve_options(None)  # no config file: the defaults
    assert (load_serve_options().password_env, load_serve_options().sql) == (None, True)
    with pytest.raises(ConfigError):
        load_serve_options(tmp_path / "none.yml")  # named explicitly: must exist

    path = tmp_path / "config.yml"
    path.write_text(f"serve:\n  password_env: {VAR}\n  sql: false\n", encoding="utf-8")
    options = load_serve_options(path)
    assert (options.password_env, options.sql) == (VAR, False)
    config = parse_config({"servers": [{"name": "a", "local": True}], "serve": {"password_env": VAR}})
    assert config.serve.password_env == VAR and config.serve.sql is True
    for bad, message in (({"password": "hunter22"}, "does not belong"),
                         ({"password_env": "hunter 22 !"}, "name of an environment variable"),
                         ({"password_env": "${SECRET}"}, "name of an environment variable"),
                         ({"colour": "red"}, "unknown key 'colour'")):
        path.write_text(json.dumps({"serve": bad}), encoding="utf-8")
        with pytest.raises(ConfigError) as exc:
            load_serve_options(path)
        assert message in str(exc.value) and "hunter" not in str(exc.value) and "SECRET" not in str(exc.value)
    # serve reads the section (and only it: the servers' variables need not be set)
    path.write_text(f"servers:\n  - name: x\n    host: ${{UNSET_HOST_VAR}}\nserve:\n  password_env: {VAR}\n",
                    encoding="utf-8")
    assert load_serve_options(path).password_env == VAR
