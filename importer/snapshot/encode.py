"""How the snapshot stores times and derived text compactly: the zone's UTC
offset at a moment (:class:`Offsets`), UTC text times as whole milliseconds
(:class:`Millis`), and a message's preview, thinking and tool-call columns as
pointers into its content blocks (:func:`derive_message`), each checked to give
back exactly the archive's value (shape.py's generated columns)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone


class Offsets:
    """UTC 'YYYY-MM-DD HH:MM:SS.fff' -> the zone's offset from UTC at that time, in seconds
    (cached per hour); None for a value that is not a time. The snapshot's ``local_time``
    and ``day`` are computed from it (shape.generated)."""

    def __init__(self, zone):
        self.zone = zone
        self.cache: dict[str, int | None] = {}

    def __call__(self, utc) -> int | None:
        if not utc or not isinstance(utc, str):
            return None
        hour = utc[:13]
        try:
            return self.cache[hour]
        except KeyError:
            pass
        try:
            dt = datetime.fromisoformat(hour + ":00:00").replace(tzinfo=timezone.utc)
            offset = dt.astimezone(self.zone).utcoffset() or timedelta(0)
            value: int | None = int(offset.total_seconds())
        except (ValueError, OverflowError):
            value = None
        self.cache[hour] = value
        return value


class Millis:
    """UTC 'YYYY-MM-DD HH:MM:SS.fff' -> (milliseconds since 1970, None), the snapshot's stored form of
    a time column (shape.TIME_COLUMNS), or (None, the value) for one not of that form (kept as it
    is): only a value that the generated text column gives back exactly is stored as a number. The
    minute's start is cached; seconds and milliseconds are read as digits."""

    def __init__(self):
        self.minutes: dict[str, int | None] = {}

    def __call__(self, value) -> tuple[int | None, str | None]:
        if value is None:
            return None, None
        if value.__class__ is not str or len(value) != 23 or value[19] != "." or value[16] != ":":
            return None, value
        minute = value[:16]
        base = self.minutes.get(minute, -1)
        if base == -1:
            base = self.minutes[minute] = _minute_ms(minute)
        seconds, fraction = value[17:19], value[20:23]
        if base is None or not (seconds.isascii() and fraction.isascii() and seconds.isdigit()
                                and fraction.isdigit()) or seconds > "59":
            return None, value
        return base + int(seconds) * 1000 + int(fraction), None


def _minute_ms(minute: str) -> int | None:
    """'YYYY-MM-DD HH:MM' -> its milliseconds since 1970, when it is written exactly as SQLite's
    strftime writes it back (after 1970); else None."""
    try:
        dt = datetime.fromisoformat(minute + ":00")
    except ValueError:
        return None
    if dt.tzinfo is not None or dt.strftime("%Y-%m-%d %H:%M") != minute or dt.year < 1970:
        return None
    return (dt - datetime(1970, 1, 1)) // timedelta(milliseconds=1)


def _preview_path(content, preview: str) -> str | None:
    """A JSON path into the content whose first 512 characters are the preview, or None."""
    if isinstance(content, str):
        return "$" if content[:512] == preview else None
    if not isinstance(content, list):
        return None
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        for key in ("text", "thinking"):
            value = block.get(key)
            if isinstance(value, str) and value[:512] == preview:
                return f"$[{i}].{key}"
        inner = block.get("content")
        if isinstance(inner, str) and inner[:512] == preview:
            return f"$[{i}].content"
        if isinstance(inner, list):
            for j, sub in enumerate(inner):
                if isinstance(sub, dict) and isinstance(sub.get("text"), str) and sub["text"][:512] == preview:
                    return f"$[{i}].content[{j}].text"
    return None


def derive_message(content_blocks, decoded, preview, thinking, tool_calls) -> tuple:
    """The helper columns of a message's generated ones (shape.MESSAGE_DERIVED), from its final
    (redacted) values: (preview_path, preview_kept, thinking_block, thinking_kept, tool_calls_from,
    tool_calls_kept). Each expression is checked to give the value exactly; where it would not,
    the value itself is kept."""
    ppath = pkept = tblock = tkept = cfrom = ckept = None
    readable = decoded is not None
    if preview is not None:
        ppath = _preview_path(decoded, preview) if readable else None
        if ppath is None:
            pkept = preview
    if thinking is not None:
        if readable and isinstance(decoded, list):
            for i, block in enumerate(decoded):
                if isinstance(block, dict) and block.get("type") == "thinking" and block.get("thinking") == thinking:
                    tblock = i
                    break
        if tblock is None:
            tkept = thinking
    if tool_calls is not None:
        # '[' || substr(content_blocks, from): the tool-call blocks are the content's last ones
        if (isinstance(content_blocks, str) and tool_calls[:1] == "[" and len(tool_calls) > 1
                and content_blocks.endswith(tool_calls[1:])):
            cfrom = len(content_blocks) - len(tool_calls) + 2
        else:
            ckept = tool_calls
    return ppath, pkept, tblock, tkept, cfrom, ckept
