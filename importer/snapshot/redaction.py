"""The export's second pass of redaction, row by row, and ``agentbase secrets``' dry run of it.

redact.py finds credentials (its detector) and replaces a set of them in any text (its
SecretSet); this module applies them to the snapshot's rows: which columns of a row are replaced,
how a JSON column is replaced inside its strings, which replacements count in the redactions table,
and the previews cut again from a message's or an entry's replaced text (parser.py's previews,
which themselves never cut a credential in two: they use the detector). It stands above both, so
neither of them reaches up to the other.

:func:`scan_store` is what ``agentbase secrets`` reports: the export's two passes over the store
(the same detector, the same set, the same counting), keeping no value.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .. import parser as P
from .. import redact as R
from .. import shape
from ..terminal import clean


# The texts the importer cuts at a length (parser.cut_text): previews, titles, paths at 512
# characters, labels and names at 255.
CUT_AT = {"text_preview": P.PREVIEW_CHARS, "title": 512, "cwd": 512, "parent_session": 512, "label": 255,
          "display_name": 255, "spawned_by": 255, "project": 255}
# JSON columns that keep such cut texts among their strings (a kind's resume state, a header)
CUT_IN_JSON = ("resume_state", "header_json")
_CUT_LENGTHS = frozenset(CUT_AT.values())


def _cut_heads(secrets: "R.SecretSet", value: Any, counts: Counter) -> Any:
    """``value`` (decoded JSON) with every string of a cut length replaced by replace_cut_head."""
    if isinstance(value, str):
        return secrets.replace_cut_head(value, counts)[0] if len(value) in _CUT_LENGTHS else value
    if isinstance(value, list):
        return [_cut_heads(secrets, v, counts) for v in value]
    if isinstance(value, dict):
        return {k: _cut_heads(secrets, v, counts) for k, v in value.items()}
    return value


def _cut_json(secrets: "R.SecretSet", text: str) -> tuple[str, Counter]:
    counts: Counter = Counter()
    if not any(len(m) >= min(_CUT_LENGTHS) for m in text.split('"')):
        return text, counts  # no string long enough
    try:
        decoded = R._loads(text)
    except ValueError:
        return text, counts
    fresh = _cut_heads(secrets, decoded, counts)
    return (R._dumps(fresh) if counts else text), counts


def counted(table: str, column: str, columns: dict[str, Any], redact_columns: dict) -> bool:
    """Whether replacements in this column count (the redactions table): the
    columns the detector reads, but a preview cut from a message's content."""
    if column not in redact_columns.get(table, ()):
        return False
    return not (column == "text_preview" and columns.get("content_blocks") is not None)


def _batch_texts(rows: list[tuple]) -> list[str]:
    """Each row's values joined by NUL, without a Python step per value
    (numbers come along as digits: no value of the set is a number)."""
    return ["\x00".join(map(str, filter(None, row))) for row in rows]


def redact_rows(secrets: R.SecretSet, table: str, names: tuple[str, ...], rows: list[tuple],
                redact_columns: dict) -> dict[int, tuple[dict, list, Any]]:
    """Pass 2 for a batch: {index in rows: redact_row's result} for the rows
    that hold a value (found with one RE2 pass over the batch)."""
    out = {}
    hit = secrets.rows_hit(_batch_texts(rows))
    cut = [(j, CUT_AT[name]) for j, name in enumerate(names) if name in CUT_AT]
    cut += [(j, 0) for j, name in enumerate(names) if name in CUT_IN_JSON]
    # and the rows with a text cut at its limit: it may end in a credential's head. Such a row
    # that holds no whole value (most of them: every long message's preview) only has its cut
    # texts looked at, not every column searched again (a cost per row of the tree).
    heads = set()
    if cut:
        may_end_in_head = secrets.may_end_in_head
        heads = {i for i, row in enumerate(rows) if i not in hit
                 and any(isinstance(row[j], str) and ((len(row[j]) == limit and may_end_in_head(row[j]))
                                                      or (not limit and len(row[j]) > 255))
                         for j, limit in cut)}
    for i in sorted(hit | heads):
        if i in hit:
            got = redact_row(secrets, table, names, rows[i], redact_columns, checked=True)
        else:
            got = _cut_row(secrets, table, dict(zip(names, rows[i])), {}, [], redact_columns)
            if not got[0] and not got[1]:
                continue
        if got is not None:
            out[i] = got
    return out


def redact_row(secrets: R.SecretSet, table: str, names: tuple[str, ...], row: tuple,
               redact_columns: dict, checked: bool = False) -> tuple[dict, list, Any] | None:
    """Pass 2 for one row: ``(patch {column: new value}, [(column, Counter)]
    counted, decoded content or None)``, or None when the row holds no value.
    ``checked``: the row is known to hold one (see redact_rows)."""
    if not checked and not secrets.search(R.row_text(row)):
        return None
    columns = dict(zip(names, row))
    patch: dict = {}
    found: list = []
    decoded_content = None
    decoded_raw = None
    # a message's preview is cut again from its replaced content (below): read only when that is not
    deferred = table == "messages" and isinstance(columns.get("content_blocks"), str) \
        and isinstance(columns.get("text_preview"), str)
    for column, value in columns.items():
        if deferred and column == "text_preview":
            continue
        if not isinstance(value, str):
            continue
        json_text = column not in R.NAME_COLUMNS and R.is_json(column, value)
        # (in a row known to hold a value, a JSON text's strings are searched one by one, and
        # not the whole text first: the search that decides is the strings')
        if not (checked and json_text) and not secrets.search(value):
            continue
        if column in R.NAME_COLUMNS:
            new, counts = secrets.replace(value, names=True)
        elif json_text:
            new, counts, decoded = secrets.replace_json(value, look_first=not checked)
            if column == "content_blocks":
                decoded_content = decoded
            elif column == "raw_json":
                decoded_raw = decoded
        else:
            new, counts = secrets.replace(value)
        if new != value:
            patch[column] = new
        if counts and counted(table, column, columns, redact_columns):
            found.append((column, counts))
    # Previews again from the replaced text: a value cut by the 512th character is gone whole.
    if table == "messages" and "content_blocks" in patch and decoded_content is not None:
        fresh = P.text_preview({"content": decoded_content})
        if fresh is not None:
            patch["text_preview"] = fresh
            deferred = False
    if deferred and secrets.search(columns["text_preview"]):
        new, counts = secrets.replace(columns["text_preview"])
        if new != columns["text_preview"]:
            patch["text_preview"] = new
        if counts and counted(table, "text_preview", columns, redact_columns):
            found.append(("text_preview", counts))
    if table == "entries" and "raw_json" in patch and isinstance(decoded_raw, dict):
        fresh = P.entry_preview(decoded_raw)
        if fresh is not None or columns.get("text_preview") is not None:
            patch["text_preview"] = fresh
    return _cut_row(secrets, table, columns, patch, found, redact_columns, decoded_content)


def _cut_row(secrets: R.SecretSet, table: str, columns: dict, patch: dict, found: list, redact_columns: dict,
             decoded_content: Any = None) -> tuple[dict, list, Any]:
    """redact_row's last step (alone for a row that holds no whole value): a text an earlier
    AgentBase cut at its limit inside a credential (it now cuts before one) keeps the
    credential's head at its end, which no whole value matches."""
    for column, limit in CUT_AT.items():
        value = patch.get(column, columns.get(column))
        if isinstance(value, str) and len(value) == limit:
            new, counts = secrets.replace_cut_head(value)
            if new != value:
                patch[column] = new
                if counted(table, column, columns, redact_columns):
                    found.append((column, counts))
    for column in CUT_IN_JSON:
        value = patch.get(column, columns.get(column))
        if isinstance(value, str) and len(value) > 255:
            new, counts = _cut_json(secrets, value)
            if new != value:
                patch[column] = new
                if counted(table, column, columns, redact_columns):
                    found.append((column, counts))
    return patch, found, decoded_content


# The row's label column in the report, per table.
_LABELS = {"messages": "message_uuid", "entries": "entry_uuid", "entry_revisions": "entry_uuid",
           "sessions": "session_uuid", "tool_calls": "call_id", "parsed_files": "file_path",
           "session_index": "session_key"}
_SESSION_ID = {"sessions": "id", "messages": "session_id", "entries": "session_id", "entry_revisions": "session_id",
               "tool_calls": "session_id"}


def scan_store(store, redact_columns: dict | None = None) -> dict:
    """Every credential the export would redact, found by reading the store
    with the export's two passes (the same detector, the same set, the same
    counting): ``{"total", "kinds": {kind: count}, "places": [{server, agent,
    session, table, id, entry, column, kind, count}]}``. Values are never kept."""
    if redact_columns is None:
        redact_columns = shape.redact_columns()
    secrets = R.collect(store, redact_columns)
    sessions = {r[0]: (r[1], r[2], r[3])
                for r in store.query("SELECT id, server, agent_id, session_uuid FROM sessions")}
    places: list[dict] = []
    kinds: Counter = Counter()
    if not secrets:
        return {"total": 0, "kinds": {}, "places": []}
    for table, detect in redact_columns.items():
        have = set(store.columns(table))
        sid = _SESSION_ID.get(table)
        label = _LABELS.get(table, "id")
        need = ["id"] + [c for c in (sid, label, "server", "agent_id", "content_blocks", *detect)
                         if c and c in have and c != "id"]
        need = list(dict.fromkeys(need))
        for cols, rows in R.table_rows(store, table, need):
            names = tuple(cols)
            for row in rows:
                values = dict(zip(names, row))
                part = tuple(c for c in names if c in detect)
                got = redact_row(secrets, table, part, tuple(values[c] for c in part), redact_columns)
                if got is None:
                    continue
                for column, counts in got[1]:
                    server, agent, session = sessions.get(values.get(sid) if sid else None, (None, None, None))
                    if table == "session_index" or table == "parsed_files":
                        server, agent = values.get("server"), values.get("agent_id")
                    # (a label may hold a value too: a file name, a session id taken from one)
                    # (server and agent names: only by a credential-shaped value, as the export does)
                    server, agent, session, entry = (secrets.replace(x, names=i < 2)[0] if isinstance(x, str) else x
                                                     for i, x in enumerate((server, agent, session, values.get(label))))
                    for kind, n in counts.items():
                        kinds[kind] += n
                        places.append({"server": server, "agent": agent, "session": session, "table": table,
                                       "id": values["id"], "entry": entry, "column": column,
                                       "kind": kind, "count": n})
    return {"total": sum(kinds.values()), "kinds": dict(kinds.most_common()), "places": places}


def format_findings(found: dict) -> str:
    """The text report of :func:`scan_store`: kinds, then places."""
    if not found["total"]:
        return "no credentials found"
    lines = [f"{found['total']} credentials in {len(found['places'])} places (values not shown):", ""]
    width = max(len(k) for k in found["kinds"])
    lines.append(f"{'kind':<{width}}  count")
    lines += [f"{kind:<{width}}  {n:>5}" for kind, n in found["kinds"].items()]
    lines.append("")
    header = ("server", "agent", "session", "table.column", "id", "entry", "kind", "count")
    table = [header] + [
        (clean(p["server"]), clean(p["agent"]), clean(p["session"]), f"{p['table']}.{p['column']}", str(p["id"]),
         clean(p["entry"]), p["kind"], str(p["count"]))
        for p in found["places"]
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]
    return "\n".join(lines)
