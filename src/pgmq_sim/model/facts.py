"""What the server said, as plain values (no driver types): the database layer reads them, the result
holds them, and the audit verdict and the diagnosis can be built and tested without a server."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, NamedTuple

from pgmq_sim.model.identity import Whose, said, whose
from pgmq_sim.model.kinds import PoolerMode


@dataclass(frozen=True)
class PreviousRun:
    """What a run that used these tables left: its record in pgmq_sim_run."""

    run_id: str
    started_at: datetime
    finished_at: datetime | None
    outcome: str
    target: int | None  # None: a run bounded by time alone
    produced: int
    ordered: bool
    audited: bool
    settings: str

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


@dataclass(frozen=True)
class TableHealth:
    live_tuples: int
    dead_tuples: int
    autovacuum_runs: int
    autoanalyze_runs: int
    table_bytes: int
    index_bytes: int
    toast_bytes: int = 0  # large values (payloads) moved out of the rows

    def as_json(self) -> dict[str, int]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["size_bytes"] = data.pop("table_bytes")
        return data


@dataclass(frozen=True)
class DuplicateClaims:
    """One message completed more than once: by whom, and whether its claims overlapped."""

    msg_id: int
    workers: tuple[str, ...]
    overlapped: bool  # a second claim while the first was open (claimed before it completed)
    gap_s: float  # from the first claim to the second (a lease's length, for a redelivery)


@dataclass(frozen=True)
class OrderViolation:
    """A message of a group claimed before the group's previous message completed."""

    queue_type: str
    order_id: int
    msg_id: int
    prev_msg_id: int
    worker: str
    prev_worker: str
    early_s: float  # how long before the previous completion it was claimed
    overtook: bool = False  # claimed before the previous one was: it was pending, not in flight


@dataclass(frozen=True)
class OrderFacts:
    """What the rows of a folder design's order violations say about each pair (a group's earlier
    message, and the later one claimed before it completed): measured, so the audit's cause comes
    from them before anything read from the claim's text."""

    pairs: int
    overtook: int  # the claim returned the later message before the earlier one
    keyed: bool  # the design has ids of its own (pgmq_sim_enqueued.design_id)
    ids_inverted: int  # the later message's design id sorts before the earlier's
    inverted_same_ms: int  # of those, enqueued within the same millisecond
    inverted_apart_ms: float  # of those, the farthest apart their enqueues were
    due_earlier: int  # the later message was due before the earlier one
    ranked_higher: int  # the later message had the higher priority
    example: tuple[str, ...] = ()  # an inverted pair: msg_id, its design id, the earlier's msg_id, design id


@dataclass(frozen=True)
class AuditCounts:
    """What the journal and the queue say, counted on the server."""

    processed: int
    duplicates: int
    missing: int
    left_behind: int
    duplicate_ids: tuple[int, ...]
    missing_ids: tuple[int, ...]
    order_violation_ids: tuple[int, ...]
    order_violations: int
    dead_lettered: int = 0
    redelivered: int = 0
    attempts: int = 0
    failed_attempts: int = 0
    early: int = 0  # completed before their due time
    redelivered_ids: tuple[int, ...] = ()
    early_ids: tuple[int, ...] = ()
    overtaking: int = 0  # of the order violations, messages claimed before their group's earlier one was
    # a group ordered by priority, then enqueue order (procrastinate's lock): messages that overtook
    # an earlier one by a higher priority, as that order promises (None: the order is enqueue order)
    priority_overtakings: int | None = None
    # the evidence a failed audit's cause is read from: for the first duplicates, each completion
    # (worker, claimed, completed) and whether a second claim came while the first was open; for
    # the first order violations, the group and both messages with their workers
    duplicate_claims: tuple[DuplicateClaims, ...] = ()
    violations: tuple[OrderViolation, ...] = ()
    order_facts: OrderFacts | None = None  # a folder design's: measured from its rows

    def as_json(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(AuditCounts)}  # not a subclass's own
        values["duplicate_claims"] = [d.__dict__ for d in self.duplicate_claims]
        values["violations"] = [v.__dict__ for v in self.violations]
        values["order_facts"] = None if self.order_facts is None else dict(self.order_facts.__dict__)
        return {name: list(v) if isinstance(v, tuple) else v for name, v in values.items()}


class TablePulse(NamedTuple):
    """The housekeeper's second: the queue's table, who holds the oldest snapshot, the workers'
    server connections."""

    dead_tuples: int
    holder_pid: int | None  # the session whose snapshot is the oldest (None: no session holds one)
    holder_application: str
    holder_xmin: str | None  # its backend_xmin: the same one in consecutive samples is a held snapshot
    xmin_age: int | None  # that xmin's age, in transactions
    worker_backends: int
    table_bytes: int  # table, indexes and TOAST
    autovacuums: int  # autovacuum runs on the table so far


class LockBlocker(NamedTuple):
    """A session that blocked one of the run's sessions waiting on a lock (pg_blocking_pids), and the
    object waited on: one sample of it (sql/lock_blockers.sql, the one census of blocking sessions)."""

    waiter_pid: int
    waiter: str  # the waiting session's application ('pgmq-sim producer')
    pid: int
    application: str
    state: str  # '' where the role may not see it
    ours: bool  # the run's own, or its pool's (model/identity): not a session outside the run
    lock: str  # the waiter's lock type: relation, tuple, transactionid, advisory, object, ...
    target: str  # the relation waited on, else the lock type
    mode: str  # the modes the blocker holds on it ('' when it only waits ahead in the queue)
    xact_s: float = 0.0  # how long the blocker's transaction has been open (0 where not seen)
    query: str = ""  # the start of its query ('' where not seen)
    address: str = ""  # its client address ('' for a local socket)
    database: str = ""  # the blocker's database when it is not the run's ('' when it is)


def lock_blocker(row: Sequence[Any], transaction_pooled: bool) -> LockBlocker:
    """A row of sql/lock_blockers.sql, its session's identity decided by model/identity."""
    waiter_pid, waiter, pid, application, state, lock, target, mode, xact_s, query, address, database = row
    who = whose(str(application), str(query), not database, transaction_pooled)
    return LockBlocker(
        int(waiter_pid), str(waiter), int(pid), said(str(application), who), str(state), who != Whose.OUTSIDE,
        str(lock), str(target), str(mode), float(xact_s or 0), str(query), str(address), str(database),
    )  # fmt: skip


NOTIFY_QUEUE = "the notification queue"  # lock_blockers.sql's name for the lock every notifying commit takes


class HeldLocks(NamedTuple):
    """One session seen holding locks a claim may skip or wait on, in one sample of the lock census:
    advisory locks, a lock on a queue table that blocks a claim's writes, rows of a queue table."""

    pid: int
    application: str
    worker: bool  # one of the run's workers (model/identity)
    state: str  # '' where the role may not see it
    xact_s: float  # how long its transaction has been open (0 where not seen)
    advisory: int
    relation: str  # e.g. 'ExclusiveLock on msg_queue' ('' for none)
    rows: int | None  # rows of the queue's busiest table it has locked or changed (None: not counted)
    whose: Whose = Whose.OUTSIDE  # the run's own, its pool's, or outside the run (model/identity)


class LockSample(NamedTuple):
    """The lock census once: the server's clock, and who held what."""

    server_epoch: float
    held: tuple[HeldLocks, ...]
    rows_counted: bool


@dataclass(frozen=True)
class StallFacts:
    blocked: list[LockBlocker]
    pending_by_type: list[tuple[Any, ...]]
    heads: list[tuple[Any, ...]]
    unlocked_heads: set[int]
    lock_holders: list[tuple[Any, ...]]
    sees_all: bool = True  # the role sees every session's state and query


@dataclass(frozen=True)
class StatementCounters:
    """One statement's cumulative counters in pg_stat_statements, or the difference of two readings."""

    query: str
    calls: int
    exec_ms: float
    rows: int
    blks_hit: int
    blks_read: int
    wal_bytes: int

    def minus(self, earlier: StatementCounters | None) -> StatementCounters:
        if earlier is None:
            return self
        return StatementCounters(
            self.query,
            self.calls - earlier.calls,
            self.exec_ms - earlier.exec_ms,
            self.rows - earlier.rows,
            self.blks_hit - earlier.blks_hit,
            self.blks_read - earlier.blks_read,
            self.wal_bytes - earlier.wal_bytes,
        )


@dataclass(frozen=True)
class ServerCounters:
    """The server's cumulative counters at one moment; what is not visible there is None."""

    wal_lsn: int  # the WAL insert position, in bytes
    database: dict[str, int]  # pg_stat_database of this database
    wal: dict[str, int] | None  # pg_stat_wal (14+)
    io: dict[str, int] | None  # pg_stat_io, summed (16+)
    statements: dict[int, StatementCounters] | None  # pg_stat_statements, when installed and loaded
    statements_note: str | None = None  # why there are none


@dataclass(frozen=True)
class PathFacts:
    pooler: PoolerMode  # what the probe found (NONE: no sign of a pooler)
    evidence: str
    tls: str | None  # "TLSv1.3" when the connection is encrypted
    superuser: bool
    sees_all_sessions: bool  # superuser, pg_read_all_stats or pg_monitor
    version: int
    database: str = ""  # as the client named it (a pooler's database name)


@dataclass(frozen=True)
class PoolerPulse:
    """The run's pool as the pooler's console shows it at one moment."""

    waiting: int  # clients waiting for a server connection
    active: int  # clients linked to a server connection
    servers_active: int
    servers_idle: int  # idle or just used: ready for the next client
    longest_wait_ms: float  # the oldest waiting client's wait so far
    waited_s: float  # clients' wait for a server connection, in all since the pooler started
