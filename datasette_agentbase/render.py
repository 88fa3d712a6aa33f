"""Content blocks as HTML, every value escaped.

Transcripts hold whatever agents read and wrote: HTML, ``<script>`` tags,
``onerror=`` attributes. Everything here is built with ``markupsafe``: text is
escaped where it is inserted, and only the few tags written in this module are
markup. Images are shown only for base64 data of the raster types browsers
cannot run code from (PNG, JPEG, GIF, WebP); anything else (SVG above all)
is described, never rendered.

With ``Options(markdown=True)`` (the conversation view and its exports), text
and thinking are Markdown (richtext.py: raw HTML stays text, links only to
http(s) and mailto). Tool calls are shown by what they do: shell commands as
code, file writes as the file's content, edits as a diff (difflib), patches
(Codex's apply_patch, unified diffs) as a diff, other arguments as a short
list of keys and values. Error texts holding JSON (a provider's error object)
are shown indented.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex

from markupsafe import Markup, escape

from . import richtext

IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
_BASE64 = re.compile(r"[A-Za-z0-9+/\s]+=*\s*")
# Tools that run a shell command, as each source names them (OpenClaw and pi, Claude, Codex,
# the agent-server's Codex, mini-OpenClaw's LangChain tools): their command is shown as code.
SHELL_TOOLS = {"exec", "bash", "process", "shell", "shell_command", "exec_command", "local_shell",
               "terminal", "commandexecution", "run_shell_command", "run_terminal_cmd"}
COMMAND_KEYS = ("command", "cmd", "commands")
PATH_KEYS = ("path", "file_path", "filePath", "file", "filename", "target_file", "notebook_path")
OLD_KEYS = ("oldText", "old_string", "old_str", "oldString")
NEW_KEYS = ("newText", "new_string", "new_str", "newString")
CONTENT_KEYS = ("content", "contents", "file_text", "fileText")
PATCH_KEYS = ("input", "patch", "diff")
DIFF_MAX_CHARS = 200_000  # larger edits: both sides shown, not compared (difflib is quadratic at worst)
INLINE_VALUE_CHARS = 300
_MARKS = re.compile(r"[*_`#]+")  # Markdown's emphasis and heading marks, left out of a one-line preview


class Options:
    """How much to show: ``limit`` characters per text (None: all), results
    longer than ``fold_lines`` lines or ``fold_chars`` characters start folded."""

    def __init__(self, limit: int | None = 5000, fold_lines: int = 12, fold_chars: int = 1200,
                 more_href: str | None = None, markdown: bool = False, links: bool = True,
                 budget: richtext.Budget | None = None):
        self.limit = limit
        self.fold_lines = fold_lines
        self.fold_chars = fold_chars
        self.more_href = more_href
        self.markdown = markdown  # text and thinking as Markdown
        self.links = links  # Markdown links as links (off: their URL shown as text, as in the HTML export)
        self.budget = budget  # characters of code the page may still colour (shared by its copies)

    def but(self, **changes) -> "Options":
        new = Options(self.limit, self.fold_lines, self.fold_chars, self.more_href, self.markdown, self.links,
                      self.budget)
        for key, value in changes.items():
            setattr(new, key, value)
        return new


CELL = Options()
FULL = Options(limit=None)


def _loads(value):
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _cut_value(value: str, options: Options) -> tuple[str, Markup]:
    """``value`` cut at ``options.limit``, and the note that says what was left out."""
    if options.limit is None or len(value) <= options.limit:
        return value, Markup("")
    more = len(value) - options.limit
    if options.more_href:
        note = Markup(' <a class="ab-more" href="{}">… {:,} more characters</a>').format(options.more_href, more)
    else:
        note = Markup('<span class="ab-more">… {:,} more characters</span>').format(more)
    return value[: options.limit], note


def text(value, options: Options = CELL, css: str = "ab-text") -> Markup:
    """Text with its line breaks (CSS pre-wrap), cut at ``options.limit``."""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    value, cut = _cut_value(value, options)
    return Markup(f'<div class="{escape(css)}">{escape(value)}{cut}</div>')  # (hot: f-strings, each value escaped)


def prose(value, options: Options = CELL) -> Markup:
    """What someone wrote (a message's text, thinking): Markdown with ``options.markdown``,
    else text with its line breaks."""
    if not options.markdown or not isinstance(value, str):
        return text(value, options)
    value, cut = _cut_value(value, options)
    return Markup(f'<div class="ab-md">{richtext.markdown(value, options.links, options.budget)}{cut}</div>')


def pretty_json(value, options: Options = CELL) -> Markup:
    data = _loads(value)
    try:
        dumped = json.dumps(data, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        dumped = str(data)
    return text(dumped, options, css="ab-json")


JSON_TEXT_MAX = 500_000


def json_in_text(value) -> tuple[str, object] | None:
    """A JSON object or array that is the whole text, or follows a short prefix on its first line
    (``400 {"type": "error", ...}``): (the prefix, the parsed value); None for anything else."""
    if not isinstance(value, str) or len(value) > JSON_TEXT_MAX:
        return None
    stripped = value.strip()
    if not stripped.endswith(("}", "]")):
        return None
    start = min((i for i in (stripped.find("{"), stripped.find("[")) if i >= 0), default=-1)
    if start < 0 or start > 120 or "\n" in stripped[:start]:
        return None
    try:
        data = json.loads(stripped[start:])
    except ValueError:
        return None
    if not isinstance(data, (dict, list)) or not data:
        return None
    return stripped[:start].strip(), data


def output(value: str, options: Options = CELL) -> Markup:
    """A tool's output: JSON indented, anything else as it came (monospaced)."""
    found = json_in_text(value)
    if found is not None:
        prefix, data = found
        head = Markup('<div class="ab-output-prefix">{}</div>').format(prefix) if prefix else Markup("")
        return head + pretty_json(data, options)
    return text(value, options, css="ab-output")


def error_text(value, options: Options = CELL) -> Markup:
    """A model call's error (``errorMessage``): a provider's error object indented."""
    found = json_in_text(value)
    if found is None:
        return Markup('<div class="ab-error-message">{}</div>').format(_cut(str(value), options))
    prefix, data = found
    return Markup('<div class="ab-error-message">{}{}</div>').format(
        Markup('<div class="ab-output-prefix">{}</div>').format(prefix) if prefix else "", pretty_json(data, options))


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
    return Markup(f'<details class="{escape(css)}"{"" if folded else " open"}><summary>{escape(summary)}</summary>'
                  f'{escape(body)}</details>')


def _first_line(value: str, width: int = 100) -> str:
    line = value.strip().split("\n", 1)[0]
    return line[:width] + ("…" if len(line) > width else "")


def _cut(value: str, options: Options) -> str:
    if options.limit is not None and len(value) > options.limit:
        return value[: options.limit] + f"… ({len(value) - options.limit:,} more characters)"
    return value


def _first_str(args: dict, keys) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


def _lines(value: str) -> int:
    return value.count("\n") + (0 if value.endswith("\n") else 1) if value else 0


# -- tool arguments --------------------------------------------------------------------------

def call_shape(name, arguments) -> tuple[str, dict]:
    """What a tool call does, from its name and arguments (as each source writes them):

    - ``("shell", {command, note, rest})``: a shell command (``note``: Claude's ``description``);
    - ``("patch", {patch, rest})``: a patch text (Codex's apply_patch ``{"input"}``, a unified diff);
    - ``("changes", {changes: [{kind, path, diff, content}], rest})``: Codex app-server's fileChange;
    - ``("edit", {path, edits: [(old, new)], rest})``: OpenClaw's edit ``{path, oldText, newText}``,
      Claude's Edit / MultiEdit ``{file_path, old_string, new_string}`` / ``{edits}``, ``{old_str,
      new_str}``;
    - ``("write", {path, content, rest})``: OpenClaw's write ``{path, content}``, Claude's Write;
    - ``("text", {text})``: arguments that are a string; ``("args", {args})``: anything else.

    ``rest``: the other arguments."""
    args = _loads(arguments)
    lname = name.lower() if isinstance(name, str) else ""
    if isinstance(args, str):
        if lname == "apply_patch" or looks_like_patch(args):
            return "patch", {"patch": args, "rest": {}}
        return "text", {"text": args}
    if not isinstance(args, dict) or not args:
        return "args", {"args": args}
    if lname in SHELL_TOOLS:
        for key in COMMAND_KEYS:
            command = _command_text(args.get(key), key)
            if command is not None:
                note = args.get("description")
                return "shell", {"command": command, "note": note if isinstance(note, str) and note.strip() else None,
                                 "rest": {k: v for k, v in args.items() if k not in (key, "description")}}
    for key in PATCH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip() and (lname == "apply_patch" or looks_like_patch(value)):
            return "patch", {"patch": value, "rest": {k: v for k, v in args.items() if k != key}}
    changes = args.get("changes")
    if isinstance(changes, list) and changes and all(isinstance(c, dict) and isinstance(c.get("path"), str)
                                                     for c in changes):
        out = []
        for change in changes:
            kind = change.get("kind")
            kind = kind.get("type") if isinstance(kind, dict) else kind
            diff = change.get("diff")
            out.append({"kind": kind if isinstance(kind, str) else None, "path": change["path"],
                        "diff": diff if isinstance(diff, str) and diff else None,
                        "content": _first_str(change, CONTENT_KEYS)})
        return "changes", {"changes": out, "rest": {k: v for k, v in args.items() if k != "changes"}}
    path = _first_str(args, PATH_KEYS)
    old, new = _first_str(args, OLD_KEYS), _first_str(args, NEW_KEYS)
    used = set(OLD_KEYS) | set(NEW_KEYS) | set(PATH_KEYS)
    edits = None
    if old is not None and new is not None:
        edits = [(old, new)]
    elif isinstance(args.get("edits"), list) and args["edits"]:
        edits = []
        for edit in args["edits"]:
            o = _first_str(edit, OLD_KEYS) if isinstance(edit, dict) else None
            n = _first_str(edit, NEW_KEYS) if isinstance(edit, dict) else None
            if o is None or n is None:
                edits = None
                break
            edits.append((o, n))
        used.add("edits")
    if edits:
        return "edit", {"path": path, "edits": edits, "rest": {k: v for k, v in args.items() if k not in used}}
    content = _first_str(args, CONTENT_KEYS)
    if path is not None and content is not None:
        return "write", {"path": path, "content": content,
                         "rest": {k: v for k, v in args.items() if k not in PATH_KEYS and k not in CONTENT_KEYS}}
    return "args", {"args": args}


def tool_arguments(name, arguments, options: Options = CELL) -> Markup:
    """A tool call's arguments by what the call does (:func:`call_shape`): a shell command as code,
    a file write as the file, an edit or a patch as a diff, anything else as keys and values."""
    kind, shape = call_shape(name, arguments)
    lname = name.lower() if isinstance(name, str) else ""
    rest = shape.get("rest")
    tail = key_values(rest, options, lname) if rest else Markup("")
    if kind == "shell":
        note = Markup('<div class="ab-call-note">{}</div>').format(_cut(shape["note"], options)) if shape["note"] \
            else Markup("")
        return note + Markup('<pre class="ab-command"><code>{}</code></pre>').format(
            _cut(shape["command"], options)) + tail
    if kind == "patch":
        return diff_view(shape["patch"].splitlines(), options) + tail
    if kind == "changes":
        parts = []
        for change in shape["changes"]:
            if change["diff"] is not None:
                body, adds, dels = _diff_lines(change["diff"].splitlines())
                parts.append(file_head(change["kind"] or "change", change["path"], f"+{adds} −{dels}"))
                parts.append(_diff_block(body, adds + dels, options))
            elif change["content"] is not None:
                parts.append(file_head(change["kind"] or "write", change["path"],
                                       f"{_lines(change['content']):,} lines"))
                parts.append(code_view(change["content"], options, filename=change["path"]))
            else:
                parts.append(file_head(change["kind"] or "change", change["path"]))
        return Markup("").join(parts) + tail
    if kind == "edit":
        bodies = []
        adds = dels = 0
        for old, new in shape["edits"]:
            body, a, d = edit_diff(old, new)
            adds, dels = adds + a, dels + d
            bodies.append(_diff_block(body, a + d, options))
        detail = f"+{adds} −{dels}" + (f" in {len(shape['edits'])} edits" if len(shape["edits"]) > 1 else "")
        return file_head("edit", shape["path"], detail) + Markup("").join(bodies) + tail
    if kind == "write":
        return (file_head("write", shape["path"], f"{_lines(shape['content']):,} lines")
                + code_view(shape["content"], options, filename=shape["path"]) + tail)
    if kind == "text":
        return text(shape["text"], options, css="ab-json")
    args = shape["args"]
    if isinstance(args, dict):
        return key_values(args, options, lname) if args else Markup("")
    return pretty_json(args, options) if args is not None else Markup("")


def _command_text(value, key: str) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if key == "commands":
            return "\n".join(value)
        shell = value[0].rsplit("/", 1)[-1]
        if len(value) == 3 and shell in ("bash", "sh", "zsh", "dash") and value[1] in ("-c", "-lc", "-ic", "-lic"):
            return value[2]
        return shlex.join(value)
    return None


def file_head(action: str, path: str | None, detail: str = "") -> Markup:
    shown = Markup(' <span class="ab-dim">{}</span>').format(detail) if detail else ""
    return Markup('<div class="ab-file-head"><span class="ab-badge ab-badge-file" title="what the tool did to a file">{}</span> <code class="ab-path">'
                  '{}</code>{}</div>').format(action, path or "(no path)", shown)


def looks_like_patch(value: str) -> bool:
    head = value.lstrip()[:300]
    if head.startswith(("*** Begin Patch", "diff --git", "Index: ")):
        return True
    if head.startswith("--- ") and "\n+++ " in value[:2000]:
        return True
    return False


def code_view(value: str, options: Options = CELL, filename: str | None = None, lang: str | None = None) -> Markup:
    """Code or a file's content, monospaced, coloured when its language is known; folded when long."""
    shown, cut = _cut_value(value, options)
    coloured = richtext.highlight(shown, lang, filename, options.budget)
    body = Markup('<pre class="ab-code"><code>{}</code>{}</pre>').format(
        coloured if coloured is not None else shown, cut)
    lines = _lines(value)
    if lines > options.fold_lines * 2 or len(value) > options.fold_chars * 3:
        return _fold(body, Markup('<span class="ab-dim">{:,} lines, {:,} characters</span>').format(lines, len(value)),
                     folded=True, css="ab-file")
    return body


def edit_diff(old: str, new: str) -> tuple[Markup, int, int]:
    """The old text against the new, line by line (difflib), as diff lines."""
    if old == new:
        return Markup('<span class="ab-diff-note">(no change)</span>'), 0, 0
    a, b = old.splitlines(), new.splitlines()
    if len(old) + len(new) > DIFF_MAX_CHARS:
        lines = ["-" + line for line in a] + ["+" + line for line in b]
    else:
        lines = list(difflib.unified_diff(a, b, lineterm="", n=3))[2:]  # no ---/+++: the path is above
    return _diff_lines(lines, relative=True)


def _diff_lines(lines: list[str], relative: bool = False) -> tuple[Markup, int, int]:
    """Diff lines (unified, or Codex's ``*** Begin Patch``) as spans; (html, added, removed).
    ``relative``: an edit's hunk headers count lines of the edited text, not of the file: shown
    as a gap."""
    out = []
    adds = dels = 0
    in_hunk = False
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("@@"):
            in_hunk = True
            if relative:
                if out:
                    out.append(Markup('<span class="ab-diff-hunk">⋯</span>'))
                continue
            css = "ab-diff-hunk"
        elif line.startswith("*** ") or line.startswith(("diff --git", "Index: ")):
            css = "ab-diff-file"
            in_hunk = line.startswith(("*** Add File", "*** Update File", "*** Delete File", "*** Move to"))
        elif line.startswith("--- ") and nxt.startswith("+++ "):
            css, in_hunk = "ab-diff-file", False
        elif line.startswith("+++ ") and not in_hunk:
            css = "ab-diff-file"
        elif not in_hunk and line.startswith(("index ", "new file mode", "deleted file mode", "similarity index",
                                               "rename from", "rename to", "old mode", "new mode")):
            css = "ab-diff-file"
        elif line.startswith("+"):
            css, adds = "ab-diff-add", adds + 1
        elif line.startswith("-"):
            css, dels = "ab-diff-del", dels + 1
        elif line.startswith("\\"):
            css = "ab-diff-note"
        else:
            css = "ab-diff-ctx"
        out.append(Markup('<span class="{}">{}</span>').format(css, line))
    return Markup("").join(out), adds, dels


def _diff_block(body: Markup, changed: int, options: Options) -> Markup:
    pre = Markup('<pre class="ab-diff">{}</pre>').format(body)
    if changed > options.fold_lines * 5:
        return _fold(pre, Markup('<span class="ab-dim">{:,} changed lines</span>').format(changed), folded=True,
                     css="ab-file")
    return pre


def diff_view(lines: list[str], options: Options = CELL) -> Markup:
    """A patch (unified diff or Codex's apply_patch) with added and removed lines coloured."""
    if options.limit is not None:
        total = 0
        for i, line in enumerate(lines):
            total += len(line) + 1
            if total > options.limit:
                lines = lines[:i] + [f"\\ … {len(lines) - i:,} more lines"]
                break
    body, adds, dels = _diff_lines(lines)
    files = sum(1 for line in lines if line.startswith(("*** Add File", "*** Update File", "*** Delete File",
                                                        "+++ ")))
    head = Markup('<div class="ab-file-head"><span class="ab-badge ab-badge-file" title="a change to one or more files, as a diff">patch</span> <span class="ab-dim">'
                  '{}+{} −{}</span></div>').format(f"{files} file{'s' if files != 1 else ''}, " if files else "",
                                                   adds, dels)
    return head + _diff_block(body, adds + dels, options)


CODE_KEYS = ("code", "script", "source", "query", "sql")
PROSE_KEYS = ("prompt", "description", "message", "text", "task", "instructions")


def key_values(args: dict, options: Options = CELL, lname: str = "") -> Markup:
    """Arguments as keys and values: short values on one line, long text as a block, the rest as JSON."""
    inline, blocks = [], []
    for key, value in args.items():
        key = str(key)
        if value is None or isinstance(value, (bool, int, float)):
            inline.append((key, json.dumps(value)))
        elif isinstance(value, str) and "\n" not in value and len(value) <= INLINE_VALUE_CHARS:
            inline.append((key, value))
        elif isinstance(value, str):
            if key in CODE_KEYS:
                body = code_view(value, options, lang="python" if "python" in lname else
                                 "sql" if key in ("query", "sql") and "select" in value[:200].lower() else None)
            elif key in PROSE_KEYS and options.markdown:
                body = prose(value, options)
            else:
                body = text(value, options, css="ab-output")
            blocks.append(Markup('<div class="ab-arg-block"><span class="ab-arg-key">{}</span>{}</div>').format(
                key, body))
        else:
            body = checklist(value) or pretty_json(value, options)
            blocks.append(Markup('<div class="ab-arg-block"><span class="ab-arg-key">{}</span>{}</div>').format(
                key, body))
    head = Markup("")
    if inline:
        head = Markup('<div class="ab-args">{}</div>').format(Markup("").join(
            Markup('<span class="ab-arg"><span class="ab-arg-key">{}</span> <code>{}</code></span>').format(k, v)
            for k, v in inline))
    return head + Markup("").join(blocks)


TODO_TEXT_KEYS = ("content", "step", "text", "title", "task")
TODO_MARKS = {"completed": "✓", "done": "✓", "in_progress": "▸", "active": "▸", "pending": "○", "todo": "○",
              "cancelled": "✗", "canceled": "✗"}


def checklist(value) -> Markup | None:
    """A plan or todo list (Claude's TodoWrite ``todos``, Codex's update_plan ``plan``: items with a
    text and a status) as a checklist; None for anything else."""
    if not isinstance(value, list) or not value or len(value) > 500:
        return None
    items = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("status"), str):
            return None
        label = _first_str(item, TODO_TEXT_KEYS)
        if label is None:
            return None
        status = item["status"]
        items.append(Markup('<li class="ab-todo-{}"><span class="ab-todo-mark" title="{}">{}</span> {}</li>').format(
            re.sub(r"[^a-z_]", "", status.lower())[:20], status, TODO_MARKS.get(status.lower(), "•"), label))
    return Markup('<ul class="ab-todo">{}</ul>').format(Markup("").join(items))


def tool_call(block: dict, options: Options = CELL, extra: Markup | str = "") -> Markup:
    name = block.get("name")
    call_id = block.get("id")
    shown_id = f' <span class="ab-dim">{escape(call_id)}</span>' if isinstance(call_id, str) else ""
    head = (f'<div class="ab-call-head"><span class="ab-badge ab-badge-tool" title="the model asked a tool to run, with these arguments">tool call</span> '
            f'<strong class="ab-tool-name">{escape(name if isinstance(name, str) else "?")}</strong>{shown_id}</div>')
    args = tool_arguments(name, block.get("arguments", block.get("partialJson")), options)
    return Markup(f'<div class="ab-call">{head}{escape(extra)}{args}</div>')


def result_body(content, options: Options = CELL) -> tuple[Markup, str]:
    """The blocks of a tool result, and its plain text (for folding decisions)."""
    if isinstance(content, str):
        return output(content, options), content
    plain = []
    parts = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(output(block["text"], options))
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
    named = f"<strong>{escape(name)}</strong> " if isinstance(name, str) and name else ""
    first = f"{lines:,} lines, {len(plain):,} characters" if long else _first_line(plain, 80)
    hover = "the tool failed: its output" if is_error else "what the tool answered"
    summary = Markup(f'<span class="ab-badge ab-badge-{label}" title="{hover}">{label}</span> {named}{escape(meta)} '
                     f'<span class="ab-dim{"" if long else " ab-preview"}">{escape(first)}</span>')
    css = "ab-result ab-result-error" if is_error else "ab-result"
    if not fold:
        return Markup(f'<div class="{css}">{summary}{escape(body)}</div>')
    html = _fold(body, summary, folded=long, css=css)
    if anchor:
        html = Markup(f'<div id="{escape(anchor)}">{html}</div>')
    return html


def thinking(thought, options: Options = CELL, redacted: bool = False) -> Markup:
    """Thinking, folded: its length and first words on the fold."""
    if redacted or not isinstance(thought, str):
        return Markup('<div class="ab-thinking ab-dim">thinking (redacted)</div>')
    return _fold(prose(thought, options),
                 Markup('<span class="ab-badge ab-badge-thinking" title="the model\'s reasoning before it answered">thinking</span> <span class="ab-dim">{} '
                        'characters</span> <span class="ab-thinking-preview ab-preview">{}</span>').format(
                     f"{len(thought):,}", _first_line(_MARKS.sub("", _first_line(thought, 200)), 90)),
                 folded=True, css="ab-thinking")


def render_block(block, options: Options = CELL) -> Markup:
    """One content block."""
    if isinstance(block, str):
        return prose(block, options)
    if not isinstance(block, dict):
        return pretty_json(block, options)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return prose(block["text"], options)
    if kind == "thinking":
        return thinking(block.get("thinking"), options, redacted=bool(block.get("redacted")))
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
        return prose(data, options)
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
