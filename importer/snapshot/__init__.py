"""The snapshot: a read-only SQLite file for Datasette, built from either store
and then kept up to date in place. :func:`export_snapshot` is the entry.

It either **updates** the existing snapshot or **builds** a new one. An update
(update.py) applies, in one transaction, what changed in the store since the
snapshot last saw it: the store's change log (store/sqlite.py) names the
sessions written since, and a row of theirs is copied again only when its
hash differs from the one the state file (snapshot_state.py) holds; tables of
no session (parsed_files, session_index...) are compared whole. Rows the store
no longer has go, with their full-text rows and redaction counts. The snapshot
is in WAL mode, so a Datasette reading it sees the update whole or not at
all. The result is the very snapshot a full build would make
(tests/test_snapshot_update.py compares them row by row).

A build (build.py) copies every table (local-time columns in a chosen zone,
credentials redacted, see redact.py), builds the full-text indexes (search.py),
the indexes the explorer's facets and sorts need and the derived tables
(derived.py), runs ANALYZE, into a new file put in place. It happens when it
must: no snapshot or state file yet, another time zone, redaction setting,
AgentBase version, snapshot format, store or store schema, or ``full=True``.

The shape of what is written is shape.py's. The modules, one concern each:

- ``export.py``: the entry; which of the two ways, and why;
- ``build.py`` / ``update.py``: the two ways;
- ``rows.py``: which store rows each table copies, and the writer that puts them in the snapshot;
- ``worker.py``: preparing rows (redaction, generated columns, search text) in a worker process;
- ``encode.py``: how a row's stored helper columns encode times and a message's derived columns;
- ``ddl.py``: the schema (through sqlite-utils), full-text tables and indexes;
- ``facts.py``: what the snapshot says of itself: its marker, its facts table, counts, the shape digest;
- ``paths.py``: where a snapshot lives, what ``-o`` may name, build files and leftovers;
- ``report.py``: what an export reports.
"""

from .export import export_snapshot  # noqa: F401
from .paths import check_servable, check_target, default_snapshot_path, snapshot_path_for, snapshot_target  # noqa: F401
from .report import ExportReport  # noqa: F401
