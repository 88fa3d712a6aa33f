"""Remote sources: transcripts read over SSH/SFTP (paramiko), one connection per server.

``RemoteServer(server, config).connect()`` opens one SSH connection and one
SFTP session. Host, port, user and identity files come from the config file,
then ``~/.ssh/config`` (``Host`` aliases, ``HostName``, ``Port``, ``User``,
``IdentityFile``), then the defaults (port 22, the local user name, the ssh
agent and ``~/.ssh/id_*``). Host keys are checked against ``known_hosts``: an
unknown key is refused unless the config sets ``accept_new_host_keys: true``
(then it is appended to that file, as OpenSSH's ``accept-new`` does); a
changed key is always refused.

``RemoteServer.fs`` is an :class:`SFTPFileSystem`: the filesystem interface
every source reads through (sources/fs.py), so each source kind is listed
and read over SSH exactly as locally, with no remote code of its own. A
folder is listed with one ``listdir_attr`` (sizes and times included);
``open()`` returns a reader with ``seek``/``read`` that fetches only the
requested range, in pipelined requests of up to 255 KB. A file that only grew
is therefore read from its recorded offset: only the new bytes (plus two 1 KB
check windows) cross the network.

Bytes are counted twice (:class:`TransferCounter`): ``wire_in``/``wire_out``
are every byte through the TCP socket (SSH handshake, listings, file data,
encryption overhead), ``payload`` the file bytes the reader returned.

A connection that drops or stalls past ``read_timeout`` raises
:class:`~importer.sources.SourceLost`: the file being read is rolled back and
the server's remaining files are left for the next run.

A live SQLite database (OpenClaw's per-agent store, the agent-server's
``agent.db``) is never copied as a file (its writer may be busy, with
committed rows still in ``-wal``): :meth:`SFTPFileSystem.sqlite_copy` runs a
small program on the server (``python3``'s sqlite3 module, else the
``sqlite3`` shell) that opens it read-only and, in one read transaction,
copies the tables the source reads into a new file (never credential tables),
which is fetched by SFTP and removed from the server.
"""

from __future__ import annotations

import base64
import errno
import getpass
import hashlib
import logging
import os
import posixpath
import shlex
import shutil
import socket
import stat
import tempfile
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .config import Config, ServerConfig
from .sources.fs import FileSystem, Listed, PosixPaths
from .units import SourceError, SourceLost

log = logging.getLogger("agentbase")

REQUEST_SIZE = 255 * 1024  # OpenSSH's sftp-server serves reads of up to 261120 bytes (limits@openssh.com)
PIPELINE_DEPTH = 32  # read requests in flight per file (8 MB)
WINDOW_SIZE = 16 * 1024 * 1024  # SSH channel window: keeps pipelined reads flowing
MAX_PACKET_SIZE = 256 * 1024


class RemoteError(Exception):
    """A server cannot be reached or refused us; the message is one line, without secrets."""


class HostKeyError(RemoteError):
    """An unknown (and not accepted) or changed host key."""


@dataclass
class TransferCounter:
    wire_in: int = 0  # bytes received on the TCP socket
    wire_out: int = 0  # bytes sent on the TCP socket
    payload: int = 0  # file bytes handed to the importer

    @property
    def wire(self) -> int:
        return self.wire_in + self.wire_out


class _CountingSocket(socket.socket):
    """A TCP socket that counts what goes through it (paramiko reads and writes
    with recv/send only)."""

    counter: TransferCounter

    def recv(self, n, *args):
        data = super().recv(n, *args)
        self.counter.wire_in += len(data)
        return data

    def send(self, data, *args):
        sent = super().send(data, *args)
        self.counter.wire_out += sent
        return sent

    def sendall(self, data, *args):
        super().sendall(data, *args)
        self.counter.wire_out += len(data)


def fingerprint(key) -> str:
    """OpenSSH's SHA256 fingerprint of a host key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


@dataclass
class Endpoint:
    """Where and as whom to connect, after ~/.ssh/config."""

    host: str  # the name the config file gives
    hostname: str  # what to connect to
    port: int
    user: str
    identity_files: list[str]
    explicit_identity: bool

    @property
    def known_hosts_name(self) -> str:
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"

    def __str__(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


def resolve_endpoint(server: ServerConfig, config: Config) -> Endpoint:
    """The config file's values win; ~/.ssh/config fills in the rest."""
    import paramiko

    options: dict[str, Any] = {}
    ssh_config = Path(config.ssh_config).expanduser()
    if ssh_config.is_file():
        try:
            options = paramiko.SSHConfig.from_path(str(ssh_config)).lookup(server.host)
        except (OSError, paramiko.SSHException, ValueError) as exc:
            raise RemoteError(f"cannot read {ssh_config}: {exc}") from None
    if options.get("proxycommand") or options.get("proxyjump"):
        raise RemoteError(
            f"{ssh_config} sets ProxyCommand/ProxyJump for {server.host}: not supported yet; "
            "give the server's own address as host"
        )
    hostname = options.get("hostname") or server.host
    try:
        port = int(server.port or options.get("port") or 22)
    except ValueError:
        raise RemoteError(f"{ssh_config}: bad Port for {server.host}") from None
    user = server.user or options.get("user") or getpass.getuser()
    if server.identity_file:
        identities = [str(Path(server.identity_file).expanduser())]
        explicit = True
    else:
        identities = [str(Path(p).expanduser()) for p in options.get("identityfile", [])]
        identities = [p for p in identities if os.path.exists(p)]
        explicit = False
    for path in identities:
        if not os.path.exists(path):
            raise RemoteError(f"server {server.name}: identity file {path} does not exist")
    return Endpoint(server.host, hostname, port, user, identities, explicit)


class _KnownHostsPolicy:
    """Unknown host keys: refused, or appended to known_hosts when the config
    says accept_new_host_keys (OpenSSH's StrictHostKeyChecking=accept-new)."""

    def __init__(self, known_hosts: Path, accept_new: bool):
        self.known_hosts = known_hosts
        self.accept_new = accept_new

    def missing_host_key(self, client, hostname, key):
        if not self.accept_new:
            raise HostKeyError(
                f"unknown host key for {hostname} ({key.get_name()} {fingerprint(key)}): not in "
                f"{self.known_hosts}; add it (e.g. connect once with ssh) or set accept_new_host_keys: true"
            )
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        with open(self.known_hosts, "a", encoding="ascii") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        log.warning("added the host key of %s (%s %s) to %s", hostname, key.get_name(),
                    fingerprint(key), self.known_hosts)


def _is_lost(exc: BaseException, transport) -> bool:
    """Whether an exception means the connection is gone (not a per-file error)."""
    import paramiko

    if isinstance(exc, (socket.timeout, EOFError, paramiko.SSHException, ConnectionError)):
        return True
    return transport is None or not transport.is_active()


class RemoteServer:
    """One SSH connection and SFTP session to one configured server."""

    def __init__(self, server: ServerConfig, config: Config):
        self.server = server
        self.config = config
        self.name = server.name
        self.counter = TransferCounter()
        self.endpoint: Endpoint | None = None
        self.client = None
        self.sftp = None
        self.home: str | None = None
        self.lost: str | None = None  # why the connection went away
        self.fs = SFTPFileSystem(self)

    # -- connection --------------------------------------------------------

    def connect(self) -> "RemoteServer":
        import paramiko

        if not log.isEnabledFor(logging.DEBUG):
            # paramiko logs a dropped connection from its own thread; the
            # importer reports it as one line instead.
            logging.getLogger("paramiko").setLevel(logging.CRITICAL)
        ep = self.endpoint = resolve_endpoint(self.server, self.config)
        timeout = self.config.connect_timeout
        sock = self._open_socket(ep, timeout)
        client = paramiko.SSHClient()
        known = Path(self.config.known_hosts).expanduser()
        try:
            client.get_host_keys().load(str(known))
        except FileNotFoundError:
            pass
        except (OSError, paramiko.SSHException) as exc:
            sock.close()
            raise RemoteError(f"cannot read known_hosts {known}: {exc}") from None
        if os.path.isfile("/etc/ssh/ssh_known_hosts"):
            try:
                client.load_system_host_keys("/etc/ssh/ssh_known_hosts")
            except (OSError, paramiko.SSHException):
                pass
        client.set_missing_host_key_policy(_KnownHostsPolicy(known, self.config.accept_new_host_keys))
        started = time.monotonic()
        try:
            client.connect(
                ep.hostname, port=ep.port, username=ep.user, sock=sock,
                key_filename=ep.identity_files or None, look_for_keys=not ep.explicit_identity,
                allow_agent=True, timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
                channel_timeout=timeout,
            )
            transport = client.get_transport()
            transport.set_keepalive(15)
            self.sftp = paramiko.SFTPClient.from_transport(
                transport, window_size=WINDOW_SIZE, max_packet_size=MAX_PACKET_SIZE
            )
            self.sftp.get_channel().settimeout(self.config.read_timeout)
            self.home = self.sftp.normalize(".")
        except HostKeyError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyError(
                f"host key for {ep.known_hosts_name} has CHANGED: known_hosts ({known}) has "
                f"{exc.expected_key.get_name()} {fingerprint(exc.expected_key)}, the server offered "
                f"{exc.key.get_name()} {fingerprint(exc.key)}; refusing to connect. If the server was "
                f"reinstalled, remove the old key: ssh-keygen -R '{ep.known_hosts_name}' -f {known}"
            ) from None
        except paramiko.AuthenticationException:
            client.close()
            tried = ", ".join(ep.identity_files) if ep.identity_files else "the ssh agent and ~/.ssh/id_*"
            raise RemoteError(f"authentication failed for {ep} (tried {tried})") from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            client.close()
            if isinstance(exc, socket.timeout) or time.monotonic() - started >= timeout * 0.9:
                # paramiko reports a handshake that timed out in several ways
                raise RemoteError(f"ssh to {ep}: no answer within {timeout:g} s") from None
            raise RemoteError(f"ssh to {ep} failed: {_first_line(exc)}") from None
        self.client = client
        return self

    def _open_socket(self, ep: Endpoint, timeout: float) -> socket.socket:
        try:
            infos = socket.getaddrinfo(ep.hostname, ep.port, 0, socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise RemoteError(f"cannot resolve {ep.hostname}: {exc.strerror or exc}") from None
        last = None
        for family, kind, proto, _name, address in infos:
            sock = _CountingSocket(family, kind, proto)
            sock.counter = self.counter
            sock.settimeout(timeout)
            try:
                sock.connect(address)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
            except OSError as exc:
                sock.close()
                last = exc
        if isinstance(last, socket.timeout):
            raise RemoteError(f"cannot connect to {ep.hostname}:{ep.port}: no answer within {timeout:g} s")
        reason = (last.strerror if isinstance(last, OSError) and last.strerror else str(last)) or "failed"
        raise RemoteError(f"cannot connect to {ep.hostname}:{ep.port}: {reason.lower()}")

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # already gone
                pass
            self.client = None
            self.sftp = None

    def __enter__(self) -> "RemoteServer":
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def _lose(self, exc: BaseException, doing: str) -> SourceLost:
        reason = "no data within {:g} s".format(self.config.read_timeout) if isinstance(
            exc, socket.timeout) else _first_line(exc).rstrip(": ")
        self.lost = f"connection to {self.name} lost while {doing}: {reason}"
        self.close()
        return SourceLost(self.lost + "; the rest is left for the next run")

    def _check(self) -> None:
        if self.lost is not None or self.sftp is None:
            raise SourceLost(self.lost or f"not connected to {self.name}")

    # -- paths and listings ------------------------------------------------

    def abspath(self, path: str) -> str:
        """``~`` and relative paths resolved against the remote home (no symlinks followed)."""
        if path == "~" or path.startswith("~/"):
            path = self.home + path[1:]
        elif not path.startswith("/"):
            path = posixpath.join(self.home, path)
        return posixpath.normpath(path)

    def _call(self, doing: str, fn, *args):
        """One SFTP call; a connection that is gone becomes :class:`SourceLost`."""
        self._check()
        try:
            return fn(*args)
        except Exception as exc:
            if _is_lost(exc, self._transport()):
                raise self._lose(exc, doing) from None
            raise

    def listdir(self, path: str) -> list | None:
        """``listdir_attr`` of one folder (one request per ~100 entries); None
        when it does not exist."""
        try:
            return self._call(f"listing {path}", self.sftp.listdir_attr, path)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            raise

    def _transport(self):
        return self.client.get_transport() if self.client is not None else None

    # -- reading -----------------------------------------------------------

    def open(self, path: str, size: int) -> "RemoteReader":
        """The file at ``path`` for ranged reads of its first ``size`` bytes
        (its size when listed: what was appended since is for the next run)."""
        handle = self._call(f"opening {path}", self.sftp.open, path, "rb")
        return RemoteReader(self, handle, path, size)

    # -- commands and the SQLite store ---------------------------------------

    def run(self, command: str, timeout: float | None = None) -> tuple[int, bytes, bytes]:
        """Run a command on the server (an SSH exec channel): (status, stdout, stderr)."""

        def execute():
            chan = self._transport().open_session(timeout=self.config.connect_timeout)
            chan.settimeout(timeout or self.config.read_timeout)
            chan.exec_command(command)
            chan.shutdown_write()
            out = chan.makefile("rb").read()
            err = chan.makefile_stderr("rb").read()
            status = chan.recv_exit_status()
            chan.close()
            return status, out, err

        return self._call("running a command", execute)

    def fetch_sqlite_copy(self, remote_path: str, local_dir: str | os.PathLike, tables: list[str]) -> Path:
        """A consistent copy of a live SQLite database on the server, fetched to
        ``local_dir``; returns the local file's path.

        The copy is made on the server from a read-only connection in one read
        transaction, so rows committed to ``-wal`` are in it and a write in
        progress is not. It holds only ``tables`` (the source's: never
        credential tables) and ``user_version``; it is removed from the server
        once fetched.
        """
        status, out, err = self.run(_backup_command(remote_path, tables))
        if status != 0 or not out.strip():
            reason = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {status}"]
            raise RemoteError(f"server {self.name}: cannot copy {remote_path}: {reason[0][:300]}")
        copy = out.decode("utf-8", "replace").strip().splitlines()[-1]
        folder = posixpath.dirname(copy)
        if (not copy.startswith("/") or posixpath.basename(copy) != "copy.sqlite"
                or not posixpath.basename(folder).startswith("agentbase-sqlite-copy-")):
            raise RemoteError(f"server {self.name}: unexpected answer from the store copy of {remote_path}")
        local = Path(local_dir) / posixpath.basename(remote_path)
        try:
            size = self._call(f"reading {copy}", self.sftp.stat, copy).st_size or 0
            with self.open(copy, size) as src, open(local, "wb") as dst:
                while True:
                    chunk = src.read(4 * 1024 * 1024)
                    if not chunk:
                        break
                    dst.write(chunk)
        finally:
            if self.lost is None:
                self.run(f"rm -rf {shlex.quote(folder)}")
        return local


_COPY_PY = r"""
import os, sqlite3, sys, tempfile
from urllib.parse import quote
src_path, wanted = sys.argv[1], set(sys.argv[2].split(","))
tmp = tempfile.mkdtemp(prefix="agentbase-sqlite-copy-")
dst_path = os.path.join(tmp, "copy.sqlite")
q = lambda name: '"' + name.replace('"', '""') + '"'
try:
    con = sqlite3.connect("file:" + quote(src_path) + "?mode=ro", uri=True, timeout=30, isolation_level=None)
    con.execute("PRAGMA busy_timeout = 30000")
    con.execute("ATTACH DATABASE ? AS dst", (dst_path,))
    con.execute("BEGIN")
    tables = [r[0] for r in con.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")
              if r[0] in wanted]
    for table in tables:
        try:  # stored columns only: a virtual generated column may need a newer SQLite
            cols = [r[1] for r in con.execute("PRAGMA main.table_xinfo(%s)" % q(table)) if r[6] in (0, 3)]
        except sqlite3.Error:
            cols = [r[1] for r in con.execute("PRAGMA main.table_info(%s)" % q(table))]
        con.execute("CREATE TABLE dst.%s AS SELECT %s FROM main.%s" % (q(table), ", ".join(map(q, cols)), q(table)))
    con.execute("PRAGMA dst.user_version = %d" % int(con.execute("PRAGMA main.user_version").fetchone()[0]))
    con.execute("COMMIT")
    con.close()
except Exception as exc:
    for name in os.listdir(tmp):
        os.unlink(os.path.join(tmp, name))
    os.rmdir(tmp)
    sys.exit("%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""))
print(dst_path)
"""


def _backup_command(remote_path: str, tables: list[str]) -> str:
    """A POSIX shell command that copies, in one read transaction, ``tables``
    of a live SQLite database into a new file on the server, and prints that
    file's path: ``python3``'s sqlite3 module, else the ``sqlite3`` shell."""
    uri = shlex.quote("file:" + urllib.parse.quote(remote_path) + "?mode=ro")
    names = ", ".join("'" + t.replace("'", "''") + "'" for t in tables)
    generate = (
        "SELECT 'CREATE TABLE dst.\"' || replace(name, '\"', '\"\"') || '\" AS SELECT * FROM main.\"' "
        "|| replace(name, '\"', '\"\"') || '\";' FROM main.sqlite_master "
        f"WHERE type = 'table' AND name IN ({names});"
    )
    version = "SELECT 'PRAGMA dst.user_version = ' || user_version || ';' FROM pragma_user_version;"
    shell_fallback = (
        'd=$(mktemp -d "${TMPDIR:-/tmp}/agentbase-sqlite-copy-XXXXXX") || exit 1; '
        f'if sqlite3 -bail {uri} "ATTACH DATABASE \'$d/copy.sqlite\' AS dst;" "BEGIN;" ".output $d/copy.sql" '
        f'{shlex.quote(generate)} {shlex.quote(version)} ".output stdout" ".read $d/copy.sql" "COMMIT;"; '
        'then rm -f "$d/copy.sql"; echo "$d/copy.sqlite"; else rm -rf "$d"; exit 1; fi'
    )
    python = f"python3 -c {shlex.quote(_COPY_PY)} {shlex.quote(remote_path)} {shlex.quote(','.join(tables))}"
    # python3 where it works (on macOS /usr/bin/python3 may be a stub), else the sqlite3 shell
    return f"if python3 -c 'import sqlite3' >/dev/null 2>&1; then {python}; else {shell_fallback}; fi"


class _EarlyAnswers:
    """Where paramiko puts answers that arrive while another one is awaited."""

    def __init__(self):
        self.answers: dict[int, tuple] = {}

    def _async_response(self, t, msg, num) -> None:
        self.answers[num] = (t, msg)


class RemoteReader:
    """A remote file opened for reading: ``seek`` and ``read`` of any range.

    ``read(n)`` fetches exactly the bytes asked for (up to the size listed,
    or the end of the file), as pipelined SFTP read requests of up to
    ``REQUEST_SIZE`` bytes (paramiko's ``SFTPFile.MAX_REQUEST_SIZE`` is 32 KB;
    OpenSSH serves 255 KB); nothing is read ahead, so a ranged read transfers
    only its range.
    """

    def __init__(self, remote: RemoteServer, handle, path: str, size: int):
        self.remote = remote
        self.handle = handle
        self.path = path
        self.limit = size
        self.pos = 0

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 1:
            pos += self.pos
        elif whence == 2:
            pos += self.limit
        self.pos = max(0, pos)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.limit if n is None or n < 0 else min(self.pos + n, self.limit)
        if end <= self.pos:
            return b""
        data = self.remote._call(f"reading {self.path}", self._fetch, self.pos, end - self.pos)
        self.pos += len(data)
        self.remote.counter.payload += len(data)
        return data

    def _fetch(self, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end of the file), as
        up to ``PIPELINE_DEPTH`` read requests in flight at once.

        Uses paramiko's own request primitives (those its ``prefetch`` uses)
        in this thread, so a connection that drops mid-read raises here and
        leaves no helper thread behind. A short answer is not taken for the
        end of the file (a server may cap its reads): reading goes on from
        there until the server says end of file.
        """
        from paramiko.sftp import CMD_DATA, CMD_READ, CMD_STATUS, int64

        sftp = self.remote.sftp
        handle = self.handle.handle
        early = _EarlyAnswers()
        out = []
        end = start + length
        offset = start
        in_flight: list[tuple[int, int, int]] = []  # (request number, offset, size)
        eof = False
        while (in_flight or offset < end) and not eof:
            while offset < end and len(in_flight) < PIPELINE_DEPTH:
                size = min(REQUEST_SIZE, end - offset)
                num = sftp._async_request(early, CMD_READ, handle, int64(offset), int(size))
                in_flight.append((num, offset, size))
                offset += size
            num, at, size = in_flight.pop(0)
            try:
                if num in early.answers:
                    t, msg = early.answers.pop(num)
                    if t == CMD_STATUS:
                        sftp._convert_status(msg)
                else:
                    t, msg = sftp._read_response(num)
                if t != CMD_DATA:
                    raise OSError(f"unexpected SFTP answer {t} to a read")
                data = msg.get_string()
            except EOFError:
                data, eof = b"", True
            out.append(data)
            if len(data) < size and not eof:
                # A short read: drop what is in flight and go on from here.
                self._drain(early, in_flight)
                in_flight = []
                offset = at + len(data)
                if not data:
                    eof = True
        self._drain(early, in_flight)
        return b"".join(out)

    def _drain(self, early: "_EarlyAnswers", in_flight) -> None:
        """Collect the answers to requests no longer wanted (after the end of the file)."""
        sftp = self.remote.sftp
        for num, _at, _size in in_flight:
            if early.answers.pop(num, None) is not None:
                continue
            try:
                sftp._read_response(num)
            except (EOFError, OSError):
                pass

    def close(self) -> None:
        if self.handle is None:
            return
        handle, self.handle = self.handle, None
        try:
            # Not waiting for the answer saves a round trip per file; paramiko
            # collects it with the next one (this is how it closes a file
            # object that is garbage-collected).
            handle._close(async_=True)
        except Exception:  # the connection may be gone; the import already has what it read
            pass

    def __enter__(self) -> "RemoteReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SFTPFileSystem(PosixPaths, FileSystem):
    """A server's files over its SFTP session: the interface every source reads
    through (sources/fs.py). Modification times are whole seconds (SFTP's).

    SFTP gives no inode: a folder is known by its real path on the server
    (``realpath``, SFTP's normalize), asked once per folder a link led to
    (and once per folder a walk starts from); a folder listed as a plain
    subfolder of a known one is that one's real path plus its name, with no
    round trip."""

    remote = True

    def __init__(self, server: RemoteServer):
        super().__init__(follow_symlinks=getattr(server.config, "follow_symlinks", False))
        self.server = server
        self.label = f"server {server.name}"
        self._real: dict[str, str] = {}  # path -> its real path on the server
        self._plain: set[str] = set()  # folders listed as subfolders (not links) of their parent
        self._links: set[str] = set()  # link entries listed

    def start(self) -> None:
        super().start()
        self._real, self._plain, self._links = {}, set(), set()

    def _normalize(self, path: str) -> str | None:
        """The server's real path of ``path`` (None: nothing there, a dangling link)."""
        found = self._real.get(path)
        if found is None:
            server = self.server
            try:
                found = server._call(f"listing {path}", server.sftp.normalize, path)
            except OSError:
                return None
            self._real[path] = found
        return found

    def _folder_id(self, path: str) -> str | None:
        found = self._real.get(path)
        if found is not None:
            return found
        if path in self._plain:
            parent = self._folder_id(posixpath.dirname(path))
            if parent is not None:
                found = self._real[path] = posixpath.join(parent, posixpath.basename(path))
                return found
        return self._normalize(path)

    def identity(self, path: str):
        if path in self._links:
            return self._normalize(path)
        folder = self._folder_id(posixpath.dirname(path))
        return posixpath.join(folder, posixpath.basename(path)) if folder is not None else None

    def through_link(self, path: str) -> bool:
        return self.identity(path) != posixpath.normpath(path)

    def _outside(self, path: str) -> bool:
        """Whether ``path`` resolves (on the server) outside the tree being discovered."""
        if self.confine is None or self.follow_symlinks:
            return False
        target = self._normalize(path)
        if target is None:
            return False  # a dangling link: stat says there is nothing
        if (target == posixpath.normpath(path) or target == self.confine
                or target.startswith(self.confine.rstrip("/") + "/")):
            return False
        self.outside.append((path, target))
        return True

    def _is_loop_link(self, folder: str, link: str) -> bool:
        """Whether a link listed in ``folder`` leads to that folder or one above it."""
        target = self._normalize(link)
        if target is None:
            return False
        here = self._folder_id(folder)
        if here is None or not (here == target or here.startswith(target.rstrip("/") + "/")):
            return False
        self.loops.append(link)
        return True

    def realpath(self, path: str) -> str:
        return self._normalize(path) or path

    def abspath(self, path: str) -> str:
        return self.server.abspath(path)

    def resolve(self, path: str) -> str:
        return path

    @staticmethod
    def _kind(mode: int | None) -> str:
        if mode is None:
            return "other"
        return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"

    def stat(self, path: str):
        server = self.server
        try:
            attr = server._call(f"listing {path}", server.sftp.stat, path)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR) or isinstance(exc, FileNotFoundError):
                return None
            raise
        if self._outside(path):
            return None
        return self._kind(attr.st_mode), attr.st_size or 0, int(attr.st_mtime or 0) * 1_000_000_000

    def listdir(self, path: str) -> list[Listed] | None:
        try:
            attrs = self.server.listdir(path)
        except UnicodeDecodeError:
            raise OSError(errno.EILSEQ, "a name in it is not valid UTF-8 (SFTP cannot list it)") from None
        if attrs is None:
            return None
        out = []
        for attr in attrs:
            full = posixpath.join(path, attr.filename)
            if attr.st_mode is not None and stat.S_ISLNK(attr.st_mode):
                self._links.add(full)
                if self._outside(full):
                    out.append(Listed(self, attr.filename, full, "outside", 0, 0))
                elif self._is_loop_link(path, full):
                    out.append(Listed(self, attr.filename, full, "loop", 0, 0))
                else:
                    out.append(Listed(self, attr.filename, full))  # followed when asked (an extra round trip)
            else:
                kind = self._kind(attr.st_mode)
                if kind == "dir":
                    self._plain.add(full)
                out.append(Listed(self, attr.filename, full, kind, attr.st_size or 0,
                                  int(attr.st_mtime or 0) * 1_000_000_000))
        return out

    def open(self, path: str, size: int | None = None):
        if size is None:
            found = self.stat(path)
            size = found[1] if found is not None else 0
        return self.server.open(path, size)

    @contextmanager
    def sqlite_copy(self, path: str, tables: list[str]) -> Iterator[str]:
        tmp = tempfile.mkdtemp(prefix="agentbase-sqlite-")  # private (0700), removed after
        try:
            try:
                local = self.server.fetch_sqlite_copy(path, tmp, tables)
            except RemoteError as exc:
                raise SourceError(str(exc)) from None
            yield str(local)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
