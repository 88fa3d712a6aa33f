#!/usr/bin/env python3
"""Explorer benchmark: Datasette + the AgentBase plugin on a snapshot of >= 1,000,000 messages.

Builds (once per --workdir) a generated tree (bench/trees.py generate_tree, made-up text) plus one long
session of >= 2,000 messages, imports it into the embedded SQLite store, replicates the rows with SQL
(bench/store_bench.py's replicate()) up to --messages, and exports the snapshot. Then it serves the
snapshot with a real `agentbase serve` on a free loopback port and prints the median time of
--repeat requests (after one warm-up) for:
  - each canned query, with its defaults (the latest day, every agent) and for one agent (target < 100 ms);
  - a search (target < 200 ms), and its pages 2 and 5 (past 100 rows: target < 200 ms);
  - the messages table page with its facets (target < 500 ms);
  - the conversation view of the 2,000-message session (target < 1 s);
  - the session export of that session: its .json (every message with its blocks; target < 1 s), and
    its .md and standalone .html (info);
  - the dashboard: its cube (one pass over the messages, made at start-up in a thread: the time
    until the first visit is answered), then each preset (today, 7, 30, 90 days, a year, all) and a
    server, a source and an agent filter: the first visit (summed from the cube) and the median
    (cached) (target < 1 s, well under);
  - the session browser (the home page, from the snapshot's session_list): the first page, as JSON,
    each day preset, a past range, each filter (agent, server, source, has errors, has thinking),
    searches, everything at once, and a page from the middle of the list (keyset) (target < 300 ms);
  - the Reports page: each report (per day, week, month, model, session), with filters, as JSON and CSV:
    the first visit and the median (target < 300 ms);
  - the session search (the browser's ``q``, importer/session_search.py) for each query shape: a word, words,
    a phrase, OR, -word, prefix*, Chinese, a single CJK character, an identifier, tool: and agent: (< 300 ms);
    and what building session_list cost inside the export (or, on a reused snapshot made before it
    existed, when added in place).

Usage: python3 bench/explorer_bench.py [--messages 1000000] [--size-mb 120] [--repeat 7] [--workdir DIR]
With --workdir the snapshot is kept and reused by the next run (delete the folder to rebuild), and so is
the replicated store it was exported from (archive.db): a snapshot of another format is exported again
from it (the export's time printed), without generating and importing again.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from datetime import date, timedelta
from urllib.parse import quote, urlencode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import trees  # noqa: E402  (bench/trees.py)
from common import print_figures, wait_served, work_dir  # noqa: E402  (bench/common.py)
from ports import free_port  # noqa: E402  (tests/ports.py: outside the kernel's range for connections' own ends)
from importer import demo, derived  # noqa: E402
from importer.snapshot import export_snapshot  # noqa: E402
from importer.store import open_store  # noqa: E402
from importer.search import fts_query  # noqa: E402
from store_bench import replicate  # noqa: E402

LONG_SESSION_MESSAGES = 2000


def long_session_tree(root: Path, seed: int) -> int:
    """One session of at least 2,000 messages (ordinary-size tool results), under server macmini."""
    target = 3 * 2**20
    for _ in range(8):
        rnd = random.Random(seed + 7)
        corpus = demo.Corpus(rnd)
        writer = demo.TreeWriter(root, rnd)
        profile = demo.Profile(big_p=0.0, mid_p=0.02, image_p=0.01)
        plan = demo.Plan(rnd, "main", demo.END_MS - 12 * demo.DAY_MS, target, profile)
        plan.branch_p = plan.compaction_p = 0.0
        session = demo.Session(corpus, plan)
        session.fill()
        messages = session.stats.get("messages", 0)
        if messages >= LONG_SESSION_MESSAGES:
            if root.exists():
                shutil.rmtree(root)
            writer = demo.TreeWriter(root, random.Random(seed))
            writer.write("macmini", session, "normal", index_p=0.0)
            writer.finish()
            return messages
        target = int(target * LONG_SESSION_MESSAGES / max(messages, 1) * 1.05)
    raise SystemExit("could not generate a 2,000-message session")


def run(cmd: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} failed: {proc.stderr[-600:]}")


_session_list_s: list[float] = []


def _timed_session_list(refresh):
    """refresh_session_list, timed: what the session list costs inside the export."""
    def timed(conn, session_ids=None):
        started = time.perf_counter()
        try:
            return refresh(conn, session_ids)
        finally:
            _session_list_s.append(time.perf_counter() - started)
    return timed


def _cpu_so_far() -> float:
    """This process's CPU time and its ended children's (the export's worker), in seconds."""
    import resource

    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def reusable(snapshot: Path) -> bool:
    """A snapshot a former run built, of this export's format (else it is built again)."""
    from importer.shape import FORMAT as SNAPSHOT_FORMAT

    try:
        conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM agentbase_snapshot WHERE key = 'format'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return bool(row) and row[0] == str(SNAPSHOT_FORMAT)


def build(work: Path, messages: int, size_mb: float, seed: int, keep_archive: bool = False) -> Path:
    snapshot = work / "snapshot.db"
    if snapshot.exists() and reusable(snapshot):
        print(f"reusing {snapshot}", flush=True)
        return snapshot
    archive = work / "archive.db"
    complete = work / "archive.complete"  # the replicated store, kept by a former run (--workdir)
    started = time.perf_counter()
    if archive.exists() and complete.exists():
        total = int(complete.read_text())
        print(f"reusing the store {archive} ({total:,} messages): exporting it again", flush=True)
    else:
        for leftover in (archive, complete, work / "tree", work / "long"):
            if leftover.is_dir():
                shutil.rmtree(leftover)
            elif leftover.exists():
                leftover.unlink()
        print(f"generating a {size_mb:.0f} MB tree and a {LONG_SESSION_MESSAGES:,}-message session ...", flush=True)
        trees.generate_tree(str(work / "tree"), target_bytes=int(size_mb * 2**20), seed=seed)
        long_count = long_session_tree(work / "long", seed)
        print(f"  long session: {long_count:,} messages; importing ...", flush=True)
        run([sys.executable, "-m", "importer", "import", str(work / "tree"), "--db", f"sqlite:///{archive}", "-q"])
        run([sys.executable, "-m", "importer", "import", str(work / "long"), "--db", f"sqlite:///{archive}", "-q"])
        print(f"  replicating to {messages:,} messages ...", flush=True)
        total = replicate(archive, messages)
        if keep_archive:
            complete.write_text(str(total))
    print(f"  exporting {total:,} messages ...", flush=True)
    store = open_store(f"sqlite:///{archive}")
    cpu_before = _cpu_so_far()
    refresh = derived.refresh_session_list
    derived.refresh_session_list = _timed_session_list(refresh)
    try:
        # (the file appears under its name only once built: a killed run leaves no half snapshot)
        report = export_snapshot(store, snapshot, timezone="Asia/Shanghai", full=True)
    finally:
        derived.refresh_session_list = refresh
        store.close()
    if not keep_archive:
        archive.unlink()
    shutil.rmtree(work / "tree", ignore_errors=True)
    print(f"  {report.summary()}; built in {time.perf_counter() - started:.0f} s", flush=True)
    print(f"  export: {report.elapsed_s:.1f} s for {total:,} messages (CPU {_cpu_so_far() - cpu_before:.1f} s, "
          "its worker's too)", flush=True)
    return snapshot


def session_list_checks(conn: sqlite3.Connection, agent: str, server: str) -> list[tuple[str, str]]:
    """The session browser's pages to time: every filter, searches, all at once, a page mid-list."""
    total, latest = conn.execute(f"SELECT COUNT(*), MAX(last_day) FROM {derived.TABLE}").fetchone()
    at, row_id = conn.execute(f"SELECT last_message_at, id FROM {derived.TABLE} "
                              "ORDER BY last_message_at DESC, id DESC LIMIT 1 OFFSET ?", (total // 2,)).fetchone()
    month_ago = (date.fromisoformat(latest) - timedelta(days=60)).isoformat()
    month_end = (date.fromisoformat(latest) - timedelta(days=31)).isoformat()
    hits = {}
    for q in ("部署", "redis", '"latency graphs"'):
        hits[q] = conn.execute(f"SELECT COUNT(*) FROM {derived.FTS} WHERE {derived.FTS} MATCH ?",
                               (fts_query(q),)).fetchone()[0]
    checks = [(f"sessions: the home page ({total:,} sessions)", "/"),
              ("sessions JSON, first page", "/-/agentbase/sessions.json"),
              ("sessions JSON, 500 rows", "/-/agentbase/sessions.json?limit=500")]
    checks += [(f"sessions days={d}", f"/?days={d}") for d in ("1", "7", "30")]
    checks += [(f"sessions from={month_ago} to={month_end}", f"/?from={month_ago}&to={month_end}"),
               (f"sessions agent={agent}", f"/?agent={quote(agent)}"),
               (f"sessions server={server}", f"/?server={quote(server)}"),
               ("sessions source=openclaw", "/?source=openclaw"),
               ("sessions has errors", "/?errors=1"),
               ("sessions has thinking", "/?thinking=1")]
    checks += [(f"sessions q={q} ({n:,} sessions)", f"/?q={quote(q)}") for q, n in hits.items()]
    # the session search (importer/session_search.py): every query shape of bench/search_questions.json
    for shape, q in (("a word", "timeout"), ("two words", "nginx timeout"), ("three words", "redis latency deploy"),
                     ("a phrase", '"permission denied"'), ("OR", "nginx OR apache"), ("-word", "nginx -timeout"),
                     ("prefix*", "ngin*"), ("Chinese words", "部署 证书"), ("a single CJK character", "署"),
                     ("an identifier", "/var/log/nginx/error.log"), ("a file name", "error.log"), ("tool: filter", "timeout tool:exec"),
                     ("agent: filter", f"timeout agent:{agent}")):
        checks.append((f"session search, {shape}: q={q}", f"/-/agentbase/sessions.json?q={quote(q)}"))
    checks += [("sessions all filters: agent, server, source, 30 days, errors, thinking, q=部署",
                f"/?agent={quote(agent)}&server={quote(server)}&source=openclaw&days=30&errors=1&thinking=1"
                f"&q={quote('部署')}"),
               ("sessions agent, 30 days, errors, thinking", f"/?agent={quote(agent)}&days=30&errors=1&thinking=1"),
               ("sessions a page from the middle (keyset)", "/?" + urlencode({"after": f"{at}|{row_id}"})),
               (f"sessions a page from the middle, agent={agent}, errors",
                "/?" + urlencode({"after": f"{at}|{row_id}", "agent": agent, "errors": "1"}))]
    return checks


class Client:
    def __init__(self, port: int, pid: int | None = None):
        self.port = port
        self.pid = pid
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def get(self, path: str) -> tuple[int, bytes, float]:
        for attempt in (1, 2):
            started = time.perf_counter()
            try:
                self.conn.request("GET", path)
                response = self.conn.getresponse()
                body = response.read()
                return response.status, body, time.perf_counter() - started
            except (http.client.RemoteDisconnected, ConnectionError):  # an idle keep-alive closed
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def wait_up(client: Client, proc: subprocess.Popen) -> None:
    def up() -> bool:
        try:
            return client.get("/-/versions.json")[0] == 200
        except OSError:
            client.conn.close()
            client.conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=120)
            raise

    wait_served(proc, up, 0.3)


def server_cpu(pid: int | None) -> float:
    """The serving process's CPU time so far (user + system, every thread), in seconds; 0 off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return 0.0


def measure(client: Client, path: str, repeat: int) -> tuple[float, int, int, float]:
    """The median time of ``repeat`` requests after one warm-up, the last status and size, and the
    server's CPU time a request (their mean: what a request costs on a shared machine, where the
    wall time also holds the waits for the other processes' turns)."""
    status, body, _ = client.get(path)  # warm-up
    times = []
    cpu = server_cpu(client.pid)
    for _ in range(repeat):
        status, body, elapsed = client.get(path)
        times.append(elapsed)
    cpu = (server_cpu(client.pid) - cpu) / repeat
    return statistics.median(times) * 1000, status, len(body), cpu * 1000


def options(description: str, repeat: int, prefix: str) -> tuple[argparse.Namespace, Path]:
    """The options of a bench over the replicated snapshot (this one's and mcp_bench's), and its work folder."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size-mb", type=float, default=120)
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir")
    args = ap.parse_args()
    return args, work_dir(args.workdir, prefix)


def main() -> None:
    args, work = options(__doc__.splitlines()[0], 7, "agentbase-explorer-bench-")
    try:
        snapshot = build(work, args.messages, args.size_mb, args.seed, keep_archive=bool(args.workdir))
        conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
        total = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        long_id, long_count = conn.execute(
            "SELECT id, message_count FROM sessions ORDER BY message_count DESC LIMIT 1").fetchone()
        agent = conn.execute("SELECT agent_id FROM messages WHERE day = (SELECT MAX(day) FROM messages) "
                             "GROUP BY agent_id ORDER BY COUNT(*) DESC LIMIT 1").fetchone()[0]
        conn_server = conn.execute("SELECT server FROM sessions GROUP BY server ORDER BY COUNT(*) DESC "
                                   "LIMIT 1").fetchone()[0]

        # a selective phrase, a word in ~6% of the messages, and the generator's commonest words (~15%)
        searches = ['"permission denied"', "timeout", "证书", "nginx", "部署"]
        hits = {q: conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?",
                                (fts_query(q),)).fetchone()[0] for q in searches}
        from datasette_agentbase import dashboard

        started = time.perf_counter()
        dashboard.load(conn)
        cube_s = time.perf_counter() - started
        session_checks = session_list_checks(conn, agent, conn_server)
        conn.close()
        port = free_port()
        env = dict(os.environ, PYTHONPATH=str(REPO))
        proc = subprocess.Popen([sys.executable, "-m", "importer", "serve", str(snapshot), "-p", str(port)],
                                cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        rows = []
        try:
            client = Client(port, proc.pid)
            wait_up(client, proc)
            started = time.perf_counter()
            # answered once the start-up thread has made the dashboard's cube
            status, _, _ = client.get("/-/agentbase?days=2")
            cube_ready = time.perf_counter() - started
            time.sleep(1)
            db = snapshot.stem
            checks = []
            for name in ("exec_commands", "thinking", "agent_day", "daily_cost", "monthly_cost", "failed_tools"):
                checks.append((f"{name} (defaults)", f"/{db}/{name}", 100))
                checks.append((f"{name} (agent={agent})", f"/{db}/{name}?agent={agent}", 100))
                checks.append((f"{name} JSON (agent={agent})", f"/{db}/{name}.json?_shape=array&agent={agent}", 100))
            for q in searches:
                checks.append((f"search q={q} ({hits[q]:,} matches)", f"/{db}/search?q={quote(q)}", 200))
            q = searches[-1]
            checks.append((f"search q={q}, agent={agent}", f"/{db}/search?q={quote(q)}&agent={agent}", 200))
            checks.append((f"search JSON q={q}", f"/{db}/search.json?_shape=array&q={quote(q)}", 200))
            for page in ("2", "5"):  # paging past 100: page n ranks the best 100 * n
                checks.append((f"search JSON q={q}, page {page}", f"/{db}/search.json?_shape=array&q={quote(q)}"
                               f"&page={page}", 200))
            checks.append((f"search JSON q={q}, agent={agent}, page 2",
                           f"/{db}/search.json?_shape=array&q={quote(q)}&agent={agent}&page=2", 200))
            checks.append(("messages table page with facets", f"/{db}/messages", 500))
            checks.append((f"conversation view ({long_count:,} messages)", f"/-/agentbase/session/{long_id}", 1000))
            checks.append((f"session export .json ({long_count:,} messages)", f"/-/agentbase/session/{long_id}.json",
                           1000))
            checks.append((f"session export .md ({long_count:,} messages)", f"/-/agentbase/session/{long_id}.md", None))
            checks.append((f"session export .html ({long_count:,} messages)", f"/-/agentbase/session/{long_id}.html",
                           None))
            for label, path, target in checks:
                ms, status, size, cpu = measure(client, path, args.repeat)
                if target is None:
                    rows.append((label, f"{ms:.1f} ms (cpu {cpu:.0f}, {size / 1024:.0f} KB, HTTP {status})", "info", ""))
                    continue
                verdict = "PASS" if status == 200 and ms < target else "FAIL"
                rows.append((label, f"{ms:.1f} ms (cpu {cpu:.0f}, {size / 1024:.0f} KB, HTTP {status})",
                             f"< {target} ms", verdict))
            rows.append(("dashboard cube: one pass over the messages (in this process)", f"{cube_s * 1000:.0f} ms",
                         "info", ""))
            rows.append(("dashboard, a visit as soon as the server answers (waits for the cube)",
                         f"{cube_ready * 1000:.0f} ms", "info", ""))
            server = conn_server
            for label, query in [(f"days={d}", f"days={d}") for d in ("1", "7", "30", "90", "365", "all")] + [
                    (f"days=all, server={server}", f"days=all&server={quote(server)}"),
                    ("days=30, source=openclaw", "days=30&source=openclaw"),
                    (f"days=all, agent={agent}", f"days=all&agent={quote(agent)}")]:
                status, body, first = client.get(f"/-/agentbase?{query}")
                ms, status, size, cpu = measure(client, f"/-/agentbase?{query}", args.repeat)
                verdict = "PASS" if status == 200 and first < 1.0 else "FAIL"
                rows.append((f"dashboard {label}", f"first {first * 1000:.0f} ms, then {ms:.1f} ms "
                             f"(cpu {cpu:.0f}, {size / 1024:.0f} KB, HTTP {status})", "< 1000 ms", verdict))
            # the Reports page: summed from the same cube (a per-day copy of it made at the first report)
            # and from session_list; the first visit of each, then the median
            for label, query in [(f"by={by}", f"by={by}") for by in ("day", "week", "month", "model", "session")] + [
                    (f"by=day, agent={agent}", f"by=day&agent={quote(agent)}"),
                    (f"by=month, server={server}", f"by=month&server={quote(server)}"),
                    ("by=week, days=30", "by=week&days=30"),
                    (f"by=session, agent={agent}", f"by=session&agent={quote(agent)}"),
                    ("by=day JSON", "by=day&_=json"), ("by=model CSV", "by=model&_=csv")]:
                path = "/-/agentbase/reports"
                if query.endswith("&_=json") or query.endswith("&_=csv"):
                    path += "." + query.rsplit("=", 1)[1]
                    query = query.rsplit("&", 1)[0]
                status, body, first = client.get(f"{path}?{query}")
                ms, status, size, cpu = measure(client, f"{path}?{query}", args.repeat)
                verdict = "PASS" if status == 200 and ms < 300 and first < 1.0 else "FAIL"
                rows.append((f"reports {label}", f"first {first * 1000:.0f} ms, then {ms:.1f} ms "
                             f"(cpu {cpu:.0f}, {size / 1024:.0f} KB, HTTP {status})", "< 300 ms", verdict))
            for label, path in session_checks:
                ms, status, size, cpu = measure(client, path, args.repeat)
                verdict = "PASS" if status == 200 and ms < 300 else "FAIL"
                rows.append((label, f"{ms:.1f} ms (cpu {cpu:.0f}, {size / 1024:.0f} KB, HTTP {status})", "< 300 ms",
                             verdict))
            for seconds in _session_list_s:
                rows.append(("session_list: its whole build inside the export (rows, indexes, FTS)",
                             f"{seconds * 1000:.0f} ms", "info", ""))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"snapshot: {total:,} messages; median of {args.repeat} requests after one warm-up, over HTTP "
          "(cpu: the server's CPU ms a request, their mean)")
    print_figures(rows, 36, 9)


if __name__ == "__main__":
    main()
