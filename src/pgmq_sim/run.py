"""One run, in named phases: check, prepare, produce, start, watch, stop, collect.

The main thread coordinates and never waits on the server itself: each database
phase runs on a helper thread, with a bound, so a signal is honoured in every
phase and a frozen server cannot hang the run. Once the database has been
changed, whatever ends the run (done, error, stall, signal, lost server) ends in
a result, with the audit when the server can be reached.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from rich.console import Console

from pgmq_sim.audit import AuditVerdict, audit
from pgmq_sim.chaos import FaultActions, FaultSchedule, parse_chaos, pick
from pgmq_sim.diagnose import stall_causes
from pgmq_sim.errors import ServerLostError, SimError, UsageError
from pgmq_sim.housekeeping import Housekeeper
from pgmq_sim.producer import BatchWriter, MessageSource, RateProducer, prefill
from pgmq_sim.progress import RunProgress
from pgmq_sim.queue import QueueDatabase, SessionPlan, TableHealth, connect_worker, is_connection_lost
from pgmq_sim.result import Fault, RetryFigures, RunResult
from pgmq_sim.runlog import RunLog
from pgmq_sim.server import Server, connect, reason
from pgmq_sim.settings import QUEUE_TYPES, Settings
from pgmq_sim.sqlfiles import ClaimStrategy, SqlSource
from pgmq_sim.stats import Timeline, WorkerStats
from pgmq_sim.threads import RunThread, join_all
from pgmq_sim.wakeup import NotifyWakeup, PollWakeup, Wakeup
from pgmq_sim.worker import ProcessedCounter, Worker, WorkerLoop, WorkerPlan

T = TypeVar("T")
TICK_S = 0.2
STOP_GRACE_S = 2.0
PING_TIMEOUT_S = 5.0
FIRST_ANSWER_S = 4.0  # below the connect timeout: a frozen server is told from a restarting one
COLLECT_TIMEOUT_S = 600.0
OWN_CONNECTIONS = 2  # the tool's own: each phase's work, and the housekeeper's


@dataclass(frozen=True)
class RunInput:
    """Everything a run needs that was read and checked before the server was touched."""

    settings: Settings
    schema: SqlSource
    strategy: ClaimStrategy
    notes: tuple[str, ...] = ()

    @property
    def files(self) -> dict[str, dict[str, str]]:
        files = {"schema": self.schema.as_json(), "claim": self.strategy.claim.as_json()}
        if self.strategy.schema:
            files["strategy_schema"] = self.strategy.schema.as_json()
        return files


class Signals:
    """What the signal handler tells the run: stop cleanly (first), stop waiting (second)."""

    def __init__(self) -> None:
        self.interrupt = threading.Event()
        self.hurry = threading.Event()


class NotAnswering(SimError):
    exit_code = 3


def outcome_of(exc: BaseException) -> str:
    """How an error ends a run: a server gone or silent is exit 3, anything else a failure."""
    if isinstance(exc, NotAnswering):
        return "server-unresponsive"
    if isinstance(exc, ServerLostError):
        return "server-lost"
    return "failed"


class FirstError:
    """The first failure reported by any thread; it stops the run."""

    def __init__(self, stop: threading.Event) -> None:
        self._lock = threading.Lock()
        self._stop = stop
        self.error: tuple[str, BaseException] | None = None

    def report(self, where: str, exc: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = (where, exc)
        self._stop.set()

    def describe(self, dsn: str) -> tuple[str, str] | None:
        """(outcome, one line) for the first failure, if any."""
        if self.error is None:
            return None
        where, exc = self.error
        if isinstance(exc, ServerLostError | NotAnswering):
            return outcome_of(exc), str(exc)
        if isinstance(exc, SimError):
            return "failed", f"{where}: {exc}"
        return "failed", f"{where} failed: {reason(exc, dsn)}; check the server and the SQL files"


def call_bounded(
    operation: Callable[[], T], timeout: float, signals: Signals, what: str, stop_on_interrupt: bool = False
) -> T:
    """Run a database operation on a helper thread and wait for it, at most `timeout` seconds,
    and not at all once a second signal says to stop waiting (or, if asked, the first)."""
    box: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            box.append(operation())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name=what, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while thread.is_alive():
        thread.join(TICK_S)
        if signals.hurry.is_set() or (stop_on_interrupt and signals.interrupt.is_set()):
            raise InterruptedError(what)
        if time.monotonic() > deadline:
            raise NotAnswering(f"{what} got no answer within {timeout:g} s")
    if failure:
        raise failure[0]
    return box[0]


def session_plan(settings: Settings, strategy: ClaimStrategy) -> SessionPlan:
    """What each worker's session prepares, from the settings: the same in every process."""
    return SessionPlan(
        strategy.wrapped_claim_sql,
        settings.delmsg,
        settings.audit,
        mode="split" if settings.tx == "split" else "single" if settings.fail_rate else "basic",
        lease_s=settings.lease,
        max_attempts=settings.max_attempts,
        backoff_ms=settings.backoff_ms,
    )


class Run:
    """One run of one workload; `execute` takes it through its phases."""

    def __init__(
        self, given: RunInput, server: Server, console: Console, log: RunLog, signals: Signals
    ) -> None:
        self.given = given
        self.settings = given.settings
        self.server = server
        self.console = console
        self.log = log
        self.signals = signals
        self.stop = threading.Event()
        self.done = threading.Event()
        self.errors = FirstError(self.stop)
        self.db = QueueDatabase(server.dsn, self.settings.reconnect_timeout, self.stop)
        rng = random.Random(self.settings.seed)
        self._rng = rng
        self._source_rng = random.Random(rng.random())
        self.timeline = Timeline()
        self.counter = ProcessedCounter(self.settings.fill_db, self.done)
        self.stats = [
            WorkerStats(f"w{i + 1}", self.settings.worker_type(i)) for i in range(self.settings.workers)
        ]
        self.workers: list[Worker] = []
        self.threads: list[RunThread] = []
        self.writer = BatchWriter(server.dsn, self.settings.reconnect_timeout, self.stop, log.event)
        self.source: MessageSource | None = None
        self.wakeup: Wakeup = PollWakeup(self.settings.poll_interval, self.stop)
        self.started = 0.0
        self.elapsed = 0.0
        self.outcome = "completed"
        self.error: str | None = None
        self.causes: list[str] = []
        self.notes: list[str] = list(given.notes)
        self.faults: list[Fault] = []  # appended by the schedule's threads (list.append is atomic)
        self.chaos = parse_chaos(self.settings.chaos) if self.settings.chaos else []
        self.housekeeper: Housekeeper | None = None
        self.schedule: FaultSchedule | None = None
        self.changed = False  # the database has been changed: from now on, every end is reported
        self.runners: list[str] | None = None  # per worker, the process or host that ran it

    def clock(self) -> float:
        return time.perf_counter() - self.started if self.started else 0.0

    # -- the phases ---------------------------------------------------------------------

    def execute(self) -> RunResult:
        self.log.on_failure(lambda exc: self.errors.report("log", exc))
        try:
            self.check()
            self.prepare()
            self.produce()
            self.start()
            self.watch()
        except InterruptedError:
            self.outcome = "interrupted"
        except SimError as exc:
            if not self.changed:
                raise  # nothing was changed: one line says why
            self.outcome, self.error = outcome_of(exc), str(exc)
        except psycopg.Error as exc:
            text = f"database error: {reason(exc, self.server.dsn)}; check the server"
            if not self.changed:
                raise SimError(text) from None
            self.outcome, self.error = "failed", text
        finally:
            self.halt()
            self.log.on_failure(None)
        return self.collect()

    def check(self) -> None:
        """Everything that can fail before the database is changed."""
        settings = self.settings
        # the first connection says, in one line, why there is none (never the password)
        call_bounded(lambda: connect(self.server.dsn).close(), 30, self.signals, "connecting", True)
        budget, role_left = call_bounded(
            self.db.connection_budget, 30, self.signals, "connection check", True
        )
        needed = (
            settings.workers
            + OWN_CONNECTIONS
            + (1 if settings.rate else 0)
            + (1 if settings.wakeup == "notify" else 0)
            + sum(1 for f in self.chaos if f.kind in ("hold-xmin", "lock-table"))
        )
        for left, whose in ((budget, "the server"), (role_left, "this role's CONNECTION LIMIT")):
            if left is not None and needed > left:
                raise UsageError(
                    f"-workers {settings.workers} needs {needed} connections (workers, producer,"
                    f" listener, fault sessions and the tool's own two) but {whose} allows {left} more now;"
                    " use fewer workers or raise max_connections"
                )
        if any(f.kind == "restart-server" for f in self.chaos) and self.server.restart is None:
            if not settings.chaos_allow_restart:
                raise UsageError(
                    "-chaos restart-server on a -dsn server restarts every session on it;"
                    " allow it with -chaos-allow-restart (the embedded server needs no flag)"
                )
            if not call_bounded(self.db.may_run_programs, 30, self.signals, "privilege check", True):
                raise UsageError(
                    "-chaos restart-server on a -dsn server needs a superuser (or pg_execute_server_program):"
                    " it crash-restarts the server by killing a backend from COPY TO PROGRAM"
                )
        tables = call_bounded(self.db.tables, 30, self.signals, "table check", True)
        foreign = [name for name, (exists, ours) in tables.items() if exists and not ours]
        if foreign and not settings.replace_tables:
            raise UsageError(
                f"table(s) {', '.join(foreign)} exist and were not created by pgmq-sim; a run drops and"
                " recreates them: use another database, or pass -replace-tables to replace them"
            )
        previous = (
            call_bounded(self.db.previous_run, 30, self.signals, "previous run check", True)
            if tables["pgmq_sim_run"][0]
            else None
        )
        if previous is not None and not previous.finished:
            line = (
                f"replacing the data of an unfinished run (started {previous.started_at:%Y-%m-%d %H:%M:%S},"
                f" {previous.produced} of {previous.target} messages produced);"
                " `pgmq-sim audit` checks such a queue before a new run replaces it"
            )
            self.notes.append(line)
            self.console.print(f"note: {line}")

    def prepare(self) -> None:
        settings, strategy = self.settings, self.given.strategy
        record = (uuid.uuid4().hex, settings.fill_db, strategy.ordered, settings.audit, settings.as_json())
        self.log.open()
        self.changed = True  # install is one transaction: a failure inside it changes nothing
        try:
            call_bounded(
                lambda: self.db.install(
                    self.given.schema,
                    strategy,
                    settings.audit,
                    settings.wakeup == "notify",
                    record,
                    settings.retrying,
                ),
                60,
                self.signals,
                "installing the schema",
            )
        except UsageError:
            self.changed = False
            raise
        except psycopg.Error as exc:
            if not is_connection_lost(exc):
                self.changed = False  # the install's one transaction rolled back
            raise
        server_now = call_bounded(self.db.server_clock, 30, self.signals, "server clock")
        self.source = MessageSource(settings.orders, self._source_rng, server_now)
        self.log.event(
            f"schema ready from {self.given.schema.path} ({self.given.schema.origin}); claim strategy"
            f" {strategy.label} ({strategy.claim}); wake-up {settings.wakeup}; seed {settings.seed}"
        )

    def produce(self) -> None:
        """Prefill, unless messages arrive at a rate while the workers run."""
        settings, source = self.settings, self.source
        assert source is not None
        if settings.rate:
            return
        began = time.monotonic()
        # a first signal stops the prefill between chunks; the run then reports what it wrote
        stop_prefill = threading.Event()
        prefill_thread = threading.Thread(
            target=self._guarded,
            args=("producer", lambda: prefill(self.writer, source, settings.fill_db, stop_prefill)),
            name="prefill",
            daemon=True,
        )
        prefill_thread.start()
        last_committed, last_change = 0, time.monotonic()
        while prefill_thread.is_alive():
            prefill_thread.join(TICK_S)
            if self.signals.interrupt.is_set():
                stop_prefill.set()
                if self.signals.hurry.is_set():
                    break
            if self.writer.committed != last_committed:
                last_committed, last_change = self.writer.committed, time.monotonic()
            elif time.monotonic() - last_change > settings.stall_timeout:
                self._check_answering("the prefill")  # a slow COPY is fine; a frozen server is not
                last_change = time.monotonic()
        self.timeline.arrived(0, self.writer.committed)
        described = self.errors.describe(self.server.dsn)
        if described is not None:
            outcome, text = described
            error = {"server-lost": ServerLostError, "server-unresponsive": NotAnswering}.get(
                outcome, SimError
            )
            raise error(text)
        if self.signals.interrupt.is_set():
            raise InterruptedError("prefill")
        call_bounded(self.db.analyze, 120, self.signals, "ANALYZE")
        self.log.event(f"prefilled {self.writer.committed} messages in {time.monotonic() - began:.2f} s")

    def _reporter(self, where: str) -> Callable[[BaseException], None]:
        return lambda exc: self.errors.report(where, exc)

    def _guarded(self, where: str, operation: Callable[[], object]) -> None:
        try:
            operation()
        except BaseException as exc:
            self.errors.report(where, exc)

    def start(self) -> None:
        settings = self.settings
        if settings.wakeup == "notify":
            self.wakeup = call_bounded(
                lambda: NotifyWakeup(
                    lambda: connect_worker(self.server.dsn),
                    settings.poll_interval or 1.0,
                    settings.reconnect_timeout,
                    self.stop,
                    self._reporter("notify listener"),
                ),
                30,
                self.signals,
                "listener connection",
            )
        self.started = time.perf_counter()
        session = session_plan(settings, self.given.strategy)
        plan = WorkerPlan(
            self.server.dsn,
            session,
            settings.work,
            settings.reconnect_timeout,
            self.clock,
            settings.fail_rate,
        )
        for stats in self.stats:
            loop = WorkerLoop(
                stats,
                plan,
                self.wakeup,
                self.log,
                self.counter,
                self.timeline,
                self.stop,
                random.Random(self._rng.random()),
            )
            self.workers.append(Worker(loop, self.stop, self._reporter(f"worker {stats.name}")))
        self.threads = list(self.workers)
        self.threads += self.rate_producer()
        self.log.event(
            f"starting {settings.workers} workers"
            + (f" and a producer at {settings.rate:g}/s" if settings.rate else "")
        )
        for thread in self.threads:
            thread.start()
        self.start_housekeeping()

    def rate_producer(self) -> list[RunThread]:
        """With -rate, the one producer (on the master, wherever the workers run)."""
        settings = self.settings
        if not settings.rate:
            return []
        assert self.source is not None
        return [
            RateProducer(
                self.writer,
                self.source,
                settings.fill_db,
                settings.rate,
                self.stop,
                self.clock,
                self.timeline,
                self._reporter("producer"),
            )
        ]

    def start_housekeeping(self) -> None:
        """Recovery, sampling and the fault schedule: the run's own threads, wherever its workers run."""
        settings = self.settings
        self.housekeeper = Housekeeper(
            self.db,
            self.timeline,
            self.clock,
            self.stop,
            self._reporter("housekeeping"),
            self.log,
            recover_every_s=min(1.0, settings.lease / 4) if settings.tx == "split" else None,
        )
        self.threads.append(self.housekeeper)
        self.housekeeper.start()
        if self.chaos:
            self.schedule = FaultSchedule(
                self.chaos,
                self._fault_actions(),
                self.clock,
                self.stop,
                self._record,
                lambda exc: reason(exc, self.server.dsn),
            )
            self.schedule.start()

    def crash_workers(self, names: list[str]) -> None:
        """Make these workers die mid-work (a fault); a distributed run asks their processes."""
        for worker in self.workers:
            if worker.name in names:
                worker.loop.crash()

    def _record(self, fault: Fault) -> None:
        self.faults.append(fault)
        self.log.event(f"fault at {fault.at_s:.2f} s: {fault.kind}: {fault.detail}")

    def _fault_actions(self) -> FaultActions:
        rng = random.Random(self._rng.random())

        def kill_connections(count: int) -> str:
            pids = pick(rng, self.db.worker_backends(), count)  # found on the server: any host's
            ended = self.db.terminate(pids)
            return f"terminated {ended} worker backend(s): pid {', '.join(map(str, pids))}"

        def kill_worker(count: int) -> str:
            names = [self.stats[i].name for i in sorted(pick(rng, list(range(len(self.stats))), count))]
            self.crash_workers(names)
            return "crashed " + ", ".join(names)

        def restart_server() -> str:
            if self.server.restart is not None:
                began = time.monotonic()
                self.server.restart()
                return f"embedded server restarted in {time.monotonic() - began:.2f} s"
            self.db.crash_restart()
            return "crash restart: a backend was SIGKILLed, the postmaster reset every session"

        def hold(what: str, seconds: float) -> str:
            before = self.timeline.last_dead_tuples()
            self.db.hold(what, seconds, self.stop)
            after = self.timeline.last_dead_tuples()
            return f"released; dead tuples {before} -> {after}"

        return FaultActions(kill_connections, kill_worker, restart_server, hold)

    def watch(self) -> None:
        """Wait for the target, a signal, a failure or a stall; say which ended the run."""
        settings = self.settings
        progress = RunProgress(
            self.console, self.stats, settings.fill_db, lambda: self.writer.committed, settings.progress
        )
        last_count, last_change = 0, time.monotonic()
        try:
            while not self.done.wait(TICK_S):
                progress.update()
                if self.signals.interrupt.is_set():
                    self.outcome = "interrupted"
                    return
                described = self.errors.describe(self.server.dsn)
                if described is not None:
                    self.outcome, self.error = described
                    return
                # progress is any finished message or recorded failure, not only completions
                count = self.counter.count + sum(s.failed_attempts for s in self.stats)
                now = time.monotonic()
                if count != last_count:
                    last_count, last_change = count, now
                in_doubt = self.counter.in_doubt
                if in_doubt and self.counter.count + in_doubt >= settings.fill_db and self._nothing_remains():
                    return
                if now - last_change >= settings.stall_timeout and self.writer.committed > self.counter.count:
                    self._diagnose_stall()
                    return
        finally:
            self.elapsed = self.clock()
            progress.close()

    def _nothing_remains(self) -> bool:
        try:
            remaining = call_bounded(self.db.remaining, PING_TIMEOUT_S, self.signals, "remaining count")
        except (NotAnswering, psycopg.Error):
            return False
        return remaining == 0 and self.writer.committed >= self.settings.fill_db

    def _diagnose_stall(self) -> None:
        self.elapsed = self.clock()
        try:
            self._check_answering("the run")
        except NotAnswering as exc:
            self.outcome, self.error = "server-unresponsive", str(exc)
            return
        self.outcome = "stalled"
        self.causes = call_bounded(  # the workers' backends, found on the server, from any host
            lambda: stall_causes(self.db, {s.queue_type for s in self.stats}, self.db.worker_backends()),
            30,
            self.signals,
            "stall diagnosis",
        )

    def _check_answering(self, what: str) -> None:
        """After -stall-timeout without progress: a server that does not answer is named."""
        try:
            call_bounded(self.db.ping, PING_TIMEOUT_S, self.signals, "server ping")
        except (NotAnswering, psycopg.Error) as exc:
            raise NotAnswering(
                f"the server ({self.server.label}) did not answer: {what} made no progress for"
                f" {self.settings.stall_timeout:g} s and a new connection got no answer within"
                f" {PING_TIMEOUT_S:g} s"
                + (f" ({reason(exc, self.server.dsn)})" if isinstance(exc, psycopg.Error) else "")
            ) from None

    def halt(self) -> None:
        """Stop every thread, within bounds; in-flight messages roll back."""
        if not self.elapsed:
            self.elapsed = self.clock()
        self.stop.set()
        for worker in self.workers:
            worker.loop.interrupt()
        self.wakeup.close()
        if self.schedule is not None:
            self.schedule.join_helpers(STOP_GRACE_S)
        stuck = join_all(self.threads, 0.2 if self.signals.hurry.is_set() else STOP_GRACE_S)
        if stuck:
            self.notes.append(f"{len(stuck)} thread(s) still waiting on the server were left behind")
        self.writer.close()
        if not self.changed:
            return
        self.log.event(f"{self.outcome}: {self.counter.count} processed in {self.elapsed:.2f} s")
        if self.error:
            self.log.event(f"error: {self.error}")
        for cause in self.causes:
            self.log.event(f"stall: {cause}")

    def collect(self) -> RunResult:
        """Table health and the audit, when the server answers; then the result."""
        health: TableHealth | None = None
        blocking: list[tuple[str, int, int, float]] | None = None
        verdict: AuditVerdict | None = None
        settings = self.settings
        produced = self.writer.committed
        # the run's stop is set by now: this session keeps reconnecting until a second signal
        db = QueueDatabase(self.server.dsn, settings.reconnect_timeout, self.signals.hurry)
        gone = self.outcome in ("server-unresponsive", "server-lost")
        if not self.signals.hurry.is_set() and self.changed:
            try:
                try:  # no answer at all (frozen) is final; a refusal (restarting) is waited out
                    call_bounded(db.ping, FIRST_ANSWER_S, self.signals, "server ping")
                except psycopg.Error:
                    if gone:
                        raise
                    call_bounded(
                        db.server_clock, settings.reconnect_timeout + PING_TIMEOUT_S, self.signals, "server"
                    )
                call_bounded(lambda: db.finish_run(self.outcome), 30, self.signals, "run record")
                if settings.tx == "split":  # what stopped workers held goes back before the audit
                    back = call_bounded(db.recover, 30, self.signals, "recovery")
                    if back:
                        self.notes.append(
                            f"{len(back)} message(s) in progress at the end went back to pending"
                        )
                produced = call_bounded(db.produced, 30, self.signals, "produced count")
                health = call_bounded(db.table_health, COLLECT_TIMEOUT_S, self.signals, "table health")
                if settings.retrying:
                    blocking = call_bounded(db.group_blocking, COLLECT_TIMEOUT_S, self.signals, "blocking")
                if settings.audit:
                    ordered, complete = self.given.strategy.ordered, self.outcome == "completed"
                    verdict = call_bounded(
                        lambda: audit(db, produced, ordered, complete, settings.retrying),
                        COLLECT_TIMEOUT_S,
                        self.signals,
                        "audit",
                    )
                    self.log.event(f"audit {verdict.verdict}: " + ("; ".join(verdict.problems()) or "clean"))
            except (SimError, psycopg.Error, InterruptedError) as exc:
                why = "a second signal" if isinstance(exc, InterruptedError) else reason(exc, self.server.dsn)
                self.notes.append(f"table health and audit skipped: {why}")
                self.log.event(f"audit skipped: {why}")
        source = self.source
        return RunResult.from_stats(
            settings=settings,
            server=self.server.label,
            strategy=self.given.strategy.label,
            ordered=self.given.strategy.ordered,
            files=self.given.files,
            produced=produced,
            elapsed_s=self.elapsed,
            outcome=self.outcome,
            stats=self.stats,
            runners=self.runners,
            groups_per_type={t: len(source.groups.get(t, ())) if source else 0 for t in QUEUE_TYPES},
            timeline=self.timeline.samples(self.elapsed),
            health=health,
            audit=verdict,
            stall_causes=self.causes,
            error=self.error,
            notes=self.notes,
            faults=sorted(self.faults, key=lambda f: f.at_s),
            retries=self._retries(blocking) if settings.retrying else None,
            snapshot=self.housekeeper.longest_hold() if self.housekeeper else None,
        )

    def _retries(self, blocking: list[tuple[str, int, int, float]] | None) -> RetryFigures:
        return RetryFigures(
            failed_attempts=sum(s.failed_attempts for s in self.stats),
            dead_lettered=sum(s.dead_lettered for s in self.stats),
            recovered=self.housekeeper.recovered if self.housekeeper else 0,
            lost_ownership=sum(s.lost_ownership for s in self.stats),
            crashes=sum(s.crashes for s in self.stats),
            blocked_groups=tuple(blocking or ()),
        )
