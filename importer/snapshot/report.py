"""What an export reports: rows, size, time, redactions, the way it took and why."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ExportReport:
    path: str
    timezone: str
    rows: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    elapsed_s: float = 0.0
    secrets_redacted: int | None = None  # None: exported with --no-redact
    unchanged: bool = False  # nothing new in the store since the snapshot last saw it
    mode: str = "full"  # full (a new file) or update (in place)
    why_full: str | None = None  # what made a full build necessary
    changed: dict[str, int] = field(default_factory=dict)  # an update's rows written or removed, per table
    sessions_changed: int = 0

    def summary(self) -> str:
        if self.unchanged:
            return f"snapshot {self.path} unchanged: nothing new in the store since it was made"
        redacted = ("credentials kept (--no-redact)" if self.secrets_redacted is None
                    else f"{self.secrets_redacted} credentials redacted")
        counts = ", ".join(f"{n} {t}" for t, n in self.rows.items() if t in ("sessions", "messages", "tool_calls"))
        if self.mode == "update":
            changed = ", ".join(f"{n} {t}" for t, n in self.changed.items() if n) or "no rows"
            return (f"snapshot {self.path}: {counts}; updated in place ({self.sessions_changed} sessions changed: "
                    f"{changed} written or removed); {redacted}; {self.bytes / 2**20:.1f} MB; "
                    f"{self.elapsed_s:.2f} s")
        why = f" (built in full: {self.why_full})" if self.why_full else ""
        return (f"snapshot {self.path}: {counts}; {redacted}; {self.bytes / 2**20:.1f} MB; "
                f"time zone {self.timezone}; {self.elapsed_s:.1f} s{why}")
