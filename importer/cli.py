"""The ``agentbase`` command: a thin click layer over the pipeline and store."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click
import orjson

from . import __version__, stats as stats_mod
from .pipeline import run_import
from .sources import STATE_DIR_NAMES
from .store import StoreError, default_db_path, open_store

DB_HELP = (
    "Archive URL: sqlite:///path/to/file.db (env AGENTBASE_DB). "
    "Default: the embedded store at $AGENTBASE_HOME/agentbase.db or ~/.local/share/agentbase/agentbase.db."
)


def _open(db: str | None):
    try:
        return open_store(db)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None


def _default_paths() -> list[str] | None:
    """~/.openclaw (or the older ~/.clawdbot / ~/.moltbot); None when there is none."""
    for name in STATE_DIR_NAMES:
        path = Path.home() / name
        if path.is_dir():
            return [str(path)]
    return None


def demo_dir() -> Path:
    return default_db_path().parent / "demo-transcripts"


def _demo_paths() -> list[str]:
    from .demo import generate_demo

    root = demo_dir()
    if not root.is_dir():
        generate_demo(str(root))
    return [str(root)]


@click.group()
@click.version_option(__version__, prog_name="agentbase")
@click.option("-v", "--verbose", is_flag=True, help="Log diagnostics to stderr.")
def cli(verbose: bool) -> None:
    """AgentBase: archive and explore OpenClaw agent transcripts."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(message)s")


@cli.command(name="import")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--server", help="Server name for these paths (default: this host's short name; "
              "a folder of per-server trees names each server after its subfolder).")
@click.option("--agent", help="Agent id for a single file or a bare folder of transcripts; "
              "for larger trees, import only this agent.")
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
@click.option("--demo", is_flag=True, help="Import the generated demo transcripts (no real data needed).")
@click.option("--json-summary", is_flag=True, help="Print the run's summary as one JSON object on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary line.")
def import_(paths, server, agent, db, demo, json_summary, quiet):
    """Import transcripts from PATHS (default: ~/.openclaw).

    A PATH may be an OpenClaw state dir, its agents/ folder, one agent's
    sessions/ folder, one transcript file, or a folder holding one such tree
    per server. Files seen before are read only if they changed, and then only
    their new bytes when they just grew.
    """
    paths = list(paths)
    if demo:
        paths = _demo_paths() + paths
    elif not paths:
        paths = _default_paths()
        if paths is None:
            click.echo(
                f"No ~/.openclaw here: importing the demo transcripts from {demo_dir()} "
                "(name a PATH to import real ones).",
                err=True,
            )
            paths = _demo_paths()
    store = _open(db)
    show_bar = not quiet and sys.stderr.isatty()

    def progress(files):
        return click.progressbar(files, label="importing", file=sys.stderr, show_pos=True)

    try:
        if show_bar:
            report = _run_with_bar(store, paths, server, agent, progress)
        else:
            report = run_import(store, paths, server=server, agent=agent)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    for _path, message in report.failures:
        click.echo(f"error: {message}", err=True)
    if json_summary:
        click.echo(orjson.dumps(report.as_dict()).decode())
    elif not quiet:
        click.echo(report.summary(), err=True)
    if report.files_failed:
        sys.exit(1)


def _run_with_bar(store, paths, server, agent, progress):
    holder = {}

    def wrap(files):
        bar = progress(files)
        holder["bar"] = bar
        return bar.__enter__()

    try:
        return run_import(store, paths, server=server, agent=agent, progress=wrap)
    finally:
        if "bar" in holder:
            holder["bar"].__exit__(None, None, None)


@cli.command()
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON object (a list of them with --by).")
@click.option("--by", type=click.Choice(["server", "agent", "day"]), help="Totals per server, agent or UTC day.")
def stats(db, as_json, by):
    """Totals: sessions, messages by role, tool calls, exec calls, thinking,
    tokens and cost (each model call once), bad and pending lines."""
    store = _open(db)
    try:
        totals = stats_mod.collect(store, by)
    finally:
        store.close()
    if as_json:
        click.echo(orjson.dumps(totals).decode())
    else:
        click.echo(stats_mod.format_table(totals, by))


def main() -> None:  # console_scripts entry point
    cli(prog_name="agentbase")


