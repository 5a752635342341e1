"""Readings taken around the worker phase: the server's cumulative counters and CPU, and this
process's CPU. Their differences are what the messages cost."""

from __future__ import annotations

from collections.abc import Iterable

import psycopg

from pgmq_sim.db.views import ServerViews
from pgmq_sim.dsn import reason
from pgmq_sim.engine.bounded import Signals, call_bounded
from pgmq_sim.errors import SimError
from pgmq_sim.model.facts import ServerCounters
from pgmq_sim.result.costs import CpuReading, ProcessCpu, ServerCost
from pgmq_sim.result.roles import RoleTransactions
from pgmq_sim.server import Server


class Meters:
    def __init__(self, views: ServerViews, server: Server, signals: Signals, notes: list[str]) -> None:
        self._views = views
        self._server = server
        self._signals = signals
        self._notes = notes
        self.server_before: ServerCounters | None = None
        self.server_cpu_before: float | None = None
        self.client_before: CpuReading | None = None
        self.client: ProcessCpu | None = None

    def start(self) -> None:
        """Just before the workers start."""
        self.server_before = self.counters()
        self.server_cpu_before = self.server_cpu()
        self.client_before = CpuReading.now()

    def stop(self, messages: int, ended: Iterable[tuple[str, float]] = ()) -> None:
        """When the watch ends, with the workers still alive (their threads' waits are counted);
        `ended`: the CPU of the run's threads that finished before (a producer that wrote all)."""
        if self.client_before is not None and self.client is None:
            self.client = self.client_before.until(CpuReading.now(ended), "local", messages)

    def server_cost(self, messages: int, transactions: RoleTransactions | None = None) -> ServerCost | None:
        """After the workers stopped and before the audit reads the tables."""
        before = self.server_before
        after = self.counters() if before is not None else None
        if before is None or after is None:
            return None
        cpu_now = self.server_cpu()
        cpu = None if cpu_now is None or self.server_cpu_before is None else cpu_now - self.server_cpu_before
        return ServerCost.between(before, after, messages, cpu, transactions)

    def server_cpu(self) -> float | None:
        return self._server.cpu_seconds() if self._server.cpu_seconds is not None else None

    def counters(self) -> ServerCounters | None:
        try:
            return call_bounded(self._views.counters, 30, self._signals, "server statistics")
        except (SimError, psycopg.Error) as exc:
            self._notes.append(f"server statistics not read: {reason(exc, self._server.dsn)}")
            return None
