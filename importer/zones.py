"""Time zones: this machine's zone name, and an IANA name resolved for the
snapshot's local days (an unknown name is a one-line error)."""

from __future__ import annotations

import os
from datetime import timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .store import StoreError


def local_zone_name() -> str:
    """The machine's IANA time zone: $TZ, /etc/localtime's link, /etc/timezone, else UTC."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        return tz
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    try:
        name = Path("/etc/timezone").read_text().strip()
        if name:
            return name
    except OSError:
        pass
    return "UTC"


def resolve_zone(name: str | None) -> tuple[str, ZoneInfo | timezone]:
    name = name or local_zone_name()
    if name.upper() in ("UTC", "Z", "ETC/UTC"):
        return "UTC", timezone.utc
    try:
        return name, ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise StoreError(f"unknown time zone {name!r}: use an IANA name such as Asia/Shanghai or UTC") from None
