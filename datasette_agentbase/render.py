"""Content blocks as HTML, every value escaped.

Transcripts hold whatever agents read and wrote: HTML, ``<script>`` tags,
``onerror=`` attributes. Everything here is built with ``markupsafe``: text is
escaped where it is inserted, and only the few tags written in this module are
markup. Images are shown only for base64 data of the raster types browsers
cannot run code from (PNG, JPEG, GIF, WebP); anything else (SVG above all)
is described, never rendered.
"""

from __future__ import annotations

import json
import re

from markupsafe import Markup, escape

IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
_BASE64 = re.compile(r"[A-Za-z0-9+/\s]+=*\s*")
SHELL_TOOLS = {"exec", "bash", "process"}


class Options:
    """How much to show: ``limit`` characters per text (None: all), results
    longer than ``fold_lines`` lines or ``fold_chars`` characters start folded."""

    def __init__(self, limit: int | None = 5000, fold_lines: int = 12, fold_chars: int = 1200,
                 more_href: str | None = None):
        self.limit = limit
        self.fold_lines = fold_lines
        self.fold_chars = fold_chars
        self.more_href = more_href


CELL = Options()
FULL = Options(limit=None)


def _loads(value):
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def text(value, options: Options = CELL, css: str = "ab-text") -> Markup:
    """Text with its line breaks (CSS pre-wrap), cut at ``options.limit``."""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    cut = ""
    if options.limit is not None and len(value) > options.limit:
        more = len(value) - options.limit
        value = value[: options.limit]
        if options.more_href:
            cut = Markup(' <a class="ab-more" href="{}">… {:,} more characters</a>').format(options.more_href, more)
        else:
            cut = Markup('<span class="ab-more">… {:,} more characters</span>').format(more)
    return Markup('<div class="{}">{}{}</div>').format(css, value, cut)


def pretty_json(value, options: Options = CELL) -> Markup:
    data = _loads(value)
    try:
        dumped = json.dumps(data, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        dumped = str(data)
    return text(dumped, options, css="ab-json")


def _image(block: dict) -> Markup:
    mime = block.get("mimeType") or block.get("mime_type") or ""
    data = block.get("data")
    source = block.get("source")
    if isinstance(source, dict) and data is None:  # Anthropic-style {"source": {"type": "base64", ...}}
        mime = source.get("media_type") or mime
        data = source.get("data")
    if isinstance(mime, str):
        mime = mime.strip().lower()
    if mime in IMAGE_TYPES and isinstance(data, str) and data and _BASE64.fullmatch(data):
        src = f"data:{mime};base64,{''.join(data.split())}"
        return Markup('<div class="ab-image"><img alt="image ({})" src="{}"></div>').format(mime, src)
    size = len(data) if isinstance(data, str) else 0
    return Markup('<div class="ab-image ab-image-skipped">image not shown ({}, {:,} characters of data)</div>').format(
        mime or "unknown type", size)


def _fold(body: Markup, summary: Markup, folded: bool, css: str) -> Markup:
    return Markup('<details class="{}"{}><summary>{}</summary>{}</details>').format(
        css, "" if folded else Markup(" open"), summary, body)


def _first_line(value: str, width: int = 100) -> str:
    line = value.strip().split("\n", 1)[0]
    return line[:width] + ("…" if len(line) > width else "")


def tool_arguments(name, arguments, options: Options = CELL) -> Markup:
    """A tool call's arguments: exec's command as code, others as indented JSON."""
    args = _loads(arguments)
    parts = []
    if isinstance(args, dict) and name in SHELL_TOOLS and isinstance(args.get("command"), str):
        parts.append(Markup('<pre class="ab-command"><code>{}</code></pre>').format(
            _cut(args["command"], options)))
        rest = {k: v for k, v in args.items() if k != "command"}
        if rest:
            parts.append(pretty_json(rest, options))
    elif args is not None and args != {}:
        parts.append(pretty_json(args, options))
    return Markup("").join(parts)


def _cut(value: str, options: Options) -> str:
    if options.limit is not None and len(value) > options.limit:
        return value[: options.limit] + f"… ({len(value) - options.limit:,} more characters)"
    return value


def tool_call(block: dict, options: Options = CELL) -> Markup:
    name = block.get("name")
    call_id = block.get("id")
    head = Markup('<div class="ab-call-head"><span class="ab-badge ab-badge-tool">tool call</span> '
                  '<strong class="ab-tool-name">{}</strong>{}</div>').format(
        name if isinstance(name, str) else "?",
        Markup(' <span class="ab-dim">{}</span>').format(call_id) if isinstance(call_id, str) else "")
    return Markup('<div class="ab-call">{}{}</div>').format(
        head, tool_arguments(name, block.get("arguments", block.get("partialJson")), options))


def result_body(content, options: Options = CELL) -> tuple[Markup, str]:
    """The blocks of a tool result, and its plain text (for folding decisions)."""
    if isinstance(content, str):
        return text(content, options, css="ab-output"), content
    plain = []
    parts = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(text(block["text"], options, css="ab-output"))
            plain.append(block["text"])
        else:
            parts.append(render_block(block, options))
    return Markup("").join(parts), "\n".join(plain)


def tool_result(content, options: Options = CELL, is_error: bool = False, name=None,
                meta: Markup | str = "", fold: bool = True, anchor: str | None = None) -> Markup:
    """A tool result: error styling, folded when long."""
    body, plain = result_body(content, options)
    lines = plain.count("\n") + 1 if plain else 0
    long = lines > options.fold_lines or len(plain) > options.fold_chars
    label = "error" if is_error else "result"
    summary = Markup('<span class="ab-badge ab-badge-{}">{}</span> {}{} <span class="ab-dim">{}</span>').format(
        "error" if is_error else "result", label,
        Markup("<strong>{}</strong> ").format(name) if isinstance(name, str) and name else "",
        meta,
        f"{lines:,} lines, {len(plain):,} characters" if long else _first_line(plain, 80))
    css = "ab-result ab-result-error" if is_error else "ab-result"
    if not fold:
        return Markup('<div class="{}">{}{}</div>').format(css, summary, body)
    html = _fold(body, summary, folded=long, css=css)
    if anchor:
        html = Markup('<div id="{}">{}</div>').format(anchor, html)
    return html


def render_block(block, options: Options = CELL) -> Markup:
    """One content block."""
    if isinstance(block, str):
        return text(block, options)
    if not isinstance(block, dict):
        return pretty_json(block, options)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return text(block["text"], options)
    if kind == "thinking":
        thought = block.get("thinking")
        if block.get("redacted") or not isinstance(thought, str):
            return Markup('<div class="ab-thinking ab-dim">thinking (redacted)</div>')
        return _fold(text(thought, options),
                     Markup('<span class="ab-badge ab-badge-thinking">thinking</span> <span class="ab-dim">{} '
                            'characters</span>').format(f"{len(thought):,}"),
                     folded=True, css="ab-thinking")
    if kind == "toolCall":
        return tool_call(block, options)
    if kind == "toolResult":
        return tool_result(block.get("content"), options, is_error=bool(block.get("isError")),
                           name=block.get("toolName"))
    if kind == "image":
        return _image(block)
    return Markup('<div class="ab-unknown"><span class="ab-badge">{}</span>{}</div>').format(
        kind if isinstance(kind, str) else "block", pretty_json(block, options))


def render_blocks(value, options: Options = CELL) -> Markup:
    """content_blocks / tool_calls_json: a JSON list of blocks (or a string)."""
    data = _loads(value)
    if isinstance(data, str):
        return text(data, options)
    if isinstance(data, list):
        return Markup('<div class="ab-blocks">{}</div>').format(
            Markup("").join(render_block(b, options) for b in data))
    return render_block(data, options)


# -- snippets -------------------------------------------------------------------------------

MARK_OPEN, MARK_CLOSE = "<mark>", "</mark>"


def render_snippet(value: str) -> Markup:
    """A snippet from agentbase_snippet(): escaped text in which only the
    ``<mark>``/``</mark>`` pairs it put there become tags."""
    escaped = str(escape(value))
    opened = escaped.count("&lt;mark&gt;")
    closed = escaped.count("&lt;/mark&gt;")
    if opened == closed:
        escaped = escaped.replace("&lt;mark&gt;", "<mark>").replace("&lt;/mark&gt;", "</mark>")
    return Markup('<div class="ab-text ab-snippet">{}</div>').format(Markup(escaped))
