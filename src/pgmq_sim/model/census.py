"""The server's settings that shape a queue, read before the run with where each is set: autovacuum
(the server's switch, the queue tables' own reloptions, the thresholds and the naptime),
synchronous_commit, the connection slots and who holds them, and whether pg_stat_statements can
be read. Plain values: the table and drift verdicts name them, the report shows them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.quantities import count_text
from pgmq_sim.model.timeouts import set_where

CENSUS = (
    "autovacuum",
    "track_counts",  # autovacuum needs it: off, no table is ever vacuumed by it
    "autovacuum_naptime",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_insert_threshold",
    "autovacuum_vacuum_insert_scale_factor",
    "synchronous_commit",
    "fsync",
    "track_functions",  # whether the queue's triggers are timed (pg_stat_user_functions)
    "max_connections",
    "superuser_reserved_connections",
)
OFF = ("off", "false", "0", "no")
SHOWN_HOLDERS = 3


@dataclass(frozen=True)
class CensusSetting:
    name: str
    value: str  # as SHOW says it: off, 1min, 0.2
    source: str  # pg_settings.source
    file: str | None = None  # where the role may see it (a superuser, pg_read_all_settings)
    line: int | None = None


@dataclass(frozen=True)
class TableOptions:
    """A queue table's own storage options (pg_class.reloptions: autovacuum_enabled=false,
    fillfactor=50) and its triggers, whose writes every enqueue, claim and completion pays."""

    table: str
    options: tuple[str, ...]
    triggers: tuple[str, ...] = ()

    def option(self, name: str) -> str | None:
        return next((o.partition("=")[2] for o in self.options if o.partition("=")[0] == name), None)


@dataclass(frozen=True)
class SlotHolder:
    """Client sessions on the server by application and role, as pg_stat_activity shows them."""

    application: str
    role: str
    count: int
    hidden: int = 0  # of them, sessions this role sees only by pid, role and application

    def said(self) -> str:
        app = f"application '{self.application}'" if self.application else "no application_name"
        return f"{count_text(self.count)} by {app} as role {self.role or '(not shown)'}"


@dataclass(frozen=True)
class SlotCensus:
    """Who holds the server's connection slots now (the census's own session left out)."""

    holders: tuple[SlotHolder, ...]  # most first
    role: str  # the role that looked
    may_see_all: bool  # superuser or pg_read_all_stats

    @property
    def used(self) -> int:
        return sum(h.count for h in self.holders)

    def said(self, role: str | None = None) -> str:
        """'97 client session(s): 95 by application 'hog' as role bob, 2 by application 'psql' as role
        q'; given a role, its sessions only."""
        holders = [h for h in self.holders if role is None or h.role == role]
        if not holders:
            return "no other client session seen" + (f" of role {role}" if role else "")
        shown = ", ".join(h.said() for h in holders[:SHOWN_HOLDERS])
        rest = sum(h.count for h in holders[SHOWN_HOLDERS:])
        more = f", {count_text(rest)} more" if rest else ""
        unseen = sum(h.hidden for h in holders)
        hidden = (
            f"; {count_text(unseen)} of them shown by role and application only (this role has no"
            " pg_read_all_stats)"
            if unseen and not self.may_see_all
            else ""
        )
        return f"{count_text(sum(h.count for h in holders))} client session(s): {shown}{more}{hidden}"

    def as_json(self) -> dict[str, Any]:
        return {
            "used": self.used,
            "holders": [h.__dict__ for h in self.holders],
            "role": self.role,
            "may_see_all": self.may_see_all,
        }


@dataclass(frozen=True)
class ServerCensus:
    """The settings a session of this role gets in this database, the queue tables' options, the
    connection slots and who holds them, read before the run (its cost: read_ms)."""

    role: str
    database: str
    settings: tuple[CensusSetting, ...]
    tables: tuple[TableOptions, ...]
    slots: SlotCensus
    stat_statements: str  # readable; not installed in this database; not readable: <the server's words>
    read_ms: float

    def get(self, name: str) -> CensusSetting | None:
        return next((s for s in self.settings if s.name == name), None)

    def said(self, name: str) -> str:
        """'autovacuum = off (the server's configuration file (/…/postgresql.auto.conf:3))'"""
        s = self.get(name)
        if s is None:
            return f"{name} not read"
        return f"{s.name} = {s.value} ({self.where(s)})"

    def _value(self, name: str) -> str:
        """A setting's value, with where it is set when that is not the server's default."""
        s = self.get(name)
        if s is None:
            return "?"
        return s.value if s.source == "default" else f"{s.value} ({self.where(s)})"

    def where(self, s: CensusSetting) -> str:
        return set_where(s.source, s.file, s.line, self.role, self.database)

    def _off(self, name: str) -> bool:
        s = self.get(name)
        return s is not None and s.value.lower() in OFF

    def autovacuum_off(self) -> str | None:
        """What keeps autovacuum from the queue's tables, naming the setting and where it is set or the
        table's own reloption; None: autovacuum may run on them."""
        found = [self.said(name) for name in ("autovacuum", "track_counts") if self._off(name)]
        found += [
            f"table {t.table}'s own reloption autovacuum_enabled={value}"
            for t in self.tables
            if (value := t.option("autovacuum_enabled")) is not None and value.lower() in OFF
        ]
        return "; ".join(found) or None

    def vacuum_thresholds(self) -> str:
        """When autovacuum vacuums a queue table, and how often it looks: the server's thresholds, or
        the table's own where its reloptions set them."""
        base, scale, looks = (
            self._value(n)
            for n in ("autovacuum_vacuum_threshold", "autovacuum_vacuum_scale_factor", "autovacuum_naptime")
        )
        said = (
            f"a table is vacuumed once {base} + {scale} x its rows are dead; autovacuum looks every {looks}"
        )
        vacuum_options = {t.table: [o for o in t.options if "autovacuum_" in o] for t in self.tables}
        own = [f"{table}: {', '.join(options)}" for table, options in vacuum_options.items() if options]
        return said + (f" (the table's own: {'; '.join(own)})" if own else "")

    def synchronous_commit_off(self) -> str | None:
        """Commits that do not wait for the WAL flush: each one's cost and latency are below a durable
        commit's. None: they wait."""
        s = self.get("synchronous_commit")
        if s is None or s.value.lower() not in ("off", "local"):
            return None
        return (
            f"{self.said('synchronous_commit')}: commits do not wait for the WAL flush, so the latency and"
            " cost per message are below what a durable commit pays"
        )

    def text(self) -> str:
        """The census in one paragraph: what shapes the queue, with where it is set."""
        vacuum = self.autovacuum_off()
        parts = [
            f"autovacuum off: {vacuum}" if vacuum else f"autovacuum on: {self.vacuum_thresholds()}",
            self.synchronous_commit_off() or self.said("synchronous_commit"),
            f"{self.said('max_connections')}, {self.slots.said()}",
            f"pg_stat_statements {self.stat_statements}",
        ]
        options = [f"{t.table} ({', '.join(t.options)})" for t in self.tables if t.options]
        if options:
            parts.append("table options: " + "; ".join(options))
        triggers = [f"{t.table} ({', '.join(t.triggers)})" for t in self.tables if t.triggers]
        if triggers:
            parts.append("triggers (each write of the queue runs them): " + "; ".join(triggers))
        return "; ".join(parts)

    def as_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "database": self.database,
            "settings": {
                s.name: {
                    "value": s.value,
                    "source": s.source,
                    "file": s.file,
                    "line": s.line,
                    "set_by": self.where(s),
                }
                for s in self.settings
            },
            "tables": {t.table: list(t.options) for t in self.tables},
            "triggers": {t.table: list(t.triggers) for t in self.tables if t.triggers},
            "autovacuum_off": self.autovacuum_off(),
            "synchronous_commit_off": self.synchronous_commit_off(),
            "connection_slots": self.slots.as_json(),
            "pg_stat_statements": self.stat_statements,
            "read_ms": round(self.read_ms, 2),
            "summary": self.text(),
        }
