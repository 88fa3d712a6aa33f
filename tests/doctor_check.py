"""The checks every kind's tests make of its unknown records and agent versions (docs/sources.md,
"Unknown records"): through the real CLI (`agentbase import`, `agentbase doctor --json`) in a HOME
made in tmp, as tests/test_doctor.py does for codex and pi."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def sample(*parts: str) -> Path:
    """A path under shared/ (real people's data: read, never copied into the repository); missing
    samples skip the test, except under CI=true where they fail it."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"samples missing under CI: {path}")
        pytest.skip(f"no samples at {path}")
    return path


def agentbase(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBASE_")}
    env.update(HOME=str(home), AGENTBASE_HOME=str(home / "ab"), PYTHONPATH=str(REPO),
               XDG_CONFIG_HOME=str(home / "cfg"))
    return subprocess.run([sys.executable, "-m", "importer", *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=str(home))


def unrecognised(home: Path, *paths: Path) -> list[str]:
    """Import ``paths`` (every kind's default places in ``home`` when none): the run's
    ``format not recognised`` warnings."""
    got = agentbase(home, "import", *[str(p) for p in paths], "-q")
    assert got.returncode == 0, got.stderr[-2000:]
    return [x for x in got.stderr.splitlines() if "format not recognised" in x]


def doctor(home: Path, kind: str) -> dict:
    """``agentbase doctor --json``'s figures of ``kind`` on this machine (after an import)."""
    got = agentbase(home, "doctor", "--json")
    assert got.returncode == 0, got.stderr[-2000:]
    servers = json.loads(got.stdout)["servers"]
    return next(k for k in servers[0]["kinds"] if k["kind"] == kind)


def assert_warned(warned: list[str], kind: str, files: int = 1) -> None:
    assert len(warned) == 1, warned
    assert f"{files} {kind} file{'s' if files != 1 else ''} changed" in warned[0] and "none read" in warned[0], warned


def doctor_versions(home: Path, kind: str, db: Path | None = None) -> set[str]:
    """The agent versions ``agentbase doctor --json`` lists for ``kind``, on every server the archive
    (``db``, else the one in ``home``) holds."""
    home.mkdir(parents=True, exist_ok=True)
    got = agentbase(home, "doctor", "--json", *(["--db", f"sqlite:///{db}"] if db is not None else []))
    assert got.returncode == 0, got.stderr[-2000:]
    return {v for s in json.loads(got.stdout)["servers"] for k in s["kinds"] if k["kind"] == kind
            for v in k["versions"]}
