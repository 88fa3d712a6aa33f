"""A made-up snapshot for the dashboard: two servers with an agent called ``main`` on each, an
``ops`` agent, a Codex agent, a priced and an unpriced model, activity over five weeks at
different hours, and names that hold markup. Every text here is invented.

Days and hours are local to Asia/Shanghai (UTC+8), the export's time zone: an entry at 20:00 UTC
is on the next local day, at 04:00.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import codex_fixtures as CF
from importer.snapshot import export_snapshot
from importer.store import open_store
from transcripts import Chain, do_import, exec_call, header, sessions_dir, write

ZONE = "Asia/Shanghai"
LATEST_LOCAL_DAY = "2026-04-06"
HOSTILE_AGENT = "<img src=x onerror=window.__xss_agent=1>"
HOSTILE_MODEL = "<script>window.__xss_model=1</script>"


def _stamp(objs: list[dict], start: datetime) -> list[dict]:
    """Entries one second apart from ``start`` (UTC)."""
    for k, o in enumerate(objs):
        if isinstance(o.get("timestamp"), str):
            o["timestamp"] = (start + timedelta(seconds=k)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return objs


def _unpriced(message: dict) -> None:
    """A local model's call: a recorded cost of 0 with tokens, which is unpriced (never $0)."""
    message["provider"], message["model"] = "ollama", "local-model"
    message["usage"]["cost"] = {k: 0 for k in message["usage"]["cost"]}


def session(sid: str, start: datetime, turns: int, cost: float = 0.01, model: str | None = None,
            provider: str | None = None, unpriced_every: int = 0, all_unpriced: bool = False) -> list[dict]:
    """``turns`` rounds of user / assistant with an exec call / result / assistant answer. Every
    ``unpriced_every``-th answer is from a local model with a recorded cost of 0 (unpriced);
    ``all_unpriced``: every call is."""
    c = Chain()
    objs = [header(sid)]
    for i in range(turns):
        objs.append(c.user(f"turn {i}: check the service"))
        call = c.assistant([exec_call(f"call_{sid[:4]}_{i}", f"systemctl status app-{i}")], cost=cost, tokens=1000)
        if model:
            call["message"]["model"] = model
        if provider:
            call["message"]["provider"] = provider
        objs.append(call)
        objs.append(c.result(f"call_{sid[:4]}_{i}", f"app-{i} active",
                             details={"status": "completed", "exitCode": 0, "durationMs": 10}))
        answer = c.assistant([{"type": "text", "text": f"app-{i} is fine"}], cost=cost / 2, tokens=400)
        if all_unpriced or (unpriced_every and i % unpriced_every == 0):
            _unpriced(answer["message"])
        if all_unpriced:
            _unpriced(call["message"])
        objs.append(answer)
    return _stamp(objs, start)


def utc(day: str, hour: int, minute: int = 0) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, minute=minute, tzinfo=timezone.utc)


def build(tmp: Path, name: str = "snapshot.db") -> Path:
    """Import the made-up servers and export the snapshot (Asia/Shanghai days)."""
    alpha, beta = tmp / "alpha", tmp / "beta"
    n = 0

    def sid() -> str:
        nonlocal n
        n += 1
        return f"{n:08x}-0000-4000-8000-{n:012x}"

    # alpha/main: every few days for five weeks, mornings (09:00 local = 01:00 UTC), unpriced calls too
    for k, day in enumerate(["2026-03-02", "2026-03-09", "2026-03-16", "2026-03-23", "2026-03-30",
                             "2026-04-01", "2026-04-03", "2026-04-05", "2026-04-06"]):
        write(sessions_dir(alpha, "main") / f"{sid()}.jsonl",
              session(f"{n:08x}-0000-4000-8000-{n:012x}", utc(day, 1, 10 * k % 60), turns=2 + k % 3,
                      cost=0.02, unpriced_every=2))
    # beta/main: the same name on another server: evenings (20:00 UTC = 04:00 local, the next day)
    for k, day in enumerate(["2026-03-20", "2026-03-31", "2026-04-02", "2026-04-04", "2026-04-05"]):
        write(sessions_dir(beta, "main") / f"{sid()}.jsonl",
              session(f"{n:08x}-0000-4000-8000-{n:012x}", utc(day, 20, 5 * k), turns=3, cost=0.5,
                      model="claude-big"))
    # beta/ops: afternoons, with a model name that is markup
    for k, day in enumerate(["2026-04-03", "2026-04-06"]):
        write(sessions_dir(beta, "ops") / f"{sid()}.jsonl",
              session(f"{n:08x}-0000-4000-8000-{n:012x}", utc(day, 6, 0), turns=4, cost=0.003,
                      model=HOSTILE_MODEL))
    # beta: an agent whose name is markup
    write(sessions_dir(beta, HOSTILE_AGENT) / f"{sid()}.jsonl",
          session(f"{n:08x}-0000-4000-8000-{n:012x}", utc("2026-04-04", 3), turns=1, cost=0.001))
    # alpha/local: only a local model, every call unpriced
    write(sessions_dir(alpha, "local") / f"{sid()}.jsonl",
          session(f"{n:08x}-0000-4000-8000-{n:012x}", utc("2026-04-01", 12), turns=2, all_unpriced=True))
    # beta: standalone pi (source pi), late at night
    pi_home = tmp / "beta-pi" / ".pi" / "agent" / "sessions" / "--home-dev-app--"
    pi_sid = sid()
    write(pi_home / f"2026-04-02T15-00-00-000Z_{pi_sid}.jsonl",
          session(pi_sid, utc("2026-04-02", 15), turns=2, cost=0.04))
    # alpha: Codex (priced from the table: cost_source computed)
    codex_home = tmp / "alpha-codex" / ".codex" / "sessions"
    for k, day in enumerate(["2026-03-28", "2026-04-06"]):
        ms = int(utc(day, 2, 30).timestamp() * 1000)
        CF.conversation(CF.uuid7(ms, k), start_ms=ms, turns=2).write_in(codex_home)

    archive = tmp / "archive.db"
    do_import(archive, alpha, server="alpha")
    do_import(archive, beta, server="beta")
    do_import(archive, codex_home, server="alpha")
    do_import(archive, pi_home.parent.parent.parent, server="beta")
    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp / name, timezone=ZONE)
    finally:
        store.close()
    return tmp / name
