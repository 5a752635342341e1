"""The one worker code path (`WorkerLoop`) against a fake claim session: what it counts (counters
that add up field by field), when it waits, how it settles a commit whose answer was lost, and what a
crash leaves. No server: the session is scripted, and each step runs on an event loop of the run's
kind."""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from pgmq_sim.actors import worker
from pgmq_sim.actors.bells import Bell, Halt, new_loop
from pgmq_sim.actors.books import ProcessedCounter
from pgmq_sim.actors.worker import WorkerLoop, WorkerPlan
from pgmq_sim.db.claims import Completion
from pgmq_sim.db.values import Claimed, SessionPlan
from pgmq_sim.db.wire import LoopTime
from pgmq_sim.model.kinds import SessionMode
from pgmq_sim.result.claims import ClaimBook
from pgmq_sim.result.stats import WorkerCounters, WorkerStats
from pgmq_sim.result.timeline import Timeline
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import WorkTime

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def server_text(ms: float) -> str:
    """T0 + ms as the server writes a timestamptz (DateStyle ISO)."""
    return (T0 + timedelta(milliseconds=ms)).isoformat(sep=" ")


LOST = psycopg.OperationalError("server closed the connection unexpectedly")


class FakeSession:
    """Answers claims from a script; records what the loop asked."""

    def __init__(self, claims: list[Claimed | None], pid: int = 100) -> None:
        self.claims = deque(claims)
        self.pid = pid
        self.closed = False
        self.calls: list[str] = []
        self.complete_raises: BaseException | None = None
        self.owned = True
        self.landed: bool | None = True
        self.dead = False
        self.claim_error: psycopg.Error | None = None  # met by the claim chained after a completion
        self.on_claim = lambda: None
        self.time = LoopTime()  # the ClaimPort's: what the worker's claims are timed on

    @property
    def backend_pid(self) -> int:
        return self.pid

    async def claim(self) -> tuple[Claimed, ...]:
        self.calls.append("claim")
        self.on_claim()
        claimed = self.claims.popleft() if self.claims else None
        return () if claimed is None else (claimed,)

    async def complete(self, claimed: Sequence[Claimed], claim_next: bool) -> Completion:
        """Arrived at T0+5 ms, committed at T0+7 ms (2 ms on the server); then the next claim."""
        ids = ",".join(str(c.msg_id) for c in claimed)
        self.calls.append(f"complete {ids}" + (" +claim" if claim_next else ""))
        count = len(claimed)
        if self.complete_raises is not None:
            self.closed = isinstance(self.complete_raises, psycopg.OperationalError)  # the link is gone
            raise self.complete_raises
        if not self.owned:
            return Completion((False,) * count, (None,) * count, None, 0.002)
        added = (server_text(0),) * count
        if claim_next and self.claim_error is not None:
            self.closed = isinstance(self.claim_error, psycopg.OperationalError)
            return Completion((True,) * count, added, server_text(7), 0.002, (), True, self.claim_error)
        following = (self.claims.popleft() if self.claims else None) if claim_next else None
        after = () if following is None else (following,)
        return Completion((True,) * count, added, server_text(7), 0.002, after, claim_next)

    async def fail(self, claimed: Claimed, error: str) -> bool | None:
        self.calls.append(f"fail {claimed.msg_id}")
        return self.dead

    async def was_completed(self, claimed: Claimed, worker: str | None) -> bool | None:
        self.calls.append(f"was_completed {claimed.msg_id} {worker}")
        return self.landed

    async def abandon(self) -> None:
        self.calls.append("abandon")

    async def cancel(self) -> None:
        self.calls.append("cancel")

    def close(self) -> None:
        self.calls.append("close")
        self.closed = True


class RecordingWakeup:
    """A wake-up that always says claim again (as polling does) and records the waits."""

    def __init__(self) -> None:
        self.waits: list[bool] = []  # after_completion, per wait
        self.due = True
        self.book = ClaimBook()  # the Wakeup protocol's: the workers register their sessions in it

    def slot(self, queue_type: str, bell: Bell) -> RecordingWakeup:
        return self

    def claiming(self) -> None:
        pass

    def claimed(self, found: int) -> None:
        pass

    def claim_due(self) -> bool:
        return self.due

    def released(self) -> None:
        pass

    def retrying(self) -> None:
        pass

    def timed(self, meter: LoopTime) -> None:
        pass

    def completed(self) -> bool:
        return False

    async def wait(self, after_completion: bool) -> bool:
        self.waits.append(after_completion)
        return False


class Harness:
    def __init__(
        self,
        tmp_path: Path,
        sessions: list[FakeSession],
        *,
        audited: bool = True,
        mode: SessionMode = SessionMode.BASIC,
        max_attempts: int = 1,
        fail_rate: float = 0.0,
    ) -> None:
        self.sessions = deque(sessions)
        self.opened: list[FakeSession] = []
        self.owners_seen: list[str] = []
        self.stats = WorkerStats(name="w1", queue_type="type1")
        self.counter = ProcessedCounter(1000)
        self.timeline = Timeline()
        self.wakeup = RecordingWakeup()
        self.halt = Halt()
        self.event_loop = new_loop()
        self.log = RunLog(str(tmp_path / "run.log"))
        self.log.open()
        self.log_path = tmp_path / "run.log"
        session_plan = SessionPlan("claim", False, audited, mode, max_attempts=max_attempts)
        self.plan = WorkerPlan(
            "dbname=x", session_plan, self.open, WorkTime(0, 0), 5.0, lambda: 0.5, fail_rate
        )
        self.loop = WorkerLoop(
            self.stats,
            self.plan,
            self.wakeup,
            self.log,
            self.counter,
            self.timeline,
            self.halt,
            random.Random(1),
        )

    def step(self) -> None:
        """One step of the worker, on the loop."""
        self.event_loop.run_until_complete(self.loop.step())

    async def open(self, worker: str, queue_type: str, owner: str) -> FakeSession:
        session = self.sessions.popleft()
        self.opened.append(session)
        self.owners_seen.append(owner)
        return session

    def logged(self) -> str:
        self.log.close()
        self.event_loop.close()
        return self.log_path.read_text()


def claimed(msg_id: int, attempt: int = 1) -> Claimed:
    return Claimed(msg_id, "type1", 3, server_text(1), attempt)


def test_a_claimed_message_is_completed_counted_timed_and_logged(tmp_path: Path) -> None:
    session = FakeSession([claimed(1)])
    h = Harness(tmp_path, [session])
    h.step()
    assert session.calls == ["claim", "complete 1 +claim"]
    assert h.stats.processed == 1 and h.counter.count == 1
    assert h.stats.e2e.percentiles_ms()["p50"] == pytest.approx(7, rel=0.05)  # the server's clock
    assert [s.processed for s in h.timeline.samples(1.0)] == [1]
    assert "handled worker=w1 type=type1 msg_id=1 order_id=3" in h.logged()


def test_an_empty_claim_right_after_a_hand_off_waits_as_after_a_completion(tmp_path: Path) -> None:
    session = FakeSession([claimed(1), None, None])
    h = Harness(tmp_path, [session])
    for _ in range(4):
        h.step()
    # the completion's round trip claimed nothing: the wait says so (polling claims again at once),
    # then a plain empty claim waits as any other
    assert session.calls == ["claim", "complete 1 +claim", "claim"]
    assert h.wakeup.waits == [True, False]
    assert h.stats.empty_claims == 2


def test_a_completion_with_nothing_due_neither_chains_nor_claims_before_waiting(tmp_path: Path) -> None:
    session = FakeSession([claimed(1), claimed(2)])
    h = Harness(tmp_path, [session])
    h.wakeup.due = False  # no message known to wait: a steady rate's usual case
    for _ in range(2):
        h.step()
    assert session.calls == ["claim", "complete 1"]  # no chained claim, no claim before the wait
    assert h.wakeup.waits == [False]
    h.step()
    assert session.calls == ["claim", "complete 1", "claim", "complete 2"]
    assert h.stats.empty_claims == 0


def test_each_completion_claims_the_next_message_in_the_same_round_trip(tmp_path: Path) -> None:
    session = FakeSession([claimed(1), claimed(2), claimed(3)])
    h = Harness(tmp_path, [session])
    for _ in range(3):
        h.step()
    assert session.calls == ["claim", "complete 1 +claim", "complete 2 +claim", "complete 3 +claim"]
    assert h.stats.processed == 3
    # completion latency is the server's time from the message's arrival to its commit
    assert h.stats.complete.percentiles_ms()["max"] == pytest.approx(2, rel=0.01)
    assert h.stats.claim.count == 4  # the first claim and the three chained ones


def test_a_closed_gate_completes_without_claiming_and_then_parks(tmp_path: Path) -> None:
    session = FakeSession([claimed(1), claimed(2)])
    h = Harness(tmp_path, [session])
    session.on_claim = lambda: h.plan.gate.allow(0)  # a timed run's deadline, reached mid-message
    h.step()
    assert session.calls == ["claim", "complete 1"] and h.stats.processed == 1
    assert h.plan.gate.busy == 0
    h.step()
    assert session.calls == ["claim", "complete 1"]  # parked: nothing more claimed


def test_a_lost_commit_answer_is_settled_from_the_journal_once(tmp_path: Path) -> None:
    first = FakeSession([claimed(5)])
    first.complete_raises = LOST
    second = FakeSession([], pid=101)
    h = Harness(tmp_path, [first, second])
    h.step()  # the commit's answer is lost: the connection is gone
    assert h.stats.connections_lost == 1 and h.counter.count == 0
    h.step()  # a new session asks whether it landed, before anything else
    assert second.calls[0] == "was_completed 5 w1"
    assert h.owners_seen[0] == h.owners_seen[1]  # a reconnect keeps the token: it still owns its work
    assert h.counter.count == 1 and h.stats.processed == 1 and h.stats.reconnects == 1
    assert "msg_id 5 had committed" in h.logged()


def test_a_lost_commit_that_did_not_land_is_not_counted(tmp_path: Path) -> None:
    first = FakeSession([claimed(5)])
    first.complete_raises = LOST
    second = FakeSession([])
    second.landed = False
    h = Harness(tmp_path, [first, second])
    h.step()
    h.step()
    assert h.counter.count == 0 and h.stats.processed == 0 and h.counter.in_doubt == 0


def test_without_a_journal_an_unknown_outcome_is_counted_in_doubt(tmp_path: Path) -> None:
    first = FakeSession([claimed(5)])
    first.complete_raises = LOST
    second = FakeSession([])
    second.landed = None
    h = Harness(tmp_path, [first, second], audited=False)
    h.step()
    h.step()
    assert second.calls[0] == "was_completed 5 None"
    assert h.counter.count == 0 and h.counter.in_doubt == 1


def test_a_statement_error_is_not_taken_for_a_lost_connection(tmp_path: Path) -> None:
    session = FakeSession([claimed(5)])
    session.complete_raises = psycopg.errors.UndefinedColumn("column nope does not exist")
    h = Harness(tmp_path, [session])
    with pytest.raises(psycopg.errors.UndefinedColumn):
        h.step()


def test_a_connection_lost_during_the_chained_claim_counts_the_completion_without_doubt(
    tmp_path: Path,
) -> None:
    """The commit answered before the link broke: the message is counted at once, and the new
    session asks the journal nothing."""
    first = FakeSession([claimed(5)])
    first.claim_error = LOST
    second = FakeSession([], pid=101)
    h = Harness(tmp_path, [first, second])
    h.step()
    assert h.counter.count == 1 and h.stats.processed == 1 and h.stats.connections_lost == 1
    h.step()
    assert second.calls[0] == "claim" and h.stats.reconnects == 1


def test_a_statement_error_in_the_chained_claim_fails_the_run_after_counting(tmp_path: Path) -> None:
    session = FakeSession([claimed(5)])
    session.claim_error = psycopg.errors.DivisionByZero("division by zero")
    h = Harness(tmp_path, [session])
    with pytest.raises(psycopg.errors.DivisionByZero):
        h.step()
    assert h.counter.count == 1 and h.stats.processed == 1
    assert "msg_id=5" in h.logged()


def test_split_mode_counts_a_message_taken_back_as_lost_ownership(tmp_path: Path) -> None:
    session = FakeSession([claimed(9)])
    session.owned = False
    h = Harness(tmp_path, [session], mode=SessionMode.SPLIT)
    h.step()
    assert h.stats.lost_ownership == 1 and h.stats.processed == 0 and h.counter.count == 0


def test_a_crash_closes_the_session_without_rolling_back(tmp_path: Path) -> None:
    session = FakeSession([claimed(2)])
    h = Harness(tmp_path, [session, FakeSession([])])
    h.loop.crash()
    h.step()
    assert session.calls == ["claim", "close"]  # no abandon, no completion
    assert h.stats.crashes == 1 and h.stats.processed == 0
    h.step()
    assert len(h.opened) == 2  # a new worker took its place, owning under a new token
    first, second = h.owners_seen
    assert first.startswith("w1:") and second.startswith("w1:") and first != second
    assert h.plan.owners.alive() == [second]  # the crashed token's heartbeat stops


def test_failing_work_records_the_attempt_and_a_dead_letter_finishes_it(tmp_path: Path) -> None:
    session = FakeSession([claimed(4, attempt=3)])
    session.dead = True
    h = Harness(tmp_path, [session], mode=SessionMode.SINGLE, max_attempts=3, fail_rate=1.0)
    h.step()
    assert session.calls == ["claim", "fail 4"]
    assert h.stats.failed_attempts == 1 and h.stats.dead_lettered == 1 and h.counter.count == 1
    assert "attempt=3 dead-letter" in h.logged()


def test_once_a_second_a_completion_goes_alone_so_the_server_flushes_statistics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "STATS_FLUSH_S", 0.0)  # every completion is due to go alone
    session = FakeSession([claimed(1), claimed(2)])
    h = Harness(tmp_path, [session])
    h.step()
    h.step()
    assert session.calls == ["claim", "complete 1", "claim", "complete 2"]


def test_split_mode_takes_a_new_token_when_its_connection_is_lost(tmp_path: Path) -> None:
    """What the worker took on the lost connection may have committed unseen: its old token stops
    beating, so recovery gives those messages back."""
    first = FakeSession([claimed(5)])
    first.complete_raises = LOST
    h = Harness(tmp_path, [first, FakeSession([])], mode=SessionMode.SPLIT)
    h.step()
    h.step()
    old, new = h.owners_seen
    assert old != new and h.plan.owners.alive() == [new]


def test_a_path_that_refuses_after_each_reconnect_is_one_outage_waited_out_on_one_backoff(
    tmp_path: Path,
) -> None:
    """A pooler whose own login to the server fails accepts the client and refuses its first
    statement: one loss, one reconnect, waits that grow, one line each way in the log."""
    first = FakeSession([claimed(5)])
    first.claim_error = LOST  # the link breaks after the commit answered: nothing in doubt
    refusing = [FakeSession([], pid=200 + i) for i in range(3)]
    for session in refusing:
        session.on_claim = lambda: (_ for _ in ()).throw(LOST)
    back = FakeSession([claimed(6)], pid=300)
    h = Harness(tmp_path, [first, *refusing, back])
    h.step()  # the loss
    started = time.monotonic()
    for _ in range(3):  # reconnect, claim refused: three times
        h.step()
    waited = time.monotonic() - started
    h.step()
    assert h.stats.connections_lost == 1 and h.stats.reconnects == 1, (
        h.stats.connections_lost,
        h.stats.reconnects,
    )
    assert h.stats.processed == 2 and back.calls[:2] == ["claim", "complete 6 +claim"], back.calls
    assert waited >= 0.05 + 0.1 + 0.2, waited  # the backoff's steps, not a spin
    logged = h.logged()
    assert logged.count("lost its connection") == 1 and logged.count("still fails") == 1, logged
    assert "back after" in logged and "(3 refused after reconnecting)" in logged, logged


def test_a_poolers_refusal_and_a_server_going_away_are_lost_connections_a_bad_statement_is_not() -> None:
    from pgmq_sim.db.connection import is_connection_lost

    pooler = psycopg.errors.ProtocolViolation(
        "server login has been failing, try again later (server_login_retry)"
    )
    assert is_connection_lost(pooler) and is_connection_lost(psycopg.errors.AdminShutdown("terminating"))
    assert is_connection_lost(
        psycopg.OperationalError("consuming input failed: server closed the connection")
    )
    assert not is_connection_lost(psycopg.errors.UndefinedColumn("column nope does not exist"))
    assert not is_connection_lost(psycopg.errors.QueryCanceled("canceling statement due to user request"))


@pytest.mark.unit
def test_simulated_work_is_never_shorter_than_asked_and_a_ring_cuts_it_short() -> None:
    """The loop's own timers end a wait up to a millisecond early; the work a worker simulates
    (Halt.work, on a timerfd) must take at least its time, with other tasks busy on the loop."""
    from pgmq_sim.actors.bells import Halt, Why, new_loop

    async def busy() -> None:
        while True:
            await asyncio.sleep(random.uniform(0.0005, 0.003))
            sum(range(2000))

    async def works(halt: Halt, short: list[float]) -> None:
        bell = halt.bell()
        for _ in range(40):
            seconds = random.uniform(0.001, 0.006)
            began = time.monotonic()
            await halt.work(seconds, bell)
            short.append(seconds - (time.monotonic() - began))

    async def main() -> tuple[list[float], float]:
        halt, short = Halt(), []
        background = [asyncio.ensure_future(busy()) for _ in range(4)]
        try:
            await asyncio.gather(*(works(halt, short) for _ in range(8)))
            bell = halt.bell()  # a crash's ring ends a long work at once
            began = time.monotonic()
            asyncio.get_running_loop().call_later(0.01, bell.ring, Why.CRASH)
            await halt.work(5.0, bell)
            return short, time.monotonic() - began
        finally:
            for task in background:
                task.cancel()
            halt.close()

    loop = new_loop()
    try:
        short, cut = loop.run_until_complete(main())
    finally:
        loop.close()
    assert len(short) == 320 and max(short) <= 0, f"{sum(s > 0 for s in short)} waits ended early"
    assert cut < 1.0


def test_counters_add_up_field_by_field() -> None:
    a, b = WorkerStats(name="w1", queue_type="type1"), WorkerStats(name="w2", queue_type="type2")
    a.processed, a.busy_s, a.dead_lettered = 3, 0.5, 1
    b.processed, b.busy_s, b.crashes = 4, 0.25, 2
    total = WorkerCounters.total([a, b])
    assert (total.processed, total.busy_s, total.dead_lettered, total.crashes) == (7, 0.75, 1, 2)
    assert total.finished == 8
    assert set(a.counters()) == set(WorkerCounters.names()) and "name" not in a.counters()
    b.set_counters(a.counters())
    assert b.counters() == a.counters() and b.name == "w2"
