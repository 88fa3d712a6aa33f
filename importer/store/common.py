"""What every part of the store shares: its errors, the deferred-commit token,
result rows, the embedded store's default place and the UTC clock."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path


class StoreError(Exception):
    """A problem with the store a user can act on (bad URL, newer schema...)."""


def default_db_path() -> Path:
    """``$AGENTBASE_HOME/agentbase.db``, else ``$XDG_DATA_HOME/agentbase/agentbase.db``
    (``~/.local/share/agentbase/agentbase.db``): the same file every run."""
    home = os.environ.get("AGENTBASE_HOME")
    if home:
        return Path(home).expanduser() / "agentbase.db"
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "agentbase" / "agentbase.db"


def now_utc() -> str:
    dt = datetime.now(timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{dt.microsecond // 1000:03d}"


class BackgroundFailure(StoreError):
    """Writes handed to the background failed (``cause``): every file whose
    commit had not landed (``Commit.done``) was rolled back or never sent,
    and must be run again."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


class Commit:
    """A deferred transaction's commit: ``done`` once it has landed."""

    __slots__ = ("done",)

    def __init__(self):
        self.done = False


class RowRejected(StoreError):
    """The engine refused a value of one file (too large, out of range...):
    that file fails with this message, the others go on."""


class RowTooLarge(RowRejected):
    """One value does not fit the engine's packet limit."""



class Row:
    """A result row addressable by position and by column name (as sqlite3.Row)."""

    __slots__ = ("_values", "_index")

    def __init__(self, values: tuple, index: dict[str, int]):
        self._values = values
        self._index = index

    def __getitem__(self, key):
        if isinstance(key, (int, slice)):
            return self._values[key]
        return self._values[self._index[key]]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._index)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._index, self._values))!r})"




def _row(values: dict) -> Row:
    return Row(tuple(values.values()), {name: i for i, name in enumerate(values)})
