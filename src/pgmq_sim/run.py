"""One run, end to end: schema, producer, workers, then stats, health and audit."""

from __future__ import annotations

import random
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout
from rich.console import Console

from pgmq_sim.audit import audit
from pgmq_sim.diagnose import stall_causes, table_health
from pgmq_sim.errors import SimError
from pgmq_sim.producer import MessageSource, RateProducer, prefill
from pgmq_sim.progress import RunProgress
from pgmq_sim.report import RunResult, WorkerResult
from pgmq_sim.runlog import RunLog
from pgmq_sim.server import APPLICATION_NAME, Server, connect, first_line
from pgmq_sim.settings import QUEUE_TYPES, Settings
from pgmq_sim.sqlfiles import ClaimStrategy, prepare_claim, statement
from pgmq_sim.stats import LatencyHistogram, WorkerStats, timeline
from pgmq_sim.wakeup import NotifyWakeup, PollWakeup, Wakeup
from pgmq_sim.worker import ProcessedCounter, Worker, WorkerPlan

TICK_S = 0.2
SPARE_CONNECTIONS = 5
TRIAL_CLAIM = "pgmq_sim_trial_claim"
ADMIN_LOCK_TIMEOUT_MS = 3_000
STOP_GRACE_S = 2.0


@dataclass(frozen=True)
class RunInput:
    """Everything a run needs that was read and checked before the server was touched."""

    settings: Settings
    schema_sql: str
    schema_source: str
    strategy: ClaimStrategy


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

    def raise_if_any(self) -> None:
        if self.error is not None:
            where, exc = self.error
            if isinstance(exc, SimError):
                raise SimError(f"{where}: {exc}")
            raise SimError(f"{where} failed: {first_line(exc)}; check the server and the SQL files")


def _execute_file(conn: psycopg.Connection, sql: str, what: str, fix: str) -> None:
    try:
        conn.execute(sql)
    except psycopg.errors.LockNotAvailable:
        conn.rollback()
        raise SimError(
            f"{what} waited {ADMIN_LOCK_TIMEOUT_MS / 1000:g} s for a lock another session holds on"
            " the queue; end that session's transaction and run again"
        ) from None
    except psycopg.Error as exc:
        conn.rollback()
        raise SimError(f"{what} failed on the server: {first_line(exc)}; {fix}") from None


def prepare_database(conn: psycopg.Connection, given: RunInput) -> None:
    """Create the queue, the strategy's additions, the journal and the wake-up trigger in one
    transaction, then try the claim once and roll back: a broken file changes nothing."""
    settings, strategy = given.settings, given.strategy
    max_conn = int(conn.execute("show max_connections").fetchone()[0])
    if settings.workers + SPARE_CONNECTIONS > max_conn:
        raise SimError(
            f"-workers {settings.workers} needs {settings.workers + SPARE_CONNECTIONS} connections"
            f" but the server allows {max_conn}; use fewer workers or raise max_connections"
        )
    _execute_file(
        conn,
        given.schema_sql,
        f"schema file {given.schema_source}",
        "fix the SQL or pass another file with -schema",
    )
    if strategy.schema_sql:
        _execute_file(
            conn, strategy.schema_sql, f"strategy '{strategy.name}' schema", "fix the strategy's schema.sql"
        )
    if settings.audit:
        _execute_file(conn, statement("journal"), "journal table", "check the user may create tables")
    else:  # a journal left by an earlier run would describe that run, not this one
        _execute_file(conn, statement("drop_journal"), "journal table", "check the user may drop tables")
    if settings.wakeup == "notify":
        _execute_file(
            conn,
            statement("notify_trigger"),
            "notify trigger",
            "check the user may create functions and triggers",
        )
    try:  # prepared exactly as the workers prepare it, run, rolled back
        conn.execute(prepare_claim(TRIAL_CLAIM, strategy.wrapped_claim_sql))
        with conn.transaction(force_rollback=True):
            conn.execute(f"execute {TRIAL_CLAIM}('{QUEUE_TYPES[0]}')").fetchall()
        conn.execute(f"deallocate {TRIAL_CLAIM}")
    except psycopg.Error as exc:
        conn.rollback()
        raise SimError(
            f"claim query {strategy.claim_source} failed on the server: {first_line(exc)};"
            " fix it (it must return msg_id, queue_type, order_id) or pass -next-msg FILE"
        ) from None
    conn.commit()


def _open_pool(resources: ExitStack, server: Server, size: int) -> ConnectionPool:
    pool = ConnectionPool(
        server.dsn,
        min_size=size,
        max_size=size,
        kwargs={"application_name": APPLICATION_NAME},
        open=False,
        name="workers",
    )
    resources.callback(pool.close)
    pool.open()
    try:
        pool.wait(timeout=30)
    except PoolTimeout:
        raise SimError(
            f"could not open {size} worker connections within 30 s;"
            " check the server's max_connections and load"
        ) from None
    return pool


def _open_wakeup(
    resources: ExitStack, server: Server, settings: Settings, stop: threading.Event, errors: FirstError
) -> Wakeup:
    wakeup: Wakeup
    if settings.wakeup == "notify":
        listener = resources.enter_context(connect(server.dsn, autocommit=True))
        wakeup = NotifyWakeup(
            listener,
            settings.poll_interval or 1.0,
            stop,
            lambda exc: errors.report("notify listener", exc),
        )
    else:
        wakeup = PollWakeup(settings.poll_interval, stop)
    resources.callback(wakeup.close)
    return wakeup


def _completion_sql(settings: Settings) -> str:
    return statement(
        ("complete_delete" if settings.delmsg else "complete_mark") + ("_audited" if settings.audit else "")
    )


def run_once(
    given: RunInput, server: Server, console: Console, log: RunLog, interrupt: threading.Event
) -> RunResult:
    settings, strategy = given.settings, given.strategy
    stop = threading.Event()
    done = threading.Event()
    errors = FirstError(stop)
    rng = random.Random(settings.seed)
    source = MessageSource(settings.orders, random.Random(rng.random()))
    with ExitStack() as resources:
        admin = resources.enter_context(connect(server.dsn))
        # A lock held elsewhere must not hang the schema, the diagnosis or the audit.
        admin.execute(f"set lock_timeout = {ADMIN_LOCK_TIMEOUT_MS}")
        admin.commit()
        prepare_database(admin, given)
        log.event(
            f"schema ready from {given.schema_source}; claim strategy {strategy.name}"
            f" ({strategy.claim_source}); wake-up {settings.wakeup}"
        )
        produced_at: list[tuple[float, int]] = []
        if settings.rate == 0:
            began = time.monotonic()
            prefill(admin, source, settings.fill_db)
            log.event(f"prefilled {settings.fill_db} messages in {time.monotonic() - began:.2f} s")
            produced_at.append((0.0, settings.fill_db))
        pool = _open_pool(resources, server, settings.workers)
        wakeup = _open_wakeup(resources, server, settings, stop, errors)

        started = time.perf_counter()

        def clock() -> float:
            return time.perf_counter() - started

        counter = ProcessedCounter(settings.fill_db, done)
        plan = WorkerPlan(
            strategy.wrapped_claim_sql, _completion_sql(settings), settings.audit, settings.work, clock
        )
        stats = [WorkerStats(f"w{i + 1}", settings.worker_type(i)) for i in range(settings.workers)]
        workers = [
            Worker(
                s,
                plan,
                pool,
                wakeup,
                log,
                counter,
                stop,
                lambda exc, name=s.name: errors.report(f"worker {name}", exc),
                random.Random(rng.random()),
            )
            for s in stats
        ]
        producer = None
        if settings.rate > 0:
            producer_conn = resources.enter_context(connect(server.dsn, autocommit=True))
            producer = RateProducer(
                producer_conn,
                source,
                settings.fill_db,
                settings.rate,
                stop,
                clock,
                lambda exc: errors.report("producer", exc),
            )
        log.event(
            f"starting {settings.workers} workers"
            + (f" and a producer at {settings.rate:g}/s" if producer else "")
        )
        for w in workers:
            w.start()
        if producer:
            producer.start()

        progress = RunProgress(console, stats, settings.fill_db, lambda: source.produced, settings.progress)
        try:
            outcome = _watch(settings, done, stop, interrupt, counter, source, progress)
            causes: tuple[str, ...] = ()
            if outcome == "stalled":
                pids = [w.backend_pid for w in workers if w.backend_pid is not None]
                causes = tuple(stall_causes(admin, {s.queue_type for s in stats}, pids))
        finally:
            elapsed = clock()
            stop.set()
            wakeup.close()
            _join_or_cancel(workers, producer)
            progress.close()
        errors.raise_if_any()
        log.event(f"{outcome}: {counter.count} processed in {elapsed:.2f} s")
        for cause in causes:
            log.event(f"stall: {cause}")

        health, verdict = None, None
        try:
            health = table_health(admin)
            if settings.audit:
                verdict = audit(admin, source.produced, strategy.ordered, outcome == "completed")
                log.event(f"audit {verdict.verdict}: " + ("; ".join(verdict.problems()) or "clean"))
        except psycopg.Error as exc:
            if outcome == "completed":
                raise
            admin.rollback()  # e.g. the queue is still locked by the session that stalled the run
            causes += (f"table health and audit skipped: {first_line(exc)}",)
        if producer:
            produced_at = producer.produced_at

    return RunResult(
        settings=settings,
        server=server.label,
        strategy=strategy.name,
        ordered=strategy.ordered,
        target=settings.fill_db,
        produced=source.produced,
        elapsed_s=elapsed,
        outcome=outcome,
        groups_per_type={t: len(source.groups.get(t, ())) for t in QUEUE_TYPES},
        timeline=tuple(timeline(stats, produced_at, elapsed)),
        health=health,
        audit=verdict,
        stall_causes=causes,
        **_worker_figures(stats, elapsed, settings),
    )


def _join_or_cancel(workers: list[Worker], producer: RateProducer | None) -> None:
    """Give the threads a grace period together, then cancel the queries of those still
    waiting on the server (a lock held elsewhere), so a stop never hangs."""
    threads: list[Worker | RateProducer] = [*workers, *([producer] if producer else [])]
    deadline = time.monotonic() + STOP_GRACE_S
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    for thread in threads:
        if thread.is_alive():
            thread.cancel()
    for thread in threads:
        thread.join(timeout=STOP_GRACE_S)


def _watch(
    settings: Settings,
    done: threading.Event,
    stop: threading.Event,
    interrupt: threading.Event,
    counter: ProcessedCounter,
    source: MessageSource,
    progress: RunProgress,
) -> str:
    """Wait for the target, a signal, a failure or a stall; say which ended the run."""
    last_count, last_change = 0, time.monotonic()
    while not done.wait(TICK_S):
        progress.update()
        if interrupt.is_set():
            return "interrupted"
        if stop.is_set():
            return "failed"
        count, now = counter.count, time.monotonic()
        if count != last_count:
            last_count, last_change = count, now
        elif now - last_change >= settings.stall_timeout and source.produced > count:
            return "stalled"
    return "completed"


def _worker_figures(stats: list[WorkerStats], elapsed: float, settings: Settings) -> dict[str, Any]:
    """The RunResult fields merged from the workers' own counters and histograms."""
    processed = sum(s.processed for s in stats)
    work_s = sum(s.work_s for s in stats)
    return {
        "processed": processed,
        "per_type": {t: sum(s.processed for s in stats if s.queue_type == t) for t in QUEUE_TYPES},
        "e2e_ms": LatencyHistogram.merged(s.e2e for s in stats).percentiles_ms(),
        "claim_ms": LatencyHistogram.merged(s.claim for s in stats).percentiles_ms(),
        "complete_ms": LatencyHistogram.merged(s.complete for s in stats).percentiles_ms(),
        "empty_claims": sum(s.empty_claims for s in stats),
        "workers": tuple(
            WorkerResult(
                s.name,
                s.queue_type,
                s.processed,
                s.empty_claims,
                round(s.busy_s / elapsed, 4) if elapsed else 0.0,
            )
            for s in stats
        ),
        "work_mean_ms": (work_s / processed * 1000) if processed else settings.work.mean_ms,
    }
