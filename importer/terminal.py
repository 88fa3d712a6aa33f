"""Transcript text written to a terminal.

Titles, first prompts, agent and server names, models, commands: whatever an agent or a file
said reaches ``agentbase report`` and ``agentbase stats``. A terminal obeys what it is sent: an
OSC sequence retitles the window or hides a link behind harmless text (OSC 8), a CSI one moves the
cursor over earlier lines or recolours them, a DCS one talks to the terminal itself. So every text
from a transcript goes through :func:`clean` before it is printed:

- escape sequences are removed whole: CSI (``ESC [`` or C1 ``0x9b``, its parameters and final
  byte), OSC, DCS, SOS, PM and APC strings (``ESC ]``, ``ESC P``, ``ESC X``, ``ESC ^``, ``ESC _``
  or their C1 forms, up to BEL or ST), and the two-byte ``ESC x`` ones; an OSC 8 link keeps its
  text and loses its target;
- a tab, a newline or any other line break becomes a space (a cell of a table is one line);
- every other C0 or C1 control character, DEL, and the bidirectional overrides (which reorder
  what is shown) become ``�`` (U+FFFD): visible, inert.

:func:`json_text` is JSON for the terminal: orjson escapes the C0 controls already; DEL, the
C1 controls, the line and paragraph separators and the bidirectional overrides are escaped too
(``\\u009b``), so the document is the same and nothing in it is a control.
"""

from __future__ import annotations

import re

_ST = r"(?:\x07|\x1b\\|\x9c)"  # a string's end: BEL, ESC \, or C1 ST
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*" + _ST +  # OSC, DCS, SOS, PM, APC: whole
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # ESC and one more (an unterminated string's ESC ] too)
)
_BREAK = re.compile(r"[\t\n\r\x0b\x0c\x85\u2028\u2029]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(text) -> str:
    """``text`` (any value: str() of it) safe to print on a terminal, on one line."""
    text = text if isinstance(text, str) else str(text)
    if text.isprintable():  # the common case: nothing to do
        return text
    text = _SEQUENCE.sub("", text)
    text = _BREAK.sub(" ", text)
    return _CONTROL.sub("\ufffd", text)


def json_text(document: str) -> str:
    """A JSON document (orjson's output) with DEL, C1 controls, U+2028/U+2029 and bidi overrides escaped."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
