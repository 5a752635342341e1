"""The server's reasons, without a server: each SQLSTATE and message named as PostgreSQL 15 to 18
write them, the timeouts judged against a run before it starts, a repeated cause counted once,
met outages of one cause one row, a policy that ended the run's sessions its own limit, and an
order violation told apart by what happened (in flight, or overtaking by the claim's ORDER BY)."""

from __future__ import annotations

import dataclasses

import pytest
from builders import settings

from pgmq_sim.model.events import Fault
from pgmq_sim.model.facts import AuditCounts, OrderFacts, OrderViolation
from pgmq_sim.model.locks import ClaimOrder
from pgmq_sim.model.reasons import Cause, ReasonCount, classify, ends_session
from pgmq_sim.model.timeouts import ServerSetting, ServerTimeouts
from pgmq_sim.result.reasons import ReasonTally
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.settings import WorkTime
from pgmq_sim.verdicts.audit import judge_audit
from pgmq_sim.verdicts.figures import Figures
from pgmq_sim.verdicts.limits import judge
from pgmq_sim.verdicts.outages import fault_effects, reason_faults
from pgmq_sim.verdicts.policies import conflicts, policies_met, run_shape

pytestmark = pytest.mark.unit

# (SQLSTATE, the server's message, the cause, the setting behind it, ridden through in the session)
SAID = [
    ("25P03", "terminating connection due to idle-in-transaction timeout", Cause.IDLE_IN_TRANSACTION,
     "idle_in_transaction_session_timeout", False),
    ("25P04", "terminating connection due to transaction timeout", Cause.TRANSACTION_TIMEOUT,
     "transaction_timeout", False),
    ("57P05", "terminating connection due to idle-session timeout", Cause.IDLE_SESSION,
     "idle_session_timeout", False),
    ("57014", "canceling statement due to statement timeout", Cause.STATEMENT_TIMEOUT,
     "statement_timeout", True),
    ("57014", "canceling statement due to user request", Cause.CANCELED, None, True),
    ("55P03", "canceling statement due to lock timeout", Cause.LOCK_TIMEOUT, "lock_timeout", True),
    ("55P03", 'could not obtain lock on row in relation "msg_queue"', Cause.LOCK_NOT_AVAILABLE, None, True),
    ("57P01", "terminating connection due to administrator command", Cause.TERMINATED, None, False),
    ("57P01", "terminating connection due to immediate shutdown command", Cause.SHUTDOWN, None, False),
    ("57P01", "terminating connection due to unexpected postmaster exit", Cause.CRASH, None, False),
    ("57P02", "terminating connection because of crash of another server process", Cause.CRASH, None, False),
    ("57P03", "the database system is shutting down", Cause.SHUTDOWN, None, False),
    ("57P03", "the database system is starting up", Cause.NOT_ACCEPTING, None, False),
    ("53300", "sorry, too many clients already", Cause.TOO_MANY_CONNECTIONS, None, False),
    ("53100", 'could not extend file "base/5/16384": No space left on device', Cause.DISK_FULL, None, True),
    ("53200", "out of memory", Cause.RESOURCES, None, True),
    ("40001", "could not serialize access due to concurrent update", Cause.SERIALIZATION, None, True),
    ("40P01", "deadlock detected", Cause.DEADLOCK, None, True),
    (None, "consuming input failed: server closed the connection unexpectedly", Cause.CLOSED, None, False),
    ("42P01", 'relation "outbox" does not exist', Cause.OTHER, None, False),
]  # fmt: skip


@pytest.mark.parametrize(("sqlstate", "message", "cause", "setting", "retried"), SAID)
def test_each_sqlstate_and_message_is_named(
    sqlstate: str | None, message: str, cause: Cause, setting: str | None, retried: bool
) -> None:
    said = classify(sqlstate, message)
    assert (said.cause, said.setting, said.retried) == (cause, setting, retried)
    assert said.policy == (setting is not None)
    assert said.text() == (f"{message} ({sqlstate})" if sqlstate else message)
    assert said.label and (cause != Cause.OTHER or sqlstate in said.label)


def test_a_termination_is_a_shutdown_when_the_server_then_refuses_the_reconnect() -> None:
    terminated = classify("57P01", "terminating connection due to administrator command")
    assert terminated.resolved(refused=False).cause == Cause.TERMINATED
    assert terminated.resolved(refused=True).cause == Cause.SHUTDOWN
    assert classify("57014", "canceling statement due to statement timeout").resolved(True).cause == (
        Cause.STATEMENT_TIMEOUT
    )


def test_what_ends_a_session_is_told_from_what_ends_a_statement() -> None:
    """A crash or an immediate shutdown says so in a WARNING before the process exits; a FATAL
    always ends it; an ERROR ends a statement."""
    assert ends_session("57P02", "WARNING") and ends_session("25P03", "FATAL")
    assert ends_session("XX000", "PANIC")
    assert not ends_session("57014", "ERROR") and not ends_session("01000", "WARNING")


def timeouts(*settings_: ServerSetting, role: str = "queue", database: str = "q") -> ServerTimeouts:
    return ServerTimeouts(role, database, settings_)


IDLE_TX = ServerSetting("idle_in_transaction_session_timeout", 5, "5ms", "user")


def test_a_timeout_no_message_could_pass_refuses_and_one_some_would_pass_is_said() -> None:
    refused = conflicts(timeouts(IDLE_TX), run_shape(settings(work=WorkTime(10, 20)), True))
    line = refused[0].line
    assert [c.refuse for c in refused] == [True]
    assert "idle_in_transaction_session_timeout = 5ms (ALTER ROLE queue SET) would end every" in line
    assert "-tx split" in line and "ALTER ROLE queue SET idle_in_transaction_session_timeout = '1s'" in line
    (said,) = conflicts(timeouts(IDLE_TX), run_shape(settings(work=WorkTime(1, 10)), True))
    assert not said.refuse and "about 56% of the claims" in said.line
    batched = conflicts(timeouts(IDLE_TX), run_shape(settings(work=WorkTime(3, 4), batch=2), True))
    assert [c.refuse for c in batched] == [True]  # a batch's work idles the transaction: 6 ms at least
    assert conflicts(timeouts(IDLE_TX), run_shape(settings(work=WorkTime(1, 4)), True)) == []
    # split: the work idles no transaction, but a busy client's pause between the claim's two round
    # trips may (measured: 92% of the attempts ended at 5 ms on a shared host): said, not refused
    (split,) = conflicts(timeouts(IDLE_TX), run_shape(settings(work=WorkTime(10, 20), tx="split"), True))
    assert not split.refuse and "a busy client may pause between two round trips" in split.line


def test_idle_sessions_and_claims_that_wait_on_locks_are_said_against_their_timeouts() -> None:
    idle = ServerSetting("idle_session_timeout", 1000, "1s", "configuration file", "/pg/auto.conf", 3)
    (line,) = conflicts(timeouts(idle), run_shape(settings(poll_interval=1.5), True))
    assert "the server's configuration file (/pg/auto.conf:3)" in line.line
    assert "-poll-interval 1.5 s" in line.line and not line.refuse
    assert conflicts(timeouts(idle), run_shape(settings(poll_interval=0.5), True)) == []
    lock = ServerSetting("lock_timeout", 5, "5ms", "database")
    (waits,) = conflicts(timeouts(lock), run_shape(settings(), claim_skips_locked=False))
    assert "lock_timeout = 5ms (ALTER DATABASE q SET)" in waits.line and "SKIP LOCKED" in waits.line
    assert conflicts(timeouts(lock), run_shape(settings(), claim_skips_locked=True)) == []


def test_where_a_setting_is_set_and_how_to_raise_it_for_the_role() -> None:
    t = timeouts(role="Queue Role", database="q")
    cases = {
        "user": 'ALTER ROLE "Queue Role" SET',
        "database": "ALTER DATABASE q SET",
        "database user": 'ALTER ROLE "Queue Role" IN DATABASE q SET',
        "default": "the server's default",
        "configuration file": "the server's configuration file (postgresql.conf, or ALTER SYSTEM's",
    }
    for source, where in cases.items():
        s = ServerSetting("statement_timeout", 100, "100ms", source)
        assert t.where(s).startswith(where), (source, t.where(s))
    in_db = ServerSetting("statement_timeout", 100, "100ms", "database user")
    assert t.raise_it(in_db, "1s") == "ALTER ROLE \"Queue Role\" IN DATABASE q SET statement_timeout = '1s'"
    assert "PGOPTIONS" in t.raise_it(ServerSetting("statement_timeout", 100, "100ms", "client"), "1s")


def test_a_repeated_cause_is_counted_once_with_its_sessions_and_the_policies_are_no_outage_evidence() -> None:
    tally = ReasonTally()
    idle = classify("25P03", "terminating connection due to idle-in-transaction timeout")
    for i in range(50):
        tally.met(0.5 + i / 10, idle, f"w{i % 4 + 1}", 1000 + i, lost=True)
    canceled = classify("57014", "canceling statement due to statement timeout")
    for i in range(3):
        tally.met(2.0 + i, canceled, "w1", 77, lost=False)
    crash = classify("57P02", "terminating connection because of crash of another server process")
    tally.met(7.0, crash, "producer", None, lost=True)
    first, second, third = tally.counts()
    assert (first.cause, first.count, first.lost, first.sessions, first.first_s, first.last_s) == (
        Cause.IDLE_IN_TRANSACTION, 50, 50, 50, 0.5, 5.4,
    )  # fmt: skip
    assert first.who() == "4 workers (w1, w2, w3, w4)" and first.when() == "from 0.5 s to 5.4 s"
    assert (second.count, second.lost, second.sessions) == (3, 0, 1)
    assert third.who() == "producer" and third.when() == "at 7.0 s"
    assert tally.loss_causes() == [(7.0, Cause.CRASH)]  # the policy's losses are no outage's


def test_a_worker_process_relays_what_it_met() -> None:
    child, master = ReasonTally(relay=True), ReasonTally()
    child.met(1.0, classify("40P01", "deadlock detected"), "w3", 12, lost=False)
    relayed = child.take()
    assert child.take() == [] and len(relayed) == 1
    assert master.relayed(9.0, relayed[0]).cause == Cause.DEADLOCK
    (met,) = master.counts()
    assert (met.count, met.first_s, met.workers) == (1, 9.0, ("w3",))


def _seconds(n: int) -> list[SecondSample]:
    return [SecondSample(i, 50, 50, 100, None, None, None) for i in range(n)]


def test_met_outages_of_one_cause_are_one_row() -> None:
    """Twenty pauses, each with a connection terminated by an administrator, are one row: how many,
    the first and the last, the seconds down in all; a pause of another cause keeps its own."""
    gaps = [(i + 0.2, i + 0.5) for i in range(20)] + [(25.0, 25.4)]
    losses = [g[0] + 0.01 for g in gaps]
    causes = [(t, Cause.TERMINATED) for t in losses[:-1]] + [(losses[-1], Cause.CLOSED)]
    rows = fault_effects([], gaps, losses, _seconds(27), causes=causes)
    assert len(rows) == 2
    terminated, closed = rows
    assert (terminated.count, terminated.at_s, terminated.last_s, terminated.outage_s) == (20, 0.2, 19.2, 6.0)
    assert terminated.connections_lost == 20 and "administrator's command" in terminated.detail
    assert terminated.effect().startswith("x20 from 0.2 s to 19.2 s, out 6,000 ms in all")
    assert closed.count is None and "without a message from the server" in closed.detail
    limit = judge(_figures(faults=tuple(rows), elapsed_s=27.0))
    assert limit.resource == "outage"
    assert "outage x20 from 0.2 s to 19.2 s out 6,000 ms in all" in limit.evidence
    assert "the path was down 6,400 ms of 27.0 s" in limit.evidence  # the row's in all, beside the other's


POLICY = ReasonCount(
    Cause.IDLE_IN_TRANSACTION, "25P03", "terminating connection due to idle-in-transaction timeout",
    count=3000, first_s=0.1, last_s=19.9, sessions=3000, workers=("w1", "w2"), lost=3000,
)  # fmt: skip


def test_a_policy_and_the_statements_the_server_ended_are_one_row_each() -> None:
    deadlocks = ReasonCount(Cause.DEADLOCK, "40P01", "deadlock detected", 4, 3.0, 9.0, 2, ("w1", "w2"), 0)
    crash = ReasonCount(Cause.CRASH, "57P02", "terminating ...", 6, 5.0, 5.1, 6, ("w1",), 6)
    policy, deadlock = reason_faults((POLICY, deadlocks, crash), timeouts(IDLE_TX))
    assert (policy.kind, policy.count, policy.sessions) == ("server-policy", 3000, 3000)
    assert policy.detail.startswith("idle_in_transaction_session_timeout = 5ms (ALTER ROLE queue SET)")
    assert policy.effect() == "3,000 time(s) from 0.1 s to 19.9 s in 3,000 session(s)"
    assert (deadlock.kind, deadlock.count) == ("server-error", 4) and "a deadlock" in deadlock.detail


def _figures(**changes: object) -> Figures:
    base = Figures(
        workers=8, achieved_per_s=50.0, offered_per_s=None, arrived_share=None, kept_up=False, busy=0.1,
        service_ms=5.0, ordering_bound_per_s=None, groups=None, waits=None, elapsed_s=20.0,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_a_policy_that_ended_the_runs_sessions_is_the_limit_before_an_outage() -> None:
    met = policies_met((POLICY,), timeouts(IDLE_TX), run_shape(settings(), True))
    outage = Fault(1.0, "outage", "not injected: 3 worker connection(s) lost", 10.0, connections_lost=3)
    limit = judge(_figures(policies=met, faults=(outage,)))
    assert limit.resource == "server-policy", limit
    assert (
        "the server's idle_in_transaction_session_timeout = 5ms (ALTER ROLE queue SET) ended 3,000 session(s)"
        " of 2 workers (w1, w2) from 0.1 s to 19.9 s" in limit.evidence
    )
    assert "75% of the attempts" in limit.evidence
    assert limit.fix is not None and "-tx split" in limit.fix and "ALTER ROLE queue SET" in limit.fix
    few = dataclasses.replace(POLICY, count=20, lost=20)
    quiet = policies_met((few,), timeouts(IDLE_TX), run_shape(settings(), True))
    assert judge(_figures(policies=quiet)).resource != "server-policy"  # 2% of the attempts: not the limit
    split = policies_met((POLICY,), timeouts(IDLE_TX), run_shape(settings(tx="split"), True))
    assert "-tx split" not in split[0].fix  # never the run's own setting
    # statements a timeout canceled are what made them wait (a lock, a scan): named by the other checks
    canceled = ReasonCount(Cause.LOCK_TIMEOUT, "55P03", "canceling statement due to lock timeout",
                           3000, 0.1, 19.9, 8, ("w1",), 0)  # fmt: skip
    lock = ServerSetting("lock_timeout", 100, "100ms", "database")
    waits = policies_met((canceled,), timeouts(lock), run_shape(settings(), True))
    assert judge(_figures(policies=waits)).resource != "server-policy"


PRIORITY_CLAIM = """
    -- order by id would be right here; this one ranks by urgency
    with picked as (
        select j.id from job j join job_group g on g.queue_type = j.queue_type and g.order_id = j.order_id
        where j.queue_type = $1 and j.state = 'new'
        order by j.priority desc, j.id
        limit $2
        for update of j, g skip locked)
    update job j set state = 'running' from picked where j.id = picked.id
    returning j.id as msg_id, j.queue_type, j.order_id
"""


def test_the_claims_order_before_the_id_is_read_from_its_text() -> None:
    order = ClaimOrder.read(PRIORITY_CLAIM)
    assert order is not None and order.ahead == ("priority desc",) and order.id_column == "id"
    assert order.said() == "priority desc, before id (order by j.priority desc, j.id)"
    by_group = "select id from o order by customer, id limit $2 for update skip locked returning"
    assert ClaimOrder.read(by_group + " id as msg_id, topic as queue_type, customer as order_id") is None
    due = "select id from t order by due, id limit 1 returning t.id as msg_id"
    assert ClaimOrder.read(due) is not None and ClaimOrder.read(due).ahead == ("due",)  # type: ignore[union-attr]


def _counts(violations: int, overtaking: int, shown: tuple[OrderViolation, ...]) -> AuditCounts:
    return AuditCounts(
        processed=100, duplicates=0, missing=0, left_behind=0, duplicate_ids=(), missing_ids=(),
        order_violation_ids=tuple(range(violations)), order_violations=violations, overtaking=overtaking,
        violations=shown,
    )  # fmt: skip


def test_an_order_violation_says_whether_it_overtook_a_pending_message_or_one_in_flight() -> None:
    overtook = OrderViolation("type1", 3, 57, 55, "w2", "w1", 0.012, overtook=True)
    in_flight = OrderViolation("type1", 4, 90, 89, "w3", "w4", 0.004)
    ahead = judge_audit(_counts(773, 770, (overtook, in_flight)), expected=100, ordered=True, complete=True,
                        claim_sql=PRIORITY_CLAIM)  # fmt: skip
    (cause,) = ahead.causes
    assert cause.startswith("770 message(s) overtook an earlier message of their group while it was still")
    assert "(3 more claimed while an earlier one was in flight)" in cause
    assert "msg_id 57 (w2) was claimed while msg_id 55 was still pending" in cause
    assert "claim.sql orders by priority desc, before id (order by j.priority desc, j.id)" in cause
    assert ahead.fix is not None and "rank the groups by priority" in ahead.fix
    assert "earliest unfinished message" in ahead.fix and "head is in flight" not in ahead.fix
    flight = judge_audit(_counts(5, 0, (in_flight,)), expected=100, ordered=True, complete=True,
                         claim_sql="select 1 for update skip locked")  # fmt: skip
    (cause,) = flight.causes
    assert cause.startswith("5 message(s) claimed while an earlier one of their group was in flight")
    assert "overtook" not in cause and "shows its next message instead" in cause
    assert flight.fix is not None and "skip the group when that head is locked" in flight.fix


RETURNED = " returning d.id as msg_id, d.topic as queue_type, (d.data->>'customer')::bigint as order_id"


@pytest.mark.parametrize(
    ("claim", "ahead", "said"),
    [
        # the group's own key, as an expression in parentheses: nothing ahead of the id
        ("select id from d order by (data->>'customer'), id limit 1 for update skip locked", None, None),
        (
            "select distinct on ((data->>'customer')) id from d order by (d.data->>'customer'), d.id",
            None,
            None,
        ),
        (
            "select id from d order by coalesce(due, now()), lower(x) limit $2",
            ("coalesce(due, now())", "lower(x)"),
            "coalesce(due, now()), then lower(x), and not by id (order by coalesce(due, now()), lower(x))",
        ),
        (
            "with a as (select id from d order by ((d.data->>'customer')), (lower(d.name)), d.id desc"
            ") update d set s = 1 from a where d.id = a.id",
            ("(lower(name))",),
            "(lower(name)), before id (order by ((d.data->>'customer')), (lower(d.name)), d.id desc)",
        ),
        (
            "select id from d order by greatest(a, coalesce(b, 'x)(,')), id for update",
            ("greatest(a, coalesce(b, 'x)(,'))",),
            "greatest(a, coalesce(b, 'x)(,')), before id (order by greatest(a, coalesce(b, 'x)(,')), id)",
        ),
    ],
)
def test_an_order_by_of_expressions_is_read_whole(
    claim: str, ahead: tuple[str, ...] | None, said: str
) -> None:
    """Keys with function calls, casts, literals and nested parentheses are read whole; the group's own
    key, however parenthesised, is not a cause."""
    order = ClaimOrder.read(claim + RETURNED)
    if ahead is None:
        assert order is None
        return
    assert order is not None and order.ahead == ahead and order.said() == said
    assert order.said().count("(") == order.said().count(")")  # never broken text


def _facts(**changes: object) -> OrderFacts:
    base = OrderFacts(pairs=40, overtook=40, keyed=True, ids_inverted=0, inverted_same_ms=0,
                      inverted_apart_ms=0.0, due_earlier=0, ranked_higher=0)  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_an_order_violations_cause_is_measured_from_its_rows_before_the_text_is_read() -> None:
    shown = (OrderViolation("type1", 3, 57, 55, "w2", "w1", 0.012, overtook=True),)
    claim = "select id from d order by (data->>'customer'), id limit 1 for update skip locked" + RETURNED

    def cause(facts: OrderFacts) -> tuple[str, str | None]:
        counts = dataclasses.replace(_counts(40, 40, shown), order_facts=facts)
        verdict = judge_audit(counts, expected=100, ordered=True, complete=True, claim_sql=claim)
        return verdict.causes[0], verdict.fix

    text, fix = cause(_facts(ids_inverted=40, inverted_same_ms=40, example=("57", "0a1f", "55", "0a2e")))
    assert (
        "measured from the rows: the design's ids do not increase in enqueue order: 40 of 40 pair(s)" in text
    )
    assert (
        "all enqueued within the same millisecond; e.g. msg_id 57 has id 0a1f, below msg_id 55's 0a2e" in text
    )
    assert text.index("measured from the rows") < text.index("(a guess, not measured)")
    assert "customer" not in text and fix is not None and "ids increase in enqueue order" in fix
    text, _ = cause(_facts(ids_inverted=30, inverted_same_ms=12, inverted_apart_ms=3.5))
    assert "12 of them enqueued within the same millisecond (the farthest 3.5 ms apart)" in text
    text, fix = cause(_facts(ranked_higher=35, due_earlier=3))
    assert "in 35 of 40 pair(s) the later message had the higher priority; in 3 of 40 pair(s)" in text
    assert fix is not None and "ids" not in fix
    text, _ = cause(_facts())
    assert "every pair's ids, due times and priorities are in enqueue order" in text and "unexplained" in text
