"""The run's last phase: table health and the audit when the server answers (waiting out a restart,
not a frozen server), then the result, whatever ended the run."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import psycopg

from pgmq_sim.actors.bystander import BASELINE_S
from pgmq_sim.actors.wakeup import CHANNEL
from pgmq_sim.db.connection import is_connection_lost
from pgmq_sim.db.queue import QueueDatabase
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.dsn import reason
from pgmq_sim.engine.bounded import call_bounded
from pgmq_sim.engine.judging import counts_after_windows
from pgmq_sim.engine.parts import RunParts
from pgmq_sim.engine.phase_goal import windowed
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.watching import PING_TIMEOUT_S
from pgmq_sim.errors import SimError
from pgmq_sim.model.facts import AuditCounts, TableHealth
from pgmq_sim.model.kinds import Outcome, TxMode
from pgmq_sim.model.locks import source_functions
from pgmq_sim.model.quantities import count_text
from pgmq_sim.result.account import LatencyAccount
from pgmq_sim.result.audit import AuditVerdict
from pgmq_sim.result.claims import ClaimAccount
from pgmq_sim.result.costs import ClientCost, ServerCost
from pgmq_sim.result.holders import LockCensus
from pgmq_sim.result.roles import RoleTransactions
from pgmq_sim.result.run import RetryFigures, RunResult
from pgmq_sim.result.stats import WorkerCounters
from pgmq_sim.verdicts.audit import SHOW, judge_audit
from pgmq_sim.verdicts.outages import fault_effects, held_pauses, reason_faults

FIRST_ANSWER_S = 4.0  # below the connect timeout: a frozen server is told from a restarting one
COLLECT_TIMEOUT_S = 600.0


def role_transactions(state: RunState, parts: RunParts) -> RoleTransactions:
    """Each role's transactions over the worker phase, as the tool counted them."""
    totals = WorkerCounters.total(state.stats)
    housekeeping = state.housekeeper.transactions if state.housekeeper else 0
    return RoleTransactions(
        producer=sum(w.writes for w in state.producers) + sum(r[3] for r in state.enqueue_runners),
        consumers=totals.processed + totals.failed_attempts + totals.lost_ownership + totals.claim_commits,
        empty_claims=totals.empty_claims,
        tool=sum(w.records for w in state.producers)
        + totals.clock_reads
        + housekeeping
        + (state.live_judge.transactions if state.live_judge else 0)
        + 1,  # + the meters' reading
        wakeups=parts.carrier.wakeups(state),
    )


@dataclass
class EndReadings:
    """What the last phase read from the server (none of it when it did not answer)."""

    produced: int
    census: LockCensus | None
    health: TableHealth | None = None
    blocking: list[tuple[str, int, int, float]] | None = None
    verdict: AuditVerdict | None = None
    by_priority: dict[int, dict[str, float]] | None = None
    server_cost: ServerCost | None = None
    account: LatencyAccount | None = None
    skipped: str | None = None  # why the audit asked for did not run
    judged_live: int = 0  # msg_ids 1..this judged by the live audit's windows, not again at the end


def collect(state: RunState, parts: RunParts) -> RunResult:
    """Table health and the audit, when the server answers; then the result."""
    settings, signals = state.settings, state.signals
    census = state.locks.census() if settings.wait_sample_hz else None  # the housekeeper has stopped
    end = EndReadings(state.produced.committed, census)
    # the run's stop is set by now: this session keeps reconnecting until a second signal
    db = QueueDatabase(Sessions(state.server.dsn, settings.reconnect_timeout, signals.hurry), state.db.shape)
    if not signals.hurry.is_set() and state.changed:
        try:
            _read_end(state, parts, db, end)
        except (SimError, psycopg.Error, InterruptedError) as exc:
            why = "a second signal" if isinstance(exc, InterruptedError) else reason(exc, *state.dsns)
            state.note(f"table health and audit skipped: {why}", screen=False)
            state.log.event(f"audit skipped: {why}")
            end.skipped = why
    if settings.audit and end.verdict is None and end.skipped is None:
        end.skipped = "a second signal" if signals.hurry.is_set() else "the run changed nothing to audit"
    if state.live_account is not None:  # asked for its account or not, its process ends here
        state.live_account.close()
    return _result(state, parts, end, db)


def _read_end(state: RunState, parts: RunParts, db: QueueDatabase, end: EndReadings) -> None:
    settings, signals = state.settings, state.signals
    gone = state.outcome in (Outcome.SERVER_UNRESPONSIVE, Outcome.SERVER_LOST)
    finished = WorkerCounters.total(state.stats).finished
    try:  # no answer at all (frozen) is final; a refusal (restarting) is waited out
        call_bounded(state.views.ping, FIRST_ANSWER_S, signals, "server ping")
    except psycopg.Error:
        if gone:
            raise
        call_bounded(db.server_clock, settings.reconnect_timeout + PING_TIMEOUT_S, signals, "server")
    end.server_cost = state.meters.server_cost(finished, role_transactions(state, parts))
    if state.bystander is not None and not signals.interrupt.is_set() and not gone:
        bystander = state.bystander  # alone again, its statements past the server's counters
        call_bounded(lambda: bystander.alone_after(signals.interrupt), BASELINE_S + 30, signals, "bystander")
    cut_off = state.producing.unsettled() if state.producing is not None else state.cut_off
    if cut_off and state.design.seed_table:  # a folder design's log of enqueues holds only what landed
        written = call_bounded(lambda: db.settle(cut_off, settings.audit), 30, signals, "enqueues cut off")
        if written:
            where = "in flight" if state.producing is not None else "in flight or waiting in a process"
            state.note(
                f"{count_text(len(written))} enqueue(s) {where} when the run stopped did not land, below one"
                f" that did (msg_id {', '.join(map(str, written[:5]))}): written after the run, left pending",
                screen=False,
            )
    produced = call_bounded(lambda: db.produced(settings.audit), 30, signals, "produced count")
    end.produced = produced
    call_bounded(lambda: db.finish_run(state.outcome, produced), 30, signals, "run record")
    if settings.tx == TxMode.SPLIT and state.design.seed_table:  # held by stopped workers: back
        back = call_bounded(lambda: db.recover(0.0), 30, signals, "recovery")
        if back:
            state.note(
                f"{count_text(len(back))} message(s) in progress at the end went back to pending",
                screen=False,
            )
    end.health = call_bounded(db.table_health, COLLECT_TIMEOUT_S, signals, "table health")
    if settings.retrying:
        end.blocking = call_bounded(db.group_blocking, COLLECT_TIMEOUT_S, signals, "blocking")
    if settings.audit:
        _audit(state, parts, db, end)


def _audit(state: RunState, parts: RunParts, db: QueueDatabase, end: EndReadings) -> None:
    settings, signals, produced = state.settings, state.signals, end.produced

    def counts() -> AuditCounts:
        if state.live_judge is None:
            return db.audit_counts(produced, SHOW, settings.retrying)
        counted, used, why = counts_after_windows(db, state.run_id, produced, settings.retrying)
        end.judged_live = used[-1].hi if used else 0
        if why is not None:
            state.note(f"live audit: {why}", screen=False)
        return counted

    verdict = call_bounded(
        lambda: judge_audit(
            counts(),
            expected=produced,
            ordered=state.design.ordered,
            claim_sql=state.design.claim.text,
            at_least_once=state.design.at_least_once,
            # a lost process's arrivals were never enqueued: written after the run, left pending
            complete=state.outcome == Outcome.COMPLETED and parts.goal.drains and not state.enqueues_stopped,
            retrying=settings.retrying,
        ),
        COLLECT_TIMEOUT_S,
        signals,
        "audit",
    )
    end.verdict = verdict
    state.log.event(f"audit {verdict.verdict}: " + ("; ".join(verdict.problems) or "clean"))
    for cause in verdict.causes:
        state.log.event(f"audit cause: {cause}")
    if settings.priority is not None:
        end.by_priority = call_bounded(db.e2e_by_priority, COLLECT_TIMEOUT_S, signals, "latency")
    try:
        end.account = call_bounded(
            lambda: latency_account(state, db, end.census),
            COLLECT_TIMEOUT_S,
            signals,
            "latency account",
        )
    except psycopg.Error as exc:  # the audit stands without it
        if is_connection_lost(exc):
            raise
        state.note(f"latency account skipped: {reason(exc, *state.dsns)}", screen=False)


def _result(state: RunState, parts: RunParts, end: EndReadings, db: QueueDatabase) -> RunResult:
    """The result of the run, from what it counted and what the last phase read."""
    settings, census, verdict = state.settings, end.census, end.verdict
    source = state.source
    totals = WorkerCounters.total(state.stats)
    timeline = state.timeline.samples(state.elapsed)
    reasons = state.timeline.reasons
    faults = fault_effects(
        sorted(state.faults, key=lambda f: f.at_s),
        *state.timeline.pauses(state.elapsed),
        timeline,
        state.elapsed,
        reasons.loss_causes(),
    )
    if census is not None:
        faults = held_pauses(faults, census.holders)
    client = ClientCost(tuple(([state.meters.client] if state.meters.client else []) + state.process_cpu))
    server_reasons = reasons.counts()
    preflight = state.preflight  # None: the run was interrupted during the check
    timeouts = preflight.timeouts if preflight is not None else None
    faults = sorted(faults + reason_faults(server_reasons, timeouts), key=lambda f: f.at_s)
    # the prepare's (pgqd's settings, the queues'), else what the check found
    ticker = state.ticker if state.ticker is not None else preflight.ticker if preflight is not None else None
    product = preflight.product if preflight is not None else None
    result = RunResult.from_stats(
        settings=settings,
        server=state.server.label,
        strategy=state.design.label,
        ordered=state.design.ordered,
        queue=state.design.as_json()
        | {"tables": list(state.db.shape.tables)}
        | ({"ticker": ticker} if ticker is not None else {})
        | ({"product": product} if product is not None else {})
        | {"claim_reads_from": list(source_functions(state.design.claim.text))},
        e2e_by_priority=end.by_priority,
        claim_skips_locked=state.design.skips_locked,
        server_reasons=server_reasons,
        timeouts=timeouts,
        census=state.census,
        latency=end.account,
        locks=census,
        files=state.given.files,
        produced=end.produced,
        elapsed_s=state.elapsed,
        outcome=state.outcome,
        stats=state.stats,
        runners=state.runners,
        keys=source.tally.distribution() if source else None,
        timeline=timeline,
        health=end.health,
        audit=verdict,
        stall_causes=state.causes,
        error=state.error,
        notes=state.notes,
        faults=faults,
        retries=(
            RetryFigures(
                failed_attempts=totals.failed_attempts,
                dead_lettered=totals.dead_lettered,
                recovered=state.housekeeper.recovered if state.housekeeper else 0,
                lost_ownership=totals.lost_ownership,
                crashes=totals.crashes,
                blocked_groups=tuple(end.blocking or ()),
            )
            if settings.retrying
            else None
        ),
        snapshot=state.housekeeper.longest_hold() if state.housekeeper else None,
        server_cost=end.server_cost,
        client=client,
        claims=_claims(state, parts, totals.finished, client, end.server_cost),
        path=preflight.path if preflight is not None else None,
        sweep=parts.goal.report(),
        bystander=state.bystander.result() if state.bystander else None,
        worker_backends_max=state.housekeeper.worker_backends_max if state.housekeeper else None,
        pooler=state.pooler_watch.view() if state.pooler_watch else None,
        waits=state.waits.profile() if settings.wait_sample_hz else None,
        wait_slices=state.waits.slices() if settings.wait_sample_hz else None,
        spare_connections=preflight.spare_connections if preflight is not None else None,
        pool_server_room=preflight.pool_server_room if preflight is not None else None,
        audit_skipped=end.skipped if settings.audit and verdict is None else None,
        live_audit=state.live_judge.record(end.judged_live) if state.live_judge is not None else None,
        limit_by_window=state.window_limits.stretches(),
        ended_by=state.ended_by,
        enqueue=state.enqueues.account(
            settings.producers,
            settings.enqueue_batch,
            state.producer_waits.profile() if settings.wait_sample_hz else None,
            state.meters.triggers or (),
            _untimed(state),
            tuple((runner, sessions, written) for runner, sessions, written, _ in state.enqueue_runners),
        ),
    )
    result = dataclasses.replace(result, phases=parts.goal.phases(state, timeline))
    # the journal answered: each phase's and each sweep step's own account
    return windowed(state, db, census, result) if end.account is not None else result


def _untimed(state: RunState) -> str | None:
    """Why the server did not time the queue's triggers, where it did not."""
    census = state.census
    setting = census.get("track_functions") if census is not None else None
    if census is None or setting is None or setting.value not in ("none", "off"):
        return None
    return f"{census.said('track_functions')}; pg_stat_user_functions times them with pl or all"


ACCOUNT_JOIN_S = 60.0  # the account's sweeps finish what they were handed within this


def latency_account(state: RunState, db: QueueDatabase, census: LockCensus | None) -> LatencyAccount | None:
    """The cohorts' split, from the journal; placed on the run's clock through the lock census's
    reading of the server's clock (None where nothing was journaled)."""
    began = time.perf_counter()
    free_at_end = [(s.name, s.queue_type) for s in state.stats if s.free_at_end]
    live = state.live_account
    if live is not None:  # read as the run went: the rest of the journal only
        kept = live.finish(free_at_end, ACCOUNT_JOIN_S)
        if kept is not None:
            return dataclasses.replace(
                kept, seconds=time.perf_counter() - began, live_chunks=live.chunks, live_cpu_s=live.cpu_s
            )
        compacted = state.live_judge.compacted if state.live_judge is not None else 0
        if compacted:  # what it read is gone from the journal: no account rather than a wrong one
            state.note(
                f"latency account: {live.failed or 'not kept'}; {count_text(compacted)} journal row(s) of the"
                " closed windows were compacted (-compact-journal), so none is given"
            )
            return None
        if live.failed is not None:
            state.note(f"latency account: {live.failed}; the whole journal read at the end", screen=False)
    offset = census.server_offset_s if census is not None else None
    ordered = state.design.ordered
    account = db.account(
        ordered,
        free_at_end,
        lambda origin, journeys, free: LatencyAccount.of(
            journeys, free, ordered, None if offset is None else origin - offset
        ),
    )
    return None if account is None else dataclasses.replace(account, seconds=time.perf_counter() - began)


def _claims(
    state: RunState, parts: RunParts, finished: int, client: ClientCost, server_cost: ServerCost | None
) -> ClaimAccount | None:
    """The claims by outcome and reason (the cost account), where the carrier kept their books."""
    books = parts.carrier.claim_books(state)
    if books is None:
        return None
    roles = server_cost.roles if server_cost is not None else None
    own = frozenset(
        pid for w in state.producers for pid in w.backend_pids
    )  # named the run's even when gone before the listener asked
    return ClaimAccount.of(books, finished, state.elapsed, client.cpu_us_per_msg, roles, CHANNEL, own)
