"""Which of the databases Datasette serves are AgentBase snapshots, and what
every page needs of one: its facts (facts.py, read once per database when a
connection opens), the database a page shows (``?db=``, else the first
snapshot), the permission check every page makes, links into it that respect
``base_url``, and the URL of the plugin's static files (served by Datasette
from ``static/``, under ``/-/static-plugins/<plugin>/``)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from datasette.utils.asgi import Forbidden, NotFound

from . import facts

STATIC = Path(__file__).resolve().parent / "static"


def snapshots(datasette) -> dict:
    """The databases that are AgentBase snapshots, name -> their facts (facts.py; filled by
    prepare_connection)."""
    found = getattr(datasette, "_agentbase_snapshots", None)
    if found is None:
        found = {}
        datasette._agentbase_snapshots = found
    return found


def facts_of(datasette, database: str | None) -> facts.Facts:
    """A served snapshot's facts (none for another database)."""
    return snapshots(datasette).get(database) or facts.Facts()


async def is_snapshot_db(datasette, db) -> bool:
    if snapshots(datasette).get(db.name):
        return True
    if not await db.table_exists(facts.MARKER):
        return False
    snapshots(datasette)[db.name] = await db.execute_fn(facts.read)
    return True


def session_path(datasette, database: str | None, session_id, message_id=None) -> str:
    path = str(datasette.urls.path(f"-/agentbase/session/{int(session_id)}"))
    names = [n for n in datasette.databases if snapshots(datasette).get(n)]
    if database and names and database != names[0]:
        path += "?" + urlencode({"db": database})
    if message_id is not None:
        path += f"#m{int(message_id)}"
    return path


def row_path(datasette, database: str, table: str, row_id) -> str:
    if table in facts_of(datasette, database).views:  # a view has no row pages: its page filtered to the row
        return str(datasette.urls.table(database, table)) + f"?id={int(row_id)}"
    return str(datasette.urls.row(database, table, str(int(row_id))))


async def snapshot_db(datasette, request):
    """The database a page shows: ?db=NAME, else the first AgentBase snapshot."""
    wanted = request.args.get("db")
    candidates = [wanted] if wanted else list(datasette.databases)
    for name in candidates:
        db = datasette.databases.get(name)
        if db is None or name == "_internal":
            continue
        if await is_snapshot_db(datasette, db):
            return db
    raise NotFound("No AgentBase snapshot is served here" + (f" under the name {wanted!r}" if wanted else ""))


async def check(datasette, request, database: str) -> None:
    for action, resource in (("view-instance", None), ("view-database", database),
                             ("view-table", (database, "messages"))):
        if not await datasette.permission_allowed(request.actor, action, resource, default=True):
            raise Forbidden("You do not have permission to view this")


_static_name: list = []  # [the name Datasette serves the static folder under]


def static_url(datasette, name: str) -> str:
    """Where Datasette serves ``static/<name>``: under the plugin's name (its distribution's,
    ``agentbase``, when installed; the module's when registered otherwise)."""
    if not _static_name:
        from datasette.plugins import get_plugins

        found = [p["name"] for p in get_plugins()
                 if p.get("static_path") and Path(p["static_path"]).resolve() == STATIC]
        _static_name.append(found[0] if found else __package__)
    return str(datasette.urls.static_plugins(_static_name[0], name))


def static_text(name: str, _cache: dict = {}) -> str:  # noqa: B006 (the cache)
    """A static file's text (for a page that inlines it: the session's HTML export)."""
    if name not in _cache:
        _cache[name] = (STATIC / name).read_text(encoding="utf-8")
    return _cache[name]
