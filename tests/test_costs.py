"""The cost account: every claim counted by what it did and why it was made, and a session outside
the run that notifies the run's channel named, by pid and application, with the figures without it.

The unit tests drive a type's credits and a claim book directly; the integration test floods a
real run's channel from a session of its own."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import psycopg
import pytest
from conftest import Cli
from psycopg.conninfo import make_conninfo

from pgmq_sim.actors.bells import Halt, new_loop
from pgmq_sim.actors.claim_reasons import TIMED_EVERY, ClaimTally
from pgmq_sim.actors.wakeup import NotifySlot, TypeCredits
from pgmq_sim.render.lines import claims_text
from pgmq_sim.result.claims import INDEX, ClaimAccount, ClaimBook, ClaimReason
from pgmq_sim.verdicts.costs import inflated, inflation_text

RUN_PID, FLOODER_PID = 101, 202


def book_with_flood() -> ClaimBook:
    """A run of 1,000 messages whose own notifications woke 950 claims (10 empty), and whose
    channel a session outside the run flooded: 3,000 notifications over 2 s, 900 empty claims."""
    book = ClaimBook()
    book.took[INDEX[ClaimReason.NOTIFIED]] = 960
    book.took[INDEX[ClaimReason.COMPLETION]] = 40
    book.empty[INDEX[ClaimReason.NOTIFIED]] = 910
    book.empty[INDEX[ClaimReason.FALLBACK]] = 5
    book.empty_s[INDEX[ClaimReason.NOTIFIED]] = 0.005  # 91 of them measured: 55 µs each
    book.empty_timed[INDEX[ClaimReason.NOTIFIED]] = 91
    own = book.sender(RUN_PID)
    own.notifications, own.took, own.empty, own.first_at, own.last_at = 1000, 950, 10, 10.0, 14.0
    own.application, own.own, own.told = "pgmq-sim producer", True, 1000
    flood = book.sender(FLOODER_PID)
    flood.notifications, flood.took, flood.empty, flood.first_at, flood.last_at = 3000, 10, 900, 11.0, 13.0
    flood.read_s = 0.015
    flood.application, flood.own, flood.told = "flooder", False, 6000  # 'type1:2' each
    return book


@pytest.mark.unit
def test_the_split_names_the_sender_outside_the_run_and_the_figures_without_it() -> None:
    account = ClaimAccount.of([book_with_flood()], 1000, 5.0, 700.0, None, "pgmq_sim")
    assert account.claims == 1000 + 915 and account.empty_claims == 915
    assert account.outside_empty == 910 and inflated(account)
    said = inflation_text(account)
    assert said is not None
    assert (
        f"pid {FLOODER_PID} (app 'flooder')" in said
        and "3,000 notifications (1,500/s) on the run's channel, telling of 6,000 messages" in said
    )
    # its credits woke 910 claims: each one too many (the 10 that took messages took the run's)
    assert "910 of 915 empty claims were theirs" in said
    assert "without them 0.005 empty claims per message" in said
    # measured, not bounded: 910 empty claims at the 91 measured ones' 55 µs each (50 ms), and 15 ms
    # reading its notifications, over 1,000 messages
    assert "and 635 µs of client CPU per message (against 700: their claims' own time on the client," in said
    assert "at most" not in said
    body = account.as_json()
    assert body["empty_notified_by"] == {"own": 0, "outside": 910}
    assert body["without_outside"]["client_cpu_us_per_msg"] == 635.0
    assert body["without_outside"]["client_us_outside_per_msg"] == 65.0
    assert body["empty_cost_per_msg"]["notified"] == {
        "empty": 0.91,
        "client_us": 50.0,
        "server_statement_us": None,
        "server_blocks": None,
    }
    assert [s["pid"] for s in body["senders"]] == [FLOODER_PID, RUN_PID]
    assert body["senders"][0]["own"] is False and body["senders"][1]["own"] is True
    assert "910 after notifications from outside the run, 5 at the notify fallback" in claims_text(account)


@pytest.mark.unit
def test_a_writer_of_the_run_that_ended_before_it_was_named_is_the_runs_own() -> None:
    """The run's producer after a short prefill is gone by the listener's next lookup: its
    application cannot be read (a run of the real pgmq with -fill-db 150 counted its own producer
    outside the run). The run knows its writers' sessions by their pids: the producer's and, in
    the claim book, the workers'. A gone sender that is none of them is outside the run."""
    gone = book_with_flood()
    flooder = gone.sender(FLOODER_PID)
    flooder.application, flooder.own = None, False  # as the listener leaves a sender gone when asked
    outside = ClaimAccount.of([gone], 1000, 5.0, 700.0, None, "pgmq_sim")
    assert [s.pid for s in outside.outside] == [FLOODER_PID] and inflated(outside)
    producer = ClaimAccount.of([gone], 1000, 5.0, 700.0, None, "pgmq_sim", frozenset({FLOODER_PID}))
    gone.own_pids.add(FLOODER_PID)
    worker = ClaimAccount.of([gone], 1000, 5.0, 700.0, None, "pgmq_sim")
    for ours in (producer, worker):
        assert ours.outside == () and ours.outside_empty == 0 and not inflated(ours)
        assert inflation_text(ours) is None
        assert {s.pid: s.own for s in ours.senders} == {FLOODER_PID: True, RUN_PID: True}
        assert "910 after notifications, 5 at" in claims_text(ours)  # none from outside


@pytest.mark.unit
def test_many_short_sessions_outside_the_run_are_named_as_one_cause() -> None:
    """An application that connects per request, notifies 300 times and disconnects: 26 sessions,
    each gone before the listener named it. The cause is their sum, not the busiest one's 300 with
    '25 other sessions' beside it."""
    book = book_with_flood()
    del book.senders[FLOODER_PID]
    for pid in range(300, 326):
        s = book.sender(pid)
        s.notifications, s.told, s.empty, s.own = 300 - (pid == 300), 300, 35, False  # none named
    said = inflation_text(ClaimAccount.of([book], 1000, 5.0, 700.0, None, "pgmq_sim"))
    assert said is not None and said.startswith(
        "26 sessions outside the run (26 ended before they were named) sent 7,799 notifications on the"
        " run's channel, the most 300 by pid 301 (ended before it was named): 910 of 915 empty claims"
    ), said


@pytest.mark.unit
def test_a_few_empty_claims_from_outside_are_counted_but_not_named_a_cost() -> None:
    """A notifier whose credits busy workers spent on messages: most of few empty claims, but 0.01
    per message (a capacity-bound run through PgBouncer, docs/measurements.md)."""
    book = book_with_flood()
    book.empty[INDEX[ClaimReason.NOTIFIED]] = 10
    flood = book.senders[FLOODER_PID]
    flood.took, flood.empty = 0, 8
    account = ClaimAccount.of([book], 1000, 5.0, 700.0, None)
    assert account.outside_empty == 8 and not inflated(account) and inflation_text(account) is None
    assert "8 after notifications from outside the run" in claims_text(account)


@pytest.mark.unit
def test_a_run_with_only_its_own_notifications_is_not_inflated() -> None:
    book = book_with_flood()
    del book.senders[FLOODER_PID]
    book.empty[INDEX[ClaimReason.NOTIFIED]] = 10
    account = ClaimAccount.of([book], 1000, 5.0, 700.0, None)
    assert not inflated(account) and inflation_text(account) is None
    assert "10 after notifications," in claims_text(account)  # no outside: no split to say
    assert "15 came back empty (0.01 per message)" in claims_text(account)


@pytest.mark.unit
def test_each_claim_is_counted_against_the_sender_whose_credit_woke_it() -> None:
    """Credits are taken oldest first, each with its sender; a claim that finds nothing proves the
    older credits empty."""
    book = ClaimBook()
    for pid in (RUN_PID, FLOODER_PID):
        book.sender(pid)

    async def body() -> None:
        halt = Halt()
        credits = TypeCredits(halt, 5.0, book)
        slot = NotifySlot(credits, halt.bell())
        slot.claiming()
        slot.claimed(0)  # the start: nothing there
        credits.arrived(1, RUN_PID)
        credits.arrived(3, FLOODER_PID)
        await slot.wait(after_completion=False)  # the run's credit, the oldest
        slot.claiming()
        slot.claimed(1)
        assert slot.claim_due()  # a flooder's credit: claimed again behind the completion
        slot.claimed(0)  # nothing: the flooder's other credits are proven empty
        assert credits.credits == 0
        assert not slot.claim_due()  # nothing known: released to wait

    loop = new_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(body(), 5))
    finally:
        loop.close()
    assert book.empty[INDEX[ClaimReason.START]] == 1
    assert book.took[INDEX[ClaimReason.NOTIFIED]] == 1 and book.empty[INDEX[ClaimReason.NOTIFIED]] == 1
    assert (book.senders[RUN_PID].took, book.senders[RUN_PID].empty) == (1, 0)
    assert (book.senders[FLOODER_PID].took, book.senders[FLOODER_PID].empty) == (0, 1)


@pytest.mark.unit
def test_the_tally_counts_outcomes_by_reason_and_measures_an_empty_claims_own_cpu() -> None:
    """Every claim is counted; one in TIMED_EVERY has its own CPU time measured (a thread's clock: a
    worker asleep or another thread running is not the claim's), and the account counts each reason's
    empty claims at their measured mean."""
    book = ClaimBook()
    flood = book.sender(FLOODER_PID)
    tally = ClaimTally(book)  # a worker's first claim
    tally.answered(1)
    for _ in range(TIMED_EVERY):
        tally.woke(INDEX[ClaimReason.NOTIFIED], FLOODER_PID, running=True)
        burn_cpu(0.004)
        tally.answered(0)
        time.sleep(0.01)  # not the claim's CPU
        tally.waiting()
    tally.woke(INDEX[ClaimReason.RETRY])
    tally.answered(0)
    tally.waiting()
    notified = INDEX[ClaimReason.NOTIFIED]
    assert book.took[INDEX[ClaimReason.START]] == 1
    assert book.empty[notified] == TIMED_EVERY and flood.empty == TIMED_EVERY and flood.took == 0
    assert book.empty[INDEX[ClaimReason.RETRY]] == 1
    assert book.empty_timed[notified] == 1  # a sample
    assert 0.003 <= book.empty_s[notified] < 0.009, book.empty_s  # its CPU, not its sleep
    account = ClaimAccount.of([book], 100, 1.0, 500.0, None)
    each = account.empty_each_s(ClaimReason.NOTIFIED)
    assert each is not None
    assert account.empty_client_s(ClaimReason.NOTIFIED) == pytest.approx(TIMED_EVERY * each)


def burn_cpu(seconds: float) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


FLOOD = "select " + ", ".join(f"pg_notify('pgmq_sim', 'type{n}:1')" for n in (1, 2, 3))


class Flooder(threading.Thread):
    """A session of another application notifying the run's channel, once the run's producer is
    there, at about `rate` a second, until `count` were sent or `seconds` passed."""

    def __init__(self, dsn: str, rate: float, count: int, seconds: float, payload: str | None = None) -> None:
        super().__init__(daemon=True)
        self.dsn, self.rate, self.count, self.seconds = dsn, rate, count, seconds
        # one notification a round trip with `payload`, else one of each type (FLOOD)
        one = f"select pg_notify('pgmq_sim', '{payload}')"
        self.query, self.each = (FLOOD, 3) if payload is None else (one, 1)
        self.pid = 0
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with psycopg.connect(
                make_conninfo(self.dsn, application_name="flooder"), autocommit=True
            ) as conn:
                self.pid = conn.info.backend_pid
                deadline = time.monotonic() + 30
                while (
                    time.monotonic() < deadline
                    and not conn.execute(
                        "select 1 from pg_stat_activity where application_name = 'pgmq-sim producer'"
                        " and datname = current_database()"
                    ).fetchone()
                ):
                    time.sleep(0.05)
                began = time.monotonic()
                while self.sent < self.count and time.monotonic() - began < self.seconds:
                    conn.execute(self.query)  # one of each type a round trip: a busy machine's Python is slow
                    self.sent += self.each
                    ahead = began + self.sent / self.rate - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
        except BaseException as exc:  # the test says so
            self.error = exc


@pytest.mark.integration
def test_a_notification_flood_from_another_application_is_named_with_the_costs_without_it(
    cli: Cli,
) -> None:
    flooder = Flooder(cli.dsn, rate=450, count=1350, seconds=3.0)
    flooder.start()
    result = cli.run(
        "-duration 4 -rate 100 -wakeup notify -claim indexed -workers 6 -work-ms 1-2 -orders 50"
        " -json run.json -report run.html"
    )
    flooder.join(10)
    assert flooder.error is None and flooder.sent >= 300, (flooder.error, flooder.sent)
    assert result.returncode == 0, result.stderr
    run = json.loads((cli.workdir / "run.json").read_text())
    claims = run["claims"]
    senders = {s["pid"]: s for s in claims["senders"]}
    outside = senders[flooder.pid]
    assert outside["application"] == "flooder" and outside["own"] is False
    assert outside["notifications"] == flooder.sent
    assert any(s["own"] and s["application"] == "pgmq-sim producer" for s in senders.values())
    empty = sum(claims["empty"].values())
    assert empty == run["empty_claims"]
    woken = outside["claims_took"] + outside["claims_empty"]  # each one too many
    assert claims["empty_notified_by"]["outside"] == min(claims["empty"]["notified"], woken)
    assert claims["empty_notified_by"]["outside"] > empty / 2, claims
    assert claims["inflated_by_outside"]
    named = f"pid {flooder.pid} (app 'flooder')"
    assert run["cost"]["resource"] == "notifier" and named in run["cost"]["evidence"]
    assert named in run["limit"]["evidence"]
    summary = " ".join(result.stdout.split())
    assert named in summary, result.stdout
    page = (cli.workdir / "run.html").read_text()
    assert f"<td>pid {flooder.pid}</td><td>flooder</td><td>no</td>" in page


@pytest.mark.integration
def test_a_notifier_announcing_100000_messages_costs_an_empty_claim_per_idle_worker_not_a_debt(
    cli: Cli,
) -> None:
    """Issue 51: a session outside the run sent 'type1:100000' 20 times a second on the run's channel,
    and the workers claimed 595 times per notification (23 empty claims per message): each told
    message was a credit worked off claim by claim. An empty claim ends what was announced, so the
    lie costs about one empty claim per idle worker a notification. The sender is still named, and
    the client's CPU without its claims is measured from their own CPU, not bounded."""
    flooder = Flooder(cli.dsn, rate=20, count=70, seconds=3.5, payload="type1:100000")
    flooder.start()
    result = cli.run("-duration 4 -rate 200 -wakeup notify -workers 8 -orders 20 -work-ms 1-5 -json run.json")
    flooder.join(10)
    assert flooder.error is None and flooder.sent >= 40, (flooder.error, flooder.sent)
    assert result.returncode == 0, result.stderr
    run = json.loads((cli.workdir / "run.json").read_text())
    claims = run["claims"]
    processed, empty = run["processed"], run["empty_claims"]
    assert processed >= 600
    assert empty / processed < 2, claims["summary"]  # 6 to 11 per message before
    outside = {s["pid"]: s for s in claims["senders"]}[flooder.pid]
    assert outside["messages_told"] == 100_000 * flooder.sent and outside["own"] is False
    named = f"pid {flooder.pid} (app 'flooder')"
    evidence = run["cost"]["evidence"]
    assert run["cost"]["resource"] == "notifier" and named in evidence, run["cost"]
    assert claims["empty_timed"]["notified"] > 0  # a sample of them measured
    without = claims["without_outside"]
    cpu = run["client"]["cpu_us_per_msg"]
    assert without["client_us_outside_per_msg"] > 0
    outside_us = without["client_us_outside_per_msg"]
    assert without["client_cpu_us_per_msg"] == pytest.approx(cpu - outside_us, abs=0.2)
    said = f"and {without['client_cpu_us_per_msg']:.0f} µs of client CPU per message (against {cpu:.0f}:"
    assert said in evidence and "at most" not in evidence, evidence
