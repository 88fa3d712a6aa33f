"""Markdown and code for the conversation view, every value escaped.

- :func:`markdown`: CommonMark (plus tables and strikethrough) by markdown-it-py with raw HTML
  off, so ``<script>`` or ``<img onerror=...>`` in a message stays text. Links keep only
  ``http:``, ``https:`` and ``mailto:`` targets (``javascript:``, ``data:``, ``vbscript:``,
  relative and every other URL leave the Markdown as text) and get ``rel="nofollow noopener
  noreferrer"``. Images are never loaded: a Markdown image becomes a link to it (the page fetches
  nothing from the network, and a remote image would tell its host who reads the transcript).
  A line break is a line break (``breaks``), as in the chat the text was typed in.
- :func:`highlight`: code coloured by Pygments (its HTML formatter escapes every token),
  by language name or file name; None when the language is unknown or the code too long, and
  the caller shows it monospaced.
"""

from __future__ import annotations

import contextvars
import re
from functools import lru_cache

from markupsafe import Markup, escape

ALLOWED_SCHEMES = ("http", "https", "mailto")
HIGHLIGHT_MAX_CHARS = 40_000  # longer code stays monospaced, uncoloured (lexing costs time)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
REL = "nofollow noopener noreferrer"


def allowed_url(url: str) -> bool:
    """Only absolute http(s) and mailto URLs become links (``url`` as markdown-it normalized it:
    entities decoded, then percent-encoded)."""
    if not isinstance(url, str):
        return False
    match = _SCHEME.match(url.strip())
    return bool(match) and match.group(1).lower() in ALLOWED_SCHEMES


# -- code ---------------------------------------------------------------------------------------

class Budget:
    """Characters of code a page may still colour (Pygments lexes about 700,000 a second): past
    it, code is monospaced only, so a session full of large file writes stays quick to show."""

    def __init__(self, chars: int):
        self.left = chars

    def take(self, n: int) -> bool:
        if n > self.left:
            return False
        self.left -= n
        return True


_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("agentbase_highlight_budget", default=None)

@lru_cache(maxsize=256)
def _lexer(lang: str | None, filename: str | None):
    from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        if lang:
            return get_lexer_by_name(lang, stripnl=False, ensurenl=False)
        if filename:
            return get_lexer_for_filename(filename, stripnl=False, ensurenl=False)
    except (ClassNotFound, ValueError, TypeError):
        return None
    return None


@lru_cache(maxsize=1)
def _formatter():
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True)


def highlight(code: str, lang: str | None = None, filename: str | None = None,
              budget: Budget | None = None) -> Markup | None:
    """``code`` as escaped HTML spans with Pygments' short token classes (``k``, ``s``, ``c1``...),
    for a ``<pre class="ab-code">``; None when no lexer fits, the code is too long or the page's
    ``budget`` is spent."""
    if not isinstance(code, str) or not code or len(code) > HIGHLIGHT_MAX_CHARS:
        return None
    budget = budget if budget is not None else _budget.get()
    lang = (lang or "").strip().lower()[:40] or None
    base = filename.replace("\\", "/").rsplit("/", 1)[-1][:200] if isinstance(filename, str) else None
    if lang in ("text", "plain", "plaintext", "txt", "console", "output"):
        return None
    lexer = _lexer(lang, base) if (lang or base) else None
    if lexer is None or (budget is not None and not budget.take(len(code))):
        return None
    from pygments import highlight as run

    try:
        html = run(code, lexer, _formatter())
    except Exception:  # a lexer that fails on odd input: the code stays plain
        return None
    return Markup(html)  # Pygments' HtmlFormatter escapes &, <, >, " and ' in every token


# -- Markdown -----------------------------------------------------------------------------------

def _fence_highlight(content: str, lang: str, _attrs: str) -> str:
    html = highlight(content, lang) if lang else None
    return str(html) if html is not None else ""  # "": markdown-it escapes the code itself


def _link_open(self, tokens, idx, options, env):
    token = tokens[idx]
    if not env.get("links", True):  # a file that must not point anywhere: the URL shown, not linked
        env.setdefault("hrefs", []).append(token.attrGet("href") or "")
        return '<span class="ab-link-off">'
    token.attrSet("rel", REL)
    token.attrSet("class", "ab-link")
    return self.renderToken(tokens, idx, options, env)


def _link_close(self, tokens, idx, options, env):
    if not env.get("links", True):
        href = env["hrefs"].pop() if env.get("hrefs") else ""
        label = tokens[idx - 1].content if idx and tokens[idx - 1].type == "text" else None
        shown = "" if not href or label == href else Markup(' <span class="ab-url">({})</span>').format(href)
        return str(Markup("</span>{}").format(shown))
    return self.renderToken(tokens, idx, options, env)


def _image(self, tokens, idx, options, env):
    """An image never loads: a link to it, labelled with its alt text."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = token.attrGet("src") or ""
    label = Markup('<span class="ab-md-image">[image: {}]</span>').format(alt)
    if src and allowed_url(src):
        if not env.get("links", True):
            return str(Markup('{} <span class="ab-url">({})</span>').format(label, src))
        return str(Markup('<a class="ab-link" rel="{}" href="{}">{}</a>').format(REL, src, label))
    return str(label)


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False, "typographer": False,
                                   "highlight": _fence_highlight, "langPrefix": "language-"})
    md.enable(["table", "strikethrough"])
    md.validateLink = allowed_url  # the instance's own: links and images
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("image", _image)
    return md


# What can mean something in Markdown (emphasis, code, links, autolinks, entities, escapes, a
# line starting a list, quote, heading, code block or table): text with none of it is paragraphs
# and line breaks, made here without the parser (most chat messages and thinking; the parser costs
# about a millisecond per 500 characters). An underscore between two letters or digits never
# emphasises (CommonMark's flanking rules), so snake_case and file_names stay on the fast path.
_SYNTAX = re.compile(
    r"[\\`*\[]|~~|(?<![^\W_])_|_(?![^\W_])|<[^\s<>]*[:@][^\s<>]*>"
    r"|&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);"
    r"|^[ \t]*(?:[-+*>#=]|[0-9]{1,9}[.)])|^ {4}|^ {0,3}\t|^(?=[^\n]*\|)[ \t|:\-]*-[ \t|:\-]*$", re.M)
_PARAGRAPHS = re.compile(r"\n[ \t]*\n")
_BREAKS = re.compile(r"[ \t]*\n[ \t]*")


def _paragraphs(value: str) -> Markup:
    out = []
    for para in _PARAGRAPHS.split(value.strip()):
        para = para.strip()
        if para:
            out.append("<p>" + _BREAKS.sub("<br />\n", str(escape(para))) + "</p>\n")
    return Markup("".join(out))


def markdown(value: str, links: bool = True, budget: Budget | None = None) -> Markup:
    """Markdown text as HTML; raw HTML in it is text. Without ``links`` (a file read offline, which
    must not point anywhere), a link is its text and its URL, not a link. Code blocks are coloured
    while ``budget`` lasts."""
    value = value.replace("\r\n", "\n").replace("\r", "\n")  # as markdown-it does
    if not _SYNTAX.search(value):
        return _paragraphs(value)
    token = _budget.set(budget)
    try:
        html = _parser().render(value, {"links": links})
    except Exception:  # markdown-it should not fail, but a transcript must still show
        return Markup('<p class="ab-plain">{}</p>').format(value)
    finally:
        _budget.reset(token)
    return Markup(html)

