"""The YAML config file: which servers to collect from, and where to put the archive.

``load_config(path)`` reads and checks the file and returns a :class:`Config`.
The default location is ``$AGENTBASE_CONFIG``, else
``${XDG_CONFIG_HOME:-~/.config}/agentbase/config.yml``. Example (README, "The
config file")::

    database: mysql://agentbase@127.0.0.1/agentbase   # password from AGENTBASE_DB_PASSWORD
    timezone: Asia/Shanghai
    known_hosts: ~/.ssh/known_hosts
    servers:
      - name: macmini
        local: true
        state_dir: ~/.openclaw
      - name: ubuntu1
        host: 192.0.2.11
        user: shenwei
        identity_file: ~/.ssh/id_ed25519
        agents: [main, xingyao]

String values may use environment variables (``$VAR``, ``${VAR}``,
``${VAR:-default}``; ``$$`` is a literal ``$``); an unset variable without a
default is an error. Secrets never belong in the file: a ``password`` key, or a
database URL with a password written into it, is refused. The database
password comes from ``AGENTBASE_DB_PASSWORD``; SSH logins use the ssh agent or
key files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

DEFAULT_STATE_DIRS = ("~/.openclaw", "~/.clawdbot", "~/.moltbot")
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 60.0

_TOP_KEYS = {
    "database", "timezone", "known_hosts", "accept_new_host_keys", "ssh_config", "connect_timeout",
    "read_timeout", "snapshot", "agents", "servers", "serve", "prices", "follow_symlinks",
}
_SERVE_KEYS = {"password_env", "sql"}
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SERVER_KEYS = {"name", "local", "host", "port", "user", "identity_file", "state_dir", "paths", "agents",
                "timezone"}
_SECRET_KEYS = {"password", "passwd", "passphrase", "secret", "db_password", "database_password"}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_VAR_RE = re.compile(r"\$(?:\$|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")


class ConfigError(Exception):
    """A problem in the config file a user can fix; the message is one line."""


@dataclass
class ServeOptions:
    """The config file's ``serve:`` section, for ``agentbase serve``."""
    password_env: str | None = None  # the environment variable holding the explorer's password
    sql: bool = True  # False: no arbitrary SQL (canned queries stay)


@dataclass
class ServerConfig:
    name: str
    local: bool = False
    host: str | None = None
    port: int | None = None  # None: ~/.ssh/config's Port, else 22
    user: str | None = None  # None: ~/.ssh/config's User, else the local user name
    identity_file: str | None = None  # None: ~/.ssh/config's IdentityFile, the ssh agent, ~/.ssh/id_*
    state_dir: str | None = None  # None: ~/.openclaw (else ~/.clawdbot, ~/.moltbot)
    agents: list[str] | None = None  # None: every agent found
    paths: list[str] | None = None  # what to import there, of any kind (None: state_dir, else every default)
    timezone: str | None = None  # the zone its sources write local times in (None: this machine's)

    @property
    def state_dirs(self) -> tuple[str, ...]:
        """Where to look for the OpenClaw state dir, in order."""
        return (self.state_dir,) if self.state_dir else DEFAULT_STATE_DIRS


@dataclass
class Config:
    path: str
    servers: list[ServerConfig]
    database: str | None = None  # None: the embedded default store
    timezone: str | None = None  # None: the snapshot's default (this machine's zone)
    known_hosts: str = "~/.ssh/known_hosts"
    accept_new_host_keys: bool = False
    ssh_config: str = "~/.ssh/config"
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    snapshot: str | None = None  # None: snapshot.db beside a SQLite database, else beside the embedded store
    agents: list[str] | None = None  # default for servers without their own list
    serve: ServeOptions | None = None  # the serve: section (agentbase serve)
    prices: dict | None = None  # per-model price overrides: {model: {input_cost_per_token: ..., ...}}
    follow_symlinks: bool = False  # follow links that lead out of the trees named (default: not)

    def server(self, name: str) -> ServerConfig:
        for s in self.servers:
            if s.name == name:
                return s
        names = ", ".join(s.name for s in self.servers)
        raise ConfigError(f"{self.path}: no server named {name!r} (configured: {names})")


def default_config_path() -> Path:
    """``$AGENTBASE_CONFIG``, else ``${XDG_CONFIG_HOME:-~/.config}/agentbase/config.yml``."""
    env = os.environ.get("AGENTBASE_CONFIG")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "agentbase" / "config.yml"


def expand_vars(value: str, where: str, environ=None) -> str:
    """``$VAR``, ``${VAR}``, ``${VAR:-default}`` and ``$$`` in one string value."""
    env = os.environ if environ is None else environ

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("braced") or m.group("bare")
        if name in env:
            return env[name]
        if m.group("default") is not None:
            return m.group("default")
        raise ConfigError(f"{where}: environment variable {name} is not set")

    return _VAR_RE.sub(sub, value)


def _expand_all(value: Any, where: str) -> Any:
    if isinstance(value, str):
        return expand_vars(value, where)
    if isinstance(value, list):
        return [_expand_all(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _expand_all(v, f"{where}.{k}") for k, v in value.items()}
    return value


def _check_no_secrets(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and k.lower() in _SECRET_KEYS:
                raise ConfigError(
                    f"{where}.{k}: passwords do not belong in the config file; use AGENTBASE_DB_PASSWORD "
                    "for the database and the ssh agent or key files for servers"
                )
            _check_no_secrets(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_no_secrets(v, f"{where}[{i}]")


def _str(data: dict, key: str, where: str, default=None) -> str | None:
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{key}: expected a non-empty string")
    return value.strip()


def _bool(data: dict, key: str, where: str, default: bool = False) -> bool:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(f"{where}.{key}: expected true or false")
    return value


def _number(data: dict, key: str, where: str, default: float) -> float:
    value = data.get(key, default)
    if value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}.{key}: expected a number of seconds") from None
    if not 0 < number <= 86400:
        raise ConfigError(f"{where}.{key}: expected a number of seconds between 0 and 86400")
    return number


def _agents(data: dict, key: str, where: str) -> list[str] | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and _NAME_RE.match(v) for v in value):
        raise ConfigError(f"{where}.{key}: expected a list of agent ids, e.g. [main, xingyao]")
    return list(value)


def _paths(data: dict, key: str, where: str) -> list[str] | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}.{key}: expected a list of paths, e.g. [~/.openclaw, ~/.claude]")
    return [v.strip() for v in value]


def _server(data: Any, index: int) -> ServerConfig:
    where = f"servers[{index}]"
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping with at least a name")
    unknown = sorted(set(map(str, data)) - _SERVER_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_SERVER_KEYS))})")
    name = _str(data, "name", where)
    if name is None or not _NAME_RE.match(name):
        raise ConfigError(f"{where}.name: expected a server name of letters, digits, '.', '_' or '-'")
    where = f"server {name}"
    local = _bool(data, "local", where)
    host = _str(data, "host", where)
    if local and host:
        raise ConfigError(f"{where}: give either local: true or a host, not both")
    if not local and not host:
        raise ConfigError(f"{where}: give a host (or local: true)")
    port = data.get("port")
    if port is not None:
        try:
            port = int(port)
        except (TypeError, ValueError):
            port = -1
        if not 0 < port < 65536:
            raise ConfigError(f"{where}.port: expected a TCP port number")
    if data.get("paths") is not None and data.get("state_dir") is not None:
        raise ConfigError(f"{where}: give paths (they may include the OpenClaw state dir) or state_dir, not both")
    if local:
        for key in ("port", "user", "identity_file"):
            if data.get(key) is not None:
                raise ConfigError(f"{where}.{key}: only for remote servers (this one is local: true)")
    return ServerConfig(
        name=name, local=local, host=host, port=port, user=_str(data, "user", where),
        identity_file=_str(data, "identity_file", where), state_dir=_str(data, "state_dir", where),
        agents=_agents(data, "agents", where), paths=_paths(data, "paths", where),
        timezone=_timezone(_str(data, "timezone", where), f"{where}.timezone"),
    )


def _check_database(raw: str | None, where: str) -> None:
    if raw is None or "://" not in raw:
        return
    from .store import mask_url

    try:
        parts = urlsplit(raw)
        # mask_url also sees a password holding / # ? that urlsplit cuts short
        has_password = parts.password is not None or mask_url(raw) != raw
    except ValueError:
        raise ConfigError(f"{where}: not a valid database URL") from None
    if has_password and "$" not in (raw.partition("://")[2].rpartition("@")[0]):
        raise ConfigError(
            f"{where}: the database URL holds a password; remove it from the file and set "
            "AGENTBASE_DB_PASSWORD (or write ${VARIABLE} in its place)"
        )


def _timezone(name: str | None, where: str) -> str | None:
    if name is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"{where}: unknown time zone {name!r} (use an IANA name such as Asia/Shanghai)") from None
    return name


def _serve_options(raw: Any, where: str) -> ServeOptions:
    """The ``serve:`` section, checked before any ``$VAR`` is expanded (it names a variable; its value,
    the password, must never end up in the file or in a message)."""
    if raw is None:
        return ServeOptions()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping (password_env, sql)")
    for k in raw:
        if isinstance(k, str) and k.lower() in _SECRET_KEYS:
            raise ConfigError(f"{where}.{k}: the password does not belong in the config file; put it in an "
                              "environment variable and name that variable with password_env")
    unknown = sorted(set(map(str, raw)) - _SERVE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_SERVE_KEYS))})")
    name = raw.get("password_env")
    if name is not None and (not isinstance(name, str) or not _ENV_NAME_RE.match(name)):
        # the value is not repeated: it could be the password itself, written here by mistake
        raise ConfigError(f"{where}.password_env: expected the name of an environment variable "
                          "(letters, digits and _), not a password")
    return ServeOptions(password_env=name, sql=_bool(raw, "sql", where, True))


def load_serve_options(path: str | os.PathLike | None = None) -> ServeOptions:
    """The ``serve:`` section of the config file (default: :func:`default_config_path`; none there:
    the defaults). Only this section is read, so serving needs none of the servers' variables."""
    where, data = _config_data(path)
    if data is None:
        return ServeOptions()
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of keys (database, servers, serve, ...)")
    return _serve_options(data.get("serve"), f"{where}: serve")


def _config_data(path: str | os.PathLike | None) -> tuple[Path, Any]:
    """The config file's place and its YAML, read (None: no file at the default place, or an empty
    one); a file named that is missing, unreadable or not YAML is a ConfigError."""
    where = Path(path).expanduser() if path else default_config_path()
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        if path:
            raise ConfigError(f"no config file at {where}") from None
        return where, None
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {where}: {exc.strerror or exc}") from None
    import yaml  # (only when there is a file: PyYAML is a tenth of a start-up)

    try:
        return where, yaml.safe_load(text)
    except yaml.YAMLError:
        raise ConfigError(f"{where}: invalid YAML") from None


def load_price_overrides(path: str | os.PathLike | None = None) -> dict | None:
    """The ``prices:`` section of the config file (default: :func:`default_config_path`; none there:
    None), for imports that name their PATHs. Only this section is read."""
    where, data = _config_data(path)
    if not isinstance(data, dict):
        return None
    return _prices(data.get("prices"), f"{where}: prices")


def parse_config(data: Any, path: str = "<config>") -> Config:
    """Check a parsed YAML document and build the :class:`Config`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys (database, servers, ...)")
    _check_no_secrets(data, path)
    unknown = sorted(set(map(str, data)) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_TOP_KEYS))})")
    _check_database(data.get("database") if isinstance(data.get("database"), str) else None, f"{path}: database")
    serve = _serve_options(data.get("serve"), f"{path}: serve")
    data = _expand_all(data, path)
    servers_raw = data.get("servers")
    if servers_raw is None:
        servers_raw = []
    if not isinstance(servers_raw, list):
        raise ConfigError(f"{path}: servers: expected a list of servers")
    servers = [_server(s, i) for i, s in enumerate(servers_raw)]
    seen: set[str] = set()
    for s in servers:
        if s.name in seen:
            raise ConfigError(f"{path}: server name {s.name!r} is used twice")
        seen.add(s.name)
    if not servers:
        raise ConfigError(f"{path}: no servers configured (add a servers: list)")
    database = _str(data, "database", path)
    return Config(
        path=path,
        servers=servers,
        database=database,
        timezone=_timezone(_str(data, "timezone", path), f"{path}: timezone"),
        known_hosts=_str(data, "known_hosts", path, "~/.ssh/known_hosts"),
        accept_new_host_keys=_bool(data, "accept_new_host_keys", path),
        ssh_config=_str(data, "ssh_config", path, "~/.ssh/config"),
        connect_timeout=_number(data, "connect_timeout", path, DEFAULT_CONNECT_TIMEOUT),
        read_timeout=_number(data, "read_timeout", path, DEFAULT_READ_TIMEOUT),
        snapshot=_str(data, "snapshot", path),
        agents=_agents(data, "agents", path),
        serve=serve,
        prices=_prices(data.get("prices"), f"{path}: prices"),
        follow_symlinks=_bool(data, "follow_symlinks", path),
    )


def _prices(raw: Any, where: str) -> dict | None:
    if raw is None:
        return None
    from .prices import PriceError, parse_price_overrides

    try:
        return parse_price_overrides(raw, where)
    except PriceError as exc:
        raise ConfigError(str(exc)) from None


def load_config(path: str | os.PathLike | None = None) -> Config:
    """Read the config file at ``path`` (default: :func:`default_config_path`)."""
    import yaml

    where = Path(path).expanduser() if path else default_config_path()
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = "" if path else " (write one: see the README's config section, or pass --config)"
        raise ConfigError(f"no config file at {where}{hint}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {where}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{where}: {problem}{at}") from None
    return parse_config(data, str(where))
