"""A snapshot served while `agentbase export` changes it.

An update writes in place, in one transaction, in WAL mode: every read sees
the snapshot before it or after it, whole. A full build writes a new file and
points the snapshot's name (a symbolic link) at it. Datasette keeps one
connection per thread and database, opened once; :class:`SnapshotDatabase`
opens it again when the name points at another file, so the first query after
a full build reads the new one. Its table counts are the export's own (kept in
the snapshot's marker table), exact and free, where Datasette would count a
million rows with a time limit. ``version(conn)`` names what a connection
sees (the build and its update number): the plugin's caches are keyed on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import tempfile
import threading

from datasette.database import Database

from . import facts


def version(conn: sqlite3.Connection) -> tuple:
    """(build id, update number) of the snapshot this connection reads; () for another database."""
    rows = facts.marker(conn, "snapshot_id", "generation")
    if not rows:
        return ()
    return (rows.get("snapshot_id"), rows.get("generation"))


def _file(path: str) -> tuple | None:
    try:
        st = os.stat(path)  # (through the link: the file it names now)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class SnapshotDatabase(Database):
    """A Datasette database on a snapshot that is updated in place and, now and then, replaced."""

    def __init__(self, ds, path: str):
        super().__init__(ds, path=path, is_mutable=True)
        self._local = threading.local()
        self._gone_lock = threading.Lock()

    def _connection(self) -> sqlite3.Connection:
        local = self._local
        now = _file(self.path)
        conn = getattr(local, "conn", None)
        if conn is not None and (now is None or local.file == now):
            return conn
        if conn is not None:  # the name points at a new build: its old file is read no more
            with self._gone_lock:
                if conn in self._all_file_connections:
                    self._all_file_connections.remove(conn)
            conn.close()
        conn = self.connect()
        self.ds._prepare_connection(conn, self.name)
        local.conn, local.file = conn, now
        return conn

    async def execute_fn(self, fn):
        if self.ds.executor is None:  # Datasette's non-threaded mode
            return fn(self._connection())
        return await asyncio.get_event_loop().run_in_executor(self.ds.executor, lambda: fn(self._connection()))

    async def table_counts(self, limit=10):
        def counts(conn):
            try:
                row = facts.marker(conn, "counts").get("counts")
                return json.loads(row) if row else {}
            except (sqlite3.Error, ValueError):
                return {}

        known = await self.execute_fn(counts)
        if not known:
            return await super().table_counts(limit)
        # the archive's tables and the redactions, as the export counted them (its full-text
        # indexes' own tables and the marker are not listed, as with the counts file of old)
        names = set(await self.table_names())  # (tables only: Datasette lists views, tool_calls, apart)
        return {table: n for table, n in known.items() if table in names}


def is_snapshot_file(path: str) -> bool:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        return facts.is_snapshot(conn)
    finally:
        conn.close()


def take_over(datasette) -> list[str]:
    """Serve every snapshot file Datasette opened (mutable, not immutable) as a SnapshotDatabase,
    under the same name and route; returns their names."""
    names = []
    for name, db in list(datasette.databases.items()):
        if isinstance(db, SnapshotDatabase) or db.is_memory or not db.path or not db.is_mutable:
            continue
        if not is_snapshot_file(db.path):
            continue
        live = SnapshotDatabase(datasette, db.path)
        route = db.route
        datasette.remove_database(name)
        datasette.add_database(live, name=name, route=route)
        db.close()
        names.append(name)
    return names


class _Copy:
    """One consistent copy of a snapshot version, shared by the downloads that run at the same
    time: an open file with no name on disk (nothing to clean up), closed with its last reader."""

    def __init__(self, key, made: asyncio.Future):
        self.key = key
        self.made = made  # -> (fd, size), in a thread
        self.readers = 0
        self.fd: int | None = None
        self.size = 0

    async def wait(self) -> None:
        self.fd, self.size = await asyncio.shield(self.made)


def _copies(datasette) -> dict:
    found = getattr(datasette, "_agentbase_downloads", None)
    if found is None:
        found = datasette._agentbase_downloads = {}
    return found


def _failed(made: asyncio.Future) -> bool:
    return made.done() and (made.cancelled() or made.exception() is not None)


def _close_made(made: asyncio.Future) -> None:
    if not _failed(made):
        os.close(made.result()[0])


def _release(datasette, copy: _Copy) -> None:
    copy.readers -= 1
    if copy.readers > 0:
        return
    copies = _copies(datasette)
    if copies.get(copy.key) is copy:
        del copies[copy.key]
    copy.made.add_done_callback(_close_made)  # now, or when a copy no one waits for any more is made


class _Stream:
    """A shared copy sent as a download, read at this answer's own offset (``os.pread``): a slow
    client holds its place in the copy, never a copy of its own."""

    def __init__(self, datasette, copy: _Copy, filename: str):
        self.datasette, self.copy, self.filename = datasette, copy, filename

    async def asgi_send(self, send):
        from datasette.utils.asgi import asgi_start

        headers = {"content-disposition": f'attachment; filename="{self.filename}"',
                   "content-length": str(self.copy.size)}
        loop = asyncio.get_event_loop()
        try:
            await asgi_start(send, 200, headers, "application/octet-stream")
            offset = 0
            while True:
                chunk = await loop.run_in_executor(None, os.pread, self.copy.fd, 1 << 20, offset)
                offset += len(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": bool(chunk)})
                if not chunk:
                    break
        finally:
            _release(self.datasette, self.copy)


def _make_copy(path: str) -> tuple[int, int]:
    """A consistent copy of the snapshot at ``path`` (SQLite's backup API: an update landing
    meanwhile is in it whole or not at all) beside it, opened and unlinked: (fd, size)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, copy = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.download-", dir=folder)
    os.close(fd)
    try:
        # (mkstemp made it 0600, as the snapshot is: it holds what the snapshot holds)
        src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        dst = sqlite3.connect(copy)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode = DELETE")  # one file, for whoever opens it next
        finally:
            dst.close()
            src.close()
        fd = os.open(copy, os.O_RDONLY)
    finally:
        os.unlink(copy)
    return fd, os.fstat(fd).st_size


def _current(path: str) -> tuple:
    """What a download of ``path`` would copy now: the file the name points at, and its version."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return (_file(path), version(conn))
    finally:
        conn.close()


async def download_view(datasette, request):
    """``/<db>.db``: the whole snapshot, as one consistent copy, when the ``allow_download`` setting
    is on (`agentbase serve` has it off unless ``--setting allow_download on``). Downloads running at
    the same time of the same version (the same build and update) share one copy, made once: twenty
    slow clients hold one copy of the file, not twenty. Datasette itself refuses to send a file that
    may change while it is sent."""
    from datasette.utils.asgi import AsgiFileDownload, Forbidden, NotFound

    name = request.url_vars["database"]
    try:
        db = datasette.get_database(route=name)
    except KeyError:
        raise NotFound("Database not found")
    await datasette.ensure_permissions(request.actor, [("view-database-download", db.name),
                                                       ("view-database", db.name), "view-instance"])
    if not datasette.setting("allow_download") or db.is_memory or not db.path:
        raise Forbidden("Database download is forbidden")
    if not isinstance(db, SnapshotDatabase):
        if db.is_mutable:
            raise Forbidden("Database download is forbidden")
        return AsgiFileDownload(db.path, filename=os.path.basename(db.path))
    loop = asyncio.get_event_loop()
    key = (db.path, await loop.run_in_executor(None, _current, db.path))
    copies = _copies(datasette)
    copy = copies.get(key)
    if copy is None or _failed(copy.made):
        copy = copies[key] = _Copy(key, loop.run_in_executor(None, _make_copy, db.path))
    copy.readers += 1
    try:
        await copy.wait()
    except BaseException:
        _release(datasette, copy)
        raise
    return _Stream(datasette, copy, os.path.basename(db.path))
