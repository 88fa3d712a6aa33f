"""Live pages: an open conversation or session list shows what an export (``agentbase watch``'s
or anyone's) added, without a reload.

The page names the snapshot version it was drawn from (live.version: the build and its update
number, from the snapshot's marker) on its script tag; ``static/live.js`` asks
``/-/agentbase/version.json`` every 2 s, an answer read from the marker alone (no scan, whatever
the archive's size), and when the version changed fetches what is new:

- a conversation: ``/-/agentbase/session/<id>/since.json?after=<the last card it shows>``, the
  cards from a few before that one to the end, drawn by the page's own template
  (``_agentbase_turns.html``, cut into its cards here: :func:`split`), and the totals table; the
  rows are read from a restart point a few cards before the page's last one when there is one
  (conversation.load_tail: the turns from there are the whole conversation's), else the turns are
  grouped over the whole conversation, as the page's; only the cards sent are drawn (:func:`cards`,
  conversation.drawn);
  the script adds the new cards, replaces the ones that changed (a tool result arrived under its
  call, a retry folded under the first error) and keeps the reader's place;
- the session list: the page itself, with its filters, whose rows replace those that changed.

Both answers are behind the same checks as the pages (with a password: the login, the same
cookie) and only read. Without JavaScript nothing of this runs, and the pages are as they were.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urlencode

from datasette.utils.asgi import Response

from . import conversation, live, served

POLL_MS = 2000
REPLAY = 3  # cards the page has that an answer draws again: the last ones may have changed


def version_label(version: tuple) -> str:
    """A snapshot version as the pages name it: ``<build id>:<update number>``."""
    return ":".join(str(v) for v in version) if version else ""


def page_vars(datasette, db, request, version: tuple, session_id: int | None = None) -> dict:
    """The template variables of a page that follows the snapshot: ``live`` (its version, where to
    ask for the newest one and, on a conversation, for its new cards), or None (not a snapshot
    with a version)."""
    if not version:
        return {"live": None}
    keep_db = [("db", db.name)] if request.args.get("db") else []
    out = {
        "version": version_label(version),
        "version_href": str(datasette.urls.path("-/agentbase/version.json"))
        + ("?" + urlencode(keep_db) if keep_db else ""),
        "since_href": None,
        "css_href": served.static_url(datasette, "live.css"),
        "js_href": served.static_url(datasette, "live.js"),
        "poll_ms": POLL_MS,
    }
    if session_id is not None:
        params = keep_db + ([("all", "1")] if request.args.get("all") in ("1", "true", "yes") else [])
        out["since_href"] = str(datasette.urls.path(f"-/agentbase/session/{int(session_id)}/since.json")) + (
            "?" + urlencode(params) if params else "")
    return {"live": out}


def fresh(body: dict, status: int = 200) -> Response:
    return Response.json(body, status=status, headers={"Cache-Control": "no-store"})


def read_only(request) -> Response | None:
    if request.method in ("GET", "HEAD"):
        return None
    return Response.json({"ok": False, "error": "Only GET: a live page only reads."}, status=405,
                         headers={"Allow": "GET, HEAD"})


async def version_view(datasette, request):
    """``/-/agentbase/version.json``: the version of the snapshot the pages show (``?db=``)."""
    refused = read_only(request)
    if refused is not None:
        return refused
    db = await served.snapshot_db(datasette, request)
    await served.check(datasette, request, db.name)
    version = await db.execute_fn(live.version)
    return fresh({"ok": True, "database": db.name, "version": version_label(version)})


# -- a conversation's cards ---------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track",
        "wbr"}


class _Cards(HTMLParser):
    """The offsets of the top-level children of the first ``.ab-conversation`` element, and of the
    first ``table.ab-totals``, in a page's HTML."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=False)
        self.text = text
        self.lines = [0] + [m.end() for m in re.finditer("\n", text)]
        self.stack: list[str] = []
        self.root: int | None = None  # the conversation's depth in the stack
        self.children: list[tuple[int, int, str | None]] = []  # (start, end, id)
        self.child: tuple[int, str | None] | None = None
        self.totals: tuple[int, int] | None = None
        self.totals_at: tuple[int, int] | None = None  # (start, depth)
        self.done = False

    def _at(self) -> int:
        line, col = self.getpos()
        return self.lines[line - 1] + col

    def handle_starttag(self, tag, attrs):
        if self.done:
            return
        start = self._at()
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if self.root is not None and len(self.stack) == self.root + 1 and self.child is None:
            self.child = (start, found.get("id"))
            if tag in VOID:
                self._close_child(start + len(self.get_starttag_text() or ""))
                return
        if tag in VOID:
            return
        self.stack.append(tag)
        if self.root is None and "ab-conversation" in classes:
            self.root = len(self.stack) - 1
        if tag == "table" and "ab-totals" in classes and self.totals is None and self.totals_at is None:
            self.totals_at = (start, len(self.stack) - 1)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1] == tag:
            self.stack.pop()

    def _close_child(self, end: int) -> None:
        start, ident = self.child
        self.children.append((start, end, ident))
        self.child = None

    def handle_endtag(self, tag):
        if self.done or tag not in self.stack:
            return  # a stray end tag: nothing it closes
        start = self._at()
        end = self.text.index(">", start) + 1
        while self.stack:  # (an element left open inside ends with the one that holds it)
            depth = len(self.stack) - 1
            name = self.stack.pop()
            if self.totals_at is not None and depth == self.totals_at[1]:
                self.totals, self.totals_at = (self.totals_at[0], end), None
            if self.root is not None and depth == self.root + 1 and self.child is not None:
                self._close_child(end)
            if self.root is not None and depth == self.root:
                self.done = True
            if name == tag:
                break


def split(html: str) -> tuple[list[dict], str | None]:
    """A conversation's cards as its page draws them: [{"key": the card's id, "html": ...}], a card
    being an element with an id and the elements without one that follow it (a retry's folded
    repeats, a branch point), and the totals table's HTML (None without one)."""
    parser = _Cards(html)
    parser.feed(html)
    parser.close()
    cards: list[dict] = []
    for start, end, ident in parser.children:
        if ident or not cards:
            cards.append({"key": ident or "", "html": html[start:end]})
        else:
            cards[-1]["html"] += "\n" + html[start:end]
    totals = html[parser.totals[0]:parser.totals[1]] if parser.totals else None
    return cards, totals


def cards(turns: list[dict]) -> list[dict]:
    """A conversation's cards as :func:`split` cuts its page, from its turns (conversation.build's):
    [{"key": the card's id, "turns": [...]}], a turn without an id (a branch point) going with the
    card before it."""
    out: list[dict] = []
    for turn in turns:
        if turn.get("id") or not out:
            out.append({"key": turn.get("id") or "", "turns": [turn]})
        else:
            out[-1]["turns"].append(turn)
    return out


def after(cards: list[dict], key: str | None) -> tuple[str | None, list[dict]]:
    """What a page showing cards up to ``key`` gets: (the key of the first card sent, the cards from
    ``REPLAY`` before the end of what it has to the end); (None, every card) when it has none of
    these (its path changed: it is drawn again whole)."""
    keys = [c["key"] for c in cards]
    if key and key in keys:
        first = max(0, keys.index(key) - REPLAY + 1)
        return cards[first]["key"], cards[first:]
    return None, cards


ROUTES = [
    (r"^/-/agentbase/version\.json$", version_view),
]
