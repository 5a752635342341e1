"""The watch: wait for the run's goal, a signal, a failure or a stall, and say which ended the run.
Before a stall blames the queue, the server must answer at all."""

from __future__ import annotations

import time

import psycopg

from pgmq_sim.dsn import reason
from pgmq_sim.engine.bounded import TICK_S, NotAnswering, call_bounded
from pgmq_sim.engine.limit_watch import LimitWatch
from pgmq_sim.engine.parts import RunParts
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.sweeping import SweepGoal
from pgmq_sim.model.facts import StallFacts
from pgmq_sim.model.kinds import Outcome
from pgmq_sim.model.quantities import count_text
from pgmq_sim.result.observer import LiveFigures
from pgmq_sim.result.stats import WorkerCounters
from pgmq_sim.verdicts.checks import LiveReadings, live_breach
from pgmq_sim.verdicts.diagnose import explain_stall
from pgmq_sim.verdicts.policies import reasons_since

PING_TIMEOUT_S = 5.0


def watch(state: RunState, parts: RunParts) -> None:
    settings, observer = state.settings, state.observer
    steps = parts.goal.steps if isinstance(parts.goal, SweepGoal) else []  # appended as steps finish
    observer.watching(
        LiveFigures(
            state.stats,
            settings.fill_db,
            lambda: state.produced.committed,
            settings.duration,
            parts.goal.describe,
            state.timeline.last_dead_tuples,
            lambda: tuple(steps),
            state.live_judge.live if state.live_judge is not None else lambda: None,
            state.window_limits.last,
        )
    )
    limits = LimitWatch.of(state, isinstance(parts.goal, SweepGoal))
    last_count, last_change = 0, time.monotonic()
    try:
        while not state.done.wait(TICK_S):
            observer.tick()
            if state.signals.interrupt.is_set():
                state.outcome = Outcome.INTERRUPTED
                return
            described = state.errors.describe(*state.dsns)
            if described is not None:
                state.outcome, state.error = described
                return
            if parts.goal.reached(state, parts):
                return
            if limits is not None:
                limits.tick()
            totals = WorkerCounters.total(state.stats)
            if settings.check_abort:
                audit = state.live_judge.live() if state.live_judge is not None else None
                breach = live_breach(settings.checks, LiveReadings(totals, audit))
                if breach is not None:  # by request, as a signal: the audit counts what is left as pending
                    state.outcome = Outcome.INTERRUPTED
                    state.note(
                        f"-check-abort: {breach} breached at {state.clock():.1f} s; the run stops",
                        screen=False,
                    )
                    return
            # progress is any message written or finished, or a recorded failure
            count = state.counter.count + totals.failed_attempts + state.produced.committed
            now = time.monotonic()
            if count != last_count:
                last_count, last_change = count, now
            behind = parts.feed.behind(state)
            waiting = state.produced.committed > state.counter.count or behind > 0
            if now - last_change >= settings.stall_timeout and waiting:
                diagnose_stall(state, behind)
                return
    finally:
        if limits is not None:
            limits.close()
        state.elapsed = state.clock()
        state.meters.stop(WorkerCounters.total(state.stats).finished)
        observer.stopped_watching()


def nothing_remains(state: RunState) -> bool:
    """The server has no unfinished message left, and the producer wrote them all."""
    try:
        remaining = call_bounded(state.db.remaining, PING_TIMEOUT_S, state.signals, "remaining count")
    except (NotAnswering, psycopg.Error):
        return False
    target = state.settings.fill_db
    return remaining == 0 and target is not None and state.produced.committed >= target


def diagnose_stall(state: RunState, behind: int = 0) -> None:
    """`behind`: messages due that the producer has not written (it wrote nothing either)."""
    state.elapsed = state.clock()
    try:
        check_answering(state, "the run")
    except NotAnswering as exc:
        state.outcome, state.error = Outcome.SERVER_UNRESPONSIVE, str(exc)
        return
    state.outcome = Outcome.STALLED
    served = {s.queue_type for s in state.stats}
    preflight = state.preflight
    pooled = preflight is not None and preflight.path.pooled
    timeouts = preflight.timeouts if preflight is not None else None
    views = state.views

    def inspect() -> tuple[frozenset[int], StallFacts]:
        """The workers' backends, found on the server, from any host; the producer's when behind."""
        producers = frozenset(views.producer_backends() if behind else ())
        return producers, views.stall_facts([*views.worker_backends(), *producers], state.design.seed_table)

    try:
        producers, facts = call_bounded(inspect, 30, state.signals, "stall diagnosis")
    except psycopg.Error as exc:
        state.causes = [f"could not inspect the queue: {reason(exc, *state.dsns)}"]
        return
    # what the server ended meanwhile first: a policy that cancels every claim is why none passed
    causes = reasons_since(
        state.timeline.reasons.counts(), timeouts, state.elapsed - state.settings.stall_timeout
    )
    causes += explain_stall(facts, served, pooled, producers)
    if behind:
        stalled_s = state.settings.stall_timeout
        causes.insert(
            0, f"the producer wrote nothing for {stalled_s:g} s while {count_text(behind)} messages were due"
        )
    state.causes = causes or ["no cause found in the queue or the server's lock views"]


def check_answering(state: RunState, what: str) -> None:
    """After -stall-timeout without progress: a server that does not answer is named."""
    try:
        call_bounded(state.views.ping, PING_TIMEOUT_S, state.signals, "server ping")
    except (NotAnswering, psycopg.Error) as exc:
        raise NotAnswering(
            f"the server ({state.server.label}) did not answer: {what} made no progress for"
            f" {state.settings.stall_timeout:g} s and a new connection got no answer within"
            f" {PING_TIMEOUT_S:g} s"
            + (f" ({reason(exc, *state.dsns)})" if isinstance(exc, psycopg.Error) else "")
        ) from None
