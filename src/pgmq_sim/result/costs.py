"""What messages cost: the server's share (from its own cumulative statistics, read before and after)
and the client's (CPU of the tool's processes). A load generator that reports its own cost can say
when it, not the server, set the pace."""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgmq_sim.model.facts import ServerCounters, StatementCounters
from pgmq_sim.result.roles import RoleCosts, RoleTransactions, statement_shares

TOP_STATEMENTS = 5


def per_message(value: float | None, messages: int, scale: float = 1.0) -> float | None:
    return None if value is None or messages <= 0 else round(value * scale / messages, 3)


def statement_json(s: StatementCounters, messages: int) -> dict[str, Any]:
    return {
        "query": s.query,
        "calls": s.calls,
        "calls_per_msg": per_message(s.calls, messages),
        "mean_ms": round(s.exec_ms / s.calls, 4) if s.calls else None,
        "exec_ms_total": round(s.exec_ms, 1),
        "rows": s.rows,
        "blks_hit_per_msg": per_message(s.blks_hit, messages),
        "blks_read_per_msg": per_message(s.blks_read, messages),
        "wal_bytes_per_msg": per_message(s.wal_bytes, messages),
    }


@dataclass(frozen=True)
class ServerCost:
    """The server's counters over a window, and the messages finished in it."""

    messages: int
    wal_bytes: int
    database: dict[str, int]
    wal: dict[str, int] | None
    io: dict[str, int] | None
    cpu_s: float | None  # the server's processes, where they are ours to read (embedded)
    statements: tuple[StatementCounters, ...] = ()
    notes: tuple[str, ...] = ()
    roles: RoleCosts | None = None

    @classmethod
    def between(
        cls,
        before: ServerCounters,
        after: ServerCounters,
        messages: int,
        cpu_s: float | None,
        transactions: RoleTransactions | None = None,
    ) -> ServerCost:
        def diff(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, int] | None:
            return None if a is None or b is None else {k: b[k] - a[k] for k in a}

        statements: list[StatementCounters] = []
        read = before.statements is not None and after.statements is not None
        if before.statements is not None and after.statements is not None:
            for queryid, now in after.statements.items():
                during = now.minus(before.statements.get(queryid))
                if during.calls > 0:
                    statements.append(during)
        statements.sort(key=lambda s: s.exec_ms, reverse=True)
        notes = tuple(n for n in (after.statements_note,) if n)
        database = diff(before.database, after.database) or {}
        ended = database.get("xact_commit", 0) + database.get("xact_rollback", 0) if database else None
        roles = RoleCosts(messages, transactions, statement_shares(statements) if read else None, ended)
        return cls(
            messages,
            after.wal_lsn - before.wal_lsn,
            database,
            diff(before.wal, after.wal),
            diff(before.io, after.io),
            cpu_s,
            tuple(statements[:TOP_STATEMENTS]),
            notes,
            roles,
        )

    @property
    def wal_bytes_per_msg(self) -> float | None:
        return per_message(self.wal_bytes, self.messages)

    @property
    def cpu_us_per_msg(self) -> float | None:
        return per_message(self.cpu_s, self.messages, 1e6)

    @property
    def commits_per_msg(self) -> float | None:
        return per_message(self.database.get("xact_commit"), self.messages)

    @property
    def blocks_per_msg(self) -> float | None:
        """Buffers read per message, from the cache or not."""
        return per_message(
            self.database.get("blks_hit", 0) + self.database.get("blks_read", 0), self.messages
        )

    def as_json(self) -> dict[str, Any]:
        m, db = self.messages, self.database
        written = db.get("tup_inserted", 0) + db.get("tup_updated", 0) + db.get("tup_deleted", 0)
        return {
            "messages": m,
            "wal_bytes_per_msg": self.wal_bytes_per_msg,
            "commits_per_msg": self.commits_per_msg,
            "blks_hit_per_msg": per_message(db.get("blks_hit"), m),
            "blks_read_per_msg": per_message(db.get("blks_read"), m),
            "rows_written_per_msg": per_message(written, m),
            "wal_records_per_msg": per_message(self.wal["records"], m) if self.wal else None,
            "wal_fpi_per_msg": per_message(self.wal["fpi"], m) if self.wal else None,
            "io_per_msg": {k: per_message(v, m) for k, v in self.io.items()} if self.io else None,
            "cpu_us_per_msg": self.cpu_us_per_msg,
            "totals": {
                "wal_bytes": self.wal_bytes,
                "cpu_s": self.cpu_s,
                **db,
                "wal": self.wal,
                "io": self.io,
            },
            "statements": [statement_json(s, m) for s in self.statements],
            "roles": self.roles.as_json() if self.roles else None,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Logins:
    """The window in which a process's workers opened their first sessions, apart from the run that
    follows: a SCRAM login costs the client about 2 ms of CPU, which a thousand workers pay once
    and a run of a few seconds would otherwise spread over every message."""

    count: int  # the workers' first sessions
    cpu_s: float
    elapsed_s: float
    messages: int  # finished meanwhile (by workers already connected)

    def as_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "cpu_s": round(self.cpu_s, 3),
            "cpu_ms_each": round(self.cpu_s * 1000 / self.count, 3) if self.count else None,
            "seconds": round(self.elapsed_s, 3),
            "messages": self.messages,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Logins:
        return cls(int(data["count"]), float(data["cpu_s"]), float(data["seconds"]), int(data["messages"]))


@dataclass(frozen=True)
class ProcessCpu:
    """One client process's CPU over the worker phase (its workers' logins included), and apart:
    the logins' window, and the run after it."""

    runner: str  # "local", or a worker process (p1@host)
    cpu_s: float
    elapsed_s: float
    messages: int
    run_delay_s: float | None = None  # runnable but waiting for a CPU (the server had it)
    logins: Logins | None = None  # None: nothing connected here, or not all workers did

    @property
    def core_share(self) -> float:
        return self.cpu_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def run_cpu_s(self) -> float:
        """CPU once every worker had its session."""
        return self.cpu_s - (self.logins.cpu_s if self.logins else 0.0)

    @property
    def run_messages(self) -> int:
        return self.messages - (self.logins.messages if self.logins else 0)

    @property
    def cpu_us_per_msg(self) -> float | None:
        """The run's CPU per message, once every worker had its session (the logins apart)."""
        return per_message(self.run_cpu_s, self.run_messages, 1e6)

    def as_json(self) -> dict[str, Any]:
        return {
            "runner": self.runner,
            "cpu_s": round(self.cpu_s, 3),
            "cpu_us_per_msg": self.cpu_us_per_msg,
            "core_share": round(self.core_share, 3),
            "messages": self.messages,
            "run_delay_s": None if self.run_delay_s is None else round(self.run_delay_s, 3),
            "elapsed_s": round(self.elapsed_s, 3),
            "logins": self.logins.as_json() if self.logins else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], runner: str) -> ProcessCpu:
        """A worker process's report of itself, named by the master."""
        delay, logins = data.get("run_delay_s"), data.get("logins")
        return cls(
            runner,
            float(data["cpu_s"]),
            float(data["elapsed_s"]),
            int(data["messages"]),
            None if delay is None else float(delay),
            None if logins is None else Logins.from_json(logins),
        )


@dataclass(frozen=True)
class ClientCost:
    """The tool's own CPU over the worker phase: the main process (producer, housekeeping, and the
    workers when they run in it) and, distributed, each worker process. Per message: the run once
    every worker had its session; the logins are counted apart."""

    processes: tuple[ProcessCpu, ...] = field(default_factory=tuple)

    @property
    def cpu_s(self) -> float:
        return sum(p.cpu_s for p in self.processes)

    @property
    def messages(self) -> int:
        return max((p.messages for p in self.processes), default=0)

    @property
    def cpu_us_per_msg(self) -> float | None:
        run_messages = max((p.run_messages for p in self.processes), default=0)
        return per_message(sum(p.run_cpu_s for p in self.processes), run_messages, 1e6)

    @property
    def logins(self) -> Logins | None:
        """Every process's logins, summed (the longest window)."""
        found = [p.logins for p in self.processes if p.logins is not None]
        if not found:
            return None
        return Logins(
            sum(x.count for x in found),
            sum(x.cpu_s for x in found),
            max(x.elapsed_s for x in found),
            sum(x.messages for x in found),
        )

    @property
    def local(self) -> ProcessCpu | None:
        """This process, the one that ran the run (and its workers when they run in it)."""
        return next((p for p in self.processes if p.runner == "local"), None)

    @property
    def busiest(self) -> ProcessCpu | None:
        return max(self.processes, key=lambda p: p.core_share, default=None)

    def as_json(self) -> dict[str, Any]:
        busiest, logins = self.busiest, self.logins
        return {
            "cpu_s": round(self.cpu_s, 3),
            "cpu_us_per_msg": self.cpu_us_per_msg,
            "logins": logins.as_json() if logins else None,
            "core_share_max": round(busiest.core_share, 3) if busiest else None,
            "processes": [p.as_json() for p in self.processes],
        }


@dataclass(frozen=True)
class CpuReading:
    """This process's CPU, and its threads' run-queue wait, at one moment."""

    at: float
    cpu_s: float
    run_delay_s: float | None

    @classmethod
    def now(cls) -> CpuReading:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return cls(time.monotonic(), usage.ru_utime + usage.ru_stime, run_delay_s())

    def until(
        self, later: CpuReading, runner: str, messages: int, logins: Logins | None = None
    ) -> ProcessCpu:
        delay = None
        if self.run_delay_s is not None and later.run_delay_s is not None:
            delay = max(0.0, later.run_delay_s - self.run_delay_s)  # a thread that ended took its own
        return ProcessCpu(runner, later.cpu_s - self.cpu_s, later.at - self.at, messages, delay, logins)


def run_delay_s() -> float | None:
    """Seconds this process's live threads spent runnable but not running (Linux schedstat)."""
    total = 0
    try:
        for task in os.scandir("/proc/self/task"):
            fields = Path(task.path, "schedstat").read_text().split()
            total += int(fields[1])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


@dataclass(frozen=True)
class BystanderResult:
    """A neighbour's latency beside the queue, and alone (before the workers started and after they
    stopped); whether the two can be compared is judged in verdicts/bystander."""

    rate: float
    transactions: int
    errors: int
    alone_ms: dict[str, float | None]  # both alone windows
    beside_ms: dict[str, float | None]  # while the queue ran
    before_ms: dict[str, float | None] | None = None
    after_ms: dict[str, float | None] | None = None  # None: not measured (a stop, a lost server)

    def as_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "transactions": self.transactions,
            "errors": self.errors,
            "latency_ms": self.beside_ms,
            "alone_latency_ms": self.alone_ms,
            "alone_before_ms": self.before_ms,
            "alone_after_ms": self.after_ms,
        }
