"""The importer's floors, read from its own source (every import, at the top of a module, inside
a function or under TYPE_CHECKING): the unit types are the ground floor, the stages below the kinds
never reach up into ``sources/``, the kinds' own helpers are used by kinds only, no two files
import each other (directly or round a longer circle), and one function opens a source's SQLite
database with an authorizer."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "importer"

# The stages under the kinds: none of them may import importer.sources.
BELOW_THE_KINDS = ("importer.units", "importer.parser", "importer.writer", "importer.store")
# The stages that read what the kinds yield: no kind imports them.
ABOVE_THE_KINDS = ("importer.shape", "importer.snapshot", "importer.derived", "importer.writer", "importer.store",
                   "importer.pipeline", "importer.sync", "importer.cli")
# Helpers only the kinds use.
KIND_HELPERS = ("importer.sources.reader", "importer.sources.openclaw_db", "importer.sources.readonly")
# Circles allowed for now: none (the snapshot/ package broke export <-> redact, snapshot/redaction.py
# parser <-> redact).
KNOWN_CIRCLES: set[frozenset] = set()


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The importer modules ``path`` imports (a package's name when it imports the package)."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "importer")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "importer":
                continue
            for alias in node.names:  # "from . import parser" names a module
                sub = f"{target}.{alias.name}"
                out.add(sub if _exists(sub) else target)
    out.discard(name)
    return out


def _exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (REPO / rel).with_suffix(".py").is_file() or (REPO / rel / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_unit_types_are_the_ground_floor():
    graph = _graph()
    assert "importer.units" in graph
    assert graph["importer.units"] == set()
    for name in ("Unit", "Container", "Checkpoint", "Batch", "Outcome", "SessionInfo", "SourceError",
                 "SourceLost", "NotATranscript"):
        tree = ast.parse((PACKAGE / "units.py").read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body), name


def test_nothing_below_the_kinds_reaches_up_into_sources():
    graph = _graph()
    up = sorted((m, t) for m, targets in graph.items() if _within(m, BELOW_THE_KINDS)
                for t in targets if _within(t, ("importer.sources",)))
    assert up == []


def test_the_kinds_reach_no_stage_above_them():
    """A kind declares its rows (rows.py) and its snapshot tables (tables.py, the ground floor) with
    what stands below it: never with the stages that read what it yields."""
    graph = _graph()
    assert graph["importer.tables"] == set()
    up = sorted((m, t) for m, targets in graph.items() if _within(m, ("importer.sources",))
                for t in targets if _within(t, ABOVE_THE_KINDS))
    assert up == []


def test_the_kinds_helpers_are_used_by_kinds_only():
    graph = _graph()
    outside = sorted((m, t) for m, targets in graph.items() if not _within(m, ("importer.sources",))
                     for t in targets if _within(t, KIND_HELPERS))
    assert outside == []
    assert not (PACKAGE / "reader.py").exists() and not (PACKAGE / "openclaw_db.py").exists()


def test_no_circle_between_files():
    graph = _graph()
    # Strongly connected groups of files (Tarjan), a package standing for its __init__.py.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                top = stack.pop()
                group.add(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert sorted(sorted(g) for g in groups if frozenset(g) not in KNOWN_CIRCLES) == []


def test_one_function_opens_a_source_database_with_an_authorizer():
    callers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "set_authorizer":
                callers.append(str(path.relative_to(REPO)))
    assert callers == ["importer/sources/readonly.py"]


def test_the_runtime_ships_the_demo_only():
    """Benchmark trees are written by bench/trees.py; the package keeps the small demo the main job
    imports (``agentbase import`` with nothing configured) and the generator it is made with."""
    tree = ast.parse((PACKAGE / "demo.py").read_text(encoding="utf-8"))
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    assert functions == {"generate_demo"}
    bench = ast.parse((REPO / "bench" / "trees.py").read_text(encoding="utf-8"))
    assert {"generate_tree", "generate_file_count_tree"} <= {n.name for n in bench.body if isinstance(n, ast.FunctionDef)}
