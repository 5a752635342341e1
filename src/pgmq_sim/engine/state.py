"""One run's state: what every phase and part reads and writes, in one object."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pgmq_sim.actors.arrivals import RateProducer
from pgmq_sim.actors.bells import Halt
from pgmq_sim.actors.books import ProcessedCounter
from pgmq_sim.actors.bystander import Bystander
from pgmq_sim.actors.chaos import FaultSchedule, FaultSpec, parse_chaos, pressure_faults
from pgmq_sim.actors.housekeeping import Housekeeper, PoolerWatch
from pgmq_sim.actors.producer import BatchWriter, MessageSource, ProducedBook
from pgmq_sim.actors.threads import RunThread
from pgmq_sim.db.batches import evidence_for
from pgmq_sim.db.faults import ServerFaults
from pgmq_sim.db.queue import QueueDatabase
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.values import Message, QueueShape
from pgmq_sim.db.views import ServerViews
from pgmq_sim.designs.design import QueueDesign
from pgmq_sim.engine.accounting import LiveAccount
from pgmq_sim.engine.bounded import FirstError, Signals
from pgmq_sim.engine.judging import LiveJudge
from pgmq_sim.engine.loop import RunLoop
from pgmq_sim.engine.meters import Meters
from pgmq_sim.engine.preflight import Preflight
from pgmq_sim.model.census import ServerCensus
from pgmq_sim.model.events import Fault
from pgmq_sim.model.kinds import Outcome
from pgmq_sim.model.reasons import RunEnding
from pgmq_sim.result.costs import ProcessCpu
from pgmq_sim.result.enqueues import EnqueueTally
from pgmq_sim.result.holders import LockCensusTally
from pgmq_sim.result.observer import RunObserver
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import Timeline
from pgmq_sim.result.waits import WaitTally
from pgmq_sim.result.window_limits import WindowLimitTally
from pgmq_sim.runlog import RunLog
from pgmq_sim.server import Server
from pgmq_sim.settings import Settings


@dataclass(frozen=True)
class RunInput:
    """Everything a run needs that was read and checked before the server was touched."""

    settings: Settings
    design: QueueDesign
    notes: tuple[str, ...] = ()

    @property
    def files(self) -> dict[str, dict[str, str]]:
        return self.design.files


@dataclass
class RunState:
    """Shared by the phases (on the main thread), the run's loop and its few threads (which only
    append to lists, set events and write their own counters). What the check established and the
    run never changes is one record, `preflight` (engine/preflight); the rest changes as the run goes."""

    given: RunInput
    server: Server
    observer: RunObserver
    log: RunLog
    signals: Signals
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    timeline: Timeline = field(default_factory=Timeline)
    halt: Halt = field(default_factory=Halt)  # the stop, as the loop's tasks see it (set on the loop)
    loop: RunLoop | None = None  # the run's event loop, once something runs on it
    threads: list[RunThread] = field(default_factory=list)  # the bystander, the pooler's watch
    source: MessageSource | None = None
    started: float = 0.0  # perf_counter when the workers started
    elapsed: float = 0.0
    outcome: Outcome = Outcome.COMPLETED
    error: str | None = None
    ended_by: RunEnding | None = None  # the server's error that ended the run (engine/ended_by)
    causes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)  # appended by the schedule's threads
    housekeeper: Housekeeper | None = None
    pooler_watch: PoolerWatch | None = None
    live_judge: LiveJudge | None = None  # the live audit (engine/judging), where it runs
    live_account: LiveAccount | None = None  # the latency account read as it goes (engine/accounting)
    window_limits: WindowLimitTally = field(default_factory=WindowLimitTally)  # engine/limit_watch's
    run_id: str = ""  # the run record's, once installed
    waits: WaitTally = field(default_factory=WaitTally)  # the housekeeper's samples
    locks: LockCensusTally = field(default_factory=LockCensusTally)  # and its lock census
    schedule: FaultSchedule | None = None
    changed: bool = False  # the database has been changed: from now on, every end is reported
    runners: list[str] | None = None  # per worker, the process or host that ran it
    process_cpu: list[ProcessCpu] = field(default_factory=list)  # worker processes elsewhere
    preflight: Preflight | None = None  # what the check established, set once it passed; never changed
    census: ServerCensus | None = None  # the settings that shape the queue: read by the prepare, once
    # its tables exist (the check changes nothing, so it cannot read theirs)
    ticker: dict[str, Any] | None = None  # -queue pgq: the ticker's settings and its queues', for the
    # report: the prepare's, once pgqd started and the queues exist
    bystander: Bystander | None = None
    phase: Callable[[], str] = lambda: ""  # what the run is doing now (a sweep's step), for displays
    # a spread run (distributed/producing): starts the worker processes' producers at the run's zero
    spread_producers: Callable[[float], None] | None = None
    enqueue_runners: list[tuple[str, int, int, int]] = field(default_factory=list)  # runner, sessions,
    # messages written, transactions: each producing process's, as last reported
    cut_off: list[Message] = field(default_factory=list)  # a spread run's arrivals owed at its end
    enqueues_stopped: bool = False  # a spread run lost a producing process: its groups' enqueues stopped

    def __post_init__(self) -> None:
        settings = self.settings
        self.errors = FirstError(self.stop)
        sessions = Sessions(self.server.dsn, settings.reconnect_timeout, self.stop)
        design = self.design
        lease = settings.lease if design.at_least_once else None
        self.db = QueueDatabase(
            sessions,
            QueueShape(
                design.seed_table,
                pending_sql=design.pending.text if design.pending is not None else None,
                redelivery_lease_s=lease,
                recover_sql=design.recover.text if design.recover is not None else None,
                by_priority=design.by_priority and settings.priority is not None,
            ),
        )
        self.views = ServerViews(sessions)
        self.server_faults = ServerFaults(sessions)
        self.rng = random.Random(settings.seed)
        self.source_rng = random.Random(self.rng.random())
        self.counter = ProcessedCounter(settings.fill_db, self.done)
        self.stats = [
            WorkerStats(name=f"w{i + 1}", queue_type=settings.worker_type(i)) for i in range(settings.workers)
        ]
        self.stats_by_name = {s.name: s for s in self.stats}
        self.produced = ProducedBook()  # what the producer's sessions committed, together
        self.producers = [
            BatchWriter(
                self.server.dsn,
                settings.reconnect_timeout,
                self.halt,
                self.log.event,
                evidence_for(settings.delmsg, settings.audit, self.design.seed_table),
                self.design.enqueue.text,
                self.timeline.reasons,
                self.clock,
                self.produced,
            )
            for _ in range(settings.producers)
        ]
        self.enqueues = EnqueueTally()  # every enqueue made while the workers run, timed
        self.producer_waits = WaitTally()  # the producer's sessions in the wait samples
        self.producing: RateProducer | None = None  # the paced producer, once started
        self.chaos: list[FaultSpec] = parse_chaos(settings.chaos) if settings.chaos else []
        self.chaos += pressure_faults(settings.phases)
        for line in self.given.notes:  # the plan's, said in the summary with the rest
            self.note(line, screen=False)
        self.meters = Meters(
            self.views,
            self.server,
            self.signals,
            lambda line: self.note(line, screen=False),
            self.db.shape.tables,
        )

    @property
    def settings(self) -> Settings:
        return self.given.settings

    @property
    def design(self) -> QueueDesign:
        return self.given.design

    @property
    def dsns(self) -> tuple[str, str | None, str | None]:
        """Every DSN the run was given, to hide from whatever it prints: the server's, -listen-dsn,
        -pooler-admin."""
        return self.server.dsn, self.settings.listen_dsn, self.settings.pooler_admin

    def on_loop(self) -> RunLoop:
        """The run's event loop, started on first use."""
        if self.loop is None:
            self.loop = RunLoop(self.halt, self.errors.report)
        return self.loop

    def clock(self) -> float:
        """Seconds since the workers started (0 before)."""
        return time.perf_counter() - self.started if self.started else 0.0

    def begin_clock(self) -> None:
        self.started = time.perf_counter()

    def note(self, line: str, *, screen: bool = True) -> None:
        """Something the person should know: in the report and the log, and on screen as it happens
        unless `screen` is False (the summary shows every note at the end). The one way a note is
        recorded, from any part of the run."""
        self.notes.append(line)
        self.log.event(f"note: {line}")
        if screen:
            self.observer.say(f"note: {line}")

    def record_fault(self, fault: Fault) -> None:
        self.faults.append(fault)
        self.log.event(f"fault at {fault.at_s:.2f} s: {fault.kind}: {fault.detail}")
