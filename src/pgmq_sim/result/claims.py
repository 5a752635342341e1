"""What the claims did and why they were made: the cost account.

Every claim is counted by its outcome (it took messages, or came back empty) and by why it was
made: the start (or a lost listener: nothing said whether messages waited), a notification (the
run's own, or one from a session outside the run, named by its backend pid and application), a
poll, the notify fallback, a completion claiming again (its group may hold the next), or a retry
after a statement the server ended or a lost connection. A process's workers share one `ClaimBook`,
written on their event loop; the result (`ClaimAccount`) splits the client's CPU and the server's
cost per message the same way.

The client's time for an empty claim is its own time on the loop, measured (db/wire LoopTime): the
worker's code from the wake-up that sent it, its round trips' sends and reads, and its code to its
next wait; only the loop's dispatch between them is not in it. So what the claims of a cause cost
the client is their count by their measured time, and the client's CPU without a cause is the run's
less that. The server's share of the empty claims (pg_stat_statements, where readable) is the same
statement answering the same nothing: shared by count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pgmq_sim.result.roles import Role, RoleCosts


class ClaimReason(StrEnum):
    START = "start"  # the worker's first claim, the claim gate reopening, a lost listener
    NOTIFIED = "notified"  # a notification's credit (whose: the sender's pid)
    POLL = "poll"  # the poll interval passed
    FALLBACK = "fallback"  # notify's fallback: no notification woke it
    COMPLETION = "completion"  # a completion claims again: its group (or the queue) may hold the next
    RETRY = "retry"  # after a statement the server ended (a cancel, a timeout) or a lost connection


REASONS = tuple(ClaimReason)
INDEX = {reason: i for i, reason in enumerate(REASONS)}


@dataclass
class SenderTally:
    """One backend's notifications on the run's channel, and the claims their credits woke."""

    notifications: int = 0
    told: int = 0  # the messages they said arrived ('type1:3' tells of 3)
    first_at: float = 0.0  # the listener's monotonic clock
    last_at: float = 0.0
    took: int = 0
    empty: int = 0
    read_s: float = 0.0  # the listener's time handling these notifications
    application: str | None = None  # None: not looked up yet, or gone when it was
    own: bool | None = None  # one of the run's sessions (its pid, or 'pgmq-sim ...'); None: not looked up yet


class ClaimBook:
    """One process's claims by reason and outcome, and the senders of the notifications it read.
    Written on the workers' loop only."""

    def __init__(self) -> None:
        self.took = [0] * len(REASONS)
        self.empty = [0] * len(REASONS)
        self.empty_s = [0.0] * len(REASONS)  # the measured empty claims' own time (actors/claim_reasons)
        self.empty_timed = [0] * len(REASONS)  # how many were measured (a sample of them)
        self.senders: dict[int, SenderTally] = {}
        self.own_pids: set[int] = set()  # the sessions of this process's workers, one per connection

    def sender(self, pid: int) -> SenderTally:
        tally = self.senders.get(pid)
        if tally is None:
            tally = self.senders[pid] = SenderTally()
        return tally

    def unnamed(self) -> list[int]:
        return [pid for pid, s in self.senders.items() if s.own is None]


@dataclass(frozen=True)
class Sender:
    """A session that notified the run's channel, as the account shows it."""

    pid: int
    application: str | None  # None: it ended before its application_name could be read
    own: bool  # one of the run's sessions: a writer's pid, or named 'pgmq-sim ...'
    notifications: int
    told: int
    per_s: float
    took: int
    empty: int
    read_s: float

    def as_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "application": self.application,
            "own": self.own,
            "notifications": self.notifications,
            "messages_told": self.told,
            "per_s": round(self.per_s, 1),
            "claims_took": self.took,  # the claims its credits woke, by outcome
            "claims_empty": self.empty,
            "listener_s": round(self.read_s, 4),
        }


@dataclass(frozen=True)
class ClaimAccount:
    """The run's claims by outcome and reason, the senders of its notifications, and what the claims
    a cause outside the run made cost the client and the server."""

    messages: int
    took: dict[str, int]
    empty: dict[str, int]
    empty_s: dict[str, float]  # the own time of the empty claims measured (`empty_timed` of them)
    senders: tuple[Sender, ...]  # the most notifications first
    client_us_per_msg: float | None  # the client's CPU per message, as measured (logins apart)
    server_empty_ms: float | None  # the empty claims' statement time on the server (pg_stat_statements)
    server_empty_blocks: float | None
    channel: str = ""  # the run's channel, to name in the fix
    empty_timed: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        books: list[ClaimBook],
        messages: int,
        elapsed_s: float,
        client_us_per_msg: float | None,
        roles: RoleCosts | None,
        channel: str = "",
        own_pids: frozenset[int] = frozenset(),  # the producer's sessions
    ) -> ClaimAccount:
        took = dict.fromkeys(REASONS, 0)
        empty = dict.fromkeys(REASONS, 0)
        empty_s = dict.fromkeys(REASONS, 0.0)
        timed = dict.fromkeys(REASONS, 0)
        merged: dict[int, SenderTally] = {}
        ours = own_pids.union(*(book.own_pids for book in books))  # a writer gone before it was named
        for book in books:
            for reason, i in INDEX.items():
                took[reason] += book.took[i]
                empty[reason] += book.empty[i]
                empty_s[reason] += book.empty_s[i]
                timed[reason] += book.empty_timed[i]
            for pid, s in book.senders.items():
                m = merged.setdefault(pid, SenderTally(first_at=s.first_at, last_at=s.last_at))
                m.notifications += s.notifications
                m.told += s.told
                m.took, m.empty = m.took + s.took, m.empty + s.empty
                m.read_s += s.read_s
                m.first_at, m.last_at = min(m.first_at, s.first_at), max(m.last_at, s.last_at)
                m.application = m.application if m.application is not None else s.application
                m.own = m.own if m.own is not None else s.own
        senders = tuple(
            sorted(
                (
                    Sender(
                        pid,
                        s.application,
                        pid in ours or bool(s.own),
                        s.notifications,
                        s.told,
                        s.notifications / max(1.0, s.last_at - s.first_at, min(elapsed_s, 1.0)),
                        s.took,
                        s.empty,
                        s.read_s,
                    )
                    for pid, s in merged.items()
                ),
                key=lambda s: -s.notifications,
            )
        )
        shares = roles.statements if roles is not None else None
        server = shares[Role.EMPTY_CLAIMS] if shares is not None else None
        return cls(
            messages,
            {r.value: n for r, n in took.items()},
            {r.value: n for r, n in empty.items()},
            {r.value: s for r, s in empty_s.items()},
            senders,
            client_us_per_msg,
            None if server is None else server.exec_ms,
            None if server is None else server.blks_hit + server.blks_read,
            channel,
            {r.value: n for r, n in timed.items()},
        )

    @property
    def claims(self) -> int:
        return sum(self.took.values()) + self.empty_claims

    @property
    def empty_claims(self) -> int:
        return sum(self.empty.values())

    @property
    def outside(self) -> tuple[Sender, ...]:
        """The senders outside the run, the most claims woken first."""
        return tuple(sorted((s for s in self.senders if not s.own), key=lambda s: -(s.took + s.empty)))

    @property
    def outside_empty(self) -> int:
        """The empty claims the senders outside the run made. Credits are alike: a claim an outside
        credit woke that took a message took one the run's own notification told of, whose claim
        then found it gone. So every claim their credits woke is one too many (up to the empty
        claims that followed a notification), whichever claim came back empty."""
        woken = sum(s.took + s.empty for s in self.outside)
        return min(self.empty[ClaimReason.NOTIFIED], woken)

    def per_msg(self, value: float) -> float | None:
        return None if self.messages <= 0 else value / self.messages

    def empty_each_s(self, reason: str) -> float | None:
        """An empty claim's own CPU time on the client for `reason`, the mean of those measured
        (None: none was)."""
        timed = self.empty_timed.get(reason, 0)
        return self.empty_s[reason] / timed if timed else None

    def empty_client_s(self, reason: str) -> float | None:
        """What the empty claims made for `reason` cost the client: their count by their measured time."""
        each = self.empty_each_s(reason)
        return None if each is None else self.empty[reason] * each

    @property
    def client_outside_s(self) -> float | None:
        """The client's CPU for what the senders outside the run caused: their empty claims, each at
        the notified empty claims' measured own time, and the listener's reading of their
        notifications (None: no such claim was measured)."""
        each = self.empty_each_s(ClaimReason.NOTIFIED) if self.outside_empty else 0.0
        return None if each is None else self.outside_empty * each + sum(s.read_s for s in self.outside)

    @property
    def client_us_per_msg_without(self) -> float | None:
        """The client's CPU per message less what the claims the senders outside the run caused cost
        it, as measured claim by claim."""
        outside = self.client_outside_s
        if self.client_us_per_msg is None or self.messages <= 0 or outside is None:
            return None
        return max(0.0, self.client_us_per_msg - outside * 1e6 / self.messages)

    @property
    def server_outside_ms(self) -> float | None:
        """The server's statement time for the empty claims the senders outside the run caused."""
        if self.server_empty_ms is None or not self.empty_claims:
            return None
        return self.server_empty_ms * self.outside_empty / self.empty_claims

    def costs_by_reason(self) -> dict[str, dict[str, float | None]]:
        """Per message, each reason's empty claims and what they cost: the client's time on the loop
        (µs) and the server's statement time (µs) and buffers, the empty claims' share by count."""
        empty, out = self.empty_claims, {}
        for reason, n in self.empty.items():
            share = n / empty if empty else 0.0
            client_s = self.empty_client_s(reason) if n else 0.0
            server_ms, blocks = self.server_empty_ms, self.server_empty_blocks
            out[reason] = {
                "empty": _round(self.per_msg(n)),
                "client_us": None if client_s is None else _round(self.per_msg(client_s * 1e6), 2),
                "server_statement_us": None
                if server_ms is None
                else _round(self.per_msg(server_ms * share * 1000), 2),
                "server_blocks": None if blocks is None else _round(self.per_msg(blocks * share), 2),
            }
        return out

    def as_json(self) -> dict[str, Any]:
        outside, outside_s = self.outside_empty, self.client_outside_s
        return {
            "claims": self.claims,
            "took": self.took,
            "empty": self.empty,
            "empty_timed": self.empty_timed,  # of the empty claims, those whose own time was measured
            "empty_notified_by": {
                "own": self.empty[ClaimReason.NOTIFIED] - outside,
                "outside": outside,
            },
            "empty_per_msg": _round(self.per_msg(self.empty_claims)),
            "empty_cost_per_msg": self.costs_by_reason(),
            "senders": [s.as_json() for s in self.senders],
            "without_outside": {
                "empty_per_msg": _round(self.per_msg(self.empty_claims - self.outside_empty)),
                "client_cpu_us_per_msg": _round(self.client_us_per_msg_without, 1),
                "client_us_outside_per_msg": _round(self.per_msg((outside_s or 0.0) * 1e6), 1)
                if outside_s is not None
                else None,
                "server_statement_ms_outside": _round(self.server_outside_ms, 3),
            },
        }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
