"""Every advice rule: a result whose figures call for it gets its line, and a result whose figures do
not gets none. Results are built from workers' counters set by hand (no server)."""

from __future__ import annotations

import dataclasses
import functools
import io
import re
from collections.abc import Callable
from typing import Any

import pytest
from builders import settings
from conftest import REPO
from rich.console import Console

from pgmq_sim.model.census import CensusSetting, ServerCensus, SlotCensus
from pgmq_sim.model.events import Fault, SnapshotHold
from pgmq_sim.model.facts import PathFacts, TableHealth
from pgmq_sim.model.keys import HotGroup, KeyDistribution
from pgmq_sim.model.kinds import Outcome, PoolerMode
from pgmq_sim.model.locks import source_functions
from pgmq_sim.model.reasons import Cause, ReasonCount, RunEnding, ServerReason
from pgmq_sim.model.timeouts import ServerSetting, ServerTimeouts
from pgmq_sim.render.terminal import print_summary
from pgmq_sim.result.account import PARTS, CohortSplit, LatencyAccount
from pgmq_sim.result.claims import INDEX, ClaimAccount, ClaimBook, ClaimReason
from pgmq_sim.result.costs import ClientCost, ProcessCpu, ServerCost
from pgmq_sim.result.holders import HolderSeen, LockCensus
from pgmq_sim.result.run import RetryFigures, RunResult
from pgmq_sim.result.serverpath import RunPath
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.result.waits import BlockerSeen, WaitProfile
from pgmq_sim.verdicts import advice
from pgmq_sim.verdicts.cause import Resource
from pgmq_sim.verdicts.limits import Limit
from pgmq_sim.verdicts.outages import held_pauses
from pgmq_sim.verdicts.verdict import judge_run


def judged_limit(run: RunResult) -> Limit:
    return judge_run(run).limit


def judged_advice(run: RunResult) -> list[str]:
    return list(judge_run(run).advice)


pytestmark = pytest.mark.unit


def result(
    *,
    workers: int = 6,
    groups: int = 2,
    processed: int = 1000,
    empty: int = 0,
    claim_ms: float = 0.3,
    complete_ms: float = 0.5,
    e2e_ms: float = 8.0,
    work_ms: float = 5.5,
    strategy: str = "seed",
    health: TableHealth | None = None,
    snapshot: SnapshotHold | None = None,
    retries: RetryFigures | None = None,
    backlog_at_end: int = 0,
    client: ClientCost | None = None,
    hot: HotGroup | None = None,
    path: RunPath | None = None,
    worker_backends_max: int | None = None,
    busy_ms: float = 1.0,
    waits: WaitProfile | None = None,
    server_cost: ServerCost | None = None,
    offered: int | None = None,
    spare_connections: int | None = None,
    skips_locked: bool = False,
    faults: tuple[Fault, ...] = (),
    latency: LatencyAccount | None = None,
    locks: LockCensus | None = None,
    **changes: Any,
) -> RunResult:
    """A run whose figures are set by hand: each worker processed its share at these latencies."""
    stats = []
    for i in range(workers):
        s = WorkerStats(name=f"w{i + 1}", queue_type=("type1", "type2", "type3")[i % 3])
        share = processed // workers + (1 if i < processed % workers else 0)
        recorded = _recorded(share, e2e_ms, busy_ms, work_ms, claim_ms, complete_ms)
        s.set_counters(recorded.counters())
        for mine, its in zip(s.histograms(), recorded.histograms(), strict=True):
            mine.merge(its)
        s.empty_claims = empty // workers + (1 if i < empty % workers else 0)
        stats.append(s)
    return RunResult.from_stats(
        settings=settings(workers=workers, **changes),
        server="test",
        strategy=strategy,
        ordered=True,
        files={},
        produced=processed,
        elapsed_s=2.0,
        outcome=Outcome.COMPLETED,
        stats=stats,
        keys=KeyDistribution(
            processed,
            3 * groups,
            {"type1": groups, "type2": groups, "type3": groups},
            (hot,) if hot else (),
            True,
            hot.messages / processed if hot else 1 / (3 * groups),
        ),
        timeline=[SecondSample(0, processed, processed, backlog_at_end, None, None, None, None, offered)],
        health=health,
        audit=None,
        snapshot=snapshot,
        retries=retries,
        client=client,
        path=path,
        worker_backends_max=worker_backends_max,
        waits=waits,
        server_cost=server_cost,
        spare_connections=spare_connections,
        claim_skips_locked=skips_locked,
        faults=faults,
        latency=latency,
        locks=locks,
    )


@functools.cache
def _recorded(
    share: int, e2e_ms: float, busy_ms: float, work_ms: float, claim_ms: float, complete_ms: float
) -> WorkerStats:
    """A worker's share recorded message by message, once for each set of figures: result() copies
    its counters and histograms (recorded anew for each worker of the module's fifty runs, they
    cost every pytest process a second of collection)."""
    s = WorkerStats(name="", queue_type="")
    for _ in range(share):
        s.record_processed(e2e_ms, busy_ms / 1000, work_ms / 1000)
        s.claim.record_ms(claim_ms)
        s.complete.record_ms(complete_ms)
    return s


def account(*, hidden_at: tuple[tuple[int, float], ...] = (), **parts_ms: float) -> LatencyAccount:
    """A latency account whose median and slowest 1% (ten messages each) took these parts, in ms;
    `hidden_at`: the slowest 1%'s hidden seconds, summed, by second of the run."""
    cohort = CohortSplit(10, **{f"{p}_ms": parts_ms.get(p, 0.0) for p in PARTS}, hidden_by_second=hidden_at)
    return LatencyAccount({"median": cohort, "p99": cohort}, {}, 0.0)


HELD = SnapshotHold(
    pid=4242, application="report job", held_s=30, dead_tuples_before=100, dead_tuples_peak=9000
)
BLOCKING = RetryFigures(
    failed_attempts=9,
    dead_lettered=1,
    recovered=0,
    lost_ownership=0,
    crashes=0,
    blocked_groups=(("type2", 7, 3, 4.5),),
)


def flooded(run: RunResult) -> RunResult:
    """The run with a session outside it (pid 777, 'flooder') waking 900 claims for nothing."""
    book = ClaimBook()
    book.took[INDEX[ClaimReason.NOTIFIED]] = run.processed
    book.empty[INDEX[ClaimReason.NOTIFIED]] = 900
    flood = book.sender(777)
    flood.notifications, flood.empty, flood.application, flood.own = 900, 900, "flooder", False
    claims = ClaimAccount.of([book], run.processed, run.elapsed_s, None, None, "pgmq_sim")
    return dataclasses.replace(run, claims=claims)


def flooded_per_request(run: RunResult) -> RunResult:
    """The run with an application outside it that connects per request, notifies 30 times and
    disconnects: 30 sessions, each gone before the listener named it, 900 claims woken for nothing."""
    book = ClaimBook()
    book.took[INDEX[ClaimReason.NOTIFIED]] = run.processed
    book.empty[INDEX[ClaimReason.NOTIFIED]] = 900
    for pid in range(800, 830):
        s = book.sender(pid)
        s.notifications, s.empty, s.own = 30 + (pid == 801), 30, False  # none named: gone when asked
    claims = ClaimAccount.of([book], run.processed, run.elapsed_s, None, None, "pgmq_sim")
    return dataclasses.replace(run, claims=claims)


# each rule, a run that calls for it, and words its line must hold
# autovacuum off by ALTER SYSTEM, read before the run: its own rule speaks, not the dead tuples'
UNVACUUMED = dataclasses.replace(
    result(health=TableHealth(1_000, 50_000, 0, 0, 1, 1)),
    census=ServerCensus("q", "q", (CensusSetting("autovacuum", "off", "configuration file",
                        "/pg/postgresql.auto.conf", 3),), (), SlotCensus((), "q", True), "readable", 1.0),
)  # fmt: skip
TRIGGERS: list[tuple[Callable[[RunResult], str | None], RunResult, tuple[str, ...]]] = [
    (
        advice.idle_workers,
        result(workers=12, groups=2, empty=5000),
        ("5,000 of 6,000 claims", "more workers than groups"),
    ),
    (advice.polling_latency, result(rate=100.0, e2e_ms=500), ("poll every 1 s", "-wakeup notify")),
    (advice.backlog_wait, result(e2e_ms=11_000), ("waiting in the prefilled backlog", "-rate R")),
    (advice.old_snapshot, result(snapshot=HELD), ("pid 4242", "report job", "100 -> 9,000")),
    (
        advice.autovacuum_off,
        UNVACUUMED,
        (
            "autovacuum off (autovacuum = off (the server's configuration file (/pg/postgresql.auto.conf:3",
            "50,000 dead tuples",
            "turn autovacuum back on",
        ),
    ),
    (
        advice.dead_tuples,
        result(health=TableHealth(1_000, 50_000, 0, 0, 1, 1)),
        ("50,000 dead tuples against 1,000 live",),
    ),
    (advice.head_of_line, result(retries=BLOCKING), ("type2/order 7", "4,500 ms over 3 failures")),
    (
        advice.client_starved,
        result(client=ClientCost((ProcessCpu("local", 1.0, 2.0, 1000, run_delay_s=3.0),))),
        ("waited 1.5 s per second for a CPU", "share the cores"),
    ),
]


# a cost a session outside the run caused, and words the advice's line for it must hold
COSTS: list[tuple[RunResult, tuple[str, ...]]] = [
    (flooded(result()), ("cost notifier: ", "pid 777 (app 'flooder')", "channel pgmq_sim")),
    (  # the fix cannot be to stop one pid already gone: the sessions, all of them
        flooded_per_request(result()),
        ("stop the 30 sessions outside the run notifying channel pgmq_sim", "a channel of their own"),
    ),
]


@pytest.mark.parametrize("run,words", COSTS)
def test_the_advice_names_the_fix_for_a_cost_from_outside(run: RunResult, words: tuple[str, ...]) -> None:
    lines = [line for line in judged_advice(run) if line.startswith("cost ")]
    assert len(lines) == 1, judged_advice(run)
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_every_rule_has_a_trigger() -> None:
    assert {rule for rule, _, _ in TRIGGERS} == set(advice.RULES)


@pytest.mark.parametrize("rule,run,words", TRIGGERS, ids=[rule.__name__ for rule, _, _ in TRIGGERS])
def test_rule_speaks_when_its_figures_call_for_it(
    rule: Callable[[RunResult], str | None], run: RunResult, words: tuple[str, ...]
) -> None:
    line = rule(run)
    assert line is not None
    for word in words:
        assert word in line, (word, line)
    assert line in judged_advice(run)


def test_a_quiet_run_gets_no_advice() -> None:
    assert judged_advice(result()) == []
    calm = ClientCost((ProcessCpu("local", cpu_s=0.6, elapsed_s=2.0, messages=1000, run_delay_s=0.2),))
    assert judged_advice(result(client=calm)) == []


def test_vacuum_advice_only_for_a_live_queue_and_not_for_a_held_snapshot() -> None:
    drained = result(health=TableHealth(0, 50_000, 0, 0, 1, 1))
    assert advice.dead_tuples(drained) is None
    held = result(health=TableHealth(1_000, 50_000, 0, 0, 1, 1), snapshot=HELD)
    assert advice.dead_tuples(held) is None and advice.old_snapshot(held) is not None


def test_idle_worker_advice_needs_more_workers_than_groups() -> None:
    # exactly 6 workers for 6 groups: empty claims are polling, not crowding
    assert advice.idle_workers(result(workers=6, groups=2, empty=5000)) is None


def test_prefill_latency_is_backlog_wait_only_without_a_rate() -> None:
    assert advice.backlog_wait(result(e2e_ms=11_000, rate=100.0)) is None
    assert advice.backlog_wait(result(e2e_ms=8)) is None


POOLED = RunPath(
    PoolerMode.TRANSACTION,
    True,
    (),
    PathFacts(PoolerMode.TRANSACTION, "shared backends", None, True, True, 180000),
)
TRIGGERED = WaitProfile(
    100,
    (("client", 54), ("other", 82), ("wal-flush", 62)),
    (),
    (),
    (("Timeout:PgSleep", 74), ("IPC:SyncRep", 8)),
)
SELF_LOCKING = LockCensus(40, 40, (), worker_holdings=40, worker_rows=3880, worker_rows_max=100)
FOREIGN = LockCensus(
    50, 50, (HolderSeen(4242, "blocker", "idle in transaction", 4.0, 29.0, 50, 60, 0, "", 25.0),)
)
FOREIGN_SECONDS = tuple((second, 9.6) for second in range(4, 29))  # 10 messages x 24 s, over 25 s
SCANNING = ServerCost(1000, 1_000_000, {"blks_hit": 900_000, "xact_commit": 3000}, None, None, None)


def policed(**changes: Any) -> RunResult:
    """A run whose workers' sessions the role's idle-in-transaction timeout (5 ms) ended 3000 times."""
    ended = ReasonCount(
        Cause.IDLE_IN_TRANSACTION, "25P03", "terminating connection due to idle-in-transaction timeout",
        3000, 0.1, 1.9, 3000, ("w1", "w2", "w3", "w4", "w5", "w6"), 3000,
    )  # fmt: skip
    idle = ServerSetting("idle_in_transaction_session_timeout", 5, "5ms", "user")
    return dataclasses.replace(
        result(**changes), server_reasons=(ended,), timeouts=ServerTimeouts("queue", "q", (idle,))
    )


def died(cause: Cause, sqlstate: str, message: str, **changes: Any) -> RunResult:
    """A run that died of one server error (a worker's), its workers busy: its figures alone would
    say `workers`. The database's statement_timeout is 3 ms."""
    timeout = ServerSetting("statement_timeout", 3, "3ms", "database")
    return dataclasses.replace(
        result(**{"groups": 100, "busy_ms": 6.0, "rate": 1000.0, "offered": 1200} | changes),
        outcome=Outcome.FAILED,
        ended_by=RunEnding("worker w10", ServerReason(cause, sqlstate, message)),
        timeouts=ServerTimeouts("queue", "q", (timeout,)),
    )


TIMED_OUT = died(Cause.STATEMENT_TIMEOUT, "57014", "canceling statement due to statement timeout")
BROKEN = died(Cause.OTHER, "42P01", 'relation "gone" does not exist')


def stalled_by_policy() -> RunResult:
    """A run stalled: every claim canceled by the database's 1 ms statement_timeout to its end."""
    run = result(processed=0)
    cancels = ReasonCount(
        Cause.STATEMENT_TIMEOUT, "57014", "canceling statement due to statement timeout",
        61, 0.1, run.elapsed_s - 0.2, 4, ("w1", "w2", "w3", "w4"), 0,
    )  # fmt: skip
    timeout = ServerSetting("statement_timeout", 1, "1ms", "database")
    return dataclasses.replace(
        run,
        outcome=Outcome.STALLED,
        server_reasons=(cancels,),
        timeouts=ServerTimeouts("queue", "q", (timeout,)),
    )


# each limit, a run whose figures put it there, and words its evidence and its fix must hold
LIMITS: list[tuple[str, RunResult, tuple[str, ...], tuple[str, ...]]] = [
    (
        "client-cpu",
        result(client=ClientCost((ProcessCpu("local", cpu_s=1.9, elapsed_s=2.0, messages=1000),))),
        ("95% of a core",),
        ("--processes N",),
    ),
    (
        "pool",
        result(
            workers=12,
            groups=4,
            claim_ms=6.0,
            complete_ms=0.5,
            busy_ms=12,
            worker_backends_max=4,
            path=POOLED,
        ),
        ("12 workers shared at most 4 server connections", "claim p50 6 ms"),
        ("pool size to about 8",),
    ),
    (
        "claim-plan",
        result(claim_ms=20, busy_ms=26, server_cost=SCANNING),
        ("900 buffers per message", "claim p50 is 20 ms"),
        ("-claim indexed",),
    ),
    (
        "locks",
        result(
            waits=WaitProfile(
                100,
                (("cpu", 60), ("locks", 140)),
                (("tuple", 100), ("transactionid", 40)),
                (BlockerSeen(77, "pgmq-sim w2", "active", True, "tuple", "msg_queue", "", 30),),
            ),
            strategy="seed+next-msg",
        ),
        (
            "locks 70% of their time in a transaction (Lock: tuple 71%, transactionid 29%)",
            "blocked by the run's own sessions (pgmq-sim w2) ahead in the queue for msg_queue in 100%",
        ),
        ("add SKIP LOCKED to the -next-msg claim's FOR UPDATE, or drop -next-msg for the seed claim",),
    ),
    (
        "wal-flush",
        result(waits=WaitProfile(100, (("client", 100), ("wal-flush", 100)))),
        ("LWLock: WALWrite) 50%",),
        ("synchronous_commit = off",),
    ),
    (
        "server-waits",  # a slow trigger on the queue's table, tried on a case no test built: not wal-flush
        result(waits=TRIGGERED),
        ("waiting on Timeout:PgSleep 90%, IPC:SyncRep 10%", "41% of their time in a transaction"),
        ("a trigger or a function on the queue's tables",),
    ),
    (
        "ordering",
        result(groups=100, hot=HotGroup("type2", 1, 400)),
        ("of the ordering bound", "group (type2, order_id 1) has 40% of the messages"),
        ("more workers cannot help",),
    ),
    (
        "workers",
        result(workers=3, groups=100, busy_ms=6.0, rate=1000.0, offered=1200, backlog_at_end=5000),
        ("busy 100%", "6 ms per message"),
        ("add workers: about 8 serve 1000/s at 80% busy",),
    ),
    (
        "outage",  # 0.6 s of a 2 s run: met, to the end; the producer's messages short meanwhile
        result(
            rate=1000.0,
            offered=4000,
            faults=(
                Fault(
                    1.4,
                    "outage",
                    "not injected: the pooler held up to 6 client(s) waiting",
                    0.6,
                    open_at_end=True,
                    connections_lost=0,
                ),
            ),
        ),
        (
            "the path was down 600 ms of 2,000 ms (30%): outage at 1.4 s out 600 ms, not recovered by the",
            "(not injected: the pooler held up to 6",
            "the producer wrote 25% of the offered messages on time",
        ),
        ("the run met an outage it did not inject",),
    ),
    (
        "producer",
        result(rate=1000.0, offered=4000, backlog_at_end=0),
        ("25% of the offered messages",),
        ("the producer set the pace",),
    ),
    (
        "server-policy",
        policed(),
        ("idle_in_transaction_session_timeout = 5ms (ALTER ROLE queue SET) ended 3,000 session(s)", "75%"),
        ("use -tx split", "ALTER ROLE queue SET idle_in_transaction_session_timeout = '1s'"),
    ),
    (
        "server-policy",  # the run died of it: its cause, not what it measured before
        TIMED_OUT,
        (
            "the run died at",
            "worker w10 met the server's statement_timeout = 3ms (ALTER DATABASE q SET) ended its statement",
            "(57014)",
        ),
        ("ALTER DATABASE q SET statement_timeout = '1s'", "ALTER ROLE queue SET statement_timeout = '1s'"),
    ),
    ("error", BROKEN, ("the run died at", "worker w10 met an error (42P01)", "does not exist"), ("check",)),
    (
        "server-policy",  # no message could pass: the run stalled while the setting canceled every claim
        stalled_by_policy(),
        ("no message passed in the last", "statement_timeout = 1ms (ALTER DATABASE q SET)", "61 time(s)"),
        ("ALTER DATABASE q SET statement_timeout = '1s'",),
    ),
    (
        "claim-locks",  # 12 workers, each claim locking every head: the others' claims came back empty
        result(workers=12, empty=468, latency=account(hidden=900, service=8), locks=SELF_LOCKING),
        (
            "the slowest 1% took 908 ms: hidden 99%, service 1%",
            "a worker holding a message held 97.0 rows of the queue (up to 100) on average in 40 census",
            "; the workers' claims came back empty 468 times in the run",
        ),
        ("lock only the rows the claim returns",),
    ),
    (
        "locks",  # another session held the advisory locks of one type's groups for 25 s
        result(latency=account(hidden=24_000, service=5, hidden_at=FOREIGN_SECONDS), locks=FOREIGN),
        (
            "hidden 100%",
            "100% pid 4242 (blocker; idle in transaction) held 60 advisory locks from 4.0 s to 29.0 s",
        ),
        ("a session outside the run holds 60 advisory locks: pid 4242 (blocker)",),
    ),
    (
        "claim-plan",  # the seed's claim over a backlog, polling: its claims came back empty meanwhile
        result(rate=100.0, offered=200, empty=900, latency=account(hidden=2500, capacity=500, service=5)),
        ("the slowest waited 2.5 poll intervals each: the claims came back empty 900 times while messages",),
        ("try -claim indexed",),
    ),
    (
        "polling",
        result(rate=100.0, offered=200, latency=account(hidden=480, capacity=20, service=5)),
        ("hidden 95%", "idle workers poll every 1 s after an empty claim"),
        ("-wakeup notify",),
    ),
]


def limit_run(resource: str) -> RunResult:
    """The last run of LIMITS whose limit is this resource."""
    return [run for name, run, *_ in LIMITS if name == resource][-1]


def test_a_pool_whose_server_connections_were_not_seen_says_not_observed() -> None:
    """No server connection was seen serving the workers: the pool verdict says so, never 'at most 0'."""
    run = result(workers=12, claim_ms=6.0, complete_ms=0.5, busy_ms=12, worker_backends_max=0, path=POOLED)
    limit = judged_limit(run)
    assert limit.resource == "pool", limit
    assert "12 workers shared server connections (not observed)" in limit.evidence, limit.evidence
    assert limit.fix is not None and "server connections seen: not observed" in limit.fix, limit.fix


def test_a_pooler_whose_server_login_failed_is_told_of_the_slots_not_a_larger_pool() -> None:
    """The pooler's own word that the server refused its login (server_login_retry) is the
    server's refusal: the limit says it, and the fix is the slots, never a larger pool."""
    note = "w3: server login has been failing, try again later (server_login_retry)"
    run = result(workers=12, claim_ms=6.0, complete_ms=0.5, busy_ms=12, worker_backends_max=0, path=POOLED)
    limit = judged_limit(dataclasses.replace(run, notes=(note,)))
    assert limit.resource == "pool", limit
    assert f"the server refused it more: the pooler said: {note}" in limit.evidence, limit.evidence
    assert limit.fix is not None and "reserve slots for the pooler's role" in limit.fix, limit.fix
    assert "pool size" not in limit.fix, limit.fix


@pytest.mark.parametrize("resource,run,evidence,fix", LIMITS, ids=[case[0] for case in LIMITS])
def test_the_limit_is_the_resource_its_figures_show(
    resource: str, run: RunResult, evidence: tuple[str, ...], fix: tuple[str, ...]
) -> None:
    limit = judged_limit(run)
    assert limit.resource == resource, limit
    for words in evidence:
        assert words in limit.evidence, (words, limit.evidence)
    assert limit.fix is not None
    for words in fix:
        assert words in limit.fix, (words, limit.fix)
    lines = judged_advice(run)
    assert lines[0] == f"limit {resource}: {limit.fix}"


NOTIFIED = {"wakeup": "notify", "rate": 100.0, "offered": 200, "claim_ms": 0.3, "complete_ms": 0.5}
RECOVERED = RetryFigures(9, 0, 5, 2, 1, ())
# limits read from the account that have no fix to give, and words their evidence must hold
UNFIXED: list[tuple[str, RunResult, tuple[str, ...]]] = [
    (
        "wakeup",
        result(**NOTIFIED, latency=account(hidden=1.4, service=1.2)),
        ("hidden 54%", "a notified wake-up takes about 3 round trips", "up to 1.5 ms"),
    ),
    (
        "lease",
        result(**NOTIFIED, tx="split", retries=RECOVERED, latency=account(hidden=8000, service=5)),
        ("5 message(s) came back only once their lease (30 s) passed or their owner stopped",),
    ),
    ("due", result(**NOTIFIED, latency=account(due=900, service=5)), ("before they were due",)),
    (
        "unexplained",
        result(**NOTIFIED, latency=account(hidden=5000, service=5)),
        ("100% of it unexplained (looked at the lock census: not taken, 0 outage(s), the wake-up (notify))",),
    ),
    (
        "none",
        result(**NOTIFIED, latency=account(hidden=1, capacity=1, service=20)),
        ("the slowest 1% took 22 ms: service 91%", "the offered 100/s was served below every limit"),
    ),
]


@pytest.mark.parametrize("resource,run,evidence", UNFIXED, ids=[case[0] for case in UNFIXED])
def test_a_limit_read_from_the_account_names_where_the_time_went(
    resource: str, run: RunResult, evidence: tuple[str, ...]
) -> None:
    limit = judged_limit(run)
    assert limit.resource == resource, limit
    for words in evidence:
        assert words in limit.evidence, (words, limit.evidence)
    assert limit.fix is None and not any(line.startswith("limit ") for line in judged_advice(run))


def test_most_of_the_slowest_hidden_is_never_none() -> None:
    """Whatever the run's other figures say (far below every limit here), hidden time that makes
    most of the slowest 1% gets a cause or is called unexplained."""
    for hidden in (12.0, 120.0, 1200.0):
        limit = judged_limit(result(**NOTIFIED, latency=account(hidden=hidden, service=hidden / 2)))
        assert limit.resource not in ("none", "workers"), (hidden, limit)


def test_the_median_can_wait_for_a_poll_while_the_slowest_wait_for_a_foreign_lock() -> None:
    """Issue 38's first case, each cohort by its own account: the slowest 1% were hidden 24 s while
    another session held their groups' advisory locks (the limit), the median ~0.5 s for a poll."""
    slowest = CohortSplit(10, 0, 0, 100, 24_000, 5, FOREIGN_SECONDS)
    median = CohortSplit(500, 0, 0, 20, 480, 5)
    both = LatencyAccount({"median": median, "p99": slowest}, {}, 0.0)
    lines = judged_advice(result(rate=200.0, offered=400, latency=both, locks=FOREIGN))
    assert lines[0].startswith("limit locks: a session outside the run holds 60 advisory locks"), lines
    assert "the median message waited 480 ms of its 505 ms hidden from idle workers that poll" in lines[1]
    assert len(lines) == 2, lines


def test_a_pause_while_another_session_held_the_queue_is_a_lock_not_an_outage() -> None:
    """Tried on a case no test built: LOCK TABLE msg_queue IN EXCLUSIVE MODE for 3 s from another
    session paused every completion; the run met an 'outage' and the limit said so. The census saw
    the holder over the pause: the fault is a lock held, and no outage is judged from it."""
    table = HolderSeen(
        26678, "other-team", "idle in transaction", 4.0, 6.5, 6, 0, 0, "ExclusiveLock on msg_queue", 3
    )
    met = Fault(3.66, "outage", "not injected: the producer wrote nothing for 2 s", 3.0, connections_lost=0)
    lost = dataclasses.replace(met, at_s=9.0, connections_lost=6)  # connections lost: an outage still
    faults = held_pauses([met, lost], [table])
    assert [f.kind for f in faults] == ["lock held", "outage"]
    assert faults[0].detail == (
        "not injected: pid 26678 (other-team; idle in transaction) held ExclusiveLock on msg_queue"
        " from 4.0 s to 6.5 s"
    )
    limit = judged_limit(result(faults=(faults[0],), locks=LockCensus(20, 20, (table,))))
    assert limit.resource != "outage", limit


def test_a_producer_held_by_another_sessions_lock_is_a_locks_limit() -> None:
    """Tried on a case no test built: the queue's order_id a foreign key to orders, and another
    session holding orders row 1 FOR UPDATE for 3 s: the producer's inserts waited, the producer fell
    behind its rate. The census saw whom the producer waited for."""
    parent = HolderSeen(
        6626, "other-team", "idle in transaction", 2.5, 5.0, 6, 0, 0, "", 2.6, "pgmq-sim producer"
    )
    limit = judged_limit(result(rate=300.0, offered=4000, locks=LockCensus(20, 20, (parent,))))
    assert limit.resource == "locks", limit
    assert (
        "pid 6626 (other-team; idle in transaction) held a lock the run's producer waited for"
        in limit.evidence
    )
    assert (
        limit.fix is not None
        and "holds a lock the run's producer waited for: pid 6626 (other-team)" in limit.fix
    )


def test_a_fallback_that_found_messages_explains_their_hidden_time() -> None:
    """With notify, a type's fallback claim that found messages no notification woke a worker for
    is measured (fallback_finds): it explains hidden time up to its interval."""
    run = result(**NOTIFIED, latency=account(hidden=600, service=5))
    run = dataclasses.replace(
        run, workers=tuple(dataclasses.replace(w, fallback_finds=3) for w in run.workers)
    )
    limit = judged_limit(run)
    assert limit.resource == "wakeup", limit
    assert "fallback claim (once per 1 s) found messages 18 times" in limit.evidence, limit
    # one find explains one message's interval, not the ten messages' of the cohort (seen on a sweep:
    # two finds were said to explain all 40 of its slowest)
    one = tuple(dataclasses.replace(w, fallback_finds=int(i == 0)) for i, w in enumerate(run.workers))
    few = judged_limit(dataclasses.replace(run, workers=one))
    assert few.resource == "unexplained", few
    assert "wakeup explains 17%" in few.evidence, few


def test_a_claim_reading_from_a_function_that_locks_more_gets_its_fix_named_for_the_function() -> None:
    """Tried on a case no test built: the real pgmq's read_grouped locked 83 of 100 group heads per
    worker holding one message. The claim's own text locks nothing: the fix names the function."""
    claim = (REPO / "src/pgmq_sim/designs/pgmq/claim.sql").read_text()
    assert source_functions(claim) == ("pgmq.read_grouped",)
    run = dataclasses.replace(
        limit_run("claim-locks"), queue={"claim_reads_from": list(source_functions(claim))}
    )
    limit = judged_limit(run)
    assert limit.resource == "claim-locks" and limit.fix is not None, limit
    assert limit.fix.startswith("the claim reads from pgmq.read_grouped, which locks more rows than it"), (
        limit
    )


def test_no_more_workers_are_advised_than_the_server_allows_connections() -> None:
    busy = {
        "workers": 3,
        "groups": 100,
        "busy_ms": 6.0,
        "rate": 1000.0,
        "offered": 1200,
        "backlog_at_end": 5000,
    }
    room = judged_limit(result(**busy, spare_connections=50)).fix
    assert room == "add workers: about 8 serve 1000/s at 80% busy"
    tight = judged_limit(result(**busy, spare_connections=2)).fix
    assert tight is not None and tight.startswith(
        "add workers up to 5, all the connections the server allows"
    )


def test_a_claim_that_reads_many_buffers_in_a_run_that_kept_up_is_no_limit() -> None:
    """Tried on a case no test built: a snapshot held through a paced run made the indexed claim
    step over dead tuples (900 buffers a message) while the run kept up with its 500/s; the claim
    bounded nothing, and the verdict was claim-plan. Below its rate it is none; behind it, the plan."""
    scanning = {"claim_ms": 20, "busy_ms": 6, "server_cost": SCANNING, "rate": 500.0, "groups": 100}
    kept_up = judged_limit(result(**scanning, offered=1000, backlog_at_end=3))
    assert kept_up.resource == "none", kept_up
    behind = judged_limit(result(**scanning, offered=4000, backlog_at_end=3000))
    assert behind.resource == "claim-plan", behind


def test_a_wait_share_from_too_few_samples_is_no_verdict() -> None:
    """A run of a fraction of a second gives a few samples: a third of fifteen is no profile."""
    few = judged_limit(result(waits=WaitProfile(3, (("client", 5), ("wal-flush", 5), ("cpu", 5)))))
    assert few.resource != "wal-flush", few


def test_a_steady_rate_below_every_limit_is_none_and_gets_no_fix() -> None:
    limit = judged_limit(result(rate=500.0, offered=1000, backlog_at_end=3))
    assert (limit.resource, limit.fix) == ("none", None)
    assert "the offered 500/s was served below every limit" in limit.evidence
    assert not [line for line in judged_advice(result(rate=500.0, offered=1000)) if line.startswith("limit")]


OPPOSITES = (
    ("add workers", "fewer workers"),
    ("add workers", "more workers cannot help"),
    ("add workers", "more workers will not help"),
    ("raise the pooler's pool size", "run fewer workers"),
)


def test_no_two_advice_lines_contradict() -> None:
    """Over every constructed limit and every rule's trigger: one limit line at most, and never a
    line that undoes another."""
    for run in [case[1] for case in LIMITS] + [case[1] for case in TRIGGERS]:
        lines = judged_advice(run)
        assert sum(line.startswith("limit ") for line in lines) <= 1, lines
        text = " | ".join(lines)
        for one, other in OPPOSITES:
            assert not (one in text and other in text), lines


def test_the_ordering_bound_is_one_figure_under_one_name() -> None:
    """The summary's ordering bound row and the limit that judges by it quote one figure: the groups'
    cycle of work, claim and completion. The work-only bound is not shown under that name."""
    run = result(groups=100, hot=HotGroup("type2", 1, 400), claim_ms=2.0, complete_ms=1.5)
    out = io.StringIO()
    print_summary(Console(file=out, width=400), run, judge_run(run), verbose=True)  # the row is the detail's
    text = " ".join(out.getvalue().replace("│", " ").split())
    quoted = re.findall(r"ordering bound:? ([\d,]+)/s", text)
    assert run.ordering_bound_per_s is not None and run.work_bound_per_s is not None
    assert quoted == [f"{run.ordering_bound_per_s:.0f}"] * 2, (quoted, text)  # the row and the limit
    assert f"{run.work_bound_per_s:.0f}/s" not in text
    assert "5.5 ms work + 2 ms claim + 1.5 ms completion" in text, text


ROW_WAITS = WaitProfile(
    100,
    (("cpu", 60), ("locks", 140)),
    (("tuple", 120), ("transactionid", 20)),
    (BlockerSeen(77, "pgmq-sim w2", "active", True, "transactionid", "transactionid", "ExclusiveLock", 30),),
)
BUSY = {"groups": 100, "busy_ms": 6.0, "rate": 1000.0, "offered": 1200, "backlog_at_end": 5000}
# each limit and rule, a run that already does what its fix would say, and what must not be said
ALREADY: list[tuple[str, RunResult, tuple[str, ...]]] = [
    ("cost", flooded(result(wakeup="notify", rate=100.0)), ("-wakeup notify",)),
    ("client-cpu", LIMITS[0][1], ()),
    ("pool", LIMITS[1][1], ("run 12 workers",)),
    (
        "claim-plan",
        result(claim_ms=20, busy_ms=26, server_cost=SCANNING, strategy="indexed", claim="indexed"),
        ("-claim indexed",),
    ),
    (
        "locks",
        result(waits=ROW_WAITS, strategy="indexed", claim="indexed", skips_locked=True),
        ("-claim indexed", "use a claim that skips locked rows"),
    ),
    (
        "locks",  # a -next-msg that does not skip, given with -claim advisory: the other claim is named
        result(waits=ROW_WAITS, strategy="advisory+next-msg", claim="advisory"),
        ("-claim advisory",),
    ),
    ("wal-flush", LIMITS[4][1], ()),
    ("server-waits", LIMITS[5][1], ()),
    ("ordering", LIMITS[6][1], ("add workers",)),
    ("workers", result(workers=3, spare_connections=0, **BUSY), ("add workers",)),
    (
        "workers",
        result(workers=6, spare_connections=50, **BUSY | {"groups": 2, "busy_ms": 12.0}),
        ("add workers",),
    ),
    ("workers", result(workers=3, groups=100, busy_ms=6.0, spare_connections=1), ("up to 3", "about 3 ")),
    ("producer", LIMITS[9][1], ()),
    ("outage", LIMITS[8][1], ()),
    ("server-policy", policed(tx="split"), ("-tx split",)),
    ("error", BROKEN, ()),
    ("server-cpu", result(server_cost=ServerCost(1000, 1e6, {"xact_commit": 3000}, None, None, 2.0 * 8)), ()),
    ("idle_workers", result(workers=12, groups=2, empty=5000), ()),
    ("polling_latency", result(rate=100.0, e2e_ms=500, wakeup="notify"), ("-wakeup notify",)),
    ("backlog_wait", result(e2e_ms=11_000, rate=100.0, offered=1000), ("-rate R",)),
    ("old_snapshot", result(snapshot=HELD), ()),
    ("dead_tuples", result(health=TableHealth(1_000, 50_000, 0, 0, 1, 1)), ()),
    ("autovacuum_off", UNVACUUMED, ()),
    ("head_of_line", result(retries=BLOCKING), ()),
    ("client_starved", TRIGGERS[-1][1], ()),
    ("claim-locks", limit_run("claim-locks"), ()),
    ("polling", limit_run("polling"), ("-wakeup poll",)),
    *((name, run, ("-wakeup notify", "-tx split")) for name, run, _ in UNFIXED if name != "none"),
]


FLAGS = ("-claim", "-wakeup", "-tx")  # flags a fix may name with a value: never the run's own


def repeats(line: str, r: RunResult) -> str | None:
    """The test's oracle: what in a line of advice the run already does, or None: a flag with the
    run's own value, a claim that skips locked rows to a run whose claim does, a rate to a paced
    run, workers beyond the connections the server allows or to no more than the run has."""
    s = r.settings
    for flag in FLAGS:
        own = str(getattr(s, flag[1:]))
        if re.search(rf"(?<![\w-]){flag} {re.escape(own)}\b", line):
            return f"{flag} {own}"
    if r.claim_skips_locked and "use a claim that skips locked rows" in line:
        return "a claim that skips locked rows"
    if s.paced and "-rate R" in line:
        return f"-rate {s.rate:g}"
    asked = re.search(r"add workers(?:: about| up to) (\d+)", line)
    if asked and int(asked.group(1)) <= len(r.workers):
        return f"-workers {len(r.workers)}"
    if "add workers" in line and r.spare_connections is not None and r.spare_connections <= 0:
        return f"-workers {len(r.workers)}: the server allows no more connections"
    return None


def test_every_limit_and_rule_is_tried_on_a_run_that_already_does_what_it_would_say() -> None:
    named = {name for name, _, _ in ALREADY}
    assert named >= {rule.__name__ for rule in advice.RULES}
    assert named >= set(Resource) - {Resource.NONE, Resource.NOTIFIER}  # a notifier: a cost, never the limit


@pytest.mark.parametrize("name,run,never", ALREADY, ids=[f"{case[0]}-{i}" for i, case in enumerate(ALREADY)])
def test_no_advice_repeats_what_the_run_already_does(
    name: str, run: RunResult, never: tuple[str, ...]
) -> None:
    """Each fix read against the run's settings: never the claim it uses, a wake-up it has, a rate it
    runs at, nor workers beyond its connections or groups. The rule itself says none of it."""
    verdict = judge_run(run)
    if name == "cost":
        assert verdict.cost is not None and verdict.cost.fix is not None, verdict.cost
    elif name in set(Resource):
        assert verdict.limit.resource == name, verdict.limit
    else:
        rule = next(rule for rule in advice.RULES if rule.__name__ == name)
        assert rule(run) is not None or name in ("polling_latency", "backlog_wait"), name
    for line in verdict.advice:
        assert repeats(line, run) is None, (repeats(line, run), line)
        for words in never:
            assert words not in line, (words, line)


def test_the_oracle_names_what_a_line_would_repeat() -> None:
    indexed = result(strategy="indexed", claim="indexed", skips_locked=True, wakeup="notify", rate=50.0)
    assert repeats("try -claim indexed, which reads only each group's head", indexed) == "-claim indexed"
    assert repeats("try -claim advisory", indexed) is None
    assert repeats("-wakeup notify wakes them at once", indexed) == "-wakeup notify"
    assert repeats("use a claim that skips locked rows (-claim advisory)", indexed) is not None
    assert repeats("use -rate R to measure latency at a steady load", indexed) == "-rate 50"
    assert repeats("add workers: about 6 serve 100/s at 80% busy", indexed) == "-workers 6"
    assert repeats("add workers: about 7 serve 100/s at 80% busy", indexed) is None
    full = result(spare_connections=0)
    assert repeats("add workers: each adds about 100/s", full) is not None


def test_the_runs_own_blockers_are_summed_and_a_foreign_one_named_when_it_holds_the_lock() -> None:
    """Twelve workers each blocking the others a few times (a claim that does not skip locked rows)
    are one cause, the run's own sessions; a session outside the run named beside them takes the
    fix only when it blocked at least half as often as they did."""
    held = ("idle in transaction", True, "transactionid", "transactionid", "ExclusiveLock", 6)
    workers = tuple(BlockerSeen(100 + i, f"pgmq-sim w{i + 1}", *held) for i in range(12))
    rows = ((("cpu", 60), ("locks", 140)), (("transactionid", 90), ("tuple", 50)))

    def limit(*blockers: BlockerSeen) -> Limit:
        waits = WaitProfile(100, *rows, blockers)
        return judged_limit(result(waits=waits, strategy="indexed+next-msg", claim="indexed"))

    own = limit(*workers)
    assert own.resource == "locks" and own.fix is not None
    assert (
        "blocked by the run's own sessions (pgmq-sim w1, pgmq-sim w10, pgmq-sim w11 and 9 more) holding"
        " ExclusiveLock on transactionid in 100% of the samples that named a blocker" in own.evidence
    ), own.evidence
    assert own.fix == (
        "claims queue behind each other's row locks: add SKIP LOCKED to the -next-msg claim's FOR UPDATE, or"
        " drop -next-msg for the indexed claim"
    )
    report = BlockerSeen(
        4242, "report job", "idle in transaction", False, "relation", "msg_queue", "ExclusiveLock", 40
    )
    both = limit(report, *workers)
    assert both.fix is not None and both.fix.startswith("a session outside the run holds ExclusiveLock")
    assert "pid 4242 (report job; outside the run; idle in transaction) holding" in both.evidence
    rare = limit(*workers, dataclasses.replace(report, samples=10))  # a sixth of the workers': not the cause
    assert rare.fix is not None and rare.fix.startswith("claims queue behind each other's row locks")


def test_a_run_that_died_names_its_cause_and_the_fix_in_one_line() -> None:
    from pgmq_sim.verdicts.ending import ending_line
    from pgmq_sim.verdicts.policies import run_shape

    assert TIMED_OUT.ended_by is not None
    line = ending_line(TIMED_OUT.ended_by, TIMED_OUT.timeouts, run_shape(TIMED_OUT.settings, False))
    assert line.startswith(
        "worker w10 failed: the server's statement_timeout = 3ms (ALTER DATABASE q SET) ended its statement:"
    ), line
    assert "raise it where it is set (ALTER DATABASE q SET statement_timeout = '1s')" in line, line
    assert "for the queue's role only (ALTER ROLE queue SET statement_timeout = '1s')" in line, line
