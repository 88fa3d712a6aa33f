"""Independent oracle: expected counts computed straight from raw transcript files.

Written from FORMAT.md (sections 2-8) and the project's identity rules only, without reading or
importing the importer, so that the importer can be checked against it. Standard library only.

Rules implemented here:

* Files are read as bytes and split on b"\\n" only (JSON strings may hold raw U+2028 etc.).
  Empty (whitespace-only) lines are ignored. A complete line that is not a JSON object is a bad line.
  A last segment without a trailing "\\n" is an entry if it parses as a JSON object, otherwise a
  pending line (a half-written append).
* Session id: the ``id`` of a first-line ``{"type":"session"}`` header; without a header, the file
  name stem (see :func:`stem_session_id`).
* Entry identity is (session id, entry id); entries without an ``id`` get ``"@<line index>"``, the
  0-based index of the physical line in its file (the header is line 0; empty and bad lines take an
  index too). An entry seen in several files (live, .reset/.deleted rename, checkpoint, backup)
  counts once; the first file in sorted path order wins.
* Usage: each model call once. Two assistant messages of one session with equal
  (message.timestamp, provider, model, canonical usage JSON) are the same call.
"""

import hashlib
import json
import re
from pathlib import Path

USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
EXEC_TOOL_NAMES = ("exec", "bash")

_EXCLUDED_SUFFIXES = (".trajectory.jsonl", ".acp-stream.jsonl", ".lock", ".tmp", ".zst")
_ARCHIVE_MARKERS = (".jsonl.reset.", ".jsonl.deleted.", ".jsonl.bak")
_ISO_UUID = re.compile(r"^.*_([^_]+)$")


# --------------------------------------------------------------------------------------------
# file discovery


def is_transcript_name(name):
    """True for names of transcript files (live, topic, fork, reset/deleted/backup, checkpoint)."""
    if name == "sessions.json" or ".corrupt" in name:
        return False
    if name.endswith(_EXCLUDED_SUFFIXES):
        return False
    return name.endswith(".jsonl") or any(marker in name for marker in _ARCHIVE_MARKERS)


def transcript_files(root):
    """All transcript files under ``root`` (recursively, hidden folders included), sorted."""
    root = Path(root)
    if root.is_file():
        return [root] if is_transcript_name(root.name) else []
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and is_transcript_name(path.name):
            found.append(path)
    return sorted(found)


def agent_of(path):
    """Agent id: name of the folder holding the nearest ``sessions/`` folder; None if there is none."""
    for parent in Path(path).parents:
        if parent.name == "sessions":
            return parent.parent.name
    return None


def group_files(samples_root, exclude=()):
    """{(server, agent): [files]} for a folder holding one subfolder per server.

    The server is the first path component below ``samples_root``. Files that do not sit under an
    ``<agent>/sessions/`` folder are returned under the key (server, None).
    """
    samples_root = Path(samples_root)
    groups = {}
    for path in transcript_files(samples_root):
        rel = path.relative_to(samples_root)
        if len(rel.parts) < 2:
            continue
        server = rel.parts[0]
        if server in exclude:
            continue
        groups.setdefault((server, agent_of(path)), []).append(path)
    return groups


# --------------------------------------------------------------------------------------------
# one file


def stem_session_id(name):
    """Session id from a file name, for files without a session header."""
    if ".checkpoint." in name:
        stem = name.split(".checkpoint.", 1)[0]
    elif ".jsonl" in name:
        stem = name.split(".jsonl", 1)[0]
    else:
        stem = name
    match = _ISO_UUID.match(stem)
    if match:  # <ISO-with-dashes>_<uuid>
        stem = match.group(1)
    return stem


def _parse_object(segment):
    try:
        value = json.loads(segment)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def read_file(path):
    """Parse one file: {"session_id", "header_id", "entries": [(entry_id, obj)], "bad_lines", "pending_lines"}."""
    path = Path(path)
    data = path.read_bytes()
    segments = data.split(b"\n")
    # After split, the last segment is what follows the final "\n" (b"" for a well-ended file).
    last_index = len(segments) - 1
    parsed = []  # (line index, obj)
    bad = pending = 0
    for index, segment in enumerate(segments):
        if not segment.strip():
            continue
        obj = _parse_object(segment)
        if index == last_index:  # not ended by "\n"
            if obj is None:
                pending += 1
            else:
                parsed.append((index, obj))
            continue
        if obj is None:
            bad += 1
        else:
            parsed.append((index, obj))

    header_id = None
    if parsed and parsed[0][0] == 0 and parsed[0][1].get("type") == "session":
        header = parsed[0][1]
        if isinstance(header.get("id"), str) and header["id"]:
            header_id = header["id"]
        parsed = parsed[1:]
    session_id = header_id if header_id is not None else stem_session_id(path.name)

    entries = []
    for index, obj in parsed:
        entry_id = obj.get("id")
        if entry_id is None or entry_id == "":
            entry_id = "@%d" % index
        entries.append((str(entry_id), obj))
    return {
        "session_id": session_id,
        "header_id": header_id,
        "entries": entries,
        "bad_lines": bad,
        "pending_lines": pending,
    }


# --------------------------------------------------------------------------------------------
# counting


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return value


def _blocks(message):
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _empty_counts():
    return {
        "sessions": 0,
        "messages": 0,
        "messages_by_role": {},
        "tool_calls": 0,
        "exec_calls": 0,
        "messages_with_thinking": 0,
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost_total": 0.0},
    }


def _add(total, part):
    for key in ("sessions", "messages", "tool_calls", "exec_calls", "messages_with_thinking"):
        total[key] += part[key]
    for role, n in part["messages_by_role"].items():
        total["messages_by_role"][role] = total["messages_by_role"].get(role, 0) + n
    for key, value in part["usage"].items():
        total["usage"][key] += value


def usage_key(message):
    """Identity of one model call: (timestamp, provider, model, canonical usage JSON)."""
    usage = message.get("usage")
    canonical = json.dumps(usage, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return (
        json.dumps(message.get("timestamp")),
        message.get("provider"),
        message.get("model"),
        hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
    )


def count_session(entries):
    """Counts for the unique entries [(entry_id, obj)] of one session."""
    counts = _empty_counts()
    counts["sessions"] = 1
    seen_calls = set()
    call_ids = set()  # a tool call is (session, toolCall id): copies of its message do not count again
    for _entry_id, obj in entries:
        if obj.get("type") != "message":
            continue
        message = obj.get("message")
        if not isinstance(message, dict):
            message = {}
        role = message.get("role")
        role = role if isinstance(role, str) else ""
        counts["messages"] += 1
        counts["messages_by_role"][role] = counts["messages_by_role"].get(role, 0) + 1
        blocks = _blocks(message)
        calls = []
        for b in blocks:
            if b.get("type") != "toolCall":
                continue
            cid = b.get("id") if isinstance(b.get("id"), str) else None
            if cid is not None:
                if cid in call_ids:
                    continue
                call_ids.add(cid)
            calls.append(b)
        counts["tool_calls"] += len(calls)
        counts["exec_calls"] += sum(1 for b in calls if b.get("name") in EXEC_TOOL_NAMES)
        if any(b.get("type") == "thinking" for b in blocks):
            counts["messages_with_thinking"] += 1
        usage = message.get("usage")
        if role == "assistant" and isinstance(usage, dict):
            key = usage_key(message)
            if key in seen_calls:
                continue
            seen_calls.add(key)
            for name in USAGE_KEYS:
                counts["usage"][name] += _number(usage.get(name))
            cost = usage.get("cost")
            if isinstance(cost, dict):
                counts["usage"]["cost_total"] += _number(cost.get("total"))
    return counts


def count_files(files):
    """Expected counts for transcript files that all belong to one (server, agent)."""
    sessions = {}  # session id -> {entry id: obj}, first file (sorted path order) wins
    bad = pending = 0
    for path in sorted(Path(f) for f in files):
        parsed = read_file(path)
        bad += parsed["bad_lines"]
        pending += parsed["pending_lines"]
        unique = sessions.setdefault(parsed["session_id"], {})
        for entry_id, obj in parsed["entries"]:
            unique.setdefault(entry_id, obj)

    result = _empty_counts()
    per_session = {}
    for session_id in sorted(sessions):
        counts = count_session(list(sessions[session_id].items()))
        per_session[session_id] = counts
        _add(result, counts)
    result["bad_lines"] = bad
    result["pending_lines"] = pending
    result["per_session"] = per_session
    return result


def sum_counts(results):
    """Totals over several count_files() results (per_session is dropped)."""
    total = _empty_counts()
    total["bad_lines"] = 0
    total["pending_lines"] = 0
    for result in results:
        _add(total, result)
        total["bad_lines"] += result["bad_lines"]
        total["pending_lines"] += result["pending_lines"]
    return total
