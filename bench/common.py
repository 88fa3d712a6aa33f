"""What the benchmarks share (each puts ``bench/`` on ``sys.path``): their work folder, the wait for
the ``agentbase serve`` one started, and the table of figures they end with."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

# The MariaDB server the store benchmarks use (--mysql): $AGENTBASE_BENCH_MYSQL, else the local one.
MYSQL_URL = os.environ.get("AGENTBASE_BENCH_MYSQL", "mysql://root@127.0.0.1:3306")


def store_options(ap, size_mb: float) -> None:
    """The options of a bench that imports a generated tree into the stores: the tree's size and
    seed, the MariaDB server, the work folder."""
    ap.add_argument("--size-mb", type=float, default=size_mb)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mysql", default=MYSQL_URL)
    ap.add_argument("--workdir")


def work_dir(workdir: str | None, prefix: str) -> Path:
    """``--workdir`` (made if it is missing), else a new temporary folder named ``prefix...``."""
    work = Path(workdir or tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    return work


def wait_served(proc: subprocess.Popen, up: Callable[[], bool], pause: float) -> None:
    """Until ``up()`` says the ``agentbase serve`` that ``proc`` runs answers (an OSError: not yet,
    asked again after ``pause`` seconds), at most 60 s; the bench ends when the server exits first
    or does not answer in time."""
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"agentbase serve exited: {proc.stderr.read()[-600:] if proc.stderr else ''}")
        try:
            if up():
                return
        except OSError:
            time.sleep(pause)
    sys.exit("agentbase serve did not start within 60 s")


def print_figures(rows: list[tuple[str, str, str, str]], value_width: int, target_width: int = 8) -> None:
    """The figures a bench ends with, one a line: figure, value, target, verdict."""
    width = max(len(r[0]) for r in rows)
    for figure, value, target, verdict in rows:
        print(f"{figure:<{width}}  {value:<{value_width}} {target:<{target_width}} {verdict}")
