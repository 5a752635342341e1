"""The server's timeouts as the run's role has them, read before the run (pg_settings): each one's
value and where it was set (the role, the database, the role in the database, the configuration
file, the default). Plain values: the check judges them against the run, the result keeps them,
and a verdict names them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

TIMEOUTS = (
    "idle_in_transaction_session_timeout",
    "transaction_timeout",  # PostgreSQL 17 and later
    "statement_timeout",
    "lock_timeout",
    "idle_session_timeout",
)
UNIT_MS = {"ms": 1, "s": 1000, "min": 60_000}
PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_$]*")


@dataclass(frozen=True)
class ServerSetting:
    name: str
    ms: int  # 0: off
    shown: str  # as SHOW says it: 5ms, 30s, 0
    source: str  # pg_settings.source: default, configuration file, database, user, database user, client...
    file: str | None = None  # where the role may see it (a superuser, pg_read_all_settings)
    line: int | None = None

    @classmethod
    def read(cls, name: str, setting: int, unit: str | None, shown: str, source: str,
             file: str | None, line: int | None) -> ServerSetting:  # fmt: skip
        return cls(name, int(setting) * UNIT_MS.get(unit or "ms", 1), shown, source, file, line)

    @property
    def on(self) -> bool:
        return self.ms > 0

    def as_json(self) -> dict[str, Any]:
        return {
            "value": self.shown,
            "ms": self.ms,
            "source": self.source,
            "file": self.file,
            "line": self.line,
        }


@dataclass(frozen=True)
class ServerTimeouts:
    """The timeouts a session of this role in this database gets, and where each comes from."""

    role: str
    database: str
    settings: tuple[ServerSetting, ...]

    def get(self, name: str) -> ServerSetting | None:
        return next((s for s in self.settings if s.name == name), None)

    def where(self, s: ServerSetting) -> str:
        """Where the setting comes from, in the words that change it."""
        return set_where(s.source, s.file, s.line, self.role, self.database)

    def raise_it(self, s: ServerSetting, value: str) -> str:
        """The statement that gives the run's role another value, above where it is set now."""
        role, database = quoted(self.role), quoted(self.database)
        if s.source == "client":
            return f"drop {s.name} from the connection's options (PGOPTIONS, or options= in -dsn)"
        scope = f" IN DATABASE {database}" if s.source == "database user" else ""
        return f"ALTER ROLE {role}{scope} SET {s.name} = '{value}'"

    def set_there(self, s: ServerSetting, value: str) -> str | None:
        """The statement that changes the setting where it is set ('ALTER DATABASE q SET
        statement_timeout = '1s''), where a statement does."""
        where = self.where(s)
        return f"{where} {s.name} = '{value}'" if where.startswith("ALTER ") else None

    def said(self, s: ServerSetting) -> str:
        """'idle_in_transaction_session_timeout = 5ms (ALTER ROLE queue SET)'"""
        return f"{s.name} = {s.shown} ({self.where(s)})"

    def text(self) -> str:
        """The timeouts that are on, with where each is set; 'none set' otherwise."""
        on = [self.said(s) for s in self.settings if s.on]
        return "; ".join(on) if on else f"none set for role {self.role} (all {len(self.settings)} are off)"

    def as_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "database": self.database,
            "settings": {s.name: s.as_json() | {"set_by": self.where(s)} for s in self.settings},
        }


def set_where(source: str, file: str | None, line: int | None, role: str, database: str) -> str:
    """Where a setting comes from (pg_settings.source, sourcefile, sourceline), in the words that
    change it: 'ALTER ROLE q SET', 'the server's configuration file (.../postgresql.auto.conf:3)'."""
    if source == "configuration file":
        at = f"{file}:{line}" if file else "postgresql.conf, or ALTER SYSTEM's postgresql.auto.conf"
        return f"the server's configuration file ({at})"
    return {
        "default": "the server's default",
        "user": f"ALTER ROLE {quoted(role)} SET",
        "database": f"ALTER DATABASE {quoted(database)} SET",
        "database user": f"ALTER ROLE {quoted(role)} IN DATABASE {quoted(database)} SET",
        "client": "the connection's options (PGOPTIONS, or options= in -dsn)",
        "command line": "the server's command line",
        "environment variable": "the server's environment",
        "override": "the server itself (fixed at its start)",
    }.get(source, f"source: {source}")


def quoted(name: str) -> str:
    """An identifier as SQL takes it."""
    return name if PLAIN_NAME.fullmatch(name) else '"' + name.replace('"', '""') + '"'


def shown_ms(ms: float) -> str:
    """A duration as a setting's value: 250ms, 2s, 5min."""
    if ms >= 60_000 and ms % 60_000 == 0:
        return f"{int(ms // 60_000)}min"
    if ms >= 1000 and ms % 1000 == 0:
        return f"{int(ms // 1000)}s"
    return f"{int(ms)}ms"
