"""``agentbase serve``: Datasette on a snapshot, configured for the explorer.

The repository's ``metadata.yml`` describes the database ``snapshot`` (the
default file name, snapshot.db); a snapshot under another name gets the same
metadata under its own name. The snapshot is served as a live file (not
``-i``, immutable): `agentbase export` updates it in place while it is served,
and the plugin reads each update whole (see live.py).

Access (README, "Access"): ``password_env`` names the environment variable
holding the password; the metadata gets the plugin setting
``{"password": {"$env": NAME}}`` (the name only: Datasette reads the value
from the environment), so every page is behind ``/-/agentbase/login``.
``no_sql`` turns off arbitrary SQL and the database download (canned queries
stay). The download is off anyway unless ``--setting allow_download on``
(DEFAULT_SETTINGS). ``forwarded_allow_ips``: the reverse proxies whose
X-Forwarded-For is believed (uvicorn's FORWARDED_ALLOW_IPS, replaced: none by
default).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
METADATA_KEY = "snapshot"
# Datasette settings `agentbase serve` starts with (--setting overrides them). Facet suggestions try
# every column of the table on each page view: seconds on a million messages, so they are off; the
# facets of metadata.yml (and ?_facet=) still work.
# The download of the whole snapshot (/snapshot.db: every transcript, one click) is off unless asked for
# (--setting allow_download on); on, downloads running at once share one copy (live.py).
DEFAULT_SETTINGS = {"suggest_facets": "off", "allow_download": "off"}
# --no-sql: no SQL of the visitor's own (the execute-sql permission: ?sql=, _where=, the SQL editor), and no
# download of the whole file to query elsewhere; the canned queries, tables and rows stay.
NO_SQL_SETTINGS = {"default_allow_sql": "off", "allow_download": "off"}
PLUGIN_NAME = "datasette-agentbase"


BUNDLED = Path(__file__).resolve().parent / "bundled"  # the copies an installed package carries (setup.py)


def default_metadata_path() -> Path | None:
    """metadata.yml: the source tree's (an editable install, a checkout), else the package's copy."""
    for path in (REPO / "metadata.yml", BUNDLED / "metadata.yml"):
        if path.is_file():
            return path
    return None


def default_template_dir() -> Path | None:
    for path in (REPO / "templates", BUNDLED / "templates"):
        if path.is_dir():
            return path
    return None


def database_name(snapshot: Path) -> str:
    """The name Datasette gives a database file: its stem."""
    return Path(snapshot).stem


def load_metadata(snapshot: Path, metadata_path: Path | None = None) -> dict:
    """metadata.yml with its ``snapshot`` database entry re-keyed to this file's name."""
    path = metadata_path or default_metadata_path()
    if path is None:
        return {}
    with open(path, encoding="utf-8") as f:
        metadata = yaml.safe_load(f) or {}
    databases = metadata.get("databases") or {}
    name = database_name(snapshot)
    if METADATA_KEY in databases and name != METADATA_KEY:
        databases = dict(databases)
        databases[name] = databases.pop(METADATA_KEY)
        metadata["databases"] = databases
    return metadata


def with_password(metadata: dict, password_env: str | None) -> dict:
    """The metadata with the plugin's password setting: the variable's name, never its value."""
    if not password_env:
        return metadata
    metadata = dict(metadata)
    plugins = dict(metadata.get("plugins") or {})
    plugins[PLUGIN_NAME] = {**(plugins.get(PLUGIN_NAME) or {}), "password": {"$env": password_env}}
    metadata["plugins"] = plugins
    return metadata


def datasette_args(snapshot: Path, host: str, port: int, metadata_file: Path, template_dir: Path | None,
                   settings: dict | None = None) -> list[str]:
    args = ["serve", str(snapshot), "-h", host, "-p", str(port), "-m", str(metadata_file)]
    if template_dir is not None:
        args += ["--template-dir", str(template_dir)]
    for key, value in (settings or {}).items():
        args += ["--setting", key, str(value)]
    return args


def forwarded_setting(proxies: list[str] | None) -> str:
    """uvicorn's FORWARDED_ALLOW_IPS for these proxies: '' (believe no one) when there are none."""
    return ",".join(proxies or [])


RUN_PREFIX = "agentbase-serve-"  # + pid: the folder of one run's metadata file


def _remove_stale_runs() -> None:
    """The folders of runs that were killed (SIGKILL leaves no chance to clean up): their pid is gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}*-*"):
        pid = folder.name[len(RUN_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass


def serve(snapshot: Path, host: str = "127.0.0.1", port: int = 8001, metadata_path: Path | None = None,
          template_dir: Path | None = None, settings: dict | None = None, password_env: str | None = None,
          no_sql: bool = False, forwarded_allow_ips: list[str] | None = None) -> None:
    """Run Datasette (blocks until it stops). ``password_env``: the environment variable holding the
    password that puts the explorer behind a login; ``no_sql``: no arbitrary SQL;
    ``forwarded_allow_ips``: the reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are
    believed (none by default)."""
    from datasette.cli import cli as datasette_cli

    snapshot = Path(snapshot)
    if metadata_path is None and default_metadata_path() is None:
        print("warning: the explorer's metadata.yml was not found (neither in a source tree nor in the "
              "installed package): serving without its canned queries, facets and descriptions; "
              "pass -m metadata.yml", file=sys.stderr)
    _remove_stale_runs()
    with tempfile.TemporaryDirectory(prefix=f"{RUN_PREFIX}{os.getpid()}-") as tmp:
        metadata_file = Path(tmp) / "metadata.json"
        metadata = with_password(load_metadata(snapshot, metadata_path), password_env)
        metadata_file.write_text(json.dumps(metadata), encoding="utf-8")
        args = datasette_args(snapshot, host, port, metadata_file, template_dir or default_template_dir(),
                              {**DEFAULT_SETTINGS, **(settings or {}), **(NO_SQL_SETTINGS if no_sql else {})})
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        # uvicorn (which Datasette starts) reads its proxies from this variable, and without it believes
        # X-Forwarded-For from 127.0.0.1 and ::1: any local process, or a request relayed through
        # anything on this machine, could then claim any address (and so a fresh login throttle with
        # each guess). Only the proxies named here are believed; a value inherited from the
        # environment is replaced, never widened.
        os.environ["FORWARDED_ALLOW_IPS"] = forwarded_setting(forwarded_allow_ips)
        datasette_cli.main(args=args, prog_name="agentbase serve", standalone_mode=True)
