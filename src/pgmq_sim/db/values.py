"""A worker's session values, as the database layer hands them to the actors: plain values, no
driver types, made on the hot path."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from pgmq_sim.model.kinds import SessionMode

# msg_id, queue_type, status, order_id, time_added[, payload]
Row = tuple[int, str, str, int, datetime] | tuple[int, str, str, int, datetime, bytes]


class Claimed(NamedTuple):
    """A claimed message (a tuple: one is made per message, on the worker's hot path)."""

    msg_id: int
    queue_type: str
    order_id: int
    claimed_at: str  # the server's text (DateStyle ISO): sent back as is, logged as is
    attempt: int = 1


@dataclass(frozen=True)
class SessionPlan:
    """What a worker's session runs: the claim, the completion and, with leases and retries
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", SessionMode(self.mode))  # as it arrives from another process

    @property
    def chains(self) -> bool:
        """A completion may carry the next claim: only in the basic mode, where the claim's
        transaction is the message's, and where the server connection is the worker's own."""
        return self.chain and self.mode == SessionMode.BASIC
