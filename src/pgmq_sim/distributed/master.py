"""The master of a distributed run: the usual run (check, prepare, produce, watch, halt, collect)
with the queue workers in other processes, on this host or others, over Locust's runners.

The producer, the audit, table health and the report stay here, once. Worker processes report
their counters every REPORT_S and their HDR histograms every few reports; the master merges them
(histograms merge exactly) and places each report's completions on its own timeline. A process
that dies (its exit, or Locust's heartbeat marking it missing) leaves its last commits unreported:
the master asks the server (`remaining`) to know the run is done, and the journal, per worker
name, for that process's true totals.
"""

from __future__ import annotations

import math
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg
from locust import events
from locust.env import Environment
from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_STOPPED, MasterRunner
from rich.console import Console

from pgmq_sim.distributed import messages as m
from pgmq_sim.distributed.options import DistributedOptions, distributed_options
from pgmq_sim.errors import ServerLostError, SimError, UsageError
from pgmq_sim.run import (
    PING_TIMEOUT_S,
    TICK_S,
    NotAnswering,
    Run,
    RunInput,
    Signals,
    call_bounded,
    session_plan,
)
from pgmq_sim.runlog import RunLog
from pgmq_sim.server import Server, reason
from pgmq_sim.settings import QUEUE_TYPES, Settings
from pgmq_sim.stats import LatencyHistogram
from pgmq_sim.threads import RunThread
from pgmq_sim.worker import ProcessedCounter

JOIN_WAIT_LOCAL_S = 60.0  # worker processes this master started: they start in about a second
JOIN_WAIT_REMOTE_S = 600.0  # --master: someone has to start the workers on the other hosts
READY_WAIT_S = 60.0
FINAL_WAIT_S = 8.0
CHILD_EXIT_S = 5.0
CHECK_S = 0.5
QUIET_S = 1.0  # no report raised the count this long below the target: ask the server


class ReportedCounter(ProcessedCounter):
    """The run's processed count, as the worker processes report it (a total, not a stream)."""

    def set(self, count: int, in_doubt: int) -> None:
        with self._lock:
            self._count, self._in_doubt = count, in_doubt
            if self._count >= self._target:
                self._done.set()


@dataclass
class Member:
    """One worker process, as the master knows it."""

    client_id: str
    hello: m.Hello
    runner: str = ""
    names: list[str] = field(default_factory=list)
    ready: bool = False
    final: bool = False
    lost: str | None = None  # why it is gone, if it is
    in_doubt: int = 0
    reported: int = 0

    @property
    def order(self) -> tuple[float, str, int]:
        return (
            self.hello.process if self.hello.process is not None else math.inf,
            self.hello.host,
            self.hello.pid,
        )


class DistributedRun(Run):
    def __init__(
        self,
        given: RunInput,
        server: Server,
        console: Console,
        log: RunLog,
        signals: Signals,
        *,
        options: DistributedOptions,
    ) -> None:
        super().__init__(given, server, console, log, signals)
        self.options = options
        self.reported = ReportedCounter(self.settings.fill_db, self.done)
        self.counter = self.reported
        self.by_name = {s.name: s for s in self.stats}
        self.worker_runners = ["-"] * len(self.stats)
        self.runners = self.worker_runners
        self.members: dict[str, Member] = {}
        self.children: list[subprocess.Popen[bytes]] = []
        self.environment: Environment | None = None
        self.master: MasterRunner | None = None
        self.failure: tuple[str, bool] | None = None
        self.reconciled = False
        self.last_count_change = time.monotonic()

    # -- start: the master, its worker processes, the plans -------------------------------------

    def check(self) -> None:
        """The usual checks; then the master listens and its own worker processes start, so they
        import and join while the schema is installed and the queue prefilled."""
        super().check()
        self._open_master()
        self._start_children()

    def start(self) -> None:
        members = self._await_members()
        self._deal(members)
        self._await_ready(members)
        self.started = time.perf_counter()
        self.last_count_change = time.monotonic()
        assert self.master is not None
        self.master.send_message(m.START, {})
        if self.options.web:
            self.master.update_state(STATE_RUNNING)
        settings = self.settings
        self.threads += self.rate_producer()
        self.threads.append(Monitor(self))
        self.log.event(
            f"starting {settings.workers} workers in {len(members)} processes"
            + (f" and a producer at {settings.rate:g}/s" if settings.rate else "")
        )
        for thread in self.threads:
            thread.start()
        self.start_housekeeping()

    def crash_workers(self, names: list[str]) -> None:
        """The processes that run these workers make them die mid-work."""
        assert self.master is not None
        for member in self.members.values():
            mine = [n for n in names if n in member.names]
            if mine:
                self.master.send_message(m.CRASH, {"names": mine}, client_id=member.client_id)

    def _open_master(self) -> None:
        options = self.options
        self.environment = Environment(user_classes=[], events=events)
        try:
            self.master = self.environment.create_master_runner(options.bind_host, options.bind_port)
        except SystemExit:  # Locust exits when the port is taken
            raise SimError(
                f"cannot listen on {options.bind_host}:{options.bind_port} for workers: the port is busy;"
                " pass --master-bind-port P"
            ) from None
        master = self.master
        master.register_message(m.HELLO, self._on_hello)
        master.register_message(m.READY, self._on_ready)
        master.register_message(m.REPORT, self._on_report)
        master.register_message(m.FAILED, self._on_failed)
        port = master.server.port
        if options.processes is None:
            want = options.expect_workers
            line = f"master listening on {options.bind_host}:{port}; waiting for {want} worker(s)"
            self.console.print(line)
            self.log.event(line)
        if options.web:
            sys.argv[1:] = []  # the web UI parses Locust's flags from sys.argv; ours are parsed already
            self.environment.create_web_ui(host="", port=options.web_port)
            self.console.print(f"web UI on http://{socket.gethostname()}:{options.web_port}/")

    def _start_children(self) -> None:
        if self.options.processes is None:
            return
        assert self.master is not None
        port = str(self.master.server.port)
        for k in range(1, self.options.processes + 1):
            command = [
                sys.executable,
                "-m",
                "pgmq_sim",
                "--worker",
                "--master-host",
                "127.0.0.1",
                "--master-port",
                port,
            ]
            env = dict(os.environ, **{m.PROCESS_ENV: str(k)})
            out = None if self.settings.logfile == "-" else subprocess.DEVNULL
            self.children.append(subprocess.Popen(command, env=env, stdout=out, stdin=subprocess.DEVNULL))

    def _wait(self, until: Callable[[], bool], seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not until():
            if self.signals.interrupt.is_set():
                raise InterruptedError(what)
            if self.failure is not None:
                raise SimError(self.failure[0])
            dead = [c for c in self.children if c.poll() is not None]
            if dead and not self.started:
                raise SimError(f"a worker process exited ({dead[0].returncode}) before the run started")
            if time.monotonic() > deadline:
                raise SimError(f"{what} within {seconds:g} s")
            time.sleep(TICK_S)

    def _await_members(self) -> list[Member]:
        want = self.options.expect_workers
        self._wait(
            lambda: len(self.members) >= want,
            JOIN_WAIT_LOCAL_S if self.children else JOIN_WAIT_REMOTE_S,
            f"fewer than {want} worker process(es) joined",
        )
        return sorted(self.members.values(), key=lambda member: member.order)

    def _deal(self, members: list[Member]) -> None:
        """Contiguous blocks of w1..wN: each process gets every type when it has 3 workers or more,
        so losing one process rarely leaves a type without a worker."""
        settings, count = self.settings, len(members)
        if settings.workers < count:
            raise UsageError(
                f"-workers {settings.workers} is fewer than the {count} worker processes; give more"
            )
        seeds = random.Random(self._rng.random())
        plans = []
        for r, member in enumerate(members):
            member.runner = f"p{r + 1}@{member.hello.host}"
            first, last = r * settings.workers // count, (r + 1) * settings.workers // count
            assignments = [
                m.Assignment(f"w{i + 1}", settings.worker_type(i), seeds.random()) for i in range(first, last)
            ]
            member.names = [a.name for a in assignments]
            for i in range(first, last):
                self.worker_runners[i] = member.runner
            own = member.hello.own_dsn is not None
            plans.append(
                (
                    member,
                    m.Plan(
                        runner=member.runner,
                        settings=settings.as_json(),
                        session=asdict(session_plan(settings, self.given.strategy)),
                        dsn=None if own else self.server.dsn,
                        workers=assignments,
                        logfile=self._logfile(r + 1),
                        fire_requests=self.options.web,
                    ),
                )
            )
            source = f"its own PGMQ_SIM_DSN {member.hello.own_dsn}" if own else "sent by the master"
            self.log.event(
                f"worker process {member.runner} (pid {member.hello.pid}): {', '.join(member.names)};"
                f" database {source}"
            )
        assert self.master is not None
        for member, plan in plans:
            self.master.send_message(m.PLAN, plan.as_data(), client_id=member.client_id)

    def _logfile(self, number: int) -> str:
        """msg_queue.log -> msg_queue.p1.log: one log per worker process, beside the master's."""
        name = self.settings.logfile
        if name == "-":
            return name
        stem, dot, suffix = name.rpartition(".")
        if not dot or "/" in suffix:
            return f"{name}.p{number}"
        return f"{stem}.p{number}.{suffix}"

    def _await_ready(self, members: list[Member]) -> None:
        self._wait(
            lambda: all(member.ready for member in members),
            READY_WAIT_S,
            "the worker processes did not all get ready",
        )

    # -- messages from the workers ----------------------------------------------------------------

    def _member(self, msg: Any) -> Member | None:
        return self.members.get(msg.node_id)

    def _on_hello(self, environment: Environment, msg: Any, **_: Any) -> None:
        if msg.node_id not in self.members and not self.started:
            self.members[msg.node_id] = Member(msg.node_id, m.Hello.from_data(msg.data))

    def _on_ready(self, environment: Environment, msg: Any, **_: Any) -> None:
        member = self._member(msg)
        if member is not None:
            member.ready = True

    def _on_failed(self, environment: Environment, msg: Any, **_: Any) -> None:
        member = self._member(msg)
        text, lost = str(msg.data["error"]), bool(msg.data.get("lost"))
        where = member.runner if member is not None and member.runner else "a worker process"
        if self.failure is None:
            self.failure = (f"{where}: {text}", lost)
        if self.started and not self.stop.is_set():
            self.errors.report(where, ServerLostError(text) if lost else SimError(text))

    def _on_report(self, environment: Environment, msg: Any, **_: Any) -> None:
        member = self._member(msg)
        if member is None or member.final:
            return
        data = msg.data
        for counters in data["workers"]:
            stats = self.by_name.get(counters["name"])
            if stats is not None:
                m.apply_counters(stats, counters)
                encoded = (data.get("histograms") or {}).get(stats.name)
                if encoded:
                    m.apply_histograms(stats, encoded)
        e2e = LatencyHistogram.decode(data["e2e"]) if data.get("e2e") else None
        if data["count"]:
            self.timeline.processed_batch(self.clock(), int(data["count"]), e2e)
        member.in_doubt = int(data.get("in_doubt", 0))
        member.final = bool(data["final"])
        self._recount()

    def _recount(self) -> None:
        count = sum(s.processed + s.dead_lettered for s in self.stats)  # finished, as in one process
        if count != self.counter.count:
            self.last_count_change = time.monotonic()
        self.reported.set(count, sum(member.in_doubt for member in self.members.values()))

    # -- during the run -------------------------------------------------------------------------

    def check_members(self) -> None:
        """Called by the monitor: notice lost processes; end the run when the server says it is done."""
        assert self.master is not None
        for member in self.members.values():
            if member.lost is None and not member.final:
                why = self._gone(member)
                if why is not None:
                    member.lost = why
                    line = f"worker process {member.runner} lost ({why}); the run goes on with the others"
                    self.notes.append(line)
                    self.log.event(line)
                    self.console.print(f"note: {line}")
        lost = any(member.lost for member in self.members.values())
        quiet = time.monotonic() - self.last_count_change >= QUIET_S
        if self.done.is_set() or not (lost or quiet) or self.writer.committed < self.settings.fill_db:
            return
        try:
            remaining = call_bounded(self.db.remaining, PING_TIMEOUT_S, self.signals, "remaining count")
        except (NotAnswering, psycopg.Error):
            return
        if remaining == 0:
            self.log.event("the server has no message left: done (some completions were not reported)")
            self.reconcile()
            self.done.set()
            return
        if lost:
            alive = {
                self.by_name[name].queue_type
                for member in self.members.values()
                if not member.lost
                for name in member.names
            }
            orphaned = [t for t in QUEUE_TYPES if t not in alive]
            if orphaned:
                gone = ", ".join(member.runner for member in self.members.values() if member.lost)
                self.errors.report(
                    "workers",
                    SimError(
                        f"{', '.join(orphaned)} has no worker left after {gone} was lost and"
                        f" {remaining} messages remain; stopping"
                    ),
                )
        self.last_count_change = time.monotonic()

    def _gone(self, member: Member) -> str | None:
        assert self.master is not None
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

    # -- the end ----------------------------------------------------------------------------------

    def halt(self) -> None:
        if self.master is not None:
            self._stop_workers()
        super().halt()
        if self.master is not None:
            self._quit()

    def _stop_workers(self) -> None:
        assert self.master is not None
        if not self.elapsed:
            self.elapsed = self.clock()
        self.stop.set()
        if self.started:
            self.master.send_message(m.STOP, {})
            deadline = time.monotonic() + FINAL_WAIT_S
            while time.monotonic() < deadline and not all(
                member.final or member.lost or self._gone(member) for member in self.members.values()
            ):
                time.sleep(0.05)
            for member in self.members.values():
                if not member.final and member.lost is None:
                    member.lost = "no final report"
            if self.changed and not self.signals.hurry.is_set():
                self.reconcile()

    def reconcile(self) -> None:
        """Counts of processes that died, from the journal (per worker name) or the server's count."""
        if self.reconciled:
            return
        lost = [member for member in self.members.values() if member.lost]
        if not lost:
            return
        self.reconciled = True
        names = [name for member in lost for name in member.names]
        before = sum(s.processed for s in self.stats)
        try:
            if self.settings.audit:
                counts = call_bounded(
                    lambda: self.db.journaled_per_worker(names), 30, self.signals, "journal counts"
                )
                for name in names:
                    stats = self.by_name[name]
                    stats.processed = max(stats.processed, counts.get(name, 0))
                how = "from the journal"
            else:
                remaining = call_bounded(self.db.remaining, 30, self.signals, "remaining count")
                missing = max(0, self.writer.committed - remaining - before)
                shares = [self.by_name[name] for name in names]
                for i, stats in enumerate(shares):
                    stats.processed += missing // len(shares) + (1 if i < missing % len(shares) else 0)
                how = "from the server's remaining count, spread over its workers (no journal with -no-audit)"
        except (SimError, psycopg.Error, InterruptedError) as exc:
            self.notes.append(
                f"counts of lost worker processes not reconciled: {reason(exc, self.server.dsn)}"
            )
            return
        added = sum(s.processed for s in self.stats) - before
        if added:
            self.timeline.processed_batch(self.clock(), added, None)
        line = (
            f"{added} completions of lost process(es) {', '.join(member.runner for member in lost)}"
            f" counted {how}"
        )
        self.notes.append(line)
        self.log.event(line)
        self._recount()

    def _quit(self) -> None:
        master = self.master
        assert master is not None
        if self.options.web:
            master.update_state(STATE_STOPPED)
        try:
            master.quit()
        except Exception as exc:  # a worker gone with its socket: nothing left to tell it
            self.notes.append(f"quitting the workers: {exc}")
        deadline = time.monotonic() + CHILD_EXIT_S
        for child in self.children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=CHILD_EXIT_S)
        web_ui = self.environment.web_ui if self.environment is not None else None
        if web_ui is not None and web_ui.server is not None:
            web_ui.stop()


class Monitor(RunThread):
    """Watches the worker processes while the run's own watch waits for the target."""

    def __init__(self, run: DistributedRun) -> None:
        super().__init__("monitor", run.stop, lambda exc: run.errors.report("monitor", exc))
        self.run_ = run

    def body(self) -> None:
        while not self._halt.wait(CHECK_S):
            self.run_.check_members()


def distributed_run(options: dict[str, Any], settings: Settings) -> Callable[..., Run]:
    """A factory with Run's signature, for the CLI."""
    chosen = distributed_options(options)
    if chosen.processes is not None and chosen.processes > settings.workers:
        raise UsageError(
            f"--processes {chosen.processes} is more than -workers {settings.workers};"
            " every process needs a worker"
        )
    if chosen.processes is None and chosen.expect_workers > settings.workers:
        raise UsageError(
            f"--expect-workers {chosen.expect_workers} is more than -workers {settings.workers};"
            " every worker process needs a queue worker"
        )

    def make(given: RunInput, server: Server, console: Console, log: RunLog, signals: Signals) -> Run:
        return DistributedRun(given, server, console, log, signals, options=chosen)

    return make
