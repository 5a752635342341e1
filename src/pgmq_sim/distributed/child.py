"""A Locust worker process's queue workers, in a plain child process of it: the process Locust runs
is patched by gevent, and the run's loop is no greenlet. The child runs the same crew as a
single-process run (actors/crew: WorkerLoop, the listener, the heartbeat) on its own event loop;
the Locust worker process supervises it and speaks to the master for it.

    python -m pgmq_sim.distributed.child --reports FD    # started by distributed/worker_process.py

Its stdin carries JSON lines: first the plan (the master's m.Plan, the DSN, the log file), then
`start`, `produce` (a spread run's producer sessions: distributed/producing), `crash`, `allow`,
`stop`; an end of file (the supervisor gone, even killed) stops it. The pipe FD carries JSON lines
back: `ready` (the DSN works, the listener listens), `failed`, and a `report` every m.REPORT_S
(the counters, the histograms every few, the CPU; the last one `final`).
Its stdout is the worker process's own (a -logfile - writes there).
It ignores SIGINT: a terminal's Ctrl-C reaches the whole process group, and the stop comes from
the supervisor, which relays the master's.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from typing import Any

import psycopg

from pgmq_sim.actors.bells import Halt, new_loop
from pgmq_sim.actors.books import ProcessedCounter
from pgmq_sim.actors.crew import Crew, CrewPlan
from pgmq_sim.actors.tasks import Tasks
from pgmq_sim.db.connection import connect_async
from pgmq_sim.db.values import SessionPlan
from pgmq_sim.distributed import messages as m
from pgmq_sim.distributed.producing import ProducerShare, ShareProducer
from pgmq_sim.dsn import reason, redact
from pgmq_sim.errors import ServerLostError, SimError
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.result.costs import CpuReading, Logins
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.reasons import ReasonTally
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import Timeline
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import WorkTime, queue_types

STOP_GRACE_S = 2.0
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
        self.reasons = ReasonTally(relay=True)  # the server's reasons met, relayed to the master

    def processed(self, at_s: float, e2e_ms: float | None) -> None:
        self.count += 1
        if e2e_ms is not None:
            self.e2e.record_ms(e2e_ms)

    def take(self) -> tuple[int, str | None]:
        count, encoded = self.count, self.e2e.encode() if self.e2e.count else None
        self.count = 0
        self.e2e.reset()
        return count, encoded


class Requests:
    """One request entry per claim (empty or not) and completion, for Locust's statistics (the web
    UI), as each worker's step leaves its last latencies; the supervisor fires them."""

    def __init__(self) -> None:
        self.pending: list[tuple[str, float, int]] = []
        self._seen: dict[str, tuple[int, int]] = {}

    def after_step(self, stats: WorkerStats) -> None:
        assert isinstance(stats.claim, LastHistogram) and isinstance(stats.complete, LastHistogram)
        assert isinstance(stats.e2e, LastHistogram)
        processed, empty = self._seen.get(stats.name, (0, 0))
        if stats.processed > processed:
            self.pending += [
                ("claim", stats.claim.last_ms, 1),
                ("complete", stats.complete.last_ms, 1),
                ("end to end", stats.e2e.last_ms, 1),  # time_added to commit, on the server's clock
            ]
        elif stats.empty_claims > empty:
            self.pending.append(("claim (empty)", stats.claim.last_ms, 0))
        self._seen[stats.name] = (stats.processed, stats.empty_claims)

    def take(self) -> list[tuple[str, float, int]]:
        taken, self.pending = self.pending, []
        return taken


class Lines:
    """JSON lines from stdin, read on the loop; None at the end of file."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._buffer = b""
        self._fd = sys.stdin.fileno()
        os.set_blocking(self._fd, False)
        asyncio.get_running_loop().add_reader(self._fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        if not data:
            asyncio.get_running_loop().remove_reader(self._fd)
            self._queue.put_nowait(None)
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if line.strip():
                self._queue.put_nowait(json.loads(line))

    async def next(self) -> dict[str, Any] | None:
        return await self._queue.get()


class Reports:
    """JSON lines to the supervisor, on the pipe it gave (it reads all of them: a write never
    waits long)."""

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "w", encoding="utf-8")

    def say(self, kind: str, value: Any) -> None:
        try:
            self._out.write(json.dumps({kind: value}) + "\n")
            self._out.flush()
        except (BrokenPipeError, ValueError):  # the supervisor is gone: the end of stdin stops us too
            pass


class Child:
    """The workers of one Locust worker process, on this process's loop."""

    def __init__(self, reports: Reports) -> None:
        self.say = reports.say
        self.halt = Halt()
        self.tasks = Tasks(self.halt, self._failed)
        self.counter = ProcessedCounter(NO_TARGET)
        self.timeline = DeltaTimeline()
        self.requests: Requests | None = None
        self.crew: Crew | None = None
        self.producer: ShareProducer | None = None  # its producer sessions in a spread run
        self.log: RunLog | None = None
        self.runner = "?"
        self.dsns: tuple[str, ...] = ()
        self.started = 0.0
        self.cpu_at_start: CpuReading | None = None
        self.connected: tuple[CpuReading, int] | None = None
        self.failure: str | None = None
        self._reports = 0

    def _failed(self, where: str, exc: BaseException) -> None:
        text = f"{where}: {reason(exc, *self.dsns)}"
        if self.failure is None:
            self.failure = text
            if self.log is not None:
                self.log.event(f"error: {text}")
            self.say("failed", {"error": text, "lost": isinstance(exc, ServerLostError)})

    def clock(self) -> float:
        return time.perf_counter() - self.started if self.started else 0.0

    async def run(self) -> int:
        lines = Lines()
        first = await lines.next()
        if first is None:
            return 0
        host = socket.gethostname()
        try:
            await self._take(first)
        except SimError as exc:
            self.say("failed", {"error": str(exc), "lost": False})
            return 1
        except psycopg.Error as exc:
            why = reason(exc, *self.dsns)
            self.say(
                "failed", {"error": f"worker process on {host} cannot use the database: {why}", "lost": False}
            )
            return 1
        except Exception as exc:  # a plan this version cannot read, a log it cannot write
            self.say(
                "failed", {"error": f"worker process on {host}: {type(exc).__name__}: {exc}", "lost": False}
            )
            return 1
        self.say("ready", True)
        while (line := await lines.next()) is not None and "stop" not in line:
            self._command(line)
        await self._stop()
        return 0

    async def _take(self, line: dict[str, Any]) -> None:
        plan = m.Plan.from_data(line["plan"])
        settings, dsn = plan.settings, str(line["dsn"])
        self.runner = plan.runner
        listen = plan.listen_dsn or dsn
        self.dsns = (dsn, listen)
        self.log = RunLog(str(line["logfile"]))
        self.log.open()
        names = ", ".join(a.name for a in plan.workers)
        self.log.event(
            f"worker process {plan.runner} (pid {line['supervisor']}): database {redact(dsn)} from"
            f" {line['source']}; workers {names}, on an event loop in its child, pid {os.getpid()}"
        )
        await (await connect_async(dsn)).close()  # a bad DSN or login is reported before the run
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
        crew_plan = CrewPlan(
            dsn,
            SessionPlan(**plan.session),
            WorkTime.parse(settings["work_ms"]),
            float(settings["reconnect_timeout"]),
            float(settings["fail_rate"]),
            settings["wakeup"] == WakeupMode.NOTIFY,
            float(settings["poll_interval"]),
            queue_types(int(settings["types"])),
            settings["tx"] == TxMode.SPLIT,
            plan.listen_dsn,
        )
        seeds = [a.seed for a in plan.workers]
        self.crew = Crew(
            stats, seeds, crew_plan, self.log, self.counter, self.timeline, self.clock, self.halt, self.tasks,
            self._all_connected,
        )  # fmt: skip
        self.requests = Requests() if plan.fire_requests else None
        if plan.producing is not None:
            self.producer = ShareProducer(
                ProducerShare(**plan.producing),
                settings,
                dsn,
                self.halt,
                self.log.event,
                self.timeline.reasons,
            )
            await self.producer.open()
        await self.crew.ready()

    def _all_connected(self) -> None:
        if self.connected is None:
            self.connected = (CpuReading.now(), self.counter.count)

    def _command(self, line: dict[str, Any]) -> None:
        crew = self.crew
        assert crew is not None
        if "start" in line and not self.started:
            self.started = time.perf_counter()
            self.cpu_at_start = CpuReading.now()
            crew.start(self.requests.after_step if self.requests is not None else None)
            self.tasks.start("reports", self._report_every())
        elif "produce" in line and self.producer is not None and self.started:
            self.producer.start(float(line["produce"]), self.tasks)
        elif "crash" in line:
            crew.crash(line["crash"])
        elif "allow" in line:
            crew.allow(int(line["allow"]))

    async def _report_every(self) -> None:
        bell = self.halt.bell()
        try:
            while not await self.halt.sleep(m.REPORT_S, bell):
                self.report(final=False)
        finally:
            self.halt.forget(bell)

    async def _stop(self) -> None:
        await self.tasks.stop(STOP_GRACE_S)
        self.halt.close()
        self.report(final=True)
        if self.log is not None:
            self.log.event(f"worker process {self.runner} stopped: {self.counter.count} processed")
            self.log.close()

    def report(self, final: bool) -> None:
        crew = self.crew
        if crew is None:
            return
        self._reports += 1
        full = final or self._reports % m.FULL_EVERY == 0
        count, e2e = self.timeline.take()
        data: dict[str, Any] = {
            "final": final,
            "workers": [m.counters(s) for s in crew.stats],
            "histograms": {s.name: m.histograms(s) for s in crew.stats} if full else None,
            "count": count,
            "e2e": e2e,
            "in_doubt": self.counter.in_doubt,
            "busy": crew.busy,
            "requests": self.requests.take() if self.requests is not None else [],
            "reasons": self.timeline.reasons.take(),
        }
        if self.producer is not None:
            data["enqueue"] = self.producer.report(full, final)
        before = self.cpu_at_start
        if before is not None:  # this process's own cost, since its workers started
            logins = None
            if self.connected is not None:
                reading, finished = self.connected
                logins = Logins(
                    len(crew.stats), reading.cpu_s - before.cpu_s, reading.at - before.at, finished
                )
            data["cpu"] = before.until(CpuReading.now(), "", self.counter.count, logins).as_json()
        self.say("report", data)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reports = Reports(int(sys.argv[sys.argv.index("--reports") + 1]))
    loop = new_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(Child(reports).run())
    finally:
        loop.close()


if __name__ == "__main__":
    sys.exit(main())
