#!/usr/bin/env python3
"""Login benchmark: how long the right user waits to log in while wrong guesses arrive from elsewhere.

Builds a small snapshot (`agentbase import --demo` + `agentbase export` in a temporary AGENTBASE_HOME),
then for each --repo starts that checkout's real `python3 -m importer serve SNAPSHOT --password-env VAR
--port P` on 127.0.0.1 (a random password in the environment, never printed). Each run fires --guesses
wrong-password logins in parallel and, once they are all sent, times the right user's login from another
loopback address (Linux routes all of 127.0.0.0/8 to lo, so a client socket can be bound to 127.0.0.x):

  - "one address": the wrong guesses all come from one address (a fresh one each run);
  - "many addresses": each wrong guess comes from its own address (fresh ones each run);
  - "quiet": no wrong guesses, for comparison.

Prints, per scenario and checkout, the median (min-max) of --runs runs of the right user's login time
(form POST to /-/agentbase/login, no cookies, until the 302 arrives), the answers the wrong guesses got
and how long the slowest of them took. Give two checkouts to print before and after side by side:

  mkdir /tmp/old && git archive main | tar -x -C /tmp/old     # the old code, outside the repository
  python3 bench/login_bench.py --repo /tmp/old --repo .

Options: --runs N (default 3), --guesses N (default 15). Exit status 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))
from common import wait_served  # noqa: E402  (bench/common.py)
from ports import free_port  # noqa: E402  (tests/ports.py: outside the kernel's range for connections' own ends)

VAR = "AGENTBASE_LOGIN_BENCH_PASSWORD"
RIGHT_USER = "127.0.0.100"
TIMEOUT = 120


def run(cmd: list[str], env: dict) -> None:
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[2:4])} failed: {proc.stderr[-600:]}")


def build_snapshot(work: Path) -> Path:
    env = dict(os.environ, PYTHONPATH=str(REPO), AGENTBASE_HOME=str(work / "home"),
               AGENTBASE_CONFIG=str(work / "no-config.yml"))
    run([sys.executable, "-m", "importer", "import", "--demo", "-q"], env)
    snapshot = work / "snapshot.db"
    run([sys.executable, "-m", "importer", "export", "-o", str(snapshot), "-q"], env)
    return snapshot


def login(port: int, source: str, password: str, sent: threading.Event | None = None) -> tuple[int, float]:
    """POST the login form from `source`; (status, seconds from sending to the whole answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT, source_address=(source, 0))
    try:
        conn.connect()
        body = urlencode({"password": password, "next": "/"})
        started = time.perf_counter()
        conn.request("POST", "/-/agentbase/login", body=body,
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        if sent is not None:
            sent.set()
        response = conn.getresponse()
        response.read()
        status = response.status
        if status == 302 and "ds_actor=" not in (response.getheader("set-cookie") or ""):
            status = -302  # a redirect without the login cookie: not logged in
        return status, time.perf_counter() - started
    finally:
        conn.close()


def wait_up(port: int, proc: subprocess.Popen) -> None:
    def up() -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/-/agentbase/login")
        if conn.getresponse().status != 200:
            return False
        conn.close()
        return True

    wait_served(proc, up, 0.2)


def one_run(port: int, password: str, attackers: list[str]) -> dict:
    """The wrong guesses from `attackers` (one guess each, in parallel), then the right user's login."""
    results: list[tuple[int, float]] = []
    events = [threading.Event() for _ in attackers]

    def guess(source: str, sent: threading.Event) -> None:
        try:
            results.append(login(port, source, "wrong-" + secrets.token_urlsafe(12), sent))
        except OSError as exc:
            results.append((0, float("nan")))
            sent.set()
            print(f"  a wrong guess failed: {exc}", file=sys.stderr)

    threads = [threading.Thread(target=guess, args=(a, e)) for a, e in zip(attackers, events)]
    for t in threads:
        t.start()
    for e in events:
        e.wait(TIMEOUT)
    if attackers:
        time.sleep(0.1)  # let the server read them all before the right user comes
    status, elapsed = login(port, RIGHT_USER, password)
    for t in threads:
        t.join(TIMEOUT)
    return {"right": elapsed, "right_status": status, "wrong": results}


def bench(repo: Path, snapshot: Path, work: Path, runs: int, guesses: int) -> dict:
    password = secrets.token_urlsafe(18)
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(repo), AGENTBASE_CONFIG=str(work / "no-config.yml"), **{VAR: password})
    env.pop("DATASETTE_SECRET", None)
    proc = subprocess.Popen([sys.executable, "-m", "importer", "serve", str(snapshot), "--password-env", VAR,
                             "--port", str(port)], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    out = {}
    try:
        wait_up(port, proc)
        scenarios = {
            "quiet": lambda i: [],
            "one address": lambda i: [f"127.0.1.{i + 1}"] * guesses,
            "many addresses": lambda i: [f"127.0.{10 + i}.{k + 1}" for k in range(guesses)],
        }
        for name, attackers in scenarios.items():
            rows = []
            for i in range(runs):
                rows.append(one_run(port, password, attackers(i)))
                print(f"  {repo.name or repo}: {name}, run {i + 1}: right user {rows[-1]['right']:.2f} s",
                      file=sys.stderr, flush=True)
            out[name] = rows
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return out


def summary(rows: list[dict]) -> tuple[str, str, str]:
    times = [r["right"] for r in rows]
    bad = [r["right_status"] for r in rows if r["right_status"] != 302]
    right = f"{statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f})"
    if bad:
        right += f" NOT LOGGED IN: {bad}"
    wrong = [w for r in rows for w in r["wrong"]]
    if not wrong:
        return right, "-", "-"
    counts = Counter(s for s, _ in wrong)
    answers = ", ".join(f"{n} x {s}" for s, n in sorted(counts.items()))
    slowest = f"{statistics.median(max(t for _, t in r['wrong']) for r in rows):.2f} s"
    return right, answers, slowest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", action="append", type=Path,
                    help="checkout whose `python3 -m importer serve` is measured (repeatable; default: this one)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--guesses", type=int, default=15)
    args = ap.parse_args()
    repos = [r.resolve() for r in (args.repo or [REPO])]
    with tempfile.TemporaryDirectory(prefix="agentbase-login-bench-") as tmp:
        work = Path(tmp)
        snapshot = build_snapshot(work)
        results = {repo: bench(repo, snapshot, work, args.runs, args.guesses) for repo in repos}
    print(f"\nright user's login from {RIGHT_USER} while {args.guesses} wrong guesses run in parallel; "
          f"median (min-max) of {args.runs} runs")
    header = f"{'checkout':<28} {'scenario':<15} {'right user':<26} {'slowest wrong':<14} answers to the wrong guesses"
    print(header)
    print("-" * len(header))
    for repo, scenarios in results.items():
        for name, rows in scenarios.items():
            right, answers, slowest = summary(rows)
            print(f"{str(repo)[-28:]:<28} {name:<15} {right:<26} {slowest:<14} {answers}")


if __name__ == "__main__":
    main()
