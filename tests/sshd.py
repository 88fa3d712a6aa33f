"""A real OpenSSH server on loopback for the SSH tests (and bench/ssh_bench.py).

``SSHServer`` starts Debian's ``/usr/sbin/sshd`` in the foreground on a free
127.0.0.1 port with a generated host key, a generated user key and its own
``authorized_keys``, all in a temporary folder; ``stop()`` ends it (and only
the processes it started). ``require_sshd()`` skips a test when openssh-server
is not installed, and fails it under ``CI=true``, where ``.ci/run`` installs it.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from ports import free_port  # (sshd's port)

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"


def sshd_missing() -> str | None:
    """Why no test server can run here, or None."""
    if not os.path.exists(SSHD):
        return f"openssh-server is not installed ({SSHD} missing): apt-get install -y openssh-server"
    if not os.path.exists(SSH_KEYGEN):
        return "ssh-keygen is not installed (openssh-client)"
    return None


def require_sshd() -> None:
    import pytest

    why = sshd_missing()
    if why is None:
        return
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(why + "; it is required when CI=true")
    pytest.skip(why)


def keygen(path: Path, kind: str = "ed25519") -> Path:
    subprocess.run([SSH_KEYGEN, "-q", "-t", kind, "-N", "", "-C", "agentbase-test", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True)
    return path


class SSHServer:
    """One sshd listening on 127.0.0.1:<port> until :meth:`stop`."""

    def __init__(self, root: Path, user_key: Path | None = None, host_key: Path | None = None,
                 home: Path | None = None):
        # home: where an SFTP session starts (what `~` is to the client), instead of the user's real home
        self.home = Path(home) if home is not None else None
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.user = getpass.getuser()
        self.host_key = host_key or keygen(self.root / "host_ed25519")
        self.user_key = user_key or keygen(self.root / "user_ed25519")
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = self.root / "sshd.log"

    def known_hosts_line(self, host: str = "127.0.0.1") -> str:
        name = host if self.port == 22 else f"[{host}]:{self.port}"
        kind, blob = Path(str(self.host_key) + ".pub").read_text().split()[:2]
        return f"{name} {kind} {blob}\n"

    def write_known_hosts(self, path: Path) -> Path:
        path.write_text(self.known_hosts_line())
        return path

    def start(self, port: int | None = None) -> "SSHServer":
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation dir
        auth = self.root / "authorized_keys"
        auth.write_text(Path(str(self.user_key) + ".pub").read_text())
        auth.chmod(0o600)
        for attempt in range(5):
            self.port = port or free_port()
            config = self.root / "sshd_config"
            config.write_text(
                f"Port {self.port}\n"
                "ListenAddress 127.0.0.1\n"
                f"HostKey {self.host_key}\n"
                f"PidFile {self.root / 'sshd.pid'}\n"
                f"AuthorizedKeysFile {auth}\n"
                "PermitRootLogin prohibit-password\n"
                "PubkeyAuthentication yes\n"
                "PasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\n"
                "UsePAM no\n"
                "StrictModes no\n"
                "PrintMotd no\n"
                "UseDNS no\n"
                "MaxStartups 50\n"
                "MaxSessions 50\n"
                "LogLevel ERROR\n"
                + ("Subsystem sftp internal-sftp\n" if self.home is None else
                   f"Subsystem sftp internal-sftp -d {self.home}\n")
            )
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, start_new_session=True)
            log.close()
            if self._wait_listening():
                return self
            self.stop()
            if port:
                break
        raise RuntimeError(f"sshd did not start: {self.log_path.read_text(errors='replace')[-2000:]}")

    def _wait_listening(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def session_pids(self) -> list[int]:
        """The sshd processes serving connections: every descendant of the listener."""
        if self.proc is None:
            return []
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        out, todo = [], [self.proc.pid]
        while todo:
            for child in children.get(todo.pop(), []):
                out.append(child)
                todo.append(child)
        return out

    def kill_sessions(self) -> int:
        """Cut every open connection (SIGKILL its sshd processes); the listener stays."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.kill_sessions()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def __enter__(self) -> "SSHServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
