"""The ``agentbase`` command: a thin click layer over the pipeline and store."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import click
import orjson

from . import __version__
from .store import StoreError, default_db_path, open_store
from .config import default_config_path

DB_HELP = (
    "Archive URL: sqlite:///path/to/file.db or mysql://user@host/database (MariaDB; password from "
    "$AGENTBASE_DB_PASSWORD) (env AGENTBASE_DB). "
    "Default: the embedded store at $AGENTBASE_HOME/agentbase.db or ~/.local/share/agentbase/agentbase.db."
)


def _open(db: str | None, create: bool = True):
    """The archive ``db`` names; ``create=False`` for the commands that only read it: a missing
    archive is then one line ("no archive at ..."), and nothing is made."""
    try:
        return open_store(db, create=create)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None


def _check_snapshot(db: str | None, output) -> Path:
    """Where an export of ``db`` writes (``output``, else its default), checked before any work: a
    new path or an AgentBase snapshot, never a file of something else (snapshot.check_target)."""
    from .snapshot import check_target, snapshot_target

    try:
        target = snapshot_target(db, output)
        check_target(target)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    return target


def _default_paths() -> list[str] | None:
    """Every kind's default places on this machine that hold something to
    import (~/.openclaw or the older ~/.clawdbot / ~/.moltbot, ~/.pi, ...);
    None when there is none."""
    from .sources import default_paths, discover

    paths = default_paths()
    if not paths or not discover(paths).units:
        return None
    return [str(Path(p).expanduser()) for p in paths]


def demo_dir() -> Path:
    return default_db_path().parent / "demo-transcripts"


def _demo_paths() -> list[str]:
    from .demo import generate_demo

    root = demo_dir()
    if not root.is_dir():
        generate_demo(str(root))
    return [str(root)]


def _kinds_line() -> str:
    from .sources import kinds

    return "Kinds read: " + ", ".join(kinds()) + "."


class _Group(click.Group):
    """The top-level help names every kind the registry holds (built in and plug-ins)."""

    def format_help_text(self, ctx, formatter) -> None:
        super().format_help_text(ctx, formatter)
        with formatter.indentation():
            formatter.write_paragraph()
            formatter.write_text(_kinds_line())


class _ImportCommand(click.Command):
    """`import --help` lists every kind's default places (where a PATH-less import looks)."""

    def format_epilog(self, ctx, formatter) -> None:
        from .sources import all_sources

        places: dict[str, list[str]] = {}
        for source in all_sources():
            got = places.setdefault(source.kind, [])
            got.extend(p for p in source.candidates() if p not in got)
        formatter.write_paragraph()
        formatter.write_text("Default places, per kind (imported when no PATH and no config is given):")
        width = max(len(k) for k in places) + 1
        for kind, found in places.items():  # one place a line, never wrapped inside a path
            for i, place in enumerate(found or ["(none: name a PATH)"]):
                formatter.write(f"  {(kind + ':') if i == 0 else '':<{width}} {place}\n")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentbase")
@click.option("-v", "--verbose", is_flag=True, help="Log diagnostics to stderr.")
def cli(verbose: bool) -> None:
    """AgentBase: archive and explore AI agents' transcripts (JSONL, JSON, SQLite, Markdown), from this
    machine and over SSH: a searchable, browsable record of what they said, thought, ran and spent."""
    _quiet_limits()
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(message)s")


@cli.command(name="import", cls=_ImportCommand)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--server", help="Server name for these paths (default: this host's short name; "
              "a folder of per-server trees names each server after its subfolder).")
@click.option("--agent", help="Agent id for a single file or a bare folder of transcripts; "
              "for larger trees, import only this agent.")
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
@click.option("--demo", is_flag=True, help="Import the generated demo transcripts (no real data needed).")
@click.option("--json-summary", is_flag=True, help="Print the run's summary as one JSON object on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary line.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Import from the servers of this config file (default, when no PATH is given: "
              "$AGENTBASE_CONFIG or ~/.config/agentbase/config.yml if it exists); --server and --agent "
              "then pick a configured server and narrow the agents.")
@click.option("--follow-symlinks", is_flag=True,
              help="Follow symbolic links that lead out of the PATHs named (by default they are not followed).")
def import_(paths, server, agent, db, demo, json_summary, quiet, config_file, follow_symlinks):
    """Import transcripts from PATHS (default: the config file's servers, else
    every kind's default places that exist, listed below).

    A PATH may be any kind's home or folder (an OpenClaw state dir, its agents/
    folder, one agent's sessions/ folder, ~/.codex, ...), one transcript file,
    a folder holding one such tree per server, or a folder of such folders.
    Files seen before are read only if they changed, and then only their new
    bytes when they just grew.
    """
    if config_file is None and not paths and not demo and default_config_path().is_file():
        config_file = str(default_config_path())
    if config_file is not None:
        if paths or demo:
            raise click.UsageError("give PATHs (or --demo) or --config, not both")
        _config_run(config_file, server, agent, db, json_summary, quiet, export=False)
        return
    paths = list(paths)
    if demo:
        paths = _demo_paths() + paths
    elif not paths:
        paths = _default_paths()
        if paths is None:
            click.echo(
                f"No transcripts in the default places (~/.openclaw, ~/.pi, ...): importing the demo "
                f"transcripts from {demo_dir()} (name a PATH to import real ones).",
                err=True,
            )
            paths = _demo_paths()
    _use_prices(None)
    store = _open(db)
    show_bar = not quiet and sys.stderr.isatty()

    from .pipeline import run_import  # (here: `agentbase --help` and `stats` do without the pipeline)
    from .sources.fs import FileSystem

    fs = FileSystem(follow_symlinks=follow_symlinks)
    try:
        report = run_import(store, paths, server=server, agent=agent, fs=fs,
                            progress=_files_bar("importing") if show_bar else None)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    _problems(report)
    from .terminal import clean

    nothing_for_agent = agent is not None and not report.files_seen and not report.failures
    if nothing_for_agent:
        from .sources import discover

        there = sorted({u.agent_id for u in discover(paths, server=server, fs=fs).units})
        click.echo(f"warning: no agent {clean(agent)!r} under the paths named (agents there: "
                   f"{', '.join(clean(a) for a in there[:12]) or 'none'})", err=True)
    if json_summary:
        click.echo(orjson.dumps(report.as_dict()).decode())
    elif not quiet:
        click.echo(report.summary(), err=True)
    if report.files_failed or nothing_for_agent:
        sys.exit(1)


NOT_READ_SHOWN = 20


def _problems(report, skip: str | None = None) -> None:
    """A run's warnings, the records of types their kind does not know (per server and kind: counted,
    one example's place), the files it did not read and why (never their content), and its errors
    (``skip``: one already said)."""
    from .terminal import clean

    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    for (server, kind), types in sorted(report.unknown_types.items()):
        ranked = sorted(types.items(), key=lambda t: (-t[1][0], t[0]))
        shown = ", ".join(f"{clean(name)} x{count}" for name, (count, _) in ranked[:5])
        more = f", +{len(ranked) - 5} more types" if len(ranked) > 5 else ""
        total = sum(c for c, _ in types.values())
        click.echo(f"note: {kind} on {clean(server)}: {total} record{'s' if total != 1 else ''} of types it does "
                   f"not know, kept as entries ({shown}{more}; e.g. {clean(ranked[0][1][1])}; agentbase doctor "
                   "lists them)", err=True)
    for path, why in report.not_read[:NOT_READ_SHOWN]:
        click.echo(f"note: not read: {path}: {why}", err=True)
    if len(report.not_read) > NOT_READ_SHOWN:
        click.echo(f"note: ... and {len(report.not_read) - NOT_READ_SHOWN} more files not read "
                   "(parsed_files, status 'ignored', lists them all)", err=True)
    for _path, message in report.failures:
        if message != skip:
            click.echo(f"error: {message}", err=True)


def _use_prices(overrides) -> None:
    """Price calls of sources that record no cost with the user's table and the
    config file's overrides (``overrides``; None: the default config file's)."""
    from .config import ConfigError, load_price_overrides
    from .prices import PriceError, configure

    try:
        configure(overrides if overrides is not None else load_price_overrides())
    except (ConfigError, PriceError) as exc:
        raise click.ClickException(str(exc)) from None


def _files_bar(label: str):
    """``run_import``'s progress: a bar on stderr counting files, the unit of
    the summary's "files: N seen" (its total grows as containers open)."""
    from contextlib import contextmanager

    @contextmanager
    def progress(expected: int):
        with click.progressbar(length=expected, label=label, file=sys.stderr, show_pos=True) as bar:
            yield _BarProgress(bar)

    return progress


class _BarProgress:
    def __init__(self, bar):
        self.bar = bar

    def grow(self, files: int) -> None:
        if files:
            self.bar.length = max(self.bar.length + files, self.bar.pos)
            self.bar.finished = self.bar.pos >= self.bar.length
            self.bar.render_progress()

    def advance(self, files: int) -> None:
        if files:
            self.bar.update(files)


@cli.command()
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
def init(db):
    """Create the store or bring its schema up to date (import and export do
    this by themselves; rerunning is a no-op)."""
    from .store import SCHEMA_VERSION

    store = _open(db)
    try:
        click.echo(f"{store.location}: schema version {store.schema_version()} (this AgentBase: {SCHEMA_VERSION})")
    finally:
        store.close()


@cli.command()
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
@click.option("-o", "--output", type=click.Path(),
              help="Snapshot file (default: snapshot.db beside the SQLite store, or the embedded store's): "
              "a new path or an existing snapshot, nothing else.")
@click.option("--timezone", "zone", envvar="AGENTBASE_TIMEZONE",
              help="IANA time zone for the day and local_time columns (default: this machine's).")
@click.option("-q", "--quiet", is_flag=True, help="No summary line.")
@click.option("--no-redact", is_flag=True,
              help="Keep credentials (API keys, tokens, passwords, private keys) in the snapshot; by default "
              "they become [REDACTED:<kind>] (the store always keeps the originals).")
@click.option("--if-changed", is_flag=True, hidden=True,
              help="Kept for scripts of old: an export that finds nothing new changes nothing anyway.")
@click.option("--full", is_flag=True,
              help="Build a new snapshot file even when the existing one could be updated in place.")
def export(db, output, zone, quiet, no_redact, if_changed, full):
    """Bring the read-only SQLite snapshot that Datasette serves (full-text
    indexes, local days, indexes) up to date: what changed in the store since
    the last export is applied in place, in one transaction; a new file is
    built when it must be (first export, another time zone, redaction setting
    or AgentBase version, --full). Credentials in the transcripts are redacted
    (see `agentbase secrets`)."""
    from .snapshot import export_snapshot
    from .zones import resolve_zone

    try:
        resolve_zone(zone)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    _check_snapshot(db, output)
    store = _open(db, create=False)
    try:
        report = export_snapshot(store, output, timezone=zone, redact=not no_redact, full=full)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the snapshot: {exc.strerror or exc}") from None
    finally:
        store.close()
    if not quiet:
        click.echo(report.summary(), err=True)


@cli.command()
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: total, kinds, places.")
def secrets(db, as_json):
    """Credentials in the store's transcripts: their kinds, where they are
    (server, agent, session, message or entry, column) and how many; never
    the values. These are what `agentbase export` redacts in the snapshot."""
    from .snapshot.redaction import format_findings, scan_store

    store = _open(db, create=False)
    try:
        found = scan_store(store)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    if as_json:
        from .terminal import json_text  # (C1 controls escaped too: terminal.py)

        click.echo(json_text(orjson.dumps(found).decode()))
    else:
        click.echo(format_findings(found))


@cli.command()
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON object (a list of them with --by).")
@click.option("--by", type=click.Choice(["server", "agent", "day"]), help="Totals per server, agent or UTC day.")
def stats(db, as_json, by):
    """Totals: sessions, messages by role, tool calls, exec calls, thinking,
    tokens and cost (each model call once), bad and pending lines."""
    from . import stats as stats_mod

    store = _open(db, create=False)
    try:
        totals = stats_mod.collect(store, by)
    finally:
        store.close()
    if as_json:
        from .terminal import json_text  # (C1 controls escaped too: terminal.py)

        click.echo(json_text(orjson.dumps(totals).decode()))
    else:
        click.echo(stats_mod.format_table(totals, by))


@cli.command()
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Check this config file's servers (default: $AGENTBASE_CONFIG or ~/.config/agentbase/config.yml "
                   "if it exists; else this machine).")
@click.option("--all", "everything", is_flag=True, help="Also the kinds neither found nor archived.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: servers, each with its kinds.")
def doctor(db, config_file, everything, as_json):
    """Which agents are covered: every kind's default places on every server (found or not), and
    from the archive its files, sessions, the last one, unknown record types and versions seen."""
    from .config import ConfigError, default_config_path, load_config
    from .doctor import diagnose, format_text, local_server

    config = None
    if config_file is not None or default_config_path().is_file():
        try:
            config = load_config(config_file)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
    store = _open(db or (config.database if config is not None else None), create=False)
    remotes = []
    try:
        servers = []
        if config is None:
            servers.append(local_server())
        else:
            from .remote import RemoteError, RemoteServer
            from .sources import FileSystem

            for s in config.servers:
                if s.local:
                    servers.append((s.name, "this machine", FileSystem(follow_symlinks=config.follow_symlinks), None))
                    continue
                remote = RemoteServer(s, config)
                try:
                    remote.connect()
                except RemoteError as exc:
                    servers.append((s.name, f"ssh {s.host}", None, f"not reached: {exc}"))
                    continue
                remotes.append(remote)
                servers.append((s.name, f"ssh {remote.endpoint}", remote.fs, None))
        reports = diagnose(store, servers)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        for remote in remotes:
            remote.close()
        store.close()
    if as_json:
        from .terminal import json_text

        click.echo(json_text(orjson.dumps({"servers": [r.as_dict() for r in reports]}).decode()))
    else:
        click.echo(format_text(reports, everything), nl=False)


@cli.command()
@click.argument("kind", type=click.Choice(["daily", "weekly", "monthly", "session", "blocks"]))
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
@click.option("--since", help="First day (YYYY-MM-DD or YYYYMMDD, local).")
@click.option("--until", help="Last day (YYYY-MM-DD or YYYYMMDD, local).")
@click.option("--agent", help="Only this agent.")
@click.option("--server", help="Only this server.")
@click.option("--source", help="Only this source kind (openclaw, pi, claude-code, codex, ...).")
@click.option("--breakdown", is_flag=True, help="A line per model under each row.")
@click.option("--order", type=click.Choice(["asc", "desc"]), default="asc", show_default=True,
              help="Oldest first (asc) or newest first (desc).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: rows and totals.")
@click.option("--timezone", "zone", envvar="AGENTBASE_TIMEZONE",
              help="IANA time zone of the days (default: this machine's).")
@click.option("--explain", is_flag=True,
              help="After the table (JSON: explain), one line per reason another tool's figures may differ, "
                   "with its count.")
def report(kind, db, since, until, agent, server, source, breakdown, order, as_json, zone, explain):
    """Tokens and cost per local day, week, month, session or 5-hour billing block, with a totals
    row: each model call once, calls without a price counted apart (never $0)."""
    from .zones import resolve_zone
    from .prices import current
    from .report import as_json as report_json, collect, explain as explain_reasons, format_explain, format_table, \
        ordered

    store = _open(db, create=False)
    price_date = current().date
    reasons = None
    try:
        zone_name, tz = resolve_zone(zone)
        rows = ordered(collect(store, kind, tz, since=since, until=until, agent=agent, server=server,
                               source=source), order)
        if explain:
            reasons = explain_reasons(store, tz, zone_name, price_date, since=since, until=until, agent=agent,
                                      server=server, source=source)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    if as_json:
        from .terminal import json_text  # (C1 controls escaped too: terminal.py)

        out = report_json(kind, rows, zone_name, price_date, breakdown)
        if reasons is not None:
            out["explain"] = [r.as_dict() for r in reasons]
        click.echo(json_text(orjson.dumps(out).decode()))
    else:
        click.echo(format_table(kind, rows, zone_name, price_date, breakdown))
        if reasons is not None:
            click.echo("\n" + format_explain(reasons))


@cli.command()
@click.argument("query")
@click.option("--snapshot", "snapshot", type=click.Path(),
              help="The snapshot to search (default: snapshot.db beside the embedded store, as serve finds it).")
@click.option("--agent", multiple=True, help="Only this agent (again: either).")
@click.option("--server", multiple=True, help="Only this server (again: either).")
@click.option("--source", multiple=True, help="Only this source kind (openclaw, claude-code, codex, ...).")
@click.option("--since", help="Sessions active on or after this local day (YYYY-MM-DD).")
@click.option("--until", help="Sessions active on or before this local day (YYYY-MM-DD).")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 500), help="Sessions to show.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: count and the ranked sessions.")
def search(query, snapshot, agent, server, source, since, until, limit, as_json):
    """Which session was it? Ranked sessions of the snapshot (redacted) for QUERY, each with its best
    matching messages. QUERY: words (all must occur), a OR b, -word, "a phrase", prefix*, and the
    filters agent:, server:, source:, tool: (docs/search.md)."""
    import sqlite3

    from . import session_search as S
    from .snapshot import check_servable, default_snapshot_path
    from .terminal import clean, json_text

    path = Path(snapshot).expanduser() if snapshot else default_snapshot_path()
    try:
        check_servable(path)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        options = S.Options(agent=list(agent), server=list(server), source=list(source),
                            since=S.check_day(since, "--since"), until=S.check_day(until, "--until"), limit=limit)
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'session_list_fts'").fetchone():
                raise click.ClickException("this snapshot has no session list: export it again with this version "
                                           "of AgentBase (agentbase export)")
            found = S.search(conn, query, options)
        finally:
            conn.close()
    except S.QueryError as exc:
        raise click.ClickException(str(exc)) from None
    except sqlite3.Error as exc:
        raise click.ClickException(f"cannot read the snapshot at {path}: {exc}") from None
    if as_json:
        click.echo(json_text(orjson.dumps(found).decode()))
        return
    sessions = found["sessions"]
    if not sessions:
        click.echo(found.get("note") or "no session found")
        return
    more = "" if found["count_exact"] else " or more"
    partial = f" (and {found['partial_count']} with some of the words)" if found["partial_count"] else ""
    click.echo(f"{found['count']}{more} session{'s' if found['count'] != 1 else ''} with every word{partial}, "
               "best first:")
    for rank, s in enumerate(sessions, 1):
        click.echo("")
        title = clean((s["title"] or "(untitled)").replace("\n", " "))[:100]
        plural = "s" if s["matches"] != 1 else ""
        matches = f"{s['matches']}{'' if s['matches_exact'] else '+'} matching message{plural}"
        click.echo(f"{rank}. {title}" + ("   (some of the words)" if s["partial"] else ""))
        click.echo(f"   {clean(s['source'] or '')} · {clean(s['agent_id'] or '')}@{clean(s['server'] or '')} · "
                   f"{(s['started_local'] or '')[:16]} · {matches} · relevance {S.relevance_label(s['relevance'])}")
        click.echo(f"   {s['href']}   (session {s['session_uuid']})")
        for snip in s["snippets"]:
            text = clean(snip["snippet"]).replace("<mark>", "[").replace("</mark>", "]")
            click.echo(f"   - {snip['role']}: {text}")


@cli.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Config file (default: $AGENTBASE_CONFIG, else ~/.config/agentbase/config.yml).")
@click.option("--db", envvar="AGENTBASE_DB", help="Archive URL; overrides the config file's database.")
@click.option("--json-summary", is_flag=True, help="Print the import summary as one JSON object on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Only errors (for cron).")
def sync(config_file, db, json_summary, quiet):
    """Import from every configured server, then export the snapshot: the
    one command for cron. A second run while one is in progress exits at once."""
    _config_run(config_file, None, None, db, json_summary, quiet, export=True)


def _config_run(config_file, server, agent, db, json_summary, quiet, export):
    """`import --config` and `sync`: every configured server under one lock;
    one unreachable server never stops the others."""
    from .config import ConfigError, load_config
    from .sync import AlreadyRunning, export_after_sync, import_from_config, lock_path, run_lock

    try:
        config = load_config(config_file)
        if server is not None:
            config.server(server)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    _use_prices(config.prices)
    if export:
        _check_snapshot(db or config.database, config.snapshot)
    store = _open(db or config.database)
    show_bar = not quiet and not json_summary and sys.stderr.isatty()

    def bars(name):
        return _files_bar(f"importing {name}")

    snapshot = None
    try:
        with run_lock(lock_path(store)):
            report = import_from_config(store, config, server=server, agent=agent,
                                        progress=bars if show_bar else None)
            if export:
                snapshot = export_after_sync(store, config)
    except AlreadyRunning as exc:
        if exc.watch_pid is not None:
            if not quiet:  # a watch does this run's work as it happens: nothing to do, nothing to mail
                click.echo(f"{exc}: nothing to do", err=True)
            return
        raise click.ClickException(str(exc)) from None
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    for result in report.servers:
        if result.error is not None:
            click.echo(f"error: {result.error}", err=True)
        _problems(result.report, skip=result.error)
        if not quiet and not json_summary and result.error is None:
            click.echo(result.line(), err=True)
    if json_summary:
        click.echo(orjson.dumps(report.as_dict()).decode())
    elif not quiet:
        click.echo(report.summary(), err=True)
    failed = not report.ok
    if snapshot is not None:
        done, message = snapshot
        if done is False:
            click.echo(f"error: {message}", err=True)
            failed = True
        elif not quiet:
            click.echo(message, err=True)
    if failed:
        sys.exit(1)


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Follow the servers of this config file (default, when no PATH is given: "
              "$AGENTBASE_CONFIG or ~/.config/agentbase/config.yml if it exists).")
@click.option("--db", envvar="AGENTBASE_DB", help=DB_HELP)
@click.option("-o", "--output", type=click.Path(),
              help="The snapshot to keep up to date: a new path or an existing snapshot, nothing else.")
@click.option("--interval", default=60.0, show_default=True, type=click.FloatRange(1, 86400),
              help="Seconds between polls of the remote servers.")
@click.option("-q", "--quiet", is_flag=True, help="Only errors.")
def watch(paths, config_file, db, output, interval, quiet):
    """Keep the archive and the snapshot up to date as agents write: local
    sources are followed as their files change, remote servers polled every
    --interval seconds. Holds sync's lock while it runs; stops on SIGTERM."""
    from .config import ConfigError, load_config
    from .snapshot import export_snapshot
    from .sync import AlreadyRunning, import_from_config, lock_path, run_lock, server_paths
    from .sources import LOCAL
    from .watch import WatchPlan, watch as run_watch

    config = None
    if paths:
        local_paths = [str(Path(p).expanduser().resolve()) for p in paths]
    else:
        if config_file is None and default_config_path().is_file():
            config_file = str(default_config_path())
        if config_file is not None:
            try:
                config = load_config(config_file)
            except ConfigError as exc:
                raise click.ClickException(str(exc)) from None
            local_paths = [str(Path(p).expanduser()) for s in config.servers if s.local
                           for p in server_paths(LOCAL, s)[0]]
        else:
            local_paths = _default_paths() or []
            if not local_paths:
                raise click.ClickException("nothing to watch: no transcripts in the default places "
                                           "(name a PATH, or write a config file)")
    _use_prices(config.prices if config is not None else None)
    url = db or (config.database if config is not None else None)
    snapshot = _check_snapshot(url, output or (config.snapshot if config is not None else None))
    store = _open(url)
    say = (lambda line: None) if quiet else (lambda line: click.echo(line, err=True))

    def report_line(report) -> None:
        _problems(report)
        if report.files_imported or report.files_failed:
            say(f"{time.strftime('%H:%M:%S')} {report.summary()}")

    def import_local():
        from .pipeline import run_import

        if config is None:
            report_line(run_import(store, local_paths))
            return
        local = [s for s in config.servers if s.local]
        for server in local:
            for result in import_from_config(store, config, server=server.name).servers:
                if result.error:
                    click.echo(f"error: {result.error}", err=True)
                report_line(result.report)

    remote = [s for s in config.servers if not s.local] if config is not None else []

    def import_remote():
        for server in remote:
            for result in import_from_config(store, config, server=server.name).servers:
                if result.error:
                    click.echo(f"error: {result.error}", err=True)
                report_line(result.report)

    from .snapshot_state import state_path

    def export():
        result = export_snapshot(store, snapshot, timezone=config.timezone if config is not None else None)
        if not result.unchanged:
            say(f"{time.strftime('%H:%M:%S')} {result.summary()}")

    plan = WatchPlan(local_paths, import_local, import_remote if remote else None, export, interval=interval,
                     say=say, ignore=(str(store.location), str(snapshot.parent / ("." + snapshot.name)),
                                      str(snapshot), str(state_path(snapshot)),
                                      str(snapshot.parent / ("." + state_path(snapshot).name))))
    try:
        with run_lock(lock_path(store), "watch"):
            status = run_watch(plan)
    except AlreadyRunning as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    sys.exit(status)


@cli.command()
@click.argument("snapshot", required=False, type=click.Path())
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (0.0.0.0 makes the explorer reachable from other machines).")
@click.option("-p", "--port", default=8001, show_default=True, type=int, help="Port to listen on.")
@click.option("-m", "--metadata", "metadata_path", type=click.Path(exists=True, dir_okay=False),
              help="Datasette metadata (default: the repository's metadata.yml, applied to SNAPSHOT's name).")
@click.option("--template-dir", type=click.Path(exists=True, file_okay=False),
              help="Datasette templates (default: the repository's templates/).")
@click.option("--setting", "settings", type=(str, str), multiple=True, help="A Datasette setting: NAME VALUE.")
@click.option("--password-env", metavar="VAR",
              help="Put the explorer behind a login; the password is read from environment variable VAR "
              "(never give the password itself on the command line).")
@click.option("--no-sql", is_flag=True, help="Turn off arbitrary SQL (and the database download); "
              "the canned queries, tables and rows stay.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Read the serve: section (password_env, sql) of this config file "
              "(default: $AGENTBASE_CONFIG or ~/.config/agentbase/config.yml if it exists).")
@click.option("--forwarded-allow-ips", "forwarded_allow_ips", metavar="ADDRESSES", default="",
              callback=lambda ctx, param, value: _proxy_addresses(value),
              help="Comma-separated addresses (or networks, 10.0.0.0/8) of the reverse proxies in front: "
              "only connections from them have X-Forwarded-For/-Proto believed (the client's address, for "
              "the login throttle and the log; https). Default: none, not even 127.0.0.1.")
def serve(snapshot, host, port, metadata_path, template_dir, settings, password_env, no_sql, config_file,
          forwarded_allow_ips):
    """Explore SNAPSHOT (default: snapshot.db beside the embedded store) with
    Datasette: live (each export's update shows on the next page, whole), with
    its metadata, templates and the AgentBase plugin (session browser,
    conversation view, dashboard)."""
    from .config import ConfigError, load_serve_options
    from .snapshot import default_snapshot_path

    try:
        options = load_serve_options(config_file)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    password_env = password_env or options.password_env
    no_sql = no_sql or not options.sql
    if password_env is not None:
        _check_password_env(password_env)
    elif host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"warning: serving on {host} without a password: anyone who can reach it reads every "
                   "transcript (use --password-env VAR)", err=True)
    from .snapshot import check_servable

    path = Path(snapshot).expanduser() if snapshot else default_snapshot_path()
    try:
        check_servable(path)  # before anything is served: one line for what is not a snapshot
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    from datasette_agentbase.serve import serve as run_serve

    run_serve(path, host=host, port=port, metadata_path=Path(metadata_path) if metadata_path else None,
              template_dir=Path(template_dir) if template_dir else None, settings=dict(settings),
              password_env=password_env, no_sql=no_sql, forwarded_allow_ips=forwarded_allow_ips)


@cli.command()
@click.argument("snapshot", required=False, type=click.Path())
def mcp(snapshot):
    """Answer an agent's questions about past sessions over MCP (stdio): search, read a session, list
    sessions, usage and shell commands, from SNAPSHOT (default: the one `agentbase serve` serves), read-only
    and redacted. For an agent's MCP config: docs/mcp.md."""
    from .snapshot import check_servable, default_snapshot_path

    path = Path(snapshot).expanduser() if snapshot else default_snapshot_path()
    try:
        check_servable(path)  # one line for what is not a snapshot, before the protocol starts
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    from datasette_agentbase.mcp_server import run_stdio

    run_stdio(path)


def _proxy_addresses(value: str) -> list[str]:
    """``--forwarded-allow-ips``: each entry an IP address or network, normalized; none for ''."""
    import ipaddress

    found = []
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            found.append(str(ipaddress.ip_network(item, strict=False)) if "/" in item
                         else str(ipaddress.ip_address(item)))
        except ValueError:
            shown = repr(item) if len(item) <= 60 and item.isprintable() else "an entry"
            raise click.BadParameter(f"{shown} is not an IP address or network (name each proxy by its "
                                     "address; '*' is not allowed: it would believe any client)",
                                     param_hint="'--forwarded-allow-ips'") from None
    return found


def _check_password_env(name: str) -> None:
    """The variable must be named properly and hold a password. Messages never repeat the name: a
    password given by mistake in its place would be printed."""
    import os
    import re

    from datasette_agentbase.access import MIN_PASSWORD_LENGTH

    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise click.ClickException("--password-env takes the NAME of an environment variable (letters, digits "
                                   "and _), which holds the password; never the password itself")
    value = os.environ.get(name)
    if not value:
        raise click.ClickException("the environment variable given to --password-env is not set or empty")
    if len(value) < MIN_PASSWORD_LENGTH:
        raise click.ClickException(f"the explorer's password is shorter than {MIN_PASSWORD_LENGTH} characters")


def main() -> None:  # console_scripts entry point
    cli(prog_name="agentbase")


def _quiet_limits() -> None:
    """A file-size limit (``ulimit -f``) must end a run with one line, not kill
    it: with SIGXFSZ ignored a write past the limit fails with EFBIG, which the
    store reports."""
    import signal

    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)




# --- agentbase prices: the model price table (importer/prices.py) ---------------------------------

@cli.group("prices")
def prices_group() -> None:
    """The model price table that prices calls whose transcripts record no cost."""


def _mtok(rate: float) -> str:
    """A per-token USD rate as dollars per million tokens: $3, $3.75, $0.028."""
    text = f"{rate * 1_000_000:.6f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"${whole}.{frac.ljust(2, '0')}"


def _load_prices():
    from .prices import PriceError, PriceTable

    try:
        return PriceTable.load()
    except PriceError as exc:
        raise click.ClickException(str(exc)) from None


def _table_line(table) -> str:
    return f"{table.date or 'undated'}, {len(table)} models ({table.describe_source()})"


@prices_group.command("show")
@click.argument("model", required=False)
def prices_show(model: str | None) -> None:
    """The table's date, source and size; with MODEL, its prices per million tokens and the table
    entry it matched."""
    from .prices import PACKAGED_PATH, PriceTable, PriceError

    table = _load_prices()
    if model is None:
        mine = table.path is not None and table.path.resolve() != PACKAGED_PATH.resolve()
        click.echo(f"price table: {_table_line(table)}")
        click.echo(f"file: {table.path}" + (" (yours, from `agentbase prices update`)" if mine else " (packaged)"))
        if mine:
            try:
                packaged = PriceTable.load(PACKAGED_PATH)
            except PriceError:
                packaged = None
            if packaged and packaged.date and table.date and packaged.date > table.date:
                click.echo(f"note: the packaged table ({packaged.date}) is newer than yours: update yours, "
                           f"or delete {table.path} to use it", err=True)
        return
    price = table.lookup(model)
    if price is None:
        raise click.ClickException(f"{model}: not in the price table of {table.date or 'undated'}; its calls "
                                   "count as unpriced (a config prices: entry can give its price)")
    click.echo(f"{model}: matched {price.name} ({price.provider or 'unknown provider'}), "
               f"table of {table.date or 'undated'}")
    from .prices import CACHE_READ, CACHE_WRITE, CACHE_WRITE_1H

    ranges = sorted(price.entry.get("tiered_pricing") or [], key=lambda t: t["range"][0])
    if ranges:  # one row per range: (label, prompt tokens inside it, the mapping its rates come from)
        rows = [(("up to " if not t["range"][0] else f"{_ktok(t['range'][0])} to ") + _ktok(t["range"][1]),
                 int(t["range"][0]) + 1, t) for t in ranges]
    else:
        cuts = sorted(price.thresholds())
        rows = [(f"up to {_ktok(cuts[0])}" if cuts else "all requests", 0, price.entry)]
        rows += [(f"above {_ktok(c)}", c + 1, price.entry) for c in cuts]
    header = ("input tokens", "input", "output", "cache read", "cache write 5m", "cache write 1h")
    table_rows = [header]
    marked = False
    for label, tokens, given in rows:
        r = price.rates(tokens)
        cells = [label, _mtok(r.input), _mtok(r.output)]
        for key, rate in ((CACHE_READ, r.cache_read), (CACHE_WRITE, r.cache_write_5m),
                          (CACHE_WRITE_1H, r.cache_write_1h)):
            missing = key not in given
            marked |= missing
            cells.append(_mtok(rate) + ("*" if missing else ""))
        table_rows.append(tuple(cells))
    widths = [max(len(row[i]) for row in table_rows) for i in range(len(header))]
    click.echo("  USD per million tokens:")
    for row in table_rows:
        click.echo("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    if marked:
        click.echo("  * not in the table: cache reads and 5-minute writes cost the input rate, "
                   "1-hour writes 2x the input rate")


def _ktok(n) -> str:
    n = int(n)
    return f"{n // 1000}k" if n and n % 1000 == 0 else str(n)


@prices_group.command("update")
@click.option("--from", "source", required=True, type=click.Path(dir_okay=False),
              help="LiteLLM's model_prices_and_context_window.json, or a litellm wheel "
                   "(pip download --no-deps litellm).")
@click.option("--date", "day", default=None, metavar="YYYY-MM-DD",
              help="The table's date. Default: the day FILE was last written.")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="Write here instead of the user's table (e.g. the packaged importer/data/model_prices.json).")
def prices_update(source: str, day: str | None, output: str | None) -> None:
    """Refresh the price table from FILE, offline: checks it, keeps the chat models of the providers
    AgentBase prices, and writes it to $AGENTBASE_HOME/model_prices.json (or
    ~/.local/share/agentbase/model_prices.json), which then takes precedence over the packaged table.
    A bad FILE leaves the current table as it is."""
    from .prices import PriceError, update_prices

    try:
        old, new = update_prices(source, output, day)
    except PriceError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the price table: {exc.strerror or exc}") from None
    click.echo(f"price table written to {new.path}")
    click.echo(f"  old: {_table_line(old) if old else 'unreadable'}" + (f" [{old.path}]" if old else ""))
    click.echo(f"  new: {_table_line(new)}")
