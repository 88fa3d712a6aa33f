"""Search snippets for the contentless ``messages_fts`` index.

The index keeps no text (``content=''``), so FTS5's ``snippet()`` has nothing
to cut from. :func:`snippet` works on the message itself instead: the same
searchable text the export indexed (text, thinking, tool arguments, tool
results), the terms of the query found the way the index finds them (words
case-insensitively and whole, Chinese/Japanese/Korean as written, ``*`` as a
prefix), and a window of text around the first match with every match
between ``<mark>`` and ``</mark>``. The result is plain text (not escaped):
:func:`datasette_agentbase.render.render_snippet` escapes it for HTML.
It runs only for the rows a query returns.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .search import CJK_RANGES, message_search_text

_QUOTED = re.compile(r'"([^"]*)"')
_WORD = re.compile(r"\w+")
_CJK = re.compile(f"[{CJK_RANGES}]")
_LATIN_WORD = f"[^\\W{CJK_RANGES}]"  # a word character that is not CJK
_SPACE = re.compile(r"\s+")
WIDTH = 240
BEFORE = 70


def _term_regex(term: str) -> str | None:
    prefix = term.endswith("*")
    tokens = _WORD.findall(term.rstrip("*"))
    if not tokens:
        return None
    body = r"\W*".join(re.escape(t) for t in tokens)
    head = "" if _CJK.match(tokens[0][0]) else f"(?<!{_LATIN_WORD})"
    last = tokens[-1][-1]
    if prefix:
        tail = r"\w*"
    else:
        tail = "" if _CJK.match(last) else f"(?!{_LATIN_WORD})"
    return head + body + tail


@lru_cache(maxsize=256)
def query_regex(q: str) -> re.Pattern | None:
    """One regex matching any term of the query (as fts_query splits it)."""
    terms = [m.strip() for m in _QUOTED.findall(q)] + _QUOTED.sub(" ", q).split()
    parts = [p for p in (_term_regex(t) for t in terms) if p]
    if not parts:
        return None
    # longest first, so a phrase wins over a word it contains
    parts.sort(key=len, reverse=True)
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE)


def snippet(content_blocks: str | None, fallback: str | None, q: str | None, width: int = WIDTH) -> str:
    """About ``width`` characters of the message around its first match, with
    matches marked; the start of the message when nothing matches."""
    source = message_search_text(content_blocks, fallback)
    source = _SPACE.sub(" ", source).strip()
    # a literal <mark> in the message must stay text
    source = source.replace("<mark>", "<mark\u200b>").replace("</mark>", "</mark\u200b>")
    pattern = query_regex(q or "")
    first = pattern.search(source) if pattern else None
    start = 0
    if first is not None and first.start() > BEFORE:
        start = first.start() - BEFORE
        space = source.find(" ", start, first.start())
        if 0 <= space < start + 20:
            start = space + 1
    end = min(len(source), start + width)
    if first is not None and first.end() > end:
        end = first.end()
    window = source[start:end]
    out = []
    if pattern:
        at = 0
        for match in pattern.finditer(window):
            if match.end() == match.start():
                continue
            out.append(window[at:match.start()])
            out.append("<mark>" + match.group() + "</mark>")
            at = match.end()
        out.append(window[at:])
    else:
        out.append(window)
    return ("…" if start > 0 else "") + "".join(out) + ("…" if end < len(source) else "")
