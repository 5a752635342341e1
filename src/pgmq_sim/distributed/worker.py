"""A worker process: joins a master, takes its plan, runs each queue worker as a greenlet.

Every setting and SQL text comes from the master; only the DSN may be the worker's own
(PGMQ_SIM_DSN), so a password need not cross the network. Each greenlet runs the one worker code
path, `WorkerLoop.step()`; gevent's monkey-patching (done by pgmq_sim.launch before anything else
was imported) makes psycopg's waits and `threading.Event` cooperative. The process writes its own
run log (handled lines and its lifecycle) and reports counters and histograms to the master.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from typing import Any

import click
import gevent
import psycopg
from click.core import ParameterSource
from locust import events
from locust import runners as locust_runners
from locust.env import Environment
from locust.runners import WorkerRunner

from pgmq_sim.actors.ownership import Heartbeat, Owners
from pgmq_sim.actors.wakeup import Wakeup, wakeup_for
from pgmq_sim.actors.worker import ClaimGate, ProcessedCounter, WorkerLoop, WorkerPlan, crew, worker_index
from pgmq_sim.db.claims import claim_sessions
from pgmq_sim.db.connection import connect_worker
from pgmq_sim.db.values import SessionPlan
from pgmq_sim.distributed import messages as m
from pgmq_sim.dsn import DSN_ENV, reason, redact
from pgmq_sim.errors import ServerLostError, SimError
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.result.costs import CpuReading
from pgmq_sim.result.stats import LatencyHistogram, Timeline, WorkerStats
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import MAX_WORKERS, WorkTime, queue_types

STOP_GRACE_S = 2.0
MASTER_GONE_S = 5
QUIT_WAIT_S = 10.0  # after the final report, how long to wait for the master's quit
NO_TARGET = 2**62  # the master decides when the run is done


class LastHistogram(LatencyHistogram):
    """A histogram that remembers its last value, for Locust's request events."""

    last_ms = 0.0

    def record_ms(self, ms: float) -> None:
        self.last_ms = ms
        super().record_ms(ms)


class DeltaTimeline(Timeline):
    """Completions since the last report and their e2e histogram; the master places them in time."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.e2e = LatencyHistogram(2)

    def processed(self, at_s: float, e2e_ms: float | None) -> None:
        self.count += 1
        if e2e_ms is not None:
            self.e2e.record_ms(e2e_ms)

    def take(self) -> tuple[int, str | None]:
        count, encoded = self.count, self.e2e.encode() if self.e2e.count else None
        self.count = 0
        self.e2e.reset()
        return count, encoded


class WorkerProcess:
    """One process's share of the run, driven by the master's messages."""

    def __init__(self, runner: WorkerRunner, logfile: str | None, say: Any) -> None:
        self.runner = runner
        self.logfile = logfile  # the worker's own -logfile, else the master's choice
        self.say = say
        self.own_dsn = os.environ.get(DSN_ENV) or None
        process = os.environ.get(m.PROCESS_ENV)
        self.process = int(process) if process and process.isdigit() else None
        self.stop = threading.Event()
        self.finished = threading.Event()
        self.plan: m.Plan | None = None
        self.dsn = ""
        self.log: RunLog | None = None
        self.wakeup: Wakeup | None = None
        self.loops: list[WorkerLoop] = []
        self.greenlets: list[gevent.Greenlet] = []
        self.counter = ProcessedCounter(NO_TARGET, threading.Event())
        self.timeline = DeltaTimeline()
        self.gate = ClaimGate(MAX_WORKERS)
        self.owners = Owners()
        self.started = 0.0
        self.cpu_at_start: CpuReading | None = None
        self.failure: str | None = None
        self._reports = 0
        for kind, handler in (
            (m.PLAN, self.on_plan),
            (m.START, self.on_start),
            (m.STOP, self.on_stop),
            (m.CRASH, self.on_crash),
            (m.ALLOW, self.on_allow),
        ):
            runner.register_message(kind, handler, concurrent=True)

    def hello(self) -> None:
        own = redact(self.own_dsn) if self.own_dsn else None
        self.runner.send_message(
            m.HELLO, m.Hello(socket.gethostname(), os.getpid(), self.process, own).as_data()
        )

    def fail(self, text: str, lost: bool = False) -> None:
        if self.failure is None:
            self.failure = text
            if self.log is not None:
                self.log.event(f"error: {text}")
            self.runner.send_message(m.FAILED, {"error": text, "lost": lost})

    # -- the master's messages ------------------------------------------------------------------

    def on_plan(self, environment: Environment, msg: Any, **_: Any) -> None:
        try:
            self._take(m.Plan.from_data(msg.data))
        except SimError as exc:
            self.fail(str(exc))
        except psycopg.Error as exc:
            self.fail(
                f"worker process on {socket.gethostname()} cannot use the database: {reason(exc, self.dsn)}"
            )
        except Exception as exc:  # a plan this version cannot read, a log it cannot write
            self.fail(f"worker process on {socket.gethostname()}: {type(exc).__name__}: {exc}")

    def _take(self, plan: m.Plan) -> None:
        self.plan = plan
        settings = plan.settings
        source = "its own PGMQ_SIM_DSN" if self.own_dsn else "the master"
        dsn = self.own_dsn or plan.dsn
        if not dsn:
            raise SimError("the master sent no DSN and this worker has no PGMQ_SIM_DSN; set one")
        self.dsn = dsn
        self.log = RunLog(self.logfile or plan.logfile)
        self.log.open()
        names = ", ".join(a.name for a in plan.workers)
        self.say(
            f"pgmq-sim worker {plan.runner}: database {redact(dsn)} (from {source}); workers {names};"
            f" log {self.logfile or plan.logfile}"
        )
        self.log.event(
            f"worker process {plan.runner} (pid {os.getpid()}): database {redact(dsn)} from {source};"
            f" workers {names}"
        )
        connect_worker(dsn).close()  # a bad DSN or login is reported before the run starts
        listen = plan.listen_dsn or dsn
        self.wakeup = wakeup_for(
            settings["wakeup"] == WakeupMode.NOTIFY,
            lambda: connect_worker(listen),
            settings["poll_interval"],
            settings["reconnect_timeout"],
            self.stop,
            lambda exc: self.fail(f"notify listener of {plan.runner}: {reason(exc, listen)}"),
            queue_types(int(settings["types"])),
        )
        work = WorkTime.parse(settings["work_ms"])
        session = SessionPlan(**plan.session)
        shared = WorkerPlan(
            dsn,
            session,
            claim_sessions(dsn, session),
            work,
            float(settings["reconnect_timeout"]),
            self.clock,
            float(settings["fail_rate"]),
            self.gate,
            self.owners,
        )
        stats = [
            WorkerStats(
                name=a.name,
                queue_type=a.queue_type,
                claim=LastHistogram(),
                complete=LastHistogram(),
                e2e=LastHistogram(),
            )
            for a in plan.workers
        ]
        seeds = [a.seed for a in plan.workers]
        self.loops = crew(stats, seeds, shared, self.wakeup, self.log, self.counter, self.timeline, self.stop)
        self.runner.send_message(m.READY, {"runner": plan.runner})

    def clock(self) -> float:
        return time.perf_counter() - self.started if self.started else 0.0

    def on_start(self, environment: Environment, msg: Any, **_: Any) -> None:
        if self.started or not self.loops:
            return
        self.started = time.perf_counter()
        self.cpu_at_start = CpuReading.now()
        fire = self.plan is not None and self.plan.fire_requests
        self.greenlets = [gevent.spawn(self._work, loop, fire) for loop in self.loops]
        if self.plan is not None and self.plan.settings["tx"] == TxMode.SPLIT:
            dsn = self.dsn
            heartbeat = Heartbeat(
                dsn, self.owners, self.stop, lambda exc: self.fail(f"heartbeat: {reason(exc, dsn)}")
            )
            heartbeat.start()
        gevent.spawn(self._report_loop)

    def on_crash(self, environment: Environment, msg: Any, **_: Any) -> None:
        names = set(msg.data["names"])
        for loop in self.loops:
            if loop.stats.name in names:
                loop.crash()

    def on_allow(self, environment: Environment, msg: Any, **_: Any) -> None:
        self.gate.allow(int(msg.data["count"]))

    @property
    def active_workers(self) -> int:
        if not self.started or self.stop.is_set():
            return 0
        return sum(1 for loop in self.loops if self.gate.allows(worker_index(loop.stats.name)))

    def on_stop(self, environment: Environment, msg: Any, **_: Any) -> None:
        if self.stop.is_set():
            return
        self.stop.set()
        if self.wakeup is not None:
            self.wakeup.close()
        gevent.joinall(self.greenlets, timeout=STOP_GRACE_S)
        for loop, greenlet in zip(self.loops, self.greenlets, strict=False):
            if not greenlet.dead:
                loop.cancel()
        gevent.joinall(self.greenlets, timeout=STOP_GRACE_S)
        gevent.killall([g for g in self.greenlets if not g.dead], timeout=STOP_GRACE_S)
        self.report(final=True)
        if self.log is not None:
            runner = self.plan.runner if self.plan else "?"
            self.log.event(f"worker process {runner} stopped: {self.counter.count} processed")
            self.log.close()
        self.finished.set()

    # -- the queue workers --------------------------------------------------------------------

    def _work(self, loop: WorkerLoop, fire: bool) -> None:
        stats = loop.stats
        seen = (0, 0)
        try:
            while not self.stop.is_set():
                loop.step()
                if fire:
                    seen = self._fire(stats, seen)
        except BaseException as exc:
            if not self.stop.is_set() and not isinstance(exc, gevent.GreenletExit):
                self.fail(f"worker {stats.name}: {reason(exc, self.dsn)}", isinstance(exc, ServerLostError))
        finally:
            loop.close()

    @staticmethod
    def _fire(stats: WorkerStats, seen: tuple[int, int]) -> tuple[int, int]:
        """One request entry per claim (empty or not) and completion, for Locust's statistics."""
        assert isinstance(stats.claim, LastHistogram) and isinstance(stats.complete, LastHistogram)
        assert isinstance(stats.e2e, LastHistogram)

        def request(name: str, response_ms: float, length: int) -> None:
            events.request.fire(
                request_type="SQL",
                name=name,
                response_time=response_ms,
                response_length=length,
                exception=None,
                context={},
            )

        if stats.processed > seen[0]:
            request("claim", stats.claim.last_ms, 1)
            request("complete", stats.complete.last_ms, 1)
            request("end to end", stats.e2e.last_ms, 1)  # time_added to commit, on the server's clock
        elif stats.empty_claims > seen[1]:
            request("claim (empty)", stats.claim.last_ms, 0)
        return stats.processed, stats.empty_claims

    def _report_loop(self) -> None:
        while not self.stop.wait(m.REPORT_S):
            self.report(final=False)

    def report(self, final: bool) -> None:
        self._reports += 1
        full = final or self._reports % m.FULL_EVERY == 0
        count, e2e = self.timeline.take()
        data: dict[str, Any] = {
            "final": final,
            "workers": [m.counters(loop.stats) for loop in self.loops],
            "histograms": {loop.stats.name: m.histograms(loop.stats) for loop in self.loops}
            if full
            else None,
            "count": count,
            "e2e": e2e,
            "in_doubt": self.counter.in_doubt,
            "busy": self.gate.busy,
        }
        if self.cpu_at_start is not None:  # this process's own cost, since its workers started
            data["cpu"] = self.cpu_at_start.until(CpuReading.now(), "", self.counter.count).as_json()
        try:
            self.runner.send_message(m.REPORT, data)
        except Exception as exc:  # the master is gone: its heartbeat check ends this process
            if final:
                self.say(f"pgmq-sim worker: final report not sent: {exc}")


def run_worker(options: dict[str, Any]) -> int:
    """pgmq-sim --worker --master-host H [--master-port P]: serve one run, then exit."""
    host, port = options["master_host"], options["master_port"]
    ctx = click.get_current_context()
    given = ctx.get_parameter_source("logfile") == ParameterSource.COMMANDLINE
    own_log = options["logfile"] if given else None
    if own_log is not None and own_log != "-":
        RunLog(own_log)  # checks the path now: one line, before joining

    def say(text: str) -> None:
        if os.environ.get(m.PROCESS_ENV) is None:
            click.echo(text, err=own_log == "-")

    say(f"pgmq-sim worker: joining master {host}:{port}")
    # the master beats every second: without its beat for this long, the worker stops and closes
    # its connections (Locust's own default waits a minute)
    locust_runners.MASTER_HEARTBEAT_TIMEOUT = MASTER_GONE_S
    environment = Environment(user_classes=[], events=events)
    try:
        runner = environment.create_worker_runner(host, port)
    except ConnectionError:
        raise SimError(f"no master answered at {host}:{port}; start pgmq-sim --master first") from None
    process = WorkerProcess(runner, own_log, say)
    process.hello()

    def on_report_to_master(client_id: str, data: dict[str, Any], **_: Any) -> None:
        """The queue workers are this process's Locust users (the web UI's Users)."""
        data["user_classes_count"] = {"QueueWorker": process.active_workers}
        data["user_count"] = process.active_workers

    environment.events.report_to_master.add_listener(on_report_to_master)
    parent = os.getppid()

    def on_signal() -> None:
        gevent.spawn(process.on_stop, environment, None)

    for signum in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(signum, on_signal)
    while len(runner.greenlet):
        if process.finished.is_set():
            runner.greenlet.join(timeout=QUIT_WAIT_S)  # the master's quit ends it
            break
        if process.process is not None and os.getppid() != parent:
            say("pgmq-sim worker: the master process is gone; stopping")
            break  # a local worker process whose master died: no need to wait for the beat
        runner.greenlet.join(timeout=0.5)
    if not process.finished.is_set():  # the master went away (its heartbeats stopped)
        process.on_stop(environment, None)
    if process.failure:
        click.echo(f"pgmq-sim: error: {process.failure}", err=True)
        return 1
    return 0
