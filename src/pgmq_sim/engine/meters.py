"""Readings taken around the worker phase: the server's cumulative counters and CPU, and this
process's CPU (at the start, once every worker has its session, at the end). Their differences are
what the messages cost; the workers' logins are counted apart from the run."""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from pgmq_sim.db.views import ServerViews
from pgmq_sim.dsn import reason
from pgmq_sim.engine.bounded import Signals, call_bounded
from pgmq_sim.errors import SimError
from pgmq_sim.model.facts import ServerCounters
from pgmq_sim.result.costs import CpuReading, Logins, ProcessCpu, ServerCost
from pgmq_sim.result.roles import RoleTransactions
from pgmq_sim.server import Server

TriggerTime = tuple[tuple[str, int, float], ...]  # per trigger function: calls, milliseconds


class Meters:
    def __init__(
        self,
        views: ServerViews,
        server: Server,
        signals: Signals,
        note: Callable[[str], None],
        tables: tuple[str, ...] = (),
    ) -> None:
        self._views = views
        self._tables = tables  # the queue's: their triggers are timed where the server counts them
        self._server = server
        self._signals = signals
        self._note = note  # the run's: in the report and the log
        self.server_before: ServerCounters | None = None
        self.server_cpu_before: float | None = None
        self.client_before: CpuReading | None = None
        self._connected: tuple[CpuReading, int, int] | None = None  # and the logins, the messages then
        self.client: ProcessCpu | None = None
        self._triggers_before: TriggerTime | None = None
        self.triggers: TriggerTime | None = None  # over the worker phase

    def start(self) -> None:
        """Just before the workers start."""
        self.server_before = self.counters()
        self.server_cpu_before = self.server_cpu()
        self._triggers_before = self._trigger_time()
        self.client_before = CpuReading.now()

    def connected(self, logins: int, messages: int) -> None:
        """Every worker of this process has had its first session (called on the run's loop)."""
        if self.client_before is not None and self._connected is None:
            self._connected = (CpuReading.now(), logins, messages)

    def stop(self, messages: int) -> None:
        """When the watch ends, with the workers still alive."""
        before = self.client_before
        if before is None or self.client is not None:
            return
        logins = None
        if self._connected is not None:
            reading, count, finished = self._connected
            logins = Logins(count, reading.cpu_s - before.cpu_s, reading.at - before.at, finished)
        self.client = before.until(CpuReading.now(), "local", messages, logins)

    def server_cost(self, messages: int, transactions: RoleTransactions | None = None) -> ServerCost | None:
        """After the workers stopped and before the audit reads the tables."""
        before = self.server_before
        after = self.counters() if before is not None else None
        if before is None or after is None:
            return None
        cpu_now = self.server_cpu()
        cpu = None if cpu_now is None or self.server_cpu_before is None else cpu_now - self.server_cpu_before
        after_triggers, before_triggers = self._trigger_time(), self._triggers_before
        if after_triggers is not None and before_triggers is not None:
            then = {name: (calls, ms) for name, calls, ms in before_triggers}
            self.triggers = tuple(
                (name, calls - then.get(name, (0, 0.0))[0], ms - then.get(name, (0, 0.0))[1])
                for name, calls, ms in after_triggers
            )
        return ServerCost.between(before, after, messages, cpu, transactions)

    def _trigger_time(self) -> TriggerTime | None:
        """Best effort: a role that may not read the catalog's triggers gets none."""
        if not self._tables:
            return None
        try:
            return call_bounded(lambda: self._views.trigger_time(self._tables), 30, self._signals, "triggers")
        except (SimError, psycopg.Error):
            return None

    def server_cpu(self) -> float | None:
        return self._server.cpu_seconds() if self._server.cpu_seconds is not None else None

    def counters(self) -> ServerCounters | None:
        try:
            return call_bounded(self._views.counters, 30, self._signals, "server statistics")
        except (SimError, psycopg.Error) as exc:
            self._note(f"server statistics not read: {reason(exc, self._server.dsn)}")
            return None
