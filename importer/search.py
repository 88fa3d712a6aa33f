"""Full-text search: what each snapshot row's full-text entry indexes
(:func:`message_search_text`, :func:`tool_call_search_text`), how its text is
cut into tokens (:func:`index_text`) and how what a user types becomes the
matching query (:func:`fts_query`). Shared by the snapshot export, which
indexes, and the Datasette plugin, which searches and cuts snippets: the one
piece of code both run, so that a query is tokenized exactly as the index was
(it imports nothing of AgentBase).

SQLite's FTS5 tokenizers cannot cut Chinese into words: ``unicode61`` makes a
whole run of Chinese characters one token, and ``trigram`` cannot match a
two-character word such as 部署. So the export indexes Chinese, Japanese and
Korean text as overlapping character pairs (``服务器`` -> ``服务 务器``) and
everything else as ``unicode61`` words. :func:`fts_query` turns what a user
types into the matching FTS5 query: every term becomes a phrase of the same
tokens, so 部署, 服务器, ``rm -rf`` and ``/var/log`` all match where they occur.

A query that matches many messages is ranked among its newest matches (:data:`RANKED`,
:func:`newest_matches`, read newest first in rowid order): FTS5 computes bm25 for every match it
sorts, about 2 microseconds each,
which for a word in a sixth of a million messages is 0.4 s; the newest 20,000 are ranked in 50 ms
whatever the archive's size. A rarer query (a phrase, an identifier, two or three words together)
is ranked over the whole archive, as before; counts stay exact either way.

A single character is searched as a prefix (``锁*``: the pairs it starts, and itself, which the
index also holds for the last character of every run). English matches whole words (``nginx``
finds ``nginx.conf``, ``ngin`` does not, unless written ``ngin*``).
"""

from __future__ import annotations

import operator
import re
from array import array

import orjson

CJK_RANGES = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf"  # CJK Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\uac00-\ud7af"  # Hangul syllables
)
CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
_WORD = re.compile(r"\w+", re.UNICODE)
TOKENIZE = "unicode61 remove_diacritics 2"


_CJK_SPLIT = re.compile(f"([{CJK_RANGES}]+)")  # (the runs kept, at the odd places of split())
_MANY_RUNS = 8  # from this many runs in one text, all its runs are paired at once (_pairs_of_runs)
_RUN_START = re.compile("\x01[^ \x01] ")
_RUN_END = re.compile(" [^ \x01]\x01")
_RUN_SEP = "\x01 \x01"
_SPACE_UNIT = array("H", " ".encode("utf-16-le"))


def index_text(text: str, ends: bool = True) -> str:
    """The text as the FTS index should see it: CJK runs as character pairs, each run between
    spaces; after the text, on a line of their own, the last character of every run of two or more
    (so that a single character is found wherever it is: as the start of a pair, alone, or there;
    after the text, so that no phrase is broken by them); ``ends=False``: without that line (a query's
    tokens). (split and one list, not sub with a function: a third less time, the same text; a text of
    many runs has them all paired at once, the same text again.)"""
    if text.isascii():  # a fast way out for most text
        return text
    parts = _CJK_SPLIT.split(text)
    if len(parts) == 1:
        return text
    runs = parts[1::2]
    last = " ".join([run[-1] for run in runs if len(run) > 1]) if ends else ""
    if len(runs) >= _MANY_RUNS:
        parts[1::2] = _pairs_of_runs(runs)
        return " ".join(parts) + (f"\n{last}" if last else "")
    add = operator.add
    parts[1::2] = [f" {' '.join(map(add, run, run[1:])) if len(run) > 1 else run} " for run in runs]
    return "".join(parts) + (f"\n{last}" if last else "")


def _pairs_of_runs(runs: list[str]) -> list[str]:
    """Each run as its character pairs (``abc`` -> ``ab bc``; one character stays as it is), for
    many runs at once without a Python step per run or pair, which cost two thirds of the index
    text's time in Chinese-heavy text: the runs, between \\x01 marks, as UTF-16 units (every CJK
    range is in the BMP: one unit a character), each unit x made ``x x`` by two strided copies.
    That is ``a ab bc c`` for a run ``abc``, or ``a a`` for ``a``; two substitutions cut the first
    ``x `` of every run and the last `` x`` of those of two or more characters."""
    joined = ("\x01" + "\x01".join(runs) + "\x01").encode("utf-16-le")
    units = array("H")
    units.frombytes(joined)
    doubled = _SPACE_UNIT * (3 * len(units))
    doubled[0::3] = units
    doubled[2::3] = units
    text = _RUN_END.sub("\x01", _RUN_START.sub("\x01", doubled.tobytes().decode("utf-16-le")))
    return text.split(_RUN_SEP)[1:-1]


def copy_index(conn, fts: str, schema: str, content: bool = False) -> None:
    """Replace the FTS5 index ``fts`` of the connection's main database by the one of that name in
    the attached database ``schema`` (an index built elsewhere: all of its state is in its shadow
    tables; ``content``: a table that keeps its own text, in one more)."""
    for shadow in ("data", "idx", "docsize", "config", *(("content",) if content else ())):
        conn.execute(f"DELETE FROM main.[{fts}_{shadow}]")
        conn.execute(f"INSERT INTO main.[{fts}_{shadow}] SELECT * FROM [{schema}].[{fts}_{shadow}]")


def _tokens(term: str) -> list[str]:
    out: list[str] = []
    for word in _WORD.findall(index_text(term, ends=False)):
        # \w also matches CJK; a pair-split run is already space separated.
        out.append(word)
    return out


_QUOTED = re.compile(r'"([^"]*)"')

# The matches a query ranks at most: its newest (the highest rowids: the messages archived last).
RANKED = 20_000


def newest_matches(fts: str, joins: str = "", where: str = "") -> str:
    """A SELECT of the RANKED newest matches of the MATCH expression ``?`` (every match when there
    are fewer) with their bm25, as ``id`` and ``rank``: read in rowid order, newest first, and bm25
    computed for those alone, in one pass (to be ranked by the caller: ``ORDER BY rank``, outside it).
    ``joins`` and ``where`` (after ``AND``): a filter the kept matches pass, its tables joined to
    ``{fts} f`` (the newest RANKED of those that pass it)."""
    extra = f" AND {where}" if where else ""
    return (f"SELECT f.rowid AS id, bm25({fts}) AS rank FROM {fts} f {joins} WHERE {fts} MATCH ?{extra} "
            f"ORDER BY f.rowid DESC LIMIT {RANKED}")


def fts_query(q: str) -> str:
    """An FTS5 MATCH expression for what a user typed (never a syntax error).

    Each whitespace-separated term must occur; a term is matched as a phrase
    of its tokens (``/var/log`` -> ``"var log"``, 服务器 -> ``"服务 务器"``).
    Text in double quotes is one phrase (``"rm -rf /tmp"``). A trailing ``*``
    on a term asks for a prefix match of its last token.
    """
    terms = [m.strip() for m in _QUOTED.findall(q)] + _QUOTED.sub(" ", q).split()
    phrases = []
    for term in terms:
        prefix = term.endswith("*")
        tokens = _tokens(term.rstrip("*"))
        if not tokens:
            continue
        phrase = '"' + " ".join(t.replace('"', '""') for t in tokens) + '"'
        single = len(tokens) == 1 and len(tokens[0]) == 1 and CJK_RUN.fullmatch(tokens[0])
        phrases.append(phrase + ("*" if (prefix and not CJK_RUN.search(tokens[-1])) or single else ""))
    return " ".join(phrases) if phrases else '""'


# -- what is searched: the text each row's full-text entry indexes --------------------------------------------------------------------

def _blocks_search_text(content, parts: list[str]) -> None:
    if isinstance(content, str):
        parts.append(content)
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            parts.append(block["thinking"])
        elif kind == "toolCall":
            name = block.get("name")
            if isinstance(name, str):
                parts.append(name)
            _argument_text(block.get("arguments"), parts)
        elif kind == "toolResult":
            inner = block.get("content")
            if isinstance(inner, str):
                parts.append(inner)
            elif isinstance(inner, list):
                parts.extend(b["text"] for b in inner if isinstance(b, dict) and isinstance(b.get("text"), str))


def _argument_text(args, parts: list[str]) -> None:
    if isinstance(args, dict):
        parts.extend(v if isinstance(v, str) else orjson.dumps(v).decode() for v in args.values())
    elif args is not None:
        parts.append(args if isinstance(args, str) else orjson.dumps(args).decode())


def decoded_json(content_blocks: str | None, otherwise=None):
    """A JSON column's value decoded; ``otherwise`` when it is not JSON (None when there is none)."""
    if content_blocks is None:
        return None
    try:
        return orjson.loads(content_blocks)
    except orjson.JSONDecodeError:
        return otherwise


def message_search_text(content_blocks: str | None, fallback: str | None, decoded=None) -> str:
    """Everything searchable in a message: text, thinking, tool call arguments
    and tool results (their text), in block order."""
    if content_blocks is None:
        return fallback or ""
    content = decoded if decoded is not None else decoded_json(content_blocks)
    if content is None:
        return fallback or ""
    parts: list[str] = []
    _blocks_search_text(content, parts)
    if not parts and fallback:
        parts.append(fallback)
    return "\n".join(parts)


def tool_call_search_text(tool_name, command, arguments, result_preview) -> str:
    """What tool_calls_fts indexes of a call: its tool, command, arguments' values and the start of its result."""
    parts = [v for v in (tool_name, command) if isinstance(v, str)]
    if isinstance(arguments, str):
        decoded = decoded_json(arguments)
        if decoded is None:
            parts.append(arguments)
        else:
            _argument_text(decoded, parts)
    if isinstance(result_preview, str):
        parts.append(result_preview)
    return "\n".join(parts)
