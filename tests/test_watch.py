"""agentbase watch: a new line in a local transcript reaches the snapshot's search without anyone
running anything; sync does not overlap it; SIGTERM stops it cleanly."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from importer.search import fts_query
from transcripts import SID, Chain, conversation, header, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]


def _found(snapshot: Path, words: str) -> bool:
    if not snapshot.is_file():
        return False
    try:
        conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?",
                                (fts_query(words),)).fetchone()[0] > 0
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def _wait(predicate, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_watch_follows_a_growing_transcript_and_stops_on_sigterm(tmp_path):
    state = tmp_path / "state"
    sd = sessions_dir(state)
    objs = conversation(turns=2)
    path = write(sd / f"{SID}.jsonl", objs)
    db, snapshot = tmp_path / "a.db", tmp_path / "snap" / "snapshot.db"
    env = dict(os.environ, AGENTBASE_HOME=str(tmp_path / "home"), AGENTBASE_CONFIG=str(tmp_path / "none.yml"))
    proc = subprocess.Popen([sys.executable, "-m", "importer", "watch", str(state), "--db", f"sqlite:///{db}",
                             "-o", str(snapshot)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: _found(snapshot, "answer 1")), "the first cycle never exported"
        # an agent writes a line
        c = Chain(start=100, parent=objs[-1]["id"])
        line = json.dumps(c.user("zebrafinch migration 斑胸草雀")) + "\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
        assert _wait(lambda: _found(snapshot, "zebrafinch")), "the new line never became searchable"
        assert _found(snapshot, "斑胸草雀")
        # cron's sync finds the watch holding the lock: nothing to do, and no error to mail
        sync = subprocess.run([sys.executable, "-m", "importer", "sync", "--db", f"sqlite:///{db}",
                               "--config", str(_config(tmp_path, state))], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=60)
        assert sync.returncode == 0 and "agentbase watch" in sync.stderr, sync.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-500:]
    assert "watch stopped" in err and "Traceback" not in err


def _config(tmp_path: Path, state: Path) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(f"servers:\n  - name: here\n    local: true\n    state_dir: {state}\n")
    return path
