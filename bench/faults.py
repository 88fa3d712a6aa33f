#!/usr/bin/env python3
"""Fault injection: the importer and the exporter under the faults a real machine has.

Prints one row per fault: trials, failures, and rows lost (must be 0):

  kill -9 (SQLite)        the importer killed at a random moment (>= 20 trials), then run again: the store
                          must equal a clean import of the same tree (every content table, without ids and
                          run times, plus sessions.json metadata); a row missing is lost, one too many doubled
  kill -9 (MariaDB)       the same against MariaDB (when it answers at --mysql)
  full disk on export     the snapshot's folder on a small tmpfs (as root) or a file-size limit on the
                          exporter: exit 1, one `Error:` line, the old snapshot unchanged and readable, no
                          temporary file left
  MariaDB down at start   import, sync-free commands against a closed port: exit 1, one clear line
  50 MB single line       imports into SQLite (and exports); into MariaDB it imports, or fails that file
                          with a message naming max_allowed_packet while the other files import
  random bytes            a .jsonl file of random bytes (and one with garbage after valid lines)
  symlink loop            self and mutual symlink loops, and a folder loop, in the sessions folder
  deleted after listing   a transcript removed between the listing and its reading: one `error:` line,
                          exit 1, every other file imported
  invalid UTF-8           a transcript with invalid bytes and lone surrogate escapes in some lines:
                          every line imported (U+FFFD in place of what cannot be decoded)

Usage: python3 bench/faults.py [--kill-trials 20] [--size-mb 24] [--mysql URL] [--seed 0]
Takes about 2-4 minutes. MariaDB: mysql://root@127.0.0.1:3306 by default (databases agentbase_faults_<pid>_*
are created and dropped); rows for it are skipped when it does not answer.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from common import store_options, work_dir  # noqa: E402  (bench/common.py)
from trees import generate_tree  # noqa: E402  (bench/trees.py)
from ports import free_port  # noqa: E402  (tests/ports.py)
from transcripts import CONTENT_TABLES, Chain, header, line  # noqa: E402

# sessions.json metadata too: a run killed before it is applied must apply it next time
EXTRA_TABLES = {
    "session_index": "server, agent_id, session_key, session_uuid, label, display_name, channel, chat_type, "
                     "spawned_by, updated_at",
    "sessions#meta": "server, agent_id, session_uuid, session_key, label, display_name, channel, chat_type, "
                     "spawned_by",
}
ENV = dict(os.environ, PYTHONPATH=str(REPO), AGENTBASE_CONFIG="/nonexistent/agentbase-config.yml")
ENV.pop("AGENTBASE_DB", None)


def agentbase(*args, timeout=600, preexec=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "importer", *map(str, args)], cwd=REPO, env=env or ENV,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)


def spawn(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "importer", *map(str, args)], cwd=REPO, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def dump_url(url: str) -> dict[str, list[tuple]]:
    from importer.store import open_store

    store = open_store(url)
    try:
        out = {}
        for table, cols in {**CONTENT_TABLES, **EXTRA_TABLES}.items():
            out[table] = sorted((tuple(r) for r in store.query(f"SELECT {cols} FROM {table.split('#')[0]}")),
                                key=repr)
        return out
    finally:
        store.close()


def compare(reference: dict, got: dict) -> tuple[int, int]:
    """(rows missing, rows extra) of ``got`` against ``reference``, over all tables."""
    lost = extra = 0
    for table, rows in reference.items():
        want, have = Counter(rows), Counter(got.get(table, []))
        lost += sum((want - have).values())
        extra += sum((have - want).values())
    return lost, extra


def one_error_line(proc: subprocess.CompletedProcess, needle: str = "") -> bool:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return (proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("Error:")
            and "Traceback" not in proc.stderr and needle in lines[0])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def mysql_admin(url: str):
    import pymysql
    from urllib.parse import urlsplit

    p = urlsplit(url)
    try:
        return pymysql.connect(host=p.hostname or "127.0.0.1", port=p.port or 3306, user=p.username or "root",
                               password=p.password or os.environ.get("AGENTBASE_DB_PASSWORD", ""),
                               autocommit=True, connect_timeout=3)
    except pymysql.MySQLError:
        return None


class Bench:
    def __init__(self, args, work: Path):
        self.args = args
        self.work = work
        self.rng = random.Random(args.seed)
        self.rows: list[tuple[str, int, int, int, str]] = []
        self.admin = mysql_admin(args.mysql)
        self.databases: list[str] = []
        self.errors_seen: list[str] = []

    def row(self, fault: str, trials: int, failures: int, lost: int, note: str = "") -> None:
        self.rows.append((fault, trials, failures, lost, note))
        print(f"  {fault}: {trials} trials, {failures} failures, {lost} rows lost {note}", flush=True)

    def mysql_db(self, tag: str) -> str | None:
        if self.admin is None:
            return None
        name = f"agentbase_faults_{os.getpid()}_{tag}"
        with self.admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        self.databases.append(name)
        return f"{self.args.mysql.rstrip('/')}/{name}"

    def drop_databases(self) -> None:
        if self.admin is None:
            return
        with self.admin.cursor() as cur:
            for name in self.databases:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        self.admin.close()

    # -- kill -9 -------------------------------------------------------------

    def kill_trials(self, tree: Path, trials: int, url_for, label: str) -> None:
        clean_url = url_for("clean")
        started = time.perf_counter()
        proc = agentbase("import", tree, "--db", clean_url, "-q")
        span = time.perf_counter() - started
        print(f"  clean import into {label.split('(')[1][:-1]}: {span:.1f} s; kills fall in 0.15 s .. that", flush=True)
        if proc.returncode != 0:
            self.row(label, 0, 1, 0, f"clean import failed: {proc.stderr.strip()[-200:]}")
            return
        reference = dump_url(clean_url)
        failures = lost_total = early = 0
        notes = []
        for trial in range(trials):
            url = url_for(f"t{trial}")
            # half the trials start from an empty store; the others kill a second run that only
            # has new lines to add (the cron case)
            if trial % 2:
                grown = self.work / f"grow-{label[:6]}-{trial}"
                shutil.rmtree(grown, ignore_errors=True)
                shutil.copytree(tree, grown, symlinks=True)
                files = sorted(p for p in grown.rglob("*.jsonl") if p.is_file())
                cut = self.rng.sample(files, max(1, len(files) // 3))
                tails = {p: p.read_bytes() for p in cut}
                for p, data in tails.items():  # drop the second half of a third of the files ...
                    keep = data.rfind(b"\n", 0, len(data) // 2) + 1
                    p.write_bytes(data[:keep])
                first = agentbase("import", grown, "--db", url, "-q")
                for p, data in tails.items():  # ... and put it back: the killed run appends it
                    p.write_bytes(data)
                    os.utime(p, None)
                target = grown
                if first.returncode != 0:
                    failures += 1
                    notes.append(f"trial {trial}: first import failed")
                    continue
            else:
                target = tree
            child = spawn("import", target, "--db", url, "-q")
            # an append run is shorter: it reads a sixth of the bytes
            time.sleep(self.rng.uniform(0.15, max(0.2, span * (0.3 if trial % 2 else 0.95))))
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
            else:
                early += 1
            child.wait()
            if target is not tree:
                # the comparison is with the clean import of `tree`: paths differ, so compare
                # after the rerun on a store whose file paths were rewritten below
                pass
            again = agentbase("import", target, "--db", url, "-q")
            got = dump_url(url)
            if target is not tree:
                got = _rebase(got, str(target), str(tree))
            lost, extra = compare(reference, got)
            bad = again.returncode != 0 or lost or extra
            if url.startswith("sqlite"):
                conn = sqlite3.connect(url.split("///", 1)[1])
                ok = conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                conn.close()
                bad = bad or not ok
            if bad:
                failures += 1
                notes.append(f"trial {trial}: rerun rc {again.returncode}, {lost} lost, {extra} doubled")
            lost_total += lost
        note = f"({early} finished before the kill)" if early else ""
        if notes:
            note += " " + "; ".join(notes[:3])
        self.row(label, trials, failures, lost_total, note)

    # -- full disk -------------------------------------------------------------

    def full_disk(self, small_store: str, big_store: str, tree: Path) -> None:
        trials = failures = 0
        notes = []
        mount = self.work / "tmpfs"
        mount.mkdir(exist_ok=True)
        probe = self.work / "probe.db"
        agentbase("export", "--db", small_store, "-o", probe, "-q")
        old_size = probe.stat().st_size + state_size(probe)
        agentbase("export", "--db", big_store, "-o", self.work / "probe-big.db", "-q")
        new_size = (self.work / "probe-big.db").stat().st_size
        mounted = os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={old_size + 64 * 1024}", "tmpfs", str(mount)],
            capture_output=True).returncode == 0
        try:
            if mounted:
                # room for the old snapshot, then the new one runs out at different points
                for room in (0.1, 0.4, 0.8):
                    extra = int(old_size + room * new_size)
                    subprocess.run(["mount", "-o", f"remount,size={extra}", str(mount)], check=True)
                    trials += 1
                    fail = self._export_into_full(mount / "snapshot.db", small_store, big_store, None)
                    if fail:
                        failures += 1
                        notes.append(f"tmpfs +{room:.0%}: {fail}")
                    # the same store grown after its export: the second export is an update in place
                    trials += 1
                    grow = self.work / f"grow-{room}.db"
                    shutil.copy(small_store.split("sqlite:///", 1)[1], grow)
                    url = f"sqlite:///{grow}"
                    fail = self._export_into_full(mount / "snapshot.db", url, url, None,
                                                  grow=lambda url=url: agentbase("import", tree, "--db", url, "-q"))
                    if fail:
                        failures += 1
                        notes.append(f"tmpfs +{room:.0%}, update: {fail}")
            # a file-size limit on the exporter (and its worker): writes fail with EFBIG
            for room in (0.2, 0.6):
                limit = int(new_size * room)
                folder = self.work / f"fsize-{room}"
                folder.mkdir(exist_ok=True)

                def limited(limit=limit):
                    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

                trials += 1
                fail = self._export_into_full(folder / "snapshot.db", small_store, big_store, limited)
                if fail:
                    failures += 1
                    notes.append(f"RLIMIT_FSIZE {room:.0%}: {fail}")
        finally:
            if mounted:
                subprocess.run(["umount", str(mount)], capture_output=True)
        how = "tmpfs and RLIMIT_FSIZE" if mounted else "RLIMIT_FSIZE (no tmpfs: not root)"
        self.row("full disk on export", trials, failures, 0,
                 f"({how}) " + ("; ".join(notes[:3]) or " / ".join(sorted(set(self.errors_seen)))))

    def _export_into_full(self, target: Path, small_store: str, big_store: str, preexec, grow=None) -> str:
        """Export ``small_store`` to ``target``, then ``big_store`` (``grow``: after growing the store,
        so that the second export is an update in place) where it cannot all be written: one error
        line, and the snapshot, its state file and an open reader as they were."""
        first = agentbase("export", "--db", small_store, "-o", target, "-q")
        if first.returncode != 0:
            return f"the old snapshot could not be written: {first.stderr.strip()[-150:]}"
        if grow is not None and grow().returncode not in (0, 1):
            return "the store could not grow"
        before = sha256(target)
        state = target.with_name(target.stem + "-state.db")
        state_before = sha256(state)
        conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True)  # a reader, as Datasette would be
        count = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        proc = agentbase("export", "--db", big_store, "-o", target, "-q", preexec=preexec)
        if proc.stderr.strip():
            self.errors_seen.append(proc.stderr.strip().splitlines()[-1].replace(str(target.parent), "..."))
        problems = []
        if not one_error_line(proc):
            problems.append(f"rc {proc.returncode}, stderr {proc.stderr.strip()[-160:]!r}")
        if conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] != count:
            problems.append("the open reader saw a change")
        conn.close()
        if proc.returncode == 0:
            problems.append("the export did not fail (room enough?)")
        if sha256(target) != before or sha256(state) != state_before:
            problems.append("the old snapshot or its state changed")
        check = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
        if check.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("the old snapshot is damaged")
        check.close()
        current = os.readlink(target) if target.is_symlink() else None
        left = [p.name for p in target.parent.iterdir() if ".tmp-" in p.name or (
            p.name.startswith(f".{target.name}.") and current and not p.name.startswith(current))]
        if left:
            problems.append(f"left behind: {left}")
        for p in target.parent.iterdir():
            p.unlink()
        return "; ".join(problems)

    # -- MariaDB down ------------------------------------------------------------

    def mariadb_down(self, tree: Path) -> None:
        port = free_port()  # nothing listens there
        url = f"mysql://agentbase:Sup3rS3cretPw@127.0.0.1:{port}/agentbase"
        runs = [("import", tree, "--db", url), ("export", "--db", url, "-o", self.work / "down.db"),
                ("stats", "--db", url), ("secrets", "--db", url), ("init", "--db", url)]
        failures = 0
        notes = []
        seen = ""
        for args in runs:
            proc = agentbase(*args, timeout=60)
            seen = seen or proc.stderr.strip()
            if not one_error_line(proc, "cannot connect to MariaDB") or "Sup3rS3cretPw" in proc.stderr + proc.stdout:
                failures += 1
                notes.append(f"{args[0]}: {proc.stderr.strip()[-120:]!r}")
        if (self.work / "down.db").exists():
            failures += 1
            notes.append("export wrote a snapshot")
        self.row("MariaDB down at start", len(runs), failures, 0, "; ".join(notes[:2]) or repr(seen))

    # -- one huge line -----------------------------------------------------------

    def huge_line(self) -> None:
        root = self.work / "huge" / "agents" / "main" / "sessions"
        root.mkdir(parents=True)
        sid = "b16b16b1-0000-4000-8000-000000000050"
        c = Chain()
        text = "".join(self.rng.choice("abcdefghij klmnop") for _ in range(1000))
        big = c.user(text * (50 * 1024))  # 50 MB on one line
        small = c.assistant([{"type": "text", "text": "done"}])
        (root / f"{sid}.jsonl").write_bytes(line(header(sid)) + line(big) + line(small))
        other = "0ce0ce0c-0000-4000-8000-000000000051"
        c2 = Chain()
        (root / f"{other}.jsonl").write_bytes(line(header(other)) + line(c2.user("small file")))
        size = len(line(big))
        trials = failures = 0
        lost = 0
        notes = []
        db = self.work / "huge.db"
        proc = agentbase("import", self.work / "huge", "--db", f"sqlite:///{db}", "-q")
        trials += 1
        conn = sqlite3.connect(db)
        got = dict(conn.execute("SELECT session_uuid, COUNT(*) FROM messages GROUP BY session_uuid"))
        length = conn.execute("SELECT MAX(LENGTH(content_blocks)) FROM messages").fetchone()[0] or 0
        conn.close()
        lost += max(0, 2 - got.get(sid, 0)) + max(0, 1 - got.get(other, 0))
        if proc.returncode != 0 or length < len(text) * 50 * 1024:
            failures += 1
            notes.append(f"SQLite: rc {proc.returncode} {proc.stderr.strip()[-120:]!r}")
        trials += 1
        snap = self.work / "huge-snap.db"
        proc = agentbase("export", "--db", f"sqlite:///{db}", "-o", snap, "-q")
        if proc.returncode != 0:
            failures += 1
            notes.append(f"export: {proc.stderr.strip()[-120:]!r}")
        url = self.mysql_db("huge")
        if url:
            trials += 1
            proc = agentbase("import", self.work / "huge", "--db", url, "-q")
            got = dict(tuple(r) for r in _query(url, "SELECT session_uuid, COUNT(*) FROM messages GROUP BY session_uuid"))
            packet = _query(url, "SELECT @@max_allowed_packet")[0][0]
            lost += max(0, 1 - got.get(other, 0))
            if proc.returncode == 0:
                lost += max(0, 2 - got.get(sid, 0))
                notes.append(f"MariaDB imported it (max_allowed_packet {packet // 2**20} MB)")
            elif not ("max_allowed_packet" in proc.stderr and "Traceback" not in proc.stderr
                      and len([ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]) == 1):
                failures += 1
                notes.append(f"MariaDB: {proc.stderr.strip()[-160:]!r}")
            else:
                notes.append(f"MariaDB: the file failed clearly (max_allowed_packet {packet // 2**20} MB "
                             f"< a {size / 2**20:.0f} MB line)")
        self.row("50 MB single line", trials, failures, lost, "; ".join(notes))

    # -- small bad files -----------------------------------------------------------

    def _tree_with(self, name: str) -> tuple[Path, Path, dict]:
        """A tree with two ordinary sessions; returns (root, its sessions folder, the rows a clean
        import of just those two gives)."""
        root = self.work / name
        sessions = root / "agents" / "main" / "sessions"
        sessions.mkdir(parents=True)
        for k in range(2):
            sid = f"9009{k:04d}-0000-4000-8000-0000000000{k:02d}"
            c = Chain()
            objs = [header(sid)] + [c.user(f"line {i} of {sid}") for i in range(20)]
            (sessions / f"{sid}.jsonl").write_bytes(b"".join(line(o) for o in objs))
        db = self.work / f"{name}-clean.db"
        agentbase("import", root, "--db", f"sqlite:///{db}", "-q")
        ref = dump_url(f"sqlite:///{db}")
        return root, sessions, ref

    def _ok_import(self, root: Path, ref: dict, tag: str, want_rc=(0,), wrap: str | None = None):
        db = self.work / f"{tag}.db"
        if wrap:
            proc = subprocess.run([sys.executable, "-c", wrap, str(root), f"sqlite:///{db}"], cwd=REPO, env=ENV,
                                  capture_output=True, text=True, timeout=120)
        else:
            proc = agentbase("import", root, "--db", f"sqlite:///{db}", timeout=120)
        got = dump_url(f"sqlite:///{db}")
        # only the ordinary sessions' rows are expected to match
        keep = {t: [r for r in rows if not _is_fault_row(r)] for t, rows in got.items()}
        lost, _extra = compare({t: [r for r in rows if t != "parsed_files"] for t, rows in ref.items()}, keep)
        problems = []
        if proc.returncode not in want_rc:
            problems.append(f"rc {proc.returncode}")
        if "Traceback" in proc.stderr:
            problems.append("traceback: " + proc.stderr.strip().splitlines()[-1][:120])
        return proc, lost, problems

    def random_bytes(self) -> None:
        root, sessions, ref = self._tree_with("random")
        noise = random.Random(self.args.seed + 1)
        (sessions / "fa17fa17-0000-4000-8000-000000000001.jsonl").write_bytes(noise.randbytes(2 * 2**20))
        c = Chain()
        sid = "fa17fa17-0000-4000-8000-000000000002"
        valid = line(header(sid)) + b"".join(line(c.user(f"kept {i}")) for i in range(5))
        (sessions / f"{sid}.jsonl").write_bytes(valid + noise.randbytes(64 * 1024) + b"\n")
        proc, lost, problems = self._ok_import(root, ref, "random")
        db = self.work / "random.db"
        kept = sqlite3.connect(db).execute("SELECT COUNT(*) FROM messages WHERE session_uuid = ?", (sid,)).fetchone()[0]
        lost += 5 - kept
        self.row("random bytes", 2, int(bool(problems or kept != 5)), lost, "; ".join(problems))

    def symlink_loop(self) -> None:
        root, sessions, ref = self._tree_with("loops")
        os.symlink("self.jsonl", sessions / "self.jsonl")
        os.symlink("b.jsonl", sessions / "a.jsonl")
        os.symlink("a.jsonl", sessions / "b.jsonl")
        os.symlink(".", sessions / "again")
        os.symlink("..", root / "agents" / "main" / "up")
        os.symlink("../agents", root / "agents" / "loop")
        started = time.perf_counter()
        proc, lost, problems = self._ok_import(root, ref, "loops", want_rc=(0, 1))
        if time.perf_counter() - started > 60:
            problems.append("took over a minute")
        errors = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(("error:", "warning:"))
                  and not ln.startswith("files:")]
        if errors:
            problems.append(f"unexpected output {errors[:2]}")
        self.row("symlink loop", 1, int(bool(problems)), lost,
                 "; ".join(problems) or f"exit {proc.returncode}, {proc.stderr.count('error:')} error lines")

    def deleted_after_listing(self) -> None:
        root, sessions, ref = self._tree_with("vanish")
        victim = sessions / "dead0000-0000-4000-8000-000000000009.jsonl"
        c = Chain()
        victim.write_bytes(line(header(victim.stem)) + line(c.user("gone before it is read")))
        wrap = (
            "import os, sys\n"
            "from importer import pipeline\n"
            "real = pipeline.discover\n"
            "def listing(*a, **k):\n"
            "    found = real(*a, **k)\n"
            "    for f in found.units:\n"
            "        if 'dead0000' in f.path: os.unlink(f.path)\n"
            "    return found\n"
            "pipeline.discover = listing\n"
            "from importer.cli import cli\n"
            "sys.exit(cli(['import', sys.argv[1], '--db', sys.argv[2]], prog_name='agentbase'))\n"
        )
        proc, lost, problems = self._ok_import(root, ref, "vanish", want_rc=(1,), wrap=wrap)
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        if len(errors) != 1 or "dead0000" not in errors[0]:
            problems.append(f"error lines: {errors[:2]}")
        self.row("deleted after listing", 1, int(bool(problems)), lost, "; ".join(problems))

    def invalid_utf8(self) -> None:
        root, sessions, ref = self._tree_with("utf8")
        sid = "bad0bad0-0000-4000-8000-0000000000f8"
        c = Chain()
        lines = [line(header(sid))]
        for i in range(10):
            raw = line(c.user(f"message {i} PLACEHOLDER end"))
            if i % 3 == 0:
                raw = raw.replace(b"PLACEHOLDER", b"caf\xe9 \xff\xfe \xc3")  # Latin-1 and stray bytes
            elif i % 3 == 1:
                raw = raw.replace(b"PLACEHOLDER", b"\\ud800 lone \\udfff surrogates")
            lines.append(raw)
        (sessions / f"{sid}.jsonl").write_bytes(b"".join(lines))
        proc, lost, problems = self._ok_import(root, ref, "utf8")
        db = self.work / "utf8.db"
        conn = sqlite3.connect(db)
        kept = conn.execute("SELECT COUNT(*) FROM messages WHERE session_uuid = ?", (sid,)).fetchone()[0]
        conn.close()
        lost += 10 - kept
        trials = 1
        url = self.mysql_db("utf8")
        if url:
            trials += 1
            m = agentbase("import", root, "--db", url)
            n = _query(url, "SELECT COUNT(*) FROM messages WHERE session_uuid = %s", (sid,))[0][0]
            lost += 10 - n
            if m.returncode != 0 or "Traceback" in m.stderr:
                problems.append(f"MariaDB: rc {m.returncode} {m.stderr.strip()[-120:]!r}")
        snap = agentbase("export", "--db", f"sqlite:///{db}", "-o", self.work / "utf8-snap.db", "-q")
        if snap.returncode != 0:
            problems.append(f"export: {snap.stderr.strip()[-120:]!r}")
        self.row("invalid UTF-8", trials, int(bool(problems or kept != 10)), lost, "; ".join(problems))


    # -- what a hostile tree holds (issue: trust, part 3) -------------------------

    def replaced_after_listing(self, how: str) -> None:
        """A transcript replaced by a FIFO (which would block a reader forever) or by a link
        to /dev/zero (which would be read until memory runs out) between listing and reading."""
        root, sessions, ref = self._tree_with(f"swap-{how}")
        victim = sessions / "5a5a5a5a-0000-4000-8000-000000000001.jsonl"
        c = Chain()
        victim.write_bytes(line(header(victim.stem)) + line(c.user("replaced before it is read")))
        replace = "os.mkfifo(u.path)" if how == "fifo" else "os.symlink('/dev/zero', u.path)"
        wrap = (
            "import os, resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))\n"
            "from importer import pipeline\n"
            "real = pipeline.discover\n"
            "def listing(*a, **k):\n"
            "    found = real(*a, **k)\n"
            "    for u in found.units:\n"
            "        if '5a5a5a5a' in u.path:\n"
            "            os.unlink(u.path)\n"
            f"            {replace}\n"
            "    return found\n"
            "pipeline.discover = listing\n"
            "from importer.cli import cli\n"
            "sys.exit(cli(['import', sys.argv[1], '--db', sys.argv[2]], prog_name='agentbase'))\n"
        )
        started = time.perf_counter()
        try:
            proc, lost, problems = self._ok_import(root, ref, f"swap-{how}", want_rc=(1,), wrap=wrap)
        except subprocess.TimeoutExpired:
            self.row(f"{'FIFO' if how == 'fifo' else '/dev/zero link'} after listing", 1, 1, 0, "hung")
            return
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        if len(errors) != 1 or "not a regular file" not in errors[0]:
            problems.append(f"error lines: {errors[:2]}")
        label = "FIFO after listing" if how == "fifo" else "/dev/zero link after listing"
        self.row(label, 1, int(bool(problems)), lost,
                 "; ".join(problems) or f"one error line, {time.perf_counter() - started:.1f} s")

    def non_utf8_names(self) -> None:
        """A file and an agent folder whose names are not UTF-8: one error each, every run."""
        root, sessions, ref = self._tree_with("names")
        bad_file = os.fsencode(sessions) + b"/\xff\xfe-not-utf8.jsonl"
        with open(bad_file, "wb") as f:
            f.write(line(header("badbad00-0000-4000-8000-000000000000")))
        os.makedirs(os.fsencode(root / "agents") + b"/caf\xe9/sessions")
        problems, lost = [], 0
        for attempt in range(2):
            proc, lost_now, found = self._ok_import(root, ref, "names", want_rc=(1,))
            lost += lost_now
            problems += found
            errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
            if len(errors) != 2 or not all("not valid UTF-8" in ln for ln in errors):
                problems.append(f"run {attempt + 1}: error lines {errors[:2]}")
        self.row("names not UTF-8", 2, int(bool(problems)), lost, "; ".join(problems[:2]))

    def locked_store(self) -> None:
        """The embedded store held by another writer past the busy timeout."""
        root, _sessions, ref = self._tree_with("locked")
        db = self.work / "locked.db"
        agentbase("init", "--db", f"sqlite:///{db}")
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            proc = agentbase("import", root, "--db", f"sqlite:///{db}",
                             env=dict(ENV, AGENTBASE_BUSY_TIMEOUT="1"))
        finally:
            holder.rollback()
            holder.close()
        problems = [] if one_error_line(proc, "write lock") else [f"rc {proc.returncode} {proc.stderr.strip()[-150:]!r}"]
        again = agentbase("import", root, "--db", f"sqlite:///{db}")
        lost, extra = compare({t: r for t, r in ref.items() if t != "parsed_files"}, dump_url(f"sqlite:///{db}"))
        if again.returncode != 0 or extra:
            problems.append(f"rerun rc {again.returncode}, {extra} doubled")
        self.row("store locked by another writer", 1, int(bool(problems)), lost, "; ".join(problems))

    def import_into_full(self, tree: Path) -> None:
        """A full disk (tmpfs, as root) and a file-size limit while the embedded store is being
        written: one error line, the store consistent, and a rerun equal to a clean import."""
        reference = dump_url(f"sqlite:///{self.work / 'kill-clean.db'}")
        trials = failures = lost_total = 0
        notes = []
        mount = self.work / "tmpfs-import"
        mount.mkdir(exist_ok=True)
        mounted = os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True).returncode == 0
        cases = []
        if mounted:
            cases += [("tmpfs", 0.25), ("tmpfs", 0.6)]
        cases += [("fsize", 0.3), ("fsize", 0.7)]
        clean_size = (self.work / "kill-clean.db").stat().st_size
        try:
            for how, room in cases:
                trials += 1
                if how == "tmpfs":
                    subprocess.run(["mount", "-o", f"remount,size={int(clean_size * room) + 2**20}", str(mount)],
                                   check=True)
                    db = mount / "store.db"
                    preexec = None
                else:
                    db = self.work / f"fsize-import-{room}.db"
                    limit = int(clean_size * room)

                    def preexec(limit=limit):
                        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
                proc = agentbase("import", tree, "--db", f"sqlite:///{db}", "-q", preexec=preexec)
                problems = []
                if not one_error_line(proc):
                    problems.append(f"rc {proc.returncode} {proc.stderr.strip()[-150:]!r}")
                conn = sqlite3.connect(db)
                if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                    problems.append("store damaged")
                conn.close()
                if how == "tmpfs":  # room again: move the store to where it can grow
                    moved = self.work / f"tmpfs-moved-{room}.db"
                    for suffix in ("", "-wal", "-shm"):
                        if Path(str(db) + suffix).exists():
                            shutil.move(str(db) + suffix, str(moved) + suffix)
                    db = moved
                again = agentbase("import", tree, "--db", f"sqlite:///{db}", "-q")
                got = dump_url(f"sqlite:///{db}")
                lost, extra = compare({t: r for t, r in reference.items() if t != "parsed_files"},
                                      {t: r for t, r in got.items() if t != "parsed_files"})
                if again.returncode != 0 or extra:
                    problems.append(f"rerun rc {again.returncode}, {extra} doubled")
                lost_total += lost
                if problems:
                    failures += 1
                    notes.append(f"{how} {room:.0%}: " + "; ".join(problems))
        finally:
            if mounted:
                subprocess.run(["umount", str(mount)], capture_output=True)
        how = "tmpfs and RLIMIT_FSIZE" if mounted else "RLIMIT_FSIZE (no tmpfs: not root)"
        self.row("full disk / ulimit -f on import", trials, failures, lost_total, f"({how}) " + "; ".join(notes[:2]))


def state_size(snapshot: Path) -> int:
    p = snapshot.with_name(snapshot.stem + "-state.db")
    return p.stat().st_size if p.exists() else 0


def _is_fault_row(row: tuple) -> bool:
    """A row of a file the fault planted (its session ids are 9009... for the ordinary ones)."""
    return not any(isinstance(v, str) and ("9009000" in v) for v in row)


def _query(url: str, sql: str, params=()):
    import pymysql
    from urllib.parse import urlsplit, unquote

    p = urlsplit(url)
    conn = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or "root",
                           password=p.password or os.environ.get("AGENTBASE_DB_PASSWORD", ""),
                           database=unquote(p.path.lstrip("/")))
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()
    finally:
        conn.close()


def _rebase(dump: dict, old: str, new: str) -> dict:
    """File paths in a dump taken from a copy of the tree, as if it were the original."""
    return {t: sorted((tuple(v.replace(old, new) if isinstance(v, str) else v for v in r) for r in rows), key=repr)
            for t, rows in dump.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kill-trials", type=int, default=20)
    ap.add_argument("--mysql-kill-trials", type=int, default=6)
    store_options(ap, 24)
    args = ap.parse_args()
    work = work_dir(args.workdir, "agentbase-faults-")
    bench = Bench(args, work)
    started = time.perf_counter()
    try:
        tree = work / "tree"
        print(f"generating a {args.size_mb:.0f} MB tree (seed {args.seed}) in {work} ...", flush=True)
        generate_tree(str(tree), target_bytes=int(args.size_mb * 2**20), seed=args.seed)
        bench.kill_trials(tree, args.kill_trials, lambda tag: f"sqlite:///{work / f'kill-{tag}.db'}", "kill -9 (SQLite)")
        if bench.admin is not None and args.mysql_kill_trials:
            bench.kill_trials(tree, args.mysql_kill_trials, lambda tag: bench.mysql_db(f"k{tag}"), "kill -9 (MariaDB)")
        else:
            bench.row("kill -9 (MariaDB)", 0, 0, 0, "(skipped: no MariaDB)")
        small = work / "small-tree"
        generate_tree(str(small), target_bytes=int(1 * 2**20), seed=args.seed + 7)
        agentbase("import", small, "--db", f"sqlite:///{work / 'small.db'}", "-q")
        bench.full_disk(f"sqlite:///{work / 'small.db'}", f"sqlite:///{work / 'kill-clean.db'}", tree)
        bench.mariadb_down(tree)
        bench.huge_line()
        bench.random_bytes()
        bench.symlink_loop()
        bench.deleted_after_listing()
        bench.invalid_utf8()
        bench.replaced_after_listing("fifo")
        bench.replaced_after_listing("zero")
        bench.non_utf8_names()
        bench.locked_store()
        bench.import_into_full(tree)
    finally:
        bench.drop_databases()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print()
    head = ("fault", "trials", "failures", "rows lost", "")
    width = max(len(r[0]) for r in bench.rows + [head])
    print(f"{head[0]:<{width}}  {head[1]:>6}  {head[2]:>8}  {head[3]:>9}")
    for fault, trials, failures, lost, note in bench.rows:
        print(f"{fault:<{width}}  {trials:>6}  {failures:>8}  {lost:>9}  {note}".rstrip())
    print(f"\n{time.perf_counter() - started:.0f} s")
    if any(r[2] or r[3] for r in bench.rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
