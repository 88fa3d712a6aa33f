"""A session's title: one rule for every kind, and the first prompt it falls back on.

The title of a session is the first of these that has text, on one line of at most
``TITLE_CHARS`` characters (whitespace collapsed, ``…`` where it was cut):

1. ``label``: the name a person gave the session (OpenClaw's ``sessions.json`` / store label);
2. ``title``: the title its source gave it: Claude Code's custom or AI title, else its ``summary``
   line (the kind stores a summary as the title only when the session has no title of its own), the
   agent-server's session title, mini-OpenClaw's file title;
3. ``prompt``: its first prompt (:func:`prompt_text` of the first user message that a person typed:
   ``role = 'user'``, ``is_context = 0``, with text, in line order);
4. ``display_name``: the name of the chat it is in (OpenClaw's ``displayName``), which several
   sessions share.

None when none has text: a page then shows the session's id, never instead of any text. ``title_from``
names the step that gave the title. The same rule in Python (:func:`session_title`, used by ``agentbase
report session``), in SQL (:func:`title_sql`, used by the snapshot's ``session_list``, whose ``title``
is what the session browser, the conversation view and exports show) and, for the first prompt, in the
store's SQL (:func:`first_prompts`). A compaction summary (the notes a model keeps of the conversation
so far) is not a title: it is a message or entry of the session.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import orjson

TITLE_CHARS = 120
PROMPT_CHARS = 300
ORDER = ("label", "title", "prompt", "display_name")

_SPACE = re.compile(r"\s+")
# OpenClaw's gateway: "System: [2026-04-28 13:47:06 GMT+8] ..." event lines before the message, blocks
# of "Conversation info (untrusted metadata):" and the like with a fenced JSON body, a leading
# "[<channel> <sender> 2026-02-09 18:46 GMT+1]" or "[Fri 2026-05-01 09:27 PDT]" header, and a trailing
# "[message_id: N]".
_SYSTEM_LINE = re.compile(r"\A(?:[ \t]*System: \[[^\]\n]*\][^\n]*(?:\n|\Z)\s*)+")
_UNTRUSTED_BLOCK = re.compile(r"^[^\n]{0,120}\(untrusted[^)\n]{0,60}\):[ \t]*\n```[^\n]*\n.*?^```[ \t]*$",
                              re.M | re.S)
_HEADER = re.compile(r"\A\s*\[[^\]\n]{0,300}?\d{4}-\d{2}-\d{2}[^\]\n]{0,80}\][ \t]*")
_MESSAGE_ID = re.compile(r"\s*\[message_id: [^\]\n]{1,100}\]\s*\Z")
# Claude Code: a slash command typed by the user, as tags.
_COMMAND = re.compile(r"<command-name>\s*([^<]{1,200}?)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>([^<]{0,2000})</command-args>")
_TAGS = re.compile(r"</?(?:command-message|command-name|command-args|command-contents|local-command-stdout|"
                   r"local-command-stderr|local-command-caveat)>")
# The characters a blank preview holds at most (the snapshot's SQL trims the same ones).
BLANK = " \t\n\r"


def shorten(text: str | None, limit: int) -> str | None:
    """One line of at most ``limit`` characters (whitespace collapsed, … where it was cut); None for blank."""
    if not isinstance(text, str):
        return None
    line = _SPACE.sub(" ", text).strip()
    if not line:
        return None
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return line


def _message_text(content_blocks: str | None, preview: str | None) -> str:
    """The text blocks of a message, joined (its preview when it has none)."""
    if isinstance(content_blocks, str) and content_blocks:
        try:
            content = orjson.loads(content_blocks)
        except orjson.JSONDecodeError:
            content = None
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            parts = [b["text"] for b in content
                     if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
            if parts:
                return "\n".join(parts)
    return preview if isinstance(preview, str) else ""


def prompt_text(content_blocks: str | None, preview: str | None, limit: int = PROMPT_CHARS) -> str | None:
    """What a person typed in a user message, on one line, without a gateway's envelope; None if nothing."""
    text = _message_text(content_blocks, preview)
    if not text.strip():
        return None
    stripped = _SYSTEM_LINE.sub("", text)
    stripped = _UNTRUSTED_BLOCK.sub("", stripped)
    stripped = _HEADER.sub("", stripped.lstrip())
    stripped = _MESSAGE_ID.sub("", stripped)
    command = _COMMAND.search(stripped)
    if command:
        args = _COMMAND_ARGS.search(stripped)
        stripped = command.group(1) + (" " + args.group(1) if args and args.group(1).strip() else "")
    else:
        stripped = _TAGS.sub(" ", stripped)
    # an envelope with nothing in it (an image, a file): the text as it was rather than nothing
    return shorten(stripped, limit) or shorten(text, limit)


def session_title(label: str | None = None, title: str | None = None, prompt: str | None = None,
                  display_name: str | None = None) -> tuple[str | None, str | None]:
    """(title, title_from) by the rule above; ``prompt`` is the first prompt (:func:`prompt_text`)."""
    for name, value in zip(ORDER, (label, title, prompt, display_name)):
        line = shorten(value, TITLE_CHARS)
        if line is not None:
            return line, name
    return None, None


def title_sql(candidates: dict[str, str]) -> tuple[str, str]:
    """The rule in SQL: (title, title_from) expressions from one expression per step of ``ORDER``,
    each already one line of at most ``TITLE_CHARS`` characters or NULL (see :func:`shorten`)."""
    exprs = [candidates[name] for name in ORDER]
    title = "COALESCE(" + ", ".join(exprs) + ")"
    source = "CASE " + " ".join(f"WHEN {e} IS NOT NULL THEN '{n}'" for n, e in zip(ORDER, exprs)) + " END"
    return title, source


def first_prompts(store, session_ids: Iterable[int]) -> dict[int, str]:
    """Session id -> its first prompt (:func:`prompt_text`), read from an archive (either engine):
    the first user message a person typed with text, in line order (``seq``, then ``id``)."""
    ids = sorted({int(i) for i in session_ids})
    # a preview is blank when only BLANK characters remain: each removed (portable SQL, no trim set)
    stripped = "COALESCE({0}text_preview, '')"
    for _ in BLANK:
        stripped = f"REPLACE({stripped}, ?, '')"
    blank_params = list(BLANK)
    out: dict[int, str] = {}
    seen: set[int] = set()
    for i in range(0, len(ids), 500):
        batch = ids[i:i + 500]
        marks = ", ".join("?" for _ in batch)
        typed = "{0}role = 'user' AND COALESCE({0}is_context, 0) = 0 AND " + stripped + " <> ''"
        sql = (f"SELECT m.session_id, m.content_blocks, m.text_preview FROM messages m "
               f"JOIN (SELECT session_id, MIN(COALESCE(seq, -1)) AS first_seq FROM messages "
               f"WHERE session_id IN ({marks}) AND {typed.format('')} GROUP BY session_id) f "
               f"ON f.session_id = m.session_id AND COALESCE(m.seq, -1) = f.first_seq "
               f"WHERE {typed.format('m.')} ORDER BY m.session_id, m.id")
        for sid, blocks, preview in store.tuples(sql, [*batch, *blank_params, *blank_params]):
            if sid in seen:
                continue  # the first message decides (as in the snapshot's session_list)
            seen.add(sid)
            text = prompt_text(blocks.decode() if isinstance(blocks, bytes) else blocks, preview)
            if text is not None:
                out[sid] = text
    return out
