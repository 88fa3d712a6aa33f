"""Small OpenClaw SQLite stores built at test time, with OpenClaw's own DDL.

The DDL is tests/fixtures/openclaw/*.sql, extracted from the openclaw@2026.9.6
npm package by tests/fixtures/openclaw/extract_ddl.py. Everything written into
the stores here is made up (tests/transcripts.py builds the entries).

The schema's CHECK on ``transcript_events.navigation_json`` calls
``octet_length()``, which SQLite has since 3.43 (OpenClaw's Node bundles a newer
SQLite than many Pythons): writers register it as a Python function, the DDL
stays as shipped. Readers never need it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import zstandard

from transcripts import Chain, header

DDL = Path(__file__).resolve().parent / "fixtures" / "openclaw"
SCHEMAS = {23: "agent-schema-23.sql", "prerelease": "agent-schema-prerelease.sql", 1: "agent-schema-1.sql"}
# Made up, and never to be found in an archive: the auth_profile_* tables hold it.
SECRET = "sk-made-up-credential-7d1f0c9e"
NOW_MS = 1796035000000  # 2026-11-30 10:36:40 UTC
NAVIGATION = json.dumps({
    "version": 1, "report": {"kind": "canonical"}, "navigation": {}, "reset": {}, "model": {},
    "modelBytes": 0, "modelWithoutCheckpointBytes": 0, "withoutCustomDataBytes": 0,
})


def compact(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _octet_length(value):
    if value is None:
        return None
    return len(value.encode("utf-8")) if isinstance(value, str) else len(bytes(value))


def writer(path: Path) -> sqlite3.Connection:
    """A connection that writes like the gateway: WAL, autocommit unless told."""
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=5)
    conn.create_function("octet_length", 1, _octet_length, deterministic=True)
    conn.execute("PRAGMA journal_mode = WAL")
    return conn


def create_agent_store(path: Path, schema=23, agent_id: str = "main") -> sqlite3.Connection:
    """A new per-agent store with the given schema (23, "prerelease" or 1)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = writer(path)
    conn.executescript((DDL / SCHEMAS[schema]).read_text(encoding="utf-8"))
    version = {23: 23, "prerelease": 9, 1: 1}[schema]
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("INSERT INTO schema_meta (meta_key, role, schema_version, agent_id, app_version, created_at, "
                 "updated_at) VALUES ('primary', 'agent', ?, ?, '2026.9.6', ?, ?)", (version, agent_id, NOW_MS, NOW_MS))
    conn.execute("INSERT INTO auth_profile_store (store_key, store_json, updated_at) VALUES (?, ?, ?)",
                 ("default", compact({"profiles": {"mock": {"apiKey": SECRET}}}), NOW_MS))
    conn.execute("INSERT INTO auth_profile_state (state_key, state_json, updated_at) VALUES (?, ?, ?)",
                 ("default", compact({"lastGood": SECRET}), NOW_MS))
    return conn


def create_state_db(state_dir: Path, stores: list[tuple[str, str]]) -> None:
    """``state/openclaw.sqlite`` with ``agent_databases`` rows (agent id, stored path)."""
    path = state_dir / "state" / "openclaw.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = writer(path)
    conn.executescript((DDL / "state-schema.sql").read_text(encoding="utf-8"))
    conn.execute("PRAGMA user_version = 18")
    for agent_id, stored in stores:
        conn.execute("INSERT INTO agent_databases (agent_id, path, schema_version, last_seen_at) VALUES (?, ?, 23, ?)",
                     (agent_id, stored, NOW_MS))
    conn.close()


def conversation_events(sid: str, turns: int = 2, start: int = 1, big: int = 0, version: int = 4) -> list[dict]:
    """A session as events: header, model_change, then user / assistant (exec) /
    toolResult / assistant turns. ``big`` > 0 makes each tool result that many
    bytes long (made-up text), so that it is worth compressing."""
    c = Chain(start=start)
    out = [header(sid, version=version, timestamp="2026-11-30T10:00:00.000Z")]
    out.append(c.entry("model_change", provider="mock", modelId="mock-model"))
    for i in range(turns):
        call = f"call_{sid[:4]}_{start}_{i}"
        out.append(c.user(f"question {i} 你好"))
        out.append(c.assistant([
            {"type": "thinking", "thinking": f"plan {i}", "thinkingSignature": "reasoning_content"},
            {"type": "toolCall", "id": call, "name": "exec", "arguments": {"command": f"echo {i}"}}]))
        text = f"output {i} " + ("lorem ipsum " * (big // 12 + 1))[:big] if big else f"output {i}"
        out.append(c.result(call, text, details={"status": "completed", "exitCode": 0, "durationMs": 5}))
        out.append(c.assistant([{"type": "text", "text": f"answer {i}"}]))
    return out


def more_events(sid: str, after: list[dict], turns: int = 1) -> list[dict]:
    """Turns that continue ``after`` (ids go on from its last entry)."""
    last = after[-1]
    start = int(last["id"], 16) + 1
    c = Chain(start=start, parent=last["id"], minute=start + 10)
    out = []
    for i in range(turns):
        out.append(c.user(f"follow-up {start}-{i}"))
        out.append(c.assistant([{"type": "text", "text": f"reply {start}-{i}"}]))
    return out


def add_window(conn: sqlite3.Connection, sid: str, key: str, current: bool = True, **cols) -> None:
    """A session_nodes row for ``key`` (when missing) and a session_windows row."""
    node = {k[5:]: cols.pop(k) for k in list(cols) if k.startswith("node_")}
    if current or not conn.execute("SELECT 1 FROM session_nodes WHERE session_key = ?", (key,)).fetchone():
        names = ["session_key", "current_session_id", "entry_json", "updated_at", *node]
        values = [key, sid, compact({"sessionId": sid}), NOW_MS, *node.values()]
        updates = ", ".join(f"{n} = excluded.{n}" for n in ["current_session_id", *node])
        conn.execute(f"INSERT INTO session_nodes ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
                     f"ON CONFLICT (session_key) DO UPDATE SET {updates}", values)
    names = ["session_id", "session_key", "created_at", "updated_at", *cols]
    conn.execute(f"INSERT INTO session_windows ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                 [sid, key, NOW_MS, NOW_MS, *cols.values()])


def add_events(conn: sqlite3.Connection, sid: str, events: list[dict], start_seq: int = 0,
               compress: set[int] = frozenset(), prerelease: bool = False) -> None:
    """Rows of transcript_events; seqs in ``compress`` are stored as event_zstd
    (one frame, level 1, checksum, content size, no dictionary: as OpenClaw)."""
    for seq, obj in enumerate(events, start_seq):
        text = compact(obj)
        if seq in compress:
            raw = text.encode("utf-8")
            blob = zstandard.ZstdCompressor(level=1, write_checksum=True).compress(raw)
            conn.execute("INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_zstd, "
                         "event_utf8_bytes, navigation_json) VALUES (?, ?, NULL, ?, ?, ?, ?)",
                         (sid, seq, NOW_MS + seq, blob, len(raw), NAVIGATION))
        elif prerelease:
            conn.execute("INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES (?, ?, ?, ?)",
                         (sid, seq, text, NOW_MS + seq))
        else:
            conn.execute("INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES (?, ?, ?, ?)",
                         (sid, seq, text, NOW_MS + seq))


def set_watermark(conn: sqlite3.Connection, sid: str, generation: str) -> None:
    conn.execute("INSERT INTO transcript_rewrite_watermarks (session_id, generation, updated_at) VALUES (?, ?, ?) "
                 "ON CONFLICT (session_id) DO UPDATE SET generation = excluded.generation", (sid, generation, NOW_MS))


def zstd_stream(data: bytes) -> bytes:
    """A streamed zstd frame: no content size in its header (as OpenClaw's archives)."""
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    return cobj.compress(data) + cobj.flush()


def move_to_cold(conn: sqlite3.Connection, sid: str, store_path: Path, storage: str = "file",
                 generation: str = "0" * 32) -> dict:
    """Move a session's events into a cold archive (OpenClaw's record format:
    header, event, identity, index and fts records), in ``sessions/cold/`` or
    embedded; its transcript_events rows are deleted, as OpenClaw does."""
    rows = [(seq, text if text is not None else zstandard.ZstdDecompressor().decompress(blob).decode(), created)
            for seq, text, blob, created in conn.execute(
                "SELECT seq, event_json, event_zstd, created_at FROM transcript_events WHERE session_id = ? "
                "ORDER BY seq", (sid,))]
    records = [{"kind": "header", "version": 1, "sessionId": sid, "generation": generation}]
    records += [{"kind": "event", "row": {"seq": s, "event_json": e, "created_at": c}} for s, e, c in rows]
    records.append({"kind": "identity", "row": {"event_id": "00000001", "seq": 1, "event_type": "model_change",
                                                 "parent_id": None, "message_idempotency_key": None,
                                                 "created_at": NOW_MS}})
    records.append({"kind": "fts", "row": {"text": "made-up search text", "message_id": "00000003",
                                            "role": "user", "timestamp": NOW_MS}})
    envelope = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
    data = zstd_stream(envelope)
    sha = hashlib.sha256(data).hexdigest()
    name = f"{sha}.jsonl.zst"
    raw_bytes = sum(len(e.encode()) for _, e, _ in rows) + len(rows) - 1
    if storage == "file":
        cold_dir = store_path.parent.parent / "sessions" / "cold"
        cold_dir.mkdir(parents=True, exist_ok=True)
        (cold_dir / name).write_bytes(data)
    conn.execute(
        "INSERT INTO session_transcript_cold_archives (session_id, generation, archive_name, archive_sha256, "
        "event_count, raw_bytes, archive_bytes, last_seq, archived_at, storage, archive_blob) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (sid, generation, name, sha, len(rows), raw_bytes, len(data), rows[-1][0], NOW_MS + 10_000, storage,
         data if storage == "sqlite" else None))
    conn.execute("DELETE FROM transcript_events WHERE session_id = ?", (sid,))
    return {"name": name, "sha256": sha, "events": len(rows)}


def add_transcript_archive(conn: sqlite3.Connection, sid: str, key: str, events: list[dict], reason: str = "deleted",
                           encoding: str = "zstd", publish_dir: Path | None = None,
                           generation: str = "409be3ea4b7c4c29b6f289ea3168431c",
                           stamp: str = "2026-11-30T10-49-41.860Z") -> str:
    """A deleted/reset session kept whole in session_transcript_archives, and
    its published copy ``<sid>.jsonl.<reason>.<ts>.<generation>[.zst]``."""
    text = "".join(compact(e) + "\n" for e in events).encode()
    data = zstd_stream(text) if encoding == "zstd" else text
    name = f"{sid}.jsonl.{reason}.{stamp}.{generation}" + (".zst" if encoding == "zstd" else "")
    conn.execute(
        "INSERT INTO session_transcript_archives (session_id, generation, session_key, reason, encoding, "
        "archive_blob, archive_sha256, archive_name, created_at, published_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (sid, generation, key, reason, encoding, data, hashlib.sha256(data).hexdigest(), name, NOW_MS + 20_000,
         NOW_MS + 20_000 if publish_dir else None))
    if publish_dir is not None:
        publish_dir.mkdir(parents=True, exist_ok=True)
        (publish_dir / name).write_bytes(data)
    return name


def jsonl(events: list[dict]) -> bytes:
    return "".join(compact(e) + "\n" for e in events).encode()
