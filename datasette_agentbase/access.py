"""Access control for the explorer: one password puts everything behind a login.

Configured through the plugin's Datasette metadata (``agentbase serve
--password-env VAR`` writes it; plain ``datasette -m`` users can too)::

    plugins:
      datasette-agentbase:
        password: {"$env": "AGENTBASE_EXPLORER_PASSWORD"}

Only the variable's *name* is in the metadata: Datasette resolves ``$env`` from
the environment, and ``/-/metadata`` shows ``{"$env": ...}``, never the value.
At start-up the password becomes a PBKDF2-HMAC-SHA256 hash (``PBKDF2_ITERATIONS``
rounds, a random salt made at each start) held in memory; the password itself
is never printed, logged, put in a URL or written to disk.

- ``/-/agentbase/login`` (a form, POST with Datasette's CSRF token) hashes what
  was typed the same way, in a thread of its own (``HASH_THREADS`` of them), so
  the other pages keep answering, and compares it with ``hmac.compare_digest``.
  The right one opens a session: a random id, kept in memory (at most
  ``MAX_SESSIONS``, each for ``LOGIN_DAYS``), that the actor of Datasette's own
  signed ``ds_actor`` cookie carries (HttpOnly, SameSite=Lax, Secure over
  https). An actor whose session this server did not open, or has closed, is
  refused: a restart or a new password logs everyone out.
- ``/-/logout`` (this plugin's route in place of Datasette's, which only clears
  the cookie; the menu's "Log out" posts to it) closes the session, so a copy of
  the cookie taken before is refused afterwards.
- Failed logins are throttled per client address (``request.scope["client"]``,
  the connection's peer; an IPv6 address by its /64). X-Forwarded-For counts
  only on connections from a proxy named with ``agentbase serve
  --forwarded-allow-ips`` (uvicorn then puts the right-most entry that is not a
  named proxy in the scope); by default no one is believed, not even 127.0.0.1
  (a plain ``datasette serve`` keeps uvicorn's default, which believes 127.0.0.1
  and ::1: put it behind nothing local, or use ``agentbase serve``). A wrong password is answered
  after ``FAILED_LOGIN_DELAY``, and that address's next check waits 1, 2, 4 ...
  up to ``MAX_FAILED_DELAY`` seconds after each wrong one in a row (one check
  at a time per address; meanwhile its logins get a 429 without a check).
  Nothing global is held while waiting, so guesses from one address do not
  delay a login from another. At most ``MAX_ADDRESSES`` addresses are kept
  (the least recently seen go first).
- ``permission_allowed`` denies every action (view-instance, database, table,
  query, execute-sql, download, ...) to anyone without a live session; the
  conversation view and the dashboard check the same permissions.
- ``forbidden`` sends an anonymous visitor of an HTML page to the login page
  (``?next=`` the page); JSON and CSV get a 403 JSON error.
- Fail closed: a configured password that is missing, or a Datasette that does
  not consult ``permission_allowed``, stops the server at start-up.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import math
import secrets
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlencode

from datasette.utils import baseconv
from datasette.utils.asgi import Response

PLUGIN = "datasette-agentbase"
ACTOR_ID = "agentbase"
ACTOR_SESSION = "agentbase_session"
LOGIN_DAYS = 7
MIN_PASSWORD_LENGTH = 8
PBKDF2_ITERATIONS = 600_000  # OWASP's figure for PBKDF2-HMAC-SHA256; about 0.1 s a check
SALT_BYTES = 16
HASH_THREADS = 2  # password checks at once, whatever the number of guesses
MAX_SESSIONS = 1000  # live logins; one more logs the oldest out
FAILED_LOGIN_DELAY = 1.0  # seconds before a wrong password's answer, and before its address's next check
MAX_FAILED_DELAY = 60.0  # the most an address waits between checks (it doubles with each wrong one)
FORGET_FAILURES = 15 * 60  # an address whose wait ended this long ago starts afresh
MAX_ADDRESSES = 10_000


class AccessConfigError(Exception):
    """The plugin asks for a password that is not there."""


def _pbkdf2(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8", "surrogatepass"), salt, iterations)


_pool: ThreadPoolExecutor | None = None


def _hash_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=HASH_THREADS, thread_name_prefix="agentbase-login")
    return _pool


class Sessions:
    """The logins this server opened and has not closed, in memory: an id is live until it expires,
    is logged out, or is the oldest of more than ``size``."""

    def __init__(self, size: int = MAX_SESSIONS):
        self.size = size
        self._key = secrets.token_bytes(32)  # this run's: the table holds HMAC(key, id), not the ids
        self._live: OrderedDict[bytes, float] = OrderedDict()  # -> expiry (time.time()), oldest first

    def _slot(self, session_id: str) -> bytes:
        return hmac.new(self._key, session_id.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()

    def open(self) -> str:
        now = time.time()
        while self._live and (len(self._live) >= self.size or next(iter(self._live.values())) <= now):
            self._live.popitem(last=False)
        session_id = secrets.token_urlsafe(32)
        self._live[self._slot(session_id)] = now + LOGIN_DAYS * 86400
        return session_id

    def is_live(self, session_id) -> bool:
        if not isinstance(session_id, str) or not 0 < len(session_id) <= 200:
            return False
        expires = self._live.get(self._slot(session_id))
        return expires is not None and time.time() < expires

    def close(self, session_id) -> None:
        if isinstance(session_id, str) and 0 < len(session_id) <= 200:
            self._live.pop(self._slot(session_id), None)

    def __len__(self) -> int:
        return len(self._live)


@dataclass(slots=True)
class _Tries:
    failures: int = 0  # wrong passwords in a row
    until: float = 0.0  # time.monotonic() before which this address gets no check
    checking: bool = False


class Throttle:
    """Failed logins per client address, for at most ``size`` addresses (least recently seen go)."""

    def __init__(self, size: int = MAX_ADDRESSES):
        self.size = size
        self._tries: OrderedDict[str, _Tries] = OrderedDict()

    def wait(self, address: str) -> float:
        """Seconds before a password from ``address`` may be checked; 0: now."""
        tries = self._tries.get(address)
        if tries is None:
            return 0.0
        left = tries.until - time.monotonic()
        if tries.checking:
            left = max(left, FAILED_LOGIN_DELAY)
        return max(left, 0.0)

    def start(self, address: str) -> _Tries:
        now = time.monotonic()
        tries = self._tries.get(address)
        if tries is None:
            while len(self._tries) >= self.size:
                self._tries.popitem(last=False)
            tries = self._tries[address] = _Tries()
        elif now - tries.until > FORGET_FAILURES:
            tries.failures = 0
        self._tries.move_to_end(address)
        tries.checking = True
        return tries

    def finish(self, address: str, tries: _Tries, right: bool) -> None:
        tries.checking = False
        if right:
            if self._tries.get(address) is tries:
                del self._tries[address]
            return
        tries.failures += 1
        delay = FAILED_LOGIN_DELAY * 2 ** min(tries.failures - 1, 16)
        tries.until = time.monotonic() + min(delay, MAX_FAILED_DELAY)

    def __len__(self) -> int:
        return len(self._tries)


class Gate:
    """The password (as a salted PBKDF2 hash), the live sessions and the failed-login throttle."""

    def __init__(self, password: str, iterations: int = PBKDF2_ITERATIONS):
        self._iterations = iterations
        self._salt = secrets.token_bytes(SALT_BYTES)
        self._hash = _pbkdf2(password, self._salt, iterations)
        self.sessions = Sessions()
        self.throttle = Throttle()

    @property
    def password_hash(self) -> str:
        """``pbkdf2_sha256$<iterations>$<salt>$<hash>`` (base64): what is kept of the password."""
        b64 = base64.b64encode
        return f"pbkdf2_sha256${self._iterations}${b64(self._salt).decode()}${b64(self._hash).decode()}"

    def matches(self, password: str) -> bool:
        """Slow on purpose (``PBKDF2_ITERATIONS``): call it through ``check`` in a coroutine."""
        return hmac.compare_digest(_pbkdf2(password, self._salt, self._iterations), self._hash)

    async def check(self, password: str) -> bool:
        """``matches`` in a login thread: the event loop serves other requests meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(_hash_pool(), self.matches, password)

    def log_in(self) -> dict:
        """A new session; the actor that carries it."""
        return {"id": ACTOR_ID, ACTOR_SESSION: self.sessions.open()}

    def log_out(self, actor) -> None:
        if isinstance(actor, dict) and actor.get("id") == ACTOR_ID:
            self.sessions.close(actor.get(ACTOR_SESSION))

    def admits(self, actor) -> bool:
        return (isinstance(actor, dict) and actor.get("id") == ACTOR_ID
                and self.sessions.is_live(actor.get(ACTOR_SESSION)))


_OPEN = object()  # no password configured: access as Datasette decides


def configured(datasette) -> bool:
    """Whether the plugin's settings ask for a password (set or not)."""
    return "password" in (datasette.plugin_config(PLUGIN) or {})


def gate(datasette) -> Gate | None:
    """The login gate, built once; None when no password is configured."""
    found = getattr(datasette, "_agentbase_gate", None)
    if found is None:
        found = _build(datasette)
        datasette._agentbase_gate = found
    return None if found is _OPEN else found


def _build(datasette):
    config = datasette.plugin_config(PLUGIN) or {}
    if "password" not in config:
        return _OPEN
    password = config.get("password")
    if not isinstance(password, str) or not password:
        # the message names neither the value nor the variable (a value passed by mistake as its name)
        raise AccessConfigError("the explorer's password variable is not set or empty: the explorer does not "
                                "start without its password")
    return Gate(password)


def check_startup(datasette) -> None:
    """Build the gate at start-up, so a missing password stops the server instead of locking it."""
    if hasattr(datasette, "_agentbase_gate"):
        del datasette._agentbase_gate
    gate(datasette)


async def verify(datasette) -> None:
    """With a password: make sure this Datasette consults the ``permission_allowed`` hook (a release
    that dropped it would serve everything openly); refuse to start otherwise."""
    if gate(datasette) is None:
        return
    allowed = None
    try:
        allowed = await datasette.permission_allowed(None, "view-instance", default=True)
    except Exception:  # an API that moved: treated as not honoured
        allowed = None
    if allowed is not False:
        raise AccessConfigError("this Datasette does not apply the explorer's login (permission_allowed); "
                                "refusing to serve without it (AgentBase needs Datasette 0.65)")


def permission_allowed(datasette, actor, action):
    try:
        g = gate(datasette)
    except AccessConfigError:
        return False  # fail closed
    if g is None:
        return None
    if not g.admits(actor):
        return False
    return None


def login_path(datasette, next_path: str | None = None) -> str:
    path = str(datasette.urls.path("-/agentbase/login"))
    if next_path:
        path += "?" + urlencode({"next": next_path})
    return path


def safe_next(datasette, value) -> str:
    """A local path to go back to after login; anything else (another host, a scheme) is the home page."""
    home = str(datasette.urls.instance())
    if not isinstance(value, str) or not value.startswith("/") or value.startswith("//"):
        return home
    if "\\" in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return home
    return value


def _wants_data(request) -> bool:
    path = request.path
    return (path.endswith(".json") or path.endswith(".csv") or "_format" in request.args
            or "_shape" in request.args or request.method != "GET")


def forbidden(datasette, request, message):
    try:
        g = gate(datasette)
    except AccessConfigError:
        g = None
    if g is None or g.admits(request.actor):
        return None  # Datasette's own 403 page
    if _wants_data(request):
        return Response.json({"ok": False, "status": 403, "title": "Login required",
                              "error": "Log in at " + login_path(datasette)}, status=403)
    return Response.redirect(login_path(datasette, request.full_path))


def client_address(request) -> str:
    """What failed logins are counted by: the client's address (an IPv6 one by its /64)."""
    client = request.scope.get("client")
    host = str(client[0]) if client else ""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if ip.version == 6:
        if ip.ipv4_mapped:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def actor_cookie(datasette, actor: dict) -> str:
    expires = baseconv.base62.encode(int(time.time()) + LOGIN_DAYS * 86400)
    return datasette.sign({"a": actor, "e": expires}, "actor")


async def login_view(datasette, request):
    g = gate(datasette)
    target = safe_next(datasette, request.args.get("next"))
    if g is None:
        return Response.redirect(target)
    error = None
    status = 200
    headers = {}
    if request.method == "POST":
        form = await request.post_vars()
        target = safe_next(datasette, form.get("next") or request.args.get("next"))
        address = client_address(request)
        wait = g.throttle.wait(address)
        if wait > 0:  # no check: this address's last one was wrong, or one is under way
            seconds = math.ceil(wait)
            error = f"Too many login attempts from your address: try again in {seconds} s."
            status = 429
            headers["Retry-After"] = str(seconds)
        else:
            tries = g.throttle.start(address)
            right = False
            try:
                right = await g.check(form.get("password") or "")
            finally:
                g.throttle.finish(address, tries, right)
            if right:
                g.log_out(request.actor)  # logging in again replaces the session
                response = Response.redirect(target)
                response.set_cookie("ds_actor", actor_cookie(datasette, g.log_in()), max_age=LOGIN_DAYS * 86400,
                                    httponly=True, samesite="lax", secure=request.scheme == "https")
                return response
            await asyncio.sleep(FAILED_LOGIN_DELAY)  # holds nothing: other logins go on
            error = "Wrong password."
            status = 403
    elif g.admits(request.actor):
        return Response.redirect(target)
    html = await datasette.render_template(
        "agentbase_login.html",
        {"error": error, "next": target, "action": str(datasette.urls.path("-/agentbase/login"))},
        request=request)
    return Response.html(html, status=status, headers=headers)


async def logout_view(datasette, request):
    """``/-/logout`` in place of Datasette's (registered only with a password): the same page and
    answer, and the POST also closes the session, so the cookie is refused even if kept."""
    instance = str(datasette.urls.instance())
    if request.method == "POST":
        try:
            g = gate(datasette)
        except AccessConfigError:
            g = None
        if g is not None:
            g.log_out(request.actor)
        response = Response.redirect(instance)
        response.set_cookie("ds_actor", "", expires=0, max_age=0)
        datasette.add_message(request, "You are now logged out", datasette.WARNING)
        return response
    if not request.actor:
        return Response.redirect(instance)
    html = await datasette.render_template("logout.html", {"actor": request.actor}, request=request)
    return Response.html(html)
