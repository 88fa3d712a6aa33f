"""The CLI's help matches the product (issue #26, "The CLI"): -h everywhere, every kind named, every
kind's default places in `import --help`, the MariaDB URL form under --db, and `stats` fitting an
80-column terminal with the same figures as --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def agentbase(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "importer", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "80", **(env or {})}, timeout=300)


def test_every_command_takes_h_for_help():
    from importer.cli import cli

    names = sorted(cli.commands)
    assert {"import", "export", "serve", "stats", "report", "doctor"} <= set(names)
    for name in names:
        got = agentbase(name, "-h")
        assert got.returncode == 0 and got.stdout.startswith("Usage: agentbase " + name), (name, got.stderr)
    assert agentbase("-h").stdout == agentbase("--help").stdout
    serve = agentbase("serve", "-h").stdout
    assert "--host" in serve and "-h, --host" not in serve


def test_the_help_names_every_kind_and_its_places():
    from importer.sources import all_sources

    top = " ".join(agentbase("-h").stdout.split())
    for source in all_sources():
        assert source.kind in top, source.kind
    text = agentbase("import", "-h").stdout
    lines = text[text.index("Default places, per kind"):].splitlines()[1:]
    places: dict[str, list[str]] = {}
    kind = None
    for line in lines:  # "  kind:  place", then "         place" for each other place of the kind
        first, _, rest = line.strip().partition(" ")
        if first.endswith(":"):
            kind, line = first[:-1], rest
        places.setdefault(kind, []).append(line.strip())
    for source in all_sources():
        for place in source.candidates():
            assert place in places[source.kind], (source.kind, place)
    assert "mysql://" in " ".join(agentbase("stats", "-h").stdout.split())


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    home = tmp_path_factory.mktemp("help")
    env = {"AGENTBASE_HOME": str(home), "AGENTBASE_CONFIG": str(home / "none.yml"), "HOME": str(home)}
    assert agentbase("import", "--demo", "-q", env=env).returncode == 0
    return env


@pytest.mark.parametrize("by", [None, "agent", "server", "day"])
def test_stats_fits_80_columns_with_the_json_figures(demo, by):
    extra = ["--by", by] if by else []
    text = agentbase("stats", *extra, env=demo).stdout
    lines = text.splitlines()
    assert lines and max(len(x) for x in lines) <= 80, max(lines, key=len)
    data = json.loads(agentbase("stats", *extra, "--json", env=demo).stdout)
    rows = data if isinstance(data, list) else [data]
    sessions = [x.split() for x in lines[1:] if x.strip() and not x.startswith(("tools:", "all"))]
    if by is None and len(data.get("by_source") or {}) > 1:
        total = next(x.split() for x in lines if x.startswith("all"))
        assert int(total[1]) == data["sessions"]
    else:
        counts = [int(cells[len(cells) - 7]) for cells in sessions]
        assert sorted(counts) == sorted(r["sessions"] for r in rows)
    wide = agentbase("stats", *extra, env={**demo, "COLUMNS": "400"}).stdout
    assert "cacheRead" in wide.splitlines()[0]  # every figure when there is room


def test_import_names_each_file_it_did_not_read_and_why(tmp_path):
    secret = "ghp_" + "Z9" * 18
    (tmp_path / "notes.jsonl").write_text(json.dumps({"hello": secret}) + "\n")
    day = tmp_path / ".codex" / "sessions" / "2025" / "01" / "01"
    day.mkdir(parents=True)
    (day / "rollout-2025-01-01T00-00-00-abc.jsonl").write_text(json.dumps({"note": secret}) + "\n")
    got = agentbase("import", str(tmp_path / "notes.jsonl"), str(tmp_path / ".codex"), "--db",
                    f"sqlite:///{tmp_path / 'a.db'}", env={"HOME": str(tmp_path)})
    assert got.returncode == 0, got.stderr
    notes = [x for x in got.stderr.splitlines() if x.startswith("note: not read: ")]
    assert len(notes) == 2 and secret not in got.stderr
    assert any("notes.jsonl: not a" in x for x in notes) and any("rollout-" in x and "not a Codex" in x for x in notes)
    # the file named on its own is not a sign of a changed format; the one in Codex's place is
    warned = [x for x in got.stderr.splitlines() if "format not recognised" in x]
    assert len(warned) == 1 and "codex" in warned[0]


def test_a_filter_that_matches_nothing_says_what_there_is(demo, tmp_path):
    got = agentbase("report", "daily", "--source", "no-such-kind", env=demo)
    assert got.returncode == 1 and len(got.stderr.strip().splitlines()) == 1
    assert "no source 'no-such-kind' in the archive" in got.stderr and "openclaw" in got.stderr
    got = agentbase("report", "daily", "--agent", "nobody", env=demo)
    assert got.returncode == 1 and "no agent 'nobody'" in got.stderr
    demo_tree = Path(demo["AGENTBASE_HOME"]) / "demo-transcripts"
    got = agentbase("import", str(demo_tree), "--agent", "nobody", "--db", f"sqlite:///{tmp_path / 'b.db'}", env=demo)
    assert got.returncode == 1
    line = next(x for x in got.stderr.splitlines() if x.startswith("warning: no agent 'nobody'"))
    assert "agents there:" in line and "main" in line


def _modules(env: dict, *args: str) -> set[str]:
    """The modules an `agentbase ARGS` run had imported when it exited (it must succeed)."""
    out = Path(env["AGENTBASE_HOME"]) / "modules.txt"
    code = ("import atexit, runpy, sys\n"
            f"atexit.register(lambda: open({str(out)!r}, 'w').write('\\n'.join(sorted(sys.modules))))\n"
            f"sys.argv = ['agentbase', *{list(args)!r}]\n"
            "runpy.run_module('importer', run_name='__main__')\n")
    got = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=300)
    assert got.returncode == 0, got.stderr[-800:]
    return set(out.read_text().split())


def test_start_up_imports_what_the_command_uses(tmp_path):
    """Issue #23: `agentbase -h` imports no pipeline, no stats and no YAML; an
    import, a stats and an export with nothing new import no YAML, zstd or importlib.metadata (no
    config file, no plug-in, no compressed file), and the export neither the credential detectors
    (detect-secrets, requests) nor sqlite-utils (numpy)."""
    env = {"AGENTBASE_HOME": str(tmp_path), "AGENTBASE_CONFIG": str(tmp_path / "none.yml"), "HOME": str(tmp_path)}
    assert agentbase("import", "--demo", "-q", env=env).returncode == 0
    assert agentbase("export", "-q", env=env).returncode == 0
    top = _modules(env, "-h")
    assert not top & {"importer.pipeline", "importer.stats", "yaml", "importlib.metadata"}
    heavy = {"yaml", "zstandard", "importlib.metadata"}
    demo = str(tmp_path / "demo-transcripts")
    for args in (["import", demo, "-q"], ["stats"], ["export", "-q"]):
        got = _modules(env, *args)
        assert not got & heavy, (args, sorted(got & heavy))
    assert not got & {"importer.redact", "detect_secrets", "requests", "sqlite_utils", "numpy"}, sorted(got)


def test_the_plug_in_scan_finds_what_importlib_metadata_finds():
    """sources._entry_points reads only the entry_points.txt that name a group (start-up does without
    importlib.metadata): for every group this environment's distributions declare, the same entry
    points in the same order as importlib.metadata's, and none for a group no one declares."""
    from importlib.metadata import distributions, entry_points

    from importer.sources import PLUGIN_GROUP, _entry_points

    groups = {ep.group for dist in distributions() for ep in dist.entry_points}
    assert {"console_scripts", "pytest11"} <= groups  # (pytest's own plug-ins at least)
    for group in sorted(groups | {PLUGIN_GROUP, "no.such.group"}):
        want = [(ep.name, ep.value) for ep in entry_points(group=group)]
        assert [(ep.name, ep.value) for ep in _entry_points(group)] == want, group
