"""The worker processes as the master knows them: who joined, who is ready, what each reported, who
is gone, and the counts of the gone ones reconciled from the server."""

from __future__ import annotations

import math
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from locust.env import Environment
from locust.runners import STATE_MISSING, MasterRunner

from pgmq_sim.distributed import messages as m
from pgmq_sim.distributed.producing import MasterDraws, ProducerShare, apply_deltas
from pgmq_sim.dsn import reason
from pgmq_sim.engine.bounded import call_bounded
from pgmq_sim.engine.state import RunState
from pgmq_sim.errors import ServerLostError, SimError
from pgmq_sim.result.costs import ProcessCpu
from pgmq_sim.result.enqueues import EnqueueTally
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.stats import WorkerCounters


@dataclass
class Member:
    """One worker process."""

    client_id: str
    hello: m.Hello
    runner: str = ""
    names: list[str] = field(default_factory=list)
    ready: bool = False
    final: bool = False
    lost: str | None = None  # why it is gone, if it is
    in_doubt: int = 0
    busy: int = 0  # its workers holding a message, as last reported
    cpu: ProcessCpu | None = None  # its own CPU since its workers started, as last reported
    producing: ProducerShare | None = None  # its producer sessions in a spread run
    enqueues: dict[str, Any] | None = None  # their figures, as last reported
    tally: EnqueueTally | None = None  # their enqueue account, as last reported in full

    @property
    def order(self) -> tuple[float, str, int]:
        return (
            self.hello.process if self.hello.process is not None else math.inf,
            self.hello.host,
            self.hello.pid,
        )


class Members:
    """Takes the worker processes' messages on the master and keeps the run's counts from them."""

    def __init__(
        self, state: RunState, master: MasterRunner, children: list[subprocess.Popen[bytes]]
    ) -> None:
        self.state = state
        self.master = master
        self.children = children
        self.by_id: dict[str, Member] = {}
        self.failure: tuple[str, bool] | None = None  # (line, server lost) from a worker process
        self.last_count_change = time.monotonic()
        self.reconciled = False
        self.draws: MasterDraws | None = None  # a spread run's arrivals, drawn again on the master
        for kind, handler in (
            (m.HELLO, self._on_hello),
            (m.READY, self._on_ready),
            (m.REPORT, self._on_report),
            (m.FAILED, self._on_failed),
        ):
            master.register_message(kind, handler)

    def __iter__(self) -> Any:
        return iter(list(self.by_id.values()))

    def __len__(self) -> int:
        return len(self.by_id)

    def joined(self) -> list[Member]:
        return sorted(self.by_id.values(), key=lambda member: member.order)

    # -- their messages ---------------------------------------------------------------------------

    def _on_hello(self, environment: Environment, msg: Any, **_: Any) -> None:
        if msg.node_id not in self.by_id and not self.state.started:
            self.by_id[msg.node_id] = Member(msg.node_id, m.Hello.from_data(msg.data))

    def _on_ready(self, environment: Environment, msg: Any, **_: Any) -> None:
        member = self.by_id.get(msg.node_id)
        if member is not None:
            member.ready = True

    def _on_failed(self, environment: Environment, msg: Any, **_: Any) -> None:
        state = self.state
        member = self.by_id.get(msg.node_id)
        text, lost = str(msg.data["error"]), bool(msg.data.get("lost"))
        where = member.runner if member is not None and member.runner else "a worker process"
        if self.failure is None:
            self.failure = (f"{where}: {text}", lost)
        if state.started and not state.stop.is_set():
            state.errors.report(where, ServerLostError(text) if lost else SimError(text))

    def _on_report(self, environment: Environment, msg: Any, **_: Any) -> None:
        state = self.state
        member = self.by_id.get(msg.node_id)
        if member is None or member.final:
            return
        data = msg.data
        for counters in data["workers"]:
            stats = state.stats_by_name.get(counters["name"])
            if stats is not None:
                stats.set_counters(counters)
                encoded = (data.get("histograms") or {}).get(stats.name)
                if encoded:
                    m.apply_histograms(stats, encoded)
        e2e = LatencyHistogram.decode(data["e2e"]) if data.get("e2e") else None
        if data["count"]:
            state.timeline.processed_batch(state.clock(), int(data["count"]), e2e)
        for met in data.get("reasons", []):  # the server's reasons its workers met, placed at the report
            reason = state.timeline.reasons.relayed(state.clock(), tuple(met))
            if met[5]:
                state.timeline.lost(state.clock(), outage=not reason.policy)
        member.in_doubt = int(data.get("in_doubt", 0))
        member.busy = int(data.get("busy", 0))
        if data.get("cpu"):
            member.cpu = ProcessCpu.from_json(data["cpu"], member.runner)
            state.process_cpu = [joined.cpu for joined in self.joined() if joined.cpu is not None]
        if data.get("enqueue"):
            self._take_enqueues(member, data["enqueue"])
        member.final = bool(data["final"])
        self.recount()

    def _take_enqueues(self, member: Member, data: dict[str, Any]) -> None:
        """A producing process's figures: its seconds on the timeline, the enqueue account summed,
        the run's count the lowest msg_id any process still owes, less one."""
        state = self.state
        apply_deltas(state.timeline, data["deltas"])
        member.enqueues = data
        if data.get("tally"):
            member.tally = EnqueueTally.from_data(data["tally"])
            state.enqueues.become_sum([p.tally for p in self if p.tally is not None])
        self.count_produced()

    def count_produced(self) -> None:
        """The run's produced count from its producing processes (a lost one's owed arrivals are left
        out: they are written after the run, if below one that landed)."""
        state = self.state
        producing = [p for p in self.joined() if p.producing is not None]
        marks = [int(p.enqueues["mark"]) if p.enqueues else 1 for p in producing if not p.lost]
        if marks:
            state.produced.committed = min(marks) - 1
        lost = [int(p.enqueues["mark"]) if p.enqueues else 1 for p in producing if p.lost]
        state.produced.held_back = min(lost, default=None)
        state.produced.written = sum(int(p.enqueues["written"]) for p in producing if p.enqueues)
        if self.draws is not None and producing:
            reports = [p.enqueues or {} for p in producing]
            self.draws.follow(
                min(int(r.get("drawn", 0)) for r in reports), min(int(r.get("mark", 1)) for r in reports)
            )
        state.enqueue_runners = [
            (p.runner, p.producing.sessions, int(p.enqueues["written"]), int(p.enqueues["writes"]))
            for p in producing
            if p.enqueues and p.producing is not None
        ]

    def recount(self) -> None:
        state = self.state
        count = WorkerCounters.total(state.stats).finished  # finished, as in one process
        if count != state.counter.count:
            self.last_count_change = time.monotonic()
        state.counter.set_totals(count, sum(member.in_doubt for member in self.by_id.values()))

    # -- who is gone -------------------------------------------------------------------------------

    def gone(self, member: Member) -> str | None:
        """Why this process is gone (its exit, its heartbeat), or None."""
        number = member.hello.process
        if number is not None and number <= len(self.children):
            code = self.children[number - 1].poll()
            if code is not None:
                return f"pid {member.hello.pid} exited" + (
                    f" on signal {-code}" if code < 0 else f" with {code}"
                )
        client = self.master.clients.get(member.client_id)
        if client is None:
            return "it quit"
        if client.state == STATE_MISSING:
            return "no heartbeat from it for 3 s"
        return None

    def reconcile(self) -> None:
        """Counts of processes that died, from the journal (per worker name) or the server's count."""
        state = self.state
        lost = [member for member in self if member.lost]
        if self.reconciled or not lost:
            return
        self.reconciled = True
        names = [name for member in lost for name in member.names]
        by_name = state.stats_by_name
        before = WorkerCounters.total(state.stats).processed
        try:
            if state.settings.audit:
                counts = call_bounded(
                    lambda: state.db.journaled_per_worker(names), 30, state.signals, "journal counts"
                )
                for name in names:
                    by_name[name].processed = max(by_name[name].processed, counts.get(name, 0))
                how = "from the journal"
            else:
                remaining = call_bounded(state.db.remaining, 30, state.signals, "remaining count")
                missing = max(0, state.produced.committed - remaining - before)
                for i, name in enumerate(names):
                    by_name[name].processed += missing // len(names) + (1 if i < missing % len(names) else 0)
                how = "from the server's remaining count, spread over its workers (no journal with -no-audit)"
        except (SimError, psycopg.Error, InterruptedError) as exc:
            state.note(
                f"counts of lost worker processes not reconciled: {reason(exc, state.server.dsn)}",
                screen=False,
            )
            return
        added = WorkerCounters.total(state.stats).processed - before
        if added:
            state.timeline.processed_batch(state.clock(), added, None)
        runners = ", ".join(member.runner for member in lost)
        line = f"{added} completions of lost process(es) {runners} counted {how}"
        state.note(line, screen=False)
        self.recount()
