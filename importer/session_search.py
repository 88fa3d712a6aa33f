"""Session search: which session was it? What a user types becomes ranked sessions of a snapshot, each
with its best matching messages as highlighted snippets, how many of its messages match, and the
message to open the conversation at (the first match). Shared by ``agentbase search`` and the
session browser (``/?q=``, its JSON); it reads only the snapshot (redacted, indexed: messages_fts,
session_list, session_list_fts), never the store.

The query (:func:`parse`): words, all of which a session must hold (``nginx timeout``, in one message
or in several); ``a OR b``; ``-word`` (or ``NOT word``) leaves out the messages holding it; ``"a
phrase"``; ``prefix*``; ``agent:``, ``server:``, ``source:``, ``tool:`` filters (``tool:`` a tool the
session called; one filter given twice: either value). Words are cut the way the index was
(importer.search): Chinese as character pairs, so 部署 and 服务器 match where they occur, and a
single CJK character (锁) matches every word it is part of. ``--flag`` is a word (two dashes: not an
exclusion). Bad syntax is a :class:`QueryError` with a one-line message.

The ranking (:func:`search`), measured by bench/search_quality.py (docs/search.md):

- each message that matches scores its BM25 (FTS5's ``bm25``: rare terms weigh more, long messages
  less) times a weight for what it is: a person's prompt 2, the model's text 1, a tool's output 0.5,
  injected context 0.3;
- each session's title and first prompt (``session_list_fts``, the title weighted 2 to the prompt's
  1) add their BM25 times 1.5;
- a session's score is its best message that holds the whole query plus half of the next two (so
  that several matching messages count but a long session does not win on length alone); a session
  that holds the words only apart scores the same sum for every part of the query (each word or OR
  group), added up;
- first the sessions with a message (or a title) that holds the whole query, then those that hold
  every part in different messages, then those that hold some (``partial``, their score scaled by the
  share of the parts they hold); by score within each; equal scores: the newest session first. When
  the first kind fills the page, the parts are not read apart (``count_exact`` false).

Candidates are read from the index alone, best first: at most ``CANDIDATES`` messages for the whole
query and for each of its parts, so a query costs a few index reads whatever the archive's size
(the matching counts are then exact below that many, "at least" above); a query or part that
matches more than ``search.RANKED`` messages is ranked among its newest RANKED (those the filters
select, with filters): a common word then costs the same at a million messages as at 100,000.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

from .search import CJK_RANGES, CJK_RUN, _tokens, newest_matches
from .shape import MESSAGE_SCOPE_INDEX
from .snippets import snippet

CANDIDATES = 1000  # messages read from the index, best first, for the query and for each of its parts
SNIPPETS = 3  # best matching messages shown a session
MAX_LIMIT = 500
ROLE_WEIGHT = {"user": 2.0, "assistant": 1.0, "toolResult": 0.5, "system": 0.3}
CONTEXT_WEIGHT = 0.3  # a row no one typed (is_context = 1), whatever its role
TITLE_WEIGHT = 1.5
TITLE_COLUMNS = (2.0, 1.0)  # bm25 weights of session_list_fts's title and first_prompt
NEXT_WEIGHTS = (0.5, 0.5)  # the second and third best message of a part
FILTERS = ("agent", "server", "source", "tool")
_FILTER = re.compile(r"(?i)(agent|server|source|tool):(.*)")


class QueryError(ValueError):
    """What a user typed cannot be searched (one line, safe to show: it repeats no more than the
    offending word)."""


@dataclass(frozen=True)
class Term:
    """One word, ``prefix*`` or ``"phrase"``: its index tokens (the FTS5 phrase)."""

    text: str
    tokens: tuple[str, ...]
    prefix: bool = False
    quoted: bool = False

    def fts(self, expansions: dict | None = None) -> str:
        """The FTS5 phrase; ``expansions``: a prefix term's index terms, when read (an OR of them)."""
        found = expansions.get(self) if expansions else None
        if found:
            return "(" + " OR ".join('"' + t.replace('"', '""') + '"' for t in found) + ")"
        phrase = '"' + " ".join(t.replace('"', '""') for t in self.tokens) + '"'
        last = self.tokens[-1]
        if self.prefix and not CJK_RUN.search(last):
            return phrase + "*"
        if len(self.tokens) == 1 and len(last) == 1 and CJK_RUN.fullmatch(last):
            # a single CJK character: every pair it starts, itself alone and as the end of a run (index_text)
            return phrase + "*"
        return phrase

    def highlight(self) -> str:
        """The term as importer.snippets reads a query."""
        if self.quoted or len(self.text.split()) > 1:
            return '"' + self.text.replace('"', " ") + '"'
        return self.text + ("*" if self.prefix else "")


@dataclass
class Query:
    """A parsed query: clauses (all must match; each one of its terms), excluded terms, filters."""

    clauses: list[list[Term]] = field(default_factory=list)
    excluded: list[Term] = field(default_factory=list)
    filters: dict[str, list[str]] = field(default_factory=dict)

    def _not(self, x: dict | None) -> str:
        if not self.excluded:
            return ""
        return " NOT (" + " OR ".join(t.fts(x) for t in self.excluded) + ")"

    def clause_fts(self, clause: list[Term], expansions: dict | None = None) -> str:
        """One clause as an FTS5 expression (with the exclusions); ``expansions``: see :func:`expand`."""
        inner = " OR ".join(t.fts(expansions) for t in clause)
        return f"({inner})" + self._not(expansions)

    def fts(self, expansions: dict | None = None) -> str:
        """The whole query as one FTS5 expression: every clause in one message."""
        inner = " AND ".join("(" + " OR ".join(t.fts(expansions) for t in c) + ")" for c in self.clauses)
        return f"({inner})" + self._not(expansions)

    def terms(self) -> list[Term]:
        return [t for c in self.clauses for t in c] + self.excluded

    def highlight(self) -> str:
        """What the snippets mark: every term searched for (not the excluded ones)."""
        return " ".join(t.highlight() for c in self.clauses for t in c)


def _term(text: str, quoted: bool = False) -> Term | None:
    prefix = not quoted and text.endswith("*")
    body = text.rstrip("*") if prefix else text
    tokens = tuple(_tokens(body))
    if not tokens:
        return None
    return Term(body, tokens, prefix=prefix, quoted=quoted)


def _pieces(q: str) -> list[tuple[str, str]]:
    """(kind, text) of each piece: 'quoted', 'word'; a quote's leading - or filter key kept on its word."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(q)
    while i < n:
        ch = q[i]
        if ch.isspace():
            i += 1
            continue
        start = i
        while i < n and not q[i].isspace() and q[i] != '"':
            i += 1
        head = q[start:i]
        if i < n and q[i] == '"':
            end = q.find('"', i + 1)
            if end < 0:
                raise QueryError('a quote (") is not closed: write "a phrase" between two quotes')
            inner = q[i + 1:end]
            i = end + 1
            if head and head not in ("-",) and not _FILTER.fullmatch(head):
                out.append(("word", head))
                head = ""
            out.append(("quoted", head + "\x00" + inner))
            continue
        out.append(("word", head))
    return out


def parse(q: str) -> Query:
    """The query a user typed (see the module's docstring); a QueryError for what cannot be searched."""
    query = Query()
    pending_or = False
    negate_next = False
    for kind, text in _pieces(q or ""):
        negate = negate_next
        negate_next = False
        quoted = kind == "quoted"
        if quoted:
            head, _, text = text.partition("\x00")
            filt = _FILTER.fullmatch(head) if head not in ("", "-") else None
            if filt:
                value = text.strip()
                if not value:
                    raise QueryError(f"{filt.group(1).lower()}: needs a value, as in {filt.group(1).lower()}:main")
                query.filters.setdefault(filt.group(1).lower(), []).append(value)
                continue
            negate = negate or head == "-"
        else:
            if text == "OR":
                if pending_or or not query.clauses:
                    raise QueryError("OR needs a word on each side, as in: nginx OR apache")
                pending_or = True
                continue
            if text == "AND":
                continue
            if text == "NOT":
                negate_next = True
                continue
            filt = _FILTER.fullmatch(text)
            if filt:
                value = filt.group(2)
                if not value:
                    raise QueryError(f"{filt.group(1).lower()}: needs a value, as in {filt.group(1).lower()}:main")
                query.filters.setdefault(filt.group(1).lower(), []).append(value)
                continue
            if text.startswith("-") and len(text) > 1 and text[1] != "-":
                negate = True
                text = text[1:]
        term = _term(text, quoted=quoted)
        if term is None:
            continue  # nothing searchable in it (punctuation alone)
        if negate:
            if pending_or:
                raise QueryError("OR cannot join an excluded word: write a OR b -c")
            query.excluded.append(term)
        elif pending_or:
            query.clauses[-1].append(term)
            pending_or = False
        else:
            query.clauses.append([term])
    if negate_next:
        raise QueryError("NOT needs a word after it, as in: nginx NOT apache")
    if pending_or:
        raise QueryError("OR needs a word on each side, as in: nginx OR apache")
    if query.excluded and not query.clauses:
        raise QueryError("only excluded words: add a word to search for (-word leaves out what holds it)")
    if len(query.clauses) + len(query.excluded) > 32:
        raise QueryError("too many words: at most 32")
    return query


# -- the search ---------------------------------------------------------------------------------------

@dataclass
class Options:
    """Filters besides the query's own (the CLI's options, the browser's GET parameters)."""

    agent: list[str] = field(default_factory=list)
    server: list[str] = field(default_factory=list)
    source: list[str] = field(default_factory=list)
    tool: list[str] = field(default_factory=list)
    since: str | None = None  # local YYYY-MM-DD: sessions active on or after
    until: str | None = None
    errors: bool = False  # sessions with a failed tool call or a model error (the browser's filters)
    thinking: bool = False
    limit: int = 20
    offset: int = 0


def check_day(value: str | None, name: str) -> str | None:
    """A day as typed (spaces around it ignored), YYYY-MM-DD; None when none is given; a QueryError
    that names ``name`` otherwise (the CLI, the session browser and the MCP tools take days so)."""
    if not value:
        return None
    value = value.strip()
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise ValueError
        date.fromisoformat(value)
    except ValueError:
        raise QueryError(f"{name} must be a day, YYYY-MM-DD") from None
    return value


def list_terms(options: Options, alias: str = "") -> tuple[list[str], list]:
    """SQL terms on session_list (``alias``: ``s.`` where the query names it so) for the filters the
    session list has (agents, servers, sources, the days a session is active on, errors, thinking; not
    ``tool``), and their parameters: the session browser's and the search's."""
    terms, params = [], []
    for name, column in (("agent", "agent_id"), ("server", "server"), ("source", "source")):
        values = getattr(options, name)
        if values:
            terms.append(f"{alias}{column} IN ({', '.join('?' * len(values))})")
            params += values
    if options.since:
        # last_day >= since; and (as no time zone is more than a day from UTC) last_message_at >= the
        # day before, which lets the index on last_message_at stop at the range's start
        terms.append(f"{alias}last_day >= ? AND {alias}last_message_at >= ?")
        params += [options.since, (date.fromisoformat(options.since) - timedelta(days=1)).isoformat()]
    if options.until:
        terms.append(f"{alias}first_day <= ?")
        params.append(options.until)
    if options.errors:
        terms.append(f"{alias}has_errors = 1")
    if options.thinking:
        terms.append(f"{alias}has_thinking = 1")
    return terms, params


def _session_filter(query: Query, options: Options) -> tuple[str, list]:
    """SQL terms on session_list (alias s) for every filter, the query's own too, and their parameters."""
    terms, params = list_terms(replace(options, **{name: [*getattr(options, name), *query.filters.get(name, [])]
                                                   for name in ("agent", "server", "source")}), "s.")
    tools = [*options.tool, *query.filters.get("tool", [])]
    if tools:
        variants = sorted({v for t in tools for v in (t, t.lower(), t[:1].upper() + t[1:])})
        terms.append(f"s.id IN (SELECT session_id FROM tool_call_rows WHERE tool_name IN "
                     f"({', '.join('?' * len(variants))}))")
        params += variants
    return " AND ".join(terms), params


def _weight(role: str | None, is_context) -> float:
    if is_context:
        return CONTEXT_WEIGHT
    return ROLE_WEIGHT.get(role or "", 1.0)


@dataclass
class Hit:
    id: int
    session_id: int
    score: float  # positive: the weighted BM25
    timestamp: str | None


def _scope(conn) -> str:
    """``INDEXED BY`` the messages' scope index (shape.MESSAGE_SCOPE) when the snapshot has it: a match's
    filters read there, not from its wide row."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?",
                         (MESSAGE_SCOPE_INDEX,)).fetchone()
    return f"INDEXED BY {MESSAGE_SCOPE_INDEX}" if found else ""


PREFIX_TERMS = 64  # a prefix read as the OR of the index terms it starts, up to this many
_VOCAB = "agentbase_messages_vocab"
_FOLDED = re.compile(f"[a-z0-9_{CJK_RANGES}]+")


def expand(conn, query: Query) -> dict:
    """Term -> the index terms of messages_fts it is a prefix of, for each one-token prefix term (``ngin*``, a
    single CJK character) that starts at most PREFIX_TERMS of them: FTS5 merges a prefix's doclists
    whole before reading any (a third of a single character's search at a million messages), while
    an OR of its terms is read as far as needed (the newest matches). Read from an fts5vocab table in
    the connection's temp schema; nothing expanded when it cannot be made (the prefix then as it was)."""
    out: dict = {}
    for term in query.terms():
        token = term.tokens[-1].lower() if len(term.tokens) == 1 else ""
        single = len(token) == 1 and CJK_RUN.fullmatch(token)
        if not token or not (term.prefix or single) or not _FOLDED.fullmatch(token):
            continue
        try:
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_VOCAB} USING fts5vocab(main, messages_fts, row)")
            found = [r[0] for r in conn.execute(f"SELECT term FROM temp.{_VOCAB} WHERE term >= ? AND term < ? "
                                                "LIMIT ?", (token, token + "\U0010ffff", PREFIX_TERMS + 1))]
        except sqlite3.Error:
            return {}
        if 0 < len(found) <= PREFIX_TERMS:
            out[term] = tuple(found)
    return out


def _message_hits(conn, expr: str, where: str, params: list, allowed: set[int] | None) -> tuple[list[Hit], bool]:
    """The best CANDIDATES matching messages (one copy of each: usage_counted = 1), and whether there
    were more. With filters (``allowed``: the sessions they select): the best of the whole index kept
    when enough of them pass, else every match the filters select ranked (a narrow filter). Either
    way among the newest RANKED matches (search.newest_matches: of those the filters select)."""
    sql = (f"WITH newest AS MATERIALIZED ({newest_matches('messages_fts')}), "
           "best AS MATERIALIZED (SELECT id, rank FROM newest ORDER BY rank LIMIT ?) "
           "SELECT b.id, b.rank, m.session_id, m.role, m.is_context, m.timestamp, (SELECT COUNT(*) FROM best) "
           "FROM best b JOIN messages m ON m.id = b.id WHERE m.usage_counted = 1 ORDER BY b.rank")
    rows = conn.execute(sql, [expr, CANDIDATES + 1]).fetchall()
    more = bool(rows) and rows[0][6] > CANDIDATES
    if allowed is not None:
        kept = [r for r in rows if r[2] in allowed]
        if more and len(kept) < CANDIDATES // 10:
            narrow = _by_sessions(conn, expr, where, params)
            if narrow is not None:
                return narrow
            joins = (f"JOIN messages m {_scope(conn)} ON m.id = f.rowid "
                     "JOIN session_list s ON s.id = m.session_id")
            passes = f"m.usage_counted = 1 AND {where}"
            sql = (f"WITH newest AS MATERIALIZED ({newest_matches('messages_fts', joins=joins, where=passes)}), "
                   "best AS MATERIALIZED (SELECT id, rank FROM newest ORDER BY rank LIMIT ?) "
                   "SELECT b.id, b.rank, m.session_id, m.role, m.is_context, m.timestamp "
                   "FROM best b JOIN messages m ON m.id = b.id ORDER BY b.rank")
            kept = conn.execute(sql, [expr, *params, CANDIDATES + 1]).fetchall()
            more = len(kept) > CANDIDATES
        rows = kept
    return [Hit(r[0], r[2], -r[1] * _weight(r[3], r[4]), r[5]) for r in rows[:CANDIDATES]], more


NARROW_MESSAGES = 50_000  # a filter's sessions with at most this many messages: their messages are the candidates


def _by_sessions(conn, expr: str, where: str, params: list) -> tuple[list[Hit], bool] | None:
    """A narrow filter's best matches, exact: the messages of its sessions (from the sessions' index)
    are the candidates, each match of the query checked against them in a temporary index as the
    index is read (no row looked up), bm25 computed only for those, so the cost follows the filter's
    messages, not the query's matches ranked (a word in 171,511 messages, a filter of 92 sessions and
    6,072 messages). None when the filter selects more than NARROW_MESSAGES messages."""
    size = conn.execute(f"SELECT COALESCE(SUM(s.message_count), 0) FROM session_list s WHERE {where}",
                        params).fetchone()[0]
    if size > NARROW_MESSAGES:
        return None
    sql = ("WITH best AS MATERIALIZED (SELECT f.rowid AS id, bm25(messages_fts) AS rank FROM messages_fts f "
           "WHERE messages_fts MATCH ? AND +f.rowid IN (SELECT m.id FROM session_list s JOIN messages m "
           f"ON m.session_id = s.id WHERE {where} AND m.usage_counted = 1) ORDER BY rank, f.rowid DESC LIMIT ?) "
           "SELECT b.id, b.rank, m.session_id, m.role, m.is_context, m.timestamp "
           "FROM best b JOIN messages m ON m.id = b.id ORDER BY b.rank, b.id DESC")
    rows = conn.execute(sql, [expr, *params, CANDIDATES + 1]).fetchall()
    return [Hit(r[0], r[2], -r[1] * _weight(r[3], r[4]), r[5]) for r in rows[:CANDIDATES]], len(rows) > CANDIDATES


def _title_hits(conn, expr: str, where: str, params: list) -> dict[int, float]:
    sql = (f"SELECT f.rowid, bm25(session_list_fts, {TITLE_COLUMNS[0]}, {TITLE_COLUMNS[1]}) FROM session_list_fts f "
           "JOIN session_list s ON s.id = f.rowid WHERE session_list_fts MATCH ?"
           + (f" AND {where}" if where else "") + " ORDER BY 2 LIMIT ?")
    return {r[0]: -r[1] * TITLE_WEIGHT for r in conn.execute(sql, [expr, *params, CANDIDATES])}


def _part_score(scores: list[float]) -> float:
    scores = sorted(scores, reverse=True)
    return (scores[0] if scores else 0.0) + sum(w * s for w, s in zip(NEXT_WEIGHTS, scores[1:]))


def search(conn: sqlite3.Connection, q: str, options: Options | None = None,
           session_href=None) -> dict:
    """Ranked sessions for ``q`` (a QueryError for bad syntax). ``session_href(session_id, message_id)``:
    the link of a session at a message (default: the explorer's path). Returns {"query", "fts",
    "count", "count_exact", "sessions": [...]} (see docs/search.md)."""
    options = options or Options()
    query = parse(q)
    href = session_href or (lambda sid, mid=None: f"/-/agentbase/session/{int(sid)}"
                            + (f"#m{int(mid)}" if mid is not None else ""))
    where, params = _session_filter(query, options)
    limit = max(1, min(int(options.limit), MAX_LIMIT))
    offset = max(0, int(options.offset))
    if not query.clauses:
        if not query.filters:  # nothing searchable (punctuation alone): nothing found
            return {"query": q, "fts": "", "filters": {}, "count": 0, "count_exact": True, "partial_count": 0,
                    "offset": offset, "limit": limit, "sessions": [], "note": "nothing to search for: type a word"}
        return _newest(conn, query, where, params, limit, offset, href)
    allowed = {r[0] for r in conn.execute(f"SELECT s.id FROM session_list s WHERE {where}", params)} if where else None
    try:
        expansions = expand(conn, query)
        whole, truncated = _message_hits(conn, query.fts(expansions), where, params, allowed)
        whole_titles = _title_hits(conn, query.fts(), where, params)
        parts: list[tuple[list[Hit], dict[int, float]]] = []
        together = {h.session_id for h in whole} | set(whole_titles)
        if len(query.clauses) > 1 and len(together) >= offset + limit:
            # enough sessions hold the whole query in one message (or their title): they come first, so the
            # words apart are not read (there may be more sessions, with the words apart: count_exact false)
            truncated = True
        elif len(query.clauses) > 1:
            for clause in query.clauses:
                hits, more = _message_hits(conn, query.clause_fts(clause, expansions), where, params, allowed)
                truncated = truncated or more
                parts.append((hits, _title_hits(conn, query.clause_fts(clause), where, params)))
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc) or "syntax" in str(exc):
            raise QueryError("the search could not read this query: quote unusual words (\"like-this\")") from None
        raise
    # per session: its hits (of any part), its best whole-query message, each part's scores
    sessions: dict[int, dict] = {}

    def entry(sid: int) -> dict:
        return sessions.setdefault(sid, {"hits": {}, "whole": [], "parts": [[] for _ in parts], "title": 0.0,
                                         "part_titles": [0.0] * len(parts)})

    for h in whole:
        e = entry(h.session_id)
        e["whole"].append(h.score)
        e["hits"][h.id] = h
    for sid, score in whole_titles.items():
        entry(sid)["title"] = score
    for k, (hits, titles) in enumerate(parts):
        for h in hits:
            e = entry(h.session_id)
            e["parts"][k].append(h.score)
            e["hits"].setdefault(h.id, h)
        for sid, score in titles.items():
            entry(sid)["part_titles"][k] = score
    ranked = []
    for sid, e in sessions.items():
        partial = False
        tier = 0 if e["whole"] or e["title"] else 1
        if parts:
            # every part must be found in the session: in a message, the title or the first prompt, or
            # a message that holds the whole query; a session with some of them comes after every one
            # that has them all (its score scaled by the share of the parts it has)
            found = sum(1 for k in range(len(parts)) if e["parts"][k] or e["part_titles"][k])
            if tier == 0:  # (scored as when the parts are not read: the same order on every page)
                score = _part_score(e["whole"]) + e["title"]
            else:
                score = sum(_part_score(e["parts"][k]) + e["part_titles"][k] for k in range(len(parts)))
            if found < len(parts) and not (e["whole"] or e["title"]):
                partial = True
                tier = 2
                score *= found / len(parts)
        else:
            score = _part_score(e["whole"]) + e["title"]
        ranked.append((tier, score, sid, e))
    info = _sessions_info(conn, [r[2] for r in ranked])
    ranked = [r for r in ranked if r[2] in info]
    # newest first, then (a stable sort) by kind and score: equal scores stay newest first
    ranked.sort(key=lambda r: (info[r[2]]["last_message_at"] or "", r[2]), reverse=True)
    ranked.sort(key=lambda r: (r[0], -round(r[1], 9)))
    total = sum(1 for r in ranked if r[0] < 2)
    page = ranked[offset:offset + limit]
    top = ranked[0][1] if ranked else 0.0
    out = []
    for tier, score, sid, e in page:
        partial = tier == 2
        hits = sorted(e["hits"].values(), key=lambda h: -h.score)
        first = min(hits, key=lambda h: (h.timestamp or "", h.id)) if hits else None
        shown = hits[:SNIPPETS]
        row = dict(info[sid])
        row.update({
            "score": round(score, 3),
            "relevance": min(100, round(100 * score / top)) if top > 0 else 0,
            "matches": len(hits),
            "matches_exact": not truncated,
            "title_match": bool(e["title"] or any(e["part_titles"])),
            "partial": partial,
            "first_match_id": first.id if first else None,
            "href": href(sid, first.id if first else None),
            "snippets": _snippets(conn, shown, query, href),
        })
        out.append(row)
    return {"query": q, "fts": query.fts(), "filters": {k: v for k, v in query.filters.items()},
            "count": total, "count_exact": not truncated, "partial_count": len(ranked) - total,
            "offset": offset, "limit": limit, "sessions": out}


_INFO_COLUMNS = ("id", "session_uuid", "title", "agent_id", "server", "source", "project", "started_local",
                 "last_local", "last_message_at", "message_count")


def _sessions_info(conn, ids: list[int]) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for k in range(0, len(ids), 500):
        chunk = ids[k:k + 500]
        cur = conn.execute(f"SELECT {', '.join(_INFO_COLUMNS)} FROM session_list WHERE id IN "
                           f"({', '.join('?' * len(chunk))})", chunk)
        for r in cur:
            out[r[0]] = dict(zip(_INFO_COLUMNS, r))
    return out


def _snippets(conn, hits: list[Hit], query: Query, href) -> list[dict]:
    if not hits:
        return []
    ids = [h.id for h in hits]
    rows = {r[0]: r for r in conn.execute(
        "SELECT id, role, local_time, content_blocks, text_preview FROM messages WHERE id IN "
        f"({', '.join('?' * len(ids))})", ids)}
    highlight = query.highlight()
    out = []
    for h in hits:
        r = rows.get(h.id)
        if r is None:
            continue
        out.append({"message_id": h.id, "role": r[1], "local_time": r[2], "score": round(h.score, 3),
                    "snippet": snippet(r[3], r[4], highlight), "href": href(h.session_id, h.id)})
    return out


def _newest(conn, query: Query, where: str, params: list, limit: int, offset: int, href) -> dict:
    """Filters alone (no word): the sessions they select, newest first."""
    sql = (f"SELECT {', '.join('s.' + c for c in _INFO_COLUMNS)} FROM session_list s"
           + (f" WHERE {where}" if where else "") + " ORDER BY s.last_message_at DESC, s.id DESC LIMIT ? OFFSET ?")
    rows = [dict(zip(_INFO_COLUMNS, r)) for r in conn.execute(sql, [*params, limit, offset])]
    count = conn.execute("SELECT COUNT(*) FROM session_list s" + (f" WHERE {where}" if where else ""),
                         params).fetchone()[0]
    for r in rows:
        r.update({"score": 0.0, "relevance": 0, "matches": 0, "matches_exact": True, "title_match": False,
                  "partial": False,
                  "first_match_id": None, "href": href(r["id"]), "snippets": []})
    return {"query": "", "fts": "", "filters": query.filters, "count": count, "count_exact": True, "partial_count": 0,
            "offset": offset, "limit": limit, "sessions": rows}


def relevance_label(value: int) -> str:
    """A relevance (percent of the best session's score) in words."""
    return "best" if value >= 100 else f"{value}%"
