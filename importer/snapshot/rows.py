"""The rows copied: which columns of which store table each snapshot table reads
(:class:`Plan`, :func:`table_plans`), reading them in batches, and the
:class:`Writer` that puts prepared rows into the snapshot (stored columns,
time and offset helpers, tool calls linked to their messages, full-text rows,
state hashes)."""

from __future__ import annotations

import bisect
import operator
import sqlite3
from array import array
from dataclasses import dataclass

from .. import shape
from ..search import index_text, message_search_text, tool_call_search_text
from ..snapshot_state import State, row_hash
from ..store import Store
from .encode import Millis, Offsets
from .worker import Preparer


BATCH = 2000


@dataclass
class Plan:
    """One table's copy: the store columns read, the snapshot's stored columns, which session a
    row belongs to (``id`` for sessions, ``session_id``, or None: a table of no session)."""

    name: str
    target: str  # the table its rows are stored in (shape.base_table: a view's base table)
    number: int  # the table's number in the state file
    select: tuple[str, ...]
    stored: tuple[str, ...]
    session_col: str | None
    local_from: str | None
    text_cols: frozenset

    @property
    def per_session(self) -> bool:
        return self.session_col is not None


def table_plans(store: Store) -> list[Plan]:
    out = []
    for number, (name, table) in enumerate(shape.tables().items()):
        have = store.columns(name)
        stored = [c for c, _ in shape.stored(name)]
        helpers = {c for c, _ in shape.helpers(name)} | {shape.COUNT_COLUMN}
        wanted = [c for c in stored if c not in helpers]
        if name == "messages":  # the generated columns' values, checked against their expressions
            wanted += [c for c in shape.MESSAGE_DERIVED if c not in wanted]
        wanted += [c for c in shape.LINKED.get(name, ()) if c not in wanted]  # (and a view's, against the rows')
        wanted += [c for c in shape.TIME_COLUMNS.get(name, ()) if c not in wanted]  # (as milliseconds)
        select = ["id"] + [c for c in have if c in wanted and c != "id"]
        types = dict(shape.columns(name))
        types.update(dict(shape.columns(name)))
        text = frozenset(c for c in select if c in ("id", "session_id") or types.get(c, "").startswith("str")
                         or types.get(c) in ("text", "json"))
        session_col = "id" if name == "sessions" else ("session_id" if "session_id" in have else None)
        out.append(Plan(name, shape.base_table(name), number, tuple(select), tuple(stored), session_col,
                        table.local_time_from, text))
    return out


class Writer:
    """Writes batches of store rows into the snapshot: each row with its redactions, local-time
    offset, generated columns' helpers, full-text rows and (in the state file) hash."""

    def __init__(self, out: sqlite3.Connection, state: State, prep: Preparer, zone, redact: bool):
        self.out = out
        self.state = state
        self.prep = prep
        self.offsets = Offsets(zone)
        self.millis = Millis()
        self.redact = redact
        self.counts: dict[str, int] = {}
        self.sessions_written: set[int] = set()
        # the messages written, in id order, that have a preview: id and hash(preview), for their calls
        self.preview_ids, self.preview_hashes = array("q"), array("q")

    def _remember_previews(self, rows: list[tuple], id_at: int, preview_at: int) -> None:
        ids, hashes = self.preview_ids, self.preview_hashes
        for values in rows:
            preview = values[preview_at]
            if preview is not None and (not ids or values[id_at] > ids[-1]):
                ids.append(values[id_at])
                hashes.append(hash(preview))

    def copy(self, plan: Plan, rows: list[tuple]) -> None:
        """Hand a batch of store rows (plan.select's columns) on; written when prepared."""
        if not rows:
            return
        hashes = [(row[0], row_hash(row)) for row in rows]
        self.prep.add(plan.name, plan.select, rows, lambda r, result: self._write(plan, r, result, hashes),
                      plan.text_cols)

    def _write(self, plan: Plan, rows: list[tuple], result, hashes) -> None:
        patches, findings, fts_rows, derived = result
        at = {c: i for i, c in enumerate(plan.select)}
        if patches:
            rows = [list(row) for row in rows]
            for index, patch in patches:
                values = rows[index]
                for column, value in patch.items():
                    values[at[column]] = value
        per_row: dict[int, int] = {}
        for _t, row_id, _s, _column, _k, n in findings:
            per_row[row_id] = per_row.get(row_id, 0) + n
        zero = 0 if self.redact else None
        name = plan.name
        ts_at = at.get(plan.local_from) if plan.local_from else None
        rows = [tuple(values) for values in rows]
        fts_table = shape.FTS_TABLE
        if name == "tool_calls":
            derived, fts_rows = self._link_calls(rows, at)
            fts_table = shape.TOOL_FTS_TABLE
            if self.prep.index(fts_table, fts_rows):
                fts_rows = []
            else:
                fts_rows = [(rowid, index_text(text)) for rowid, text in fts_rows]
        elif name == "messages" and "text_preview" in at:
            self._remember_previews(rows, at["id"], at["text_preview"])
        # each stored column: a store column, the count, or a helper (shape.helpers, in order: the
        # local-time offset, a message's or a view's helpers, the time columns' milliseconds)
        width = len(plan.select)
        extra = {shape.COUNT_COLUMN: width}
        extra.update((column, width + 1 + k) for k, (column, _type) in enumerate(shape.helpers(name)))
        none_at = width + 1 + len(shape.helpers(name))  # a column this store lacks: NULL
        pick = [at[c] if c in at else extra.get(c, none_at) for c in plan.stored]
        getter = operator.itemgetter(*pick)
        offsets, millis = self.offsets, self.millis
        times = [at.get(c) for c in shape.TIME_COLUMNS.get(name, ())]
        out_rows = []
        for index, values in enumerate(rows):
            tail = (per_row.get(values[0], zero),)
            if ts_at is not None:
                tail += (offsets(values[ts_at]),)
            if derived is not None:
                tail += derived[index]
            for t_at in times:
                tail += millis(values[t_at]) if t_at is not None else (None, None)
            out_rows.append(getter(values + tail + (None,)))
        cols = ", ".join(f"[{c}]" for c in plan.stored)
        self.out.executemany(f"INSERT INTO [{plan.target}] ({cols}) VALUES ({', '.join('?' * len(plan.stored))})",
                             out_rows)
        if fts_rows:
            self.out.executemany(f"INSERT INTO {fts_table} (rowid, {shape.FTS_COLUMN}) VALUES (?, ?)", fts_rows)
        if findings:
            self.out.executemany(f"INSERT INTO {shape.REDACTIONS} VALUES (?, ?, ?, ?, ?, ?)", findings)
        self.state.put(plan.number, hashes)
        self.counts[name] = self.counts.get(name, 0) + len(out_rows)
        if plan.session_col is not None:
            s_at = plan.stored.index(plan.session_col)
            self.sessions_written.update(r[s_at] for r in out_rows if r[s_at] is not None)

    def _link_calls(self, rows: list[tuple], at: dict) -> tuple[list[tuple], list[tuple]]:
        """Tool calls (their final values): the helpers of the view's linked columns (shape.LINKED) and
        the rows of tool_calls_fts (their text, before index_text). The arguments are linked when
        json_extract of the call's block in the snapshot's message gives them exactly; the result
        preview is the result message's (as redacted there: a value cut at the 512th character is
        gone whole), linked when it has one."""
        id_at, mid_at, block_at, rid_at = at["id"], at.get("message_id"), at.get("block_index"), \
            at.get("result_message_id")
        args_at, preview_at = at.get("arguments"), at.get("result_preview")
        extracted: dict = {}
        wanted = [(r[id_at], r[mid_at], r[block_at]) for r in rows
                  if mid_at is not None and r[mid_at] is not None and r[block_at] is not None
                  and args_at is not None and r[args_at] is not None]
        for i in range(0, len(wanted), 3000):
            chunk = wanted[i:i + 3000]
            values = ", ".join("(?, ?, ?)" for _ in chunk)
            extracted.update(self.out.execute(
                f"WITH v(id, mid, block) AS (VALUES {values}) SELECT v.id, CASE WHEN json_valid(m.content_blocks) "
                "THEN json_extract(m.content_blocks, '$[' || v.block || '].arguments') END "
                "FROM v JOIN messages m ON m.id = v.mid", [x for row in chunk for x in row]))
        # a result message this export wrote: its preview is the call's own when their hashes agree
        # (64-bit SipHash, keyed anew in each process); only the others are read back
        previews: dict = {}
        known, hashes = self.preview_ids, self.preview_hashes
        ids = set()
        for r in rows:
            rid = r[rid_at] if rid_at is not None else None
            if rid is None or preview_at is None or r[preview_at] is None:
                continue
            k = bisect.bisect_left(known, rid)
            if k < len(known) and known[k] == rid and hashes[k] == hash(r[preview_at]):
                previews[rid] = r[preview_at]
            else:
                ids.add(rid)
        ids = sorted(ids)
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            previews.update(self.out.execute(f"SELECT id, text_preview FROM messages WHERE id IN "
                                             f"({', '.join('?' * len(chunk))})", chunk))
        derived, fts_rows = [], []
        for r in rows:
            args = r[args_at] if args_at is not None else None
            args_linked = args is not None and extracted.get(r[id_at], None) == args
            preview = r[preview_at] if preview_at is not None else None
            rid = r[rid_at] if rid_at is not None else None
            preview_linked = preview is not None and rid in previews and previews[rid] is not None
            if preview_linked:
                preview = previews[rid]
            derived.append((1 if args_linked else 0, None if args_linked else args,
                            1 if preview_linked else 0, None if preview_linked else preview))
            text = tool_call_search_text(r[at["tool_name"]] if "tool_name" in at else None,
                                         r[at["command"]] if "command" in at else None, args, preview)
            if text:
                fts_rows.append((r[id_at], text))
        return derived, fts_rows

    def remove(self, plan: Plan, ids: list[int]) -> int:
        """Take rows out of the snapshot (to go, or to be written again): their full-text rows (the
        text they were indexed with, computed again from what the snapshot holds), redaction counts,
        hashes. Returns how many there were."""
        if not ids:
            return 0
        name = plan.name
        gone = 0
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ", ".join("?" * len(chunk))
            if name == "messages":
                old = self.out.execute(f"SELECT id, content_blocks, text_preview, session_id FROM messages "
                                       f"WHERE id IN ({marks})", chunk).fetchall()
                fts = [(r[0], index_text(t)) for r in old if (t := message_search_text(r[1], r[2]))]
                self.out.executemany(f"INSERT INTO {shape.FTS_TABLE} ({shape.FTS_TABLE}, rowid, {shape.FTS_COLUMN}) "
                                     "VALUES ('delete', ?, ?)", fts)
            elif name == "tool_calls":
                old = self.out.execute(f"SELECT id, tool_name, command, arguments, result_preview, session_id "
                                       f"FROM tool_calls WHERE id IN ({marks})", chunk).fetchall()
                fts = [(r[0], index_text(t)) for r in old if (t := tool_call_search_text(*r[1:5]))]
                self.out.executemany(f"INSERT INTO {shape.TOOL_FTS_TABLE} ({shape.TOOL_FTS_TABLE}, rowid, "
                                     f"{shape.FTS_COLUMN}) VALUES ('delete', ?, ?)", fts)
            elif plan.session_col is not None:
                old = self.out.execute(f"SELECT id, [{plan.session_col}] FROM [{plan.target}] WHERE id IN ({marks})",
                                       chunk).fetchall()
            else:
                old = self.out.execute(f"SELECT id, NULL FROM [{plan.target}] WHERE id IN ({marks})",
                                       chunk).fetchall()
            self.sessions_written.update(r[-1] for r in old if r[-1] is not None)
            self.out.execute(f"DELETE FROM {shape.REDACTIONS} WHERE table_name = ? AND row_id IN ({marks})",
                             (name, *chunk))
            self.out.execute(f"DELETE FROM [{plan.target}] WHERE id IN ({marks})", chunk)
            gone += len(old)
        self.state.drop(plan.number, ids)
        self.counts[name] = self.counts.get(name, 0) - gone
        return gone


def store_rows(store: Store, plan: Plan, where: str = "", params: tuple = ()):
    """The store's rows of a plan's table (``where``: more conditions), by id, in batches."""
    cols = ", ".join(f"[{c}]" for c in plan.select)
    extra = f" AND ({where})" if where else ""
    select = f"SELECT {cols} FROM [{plan.name}] WHERE id > ?{extra} ORDER BY id LIMIT {BATCH}"
    last = -(2 ** 63)
    while True:
        rows = store.tuples(select, (last, *params))
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def store_rows_by_id(store: Store, plan: Plan, ids: list[int]):
    cols = ", ".join(f"[{c}]" for c in plan.select)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        rows = store.tuples(f"SELECT {cols} FROM [{plan.name}] WHERE id IN ({', '.join('?' * len(chunk))}) "
                            "ORDER BY id", tuple(chunk))
        if rows:
            yield rows
