"""A normal install keeps what the explorer serves: a wheel built from the repository, installed in a
fresh virtual environment and run from a folder with no source tree, serves every canned query of
metadata.yml (shipped as package data), and the README's first command works without -e."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from ports import free_port

REPO = Path(__file__).resolve().parents[1]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _venv_seeing_this_environment(venv: Path) -> Path:
    """A new virtual environment whose imports find the dependencies this test runs with, wherever
    they were installed (the base Python, or the virtual environment the README's ``pip install``
    filled), while the package itself can only come from what is installed into it.

    ``python -m venv --system-site-packages`` run from a virtual environment sees the *base* Python's
    site-packages, not that environment's: so a ``.pth`` file in the new environment adds this
    interpreter's site-packages folders after its own (its own, with the wheel, come first)."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        ours.append(site.getusersitepackages())
    folders = [p for p in dict.fromkeys(ours) if os.path.isdir(p) and Path(p).resolve() != Path(purelib).resolve()]
    (Path(purelib) / "zz-agentbase-test-deps.pth").write_text("".join(f"{p}\n" for p in folders), encoding="utf-8")
    return venv


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("install")
    wheels = work / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(wheels), str(REPO)], capture_output=True, text=True, cwd=work)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(wheels.glob("agentbase-*.whl"))
    venv = _venv_seeing_this_environment(work / "venv")
    # --ignore-installed: an install of the package that the new environment sees (a developer's
    # editable one) must not stand in for the wheel
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                          "--ignore-installed", str(wheel)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    home = work / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTBASE", "PYTHONPATH"))}
    env.update(AGENTBASE_HOME=str(home), AGENTBASE_CONFIG=str(work / "none.yml"), HOME=str(work / "user"))
    return venv, work, env


def test_the_wheel_is_what_runs(installed):
    venv, work, env = installed
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import importer, datasette_agentbase; print(importer.__file__); "
                            "print(datasette_agentbase.__file__)"],
                           capture_output=True, text=True, cwd=work, env=env)
    assert where.returncode == 0, where.stderr
    for line in where.stdout.split():
        assert str(venv) in line and str(REPO) not in line


def test_the_first_readme_command_and_every_canned_query(installed):
    venv, work, env = installed
    agentbase = str(venv / "bin" / "agentbase")
    for args in (["import"], ["export"], ["stats"]):  # the README's first command, after `pip install .`
        proc = subprocess.run([agentbase, *args], capture_output=True, text=True, cwd=work, env=env, timeout=300)
        assert proc.returncode == 0, (args, proc.stderr[-1000:])
    port = free_port()
    server = subprocess.Popen([agentbase, "serve", "--port", str(port)], cwd=work, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                if _get(base + "/-/versions.json")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        metadata = yaml.safe_load((REPO / "metadata.yml").read_text(encoding="utf-8"))
        queries = metadata["databases"]["snapshot"]["queries"]
        assert queries
        for name in queries:
            status, body = _get(f"{base}/snapshot/{name}.json?_shape=objects")
            assert status == 200, (name, body[:300])
            assert json.loads(body)["ok"] is True, name
        status, body = _get(f"{base}/-/metadata.json")
        assert status == 200 and json.loads(body)["title"] == metadata["title"]
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert "was not found" not in err
