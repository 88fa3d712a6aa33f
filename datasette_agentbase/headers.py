"""Security headers on every answer of the explorer, and a 400 for a sort that cannot be done.

``wrap(datasette, app)`` (from the plugin's ``asgi_wrapper``) adds to each HTTP answer that does
not set them itself (HTML, JSON, CSV, static files, the login page, redirects, errors):

- ``Content-Security-Policy``: scripts only from this site, plus the few inline scripts that
  Datasette's and the plugin's templates write, each allowed by its SHA-256 (``script_hashes``,
  computed at start-up from the templates themselves); no ``'unsafe-inline'`` or ``eval`` for
  scripts, so markup that slipped into a page could not run. Styles may be inline (Datasette's
  templates are full of ``style=`` attributes and ``<style>`` blocks); images from this site or
  ``data:`` URLs (the conversation view's images); no plugins (``object-src``), no ``<base>``,
  forms post only here, and ``frame-ancestors 'none'``: no other site frames a page.
- ``X-Frame-Options: DENY`` (the same, for browsers that predate ``frame-ancestors``),
  ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin`` (a search or a session
  id in the URL stays here when a link leads away).

An answer that sets its own policy keeps it: the standalone HTML export (a downloaded file whose
inline stylesheet and script its own policy allows by hash).

``sort_error(exception)`` turns Datasette's "Cannot sort table by ..." (a 500) into a 400 that says
what was wrong, for the plugin's ``handle_exception`` hook.
"""

from __future__ import annotations

import base64
import hashlib
import re

from datasette.views.base import DatasetteError

# Templates rendered on Datasette's pages whose inline <script> blocks must run (each is included
# whole, with no variables in its script but those of INLINE_VALUES).
SCRIPT_TEMPLATES = ("_close_open_menus.html", "_codemirror_foot.html", "default:table.html")
# the variables inline scripts use, with every value they can take (table.html's facet switch)
INLINE_VALUES = {"datasette_allow_facet": ("true", "false")}
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

STATIC_HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def csp_source(text: str) -> str:
    """A CSP source allowing exactly this inline text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def inline_scripts(source: str) -> list[str]:
    """The texts of a template's inline scripts as they are rendered: each variable of
    ``INLINE_VALUES`` by each of its values; a script with other template code is left out (it
    would not run: the browser test shows it)."""
    found = []
    for body in _INLINE_SCRIPT.findall(source):
        if "{%" in body or "{#" in body:
            continue
        names = set(_VARIABLE.findall(body))
        if not names:
            found.append(body)
        elif len(names) == 1 and next(iter(names)) in INLINE_VALUES:
            name = next(iter(names))
            found += [_VARIABLE.sub(value, body) for value in INLINE_VALUES[name]]
    return found


def script_hashes(datasette) -> list[str]:
    env = datasette.jinja_env
    sources = []
    for name in SCRIPT_TEMPLATES:
        try:
            source, _, _ = env.loader.get_source(env, name)
        except Exception:  # a Datasette without this template: nothing of it to allow
            continue
        for text in inline_scripts(source):
            if csp_source(text) not in sources:
                sources.append(csp_source(text))
    return sources


def policy(datasette) -> str:
    found = getattr(datasette, "_agentbase_csp", None)
    if found is None:
        found = datasette._agentbase_csp = "; ".join([
            "default-src 'self'",
            "script-src " + " ".join(["'self'"] + script_hashes(datasette)),
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "font-src 'self' data:",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ])
    return found


def wrap(datasette, app):
    """An ASGI app: ``app`` with the security headers on every HTTP answer."""

    async def inner(scope, receive, send):
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        wanted = {**STATIC_HEADERS, "content-security-policy": policy(datasette)}

        async def with_headers(event):
            if event.get("type") == "http.response.start":
                headers = list(event.get("headers") or [])
                present = {bytes(k).lower() for k, _ in headers}
                headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in wanted.items()
                            if k.encode("latin-1") not in present]
                event = {**event, "headers": headers}
            await send(event)

        await app(scope, receive, with_headers)

    return inner


# -- sorting -------------------------------------------------------------------------------------

def sort_error(request, exception) -> bool:
    """A DatasetteError for a sort Datasette cannot do becomes a 400 that names the column and how
    to sort the other way; True when it did."""
    if not isinstance(exception, DatasetteError) or exception.status != 500:
        return False
    message = str(exception.message or "")
    if message == "Cannot use _sort and _sort_desc at the same time":
        exception.message = "Use either _sort=COLUMN (ascending) or _sort_desc=COLUMN (descending), not both."
    elif message.startswith("Cannot sort table by "):
        column = message[len("Cannot sort table by "):]
        shown = column if len(column) <= 80 else column[:80] + "…"
        table = request.url_vars.get("table") if request is not None else None
        where = f"table {table!r}" if isinstance(table, str) else "this table"
        text = f"Cannot sort by {shown!r}: {where} has no sortable column of that name."
        for suffix in (" desc", " asc"):
            if column.lower().endswith(suffix):
                base = column[: -len(suffix)].strip()
                text += (f" To sort by {base!r} descending use _sort_desc={base}" if suffix == " desc"
                         else f" To sort by {base!r} ascending use _sort={base}")
                text += " (if it is a sortable column)."
                break
        exception.message = text
    else:
        return False
    exception.status = 400
    exception.title = "Invalid sort"
    return True
