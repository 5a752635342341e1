"""A Locust worker process: joins a master, takes its plan, and runs its share of the queue workers
in a child process (distributed/child) that it supervises.

This process is gevent's (Locust patches it; see pgmq_sim.launch), and the run's event loop cannot be
a greenlet of gevent's hub without paying for both: the child is a plain process running the same
crew as a single-process run. This one speaks to the master for it: hello, ready, the reports (the
child's, with this process's CPU added), failures; and passes the master's start, produce, crash,
allow and stop down. A child that dies is a failure of this worker process; this process's end (even killed)
closes the child's stdin, which stops it. The child writes the worker process's run log.

Every setting and SQL text comes from the master; only the DSN may be the worker's own
(PGMQ_SIM_DSN), so a password need not cross the network (it reaches the child through a pipe, not
its command line).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

import click
import gevent
from gevent.fileobject import FileObject
from locust import events
from locust import runners as locust_runners
from locust.env import Environment
from locust.runners import WorkerRunner

from pgmq_sim.actors.worker import worker_index
from pgmq_sim.distributed import messages as m
from pgmq_sim.dsn import DSN_ENV, redact
from pgmq_sim.errors import SimError
from pgmq_sim.result.costs import CpuReading
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import MAX_WORKERS

STOP_GRACE_S = 2.0
FINAL_WAIT_S = 2 * STOP_GRACE_S + 3.0  # the child stops its workers within two graces
EXIT_WAIT_S = 2.0  # then SIGTERM, then SIGKILL, each after this
MASTER_GONE_S = 5
QUIT_WAIT_S = 10.0  # after the final report, how long to wait for the master's quit


class WorkerProcess:
    """One process's share of the run, driven by the master's messages, carried by its child."""

    def __init__(self, runner: WorkerRunner, logfile: str | None, say: Any) -> None:
        self.runner = runner
        self.logfile = logfile  # the worker's own -logfile, else the master's choice
        self.say = say
        self.own_dsn = os.environ.get(DSN_ENV) or None
        process = os.environ.get(m.PROCESS_ENV)
        self.process = int(process) if process and process.isdigit() else None
        self.finished = threading.Event()
        self.final = threading.Event()  # the child's final report was relayed
        self.plan: m.Plan | None = None
        self.child: subprocess.Popen[bytes] | None = None
        self.allowed = MAX_WORKERS
        self.started = False
        self.stopping = False
        self.cpu_at_start: CpuReading | None = None
        self.last_report: dict[str, Any] | None = None
        self.failure: str | None = None
        for kind, handler in (
            (m.PLAN, self.on_plan),
            (m.START, self.on_start),
            (m.STOP, self.on_stop),
            (m.CRASH, self.on_crash),
            (m.ALLOW, self.on_allow),
            (m.PRODUCE, self.on_produce),
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
            self.runner.send_message(m.FAILED, {"error": text, "lost": lost})

    # -- the master's messages ------------------------------------------------------------------

    def on_plan(self, environment: Environment, msg: Any, **_: Any) -> None:
        try:
            self._take(m.Plan.from_data(msg.data))
        except SimError as exc:
            self.fail(str(exc))
        except Exception as exc:  # a plan this version cannot read, a child that cannot start
            self.fail(f"worker process on {socket.gethostname()}: {type(exc).__name__}: {exc}")

    def _take(self, plan: m.Plan) -> None:
        self.plan = plan
        source = "its own PGMQ_SIM_DSN" if self.own_dsn else "the master"
        dsn = self.own_dsn or plan.dsn
        if not dsn:
            raise SimError("the master sent no DSN and this worker has no PGMQ_SIM_DSN; set one")
        logfile = self.logfile or plan.logfile
        names = ", ".join(a.name for a in plan.workers)
        self.say(
            f"pgmq-sim worker {plan.runner}: database {redact(dsn)} (from {source}); workers {names};"
            f" log {logfile}"
        )
        reports, theirs = os.pipe()
        command = [sys.executable, "-m", "pgmq_sim.distributed.child", "--reports", str(theirs)]
        self.child = subprocess.Popen(command, stdin=subprocess.PIPE, pass_fds=(theirs,))
        os.close(theirs)
        first = {"plan": plan.as_data(), "dsn": dsn, "source": source, "logfile": logfile}
        self._send(first | {"supervisor": os.getpid()})
        gevent.spawn(self._read, reports)

    def _send(self, line: dict[str, Any]) -> None:
        child = self.child
        if child is None or child.stdin is None or child.poll() is not None:
            return
        try:
            child.stdin.write(json.dumps(line).encode() + b"\n")
            child.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the child is gone: its reader says so

    def _read(self, fd: int) -> None:
        """The child's lines, until it closes its end (it ended)."""
        with FileObject(fd, "rb") as lines:
            for raw in lines:
                line = json.loads(raw)
                if "ready" in line:
                    assert self.plan is not None
                    self.runner.send_message(m.READY, {"runner": self.plan.runner})
                elif "failed" in line:
                    self.fail(str(line["failed"]["error"]), bool(line["failed"].get("lost")))
                elif "report" in line:
                    self._relay(line["report"])
        child = self.child
        code = child.wait() if child is not None else None
        if not self.final.is_set() and not self.stopping:
            self.fail(f"the workers' process of {self.plan.runner if self.plan else '?'} exited ({code})")

    def _relay(self, data: dict[str, Any]) -> None:
        """A report of the child's to the master, with this process's own CPU in its cost."""
        if data.get("cpu") and self.cpu_at_start is not None:
            mine = self.cpu_at_start.until(CpuReading.now(), "", 0)
            data["cpu"]["cpu_s"] += mine.cpu_s
        requests = data.pop("requests", [])
        for name, response_ms, length in requests:
            events.request.fire(
                request_type="SQL",
                name=name,
                response_time=response_ms,
                response_length=length,
                exception=None,
                context={},
            )
        self.last_report = data
        try:
            self.runner.send_message(m.REPORT, data)
        except Exception as exc:  # the master is gone: its heartbeat check ends this process
            if data.get("final"):
                self.say(f"pgmq-sim worker: final report not sent: {exc}")
        if data.get("final"):
            self.final.set()

    def on_start(self, environment: Environment, msg: Any, **_: Any) -> None:
        if self.started or self.child is None:
            return
        self.started = True
        self.cpu_at_start = CpuReading.now()
        self._send({"start": True})

    def on_produce(self, environment: Environment, msg: Any, **_: Any) -> None:
        self._send({"produce": float(msg.data["at"])})

    def on_crash(self, environment: Environment, msg: Any, **_: Any) -> None:
        self._send({"crash": list(msg.data["names"])})

    def on_allow(self, environment: Environment, msg: Any, **_: Any) -> None:
        self.allowed = int(msg.data["count"])
        self._send({"allow": self.allowed})

    @property
    def active_workers(self) -> int:
        if not self.started or self.stopping or self.plan is None:
            return 0
        return sum(1 for a in self.plan.workers if worker_index(a.name) < self.allowed)

    def on_stop(self, environment: Environment, msg: Any, **_: Any) -> None:
        if self.stopping:
            return
        self.stopping = True
        child = self.child
        if child is not None:
            self._send({"stop": True})
            self.final.wait(FINAL_WAIT_S)
            if child.stdin is not None:
                child.stdin.close()  # its end of file: whatever it still does, it stops
            self._end(child)
        if not self.final.is_set() and self.last_report is not None:  # the child died first
            self._relay(self.last_report | {"final": True})
        self.finished.set()

    @staticmethod
    def _end(child: subprocess.Popen[bytes]) -> None:
        """Bounded: the child's own exit, else SIGTERM, else SIGKILL."""
        for kill in (None, child.terminate, child.kill):
            if kill is not None:
                kill()
            try:
                child.wait(timeout=EXIT_WAIT_S)
                return
            except subprocess.TimeoutExpired:
                continue


def run_worker(options: dict[str, Any], logfile_given: bool) -> int:
    """pgmq-sim --worker --master-host H [--master-port P]: serve one run, then exit."""
    host, port = options["master_host"], options["master_port"]
    own_log = options["logfile"] if logfile_given else None
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
