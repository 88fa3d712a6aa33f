"""``agentbase watch``: keep the archive and the snapshot up to date as agents write.

Local sources are followed as their files change (inotify, FSEvents... through
watchdog); remote servers of the config file are polled every ``interval``
seconds. Each change is imported (the ordinary incremental import: what did
not change is not even opened) and applied to the snapshot. The run holds
sync's lock for as long as it runs, so cron's ``agentbase sync`` and a watch
never overlap (sync says a watch is running and exits quietly). Idle, it
sleeps: no polling of local files, no timer faster than the remote interval.
SIGTERM and SIGINT stop it cleanly after the cycle in progress.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

log = logging.getLogger("agentbase")

DEBOUNCE_S = 0.3  # changes closer than this are one import
ERROR_BACKOFF_S = 30.0


@dataclass
class WatchPlan:
    """What to follow: local paths (watched for changes) and what a cycle runs."""

    local_paths: list[str]
    import_local: Callable[[], object]  # imports every local source
    import_remote: Callable[[], object] | None  # polls the remote servers (None: there are none)
    export: Callable[[], object]  # brings the snapshot up to date
    interval: float = 60.0
    ignore: tuple[str, ...] = ()  # paths (prefixes) whose changes are ours: the store, the snapshot
    say: Callable[[str], None] = print
    changes: int = 0
    cycles: int = 0
    errors: list[str] = field(default_factory=list)


class _Changed:
    """A watchdog handler that only notes that something changed."""

    def __init__(self, event: threading.Event, ignore: tuple[str, ...]):
        self.event = event
        self.ignore = ignore

    def dispatch(self, ev) -> None:
        path = getattr(ev, "dest_path", "") or getattr(ev, "src_path", "")
        if isinstance(path, bytes):
            path = path.decode("utf-8", "replace")
        if ev.event_type in ("opened", "closed_no_write") or any(part in path for part in self.ignore):
            return
        self.event.set()


def watch(plan: WatchPlan, stop: threading.Event | None = None) -> int:
    """Run until ``stop`` is set (SIGTERM/SIGINT set it when this runs in the main thread).
    Returns the exit status."""
    from watchdog.observers import Observer

    stop = stop or threading.Event()
    changed = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: (stop.set(), changed.set()))
    observer = Observer()
    # Our own writes (the store, the snapshot, their journals) must not wake us.
    handler = _Changed(changed, ignore=(".lock", "-journal", ".tmp-", *plan.ignore))
    watched = 0
    for path in plan.local_paths:
        if Path(path).exists():
            observer.schedule(handler, path, recursive=True)
            watched += 1
    observer.start()
    plan.say(f"watching {watched} local path(s)" + (f"; polling remote servers every {plan.interval:g} s"
                                                     if plan.import_remote else "") + "; Ctrl-C or SIGTERM stops")
    next_remote = time.monotonic() if plan.import_remote else float("inf")
    pending_local = True  # one cycle at start: whatever changed while nobody watched
    try:
        while not stop.is_set():
            now = time.monotonic()
            if not pending_local and now < next_remote:
                changed.wait(timeout=min(next_remote - now, 3600.0))
                if stop.is_set():
                    break
                if changed.is_set():
                    pending_local = True
            if pending_local:
                # let a burst of writes settle into one import
                while changed.is_set() and not stop.is_set():
                    changed.clear()
                    stop.wait(DEBOUNCE_S)
            remote_due = time.monotonic() >= next_remote
            if not (pending_local or remote_due) or stop.is_set():
                continue
            try:
                if pending_local:
                    plan.changes += 1
                    plan.import_local()
                if remote_due:
                    plan.import_remote()
                plan.export()
                plan.cycles += 1
            except Exception as exc:  # one bad cycle never ends the watch
                log.debug("watch cycle failed", exc_info=True)
                text = str(exc).strip().splitlines()
                message = f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
                plan.errors.append(message)
                plan.say(f"error: {message}; trying again in {ERROR_BACKOFF_S:g} s")
                stop.wait(ERROR_BACKOFF_S)
            pending_local = False
            if remote_due:
                next_remote = time.monotonic() + plan.interval
    finally:
        observer.stop()
        observer.join(timeout=10)
    plan.say("watch stopped")
    return 0
