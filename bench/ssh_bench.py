#!/usr/bin/env python3
"""AgentBase SSH benchmark: importing over SFTP from a real sshd on loopback, next to a local import.

    python3 bench/ssh_bench.py [--size-mb 200] [--files-per-server 3000] [--workdir DIR] [--keep]

(a) local first import of a generated three-server tree          MiB/s (wall, start-up included)
(b) the same tree over SSH, one configured server per subfolder   MiB/s, and (b)/(a)   target >= 0.5
(c) no-change rerun over SSH of 3 x ~3,000 small files            wall s                target < 5 s
    (the local no-change rerun of the same files for reference)
(d) rerun over SSH after appending one line to the largest file   wire bytes beyond a   target < 64 KB
                                                                  no-change rerun

sshd is Debian's /usr/sbin/sshd, started by tests/sshd.py on a free 127.0.0.1 port with generated keys
and stopped at the end. Every import is a child process (`python -m importer import ...`), so both
sides pay the same interpreter start-up. Exit status 0 whatever the figures (this is a report), 1 if a
run failed or sshd is missing. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

import trees  # noqa: E402  (bench/trees.py)
from import_bench import append_line  # noqa: E402
from sshd import SSHServer, sshd_missing  # noqa: E402

MIB = 1024 * 1024
SERVERS = ("alpha", "beta", "gamma")
RATIO_MIN = 0.5
RERUN_MAX_S = 5.0
APPEND_MAX_WIRE = 64 * 1024


def log(msg: str = "") -> None:
    print(msg, flush=True)


def run(args: list, home: Path) -> tuple[float, dict | None, subprocess.CompletedProcess]:
    """`python -m importer <args> --json-summary` in a child process: (wall s, summary, process)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["AGENTBASE_HOME"] = str(home)
    for name in ("AGENTBASE_DB", "AGENTBASE_CONFIG"):
        env.pop(name, None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "importer", *map(str, args), "--json-summary"], cwd=REPO,
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        summary = None
    return wall, summary, proc


def check(label: str, proc: subprocess.CompletedProcess) -> None:
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"{label} failed (exit {proc.returncode}):\n{tail}")


def write_config(path: Path, sshd: SSHServer, roots: dict[str, Path], db: Path) -> Path:
    lines = [f"database: sqlite:///{db}", f"known_hosts: {sshd.write_known_hosts(path.parent / 'known_hosts')}",
             f"ssh_config: {path.parent / 'no-ssh-config'}", "servers:"]
    for name, root in roots.items():
        lines += [f"  - name: {name}", "    host: 127.0.0.1", f"    port: {sshd.port}", f"    user: {sshd.user}",
                  f"    identity_file: {sshd.user_key}", f"    state_dir: {root}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=200, help="size of the generated tree (MiB)")
    ap.add_argument("--files-per-server", type=int, default=3000, help="small files per server for (c)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", help="where to put trees and stores (default: a temp dir, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    args = ap.parse_args(argv)
    why = sshd_missing()
    if why:
        log(why)
        return 1
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="agentbase-ssh-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sshd = None
    try:
        tree, files = work / "tree", work / "files"
        for path in (tree, files):
            if path.exists():
                shutil.rmtree(path)
        for db in work.glob("*.db*"):
            db.unlink()
        log(f"generating a {args.size_mb:g} MiB tree for {', '.join(SERVERS)} in {tree} ...")
        trees.generate_tree(tree, target_bytes=int(args.size_mb * MIB), seed=args.seed, servers=SERVERS)
        total = tree_bytes(tree)
        log(f"generating {3 * args.files_per_server} small files in {files} ...")
        trees.generate_file_count_tree(files, files=3 * args.files_per_server, seed=args.seed, servers=SERVERS)
        counts = {s: sum(1 for p in (files / s).rglob("*") if p.is_file()) for s in SERVERS}
        sshd = SSHServer(work / "sshd").start()
        log(f"sshd on 127.0.0.1:{sshd.port}")
        home = work / "home"

        # (a) local, (b) over SSH: the same tree, fresh stores
        local_s, local, proc = run(["import", tree, "--db", f"sqlite:///{work / 'local.db'}"], home)
        check("local import", proc)
        config = write_config(work / "tree.yml", sshd, {s: tree / s for s in SERVERS}, work / "ssh.db")
        ssh_s, ssh, proc = run(["import", "--config", config], home)
        check("SSH import", proc)
        local_mib, ssh_mib = total / MIB / local_s, total / MIB / ssh_s
        wire = sum(s["wire_bytes"] for s in ssh["servers"])

        # (c) no-change rerun of 3 x ~3,000 files
        files_config = write_config(work / "files.yml", sshd, {s: files / s for s in SERVERS}, work / "files-ssh.db")
        _, _, proc = run(["import", "--config", files_config], home)
        check("SSH import of the small files", proc)
        rerun_s, rerun, proc = run(["import", "--config", files_config], home)
        check("SSH no-change rerun", proc)
        _, _, proc = run(["import", files, "--db", f"sqlite:///{work / 'files-local.db'}"], home)
        check("local import of the small files", proc)
        local_rerun_s, _, proc = run(["import", files, "--db", f"sqlite:///{work / 'files-local.db'}"], home)
        check("local no-change rerun", proc)

        # (d) one appended line: the wire bytes beyond a no-change rerun (handshakes and listings)
        _, same, proc = run(["import", "--config", config], home)
        check("SSH no-change rerun of the tree", proc)
        same_wire = sum(s["wire_bytes"] for s in same["servers"])
        path, line_bytes = append_line(tree)
        append_s, append, proc = run(["import", "--config", config], home)
        check("SSH append rerun", proc)
        append_wire = sum(s["wire_bytes"] for s in append["servers"])
    finally:
        if sshd is not None:
            sshd.stop()
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    ratio = ssh_mib / local_mib
    rows = [
        ("tree", f"{total / MIB:.1f} MiB, {ssh['files_seen']} transcripts, 3 servers", "-", ""),
        ("(a) local first import", f"{local_mib:.1f} MiB/s ({local_s:.2f} s)", "-", ""),
        ("(b) SSH first import (loopback)", f"{ssh_mib:.1f} MiB/s ({ssh_s:.2f} s, {wire / MIB:.1f} MiB on the wire)",
         "-", ""),
        ("(b)/(a)", f"{ratio:.2f}", f">= {RATIO_MIN}", verdict(ratio >= RATIO_MIN)),
        ("(c) SSH no-change rerun", f"{rerun_s:.2f} s wall ({rerun['files_seen']} files: "
         + " + ".join(str(counts[s]) for s in SERVERS) + f"; importer {rerun['elapsed_s']:.2f} s)",
         f"< {RERUN_MAX_S:g} s", verdict(rerun_s < RERUN_MAX_S and rerun["files_imported"] == 0)),
        ("    local no-change rerun", f"{local_rerun_s:.2f} s wall", "-", ""),
        ("(d) SSH rerun after one appended line", f"{append_wire - same_wire} B on the wire beyond a no-change "
         f"rerun's {same_wire} B; {append['bytes_read']} B read (line {line_bytes} B; {append_s:.2f} s)",
         f"< {APPEND_MAX_WIRE} B", verdict(append_wire - same_wire < APPEND_MAX_WIRE and append["messages_added"] == 1)),
    ]
    width = max(len(r[0]) for r in rows)
    log("")
    for name, value, target, ok in rows:
        log(f"{name:<{width}}  {value}  {target}  {ok}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
