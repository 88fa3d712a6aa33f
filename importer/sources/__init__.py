"""Where transcripts are: one module per source kind, registered in one place.

Every module of this package that defines ``SOURCE`` (a
:class:`~importer.sources.base.Source`, or a list of them) is a source kind;
so are the objects other packages register under the ``agentbase.sources``
entry point group. Built-in kinds and plug-ins take the same path: adding a
kind is adding a module (and its tests), nothing else.

:func:`discover` turns the paths a user names into units and containers
(``importer/units.py``), asking each kind, in ``order``, whether it recognises its layout
at the path; several may (an OpenClaw state dir holds JSONL files and SQLite
stores). A single file goes to the first kind that claims it by name and
first bytes. A folder no kind recognises may hold one tree per server: each
subfolder is tried, its name the server's; a subfolder no kind recognises
may itself hold one tree per server (servers grouped by kind or by site). Everything is read through one
filesystem interface (``fs.py``), local or SFTP, so discovery and reading
work the same over SSH.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import re

# The package's public names: what a kind (built in or a plug-in) builds on.
from ..units import (  # noqa: F401
    Batch, Checkpoint, Container, NotATranscript, Opened, Outcome, Problem, SessionInfo, SourceError, SourceLost,
    Unit, file_token, unchanged,
)
from .base import Discovery, Scope, Source, default_server_name, sort_units  # noqa: F401
from .fs import LOCAL, FileSystem, shown

log = logging.getLogger("agentbase")

_INFRASTRUCTURE = {"base", "fs", "reader", "readonly", "openclaw_db"}  # helpers of the kinds, not kinds
_registry: list[Source] | None = None
SNIFF_BYTES = 64 * 1024


def register(source: Source) -> Source:
    """Add a source kind (for plug-ins and tests); returns it."""
    kinds = all_sources()
    if any(s.name == source.name for s in kinds):
        raise ValueError(f"a source named {source.name!r} is already registered")
    kinds.append(source)
    kinds.sort(key=lambda s: (s.order, s.name))
    return source


def all_sources() -> list[Source]:
    """Every registered kind, in discovery order (loaded on first use)."""
    global _registry
    if _registry is None:
        found: list[Source] = []
        for info in pkgutil.iter_modules(__path__):
            if info.name in _INFRASTRUCTURE or info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{__name__}.{info.name}")
            declared = getattr(module, "SOURCE", None)
            if declared is not None:
                found.extend(declared if isinstance(declared, (list, tuple)) else [declared])
        found.extend(_plugins())
        found.sort(key=lambda s: (s.order, s.name))
        _registry = found
    return _registry


def _plugins() -> list[Source]:
    out = []
    for ep in _entry_points(PLUGIN_GROUP):
        try:
            loaded = ep.load()
        except Exception as exc:  # a broken plug-in never stops the built-in kinds
            log.warning("source plug-in %s cannot be loaded: %s", ep.name, exc)
            continue
        out.extend(loaded if isinstance(loaded, (list, tuple)) else [loaded])
    return out


PLUGIN_GROUP = "agentbase.sources"


def _entry_points(group: str) -> list:
    """``importlib.metadata.entry_points(group=group)``, the same entry points in the same order,
    without parsing every installed distribution's entry points (and importing importlib.metadata,
    email and zipfile) when none declares the group: the sys.path folders are listed and only
    the ``entry_points.txt`` that name the group are parsed, each distribution the first of its
    name on sys.path as importlib.metadata counts it. A zip on sys.path, or a finder of
    distributions of its own, is left to importlib.metadata (one in a million runs)."""
    import os
    import sys

    if any(hasattr(f, "find_distributions") and f.__name__ != "PathFinder" for f in
           (f if isinstance(f, type) else type(f) for f in sys.meta_path)):
        return _all_entry_points(group)
    seen: set[str] = set()
    holders = []  # the dist-info folders whose entry_points.txt names the group
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except NotADirectoryError:
            return _all_entry_points(group)  # (a zip)
        except OSError:
            continue
        for name in names:
            low = name.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            key = re.sub(r"[-_.]+", "_", low.rpartition(".")[0].partition("-")[0])
            if key in seen:
                continue
            seen.add(key)
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except (OSError, ValueError):
                continue
            if group in text:
                holders.append(os.path.join(folder, name))
    if not holders:
        return []
    from importlib.metadata import PathDistribution
    from pathlib import Path

    return [ep for path in holders for ep in PathDistribution(Path(path)).entry_points.select(group=group)]


def _all_entry_points(group: str) -> list:
    from importlib.metadata import entry_points

    return list(entry_points(group=group))


def kind(name: str) -> Source:
    """The registered kind of that ``name`` (a kind hands work to another by
    name, without importing it)."""
    return next(s for s in all_sources() if s.name == name)


def kinds() -> list[str]:
    """The ``source`` column's values, one per kind."""
    return sorted({s.kind for s in all_sources()})


def default_paths(fs: FileSystem | None = None) -> list[str]:
    """The places every kind would be imported from on a machine (``fs``,
    default this one) when no PATH is given: those that exist."""
    fs = fs or LOCAL
    out: list[str] = []
    for source in all_sources():
        for path in source.default_paths(fs):
            if path not in out:
                out.append(path)
    return out


def default_candidates() -> list[str]:
    """Every kind's default places, for messages."""
    out: list[str] = []
    for source in all_sources():
        out.extend(p for p in source.candidates() if p not in out)
    return out


def discover(paths: list[str], server: str | None = None, agent: str | None = None,
             fs: FileSystem | None = None, agents: list[str] | None = None,
             timezone: str | None = None) -> Discovery:
    """Find every kind's units under each path (see the module docstring).

    ``agent`` names the agent of a single file or a bare folder, and keeps
    only that agent in a larger tree; ``agents`` keeps only these (None: all).
    ``fs``: where the paths are (default: this machine). ``timezone``: the
    zone of the server's local times (None: this machine's).
    """
    fs = fs or LOCAL
    out = Discovery()
    wanted = frozenset(agents) if agents is not None else None
    fs.start()
    for raw in paths:
        path = fs.abspath(raw)
        if not path.isascii():
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:
                out.errors.append(f"no such file or folder: {shown(path)} (the name is not valid UTF-8)")
                continue
        try:
            found = fs.stat(path)
        except OSError as exc:
            out.errors.append(f"cannot read {path}: {exc.strerror or exc}")
            continue
        if found is None:
            out.errors.append(f"no such file or folder: {path}")
            continue
        scope = Scope(server or default_server_name(), agent, wanted, timezone)
        # Symlinks that leave the tree named here are not followed (fs.follow_symlinks).
        fs.confine = fs.realpath(path)
        try:
            if found[0] == "file":
                _file(fs, fs.resolve(path) if not fs.remote else path, found, scope, out)
            elif not _folder(fs, path, scope, out):
                # One subfolder per server; or a folder of such folders (grouped by kind, by site)
                any_found = False
                for sub in fs.subdirs(path):
                    if _folder(fs, sub.path, Scope(server or sub.name, agent, wanted, timezone), out) \
                            or _servers(fs, sub.path, server, agent, wanted, timezone, out):
                        any_found = True
                    else:
                        out.warnings.append(f"skipped {sub.path}: no transcripts of a known kind inside")
                if not any_found:
                    out.errors.append(f"no transcripts found under {path}")
        finally:
            fs.confine = None
    _problems(fs, server or default_server_name(), out)
    _once(fs, out)
    sort_units(out.units)
    return out


def _once(fs: FileSystem, out: Discovery) -> None:
    """A file reached by several paths (a link to a folder also reached by its
    own path, two paths named that overlap through a link, a hard link) is
    listed once: by a path that crosses no link if it has one (a link's name
    never stands for the file's own), else by its shortest path, then the
    first by name. It is read once, and that path is its ``file_path``."""
    if len(out.units) < 2:
        return
    chosen: dict = {}  # (server, identity) -> the unit kept
    lost = []  # (unit, its identity key)
    for unit in out.units:
        if unit.fs is None or isinstance(unit, Problem) or unit.key != unit.path:
            continue  # (a unit named otherwise than its file may share it by design)
        try:
            ident = unit.fs.identity(unit.path)
        except OSError:
            ident = None
        if ident is None:
            continue
        key = (unit.server, ident)
        best = chosen.get(key)
        if best is None:
            chosen[key] = unit
        elif _rank(unit) < _rank(best):
            chosen[key] = unit
            lost.append(best)
        else:
            lost.append(unit)
    if not lost:
        return
    gone = {id(u) for u in lost}
    out.units[:] = [u for u in out.units if id(u) not in gone]
    for u in lost:
        out.keys.discard((u.server, u.key))


def _rank(unit) -> tuple:
    return (unit.fs.through_link(unit.path), len(unit.path), unit.path)


_TRANSCRIPT_ENDINGS = (".json", ".sqlite", ".db", ".zst")


def _problems(fs: FileSystem, server: str, out: Discovery) -> None:
    """What the listings could not list: names that are not valid UTF-8 become
    one failed unit each (in the agent whose folder holds them, as far as the
    listing tells), links out of the tree a warning each."""
    agents_by_folder: dict[str, tuple[str, str]] = {}
    for unit in out.units:
        agents_by_folder.setdefault(fs.dirname(unit.path), (unit.server, unit.agent_id))
    openclaw = kind("openclaw")
    seen = set()
    for folder, name in fs.bad_names:
        parent = fs.basename(folder)
        if not (parent == "agents" or ".jsonl" in name or name.endswith(_TRANSCRIPT_ENDINGS)):
            continue  # not a transcript or an agent by its name: nothing to import anyway
        key = fs.join(shown(folder) if not folder.isascii() else folder, name)
        if key in seen:
            continue
        seen.add(key)
        where = agents_by_folder.get(folder)
        if where is None:
            agent = name if parent == "agents" else (
                fs.basename(fs.dirname(folder)) if parent in ("sessions", "agent") else parent)
            where = (server, shown(agent))
        out.add(Problem(openclaw, where[0], where[1], key,
                        "the name is not valid UTF-8: rename it to import it (it is shown with escapes)"))
    for link, target in fs.outside[:20]:
        out.warnings.append(f"not followed: {link} points outside the tree named ({target}); "
                            "set follow_symlinks: true in the config to follow such links")
    if len(fs.outside) > 20:
        out.warnings.append(f"... and {len(fs.outside) - 20} more links out of the tree not followed")
    loops = sorted(set(fs.loops))
    for link in loops[:20]:
        out.warnings.append(f"not followed: {link} is a link to a folder that holds it (a loop)")
    if len(loops) > 20:
        out.warnings.append(f"... and {len(loops) - 20} more links in a loop not followed")
    fs.bad_names, fs.outside, fs.loops = [], [], []


def _servers(fs: FileSystem, path: str, server: str | None, agent: str | None, wanted, timezone: str | None,
             out: Discovery) -> bool:
    """A folder of one subfolder per server, each named by its own name: whether any was recognised."""
    found = False
    for sub in fs.subdirs(path):
        if _folder(fs, sub.path, Scope(server or sub.name, agent, wanted, timezone), out):
            found = True
    return found


def _folder(fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
    recognised = False
    for source in all_sources():
        if source.find(fs, path, scope, out):
            recognised = True
    return recognised


def _file(fs: FileSystem, path: str, found: tuple, scope: Scope, out: Discovery) -> None:
    _kind, size, mtime_ns = found
    name = fs.basename(path)
    try:
        with fs.open(path, size) as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        head = b""  # read again (and failed clearly) by the import
    kinds = all_sources()
    chosen = next((s for s in kinds if s.claims_file(name, head)), None)
    if chosen is None:
        chosen = kind("openclaw")  # imported as such: ignored when it is not one
    unit = chosen.file_unit(fs, path, size, mtime_ns, scope, out)
    if unit is not None:
        unit.named = True  # a file named on its own: not a kind's place (pipeline.silent_kinds)
        out.add(unit)
