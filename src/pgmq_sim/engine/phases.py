"""The named phases of a run: (check), prepare, produce, start, (watch), halt; check is
engine/checking, collect engine/collecting. Each takes the run's state and its parts; none knows
which carrier, feed or goal it was given."""

from __future__ import annotations

import dataclasses
import json
import random
import time
import uuid
from collections.abc import Callable

import psycopg

from pgmq_sim.actors.bystander import BASELINE_S, Bystander
from pgmq_sim.actors.chaos import FaultActions, FaultSchedule, pick
from pgmq_sim.actors.housekeeping import Housekeeper, PoolerWatch
from pgmq_sim.actors.ownership import BEAT_S
from pgmq_sim.actors.producer import MessageSource
from pgmq_sim.actors.threads import join_all
from pgmq_sim.db.claims import install_functions, try_claim
from pgmq_sim.db.connection import is_connection_lost
from pgmq_sim.db.pooler import PAUSE_TIMEOUT_S
from pgmq_sim.db.samples import SampleSession
from pgmq_sim.dsn import reason
from pgmq_sim.engine.accounting import LiveAccount
from pgmq_sim.engine.bounded import NotAnswering, call_bounded
from pgmq_sim.engine.ended_by import name_the_ending
from pgmq_sim.engine.judging import LiveJudge, journal_kept_whole, judged_live
from pgmq_sim.engine.parts import RunParts
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.ticker import start_ticker
from pgmq_sim.errors import LockBusy, SimError, UsageError
from pgmq_sim.model.keys import GroupTally
from pgmq_sim.model.kinds import FaultKind, Outcome, TxMode, WakeupMode
from pgmq_sim.model.quantities import count_text
from pgmq_sim.model.skew import hottest_share, key_sampler
from pgmq_sim.verdicts.audit import judge_audit

STOP_GRACE_S = 2.0
# a completion's journal row outlives compaction by the reconnect timeout and this: a worker whose
# commit's answer was lost asks the journal once it reconnects (ClaimSession's journaled_by)
KEEP_MARGIN_S = 10.0
SLOTS_KEPT = 3  # pool exhaustion's *0 leaves these free: the tool's own readings, a reconnect


def prepare(state: RunState, parts: RunParts) -> None:
    """Install the queue in one transaction (a failure inside it changes nothing), then open the log.
    The run's record keeps whether it must drain, so `pgmq-sim audit` judges it as the run does."""
    settings, design, preflight = state.settings, state.design, state.preflight
    assert preflight is not None
    session = preflight.session
    for writer in state.producers:
        writer.prepared = not preflight.path.transaction_pooled
        writer.id_type = preflight.id_type
    recorded = settings.as_json() | {
        "drains": parts.goal.drains,
        "design": design.as_json() | {"claim_sql": design.claim.text},
    }
    if not design.seed_table:  # what `pgmq-sim audit` needs to judge it again
        recorded["design"] |= {
            "pending_sql": design.pending and design.pending.text,
            "keyed": preflight.id_type is not None,
        }
    state.run_id = uuid.uuid4().hex
    record = (state.run_id, settings.fill_db, design.ordered, settings.audit, recorded)
    state.log.open()
    state.changed = True
    try:
        tables = call_bounded(
            lambda: state.db.install(
                design,
                audited=settings.audit,
                notify=settings.wakeup == WakeupMode.NOTIFY,
                retrying=settings.retrying,
                record=record,
                try_claim=try_claim(session, settings.queue_types[0]),
                functions=install_functions(session, None if design.seed_table else design.enqueue.text),
                keyed=session.keyed,
                types=settings.queue_types,
                bystander=settings.bystander is not None,
            ),
            60,
            state.signals,
            "installing the schema",
        )
    except (UsageError, LockBusy):  # the install's one transaction rolled back: the last run's
        state.changed = False  # tables stand, and are not this run's to audit
        raise
    except psycopg.Error as exc:
        if not is_connection_lost(exc):
            state.changed = False  # the install's one transaction rolled back
        raise
    state.db.shape = dataclasses.replace(state.db.shape, tables=tables)
    read_census(state, tables)
    start_ticker(state)
    if state.server.embedded:  # ours to change: count each statement's cost
        try:
            call_bounded(state.db.track_statements, 30, state.signals, "pg_stat_statements")
        except psycopg.Error as exc:
            state.note(f"per-statement cost not tracked: {reason(exc, *state.dsns)}", screen=False)
    server_now = call_bounded(state.db.server_clock, 30, state.signals, "server clock")
    state.source = MessageSource(
        settings.queue_types,
        key_sampler(settings.key_skew, settings.orders),
        state.source_rng,
        server_now,
        GroupTally(
            settings.queue_types,
            settings.orders,
            hottest_share(settings.key_skew, settings.orders, settings.types),
        ),
        settings.payload,
        settings.priority,
        settings.delay,
    )
    state.log.event("settings " + json.dumps(settings.as_json(), sort_keys=True, default=str))
    state.log.event(
        f"schema ready from {design.schema}; queue design {design.label} ({design.origin}), claim"
        f" {design.claim}; tables {', '.join(tables)}; wake-up {settings.wakeup}; seed {settings.seed}"
    )


def start(state: RunState, parts: RunParts) -> None:
    if state.settings.bystander:  # alone first: what the neighbour sees without the queue
        bystander = state.bystander = Bystander(
            state.server.dsn,
            state.settings.bystander,
            state.rng.random(),
            state.stop,
            state.errors.reporter("bystander"),
        )
        call_bounded(bystander.baseline, BASELINE_S + 30, state.signals, "bystander alone", True)
        state.threads.append(bystander)
        bystander.start()
    parts.carrier.ready(state)
    state.meters.start()
    paced = parts.feed.paced
    if not paced:  # a backlog: its clock runs from the first worker's start
        state.begin_clock()
    threads = parts.carrier.go(state)
    state.threads += threads
    state.log.event(f"starting {parts.carrier.describe(state)}{parts.feed.describe()}")
    for thread in threads:
        thread.start()
    if paced:  # a rate: its second 0 is when the workers can claim, not while they connect
        parts.carrier.connected(state)
        state.begin_clock()
        parts.feed.start(state)
    start_housekeeping(state, parts)


def start_housekeeping(state: RunState, parts: RunParts) -> None:
    """Recovery and sampling (a task on the run's loop), the pooler's watch and the fault schedule
    (threads of their own), wherever the workers run."""
    settings, preflight = state.settings, state.preflight
    assert preflight is not None
    housekeeper = state.housekeeper = Housekeeper(
        SampleSession(state.server.dsn, prepared=not preflight.path.transaction_pooled),
        state.db.shape,
        state.timeline,
        state.clock,
        state.halt,
        state.log,
        recover_every_s=min(BEAT_S, settings.lease / 4)
        if settings.tx == TxMode.SPLIT and (state.design.seed_table or state.design.recover is not None)
        else None,
        waits=(state.waits, 1 / settings.wait_sample_hz) if settings.wait_sample_hz else None,
        census=state.locks if settings.wait_sample_hz else None,
        producer_waits=state.producer_waits if settings.paced else None,
    )
    state.on_loop().start("housekeeping", housekeeper.run)
    kept_whole = journal_kept_whole(settings, state.db.shape, parts.carrier.counts_from_journal)
    if settings.compact_journal and kept_whole is not None:
        state.note(f"-compact-journal: the journal is kept whole, as {kept_whole}")
    compact = settings.compact_journal and kept_whole is None
    if judged_live(state.settings, state.db.shape):
        state.live_account = LiveAccount(  # the latency account, read as the run goes
            state.server.dsn,
            state.design.ordered,
            [s.name for s in state.stats],
            lambda: state.locks.census().server_offset_s,
            split_all=compact,  # none of it read again: every message split
        )
        state.live_judge = LiveJudge(
            state.server.dsn,
            state.db.shape,
            state.run_id,
            settings.audit_window,
            state.produced.watermark,
            lambda counts, messages: judge_audit(
                counts,
                expected=messages,
                ordered=state.design.ordered,
                claim_sql=state.design.claim.text,
                at_least_once=state.design.at_least_once,
                complete=False,
                retrying=settings.retrying,
            ),
            settings.retrying,
            not preflight.path.pooled,  # a pooler may hand its session to another client
            state.clock,
            state.stop,
            state.errors.reporter("live audit"),
            lambda exc: state.note(
                f"live audit: a window was not closed ({reason(exc, *state.dsns)}); it tries again"
            ),
            state.live_account,
            settings.account_live_from,
            compact=compact,
            keep_s=settings.reconnect_timeout + KEEP_MARGIN_S,
        )
        state.threads.append(state.live_judge)
        state.live_judge.start()
    if preflight.pooler is not None:
        state.pooler_watch = PoolerWatch(
            preflight.pooler, state.timeline, state.clock, state.stop, state.errors.reporter("pooler watch")
        )
        state.threads.append(state.pooler_watch)
        state.pooler_watch.start()
    if state.chaos:
        state.schedule = FaultSchedule(
            state.chaos,
            fault_actions(state, parts),
            state.clock,
            state.stop,
            state.record_fault,
            lambda exc: reason(exc, *state.dsns),
        )
        state.schedule.start()


def tuples_text(dead: int | None) -> str:
    """The queue table's dead tuples as the timeline last read them, said as a count."""
    return "not read" if dead is None else count_text(dead)


def fault_actions(state: RunState, parts: RunParts) -> FaultActions:
    rng = random.Random(state.rng.random())
    server_faults, preflight = state.server_faults, state.preflight
    assert preflight is not None

    def kill_connections(count: int) -> str:
        pids = pick(rng, state.views.worker_backends(), count)  # found on the server: any host's
        if not pids:
            raise SimError("nothing to kill: no backend of the run's workers was found on the server")
        ended = server_faults.terminate(pids)
        if not ended:
            shown = ", ".join(map(str, pids))
            raise SimError(f"nothing to kill: pid {shown} had ended or could not be ended")
        what = f"terminated {count_text(ended)} worker backend(s): pid {', '.join(map(str, pids))}"
        if preflight.path.pooled:  # the pooler's, last serving a worker
            what += (
                f"; server connections behind the {preflight.path.pooler} pooler: a worker notices only when"
                " it was in a transaction on one (see connections lost)"
            )
        return what

    def kill_worker(count: int) -> str:
        names = [state.stats[i].name for i in sorted(pick(rng, list(range(len(state.stats))), count))]
        parts.carrier.crash(state, names)
        return "crashed " + ", ".join(names)

    def restart_server() -> str:
        if state.server.restart is not None:
            began = time.monotonic()
            state.server.restart()
            return f"embedded server restarted in {time.monotonic() - began:.2f} s"
        server_faults.crash_restart()
        return "crash restart: a backend was SIGKILLed, the postmaster reset every session"

    def hold(kind: FaultKind, count: int, seconds: float, holding: Callable[[str], None]) -> str:
        before = state.timeline.last_dead_tuples()
        tables = state.db.shape.tables
        if kind == FaultKind.READERS:
            did = server_faults.readers(count, seconds, state.stop, tables, holding)
        elif kind == FaultKind.POOL_EXHAUSTION:
            spare = max(0, (preflight.spare_connections or 0) - SLOTS_KEPT)  # *0: every spare slot
            if not count and not spare:
                raise UsageError(
                    "no spare connection slot is known (behind a pooler, or none left but the tool's"
                    " own); give the count: pool-exhaustion:N"
                )
            did = server_faults.take_slots(count or spare, seconds, state.stop, holding)
        else:
            what = {FaultKind.LOCK_TABLE: "lock_queue", FaultKind.IDLE_IN_TX: "idle_in_tx"}
            did = server_faults.hold(what.get(kind, "hold_snapshot"), seconds, state.stop, tables, holding)
        after = state.timeline.last_dead_tuples()
        return f"{did}; dead tuples {tuples_text(before)} -> {tuples_text(after)}"

    def pooler(kind: FaultKind, seconds: float | None) -> str:
        console = preflight.pooler
        assert console is not None  # the check refused pooler faults without -pooler-admin
        if kind == FaultKind.RECONNECT_POOLER:
            console.command("RECONNECT")
            return "the pooler closes each server connection as it is released (RECONNECT)"
        if kind == FaultKind.KILL_POOLER:
            console.command("KILL")
            console.resume()  # KILL leaves the database paused
            return "the pooler dropped every client and server connection of the database (KILL)"
        assert seconds is not None
        began = time.monotonic()
        paused = 0.0
        try:
            console.command("PAUSE", PAUSE_TIMEOUT_S)  # answers when the transactions in flight end
            paused = time.monotonic() - began
            state.stop.wait(max(0.0, seconds - paused))
        finally:  # never left paused: not by a stop, not by a PAUSE that did not answer in time
            console.resume()
        return f"resumed (PAUSE took {paused:.2f} s to drain the transactions in flight)"

    return FaultActions(kill_connections, kill_worker, restart_server, hold, pooler)


def halt(state: RunState, parts: RunParts) -> None:
    """Stop every task and thread, within bounds; in-flight messages roll back."""
    if not state.elapsed:
        state.elapsed = state.clock()
    state.stop.set()
    loop = state.loop
    if loop is not None:
        loop.halt_now()
    parts.carrier.stop(state)
    if state.schedule is not None:
        state.schedule.join_helpers(STOP_GRACE_S)
    grace = 0.2 if state.signals.hurry.is_set() else STOP_GRACE_S
    left = loop.stop(grace) if loop is not None else []
    stuck = [t.name for t in join_all(state.threads, grace)]
    if loop is not None:
        loop.close()
    if left or stuck:
        state.note(
            f"{count_text(len(left) + len(stuck))} task(s) still waiting on the server were left behind:"
            f" {', '.join(left + stuck)}",
            screen=False,
        )
    parts.carrier.close(state)
    preflight = state.preflight  # None: the check did not pass, and closed what it reached
    if preflight is not None and preflight.pooler is not None:
        preflight.pooler.close()
    if preflight is not None and preflight.pgqd is not None:
        preflight.pgqd.stop()
    state.log.flush()  # a write that fails now (a full disk) still ends the run as failed
    described = state.errors.describe(*state.dsns)
    if described is not None and state.outcome == Outcome.COMPLETED:
        state.outcome, state.error = described
    name_the_ending(state)
    if not state.changed:
        return
    state.log.event(f"{state.outcome}: {state.counter.count} processed in {state.elapsed:.2f} s")
    if state.error:
        state.log.event(f"error: {state.error}")
    for cause in state.causes:
        state.log.event(f"stall: {cause}")


def read_census(state: RunState, tables: tuple[str, ...]) -> None:
    """The settings, the queue's tables now made: autovacuum kept from them is said before the run."""
    try:
        state.census = census = call_bounded(
            lambda: state.views.census(tables), 30, state.signals, "settings census"
        )
    except (psycopg.Error, NotAnswering) as exc:
        state.note(f"the server's settings were not read: {reason(exc, *state.dsns)}")
        return
    if (off := census.autovacuum_off()) is not None:
        state.note(f"autovacuum is off for the queue's tables ({off}): nothing reclaims their dead tuples")
