"""A growing archive for the live pages' tests: a made-up transcript that `agentbase watch` follows
into a snapshot, lines appended to it as an agent would write them, and what the snapshot holds read
with sqlite3 (the tests' oracle)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from transcripts import SID, Chain, conversation, header, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]
OTHER_SID = "5e55a0a0-0000-4000-8000-00000000000b"


def version(snapshot: Path) -> str:
    """``<build id>:<update number>`` of the snapshot, read from its marker ('' before it exists)."""
    try:
        conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    except sqlite3.Error:
        return ""
    try:
        found = dict(conn.execute("SELECT key, value FROM agentbase_snapshot "
                                  "WHERE key IN ('snapshot_id', 'generation')"))
        return f"{found['snapshot_id']}:{found['generation']}" if len(found) == 2 else ""
    except sqlite3.Error:
        return ""
    finally:
        conn.close()


def query(snapshot: Path, sql: str, params=()) -> list[tuple]:
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def wait(predicate, timeout: float = 60.0, step: float = 0.05):
    """The predicate's first true value within ``timeout`` seconds, else None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(step)
    return None


class Archive:
    """A transcript (``turns`` rounds of user, tool call, result, answer) and `agentbase watch`
    keeping a snapshot of it; ``append`` adds lines, ``add_session`` a second transcript."""

    def __init__(self, root: Path, turns: int = 6):
        self.root = root
        self.state = root / "state"
        self.dir = sessions_dir(self.state)
        objs = conversation(turns=turns)
        self.path = write(self.dir / f"{SID}.jsonl", objs)
        self.chain = Chain(start=1000, parent=objs[-1]["id"], minute=turns * 4 + 1)
        self.db, self.snapshot = root / "archive.db", root / "snap" / "snapshot.db"
        self.env = dict(os.environ, AGENTBASE_HOME=str(root / "home"), AGENTBASE_CONFIG=str(root / "none.yml"))
        self.log = root / "watch.txt"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "importer", "watch", str(self.state), "--db",
                                          f"sqlite:///{self.db}", "-o", str(self.snapshot)], cwd=REPO,
                                         env=self.env, stdout=out, stderr=subprocess.STDOUT)
        if not wait(lambda: version(self.snapshot), timeout=90):
            self.stop()
            raise AssertionError("agentbase watch never wrote the snapshot: " + self.log.read_text()[-800:])

    def session_id(self, uuid: str = SID) -> int:
        return query(self.snapshot, "SELECT id FROM sessions WHERE session_uuid = ?", (uuid,))[0][0]

    def append(self, *objs: dict, path: Path | None = None) -> str:
        """Lines written as an agent writes them; returns the snapshot's version before them."""
        before = version(self.snapshot)
        with open(path or self.path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs))
        return before

    def add_session(self, uuid: str = OTHER_SID, text: str = "a second session") -> str:
        before = version(self.snapshot)
        c = Chain(start=5000)
        write(self.dir / f"{uuid}.jsonl", [header(uuid), c.user(text), c.assistant([{"type": "text", "text": "ok"}])])
        return before

    def updated(self, before: str, timeout: float = 60.0) -> str:
        """The snapshot's version once an export changed it from ``before``."""
        found = wait(lambda: (lambda v: v if v and v != before else None)(version(self.snapshot)), timeout)
        assert found, "the watch did not export the change: " + self.log.read_text()[-800:]
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
