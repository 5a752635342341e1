"""Who the server's work was for: the queue's producer, its consumers, their empty claims, or the
simulation's own bookkeeping. A DBA sizes a server by the first two; the rest is what this tool
costs to measure them.

Two sources, each exact where it exists: the tool's own count of each role's transactions (every
run), and pg_stat_statements per statement (where it is installed), each statement given to the
role that sent it. A claim statement serves both consumers and empty claims: its calls that
returned a row are the consumers', the rest empty; its time and buffers are shared by calls, its
WAL is the consumers' (a claim that finds nothing locks and writes nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pgmq_sim.model.facts import StatementCounters


class Role(StrEnum):
    PRODUCER = "producer"  # its inserts
    CONSUMERS = "consumers"  # claims that found a message, completions, their transactions
    EMPTY_CLAIMS = "empty_claims"  # claims that found nothing
    TOOL = "tool"  # the run record, the journal, the housekeeper, the clocks read for latency
    BYSTANDER = "bystander"  # -bystander's own workload: a neighbour, not the queue


QUEUE_ROLES = (Role.PRODUCER, Role.CONSUMERS, Role.EMPTY_CLAIMS, Role.TOOL)
TRANSACTION_CONTROL = ("begin", "commit", "rollback", "savepoint", "release", "start transaction")


def statement_role(query: str) -> Role | None:
    """The role of a statement by its text as pg_stat_statements keeps it (PREPARE ... AS, a
    function call, or the statement). None: a claim, which two roles share."""
    lines = [line for line in query.strip().lower().splitlines() if not line.lstrip().startswith("--")]
    text = "\n".join(lines).lstrip()
    if "pgmq_sim_claim" in text:
        return None
    if "pgmq_sim_journal" in text or "pgmq_sim_logged" in text or "pgmq_sim_enqueued" in text:
        return Role.TOOL
    if any(name in text for name in ("pgmq_sim_complete", "pgmq_sim_take", "pgmq_sim_fail")):
        return Role.CONSUMERS
    if "pgmq_sim_bystander" in text:
        return Role.BYSTANDER
    if "pgmq_sim_enqueue" in text or text.startswith(("insert into msg_queue", "copy msg_queue")):
        return Role.PRODUCER
    if text.startswith(TRANSACTION_CONTROL):  # the consumers' transactions; the others autocommit
        return Role.CONSUMERS
    return Role.TOOL


@dataclass(frozen=True)
class RoleTransactions:
    """Transactions each role committed, as the tool counted them."""

    producer: int
    consumers: int  # completions, failed attempts, split mode's claims
    empty_claims: int
    tool: int  # run record, clocks read after a commit, housekeeping
    wakeups: int | None = None  # notifications the listener read (a transaction each, at most)

    def of(self, role: Role) -> int:
        return int(getattr(self, role.value))


@dataclass
class StatementShare:
    calls: float = 0.0
    exec_ms: float = 0.0
    blks_hit: float = 0.0
    blks_read: float = 0.0
    wal_bytes: float = 0.0

    def add(self, s: StatementCounters, share: float = 1.0, wal: bool = True) -> None:
        self.calls += s.calls * share
        self.exec_ms += s.exec_ms * share
        self.blks_hit += s.blks_hit * share
        self.blks_read += s.blks_read * share
        if wal:
            self.wal_bytes += s.wal_bytes


def statement_shares(statements: Iterable[StatementCounters]) -> dict[Role, StatementShare]:
    shares = {role: StatementShare() for role in Role}
    for s in statements:
        role = statement_role(s.query)
        if role is not None:
            shares[role].add(s)
            continue
        found = min(s.rows, s.calls)
        shares[Role.CONSUMERS].add(s, found / s.calls if s.calls else 0.0)
        shares[Role.EMPTY_CLAIMS].add(s, (s.calls - found) / s.calls if s.calls else 0.0, wal=False)
    return shares


def per_msg(value: float | None, messages: int, digits: int = 3) -> float | None:
    return None if value is None or messages <= 0 else round(value / messages, digits)


@dataclass(frozen=True)
class RoleCosts:
    """The server's cost per message, by role."""

    messages: int
    transactions: RoleTransactions | None
    statements: dict[Role, StatementShare] | None  # None: pg_stat_statements not read
    server_transactions: int | None  # pg_stat_database's commits and rollbacks, for the rest

    def transactions_per_msg(self, role: Role) -> float | None:
        t = self.transactions
        return None if t is None else per_msg(t.of(role), self.messages)

    def wal_per_msg(self, role: Role) -> float | None:
        return None if self.statements is None else per_msg(self.statements[role].wal_bytes, self.messages, 1)

    @property
    def unattributed_transactions(self) -> int | None:
        """What pg_stat_database counted beyond the roles' own counts: the listener's deliveries,
        autovacuum, other sessions on this database."""
        t = self.transactions
        if t is None or self.server_transactions is None:
            return None
        return self.server_transactions - sum(t.of(role) for role in QUEUE_ROLES)

    def as_json(self) -> dict[str, Any]:
        m = self.messages
        roles: dict[str, Any] = {}
        for role in (*QUEUE_ROLES, Role.BYSTANDER):
            entry: dict[str, Any] = {}
            if role != Role.BYSTANDER:
                entry["transactions_per_msg"] = self.transactions_per_msg(role)
            if self.statements is not None:
                s = self.statements[role]
                entry |= {
                    "calls_per_msg": per_msg(s.calls, m),
                    "exec_ms_per_msg": per_msg(s.exec_ms, m, 4),
                    "blks_hit_per_msg": per_msg(s.blks_hit, m),
                    "blks_read_per_msg": per_msg(s.blks_read, m),
                    "wal_bytes_per_msg": per_msg(s.wal_bytes, m, 1),
                }
            roles[role.value] = entry
        t = self.transactions
        roles["wakeups_per_msg"] = None if t is None else per_msg(t.wakeups, m)
        roles["unattributed_transactions_per_msg"] = per_msg(self.unattributed_transactions, m)
        roles["sources"] = {
            "transactions": "the tool's own count" if t is not None else None,
            "statements": "pg_stat_statements" if self.statements is not None else None,
        }
        return roles
