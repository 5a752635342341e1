"""A worker's session values, as the database layer hands them to the actors: plain values, no
driver types, made on the hot path."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from pgmq_sim.model.kinds import SessionMode

# msg_id, queue_type, status, order_id, time_added[, payload]: a row of the seed's table, for COPY
Row = tuple[int, str, str, int, datetime] | tuple[int, str, str, int, datetime, bytes]


class Message(NamedTuple):
    """One message as the producer enqueues it (a tuple: one is made per message)."""

    msg_id: int
    queue_type: str
    order_id: int
    time_added: datetime  # on the server's clock, distinct and increasing
    payload: bytes | None = None
    priority: int = 0
    due_at: datetime | None = None  # a delayed message's due time; None: due when enqueued

    @property
    def not_before(self) -> datetime:
        return self.time_added if self.due_at is None else self.due_at

    def row(self) -> Row:
        """As a row of the seed's table."""
        if self.payload is None:
            return (self.msg_id, self.queue_type, "N", self.order_id, self.time_added)
        return (self.msg_id, self.queue_type, "N", self.order_id, self.time_added, self.payload)


class Claimed(NamedTuple):
    """A claimed message (a tuple: one is made per message, on the worker's hot path)."""

    msg_id: int  # the tool's message number (0 for a design of its own ids: the journal finds it)
    queue_type: str
    order_id: int
    claimed_at: str  # the server's text (DateStyle ISO): sent back as is, logged as is
    attempt: int = 1
    key: str | None = None  # a design's own id as the server wrote it (enqueue.sql `returning ... as msg_id`)
    # how long its worker had been free before this claim (its claims came back empty, or it slept
    # after one, or it was reconnecting), for the latency account; None: it came straight from its
    # last message
    free_s: float | None = None
    # how long the claim statement that took it ran, on the server's clock, from its arrival to its
    # locks (the latency account's claim part); None: not measured
    claim_s: float | None = None

    @property
    def shown_id(self) -> str:
        """The id a person knows the message by: the design's own, or the tool's number."""
        return self.key if self.key is not None else str(self.msg_id)


@dataclass(frozen=True)
class SessionPlan:
    """What a worker's session runs: the design's claim and completion and, with leases and retries
    (`mode` single-with-retries or split), the attempt bookkeeping."""

    claim_sql: str
    delmsg: bool
    audited: bool
    mode: SessionMode = SessionMode.BASIC
    lease_s: float = 30.0
    max_attempts: int = 1
    backoff_ms: float = 0.0
    functions: bool = False  # call functions made for the run instead of PREPAREing per session
    chain: bool = True  # claim the next message in the completion's round trip (not behind a
    # transaction pooler: the open transaction would pin the server connection to this worker)
    pooled: bool = False  # a pooler in the way: the client's backend pid is the pooler's cancel key
    complete_sql: str = ""  # the design's completion (the seed's table: its first line declares it)
    fail_sql: str | None = None  # a folder design's fail.sql (-fail-rate)
    batch: int = 1  # messages a claim may take at once (-batch)
    seed_table: bool = True  # the seed's msg_queue: the tool's attempt columns, leases and journal form
    at_least_once: bool = False  # a split design that may deliver a message again once its lease passed
    id_type: str = "bigint"  # the message id's type as the design's statements take it ($1)
    keyed: bool = False  # the design's own ids (its enqueue returns msg_id): the tool maps them to its own
    builtin_claim: bool = False  # the claim is a built-in design's file (its batch is written in)
    channel: str | None = None  # the design's own notification channel ({type}: the type), one message each
    claim_returns: str = ""  # the claim's columns as a function returns them ("msg_id bigint, ..."), for
    # functions (behind a transaction pooler); read from the claim's own description at the install
    # the role's statement or lock timeout in ms, when on: the journal's row, the tool's bookkeeping
    # in the team's transaction, runs under the tool's bound between two SET LOCALs (db/session_text)
    team_timeouts: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", SessionMode(self.mode))  # as it arrives from another process

    @property
    def chains(self) -> bool:
        """A completion may carry the next claim: only in the basic mode, where the claim's
        transaction is the message's, and where the server connection is the worker's own."""
        return self.chain and self.mode == SessionMode.BASIC


@dataclass(frozen=True)
class QueueShape:
    """What the tool's own statements need to know of the queue's tables: the seed's msg_queue, or
    a folder design's tables (known once its schema ran), how to find its pending messages, and the
    lease after which an at-least-once design may deliver a message again."""

    seed_table: bool = True
    tables: tuple[str, ...] = ("msg_queue",)
    pending_sql: str | None = None
    redelivery_lease_s: float | None = None
    recover_sql: str | None = None  # a folder design's: its messages whose lease passed, back to pending
    keyed: bool = False  # the design's own ids: pending.sql returns them, pgmq_sim_enqueued maps them
    by_priority: bool = False  # a group's order is by priority, then enqueue order (and priorities vary)
