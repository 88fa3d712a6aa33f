"""SQL dialects: how each engine spells the things that differ (DDL types,
upserts, placeholders, quoting). The rest of the code writes one SQL text
(``?`` placeholders, ``[name]`` quoting)."""

from __future__ import annotations

import re
from typing import Sequence


def split_default(abstract: str) -> tuple[str, str]:
    """``bool=1`` -> (``bool``, `` DEFAULT 1``): an abstract type may carry a numeric
    default, which rows inserted without the column (and rows already there when
    the column is added) take."""
    kind, sep, default = abstract.partition("=")
    if not sep:
        return abstract, ""
    return kind, f" DEFAULT {float(default) if '.' in default else int(default)}"


class Dialect:
    """How one SQL engine spells the things that differ."""

    name = "sqlite"
    types = {
        "pk": "INTEGER PRIMARY KEY",
        "int": "INTEGER",
        "bigint": "INTEGER",
        "bool": "INTEGER",
        "text": "TEXT",
        "json": "TEXT",
        "datetime": "TEXT",
        "decimal": "REAL",
        "float": "REAL",
    }

    def column_type(self, abstract: str) -> str:
        abstract, default = split_default(abstract)
        if abstract.startswith("str:"):
            return "TEXT" + default
        return self.types[abstract] + default

    def create_table(self, table: str, columns: list[tuple[str, str]], uniques: list[tuple[str, ...]]) -> str:
        parts = [f"[{name}] {self.column_type(kind)}" for name, kind in columns]
        parts += [f"UNIQUE ({', '.join(cols)})" for cols in uniques]
        return f"CREATE TABLE IF NOT EXISTS [{table}] (\n  " + ",\n  ".join(parts) + "\n)"

    def create_index(self, table: str, name: str, columns: Sequence[str]) -> str:
        return f"CREATE INDEX IF NOT EXISTS [{name}] ON [{table}] ({', '.join(columns)})"

    def upsert(self, table: str, columns: Sequence[str], key: Sequence[str]) -> str:
        cols = ", ".join(f"[{c}]" for c in columns)
        marks = ", ".join("?" for _ in columns)
        updates = ", ".join(f"[{c}] = excluded.[{c}]" for c in columns if c not in key)
        return (
            f"INSERT INTO [{table}] ({cols}) VALUES ({marks}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
        )

    def insert(self, table: str, columns: Sequence[str]) -> str:
        cols = ", ".join(f"[{c}]" for c in columns)
        marks = ", ".join("?" for _ in columns)
        return f"INSERT INTO [{table}] ({cols}) VALUES ({marks})"

    def concat(self, *exprs: str) -> str:
        """SQL joining the text of ``exprs``."""
        return "(" + " || ".join(exprs) + ")"

    def mark_changed(self) -> str:
        """One session (parameter) into the change log with the counter's number (store/sqlite.py)."""
        return ("INSERT INTO _changes (session_id, seq) SELECT ?, n FROM _change_counter WHERE id = 1 "
                "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq")


class MariaDBDialect(Dialect):
    """MariaDB/MySQL: utf8mb4 with binary collation (ids and paths compare
    exactly, as in SQLite), DATETIME(3), LONGTEXT for JSON, DOUBLE for money
    (DECIMAL(12,8) would round real sub-cent costs such as 7.77e-09 away)."""

    name = "mariadb"
    types = {
        "pk": "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY",
        "int": "INT",
        "bigint": "BIGINT",
        "bool": "TINYINT",
        "text": "LONGTEXT",
        "json": "LONGTEXT",
        "datetime": "DATETIME(3)",
        "decimal": "DOUBLE",
        "float": "DOUBLE",
    }
    table_options = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin ROW_FORMAT=DYNAMIC"

    def column_type(self, abstract: str) -> str:
        abstract, default = split_default(abstract)
        if abstract.startswith("str:"):
            return f"VARCHAR({int(abstract[4:])})" + default
        return self.types[abstract] + default

    def create_table(self, table, columns, uniques):
        return super().create_table(table, columns, uniques) + self.table_options

    def upsert(self, table: str, columns: Sequence[str], key: Sequence[str]) -> str:
        cols = ", ".join(f"[{c}]" for c in columns)
        marks = ", ".join("?" for _ in columns)
        updates = ", ".join(f"[{c}] = VALUES([{c}])" for c in columns if c not in key)
        return f"INSERT INTO [{table}] ({cols}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {updates}"

    def insert(self, table: str, columns: Sequence[str]) -> str:
        cols = ", ".join(f"[{c}]" for c in columns)
        marks = ", ".join("?" for _ in columns)
        return f"INSERT INTO [{table}] ({cols}) VALUES ({marks})"

    def concat(self, *exprs: str) -> str:
        return f"CONCAT({', '.join(exprs)})"  # || is OR in MariaDB's default mode

    def mark_changed(self) -> str:
        return ("INSERT INTO _changes (session_id, seq) SELECT ?, n FROM _change_counter WHERE id = 1 "
                "ON DUPLICATE KEY UPDATE seq = VALUES(seq)")

    _BRACKETS = re.compile(r"\[(\w+)\]")

    def translate(self, sql: str) -> str:
        """The project's SQL text -> pymysql's: backquotes, %s placeholders."""
        sql = self._BRACKETS.sub(r"`\1`", sql)
        return sql.replace("%", "%%").replace("?", "%s")

